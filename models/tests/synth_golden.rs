//! The `zinc synth --tiny` file of every preset against llama.cpp (data/synth_golden.json, made
//! by data/gen_synth_golden.py). Each file is written again here through the synth library
//! (seed 0; its hash must match the one llama.cpp read) and checked for:
//!
//! - tokens: zinc's ids for every prompt equal llama.cpp's, plain and with BOS/special tokens;
//! - logits: zinc's forward on the quantized file (dequantized to f32 at load) against llama.cpp
//!   on an F32 copy of it (F32 KV cache), which compute the same function. Compared: the first
//!   32 logits and the top 16 at 8 positions of a 72-token sequence (past the 64-token window),
//!   and the argmax wherever llama.cpp's top two are further apart than the tolerance;
//! - llama.cpp also loaded and ran the quantized file itself, with finite logits.

mod common;

use common::{compare_top, golden, ids, max_abs_diff};
use serde_json::Value;
use zinc_models::forward::Model;
use zinc_models::gguf::Gguf;
use zinc_models::synth::{preset, presets, Arch, Synth};
use zinc_models::tokenizer::{Tokenizer, Vocab};

/// Bound on |Δlogit| over the compared entries (logits within ±1.5: random weights give flat
/// outputs). Measured maxima: llama, qwen3, qwen3moe, qwen35, qwen35moe 5e-6..6e-6; gemma3 5.0e-4
/// and gemma4 5.4e-3 (26b-a4b) / 6.5e-3 (31b), from llama.cpp's f16 GELU table. Bugs put in
/// on purpose fail: a sliding window one token short (0.09 gemma3, 0.24 gemma4), the SWA rope
/// base taken from the global one (0.013 gemma3, 0.19 gemma4), the qwen35 attention gate left
/// out (0.07). (Gemma 4's `layer_output_scale` is 1 in synth files: cpu_forward.rs checks it.)
fn tolerance(arch: Arch) -> f32 {
    match arch {
        Arch::Gemma3 => 5e-3,
        Arch::Gemma4 => 2e-2,
        _ => 1e-4,
    }
}

/// FNV-1a, 64-bit: the file's identity, as data/gen_synth_golden.py computes it.
fn fnv1a64(bytes: &[u8]) -> String {
    let hash = bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("{hash:016x}")
}

/// The file `zinc synth --preset NAME --tiny` writes (seed 0), general.name included.
fn tiny_file(name: &str) -> Vec<u8> {
    let p = preset(name).expect("known preset");
    let synth = Synth::new(&format!("{} (synthetic, tiny)", p.model), p.config.tiny()).unwrap();
    synth.write(0, Vec::new(), &mut |_, _| {}).unwrap()
}

fn check_tokens(name: &str, gguf: &Gguf, golden: &Value) {
    let tok = Tokenizer::new(Vocab::from_gguf(gguf).unwrap()).unwrap();
    for case in golden["cases"].as_array().unwrap() {
        let (text, special) = (
            case["text"].as_str().unwrap(),
            case["special"].as_bool().unwrap(),
        );
        assert_eq!(
            tok.encode(text, special, special),
            ids(&case["ids"]),
            "{name}: {text:?} (special: {special})"
        );
    }
}

fn check(name: &str) {
    let golden = &golden("synth_golden.json")["presets"][name];
    let bytes = tiny_file(name);
    assert_eq!(
        fnv1a64(&bytes),
        golden["fnv1a64"].as_str().unwrap(),
        "{name}: synth writes another file than llama.cpp read: rerun data/gen_synth_golden.py"
    );
    let quantized = &golden["quantized"];
    assert!(quantized["loaded"].as_bool().unwrap() && quantized["finite"].as_bool().unwrap());

    let gguf = Gguf::from_bytes(bytes).unwrap();
    check_tokens(name, &gguf, golden);

    let tol = tolerance(preset(name).unwrap().config.arch);
    let mut model = Model::from_gguf(&gguf).unwrap();
    let n_vocab = model.config().n_vocab;
    let tokens = ids(&golden["tokens"]);
    let logits = model.forward_all(&tokens, 0).unwrap();
    let mut max_diff = 0f32;
    for at in golden["logits"].as_array().unwrap() {
        let pos = at["position"].as_u64().unwrap() as usize;
        let row = &logits[pos * n_vocab..(pos + 1) * n_vocab];
        let head: Vec<f32> = at["head"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap() as f32)
            .collect();
        let what = format!("{name} position {pos}");
        let diff = max_abs_diff(&row[..head.len()], &head);
        assert!(diff < tol, "{what}: first logits differ by {diff}");
        max_diff = max_diff
            .max(diff)
            .max(compare_top(&what, row, &at["top"], tol));
    }
    println!("{name}: max |Δlogit| vs llama.cpp (F32 copy) {max_diff:.1e}");
}

#[test]
fn every_preset_has_a_golden() {
    let golden = golden("synth_golden.json");
    for p in presets() {
        assert!(golden["presets"].get(p.name).is_some(), "{}", p.name);
    }
}

#[test]
fn llama3_8b() {
    check("llama3-8b");
}

#[test]
fn qwen3_8b() {
    check("qwen3-8b");
}

#[test]
fn qwen3_30b_a3b() {
    check("qwen3-30b-a3b");
}

#[test]
fn qwen35_9b() {
    check("qwen35-9b");
}

#[test]
fn qwen35_27b() {
    check("qwen35-27b");
}

#[test]
fn qwen35_35b_a3b() {
    check("qwen35-35b-a3b");
}

#[test]
fn gemma3_27b() {
    check("gemma3-27b");
}

#[test]
fn gemma4_31b() {
    check("gemma4-31b");
}

#[test]
fn gemma4_26b_a4b() {
    check("gemma4-26b-a4b");
}
