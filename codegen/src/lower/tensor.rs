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
use zinc_dsl::ir::{Frag, FragRole, Scalar, Type, VarId};

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

/// The high word of every wgmma shared-memory matrix descriptor zinc builds: the stride between
/// 8-row groups, 1024 / 16, at bit 32 and swizzle mode 1 (128 bytes) at bit 62.
const WGMMA_DESCRIPTOR_HIGH: u64 = (1024 >> 4) | (1 << 30);

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

    /// `wgmma(acc[i], a, b)`: one `wgmma.mma_async` m64nNk16 (f16 in, f32 accumulators) by the
    /// warpgroup, as inline PTX (LLVM has intrinsics only for its fence, commit and wait). The
    /// `n` fragments from flat element `first` of `acc` are its accumulators (4 registers each,
    /// in and out). A is `a`'s four registers, or (a pointer) a shared-memory matrix descriptor
    /// built from it as B's is from `b`: 128-byte swizzle, K-major, 8-row groups 1024 bytes apart.
    pub(super) fn wgmma(
        &self,
        (acc, first, n): (VarId, u32, u16),
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
        span: Span,
    ) -> Result<()> {
        let acc_frag = Frag {
            role: FragRole::Acc,
            elem: Scalar::F32,
        };
        let a_frag = Frag {
            role: FragRole::A,
            elem: Scalar::F16,
        };
        let acc_ty = self.value_type(&Type::Frag(acc_frag), span)?;
        let slots = (0..u32::from(n))
            .map(|j| self.flat_slot(acc, first + j, span))
            .collect::<Result<Vec<_>>>()?;
        let mut d = Vec::with_capacity(4 * slots.len());
        for &slot in &slots {
            let v = self.b.build_load(acc_ty, slot, "").at(span)?;
            d.extend(self.frag_regs(v, acc_frag, span)?);
        }
        let regs = d.len();
        // The inputs after the accumulators: A's registers (or its descriptor's low word), B's
        // descriptor's low word, the descriptors' constant high word, then the accumulators
        // again (tied to the outputs).
        let a_in_shared = a.is_pointer_value();
        let mut args: Vec<BasicValueEnum> = if a_in_shared {
            vec![self.wgmma_descriptor_low(a, span)?]
        } else {
            self.frag_regs(a, a_frag, span)?
                .into_iter()
                .map(|r| self.bitcast(r, self.i32_ty()))
                .collect()
        };
        let a_inputs = args.len();
        args.push(self.wgmma_descriptor_low(b, span)?);
        let high = self.ctx.i32_type().const_int(WGMMA_DESCRIPTOR_HIGH, false);
        args.push(high.into());
        args.extend(d.iter().copied());
        let list = |from: usize, count: usize| {
            (from..from + count)
                .map(|i| format!("${i}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (b_low, high) = (regs + a_inputs, regs + a_inputs + 1);
        // A from shared memory takes its own descriptor, and one more immediate (A not
        // transposed) before B's.
        let (a_desc, a_operand, trans) = if a_in_shared {
            (
                format!("\n\t.reg .b64 zinc_desc_a;\n\tmov.b64 zinc_desc_a, {{${regs}, ${high}}};"),
                "zinc_desc_a".to_string(),
                "0, 0",
            )
        } else {
            (String::new(), format!("{{{}}}", list(regs, 4)), "0")
        };
        let template = format!(
            "{{{a_desc}\n\t.reg .b64 zinc_desc;\n\tmov.b64 zinc_desc, {{${b_low}, ${high}}};\n\t\
             wgmma.mma_async.sync.aligned.m64n{}k16.f32.f16.f16 {{{}}}, {a_operand}, zinc_desc, \
             1, 1, 1, {trans};\n\t}}",
            8 * n,
            list(0, regs),
        );
        let mut constraints = vec!["=f".to_string(); regs];
        constraints.extend((0..a_inputs + 2).map(|_| "r".to_string()));
        constraints.extend((0..regs).map(|i| i.to_string()));
        constraints.push("~{memory}".to_string());
        let f32_ty = self.ctx.f32_type();
        let ret = self.ctx.struct_type(&vec![f32_ty.into(); regs], false);
        let params: Vec<_> = args.iter().map(|a| a.get_type().into()).collect();
        let fn_ty = ret.fn_type(&params, false);
        let asm = self.ctx.create_inline_asm(
            fn_ty,
            template,
            constraints.join(","),
            true,
            false,
            None,
            false,
        );
        let meta: Vec<_> = args.iter().map(|&a| a.into()).collect();
        let site = self.b.build_indirect_call(fn_ty, asm, &meta, "").at(span)?;
        site.add_attribute(AttributeLoc::Function, convergent(self.ctx));
        let out = site
            .try_as_basic_value()
            .basic()
            .ok_or_else(|| internal("wgmma without a result", span))?
            .into_struct_value();
        for (j, &slot) in slots.iter().enumerate() {
            let regs = (0..4)
                .map(|e| {
                    self.b
                        .build_extract_value(out, (4 * j + e) as u32, "")
                        .at(span)
                })
                .collect::<Result<Vec<_>>>()?;
            let v = self.frag_value(acc_frag, &regs, span)?;
            self.b.build_store(slot, v).at(span)?;
        }
        Ok(())
    }

    /// The low word of a wgmma shared-memory matrix descriptor for `ptr`: start address / 16 in
    /// bits 0-13, leading offset 1 (unused when swizzled) at bit 16. A shared address is under
    /// 2^18 (228 KiB at most), so the start needs no mask, and adding the offset's bit lets
    /// ptxas fold both into one `ULEA.HI` per MMA (with the mask it took three). The high word
    /// is the constant WGMMA_DESCRIPTOR_HIGH, and the two go to the PTX apart: as one 64-bit
    /// value, LLVM widens the address arithmetic to 64 bits and ptxas spends five instructions
    /// per MMA on it.
    fn wgmma_descriptor_low(
        &self,
        ptr: BasicValueEnum<'ctx>,
        span: Span,
    ) -> Result<BasicValueEnum<'ctx>> {
        let i32_ty = self.ctx.i32_type();
        let addr = self
            .b
            .build_ptr_to_int(ptr.into_pointer_value(), i32_ty, "")
            .at(span)?;
        let start = ll::binop(
            &self.b,
            Op::LLVMLShr,
            addr.into(),
            i32_ty.const_int(4, false).into(),
        );
        Ok(ll::binop(
            &self.b,
            Op::LLVMAdd,
            start,
            i32_ty.const_int(1 << 16, false).into(),
        ))
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
