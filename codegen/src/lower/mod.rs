//! Lowering of the typed IR to LLVM IR: one [`FnLowerer`] per function, with expressions,
//! statements, built-ins and the escape hatches (intrinsics, inline asm) in their own files.

mod builtins;
mod escape;
mod expr;
mod ll;
mod shared;
mod stmt;
mod tensor;
mod tma;
mod types;

use inkwell::attributes::AttributeLoc;
use inkwell::basic_block::BasicBlock;
use inkwell::builder::{Builder, BuilderError};
use inkwell::context::Context;
use inkwell::intrinsics::Intrinsic;
use inkwell::module::{Linkage, Module};
use inkwell::types::{BasicMetadataTypeEnum, BasicType, BasicTypeEnum, FunctionType};
use inkwell::values::{
    BasicMetadataValueEnum, BasicValue, BasicValueEnum, FunctionValue, PointerValue,
};
use inkwell::AddressSpace;
use zinc_dsl::diag::{Diagnostic, Span};
use zinc_dsl::ir::{self, Function, FunctionKind, Type};

use crate::error::CodegenError;
use crate::manifest::{kernel_info, KernelInfo};
use crate::options::Options;
use shared::Layout;
use types::Types;

type Result<T> = std::result::Result<T, Diagnostic>;

/// LLVM's `ptx_kernel` calling convention: LLVM 22 marks kernels with it, not with
/// `nvvm.annotations`.
const PTX_KERNEL_CC: u32 = 71;

/// An error in zinc itself (an IR the checker should not have produced, or a lowering bug),
/// reported at the construct being lowered.
fn internal(message: impl std::fmt::Display, span: Span) -> Diagnostic {
    Diagnostic::error(format!("internal code generation error: {message}"), span)
}

/// Builder calls fail only when zinc misuses the builder; report those at a span.
trait At<T> {
    fn at(self, span: Span) -> Result<T>;
}

impl<T> At<T> for std::result::Result<T, BuilderError> {
    fn at(self, span: Span) -> Result<T> {
        self.map_err(|e| internal(e, span))
    }
}

/// Lowers every function of `ir` into `module` and returns the kernels' manifests.
pub(crate) fn lower_module<'ctx>(
    ctx: &'ctx Context,
    module: &Module<'ctx>,
    ir: &ir::Module,
    opts: &Options,
) -> std::result::Result<Vec<KernelInfo>, CodegenError> {
    let types = Types::new(ctx);
    let fns: Vec<FunctionValue<'ctx>> = ir
        .functions
        .iter()
        .map(|f| declare(ctx, module, ir, &types, f))
        .collect();
    let mut diags = vec![];
    let mut kernels = vec![];
    for (f, &llfn) in ir.functions.iter().zip(&fns) {
        // LLVM would emit the PTX anyway; ptxas or the driver would then reject it.
        if matches!(f.kind, FunctionKind::Kernel(_))
            && opts.arch.name != "sm_90a"
            && ir::needs_sm90a(ir, f)
        {
            diags.push(Diagnostic::error(
                format!(
                    "kernel `{}` uses sm_90a-only instructions (`wgmma`, the async-proxy fence, mbarriers or TMA), which only sm_90a (H100, H200) builds take; this build is for {}",
                    f.name, opts.arch.name
                ),
                f.span,
            ));
            continue;
        }
        let layout = match &f.kind {
            FunctionKind::Kernel(_) => match shared::layout(f, opts.arch) {
                Ok(layout) => layout,
                Err(d) => {
                    diags.push(d);
                    continue;
                }
            },
            FunctionKind::Device => Layout::default(),
        };
        let lowerer = FnLowerer {
            ctx,
            module,
            b: ctx.create_builder(),
            types: &types,
            fns: &fns,
            f,
            llfn,
            vars: vec![],
            shared: vec![],
            maps: vec![],
            loops: vec![],
        };
        if let Err(d) = lowerer.lower(&layout) {
            diags.push(d);
            continue;
        }
        if let FunctionKind::Kernel(launch) = &f.kind {
            match kernel_info(f, launch, (layout.static_bytes, layout.dynamic_bytes)) {
                Ok(info) => kernels.push(info),
                Err(d) => diags.push(d),
            }
        }
    }
    match diags.is_empty() {
        true => Ok(kernels),
        false => Err(CodegenError::Diagnostics(diags)),
    }
}

fn fn_type<'ctx>(
    ctx: &'ctx Context,
    ret: Option<BasicTypeEnum<'ctx>>,
    params: &[BasicTypeEnum<'ctx>],
) -> FunctionType<'ctx> {
    let params: Vec<BasicMetadataTypeEnum> = params.iter().map(|&t| t.into()).collect();
    match ret {
        Some(t) => t.fn_type(&params, false),
        None => ctx.void_type().fn_type(&params, false),
    }
}

/// Declares a function: kernels are external `ptx_kernel`s with their launch bound; device
/// functions are internal so LLVM may inline and drop them.
fn declare<'ctx>(
    ctx: &'ctx Context,
    module: &Module<'ctx>,
    ir_module: &ir::Module,
    types: &Types<'ctx>,
    f: &Function,
) -> FunctionValue<'ctx> {
    let mut params: Vec<BasicTypeEnum> = f
        .params
        .iter()
        .filter_map(|id| types.value(&f.vars[id.0 as usize].ty))
        .collect();
    let maps = match &f.kind {
        FunctionKind::Kernel(launch) => launch.tensor_maps.len(),
        FunctionKind::Device => 0,
    };
    // Tensor maps follow the parameters, each a 128-byte CUtensorMap passed by value.
    params.extend((0..maps).map(|_| BasicTypeEnum::from(ctx.ptr_type(AddressSpace::default()))));
    let ty = fn_type(ctx, types.value(&f.ret), &params);
    let llfn = match &f.kind {
        FunctionKind::Kernel(launch) => {
            let llfn = module.add_function(&f.name, ty, None);
            llfn.set_call_conventions(PTX_KERNEL_CC);
            let [x, y, z] = launch.block;
            // LLVM 22 reads launch bounds from this attribute and prints `.maxntid x, y, z`.
            let bound = ctx.create_string_attribute("nvvm.maxntid", &format!("{x},{y},{z}"));
            llfn.add_attribute(AttributeLoc::Function, bound);
            // `.explicitcluster` and `.reqnctapercluster x, y, z`: the driver launches the
            // kernel's blocks in clusters of this shape with a plain launch.
            if launch.cluster != [1, 1, 1] {
                let [x, y, z] = launch.cluster;
                let dims = ctx.create_string_attribute("nvvm.cluster_dim", &format!("{x},{y},{z}"));
                llfn.add_attribute(AttributeLoc::Function, dims);
            }
            // ptxas ignores `setmaxnreg` unless it knows the registers at entry: with one
            // block per SM (`.minnctapersm 1`) they are 64 K over the block's warpgroups.
            if ir::uses_builtin(ir_module, f, &|b| {
                matches!(b, ir::Builtin::SetMaxNReg { .. })
            }) {
                let one = ctx.create_string_attribute("nvvm.minctasm", "1");
                llfn.add_attribute(AttributeLoc::Function, one);
            }
            // `byval` in the param space, 64-byte aligned as the driver wants it, and a grid
            // constant so that its address (cvta.param) reaches TMA without a local copy.
            let map_ty = ctx.i64_type().array_type(16);
            for i in f.params.len()..f.params.len() + maps {
                let at = AttributeLoc::Param(i as u32);
                let byval = inkwell::attributes::Attribute::get_named_enum_kind_id("byval");
                llfn.add_attribute(at, ctx.create_type_attribute(byval, map_ty.into()));
                let align = inkwell::attributes::Attribute::get_named_enum_kind_id("align");
                llfn.add_attribute(at, ctx.create_enum_attribute(align, 64));
                llfn.add_attribute(at, ctx.create_string_attribute("nvvm.grid_constant", ""));
            }
            llfn
        }
        FunctionKind::Device => {
            let llfn = module.add_function(&f.name, ty, Some(Linkage::Internal));
            // Like clang for CUDA: a function may reach shuffles, votes or barriers, so calls
            // to it must not move across divergent control flow. LLVM drops this where it can
            // prove it unneeded.
            llfn.add_attribute(AttributeLoc::Function, convergent(ctx));
            // Always inlined, as CUDA device functions usually are: a function may take its
            // shape as arguments that are constants at every call (kernels/matvec.tile's shared
            // body), which only fold into registers and straight code once inlined, whatever
            // the size or the number of callers.
            llfn.add_attribute(AttributeLoc::Function, enum_attribute(ctx, "alwaysinline"));
            llfn
        }
    };
    for (param, id) in llfn.get_param_iter().zip(&f.params) {
        param.set_name(&f.vars[id.0 as usize].name);
    }
    llfn
}

/// The `convergent` attribute: the operation needs the same set of threads as in the source.
fn convergent(ctx: &Context) -> inkwell::attributes::Attribute {
    enum_attribute(ctx, "convergent")
}

fn enum_attribute(ctx: &Context, name: &str) -> inkwell::attributes::Attribute {
    ctx.create_enum_attribute(
        inkwell::attributes::Attribute::get_named_enum_kind_id(name),
        0,
    )
}

struct Loop<'ctx> {
    /// Where `continue` goes.
    next: BasicBlock<'ctx>,
    /// Where `break` goes.
    exit: BasicBlock<'ctx>,
}

/// Lowers one function. The builder is always positioned in a block without a terminator:
/// after `break`, `continue` and `return`, lowering continues in a fresh unreachable block that
/// LLVM deletes.
pub(crate) struct FnLowerer<'a, 'ctx> {
    ctx: &'ctx Context,
    module: &'a Module<'ctx>,
    b: Builder<'ctx>,
    types: &'a Types<'ctx>,
    fns: &'a [FunctionValue<'ctx>],
    f: &'a Function,
    llfn: FunctionValue<'ctx>,
    /// A stack slot per variable (mem2reg turns them into registers).
    vars: Vec<PointerValue<'ctx>>,
    /// The address of each shared array.
    shared: Vec<PointerValue<'ctx>>,
    /// The address of each of a kernel's tensor maps, taken once in the entry block.
    maps: Vec<PointerValue<'ctx>>,
    loops: Vec<Loop<'ctx>>,
}

impl<'a, 'ctx> FnLowerer<'a, 'ctx> {
    fn lower(mut self, layout: &Layout) -> Result<()> {
        let f = self.f;
        let entry = self.ctx.append_basic_block(self.llfn, "entry");
        self.b.position_at_end(entry);
        for var in &f.vars {
            let ty = self.types.value(&var.ty).ok_or_else(|| {
                internal(format!("variable `{}` has no type", var.name), var.span)
            })?;
            self.vars
                .push(self.b.build_alloca(ty, &var.name).at(var.span)?);
        }
        for (param, id) in self.llfn.get_param_iter().zip(&f.params) {
            self.b
                .build_store(self.vars[id.0 as usize], param)
                .at(f.span)?;
        }
        self.shared =
            shared::place(self.ctx, self.module, &self.b, self.types, f, layout).at(f.span)?;
        self.maps = self.tensor_map_addresses(f.span)?;
        self.block(&f.body)?;
        // Falling off the end: a void function returns; the checker requires `return e` on every
        // path of a function with a result, so this is dead and a zero keeps it well-defined.
        let zero = self.types.value(&f.ret).map(BasicTypeEnum::const_zero);
        self.b
            .build_return(zero.as_ref().map(|z| z as &dyn BasicValue))
            .at(f.span)?;
        Ok(())
    }

    fn append_block(&self, name: &str) -> BasicBlock<'ctx> {
        self.ctx.append_basic_block(self.llfn, name)
    }

    /// Declares an LLVM intrinsic that zinc itself uses (names verified against LLVM 22).
    fn intrinsic(
        &self,
        name: &str,
        overloads: &[BasicTypeEnum<'ctx>],
        span: Span,
    ) -> Result<FunctionValue<'ctx>> {
        Intrinsic::find(name)
            .and_then(|i| i.get_declaration(self.module, overloads))
            .ok_or_else(|| internal(format!("LLVM has no intrinsic `{name}`"), span))
    }

    /// Calls an intrinsic zinc uses; returns its value (None for void ones).
    fn call_intrinsic(
        &self,
        name: &str,
        overloads: &[BasicTypeEnum<'ctx>],
        args: &[BasicValueEnum<'ctx>],
        span: Span,
    ) -> Result<Option<BasicValueEnum<'ctx>>> {
        let func = self.intrinsic(name, overloads, span)?;
        self.call(func, args, span)
    }

    fn call(
        &self,
        func: FunctionValue<'ctx>,
        args: &[BasicValueEnum<'ctx>],
        span: Span,
    ) -> Result<Option<BasicValueEnum<'ctx>>> {
        let args: Vec<BasicMetadataValueEnum> = args.iter().map(|&a| a.into()).collect();
        let site = self.b.build_call(func, &args, "").at(span)?;
        Ok(site.try_as_basic_value().basic())
    }

    /// Like `call_intrinsic` for intrinsics that return a value.
    fn intrinsic_value(
        &self,
        name: &str,
        overloads: &[BasicTypeEnum<'ctx>],
        args: &[BasicValueEnum<'ctx>],
        span: Span,
    ) -> Result<BasicValueEnum<'ctx>> {
        self.call_intrinsic(name, overloads, args, span)?
            .ok_or_else(|| internal(format!("`{name}` returns no value"), span))
    }

    fn value_type(&self, ty: &Type, span: Span) -> Result<BasicTypeEnum<'ctx>> {
        self.types
            .value(ty)
            .ok_or_else(|| internal("a value of type void", span))
    }
}
