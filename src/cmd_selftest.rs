//! `zinc selftest [FILTER] [--shapes ...]`: runs every registered kernel on random non-zero inputs
//! and compares its output with the f64 CPU reference.

use anyhow::{bail, Context, Result};
use zinc_runtime::Stream;

use crate::harness::{self, DeviceCase, ElemBuf, HostCase, LastCase};
use crate::registry::Registry;
use crate::specs::{adds_into_output, spec_for, variant_param, Shape, Spec, FIRST_STORES};

/// Extra poisoned elements after each output: a kernel writing past its end disturbs them.
const GUARD: usize = 64;

#[derive(clap::Args)]
pub struct Args {
    /// Only kernels whose name contains one of the FILTERs, or ends with one ending in `$`
    /// (`gemm_q4k_wg@BT=256$`: that variant alone).
    filters: Vec<String>,
    /// Shapes to run instead of each kernel's defaults, e.g. `37x1000,513x257x300`; a kernel runs
    /// those of its rank (rows x cols, n, or T x N x K).
    #[arg(long, value_delimiter = ',')]
    shapes: Vec<Shape>,
}

pub fn run(args: &Args) -> Result<()> {
    let device = harness::open_device()?;
    let registry = harness::open_registry(&device)?;
    let stream = device.default_stream();
    println!("{}", harness::device_line(&device, &registry));

    // A copy of another build (registry::EmbeddedKernel::same_as) runs that build's code: only
    // where a filter names a variant it matches.
    let names: Vec<&str> = registry
        .names()
        .filter(|n| harness::any_filter_matches(n, &args.filters))
        .filter(|n| !registry.is_copy(n) || harness::variant_filter_matches(n, &args.filters))
        .collect();
    let mut rows: Vec<Row> = (names.iter())
        .filter(|name| spec_for(name).is_none())
        .map(|name| Row::failed(name, "-", "no CPU reference in src/specs.rs"))
        .collect();
    // A kernel's variants take turns at each shape: the inputs, the quantized weight and the
    // reference are made once for all of them.
    let work = harness::grouped_by_shape(&names, |name, spec| {
        spec.shapes(name, &args.shapes, spec.selftest_shapes())
    });
    if rows.is_empty() && work.is_empty() {
        bail!("no kernel and shape match the filter");
    }
    // Each row is printed as soon as it is known: the references of real shapes take minutes.
    let labels = (work.iter())
        .flat_map(|(name, spec, _)| (0..spec.outputs()).map(|i| output_label(name, spec, i)));
    let table = Table::new(
        labels.chain(rows.iter().map(|r| r.kernel.clone())),
        (work.iter().map(|(_, spec, shape)| spec.describe(shape))).chain(["-".to_string()]),
    );
    rows.iter().for_each(|row| table.print(row));
    let mut last = LastCase::default();
    for (name, spec, shape) in work {
        let host = last.get(spec, &shape);
        let checked: Vec<Row> = match check(&registry, &stream, name, spec, &shape, host) {
            Ok(outputs) => (outputs.into_iter().enumerate())
                .map(|(i, errors)| Row {
                    kernel: output_label(name, spec, i),
                    shape: spec.describe(&shape),
                    tolerance: spec.output_tolerance(i, &shape),
                    outcome: Ok(errors),
                })
                .collect(),
            Err(e) => vec![Row::failed(name, &spec.describe(&shape), &format!("{e:#}"))],
        };
        checked.iter().for_each(|row| table.print(row));
        rows.extend(checked);
    }
    let failed = rows.iter().filter(|r| !r.passed()).count();
    if failed > 0 {
        bail!("{failed} of {} kernel checks failed", rows.len());
    }
    println!("all {} kernel checks passed", rows.len());
    Ok(())
}

/// Launches of a FIRST_STORES build at each shape ([`check`]).
const ORDERED_LAUNCHES: usize = 8;

/// The kernel's outputs at one shape, each compared with its reference.
fn check(
    registry: &Registry,
    stream: &Stream,
    name: &str,
    spec: &Spec,
    shape: &Shape,
    host: &HostCase,
) -> Result<Vec<Errors>> {
    let kernel = registry.kernel(name)?;
    let lens = spec.output_lens(shape);
    // Values to add into (the reference adds them too), and poisoned guards.
    let addends: Vec<Vec<f32>> = (lens.iter())
        .map(|&len| match adds_into_output(name) {
            true => harness::addends(len),
            false => Vec::new(),
        })
        .collect();
    let outputs = (spec.output_elems().into_iter().zip(&lens).zip(&addends))
        .map(|((elem, &len), addends)| match addends.is_empty() {
            false => {
                let mut host = vec![f32::NAN; len + GUARD];
                host[..len].copy_from_slice(addends);
                ElemBuf::upload(stream, elem, &host)
            }
            true => ElemBuf::poisoned(stream, elem, len + GUARD),
        })
        .collect::<Result<_>>()?;
    let mut case = DeviceCase::upload(stream, spec, name, host, shape, outputs)?;
    // A FIRST_STORES build orders a tile's two splits at run time, either way round, and leaves
    // `ws` for the next launch: several launches over the same output, each of which must
    // write the same bits (a + b = b + a).
    let launches = match variant_param(name, FIRST_STORES) {
        Some(1) => ORDERED_LAUNCHES,
        _ => 1,
    };
    // Bits, so that the guards' NaN poison compares equal.
    let bits = |o: &[Vec<f64>]| -> Vec<Vec<u64>> {
        o.iter()
            .map(|v| v.iter().map(|x| x.to_bits()).collect())
            .collect()
    };
    let mut got: Vec<Vec<f64>> = Vec::new();
    for launch in 0..launches {
        case.launch(&kernel, stream).context("launch")?;
        // The download waits for the kernel, so a fault in it surfaces here.
        let outputs = case
            .outputs
            .iter()
            .map(|out| out.download_f64(stream))
            .collect::<Result<Vec<_>>>()
            .context("running the kernel")?;
        if launch > 0 && bits(&outputs) != bits(&got) {
            bail!("launch {launch} wrote other values than the first launch over the same output");
        }
        got = outputs;
    }
    let mut want = spec.reference_given(shape, host.reference(spec, shape), &got);
    let mut at = 0;
    for (addends, &len) in addends.iter().zip(&lens) {
        for (w, &a) in want[at..].iter_mut().zip(addends) {
            *w += f64::from(a);
        }
        at += len;
    }
    Ok(compare_outputs(&got, &want, &lens))
}

/// Each output buffer (its `lens` elements and guards past the end) against its part of
/// `want`, which holds the outputs one after another.
fn compare_outputs(outputs: &[Vec<f64>], want: &[f64], lens: &[usize]) -> Vec<Errors> {
    let mut rest = want;
    (outputs.iter().zip(lens))
        .map(|(got, &len)| {
            let (part, after) = rest.split_at(len);
            rest = after;
            Errors::new(&got[..len], part, &got[len..])
        })
        .collect()
}

/// The selftest row name of output `i`: the kernel's, with the output's number when it has
/// several.
fn output_label(name: &str, spec: &Spec, i: usize) -> String {
    match spec.outputs() {
        1 => name.to_string(),
        _ if spec.half_copy() && i + 1 == spec.outputs() => format!("{name} [f16 copy]"),
        _ if spec.int8_copy() && i + 1 == spec.outputs() => format!("{name} [int8 copy]"),
        _ => format!("{name} [output {i}]"),
    }
}

/// A kernel output compared with its reference.
#[derive(Debug, PartialEq)]
struct Errors {
    max_abs: f64,
    /// The largest error relative to the largest reference magnitude: unlike a per-element ratio
    /// it stays meaningful for outputs near zero (GEMM sums of random signs).
    max_rel: f64,
    /// Elements still NaN from the poisoning.
    unwritten: usize,
    /// Elements written but infinite or NaN.
    non_finite: usize,
    /// Guard elements past the end that were overwritten.
    past_end: usize,
    /// Elements the kernel must not write (NaN in the reference) that it wrote.
    stray: usize,
}

impl Errors {
    fn new(got: &[f64], want: &[f64], guard: &[f64]) -> Errors {
        let mut e = Errors {
            max_abs: 0.0,
            max_rel: 0.0,
            unwritten: 0,
            non_finite: 0,
            past_end: guard.iter().filter(|v| !v.is_nan()).count(),
            stray: 0,
        };
        for (&g, &w) in got.iter().zip(want) {
            if w.is_nan() {
                e.stray += usize::from(!g.is_nan());
            } else if g.is_nan() {
                e.unwritten += 1;
            } else if !g.is_finite() {
                e.non_finite += 1;
            } else {
                e.max_abs = e.max_abs.max((g - w).abs());
            }
        }
        let scale = want.iter().fold(0.0f64, |m, w| m.max(w.abs()));
        e.max_rel = e.max_abs / scale.max(f64::MIN_POSITIVE);
        e
    }

    fn passes(&self, tolerance: f64) -> bool {
        self.unwritten == 0
            && self.non_finite == 0
            && self.past_end == 0
            && self.stray == 0
            && self.max_rel <= tolerance
    }

    /// "pass", or "FAIL" and why.
    fn verdict(&self, tolerance: f64) -> String {
        if self.passes(tolerance) {
            return "pass".to_string();
        }
        let mut why = vec![];
        if self.unwritten > 0 {
            why.push(format!("{} not written", self.unwritten));
        }
        if self.non_finite > 0 {
            why.push(format!("{} non-finite", self.non_finite));
        }
        if self.past_end > 0 {
            why.push(format!("{} written past the end", self.past_end));
        }
        if self.stray > 0 {
            why.push(format!("{} written outside the kernel's range", self.stray));
        }
        if self.max_rel > tolerance {
            why.push("error above tolerance".to_string());
        }
        format!("FAIL ({})", why.join(", "))
    }
}

struct Row {
    kernel: String,
    shape: String,
    tolerance: f64,
    outcome: Result<Errors, String>,
}

impl Row {
    fn failed(kernel: &str, shape: &str, why: &str) -> Row {
        Row {
            kernel: kernel.to_string(),
            shape: shape.to_string(),
            tolerance: 0.0,
            outcome: Err(why.to_string()),
        }
    }

    fn passed(&self) -> bool {
        matches!(&self.outcome, Ok(e) if e.passes(self.tolerance))
    }
}

/// The selftest's table, its columns as wide as the longest kernel label and shape to come.
struct Table {
    kernel_width: usize,
    shape_width: usize,
}

impl Table {
    /// Prints the header.
    fn new(labels: impl Iterator<Item = String>, shapes: impl Iterator<Item = String>) -> Table {
        let kw = labels.map(|l| l.len()).max().unwrap_or(0).max(6);
        let sw = shapes.map(|s| s.len()).max().unwrap_or(0).max(5);
        println!(
            "{:<kw$}  {:<sw$}  {:>10}  {:>10}  {:>8}  result",
            "kernel", "shape", "max abs", "max rel", "tol"
        );
        Table {
            kernel_width: kw,
            shape_width: sw,
        }
    }

    fn print(&self, r: &Row) {
        let (kw, sw) = (self.kernel_width, self.shape_width);
        match &r.outcome {
            Ok(e) => println!(
                "{:<kw$}  {:<sw$}  {:>10.3e}  {:>10.3e}  {:>8.0e}  {}",
                r.kernel,
                r.shape,
                e.max_abs,
                e.max_rel,
                r.tolerance,
                e.verdict(r.tolerance)
            ),
            Err(why) => println!("{:<kw$}  {:<sw$}  FAIL: {why}", r.kernel, r.shape),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use zinc_interp::{Arg, Buffer, Interpreter, Value};
    use zinc_runtime::half::f16;
    use zinc_runtime::ScalarValue;

    use super::*;
    use crate::specs::Elem;

    #[test]
    fn errors_catch_unwritten_non_finite_and_overruns() {
        let want = [1.0, -2.0, 4.0];
        let exact = Errors::new(&[1.0, -2.0, 4.0], &want, &[f64::NAN]);
        assert!(exact.passes(0.0));
        let off = Errors::new(&[1.0, -2.0, 4.04], &want, &[f64::NAN]);
        assert!((off.max_rel - 0.01).abs() < 1e-12);
        assert!(off.passes(0.02) && !off.passes(0.005));
        let holes = Errors::new(&[f64::NAN, f64::INFINITY, 4.0], &want, &[0.0, f64::NAN]);
        assert_eq!(
            (holes.unwritten, holes.non_finite, holes.past_end),
            (1, 1, 1)
        );
        assert_eq!(
            holes.verdict(1.0),
            "FAIL (1 not written, 1 non-finite, 1 written past the end)"
        );
        // NaN in the reference: the kernel must leave the element alone.
        let want = [f64::NAN, 1.0];
        assert!(Errors::new(&[f64::NAN, 1.0], &want, &[]).passes(0.0));
        let stray = Errors::new(&[0.0, 1.0], &want, &[]);
        assert_eq!(stray.stray, 1);
        assert_eq!(
            stray.verdict(1.0),
            "FAIL (1 written outside the kernel's range)"
        );
    }

    /// Every family file under kernels/ with its defaults.
    fn compile_families() -> Vec<(PathBuf, zinc_dsl::Compilation)> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "tile"))
            .collect();
        files.sort();
        files
            .into_iter()
            .map(|f| {
                let c = compile(&f, "");
                (f, c)
            })
            .collect()
    }

    /// `file` compiled with a variant's overrides (`BM=128,BN=64`).
    fn compile(file: &Path, variant: &str) -> zinc_dsl::Compilation {
        let defines: Vec<(String, String)> = variant
            .split(',')
            .filter_map(|d| d.split_once('='))
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        zinc_dsl::compile_file(file, &defines).unwrap_or_else(|e| panic!("{}", e.render()))
    }

    /// Runs `kernel` of `c` in the interpreter.
    fn interpret(c: &zinc_dsl::Compilation, kernel: &str, args: &mut [Arg]) {
        Interpreter::new(&c.module)
            .sources(&c.sources)
            .launch(kernel, args)
            .unwrap_or_else(|e| panic!("{kernel}: {e}"));
    }

    /// An f32 output buffer, widened.
    fn f32_output(arg: &Arg) -> Vec<f64> {
        let out = arg.buffer().unwrap().to_f32();
        out.into_iter().map(f64::from).collect()
    }

    /// `attention_f32` at exactly the parameters of a tiny synthetic Gemma 4 (`zinc synth
    /// --preset gemma4-31b --tiny`): 4 query heads, local layers of 2 KV heads x 64 in a window of
    /// 64, global layers of 1 KV head x 128, scale 1 on RMS-normalized queries and keys (so
    /// scores reach the head width), normalized values; a 46-token prefill and decode steps.
    #[test]
    fn attention_f32_on_gemma4_parameters() {
        use zinc_models::backend::AttentionParams;
        let (_, c) = compile_families()
            .into_iter()
            .find(|(f, _)| f.ends_with("attention.tile"))
            .unwrap();
        let mut seed = 0x9e37_79b9_u64;
        let mut uniform = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        };
        // Rows of `d` with unit RMS times a weight around 1, as after Gemma's norms.
        let mut normed = |rows: usize, d: usize| -> Vec<f32> {
            let mut x: Vec<f32> = (0..rows * d).map(|_| uniform()).collect();
            for row in x.chunks_mut(d) {
                let rms = (row.iter().map(|v| v * v).sum::<f32>() / d as f32).sqrt();
                row.iter_mut().for_each(|v| *v /= rms);
            }
            x
        };
        for (kv_heads, d, window) in [(2, 64, Some(64)), (1, 128, None)] {
            let p = AttentionParams {
                n_head: 4,
                n_head_kv: kv_heads,
                head_dim_k: d,
                head_dim_v: d,
                scale: 1.0,
                window,
                softcap: None,
            };
            let n_kv = 46;
            let k = normed(n_kv * kv_heads, d);
            let v = normed(n_kv * kv_heads, d);
            for (t, start) in [(46, 0), (1, 45), (3, 20)] {
                // Queries equal to their own keys in head 0: the largest scores the model sees.
                let mut q = normed(t * 4, d);
                for i in 0..t {
                    let own = &k[((start + i) * kv_heads) * d..][..d];
                    q[i * 4 * d..][..d].copy_from_slice(own);
                }
                let len = t * 4 * d;
                let mut args = vec![
                    Arg::ReadOnly(Buffer::from_f32(&q)),
                    Arg::ReadOnly(Buffer::from_f32(&k[..(start + t) * kv_heads * d])),
                    Arg::ReadOnly(Buffer::from_f32(&v[..(start + t) * kv_heads * d])),
                    Arg::Buffer(Buffer::from_f32(&vec![f32::NAN; len + GUARD])),
                ];
                let u = |x: usize| Arg::Scalar(Value::U32(x as u32));
                args.extend([u(4), u(kv_heads), u(d), u(d), u(t), u(start)]);
                args.push(u(window.unwrap_or(0)));
                args.push(Arg::Scalar(Value::F32(1.0)));
                args.push(Arg::Scalar(Value::F32(0.0)));
                interpret(&c, "attention_f32", &mut args);
                let got = f32_output(&args[3]);
                let want = crate::reference::attention(&q, &k, &v, start, &p);
                let errors = Errors::new(&got[..len], &want, &got[len..]);
                assert!(errors.passes(1e-5), "d={d} T={t} start={start}: {errors:?}");
            }
        }
    }

    /// The int8 paths end to end in the interpreter: quantize_s8, then gemm_q4k_s8 (prefill)
    /// or matvec_q4k_s8 / q5k_s8 / q6k_s8 / q8_0_s8 / q5_0_s8 / q4_0_s8 / iq4_nl_s8 / iq4_xs_s8
    /// (decode),
    /// against the f32 activations times the dequantized weights. The kernels' own error is checked against
    /// `reference::gemm_s8` at 1e-5; the rest is the int8 rounding of the activations, on the
    /// harness's activations (magnitudes 0.1 to 1, so every block's amax is near one) and on
    /// heavier-tailed ones (every 29th value 8 times larger, as outlier channels make them),
    /// where one large value coarsens its whole block of 32. Measured here: gemm at 33x40x1024
    /// 3.4e-3 and 0.0125 of the largest |Y|, relative Frobenius error 3.7e-3 and 0.0105; matvec
    /// at 1x40x4096 5.4e-3 and 0.0109, Frobenius 5.0e-3 and 9.2e-3 (the f16 path's gemm_q4k:
    /// 4.5e-4 to 6.9e-4 of the largest |Y|, docs/PERF.md).
    #[test]
    fn int8_path_error_against_f32_activations() {
        let families = compile_families();
        let module = |file: &str| {
            &families
                .iter()
                .find(|(f, _)| f.ends_with(file))
                .unwrap_or_else(|| panic!("no {file}"))
                .1
        };
        let quantize = module("quantize.tile");
        // (file, kernel, shape, bounds on the largest error relative to the largest |Y|).
        let matvec = |kernel| ("matvec.tile", kernel, (1, 40, 4096), [8e-3, 1.8e-2]);
        let products = [
            (
                "gemm_q4k_s8.tile",
                "gemm_q4k_s8",
                (33, 40, 1024),
                [5e-3, 1.8e-2],
            ),
            matvec("matvec_q4k_s8"),
            matvec("matvec_q5k_s8"),
            matvec("matvec_q6k_s8"),
            matvec("matvec_q8_0_s8"),
            matvec("matvec_q5_0_s8"),
            matvec("matvec_q4_0_s8"),
            matvec("matvec_iq4_nl_s8"),
            matvec("matvec_iq4_xs_s8"),
        ];
        for (file, kernel, (t, n, k), bounds) in products {
            let product = module(file);
            let spec = spec_for(kernel).unwrap();
            let shape = Shape(vec![t, n, k]);
            let inputs = harness::random_inputs(spec, &shape);
            let heavy: Vec<f32> = inputs[0]
                .iter()
                .enumerate()
                .map(|(i, &v)| if i % 29 == 0 { 8.0 * v } else { v })
                .collect();
            let w_words = harness::weight_words(spec, &inputs[1]);
            let w = crate::reference::dequantized(spec.weight_type(), &inputs[1]);
            let u = |x: usize| Arg::Scalar(Value::U32(x as u32));
            for (x, bound) in [&inputs[0], &heavy].into_iter().zip(bounds) {
                let words = Elem::ActS8.bytes(t * k) / 4;
                let mut args = vec![
                    Arg::ReadOnly(Buffer::from_f32(x)),
                    Arg::Buffer(Buffer::from_u32(&vec![0; words])),
                    u(t * k),
                ];
                interpret(quantize, "quantize_s8", &mut args);
                let acts = args[1].buffer().unwrap().to_u32();
                let mut args = vec![
                    Arg::ReadOnly(Buffer::from_u32(&acts)),
                    Arg::ReadOnly(Buffer::from_u32(&w_words)),
                    Arg::Buffer(Buffer::from_f32(&vec![f32::NAN; t * n])),
                    u(t),
                    u(n),
                    u(k),
                ];
                interpret(product, kernel, &mut args);
                let got = f32_output(&args[2]);
                // The kernels themselves: the host quantizes the same way, bit for bit.
                let quantized = crate::reference::gemm_s8(spec.weight_type(), x, &inputs[1], n, k);
                let kernels = Errors::new(&got, &quantized, &[]);
                assert!(kernels.passes(1e-5), "{kernel}: {kernels:?}");
                let exact = crate::reference::gemm_xwt(x, &w, n, k);
                let errors = Errors::new(&got, &exact, &[]);
                let frobenius =
                    |v: &mut dyn Iterator<Item = f64>| v.map(|e| e * e).sum::<f64>().sqrt();
                let relative = frobenius(&mut got.iter().zip(&exact).map(|(g, e)| g - e))
                    / frobenius(&mut exact.iter().copied());
                eprintln!(
                    "int8 path ({kernel}) against f32 activations: {errors:?}, \
                     relative Frobenius {relative:.2e}"
                );
                assert!(errors.passes(bound), "{kernel}: {errors:?}");
            }
        }
    }

    /// A product's output of `len` elements: NaN poison, or zeros where a launch adds into it
    /// (`zeroed`: K split; f32 outputs only).
    fn product_output(spec: &crate::specs::Spec, len: usize, zeroed: bool) -> Arg {
        Arg::Buffer(match (spec.out, zeroed) {
            (Elem::F16, _) => Buffer::from_f16(&vec![f16::NAN; len]),
            (_, false) => Buffer::from_f32(&vec![f32::NAN; len]),
            (_, true) => Buffer::from_f32(&vec![0.0; len]),
        })
    }

    /// A product's output, f16 or f32, widened.
    fn output_values(spec: &crate::specs::Spec, arg: &Arg) -> Vec<f64> {
        match spec.out {
            Elem::F16 => arg
                .buffer()
                .unwrap()
                .to_f16()
                .into_iter()
                .map(f64::from)
                .collect(),
            _ => f32_output(arg),
        }
    }

    /// gemm_wg's runs of tiles write the whole product, ragged rows included, as the engine
    /// launches them:
    /// - a short last wave on one-warpgroup tiles (dispatch::wave_tail): the full waves and then
    ///   the rest, each on a grid of its own from its first tile. A device of 2 SMs makes the
    ///   split at interpreter sizes (one token tile of 256): a gated unit of 192 outputs (3
    ///   tiles, the third on 2 one-warpgroup tiles) and a product of 320 rows (3 tiles, the
    ///   last of 64 rows);
    /// - a ragged last token tile's rows on the short-batch tiles the dispatch gives them
    ///   (dispatch::token_head, on a device of one SM): 256 tokens and then 4 (a 32-token tile
    ///   reading past T), and 256 and then 90 (two 64-token tiles, the second moved back to end
    ///   at T, both split in K) of a product split in K;
    /// - the two-warpgroup tiles of both as persistent blocks (dispatch::PERSISTENT_TILE), one
    ///   an SM, on the engine's grids, with the run's tile count where it has one.
    #[test]
    fn runs_of_gemm_wg_tiles_make_the_whole_product() {
        use crate::gpu::dispatch::{
            gated_gemm, quant_gemm, token_head, wave_tail, PERSISTENT_TILE,
        };
        use zinc_models::quant::GgmlType;
        // A launch: the variant, its T, first token row, first tile and tiles (None: all).
        type Run = (String, usize, usize, usize, Option<usize>);
        // (file, kernel, shape, the two-warpgroup tile's variant).
        let silu = |shape: [usize; 3], wide: &'static str| {
            ("gemm_wg_glu.tile", "gemm_q4k_wg_silu", shape, wide)
        };
        let cases = [
            silu([256, 192, 256], "BT=256"),
            silu([256, 192, 256], PERSISTENT_TILE),
            (
                "gemm_wg.tile",
                "gemm_q6k_wg",
                [256, 320, 512],
                PERSISTENT_TILE,
            ),
            silu([260, 64, 256], "BT=256"),
            silu([260, 64, 256], PERSISTENT_TILE),
            ("gemm_wg.tile", "gemm_q4k_wg", [346, 136, 1024], "BT=256"),
        ];
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
        for (file, kernel, [t, n, k], wide) in cases {
            let gated = kernel.ends_with("_silu");
            // One SM: every tile is a wave.
            let head = token_head(&format!("{kernel}@{wide}"), t, n, gated, 1);
            let runs: Vec<Run> = if let Some(head) = head {
                let head_variant = if gated { wide } else { "BT=256,SPLITK=2" };
                let rest = if gated {
                    gated_gemm(GgmlType::Q4_K, false, t - head, n, k, true)
                } else {
                    quant_gemm(GgmlType::Q4_K, t - head, n, k, true)
                };
                let rest = rest.unwrap();
                let (_, rest_variant) = rest.split_once('@').unwrap();
                vec![
                    (head_variant.into(), head, 0, 0, None),
                    (rest_variant.into(), t, head, 0, None),
                ]
            } else {
                let split = wave_tail(&format!("{kernel}@{wide}"), t, n, gated, 2)
                    .unwrap_or_else(|| panic!("{kernel}: no split"));
                let (_, tail_variant) = split.tail.split_once('@').unwrap();
                vec![
                    (wide.into(), t, 0, 0, Some(split.head)),
                    (
                        tail_variant.into(),
                        t,
                        0,
                        split.tail_first,
                        Some(split.tail_tiles),
                    ),
                ]
            };
            let case = WgCase::new(kernel, [t, n, k]);
            let len = case.spec.output_lens(&case.shape)[0];
            let splits_k = runs.iter().any(|run| run.0.contains("SPLITK"));
            let u = |x: usize| Arg::Scalar(Value::U32(x as u32));
            let mut args = vec![
                Arg::ReadOnly(Buffer::from_f16(&case.x)),
                Arg::ReadOnly(Buffer::from_slice(&case.w)),
                product_output(case.spec, len, splits_k),
            ];
            for (variant, run_t, token0, tile0, tiles) in &runs {
                let c = compile(&dir.join(file), variant);
                let interp = Interpreter::new(&c.module).sources(&c.sources);
                args.truncate(3);
                args.extend([
                    u(*run_t),
                    u(n),
                    u(k),
                    u(*tile0),
                    u(*token0),
                    u(tiles.unwrap_or(0)),
                    Arg::Buffer(Buffer::from_u32(&[0])),
                ]);
                // The engine's grids (gpu::launch_gemm) on a device of two SMs.
                let grid = match tiles {
                    _ if variant.contains("PERSIST") => [tiles.unwrap_or(2).min(2) as u32, 1, 1],
                    Some(tiles) => [*tiles as u32, 1, 1],
                    None => interp.grid(kernel, &args).unwrap(),
                };
                let block = interp.block(kernel).unwrap();
                interp
                    .run(kernel, grid, block, &mut args)
                    .unwrap_or_else(|e| panic!("{kernel}@{variant}: {e}"));
            }
            case.check(&args[2], kernel);
        }
    }

    /// A gemm_wg product on random inputs, for the interpreter: f16 X, the weight's words and
    /// the reference.
    struct WgCase {
        spec: &'static crate::specs::Spec,
        shape: Shape,
        x: Vec<f16>,
        w: Vec<u32>,
        want: Vec<f64>,
    }

    impl WgCase {
        fn new(kernel: &str, [t, n, k]: [usize; 3]) -> Self {
            let spec = spec_for(kernel).unwrap();
            let shape = Shape(vec![t, n, k]);
            let inputs = harness::random_inputs(spec, &shape);
            WgCase {
                spec,
                x: inputs[0].iter().map(|&v| f16::from_f32(v)).collect(),
                w: harness::weight_words(spec, &inputs[1]),
                want: spec.reference(&shape, &inputs),
                shape,
            }
        }

        /// A poisoned output.
        fn output(&self) -> Arg {
            product_output(self.spec, self.spec.output_lens(&self.shape)[0], false)
        }

        /// The whole product's arguments (tile0, token0 and tiles 0), the output poisoned, and
        /// `ws` of `words` zeros.
        fn args(&self, words: usize) -> Vec<Arg> {
            let u = |x: usize| Arg::Scalar(Value::U32(x as u32));
            let mut args = vec![
                Arg::ReadOnly(Buffer::from_f16(&self.x)),
                Arg::ReadOnly(Buffer::from_slice(&self.w)),
                self.output(),
            ];
            args.extend(self.shape.0.iter().map(|&d| u(d)));
            args.extend([u(0), u(0), u(0)]);
            args.push(Arg::Buffer(Buffer::from_u32(&vec![0; words])));
            args
        }

        /// Fails unless `out` holds the product (`what` names the run).
        fn check(&self, out: &Arg, what: &str) {
            let errors = Errors::new(&output_values(self.spec, out), &self.want, &[]);
            assert!(
                errors.passes(self.spec.output_tolerance(0, &self.shape)),
                "{what} at {}: {errors:?}",
                self.shape
            );
        }
    }

    /// gemm_wg's persistent blocks (PERSIST) take every tile once and carry the ring from tile
    /// to tile: 300 tokens (two token tiles, the second ragged) by 136 rows (two tiles of 128,
    /// the second ragged; a gated unit's 72 outputs likewise), on one block and on three (block
    /// 0 takes tiles 0 and 3). K of three super-blocks leaves the weights' two-deep ring on the
    /// other parity at the next tile; Q6_K reloads its d words per tile; with 5 stages, a tile's
    /// slices leave the ring's slots and phases shifted for the next. Each also stores
    /// through shared memory (TMA_STORE): the first token tile's chunks go out as TMA stores
    /// clipped at N, the second (moved back to end at T) takes the direct stores, and one block
    /// carries the staging slots' mbarrier phases from tile to tile (two slots, and three).
    #[test]
    fn persistent_gemm_wg_blocks_take_every_tile() {
        let cases = [
            ("gemm_wg.tile", "gemm_q4k_wg", "BT=256", [300, 136, 768]),
            ("gemm_wg.tile", "gemm_q6k_wg", "BT=256", [300, 136, 768]),
            ("gemm_wg_h.tile", "gemm_q4k_wg_h", "BT=256", [300, 136, 768]),
            (
                "gemm_wg_glu.tile",
                "gemm_q4k_wg_silu",
                "BT=256",
                [300, 72, 512],
            ),
            (
                "gemm_wg.tile",
                "gemm_q4k_wg",
                "WG=1,BT=256,STAGES=5,SHFL_SCALES=1",
                [300, 72, 768],
            ),
            // A 5-deep ring: a tile's 12 slices leave the next tile's first on another slot.
            (
                "gemm_wg.tile",
                "gemm_q6k_wg",
                "BT=256,STAGES=5",
                [300, 136, 768],
            ),
            // Q6_K's rows paired (rows 2g and 2g + 1 from its swizzled rings; the first tile's
            // outputs in paired stores), writing f32 and f16.
            (
                "gemm_wg.tile",
                "gemm_q6k_wg",
                "BT=256,Q6K_PAIRS=1",
                [300, 136, 768],
            ),
            (
                "gemm_wg_h.tile",
                "gemm_q6k_wg_h",
                "BT=256,Q6K_PAIRS=1",
                [300, 136, 768],
            ),
            (
                "gemm_wg_glu.tile",
                "gemm_q4k_wg_silu",
                "BT=256,STAGES=5",
                [300, 72, 768],
            ),
        ];
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
        for (file, kernel, tile, shape) in cases {
            let case = WgCase::new(kernel, shape);
            for (blocks, store) in [1, 3]
                .into_iter()
                .flat_map(|b| [(b, ""), (b, ",TMA_STORE=1"), (b, ",TMA_STORE=1,YSLOTS=3")])
            {
                let variant = format!("{tile},PRODUCER=1,PERSIST={blocks}{store}");
                let c = compile(&dir.join(file), &variant);
                let mut args = case.args(1);
                let interp = Interpreter::new(&c.module).sources(&c.sources);
                let grid = interp.grid(kernel, &args).unwrap();
                assert_eq!(grid, [blocks as u32, 1, 1], "{kernel}@{variant}");
                interp
                    .run(kernel, grid, interp.block(kernel).unwrap(), &mut args)
                    .unwrap_or_else(|e| panic!("{kernel}@{variant}: {e}"));
                case.check(&args[2], &format!("{kernel}@{variant}"));
            }
        }
    }

    /// The STAMPS probe of the persistent tile stores the product as the tile does, and its
    /// timeline: two blocks over four tiles (300 tokens by 136 rows), each block's two entries
    /// marked with their tiles, block b's tiles b and b + 2, the consumer's stamps in order
    /// (the interpreter's clocks are its step counts), and the host's table reads them.
    #[test]
    fn stamps_probe_writes_each_tiles_timeline() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
        let kernel = "gemm_q4k_wg";
        let variant = "BT=256,PRODUCER=1,PERSIST=2,STAMPS=1";
        let case = WgCase::new(kernel, [300, 136, 768]);
        let c = compile(&dir.join("gemm_wg.tile"), variant);
        let words = crate::stamps::workspace_words(2);
        assert_eq!(
            case.spec
                .workspace_words(&format!("{kernel}@{variant}"), &case.shape),
            Some(words)
        );
        let mut args = case.args(words);
        let interp = Interpreter::new(&c.module).sources(&c.sources);
        interp
            .run(kernel, [2, 1, 1], interp.block(kernel).unwrap(), &mut args)
            .unwrap_or_else(|e| panic!("{kernel}@{variant}: {e}"));
        case.check(&args[2], variant);
        let Arg::Buffer(ws) = &args[args.len() - 1] else {
            panic!("ws is a buffer")
        };
        let ws = ws.to_u32();
        let stamp = |block: usize, tile: usize, pair: usize| {
            let at = (block * 16 + tile) * 16 + 2 * pair;
            u64::from(ws[at]) | u64::from(ws[at + 1]) << 32
        };
        for block in 0..2 {
            for tile in 0..2 {
                assert_eq!(
                    stamp(block, tile, 7),
                    1 << 32 | (block + 2 * tile) as u64,
                    "block {block}, tile {tile}"
                );
                let consumer: Vec<u64> = (0..4).map(|p| stamp(block, tile, p)).collect();
                assert!(consumer.is_sorted(), "{consumer:?}");
                assert!(stamp(block, tile, 5) <= stamp(block, tile, 6));
            }
            assert!(stamp(block, 0, 3) <= stamp(block, 1, 0));
            assert_eq!(stamp(block, 2, 7), 0, "no third tile");
        }
        let table = crate::stamps::summary(&ws).expect("stamps");
        assert!(table.starts_with("stamps: 2 blocks, 4 tiles"), "{table}");
    }

    /// gemm_wg's clusters of two (CLUSTER = 2): each block multicasts half of the pair's X tile
    /// into both, and releases a slot to both producers. 300 tokens (the second token tile
    /// moved back) by 200 rows, by K of three super-blocks: the one-warpgroup tile (two
    /// clusters' tiles of 128 rows, the second one's second block past N but for 8 rows), the
    /// persistent tile on one cluster and on two (a cluster's tile of 256 rows, its second
    /// block's past N but for 72; tiles carried from one to the next), the K split in two with
    /// a producer.
    #[test]
    fn clustered_gemm_wg_blocks_share_their_x_tiles() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
        for kernel in ["gemm_q4k_wg", "gemm_q6k_wg"] {
            let case = WgCase::new(kernel, [300, 200, 768]);
            for (variant, grid) in [
                (
                    "WG=1,BT=256,STAGES=5,PRODUCER=1,SHFL_SCALES=1,CLUSTER=2",
                    [4, 2, 1],
                ),
                ("BT=256,PRODUCER=1,PERSIST=2,CLUSTER=2", [2, 1, 1]),
                ("BT=256,PRODUCER=1,PERSIST=4,CLUSTER=2", [4, 1, 1]),
                (
                    "BT=256,SPLITK=2,TMA_STORE=1,PRODUCER=1,CLUSTER=2",
                    [2, 2, 2],
                ),
            ] {
                let name = format!("{kernel}@{variant}");
                let c = compile(&dir.join("gemm_wg.tile"), variant);
                let mut args = case.args(1);
                if variant.contains("SPLITK") {
                    args[2] =
                        product_output(case.spec, case.spec.output_lens(&case.shape)[0], true);
                }
                let interp = Interpreter::new(&c.module).sources(&c.sources);
                assert_eq!(interp.grid(kernel, &args).unwrap(), grid, "{name}");
                interp
                    .run(kernel, grid, interp.block(kernel).unwrap(), &mut args)
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                case.check(&args[2], &name);
            }
        }
    }

    /// gemm_wg's K splits through shared memory (TMA_STORE) add their parts into the zeroed
    /// output with TMA reductions: 300 x 136 (four ragged tiles; the second token tile, moved
    /// back, adds with atomics) by K of three super-blocks in two and in three, Q4_K and Q6_K.
    #[test]
    fn split_gemm_wg_tiles_add_through_shared_memory() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
        for kernel in ["gemm_q4k_wg", "gemm_q6k_wg"] {
            let case = WgCase::new(kernel, [300, 136, 768]);
            for splits in [2, 3] {
                let variant = format!("BT=256,SPLITK={splits},TMA_STORE=1");
                let c = compile(&dir.join("gemm_wg.tile"), &variant);
                let mut args = case.args(1);
                args[2] = product_output(case.spec, case.spec.output_lens(&case.shape)[0], true);
                let interp = Interpreter::new(&c.module).sources(&c.sources);
                let grid = interp.grid(kernel, &args).unwrap();
                assert_eq!(grid, [2, 2, splits as u32], "{kernel}@{variant}");
                interp
                    .run(kernel, grid, interp.block(kernel).unwrap(), &mut args)
                    .unwrap_or_else(|e| panic!("{kernel}@{variant}: {e}"));
                case.check(&args[2], &format!("{kernel}@{variant}"));
            }
        }
    }

    /// gemm_wg's builds that add their product into the output (ADD_OUTPUT), on the tiles the
    /// engine's residual products take (one warpgroup; persistent blocks, here three), each
    /// with f32 atomics and with TMA reductions, into an output holding nonzero values: 300 x
    /// 136 x 768, ragged tiles (the second token tile, moved back, adds directly).
    #[test]
    fn add_output_gemm_wg_tiles_add_into_what_the_output_holds() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
        for kernel in ["gemm_q4k_wg", "gemm_q6k_wg"] {
            let mut case = WgCase::new(kernel, [300, 136, 768]);
            let addends = harness::addends(case.want.len());
            for (want, &a) in case.want.iter_mut().zip(&addends) {
                *want += f64::from(a);
            }
            for tile in [
                "WG=1,BT=256,STAGES=5,PRODUCER=1,SHFL_SCALES=1",
                "BT=256,PRODUCER=1,PERSIST=3",
            ] {
                for store in ["", ",TMA_STORE=1"] {
                    let variant = format!("{tile}{store},ADD_OUTPUT=1");
                    let name = format!("{kernel}@{variant}");
                    assert!(adds_into_output(&name));
                    let c = compile(&dir.join("gemm_wg.tile"), &variant);
                    let mut args = case.args(1);
                    args[2] = Arg::Buffer(Buffer::from_f32(&addends));
                    let interp = Interpreter::new(&c.module).sources(&c.sources);
                    let grid = interp.grid(kernel, &args).unwrap();
                    interp
                        .run(kernel, grid, interp.block(kernel).unwrap(), &mut args)
                        .unwrap_or_else(|e| panic!("{name}: {e}"));
                    case.check(&args[2], &name);
                }
            }
        }
    }

    /// gemm_wg's FIRST_STORES splits write a poisoned output without zeroing: each tile's first
    /// split stores, the second adds. 512 x 256 (staged tiles: TMA stores, then reductions),
    /// 300 x 136 (the second token tile, moved back, stores directly: a thread's own
    /// outputs in order), 64 x 1001 (N % 8 != 0: direct everywhere), each by K of three or
    /// four super-blocks, and 256 x 128 by one super-block (the first split has none: the
    /// second stores alone). Each run must leave `ws` at zero, so the second run (the output
    /// poisoned again) must be right too. The interpreter runs blocks in order, so there the
    /// first split always arrives first; the GPU's selftest takes the other order too.
    #[test]
    fn first_stores_gemm_wg_splits_need_no_zeroed_output() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
        let variant = "BT=256,SPLITK=2,TMA_STORE=1,FIRST_STORES=1";
        for kernel in ["gemm_q4k_wg", "gemm_q6k_wg"] {
            let name = format!("{kernel}@{variant}");
            assert!(!adds_into_output(&name));
            let c = compile(&dir.join("gemm_wg.tile"), variant);
            let interp = Interpreter::new(&c.module).sources(&c.sources);
            for shape in [
                [512, 256, 1024],
                [300, 136, 768],
                [64, 1001, 768],
                [256, 128, 256],
            ] {
                let case = WgCase::new(kernel, shape);
                let words = case.spec.workspace_words(&name, &case.shape).unwrap();
                let mut args = case.args(words);
                let grid = interp.grid(kernel, &args).unwrap();
                assert_eq!(
                    words,
                    (grid[0] * grid[1] * 256) as usize,
                    "{name} at {shape:?}"
                );
                for run in 0..2 {
                    args[2] = case.output();
                    interp
                        .run(kernel, grid, interp.block(kernel).unwrap(), &mut args)
                        .unwrap_or_else(|e| panic!("{name} at {shape:?}: {e}"));
                    case.check(&args[2], &format!("{name}, run {run}"));
                    let ws = args[9].buffer().unwrap().to_u32();
                    assert!(
                        ws.iter().all(|&w| w == 0),
                        "{name} at {shape:?} left ws set"
                    );
                }
            }
        }
    }

    /// gemm_wg's stream-K blocks (STREAMK) share the tiles' super-blocks out and hand partial
    /// sums over. STREAMK=1, 300 x 136 tokens by rows (four ragged tiles) with K of four
    /// super-blocks, sixteen units:
    /// - 3 blocks (the kernel's grid): tiles split in two, a block waiting for the next;
    /// - 7: a tile in three (a block's whole share inside it);
    /// - 16: every tile in four, a unit a block;
    /// - 20 (a host's grid, more blocks than units): four blocks without units, which no block
    ///   may wait for.
    ///
    /// STREAMK=2 (whole tiles first), 600 x 264 with K of two super-blocks, nine ragged tiles:
    /// - 2 blocks: six whole tiles, then three tiles' six units, the middle one split;
    /// - 3: six whole, then a whole tile a block;
    /// - 4: four whole, then five tiles' ten units, two of them split between blocks that
    ///   reach their shares after whole tiles.
    ///
    /// Each run must leave the flags at zero, so the second run (the same `ws`, the output
    /// poisoned again) must be right too. A gated unit and Q6_K (d words from a trip's first
    /// super-block) take some of the same grids.
    #[test]
    fn stream_k_gemm_wg_blocks_share_the_super_blocks_out() {
        use crate::gpu::dispatch::stream_k_workspace_words;
        let cases = [
            (
                "gemm_wg.tile",
                "gemm_q4k_wg",
                1,
                [300, 136, 1024],
                &[3, 7, 16, 20][..],
            ),
            ("gemm_wg.tile", "gemm_q6k_wg", 1, [300, 136, 1024], &[3, 7]),
            (
                "gemm_wg_glu.tile",
                "gemm_q4k_wg_silu",
                1,
                [300, 72, 1024],
                &[3, 7],
            ),
            (
                "gemm_wg.tile",
                "gemm_q4k_wg",
                2,
                [600, 264, 512],
                &[2, 3, 4],
            ),
            ("gemm_wg.tile", "gemm_q6k_wg", 2, [600, 264, 512], &[4]),
            (
                "gemm_wg_glu.tile",
                "gemm_q4k_wg_silu",
                2,
                [600, 136, 512],
                &[4],
            ),
        ];
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
        for (file, kernel, streamk, shape, grids) in cases {
            let case = WgCase::new(kernel, shape);
            let columns = if kernel.ends_with("_silu") { 64 } else { 128 };
            let units = shape[0].div_ceil(256) * shape[1].div_ceil(columns) * (shape[2] / 256);
            for &blocks in grids {
                let own = blocks.min(units);
                let variant = format!("BT=256,PRODUCER=1,PERSIST={own},STREAMK={streamk}");
                let name = format!("{kernel}@{variant}");
                let c = compile(&dir.join(file), &variant);
                let words = case.spec.workspace_words(&name, &case.shape).unwrap();
                assert!(words >= stream_k_workspace_words(own));
                let mut args = case.args(stream_k_workspace_words(blocks));
                let interp = Interpreter::new(&c.module).sources(&c.sources);
                assert_eq!(interp.grid(kernel, &args).unwrap(), [own as u32, 1, 1]);
                let block = interp.block(kernel).unwrap();
                for run in 0..2 {
                    args[2] = case.output();
                    interp
                        .run(kernel, [blocks as u32, 1, 1], block, &mut args)
                        .unwrap_or_else(|e| panic!("{name} on {blocks}: {e}"));
                    case.check(&args[2], &format!("{name} on {blocks} blocks, run {run}"));
                    let flags = &args[9].buffer().unwrap().to_u32()[..8 * blocks];
                    assert!(
                        flags.iter().all(|&f| f == 0),
                        "{name} on {blocks} blocks left flags set: {flags:?}"
                    );
                }
            }
        }
    }

    fn interp_value(v: ScalarValue) -> Value {
        match v {
            ScalarValue::U32(x) => Value::U32(x),
            ScalarValue::F32(x) => Value::F32(x),
            other => panic!("no interpreter value for {other:?}"),
        }
    }

    /// Every embedded kernel and variant, run by the CPU interpreter (which also catches
    /// out-of-bounds accesses, divergent barriers and shared-memory races), against its reference.
    /// `ZINC_INTERP_ONLY=TEXT` runs only the kernels whose name contains TEXT.
    #[test]
    fn kernels_match_their_references_in_the_interpreter() {
        let families = compile_families();
        let only = std::env::var("ZINC_INTERP_ONLY").unwrap_or_default();
        // Every arch's kernels: some exist for one arch only (sm_90a's wgmma kernels).
        let names: std::collections::BTreeSet<&str> = crate::registry::embedded()
            .iter()
            .flat_map(|a| a.modules.iter())
            .flat_map(|m| m.kernels.iter().map(|k| k.name))
            .filter(|name| name.contains(&only))
            .collect();
        for name in names {
            let (base, variant) = name.split_once('@').unwrap_or((name, ""));
            let (file, defaults) = families
                .iter()
                .find(|(_, c)| c.module.functions.iter().any(|f| f.name == base))
                .unwrap_or_else(|| panic!("no family defines `{base}`"));
            let specialized;
            let c = if variant.is_empty() {
                defaults
            } else {
                specialized = compile(file, variant);
                &specialized
            };
            let spec = spec_for(name).unwrap();
            for shape in spec.shapes(name, &[], spec.interp_shapes()) {
                let inputs = harness::random_inputs(spec, &shape);
                let lens = spec.output_lens(&shape);
                let last = inputs.len() - 1;
                let mut args: Vec<Arg> = inputs
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        Arg::ReadOnly(match (spec.weight, spec.input_elem(i)) {
                            (Some(_), _) if i == last => {
                                Buffer::from_slice(&harness::weight_words(spec, v))
                            }
                            (_, Elem::F32) => Buffer::from_f32(v),
                            (_, Elem::F16) => Buffer::from_f16(
                                &v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>(),
                            ),
                            (_, Elem::U32) => {
                                Buffer::from_u32(&v.iter().map(|&x| x as u32).collect::<Vec<_>>())
                            }
                            (_, Elem::I8) => {
                                Buffer::from_slice(&v.iter().map(|&x| x as i8).collect::<Vec<_>>())
                            }
                            (_, Elem::I32) => {
                                Buffer::from_i32(&v.iter().map(|&x| x as i32).collect::<Vec<_>>())
                            }
                            (_, Elem::ActS8) => Buffer::from_u32(&harness::act_s8_words(v)),
                        })
                    })
                    .collect();
                args.extend(
                    spec.output_elems()
                        .into_iter()
                        .zip(&lens)
                        .map(|(elem, len)| {
                            let len = *len;
                            Arg::Buffer(match elem {
                                Elem::F32 | Elem::F16 => {
                                    // Zeros to add into (K split), and poisoned guards.
                                    let mut host = vec![f32::NAN; len + GUARD];
                                    if adds_into_output(name) {
                                        host[..len].fill(0.0);
                                    }
                                    match elem {
                                        Elem::F32 => Buffer::from_f32(&host),
                                        _ => Buffer::from_f16(
                                            &host
                                                .iter()
                                                .map(|&v| f16::from_f32(v))
                                                .collect::<Vec<_>>(),
                                        ),
                                    }
                                }
                                // Integer poison, read back as NaN (harness::widen_i32).
                                Elem::I8 => Buffer::from_slice(&vec![i8::MIN; len + GUARD]),
                                Elem::I32 => Buffer::from_i32(&vec![i32::MIN; len + GUARD]),
                                Elem::ActS8 => Buffer::from_u32(&vec![
                            crate::reference::ACT_S8_POISON;
                            Elem::ActS8.output_bytes(len + GUARD)
                                / 4
                        ]),
                                Elem::U32 => unreachable!("no kernel writes u32 outputs"),
                            })
                        }),
                );
                args.extend(
                    spec.scalars(&shape)
                        .into_iter()
                        .map(|v| Arg::Scalar(interp_value(v))),
                );
                if let Some(words) = spec.workspace_words(name, &shape) {
                    args.push(Arg::Buffer(Buffer::from_u32(&vec![0; words])));
                }
                Interpreter::new(&c.module)
                    .sources(&c.sources)
                    .launch(base, &mut args)
                    .unwrap_or_else(|e| panic!("{name} at {shape}: {e}"));
                let outputs: Vec<Vec<f64>> = args[inputs.len()..][..spec.outputs()]
                    .iter()
                    .zip(spec.output_elems())
                    .map(|(arg, elem)| {
                        let out = arg.buffer().unwrap();
                        match elem {
                            Elem::F32 => out.to_f32().into_iter().map(f64::from).collect(),
                            Elem::F16 => out.to_f16().into_iter().map(f64::from).collect(),
                            Elem::I8 => out.to_vec().into_iter().map(harness::widen_i8).collect(),
                            Elem::I32 => out.to_i32().into_iter().map(harness::widen_i32).collect(),
                            Elem::ActS8 => harness::decode_act_s8_words(&out.to_u32()),
                            Elem::U32 => unreachable!("no kernel writes u32 outputs"),
                        }
                    })
                    .collect();
                let want = spec.reference_given(&shape, &spec.reference(&shape, &inputs), &outputs);
                for (i, errors) in compare_outputs(&outputs, &want, &lens).iter().enumerate() {
                    assert!(
                        errors.passes(spec.output_tolerance(i, &shape)),
                        "{} at {shape}: {errors:?}",
                        output_label(name, spec, i)
                    );
                }
            }
        }
    }

    #[test]
    fn without_a_gpu_selftest_fails_cleanly() {
        if zinc_runtime::driver_present() {
            return;
        }
        let args = Args {
            filters: vec![],
            shapes: vec![],
        };
        let msg = format!("{:#}", run(&args).unwrap_err());
        assert_eq!(msg.lines().count(), 1, "{msg}");
    }
}
