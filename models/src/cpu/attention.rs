//! Scaled dot-product attention over a KV cache.

use rayon::prelude::*;

use super::ops::{dot, softcap, softmax};
use crate::backend::AttentionParams;

/// Causal attention of `q` (`[tokens][n_head * head_dim_k]`, token `t` at position `start + t`)
/// over the cached keys and values of positions `0..start + tokens` (`k`: `[pos][n_head_kv *
/// head_dim_k]`, `v`: `[pos][n_head_kv * head_dim_v]`). Returns `[tokens][n_head * head_dim_v]`.
pub fn attention(q: &[f32], k: &[f32], v: &[f32], start: usize, p: &AttentionParams) -> Vec<f32> {
    let n_tokens = q.len() / (p.n_head * p.head_dim_k);
    let (k_row, v_row) = (p.n_head_kv * p.head_dim_k, p.n_head_kv * p.head_dim_v);
    debug_assert_eq!(k.len(), (start + n_tokens) * k_row);
    debug_assert_eq!(v.len(), (start + n_tokens) * v_row);
    let group = p.n_head / p.n_head_kv;

    let mut out = vec![0f32; n_tokens * p.n_head * p.head_dim_v];
    out.par_chunks_exact_mut(p.head_dim_v)
        .enumerate()
        .for_each(|(i, o)| {
            let (t, h) = (i / p.n_head, i % p.n_head);
            let pos = start + t;
            let first = p.window.map_or(0, |w| (pos + 1).saturating_sub(w));
            let qh = &q[i * p.head_dim_k..(i + 1) * p.head_dim_k];
            let kv_h = h / group;
            let mut scores: Vec<f32> = (first..=pos)
                .map(|j| {
                    let kj = &k[j * k_row + kv_h * p.head_dim_k..][..p.head_dim_k];
                    dot(qh, kj) * p.scale
                })
                .collect();
            if let Some(cap) = p.softcap {
                softcap(&mut scores, cap);
            }
            softmax(&mut scores);
            for (j, &w) in (first..=pos).zip(&scores) {
                let vj = &v[j * v_row + kv_h * p.head_dim_v..][..p.head_dim_v];
                o.iter_mut().zip(vj).for_each(|(a, b)| *a += w * b);
            }
        });
    out
}
