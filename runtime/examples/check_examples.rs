//! Runs the compiler's example kernels on the GPU against f64 CPU references and times them.
//!
//! Usage: `check_examples DIR`, where DIR holds `NAME.ptx` and `NAME.json` for vector_add,
//! rmsnorm_f16, softmax_rows, matmul_simt, mma_tf32 and (on sm_90) wgmma_tile and
//! wgmma_tile_a_shared. Exit status: 0 all pass, 1 a check failed, 2 no GPU or bad usage.

use std::path::PathBuf;
use std::process::ExitCode;

use zinc_runtime::half::f16;
use zinc_runtime::{time_median_ms, Arg, Device, DeviceBuffer, DeviceElem, Grid, Kernel, Stream};

const WARMUP: usize = 3;
const TIMED_RUNS: usize = 20;
/// Relative (Frobenius) tolerances.
const TOL_F32: f64 = 1e-5;
const TOL_APPROX_EXP: f64 = 1e-4;
const TOL_F16_OUT: f64 = 2e-3;
const RMS_EPS: f32 = 1e-5;

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let (Some(dir), None) = (args.next(), args.next()) else {
        eprintln!("usage: check_examples DIR   (DIR holds NAME.ptx and NAME.json per kernel)");
        return ExitCode::from(2);
    };
    let device = match Device::new(0) {
        Ok(device) => device,
        Err(e) => {
            eprintln!("check_examples: {e}");
            return ExitCode::from(2);
        }
    };
    let p = device.props();
    println!(
        "device 0: {} ({}, {} SMs, {:.1} GiB, L2 {} MiB, smem/block opt-in {} KiB)",
        p.name,
        p.arch(),
        p.sm_count,
        p.total_memory as f64 / (1u64 << 30) as f64,
        p.l2_bytes >> 20,
        p.max_shared_per_block_optin / 1024
    );

    let checker = Checker {
        dir: PathBuf::from(dir),
        stream: device.default_stream(),
        device: &device,
        rng: Rng(0x5eed_2024),
        rows: Vec::new(),
    };
    let rows = checker.run_all();
    print_table(&rows);
    let failed = rows.iter().filter(|r| !r.passed()).count();
    if failed == 0 {
        println!("all {} checks passed", rows.len());
        ExitCode::SUCCESS
    } else {
        println!("{failed} of {} checks FAILED", rows.len());
        ExitCode::from(1)
    }
}

/// One checked kernel run.
struct Row {
    kernel: &'static str,
    shape: String,
    outcome: Result<Measured, String>,
}

struct Measured {
    errors: Errors,
    tol: f64,
    median_ms: f32,
    /// Throughput over the minimal traffic or flops, e.g. "812 GB/s".
    throughput: String,
}

impl Row {
    fn passed(&self) -> bool {
        matches!(&self.outcome, Ok(m) if m.errors.passes(m.tol))
    }
}

/// Comparison of a GPU output with its reference.
struct Errors {
    max_abs: f64,
    rel_frobenius: f64,
    /// Elements still NaN from the poisoning: never written.
    unwritten: usize,
    /// Written but infinite or NaN for a finite reference.
    non_finite: usize,
}

impl Errors {
    fn new(got: &[f64], want: &[f64]) -> Errors {
        let (mut max_abs, mut diff2, mut ref2) = (0.0f64, 0.0f64, 0.0f64);
        let (mut unwritten, mut non_finite) = (0, 0);
        for (&g, &w) in got.iter().zip(want) {
            if g.is_nan() {
                unwritten += 1;
                continue;
            }
            if !g.is_finite() {
                non_finite += 1;
                continue;
            }
            let d = g - w;
            max_abs = max_abs.max(d.abs());
            diff2 += d * d;
            ref2 += w * w;
        }
        Errors {
            max_abs,
            rel_frobenius: (diff2 / ref2.max(f64::MIN_POSITIVE)).sqrt(),
            unwritten: unwritten + want.len().saturating_sub(got.len()),
            non_finite,
        }
    }

    fn passes(&self, tol: f64) -> bool {
        self.unwritten == 0 && self.non_finite == 0 && self.rel_frobenius <= tol
    }
}

struct Checker<'d> {
    dir: PathBuf,
    device: &'d Device,
    stream: Stream,
    rng: Rng,
    rows: Vec<Row>,
}

impl Checker<'_> {
    fn run_all(mut self) -> Vec<Row> {
        self.with_kernel("vector_add", |c, k| {
            for n in [1, 1000, 1_000_003, 1 << 24] {
                c.record("vector_add", format!("n={n}"), |c| c.vector_add(k, n));
            }
        });
        self.with_kernel("rmsnorm_f16", |c, k| {
            for (rows, cols) in [(37, 4096), (37, 1000), (1, 1), (4096, 4096)] {
                c.record("rmsnorm_f16", format!("{rows}x{cols}"), |c| {
                    c.rmsnorm(k, rows, cols)
                });
            }
        });
        self.with_kernel("softmax_rows", |c, k| {
            for (rows, cols) in [(1001, 32000), (1001, 77), (3, 1)] {
                c.record("softmax_rows", format!("{rows}x{cols}"), |c| {
                    c.softmax(k, rows, cols)
                });
            }
        });
        self.with_kernel("mma_tf32", |c, k| {
            c.record("mma_tf32", "16x8x8".into(), |c| c.mma_tf32(k));
        });
        // wgmma is sm_90a's (H100, H200): gpu-pack builds the example for it alone.
        if self.device.props().arch() == "sm_90" {
            self.with_kernel("wgmma_tile", |c, k| {
                c.record("wgmma_tile", "64x64x64".into(), |c| c.wgmma_tile(k));
            });
            self.with_kernel("wgmma_tile_a_shared", |c, k| {
                c.record("wgmma_tile_a_shared", "64x64x64".into(), |c| {
                    c.wgmma_tile(k)
                });
            });
        }
        self.with_kernel("matmul_simt", |c, k| {
            for (m, n, kk) in [(513, 257, 300), (1024, 1024, 1024), (1, 1, 1), (17, 33, 5)] {
                c.record("matmul_simt", format!("m={m} n={n} k={kk}"), |c| {
                    c.matmul(k, m, n, kk)
                });
            }
        });
        self.rows
    }

    fn with_kernel(&mut self, name: &'static str, body: impl FnOnce(&mut Self, &Kernel)) {
        match self.device.load_kernel_from_dir(&self.dir, name) {
            Ok(kernel) => body(self, &kernel),
            Err(e) => self.rows.push(Row {
                kernel: name,
                shape: "-".into(),
                outcome: Err(format!("load: {e}")),
            }),
        }
    }

    fn record(
        &mut self,
        kernel: &'static str,
        shape: String,
        check: impl FnOnce(&mut Self) -> BoxResult<Measured>,
    ) {
        let outcome = check(self).map_err(|e| e.to_string());
        self.rows.push(Row {
            kernel,
            shape,
            outcome,
        });
    }

    /// Uploads a poisoned (all-NaN) output buffer.
    fn poisoned<T: DeviceElem>(&self, len: usize, nan: T) -> BoxResult<DeviceBuffer<T>> {
        Ok(self.stream.upload(&vec![nan; len])?)
    }

    fn vector_add(&mut self, k: &Kernel, n: usize) -> BoxResult<Measured> {
        let a_host = self.rng.nonzero_vec(n, 1.0);
        let b_host = self.rng.nonzero_vec(n, 1.0);
        let want: Vec<f64> = a_host
            .iter()
            .zip(&b_host)
            .map(|(&a, &b)| f64::from(a) + f64::from(b))
            .collect();
        let a = self.stream.upload(&a_host)?;
        let b = self.stream.upload(&b_host)?;
        let mut c = self.poisoned(n, f32::NAN)?;
        let n32 = u32::try_from(n)?;
        let launch = |c: &mut DeviceBuffer<f32>| {
            k.launch(
                &self.stream,
                Grid::Auto,
                &mut [Arg::from(&a), Arg::from(&b), Arg::from(c), Arg::from(n32)],
            )
            .map(drop)
        };
        launch(&mut c)?;
        let errors = Errors::new(&widen(&self.stream.download(&c)?), &want);
        let median_ms = time_median_ms(&self.stream, WARMUP, TIMED_RUNS, || launch(&mut c))?;
        Ok(Measured {
            errors,
            tol: TOL_F32,
            median_ms,
            throughput: gb_per_s(12 * n, median_ms),
        })
    }

    fn rmsnorm(&mut self, k: &Kernel, rows: usize, cols: usize) -> BoxResult<Measured> {
        let x_host = self.rng.nonzero_vec(rows * cols, 2.0);
        let w_host = self.rng.nonzero_vec(cols, 1.5);
        let mut want = Vec::with_capacity(rows * cols);
        for row in x_host.chunks(cols) {
            let ss: f64 = row.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
            let scale = 1.0 / (ss / cols as f64 + f64::from(RMS_EPS)).sqrt();
            want.extend(
                row.iter()
                    .zip(&w_host)
                    .map(|(&v, &w)| f64::from(v) * scale * f64::from(w)),
            );
        }
        let x = self.stream.upload(&x_host)?;
        let w = self.stream.upload(&w_host)?;
        let mut y = self.poisoned(rows * cols, f16::NAN)?;
        let (r32, c32) = (u32::try_from(rows)?, u32::try_from(cols)?);
        let launch = |y: &mut DeviceBuffer<f16>| {
            k.launch(
                &self.stream,
                Grid::Auto,
                &mut [
                    Arg::from(&x),
                    Arg::from(&w),
                    Arg::from(y),
                    Arg::from(r32),
                    Arg::from(c32),
                    Arg::from(RMS_EPS),
                ],
            )
            .map(drop)
        };
        launch(&mut y)?;
        let got: Vec<f64> = self
            .stream
            .download(&y)?
            .iter()
            .map(|v| v.to_f64())
            .collect();
        let errors = Errors::new(&got, &want);
        let median_ms = time_median_ms(&self.stream, WARMUP, TIMED_RUNS, || launch(&mut y))?;
        Ok(Measured {
            errors,
            tol: TOL_F16_OUT,
            median_ms,
            throughput: gb_per_s(rows * cols * (4 + 2) + cols * 4, median_ms),
        })
    }

    fn softmax(&mut self, k: &Kernel, rows: usize, cols: usize) -> BoxResult<Measured> {
        let x_host = self.rng.nonzero_vec(rows * cols, 8.0);
        let mut want = Vec::with_capacity(rows * cols);
        for row in x_host.chunks(cols) {
            let m = row
                .iter()
                .fold(f64::NEG_INFINITY, |m, &v| m.max(f64::from(v)));
            let exps: Vec<f64> = row.iter().map(|&v| (f64::from(v) - m).exp()).collect();
            let sum: f64 = exps.iter().sum();
            want.extend(exps.iter().map(|e| e / sum));
        }
        let x = self.stream.upload(&x_host)?;
        let mut y = self.poisoned(rows * cols, f32::NAN)?;
        let (r32, c32) = (u32::try_from(rows)?, u32::try_from(cols)?);
        let launch = |y: &mut DeviceBuffer<f32>| {
            k.launch(
                &self.stream,
                Grid::Auto,
                &mut [Arg::from(&x), Arg::from(y), Arg::from(r32), Arg::from(c32)],
            )
            .map(drop)
        };
        launch(&mut y)?;
        let errors = Errors::new(&widen(&self.stream.download(&y)?), &want);
        let median_ms = time_median_ms(&self.stream, WARMUP, TIMED_RUNS, || launch(&mut y))?;
        Ok(Measured {
            errors,
            tol: TOL_APPROX_EXP,
            median_ms,
            throughput: gb_per_s(rows * cols * 8, median_ms),
        })
    }

    /// One m16n8k8 tf32 mma. The reference drops the operands' low 13 mantissa bits, as the
    /// language (and the interpreter) says the tensor cores do; rounding them instead would be
    /// off by about 1e-4 relative, ten times the tolerance.
    fn mma_tf32(&mut self, k: &Kernel) -> BoxResult<Measured> {
        let a_host = self.rng.nonzero_vec(16 * 8, 1.0);
        let bt_host = self.rng.nonzero_vec(8 * 8, 1.0);
        let c0_host = self.rng.nonzero_vec(16 * 8, 1.0);
        let tf32 = |x: f32| f64::from(f32::from_bits(x.to_bits() & !0x1fff));
        let want: Vec<f64> = (0..16 * 8)
            .map(|i| {
                let (r, n) = (i / 8, i % 8);
                let dot: f64 = (0..8)
                    .map(|kk| tf32(a_host[r * 8 + kk]) * tf32(bt_host[n * 8 + kk]))
                    .sum();
                f64::from(c0_host[i]) + dot
            })
            .collect();
        let a = self.stream.upload(&a_host)?;
        let bt = self.stream.upload(&bt_host)?;
        let c0 = self.stream.upload(&c0_host)?;
        let mut c = self.poisoned(16 * 8, f32::NAN)?;
        let launch = |c: &mut DeviceBuffer<f32>| {
            k.launch(
                &self.stream,
                Grid::Auto,
                &mut [Arg::from(&a), Arg::from(&bt), Arg::from(&c0), Arg::from(c)],
            )
            .map(drop)
        };
        launch(&mut c)?;
        let errors = Errors::new(&widen(&self.stream.download(&c)?), &want);
        let median_ms = time_median_ms(&self.stream, WARMUP, TIMED_RUNS, || launch(&mut c))?;
        Ok(Measured {
            errors,
            tol: TOL_F32,
            median_ms,
            throughput: "one warp".into(),
        })
    }

    /// Four wgmma m64n64k16 by one warpgroup: A in registers (wgmma_tile) or in shared memory
    /// (wgmma_tile_a_shared), B in shared memory through the 128-byte swizzle.
    fn wgmma_tile(&mut self, k: &Kernel) -> BoxResult<Measured> {
        let (n, kk) = (64, 64);
        let a_host: Vec<f16> = self
            .rng
            .nonzero_vec(64 * kk, 1.0)
            .into_iter()
            .map(f16::from_f32)
            .collect();
        let b_host: Vec<f16> = self
            .rng
            .nonzero_vec(n * kk, 1.0)
            .into_iter()
            .map(f16::from_f32)
            .collect();
        let want: Vec<f64> = (0..64 * n)
            .map(|i| {
                let (r, c) = (i / n, i % n);
                (0..kk)
                    .map(|j| a_host[r * kk + j].to_f64() * b_host[c * kk + j].to_f64())
                    .sum()
            })
            .collect();
        let a = self.stream.upload(&a_host)?;
        let b = self.stream.upload(&b_host)?;
        let mut d = self.poisoned(64 * n, f32::NAN)?;
        let launch = |d: &mut DeviceBuffer<f32>| {
            k.launch(
                &self.stream,
                Grid::Auto,
                &mut [Arg::from(&a), Arg::from(&b), Arg::from(d)],
            )
            .map(drop)
        };
        launch(&mut d)?;
        let errors = Errors::new(&widen(&self.stream.download(&d)?), &want);
        let median_ms = time_median_ms(&self.stream, WARMUP, TIMED_RUNS, || launch(&mut d))?;
        Ok(Measured {
            errors,
            tol: TOL_F32,
            median_ms,
            throughput: "one warpgroup".into(),
        })
    }

    fn matmul(&mut self, kern: &Kernel, m: usize, n: usize, k: usize) -> BoxResult<Measured> {
        let a_host = self.rng.nonzero_vec(m * k, 1.0);
        let b_host = self.rng.nonzero_vec(k * n, 1.0);
        // i-k-j order walks B and C by rows, which keeps the 1024^3 reference to seconds.
        let mut want = vec![0.0f64; m * n];
        for (i, c_row) in want.chunks_mut(n).enumerate() {
            for (kk, &a) in a_host[i * k..(i + 1) * k].iter().enumerate() {
                let a = f64::from(a);
                for (c, &b) in c_row.iter_mut().zip(&b_host[kk * n..(kk + 1) * n]) {
                    *c += a * f64::from(b);
                }
            }
        }
        let a = self.stream.upload(&a_host)?;
        let b = self.stream.upload(&b_host)?;
        let mut c = self.poisoned(m * n, f32::NAN)?;
        let (m32, n32, k32) = (u32::try_from(m)?, u32::try_from(n)?, u32::try_from(k)?);
        let launch = |c: &mut DeviceBuffer<f32>| {
            kern.launch(
                &self.stream,
                Grid::Auto,
                &mut [
                    Arg::from(&a),
                    Arg::from(&b),
                    Arg::from(c),
                    Arg::from(m32),
                    Arg::from(n32),
                    Arg::from(k32),
                ],
            )
            .map(drop)
        };
        launch(&mut c)?;
        let errors = Errors::new(&widen(&self.stream.download(&c)?), &want);
        let median_ms = time_median_ms(&self.stream, WARMUP, TIMED_RUNS, || launch(&mut c))?;
        let gflops = 2.0 * (m * n * k) as f64 / (f64::from(median_ms) * 1e6);
        Ok(Measured {
            errors,
            tol: TOL_F32,
            median_ms,
            throughput: format!("{gflops:.0} GFLOP/s"),
        })
    }
}

fn widen(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| f64::from(x)).collect()
}

fn gb_per_s(bytes: usize, ms: f32) -> String {
    format!("{:.0} GB/s", bytes as f64 / (f64::from(ms) * 1e6))
}

fn print_table(rows: &[Row]) {
    println!(
        "{:<13} {:<22} {:>10} {:>10} {:>8} {:>10} {:>14}  result",
        "kernel", "shape", "max abs", "rel(frob)", "tol", "median ms", "throughput"
    );
    for row in rows {
        match &row.outcome {
            Ok(m) => {
                let e = &m.errors;
                let mut verdict = String::from(if e.passes(m.tol) { "pass" } else { "FAIL" });
                if e.unwritten > 0 {
                    verdict += &format!(" ({} elements not written)", e.unwritten);
                }
                if e.non_finite > 0 {
                    verdict += &format!(" ({} non-finite)", e.non_finite);
                }
                println!(
                    "{:<13} {:<22} {:>10.3e} {:>10.3e} {:>8.0e} {:>10.4} {:>14}  {verdict}",
                    row.kernel,
                    row.shape,
                    e.max_abs,
                    e.rel_frobenius,
                    m.tol,
                    m.median_ms,
                    m.throughput
                );
            }
            Err(msg) => println!("{:<13} {:<22} FAIL: {msg}", row.kernel, row.shape),
        }
    }
}

/// splitmix64: deterministic inputs without a dependency.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[-scale, -scale/10] ∪ [scale/10, scale]`: random signs, never zero, so a
    /// kernel that skips work cannot pass by accident.
    fn nonzero_vec(&mut self, len: usize, scale: f32) -> Vec<f32> {
        (0..len)
            .map(|_| {
                let bits = self.next_u64();
                let unit = (bits >> 40) as f32 / (1u64 << 24) as f32;
                let magnitude = scale * (0.1 + 0.9 * unit);
                if bits & 1 == 0 {
                    magnitude
                } else {
                    -magnitude
                }
            })
            .collect()
    }
}
