//! The CPU reference backend: every op in f32 (f64 in long reductions).
//!
//! Every architecture in [`crate::arch`] runs on these ops through [`Cpu`]; the GPU kernels
//! are checked against them, so they favour clarity and exactness over speed, with rayon for
//! the two hot spots: matrix products and attention.

mod attention;
mod delta_net;
mod matmul;
mod moe;
mod ops;

pub use attention::attention;
pub use delta_net::{causal_conv1d, gated_delta_rule, l2_norm};
pub use matmul::Linear;
pub use moe::{Experts, Route};
pub use ops::{
    add_in_place, dot, gelu_tanh, rms_norm, rms_norm_unit, rope, sigmoid, silu, softcap, softmax,
};

use delta_net::delta_net_step;

use crate::arch::{GateUp, GatedFfn};
use crate::backend::{
    Activation, AttentionParams, Backend, DeltaNetStep, ExpertMatrices, HostExperts, HostMatrix,
    Result, RopeTable, Router,
};
use crate::config::Config;
use crate::kv_cache::KvCache;

/// The CPU backend: weights dequantized to f32 at load, activations in `Vec<f32>`, and the
/// model's KV cache.
pub struct Cpu {
    cache: KvCache,
}

impl Cpu {
    /// A backend with an empty cache shaped for `config`.
    pub fn new(config: &Config) -> Self {
        let cache = KvCache::new((0..config.n_layer).map(|il| {
            let n_head_kv = config.n_head_kv_at(il);
            (
                n_head_kv * config.head_dim_k_at(il),
                n_head_kv * config.head_dim_v_at(il),
            )
        }));
        Self { cache }
    }
}

/// Each expert's `[out][in]` matrix, scaled by its entry of `scales` where given.
fn expert_matrices(m: &ExpertMatrices<'_>, n_expert: usize) -> Result<Vec<Linear>> {
    let (out, inp) = (m.weights.rows / n_expert, m.weights.cols);
    let all = m.weights.to_f32()?;
    Ok(all
        .chunks_exact(out * inp)
        .enumerate()
        .map(|(e, w)| {
            let s = m.scales.as_ref().map_or(1.0, |s| s[e]);
            Linear::new(out, inp, w.iter().map(|v| v * s).collect(), None)
        })
        .collect())
}

impl Backend for Cpu {
    type Tensor = Vec<f32>;
    type Matrix = Linear;
    type Vector = Vec<f32>;
    type Experts = Experts;

    fn matrix(&self, m: HostMatrix<'_>, bias: Option<Vec<f32>>) -> Result<Linear> {
        Ok(Linear::new(m.rows, m.cols, m.to_f32()?, bias))
    }

    fn vector(&self, v: Vec<f32>) -> Result<Vec<f32>> {
        Ok(v)
    }

    fn experts(&self, e: HostExperts<'_>, activation: Activation) -> Result<Experts> {
        let gates = expert_matrices(&e.gate, e.n_expert)?;
        let ups = expert_matrices(&e.up, e.n_expert)?;
        let downs = expert_matrices(&e.down, e.n_expert)?;
        let ffns = gates
            .into_iter()
            .zip(ups)
            .zip(downs)
            .map(|((gate, up), down)| GatedFfn {
                gate_up: GateUp::Separate { gate, up },
                down,
                activation,
            })
            .collect();
        Ok(Experts { ffns })
    }

    fn cached(&self) -> usize {
        self.cache.len()
    }

    fn can_truncate(&self, len: usize) -> bool {
        self.cache.can_truncate(len)
    }

    fn truncate(&mut self, len: usize) {
        self.cache.truncate(len);
    }

    fn embed(&self, table: &Linear, tokens: &[u32], scale: f32) -> Result<Vec<f32>> {
        let mut x = Vec::with_capacity(tokens.len() * table.in_dim());
        for &t in tokens {
            x.extend(table.row(t as usize).iter().map(|v| v * scale));
        }
        Ok(x)
    }

    fn matmul(&self, x: &Vec<f32>, w: &Linear) -> Result<Vec<f32>> {
        Ok(w.forward(x))
    }

    fn rms_norm(&self, x: &Vec<f32>, weight: &Vec<f32>, eps: f32) -> Result<Vec<f32>> {
        let mut y = x.clone();
        rms_norm(&mut y, weight, eps);
        Ok(y)
    }

    fn rms_norm_unit(&self, x: &Vec<f32>, width: usize, eps: f32) -> Result<Vec<f32>> {
        let mut y = x.clone();
        rms_norm_unit(&mut y, width, eps);
        Ok(y)
    }

    fn rope(
        &self,
        x: &mut Vec<f32>,
        n_heads: usize,
        head_dim: usize,
        start: usize,
        table: &RopeTable,
    ) -> Result<()> {
        let n_tokens = x.len() / (n_heads * head_dim);
        let positions: Vec<usize> = (start..start + n_tokens).collect();
        rope(x, head_dim, &positions, table);
        Ok(())
    }

    fn attention(
        &mut self,
        layer: usize,
        q: &Vec<f32>,
        k: &Vec<f32>,
        v: &Vec<f32>,
        start: usize,
        p: &AttentionParams,
    ) -> Result<Vec<f32>> {
        let (k_all, v_all) = self.cache.append(layer, k, v);
        Ok(attention(q, k_all, v_all, start, p))
    }

    fn glu(&self, activation: Activation, gate: &Vec<f32>, x: &Vec<f32>) -> Result<Vec<f32>> {
        let act = match activation {
            Activation::Silu => silu,
            Activation::GeluTanh => gelu_tanh,
            Activation::Sigmoid => sigmoid,
        };
        Ok(gate.iter().zip(x).map(|(&g, u)| act(g) * u).collect())
    }

    fn gate_rows(&self, x: &mut Vec<f32>, gate: &Vec<f32>) -> Result<()> {
        let width = x.len() / gate.len();
        for (row, &g) in x.chunks_exact_mut(width).zip(gate) {
            let s = sigmoid(g);
            row.iter_mut().for_each(|v| *v *= s);
        }
        Ok(())
    }

    fn add(&self, x: &mut Vec<f32>, y: &Vec<f32>) -> Result<()> {
        add_in_place(x, y);
        Ok(())
    }

    fn scale(&self, x: &mut Vec<f32>, s: f32) -> Result<()> {
        x.iter_mut().for_each(|v| *v *= s);
        Ok(())
    }

    fn softcap(&self, x: &mut Vec<f32>, cap: f32) -> Result<()> {
        softcap(x, cap);
        Ok(())
    }

    fn last_row(&self, x: &Vec<f32>, width: usize) -> Result<Vec<f32>> {
        Ok(x[x.len() - width..].to_vec())
    }

    fn moe(
        &self,
        x: &Vec<f32>,
        logits: &Vec<f32>,
        experts: &Experts,
        router: &Router,
    ) -> Result<Vec<f32>> {
        experts.forward(self, x, logits, router)
    }

    fn delta_net(
        &mut self,
        layer: usize,
        step: DeltaNetStep<'_, Vec<f32>, Vec<f32>>,
    ) -> Result<Vec<f32>> {
        let n_tokens = step.alpha.len() / step.shape.n_v_heads;
        let conv_len = (step.kernel - 1) * step.shape.channels();
        let state = self
            .cache
            .recurrent(layer, conv_len, step.shape.state_len(), n_tokens);
        Ok(delta_net_step(&step, state))
    }

    fn to_host(&self, x: &Vec<f32>) -> Result<Vec<f32>> {
        Ok(x.clone())
    }
}

#[cfg(test)]
mod tests;
