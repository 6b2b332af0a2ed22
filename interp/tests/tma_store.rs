//! TMA stores (shared -> global): tiles staged in `swizzle`d and plain arrays written back
//! through maps of `global mut` outputs, clipped at ragged edges; a double-buffered staging area
//! reused after `tma_store_wait(1)`; a warp-specialized kernel whose consumer thread stores what
//! the consumers staged, ordered by mbarriers; and the errors: a source overwritten before the
//! wait that covers its store, a thread exiting with stores not waited for (or never committed),
//! a consumer writing after its arrival, a source written without the writers'
//! `fence_proxy_async()`, a misaligned source, a map over an input.

use half::f16;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use zinc_dsl::Compilation;
use zinc_interp::{Arg, Buffer, ErrorKind, InterpError, Interpreter, Value};

fn compile(text: &str) -> Compilation {
    zinc_dsl::compile_source("store.tile", text, &[], &|_| None)
        .unwrap_or_else(|f| panic!("{}", f.render()))
}

fn launch(c: &Compilation, kernel: &str, args: &mut [Arg]) -> Result<(), InterpError> {
    Interpreter::new(&c.module)
        .sources(&c.sources)
        .launch(kernel, args)
}

/// Never zero, so that a missing or clipped write cannot pass for a written one.
fn nonzero(rng: &mut StdRng) -> f32 {
    rng.random_range(0.5f32..2.0) * if rng.random() { 1.0 } else { -1.0 }
}

/// What every kernel here stores for input element `v`.
fn stored(v: f32) -> f32 {
    v * 2.0 + 1.0
}

/// The line of the first occurrence of `needle` in `text`, as errors print it.
fn line_of(text: &str, needle: &str) -> usize {
    text[..text.find(needle).expect("needle in text")]
        .lines()
        .count()
}

/// Each block stages its 16 x BC tile of `x * 2 + 1` (a value the store must clip past the
/// tensor's edges) as f32 and as f16, and thread 0 stores both through maps of the outputs, which
/// start `lead` elements into their buffers. The layouts are those of the boxes: `swizzle` for
/// rows of 32, 64 or 128 bytes.
const STAGE_STORE: &str = "
kernel stage_store(x: global [f32], yf: global mut [f32], yh: global mut [f16], T: u32, N: u32,
                   lead: u32)
    grid(cdiv(N, BC), cdiv(T, 16)) block(128)
{
    shared sf: [16][BC] f32 F32_LAYOUT;
    shared sh: [16][BC] f16 F16_LAYOUT;
    let fm = tensor_map(yf + lead, T, N, 16, BC);
    let hm = tensor_map(yh + lead, T, N, 16, BC);
    let t0 = block.y * 16;
    let n0 = block.x * BC;
    for i in thread.x..16 * BC step 128 {
        let r = i / BC;
        let c = i % BC;
        var v = -1000.0;
        if t0 + r < T && n0 + c < N {
            v = x[(t0 + r) * N + n0 + c] * 2.0 + 1.0;
        }
        sf[r][c] = v;
        sh[r][c] = v as f16;
    }
    fence_proxy_async();
    barrier();
    if thread.x == 0 {
        tma_store(fm, t0, n0, sf[0][0]);
        tma_store(hm, t0, n0, sh + 0);
        FINISH
    }
}";

const COMMIT_AND_WAIT: &str = "tma_store_commit();
        tma_store_wait(0);";

/// `swizzle` for box rows the hardware swizzles, else row-major.
fn layout(row_bytes: usize) -> &'static str {
    match row_bytes {
        32 | 64 | 128 => "swizzle",
        _ => "",
    }
}

/// Edits of a kernel's text: (pattern, replacement) pairs.
type Edits<'a> = [(&'a str, &'a str)];

/// `text` with each of `edits` made.
fn edited(text: &str, edits: &Edits) -> String {
    edits
        .iter()
        .fold(text.to_string(), |t, (from, to)| t.replace(from, to))
}

/// `STAGE_STORE` for rows of `bc` columns, with `edits` (FINISH among them).
fn stage_store(bc: usize, edits: &Edits) -> (String, Compilation) {
    let columns = bc.to_string();
    let defines = [
        ("BC", columns.as_str()),
        ("F32_LAYOUT", layout(4 * bc)),
        ("F16_LAYOUT", layout(2 * bc)),
    ];
    let text = edited(&edited(STAGE_STORE, edits), &defines);
    let c = compile(&text);
    (text, c)
}

/// The outputs' elements before and after a launch.
struct Outputs {
    x: Vec<f32>,
    f32_before: Vec<f32>,
    f32_after: Vec<f32>,
    f16_before: Vec<f16>,
    f16_after: Vec<f16>,
}

/// Runs `stage_store` on a random T x N input, the outputs `lead` elements into buffers of
/// random prior values that reach 20 rows past the tensor.
fn run_stage_store(
    c: &Compilation,
    [t, n]: [usize; 2],
    lead: usize,
) -> Result<Outputs, InterpError> {
    let mut rng = StdRng::seed_from_u64((t * 1000 + n) as u64);
    let x: Vec<f32> = (0..t * n).map(|_| nonzero(&mut rng)).collect();
    let len = lead + (t + 20) * n;
    let f32_before: Vec<f32> = (0..len).map(|_| nonzero(&mut rng)).collect();
    let f16_before: Vec<f16> = (0..len).map(|_| f16::from_f32(nonzero(&mut rng))).collect();
    let mut args = vec![
        Arg::ReadOnly(Buffer::from_f32(&x)),
        Arg::Buffer(Buffer::from_f32(&f32_before)),
        Arg::Buffer(Buffer::from_f16(&f16_before)),
        Arg::Scalar(Value::U32(t as u32)),
        Arg::Scalar(Value::U32(n as u32)),
        Arg::Scalar(Value::U32(lead as u32)),
    ];
    launch(c, "stage_store", &mut args)?;
    Ok(Outputs {
        x,
        f32_before,
        f32_after: args[1].buffer().unwrap().to_f32(),
        f16_before,
        f16_after: args[2].buffer().unwrap().to_f16(),
    })
}

/// Elements `lead..lead + T N` of `after` hold `want` of the input; every other keeps its prior
/// value.
fn check_output<T: Copy + PartialEq + std::fmt::Debug>(
    what: &str,
    x: &[f32],
    lead: usize,
    before: &[T],
    after: &[T],
    want: impl Fn(f32) -> T,
) {
    for (i, (&got, &prior)) in after.iter().zip(before).enumerate() {
        let expected = match i.checked_sub(lead).and_then(|j| x.get(j)) {
            Some(&v) => want(v),
            None => prior,
        };
        assert_eq!(
            got, expected,
            "{what}: element {i} (the tensor starts at {lead})"
        );
    }
}

#[test]
fn staged_tiles_are_stored_and_clipped_at_the_edges() {
    // 128-, 64- and 32-byte rows swizzled (f32 and f16 boxes of 32 and 16 columns, f32 of 8),
    // and row-major 96- and 48-byte rows (24 columns) and 16-byte ones (f16 of 8).
    for bc in [32, 16, 8, 24] {
        let (_, c) = stage_store(bc, &[("FINISH", COMMIT_AND_WAIT)]);
        for shape in [[37, 40], [16, 32], [5, 8], [50, 104]] {
            let lead = 24;
            let out = run_stage_store(&c, shape, lead)
                .unwrap_or_else(|e| panic!("BC {bc}, {shape:?}: {e}"));
            let what = format!("BC {bc}, {shape:?}");
            check_output(
                &format!("{what} f32"),
                &out.x,
                lead,
                &out.f32_before,
                &out.f32_after,
                stored,
            );
            check_output(
                &format!("{what} f16"),
                &out.x,
                lead,
                &out.f16_before,
                &out.f16_after,
                |v| f16::from_f32(stored(v)),
            );
        }
    }
}

/// What an error for a source read through the async proxy without its writer's fence names:
/// the reading operation, the array and element, the reading and the writing thread (their x),
/// and the lines of the read and the write.
#[derive(Debug, PartialEq)]
struct Unfenced {
    op: &'static str,
    array: String,
    index: u64,
    reader: u32,
    writer: u32,
    read_line: usize,
    write_line: usize,
}

fn unfenced(err: &InterpError) -> Unfenced {
    let ErrorKind::UnfencedWrite {
        op,
        thread,
        array,
        index,
        write,
    } = err.kind()
    else {
        panic!("expected an unfenced write, got: {err}");
    };
    assert!(
        err.to_string()
            .contains("the writing thread must call `fence_proxy_async()`"),
        "{err}"
    );
    Unfenced {
        op,
        array: array.clone(),
        index: *index,
        reader: thread.thread[0],
        writer: write.thread.thread[0],
        read_line: err.location().unwrap().line_col.unwrap().0,
        write_line: write.at.line_col.unwrap().0,
    }
}

/// The TMA reads the source through the async proxy, which sees a thread's stores only after a
/// `fence_proxy_async()` of that thread that follows them and precedes the barrier before the
/// store. Without one, the store names the first element it may read stale: thread 0's own with
/// no fence or a fence before the writes, thread 1's with the fences after the barrier (thread
/// 0's own still precedes its store), thread 5's when only thread 5 skips it.
#[test]
fn a_source_written_without_a_fence_for_the_async_proxy_is_an_error() {
    const FENCED: &str = "fence_proxy_async();\n    barrier();";
    const SKIPPED_BY_5: (&str, &str) = (
        "fence_proxy_async();",
        "if thread.x != 5 { fence_proxy_async(); }",
    );
    let cases: [(&Edits, &str, u32); 5] = [
        (&[(FENCED, "barrier();")], "tma_store", 0),
        (
            &[
                (FENCED, "barrier();"),
                ("    for i in", "    fence_proxy_async();\n    for i in"),
            ],
            "tma_store",
            0,
        ),
        (
            &[(FENCED, "barrier();\n    fence_proxy_async();")],
            "tma_store",
            1,
        ),
        (&[SKIPPED_BY_5], "tma_store", 5),
        (
            &[SKIPPED_BY_5, ("tma_store(fm", "tma_store_add(fm")],
            "tma_store_add",
            5,
        ),
    ];
    for (edits, op, writer) in cases {
        let (text, c) = stage_store(32, &[&[("FINISH", COMMIT_AND_WAIT)], edits].concat());
        let err = run_stage_store(&c, [37, 40], 0).map(drop).unwrap_err();
        let expected = Unfenced {
            op,
            array: "sf".to_string(),
            // Row 0, which the swizzle leaves in place: thread t writes element t.
            index: u64::from(writer),
            reader: 0,
            writer,
            read_line: line_of(&text, &format!("{op}(fm")),
            write_line: line_of(&text, "sf[r][c] = v;"),
        };
        assert_eq!(unfenced(&err), expected, "{edits:?}: {err}");
    }
}

/// A thread that leaves its stores' sources possibly still being read: never waited for (at
/// the kernel's end or at a `return`), or never committed, so that no wait can cover them.
#[test]
fn exiting_before_the_stores_are_waited_for_is_an_error() {
    for (finish, committed, exit) in [
        ("tma_store_commit();", true, None),
        (
            "tma_store_commit();\n        return;",
            true,
            Some("return;"),
        ),
        ("tma_store_wait(0);", false, None),
    ] {
        let (text, c) = stage_store(32, &[("FINISH", finish)]);
        let err = run_stage_store(&c, [37, 40], 0).map(drop).unwrap_err();
        match err.kind() {
            ErrorKind::TmaStoreUnfinished {
                thread,
                store,
                committed: was_committed,
            } => {
                assert_eq!(thread.thread, [0, 0, 0], "{err}");
                assert_eq!(*was_committed, committed, "{err}");
                let (line, _) = store.line_col.unwrap();
                assert_eq!(line, line_of(&text, "tma_store(fm"), "{err}");
            }
            _ => panic!("{finish}: {err}"),
        }
        // At the `return`, or at the kernel's closing brace.
        let exit_line = exit.map_or(text.lines().count(), |r| line_of(&text, r));
        let (line, _) = err.location().unwrap().line_col.unwrap();
        assert_eq!(line, exit_line, "{err}");
        assert!(
            err.to_string()
                .contains("tma_store_wait(0) before returning"),
            "{err}"
        );
    }
}

/// A source off its alignment: 32 f32 into a `swizzle`d array of 128-byte rows is 128 bytes
/// in, and the 128-byte swizzle needs 1024.
#[test]
fn a_misaligned_source_is_refused() {
    let text = STAGE_STORE
        .replace("FINISH", COMMIT_AND_WAIT)
        .replace("sf[0][0]", "sf + 32")
        .replace("BC", "32")
        .replace("F32_LAYOUT", "swizzle")
        .replace("F16_LAYOUT", "swizzle");
    let c = compile(&text);
    let err = run_stage_store(&c, [37, 40], 0).map(drop).unwrap_err();
    assert!(
        matches!(
            err.kind(),
            ErrorKind::Misaligned {
                offset: 128,
                align: 1024,
                ..
            }
        ),
        "{err}"
    );
}

/// A map of an input view reaches `tma_store` through a function's map parameter, where the
/// checker cannot see the view: the interpreter refuses the store.
#[test]
fn storing_through_a_map_of_an_input_is_refused() {
    let text = "
fn store_tile(m: tensor_map<f32>, src: shared [f32]) {
    tma_store(m, 0, 0, src);
}
kernel into_input(x: global [f32]) grid(1) block(32) {
    shared tile: [8][32] f32 swizzle;
    let xm = tensor_map(x, 8, 32, 8, 32);
    tile[thread.x / 32][thread.x % 32] = 1.0;
    fence_proxy_async();
    barrier();
    if thread.x == 0 {
        store_tile(xm, tile + 0);
        tma_store_commit();
        tma_store_wait(0);
    }
}";
    let c = compile(text);
    let mut args = [Arg::ReadOnly(Buffer::from_f32(&[2.0; 256]))];
    let err = launch(&c, "into_input", &mut args).unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::TensorMap { map, what }
            if map == "xm" && what.contains("`x` is not a `global mut` view")),
        "{err}"
    );
    assert_eq!(args[0].buffer().unwrap().to_f32(), [2.0; 256]);
}

/// One block stores the T x N result in 16 x 32 chunks, chunk c staged by all threads in half
/// c % 2 of the staging area and stored by thread 0, which waits until at most one group (chunk
/// c - 1's, the other half) may still read before the half is rewritten (REFILL).
const CHUNKED: &str = "
kernel chunked_store(x: global [f32], y: global mut [f32], T: u32, N: u32) grid(1) block(128) {
    shared stage: [2][16][32] f32 swizzle;
    let ym = tensor_map(y, T, N, 16, 32);
    let across = cdiv(N, 32);
    let chunks = cdiv(T, 16) * across;
    for c in 0u32..chunks {
        let h = c % 2;
        let t0 = c / across * 16;
        let n0 = c % across * 32;
        REFILL
        barrier();
        for i in thread.x..512u32 step 128 {
            let r = i / 32;
            let col = i % 32;
            var v = -1000.0;
            if t0 + r < T && n0 + col < N {
                v = x[(t0 + r) * N + n0 + col] * 2.0 + 1.0;
            }
            stage[h][r][col] = v;
        }
        fence_proxy_async();
        barrier();
        if thread.x == 0 {
            tma_store(ym, t0, n0, stage[h][0][0]);
            tma_store_commit();
        }
    }
    if thread.x == 0 {
        tma_store_wait(0);
    }
}";

/// Chunk c - 2's store, from the half chunk c rewrites, is done reading it.
const WAIT_FOR_THE_HALF: &str = "if thread.x == 0 { tma_store_wait(1); }";

/// Runs `kernel` (whose first parameters are `x`, `y`, `T` and `N`) on a random T x N input,
/// with `y` reaching 20 rows past the tensor; the input, `y` before and `y` after.
fn run_tn(
    c: &Compilation,
    kernel: &str,
    [t, n]: [usize; 2],
) -> (Vec<f32>, Vec<f32>, Result<Vec<f32>, InterpError>) {
    let mut rng = StdRng::seed_from_u64((t * 1000 + n) as u64);
    let x: Vec<f32> = (0..t * n).map(|_| nonzero(&mut rng)).collect();
    let before: Vec<f32> = (0..(t + 20) * n).map(|_| nonzero(&mut rng)).collect();
    let mut args = vec![
        Arg::ReadOnly(Buffer::from_f32(&x)),
        Arg::Buffer(Buffer::from_f32(&before)),
        Arg::Scalar(Value::U32(t as u32)),
        Arg::Scalar(Value::U32(n as u32)),
    ];
    let result = launch(c, kernel, &mut args);
    let after = args[1].buffer().unwrap().to_f32();
    (x, before, result.map(|()| after))
}

#[test]
fn double_buffered_stores_reuse_a_half_after_waiting_for_its_store() {
    let c = compile(&CHUNKED.replace("REFILL", WAIT_FOR_THE_HALF));
    for shape in [[37, 100], [16, 32], [50, 36]] {
        let (x, before, after) = run_tn(&c, "chunked_store", shape);
        let after = after.unwrap_or_else(|e| panic!("{shape:?}: {e}"));
        check_output(&format!("{shape:?}"), &x, 0, &before, &after, stored);
    }
}

/// Without the wait, chunk 2 rewrites half 0 while chunk 0's store may still read it: the final
/// wait, which retires chunk 0's store first, finds its source changed.
#[test]
fn rewriting_a_half_before_its_store_is_waited_for_is_an_error() {
    let text = CHUNKED.replace("REFILL", "");
    let c = compile(&text);
    let (_, _, result) = run_tn(&c, "chunked_store", [37, 100]);
    let err = result.unwrap_err();
    match err.kind() {
        ErrorKind::TmaStoreSourceOverwritten {
            thread,
            store,
            array,
            index,
        } => {
            assert_eq!(thread.thread, [0, 0, 0], "{err}");
            assert_eq!(array, "stage", "{err}");
            // Half 0's first element: thread 0 wrote it last.
            assert_eq!(*index, 0, "{err}");
            let (line, _) = store.line_col.unwrap();
            assert_eq!(line, line_of(&text, "tma_store(ym"), "{err}");
        }
        _ => panic!("{err}"),
    }
    let (line, _) = err.location().unwrap().line_col.unwrap();
    assert_eq!(line, line_of(&text, "tma_store_wait(0)"), "{err}");
    assert!(
        err.to_string()
            .contains("was overwritten before a tma_store_wait covered it"),
        "{err}"
    );
}

/// Warp specialization, as gemm_wg's TMA_STORE epilogue: a producer warp loads the block's
/// 16-row stripe of `x` chunk by chunk (16 x 32) into a two-slot ring; the four consumer warps
/// write `x * 2 + 1` of chunk c into half c % 2 of the staging area and arrive on `staged`, and
/// consumer thread 0 waits for that phase, stores the half (in a device function taking the
/// map) and, once the store of chunk c - 1 is done reading (`tma_store_wait(1)`), frees the other
/// half on `freed`, which the consumers wait for before rewriting it.
const WARP_SPECIALIZED: &str = "
fn store_chunk(m: tensor_map<f32>, row: u32, col: u32, src: shared [f32]) {
    tma_store(m, row, col, src);
    tma_store_commit();
}
kernel ws_store(x: global [f32], y: global mut [f32], T: u32, N: u32)
    grid(1, cdiv(T, 16)) block(160)
{
    let xm = tensor_map(x, T, N, 16, 32);
    let ym = tensor_map(y, T, N, 16, 32);
    shared xs: [2][16][32] f32 swizzle;
    shared ys: [2][16][32] f32 swizzle;
    shared full: [2] u64;
    shared empty: [2] u64;
    shared staged: [2] u64;
    shared freed: [2] u64;
    let t0 = block.y * 16;
    let chunks = cdiv(N, 32);
    if thread.x == 0 {
        for h in 0u32..2 {
            mbarrier_init(full[h], 1);
            mbarrier_init(empty[h], 128);
            mbarrier_init(staged[h], 128);
            mbarrier_init(freed[h], 1);
        }
    }
    barrier();
    if shfl_idx(warp, 0) == 4 {
        if thread.x == 128 {
            for c in 0u32..chunks {
                let h = c % 2;
                if c >= 2 { mbarrier_wait(empty[h], (c / 2 + 1) % 2); }
                mbarrier_expect_tx(full[h], 16 * 32 * 4);
                tma_load(xs[h][0][0], xm, t0, c * 32, full[h]);
            }
        }
    } else {
        for c in 0u32..chunks {
            let h = c % 2;
            mbarrier_wait(full[h], c / 2 % 2);
            if c >= 2 { mbarrier_wait(freed[h], (c / 2 + 1) % 2); }
            for i in thread.x..512u32 step 128 {
                ys[h][i / 32][i % 32] = xs[h][i / 32][i % 32] * 2.0 + 1.0;
            }
            mbarrier_arrive(empty[h]);
            fence_proxy_async();
            mbarrier_arrive(staged[h]);
            AFTER_ARRIVAL
            if thread.x == 0 {
                mbarrier_wait(staged[h], c / 2 % 2);
                store_chunk(ym, t0, c * 32, ys + h * 512);
                tma_store_wait(1);
                if c >= 1 { mbarrier_arrive(freed[1 - h]); }
            }
        }
        if thread.x == 0 { tma_store_wait(0); }
    }
}";

/// `WARP_SPECIALIZED` with `edits`, and nothing AFTER_ARRIVAL unless one puts something there.
fn warp_specialized(edits: &Edits) -> (String, Compilation) {
    let text = edited(WARP_SPECIALIZED, edits).replace("AFTER_ARRIVAL", "");
    let c = compile(&text);
    (text, c)
}

#[test]
fn a_consumer_thread_stores_what_the_consumer_warps_staged() {
    let (_, c) = warp_specialized(&[]);
    for shape in [[37, 100], [16, 32], [50, 36], [5, 132]] {
        let (x, before, after) = run_tn(&c, "ws_store", shape);
        let after = after.unwrap_or_else(|e| panic!("{shape:?}: {e}"));
        check_output(&format!("{shape:?}"), &x, 0, &before, &after, stored);
    }
}

/// A consumer that writes the staging half after its arrival on `staged`: its write is not
/// ordered before the store's read.
#[test]
fn a_consumer_writing_after_its_arrival_races_with_the_store() {
    let (_, c) = warp_specialized(&[("AFTER_ARRIVAL", "if thread.x == 5 { ys[h][0][5] = 0.0; }")]);
    let (_, _, result) = run_tn(&c, "ws_store", [37, 100]);
    let err = result.unwrap_err();
    match err.kind() {
        ErrorKind::SharedRace {
            array,
            thread,
            earlier,
            ..
        } => {
            assert_eq!(array, "ys", "{err}");
            assert_eq!(thread.thread, [0, 0, 0], "{err}");
            assert_eq!(earlier.thread.thread, [5, 0, 0], "{err}");
        }
        _ => panic!("{err}"),
    }
}

/// Thread 0 frees half c - 1 after waiting only until two groups may still read: the consumers
/// rewrite it while chunk c - 1's store may still read it, which the next wait finds.
#[test]
fn freeing_a_half_its_store_may_still_read_is_caught() {
    let (_, c) = warp_specialized(&[("tma_store_wait(1);", "tma_store_wait(2);")]);
    let (_, _, result) = run_tn(&c, "ws_store", [37, 100]);
    let err = result.unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::TmaStoreSourceOverwritten { array, .. } if array == "ys"),
        "{err}"
    );
}

/// The consumers' fences must precede their arrival on `staged`, which orders their writes
/// before the store: with none, the store names thread 0's own write; with the fences after the
/// arrival, thread 1's (thread 0's own fence still precedes its store).
#[test]
fn consumers_fence_their_writes_before_the_arrival_that_orders_them_before_the_store() {
    const FENCED: &str = "fence_proxy_async();\n            mbarrier_arrive(staged[h]);";
    for (arrival, writer) in [
        ("mbarrier_arrive(staged[h]);", 0),
        (
            "mbarrier_arrive(staged[h]);\n            fence_proxy_async();",
            1,
        ),
    ] {
        let (text, c) = warp_specialized(&[(FENCED, arrival)]);
        let (_, _, result) = run_tn(&c, "ws_store", [37, 100]);
        let err = result.unwrap_err();
        let expected = Unfenced {
            op: "tma_store",
            array: "ys".to_string(),
            index: u64::from(writer),
            reader: 0,
            writer,
            read_line: line_of(&text, "tma_store(m,"),
            write_line: line_of(&text, "ys[h][i / 32][i % 32] ="),
        };
        assert_eq!(unfenced(&err), expected, "{arrival}: {err}");
    }
}

/// `tma_store_add` adds its box into the output, clipped at the edges like `tma_store`: each
/// block stages its 16 x 32 tile of `x` (f32, and f16 in 64-byte rows) and of `x`'s bits (u32,
/// wrapping), and thread 0 adds them twice, so every element inside the tensor ends as its prior
/// value plus twice the input's, in that order (f16 sums rounded each time), and every element
/// outside keeps its prior value.
#[test]
fn added_boxes_accumulate_into_the_output() {
    let text = "
kernel stage_add(x: global [f32], yf: global mut [f32], yu: global mut [u32],
                 yh: global mut [f16], T: u32, N: u32)
    grid(cdiv(N, 32), cdiv(T, 16)) block(128)
{
    shared sf: [16][32] f32 swizzle;
    shared su: [16][32] u32 swizzle;
    shared sh: [16][32] f16 swizzle;
    let fm = tensor_map(yf, T, N, 16, 32);
    let um = tensor_map(yu, T, N, 16, 32);
    let hm = tensor_map(yh, T, N, 16, 32);
    let t0 = block.y * 16;
    let n0 = block.x * 32;
    for i in thread.x..512u32 step 128 {
        var v = -1000.0;
        if t0 + i / 32 < T && n0 + i % 32 < N {
            v = x[(t0 + i / 32) * N + n0 + i % 32];
        }
        sf[i / 32][i % 32] = v;
        su[i / 32][i % 32] = bitcast<u32>(v);
        sh[i / 32][i % 32] = v as f16;
    }
    fence_proxy_async();
    barrier();
    if thread.x == 0 {
        for k in 0u32..2 {
            tma_store_add(fm, t0, n0, sf[0][0]);
            tma_store_add(um, t0, n0, su + 0);
            tma_store_add(hm, t0, n0, sh + 0);
        }
        tma_store_commit();
        tma_store_wait(0);
    }
}";
    let c = compile(text);
    let [t, n] = [37usize, 72];
    let mut rng = StdRng::seed_from_u64(7);
    let x: Vec<f32> = (0..t * n).map(|_| nonzero(&mut rng)).collect();
    let len = (t + 20) * n;
    let f32_before: Vec<f32> = (0..len).map(|_| nonzero(&mut rng)).collect();
    let u32_before: Vec<u32> = (0..len).map(|_| rng.random()).collect();
    let f16_before: Vec<f16> = (0..len).map(|_| f16::from_f32(nonzero(&mut rng))).collect();
    let mut args = vec![
        Arg::ReadOnly(Buffer::from_f32(&x)),
        Arg::Buffer(Buffer::from_f32(&f32_before)),
        Arg::Buffer(Buffer::from_u32(&u32_before)),
        Arg::Buffer(Buffer::from_f16(&f16_before)),
        Arg::Scalar(Value::U32(t as u32)),
        Arg::Scalar(Value::U32(n as u32)),
    ];
    launch(&c, "stage_add", &mut args).unwrap();
    let f32_after = args[1].buffer().unwrap().to_f32();
    let u32_after = args[2].buffer().unwrap().to_u32();
    let f16_after = args[3].buffer().unwrap().to_f16();
    let add_f16 = |a: f16, b: f16| f16::from_f32(a.to_f32() + b.to_f32());
    for i in 0..len {
        let (f, u, h) = match x.get(i) {
            Some(&v) => (
                f32_before[i] + v + v,
                u32_before[i]
                    .wrapping_add(v.to_bits())
                    .wrapping_add(v.to_bits()),
                add_f16(add_f16(f16_before[i], f16::from_f32(v)), f16::from_f32(v)),
            ),
            None => (f32_before[i], u32_before[i], f16_before[i]),
        };
        assert_eq!(f32_after[i].to_bits(), f.to_bits(), "f32 element {i}");
        assert_eq!(u32_after[i], u, "u32 element {i}");
        assert_eq!(f16_after[i].to_bits(), h.to_bits(), "f16 element {i}");
    }
}
