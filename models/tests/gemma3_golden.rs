//! The CPU forward pass on the real Gemma 3 270M Q4_K_M against llama.cpp (CPU):
//!
//! - data/gemma3_270m_f32_golden.json (gen_gemma3_f32_logits.py): llama.cpp on the same weights
//!   dequantized to F32, with an F32 KV cache. Measured max |Δlogit| over the compared entries:
//!   2.5e-3 (llama.cpp's GELU is an f16 lookup table; ours is exact), so the bound is 1e-2.
//! - data/gemma3_270m_golden.json (gen_gemma3_logits.py): llama.cpp on the Q4_K_M file as users
//!   run it, which quantizes activations to Q8 and keeps K/V in f16. Measured max |Δlogit|:
//!   0.53 (at the BOS position; 0.19 at the last prompt position) on logits of 14-23, so the
//!   bound is 0.75.
//!
//! Both must give the same greedy tokens, and the same argmax wherever llama.cpp's top two are
//! further apart than the tolerance. Prints "skipped: ..." without the model file unless
//! ZINC_FETCH_MODELS=1 lets it fetch. About 50 s in a debug build, 3 s in release.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use zinc_models::forward::Model;
use zinc_models::sampler::argmax;

const F32_TOLERANCE: f32 = 1e-2;
const Q8_TOLERANCE: f32 = 0.75;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The model, fetched when ZINC_FETCH_MODELS=1; `None` (after saying why) when it is absent.
fn model_path() -> Option<PathBuf> {
    let path = root().join(".models/gemma-3-270m-q4_k_m.gguf");
    if !path.exists() && std::env::var("ZINC_FETCH_MODELS").as_deref() == Ok("1") {
        let status = Command::new("bash")
            .arg("scripts/fetch-gemma3-270m.sh")
            .current_dir(root())
            .status()
            .expect("cannot run scripts/fetch-gemma3-270m.sh");
        assert!(status.success(), "scripts/fetch-gemma3-270m.sh failed");
    }
    if path.exists() {
        Some(path)
    } else {
        println!(
            "skipped: {} is absent (ZINC_FETCH_MODELS=1 fetches it)",
            path.display()
        );
        None
    }
}

fn golden(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_u64().unwrap() as u32)
        .collect()
}

/// Checks `logits` against llama.cpp's `[[id, logit], ...]` (best first): every listed logit
/// within `tol`, and the same argmax unless llama.cpp's top two are within `tol` of each other.
/// Returns the largest difference.
fn compare(what: &str, logits: &[f32], top: &Value, tol: f32) -> f32 {
    let top = top.as_array().unwrap();
    let mut max_diff = 0f32;
    for entry in top {
        let (id, expected) = (
            entry[0].as_u64().unwrap() as usize,
            entry[1].as_f64().unwrap() as f32,
        );
        let diff = (logits[id] - expected).abs();
        assert!(
            diff < tol,
            "{what}: token {id} logit {} vs llama.cpp {expected}",
            logits[id]
        );
        max_diff = max_diff.max(diff);
    }
    let gap = top[0][1].as_f64().unwrap() - top[1][1].as_f64().unwrap();
    if gap > f64::from(tol) {
        assert_eq!(
            argmax(logits) as u64,
            top[0][0].as_u64().unwrap(),
            "{what}: argmax"
        );
    }
    max_diff
}

#[test]
fn gemma3_270m_matches_llama_cpp() {
    let Some(path) = model_path() else { return };
    let (f32_golden, q8_golden) = (
        golden("gemma3_270m_f32_golden.json"),
        golden("gemma3_270m_golden.json"),
    );
    let prompt = ids(&f32_golden["prompt_ids"]);
    assert_eq!(prompt, ids(&q8_golden["prompt_ids"]));
    let greedy = ids(&f32_golden["greedy_ids"]);
    assert_eq!(greedy, ids(&q8_golden["greedy_ids"]));

    let mut model = Model::load(path).unwrap();
    let n_vocab = model.config().n_vocab;
    assert_eq!(n_vocab as u64, f32_golden["n_vocab"].as_u64().unwrap());

    let all = model.forward_all(&prompt, 0).unwrap();
    let rows: Vec<&[f32]> = all.chunks_exact(n_vocab).collect();
    let (mut f32_diff, mut q8_diff) = (0f32, 0f32);
    for (i, row) in rows.iter().enumerate() {
        let what = format!("prompt position {i}");
        f32_diff = f32_diff.max(compare(
            &what,
            row,
            &f32_golden["top5_per_position"][i],
            F32_TOLERANCE,
        ));
        q8_diff = q8_diff.max(compare(
            &what,
            row,
            &q8_golden["top5_per_position"][i],
            Q8_TOLERANCE,
        ));
    }
    let last = rows[rows.len() - 1];
    f32_diff = f32_diff.max(compare(
        "last position",
        last,
        &f32_golden["last_top20"],
        F32_TOLERANCE,
    ));
    q8_diff = q8_diff.max(compare(
        "last position",
        last,
        &q8_golden["last_top20"],
        Q8_TOLERANCE,
    ));

    // Greedy decoding, one token at a time through the KV cache.
    let mut next = argmax(last);
    for (step, &expected) in greedy.iter().enumerate() {
        assert_eq!(next, expected, "greedy token {step}");
        let logits = model.forward(&[next], model.position()).unwrap();
        let what = format!("greedy step {step}");
        f32_diff = f32_diff.max(compare(
            &what,
            &logits,
            &f32_golden["top5_per_greedy_step"][step],
            F32_TOLERANCE,
        ));
        next = argmax(&logits);
    }
    println!(
        "max |Δlogit| vs llama.cpp: {f32_diff:.2e} (F32 weights), {q8_diff:.3} (Q4_K_M as run)"
    );
}
