//! Tensor-core fragments, ldmatrix, cp.async and the packed helpers: the PTX instructions, ptxas
//! acceptance for every user arch, and the SASS they become (HMMA, IMMA, LDSM, LDGSTS, IDP.4A)
//! with no register spills.

use super::ptxas::sass_of;
use super::ARCHS;
use zinc_codegen::{compile, Emit, Options};

const SOURCE: &str = "
fn store_acc(c: global mut [f32], acc: frag_acc<f32>) {
    let r = lane / 4;
    let cc = lane % 4 * 2;
    c[r * 8 + cc] = acc[0] + acc[1];
    c[(r + 8) * 8 + cc] = acc[2] + acc[3];
}

kernel tensor(a: global [f16], b: global [bf16], q: global [i8], c: global mut [f32],
              d: global mut [i32], w: global mut [u32], tf: global [f32], n: u32)
    grid(1) block(32) {
    shared sa: [16][16] f16;
    shared sb: [16][16] bf16;
    shared sq: [16][32] i8;
    shared sw: [32] u32;
    let row = lane / 2;
    let col = lane % 2 * 8;
    cp_async(sa + (row * 16 + col), a + (row * 16 + col), 16, row < n);
    cp_async(sb + (row * 16 + col), b + (row * 16 + col), 16, true);
    cp_async(sq + (row * 32 + col * 2), q + (row * 32 + col * 2), 16, true);
    cp_async(sw + lane, w + lane, 4, lane < n);
    cp_async_commit();
    cp_async_wait(0);
    barrier();
    let fa = ldmatrix_x4(sa + (lane % 16 * 16 + lane / 16 * 8), false);
    let fb = ldmatrix_x2(sa + (lane % 16 * 16), true);
    let one = ldmatrix_x1(sa + (lane % 8 * 16), false);
    let halves: frag_b<f16> = frag(one * fb[0], fma(one, fb[1], one));
    store_acc(c, mma(fa, halves, mma(fa, fb, 0)));
    let ga = ldmatrix_x4(sb + (lane % 16 * 16 + lane / 16 * 8), false);
    let gb = ldmatrix_x2(sb + (lane % 8 * 16 + lane / 8 % 2 * 8), false);
    store_acc(c + 128, mma(ga, gb, 1.0));
    let ia = ldmatrix_x4(sq + (lane % 16 * 32 + lane / 16 * 16), false);
    let ib = ldmatrix_x2(sq + (lane % 8 * 32 + lane / 8 % 2 * 16), false);
    let acc = mma(ia, ib, 0);
    let x = sw[lane];
    let y = prmt(x, x >> 3u32, 0x3210u32 + lane);
    d[lane] = dp4a_us(y, x, dp4a(x, y, acc[0] + acc[3]));
    w[lane] = lop3(x, y, n, 0x96) ^ bitcast<u32>(bitcast<f16x2>(y) * bitcast<f16x2>(x));
    let ta: frag_a<f32> = frag(tf[lane], tf[lane + 32], tf[lane + 64], tf[lane + 96]);
    let tb: frag_b<f32> = frag(tf[lane + 128], tf[lane + 160]);
    store_acc(c + 256, mma(ta, tb, 0.5));
}";

fn ptx(arch: &str) -> String {
    let c = zinc_dsl::compile_source("tensor.tile", SOURCE, &[], &|_| None)
        .unwrap_or_else(|f| panic!("{}", f.render()));
    let opts = Options::new(arch, None).unwrap();
    compile(&c.module, &opts, Emit::Ptx)
        .unwrap_or_else(|e| panic!("{arch}: {e}"))
        .text
}

#[test]
fn tensor_core_builtins_become_their_ptx_instructions() {
    for arch in ARCHS {
        let text = ptx(arch);
        for instruction in [
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
            "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32",
            "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
            "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
            "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16",
            "ldmatrix.sync.aligned.m8n8.x1.shared.b16",
            "cp.async.cg.shared.global",
            "cp.async.ca.shared.global",
            "cp.async.commit_group",
            "cp.async.wait_group",
            "prmt.b32",
            "lop3.b32",
            "dp4a.s32.s32",
            "dp4a.u32.s32",
            "mul.rn.f16x2",
            "fma.rn.f16x2",
        ] {
            assert!(
                text.contains(instruction),
                "{arch}: no `{instruction}`:\n{text}"
            );
        }
    }
}

/// Assembles with `ptxas -v` into a cubin; (SASS, ptxas report).
fn assemble(arch: &str) -> (String, String) {
    sass_of(&ptx(arch), arch, "tensor")
}

#[test]
fn sass_holds_tensor_core_and_async_copy_instructions_without_spills() {
    for arch in ARCHS {
        let (sass, report) = assemble(arch);
        for op in [
            "HMMA.16816.F32",
            "HMMA.16816.F32.BF16",
            "IMMA.16832",
            "HMMA.1688.F32.TF32",
            "LDSM",
            "LDGSTS",
            "IDP.4A.S8.S8",
            "IDP.4A.U8.S8",
        ] {
            assert!(sass.contains(op), "{arch}: no {op} in the SASS:\n{sass}");
        }
        assert!(
            report.contains("0 bytes spill stores, 0 bytes spill loads"),
            "{arch}: spills:\n{report}"
        );
    }
}

/// An accumulator array indexed from `unroll` loops lives in registers: no local memory.
#[test]
fn unrolled_register_arrays_stay_out_of_local_memory() {
    let c = zinc_dsl::compile_source(
        "mma_array.tile",
        include_str!("../../../examples/mma_array.tile"),
        &[],
        &|_| None,
    )
    .unwrap_or_else(|f| panic!("{}", f.render()));
    for arch in ARCHS {
        let opts = Options::new(arch, None).unwrap();
        let text = compile(&c.module, &opts, Emit::Ptx).unwrap().text;
        assert!(!text.contains(".local"), "{arch}: local memory:\n{text}");
        let mmas = text.matches("mma.sync.aligned.m16n8k16").count();
        assert_eq!(mmas, 4, "{arch}: one mma per tile:\n{text}");
    }
}
