//! The zinc tile language front end: lexer, parser, name resolution and type checking, producing
//! the typed IR in [`ir`].

pub mod ast;
mod check;
pub mod consteval;
pub mod diag;
// The IR contract is shared with code generation; its `FunctionKind` is large by design.
#[allow(clippy::large_enum_variant)]
pub mod ir;
pub mod lexer;
mod loader;
pub mod parse;
mod print;
mod render;
pub mod target;

use std::path::Path;

use loader::FileSource;

pub use print::print_ir;
pub use render::render;

/// A checked program.
pub struct Compilation {
    pub sources: diag::SourceMap,
    pub module: ir::Module,
}

/// A program with errors.
#[derive(Debug)]
pub struct Failure {
    pub sources: diag::SourceMap,
    pub diagnostics: Vec<diag::Diagnostic>,
}

impl Failure {
    /// All diagnostics rendered, as the CLI prints them.
    pub fn render(&self) -> String {
        self.diagnostics
            .iter()
            .map(|d| render(d, &self.sources))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

struct Disk;

impl FileSource for Disk {
    fn key(&self, name: &str) -> String {
        std::fs::canonicalize(name)
            .map_or_else(|_| name.to_string(), |p| p.to_string_lossy().into_owned())
    }
    fn read(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(name).ok()
    }
}

struct Memory<'l>(&'l dyn Fn(&str) -> Option<String>);

impl FileSource for Memory<'_> {
    fn key(&self, name: &str) -> String {
        name.to_string()
    }
    fn read(&self, name: &str) -> Option<String> {
        (self.0)(name)
    }
}

/// Compile a root file from disk; imports resolve relative to the importing file.
pub fn compile_file(path: &Path, defines: &[(String, String)]) -> Result<Compilation, Failure> {
    let name = path.to_string_lossy();
    match std::fs::read_to_string(path) {
        Ok(text) => compile(&name, &text, defines, &Disk),
        Err(e) => Err(Failure {
            sources: diag::SourceMap::default(),
            diagnostics: vec![diag::Diagnostic {
                severity: diag::Severity::Error,
                message: format!("cannot read `{name}`: {e}"),
                span: None,
                notes: vec![],
            }],
        }),
    }
}

/// Compile from memory; `load` reads imported files by resolved path (tests use an in-memory map).
pub fn compile_source(
    name: &str,
    text: &str,
    defines: &[(String, String)],
    load: &dyn Fn(&str) -> Option<String>,
) -> Result<Compilation, Failure> {
    compile(name, text, defines, &Memory(load))
}

fn compile(
    name: &str,
    text: &str,
    defines: &[(String, String)],
    source: &dyn FileSource,
) -> Result<Compilation, Failure> {
    let loaded = loader::load(name, text, source);
    if !loaded.diagnostics.is_empty() {
        return Err(Failure {
            sources: loaded.sources,
            diagnostics: loaded.diagnostics,
        });
    }
    match check::check(&loaded, defines) {
        Ok(module) => Ok(Compilation {
            sources: loaded.sources,
            module,
        }),
        Err(diagnostics) => Err(Failure {
            sources: loaded.sources,
            diagnostics,
        }),
    }
}
