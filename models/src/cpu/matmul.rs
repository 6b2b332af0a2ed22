//! Dense f32 linear layers.

use rayon::prelude::*;

use super::ops::{add_in_place, dot};

/// A weight matrix dequantized to f32, row-major `[out][in]`, so `y = W x` is one dot per row.
#[derive(Clone, Debug)]
pub struct Linear {
    out_dim: usize,
    in_dim: usize,
    weight: Vec<f32>,
    bias: Option<Vec<f32>>,
}

impl Linear {
    /// Panics if `weight` is not `out_dim * in_dim` long or `bias` not `out_dim`: the loader
    /// checks shapes before building layers, so a mismatch here is a bug.
    pub fn new(out_dim: usize, in_dim: usize, weight: Vec<f32>, bias: Option<Vec<f32>>) -> Self {
        assert_eq!(weight.len(), out_dim * in_dim, "weight shape");
        assert!(
            bias.as_ref().is_none_or(|b| b.len() == out_dim),
            "bias shape"
        );
        Self {
            out_dim,
            in_dim,
            weight,
            bias,
        }
    }

    pub fn out_dim(&self) -> usize {
        self.out_dim
    }

    pub fn in_dim(&self) -> usize {
        self.in_dim
    }

    /// Row `i` of the weight: an embedding lookup when the matrix is a token embedding.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.weight[i * self.in_dim..(i + 1) * self.in_dim]
    }

    /// `y[t] = W x[t] + b` for each of the `x.len() / in_dim` tokens; returns `[tokens][out]`.
    pub fn forward(&self, x: &[f32]) -> Vec<f32> {
        debug_assert_eq!(x.len() % self.in_dim, 0);
        let n_tokens = x.len() / self.in_dim;
        let rows = self.weight.par_chunks_exact(self.in_dim).with_min_len(16);
        let mut y = if n_tokens == 1 {
            rows.map(|w| dot(w, x)).collect()
        } else {
            // Row-outer, token-inner: each weight row is read from memory once and reused from
            // L1 for every token; the result comes out transposed.
            let mut y_t = vec![0f32; self.out_dim * n_tokens];
            y_t.par_chunks_exact_mut(n_tokens)
                .zip(rows)
                .for_each(|(out, w)| {
                    for (o, xt) in out.iter_mut().zip(x.chunks_exact(self.in_dim)) {
                        *o = dot(w, xt);
                    }
                });
            transpose(&y_t, self.out_dim, n_tokens)
        };
        if let Some(b) = &self.bias {
            y.chunks_exact_mut(self.out_dim)
                .for_each(|row| add_in_place(row, b));
        }
        y
    }
}

/// Transposes a row-major `[rows][cols]` matrix.
fn transpose(m: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut t = vec![0f32; m.len()];
    for (r, row) in m.chunks_exact(cols).enumerate() {
        for (c, &v) in row.iter().enumerate() {
            t[c * rows + r] = v;
        }
    }
    t
}
