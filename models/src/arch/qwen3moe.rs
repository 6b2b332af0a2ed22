//! Qwen 3 MoE (Qwen3-30B-A3B, 235B-A22B): Qwen 3's attention (per-head QK RMSNorm, NeoX rope)
//! with a mixture-of-experts FFN in every layer: softmax over all experts, the top
//! `expert_used_count` kept and renormalized to sum to one, SwiGLU experts, no shared expert.

use super::Transformer;
use super::{layer_tensor, load_attention, load_experts, load_head, norm, AttentionSpec};
use crate::config::Config;
use crate::cpu::{
    add_in_place, rms_norm, Activation, EmbeddingHead, Experts, Gating, Logits, MoeFfn, RopeStyle,
    RopeTable, Router, SelfAttention,
};
use crate::forward::{ModelError, Weights};
use crate::kv_cache::KvCache;

pub struct Qwen3Moe {
    head: EmbeddingHead,
    layers: Vec<Layer>,
    eps: f32,
}

struct Layer {
    attn_norm: Vec<f32>,
    attn: SelfAttention,
    ffn_norm: Vec<f32>,
    moe: MoeFfn,
}

/// Qwen 3 MoE and Qwen 3.5 MoE route alike. llama.cpp always renormalizes the top-k weights for
/// both (it ignores `expert_weights_norm`) and applies no `expert_weights_scale`.
pub(super) fn load_moe(c: &Config, w: &Weights, layer: usize) -> Result<MoeFfn, ModelError> {
    if c.n_expert == 0 || c.n_expert_used == 0 {
        return Err(ModelError::BadConfig(
            "expert_count and expert_used_count must be nonzero".into(),
        ));
    }
    let router = Router {
        n_used: c.n_expert_used,
        gating: Gating::SoftmaxTopK,
        normalize: true,
        scale: 1.0,
    };
    Ok(MoeFfn {
        gate_inp: w.linear(&layer_tensor(layer, "ffn_gate_inp"), c.n_expert, c.n_embd)?,
        experts: Experts {
            ffns: load_experts(c, w, layer, Activation::Silu)?,
            router,
        },
        shared: None,
    })
}

impl Qwen3Moe {
    pub fn load(c: &Config, w: &Weights) -> Result<Self, ModelError> {
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
                    attn_norm: norm(w, &layer_tensor(il, "attn_norm"), c.n_embd)?,
                    attn: load_attention(c, w, il, spec)?,
                    ffn_norm: norm(w, &layer_tensor(il, "ffn_norm"), c.n_embd)?,
                    moe: load_moe(c, w, il)?,
                })
            })
            .collect::<Result<_, ModelError>>()?;
        Ok(Self {
            head: load_head(c, w, 1.0)?,
            layers,
            eps: c.rms_eps,
        })
    }
}

impl Transformer for Qwen3Moe {
    fn forward(
        &self,
        tokens: &[u32],
        start: usize,
        cache: &mut KvCache,
        which: Logits,
    ) -> Vec<f32> {
        let mut x = self.head.embed(tokens);
        for (il, l) in self.layers.iter().enumerate() {
            let mut h = x.clone();
            rms_norm(&mut h, &l.attn_norm, self.eps);
            add_in_place(&mut x, &l.attn.forward(&h, start, cache, il));
            let mut h = x.clone();
            rms_norm(&mut h, &l.ffn_norm, self.eps);
            add_in_place(&mut x, &l.moe.forward(&h));
        }
        self.head.logits(&x, which)
    }
}
