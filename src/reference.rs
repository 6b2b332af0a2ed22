//! CPU references for the engine's kernels, computed in f64 from the same f32 inputs, so that a
//! kernel's error is measured against the exact result rather than another f32 implementation.

use rayon::prelude::*;
use zinc_models::backend::AttentionParams;
use zinc_models::quant::{dequantize_row, kquant_split_row, quantize_row, GgmlType};

/// `y[r][c] = x[r][c] / sqrt(mean(x[r]^2) + eps) * w[c]` over rows of `w.len()` elements.
pub fn rmsnorm(x: &[f32], w: &[f32], eps: f64) -> Vec<f64> {
    x.chunks(w.len())
        .flat_map(|row| {
            let ss: f64 = row.iter().map(|&v| f64::from(v).powi(2)).sum();
            let scale = 1.0 / (ss / row.len() as f64 + eps).sqrt();
            row.iter()
                .zip(w)
                .map(move |(&v, &g)| f64::from(v) * scale * f64::from(g))
        })
        .collect()
}

/// The `k` largest of `row` as (index, value), by descending `f32::total_cmp`, the lower index
/// first among equals: the whole row sorted, then cut.
pub fn top_k(row: &[f32], k: usize) -> Vec<(u32, f32)> {
    let mut all: Vec<(u32, f32)> = (0u32..).zip(row.iter().copied()).collect();
    all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    all.truncate(k);
    all
}

/// Softmax of each row of `cols` elements.
pub fn softmax_rows(x: &[f32], cols: usize) -> Vec<f64> {
    x.chunks(cols)
        .flat_map(|row| {
            let max = row
                .iter()
                .map(|&v| f64::from(v))
                .fold(f64::NEG_INFINITY, f64::max);
            let exps: Vec<f64> = row.iter().map(|&v| (f64::from(v) - max).exp()).collect();
            let sum: f64 = exps.iter().sum();
            exps.into_iter().map(move |e| e / sum)
        })
        .collect()
}

pub fn silu(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
}

/// GELU with the tanh approximation, as written in the papers and llama.cpp.
pub fn gelu_tanh(x: f64) -> f64 {
    let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x.powi(3));
    0.5 * x * (1.0 + u.tanh())
}

/// `f(a[i], b[i])` for every i.
pub fn zip_map(a: &[f32], b: &[f32], f: impl Fn(f64, f64) -> f64) -> Vec<f64> {
    a.iter()
        .zip(b)
        .map(|(&a, &b)| f(f64::from(a), f64::from(b)))
        .collect()
}

/// `Y[T][N] = X[T][K] · W[N][K]^T`, all row-major; rows of Y in parallel.
pub fn gemm_xwt<A, B>(x: &[A], w: &[B], n: usize, k: usize) -> Vec<f64>
where
    A: Copy + Into<f64> + Sync,
    B: Copy + Into<f64> + Sync,
{
    let mut y = vec![0.0; x.len() / k * n];
    y.par_chunks_mut(n)
        .zip(x.par_chunks(k))
        .for_each(|(y_row, x_row)| {
            for (out, w_row) in y_row.iter_mut().zip(w.chunks(k)) {
                *out = x_row
                    .iter()
                    .zip(w_row)
                    .map(|(&a, &b)| a.into() * b.into())
                    .sum();
            }
        });
    y
}

/// Gemma's soft-capping, `cap * tanh(x / cap)`.
pub fn softcap(x: f64, cap: f64) -> f64 {
    cap * (x / cap).tanh()
}

/// Causal grouped-query attention of `T` new tokens at positions `start..` over the cache:
/// q is [T][n_head * dk], k [n_kv][n_head_kv * dk], v [n_kv][n_head_kv * dv], the result
/// [T][n_head * dv]. A query at position p sees keys p - window < j <= p; the scores are scaled,
/// then capped. Rows (token, head) in parallel.
pub fn attention(q: &[f32], k: &[f32], v: &[f32], start: usize, p: &AttentionParams) -> Vec<f64> {
    let (dk, dv) = (p.head_dim_k, p.head_dim_v);
    let group = p.n_head / p.n_head_kv;
    let n_tokens = q.len() / (p.n_head * dk);
    let mut o = vec![0.0; n_tokens * p.n_head * dv];
    o.par_chunks_mut(dv).enumerate().for_each(|(row, out)| {
        let (t, h) = (row / p.n_head, row % p.n_head);
        let kv_h = h / group;
        let pos = start + t;
        let first = p.window.map_or(0, |w| (pos + 1).saturating_sub(w));
        let scores = scores(q, k, row, first..pos + 1, p);
        let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
        let sum: f64 = weights.iter().sum();
        for (j, w) in (first..=pos).zip(&weights) {
            let vj = &v[(j * p.n_head_kv + kv_h) * dv..][..dv];
            for (o, &x) in out.iter_mut().zip(vj) {
                *o += w / sum * f64::from(x);
            }
        }
    });
    o
}

/// The scaled (and capped) scores of query row `row` ((token, head) of q) against the keys at
/// positions `keys`.
fn scores(
    q: &[f32],
    k: &[f32],
    row: usize,
    keys: std::ops::Range<usize>,
    p: &AttentionParams,
) -> Vec<f64> {
    let dk = p.head_dim_k;
    let kv_h = row % p.n_head / (p.n_head / p.n_head_kv);
    let qh = &q[row * dk..][..dk];
    keys.map(|j| {
        let kj = &k[(j * p.n_head_kv + kv_h) * dk..][..dk];
        let dot: f64 = qh
            .iter()
            .zip(kj)
            .map(|(&a, &b)| f64::from(a) * f64::from(b))
            .sum();
        let s = dot * f64::from(p.scale);
        p.softcap.map_or(s, |c| softcap(s, f64::from(c)))
    })
    .collect()
}

/// [`attention`] over `split`-key slices of the cache: per (token, head, slice) the partial
/// state `[sum of exp(s - m) v (dv values), m, sum of exp(s - m)]`, m the slice's largest
/// visible score; all zeros for a slice without visible keys.
pub fn attention_partials(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    start: usize,
    p: &AttentionParams,
    split: usize,
    keys: usize,
) -> Vec<f64> {
    let dv = p.head_dim_v;
    let n_tokens = q.len() / (p.n_head * p.head_dim_k);
    let n_splits = keys.div_ceil(split);
    let group = p.n_head / p.n_head_kv;
    let mut out = vec![0.0; n_tokens * p.n_head * n_splits * (dv + 2)];
    out.par_chunks_mut(n_splits * (dv + 2))
        .enumerate()
        .for_each(|(row, states)| {
            let pos = start + row / p.n_head;
            let first = p.window.map_or(0, |w| (pos + 1).saturating_sub(w));
            let kv_h = row % p.n_head / group;
            for (s, state) in states.chunks_mut(dv + 2).enumerate() {
                let keys = first.max(s * split)..(pos + 1).min((s + 1) * split);
                if keys.is_empty() {
                    continue;
                }
                let scores = scores(q, k, row, keys.clone(), p);
                let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                for (j, score) in keys.zip(&scores) {
                    let w = (score - max).exp();
                    let vj = &v[(j * p.n_head_kv + kv_h) * dv..][..dv];
                    for (o, &x) in state.iter_mut().zip(vj) {
                        *o += w * f64::from(x);
                    }
                    state[dv + 1] += w;
                }
                state[dv] = max;
            }
        });
    out
}

/// The attention output `[rows][dv]` from `splits` partial states per row (see
/// [`attention_partials`]); states with a zero sum are empty.
pub fn combine_partials(parts: &[f32], dv: usize, splits: usize) -> Vec<f64> {
    parts
        .chunks(splits * (dv + 2))
        .flat_map(|states| {
            let states: Vec<&[f32]> = states.chunks(dv + 2).filter(|s| s[dv + 1] > 0.0).collect();
            let max = states
                .iter()
                .map(|s| f64::from(s[dv]))
                .fold(f64::NEG_INFINITY, f64::max);
            let weight = |s: &[f32]| (f64::from(s[dv]) - max).exp();
            let sum: f64 = states
                .iter()
                .map(|s| weight(s) * f64::from(s[dv + 1]))
                .sum();
            (0..dv)
                .map(|d| {
                    states
                        .iter()
                        .map(|s| weight(s) * f64::from(s[d]))
                        .sum::<f64>()
                        / sum
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Rotary embedding of x `[T][n_heads * head_dim]` by each token's angles (sin and cos
/// `[T][half]`): neox pairs dimensions (i, i + half), otherwise (2i, 2i + 1); dimensions past
/// 2 * half are kept.
pub fn rope(
    x: &[f32],
    sin: &[f32],
    cos: &[f32],
    n_heads: usize,
    head_dim: usize,
    neox: bool,
) -> Vec<f64> {
    let n_tokens = x.len() / (n_heads * head_dim);
    let half = sin.len() / n_tokens;
    let mut y: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
    for (row, head) in y.chunks_mut(head_dim).enumerate() {
        let t = row / n_heads;
        for i in 0..half {
            let (a, b) = if neox {
                (i, i + half)
            } else {
                (2 * i, 2 * i + 1)
            };
            let (s, c) = (f64::from(sin[t * half + i]), f64::from(cos[t * half + i]));
            let (x0, x1) = (head[a], head[b]);
            head[a] = x0 * c - x1 * s;
            head[b] = x0 * s + x1 * c;
        }
    }
    y
}

/// The shape and switches of [`rope_append`].
pub struct Prologue {
    pub n_head: usize,
    pub n_kv: usize,
    pub dk: usize,
    pub dv: usize,
    pub neox: bool,
    pub qk_norm: bool,
    pub v_norm: bool,
    pub eps: f32,
    /// The cache row (and table row) of the first token.
    pub pos: usize,
}

/// The attention prologue of `rope_append_f16` from its inputs (q, k, v, the query and key
/// norm weights, sin and cos of every row up to the last token's): the queries normed where
/// `qk_norm` and rotated, then the K cache (the keys likewise) and the V cache (the values,
/// normed without weight where `v_norm`), both NaN before row `pos` (untouched there).
pub fn rope_append(inputs: &[Vec<f32>], p: &Prologue) -> Vec<f64> {
    let [q, k, v, qw, kw, sin, cos, ..] = inputs else {
        panic!("rope_append takes eight inputs");
    };
    let eps = f64::from(p.eps);
    // A norm's output rounded to f32, as the kernel holds it before rope.
    let normed = |x: &[f32], w: &[f32], on: bool| -> Vec<f32> {
        if on {
            rmsnorm(x, w, eps).into_iter().map(|v| v as f32).collect()
        } else {
            x.to_vec()
        }
    };
    let half = sin.len() / (p.pos + q.len() / (p.n_head * p.dk));
    let rows = p.pos * half..;
    let rotated = |x: &[f32], w: &[f32], heads: usize| {
        let n_tokens = x.len() / (heads * p.dk);
        let (sin, cos) = (&sin[rows.clone()], &cos[rows.clone()]);
        let table = ..n_tokens * half;
        rope(
            &normed(x, w, p.qk_norm),
            &sin[table],
            &cos[table],
            heads,
            p.dk,
            p.neox,
        )
    };
    let untouched = |width: usize| std::iter::repeat_n(f64::NAN, p.pos * p.n_kv * width);
    let ones = vec![1.0; p.dv];
    let values = normed(v, &ones, p.v_norm).into_iter().map(f64::from);
    (rotated(q, qw, p.n_head).into_iter())
        .chain(untouched(p.dk))
        .chain(rotated(k, kw, p.n_kv))
        .chain(untouched(p.dv))
        .chain(values)
        .collect()
}

/// Rows `ids` (token ids held as f32) of `table` `[vocab][cols]`, times `scale`.
pub fn embed(table: &[f32], ids: &[f32], cols: usize, scale: f64) -> Vec<f64> {
    ids.iter()
        .flat_map(|&id| &table[id as usize * cols..][..cols])
        .map(|&v| f64::from(v) * scale)
        .collect()
}

/// Weights `w` (a whole number of `ty` blocks) as GGUF bytes, by models/src/quant's quantizer;
/// blocks are independent, so chunks of them are quantized in parallel.
pub fn quantize(ty: GgmlType, w: &[f32]) -> Vec<u8> {
    const BLOCKS: usize = 256;
    let mut bytes = vec![0u8; w.len() / ty.block_size() * ty.type_size()];
    bytes
        .par_chunks_mut(BLOCKS * ty.type_size())
        .zip(w.par_chunks(BLOCKS * ty.block_size()))
        .for_each(|(out, src)| quantize_row(ty, src, out).expect("whole blocks"));
    bytes
}

/// The values a kernel reads from `w` quantized as `ty`: models/src/quant's dequantization
/// (checked against gguf-py) of [`quantize`]'s bytes.
pub fn dequantized(ty: GgmlType, w: &[f32]) -> Vec<f32> {
    let mut out = vec![0.0; w.len()];
    dequantize_row(ty, &quantize(ty, w), &mut out).expect("whole blocks");
    out
}

/// Activation values per group of quantize_s8's layout (kernels/quant/act_s8.tile): two blocks
/// of 32.
pub const ACT_S8_GROUP: usize = 64;
/// Bytes per group: the 64 q, then f32 d and sum of each block.
pub const ACT_S8_GROUP_BYTES: usize = 80;
/// Values per decoded group ([`decode_acts`]): its 64 values d * q, then its two block sums.
pub const ACT_S8_DECODED: usize = 66;
/// Bytes quantize_s8 does not write (no q is -128, no d is negative, and no sum is expected to
/// be exactly -1.2e-38), which [`decode_acts`] reads as NaN: the harness poisons outputs with
/// them.
pub const ACT_S8_POISON: u32 = 0x8080_8080;

/// Activations (a multiple of 64 values) as quantize_s8 quantizes them, bit for bit, in its
/// layout: per 32-value block `q = round(x * (127 / amax))` (ties to even), `d = amax / 127` and
/// the sum `d * sum(q)`, with the kernel's f32 operations.
pub fn quantize_acts(x: &[f32]) -> Vec<u8> {
    let mut out = vec![0u8; x.len() / ACT_S8_GROUP * ACT_S8_GROUP_BYTES];
    for (group, x) in out
        .chunks_exact_mut(ACT_S8_GROUP_BYTES)
        .zip(x.chunks_exact(ACT_S8_GROUP))
    {
        for (b, x) in x.chunks_exact(32).enumerate() {
            let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
            let inv = if amax > 0.0 { 127.0 / amax } else { 0.0 };
            for (q, &v) in group[32 * b..][..32].iter_mut().zip(x) {
                *q = (v * inv).round_ties_even() as i8 as u8;
            }
            let q_sum: i32 = group[32 * b..][..32]
                .iter()
                .map(|&q| i32::from(q as i8))
                .sum();
            let d = amax / 127.0;
            group[64 + 8 * b..][..4].copy_from_slice(&d.to_le_bytes());
            group[68 + 8 * b..][..4].copy_from_slice(&(q_sum as f32 * d).to_le_bytes());
        }
    }
    out
}

/// [`quantize_acts`]'s layout as the activations it stands for and the block sums: per group
/// its 64 values `d * q` (exact in f64), then its two sums. A q of -128, or a d or sum with the
/// bits [`ACT_S8_POISON`], reads as NaN (bytes the kernel did not write).
pub fn decode_acts(bytes: &[u8]) -> Vec<f64> {
    let word = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let float = |bits: u32| {
        if bits == ACT_S8_POISON {
            f64::NAN
        } else {
            f64::from(f32::from_bits(bits))
        }
    };
    let mut out = Vec::with_capacity(bytes.len() / ACT_S8_GROUP_BYTES * ACT_S8_DECODED);
    for group in bytes.chunks_exact(ACT_S8_GROUP_BYTES) {
        for b in 0..2 {
            let d = float(word(&group[64 + 8 * b..]));
            out.extend(group[32 * b..][..32].iter().map(|&q| match q as i8 {
                i8::MIN => f64::NAN,
                q => d * f64::from(q),
            }));
        }
        out.extend((0..2).map(|b| float(word(&group[68 + 8 * b..]))));
    }
    out
}

/// `Y[T][N] = X[T][K] · W[N][K]^T` as the int8 kernels (gemm_q4k_s8 and the matvec_*_s8)
/// compute it from `quantize_acts(x)` and `w` quantized as `ty`, summed in f64 from exact
/// products: the quantized activations times the dequantized weights (before the weights' f32
/// rounding). Q4_K and Q5_K per activation block `d * sum(q * (d_w scale q_w)) - (dmin min) *
/// sum` (the stored sum, as the kernels take it); Q6_K, Q8_0, Q5_0, Q4_0, IQ4_NL and IQ4_XS, which
/// have no minimum, `d * sum(q * w)` (their dequantized weights are exact in f32). Its distance to
/// `gemm_xwt(x, dequantized(ty, w))` is the int8 rounding of the activations.
pub fn gemm_s8(ty: GgmlType, x: &[f32], w: &[f32], n: usize, k: usize) -> Vec<f64> {
    let decoded = decode_acts(&quantize_acts(x));
    let (values, sums): (Vec<&[f64]>, Vec<&[f64]>) = decoded
        .chunks_exact(ACT_S8_DECODED)
        .map(|g| g.split_at(ACT_S8_GROUP))
        .unzip();
    let (values, sums) = (values.concat(), sums.concat());
    match ty {
        GgmlType::Q4_K | GgmlType::Q5_K => {
            let bytes = quantize(ty, w);
            let (scaled, mins) = kquant_split_row(ty, &bytes, w.len()).expect("whole blocks");
            let main = gemm_xwt(&values, &scaled, n, k);
            let min = gemm_xwt(&sums, &mins, n, k / 32);
            main.iter().zip(min).map(|(a, b)| a - b).collect()
        }
        GgmlType::Q6_K
        | GgmlType::Q8_0
        | GgmlType::Q5_0
        | GgmlType::Q4_0
        | GgmlType::IQ4_NL
        | GgmlType::IQ4_XS => gemm_xwt(&values, &dequantized(ty, w), n, k),
        _ => unimplemented!("no int8 kernel takes {ty:?} weights"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(got: &[f64], want: &[f64]) {
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert!(
                (g - w).abs() <= 1e-12 * w.abs().max(1.0),
                "{got:?} vs {want:?}"
            );
        }
    }

    #[test]
    fn rmsnorm_scales_each_row_to_unit_rms() {
        // Row [3, 4]: mean square 12.5; row [1, 1]: 1.
        let y = rmsnorm(&[3.0, 4.0, 1.0, 1.0], &[1.0, 2.0], 0.0);
        let r = 12.5f64.sqrt();
        close(&y, &[3.0 / r, 8.0 / r, 1.0, 2.0]);
        // eps is added to the mean square.
        close(&rmsnorm(&[1.0], &[1.0], 3.0), &[0.5]);
    }

    #[test]
    fn softmax_rows_sum_to_one_and_ignore_shifts() {
        let y = softmax_rows(&[0.0, 1.0, 1000.0, 1001.0], 2);
        let e = std::f64::consts::E;
        let row = [1.0 / (1.0 + e), e / (1.0 + e)];
        close(&y, &[row[0], row[1], row[0], row[1]]);
    }

    #[test]
    fn activations() {
        assert_eq!(silu(0.0), 0.0);
        close(&[silu(1.0)], &[1.0 / (1.0 + (-1.0f64).exp())]);
        assert_eq!(gelu_tanh(0.0), 0.0);
        // Odd part cancels: gelu(x) - gelu(-x) = x.
        close(&[gelu_tanh(1.5) - gelu_tanh(-1.5)], &[1.5]);
        // Known value: gelu_tanh(1) = 0.8411919906082768.
        close(&[gelu_tanh(1.0)], &[0.841_191_990_608_276_8]);
        close(
            &zip_map(&[1.0, 2.0], &[3.0, 4.0], |a, b| a + b),
            &[4.0, 6.0],
        );
    }

    #[test]
    fn dequantized_weights_stay_within_a_quant_step() {
        let w: Vec<f32> = (0..512)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0)
            .collect();
        for (ty, step) in [
            (GgmlType::Q4_K, 0.2),
            (GgmlType::Q5_K, 0.1),
            (GgmlType::Q6_K, 0.05),
            (GgmlType::Q8_0, 0.01),
            // The largest magnitude maps to -16 steps, its negation clamps to +15.
            (GgmlType::Q5_0, 0.07),
            // -8 steps and +7.
            (GgmlType::Q4_0, 0.14),
            // Levels up to 24 steps of amax / 127 apart; the opposite end clamps by 14 steps.
            (GgmlType::IQ4_NL, 0.12),
            // Plus up to 127 steps of its scales' (amax / 127 / 32 here): (14 + 4) / 127.
            (GgmlType::IQ4_XS, 0.15),
        ] {
            assert_eq!(
                quantize(ty, &w).len(),
                512 / ty.block_size() * ty.type_size()
            );
            let d = dequantized(ty, &w);
            let worst = w
                .iter()
                .zip(&d)
                .fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
            assert!(worst < step, "{ty}: {worst}");
        }
    }

    #[test]
    fn attention_masks_causally_within_the_window_and_groups_heads() {
        // Two query heads sharing one KV head, dk = dv = 1, a query at position 2.
        let mut p = AttentionParams {
            n_head: 2,
            n_head_kv: 1,
            head_dim_k: 1,
            head_dim_v: 1,
            scale: 1.0,
            window: None,
            softcap: None,
        };
        let (k, v) = ([0.0, 0.0, 0.0, 5.0], [1.0, 2.0, 3.0, 100.0]);
        // Equal scores: the mean of the values it sees, never the future one.
        close(&attention(&[1.0, 2.0], &k, &v, 2, &p), &[2.0, 2.0]);
        p.window = Some(2);
        close(&attention(&[1.0, 2.0], &k, &v, 2, &p), &[2.5, 2.5]);
        // Keys 0 (score 0) and 1 (score ln 3 after scaling, capped at 1): weights 1 : e^c.
        let (k, v) = ([0.0, 1.0], [0.0, 1.0]);
        p.window = None;
        p.scale = 3f32.ln();
        let c = softcap(f64::from(p.scale), 1.0).exp();
        p.softcap = Some(1.0);
        let y = attention(&[1.0, 1.0], &k, &v, 1, &p);
        close(&y, &[c / (1.0 + c), c / (1.0 + c)]);
    }

    #[test]
    fn attention_partials_combine_to_attention() {
        // 3 query heads on 1 KV head, dk 3, dv 2; 4 tokens after 6 cached, window 5: slices of
        // 4 keys, the first empty for the last tokens.
        let p = AttentionParams {
            n_head: 3,
            n_head_kv: 1,
            head_dim_k: 3,
            head_dim_v: 2,
            scale: 0.7,
            window: Some(5),
            softcap: Some(2.0),
        };
        let wave = |n: usize, f: f32| (0..n).map(|i| (i as f32 * f).sin()).collect::<Vec<_>>();
        let (q, k, v) = (wave(4 * 3 * 3, 1.3), wave(10 * 3, 0.7), wave(10 * 2, 2.1));
        let parts = attention_partials(&q, &k, &v, 6, &p, 4, 10);
        let parts: Vec<f32> = parts.iter().map(|&x| x as f32).collect();
        // The last token (position 9) sees keys 5..=9: nothing in slice 0.
        let last = &parts[(3 * 3 + 2) * 3 * 4..][..4];
        assert_eq!(last, [0.0; 4]);
        let got = combine_partials(&parts, 2, 3);
        let want = attention(&q, &k, &v, 6, &p);
        assert!(got.iter().zip(&want).all(|(a, b)| (a - b).abs() < 1e-6));
    }

    #[test]
    fn rope_rotates_pairs_and_keeps_the_tail() {
        // One head of 5 dims, 2 rotated pairs, a quarter and half turn.
        let x = [1.0, 2.0, 3.0, 4.0, 5.0];
        let (sin, cos) = ([1.0, 0.0], [0.0, -1.0]);
        close(
            &rope(&x, &sin, &cos, 1, 5, false),
            &[-2.0, 1.0, -3.0, -4.0, 5.0],
        );
        close(
            &rope(&x, &sin, &cos, 1, 5, true),
            &[-3.0, -2.0, 1.0, -4.0, 5.0],
        );
        close(
            &embed(&[1.0, 2.0, 3.0, 4.0], &[1.0, 0.0, 1.0], 2, 0.5),
            &[1.5, 2.0, 0.5, 1.0, 1.5, 2.0],
        );
    }

    #[test]
    fn gemm_multiplies_by_the_transposed_weight() {
        // X = [[1, 2], [3, 4], [5, 6]], W = [[1, 0], [1, 1]] (N = 2 rows of K = 2).
        let y = gemm_xwt(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[1.0, 0.0, 1.0, 1.0], 2, 2);
        close(&y, &[1.0, 3.0, 3.0, 7.0, 5.0, 11.0]);
    }

    #[test]
    fn activations_quantize_within_half_a_step_and_sum_their_quantized_values() {
        // One block with a zero and a tie (0.5 * 127 / 127), one of zeros.
        let mut x: Vec<f32> = (0..32).map(|i| (i as f32 - 15.5) / 8.0).collect();
        x[3] = 0.0;
        x.extend([0.0; 32]);
        let decoded = decode_acts(&quantize_acts(&x));
        assert_eq!(decoded.len(), ACT_S8_DECODED);
        let d = 15.5 / 8.0 / 127.0;
        for (got, &want) in decoded.iter().zip(&x) {
            assert!(
                (got - f64::from(want)).abs() <= d / 2.0 + 1e-9,
                "{got} {want}"
            );
        }
        // The sums are those of the quantized values.
        let sum: f64 = decoded[..32].iter().sum();
        assert!((decoded[64] - sum).abs() <= 1e-6 * sum.abs());
        assert_eq!(decoded[65], 0.0);
        assert!(decoded[32..64].iter().all(|&v| v == 0.0));
        // The extremes reach +-127 exactly.
        let bytes = quantize_acts(&x);
        assert_eq!((bytes[0] as i8, bytes[31] as i8), (-127, 127));
        // Poisoned bytes read as NaN.
        let poison = ACT_S8_POISON.to_le_bytes().repeat(ACT_S8_GROUP_BYTES / 4);
        assert!(decode_acts(&poison).iter().all(|v| v.is_nan()));
    }

    #[test]
    fn int8_q4k_gemm_reference_is_the_quantized_activations_times_the_weights() {
        let (t, n, k) = (2, 3, 256);
        let x: Vec<f32> = (0..t * k)
            .map(|i| ((i * 37 % 255) as f32 - 127.0) / 64.0)
            .collect();
        let w: Vec<f32> = (0..n * k)
            .map(|i| ((i * 53 % 97) as f32 - 48.0) / 50.0)
            .collect();
        let quantized: Vec<f64> = decode_acts(&quantize_acts(&x))
            .chunks(ACT_S8_DECODED)
            .flat_map(|g| g[..ACT_S8_GROUP].to_vec())
            .collect();
        // The dequantized weights round once more than the reference's exact products.
        let want = gemm_xwt(&quantized, &dequantized(GgmlType::Q4_K, &w), n, k);
        let got = gemm_s8(GgmlType::Q4_K, &x, &w, n, k);
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-6 * w.abs().max(1.0), "{g} {w}");
        }
    }
}
