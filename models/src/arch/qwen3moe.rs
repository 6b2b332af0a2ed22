//! Qwen 3 MoE (Qwen3-30B-A3B, 235B-A22B): Qwen 3's attention (per-head QK RMSNorm, NeoX rope)
//! with a mixture-of-experts FFN in every layer: softmax over all experts, the top
//! `expert_used_count` kept and renormalized to sum to one, SwiGLU experts, no shared expert.

use super::{
    layer_tensor, load_experts, pre_norm_residual, Attention, AttentionSpec, GatedFfn, Head,
    Loader, Transformer,
};
use crate::backend::{Activation, Backend, Gating, Logits, Result, RopeStyle, RopeTable, Router};
use crate::config::Config;
use crate::forward::ModelError;

pub struct Qwen3Moe<B: Backend> {
    head: Head<B>,
    layers: Vec<Layer<B>>,
    eps: f32,
}

struct Layer<B: Backend> {
    attn_norm: B::Vector,
    attn: Attention<B>,
    ffn_norm: B::Vector,
    moe: MoeFfn<B>,
}

/// A mixture-of-experts FFN with its router projection: `experts(x) + shared(x)`.
pub(super) struct MoeFfn<B: Backend> {
    /// `[n_expert][n_embd]` router projection (`ffn_gate_inp`).
    gate_inp: B::Matrix,
    router: Router,
    experts: B::Experts,
    pub(super) shared: Option<SharedExpert<B>>,
}

/// An expert every token goes through, optionally scaled by `sigmoid(gate · x)` (Qwen 3.5 MoE).
pub(super) struct SharedExpert<B: Backend> {
    pub ffn: GatedFfn<B>,
    /// A one-row projection giving the per-token gate logit.
    pub gate: Option<B::Matrix>,
}

impl<B: Backend> MoeFfn<B> {
    /// Qwen 3 MoE and Qwen 3.5 MoE route alike. llama.cpp always renormalizes the top-k weights
    /// for both (it ignores `expert_weights_norm`) and applies no `expert_weights_scale`.
    pub(super) fn load(c: &Config, w: &Loader<B>, layer: usize) -> Result<Self> {
        if c.n_expert == 0 || c.n_expert_used == 0 {
            return Err(ModelError::BadConfig(
                "expert_count and expert_used_count must be nonzero".into(),
            ));
        }
        Ok(Self {
            gate_inp: w.matrix(&layer_tensor(layer, "ffn_gate_inp"), c.n_expert, c.n_embd)?,
            router: Router {
                n_used: c.n_expert_used,
                gating: Gating::SoftmaxTopK,
                normalize: true,
                scale: 1.0,
            },
            experts: load_experts(c, w, layer, Activation::Silu)?,
            shared: None,
        })
    }

    pub(super) fn forward(&self, b: &B, x: &B::Tensor) -> Result<B::Tensor> {
        let logits = b.matmul(x, &self.gate_inp)?;
        let mut y = b.moe(x, &logits, &self.experts, &self.router)?;
        if let Some(shared) = &self.shared {
            let mut s = shared.ffn.forward(b, x)?;
            if let Some(gate) = &shared.gate {
                b.gate_rows(&mut s, &b.matmul(x, gate)?)?;
            }
            b.add(&mut y, &s)?;
        }
        Ok(y)
    }
}

impl<B: Backend> Qwen3Moe<B> {
    pub fn load(c: &Config, w: &Loader<B>) -> Result<Self> {
        let rope = RopeTable::new(
            RopeStyle::Neox,
            c.n_rot,
            c.rope_base,
            c.rope_freq_scale,
            None,
        );
        let scale = 1.0 / (c.head_dim_k as f32).sqrt();
        let layers = (0..c.n_layer)
            .map(|il| {
                let spec = AttentionSpec {
                    rope: rope.clone(),
                    window: None,
                    qk_norm: true,
                    gemma4_values: false,
                    scale,
                };
                Ok(Layer {
                    attn_norm: w.vector(&layer_tensor(il, "attn_norm"), c.n_embd)?,
                    attn: Attention::load(c, w, il, spec)?,
                    ffn_norm: w.vector(&layer_tensor(il, "ffn_norm"), c.n_embd)?,
                    moe: MoeFfn::load(c, w, il)?,
                })
            })
            .collect::<Result<_>>()?;
        Ok(Self {
            head: Head::load(c, w, 1.0)?,
            layers,
            eps: c.rms_eps,
        })
    }
}

impl<B: Backend> Transformer<B> for Qwen3Moe<B> {
    fn forward(&self, b: &mut B, tokens: &[u32], start: usize, which: Logits) -> Result<Vec<f32>> {
        let mut x = self.head.embed(b, tokens)?;
        for (il, l) in self.layers.iter().enumerate() {
            pre_norm_residual(b, &mut x, &l.attn_norm, self.eps, |b, h| {
                l.attn.forward(b, h, start, il)
            })?;
            pre_norm_residual(b, &mut x, &l.ffn_norm, self.eps, |b, h| l.moe.forward(b, h))?;
        }
        self.head.logits(b, &x, which)
    }
}
