//! zinc's code generator: lowers the typed IR ([`zinc_dsl::ir`]) to LLVM IR with inkwell, runs
//! LLVM's optimization pipeline and emits PTX through the NVPTX backend.
//!
//! Nothing unvalidated reaches LLVM: the arch and PTX version are checked by [`Options::new`],
//! intrinsic calls and inline-asm constraints are checked against LLVM before use, and the module
//! is verified before optimization, so a bad program gives an error instead of aborting the
//! process.

mod emit;
mod error;
mod lower;
mod manifest;
mod options;

use inkwell::context::Context;
use zinc_dsl::ir;

pub use error::CodegenError;
pub use manifest::{KernelInfo, ParamInfo, ParamKind};
pub use options::{Emit, Options, LLVM_PTX_VERSIONS};

/// The result of compiling a module.
#[derive(Clone, Debug)]
pub struct Output {
    /// LLVM IR or PTX for the whole module.
    pub text: String,
    /// One manifest per kernel, in module order.
    pub kernels: Vec<KernelInfo>,
}

/// Compiles a module for `opts.arch`.
pub fn compile(module: &ir::Module, opts: &Options, emit: Emit) -> Result<Output, CodegenError> {
    if opts.opt_level > 3 {
        return Err(CodegenError::BadOptLevel(opts.opt_level));
    }
    let tm = emit::target_machine(opts)?;
    // One context per call: contexts are not shared across threads.
    let context = Context::create();
    let llvm_module = context.create_module("zinc");
    emit::prepare(&llvm_module, &tm);
    let kernels = lower::lower_module(&context, &llvm_module, module, opts)?;
    let text = emit::finish(&llvm_module, &tm, opts.opt_level, emit)?;
    Ok(Output { text, kernels })
}
