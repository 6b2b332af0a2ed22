//! A CPU interpreter for zinc's typed IR, so that kernel results can be checked without a GPU
//! (like Triton's interpreter mode).
//!
//! The blocks of a launch run one after another; within a block every thread walks the IR in lock
//! step under an active mask (SIMT), so barriers, shuffles and votes see exactly the threads that
//! reach them. The exception is warp specialization: an `if` that splits the active threads along
//! warp boundaries, with an `mbarrier_wait` on either side, runs its sides as independent roles
//! (each in lock step), one at a time, switching when the running role waits for an mbarrier phase
//! that has not completed, as the producer and consumer warps of a TMA ring run on the GPU (see the
//! `roles` module). The blocks of a thread-block cluster (`cluster(...)`) run together in the same
//! way, one cluster after another: each block is a role, and a block that waits for an mbarrier
//! phase another block completes (a multicast copy, a remote arrival) or at `cluster_sync()` lets
//! the others run (see the `cluster` module). Besides computing results it catches what the GPU would silently get wrong:
//! out-of-bounds accesses, barriers in divergent code, warp operations by part of a warp, and
//! shared-memory data races within one barrier interval. Shared memory starts each block filled
//! with all-ones bytes (NaN in every float type), so reads of unwritten shared memory show.
//!
//! Semantics chosen to match the GPU:
//! - integers wrap at their width; `/` and `%` truncate (the remainder has the dividend's sign);
//!   `MIN / -1` wraps to `MIN`; division by zero is an error (undefined in LLVM).
//! - a shift by a negative amount or by at least the width is an error (undefined in LLVM, so
//!   the GPU result would be arbitrary), like division by zero.
//! - f16/bf16/f32 arithmetic is correctly rounded to the type after every operation; math
//!   functions are computed in f64 and rounded once, while the GPU uses approximate instructions
//!   for several of them: compare results with a tolerance.
//! - float-to-int casts truncate and saturate, NaN gives 0 (`cvt.rzi.sat`); `!=` on floats is
//!   true when either side is NaN; `max`/`min` prefer a number over NaN.
//! - shuffles use a full warp mask and clamp 31: an out-of-range source lane yields the thread's
//!   own value; reading from an exited lane is an error (undefined on the GPU).
//! - threads that returned from the kernel are not waited for by barriers, shuffles or votes.
//! - atomics run one thread at a time in thread order; fences are no-ops.
//! - a race is two accesses to one shared byte by different threads between two barriers,
//!   unless both read or both are atomic, or mbarriers order them: a thread's accesses before
//!   its arrival (`mbarrier_arrive`, `mbarrier_expect_tx`) are ordered before another thread's
//!   accesses after its `mbarrier_wait` returns for the phase that arrival completed
//!   (transitively), in whichever block of the cluster either thread runs; `cluster_sync()` is a
//!   barrier of every block of the cluster. Global memory is not race-checked.
//! - a `tma_store` writes global memory when issued, reading its shared source then; the source
//!   must hold the same bytes when the `tma_store_wait` that covers the store retires it, and a
//!   thread may not exit with stores not retired.
//!
//! ```
//! use zinc_interp::{Arg, Buffer, Interpreter, Value};
//!
//! let src = "kernel add1(x: global mut [f32], n: u32) grid(cdiv(n, 64)) block(64) {
//!     let i = block.x * 64 + thread.x;
//!     if i < n { x[i] += 1.0; }
//! }";
//! let c = zinc_dsl::compile_source("add1.tile", src, &[], &|_| None).map_err(|f| f.render());
//! let c = c.unwrap();
//! let mut args = [Arg::Buffer(Buffer::from_f32(&[1.0; 100])), Arg::Scalar(Value::U32(100))];
//! Interpreter::new(&c.module).sources(&c.sources).launch("add1", &mut args)?;
//! assert_eq!(args[0].buffer().unwrap().to_f32(), [2.0; 100]);
//! # Ok::<(), zinc_interp::InterpError>(())
//! ```

mod args;
mod builtins;
mod cluster;
mod copy;
mod error;
mod eval;
mod exec;
mod memory;
mod roles;
mod tensor;
mod tma;
mod value;

use zinc_dsl::diag::SourceMap;
use zinc_dsl::ir::{Function, FunctionKind, Module};

pub use args::Arg;
pub use error::{ErrorKind, InterpError, Location, RaceAccess, ThreadId};
pub use memory::{Access, Buffer, Element};
pub use value::{FragValue, Pointer, Value, Vector};

use exec::{Machine, UNSET};
use memory::Memory;
use value::Region;

/// Threads per block the GPU allows.
const MAX_BLOCK_THREADS: u64 = 1024;

/// Runs kernels of one module; configure with the builder methods, then [`Interpreter::run`] or
/// [`Interpreter::launch`].
#[derive(Clone, Debug)]
pub struct Interpreter<'m> {
    module: &'m Module,
    sources: Option<&'m SourceMap>,
    step_limit: u64,
}

impl<'m> Interpreter<'m> {
    /// Thread-steps (one statement or loop test for one thread) a launch may take by default.
    pub const DEFAULT_STEP_LIMIT: u64 = 1 << 28;

    pub fn new(module: &'m Module) -> Interpreter<'m> {
        Interpreter {
            module,
            sources: None,
            step_limit: Self::DEFAULT_STEP_LIMIT,
        }
    }

    /// The sources the module was compiled from, so errors name `file:line:col`.
    pub fn sources(mut self, sources: &'m SourceMap) -> Interpreter<'m> {
        self.sources = Some(sources);
        self
    }

    /// Stop a launch with [`InterpError::StepLimit`] after this many thread-steps.
    pub fn step_limit(mut self, steps: u64) -> Interpreter<'m> {
        self.step_limit = steps;
        self
    }

    /// The kernel named `name`.
    pub fn kernel(&self, name: &str) -> Result<&'m Function, InterpError> {
        self.module
            .functions
            .iter()
            .find(|f| f.name == name && matches!(f.kind, FunctionKind::Kernel(_)))
            .ok_or_else(|| InterpError::from(ErrorKind::NoKernel(name.to_string())))
    }

    /// The block size the kernel declares.
    pub fn block(&self, kernel: &str) -> Result<[u32; 3], InterpError> {
        let f = self.kernel(kernel)?;
        Ok(launch_of(f).block)
    }

    /// The grid the kernel declares, evaluated with these arguments (as the host runtime does).
    pub fn grid(&self, kernel: &str, args: &[Arg]) -> Result<[u32; 3], InterpError> {
        let f = self.kernel(kernel)?;
        args::check(f, args)?;
        // Grid expressions use scalar parameters only; views stay unset.
        let params: Vec<Value> = args
            .iter()
            .map(|a| match a {
                Arg::Scalar(v) => *v,
                _ => UNSET,
            })
            .collect();
        let mut machine = Machine::new(
            self.module,
            self.sources,
            self.step_limit,
            [[1; 3]; 3],
            Memory::new([], &[]),
        );
        let mut grid = [0; 3];
        for (g, e) in grid.iter_mut().zip(&launch_of(f).grid) {
            *g = match machine.eval_host(f, &params, e)? {
                Value::U32(x) => x,
                _ => return Err(machine.malformed(e.span, "a grid size that is not a u32")),
            };
        }
        Ok(grid)
    }

    /// Launch with the kernel's declared block and its grid computed from `args`.
    pub fn launch(&self, kernel: &str, args: &mut [Arg]) -> Result<(), InterpError> {
        let grid = self.grid(kernel, args)?;
        let block = self.block(kernel)?;
        self.run(kernel, grid, block, args)
    }

    /// Run `kernel` over `grid` blocks of `block` threads. Buffers in `args` are updated in
    /// place, also when the kernel fails part-way.
    pub fn run(
        &self,
        kernel: &str,
        grid: [u32; 3],
        block: [u32; 3],
        args: &mut [Arg],
    ) -> Result<(), InterpError> {
        self.run_with_stats(kernel, grid, block, args).map(drop)
    }

    /// [`Interpreter::run`], also saying how much work the launch took.
    pub fn run_with_stats(
        &self,
        kernel: &str,
        grid: [u32; 3],
        block: [u32; 3],
        args: &mut [Arg],
    ) -> Result<LaunchStats, InterpError> {
        let f = self.kernel(kernel)?;
        args::check(f, args)?;
        check_launch(f, grid, block)?;
        let params: Vec<Value> = args
            .iter()
            .enumerate()
            .map(|(i, a)| match a {
                Arg::Scalar(v) => *v,
                Arg::Buffer(_) | Arg::ReadOnly(_) => Value::Ptr(Pointer {
                    region: Region::Global(i),
                    offset: 0,
                }),
            })
            .collect();
        let names = f.params.iter().map(|p| f.vars[p.0 as usize].name.clone());
        let globals = names.zip(args.iter_mut().map(Arg::buffer_mut));
        let mem = Memory::new(globals, &f.shared);
        let cluster = launch_of(f).cluster;
        let mut machine = Machine::new(
            self.module,
            self.sources,
            self.step_limit,
            [grid, block, cluster],
            mem,
        );
        machine.encode_tensor_maps(f, &params)?;
        for z in (0..grid[2]).step_by(cluster[2] as usize) {
            for y in (0..grid[1]).step_by(cluster[1] as usize) {
                for x in (0..grid[0]).step_by(cluster[0] as usize) {
                    machine.run_cluster(f, [x, y, z], &params)?;
                }
            }
        }
        Ok(LaunchStats {
            thread_steps: machine.steps(),
        })
    }
}

/// The work a launch took.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct LaunchStats {
    /// Statements and loop tests executed, counted once per thread that ran them (what
    /// [`Interpreter::step_limit`] limits).
    pub thread_steps: u64,
}

/// Run `kernel` over `grid` blocks of `block` threads with default settings; see
/// [`Interpreter`] for source locations in errors and the step limit.
pub fn interpret(
    module: &Module,
    kernel: &str,
    grid: [u32; 3],
    block: [u32; 3],
    args: &mut [Arg],
) -> Result<(), InterpError> {
    Interpreter::new(module).run(kernel, grid, block, args)
}

fn launch_of(f: &Function) -> &zinc_dsl::ir::Launch {
    match &f.kind {
        FunctionKind::Kernel(launch) => launch,
        FunctionKind::Device => unreachable!("Interpreter::kernel only finds kernels"),
    }
}

/// Non-empty grid and block; the block within the kernel's launch bound (`.maxntid`); the grid a
/// whole number of clusters.
fn check_launch(f: &Function, grid: [u32; 3], block: [u32; 3]) -> Result<(), InterpError> {
    let fail = |reason: String| {
        Err(InterpError::from(ErrorKind::Launch {
            kernel: f.name.clone(),
            reason,
        }))
    };
    if grid.contains(&0) || block.contains(&0) {
        return fail(format!("empty grid {grid:?} or block {block:?}"));
    }
    let threads: u64 = block.iter().map(|&d| d as u64).product();
    let bound: u64 = launch_of(f).block.iter().map(|&d| d as u64).product();
    if threads > bound.min(MAX_BLOCK_THREADS) {
        return fail(format!(
            "block {block:?} has {threads} threads; the kernel allows at most {}",
            bound.min(MAX_BLOCK_THREADS)
        ));
    }
    let cluster = launch_of(f).cluster;
    if (0..3).any(|a| !grid[a].is_multiple_of(cluster[a])) {
        return fail(format!(
            "grid {grid:?} is not a whole number of clusters of {cluster:?} blocks"
        ));
    }
    Ok(())
}
