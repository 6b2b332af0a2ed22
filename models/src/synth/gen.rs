//! Random tensor data, generated directly in each ggml block format: random quants and scales,
//! with the f16 block scales chosen so that dequantized weights have a std of about
//! [`WEIGHT_STD`] (the scale of a trained LLM's weights) and stay finite.

use half::f16;

use super::tensors::Init;
use crate::quant::{GgmlType, IQ4_LEVELS};

/// Target std of a dequantized weight.
pub const WEIGHT_STD: f32 = 0.02;

/// wyrand: a tiny, fast generator; quality is ample for random weights.
pub struct WyRand(u64);

impl WyRand {
    /// A generator for one chunk, independent of how chunks are spread over threads.
    pub fn for_chunk(seed: u64, tensor: u64, chunk: u64) -> Self {
        Self(splitmix(splitmix(splitmix(seed) ^ tensor) ^ chunk))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0xa076_1d64_78bd_642f);
        let t = u128::from(self.0) * u128::from(self.0 ^ 0xe703_7ed1_a0b4_28db);
        (t >> 64) as u64 ^ t as u64
    }

    pub fn fill(&mut self, out: &mut [u8]) {
        let mut chunks = out.chunks_exact_mut(8);
        for c in &mut chunks {
            c.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        let rest = chunks.into_remainder();
        let last = self.next_u64().to_le_bytes();
        rest.copy_from_slice(&last[..rest.len()]);
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.unit()
    }

    /// A per-block scale: `base` times a factor in [0.75, 1.25), as real blocks vary.
    fn block_scale(&mut self, base: f32) -> f16 {
        f16::from_f32(base * self.uniform(0.75, 1.25))
    }
}

fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The f16 scale that gives weights of std [`WEIGHT_STD`] when the block's integer factors have
/// root-mean-square `rms_factors`.
fn base_scale(rms_factors: f32) -> f32 {
    WEIGHT_STD / rms_factors
}

/// Root mean square of the integers in `lo..=hi`.
fn rms(lo: i32, hi: i32) -> f32 {
    let sum: f64 = (lo..=hi).map(|k| f64::from(k * k)).sum();
    (sum / f64::from(hi - lo + 1)).sqrt() as f32
}

/// The types [`fill`] draws weights in (any other type gets f32 words).
pub const WEIGHT_TYPES: [GgmlType; 9] = [
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::Q4_0,
    GgmlType::Q5_0,
    GgmlType::IQ4_NL,
    GgmlType::IQ4_XS,
    GgmlType::Q8_0,
    GgmlType::F16,
];

/// Fills `out` with the data of elements `first..` of a tensor of type `ty` drawn per `init`.
/// `out` holds whole blocks.
pub fn fill(ty: GgmlType, init: Init, first: u64, out: &mut [u8], rng: &mut WyRand) {
    match (init, ty) {
        (Init::Weight, GgmlType::Q4_K) => blocks(out, 144, rng, q4_k),
        (Init::Weight, GgmlType::Q5_K) => blocks(out, 176, rng, q5_k),
        (Init::Weight, GgmlType::Q6_K) => blocks(out, 210, rng, q6_k),
        (Init::Weight, GgmlType::Q4_0) => blocks(out, 18, rng, q4_0),
        (Init::Weight, GgmlType::IQ4_NL) => blocks(out, 18, rng, iq4_nl),
        (Init::Weight, GgmlType::IQ4_XS) => blocks(out, 136, rng, iq4_xs),
        (Init::Weight, GgmlType::Q5_0) => blocks(out, 22, rng, q5_0),
        (Init::Weight, GgmlType::Q8_0) => blocks(out, 34, rng, q8_0),
        (Init::Weight, GgmlType::F16) => {
            let half_width = WEIGHT_STD * 3f32.sqrt();
            for v in out.chunks_exact_mut(2) {
                let x = rng.uniform(-half_width, half_width);
                v.copy_from_slice(&f16::from_f32(x).to_le_bytes());
            }
        }
        _ => {
            let half_width = WEIGHT_STD * 3f32.sqrt();
            for (i, v) in out.chunks_exact_mut(4).enumerate() {
                let x = match init {
                    Init::Weight => rng.uniform(-half_width, half_width),
                    Init::Norm => rng.uniform(0.9, 1.1),
                    Init::Uniform(lo, hi) => rng.uniform(lo, hi),
                    Init::Const(c) => c,
                    Init::RopeFreqs(rotated) if first + (i as u64) < u64::from(rotated) => 1.0,
                    Init::RopeFreqs(_) => 1e30,
                };
                v.copy_from_slice(&x.to_le_bytes());
            }
        }
    }
}

/// Random bytes for every block, then `header` sets each block's scales.
fn blocks(out: &mut [u8], size: usize, rng: &mut WyRand, header: fn(&mut [u8], &mut WyRand)) {
    rng.fill(out);
    for block in out.chunks_exact_mut(size) {
        header(block, rng);
    }
}

/// Q4_K: f16 d, f16 dmin, 12 bytes of packed 6-bit (scale, min) pairs, 128 bytes of nibbles.
/// Weight = d·sc·q − dmin·m. Scales are drawn from 32..=63 and each min is set to cancel the
/// sub-block's mean (q averages 7.5), so weights are centred on zero.
fn q4_k(b: &mut [u8], rng: &mut WyRand) {
    k_quant_header(b, rng, 16);
}

/// Q5_K: Q4_K's header and nibbles with 32 bytes of fifth bits between them (random, as the
/// nibbles), so q averages 15.5.
fn q5_k(b: &mut [u8], rng: &mut WyRand) {
    k_quant_header(b, rng, 32);
}

/// The d, dmin and (scale, min) pairs of a Q4_K or Q5_K block whose quants take `levels` values.
fn k_quant_header(b: &mut [u8], rng: &mut WyRand, levels: u32) {
    let dmin_ratio = (levels / 2) as f32;
    // The mins cancel the mean of q, leaving its spread: the std of `levels` uniform levels.
    let q_std = ((levels * levels - 1) as f32 / 12.0).sqrt();
    let d = rng.block_scale(base_scale(rms(32, 63) * q_std));
    let dmin = f16::from_f32(d.to_f32() * dmin_ratio);
    let bits = rng.next_u64();
    let mut sc = [0u8; 8];
    let mut m = [0u8; 8];
    for j in 0..8 {
        sc[j] = 32 + ((bits >> (5 * j)) & 31) as u8;
        // d·sc·(levels - 1)/2 = dmin·m  =>  m = sc·(levels - 1)/levels, rounded.
        m[j] = ((u32::from(sc[j]) * (levels - 1) + levels / 2) / levels) as u8;
    }
    b[0..2].copy_from_slice(&d.to_le_bytes());
    b[2..4].copy_from_slice(&dmin.to_le_bytes());
    let s = &mut b[4..16];
    for j in 0..4 {
        s[j] = sc[j] | (sc[j + 4] >> 4) << 6;
        s[j + 4] = m[j] | (m[j + 4] >> 4) << 6;
        s[j + 8] = (sc[j + 4] & 0xF) | (m[j + 4] & 0xF) << 4;
    }
}

/// Q6_K: 128 bytes of low nibbles, 64 of high 2-bit pairs, 16 int8 scales, f16 d.
/// Weight = d·scale·(q − 32); scales are ±8..=15.
fn q6_k(b: &mut [u8], rng: &mut WyRand) {
    let bits = rng.next_u64();
    for (j, s) in b[192..208].iter_mut().enumerate() {
        let magnitude = 8 + ((bits >> (4 * j)) & 7) as i8;
        let negative = (bits >> (4 * j + 3)) & 1 == 1;
        *s = (if negative { -magnitude } else { magnitude }) as u8;
    }
    let d = rng.block_scale(base_scale(rms(8, 15) * rms(-32, 31)));
    b[208..210].copy_from_slice(&d.to_le_bytes());
}

/// Root mean square of the IQ4 levels.
fn iq4_rms() -> f32 {
    let sum: f32 = IQ4_LEVELS
        .iter()
        .map(|&l| f32::from(l) * f32::from(l))
        .sum();
    (sum / 16.0).sqrt()
}

/// IQ4_NL: f16 d, 16 bytes of level indices. Weight = d·level.
fn iq4_nl(b: &mut [u8], rng: &mut WyRand) {
    let d = rng.block_scale(base_scale(iq4_rms()));
    b[0..2].copy_from_slice(&d.to_le_bytes());
}

/// IQ4_XS: f16 d, then random 6-bit sub-block scales s and level indices. Weight =
/// d·(s − 32)·level.
fn iq4_xs(b: &mut [u8], rng: &mut WyRand) {
    let d = rng.block_scale(base_scale(iq4_rms() * rms(-32, 31)));
    b[0..2].copy_from_slice(&d.to_le_bytes());
}

/// Q4_0: f16 d, 16 bytes of nibbles. Weight = d·(q − 8).
fn q4_0(b: &mut [u8], rng: &mut WyRand) {
    let d = rng.block_scale(base_scale(rms(-8, 7)));
    b[0..2].copy_from_slice(&d.to_le_bytes());
}

/// Q5_0: f16 d, 4 bytes of fifth bits, 16 bytes of nibbles. Weight = d·(q − 16).
fn q5_0(b: &mut [u8], rng: &mut WyRand) {
    let d = rng.block_scale(base_scale(rms(-16, 15)));
    b[0..2].copy_from_slice(&d.to_le_bytes());
}

/// Q8_0: f16 d, 32 int8 quants. Weight = d·q.
fn q8_0(b: &mut [u8], rng: &mut WyRand) {
    let d = rng.block_scale(base_scale(rms(-128, 127)));
    b[0..2].copy_from_slice(&d.to_le_bytes());
}
