//! What the engine knows about each registered kernel beyond its manifest: the shapes it is tested
//! and timed at, its inputs, its CPU reference and tolerance, its cost and its baseline.
//!
//! Every kernel follows one argument layout: its input views, then its output view, then its
//! scalars. A test checks that layout against every embedded manifest.

use std::fmt;
use std::str::FromStr;

use zinc_models::backend::{AttentionParams, RopeStyle, RopeTable};
use zinc_models::quant::GgmlType;
use zinc_runtime::ScalarValue;

use crate::reference;

/// The operation a kernel family computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    RmsNorm,
    /// A residual add and the norm after it: two outputs, `x + y` and its [`Op::RmsNorm`].
    AddRmsNorm,
    Softmax,
    Add,
    SiluMul,
    GeluMul,
    ToF16,
    Gemm,
    /// A GGUF weight matrix `W[N][K]` to f16.
    Dequant,
    /// `Y[T][N] = X[T][K] · W[N][K]^T` for a few tokens, W quantized.
    Matvec,
    /// `Y[T][N] = X[T][K] · W[N][K]^T` for prefill on the tensor cores: X f16 (or i8 blocks,
    /// [`Elem::ActS8`]), W quantized and dequantized on the fly (or used as integers), Y f32.
    QuantGemm,
    /// f32 activations `[rows][cols]` to i8 blocks of 32 ([`Elem::ActS8`]) for the int8 GEMMs.
    QuantizeActs,
    /// Causal grouped-query attention over a KV cache, with sliding window and soft-capping.
    Attention,
    /// [`Op::Attention`] over `split`-key slices of the cache: per slice, the partial softmax
    /// state (unnormalized value sum, max score, sum of exponentials).
    AttentionSplit,
    /// Partial softmax states of [`Op::AttentionSplit`] merged into attention outputs.
    AttentionCombine,
    /// Rotary position embedding from per-token sin and cos tables.
    Rope,
    /// f32 rows appended to an f16 KV cache at a position.
    Append,
    /// A decode step's attention prologue: per-head RMS norms of queries and keys (optional,
    /// weighted), rope of both, keys and unit-normed (optional) values appended to f16 caches.
    /// Three outputs of different lengths: the rotated queries, the K cache, the V cache.
    RopeAppend,
    /// Rows of an f16 table gathered by u32 token ids, scaled.
    Embed,
    /// `y[y_off..][..n] = x[x_off..][..n]`; the rest of y untouched.
    Copy,
    /// `y[r][c] = x[r][c] + b[c]`.
    AddBias,
    /// `y = x * s`.
    Scale,
    /// `y = cap * tanh(x / cap)`.
    Softcap,
    /// The index of each row's largest value, the lowest among equals (greedy decoding).
    Argmax,
    /// Each row's `k` largest values, sorted as the host sampler sorts them (descending by
    /// `f32::total_cmp`, the lower index first among equals): two outputs, the ids (i32) and the
    /// values (f32), `k` per row.
    TopK,
}

/// The element type of a kernel's input or output buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    F32,
    F16,
    /// Token ids (inputs only): drawn as integers below the input's bound, held exactly as f32
    /// on the host.
    U32,
    /// Signed bytes: drawn as non-zero integers of magnitude at most the input's bound (127 for
    /// the symmetric range of quantized activations), held exactly as f32 on the host.
    I8,
    /// Exact integer results (i32 sums of i8 products): compared with tolerance 0.
    I32,
    /// Activations quantized to i8 blocks of 32 (kernels/quant/act_s8.tile, 80 bytes per 64
    /// values, u32 words on the device): an input is drawn as f32 and quantized by the host
    /// ([`reference::quantize_acts`]); an output is compared decoded
    /// ([`reference::decode_acts`]: per 64 values, their `d * q` and the two block sums).
    ActS8,
}

impl Elem {
    /// The device bytes of `len` elements: for [`Elem::ActS8`], `len` activation values.
    pub fn bytes(self, len: usize) -> usize {
        match self {
            Elem::F32 | Elem::U32 | Elem::I32 => 4 * len,
            Elem::F16 => 2 * len,
            Elem::I8 => len,
            Elem::ActS8 => len / reference::ACT_S8_GROUP * reference::ACT_S8_GROUP_BYTES,
        }
    }

    /// The device bytes of an output that compares as `len` values: [`Elem::bytes`] but for
    /// [`Elem::ActS8`], whose decoded form has [`reference::ACT_S8_DECODED`] values per group
    /// (a partial group, as in a guard, takes a whole one).
    pub fn output_bytes(self, len: usize) -> usize {
        match self {
            Elem::ActS8 => len.div_ceil(reference::ACT_S8_DECODED) * reference::ACT_S8_GROUP_BYTES,
            _ => self.bytes(len),
        }
    }
}

/// The floor a kernel is measured against.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Cost {
    Flops(f64),
    /// The minimal DRAM traffic: every input read once, every output written once.
    Bytes(f64),
}

/// What a kernel's time is compared with in the same run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Baseline {
    /// cuBLAS fp16 GEMM (f32 accumulation) at the same shape.
    CublasF16,
    /// A device-to-device copy moving the kernel's minimal traffic (for a kernel measured in
    /// flops, the rate it would reach if it took only that copy's time).
    Copy,
}

pub struct Spec {
    /// The kernel's name; its variants (`name@...`) share the spec.
    pub kernel: &'static str,
    pub op: Op,
    /// The element type of the input views (inputs are drawn as f32 and rounded to it, or as
    /// integers for integer types), but for token ids ([`Spec::input_elem`]).
    pub input: Elem,
    pub out: Elem,
    /// The last input is a weight matrix stored as raw GGUF blocks of this type (u32 words);
    /// its values are drawn as f32 and quantized by models/src/quant.
    pub weight: Option<GgmlType>,
    /// After its outputs the kernel writes the last one again as this element type, for the
    /// products that read it next: f16 for the tensor-core GEMMs (the `_f32h` kernels), int8
    /// blocks for the int8 matvecs (the `_f32q` kernels).
    pub copy: Option<Elem>,
    /// Gate and up values in a gated pair's layout ([`PAIR_GROUP`]), combined by this op
    /// ([`Op::SiluMul`] or [`Op::GeluMul`]): a [`Op::QuantGemm`] of 2N weight rows that writes
    /// the gated unit's N outputs (gemm_wg's GLU), or the gated op on inputs of 2n values (the
    /// `_pairs` kernels, after a paired matrix's matvec).
    pub gated: Option<Op>,
    /// gemm_wg's launches: after the shape the kernel takes the first of the product's tiles
    /// that its grid computes, the first token row of those tiles and (persistent blocks) how
    /// many tiles they take (0, 0 and 0 here: all of them, on the grid its signature derives).
    pub first_tile: bool,
}

/// Gate and up rows (or values) alternate in groups of this many in a gated pair's layout
/// (kernels/lib/activation.tile), so the gated unit's width must be a multiple of it.
pub const PAIR_GROUP: usize = 8;

/// Index of the gate of value `i` in a gated pair's layout; its up value is [`PAIR_GROUP`] on.
pub fn paired_gate(i: usize) -> usize {
    2 * i - i % PAIR_GROUP
}

pub const SPECS: &[Spec] = &[
    spec("rmsnorm_f32", Op::RmsNorm, Elem::F32, Elem::F32),
    spec("rmsnorm_f16", Op::RmsNorm, Elem::F32, Elem::F16),
    spec("add_rmsnorm_f32", Op::AddRmsNorm, Elem::F32, Elem::F32),
    spec("add_rmsnorm_f16", Op::AddRmsNorm, Elem::F32, Elem::F16),
    with_copy("rmsnorm_f32h", Op::RmsNorm, Elem::F16),
    with_copy("silu_mul_f32h", Op::SiluMul, Elem::F16),
    with_copy("gelu_mul_f32h", Op::GeluMul, Elem::F16),
    spec("softmax_rows", Op::Softmax, Elem::F32, Elem::F32),
    spec("argmax_rows", Op::Argmax, Elem::F32, Elem::I32),
    spec("top_k_rows", Op::TopK, Elem::F32, Elem::I32),
    spec("add_f32", Op::Add, Elem::F32, Elem::F32),
    spec("silu_mul_f32", Op::SiluMul, Elem::F32, Elem::F32),
    spec("gelu_mul_f32", Op::GeluMul, Elem::F32, Elem::F32),
    spec("f32_to_f16", Op::ToF16, Elem::F32, Elem::F16),
    spec("gemm_simt", Op::Gemm, Elem::F32, Elem::F32),
    // f16 x f16 -> f32 on the tensor cores; its 16-byte copies need K % 8 == 0.
    spec("gemm_f16", Op::Gemm, Elem::F16, Elem::F32),
    // i8 x i8 -> exact i32 on the tensor cores (mma m16n8k32); its 16-byte copies need
    // K % 16 == 0. Its baseline is cuBLAS f16 at the same shape, and its rate counts 2 T N K
    // integer operations (TOPS): int8 mma peaks at twice the f16 rate, so parity with cuBLAS f16
    // is half of what the tensor cores allow.
    spec("gemm_s8", Op::Gemm, Elem::I8, Elem::I32),
    quant("dequant_q4k", Op::Dequant, GgmlType::Q4_K, Elem::F16),
    quant("dequant_q5k", Op::Dequant, GgmlType::Q5_K, Elem::F16),
    quant("dequant_q6k", Op::Dequant, GgmlType::Q6_K, Elem::F16),
    quant("dequant_q8_0", Op::Dequant, GgmlType::Q8_0, Elem::F16),
    quant("dequant_q5_0", Op::Dequant, GgmlType::Q5_0, Elem::F16),
    quant("dequant_q4_0", Op::Dequant, GgmlType::Q4_0, Elem::F16),
    quant("dequant_iq4_nl", Op::Dequant, GgmlType::IQ4_NL, Elem::F16),
    quant("dequant_iq4_xs", Op::Dequant, GgmlType::IQ4_XS, Elem::F16),
    quant("matvec_q4k", Op::Matvec, GgmlType::Q4_K, Elem::F32),
    quant("matvec_q5k", Op::Matvec, GgmlType::Q5_K, Elem::F32),
    quant("matvec_q6k", Op::Matvec, GgmlType::Q6_K, Elem::F32),
    quant("matvec_q8_0", Op::Matvec, GgmlType::Q8_0, Elem::F32),
    quant("matvec_q5_0", Op::Matvec, GgmlType::Q5_0, Elem::F32),
    quant("matvec_q4_0", Op::Matvec, GgmlType::Q4_0, Elem::F32),
    quant("matvec_iq4_nl", Op::Matvec, GgmlType::IQ4_NL, Elem::F32),
    quant("matvec_iq4_xs", Op::Matvec, GgmlType::IQ4_XS, Elem::F32),
    quant_gemm("gemm_q4k", GgmlType::Q4_K),
    // sm_90a only: Q4_K decoded into wgmma's register A operand (kernels/gemm_wg.tile).
    wgmma(quant_gemm("gemm_q4k_wg", GgmlType::Q4_K)),
    quant_gemm("gemm_q5k", GgmlType::Q5_K),
    // sm_90a only: gemm_q4k_wg's kernel with Q5_K's fifth bits (kernels/gemm_wg.tile).
    wgmma(quant_gemm("gemm_q5k_wg", GgmlType::Q5_K)),
    // The int8 path: activations from quantize_s8, i8 mma on the raw nibbles.
    Spec {
        kernel: "gemm_q4k_s8",
        op: Op::QuantGemm,
        input: Elem::ActS8,
        out: Elem::F32,
        weight: Some(GgmlType::Q4_K),
        copy: None,
        gated: None,
        first_tile: false,
    },
    spec("quantize_s8", Op::QuantizeActs, Elem::F32, Elem::ActS8),
    // Decode-size producers that also write their output as int8 blocks ([`Spec::int8_copy`]).
    with_copy("rmsnorm_f32q", Op::RmsNorm, Elem::ActS8),
    with_copy("add_rmsnorm_f32q", Op::AddRmsNorm, Elem::ActS8),
    with_copy("silu_mul_f32q", Op::SiluMul, Elem::ActS8),
    with_copy("gelu_mul_f32q", Op::GeluMul, Elem::ActS8),
    // Decode on the integer units: activations from quantize_s8, dp4a on the raw nibbles.
    int8_matvec("matvec_q4k_s8", GgmlType::Q4_K),
    // Q5_K on the same kernel, its fifth bits ored into the quant bytes.
    int8_matvec("matvec_q5k_s8", GgmlType::Q5_K),
    // The same on Q6_K, reading matvec_q6k's planar layout.
    int8_matvec("matvec_q6k_s8", GgmlType::Q6_K),
    // Q8_0, Q5_0 and Q4_0 on matvec_q8_0's and matvec_q5_0's planar layouts (one d per 32
    // weights, an activation block's).
    int8_matvec("matvec_q8_0_s8", GgmlType::Q8_0),
    int8_matvec("matvec_q5_0_s8", GgmlType::Q5_0),
    int8_matvec("matvec_q4_0_s8", GgmlType::Q4_0),
    // IQ4_NL on Q4_0's layout, levels for nibbles.
    int8_matvec("matvec_iq4_nl_s8", GgmlType::IQ4_NL),
    // IQ4_XS repacked to IQ4_NL's geometry (a scale word per 64 weights).
    int8_matvec("matvec_iq4_xs_s8", GgmlType::IQ4_XS),
    // These read the planar layout (models/src/quant/planar.rs), as uploaded by the harness.
    quant_gemm("gemm_q6k", GgmlType::Q6_K),
    // sm_90a only: gemm_q4k_wg's kernel on planar Q6_K (kernels/gemm_wg.tile).
    wgmma(quant_gemm("gemm_q6k_wg", GgmlType::Q6_K)),
    quant_gemm("gemm_q8_0", GgmlType::Q8_0),
    // sm_90a only: gemm_q4k_wg's kernel on planar Q8_0 (kernels/gemm_wg.tile).
    wgmma(quant_gemm("gemm_q8_0_wg", GgmlType::Q8_0)),
    quant_gemm("gemm_q5_0", GgmlType::Q5_0),
    quant_gemm("gemm_q4_0", GgmlType::Q4_0),
    // sm_90a only: gemm_q4k_wg's kernel on planar Q4_0 (kernels/gemm_wg.tile).
    wgmma(quant_gemm("gemm_q4_0_wg", GgmlType::Q4_0)),
    quant_gemm("gemm_iq4_nl", GgmlType::IQ4_NL),
    // sm_90a only: gemm_q4_0_wg's path with levels (kernels/gemm_wg.tile).
    wgmma(quant_gemm("gemm_iq4_nl_wg", GgmlType::IQ4_NL)),
    quant_gemm("gemm_iq4_xs", GgmlType::IQ4_XS),
    wgmma(quant_gemm("gemm_iq4_xs_wg", GgmlType::IQ4_XS)),
    // sm_90a only: gemm_wg writing f16, the output of the cuBLAS baseline (kernels/gemm_wg_h.tile).
    wgmma(half_out_gemm("gemm_q4k_wg_h", GgmlType::Q4_K)),
    wgmma(half_out_gemm("gemm_q6k_wg_h", GgmlType::Q6_K)),
    // sm_90a only: gemm_q4k_wg's kernel on a gated pair's gate and up rows, with the gated
    // unit's activation in its epilogue (GLU in kernels/gemm_wg.tile).
    gated_wgmma("gemm_q4k_wg_silu", GgmlType::Q4_K, Op::SiluMul),
    gated_wgmma("gemm_q4k_wg_gelu", GgmlType::Q4_K, Op::GeluMul),
    gated_wgmma("gemm_q5k_wg_silu", GgmlType::Q5_K, Op::SiluMul),
    gated_wgmma("gemm_q5k_wg_gelu", GgmlType::Q5_K, Op::GeluMul),
    gated_wgmma("gemm_q6k_wg_silu", GgmlType::Q6_K, Op::SiluMul),
    gated_wgmma("gemm_q6k_wg_gelu", GgmlType::Q6_K, Op::GeluMul),
    gated_wgmma("gemm_q8_0_wg_silu", GgmlType::Q8_0, Op::SiluMul),
    gated_wgmma("gemm_q8_0_wg_gelu", GgmlType::Q8_0, Op::GeluMul),
    gated_wgmma("gemm_q4_0_wg_silu", GgmlType::Q4_0, Op::SiluMul),
    gated_wgmma("gemm_q4_0_wg_gelu", GgmlType::Q4_0, Op::GeluMul),
    gated_wgmma("gemm_iq4_nl_wg_silu", GgmlType::IQ4_NL, Op::SiluMul),
    gated_wgmma("gemm_iq4_nl_wg_gelu", GgmlType::IQ4_NL, Op::GeluMul),
    gated_wgmma("gemm_iq4_xs_wg_silu", GgmlType::IQ4_XS, Op::SiluMul),
    gated_wgmma("gemm_iq4_xs_wg_gelu", GgmlType::IQ4_XS, Op::GeluMul),
    // The same on gemm_q4k's mma.sync kernel (GLU in kernels/gemm_q4k.tile), for the GPUs
    // without wgmma.
    gated_gemm("gemm_q4k_silu", GgmlType::Q4_K, Op::SiluMul),
    gated_gemm("gemm_q4k_gelu", GgmlType::Q4_K, Op::GeluMul),
    gated_gemm("gemm_q5k_silu", GgmlType::Q5_K, Op::SiluMul),
    gated_gemm("gemm_q5k_gelu", GgmlType::Q5_K, Op::GeluMul),
    // A paired matrix's matvec output (gate and up interleaved) to the gated product.
    paired("silu_mul_pairs_f32", Op::SiluMul, None),
    paired("gelu_mul_pairs_f32", Op::GeluMul, None),
    paired("silu_mul_pairs_f32q", Op::SiluMul, Some(Elem::ActS8)),
    paired("gelu_mul_pairs_f32q", Op::GeluMul, Some(Elem::ActS8)),
    spec("attention_f32", Op::Attention, Elem::F32, Elem::F32),
    // Tensor cores, f16 Q, K, V; heads of exactly its `D` (FLASH_HEAD_DIM by default); the
    // output also in f16.
    Spec {
        copy: Some(Elem::F16),
        ..spec("flash_attn_f16", Op::Attention, Elem::F16, Elem::F32)
    },
    // f32 queries, f16 caches (see `Spec::input_elem`).
    spec(
        "attention_split_f16",
        Op::AttentionSplit,
        Elem::F16,
        Elem::F32,
    ),
    spec(
        "attention_combine",
        Op::AttentionCombine,
        Elem::F32,
        Elem::F32,
    ),
    // The same that also writes its output as int8 blocks, for the o projection's int8 matvec.
    with_copy("attention_combine_q", Op::AttentionCombine, Elem::ActS8),
    spec("rope_f32", Op::Rope, Elem::F32, Elem::F32),
    with_copy("rope_f32h", Op::Rope, Elem::F16),
    // An f16 table, then u32 token ids.
    spec("embed_f16", Op::Embed, Elem::F16, Elem::F32),
    // u32 token ids, then a quantized table.
    quant("embed_q4k", Op::Embed, GgmlType::Q4_K, Elem::F32),
    quant("embed_q5k", Op::Embed, GgmlType::Q5_K, Elem::F32),
    quant("embed_q6k", Op::Embed, GgmlType::Q6_K, Elem::F32),
    quant("embed_q8_0", Op::Embed, GgmlType::Q8_0, Elem::F32),
    quant("embed_q5_0", Op::Embed, GgmlType::Q5_0, Elem::F32),
    quant("embed_q4_0", Op::Embed, GgmlType::Q4_0, Elem::F32),
    quant("embed_iq4_nl", Op::Embed, GgmlType::IQ4_NL, Elem::F32),
    quant("embed_iq4_xs", Op::Embed, GgmlType::IQ4_XS, Elem::F32),
    spec("copy_f32", Op::Copy, Elem::F32, Elem::F32),
    // f32 rows, then the u32 position offset.
    spec("append_f16", Op::Append, Elem::F32, Elem::F16),
    // q, k, v, the two norm weights, sin, cos, the position offset.
    spec("rope_append_f16", Op::RopeAppend, Elem::F32, Elem::F32),
    // The same with the rotated queries in f16, for flash attention (prefill-size batches).
    spec("rope_append_f16_q16", Op::RopeAppend, Elem::F32, Elem::F16),
    spec("add_bias_f32", Op::AddBias, Elem::F32, Elem::F32),
    spec("scale_f32", Op::Scale, Elem::F32, Elem::F32),
    spec("softcap_f32", Op::Softcap, Elem::F32, Elem::F32),
];

const fn spec(kernel: &'static str, op: Op, input: Elem, out: Elem) -> Spec {
    Spec {
        kernel,
        op,
        input,
        out,
        weight: None,
        copy: None,
        gated: None,
        first_tile: false,
    }
}

/// An f32 kernel that also writes its last output as `copy` ([`Spec::copy`]).
const fn with_copy(kernel: &'static str, op: Op, copy: Elem) -> Spec {
    Spec {
        copy: Some(copy),
        ..spec(kernel, op, Elem::F32, Elem::F32)
    }
}

/// A kernel whose last input is a `ty` weight matrix; the other inputs are f32.
const fn quant(kernel: &'static str, op: Op, ty: GgmlType, out: Elem) -> Spec {
    Spec {
        kernel,
        op,
        input: Elem::F32,
        out,
        weight: Some(ty),
        copy: None,
        gated: None,
        first_tile: false,
    }
}

/// `op`'s gated unit of `n` values from gate and up values in a gated pair's layout (`gate`'s
/// gates, `up`'s up values), in rows of `width` values (of 2 `width` pair values).
fn gated_unit(op: Op, gate: &[f64], up: &[f64], n: usize, width: usize) -> Vec<f64> {
    let act = match op {
        Op::GeluMul => reference::gelu_tanh,
        _ => reference::silu,
    };
    (0..n)
        .map(|i| {
            let (row, col) = (i / width, i % width);
            let at = 2 * width * row + paired_gate(col);
            act(gate[at]) * up[at + PAIR_GROUP]
        })
        .collect()
}

/// A tensor-core GEMM with f16 activations and `ty` weights, f32 output.
const fn quant_gemm(kernel: &'static str, ty: GgmlType) -> Spec {
    Spec {
        kernel,
        op: Op::QuantGemm,
        input: Elem::F16,
        out: Elem::F32,
        weight: Some(ty),
        copy: None,
        gated: None,
        first_tile: false,
    }
}

/// [`quant_gemm`] writing f16.
const fn half_out_gemm(kernel: &'static str, ty: GgmlType) -> Spec {
    Spec {
        out: Elem::F16,
        ..quant_gemm(kernel, ty)
    }
}

/// gemm_wg's kernels ([`Spec::first_tile`]).
const fn wgmma(spec: Spec) -> Spec {
    Spec {
        first_tile: true,
        ..spec
    }
}

/// [`gated_gemm`] on gemm_wg's kernels.
const fn gated_wgmma(kernel: &'static str, ty: GgmlType, op: Op) -> Spec {
    wgmma(gated_gemm(kernel, ty, op))
}

/// [`half_out_gemm`] on a gated pair's 2N weight rows, writing `op`'s gated unit (f16: the down
/// projection's input).
const fn gated_gemm(kernel: &'static str, ty: GgmlType, op: Op) -> Spec {
    Spec {
        gated: Some(op),
        ..half_out_gemm(kernel, ty)
    }
}

/// A decode matvec on quantize_s8's int8 activations and `ty` weights.
const fn int8_matvec(kernel: &'static str, ty: GgmlType) -> Spec {
    Spec {
        input: Elem::ActS8,
        ..quant(kernel, Op::Matvec, ty, Elem::F32)
    }
}

/// `op` (with its output's `copy`) on gate and up values in a gated pair's layout.
const fn paired(kernel: &'static str, op: Op, copy: Option<Elem>) -> Spec {
    Spec {
        copy,
        gated: Some(op),
        ..spec(kernel, op, Elem::F32, Elem::F32)
    }
}

/// The spec of a registered kernel or variant.
pub fn spec_for(name: &str) -> Option<&'static Spec> {
    let base = name.split('@').next().unwrap_or(name);
    SPECS.iter().find(|s| s.kernel == base)
}

pub const RMS_EPS: f32 = 1e-5;

/// Rounding to f16 alone costs up to 2^-11 of the value.
const F16_TOLERANCE: f64 = 1e-3;

/// The largest magnitude of random i8 inputs: the symmetric range of quantized activations.
pub const I8_MAX: f32 = 127.0;

/// `scale_f32`'s factor: not a power of two, so the product rounds.
pub const SCALE: f32 = 0.3;

/// `softcap_f32`'s cap, Gemma 2's final-logit one; its inputs reach well into the saturation.
pub const SOFTCAP: f32 = 30.0;

/// The rope tables' base frequency and first position (as in a decode deep into a context, so
/// the angles are not all small).
pub const ROPE_BASE: f32 = 10_000.0;
pub const ROPE_START: usize = 1000;

/// The tables hold this many rows before the first token's, which the kernel must skip.
pub const ROPE_ROW0: usize = 3;

/// Of those rows, the kernel is told this many through its device-side position offset (as in a
/// decode step replayed from a CUDA graph), the rest as a scalar.
pub const ROPE_AT: usize = 2;

/// `top_k_rows`'s largest k (its `KMAX`) and widest row (indices take 24 bits of its key).
pub const TOP_K_MAX: usize = 256;
pub const TOP_K_MAX_COLS: usize = 1 << 24;

/// The part of a position that kernels taking one both ways (scalar plus device offset) get on
/// the device in the tests: half, so that a kernel dropping either part fails.
fn device_part(pos: usize) -> usize {
    pos / 2
}

/// The attention kernel's widest head (its `D_MAX`).
pub const ATTENTION_MAX_HEAD_DIM: usize = 512;

/// `flash_attn_f16`'s head width `D` without a variant's override.
pub const FLASH_HEAD_DIM: usize = 128;

/// Plants in each row of `[rows][cols]` (k per row) what a wrong order or tie rule gets wrong:
/// +0 after -0 and a NaN of each sign (total_cmp ranks +0 above -0, +NaN first and -NaN last;
/// every other row keeps its +NaN out); then the k-th largest value of the rest copied into
/// four places spread over different threads' shares, so that the k-th place is a tie that
/// only the lowest index wins (for k = cols, ties all taken, in index order).
fn plant_top_k_ties(s: &Shape, x: &mut [f32]) {
    let (cols, k) = (s.0[1], s.0[2]);
    if cols < 16 {
        return;
    }
    let ties = [cols / 3, cols / 2 + 1, 2 * cols / 3, cols - 1];
    for (r, row) in x.chunks_mut(cols).enumerate() {
        row[1] = -0.0;
        row[cols - 2] = 0.0;
        row[cols / 5] = -f32::NAN;
        if r % 2 == 1 {
            row[cols / 4] = f32::NAN;
        }
        let mut rest: Vec<f32> = (row.iter().enumerate())
            .filter(|(i, _)| !ties.contains(i))
            .map(|(_, &v)| v)
            .collect();
        rest.sort_unstable_by(|a, b| b.total_cmp(a));
        let tie = rest[(k - 1).min(rest.len() - 1)];
        for &i in &ties {
            row[i] = tie;
        }
    }
}

/// The GEMM shapes of ../shared/ANCHORS.md as T x N x K (N x K is the weight, m x k there).
const ANCHOR_GEMMS: &[&[usize]] = &[
    &[512, 4096, 14336],
    &[512, 14336, 4096],
    &[512, 4096, 4096],
    &[2048, 4096, 14336],
    &[2048, 14336, 4096],
    &[2048, 4096, 4096],
];

/// Dimensions (by [`Spec::dims`] name) for which 0 means an option that is off or an offset.
const MAY_BE_ZERO: &[&str] = &[
    "window", "softcap", "neox", "qk_norm", "v_norm", "pos", "x_off", "y_off",
];

impl Spec {
    /// The names of the shape's dimensions.
    pub fn dims(&self) -> &'static [&'static str] {
        match self.op {
            Op::RmsNorm | Op::AddRmsNorm | Op::Softmax | Op::Argmax | Op::QuantizeActs => {
                &["rows", "cols"]
            }
            Op::TopK => &["rows", "cols", "k"],
            Op::Add | Op::SiluMul | Op::GeluMul | Op::ToF16 => &["n"],
            Op::Gemm | Op::Matvec | Op::QuantGemm => &["T", "N", "K"],
            Op::Dequant => &["N", "K"],
            // T new tokens at positions n_kv - T.. against n_kv cached keys; window and softcap
            // 0 are none.
            Op::Attention => &[
                "heads", "kv_heads", "dk", "dv", "T", "n_kv", "window", "softcap",
            ],
            Op::AttentionSplit => &[
                "heads", "kv_heads", "dk", "dv", "T", "n_kv", "window", "softcap", "split",
            ],
            Op::AttentionCombine => &["heads", "T", "dv", "splits"],
            // n_rot of head_dim dimensions rotated; neox 1 pairs (i, i + n_rot / 2), 0 (2i, 2i + 1).
            Op::Rope => &["heads", "T", "head_dim", "n_rot", "neox"],
            // n elements (rows of `row`) at position `pos`.
            Op::Append => &["pos", "row", "n"],
            // T tokens at cache rows pos..; qk_norm and v_norm 1 turn the norms on.
            Op::RopeAppend => &[
                "heads", "kv_heads", "dk", "dv", "T", "n_rot", "neox", "qk_norm", "v_norm", "pos",
            ],
            Op::Embed => &["vocab", "T", "cols"],
            Op::Copy => &["x_off", "y_off", "n"],
            Op::AddBias => &["rows", "cols"],
            Op::Scale | Op::Softcap => &["n"],
        }
    }

    /// Shapes `zinc selftest` checks: degenerate, ragged and real ones.
    pub fn selftest_shapes(&self) -> &'static [&'static [usize]] {
        match self.op {
            // Rows of whole 64-value groups: one group, ragged against the block, decode batches
            // of the hidden and feed-forward widths.
            Op::RmsNorm | Op::AddRmsNorm if self.int8_copy() => {
                &[&[1, 64], &[37, 1024], &[8, 4096], &[3, 14336]]
            }
            // Whole 64-value groups (and gated pairs' groups).
            Op::SiluMul | Op::GeluMul if self.int8_copy() || self.gated.is_some() => {
                &[&[64], &[1088], &[8 * 14336]]
            }
            // One group of four (kernels/norm.tile), ragged, the hidden widths of Llama 3 8B and
            // Gemma 3 27B, a row wider than every build holds in registers.
            Op::RmsNorm | Op::AddRmsNorm => &[
                &[1, 4],
                &[37, 1000],
                &[512, 4096],
                &[64, 5376],
                &[3, 70_000],
            ],
            // Rows of whole 64-value groups; the GEMM anchors' activations.
            Op::QuantizeActs => &[
                &[1, 64],
                &[37, 1024],
                &[512, 4096],
                &[512, 14336],
                &[2048, 14336],
            ],
            Op::Softmax => &[&[3, 1], &[1001, 77], &[512, 2048], &[16, 32000]],
            // Vocabularies of Qwen 3, Llama 3 and Gemma 3, a batch of rows.
            Op::Argmax => &[
                &[1, 1],
                &[3, 1000],
                &[1, 151_936],
                &[8, 128_256],
                &[1, 262_144],
            ],
            // llama.cpp's default k (40) and the kernel's largest (256) on the same
            // vocabularies; k = cols.
            Op::TopK => &[
                &[1, 1, 1],
                &[3, 1000, 40],
                &[2, 256, 256],
                &[1, 151_936, 40],
                &[8, 128_256, 40],
                &[1, 262_144, 40],
                &[1, 262_144, 256],
            ],
            Op::Add | Op::SiluMul | Op::GeluMul | Op::ToF16 => {
                &[&[1], &[1000], &[1_000_003], &[1 << 24]]
            }
            // K a multiple of 8, ragged in every dimension otherwise.
            Op::Gemm if self.input == Elem::F16 => &[
                &[1, 1, 8],
                &[17, 33, 40],
                &[67, 131, 1000],
                &[513, 257, 304],
                &[128, 4096, 4096],
                &[64, 1024, 14336],
            ],
            // K a multiple of 16, ragged in every dimension otherwise, then the anchor GEMMs.
            Op::Gemm if self.input == Elem::I8 => &[
                &[1, 1, 16],
                &[17, 33, 48],
                &[67, 131, 1008],
                &[513, 257, 304],
                &[512, 4096, 14336],
                &[512, 14336, 4096],
                &[512, 4096, 4096],
                &[2048, 4096, 14336],
                &[2048, 14336, 4096],
                &[2048, 4096, 4096],
            ],
            Op::Gemm => &[
                &[1, 1, 1],
                &[17, 33, 5],
                &[67, 131, 1001],
                &[513, 257, 300],
                &[128, 4096, 4096],
                &[64, 1024, 14336],
            ],
            // Ragged N; K = 544 and 800 are whole 32-blocks only (Q8_0, Q5_0, Q4_0).
            Op::Dequant => &[
                &[37, 512],
                &[3, 256],
                &[3, 544],
                &[4096, 14336],
                &[14336, 4096],
                &[1001, 800],
            ],
            Op::Matvec => &[
                &[1, 37, 512],
                &[3, 5, 256],
                &[3, 5, 544],
                &[1, 4096, 14336],
                &[2, 4096, 14336],
                &[4, 4096, 14336],
                &[8, 4096, 14336],
                &[1, 14336, 4096],
                &[8, 14336, 4096],
                &[1, 4096, 4096],
                &[5, 1001, 768],
            ],
            // Ragged T and N (in whole pair groups), then llama3-8b's gate and up projections.
            Op::QuantGemm if self.gated.is_some() => &[
                &[1, 8, 256],
                &[17, 40, 256],
                &[67, 200, 768],
                &[513, 136, 1024],
                &[512, 14336, 4096],
                &[2048, 14336, 4096],
            ],
            // Ragged T and N (K is whole super-blocks), then the anchor GEMMs.
            Op::QuantGemm => &[
                &[1, 1, 256],
                &[17, 33, 256],
                &[67, 131, 768],
                &[513, 257, 1024],
                &[512, 4096, 14336],
                &[512, 14336, 4096],
                &[512, 4096, 4096],
                &[2048, 4096, 14336],
                &[2048, 14336, 4096],
                &[2048, 4096, 4096],
            ],
            Op::Attention => &[
                // Ragged heads (dv over two warps' worth of lanes), prefill from scratch.
                &[2, 1, 33, 65, 3, 3, 0, 0],
                &[4, 2, 40, 24, 5, 8, 4, 20],
                // Llama 3 8B: prefill, decode, and a prefill chunk after a cached prefix.
                &[32, 8, 128, 128, 512, 512, 0, 0],
                &[32, 8, 128, 128, 1, 512, 0, 0],
                &[32, 8, 128, 128, 77, 333, 0, 0],
                // Gemma 2 9B: sliding window and soft-capping.
                &[16, 8, 256, 256, 512, 512, 256, 50],
                // One KV head, decode in a window; the widest heads (Gemma 4 global layers).
                &[8, 1, 256, 256, 1, 4096, 1024, 0],
                &[8, 2, 512, 512, 3, 300, 0, 0],
                // Gemma 3 local layers (windows 512 and 1024), long prefill, head widths 64.
                &[16, 8, 256, 256, 2048, 2048, 1024, 0],
                &[8, 4, 256, 256, 2048, 2048, 512, 0],
                &[32, 8, 128, 128, 2048, 2048, 0, 0],
                &[14, 2, 64, 64, 300, 300, 0, 0],
                &[14, 2, 64, 64, 77, 333, 0, 30],
                &[8, 4, 256, 256, 77, 333, 0, 0],
            ],
            // Decode and an 8-token batch deep into a Llama 3 8B context; Gemma 3 local layers
            // (most slices empty); the widest heads; ragged slices and heads.
            Op::AttentionSplit => &[
                &[32, 8, 128, 128, 1, 4096, 0, 0, 256],
                &[32, 8, 128, 128, 8, 4096, 0, 0, 256],
                &[16, 8, 256, 256, 1, 8000, 1024, 0, 512],
                &[16, 8, 256, 256, 4, 3000, 0, 50, 128],
                &[8, 2, 512, 512, 3, 300, 0, 0, 64],
                &[6, 3, 40, 24, 5, 77, 9, 0, 10],
            ],
            Op::AttentionCombine => &[
                &[32, 1, 128, 16],
                &[32, 8, 128, 16],
                &[8, 3, 512, 5],
                &[6, 5, 24, 1],
            ],
            Op::Rope => &[
                &[1, 1, 2, 2, 1],
                &[3, 4, 24, 16, 1],
                &[8, 3, 100, 40, 0],
                &[32, 512, 128, 128, 0],
                &[32, 512, 128, 128, 1],
                &[16, 512, 256, 256, 1],
                &[32, 1, 128, 64, 1],
            ],
            // Odd widths for the f16 table; quantized ones take whole blocks (Gemma 3 270M's 640
            // is 20 blocks of 32).
            Op::Embed => &[
                &[7, 1, 1],
                &[7, 4, 300],
                &[5, 3, 256],
                &[32000, 512, 4096],
                &[49152, 1, 576],
                &[32768, 7, 640],
            ],
            // KV cache appends (8 KV heads of 128) in prefill and decode.
            Op::Append => &[
                &[0, 1, 1],
                &[5, 24, 48],
                &[0, 1024, 512 * 1024],
                &[4000, 1024, 1024],
            ],
            // Degenerate; ragged with dk != dv; Llama 3 8B decode; Qwen 3 at the matvec's widest
            // batch; Llama 3 8B's prefill; Gemma 3 270M; Gemma 4 global layers (wide heads,
            // partial rotation, values normed).
            Op::RopeAppend => &[
                &[1, 1, 2, 2, 1, 2, 0, 0, 0, 0],
                &[6, 3, 100, 70, 5, 40, 0, 1, 1, 33],
                &[32, 8, 128, 128, 1, 128, 0, 0, 0, 4000],
                &[32, 8, 128, 128, 8, 128, 1, 1, 0, 300],
                &[32, 8, 128, 128, 512, 128, 1, 0, 0, 0],
                &[4, 1, 256, 256, 1, 256, 1, 1, 0, 1000],
                &[16, 2, 512, 512, 3, 128, 1, 1, 1, 500],
            ],
            Op::Copy => &[
                &[0, 0, 1],
                &[100, 50, 300],
                &[3, 5, 1_000_003],
                // A last row.
                &[511 * 4096, 0, 4096],
            ],
            Op::AddBias => &[&[1, 1], &[37, 1000], &[512, 4096], &[3, 151_936]],
            Op::Scale | Op::Softcap => &[&[1], &[1000], &[1_000_003], &[1 << 24]],
        }
    }

    /// Small shapes for the CPU interpreter (the tests'), which runs every thread of every block.
    #[cfg(test)]
    pub fn interp_shapes(&self) -> &'static [&'static [usize]] {
        match self.op {
            // One group; rows ragged against the 1024-thread blocks, and (4864) a row past
            // what their one-group builds hold in registers.
            Op::RmsNorm | Op::AddRmsNorm if self.int8_copy() => &[&[1, 64], &[3, 192], &[2, 4864]],
            Op::SiluMul | Op::GeluMul if self.int8_copy() || self.gated.is_some() => {
                &[&[64], &[1088]]
            }
            // One group of four; ragged; (1200) a row past what the 256-thread one-group build
            // holds in registers.
            Op::RmsNorm | Op::AddRmsNorm => &[&[1, 4], &[3, 100], &[2, 1200]],
            // One group; ragged against the block of threads.
            Op::QuantizeActs => &[&[1, 64], &[3, 192], &[5, 1024]],
            Op::Softmax => &[&[3, 1], &[4, 77], &[2, 700]],
            Op::Argmax => &[&[1, 1], &[3, 100], &[2, 2500]],
            // One element; k = cols (every planted value in place); rows wider than the block,
            // with k up to the kernel's largest; a row past one round of unrolled loads (8192).
            Op::TopK => &[
                &[1, 1, 1],
                &[2, 200, 200],
                &[3, 2500, 40],
                &[2, 3000, 256],
                &[1, 9000, 40],
            ],
            Op::Add | Op::SiluMul | Op::GeluMul | Op::ToF16 | Op::Scale | Op::Softcap => {
                &[&[1], &[1000]]
            }
            // A slice shorter than BK, a ragged last slice, two block rows and columns.
            Op::Gemm if self.input == Elem::I8 => {
                &[&[1, 1, 16], &[17, 33, 80], &[67, 40, 128], &[130, 136, 64]]
            }
            Op::Gemm => &[&[1, 1, 1], &[17, 33, 5], &[17, 33, 8], &[67, 131, 40]],
            // K = 96 only for the 32-weight blocks.
            Op::Dequant => &[&[37, 512], &[3, 96]],
            // 32-weight blocks: K = 64 (one activation group), Gemma 3 270M's 640 (2.5 units of
            // 256: groups past the row's end) and 2048, at rows ragged against every row group.
            Op::Matvec
                if self.input == Elem::ActS8
                    && matches!(
                        self.weight,
                        Some(GgmlType::Q8_0 | GgmlType::Q5_0 | GgmlType::Q4_0 | GgmlType::IQ4_NL)
                    ) =>
            {
                &[&[1, 37, 640], &[11, 5, 64], &[3, 21, 2048], &[2, 70, 640]]
            }
            // 19 super-blocks: several trips per warp at KW = 4 and 8, odd and even counts
            // (PF = 1's prefetch of a real next trip, and its last phase past the end).
            // K in whole super-blocks; T past the default TMAX (two token passes, the second
            // ragged).
            Op::Matvec if self.input == Elem::ActS8 => {
                &[&[1, 37, 512], &[8, 9, 256], &[11, 5, 768], &[2, 19, 4864]]
            }
            Op::Matvec => &[&[1, 37, 512], &[8, 9, 256], &[3, 5, 96], &[2, 19, 4864]],
            // One and two block columns (of 64 outputs, the second ragged), two block rows
            // (ragged).
            Op::QuantGemm if self.gated.is_some() => {
                &[&[17, 40, 256], &[67, 104, 512], &[130, 64, 256]]
            }
            // Two block rows and columns at the default tiles.
            Op::QuantGemm => &[
                &[17, 33, 256],
                &[67, 40, 512],
                &[1, 1, 256],
                &[130, 136, 256],
            ],
            // Prefill after a cached prefix with window and cap, prefill from scratch, decode.
            Op::Attention if self.input == Elem::F16 => &[
                // Two query tiles (ragged) after a prefix; a window cutting key tiles; a cap;
                // one head per KV head; decode. One head width per variant (64, 128, 256).
                &[4, 2, 64, 64, 77, 90, 0, 0],
                &[4, 2, 64, 64, 33, 40, 20, 0],
                &[4, 2, 64, 64, 5, 40, 0, 30],
                &[2, 2, 64, 64, 1, 70, 0, 0],
                &[4, 2, 128, 128, 33, 40, 0, 0],
                &[4, 2, 128, 128, 70, 70, 9, 20],
                &[2, 1, 256, 256, 33, 40, 24, 0],
            ],
            Op::Attention => &[
                &[4, 2, 40, 24, 5, 8, 4, 20],
                &[4, 2, 40, 24, 6, 6, 0, 0],
                &[4, 2, 40, 24, 1, 10, 3, 0],
                &[2, 1, 33, 65, 3, 3, 0, 0],
            ],
            Op::AttentionSplit => &[
                &[4, 2, 64, 64, 1, 70, 0, 0, 16],
                &[4, 2, 40, 24, 3, 50, 20, 30, 16],
                &[2, 1, 160, 136, 8, 33, 0, 0, 8],
            ],
            // 37 splits: several trips of the output loop, the last one partial; 1100: past
            // the weights kept in shared memory; heads of whole int8 groups (the int8 copy's),
            // one wider than the block of threads.
            Op::AttentionCombine => &[
                &[4, 3, 40, 5],
                &[2, 1, 136, 1],
                &[3, 2, 40, 37],
                &[1, 1, 8, 1100],
                &[2, 2, 64, 37],
                &[1, 1, 192, 3],
            ],
            // Partial rotation both ways, an odd unrotated tail, more dimensions than threads.
            Op::Rope => &[
                &[3, 4, 24, 16, 0],
                &[3, 4, 24, 16, 1],
                &[2, 2, 71, 70, 0],
                &[1, 2, 300, 260, 1],
            ],
            Op::Embed => &[&[7, 4, 300], &[5, 1, 1], &[9, 3, 512], &[4, 2, 96]],
            Op::Copy => &[&[0, 0, 1], &[100, 50, 300]],
            Op::Append => &[&[0, 1, 1], &[3, 40, 80], &[2, 7, 5]],
            // dk != dv both ways, odd widths with an unrotated tail, heads wider than the block,
            // every flag both ways, a cache from row 0.
            Op::RopeAppend => &[
                &[3, 1, 40, 24, 2, 16, 1, 1, 1, 5],
                &[2, 2, 71, 33, 3, 70, 0, 0, 0, 0],
                &[4, 2, 300, 130, 1, 260, 1, 1, 1, 9],
                &[2, 1, 20, 64, 8, 20, 0, 1, 0, 2],
                &[2, 2, 24, 24, 2, 8, 1, 0, 1, 4],
            ],
            Op::AddBias => &[&[1, 1], &[3, 200]],
        }
    }

    /// Shapes `zinc bench-kernels` times: prefill-sized activations and the anchor GEMMs.
    pub fn bench_shapes(&self) -> &'static [&'static [usize]] {
        match self.op {
            // Decode: one token and a batch of 8.
            Op::RmsNorm | Op::AddRmsNorm if self.int8_copy() => &[&[1, 4096], &[8, 4096]],
            Op::SiluMul | Op::GeluMul if self.int8_copy() || self.gated.is_some() => {
                &[&[14336], &[8 * 14336]]
            }
            Op::RmsNorm | Op::AddRmsNorm => &[&[64, 4096], &[512, 4096], &[2048, 4096]],
            // The inputs of the anchor GEMMs (K = 4096 and 14336).
            Op::QuantizeActs => &[&[512, 4096], &[512, 14336], &[2048, 14336]],
            // Attention scores: 32 heads x T queries, T keys.
            Op::Softmax => &[&[32 * 512, 512], &[32 * 2048, 2048]],
            Op::Argmax => &[&[1, 128_256], &[1, 262_144]],
            Op::TopK => &[&[1, 128_256, 40], &[1, 262_144, 40], &[1, 262_144, 256]],
            // Residual at T = 512, feed-forward activations at T = 2048.
            Op::Add | Op::SiluMul | Op::GeluMul | Op::ToF16 => &[&[512 * 4096], &[2048 * 14336]],
            Op::Gemm => ANCHOR_GEMMS,
            // An 8B model's gate and up projections (both: 2 x 14336 weight rows).
            Op::QuantGemm if self.gated.is_some() => &[&[512, 14336, 4096], &[2048, 14336, 4096]],
            // The anchors, and an 8B model's key and value projections (8 KV heads of 128).
            Op::QuantGemm => &[
                &[512, 4096, 14336],
                &[512, 14336, 4096],
                &[512, 4096, 4096],
                &[2048, 4096, 14336],
                &[2048, 14336, 4096],
                &[2048, 4096, 4096],
                &[512, 1024, 4096],
            ],
            // The anchor weights, decoded (T = 1) and at the matvec's widest batch (T = 8).
            Op::Matvec => &[
                &[1, 4096, 14336],
                &[8, 4096, 14336],
                &[1, 14336, 4096],
                &[8, 14336, 4096],
                &[1, 4096, 4096],
                // The key and value projections of an 8B model with 8 KV heads.
                &[1, 1024, 4096],
            ],
            Op::Dequant => &[&[4096, 14336], &[14336, 4096]],
            Op::Attention => &[
                &[32, 8, 128, 128, 512, 512, 0, 0],
                &[32, 8, 128, 128, 2048, 2048, 0, 0],
                &[32, 8, 128, 128, 1, 2048, 0, 0],
                // Gemma 3 12B/27B-like local layer: window 1024 over a 2048 prefill.
                &[16, 8, 256, 256, 2048, 2048, 1024, 0],
            ],
            // Slice sizes to choose from: shorter slices mean more blocks and shorter serial
            // key loops per warp, and more partials to merge.
            Op::AttentionSplit => &[
                &[32, 8, 128, 128, 1, 4096, 0, 0, 64],
                &[32, 8, 128, 128, 1, 4096, 0, 0, 128],
                &[32, 8, 128, 128, 1, 4096, 0, 0, 256],
                &[32, 8, 128, 128, 8, 4096, 0, 0, 128],
                &[32, 8, 128, 128, 1, 32768, 0, 0, 512],
            ],
            Op::AttentionCombine => &[&[32, 1, 128, 16], &[32, 8, 128, 16]],
            Op::Rope => &[&[32, 512, 128, 128, 1], &[32, 2048, 128, 128, 1]],
            Op::Embed => &[&[32000, 512, 4096], &[32000, 2048, 4096]],
            // KV cache appends in prefill and decode; a last row.
            Op::Append => &[&[0, 1024, 512 * 1024], &[4000, 1024, 1024]],
            // Decode: Llama 3 8B, Gemma 3 270M; Llama 3 8B's prefill.
            Op::RopeAppend => &[
                &[32, 8, 128, 128, 1, 128, 0, 0, 0, 4000],
                &[4, 1, 256, 256, 1, 256, 1, 1, 0, 1000],
                &[32, 8, 128, 128, 512, 128, 1, 0, 0, 0],
            ],
            Op::Copy => &[&[511 * 4096, 0, 4096]],
            Op::AddBias => &[&[512, 4096], &[2048, 4096]],
            Op::Scale | Op::Softcap => &[&[512 * 4096], &[2048 * 14336]],
        }
    }

    /// Whether the kernel handles a shape: f16 and i8 GEMMs copy K in 16-byte chunks, so they
    /// need K to be a multiple of 8 (f16) or 16 (i8).
    /// Quantized weights need K to be a whole number of blocks (and of 64-weight slices for the
    /// quantized GEMMs).
    pub fn accepts(&self, s: &Shape) -> bool {
        // A gated pair's width is whole groups.
        let width = match self.op {
            Op::QuantGemm => s.0[1],
            _ => s.0[0],
        };
        if self.gated.is_some() && !width.is_multiple_of(PAIR_GROUP) {
            return false;
        }
        if self.int8_copy() {
            // The width of the rows whose blocks one block of threads writes: a head's.
            let width = match self.op {
                Op::AttentionCombine => s.0[2],
                _ => s.0[s.0.len() - 1],
            };
            return width.is_multiple_of(reference::ACT_S8_GROUP);
        }
        if let Some(ty) = self.weight {
            // The quantized GEMMs take K in 64-weight slices, and int8 activations come in
            // groups of 64 (Q8_0, Q5_0, Q4_0 and IQ4_NL blocks are 32).
            let slice = if self.op == Op::QuantGemm || self.input == Elem::ActS8 {
                64
            } else {
                1
            };
            return s.0[s.0.len() - 1].is_multiple_of(ty.block_size().max(slice));
        }
        let d = &s.0;
        match (self.op, self.input) {
            (Op::Gemm, Elem::F16) => d[2].is_multiple_of(8),
            (Op::Gemm, Elem::I8) => d[2].is_multiple_of(16),
            (Op::QuantizeActs, _) => d[1].is_multiple_of(reference::ACT_S8_GROUP),
            // Rows of whole groups of four (kernels/norm.tile).
            (Op::RmsNorm | Op::AddRmsNorm, _) => d[1].is_multiple_of(4),
            (Op::Attention, _) => {
                d[0].is_multiple_of(d[1])
                    && d[2].max(d[3]) <= ATTENTION_MAX_HEAD_DIM
                    && d[4] <= d[5]
                    && d[4] > 0
            }
            (Op::AttentionSplit, _) => {
                d[0].is_multiple_of(d[1])
                    && d[2].max(d[3]) <= ATTENTION_MAX_HEAD_DIM
                    && 0 < d[4]
                    && d[4] <= d[5]
                    && d[8] > 0
            }
            (Op::Rope, _) => d[3].is_multiple_of(2) && d[3] <= d[2] && d[4] <= 1,
            (Op::RopeAppend, _) => {
                d[5].is_multiple_of(2)
                    && 0 < d[5]
                    && d[5] <= d[2]
                    && d[3] > 0
                    && d[4] > 0
                    && d[6..9].iter().all(|&flag| flag <= 1)
            }
            (Op::TopK, _) => 0 < d[2] && d[2] <= d[1].min(TOP_K_MAX) && d[1] <= TOP_K_MAX_COLS,
            _ => true,
        }
    }

    /// The input buffers, in argument order: (length, magnitude of the random values; for token
    /// ids, the vocabulary size).
    pub fn inputs(&self, s: &Shape) -> Vec<(usize, f32)> {
        let d = &s.0;
        match self.op {
            Op::RmsNorm => vec![(d[0] * d[1], 2.0), (d[1], 1.5)],
            Op::AddRmsNorm => vec![(d[0] * d[1], 2.0), (d[0] * d[1], 1.0), (d[1], 1.5)],
            Op::QuantizeActs => vec![(d[0] * d[1], 4.0)],
            Op::Softmax => vec![(d[0] * d[1], 8.0)],
            // Ties planted by [`Spec::fill_tables`].
            Op::Argmax | Op::TopK => vec![(d[0] * d[1], 8.0)],
            Op::Add => vec![(d[0], 1.0), (d[0], 1.0)],
            // Activations see both tails of the sigmoid.
            Op::SiluMul | Op::GeluMul => {
                let n = self.gated.map_or(d[0], |_| 2 * d[0]);
                vec![(n, 4.0), (n, 1.0)]
            }
            // Values across many f16 exponents.
            Op::ToF16 => vec![(d[0], 100.0)],
            // The whole symmetric i8 range (as quantized activations use it).
            Op::Gemm if self.input == Elem::I8 => {
                vec![(d[0] * d[2], I8_MAX), (d[1] * d[2], I8_MAX)]
            }
            Op::Gemm | Op::Matvec | Op::QuantGemm => {
                vec![(d[0] * d[2], 1.0), (self.weight_rows(s) * d[2], 1.0)]
            }
            Op::Dequant => vec![(d[0] * d[1], 1.0)],
            // Queries larger than keys, so that the softmax is not flat.
            Op::Attention => vec![
                (d[4] * d[0] * d[2], 4.0),
                (d[5] * d[1] * d[2], 1.0),
                (d[5] * d[1] * d[3], 1.0),
            ],
            // Then the position offset ([`Spec::fill_tables`]).
            Op::AttentionSplit => vec![
                (d[4] * d[0] * d[2], 4.0),
                (d[5] * d[1] * d[2], 1.0),
                (d[5] * d[1] * d[3], 1.0),
                (1, 1.0),
            ],
            // Scores spread over 16 (m), sums of exponentials made positive, some splits
            // emptied ([`Spec::fill_tables`]).
            Op::AttentionCombine => vec![(d[1] * d[0] * d[3] * (d[2] + 2), 8.0)],
            // x, then sin and cos ([`Spec::fill_tables`] overwrites them).
            // x, sin, cos, the position offset ([`Spec::fill_tables`] writes the last three).
            Op::Rope => vec![
                (d[1] * d[0] * d[2], 1.0),
                ((ROPE_ROW0 + d[1]) * d[3] / 2, 1.0),
                ((ROPE_ROW0 + d[1]) * d[3] / 2, 1.0),
                (1, 1.0),
            ],
            // The rows, then the position offset ([`Spec::fill_tables`]).
            Op::Append => vec![(d[2], 1.0), (1, 1.0)],
            // q, k, v, their norm weights, sin and cos of every cache row up to the last token's,
            // the position offset ([`Spec::fill_tables`] writes the last three).
            Op::RopeAppend => {
                let table = (d[9] + d[4]) * d[5] / 2;
                vec![
                    (d[4] * d[0] * d[2], 2.0),
                    (d[4] * d[1] * d[2], 2.0),
                    (d[4] * d[1] * d[3], 2.0),
                    (d[2], 1.5),
                    (d[2], 1.5),
                    (table, 1.0),
                    (table, 1.0),
                    (1, 1.0),
                ]
            }
            Op::Embed if self.weight.is_some() => vec![(d[1], d[0] as f32), (d[0] * d[2], 1.0)],
            Op::Embed => vec![(d[0] * d[2], 1.0), (d[1], d[0] as f32)],
            Op::Copy => vec![(d[0] + d[2], 1.0)],
            Op::AddBias => vec![(d[0] * d[1], 1.0), (d[1], 1.0)],
            Op::Scale => vec![(d[0], 1.0)],
            Op::Softcap => vec![(d[0], 100.0)],
        }
    }

    /// The element type of input `i`: the quantized weight aside (see `weight`), `input` but for
    /// the embedding's token ids (after the table, or first when the table is quantized).
    pub fn input_elem(&self, i: usize) -> Elem {
        match (self.op, i, self.weight) {
            (Op::Embed, 1, None) | (Op::Embed, 0, Some(_)) => Elem::U32,
            (Op::AttentionSplit, 0, _) => Elem::F32,
            (Op::AttentionSplit, 3, _)
            | (Op::Rope, 3, _)
            | (Op::Append, 1, _)
            | (Op::RopeAppend, 7, _) => Elem::U32,
            _ => self.input,
        }
    }

    /// Overwrites the inputs that are not random: rope's sin and cos tables, for positions
    /// `ROPE_START - ROPE_ROW0..` as the GPU backend computes them; attention partials with
    /// empty splits; argmax rows with tied maxima.
    pub fn fill_tables(&self, s: &Shape, inputs: &mut [Vec<f32>]) {
        if self.op == Op::Argmax {
            // Each row's maximum twice, a third and two thirds in (different threads' shares):
            // the first must win.
            let cols = s.0[1];
            for row in inputs[0].chunks_mut(cols) {
                let top = row.iter().fold(f32::MIN, |m, &v| m.max(v)) + 1.0;
                row[cols / 3] = top;
                row[2 * cols / 3] = top;
            }
            return;
        }
        if self.op == Op::TopK {
            plant_top_k_ties(s, &mut inputs[0]);
            return;
        }
        if self.op == Op::AttentionCombine {
            let (splits, dv) = (s.0[3], s.0[2]);
            for (i, state) in inputs[0].chunks_mut(dv + 2).enumerate() {
                // Every row keeps its first split; every third other one is empty.
                if i % splits > 0 && i % 3 == 0 {
                    state.fill(0.0);
                } else {
                    state[dv + 1] = state[dv + 1].abs();
                }
            }
            return;
        }
        let at = match self.op {
            Op::Rope => ROPE_AT,
            Op::Append => device_part(s.0[0]),
            Op::AttentionSplit => device_part(attention_params(s).1),
            Op::RopeAppend => device_part(s.0[9]),
            _ => return,
        };
        let last = inputs.len() - 1;
        inputs[last] = vec![at as f32];
        // (first table input, rows, n_rot, neox); the fused prologue's table rows are cache rows.
        let (sin_input, rows, n_rot, neox) = match self.op {
            Op::Rope => (1, ROPE_ROW0 + s.0[1], s.0[3], s.0[4]),
            Op::RopeAppend => (5, s.0[9] + s.0[4], s.0[5], s.0[6]),
            _ => return,
        };
        let style = if neox == 1 {
            RopeStyle::Neox
        } else {
            RopeStyle::Normal
        };
        let table = RopeTable::new(style, n_rot, ROPE_BASE, 1.0, None);
        let first = ROPE_START - ROPE_ROW0;
        let (sin, cos): (Vec<Vec<f32>>, Vec<Vec<f32>>) =
            (first..first + rows).map(|p| table.sin_cos(p)).unzip();
        inputs[sin_input] = sin.concat();
        inputs[sin_input + 1] = cos.concat();
    }

    /// The element type of each output view (of [`Spec::output_lens`] elements); the reference
    /// holds them one after another.
    pub fn output_elems(&self) -> Vec<Elem> {
        let computed = match self.op {
            // The rotated queries, then the K and V caches.
            Op::RopeAppend => return vec![self.out, Elem::F16, Elem::F16],
            // The sum (the residual stream, f32 whatever the norm's type), then the norm.
            Op::AddRmsNorm => vec![Elem::F32, self.out],
            // The ids, then the values.
            Op::TopK => return vec![Elem::I32, Elem::F32],
            _ => vec![self.out],
        };
        computed.into_iter().chain(self.copy).collect()
    }

    pub fn outputs(&self) -> usize {
        self.output_elems().len()
    }

    /// [`Spec::tolerance`] for output `i`; f16 outputs (an f16 copy, a cache) may differ by
    /// their rounding.
    pub fn output_tolerance(&self, i: usize, s: &Shape) -> f64 {
        match self.output_elems()[i] {
            Elem::F16 if self.out == Elem::F16 => self.tolerance(s),
            Elem::F16 => F16_TOLERANCE,
            // Against the kernel's own f32 output quantized ([`Spec::reference_given`]).
            Elem::ActS8 if self.int8_copy() => 0.0,
            // The f32 sum of a norm written in f16 (add_rmsnorm_f16), as the f32 kernels' sums.
            Elem::F32 if self.out == Elem::F16 => Spec {
                out: Elem::F32,
                ..*self
            }
            .tolerance(s),
            _ => self.tolerance(s),
        }
    }

    /// Whether the kernel writes its last output again in f16 ([`Spec::copy`]).
    pub fn half_copy(&self) -> bool {
        self.copy == Some(Elem::F16)
    }

    /// Whether the kernel writes its last output again as int8 blocks ([`Spec::copy`]).
    pub fn int8_copy(&self) -> bool {
        self.copy == Some(Elem::ActS8)
    }

    /// The elements of each output view, in order.
    pub fn output_lens(&self, s: &Shape) -> Vec<usize> {
        let d = &s.0;
        if self.op == Op::RopeAppend {
            let rows = d[9] + d[4];
            return vec![d[4] * d[0] * d[2], rows * d[1] * d[2], rows * d[1] * d[3]];
        }
        let len = self.output_len(s);
        let int8 = len / reference::ACT_S8_GROUP * reference::ACT_S8_DECODED;
        (self.output_elems().into_iter())
            .map(|elem| match elem {
                Elem::ActS8 if self.int8_copy() => int8,
                _ => len,
            })
            .collect()
    }

    /// The elements of each output view of a kernel whose outputs are all one length.
    fn output_len(&self, s: &Shape) -> usize {
        let d = &s.0;
        match self.op {
            Op::RmsNorm | Op::AddRmsNorm | Op::Softmax | Op::AddBias => d[0] * d[1],
            Op::Argmax => d[0],
            Op::TopK => d[0] * d[2],
            Op::QuantizeActs => d[0] * d[1] / reference::ACT_S8_GROUP * reference::ACT_S8_DECODED,
            Op::Add | Op::SiluMul | Op::GeluMul | Op::ToF16 | Op::Scale | Op::Softcap => d[0],
            Op::Gemm | Op::Matvec | Op::QuantGemm | Op::Dequant => d[0] * d[1],
            Op::Attention => d[4] * d[0] * d[3],
            Op::AttentionSplit => d[4] * d[0] * split_keys(s).div_ceil(d[8]) * (d[3] + 2),
            Op::AttentionCombine => d[1] * d[0] * d[2],
            Op::Rope => d[1] * d[0] * d[2],
            Op::Append => d[0] * d[1] + d[2],
            Op::RopeAppend => unreachable!("rope_append_f16's outputs differ in length"),
            Op::Embed => d[1] * d[2],
            Op::Copy => d[1] + d[2],
        }
    }

    /// Words of the buffer that kernel `name` (this spec's, or a variant of it) takes after its
    /// scalars for a product of `shape`: gemm_wg's `ws` ([`Spec::first_tile`]), which its
    /// stream-K builds share partial sums through, on their own grid of at most PERSIST blocks
    /// ([`crate::gpu::dispatch::stream_k_workspace_words`]), its FIRST_STORES builds order a
    /// tile's two splits through ([`first_stores_workspace_words`]), its STAMPS probes write
    /// their timelines to ([`crate::stamps`]), and the others never touch (one word). None: the
    /// kernel takes no such buffer. It must be zero before the first launch; the kernels but
    /// the probes leave it so.
    pub fn workspace_words(&self, name: &str, shape: &Shape) -> Option<usize> {
        if !self.first_tile {
            return None;
        }
        let value = |key| variant_param(name, key);
        Some(match (value("STREAMK"), value("PERSIST")) {
            (Some(1 | 2), Some(blocks)) => crate::gpu::dispatch::stream_k_workspace_words(blocks),
            (_, Some(blocks)) if value(crate::stamps::STAMPS) == Some(1) => {
                crate::stamps::workspace_words(blocks)
            }
            _ => {
                first_stores_workspace_words(|key| variant_param(name, key), shape.0[0], shape.0[1])
                    .unwrap_or(1)
            }
        })
    }

    /// The scalar arguments after the output: the shape (as u32), and eps for the norms; the
    /// kernels around the model graph take theirs in their own order.
    pub fn scalars(&self, s: &Shape) -> Vec<ScalarValue> {
        let d = &s.0;
        let u32s = |v: &[usize]| {
            v.iter()
                .map(|&x| ScalarValue::U32(x as u32))
                .collect::<Vec<_>>()
        };
        let mut scalars = match self.op {
            Op::Attention => {
                let (p, start) = attention_params(s);
                let mut a = u32s(&[
                    p.n_head,
                    p.n_head_kv,
                    p.head_dim_k,
                    p.head_dim_v,
                    d[4],
                    start,
                ]);
                a.push(ScalarValue::U32(p.window.unwrap_or(0) as u32));
                a.push(ScalarValue::F32(p.scale));
                a.push(ScalarValue::F32(p.softcap.unwrap_or(0.0)));
                return a;
            }
            Op::AttentionSplit => {
                let (p, start) = attention_params(s);
                let mut a = u32s(&[
                    p.n_head,
                    p.n_head_kv,
                    p.head_dim_k,
                    p.head_dim_v,
                    d[4],
                    start - device_part(start),
                ]);
                a.push(ScalarValue::U32(p.window.unwrap_or(0) as u32));
                a.push(ScalarValue::F32(p.scale));
                a.push(ScalarValue::F32(p.softcap.unwrap_or(0.0)));
                a.extend(u32s(&[d[8], split_keys(s)]));
                return a;
            }
            Op::Rope => u32s(&[d[0], d[1], d[2], d[3] / 2, d[4], ROPE_ROW0 - ROPE_AT]),
            Op::Append => u32s(&[d[0] - device_part(d[0]), d[1], d[2]]),
            Op::RopeAppend => {
                let mut a = u32s(&[d[0], d[1], d[2], d[3], d[4], d[5] / 2]);
                a.extend(u32s(&d[6..9]));
                a.push(ScalarValue::F32(RMS_EPS));
                a.push(ScalarValue::U32((d[9] - device_part(d[9])) as u32));
                return a;
            }
            Op::QuantizeActs => u32s(&[d[0] * d[1]]),
            // Quantized tables also take their row count (planar layouts need it).
            Op::Embed if self.weight.is_some() => u32s(d),
            Op::Embed => u32s(&[d[1], d[2]]),
            Op::AddBias => u32s(&[d[0] * d[1], d[1]]),
            Op::Scale => vec![ScalarValue::F32(SCALE), ScalarValue::U32(d[0] as u32)],
            Op::Softcap => vec![ScalarValue::F32(SOFTCAP), ScalarValue::U32(d[0] as u32)],
            _ => u32s(d),
        };
        match self.op {
            Op::RmsNorm | Op::AddRmsNorm => scalars.push(ScalarValue::F32(RMS_EPS)),
            Op::Embed => scalars.push(ScalarValue::F32(embed_scale(d[2]))),
            _ if self.first_tile => scalars.extend([0, 0, 0].map(ScalarValue::U32)),
            _ => {}
        }
        scalars
    }

    /// The exact result for `inputs` (as made by [`Spec::inputs`]): every output, one after
    /// another.
    pub fn reference(&self, s: &Shape, inputs: &[Vec<f32>]) -> Vec<f64> {
        let mut want = self.computed(s, inputs);
        if self.half_copy() {
            let last = want.len() - self.output_len(s);
            want.extend_from_within(last..);
        }
        if self.int8_copy() {
            let last = want.len() - self.output_len(s);
            let rounded: Vec<f32> = want[last..].iter().map(|&v| v as f32).collect();
            want.extend(reference::decode_acts(&reference::quantize_acts(&rounded)));
        }
        want
    }

    /// [`Spec::reference`] (`want`) with the int8 copy's part made from the kernel's own f32
    /// output (of `outputs`, as downloaded): the copy must be exactly what quantize_s8 makes of
    /// that output, which the engine would otherwise quantize. The f32 output itself is checked
    /// against the f64 reference; quantizing the reference instead is no exact check, since an
    /// f32 value within its tolerance can round to another q, or move a block's maximum.
    pub fn reference_given(&self, s: &Shape, want: &[f64], outputs: &[Vec<f64>]) -> Vec<f64> {
        let mut want = want.to_vec();
        if self.int8_copy() {
            let lens = self.output_lens(s);
            let f32_out = outputs.len() - 2;
            let own: Vec<f32> = (outputs[f32_out][..lens[f32_out]].iter())
                .map(|&v| v as f32)
                .collect();
            want.truncate(want.len() - lens[f32_out + 1]);
            want.extend(reference::decode_acts(&reference::quantize_acts(&own)));
        }
        want
    }

    /// The outputs the kernel computes, before an f16 copy.
    fn computed(&self, s: &Shape, inputs: &[Vec<f32>]) -> Vec<f64> {
        let d = &s.0;
        match self.op {
            Op::RmsNorm => reference::rmsnorm(&inputs[0], &inputs[1], f64::from(RMS_EPS)),
            // The sum is rounded to f32 before the norm reads it, as the kernel keeps it.
            Op::AddRmsNorm => {
                let sum: Vec<f32> = inputs[0]
                    .iter()
                    .zip(&inputs[1])
                    .map(|(a, b)| a + b)
                    .collect();
                let normed = reference::rmsnorm(&sum, &inputs[2], f64::from(RMS_EPS));
                sum.iter().map(|&v| f64::from(v)).chain(normed).collect()
            }
            Op::Softmax => reference::softmax_rows(&inputs[0], d[1]),
            Op::Argmax => inputs[0]
                .chunks(d[1])
                .map(|row| f64::from(zinc_models::sampler::argmax(row)))
                .collect(),
            Op::TopK => {
                let top: Vec<(u32, f32)> = (inputs[0].chunks(d[1]))
                    .flat_map(|row| reference::top_k(row, d[2]))
                    .collect();
                let ids = top.iter().map(|&(id, _)| f64::from(id));
                ids.chain(top.iter().map(|&(_, v)| f64::from(v))).collect()
            }
            Op::Add => reference::zip_map(&inputs[0], &inputs[1], |a, b| a + b),
            Op::SiluMul | Op::GeluMul if self.gated.is_some() => {
                let pair = |x: &[f32]| x.iter().map(|&v| f64::from(v)).collect::<Vec<_>>();
                gated_unit(self.op, &pair(&inputs[0]), &pair(&inputs[1]), d[0], d[0])
            }
            Op::SiluMul => {
                reference::zip_map(&inputs[0], &inputs[1], |a, b| reference::silu(a) * b)
            }
            Op::GeluMul => {
                reference::zip_map(&inputs[0], &inputs[1], |a, b| reference::gelu_tanh(a) * b)
            }
            Op::ToF16 => inputs[0].iter().map(|&v| f64::from(v)).collect(),
            Op::Gemm => reference::gemm_xwt(&inputs[0], &inputs[1], d[1], d[2]),
            Op::Dequant => reference::dequantized(self.weight_type(), &inputs[0])
                .into_iter()
                .map(f64::from)
                .collect(),
            Op::Matvec | Op::QuantGemm if self.input == Elem::ActS8 => {
                reference::gemm_s8(self.weight_type(), &inputs[0], &inputs[1], d[1], d[2])
            }
            Op::QuantizeActs => reference::decode_acts(&reference::quantize_acts(&inputs[0])),
            Op::Matvec | Op::QuantGemm => {
                let w = reference::dequantized(self.weight_type(), &inputs[1]);
                let y = reference::gemm_xwt(&inputs[0], &w, self.weight_rows(s), d[2]);
                match self.gated {
                    Some(op) => gated_unit(op, &y, &y, d[0] * d[1], d[1]),
                    None => y,
                }
            }
            Op::Attention => {
                let (p, start) = attention_params(s);
                reference::attention(&inputs[0], &inputs[1], &inputs[2], start, &p)
            }
            Op::AttentionSplit => {
                let (p, start) = attention_params(s);
                let (q, k, v) = (&inputs[0], &inputs[1], &inputs[2]);
                reference::attention_partials(q, k, v, start, &p, d[8], split_keys(s))
            }
            Op::AttentionCombine => reference::combine_partials(&inputs[0], d[2], d[3]),
            // NaN: the cache before the position, which the kernel must leave alone.
            Op::Append => std::iter::repeat_n(f64::NAN, d[0] * d[1])
                .chain(inputs[0].iter().map(|&v| f64::from(v)))
                .collect(),
            Op::RopeAppend => reference::rope_append(
                inputs,
                &reference::Prologue {
                    n_head: d[0],
                    n_kv: d[1],
                    dk: d[2],
                    dv: d[3],
                    neox: d[6] == 1,
                    qk_norm: d[7] == 1,
                    v_norm: d[8] == 1,
                    eps: RMS_EPS,
                    pos: d[9],
                },
            ),
            Op::Rope => {
                let skip = ROPE_ROW0 * d[3] / 2;
                let (sin, cos) = (&inputs[1][skip..], &inputs[2][skip..]);
                reference::rope(&inputs[0], sin, cos, d[0], d[2], d[4] == 1)
            }
            Op::Embed => {
                let scale = f64::from(embed_scale(d[2]));
                match self.weight {
                    Some(ty) => {
                        let table = reference::dequantized(ty, &inputs[1]);
                        reference::embed(&table, &inputs[0], d[2], scale)
                    }
                    None => reference::embed(&inputs[0], &inputs[1], d[2], scale),
                }
            }
            // NaN: elements before y_off, which the kernel must leave alone.
            Op::Copy => std::iter::repeat_n(f64::NAN, d[1])
                .chain(inputs[0][d[0]..].iter().map(|&v| f64::from(v)))
                .collect(),
            Op::AddBias => inputs[0]
                .chunks(d[1])
                .flat_map(|row| reference::zip_map(row, &inputs[1], |a, b| a + b))
                .collect(),
            Op::Scale => inputs[0]
                .iter()
                .map(|&v| f64::from(v) * f64::from(SCALE))
                .collect(),
            Op::Softcap => inputs[0]
                .iter()
                .map(|&v| reference::softcap(f64::from(v), f64::from(SOFTCAP)))
                .collect(),
        }
    }

    /// The largest acceptable error at a shape, relative to the largest reference magnitude.
    pub fn tolerance(&self, s: &Shape) -> f64 {
        match (self.out, self.op) {
            // The f32 products' error (below), then the rounding to f16.
            (Elem::F16, Op::QuantGemm) => 2e-3 + F16_TOLERANCE,
            (Elem::F16, _) => F16_TOLERANCE,
            // One correctly rounded f32 operation (none for a copy).
            (Elem::F32, Op::Add | Op::AddBias | Op::Scale | Op::Embed | Op::Copy) => 1e-6,
            // Two products and a sum.
            (Elem::F32, Op::Rope) => 1e-6,
            // tanh.approx.f32 is good to 2^-10.7 of the value.
            (Elem::F32, Op::Softcap) => 1e-3,
            // The same on every capped score, before the exponential: its error scales with the
            // score (see the attention inputs).
            (Elem::F32, Op::Attention | Op::AttentionSplit) if s.0[7] > 0 => 4e-3,
            // f16 probabilities (2^-11 each) times values, before the f32 sums.
            (Elem::F32, Op::Attention) if self.input == Elem::F16 => 2e-3,
            // Tensor cores add each k-step's products with truncation, not one rounding.
            (Elem::F32, Op::Gemm) if self.input == Elem::F16 => 1e-4,
            // Against the quantized activations: per 32-weight sub-block a few f32 operations on
            // an exact integer sum (see kernels/gemm_q4k_s8.tile, matvec_q4k_s8 and matvec_q6k_s8
            // in matvec.tile).
            (Elem::F32, Op::Matvec | Op::QuantGemm) if self.input == Elem::ActS8 => 1e-5,
            // Weights dequantized in f16: d * scale, dmin * min and the weight itself each rounded
            // to f16 (up to 2^-11 of the terms).
            (Elem::F32, Op::QuantGemm) => 2e-3,
            // f32 reductions, fast exp, and K-long f32 sums.
            (Elem::F32, _) => 1e-5,
            // Integer sums, exact in the f64 reference too (|Y| < 2^31 < 2^53).
            (Elem::I32, _) => 0.0,
            // The reference does the kernel's f32 operations: the same bits.
            (Elem::ActS8, _) => 0.0,
            (Elem::U32 | Elem::I8, _) => unreachable!("no kernel writes {:?} outputs", self.out),
        }
    }

    pub fn cost(&self, s: &Shape) -> Cost {
        let d = &s.0;
        match self.op {
            Op::Gemm | Op::QuantGemm => {
                Cost::Flops(2.0 * d[0] as f64 * self.weight_rows(s) as f64 * d[2] as f64)
            }
            // Per visible (query, key) pair and head: dk multiply-adds for the score, dv for
            // the value sum. Masked pairs are not counted (causal about halves a prefill).
            Op::Attention => {
                let (p, start) = attention_params(s);
                let visible: usize = (start..start + d[4])
                    .map(|pos| pos + 1 - p.window.map_or(0, |w| (pos + 1).saturating_sub(w)))
                    .sum();
                Cost::Flops(2.0 * (d[0] * (d[2] + d[3]) * visible) as f64)
            }
            // Only the gathered rows of the table are read.
            Op::Embed => {
                let out = self.out.output_bytes(self.output_len(s)) as f64;
                let row = match self.weight {
                    Some(ty) => d[2] / ty.block_size() * ty.type_size(),
                    None => d[2] * 2,
                };
                Cost::Bytes((d[1] * (row + 4)) as f64 + out)
            }
            // n f32 read, n f16 written; the rest of the cache is not touched.
            Op::Append => Cost::Bytes((6 * d[2]) as f64),
            // The new tokens' heads in (f32) and out (f32 queries, f16 cache rows), their table
            // rows, the norm weights; the rest of the caches and tables is not touched.
            Op::RopeAppend => {
                let (q, k, v) = (d[4] * d[0] * d[2], d[4] * d[1] * d[2], d[4] * d[1] * d[3]);
                Cost::Bytes((8 * q + 6 * (k + v) + 4 * d[4] * d[5] + 8 * d[2]) as f64)
            }
            // n elements each way; the rest of x and y is not touched.
            Op::Copy => Cost::Bytes((4 * d[2] + self.out.bytes(d[2])) as f64),
            _ => Cost::Bytes(self.traffic(s)),
        }
    }

    /// The minimal DRAM traffic: every input read once, every output written once.
    pub fn traffic(&self, s: &Shape) -> f64 {
        let out: usize = (self.output_elems().iter())
            .zip(self.output_lens(s))
            .map(|(e, len)| e.output_bytes(len))
            .sum();
        (self.input_bytes(s) + out) as f64
    }

    /// The bytes of all inputs on the device (quantized weights at their GGUF size).
    pub fn input_bytes(&self, s: &Shape) -> usize {
        let inputs = self.inputs(s);
        let last = inputs.len() - 1;
        inputs
            .iter()
            .enumerate()
            .map(|(i, &(len, _))| match self.weight {
                Some(ty) if i == last => len / ty.block_size() * ty.type_size(),
                _ => self.input_elem(i).bytes(len),
            })
            .sum()
    }

    /// The rows of a GEMM's or matvec's weight matrix: N, or a gated pair's 2N.
    pub fn weight_rows(&self, s: &Shape) -> usize {
        match self.gated {
            Some(_) => 2 * s.0[1],
            None => s.0[1],
        }
    }

    /// The T x N x K of the plain product a GEMM does ([`Spec::weight_rows`] as N): its
    /// baseline's shape.
    pub fn product_shape(&self, s: &Shape) -> Vec<usize> {
        vec![s.0[0], self.weight_rows(s), s.0[2]]
    }

    /// The weight type of a kernel that takes quantized weights.
    pub fn weight_type(&self) -> GgmlType {
        self.weight
            .unwrap_or_else(|| panic!("`{}` takes no quantized weights", self.kernel))
    }

    pub fn baseline(&self) -> Baseline {
        match self.op {
            Op::Gemm | Op::QuantGemm => Baseline::CublasF16,
            _ => Baseline::Copy,
        }
    }

    /// "T=512 N=4096 K=4096".
    pub fn describe(&self, s: &Shape) -> String {
        self.dims()
            .iter()
            .zip(&s.0)
            .map(|(name, v)| format!("{name}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Whether kernel (or variant) `kernel` of this spec handles a shape: [`Spec::accepts`],
    /// and a flash attention variant's head width.
    pub fn accepts_kernel(&self, kernel: &str, s: &Shape) -> bool {
        let d = &s.0;
        let fixed_head = match (self.op, self.input) {
            (Op::Attention, Elem::F16) => {
                let width = variant_param(kernel, "D").unwrap_or(FLASH_HEAD_DIM);
                d[2] == width && d[3] == width
            }
            _ => true,
        };
        fixed_head && self.accepts(s)
    }

    /// `requested` shapes of this kernel's rank that kernel (or variant) `kernel` accepts, or
    /// `defaults` (those it accepts) when none were requested.
    pub fn shapes(&self, kernel: &str, requested: &[Shape], defaults: &[&[usize]]) -> Vec<Shape> {
        if requested.is_empty() {
            defaults
                .iter()
                .map(|d| Shape(d.to_vec()))
                .filter(|s| self.accepts_kernel(kernel, s))
                .collect()
        } else {
            let zeros_allowed = |s: &Shape| {
                (s.0.iter().zip(self.dims())).all(|(&d, name)| d > 0 || MAY_BE_ZERO.contains(name))
            };
            requested
                .iter()
                .filter(|s| {
                    s.0.len() == self.dims().len()
                        && zeros_allowed(s)
                        && self.accepts_kernel(kernel, s)
                })
                .cloned()
                .collect()
        }
    }
}

/// `attention_f32`'s parameters at a shape, and the position of its first query: the usual
/// `1 / sqrt(dk)` scale.
pub fn attention_params(s: &Shape) -> (AttentionParams, usize) {
    let d = &s.0;
    let p = AttentionParams {
        n_head: d[0],
        n_head_kv: d[1],
        head_dim_k: d[2],
        head_dim_v: d[3],
        scale: (1.0 / (d[2] as f64).sqrt()) as f32,
        window: (d[6] > 0).then_some(d[6]),
        softcap: (d[7] > 0).then_some(d[7] as f32),
    };
    (p, d[5] - d[4])
}

/// The keys `attention_split_f16`'s grid covers at a shape: one split past the cache, as in a
/// decode step replayed from a CUDA graph captured at a shorter cache.
fn split_keys(s: &Shape) -> usize {
    s.0[5] + s.0[8]
}

/// The value of compile-time parameter `name` in a variant's registry key
/// (`flash_attn_f16@D=64,BKV=32`), if the variant sets it.
pub fn variant_param(kernel: &str, name: &str) -> Option<usize> {
    let (_, defines) = kernel.split_once('@')?;
    defines
        .split(',')
        .filter_map(|d| d.split_once('='))
        .find(|(n, _)| *n == name)
        .and_then(|(_, v)| v.parse().ok())
}

/// The parameter of the split-K GEMMs (kernels/gemm_q4k.tile): above 1, the kernel adds into its
/// output instead of storing it, so the output must be zero before each launch.
pub const SPLIT_K: &str = "SPLITK";

/// Whether the kernel variant named `kernel` adds into its output ([`SPLIT_K`], or gemm_wg's
/// [`ADD_OUTPUT`]), which must be zero first for a plain product: not gemm_wg's FIRST_STORES
/// builds, whose first split of a tile stores.
pub fn adds_into_output(kernel: &str) -> bool {
    adds_into_zeroed_output(|key| variant_param(kernel, key))
}

/// [`adds_into_output`] of a kernel whose compile-time parameters `param` gives (from a variant
/// name, or a loaded kernel's signature).
pub fn adds_into_zeroed_output(param: impl Fn(&str) -> Option<usize>) -> bool {
    (param(SPLIT_K).is_some_and(|splits| splits > 1) || param(ADD_OUTPUT) == Some(1))
        && param(FIRST_STORES) != Some(1)
}

/// gemm_wg's parameter for builds that add their product into the output (kernels/gemm_wg.tile).
pub const ADD_OUTPUT: &str = "ADD_OUTPUT";

/// gemm_wg's parameter for K splits that need no zeroed output (kernels/gemm_wg.tile).
pub const FIRST_STORES: &str = "FIRST_STORES";

/// Words of `ws` a FIRST_STORES build of gemm_wg (compile-time parameters from `param`: a
/// variant name's, or a loaded kernel's signature) takes for a `t` x `n` product, or for any
/// launch of its tiles: a word per thread of each tile (BT tokens by 64 WG rows, the kernel's
/// defaults 128 and 2). None for other builds.
pub fn first_stores_workspace_words(
    param: impl Fn(&str) -> Option<usize>,
    t: usize,
    n: usize,
) -> Option<usize> {
    (param(FIRST_STORES) == Some(1)).then(|| {
        let (tokens, warpgroups) = (param("BT").unwrap_or(128), param("WG").unwrap_or(2));
        t.div_ceil(tokens) * n.div_ceil(64 * warpgroups) * 128 * warpgroups
    })
}

/// `embed_f16`'s scale: Gemma's `sqrt(cols)`, which rounds.
fn embed_scale(cols: usize) -> f32 {
    (cols as f64).sqrt() as f32
}

/// A kernel's problem size, written `512x4096x4096`; each dimension fits a u32. 0 is an option
/// that is off (attention's window and softcap, rope's neox) or a zero offset (copy, a cache
/// position): [`Spec::shapes`] takes a requested shape only where its zeros are such dimensions.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Shape(pub Vec<usize>);

impl FromStr for Shape {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let dims = s
            .split('x')
            .map(|d| {
                d.trim()
                    .parse::<u32>()
                    .ok()
                    .map(|v| v as usize)
                    .ok_or_else(|| format!("`{s}` is not a shape like 512x4096 (u32 dimensions)"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Shape(dims))
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dims: Vec<String> = self.0.iter().map(usize::to_string).collect();
        f.write_str(&dims.join("x"))
    }
}

#[cfg(test)]
mod tests {
    use zinc_runtime::{plan_launch, ArgDesc, DType, DeviceLimits, Grid};

    use super::*;
    use crate::registry::{parse_manifest, EmbeddedArch};

    /// An H200's limits.
    const LIMITS: DeviceLimits = DeviceLimits {
        max_threads_per_block: 1024,
        max_block_dims: [1024, 1024, 64],
        max_grid_dims: [i32::MAX as u32, 65535, 65535],
        max_shared_per_block_optin: 227 * 1024,
    };

    fn dtype(elem: Elem) -> DType {
        match elem {
            Elem::F32 => DType::F32,
            Elem::F16 => DType::F16,
            Elem::U32 => DType::U32,
            Elem::I8 => DType::I8,
            Elem::I32 => DType::I32,
            Elem::ActS8 => DType::U32,
        }
    }

    /// Elements of a device buffer of `bytes` bytes.
    fn device_len(elem: Elem, bytes: usize) -> usize {
        bytes / dtype(elem).size_bytes()
    }

    fn arg_descs(spec: &Spec, shape: &Shape) -> Vec<ArgDesc> {
        let inputs = spec.inputs(shape);
        let last = inputs.len() - 1;
        let mut args: Vec<ArgDesc> = inputs
            .iter()
            .enumerate()
            .map(|(i, &(len, _))| match spec.weight {
                // Quantized weights travel as u32 words, padded to whole 16-byte units
                // (dispatch::device_words).
                Some(ty) if i == last => ArgDesc::Buffer {
                    elem: DType::U32,
                    len: (len / ty.block_size() * ty.type_size())
                        .div_ceil(4)
                        .next_multiple_of(4),
                    mutable: false,
                },
                _ => ArgDesc::Buffer {
                    elem: dtype(spec.input_elem(i)),
                    len: device_len(spec.input_elem(i), spec.input_elem(i).bytes(len)),
                    mutable: false,
                },
            })
            .collect();
        let outputs = spec.output_elems().into_iter().zip(spec.output_lens(shape));
        args.extend(outputs.map(|(elem, len)| ArgDesc::Buffer {
            elem: dtype(elem),
            len: device_len(elem, elem.output_bytes(len)),
            mutable: true,
        }));
        args.extend(spec.scalars(shape).into_iter().map(ArgDesc::Scalar));
        if let Some(words) = spec.workspace_words(spec.kernel, shape) {
            args.push(ArgDesc::Buffer {
                elem: DType::U32,
                len: words,
                mutable: true,
            });
        }
        args
    }

    fn embedded() -> &'static [EmbeddedArch] {
        crate::registry::embedded()
    }

    #[test]
    fn every_kernel_has_a_spec_whose_arguments_its_manifest_accepts() {
        for arch in embedded() {
            for entry in arch.modules.iter().flat_map(|m| m.kernels) {
                let spec = spec_for(entry.name).unwrap_or_else(|| {
                    panic!("kernel `{}` has no spec in src/specs.rs", entry.name)
                });
                let sig = parse_manifest(entry).unwrap();
                let shapes = spec.selftest_shapes().iter().chain(spec.bench_shapes());
                for dims in shapes.chain(spec.interp_shapes()) {
                    let shape = Shape(dims.to_vec());
                    assert_eq!(shape.0.len(), spec.dims().len(), "{}", entry.name);
                    let plan = plan_launch(&sig, &arg_descs(spec, &shape), Grid::Auto, &LIMITS);
                    assert!(
                        plan.is_ok(),
                        "{} at {shape} on {}: {plan:?}",
                        entry.name,
                        arch.arch
                    );
                }
            }
        }
    }

    #[test]
    fn every_spec_names_a_kernel() {
        // Of any arch: sm_90a's wgmma kernels exist for it alone.
        let names: Vec<&str> = embedded()
            .iter()
            .flat_map(|a| a.modules.iter())
            .flat_map(|m| m.kernels.iter().map(|k| k.name))
            .collect();
        for spec in SPECS {
            assert!(
                names.contains(&spec.kernel),
                "no kernel `{}` is embedded",
                spec.kernel
            );
        }
    }

    #[test]
    fn gemm_grid_covers_ragged_edges() {
        let arch = &embedded()[0];
        let entry = arch
            .modules
            .iter()
            .flat_map(|m| m.kernels)
            .find(|k| k.name == "gemm_simt")
            .unwrap();
        let spec = spec_for("gemm_simt").unwrap();
        let shape: Shape = "513x257x300".parse().unwrap();
        let sig = parse_manifest(entry).unwrap();
        let plan = plan_launch(&sig, &arg_descs(spec, &shape), Grid::Auto, &LIMITS).unwrap();
        // 64 x 64 tiles: 5 column blocks over N = 257, 9 row blocks over T = 513.
        assert_eq!(plan.grid, [5, 9, 1]);
        assert_eq!(plan.block, [16, 16, 1]);
    }

    #[test]
    fn shapes_parse_and_filter_by_rank() {
        let s: Shape = "512x4096x4096".parse().unwrap();
        assert_eq!(s.0, [512, 4096, 4096]);
        assert_eq!(s.to_string(), "512x4096x4096");
        assert!("5000000000".parse::<Shape>().is_err());
        assert!("axb".parse::<Shape>().is_err());
        let gemm = spec_for("gemm_simt@BM=128,BN=64").unwrap();
        assert_eq!(gemm.describe(&s), "T=512 N=4096 K=4096");
        let requested = vec![
            s.clone(),
            "37x1000".parse().unwrap(),
            "0x64x64".parse().unwrap(),
        ];
        assert_eq!(gemm.shapes("gemm_simt", &requested, &[]), vec![s]);
        assert_eq!(gemm.shapes("gemm_simt", &[], ANCHOR_GEMMS).len(), 6);
        // Zero is an option that is off: no window and no softcap, but never zero keys.
        let split = spec_for("attention_split_f16").unwrap();
        let decode: Shape = "32x8x128x128x1x512x0x0x16".parse().unwrap();
        let no_keys: Shape = "32x8x128x128x1x0x0x0x16".parse().unwrap();
        assert_eq!(
            split.shapes("attention_split_f16", &[decode.clone(), no_keys], &[]),
            vec![decode]
        );
    }

    #[test]
    fn costs() {
        let gemm = spec_for("gemm_simt").unwrap();
        assert_eq!(gemm.cost(&Shape(vec![2, 3, 4])), Cost::Flops(48.0));
        let norm = spec_for("rmsnorm_f16").unwrap();
        // x and w read as f32, y written as f16.
        assert_eq!(
            norm.cost(&Shape(vec![2, 8])),
            Cost::Bytes((64 + 32 + 32) as f64)
        );
        assert_eq!(norm.baseline(), Baseline::Copy);
        // x, y and w read as f32, the sum s written as f32 and h as f16; s is checked as an f32
        // output, h as an f16 one.
        let add_norm = spec_for("add_rmsnorm_f16").unwrap();
        let shape = Shape(vec![2, 8]);
        assert_eq!(add_norm.output_elems(), [Elem::F32, Elem::F16]);
        assert_eq!(
            add_norm.cost(&shape),
            Cost::Bytes((64 + 64 + 32 + 64 + 32) as f64)
        );
        assert_eq!(add_norm.output_tolerance(0, &shape), 1e-5);
        assert_eq!(add_norm.output_tolerance(1, &shape), F16_TOLERANCE);
        // Positions 2, 3, 4: 3 + 4 + 5 visible keys, 2 in a window of 2; 2 heads x (4 + 4).
        let attention = spec_for("flash_attn_f16").unwrap();
        let cost = |window| attention.cost(&Shape(vec![2, 1, 4, 4, 3, 5, window, 0]));
        assert_eq!(cost(0), Cost::Flops(16.0 * 2.0 * 12.0));
        assert_eq!(cost(2), Cost::Flops(16.0 * 2.0 * 6.0));
    }

    #[test]
    fn flash_attention_variants_take_heads_of_their_width() {
        let flash = spec_for("flash_attn_f16@D=64").unwrap();
        let shape = |d| Shape(vec![4, 2, d, d, 5, 9, 0, 0]);
        assert_eq!(
            variant_param("flash_attn_f16@D=256,BKV=32", "BKV"),
            Some(32)
        );
        assert_eq!(variant_param("flash_attn_f16", "D"), None);
        assert!(flash.accepts_kernel("flash_attn_f16@D=64", &shape(64)));
        assert!(!flash.accepts_kernel("flash_attn_f16@D=64", &shape(128)));
        assert!(flash.accepts_kernel("flash_attn_f16", &shape(FLASH_HEAD_DIM)));
        assert!(!flash.accepts_kernel("flash_attn_f16", &Shape(vec![4, 2, 128, 64, 5, 9, 0, 0])));
        // attention_f32 takes any width up to its D_MAX, whatever its variant key says.
        let simt = spec_for("attention_f32@D=64").unwrap();
        assert!(simt.accepts_kernel("attention_f32@D=64", &shape(128)));
    }

    #[test]
    fn f16_gemm_takes_k_in_whole_16_byte_chunks() {
        let gemm = spec_for("gemm_f16@BM=64,WM=32").unwrap();
        assert_eq!((gemm.input, gemm.out), (Elem::F16, Elem::F32));
        assert!(gemm.accepts(&Shape(vec![7, 9, 16])));
        assert!(!gemm.accepts(&Shape(vec![7, 9, 12])));
        let ragged: Shape = "7x9x12".parse().unwrap();
        assert_eq!(gemm.shapes("gemm_f16", &[ragged], &[]), vec![]);
        assert!(gemm.selftest_shapes().iter().all(|d| d[2] % 8 == 0));
    }

    #[test]
    fn int8_matvecs_of_32_weight_blocks_take_k_in_whole_activation_groups() {
        for kernel in [
            "matvec_q8_0_s8",
            "matvec_q5_0_s8",
            "matvec_q4_0_s8",
            "matvec_iq4_nl_s8",
        ] {
            let spec = spec_for(kernel).unwrap();
            assert!(spec.accepts(&Shape(vec![1, 37, 640])));
            // Whole 32-blocks, but half an activation group.
            assert!(!spec.accepts(&Shape(vec![1, 37, 544])));
            // Every interpreter shape is run, none filtered out.
            let interp = spec.interp_shapes();
            assert_eq!(spec.shapes(kernel, &[], interp).len(), interp.len());
        }
    }

    #[test]
    fn s8_gemm_takes_k_in_whole_chunks_and_is_checked_exactly() {
        let gemm = spec_for("gemm_s8").unwrap();
        assert_eq!((gemm.input, gemm.out), (Elem::I8, Elem::I32));
        assert!(gemm.accepts(&Shape(vec![7, 9, 32])));
        assert!(!gemm.accepts(&Shape(vec![7, 9, 24])));
        for dims in gemm.selftest_shapes().iter().chain(gemm.interp_shapes()) {
            assert!(dims[2] % 16 == 0, "{dims:?}");
        }
        let shape = Shape(vec![2, 3, 16]);
        assert_eq!(gemm.tolerance(&shape), 0.0);
        assert_eq!(gemm.inputs(&shape), vec![(32, I8_MAX), (48, I8_MAX)]);
        // i8 inputs, i32 output.
        assert_eq!(gemm.traffic(&shape), (32 + 48 + 4 * 6) as f64);
        assert_eq!(gemm.cost(&shape), Cost::Flops(2.0 * 96.0));
        assert_eq!(gemm.baseline(), Baseline::CublasF16);
        // The largest sum stays exact in i32 at the widest anchor K.
        let k = ANCHOR_GEMMS.iter().map(|d| d[2]).max().unwrap();
        assert!((k as f64) * f64::from(I8_MAX).powi(2) < f64::from(i32::MAX));
    }

    #[test]
    fn int8_q4k_path_counts_its_packed_activations() {
        let quantize = spec_for("quantize_s8").unwrap();
        let shape = Shape(vec![3, 128]);
        assert!(!quantize.accepts(&Shape(vec![3, 96])));
        // 6 groups of 64 values: 66 compared values and 80 bytes each.
        assert_eq!(quantize.output_len(&shape), 6 * 66);
        assert_eq!(quantize.traffic(&shape), (4 * 384 + 6 * 80) as f64);
        assert_eq!(quantize.tolerance(&shape), 0.0);
        let gemm = spec_for("gemm_q4k_s8@BM=64").unwrap();
        let shape = Shape(vec![2, 3, 256]);
        assert!(!gemm.accepts(&Shape(vec![2, 3, 192])));
        // Activations at 80 bytes per 64, Q4_K at 144 per 256, f32 output.
        assert_eq!(gemm.traffic(&shape), (8 * 80 + 3 * 144 + 4 * 6) as f64);
        assert_eq!(gemm.tolerance(&shape), 1e-5);
    }

    #[test]
    fn references_have_one_value_per_output() {
        for spec in SPECS {
            let shapes = spec.shapes(spec.kernel, &[], spec.selftest_shapes());
            let shape = shapes.get(1).unwrap_or(&shapes[0]).clone();
            let inputs: Vec<Vec<f32>> = spec
                .inputs(&shape)
                .iter()
                .map(|&(len, scale)| vec![scale * 0.5; len])
                .collect();
            let want = spec.reference(&shape, &inputs);
            let len: usize = spec.output_lens(&shape).iter().sum();
            assert_eq!(want.len(), len, "{}", spec.kernel);
            // NaN marks elements the kernel must not write.
            assert!(want.iter().all(|v| !v.is_infinite()), "{}", spec.kernel);
            assert!(want.iter().any(|v| v.is_finite()), "{}", spec.kernel);
        }
    }
}
