//! Gemma 3: sandwich norms (pre and post, around both attention and FFN), per-head QK RMSNorm,
//! GeGLU, embeddings scaled by `sqrt(n_embd)`, and interleaved sliding-window / global layers
//! with their own rope bases (local: `rope.freq_base_swa`, unscaled; global: `rope.freq_base`
//! with the linear rope scaling).

use super::{layer_tensor, load_attention, load_ffn, load_head, norm, AttentionSpec, Transformer};
use crate::config::Config;
use crate::cpu::{
    add_in_place, rms_norm, Activation, EmbeddingHead, GatedFfn, Logits, RopeStyle, RopeTable,
    SelfAttention,
};
use crate::forward::{ModelError, Weights};
use crate::kv_cache::KvCache;

/// Layer count of Gemma 3 27B, the one size whose query scale is `1 / sqrt(n_embd / n_head)`
/// (its `query_pre_attn_scalar`) instead of `1 / sqrt(head_dim)`.
const GEMMA3_27B_LAYERS: usize = 62;

pub struct Gemma3 {
    head: EmbeddingHead,
    layers: Vec<Layer>,
    eps: f32,
}

struct Layer {
    attn_norm: Vec<f32>,
    attn: SelfAttention,
    post_attn_norm: Vec<f32>,
    ffn_norm: Vec<f32>,
    ffn: GatedFfn,
    post_ffn_norm: Vec<f32>,
}

impl Gemma3 {
    pub fn load(c: &Config, w: &Weights) -> Result<Self, ModelError> {
        let query_scalar = if c.n_layer == GEMMA3_27B_LAYERS {
            c.n_embd / c.n_head
        } else {
            c.head_dim_k
        };
        let scale = 1.0 / (query_scalar as f32).sqrt();
        let layers = (0..c.n_layer)
            .map(|il| {
                let t = |name| layer_tensor(il, name);
                let swa = c.is_swa(il);
                let rope = if swa {
                    RopeTable::new(RopeStyle::Neox, c.n_rot, c.rope_base_swa, 1.0, None)
                } else {
                    RopeTable::new(
                        RopeStyle::Neox,
                        c.n_rot,
                        c.rope_base,
                        c.rope_freq_scale,
                        None,
                    )
                };
                let window = if swa { c.sliding_window } else { None };
                Ok(Layer {
                    attn_norm: norm(w, &t("attn_norm"), c.n_embd)?,
                    attn: load_attention(
                        c,
                        w,
                        il,
                        AttentionSpec {
                            rope,
                            window,
                            qk_norm: true,
                            scale,
                        },
                    )?,
                    post_attn_norm: norm(w, &t("post_attention_norm"), c.n_embd)?,
                    ffn_norm: norm(w, &t("ffn_norm"), c.n_embd)?,
                    ffn: load_ffn(c, w, il, Activation::GeluTanh)?,
                    post_ffn_norm: norm(w, &t("post_ffw_norm"), c.n_embd)?,
                })
            })
            .collect::<Result<_, ModelError>>()?;
        let head = load_head(c, w, (c.n_embd as f32).sqrt())?;
        Ok(Self {
            head,
            layers,
            eps: c.rms_eps,
        })
    }
}

impl Transformer for Gemma3 {
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
            let mut a = l.attn.forward(&h, start, cache, il);
            rms_norm(&mut a, &l.post_attn_norm, self.eps);
            add_in_place(&mut x, &a);

            let mut h = x.clone();
            rms_norm(&mut h, &l.ffn_norm, self.eps);
            let mut f = l.ffn.forward(&h);
            rms_norm(&mut f, &l.post_ffn_norm, self.eps);
            add_in_place(&mut x, &f);
        }
        self.head.logits(&x, which)
    }
}
