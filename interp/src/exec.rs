//! The lock-step SIMT machine: one block at a time, every thread of the block walking the IR
//! tree together under an active mask. Divergent `if`s run both sides with complementary masks;
//! loops keep iterating while any thread is still in them; `break`, `continue` and `return`
//! take threads out of the mask until the construct they leave is done. An `if` that splits warps
//! and waits on an mbarrier on either side instead runs its sides as roles (`roles`): machines of
//! their own over the shared state of the block and its cluster ([`ClusterState`]), merged back
//! when both are done.

use std::collections::HashSet;
use std::sync::Arc;

use zinc_dsl::diag::{SourceMap, Span};
use zinc_dsl::ir::{
    flat_index, BinOp, Block, Expr, ExprKind, FuncId, Function, Module, Stmt, StmtKind, Type, VarId,
};

use crate::cluster::ClusterSync;
use crate::copy::Copies;
use crate::error::{ErrorKind, InterpError, Location, ThreadId};
use crate::memory::{Access, Memory, Site};
use crate::roles::{role_run, splits_warps, stmt_address, waiting_ifs, Finished, Seat};
use crate::tma::{BulkStores, EncodedMap, Mbarriers};
use crate::value::Value;

pub(crate) type Result<T> = std::result::Result<T, InterpError>;

/// One value per thread of the block; inactive threads hold [`UNSET`].
pub(crate) type Lanes = Vec<Value>;

/// Placeholder for threads an expression was not evaluated for; never read.
pub(crate) const UNSET: Value = Value::Bool(false);

/// Device functions cannot recurse (the front end rejects it); this only guards hand-built IR.
const MAX_CALL_DEPTH: usize = 64;

/// Which threads of the block take part in the current statement.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Mask(Vec<bool>);

impl Mask {
    pub fn full(n: usize) -> Mask {
        Mask(vec![true; n])
    }

    pub fn empty(n: usize) -> Mask {
        Mask(vec![false; n])
    }

    pub fn get(&self, thread: usize) -> bool {
        self.0[thread]
    }

    pub fn any(&self) -> bool {
        self.0.contains(&true)
    }

    pub fn count(&self) -> usize {
        self.0.iter().filter(|&&on| on).count()
    }

    /// The active threads, in order.
    pub fn lanes(&self) -> impl Iterator<Item = usize> + '_ {
        self.0
            .iter()
            .enumerate()
            .filter(|(_, &on)| on)
            .map(|(t, _)| t)
    }

    pub fn union_with(&mut self, other: &Mask) {
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a |= b;
        }
    }

    fn clear(&mut self) {
        self.0.fill(false);
    }

    /// These threads but `other`'s.
    pub fn without(&self, other: &Mask) -> Mask {
        Mask(
            self.0
                .iter()
                .zip(&other.0)
                .map(|(&a, &b)| a && !b)
                .collect(),
        )
    }

    /// The active threads where `cond` is true, and those where it is false.
    pub fn split(&self, cond: &Lanes) -> (Mask, Mask) {
        let mut yes = Mask::empty(self.0.len());
        let mut no = Mask::empty(self.0.len());
        for t in self.lanes() {
            if cond[t] == Value::Bool(true) {
                yes.0[t] = true;
            } else {
                no.0[t] = true;
            }
        }
        (yes, no)
    }
}

/// Threads that left the innermost loop by `break` or `continue`, waiting for the others.
#[derive(Clone)]
struct LoopExits {
    broken: Mask,
    continued: Mask,
}

/// Register-array elements a wgmma in flight uses: its accumulators (which only later wgmmas may
/// touch) and its A fragment, each as (frame depth, array, flat element range). The interpreter
/// runs a wgmma at once, so without this a kernel that reads its accumulators or rewrites its A
/// registers before the `wgmma_wait` would pass here and compute garbage on the GPU.
#[derive(Clone, Default)]
pub(crate) struct WgmmaInFlight {
    /// Not yet committed.
    open: Vec<WgmmaUse>,
    /// Committed groups, oldest first.
    groups: std::collections::VecDeque<Vec<WgmmaUse>>,
}

#[derive(Clone, Copy)]
pub(crate) struct WgmmaUse {
    pub depth: usize,
    pub var: VarId,
    pub elements: (u32, u32),
    pub accumulator: bool,
}

impl WgmmaInFlight {
    pub fn issue(&mut self, uses: impl IntoIterator<Item = WgmmaUse>) {
        self.open.extend(uses);
    }

    pub fn commit(&mut self) {
        let open = std::mem::take(&mut self.open);
        self.groups.push_back(open);
    }

    /// `wgmma_wait(n)`: all but the newest `n` committed groups are done.
    pub fn wait(&mut self, n: usize) {
        while self.groups.len() > n {
            self.groups.pop_front();
        }
    }

    /// Add the uses in flight of a role that ran beside this one; committed groups line up
    /// from the newest, as `wgmma_wait(n)` counts them.
    fn merge(&mut self, other: WgmmaInFlight) {
        self.open.extend(other.open);
        while self.groups.len() < other.groups.len() {
            self.groups.push_front(Vec::new());
        }
        let skip = self.groups.len() - other.groups.len();
        for (mine, theirs) in self.groups.iter_mut().skip(skip).zip(other.groups) {
            mine.extend(theirs);
        }
    }

    /// The in-flight use of element `flat` of `var` in the frame at `depth`, if any.
    fn using(&self, depth: usize, var: VarId, flat: u32) -> Option<WgmmaUse> {
        self.open
            .iter()
            .chain(self.groups.iter().flatten())
            .find(|u| {
                u.depth == depth && u.var == var && (u.elements.0..u.elements.1).contains(&flat)
            })
            .copied()
    }
}

/// A function activation, shared by all threads of the block (of the role).
#[derive(Clone)]
struct Frame<'m> {
    func: &'m Function,
    /// By `VarId`: one value per thread; empty until first defined.
    vars: Vec<Lanes>,
    loops: Vec<LoopExits>,
    ret: Lanes,
}

enum LoopKind<'m> {
    While(&'m Expr),
    /// A `for` loop; `end` and `step` were evaluated once, before the first iteration.
    For {
        var: VarId,
        end: Lanes,
        step: Lanes,
    },
}

/// The machine running one launch, a block (or a cluster's blocks together) at a time.
pub(crate) struct Machine<'m, 'a> {
    pub module: &'m Module,
    pub sources: Option<&'m SourceMap>,
    pub grid: [u32; 3],
    pub dim: [u32; 3],
    /// Blocks per cluster (x, y, z).
    pub cluster: [u32; 3],
    /// The running block's index.
    pub block: [u32; 3],
    /// The running block's rank in its cluster.
    pub rank: usize,
    /// Threads per block.
    pub threads: usize,
    pub mem: Memory<'m, 'a>,
    /// Threads that returned from the kernel; barriers and warp operations do not wait for them.
    pub exited: Mask,
    /// Each thread's `cp_async` copies in flight.
    pub copies: Vec<Copies<'m>>,
    /// Each thread's `tma_store`s whose sources the TMA may still read.
    pub tma_stores: Vec<BulkStores<'m>>,
    /// The block's wgmmas in flight: their register-array operands.
    pub wgmma: WgmmaInFlight,
    /// The block's mbarriers and the `tma_load`s waiting on them.
    pub mbarriers: Mbarriers,
    /// The kernel's tensor maps, encoded for this launch.
    pub tensor_maps: Vec<EncodedMap>,
    frames: Vec<Frame<'m>>,
    pub steps: u64,
    step_limit: u64,
    /// The `if`s that run as roles when they split warps (`roles::waiting_ifs`).
    waiting_ifs: Arc<HashSet<usize>>,
    /// The role this machine runs; None for the lock-step machine of a block that runs alone.
    /// The blocks of a cluster run as roles of one schedule.
    pub role: Option<Seat<'m, 'a>>,
    /// By rank, the parts of the cluster's other blocks; this block's slot is empty while its
    /// parts are in the fields above.
    pub peers: Vec<BlockParts<'m>>,
    /// Where the cluster's blocks stand at `cluster_sync()`.
    pub cluster_sync: ClusterSync,
}

/// What all threads of a block share besides shared memory (which [`Memory`] holds for every
/// block of the cluster).
#[derive(Default)]
pub(crate) struct BlockParts<'m> {
    exited: Mask,
    copies: Vec<Copies<'m>>,
    tma_stores: Vec<BulkStores<'m>>,
    pub mbarriers: Mbarriers,
}

impl BlockParts<'_> {
    /// A block of `threads` threads starting: none exited, nothing in flight.
    fn new(threads: usize) -> Self {
        BlockParts {
            exited: Mask::empty(threads),
            copies: (0..threads).map(|_| Copies::default()).collect(),
            tma_stores: (0..threads).map(|_| BulkStores::default()).collect(),
            mbarriers: Mbarriers::default(),
        }
    }
}

/// What all threads of a cluster share, whichever role of whichever block runs: it moves into
/// the machine of the role that runs.
pub(crate) struct ClusterState<'m, 'a> {
    mem: Memory<'m, 'a>,
    /// By rank.
    pub blocks: Vec<BlockParts<'m>>,
    pub cluster_sync: ClusterSync,
    tensor_maps: Vec<EncodedMap>,
    steps: u64,
}

impl<'m, 'a> Machine<'m, 'a> {
    pub fn new(
        module: &'m Module,
        sources: Option<&'m SourceMap>,
        step_limit: u64,
        [grid, dim, cluster]: [[u32; 3]; 3],
        mem: Memory<'m, 'a>,
    ) -> Machine<'m, 'a> {
        let threads = dim.iter().map(|&d| d as usize).product();
        Machine {
            module,
            sources,
            grid,
            dim,
            cluster,
            block: [0; 3],
            rank: 0,
            threads,
            mem,
            exited: Mask::empty(threads),
            copies: Vec::new(),
            tma_stores: Vec::new(),
            wgmma: WgmmaInFlight::default(),
            mbarriers: Mbarriers::default(),
            tensor_maps: Vec::new(),
            frames: Vec::new(),
            steps: 0,
            step_limit,
            waiting_ifs: Arc::new(waiting_ifs(module)),
            role: None,
            peers: Vec::new(),
            cluster_sync: ClusterSync::default(),
        }
    }

    /// A machine for a role that runs some of this machine's threads from where it stands: the
    /// same frames and wgmmas in flight, and no cluster state until it runs.
    pub(crate) fn role_machine(&self, seat: Seat<'m, 'a>) -> Machine<'m, 'a> {
        Machine {
            module: self.module,
            sources: self.sources,
            grid: self.grid,
            dim: self.dim,
            cluster: self.cluster,
            block: self.block,
            rank: self.rank,
            threads: self.threads,
            mem: Memory::new([], &[]),
            exited: Mask::empty(0),
            copies: Vec::new(),
            tma_stores: Vec::new(),
            wgmma: self.wgmma.clone(),
            mbarriers: Mbarriers::default(),
            tensor_maps: Vec::new(),
            frames: self.frames.clone(),
            steps: 0,
            step_limit: self.step_limit,
            waiting_ifs: self.waiting_ifs.clone(),
            role: Some(seat),
            peers: Vec::new(),
            cluster_sync: ClusterSync::default(),
        }
    }

    /// Move the cluster's shared state out (to the role that runs next).
    pub(crate) fn take_cluster_state(&mut self) -> ClusterState<'m, 'a> {
        let mut blocks = std::mem::take(&mut self.peers);
        // None when the machine holds no state (a role stopped because its cluster failed).
        if let Some(slot) = blocks.get_mut(self.rank) {
            *slot = BlockParts {
                exited: std::mem::take(&mut self.exited),
                copies: std::mem::take(&mut self.copies),
                tma_stores: std::mem::take(&mut self.tma_stores),
                mbarriers: std::mem::take(&mut self.mbarriers),
            };
        }
        ClusterState {
            mem: std::mem::replace(&mut self.mem, Memory::new([], &[])),
            blocks,
            cluster_sync: std::mem::take(&mut self.cluster_sync),
            tensor_maps: std::mem::take(&mut self.tensor_maps),
            steps: self.steps,
        }
    }

    /// Move the running block's parts from its slot in `peers` into the machine.
    fn take_own_parts(&mut self) {
        let own = std::mem::take(&mut self.peers[self.rank]);
        self.exited = own.exited;
        self.copies = own.copies;
        self.tma_stores = own.tma_stores;
        self.mbarriers = own.mbarriers;
    }

    /// Take the cluster's shared state in, as a machine of the block of rank `self.rank`.
    pub(crate) fn put_cluster_state(&mut self, state: ClusterState<'m, 'a>) {
        self.mem = state.mem;
        self.mem.enter_block(self.rank);
        self.peers = state.blocks;
        self.take_own_parts();
        self.cluster_sync = state.cluster_sync;
        self.tensor_maps = state.tensor_maps;
        self.steps = state.steps;
    }

    /// After the roles of an `if`: each role's values for its own threads (variables, loop
    /// exits, return values) and its wgmmas in flight; the threads that fell through.
    pub(crate) fn merge_roles(&mut self, roles: Vec<Finished<'m, 'a>>) -> Mask {
        let n = self.threads;
        let mut fell_through = Mask::empty(n);
        let mut wgmma: Option<WgmmaInFlight> = None;
        for role in roles {
            let Finished {
                machine,
                threads,
                fell_through: theirs,
            } = role;
            fell_through.union_with(&theirs);
            for (mine, frame) in self.frames.iter_mut().zip(machine.frames) {
                for (slot, role_slot) in mine.vars.iter_mut().zip(frame.vars) {
                    if role_slot.is_empty() {
                        continue;
                    }
                    // A variable first defined inside the role.
                    if slot.len() != role_slot.len() {
                        *slot = vec![UNSET; role_slot.len()];
                    }
                    for (i, v) in role_slot.into_iter().enumerate() {
                        if threads.get(i % n) {
                            slot[i] = v;
                        }
                    }
                }
                for (exits, role_exits) in mine.loops.iter_mut().zip(frame.loops) {
                    exits.broken.union_with(&role_exits.broken);
                    exits.continued.union_with(&role_exits.continued);
                }
                for t in threads.lanes() {
                    mine.ret[t] = frame.ret[t];
                }
            }
            match &mut wgmma {
                Some(merged) => merged.merge(machine.wgmma),
                None => wgmma = Some(machine.wgmma),
            }
        }
        if let Some(merged) = wgmma {
            self.wgmma = merged;
        }
        fell_through
    }

    /// Run the kernel for the cluster whose first block is `first`: alone if it is one block,
    /// else its blocks together (`roles`); `params` holds one value per parameter, the same for
    /// every thread.
    pub fn run_cluster(
        &mut self,
        kernel: &'m Function,
        first: [u32; 3],
        params: &[Value],
    ) -> Result<()> {
        let blocks = self.cluster.iter().map(|&d| d as usize).product();
        self.mem.start_cluster(blocks, self.threads);
        self.peers = (0..blocks).map(|_| BlockParts::new(self.threads)).collect();
        self.cluster_sync = ClusterSync::new(blocks);
        self.rank = 0;
        self.block = first;
        self.take_own_parts();
        if blocks > 1 {
            return self.run_blocks_together(kernel, first, params);
        }
        self.run_block(kernel, params)
    }

    /// The index of the block of rank `rank` in the cluster whose first block is `first`.
    pub fn block_of_rank(&self, first: [u32; 3], rank: usize) -> [u32; 3] {
        let [cx, cy, _] = self.cluster;
        let rank = rank as u32;
        let offset = [rank % cx, rank / cx % cy, rank / (cx * cy)];
        [0, 1, 2].map(|a| first[a] + offset[a])
    }

    /// Run the kernel for the block `self.block` of rank `self.rank`, its state in place.
    pub(crate) fn run_block(&mut self, kernel: &'m Function, params: &[Value]) -> Result<()> {
        self.wgmma = WgmmaInFlight::default();
        let mut frame = Frame::new(kernel, self.threads);
        for (p, v) in kernel.params.iter().zip(params) {
            frame.vars[p.0 as usize] = vec![*v; self.threads];
        }
        self.frames = vec![frame];
        let mut active = Mask::full(self.threads);
        self.exec_block(&kernel.body, &mut active)?;
        // The threads that ran to the end exit at the kernel's closing brace.
        let end = Span {
            start: kernel.span.end.saturating_sub(1),
            ..kernel.span
        };
        self.check_stores_retired(&active, end)
    }

    /// Evaluate an expression over the kernel's parameters alone (the launch grid), with one
    /// thread.
    pub fn eval_host(
        &mut self,
        kernel: &'m Function,
        params: &[Value],
        e: &'m Expr,
    ) -> Result<Value> {
        let mut frame = Frame::new(kernel, self.threads);
        for (p, v) in kernel.params.iter().zip(params) {
            frame.vars[p.0 as usize] = vec![*v; self.threads];
        }
        self.frames = vec![frame];
        Ok(self.eval(e, &Mask::full(self.threads))?[0])
    }

    fn frame(&mut self) -> &mut Frame<'m> {
        self.frames.last_mut().expect("a function is running")
    }

    /// The kernel of the running block (its shared arrays).
    pub fn kernel_fn(&self) -> &'m Function {
        self.frames.first().expect("a kernel is running").func
    }

    /// The running function.
    pub fn frame_fn(&self) -> &'m Function {
        self.frames.last().expect("a function is running").func
    }

    pub fn var(&self, v: VarId) -> &Lanes {
        &self.frames.last().expect("a function is running").vars[v.0 as usize]
    }

    /// Fails if element `flat` of register array `v` of the running function is in use by a
    /// wgmma in flight: any access to its accumulators, or a write to its A fragment.
    pub fn check_wgmma_use(&self, v: VarId, flat: u32, access: Access, span: Span) -> Result<()> {
        let depth = self.frames.len();
        match self.wgmma.using(depth, v, flat) {
            Some(u) if u.accumulator || access == Access::Write => Err(self.error_at(
                span,
                ErrorKind::WgmmaInFlight {
                    var: self.frame_fn().vars[v.0 as usize].name.clone(),
                    index: flat,
                    access,
                    role: if u.accumulator {
                        "accumulator"
                    } else {
                        "A operand"
                    },
                },
            )),
            _ => Ok(()),
        }
    }

    /// The frame depth of the running function (for [`WgmmaUse`]).
    pub fn depth(&self) -> usize {
        self.frames.len()
    }

    /// Element `flat` of register array `v` for every thread; None before its definition.
    /// An array's slot holds its elements one after another, each with a value per thread.
    pub fn element(&self, v: VarId, flat: u32) -> Option<Lanes> {
        let n = self.threads;
        let start = flat as usize * n;
        self.var(v).get(start..start + n).map(<[Value]>::to_vec)
    }

    /// Set element `flat` (None: every element) of register array `v` of `len` elements.
    pub(crate) fn set_element(
        &mut self,
        v: VarId,
        len: u32,
        flat: Option<u32>,
        values: &Lanes,
        mask: &Mask,
    ) {
        let n = self.threads;
        let slot = &mut self.frame().vars[v.0 as usize];
        if slot.is_empty() {
            *slot = vec![UNSET; len as usize * n];
        }
        let elements = match flat {
            Some(i) => i..i + 1,
            None => 0..len,
        };
        for e in elements {
            for t in mask.lanes() {
                slot[e as usize * n + t] = values[t];
            }
        }
    }

    fn set_var(&mut self, v: VarId, values: &Lanes, mask: &Mask) {
        let n = self.threads;
        let slot = &mut self.frame().vars[v.0 as usize];
        if slot.is_empty() {
            *slot = vec![UNSET; n];
        }
        for t in mask.lanes() {
            slot[t] = values[t];
        }
    }

    pub fn site(&self, span: Span) -> Site<'m> {
        let file = self
            .frames
            .last()
            .map_or("<kernel>", |f| f.func.file.as_str());
        Site { span, file }
    }

    pub fn loc(&self, span: Span) -> Location {
        Location::new(self.site(span), self.sources)
    }

    /// The (x, y, z) index of a thread from its linear index.
    pub fn thread_xyz(&self, t: usize) -> [u32; 3] {
        let t = t as u32;
        let [dx, dy, _] = self.dim;
        [t % dx, t / dx % dy, t / (dx * dy)]
    }

    pub fn thread_id(&self, t: usize) -> ThreadId {
        ThreadId {
            block: self.block,
            thread: self.thread_xyz(t),
        }
    }

    /// Thread `t` of the running block, numbered in the cluster (as memory's clocks know it).
    pub fn cluster_thread(&self, t: usize) -> usize {
        self.rank * self.threads + t
    }

    /// The thread numbered `thread` in the running cluster.
    pub fn cluster_thread_id(&self, thread: u32) -> ThreadId {
        let (rank, t) = (
            thread as usize / self.threads,
            thread as usize % self.threads,
        );
        ThreadId {
            block: self.block_of_rank(self.cluster_first(), rank),
            thread: self.thread_xyz(t),
        }
    }

    /// An error located at `span` in the running function.
    pub fn error_at(&self, span: Span, kind: ErrorKind) -> InterpError {
        InterpError::new(kind, Some(self.loc(span)))
    }

    pub fn malformed(&self, span: Span, what: impl Into<String>) -> InterpError {
        self.error_at(span, ErrorKind::Malformed { what: what.into() })
    }

    /// Thread-steps taken so far.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Charge `count` thread-steps against the budget.
    fn step(&mut self, count: usize, span: Span) -> Result<()> {
        self.steps += count as u64;
        if self.steps > self.step_limit {
            return Err(self.error_at(
                span,
                ErrorKind::StepLimit {
                    limit: self.step_limit,
                },
            ));
        }
        Ok(())
    }

    /// Run statements; on return `active` holds the threads that fell through the end.
    pub(crate) fn exec_block(&mut self, stmts: &'m Block, active: &mut Mask) -> Result<()> {
        let mut at = 0;
        while at < stmts.len() && active.any() {
            if let Some(end) = role_run(stmts, at, &self.waiting_ifs) {
                if self.exec_role_run(&stmts[at..end], active)? {
                    at = end;
                    continue;
                }
            }
            self.exec_stmt(&stmts[at], active)?;
            at += 1;
        }
        Ok(())
    }

    /// Runs the `if`s of a [`role_run`] as roles side by side where their threads are disjoint
    /// and none shares a warp with another active thread; false, with nothing run, otherwise
    /// (they then run in order).
    fn exec_role_run(&mut self, ifs: &'m [Stmt], active: &mut Mask) -> Result<bool> {
        let mut sides = Vec::new();
        let mut taken = Mask::empty(self.threads);
        for stmt in ifs {
            let StmtKind::If {
                cond, then_body, ..
            } = &stmt.kind
            else {
                return Err(self.malformed(stmt.span, "a role run of something else than `if`s"));
            };
            let (then_mask, _) = active.split(&self.eval(cond, active)?);
            if then_mask.lanes().any(|t| taken.get(t)) {
                return Ok(false);
            }
            taken.union_with(&then_mask);
            if then_mask.any() {
                sides.push((then_body, then_mask));
            }
        }
        let others = |mask: &Mask| active.without(mask);
        if sides.len() < 2
            || !sides
                .iter()
                .all(|(_, mask)| splits_warps(mask, &others(mask), self.threads))
        {
            return Ok(false);
        }
        for stmt in ifs {
            self.step(active.count(), stmt.span)?;
        }
        let rest = active.without(&taken);
        let mut fell_through = self.run_roles(sides)?;
        fell_through.union_with(&rest);
        *active = fell_through;
        Ok(true)
    }

    fn exec_stmt(&mut self, stmt: &'m Stmt, active: &mut Mask) -> Result<()> {
        self.step(active.count(), stmt.span)?;
        match &stmt.kind {
            StmtKind::Let { var, init: value } | StmtKind::Assign { var, value } => {
                match &value.ty {
                    // The checker only lets a literal fill a whole array.
                    Type::Array { elem, dims } => {
                        let ExprKind::Const(c) = &value.kind else {
                            return Err(
                                self.malformed(stmt.span, "an array value that is not a fill")
                            );
                        };
                        let Some(v) = Value::from_const_typed(elem, c) else {
                            return Err(self.malformed(stmt.span, "an array fill of this type"));
                        };
                        let v = vec![v; self.threads];
                        self.set_element(*var, dims.iter().product(), None, &v, active);
                    }
                    _ => {
                        let v = self.eval(value, active)?;
                        self.set_var(*var, &v, active);
                    }
                }
            }
            StmtKind::SetElement { var, index, value } => {
                let Type::Array { dims, .. } = &self.frame_fn().vars[var.0 as usize].ty else {
                    return Err(self.malformed(stmt.span, "an element of a non-array"));
                };
                let (len, flat) = (dims.iter().product(), flat_index(dims, index));
                let v = self.eval(value, active)?;
                self.check_wgmma_use(*var, flat, Access::Write, stmt.span)?;
                self.set_element(*var, len, Some(flat), &v, active);
            }
            StmtKind::Store { ptr, value } => {
                let ptrs = self.eval(ptr, active)?;
                let values = self.eval(value, active)?;
                for t in active.lanes() {
                    let p = self.pointer(ptrs[t], ptr.span)?;
                    self.check_aligned(p, &value.ty, "a store", t, stmt.span)?;
                    let who = self.touch(t, stmt.span);
                    self.mem
                        .store(p, values[t], &value.ty, who)
                        .map_err(|f| self.fault(f, t, stmt.span))?;
                }
            }
            StmtKind::If {
                cond,
                then_body,
                else_body,
            } => {
                let c = self.eval(cond, active)?;
                let (mut then_mask, mut else_mask) = active.split(&c);
                if then_mask.any()
                    && else_mask.any()
                    && self.waiting_ifs.contains(&stmt_address(stmt))
                    && splits_warps(&then_mask, &else_mask, self.threads)
                {
                    *active =
                        self.run_roles(vec![(then_body, then_mask), (else_body, else_mask)])?;
                    return Ok(());
                }
                self.exec_block(then_body, &mut then_mask)?;
                self.exec_block(else_body, &mut else_mask)?;
                then_mask.union_with(&else_mask);
                *active = then_mask;
            }
            StmtKind::For {
                var,
                start,
                end,
                step,
                body,
            } => {
                let first = self.eval(start, active)?;
                let end = self.eval(end, active)?;
                let step = self.eval(step, active)?;
                self.set_var(*var, &first, active);
                let kind = LoopKind::For {
                    var: *var,
                    end,
                    step,
                };
                self.exec_loop(&kind, body, stmt.span, active)?;
            }
            StmtKind::While { cond, body } => {
                self.exec_loop(&LoopKind::While(cond), body, stmt.span, active)?;
            }
            StmtKind::Break | StmtKind::Continue => {
                let is_break = matches!(stmt.kind, StmtKind::Break);
                let Some(exits) = self.frame().loops.last_mut() else {
                    return Err(self.malformed(stmt.span, "break or continue outside a loop"));
                };
                let set = if is_break {
                    &mut exits.broken
                } else {
                    &mut exits.continued
                };
                set.union_with(active);
                active.clear();
            }
            StmtKind::Return(value) => {
                if let Some(value) = value {
                    let v = self.eval(value, active)?;
                    let ret = &mut self.frame().ret;
                    for t in active.lanes() {
                        ret[t] = v[t];
                    }
                }
                // Returning from the kernel ends the thread; from a device function, the thread
                // waits at the call for the others.
                if self.frames.len() == 1 {
                    self.check_stores_retired(active, stmt.span)?;
                    self.exited.union_with(active);
                }
                active.clear();
            }
            StmtKind::Expr(e) => {
                self.eval(e, active)?;
            }
            StmtKind::Barrier => self.barrier(active, stmt.span)?,
            // The interpreter runs one thread at a time between steps: memory is always
            // coherent, so fences have nothing to do.
            StmtKind::Fence(_) => {}
        }
        Ok(())
    }

    fn exec_loop(
        &mut self,
        kind: &LoopKind<'m>,
        body: &'m Block,
        span: Span,
        active: &mut Mask,
    ) -> Result<()> {
        let mut running = active.clone();
        let mut done = Mask::empty(self.threads);
        while running.any() {
            // Charged per iteration too, so that an empty endless loop still runs out.
            self.step(running.count(), span)?;
            let go = match kind {
                LoopKind::While(cond) => self.eval(cond, &running)?,
                LoopKind::For { var, end, .. } => {
                    let current = self.var(*var);
                    let mut go = vec![UNSET; self.threads];
                    for t in running.lanes() {
                        go[t] = Value::binary(BinOp::Lt, current[t], end[t]).map_err(|_| {
                            self.malformed(span, "for-loop bounds of different types")
                        })?;
                    }
                    go
                }
            };
            let (mut inside, left) = running.split(&go);
            done.union_with(&left);
            if !inside.any() {
                break;
            }
            let exits = LoopExits {
                broken: Mask::empty(self.threads),
                continued: Mask::empty(self.threads),
            };
            self.frame().loops.push(exits);
            let result = self.exec_block(body, &mut inside);
            let exits = self.frame().loops.pop().expect("pushed above");
            result?;
            done.union_with(&exits.broken);
            inside.union_with(&exits.continued);
            if let LoopKind::For { var, step, .. } = kind {
                let mut next = self.var(*var).clone();
                for t in inside.lanes() {
                    next[t] = Value::binary(BinOp::Add, next[t], step[t])
                        .map_err(|_| self.malformed(span, "for-loop step of a different type"))?;
                }
                self.set_var(*var, &next, &inside);
            }
            running = inside;
        }
        *active = done;
        Ok(())
    }

    /// `bar.sync`: every thread that has not exited must be here.
    pub fn barrier(&mut self, active: &Mask, span: Span) -> Result<()> {
        self.check_all_arrived(active, span)?;
        self.mem.barrier();
        Ok(())
    }

    /// A block-wide barrier's check: every thread of the block that has not exited is active.
    pub fn check_all_arrived(&self, active: &Mask, span: Span) -> Result<()> {
        let live = (0..self.threads).filter(|&t| !self.exited.get(t));
        let missing = live.clone().find(|&t| !active.get(t));
        if let Some(t) = missing {
            return Err(self.error_at(
                span,
                ErrorKind::DivergentBarrier {
                    block: self.block,
                    arrived: active.count(),
                    expected: live.count(),
                    missing: self.thread_xyz(t),
                },
            ));
        }
        Ok(())
    }

    /// Full-warp operations need every live thread of each warp taking part to be active.
    pub fn check_converged(&self, active: &Mask, op: &'static str, span: Span) -> Result<()> {
        for start in (0..self.threads).step_by(32) {
            let warp = start..(start + 32).min(self.threads);
            if !warp.clone().any(|t| active.get(t)) {
                continue;
            }
            if let Some(t) = warp
                .clone()
                .find(|&t| !active.get(t) && !self.exited.get(t))
            {
                return Err(self.error_at(
                    span,
                    ErrorKind::DivergentWarp {
                        op,
                        block: self.block,
                        warp: (start / 32) as u32,
                        missing_lane: (t - start) as u32,
                    },
                ));
            }
        }
        Ok(())
    }

    /// Call a device function with the active threads.
    pub fn call(
        &mut self,
        f: FuncId,
        args: &'m [Expr],
        active: &Mask,
        span: Span,
    ) -> Result<Lanes> {
        let values = args
            .iter()
            .map(|a| self.eval(a, active))
            .collect::<Result<Vec<_>>>()?;
        if self.frames.len() >= MAX_CALL_DEPTH {
            return Err(self.error_at(
                span,
                ErrorKind::CallDepth {
                    limit: MAX_CALL_DEPTH,
                },
            ));
        }
        let module = self.module;
        let Some(func) = module.functions.get(f.0 as usize) else {
            return Err(self.malformed(
                span,
                format!("call of function #{}, which does not exist", f.0),
            ));
        };
        let mut frame = Frame::new(func, self.threads);
        for (p, v) in func.params.iter().zip(values) {
            frame.vars[p.0 as usize] = v;
        }
        self.frames.push(frame);
        let result = self.exec_block(&func.body, &mut active.clone());
        let frame = self.frames.pop().expect("pushed above");
        result.map(|()| frame.ret)
    }
}

impl<'m> Frame<'m> {
    fn new(func: &'m Function, threads: usize) -> Frame<'m> {
        Frame {
            func,
            vars: vec![Vec::new(); func.vars.len()],
            loops: Vec::new(),
            ret: vec![UNSET; threads],
        }
    }
}
