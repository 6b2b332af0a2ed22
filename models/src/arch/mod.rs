//! One file per architecture. Each describes its layers with the shared blocks of
//! [`crate::cpu`] and says how they are wired; this module holds the common loading helpers.

mod gemma3;
mod gemma4;
mod llama;
mod qwen3;
mod qwen35;
mod qwen3moe;

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
    Gemma4,
    Llama,
    Qwen3,
    Qwen3Moe,
    Qwen35,
    Qwen35Moe,
}

impl Arch {
    pub const ALL: &'static [Arch] = &[
        Arch::Gemma3,
        Arch::Gemma4,
        Arch::Llama,
        Arch::Qwen3,
        Arch::Qwen3Moe,
        Arch::Qwen35,
        Arch::Qwen35Moe,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Arch::Gemma3 => "gemma3",
            Arch::Gemma4 => "gemma4",
            Arch::Llama => "llama",
            Arch::Qwen3 => "qwen3",
            Arch::Qwen3Moe => "qwen3moe",
            Arch::Qwen35 => "qwen35",
            Arch::Qwen35Moe => "qwen35moe",
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
        Arch::Gemma4 => Box::new(gemma4::Gemma4::load(config, w)?),
        Arch::Llama => Box::new(llama::Llama::load(config, w)?),
        Arch::Qwen3 => Box::new(qwen3::load(config, w)?),
        Arch::Qwen3Moe => Box::new(qwen3moe::Qwen3Moe::load(config, w)?),
        Arch::Qwen35 | Arch::Qwen35Moe => Box::new(qwen35::Qwen35::load(config, w)?),
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
    /// Unit-weight RMSNorm of values, and values taken from the key projection in layers
    /// without `attn_v` (Gemma 4).
    gemma4_values: bool,
    scale: f32,
}

fn load_attention(
    c: &Config,
    w: &Weights,
    layer: usize,
    spec: AttentionSpec,
) -> Result<SelfAttention, ModelError> {
    let t = |name| layer_tensor(layer, name);
    let (n_head_kv, head_dim_k, head_dim_v) = (
        c.n_head_kv_at(layer),
        c.head_dim_k_at(layer),
        c.head_dim_v_at(layer),
    );
    let qk_norm = if spec.qk_norm {
        Some((
            norm(w, &t("attn_q_norm"), head_dim_k)?,
            norm(w, &t("attn_k_norm"), head_dim_k)?,
        ))
    } else {
        None
    };
    let v_name = t("attn_v");
    let wv = if spec.gemma4_values && !w.has(&v_name) {
        if head_dim_v != head_dim_k {
            return Err(ModelError::BadConfig(
                "values taken from keys need value_length == key_length".into(),
            ));
        }
        None
    } else {
        Some(w.linear(&v_name, n_head_kv * head_dim_v, c.n_embd)?)
    };
    Ok(SelfAttention {
        wq: w.linear(&t("attn_q"), c.n_head * head_dim_k, c.n_embd)?,
        wk: w.linear(&t("attn_k"), n_head_kv * head_dim_k, c.n_embd)?,
        wv,
        wo: w.linear(&t("attn_output"), c.n_embd, c.n_head * head_dim_v)?,
        qk_norm,
        v_norm: spec.gemma4_values.then(|| vec![1.0; head_dim_v]),
        norm_eps: c.rms_eps,
        rope: spec.rope,
        params: AttentionParams {
            n_head: c.n_head,
            n_head_kv,
            head_dim_k,
            head_dim_v,
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

/// The routed experts of layer `layer`: `ffn_{gate,up,down}_exps` (`[n_expert]` outermost), gate
/// and up alternatively fused in `ffn_gate_up_exps` (gate rows first). Where the file has
/// per-expert output scales of the separate projections (`ffn_*_exps.scale`, as llama.cpp reads
/// them), they are folded into the weights.
fn load_experts(
    c: &Config,
    w: &Weights,
    layer: usize,
    activation: Activation,
) -> Result<Vec<GatedFfn>, ModelError> {
    let (n_embd, ff, n_expert) = (c.n_embd, c.n_ff_exp, c.n_expert);
    let t = |name: &str, suffix: &str| format!("blk.{layer}.{name}.{suffix}");
    // Every expert's `[out][in]` matrix of `name`.
    let load = |name: &str, out: usize, inp: usize, scaled: bool| {
        let all = w.tensor(&t(name, "weight"), &[inp, out, n_expert])?;
        let scales = match t(name, "scale") {
            s if scaled && w.has(&s) => Some(w.tensor(&s, &[n_expert])?),
            _ => None,
        };
        let experts = all.chunks_exact(out * inp).enumerate().map(|(e, m)| {
            let s = scales.as_ref().map_or(1.0, |s| s[e]);
            m.iter().map(|v| v * s).collect::<Vec<f32>>()
        });
        Ok::<_, ModelError>(experts.collect::<Vec<_>>())
    };
    let (gates, ups): (Vec<_>, Vec<_>) = if w.has(&t("ffn_gate_up_exps", "weight")) {
        let fused = load("ffn_gate_up_exps", 2 * ff, n_embd, false)?;
        fused
            .into_iter()
            .map(|mut gate| {
                let up = gate.split_off(ff * n_embd);
                (gate, up)
            })
            .unzip()
    } else {
        (
            load("ffn_gate_exps", ff, n_embd, true)?,
            load("ffn_up_exps", ff, n_embd, true)?,
        )
    };
    let downs = load("ffn_down_exps", n_embd, ff, true)?;
    Ok(gates
        .into_iter()
        .zip(ups)
        .zip(downs)
        .map(|((gate, up), down)| GatedFfn {
            gate: Linear::new(ff, n_embd, gate, None),
            up: Linear::new(ff, n_embd, up, None),
            down: Linear::new(n_embd, ff, down, None),
            activation,
        })
        .collect())
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
