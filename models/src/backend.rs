//! The interface between the model graphs and the hardware that runs them.
//!
//! Each architecture in [`crate::arch`] is one description written against [`Backend`]: it
//! loads its weights through the backend and runs its forward pass as a sequence of backend
//! ops. [`crate::cpu::Cpu`] is the f32 reference; the engine implements the trait for the GPU.
//! Ops are eager (each returns its result), which keeps a graph a plain Rust function; a
//! backend that wants to fuse or capture (CUDA graphs) does so below this interface.

use std::borrow::Cow;

use rayon::prelude::*;

use crate::forward::ModelError;
use crate::gguf::GgufError;
use crate::quant::{dequantize_row, GgmlType};

pub type Result<T, E = ModelError> = std::result::Result<T, E>;

/// What a model needs from the machine it runs on. Activations are row-major `[rows][width]`
/// f32 tensors, a row being a token (or one head of a token); ops infer the row count from the
/// width they are given or that their weights imply.
pub trait Backend {
    /// Activations.
    type Tensor;
    /// A weight matrix `[out][in]` with its optional bias, in whatever form the backend
    /// multiplies by (the CPU dequantizes to f32; a GPU keeps quantized blocks).
    type Matrix;
    /// A small f32 parameter vector: norm weights and per-head constants.
    type Vector;
    /// The routed experts of one mixture-of-experts layer.
    type Experts;

    fn matrix(&self, m: HostMatrix<'_>, bias: Option<Vec<f32>>) -> Result<Self::Matrix>;
    fn vector(&self, v: Vec<f32>) -> Result<Self::Vector>;
    fn experts(&self, e: HostExperts<'_>, activation: Activation) -> Result<Self::Experts>;

    /// Positions held by the KV cache (and recurrent state) the backend owns.
    fn cached(&self) -> usize;
    /// Whether [`Backend::truncate`] can keep exactly `len` positions.
    fn can_truncate(&self, len: usize) -> bool;
    /// Forgets every position from `len` on.
    fn truncate(&mut self, len: usize);

    /// `[tokens][in]` rows of `table` scaled by `scale`.
    fn embed(&self, table: &Self::Matrix, tokens: &[u32], scale: f32) -> Result<Self::Tensor>;
    /// `x Wᵀ + b` for each row of `x`.
    fn matmul(&self, x: &Self::Tensor, w: &Self::Matrix) -> Result<Self::Tensor>;
    /// `y += x Wᵀ` in place, where the backend does that for less than [`Backend::matmul`] and
    /// an add (a product that adds its partial sums into its output anyway); `Ok(false)`, with
    /// nothing done, where it does not.
    fn matmul_add(
        &self,
        _y: &mut Self::Tensor,
        _x: &Self::Tensor,
        _w: &Self::Matrix,
    ) -> Result<bool> {
        Ok(false)
    }
    /// RMSNorm of each `weight.len()`-long row, times `weight` (GGUF stores Gemma's `1 + w`).
    fn rms_norm(&self, x: &Self::Tensor, weight: &Self::Vector, eps: f32) -> Result<Self::Tensor>;
    /// [`Backend::rms_norm`] of a tensor that only products read (`matmul`, `matmul_add`, a
    /// gated pair): a backend whose products read a copy of their input in another type may
    /// write that copy alone.
    fn rms_norm_for_products(
        &self,
        x: &Self::Tensor,
        weight: &Self::Vector,
        eps: f32,
    ) -> Result<Self::Tensor> {
        self.rms_norm(x, weight, eps)
    }
    /// RMSNorm of each `width`-long row without a weight.
    fn rms_norm_unit(&self, x: &Self::Tensor, width: usize, eps: f32) -> Result<Self::Tensor>;
    /// Rotates each `head_dim`-long head of row `t` of `x` (`[tokens][n_heads * head_dim]`) by
    /// position `start + t`.
    fn rope(
        &self,
        x: &mut Self::Tensor,
        n_heads: usize,
        head_dim: usize,
        start: usize,
        rope: &RopeTable,
    ) -> Result<()>;
    /// Appends `k` and `v` (rows at positions `start..`) to layer `layer`'s cache, which holds
    /// exactly `start` positions, and attends `q` causally over all of it.
    fn attention(
        &mut self,
        layer: usize,
        q: &Self::Tensor,
        k: &Self::Tensor,
        v: &Self::Tensor,
        start: usize,
        p: &AttentionParams,
    ) -> Result<Self::Tensor>;
    /// One layer's attention after its projections: [`AttentionInputs`] finished (norms, rope,
    /// values), then [`Backend::attention`]. A backend may fuse the steps before the attention;
    /// by default they run as [`attention_steps`] does.
    fn attention_block(
        &mut self,
        layer: usize,
        x: AttentionInputs<'_, Self::Tensor, Self::Vector>,
        start: usize,
        p: &AttentionParams,
    ) -> Result<Self::Tensor> {
        attention_steps(self, layer, x, start, p)
    }
    /// The gate and up matrices of a gated unit (`act(x gate^T) * (x up^T)`, same shape and
    /// type, no biases) as one matrix that [`Backend::gated`] multiplies by, where this backend
    /// runs both products at once; `None` (the default) where it runs them as two matrices.
    fn gated_pair(
        &self,
        _gate: &HostMatrix<'_>,
        _up: &HostMatrix<'_>,
    ) -> Result<Option<Self::Matrix>> {
        Ok(None)
    }

    /// `act(x gate^T) * (x up^T)` with a matrix made by [`Backend::gated_pair`]. Its result is
    /// only ever the input of a [`Backend::matmul`] (the down projection), so a backend may keep
    /// it in the form its products read and nothing else (the GPU: f16, for prompts).
    fn gated(
        &self,
        _activation: Activation,
        _x: &Self::Tensor,
        _pair: &Self::Matrix,
    ) -> Result<Self::Tensor> {
        Err(ModelError::Backend(
            "this backend makes no gated pairs".into(),
        ))
    }

    /// `act(gate) * x`, element-wise.
    fn glu(
        &self,
        activation: Activation,
        gate: &Self::Tensor,
        x: &Self::Tensor,
    ) -> Result<Self::Tensor>;
    /// Scales row `r` of `x` by `sigmoid(gate[r])`.
    fn gate_rows(&self, x: &mut Self::Tensor, gate: &Self::Tensor) -> Result<()>;
    /// `x += y`.
    fn add(&self, x: &mut Self::Tensor, y: &Self::Tensor) -> Result<()>;
    /// `x += y`, then [`Backend::rms_norm_for_products`] of the sum: a residual add and the norm
    /// that reads it, which a backend can do in one pass. Only products read the norm (a backend
    /// may write it in their input's type alone); the sum, the residual stream, stays whole.
    fn add_rms_norm(
        &self,
        x: &mut Self::Tensor,
        y: &Self::Tensor,
        weight: &Self::Vector,
        eps: f32,
    ) -> Result<Self::Tensor> {
        self.add(x, y)?;
        self.rms_norm_for_products(x, weight, eps)
    }
    /// `x *= s`.
    fn scale(&self, x: &mut Self::Tensor, s: f32) -> Result<()>;
    /// `cap * tanh(x / cap)`.
    fn softcap(&self, x: &mut Self::Tensor, cap: f32) -> Result<()>;
    /// The last `width`-long row of `x`.
    fn last_row(&self, x: &Self::Tensor, width: usize) -> Result<Self::Tensor>;
    /// `sum_k weight_k * expert_k(x)` per row of `x`, the experts and weights chosen by
    /// `router` from `logits` (`[rows][n_expert]`).
    fn moe(
        &self,
        x: &Self::Tensor,
        logits: &Self::Tensor,
        experts: &Self::Experts,
        router: &Router,
    ) -> Result<Self::Tensor>;
    /// One call of a gated delta-net layer `layer` after its input projections (see
    /// [`DeltaNetStep`]), advancing the layer's recurrent state; returns `[tokens][n_v_heads *
    /// head_dim]`.
    fn delta_net(
        &mut self,
        layer: usize,
        step: DeltaNetStep<'_, Self::Tensor, Self::Vector>,
    ) -> Result<Self::Tensor>;
    /// Copies `x` to the host.
    fn to_host(&self, x: &Self::Tensor) -> Result<Vec<f32>>;
    /// The index of the largest element of the one-row `logits` (the lowest among equals), as
    /// [`crate::sampler::argmax`] picks it: greedy decoding.
    fn argmax(&self, logits: &Self::Tensor) -> Result<u32> {
        Ok(crate::sampler::argmax(&self.to_host(logits)?))
    }
    /// The `k` largest elements of the one-row `logits` as (index, value), sorted as
    /// [`crate::sampler::top_k`] sorts them: a sampler's candidates.
    fn top_k(&self, logits: &Self::Tensor, k: usize) -> Result<Vec<(u32, f32)>> {
        Ok(crate::sampler::top_k(&self.to_host(logits)?, k))
    }
    /// One greedy decoding step: `forward` runs the network on `token` at position `pos` (the
    /// cache holds `pos` positions) and gives the logits; returns their argmax. A backend may
    /// record a step's work once and replay it at later positions (CUDA graphs).
    fn greedy_step(
        &mut self,
        _token: u32,
        _pos: usize,
        forward: &mut dyn FnMut(&mut Self) -> Result<Self::Tensor>,
    ) -> Result<u32> {
        let logits = forward(self)?;
        self.argmax(&logits)
    }
}

/// [`Backend::attention_block`] op by op: the values (normed as asked), per-head RMSNorm of
/// queries and keys if asked, rope of both, then [`Backend::attention`].
pub fn attention_steps<B: Backend + ?Sized>(
    b: &mut B,
    layer: usize,
    x: AttentionInputs<'_, B::Tensor, B::Vector>,
    start: usize,
    p: &AttentionParams,
) -> Result<B::Tensor> {
    let AttentionInputs {
        mut q,
        mut k,
        v,
        qk_norm,
        eps,
        rope,
    } = x;
    let v = match v {
        ValueSource::Given(v) => v,
        ValueSource::UnitNormed(v) => b.rms_norm_unit(&v, p.head_dim_v, eps)?,
        ValueSource::UnitNormedKeys => b.rms_norm_unit(&k, p.head_dim_v, eps)?,
    };
    if let Some((qn, kn)) = qk_norm {
        q = b.rms_norm(&q, qn, eps)?;
        k = b.rms_norm(&k, kn, eps)?;
    }
    b.rope(&mut q, p.n_head, p.head_dim_k, start, rope)?;
    b.rope(&mut k, p.n_head_kv, p.head_dim_k, start, rope)?;
    b.attention(layer, &q, &k, &v, start, p)
}

/// One attention layer's projections (`[tokens][heads * width]`) and what becomes of them
/// before the attention proper ([`Backend::attention_block`]).
pub struct AttentionInputs<'a, T, V> {
    pub q: T,
    pub k: T,
    pub v: ValueSource<T>,
    /// Per-head RMSNorm weights of queries and keys, applied before rope (Gemma 3, Qwen 3).
    pub qk_norm: Option<(&'a V, &'a V)>,
    /// The norms' epsilon.
    pub eps: f32,
    pub rope: &'a RopeTable,
}

/// Where an attention layer's values come from.
pub enum ValueSource<T> {
    /// The value projection as it is.
    Given(T),
    /// The value projection RMS-normalized per head without weight (Gemma 4).
    UnitNormed(T),
    /// The key projection before the key norm and rope, RMS-normalized per head without weight
    /// (Gemma 4's global layers without `attn_v`).
    UnitNormedKeys,
}

/// A weight matrix as the file stores it: `rows` rows of `cols` values of type `ty`, each row
/// a whole number of blocks, so rows can be selected without decoding them.
#[derive(Clone, Debug)]
pub struct HostMatrix<'a> {
    /// The tensor's name, for errors.
    pub name: String,
    pub ty: GgmlType,
    pub rows: usize,
    pub cols: usize,
    pub data: Cow<'a, [u8]>,
}

impl HostMatrix<'_> {
    fn row_bytes(&self) -> usize {
        self.cols / self.ty.block_size() * self.ty.type_size()
    }

    /// The rows of `ranges`, in order, as one matrix.
    pub fn select_rows(
        &self,
        ranges: impl IntoIterator<Item = std::ops::Range<usize>>,
    ) -> HostMatrix<'static> {
        let rb = self.row_bytes();
        let mut data = Vec::new();
        for r in ranges {
            data.extend_from_slice(&self.data[r.start * rb..r.end * rb]);
        }
        HostMatrix {
            name: self.name.clone(),
            ty: self.ty,
            rows: data.len() / rb,
            cols: self.cols,
            data: Cow::Owned(data),
        }
    }

    /// The matrix dequantized to f32, row-major.
    pub fn to_f32(&self) -> Result<Vec<f32>> {
        let mut out = vec![0f32; self.rows * self.cols];
        out.par_chunks_mut(self.cols)
            .zip(self.data.par_chunks(self.row_bytes()))
            .try_for_each(|(row, bytes)| dequantize_row(self.ty, bytes, row))
            .map_err(|error| GgufError::Quant {
                name: self.name.clone(),
                error,
            })?;
        Ok(out)
    }
}

/// The experts of one projection of a MoE layer: `n_expert` matrices stacked in `weights`
/// (`[n_expert * out][in]`), each optionally multiplied by its entry of `scales`.
#[derive(Clone, Debug)]
pub struct ExpertMatrices<'a> {
    pub weights: HostMatrix<'a>,
    pub scales: Option<Vec<f32>>,
}

/// Every projection of one layer's experts.
#[derive(Clone, Debug)]
pub struct HostExperts<'a> {
    pub n_expert: usize,
    pub gate: ExpertMatrices<'a>,
    pub up: ExpertMatrices<'a>,
    pub down: ExpertMatrices<'a>,
}

/// The activation of a gated unit `act(gate) * x`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// SwiGLU (Llama, Qwen).
    Silu,
    /// GeGLU with tanh-approximated GELU (Gemma).
    GeluTanh,
    /// Sigmoid-gated heads (Qwen 3.5 attention).
    Sigmoid,
}

/// Which positions of a forward pass produce logits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Logits {
    /// Only the last token's (generation).
    Last,
    /// Every token's (`[tokens][vocab]`; for tests and scoring).
    All,
    /// None: a prompt chunk that only fills the cache.
    None,
}

/// How rotary embedding pairs up the dimensions of a head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeStyle {
    /// Adjacent pairs `(2i, 2i + 1)`: Llama.
    Normal,
    /// Split halves `(i, i + n_rot / 2)`: GPT-NeoX, Gemma, Qwen.
    Neox,
}

/// The inverse frequencies of one rope configuration, computed once per layer kind. Partial
/// rope (`n_rot < head_dim`), per-frequency factors and M-RoPE sections on text all reduce to
/// this table; dimensions past `n_rot` stay unrotated.
#[derive(Clone, Debug)]
pub struct RopeTable {
    style: RopeStyle,
    /// `scale / factor_i * base^(-2i / n_rot)` for `i < n_rot / 2`, in f64 so that angles at
    /// large positions stay exact.
    inv_freq: Vec<f64>,
}

impl RopeTable {
    /// `freq_scale` is the linear position scale (1 / `rope.scaling.factor`); `factors` are the
    /// optional per-frequency divisors of Llama 3's `rope_freqs.weight`.
    pub fn new(
        style: RopeStyle,
        n_rot: usize,
        base: f32,
        freq_scale: f32,
        factors: Option<&[f32]>,
    ) -> Self {
        let inv_freq = (0..n_rot / 2)
            .map(|i| {
                let f =
                    f64::from(freq_scale) * f64::from(base).powf(-2.0 * i as f64 / n_rot as f64);
                f / factors.map_or(1.0, |c| f64::from(c[i]))
            })
            .collect();
        Self { style, inv_freq }
    }

    pub fn style(&self) -> RopeStyle {
        self.style
    }

    /// One inverse frequency per rotated pair.
    pub fn inv_freq(&self) -> &[f64] {
        &self.inv_freq
    }

    /// `(sin, cos)` of each pair's angle at `pos`, rounded to f32 from f64.
    pub fn sin_cos(&self, pos: usize) -> (Vec<f32>, Vec<f32>) {
        self.inv_freq
            .iter()
            .map(|f| {
                let (s, c) = (pos as f64 * f).sin_cos();
                (s as f32, c as f32)
            })
            .unzip()
    }
}

/// Shape and masking of one attention layer.
#[derive(Clone, Copy, Debug)]
pub struct AttentionParams {
    pub n_head: usize,
    /// Grouped-query attention: query head `h` reads KV head `h / (n_head / n_head_kv)`.
    pub n_head_kv: usize,
    pub head_dim_k: usize,
    pub head_dim_v: usize,
    /// Multiplies `q·k` before capping and softmax.
    pub scale: f32,
    /// Sliding window: a query at position `p` sees keys at `p - window < j <= p`.
    pub window: Option<usize>,
    /// Gemma 2 style `cap * tanh(score / cap)` on the scaled scores.
    pub softcap: Option<f32>,
}

/// How router logits become the weights of the selected experts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gating {
    /// Softmax over all experts, then the top `n_used` probabilities (Qwen 3 MoE, Mixtral).
    SoftmaxTopK,
    /// The top `n_used` logits, then a softmax over just those.
    TopKSoftmax,
}

/// Expert selection: which experts run on a token and with what weight.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Router {
    pub n_used: usize,
    pub gating: Gating,
    /// Divide the selected weights by their sum (so they add up to one).
    pub normalize: bool,
    /// Multiplies the final weights (1 for none).
    pub scale: f32,
}

/// Head layout of a gated delta net. Keys and values have the same head width, as in
/// llama.cpp; there are `n_v_heads` states, value head `h` reading key head `h % n_k_heads`
/// (llama.cpp tiles the key heads; converters order the value heads to match).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeltaNetShape {
    pub n_k_heads: usize,
    pub n_v_heads: usize,
    pub head_dim: usize,
}

impl DeltaNetShape {
    /// Floats of the recurrent state: one `[head_dim (v)][head_dim (k)]` matrix per value head.
    pub fn state_len(&self) -> usize {
        self.n_v_heads * self.head_dim * self.head_dim
    }

    /// Channels of the causal convolution: queries, keys and values.
    pub fn channels(&self) -> usize {
        (2 * self.n_k_heads + self.n_v_heads) * self.head_dim
    }
}

/// The inputs of one delta-net call: `qkv` (`[tokens][channels]`) goes through the causal
/// conv1d (`conv`: `[channels][kernel]`) and SiLU and splits into queries, keys (both
/// L2-normalized with `eps`) and values; per value head the write strength is
/// `sigmoid(beta)` and the log-decay `softplus(alpha + dt_bias) * a`.
pub struct DeltaNetStep<'a, T, V> {
    pub qkv: &'a T,
    pub beta: &'a T,
    pub alpha: &'a T,
    pub dt_bias: &'a V,
    pub a: &'a V,
    pub conv: &'a V,
    pub kernel: usize,
    pub shape: DeltaNetShape,
    pub eps: f32,
}
