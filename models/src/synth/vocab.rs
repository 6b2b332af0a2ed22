//! Synthetic vocabularies: the size, tokenizer model and special tokens of the real one, with
//! generated ordinary tokens. Valid, not meaningful: every byte is encodable, and every BPE merge
//! joins two tokens into a third, so llama.cpp and zinc tokenize any text with them.

use std::collections::{HashSet, VecDeque};

use crate::gguf::{Array, Value};

/// The tokenizer family of a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenizerKind {
    /// Byte-level BPE, pre-tokenizer `llama-bpe`, 256 special tokens at the end.
    Llama3,
    /// Byte-level BPE, pre-tokenizer `qwen2`.
    Qwen2,
    /// Byte-level BPE, pre-tokenizer `qwen35`.
    Qwen35,
    /// SentencePiece (`llama`) with byte fallback, special tokens first.
    Gemma,
}

/// GGUF token types.
const NORMAL: i32 = 1;
const UNKNOWN: i32 = 2;
const CONTROL: i32 = 3;
const USER_DEFINED: i32 = 4;
const UNUSED: i32 = 5;
const BYTE: i32 = 6;

const QWEN_SPECIALS: [&str; 26] = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
];

/// Llama 3's named special tokens; the rest of its 256 are `<|reserved_special_token_N|>`.
const LLAMA3_SPECIALS: [(u32, &str); 5] = [
    (0, "<|begin_of_text|>"),
    (1, "<|end_of_text|>"),
    (6, "<|start_header_id|>"),
    (7, "<|end_header_id|>"),
    (9, "<|eot_id|>"),
];

/// Gemma's special tokens by id; ids 6-104 are `<unusedN>`.
const GEMMA_SPECIALS: [(u32, &str, i32); 7] = [
    (0, "<pad>", CONTROL),
    (1, "<eos>", CONTROL),
    (2, "<bos>", CONTROL),
    (3, "<unk>", UNKNOWN),
    (4, "<mask>", USER_DEFINED),
    (105, "<start_of_turn>", CONTROL),
    (106, "<end_of_turn>", CONTROL),
];
const GEMMA_N_SPECIAL: u32 = 107;

/// Ordinary tokens of the real Qwen3.5 vocabulary before its special tokens (a guess).
const QWEN35_N_REGULAR: u32 = 248_044;
const QWEN2_N_REGULAR: u32 = 151_643;

/// A generated vocabulary, ready for GGUF metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct SynthVocab {
    pub kind: TokenizerKind,
    pub tokens: Vec<String>,
    pub types: Vec<i32>,
    /// `"left right"` merges in rank order (BPE only).
    pub merges: Vec<String>,
    pub bos: u32,
    pub eos: u32,
    pub pad: u32,
}

impl SynthVocab {
    /// A vocabulary of exactly `n_vocab` tokens. The special-token block keeps its real ids
    /// when the vocabulary has its real size; a smaller (test) vocabulary keeps the block's
    /// position relative to its end (BPE) or start (SentencePiece).
    pub fn new(kind: TokenizerKind, n_vocab: u32) -> Self {
        match kind {
            TokenizerKind::Gemma => gemma(n_vocab),
            TokenizerKind::Llama3 => {
                let specials: Vec<(String, i32)> = (0..256)
                    .map(|i| {
                        let name = LLAMA3_SPECIALS
                            .iter()
                            .find(|(at, _)| *at == i)
                            .map(|(_, s)| (*s).to_owned());
                        let reserved = || {
                            let k =
                                i - LLAMA3_SPECIALS.iter().filter(|(at, _)| *at < i).count() as u32;
                            format!("<|reserved_special_token_{k}|>")
                        };
                        (name.unwrap_or_else(reserved), CONTROL)
                    })
                    .collect();
                let first = n_vocab - 256;
                bpe(kind, n_vocab, first, &specials, first, first + 1, first + 1)
            }
            TokenizerKind::Qwen2 | TokenizerKind::Qwen35 => {
                let specials: Vec<(String, i32)> = QWEN_SPECIALS
                    .iter()
                    .map(|s| {
                        let ty = if s.starts_with("<|") {
                            CONTROL
                        } else {
                            USER_DEFINED
                        };
                        ((*s).to_owned(), ty)
                    })
                    .collect();
                let real = if kind == TokenizerKind::Qwen2 {
                    QWEN2_N_REGULAR
                } else {
                    QWEN35_N_REGULAR
                };
                // Real files pad the vocabulary past the specials to the embedding size.
                let first = if real + specials.len() as u32 <= n_vocab {
                    real
                } else {
                    n_vocab * 3 / 4
                };
                bpe(kind, n_vocab, first, &specials, first, first + 2, first)
            }
        }
    }

    /// The `tokenizer.ggml.*` metadata.
    pub fn metadata(&self) -> Vec<(String, Value)> {
        let key = |k: &str| format!("tokenizer.ggml.{k}");
        let strings = |v: &[String]| Value::Array(Array::String(v.to_vec()));
        let mut m = Vec::new();
        match self.kind {
            TokenizerKind::Gemma => {
                m.push((key("model"), Value::String("llama".into())));
            }
            TokenizerKind::Llama3 | TokenizerKind::Qwen2 | TokenizerKind::Qwen35 => {
                let pre = match self.kind {
                    TokenizerKind::Llama3 => "llama-bpe",
                    TokenizerKind::Qwen2 => "qwen2",
                    _ => "qwen35",
                };
                m.push((key("model"), Value::String("gpt2".into())));
                m.push((key("pre"), Value::String(pre.into())));
            }
        }
        m.push((key("tokens"), strings(&self.tokens)));
        if self.kind == TokenizerKind::Gemma {
            // Earlier pieces score higher, so merges prefer the shorter, older pieces.
            let scores = (0..self.tokens.len()).map(|i| -(i as f32)).collect();
            m.push((key("scores"), Value::Array(Array::F32(scores))));
        }
        m.push((
            key("token_type"),
            Value::Array(Array::I32(self.types.clone())),
        ));
        if !self.merges.is_empty() {
            m.push((key("merges"), strings(&self.merges)));
        }
        m.push((key("bos_token_id"), Value::U32(self.bos)));
        m.push((key("eos_token_id"), Value::U32(self.eos)));
        m.push((key("padding_token_id"), Value::U32(self.pad)));
        match self.kind {
            TokenizerKind::Gemma => {
                m.push((key("unknown_token_id"), Value::U32(3)));
                m.push((key("add_bos_token"), Value::Bool(true)));
                m.push((key("add_space_prefix"), Value::Bool(false)));
            }
            TokenizerKind::Llama3 => m.push((key("add_bos_token"), Value::Bool(true))),
            TokenizerKind::Qwen2 | TokenizerKind::Qwen35 => {
                m.push((key("add_bos_token"), Value::Bool(false)))
            }
        }
        m
    }
}

/// GPT-2's byte-to-character table: printable Latin-1 bytes stand for themselves, the others
/// are shifted to U+0100 and up.
fn byte_chars() -> Vec<char> {
    let printable = |b: u32| (0x21..=0x7E).contains(&b) || (0xA1..=0xAC).contains(&b) || b >= 0xAE;
    let mut shifted = 0;
    (0..256u32)
        .map(|b| {
            if printable(b) {
                char::from_u32(b)
            } else {
                shifted += 1;
                char::from_u32(0xFF + shifted)
            }
            .expect("Latin-1 and U+0100.. are chars")
        })
        .collect()
}

/// Words grown a letter at a time from `seeds`, breadth first, as `(left, right)` pairs whose
/// concatenation is the new word; stops after `n` words.
fn grown_words(seeds: &[String], letters: &[String], n: usize) -> Vec<(String, String)> {
    let mut seen: HashSet<String> = seeds.iter().cloned().collect();
    let mut queue: VecDeque<String> = seeds.iter().cloned().collect();
    let mut out = Vec::with_capacity(n);
    while let Some(left) = queue.pop_front() {
        for right in letters {
            if out.len() == n {
                return out;
            }
            let word = format!("{left}{right}");
            if seen.insert(word.clone()) {
                queue.push_back(word);
                out.push((left.clone(), right.clone()));
            }
        }
    }
    out
}

/// A byte-level BPE vocabulary: 256 byte tokens, merged words up to `first_special`, then the
/// special tokens, then `[PADn]` padding.
fn bpe(
    kind: TokenizerKind,
    n_vocab: u32,
    first_special: u32,
    specials: &[(String, i32)],
    bos: u32,
    eos: u32,
    pad: u32,
) -> SynthVocab {
    let chars = byte_chars();
    let mut tokens: Vec<String> = chars.iter().map(char::to_string).collect();
    let letters: Vec<String> = ('a'..='z').map(String::from).collect();
    let space = chars[usize::from(b' ')].to_string();
    let seeds: Vec<String> = std::iter::once(space).chain(letters.clone()).collect();
    let n_words = first_special as usize - tokens.len();
    let words = grown_words(&seeds, &letters, n_words);
    let merges = words.iter().map(|(l, r)| format!("{l} {r}")).collect();
    tokens.extend(words.into_iter().map(|(l, r)| l + &r));
    let mut types = vec![NORMAL; tokens.len()];
    for (text, ty) in specials {
        tokens.push(text.clone());
        types.push(*ty);
    }
    for i in tokens.len()..n_vocab as usize {
        tokens.push(format!("[PAD{i}]"));
        types.push(UNUSED);
    }
    SynthVocab {
        kind,
        tokens,
        types,
        merges,
        bos,
        eos,
        pad,
    }
}

/// A SentencePiece vocabulary laid out like Gemma's: special and unused tokens, byte tokens,
/// then pieces (`▁` is the space).
fn gemma(n_vocab: u32) -> SynthVocab {
    let mut tokens: Vec<String> = (0..GEMMA_N_SPECIAL)
        .map(|i| format!("<unused{}>", i.saturating_sub(6)))
        .collect();
    let mut types = vec![UNUSED; tokens.len()];
    for (id, text, ty) in GEMMA_SPECIALS {
        tokens[id as usize] = text.to_owned();
        types[id as usize] = ty;
    }
    tokens[5] = "[multimodal]".to_owned();
    types[5] = USER_DEFINED;
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(BYTE);
    }
    let letters: Vec<String> = ('a'..='z').map(String::from).collect();
    let singles: Vec<String> = std::iter::once("▁".to_owned())
        .chain((b'!'..=b'~').map(|b| char::from(b).to_string()))
        .collect();
    let n_pieces = n_vocab as usize - tokens.len() - singles.len();
    let seeds: Vec<String> = std::iter::once("▁".to_owned())
        .chain(letters.clone())
        .collect();
    let words = grown_words(&seeds, &letters, n_pieces);
    tokens.extend(singles);
    tokens.extend(words.into_iter().map(|(l, r)| l + &r));
    types.resize(tokens.len(), NORMAL);
    SynthVocab {
        kind: TokenizerKind::Gemma,
        tokens,
        types,
        merges: Vec::new(),
        bos: 2,
        eos: 1,
        pad: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_special_ids_are_real() {
        let v = SynthVocab::new(TokenizerKind::Llama3, 128_256);
        assert_eq!(v.tokens.len(), 128_256);
        assert_eq!(v.tokens[128_000], "<|begin_of_text|>");
        assert_eq!(v.tokens[128_009], "<|eot_id|>");
        assert_eq!(v.tokens[128_255], "<|reserved_special_token_250|>");
        let v = SynthVocab::new(TokenizerKind::Qwen2, 151_936);
        assert_eq!(v.tokens[151_645], "<|im_end|>");
        assert_eq!(v.eos, 151_645);
        assert_eq!(v.tokens[151_668], "</think>");
        let v = SynthVocab::new(TokenizerKind::Gemma, 262_144);
        assert_eq!(v.tokens.len(), 262_144);
        assert_eq!(v.tokens[106], "<end_of_turn>");
    }

    #[test]
    fn tokens_are_unique_and_merges_consistent() {
        for kind in [TokenizerKind::Qwen35, TokenizerKind::Gemma] {
            let v = SynthVocab::new(kind, 1024);
            let set: HashSet<&String> = v.tokens.iter().collect();
            assert_eq!(set.len(), v.tokens.len(), "{kind:?}");
            for m in &v.merges {
                let (l, r) = m.split_once(' ').unwrap();
                assert!(set.contains(&format!("{l}{r}")) && set.contains(&l.to_owned()));
                assert!(set.contains(&r.to_owned()));
            }
        }
    }
}
