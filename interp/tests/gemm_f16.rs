//! kernels/gemm_f16.tile (`pipeline` or a hand-written cp.async ring, `swizzle` tiles, mma.sync
//! from register arrays)
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

#[test]
fn double_buffered_fragments() {
    // FB = 2 loads the next step's fragments (and, after the barrier, the next slice's first)
    // before the mmas; K = 1, 3 and 5 slices, so the ring wraps and the last slice reads ahead.
    check(&[("FB", "2")], 70, 136, 96);
    check(&[("FB", "2")], 16, 8, 24);
    check(&[("FB", "2"), ("STAGES", "4")], 33, 40, 160);
    check(&[("BM", "64"), ("WM", "32"), ("FB", "2")], 65, 130, 104);
}

#[test]
fn k_slices_of_64() {
    // Two k16 steps per swizzle line of 8 chunks; ragged K (the last slice half empty).
    check(&[("BK", "64")], 70, 136, 160);
    check(&[("BK", "64"), ("FB", "2")], 17, 24, 200);
}

#[test]
fn warps_of_64_by_64() {
    check(&[("WN", "64"), ("FB", "2")], 130, 72, 72);
    check(&[("BN", "256"), ("WN", "64"), ("FB", "2")], 40, 264, 96);
    check(
        &[("BN", "256"), ("WN", "64"), ("BK", "64"), ("FB", "2")],
        24,
        300,
        136,
    );
    check(
        &[("BM", "256"), ("WM", "64"), ("WN", "64"), ("FB", "2")],
        260,
        40,
        40,
    );
}

#[test]
fn grid_rasterization() {
    // 5 block-rows x 3 block-columns of 64 x 128: groups of 2 rows leave a last group of 1;
    // groups of 8 cover all rows at once; GROUP = 1 is the plain row-major grid.
    for group in ["1", "2", "8"] {
        check(
            &[("BM", "64"), ("WM", "32"), ("GROUP", group)],
            300,
            260,
            32,
        );
    }
}

#[test]
fn registered_large_tile_variants() {
    check(
        &[("BN", "256"), ("WN", "64"), ("STAGES", "4"), ("FB", "2")],
        20,
        264,
        168,
    );
    let v = [
        ("BM", "256"),
        ("WM", "64"),
        ("WN", "64"),
        ("BK", "64"),
        ("STAGES", "2"),
        ("FB", "2"),
    ];
    check(&v, 260, 24, 200);
    // sm_90 only (144 KiB of shared memory): BK = 64 with 3 stages on the large tiles.
    check(
        &[
            ("BN", "256"),
            ("WN", "64"),
            ("BK", "64"),
            ("STAGES", "3"),
            ("FB", "2"),
        ],
        24,
        260,
        200,
    );
}

#[test]
fn pipeline_with_one_and_two_stages() {
    // FB = 1 is a `pipeline`: one stage is the synchronous form, two the shortest ring.
    check(&[("STAGES", "1")], 70, 136, 96);
    check(&[("STAGES", "2"), ("BK", "64")], 33, 40, 200);
}
