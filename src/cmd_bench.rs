//! `zinc bench-kernels [FILTER] [--shapes ...] [--json FILE] [--tune]`: times kernels against their
//! baselines in the same run.
//!
//! Each figure is the median of many CUDA-event timings after warm-up. Every run reads a different
//! copy of its inputs, from enough copies that together they exceed twice the L2, so no run finds
//! its inputs cached by the previous one. GEMMs are compared with cuBLAS fp16 at the same shape
//! (f16 output; those writing f32 also with cuBLAS writing f32, the same output bytes),
//! memory-bound kernels with a device-to-device copy moving the same number of bytes.

use crate::gpu::dispatch::{self, TuneEntry, TuneTable};
use crate::gpu::{rewrites_from_env, runs_wgmma};
use std::collections::HashMap;
use std::path::PathBuf;

use anyhow::{Context, Result};
use serde::Serialize;
use zinc_runtime::half::f16;
use zinc_runtime::{time_median_ms, Blas, DeviceBuffer, GemmOutput, RuntimeError, Stream};

use crate::harness::{self, DeviceCase, ElemBuf, HostCase, LastCase};
use crate::registry::Registry;
use crate::specs::{adds_into_output, variant_param, Baseline, Cost, Elem, Op, Shape, Spec};
use crate::stamps;

/// Roughly how long each measurement runs; the iteration count follows from a probe.
const TARGET_MS: f32 = 200.0;
const MIN_ITERS: usize = 20;
const MAX_ITERS: usize = 1000;
/// Tiny working sets stay in L2 whatever the rotation; this bounds their copies.
const MAX_SETS: usize = 64;

#[derive(clap::Args)]
pub struct Args {
    /// Only kernels whose name contains one of the FILTERs, or ends with one ending in `$`
    /// (`gemm_q4k_wg@BT=256$`: that variant alone); a FILTER naming a variant
    /// (`gemm_q4k@BN=64`) times the variants it matches without --tune.
    filters: Vec<String>,
    /// Shapes to time instead of each kernel's defaults, e.g. `2048x4096,512x4096x14336`; a
    /// kernel runs those of its rank (rows x cols, n, or T x N x K).
    #[arg(long, value_delimiter = ',')]
    shapes: Vec<Shape>,
    /// Also write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Also time every variant (`kernel@NAME=VALUE,...`) and report the fastest per shape.
    #[arg(long)]
    tune: bool,
    /// With --tune: also write the fastest variants as the engine's dispatch table (used when
    /// the environment variable ZINC_TUNE names the file).
    #[arg(long, requires = "tune")]
    table: Option<PathBuf>,
    /// Time, of each quantized GEMM and matvec, only the variant the engine's dispatch runs at
    /// each shape (without a ZINC_TUNE table); of every other kernel its default. Here a FILTER
    /// `kernel$` takes that kernel in any variant.
    #[arg(long, conflicts_with = "tune")]
    dispatch: bool,
}

#[derive(Serialize)]
struct Report {
    device: String,
    arch: String,
    kernels_arch: String,
    l2_bytes: u64,
    results: Vec<Row>,
    fastest: Vec<Fastest>,
}

/// One kernel at one shape, beside its baseline.
#[derive(Serialize)]
struct Row {
    kernel: String,
    shape: Vec<usize>,
    shape_desc: String,
    /// "TFLOP/s" or "GB/s".
    unit: &'static str,
    median_us: Option<f64>,
    rate: Option<f64>,
    /// Copies of the inputs cycled through.
    sets: Option<usize>,
    baseline: &'static str,
    baseline_us: Option<f64>,
    baseline_rate: Option<f64>,
    /// Baseline time over kernel time: above 1, the kernel is faster.
    ratio: Option<f64>,
    /// GEMMs with an f32 output: cuBLAS's time writing f32 too (its baseline writes f16, half
    /// the output bytes), and that time over the kernel's.
    f32_out_us: Option<f64>,
    f32_out_ratio: Option<f64>,
    error: Option<String>,
}

/// The fastest variant of a kernel at one shape (`--tune`).
#[derive(Serialize)]
struct Fastest {
    kernel: String,
    shape: Vec<usize>,
    shape_desc: String,
    variant: String,
    median_us: f64,
}

#[derive(Clone, Copy)]
struct Timed {
    us: f64,
    sets: usize,
}

/// Baselines are shared by the kernels and variants that need the same one.
#[derive(Clone, PartialEq, Eq, Hash)]
enum BaselineKey {
    /// The shape, and whether cuBLAS writes f32 (else f16).
    Gemm(Vec<usize>, bool),
    CopyBytes(u64),
}

struct Bench {
    registry: Registry,
    stream: Stream,
    l2_bytes: u64,
    blas: Option<Blas>,
    baselines: HashMap<BaselineKey, Result<Timed, String>>,
}

pub fn run(args: &Args) -> Result<()> {
    let device = harness::open_device()?;
    let registry = harness::open_registry(&device)?;
    println!("{}", harness::device_line(&device, &registry));
    let props = device.props();
    let mut bench = Bench {
        stream: device.default_stream(),
        l2_bytes: props.l2_bytes,
        registry,
        blas: None,
        baselines: HashMap::new(),
    };

    let names: Vec<&str> = bench
        .registry
        .names()
        .filter(|n| {
            args.filters.is_empty()
                || (args.filters.iter()).any(|f| bench_filter_matches(n, f, args.dispatch))
        })
        .filter(|n| {
            // A copy of another build (registry::EmbeddedKernel::same_as) only where the
            // dispatch runs it under its name or a filter names it.
            (args.tune && !bench.registry.is_copy(n))
                || args.dispatch
                || !n.contains('@')
                || harness::variant_filter_matches(n, &args.filters)
        })
        .collect();
    for filter in unmatched_filters(&names, &args.filters, args.dispatch) {
        eprintln!("warning: no registered kernel or variant matches `{filter}`; it times nothing");
    }
    let registered: Vec<&str> = bench.registry.names().collect();
    let engine = EngineDispatch {
        wgmma: runs_wgmma(&bench.registry),
        rewrites: rewrites_from_env(),
        sms: props.sm_count as usize,
        l2_bytes: usize::try_from(props.l2_bytes).unwrap_or(usize::MAX),
        registered: &registered,
    };
    print_header();
    let mut rows = Vec::new();
    // A kernel's variants take turns at each shape, so its inputs are drawn and its weight
    // quantized once for all of them (at real shapes that took longer than the timing).
    let work = harness::grouped_by_shape(&names, |name, spec| {
        spec.shapes(name, &args.shapes, spec.bench_shapes())
    });
    let mut last = LastCase::default();
    for (name, spec, shape) in work {
        if args.dispatch && !engine_runs(name, spec, &shape, &engine) {
            continue;
        }
        let row = bench.row(name, spec, &shape, last.get(spec, &shape));
        print_row(&row);
        rows.push(row);
    }
    if args.dispatch {
        // Registered, but not what the engine runs here (e.g. gemm_q4_0 where wgmma runs).
        let timed: Vec<&str> = rows.iter().map(|row| row.kernel.as_str()).collect();
        let unregistered = unmatched_filters(&names, &args.filters, true);
        for filter in unmatched_filters(&timed, &args.filters, true) {
            if !unregistered.contains(&filter) {
                eprintln!(
                    "warning: the engine's dispatch runs no kernel that `{filter}` matches at \
                     these shapes on this device; it times nothing"
                );
            }
        }
    }
    anyhow::ensure!(!rows.is_empty(), "no kernel and shape match the filter");
    let fastest = if args.tune {
        fastest_variants(&rows)
    } else {
        vec![]
    };
    for f in &fastest {
        println!(
            "fastest {} at {}: {} ({:.1} us)",
            f.kernel, f.shape_desc, f.variant, f.median_us
        );
    }

    if let Some(path) = &args.table {
        let table = TuneTable {
            arch: bench.registry.arch().to_string(),
            device: props.name.clone(),
            entries: fastest
                .iter()
                .map(|f| TuneEntry {
                    kernel: f.kernel.clone(),
                    shape: f.shape.clone(),
                    variant: f.variant.clone(),
                    median_us: f.median_us,
                })
                .collect(),
        };
        std::fs::write(path, serde_json::to_string_pretty(&table)?)
            .with_context(|| format!("writing {}", path.display()))?;
        println!("wrote the dispatch table {}", path.display());
    }
    let failed = rows.iter().filter(|r| r.error.is_some()).count();
    if let Some(path) = &args.json {
        let report = Report {
            device: props.name.clone(),
            arch: props.arch(),
            kernels_arch: bench.registry.arch().to_string(),
            l2_bytes: props.l2_bytes,
            results: rows,
            fastest,
        };
        let text = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    anyhow::ensure!(failed == 0, "{failed} measurements failed");
    Ok(())
}

impl Bench {
    fn row(&mut self, name: &str, spec: &Spec, shape: &Shape, host: &HostCase) -> Row {
        let kernel = self.time_kernel(name, spec, shape, host);
        let baseline = self.baseline(spec, shape, &host.inputs);
        let f32_out = (spec.baseline() == Baseline::CublasF16
            && spec.output_elems().first() == Some(&Elem::F32))
        .then(|| {
            let key = BaselineKey::Gemm(spec.product_shape(shape), true);
            self.cached_baseline(key, &host.inputs)
        })
        .and_then(Result::ok);
        let (unit, work) = match spec.cost(shape) {
            // Integer GEMMs: tera-operations (the same 2 T N K count as the f16 baseline's).
            Cost::Flops(f) if spec.input == Elem::I8 => ("TOPS", f / 1e12),
            Cost::Flops(f) => ("TFLOP/s", f / 1e12),
            Cost::Bytes(b) => ("GB/s", b / 1e9),
        };
        let rate = |t: &Timed| work / (t.us * 1e-6);
        let error = match (&kernel, &baseline) {
            (Err(e), _) => Some(format!("{e:#}")),
            (Ok(_), Err(e)) => Some(format!("baseline: {e}")),
            _ => None,
        };
        let kernel = kernel.ok();
        let baseline = baseline.ok();
        Row {
            kernel: name.to_string(),
            shape: shape.0.clone(),
            shape_desc: spec.describe(shape),
            unit,
            median_us: kernel.map(|t| t.us),
            rate: kernel.as_ref().map(rate),
            sets: kernel.map(|t| t.sets),
            baseline: match spec.baseline() {
                Baseline::CublasF16 => "cuBLAS f16",
                Baseline::Copy => "D2D copy",
            },
            baseline_us: baseline.map(|t| t.us),
            baseline_rate: baseline.as_ref().map(rate),
            ratio: kernel.zip(baseline).map(|(k, b)| b.us / k.us),
            f32_out_us: f32_out.map(|t| t.us),
            f32_out_ratio: kernel.zip(f32_out).map(|(k, b)| b.us / k.us),
            error,
        }
    }

    fn time_kernel(
        &self,
        name: &str,
        spec: &Spec,
        shape: &Shape,
        host: &HostCase,
    ) -> Result<Timed> {
        let kernel = self.registry.kernel(name)?;
        let stream = &self.stream;
        let sets = rotation_sets(spec.input_bytes(shape), self.l2_bytes);
        let mut cases = (0..sets)
            .map(|_| {
                let outputs = (spec.output_elems().into_iter().zip(spec.output_lens(shape)))
                    .map(|(elem, len)| ElemBuf::alloc(stream, elem, len))
                    .collect::<Result<_>>()?;
                DeviceCase::upload(stream, spec, name, host, shape, outputs)
            })
            .collect::<Result<Vec<_>>>()?;
        // Zeroing the output is part of a split-K kernel's cost.
        let zero_first = adds_into_output(name);
        let us = time_rotating(stream, sets, |i| {
            let case = &mut cases[i];
            if zero_first {
                case.outputs
                    .iter_mut()
                    .try_for_each(|o| o.fill_zeros(stream))?;
            }
            case.launch(&kernel, stream)
        })?;
        if variant_param(name, stamps::STAMPS) == Some(1) {
            if let Some(ws) = &cases[0].workspace {
                match stamps::summary(&stream.download(ws)?) {
                    Some(table) => println!("{name} at {shape}:\n{table}"),
                    None => println!("{name} at {shape}: no stamps"),
                }
            }
        }
        Ok(Timed { us, sets })
    }

    /// The baseline for a kernel at a shape, measured on first use.
    fn baseline(
        &mut self,
        spec: &Spec,
        shape: &Shape,
        inputs: &[Vec<f32>],
    ) -> Result<Timed, String> {
        let key = match (spec.baseline(), spec.cost(shape)) {
            (Baseline::CublasF16, _) => BaselineKey::Gemm(spec.product_shape(shape), false),
            (Baseline::Copy, Cost::Bytes(b)) => BaselineKey::CopyBytes(b as u64),
            (Baseline::Copy, Cost::Flops(_)) => BaselineKey::CopyBytes(spec.traffic(shape) as u64),
        };
        self.cached_baseline(key, inputs)
    }

    fn cached_baseline(&mut self, key: BaselineKey, inputs: &[Vec<f32>]) -> Result<Timed, String> {
        if let Some(timed) = self.baselines.get(&key) {
            return timed.clone();
        }
        let timed = match &key {
            BaselineKey::Gemm(dims, false) => self.time_cublas::<f16>(dims, inputs),
            BaselineKey::Gemm(dims, true) => self.time_cublas::<f32>(dims, inputs),
            BaselineKey::CopyBytes(bytes) => self.time_copy(*bytes as usize),
        }
        .map_err(|e| format!("{e:#}"));
        self.baselines.insert(key, timed.clone());
        timed
    }

    /// cuBLAS fp16 `Y[T][N] = X[T][K] · W[N][K]^T` with output Y (f16 or f32), on the kernel's
    /// inputs. With f16 it writes half the output bytes of the f32-output GEMMs: 3-5% of their
    /// time at T = 512 on the H200 (docs/PERF.md, session 12), hence the second, f32 baseline.
    fn time_cublas<Y: GemmOutput>(&mut self, dims: &[usize], inputs: &[Vec<f32>]) -> Result<Timed> {
        let [t, n, k] = dims.try_into().context("a GEMM shape is T x N x K")?;
        let blas = match self.blas.take() {
            Some(blas) => blas,
            None => Blas::new(&self.stream)?,
        };
        let blas = self.blas.insert(blas);
        let stream = &self.stream;
        let to_f16 = |v: &[f32]| v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>();
        let (x, w) = (to_f16(&inputs[0]), to_f16(&inputs[1]));
        let sets = rotation_sets(2 * (x.len() + w.len()), self.l2_bytes);
        let mut buffers = (0..sets)
            .map(|_| {
                Ok((
                    stream.upload(&x)?,
                    stream.upload(&w)?,
                    stream.alloc::<Y>(t * n)?,
                ))
            })
            .collect::<Result<Vec<(DeviceBuffer<f16>, DeviceBuffer<f16>, DeviceBuffer<Y>)>>>()?;
        let us = time_rotating(stream, sets, |i| {
            let (x, w, y) = &mut buffers[i];
            blas.gemm_f16(t, n, k, x, w, y)
        })?;
        Ok(Timed { us, sets })
    }

    /// A device-to-device copy whose read plus write traffic is `traffic` bytes.
    fn time_copy(&self, traffic: usize) -> Result<Timed> {
        let stream = &self.stream;
        let half = (traffic / 2).max(1);
        let sets = rotation_sets(half, self.l2_bytes);
        let mut buffers = (0..sets)
            .map(|_| Ok((stream.alloc::<u8>(half)?, stream.alloc::<u8>(half)?)))
            .collect::<Result<Vec<(DeviceBuffer<u8>, DeviceBuffer<u8>)>>>()?;
        let us = time_rotating(stream, sets, |i| {
            let (src, dst) = &mut buffers[i];
            stream
                .cuda()?
                .memcpy_dtod(&src.view()?, &mut dst.view_mut()?)
                .map_err(|source| RuntimeError::Driver {
                    during: "copying device to device",
                    source,
                })
        })?;
        Ok(Timed { us, sets })
    }
}

/// How many copies of a working set of `set_bytes` to cycle through so that together they
/// exceed twice the L2 (at most [`MAX_SETS`]).
fn rotation_sets(set_bytes: usize, l2_bytes: u64) -> usize {
    let twice_l2 = 2 * usize::try_from(l2_bytes).unwrap_or(usize::MAX / 2);
    (twice_l2 / set_bytes.max(1) + 1).min(MAX_SETS)
}

/// The median time of `run(set)` in microseconds, cycling through `sets`: a probe sizes the
/// iteration count to about [`TARGET_MS`], a tenth of it warms up.
fn time_rotating(
    stream: &Stream,
    sets: usize,
    mut run: impl FnMut(usize) -> zinc_runtime::Result<()>,
) -> Result<f64> {
    let mut next = 0;
    let mut work = || {
        let result = run(next % sets);
        next += 1;
        result
    };
    let probe_ms = time_median_ms(stream, 1, 3, &mut work)?;
    let iters = iterations(probe_ms);
    let ms = time_median_ms(stream, iters / 10 + 2, iters, &mut work)?;
    Ok(f64::from(ms) * 1e3)
}

fn iterations(probe_ms: f32) -> usize {
    ((TARGET_MS / probe_ms.max(1e-4)) as usize).clamp(MIN_ITERS, MAX_ITERS)
}

/// Per base kernel and shape with several variants timed, the fastest.
fn fastest_variants(rows: &[Row]) -> Vec<Fastest> {
    let mut best: Vec<Fastest> = Vec::new();
    for row in rows {
        let Some(us) = row.median_us else { continue };
        let base = row.kernel.split('@').next().unwrap_or(&row.kernel);
        match best
            .iter_mut()
            .find(|f| f.kernel == base && f.shape_desc == row.shape_desc)
        {
            Some(f) if us < f.median_us => {
                f.variant = row.kernel.clone();
                f.median_us = us;
            }
            Some(_) => {}
            None => best.push(Fastest {
                kernel: base.to_string(),
                shape: row.shape.clone(),
                shape_desc: row.shape_desc.clone(),
                variant: row.kernel.clone(),
                median_us: us,
            }),
        }
    }
    let variants = |f: &Fastest| {
        rows.iter()
            .filter(|r| {
                r.shape_desc == f.shape_desc && r.kernel.split('@').next() == Some(&f.kernel)
            })
            .count()
    };
    best.retain(|f| variants(f) > 1);
    best
}

/// [`harness::filter_matches`], except that with `--dispatch` a kernel's name ending in `$`
/// (`gemm_q4k_wg$`) stands for that kernel in whichever variant the dispatch runs, not only
/// its default build (which the dispatch may never pick).
/// The filters that select none of `names` (the kernels a run times): a variant the family
/// does not build, or a misspelt name, would otherwise be left out of the table silently.
fn unmatched_filters<'a>(names: &[&str], filters: &'a [String], dispatch: bool) -> Vec<&'a str> {
    filters
        .iter()
        .filter(|f| !names.iter().any(|n| bench_filter_matches(n, f, dispatch)))
        .map(String::as_str)
        .collect()
}

fn bench_filter_matches(name: &str, filter: &str, dispatch: bool) -> bool {
    let kernel_alone = dispatch && filter.ends_with('$') && !filter.contains(['@', '=']);
    match (kernel_alone, name.split_once('@')) {
        (true, Some((kernel, _))) => harness::filter_matches(kernel, filter),
        _ => harness::filter_matches(name, filter),
    }
}

/// What decides the engine's kernel for a product ([`engine_runs`]): whether it runs wgmma,
/// the builds its settings put in place of the dispatch's ([`rewrites_from_env`]),
/// the device's SMs and L2, and the registry's kernels (a build it lacks is not taken).
struct EngineDispatch<'a> {
    wgmma: bool,
    rewrites: dispatch::Rewrites,
    sms: usize,
    l2_bytes: usize,
    registered: &'a [&'a str],
}

impl EngineDispatch<'_> {
    /// The kernel the engine runs for `pick`, the dispatch's choice for a `dims` product
    /// (`gated`: of a gated pair), as `Gpu::default_kernel` takes it.
    fn rewritten(&self, pick: String, dims: [usize; 3], gated: bool) -> String {
        let registered = |v: &str| self.registered.contains(&v);
        (self.rewrites).kernel(pick, dims, gated, self.sms, self.l2_bytes, registered)
    }
}

/// Whether the engine's dispatch runs kernel or variant `name` at `shape`: for a quantized
/// GEMM (above `MATVEC_MAX_T` tokens) or matvec (up to it), the one `gpu::dispatch` picks for
/// its weight type and activations (f16 or f32 in; int8 blocks for the matvecs, none for the
/// GEMMs), with or without `wgmma`, or the build the engine's settings put in its place; of a
/// norm, its build for the rows and their width, writing what the engine's norms write at those
/// rows; of any other kernel, its default.
fn engine_runs(name: &str, spec: &Spec, shape: &Shape, engine: &EngineDispatch) -> bool {
    let wgmma = engine.wgmma;
    let decode = |t: usize| t <= dispatch::MATVEC_MAX_T;
    let pick = match (spec.op, spec.weight, spec.input, shape.0.as_slice()) {
        (Op::QuantGemm, Some(ty), Elem::F16, &[t, n, k]) if spec.gated.is_some() => {
            let gelu = spec.gated == Some(Op::GeluMul);
            (!decode(t))
                .then(|| dispatch::gated_gemm(ty, gelu, t, n, k, wgmma))
                .flatten()
                .map(|pick| engine.rewritten(pick, [t, n, k], true))
        }
        (Op::QuantGemm, Some(ty), Elem::F16, &[t, n, k]) if !decode(t) => {
            // A product into a new output, or one that adds into the residual stream.
            let adding = dispatch::quant_gemm_adding(ty, t, n, k, wgmma)
                .map(|pick| engine.rewritten(pick, [t, n, k], false));
            if adding.as_deref() == Some(name) {
                return true;
            }
            dispatch::quant_gemm(ty, t, n, k, wgmma)
                .map(|pick| engine.rewritten(pick, [t, n, k], false))
        }
        (Op::Matvec, Some(ty), Elem::ActS8, &[t, n, k]) if decode(t) => {
            dispatch::matvec_s8(ty, t, n, k)
        }
        (Op::Matvec, Some(ty), _, &[t, n, k]) if decode(t) => Some(dispatch::matvec(ty, t, n, k)),
        (Op::QuantGemm | Op::Matvec, ..) => None,
        // Whole hidden rows write the copy their products read (`Gpu::input_copy`): int8 blocks
        // or none (by the engine's settings) at decode sizes, f16 at prefill sizes, where a norm
        // that only products read (the residual add's always) writes f16 alone. Per-head norms
        // write no copy.
        (Op::RmsNorm | Op::AddRmsNorm, _, _, &[rows, cols]) => {
            use dispatch::InputCopy;
            let picks = match (spec.op, decode(rows)) {
                (Op::AddRmsNorm, true) => vec![
                    dispatch::add_rmsnorm(rows, cols, InputCopy::None),
                    dispatch::add_rmsnorm(rows, cols, InputCopy::Int8),
                ],
                (Op::AddRmsNorm, false) => vec![dispatch::add_rmsnorm(rows, cols, InputCopy::Half)],
                (_, true) => vec![
                    dispatch::rmsnorm(rows, cols, InputCopy::None),
                    dispatch::rmsnorm(rows, cols, InputCopy::Int8),
                ],
                (_, false) => vec![
                    dispatch::rmsnorm(rows, cols, InputCopy::None),
                    dispatch::rmsnorm(rows, cols, InputCopy::Half),
                    dispatch::rmsnorm_half_only(rows, cols),
                ],
            };
            return picks.iter().any(|pick| pick == name);
        }
        _ => return !name.contains('@'),
    };
    pick.as_deref() == Some(name)
}

const COLUMNS: [&str; 10] = [
    "kernel",
    "shape",
    "median us",
    "rate",
    "unit",
    "baseline",
    "base us",
    "base rate",
    "vs base",
    "vs f32 out",
];

fn print_header() {
    let [a, b, c, d, e, f, g, h, i, j] = COLUMNS;
    println!("{a:<24} {b:<24} {c:>11} {d:>9} {e:<8} {f:<10} {g:>11} {h:>9} {i:>8} {j:>10}");
}

/// Printed as soon as measured, so progress shows.
fn print_row(row: &Row) {
    let opt =
        |v: Option<f64>, prec: usize| v.map_or_else(|| "-".to_string(), |v| format!("{v:.prec$}"));
    let times = |r: Option<f64>| r.map_or_else(|| "-".to_string(), |r| format!("{r:.3}x"));
    println!(
        "{:<24} {:<24} {:>11} {:>9} {:<8} {:<10} {:>11} {:>9} {:>8} {:>10}{}",
        row.kernel,
        row.shape_desc,
        opt(row.median_us, 1),
        opt(row.rate, 1),
        row.unit,
        row.baseline,
        opt(row.baseline_us, 1),
        opt(row.baseline_rate, 1),
        times(row.ratio),
        times(row.f32_out_ratio),
        row.error
            .as_ref()
            .map_or_else(String::new, |e| format!("  ERROR: {e}")),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use zinc_models::quant::GgmlType;

    const MIB: usize = 1 << 20;

    #[test]
    fn rotation_exceeds_twice_the_l2() {
        let l2 = 60 * MIB as u64;
        for set in [2 * MIB, 16 * MIB, 40 * MIB, 75 * MIB, 120 * MIB, 235 * MIB] {
            let sets = rotation_sets(set, l2);
            assert!(sets * set > 2 * 60 * MIB, "{set}: {sets}");
            // One fewer copy would not do.
            assert!((sets - 1) * set <= 2 * 60 * MIB, "{set}: {sets}");
        }
        assert_eq!(rotation_sets(8, l2), MAX_SETS);
    }

    #[test]
    fn iteration_counts_follow_the_probe() {
        assert_eq!(iterations(100.0), MIN_ITERS);
        assert_eq!(iterations(1.0), 200);
        assert_eq!(iterations(0.0), MAX_ITERS);
    }

    fn row(kernel: &str, shape: &str, us: Option<f64>) -> Row {
        Row {
            kernel: kernel.into(),
            shape: vec![],
            shape_desc: shape.into(),
            unit: "TFLOP/s",
            median_us: us,
            rate: None,
            sets: None,
            baseline: "cuBLAS f16",
            baseline_us: None,
            baseline_rate: None,
            ratio: None,
            f32_out_us: None,
            f32_out_ratio: None,
            error: None,
        }
    }

    #[test]
    fn under_dispatch_a_kernel_filter_takes_its_variants() {
        let variant = "gemm_q4k_wg@BT=256";
        assert!(!bench_filter_matches(variant, "gemm_q4k_wg$", false));
        assert!(bench_filter_matches(variant, "gemm_q4k_wg$", true));
        assert!(!bench_filter_matches(
            "gemm_q4k_wg_silu@BT=256",
            "gemm_q4k_wg$",
            true
        ));
        assert!(bench_filter_matches(variant, "BT=256$", true));
        assert!(!bench_filter_matches(variant, "gemm_q4k_wg@BT=128$", true));
        assert!(bench_filter_matches("gemm_q4k_wg", "gemm_q4k_wg$", false));
    }

    #[test]
    fn filters_that_select_nothing_are_named() {
        let names = ["gemm_q4k_wg_h@BT=256", "gemm_q6k_wg_h@BT=256"];
        let filters: Vec<String> = ["gemm_q4k_wg_h@BT=256$", "_wg_h@BT=256,PRODUCER=1$", "q6k"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            unmatched_filters(&names, &filters, false),
            ["_wg_h@BT=256,PRODUCER=1$"]
        );
    }

    #[test]
    fn dispatch_keeps_what_the_engine_runs() {
        let registered = ["gemm_q4k_wg@BT=256,SPLITK=2,TMA_STORE=1"];
        let rewrites = dispatch::Rewrites {
            stream_k: None,
            split_stream_k: true,
            tma_store: true,
        };
        let engine = |wgmma: bool, rewrites: dispatch::Rewrites| EngineDispatch {
            wgmma,
            rewrites,
            sms: 132,
            l2_bytes: 60 << 20,
            registered: &registered,
        };
        let runs = |name: &str, dims: &[usize], wgmma: bool| {
            let spec = crate::specs::spec_for(name).unwrap();
            engine_runs(name, spec, &Shape(dims.to_vec()), &engine(wgmma, rewrites))
        };
        let prefill = [512, 14336, 4096];
        let [t, n, k] = prefill;
        let on_wgmma = dispatch::quant_gemm(GgmlType::Q4_K, t, n, k, true).unwrap();
        let on_mma = dispatch::quant_gemm(GgmlType::Q4_K, t, n, k, false).unwrap();
        assert!(runs(&on_wgmma, &prefill, true) && !runs(&on_wgmma, &prefill, false));
        assert!(runs(&on_mma, &prefill, false) && !runs(&on_mma, &prefill, true));
        // Another variant of the picked kernel, or another shape's pick, is not run.
        assert!(!runs(&format!("{on_wgmma}9"), &prefill, true));
        let other = dispatch::quant_gemm(GgmlType::Q4_K, 512, 4096, 4096, true).unwrap();
        assert_ne!(other, on_wgmma);
        assert!(!runs(&other, &prefill, true));
        // The engine's settings put the TMA-store build in the K split's place, where the
        // registry has it.
        let split = [512, 4096, 14336];
        let spec = crate::specs::spec_for("gemm_q4k_wg").unwrap();
        let shape = Shape(split.to_vec());
        assert!(runs(registered[0], &split, true));
        assert!(!runs("gemm_q4k_wg@BT=256,SPLITK=2", &split, true));
        let atomics = dispatch::Rewrites {
            tma_store: false,
            ..rewrites
        };
        assert!(engine_runs(
            "gemm_q4k_wg@BT=256,SPLITK=2",
            spec,
            &shape,
            &engine(true, atomics)
        ));
        let unregistered = EngineDispatch {
            registered: &[],
            ..engine(true, rewrites)
        };
        assert!(engine_runs(
            "gemm_q4k_wg@BT=256,SPLITK=2",
            spec,
            &shape,
            &unregistered
        ));
        // The int8 GEMM is never the engine's; matvecs follow their own dispatch.
        assert!(!runs("gemm_q4k_s8", &prefill, true));
        let decode = [1, 4096, 14336];
        let matvec = dispatch::matvec(GgmlType::Q4_K, 1, 4096, 14336);
        let matvec_s8 = dispatch::matvec_s8(GgmlType::Q4_K, 1, 4096, 14336).unwrap();
        assert!(runs(&matvec, &decode, true) && runs(&matvec_s8, &decode, true));
        assert!(!runs(&matvec, &[1, 14336, 4096], true));
        // Norms: the build for the rows and their width.
        assert!(runs("rmsnorm_f32@BLOCK=1024,VEC=1", &[4, 64], true));
        assert!(!runs("rmsnorm_f32", &[4, 64], true));
        assert!(runs("rmsnorm_f32h", &[512, 4096], true));
        // Each copy at the sizes of the products that read it: f16 at prefill sizes, int8
        // blocks at decode sizes.
        assert!(!runs("rmsnorm_f32h@BLOCK=1024,VEC=1", &[8, 4096], true));
        assert!(runs("rmsnorm_f32q@BLOCK=1024,VEC=1", &[8, 4096], true));
        assert!(!runs("rmsnorm_f32q", &[512, 4096], true));
        // Where products read f16: the norms that write it alone, the residual add's always.
        assert!(runs("rmsnorm_f16", &[512, 4096], true));
        assert!(!runs("rmsnorm_f16@BLOCK=1024,VEC=1", &[8, 4096], true));
        assert!(runs("add_rmsnorm_f16", &[512, 4096], true));
        assert!(runs("add_rmsnorm_f16@VEC=2", &[512, 2048], true));
        assert!(!runs("add_rmsnorm_f16@BLOCK=1024,VEC=1", &[8, 4096], true));
        assert!(!runs("add_rmsnorm_f32", &[512, 4096], true));
        assert!(runs("add_rmsnorm_f32@BLOCK=1024,VEC=1", &[8, 4096], true));
        assert!(runs("add_rmsnorm_f32q@BLOCK=1024,VEC=1", &[8, 4096], true));
        assert!(!runs("add_rmsnorm_f32q", &[512, 4096], true));
        // Other kernels: their default build only.
        assert!(runs("softmax_rows", &[4, 64], true));
        assert!(!runs("softmax_rows@BLOCK=512", &[4, 64], true));
    }

    #[test]
    fn tuning_picks_the_fastest_variant_per_shape() {
        let rows = [
            row("gemm_simt", "a", Some(10.0)),
            row("gemm_simt@BM=128,BN=64", "a", Some(8.0)),
            row("gemm_simt", "b", Some(5.0)),
            row("gemm_simt@BM=128,BN=64", "b", Some(6.0)),
            row("gemm_simt@BM=128,BN=64", "c", None),
            row("rmsnorm_f32", "a", Some(1.0)),
        ];
        let fastest = fastest_variants(&rows);
        let best: Vec<(&str, &str)> = fastest
            .iter()
            .map(|f| (f.shape_desc.as_str(), f.variant.as_str()))
            .collect();
        assert_eq!(best, [("a", "gemm_simt@BM=128,BN=64"), ("b", "gemm_simt")]);
    }
}
