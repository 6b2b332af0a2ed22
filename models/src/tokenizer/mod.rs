//! Tokenizers for GGUF vocabularies, matching llama.cpp's tokenization token for token.
//!
//! Two vocabulary models are supported, selected by `tokenizer.ggml.model`:
//! - `llama`: SentencePiece-style (Gemma, Llama 1/2): spaces become `▁`, adjacent pieces are
//!   merged greedily by vocabulary score, unknown characters fall back to `<0xNN>` byte tokens.
//! - `gpt2`: byte-level BPE (Llama 3, Qwen 2/3, GPT-2): a regex pre-tokenizer chosen by
//!   `tokenizer.ggml.pre` splits the text, bytes map to printable characters, and merges are
//!   applied by rank.
//!
//! The tokenizer is built from plain data ([`Vocab`]); [`Vocab::from_gguf`] reads that data from
//! a GGUF file.

mod bpe;
mod merge;
mod special;
mod spm;

use std::collections::{HashMap, HashSet};

use thiserror::Error;

use crate::gguf::{Gguf, GgufError};
use bpe::Bpe;
use special::{Fragment, SpecialTokens};
use spm::Spm;

/// The vocabulary fields of a GGUF file (`tokenizer.ggml.*`), as plain data.
///
/// Optional flags left as `None` take llama.cpp's defaults for the model type.
#[derive(Debug, Clone, Default)]
pub struct Vocab {
    /// `tokenizer.ggml.model`: `"llama"` (SentencePiece) or `"gpt2"` (byte-level BPE).
    pub model: String,
    /// `tokenizer.ggml.pre`: the BPE pre-tokenizer name (`llama-bpe`, `qwen2`, ...).
    pub pre: Option<String>,
    /// `tokenizer.ggml.tokens`.
    pub tokens: Vec<String>,
    /// `tokenizer.ggml.scores`; empty means all zero.
    pub scores: Vec<f32>,
    /// `tokenizer.ggml.token_type` (GGUF token type codes); empty means all normal.
    pub token_types: Vec<i32>,
    /// `tokenizer.ggml.merges`: `"left right"` pairs in rank order (BPE only).
    pub merges: Vec<String>,
    /// `tokenizer.ggml.bos_token_id`.
    pub bos: Option<u32>,
    /// `tokenizer.ggml.eos_token_id`.
    pub eos: Option<u32>,
    /// `tokenizer.ggml.eot_token_id`.
    pub eot: Option<u32>,
    /// `tokenizer.ggml.eom_token_id`.
    pub eom: Option<u32>,
    /// `tokenizer.ggml.unknown_token_id`.
    pub unk: Option<u32>,
    /// `tokenizer.ggml.padding_token_id`.
    pub pad: Option<u32>,
    /// `tokenizer.ggml.add_bos_token`.
    pub add_bos: Option<bool>,
    /// `tokenizer.ggml.add_eos_token`.
    pub add_eos: Option<bool>,
    /// `tokenizer.ggml.add_space_prefix` (SentencePiece only).
    pub add_space_prefix: Option<bool>,
}

impl Vocab {
    /// The `tokenizer.ggml.*` metadata of `g`; `model` and `tokens` are required.
    pub fn from_gguf(g: &Gguf) -> Result<Self, GgufError> {
        let key = |k: &str| format!("tokenizer.ggml.{k}");
        let id = |k: &str| g.get_opt::<u32>(&key(k));
        let flag = |k: &str| g.get_opt::<bool>(&key(k));
        Ok(Self {
            model: g.get_str(&key("model"))?.to_string(),
            pre: g.get_opt::<&str>(&key("pre"))?.map(str::to_string),
            tokens: g.get_str_array(&key("tokens"))?.to_vec(),
            scores: g
                .get_opt::<&[f32]>(&key("scores"))?
                .unwrap_or_default()
                .to_vec(),
            token_types: g
                .get_opt::<&[i32]>(&key("token_type"))?
                .unwrap_or_default()
                .to_vec(),
            merges: g
                .get_opt::<&[String]>(&key("merges"))?
                .unwrap_or_default()
                .to_vec(),
            bos: id("bos_token_id")?,
            eos: id("eos_token_id")?,
            eot: id("eot_token_id")?,
            eom: id("eom_token_id")?,
            unk: id("unknown_token_id")?,
            pad: id("padding_token_id")?,
            add_bos: flag("add_bos_token")?,
            add_eos: flag("add_eos_token")?,
            add_space_prefix: flag("add_space_prefix")?,
        })
    }
}

/// Token type codes stored in `tokenizer.ggml.token_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenType {
    Normal,
    Unknown,
    Control,
    UserDefined,
    Unused,
    Byte,
    Undefined,
}

impl TokenType {
    fn from_gguf(code: i32) -> Self {
        match code {
            1 => Self::Normal,
            2 => Self::Unknown,
            3 => Self::Control,
            4 => Self::UserDefined,
            5 => Self::Unused,
            6 => Self::Byte,
            _ => Self::Undefined,
        }
    }

    /// Tokens matched verbatim in the input text before the model runs.
    fn is_special(self) -> bool {
        matches!(self, Self::Control | Self::UserDefined | Self::Unknown)
    }
}

#[derive(Debug, Error)]
pub enum TokenizerError {
    #[error("unsupported tokenizer model `{0}` (expected `llama` or `gpt2`)")]
    UnsupportedModel(String),
    #[error("unsupported BPE pre-tokenizer `{0}`")]
    UnsupportedPre(String),
    #[error("the vocabulary has no tokens")]
    Empty,
    #[error("{field} has {got} entries but the vocabulary has {expected} tokens")]
    LengthMismatch {
        field: &'static str,
        expected: usize,
        got: usize,
    },
    #[error("{what} token id {id} is out of range for a vocabulary of {n} tokens")]
    IdOutOfRange {
        what: &'static str,
        id: u32,
        n: usize,
    },
    #[error("{0} is required by the vocabulary flags but has no token id")]
    MissingSpecial(&'static str),
    #[error("malformed BPE merge `{0}`")]
    BadMerge(String),
    #[error("pre-tokenizer regex: {0}")]
    Regex(#[from] Box<fancy_regex::Error>),
}

/// Token texts that end generation whatever their type; llama.cpp recognizes the same names.
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "<|end_of_text|>",
    "<end_of_utterance>",
];

enum Model {
    Spm(Spm),
    Bpe(Bpe),
}

/// A tokenizer for one vocabulary; cheap to share (`&self` everywhere).
pub struct Tokenizer {
    model: Model,
    tokens: Vec<String>,
    types: Vec<TokenType>,
    token_to_id: HashMap<String, u32>,
    special: SpecialTokens,
    /// Each token's bytes as printed (control tokens render as nothing).
    pieces: Vec<Vec<u8>>,
    bos: Option<u32>,
    eos: Option<u32>,
    add_bos: bool,
    add_eos: bool,
    add_space_prefix: bool,
    eog: HashSet<u32>,
}

impl Tokenizer {
    pub fn new(vocab: Vocab) -> Result<Self, TokenizerError> {
        let n = vocab.tokens.len();
        if n == 0 {
            return Err(TokenizerError::Empty);
        }
        let check_len = |field, got: usize| {
            if got == 0 || got == n {
                Ok(())
            } else {
                Err(TokenizerError::LengthMismatch {
                    field,
                    expected: n,
                    got,
                })
            }
        };
        check_len("scores", vocab.scores.len())?;
        check_len("token_types", vocab.token_types.len())?;

        let mut types: Vec<TokenType> = if vocab.token_types.is_empty() {
            vec![TokenType::Normal; n]
        } else {
            vocab
                .token_types
                .iter()
                .map(|&c| TokenType::from_gguf(c))
                .collect()
        };
        let scores = if vocab.scores.is_empty() {
            vec![0.0; n]
        } else {
            vocab.scores
        };

        // Empty strings can never be matched; skipping them keeps the map one-to-one.
        let token_to_id: HashMap<String, u32> = vocab
            .tokens
            .iter()
            .enumerate()
            .filter(|(_, t)| !t.is_empty())
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();

        let is_spm = match vocab.model.as_str() {
            "llama" => true,
            "gpt2" => false,
            other => return Err(TokenizerError::UnsupportedModel(other.to_owned())),
        };
        // SentencePiece vocabularies default to Llama's ids when the file omits them.
        let (bos, eos) = if is_spm {
            (vocab.bos.or(Some(1)), vocab.eos.or(Some(2)))
        } else {
            (vocab.bos, vocab.eos)
        };
        let ids = [
            ("bos", bos),
            ("eos", eos),
            ("eot", vocab.eot),
            ("eom", vocab.eom),
            ("unk", vocab.unk),
            ("pad", vocab.pad),
        ];
        for (what, id) in ids {
            if let Some(id) = id.filter(|&id| id as usize >= n) {
                return Err(TokenizerError::IdOutOfRange { what, id, n });
            }
        }

        let mut eog: HashSet<u32> = [eos, vocab.eot, vocab.eom].into_iter().flatten().collect();
        for text in EOG_TEXTS {
            if let Some(&id) = token_to_id.get(*text) {
                eog.insert(id);
                // llama.cpp forces these to control tokens, so plain text never produces them.
                types[id as usize] = TokenType::Control;
            }
        }

        let (model, add_bos, add_space_prefix) = if is_spm {
            let model = Model::Spm(Spm::new(scores, &token_to_id, vocab.unk));
            (
                model,
                vocab.add_bos.unwrap_or(true),
                vocab.add_space_prefix.unwrap_or(true),
            )
        } else {
            let pre = vocab.pre.as_deref().unwrap_or("default");
            let bpe = Bpe::new(pre, &vocab.merges)?;
            let add_bos = vocab.add_bos.unwrap_or(bpe.adds_bos_by_default());
            (Model::Bpe(bpe), add_bos, false)
        };
        let add_eos = vocab.add_eos.unwrap_or(false);
        if add_bos && bos.is_none() {
            return Err(TokenizerError::MissingSpecial("bos"));
        }
        if add_eos && eos.is_none() {
            return Err(TokenizerError::MissingSpecial("eos"));
        }

        let pieces = vocab
            .tokens
            .iter()
            .zip(&types)
            .map(|(text, &ty)| render_piece(&model, text, ty))
            .collect();
        let special = SpecialTokens::new(&vocab.tokens, &types);

        Ok(Self {
            model,
            tokens: vocab.tokens,
            types,
            token_to_id,
            special,
            pieces,
            bos,
            eos,
            add_bos,
            add_eos,
            add_space_prefix,
            eog,
        })
    }

    /// Tokenizes `text`. `add_special` adds BOS/EOS as the vocabulary asks; `parse_special`
    /// turns control-token texts such as `<start_of_turn>` into their ids (user-defined tokens
    /// are always matched, as in llama.cpp).
    pub fn encode(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<u32> {
        let mut out = Vec::new();
        if add_special && self.add_bos {
            out.extend(self.bos);
        }
        // SentencePiece prefixes a space to text that starts the input or follows a special token.
        let mut after_special = true;
        for fragment in self.special.partition(text, parse_special) {
            match fragment {
                Fragment::Token(id) => {
                    out.push(id);
                    after_special = true;
                }
                Fragment::Text(text) => {
                    match &self.model {
                        Model::Spm(spm) => {
                            let prefix = if self.add_space_prefix && after_special {
                                "▁"
                            } else {
                                ""
                            };
                            let escaped = format!("{prefix}{}", text.replace(' ', "▁"));
                            spm.encode(&escaped, &self.token_to_id, &mut out);
                        }
                        Model::Bpe(bpe) => bpe.encode(text, &self.token_to_id, &mut out),
                    }
                    after_special = false;
                }
            }
        }
        if add_special && self.add_eos {
            out.extend(self.eos);
        }
        out
    }

    /// Detokenizes `ids` into text, dropping control tokens; invalid UTF-8 becomes U+FFFD.
    pub fn decode(&self, ids: &[u32]) -> String {
        let mut bytes = Vec::new();
        for (i, &id) in ids.iter().enumerate() {
            let piece = self.token_to_piece(id);
            // Undo the space that encoding prefixed to the input.
            let piece = match piece {
                [b' ', rest @ ..] if i == 0 && self.add_space_prefix => rest,
                _ => piece,
            };
            bytes.extend_from_slice(piece);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The bytes token `id` stands for. A multi-byte character may be split across tokens,
    /// so streaming callers should buffer until the bytes form valid UTF-8. Control tokens
    /// and unknown ids give no bytes.
    pub fn token_to_piece(&self, id: u32) -> &[u8] {
        self.pieces.get(id as usize).map_or(&[], Vec::as_slice)
    }

    /// The token's text as stored in the vocabulary (`▁Hello`, `ĠHello`, `<0x0A>`, ...).
    pub fn token_text(&self, id: u32) -> Option<&str> {
        self.tokens.get(id as usize).map(String::as_str)
    }

    pub fn token_type(&self, id: u32) -> Option<TokenType> {
        self.types.get(id as usize).copied()
    }

    /// The id of the token whose vocabulary text is exactly `text`.
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.token_to_id.get(text).copied()
    }

    /// Whether `id` ends generation (EOS, end-of-turn and similar tokens).
    pub fn is_eog(&self, id: u32) -> bool {
        self.eog.contains(&id)
    }

    pub fn n_tokens(&self) -> usize {
        self.tokens.len()
    }

    pub fn bos(&self) -> Option<u32> {
        self.bos
    }

    pub fn eos(&self) -> Option<u32> {
        self.eos
    }

    /// Whether `encode(.., add_special = true, ..)` prepends BOS.
    pub fn adds_bos(&self) -> bool {
        self.add_bos
    }
}

fn render_piece(model: &Model, text: &str, ty: TokenType) -> Vec<u8> {
    match ty {
        TokenType::UserDefined => text.as_bytes().to_vec(),
        TokenType::Normal => match model {
            Model::Spm(_) => text.replace('▁', " ").into_bytes(),
            Model::Bpe(_) => bpe::unmap_bytes(text),
        },
        TokenType::Byte => parse_byte_token(text).map_or_else(Vec::new, |b| vec![b]),
        TokenType::Control | TokenType::Unknown | TokenType::Unused | TokenType::Undefined => {
            Vec::new()
        }
    }
}

/// Parses a byte-fallback token `<0xNN>`.
fn parse_byte_token(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod tests;
