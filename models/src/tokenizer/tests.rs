//! Tokenizer behaviour on small hand-made vocabularies; expectations worked out by hand
//! from llama.cpp's algorithms. Real vocabularies are checked in `models/tests/tokenizer.rs`.

use super::*;

const NORMAL: i32 = 1;
const CONTROL: i32 = 3;
const USER: i32 = 4;
const BYTE: i32 = 6;

/// A Gemma-like SentencePiece vocabulary: control tokens, a user-defined `\n`, byte fallback.
fn spm_vocab() -> Vocab {
    let mut entries: Vec<(String, f32, i32)> = vec![
        ("<pad>".into(), 0.0, CONTROL),
        ("<eos>".into(), 0.0, CONTROL),
        ("<bos>".into(), 0.0, CONTROL),
        ("<start_of_turn>".into(), 0.0, CONTROL),
        ("<end_of_turn>".into(), 0.0, CONTROL),
        ("\n".into(), 0.0, USER),
    ];
    for b in 0..=255u8 {
        entries.push((format!("<0x{b:02X}>"), 0.0, BYTE));
    }
    // Scores decide the merge order; see the tests for the resulting sequences.
    for (text, score) in [
        ("▁", -1.0),
        ("h", -2.0),
        ("e", -2.0),
        ("l", -2.0),
        ("o", -2.0),
        ("w", -2.0),
        ("r", -2.0),
        ("d", -2.0),
        ("ll", -3.0),
        ("▁h", -4.0),
        ("▁he", -5.0),
        ("llo", -6.0),
        ("▁hello", -7.0),
        ("▁w", -8.0),
        ("or", -8.5),
        ("▁wor", -9.0),
        ("▁▁", -10.0),
        ("user", -11.0),
        ("us", -12.0),
        ("er", -12.0),
        ("u", -2.0),
        ("s", -2.0),
    ] {
        entries.push((text.into(), score, NORMAL));
    }
    Vocab {
        model: "llama".into(),
        pre: Some("default".into()),
        tokens: entries.iter().map(|e| e.0.clone()).collect(),
        scores: entries.iter().map(|e| e.1).collect(),
        token_types: entries.iter().map(|e| e.2).collect(),
        bos: Some(2),
        eos: Some(1),
        add_bos: Some(true),
        add_space_prefix: Some(false),
        ..Vocab::default()
    }
}

fn texts(tok: &Tokenizer, ids: &[u32]) -> Vec<String> {
    ids.iter()
        .map(|&id| tok.token_text(id).unwrap().to_owned())
        .collect()
}

#[test]
fn spm_merges_by_score() {
    let tok = Tokenizer::new(spm_vocab()).unwrap();
    // "ll" (-3) merges first, then "▁h" (-4), "▁he" (-5), "llo" (-6), "▁hello" (-7).
    let ids = tok.encode(" hello", false, false);
    assert_eq!(texts(&tok, &ids), ["▁hello"]);
    // "▁wor" needs "▁w" and "or"; "d" stays alone; unknown "!" falls back to a byte.
    let ids = tok.encode(" world!", false, false);
    assert_eq!(texts(&tok, &ids), ["▁wor", "l", "d", "<0x21>"]);
    assert_eq!(tok.decode(&ids), " world!");
}

#[test]
fn spm_byte_fallback_spans_utf8() {
    let tok = Tokenizer::new(spm_vocab()).unwrap();
    let ids = tok.encode("é", false, false);
    assert_eq!(texts(&tok, &ids), ["<0xC3>", "<0xA9>"]);
    // Each piece alone is half a character; together they decode.
    assert_eq!(tok.token_to_piece(ids[0]), [0xC3]);
    assert_eq!(tok.decode(&ids), "é");
}

#[test]
fn spm_special_tokens_and_bos() {
    let tok = Tokenizer::new(spm_vocab()).unwrap();
    let ids = tok.encode("<start_of_turn>user\nhello", true, true);
    assert_eq!(
        texts(&tok, &ids),
        ["<bos>", "<start_of_turn>", "user", "\n", "h", "e", "llo"]
    );
    // Without parse_special the control text is ordinary text; the user-defined "\n" still matches.
    let ids = tok.encode("<end_of_turn>\n", false, false);
    assert!(!ids.contains(&4));
    assert_eq!(tok.token_text(*ids.last().unwrap()), Some("\n"));
    assert_eq!(tok.decode(&ids), "<end_of_turn>\n");
    // Control tokens render as nothing.
    assert_eq!(tok.decode(&[2, 3, 5]), "\n");
}

#[test]
fn spm_space_prefix_follows_special_tokens() {
    let vocab = Vocab {
        add_space_prefix: Some(true),
        ..spm_vocab()
    };
    let tok = Tokenizer::new(vocab).unwrap();
    let ids = tok.encode("hello<end_of_turn>hello", false, true);
    assert_eq!(texts(&tok, &ids), ["▁hello", "<end_of_turn>", "▁hello"]);
    // Decoding drops the prefixed space again.
    assert_eq!(tok.decode(&tok.encode("hello", false, false)), "hello");
}

#[test]
fn spm_eog_tokens() {
    let tok = Tokenizer::new(spm_vocab()).unwrap();
    assert!(tok.is_eog(1));
    assert!(tok.is_eog(tok.token_id("<end_of_turn>").unwrap()));
    assert!(!tok.is_eog(tok.token_id("<start_of_turn>").unwrap()));
    assert!(!tok.is_eog(2));
}

/// A byte-level BPE vocabulary: single byte characters, a few merges, Llama 3 specials.
fn bpe_vocab(pre: &str) -> Vocab {
    let mut tokens: Vec<String> = super::bpe::byte_chars()
        .iter()
        .map(char::to_string)
        .collect();
    let merges = [
        "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld", "h e", "l l", "he ll", "hell o",
    ];
    for merge in merges {
        tokens.push(merge.replace(' ', ""));
    }
    tokens.push("<|begin_of_text|>".into());
    tokens.push("<|eot_id|>".into());
    let n = tokens.len();
    let mut token_types = vec![NORMAL; n];
    token_types[n - 2] = CONTROL;
    token_types[n - 1] = CONTROL;
    Vocab {
        model: "gpt2".into(),
        pre: Some(pre.into()),
        tokens,
        token_types,
        merges: merges.iter().map(|m| m.to_string()).collect(),
        bos: Some(n as u32 - 2),
        eos: Some(n as u32 - 1),
        ..Vocab::default()
    }
}

#[test]
fn bpe_merges_by_rank() {
    let tok = Tokenizer::new(bpe_vocab("llama-bpe")).unwrap();
    // Llama 3 takes whole-word tokens directly.
    let ids = tok.encode("hello world", false, false);
    assert_eq!(texts(&tok, &ids), ["hello", "Ġworld"]);
    // No merge joins "Ġwor" and "l", so merging stops there.
    let ids = tok.encode(" worl", false, false);
    assert_eq!(texts(&tok, &ids), ["Ġwor", "l"]);

    // Qwen 2 always merges: "he", "ll", "hell", "hello"; "Ġw", "or", "Ġwor", "ld", "Ġworld".
    let tok = Tokenizer::new(bpe_vocab("qwen2")).unwrap();
    let ids = tok.encode("hello world", false, false);
    assert_eq!(texts(&tok, &ids), ["hello", "Ġworld"]);
    assert_eq!(tok.decode(&ids), "hello world");
}

#[test]
fn bpe_bytes_round_trip() {
    let tok = Tokenizer::new(bpe_vocab("qwen2")).unwrap();
    for text in ["héllo wörld 🦙", "tabs\tand\nnewlines  ", "数字 123"] {
        let ids = tok.encode(text, false, false);
        assert_eq!(tok.decode(&ids), text);
    }
    // "é" is two bytes, mapped to two characters, each its own token.
    let ids = tok.encode("é", false, false);
    assert_eq!(texts(&tok, &ids), ["Ã", "©"]);
}

#[test]
fn bpe_llama3_adds_bos_and_parses_specials() {
    let tok = Tokenizer::new(bpe_vocab("llama-bpe")).unwrap();
    assert!(tok.adds_bos());
    let ids = tok.encode("hello<|eot_id|>", true, true);
    assert_eq!(
        texts(&tok, &ids),
        ["<|begin_of_text|>", "hello", "<|eot_id|>"]
    );
    assert!(tok.is_eog(*ids.last().unwrap()));
    // The same text without parse_special is spelled out.
    let ids = tok.encode("<|eot_id|>", false, false);
    assert!(ids.len() > 1);

    let qwen = Tokenizer::new(bpe_vocab("qwen2")).unwrap();
    assert!(!qwen.adds_bos());
}

#[test]
fn rejects_bad_vocabularies() {
    let err = |vocab| Tokenizer::new(vocab).err().unwrap();
    assert!(matches!(
        err(Vocab {
            model: "t5".into(),
            ..spm_vocab()
        }),
        TokenizerError::UnsupportedModel(_)
    ));
    assert!(matches!(
        err(bpe_vocab("mystery")),
        TokenizerError::UnsupportedPre(_)
    ));
    assert!(matches!(
        err(Vocab {
            scores: vec![0.0],
            ..spm_vocab()
        }),
        TokenizerError::LengthMismatch { .. }
    ));
    assert!(matches!(
        err(Vocab {
            bos: Some(1 << 20),
            ..spm_vocab()
        }),
        TokenizerError::IdOutOfRange { .. }
    ));
    assert!(matches!(
        err(Vocab {
            merges: vec!["nospace".into()],
            ..bpe_vocab("gpt-2")
        }),
        TokenizerError::BadMerge(_)
    ));
    assert!(matches!(err(Vocab::default()), TokenizerError::Empty));
}
