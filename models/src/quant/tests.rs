use half::{bf16, f16};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;

fn h(v: f32) -> [u8; 2] {
    f16::from_f32(v).to_le_bytes()
}

fn dequant(ty: GgmlType, block: &[u8]) -> Vec<f32> {
    let mut out = vec![0.0; block.len() / ty.type_size() * ty.block_size()];
    dequantize_row(ty, block, &mut out).unwrap();
    out
}

fn quant(ty: GgmlType, x: &[f32]) -> Vec<u8> {
    let mut out = vec![0; x.len() / ty.block_size() * ty.type_size()];
    quantize_row(ty, x, &mut out).unwrap();
    out
}

/// Checks `y[i] == v` for each `(i, v)`, exactly: every expected value here is a small multiple
/// of a power of two, so f32 computes it without rounding.
fn assert_at(y: &[f32], expect: &[(usize, f32)]) {
    for &(i, v) in expect {
        assert_eq!(y[i], v, "weight {i}");
    }
}

#[test]
fn float_types() {
    assert_eq!(
        dequant(GgmlType::F32, &[0, 0, 0x80, 0x3F, 0, 0, 0, 0xC0]),
        [1.0, -2.0]
    );
    assert_eq!(
        dequant(GgmlType::F16, &[0x00, 0x3C, 0x00, 0xC0]),
        [1.0, -2.0]
    );
    assert_eq!(
        dequant(GgmlType::BF16, &[0x80, 0x3F, 0x40, 0xC0]),
        [1.0, -3.0]
    );
}

#[test]
fn q4_0_and_q4_1() {
    // Byte j holds quant j (low nibble) for weight j and 15 - j (high nibble) for weight j + 16.
    let qs: Vec<u8> = (0..16).map(|j| j | (15 - j) << 4).collect();
    let y = dequant(GgmlType::Q4_0, &[&h(0.5)[..], &qs].concat());
    for j in 0..16 {
        assert_eq!(
            (y[j], y[j + 16]),
            ((j as f32 - 8.0) * 0.5, (7.0 - j as f32) * 0.5)
        );
    }
    let y = dequant(GgmlType::Q4_1, &[&h(0.25)[..], &h(-1.0), &qs].concat());
    for j in 0..16 {
        assert_eq!(
            (y[j], y[j + 16]),
            (j as f32 * 0.25 - 1.0, (15 - j) as f32 * 0.25 - 1.0)
        );
    }
}

#[test]
fn iq4_nl_and_iq4_xs_pick_non_linear_levels() {
    let levels = [
        -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
    ];
    // Byte j: level j for weight j, level 15 - j for weight j + 16.
    let qs: Vec<u8> = (0..16).map(|j| j | (15 - j) << 4).collect();
    let y = dequant(GgmlType::IQ4_NL, &[&h(0.5)[..], &qs].concat());
    for j in 0..16 {
        let want = (levels[j] as f32 * 0.5, levels[15 - j] as f32 * 0.5);
        assert_eq!((y[j], y[j + 16]), want);
    }
    // IQ4_XS: sub-block i's 6-bit scale s (every value of the high bits), factor d * (s - 32).
    let scales = [1u32, 20, 31, 32, 33, 47, 48, 63];
    let high: u16 = scales
        .iter()
        .enumerate()
        .map(|(i, s)| ((s >> 4) as u16) << (2 * i))
        .sum();
    let low: Vec<u8> = (0..4)
        .map(|b| (scales[2 * b] & 0xF | (scales[2 * b + 1] & 0xF) << 4) as u8)
        .collect();
    let qs_xs: Vec<u8> = (0..8).flat_map(|_| qs.iter().copied()).collect();
    let block = [&h(0.25)[..], &high.to_le_bytes(), &low, &qs_xs].concat();
    assert_eq!(block.len(), GgmlType::IQ4_XS.type_size());
    let y = dequant(GgmlType::IQ4_XS, &block);
    for i in 0..8 {
        for j in 0..16 {
            let factor = 0.25 * (scales[i] as f32 - 32.0);
            let got = (y[32 * i + j], y[32 * i + j + 16]);
            assert_eq!(
                got,
                (levels[j] as f32 * factor, levels[15 - j] as f32 * factor)
            );
        }
    }
}

#[test]
fn q5_0_and_q5_1() {
    let qs: Vec<u8> = (0..16).map(|j| j | j << 4).collect();
    // Fifth bits set for weights 16..32 only: quants 0..16 then 16..32; Q5_0 centres them on 16.
    let y = dequant(
        GgmlType::Q5_0,
        &[&h(1.0)[..], &0xFFFF_0000u32.to_le_bytes(), &qs].concat(),
    );
    for j in 0..16 {
        assert_eq!((y[j], y[j + 16]), (j as f32 - 16.0, j as f32));
    }
    let y = dequant(
        GgmlType::Q5_1,
        &[&h(2.0)[..], &h(0.5), &0x0000_FFFFu32.to_le_bytes(), &qs].concat(),
    );
    for j in 0..16 {
        assert_eq!(
            (y[j], y[j + 16]),
            ((j + 16) as f32 * 2.0 + 0.5, j as f32 * 2.0 + 0.5)
        );
    }
}

#[test]
fn q8_0() {
    let qs: Vec<u8> = (0..32).map(|i| (i as i8 - 16) as u8).collect();
    let y = dequant(GgmlType::Q8_0, &[&h(0.125)[..], &qs].concat());
    assert_eq!(
        y,
        (0..32)
            .map(|i| (i as f32 - 16.0) * 0.125)
            .collect::<Vec<_>>()
    );
}

#[test]
fn q2_k() {
    // Scale byte s: scale (s+1)%16 in the low nibble, min s%3 in the high one. Every quant byte
    // is 0b11_10_01_00, so the quant is the 32-weight group's index within its 128-weight half.
    let scales: Vec<u8> = (0..16).map(|s| ((s + 1) & 0xF) | (s % 3) << 4).collect();
    let y = dequant(
        GgmlType::Q2_K,
        &[&scales[..], &[0xE4; 64], &h(0.5), &h(0.25)].concat(),
    );
    assert_at(
        &y,
        &[
            (0, 0.0),
            (40, 0.5 * 3.0 * 1.0 - 0.25 * 2.0),
            (200, 0.5 * 13.0 * 2.0),
            (255, 0.0),
            (127, 0.5 * 8.0 * 3.0 - 0.25),
        ],
    );
}

#[test]
fn q3_k() {
    // Six-bit scales are 33 (scale 1) except scale 5 = 40 (8) and scale 12 = 20 (-12).
    let packed = [
        0x11, 0x11, 0x11, 0x11, 0x41, 0x18, 0x11, 0x11, 0x6A, 0xAA, 0xAA, 0xAA,
    ];
    // High bits all set except for weight 37 (byte 5, bit 1).
    let mut hmask = [0xFF; 32];
    hmask[5] = 0xFD;
    let y = dequant(
        GgmlType::Q3_K,
        &[&hmask[..], &[0xE4; 64], &packed, &h(1.0)].concat(),
    );
    assert_at(
        &y,
        &[
            (0, 0.0),
            (37, 1.0 - 4.0),
            (38, 1.0),
            (90, 8.0 * 2.0),
            (200, -12.0 * 2.0),
            (255, 3.0),
        ],
    );
}

/// Packed 6-bit scales 1, 2, 3, 4, 40, 50, 60, 63 and mins 0, 1, 2, 3, 33, 17, 5, 63.
const K4_SCALES: [u8; 12] = [
    0x81, 0xc2, 0xc3, 0xc4, 0x80, 0x41, 0x02, 0xc3, 0x18, 0x12, 0x5c, 0xff,
];

/// Nibbles: low nibble of byte l is l%16, high nibble is 15 - l%16.
fn k4_nibbles() -> Vec<u8> {
    (0..128).map(|l| (l % 16) | (15 - l % 16) << 4).collect()
}

#[test]
fn q4_k() {
    let y = dequant(
        GgmlType::Q4_K,
        &[&h(0.5)[..], &h(1.0), &K4_SCALES, &k4_nibbles()].concat(),
    );
    assert_at(
        &y,
        &[
            (0, 0.0),
            (33, 0.5 * 2.0 * 14.0 - 1.0),
            (130, 0.5 * 40.0 * 2.0 - 33.0),
            (255, -63.0),
            (191, 0.5 * 50.0 * 0.0 - 17.0),
        ],
    );
}

#[test]
fn q5_k() {
    // Fifth bits set in sub-blocks 0 and 7 only.
    let y = dequant(
        GgmlType::Q5_K,
        &[&h(0.5)[..], &h(1.0), &K4_SCALES, &[0x81; 32], &k4_nibbles()].concat(),
    );
    assert_at(
        &y,
        &[
            (0, 0.5 * 16.0),
            (33, 0.5 * 2.0 * 14.0 - 1.0),
            (255, 0.5 * 63.0 * 16.0 - 63.0),
        ],
    );
}

#[test]
fn q6_k() {
    // Low bytes 0x21 (nibbles 1 and 2), high bytes 0b11_10_01_00: the 32-weight group k of each
    // half has quant (lo | k << 4) - 32 with lo = 1 for k < 2 and 2 otherwise. Scale s is s - 8.
    let scales: Vec<u8> = (0..16).map(|s| (s as i8 - 8) as u8).collect();
    let y = dequant(
        GgmlType::Q6_K,
        &[&[0x21; 128][..], &[0xE4; 64], &scales, &h(0.5)].concat(),
    );
    assert_at(
        &y,
        &[
            (0, 0.5 * -8.0 * -31.0),
            (40, 0.5 * -6.0 * -15.0),
            (70, 0.5 * -4.0 * 2.0),
            (228, 0.5 * 6.0 * 18.0),
            (255, 0.5 * 7.0 * 18.0),
        ],
    );
}

fn take<'a>(data: &mut &'a [u8], n: usize) -> &'a [u8] {
    let (head, rest) = data.split_at(n);
    *data = rest;
    head
}

#[test]
fn matches_gguf_py_golden() {
    // Written by tests/data/gen_dequant_golden.py (see there for the format).
    let mut data: &[u8] = include_bytes!("../../tests/data/dequant_golden.bin");
    let mut seen = Vec::new();
    while !data.is_empty() {
        let header = take(&mut data, 8);
        let ty = GgmlType::from_id(u32::from_le_bytes(header[..4].try_into().unwrap())).unwrap();
        let n_blocks = u32::from_le_bytes(header[4..].try_into().unwrap()) as usize;
        let blocks = take(&mut data, n_blocks * ty.type_size());
        let expected: Vec<f32> = take(&mut data, n_blocks * ty.block_size() * 4)
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let got = dequant(ty, blocks);
        // The kernels multiply in gguf-py's order, so results are equal, not merely close
        // (up to the sign of zero, which `==` ignores).
        for (i, (g, w)) in got.iter().zip(&expected).enumerate() {
            let block = i / ty.block_size();
            assert!(g == w, "{ty} block {block} weight {i}: {g} vs gguf-py {w}");
        }
        seen.push(ty);
    }
    let supported: Vec<GgmlType> = GgmlType::ALL
        .iter()
        .copied()
        .filter(|t| t.can_dequantize())
        .collect();
    seen.sort();
    assert_eq!(
        seen, supported,
        "the golden file covers every dequantizable type"
    );
}

fn gaussian_rows(rng: &mut StdRng, n: usize) -> Vec<f32> {
    // Sums of uniforms: roughly normal, with occasional larger outliers per block.
    (0..n)
        .map(|i| {
            (0..4).map(|_| rng.random_range(-1.0f32..1.0)).sum::<f32>()
                * if i % 97 == 0 { 4.0 } else { 1.0 }
        })
        .collect()
}

/// Quantizes and dequantizes random data, checking each weight's error against `bound`, which
/// gets the sub-block of `sub` weights that the weight belongs to.
fn round_trip(ty: GgmlType, sub: usize, bound: impl Fn(&[f32], &[u8]) -> f32) {
    let mut rng = StdRng::seed_from_u64(7);
    let x = gaussian_rows(&mut rng, 256 * 16);
    let q = quant(ty, &x);
    let y = dequant(ty, &q);
    let blocks = q.chunks(ty.type_size());
    for ((xb, yb), qb) in x
        .chunks(ty.block_size())
        .zip(y.chunks(ty.block_size()))
        .zip(blocks)
    {
        for (xs, ys) in xb.chunks(sub).zip(yb.chunks(sub)) {
            let limit = bound(xs, qb);
            for (a, b) in xs.iter().zip(ys) {
                assert!(
                    (a - b).abs() <= limit,
                    "{ty}: {a} became {b}, error bound {limit}"
                );
            }
        }
    }
    // Degenerate blocks: zeros stay zeros, constants stay close.
    let n = ty.block_size().max(32);
    assert!(
        dequant(ty, &quant(ty, &vec![0.0; n]))
            .iter()
            .all(|&v| v == 0.0),
        "{ty}"
    );
    for c in [1.0, -3.0] {
        let y = dequant(ty, &quant(ty, &vec![c; n]));
        assert!(
            y.iter().all(|v| (v - c).abs() <= 0.01 * c.abs()),
            "{ty} constant {c}: {y:?}"
        );
    }
}

fn abs_max(x: &[f32]) -> f32 {
    x.iter().fold(0.0, |m, v| m.max(v.abs()))
}

#[test]
fn float_round_trips() {
    round_trip(GgmlType::F32, 1, |_, _| 0.0);
    round_trip(GgmlType::F16, 1, |x, _| x[0].abs() * 2f32.powi(-11));
    round_trip(GgmlType::BF16, 1, |x, _| x[0].abs() * 2f32.powi(-8));
    assert_eq!(
        quant(GgmlType::BF16, &[1.0 + 2f32.powi(-9)]),
        bf16::from_f32(1.0).to_le_bytes()
    );
}

#[test]
fn q8_0_round_trip() {
    // Half a step of amax / 127, plus the f16 rounding of the scale.
    round_trip(GgmlType::Q8_0, 32, |x, _| 0.5 * abs_max(x) / 127.0 * 1.002);
}

#[test]
fn q4_0_round_trip() {
    // The step is amax / 8; the weight opposite the largest one can clamp by a whole step.
    round_trip(GgmlType::Q4_0, 32, |x, _| abs_max(x) / 8.0 * 1.002);
}

#[test]
fn iq4_nl_round_trip() {
    // Levels at most 24 apart (half: 12 steps of d = amax / 127); the weight opposite the
    // largest one can clamp from 127 to 113.
    round_trip(GgmlType::IQ4_NL, 32, |x, _| {
        abs_max(x) / 127.0 * 14.0 * 1.002
    });
}

#[test]
fn iq4_xs_round_trip() {
    // IQ4_NL's bound on the sub-block's scale, which is at most a step of the super-block's d
    // from the one wanted (a scale of +32 steps clamps to 31), plus that step times 127.
    round_trip(GgmlType::IQ4_XS, 32, |x, b| {
        let d = f16::from_le_bytes([b[0], b[1]]).to_f32().abs();
        (abs_max(x) / 127.0 + d) * 14.0 * 1.002 + 127.0 * d
    });
}

#[test]
fn q5_0_round_trip() {
    // The step is amax / 16; the weight opposite the largest one can clamp by a whole step.
    round_trip(GgmlType::Q5_0, 32, |x, _| abs_max(x) / 16.0 * 1.002);
}

/// Q4_K and Q5_K with `steps` quantization steps per sub-block range: half a step of the
/// range / steps, widened by the 6-bit rounding of the scale (up to one d) and of the min (half a
/// dmin).
fn k_quant_round_trip(ty: GgmlType, steps: f32) {
    round_trip(ty, 32, |x, b| {
        let (d, dmin) = (dequant::f16_at(b, 0), dequant::f16_at(b, 2));
        let lo = x.iter().fold(0.0f32, |m, &v| m.min(v));
        let hi = x.iter().fold(lo, |m, &v| m.max(v));
        0.5 * ((hi - lo) / steps + d) + 0.5 * dmin + 1e-6
    });
}

#[test]
fn q4_k_round_trip() {
    k_quant_round_trip(GgmlType::Q4_K, 15.0);
}

#[test]
fn q5_k_round_trip() {
    k_quant_round_trip(GgmlType::Q5_K, 31.0);
    // The fifth bits are used: a ramp over a sub-block reaches quants above 15.
    let ramp: Vec<f32> = (0..256).map(|i| (i % 32) as f32).collect();
    assert!(quant(GgmlType::Q5_K, &ramp)[16..48].iter().any(|&b| b != 0));
}

#[test]
fn k_quants_split_into_scaled_quants_and_mins() {
    // The dequantized weight is the split's difference rounded once, as dequantize_row computes
    // it; the mins are one per 32 weights.
    let mut rng = StdRng::seed_from_u64(11);
    for ty in [GgmlType::Q4_K, GgmlType::Q5_K] {
        let bytes = quant(ty, &gaussian_rows(&mut rng, 512));
        let (scaled, mins) = kquant_split_row(ty, &bytes, 512).unwrap();
        assert_eq!(mins.len(), 16);
        let y = dequant(ty, &bytes);
        for (i, w) in y.iter().enumerate() {
            assert_eq!(*w, scaled[i] - mins[i / 32], "{ty} weight {i}");
        }
        assert!(mins.iter().any(|&m| m != 0.0));
        assert!(kquant_split_row(ty, &bytes, 256).is_err());
    }
    assert!(kquant_split_row(GgmlType::Q6_K, &[0; 210], 256).is_err());
}

#[test]
fn q6_k_round_trip() {
    // Half a step of the sub-block's amax / 31, widened by the 8-bit rounding of its scale.
    round_trip(GgmlType::Q6_K, 16, |x, b| {
        0.5 * (abs_max(x) / 31.0 + dequant::f16_at(b, 208)) + 1e-6
    });
}

#[test]
fn size_and_support_errors() {
    let mut out = [0.0; 64];
    assert_eq!(
        dequantize_row(GgmlType::Q8_0, &[0; 34], &mut out[..40]),
        Err(QuantError::NotBlockMultiple {
            ty: GgmlType::Q8_0,
            len: 40,
            block_size: 32
        })
    );
    let err = dequantize_row(GgmlType::Q8_0, &[0; 34], &mut out).unwrap_err();
    assert_eq!(
        err.to_string(),
        "64 Q8_0 values take 68 bytes, but the buffer has 34"
    );
    for ty in [
        GgmlType::Q8_1,
        GgmlType::Q8_K,
        GgmlType::IQ2_XS,
        GgmlType::MXFP4,
    ] {
        assert!(!ty.can_dequantize());
        assert!(matches!(
            dequantize_row(ty, &[], &mut []),
            Err(QuantError::Unsupported { .. })
        ));
    }
    let err = quantize_row(GgmlType::Q2_K, &[0.0; 256], &mut [0; 84]).unwrap_err();
    assert_eq!(err.to_string(), "quantization is not supported for Q2_K");
    assert!(matches!(
        quantize_row(GgmlType::Q6_K, &[0.0; 256], &mut [0; 200]),
        Err(QuantError::SizeMismatch { .. })
    ));
}
