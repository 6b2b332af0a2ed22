//! Tensor-core fragments, ldmatrix, mma, wgmma, cp.async groups and the packed helpers, against
//! plain Rust references; wgmma's shared operands need their writers' `fence_proxy_async()`.

use half::{bf16, f16};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use zinc_dsl::Compilation;
use zinc_interp::{Access, Arg, Buffer, ErrorKind, InterpError, Interpreter, Value};

fn compile(src: &str) -> Compilation {
    zinc_dsl::compile_source("tensor.tile", src, &[], &|_| None)
        .unwrap_or_else(|f| panic!("{}", f.render()))
}

fn launch(c: &Compilation, kernel: &str, args: &mut [Arg]) -> Result<(), InterpError> {
    Interpreter::new(&c.module)
        .sources(&c.sources)
        .launch(kernel, args)
}

/// One warp: C (16 x 8) = 2 A (16 x K) B, B given transposed as bt (8 x K); both tiles go through
/// cp.async, ldmatrix and two accumulating mmas. H is half a row: 16 bytes.
const MMA: &str = "
kernel mma_T(a: global [T], bt: global [T], c: global mut [ACC]) grid(1) block(32) {
    shared sa: [16][K] T;
    shared sb: [8][K] T;
    let row = lane / 2;
    let col = lane % 2 * H;
    cp_async(sa + (row * K + col), a + (row * K + col), 16, true);
    if lane < 16 {
        cp_async(sb + (row * K + col), bt + (row * K + col), 16, true);
    }
    cp_async_commit();
    cp_async_wait(0);
    barrier();
    let fa = ldmatrix_x4(sa + (lane % 16 * K + lane / 16 * H), false);
    let fb = ldmatrix_x2(sb + (lane % 8 * K + lane / 8 % 2 * H), false);
    var acc: frag_acc<ACC> = 0;
    acc = mma(fa, fb, acc);
    acc = mma(fa, fb, acc);
    let r = lane / 4;
    let cc = lane % 4 * 2;
    c[r * 8 + cc] = acc[0];
    c[r * 8 + cc + 1] = acc[1];
    c[(r + 8) * 8 + cc] = acc[2];
    c[(r + 8) * 8 + cc + 1] = acc[3];
}";

fn mma_source(elem: &str, acc: &str, k: usize) -> String {
    MMA.replace("ACC", acc)
        .replace('T', elem)
        .replace('K', &k.to_string())
        .replace('H', &(k / 2).to_string())
}

/// 2 A B^T for A (16 x k) and bt (8 x k), row-major.
fn reference(a: &[f64], bt: &[f64], k: usize) -> Vec<f64> {
    let mut c = vec![0.0; 16 * 8];
    for i in 0..16 {
        for j in 0..8 {
            c[i * 8 + j] = 2.0 * (0..k).map(|kk| a[i * k + kk] * bt[j * k + kk]).sum::<f64>();
        }
    }
    c
}

fn random(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

fn check_float_mma(elem: &str, to_buffer: impl Fn(&[f32]) -> (Buffer, Vec<f64>)) {
    let c = compile(&mma_source(elem, "f32", 16));
    let (a, a64) = to_buffer(&random(16 * 16, 1));
    let (bt, bt64) = to_buffer(&random(8 * 16, 2));
    let mut args = [
        Arg::Buffer(a),
        Arg::Buffer(bt),
        Arg::Buffer(Buffer::from_f32(&[0.0; 128])),
    ];
    launch(&c, &format!("mma_{elem}"), &mut args).unwrap();
    let got = args[2].buffer().unwrap().to_f32();
    for (i, (g, w)) in got.iter().zip(reference(&a64, &bt64, 16)).enumerate() {
        assert!(
            (*g as f64 - w).abs() <= 1e-5 * w.abs().max(1.0),
            "C[{i}]: {g} vs {w}"
        );
    }
}

#[test]
fn f16_mma_fed_by_ldmatrix_matches_the_reference() {
    check_float_mma("f16", |x| {
        let h: Vec<f16> = x.iter().map(|&v| f16::from_f32(v)).collect();
        let exact = h.iter().map(|v| v.to_f64()).collect();
        (Buffer::from_f16(&h), exact)
    });
}

#[test]
fn bf16_mma_fed_by_ldmatrix_matches_the_reference() {
    check_float_mma("bf16", |x| {
        let h: Vec<bf16> = x.iter().map(|&v| bf16::from_f32(v)).collect();
        let exact = h.iter().map(|v| v.to_f64()).collect();
        (Buffer::from_bf16(&h), exact)
    });
}

#[test]
fn s8_mma_is_exact() {
    let c = compile(&mma_source("i8", "i32", 32));
    let mut rng = StdRng::seed_from_u64(3);
    let mut ints = |n| -> Vec<i8> { (0..n).map(|_| rng.random_range(-128..=127)).collect() };
    let (a, bt) = (ints(16 * 32), ints(8 * 32));
    let wide = |v: &[i8]| v.iter().map(|&x| f64::from(x)).collect::<Vec<_>>();
    let want = reference(&wide(&a), &wide(&bt), 32);
    let mut args = [
        Arg::Buffer(Buffer::from_slice(&a)),
        Arg::Buffer(Buffer::from_slice(&bt)),
        Arg::Buffer(Buffer::from_i32(&[0; 128])),
    ];
    launch(&c, "mma_i8", &mut args).unwrap();
    let got: Vec<f64> = args[2]
        .buffer()
        .unwrap()
        .to_i32()
        .iter()
        .map(|&x| f64::from(x))
        .collect();
    assert_eq!(got, want);
}

/// B given as [16][8] row-major (k rows): the transposing ldmatrix makes the B fragment.
const MMA_TRANS: &str = "
kernel mma_trans(a: global [f16], b: global [f16], c: global mut [f32]) grid(1) block(32) {
    shared sa: [16][16] f16;
    shared sb: [16][8] f16;
    cp_async(sa + lane * 8, a + lane * 8, 16, true);
    if lane < 16 {
        cp_async(sb + lane * 8, b + lane * 8, 16, true);
    }
    cp_async_commit();
    cp_async_wait(0);
    barrier();
    let fa = ldmatrix_x4(sa + (lane % 16 * 16 + lane / 16 * 8), false);
    let fb = ldmatrix_x2(sb + lane % 16 * 8, true);
    let acc = mma(fa, fb, 0.5);
    let r = lane / 4;
    let cc = lane % 4 * 2;
    for i in 0..4u32 {
        c[(r + i / 2 * 8) * 8 + cc + i % 2] = select(i == 0, acc[0], select(i == 1, acc[1], select(i == 2, acc[2], acc[3])));
    }
}";

#[test]
fn transposed_ldmatrix_gives_the_b_fragment_of_a_row_major_b() {
    let c = compile(MMA_TRANS);
    let a: Vec<f16> = random(256, 4).iter().map(|&v| f16::from_f32(v)).collect();
    let b: Vec<f16> = random(128, 5).iter().map(|&v| f16::from_f32(v)).collect();
    let mut args = [
        Arg::Buffer(Buffer::from_f16(&a)),
        Arg::Buffer(Buffer::from_f16(&b)),
        Arg::Buffer(Buffer::from_f32(&[0.0; 128])),
    ];
    launch(&c, "mma_trans", &mut args).unwrap();
    let got = args[2].buffer().unwrap().to_f32();
    for i in 0..16 {
        for j in 0..8 {
            let want: f64 = 0.5
                + (0..16)
                    .map(|k| a[i * 16 + k].to_f64() * b[k * 8 + j].to_f64())
                    .sum::<f64>();
            let g = got[i * 8 + j] as f64;
            assert!((g - want).abs() <= 1e-5, "C[{i}][{j}]: {g} vs {want}");
        }
    }
}

const EARLY_READ: &str = "
kernel early(x: global [f32], y: global mut [f32]) grid(1) block(32) {
    shared s: [32] f32;
    cp_async(s + lane, x + lane, 4, true);
    cp_async_commit();
    WAIT
    y[lane] = s[lane];
}";

#[test]
fn reading_a_copy_before_its_wait_is_an_error_naming_both_lines() {
    let xs: Vec<f32> = (0..32).map(|i| i as f32).collect();
    let args = || {
        [
            Arg::Buffer(Buffer::from_f32(&xs)),
            Arg::Buffer(Buffer::from_f32(&[0.0; 32])),
        ]
    };
    let c = compile(&EARLY_READ.replace("WAIT", ""));
    let err = launch(&c, "early", &mut args()).unwrap_err();
    let ErrorKind::CopyInFlight {
        array,
        index,
        access,
        issued,
        ..
    } = err.kind()
    else {
        panic!("expected a copy in flight, got: {err}");
    };
    assert_eq!((array.as_str(), *index, *access), ("s", 0, Access::Read));
    assert_eq!(issued.at.line_col.unwrap().0, 4);
    assert_eq!(err.location().unwrap().line_col.unwrap().0, 7);

    // A wait that leaves the group in flight does not help either.
    let c = compile(&EARLY_READ.replace("WAIT", "cp_async_wait(1);"));
    assert!(launch(&c, "early", &mut args()).is_err());

    let c = compile(&EARLY_READ.replace("WAIT", "cp_async_wait(0);"));
    let mut done = args();
    launch(&c, "early", &mut done).unwrap();
    assert_eq!(done[1].buffer().unwrap().to_f32(), xs);
}

#[test]
fn another_threads_copy_needs_a_barrier_after_the_wait() {
    let src = "
kernel neighbour(x: global [f32], y: global mut [f32]) grid(1) block(32) {
    shared s: [32] f32;
    cp_async(s + lane, x + lane, 4, true);
    cp_async_commit();
    cp_async_wait(0);
    BARRIER
    y[lane] = s[31 - lane];
}";
    let xs: Vec<f32> = (0..32).map(|i| i as f32).collect();
    let args = || {
        [
            Arg::Buffer(Buffer::from_f32(&xs)),
            Arg::Buffer(Buffer::from_f32(&[0.0; 32])),
        ]
    };
    let c = compile(&src.replace("BARRIER", ""));
    let err = launch(&c, "neighbour", &mut args()).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::SharedRace { .. }), "{err}");
    let c = compile(&src.replace("BARRIER", "barrier();"));
    let mut done = args();
    launch(&c, "neighbour", &mut done).unwrap();
    let want: Vec<f32> = xs.iter().rev().copied().collect();
    assert_eq!(done[1].buffer().unwrap().to_f32(), want);
}

#[test]
fn invalid_copies_fill_zeros_without_reading_the_source() {
    let src = "
kernel ragged(x: global [f32], y: global mut [f32], n: u32) grid(1) block(32) {
    shared s: [32] f32;
    // Out-of-range lanes point past the end of x, which is never read.
    cp_async(s + lane, x + lane, 4, lane < n);
    cp_async_commit();
    cp_async_wait(0);
    y[lane] = s[lane];
}";
    let c = compile(src);
    let mut args = [
        Arg::Buffer(Buffer::from_f32(&[7.0; 20])),
        Arg::Buffer(Buffer::from_f32(&[1.0; 32])),
        Arg::Scalar(Value::U32(20)),
    ];
    launch(&c, "ragged", &mut args).unwrap();
    let got = args[1].buffer().unwrap().to_f32();
    assert_eq!(&got[..20], &[7.0; 20]);
    assert_eq!(&got[20..], &[0.0; 12]);
}

#[test]
fn misaligned_copies_are_errors() {
    let src = "
kernel skew(x: global [f32], y: global mut [f32]) grid(1) block(1) {
    shared s: [8] f32;
    cp_async(s + 1, x, 16, true);
    cp_async_commit();
    cp_async_wait(0);
    y[0] = s[1];
}";
    let c = compile(src);
    let mut args = [
        Arg::Buffer(Buffer::from_f32(&[0.0; 8])),
        Arg::Buffer(Buffer::from_f32(&[0.0; 1])),
    ];
    let err = launch(&c, "skew", &mut args).unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Misaligned { align: 16, .. }),
        "{err}"
    );
}

/// A view's bitcast keeps its address: pairs of f32 loaded, stored to shared memory and back
/// out as one access each land where their elements would.
#[test]
fn view_bitcasts_move_whole_vectors() {
    let src = "
kernel pairs(x: global [f32], y: global mut [f32]) grid(1) block(32) {
    shared s: [64] f32;
    let two = bitcast<global [f32x2]>(x + 2 * lane)[0];
    bitcast<shared mut [f32x2]>(s + 2 * lane)[0] = two * f32x2(2.0, 2.0);
    barrier();
    bitcast<global mut [f32x2]>(y + 2 * lane)[0] = f32x2(s[63 - lane], s[lane]);
}";
    let c = compile(src);
    let mut rng = StdRng::seed_from_u64(26);
    let x: Vec<f32> = (0..64).map(|_| rng.random_range(0.5f32..4.0)).collect();
    let mut args = [
        Arg::ReadOnly(Buffer::from_f32(&x)),
        Arg::Buffer(Buffer::from_f32(&[f32::NAN; 64])),
    ];
    launch(&c, "pairs", &mut args).unwrap();
    let y = args[1].buffer().unwrap().to_f32();
    for l in 0..32 {
        assert_eq!(y[2 * l], 2.0 * x[63 - l], "lane {l}");
        assert_eq!(y[2 * l + 1], 2.0 * x[l], "lane {l}");
    }
}

/// A wide access off its alignment faults on the GPU: the interpreter says so.
#[test]
fn misaligned_wide_accesses_are_errors() {
    let src = "
kernel skew(x: global [f32], y: global mut [f32]) grid(1) block(1) {
    bitcast<global mut [f32x2]>(y + 1)[0] = f32x2(x[0], x[1]);
}";
    let c = compile(src);
    let mut args = [
        Arg::ReadOnly(Buffer::from_f32(&[1.0; 2])),
        Arg::Buffer(Buffer::from_f32(&[0.0; 4])),
    ];
    let err = launch(&c, "skew", &mut args).unwrap_err();
    assert!(
        matches!(
            err.kind(),
            ErrorKind::Misaligned {
                align: 8,
                offset: 4,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn prmt_lop3_and_bitcast_follow_ptx() {
    let src = "
kernel bits(x: global [u32], y: global mut [u32]) grid(1) block(1) {
    y[0] = prmt(x[0], x[1], 0x5140u32);
    y[1] = prmt(x[0], x[1], 0x000Bu32);
    y[2] = lop3(x[0], x[1], x[2], 0xE8);
    let h = bitcast<f16x2>(x[3]);
    y[3] = bitcast<u32>(h * h);
    y[4] = bitcast<u32>(fma(h, h, h));
}";
    let c = compile(src);
    let one_two =
        u32::from(f16::from_f32(1.5).to_bits()) | u32::from(f16::from_f32(-2.0).to_bits()) << 16;
    let x = [0x4433_2211u32, 0x8877_6655, 0x0f0f_0f0f, one_two];
    let mut args = [
        Arg::Buffer(Buffer::from_u32(&x)),
        Arg::Buffer(Buffer::from_u32(&[0; 5])),
    ];
    launch(&c, "bits", &mut args).unwrap();
    let y = args[1].buffer().unwrap().to_u32();
    // Selector 0x5140: bytes a0, b0, a1, b1 interleaved.
    assert_eq!(y[0], 0x6622_5511);
    // Nibble 0xB: byte 3 (0x44) with its sign replicated (0x00); the rest select a0 = 0x11.
    assert_eq!(y[1], 0x1111_1100);
    // 0xE8 is the majority function.
    let maj = (x[0] & x[1]) | (x[0] & x[2]) | (x[1] & x[2]);
    assert_eq!(y[2], maj);
    let pair = |lo: f32, hi: f32| {
        u32::from(f16::from_f32(lo).to_bits()) | u32::from(f16::from_f32(hi).to_bits()) << 16
    };
    assert_eq!(y[3], pair(2.25, 4.0));
    assert_eq!(y[4], pair(3.75, 2.0));
}

#[test]
fn dp4a_sums_byte_products_like_ptx() {
    let src = "
kernel dots(a: global [u32], b: global [u32], c: global [i32], s: global mut [i32],
            u: global mut [i32]) grid(1) block(64) {
    s[thread.x] = dp4a(a[thread.x], b[thread.x], c[thread.x]);
    u[thread.x] = dp4a_us(a[thread.x], b[thread.x], c[thread.x]);
}";
    let c = compile(src);
    let mut rng = StdRng::seed_from_u64(9);
    let n = 64;
    let mut a: Vec<u32> = (0..n).map(|_| rng.random()).collect();
    let b: Vec<u32> = (0..n).map(|_| rng.random()).collect();
    let mut acc: Vec<i32> = (0..n).map(|_| rng.random()).collect();
    // The extremes: every byte -128 (or 255 unsigned) times -128, and an accumulator that wraps.
    a[0] = 0x8080_8080;
    acc[1] = i32::MAX;
    let mut args = [
        Arg::Buffer(Buffer::from_u32(&a)),
        Arg::Buffer(Buffer::from_u32(&b)),
        Arg::Buffer(Buffer::from_i32(&acc)),
        Arg::Buffer(Buffer::from_i32(&vec![0; n])),
        Arg::Buffer(Buffer::from_i32(&vec![0; n])),
    ];
    launch(&c, "dots", &mut args).unwrap();
    let (signed, unsigned) = (
        args[3].buffer().unwrap().to_i32(),
        args[4].buffer().unwrap().to_i32(),
    );
    for i in 0..n {
        let (x, y) = (a[i].to_le_bytes(), b[i].to_le_bytes());
        let (mut ss, mut us) = (i64::from(acc[i]), i64::from(acc[i]));
        for k in 0..4 {
            ss += i64::from(x[k] as i8) * i64::from(y[k] as i8);
            us += i64::from(x[k]) * i64::from(y[k] as i8);
        }
        assert_eq!(signed[i], ss as i32, "dp4a #{i}");
        assert_eq!(unsigned[i], us as i32, "dp4a_us #{i}");
    }
}

/// examples/mma_array.tile: a 2 x 2 register array of accumulators, filled by unrolled loops.
#[test]
fn register_array_of_accumulators_matches_the_reference() {
    let c = compile(include_str!("../../examples/mma_array.tile"));
    let half = |x: Vec<f32>| -> Vec<f16> { x.iter().map(|&v| f16::from_f32(v)).collect() };
    let (a, bt) = (half(random(32 * 16, 4)), half(random(16 * 16, 5)));
    let reps = 3;
    let mut args = [
        Arg::Buffer(Buffer::from_f16(&a)),
        Arg::Buffer(Buffer::from_f16(&bt)),
        Arg::Buffer(Buffer::from_f32(&[0.0; 32 * 16])),
        Arg::Scalar(Value::U32(reps)),
    ];
    launch(&c, "mma_array", &mut args).unwrap();
    let got = args[2].buffer().unwrap().to_f32();
    for i in 0..32 {
        for j in 0..16 {
            let dot: f64 = (0..16)
                .map(|k| a[i * 16 + k].to_f64() * bt[j * 16 + k].to_f64())
                .sum();
            let want = f64::from(reps) * dot;
            let g = f64::from(got[i * 16 + j]);
            assert!(
                (g - want).abs() <= 1e-5 * want.abs().max(1.0),
                "C[{i}][{j}]: {g} vs {want}"
            );
        }
    }
}

/// One warpgroup, two wgmmas in flight on one accumulator row: `EARLY` reads or writes a register
/// before the wait, `WAIT` is the wait.
const WGMMA_IN_FLIGHT: &str = "
kernel early(b: global [f16], d: global mut [f32]) grid(1) block(128) {
    shared bs: [8][64] f16 swizzle;
    for i in thread.x..512 step 128 { bs[i / 64][i % 64] = b[i]; }
    fence_proxy_async();
    barrier();
    var fa: [2] frag_a<f16> = 1.0;
    var acc: [1] frag_acc<f32> = 0;
    wgmma_fence();
    wgmma(acc, fa[0], bs[0][0]);
    wgmma(acc, fa[1], bs[0][16]);
    wgmma_commit();
    EARLY
    WAIT
    d[thread.x] = acc[0][0];
}";

#[test]
fn registers_of_a_wgmma_in_flight_are_off_limits_until_its_wait() {
    let b: Vec<f16> = (0..512).map(|i| f16::from_f32((i % 7) as f32)).collect();
    let run = |early: &str, wait: &str| {
        let src = WGMMA_IN_FLIGHT
            .replace("EARLY", early)
            .replace("WAIT", wait);
        let c = compile(&src);
        let mut args = [
            Arg::Buffer(Buffer::from_f16(&b)),
            Arg::Buffer(Buffer::from_f32(&[0.0; 128])),
        ];
        launch(&c, "early", &mut args).map(|()| args[1].buffer().unwrap().to_f32())
    };
    let in_flight = |r: Result<Vec<f32>, InterpError>| match r {
        Err(e) => match e.kind() {
            ErrorKind::WgmmaInFlight {
                var, access, role, ..
            } => (var.clone(), *access, *role),
            _ => panic!("expected a wgmma in flight, got: {e}"),
        },
        Ok(_) => panic!("expected a wgmma in flight, the kernel ran"),
    };
    // Reading the accumulators before any wait, or with the group still allowed in flight.
    let read = (String::from("acc"), Access::Read, "accumulator");
    assert_eq!(in_flight(run("", "")), read);
    assert_eq!(in_flight(run("", "wgmma_wait(1);")), read);
    // Rewriting an A fragment in flight; reading it is fine.
    let write_a = (String::from("fa"), Access::Write, "A operand");
    assert_eq!(in_flight(run("fa[1] = fa[0];", "wgmma_wait(0);")), write_a);
    // After the wait: B's row 0 (0..7 repeating) times 32 ones.
    let d = run("", "wgmma_wait(0);").unwrap();
    let row0: f32 = (0..32).map(|k| (k % 7) as f32).sum();
    assert_eq!(d[0], row0);
}

/// WGMMA_IN_FLIGHT's staging of B.
const STORED_B: &str = "for i in thread.x..512 step 128 { bs[i / 64][i % 64] = b[i]; }";
/// The same by `cp_async` (threads 0..63 a 16-byte chunk each), landed by the wait.
const COPIED_B: &str = "if thread.x < 64 {
        cp_async(bs[thread.x / 8][thread.x % 8 * 8], b + thread.x * 8, 16, true);
    }
    cp_async_commit();
    cp_async_wait(0);";
/// WGMMA_IN_FLIGHT's fence for the async proxy and the barrier after it.
const FENCED: &str = "fence_proxy_async();\n    barrier();";

/// wgmma reads B through the async proxy, which sees a thread's stores, and the copies its
/// `cp_async_wait` lands, only after a `fence_proxy_async()` of that thread that follows them and
/// precedes the barrier before the MMA. With B stored or copied and fenced, thread t's first
/// accumulator is the sum of B row 2 (t % 4)'s first 32 elements (A is all ones); without the
/// fence, the wgmma names the first element it may read stale: thread 0's own for a missing
/// fence or one before the copy lands, thread 1's with the fences after the barrier (thread 0's
/// own still precedes the MMA).
#[test]
fn wgmma_of_shared_operands_not_fenced_for_the_async_proxy_is_an_error() {
    let mut rng = StdRng::seed_from_u64(11);
    // Never zero, so that a missing element cannot pass for a present one.
    let b: Vec<f16> = (0..512)
        .map(|_| {
            f16::from_f32(rng.random_range(0.5f32..2.0) * if rng.random() { 1.0 } else { -1.0 })
        })
        .collect();
    let run = |edits: &[(&str, &str)]| {
        let src = edits.iter().fold(
            WGMMA_IN_FLIGHT
                .replace("EARLY", "")
                .replace("WAIT", "wgmma_wait(0);"),
            |t, (from, to)| t.replace(from, to),
        );
        let c = compile(&src);
        let mut args = [
            Arg::Buffer(Buffer::from_f16(&b)),
            Arg::Buffer(Buffer::from_f32(&[0.0; 128])),
        ];
        let result = launch(&c, "early", &mut args);
        (src, result.map(|()| args[1].buffer().unwrap().to_f32()))
    };
    for staging in [STORED_B, COPIED_B] {
        let (_, d) = run(&[(STORED_B, staging)]);
        let d = d.unwrap_or_else(|e| panic!("{staging}: {e}"));
        for (t, &got) in d.iter().enumerate() {
            let row = 2 * (t % 4) * 64;
            let want: f64 = b[row..row + 32].iter().map(|x| x.to_f64()).sum();
            assert!(
                (f64::from(got) - want).abs() <= 1e-5 * want.abs().max(1.0),
                "{staging}: thread {t}: {got} vs {want}"
            );
        }
    }
    let after_barrier = (FENCED, "barrier();\n    fence_proxy_async();");
    let cases = [
        (
            STORED_B,
            (FENCED, "barrier();"),
            0,
            "bs[i / 64][i % 64] = b[i];",
        ),
        (STORED_B, after_barrier, 1, "bs[i / 64][i % 64] = b[i];"),
        (COPIED_B, (FENCED, "barrier();"), 0, "cp_async(bs"),
        (
            COPIED_B,
            (
                "cp_async_wait(0);\n    fence_proxy_async();",
                "fence_proxy_async();\n    cp_async_wait(0);",
            ),
            0,
            "cp_async(bs",
        ),
        (COPIED_B, after_barrier, 1, "cp_async(bs"),
    ];
    for (staging, fence, writer, write) in cases {
        let (src, result) = run(&[(STORED_B, staging), fence]);
        let err = result.unwrap_err();
        let ErrorKind::UnfencedWrite {
            op,
            thread,
            array,
            index,
            write: unfenced,
        } = err.kind()
        else {
            panic!("{fence:?}: expected an unfenced write, got: {err}");
        };
        let line = |needle: &str| src[..src.find(needle).unwrap()].lines().count();
        // Row 0 of B, which the swizzle leaves in place: threads 0 and 1 wrote elements 0 and 1
        // (copied: elements 0..8 and 8..16).
        let index_of_writer = if staging == STORED_B { 1 } else { 8 };
        assert_eq!(
            (*op, array.as_str(), *index, thread.thread[0]),
            ("wgmma", "bs", writer * index_of_writer, 0),
            "{err}"
        );
        assert_eq!(unfenced.thread.thread[0], writer as u32, "{err}");
        assert_eq!(unfenced.at.line_col.unwrap().0, line(write), "{err}");
        assert_eq!(
            err.location().unwrap().line_col.unwrap().0,
            line("wgmma(acc, fa[0]"),
            "{err}"
        );
    }
}
