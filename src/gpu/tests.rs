//! The GPU backend's own kernels are checked against their f64 references by `zinc selftest`
//! and, in the CPU interpreter, by `cmd_selftest`'s tests (src/specs.rs declares them). What is
//! left to check here is that those references compute what the CPU ops the backend replaces
//! compute, with the scalars the specs pass standing for the backend's arguments.

use zinc_models::backend::{RopeStyle, RopeTable};
use zinc_models::cpu;

use crate::harness::random_inputs;
use crate::specs::{attention_params, spec_for, Shape, ROPE_BASE, ROPE_START};

/// The largest difference between an f32 CPU op and an f64 reference, relative to the largest
/// reference magnitude.
fn max_rel(got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(0.0f64, |m, w| m.max(w.abs()));
    let worst = got
        .iter()
        .zip(want)
        .fold(0.0f64, |m, (&g, w)| m.max((f64::from(g) - w).abs()));
    worst / scale
}

#[test]
fn attention_reference_is_the_cpu_op() {
    let spec = spec_for("attention_f32").unwrap();
    for dims in spec.interp_shapes() {
        let shape = Shape(dims.to_vec());
        let inputs = random_inputs(spec, &shape);
        let (p, start) = attention_params(&shape);
        let got = cpu::attention(&inputs[0], &inputs[1], &inputs[2], start, &p);
        let want = spec.reference(&shape, &inputs);
        assert!(max_rel(&got, &want) < 1e-5, "{shape}");
    }
}

#[test]
fn rope_reference_is_the_cpu_op() {
    let spec = spec_for("rope_f32").unwrap();
    for dims in spec.interp_shapes() {
        let shape = Shape(dims.to_vec());
        let (n_tokens, head_dim, n_rot, neox) = (dims[1], dims[2], dims[3], dims[4]);
        let inputs = random_inputs(spec, &shape);
        let style = [RopeStyle::Normal, RopeStyle::Neox][neox];
        let table = RopeTable::new(style, n_rot, ROPE_BASE, 1.0, None);
        let positions: Vec<usize> = (ROPE_START..ROPE_START + n_tokens).collect();
        let mut got = inputs[0].clone();
        cpu::rope(&mut got, head_dim, &positions, &table);
        assert!(
            max_rel(&got, &spec.reference(&shape, &inputs)) < 1e-6,
            "{shape}"
        );
    }
}
