//! Quantization of f32 rows into ggml blocks, for writing test and synthetic models.
//!
//! These are plain round-to-nearest quantizers: correct and within half a quantization step
//! (plus the rounding of the block scales), but without llama.cpp's search for the scales that
//! minimize the error, so their bytes differ from llama-quantize's.

use half::{bf16, f16};

use super::dequant::{k4_scale_min, IQ4_LEVELS};
use super::{check_sizes, GgmlType, QuantError};

/// Quantizes `src` into `out` as blocks of `ty`; `out` must be exactly the size of the result.
pub fn quantize_row(ty: GgmlType, src: &[f32], out: &mut [u8]) -> Result<(), QuantError> {
    let kernel = block_kernel(ty).ok_or(QuantError::Unsupported {
        ty,
        op: "quantization",
    })?;
    check_sizes(ty, src.len(), out.len())?;
    for (x, block) in src
        .chunks_exact(ty.block_size())
        .zip(out.chunks_exact_mut(ty.type_size()))
    {
        kernel(x, block);
    }
    Ok(())
}

/// Converts one block.
type QuantKernel = fn(&[f32], &mut [u8]);

pub(super) fn block_kernel(ty: GgmlType) -> Option<QuantKernel> {
    use GgmlType::*;
    Some(match ty {
        F32 => |x, b| b.copy_from_slice(&x[0].to_le_bytes()),
        F16 => |x, b| b.copy_from_slice(&f16::from_f32(x[0]).to_le_bytes()),
        BF16 => |x, b| b.copy_from_slice(&bf16::from_f32(x[0]).to_le_bytes()),
        Q8_0 => q8_0,
        Q4_0 => q4_0,
        Q5_0 => q5_0,
        IQ4_NL => iq4_nl,
        IQ4_XS => iq4_xs,
        Q4_K => q4_k,
        Q5_K => q5_k,
        Q6_K => q6_k,
        _ => return None,
    })
}

/// Stores `v` as f16 at `b[at..at + 2]` and returns the stored value, so that quants are computed
/// against the scale the dequantizer will actually see.
fn put_f16(b: &mut [u8], at: usize, v: f32) -> f32 {
    let h = f16::from_f32(v);
    b[at..at + 2].copy_from_slice(&h.to_le_bytes());
    h.to_f32()
}

fn inverse(d: f32) -> f32 {
    if d == 0.0 {
        0.0
    } else {
        1.0 / d
    }
}

fn abs_max(x: &[f32]) -> f32 {
    x.iter().fold(0.0, |m, v| m.max(v.abs()))
}

/// Rounds `v` to the nearest integer in `lo..=hi`.
fn round_clamp(v: f32, lo: i32, hi: i32) -> i32 {
    (v.round() as i32).clamp(lo, hi)
}

fn q8_0(x: &[f32], b: &mut [u8]) {
    let id = inverse(put_f16(b, 0, abs_max(x) / 127.0));
    for (q, &v) in b[2..].iter_mut().zip(x) {
        *q = round_clamp(v * id, -127, 127) as i8 as u8;
    }
}

/// Q5_0: like ggml, the largest-magnitude weight maps to quant 0 (d carries its sign), which
/// uses the full -16 range of the asymmetric 5-bit grid.
fn q5_0(x: &[f32], b: &mut [u8]) {
    let qh = legacy_quants(x, b, 16);
    b[2..6].copy_from_slice(&qh.to_le_bytes());
}

/// Q4_0: Q5_0's scheme on the 4-bit grid (quant 0 is -8 steps), without fifth bits.
fn q4_0(x: &[f32], b: &mut [u8]) {
    legacy_quants(x, b, 8);
}

/// The d (at 0) and nibbles (the block's last 16 bytes) of Q4_0 (`zero` 8) or Q5_0 (16): the
/// largest-magnitude weight maps to quant 0. Returns the fifth bits (bit j for weight j).
fn legacy_quants(x: &[f32], b: &mut [u8], zero: i32) -> u32 {
    let id = inverse(put_f16(b, 0, signed_max(x) / -(zero as f32)));
    let nibbles = b.len() - 16;
    let mut qh = 0u32;
    b[nibbles..].fill(0);
    for (j, &v) in x.iter().enumerate() {
        let q = round_clamp(v * id + zero as f32, 0, 2 * zero - 1) as u32;
        qh |= (q >> 4) << j;
        b[nibbles + j % 16] |= ((q & 0xF) as u8) << (4 * (j / 16));
    }
    qh
}

/// The weight of largest magnitude, with its sign.
fn signed_max(x: &[f32]) -> f32 {
    x.iter()
        .fold(0.0f32, |m, &v| if v.abs() > m.abs() { v } else { m })
}

/// IQ4_NL: the largest-magnitude weight maps to level 0 (-127, d carries its sign), every
/// weight to its nearest level.
fn iq4_nl(x: &[f32], b: &mut [u8]) {
    let d = put_f16(b, 0, signed_max(x) / -127.0);
    iq4_indices(x, inverse(d), &mut b[2..18]);
}

/// IQ4_XS: each sub-block wants IQ4_NL's scale; the largest in magnitude maps to -32 steps of
/// the f16 d, the others round to their nearest step (-32..=31).
fn iq4_xs(x: &[f32], b: &mut [u8]) {
    let wanted: Vec<f32> = x.chunks(32).map(|s| signed_max(s) / -127.0).collect();
    let d = put_f16(b, 0, signed_max(&wanted) / -32.0);
    let id = inverse(d);
    let mut high = 0u16;
    b[4..8].fill(0);
    for (i, (sub, &want)) in x.chunks(32).zip(&wanted).enumerate() {
        let s = round_clamp(want * id, -32, 31) + 32;
        b[4 + i / 2] |= ((s & 0xF) as u8) << (4 * (i % 2));
        high |= ((s >> 4) as u16) << (2 * i);
        let scale = d * (s - 32) as f32;
        iq4_indices(sub, inverse(scale), &mut b[8 + 16 * i..24 + 16 * i]);
    }
    b[2..4].copy_from_slice(&high.to_le_bytes());
}

/// The 16 bytes of level indices of 32 weights times `id`: each the nearest level's.
fn iq4_indices(x: &[f32], id: f32, qs: &mut [u8]) {
    let nearest = |v: f32| {
        (0..16u8)
            .min_by(|&a, &b| {
                let da = (v - f32::from(IQ4_LEVELS[a as usize])).abs();
                da.total_cmp(&(v - f32::from(IQ4_LEVELS[b as usize])).abs())
            })
            .expect("16 levels")
    };
    for (j, q) in qs.iter_mut().enumerate() {
        *q = nearest(x[j] * id) | nearest(x[j + 16] * id) << 4;
    }
}

/// Quantizes per-sub-block `values` (all >= 0) to 6 bits against one shared f16 super-scale
/// stored at `b[at..]`. Rounds up so a sub-block's quant range never shrinks below its data.
fn six_bit_scales(values: &[f32; 8], b: &mut [u8], at: usize) -> (f32, [u8; 8]) {
    let d = put_f16(b, at, values.iter().fold(0.0f32, |m, &v| m.max(v)) / 63.0);
    let id = inverse(d);
    (d, values.map(|v| (v * id).ceil().min(63.0) as u8))
}

/// Q4_K: each 32-weight sub-block gets the asymmetric range [min(0, lo), hi], so weight =
/// d*sc*q - dmin*m with q in 0..=15.
fn q4_k(x: &[f32], b: &mut [u8]) {
    k_quant(x, b, false);
}

/// Q5_K: Q4_K's scheme with 5-bit quants (0..=31), whose fifth bits sit in 32 bytes between the
/// scales and the nibbles (bit k of byte l for weight 32k + l).
fn q5_k(x: &[f32], b: &mut [u8]) {
    k_quant(x, b, true);
}

/// Q4_K, or with `has_high` Q5_K.
fn k_quant(x: &[f32], b: &mut [u8], has_high: bool) {
    let top = if has_high { 31 } else { 15 };
    let mut steps = [0.0f32; 8];
    let mut mins = [0.0f32; 8];
    for (sub, x) in x.chunks_exact(32).enumerate() {
        let lo = x.iter().fold(0.0f32, |m, &v| m.min(v));
        let hi = x.iter().fold(lo, |m, &v| m.max(v));
        steps[sub] = (hi - lo) / top as f32;
        mins[sub] = -lo;
    }
    let (d, sc) = six_bit_scales(&steps, b, 0);
    let (dmin, m) = six_bit_scales(&mins, b, 2);
    let packed = &mut b[4..16];
    packed.fill(0);
    for j in 0..8 {
        if j < 4 {
            packed[j] = sc[j];
            packed[j + 4] = m[j];
        } else {
            packed[j + 4] = (sc[j] & 0xF) | (m[j] & 0xF) << 4;
            packed[j - 4] |= (sc[j] >> 4) << 6;
            packed[j] |= (m[j] >> 4) << 6;
        }
    }
    let nibbles_at = if has_high { 48 } else { 16 };
    b[16..].fill(0);
    for (sub, x) in x.chunks_exact(32).enumerate() {
        let (sc, m) = k4_scale_min(&b[4..16], sub);
        let (id, min) = (inverse(d * f32::from(sc)), dmin * f32::from(m));
        for (l, &v) in x.iter().enumerate() {
            let q = round_clamp((v + min) * id, 0, top) as u8;
            b[nibbles_at + sub / 2 * 32 + l] |= (q & 0xF) << (4 * (sub % 2));
            if has_high {
                b[16 + l] |= (q >> 4) << sub;
            }
        }
    }
}

/// Q6_K: symmetric per-16-weight i8 scales against one f16 d; q in -32..=31 stored offset by 32.
fn q6_k(x: &[f32], b: &mut [u8]) {
    let steps: [f32; 16] = std::array::from_fn(|s| abs_max(&x[s * 16..s * 16 + 16]) / 31.0);
    let d = put_f16(b, 208, steps.iter().fold(0.0f32, |m, &v| m.max(v)) / 127.0);
    let id = inverse(d);
    // Round the scales up so that 31 steps still cover each sub-block's largest weight.
    let scales = steps.map(|s| (s * id).ceil().min(127.0) as i8);
    for (s, &sc) in scales.iter().enumerate() {
        b[192 + s] = sc as u8;
    }
    b[..192].fill(0);
    for (i, &v) in x.iter().enumerate() {
        let q = (round_clamp(v * inverse(d * f32::from(scales[i / 16])), -32, 31) + 32) as u8;
        let (half, k, l) = (i / 128, i % 128 / 32, i % 32);
        b[half * 64 + 32 * (k % 2) + l] |= (q & 0xF) << (4 * (k / 2));
        b[128 + half * 32 + l] |= (q >> 4) << (2 * k);
    }
}
