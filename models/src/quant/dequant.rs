//! Dequantization of ggml blocks to f32.
//!
//! Each block kernel follows ggml's block layout (ggml-common.h). Products are formed in the same
//! order as ggml and gguf-py (`(d * scale) * q - dmin * min`), so results equal theirs exactly.

use half::{bf16, f16};

use super::{check_sizes, GgmlType, QuantError};

/// Dequantizes `out.len()` weights of type `ty` from `bytes`, which must hold exactly that many.
pub fn dequantize_row(ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<(), QuantError> {
    let kernel = block_kernel(ty).ok_or(QuantError::Unsupported {
        ty,
        op: "dequantization",
    })?;
    check_sizes(ty, out.len(), bytes.len())?;
    for (block, out) in bytes
        .chunks_exact(ty.type_size())
        .zip(out.chunks_exact_mut(ty.block_size()))
    {
        kernel(block, out);
    }
    Ok(())
}

/// The kernel that dequantizes one block of `ty`, if supported.
/// Converts one block.
type DequantKernel = fn(&[u8], &mut [f32]);

pub(super) fn block_kernel(ty: GgmlType) -> Option<DequantKernel> {
    use GgmlType::*;
    Some(match ty {
        F32 => |b, y| y[0] = f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        F16 => |b, y| y[0] = f16_at(b, 0),
        BF16 => |b, y| y[0] = bf16::from_le_bytes([b[0], b[1]]).to_f32(),
        Q4_0 => |b, y| legacy(b, y, false, false),
        Q4_1 => |b, y| legacy(b, y, true, false),
        Q5_0 => |b, y| legacy(b, y, false, true),
        Q5_1 => |b, y| legacy(b, y, true, true),
        Q8_0 => q8_0,
        Q2_K => q2_k,
        Q3_K => q3_k,
        Q4_K => |b, y| k4(b, y, false),
        Q5_K => |b, y| k4(b, y, true),
        Q6_K => q6_k,
        IQ4_NL => iq4_nl,
        IQ4_XS => iq4_xs,
        _ => return None,
    })
}

pub(super) fn f16_at(b: &[u8], i: usize) -> f32 {
    f16::from_le_bytes([b[i], b[i + 1]]).to_f32()
}

/// Q4_0, Q4_1, Q5_0 and Q5_1 (32 weights): f16 d, [f16 min], [u32 fifth bits], 16 bytes of
/// nibbles (weight j in the low nibble of byte j, weight j+16 in the high nibble). Types without
/// a min are symmetric around the middle quant (8 or 16); those with one add it.
fn legacy(b: &[u8], y: &mut [f32], has_min: bool, has_high: bool) {
    let d = f16_at(b, 0);
    let mut at = 2;
    let min = if has_min {
        at += 2;
        f16_at(b, 2)
    } else {
        0.0
    };
    let qh = if has_high {
        at += 4;
        u32::from_le_bytes([b[at - 4], b[at - 3], b[at - 2], b[at - 1]])
    } else {
        0
    };
    let zero = match (has_min, has_high) {
        (true, _) => 0,
        (false, false) => 8,
        (false, true) => 16,
    };
    for (j, &q) in b[at..at + 16].iter().enumerate() {
        let lo = u32::from(q & 0xF) | ((qh >> j) & 1) << 4;
        let hi = u32::from(q >> 4) | ((qh >> (j + 16)) & 1) << 4;
        y[j] = (lo as i32 - zero) as f32 * d + min;
        y[j + 16] = (hi as i32 - zero) as f32 * d + min;
    }
}

/// Q8_0 (32 weights): f16 d, 32 i8 quants.
fn q8_0(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    for (y, &q) in y.iter_mut().zip(&b[2..34]) {
        *y = f32::from(q as i8) * d;
    }
}

/// Byte and bit shift of weight `i` in the 2-bit quant array shared by Q2_K and Q3_K: each
/// 128-weight half uses 32 bytes, and its four 32-weight groups take successive bit pairs.
fn two_bit(qs: &[u8], i: usize) -> u8 {
    (qs[i / 128 * 32 + i % 32] >> (2 * (i % 128 / 32))) & 3
}

/// Q2_K (256 weights): 16 bytes of scales (low nibble scale, high nibble min, one per 16
/// weights), 64 bytes of 2-bit quants, f16 d, f16 dmin. weight = d*scale*q - dmin*min.
fn q2_k(b: &[u8], y: &mut [f32]) {
    let (scales, qs) = (&b[..16], &b[16..80]);
    let (d, dmin) = (f16_at(b, 80), f16_at(b, 82));
    for (i, y) in y.iter_mut().enumerate() {
        let sc = scales[i / 16];
        *y = d * f32::from(sc & 0xF) * f32::from(two_bit(qs, i)) - dmin * f32::from(sc >> 4);
    }
}

/// Q3_K (256 weights): 32 bytes of high bits (bit k of byte l belongs to weight 32k+l), 64 bytes
/// of 2-bit low quants, 12 bytes of 6-bit signed scales (one per 16 weights), f16 d.
/// A clear high bit subtracts 4, so quants span -4..=3; scales are stored offset by 32.
fn q3_k(b: &[u8], y: &mut [f32]) {
    let (hmask, qs, packed) = (&b[..32], &b[32..96], &b[96..108]);
    let d = f16_at(b, 108);
    // Scale s: low 4 bits in byte s (low nibble) or s-8 (high nibble), high 2 bits in byte
    // 8 + s%4 at bit 2*(s/4).
    let scales: [f32; 16] = std::array::from_fn(|s| {
        let lo = if s < 8 {
            packed[s] & 0xF
        } else {
            packed[s - 8] >> 4
        };
        let hi = (packed[8 + s % 4] >> (2 * (s / 4))) & 3;
        f32::from(lo | hi << 4) - 32.0
    });
    for (i, y) in y.iter_mut().enumerate() {
        let high_clear = (hmask[i % 32] >> (i / 32)) & 1 == 0;
        let q = f32::from(two_bit(qs, i)) - if high_clear { 4.0 } else { 0.0 };
        *y = d * scales[i / 16] * q;
    }
}

/// Unpacks the eight 6-bit (scale, min) pairs of Q4_K/Q5_K: pairs 0..4 sit in the low 6 bits of
/// bytes 0..4 (scales) and 4..8 (mins); pairs 4..8 have their low 4 bits in bytes 8..12 (scale in
/// the low nibble, min in the high) and their top 2 bits in the top bits of bytes 0..8.
pub(super) fn k4_scale_min(packed: &[u8], j: usize) -> (u8, u8) {
    if j < 4 {
        (packed[j] & 63, packed[j + 4] & 63)
    } else {
        (
            (packed[j + 4] & 0xF) | (packed[j - 4] >> 6) << 4,
            (packed[j + 4] >> 4) | (packed[j] >> 6) << 4,
        )
    }
}

/// Q4_K and Q5_K (256 weights in 8 sub-blocks of 32): f16 d, f16 dmin, 12 bytes of packed
/// 6-bit scales and mins, [Q5_K: 32 bytes of fifth bits, bit k of byte l for weight 32k+l],
/// 128 bytes of nibbles (each 64-weight chunk: low nibbles first, then high nibbles).
/// weight = d*scale*q - dmin*min.
fn k4(b: &[u8], y: &mut [f32], has_high: bool) {
    k4_parts(b, has_high, |i, scale, q, min| {
        y[i] = scale * f32::from(q) - min
    });
}

/// Calls `f(i, d * scale, q, dmin * min)` for each weight i of a Q4_K or Q5_K block.
fn k4_parts(b: &[u8], has_high: bool, mut f: impl FnMut(usize, f32, u8, f32)) {
    let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
    let packed = &b[4..16];
    let (qh, qs) = if has_high {
        (&b[16..48], &b[48..176])
    } else {
        (&b[..0], &b[16..144])
    };
    for sub in 0..8 {
        let (sc, m) = k4_scale_min(packed, sub);
        let (scale, min) = (d * f32::from(sc), dmin * f32::from(m));
        let shift = 4 * (sub % 2);
        for l in 0..32 {
            let mut q = (qs[sub / 2 * 32 + l] >> shift) & 0xF;
            if has_high {
                q |= ((qh[l] >> sub) & 1) << 4;
            }
            f(32 * sub + l, scale, q, min);
        }
    }
}

/// A Q4_K or Q5_K row of `len` weights split the way the int8 kernels use it: `(d * scale) * q`
/// per weight and `dmin * min` per 32-weight sub-block, both exact in f32, so that a weight is
/// the first minus its sub-block's second (which [`dequantize_row`] rounds once more).
pub fn kquant_split_row(
    ty: GgmlType,
    bytes: &[u8],
    len: usize,
) -> Result<(Vec<f32>, Vec<f32>), QuantError> {
    let has_high = match ty {
        GgmlType::Q4_K => false,
        GgmlType::Q5_K => true,
        _ => return Err(QuantError::Unsupported { ty, op: "split" }),
    };
    check_sizes(ty, len, bytes.len())?;
    let (mut scaled, mut mins) = (vec![0.0; len], vec![0.0; len / 32]);
    for (b, (scaled, mins)) in bytes
        .chunks_exact(ty.type_size())
        .zip(scaled.chunks_exact_mut(256).zip(mins.chunks_exact_mut(8)))
    {
        k4_parts(b, has_high, |i, scale, q, min| {
            scaled[i] = scale * f32::from(q);
            mins[i / 32] = min;
        });
    }
    Ok((scaled, mins))
}

/// The 16 non-linear levels of IQ4_NL and IQ4_XS (GGUF's table): a weight's nibble picks one.
pub const IQ4_LEVELS: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// 32 weights from 16 bytes of level indices, times `scale`: byte j's low nibble is weight j,
/// its high nibble weight j + 16.
fn iq4_levels(qs: &[u8], scale: f32, y: &mut [f32]) {
    for (j, &q) in qs.iter().enumerate() {
        y[j] = scale * f32::from(IQ4_LEVELS[usize::from(q & 0xF)]);
        y[j + 16] = scale * f32::from(IQ4_LEVELS[usize::from(q >> 4)]);
    }
}

/// IQ4_NL (32 weights): f16 d, 16 bytes of level indices.
fn iq4_nl(b: &[u8], y: &mut [f32]) {
    iq4_levels(&b[2..18], f16_at(b, 0), y);
}

/// IQ4_XS (256 weights): f16 d, a u16 of scale high bits (two per 32-weight sub-block), 4 bytes
/// of scale low nibbles (sub-block i: nibble i % 2 of byte i / 2), then 128 bytes of level
/// indices, 16 per sub-block. Sub-block i's scale is d * (s - 32), s its 6-bit scale.
fn iq4_xs(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    for (i, y) in y.chunks_exact_mut(32).enumerate() {
        let s = iq4_xs_scale(b, i);
        iq4_levels(
            &b[8 + 16 * i..24 + 16 * i],
            d * (i32::from(s) - 32) as f32,
            y,
        );
    }
}

/// The 6-bit scale s of sub-block i (0..8) of IQ4_XS block `b`.
pub(super) fn iq4_xs_scale(b: &[u8], i: usize) -> u8 {
    let low = (b[4 + i / 2] >> (4 * (i % 2))) & 0xF;
    let high = u16::from_le_bytes([b[2], b[3]]) >> (2 * i) & 3;
    low | (high as u8) << 4
}

/// Q6_K (256 weights): 128 bytes of low nibbles, 64 bytes of high bit pairs, 16 i8 scales (one
/// per 16 weights), f16 d. In each 128-weight half, 32-weight group k takes the low (k < 2) or
/// high nibble of low-byte l + 32*(k%2) and bits 2k..2k+2 of high-byte l. Quants are offset by 32.
fn q6_k(b: &[u8], y: &mut [f32]) {
    let (ql, qh, scales) = (&b[..128], &b[128..192], &b[192..208]);
    let d = f16_at(b, 208);
    for (i, y) in y.iter_mut().enumerate() {
        let (half, k, l) = (i / 128, i % 128 / 32, i % 32);
        let lo = (ql[half * 64 + 32 * (k % 2) + l] >> (4 * (k / 2))) & 0xF;
        let hi = (qh[half * 32 + l] >> (2 * k)) & 3;
        let q = i32::from(lo | hi << 4) - 32;
        *y = d * f32::from(scales[i / 16] as i8) * q as f32;
    }
}
