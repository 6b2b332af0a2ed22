//! zinc's tokenizers against llama.cpp on real vocabularies: token ids for the same prompts
//! (data/tokenizer_golden.json, made by data/gen_tokenizer_golden.py) and decode round trips.
//!
//! The vocabularies themselves are too large to commit. Each test reads a JSON dump of one
//! from `.models/vocab/` (made on demand by data/dump_vocab.py from the GGUF file) and prints
//! "skipped: ..." when the GGUF file or Python's `gguf` package is missing. With
//! ZINC_FETCH_MODELS=1 the GGUF files are fetched first.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use zinc_models::tokenizer::{Tokenizer, Vocab};

const LLAMA_CPP_PYTHON: &str = "0.3.36";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn llama_cpp_dir() -> PathBuf {
    std::env::var_os("ZINC_LLAMA_CPP_DIR").map_or_else(
        || {
            PathBuf::from(format!(
                "/work/.cache/llama-sdist/llama_cpp_python-{LLAMA_CPP_PYTHON}/vendor/llama.cpp"
            ))
        },
        PathBuf::from,
    )
}

/// The GGUF file a vocabulary comes from, and the script that fetches it.
fn source(name: &str) -> (PathBuf, Vec<&'static str>) {
    if name == "gemma3" {
        let gguf = root().join(".models/gemma-3-270m-q4_k_m.gguf");
        (gguf, vec!["scripts/fetch-gemma3-270m.sh"])
    } else {
        let gguf = llama_cpp_dir().join(format!("models/ggml-vocab-{name}.gguf"));
        (gguf, vec!["scripts/build-llama-cpp.sh", "--sdist-only"])
    }
}

/// Loads a vocabulary dump, making it first if needed; `Err` says why the test is skipped.
fn load_vocab(name: &str) -> Result<Vocab, String> {
    let json = root().join(format!(".models/vocab/{name}.json"));
    if !json.exists() {
        let (gguf, fetch) = source(name);
        if !gguf.exists() && std::env::var("ZINC_FETCH_MODELS").as_deref() == Ok("1") {
            let status = Command::new("bash")
                .args(&fetch)
                .current_dir(root())
                .status()
                .map_err(|e| format!("cannot run {}: {e}", fetch[0]))?;
            assert!(status.success(), "{} failed", fetch[0]);
        }
        if !gguf.exists() {
            return Err(format!(
                "{} is absent (ZINC_FETCH_MODELS=1 fetches it)",
                gguf.display()
            ));
        }
        std::fs::create_dir_all(json.parent().unwrap()).unwrap();
        let script = root().join("models/tests/data/dump_vocab.py");
        // The llama.cpp build's virtualenv has `gguf` even where the system Python lacks it.
        let dumped = ["python3", "/work/.cache/llama-venv/bin/python"]
            .into_iter()
            .any(|python| {
                Command::new(python)
                    .arg(&script)
                    .arg(&gguf)
                    .arg(&json)
                    .status()
                    .is_ok_and(|s| s.success())
            });
        if !dumped {
            return Err(format!(
                "could not dump {} (python3 with `pip install gguf` is needed)",
                gguf.display()
            ));
        }
    }
    let text = std::fs::read_to_string(&json).unwrap();
    Ok(vocab_from_json(&serde_json::from_str(&text).unwrap()))
}

fn vocab_from_json(v: &Value) -> Vocab {
    let strings = |key: &str| -> Vec<String> {
        v[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_owned())
            .collect()
    };
    let id = |key: &str| v[key].as_u64().map(|id| id as u32);
    Vocab {
        model: v["model"].as_str().unwrap().to_owned(),
        pre: v["pre"].as_str().map(str::to_owned),
        tokens: strings("tokens"),
        scores: v["scores"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_f64().unwrap() as f32)
            .collect(),
        token_types: v["token_types"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_i64().unwrap() as i32)
            .collect(),
        merges: strings("merges"),
        bos: id("bos"),
        eos: id("eos"),
        eot: id("eot"),
        eom: id("eom"),
        unk: id("unk"),
        pad: id("pad"),
        add_bos: v["add_bos"].as_bool(),
        add_eos: v["add_eos"].as_bool(),
        add_space_prefix: v["add_space_prefix"].as_bool(),
    }
}

fn golden() -> Value {
    let text = include_str!("data/tokenizer_golden.json");
    serde_json::from_str(text).unwrap()
}

/// Checks every golden case of one vocabulary; returns the tokenizer for extra checks.
fn check_vocab(name: &str) -> Option<Tokenizer> {
    let vocab = match load_vocab(name) {
        Ok(vocab) => vocab,
        Err(why) => {
            println!("skipped: {name}: {why}");
            return None;
        }
    };
    let tok = Tokenizer::new(vocab).unwrap();
    let golden = golden();
    let cases = golden["vocabs"][name]["cases"].as_array().unwrap();
    let mut failures = Vec::new();
    for case in cases {
        let text = case["text"].as_str().unwrap();
        let add_special = case["add_special"].as_bool().unwrap();
        let parse_special = case["parse_special"].as_bool().unwrap();
        let want: Vec<u32> = case["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|id| id.as_u64().unwrap() as u32)
            .collect();
        let got = tok.encode(text, add_special, parse_special);
        if got != want {
            failures.push(format!(
                "{text:?} (add_special={add_special}, parse_special={parse_special})\n  zinc:      {got:?}\n  llama.cpp: {want:?}"
            ));
        } else if !parse_special && tok.decode(&got) != text {
            failures.push(format!("{text:?} decodes to {:?}", tok.decode(&got)));
        }
    }
    assert!(
        failures.is_empty(),
        "{name}: {} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    Some(tok)
}

#[test]
fn gemma3_matches_llama_cpp() {
    let Some(tok) = check_vocab("gemma3") else {
        return;
    };
    assert!(tok.is_eog(tok.token_id("<eos>").unwrap()));
    assert!(tok.is_eog(tok.token_id("<end_of_turn>").unwrap()));
    assert!(!tok.is_eog(tok.token_id("<start_of_turn>").unwrap()));
    // The logits golden file starts from the same prompt ids.
    let logits: Value = serde_json::from_str(include_str!("data/gemma3_270m_golden.json")).unwrap();
    let prompt = logits["prompt"].as_str().unwrap();
    let want: Vec<u64> = serde_json::from_value(logits["prompt_ids"].clone()).unwrap();
    let got: Vec<u64> = tok
        .encode(prompt, true, true)
        .into_iter()
        .map(u64::from)
        .collect();
    assert_eq!(got, want);
    // Pieces are bytes: an emoji spelled with byte-fallback tokens assembles across them.
    let ids = tok.encode("🦙", false, false);
    let bytes: Vec<u8> = ids
        .iter()
        .flat_map(|&id| tok.token_to_piece(id).to_vec())
        .collect();
    assert_eq!(bytes, "🦙".as_bytes());
}

#[test]
fn llama3_bpe_matches_llama_cpp() {
    check_vocab("llama-bpe");
}

#[test]
fn qwen2_matches_llama_cpp() {
    check_vocab("qwen2");
}

#[test]
fn qwen35_matches_llama_cpp() {
    check_vocab("qwen35");
}

#[test]
fn gpt2_matches_llama_cpp() {
    check_vocab("gpt-2");
}

#[test]
fn llama2_spm_matches_llama_cpp() {
    check_vocab("llama-spm");
}
