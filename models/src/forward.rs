//! The CPU reference model: load a GGUF file, run the forward pass with a KV cache.
//!
//! Weights are dequantized to f32 once at load; every computation is f32 (with f64 in long
//! reductions). This is the ground truth the GPU kernels and graphs are checked against.

use std::path::Path;

use thiserror::Error;

use crate::arch::{self, Arch, Transformer};
use crate::config::Config;
use crate::cpu::{Linear, Logits};
use crate::gguf::{Gguf, GgufError};
use crate::kv_cache::KvCache;

/// Why a model cannot be loaded or run.
#[derive(Debug, Error)]
pub enum ModelError {
    #[error(transparent)]
    Gguf(#[from] GgufError),
    #[error("unsupported architecture '{arch}' (supported: {})", supported_list())]
    UnsupportedArch { arch: String },
    #[error("tensor '{name}' not found in the model file")]
    MissingTensor { name: String },
    #[error("tensor '{name}' has shape {found:?}, expected {expected:?}")]
    TensorShape {
        name: String,
        expected: Vec<u64>,
        found: Vec<u64>,
    },
    #[error("unsupported rope scaling '{0}' (supported: none, linear)")]
    UnsupportedRopeScaling(String),
    #[error("invalid hyper-parameters: {0}")]
    BadConfig(String),
    #[error("token id {token} is out of range for a vocabulary of {n_vocab}")]
    TokenOutOfRange { token: u32, n_vocab: usize },
    #[error("position {pos} is past the {cached} cached positions")]
    PositionGap { pos: usize, cached: usize },
    #[error("cannot rewind recurrent state from position {cached} to {pos} (only to 0)")]
    RecurrentRewind { pos: usize, cached: usize },
    #[error("{needed} positions exceed the context length {context_length}")]
    ContextOverflow {
        needed: usize,
        context_length: usize,
    },
    #[error("forward pass needs at least one token")]
    NoTokens,
}

fn supported_list() -> String {
    Arch::ALL
        .iter()
        .map(|a| a.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A loaded model with its KV cache.
pub struct Model {
    config: Config,
    net: Box<dyn Transformer>,
    cache: KvCache,
}

impl Model {
    /// Opens, parses and dequantizes the GGUF model at `path`.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ModelError> {
        Self::from_gguf(&Gguf::open(path)?)
    }

    pub fn from_gguf(gguf: &Gguf) -> Result<Self, ModelError> {
        let name = gguf.architecture()?;
        let arch = Arch::from_name(name)
            .ok_or_else(|| ModelError::UnsupportedArch { arch: name.into() })?;
        let w = Weights { gguf };
        let embd = w.info(arch::TOKEN_EMBD)?;
        let n_vocab = embd.dims.get(1).copied().unwrap_or(1) as usize;
        let config = Config::from_gguf(gguf, arch, n_vocab)?;
        let net = arch::load(&config, &w)?;
        let cache = KvCache::new((0..config.n_layer).map(|il| {
            let n_head_kv = config.n_head_kv_at(il);
            (
                n_head_kv * config.head_dim_k_at(il),
                n_head_kv * config.head_dim_v_at(il),
            )
        }));
        Ok(Self { config, net, cache })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Number of positions in the KV cache: where the next token goes.
    pub fn position(&self) -> usize {
        self.cache.len()
    }

    /// Runs `tokens` at positions `pos..pos + tokens.len()` and returns the logits of the last
    /// one. `pos` may rewind the cache (earlier positions are kept, later ones forgotten) but
    /// not skip past it.
    pub fn forward(&mut self, tokens: &[u32], pos: usize) -> Result<Vec<f32>, ModelError> {
        self.run(tokens, pos, Logits::Last)
    }

    /// As [`Model::forward`], but returns every position's logits, `[tokens][n_vocab]`.
    pub fn forward_all(&mut self, tokens: &[u32], pos: usize) -> Result<Vec<f32>, ModelError> {
        self.run(tokens, pos, Logits::All)
    }

    /// Empties the KV cache.
    pub fn reset(&mut self) {
        self.cache.clear();
    }

    fn run(&mut self, tokens: &[u32], pos: usize, which: Logits) -> Result<Vec<f32>, ModelError> {
        let c = &self.config;
        if tokens.is_empty() {
            return Err(ModelError::NoTokens);
        }
        if let Some(&token) = tokens.iter().find(|&&t| t as usize >= c.n_vocab) {
            return Err(ModelError::TokenOutOfRange {
                token,
                n_vocab: c.n_vocab,
            });
        }
        let cached = self.cache.len();
        if pos > cached {
            return Err(ModelError::PositionGap { pos, cached });
        }
        if !self.cache.can_truncate(pos) {
            return Err(ModelError::RecurrentRewind { pos, cached });
        }
        let needed = pos + tokens.len();
        if needed > c.context_length {
            return Err(ModelError::ContextOverflow {
                needed,
                context_length: c.context_length,
            });
        }
        self.cache.truncate(pos);
        Ok(self.net.forward(tokens, pos, &mut self.cache, which))
    }
}

/// Tensor access for the architecture loaders: presence and shape checks, dequantization.
pub(crate) struct Weights<'a> {
    gguf: &'a Gguf,
}

impl Weights<'_> {
    fn info(&self, name: &str) -> Result<&crate::gguf::TensorInfo, ModelError> {
        self.gguf
            .tensor(name)
            .ok_or_else(|| ModelError::MissingTensor { name: name.into() })
    }

    pub fn has(&self, name: &str) -> bool {
        self.gguf.tensor(name).is_some()
    }

    /// The tensor `name`, dequantized, after checking its ggml shape (`dims[0]` fastest).
    pub fn tensor(&self, name: &str, dims: &[usize]) -> Result<Vec<f32>, ModelError> {
        let found = &self.info(name)?.dims;
        let expected: Vec<u64> = dims.iter().map(|&d| d as u64).collect();
        if *found != expected {
            return Err(ModelError::TensorShape {
                name: name.into(),
                expected,
                found: found.clone(),
            });
        }
        Ok(self.gguf.tensor_f32(name)?)
    }

    /// A `[out][in]` matrix `name` with its bias (`name` with `.bias` for `.weight`) if present.
    pub fn linear(&self, name: &str, out_dim: usize, in_dim: usize) -> Result<Linear, ModelError> {
        let weight = self.tensor(name, &[in_dim, out_dim])?;
        let bias_name = name
            .strip_suffix(".weight")
            .map(|stem| format!("{stem}.bias"));
        let bias = match bias_name {
            Some(b) if self.has(&b) => Some(self.tensor(&b, &[out_dim])?),
            _ => None,
        };
        Ok(Linear::new(out_dim, in_dim, weight, bias))
    }
}
