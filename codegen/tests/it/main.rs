//! Code generation tests on hand-built IR: key facts of the LLVM IR and PTX per arch, the
//! manifests, located errors, and ptxas acceptance of everything emitted.

mod ir;
mod kernels;

mod emit;
mod errors;
mod ptxas;
mod sync;
mod tensor;
mod tma;

use zinc_codegen::{compile, Emit, Options, Output};
use zinc_dsl::ir::Module;

pub const ARCHS: [&str; 3] = ["sm_89", "sm_90", "sm_120"];

pub fn build(m: &Module, arch: &str, emit: Emit) -> Output {
    let opts = Options::new(arch, None).unwrap();
    compile(m, &opts, emit).unwrap_or_else(|e| panic!("{arch}: {e} ({e:?})"))
}

/// The PTX with each line's whitespace collapsed, so facts read as `bar.sync 0`.
pub fn ptx(m: &Module, arch: &str) -> String {
    let text = build(m, arch, Emit::Ptx).text;
    text.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ") + "\n")
        .collect()
}
