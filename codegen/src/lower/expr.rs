//! Expressions: constants, variables, arithmetic, casts, views (offsets, loads) and vectors.

use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValue, BasicValueEnum, IntValue, PointerValue};
use zinc_dsl::diag::Span;
use zinc_dsl::ir::{BinOp, ConstValue, Expr, ExprKind, LogicalOp, Scalar, Type, UnOp};

use super::ll::{self, IntPred, Op, RealPred};
use super::types::{align, elem_scalar};
use super::{internal, At, FnLowerer, Result};

/// `ty` with its scalar replaced by `s` (same number of lanes).
pub(super) fn with_scalar(ty: &Type, s: Scalar) -> Type {
    match ty {
        Type::Vector(_, n) => Type::Vector(s, *n),
        _ => Type::Scalar(s),
    }
}

impl<'a, 'ctx> FnLowerer<'a, 'ctx> {
    /// Lowers an expression; None for one of type void.
    pub(super) fn expr(&mut self, e: &Expr) -> Result<Option<BasicValueEnum<'ctx>>> {
        let span = e.span;
        let v = match &e.kind {
            ExprKind::Const(c) => self.constant(c, &e.ty, span)?,
            ExprKind::Var(id) => {
                let ty = self.value_type(&e.ty, span)?;
                self.b
                    .build_load(ty, self.vars[id.0 as usize], "")
                    .at(span)?
            }
            ExprKind::Element { var, index } => {
                let slot = self.element_slot(*var, index, span)?;
                let ty = self.value_type(&e.ty, span)?;
                self.b.build_load(ty, slot, "").at(span)?
            }
            ExprKind::SharedArray(id) => self.shared[id.0 as usize].into(),
            ExprKind::TensorMap(map) => self.tensor_map(*map, span)?.into(),
            ExprKind::Unary(op, x) => {
                let s = self.scalar_of(&x.ty, span)?;
                let v = self.value(x)?;
                match op {
                    UnOp::Neg => ll::neg(&self.b, v, s.is_float()),
                    UnOp::Not => ll::not(&self.b, v),
                }
            }
            ExprKind::Binary(op, l, r) => self.binary(*op, l, r)?,
            ExprKind::Logical(op, l, r) => self.logical(*op, l, r, span)?,
            ExprKind::Cast(x) => {
                let v = self.value(x)?;
                self.cast(v, &x.ty, &e.ty, span)?
            }
            ExprKind::Select(c, t, f) => {
                let (c, t, f) = (self.value(c)?, self.value(t)?, self.value(f)?);
                ll::select(&self.b, c, t, f)
            }
            ExprKind::Offset { base, index } => self.offset(base, index, span)?.into(),
            ExprKind::Load(ptr) => self.load(ptr)?,
            ExprKind::VectorBuild(regs) if matches!(e.ty, Type::Frag(_)) => {
                let Type::Frag(frag) = e.ty else {
                    unreachable!("matched above")
                };
                let regs = regs
                    .iter()
                    .map(|r| self.value(r))
                    .collect::<Result<Vec<_>>>()?;
                self.frag_value(frag, &regs, span)?
            }
            ExprKind::VectorBuild(lanes) => {
                let ty = self.value_type(&e.ty, span)?.into_vector_type();
                let mut v = ty.get_poison();
                for (i, lane) in lanes.iter().enumerate() {
                    let x = self.value(lane)?;
                    let idx = self.ctx.i32_type().const_int(i as u64, false);
                    v = self.b.build_insert_element(v, x, idx, "").at(span)?;
                }
                v.into()
            }
            ExprKind::Extract(x, reg) if matches!(x.ty, Type::Frag(_)) => {
                let v = self.value(x)?.into_array_value();
                self.b
                    .build_extract_value(v, u32::from(*reg), "")
                    .at(span)?
            }
            ExprKind::Bitcast(x) => {
                let v = self.value(x)?;
                self.bitcast_to(v, &e.ty, span)?
            }
            ExprKind::Extract(x, lane) => {
                let v = self.value(x)?.into_vector_value();
                let idx = self.ctx.i32_type().const_int(u64::from(*lane), false);
                self.b.build_extract_element(v, idx, "").at(span)?
            }
            ExprKind::Special(s) => self.special(*s, span)?,
            ExprKind::Builtin(b, args) => return self.builtin(*b, args, &e.ty, span),
            ExprKind::Call(id, args) => {
                let args = args
                    .iter()
                    .map(|a| self.value(a))
                    .collect::<Result<Vec<_>>>()?;
                return self.call(self.fns[id.0 as usize], &args, span);
            }
            ExprKind::Intrinsic { name, args } => {
                return self.user_intrinsic(name, args, &e.ty, span)
            }
            ExprKind::InlineAsm {
                template,
                constraints,
                args,
            } => return self.inline_asm(template, constraints, args, &e.ty, span),
        };
        Ok(Some(v))
    }

    /// Lowers an expression that must have a value.
    pub(super) fn value(&mut self, e: &Expr) -> Result<BasicValueEnum<'ctx>> {
        self.expr(e)?
            .ok_or_else(|| internal("a void expression used as a value", e.span))
    }

    pub(super) fn scalar_of(&self, ty: &Type, span: Span) -> Result<Scalar> {
        elem_scalar(ty).ok_or_else(|| internal("expected a scalar or vector operand", span))
    }

    /// A constant of a scalar type (splatted for a vector type).
    fn constant(&self, c: &ConstValue, ty: &Type, span: Span) -> Result<BasicValueEnum<'ctx>> {
        if let Type::Frag(frag) = ty {
            let reg = self.constant(c, &frag.reg_type(), span)?;
            return self.frag_splat(*frag, reg, span);
        }
        if let Type::Array { elem, dims } = ty {
            let x = self.constant(c, elem, span)?;
            let ty = self.value_type(ty, span)?.into_array_type();
            let mut array = ty.get_poison();
            for i in 0..dims.iter().product() {
                array = self
                    .b
                    .build_insert_value(array, x, i, "")
                    .at(span)?
                    .into_array_value();
            }
            return Ok(array.into());
        }
        let scalar_ty = self.value_type(&Type::Scalar(self.scalar_of(ty, span)?), span)?;
        let v: BasicValueEnum = match (c, scalar_ty) {
            (ConstValue::Bool(b), BasicTypeEnum::IntType(t)) => {
                t.const_int(u64::from(*b), false).into()
            }
            // Two's complement truncation to the type's width is exactly the stored value.
            (ConstValue::Int(i), BasicTypeEnum::IntType(t)) => t.const_int(*i as u64, false).into(),
            (ConstValue::Int(i), BasicTypeEnum::FloatType(t)) => t.const_float(*i as f64).into(),
            (ConstValue::Float(x), BasicTypeEnum::FloatType(t)) => t.const_float(*x).into(),
            _ => return Err(internal(format!("constant {c:?} of type {ty:?}"), span)),
        };
        Ok(match ty {
            Type::Vector(_, n) => self.splat(v, u32::from(*n), span)?,
            _ => v,
        })
    }

    fn splat(
        &self,
        v: BasicValueEnum<'ctx>,
        lanes: u32,
        span: Span,
    ) -> Result<BasicValueEnum<'ctx>> {
        let mut out = match v.get_type() {
            BasicTypeEnum::IntType(t) => t.vec_type(lanes).get_poison(),
            BasicTypeEnum::FloatType(t) => t.vec_type(lanes).get_poison(),
            _ => return Err(internal("splat of a non-scalar", span)),
        };
        for i in 0..lanes {
            let idx = self.ctx.i32_type().const_int(u64::from(i), false);
            out = self.b.build_insert_element(out, v, idx, "").at(span)?;
        }
        Ok(out.into())
    }

    fn binary(&mut self, op: BinOp, l: &Expr, r: &Expr) -> Result<BasicValueEnum<'ctx>> {
        let s = self.scalar_of(&l.ty, l.span)?;
        let (lv, rv) = (self.value(l)?, self.value(r)?);
        let (float, signed) = (s.is_float(), s.is_signed());
        let pick = |f: Op, sg: Op, u: Op| match (float, signed) {
            (true, _) => f,
            (false, true) => sg,
            (false, false) => u,
        };
        let opcode = match op {
            BinOp::Add => pick(Op::LLVMFAdd, Op::LLVMAdd, Op::LLVMAdd),
            BinOp::Sub => pick(Op::LLVMFSub, Op::LLVMSub, Op::LLVMSub),
            BinOp::Mul => pick(Op::LLVMFMul, Op::LLVMMul, Op::LLVMMul),
            BinOp::Div => pick(Op::LLVMFDiv, Op::LLVMSDiv, Op::LLVMUDiv),
            BinOp::Rem => pick(Op::LLVMFRem, Op::LLVMSRem, Op::LLVMURem),
            BinOp::And => Op::LLVMAnd,
            BinOp::Or => Op::LLVMOr,
            BinOp::Xor => Op::LLVMXor,
            BinOp::Shl => Op::LLVMShl,
            BinOp::Shr => pick(Op::LLVMLShr, Op::LLVMAShr, Op::LLVMLShr),
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                return Ok(self.compare(op, lv, rv, s));
            }
        };
        Ok(ll::binop(&self.b, opcode, lv, rv))
    }

    /// Comparisons: ordered for floats (false on NaN) except `!=`, which is true on NaN.
    pub(super) fn compare(
        &self,
        op: BinOp,
        l: BasicValueEnum<'ctx>,
        r: BasicValueEnum<'ctx>,
        s: Scalar,
    ) -> BasicValueEnum<'ctx> {
        if s.is_float() {
            let pred = match op {
                BinOp::Eq => RealPred::LLVMRealOEQ,
                BinOp::Ne => RealPred::LLVMRealUNE,
                BinOp::Lt => RealPred::LLVMRealOLT,
                BinOp::Le => RealPred::LLVMRealOLE,
                BinOp::Gt => RealPred::LLVMRealOGT,
                _ => RealPred::LLVMRealOGE,
            };
            return ll::fcmp(&self.b, pred, l, r);
        }
        let signed = s.is_signed();
        let pred = match op {
            BinOp::Eq => IntPred::LLVMIntEQ,
            BinOp::Ne => IntPred::LLVMIntNE,
            BinOp::Lt if signed => IntPred::LLVMIntSLT,
            BinOp::Lt => IntPred::LLVMIntULT,
            BinOp::Le if signed => IntPred::LLVMIntSLE,
            BinOp::Le => IntPred::LLVMIntULE,
            BinOp::Gt if signed => IntPred::LLVMIntSGT,
            BinOp::Gt => IntPred::LLVMIntUGT,
            _ if signed => IntPred::LLVMIntSGE,
            _ => IntPred::LLVMIntUGE,
        };
        ll::icmp(&self.b, pred, l, r)
    }

    /// `l && r`, `l || r`, evaluating `r` only when needed.
    fn logical(
        &mut self,
        op: LogicalOp,
        l: &Expr,
        r: &Expr,
        span: Span,
    ) -> Result<BasicValueEnum<'ctx>> {
        let lv = self.value(l)?.into_int_value();
        let from_lhs = self.current_block(span)?;
        let rhs = self.append_block("rhs");
        let merge = self.append_block("logic");
        let (on_true, on_false, shortcut) = match op {
            LogicalOp::And => (rhs, merge, false),
            LogicalOp::Or => (merge, rhs, true),
        };
        self.b
            .build_conditional_branch(lv, on_true, on_false)
            .at(span)?;
        self.b.position_at_end(rhs);
        let rv = self.value(r)?;
        let from_rhs = self.current_block(span)?;
        self.b.build_unconditional_branch(merge).at(span)?;
        self.b.position_at_end(merge);
        let bool_ty = self.ctx.bool_type();
        let phi = self.b.build_phi(bool_ty, "").at(span)?;
        phi.add_incoming(&[
            (&bool_ty.const_int(u64::from(shortcut), false), from_lhs),
            (&rv, from_rhs),
        ]);
        Ok(phi.as_basic_value())
    }

    pub(super) fn current_block(
        &self,
        span: Span,
    ) -> Result<inkwell::basic_block::BasicBlock<'ctx>> {
        self.b
            .get_insert_block()
            .ok_or_else(|| internal("builder is not positioned", span))
    }

    /// Converts `v` from `from` to `to` (scalars, or vectors lane-wise).
    pub(super) fn cast(
        &self,
        v: BasicValueEnum<'ctx>,
        from: &Type,
        to: &Type,
        span: Span,
    ) -> Result<BasicValueEnum<'ctx>> {
        let (fs, ts) = (self.scalar_of(from, span)?, self.scalar_of(to, span)?);
        if fs == ts {
            return Ok(v);
        }
        let to_ty = self.value_type(to, span)?;
        let cast = |op| ll::cast(&self.b, op, v, to_ty);
        Ok(match (fs, ts) {
            (_, Scalar::Bool) => {
                let zero = self.value_type(from, span)?.const_zero();
                match fs.is_float() {
                    // C semantics: NaN converts to true.
                    true => ll::fcmp(&self.b, RealPred::LLVMRealUNE, v, zero),
                    false => ll::icmp(&self.b, IntPred::LLVMIntNE, v, zero),
                }
            }
            (Scalar::Bool, t) if t.is_float() => cast(Op::LLVMUIToFP),
            (Scalar::Bool, _) => cast(Op::LLVMZExt),
            (f, t) if f.is_int() && t.is_int() => match f.size().cmp(&t.size()) {
                std::cmp::Ordering::Greater => cast(Op::LLVMTrunc),
                std::cmp::Ordering::Less if f.is_signed() => cast(Op::LLVMSExt),
                std::cmp::Ordering::Less => cast(Op::LLVMZExt),
                // Same width, other signedness: the same bits.
                std::cmp::Ordering::Equal => v,
            },
            (f, _) if f.is_int() => cast(if f.is_signed() {
                Op::LLVMSIToFP
            } else {
                Op::LLVMUIToFP
            }),
            (_, t) if t.is_int() => cast(if t.is_signed() {
                Op::LLVMFPToSI
            } else {
                Op::LLVMFPToUI
            }),
            // f16 <-> bf16 have the same width; go through f32.
            (Scalar::F16, Scalar::Bf16) | (Scalar::Bf16, Scalar::F16) => {
                let f32_ty = self.value_type(&with_scalar(from, Scalar::F32), span)?;
                let wide = ll::cast(&self.b, Op::LLVMFPExt, v, f32_ty);
                ll::cast(&self.b, Op::LLVMFPTrunc, wide, to_ty)
            }
            (f, t) if f.size() < t.size() => cast(Op::LLVMFPExt),
            _ => cast(Op::LLVMFPTrunc),
        })
    }

    /// An integer index as i64, extended by its signedness.
    fn index(&mut self, index: &Expr) -> Result<IntValue<'ctx>> {
        let s = self.scalar_of(&index.ty, index.span)?;
        let v = self.value(index)?;
        let i64_ty = self.ctx.i64_type();
        Ok(match s.size() {
            8 => v,
            _ if s.is_signed() => ll::cast(&self.b, Op::LLVMSExt, v, i64_ty.into()),
            _ => ll::cast(&self.b, Op::LLVMZExt, v, i64_ty.into()),
        }
        .into_int_value())
    }

    fn view_elem(ty: &Type, span: Span) -> Result<&Type> {
        match ty {
            Type::View { elem, .. } => Ok(elem),
            _ => Err(internal("expected a view", span)),
        }
    }

    fn offset(&mut self, base: &Expr, index: &Expr, span: Span) -> Result<PointerValue<'ctx>> {
        let elem = Self::view_elem(&base.ty, span)?;
        let ptr = self.value(base)?.into_pointer_value();
        let idx = self.index(index)?;
        // SAFETY: in-bounds of the object the view points into, as the language requires.
        unsafe {
            self.b
                .build_in_bounds_gep(self.types.stride(elem), ptr, &[idx], "")
        }
        .at(span)
    }

    fn load(&mut self, ptr: &Expr) -> Result<BasicValueEnum<'ctx>> {
        let span = ptr.span;
        let elem = Self::view_elem(&ptr.ty, span)?;
        let p = self.value(ptr)?.into_pointer_value();
        let v = self.b.build_load(self.types.memory(elem), p, "").at(span)?;
        if let Some(inst) = v.as_instruction_value() {
            inst.set_alignment(align(elem))
                .map_err(|e| internal(e, span))?;
        }
        Ok(self.bool_from_byte(v, elem))
    }

    pub(super) fn store(&mut self, ptr: &Expr, value: &Expr, span: Span) -> Result<()> {
        let elem = Self::view_elem(&ptr.ty, span)?;
        let p = self.value(ptr)?.into_pointer_value();
        let v = self.value(value)?;
        let v = self.bool_to_byte(v, elem);
        let inst = self.b.build_store(p, v).at(span)?;
        inst.set_alignment(align(elem))
            .map_err(|e| internal(e, span))
    }

    /// Bools are bytes in memory.
    fn bool_from_byte(&self, v: BasicValueEnum<'ctx>, elem: &Type) -> BasicValueEnum<'ctx> {
        match elem_scalar(elem) {
            Some(Scalar::Bool) => {
                let zero = self.types.memory(elem).const_zero();
                ll::icmp(&self.b, IntPred::LLVMIntNE, v, zero)
            }
            _ => v,
        }
    }

    fn bool_to_byte(&self, v: BasicValueEnum<'ctx>, elem: &Type) -> BasicValueEnum<'ctx> {
        match elem_scalar(elem) {
            Some(Scalar::Bool) => ll::cast(&self.b, Op::LLVMZExt, v, self.types.memory(elem)),
            _ => v,
        }
    }
}
