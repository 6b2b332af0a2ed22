//! Shared-memory placement. A kernel's arrays are static `addrspace(3)` globals while they fit the
//! arch's static limit; past it they all move into the dynamic shared memory the launch requests
//! (one `extern` array, at offsets aligned as each array needs), and past the per-block limit it is an error.

use inkwell::builder::{Builder, BuilderError};
use inkwell::context::Context;
use inkwell::module::{Linkage, Module};
use inkwell::types::BasicType;
use inkwell::values::PointerValue;
use inkwell::AddressSpace;
use zinc_dsl::diag::Diagnostic;
use zinc_dsl::ir::Function;
use zinc_dsl::target::Arch;

use super::types::{align, Types, SHARED};

/// Every array starts 16-byte aligned, so vector loads of any width work on it.
const ARRAY_ALIGN: u64 = 16;

/// The one dynamic shared-memory symbol; every kernel's dynamic arrays are offsets into it.
const DYNAMIC_SYMBOL: &str = "zinc_dynamic_shared";

#[derive(Debug, Default)]
pub(crate) struct Layout {
    /// Byte offset of each array in the dynamic region; None when the arrays are static.
    dynamic_offsets: Option<Vec<u64>>,
    pub(crate) static_bytes: u64,
    pub(crate) dynamic_bytes: u64,
}

/// Decides where a kernel's shared arrays go.
pub(crate) fn layout(f: &Function, arch: &Arch) -> Result<Layout, Diagnostic> {
    let mut offsets = Vec::with_capacity(f.shared.len());
    let mut total = 0u64;
    for array in &f.shared {
        let offset = total.next_multiple_of(array.align().max(ARRAY_ALIGN));
        offsets.push(offset);
        total = offset + array.bytes();
    }
    let limit = u64::from(arch.max_shared_per_block);
    if total > limit {
        let crossing = f
            .shared
            .iter()
            .zip(&offsets)
            .find(|(a, &off)| off + a.bytes() > limit)
            .map(|(a, _)| a)
            .expect("some array crosses the limit");
        let mut d = Diagnostic::error(
            format!(
                "shared memory of kernel `{}` is {total} bytes, more than the {limit} bytes {} allows per block",
                f.name, arch.name
            ),
            crossing.span,
        );
        for a in &f.shared {
            d = d.with_note(
                format!("`{}` takes {} bytes", a.name, a.bytes()),
                Some(a.span),
            );
        }
        return Err(d);
    }
    Ok(match total > u64::from(arch.max_static_shared) {
        true => Layout {
            dynamic_offsets: Some(offsets),
            static_bytes: 0,
            dynamic_bytes: total,
        },
        false => Layout {
            dynamic_offsets: None,
            static_bytes: total,
            dynamic_bytes: 0,
        },
    })
}

/// Creates the globals of a kernel's shared arrays (or addresses in the dynamic region) and
/// returns each array's address. The builder is in the kernel's entry block.
pub(crate) fn place<'ctx>(
    ctx: &'ctx Context,
    module: &Module<'ctx>,
    b: &Builder<'ctx>,
    types: &Types<'ctx>,
    f: &Function,
    layout: &Layout,
) -> Result<Vec<PointerValue<'ctx>>, BuilderError> {
    let space = AddressSpace::from(SHARED);
    match &layout.dynamic_offsets {
        None => Ok(f
            .shared
            .iter()
            .map(|a| {
                let ty = types.stride(&a.elem).array_type(a.len() as u32);
                let g = module.add_global(ty, Some(space), &format!("{}_{}", f.name, a.name));
                g.set_linkage(Linkage::Internal);
                g.set_initializer(&ty.get_undef());
                g.set_alignment(align(&a.elem).max(a.align() as u32));
                g.as_pointer_value()
            })
            .collect()),
        Some(offsets) => {
            let base = module.get_global(DYNAMIC_SYMBOL).unwrap_or_else(|| {
                let g = module.add_global(ctx.i8_type().array_type(0), Some(space), DYNAMIC_SYMBOL);
                g.set_linkage(Linkage::External);
                g
            });
            // The region is aligned as the most demanding array of any kernel in the module.
            let need = f
                .shared
                .iter()
                .map(|a| a.align())
                .fold(ARRAY_ALIGN, u64::max) as u32;
            if base.get_alignment() < need {
                base.set_alignment(need);
            }
            offsets
                .iter()
                .zip(&f.shared)
                .map(|(&off, a)| {
                    let off = ctx.i64_type().const_int(off, false);
                    // SAFETY: the offset lies inside the dynamic region the launch requests.
                    unsafe {
                        b.build_in_bounds_gep(
                            ctx.i8_type(),
                            base.as_pointer_value(),
                            &[off],
                            &a.name,
                        )
                    }
                })
                .collect()
        }
    }
}
