//! Tensor maps, mbarriers and TMA copies: the kernel's by-value map parameters, the PTX
//! instructions, the manifest entry, ptxas acceptance and the SASS (UTMALDG), maps passed to
//! device functions, L2 prefetches, TMA stores and their bulk groups, the error for archs other
//! than sm_90a, plain arrivals and register budgets.

use super::ptxas::sass_of;
use zinc_codegen::{compile, Emit, Options};

const SOURCE: &str = "
kernel copy_box(x: global [f16], y: global mut [f16], T: u32, K: u32)
    grid(cdiv(T, 64)) block(128) {
    shared tile: [64][64] f16 swizzle;
    shared bars: [1] u64;
    let xm = tensor_map(x, T, K / 2 * 2, 64, 64);
    if thread.x == 0 {
        mbarrier_init(bars[0], 1);
    }
    barrier();
    if thread.x == 0 {
        mbarrier_expect_tx(bars[0], 64 * 64 * 2);
        tma_load(tile + 0, xm, block.x * 64, 0, bars[0]);
    }
    mbarrier_wait(bars[0], 0);
    for i in 0u32..32 {
        let e = thread.x * 32 + i;
        y[e] = tile[e / 64][e % 64];
    }
}";

/// `SOURCE` with the expect and the load in device functions that take the map: the kernel
/// passes `xm` to `start_box`, which passes it on to `load_box`.
fn source_with_map_params() -> String {
    let fns = "
fn start_box(dst: shared mut [f16], m: tensor_map<f16>, row: u32, bar: shared mut [u64]) {
    mbarrier_expect_tx(bar, 64 * 64 * 2);
    load_box(dst, m, row, bar);
}
fn load_box(dst: shared mut [f16], m: tensor_map<f16>, row: u32, bar: shared mut [u64]) {
    tma_load(dst, m, row, 0, bar);
}";
    let direct = "mbarrier_expect_tx(bars[0], 64 * 64 * 2);
        tma_load(tile + 0, xm, block.x * 64, 0, bars[0]);";
    assert!(SOURCE.contains(direct));
    let called = SOURCE.replace(direct, "start_box(tile + 0, xm, block.x * 64, bars + 0);");
    format!("{fns}\n{called}")
}

fn build_source(source: &str, arch: &str, opt_level: u8) -> Result<(String, String), String> {
    let c = zinc_dsl::compile_source("tma.tile", source, &[], &|_| None)
        .unwrap_or_else(|f| panic!("{}", f.render()));
    let mut opts = Options::new(arch, None).unwrap();
    opts.opt_level = opt_level;
    let out = compile(&c.module, &opts, Emit::Ptx).map_err(|e| e.to_string())?;
    Ok((out.text, out.kernels[0].to_json()))
}

fn build(arch: &str) -> Result<(String, String), String> {
    build_source(SOURCE, arch, 3)
}

/// Assembles `ptx` for sm_90a; the SASS.
fn assemble(ptx: &str, name: &str) -> String {
    sass_of(ptx, "sm_90a", &format!("tma-{name}")).0
}

#[test]
fn tma_kernels_pass_maps_by_value_and_emit_the_async_copies() {
    let (ptx, manifest) = build("sm_90a").unwrap();
    // The host sizes the map from the arguments: the rows, and K / 2 * 2 columns, from the
    // buffer's start; 128-byte box rows are 128-byte swizzled.
    assert!(
        manifest.contains(r#""tensor_maps": [{"param": "x", "elem": "f16", "offset": "0", "rows": "T", "cols": "((K / 2) * 2)", "box": [64, 64], "swizzle": 128}]"#),
        "{manifest}"
    );
    for needle in [
        ".param .align 64 .b8 copy_box_param_4[128]",
        "cvta.param.u64",
        "mbarrier.init.shared::cta.b64",
        "fence.mbarrier_init.release.cluster",
        "mbarrier.arrive.expect_tx.shared::cta.b64",
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
        "mbarrier.try_wait.parity.shared::cta.b64",
        // The swizzled tile is aligned for the 128-byte swizzle.
        ".align 1024",
    ] {
        assert!(ptx.contains(needle), "missing `{needle}` in:\n{ptx}");
    }

    let sass = assemble(&ptx, "direct");
    assert!(sass.contains("UTMALDG"), "no TMA load in the SASS:\n{sass}");
}

/// A map passed through two device functions reaches TMA as the kernel's own parameter: once
/// inlined, the PTX is the one of the kernel that loads directly; at -O0 too it assembles.
#[test]
fn tma_loads_in_functions_use_the_kernels_map_parameter() {
    let source = source_with_map_params();
    let (ptx, manifest) = build_source(&source, "sm_90a", 3).unwrap();
    let (direct, direct_manifest) = build("sm_90a").unwrap();
    assert_eq!(manifest, direct_manifest);
    assert_eq!(ptx, direct, "the PTX differs from the direct load's");
    let sass = assemble(&ptx, "fn");
    assert!(sass.contains("UTMALDG"), "no TMA load in the SASS:\n{sass}");

    let (unoptimized, _) = build_source(&source, "sm_90a", 0).unwrap();
    for needle in [
        "cvta.param.u64",
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
    ] {
        assert!(
            unoptimized.contains(needle),
            "missing `{needle}` at -O0:\n{unoptimized}"
        );
    }
    let sass = assemble(&unoptimized, "fn-O0");
    assert!(
        sass.contains("UTMALDG"),
        "no TMA load in the -O0 SASS:\n{sass}"
    );
    for arch in ["sm_89", "sm_90", "sm_120"] {
        let err = build_source(&source, arch, 3).unwrap_err();
        assert!(err.contains("sm_90a-only"), "{arch}: {err}");
    }
}

/// `SOURCE` with the box after the loaded one prefetched into the L2 beside the load: the
/// prefetch instruction in the PTX, a TMA prefetch (UTMAPF) in the SASS, sm_90a only.
#[test]
fn tma_prefetches_reach_the_l2_prefetch_instruction() {
    let load = "tma_load(tile + 0, xm, block.x * 64, 0, bars[0]);";
    assert!(SOURCE.contains(load));
    let source = SOURCE.replace(
        load,
        &format!("{load}\n        tma_prefetch(xm, block.x * 64 + 64, 0);"),
    );
    let (ptx, _) = build_source(&source, "sm_90a", 3).unwrap();
    let needle = "cp.async.bulk.prefetch.tensor.2d.L2.global.tile";
    assert!(ptx.contains(needle), "missing `{needle}` in:\n{ptx}");
    let sass = assemble(&ptx, "prefetch");
    assert!(
        sass.contains("UTMAPF"),
        "no TMA prefetch in the SASS:\n{sass}"
    );
    let err = build_source(&source, "sm_90", 3).unwrap_err();
    assert!(err.contains("sm_90a-only"), "{err}");
}

#[test]
fn tma_kernels_build_for_sm_90a_only() {
    for arch in ["sm_89", "sm_90", "sm_120"] {
        let err = build(arch).unwrap_err();
        assert!(err.contains("sm_90a-only"), "{arch}: {err}");
    }
}

/// A map loaded from in branches of one thread, in an unrolled prologue and in a loop: its
/// address is taken once, in the entry block (before the first label). Left to LLVM, the
/// `cvta.param` sinks into the branches; in gemm_wg the copies then met in a phi that ptxas
/// could not prove uniform, and it moved the address lane by lane (R2UR) at every copy.
#[test]
fn tma_map_addresses_are_taken_once_in_the_entry_block() {
    let source = "
kernel copy_two(x: global [f16], y: global mut [f16], T: u32, K: u32, n: u32)
    grid(1) block(128) {
    shared tile: [2][64][64] f16 swizzle;
    shared bars: [2] u64;
    let xm = tensor_map(x, T, K, 64, 64);
    if thread.x == 0 {
        mbarrier_init(bars[0], 1);
        mbarrier_init(bars[1], 1);
    }
    barrier();
    for a in 0u32..2 unroll {
        if a < n {
            if thread.x == 0 {
                mbarrier_expect_tx(bars[a], 64 * 64 * 2);
                tma_load(tile + a * 64 * 64, xm, 0, 64 * a, bars[a]);
            }
        }
        cp_async_commit();
    }
    var total = 0.0f16;
    for i in 0..n {
        mbarrier_wait(bars[i % 2], i / 2 % 2);
        total = total + tile[i % 2][thread.x / 2][thread.x % 2];
        barrier();
        if thread.x == 0 && i + 2 < n {
            mbarrier_expect_tx(bars[i % 2], 64 * 64 * 2);
            tma_load(tile + i % 2 * 64 * 64, xm, 0, 64 * (i + 2), bars[i % 2]);
        }
    }
    y[thread.x] = total;
}";
    let (ptx, _) = build_source(source, "sm_90a", 3).unwrap();
    assert_eq!(ptx.matches("cvta.param.u64").count(), 1, "{ptx}");
    let first_label = ptx.find("$L__BB").expect("the kernel has branches");
    let cvta = ptx.find("cvta.param.u64").unwrap();
    assert!(
        cvta < first_label,
        "the map's address is taken in a branch:\n{ptx}"
    );
    assert_eq!(ptx.matches("cp.async.bulk.tensor.2d").count(), 3, "{ptx}");
    let sass = assemble(&ptx, "once");
    assert!(sass.contains("UTMALDG"), "no TMA load in the SASS:\n{sass}");
}

/// `mbarrier_arrive` is a plain arrival, without a transaction count, and ptxas takes it.
#[test]
fn arrivals_emit_mbarrier_arrive() {
    let source = "
kernel release(y: global mut [u32]) grid(1) block(128) {
    shared bars: [1] u64;
    if thread.x == 0 {
        mbarrier_init(bars[0], 128);
    }
    barrier();
    mbarrier_arrive(bars[0]);
    mbarrier_wait(bars[0], 0);
    y[thread.x] = thread.x;
}";
    let (ptx, _) = build_source(source, "sm_90a", 3).unwrap();
    assert!(
        ptx.contains("mbarrier.arrive.shared::cta.b64 _, ["),
        "{ptx}"
    );
    let sass = assemble(&ptx, "arrive");
    assert!(
        sass.contains("SYNCS.ARRIVE"),
        "no arrival in the SASS:\n{sass}"
    );
}

/// A producer warpgroup handing registers to the consumers: `setmaxnreg` with the counts as
/// immediates, which ptxas takes.
#[test]
fn register_budgets_move_between_warpgroups() {
    let source = "
kernel split(y: global mut [u32]) grid(1) block(384) {
    if shfl_idx(thread.x / 128, 0) == 2 {
        setmaxnreg_dec(40);
    } else {
        setmaxnreg_inc(232);
    }
    y[thread.x] = thread.x;
}";
    let (ptx, _) = build_source(source, "sm_90a", 3).unwrap();
    let ptx_words = ptx.split_whitespace().collect::<Vec<_>>().join(" ");
    for needle in [
        "setmaxnreg.dec.sync.aligned.u32 40;",
        "setmaxnreg.inc.sync.aligned.u32 232;",
        // Else ptxas does not know the registers at entry and drops both (C7508).
        ".minnctapersm 1",
    ] {
        assert!(ptx_words.contains(needle), "missing `{needle}` in:\n{ptx}");
    }
    let sass = assemble(&ptx, "setmaxnreg");
    assert!(
        sass.contains("USETMAXREG"),
        "no register budget change in the SASS:\n{sass}"
    );
}

/// A block stages its f32 tile in a `swizzle`d array and one thread stores it through the map of
/// the `global mut` output, in a device function taking the map, then commits and waits for the
/// bulk group twice (the constant count goes into the instruction), and once more for its writes
/// to complete, before the fence that orders them for a flag.
const STORE_SOURCE: &str = "
fn store_tile(m: tensor_map<f32>, row: u32, col: u32, src: shared [f32]) {
    tma_store(m, row, col, src);
}
kernel store_box(x: global [f32], y: global mut [f32], T: u32, N: u32)
    grid(cdiv(N, 32), cdiv(T, 16)) block(128) {
    shared stage: [16][32] f32 swizzle;
    let ym = tensor_map(y, T, N, 16, 32);
    for i in thread.x..512u32 step 128 {
        stage[i / 32][i % 32] = x[i] * 2.0;
    }
    fence_proxy_async();
    barrier();
    if thread.x == 0 {
        tma_store(ym, block.y * 16, block.x * 32, stage[0][0]);
        store_tile(ym, block.y * 16 + 16, block.x * 32, stage + 0);
        tma_store_commit();
        tma_store_wait(1);
        tma_store_wait(0);
        tma_store_done(0);
        fence_proxy_async_global();
    }
}";

#[test]
fn tma_stores_emit_bulk_tensor_stores_and_their_groups() {
    let (ptx, manifest) = build_source(STORE_SOURCE, "sm_90a", 3).unwrap();
    // The output's map: a `global mut` view, 128-byte box rows in the 128-byte swizzle.
    assert!(
        manifest.contains(r#""tensor_maps": [{"param": "y", "elem": "f32", "offset": "0", "rows": "T", "cols": "N", "box": [16, 32], "swizzle": 128}]"#),
        "{manifest}"
    );
    let needle = "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [";
    assert_eq!(ptx.matches(needle).count(), 2, "{ptx}");
    for needle in [
        "cp.async.bulk.commit_group;",
        "cp.async.bulk.wait_group.read 1;",
        "cp.async.bulk.wait_group.read 0;",
        "cp.async.bulk.wait_group 0;",
        "fence.proxy.async.global;",
    ] {
        assert!(ptx.contains(needle), "missing `{needle}` in:\n{ptx}");
    }
    let sass = assemble(&ptx, "store");
    assert!(
        sass.contains("UTMASTG"),
        "no TMA store in the SASS:\n{sass}"
    );
    let (unoptimized, _) = build_source(STORE_SOURCE, "sm_90a", 0).unwrap();
    assert!(unoptimized.contains(needle), "{unoptimized}");
    assemble(&unoptimized, "store-O0");
    for arch in ["sm_89", "sm_90", "sm_120"] {
        let err = build_source(STORE_SOURCE, arch, 3).unwrap_err();
        assert!(err.contains("sm_90a-only"), "{arch}: {err}");
    }
}

/// `tma_store_add` is the bulk tensor reduction with `.add` (the element type is the map's).
#[test]
fn tma_store_adds_emit_bulk_tensor_reductions() {
    let source = STORE_SOURCE.replace("tma_store(", "tma_store_add(");
    let (ptx, _) = build_source(&source, "sm_90a", 3).unwrap();
    let needle = "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [";
    assert_eq!(ptx.matches(needle).count(), 2, "{ptx}");
    assert!(!ptx.contains("cp.async.bulk.tensor.2d.global"), "{ptx}");
    let sass = assemble(&ptx, "store-add");
    assert!(
        sass.contains("UTMAREDG"),
        "no TMA reduction in the SASS:\n{sass}"
    );
}
