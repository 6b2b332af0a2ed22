//! Qwen 3.5, dense (`qwen35`) and MoE (`qwen35moe`): a hybrid whose layers are mostly gated
//! delta nets (linear attention with a causal conv1d, see [`crate::cpu::gated_delta_rule`]),
//! with full attention every `full_attention_interval`-th layer. The attention layers project a
//! sigmoid gate for each head along with its query, normalize Q and K per head and rotate a
//! part of each head with interleaved M-RoPE. Every layer is `x += mixer(norm(x));
//! x += ffn(post_attention_norm(x))`, the FFN being SwiGLU or Qwen 3 MoE's routed experts plus
//! a sigmoid-gated shared expert.

use super::qwen3moe::load_moe;
use super::{layer_tensor, load_ffn, load_head, norm, Transformer};
use crate::config::{Config, DeltaNetConfig};
use crate::cpu::{
    add_in_place, causal_conv1d, gated_delta_rule, l2_norm, rms_norm, sigmoid, silu, Activation,
    AttentionParams, DeltaNetShape, EmbeddingHead, GatedFfn, Linear, Logits, MoeFfn, RopeStyle,
    RopeTable, SelfAttention, SharedExpert,
};
use crate::forward::{ModelError, Weights};
use crate::kv_cache::KvCache;

pub struct Qwen35 {
    head: EmbeddingHead,
    layers: Vec<Layer>,
    eps: f32,
}

struct Layer {
    attn_norm: Vec<f32>,
    mixer: Mixer,
    post_attn_norm: Vec<f32>,
    ffn: Ffn,
}

enum Mixer {
    DeltaNet(DeltaNet),
    Attention(GatedAttention),
}

enum Ffn {
    Dense(GatedFfn),
    Moe(MoeFfn),
}

impl Qwen35 {
    /// Loads either variant: the MoE one (`qwen35moe`) has `expert_count` experts per layer.
    pub fn load(c: &Config, w: &Weights) -> Result<Self, ModelError> {
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
                    Ffn::Dense(load_ffn(c, w, il, Activation::Silu)?)
                };
                Ok(Layer {
                    attn_norm: norm(w, &layer_tensor(il, "attn_norm"), c.n_embd)?,
                    mixer,
                    post_attn_norm: norm(w, &layer_tensor(il, "post_attention_norm"), c.n_embd)?,
                    ffn,
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

impl Transformer for Qwen35 {
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
            let mixed = match &l.mixer {
                Mixer::DeltaNet(d) => d.forward(&h, cache, il),
                Mixer::Attention(a) => a.forward(&h, start, cache, il),
            };
            add_in_place(&mut x, &mixed);
            let mut h = x.clone();
            rms_norm(&mut h, &l.post_attn_norm, self.eps);
            let f = match &l.ffn {
                Ffn::Dense(f) => f.forward(&h),
                Ffn::Moe(m) => m.forward(&h),
            };
            add_in_place(&mut x, &f);
        }
        self.head.logits(&x, which)
    }
}

/// Qwen 3 MoE's routed experts plus, where the layer has one, the shared expert scaled by
/// `sigmoid(ffn_gate_inp_shexp · x)`.
fn load_moe_with_shared(c: &Config, w: &Weights, il: usize) -> Result<MoeFfn, ModelError> {
    let t = |name| layer_tensor(il, name);
    let mut moe = load_moe(c, w, il)?;
    if w.has(&t("ffn_up_shexp")) {
        let ff = if c.n_ff_shexp > 0 {
            c.n_ff_shexp
        } else {
            c.n_ff
        };
        let gate = w.tensor(&t("ffn_gate_inp_shexp"), &[c.n_embd])?;
        moe.shared = Some(SharedExpert {
            ffn: GatedFfn {
                gate: w.linear(&t("ffn_gate_shexp"), ff, c.n_embd)?,
                up: w.linear(&t("ffn_up_shexp"), ff, c.n_embd)?,
                down: w.linear(&t("ffn_down_shexp"), c.n_embd, ff)?,
                activation: Activation::Silu,
            },
            gate: Some(Linear::new(1, c.n_embd, gate, None)),
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
struct GatedAttention {
    attn: SelfAttention,
    gate: Linear,
}

impl GatedAttention {
    fn load(c: &Config, w: &Weights, il: usize, rope: RopeTable) -> Result<Self, ModelError> {
        let t = |name| layer_tensor(il, name);
        let (hd, n_embd) = (c.head_dim_k, c.n_embd);
        if c.head_dim_v != hd {
            return Err(ModelError::BadConfig(
                "gated attention needs value_length == key_length".into(),
            ));
        }
        let q_dim = c.n_head * hd;
        // Rows of `attn_q`: per head, `hd` query rows then `hd` gate rows.
        let qg = w.tensor(&t("attn_q"), &[n_embd, 2 * q_dim])?;
        let (mut q, mut gate) = (Vec::with_capacity(q_dim * n_embd), Vec::new());
        for (i, head) in qg.chunks_exact(hd * n_embd).enumerate() {
            if i % 2 == 0 { &mut q } else { &mut gate }.extend_from_slice(head);
        }
        let kv_dim = c.n_head_kv * hd;
        Ok(Self {
            attn: SelfAttention {
                wq: Linear::new(q_dim, n_embd, q, None),
                wk: w.linear(&t("attn_k"), kv_dim, n_embd)?,
                wv: Some(w.linear(&t("attn_v"), kv_dim, n_embd)?),
                wo: w.linear(&t("attn_output"), n_embd, q_dim)?,
                qk_norm: Some((
                    norm(w, &t("attn_q_norm"), hd)?,
                    norm(w, &t("attn_k_norm"), hd)?,
                )),
                v_norm: None,
                norm_eps: c.rms_eps,
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
            gate: Linear::new(q_dim, n_embd, gate, None),
        })
    }

    fn forward(&self, x: &[f32], start: usize, cache: &mut KvCache, il: usize) -> Vec<f32> {
        let mut o = self.attn.attend(x, start, cache, il);
        o.iter_mut()
            .zip(self.gate.forward(x))
            .for_each(|(v, g)| *v *= sigmoid(g));
        self.attn.wo.forward(&o)
    }
}

/// A gated delta-net layer: `attn_qkv` feeds the causal conv1d (then SiLU) whose output splits
/// into queries, keys (both L2-normalized) and values; per value head, the write strength is
/// `sigmoid(ssm_beta · x)` and the log-decay `softplus(ssm_alpha · x + ssm_dt) * ssm_a` (`ssm_a`
/// is stored as `-exp(A_log)`). The output is RMS-normalized per head, scaled by
/// `silu(attn_gate · x)` and projected by `ssm_out`.
struct DeltaNet {
    qkv: Linear,
    z: Linear,
    beta: Linear,
    alpha: Linear,
    dt_bias: Vec<f32>,
    a: Vec<f32>,
    /// `[channels][kernel]`.
    conv: Vec<f32>,
    kernel: usize,
    norm: Vec<f32>,
    out: Linear,
    shape: DeltaNetShape,
    eps: f32,
}

impl DeltaNet {
    fn load(c: &Config, dn: &DeltaNetConfig, w: &Weights, il: usize) -> Result<Self, ModelError> {
        let t = |name| layer_tensor(il, name);
        let shape = DeltaNetShape {
            n_k_heads: dn.n_k_heads,
            n_v_heads: dn.n_v_heads,
            head_dim: dn.head_dim,
        };
        let (n_embd, n_v) = (c.n_embd, dn.n_v_heads);
        let value_dim = n_v * dn.head_dim;
        let channels = 2 * dn.n_k_heads * dn.head_dim + value_dim;
        Ok(Self {
            qkv: w.linear(&t("attn_qkv"), channels, n_embd)?,
            z: w.linear(&t("attn_gate"), value_dim, n_embd)?,
            beta: w.linear(&t("ssm_beta"), n_v, n_embd)?,
            alpha: w.linear(&t("ssm_alpha"), n_v, n_embd)?,
            dt_bias: w.tensor(&format!("blk.{il}.ssm_dt.bias"), &[n_v])?,
            a: w.tensor(&format!("blk.{il}.ssm_a"), &[n_v])?,
            conv: w.tensor(&t("ssm_conv1d"), &[dn.conv_kernel, channels])?,
            kernel: dn.conv_kernel,
            norm: norm(w, &t("ssm_norm"), dn.head_dim)?,
            out: w.linear(&t("ssm_out"), n_embd, value_dim)?,
            shape,
            eps: c.rms_eps,
        })
    }

    /// Runs `x` (`[tokens][n_embd]`) through the layer, advancing layer `il`'s recurrent state.
    fn forward(&self, x: &[f32], cache: &mut KvCache, il: usize) -> Vec<f32> {
        let DeltaNetShape {
            n_k_heads,
            n_v_heads,
            head_dim: d,
        } = self.shape;
        let n_tokens = x.len() / self.qkv.in_dim();
        let channels = self.qkv.out_dim();
        let beta: Vec<f32> = self.beta.forward(x).into_iter().map(sigmoid).collect();
        let mut g = self.alpha.forward(x);
        for row in g.chunks_exact_mut(n_v_heads) {
            for ((v, b), a) in row.iter_mut().zip(&self.dt_bias).zip(&self.a) {
                *v = softplus(*v + b) * a;
            }
        }
        let state = cache.recurrent(
            il,
            (self.kernel - 1) * channels,
            self.shape.state_len(),
            n_tokens,
        );
        let mut mixed = causal_conv1d(
            &self.qkv.forward(x),
            &self.conv,
            self.kernel,
            &mut state.conv,
        );
        mixed.iter_mut().for_each(|v| *v = silu(*v));
        let key_dim = n_k_heads * d;
        let split = |from: usize, len: usize| -> Vec<f32> {
            mixed
                .chunks_exact(channels)
                .flat_map(|row| &row[from..from + len])
                .copied()
                .collect()
        };
        let (mut q, mut k) = (split(0, key_dim), split(key_dim, key_dim));
        let v = split(2 * key_dim, n_v_heads * d);
        l2_norm(&mut q, d, self.eps);
        l2_norm(&mut k, d, self.eps);
        let mut o = gated_delta_rule(&q, &k, &v, &g, &beta, &mut state.ssm, self.shape);
        rms_norm(&mut o, &self.norm, self.eps);
        o.iter_mut()
            .zip(self.z.forward(x))
            .for_each(|(v, z)| *v *= silu(z));
        self.out.forward(&o)
    }
}

/// `ln(1 + e^x)`, linear above 20 as in ggml.
fn softplus(x: f32) -> f32 {
    if x > 20.0 {
        x
    } else {
        x.exp().ln_1p()
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
