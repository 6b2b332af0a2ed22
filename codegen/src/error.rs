//! Everything `compile` and `Options::new` can fail with.

use zinc_dsl::diag::Diagnostic;

/// Formats a PTX ISA version kept times ten (87 -> "8.7").
pub(crate) fn ptx_str(v: u32) -> String {
    format!("{}.{}", v / 10, v % 10)
}

#[derive(thiserror::Error, Debug)]
pub enum CodegenError {
    #[error("unknown arch `{name}`; known: {known}")]
    UnknownArch { name: String, known: String },
    #[error("`{given}` is not a PTX version; write MAJOR.MINOR, e.g. 8.7")]
    BadPtxVersion { given: String },
    #[error("PTX {} is too old for {arch} (needs at least {})", ptx_str(*.given), ptx_str(*.min))]
    PtxVersionTooOld {
        arch: &'static str,
        given: u32,
        min: u32,
    },
    #[error(
        "PTX {} is not supported by LLVM 22's NVPTX backend (it emits {})",
        ptx_str(*.given),
        .supported
    )]
    PtxVersionUnsupported { given: u32, supported: String },
    #[error("optimization level {0} is out of range (0 to 3)")]
    BadOptLevel(u8),
    /// Errors in the program, located in its source.
    #[error("{}", summarize(.0))]
    Diagnostics(Vec<Diagnostic>),
    /// LLVM rejected what code generation built: a bug in zinc, reported rather than aborting.
    #[error("LLVM: {0}")]
    Llvm(String),
}

fn summarize(diags: &[Diagnostic]) -> String {
    match diags {
        [] => "no diagnostics".to_string(),
        [one] => one.message.clone(),
        [first, rest @ ..] => format!("{} (and {} more errors)", first.message, rest.len()),
    }
}
