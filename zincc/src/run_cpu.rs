//! `zincc run-cpu`: run one kernel on the CPU interpreter with arguments from the command line,
//! then print (and optionally save) its buffers.

use std::path::PathBuf;

use clap::Args;
use zinc_dsl::ir::{Function, FunctionKind};
use zinc_interp::{Arg, ErrorKind, InterpError, Interpreter};

use crate::launch_args::{self, BUFFER_SPECS};
use crate::{front_end, parse_define, Failed, EXIT_INTERNAL, EXIT_PROGRAM_ERROR, EXIT_USAGE};

/// Elements printed per buffer unless `--print` says otherwise.
const DEFAULT_PRINT: usize = 16;

#[derive(Args)]
#[command(
    after_help = "Buffer parameters take rand:LEN (random non-zero values; rand:LEN:LO..HI \
    for values in a range), zeros:LEN, range:LEN (0, 1, 2, ...), file:PATH (raw little-endian \
    elements) or a list [1, 2, 3]; LEN counts the view's elements (vectors for a [u32x4] view). \
    Scalar parameters take a number, vector parameters a list.\n\n\
    Example:\n  zincc run-cpu examples/vector_add.tile -D BLOCK=128 \\\n    \
    --arg a=rand:1000 --arg b=rand:1000 --arg c=zeros:1000 --arg n=1000 --print c:8"
)]
pub struct RunCpuArgs {
    /// Source file.
    file: PathBuf,
    /// The kernel to run; may be left out when the file has only one.
    #[arg(long, short)]
    kernel: Option<String>,
    /// Override a compile-time parameter: -D NAME=VALUE (repeatable).
    #[arg(short = 'D', value_name = "NAME=VALUE", value_parser = parse_define)]
    define: Vec<(String, String)>,
    /// A kernel argument by parameter name: -a NAME=SPEC, one per parameter.
    #[arg(long = "arg", short = 'a', value_name = "NAME=SPEC", value_parser = parse_named)]
    args: Vec<(String, String)>,
    /// Launch this grid (X[,Y[,Z]] blocks) instead of the kernel's grid expression.
    #[arg(long, value_name = "X,Y,Z", value_delimiter = ',', num_args = 1)]
    grid: Option<Vec<u32>>,
    /// Seed for rand: buffers.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print these buffers (default: every mutable one, first 16 elements):
    /// NAME, NAME:COUNT or NAME:START..END (either end may be left out). Repeatable.
    #[arg(long, value_name = "NAME[:RANGE]")]
    print: Vec<String>,
    /// After the run, write a buffer's raw little-endian bytes to a file: NAME=PATH. Repeatable.
    #[arg(long, value_name = "NAME=PATH", value_parser = parse_named)]
    save: Vec<(String, String)>,
    /// Stop after this many thread-steps (a statement run by one thread is one step).
    #[arg(long, default_value_t = Interpreter::DEFAULT_STEP_LIMIT)]
    step_limit: u64,
}

fn parse_named(s: &str) -> Result<(String, String), String> {
    let (name, value) = s
        .split_once('=')
        .ok_or_else(|| format!("expected NAME=VALUE, got `{s}`"))?;
    Ok((name.trim().to_string(), value.trim().to_string()))
}

fn usage(message: String) -> Failed {
    eprintln!("error: {message}");
    Failed(EXIT_USAGE)
}

pub fn run_cpu(args: &RunCpuArgs) -> Result<(), Failed> {
    let compilation = front_end(&args.file, &args.define)?;
    let interp = Interpreter::new(&compilation.module)
        .sources(&compilation.sources)
        .step_limit(args.step_limit);
    let kernel = pick_kernel(&compilation.module.functions, args.kernel.as_deref())?;
    let params = parameters(kernel);
    let mut kernel_args = arguments(kernel, &params, &args.args, args.seed)?;
    let prints = prints(&params, &args.print)?;
    for (name, _) in &args.save {
        buffer_param(&params, name)?;
    }

    let block = interp
        .block(&kernel.name)
        .map_err(|e| report(e, &compilation))?;
    let grid = match &args.grid {
        Some(dims) => grid_override(dims)?,
        None => interp
            .grid(&kernel.name, &kernel_args)
            .map_err(|e| report(e, &compilation))?,
    };
    let stats = interp
        .run_with_stats(&kernel.name, grid, block, &mut kernel_args)
        .map_err(|e| report(e, &compilation))?;
    let threads: u64 = grid.iter().chain(&block).map(|&d| u64::from(d)).product();
    println!(
        "ran {} on the CPU: grid {grid:?} x block {block:?} = {threads} threads, {} thread-steps",
        kernel.name, stats.thread_steps
    );

    for (index, range) in prints {
        let buffer = kernel_args[index].buffer().expect("checked to be a buffer");
        let (name, ty) = &params[index];
        let end = range.end.unwrap_or(buffer.len()).min(buffer.len());
        let start = range.start.min(end);
        let shown = launch_args::format_elements(buffer, start..end);
        println!(
            "{name}[{start}..{end}] of {}[{}]: [{}]",
            elem_type(ty),
            buffer.len(),
            shown.join(", ")
        );
        if let Some((count, first)) = launch_args::nans(buffer) {
            println!("  {count} NaN values, the first in element {first}");
        }
    }
    for (name, path) in &args.save {
        let index = buffer_param(&params, name)?;
        let bytes = &kernel_args[index].buffer().expect("a buffer").bytes;
        std::fs::write(path, bytes).map_err(|e| {
            eprintln!("error: writing {path}: {e}");
            Failed(EXIT_INTERNAL)
        })?;
        println!("wrote {name} ({} bytes) to {path}", bytes.len());
    }
    Ok(())
}

fn pick_kernel<'m>(functions: &'m [Function], name: Option<&str>) -> Result<&'m Function, Failed> {
    let kernels: Vec<&Function> = functions
        .iter()
        .filter(|f| matches!(f.kind, FunctionKind::Kernel(_)))
        .collect();
    let names = || {
        kernels
            .iter()
            .map(|k| k.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match (name, kernels.as_slice()) {
        (None, [only]) => Ok(only),
        (None, []) => Err(usage("the file has no kernels".to_string())),
        (None, _) => Err(usage(format!(
            "the file has several kernels; pick one with --kernel: {}",
            names()
        ))),
        (Some(name), _) => kernels
            .iter()
            .find(|k| k.name == name)
            .copied()
            .ok_or_else(|| usage(format!("no kernel `{name}`; the file has: {}", names()))),
    }
}

/// Each parameter's name and type, in order.
fn parameters(kernel: &Function) -> Vec<(String, zinc_dsl::ir::Type)> {
    kernel
        .params
        .iter()
        .map(|p| {
            let var = &kernel.vars[p.0 as usize];
            (var.name.clone(), var.ty.clone())
        })
        .collect()
}

fn signature(kernel: &Function, params: &[(String, zinc_dsl::ir::Type)]) -> String {
    let list: Vec<String> = params.iter().map(|(n, t)| format!("{n}: {t}")).collect();
    format!("{}({})", kernel.name, list.join(", "))
}

/// One argument per parameter, in parameter order, from the `--arg NAME=SPEC` list.
fn arguments(
    kernel: &Function,
    params: &[(String, zinc_dsl::ir::Type)],
    given: &[(String, String)],
    seed: u64,
) -> Result<Vec<Arg>, Failed> {
    for (i, (name, _)) in given.iter().enumerate() {
        if !params.iter().any(|(p, _)| p == name) {
            return Err(usage(format!(
                "kernel `{}` has no parameter `{name}`; it takes {}",
                kernel.name,
                signature(kernel, params)
            )));
        }
        if given[..i].iter().any(|(earlier, _)| earlier == name) {
            return Err(usage(format!("--arg `{name}` is given twice")));
        }
    }
    let missing: Vec<String> = params
        .iter()
        .filter(|(p, _)| !given.iter().any(|(name, _)| name == p))
        .map(|(p, ty)| format!("`{p}: {ty}`"))
        .collect();
    if !missing.is_empty() {
        return Err(usage(format!(
            "missing --arg for {}; kernel `{}` takes {}\n  (buffers take {BUFFER_SPECS})",
            missing.join(", "),
            kernel.name,
            signature(kernel, params)
        )));
    }
    params
        .iter()
        .enumerate()
        .map(|(index, (name, ty))| {
            let spec = &given.iter().find(|(n, _)| n == name).expect("checked").1;
            let mut rng = launch_args::rng_for(seed, index);
            launch_args::parse_arg(ty, spec, &mut rng)
                .map_err(|e| usage(format!("--arg {name}={spec}: `{name}` is `{ty}`: {e}")))
        })
        .collect()
}

/// The index of buffer parameter `name`.
fn buffer_param(params: &[(String, zinc_dsl::ir::Type)], name: &str) -> Result<usize, Failed> {
    let index = params
        .iter()
        .position(|(p, _)| p == name)
        .ok_or_else(|| usage(format!("the kernel has no parameter `{name}`")))?;
    match &params[index].1 {
        zinc_dsl::ir::Type::View { .. } => Ok(index),
        ty => Err(usage(format!(
            "`{name}` is `{ty}`, not a buffer: only buffers can be printed or saved"
        ))),
    }
}

/// Elements to print: a start and an end (None: the buffer's end).
struct PrintRange {
    start: usize,
    end: Option<usize>,
}

/// The buffers to print, by parameter index; every mutable buffer when none are asked for.
fn prints(
    params: &[(String, zinc_dsl::ir::Type)],
    asked: &[String],
) -> Result<Vec<(usize, PrintRange)>, Failed> {
    if asked.is_empty() {
        let outputs = params
            .iter()
            .enumerate()
            .filter(|(_, (_, ty))| matches!(ty, zinc_dsl::ir::Type::View { mutable: true, .. }));
        return Ok(outputs
            .map(|(i, _)| {
                let range = PrintRange {
                    start: 0,
                    end: Some(DEFAULT_PRINT),
                };
                (i, range)
            })
            .collect());
    }
    asked
        .iter()
        .map(|spec| {
            let (name, range) = spec.split_once(':').unwrap_or((spec, ""));
            let index = buffer_param(params, name)?;
            let range = parse_print_range(range).ok_or_else(|| {
                usage(format!(
                    "--print {spec}: expected NAME, NAME:COUNT or NAME:START..END"
                ))
            })?;
            Ok((index, range))
        })
        .collect()
}

fn parse_print_range(text: &str) -> Option<PrintRange> {
    let bound = |s: &str| -> Option<Option<usize>> {
        match s.trim() {
            "" => Some(None),
            n => n.parse().ok().map(Some),
        }
    };
    Some(match text.split_once("..") {
        None if text.is_empty() => PrintRange {
            start: 0,
            end: Some(DEFAULT_PRINT),
        },
        None => PrintRange {
            start: 0,
            end: Some(text.trim().parse().ok()?),
        },
        Some((start, end)) => PrintRange {
            start: bound(start)?.unwrap_or(0),
            end: bound(end)?,
        },
    })
}

fn elem_type(ty: &zinc_dsl::ir::Type) -> String {
    match ty {
        zinc_dsl::ir::Type::View { elem, .. } => elem.to_string(),
        other => other.to_string(),
    }
}

fn grid_override(dims: &[u32]) -> Result<[u32; 3], Failed> {
    if dims.is_empty() || dims.len() > 3 || dims.contains(&0) {
        return Err(usage(format!(
            "--grid takes 1 to 3 non-zero sizes X[,Y[,Z]], got {dims:?}"
        )));
    }
    let mut grid = [1; 3];
    grid[..dims.len()].copy_from_slice(dims);
    Ok(grid)
}

/// A failed launch: faults of the kernel as located diagnostics (exit 1); bad launches are
/// usage errors; what the interpreter cannot run is an internal error.
fn report(e: InterpError, compilation: &zinc_dsl::Compilation) -> Failed {
    let code = match e.kind() {
        ErrorKind::NoKernel(_)
        | ErrorKind::ArgCount { .. }
        | ErrorKind::ArgType { .. }
        | ErrorKind::Launch { .. } => EXIT_USAGE,
        ErrorKind::Unsupported { .. } | ErrorKind::Malformed { .. } => EXIT_INTERNAL,
        _ => EXIT_PROGRAM_ERROR,
    };
    eprint!(
        "{}",
        zinc_dsl::render(&e.to_diagnostic(), &compilation.sources)
    );
    if let ErrorKind::StepLimit { .. } = e.kind() {
        eprintln!("(raise the limit with --step-limit)");
    }
    Failed(code)
}
