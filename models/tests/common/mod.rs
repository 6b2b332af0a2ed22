//! Helpers shared by the golden tests: where the reference data lives, fetching it, and
//! comparing logits with llama.cpp's.

// Each test binary compiles this module and uses a part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use serde_json::Value;
use zinc_models::sampler::argmax;

/// The llama-cpp-python release whose vendored llama.cpp is the reference.
pub const LLAMA_CPP_PYTHON: &str = "0.3.36";

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Downloads and builds outside the repository's tracked files: `$ZINC_CACHE`, by default
/// `.cache/` in the repository (as in scripts/build-llama-cpp.sh).
pub fn cache_dir() -> PathBuf {
    std::env::var_os("ZINC_CACHE").map_or_else(|| root().join(".cache"), PathBuf::from)
}

/// llama.cpp's sources, unpacked from the llama-cpp-python sdist by
/// `scripts/build-llama-cpp.sh --sdist-only` (`$ZINC_LLAMA_CPP_DIR` overrides).
pub fn llama_cpp_dir() -> PathBuf {
    std::env::var_os("ZINC_LLAMA_CPP_DIR").map_or_else(
        || {
            cache_dir().join(format!(
                "llama-sdist/llama_cpp_python-{LLAMA_CPP_PYTHON}/vendor/llama.cpp"
            ))
        },
        PathBuf::from,
    )
}

/// The real Gemma 3 270M Q4_K_M model (scripts/fetch-gemma3-270m.sh).
pub fn gemma3_270m() -> Option<PathBuf> {
    fetched(
        root().join(".models/gemma-3-270m-q4_k_m.gguf"),
        &["scripts/fetch-gemma3-270m.sh"],
    )
}

/// `path`, first running `fetch` (a script and its arguments, from the root) when it is absent
/// and ZINC_FETCH_MODELS=1; `None`, after printing why the caller skips, when it stays absent.
pub fn fetched(path: PathBuf, fetch: &[&str]) -> Option<PathBuf> {
    // Tests run on several threads and may want the same download: one fetches at a time.
    static FETCHING: Mutex<()> = Mutex::new(());
    let _one_at_a_time = FETCHING.lock().unwrap_or_else(|e| e.into_inner());
    if !path.exists() && std::env::var("ZINC_FETCH_MODELS").as_deref() == Ok("1") {
        let status = Command::new("bash")
            .args(fetch)
            .current_dir(root())
            .status()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", fetch[0]));
        assert!(status.success(), "{} failed: {status}", fetch.join(" "));
    }
    if path.exists() {
        Some(path)
    } else {
        println!(
            "skipped: {} is absent (`{}` or ZINC_FETCH_MODELS=1 fetches it)",
            path.display(),
            fetch.join(" ")
        );
        None
    }
}

/// A JSON file of tests/data.
pub fn golden(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// A JSON array of token ids.
pub fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_u64().unwrap() as u32)
        .collect()
}

pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Checks `logits` against llama.cpp's `[[id, logit], ...]` (best first): every listed logit
/// within `tol`, and the same argmax unless llama.cpp's top two are within `tol` of each other.
/// Returns the largest difference.
pub fn compare_top(what: &str, logits: &[f32], top: &Value, tol: f32) -> f32 {
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
