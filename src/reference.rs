//! CPU references for the engine's kernels, computed in f64 from the same f32 inputs, so that a
//! kernel's error is measured against the exact result rather than another f32 implementation.

use rayon::prelude::*;

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
pub fn gemm_xwt(x: &[f32], w: &[f32], n: usize, k: usize) -> Vec<f64> {
    let mut y = vec![0.0; x.len() / k * n];
    y.par_chunks_mut(n)
        .zip(x.par_chunks(k))
        .for_each(|(y_row, x_row)| {
            for (out, w_row) in y_row.iter_mut().zip(w.chunks(k)) {
                *out = x_row
                    .iter()
                    .zip(w_row)
                    .map(|(&a, &b)| f64::from(a) * f64::from(b))
                    .sum();
            }
        });
    y
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
    fn gemm_multiplies_by_the_transposed_weight() {
        // X = [[1, 2], [3, 4], [5, 6]], W = [[1, 0], [1, 1]] (N = 2 rows of K = 2).
        let y = gemm_xwt(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[1.0, 0.0, 1.0, 1.0], 2, 2);
        close(&y, &[1.0, 3.0, 3.0, 7.0, 5.0, 11.0]);
    }
}
