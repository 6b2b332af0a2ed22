//! Each op against a naive, obviously-correct implementation on random inputs.

use super::*;
use crate::backend::{AttentionParams, RopeStyle, RopeTable};
use crate::sampler::Rng;

fn random(rng: &mut Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.next_signed_f32()).collect()
}

fn assert_close(a: &[f32], b: &[f32], tol: f32) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= tol * (1.0 + y.abs()),
            "index {i}: {x} vs {y}"
        );
    }
}

#[test]
fn dot_matches_naive() {
    let mut rng = Rng::new(1);
    for n in [0, 1, 7, 8, 9, 100, 1031] {
        let (a, b) = (random(&mut rng, n), random(&mut rng, n));
        let naive: f64 = a
            .iter()
            .zip(&b)
            .map(|(x, y)| f64::from(*x) * f64::from(*y))
            .sum();
        assert!((f64::from(dot(&a, &b)) - naive).abs() < 1e-4, "n = {n}");
    }
}

#[test]
fn linear_matches_naive_for_one_and_many_tokens() {
    let mut rng = Rng::new(2);
    let (out_dim, in_dim) = (37, 19);
    let w = random(&mut rng, out_dim * in_dim);
    let b = random(&mut rng, out_dim);
    let lin = Linear::new(out_dim, in_dim, w.clone(), Some(b.clone()));
    for n_tokens in [1, 5] {
        let x = random(&mut rng, n_tokens * in_dim);
        let mut naive = vec![0f32; n_tokens * out_dim];
        for t in 0..n_tokens {
            for o in 0..out_dim {
                naive[t * out_dim + o] = b[o]
                    + (0..in_dim)
                        .map(|i| w[o * in_dim + i] * x[t * in_dim + i])
                        .sum::<f32>();
            }
        }
        assert_close(&lin.forward(&x), &naive, 1e-5);
    }
}

#[test]
fn rms_norm_matches_naive() {
    let mut rng = Rng::new(3);
    let (rows, n) = (3, 16);
    let x = random(&mut rng, rows * n);
    let w = random(&mut rng, n);
    let mut y = x.clone();
    rms_norm(&mut y, &w, 1e-6);
    for r in 0..rows {
        let row = &x[r * n..(r + 1) * n];
        let rms = (row.iter().map(|v| v * v).sum::<f32>() / n as f32 + 1e-6).sqrt();
        let naive: Vec<f32> = row.iter().zip(&w).map(|(v, w)| v / rms * w).collect();
        assert_close(&y[r * n..(r + 1) * n], &naive, 1e-5);
    }
}

#[test]
fn softmax_and_activations() {
    let mut x = vec![1.0, 2.0, 3.0, 1000.0];
    softmax(&mut x);
    assert_close(&x, &[0.0, 0.0, 0.0, 1.0], 1e-6);
    let mut x = vec![0.5f32, -1.0, 2.0];
    let e: Vec<f32> = x.iter().map(|v| v.exp()).collect();
    let s: f32 = e.iter().sum();
    softmax(&mut x);
    assert_close(&x, &e.iter().map(|v| v / s).collect::<Vec<_>>(), 1e-6);

    // Reference values of the tanh-approximated GELU and of SiLU.
    assert_close(
        &[
            gelu_tanh(-3.0),
            gelu_tanh(-0.5),
            gelu_tanh(0.0),
            gelu_tanh(1.0),
            gelu_tanh(2.5),
        ],
        &[-0.003_637_392, -0.154_286, 0.0, 0.841_192, 2.484_919],
        1e-6,
    );
    assert_close(
        &[silu(-2.0), silu(0.0), silu(3.0)],
        &[-0.238_406, 0.0, 2.857_722],
        1e-6,
    );

    let mut y = vec![-100.0, 0.0, 3.0];
    softcap(&mut y, 30.0);
    assert_close(
        &y,
        &[-30.0 * (100.0f32 / 30.0).tanh(), 0.0, 30.0 * 0.1f32.tanh()],
        1e-6,
    );
}

/// Rope by its definition: pair `(a, b)` of rotation `i` turned by the angle `theta(i)`.
fn naive_rope(
    x: &mut [f32],
    head_dim: usize,
    style: RopeStyle,
    n_rot: usize,
    theta: impl Fn(usize) -> f64,
) {
    for head in x.chunks_exact_mut(head_dim) {
        for i in 0..n_rot / 2 {
            let (a, b) = match style {
                RopeStyle::Normal => (2 * i, 2 * i + 1),
                RopeStyle::Neox => (i, i + n_rot / 2),
            };
            let (s, c) = (theta(i).sin() as f32, theta(i).cos() as f32);
            let (x0, x1) = (head[a], head[b]);
            head[a] = x0 * c - x1 * s;
            head[b] = x0 * s + x1 * c;
        }
    }
}

#[test]
fn rope_matches_naive_for_both_styles() {
    let mut rng = Rng::new(4);
    let (head_dim, n_heads, n_rot) = (8, 3, 6); // partial rotation leaves dims 6..8 alone
    let factors = [1.0, 2.0, 4.0];
    for style in [RopeStyle::Normal, RopeStyle::Neox] {
        let table = RopeTable::new(style, n_rot, 500.0, 0.5, Some(&factors));
        let positions = [0, 3, 1000];
        let x = random(&mut rng, positions.len() * n_heads * head_dim);
        let mut y = x.clone();
        rope(&mut y, head_dim, &positions, &table);
        for (t, &pos) in positions.iter().enumerate() {
            let row = t * n_heads * head_dim..(t + 1) * n_heads * head_dim;
            let mut naive = x[row.clone()].to_vec();
            naive_rope(&mut naive, head_dim, style, n_rot, |i| {
                pos as f64 * 0.5 * 500f64.powf(-2.0 * i as f64 / n_rot as f64)
                    / f64::from(factors[i])
            });
            assert_close(&y[row], &naive, 1e-5);
        }
    }
}

/// Attention by its definition: a full score matrix with an explicit mask.
fn naive_attention(q: &[f32], k: &[f32], v: &[f32], start: usize, p: &AttentionParams) -> Vec<f32> {
    let n_tokens = q.len() / (p.n_head * p.head_dim_k);
    let n_keys = start + n_tokens;
    let mut out = vec![0f32; n_tokens * p.n_head * p.head_dim_v];
    for t in 0..n_tokens {
        let pos = start + t;
        for h in 0..p.n_head {
            let g = h * p.n_head_kv / p.n_head;
            let qh = &q[(t * p.n_head + h) * p.head_dim_k..][..p.head_dim_k];
            let mut scores: Vec<f32> = (0..n_keys)
                .map(|j| {
                    let masked = j > pos || p.window.is_some_and(|w| pos - j >= w);
                    if masked {
                        return f32::NEG_INFINITY;
                    }
                    let kj = &k[(j * p.n_head_kv + g) * p.head_dim_k..][..p.head_dim_k];
                    let s = qh.iter().zip(kj).map(|(a, b)| a * b).sum::<f32>() * p.scale;
                    p.softcap.map_or(s, |c| c * (s / c).tanh())
                })
                .collect();
            softmax(&mut scores);
            for (j, w) in scores.iter().enumerate() {
                let vj = &v[(j * p.n_head_kv + g) * p.head_dim_v..][..p.head_dim_v];
                for d in 0..p.head_dim_v {
                    out[(t * p.n_head + h) * p.head_dim_v + d] += w * vj[d];
                }
            }
        }
    }
    out
}

#[test]
fn attention_matches_naive_with_gqa_window_and_softcap() {
    let mut rng = Rng::new(5);
    let cases = [
        (None, None),
        (Some(3), None),
        (None, Some(2.0)),
        (Some(1), Some(5.0)),
    ];
    for (window, softcap) in cases {
        let p = AttentionParams {
            n_head: 6,
            n_head_kv: 2,
            head_dim_k: 8,
            head_dim_v: 4,
            scale: 0.7,
            window,
            softcap,
        };
        let (start, n_tokens) = (4, 5);
        let n_keys = start + n_tokens;
        let q = random(&mut rng, n_tokens * p.n_head * p.head_dim_k);
        let k = random(&mut rng, n_keys * p.n_head_kv * p.head_dim_k);
        let v = random(&mut rng, n_keys * p.n_head_kv * p.head_dim_v);
        let got = attention(&q, &k, &v, start, &p);
        assert_close(&got, &naive_attention(&q, &k, &v, start, &p), 1e-5);
    }
}
