//! Blocks handing values over through global memory: a flag set after a fence (`fence_gpu`),
//! waited for by one lane and passed on to its warp (`sync_warp`), as gemm_wg's stream-K blocks
//! hand partial sums over. The interpreter runs blocks in index order, so a block may wait only
//! for blocks of lower index; `sync_warp` needs the whole warp.

use zinc_dsl::Compilation;
use zinc_interp::{Arg, Buffer, ErrorKind, Interpreter};

fn compile(src: &str) -> Compilation {
    zinc_dsl::compile_source("handover.tile", src, &[], &|_| None)
        .unwrap_or_else(|f| panic!("{}", f.render()))
}

/// interp/tests/handover.tile: block b > 0 adds block b - 1's sums to its own, through flags.
const CHAIN: &str = include_str!("handover.tile");

#[test]
fn blocks_hand_sums_over_through_flags() {
    let c = compile(CHAIN);
    let x: Vec<u32> = (0..128).map(|i| i * 7 + 1).collect();
    let mut args = [
        Arg::ReadOnly(Buffer::from_u32(&x)),
        Arg::Buffer(Buffer::from_u32(&[0; 128])),
        Arg::Buffer(Buffer::from_u32(&[0; 4])),
    ];
    Interpreter::new(&c.module)
        .sources(&c.sources)
        .launch("chain", &mut args)
        .unwrap();
    let sums = args[1].buffer().unwrap().to_u32();
    for lane in 0..32 {
        let want: u32 = (0..4).map(|b| x[b * 32 + lane]).sum();
        assert_eq!(sums[96 + lane], want, "lane {lane}");
    }
    // Blocks 0 to 2's flags were taken and cleared; the last block's is left for no one.
    assert_eq!(args[2].buffer().unwrap().to_u32(), [0, 0, 0, 32]);
}

#[test]
fn sync_warp_needs_the_whole_warp() {
    let src = "
kernel half_warp(y: global mut [u32]) grid(1) block(32) {
    if thread.x < 16 {
        sync_warp();
    }
    y[thread.x] = thread.x;
}";
    let c = compile(src);
    let mut args = [Arg::Buffer(Buffer::from_u32(&[0; 32]))];
    let e = Interpreter::new(&c.module)
        .sources(&c.sources)
        .launch("half_warp", &mut args)
        .unwrap_err();
    assert!(
        matches!(
            e.kind(),
            ErrorKind::DivergentWarp {
                op: "sync_warp",
                ..
            }
        ),
        "{e}"
    );
}
