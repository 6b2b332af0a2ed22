//! Errors of a launch: bad arguments, and faults of the running kernel located at a source line.

use std::fmt;

use zinc_dsl::diag::{Diagnostic, SourceMap, Span};

use crate::memory::{Access, Site};

/// A place in the kernel source: `file:line:col` when a [`SourceMap`] was given, else the file
/// and the byte offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub file: String,
    /// 1-based line and column, when the source text was available.
    pub line_col: Option<(usize, usize)>,
    /// The span, for rendering the source line with the dsl's diagnostics.
    pub span: Span,
}

impl Location {
    pub(crate) fn new(site: Site<'_>, sources: Option<&SourceMap>) -> Location {
        let known = sources.and_then(|s| s.files.get(site.span.file as usize).map(|f| (s, f)));
        match known {
            Some((map, file)) => Location {
                file: file.name.clone(),
                line_col: Some(map.line_col(site.span.file, site.span.start)),
                span: site.span,
            },
            None => Location {
                file: site.file.to_string(),
                line_col: None,
                span: site.span,
            },
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line_col {
            Some((line, col)) => write!(f, "{}:{line}:{col}", self.file),
            None => write!(f, "{}:byte {}", self.file, self.span.start),
        }
    }
}

/// A thread of the launch: its block and its index in the block.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ThreadId {
    pub block: [u32; 3],
    pub thread: [u32; 3],
}

impl fmt::Display for ThreadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [bx, by, bz] = self.block;
        let [tx, ty, tz] = self.thread;
        write!(f, "thread ({tx}, {ty}, {tz}) of block ({bx}, {by}, {bz})")
    }
}

/// The earlier side of a shared-memory race.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RaceAccess {
    pub thread: ThreadId,
    pub access: Access,
    pub at: Location,
}

impl fmt::Display for RaceAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} by {} at {}", self.access, self.thread, self.at)
    }
}

/// Why a launch failed: what happened and, for faults of the running kernel, where.
#[derive(Debug)]
pub struct InterpError(Box<Repr>);

/// Boxed: errors are rare, and results stay small on the interpreter's hot paths.
#[derive(Debug)]
struct Repr {
    kind: ErrorKind,
    at: Option<Location>,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ErrorKind {
    #[error("no kernel named `{0}` in the module")]
    NoKernel(String),
    #[error("kernel `{kernel}` takes {expected} arguments, got {got}")]
    ArgCount {
        kernel: String,
        expected: usize,
        got: usize,
    },
    #[error("argument {index} (`{param}`) of kernel `{kernel}`: expected {expected}, got {got}")]
    ArgType {
        kernel: String,
        index: usize,
        param: String,
        expected: String,
        got: String,
    },
    #[error("invalid launch of kernel `{kernel}`: {reason}")]
    Launch { kernel: String, reason: String },
    #[error("out-of-bounds {access} of {space} buffer `{buffer}` at element {index} (length {len}) by {thread}")]
    OutOfBounds {
        thread: ThreadId,
        access: Access,
        space: &'static str,
        buffer: String,
        index: i64,
        len: u64,
    },
    #[error("barrier reached by {arrived} of the {expected} live threads of block ({}, {}, {}) (a barrier in divergent code); thread ({}, {}, {}) is elsewhere", block[0], block[1], block[2], missing[0], missing[1], missing[2])]
    DivergentBarrier {
        block: [u32; 3],
        arrived: usize,
        expected: usize,
        missing: [u32; 3],
    },
    #[error("full-warp {op} reached by only part of warp {warp} of block ({}, {}, {}); lane {missing_lane} is live but elsewhere", block[0], block[1], block[2])]
    DivergentWarp {
        op: &'static str,
        block: [u32; 3],
        warp: u32,
        missing_lane: u32,
    },
    #[error("shuffle by {thread} reads lane {lane}, which has exited (its value is undefined)")]
    ShuffleFromExited { thread: ThreadId, lane: u32 },
    /// Located at the later access.
    #[error("data race on shared array `{array}` element {index}: {access} by {thread} after the {earlier}, with no barrier between")]
    SharedRace {
        array: String,
        index: u64,
        thread: ThreadId,
        access: Access,
        earlier: RaceAccess,
    },
    /// Located at the access; `issued` is the `cp_async` still copying into the element.
    #[error("{access} of shared array `{array}` element {index} by {thread} while the {issued} is still in flight: complete it with `cp_async_wait` (and a barrier before other threads use it)")]
    CopyInFlight {
        array: String,
        index: u64,
        thread: ThreadId,
        access: Access,
        issued: RaceAccess,
    },
    /// Located at the access; `issued` is the `tma_load` whose mbarrier phase the accessing
    /// thread has not waited for.
    #[error("{access} of shared array `{array}` element {index} by {thread} before it waited for the mbarrier phase the {issued} completes on: call `mbarrier_wait` first")]
    TmaInFlight {
        array: String,
        index: u64,
        thread: ThreadId,
        access: Access,
        issued: RaceAccess,
    },
    /// Located at the async proxy's read (a `tma_store`'s source, a `wgmma` operand); `write`
    /// is the store it may not see.
    #[error("{op} by {thread} reads shared array `{array}` element {index} through the async proxy, but the {write} is not fenced for it: the writing thread must call `fence_proxy_async()` after the write and before the `barrier()` or `mbarrier_arrive` that orders it before the read (else the async proxy may read stale data)")]
    UnfencedWrite {
        op: &'static str,
        thread: ThreadId,
        array: String,
        index: u64,
        write: RaceAccess,
    },
    /// Located at the wait.
    #[error("`mbarrier_wait` by {thread} on mbarrier `{array}` byte {offset} for its phase of parity {parity}, which has not completed ({arrivals} arrivals and {tx_bytes} transaction bytes outstanding); no other thread of the block or its cluster can run to complete it (lock step, or every role waits), so it never will")]
    MbarrierDeadlock {
        thread: ThreadId,
        array: String,
        offset: i64,
        parity: u32,
        arrivals: u32,
        tx_bytes: i64,
    },
    /// A cluster operation naming a block that is not there: a rank or mask bit past the
    /// cluster, or a block that has exited.
    #[error("{op} by {thread}: {what}")]
    Cluster {
        op: &'static str,
        thread: ThreadId,
        what: String,
    },
    #[error("{op} by {thread} on mbarrier `{array}` byte {offset}: {what}")]
    Mbarrier {
        op: &'static str,
        thread: ThreadId,
        array: String,
        offset: i64,
        what: String,
    },
    #[error("tensor map `{map}`: {what}")]
    TensorMap { map: String, what: String },
    /// Located at the `tma_store_wait` that retired the store issued at `store`.
    #[error("the shared source of the tma_store by {thread} at {store} was overwritten before a tma_store_wait covered it (shared array `{array}` element {index} changed)")]
    TmaStoreSourceOverwritten {
        thread: ThreadId,
        store: Location,
        array: String,
        index: u64,
    },
    /// Located where the thread exits (its `return`, or the kernel's closing brace); `store` is
    /// its oldest store not retired by a `tma_store_wait`.
    #[error("a tma_store's shared source may still be read when {thread} exits: tma_store_wait(0) before returning (the store at {store} {})", unfinished_store(*.committed))]
    TmaStoreUnfinished {
        thread: ThreadId,
        store: Location,
        committed: bool,
    },
    /// Located at the access.
    #[error("{access} of `{var}` element {index} while a wgmma that uses it as its {role} is in flight: wait for it first (`wgmma_wait`; undefined on the GPU)")]
    WgmmaInFlight {
        var: String,
        index: u32,
        access: Access,
        role: &'static str,
    },
    #[error("{op} by {thread} at a byte offset of {offset}, which is not a multiple of {align}")]
    Misaligned {
        op: &'static str,
        thread: ThreadId,
        offset: i64,
        align: u32,
    },
    #[error("integer division by zero in {thread}")]
    DivByZero { thread: ThreadId },
    #[error("shift by {amount} of a {bits}-bit integer in {thread}: amounts must be in 0..{bits} (undefined on the GPU)")]
    ShiftOutOfRange {
        amount: i128,
        bits: u32,
        thread: ThreadId,
    },
    #[error("step limit of {limit} thread-steps exceeded (an endless loop?); raise it with `Interpreter::step_limit`")]
    StepLimit { limit: u64 },
    #[error("device-function calls nested deeper than {limit}")]
    CallDepth { limit: usize },
    #[error("not supported by the interpreter: {what}")]
    Unsupported { what: String },
    #[error("malformed IR: {what}")]
    Malformed { what: String },
}

impl InterpError {
    pub(crate) fn new(kind: ErrorKind, at: Option<Location>) -> InterpError {
        InterpError(Box::new(Repr { kind, at }))
    }

    pub fn kind(&self) -> &ErrorKind {
        &self.0.kind
    }

    /// Where in the kernel source it happened; None for argument and launch errors.
    pub fn location(&self) -> Option<&Location> {
        self.0.at.as_ref()
    }

    /// As a diagnostic, for rendering with the source line (`zinc_dsl::render`); a race notes
    /// its earlier access.
    pub fn to_diagnostic(&self) -> Diagnostic {
        let mut d = Diagnostic::error(self.kind().to_string(), Span::default());
        d.span = self.location().map(|l| l.span);
        match self.kind() {
            ErrorKind::SharedRace { earlier, .. } => {
                let note = format!("the earlier {} by {}", earlier.access, earlier.thread);
                d = d.with_note(note, Some(earlier.at.span));
            }
            ErrorKind::UnfencedWrite { write, .. } => {
                let note = format!("the unfenced write by {}", write.thread);
                d = d.with_note(note, Some(write.at.span));
            }
            ErrorKind::TmaStoreSourceOverwritten { store, .. }
            | ErrorKind::TmaStoreUnfinished { store, .. } => {
                d = d.with_note("the tma_store", Some(store.span));
            }
            _ => {}
        }
        d
    }
}

/// What became of a store a thread left unfinished.
fn unfinished_store(committed: bool) -> &'static str {
    if committed {
        "was committed, but no tma_store_wait covered it"
    } else {
        "was never committed: tma_store_commit() first"
    }
}

impl From<ErrorKind> for InterpError {
    fn from(kind: ErrorKind) -> InterpError {
        InterpError::new(kind, None)
    }
}

impl fmt::Display for InterpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.location() {
            Some(at) => write!(f, "{at}: {}", self.kind()),
            None => write!(f, "{}", self.kind()),
        }
    }
}

impl std::error::Error for InterpError {}
