//! Gemma 3: sandwich norms (pre and post, around both attention and FFN), per-head QK RMSNorm,
//! GeGLU, embeddings scaled by `sqrt(n_embd)`, and interleaved sliding-window / global layers
//! with their own rope bases (local: `rope.freq_base_swa`, unscaled; global: `rope.freq_base`
//! with the linear rope scaling). Gemma 4 builds on the layer body defined here.

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

/// Attention and dense FFN, each between a pre- and a post-norm: the layer body of Gemma 3 and 4.
pub(super) struct Layer {
    attn_norm: Vec<f32>,
    attn: SelfAttention,
    post_attn_norm: Vec<f32>,
    ffn_norm: Vec<f32>,
    ffn: GatedFfn,
    pub(super) post_ffn_norm: Vec<f32>,
}

impl Layer {
    /// Layer `il`, attending as `spec` says apart from its rope and window, which follow the
    /// layer's kind; `rope_factors` divide the global layers' rope frequencies.
    pub(super) fn load(
        c: &Config,
        w: &Weights,
        il: usize,
        spec: impl FnOnce(RopeTable, Option<usize>) -> AttentionSpec,
        rope_factors: Option<&[f32]>,
    ) -> Result<Self, ModelError> {
        let t = |name| layer_tensor(il, name);
        let n_rot = c.n_rot_at(il);
        let (rope, window) = if c.is_swa(il) {
            let rope = RopeTable::new(RopeStyle::Neox, n_rot, c.rope_base_swa, 1.0, None);
            (rope, c.sliding_window)
        } else {
            let rope = RopeTable::new(
                RopeStyle::Neox,
                n_rot,
                c.rope_base,
                c.rope_freq_scale,
                rope_factors,
            );
            (rope, None)
        };
        Ok(Self {
            attn_norm: norm(w, &t("attn_norm"), c.n_embd)?,
            attn: load_attention(c, w, il, spec(rope, window))?,
            post_attn_norm: norm(w, &t("post_attention_norm"), c.n_embd)?,
            ffn_norm: norm(w, &t("ffn_norm"), c.n_embd)?,
            ffn: load_ffn(c, w, il, Activation::GeluTanh)?,
            post_ffn_norm: norm(w, &t("post_ffw_norm"), c.n_embd)?,
        })
    }

    /// `x += post_norm(attention(pre_norm(x)))` over layer `il` of `cache`.
    pub(super) fn attend(
        &self,
        x: &mut [f32],
        start: usize,
        cache: &mut KvCache,
        il: usize,
        eps: f32,
    ) {
        residual(x, &self.post_attn_norm, eps, |x| {
            self.attn
                .forward(&normed(x, &self.attn_norm, eps), start, cache, il)
        });
    }

    /// The dense FFN of the residual stream `x`, before the post-FFN norm.
    pub(super) fn dense_ffn(&self, x: &[f32], eps: f32) -> Vec<f32> {
        self.ffn.forward(&normed(x, &self.ffn_norm, eps))
    }
}

/// `x += rms_norm(branch(x), post_norm)`: a residual branch normalized on its way out.
pub(super) fn residual(
    x: &mut [f32],
    post_norm: &[f32],
    eps: f32,
    branch: impl FnOnce(&[f32]) -> Vec<f32>,
) {
    let mut y = branch(x);
    rms_norm(&mut y, post_norm, eps);
    add_in_place(x, &y);
}

/// An RMS-normalized copy of `x`.
pub(super) fn normed(x: &[f32], weight: &[f32], eps: f32) -> Vec<f32> {
    let mut h = x.to_vec();
    rms_norm(&mut h, weight, eps);
    h
}

impl Gemma3 {
    pub fn load(c: &Config, w: &Weights) -> Result<Self, ModelError> {
        let query_scalar = if c.n_layer == GEMMA3_27B_LAYERS {
            c.n_embd / c.n_head
        } else {
            c.head_dim_k
        };
        let scale = 1.0 / (query_scalar as f32).sqrt();
        let spec = |rope, window| AttentionSpec {
            rope,
            window,
            qk_norm: true,
            gemma4_values: false,
            scale,
        };
        let layers = (0..c.n_layer)
            .map(|il| Layer::load(c, w, il, spec, None))
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
        let eps = self.eps;
        let mut x = self.head.embed(tokens);
        for (il, l) in self.layers.iter().enumerate() {
            l.attend(&mut x, start, cache, il, eps);
            residual(&mut x, &l.post_ffn_norm, eps, |x| l.dense_ffn(x, eps));
        }
        self.head.logits(&x, which)
    }
}
