//! Warp-specialized kernels: a producer warp fills a ring of shared slots (by TMA or by plain
//! stores) while four consumer warps read them, the two sides synchronized only by `full` and
//! `empty` mbarriers. The interpreter runs the sides of the warp-splitting `if` as roles; these
//! tests check the results over several wraps of the ring, nested roles and waits in device
//! functions, and the errors: a slot refilled while still in use, a read before the wait, roles
//! waiting on each other or for a role that is done, a block barrier inside a role.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use zinc_dsl::Compilation;
use zinc_interp::{Arg, Buffer, ErrorKind, InterpError, Interpreter, Value};

/// Slice `a` of `x` is 128 f32 (8 rows of 16); the producer (warp 4) puts it in ring slot
/// `a % STAGES`, and consumer thread `t` adds the product of elements `t` and `127 - t` of
/// every slice, so each thread reads an element another producer thread wrote.
const RING: &str = "
fn wait_full(bar: shared mut [u64], parity: u32) {
    mbarrier_wait(bar, parity);
}
kernel ring_sum<STAGES: u32 = 2>(x: global [f32], out: global mut [f32], n: u32)
    grid(1) block(160)
{
    let xm = tensor_map(x, n * 8, 16, 8, 16);
    // 64-byte rows: the box lands in the 64-byte swizzle.
    shared ring: [STAGES][8][16] f32 swizzle;
    shared full: [STAGES] u64;
    shared empty: [STAGES] u64;
    if thread.x == 0 {
        for i in 0u32..STAGES {
            mbarrier_init(full[i], FULL_COUNT);
            mbarrier_init(empty[i], 128);
        }
    }
    barrier();
    let role = shfl_idx(thread.x / 128, 0);
    if role == 1 {
        PRODUCE
    } else {
        CONSUMERS
    }
    AFTER
}";

/// One thread expects each slice's bytes and loads it by TMA.
const PRODUCE_TMA: &str = "
        if thread.x == 128 {
            for a in 0u32..n {
                let slot = a % STAGES;
                if a >= STAGES { mbarrier_wait(empty[slot], (a / STAGES + 1) % 2); }
                mbarrier_expect_tx(full[slot], 512);
                tma_load(ring[slot][0][0], xm, a * 8, 0, full[slot]);
            }
        }";

/// The 32 producer threads store four elements each, then arrive.
const PRODUCE_STORES: &str = "
        for a in 0u32..n {
            let slot = a % STAGES;
            if a >= STAGES { mbarrier_wait(empty[slot], (a / STAGES + 1) % 2); }
            for j in thread.x - 128..128u32 step 32 {
                ring[slot][j / 16][j % 16] = x[a * 128 + j];
            }
            mbarrier_arrive(full[slot]);
        }";

const CONSUME: &str = "
        var acc = 0.0;
        for s in 0u32..n {
            let slot = s % STAGES;
            mbarrier_wait(full[slot], s / STAGES % 2);
            let t = thread.x;
            acc += ring[slot][t / 16][t % 16] * ring[slot][7 - t / 16][15 - t % 16];
            mbarrier_arrive(empty[slot]);
        }
        out[thread.x] = acc;";

/// Warps 0-1 and 2-3 consume as two roles of their own, waiting in a device function.
fn nested_consumers() -> String {
    let consume = CONSUME.replace("mbarrier_wait(full[slot],", "wait_full(full + slot,");
    format!("if thread.x < 64 {{ {consume} }} else {{ {consume} }}")
}

fn compile(produce: &str, consumers: &str, stages: u32) -> Compilation {
    compile_with_after(produce, consumers, "", stages)
}

/// The kernel with `after` following the roles' `if`.
fn compile_with_after(produce: &str, consumers: &str, after: &str, stages: u32) -> Compilation {
    compile_text(RING, produce, consumers, after, stages)
}

/// `text` (RING or a variant of it) with its placeholders filled.
fn compile_text(
    text: &str,
    produce: &str,
    consumers: &str,
    after: &str,
    stages: u32,
) -> Compilation {
    let full_count = if produce.contains("tma_load") {
        "1"
    } else {
        "32"
    };
    let text = text
        .replace("PRODUCE", produce)
        .replace("CONSUMERS", consumers)
        .replace("AFTER", after)
        .replace("FULL_COUNT", full_count);
    let defines = [("STAGES".to_string(), stages.to_string())];
    zinc_dsl::compile_source("roles.tile", &text, &defines, &|_| None)
        .unwrap_or_else(|f| panic!("{}", f.render()))
}

/// Runs the kernel over `n` random non-zero slices; the inputs and the result.
fn run(c: &Compilation, n: usize) -> (Vec<f32>, Result<Vec<f32>, InterpError>) {
    let mut rng = StdRng::seed_from_u64(n as u64);
    let x: Vec<f32> = (0..n * 128)
        .map(|_| rng.random_range(0.5f32..2.0) * if rng.random() { 1.0 } else { -1.0 })
        .collect();
    let mut args = vec![
        Arg::ReadOnly(Buffer::from_f32(&x)),
        Arg::Buffer(Buffer::from_f32(&[0.0; 128])),
        Arg::Scalar(Value::U32(n as u32)),
    ];
    let result = Interpreter::new(&c.module)
        .sources(&c.sources)
        .launch("ring_sum", &mut args);
    let out = args[1].buffer().unwrap().to_f32();
    (x, result.map(|()| out))
}

fn check_sums(produce: &str, consumers: &str, stages: u32, n: usize) {
    check_sums_after(&compile(produce, consumers, stages), stages, n, 0.0);
}

/// Each output is the thread's sum of products, plus `extra`.
fn check_sums_after(c: &Compilation, stages: u32, n: usize, extra: f32) {
    let (x, out) = run(c, n);
    let out = out.unwrap_or_else(|e| panic!("{stages} stages, {n} slices: {e}"));
    for (t, got) in out.iter().enumerate() {
        let mut want = 0.0f32;
        for s in 0..n {
            want += x[s * 128 + t] * x[s * 128 + 127 - t];
        }
        assert_eq!(
            *got,
            want + extra,
            "{stages} stages, {n} slices: thread {t}"
        );
    }
}

fn failure(produce: &str, consumers: &str) -> InterpError {
    let c = compile(produce, consumers, 2);
    run(&c, 7).1.unwrap_err()
}

#[test]
fn tma_producer_warp_feeds_consumer_warps_through_the_ring() {
    for (stages, n) in [(2, 7), (3, 10), (2, 1)] {
        check_sums(PRODUCE_TMA, CONSUME, stages, n);
    }
}

#[test]
fn storing_producer_warp_feeds_consumer_warps_through_the_ring() {
    for (stages, n) in [(2, 7), (3, 10)] {
        check_sums(PRODUCE_STORES, CONSUME, stages, n);
    }
}

#[test]
fn consumer_roles_nest_and_wait_in_functions() {
    check_sums(PRODUCE_TMA, &nested_consumers(), 2, 9);
    check_sums(PRODUCE_STORES, &nested_consumers(), 3, 8);
}

/// The producer warp returns when done; after the roles the consumers go on together, and a
/// block barrier waits for them alone.
#[test]
fn threads_go_on_together_after_the_roles() {
    let returning = format!("{PRODUCE_TMA}\n        return;");
    let after = "barrier();\n    out[thread.x] += 1.0;";
    let c = compile_with_after(&returning, CONSUME, after, 2);
    check_sums_after(&c, 2, 5, 1.0);
}

/// The roles as two `if`s in a row (as an `unroll` over roles writes them), in either order:
/// the warps that skip the first run the second beside it, as on the GPU, where in lock step
/// the first would wait forever for the second.
#[test]
fn consecutive_role_ifs_run_side_by_side() {
    let split = "if role == 1 {\n        PRODUCE\n    } else {\n        CONSUMERS\n    }";
    assert!(RING.contains(split));
    for (first, second) in [("role == 1", "role != 1"), ("role != 1", "role == 1")] {
        let side = |cond: &str| {
            let body = if cond == "role == 1" {
                "PRODUCE"
            } else {
                "CONSUMERS"
            };
            format!("if {cond} {{\n        {body}\n    }}")
        };
        let text = RING.replace(split, &format!("{}\n    {}", side(first), side(second)));
        for (produce, stages, n) in [(PRODUCE_TMA, 2, 7), (PRODUCE_STORES, 3, 10)] {
            let c = compile_text(&text, produce, CONSUME, "", stages);
            check_sums_after(&c, stages, n, 0.0);
        }
    }
}

/// A second role `if` whose condition the first one's body changes runs after it, in order:
/// warp 0 sets `second` in the first body, so it runs the second body too (all 64 threads
/// store), which evaluating both conditions first would miss.
#[test]
fn role_ifs_whose_conditions_earlier_bodies_change_run_in_order() {
    let text = "
kernel both(out: global mut [f32]) grid(1) block(64) {
    shared bar: [1] u64;
    if thread.x == 0 {
        mbarrier_init(bar[0], 32);
    }
    barrier();
    let w = shfl_idx(thread.x / 32, 0);
    var second = w == 1;
    if w == 0 {
        mbarrier_arrive(bar[0]);
        second = true;
        mbarrier_wait(bar[0], 0);
    }
    if second {
        mbarrier_wait(bar[0], 0);
        out[thread.x] = 1.0;
    }
}";
    let c = zinc_dsl::compile_source("both.tile", text, &[], &|_| None)
        .unwrap_or_else(|f| panic!("{}", f.render()));
    let mut args = vec![Arg::Buffer(Buffer::from_f32(&[0.0; 64]))];
    Interpreter::new(&c.module)
        .sources(&c.sources)
        .launch("both", &mut args)
        .unwrap();
    assert_eq!(args[0].buffer().unwrap().to_f32(), vec![1.0; 64]);
}

/// Consumers that release a slot before reading it: the refill is not ordered after the read.
#[test]
fn refilling_a_slot_still_being_read_is_a_race() {
    let release_early = CONSUME
        .replace("mbarrier_arrive(empty[slot]);", "")
        .replace(
            "let t = thread.x;",
            "mbarrier_arrive(empty[slot]);\n let t = thread.x;",
        );
    for produce in [PRODUCE_TMA, PRODUCE_STORES] {
        let err = failure(produce, &release_early);
        assert!(
            matches!(err.kind(), ErrorKind::SharedRace { array, .. } if array == "ring"),
            "{err}"
        );
    }
}

/// A producer that never waits for `empty` overwrites a slot whose copy no consumer has seen.
#[test]
fn refilling_without_waiting_for_the_slot_is_caught() {
    let no_wait = PRODUCE_TMA.replace(
        "if a >= STAGES { mbarrier_wait(empty[slot], (a / STAGES + 1) % 2); }",
        "",
    );
    let err = failure(&no_wait, CONSUME);
    assert!(
        matches!(err.kind(), ErrorKind::TmaInFlight { array, .. } if array == "ring"),
        "{err}"
    );
}

#[test]
fn reading_a_slot_before_waiting_for_it_is_an_error() {
    let early = CONSUME.replace("mbarrier_wait(full[slot], s / STAGES % 2);", "");
    let err = failure(PRODUCE_TMA, &early);
    assert!(
        matches!(err.kind(), ErrorKind::TmaInFlight { array, .. } if array == "ring"),
        "{err}"
    );
    let err = failure(PRODUCE_STORES, &early);
    assert!(
        matches!(err.kind(), ErrorKind::SharedRace { array, .. } if array == "ring"),
        "{err}"
    );
}

/// The producer waits for a free slot before its first fill; the consumers wait for a full
/// one. The first role (the producer, the `if`'s then-side) reports its wait.
#[test]
fn roles_waiting_on_each_other_deadlock() {
    let wait_first = PRODUCE_STORES.replace(
        "if a >= STAGES { mbarrier_wait(empty[slot], (a / STAGES + 1) % 2); }",
        "mbarrier_wait(empty[slot], a / STAGES % 2);",
    );
    let err = failure(&wait_first, CONSUME);
    match err.kind() {
        ErrorKind::MbarrierDeadlock {
            thread,
            array,
            offset,
            parity,
            arrivals,
            tx_bytes,
        } => {
            assert_eq!(thread.thread, [128, 0, 0], "{err}");
            assert_eq!((array.as_str(), *offset), ("empty", 0), "{err}");
            assert_eq!((*parity, *arrivals, *tx_bytes), (0, 128, 0), "{err}");
        }
        _ => panic!("not a deadlock: {err}"),
    }
    // The same kernel fails the same way every time.
    assert_eq!(failure(&wait_first, CONSUME).to_string(), err.to_string());
}

/// Consumers that stop three slices early: the producer runs until its wait for the release of
/// slice 5 of 8 (slot 1, phase 2), which never comes once the consumers are done.
#[test]
fn a_role_left_waiting_alone_deadlocks() {
    let stop_early = CONSUME.replace("for s in 0u32..n {", "for s in 0u32..n - 3 {");
    let c = compile(PRODUCE_STORES, &stop_early, 2);
    let err = run(&c, 8).1.unwrap_err();
    assert!(
        matches!(
            err.kind(),
            ErrorKind::MbarrierDeadlock { array, offset: 8, parity: 0, arrivals: 128, .. }
                if array == "empty"
        ),
        "{err}"
    );
}

#[test]
fn a_block_barrier_inside_a_role_is_divergent() {
    let with_barrier = CONSUME.replace("out[thread.x] = acc;", "barrier();\nout[thread.x] = acc;");
    let err = failure(PRODUCE_TMA, &with_barrier);
    assert!(
        matches!(
            err.kind(),
            ErrorKind::DivergentBarrier {
                arrived: 128,
                expected: 160,
                ..
            }
        ),
        "{err}"
    );
}
