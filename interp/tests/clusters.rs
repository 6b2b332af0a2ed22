//! Thread-block clusters: the blocks of a cluster run together, so that one block waits for
//! what another does (a multicast copy into its shared memory, an arrival on its mbarrier).
//! These tests check a tile gathered from two blocks' multicast halves, a producer/consumer
//! ring whose slots both blocks fill and release over several laps, the forms of the four
//! cluster builtins without a cluster, and the errors: a mask or rank past the cluster, a grid
//! that is no whole number of clusters, waits no block completes, a peer's mbarrier used
//! before it is initialized, and a block reached after it exited.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use zinc_dsl::Compilation;
use zinc_interp::{Arg, Buffer, ErrorKind, InterpError, Interpreter, Value};

fn compile(name: &str, text: &str) -> Compilation {
    zinc_dsl::compile_source(name, text, &[], &|_| None)
        .unwrap_or_else(|f| panic!("{}", f.render()))
}

/// `len` random non-zero f32.
fn random(len: usize, seed: u64) -> Vec<f32> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..len)
        .map(|_| rng.random_range(0.5f32..2.0) * if rng.random() { 1.0 } else { -1.0 })
        .collect()
}

/// Launches `kernel` with `args`; the buffers after the launch, and its result.
fn launch(
    c: &Compilation,
    kernel: &str,
    mut args: Vec<Arg>,
) -> (Vec<Arg>, Result<(), InterpError>) {
    let result = Interpreter::new(&c.module)
        .sources(&c.sources)
        .launch(kernel, &mut args);
    (args, result)
}

/// Each block of a cluster of two loads half (8 rows) of its cluster's 16 x 16 tile and
/// multicasts it into both blocks; each block waits for the whole tile on its own mbarrier and
/// writes what it sees to its 256 elements of `out`. Cluster `c` takes rows 16 c.. of `x`.
const HALVES: &str = "
kernel halves(x: global [f32], out: global mut [f32], clusters: u32)
    grid(2 * clusters) block(64) cluster(2)
{
    let xm = tensor_map(x, clusters * 16, 16, 8, 16);
    shared tile: [16][16] f32 swizzle;
    shared full: [1] u64;
    let rank = cluster_rank();
    if thread.x == 0 { mbarrier_init(full[0], 1); }
    cluster_sync();
    if thread.x == 0 {
        mbarrier_expect_tx(full[0], 1024);
        tma_load_multicast(tile[rank * 8][0], xm, block.x / 2 * 16 + rank * 8, 0, full[0], MASK);
    }
    mbarrier_wait(full[0], 0);
    for i in thread.x..256u32 step 64 {
        out[block.x * 256 + i] = tile[i / 16][i % 16];
    }
    cluster_sync();
}";

fn halves(mask: &str, clusters: usize) -> (Vec<f32>, Result<Vec<f32>, InterpError>) {
    let c = compile("halves.tile", &HALVES.replace("MASK", mask));
    let x = random(clusters * 256, clusters as u64);
    let args = vec![
        Arg::ReadOnly(Buffer::from_f32(&x)),
        Arg::Buffer(Buffer::from_f32(&vec![0.0; clusters * 512])),
        Arg::Scalar(Value::U32(clusters as u32)),
    ];
    let (args, result) = launch(&c, "halves", args);
    (x, result.map(|()| args[1].buffer().unwrap().to_f32()))
}

#[test]
fn both_blocks_see_the_tile_their_multicast_halves_make() {
    for clusters in [1, 3] {
        let (x, out) = halves("3", clusters);
        let out = out.unwrap_or_else(|e| panic!("{clusters} clusters: {e}"));
        for block in 0..clusters * 2 {
            let cluster = &x[block / 2 * 256..][..256];
            assert_eq!(&out[block * 256..][..256], cluster, "block {block}");
        }
    }
}

/// Both producers (thread 128, in a warp of its own) fill half of each slice (16 rows of 16
/// f32) into ring slot `a % STAGES` of both blocks; consumer thread `t` of the block of rank `r`
/// adds the product of elements `i = 128 r + t` and `255 - i` of every slice, one from each
/// half, then releases the slot in its block and in its peer's, whose producer waits for all
/// 256 consumers before refilling it.
const RING: &str = "
kernel ring(x: global [f32], out: global mut [f32], n: u32) grid(2) block(160) cluster(2) {
    let xm = tensor_map(x, n * 16, 16, 8, 16);
    shared ring: [STAGES][16][16] f32 swizzle;
    shared full: [STAGES] u64;
    shared empty: [STAGES] u64;
    let rank = cluster_rank();
    if thread.x == 0 {
        for i in 0u32..STAGES {
            mbarrier_init(full[i], 1);
            mbarrier_init(empty[i], 256);
        }
    }
    cluster_sync();
    if warp == 4 {
        if thread.x == 128 {
            for a in 0u32..n {
                let slot = a % STAGES;
                if a >= STAGES { mbarrier_wait(empty[slot], (a / STAGES + 1) % 2); }
                mbarrier_expect_tx(full[slot], 1024);
                tma_load_multicast(ring[slot][rank * 8][0], xm, a * 16 + rank * 8, 0, full[slot], 3);
            }
        }
    } else {
        var acc = 0.0;
        let i = rank * 128 + thread.x;
        for s in 0u32..n {
            let slot = s % STAGES;
            mbarrier_wait(full[slot], s / STAGES % 2);
            acc += ring[slot][i / 16][i % 16] * ring[slot][15 - i / 16][15 - i % 16];
            mbarrier_arrive(empty[slot]);
            mbarrier_arrive_cluster(empty[slot], PEER);
        }
        out[i] = acc;
    }
    cluster_sync();
}";

fn ring(stages: u32, n: usize, peer: &str) -> (Vec<f32>, Result<Vec<f32>, InterpError>) {
    let text = RING
        .replace("STAGES", &stages.to_string())
        .replace("PEER", peer);
    let c = compile("ring.tile", &text);
    let x = random(n * 256, n as u64);
    let args = vec![
        Arg::ReadOnly(Buffer::from_f32(&x)),
        Arg::Buffer(Buffer::from_f32(&[0.0; 256])),
        Arg::Scalar(Value::U32(n as u32)),
    ];
    let (args, result) = launch(&c, "ring", args);
    (x, result.map(|()| args[1].buffer().unwrap().to_f32()))
}

#[test]
fn producers_of_two_blocks_fill_a_ring_both_blocks_release() {
    for (stages, n) in [(2, 7), (3, 10), (2, 1)] {
        let (x, out) = ring(stages, n, "1 - rank");
        let out = out.unwrap_or_else(|e| panic!("{stages} stages, {n} slices: {e}"));
        for (i, got) in out.iter().enumerate() {
            let mut want = 0.0f32;
            for s in 0..n {
                want += x[s * 256 + i] * x[s * 256 + 255 - i];
            }
            assert_eq!(*got, want, "{stages} stages, {n} slices: element {i}");
        }
    }
}

/// Consumers that release the slot twice in their own block instead of once in each: a
/// producer refills its half of a slot in the peer block while the peer's consumers may
/// still read it.
#[test]
fn a_slot_refilled_before_the_peers_consumers_release_it_is_an_error() {
    let err = ring(2, 5, "rank").1.unwrap_err();
    let ErrorKind::TmaInFlight { array, issued, .. } = err.kind() else {
        panic!("{err}")
    };
    assert_eq!(array, "ring");
    assert_eq!(issued.thread.thread, [128, 0, 0]);
}

#[test]
fn a_multicast_mask_past_the_cluster_is_an_error() {
    let err = halves("4", 1).1.unwrap_err();
    let ErrorKind::Cluster { op, thread, what } = err.kind() else {
        panic!("{err}")
    };
    // Block 1 is the first past the `cluster_sync()`: block 0 waited there for it.
    assert_eq!((*op, thread.block), ("tma_load_multicast", [1, 0, 0]));
    assert!(what.contains("0x4"), "{what}");
}

/// Without the peer's half the tile never completes: the first block's wait is reported.
#[test]
fn a_multicast_into_the_issuing_block_alone_leaves_the_peer_waiting() {
    let err = halves("1 << rank", 1).1.unwrap_err();
    let ErrorKind::MbarrierDeadlock {
        thread,
        array,
        tx_bytes,
        ..
    } = err.kind()
    else {
        panic!("{err}")
    };
    assert_eq!(
        (thread.block, array.as_str(), *tx_bytes),
        ([0, 0, 0], "full", 512)
    );
}

/// Small kernels of two blocks with one mbarrier each; `BODY` follows the initialization.
const PAIR: &str = "
kernel pair(out: global mut [u32]) grid(GRID) block(32) cluster(2) {
    shared bar: [1] u64;
    if thread.x == 0 { mbarrier_init(bar[0], 1); }
    SYNC
    BODY
}";

fn pair(grid: &str, sync: &str, body: &str) -> Result<Vec<u32>, InterpError> {
    let text = PAIR
        .replace("GRID", grid)
        .replace("SYNC", sync)
        .replace("BODY", body);
    let c = compile("pair.tile", &text);
    let (args, result) = launch(&c, "pair", vec![Arg::Buffer(Buffer::from_u32(&[0; 64]))]);
    result.map(|()| args[0].buffer().unwrap().to_u32())
}

/// Block 0 arrives on block 1's mbarrier, block 1 waits for it; with the peer's block
/// arrival from `rank` instead, both would wait forever.
const REMOTE_ARRIVAL: &str = "
    if cluster_rank() == 0 {
        if thread.x == 0 { mbarrier_arrive_cluster(bar[0], RANK); }
    } else {
        mbarrier_wait(bar[0], 0);
        out[thread.x] = 1;
    }
    cluster_sync();";

#[test]
fn a_remote_arrival_completes_the_peers_phase() {
    let body = REMOTE_ARRIVAL.replace("RANK", "1");
    let out = pair("2", "cluster_sync();", &body).unwrap();
    assert_eq!(out[..32], [1; 32]);
    assert_eq!(out[32..], [0; 32]);
}

/// Block 0 completes its own phase and waits at `cluster_sync()`; block 1 waits for an
/// arrival no one sends: its wait is reported, the cause of block 0's.
#[test]
fn an_arrival_no_block_sends_is_a_deadlock_naming_the_waiting_block() {
    let err = pair("2", "cluster_sync();", &REMOTE_ARRIVAL.replace("RANK", "0")).unwrap_err();
    let ErrorKind::MbarrierDeadlock { thread, .. } = err.kind() else {
        panic!("{err}")
    };
    assert_eq!(thread.block, [1, 0, 0]);
}

#[test]
fn an_arrival_rank_past_the_cluster_is_an_error() {
    let err = pair("2", "cluster_sync();", &REMOTE_ARRIVAL.replace("RANK", "2")).unwrap_err();
    let ErrorKind::Cluster { op, what, .. } = err.kind() else {
        panic!("{err}")
    };
    assert_eq!(*op, "mbarrier_arrive_cluster");
    assert!(what.contains("rank 2"), "{what}");
}

#[test]
fn a_grid_that_is_no_whole_number_of_clusters_is_a_launch_error() {
    let err = pair("3", "cluster_sync();", "").unwrap_err();
    let ErrorKind::Launch { reason, .. } = err.kind() else {
        panic!("{err}")
    };
    assert!(reason.contains("clusters"), "{reason}");
}

/// Without `cluster_sync()` after the initialization, block 0 (which runs first) arrives on
/// block 1's mbarrier before block 1 initialized it.
#[test]
fn a_peers_mbarrier_used_before_a_cluster_sync_is_not_initialized() {
    let err = pair("2", "", &REMOTE_ARRIVAL.replace("RANK", "1")).unwrap_err();
    let ErrorKind::Mbarrier { op, what, .. } = err.kind() else {
        panic!("{err}")
    };
    assert_eq!(*op, "mbarrier_arrive_cluster");
    assert!(what.contains("never initialized"), "{what}");
}

/// Block 1 does not wait for the arrival that block 0 sends it late (after block 0's wait on
/// a phase block 1 completes): without a `cluster_sync()` before exiting, block 1 is gone
/// when it comes.
#[test]
fn a_block_reached_after_it_exited_is_an_error_unless_the_cluster_syncs_first() {
    let late = "
    if cluster_rank() == 1 {
        if thread.x == 0 { mbarrier_arrive_cluster(bar[0], 0); }
    } else {
        mbarrier_wait(bar[0], 0);
        if thread.x == 0 { mbarrier_arrive_cluster(bar[0], 1); }
    }
    FINAL";
    pair(
        "2",
        "cluster_sync();",
        &late.replace("FINAL", "cluster_sync();"),
    )
    .unwrap();
    let err = pair("2", "cluster_sync();", &late.replace("FINAL", "")).unwrap_err();
    let ErrorKind::Cluster { op, thread, what } = err.kind() else {
        panic!("{err}")
    };
    assert_eq!((*op, thread.block), ("mbarrier_arrive_cluster", [0, 0, 0]));
    assert!(what.contains("has exited"), "{what}");
}

/// Without `cluster(...)`: rank 0, `cluster_sync()` a block barrier, a multicast to mask 1 a
/// `tma_load`, an arrival on rank 0 a local one.
const SOLO: &str = "
kernel solo(x: global [f32], out: global mut [f32], ranks: global mut [u32]) grid(2) block(64) {
    let xm = tensor_map(x, 16, 16, 8, 16);
    shared tile: [8][16] f32 swizzle;
    shared copy: [64] f32;
    shared bars: [2] u64;
    if thread.x == 0 {
        mbarrier_init(bars[0], 1);
        mbarrier_init(bars[1], 64);
    }
    cluster_sync();
    if thread.x == 0 {
        mbarrier_expect_tx(bars[0], 512);
        tma_load_multicast(tile[0][0], xm, block.x * 8, 0, bars[0], MASK);
    }
    mbarrier_wait(bars[0], 0);
    mbarrier_arrive_cluster(bars[1], RANK);
    mbarrier_wait(bars[1], 0);
    copy[thread.x] = tile[thread.x / 16][thread.x % 16];
    SYNC
    out[block.x * 128 + thread.x] = copy[63 - thread.x];
    out[block.x * 128 + 64 + thread.x] = tile[4 + thread.x / 16][thread.x % 16];
    ranks[block.x * 64 + thread.x] = cluster_rank();
}";

fn solo(mask: &str, rank: &str, sync: &str) -> Result<(Vec<f32>, Vec<f32>), InterpError> {
    let text = SOLO
        .replace("MASK", mask)
        .replace("RANK", rank)
        .replace("SYNC", sync);
    let c = compile("solo.tile", &text);
    let x = random(256, 5);
    let args = vec![
        Arg::ReadOnly(Buffer::from_f32(&x)),
        Arg::Buffer(Buffer::from_f32(&[0.0; 256])),
        Arg::Buffer(Buffer::from_u32(&[7; 128])),
    ];
    let (args, result) = launch(&c, "solo", args);
    result?;
    assert_eq!(args[2].buffer().unwrap().to_u32(), [0; 128]);
    Ok((x, args[1].buffer().unwrap().to_f32()))
}

#[test]
fn without_a_cluster_the_builtins_act_on_the_block_alone() {
    let (x, out) = solo("1", "0", "cluster_sync();").unwrap();
    for block in 0..2 {
        let (got, tile) = (&out[block * 128..], &x[block * 128..]);
        for t in 0..64 {
            assert_eq!(got[t], tile[63 - t], "block {block}, thread {t}");
            assert_eq!(got[64 + t], tile[64 + t], "block {block}, thread {t}");
        }
    }
}

#[test]
fn without_a_cluster_a_mask_or_rank_past_block_0_is_an_error() {
    for (mask, rank, op) in [
        ("2", "0", "tma_load_multicast"),
        ("1", "1", "mbarrier_arrive_cluster"),
    ] {
        let err = solo(mask, rank, "cluster_sync();").unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::Cluster { op: o, .. } if *o == op),
            "{err}"
        );
    }
}

/// It orders the threads' `copy` stores before their reads of each other's, and all of them
/// must reach it.
#[test]
fn without_a_cluster_cluster_sync_is_a_block_barrier() {
    let err = solo("1", "0", "").unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::SharedRace { array, .. } if array == "copy"),
        "{err}"
    );
    let err = solo("1", "0", "if thread.x < 32 { cluster_sync(); }").unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::DivergentBarrier { arrived: 32, .. }),
        "{err}"
    );
}
