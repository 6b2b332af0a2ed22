//! Kernels built directly as IR, covering control flow, memory checks and warp operations.

mod common;

use common::*;
use zinc_dsl::ir::*;
use zinc_interp::{interpret, Access, Arg, Buffer, ErrorKind, Interpreter, Value};

/// `c[i] = a[i] + b[i]` for `i < n`; with `guard` false the bounds check is left out.
fn vector_add(guard: bool) -> Module {
    let mut f = Fb::default();
    let a = f.param("a", view(Scalar::F32, false));
    let b = f.param("b", view(Scalar::F32, false));
    let c = f.param("c", view(Scalar::F32, true));
    let n = f.param("n", u32t());
    let i = f.local("i", u32t());
    let body_store = store(
        c,
        i.clone(),
        add(at(load(a, i.clone()), line(7)), load(b, i.clone())),
        line(7),
    );
    let body = vec![
        let_(&i, add(bin(BinOp::Mul, bid(), cu(256)), tid())),
        if guard {
            if_(lt(i, n.clone()), vec![body_store], vec![])
        } else {
            body_store
        },
    ];
    let grid = bin(BinOp::Div, add(n, cu(255)), cu(256));
    module(vec![f.kernel("vector_add", [256, 1, 1], grid1(grid), body)])
}

fn random(n: usize, seed: u32) -> Vec<f32> {
    // A small LCG keeps the test free of platform-dependent generators.
    let mut s = seed.wrapping_mul(2654435761).wrapping_add(1);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1664525).wrapping_add(1013904223);
            (s >> 8) as f32 / (1 << 24) as f32 * 2.0 - 1.0
        })
        .collect()
}

#[test]
fn vector_add_ragged() {
    let m = vector_add(true);
    let (a, b) = (random(1000, 1), random(1000, 2));
    let mut args = vec![
        Arg::ReadOnly(Buffer::from_f32(&a)),
        Arg::ReadOnly(Buffer::from_f32(&b)),
        Arg::Buffer(Buffer::from_f32(&vec![0.0; 1000])),
        Arg::Scalar(Value::U32(1000)),
    ];
    let interp = Interpreter::new(&m);
    assert_eq!(interp.grid("vector_add", &args).unwrap(), [4, 1, 1]);
    interp.launch("vector_add", &mut args).unwrap();
    let c = args[2].buffer().unwrap().to_f32();
    for i in 0..1000 {
        assert_eq!(c[i], a[i] + b[i], "element {i}");
    }
}

#[test]
fn stats_count_statements_per_thread_that_runs_them() {
    let m = vector_add(true);
    let mut args = vec![
        Arg::ReadOnly(Buffer::from_f32(&[1.0; 1000])),
        Arg::ReadOnly(Buffer::from_f32(&[2.0; 1000])),
        Arg::Buffer(Buffer::from_f32(&[0.0; 1000])),
        Arg::Scalar(Value::U32(1000)),
    ];
    let stats = Interpreter::new(&m)
        .run_with_stats("vector_add", [4, 1, 1], [256, 1, 1], &mut args)
        .unwrap();
    // Every one of the 1024 threads runs the `let` and the `if`; the 1000 below n store.
    assert_eq!(stats.thread_steps, 1024 + 1024 + 1000);
}

#[test]
fn out_of_bounds_names_buffer_index_and_line() {
    let m = vector_add(false);
    let mut args = vec![
        Arg::Buffer(Buffer::from_f32(&[1.0; 300])),
        Arg::Buffer(Buffer::from_f32(&[1.0; 300])),
        Arg::Buffer(Buffer::from_f32(&[0.0; 300])),
        Arg::Scalar(Value::U32(300)),
    ];
    let src = sources();
    let err = Interpreter::new(&m)
        .sources(&src)
        .run("vector_add", [2, 1, 1], [256, 1, 1], &mut args)
        .unwrap_err();
    match err.kind() {
        ErrorKind::OutOfBounds {
            buffer,
            index,
            len,
            access,
            ..
        } => {
            assert_eq!(
                (buffer.as_str(), *index, *len, *access),
                ("a", 300, 300, Access::Read)
            );
        }
        e => panic!("unexpected error: {e}"),
    }
    assert_eq!(err.location().unwrap().line_col, Some((7, 1)));
    let msg = err.to_string();
    assert!(
        msg.starts_with("test.tile:7:1: out-of-bounds read of global buffer `a`"),
        "{msg}"
    );
    assert!(
        msg.contains("thread (44, 0, 0) of block (1, 0, 0)"),
        "{msg}"
    );
}

#[test]
fn arguments_are_checked() {
    let m = vector_add(true);
    let buf = || Buffer::from_f32(&[0.0; 4]);
    let run = |mut args: Vec<Arg>| interpret(&m, "vector_add", [1, 1, 1], [4, 1, 1], &mut args);
    let err = run(vec![Arg::Buffer(buf())]).unwrap_err();
    assert!(
        matches!(
            err.kind(),
            ErrorKind::ArgCount {
                expected: 4,
                got: 1,
                ..
            }
        ),
        "{err}"
    );

    let ints = Arg::Buffer(Buffer::from_u32(&[0; 4]));
    let err = run(vec![
        ints,
        Arg::Buffer(buf()),
        Arg::Buffer(buf()),
        Arg::Scalar(Value::U32(4)),
    ]);
    let msg = err.unwrap_err().to_string();
    assert_eq!(
        msg,
        "argument 0 (`a`) of kernel `vector_add`: expected global [f32], got a buffer of u32"
    );

    let read_only_out = vec![
        Arg::Buffer(buf()),
        Arg::Buffer(buf()),
        Arg::ReadOnly(buf()),
        Arg::Scalar(Value::U32(4)),
    ];
    let msg = run(read_only_out).unwrap_err().to_string();
    assert!(
        msg.contains("expected global mut [f32], got a read-only buffer"),
        "{msg}"
    );

    let wrong_scalar = vec![
        Arg::Buffer(buf()),
        Arg::Buffer(buf()),
        Arg::Buffer(buf()),
        Arg::Scalar(Value::I32(4)),
    ];
    let msg = run(wrong_scalar).unwrap_err().to_string();
    assert!(msg.contains("expected u32, got a scalar i32"), "{msg}");

    let err = interpret(&m, "nope", [1; 3], [1; 3], &mut []).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::NoKernel(_)));
    let mut args = vec![
        Arg::Buffer(buf()),
        Arg::Buffer(buf()),
        Arg::Buffer(buf()),
        Arg::Scalar(Value::U32(4)),
    ];
    let err = interpret(&m, "vector_add", [1; 3], [512, 1, 1], &mut args).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Launch { .. }), "{err}");
}

/// `out[t]` = sum of k for k < thread.x (while loop with break), plus the odd i in 0..10 when
/// thread.x is even (for loop with continue); threads >= 20 return before storing.
#[test]
fn loops_with_break_continue_and_return() {
    let mut f = Fb::default();
    let out = f.param("out", view(Scalar::U32, true));
    let s = f.local("s", u32t());
    let k = f.local("k", u32t());
    let i = f.local("i", u32t());
    let body = vec![
        if_(
            bin(BinOp::Ge, tid(), cu(20)),
            vec![stmt(StmtKind::Return(None))],
            vec![],
        ),
        let_(&s, cu(0)),
        let_(&k, cu(0)),
        stmt(StmtKind::While {
            cond: cb(true),
            body: vec![
                if_(eq(k.clone(), tid()), vec![stmt(StmtKind::Break)], vec![]),
                assign(&s, add(s.clone(), k.clone())),
                assign(&k, add(k.clone(), cu(1))),
            ],
        }),
        stmt(StmtKind::For {
            var: var_id(&i),
            start: cu(0),
            end: cu(10),
            step: cu(1),
            body: vec![
                if_(
                    eq(
                        bin(BinOp::Rem, i.clone(), cu(2)),
                        bin(BinOp::Rem, tid(), cu(2)),
                    ),
                    vec![stmt(StmtKind::Continue)],
                    vec![],
                ),
                assign(&s, add(s.clone(), i.clone())),
            ],
        }),
        store(out, tid(), s, line(1)),
    ];
    let m = module(vec![f.kernel("loops", [32, 1, 1], grid1(cu(1)), body)]);
    let mut args = vec![Arg::Buffer(Buffer::from_u32(&[7; 32]))];
    interpret(&m, "loops", [1; 3], [32, 1, 1], &mut args).unwrap();
    let got = args[0].buffer().unwrap().to_u32();
    for t in 0..32u32 {
        let odd_sum = if t % 2 == 0 {
            1 + 3 + 5 + 7 + 9
        } else {
            2 + 4 + 6 + 8
        };
        let want = if t >= 20 {
            7
        } else {
            t * (t.max(1) - 1) / 2 + odd_sum
        };
        assert_eq!(got[t as usize], want, "thread {t}");
    }
}

#[test]
fn barrier_in_divergent_code_is_an_error() {
    let mut f = Fb::default();
    let body = vec![if_(
        lt(tid(), cu(16)),
        vec![st(StmtKind::Barrier, line(3))],
        vec![],
    )];
    let m = module(vec![f_kernel(&mut f, "bar", body)]);
    let src = sources();
    let err = Interpreter::new(&m)
        .sources(&src)
        .run("bar", [1; 3], [64, 1, 1], &mut [])
        .unwrap_err();
    let msg = err.to_string();
    assert_eq!(
        msg,
        "test.tile:3:1: barrier reached by 16 of the 64 live threads of block (0, 0, 0) \
         (a barrier in divergent code); thread (16, 0, 0) is elsewhere"
    );
}

fn f_kernel(f: &mut Fb, name: &str, body: Block) -> Function {
    std::mem::take(f).kernel(name, [64, 1, 1], grid1(cu(1)), body)
}

#[test]
fn exited_threads_do_not_block_a_barrier() {
    let mut f = Fb::default();
    let body = vec![
        if_(
            lt(tid(), cu(16)),
            vec![stmt(StmtKind::Return(None))],
            vec![],
        ),
        stmt(StmtKind::Barrier),
    ];
    let m = module(vec![f_kernel(&mut f, "bar", body)]);
    interpret(&m, "bar", [1; 3], [64, 1, 1], &mut []).unwrap();
}

/// Each thread writes `s[t]` and reads `s[(t + 1) % 64]`, with or without a barrier between.
fn neighbour_exchange(with_barrier: bool) -> Module {
    let mut f = Fb::default();
    let out = f.param("out", view(Scalar::F32, true));
    let s = f.shared("s", Scalar::F32, vec![64]);
    let tf = at(ex_cast(tid(), f32t()), line(1));
    let mut body = vec![store(s.clone(), tid(), tf, line(4))];
    if with_barrier {
        body.push(stmt(StmtKind::Barrier));
    }
    let next = bin(BinOp::Rem, add(tid(), cu(1)), cu(64));
    body.push(store(out, tid(), at(load(s, next), line(6)), line(6)));
    module(vec![f_kernel(&mut f, "exchange", body)])
}

fn ex_cast(e: Expr, ty: Type) -> Expr {
    Expr {
        kind: ExprKind::Cast(Box::new(e)),
        ty,
        span: line(1),
    }
}

#[test]
fn shared_memory_race_is_reported_with_both_threads() {
    let m = neighbour_exchange(false);
    let src = sources();
    let mut args = vec![Arg::Buffer(Buffer::from_f32(&[0.0; 64]))];
    let err = Interpreter::new(&m)
        .sources(&src)
        .run("exchange", [1; 3], [64, 1, 1], &mut args)
        .unwrap_err();
    let msg = err.to_string();
    assert_eq!(
        msg,
        "test.tile:6:1: data race on shared array `s` element 1: read by thread (0, 0, 0) of \
         block (0, 0, 0) after the write by thread (1, 0, 0) of block (0, 0, 0) at test.tile:4:1, \
         with no barrier between"
    );
}

#[test]
fn barrier_orders_shared_memory() {
    let m = neighbour_exchange(true);
    let mut args = vec![Arg::Buffer(Buffer::from_f32(&[0.0; 64]))];
    interpret(&m, "exchange", [1; 3], [64, 1, 1], &mut args).unwrap();
    let got = args[0].buffer().unwrap().to_f32();
    let want: Vec<f32> = (0..64).map(|t| ((t + 1) % 64) as f32).collect();
    assert_eq!(got, want);
}

#[test]
fn unwritten_shared_memory_reads_as_nan() {
    let mut f = Fb::default();
    let out = f.param("out", view(Scalar::F32, true));
    let s = f.shared("s", Scalar::F32, vec![64]);
    let body = vec![store(out, tid(), load(s, tid()), line(1))];
    let m = module(vec![f_kernel(&mut f, "uninit", body)]);
    let mut args = vec![Arg::Buffer(Buffer::from_f32(&[0.0; 64]))];
    interpret(&m, "uninit", [1; 3], [64, 1, 1], &mut args).unwrap();
    assert!(args[0]
        .buffer()
        .unwrap()
        .to_f32()
        .iter()
        .all(|x| x.is_nan()));
}

#[test]
fn shared_out_of_bounds_is_an_error() {
    let mut f = Fb::default();
    let s = f.shared("tile", Scalar::F32, vec![4, 8]);
    let body = vec![store(s, tid(), cf(1.0), line(2))];
    let m = module(vec![f_kernel(&mut f, "oob", body)]);
    let msg = interpret(&m, "oob", [1; 3], [64, 1, 1], &mut [])
        .unwrap_err()
        .to_string();
    assert_eq!(
        msg,
        "test.tile:byte 32: out-of-bounds write of shared buffer `tile` at element 32 \
         (length 32) by thread (32, 0, 0) of block (0, 0, 0)"
    );
}

/// Warp sums by a butterfly of `shfl_xor`, in a block of two warps.
#[test]
fn warp_shuffle_reduction() {
    let mut f = Fb::default();
    let x = f.param("x", view(Scalar::F32, false));
    let out = f.param("out", view(Scalar::F32, true));
    let v = f.local("v", f32t());
    let o = f.local("o", u32t());
    let shfl = builtin(
        Builtin::Shuffle(ShuffleMode::Xor),
        vec![v.clone(), bin(BinOp::Shr, cu(16), o.clone())],
        f32t(),
    );
    let body = vec![
        let_(&v, load(x, tid())),
        stmt(StmtKind::For {
            var: var_id(&o),
            start: cu(0),
            end: cu(5),
            step: cu(1),
            body: vec![assign(&v, add(v.clone(), shfl))],
        }),
        store(out, tid(), v, line(1)),
    ];
    let m = module(vec![f_kernel(&mut f, "wsum", body)]);
    let xs: Vec<f32> = (0..64).map(|i| i as f32).collect();
    let mut args = vec![
        Arg::Buffer(Buffer::from_f32(&xs)),
        Arg::Buffer(Buffer::from_f32(&[0.0; 64])),
    ];
    interpret(&m, "wsum", [1; 3], [64, 1, 1], &mut args).unwrap();
    let got = args[1].buffer().unwrap().to_f32();
    let (lo, hi) = ((0..32).sum::<i32>() as f32, (32..64).sum::<i32>() as f32);
    assert!(got[..32].iter().all(|&g| g == lo), "{got:?}");
    assert!(got[32..].iter().all(|&g| g == hi), "{got:?}");
}

/// `out[t] = shfl(mode, t, operand)` for every lane of one warp.
fn shuffle_once(mode: ShuffleMode, operand: u32) -> Vec<u32> {
    let mut f = Fb::default();
    let out = f.param("out", view(Scalar::U32, true));
    let shfl = builtin(Builtin::Shuffle(mode), vec![tid(), cu(operand)], u32t());
    let body = vec![store(out, tid(), shfl, line(1))];
    let m = module(vec![f.kernel("shfl", [32, 1, 1], grid1(cu(1)), body)]);
    let mut args = vec![Arg::Buffer(Buffer::from_u32(&[0; 32]))];
    interpret(&m, "shfl", [1; 3], [32, 1, 1], &mut args).unwrap();
    args[0].buffer().unwrap().to_u32()
}

#[test]
fn shuffle_modes_follow_ptx() {
    let up = shuffle_once(ShuffleMode::Up, 3);
    assert_eq!(&up[..5], &[0, 1, 2, 0, 1]);
    let down = shuffle_once(ShuffleMode::Down, 3);
    assert_eq!(&down[28..], &[31, 29, 30, 31]);
    assert_eq!(down[0], 3);
    let idx = shuffle_once(ShuffleMode::Idx, 37);
    assert!(idx.iter().all(|&v| v == 5));
    let xor = shuffle_once(ShuffleMode::Xor, 40);
    assert_eq!(xor, (0..32).collect::<Vec<_>>());
}

#[test]
fn shuffle_in_divergent_code_is_an_error() {
    let mut f = Fb::default();
    let out = f.param("out", view(Scalar::U32, true));
    let shfl = builtin(
        Builtin::Shuffle(ShuffleMode::Xor),
        vec![tid(), cu(1)],
        u32t(),
    );
    let body = vec![if_(
        lt(tid(), cu(40)),
        vec![store(out, tid(), at(shfl, line(9)), line(9))],
        vec![],
    )];
    let m = module(vec![f_kernel(&mut f, "shfl", body)]);
    let mut args = vec![Arg::Buffer(Buffer::from_u32(&[0; 64]))];
    let msg = interpret(&m, "shfl", [1; 3], [64, 1, 1], &mut args)
        .unwrap_err()
        .to_string();
    assert!(
        msg.ends_with("full-warp shuffle reached by only part of warp 1 of block (0, 0, 0); lane 8 is live but elsewhere"),
        "{msg}"
    );
}

#[test]
fn votes_and_ballot() {
    let mut f = Fb::default();
    let out = f.param("out", view(Scalar::U32, true));
    let pred = lt(special(Special::Lane), cu(4));
    let ballot = builtin(Builtin::Vote(VoteMode::Ballot), vec![pred.clone()], u32t());
    let bool_ty = Type::Scalar(Scalar::Bool);
    let any = builtin(
        Builtin::Vote(VoteMode::Any),
        vec![pred.clone()],
        bool_ty.clone(),
    );
    let all = builtin(Builtin::Vote(VoteMode::All), vec![pred], bool_ty);
    let as_u32 = |e| ex_cast(e, u32t());
    let body = vec![
        // Lanes 0..8 exit first: the ballot only sees lanes 8 and up.
        if_(
            lt(special(Special::Lane), cu(2)),
            vec![stmt(StmtKind::Return(None))],
            vec![],
        ),
        store(out.clone(), tid(), ballot, line(1)),
        store(out.clone(), add(tid(), cu(32)), as_u32(any), line(1)),
        store(out, add(tid(), cu(64)), as_u32(all), line(1)),
    ];
    let m = module(vec![f.kernel("vote", [32, 1, 1], grid1(cu(1)), body)]);
    let mut args = vec![Arg::Buffer(Buffer::from_u32(&[9; 96]))];
    interpret(&m, "vote", [1; 3], [32, 1, 1], &mut args).unwrap();
    let got = args[0].buffer().unwrap().to_u32();
    assert_eq!(got[2], 0b1100);
    assert_eq!(got[32 + 2], 1);
    assert_eq!(got[64 + 2], 0);
    assert_eq!(got[0], 9, "exited lanes store nothing");
}

#[test]
fn atomics_count_across_blocks() {
    let mut f = Fb::default();
    let counter = f.param("counter", view(Scalar::U32, true));
    let tickets = f.param("tickets", view(Scalar::U32, true));
    let gid = add(bin(BinOp::Mul, bid(), cu(100)), tid());
    let old = builtin(
        Builtin::Atomic(AtomicOp::Add),
        vec![offset(counter.clone(), cu(0)), cu(1)],
        u32t(),
    );
    let max = builtin(
        Builtin::Atomic(AtomicOp::Max),
        vec![offset(counter, cu(1)), gid.clone()],
        u32t(),
    );
    let body = vec![store(tickets, gid, old, line(1)), stmt(StmtKind::Expr(max))];
    let m = module(vec![f.kernel("count", [100, 1, 1], grid1(cu(3)), body)]);
    let mut args = vec![
        Arg::Buffer(Buffer::from_u32(&[0, 0])),
        Arg::Buffer(Buffer::from_u32(&[0; 300])),
    ];
    Interpreter::new(&m).launch("count", &mut args).unwrap();
    assert_eq!(args[0].buffer().unwrap().to_u32(), [300, 299]);
    let mut tickets = args[1].buffer().unwrap().to_u32();
    tickets.sort();
    assert_eq!(tickets, (0..300).collect::<Vec<_>>());
}

/// A device function with an early return, called by a divergent subset of threads.
#[test]
fn device_function_with_early_return() {
    let mut g = Fb::default();
    let x = g.param("x", u32t());
    let clamp = g.device(
        "clamp10",
        u32t(),
        vec![
            if_(
                bin(BinOp::Gt, x.clone(), cu(10)),
                vec![stmt(StmtKind::Return(Some(cu(10))))],
                vec![],
            ),
            stmt(StmtKind::Return(Some(bin(BinOp::Mul, x, cu(2))))),
        ],
    );
    let mut f = Fb::default();
    let out = f.param("out", view(Scalar::U32, true));
    let body = vec![if_(
        bin(BinOp::Ne, tid(), cu(3)),
        vec![store(out, tid(), call(0, vec![tid()], u32t()), line(1))],
        vec![],
    )];
    let m = module(vec![clamp, f.kernel("k", [16, 1, 1], grid1(cu(1)), body)]);
    let mut args = vec![Arg::Buffer(Buffer::from_u32(&[99; 16]))];
    interpret(&m, "k", [1; 3], [16, 1, 1], &mut args).unwrap();
    let got = args[0].buffer().unwrap().to_u32();
    let want: Vec<u32> = (0..16)
        .map(|t| match t {
            3 => 99,
            t if t > 10 => 10,
            t => t * 2,
        })
        .collect();
    assert_eq!(got, want);
}

#[test]
fn endless_loop_hits_the_step_limit() {
    let mut f = Fb::default();
    let body = vec![st(
        StmtKind::While {
            cond: cb(true),
            body: vec![],
        },
        line(5),
    )];
    let m = module(vec![f_kernel(&mut f, "spin", body)]);
    let src = sources();
    let err = Interpreter::new(&m)
        .sources(&src)
        .step_limit(10_000)
        .run("spin", [1; 3], [64, 1, 1], &mut [])
        .unwrap_err();
    assert!(matches!(
        err.kind(),
        ErrorKind::StepLimit { limit: 10_000, .. }
    ));
    assert_eq!(err.location().unwrap().line_col, Some((5, 1)));
}

#[test]
fn unknown_intrinsics_and_inline_asm_are_unsupported() {
    let intrinsic = |name: &str| Expr {
        kind: ExprKind::Intrinsic {
            name: name.into(),
            args: vec![cf(3.0)],
        },
        ty: f32t(),
        span: line(2),
    };
    let asm = Expr {
        kind: ExprKind::InlineAsm {
            template: "mov.b32 $0, $1;".into(),
            constraints: "=r,r".into(),
            args: vec![tid()],
        },
        ty: u32t(),
        span: line(4),
    };
    let run = |e: Expr| {
        let mut f = Fb::default();
        let out = f.param("out", view(e.ty.scalar().unwrap(), true));
        let body = vec![store(out, tid(), e, line(1))];
        let m = module(vec![f_kernel(&mut f, "k", body)]);
        let mut args = vec![Arg::Buffer(Buffer::zeros(Type::Scalar(Scalar::F32), 64))];
        if let Type::View { elem, .. } = &m.functions[0].vars[0].ty {
            args[0] = Arg::Buffer(Buffer::zeros((**elem).clone(), 64));
        }
        let src = sources();
        Interpreter::new(&m)
            .sources(&src)
            .run("k", [1; 3], [64, 1, 1], &mut args)
            .map(|()| args[0].buffer().unwrap().clone())
    };
    let msg = run(intrinsic("llvm.nvvm.frobnicate.f"))
        .unwrap_err()
        .to_string();
    assert_eq!(
        msg,
        "test.tile:2:1: not supported by the interpreter: intrinsic `llvm.nvvm.frobnicate.f`"
    );
    let msg = run(asm).unwrap_err().to_string();
    assert_eq!(
        msg,
        "test.tile:4:1: not supported by the interpreter: inline PTX `mov.b32 $0, $1;`"
    );
    let sqrt = run(intrinsic("llvm.nvvm.sqrt.rn.f")).unwrap().to_f32();
    assert!(sqrt.iter().all(|&v| v == 3.0f32.sqrt()));
    let ex2 = run(intrinsic("llvm.nvvm.ex2.approx.ftz.f"))
        .unwrap()
        .to_f32();
    assert!(ex2.iter().all(|&v| v == 8.0));
}

#[test]
fn integer_division_by_zero_is_an_error() {
    let mut f = Fb::default();
    let out = f.param("out", view(Scalar::U32, true));
    let q = at(
        bin(BinOp::Div, cu(10), bin(BinOp::Sub, tid(), cu(5))),
        line(3),
    );
    let body = vec![store(out, tid(), q, line(3))];
    let m = module(vec![f_kernel(&mut f, "div", body)]);
    let mut args = vec![Arg::Buffer(Buffer::from_u32(&[0; 64]))];
    let msg = interpret(&m, "div", [1; 3], [64, 1, 1], &mut args)
        .unwrap_err()
        .to_string();
    assert_eq!(
        msg,
        "test.tile:byte 64: integer division by zero in thread (5, 0, 0) of block (0, 0, 0)"
    );
}

/// Thread 0 clears a shared counter, then every thread adds to it atomically.
fn shared_counter(with_barrier: bool) -> Module {
    let mut f = Fb::default();
    let out = f.param("out", view(Scalar::U32, true));
    let s = f.shared("count", Scalar::U32, vec![1]);
    let inc = builtin(
        Builtin::Atomic(AtomicOp::Add),
        vec![offset(s.clone(), cu(0)), cu(1)],
        u32t(),
    );
    let mut body = vec![if_(
        eq(tid(), cu(0)),
        vec![store(s.clone(), cu(0), cu(0), line(2))],
        vec![],
    )];
    if with_barrier {
        body.push(stmt(StmtKind::Barrier));
    }
    body.push(st(StmtKind::Expr(at(inc, line(4))), line(4)));
    body.push(stmt(StmtKind::Barrier));
    body.push(store(out, tid(), load(s, cu(0)), line(1)));
    module(vec![f_kernel(&mut f, "count", body)])
}

#[test]
fn shared_atomics_race_with_plain_accesses_only() {
    let mut args = vec![Arg::Buffer(Buffer::from_u32(&[0; 64]))];
    interpret(
        &shared_counter(true),
        "count",
        [1; 3],
        [64, 1, 1],
        &mut args,
    )
    .unwrap();
    assert!(args[0].buffer().unwrap().to_u32().iter().all(|&c| c == 64));

    let msg = interpret(
        &shared_counter(false),
        "count",
        [1; 3],
        [64, 1, 1],
        &mut args,
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        msg,
        "test.tile:byte 96: data race on shared array `count` element 0: atomic by thread \
         (1, 0, 0) of block (0, 0, 0) after the write by thread (0, 0, 0) of block (0, 0, 0) at \
         test.tile:byte 32, with no barrier between"
    );
}
