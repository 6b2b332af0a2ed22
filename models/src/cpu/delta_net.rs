//! The gated delta net (Qwen 3.5's linear attention) in its recurrent form, token by token: the
//! obviously-correct reference for chunked and fused kernels. Its causal convolution and the
//! delta rule both carry state across calls, so decoding one token at a time equals a prefill.

use rayon::prelude::*;

use super::ops::{dot, sigmoid, silu};
use crate::backend::{DeltaNetShape, DeltaNetStep};
use crate::kv_cache::RecurrentState;

/// Causal depthwise convolution over time of `x` (`[tokens][channels]`) with `weight`
/// (`[channels][kernel]`, oldest tap first): `out[t][c] = sum_j weight[c][j] * in[t + j][c]`
/// where `in` is `state` (the `kernel - 1` inputs before `x`, `[kernel - 1][channels]`, oldest
/// first) followed by `x`. Leaves the last `kernel - 1` inputs in `state`.
pub fn causal_conv1d(x: &[f32], weight: &[f32], kernel: usize, state: &mut [f32]) -> Vec<f32> {
    let channels = weight.len() / kernel;
    debug_assert_eq!(state.len(), (kernel - 1) * channels);
    let input: Vec<f32> = state.iter().chain(x).copied().collect();
    let n_tokens = x.len() / channels;
    let mut out = vec![0f32; x.len()];
    for (t, row) in out.chunks_exact_mut(channels).enumerate() {
        for (c, o) in row.iter_mut().enumerate() {
            let taps = &weight[c * kernel..(c + 1) * kernel];
            *o = taps
                .iter()
                .enumerate()
                .map(|(j, w)| w * input[(t + j) * channels + c])
                .sum();
        }
    }
    state.copy_from_slice(&input[n_tokens * channels..]);
    out
}

/// `x / sqrt(sum(x²) + eps)` for each `n`-long row of `x`, in place (how llama.cpp
/// L2-normalizes delta-net queries and keys).
pub fn l2_norm(x: &mut [f32], n: usize, eps: f32) {
    for row in x.chunks_exact_mut(n) {
        let sum_sq: f64 = row.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
        let scale = (1.0 / (sum_sq + f64::from(eps)).sqrt()) as f32;
        row.iter_mut().for_each(|v| *v *= scale);
    }
}

/// The gated delta rule over `q`, `k` (`[tokens][n_k_heads * head_dim]`, L2-normalized), `v`
/// (`[tokens][n_v_heads * head_dim]`), log-decays `g` and write strengths `beta`
/// (`[tokens][n_v_heads]`). For each value head, with state `S` (`[v][k]`) and each token:
///
/// `S = exp(g) S;  d = beta (v - S k);  S = S + d kᵀ;  o = S q / sqrt(head_dim)`.
///
/// Returns `o` as `[tokens][n_v_heads * head_dim]` and leaves the last `S` in `state`.
pub fn gated_delta_rule(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    g: &[f32],
    beta: &[f32],
    state: &mut [f32],
    shape: DeltaNetShape,
) -> Vec<f32> {
    let DeltaNetShape {
        n_k_heads,
        n_v_heads,
        head_dim: d,
    } = shape;
    debug_assert_eq!(state.len(), shape.state_len());
    let n_tokens = g.len() / n_v_heads;
    let scale = 1.0 / (d as f32).sqrt();
    let (k_row, v_row) = (n_k_heads * d, n_v_heads * d);
    // Heads are independent: each runs its own recurrence into its own output columns.
    let per_head: Vec<Vec<f32>> = state
        .par_chunks_exact_mut(d * d)
        .enumerate()
        .map(|(h, s)| {
            let hk = h % n_k_heads;
            let mut out = vec![0f32; n_tokens * d];
            let mut delta = vec![0f32; d];
            for (t, o) in out.chunks_exact_mut(d).enumerate() {
                let qt = &q[t * k_row + hk * d..][..d];
                let kt = &k[t * k_row + hk * d..][..d];
                let vt = &v[t * v_row + h * d..][..d];
                let decay = g[t * n_v_heads + h].exp();
                s.iter_mut().for_each(|x| *x *= decay);
                for (j, dj) in delta.iter_mut().enumerate() {
                    *dj = (vt[j] - dot(&s[j * d..(j + 1) * d], kt)) * beta[t * n_v_heads + h];
                }
                for (row, dj) in s.chunks_exact_mut(d).zip(&delta) {
                    row.iter_mut().zip(kt).for_each(|(x, ki)| *x += dj * ki);
                }
                for (j, oj) in o.iter_mut().enumerate() {
                    *oj = dot(&s[j * d..(j + 1) * d], qt) * scale;
                }
            }
            out
        })
        .collect();
    let mut out = vec![0f32; n_tokens * v_row];
    for (h, o) in per_head.iter().enumerate() {
        for (t, ot) in o.chunks_exact(d).enumerate() {
            out[t * v_row + h * d..][..d].copy_from_slice(ot);
        }
    }
    out
}

/// One delta-net call (see [`DeltaNetStep`]) from `state`, which it advances.
pub fn delta_net_step(
    step: &DeltaNetStep<'_, Vec<f32>, Vec<f32>>,
    state: &mut RecurrentState,
) -> Vec<f32> {
    let DeltaNetShape {
        n_k_heads,
        n_v_heads,
        head_dim: d,
    } = step.shape;
    let channels = step.shape.channels();
    let beta: Vec<f32> = step.beta.iter().map(|&v| sigmoid(v)).collect();
    let mut g = step.alpha.clone();
    for row in g.chunks_exact_mut(n_v_heads) {
        for ((v, b), a) in row.iter_mut().zip(step.dt_bias).zip(step.a) {
            *v = softplus(*v + b) * a;
        }
    }
    let mut mixed = causal_conv1d(step.qkv, step.conv, step.kernel, &mut state.conv);
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
    l2_norm(&mut q, d, step.eps);
    l2_norm(&mut k, d, step.eps);
    gated_delta_rule(&q, &k, &v, &g, &beta, &mut state.ssm, step.shape)
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
    use super::*;
    use crate::sampler::Rng;

    fn random(rng: &mut Rng, n: usize) -> Vec<f32> {
        (0..n).map(|_| rng.next_signed_f32()).collect()
    }

    fn assert_close(a: &[f32], b: &[f32]) {
        assert_eq!(a.len(), b.len());
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(
                (x - y).abs() <= 1e-5 * (1.0 + y.abs()),
                "index {i}: {x} vs {y}"
            );
        }
    }

    #[test]
    fn conv1d_by_definition_and_in_pieces() {
        // One channel, taps [1, 2, 3]: out[t] = x[t-2] + 2 x[t-1] + 3 x[t], zeros before.
        let mut state = vec![0.0; 2];
        let out = causal_conv1d(&[1.0, 10.0, 100.0], &[1.0, 2.0, 3.0], 3, &mut state);
        assert_eq!(out, [3.0, 32.0, 321.0]);
        assert_eq!(state, [10.0, 100.0]);

        let mut rng = Rng::new(7);
        let (channels, kernel, n_tokens) = (5, 4, 7);
        let w = random(&mut rng, channels * kernel);
        let x = random(&mut rng, n_tokens * channels);
        let mut whole_state = vec![0.0; (kernel - 1) * channels];
        let whole = causal_conv1d(&x, &w, kernel, &mut whole_state);
        let mut state = vec![0.0; (kernel - 1) * channels];
        let mut pieces = Vec::new();
        for part in [
            &x[..channels],
            &x[channels..3 * channels],
            &x[3 * channels..],
        ] {
            pieces.extend(causal_conv1d(part, &w, kernel, &mut state));
        }
        assert_close(&pieces, &whole);
        assert_eq!(state, whole_state);
    }

    #[test]
    fn l2_norm_gives_unit_rows() {
        let mut x = vec![3.0, 4.0, 0.0, 0.0, 1.0, 0.0];
        l2_norm(&mut x, 3, 0.0);
        assert_close(&x, &[0.6, 0.8, 0.0, 0.0, 1.0, 0.0]);
    }

    #[test]
    fn delta_rule_by_definition_and_in_pieces() {
        // From a zero state with no decay and beta = 1, one token stores v kᵀ and reads back
        // v (k·q) / sqrt(d).
        let shape = DeltaNetShape {
            n_k_heads: 1,
            n_v_heads: 1,
            head_dim: 2,
        };
        let mut s = vec![0.0; 4];
        let o = gated_delta_rule(
            &[1.0, 0.0],
            &[0.6, 0.8],
            &[2.0, 3.0],
            &[0.0],
            &[1.0],
            &mut s,
            shape,
        );
        assert_close(&o, &[2.0 * 0.6 / 2f32.sqrt(), 3.0 * 0.6 / 2f32.sqrt()]);
        assert_close(&s, &[1.2, 1.6, 1.8, 2.4]);

        // Value heads share key heads; splitting the tokens over calls changes nothing.
        let mut rng = Rng::new(8);
        let shape = DeltaNetShape {
            n_k_heads: 2,
            n_v_heads: 4,
            head_dim: 3,
        };
        let n = 6;
        let mut q = random(&mut rng, n * 6);
        let mut k = random(&mut rng, n * 6);
        l2_norm(&mut q, 3, 1e-6);
        l2_norm(&mut k, 3, 1e-6);
        let v = random(&mut rng, n * 12);
        let g: Vec<f32> = random(&mut rng, n * 4).iter().map(|x| x - 1.0).collect();
        let beta: Vec<f32> = random(&mut rng, n * 4).iter().map(|x| x.abs()).collect();
        let mut whole_state = vec![0.0; shape.state_len()];
        let whole = gated_delta_rule(&q, &k, &v, &g, &beta, &mut whole_state, shape);
        let mut state = vec![0.0; shape.state_len()];
        let mut pieces = Vec::new();
        for (a, b) in [(0, 1), (1, 4), (4, 6)] {
            pieces.extend(gated_delta_rule(
                &q[a * 6..b * 6],
                &k[a * 6..b * 6],
                &v[a * 12..b * 12],
                &g[a * 4..b * 4],
                &beta[a * 4..b * 4],
                &mut state,
                shape,
            ));
        }
        assert_close(&pieces, &whole);
        assert_close(&state, &whole_state);
    }
}
