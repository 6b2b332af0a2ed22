//! `zinc synth`: every preset's tiny model reads back with zinc's GGUF reader with the planned
//! names, shapes and types, dequantizes to finite weights of a realistic scale, carries a
//! vocabulary zinc's tokenizer accepts, and is byte-identical for a seed. Full-size layouts are
//! checked against llama.cpp's names, its Q4_K_M rules and the sizes of the anchor files.

use zinc_models::gguf::Gguf;
use zinc_models::quant::GgmlType;
use zinc_models::synth::{preset, presets, Synth, WEIGHT_STD};
use zinc_models::tokenizer::{Tokenizer, Vocab};

fn tiny(name: &str) -> Synth {
    let p = preset(name).expect("known preset");
    Synth::new(name, p.config.tiny()).unwrap()
}

fn write(synth: &Synth, seed: u64) -> Vec<u8> {
    synth.write(seed, Vec::new(), &mut |_, _| {}).unwrap()
}

fn full(name: &str) -> Synth {
    Synth::new(name, preset(name).expect("known preset").config).unwrap()
}

fn type_of(synth: &Synth, name: &str) -> Option<(GgmlType, Vec<u64>)> {
    synth
        .tensors
        .iter()
        .find(|t| t.spec.name == name)
        .map(|t| (t.spec.ty, t.spec.dims.clone()))
}

#[test]
fn tiny_files_read_back_as_planned() {
    for p in presets() {
        reads_back_as_planned(&tiny(p.name));
    }
}

/// Q5_K blocks from the generator, as a Q5_K_M file holds them.
#[test]
fn q5_k_weights_read_back_as_planned() {
    let mut synth = tiny("llama3-8b");
    synth.retype(GgmlType::Q4_K, GgmlType::Q5_K).unwrap();
    assert!(synth.tensors.iter().any(|t| t.spec.ty == GgmlType::Q5_K));
    reads_back_as_planned(&synth);
}

/// `synth` written and read back: the planned architecture, names, shapes and types, finite
/// weights, and quantized ones centred with about the target spread.
fn reads_back_as_planned(synth: &Synth) {
    let bytes = write(synth, 1);
    let gguf = Gguf::from_bytes(bytes).unwrap();
    assert_eq!(gguf.architecture().unwrap(), synth.config.arch.name());
    assert_eq!(gguf.tensors().len(), synth.tensors.len());
    for t in &synth.tensors {
        let info = gguf.tensor(&t.spec.name).unwrap();
        assert_eq!(info.dims, t.spec.dims, "{}", t.spec.name);
        assert_eq!(info.ggml_type().unwrap(), t.spec.ty, "{}", t.spec.name);
        let values = gguf.tensor_f32(&t.spec.name).unwrap();
        assert!(values.iter().all(|v| v.is_finite()), "{}", t.spec.name);
        let n = values.len() as f32;
        let mean = values.iter().sum::<f32>() / n;
        let std = (values.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / n).sqrt();
        if t.spec.ty != GgmlType::F32 {
            // Quantized weights: centred, with about the target spread.
            assert!(
                mean.abs() < 0.2 * WEIGHT_STD,
                "{}: mean {mean}",
                t.spec.name
            );
            let ratio = std / WEIGHT_STD;
            assert!((0.8..1.25).contains(&ratio), "{}: std {std}", t.spec.name);
        } else if t.spec.name.ends_with("norm.weight") {
            assert!((mean - 1.0).abs() < 0.05, "{}: mean {mean}", t.spec.name);
        }
    }
}

#[test]
fn same_seed_same_bytes() {
    let synth = tiny("qwen35-35b-a3b");
    let a = write(&synth, 7);
    assert_eq!(a, write(&synth, 7));
    assert_ne!(a, write(&synth, 8));
}

fn tokenizer(gguf: &Gguf) -> Tokenizer {
    Tokenizer::new(Vocab::from_gguf(gguf).unwrap()).unwrap()
}

#[test]
fn vocabularies_tokenize_and_round_trip() {
    let text = "the quick brown fox, 12 jumps!\n";
    for p in presets() {
        let gguf = Gguf::from_bytes(write(&tiny(p.name), 0)).unwrap();
        let n_vocab = gguf.tensor("token_embd.weight").unwrap().dims[1];
        let tok = tokenizer(&gguf);
        assert_eq!(tok.n_tokens() as u64, n_vocab, "{}", p.name);
        let ids = tok.encode(text, false, false);
        // Merged tokens, not one per byte.
        assert!(ids.len() < text.len(), "{}: {ids:?}", p.name);
        assert_eq!(tok.decode(&ids), text, "{}", p.name);
    }
    let gguf = Gguf::from_bytes(write(&tiny("llama3-8b"), 0)).unwrap();
    let tok = tokenizer(&gguf);
    assert_eq!(
        tok.token_text(tok.bos().unwrap()),
        Some("<|begin_of_text|>")
    );
}

/// File sizes of llama.cpp's Q4_K_M files of these shapes (shared/ANCHORS.md), in GiB.
#[test]
fn full_sizes_match_the_anchor_files() {
    let anchors = [
        ("llama3-8b", 4.58),
        ("qwen3-8b", 4.68),
        ("gemma3-27b", 15.40),
        ("gemma4-31b", 17.39),
        ("qwen3-30b-a3b", 17.28),
        ("gemma4-26b-a4b", 15.63),
        ("qwen35-9b", 5.23),
        ("qwen35-35b-a3b", 19.70),
    ];
    for (name, gib) in anchors {
        let size = full(name).data_size() as f64 / (1u64 << 30) as f64;
        assert!((size - gib).abs() < 0.006, "{name}: {size:.3} GiB");
    }
}

#[test]
fn full_layouts_follow_llama_cpp() {
    use GgmlType::*;
    let llama = full("llama3-8b");
    // Q4_K_M: attn_v and ffn_down get Q6_K in the first and last eighth and every third layer.
    assert_eq!(
        type_of(&llama, "blk.0.attn_v.weight"),
        Some((Q6_K, vec![4096, 1024]))
    );
    assert_eq!(type_of(&llama, "blk.4.attn_v.weight").unwrap().0, Q4_K);
    assert_eq!(
        type_of(&llama, "blk.6.ffn_down.weight"),
        Some((Q6_K, vec![14336, 4096]))
    );
    assert_eq!(type_of(&llama, "blk.7.ffn_down.weight").unwrap().0, Q4_K);
    assert_eq!(type_of(&llama, "token_embd.weight").unwrap().0, Q4_K);
    assert_eq!(
        type_of(&llama, "output.weight"),
        Some((Q6_K, vec![4096, 128_256]))
    );
    assert_eq!(
        type_of(&llama, "blk.0.attn_norm.weight"),
        Some((F32, vec![4096]))
    );

    // Tied embeddings take the output's type.
    let gemma3 = full("gemma3-27b");
    assert_eq!(type_of(&gemma3, "token_embd.weight").unwrap().0, Q6_K);
    assert!(type_of(&gemma3, "output.weight").is_none());
    assert!(type_of(&gemma3, "blk.61.post_ffw_norm.weight").is_some());

    let moe = full("qwen3-30b-a3b");
    assert_eq!(
        type_of(&moe, "blk.0.ffn_down_exps.weight"),
        Some((Q6_K, vec![768, 2048, 128]))
    );
    assert_eq!(
        type_of(&moe, "blk.0.ffn_gate_inp.weight"),
        Some((F32, vec![2048, 128]))
    );

    let qwen35 = full("qwen35-9b");
    // Delta-net layers 0-2, full attention at 3; the fused qkv counts as attention-V.
    assert_eq!(
        type_of(&qwen35, "blk.0.attn_qkv.weight"),
        Some((Q6_K, vec![4096, 8192]))
    );
    assert_eq!(
        type_of(&qwen35, "blk.0.ssm_conv1d.weight"),
        Some((F32, vec![4, 8192]))
    );
    assert_eq!(type_of(&qwen35, "blk.0.ssm_a"), Some((F32, vec![32])));
    assert_eq!(type_of(&qwen35, "blk.0.ssm_dt.bias"), Some((F32, vec![32])));
    assert_eq!(
        type_of(&qwen35, "blk.0.ssm_out.weight"),
        Some((Q4_K, vec![4096, 4096]))
    );
    assert_eq!(
        type_of(&qwen35, "blk.3.attn_q.weight"),
        Some((Q4_K, vec![4096, 8192]))
    );
    assert!(type_of(&qwen35, "blk.3.attn_qkv.weight").is_none());

    let gemma4 = full("gemma4-26b-a4b");
    // 704- and 2112-wide rows are not whole K-quant blocks: Q4_K -> Q5_0, Q6_K -> Q8_0.
    assert_eq!(
        type_of(&gemma4, "blk.0.ffn_down_exps.weight"),
        Some((Q8_0, vec![704, 2816, 128]))
    );
    assert_eq!(
        type_of(&gemma4, "blk.4.ffn_down_exps.weight").unwrap().0,
        Q5_0
    );
    assert_eq!(type_of(&gemma4, "blk.4.ffn_down.weight").unwrap().0, Q5_0);
    assert_eq!(
        type_of(&gemma4, "blk.0.ffn_gate_up_exps.weight"),
        Some((Q4_K, vec![2816, 1408, 128]))
    );
    // Global layers (every sixth) are wider and have no attn_v.
    assert_eq!(
        type_of(&gemma4, "blk.5.attn_q.weight").unwrap().1,
        vec![2816, 8192]
    );
    assert!(type_of(&gemma4, "blk.5.attn_v.weight").is_none());
    assert_eq!(
        type_of(&gemma4, "rope_freqs.weight"),
        Some((F32, vec![256]))
    );
}
