//! Instructions that are generic over scalars and vectors, and atomics with a sync scope, built
//! through LLVM's C API: inkwell's builders are typed per value kind and know no sync scopes.
//!
//! Safety: every handle passed in comes from inkwell values, types and builders of one context,
//! and the C functions only create instructions. Operand types are checked by `Module::verify`,
//! which runs before anything else consumes the module.

use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::types::{AsTypeRef, BasicTypeEnum};
use inkwell::values::{AsValueRef, BasicValueEnum, PointerValue};
use llvm_sys::core as c;
use llvm_sys::prelude::LLVMValueRef;
use llvm_sys::LLVMAtomicOrdering;

pub(crate) use llvm_sys::{
    LLVMAtomicRMWBinOp as RmwOp, LLVMIntPredicate as IntPred, LLVMOpcode as Op,
    LLVMRealPredicate as RealPred,
};

/// The scope of a fence or atomic.
#[derive(Copy, Clone)]
pub(crate) enum Scope {
    /// The thread block (PTX `.cta`).
    Block,
    /// The whole GPU (PTX `.gpu`).
    Device,
}

const NO_NAME: &std::ffi::CStr = c"";

fn wrap<'ctx>(v: LLVMValueRef) -> BasicValueEnum<'ctx> {
    // SAFETY: `v` was just created by LLVM and has a first-class (basic) type.
    unsafe { BasicValueEnum::new(v) }
}

pub(crate) fn binop<'ctx>(
    b: &Builder<'ctx>,
    op: Op,
    l: BasicValueEnum<'ctx>,
    r: BasicValueEnum<'ctx>,
) -> BasicValueEnum<'ctx> {
    wrap(unsafe {
        c::LLVMBuildBinOp(
            b.as_mut_ptr(),
            op,
            l.as_value_ref(),
            r.as_value_ref(),
            NO_NAME.as_ptr(),
        )
    })
}

pub(crate) fn icmp<'ctx>(
    b: &Builder<'ctx>,
    pred: IntPred,
    l: BasicValueEnum<'ctx>,
    r: BasicValueEnum<'ctx>,
) -> BasicValueEnum<'ctx> {
    wrap(unsafe {
        c::LLVMBuildICmp(
            b.as_mut_ptr(),
            pred,
            l.as_value_ref(),
            r.as_value_ref(),
            NO_NAME.as_ptr(),
        )
    })
}

pub(crate) fn fcmp<'ctx>(
    b: &Builder<'ctx>,
    pred: RealPred,
    l: BasicValueEnum<'ctx>,
    r: BasicValueEnum<'ctx>,
) -> BasicValueEnum<'ctx> {
    wrap(unsafe {
        c::LLVMBuildFCmp(
            b.as_mut_ptr(),
            pred,
            l.as_value_ref(),
            r.as_value_ref(),
            NO_NAME.as_ptr(),
        )
    })
}

pub(crate) fn cast<'ctx>(
    b: &Builder<'ctx>,
    op: Op,
    v: BasicValueEnum<'ctx>,
    ty: BasicTypeEnum<'ctx>,
) -> BasicValueEnum<'ctx> {
    wrap(unsafe {
        c::LLVMBuildCast(
            b.as_mut_ptr(),
            op,
            v.as_value_ref(),
            ty.as_type_ref(),
            NO_NAME.as_ptr(),
        )
    })
}

/// Integer negation (`float == false`) or floating-point negation.
pub(crate) fn neg<'ctx>(
    b: &Builder<'ctx>,
    v: BasicValueEnum<'ctx>,
    float: bool,
) -> BasicValueEnum<'ctx> {
    let v = v.as_value_ref();
    wrap(unsafe {
        match float {
            true => c::LLVMBuildFNeg(b.as_mut_ptr(), v, NO_NAME.as_ptr()),
            false => c::LLVMBuildNeg(b.as_mut_ptr(), v, NO_NAME.as_ptr()),
        }
    })
}

/// Bitwise not (logical not on `i1`).
pub(crate) fn not<'ctx>(b: &Builder<'ctx>, v: BasicValueEnum<'ctx>) -> BasicValueEnum<'ctx> {
    wrap(unsafe { c::LLVMBuildNot(b.as_mut_ptr(), v.as_value_ref(), NO_NAME.as_ptr()) })
}

/// `cond ? t : f`; `cond` is `i1` or a vector of `i1` as wide as the operands.
pub(crate) fn select<'ctx>(
    b: &Builder<'ctx>,
    cond: BasicValueEnum<'ctx>,
    t: BasicValueEnum<'ctx>,
    f: BasicValueEnum<'ctx>,
) -> BasicValueEnum<'ctx> {
    wrap(unsafe {
        c::LLVMBuildSelect(
            b.as_mut_ptr(),
            cond.as_value_ref(),
            t.as_value_ref(),
            f.as_value_ref(),
            NO_NAME.as_ptr(),
        )
    })
}

fn scope_id(ctx: &Context, scope: Scope) -> u32 {
    // NVPTX maps "block" to .cta and "device" to .gpu (the default "" would be .sys).
    let name: &[u8] = match scope {
        Scope::Block => b"block",
        Scope::Device => b"device",
    };
    unsafe { c::LLVMGetSyncScopeID(ctx.raw(), name.as_ptr().cast(), name.len()) }
}

/// A sequentially consistent fence (`fence.sc.cta` / `fence.sc.gpu`).
pub(crate) fn fence(b: &Builder, ctx: &Context, scope: Scope) {
    unsafe {
        c::LLVMBuildFenceSyncScope(
            b.as_mut_ptr(),
            LLVMAtomicOrdering::LLVMAtomicOrderingSequentiallyConsistent,
            scope_id(ctx, scope),
            NO_NAME.as_ptr(),
        );
    }
}

/// A relaxed (monotonic) device-scope read-modify-write; returns the old value.
pub(crate) fn atomic_rmw<'ctx>(
    b: &Builder<'ctx>,
    ctx: &'ctx Context,
    op: RmwOp,
    ptr: PointerValue<'ctx>,
    val: BasicValueEnum<'ctx>,
) -> BasicValueEnum<'ctx> {
    wrap(unsafe {
        c::LLVMBuildAtomicRMWSyncScope(
            b.as_mut_ptr(),
            op,
            ptr.as_value_ref(),
            val.as_value_ref(),
            LLVMAtomicOrdering::LLVMAtomicOrderingMonotonic,
            scope_id(ctx, Scope::Device),
        )
    })
}

/// A relaxed (monotonic) device-scope compare-and-swap of integers; returns the old value.
pub(crate) fn cmpxchg<'ctx>(
    b: &Builder<'ctx>,
    ctx: &'ctx Context,
    ptr: PointerValue<'ctx>,
    expected: BasicValueEnum<'ctx>,
    new: BasicValueEnum<'ctx>,
) -> BasicValueEnum<'ctx> {
    unsafe {
        let monotonic = LLVMAtomicOrdering::LLVMAtomicOrderingMonotonic;
        let pair = c::LLVMBuildAtomicCmpXchgSyncScope(
            b.as_mut_ptr(),
            ptr.as_value_ref(),
            expected.as_value_ref(),
            new.as_value_ref(),
            monotonic,
            monotonic,
            scope_id(ctx, Scope::Device),
        );
        wrap(c::LLVMBuildExtractValue(
            b.as_mut_ptr(),
            pair,
            0,
            NO_NAME.as_ptr(),
        ))
    }
}
