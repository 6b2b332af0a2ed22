//! Tensor-core fragments and the operations around them: `mma.sync`, `ldmatrix`, `cp.async`
//! groups, and the packed-integer helpers `prmt` and `lop3`.
//!
//! A fragment is an LLVM array of its registers (`[4 x <2 x half>]`, `[4 x float]`, ...); SROA
//! splits it into scalar registers. The NVVM intrinsics want bf16, i8 and tf32 operand registers
//! as `i32`, so those are bitcast at the call.

use inkwell::attributes::AttributeLoc;
use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValue, BasicValueEnum};
use zinc_dsl::diag::Span;
use zinc_dsl::ir::{Frag, FragRole, Scalar, Type};

use super::ll::{self, Op};
use super::{convergent, internal, At, FnLowerer, Result};

/// The NVVM intrinsic of `mma.sync` for operands of `elem` (row-major A, column-major B).
fn mma_intrinsic(elem: Scalar) -> &'static str {
    match elem {
        // f16 mma intrinsics are named after their accumulator and result types.
        Scalar::F16 => "llvm.nvvm.mma.m16n8k16.row.col.f32.f32",
        Scalar::Bf16 => "llvm.nvvm.mma.m16n8k16.row.col.bf16",
        // f32 registers used as tf32 (the hardware ignores their low 13 mantissa bits).
        Scalar::F32 => "llvm.nvvm.mma.m16n8k8.row.col.tf32",
        _ => "llvm.nvvm.mma.m16n8k32.row.col.s8",
    }
}

impl<'a, 'ctx> FnLowerer<'a, 'ctx> {
    /// The registers of a fragment value.
    pub(super) fn frag_regs(
        &self,
        v: BasicValueEnum<'ctx>,
        frag: Frag,
        span: Span,
    ) -> Result<Vec<BasicValueEnum<'ctx>>> {
        let array = v.into_array_value();
        (0..u32::from(frag.regs()))
            .map(|i| self.b.build_extract_value(array, i, "").at(span))
            .collect()
    }

    /// A fragment value from its registers (each of the fragment's register type).
    pub(super) fn frag_value(
        &self,
        frag: Frag,
        regs: &[BasicValueEnum<'ctx>],
        span: Span,
    ) -> Result<BasicValueEnum<'ctx>> {
        let ty = self.value_type(&Type::Frag(frag), span)?.into_array_type();
        let mut agg = ty.get_poison();
        for (i, r) in regs.iter().enumerate() {
            agg = self
                .b
                .build_insert_value(agg, *r, i as u32, "")
                .at(span)?
                .into_array_value();
        }
        Ok(agg.as_basic_value_enum())
    }

    fn i32_ty(&self) -> BasicTypeEnum<'ctx> {
        self.ctx.i32_type().into()
    }

    fn bitcast(&self, v: BasicValueEnum<'ctx>, ty: BasicTypeEnum<'ctx>) -> BasicValueEnum<'ctx> {
        match v.get_type() == ty {
            true => v,
            false => ll::cast(&self.b, Op::LLVMBitCast, v, ty),
        }
    }

    /// `mma(a, b, acc)`: one `mma.sync.aligned` by the warp.
    pub(super) fn mma(
        &self,
        vals: &[BasicValueEnum<'ctx>],
        elem: Scalar,
        span: Span,
    ) -> Result<BasicValueEnum<'ctx>> {
        let [a, b, acc] = vals else {
            return Err(internal("mma takes three fragments", span));
        };
        let op = |role| Frag { role, elem };
        let acc_frag = Frag {
            role: FragRole::Acc,
            elem: Frag::acc_for(elem),
        };
        // f16 operands go in as <2 x half>, the others as i32.
        let operand = |v: BasicValueEnum<'ctx>| match elem {
            Scalar::F16 => v,
            _ => self.bitcast(v, self.i32_ty()),
        };
        let mut args: Vec<BasicValueEnum> = vec![];
        args.extend(
            self.frag_regs(*a, op(FragRole::A), span)?
                .into_iter()
                .map(operand),
        );
        args.extend(
            self.frag_regs(*b, op(FragRole::B), span)?
                .into_iter()
                .map(operand),
        );
        args.extend(self.frag_regs(*acc, acc_frag, span)?);
        let func = self.intrinsic(mma_intrinsic(elem), &[], span)?;
        let meta: Vec<_> = args.iter().map(|&a| a.into()).collect();
        let site = self.b.build_call(func, &meta, "").at(span)?;
        // The intrinsic is `IntrNoMem` only; like every warp-synchronous operation it must not
        // be moved into divergent code.
        site.add_attribute(AttributeLoc::Function, convergent(self.ctx));
        let result = site
            .try_as_basic_value()
            .basic()
            .ok_or_else(|| internal("mma without a result", span))?
            .into_struct_value();
        let regs = (0..u32::from(acc_frag.regs()))
            .map(|i| self.b.build_extract_value(result, i, "").at(span))
            .collect::<Result<Vec<_>>>()?;
        self.frag_value(acc_frag, &regs, span)
    }

    /// `ldmatrix_xN(row, trans)`: N registers per lane, typed as `ty` (a register or fragment).
    pub(super) fn ldmatrix(
        &self,
        ptr: BasicValueEnum<'ctx>,
        count: u8,
        trans: bool,
        ty: &Type,
        span: Span,
    ) -> Result<BasicValueEnum<'ctx>> {
        let t = if trans { ".trans" } else { "" };
        let name = format!("llvm.nvvm.ldmatrix.sync.aligned.m8n8.x{count}{t}.b16");
        let loaded = self.intrinsic_value(&name, &[ptr.get_type()], &[ptr], span)?;
        match ty {
            Type::Frag(frag) => {
                let reg_ty = self.value_type(&frag.reg_type(), span)?;
                let loaded = loaded.into_struct_value();
                let regs = (0..u32::from(count))
                    .map(|i| {
                        let r = self.b.build_extract_value(loaded, i, "").at(span)?;
                        Ok(self.bitcast(r, reg_ty))
                    })
                    .collect::<Result<Vec<_>>>()?;
                self.frag_value(*frag, &regs, span)
            }
            _ => Ok(self.bitcast(loaded, self.value_type(ty, span)?)),
        }
    }

    /// `cp_async(dst, src, bytes, valid)`: `cp.async` with a source size of 0 (zero fill) when
    /// not valid; `.cg` (bypassing L1) for 16 bytes, `.ca` for 4 and 8 (`.cg` allows only 16).
    pub(super) fn cp_async(
        &self,
        vals: &[BasicValueEnum<'ctx>],
        bytes: u8,
        span: Span,
    ) -> Result<()> {
        let [dst, src, valid] = vals else {
            return Err(internal("cp_async takes three operands", span));
        };
        let cache = if bytes == 16 { "cg" } else { "ca" };
        let name = format!("llvm.nvvm.cp.async.{cache}.shared.global.{bytes}.s");
        let i32_ty = self.ctx.i32_type();
        let full = i32_ty.const_int(u64::from(bytes), false).into();
        let size = ll::select(&self.b, *valid, full, i32_ty.const_zero().into());
        self.call_intrinsic(&name, &[], &[*dst, *src, size], span)?;
        Ok(())
    }

    pub(super) fn cp_async_commit(&self, span: Span) -> Result<()> {
        self.call_intrinsic("llvm.nvvm.cp.async.commit.group", &[], &[], span)?;
        Ok(())
    }

    pub(super) fn cp_async_wait(&self, groups: u8, span: Span) -> Result<()> {
        let n = self
            .ctx
            .i32_type()
            .const_int(u64::from(groups), false)
            .into();
        self.call_intrinsic("llvm.nvvm.cp.async.wait.group", &[], &[n], span)?;
        Ok(())
    }

    /// `lop3.b32` with the truth table as an immediate. LLVM has no intrinsic for it (ptxas
    /// forms LOP3 from and/or/xor itself, but not always with the table the author chose).
    pub(super) fn lop3(
        &self,
        vals: &[BasicValueEnum<'ctx>],
        lut: u8,
        span: Span,
    ) -> Result<BasicValueEnum<'ctx>> {
        let template = format!("lop3.b32 $0, $1, $2, $3, {lut:#04x};");
        self.pure_asm(&template, "=r,r,r,r", self.i32_ty(), vals, span)
    }

    /// Reinterprets `v` as `to` (same size; checked by the front end).
    pub(super) fn bitcast_to(
        &self,
        v: BasicValueEnum<'ctx>,
        to: &Type,
        span: Span,
    ) -> Result<BasicValueEnum<'ctx>> {
        Ok(self.bitcast(v, self.value_type(to, span)?))
    }

    /// A fragment whose registers all hold `reg`.
    pub(super) fn frag_splat(
        &self,
        frag: Frag,
        reg: BasicValueEnum<'ctx>,
        span: Span,
    ) -> Result<BasicValueEnum<'ctx>> {
        let regs = vec![reg; usize::from(frag.regs())];
        self.frag_value(frag, &regs, span)
    }
}
