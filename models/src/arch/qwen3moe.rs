//! Qwen 3 MoE (Qwen3-30B-A3B, 235B-A22B) is Qwen 3's body (see qwen3.rs) with a mixture-of-experts
//! FFN in every layer: softmax over all experts, the top `expert_used_count` kept and
//! renormalized to sum to one, SwiGLU experts, no shared expert. This file holds that FFN, which
//! Qwen 3.5 MoE reuses with its gated shared expert.

use super::{layer_tensor, load_experts, GatedFfn, Loader};
use crate::backend::{Activation, Backend, Gating, Result, Router};
use crate::config::Config;
use crate::forward::ModelError;

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
