//! A model on a backend: load a GGUF file, run the forward pass with the backend's KV cache.
//!
//! On the [`Cpu`] backend (the default) weights are dequantized to f32 once at load and every
//! computation is f32 (with f64 in long reductions): the ground truth the GPU kernels and
//! graphs are checked against.

use std::path::Path;

use thiserror::Error;

use crate::arch::{self, Arch, Loader, Transformer};
use crate::backend::{Backend, Logits};
use crate::config::Config;
use crate::cpu::Cpu;
use crate::gguf::{Gguf, GgufError};
use crate::sampler::Sampler;

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
    /// A failure inside a backend (a device error, out of memory, ...).
    #[error("backend: {0}")]
    Backend(Box<dyn std::error::Error + Send + Sync>),
}

fn supported_list() -> String {
    Arch::ALL
        .iter()
        .map(|a| a.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A loaded model on backend `B`, which holds its weights and KV cache.
pub struct Model<B: Backend = Cpu> {
    config: Config,
    net: Box<dyn Transformer<B>>,
    backend: B,
}

impl Model {
    /// Opens, parses and dequantizes the GGUF model at `path` for the CPU.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ModelError> {
        Self::from_gguf(&Gguf::open(path)?)
    }

    pub fn from_gguf(gguf: &Gguf) -> Result<Self, ModelError> {
        Self::with_backend(gguf, |c| Ok(Cpu::new(c)))
    }
}

impl<B: Backend + 'static> Model<B> {
    /// Loads `gguf` onto the backend that `backend` makes for the model's config.
    pub fn with_backend(
        gguf: &Gguf,
        backend: impl FnOnce(&Config) -> Result<B, ModelError>,
    ) -> Result<Self, ModelError> {
        let name = gguf.architecture()?;
        let arch = Arch::from_name(name)
            .ok_or_else(|| ModelError::UnsupportedArch { arch: name.into() })?;
        let embd = gguf
            .tensor(arch::TOKEN_EMBD)
            .ok_or_else(|| ModelError::MissingTensor {
                name: arch::TOKEN_EMBD.into(),
            })?;
        let n_vocab = embd.dims.get(1).copied().unwrap_or(1) as usize;
        let config = Config::from_gguf(gguf, arch, n_vocab)?;
        let backend = backend(&config)?;
        let net = arch::load(&config, &Loader::new(gguf, &backend))?;
        Ok(Self {
            config,
            net,
            backend,
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// Number of positions in the KV cache: where the next token goes.
    pub fn position(&self) -> usize {
        self.backend.cached()
    }

    /// Runs `tokens` at positions `pos..pos + tokens.len()` and returns the logits of the last
    /// one. `pos` may rewind the cache (earlier positions are kept, later ones forgotten) but
    /// not skip past it.
    pub fn forward(&mut self, tokens: &[u32], pos: usize) -> Result<Vec<f32>, ModelError> {
        let logits = self.run(tokens, pos, Logits::Last)?;
        self.backend
            .to_host(&logits.expect("Logits::Last gives logits"))
    }

    /// As [`Model::forward`], but returns every position's logits, `[tokens][n_vocab]`.
    pub fn forward_all(&mut self, tokens: &[u32], pos: usize) -> Result<Vec<f32>, ModelError> {
        let logits = self.run(tokens, pos, Logits::All)?;
        self.backend
            .to_host(&logits.expect("Logits::All gives logits"))
    }

    /// As [`Model::forward`], then the next token as `sampler` picks it from the logits. Greedy
    /// samplers take the backend's [`Backend::argmax`], top-k ones its [`Backend::top_k`], so a
    /// GPU reads back one id or k candidates, not the vocabulary's logits.
    pub fn forward_sample(
        &mut self,
        tokens: &[u32],
        pos: usize,
        sampler: &mut Sampler,
    ) -> Result<u32, ModelError> {
        if let ([token], true) = (tokens, sampler.is_greedy()) {
            self.prepare(tokens, pos)?;
            let net = &self.net;
            return self.backend.greedy_step(*token, pos, &mut |b| {
                let logits = net.forward(b, tokens, pos, Logits::Last)?;
                Ok(logits.expect("Logits::Last gives logits"))
            });
        }
        let logits = self.run(tokens, pos, Logits::Last)?;
        let logits = logits.expect("Logits::Last gives logits");
        if sampler.is_greedy() {
            self.backend.argmax(&logits)
        } else if let Some(k) = sampler.top_k() {
            Ok(sampler.sample_candidates(self.backend.top_k(&logits, k)?))
        } else {
            Ok(sampler.sample(&self.backend.to_host(&logits)?))
        }
    }

    /// As [`Model::forward`], but only fills the cache: no logits are computed (a prompt chunk
    /// before the last).
    pub fn ingest(&mut self, tokens: &[u32], pos: usize) -> Result<(), ModelError> {
        self.run(tokens, pos, Logits::None).map(drop)
    }

    /// Empties the KV cache.
    pub fn reset(&mut self) {
        self.backend.truncate(0);
    }

    fn run(
        &mut self,
        tokens: &[u32],
        pos: usize,
        which: Logits,
    ) -> Result<Option<B::Tensor>, ModelError> {
        self.prepare(tokens, pos)?;
        self.net.forward(&mut self.backend, tokens, pos, which)
    }

    /// Checks `tokens` at `pos` against the model and its cache, and forgets the cache from
    /// `pos` on.
    fn prepare(&mut self, tokens: &[u32], pos: usize) -> Result<(), ModelError> {
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
        let cached = self.backend.cached();
        if pos > cached {
            return Err(ModelError::PositionGap { pos, cached });
        }
        if !self.backend.can_truncate(pos) {
            return Err(ModelError::RecurrentRewind { pos, cached });
        }
        let needed = pos + tokens.len();
        if needed > c.context_length {
            return Err(ModelError::ContextOverflow {
                needed,
                context_length: c.context_length,
            });
        }
        self.backend.truncate(pos);
        Ok(())
    }
}
