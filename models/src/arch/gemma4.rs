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

use super::gemma3::Layer as Body;
use super::{
    layer_tensor, load_experts, AttentionSpec, Head, Loader, LogitsOn, Residual, Transformer,
};
use crate::backend::{Activation, Backend, Gating, Logits, Result, Router};
use crate::config::Config;
use crate::forward::ModelError;

pub struct Gemma4<B: Backend> {
    head: Head<B>,
    layers: Vec<Layer<B>>,
    eps: f32,
}

struct Layer<B: Backend> {
    body: Body<B>,
    moe: Option<MoeBranch<B>>,
    out_scale: Option<f32>,
}

/// The routed experts of a MoE layer.
struct MoeBranch<B: Backend> {
    /// RMSNorm weight of the router's input: `ffn_gate_inp.scale / sqrt(n_embd)`.
    router_norm: B::Vector,
    router_proj: B::Matrix,
    router: Router,
    pre_norm: B::Vector,
    experts: B::Experts,
    post_norm: B::Vector,
    /// Post-norm of the dense FFN's output in MoE layers.
    post_dense_norm: B::Vector,
}

impl<B: Backend> MoeBranch<B> {
    /// The experts of layer `il`, if it has a router.
    fn load(c: &Config, w: &Loader<B>, il: usize) -> Result<Option<Self>> {
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
        let router_scale = w.f32(&format!("blk.{il}.ffn_gate_inp.scale"), &[c.n_embd])?;
        Ok(Some(Self {
            router_norm: w.upload(router_scale.iter().map(|s| s * inv_sqrt_embd).collect())?,
            router_proj: w.matrix(&router_name, c.n_expert, c.n_embd)?,
            router: Router {
                n_used: c.n_expert_used,
                gating: Gating::SoftmaxTopK,
                normalize: true,
                scale: 1.0,
            },
            pre_norm: w.vector(&t("pre_ffw_norm_2"), c.n_embd)?,
            experts: load_experts(c, w, il, Activation::GeluTanh)?,
            post_norm: w.vector(&t("post_ffw_norm_2"), c.n_embd)?,
            post_dense_norm: w.vector(&t("post_ffw_norm_1"), c.n_embd)?,
        }))
    }

    /// The experts' post-normed output for the residual stream `x`.
    fn forward(&self, b: &B, x: &B::Tensor, eps: f32) -> Result<B::Tensor> {
        let logits = b.matmul(&b.rms_norm(x, &self.router_norm, eps)?, &self.router_proj)?;
        let h = b.rms_norm(x, &self.pre_norm, eps)?;
        let y = b.moe(&h, &logits, &self.experts, &self.router)?;
        b.rms_norm(&y, &self.post_norm, eps)
    }
}

impl<B: Backend> Gemma4<B> {
    pub fn load(c: &Config, w: &Loader<B>) -> Result<Self> {
        // One table for all global layers, as wide as their heads.
        let rope_factors = if (0..c.n_layer).any(|il| !c.is_swa(il)) {
            Some(w.f32("rope_freqs.weight", &[c.head_dim_k / 2])?)
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
                    Some(w.f32(&out_scale, &[1])?[0])
                } else {
                    None
                };
                Ok(Layer {
                    body: Body::load(c, w, il, spec, rope_factors.as_deref())?,
                    moe: MoeBranch::load(c, w, il)?,
                    out_scale,
                })
            })
            .collect::<Result<_>>()?;
        Ok(Self {
            head: Head::load(c, w, (c.n_embd as f32).sqrt())?,
            layers,
            eps: c.rms_eps,
        })
    }
}

impl<B: Backend> Transformer<B> for Gemma4<B> {
    fn forward(&self, b: &mut B, tokens: &[u32], start: usize, which: Logits) -> LogitsOn<B> {
        let eps = self.eps;
        let mut x = Residual::new(self.head.embed(b, tokens)?);
        for (il, l) in self.layers.iter().enumerate() {
            l.body.attend(b, &mut x, start, il, eps)?;
            let mut y = l.body.dense_ffn(b, &mut x, eps)?;
            if let Some(moe) = &l.moe {
                // The dense FFN's norm has applied the attention's add.
                y = b.rms_norm(&y, &moe.post_dense_norm, eps)?;
                b.add(&mut y, &moe.forward(b, x.settle(b)?, eps)?)?;
            }
            x.add(b, b.rms_norm(&y, &l.body.post_ffn_norm, eps)?)?;
            if let Some(s) = l.out_scale {
                b.scale(x.settle(b)?, s)?;
            }
        }
        self.head.logits(b, &mut x, which)
    }
}
