//! The GPU backend: runs the models crate's architecture graphs (the same descriptions the CPU
//! reference runs) with the engine's kernels, activations in f32 device buffers.
//!
//! Supported today: the dense architectures (llama, qwen3, gemma3, dense gemma4). Mixture of
//! experts and the gated delta net are refused at load with [`GpuError::Unsupported`].
//!
//! TEMPORARY FALLBACK, not zinc's kernel: every matrix is dequantized to f16 once at load (on
//! the CPU, with `zinc_models::quant`) and multiplied by cuBLAS (`Blas::gemm_f16`), until the
//! fused quantized GEMMs land (issue 5). Nothing measured on this path is a zinc GEMM figure.

#[cfg(test)]
mod tests;

use std::convert::Infallible;
use std::sync::Arc;

use thiserror::Error;
use zinc_models::arch::Arch;
use zinc_models::backend::{
    Activation, AttentionParams, Backend, DeltaNetStep, HostExperts, HostMatrix, Result, RopeStyle,
    RopeTable, Router,
};
use zinc_models::config::Config;
use zinc_models::forward::ModelError;
use zinc_runtime::half::f16;
use zinc_runtime::{Arg, Blas, Device, DeviceBuffer, Grid, Kernel, RuntimeError, Stream};

use crate::registry::{Registry, RegistryError};

/// Widest attention head the SIMT attention kernel takes (its `D_MAX`).
const MAX_HEAD_DIM: usize = 512;

#[derive(Debug, Error)]
pub enum GpuError {
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error("{0} is not implemented on the GPU yet")]
    Unsupported(&'static str),
    #[error(
        "the GPU backend does not run {0} models yet (dense llama, qwen3, gemma3, gemma4 only)"
    )]
    UnsupportedArch(String),
    #[error("{needed} positions exceed the GPU KV cache of {capacity} (raise --ctx)")]
    CacheFull { needed: usize, capacity: usize },
}

impl From<GpuError> for ModelError {
    fn from(e: GpuError) -> Self {
        ModelError::Backend(Box::new(e))
    }
}

/// `?` for device results inside backend ops, which return [`ModelError`].
trait OnGpu<T> {
    fn gpu(self) -> Result<T>;
}

impl<T, E: Into<GpuError>> OnGpu<T> for std::result::Result<T, E> {
    fn gpu(self) -> Result<T> {
        self.map_err(|e| ModelError::from(e.into()))
    }
}

fn unsupported<T>(what: &'static str) -> Result<T> {
    Err(GpuError::Unsupported(what).into())
}

/// The registry kernels the backend launches, loaded once.
struct Kernels {
    rmsnorm: Arc<Kernel>,
    add: Arc<Kernel>,
    silu_mul: Arc<Kernel>,
    gelu_mul: Arc<Kernel>,
    to_f16: Arc<Kernel>,
    embed: Arc<Kernel>,
    copy: Arc<Kernel>,
    add_bias: Arc<Kernel>,
    scale: Arc<Kernel>,
    softcap: Arc<Kernel>,
    rope: Arc<Kernel>,
    attention: Arc<Kernel>,
}

impl Kernels {
    fn load(registry: &Registry) -> std::result::Result<Self, RegistryError> {
        let k = |name: &str| registry.kernel(name);
        Ok(Self {
            rmsnorm: k("rmsnorm_f32")?,
            add: k("add_f32")?,
            silu_mul: k("silu_mul_f32")?,
            gelu_mul: k("gelu_mul_f32")?,
            to_f16: k("f32_to_f16")?,
            embed: k("embed_f16")?,
            copy: k("copy_f32")?,
            add_bias: k("add_bias_f32")?,
            scale: k("scale_f32")?,
            softcap: k("softcap_f32")?,
            rope: k("rope_f32")?,
            attention: k("attention_f32")?,
        })
    }
}

/// A weight matrix `[out][in]` in f16 (the temporary dequantized form, see the module docs).
pub struct Matrix {
    w: DeviceBuffer<f16>,
    out_dim: usize,
    in_dim: usize,
    bias: Option<DeviceBuffer<f32>>,
}

/// One layer's keys and values for positions `0..capacity`, and how many are valid.
struct LayerCache {
    k: DeviceBuffer<f32>,
    v: DeviceBuffer<f32>,
    len: usize,
}

/// The GPU backend of one model: kernels, cuBLAS handle and the KV cache.
pub struct Gpu {
    stream: Stream,
    blas: Blas,
    kernels: Kernels,
    cache: Vec<LayerCache>,
    capacity: usize,
}

impl Gpu {
    /// A backend on `device` for `config`, with a KV cache of `max_positions` positions.
    pub fn new(
        device: &Device,
        config: &Config,
        max_positions: usize,
    ) -> std::result::Result<Self, GpuError> {
        let dense = matches!(
            config.arch,
            Arch::Llama | Arch::Qwen3 | Arch::Gemma3 | Arch::Gemma4
        ) && config.n_expert == 0;
        if !dense {
            return Err(GpuError::UnsupportedArch(config.arch.name().into()));
        }
        let stream = device.default_stream();
        let kernels = Kernels::load(&Registry::new(device)?)?;
        let blas = Blas::new(&stream)?;
        let capacity = max_positions.min(config.context_length);
        let cache = (0..config.n_layer)
            .map(|il| {
                let kv = config.n_head_kv_at(il);
                Ok(LayerCache {
                    k: stream.alloc_zeros(capacity * kv * config.head_dim_k_at(il))?,
                    v: stream.alloc_zeros(capacity * kv * config.head_dim_v_at(il))?,
                    len: 0,
                })
            })
            .collect::<std::result::Result<_, RuntimeError>>()?;
        Ok(Self {
            stream,
            blas,
            kernels,
            cache,
            capacity,
        })
    }

    fn launch(&self, kernel: &Kernel, args: &mut [Arg<'_>]) -> Result<()> {
        launch(&self.stream, kernel, args)
    }

    fn alloc(&self, len: usize) -> Result<DeviceBuffer<f32>> {
        self.stream.alloc(len).gpu()
    }

    /// `x = kernel(x, c)` for an element-wise kernel `(x, y, c, n)`.
    fn map(&self, kernel: &Kernel, x: &mut DeviceBuffer<f32>, c: f32) -> Result<()> {
        let mut y = self.alloc(x.len())?;
        let n = u32_arg(x.len())?;
        self.launch(kernel, &mut [(&*x).into(), (&mut y).into(), c.into(), n])?;
        *x = y;
        Ok(())
    }

    fn norm(
        &self,
        x: &DeviceBuffer<f32>,
        w: &DeviceBuffer<f32>,
        eps: f32,
    ) -> Result<DeviceBuffer<f32>> {
        let mut y = self.alloc(x.len())?;
        let cols = w.len();
        self.launch(
            &self.kernels.rmsnorm,
            &mut [
                x.into(),
                w.into(),
                (&mut y).into(),
                u32_arg(x.len() / cols)?,
                u32_arg(cols)?,
                eps.into(),
            ],
        )?;
        Ok(y)
    }
}

fn launch(stream: &Stream, kernel: &Kernel, args: &mut [Arg<'_>]) -> Result<()> {
    kernel.launch(stream, Grid::Auto, args).gpu()?;
    Ok(())
}

/// `x[x_off..x_off + n]` into `y[y_off..]`.
fn copy(
    stream: &Stream,
    kernel: &Kernel,
    x: &DeviceBuffer<f32>,
    x_off: usize,
    y: &mut DeviceBuffer<f32>,
    y_off: usize,
    n: usize,
) -> Result<()> {
    launch(
        stream,
        kernel,
        &mut [
            x.into(),
            y.into(),
            u32_arg(x_off)?,
            u32_arg(y_off)?,
            u32_arg(n)?,
        ],
    )
}

/// A size as the kernels' u32 scalar, refusing what does not fit.
fn u32_arg(v: usize) -> Result<Arg<'static>> {
    u32::try_from(v)
        .map(Arg::from)
        .map_err(|_| GpuError::Unsupported("a tensor dimension of 2^32 or more").into())
}

impl Backend for Gpu {
    type Tensor = DeviceBuffer<f32>;
    type Matrix = Matrix;
    type Vector = DeviceBuffer<f32>;
    type Experts = Infallible;

    fn matrix(&self, m: HostMatrix<'_>, bias: Option<Vec<f32>>) -> Result<Matrix> {
        let w: Vec<f16> = m.to_f32()?.into_iter().map(f16::from_f32).collect();
        Ok(Matrix {
            w: self.stream.upload(&w).gpu()?,
            out_dim: m.rows,
            in_dim: m.cols,
            bias: bias.map(|b| self.stream.upload(&b)).transpose().gpu()?,
        })
    }

    fn vector(&self, v: Vec<f32>) -> Result<DeviceBuffer<f32>> {
        self.stream.upload(&v).gpu()
    }

    fn experts(&self, _: HostExperts<'_>, _: Activation) -> Result<Infallible> {
        unsupported("mixture of experts")
    }

    fn cached(&self) -> usize {
        self.cache.iter().map(|l| l.len).max().unwrap_or(0)
    }

    fn can_truncate(&self, _: usize) -> bool {
        true
    }

    fn truncate(&mut self, len: usize) {
        self.cache.iter_mut().for_each(|l| l.len = l.len.min(len));
    }

    fn embed(&self, table: &Matrix, tokens: &[u32], scale: f32) -> Result<DeviceBuffer<f32>> {
        let ids = self.stream.upload(tokens).gpu()?;
        let mut y = self.alloc(tokens.len() * table.in_dim)?;
        self.launch(
            &self.kernels.embed,
            &mut [
                (&table.w).into(),
                (&ids).into(),
                (&mut y).into(),
                u32_arg(tokens.len())?,
                u32_arg(table.in_dim)?,
                scale.into(),
            ],
        )?;
        Ok(y)
    }

    fn matmul(&self, x: &DeviceBuffer<f32>, w: &Matrix) -> Result<DeviceBuffer<f32>> {
        let t = x.len() / w.in_dim;
        let mut xh = self.stream.alloc::<f16>(x.len()).gpu()?;
        self.launch(
            &self.kernels.to_f16,
            &mut [x.into(), (&mut xh).into(), u32_arg(x.len())?],
        )?;
        let mut y = self.alloc(t * w.out_dim)?;
        // The temporary cuBLAS fallback (module docs).
        self.blas
            .gemm_f16(t, w.out_dim, w.in_dim, &xh, &w.w, &mut y)
            .gpu()?;
        let Some(b) = &w.bias else { return Ok(y) };
        let mut with_bias = self.alloc(y.len())?;
        self.launch(
            &self.kernels.add_bias,
            &mut [
                (&y).into(),
                b.into(),
                (&mut with_bias).into(),
                u32_arg(y.len())?,
                u32_arg(w.out_dim)?,
            ],
        )?;
        Ok(with_bias)
    }

    fn rms_norm(
        &self,
        x: &DeviceBuffer<f32>,
        weight: &DeviceBuffer<f32>,
        eps: f32,
    ) -> Result<DeviceBuffer<f32>> {
        self.norm(x, weight, eps)
    }

    fn rms_norm_unit(
        &self,
        x: &DeviceBuffer<f32>,
        width: usize,
        eps: f32,
    ) -> Result<DeviceBuffer<f32>> {
        // A unit weight: multiplying by 1.0 is exact, so this equals a weightless norm.
        let ones = self.stream.upload(&vec![1f32; width]).gpu()?;
        self.norm(x, &ones, eps)
    }

    fn rope(
        &self,
        x: &mut DeviceBuffer<f32>,
        n_heads: usize,
        head_dim: usize,
        start: usize,
        rope: &RopeTable,
    ) -> Result<()> {
        let half = rope.inv_freq().len();
        let n_tokens = x.len() / (n_heads * head_dim);
        if half == 0 {
            return Ok(());
        }
        let (mut sin, mut cos) = (Vec::new(), Vec::new());
        for pos in start..start + n_tokens {
            let (s, c) = rope.sin_cos(pos);
            sin.extend(s);
            cos.extend(c);
        }
        let sin = self.stream.upload(&sin).gpu()?;
        let cos = self.stream.upload(&cos).gpu()?;
        let neox = u32::from(rope.style() == RopeStyle::Neox);
        let mut y = self.alloc(x.len())?;
        self.launch(
            &self.kernels.rope,
            &mut [
                (&*x).into(),
                (&sin).into(),
                (&cos).into(),
                (&mut y).into(),
                u32_arg(n_heads)?,
                u32_arg(n_tokens)?,
                u32_arg(head_dim)?,
                u32_arg(half)?,
                neox.into(),
            ],
        )?;
        *x = y;
        Ok(())
    }

    fn attention(
        &mut self,
        layer: usize,
        q: &DeviceBuffer<f32>,
        k: &DeviceBuffer<f32>,
        v: &DeviceBuffer<f32>,
        start: usize,
        p: &AttentionParams,
    ) -> Result<DeviceBuffer<f32>> {
        if p.head_dim_k.max(p.head_dim_v) > MAX_HEAD_DIM {
            return unsupported("attention heads wider than 512");
        }
        let n_tokens = q.len() / (p.n_head * p.head_dim_k);
        let needed = start + n_tokens;
        if needed > self.capacity {
            return Err(GpuError::CacheFull {
                needed,
                capacity: self.capacity,
            }
            .into());
        }
        let Self {
            stream,
            kernels,
            cache,
            ..
        } = self;
        let cache = &mut cache[layer];
        debug_assert_eq!(cache.len, start, "the model truncates the cache first");
        let k_off = start * p.n_head_kv * p.head_dim_k;
        copy(stream, &kernels.copy, k, 0, &mut cache.k, k_off, k.len())?;
        copy(
            stream,
            &kernels.copy,
            v,
            0,
            &mut cache.v,
            start * p.n_head_kv * p.head_dim_v,
            v.len(),
        )?;
        cache.len = needed;
        let mut o = stream.alloc(n_tokens * p.n_head * p.head_dim_v).gpu()?;
        launch(
            stream,
            &kernels.attention,
            &mut [
                q.into(),
                (&cache.k).into(),
                (&cache.v).into(),
                (&mut o).into(),
                u32_arg(p.n_head)?,
                u32_arg(p.n_head_kv)?,
                u32_arg(p.head_dim_k)?,
                u32_arg(p.head_dim_v)?,
                u32_arg(n_tokens)?,
                u32_arg(start)?,
                u32_arg(p.window.unwrap_or(0))?,
                p.scale.into(),
                p.softcap.unwrap_or(0.0).into(),
            ],
        )?;
        Ok(o)
    }

    fn glu(
        &self,
        activation: Activation,
        gate: &DeviceBuffer<f32>,
        x: &DeviceBuffer<f32>,
    ) -> Result<DeviceBuffer<f32>> {
        let kernel = match activation {
            Activation::Silu => &self.kernels.silu_mul,
            Activation::GeluTanh => &self.kernels.gelu_mul,
            Activation::Sigmoid => return unsupported("sigmoid-gated attention"),
        };
        let mut y = self.alloc(x.len())?;
        self.launch(
            kernel,
            &mut [gate.into(), x.into(), (&mut y).into(), u32_arg(x.len())?],
        )?;
        Ok(y)
    }

    fn gate_rows(&self, _: &mut DeviceBuffer<f32>, _: &DeviceBuffer<f32>) -> Result<()> {
        unsupported("the shared-expert gate")
    }

    fn add(&self, x: &mut DeviceBuffer<f32>, y: &DeviceBuffer<f32>) -> Result<()> {
        let mut sum = self.alloc(x.len())?;
        self.launch(
            &self.kernels.add,
            &mut [(&*x).into(), y.into(), (&mut sum).into(), u32_arg(x.len())?],
        )?;
        *x = sum;
        Ok(())
    }

    fn scale(&self, x: &mut DeviceBuffer<f32>, s: f32) -> Result<()> {
        self.map(&self.kernels.scale, x, s)
    }

    fn softcap(&self, x: &mut DeviceBuffer<f32>, cap: f32) -> Result<()> {
        self.map(&self.kernels.softcap, x, cap)
    }

    fn last_row(&self, x: &DeviceBuffer<f32>, width: usize) -> Result<DeviceBuffer<f32>> {
        let mut y = self.alloc(width)?;
        copy(
            &self.stream,
            &self.kernels.copy,
            x,
            x.len() - width,
            &mut y,
            0,
            width,
        )?;
        Ok(y)
    }

    fn moe(
        &self,
        _: &DeviceBuffer<f32>,
        _: &DeviceBuffer<f32>,
        experts: &Infallible,
        _: &Router,
    ) -> Result<DeviceBuffer<f32>> {
        match *experts {}
    }

    fn delta_net(
        &mut self,
        _: usize,
        _: DeltaNetStep<'_, DeviceBuffer<f32>, DeviceBuffer<f32>>,
    ) -> Result<DeviceBuffer<f32>> {
        unsupported("the gated delta net")
    }

    fn to_host(&self, x: &DeviceBuffer<f32>) -> Result<Vec<f32>> {
        self.stream.download(x).gpu()
    }
}
