//! The math built-ins' edge cases that the kernels' references do not reach.

use zinc_interp::{Arg, Buffer, Interpreter};

/// Runs `kernel` of `src` (one block of 32 threads) on `x` and `outputs` f32 buffers of 32
/// NaNs, and returns them.
fn run_on(src: &str, kernel: &str, x: &[f32], outputs: usize) -> Vec<Vec<f32>> {
    let c = zinc_dsl::compile_source("math.tile", src, &[], &|_| None)
        .unwrap_or_else(|f| panic!("{}", f.render()));
    let mut args = vec![Arg::ReadOnly(Buffer::from_f32(x))];
    args.extend((0..outputs).map(|_| Arg::Buffer(Buffer::from_f32(&[f32::NAN; 32]))));
    Interpreter::new(&c.module)
        .sources(&c.sources)
        .launch(kernel, &mut args)
        .unwrap();
    args[1..]
        .iter()
        .map(|a| a.buffer().unwrap().to_f32())
        .collect()
}

/// `rcp` is `rcp.approx.ftz.f32`: 1 / x, with subnormal inputs and results flushed to zeros of
/// their sign (so a subnormal's reciprocal is infinite, and that of |x| >= 2^126 is zero).
#[test]
fn rcp_flushes_subnormal_inputs_and_results() {
    let src = "
kernel reciprocals(x: global [f32], y: global mut [f32]) grid(1) block(32) {
    y[thread.x] = rcp(x[thread.x]);
}";
    let subnormal = f32::MIN_POSITIVE / 4.0;
    let cases = [
        (4.0, 0.25),
        (-3.0, -1.0 / 3.0),
        (0.0, f32::INFINITY),
        (-0.0, f32::NEG_INFINITY),
        (subnormal, f32::INFINITY),
        (-subnormal, f32::NEG_INFINITY),
        (f32::MIN_POSITIVE, 1.0 / f32::MIN_POSITIVE),
        // 1 / 2^127 is a subnormal result.
        (2f32.powi(127), 0.0),
        (-(2f32.powi(127)), -0.0),
        (2f32.powi(125), 2f32.powi(-125)),
    ];
    let mut x = vec![1.0f32; 32];
    for (i, &(v, _)) in cases.iter().enumerate() {
        x[i] = v;
    }
    let y = &run_on(src, "reciprocals", &x, 1)[0];
    for (i, &(v, want)) in cases.iter().enumerate() {
        assert_eq!(
            y[i].to_bits(),
            want.to_bits(),
            "rcp({v:e}) = {:e}, not {want:e}",
            y[i]
        );
    }
    assert!(y[cases.len()..].iter().all(|&r| r == 1.0));
}

/// `exp` and `exp2` are `ex2.approx.ftz.f32`: results below 2^-126 flush to zero.
#[test]
fn exp_flushes_subnormal_results() {
    let src = "
kernel exps(x: global [f32], y: global mut [f32], z: global mut [f32]) grid(1) block(32) {
    y[thread.x] = exp(x[thread.x]);
    z[thread.x] = exp2(x[thread.x]);
}";
    // (x, exp(x) nonzero, exp2(x) nonzero): e^-87 and 2^-126 are normal, e^-88 and 2^-127 not.
    let cases = [
        (0.0, true, true),
        (-87.0, true, true),
        (-88.0, false, true),
        (-126.0, false, true),
        (-127.0, false, false),
        (f32::NEG_INFINITY, false, false),
    ];
    let mut x = vec![1.0f32; 32];
    for (i, &(v, ..)) in cases.iter().enumerate() {
        x[i] = v;
    }
    let out = run_on(src, "exps", &x, 2);
    let (y, z) = (&out[0], &out[1]);
    for (i, &(v, exp_nonzero, exp2_nonzero)) in cases.iter().enumerate() {
        assert_eq!(y[i] != 0.0, exp_nonzero, "exp({v:e}) = {:e}", y[i]);
        assert_eq!(z[i] != 0.0, exp2_nonzero, "exp2({v:e}) = {:e}", z[i]);
        assert!(y[i].is_normal() || y[i] == 0.0, "exp({v:e}) = {:e}", y[i]);
        assert!(z[i].is_normal() || z[i] == 0.0, "exp2({v:e}) = {:e}", z[i]);
    }
    assert_eq!(y[0], 1.0);
    assert_eq!(z[cases.len() - 3], 2f32.powi(-126));
}
