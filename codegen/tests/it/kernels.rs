//! Test kernels covering the lowering, written as typed IR.

use super::ir::*;
use zinc_dsl::ir::*;

fn module(functions: Vec<Function>) -> Module {
    Module { functions }
}

/// `c[i] = a[i] + b[i]` with block 256 and grid `(n + 255) / 256`.
pub fn vector_add() -> Module {
    let mut f = Func::default();
    let a = f.param("a", global(F32, false));
    let b = f.param("b", global(F32, false));
    let c = f.param("c", global(F32, true));
    let n = f.param("n", U32);
    let (i, iv) = f.local("i", U32);
    let grid = bin(BinOp::Div, bin(BinOp::Add, n.clone(), u32c(255)), u32c(256));
    let body = vec![
        st(StmtKind::Let {
            var: i,
            init: global_id(),
        }),
        st(StmtKind::If {
            cond: bin(BinOp::Lt, iv.clone(), n),
            then_body: vec![store(
                c,
                iv.clone(),
                bin(BinOp::Add, index(a, iv.clone()), index(b, iv)),
            )],
            else_body: vec![],
        }),
    ];
    module(vec![f.kernel("vector_add", [256, 1, 1], grid1(grid), body)])
}

/// `y[i] = x[i] * f32x4(s, s, s, s)` on 16-byte vectors.
pub fn vec4_scale() -> Module {
    let v4 = Type::Vector(Scalar::F32, 4);
    let mut f = Func::default();
    let x = f.param("x", global(v4.clone(), false));
    let y = f.param("y", global(v4.clone(), true));
    let s = f.param("s", F32);
    let n = f.param("n", U32);
    let splat = ex(
        ExprKind::VectorBuild(vec![s.clone(), s.clone(), s.clone(), s]),
        v4,
    );
    let i = global_id();
    let body = vec![st(StmtKind::If {
        cond: bin(BinOp::Lt, i.clone(), n.clone()),
        then_body: vec![store(y, i.clone(), bin(BinOp::Mul, index(x, i), splat))],
        else_body: vec![],
    })];
    module(vec![f.kernel("vec4_scale", [128, 1, 1], grid1(n), body)])
}

/// Device functions (a warp sum with shuffles, a block sum through a shared view), loops with
/// break and continue, short-circuit logic, atomics and fences.
pub fn reduce() -> Module {
    // fn warp_sum(v: f32) -> f32
    let mut w = Func::default();
    let v = w.param("v", F32);
    let (s, sv) = w.local("s", F32);
    let (off, offv) = w.local("off", U32);
    let shfl = builtin(
        Builtin::Shuffle(ShuffleMode::Xor),
        vec![sv.clone(), offv.clone()],
        F32,
    );
    let warp_sum = w.device(
        "warp_sum",
        F32,
        vec![
            st(StmtKind::Let { var: s, init: v }),
            st(StmtKind::Let {
                var: off,
                init: u32c(16),
            }),
            st(StmtKind::While {
                cond: bin(BinOp::Gt, offv.clone(), u32c(0)),
                body: vec![
                    st(StmtKind::Assign {
                        var: s,
                        value: bin(BinOp::Add, sv.clone(), shfl),
                    }),
                    st(StmtKind::Assign {
                        var: off,
                        value: bin(BinOp::Shr, offv, u32c(1)),
                    }),
                ],
            }),
            st(StmtKind::Return(Some(sv))),
        ],
    );
    let call_warp_sum = |x: Expr| ex(ExprKind::Call(FuncId(0), vec![x]), F32);

    // fn block_sum(v: f32, partial: shared mut [f32]) -> f32
    let mut bs = Func::default();
    let v = bs.param("v", F32);
    let partial = bs.param("partial", view(Space::Shared, F32, true));
    let (t, tv) = bs.local("t", F32);
    let (ws, wsv) = bs.local("ws", F32);
    let lane = special(Special::Lane);
    let warp = special(Special::Warp);
    let block_sum = bs.device(
        "block_sum",
        F32,
        vec![
            st(StmtKind::Let {
                var: ws,
                init: call_warp_sum(v),
            }),
            st(StmtKind::If {
                cond: bin(BinOp::Eq, lane.clone(), u32c(0)),
                then_body: vec![store(partial.clone(), warp.clone(), wsv)],
                else_body: vec![],
            }),
            st(StmtKind::Barrier),
            st(StmtKind::Let {
                var: t,
                init: float(0.0, F32),
            }),
            st(StmtKind::If {
                cond: bin(BinOp::Eq, warp, u32c(0)),
                then_body: vec![st(StmtKind::Assign {
                    var: t,
                    value: call_warp_sum(ex(
                        ExprKind::Select(
                            Box::new(bin(BinOp::Lt, lane.clone(), u32c(8))),
                            Box::new(index(partial, lane)),
                            Box::new(float(0.0, F32)),
                        ),
                        F32,
                    )),
                })],
                else_body: vec![],
            }),
            st(StmtKind::Return(Some(tv))),
        ],
    );

    let mut k = Func::default();
    let x = k.param("x", global(F32, false));
    let out = k.param("out", global(F32, true));
    let n = k.param("n", U32);
    let partial = k.shared("partial", F32, &[8], 100);
    let (acc, accv) = k.local("acc", F32);
    let (i, iv) = k.local("i", U32);
    let (t, tv) = k.local("t", F32);
    let stride = bin(
        BinOp::Mul,
        special(Special::GridDim(Axis::X)),
        special(Special::BlockDim(Axis::X)),
    );
    let negative_late = ex(
        ExprKind::Logical(
            LogicalOp::And,
            Box::new(bin(
                BinOp::Lt,
                index(x.clone(), iv.clone()),
                float(0.0, F32),
            )),
            Box::new(bin(BinOp::Gt, iv.clone(), u32c(5))),
        ),
        BOOL,
    );
    let body = vec![
        st(StmtKind::Let {
            var: acc,
            init: float(0.0, F32),
        }),
        st(StmtKind::For {
            var: i,
            start: global_id(),
            end: n.clone(),
            step: stride,
            body: vec![
                st(StmtKind::If {
                    cond: negative_late,
                    then_body: vec![st(StmtKind::Continue)],
                    else_body: vec![],
                }),
                st(StmtKind::Assign {
                    var: acc,
                    value: bin(BinOp::Add, accv.clone(), index(x, iv)),
                }),
                st(StmtKind::If {
                    cond: bin(BinOp::Gt, accv.clone(), float(1e30, F32)),
                    then_body: vec![st(StmtKind::Break)],
                    else_body: vec![],
                }),
            ],
        }),
        st(StmtKind::Let {
            var: t,
            init: ex(ExprKind::Call(FuncId(1), vec![accv, partial]), F32),
        }),
        st(StmtKind::If {
            cond: bin(BinOp::Eq, special(Special::ThreadIdx(Axis::X)), u32c(0)),
            then_body: vec![st(StmtKind::Expr(builtin(
                Builtin::Atomic(AtomicOp::Add),
                vec![offset(out, u32c(0)), tv],
                F32,
            )))],
            else_body: vec![],
        }),
        st(StmtKind::Fence(FenceScope::Device)),
        st(StmtKind::Fence(FenceScope::Block)),
    ];
    let grid = bin(BinOp::Div, bin(BinOp::Add, n, u32c(255)), u32c(256));
    module(vec![
        warp_sum,
        block_sum,
        k.kernel("reduce", [256, 1, 1], grid1(grid), body),
    ])
}

/// Every math function on f32, f16, bf16 and (where supported) f64, plus max/min/fma and abs.
pub fn math() -> Module {
    let mut f = Func::default();
    let mut body = vec![];
    let all = [
        MathFn::Exp,
        MathFn::Log,
        MathFn::Exp2,
        MathFn::Log2,
        MathFn::Sqrt,
        MathFn::Rsqrt,
        MathFn::Rcp,
        MathFn::Tanh,
        MathFn::Sin,
        MathFn::Cos,
        MathFn::Abs,
        MathFn::Floor,
        MathFn::Ceil,
    ];
    let f64_ok = [
        MathFn::Sqrt,
        MathFn::Rsqrt,
        MathFn::Abs,
        MathFn::Floor,
        MathFn::Ceil,
    ];
    for s in [
        Scalar::F32,
        Scalar::F16,
        Scalar::Bf16,
        Scalar::F64,
        Scalar::I32,
        Scalar::I64,
    ] {
        let ty = sc(s);
        let x = f.param(&format!("x_{}", s.name()), ty.clone());
        let y = f.param(&format!("y_{}", s.name()), global(ty.clone(), true));
        let fns: Vec<MathFn> = match s {
            Scalar::F64 => f64_ok.to_vec(),
            Scalar::I32 | Scalar::I64 => vec![MathFn::Abs],
            _ => all.to_vec(),
        };
        for (k, m) in fns.into_iter().enumerate() {
            let r = builtin(Builtin::Math(m), vec![x.clone()], ty.clone());
            body.push(store(y.clone(), u32c(k as i128), r));
        }
        let extra = [
            builtin(
                Builtin::Max,
                vec![x.clone(), index(y.clone(), u32c(20))],
                ty.clone(),
            ),
            builtin(
                Builtin::Min,
                vec![x.clone(), index(y.clone(), u32c(21))],
                ty.clone(),
            ),
        ];
        for (k, r) in extra.into_iter().enumerate() {
            body.push(store(y.clone(), u32c(30 + k as i128), r));
        }
        if s.is_float() {
            let r = builtin(
                Builtin::Fma,
                vec![x.clone(), x.clone(), index(y.clone(), u32c(22))],
                ty.clone(),
            );
            body.push(store(y, u32c(40), r));
        }
    }
    // Lane-wise math on a vector.
    let v2 = Type::Vector(Scalar::F16, 2);
    let yv = f.param("y_f16x2", global(v2.clone(), true));
    let xv = index(yv.clone(), u32c(1));
    body.push(store(
        yv,
        u32c(0),
        builtin(Builtin::Math(MathFn::Exp), vec![xv], v2),
    ));
    module(vec![f.kernel("math", [32, 1, 1], grid1(u32c(1)), body)])
}

const NUMERIC: [Scalar; 12] = [
    Scalar::I8,
    Scalar::I16,
    Scalar::I32,
    Scalar::I64,
    Scalar::U8,
    Scalar::U16,
    Scalar::U32,
    Scalar::U64,
    Scalar::F16,
    Scalar::Bf16,
    Scalar::F32,
    Scalar::F64,
];

/// A cast between every pair of scalar types, stored to one output view per target type.
pub fn casts() -> Module {
    let mut f = Func::default();
    let xs: Vec<(Scalar, Expr)> = Scalar::ALL
        .iter()
        .map(|&s| (s, f.param(&format!("x_{}", s.name()), sc(s))))
        .collect();
    let outs: Vec<(Scalar, Expr)> = Scalar::ALL
        .iter()
        .map(|&s| (s, f.param(&format!("o_{}", s.name()), global(sc(s), true))))
        .collect();
    let mut body = vec![];
    for (to, out) in &outs {
        for (k, (_, x)) in xs.iter().enumerate() {
            body.push(store(
                out.clone(),
                u32c(k as i128),
                cast(x.clone(), sc(*to)),
            ));
        }
    }
    // Vectors convert lane-wise.
    let iv = f.param("i_f32x2", global(Type::Vector(Scalar::F32, 2), false));
    let xv = index(iv, u32c(0));
    let ov = f.param("o_i8x2", global(Type::Vector(Scalar::I8, 2), true));
    body.push(store(ov, u32c(0), cast(xv, Type::Vector(Scalar::I8, 2))));
    module(vec![f.kernel("casts", [32, 1, 1], grid1(u32c(1)), body)])
}

/// Arithmetic, bitwise, shift and comparison operators on every numeric type and on vectors.
pub fn arith() -> Module {
    let mut f = Func::default();
    let mut body = vec![];
    for s in NUMERIC {
        let ty = sc(s);
        let a = f.param(&format!("a_{}", s.name()), ty.clone());
        let b = f.param(&format!("b_{}", s.name()), ty.clone());
        let o = f.param(&format!("o_{}", s.name()), global(ty.clone(), true));
        let flags = f.param(&format!("f_{}", s.name()), global(BOOL, true));
        let mut ops = vec![BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div, BinOp::Rem];
        if s.is_int() {
            ops.extend([BinOp::And, BinOp::Or, BinOp::Xor, BinOp::Shl, BinOp::Shr]);
        }
        for (k, op) in ops.into_iter().enumerate() {
            body.push(store(
                o.clone(),
                u32c(k as i128),
                bin(op, a.clone(), b.clone()),
            ));
        }
        let neg = ex(ExprKind::Unary(UnOp::Neg, Box::new(a.clone())), ty.clone());
        body.push(store(o.clone(), u32c(20), neg));
        if s.is_int() {
            let not = ex(ExprKind::Unary(UnOp::Not, Box::new(a.clone())), ty.clone());
            body.push(store(o, u32c(21), not));
        }
        let cmps = [
            BinOp::Eq,
            BinOp::Ne,
            BinOp::Lt,
            BinOp::Le,
            BinOp::Gt,
            BinOp::Ge,
        ];
        for (k, op) in cmps.into_iter().enumerate() {
            body.push(store(
                flags.clone(),
                u32c(k as i128),
                bin(op, a.clone(), b.clone()),
            ));
        }
    }
    for (s, n) in [
        (Scalar::F16, 2),
        (Scalar::F32, 4),
        (Scalar::U32, 4),
        (Scalar::Bf16, 2),
        (Scalar::F32, 3),
    ] {
        let ty = Type::Vector(s, n);
        let name = format!("{}x{n}", s.name());
        let o = f.param(&format!("o_{name}"), global(ty.clone(), true));
        let a = index(o.clone(), u32c(5));
        let lane0 = ex(ExprKind::Extract(Box::new(a.clone()), 0), sc(s));
        let mut lanes = vec![lane0];
        lanes.resize(
            n as usize,
            ex(ExprKind::Extract(Box::new(a.clone()), n - 1), sc(s)),
        );
        let built = ex(ExprKind::VectorBuild(lanes), ty.clone());
        let prod = bin(
            BinOp::Mul,
            bin(BinOp::Add, a.clone(), built),
            index(o.clone(), u32c(1)),
        );
        body.push(store(o.clone(), u32c(0), prod));
        let mask = bin(BinOp::Lt, a.clone(), index(o.clone(), u32c(2)));
        let sel = ex(
            ExprKind::Select(
                Box::new(mask),
                Box::new(a),
                Box::new(index(o.clone(), u32c(3))),
            ),
            ty,
        );
        body.push(store(o, u32c(4), sel));
    }
    // Bools: logic operators, not, and bool vectors in memory.
    let p = f.param("p", BOOL);
    let q = f.param("q", BOOL);
    let ob = f.param("o_bool", global(BOOL, true));
    let not_p = ex(ExprKind::Unary(UnOp::Not, Box::new(p.clone())), BOOL);
    let or = ex(
        ExprKind::Logical(
            LogicalOp::Or,
            Box::new(not_p),
            Box::new(index(ob.clone(), u32c(1))),
        ),
        BOOL,
    );
    body.push(store(ob.clone(), u32c(0), bin(BinOp::Xor, or, q)));
    let b4 = Type::Vector(Scalar::Bool, 4);
    let ob4 = f.param("o_boolx4", global(b4.clone(), true));
    let loaded = index(ob4.clone(), u32c(1));
    let inverted = ex(ExprKind::Unary(UnOp::Not, Box::new(loaded)), b4);
    body.push(store(ob4, u32c(0), inverted));
    module(vec![f.kernel("arith", [32, 1, 1], grid1(u32c(1)), body)])
}

/// Shuffles, votes and atomics of every kind, on global and shared memory.
pub fn warp_ops() -> Module {
    let mut f = Func::default();
    let ou = f.param("ou", global(U32, true));
    let of = f.param("of", global(F32, true));
    let oi = f.param("oi", global(sc(Scalar::I32), true));
    let o64 = f.param("o64", global(sc(Scalar::U64), true));
    let od = f.param("od", global(sc(Scalar::F64), true));
    let oh = f.param("oh", global(Type::Vector(Scalar::F16, 2), true));
    let ohs = f.param("ohs", global(sc(Scalar::F16), true));
    let sh = f.shared("sh", U32, &[32], 10);
    let lane = special(Special::Lane);
    let mut body = vec![];
    let modes = [
        ShuffleMode::Xor,
        ShuffleMode::Down,
        ShuffleMode::Up,
        ShuffleMode::Idx,
    ];
    for (k, m) in modes.into_iter().enumerate() {
        let su = builtin(
            Builtin::Shuffle(m),
            vec![index(ou.clone(), lane.clone()), u32c(1)],
            U32,
        );
        body.push(store(ou.clone(), u32c(k as i128), su));
        let sf = builtin(
            Builtin::Shuffle(m),
            vec![index(of.clone(), lane.clone()), u32c(2)],
            F32,
        );
        body.push(store(of.clone(), u32c(k as i128), sf));
        let h2 = Type::Vector(Scalar::F16, 2);
        let shh = builtin(
            Builtin::Shuffle(m),
            vec![index(oh.clone(), lane.clone()), u32c(3)],
            h2,
        );
        body.push(store(oh.clone(), u32c(k as i128), shh));
    }
    let pred = bin(BinOp::Lt, lane.clone(), u32c(7));
    for (k, (mode, ty)) in [
        (VoteMode::All, BOOL),
        (VoteMode::Any, BOOL),
        (VoteMode::Ballot, U32),
    ]
    .into_iter()
    .enumerate()
    {
        let v = builtin(Builtin::Vote(mode), vec![pred.clone()], ty.clone());
        let v = if ty == BOOL { cast(v, U32) } else { v };
        body.push(store(ou.clone(), u32c(10 + k as i128), v));
    }
    let ops = [
        AtomicOp::Add,
        AtomicOp::Max,
        AtomicOp::Min,
        AtomicOp::And,
        AtomicOp::Or,
        AtomicOp::Xor,
        AtomicOp::Exch,
    ];
    for op in ops {
        let float_ok = matches!(
            op,
            AtomicOp::Add | AtomicOp::Max | AtomicOp::Min | AtomicOp::Exch
        );
        let mut targets = vec![
            (ou.clone(), U32),
            (oi.clone(), sc(Scalar::I32)),
            (o64.clone(), sc(Scalar::U64)),
            (sh.clone(), U32),
        ];
        if float_ok {
            targets.extend([(of.clone(), F32), (od.clone(), sc(Scalar::F64))]);
        }
        if op == AtomicOp::Add {
            targets.push((ohs.clone(), sc(Scalar::F16)));
        }
        for (v, ty) in targets {
            let one = match ty {
                Type::Scalar(s) if s.is_float() => float(1.0, ty.clone()),
                _ => int(1, ty.clone()),
            };
            let old = builtin(
                Builtin::Atomic(op),
                vec![offset(v.clone(), u32c(20)), one],
                ty,
            );
            body.push(store(v, u32c(21), old));
        }
    }
    for (v, ty) in [
        (ou.clone(), U32),
        (of.clone(), F32),
        (o64, sc(Scalar::U64)),
        (sh, U32),
    ] {
        let (e, n) = match ty {
            Type::Scalar(s) if s.is_float() => (float(0.0, ty.clone()), float(2.0, ty.clone())),
            _ => (int(0, ty.clone()), int(2, ty.clone())),
        };
        let old = builtin(
            Builtin::AtomicCas,
            vec![offset(v.clone(), u32c(22)), e, n],
            ty,
        );
        body.push(store(v, u32c(23), old));
    }
    module(vec![f.kernel("warp_ops", [64, 1, 1], grid1(u32c(1)), body)])
}

/// A 2-D block: warp index from the general formula, a 2-D shared tile, and the escape hatches.
pub fn tile2d() -> Module {
    let mut f = Func::default();
    let out = f.param("out", global(U32, true));
    let out_f = f.param("out_f", global(F32, true));
    let out_h = f.param("out_h", global(sc(Scalar::F16), true));
    let out_h2 = f.param("out_h2", global(Type::Vector(Scalar::F16, 2), true));
    let tile = f.shared("tile", U32, &[16, 17], 10);
    let tx = special(Special::ThreadIdx(Axis::X));
    let ty = special(Special::ThreadIdx(Axis::Y));
    let flat = bin(
        BinOp::Add,
        bin(BinOp::Mul, ty.clone(), u32c(17)),
        tx.clone(),
    );
    let clock = ex(
        ExprKind::Intrinsic {
            name: "llvm.nvvm.read.ptx.sreg.clock".into(),
            args: vec![],
        },
        sc(Scalar::I32),
    );
    let laneid = ex(
        ExprKind::InlineAsm {
            template: "mov.u32 $0, %laneid;".into(),
            constraints: "=r".into(),
            args: vec![],
        },
        U32,
    );
    let add = ex(
        ExprKind::InlineAsm {
            template: "add.u32 $0, $1, $2;".into(),
            constraints: "=r,r,n".into(),
            args: vec![special(Special::Warp), u32c(3)],
        },
        U32,
    );
    let asm = |template: &str, constraints: &str, args: Vec<Expr>, ty: Type| {
        let (template, constraints) = (template.into(), constraints.into());
        ex(
            ExprKind::InlineAsm {
                template,
                constraints,
                args,
            },
            ty,
        )
    };
    let h2 = Type::Vector(Scalar::F16, 2);
    let h = sc(Scalar::F16);
    // Each register class: f32 and f16x2 in `r`, f16 in `h`, a view in `l`, a bool in `b`.
    let f32_bits = asm("mov.b32 $0, $1;", "=r,r", vec![float(1.5, F32)], F32);
    let halves = asm(
        "add.rn.f16x2 $0, $1, $1;",
        "=r,r",
        vec![index(out_h2.clone(), u32c(1))],
        h2,
    );
    let half = asm("neg.f16 $0, $1;", "=h,h", vec![float(2.0, h.clone())], h);
    let addr = asm("cvt.u32.u64 $0, $1;", "=r,l", vec![out.clone()], U32);
    let pred = bin(BinOp::Lt, tx.clone(), u32c(3));
    let selp = asm("selp.u32 $0, 1, 0, $1;", "=r,b", vec![pred], U32);
    let body = vec![
        store(out_f.clone(), u32c(0), f32_bits),
        store(out_h2.clone(), u32c(0), halves),
        store(out_h, u32c(0), half),
        store(out.clone(), u32c(1), bin(BinOp::Add, addr, selp)),
        store(tile.clone(), flat.clone(), add),
        st(StmtKind::Barrier),
        store(
            out.clone(),
            flat.clone(),
            bin(BinOp::Add, index(tile, flat), laneid),
        ),
        store(out, u32c(0), cast(clock, U32)),
        st(StmtKind::Expr(ex(
            ExprKind::InlineAsm {
                template: "membar.cta;".into(),
                constraints: "~{memory}".into(),
                args: vec![],
            },
            Type::Void,
        ))),
    ];
    let n = f.param("n", U32);
    let grid = [
        bin(BinOp::Div, n.clone(), u32c(16)),
        builtin(Builtin::Max, vec![n, u32c(1)], U32),
        u32c(1),
    ];
    module(vec![f.kernel("tile2d", [16, 16, 1], grid, body)])
}

/// 64 KiB of shared memory: more than the static 48 KiB, so it becomes dynamic.
pub fn big_shared() -> Module {
    let mut f = Func::default();
    let out = f.param("out", global(F32, true));
    let a = f.shared("a", F32, &[8192], 10);
    let b = f.shared("b", Type::Vector(Scalar::F32, 4), &[2048], 20);
    let tx = special(Special::ThreadIdx(Axis::X));
    let b_x = ex(
        ExprKind::Extract(Box::new(index(b.clone(), tx.clone())), 1),
        F32,
    );
    let body = vec![
        store(a.clone(), tx.clone(), float(1.0, F32)),
        store(
            b,
            tx.clone(),
            ex(
                ExprKind::VectorBuild(vec![float(2.0, F32); 4]),
                Type::Vector(Scalar::F32, 4),
            ),
        ),
        st(StmtKind::Barrier),
        store(
            out,
            tx.clone(),
            bin(BinOp::Add, index(a, bin(BinOp::Sub, u32c(255), tx)), b_x),
        ),
    ];
    module(vec![f.kernel(
        "big_shared",
        [256, 1, 1],
        grid1(u32c(1)),
        body,
    )])
}

/// All the kernels above, by name.
pub fn all() -> Vec<(&'static str, Module)> {
    vec![
        ("vector_add", vector_add()),
        ("vec4_scale", vec4_scale()),
        ("reduce", reduce()),
        ("math", math()),
        ("casts", casts()),
        ("arith", arith()),
        ("warp_ops", warp_ops()),
        ("tile2d", tile2d()),
        ("big_shared", big_shared()),
    ]
}
