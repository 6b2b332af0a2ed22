//! The NVPTX target machine, LLVM's optimization pipeline and the final text.

use std::sync::Once;

use inkwell::module::Module;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{
    CodeModel, FileType, InitializationConfig, RelocMode, Target, TargetMachine, TargetTriple,
};
use inkwell::OptimizationLevel;

use crate::error::CodegenError;
use crate::options::{Emit, Options};

const TRIPLE: &str = "nvptx64-nvidia-cuda";

/// Creates the target machine for validated options (the arch and PTX version were checked by
/// `Options::new`; LLVM would abort on bad ones).
pub(crate) fn target_machine(opts: &Options) -> Result<TargetMachine, CodegenError> {
    // Target registration is global state; do it once even when tests compile in parallel.
    static INIT: Once = Once::new();
    INIT.call_once(|| Target::initialize_nvptx(&InitializationConfig::default()));

    let triple = TargetTriple::create(TRIPLE);
    let target = Target::from_triple(&triple).map_err(|e| CodegenError::Llvm(e.to_string()))?;
    let level = match opts.opt_level {
        0 => OptimizationLevel::None,
        1 => OptimizationLevel::Less,
        2 => OptimizationLevel::Default,
        _ => OptimizationLevel::Aggressive,
    };
    target
        .create_target_machine(
            &triple,
            opts.arch.name,
            &opts.features(),
            level,
            RelocMode::Default,
            CodeModel::Default,
        )
        .ok_or_else(|| {
            CodegenError::Llvm(format!("no NVPTX target machine for {}", opts.arch.name))
        })
}

/// Sets the triple and data layout before lowering, so type sizes agree with the backend.
pub(crate) fn prepare(module: &Module, tm: &TargetMachine) {
    module.set_triple(&tm.get_triple());
    module.set_data_layout(&tm.get_target_data().get_data_layout());
}

/// Verifies, optimizes and prints the module.
pub(crate) fn finish(
    module: &Module,
    tm: &TargetMachine,
    opt_level: u8,
    emit: Emit,
) -> Result<String, CodegenError> {
    module
        .verify()
        .map_err(|e| CodegenError::Llvm(format!("invalid module: {}", e.to_string_lossy())))?;
    module
        .run_passes(
            &format!("default<O{opt_level}>"),
            tm,
            PassBuilderOptions::create(),
        )
        .map_err(|e| CodegenError::Llvm(format!("optimization: {}", e.to_string_lossy())))?;
    match emit {
        Emit::LlvmIr => Ok(module.print_to_string().to_string()),
        Emit::Ptx => {
            let buf = tm
                .write_to_memory_buffer(module, FileType::Assembly)
                .map_err(|e| CodegenError::Llvm(e.to_string_lossy().into_owned()))?;
            String::from_utf8(buf.as_slice().to_vec())
                .map_err(|_| CodegenError::Llvm("PTX output is not UTF-8".to_string()))
        }
    }
}
