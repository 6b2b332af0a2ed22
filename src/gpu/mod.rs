//! The GPU backend: runs the models crate's architecture graphs (the same descriptions the CPU
//! reference runs) with the engine's kernels, activations in f32 device buffers.
//!
//! Supported today: the dense architectures (llama, qwen3, gemma3, dense gemma4). Mixture of
//! experts and the gated delta net are refused at load with [`GpuError::Unsupported`].
//!
//! Weights stay in their GGUF blocks on the device for the types with kernels (Q4_K, Q5_K, Q6_K,
//! Q8_0, Q5_0, Q4_0, IQ4_NL, IQ4_XS; see [`dispatch`], which also lays out Q6_K, Q8_0, Q5_0, Q4_0
//! and the IQ4 types in aligned planes); other types are dequantized to f16 on the host at load. Products of up to
//! [`dispatch::MATVEC_MAX_T`] tokens run the quantized matvecs; longer ones the fused quantized
//! GEMMs on f16 activations, or, where none fits (K not a multiple of 64), zinc's f16 tensor-core
//! GEMM on the matrix dequantized into a scratch buffer. Attention keeps an f16 KV cache: flash
//! attention on the tensor cores for prefill chunks, split-K attention for decode and for head
//! widths without a flash build.
//!
//! Without a GPU the backend runs unchanged on the emulated device ([`crate::emulator`]), which
//! is how CI tests it (see the tests module).

pub mod dispatch;
#[cfg(test)]
mod tests;

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::convert::Infallible;
use std::rc::Rc;
use std::sync::Arc;

use thiserror::Error;
use zinc_models::arch::Arch;
use zinc_models::backend::{
    attention_steps, Activation, AttentionInputs, AttentionParams, Backend, DeltaNetStep,
    HostExperts, HostMatrix, Result, RopeStyle, RopeTable, Router, ValueSource,
};
use zinc_models::config::Config;
use zinc_models::forward::ModelError;
use zinc_models::gguf::Gguf;
use zinc_models::quant::GgmlType;
use zinc_runtime::half::f16;
use zinc_runtime::{
    Arg, Device, DeviceBuffer, DeviceElem, Event, Graph, Grid, Kernel, RuntimeError, Stream,
};

use self::dispatch::InputCopy;
use crate::reference;
use crate::registry::{Registry, RegistryError};
use crate::specs::{self, TOP_K_MAX, TOP_K_MAX_COLS};

/// Widest attention head the split attention kernel takes (its `D_MAX`).
const MAX_HEAD_DIM: usize = 512;

#[derive(Debug, Error)]
pub enum GpuError {
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    Tune(#[from] dispatch::TuneError),
    #[error("{0} is not implemented on the GPU yet")]
    Unsupported(&'static str),
    #[error("internal error: an activation held in f16 only was read as f32")]
    HalfOnly,
    #[error(
        "the GPU backend does not run {0} models yet (dense llama, qwen3, gemma3, gemma4 only)"
    )]
    UnsupportedArch(String),
    #[error("{needed} positions exceed the GPU KV cache of {capacity} (raise --ctx)")]
    CacheFull { needed: usize, capacity: usize },
    #[error(
        "the model needs about {:.2} GiB on the GPU ({:.2} GiB of weights, {:.2} GiB of KV cache \
         for {ctx} positions, working memory) but {:.2} GiB are free; lower --ctx or use a \
         smaller model",
        gib(*needed), gib(*weights), gib(*cache), gib(*free)
    )]
    OutOfMemory {
        needed: u64,
        weights: u64,
        cache: u64,
        ctx: usize,
        free: u64,
    },
}

impl From<GpuError> for ModelError {
    fn from(e: GpuError) -> Self {
        ModelError::Backend(Box::new(e))
    }
}

fn gib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1u32 << 30)
}

/// Activations, scratch copies of one dequantized matrix and the like, beyond weights and cache.
const WORKING_BYTES: u64 = 1 << 30;

/// The bytes `gguf`'s weights take on the device: GGUF blocks where the type has kernels, f16
/// for other matrices, f32 for vectors.
pub fn weight_bytes(gguf: &Gguf) -> u64 {
    gguf.tensors()
        .iter()
        .map(|t| match t.ggml_type() {
            Ok(ty) if dispatch::has_kernels(ty) => t.n_bytes().unwrap_or(0),
            _ if t.dims.len() == 1 => 4 * t.n_elements(),
            _ => 2 * t.n_elements(),
        })
        .sum()
}

/// The quantized types of `gguf`'s matrices that have no kernels, each with how many matrices
/// it has: the backend uploads those as f16 copies (3.5 times a 4.5-bit type's bytes, and its
/// decode reads them all).
pub fn expanded_types(gguf: &Gguf) -> BTreeMap<&'static str, usize> {
    let mut expanded = BTreeMap::new();
    for t in gguf.tensors().iter().filter(|t| t.dims.len() == 2) {
        let Ok(ty) = t.ggml_type() else { continue };
        let float = matches!(ty, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16);
        if !float && !dispatch::has_kernels(ty) {
            *expanded.entry(ty.name()).or_default() += 1;
        }
    }
    expanded
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
    add: Arc<Kernel>,
    silu_mul: Arc<Kernel>,
    gelu_mul: Arc<Kernel>,
    silu_mul_half: Arc<Kernel>,
    gelu_mul_half: Arc<Kernel>,
    silu_mul_int8: Arc<Kernel>,
    gelu_mul_int8: Arc<Kernel>,
    silu_mul_pairs: Arc<Kernel>,
    gelu_mul_pairs: Arc<Kernel>,
    silu_mul_pairs_int8: Arc<Kernel>,
    gelu_mul_pairs_int8: Arc<Kernel>,
    to_f16: Arc<Kernel>,
    quantize_s8: Arc<Kernel>,
    embed: Arc<Kernel>,
    copy: Arc<Kernel>,
    add_bias: Arc<Kernel>,
    scale: Arc<Kernel>,
    softcap: Arc<Kernel>,
    rope: Arc<Kernel>,
    rope_half: Arc<Kernel>,
    append_f16: Arc<Kernel>,
    rope_append: Arc<Kernel>,
    rope_append_q16: Arc<Kernel>,
    attention_split: Arc<Kernel>,
    attention_combine: Arc<Kernel>,
    attention_combine_q: Arc<Kernel>,
    argmax: Arc<Kernel>,
    top_k: Arc<Kernel>,
}

impl Kernels {
    fn load(registry: &Registry) -> std::result::Result<Self, RegistryError> {
        let k = |name: &str| registry.kernel(name);
        Ok(Self {
            add: k("add_f32")?,
            silu_mul: k("silu_mul_f32")?,
            gelu_mul: k("gelu_mul_f32")?,
            silu_mul_half: k("silu_mul_f32h")?,
            gelu_mul_half: k("gelu_mul_f32h")?,
            silu_mul_int8: k("silu_mul_f32q")?,
            gelu_mul_int8: k("gelu_mul_f32q")?,
            silu_mul_pairs: k("silu_mul_pairs_f32")?,
            gelu_mul_pairs: k("gelu_mul_pairs_f32")?,
            silu_mul_pairs_int8: k("silu_mul_pairs_f32q")?,
            gelu_mul_pairs_int8: k("gelu_mul_pairs_f32q")?,
            to_f16: k("f32_to_f16")?,
            quantize_s8: k("quantize_s8")?,
            embed: k("embed_f16")?,
            copy: k("copy_f32")?,
            add_bias: k("add_bias_f32")?,
            scale: k("scale_f32")?,
            softcap: k("softcap_f32")?,
            rope: k("rope_f32")?,
            rope_half: k("rope_f32h")?,
            append_f16: k("append_f16")?,
            rope_append: k("rope_append_f16")?,
            rope_append_q16: k("rope_append_f16_q16")?,
            attention_split: k("attention_split_f16")?,
            attention_combine: k("attention_combine")?,
            attention_combine_q: k("attention_combine_q")?,
            argmax: k("argmax_rows")?,
            top_k: k("top_k_rows")?,
        })
    }
}

/// A weight matrix `[out][in]` on the device.
pub struct Matrix {
    w: Weights,
    out_dim: usize,
    in_dim: usize,
    bias: Option<DeviceBuffer<f32>>,
    /// A gated pair ([`Backend::gated_pair`]): the `out_dim` rows are a gate and an up matrix
    /// in a gated pair's layout (groups of [`specs::PAIR_GROUP`] rows alternate).
    paired: bool,
}

enum Weights {
    /// The GGUF blocks as little-endian u32 words (the last one zero-padded).
    Quant {
        ty: GgmlType,
        blocks: DeviceBuffer<u32>,
    },
    /// Dequantized on the host: a type without device kernels.
    F16(DeviceBuffer<f16>),
}

/// One layer's keys and values for positions `0..capacity`, and how many are valid.
struct LayerCache {
    k: DeviceBuffer<f16>,
    v: DeviceBuffer<f16>,
    len: usize,
}

/// The GPU backend of one model: kernels and the KV cache.
pub struct Gpu {
    queue: Queue,
    /// The kernels chosen by shape (matvec and GEMM variants, per weight type), loaded on first
    /// use.
    registry: Registry,
    kernels: Kernels,
    cache: Vec<LayerCache>,
    capacity: usize,
    /// The dispatch table of `bench-kernels --tune --table`, from the file named by `ZINC_TUNE`.
    tune: Option<dispatch::TuneTable>,
    /// The product kernels chosen so far, per kind and shape.
    products: RefCell<HashMap<ProductKey, Option<Arc<Kernel>>>>,
    /// The fused GEMMs' launches so far ([`Gpu::gemm_plan`]), per kind and shape.
    gemm_plans: RefCell<HashMap<ProductKey, Rc<GemmPlan>>>,
    /// Rope sin and cos for every cache position, per rope configuration (style and inverse
    /// frequencies, as bits), uploaded at first use.
    rope_tables: RefCell<HashMap<Vec<u64>, Rc<RopeRows>>>,
    /// A row of ones for weightless norms, grown as needed.
    ones: RefCell<Option<Rc<DeviceBuffer<f32>>>>,
    /// The buffer gemm_wg's kernels take last (`ws`): zeros, through which stream-K blocks
    /// hand partial sums over (and leave it zeroed), grown to their size at their first launch.
    gemm_workspace: RefCell<Option<DeviceBuffer<u32>>>,
    /// The model's hidden width: norms of whole hidden rows feed products.
    n_embd: usize,
    /// Tokens of the forward pass running (set by the embedding), for the gated products, which
    /// write f16 too when the down projection reads it ([`products_read_half`]).
    batch: Cell<usize>,
    /// A device zero: the position offset of kernels launched with their position from the host.
    no_offset: DeviceBuffer<u32>,
    /// Greedy decode steps as CUDA graphs, unless `ZINC_GRAPHS=0` turned them off.
    graphs: Option<DecodeGraphs>,
    /// Whether decode products whose weight type has an integer matvec take it, on int8
    /// activations ([`s8_decode_enabled`]).
    s8_decode: bool,
    /// Whether, with `s8_decode`, the norms and gated products of decode-size batches write the
    /// int8 blocks of their output themselves ([`InputCopy::Int8`]), so that no quantize_s8
    /// launch precedes the products reading them: unless `ZINC_S8_FUSED=0`.
    s8_fused: bool,
    /// Whether the fused GEMMs may take the warpgroup-MMA kernels: built for the device
    /// (sm_90a) and not turned off by `ZINC_WGMMA=0`.
    wgmma: bool,
    /// The device's SMs, which decide where gemm_wg's last wave is short
    /// ([`dispatch::wave_tail`]).
    sms: usize,
    /// The device's L2, which decides where stream-K's blocks would read X from DRAM.
    l2_bytes: usize,
    /// The builds that replace the dispatch's gemm_wg tiles (stream-K, TMA reductions), as the
    /// environment sets them ([`rewrites_from_env`]).
    rewrites: dispatch::Rewrites,
    /// How the products that end a residual branch add into the stream (`ZINC_ADD_OUTPUT`).
    add_output: dispatch::AddOutput,
}

/// Greedy decode steps recorded as CUDA graphs and replayed: the step's token and position live
/// in device memory, which the recorded kernels read, so one graph serves every position up to
/// its key capacity (its attention grid covers that many keys).
struct DecodeGraphs {
    token: DeviceBuffer<u32>,
    position: DeviceBuffer<u32>,
    next: DeviceBuffer<i32>,
    /// Recorded graphs by key capacity.
    recorded: HashMap<usize, Graph>,
    /// Capacities whose step has run once without recording, loading its kernels and filling
    /// the backend's caches (nothing may do that during a capture).
    warmed: HashSet<usize>,
    /// Whether the device records graphs (the emulated one runs every step in replayable form
    /// instead, which checks that form on the CPU).
    record: bool,
    /// While a step runs in replayable form: its key capacity.
    replaying: Option<usize>,
}

/// Whether greedy decode steps run as CUDA graphs: unless `ZINC_GRAPHS=0`. On the H200 they
/// took tg128 from 207 to 251 tokens/s on a llama3-8b-shaped file (docs/PERF.md), with greedy
/// output identical to the eager steps' and the CPU's.
fn graphs_enabled() -> bool {
    std::env::var("ZINC_GRAPHS").as_deref() != Ok("0")
}

/// Whether decode-size products take the int8 matvecs (dp4a on activations quantized per
/// 32 values, as llama.cpp's decode does): unless `ZINC_S8=0`. On the H200, Q4_K 4096 x 14336
/// at one token took 14.6 us against 21.7 with f32 activations (docs/PERF.md, session 5); the
/// activations' rounding adds about 5e-3 relative error to each product on random data.
pub fn s8_decode_enabled() -> bool {
    std::env::var("ZINC_S8").as_deref() != Ok("0")
}

/// Whether the producers of decode-size product inputs write their int8 blocks themselves
/// ([`Gpu::s8_fused`]): unless `ZINC_S8_FUSED=0`. The blocks are the same bits either way; off,
/// each product input takes a quantize_s8 launch (about 3 per layer).
fn s8_fused_enabled() -> bool {
    std::env::var("ZINC_S8_FUSED").as_deref() != Ok("0")
}

/// The engine's [`dispatch::Rewrites`] from the environment. `ZINC_STREAMK=1` makes every
/// gemm_wg product the rule allows share all of its super-blocks out ([`dispatch::stream_k`]),
/// `2` its last waves'; by default only the split products [`dispatch::split_stream_k`] takes do
/// (on the H200 the others lost to the tiles, K splits and short last waves they replace:
/// session 22), and `0` turns that off too. Any other value is reported and ignored.
/// `ZINC_TMA_STORE=0` keeps the two-way K split's atomics ([`dispatch::tma_store`]).
pub fn rewrites_from_env() -> dispatch::Rewrites {
    let value = std::env::var("ZINC_STREAMK").unwrap_or_default();
    let how = dispatch::StreamK::from_env_value(&value);
    if how.is_none() && !matches!(value.as_str(), "" | "0") {
        eprintln!("warning: ZINC_STREAMK={value} is not 1 or 2 (or 0); stream-K stays off");
    }
    dispatch::Rewrites {
        stream_k: how,
        split_stream_k: value != "0",
        tma_store: std::env::var("ZINC_TMA_STORE").as_deref() != Ok("0"),
    }
}

/// `ZINC_ADD_OUTPUT` ([`dispatch::AddOutput`]): `0`, `splits`, `atomics` or `tma`; by default
/// `tma`, whose kernels' GPU time per prefill of an 8B model was the least of the four (H100,
/// docs/PERF.md, session 31). Any other value is reported and ignored.
fn add_output_from_env() -> dispatch::AddOutput {
    let value = std::env::var("ZINC_ADD_OUTPUT").unwrap_or_default();
    dispatch::AddOutput::from_env_value(&value).unwrap_or_else(|| {
        if !value.is_empty() {
            eprintln!("warning: ZINC_ADD_OUTPUT={value} is not 0, splits, atomics or tma");
        }
        dispatch::AddOutput::Tma
    })
}

/// Whether prefill-size Q4_K, Q5_K, Q6_K and Q8_0 products may take the gemm_*_wg kernels
/// (sm_90a's warpgroup MMA, built for H100/H200 only): unless `ZINC_WGMMA=0`.
fn wgmma_enabled() -> bool {
    std::env::var("ZINC_WGMMA").as_deref() != Ok("0")
}

/// Whether the engine runs the wgmma GEMMs with `registry`'s kernels (built for sm_90a, and not
/// turned off by ZINC_WGMMA=0).
pub(crate) fn runs_wgmma(registry: &Registry) -> bool {
    wgmma_enabled() && registry.names().any(|n| n == "gemm_q4k_wg")
}

/// The key capacity of the graph for a decode step over `needed` cached positions: a power of
/// two (at least 256), at most the cache's `capacity`.
fn graph_keys(needed: usize, capacity: usize) -> usize {
    needed.max(256).next_power_of_two().min(capacity)
}

/// The kinds of matrix product the dispatch chooses a kernel for.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Product {
    Matvec(GgmlType),
    MatvecS8(GgmlType),
    QuantGemm(GgmlType),
    /// The same, added into its output ([`Backend::matmul_add`]).
    QuantGemmAdd(GgmlType),
    /// A gated pair's products with the activation (true for GELU) in the epilogue.
    GatedGemm(GgmlType, bool),
    GemmF16,
}

/// A product's kind and its T, N and K.
type ProductKey = (Product, usize, usize, usize);

/// How a fused GEMM runs: its launches, in order, and whether its output must be zero first
/// (a launch splits K and adds its parts into it).
struct GemmPlan {
    launches: Vec<GemmLaunch>,
    zero_output: bool,
    /// Every launch adds into the output: the product can add itself to what the output holds
    /// ([`Backend::matmul_add`]).
    adds_everywhere: bool,
}

/// One launch of a fused GEMM: its kernel, with `t` as its T, on all its tiles or (gemm_wg's
/// kernels) a range of them.
struct GemmLaunch {
    kernel: Arc<Kernel>,
    t: usize,
    range: Option<TileRange>,
}

/// gemm_wg's tiles `tile0 ..` of the product's token rows `token0 .. T`: `tiles` of them, or
/// (None) all, on the grid the signature derives.
#[derive(Clone, Copy, Default)]
struct TileRange {
    token0: usize,
    tile0: usize,
    tiles: Option<usize>,
}

impl GemmLaunch {
    /// All of `kernel`'s tiles of the token rows `token0 .. t`.
    fn rows(kernel: Arc<Kernel>, t: usize, token0: usize) -> Self {
        let range = takes_tile_range(&kernel).then_some(TileRange {
            token0,
            ..TileRange::default()
        });
        GemmLaunch { kernel, t, range }
    }

    /// `tiles` of `kernel`'s tiles of `t` token rows from tile `tile0`.
    fn tiles(kernel: Arc<Kernel>, t: usize, tile0: usize, tiles: usize) -> Self {
        let range = Some(TileRange {
            token0: 0,
            tile0,
            tiles: Some(tiles),
        });
        GemmLaunch { kernel, t, range }
    }
}

/// gemm_wg's persistent blocks (`PERSIST`): the K splits of `kernel`'s grid, if it has them.
fn persistent_splits(kernel: &Kernel) -> Option<u32> {
    let constant = |name| kernel.signature().specialization_int(name);
    let splits = constant("SPLITK").and_then(|s| u32::try_from(s).ok());
    (constant("PERSIST")? > 0).then(|| splits.unwrap_or(1))
}

/// A compile-time parameter of a loaded kernel, as [`specs::variant_param`] reads one from a
/// variant's name.
fn kernel_param(kernel: &Kernel, name: &str) -> Option<usize> {
    let value = kernel.signature().specialization_int(name)?;
    usize::try_from(value).ok()
}

/// Whether `kernel` takes a range of its product's tiles (gemm_wg's `tile0` and `token0`).
fn takes_tile_range(kernel: &Kernel) -> bool {
    kernel.signature().params.iter().any(|p| p.name == "token0")
}

/// An activation tensor: f32 on the device, its f16 copy once a tensor-core kernel has asked for
/// it, and its int8 blocks once an integer matvec has, so that the products sharing an input (q,
/// k and v of one normed row; gate and up) convert it once. A gated GEMM's output, which only
/// the down projection's f16 input reads, exists in f16 alone.
pub struct Act {
    len: usize,
    f32: Option<DeviceBuffer<f32>>,
    f16: RefCell<Option<Rc<DeviceBuffer<f16>>>>,
    s8: RefCell<Option<Rc<DeviceBuffer<u32>>>>,
}

impl From<DeviceBuffer<f32>> for Act {
    fn from(f32: DeviceBuffer<f32>) -> Self {
        Act::with_half(f32, None)
    }
}

impl Act {
    /// `f32`, and its f16 copy if a kernel wrote one.
    fn with_half(f32: DeviceBuffer<f32>, f16: Option<DeviceBuffer<f16>>) -> Act {
        Act {
            len: f32.len(),
            f32: Some(f32),
            f16: RefCell::new(f16.map(Rc::new)),
            s8: RefCell::new(None),
        }
    }

    /// A tensor in f16 only.
    fn half_only(f16: DeviceBuffer<f16>) -> Act {
        Act {
            len: f16.len(),
            f32: None,
            f16: RefCell::new(Some(Rc::new(f16))),
            s8: RefCell::new(None),
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    /// The tensor in f32 (every activation but a gated GEMM's output has it).
    fn f32(&self) -> Result<&DeviceBuffer<f32>> {
        self.f32.as_ref().ok_or_else(|| GpuError::HalfOnly.into())
    }

    /// The tensor in f32, to change: its copies are dropped, as they would be stale.
    fn f32_mut(&mut self) -> Result<&mut DeviceBuffer<f32>> {
        *self.f16.get_mut() = None;
        *self.s8.get_mut() = None;
        self.f32.as_mut().ok_or_else(|| GpuError::HalfOnly.into())
    }

    /// `f32` and the copy of it its kernel wrote.
    fn with_copy(f32: DeviceBuffer<f32>, copy: CopyBuffer) -> Act {
        match copy {
            CopyBuffer::None => Act::with_half(f32, None),
            CopyBuffer::Half(f16) => Act::with_half(f32, Some(f16)),
            CopyBuffer::Int8(s8) => Act {
                len: f32.len(),
                f32: Some(f32),
                f16: RefCell::new(None),
                s8: RefCell::new(Some(Rc::new(s8))),
            },
        }
    }

    /// The tensor as quantize_s8's int8 blocks (kernels/quant/act_s8.tile): those its kernel
    /// wrote, or quantized on first use. Its length must be a multiple of 64.
    fn quantized(&self, queue: &Queue, quantize: &Kernel) -> Result<Rc<DeviceBuffer<u32>>> {
        self.converted(&self.s8, act_s8_words(self.len()), queue, quantize)
    }

    /// The tensor in f16, converted on first use.
    fn half(&self, queue: &Queue, to_f16: &Kernel) -> Result<Rc<DeviceBuffer<f16>>> {
        self.converted(&self.f16, self.len(), queue, to_f16)
    }

    /// `slot`'s copy of the tensor, or a new one of `len` elements written by `convert`
    /// `(x, y, n)`.
    fn converted<T: DeviceElem>(
        &self,
        slot: &RefCell<Option<Rc<DeviceBuffer<T>>>>,
        len: usize,
        queue: &Queue,
        convert: &Kernel,
    ) -> Result<Rc<DeviceBuffer<T>>> {
        if let Some(copy) = &*slot.borrow() {
            return Ok(copy.clone());
        }
        let mut copy = queue.stream.alloc::<T>(len).gpu()?;
        queue.launch(
            convert,
            &mut [self.f32()?.into(), (&mut copy).into(), u32_arg(self.len())?],
        )?;
        let copy = Rc::new(copy);
        *slot.borrow_mut() = Some(copy.clone());
        Ok(copy)
    }
}

/// u32 words of `len` activations in quantize_s8's layout.
fn act_s8_words(len: usize) -> usize {
    len / reference::ACT_S8_GROUP * reference::ACT_S8_GROUP_BYTES / 4
}

/// The copy of its output a producer writes ([`InputCopy`]), allocated.
enum CopyBuffer {
    None,
    Half(DeviceBuffer<f16>),
    Int8(DeviceBuffer<u32>),
}

impl CopyBuffer {
    /// The kernel argument of the copy, if there is one.
    fn arg(&mut self) -> Option<Arg<'_>> {
        match self {
            CopyBuffer::None => None,
            CopyBuffer::Half(f16) => Some(f16.into()),
            CopyBuffer::Int8(s8) => Some(s8.into()),
        }
    }
}

/// What [`Gpu::norm_rows`] normalizes, and who reads the norm.
enum NormOf<'a> {
    /// Its input's rows, for any reader.
    Rows,
    /// Its input's rows, for products alone.
    RowsForProducts,
    /// Its input's rows plus `y`'s, the sum stored into `sum` in the same pass: the residual
    /// add, whose norm only products read ([`Backend::add_rms_norm`]).
    Sum {
        y: &'a Act,
        sum: &'a mut DeviceBuffer<f32>,
    },
}

/// `[capacity][half]` sin and cos of one rope configuration's angles.
struct RopeRows {
    sin: DeviceBuffer<f32>,
    cos: DeviceBuffer<f32>,
}

/// The stream the backend queues its work on, and the profile being recorded, if any.
struct Queue {
    stream: Stream,
    /// While profiling: every launch's kernel name and the events around it.
    profile: RefCell<Option<Vec<(String, Event, Event)>>>,
}

impl Queue {
    fn launch(&self, kernel: &Kernel, args: &mut [Arg<'_>]) -> Result<()> {
        self.launch_on(kernel, Grid::Auto, args)
    }

    fn launch_on(&self, kernel: &Kernel, grid: Grid, args: &mut [Arg<'_>]) -> Result<()> {
        let mut profile = self.profile.borrow_mut();
        let Some(spans) = profile.as_mut() else {
            kernel.launch(&self.stream, grid, args).gpu()?;
            return Ok(());
        };
        let start = self.stream.record().gpu()?;
        kernel.launch(&self.stream, grid, args).gpu()?;
        let end = self.stream.record().gpu()?;
        spans.push((kernel.signature().name.clone(), start, end));
        Ok(())
    }

    /// `x[x_off..x_off + n]` into `y[y_off..]`.
    fn copy(
        &self,
        kernel: &Kernel,
        x: &DeviceBuffer<f32>,
        x_off: usize,
        y: &mut DeviceBuffer<f32>,
        y_off: usize,
        n: usize,
    ) -> Result<()> {
        self.launch(
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
}

/// GPU time by kernel over a profiled stretch of work.
pub struct KernelTimes {
    /// Kernel name (variants folded into their kernel) -> (launches, total milliseconds).
    pub by_kernel: BTreeMap<String, (usize, f64)>,
}

impl Gpu {
    /// A backend on `device` for `config`, with a KV cache of `max_positions` positions, for
    /// weights of `weights` bytes ([`weight_bytes`]): refused up front when they would not fit.
    pub fn new(
        device: &Arc<Device>,
        config: &Config,
        max_positions: usize,
        weights: u64,
    ) -> std::result::Result<Self, GpuError> {
        let dense = matches!(
            config.arch,
            Arch::Llama | Arch::Qwen3 | Arch::Gemma3 | Arch::Gemma4
        ) && config.n_expert == 0;
        if !dense {
            return Err(GpuError::UnsupportedArch(config.arch.name().into()));
        }
        // The norms read their rows as groups of four values (kernels/norm.tile).
        let mut widths = (0..config.n_layer)
            .flat_map(|il| [config.head_dim_k_at(il), config.head_dim_v_at(il)])
            .chain([config.n_embd]);
        if widths.any(|w| !w.is_multiple_of(4)) {
            return Err(GpuError::Unsupported(
                "a model whose hidden or head width is not a multiple of 4",
            ));
        }
        // SAFETY: the backend queues all its work, copies included, on this one stream, so the
        // per-buffer events that order uses across streams are not needed (and cost host time
        // per launch).
        unsafe { device.disable_event_tracking() };
        let tune = match std::env::var_os("ZINC_TUNE") {
            Some(paths) => Some(dispatch::TuneTable::load_all(&paths)?),
            None => None,
        };
        // A stream of its own: the legacy default stream cannot be captured into a graph.
        let stream = device.new_stream()?;
        let registry = Registry::new(device.clone())?;
        let kernels = Kernels::load(&registry)?;
        let capacity = max_positions.min(config.context_length);
        let cache_bytes: u64 = (0..config.n_layer)
            .map(|il| {
                let row = config.head_dim_k_at(il) + config.head_dim_v_at(il);
                (2 * capacity * config.n_head_kv_at(il) * row) as u64
            })
            .sum();
        let needed = weights + cache_bytes + WORKING_BYTES;
        let free = device.free_memory()?;
        if needed > free {
            return Err(GpuError::OutOfMemory {
                needed,
                weights,
                cache: cache_bytes,
                ctx: capacity,
                free,
            });
        }
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
        let no_offset = stream.alloc_zeros(1)?;
        let mut gpu = Self {
            queue: Queue {
                stream,
                profile: RefCell::new(None),
            },
            registry,
            kernels,
            cache,
            capacity,
            tune,
            products: RefCell::default(),
            gemm_plans: RefCell::default(),
            rope_tables: RefCell::default(),
            ones: RefCell::default(),
            gemm_workspace: RefCell::default(),
            n_embd: config.n_embd,
            batch: Cell::new(0),
            no_offset,
            graphs: None,
            s8_decode: s8_decode_enabled(),
            s8_fused: s8_fused_enabled(),
            wgmma: false,
            sms: device.props().sm_count as usize,
            l2_bytes: usize::try_from(device.props().l2_bytes).unwrap_or(usize::MAX),
            rewrites: rewrites_from_env(),
            add_output: add_output_from_env(),
        };
        gpu.wgmma = runs_wgmma(&gpu.registry);
        if graphs_enabled() {
            gpu.enable_decode_graphs(!device.is_emulated())?;
        }
        Ok(gpu)
    }

    /// Runs greedy decode steps in replayable form, recorded as CUDA graphs if `record`
    /// ([`Backend::greedy_step`]; on at creation unless `ZINC_GRAPHS=0`).
    pub fn enable_decode_graphs(&mut self, record: bool) -> std::result::Result<(), GpuError> {
        let stream = &self.queue.stream;
        self.graphs = Some(DecodeGraphs {
            token: stream.alloc_zeros(1)?,
            position: stream.alloc_zeros(1)?,
            next: stream.alloc_zeros(1)?,
            recorded: HashMap::new(),
            warmed: HashSet::new(),
            record,
            replaying: None,
        });
        Ok(())
    }

    /// Starts recording events around every launch (the first launches of a stretch are then
    /// spaced by the event records: a few microseconds each).
    pub fn start_profile(&self) {
        *self.queue.profile.borrow_mut() = Some(Vec::new());
    }

    /// Stops recording and sums the GPU time of each kernel since [`Gpu::start_profile`].
    pub fn finish_profile(&self) -> std::result::Result<KernelTimes, GpuError> {
        let spans = self.queue.profile.borrow_mut().take().unwrap_or_default();
        let mut by_kernel = BTreeMap::new();
        for (name, start, end) in spans {
            let entry = by_kernel.entry(name).or_insert((0, 0.0));
            entry.0 += 1;
            entry.1 += f64::from(end.ms_since(&start)?);
        }
        Ok(KernelTimes { by_kernel })
    }

    fn launch(&self, kernel: &Kernel, args: &mut [Arg<'_>]) -> Result<()> {
        self.queue.launch(kernel, args)
    }

    fn kernel(&self, name: &str) -> Result<Arc<Kernel>> {
        self.registry.kernel(name).gpu()
    }

    /// The variant of `default`'s kernel that the tune table picks for a `t` x `n` x `k`
    /// product, if there is a table with such an entry naming a registered kernel; else
    /// `default`.
    fn tuned(&self, default: &str, t: usize, n: usize, k: usize) -> Result<Arc<Kernel>> {
        let picked = self.tune_pick(default, t, n, k);
        if let Some(kernel) = picked.and_then(|name| self.registry.kernel(name).ok()) {
            return Ok(kernel);
        }
        self.kernel(default)
    }

    /// The tune table's kernel for `default`'s kernel at this shape, if there is a table and
    /// it has one.
    fn tune_pick(&self, default: &str, t: usize, n: usize, k: usize) -> Option<&str> {
        let base = default.split('@').next().unwrap_or(default);
        self.tune
            .as_ref()
            .and_then(|table| table.pick(base, t, n, k))
    }

    /// The kernel for a `t` x `n` x `k` product of `kind` ([`Gpu::tuned`] over the dispatch's
    /// default), or None for a quantized type without a fused GEMM; remembered per shape, as
    /// decoding asks for the same few shapes every token.
    fn product_kernel(
        &self,
        kind: Product,
        t: usize,
        n: usize,
        k: usize,
    ) -> Result<Option<Arc<Kernel>>> {
        let key = (kind, t, n, k);
        if let Some(kernel) = self.products.borrow().get(&key) {
            return Ok(kernel.clone());
        }
        let kernel = self
            .default_kernel(kind, t, n, k)
            .map(|name| self.tuned(&name, t, n, k))
            .transpose()?;
        self.products.borrow_mut().insert(key, kernel.clone());
        Ok(kernel)
    }

    /// The dispatch's kernel for a `t` x `n` x `k` product of `kind`, or the build that
    /// [`Gpu::rewrites`] puts in its place (where the registry has it).
    fn default_kernel(&self, kind: Product, t: usize, n: usize, k: usize) -> Option<String> {
        let name = match kind {
            Product::Matvec(ty) => Some(dispatch::matvec(ty, t, n, k)),
            Product::MatvecS8(ty) => dispatch::matvec_s8(ty, t, n, k),
            Product::QuantGemm(ty) => dispatch::quant_gemm(ty, t, n, k, self.wgmma),
            Product::QuantGemmAdd(ty) => dispatch::quant_gemm_adding(ty, t, n, k, self.wgmma),
            Product::GatedGemm(ty, gelu) => dispatch::gated_gemm(ty, gelu, t, n, k, self.wgmma),
            Product::GemmF16 => Some(dispatch::gemm_f16(t).to_string()),
        }?;
        let gated = matches!(kind, Product::GatedGemm(..));
        let registered = |v: &str| self.registry.names().any(|n| n == v);
        let dims = [t, n, k];
        let name = (self.rewrites).kernel(name, dims, gated, self.sms, self.l2_bytes, registered);
        if !matches!(kind, Product::QuantGemmAdd(_)) {
            return Some(name);
        }
        // A build that adds where one is registered; the plan tells whether this one does.
        Some(
            self.add_output
                .kernel(&name)
                .filter(|v| registered(v))
                .unwrap_or(name),
        )
    }

    /// `plan` on f16 activations `xh` and weight blocks `blocks` into a new output `y`, zeroed
    /// first where a launch adds into it.
    fn run_gemm_plan<T: DeviceElem>(
        &self,
        plan: &GemmPlan,
        [n, k]: [usize; 2],
        xh: &DeviceBuffer<f16>,
        blocks: &DeviceBuffer<u32>,
        y: &mut DeviceBuffer<T>,
    ) -> Result<()> {
        if plan.zero_output {
            self.queue.stream.fill_zeros(y).gpu()?;
        }
        self.launch_gemm(plan, [n, k], vec![xh.into(), blocks.into(), y.into()])
    }

    /// Runs `plan`, a fused GEMM's launches for an `n` x `k` matrix, on `args` (its input,
    /// weights and output).
    fn launch_gemm(
        &self,
        plan: &GemmPlan,
        [n, k]: [usize; 2],
        mut args: Vec<Arg<'_>>,
    ) -> Result<()> {
        let fixed = args.len();
        for launch in &plan.launches {
            args.truncate(fixed);
            args.extend([u32_arg(launch.t)?, u32_arg(n)?, u32_arg(k)?]);
            let Some(range) = launch.range else {
                self.launch(&launch.kernel, &mut args)?;
                continue;
            };
            // 0: all of the product's tiles from tile0 on.
            let tiles = range.tiles.unwrap_or(0);
            args.extend([
                u32_arg(range.tile0)?,
                u32_arg(range.token0)?,
                u32_arg(tiles)?,
            ]);
            let stream_k = launch.kernel.signature().specialization_int("STREAMK") > Some(0);
            let grid = match (persistent_splits(&launch.kernel), range.tiles) {
                // Persistent blocks, one an SM (the kernel's own grid counts an H200's 132);
                // blocks past the last tile (stream-K: the last super-block) return at once.
                (Some(splits), _) => {
                    let units = if stream_k { k / 256 } else { 1 };
                    let blocks =
                        (range.tiles).map_or(self.sms, |tiles| (tiles * units).min(self.sms));
                    Grid::Dims([to_u32(blocks)?, 1, splits])
                }
                (None, Some(tiles)) => Grid::Dims([to_u32(tiles)?, 1, 1]),
                (None, None) => Grid::Auto,
            };
            let words = match stream_k {
                true => dispatch::stream_k_workspace_words(self.sms),
                false => specs::first_stores_workspace_words(
                    |name| kernel_param(&launch.kernel, name),
                    launch.t,
                    n,
                )
                .unwrap_or(1),
            };
            let mut workspace = self.gemm_workspace.borrow_mut();
            if workspace.as_ref().is_none_or(|ws| ws.len() < words) {
                *workspace = Some(self.queue.stream.alloc_zeros(words).gpu()?);
            }
            let mut launch_args: Vec<Arg<'_>> = args.iter_mut().map(Arg::reborrow).collect();
            launch_args.extend(workspace.as_mut().map(Arg::from));
            self.queue
                .launch_on(&launch.kernel, grid, &mut launch_args)?;
        }
        Ok(())
    }

    /// The launches of a `t` x `n` x `k` product of `kind` on `kernel` (the product's kernel),
    /// remembered per shape. gemm_wg's kernels, where no tune table chose them, leave a ragged
    /// last token tile's rows to the tiles of short batches ([`dispatch::token_head`]) and run a
    /// short last wave on one-warpgroup tiles ([`dispatch::wave_tail`]).
    fn gemm_plan(
        &self,
        kind: Product,
        kernel: &Arc<Kernel>,
        [t, n, k]: [usize; 3],
    ) -> Result<Rc<GemmPlan>> {
        let key = (kind, t, n, k);
        if let Some(plan) = self.gemm_plans.borrow().get(&key) {
            return Ok(plan.clone());
        }
        let untuned = |t| {
            self.default_kernel(kind, t, n, k)
                .filter(|name| self.tune_pick(name, t, n, k).is_none())
        };
        // The ragged token tile's rows, on their own kernel, if they split off.
        let gated = matches!(kind, Product::GatedGemm(..));
        let mut rest = None;
        let head_t = untuned(t).and_then(|name| dispatch::token_head(&name, t, n, gated, self.sms));
        if let Some(head_t) = head_t {
            let head = self.product_kernel(kind, head_t, n, k)?;
            let tail = self.product_kernel(kind, t - head_t, n, k)?;
            if let (Some(head), Some(tail)) = (head, tail) {
                if takes_tile_range(&head) && takes_tile_range(&tail) {
                    rest = Some((head_t, head, tail));
                }
            }
        }
        let (head_t, head) = match &rest {
            Some((head_t, head, _)) => (*head_t, head.clone()),
            None => (t, kernel.clone()),
        };
        let split = untuned(head_t)
            .filter(|_| takes_tile_range(&head))
            .and_then(|name| dispatch::wave_tail(&name, head_t, n, gated, self.sms));
        let mut launches = match split {
            Some(split) => vec![
                GemmLaunch::tiles(head, head_t, 0, split.head),
                GemmLaunch::tiles(
                    self.kernel(&split.tail)?,
                    head_t,
                    split.tail_first,
                    split.tail_tiles,
                ),
            ],
            None => vec![GemmLaunch::rows(head, head_t, 0)],
        };
        if let Some((head_t, _, tail)) = rest {
            launches.push(GemmLaunch::rows(tail, t, head_t));
        }
        let adds: Vec<_> = (launches.iter())
            .map(|launch| specs::adds_into_zeroed_output(|name| kernel_param(&launch.kernel, name)))
            .collect();
        let plan = Rc::new(GemmPlan {
            launches,
            zero_output: adds.contains(&true),
            adds_everywhere: !adds.contains(&false),
        });
        self.gemm_plans.borrow_mut().insert(key, plan.clone());
        Ok(plan)
    }

    /// The plan of `w`'s fused GEMM for `t` tokens (that `adds` into its output where it can)
    /// and its weight blocks, if the matrix is quantized and a fused GEMM takes its type.
    fn quant_gemm_plan<'w>(
        &self,
        w: &'w Matrix,
        t: usize,
        adds: bool,
    ) -> Result<Option<(Rc<GemmPlan>, &'w DeviceBuffer<u32>)>> {
        let Weights::Quant { ty, blocks } = &w.w else {
            return Ok(None);
        };
        let kind = match adds {
            true => Product::QuantGemmAdd(*ty),
            false => Product::QuantGemm(*ty),
        };
        let (n, k) = (w.out_dim, w.in_dim);
        match self.product_kernel(kind, t, n, k)? {
            Some(kernel) => Ok(Some((self.gemm_plan(kind, &kernel, [t, n, k])?, blocks))),
            None => Ok(None),
        }
    }

    /// `y` plus `w`'s bias, if it has one.
    fn with_bias(&self, y: DeviceBuffer<f32>, w: &Matrix) -> Result<Act> {
        let Some(b) = &w.bias else {
            return Ok(y.into());
        };
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
        Ok(with_bias.into())
    }

    /// A replayable decode step's work: `forward` reads the token and position from device
    /// memory, and the argmax goes to device memory.
    fn replayable_step(&mut self, forward: &mut dyn FnMut(&mut Self) -> Result<Act>) -> Result<()> {
        let logits = forward(self)?;
        let Self {
            queue,
            kernels,
            graphs,
            ..
        } = self;
        let graphs = graphs.as_mut().expect("graphs are on");
        argmax_into(queue, kernels, &logits, &mut graphs.next)
    }

    /// [`Gpu::replayable_step`] recorded as the graph for `keys`, then launched once.
    fn record_step(
        &mut self,
        keys: usize,
        forward: &mut dyn FnMut(&mut Self) -> Result<Act>,
    ) -> Result<()> {
        let stream = self.queue.stream.clone();
        let mut ran = Ok(());
        let graph = stream.capture(|_| {
            ran = self.replayable_step(forward);
            Ok(())
        });
        ran?;
        let graph = graph.gpu()?;
        graph.upload().gpu()?;
        graph.launch().gpu()?;
        let graphs = self.graphs.as_mut().expect("graphs are on");
        graphs.recorded.insert(keys, graph);
        Ok(())
    }

    /// `{family}_{type}`, e.g. `dequant_q4k`.
    fn quant_kernel(&self, family: &str, ty: GgmlType) -> Result<Arc<Kernel>> {
        let suffix = dispatch::quant_suffix(ty).expect("quantized weights have kernels");
        self.kernel(&format!("{family}_{suffix}"))
    }

    fn alloc(&self, len: usize) -> Result<DeviceBuffer<f32>> {
        self.queue.stream.alloc(len).gpu()
    }

    /// `x = kernel(x, c)` for an element-wise kernel `(x, y, c, n)`.
    fn map(&self, kernel: &Kernel, x: &mut Act, c: f32) -> Result<()> {
        let mut y = self.alloc(x.len())?;
        let n = u32_arg(x.len())?;
        self.launch(kernel, &mut [x.f32()?.into(), (&mut y).into(), c.into(), n])?;
        *x = y.into();
        Ok(())
    }

    /// The sin and cos rows of `rope` for every cache position, uploaded at first use.
    fn rope_rows(&self, rope: &RopeTable) -> Result<Rc<RopeRows>> {
        let key: Vec<u64> = std::iter::once(u64::from(rope.style() == RopeStyle::Neox))
            .chain(rope.inv_freq().iter().map(|f| f.to_bits()))
            .collect();
        if let Some(rows) = self.rope_tables.borrow().get(&key) {
            return Ok(rows.clone());
        }
        let (mut sin, mut cos) = (Vec::new(), Vec::new());
        for pos in 0..self.capacity {
            let (s, c) = rope.sin_cos(pos);
            sin.extend(s);
            cos.extend(c);
        }
        let rows = Rc::new(RopeRows {
            sin: self.queue.stream.upload(&sin).gpu()?,
            cos: self.queue.stream.upload(&cos).gpu()?,
        });
        self.rope_tables.borrow_mut().insert(key, rows.clone());
        Ok(rows)
    }

    /// RMS norm of rows of `cols`, by the first `cols` weights of `w`, of `x` or of a sum
    /// ([`NormOf`]). Norms of whole hidden rows feed products, so they also write the copy
    /// products read ([`Gpu::input_copy`]); per-head ones (QK norms) feed rope. Where only
    /// products read the output and they read f16, it is written in f16 alone.
    fn norm_rows(
        &self,
        x: &Act,
        of: NormOf<'_>,
        w: &DeviceBuffer<f32>,
        cols: usize,
        eps: f32,
    ) -> Result<Act> {
        let rows = x.len() / cols;
        let copy = match cols == self.n_embd {
            true => self.input_copy(rows, cols),
            false => InputCopy::None,
        };
        let (add, products_only) = match of {
            NormOf::Rows => (None, false),
            NormOf::RowsForProducts => (None, true),
            NormOf::Sum { y, sum } => (Some((y, sum)), true),
        };
        let fused_add = add.is_some();
        let (y, sum) = add.unzip();
        let mut h_copy = self.copy_buffer(copy, x.len())?;
        let half_only = products_only && copy == InputCopy::Half;
        let mut h = match half_only {
            true => None,
            false => Some(self.alloc(x.len())?),
        };
        let mut args = vec![x.f32()?.into()];
        args.extend(y.map(Act::f32).transpose()?.map(Arg::from));
        args.push(w.into());
        args.extend(sum.map(Arg::from));
        args.extend(h.as_mut().map(Arg::from));
        args.extend(h_copy.arg());
        args.extend([u32_arg(rows)?, u32_arg(cols)?, eps.into()]);
        let kernel = match (fused_add, half_only) {
            (true, _) => dispatch::add_rmsnorm(rows, cols, copy),
            (false, true) => dispatch::rmsnorm_half_only(rows, cols),
            (false, false) => dispatch::rmsnorm(rows, cols, copy),
        };
        self.launch(&*self.kernel(&kernel)?, &mut args)?;
        Ok(match (h, h_copy) {
            (Some(h), h_copy) => Act::with_copy(h, h_copy),
            (None, CopyBuffer::Half(h)) => Act::half_only(h),
            (None, _) => unreachable!("an f16-only norm writes its f16 copy"),
        })
    }

    /// The attention of `q` over layer `layer`'s cache, after appending `new_kv` (the keys and
    /// values of positions `start..`) to it; None where a kernel has written them already.
    fn attend_cache(
        &mut self,
        layer: usize,
        q: &Act,
        new_kv: Option<(&Act, &Act)>,
        start: usize,
        p: &AttentionParams,
    ) -> Result<Act> {
        check_attention(p)?;
        let n_tokens = q.len() / (p.n_head * p.head_dim_k);
        let needed = start + n_tokens;
        self.check_capacity(needed)?;
        let o_len = n_tokens * p.n_head * p.head_dim_v;
        // The o projection's input: at decode sizes the split attention's combine writes its
        // int8 blocks too, where no block straddles two heads.
        let mut o_copy = match self.input_copy(n_tokens, p.n_head * p.head_dim_v) {
            InputCopy::Int8 if p.head_dim_v.is_multiple_of(reference::ACT_S8_GROUP) => {
                self.copy_buffer(InputCopy::Int8, o_len)?
            }
            _ => CopyBuffer::None,
        };
        let Self {
            queue,
            kernels,
            cache,
            registry,
            graphs,
            no_offset,
            ..
        } = self;
        let cache = &mut cache[layer];
        debug_assert_eq!(cache.len, start, "the model truncates the cache first");
        let (host_start, at) = position_args(graphs, no_offset, start);
        if let Some((k, v)) = new_kv {
            for (x, c, width) in [
                (k, &mut cache.k, p.head_dim_k),
                (v, &mut cache.v, p.head_dim_v),
            ] {
                queue.launch(
                    &kernels.append_f16,
                    &mut [
                        x.f32()?.into(),
                        at.into(),
                        c.into(),
                        u32_arg(host_start)?,
                        u32_arg(p.n_head_kv * width)?,
                        u32_arg(x.len())?,
                    ],
                )?;
            }
        }
        cache.len = needed;
        let mut o = queue.stream.alloc(o_len).gpu()?;
        let shape = |start| -> Result<[Arg<'static>; 9]> {
            Ok([
                u32_arg(p.n_head)?,
                u32_arg(p.n_head_kv)?,
                u32_arg(p.head_dim_k)?,
                u32_arg(p.head_dim_v)?,
                u32_arg(n_tokens)?,
                u32_arg(start)?,
                u32_arg(p.window.unwrap_or(0))?,
                p.scale.into(),
                p.softcap.unwrap_or(0.0).into(),
            ])
        };
        let flash = dispatch::flash_attention(p.head_dim_k, p.head_dim_v, n_tokens);
        if let Some(name) = flash {
            let qh = q.half(queue, &kernels.to_f16)?;
            let mut o16 = queue.stream.alloc::<f16>(o.len()).gpu()?;
            let mut args = vec![
                (&*qh).into(),
                (&cache.k).into(),
                (&cache.v).into(),
                (&mut o).into(),
                (&mut o16).into(),
            ];
            args.extend(shape(start)?);
            queue.launch(&*registry.kernel(name).gpu()?, &mut args)?;
            return Ok(Act::with_half(o, Some(o16)));
        }
        // Few queries, or head widths without a flash build: split the keys over blocks. A
        // replayable step covers its graph's key capacity.
        let keys = replay_keys(graphs).unwrap_or(needed);
        let split = dispatch::attention_split(keys, p.n_head * n_tokens);
        let n_splits = keys.div_ceil(split);
        let mut part: DeviceBuffer<f32> = queue
            .stream
            .alloc(n_tokens * p.n_head * n_splits * (p.head_dim_v + 2))
            .gpu()?;
        let mut args = vec![
            q.f32()?.into(),
            (&cache.k).into(),
            (&cache.v).into(),
            at.into(),
            (&mut part).into(),
        ];
        args.extend(shape(host_start)?);
        args.extend([u32_arg(split)?, u32_arg(keys)?]);
        queue.launch(&kernels.attention_split, &mut args)?;
        let combine = match o_copy {
            CopyBuffer::Int8(_) => &kernels.attention_combine_q,
            _ => &kernels.attention_combine,
        };
        let mut args = vec![(&part).into(), (&mut o).into()];
        args.extend(o_copy.arg());
        for dim in [p.n_head, n_tokens, p.head_dim_v, n_splits] {
            args.push(u32_arg(dim)?);
        }
        queue.launch(combine, &mut args)?;
        Ok(Act::with_copy(o, o_copy))
    }

    /// Refuses a forward pass that would hold more than the cache's positions.
    fn check_capacity(&self, needed: usize) -> Result<()> {
        if needed > self.capacity {
            return Err(GpuError::CacheFull {
                needed,
                capacity: self.capacity,
            }
            .into());
        }
        Ok(())
    }

    /// The copy that the kernel producing `rows` rows of `cols` for products writes: f16 when
    /// the products run on the tensor cores, int8 blocks when they are int8 matvecs (which take
    /// rows of whole 64-value groups).
    fn input_copy(&self, rows: usize, cols: usize) -> InputCopy {
        if products_read_half(rows) {
            InputCopy::Half
        } else if self.s8_decode && self.s8_fused && cols.is_multiple_of(reference::ACT_S8_GROUP) {
            InputCopy::Int8
        } else {
            InputCopy::None
        }
    }

    /// `act(gate) * x` of `len` values for the down projection, which is its only reader; with
    /// `pairs`, from gate and up values in a gated pair's layout (`gate`'s gates, `x`'s up
    /// values: a paired matrix's matvec output as both).
    fn gated_product(
        &self,
        activation: Activation,
        gate: &Act,
        x: &Act,
        len: usize,
        pairs: bool,
    ) -> Result<Act> {
        let rows = self.batch.get();
        let copy = match self.input_copy(rows, len / rows) {
            // No paired kernel writes f16: decode batches do not read it.
            InputCopy::Half if pairs => InputCopy::None,
            copy => copy,
        };
        let k = &self.kernels;
        let kernel = match (activation, copy, pairs) {
            (Activation::Silu, InputCopy::None, false) => &k.silu_mul,
            (Activation::Silu, InputCopy::Half, _) => &k.silu_mul_half,
            (Activation::Silu, InputCopy::Int8, false) => &k.silu_mul_int8,
            (Activation::Silu, InputCopy::None, true) => &k.silu_mul_pairs,
            (Activation::Silu, InputCopy::Int8, true) => &k.silu_mul_pairs_int8,
            (Activation::GeluTanh, InputCopy::None, false) => &k.gelu_mul,
            (Activation::GeluTanh, InputCopy::Half, _) => &k.gelu_mul_half,
            (Activation::GeluTanh, InputCopy::Int8, false) => &k.gelu_mul_int8,
            (Activation::GeluTanh, InputCopy::None, true) => &k.gelu_mul_pairs,
            (Activation::GeluTanh, InputCopy::Int8, true) => &k.gelu_mul_pairs_int8,
            (Activation::Sigmoid, ..) => return unsupported("sigmoid-gated attention"),
        };
        let mut y = self.alloc(len)?;
        let mut y_copy = self.copy_buffer(copy, len)?;
        let mut args = vec![gate.f32()?.into(), x.f32()?.into(), (&mut y).into()];
        args.extend(y_copy.arg());
        args.push(u32_arg(len)?);
        self.launch(kernel, &mut args)?;
        Ok(Act::with_copy(y, y_copy))
    }

    /// A buffer for a kernel's `copy` of its output of `len` values.
    fn copy_buffer(&self, copy: InputCopy, len: usize) -> Result<CopyBuffer> {
        let stream = &self.queue.stream;
        Ok(match copy {
            InputCopy::None => CopyBuffer::None,
            InputCopy::Half => CopyBuffer::Half(stream.alloc::<f16>(len).gpu()?),
            InputCopy::Int8 => CopyBuffer::Int8(stream.alloc::<u32>(act_s8_words(len)).gpu()?),
        })
    }
}

/// Refuses attention heads wider than the attention kernels take.
fn check_attention(p: &AttentionParams) -> Result<()> {
    if p.head_dim_k.max(p.head_dim_v) > MAX_HEAD_DIM {
        return unsupported("attention heads wider than 512");
    }
    Ok(())
}

/// The argmax of the one-row `logits` into `index` on the device.
fn argmax_into(
    queue: &Queue,
    kernels: &Kernels,
    logits: &Act,
    index: &mut DeviceBuffer<i32>,
) -> Result<()> {
    queue.launch(
        &kernels.argmax,
        &mut [
            logits.f32()?.into(),
            index.into(),
            u32_arg(1)?,
            u32_arg(logits.len())?,
        ],
    )
}

/// A token id from argmax_rows's i32 index.
fn token_of(index: i32) -> Result<u32> {
    u32::try_from(index).map_err(|_| GpuError::Unsupported("a negative argmax index").into())
}

/// The position arguments of a kernel that takes one both ways: (host part, device offset). A
/// replayable decode step reads all of it from device memory; other launches pass `start`.
fn position_args<'a>(
    graphs: &'a Option<DecodeGraphs>,
    no_offset: &'a DeviceBuffer<u32>,
    start: usize,
) -> (usize, &'a DeviceBuffer<u32>) {
    match graphs {
        Some(g) if g.replaying.is_some() => (0, &g.position),
        _ => (start, no_offset),
    }
}

/// The key capacity of the replayable decode step running, if one is.
fn replay_keys(graphs: &Option<DecodeGraphs>) -> Option<usize> {
    graphs.as_ref().and_then(|g| g.replaying)
}

/// Whether products of `rows` rows run on the tensor cores, which read f16 inputs.
fn products_read_half(rows: usize) -> bool {
    rows > dispatch::MATVEC_MAX_T
}

/// A size as the kernels' u32 scalar, refusing what does not fit.
fn u32_arg(v: usize) -> Result<Arg<'static>> {
    to_u32(v).map(Arg::from)
}

fn to_u32(v: usize) -> Result<u32> {
    u32::try_from(v).map_err(|_| GpuError::Unsupported("a tensor dimension of 2^32 or more").into())
}

impl Backend for Gpu {
    type Tensor = Act;
    type Matrix = Matrix;
    type Vector = DeviceBuffer<f32>;
    type Experts = Infallible;

    fn matrix(&self, m: HostMatrix<'_>, bias: Option<Vec<f32>>) -> Result<Matrix> {
        let w = if dispatch::has_kernels(m.ty) {
            let words = dispatch::device_words(m.ty, &m.data).map_err(|error| {
                ModelError::from(zinc_models::gguf::GgufError::Quant {
                    name: m.name.clone(),
                    error,
                })
            })?;
            Weights::Quant {
                ty: m.ty,
                blocks: self.queue.stream.upload(&words).gpu()?,
            }
        } else {
            let w: Vec<f16> = m.to_f32()?.into_iter().map(f16::from_f32).collect();
            Weights::F16(self.queue.stream.upload(&w).gpu()?)
        };
        Ok(Matrix {
            w,
            out_dim: m.rows,
            in_dim: m.cols,
            bias: bias
                .map(|b| self.queue.stream.upload(&b))
                .transpose()
                .gpu()?,
            paired: false,
        })
    }

    fn gated_pair(&self, gate: &HostMatrix<'_>, up: &HostMatrix<'_>) -> Result<Option<Matrix>> {
        let (n, k) = (gate.rows, gate.cols);
        let same = gate.ty == up.ty && (up.rows, up.cols) == (n, k);
        // Either activation: the kernels exist for both or neither.
        let kernel = self.product_kernel(
            Product::GatedGemm(gate.ty, false),
            dispatch::MATVEC_MAX_T + 1,
            n,
            k,
        )?;
        if !same || kernel.is_none() || gate.data.len() != up.data.len() {
            return Ok(None);
        }
        let group = specs::PAIR_GROUP * gate.data.len() / n;
        let mut rows = Vec::with_capacity(2 * gate.data.len());
        for (g, u) in gate.data.chunks(group).zip(up.data.chunks(group)) {
            rows.extend_from_slice(g);
            rows.extend_from_slice(u);
        }
        let pair = HostMatrix {
            name: format!("{} and {}", gate.name, up.name),
            ty: gate.ty,
            rows: 2 * n,
            cols: k,
            data: rows.into(),
        };
        let matrix = self.matrix(pair, None)?;
        Ok(Some(Matrix {
            paired: true,
            ..matrix
        }))
    }

    fn gated(&self, activation: Activation, x: &Act, pair: &Matrix) -> Result<Act> {
        let (n, k) = (pair.out_dim / 2, pair.in_dim);
        let t = x.len() / k;
        if t <= dispatch::MATVEC_MAX_T {
            // Decode: one matvec over both matrices, then the gated product of its pairs.
            let both = self.matmul(x, pair)?;
            return self.gated_product(activation, &both, &both, t * n, true);
        }
        let gelu = match activation {
            Activation::Silu => false,
            Activation::GeluTanh => true,
            Activation::Sigmoid => return unsupported("sigmoid-gated pairs"),
        };
        let (Weights::Quant { ty, blocks }, true) = (&pair.w, pair.paired) else {
            return unsupported("a gated product of a matrix that is no gated pair");
        };
        let Some(kernel) = self.product_kernel(Product::GatedGemm(*ty, gelu), t, n, k)? else {
            return unsupported("a gated pair of this type and shape");
        };
        let xh = x.half(&self.queue, &self.kernels.to_f16)?;
        // In f16 only: the down projection reads nothing else.
        let mut y = self.queue.stream.alloc::<f16>(t * n).gpu()?;
        let plan = self.gemm_plan(Product::GatedGemm(*ty, gelu), &kernel, [t, n, k])?;
        self.run_gemm_plan(&plan, [n, k], &xh, blocks, &mut y)?;
        Ok(Act::half_only(y))
    }

    fn vector(&self, v: Vec<f32>) -> Result<DeviceBuffer<f32>> {
        self.queue.stream.upload(&v).gpu()
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

    fn embed(&self, table: &Matrix, tokens: &[u32], scale: f32) -> Result<Act> {
        self.batch.set(tokens.len());
        let uploaded;
        let ids = match &self.graphs {
            // A replayable step reads its token from device memory.
            Some(g) if g.replaying.is_some() => &g.token,
            _ => {
                uploaded = self.queue.stream.upload(tokens).gpu()?;
                &uploaded
            }
        };
        let mut y = self.alloc(tokens.len() * table.in_dim)?;
        let n_tokens = u32_arg(tokens.len())?;
        let cols = u32_arg(table.in_dim)?;
        match &table.w {
            Weights::Quant { ty, blocks } => self.launch(
                &*self.quant_kernel("embed", *ty)?,
                &mut [
                    ids.into(),
                    blocks.into(),
                    (&mut y).into(),
                    u32_arg(table.out_dim)?,
                    n_tokens,
                    cols,
                    scale.into(),
                ],
            )?,
            Weights::F16(w) => self.launch(
                &self.kernels.embed,
                &mut [
                    w.into(),
                    ids.into(),
                    (&mut y).into(),
                    n_tokens,
                    cols,
                    scale.into(),
                ],
            )?,
        }
        Ok(y.into())
    }

    fn matmul(&self, x: &Act, w: &Matrix) -> Result<Act> {
        let t = x.len() / w.in_dim;
        let (n, k) = (w.out_dim, w.in_dim);
        let mut y = self.alloc(t * n)?;
        let dims = |t| -> Result<[Arg<'static>; 3]> { Ok([u32_arg(t)?, u32_arg(n)?, u32_arg(k)?]) };
        match &w.w {
            Weights::Quant { ty, blocks } if t <= dispatch::MATVEC_MAX_T => {
                let on_s8 = match self.s8_decode {
                    true => self.product_kernel(Product::MatvecS8(*ty), t, n, k)?,
                    false => None,
                };
                let (kernel, xq) = match on_s8 {
                    Some(kernel) => {
                        let xq = x.quantized(&self.queue, &self.kernels.quantize_s8)?;
                        (kernel, Some(xq))
                    }
                    None => {
                        let kernel = self.product_kernel(Product::Matvec(*ty), t, n, k)?;
                        let kernel = kernel.expect("every quantized type with kernels has matvecs");
                        (kernel, None)
                    }
                };
                let x_arg = match &xq {
                    Some(xq) => (&**xq).into(),
                    None => x.f32()?.into(),
                };
                let [t, n, k] = dims(t)?;
                self.launch(
                    &kernel,
                    &mut [x_arg, blocks.into(), (&mut y).into(), t, n, k],
                )?;
            }
            weights => {
                let xh = x.half(&self.queue, &self.kernels.to_f16)?;
                if let Some((plan, blocks)) = self.quant_gemm_plan(w, t, false)? {
                    self.run_gemm_plan(&plan, [n, k], &xh, blocks, &mut y)?;
                    return self.with_bias(y, w);
                }
                let scratch;
                let wh = match weights {
                    Weights::F16(wh) => wh,
                    Weights::Quant { ty, blocks } => {
                        // The stopgap of the module docs: a transient f16 copy of the matrix.
                        let mut wh = self.queue.stream.alloc::<f16>(n * k).gpu()?;
                        let [n, k] = [u32_arg(n)?, u32_arg(k)?];
                        self.launch(
                            &*self.quant_kernel("dequant", *ty)?,
                            &mut [blocks.into(), (&mut wh).into(), n, k],
                        )?;
                        scratch = wh;
                        &scratch
                    }
                };
                let kernel = self.product_kernel(Product::GemmF16, t, n, k)?;
                let kernel = kernel.expect("gemm_f16 takes every shape");
                let [t, n, k] = dims(t)?;
                self.launch(
                    &kernel,
                    &mut [(&*xh).into(), wh.into(), (&mut y).into(), t, n, k],
                )?;
            }
        }
        self.with_bias(y, w)
    }

    /// Where the product's launches all add into their output (K splits, and with
    /// `ZINC_ADD_OUTPUT=atomics` or `tma` the unsplit tiles' ADD_OUTPUT builds): into `y`
    /// itself, which spares the memset that zeroes a new output and the add that follows.
    fn matmul_add(&self, y: &mut Act, x: &Act, w: &Matrix) -> Result<bool> {
        let t = x.len() / w.in_dim;
        let off = self.add_output == dispatch::AddOutput::Off;
        let fits = y.f32.is_some() && y.len() == t * w.out_dim;
        if off || !fits || w.bias.is_some() || t <= dispatch::MATVEC_MAX_T {
            return Ok(false);
        }
        let Some((plan, blocks)) = self.quant_gemm_plan(w, t, true)? else {
            return Ok(false);
        };
        if !plan.adds_everywhere {
            return Ok(false);
        }
        let xh = x.half(&self.queue, &self.kernels.to_f16)?;
        self.launch_gemm(
            &plan,
            [w.out_dim, w.in_dim],
            vec![(&*xh).into(), blocks.into(), y.f32_mut()?.into()],
        )?;
        Ok(true)
    }

    fn rms_norm(&self, x: &Act, weight: &DeviceBuffer<f32>, eps: f32) -> Result<Act> {
        self.norm_rows(x, NormOf::Rows, weight, weight.len(), eps)
    }

    /// Read by products alone: where they read f16 (prefill-size batches) the output is in f16
    /// alone; elsewhere as `rms_norm`.
    fn rms_norm_for_products(&self, x: &Act, weight: &DeviceBuffer<f32>, eps: f32) -> Result<Act> {
        self.norm_rows(x, NormOf::RowsForProducts, weight, weight.len(), eps)
    }

    fn rms_norm_unit(&self, x: &Act, width: usize, eps: f32) -> Result<Act> {
        // A unit weight: multiplying by 1.0 is exact, so this equals a weightless norm.
        let ones = {
            let mut cached = self.ones.borrow_mut();
            match &*cached {
                Some(ones) if ones.len() >= width => ones.clone(),
                _ => {
                    let ones = Rc::new(self.queue.stream.upload(&vec![1f32; width]).gpu()?);
                    *cached = Some(ones.clone());
                    ones
                }
            }
        };
        self.norm_rows(x, NormOf::Rows, &ones, width, eps)
    }

    fn rope(
        &self,
        x: &mut Act,
        n_heads: usize,
        head_dim: usize,
        start: usize,
        rope: &RopeTable,
    ) -> Result<()> {
        let half_dims = rope.inv_freq().len();
        let n_tokens = x.len() / (n_heads * head_dim);
        if half_dims == 0 {
            return Ok(());
        }
        self.check_capacity(start + n_tokens)?;
        let rows = self.rope_rows(rope)?;
        let neox = u32::from(rope.style() == RopeStyle::Neox);
        let (start, at) = position_args(&self.graphs, &self.no_offset, start);
        // Prefill queries go to flash attention in f16 (keys go to the cache from f32; their
        // copy is the price of one kernel for both).
        let half = products_read_half(n_tokens);
        let mut y = self.alloc(x.len())?;
        let copy = match half {
            true => InputCopy::Half,
            false => InputCopy::None,
        };
        let mut y_copy = self.copy_buffer(copy, x.len())?;
        let mut args = vec![
            x.f32()?.into(),
            (&rows.sin).into(),
            (&rows.cos).into(),
            at.into(),
        ];
        args.push((&mut y).into());
        args.extend(y_copy.arg());
        args.extend([
            u32_arg(n_heads)?,
            u32_arg(n_tokens)?,
            u32_arg(head_dim)?,
            u32_arg(half_dims)?,
            neox.into(),
            u32_arg(start)?,
        ]);
        let kernel = if half {
            &self.kernels.rope_half
        } else {
            &self.kernels.rope
        };
        self.launch(kernel, &mut args)?;
        *x = Act::with_copy(y, y_copy);
        Ok(())
    }

    fn attention(
        &mut self,
        layer: usize,
        q: &Act,
        k: &Act,
        v: &Act,
        start: usize,
        p: &AttentionParams,
    ) -> Result<Act> {
        self.attend_cache(layer, q, Some((k, v)), start, p)
    }

    /// The steps before the attention in one launch of rope_append_f16, which writes the keys
    /// and values into the cache itself, and the queries in f32 for decode's split attention or
    /// in f16 for flash attention (rope_append_f16_q16); without rope, or for prefill-size
    /// batches without a flash build, [`attention_steps`].
    fn attention_block(
        &mut self,
        layer: usize,
        x: AttentionInputs<'_, Act, DeviceBuffer<f32>>,
        start: usize,
        p: &AttentionParams,
    ) -> Result<Act> {
        let n_tokens = x.q.len() / (p.n_head * p.head_dim_k);
        let half_dims = x.rope.inv_freq().len();
        let flash = dispatch::flash_attention(p.head_dim_k, p.head_dim_v, n_tokens).is_some();
        if half_dims == 0 || (n_tokens > dispatch::MATVEC_MAX_T && !flash) {
            return attention_steps(self, layer, x, start, p);
        }
        check_attention(p)?;
        self.check_capacity(start + n_tokens)?;
        let rows = self.rope_rows(x.rope)?;
        let (v, v_norm) = match &x.v {
            ValueSource::Given(v) => (v, false),
            ValueSource::UnitNormed(v) => (v, true),
            ValueSource::UnitNormedKeys => (&x.k, true),
        };
        // Without the norms their weights are not read: any f32 buffer will do.
        let (qw, kw) = x.qk_norm.unwrap_or((&rows.sin, &rows.sin));
        let (mut q32, mut q16) = match flash {
            true => (None, Some(self.queue.stream.alloc::<f16>(x.q.len()).gpu()?)),
            false => (Some(self.alloc(x.q.len())?), None),
        };
        let (host_start, at) = position_args(&self.graphs, &self.no_offset, start);
        let cache = &mut self.cache[layer];
        let mut args = vec![
            x.q.f32()?.into(),
            x.k.f32()?.into(),
            v.f32()?.into(),
            qw.into(),
            kw.into(),
            (&rows.sin).into(),
            (&rows.cos).into(),
            at.into(),
            match (&mut q32, &mut q16) {
                (_, Some(q)) => q.into(),
                (q, None) => q.as_mut().expect("f32 queries without f16 ones").into(),
            },
            (&mut cache.k).into(),
            (&mut cache.v).into(),
        ];
        for dim in [
            p.n_head,
            p.n_head_kv,
            p.head_dim_k,
            p.head_dim_v,
            n_tokens,
            half_dims,
        ] {
            args.push(u32_arg(dim)?);
        }
        args.extend([
            u32::from(x.rope.style() == RopeStyle::Neox).into(),
            u32::from(x.qk_norm.is_some()).into(),
            u32::from(v_norm).into(),
            x.eps.into(),
            u32_arg(host_start)?,
        ]);
        let kernel = match flash {
            true => &self.kernels.rope_append_q16,
            false => &self.kernels.rope_append,
        };
        self.queue.launch(kernel, &mut args)?;
        let q = match (q32, q16) {
            (_, Some(q)) => Act::half_only(q),
            (q, None) => q.expect("f32 queries without f16 ones").into(),
        };
        self.attend_cache(layer, &q, None, start, p)
    }

    fn glu(&self, activation: Activation, gate: &Act, x: &Act) -> Result<Act> {
        self.gated_product(activation, gate, x, x.len(), false)
    }

    fn gate_rows(&self, _: &mut Act, _: &Act) -> Result<()> {
        unsupported("the shared-expert gate")
    }

    fn add(&self, x: &mut Act, y: &Act) -> Result<()> {
        let mut sum = self.alloc(x.len())?;
        self.launch(
            &self.kernels.add,
            &mut [
                x.f32()?.into(),
                y.f32()?.into(),
                (&mut sum).into(),
                u32_arg(x.len())?,
            ],
        )?;
        *x = sum.into();
        Ok(())
    }

    /// The norm is read by products alone: where they read f16 (prefill-size batches) it is in
    /// f16 alone; the sum, the residual stream, is in f32 at every size.
    fn add_rms_norm(
        &self,
        x: &mut Act,
        y: &Act,
        weight: &DeviceBuffer<f32>,
        eps: f32,
    ) -> Result<Act> {
        let mut sum = self.alloc(x.len())?;
        let of = NormOf::Sum { y, sum: &mut sum };
        let h = self.norm_rows(x, of, weight, weight.len(), eps)?;
        *x = sum.into();
        Ok(h)
    }

    fn scale(&self, x: &mut Act, s: f32) -> Result<()> {
        self.map(&self.kernels.scale, x, s)
    }

    fn softcap(&self, x: &mut Act, cap: f32) -> Result<()> {
        self.map(&self.kernels.softcap, x, cap)
    }

    fn last_row(&self, x: &Act, width: usize) -> Result<Act> {
        let mut y = self.alloc(width)?;
        self.queue.copy(
            &self.kernels.copy,
            x.f32()?,
            x.len() - width,
            &mut y,
            0,
            width,
        )?;
        Ok(y.into())
    }

    fn moe(&self, _: &Act, _: &Act, experts: &Infallible, _: &Router) -> Result<Act> {
        match *experts {}
    }

    fn delta_net(&mut self, _: usize, _: DeltaNetStep<'_, Act, DeviceBuffer<f32>>) -> Result<Act> {
        unsupported("the gated delta net")
    }

    fn to_host(&self, x: &Act) -> Result<Vec<f32>> {
        self.queue.stream.download(x.f32()?).gpu()
    }

    fn argmax(&self, logits: &Act) -> Result<u32> {
        let mut index = self.queue.stream.alloc::<i32>(1).gpu()?;
        argmax_into(&self.queue, &self.kernels, logits, &mut index)?;
        token_of(self.queue.stream.download(&index).gpu()?[0])
    }

    /// The candidates are selected on the device: `k` (id, logit) pairs come back, not the
    /// row. Beyond the kernel's k or row width, the host selects them.
    fn top_k(&self, logits: &Act, k: usize) -> Result<Vec<(u32, f32)>> {
        let cols = logits.len();
        let k = k.min(cols);
        if k == 0 || k > TOP_K_MAX || cols > TOP_K_MAX_COLS {
            return Ok(zinc_models::sampler::top_k(&self.to_host(logits)?, k));
        }
        let stream = &self.queue.stream;
        let mut ids = stream.alloc::<i32>(k).gpu()?;
        let mut values = stream.alloc::<f32>(k).gpu()?;
        self.launch(
            &self.kernels.top_k,
            &mut [
                logits.f32()?.into(),
                (&mut ids).into(),
                (&mut values).into(),
                u32_arg(1)?,
                u32_arg(cols)?,
                u32_arg(k)?,
            ],
        )?;
        let ids = stream.download(&ids).gpu()?;
        let values = stream.download(&values).gpu()?;
        ids.into_iter()
            .zip(values)
            .map(|(id, v)| Ok((token_of(id)?, v)))
            .collect()
    }

    fn greedy_step(
        &mut self,
        token: u32,
        pos: usize,
        forward: &mut dyn FnMut(&mut Self) -> Result<Act>,
    ) -> Result<u32> {
        let profiling = self.queue.profile.borrow().is_some();
        let Some(graphs) = self.graphs.as_mut().filter(|_| !profiling) else {
            let logits = forward(self)?;
            return self.argmax(&logits);
        };
        if pos + 1 > self.capacity {
            return Err(GpuError::CacheFull {
                needed: pos + 1,
                capacity: self.capacity,
            }
            .into());
        }
        let keys = graph_keys(pos + 1, self.capacity);
        let stream = self.queue.stream.clone();
        stream.copy_to_device(&[token], &mut graphs.token).gpu()?;
        let position = u32::try_from(pos).map_err(|_| GpuError::Unsupported("positions past 2^32"));
        stream
            .copy_to_device(&[position.gpu()?], &mut graphs.position)
            .gpu()?;
        if let Some(graph) = graphs.recorded.get(&keys) {
            graph.launch().gpu()?;
            // What the recorded forward pass did on the host.
            self.cache.iter_mut().for_each(|layer| layer.len = pos + 1);
        } else {
            // The first step of a capacity runs as it will be recorded, loading its kernels and
            // filling the caches; the second is recorded.
            let record = !graphs.warmed.insert(keys) && graphs.record;
            graphs.replaying = Some(keys);
            let ran = if record {
                self.record_step(keys, forward)
            } else {
                self.replayable_step(forward)
            };
            if let Some(graphs) = self.graphs.as_mut() {
                graphs.replaying = None;
            }
            ran?;
        }
        let graphs = self.graphs.as_ref().expect("graphs are on");
        token_of(stream.download(&graphs.next).gpu()?[0])
    }
}
