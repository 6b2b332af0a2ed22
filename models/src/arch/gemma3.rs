//! Gemma 3: sandwich norms (pre and post, around both attention and FFN), per-head QK RMSNorm,
//! GeGLU, embeddings scaled by `sqrt(n_embd)`, and interleaved sliding-window / global layers
//! with their own rope bases (local: `rope.freq_base_swa`, unscaled; global: `rope.freq_base`
//! with the linear rope scaling). Gemma 4 builds on the layer body defined here.

use super::{
    layer_tensor, Attention, AttentionSpec, GatedFfn, Head, Loader, LogitsOn, Residual, Transformer,
};
use crate::backend::{Activation, Backend, Logits, Result, RopeStyle, RopeTable};
use crate::config::Config;

/// Layer count of Gemma 3 27B, the one size whose query scale is `1 / sqrt(n_embd / n_head)`
/// (its `query_pre_attn_scalar`) instead of `1 / sqrt(head_dim)`.
const GEMMA3_27B_LAYERS: usize = 62;

pub struct Gemma3<B: Backend> {
    head: Head<B>,
    layers: Vec<Layer<B>>,
    eps: f32,
}

/// Attention and dense FFN, each between a pre- and a post-norm: the layer body of Gemma 3 and 4.
pub(super) struct Layer<B: Backend> {
    attn_norm: B::Vector,
    attn: Attention<B>,
    post_attn_norm: B::Vector,
    ffn_norm: B::Vector,
    ffn: GatedFfn<B>,
    pub(super) post_ffn_norm: B::Vector,
}

impl<B: Backend> Layer<B> {
    /// Layer `il`, attending as `spec` says apart from its rope and window, which follow the
    /// layer's kind; `rope_factors` divide the global layers' rope frequencies.
    pub(super) fn load(
        c: &Config,
        w: &Loader<B>,
        il: usize,
        spec: impl FnOnce(RopeTable, Option<usize>) -> AttentionSpec,
        rope_factors: Option<&[f32]>,
    ) -> Result<Self> {
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
            attn_norm: w.vector(&t("attn_norm"), c.n_embd)?,
            attn: Attention::load(c, w, il, spec(rope, window))?,
            post_attn_norm: w.vector(&t("post_attention_norm"), c.n_embd)?,
            ffn_norm: w.vector(&t("ffn_norm"), c.n_embd)?,
            ffn: GatedFfn::load(c, w, il, Activation::GeluTanh)?,
            post_ffn_norm: w.vector(&t("post_ffw_norm"), c.n_embd)?,
        })
    }

    /// `x += post_norm(attention(pre_norm(x)))` over layer `il` of the cache.
    pub(super) fn attend(
        &self,
        b: &mut B,
        x: &mut Residual<B>,
        start: usize,
        il: usize,
        eps: f32,
    ) -> Result<()> {
        let h = x.norm(b, &self.attn_norm, eps)?;
        let y = self.attn.forward(b, &h, start, il)?;
        x.add(b, b.rms_norm(&y, &self.post_attn_norm, eps)?)
    }

    /// The dense FFN of the residual stream `x`, before the post-FFN norm.
    pub(super) fn dense_ffn(&self, b: &B, x: &mut Residual<B>, eps: f32) -> Result<B::Tensor> {
        self.ffn.forward(b, &x.norm(b, &self.ffn_norm, eps)?)
    }
}

impl<B: Backend> Gemma3<B> {
    pub fn load(c: &Config, w: &Loader<B>) -> Result<Self> {
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
            .collect::<Result<_>>()?;
        Ok(Self {
            head: Head::load(c, w, (c.n_embd as f32).sqrt())?,
            layers,
            eps: c.rms_eps,
        })
    }
}

impl<B: Backend> Transformer<B> for Gemma3<B> {
    fn forward(&self, b: &mut B, tokens: &[u32], start: usize, which: Logits) -> LogitsOn<B> {
        let eps = self.eps;
        let mut x = Residual::new(self.head.embed(b, tokens)?);
        for (il, l) in self.layers.iter().enumerate() {
            l.attend(b, &mut x, start, il, eps)?;
            let y = l.dense_ffn(b, &mut x, eps)?;
            x.add(b, b.rms_norm(&y, &l.post_ffn_norm, eps)?)?;
        }
        self.head.logits(b, &mut x, which)
    }
}
