//! Special registers, math, warp shuffles and votes, atomics.

use inkwell::types::{BasicType, BasicTypeEnum};
use inkwell::values::BasicValueEnum;
use zinc_dsl::diag::{Diagnostic, Span};
use zinc_dsl::ir::{
    AtomicOp, Axis, Builtin, Expr, FunctionKind, MathFn, Scalar, ShuffleMode, Special, Type,
    VoteMode,
};

use super::ll::{self, Op, RmwOp};
use super::types::elem_scalar;
use super::{internal, At, FnLowerer, Result};

const LOG2_E: f64 = std::f64::consts::LOG2_E;
const LN_2: f64 = std::f64::consts::LN_2;
const FULL_WARP: u64 = 0xffff_ffff;

fn math_name(f: MathFn) -> &'static str {
    match f {
        MathFn::Exp => "exp",
        MathFn::Log => "log",
        MathFn::Exp2 => "exp2",
        MathFn::Log2 => "log2",
        MathFn::Sqrt => "sqrt",
        MathFn::Rsqrt => "rsqrt",
        MathFn::Rcp => "rcp",
        MathFn::Tanh => "tanh",
        MathFn::Sin => "sin",
        MathFn::Cos => "cos",
        MathFn::Abs => "abs",
        MathFn::Floor => "floor",
        MathFn::Ceil => "ceil",
    }
}

fn axis(a: Axis) -> &'static str {
    match a {
        Axis::X => "x",
        Axis::Y => "y",
        Axis::Z => "z",
    }
}

impl<'a, 'ctx> FnLowerer<'a, 'ctx> {
    fn sreg(&self, name: &str, span: Span) -> Result<BasicValueEnum<'ctx>> {
        self.intrinsic_value(&format!("llvm.nvvm.read.ptx.sreg.{name}"), &[], &[], span)
    }

    fn u32_const(&self, v: u64) -> BasicValueEnum<'ctx> {
        self.ctx.i32_type().const_int(v, false).into()
    }

    pub(super) fn special(&self, s: Special, span: Span) -> Result<BasicValueEnum<'ctx>> {
        match s {
            Special::ThreadIdx(a) => self.sreg(&format!("tid.{}", axis(a)), span),
            Special::BlockIdx(a) => self.sreg(&format!("ctaid.{}", axis(a)), span),
            Special::BlockDim(a) => self.sreg(&format!("ntid.{}", axis(a)), span),
            Special::GridDim(a) => self.sreg(&format!("nctaid.{}", axis(a)), span),
            Special::Lane => self.sreg("laneid", span),
            Special::Warp => {
                let b = &self.b;
                let tid_x = self.sreg("tid.x", span)?;
                let one_d =
                    matches!(&self.f.kind, FunctionKind::Kernel(l) if l.block[1..] == [1, 1]);
                let linear = if one_d {
                    tid_x
                } else {
                    // tid.x + ntid.x * (tid.y + ntid.y * tid.z)
                    let (tid_y, tid_z) = (self.sreg("tid.y", span)?, self.sreg("tid.z", span)?);
                    let (ntid_x, ntid_y) = (self.sreg("ntid.x", span)?, self.sreg("ntid.y", span)?);
                    let yz = ll::binop(b, Op::LLVMMul, ntid_y, tid_z);
                    let yz = ll::binop(b, Op::LLVMAdd, tid_y, yz);
                    let yz = ll::binop(b, Op::LLVMMul, ntid_x, yz);
                    ll::binop(b, Op::LLVMAdd, tid_x, yz)
                };
                Ok(ll::binop(b, Op::LLVMLShr, linear, self.u32_const(5)))
            }
        }
    }

    pub(super) fn builtin(
        &mut self,
        builtin: Builtin,
        args: &[Expr],
        ty: &Type,
        span: Span,
    ) -> Result<Option<BasicValueEnum<'ctx>>> {
        let vals = args
            .iter()
            .map(|a| self.value(a))
            .collect::<Result<Vec<_>>>()?;
        let arg_ty = args.first().map(|a| &a.ty).unwrap_or(ty);
        let arity = |n: usize| match vals.len() == n {
            true => Ok(()),
            false => Err(internal(
                format!("{builtin:?} takes {n} arguments, got {}", vals.len()),
                span,
            )),
        };
        let v = match builtin {
            Builtin::Math(f) => {
                arity(1)?;
                self.math(f, vals[0], arg_ty, span)?
            }
            Builtin::Max | Builtin::Min => {
                arity(2)?;
                let s = self.scalar_of(arg_ty, span)?;
                let max = builtin == Builtin::Max;
                let name = match (s.is_float(), s.is_signed(), max) {
                    // maxnum/minnum: a NaN operand yields the other one, like fmaxf.
                    (true, _, true) => "llvm.maxnum",
                    (true, _, false) => "llvm.minnum",
                    (false, true, true) => "llvm.smax",
                    (false, true, false) => "llvm.smin",
                    (false, false, true) => "llvm.umax",
                    (false, false, false) => "llvm.umin",
                };
                let lt = self.value_type(arg_ty, span)?;
                self.intrinsic_value(name, &[lt], &vals, span)?
            }
            Builtin::Fma => {
                arity(3)?;
                let lt = self.value_type(arg_ty, span)?;
                self.intrinsic_value("llvm.fma", &[lt], &vals, span)?
            }
            Builtin::Shuffle(mode) => {
                arity(2)?;
                self.shuffle(mode, vals[0], vals[1], arg_ty, span)?
            }
            Builtin::Vote(mode) => {
                arity(1)?;
                let name = match mode {
                    VoteMode::All => "llvm.nvvm.vote.all.sync",
                    VoteMode::Any => "llvm.nvvm.vote.any.sync",
                    VoteMode::Ballot => "llvm.nvvm.vote.ballot.sync",
                };
                self.intrinsic_value(name, &[], &[self.u32_const(FULL_WARP), vals[0]], span)?
            }
            Builtin::Atomic(op) => {
                arity(2)?;
                self.atomic(op, &args[0], vals[0], vals[1], span)?
            }
            Builtin::AtomicCas => {
                arity(3)?;
                self.atomic_cas(&args[0], vals[0], vals[1], vals[2], span)?
            }
            Builtin::Mma => {
                let elem = match arg_ty {
                    Type::Frag(f) => f.elem,
                    _ => return Err(internal("mma of a non-fragment", span)),
                };
                self.mma(&vals, elem, span)?
            }
            Builtin::Ldmatrix { count, trans } => {
                arity(1)?;
                self.ldmatrix(vals[0], count, trans, ty, span)?
            }
            Builtin::CpAsync { bytes } => {
                self.cp_async(&vals, bytes, span)?;
                return Ok(None);
            }
            Builtin::CpAsyncCommit => {
                self.cp_async_commit(span)?;
                return Ok(None);
            }
            Builtin::CpAsyncWait(groups) => {
                self.cp_async_wait(groups, span)?;
                return Ok(None);
            }
            Builtin::Prmt => {
                arity(3)?;
                self.intrinsic_value("llvm.nvvm.prmt", &[], &vals, span)?
            }
            Builtin::Lop3(lut) => {
                arity(3)?;
                self.lop3(&vals, lut, span)?
            }
            Builtin::Nanosleep => {
                arity(1)?;
                self.call_intrinsic("llvm.nvvm.nanosleep", &[], &vals, span)?;
                return Ok(None);
            }
            Builtin::Wgmma { acc, first, n } => {
                arity(2)?;
                self.wgmma((acc, first, n), vals[0], vals[1], span)?;
                return Ok(None);
            }
            Builtin::ClusterRank => {
                arity(0)?;
                self.sreg("cluster.ctarank", span)?
            }
            Builtin::Timer(global) => {
                arity(0)?;
                self.sreg(if global { "globaltimer" } else { "clock64" }, span)?
            }
            Builtin::ClusterSync => {
                arity(0)?;
                self.call_intrinsic("llvm.nvvm.barrier.cluster.arrive", &[], &[], span)?;
                self.call_intrinsic("llvm.nvvm.barrier.cluster.wait", &[], &[], span)?;
                return Ok(None);
            }
            Builtin::MbarrierInit
            | Builtin::MbarrierExpectTx
            | Builtin::MbarrierArrive
            | Builtin::MbarrierArriveCluster
            | Builtin::MbarrierWait
            | Builtin::TmaLoad
            | Builtin::TmaLoadMulticast
            | Builtin::TmaPrefetch
            | Builtin::TmaStore(_)
            | Builtin::TmaStoreCommit
            | Builtin::TmaStoreWait(_)
            | Builtin::TmaStoreDone(_) => {
                self.async_copy_op(builtin, &vals, span)?;
                return Ok(None);
            }
            Builtin::WgmmaFence
            | Builtin::WgmmaCommit
            | Builtin::WgmmaWait(_)
            | Builtin::FenceProxyAsync
            | Builtin::FenceProxyAsyncGlobal
            | Builtin::FenceGpu
            | Builtin::SyncWarp => {
                let (name, args) = match builtin {
                    Builtin::FenceProxyAsync => ("llvm.nvvm.fence.proxy.async.shared_cta", vec![]),
                    Builtin::FenceProxyAsyncGlobal => {
                        ("llvm.nvvm.fence.proxy.async.global", vec![])
                    }
                    Builtin::FenceGpu => ("llvm.nvvm.membar.gl", vec![]),
                    Builtin::SyncWarp => {
                        let all = self.ctx.i32_type().const_all_ones();
                        ("llvm.nvvm.bar.warp.sync", vec![all.into()])
                    }
                    Builtin::WgmmaFence => ("llvm.nvvm.wgmma.fence.sync.aligned", vec![]),
                    Builtin::WgmmaCommit => ("llvm.nvvm.wgmma.commit_group.sync.aligned", vec![]),
                    _ => {
                        let Builtin::WgmmaWait(groups) = builtin else {
                            unreachable!("matched above")
                        };
                        let n = self.ctx.i64_type().const_int(u64::from(groups), false);
                        ("llvm.nvvm.wgmma.wait_group.sync.aligned", vec![n.into()])
                    }
                };
                self.call_intrinsic(name, &[], &args, span)?;
                return Ok(None);
            }
            Builtin::SetMaxNReg { increase, regs } => {
                let name = match increase {
                    true => "llvm.nvvm.setmaxnreg.inc.sync.aligned.u32",
                    false => "llvm.nvvm.setmaxnreg.dec.sync.aligned.u32",
                };
                let regs = self.ctx.i32_type().const_int(u64::from(regs), false);
                self.call_intrinsic(name, &[], &[regs.into()], span)?;
                return Ok(None);
            }
            Builtin::Dp4a { unsigned_a } => {
                arity(3)?;
                let name = match unsigned_a {
                    true => "llvm.nvvm.idp4a.u.s",
                    false => "llvm.nvvm.idp4a.s.s",
                };
                self.intrinsic_value(name, &[], &vals, span)?
            }
        };
        Ok(Some(v))
    }

    /// Math on floats (and `abs` on signed ints). f16/bf16 compute in f32; vectors lane-wise.
    fn math(
        &self,
        f: MathFn,
        x: BasicValueEnum<'ctx>,
        ty: &Type,
        span: Span,
    ) -> Result<BasicValueEnum<'ctx>> {
        let s = self.scalar_of(ty, span)?;
        if let BasicValueEnum::VectorValue(vec) = x {
            let mut out = vec.get_type().get_poison();
            for i in 0..vec.get_type().get_size() {
                let idx = self.ctx.i32_type().const_int(u64::from(i), false);
                let lane = self.b.build_extract_element(vec, idx, "").at(span)?;
                let r = self.scalar_math(f, lane, s, span)?;
                out = self.b.build_insert_element(out, r, idx, "").at(span)?;
            }
            return Ok(out.into());
        }
        self.scalar_math(f, x, s, span)
    }

    fn scalar_math(
        &self,
        f: MathFn,
        x: BasicValueEnum<'ctx>,
        s: Scalar,
        span: Span,
    ) -> Result<BasicValueEnum<'ctx>> {
        let ty = x.get_type();
        match s {
            Scalar::F32 => self.math_f32(f, x, span),
            Scalar::F16 | Scalar::Bf16 => {
                let wide = ll::cast(&self.b, Op::LLVMFPExt, x, self.ctx.f32_type().into());
                let r = self.math_f32(f, wide, span)?;
                Ok(ll::cast(&self.b, Op::LLVMFPTrunc, r, ty))
            }
            Scalar::F64 => match f {
                MathFn::Sqrt => self.intrinsic_value("llvm.sqrt", &[ty], &[x], span),
                MathFn::Abs => self.intrinsic_value("llvm.fabs", &[ty], &[x], span),
                MathFn::Floor => self.intrinsic_value("llvm.floor", &[ty], &[x], span),
                MathFn::Ceil => self.intrinsic_value("llvm.ceil", &[ty], &[x], span),
                MathFn::Rsqrt => self.intrinsic_value("llvm.nvvm.rsqrt.approx.d", &[], &[x], span),
                _ => Err(Diagnostic::error(
                    format!(
                        "`{}` is not supported for f64 yet (only sqrt, rsqrt, abs, floor and ceil are)",
                        math_name(f)
                    ),
                    span,
                )
                .with_note("compute in f32 with `x as f32` if its precision is enough", None)),
            },
            _ if f == MathFn::Abs && s.is_signed() => {
                // is_int_min_poison = false: abs(INT_MIN) stays INT_MIN, as in PTX abs.
                let no_poison = self.ctx.bool_type().const_zero().into();
                self.intrinsic_value("llvm.abs", &[ty], &[x, no_poison], span)
            }
            _ => Err(Diagnostic::error(
                format!("`{}` needs a float argument, not {}", math_name(f), s.name()),
                span,
            )),
        }
    }

    /// f32 math with PTX's approximate instructions, like CUDA's fast-math intrinsics.
    fn math_f32(
        &self,
        f: MathFn,
        x: BasicValueEnum<'ctx>,
        span: Span,
    ) -> Result<BasicValueEnum<'ctx>> {
        let f32_ty: BasicTypeEnum = self.ctx.f32_type().into();
        let scaled = |c: f64| {
            ll::binop(
                &self.b,
                Op::LLVMFMul,
                x,
                self.ctx.f32_type().const_float(c).into(),
            )
        };
        // Results below 2^-126 flush to zero: ptxas wraps the plain form in a rescaling (a
        // compare and two multiplies) to keep them, which costs as much as the instruction.
        let ex2 = |v| self.intrinsic_value("llvm.nvvm.ex2.approx.ftz", &[f32_ty], &[v], span);
        let lg2 = |v| self.intrinsic_value("llvm.nvvm.lg2.approx.f", &[], &[v], span);
        match f {
            MathFn::Exp => ex2(scaled(LOG2_E)),
            MathFn::Exp2 => ex2(x),
            MathFn::Log => {
                let l = lg2(x)?;
                let ln2 = self.ctx.f32_type().const_float(LN_2).into();
                Ok(ll::binop(&self.b, Op::LLVMFMul, l, ln2))
            }
            MathFn::Log2 => lg2(x),
            MathFn::Sqrt => self.intrinsic_value("llvm.sqrt", &[f32_ty], &[x], span),
            MathFn::Rsqrt => self.intrinsic_value("llvm.nvvm.rsqrt.approx.f", &[], &[x], span),
            // Subnormals flush to zero (ptxas wraps the plain form in a rescaling that costs as
            // much as the reciprocal: an approximation for speed should not).
            MathFn::Rcp => self.intrinsic_value("llvm.nvvm.rcp.approx.ftz.f", &[], &[x], span),
            // LLVM 22 has no NVVM tanh intrinsic; `llvm.tanh` lowers only under `afn` and
            // aborts without it, so the instruction is written out (sm_75+, PTX 7.0+).
            MathFn::Tanh => self.pure_asm("tanh.approx.f32 $0, $1;", "=f,f", f32_ty, &[x], span),
            MathFn::Sin => self.intrinsic_value("llvm.nvvm.sin.approx.f", &[], &[x], span),
            MathFn::Cos => self.intrinsic_value("llvm.nvvm.cos.approx.f", &[], &[x], span),
            MathFn::Abs => self.intrinsic_value("llvm.fabs", &[f32_ty], &[x], span),
            MathFn::Floor => self.intrinsic_value("llvm.floor", &[f32_ty], &[x], span),
            MathFn::Ceil => self.intrinsic_value("llvm.ceil", &[f32_ty], &[x], span),
        }
    }

    /// Full-warp shuffle of a 32-bit value (other 32-bit types travel as i32).
    fn shuffle(
        &self,
        mode: ShuffleMode,
        v: BasicValueEnum<'ctx>,
        lane: BasicValueEnum<'ctx>,
        ty: &Type,
        span: Span,
    ) -> Result<BasicValueEnum<'ctx>> {
        if ty.size() != 4 || elem_scalar(ty) == Some(Scalar::Bool) {
            return Err(Diagnostic::error(
                "warp shuffles move 32-bit values (i32, u32, f32, f16x2, ...)",
                span,
            ));
        }
        let (name, clamp) = match mode {
            ShuffleMode::Xor => ("bfly", 0x1f),
            ShuffleMode::Down => ("down", 0x1f),
            // For `up` the clamp is the lowest lane that receives, 0 for a full warp.
            ShuffleMode::Up => ("up", 0),
            ShuffleMode::Idx => ("idx", 0x1f),
        };
        let is_f32 = *ty == Type::Scalar(Scalar::F32);
        let i32_ty: BasicTypeEnum = self.ctx.i32_type().into();
        let bits = match is_f32 {
            true => v,
            false => ll::cast(&self.b, Op::LLVMBitCast, v, i32_ty),
        };
        let suffix = if is_f32 { "f32" } else { "i32" };
        let args = [self.u32_const(FULL_WARP), bits, lane, self.u32_const(clamp)];
        let r = self.intrinsic_value(
            &format!("llvm.nvvm.shfl.sync.{name}.{suffix}"),
            &[],
            &args,
            span,
        )?;
        Ok(match is_f32 {
            true => r,
            false => ll::cast(&self.b, Op::LLVMBitCast, r, v.get_type()),
        })
    }

    /// The element scalar of an atomic's view, which must be 32 or 64 bits wide.
    fn atomic_scalar(&self, ptr: &Expr, span: Span) -> Result<Scalar> {
        match &ptr.ty {
            Type::View { elem, .. } => match **elem {
                // f16: `atomic_add` only (the checker's rule).
                Type::Scalar(s) if s != Scalar::Bool && matches!(s.size(), 4 | 8) => Ok(s),
                Type::Scalar(Scalar::F16) => Ok(Scalar::F16),
                _ => Err(Diagnostic::error(
                    "atomics work on 32- and 64-bit scalars and f16",
                    span,
                )),
            },
            _ => Err(internal("atomic on a non-view", span)),
        }
    }

    fn atomic(
        &self,
        op: AtomicOp,
        ptr_expr: &Expr,
        ptr: BasicValueEnum<'ctx>,
        v: BasicValueEnum<'ctx>,
        span: Span,
    ) -> Result<BasicValueEnum<'ctx>> {
        let s = self.atomic_scalar(ptr_expr, span)?;
        let (float, signed) = (s.is_float(), s.is_signed());
        let rmw = match op {
            AtomicOp::Add if float => RmwOp::LLVMAtomicRMWBinOpFAdd,
            AtomicOp::Add => RmwOp::LLVMAtomicRMWBinOpAdd,
            AtomicOp::Max if float => RmwOp::LLVMAtomicRMWBinOpFMax,
            AtomicOp::Max if signed => RmwOp::LLVMAtomicRMWBinOpMax,
            AtomicOp::Max => RmwOp::LLVMAtomicRMWBinOpUMax,
            AtomicOp::Min if float => RmwOp::LLVMAtomicRMWBinOpFMin,
            AtomicOp::Min if signed => RmwOp::LLVMAtomicRMWBinOpMin,
            AtomicOp::Min => RmwOp::LLVMAtomicRMWBinOpUMin,
            AtomicOp::And | AtomicOp::Or | AtomicOp::Xor if float => {
                return Err(Diagnostic::error(
                    "bitwise atomics need an integer element type",
                    span,
                ));
            }
            AtomicOp::And => RmwOp::LLVMAtomicRMWBinOpAnd,
            AtomicOp::Or => RmwOp::LLVMAtomicRMWBinOpOr,
            AtomicOp::Xor => RmwOp::LLVMAtomicRMWBinOpXor,
            AtomicOp::Exch => RmwOp::LLVMAtomicRMWBinOpXchg,
        };
        Ok(ll::atomic_rmw(
            &self.b,
            self.ctx,
            rmw,
            ptr.into_pointer_value(),
            v,
        ))
    }

    fn atomic_cas(
        &self,
        ptr_expr: &Expr,
        ptr: BasicValueEnum<'ctx>,
        expected: BasicValueEnum<'ctx>,
        new: BasicValueEnum<'ctx>,
        span: Span,
    ) -> Result<BasicValueEnum<'ctx>> {
        let s = self.atomic_scalar(ptr_expr, span)?;
        let ty = expected.get_type();
        // cmpxchg compares integers: floats go in as their bits (so -0.0 != 0.0, NaN == NaN).
        let int_ty: BasicTypeEnum = match s.size() {
            4 => self.ctx.i32_type().into(),
            _ => self.ctx.i64_type().into(),
        };
        let bits = |v| match s.is_float() {
            true => ll::cast(&self.b, Op::LLVMBitCast, v, int_ty),
            false => v,
        };
        let old = ll::cmpxchg(
            &self.b,
            self.ctx,
            ptr.into_pointer_value(),
            bits(expected),
            bits(new),
        );
        Ok(match s.is_float() {
            true => ll::cast(&self.b, Op::LLVMBitCast, old, ty),
            false => old,
        })
    }

    /// A side-effect-free inline asm (LLVM may hoist, merge or drop it).
    pub(super) fn pure_asm(
        &self,
        template: &str,
        constraints: &str,
        ret: BasicTypeEnum<'ctx>,
        args: &[BasicValueEnum<'ctx>],
        span: Span,
    ) -> Result<BasicValueEnum<'ctx>> {
        let params: Vec<_> = args.iter().map(|a| a.get_type().into()).collect();
        let args: Vec<_> = args.iter().map(|&a| a.into()).collect();
        let fn_ty = ret.fn_type(&params, false);
        let asm = self.ctx.create_inline_asm(
            fn_ty,
            template.to_string(),
            constraints.to_string(),
            false,
            false,
            None,
            false,
        );
        let site = self.b.build_indirect_call(fn_ty, asm, &args, "").at(span)?;
        site.try_as_basic_value()
            .basic()
            .ok_or_else(|| internal("inline asm without a result", span))
    }
}
