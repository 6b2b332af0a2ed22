//! Weight-carrying building blocks shared by the architectures: self-attention with a KV cache,
//! the gated feed-forward network, and the embedding / output head.

use super::attention::{attention, AttentionParams};
use super::matmul::Linear;
use super::ops::{rms_norm, rope, softcap, RopeTable};
use crate::kv_cache::KvCache;

/// Grouped-query self-attention: projections, optional per-head QK RMSNorm, rotary embedding,
/// cached causal attention and the output projection.
#[derive(Clone, Debug)]
pub struct SelfAttention {
    pub wq: Linear,
    pub wk: Linear,
    /// `None`: the values are the key projection, taken before the key norm and rope (Gemma 4's
    /// global layers).
    pub wv: Option<Linear>,
    pub wo: Linear,
    /// Per-head RMSNorm weights applied to queries and keys before rope (Gemma 3, Qwen 3).
    pub qk_norm: Option<(Vec<f32>, Vec<f32>)>,
    /// Per-head RMSNorm weights applied to values (Gemma 4: all ones).
    pub v_norm: Option<Vec<f32>>,
    pub norm_eps: f32,
    pub rope: RopeTable,
    pub params: AttentionParams,
}

impl SelfAttention {
    /// Attends the normalized hidden states `x` (`[tokens][n_embd]`, token `t` at position
    /// `start + t`) over layer `layer` of `cache`, which must hold exactly `start` positions for
    /// it; appends this call's keys and values.
    pub fn forward(&self, x: &[f32], start: usize, cache: &mut KvCache, layer: usize) -> Vec<f32> {
        self.wo.forward(&self.attend(x, start, cache, layer))
    }

    /// [`SelfAttention::forward`] before the output projection: `[tokens][n_head * head_dim_v]`,
    /// for architectures that gate the heads before `wo`.
    pub fn attend(&self, x: &[f32], start: usize, cache: &mut KvCache, layer: usize) -> Vec<f32> {
        let p = &self.params;
        let mut q = self.wq.forward(x);
        let mut k = self.wk.forward(x);
        let mut v = self
            .wv
            .as_ref()
            .map_or_else(|| k.clone(), |wv| wv.forward(x));
        if let Some((qn, kn)) = &self.qk_norm {
            rms_norm(&mut q, qn, self.norm_eps);
            rms_norm(&mut k, kn, self.norm_eps);
        }
        if let Some(vn) = &self.v_norm {
            rms_norm(&mut v, vn, self.norm_eps);
        }
        let n_tokens = q.len() / (p.n_head * p.head_dim_k);
        let positions: Vec<usize> = (start..start + n_tokens).collect();
        rope(&mut q, p.head_dim_k, &positions, &self.rope);
        rope(&mut k, p.head_dim_k, &positions, &self.rope);
        let (k_all, v_all) = cache.append(layer, &k, &v);
        attention(&q, k_all, v_all, start, p)
    }
}

/// The activation of a gated feed-forward network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// SwiGLU (Llama, Qwen).
    Silu,
    /// GeGLU with tanh-approximated GELU (Gemma).
    GeluTanh,
}

/// `down(act(gate x) * up x)`.
#[derive(Clone, Debug)]
pub struct GatedFfn {
    pub gate: Linear,
    pub up: Linear,
    pub down: Linear,
    pub activation: Activation,
}

impl GatedFfn {
    pub fn forward(&self, x: &[f32]) -> Vec<f32> {
        let mut h = self.gate.forward(x);
        let up = self.up.forward(x);
        let act = match self.activation {
            Activation::Silu => super::ops::silu,
            Activation::GeluTanh => super::ops::gelu_tanh,
        };
        h.iter_mut().zip(&up).for_each(|(g, u)| *g = act(*g) * u);
        self.down.forward(&h)
    }
}

/// Which positions of a forward pass produce logits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Logits {
    /// Only the last token's (generation).
    Last,
    /// Every token's (`[tokens][vocab]`; for tests and scoring).
    All,
}

/// Token embedding, final norm and language-model head (the embedding itself when tied).
#[derive(Clone, Debug)]
pub struct EmbeddingHead {
    pub embed: Linear,
    /// `None` when the output projection is tied to the embedding.
    pub output: Option<Linear>,
    pub output_norm: Vec<f32>,
    pub norm_eps: f32,
    /// Multiplies embeddings on lookup (Gemma: `sqrt(n_embd)`).
    pub embed_scale: f32,
    pub final_softcap: Option<f32>,
}

impl EmbeddingHead {
    /// `[tokens][n_embd]` hidden states of `tokens`. Token ids must be below the vocabulary size
    /// (the caller checks).
    pub fn embed(&self, tokens: &[u32]) -> Vec<f32> {
        let mut x = Vec::with_capacity(tokens.len() * self.embed.in_dim());
        for &t in tokens {
            x.extend(
                self.embed
                    .row(t as usize)
                    .iter()
                    .map(|v| v * self.embed_scale),
            );
        }
        x
    }

    /// Logits of the final hidden states `x` (`[tokens][n_embd]`).
    pub fn logits(&self, x: &[f32], which: Logits) -> Vec<f32> {
        let n_embd = self.output_norm.len();
        let mut h = match which {
            Logits::Last => x[x.len() - n_embd..].to_vec(),
            Logits::All => x.to_vec(),
        };
        rms_norm(&mut h, &self.output_norm, self.norm_eps);
        let mut logits = self.output.as_ref().unwrap_or(&self.embed).forward(&h);
        if let Some(cap) = self.final_softcap {
            softcap(&mut logits, cap);
        }
        logits
    }
}
