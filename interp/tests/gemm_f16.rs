//! kernels/gemm_f16.tile (cp.async pipeline, swizzled tiles, mma.sync from register arrays)
//! against an f64 reference, on shapes with ragged edges in T, N and K.

use std::path::Path;

use half::f16;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use zinc_interp::{Arg, Buffer, Interpreter, Value};

fn halves(n: usize, seed: u64) -> Vec<f16> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| f16::from_f32(rng.random_range(-1.0f32..1.0)))
        .collect()
}

/// Runs gemm_f16 with `defines` at T x N x K and compares with X · W^T in f64.
fn check(defines: &[(&str, &str)], t: usize, n: usize, k: usize) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels/gemm_f16.tile");
    let defines: Vec<(String, String)> = defines
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let c = zinc_dsl::compile_file(&path, &defines).unwrap_or_else(|f| panic!("{}", f.render()));
    let (x, w) = (halves(t * k, 1), halves(n * k, 2));
    let mut args = [
        Arg::Buffer(Buffer::from_f16(&x)),
        Arg::Buffer(Buffer::from_f16(&w)),
        Arg::Buffer(Buffer::from_f32(&vec![f32::NAN; t * n])),
        Arg::Scalar(Value::U32(t as u32)),
        Arg::Scalar(Value::U32(n as u32)),
        Arg::Scalar(Value::U32(k as u32)),
    ];
    Interpreter::new(&c.module)
        .sources(&c.sources)
        .launch("gemm_f16", &mut args)
        .unwrap_or_else(|e| panic!("{e}"));
    let y = args[2].buffer().unwrap().to_f32();
    let mut worst = 0.0f64;
    for i in 0..t {
        for j in 0..n {
            let want: f64 = (0..k)
                .map(|kk| x[i * k + kk].to_f64() * w[j * k + kk].to_f64())
                .sum();
            let got = f64::from(y[i * n + j]);
            let err = (got - want).abs() / want.abs().max(1.0);
            assert!(err < 2e-3, "Y[{i}][{j}] = {got}, want {want} ({t}x{n}x{k})");
            worst = worst.max(err);
        }
    }
    assert!(worst < 1e-5, "worst relative error {worst}");
}

#[test]
fn ragged_shape_with_a_short_k_tail() {
    // 70 rows (one partial block), 136 columns (a second block of 8), K = 3 slices of 32.
    check(&[], 70, 136, 96);
}

#[test]
fn whole_tiles_and_a_k_tail_of_one_chunk() {
    check(&[], 128, 128, 64);
    // K = 40: the second slice holds one valid chunk of 8, the rest zero-filled.
    check(&[], 16, 8, 40);
}

#[test]
fn smaller_variant_with_more_stages() {
    check(&[("BM", "64"), ("WM", "32"), ("STAGES", "4")], 65, 130, 160);
}
