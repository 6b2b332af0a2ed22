//! Gemma 4, dense (31B) and mixture-of-experts (26B-A4B), as llama.cpp's `src/models/gemma4.cpp`
//! computes it: Gemma 3's layer body (sandwich norms, QK RMSNorm, GeGLU, embeddings scaled by
//! `sqrt(n_embd)`, sliding-window and global layers) with
//! - global layers of their own head width, KV heads and rope width (the `*_swa` keys describe
//!   the local ones), whose rope frequencies are divided by `rope_freqs` ("proportional" rope:
//!   a huge factor leaves a pair unrotated);
//! - values RMS-normalized without weight, and taken from the key projection in layers without
//!   `attn_v`; attention scale 1, as queries and keys are normalized;
//! - each layer's output multiplied by its `layer_output_scale`;
//! - in MoE layers, routed experts beside the dense FFN: the router sees the residual stream
//!   RMS-normalized and scaled by `ffn_gate_inp.scale / sqrt(n_embd)`, picks the top-k of a
//!   softmax and renormalizes their weights; dense and expert outputs each get their own
//!   post-norm before the layer's post-FFN norm of their sum.

use super::gemma3::{normed, residual, Layer as Body};
use super::{layer_tensor, load_experts, load_head, norm, AttentionSpec, Transformer};
use crate::config::Config;
use crate::cpu::{
    add_in_place, rms_norm, Activation, EmbeddingHead, Experts, Gating, Linear, Logits, Router,
};
use crate::forward::{ModelError, Weights};
use crate::kv_cache::KvCache;

pub struct Gemma4 {
    head: EmbeddingHead,
    layers: Vec<Layer>,
    eps: f32,
}

struct Layer {
    body: Body,
    moe: Option<MoeBranch>,
    out_scale: Option<f32>,
}

/// The routed experts of a MoE layer.
struct MoeBranch {
    /// RMSNorm weight of the router's input: `ffn_gate_inp.scale / sqrt(n_embd)`.
    router_norm: Vec<f32>,
    router: Linear,
    pre_norm: Vec<f32>,
    experts: Experts,
    post_norm: Vec<f32>,
    /// Post-norm of the dense FFN's output in MoE layers.
    post_dense_norm: Vec<f32>,
}

impl MoeBranch {
    /// The experts of layer `il`, if it has a router.
    fn load(c: &Config, w: &Weights, il: usize) -> Result<Option<Self>, ModelError> {
        let t = |name| layer_tensor(il, name);
        let router_name = t("ffn_gate_inp");
        if !w.has(&router_name) {
            return Ok(None);
        }
        if c.n_expert_used == 0 {
            return Err(ModelError::BadConfig(
                "MoE layers need expert_count and expert_used_count".into(),
            ));
        }
        let inv_sqrt_embd = 1.0 / (c.n_embd as f32).sqrt();
        let router_scale = w.tensor(&format!("blk.{il}.ffn_gate_inp.scale"), &[c.n_embd])?;
        Ok(Some(Self {
            router_norm: router_scale.iter().map(|s| s * inv_sqrt_embd).collect(),
            router: w.linear(&router_name, c.n_expert, c.n_embd)?,
            pre_norm: norm(w, &t("pre_ffw_norm_2"), c.n_embd)?,
            experts: Experts {
                ffns: load_experts(c, w, il, Activation::GeluTanh)?,
                router: Router {
                    n_used: c.n_expert_used,
                    gating: Gating::SoftmaxTopK,
                    normalize: true,
                    scale: 1.0,
                },
            },
            post_norm: norm(w, &t("post_ffw_norm_2"), c.n_embd)?,
            post_dense_norm: norm(w, &t("post_ffw_norm_1"), c.n_embd)?,
        }))
    }

    /// The experts' post-normed output for the residual stream `x`.
    fn forward(&self, x: &[f32], eps: f32) -> Vec<f32> {
        let logits = self.router.forward(&normed(x, &self.router_norm, eps));
        let mut y = self
            .experts
            .forward(&normed(x, &self.pre_norm, eps), &logits);
        rms_norm(&mut y, &self.post_norm, eps);
        y
    }
}

impl Gemma4 {
    pub fn load(c: &Config, w: &Weights) -> Result<Self, ModelError> {
        // One table for all global layers, as wide as their heads.
        let rope_factors = if (0..c.n_layer).any(|il| !c.is_swa(il)) {
            Some(w.tensor("rope_freqs.weight", &[c.head_dim_k / 2])?)
        } else {
            None
        };
        let spec = |rope, window| AttentionSpec {
            rope,
            window,
            qk_norm: true,
            gemma4_values: true,
            scale: 1.0,
        };
        let layers = (0..c.n_layer)
            .map(|il| {
                let out_scale = layer_tensor(il, "layer_output_scale");
                let out_scale = if w.has(&out_scale) {
                    Some(w.tensor(&out_scale, &[1])?[0])
                } else {
                    None
                };
                Ok(Layer {
                    body: Body::load(c, w, il, spec, rope_factors.as_deref())?,
                    moe: MoeBranch::load(c, w, il)?,
                    out_scale,
                })
            })
            .collect::<Result<_, ModelError>>()?;
        Ok(Self {
            head: load_head(c, w, (c.n_embd as f32).sqrt())?,
            layers,
            eps: c.rms_eps,
        })
    }
}

impl Transformer for Gemma4 {
    fn forward(
        &self,
        tokens: &[u32],
        start: usize,
        cache: &mut KvCache,
        which: Logits,
    ) -> Vec<f32> {
        let eps = self.eps;
        let mut x = self.head.embed(tokens);
        for (il, l) in self.layers.iter().enumerate() {
            l.body.attend(&mut x, start, cache, il, eps);
            residual(&mut x, &l.body.post_ffn_norm, eps, |x| {
                let mut y = l.body.dense_ffn(x, eps);
                if let Some(moe) = &l.moe {
                    rms_norm(&mut y, &moe.post_dense_norm, eps);
                    add_in_place(&mut y, &moe.forward(x, eps));
                }
                y
            });
            if let Some(s) = l.out_scale {
                x.iter_mut().for_each(|v| *v *= s);
            }
        }
        self.head.logits(&x, which)
    }
}
