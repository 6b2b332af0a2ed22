//! One file per architecture. Each describes its layers with the shared blocks of
//! [`crate::cpu`] and says how they are wired; this module holds the common loading helpers.

mod gemma3;
mod llama;
mod qwen3;

use crate::config::Config;
use crate::cpu::{
    Activation, AttentionParams, EmbeddingHead, GatedFfn, Linear, Logits, RopeTable, SelfAttention,
};
use crate::forward::{ModelError, Weights};
use crate::kv_cache::KvCache;

pub(crate) const TOKEN_EMBD: &str = "token_embd.weight";

/// The architectures the CPU forward pass implements, by their `general.architecture` name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    Gemma3,
    Llama,
    Qwen3,
}

impl Arch {
    pub const ALL: &'static [Arch] = &[Arch::Gemma3, Arch::Llama, Arch::Qwen3];

    pub fn name(self) -> &'static str {
        match self {
            Arch::Gemma3 => "gemma3",
            Arch::Llama => "llama",
            Arch::Qwen3 => "qwen3",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|a| a.name() == name)
    }
}

/// A loaded network: runs tokens through its layers, filling the KV cache.
pub(crate) trait Transformer: Send + Sync {
    /// Logits of `tokens` at positions `start..`; `cache` holds exactly `start` positions.
    fn forward(&self, tokens: &[u32], start: usize, cache: &mut KvCache, which: Logits)
        -> Vec<f32>;
}

pub(crate) fn load(config: &Config, w: &Weights) -> Result<Box<dyn Transformer>, ModelError> {
    Ok(match config.arch {
        Arch::Gemma3 => Box::new(gemma3::Gemma3::load(config, w)?),
        Arch::Llama => Box::new(llama::Llama::load(config, w)?),
        Arch::Qwen3 => Box::new(qwen3::load(config, w)?),
    })
}

/// `blk.{layer}.{name}.weight`.
fn layer_tensor(layer: usize, name: &str) -> String {
    format!("blk.{layer}.{name}.weight")
}

fn norm(w: &Weights, name: &str, len: usize) -> Result<Vec<f32>, ModelError> {
    w.tensor(name, &[len])
}

/// How an architecture configures one layer's attention.
struct AttentionSpec {
    rope: RopeTable,
    window: Option<usize>,
    qk_norm: bool,
    scale: f32,
}

fn load_attention(
    c: &Config,
    w: &Weights,
    layer: usize,
    spec: AttentionSpec,
) -> Result<SelfAttention, ModelError> {
    let t = |name| layer_tensor(layer, name);
    let (q_dim, k_dim) = (c.n_head * c.head_dim_k, c.n_head_kv * c.head_dim_k);
    let qk_norm = if spec.qk_norm {
        Some((
            norm(w, &t("attn_q_norm"), c.head_dim_k)?,
            norm(w, &t("attn_k_norm"), c.head_dim_k)?,
        ))
    } else {
        None
    };
    Ok(SelfAttention {
        wq: w.linear(&t("attn_q"), q_dim, c.n_embd)?,
        wk: w.linear(&t("attn_k"), k_dim, c.n_embd)?,
        wv: w.linear(&t("attn_v"), c.n_head_kv * c.head_dim_v, c.n_embd)?,
        wo: w.linear(&t("attn_output"), c.n_embd, c.n_head * c.head_dim_v)?,
        qk_norm,
        norm_eps: c.rms_eps,
        rope: spec.rope,
        params: AttentionParams {
            n_head: c.n_head,
            n_head_kv: c.n_head_kv,
            head_dim_k: c.head_dim_k,
            head_dim_v: c.head_dim_v,
            scale: spec.scale,
            window: spec.window,
            softcap: c.attn_logit_softcap,
        },
    })
}

fn load_ffn(
    c: &Config,
    w: &Weights,
    layer: usize,
    activation: Activation,
) -> Result<GatedFfn, ModelError> {
    let t = |name| layer_tensor(layer, name);
    Ok(GatedFfn {
        gate: w.linear(&t("ffn_gate"), c.n_ff, c.n_embd)?,
        up: w.linear(&t("ffn_up"), c.n_ff, c.n_embd)?,
        down: w.linear(&t("ffn_down"), c.n_embd, c.n_ff)?,
        activation,
    })
}

/// Embedding, final norm and output head; the head is tied to the embedding when the file has
/// no `output.weight`.
fn load_head(c: &Config, w: &Weights, embed_scale: f32) -> Result<EmbeddingHead, ModelError> {
    const OUTPUT: &str = "output.weight";
    let output = if w.has(OUTPUT) {
        Some(w.linear(OUTPUT, c.n_vocab, c.n_embd)?)
    } else {
        None
    };
    Ok(EmbeddingHead {
        embed: Linear::new(
            c.n_vocab,
            c.n_embd,
            w.tensor(TOKEN_EMBD, &[c.n_embd, c.n_vocab])?,
            None,
        ),
        output,
        output_norm: norm(w, "output_norm.weight", c.n_embd)?,
        norm_eps: c.rms_eps,
        embed_scale,
        final_softcap: c.final_logit_softcap,
    })
}
