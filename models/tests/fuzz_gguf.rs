//! Mutation fuzzing of the GGUF reader: corrupted files must give errors, never panics, huge
//! allocations or out-of-bounds reads.

use proptest::prelude::*;
use zinc_models::gguf::{write, Array, Gguf, TensorSpec, Value};
use zinc_models::quant::{quantize_row, GgmlType};
use zinc_models::summary::summary;

/// A small valid file with strings, arrays (nested too) and tensors of several types.
fn base_file() -> Vec<u8> {
    let metadata = vec![
        (
            "general.architecture".to_string(),
            Value::String("llama".into()),
        ),
        ("general.alignment".to_string(), Value::U32(32)),
        ("llama.block_count".to_string(), Value::U32(1)),
        (
            "llama.attention.head_count".to_string(),
            Value::Array(Array::I32(vec![4, 0])),
        ),
        (
            "tokenizer.ggml.tokens".to_string(),
            Value::Array(Array::String(vec!["<s>".into(), "a".into(), "b".into()])),
        ),
        (
            "tokenizer.ggml.scores".to_string(),
            Value::Array(Array::F32(vec![0.0, -1.0, -2.0])),
        ),
        (
            "nested".to_string(),
            Value::Array(Array::Array(vec![
                Array::U64(vec![1, 2]),
                Array::Bool(vec![true]),
            ])),
        ),
        (
            "tokenizer.chat_template".to_string(),
            Value::String("{% for m in messages %}\n{{ m }}{% endfor %}".into()),
        ),
    ];
    let tensor = |name: &str, dims: &[u64], ty: GgmlType| {
        let n: u64 = dims.iter().product();
        let x: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
        let mut data = vec![0; (n as usize) / ty.block_size() * ty.type_size()];
        quantize_row(ty, &x, &mut data).unwrap();
        (
            TensorSpec {
                name: name.into(),
                dims: dims.to_vec(),
                ty,
            },
            data,
        )
    };
    let tensors = [
        tensor("token_embd.weight", &[256, 2], GgmlType::Q4_K),
        tensor("blk.0.ffn_down.weight", &[256], GgmlType::Q6_K),
        tensor("blk.0.attn_q.weight", &[32, 2], GgmlType::Q8_0),
        tensor("output_norm.weight", &[7], GgmlType::F32),
    ];
    let borrowed: Vec<(TensorSpec, &[u8])> = tensors
        .iter()
        .map(|(s, d)| (s.clone(), d.as_slice()))
        .collect();
    write(Vec::new(), &metadata, &borrowed).unwrap()
}

/// Parses and, when that succeeds, uses everything a model loader would touch.
fn exercise(bytes: Vec<u8>) {
    let Ok(g) = Gguf::from_bytes(bytes) else {
        return;
    };
    let _ = summary(&g);
    let _ = g.get_str_array("tokenizer.ggml.tokens");
    for t in g.tensors() {
        if let Ok(values) = g.tensor_f32(&t.name) {
            assert_eq!(values.len() as u64, t.n_elements());
        }
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    /// Sets the byte at position (mod the file length).
    Byte(usize, u8),
    /// Writes a little-endian u64 at position: counts, lengths, dims and offsets live in these.
    Word(usize, u64),
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let word = prop_oneof![
        Just(0u64),
        Just(1),
        Just(u64::MAX),
        Just(u64::MAX / 2),
        Just(1 << 32),
        0u64..4096,
        any::<u64>()
    ];
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(at, b)| Mutation::Byte(at, b)),
        (any::<usize>(), word).prop_map(|(at, w)| Mutation::Word(at, w)),
        any::<usize>().prop_map(Mutation::Truncate),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    if bytes.is_empty() {
        return;
    }
    match *m {
        Mutation::Byte(at, b) => {
            let at = at % bytes.len();
            bytes[at] = b;
        }
        Mutation::Word(at, w) => {
            let at = at % bytes.len();
            let end = (at + 8).min(bytes.len());
            bytes[at..end].copy_from_slice(&w.to_le_bytes()[..end - at]);
        }
        Mutation::Truncate(len) => bytes.truncate(len % bytes.len()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10_000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn mutated_files_never_panic(mutations in prop::collection::vec(mutation(), 1..6)) {
        let mut bytes = base_file();
        for m in &mutations {
            apply(&mut bytes, m);
        }
        exercise(bytes);
    }
}

#[test]
fn base_file_is_valid() {
    let g = Gguf::from_bytes(base_file()).unwrap();
    assert_eq!(g.tensors().len(), 4);
    for t in g.tensors() {
        assert!(g.tensor_f32(&t.name).unwrap().iter().all(|v| v.is_finite()));
    }
}
