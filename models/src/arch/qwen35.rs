//! Qwen 3.5, dense (`qwen35`) and MoE (`qwen35moe`): a hybrid whose layers are mostly gated
//! delta nets (linear attention with a causal conv1d, see [`crate::cpu::gated_delta_rule`]),
//! with full attention every `full_attention_interval`-th layer. The attention layers project a
//! sigmoid gate for each head along with its query, normalize Q and K per head and rotate a
//! part of each head with interleaved M-RoPE. Every layer is `x += mixer(norm(x));
//! x += ffn(post_attention_norm(x))`, the FFN being SwiGLU or Qwen 3 MoE's routed experts plus
//! a sigmoid-gated shared expert.

use super::qwen3moe::{MoeFfn, SharedExpert};
use super::{
    layer_tensor, pre_norm_residual, Attention, AttentionParams, Branch, GatedFfn, Head, Loader,
    LogitsOn, Residual, Transformer, Values,
};
use crate::backend::{
    Activation, Backend, DeltaNetShape, DeltaNetStep, Logits, Result, RopeStyle, RopeTable,
};
use crate::config::{Config, DeltaNetConfig};
use crate::forward::ModelError;

pub struct Qwen35<B: Backend> {
    head: Head<B>,
    layers: Vec<Layer<B>>,
    eps: f32,
}

struct Layer<B: Backend> {
    attn_norm: B::Vector,
    mixer: Mixer<B>,
    post_attn_norm: B::Vector,
    ffn: Ffn<B>,
}

enum Mixer<B: Backend> {
    DeltaNet(DeltaNet<B>),
    Attention(GatedAttention<B>),
}

enum Ffn<B: Backend> {
    Dense(GatedFfn<B>),
    Moe(MoeFfn<B>),
}

impl<B: Backend> Qwen35<B> {
    /// Loads either variant: the MoE one (`qwen35moe`) has `expert_count` experts per layer.
    pub fn load(c: &Config, w: &Loader<B>) -> Result<Self> {
        let dn = c
            .delta_net
            .as_ref()
            .ok_or_else(|| ModelError::BadConfig("missing the ssm.* keys".into()))?;
        let factors = c
            .rope_sections
            .and_then(|s| imrope_text_factors(c.n_rot, s));
        let rope = RopeTable::new(
            RopeStyle::Neox,
            c.n_rot,
            c.rope_base,
            c.rope_freq_scale,
            factors.as_deref(),
        );
        let layers = dn
            .layers
            .iter()
            .enumerate()
            .map(|(il, &recurrent)| {
                let mixer = if recurrent {
                    Mixer::DeltaNet(DeltaNet::load(c, dn, w, il)?)
                } else {
                    Mixer::Attention(GatedAttention::load(c, w, il, rope.clone())?)
                };
                let ffn = if c.n_expert > 0 {
                    Ffn::Moe(load_moe_with_shared(c, w, il)?)
                } else {
                    Ffn::Dense(GatedFfn::load(c, w, il, Activation::Silu)?)
                };
                Ok(Layer {
                    attn_norm: w.vector(&layer_tensor(il, "attn_norm"), c.n_embd)?,
                    mixer,
                    post_attn_norm: w.vector(&layer_tensor(il, "post_attention_norm"), c.n_embd)?,
                    ffn,
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

impl<B: Backend> Transformer<B> for Qwen35<B> {
    fn forward(&self, b: &mut B, tokens: &[u32], start: usize, which: Logits) -> LogitsOn<B> {
        let mut x = Residual::new(self.head.embed(b, tokens)?);
        for (il, l) in self.layers.iter().enumerate() {
            pre_norm_residual(b, &mut x, &l.attn_norm, self.eps, |b, h| match &l.mixer {
                Mixer::DeltaNet(d) => d.branch(b, h, il),
                Mixer::Attention(a) => a.branch(b, h, start, il),
            })?;
            pre_norm_residual(b, &mut x, &l.post_attn_norm, self.eps, |b, h| {
                match &l.ffn {
                    Ffn::Dense(f) => f.branch(b, h),
                    Ffn::Moe(m) => Ok(Branch::Tensor(m.forward(b, h)?)),
                }
            })?;
        }
        self.head.logits(b, &mut x, which)
    }
}

/// Qwen 3 MoE's routed experts plus, where the layer has one, the shared expert scaled by
/// `sigmoid(ffn_gate_inp_shexp · x)`.
fn load_moe_with_shared<B: Backend>(c: &Config, w: &Loader<B>, il: usize) -> Result<MoeFfn<B>> {
    let mut moe = MoeFfn::load(c, w, il)?;
    if w.has(&layer_tensor(il, "ffn_up_shexp")) {
        let ff = if c.n_ff_shexp > 0 {
            c.n_ff_shexp
        } else {
            c.n_ff
        };
        let gate = w.host(&layer_tensor(il, "ffn_gate_inp_shexp"), &[c.n_embd])?;
        moe.shared = Some(SharedExpert {
            ffn: GatedFfn::load_named(w, il, "_shexp", ff, c.n_embd, Activation::Silu)?,
            gate: Some(w.matrix_from(gate, None)?),
        });
    }
    Ok(moe)
}

/// Per-pair rope divisors that reproduce llama.cpp's interleaved M-RoPE on text, or `None` when
/// it is plain rope. Text positions are `(p, p, p, 0)`; rotation pair `i` takes the position of
/// section `(i mod Σsections) mod 3` while that lies within three times the section's size, and
/// of the fourth section otherwise. Pairs left to the fourth section stay at position 0: an
/// infinite divisor gives them frequency 0.
fn imrope_text_factors(n_rot: usize, sections: [usize; 4]) -> Option<Vec<f32>> {
    let total: usize = sections.iter().sum();
    if total == 0 {
        return None;
    }
    let factors: Vec<f32> = (0..n_rot / 2)
        .map(|i| {
            let sector = i % total;
            if sector < 3 * sections[sector % 3] {
                1.0
            } else {
                f32::INFINITY
            }
        })
        .collect();
    factors.iter().any(|f| f.is_infinite()).then_some(factors)
}

/// Full attention whose output heads are scaled by `sigmoid(gate)` before `wo`, the gate being
/// the second half of each head's rows of `attn_q`.
struct GatedAttention<B: Backend> {
    attn: Attention<B>,
    gate: B::Matrix,
}

impl<B: Backend> GatedAttention<B> {
    fn load(c: &Config, w: &Loader<B>, il: usize, rope: RopeTable) -> Result<Self> {
        let t = |name| layer_tensor(il, name);
        let (hd, n_embd) = (c.head_dim_k, c.n_embd);
        if c.head_dim_v != hd {
            return Err(ModelError::BadConfig(
                "gated attention needs value_length == key_length".into(),
            ));
        }
        let q_dim = c.n_head * hd;
        // Rows of `attn_q`: per head, `hd` query rows then `hd` gate rows.
        let qg = w.host(&t("attn_q"), &[n_embd, 2 * q_dim])?;
        let heads = |first: usize| {
            (0..c.n_head).map(move |h| (2 * h + first) * hd..(2 * h + first + 1) * hd)
        };
        let kv_dim = c.n_head_kv * hd;
        Ok(Self {
            attn: Attention {
                wq: w.matrix_from(qg.select_rows(heads(0)), None)?,
                wk: w.matrix(&t("attn_k"), kv_dim, n_embd)?,
                values: Values::Projection(w.matrix(&t("attn_v"), kv_dim, n_embd)?),
                wo: w.matrix(&t("attn_output"), n_embd, q_dim)?,
                qk_norm: Some((
                    w.vector(&t("attn_q_norm"), hd)?,
                    w.vector(&t("attn_k_norm"), hd)?,
                )),
                eps: c.rms_eps,
                rope,
                params: AttentionParams {
                    n_head: c.n_head,
                    n_head_kv: c.n_head_kv,
                    head_dim_k: hd,
                    head_dim_v: hd,
                    scale: 1.0 / (hd as f32).sqrt(),
                    window: None,
                    softcap: None,
                },
            },
            gate: w.matrix_from(qg.select_rows(heads(1)), None)?,
        })
    }

    /// The gated heads, their output projection left to the residual stream.
    fn branch(&self, b: &mut B, x: &B::Tensor, start: usize, il: usize) -> Result<Branch<'_, B>> {
        let o = self.attn.attend(b, x, start, il)?;
        let o = b.glu(Activation::Sigmoid, &b.matmul(x, &self.gate)?, &o)?;
        Ok(Branch::Product(o, &self.attn.wo))
    }
}

/// A gated delta-net layer: `attn_qkv` feeds the causal conv1d (then SiLU) whose output splits
/// into queries, keys (both L2-normalized) and values; per value head, the write strength is
/// `sigmoid(ssm_beta · x)` and the log-decay `softplus(ssm_alpha · x + ssm_dt) * ssm_a` (`ssm_a`
/// is stored as `-exp(A_log)`). The output is RMS-normalized per head, scaled by
/// `silu(attn_gate · x)` and projected by `ssm_out`.
struct DeltaNet<B: Backend> {
    qkv: B::Matrix,
    z: B::Matrix,
    beta: B::Matrix,
    alpha: B::Matrix,
    dt_bias: B::Vector,
    a: B::Vector,
    /// `[channels][kernel]`.
    conv: B::Vector,
    kernel: usize,
    norm: B::Vector,
    out: B::Matrix,
    shape: DeltaNetShape,
    eps: f32,
}

impl<B: Backend> DeltaNet<B> {
    fn load(c: &Config, dn: &DeltaNetConfig, w: &Loader<B>, il: usize) -> Result<Self> {
        let t = |name| layer_tensor(il, name);
        let shape = DeltaNetShape {
            n_k_heads: dn.n_k_heads,
            n_v_heads: dn.n_v_heads,
            head_dim: dn.head_dim,
        };
        let (n_embd, n_v) = (c.n_embd, dn.n_v_heads);
        let value_dim = n_v * dn.head_dim;
        let channels = shape.channels();
        Ok(Self {
            qkv: w.matrix(&t("attn_qkv"), channels, n_embd)?,
            z: w.matrix(&t("attn_gate"), value_dim, n_embd)?,
            beta: w.matrix(&t("ssm_beta"), n_v, n_embd)?,
            alpha: w.matrix(&t("ssm_alpha"), n_v, n_embd)?,
            dt_bias: w.vector(&format!("blk.{il}.ssm_dt.bias"), n_v)?,
            a: w.vector(&format!("blk.{il}.ssm_a"), n_v)?,
            conv: w.upload(w.f32(&t("ssm_conv1d"), &[dn.conv_kernel, channels])?)?,
            kernel: dn.conv_kernel,
            norm: w.vector(&t("ssm_norm"), dn.head_dim)?,
            out: w.matrix(&t("ssm_out"), n_embd, value_dim)?,
            shape,
            eps: c.rms_eps,
        })
    }

    /// Runs `x` (`[tokens][n_embd]`) through the layer, advancing layer `il`'s recurrent state;
    /// the output projection is left to the residual stream.
    fn branch(&self, b: &mut B, x: &B::Tensor, il: usize) -> Result<Branch<'_, B>> {
        let qkv = b.matmul(x, &self.qkv)?;
        let beta = b.matmul(x, &self.beta)?;
        let alpha = b.matmul(x, &self.alpha)?;
        let step = DeltaNetStep {
            qkv: &qkv,
            beta: &beta,
            alpha: &alpha,
            dt_bias: &self.dt_bias,
            a: &self.a,
            conv: &self.conv,
            kernel: self.kernel,
            shape: self.shape,
            eps: self.eps,
        };
        let o = b.delta_net(il, step)?;
        let o = b.rms_norm(&o, &self.norm, self.eps)?;
        let o = b.glu(Activation::Silu, &b.matmul(x, &self.z)?, &o)?;
        Ok(Branch::Product(o, &self.out))
    }
}

#[cfg(test)]
mod tests {
    use super::imrope_text_factors;

    #[test]
    fn imrope_on_text_rotates_all_but_fourth_section_pairs() {
        // Qwen 3.5's 11:11:10 split covers all 32 rotated pairs: plain rope.
        assert_eq!(imrope_text_factors(64, [11, 11, 10, 0]), None);
        // Pair 3 falls to the fourth section (position 0); pairs wrap after Σsections = 4.
        let inf = f32::INFINITY;
        assert_eq!(
            imrope_text_factors(16, [1, 1, 1, 1]),
            Some(vec![1.0, 1.0, 1.0, inf, 1.0, 1.0, 1.0, inf])
        );
    }
}
