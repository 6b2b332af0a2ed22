//! The zinc side of data/check_real_width.py: reduced-depth real-width synth files against
//! llama.cpp's logits on their F32 copies. Ignored (files of several GB, not in the repository);
//! the script runs it with ZINC_REAL_WIDTH_DIR set, in release:
//!
//!     ZINC_REAL_WIDTH_DIR=.models/real-width \
//!         cargo test --release -p zinc-models --test real_width -- --ignored --nocapture
//!
//! Prints one docs/GOLDEN.md table row per preset.

mod common;

use std::path::PathBuf;

use common::ids;
use serde_json::Value;
use zinc_models::forward::Model;
use zinc_models::sampler::argmax;
use zinc_models::synth::{preset, Arch};

/// Bound on |Δlogit| over every logit of every position (logits within ±8, Gemma's up to 70).
/// Measured maxima: 5e-6..3.3e-5 without GELU (2 layers, 4 for Qwen 3.5); gemma3 1.5e-3 (2
/// layers) and 2.9e-3 (6, a global layer included); gemma4 3.2e-3 (2) and 2.9e-2 (31b, 6
/// layers). Gemma's come from llama.cpp's f16 GELU table, which Gemma 4's unscaled attention
/// (scale 1 on normalized 512-wide heads) amplifies: emulating the table in zinc brings the
/// 6-layer gemma4 figure to 5.6e-3. See docs/GOLDEN.md.
fn tolerance(arch: Arch) -> f32 {
    match arch {
        Arch::Gemma3 => 2e-2,
        Arch::Gemma4 => 6e-2,
        _ => 5e-4,
    }
}

/// llama.cpp's logits as the script wrote them: little-endian f32, one row per position.
fn read_logits(path: PathBuf) -> Vec<f32> {
    std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

/// Compares one preset, printing its table row before asserting.
fn check(dir: &std::path::Path, record: &Value) {
    let name = record["preset"].as_str().unwrap();
    let tokens = ids(&record["tokens"]);
    let expected = read_logits(dir.join(format!("{name}.logits")));
    let mut model = Model::load(dir.join(format!("{name}.gguf"))).unwrap();
    let logits = model.forward_all(&tokens, 0).unwrap();
    drop(model);
    let n_vocab = record["n_vocab"].as_u64().unwrap() as usize;
    assert_eq!(logits.len(), expected.len(), "{name}: logits");

    let tol = tolerance(preset(name).unwrap().config.arch);
    let (mut max_diff, mut same_argmax, mut wrong_greedy) = (0f32, 0, Vec::new());
    for (pos, (got, want)) in logits
        .chunks_exact(n_vocab)
        .zip(expected.chunks_exact(n_vocab))
        .enumerate()
    {
        let diff = common::max_abs_diff(got, want);
        max_diff = max_diff.max(diff);
        let best = argmax(want);
        if argmax(got) == best {
            same_argmax += 1;
        } else {
            // Only a near tie may differ: llama.cpp's runner-up within the tolerance.
            let mut sorted = want.to_vec();
            sorted.sort_by(|a, b| b.total_cmp(a));
            if sorted[0] - sorted[1] >= tol {
                wrong_greedy.push(pos);
            }
        }
    }
    let q = &record["quantized"];
    let range = &record["logit_range"];
    println!(
        "| {name} | {} | {n_vocab} | {:.2}..{:.2} | {max_diff:.1e} | {tol:.0e} | {same_argmax}/{} | {} | {:.3} |",
        record["layers"],
        range[0].as_f64().unwrap(),
        range[1].as_f64().unwrap(),
        tokens.len(),
        if q["finite"].as_bool().unwrap() { "yes" } else { "NO" },
        q["max_abs_diff_vs_f32"].as_f64().unwrap(),
    );
    assert!(max_diff < tol, "{name}: logits differ by {max_diff}");
    assert!(
        wrong_greedy.is_empty(),
        "{name}: other greedy tokens at positions {wrong_greedy:?}"
    );
}

#[test]
#[ignore = "needs data/check_real_width.py's files (several GB)"]
fn real_width_presets_match_llama_cpp() {
    let dir = PathBuf::from(std::env::var("ZINC_REAL_WIDTH_DIR").expect("ZINC_REAL_WIDTH_DIR"));
    let mut records: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    records.sort();
    assert!(!records.is_empty(), "no records in {}", dir.display());
    println!("| preset | layers | n_vocab | logits | max Δ | tol | greedy | llama.cpp Q loads, finite | Q vs F32 |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for path in records {
        let record: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        check(&dir, &record);
    }
}
