//! The example kernels, compiled by the front end and checked against plain Rust references.

use std::path::Path;

use half::f16;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use zinc_dsl::Compilation;
use zinc_interp::{Arg, Buffer, InterpError, Interpreter, Value};

fn compile(file: &str, defines: &[(&str, &str)]) -> Compilation {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(file);
    let defines: Vec<(String, String)> = defines
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    zinc_dsl::compile_file(&path, &defines).unwrap_or_else(|f| panic!("{}", f.render()))
}

fn random(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

/// Launch with the declared block and the grid computed from the arguments.
fn launch(c: &Compilation, kernel: &str, args: &mut [Arg]) -> Result<(), InterpError> {
    Interpreter::new(&c.module)
        .sources(&c.sources)
        .launch(kernel, args)
}

fn assert_close(got: &[f32], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (g as f64 - w).abs() / w.abs().max(1.0);
        assert!(err <= tol, "element {i}: got {g}, want {w}");
    }
}

#[test]
fn vector_add() {
    let c = compile("vector_add.tile", &[]);
    let n = 1000;
    let (a, b) = (random(n, 1), random(n, 2));
    let mut args = vec![
        Arg::ReadOnly(Buffer::from_f32(&a)),
        Arg::ReadOnly(Buffer::from_f32(&b)),
        Arg::Buffer(Buffer::from_f32(&vec![0.0; n])),
        Arg::Scalar(Value::U32(n as u32)),
    ];
    let interp = Interpreter::new(&c.module);
    assert_eq!(interp.grid("vector_add", &args).unwrap(), [4, 1, 1]);
    assert_eq!(interp.block("vector_add").unwrap(), [256, 1, 1]);
    launch(&c, "vector_add", &mut args).unwrap();
    let got = args[2].buffer().unwrap().to_f32();
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert_eq!(got, want);
}

#[test]
fn vector_add_specialized_block() {
    let c = compile("vector_add.tile", &[("BLOCK", "96")]);
    let n = 200;
    let (a, b) = (random(n, 3), random(n, 4));
    let mut args = vec![
        Arg::ReadOnly(Buffer::from_f32(&a)),
        Arg::ReadOnly(Buffer::from_f32(&b)),
        Arg::Buffer(Buffer::from_f32(&vec![0.0; n])),
        Arg::Scalar(Value::U32(n as u32)),
    ];
    launch(&c, "vector_add", &mut args).unwrap();
    let got = args[2].buffer().unwrap().to_f32();
    assert!(got
        .iter()
        .zip(a.iter().zip(&b))
        .all(|(g, (x, y))| *g == x + y));
}

#[test]
fn vector_add_short_buffer_names_the_source_line() {
    let c = compile("vector_add.tile", &[]);
    let mut args = vec![
        Arg::ReadOnly(Buffer::from_f32(&random(100, 5))),
        Arg::ReadOnly(Buffer::from_f32(&random(300, 6))),
        Arg::Buffer(Buffer::from_f32(&[0.0; 300])),
        Arg::Scalar(Value::U32(300)),
    ];
    let err = launch(&c, "vector_add", &mut args).unwrap_err();
    let msg = err.to_string();
    let loc = err.location().expect("a located error");
    assert!(loc.file.ends_with("vector_add.tile"), "{msg}");
    assert_eq!(loc.line_col.map(|(l, _)| l), Some(7), "{msg}");
    assert!(
        msg.contains("out-of-bounds read of global buffer `a` at element 100 (length 100)"),
        "{msg}"
    );
}

#[test]
fn softmax_rows() {
    let c = compile("softmax.tile", &[]);
    let (rows, cols) = (5, 77);
    let x = random(rows * cols, 7);
    let mut args = vec![
        Arg::ReadOnly(Buffer::from_f32(&x)),
        Arg::Buffer(Buffer::from_f32(&vec![0.0; rows * cols])),
        Arg::Scalar(Value::U32(rows as u32)),
        Arg::Scalar(Value::U32(cols as u32)),
    ];
    launch(&c, "softmax_rows", &mut args).unwrap();
    let mut want = Vec::with_capacity(rows * cols);
    for row in x.chunks(cols) {
        let m = row.iter().fold(f64::MIN, |m, &v| m.max(v as f64));
        let e: Vec<f64> = row.iter().map(|&v| (v as f64 - m).exp()).collect();
        let s: f64 = e.iter().sum();
        want.extend(e.iter().map(|v| v / s));
    }
    assert_close(&args[1].buffer().unwrap().to_f32(), &want, 1e-6);
}

#[test]
fn matmul_simt() {
    let c = compile("matmul_simt.tile", &[]);
    let (m, n, k) = (33, 17, 40);
    let (a, b) = (random(m * k, 8), random(k * n, 9));
    let mut args = vec![
        Arg::ReadOnly(Buffer::from_f32(&a)),
        Arg::ReadOnly(Buffer::from_f32(&b)),
        Arg::Buffer(Buffer::from_f32(&vec![0.0; m * n])),
        Arg::Scalar(Value::U32(m as u32)),
        Arg::Scalar(Value::U32(n as u32)),
        Arg::Scalar(Value::U32(k as u32)),
    ];
    let interp = Interpreter::new(&c.module);
    assert_eq!(interp.grid("matmul_simt", &args).unwrap(), [2, 3, 1]);
    launch(&c, "matmul_simt", &mut args).unwrap();
    let mut want = vec![0.0f64; m * n];
    for i in 0..m {
        for j in 0..n {
            want[i * n + j] = (0..k)
                .map(|l| a[i * k + l] as f64 * b[l * n + j] as f64)
                .sum();
        }
    }
    assert_close(&args[2].buffer().unwrap().to_f32(), &want, 1e-5);
}

#[test]
fn rmsnorm_f16() {
    let c = compile("rmsnorm.tile", &[]);
    let (rows, cols, eps) = (3, 300, 1e-5f32);
    let (x, w) = (random(rows * cols, 10), random(cols, 11));
    let mut args = vec![
        Arg::ReadOnly(Buffer::from_f32(&x)),
        Arg::ReadOnly(Buffer::from_f32(&w)),
        Arg::Buffer(Buffer::from_f16(&vec![f16::ZERO; rows * cols])),
        Arg::Scalar(Value::U32(rows as u32)),
        Arg::Scalar(Value::U32(cols as u32)),
        Arg::Scalar(Value::F32(eps)),
    ];
    launch(&c, "rmsnorm_f16", &mut args).unwrap();
    let mut want = Vec::with_capacity(rows * cols);
    for row in x.chunks(cols) {
        let ms = row.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / cols as f64;
        let scale = 1.0 / (ms + eps as f64).sqrt();
        want.extend(
            row.iter()
                .zip(&w)
                .map(|(&v, &g)| v as f64 * scale * g as f64),
        );
    }
    let got: Vec<f32> = args[2]
        .buffer()
        .unwrap()
        .to_f16()
        .iter()
        .map(|h| h.to_f32())
        .collect();
    // f16 keeps 11 significant bits.
    assert_close(&got, &want, 1e-3);
}

/// f32 as a tf32 operand: the low 13 mantissa bits dropped.
fn tf32(x: f32) -> f64 {
    f64::from(f32::from_bits(x.to_bits() & !0x1fff))
}

#[test]
fn mma_tf32_matches_a_reference() {
    let c = compile("mma_tf32.tile", &[]);
    // Full f32 mantissas, so that dropping the low bits matters.
    let a = random(16 * 8, 21);
    let bt = random(8 * 8, 22);
    let c0 = random(16 * 8, 23);
    let mut args = [
        Arg::Buffer(Buffer::from_f32(&a)),
        Arg::Buffer(Buffer::from_f32(&bt)),
        Arg::Buffer(Buffer::from_f32(&c0)),
        Arg::Buffer(Buffer::from_f32(&[f32::NAN; 128])),
    ];
    launch(&c, "mma_tf32", &mut args).unwrap();
    let product = |i: usize, op: fn(f32) -> f64| -> f64 {
        let (r, n) = (i / 8, i % 8);
        f64::from(c0[i])
            + (0..8)
                .map(|k| op(a[r * 8 + k]) * op(bt[n * 8 + k]))
                .sum::<f64>()
    };
    let got = args[3].buffer().unwrap().to_f32();
    let want: Vec<f64> = (0..16 * 8).map(|i| product(i, tf32)).collect();
    assert_close(&got, &want, 1e-6);
    // The truncation is visible: full-precision products differ by more than f32 rounding.
    let full: Vec<f64> = (0..16 * 8).map(|i| product(i, f64::from)).collect();
    let worst = got
        .iter()
        .zip(&full)
        .map(|(&g, &w)| (f64::from(g) - w).abs())
        .fold(0.0, f64::max);
    assert!(worst > 1e-5, "tf32 truncation not visible: {worst}");
}

#[test]
fn wgmma_tile_matches_a_reference() {
    // A in registers (fragments) and in shared memory.
    for (n, kernel) in [8usize, 64, 256]
        .into_iter()
        .flat_map(|n| [(n, "wgmma_tile"), (n, "wgmma_tile_a_shared")])
    {
        let c = compile("wgmma_tile.tile", &[("N", &n.to_string())]);
        let a: Vec<f16> = random(64 * 64, 31).into_iter().map(f16::from_f32).collect();
        let b: Vec<f16> = random(n * 64, 32).into_iter().map(f16::from_f32).collect();
        let mut args = [
            Arg::Buffer(Buffer::from_f16(&a)),
            Arg::Buffer(Buffer::from_f16(&b)),
            Arg::Buffer(Buffer::from_f32(&vec![f32::NAN; 64 * n])),
        ];
        launch(&c, kernel, &mut args).unwrap();
        let want: Vec<f64> = (0..64 * n)
            .map(|i| {
                let (r, col) = (i / n, i % n);
                (0..64)
                    .map(|k| a[r * 64 + k].to_f64() * b[col * 64 + k].to_f64())
                    .sum()
            })
            .collect();
        assert_close(&args[2].buffer().unwrap().to_f32(), &want, 1e-6);
    }
}

#[test]
fn mma_tile_matches_a_reference() {
    let c = compile("mma_tile.tile", &[]);
    let a: Vec<f16> = random(16 * 16, 11).into_iter().map(f16::from_f32).collect();
    let bt: Vec<f16> = random(8 * 16, 12).into_iter().map(f16::from_f32).collect();
    let mut args = [
        Arg::Buffer(Buffer::from_f16(&a)),
        Arg::Buffer(Buffer::from_f16(&bt)),
        Arg::Buffer(Buffer::from_f32(&[0.0; 128])),
    ];
    launch(&c, "mma_tile", &mut args).unwrap();
    let want: Vec<f64> = (0..16 * 8)
        .map(|i| {
            let (r, n) = (i / 8, i % 8);
            (0..16)
                .map(|k| a[r * 16 + k].to_f64() * bt[n * 16 + k].to_f64())
                .sum()
        })
        .collect();
    assert_close(&args[2].buffer().unwrap().to_f32(), &want, 1e-6);
}
