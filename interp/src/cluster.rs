//! Thread-block clusters: the blocks of a cluster run together, as roles of one schedule
//! (`roles`), each with its own shared memory, mbarriers and exited threads. A block reaches
//! another's shared memory only through `tma_load_multicast` and `mbarrier_arrive_cluster`,
//! which run as if the block were the target (its mbarriers, its shared memory) with the
//! issuing thread's identity, so that memory's clocks order them across the blocks.
//! `cluster_sync()` is a barrier of every block of the cluster: a block that reaches it waits
//! (giving the baton up) until the others have, a block whose threads all exited counting as
//! arrived.

use zinc_dsl::diag::Span;
use zinc_dsl::ir::Expr;

use crate::error::{ErrorKind, InterpError};
use crate::exec::{Lanes, Machine, Mask, Result, UNSET};
use crate::roles::Wait;

/// Where the blocks of a cluster stand at `cluster_sync()`.
#[derive(Default)]
pub(crate) struct ClusterSync {
    /// Cluster barriers completed so far.
    pub completed: u32,
    /// By rank: whether the block's threads arrived at the next one.
    arrived: Vec<bool>,
    /// By rank: whether the block's threads all exited (it counts as arrived).
    exited: Vec<bool>,
}

impl ClusterSync {
    pub fn new(blocks: usize) -> ClusterSync {
        ClusterSync {
            completed: 0,
            arrived: vec![false; blocks],
            exited: vec![false; blocks],
        }
    }

    /// The block of rank `rank` arrives; whether that completes the barrier.
    fn arrive(&mut self, rank: usize) -> bool {
        self.arrived[rank] = true;
        self.complete_if_all_arrived()
    }

    /// The block of rank `rank` exited; whether that completes a barrier the others wait at.
    fn exit(&mut self, rank: usize) -> bool {
        self.exited[rank] = true;
        self.arrived.contains(&true) && self.complete_if_all_arrived()
    }

    fn complete_if_all_arrived(&mut self) -> bool {
        let all = (0..self.arrived.len()).all(|r| self.arrived[r] || self.exited[r]);
        if all {
            self.completed += 1;
            self.arrived.fill(false);
        }
        all
    }
}

impl<'m> Machine<'m, '_> {
    /// `cluster_sync()`: every live thread of the block is here (as at a block barrier); the
    /// block waits until every other block of the cluster has arrived or exited.
    pub(crate) fn cluster_sync(&mut self, mask: &Mask, span: Span) -> Result<Lanes> {
        self.check_all_arrived(mask, span)?;
        let completed = self.cluster_sync.completed;
        if self.cluster_sync.arrive(self.rank) {
            self.mem.cluster_barrier();
        }
        while self.cluster_sync.completed == completed {
            // A block that has not arrived has a role that waits for an mbarrier phase if none
            // runs, and that role reports the deadlock (`roles`).
            let woken = self.suspend(Wait::ClusterSync { completed })?;
            assert!(
                woken,
                "a cluster_sync waiter is not woken to report a deadlock"
            );
        }
        Ok(vec![UNSET; self.threads])
    }

    /// The block's threads have all exited: a `cluster_sync()` the others wait at may complete.
    pub(crate) fn leave_cluster(&mut self) {
        if self.cluster_sync.exit(self.rank) {
            self.mem.cluster_barrier();
        }
    }

    /// The index of the first block (rank 0) of the running block's cluster.
    pub fn cluster_first(&self) -> [u32; 3] {
        [0, 1, 2].map(|a| self.block[a] / self.cluster[a] * self.cluster[a])
    }

    /// Run `f` for thread `t`'s `op` on the cluster's block of rank `rank`, as if that block
    /// were running: its mbarriers and shared memory.
    pub(crate) fn in_block<T>(
        &mut self,
        rank: u32,
        op: &'static str,
        t: usize,
        e: &Expr,
        f: impl FnOnce(&mut Self) -> Result<T>,
    ) -> Result<T> {
        let blocks = self.peers.len();
        if rank as usize >= blocks {
            let what = format!("block rank {rank}, but the cluster has {blocks} blocks");
            return Err(self.cluster_error(op, t, e, what));
        }
        let rank = rank as usize;
        if rank == self.rank {
            return f(self);
        }
        if self.cluster_sync.exited[rank] {
            let block = self.block_of_rank(self.cluster_first(), rank);
            let what = format!(
                "block ({}, {}, {}) has exited, its shared memory gone: `cluster_sync()` before a block exits while others may still reach it",
                block[0], block[1], block[2]
            );
            return Err(self.cluster_error(op, t, e, what));
        }
        std::mem::swap(&mut self.mbarriers, &mut self.peers[rank].mbarriers);
        self.mem.enter_block(rank);
        let result = f(self);
        self.mem.enter_block(self.rank);
        std::mem::swap(&mut self.mbarriers, &mut self.peers[rank].mbarriers);
        result
    }

    pub(crate) fn cluster_error(
        &self,
        op: &'static str,
        t: usize,
        e: &Expr,
        what: String,
    ) -> InterpError {
        let thread = self.thread_id(t);
        self.error_at(e.span, ErrorKind::Cluster { op, thread, what })
    }
}
