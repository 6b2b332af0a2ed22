//! Element-wise and per-row operations.

use crate::backend::{RopeStyle, RopeTable};

/// Dot product with eight independent accumulators, so the compiler can keep them in SIMD
/// registers (f32 addition is not associative, so it will not reorder a single running sum).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    let mut acc = [0f32; 8];
    let (a8, a_tail) = a.split_at(a.len() / 8 * 8);
    let (b8, b_tail) = b.split_at(a8.len());
    for (x, y) in a8.chunks_exact(8).zip(b8.chunks_exact(8)) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    let tail: f32 = a_tail.iter().zip(b_tail).map(|(x, y)| x * y).sum();
    acc.iter().sum::<f32>() + tail
}

/// `x[i] += y[i]`.
pub fn add_in_place(x: &mut [f32], y: &[f32]) {
    debug_assert_eq!(x.len(), y.len());
    x.iter_mut().zip(y).for_each(|(a, b)| *a += b);
}

/// RMSNorm of each `weight.len()`-long row of `x`, in place: `x / sqrt(mean(x²) + eps) * weight`.
/// Rows may be whole hidden states or single heads (QK-norm). The weight is used as stored:
/// GGUF converters already fold Gemma's `1 + w` into it.
pub fn rms_norm(x: &mut [f32], weight: &[f32], eps: f32) {
    for (row, scale) in rms_scales(x, weight.len(), eps) {
        row.iter_mut()
            .zip(weight)
            .for_each(|(v, w)| *v *= scale * w);
    }
}

/// RMSNorm of each `n`-long row of `x` without a weight, in place.
pub fn rms_norm_unit(x: &mut [f32], n: usize, eps: f32) {
    for (row, scale) in rms_scales(x, n, eps) {
        row.iter_mut().for_each(|v| *v *= scale);
    }
}

/// Each `n`-long row of `x` with its `1 / sqrt(mean(x²) + eps)`.
fn rms_scales(x: &mut [f32], n: usize, eps: f32) -> impl Iterator<Item = (&mut [f32], f32)> {
    debug_assert_eq!(x.len() % n, 0);
    x.chunks_exact_mut(n).map(move |row| {
        let sum_sq: f64 = row.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
        let scale = (1.0 / (sum_sq / n as f64 + f64::from(eps)).sqrt()) as f32;
        (row, scale)
    })
}

/// Numerically stable softmax in place.
pub fn softmax(x: &mut [f32]) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0f64;
    for v in x.iter_mut() {
        *v = (*v - max).exp();
        sum += f64::from(*v);
    }
    let inv = (1.0 / sum) as f32;
    x.iter_mut().for_each(|v| *v *= inv);
}

/// `cap * tanh(x / cap)`: Gemma's logit soft-capping.
pub fn softcap(x: &mut [f32], cap: f32) {
    x.iter_mut().for_each(|v| *v = cap * (*v / cap).tanh());
}

/// GELU, tanh approximation (what Gemma's `gelu_pytorch_tanh` computes).
pub fn gelu_tanh(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * (x + 0.044_715 * x * x * x)).tanh())
}

/// The logistic function `1 / (1 + e^-x)`.
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// SiLU (swish): `x * sigmoid(x)`.
pub fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// Rotates every `head_dim`-long head in `x` (one row of heads per token) by its token's position.
pub fn rope(x: &mut [f32], head_dim: usize, positions: &[usize], table: &RopeTable) {
    let half = table.inv_freq().len();
    let row_len = x.len() / positions.len();
    for (row, &pos) in x.chunks_exact_mut(row_len).zip(positions) {
        let (sin, cos) = table.sin_cos(pos);
        for head in row.chunks_exact_mut(head_dim) {
            for i in 0..half {
                let (a, b) = match table.style() {
                    RopeStyle::Normal => (2 * i, 2 * i + 1),
                    RopeStyle::Neox => (i, i + half),
                };
                let (x0, x1) = (head[a], head[b]);
                head[a] = x0 * cos[i] - x1 * sin[i];
                head[b] = x0 * sin[i] + x1 * cos[i];
            }
        }
    }
}
