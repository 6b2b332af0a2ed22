//! Mixture of experts: a router picks `n_used` of `n_expert` gated FFNs per token and mixes their
//! outputs by the routing weights.

use rayon::prelude::*;

use super::ops::softmax;
use super::Cpu;
use crate::arch::GatedFfn;
use crate::backend::{Gating, Result, Router};

/// One token's routing decision.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Route {
    pub expert: usize,
    pub weight: f32,
}

impl Router {
    /// The selected experts of each token, best first: `[tokens][n_used]` from router logits
    /// `[tokens][n_expert]`.
    pub fn route(&self, logits: &[f32], n_expert: usize) -> Vec<Route> {
        debug_assert!(self.n_used <= n_expert && logits.len().is_multiple_of(n_expert));
        let mut routes = Vec::with_capacity(logits.len() / n_expert * self.n_used);
        for row in logits.chunks_exact(n_expert) {
            let mut probs = row.to_vec();
            if self.gating == Gating::SoftmaxTopK {
                softmax(&mut probs);
            }
            // Stable sort: ties go to the lower expert index, deterministically.
            let mut order: Vec<usize> = (0..n_expert).collect();
            order.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]));
            let mut weights: Vec<f32> = order[..self.n_used].iter().map(|&e| probs[e]).collect();
            if self.gating == Gating::TopKSoftmax {
                softmax(&mut weights);
            }
            if self.normalize {
                // llama.cpp clamps the sum to the smallest normal f16 to avoid dividing by zero.
                let sum = weights.iter().sum::<f32>().max(6.103_515_6e-5);
                weights.iter_mut().for_each(|w| *w /= sum);
            }
            routes.extend(order.iter().zip(&weights).map(|(&expert, &w)| Route {
                expert,
                weight: w * self.scale,
            }));
        }
        routes
    }
}

/// The routed experts of one layer, dequantized.
pub struct Experts {
    pub(crate) ffns: Vec<GatedFfn<Cpu>>,
}

impl Experts {
    /// `sum_k weight_k * expert_k(x)` per token of `x` (`[tokens][n_embd]`), routed by
    /// `router` from `logits` (`[tokens][n_expert]`).
    pub fn forward(
        &self,
        cpu: &Cpu,
        x: &[f32],
        logits: &[f32],
        router: &Router,
    ) -> Result<Vec<f32>> {
        let n_expert = self.ffns.len();
        let n_embd = x.len() / (logits.len() / n_expert);
        let routes = router.route(logits, n_expert);
        // Group the tokens by expert so that each expert's weights are read once per call.
        let mut by_expert: Vec<Vec<(usize, f32)>> = vec![Vec::new(); n_expert];
        for (i, r) in routes.iter().enumerate() {
            by_expert[r.expert].push((i / router.n_used, r.weight));
        }
        let partial: Vec<(usize, Vec<f32>)> = by_expert
            .par_iter()
            .enumerate()
            .filter(|(_, toks)| !toks.is_empty())
            .map(|(e, toks)| {
                let xs: Vec<f32> = toks
                    .iter()
                    .flat_map(|&(t, _)| &x[t * n_embd..(t + 1) * n_embd])
                    .copied()
                    .collect();
                Ok((e, self.ffns[e].forward(cpu, &xs)?))
            })
            .collect::<Result<_>>()?;
        let mut out = vec![0f32; x.len()];
        for (e, y) in &partial {
            for (&(t, w), row) in by_expert[*e].iter().zip(y.chunks_exact(n_embd)) {
                out[t * n_embd..(t + 1) * n_embd]
                    .iter_mut()
                    .zip(row)
                    .for_each(|(o, v)| *o += w * v);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::GateUp;
    use crate::backend::Activation;
    use crate::cpu::Linear;

    fn router(gating: Gating, normalize: bool, scale: f32) -> Router {
        Router {
            n_used: 2,
            gating,
            normalize,
            scale,
        }
    }

    fn weights(routes: &[Route]) -> Vec<(usize, f32)> {
        routes
            .iter()
            .map(|r| (r.expert, (r.weight * 1e4).round() / 1e4))
            .collect()
    }

    #[test]
    fn routing_variants() {
        // Probabilities of logits ln[1, 2, 3, 4]: [0.1, 0.2, 0.3, 0.4].
        let logits: Vec<f32> = [1f32, 2.0, 3.0, 4.0].iter().map(|p| p.ln()).collect();
        let route = |r: Router| weights(&r.route(&logits, 4));
        assert_eq!(
            route(router(Gating::SoftmaxTopK, false, 1.0)),
            [(3, 0.4), (2, 0.3)]
        );
        assert_eq!(
            route(router(Gating::SoftmaxTopK, true, 2.0)),
            [(3, 1.1429), (2, 0.8571)] // 2 * [4, 3] / 7
        );
        assert_eq!(
            route(router(Gating::TopKSoftmax, false, 1.0)),
            [(3, 0.5714), (2, 0.4286)]
        );
    }

    #[test]
    fn experts_mix_outputs_by_weight() {
        // Expert e scales its input by e + 1 (gate and down identity-like, up constant).
        let n = 2;
        let identity: Vec<f32> = (0..n * n).map(|i| f32::from(i % (n + 1) == 0)).collect();
        let ffn = |e: usize| GatedFfn {
            gate_up: GateUp::Separate {
                gate: Linear::new(n, n, identity.iter().map(|v| v * 50.0).collect(), None),
                up: Linear::new(n, n, vec![0.0; n * n], Some(vec![(e + 1) as f32 / 50.0; n])),
            },
            down: Linear::new(n, n, identity.clone(), None),
            activation: Activation::Silu,
        };
        let experts = Experts {
            ffns: (0..3).map(ffn).collect(),
        };
        let cpu = Cpu {
            cache: crate::kv_cache::KvCache::new([]),
        };
        // Token 0 picks experts 2 and 1 equally, token 1 experts 0 and 1.
        let logits = [0.0, 5.0, 5.0, 5.0, 5.0, 0.0];
        let x = [1.0, 2.0, 3.0, 4.0];
        let routing = router(Gating::SoftmaxTopK, true, 1.0);
        let y = experts.forward(&cpu, &x, &logits, &routing).unwrap();
        // silu(50 x) ≈ 50 x for these inputs, so expert e gives (e + 1) x.
        let expected = [2.5, 5.0, 4.5, 6.0];
        for (a, b) in y.iter().zip(expected) {
            assert!((a - b).abs() < 1e-3, "{y:?}");
        }
    }
}
