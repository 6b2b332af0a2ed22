//! `pipeline` (a checker desugaring into cp.async, commits, waits and barriers) runs on the
//! interpreter with 1, 2 and 3 stages and matches a plain Rust reference, ragged tails included.

use std::path::Path;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use zinc_interp::{Arg, Buffer, Interpreter, Value};

/// Runs examples/pipeline_sum.tile and compares it with the same sums in the same order.
fn check(stages: u32, bk: u32, n: usize) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/pipeline_sum.tile");
    let defines = vec![
        ("STAGES".to_string(), stages.to_string()),
        ("BK".to_string(), bk.to_string()),
    ];
    let c = zinc_dsl::compile_file(&path, &defines).unwrap_or_else(|f| panic!("{}", f.render()));
    let mut rng = StdRng::seed_from_u64(n as u64 * 31 + u64::from(stages));
    let x: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    let bk = bk as usize;
    let mut args = vec![
        Arg::ReadOnly(Buffer::from_f32(&x)),
        Arg::Buffer(Buffer::from_f32(&vec![f32::NAN; bk])),
        Arg::Scalar(Value::U32(n as u32)),
    ];
    Interpreter::new(&c.module)
        .sources(&c.sources)
        .launch("pipeline_sum", &mut args)
        .unwrap_or_else(|e| panic!("STAGES={stages} BK={bk} n={n}: {e}"));
    let got = args[1].buffer().unwrap().to_f32();
    let want: Vec<f32> = (0..bk)
        .map(|t| {
            let mut acc = 0.0f32;
            for k in (0..n).step_by(bk) {
                let i = k + (t + 1) % bk;
                acc += if i < n { x[i] } else { 0.0 };
            }
            acc
        })
        .collect();
    assert_eq!(got, want, "STAGES={stages} BK={bk} n={n}");
}

#[test]
fn one_two_and_three_stages() {
    for stages in [1, 2, 3] {
        for n in [0, 1, 7, 8, 9, 40, 67] {
            check(stages, 8, n);
        }
    }
}

#[test]
fn more_stages_than_tiles() {
    for stages in [4, 8] {
        for n in [5, 16, 100] {
            check(stages, 16, n);
        }
    }
}

#[test]
fn default_parameters() {
    check(3, 64, 1000);
}
