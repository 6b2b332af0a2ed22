//! zinc's tokenizers against llama.cpp on real vocabularies: token ids for the same prompts
//! (data/tokenizer_golden.json, made by data/gen_tokenizer_golden.py) and decode round trips.
//!
//! The vocabularies are read from GGUF files too large to commit: Gemma 3 270M (.models/) and
//! the vocab-only files in llama.cpp's sources (`$ZINC_LLAMA_CPP_DIR`, by default under
//! `.cache/`). Each test prints "skipped: ..." when its file is absent, unless
//! ZINC_FETCH_MODELS=1 lets it fetch the file first.

mod common;

use serde_json::Value;
use zinc_models::gguf::Gguf;
use zinc_models::tokenizer::{Tokenizer, Vocab};

/// The vocabulary `name` of the golden file, or `None` (after saying why) when absent.
fn load_vocab(name: &str) -> Option<Vocab> {
    let path = if name == "gemma3" {
        common::gemma3_270m()?
    } else {
        common::fetched(
            common::llama_cpp_dir().join(format!("models/ggml-vocab-{name}.gguf")),
            &["scripts/build-llama-cpp.sh", "--sdist-only"],
        )?
    };
    Some(Vocab::from_gguf(&Gguf::open(&path).unwrap()).unwrap())
}

fn golden() -> Value {
    let text = include_str!("data/tokenizer_golden.json");
    serde_json::from_str(text).unwrap()
}

/// Checks every golden case of one vocabulary; returns the tokenizer for extra checks.
fn check_vocab(name: &str) -> Option<Tokenizer> {
    let vocab = load_vocab(name)?;
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
