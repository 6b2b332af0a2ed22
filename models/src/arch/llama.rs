//! Llama (2 and 3): pre-norm blocks, SwiGLU, adjacent-pair rope with Llama 3's optional
//! per-frequency factors (`rope_freqs.weight`), optional projection biases.

use super::qwen3moe::MoeFfn;
use super::{
    layer_tensor, pre_norm_residual, Attention, AttentionSpec, Branch, GatedFfn, Head, Loader,
    LogitsOn, Residual, Transformer,
};
use crate::backend::{Activation, Backend, Logits, Result, RopeStyle, RopeTable};
use crate::config::Config;

/// A pre-norm decoder: `x += attn(norm(x)); x += ffn(norm(x))`. Also the body of Qwen 3 and,
/// with a mixture-of-experts FFN, of Qwen 3 MoE.
pub struct Llama<B: Backend> {
    head: Head<B>,
    layers: Vec<Layer<B>>,
    eps: f32,
}

struct Layer<B: Backend> {
    attn_norm: B::Vector,
    attn: Attention<B>,
    ffn_norm: B::Vector,
    ffn: Ffn<B>,
}

/// The feed-forward block of a layer: one SwiGLU FFN, or routed experts.
enum Ffn<B: Backend> {
    Dense(GatedFfn<B>),
    Experts(MoeFfn<B>),
}

impl<B: Backend> Ffn<B> {
    fn branch(&self, b: &B, x: &B::Tensor) -> Result<Branch<'_, B>> {
        match self {
            Ffn::Dense(ffn) => ffn.branch(b, x),
            Ffn::Experts(moe) => Ok(Branch::Tensor(moe.forward(b, x)?)),
        }
    }
}

pub(super) fn load<B: Backend>(c: &Config, w: &Loader<B>) -> Result<Llama<B>> {
    const ROPE_FREQS: &str = "rope_freqs.weight";
    let factors = if w.has(ROPE_FREQS) {
        Some(w.f32(ROPE_FREQS, &[c.n_rot / 2])?)
    } else {
        None
    };
    let rope = RopeTable::new(
        RopeStyle::Normal,
        c.n_rot,
        c.rope_base,
        c.rope_freq_scale,
        factors.as_deref(),
    );
    Llama::load_with(c, w, rope, false, false)
}

impl<B: Backend> Llama<B> {
    /// Loads the pre-norm body with the given rope, per-head QK RMSNorm if `qk_norm`, and a
    /// mixture-of-experts FFN in every layer if `experts`.
    pub(super) fn load_with(
        c: &Config,
        w: &Loader<B>,
        rope: RopeTable,
        qk_norm: bool,
        experts: bool,
    ) -> Result<Self> {
        let scale = 1.0 / (c.head_dim_k as f32).sqrt();
        let layers = (0..c.n_layer)
            .map(|il| {
                let t = |name| layer_tensor(il, name);
                let spec = AttentionSpec {
                    rope: rope.clone(),
                    window: None,
                    qk_norm,
                    gemma4_values: false,
                    scale,
                };
                Ok(Layer {
                    attn_norm: w.vector(&t("attn_norm"), c.n_embd)?,
                    attn: Attention::load(c, w, il, spec)?,
                    ffn_norm: w.vector(&t("ffn_norm"), c.n_embd)?,
                    ffn: if experts {
                        Ffn::Experts(MoeFfn::load(c, w, il)?)
                    } else {
                        Ffn::Dense(GatedFfn::load(c, w, il, Activation::Silu)?)
                    },
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

impl<B: Backend> Transformer<B> for Llama<B> {
    fn forward(&self, b: &mut B, tokens: &[u32], start: usize, which: Logits) -> LogitsOn<B> {
        let mut x = Residual::new(self.head.embed(b, tokens)?);
        for (il, l) in self.layers.iter().enumerate() {
            pre_norm_residual(b, &mut x, &l.attn_norm, self.eps, |b, h| {
                l.attn.branch(b, h, start, il)
            })?;
            pre_norm_residual(b, &mut x, &l.ffn_norm, self.eps, |b, h| l.ffn.branch(b, h))?;
        }
        self.head.logits(b, &mut x, which)
    }
}
