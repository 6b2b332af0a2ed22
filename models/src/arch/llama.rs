//! Llama (2 and 3): pre-norm blocks, SwiGLU, adjacent-pair rope with Llama 3's optional
//! per-frequency factors (`rope_freqs.weight`), optional projection biases.

use super::{layer_tensor, load_attention, load_ffn, load_head, norm, AttentionSpec, Transformer};
use crate::config::Config;
use crate::cpu::{
    add_in_place, rms_norm, Activation, EmbeddingHead, GatedFfn, Logits, RopeStyle, RopeTable,
    SelfAttention,
};
use crate::forward::{ModelError, Weights};
use crate::kv_cache::KvCache;

/// A pre-norm decoder: `x += attn(norm(x)); x += ffn(norm(x))`. Also the body of Qwen 3.
pub struct Llama {
    head: EmbeddingHead,
    layers: Vec<Layer>,
    eps: f32,
}

struct Layer {
    attn_norm: Vec<f32>,
    attn: SelfAttention,
    ffn_norm: Vec<f32>,
    ffn: GatedFfn,
}

impl Llama {
    pub fn load(c: &Config, w: &Weights) -> Result<Self, ModelError> {
        const ROPE_FREQS: &str = "rope_freqs.weight";
        let factors = if w.has(ROPE_FREQS) {
            Some(w.tensor(ROPE_FREQS, &[c.n_rot / 2])?)
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
        Self::load_with(c, w, rope, false)
    }

    /// Loads the pre-norm body with the given rope and, if `qk_norm`, per-head QK RMSNorm.
    pub(super) fn load_with(
        c: &Config,
        w: &Weights,
        rope: RopeTable,
        qk_norm: bool,
    ) -> Result<Self, ModelError> {
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
                    attn_norm: norm(w, &t("attn_norm"), c.n_embd)?,
                    attn: load_attention(c, w, il, spec)?,
                    ffn_norm: norm(w, &t("ffn_norm"), c.n_embd)?,
                    ffn: load_ffn(c, w, il, Activation::Silu)?,
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

impl Transformer for Llama {
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
            add_in_place(&mut x, &l.ffn.forward(&h));
        }
        self.head.logits(&x, which)
    }
}
