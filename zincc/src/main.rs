//! `zincc`: the zinc tile-language compiler.

mod isolate;
mod launch_args;
mod run_cpu;
mod split;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use zinc_codegen::{CodegenError, Emit, Options};
use zinc_dsl::target::ARCHS;

const EXIT_PROGRAM_ERROR: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_INTERNAL: u8 = 3;

#[derive(Parser)]
#[command(
    name = "zincc",
    version,
    about = "Compile zinc .tile kernels to PTX through LLVM's NVPTX backend, or run them on the CPU",
    after_help = "Exit codes: 0 success, 1 errors in the program (diagnostics printed), \
                  2 bad usage (unknown arch, bad option), 3 I/O or internal compiler error."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Compile .tile files: one PTX file (and a JSON manifest) per kernel.
    Build(BuildArgs),
    /// Parse and type-check .tile files without generating code.
    Check(CheckArgs),
    /// List the architectures zinc can compile for.
    Targets,
    /// Run a kernel on the CPU interpreter, reporting out-of-bounds accesses, shared-memory
    /// races and divergent barriers at their source line.
    RunCpu(run_cpu::RunCpuArgs),
}

#[derive(Args)]
struct CheckArgs {
    /// Source files.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Override a compile-time parameter: -D NAME=VALUE (repeatable).
    #[arg(short = 'D', value_name = "NAME=VALUE", value_parser = parse_define)]
    define: Vec<(String, String)>,
}

#[derive(Args)]
struct BuildArgs {
    /// Source files.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Target architecture(s), comma-separated or repeated (see `zincc targets`). With several,
    /// outputs go to OUT/ARCH/.
    #[arg(long, value_delimiter = ',', default_value = "sm_90")]
    arch: Vec<String>,
    /// PTX ISA version, e.g. 8.7 (default: the arch's default).
    #[arg(long, value_name = "X.Y")]
    ptx_version: Option<String>,
    /// Output directory.
    #[arg(short, long, default_value = "out")]
    out: PathBuf,
    /// Override a compile-time parameter: -D NAME=VALUE (repeatable).
    #[arg(short = 'D', value_name = "NAME=VALUE", value_parser = parse_define)]
    define: Vec<(String, String)>,
    /// What to write per kernel.
    #[arg(long, value_enum, default_value = "ptx")]
    emit: EmitKind,
    /// LLVM optimization level.
    #[arg(short = 'O', default_value_t = 3, value_parser = clap::value_parser!(u8).range(0..=3))]
    opt_level: u8,
}

#[derive(Copy, Clone, ValueEnum)]
enum EmitKind {
    /// PTX assembly (KERNEL.ptx) plus the launch manifest (KERNEL.json).
    Ptx,
    /// LLVM IR after optimization (KERNEL.ll).
    Llvm,
    /// zinc's typed IR (KERNEL.ir).
    Ir,
}

fn parse_define(s: &str) -> Result<(String, String), String> {
    let (name, value) = s
        .split_once('=')
        .ok_or_else(|| format!("expected NAME=VALUE, got `{s}`"))?;
    let name = name.trim();
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!("`{name}` is not a parameter name"));
    }
    Ok((name.to_string(), value.trim().to_string()))
}

/// A failure with the exit code it maps to.
struct Failed(u8);

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check(args) => check(&args),
        Command::Build(args) => build(&args),
        Command::RunCpu(args) => run_cpu::run_cpu(&args),
        Command::Targets => {
            targets();
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failed(code)) => ExitCode::from(code),
    }
}

fn targets() {
    println!(
        "{:<9} {:>11} {:>11} {:>12}  GPUs",
        "arch", "min PTX", "default PTX", "smem/block"
    );
    for a in ARCHS {
        println!(
            "{:<9} {:>11} {:>11} {:>10} K  {}",
            a.name,
            ptx_str(a.min_ptx),
            ptx_str(a.default_ptx),
            a.max_shared_per_block / 1024,
            a.gpus
        );
    }
}

fn ptx_str(v: u32) -> String {
    format!("{}.{}", v / 10, v % 10)
}

/// Front end for one file; diagnostics are printed here.
fn front_end(path: &Path, defines: &[(String, String)]) -> Result<zinc_dsl::Compilation, Failed> {
    zinc_dsl::compile_file(path, defines).map_err(|failure| {
        eprint!("{}", failure.render());
        Failed(EXIT_PROGRAM_ERROR)
    })
}

fn check(args: &CheckArgs) -> Result<(), Failed> {
    let mut failed = false;
    for file in &args.files {
        failed |= front_end(file, &args.define).is_err();
    }
    if failed {
        Err(Failed(EXIT_PROGRAM_ERROR))
    } else {
        Ok(())
    }
}

fn build(args: &BuildArgs) -> Result<(), Failed> {
    // Validate every arch before compiling anything, so usage errors come first.
    let mut targets = Vec::new();
    for arch in &args.arch {
        match Options::new(arch, args.ptx_version.as_deref()) {
            Ok(mut opts) => {
                opts.opt_level = args.opt_level;
                targets.push(opts);
            }
            Err(e) => {
                eprintln!("error: {e}");
                return Err(Failed(EXIT_USAGE));
            }
        }
    }
    let compilations = args
        .files
        .iter()
        .map(|f| front_end(f, &args.define))
        .collect::<Vec<_>>();
    if compilations.iter().any(|c| c.is_err()) {
        return Err(Failed(EXIT_PROGRAM_ERROR));
    }
    let compilations: Vec<_> = compilations.into_iter().map(|c| c.ok().unwrap()).collect();
    check_unique_kernels(&args.files, &compilations).map_err(|e| {
        eprintln!("error: {e:#}");
        Failed(EXIT_PROGRAM_ERROR)
    })?;
    for opts in &targets {
        let dir = if targets.len() > 1 {
            args.out.join(opts.arch.name)
        } else {
            args.out.clone()
        };
        for compilation in &compilations {
            write_kernels(compilation, opts, args.emit, &dir)?;
        }
    }
    Ok(())
}

fn check_unique_kernels(files: &[PathBuf], compilations: &[zinc_dsl::Compilation]) -> Result<()> {
    let mut seen: HashMap<&str, &Path> = HashMap::new();
    for (file, c) in files.iter().zip(compilations) {
        for f in c.module.functions.iter().filter(|f| is_kernel(f)) {
            if let Some(first) = seen.insert(&f.name, file) {
                bail!(
                    "kernel `{}` is defined in both {} and {}: output files would collide",
                    f.name,
                    first.display(),
                    file.display()
                );
            }
        }
    }
    Ok(())
}

fn is_kernel(f: &zinc_dsl::ir::Function) -> bool {
    matches!(f.kind, zinc_dsl::ir::FunctionKind::Kernel(_))
}

fn write_kernels(
    compilation: &zinc_dsl::Compilation,
    opts: &Options,
    emit: EmitKind,
    dir: &Path,
) -> Result<(), Failed> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("creating output directory {}", dir.display()))
        .map_err(internal)?;
    for module in split::per_kernel(&compilation.module) {
        let name = module
            .functions
            .last()
            .map(|f| f.name.clone())
            .unwrap_or_default();
        if let EmitKind::Ir = emit {
            write_file(
                &dir.join(format!("{name}.ir")),
                &zinc_dsl::print_ir(&module),
            )?;
            continue;
        }
        let work = || match generate(&module, compilation, opts, emit, &name, dir) {
            Ok(()) => 0,
            Err(Failed(code)) => code,
        };
        match isolate::run(work)
            .context("starting code generation")
            .map_err(internal)?
        {
            isolate::Outcome::Exited(0) => {}
            isolate::Outcome::Exited(code) => return Err(Failed(code)),
            isolate::Outcome::Crashed(signal) => {
                eprintln!(
                    "error: LLVM crashed (signal {signal}) generating kernel `{name}` for {}: \
                     usually an intrinsic or inline PTX that this arch or PTX version lacks \
                     (LLVM's own message is above)",
                    opts.arch.name
                );
                return Err(Failed(EXIT_PROGRAM_ERROR));
            }
        }
    }
    Ok(())
}

/// Code generation for one kernel's module, writing its files. Runs isolated (see `isolate`).
fn generate(
    module: &zinc_dsl::ir::Module,
    compilation: &zinc_dsl::Compilation,
    opts: &Options,
    emit: EmitKind,
    name: &str,
    dir: &Path,
) -> Result<(), Failed> {
    let (kind, ext) = match emit {
        EmitKind::Llvm => (Emit::LlvmIr, "ll"),
        _ => (Emit::Ptx, "ptx"),
    };
    let out =
        zinc_codegen::compile(module, opts, kind).map_err(|e| report_codegen(e, compilation))?;
    write_file(&dir.join(format!("{name}.{ext}")), &out.text)?;
    if let Emit::Ptx = kind {
        for k in &out.kernels {
            write_file(&dir.join(format!("{}.json", k.name)), &k.to_json())?;
        }
    }
    Ok(())
}

fn write_file(path: &Path, text: &str) -> Result<(), Failed> {
    std::fs::write(path, text)
        .with_context(|| format!("writing {}", path.display()))
        .map_err(internal)?;
    println!("wrote {}", path.display());
    Ok(())
}

fn internal(e: anyhow::Error) -> Failed {
    eprintln!("error: {e:#}");
    Failed(EXIT_INTERNAL)
}

fn report_codegen(e: CodegenError, compilation: &zinc_dsl::Compilation) -> Failed {
    match e {
        CodegenError::Diagnostics(diags) => {
            for d in &diags {
                eprint!("{}", zinc_dsl::render(d, &compilation.sources));
            }
            Failed(EXIT_PROGRAM_ERROR)
        }
        other => {
            eprintln!("error: {other}");
            Failed(EXIT_INTERNAL)
        }
    }
}
