//! Calls: built-in functions, vector constructors and device functions.

use super::body::{Binding, FnCx};
use super::expr::{int_const, mk};
use super::{eval_or_report, suggest, types, ItemRef, Lookup, Reported, Res};
use crate::ast;
use crate::diag::{Diagnostic, Span};
use crate::ir::{
    self, AtomicOp, BinOp, Builtin, ConstValue, FenceScope, Frag, FragRole, FuncId, MathFn, Scalar,
    ShuffleMode, Space, TmaStoreOp, Type, VoteMode,
};

/// A built-in function.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Name {
    Math(MathFn),
    Max,
    Min,
    Fma,
    Select,
    Cdiv,
    Barrier,
    Fence(FenceScope),
    Shuffle(ShuffleMode),
    Vote(VoteMode),
    Atomic(AtomicOp),
    AtomicCas,
    Mma,
    Ldmatrix(u8),
    CpAsync,
    CpAsyncCommit,
    CpAsyncWait,
    Prmt,
    Lop3,
    /// `dp4a` (signed bytes of `a`) or `dp4a_us` (unsigned bytes of `a`).
    Dp4a {
        unsigned_a: bool,
    },
    /// `frag(r0, r1, ...)`: the fragment type the context wants, from its registers.
    Frag,
    Wgmma,
    WgmmaFence,
    WgmmaCommit,
    WgmmaWait,
    SetMaxNReg {
        increase: bool,
    },
    FenceProxyAsync,
    FenceProxyAsyncGlobal,
    FenceGpu,
    SyncWarp,
    Nanosleep,
    MbarrierInit,
    MbarrierExpectTx,
    MbarrierArrive,
    MbarrierWait,
    TmaLoad,
    TmaLoadMulticast,
    ClusterRank,
    Timer(bool),
    ClusterSync,
    MbarrierArriveCluster,
    TmaPrefetch,
    TmaStore(TmaStoreOp),
    TmaStoreCommit,
    TmaStoreWait,
    TmaStoreDone,
    /// `tensor_map(...)`, which is only a declaration (`let m = tensor_map(...)`).
    TensorMap,
}

const TABLE: &[(&str, Name)] = &[
    ("exp", Name::Math(MathFn::Exp)),
    ("log", Name::Math(MathFn::Log)),
    ("exp2", Name::Math(MathFn::Exp2)),
    ("log2", Name::Math(MathFn::Log2)),
    ("sqrt", Name::Math(MathFn::Sqrt)),
    ("rsqrt", Name::Math(MathFn::Rsqrt)),
    ("rcp", Name::Math(MathFn::Rcp)),
    ("tanh", Name::Math(MathFn::Tanh)),
    ("sin", Name::Math(MathFn::Sin)),
    ("cos", Name::Math(MathFn::Cos)),
    ("abs", Name::Math(MathFn::Abs)),
    ("floor", Name::Math(MathFn::Floor)),
    ("ceil", Name::Math(MathFn::Ceil)),
    ("max", Name::Max),
    ("min", Name::Min),
    ("fma", Name::Fma),
    ("select", Name::Select),
    ("cdiv", Name::Cdiv),
    ("barrier", Name::Barrier),
    ("fence", Name::Fence(FenceScope::Device)),
    ("fence_block", Name::Fence(FenceScope::Block)),
    ("shfl_xor", Name::Shuffle(ShuffleMode::Xor)),
    ("shfl_down", Name::Shuffle(ShuffleMode::Down)),
    ("shfl_up", Name::Shuffle(ShuffleMode::Up)),
    ("shfl_idx", Name::Shuffle(ShuffleMode::Idx)),
    ("vote_all", Name::Vote(VoteMode::All)),
    ("vote_any", Name::Vote(VoteMode::Any)),
    ("ballot", Name::Vote(VoteMode::Ballot)),
    ("atomic_add", Name::Atomic(AtomicOp::Add)),
    ("atomic_max", Name::Atomic(AtomicOp::Max)),
    ("atomic_min", Name::Atomic(AtomicOp::Min)),
    ("atomic_and", Name::Atomic(AtomicOp::And)),
    ("atomic_or", Name::Atomic(AtomicOp::Or)),
    ("atomic_xor", Name::Atomic(AtomicOp::Xor)),
    ("atomic_exch", Name::Atomic(AtomicOp::Exch)),
    ("atomic_cas", Name::AtomicCas),
    ("mma", Name::Mma),
    ("ldmatrix_x1", Name::Ldmatrix(1)),
    ("ldmatrix_x2", Name::Ldmatrix(2)),
    ("ldmatrix_x4", Name::Ldmatrix(4)),
    ("cp_async", Name::CpAsync),
    ("cp_async_commit", Name::CpAsyncCommit),
    ("cp_async_wait", Name::CpAsyncWait),
    ("prmt", Name::Prmt),
    ("lop3", Name::Lop3),
    ("dp4a", Name::Dp4a { unsigned_a: false }),
    ("dp4a_us", Name::Dp4a { unsigned_a: true }),
    ("frag", Name::Frag),
    ("wgmma", Name::Wgmma),
    ("wgmma_fence", Name::WgmmaFence),
    ("wgmma_commit", Name::WgmmaCommit),
    ("wgmma_wait", Name::WgmmaWait),
    ("setmaxnreg_inc", Name::SetMaxNReg { increase: true }),
    ("setmaxnreg_dec", Name::SetMaxNReg { increase: false }),
    ("fence_proxy_async", Name::FenceProxyAsync),
    ("fence_proxy_async_global", Name::FenceProxyAsyncGlobal),
    ("fence_gpu", Name::FenceGpu),
    ("sync_warp", Name::SyncWarp),
    ("nanosleep", Name::Nanosleep),
    ("mbarrier_init", Name::MbarrierInit),
    ("mbarrier_expect_tx", Name::MbarrierExpectTx),
    ("mbarrier_arrive", Name::MbarrierArrive),
    ("mbarrier_wait", Name::MbarrierWait),
    ("tma_load", Name::TmaLoad),
    ("tma_load_multicast", Name::TmaLoadMulticast),
    ("cluster_rank", Name::ClusterRank),
    ("clock64", Name::Timer(false)),
    ("globaltimer", Name::Timer(true)),
    ("cluster_sync", Name::ClusterSync),
    ("mbarrier_arrive_cluster", Name::MbarrierArriveCluster),
    ("tma_prefetch", Name::TmaPrefetch),
    ("tma_store", Name::TmaStore(TmaStoreOp::Write)),
    ("tma_store_add", Name::TmaStore(TmaStoreOp::Add)),
    ("tma_store_commit", Name::TmaStoreCommit),
    ("tma_store_wait", Name::TmaStoreWait),
    ("tma_store_done", Name::TmaStoreDone),
    ("tensor_map", Name::TensorMap),
];

pub fn lookup(name: &str) -> Option<Name> {
    TABLE.iter().find(|(n, _)| *n == name).map(|(_, b)| *b)
}

/// Names items may not take: built-in functions and values, and type names.
pub fn is_reserved(name: &str) -> bool {
    lookup(name).is_some()
        || [
            "thread",
            "block",
            "block_dim",
            "grid_dim",
            "lane",
            "warp",
            "void",
            "frag_a",
            "frag_b",
            "frag_acc",
        ]
        .contains(&name)
        || Scalar::from_name(name).is_some()
        || types::vector_type(name).is_some()
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

impl FnCx<'_, '_> {
    pub fn arity(&mut self, name: &str, args: &[ast::Expr], n: usize, span: Span) -> Res<()> {
        if args.len() == n {
            return Ok(());
        }
        let d = Diagnostic::error(
            format!(
                "`{name}` takes {n} argument{} but {} {} given",
                plural(n),
                args.len(),
                if args.len() == 1 { "was" } else { "were" }
            ),
            span,
        );
        Err(self.error(d))
    }

    pub fn call(
        &mut self,
        callee: &ast::Ident,
        args: &[ast::Expr],
        want: Option<&Type>,
        span: Span,
    ) -> Res<ir::Expr> {
        let name = callee.name.as_str();
        let message = match self.ck.lookup(self.file, name) {
            Lookup::Found(ItemRef::Fn(i)) => return self.call_fn(i, callee, args, span),
            Lookup::Found(_) => format!("`{name}` is not a function"),
            Lookup::NotImported(file) => format!(
                "`{name}` is defined in `{}`, which this file does not import",
                self.ck.file_name(file)
            ),
            Lookup::Missing => {
                if let Some(b) = lookup(name) {
                    return self.builtin(b, name, args, want, span);
                }
                if let Some((s, n)) = types::vector_type(name) {
                    return self.vector(s, n, name, args, span);
                }
                if Scalar::from_name(name).is_some() {
                    format!("`{name}` is a type, not a function; convert with `x as {name}`")
                } else {
                    let mut names = self.ck.visible_names(self.file, true);
                    names.extend(TABLE.iter().map(|(n, _)| *n));
                    let mut d =
                        Diagnostic::error(format!("unknown function `{name}`"), callee.span);
                    if let Some(best) = suggest::closest(name, names) {
                        d = d.with_note(format!("did you mean `{best}`?"), None);
                    }
                    return Err(self.error(d));
                }
            }
        };
        Err(self.error(Diagnostic::error(message, callee.span)))
    }

    fn call_fn(
        &mut self,
        i: usize,
        callee: &ast::Ident,
        args: &[ast::Expr],
        span: Span,
    ) -> Res<ir::Expr> {
        let sig = self.ck.fns[i].sig.clone().ok_or(super::Reported)?;
        let decl = self.ck.fns[i].item.name.span;
        if args.len() != sig.params.len() {
            let n = sig.params.len();
            let d = Diagnostic::error(
                format!(
                    "`{}` takes {n} argument{} but {} {} given",
                    callee.name,
                    plural(n),
                    args.len(),
                    if args.len() == 1 { "was" } else { "were" }
                ),
                span,
            )
            .with_note(format!("`{}` is defined here", callee.name), Some(decl));
            return Err(self.error(d));
        }
        let mut checked = Vec::new();
        for (k, (arg, (pname, pty, _))) in args.iter().zip(&sig.params).enumerate() {
            let what = format!("argument {} (`{pname}`) of `{}`", k + 1, callee.name);
            checked.push(match pty {
                Type::TensorMap(elem) => self.map_operand(arg, &what, Some(*elem)),
                _ => self.expect(arg, pty, &what),
            });
        }
        let args = checked.into_iter().collect::<Res<Vec<_>>>()?;
        self.calls.push((i, span));
        Ok(mk(
            ir::ExprKind::Call(FuncId(i as u32), args),
            sig.ret,
            span,
        ))
    }

    fn vector(
        &mut self,
        s: Scalar,
        n: u8,
        name: &str,
        args: &[ast::Expr],
        span: Span,
    ) -> Res<ir::Expr> {
        self.arity(name, args, usize::from(n), span)?;
        let lane = Type::Scalar(s);
        let checked: Vec<_> = args
            .iter()
            .map(|a| self.expect(a, &lane, "a vector lane"))
            .collect();
        let lanes = checked.into_iter().collect::<Res<Vec<_>>>()?;
        Ok(mk(
            ir::ExprKind::VectorBuild(lanes),
            Type::Vector(s, n),
            span,
        ))
    }

    fn builtin(
        &mut self,
        b: Name,
        name: &str,
        args: &[ast::Expr],
        want: Option<&Type>,
        span: Span,
    ) -> Res<ir::Expr> {
        let scalar_of = |x: &ir::Expr| x.ty.scalar();
        // Math, `max`, `min` and `fma` also work lane-wise on vectors.
        let lane_of = |x: &ir::Expr| match x.ty {
            Type::Scalar(s) | Type::Vector(s, _) => Some(s),
            _ => None,
        };
        match b {
            Name::Barrier | Name::Fence(_) => {
                let d =
                    Diagnostic::error(format!("`{name}()` is a statement and has no value"), span);
                Err(self.error(d))
            }
            Name::Math(f) => {
                self.arity(name, args, 1, span)?;
                let x = self.value(&args[0], want)?;
                let ok = lane_of(&x)
                    .is_some_and(|s| s.is_float() || (f == MathFn::Abs && s.is_signed()));
                if !ok {
                    let need = if f == MathFn::Abs {
                        "a float or signed integer"
                    } else {
                        "a float"
                    };
                    return Err(self.bad_arg(name, need, &x));
                }
                let ty = x.ty.clone();
                Ok(mk(
                    ir::ExprKind::Builtin(Builtin::Math(f), vec![x]),
                    ty,
                    span,
                ))
            }
            Name::Max | Name::Min => {
                self.arity(name, args, 2, span)?;
                let (x, y) = self.same_type(name, &args[0], &args[1], want, span)?;
                if !lane_of(&x).is_some_and(|s| s != Scalar::Bool) {
                    return Err(self.bad_arg(name, "numbers", &x));
                }
                let op = if b == Name::Max {
                    Builtin::Max
                } else {
                    Builtin::Min
                };
                let ty = x.ty.clone();
                Ok(mk(ir::ExprKind::Builtin(op, vec![x, y]), ty, span))
            }
            Name::Fma => {
                self.arity(name, args, 3, span)?;
                let (x, y) = self.same_type(name, &args[0], &args[1], want, span)?;
                if !lane_of(&x).is_some_and(Scalar::is_float) {
                    return Err(self.bad_arg(name, "floats", &x));
                }
                let z = self.expect(&args[2], &x.ty.clone(), "the addend of `fma`")?;
                let ty = x.ty.clone();
                Ok(mk(
                    ir::ExprKind::Builtin(Builtin::Fma, vec![x, y, z]),
                    ty,
                    span,
                ))
            }
            Name::Select => {
                self.arity(name, args, 3, span)?;
                let c = self.expect(
                    &args[0],
                    &Type::Scalar(Scalar::Bool),
                    "the condition of `select`",
                );
                let (x, y) = self.same_type(name, &args[1], &args[2], want, span)?;
                let ty = x.ty.clone();
                Ok(mk(
                    ir::ExprKind::Select(Box::new(c?), Box::new(x), Box::new(y)),
                    ty,
                    span,
                ))
            }
            Name::Cdiv => {
                self.arity(name, args, 2, span)?;
                let (x, y) = self.same_type(name, &args[0], &args[1], want, span)?;
                let Some(s) = scalar_of(&x).filter(|s| s.is_int()) else {
                    return Err(self.bad_arg(name, "integer scalars", &x));
                };
                // (a + b - 1) / b
                let ty = x.ty.clone();
                let sum = mk(
                    ir::ExprKind::Binary(BinOp::Add, Box::new(x), Box::new(y.clone())),
                    ty.clone(),
                    span,
                );
                let less = mk(
                    ir::ExprKind::Binary(
                        BinOp::Sub,
                        Box::new(sum),
                        Box::new(int_const(1, s, span)),
                    ),
                    ty.clone(),
                    span,
                );
                Ok(mk(
                    ir::ExprKind::Binary(BinOp::Div, Box::new(less), Box::new(y)),
                    ty,
                    span,
                ))
            }
            Name::Shuffle(mode) => {
                self.arity(name, args, 2, span)?;
                let x = self.value(&args[0], want);
                let lane = self.expect(
                    &args[1],
                    &Type::Scalar(Scalar::U32),
                    "the lane operand of a shuffle",
                );
                let x = x?;
                if !matches!(scalar_of(&x), Some(Scalar::I32 | Scalar::U32 | Scalar::F32)) {
                    return Err(self.bad_arg(name, "a 32-bit scalar (`i32`, `u32` or `f32`)", &x));
                }
                let ty = x.ty.clone();
                Ok(mk(
                    ir::ExprKind::Builtin(Builtin::Shuffle(mode), vec![x, lane?]),
                    ty,
                    span,
                ))
            }
            Name::Vote(mode) => {
                self.arity(name, args, 1, span)?;
                let p = self.expect(
                    &args[0],
                    &Type::Scalar(Scalar::Bool),
                    "the predicate of a vote",
                )?;
                let ty = Type::Scalar(if mode == VoteMode::Ballot {
                    Scalar::U32
                } else {
                    Scalar::Bool
                });
                Ok(mk(
                    ir::ExprKind::Builtin(Builtin::Vote(mode), vec![p]),
                    ty,
                    span,
                ))
            }
            Name::Atomic(op) => {
                self.arity(name, args, 2, span)?;
                let bitwise = matches!(op, AtomicOp::And | AtomicOp::Or | AtomicOp::Xor);
                let floats = match op {
                    AtomicOp::Add => Floats::AndHalf,
                    _ if bitwise => Floats::No,
                    _ => Floats::Yes,
                };
                let (ptr, elem) = self.atomic_place(name, &args[0], floats)?;
                let v = self.expect(&args[1], &elem, "the operand of an atomic")?;
                Ok(mk(
                    ir::ExprKind::Builtin(Builtin::Atomic(op), vec![ptr, v]),
                    elem,
                    span,
                ))
            }
            Name::AtomicCas => {
                self.arity(name, args, 3, span)?;
                let (ptr, elem) = self.atomic_place(name, &args[0], Floats::Yes)?;
                let expected = self.expect(&args[1], &elem, "the expected value of `atomic_cas`");
                let new = self.expect(&args[2], &elem, "the new value of `atomic_cas`");
                Ok(mk(
                    ir::ExprKind::Builtin(Builtin::AtomicCas, vec![ptr, expected?, new?]),
                    elem,
                    span,
                ))
            }
            Name::Mma => self.mma(args, span),
            Name::Ldmatrix(count) => self.ldmatrix(name, count, args, span),
            Name::CpAsync => self.cp_async(args, span),
            Name::CpAsyncCommit => self.commit(name, Builtin::CpAsyncCommit, args, span),
            Name::CpAsyncWait => {
                let what = "the number of groups `cp_async_wait` leaves in flight";
                self.group_wait(name, what, Builtin::CpAsyncWait, args, span)
            }
            Name::Prmt => {
                self.arity(name, args, 3, span)?;
                let u32_ty = Type::Scalar(Scalar::U32);
                let checked: Vec<_> = args
                    .iter()
                    .map(|a| self.expect(a, &u32_ty, "an operand of `prmt`"))
                    .collect();
                let xs = checked.into_iter().collect::<Res<Vec<_>>>()?;
                Ok(mk(ir::ExprKind::Builtin(Builtin::Prmt, xs), u32_ty, span))
            }
            Name::Lop3 => {
                self.arity(name, args, 4, span)?;
                let u32_ty = Type::Scalar(Scalar::U32);
                let lut =
                    self.const_int(&args[3], Scalar::U8, "the truth table of `lop3`", 0..=255);
                let checked: Vec<_> = args[..3]
                    .iter()
                    .map(|a| self.expect(a, &u32_ty, "an operand of `lop3`"))
                    .collect();
                let xs = checked.into_iter().collect::<Res<Vec<_>>>()?;
                let op = Builtin::Lop3(lut? as u8);
                Ok(mk(ir::ExprKind::Builtin(op, xs), u32_ty, span))
            }
            Name::Dp4a { unsigned_a } => {
                self.arity(name, args, 3, span)?;
                let u32_ty = Type::Scalar(Scalar::U32);
                let i32_ty = Type::Scalar(Scalar::I32);
                let a = self.expect(&args[0], &u32_ty, "the first operand of `dp4a`");
                let b = self.expect(&args[1], &u32_ty, "the second operand of `dp4a`");
                let c = self.expect(&args[2], &i32_ty, "the accumulator of `dp4a`");
                let op = Builtin::Dp4a { unsigned_a };
                Ok(mk(
                    ir::ExprKind::Builtin(op, vec![a?, b?, c?]),
                    i32_ty,
                    span,
                ))
            }
            Name::Frag => self.frag_build(args, want, span),
            Name::Wgmma => self.wgmma(args, span),
            Name::WgmmaFence
            | Name::WgmmaCommit
            | Name::FenceProxyAsync
            | Name::FenceProxyAsyncGlobal
            | Name::FenceGpu
            | Name::SyncWarp => {
                self.arity(name, args, 0, span)?;
                let op = match b {
                    Name::WgmmaFence => Builtin::WgmmaFence,
                    Name::WgmmaCommit => Builtin::WgmmaCommit,
                    Name::FenceGpu => Builtin::FenceGpu,
                    Name::SyncWarp => Builtin::SyncWarp,
                    Name::FenceProxyAsyncGlobal => Builtin::FenceProxyAsyncGlobal,
                    _ => Builtin::FenceProxyAsync,
                };
                Ok(mk(ir::ExprKind::Builtin(op, vec![]), Type::Void, span))
            }
            Name::Nanosleep => {
                self.arity(name, args, 1, span)?;
                let ns = self.expect(
                    &args[0],
                    &Type::Scalar(Scalar::U32),
                    "the nanoseconds of `nanosleep`",
                )?;
                Ok(mk(
                    ir::ExprKind::Builtin(Builtin::Nanosleep, vec![ns]),
                    Type::Void,
                    span,
                ))
            }
            Name::MbarrierArrive => {
                self.arity(name, args, 1, span)?;
                let bar = self.mbarrier(name, &args[0])?;
                Ok(mk(
                    ir::ExprKind::Builtin(Builtin::MbarrierArrive, vec![bar]),
                    Type::Void,
                    span,
                ))
            }
            Name::MbarrierInit | Name::MbarrierExpectTx | Name::MbarrierWait => {
                self.arity(name, args, 2, span)?;
                let bar = self.mbarrier(name, &args[0]);
                let what = match b {
                    Name::MbarrierInit => "the arrival count of `mbarrier_init`",
                    Name::MbarrierExpectTx => "the byte count of `mbarrier_expect_tx`",
                    _ => "the phase parity of `mbarrier_wait`",
                };
                let n = self.expect(&args[1], &Type::Scalar(Scalar::U32), what);
                let op = match b {
                    Name::MbarrierInit => Builtin::MbarrierInit,
                    Name::MbarrierExpectTx => Builtin::MbarrierExpectTx,
                    _ => Builtin::MbarrierWait,
                };
                Ok(mk(
                    ir::ExprKind::Builtin(op, vec![bar?, n?]),
                    Type::Void,
                    span,
                ))
            }
            Name::TmaLoad => self.tma_load(name, args, span),
            Name::TmaLoadMulticast => self.tma_load(name, args, span),
            Name::ClusterRank => {
                self.arity(name, args, 0, span)?;
                Ok(mk(
                    ir::ExprKind::Builtin(Builtin::ClusterRank, vec![]),
                    Type::Scalar(Scalar::U32),
                    span,
                ))
            }
            Name::Timer(global) => {
                self.arity(name, args, 0, span)?;
                Ok(mk(
                    ir::ExprKind::Builtin(Builtin::Timer(global), vec![]),
                    Type::Scalar(Scalar::U64),
                    span,
                ))
            }
            Name::ClusterSync => {
                self.arity(name, args, 0, span)?;
                Ok(mk(
                    ir::ExprKind::Builtin(Builtin::ClusterSync, vec![]),
                    Type::Void,
                    span,
                ))
            }
            Name::MbarrierArriveCluster => {
                self.arity(name, args, 2, span)?;
                let bar = self.mbarrier(name, &args[0]);
                let rank = self.expect(
                    &args[1],
                    &Type::Scalar(Scalar::U32),
                    "the block rank of `mbarrier_arrive_cluster`",
                );
                Ok(mk(
                    ir::ExprKind::Builtin(Builtin::MbarrierArriveCluster, vec![bar?, rank?]),
                    Type::Void,
                    span,
                ))
            }
            Name::TmaPrefetch => self.tma_prefetch(args, span),
            Name::TmaStore(op) => self.tma_store(name, op, args, span),
            Name::TmaStoreCommit => self.commit(name, Builtin::TmaStoreCommit, args, span),
            Name::TmaStoreWait => {
                let what = "the number of bulk groups `tma_store_wait` leaves reading";
                self.group_wait(name, what, Builtin::TmaStoreWait, args, span)
            }
            Name::TmaStoreDone => {
                let what = "the number of bulk groups `tma_store_done` leaves unfinished";
                self.group_wait(name, what, Builtin::TmaStoreDone, args, span)
            }
            Name::TensorMap => {
                let d = Diagnostic::error(
                    "`tensor_map(...)` declares a tensor map: write `let name = tensor_map(...)` at the top level of a kernel body",
                    span,
                );
                Err(self.error(d))
            }
            Name::SetMaxNReg { increase } => {
                self.arity(name, args, 1, span)?;
                let what = "the registers per thread of `setmaxnreg` (24 to 256, a multiple of 8)";
                let regs = self.const_int(&args[0], Scalar::U32, what, 24..=256)?;
                if regs % 8 != 0 {
                    let d =
                        Diagnostic::error(format!("{what}: {regs} is not a multiple of 8"), span);
                    return Err(self.error(d));
                }
                Ok(mk(
                    ir::ExprKind::Builtin(
                        Builtin::SetMaxNReg {
                            increase,
                            regs: regs as u16,
                        },
                        vec![],
                    ),
                    Type::Void,
                    span,
                ))
            }
            Name::WgmmaWait => {
                self.arity(name, args, 1, span)?;
                let what = "the number of groups `wgmma_wait` leaves in flight";
                let n = self.const_int(&args[0], Scalar::U32, what, 0..=7)?;
                Ok(mk(
                    ir::ExprKind::Builtin(Builtin::WgmmaWait(n as u8), vec![]),
                    Type::Void,
                    span,
                ))
            }
        }
    }

    /// A compile-time integer argument of type `s` within `range`.
    fn const_int(
        &mut self,
        arg: &ast::Expr,
        s: Scalar,
        what: &str,
        range: std::ops::RangeInclusive<i128>,
    ) -> Res<i128> {
        let x = self.expect(arg, &Type::Scalar(s), what)?;
        match eval_or_report(self.ck, &x, what)? {
            ConstValue::Int(v) if range.contains(&v) => Ok(v),
            v => {
                let d = Diagnostic::error(
                    format!(
                        "{what} must be in {}..={}, found {}",
                        range.start(),
                        range.end(),
                        crate::print::const_text(&v)
                    ),
                    arg.span,
                );
                Err(self.error(d))
            }
        }
    }

    /// A fragment argument of `role`; its element type.
    fn frag_arg(&mut self, arg: &ast::Expr, role: FragRole, what: &str) -> Res<ir::Expr> {
        let x = self.value(arg, None)?;
        match x.ty {
            Type::Frag(f) if f.role == role => Ok(x),
            _ => {
                let want = Frag::new(role, Scalar::F16).map_or("", Frag::role_name);
                let d = Diagnostic::error(
                    format!(
                        "{what} of `mma` must be a `{want}<..>` fragment, found `{}`",
                        x.ty
                    ),
                    arg.span,
                );
                Err(self.error(d))
            }
        }
    }

    /// `mma(a, b, acc)`: m16n8k16 for f16/bf16, m16n8k32 for i8, m16n8k8 for f32 (tf32).
    fn mma(&mut self, args: &[ast::Expr], span: Span) -> Res<ir::Expr> {
        self.arity("mma", args, 3, span)?;
        let a = self.frag_arg(&args[0], FragRole::A, "the first operand");
        let b = self.frag_arg(&args[1], FragRole::B, "the second operand");
        let (a, b) = (a?, b?);
        let (Type::Frag(fa), Type::Frag(fb)) = (&a.ty, &b.ty) else {
            unreachable!("frag_arg checks the types")
        };
        let (ea, eb) = (fa.elem, fb.elem);
        if ea != eb {
            let d = Diagnostic::error(
                format!(
                    "`mma` needs operands of one element type, found `{}` and `{}`",
                    a.ty, b.ty
                ),
                span,
            );
            return Err(self.error(d));
        }
        let acc_ty = Type::Frag(Frag {
            role: FragRole::Acc,
            elem: Frag::acc_for(ea),
        });
        let what = format!("the accumulator of `mma` with `{}` operands", a.ty);
        let acc = self.expect(&args[2], &acc_ty, &what)?;
        Ok(mk(
            ir::ExprKind::Builtin(Builtin::Mma, vec![a, b, acc]),
            acc_ty,
            span,
        ))
    }

    /// `wgmma(acc[i], a, b)`: m64nNk16 into the N / 8 accumulator fragments of row `acc[i]`.
    fn wgmma(&mut self, args: &[ast::Expr], span: Span) -> Res<ir::Expr> {
        self.arity("wgmma", args, 3, span)?;
        if self.indexed_array(&args[0]).is_none() {
            let d = Diagnostic::error(
                "the first argument of `wgmma` must be a row of a register array of `frag_acc<f32>`, like `acc[i]`",
                args[0].span,
            );
            return Err(self.error(d));
        };
        let (var, first, n, elem) = self.array_row(&args[0])?;
        self.check_mutable(var, args[0].span)?;
        let acc = Type::Frag(Frag {
            role: FragRole::Acc,
            elem: Scalar::F32,
        });
        if elem != acc || !(1..=32).contains(&n) {
            let d = Diagnostic::error(
                format!(
                    "`wgmma` accumulates into 1 to 32 `{acc}` fragments (N = 8 to 256), found a row of {n} `{elem}`"
                ),
                args[0].span,
            );
            return Err(self.error(d));
        }
        let shared_f16 = |ty: &Type| {
            matches!(
                ty,
                Type::View { space: Space::Shared, elem, .. } if elem.scalar() == Some(Scalar::F16)
            )
        };
        // A: the warpgroup's 64 rows in registers (fragments), or in shared memory as B is.
        let a = self.address(&args[1])?;
        let a_ty = Type::Frag(Frag {
            role: FragRole::A,
            elem: Scalar::F16,
        });
        if a.ty != a_ty && !shared_f16(&a.ty) {
            return Err(self.bad_arg(
                "wgmma",
                "a `frag_a<f16>` or a shared view of `f16` as A",
                &a,
            ));
        }
        let b = self.address(&args[2])?;
        if !shared_f16(&b.ty) {
            return Err(self.bad_arg("wgmma", "a shared view of `f16` as B", &b));
        }
        let op = Builtin::Wgmma {
            acc: var,
            first,
            n: n as u16,
        };
        Ok(mk(ir::ExprKind::Builtin(op, vec![a, b]), Type::Void, span))
    }

    /// An mbarrier operand of `name`: a shared `u64`, as `bars[i]` or a view.
    fn mbarrier(&mut self, name: &str, e: &ast::Expr) -> Res<ir::Expr> {
        let bar = self.address(e)?;
        match &bar.ty {
            Type::View {
                space: Space::Shared,
                elem,
                mutable: true,
            } if elem.scalar() == Some(Scalar::U64) => Ok(bar),
            _ => Err(self.bad_arg(name, "a shared `u64` mbarrier (like `bars[i]`)", &bar)),
        }
    }

    /// `tma_load(dst, map, row, col, bar)`: the box of tensor map `map` at (row, col) into
    /// `dst`, a shared view of the map's elements, completing on mbarrier `bar`;
    /// `tma_load_multicast(dst, map, row, col, bar, ctas)` the same into each block of the
    /// cluster in mask `ctas`.
    fn tma_load(&mut self, name: &str, args: &[ast::Expr], span: Span) -> Res<ir::Expr> {
        let multicast = name == "tma_load_multicast";
        self.arity(name, args, if multicast { 6 } else { 5 }, span)?;
        let map = self.map_operand(&args[1], &format!("the second argument of `{name}`"), None)?;
        let Type::TensorMap(elem) = map.ty else {
            unreachable!("map_operand gives tensor maps")
        };
        let dst = self.box_operand(name, &args[0], elem, true)?;
        let u32_ty = Type::Scalar(Scalar::U32);
        let row = self.expect(&args[2], &u32_ty, &format!("the row of `{name}`"));
        let col = self.expect(&args[3], &u32_ty, &format!("the column of `{name}`"));
        let bar = self.mbarrier(name, &args[4]);
        let mut operands = vec![dst, map, row?, col?, bar?];
        let op = if multicast {
            let ctas = self.expect(&args[5], &u32_ty, "the block mask of `tma_load_multicast`");
            operands.push(ctas?);
            Builtin::TmaLoadMulticast
        } else {
            Builtin::TmaLoad
        };
        Ok(mk(ir::ExprKind::Builtin(op, operands), Type::Void, span))
    }

    /// A group commit (`cp_async_commit()`, `tma_store_commit()`): no arguments, no value.
    fn commit(
        &mut self,
        name: &str,
        builtin: Builtin,
        args: &[ast::Expr],
        span: Span,
    ) -> Res<ir::Expr> {
        self.arity(name, args, 0, span)?;
        Ok(mk(ir::ExprKind::Builtin(builtin, vec![]), Type::Void, span))
    }

    /// A wait for groups (`cp_async_wait(n)`, `tma_store_wait(n)`): `n` (`what`) a constant of
    /// 0 to 7, the groups the wait leaves in flight.
    fn group_wait(
        &mut self,
        name: &str,
        what: &str,
        builtin: fn(u8) -> Builtin,
        args: &[ast::Expr],
        span: Span,
    ) -> Res<ir::Expr> {
        self.arity(name, args, 1, span)?;
        let n = self.const_int(&args[0], Scalar::U32, what, 0..=7)?;
        Ok(mk(
            ir::ExprKind::Builtin(builtin(n as u8), vec![]),
            Type::Void,
            span,
        ))
    }

    /// `tma_prefetch(map, row, col)`: start bringing the box of tensor map `map` at (row, col)
    /// into the L2.
    fn tma_prefetch(&mut self, args: &[ast::Expr], span: Span) -> Res<ir::Expr> {
        self.arity("tma_prefetch", args, 3, span)?;
        let map = self.map_operand(&args[0], "the first argument of `tma_prefetch`", None)?;
        let u32_ty = Type::Scalar(Scalar::U32);
        let row = self.expect(&args[1], &u32_ty, "the row of `tma_prefetch`");
        let col = self.expect(&args[2], &u32_ty, "the column of `tma_prefetch`");
        Ok(mk(
            ir::ExprKind::Builtin(Builtin::TmaPrefetch, vec![map, row?, col?]),
            Type::Void,
            span,
        ))
    }

    /// `tma_store(map, row, col, src)`: write the box of tensor map `map` at (row, col) from
    /// `src`, a shared view of the map's elements, to global memory; `tma_store_add` adds it
    /// into what is there (f32, f16, i32 or u32 elements).
    fn tma_store(
        &mut self,
        name: &str,
        op: TmaStoreOp,
        args: &[ast::Expr],
        span: Span,
    ) -> Res<ir::Expr> {
        self.arity(name, args, 4, span)?;
        let map = self.map_operand(&args[0], &format!("the first argument of `{name}`"), None)?;
        let Type::TensorMap(elem) = map.ty else {
            unreachable!("map_operand gives tensor maps")
        };
        if op == TmaStoreOp::Add
            && !matches!(elem, Scalar::F32 | Scalar::F16 | Scalar::I32 | Scalar::U32)
        {
            let d = Diagnostic::error(
                format!(
                    "`{name}` adds f32, f16, i32 or u32 elements, not {}",
                    elem.name()
                ),
                args[0].span,
            );
            return Err(self.error(d));
        }
        // A kernel's map shows its view; a function's map parameter does not (the interpreter
        // checks those at the store).
        if let ir::ExprKind::TensorMap(i) = map.kind {
            let param = self.tensor_maps[i as usize].param;
            let var = &self.vars[param.0 as usize];
            if !matches!(var.ty, Type::View { mutable: true, .. }) {
                let d = Diagnostic::error(
                    format!(
                        "`{name}` writes through the tensor map over `{}`, which is not a `global mut` view",
                        var.name
                    ),
                    args[0].span,
                );
                return Err(self.error(d));
            }
        }
        let u32_ty = Type::Scalar(Scalar::U32);
        let row = self.expect(&args[1], &u32_ty, &format!("the row of `{name}`"));
        let col = self.expect(&args[2], &u32_ty, &format!("the column of `{name}`"));
        let src = self.box_operand(name, &args[3], elem, false);
        Ok(mk(
            ir::ExprKind::Builtin(Builtin::TmaStore(op), vec![map, row?, col?, src?]),
            Type::Void,
            span,
        ))
    }

    /// The shared box of a TMA copy `name` (`tma_load`'s destination, `tma_store`'s source): a
    /// view of the map's elements `elem` or an element `s[i][j]`, writable when `written`.
    fn box_operand(
        &mut self,
        name: &str,
        e: &ast::Expr,
        elem: Scalar,
        written: bool,
    ) -> Res<ir::Expr> {
        let view = self.address(e)?;
        let fits = matches!(
            &view.ty,
            Type::View { space: Space::Shared, elem: e, mutable }
                if e.scalar() == Some(elem) && (*mutable || !written)
        );
        if !fits {
            let need = format!(
                "a shared view of `{}` (the tensor map's elements)",
                elem.name()
            );
            return Err(self.bad_arg(name, &need, &view));
        }
        Ok(view)
    }

    /// A tensor map operand (`what`, of elements `elem` when given): the name of one of the
    /// kernel's maps or of the function's `tensor_map<T>` parameter. Maps are no values: they
    /// go only here, so that each is, all the way down, one of the kernel's.
    pub(super) fn map_operand(
        &mut self,
        e: &ast::Expr,
        what: &str,
        elem: Option<Scalar>,
    ) -> Res<ir::Expr> {
        let map = match &e.kind {
            ast::ExprKind::Name(n) => match self.lookup(n) {
                Some(Binding::TensorMap(i)) => {
                    let ty = Type::TensorMap(self.tensor_maps[*i as usize].elem);
                    Some(mk(ir::ExprKind::TensorMap(*i), ty, e.span))
                }
                Some(Binding::Var(id)) => match &self.vars[id.0 as usize].ty {
                    ty @ Type::TensorMap(_) => Some(mk(ir::ExprKind::Var(*id), ty.clone(), e.span)),
                    _ => None,
                },
                Some(Binding::Poisoned) => return Err(Reported),
                _ => None,
            },
            _ => None,
        };
        let Some(map) = map else {
            let d = Diagnostic::error(
                format!("{what} must be a tensor map (`let m = tensor_map(...)` in the kernel, or a `tensor_map<T>` parameter)"),
                e.span,
            );
            return Err(self.error(d));
        };
        match elem {
            Some(elem) if map.ty != Type::TensorMap(elem) => {
                let d = Diagnostic::error(
                    format!(
                        "{what} must be a `{}`, found `{}`",
                        Type::TensorMap(elem),
                        map.ty
                    ),
                    e.span,
                );
                Err(self.error(d))
            }
            _ => Ok(map),
        }
    }

    /// A shared-memory address operand: a view, or an element of a shared array `s[i][j]`
    /// (its address, through the array's layout).
    fn address(&mut self, e: &ast::Expr) -> Res<ir::Expr> {
        if self.indexes_shared(e) {
            return Ok(self.place(e)?.ptr);
        }
        self.value(e, None)
    }

    /// `ldmatrix_xN(row, trans)`: `row` is this lane's row address in shared memory.
    fn ldmatrix(&mut self, name: &str, count: u8, args: &[ast::Expr], span: Span) -> Res<ir::Expr> {
        self.arity(name, args, 2, span)?;
        let ptr = self.address(&args[0]);
        let trans = self.expect(&args[1], &Type::Scalar(Scalar::Bool), "`trans`");
        let (ptr, trans) = (ptr?, trans?);
        let trans = match eval_or_report(self.ck, &trans, "`trans`")? {
            ConstValue::Bool(t) => t,
            _ => return Err(self.bad_arg(name, "a constant `trans`", &trans)),
        };
        let elem = match &ptr.ty {
            Type::View {
                space: Space::Shared,
                elem,
                ..
            } => elem
                .scalar()
                .filter(|s| matches!(s, Scalar::F16 | Scalar::Bf16 | Scalar::I8)),
            _ => None,
        };
        let Some(elem) = elem else {
            return Err(self.bad_arg(name, "a shared view of `f16`, `bf16` or `i8`", &ptr));
        };
        if trans && elem == Scalar::I8 {
            let d = Diagnostic::error(
                format!("`{name}` cannot transpose `i8` data: it moves 16-bit units"),
                args[1].span,
            );
            return Err(self.error(d));
        }
        let ty = match count {
            1 => Frag::new(FragRole::B, elem).map(Frag::reg_type),
            2 => Frag::new(FragRole::B, elem).map(Type::Frag),
            _ => Frag::new(FragRole::A, elem).map(Type::Frag),
        };
        let ty = ty.ok_or_else(|| self.bad_arg(name, "an operand element type", &ptr))?;
        Ok(mk(
            ir::ExprKind::Builtin(Builtin::Ldmatrix { count, trans }, vec![ptr]),
            ty,
            span,
        ))
    }

    /// `cp_async(dst, src, bytes, valid)`.
    fn cp_async(&mut self, args: &[ast::Expr], span: Span) -> Res<ir::Expr> {
        self.arity("cp_async", args, 4, span)?;
        let dst = self.address(&args[0]);
        let src = self.value(&args[1], None);
        let bytes = self.const_int(&args[2], Scalar::U32, "the size of `cp_async`", 4..=16);
        let valid = self.expect(
            &args[3],
            &Type::Scalar(Scalar::Bool),
            "the `valid` flag of `cp_async`",
        );
        let (dst, src, bytes, valid) = (dst?, src?, bytes?, valid?);
        if !matches!(
            dst.ty,
            Type::View {
                space: Space::Shared,
                mutable: true,
                ..
            }
        ) {
            return Err(self.bad_arg("cp_async", "a `shared mut` view as destination", &dst));
        }
        if !matches!(
            src.ty,
            Type::View {
                space: Space::Global,
                ..
            }
        ) {
            return Err(self.bad_arg("cp_async", "a `global` view as source", &src));
        }
        if ![4, 8, 16].contains(&bytes) {
            let d = Diagnostic::error(
                format!("`cp_async` copies 4, 8 or 16 bytes, not {bytes}"),
                args[2].span,
            );
            return Err(self.error(d));
        }
        Ok(mk(
            ir::ExprKind::Builtin(
                Builtin::CpAsync { bytes: bytes as u8 },
                vec![dst, src, valid],
            ),
            Type::Void,
            span,
        ))
    }

    /// `frag(r0, ...)`: a fragment of the type the context wants, from its registers.
    fn frag_build(&mut self, args: &[ast::Expr], want: Option<&Type>, span: Span) -> Res<ir::Expr> {
        let Some(Type::Frag(frag)) = want else {
            let d = Diagnostic::error(
                "`frag(...)` builds the fragment type its context expects, and this context expects none",
                span,
            )
            .with_note("declare it: `let b: frag_b<f16> = frag(r0, r1);`", None);
            return Err(self.error(d));
        };
        let frag = *frag;
        self.arity("frag", args, usize::from(frag.regs()), span)?;
        let reg = frag.reg_type();
        let checked: Vec<_> = args
            .iter()
            .map(|a| self.expect(a, &reg, "a fragment register"))
            .collect();
        let regs = checked.into_iter().collect::<Res<Vec<_>>>()?;
        Ok(mk(ir::ExprKind::VectorBuild(regs), Type::Frag(frag), span))
    }

    fn bad_arg(&mut self, name: &str, need: &str, got: &ir::Expr) -> super::Reported {
        let d = Diagnostic::error(
            format!("`{name}` needs {need}, found `{}`", got.ty),
            got.span,
        );
        self.error(d)
    }

    /// Two arguments of one type.
    fn same_type(
        &mut self,
        name: &str,
        a: &ast::Expr,
        b: &ast::Expr,
        want: Option<&Type>,
        span: Span,
    ) -> Res<(ir::Expr, ir::Expr)> {
        let (x, y) = self.unify(a, b, want)?;
        if x.ty != y.ty {
            let d = Diagnostic::error(
                format!(
                    "mismatched types: the arguments of `{name}` are `{}` and `{}`",
                    x.ty, y.ty
                ),
                span,
            );
            return Err(self.error(d));
        }
        Ok((x, y))
    }

    /// The first argument of an atomic: a writable element `v[i]` of a 32- or 64-bit integer,
    /// or of the floats that `floats` admits.
    fn atomic_place(
        &mut self,
        name: &str,
        arg: &ast::Expr,
        floats: Floats,
    ) -> Res<(ir::Expr, Type)> {
        if !matches!(arg.kind, ast::ExprKind::Index(..)) {
            let d = Diagnostic::error(
                format!("the first argument of `{name}` must be an element of a view, like `v[i]`"),
                arg.span,
            );
            return Err(self.error(d));
        }
        let place = self.place(arg)?;
        self.check_writable(&place, arg.span)?;
        let ok = match place.elem.scalar() {
            Some(s) if s.is_int() => s.size() >= 4,
            Some(Scalar::F32 | Scalar::F64) => floats != Floats::No,
            Some(Scalar::F16) => floats == Floats::AndHalf,
            _ => false,
        };
        if !ok {
            let need = match floats {
                Floats::No => "a 32- or 64-bit integer element",
                Floats::Yes => "a 32- or 64-bit integer or float element",
                Floats::AndHalf => "a 32- or 64-bit integer, `f16`, `f32` or `f64` element",
            };
            let d = Diagnostic::error(
                format!("`{name}` needs {need}, found `{}`", place.elem),
                arg.span,
            );
            return Err(self.error(d));
        }
        Ok((place.ptr, place.elem))
    }
}

/// The float elements an atomic takes: none (bitwise), `f32` and `f64`, or those and `f16`
/// (`atomic_add`: PTX's `atom.add.noftz.f16`, sm_70 and later).
#[derive(Copy, Clone, PartialEq, Eq)]
enum Floats {
    No,
    Yes,
    AndHalf,
}
