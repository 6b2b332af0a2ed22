//! Warp-specialized roles: an `if` that splits the active threads along warp boundaries, with an
//! `mbarrier_wait` on either side, runs its sides as independent roles, as the warps of a
//! producer/consumer kernel run on the GPU. In lock step the first side would wait forever for
//! the second.
//!
//! Each role is a machine of its own (frames, loop exits, wgmmas in flight) on an OS thread of
//! its own, so that a role can stop in the middle of the recursive executor. One role runs at a
//! time: it holds the baton, and with it the cluster's shared state ([`ClusterState`]: memory,
//! mbarriers, exited threads, the step count), which moves between machines. A role gives the
//! baton up only when it waits for an mbarrier phase that has not completed (or, as a block of
//! a cluster, for the others at `cluster_sync()`) or when it is done;
//! the next role to run is the next runnable one in a fixed order (then-sides before
//! else-sides, nested roles in place of their parent), so every run interleaves the same way.
//! When every role waits, the first one reports the deadlock. After both sides are done, the
//! `if`'s threads go on together: each role's values for its own threads merge back into the
//! parent. Consecutive such `if`s without `else` (`if a { A } if b { B }`, e.g. the copies of
//! an `unroll` over roles) run their bodies as roles side by side in the same way: on the GPU
//! the warps that skip the first go on to the second while it runs.

use std::collections::HashSet;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use zinc_dsl::ir::{Block, Builtin, Expr, ExprKind, Module, Stmt, StmtKind, VarId};

use crate::error::{ErrorKind, InterpError};
use zinc_dsl::ir::Function;

use crate::exec::{ClusterState, Machine, Mask, Result};
use crate::tma::BarrierKey;
use crate::value::Value;

/// The `if` statements of a module that run as roles when they split warps: those with an
/// `mbarrier_wait` on either side, directly or in a function called there. Statements are
/// known by address: the module outlives every machine that runs it.
pub(crate) fn waiting_ifs(module: &Module) -> HashSet<usize> {
    // Which functions wait, to a fixed point over calls (hand-built IR may recurse).
    let mut waits = vec![false; module.functions.len()];
    loop {
        let next: Vec<bool> = module
            .functions
            .iter()
            .map(|f| block_waits(&f.body, &waits))
            .collect();
        if next == waits {
            break;
        }
        waits = next;
    }
    let mut ifs = HashSet::new();
    for f in &module.functions {
        collect_waiting_ifs(&f.body, &waits, &mut ifs);
    }
    ifs
}

fn collect_waiting_ifs(block: &Block, waits: &[bool], ifs: &mut HashSet<usize>) {
    for stmt in block {
        match &stmt.kind {
            StmtKind::If {
                then_body,
                else_body,
                ..
            } => {
                if block_waits(then_body, waits) || block_waits(else_body, waits) {
                    ifs.insert(stmt_address(stmt));
                }
                collect_waiting_ifs(then_body, waits, ifs);
                collect_waiting_ifs(else_body, waits, ifs);
            }
            StmtKind::For { body, .. } | StmtKind::While { body, .. } => {
                collect_waiting_ifs(body, waits, ifs);
            }
            _ => {}
        }
    }
}

/// Where a run of role `if`s starting at `at` ends, if it has two or more: `if`s without
/// `else`, each in `waiting` and with a condition on registers alone that no body of the run
/// before it assigns, so that evaluating every condition first gives what running them in
/// order would.
pub(crate) fn role_run(stmts: &[Stmt], at: usize, waiting: &HashSet<usize>) -> Option<usize> {
    // A role `if`'s body and the registers its condition reads.
    fn role_if<'s>(stmt: &'s Stmt, waiting: &HashSet<usize>) -> Option<(&'s Block, Vec<VarId>)> {
        match &stmt.kind {
            StmtKind::If {
                cond,
                then_body,
                else_body,
            } if else_body.is_empty() && waiting.contains(&stmt_address(stmt)) => {
                register_reads(cond).map(|reads| (then_body, reads))
            }
            _ => None,
        }
    }
    // Most statements start no run: look at the next one before walking any body.
    stmts.get(at + 1).and_then(|stmt| role_if(stmt, waiting))?;
    let mut assigned = HashSet::new();
    let mut end = at;
    while let Some((body, reads)) = stmts.get(end).and_then(|stmt| role_if(stmt, waiting)) {
        if reads.iter().any(|v| assigned.contains(v)) {
            break;
        }
        collect_assigned(body, &mut assigned);
        end += 1;
    }
    (end - at >= 2).then_some(end)
}

/// The variables `e` reads, where it reads nothing but registers and has no effect.
fn register_reads(e: &Expr) -> Option<Vec<VarId>> {
    let mut reads = Vec::new();
    fn walk(e: &Expr, reads: &mut Vec<VarId>) -> bool {
        match &e.kind {
            ExprKind::Const(_) | ExprKind::Special(_) => true,
            ExprKind::Var(v) | ExprKind::Element { var: v, .. } => {
                reads.push(*v);
                true
            }
            ExprKind::Unary(_, a)
            | ExprKind::Cast(a)
            | ExprKind::Extract(a, _)
            | ExprKind::Bitcast(a) => walk(a, reads),
            ExprKind::Binary(_, a, b) | ExprKind::Logical(_, a, b) => {
                walk(a, reads) && walk(b, reads)
            }
            ExprKind::Select(a, b, c) => walk(a, reads) && walk(b, reads) && walk(c, reads),
            ExprKind::VectorBuild(es) => es.iter().all(|e| walk(e, reads)),
            _ => false,
        }
    }
    walk(e, &mut reads).then_some(reads)
}

/// Adds the variables `block` defines or assigns to `into`.
fn collect_assigned(block: &Block, into: &mut HashSet<VarId>) {
    for stmt in block {
        match &stmt.kind {
            StmtKind::Let { var, .. }
            | StmtKind::Assign { var, .. }
            | StmtKind::SetElement { var, .. } => {
                into.insert(*var);
            }
            StmtKind::If {
                then_body,
                else_body,
                ..
            } => {
                collect_assigned(then_body, into);
                collect_assigned(else_body, into);
            }
            StmtKind::For { var, body, .. } => {
                into.insert(*var);
                collect_assigned(body, into);
            }
            StmtKind::While { body, .. } => collect_assigned(body, into),
            _ => {}
        }
    }
}

pub(crate) fn stmt_address(stmt: &Stmt) -> usize {
    std::ptr::from_ref(stmt) as usize
}

/// Whether running `block` may reach an `mbarrier_wait`; `waits` says it of each function.
fn block_waits(block: &Block, waits: &[bool]) -> bool {
    block.iter().any(|stmt| match &stmt.kind {
        StmtKind::Let { init: e, .. }
        | StmtKind::Assign { value: e, .. }
        | StmtKind::SetElement { value: e, .. }
        | StmtKind::Expr(e)
        | StmtKind::Return(Some(e)) => expr_waits(e, waits),
        StmtKind::Store { ptr, value } => expr_waits(ptr, waits) || expr_waits(value, waits),
        StmtKind::If {
            cond,
            then_body,
            else_body,
        } => {
            expr_waits(cond, waits)
                || block_waits(then_body, waits)
                || block_waits(else_body, waits)
        }
        StmtKind::For {
            start,
            end,
            step,
            body,
            ..
        } => [start, end, step].iter().any(|e| expr_waits(e, waits)) || block_waits(body, waits),
        StmtKind::While { cond, body } => expr_waits(cond, waits) || block_waits(body, waits),
        StmtKind::Break
        | StmtKind::Continue
        | StmtKind::Return(None)
        | StmtKind::Barrier
        | StmtKind::Fence(_) => false,
    })
}

fn expr_waits(e: &Expr, waits: &[bool]) -> bool {
    let any = |es: &[Expr]| es.iter().any(|e| expr_waits(e, waits));
    match &e.kind {
        ExprKind::Builtin(Builtin::MbarrierWait, _) => true,
        ExprKind::Call(f, args) => waits.get(f.0 as usize).copied().unwrap_or(false) || any(args),
        ExprKind::Builtin(_, args)
        | ExprKind::VectorBuild(args)
        | ExprKind::Intrinsic { args, .. }
        | ExprKind::InlineAsm { args, .. } => any(args),
        ExprKind::Unary(_, a)
        | ExprKind::Cast(a)
        | ExprKind::Load(a)
        | ExprKind::Extract(a, _)
        | ExprKind::Bitcast(a) => expr_waits(a, waits),
        ExprKind::Binary(_, a, b)
        | ExprKind::Logical(_, a, b)
        | ExprKind::Offset { base: a, index: b } => expr_waits(a, waits) || expr_waits(b, waits),
        ExprKind::Select(a, b, c) => [a, b, c].iter().any(|e| expr_waits(e, waits)),
        ExprKind::Const(_)
        | ExprKind::Var(_)
        | ExprKind::Element { .. }
        | ExprKind::SharedArray(_)
        | ExprKind::TensorMap(_)
        | ExprKind::Special(_) => false,
    }
}

/// Whether no warp has active threads on both sides.
pub(crate) fn splits_warps(then_mask: &Mask, else_mask: &Mask, threads: usize) -> bool {
    (0..threads).step_by(32).all(|start| {
        let warp = start..(start + 32).min(threads);
        !(warp.clone().any(|t| then_mask.get(t)) && warp.into_iter().any(|t| else_mask.get(t)))
    })
}

/// Stack for a role's thread: the executor recurses over the IR (and over calls), as deep as
/// on the launching thread.
const ROLE_STACK_BYTES: usize = 32 << 20;

/// A role's place in its block's schedule.
#[derive(Clone)]
pub(crate) struct Seat<'m, 'a> {
    scheduler: Arc<Scheduler<'m, 'a>>,
    id: usize,
}

/// Who runs: one role at a time, holding the baton.
pub(crate) struct Scheduler<'m, 'a> {
    schedule: Mutex<Schedule<'m, 'a>>,
    turn: Condvar,
}

struct Schedule<'m, 'a> {
    /// The block's shared state while no role holds the baton.
    block: Option<ClusterState<'m, 'a>>,
    /// By id.
    roles: Vec<Role>,
    /// The roles that run or may run (not the parents of live roles), in scheduling order.
    order: Vec<usize>,
    running: Option<usize>,
    /// The running role got the baton only to report its wait: every role waits.
    deadlocked: bool,
    /// The block failed: the first error, and no role runs again.
    failure: Option<InterpError>,
    stopped: bool,
}

struct Role {
    parent: Option<usize>,
    waiting: Option<Wait>,
    /// Of a parent: its roles still running.
    children_left: usize,
}

/// What a role waits for.
#[derive(Copy, Clone)]
pub(crate) enum Wait {
    /// The phase of `parity` of the mbarrier at `key` of the block of rank `rank`.
    Phase {
        rank: usize,
        key: BarrierKey,
        parity: u32,
    },
    /// The cluster barrier after the `completed` ones so far (`cluster_sync`).
    ClusterSync { completed: u32 },
}

impl Wait {
    fn over(self, state: &ClusterState<'_, '_>) -> bool {
        match self {
            Wait::Phase { rank, key, parity } => state.blocks[rank].mbarriers.passed(key, parity),
            Wait::ClusterSync { completed } => state.cluster_sync.completed > completed,
        }
    }
}

/// A role that ran its side to the end.
pub(crate) struct Finished<'m, 'a> {
    /// Its frames and wgmmas in flight, to merge into the parent's.
    pub machine: Machine<'m, 'a>,
    /// The threads it ran.
    pub threads: Mask,
    /// The threads that fell through the end of its side.
    pub fell_through: Mask,
}

impl<'m, 'a> Scheduler<'m, 'a> {
    fn new() -> Scheduler<'m, 'a> {
        Scheduler {
            schedule: Mutex::new(Schedule {
                block: None,
                roles: Vec::new(),
                order: Vec::new(),
                running: None,
                deadlocked: false,
                failure: None,
                stopped: false,
            }),
            turn: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Schedule<'m, 'a>> {
        // A role that panicked stops the block (`StopOnPanic`); the schedule stays usable.
        self.schedule.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `n` roles in place of `parent` (None: the machine that is no role), the first to run
    /// first with the block's state.
    fn split(&self, parent: Option<usize>, block: ClusterState<'m, 'a>, n: usize) -> Vec<usize> {
        let mut s = self.lock();
        let ids: Vec<usize> = (s.roles.len()..s.roles.len() + n).collect();
        for _ in &ids {
            s.roles.push(Role {
                parent,
                waiting: None,
                children_left: 0,
            });
        }
        match parent {
            Some(p) => {
                s.roles[p].children_left = n;
                let at = s.position(p);
                s.order.splice(at..=at, ids.iter().copied());
            }
            None => s.order = ids.clone(),
        }
        s.block = Some(block);
        s.running = Some(ids[0]);
        self.turn.notify_all();
        ids
    }

    /// Wait for role `id`'s turn; the block's state and whether the role was woken only to
    /// report a deadlock.
    fn wait_turn(
        &self,
        mut s: MutexGuard<'_, Schedule<'m, 'a>>,
        id: usize,
    ) -> Result<(ClusterState<'m, 'a>, bool)> {
        while s.running != Some(id) && !s.stopped {
            s = self.turn.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
        if s.stopped {
            return Err(stopped());
        }
        let block = s.block.take().expect("the baton comes with the block");
        let deadlocked = std::mem::take(&mut s.deadlocked);
        s.roles[id].waiting = None;
        Ok((block, deadlocked))
    }

    fn acquire(&self, id: usize) -> Result<ClusterState<'m, 'a>> {
        let s = self.lock();
        self.wait_turn(s, id).map(|(block, _)| block)
    }

    /// Role `id` waits for `wait`; false when it was woken because every role waits.
    fn block_on(
        &self,
        id: usize,
        wait: Wait,
        block: ClusterState<'m, 'a>,
    ) -> Result<(ClusterState<'m, 'a>, bool)> {
        let mut s = self.lock();
        s.roles[id].waiting = Some(wait);
        s.block = Some(block);
        let after = s.position(id) + 1;
        s.hand_on(after);
        self.turn.notify_all();
        let (block, deadlocked) = self.wait_turn(s, id)?;
        Ok((block, !deadlocked))
    }

    /// Role `id` ended: with `result`, and `block` if it held the baton.
    fn finish(&self, id: usize, block: ClusterState<'m, 'a>, result: Result<()>) -> Result<()> {
        let mut s = self.lock();
        if s.running == Some(id) {
            s.block = Some(block);
            s.running = None;
        }
        if let Err(e) = result {
            if !s.stopped {
                s.failure = Some(e);
                s.stopped = true;
            }
            self.turn.notify_all();
            return Err(stopped());
        }
        let at = s.position(id);
        s.order.remove(at);
        if let Some(p) = s.roles[id].parent {
            s.roles[p].children_left -= 1;
            if s.roles[p].children_left == 0 {
                s.order.insert(at, p);
            }
        }
        s.hand_on(at);
        self.turn.notify_all();
        Ok(())
    }

    /// After roles started by the machine that is no role: the block's state and the first
    /// error.
    fn close(&self) -> (Option<ClusterState<'m, 'a>>, Option<InterpError>) {
        let mut s = self.lock();
        (s.block.take(), s.failure.take())
    }
}

impl Schedule<'_, '_> {
    fn position(&self, id: usize) -> usize {
        self.order
            .iter()
            .position(|&r| r == id)
            .expect("live roles are in the order")
    }

    /// Give the baton to the first runnable role from position `start` on, cyclically; if every
    /// role waits, to the first that waits for an mbarrier phase (what the blocks waiting at a
    /// `cluster_sync()` wait for in the end), else the first, to report its wait.
    fn hand_on(&mut self, start: usize) {
        let n = self.order.len();
        let Some(block) = &self.block else {
            return;
        };
        let runnable = (0..n)
            .map(|i| self.order[(start + i) % n])
            .find(|&id| self.roles[id].waiting.is_none_or(|wait| wait.over(block)));
        match runnable {
            Some(id) => self.running = Some(id),
            None if n > 0 => {
                let phase = self
                    .order
                    .iter()
                    .copied()
                    .find(|&id| matches!(self.roles[id].waiting, Some(Wait::Phase { .. })));
                self.running = Some(phase.unwrap_or(self.order[0]));
                self.deadlocked = true;
            }
            None => {}
        }
    }
}

/// What a role returns when the block failed elsewhere: the scheduler holds the real error.
fn stopped() -> InterpError {
    InterpError::from(ErrorKind::Malformed {
        what: "a role of a block that failed elsewhere".to_string(),
    })
}

/// Stops the block if a role panics, so that the other roles do not wait for it forever.
struct StopOnPanic<'s, 'm, 'a>(&'s Scheduler<'m, 'a>);

impl Drop for StopOnPanic<'_, '_, '_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.lock().stopped = true;
            self.0.turn.notify_all();
        }
    }
}

impl<'m, 'a> Machine<'m, 'a> {
    /// Run the sides of a warp-splitting `if`, or the bodies of a run of such `if`s
    /// ([`role_run`]), as roles; the threads that fall through.
    pub(crate) fn run_roles(&mut self, sides: Vec<(&'m Block, Mask)>) -> Result<Mask> {
        let parent = self.role.as_ref().map(|seat| seat.id);
        let scheduler = match &self.role {
            Some(seat) => seat.scheduler.clone(),
            None => Arc::new(Scheduler::new()),
        };
        let ids = scheduler.split(parent, self.take_cluster_state(), sides.len());
        let roles: Vec<Machine<'m, 'a>> = ids
            .into_iter()
            .map(|id| {
                self.role_machine(Seat {
                    scheduler: scheduler.clone(),
                    id,
                })
            })
            .collect();
        let outcomes: Vec<Result<Finished<'m, 'a>>> = on_threads(
            roles
                .into_iter()
                .zip(sides)
                .map(|(role, (body, threads))| move || role.run_role(body, threads)),
        );
        if parent.is_none() {
            let (block, failure) = scheduler.close();
            self.put_cluster_state(block.expect("the role that ends last hands the block back"));
            if let Some(e) = failure {
                return Err(e);
            }
        }
        let finished = outcomes.into_iter().collect::<Result<Vec<_>>>()?;
        if let Some(id) = parent {
            let block = scheduler.acquire(id)?;
            self.put_cluster_state(block);
        }
        Ok(self.merge_roles(finished))
    }

    /// Run the blocks of the cluster whose first block is `first` together, as roles in rank
    /// order (the cluster's state set up): each runs in lock step, and its roles nest in its
    /// place, until it waits for what another block does.
    pub(crate) fn run_blocks_together(
        &mut self,
        kernel: &'m Function,
        first: [u32; 3],
        params: &[Value],
    ) -> Result<()> {
        let scheduler = Arc::new(Scheduler::new());
        let blocks = self.peers.len();
        let ids = scheduler.split(None, self.take_cluster_state(), blocks);
        let machines: Vec<Machine<'m, 'a>> = ids
            .into_iter()
            .map(|id| {
                let mut machine = self.role_machine(Seat {
                    scheduler: scheduler.clone(),
                    id,
                });
                machine.rank = id;
                machine.block = self.block_of_rank(first, id);
                machine
            })
            .collect();
        let outcomes: Vec<Result<()>> = on_threads(
            machines
                .into_iter()
                .map(|machine| move || machine.run_cluster_block(kernel, params)),
        );
        let (state, failure) = scheduler.close();
        self.put_cluster_state(state.expect("the block that ends last hands the state back"));
        if let Some(e) = failure {
            return Err(e);
        }
        outcomes.into_iter().collect()
    }

    /// Run the kernel for this machine's block of a cluster once it gets the baton.
    fn run_cluster_block(mut self, kernel: &'m Function, params: &[Value]) -> Result<()> {
        let seat = self.role.clone().expect("a block of a cluster has a seat");
        let _stop = StopOnPanic(&seat.scheduler);
        let state = seat.scheduler.acquire(seat.id)?;
        self.put_cluster_state(state);
        let result = self
            .run_block(kernel, params)
            .map(|()| self.leave_cluster());
        let state = self.take_cluster_state();
        seat.scheduler.finish(seat.id, state, result)
    }

    /// Run a role's side for `threads` once it gets the baton.
    fn run_role(mut self, body: &'m Block, threads: Mask) -> Result<Finished<'m, 'a>> {
        let seat = self.role.clone().expect("a role machine has a seat");
        let _stop = StopOnPanic(&seat.scheduler);
        let block = seat.scheduler.acquire(seat.id)?;
        self.put_cluster_state(block);
        let mut fell_through = threads.clone();
        let result = self.exec_block(body, &mut fell_through);
        let block = self.take_cluster_state();
        seat.scheduler.finish(seat.id, block, result)?;
        Ok(Finished {
            machine: self,
            threads,
            fell_through,
        })
    }

    /// As a role: wait until `wait` is over, while other roles run. False when it never will:
    /// in lock step, or when every role waits.
    pub(crate) fn suspend(&mut self, wait: Wait) -> Result<bool> {
        let Some(seat) = self.role.clone() else {
            return Ok(false);
        };
        let block = self.take_cluster_state();
        let (block, completed) = seat.scheduler.block_on(seat.id, wait, block)?;
        self.put_cluster_state(block);
        Ok(completed)
    }
}

/// Runs each job on an OS thread of its own (with a role's stack) and waits for them all, in
/// order; a job's panic resumes here.
fn on_threads<T: Send, F: FnOnce() -> T + Send>(jobs: impl IntoIterator<Item = F>) -> Vec<T> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = jobs
            .into_iter()
            .map(|job| {
                std::thread::Builder::new()
                    .stack_size(ROLE_STACK_BYTES)
                    .spawn_scoped(scope, job)
                    .expect("the OS starts a thread for a role or a block")
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    })
}
