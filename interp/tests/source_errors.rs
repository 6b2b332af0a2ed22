//! Kernel bugs in real source, reported at the right line.

use zinc_dsl::Compilation;
use zinc_interp::{Access, Arg, Buffer, ErrorKind, InterpError, Interpreter, Value};

fn compile(text: &str) -> Compilation {
    zinc_dsl::compile_source("bug.tile", text, &[], &|_| None)
        .unwrap_or_else(|f| panic!("{}", f.render()))
}

fn launch(text: &str, kernel: &str, args: &mut [Arg]) -> Result<(), InterpError> {
    let c = compile(text);
    Interpreter::new(&c.module)
        .sources(&c.sources)
        .launch(kernel, args)
}

fn line_of(err: &InterpError) -> usize {
    err.location().and_then(|l| l.line_col).expect("a line").0
}

const REVERSE: &str = "
kernel reverse(x: global [f32], y: global mut [f32])
    grid(1) block(64)
{
    shared s: [64] f32;
    s[thread.x] = x[thread.x];
    BARRIER
    y[thread.x] = s[63 - thread.x];
}
";

#[test]
fn missing_barrier_is_a_race() {
    let xs: Vec<f32> = (0..64).map(|i| i as f32).collect();
    let mut args = vec![
        Arg::ReadOnly(Buffer::from_f32(&xs)),
        Arg::Buffer(Buffer::from_f32(&[0.0; 64])),
    ];
    let err = launch(&REVERSE.replace("BARRIER", ""), "reverse", &mut args).unwrap_err();
    let ErrorKind::SharedRace {
        array,
        index,
        thread,
        access,
        earlier,
    } = err.kind()
    else {
        panic!("expected a race, got: {err}");
    };
    assert_eq!((array.as_str(), *index), ("s", 63));
    assert_eq!(
        (earlier.thread.thread, earlier.access),
        ([63, 0, 0], Access::Write)
    );
    assert_eq!((thread.thread, *access), ([0, 0, 0], Access::Read));
    assert_eq!(earlier.at.line_col.unwrap().0, 6);
    assert_eq!(line_of(&err), 8);
    let sources = compile(&REVERSE.replace("BARRIER", "")).sources;
    let shown = zinc_dsl::render(&err.to_diagnostic(), &sources);
    assert!(
        shown.contains("8 |     y[thread.x] = s[63 - thread.x];"),
        "{shown}"
    );
    assert!(
        shown.contains("note: the earlier write by thread (63, 0, 0)"),
        "{shown}"
    );

    launch(
        &REVERSE.replace("BARRIER", "barrier();"),
        "reverse",
        &mut args,
    )
    .unwrap();
    let want: Vec<f32> = xs.iter().rev().copied().collect();
    assert_eq!(args[1].buffer().unwrap().to_f32(), want);
}

#[test]
fn barrier_in_half_the_block() {
    let src = "
kernel k(y: global mut [u32]) grid(1) block(64) {
    if thread.x < 32 {
        barrier();
    }
    y[thread.x] = 1;
}
";
    let mut args = vec![Arg::Buffer(Buffer::from_u32(&[0; 64]))];
    let err = launch(src, "k", &mut args).unwrap_err();
    assert!(
        matches!(
            err.kind(),
            ErrorKind::DivergentBarrier {
                arrived: 32,
                expected: 64,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(line_of(&err), 4);
}

#[test]
fn shuffle_from_an_exited_lane() {
    let src = "
kernel k(x: global [f32], y: global mut [f32], n: u32) grid(1) block(32) {
    if thread.x >= n {
        return;
    }
    y[thread.x] = x[thread.x] + shfl_down(x[thread.x], 16u32);
}
";
    let mut args = vec![
        Arg::ReadOnly(Buffer::from_f32(&[1.0; 32])),
        Arg::Buffer(Buffer::from_f32(&[0.0; 32])),
        Arg::Scalar(Value::U32(20)),
    ];
    let err = launch(src, "k", &mut args).unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::ShuffleFromExited { lane: 20, .. }),
        "{err}"
    );
    assert_eq!(line_of(&err), 6);
    // With every lane live the same kernel is fine.
    args[2] = Arg::Scalar(Value::U32(32));
    launch(src, "k", &mut args).unwrap();
}

#[test]
fn intrinsics_and_inline_ptx() {
    let src = r#"
kernel k(y: global mut [u32]) grid(1) block(64) {
    let t = intrinsic<u32>("llvm.nvvm.read.ptx.sreg.tid.x");
    y[t] = t * 2u32;
}

kernel a(y: global mut [u32]) grid(1) block(64) {
    y[thread.x] = asm<u32>("mov.u32 $0, %laneid;", "=r");
}
"#;
    let mut args = vec![Arg::Buffer(Buffer::from_u32(&[0; 64]))];
    launch(src, "k", &mut args).unwrap();
    let want: Vec<u32> = (0..64).map(|t| t * 2).collect();
    assert_eq!(args[0].buffer().unwrap().to_u32(), want);
    let err = launch(src, "a", &mut args).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Unsupported { .. }), "{err}");
    assert_eq!(line_of(&err), 8);
    assert!(err.to_string().starts_with("bug.tile:8:"), "{err}");
}

const WIDE_COPY: &str = "
kernel wide_copy(w: global [u32x4], y: global mut [u32])
    grid(1) block(2)
{
    let v = w[thread.x];
    y[4 * thread.x] = v.x;
    y[4 * thread.x + 1] = v.y;
    y[4 * thread.x + 2] = v.z;
    y[4 * thread.x + 3] = v.w;
}
";

#[test]
fn vector_view_takes_a_buffer_of_its_scalar() {
    let words: Vec<u32> = (0..8).map(|i| 0x0101_0101 * i + 7).collect();
    let mut args = vec![
        Arg::ReadOnly(Buffer::from_slice(&words)),
        Arg::Buffer(Buffer::from_slice(&[0u32; 8])),
    ];
    launch(WIDE_COPY, "wide_copy", &mut args).unwrap();
    assert_eq!(args[1].buffer().unwrap().to_u32(), words);

    // A length that is not a whole number of vectors is still refused.
    let mut ragged = vec![
        Arg::ReadOnly(Buffer::from_slice(&words[..7])),
        Arg::Buffer(Buffer::from_slice(&[0u32; 8])),
    ];
    let err = launch(WIDE_COPY, "wide_copy", &mut ragged).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::ArgType { .. }), "{err}");
    // And a buffer of another scalar type.
    let mut other = vec![
        Arg::ReadOnly(Buffer::from_f32(&[0.0; 8])),
        Arg::Buffer(Buffer::from_slice(&[0u32; 8])),
    ];
    let err = launch(WIDE_COPY, "wide_copy", &mut other).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::ArgType { .. }), "{err}");
}

#[test]
fn a_vector_array_fill_sets_every_lane() {
    let src = "
kernel k(y: global mut [f32x4]) grid(1) block(32) {
    var v: [2] f32x4 = 1.5;
    v[1] = v[1] * f32x4(1.0, 2.0, 3.0, 4.0);
    for i in 0u32..2 unroll { y[2 * thread.x + i] = v[i]; }
}
";
    let mut args = vec![Arg::Buffer(Buffer::from_f32(&[0.0; 256]))];
    launch(src, "k", &mut args).unwrap();
    let y = args[0].buffer().unwrap().to_f32();
    for t in 0..32 {
        assert_eq!(
            y[8 * t..8 * t + 8],
            [1.5, 1.5, 1.5, 1.5, 1.5, 3.0, 4.5, 6.0]
        );
    }
}

#[test]
fn warp_sync_needs_the_whole_warp() {
    let src = r#"
kernel k(y: global mut [u32], n: u32) grid(1) block(64) {
    if thread.x < n {
        intrinsic<void>("llvm.nvvm.bar.warp.sync", 0xFFFFFFFFu32);
    }
    y[thread.x] = thread.x;
}

kernel partial(y: global mut [u32]) grid(1) block(32) {
    intrinsic<void>("llvm.nvvm.bar.warp.sync", 0xFFFFu32);
    y[thread.x] = thread.x;
}
"#;
    let mut args = vec![
        Arg::Buffer(Buffer::from_u32(&[0; 64])),
        Arg::Scalar(Value::U32(64)),
    ];
    launch(src, "k", &mut args).unwrap();
    // Whole warps (the first) pass; lanes 48..64 of the second miss it.
    args[1] = Arg::Scalar(Value::U32(48));
    let err = launch(src, "k", &mut args).unwrap_err();
    assert!(
        matches!(
            err.kind(),
            ErrorKind::DivergentWarp {
                warp: 1,
                missing_lane: 16,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(line_of(&err), 4);
    args[1] = Arg::Scalar(Value::U32(32));
    launch(src, "k", &mut args).unwrap();
    let err = launch(src, "partial", &mut args[..1]).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Unsupported { .. }), "{err}");
}

/// `atomic_add` on f16, through a type parameter: every thread's addition lands, rounded.
#[test]
fn half_atomics_add_up() {
    let text = "kernel sum<E: type = f16>(y: global mut [E]) grid(2) block(64) {
        atomic_add(y[thread.x % 2], 0.25 as E);
    }";
    let mut args = vec![Arg::Buffer(Buffer::from_f16(
        &[half::f16::from_f32(1.0); 2],
    ))];
    launch(text, "sum", &mut args).unwrap();
    let seventeen = half::f16::from_f32(17.0);
    assert_eq!(args[0].buffer().unwrap().to_f16(), [seventeen; 2]);
}
