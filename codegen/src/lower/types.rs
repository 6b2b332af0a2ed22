//! IR types as LLVM types. Values of type bool are `i1`; in memory they are bytes.

use inkwell::context::Context;
use inkwell::types::{BasicType, BasicTypeEnum};
use inkwell::AddressSpace;
use zinc_dsl::ir::{Scalar, Space, Type};

pub(crate) const GLOBAL: u16 = 1;
pub(crate) const SHARED: u16 = 3;

pub(crate) fn address_space(space: Space) -> AddressSpace {
    AddressSpace::from(match space {
        Space::Global => GLOBAL,
        Space::Shared => SHARED,
    })
}

/// The element scalar of a scalar or vector type.
pub(crate) fn elem_scalar(ty: &Type) -> Option<Scalar> {
    match ty {
        Type::Scalar(s) | Type::Vector(s, _) => Some(*s),
        _ => None,
    }
}

/// Alignment of a view's element: its size when that is a power of two (so `f32x4` loads become
/// `ld.v4.f32`), else its scalar's size.
pub(crate) fn align(elem: &Type) -> u32 {
    let size = elem.size();
    match elem {
        _ if size.is_power_of_two() => size,
        Type::Vector(s, _) => s.size(),
        _ => 1,
    }
}

pub(crate) struct Types<'ctx> {
    ctx: &'ctx Context,
}

impl<'ctx> Types<'ctx> {
    pub(crate) fn new(ctx: &'ctx Context) -> Self {
        Types { ctx }
    }

    fn scalar(&self, s: Scalar, in_memory: bool) -> BasicTypeEnum<'ctx> {
        let c = self.ctx;
        match s {
            Scalar::Bool if in_memory => c.i8_type().into(),
            Scalar::Bool => c.bool_type().into(),
            Scalar::I8 | Scalar::U8 => c.i8_type().into(),
            Scalar::I16 | Scalar::U16 => c.i16_type().into(),
            Scalar::I32 | Scalar::U32 => c.i32_type().into(),
            Scalar::I64 | Scalar::U64 => c.i64_type().into(),
            Scalar::F16 => c.f16_type().into(),
            Scalar::Bf16 => c.bf16_type().into(),
            Scalar::F32 => c.f32_type().into(),
            Scalar::F64 => c.f64_type().into(),
        }
    }

    fn of(&self, ty: &Type, in_memory: bool) -> Option<BasicTypeEnum<'ctx>> {
        Some(match ty {
            Type::Void => return None,
            Type::Scalar(s) => self.scalar(*s, in_memory),
            Type::Vector(s, n) => match self.scalar(*s, in_memory) {
                BasicTypeEnum::IntType(t) => t.vec_type(*n as u32).into(),
                BasicTypeEnum::FloatType(t) => t.vec_type(*n as u32).into(),
                _ => unreachable!("scalars are ints or floats"),
            },
            Type::View { space, .. } => self.ctx.ptr_type(address_space(*space)).into(),
            // The generic address of the kernel's by-value map parameter: device functions are
            // always inlined, so every use folds back to that parameter.
            Type::TensorMap(_) => self.ctx.ptr_type(AddressSpace::default()).into(),
            // Registers only: an array of the fragment's registers, which SROA splits.
            Type::Frag(f) => self
                .of(&f.reg_type(), in_memory)?
                .array_type(u32::from(f.regs()))
                .into(),
            // Flat and row-major; constant indices let SROA give each element its registers.
            Type::Array { elem, dims } => self
                .of(elem, in_memory)?
                .array_type(dims.iter().product())
                .into(),
        })
    }

    /// The type of a value in registers (None for void).
    pub(crate) fn value(&self, ty: &Type) -> Option<BasicTypeEnum<'ctx>> {
        self.of(ty, false)
    }

    /// The type of an element in memory.
    pub(crate) fn memory(&self, ty: &Type) -> BasicTypeEnum<'ctx> {
        self.of(ty, true).expect("memory elements are not void")
    }

    /// The type a view's offsets step over. LLVM pads `<3 x T>` to four lanes but the language
    /// packs 3-lane vectors, so those step over `[3 x T]`.
    pub(crate) fn stride(&self, elem: &Type) -> BasicTypeEnum<'ctx> {
        match elem {
            Type::Vector(s, 3) => self.scalar(*s, true).array_type(3).into(),
            _ => self.memory(elem),
        }
    }
}
