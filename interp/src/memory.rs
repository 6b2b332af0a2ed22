//! Memory: host buffers bound to global views, the per-block shared memory with its race
//! detector, and typed loads and stores through views with bounds checks.
//!
//! Shared memory also keeps, per byte, what last wrote it, for two checks: bytes an
//! asynchronous copy has not landed for the accessing thread yet, and bytes a thread stored
//! that the async proxy (a `tma_store`'s source, a `wgmma` operand) reads without the writer's
//! `fence_proxy_async()` between its store and the synchronization ordering it before the read.

use std::collections::HashMap;
use std::fmt;

use half::{bf16, f16};
use zinc_dsl::diag::Span;
use zinc_dsl::ir::{Scalar, SharedArray, Space, Type};

use crate::value::{Pointer, Region, Value, Vector};

/// A typed host buffer, bound to a `global [T]` kernel parameter. Little-endian, like the GPU.
#[derive(Clone, Debug, PartialEq)]
pub struct Buffer {
    /// The element type (a scalar or vector type); must equal the view's element type.
    pub elem: Type,
    pub bytes: Vec<u8>,
}

/// Host element types that buffers convert from and to.
pub trait Element: Copy {
    const SCALAR: Scalar;
    fn to_value(self) -> Value;
    fn from_value(v: Value) -> Self;
}

macro_rules! element {
    ($($t:ty => $variant:ident),* $(,)?) => {$(
        impl Element for $t {
            const SCALAR: Scalar = Scalar::$variant;
            fn to_value(self) -> Value {
                Value::$variant(self)
            }
            fn from_value(v: Value) -> Self {
                match v {
                    Value::$variant(x) => x,
                    _ => unreachable!("buffer element type checked before conversion"),
                }
            }
        }
    )*};
}

element!(
    bool => Bool, i8 => I8, i16 => I16, i32 => I32, i64 => I64,
    u8 => U8, u16 => U16, u32 => U32, u64 => U64,
    f16 => F16, bf16 => Bf16, f32 => F32, f64 => F64,
);

impl Buffer {
    pub fn new(elem: Type, bytes: Vec<u8>) -> Buffer {
        Buffer { elem, bytes }
    }

    /// `len` elements of `elem`, all bits zero.
    pub fn zeros(elem: Type, len: usize) -> Buffer {
        let bytes = vec![0; len * elem.size() as usize];
        Buffer { elem, bytes }
    }

    pub fn from_slice<T: Element>(data: &[T]) -> Buffer {
        let size = T::SCALAR.size() as usize;
        let mut bytes = Vec::with_capacity(data.len() * size);
        for x in data {
            bytes.extend_from_slice(&x.to_value().to_bits().to_le_bytes()[..size]);
        }
        Buffer::new(Type::Scalar(T::SCALAR), bytes)
    }

    /// The elements as `T`.
    ///
    /// # Panics
    /// If the buffer's element type is not the scalar type of `T`.
    pub fn to_vec<T: Element>(&self) -> Vec<T> {
        assert_eq!(
            self.elem,
            Type::Scalar(T::SCALAR),
            "buffer element type is not {}",
            T::SCALAR.name()
        );
        let size = T::SCALAR.size() as usize;
        self.bytes
            .chunks_exact(size)
            .map(|c| T::from_value(decode(&Type::Scalar(T::SCALAR), c)))
            .collect()
    }

    pub fn from_f32(data: &[f32]) -> Buffer {
        Buffer::from_slice(data)
    }
    pub fn to_f32(&self) -> Vec<f32> {
        self.to_vec()
    }
    pub fn from_f16(data: &[f16]) -> Buffer {
        Buffer::from_slice(data)
    }
    pub fn to_f16(&self) -> Vec<f16> {
        self.to_vec()
    }
    pub fn from_bf16(data: &[bf16]) -> Buffer {
        Buffer::from_slice(data)
    }
    pub fn to_bf16(&self) -> Vec<bf16> {
        self.to_vec()
    }
    pub fn from_u8(data: &[u8]) -> Buffer {
        Buffer::from_slice(data)
    }
    pub fn to_u8(&self) -> Vec<u8> {
        self.to_vec()
    }
    pub fn from_u32(data: &[u32]) -> Buffer {
        Buffer::from_slice(data)
    }
    pub fn to_u32(&self) -> Vec<u32> {
        self.to_vec()
    }
    pub fn from_i32(data: &[i32]) -> Buffer {
        Buffer::from_slice(data)
    }
    pub fn to_i32(&self) -> Vec<i32> {
        self.to_vec()
    }

    /// Number of whole elements.
    pub fn len(&self) -> usize {
        match self.elem.size() {
            0 => 0,
            size => self.bytes.len() / size as usize,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Read a value of type `ty` (scalar or vector) from its little-endian bytes.
pub(crate) fn decode(ty: &Type, bytes: &[u8]) -> Value {
    let scalar = |s: Scalar, b: &[u8]| {
        let mut raw = [0u8; 8];
        raw[..b.len()].copy_from_slice(b);
        Value::from_bits(s, u64::from_le_bytes(raw))
    };
    match ty {
        Type::Vector(s, _) => {
            let lanes: Vec<Value> = bytes
                .chunks_exact(s.size() as usize)
                .map(|c| scalar(*s, c))
                .collect();
            Value::Vector(Vector::new(&lanes).expect("vector types have 2 to 4 lanes"))
        }
        Type::Scalar(s) => scalar(*s, bytes),
        Type::Void
        | Type::View { .. }
        | Type::Frag(_)
        | Type::Array { .. }
        | Type::TensorMap(_) => {
            unreachable!("views hold scalars or vectors")
        }
    }
}

/// Write a scalar or vector value as little-endian bytes.
pub(crate) fn encode(v: Value, out: &mut [u8]) {
    match v {
        Value::Vector(vec) => {
            let size = vec.elem().size() as usize;
            for (lane, chunk) in vec.lanes().zip(out.chunks_exact_mut(size)) {
                encode(lane, chunk);
            }
        }
        v => {
            let n = out.len();
            out.copy_from_slice(&v.to_bits().to_le_bytes()[..n]);
        }
    }
}

/// A place in the program, for messages: a span and the name of its function's file.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Site<'m> {
    pub span: Span,
    pub file: &'m str,
}

/// One thread's access at a site.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Touch<'m> {
    pub thread: u32,
    pub site: Site<'m>,
}

/// How a thread touched memory.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Access {
    Read = 0,
    Write = 1,
    Atomic = 2,
}

impl Access {
    const ALL: [Access; 3] = [Access::Read, Access::Write, Access::Atomic];

    /// Two accesses to one byte by different threads race unless both read or both are atomic.
    fn conflicts_with(self, other: Access) -> bool {
        !matches!(
            (self, other),
            (Access::Read, Access::Read) | (Access::Atomic, Access::Atomic)
        )
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::Atomic => "atomic",
        })
    }
}

/// Why a memory access failed.
#[derive(Debug)]
pub(crate) enum Fault<'m> {
    OutOfBounds {
        space: Space,
        buffer: String,
        index: i64,
        len: u64,
        kind: Access,
    },
    Race {
        array: String,
        index: u64,
        earlier: Touch<'m>,
        earlier_kind: Access,
        kind: Access,
    },
    /// An access to shared bytes that a `cp_async` (by `issued`) has not completed yet, or
    /// (`tma`) that a `tma_load` by `issued` wrote on an mbarrier phase the accessing thread has
    /// not waited for.
    InFlight {
        array: String,
        index: u64,
        issued: Touch<'m>,
        kind: Access,
        tma: bool,
    },
    /// A read by the async proxy (`op`) of shared bytes that `write` stored through the generic
    /// proxy with no `fence_proxy_async()` of its thread after it that is ordered before the read.
    Unfenced {
        op: &'static str,
        array: String,
        index: u64,
        write: Touch<'m>,
    },
}

/// An access as logged: who and where, and the accessing thread's epoch then.
#[derive(Copy, Clone)]
struct Logged<'m> {
    touch: Touch<'m>,
    epoch: u32,
}

/// Accesses of one kind to one byte by up to two different threads: enough to find one by a
/// thread other than any given one. An access ordered before a newer one of the same kind is
/// dropped for it: whatever races with the older access also races with the newer.
#[derive(Copy, Clone, Default)]
struct Touches<'m>([Option<Logged<'m>>; 2]);

impl<'m> Touches<'m> {
    /// A logged access that is not ordered before an access by `thread` now.
    fn unordered(&self, thread: u32, clocks: &Clocks) -> Option<Touch<'m>> {
        self.0
            .iter()
            .flatten()
            .find(|l| !clocks.ordered(l, thread))
            .map(|l| l.touch)
    }

    fn add(&mut self, who: Touch<'m>, clocks: &Clocks) {
        let epoch = clocks.epoch(who.thread);
        // The thread's first site stays (for messages); its epoch moves on.
        if let Some(same) = self
            .0
            .iter_mut()
            .flatten()
            .find(|l| l.touch.thread == who.thread)
        {
            same.epoch = epoch;
            return;
        }
        for slot in &mut self.0 {
            if slot.is_some_and(|l| clocks.ordered(&l, who.thread)) {
                *slot = None;
            }
        }
        if let Some(free) = self.0.iter_mut().find(|slot| slot.is_none()) {
            *free = Some(Logged { touch: who, epoch });
        }
    }
}

/// What one shared byte saw since the last barrier, by [`Access`] kind.
#[derive(Copy, Clone, Default)]
struct ByteLog<'m> {
    interval: u32,
    seen: [Touches<'m>; 3],
}

#[derive(Clone)]
struct SharedLayout {
    name: String,
    base: usize,
    bytes: usize,
    elem_size: usize,
}

/// The mbarrier phase a `tma_load` completes on: its bytes are visible to a thread only once
/// that thread has waited for the phase (or a block barrier followed another thread's wait).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct TmaGuard {
    /// The mbarrier's id (a fresh one per `mbarrier_init`).
    pub barrier: u32,
    /// The phase, counted from the initialization.
    pub phase: u32,
}

/// Happens-before through mbarriers, as vector clocks. A block barrier orders everything before
/// it already (the logs of older intervals count as empty); within an interval, a thread's
/// accesses before its arrival on an mbarrier are ordered before the accesses of a thread after
/// its wait for the phase that arrival completed (and, transitively, after anything that thread
/// orders later). Each thread's epoch moves on at its arrivals; an access logged at epoch `e`
/// of thread `a` is ordered before thread `b` now when `b` knows epoch `e` of `a`.
struct Clocks {
    threads: usize,
    /// Row `b`, column `a`: the latest epoch of thread `a` that thread `b` knows; every thread
    /// starts at epoch 1 and knows no other. Empty until the cluster's first arrival (then a
    /// square of the cluster's threads: 256 MiB for 8 blocks of 1024).
    known: Vec<u32>,
    /// Per mbarrier id: per thread, how many of its phases the thread has seen complete, by its
    /// own waits or through another thread's that it synchronized with.
    observed: HashMap<u32, Vec<u32>>,
    /// Per mbarrier id: what its arrivals released.
    phases: HashMap<u32, PhaseClocks>,
    /// Mbarrier ids handed out so far in the cluster.
    barrier_ids: u32,
}

/// What arrivals on an mbarrier released: the arriving threads' clocks and observed phases.
#[derive(Clone, Default)]
struct Release {
    known: Vec<u32>,
    observed: HashMap<u32, u32>,
}

/// An mbarrier's releases: by all arrivals so far, and as of its last completed phase (what a
/// wait that returns acquires; arrivals are read-modify-writes of the barrier, so each phase
/// carries the earlier ones').
#[derive(Default)]
struct PhaseClocks {
    arrivals: Release,
    completed: Release,
}

impl Clocks {
    fn new() -> Clocks {
        Clocks {
            threads: 0,
            known: Vec::new(),
            observed: HashMap::new(),
            phases: HashMap::new(),
            barrier_ids: 0,
        }
    }

    fn reset(&mut self, threads: usize) {
        self.threads = threads;
        self.known.clear();
        self.observed.clear();
        self.phases.clear();
        self.barrier_ids = 0;
    }

    fn epoch(&self, thread: u32) -> u32 {
        let t = thread as usize;
        self.known.get(t * self.threads + t).copied().unwrap_or(1)
    }

    /// Whether the logged access is ordered before an access by `thread` now.
    fn ordered(&self, logged: &Logged, thread: u32) -> bool {
        self.knows(thread, logged.touch.thread, logged.epoch)
    }

    /// Whether what `writer` did at `epoch` is ordered before what `reader` does now.
    fn knows(&self, reader: u32, writer: u32, epoch: u32) -> bool {
        let (a, b) = (writer as usize, reader as usize);
        a == b
            || self
                .known
                .get(b * self.threads + a)
                .is_some_and(|&e| e >= epoch)
    }

    /// Whether `thread` has seen the phase of `guard` complete.
    fn sees(&self, guard: TmaGuard, thread: u32) -> bool {
        self.observed
            .get(&guard.barrier)
            .is_some_and(|seen| seen[thread as usize] > guard.phase)
    }

    /// `thread` has seen `phases` phases of mbarrier `barrier` complete.
    fn observe(&mut self, barrier: u32, thread: usize, phases: u32) {
        let threads = self.threads;
        let seen = self
            .observed
            .entry(barrier)
            .or_insert_with(|| vec![0; threads]);
        seen[thread] = seen[thread].max(phases);
    }

    /// `thread` arrives on `barrier`: its clock and observed phases join the barrier's, and its
    /// epoch moves on.
    fn arrive(&mut self, barrier: u32, thread: usize) {
        let n = self.threads;
        if self.known.is_empty() {
            self.known = vec![0; n * n];
            for t in 0..n {
                self.known[t * n + t] = 1;
            }
        }
        let release = &mut self.phases.entry(barrier).or_default().arrivals;
        if release.known.is_empty() {
            release.known = vec![0; n];
        }
        let row = &self.known[thread * n..(thread + 1) * n];
        join(&mut release.known, row);
        for (&id, seen) in &self.observed {
            let phases = release.observed.entry(id).or_default();
            *phases = (*phases).max(seen[thread]);
        }
        self.known[thread * n + thread] += 1;
    }

    /// A phase of `barrier` completed: a wait that returns now acquires what was released.
    fn complete(&mut self, barrier: u32) {
        if let Some(p) = self.phases.get_mut(&barrier) {
            p.completed.clone_from(&p.arrivals);
        }
    }

    /// `thread`'s wait returned, `phases` phases of `barrier` having completed.
    fn acquire(&mut self, barrier: u32, thread: usize, phases: u32) {
        self.observe(barrier, thread, phases);
        let Some(p) = self.phases.get(&barrier) else {
            return;
        };
        let n = self.threads;
        if !p.completed.known.is_empty() {
            join(
                &mut self.known[thread * n..(thread + 1) * n],
                &p.completed.known,
            );
        }
        let released: Vec<(u32, u32)> = p
            .completed
            .observed
            .iter()
            .map(|(&id, &k)| (id, k))
            .collect();
        for (id, k) in released {
            self.observe(id, thread, k);
        }
    }
}

/// `into` becomes the element-wise maximum of itself and `other`.
fn join(into: &mut [u32], other: &[u32]) {
    for (a, &b) in into.iter_mut().zip(other) {
        *a = (*a).max(b);
    }
}

/// What last wrote a shared byte in the running block.
#[derive(Copy, Clone, Debug)]
enum LastWrite<'m> {
    /// Nothing yet: the byte holds the poison fill.
    Nothing,
    /// A `cp_async` whose group has not completed: no thread may touch the byte yet.
    Copy(Touch<'m>),
    /// A `tma_load`, through the async proxy: its bytes are visible to a thread once it has seen
    /// the guard's phase complete, to the async proxy without a fence.
    Tma { issued: Touch<'m>, guard: TmaGuard },
    /// A thread's store (an atomic, a landed `cp_async`), through the generic proxy, when the
    /// thread had executed `fences` `fence_proxy_async()`s: the async proxy sees it once the
    /// thread's next one is ordered before its read.
    Generic { who: Touch<'m>, fences: u32 },
}

/// A thread's `fence_proxy_async()`s: how many it executed before the last block barrier (which
/// orders them before every access after it), and the epoch of each since (for the mbarriers'
/// ordering, [`Clocks`]).
#[derive(Clone, Default)]
struct ProxyFences {
    before_barrier: u32,
    since_barrier: Vec<u32>,
}

impl ProxyFences {
    fn count(&self) -> u32 {
        self.before_barrier + self.since_barrier.len() as u32
    }
}

/// One block's shared memory, laid out as code generation does (declaration order, each array
/// at its alignment).
#[derive(Clone)]
struct Shared<'m> {
    arrays: Vec<SharedLayout>,
    bytes: Vec<u8>,
    logs: Vec<ByteLog<'m>>,
    /// Per byte: what last wrote it.
    last_writes: Vec<LastWrite<'m>>,
    /// Per thread: its `fence_proxy_async()`s.
    proxy_fences: Vec<ProxyFences>,
    /// Barrier intervals are numbered; a log from an older interval counts as empty.
    interval: u32,
}

/// Fill pattern for shared memory at block start: all-ones bytes are NaN in every float type.
const POISON: u8 = 0xff;

impl<'m> Shared<'m> {
    fn new(arrays: &[SharedArray]) -> Shared<'m> {
        let mut layout = Vec::with_capacity(arrays.len());
        let mut end = 0usize;
        for a in arrays {
            let base = end.next_multiple_of(a.align() as usize);
            end = base + a.bytes() as usize;
            layout.push(SharedLayout {
                name: a.name.clone(),
                base,
                bytes: a.bytes() as usize,
                elem_size: a.elem.size() as usize,
            });
        }
        Shared {
            arrays: layout,
            bytes: vec![POISON; end],
            logs: vec![ByteLog::default(); end],
            last_writes: vec![LastWrite::Nothing; end],
            proxy_fences: Vec::new(),
            interval: 0,
        }
    }

    fn reset(&mut self, threads: usize) {
        self.bytes.fill(POISON);
        self.last_writes.fill(LastWrite::Nothing);
        self.proxy_fences.clear();
        self.proxy_fences.resize_with(threads, ProxyFences::default);
        self.new_interval();
    }

    /// A block barrier: a new interval, which every fence before it is ordered before.
    fn new_interval(&mut self) {
        self.interval += 1;
        for fences in &mut self.proxy_fences {
            fences.before_barrier = fences.count();
            fences.since_barrier.clear();
        }
    }

    /// Fails if an asynchronous copy the accessing thread may not see yet writes `byte`.
    fn check_pending(
        &self,
        clocks: &Clocks,
        array: usize,
        byte: usize,
        who: Touch<'m>,
        kind: Access,
    ) -> Result<(), Fault<'m>> {
        let layout = &self.arrays[array];
        let (issued, tma) = match self.last_writes[layout.base + byte] {
            LastWrite::Copy(issued) => (issued, false),
            LastWrite::Tma { issued, guard } if !clocks.sees(guard, who.thread) => (issued, true),
            _ => return Ok(()),
        };
        Err(Fault::InFlight {
            array: layout.name.clone(),
            index: (byte / layout.elem_size) as u64,
            issued,
            kind,
            tma,
        })
    }

    /// Fails if the async proxy, reading `range` of `array` for `reader`'s `op`, would miss a
    /// store to it: one whose thread has no `fence_proxy_async()` after it that is ordered
    /// before the read.
    fn check_fenced(
        &self,
        clocks: &Clocks,
        array: usize,
        range: std::ops::Range<usize>,
        reader: u32,
        op: &'static str,
    ) -> Result<(), Fault<'m>> {
        let layout = &self.arrays[array];
        for byte in range {
            let LastWrite::Generic { who, fences } = self.last_writes[layout.base + byte] else {
                continue;
            };
            // If any of the writer's fences after the store is ordered before the read, so is
            // the first (program order): that one decides.
            let writer = &self.proxy_fences[who.thread as usize];
            let fenced = match fences.checked_sub(writer.before_barrier) {
                None => true,
                Some(since) => writer
                    .since_barrier
                    .get(since as usize)
                    .is_some_and(|&epoch| clocks.knows(reader, who.thread, epoch)),
            };
            if !fenced {
                return Err(Fault::Unfenced {
                    op,
                    array: layout.name.clone(),
                    index: (byte / layout.elem_size) as u64,
                    write: who,
                });
            }
        }
        Ok(())
    }

    /// Fails if another thread accessed `byte` in this barrier interval in a way that conflicts
    /// with `kind`, unless mbarriers order that access before this one; records the access
    /// when `record`.
    fn check_race(
        &mut self,
        clocks: &Clocks,
        array: usize,
        byte: usize,
        who: Touch<'m>,
        kind: Access,
        record: bool,
    ) -> Result<(), Fault<'m>> {
        let Shared {
            arrays,
            logs,
            interval,
            ..
        } = self;
        let layout = &arrays[array];
        let log = &mut logs[layout.base + byte];
        if log.interval != *interval {
            *log = ByteLog {
                interval: *interval,
                ..ByteLog::default()
            };
        }
        let conflict = Access::ALL.into_iter().find_map(|earlier_kind| {
            let earlier = log.seen[earlier_kind as usize].unordered(who.thread, clocks)?;
            kind.conflicts_with(earlier_kind)
                .then_some((earlier, earlier_kind))
        });
        if let Some((earlier, earlier_kind)) = conflict {
            return Err(Fault::Race {
                array: layout.name.clone(),
                index: (byte / layout.elem_size) as u64,
                earlier,
                earlier_kind,
                kind,
            });
        }
        if record {
            log.seen[kind as usize].add(who, clocks);
        }
        Ok(())
    }

    /// Record an access to `range` and report a conflict with another thread's unordered access
    /// in the same barrier interval.
    fn track(
        &mut self,
        clocks: &Clocks,
        array: usize,
        start: usize,
        len: usize,
        who: Touch<'m>,
        kind: Access,
    ) -> Result<(), Fault<'m>> {
        let base = self.arrays[array].base;
        let stored = (kind != Access::Read).then(|| LastWrite::Generic {
            who,
            fences: self.proxy_fences[who.thread as usize].count(),
        });
        for byte in start..start + len {
            self.check_pending(clocks, array, byte, who, kind)?;
            self.check_race(clocks, array, byte, who, kind, true)?;
            // A thread that may read a landed TMA byte may also overwrite it; after that the
            // byte is an ordinary one.
            if let Some(stored) = stored {
                self.last_writes[base + byte] = stored;
            }
        }
        Ok(())
    }
}

/// A global buffer bound to a kernel parameter.
struct Global<'a> {
    name: String,
    buf: &'a mut Buffer,
}

/// Everything a launch can address: the bound global buffers and the shared memory of the
/// running cluster's blocks. Threads are numbered across the cluster (block rank times threads
/// per block, plus the thread's index), so that the clocks order accesses through mbarriers of
/// any block of the cluster.
pub(crate) struct Memory<'m, 'a> {
    /// By kernel parameter index; None for scalar parameters.
    globals: Vec<Option<Global<'a>>>,
    /// By block rank in the cluster.
    blocks: Vec<Shared<'m>>,
    /// The rank of the block whose shared memory accesses address.
    running: usize,
    threads_per_block: usize,
    clocks: Clocks,
}

impl<'m, 'a> Memory<'m, 'a> {
    /// `globals` pairs each parameter's name with its buffer (None for scalars).
    pub fn new(
        globals: impl IntoIterator<Item = (String, Option<&'a mut Buffer>)>,
        shared: &[SharedArray],
    ) -> Memory<'m, 'a> {
        Memory {
            globals: globals
                .into_iter()
                .map(|(name, buf)| buf.map(|buf| Global { name, buf }))
                .collect(),
            blocks: vec![Shared::new(shared)],
            running: 0,
            threads_per_block: 0,
            clocks: Clocks::new(),
        }
    }

    /// Start a new cluster of `blocks` blocks of `threads` threads: poisoned shared memory, no
    /// accesses logged, block 0 running.
    pub fn start_cluster(&mut self, blocks: usize, threads: usize) {
        self.blocks.truncate(1);
        let first = self.blocks[0].clone();
        self.blocks.resize(blocks, first);
        for shared in &mut self.blocks {
            shared.reset(blocks * threads);
        }
        self.clocks.reset(blocks * threads);
        self.threads_per_block = threads;
        self.running = 0;
    }

    /// Accesses address the shared memory of the block of rank `rank` from now on.
    pub fn enter_block(&mut self, rank: usize) {
        self.running = rank;
    }

    fn shared(&self) -> &Shared<'m> {
        &self.blocks[self.running]
    }

    /// The running block's shared memory, and the clocks to check accesses with.
    fn shared_mut(&mut self) -> (&mut Shared<'m>, &Clocks) {
        (&mut self.blocks[self.running], &self.clocks)
    }

    /// A block barrier: accesses before it can no longer race with accesses after it, and an
    /// mbarrier phase one of the block's threads has waited for is seen by all of them (the
    /// barrier orders the wait before everything after it).
    pub fn barrier(&mut self) {
        self.blocks[self.running].new_interval();
        let block =
            self.running * self.threads_per_block..(self.running + 1) * self.threads_per_block;
        for seen in self.clocks.observed.values_mut() {
            let seen = &mut seen[block.clone()];
            let latest = seen.iter().copied().max().unwrap_or(0);
            seen.fill(latest);
        }
    }

    /// `cluster_sync()`: a barrier of every block of the cluster at once, which orders every
    /// thread's accesses and waits before every other's after it.
    pub fn cluster_barrier(&mut self) {
        for shared in &mut self.blocks {
            shared.new_interval();
        }
        for seen in self.clocks.observed.values_mut() {
            let latest = seen.iter().copied().max().unwrap_or(0);
            seen.fill(latest);
        }
    }

    /// Bounds-check an access of `size` bytes at `ptr`; the byte range within its region.
    fn locate(
        &self,
        ptr: Pointer,
        size: usize,
        kind: Access,
    ) -> Result<std::ops::Range<usize>, Fault<'m>> {
        let (name, bytes) = match ptr.region {
            Region::Global(i) => {
                let g = self.globals[i]
                    .as_ref()
                    .expect("global views point at buffers");
                (&g.name, g.buf.bytes.len())
            }
            Region::Shared(i) => {
                let a = &self.shared().arrays[i];
                (&a.name, a.bytes)
            }
        };
        let start = ptr.offset;
        if start < 0 || start as u64 + size as u64 > bytes as u64 {
            return Err(Fault::OutOfBounds {
                space: ptr.region.space(),
                buffer: name.clone(),
                index: start.div_euclid(size as i64),
                len: (bytes / size) as u64,
                kind,
            });
        }
        Ok(start as usize..start as usize + size)
    }

    fn bytes_mut(&mut self, region: Region, range: std::ops::Range<usize>) -> &mut [u8] {
        match region {
            Region::Global(i) => {
                let g = self.globals[i]
                    .as_mut()
                    .expect("global views point at buffers");
                &mut g.buf.bytes[range]
            }
            Region::Shared(i) => {
                let shared = &mut self.blocks[self.running];
                let base = shared.arrays[i].base;
                &mut shared.bytes[base + range.start..base + range.end]
            }
        }
    }

    fn access(
        &mut self,
        ptr: Pointer,
        size: usize,
        who: Touch<'m>,
        kind: Access,
    ) -> Result<&mut [u8], Fault<'m>> {
        let range = self.locate(ptr, size, kind)?;
        if let Region::Shared(array) = ptr.region {
            let (shared, clocks) = self.shared_mut();
            shared.track(clocks, array, range.start, range.len(), who, kind)?;
        }
        Ok(self.bytes_mut(ptr.region, range))
    }

    pub fn load(&mut self, ptr: Pointer, ty: &Type, who: Touch<'m>) -> Result<Value, Fault<'m>> {
        let bytes = self.access(ptr, ty.size() as usize, who, Access::Read)?;
        Ok(decode(ty, bytes))
    }

    pub fn store(
        &mut self,
        ptr: Pointer,
        value: Value,
        ty: &Type,
        who: Touch<'m>,
    ) -> Result<(), Fault<'m>> {
        let bytes = self.access(ptr, ty.size() as usize, who, Access::Write)?;
        encode(value, bytes);
        Ok(())
    }

    /// The raw bytes of an access (for ldmatrix and cp.async sources).
    pub fn read(&mut self, ptr: Pointer, len: usize, who: Touch<'m>) -> Result<Vec<u8>, Fault<'m>> {
        Ok(self.access(ptr, len, who, Access::Read)?.to_vec())
    }

    /// The shared bytes the async proxy reads for `who`'s `op` (a `tma_store`'s source, a
    /// `wgmma` operand): a read by that thread, which also fails on bytes a thread stored without
    /// fencing them for the async proxy.
    pub fn read_async_proxy(
        &mut self,
        ptr: Pointer,
        len: usize,
        who: Touch<'m>,
        op: &'static str,
    ) -> Result<Vec<u8>, Fault<'m>> {
        let range = self.locate(ptr, len, Access::Read)?;
        let Region::Shared(array) = ptr.region else {
            unreachable!("the async proxy reads shared memory")
        };
        let (shared, clocks) = self.shared_mut();
        shared.track(clocks, array, range.start, len, who, Access::Read)?;
        shared.check_fenced(clocks, array, range.clone(), who.thread, op)?;
        Ok(self.bytes_mut(ptr.region, range).to_vec())
    }

    /// `thread` (numbered in the cluster) executes `fence_proxy_async()`: its stores so far
    /// become visible to the async proxy's reads that the fence is ordered before.
    pub fn fence_proxy_async(&mut self, thread: usize) {
        let epoch = self.clocks.epoch(thread as u32);
        self.blocks[self.running].proxy_fences[thread]
            .since_barrier
            .push(epoch);
    }

    /// A write of raw bytes (a landing cp.async, a TMA store's row).
    pub fn write(&mut self, ptr: Pointer, data: &[u8], who: Touch<'m>) -> Result<(), Fault<'m>> {
        self.access(ptr, data.len(), who, Access::Write)?
            .copy_from_slice(data);
        Ok(())
    }

    /// The first of the bytes from `ptr` on that no longer holds its value in `before`;
    /// unlogged, as no thread reads them (a retired TMA store's source against what it read).
    pub fn first_change(
        &mut self,
        ptr: Pointer,
        before: &[u8],
    ) -> Result<Option<usize>, Fault<'m>> {
        let range = self.locate(ptr, before.len(), Access::Read)?;
        let now = self.bytes_mut(ptr.region, range);
        Ok(now.iter().zip(before).position(|(a, b)| a != b))
    }

    /// Start a `cp_async` of `len` bytes into shared memory at `dst`: it counts as a write now,
    /// and the bytes may not be touched until [`Memory::finish_copy`].
    pub fn start_copy(
        &mut self,
        dst: Pointer,
        len: usize,
        who: Touch<'m>,
    ) -> Result<(), Fault<'m>> {
        let range = self.locate(dst, len, Access::Write)?;
        let Region::Shared(array) = dst.region else {
            unreachable!("cp_async writes shared memory")
        };
        let (shared, clocks) = self.shared_mut();
        shared.track(clocks, array, range.start, len, who, Access::Write)?;
        let base = shared.arrays[array].base;
        shared.last_writes[base + range.start..base + range.end].fill(LastWrite::Copy(who));
        Ok(())
    }

    /// Start a `tma_load` of `len` bytes into shared memory at `dst`, which lands on the phase
    /// of `guard`. The async proxy writes the bytes, not the issuing thread: the access is
    /// checked against this interval's accesses by other threads that the issuing thread is not
    /// ordered after (a copy over bytes they still use) but not recorded, and the bytes stay
    /// guarded until a thread has seen the phase.
    pub fn start_tma(
        &mut self,
        dst: Pointer,
        len: usize,
        who: Touch<'m>,
        guard: TmaGuard,
    ) -> Result<(), Fault<'m>> {
        let range = self.locate(dst, len, Access::Write)?;
        let Region::Shared(array) = dst.region else {
            unreachable!("tma_load writes shared memory")
        };
        let (shared, clocks) = self.shared_mut();
        for byte in range.clone() {
            shared.check_pending(clocks, array, byte, who, Access::Write)?;
            shared.check_race(clocks, array, byte, who, Access::Write, false)?;
        }
        let base = shared.arrays[array].base;
        let landing = LastWrite::Tma { issued: who, guard };
        shared.last_writes[base + range.start..base + range.end].fill(landing);
        Ok(())
    }

    /// The bytes of a `tma_load` started by [`Memory::start_tma`] land (its phase completed);
    /// unlogged, as they are written by no thread.
    pub fn land_tma(&mut self, dst: Pointer, data: &[u8]) -> Result<(), Fault<'m>> {
        let range = self.locate(dst, data.len(), Access::Write)?;
        self.bytes_mut(dst.region, range).copy_from_slice(data);
        Ok(())
    }

    /// `thread` (numbered in the cluster) arrives on mbarrier `barrier` (an `mbarrier_arrive`,
    /// `mbarrier_expect_tx` or `mbarrier_arrive_cluster`): its accesses so far are ordered
    /// before those of the threads that wait for the phase.
    pub fn arrive(&mut self, barrier: u32, thread: usize) {
        self.clocks.arrive(barrier, thread);
    }

    /// An id for an mbarrier being initialized, unique in the cluster: the phases of a
    /// re-initialized barrier are not confused with the old ones.
    pub fn fresh_barrier_id(&mut self) -> u32 {
        self.clocks.barrier_ids += 1;
        self.clocks.barrier_ids
    }

    /// A phase of mbarrier `barrier` completed.
    pub fn complete_phase(&mut self, barrier: u32) {
        self.clocks.complete(barrier);
    }

    /// `thread`'s (numbered in the cluster) wait on mbarrier `barrier` returned, `phases` of its
    /// phases having completed: it sees their copies and what the arrivals released.
    pub fn observe(&mut self, barrier: u32, thread: usize, phases: u32) {
        self.clocks.acquire(barrier, thread, phases);
    }

    /// Complete a `cp_async` started by [`Memory::start_copy`]: its bytes land, as a write by
    /// the issuing thread in the current barrier interval (through the generic proxy).
    pub fn finish_copy(
        &mut self,
        dst: Pointer,
        data: &[u8],
        who: Touch<'m>,
    ) -> Result<(), Fault<'m>> {
        let range = self.locate(dst, data.len(), Access::Write)?;
        // No longer in flight: the write below records the landing.
        if let Region::Shared(array) = dst.region {
            let shared = &mut self.blocks[self.running];
            let base = shared.arrays[array].base;
            shared.last_writes[base + range.start..base + range.end].fill(LastWrite::Nothing);
        }
        self.write(dst, data, who)
    }

    /// An atomic read-modify-write; `f` gives the new value from the old one.
    pub fn update<E>(
        &mut self,
        ptr: Pointer,
        ty: &Type,
        who: Touch<'m>,
        f: impl FnOnce(Value) -> Result<Value, E>,
    ) -> Result<Result<Value, E>, Fault<'m>> {
        let bytes = self.access(ptr, ty.size() as usize, who, Access::Atomic)?;
        let old = decode(ty, bytes);
        Ok(f(old).map(|new| {
            encode(new, bytes);
            old
        }))
    }
}
