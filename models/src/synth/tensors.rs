//! The tensor list of each architecture: names and shapes as llama.cpp's loader creates them
//! (src/models/<arch>.cpp), plus how each tensor's values are drawn.

use super::presets::{Arch, Config, DeltaNet};

/// How a tensor's values are generated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Init {
    /// A weight matrix: random quants whose dequantized values have a std of about 0.02.
    Weight,
    /// An RMS-norm gain stored as the multiplier itself: uniform around 1.
    Norm,
    /// Uniform in `[lo, hi)`.
    Uniform(f32, f32),
    /// Every value equal.
    Const(f32),
    /// Gemma 4's proportional-rope frequency factors: `n` ones (rotated pairs), then 1e30
    /// (pairs left unrotated).
    RopeFreqs(u32),
}

/// A tensor to write, before its type is chosen.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    pub name: String,
    /// ggml order: `dims[0]` is the row length.
    pub dims: Vec<u64>,
    pub init: Init,
    /// The block the tensor belongs to, if any.
    pub layer: Option<u32>,
}

/// Collects tensors in file order.
struct List {
    tensors: Vec<Planned>,
    layer: Option<u32>,
}

impl List {
    fn add(&mut self, name: &str, dims: &[u32], init: Init) {
        let name = match self.layer {
            Some(il) => format!("blk.{il}.{name}"),
            None => name.to_owned(),
        };
        self.tensors.push(Planned {
            name,
            dims: dims.iter().map(|&d| u64::from(d)).collect(),
            init,
            layer: self.layer,
        });
    }

    fn weight(&mut self, name: &str, dims: &[u32]) {
        self.add(&format!("{name}.weight"), dims, Init::Weight);
    }

    fn norm(&mut self, name: &str, width: u32) {
        self.add(&format!("{name}.weight"), &[width], Init::Norm);
    }
}

/// The A_log-derived decay `-exp(A_log)` of the delta-net, with A in [1, 16) as at init.
const SSM_A: Init = Init::Uniform(-16.0, -1.0);
/// dt bias: the inverse softplus of time steps in [0.01, 0.1).
const SSM_DT_BIAS: Init = Init::Uniform(-4.6, -2.3);
/// PyTorch's default conv1d init for a 4-tap kernel: U(-1/sqrt(4), 1/sqrt(4)).
const SSM_CONV: Init = Init::Uniform(-0.5, 0.5);
/// Gemma 4's global layers rotate a quarter of each head ("proportional" rope).
const GEMMA4_GLOBAL_ROPE_FRACTION: f32 = 0.25;
/// Small F32 projections (routers): the same scale as the quantized weights.
const SMALL: Init = Init::Uniform(-0.035, 0.035);

/// Every tensor of a model with config `c`, in file order.
pub fn tensor_list(c: &Config) -> Vec<Planned> {
    let mut l = List {
        tensors: Vec::new(),
        layer: None,
    };
    l.weight("token_embd", &[c.n_embd, c.n_vocab]);
    l.norm("output_norm", c.n_embd);
    if !c.tied_embeddings {
        l.weight("output", &[c.n_embd, c.n_vocab]);
    }
    if let Some(swa) = c.swa.filter(|_| c.arch == Arch::Gemma4) {
        // One table shared by all global layers; only created when there is one.
        if (0..c.n_layer).any(|il| !c.is_swa(il)) {
            let pairs = swa.head_dim_global / 2;
            let rotated = (swa.head_dim_global as f32 * GEMMA4_GLOBAL_ROPE_FRACTION / 2.0) as u32;
            l.add("rope_freqs.weight", &[pairs], Init::RopeFreqs(rotated));
        }
    }
    for il in 0..c.n_layer {
        l.layer = Some(il);
        block(&mut l, c, il);
    }
    l.tensors
}

fn block(l: &mut List, c: &Config, il: u32) {
    let e = c.n_embd;
    l.norm("attn_norm", e);
    match c.delta_net {
        Some(d) if c.is_recurrent(il) => delta_net(l, e, d),
        _ => attention(l, c, il),
    }
    match c.arch {
        Arch::Qwen35 | Arch::Qwen35Moe => l.norm("post_attention_norm", e),
        Arch::Gemma3 | Arch::Gemma4 => {
            l.norm("post_attention_norm", e);
            l.norm("ffn_norm", e);
        }
        Arch::Llama | Arch::Qwen3 | Arch::Qwen3Moe => l.norm("ffn_norm", e),
    }
    if c.arch == Arch::Gemma4 {
        l.add("layer_output_scale.weight", &[1], Init::Const(1.0));
    }
    match (c.arch, c.moe) {
        (Arch::Qwen3Moe, Some(m)) => {
            l.add("ffn_gate_inp.weight", &[e, m.n_expert], SMALL);
            experts(l, e, m.n_ff_exp, m.n_expert, false);
        }
        (Arch::Qwen35Moe, Some(m)) => {
            l.add("ffn_gate_inp.weight", &[e, m.n_expert], SMALL);
            experts(l, e, m.n_ff_exp, m.n_expert, false);
            let f = m.n_ff_shexp.unwrap_or(c.n_ff);
            l.add("ffn_gate_inp_shexp.weight", &[e], SMALL);
            l.weight("ffn_gate_shexp", &[e, f]);
            l.weight("ffn_up_shexp", &[e, f]);
            l.weight("ffn_down_shexp", &[f, e]);
        }
        _ => {
            l.weight("ffn_gate", &[e, c.n_ff]);
            l.weight("ffn_up", &[e, c.n_ff]);
            l.weight("ffn_down", &[c.n_ff, e]);
        }
    }
    if c.arch.is_gemma() {
        l.norm("post_ffw_norm", e);
    }
    if let (Arch::Gemma4, Some(m)) = (c.arch, c.moe) {
        // The dense FFN above runs beside the routed experts, each with its own norms.
        l.add("ffn_gate_inp.weight", &[e, m.n_expert], SMALL);
        l.add("ffn_gate_inp.scale", &[e], Init::Norm);
        l.norm("pre_ffw_norm_2", e);
        l.norm("post_ffw_norm_1", e);
        l.norm("post_ffw_norm_2", e);
        experts(l, e, m.n_ff_exp, m.n_expert, true);
        l.add("ffn_down_exps.scale", &[m.n_expert], Init::Norm);
    }
}

fn attention(l: &mut List, c: &Config, il: u32) {
    let hd = c.head_dim_at(il);
    let q = hd * c.n_head;
    let kv = hd * c.n_head_kv_at(il);
    // Qwen3.5's full-attention layers project a sigmoid output gate along with Q.
    let q_rows = match c.arch {
        Arch::Qwen35 | Arch::Qwen35Moe => 2 * q,
        _ => q,
    };
    l.weight("attn_q", &[c.n_embd, q_rows]);
    l.weight("attn_k", &[c.n_embd, kv]);
    if c.has_attn_v(il) {
        l.weight("attn_v", &[c.n_embd, kv]);
    }
    l.weight("attn_output", &[q, c.n_embd]);
    if c.arch != Arch::Llama {
        l.norm("attn_q_norm", hd);
        l.norm("attn_k_norm", hd);
    }
}

fn delta_net(l: &mut List, n_embd: u32, d: DeltaNet) {
    let key_dim = d.state_size * d.n_k_heads;
    let value_dim = d.inner_size();
    let conv_dim = 2 * key_dim + value_dim;
    l.weight("attn_qkv", &[n_embd, conv_dim]);
    l.weight("attn_gate", &[n_embd, value_dim]);
    l.add("ssm_conv1d.weight", &[d.conv_kernel, conv_dim], SSM_CONV);
    l.add("ssm_dt.bias", &[d.n_v_heads], SSM_DT_BIAS);
    l.add("ssm_a", &[d.n_v_heads], SSM_A);
    l.weight("ssm_beta", &[n_embd, d.n_v_heads]);
    l.weight("ssm_alpha", &[n_embd, d.n_v_heads]);
    l.norm("ssm_norm", d.state_size);
    l.weight("ssm_out", &[value_dim, n_embd]);
}

/// Routed expert weights, `[n_expert]` outermost; gemma4 stores gate and up fused.
fn experts(l: &mut List, e: u32, ff: u32, n: u32, fused_gate_up: bool) {
    if fused_gate_up {
        l.weight("ffn_gate_up_exps", &[e, 2 * ff, n]);
    } else {
        l.weight("ffn_gate_exps", &[e, ff, n]);
        l.weight("ffn_up_exps", &[e, ff, n]);
    }
    l.weight("ffn_down_exps", &[ff, e, n]);
}
