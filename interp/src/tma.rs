//! Hopper's mbarriers and TMA tensor copies (`tma_load` and `tma_store`, `cp.async.bulk.tensor.2d`;
//! `tma_prefetch` only checks its map).
//!
//! An mbarrier counts arrivals (`mbarrier_expect_tx`, one per thread) and transaction bytes
//! (added by `mbarrier_expect_tx`, taken off by each `tma_load` that completes on it); when both
//! reach zero its phase completes: the copies of the phase land, the phase flips and the count
//! of expected arrivals is restored. A copy's bytes are visible to a thread only once it has
//! waited for the phase (`mbarrier_wait`), or after a block barrier that follows some thread's
//! wait; any access before that is an error naming the copy. A wait for a phase that has not
//! completed suspends its role while another role runs (`roles`); in lock step, or when every
//! role waits, it would wait forever: an error. Arrivals and waits also order the threads'
//! shared-memory accesses for the race detector (`memory`).
//!
//! A `tma_store` writes its box to global memory at once, reading the shared source as the
//! issuing thread's read through the async proxy (the stores it reads must have been fenced for
//! it, `memory`). On the GPU the TMA reads the source later, until a `tma_store_wait`
//! covers the store's bulk group: each thread keeps its stores in their groups with the bytes
//! they read, a wait that retires a store reports a source that changed since, and a thread
//! may not exit before its stores are retired.

use std::collections::HashMap;

use half::f16;
use zinc_dsl::diag::Span;
use zinc_dsl::ir::{Expr, Function, FunctionKind, Scalar, TensorMap, TmaStoreOp, Type};

use crate::copy::Groups;
use crate::error::{ErrorKind, Location};
use crate::exec::{Lanes, Machine, Mask, Result, UNSET};
use crate::memory::{TmaGuard, Touch};
use crate::roles::Wait;
use crate::value::{Pointer, Region, Value};

/// Where an mbarrier lives: shared array and byte offset.
pub(crate) type BarrierKey = (usize, i64);

/// The block's mbarriers, by address.
#[derive(Default)]
pub(crate) struct Mbarriers {
    bars: HashMap<BarrierKey, Mbarrier>,
}

impl Mbarriers {
    /// Whether the phase of `parity` of the mbarrier at `key` has completed (what a wait
    /// waits for).
    pub fn passed(&self, key: BarrierKey, parity: u32) -> bool {
        self.bars
            .get(&key)
            .is_some_and(|b| b.completed % 2 != parity)
    }
}

struct Mbarrier {
    /// Fresh at each `mbarrier_init` ([`Memory::fresh_barrier_id`](crate::memory::Memory)).
    id: u32,
    /// Arrivals per phase (`mbarrier_init`'s count).
    count: u32,
    /// Arrivals the current phase still waits for.
    pending: u32,
    /// Transaction bytes the current phase still waits for; negative when copies completed
    /// bytes before `mbarrier_expect_tx` announced them (allowed, as on the GPU).
    tx: i64,
    /// Phases completed since initialization; the current phase's parity is `completed % 2`.
    completed: u32,
    /// The copies that land when the current phase completes.
    landing: Vec<(Pointer, Vec<u8>)>,
}

/// A kernel's tensor map as the host encoded it for the launch: the parameter's buffer and the
/// tensor's offset into it and extents, in elements.
#[derive(Copy, Clone)]
pub(crate) struct EncodedMap {
    tensor: Value,
    offset: u64,
    rows: u64,
    cols: u64,
}

/// The part of a box inside its tensor: `columns` elements of each of `rows`, given as the
/// box's row and the address of its first element in the tensor.
struct BoxInTensor {
    rows: Vec<(usize, Pointer)>,
    columns: usize,
}

/// The two TMA tensor copies, for what they share: the box in shared memory.
#[derive(Copy, Clone)]
enum BoxCopy {
    Load,
    Store,
}

impl BoxCopy {
    fn name(self) -> &'static str {
        match self {
            BoxCopy::Load => "tma_load",
            BoxCopy::Store => "tma_store",
        }
    }

    /// The operation a misaligned shared box is reported as, with the map's swizzle or not.
    fn misaligned(self, swizzled: bool) -> &'static str {
        match (self, swizzled) {
            (BoxCopy::Load, false) => "tma_load (the destination must be 128-byte aligned)",
            (BoxCopy::Load, true) => "tma_load (a swizzled box needs a destination aligned to 8 of its rows: a `swizzle`d array of rows of its width)",
            (BoxCopy::Store, false) => "tma_store (the source must be 128-byte aligned)",
            (BoxCopy::Store, true) => "tma_store (a swizzled box needs a source aligned to 8 of its rows: a `swizzle`d array of rows of its width)",
        }
    }
}

/// Where element (`r`, `c`) of a box of `tm` is in shared memory, in bytes from the box's start:
/// row after row, each `box_cols` elements, in the map's swizzle when it has one (address bits
/// 4.. XORed with the bits 7.. that count 128-byte lines, as many bits as the swizzle has
/// 16-byte chunks per row: the layout of a `swizzle`d array of rows of that width).
fn box_byte(tm: &TensorMap, r: usize, c: usize) -> usize {
    let chunk_mask = (tm.swizzle_bytes() as usize / 16).saturating_sub(1);
    let at = (r * tm.box_cols as usize + c) * tm.elem.size() as usize;
    at ^ (((at >> 7) & chunk_mask) << 4)
}

/// A `tma_store` whose shared source the TMA may still be reading: the bytes it read at issue,
/// which must still be there when a wait retires it.
pub(crate) struct StoreSource<'m> {
    src: Pointer,
    bytes: Vec<u8>,
    who: Touch<'m>,
}

/// A thread's TMA stores in their bulk groups.
pub(crate) type BulkStores<'m> = Groups<StoreSource<'m>>;

/// The hardware's limit on an mbarrier's transaction count (2^20 - 1).
const MAX_TX_BYTES: i64 = (1 << 20) - 1;

impl<'m> Machine<'m, '_> {
    /// The mbarrier operand of thread `t`: an 8-byte aligned shared address.
    fn mbarrier_at(&self, v: Value, t: usize, op: &'static str, e: &Expr) -> Result<Pointer> {
        let p = self.pointer(v, e.span)?;
        if !matches!(p.region, Region::Shared(_)) {
            return Err(self.malformed(e.span, "an mbarrier outside shared memory"));
        }
        if p.offset % 8 != 0 {
            return Err(self.error_at(
                e.span,
                ErrorKind::Misaligned {
                    op,
                    thread: self.thread_id(t),
                    offset: p.offset,
                    align: 8,
                },
            ));
        }
        Ok(p)
    }

    fn key(p: Pointer) -> BarrierKey {
        match p.region {
            Region::Shared(i) => (i, p.offset),
            Region::Global(_) => unreachable!("mbarrier_at only gives shared pointers"),
        }
    }

    fn mbarrier_error(
        &self,
        op: &'static str,
        p: Pointer,
        t: usize,
        e: &Expr,
        what: String,
    ) -> crate::InterpError {
        let (array, offset) = Self::key(p);
        self.error_at(
            e.span,
            ErrorKind::Mbarrier {
                op,
                thread: self.thread_id(t),
                array: self.kernel_fn().shared[array].name.clone(),
                offset,
                what,
            },
        )
    }

    /// Log an arrival, wait or copy completion on the barrier's 8 bytes: atomic, so that the
    /// threads using one barrier do not race with each other (only with its initialization).
    fn touch_mbarrier(&mut self, p: Pointer, t: usize, e: &'m Expr) -> Result<()> {
        let who = self.touch(t, e.span);
        self.mem
            .update(p, &Type::Scalar(Scalar::U64), who, Ok::<Value, ()>)
            .map_err(|f| self.fault(f, t, e.span))?
            .unwrap_or_else(|()| unreachable!("the update keeps the value"));
        Ok(())
    }

    /// The initialized mbarrier at `p`.
    fn mbarrier(
        &mut self,
        op: &'static str,
        p: Pointer,
        t: usize,
        e: &Expr,
    ) -> Result<&mut Mbarrier> {
        if !self.mbarriers.bars.contains_key(&Self::key(p)) {
            let what = "the mbarrier was never initialized (`mbarrier_init`)".to_string();
            return Err(self.mbarrier_error(op, p, t, e, what));
        }
        Ok(self
            .mbarriers
            .bars
            .get_mut(&Self::key(p))
            .expect("checked above"))
    }

    /// `mbarrier_init(bar, count)` for the active threads.
    pub(crate) fn mbarrier_init(
        &mut self,
        args: &[Lanes],
        mask: &Mask,
        e: &'m Expr,
    ) -> Result<Lanes> {
        let [bar, count] = args else {
            return Err(self.malformed(e.span, "mbarrier_init without two operands"));
        };
        for t in mask.lanes() {
            let op = "mbarrier_init";
            let p = self.mbarrier_at(bar[t], t, op, e)?;
            let count = match count[t] {
                Value::U32(c) if c >= 1 => c,
                c => {
                    let what = format!(
                        "an arrival count of {} (it must be at least 1)",
                        c.reg_bits()
                    );
                    return Err(self.mbarrier_error(op, p, t, e, what));
                }
            };
            let copies = self
                .mbarriers
                .bars
                .get(&Self::key(p))
                .map_or(0, |b| b.landing.len());
            if copies > 0 {
                let what =
                    format!("initialized again while {copies} tma_load(s) still complete on it");
                return Err(self.mbarrier_error(op, p, t, e, what));
            }
            // The initialization is a plain write: other threads need a barrier before using it.
            let who = self.touch(t, e.span);
            self.mem
                .store(
                    p,
                    Value::U64(u64::from(count)),
                    &Type::Scalar(Scalar::U64),
                    who,
                )
                .map_err(|f| self.fault(f, t, e.span))?;
            let id = self.mem.fresh_barrier_id();
            let fresh = Mbarrier {
                id,
                count,
                pending: count,
                tx: 0,
                completed: 0,
                landing: Vec::new(),
            };
            self.mbarriers.bars.insert(Self::key(p), fresh);
        }
        Ok(vec![UNSET; self.threads])
    }

    /// `mbarrier_expect_tx(bar, bytes)`: an arrival and `bytes` more transaction bytes, for
    /// each active thread.
    pub(crate) fn mbarrier_expect_tx(
        &mut self,
        args: &[Lanes],
        mask: &Mask,
        e: &'m Expr,
    ) -> Result<Lanes> {
        let [bar, bytes] = args else {
            return Err(self.malformed(e.span, "mbarrier_expect_tx without two operands"));
        };
        for t in mask.lanes() {
            self.arrive(
                "mbarrier_expect_tx",
                bar[t],
                i64::from(bytes[t].reg_bits()),
                t,
                e,
            )?;
        }
        Ok(vec![UNSET; self.threads])
    }

    pub(crate) fn mbarrier_arrive(
        &mut self,
        args: &[Lanes],
        mask: &Mask,
        e: &'m Expr,
    ) -> Result<Lanes> {
        let [bar] = args else {
            return Err(self.malformed(e.span, "mbarrier_arrive without one operand"));
        };
        for t in mask.lanes() {
            self.arrive("mbarrier_arrive", bar[t], 0, t, e)?;
        }
        Ok(vec![UNSET; self.threads])
    }

    /// `mbarrier_arrive_cluster(bar, rank)`: each active thread's arrival on the mbarrier at
    /// `bar` in the cluster's block of rank `rank`.
    pub(crate) fn mbarrier_arrive_cluster(
        &mut self,
        args: &[Lanes],
        mask: &Mask,
        e: &'m Expr,
    ) -> Result<Lanes> {
        let op = "mbarrier_arrive_cluster";
        let [bar, rank] = args else {
            return Err(self.malformed(e.span, "mbarrier_arrive_cluster without two operands"));
        };
        for t in mask.lanes() {
            let rank = rank[t].reg_bits();
            self.in_block(rank, op, t, e, |m| m.arrive(op, bar[t], 0, t, e))?;
        }
        Ok(vec![UNSET; self.threads])
    }

    /// Thread `t`'s arrival on the mbarrier at `bar`, expecting `bytes` more transaction bytes.
    fn arrive(
        &mut self,
        op: &'static str,
        bar: Value,
        bytes: i64,
        t: usize,
        e: &'m Expr,
    ) -> Result<()> {
        let p = self.mbarrier_at(bar, t, op, e)?;
        self.touch_mbarrier(p, t, e)?;
        let b = self.mbarrier(op, p, t, e)?;
        let (pending, tx) = (b.pending, b.tx + bytes);
        if pending == 0 || tx > MAX_TX_BYTES {
            let what = match pending {
                0 => format!("more arrivals than the {} it was initialized with", b.count),
                _ => {
                    format!("{tx} transaction bytes outstanding, over the limit of {MAX_TX_BYTES}")
                }
            };
            return Err(self.mbarrier_error(op, p, t, e, what));
        }
        b.pending -= 1;
        b.tx = tx;
        let id = b.id;
        self.mem.arrive(id, self.cluster_thread(t));
        self.complete_phase(p, t, e)
    }

    /// Completes the current phase of the barrier at `p` when nothing is outstanding: its
    /// copies land and the next phase starts.
    fn complete_phase(&mut self, p: Pointer, t: usize, e: &Expr) -> Result<()> {
        let b = self
            .mbarriers
            .bars
            .get_mut(&Self::key(p))
            .expect("initialized");
        if b.pending != 0 || b.tx != 0 {
            return Ok(());
        }
        let landing = std::mem::take(&mut b.landing);
        b.completed += 1;
        b.pending = b.count;
        let id = b.id;
        self.mem.complete_phase(id);
        for (dst, data) in landing {
            self.mem
                .land_tma(dst, &data)
                .map_err(|f| self.fault(f, t, e.span))?;
        }
        Ok(())
    }

    /// `mbarrier_wait(bar, parity)`: the phase of that parity must have completed. If it has
    /// not, a role (see `roles`) waits for another role to complete it; in lock step, or when
    /// every role waits, the block would wait forever (an error).
    pub(crate) fn mbarrier_wait(
        &mut self,
        args: &[Lanes],
        mask: &Mask,
        e: &'m Expr,
    ) -> Result<Lanes> {
        let [bar, parity] = args else {
            return Err(self.malformed(e.span, "mbarrier_wait without two operands"));
        };
        for t in mask.lanes() {
            let op = "mbarrier_wait";
            let p = self.mbarrier_at(bar[t], t, op, e)?;
            let parity = parity[t].reg_bits() % 2;
            self.touch_mbarrier(p, t, e)?;
            self.mbarrier(op, p, t, e)?;
            // The phase of `parity` has completed when the current phase has the other parity.
            while !self.mbarriers.passed(Self::key(p), parity) {
                let wait = Wait::Phase {
                    rank: self.rank,
                    key: Self::key(p),
                    parity,
                };
                if self.suspend(wait)? {
                    continue;
                }
                let b = self.mbarrier(op, p, t, e)?;
                let (arrivals, tx_bytes) = (b.pending, b.tx);
                let (array, offset) = Self::key(p);
                return Err(self.error_at(
                    e.span,
                    ErrorKind::MbarrierDeadlock {
                        thread: self.thread_id(t),
                        array: self.kernel_fn().shared[array].name.clone(),
                        offset,
                        parity,
                        arrivals,
                        tx_bytes,
                    },
                ));
            }
            let b = self.mbarrier(op, p, t, e)?;
            let (id, completed) = (b.id, b.completed);
            self.mem.observe(id, self.cluster_thread(t), completed);
        }
        Ok(vec![UNSET; self.threads])
    }

    /// Encodes the kernel's tensor maps for a launch with parameters `params`, as the host
    /// does: their offsets and extents use only the kernel's scalar parameters.
    pub(crate) fn encode_tensor_maps(
        &mut self,
        kernel: &'m Function,
        params: &[Value],
    ) -> Result<()> {
        let FunctionKind::Kernel(launch) = &kernel.kind else {
            unreachable!("only kernels are launched")
        };
        let mut encoded = Vec::new();
        for tm in &launch.tensor_maps {
            let mut extents = [0; 3];
            for (x, e) in extents.iter_mut().zip([&tm.offset, &tm.rows, &tm.cols]) {
                *x = match self.eval_host(kernel, params, e)? {
                    Value::U32(x) => u64::from(x),
                    _ => {
                        return Err(self.malformed(e.span, "a tensor map extent that is not a u32"))
                    }
                };
            }
            let Some(param) = kernel.params.iter().position(|&p| p == tm.param) else {
                return Err(
                    self.malformed(tm.span, "a tensor map of a variable that is no parameter")
                );
            };
            let [offset, rows, cols] = extents;
            encoded.push(EncodedMap {
                tensor: params[param],
                offset,
                rows,
                cols,
            });
        }
        self.tensor_maps = encoded;
        Ok(())
    }

    /// `tma_load(dst, map, row, col, bar)` for the active threads: the box is read now (zero
    /// past the tensor's edges) and lands when the barrier's phase completes. The map is one of
    /// the kernel's, also when a device function passed it on.
    pub(crate) fn tma_load(&mut self, args: &[Lanes], mask: &Mask, e: &'m Expr) -> Result<Lanes> {
        let [dst, map, row, col, bar] = args else {
            return Err(self.malformed(e.span, "tma_load without five operands"));
        };
        for t in mask.lanes() {
            let (tm, encoded) = self.checked_map(map[t], "tma_load", e)?;
            let data = self.read_box(tm, encoded, [row[t], col[t]], t, e)?;
            self.land_box_on("tma_load", tm, data, [dst[t], bar[t]], t, e)?;
        }
        Ok(vec![UNSET; self.threads])
    }

    /// `tma_load_multicast(dst, map, row, col, bar, ctas)` for the active threads: `tma_load`'s
    /// box into `dst` of each block of the cluster whose rank's bit is set in `ctas`, landing
    /// when the phase of the mbarrier at `bar` in that block completes.
    pub(crate) fn tma_load_multicast(
        &mut self,
        args: &[Lanes],
        mask: &Mask,
        e: &'m Expr,
    ) -> Result<Lanes> {
        let op = "tma_load_multicast";
        let [dst, map, row, col, bar, ctas] = args else {
            return Err(self.malformed(e.span, "tma_load_multicast without six operands"));
        };
        for t in mask.lanes() {
            let (tm, encoded) = self.checked_map(map[t], op, e)?;
            let data = self.read_box(tm, encoded, [row[t], col[t]], t, e)?;
            let ctas = ctas[t].reg_bits();
            let blocks = self.peers.len();
            if ctas >> blocks != 0 {
                let what = format!(
                    "block mask {ctas:#x} names blocks past the cluster's {blocks} (the GPU ignores them)"
                );
                return Err(self.cluster_error(op, t, e, what));
            }
            for rank in (0..blocks as u32).filter(|r| ctas >> r & 1 == 1) {
                self.in_block(rank, op, t, e, |m| {
                    m.land_box_on(op, tm, data.clone(), [dst[t], bar[t]], t, e)
                })?;
            }
        }
        Ok(vec![UNSET; self.threads])
    }

    /// Thread `t`'s TMA copy of `data`, a box of `tm`, into the running block's shared memory
    /// at `dst`, completing on the mbarrier at `bar` there: it lands when the barrier's phase
    /// completes.
    fn land_box_on(
        &mut self,
        op: &'static str,
        tm: &TensorMap,
        data: Vec<u8>,
        [dst, bar]: [Value; 2],
        t: usize,
        e: &'m Expr,
    ) -> Result<()> {
        let d = self.shared_box(dst, tm, BoxCopy::Load, t, e)?;
        let p = self.mbarrier_at(bar, t, op, e)?;
        self.touch_mbarrier(p, t, e)?;
        let b = self.mbarrier(op, p, t, e)?;
        let guard = TmaGuard {
            barrier: b.id,
            phase: b.completed,
        };
        b.tx -= i64::from(tm.box_bytes());
        b.landing.push((d, data));
        let who = self.touch(t, e.span);
        self.mem
            .start_tma(d, tm.box_bytes() as usize, who, guard)
            .map_err(|f| self.fault(f, t, e.span))?;
        self.complete_phase(p, t, e)
    }

    /// `tma_prefetch(map, row, col)`: a hint for the L2, which the interpreter does not have;
    /// the map is checked as `tma_load` checks it, the box may lie anywhere.
    pub(crate) fn tma_prefetch(
        &mut self,
        args: &[Lanes],
        mask: &Mask,
        e: &'m Expr,
    ) -> Result<Lanes> {
        let [map, _row, _col] = args else {
            return Err(self.malformed(e.span, "tma_prefetch without three operands"));
        };
        for t in mask.lanes() {
            self.checked_map(map[t], "tma_prefetch", e)?;
        }
        Ok(vec![UNSET; self.threads])
    }

    /// The kernel's tensor map that `map` names (also when a device function passed it on) and
    /// its encoding at this launch, which must describe a tensor the driver would encode.
    fn checked_map(
        &self,
        map: Value,
        op: &str,
        e: &'m Expr,
    ) -> Result<(&'m TensorMap, EncodedMap)> {
        let FunctionKind::Kernel(launch) = &self.kernel_fn().kind else {
            unreachable!("blocks run kernels")
        };
        let Value::TensorMap(index) = map else {
            return Err(self.malformed(
                e.span,
                format!("a {op} of something other than a tensor map"),
            ));
        };
        let (Some(tm), Some(&encoded)) = (
            launch.tensor_maps.get(index as usize),
            self.tensor_maps.get(index as usize),
        ) else {
            return Err(
                self.malformed(e.span, format!("tensor map #{index}, which does not exist"))
            );
        };
        if let Some(what) = extent_problem(encoded.rows, encoded.cols, tm.elem.size()) {
            let map = tm.name.clone();
            return Err(self.error_at(e.span, ErrorKind::TensorMap { map, what }));
        }
        Ok((tm, encoded))
    }

    /// The shared box of a TMA copy of `tm` at thread `t`'s address `v`, aligned as the TMA
    /// needs it: 128 bytes, and a swizzled box the pattern's period (8 rows of its width).
    fn shared_box(
        &self,
        v: Value,
        tm: &TensorMap,
        copy: BoxCopy,
        t: usize,
        e: &Expr,
    ) -> Result<Pointer> {
        let p = self.pointer(v, e.span)?;
        let Region::Shared(array) = p.region else {
            let what = format!("a {} box outside shared memory", copy.name());
            return Err(self.malformed(e.span, what));
        };
        let align = match tm.swizzle_bytes() {
            0 => 128,
            b => 8 * u64::from(b),
        };
        if p.offset % align as i64 != 0 || self.kernel_fn().shared[array].align() < align {
            return Err(self.error_at(
                e.span,
                ErrorKind::Misaligned {
                    op: copy.misaligned(tm.swizzle_bytes() != 0),
                    thread: self.thread_id(t),
                    offset: p.offset,
                    align: align as u32,
                },
            ));
        }
        Ok(p)
    }

    /// The part of the box of `tm` whose first element is `(row, col)` that lies inside the
    /// tensor `encoded` (the rest is zero-filled by loads and not written by stores).
    fn box_in_tensor(
        &self,
        tm: &TensorMap,
        encoded: EncodedMap,
        [row, col]: [Value; 2],
        e: &Expr,
    ) -> Result<BoxInTensor> {
        let EncodedMap {
            tensor,
            offset,
            rows,
            cols,
        } = encoded;
        let mut start = self.pointer(tensor, e.span)?;
        let size = tm.elem.size() as usize;
        start.offset += (offset as usize * size) as i64;
        if start.offset % 16 != 0 {
            let map = tm.name.clone();
            let what = format!(
                "the tensor starts {} bytes into its buffer: TMA needs a 16-byte aligned start",
                start.offset
            );
            return Err(self.error_at(e.span, ErrorKind::TensorMap { map, what }));
        }
        let (row, col) = (u64::from(row.reg_bits()), u64::from(col.reg_bits()));
        let columns = cols.saturating_sub(col).min(u64::from(tm.box_cols)) as usize;
        let rows_inside = match columns {
            0 => 0,
            _ => rows.saturating_sub(row).min(u64::from(tm.box_rows)),
        };
        let rows = (0..rows_inside)
            .map(|r| {
                let element = (row + r) * cols + col;
                let at = Pointer {
                    region: start.region,
                    offset: start.offset + (element as usize * size) as i64,
                };
                (r as usize, at)
            })
            .collect();
        Ok(BoxInTensor { rows, columns })
    }

    /// The box of `tm` whose first element is `(row, col)`, as it lands in shared memory
    /// ([`box_byte`]), zero where the box leaves the tensor.
    fn read_box(
        &mut self,
        tm: &TensorMap,
        encoded: EncodedMap,
        corner: [Value; 2],
        t: usize,
        e: &'m Expr,
    ) -> Result<Vec<u8>> {
        let size = tm.elem.size() as usize;
        let inside = self.box_in_tensor(tm, encoded, corner, e)?;
        let mut data = vec![0u8; tm.box_bytes() as usize];
        for (r, start) in inside.rows {
            let who = self.touch(t, e.span);
            let bytes = self
                .mem
                .read(start, inside.columns * size, who)
                .map_err(|f| self.fault(f, t, e.span))?;
            for (c, element) in bytes.chunks_exact(size).enumerate() {
                let at = box_byte(tm, r, c);
                data[at..at + size].copy_from_slice(element);
            }
        }
        Ok(data)
    }

    /// Writes (`op`) the part inside the tensor of the box of `tm` whose first element is
    /// `(row, col)` from `data`, laid out as [`read_box`](Self::read_box) gives it, as thread
    /// `t`'s stores.
    fn write_box(
        &mut self,
        tm: &TensorMap,
        encoded: EncodedMap,
        corner: [Value; 2],
        (op, data): (TmaStoreOp, &[u8]),
        t: usize,
        e: &'m Expr,
    ) -> Result<()> {
        let size = tm.elem.size() as usize;
        let inside = self.box_in_tensor(tm, encoded, corner, e)?;
        for (r, start) in inside.rows {
            let mut row: Vec<u8> = (0..inside.columns)
                .flat_map(|c| {
                    let at = box_byte(tm, r, c);
                    &data[at..at + size]
                })
                .copied()
                .collect();
            let who = self.touch(t, e.span);
            if op == TmaStoreOp::Add {
                let held = self
                    .mem
                    .read(start, row.len(), who)
                    .map_err(|f| self.fault(f, t, e.span))?;
                add_elements(tm.elem, &mut row, &held);
            }
            self.mem
                .write(start, &row, who)
                .map_err(|f| self.fault(f, t, e.span))?;
        }
        Ok(())
    }

    /// `tma_store(map, row, col, src)` for the active threads: the box is written now from the
    /// source's bytes, read by the issuing thread, and the store stays pending with them until
    /// a `tma_store_wait` retires it.
    pub(crate) fn tma_store(
        &mut self,
        op: TmaStoreOp,
        args: &[Lanes],
        mask: &Mask,
        e: &'m Expr,
    ) -> Result<Lanes> {
        let [map, row, col, src] = args else {
            return Err(self.malformed(e.span, "tma_store without four operands"));
        };
        for t in mask.lanes() {
            let (tm, encoded) = self.checked_map(map[t], "tma_store", e)?;
            // The checker sees a kernel's map's view, not the view behind a function's map.
            let view = &self.kernel_fn().vars[tm.param.0 as usize];
            if !matches!(view.ty, Type::View { mutable: true, .. }) {
                let what = format!(
                    "a tma_store writes through it, but `{}` is not a `global mut` view",
                    view.name
                );
                let map = tm.name.clone();
                return Err(self.error_at(e.span, ErrorKind::TensorMap { map, what }));
            }
            let s = self.shared_box(src[t], tm, BoxCopy::Store, t, e)?;
            let who = self.touch(t, e.span);
            let name = match op {
                TmaStoreOp::Write => "tma_store",
                TmaStoreOp::Add => "tma_store_add",
            };
            let bytes = self
                .mem
                .read_async_proxy(s, tm.box_bytes() as usize, who, name)
                .map_err(|f| self.fault(f, t, e.span))?;
            self.write_box(tm, encoded, [row[t], col[t]], (op, &bytes), t, e)?;
            self.tma_stores[t].issue(StoreSource { src: s, bytes, who });
        }
        Ok(vec![UNSET; self.threads])
    }

    /// `tma_store_commit()`: each active thread's pending stores become a bulk group.
    pub(crate) fn tma_store_commit(&mut self, mask: &Mask) -> Lanes {
        for t in mask.lanes() {
            self.tma_stores[t].commit();
        }
        vec![UNSET; self.threads]
    }

    /// `tma_store_wait(n)`: the stores of each active thread's bulk groups but the newest `n`
    /// are done reading their sources, which must hold what they read at issue.
    pub(crate) fn tma_store_wait(&mut self, n: u8, mask: &Mask, e: &'m Expr) -> Result<Lanes> {
        for t in mask.lanes() {
            for store in self.tma_stores[t].complete(usize::from(n)) {
                let changed = self
                    .mem
                    .first_change(store.src, &store.bytes)
                    .map_err(|f| self.fault(f, t, e.span))?;
                let Some(byte) = changed else {
                    continue;
                };
                let Region::Shared(array) = store.src.region else {
                    unreachable!("tma_store sources are shared")
                };
                let shared = &self.kernel_fn().shared[array];
                let index = (store.src.offset as u64 + byte as u64) / u64::from(shared.elem.size());
                return Err(self.error_at(
                    e.span,
                    ErrorKind::TmaStoreSourceOverwritten {
                        thread: self.thread_id(t),
                        store: Location::new(store.who.site, self.sources),
                        array: shared.name.clone(),
                        index,
                    },
                ));
            }
        }
        Ok(vec![UNSET; self.threads])
    }

    /// The threads of `mask` exit at `span`: the TMA may read none of their stores' sources
    /// any more, which only a `tma_store_wait` covering them says.
    pub(crate) fn check_stores_retired(&self, mask: &Mask, span: Span) -> Result<()> {
        for t in mask.lanes() {
            if let Some((store, committed)) = self.tma_stores[t].oldest() {
                return Err(self.error_at(
                    span,
                    ErrorKind::TmaStoreUnfinished {
                        thread: self.thread_id(t),
                        store: Location::new(store.who.site, self.sources),
                        committed,
                    },
                ));
            }
        }
        Ok(())
    }
}

/// Why `cuTensorMapEncodeTiled` would refuse a tensor of `rows` x `cols` elements of `size`
/// bytes: it needs non-empty extents and rows of a multiple of 16 bytes.
fn extent_problem(rows: u64, cols: u64, size: u32) -> Option<String> {
    let row_bytes = cols * u64::from(size);
    if rows == 0 || cols == 0 {
        Some(format!(
            "{rows} x {cols} elements: the driver encodes no empty tensor"
        ))
    } else if !row_bytes.is_multiple_of(16) {
        Some(format!(
            "rows of {cols} elements ({row_bytes} bytes): TMA needs rows of a multiple of 16 bytes"
        ))
    } else {
        None
    }
}

/// `tma_store_add`'s elements: each of `row` (little-endian f32, f16, i32 or u32, as the checker
/// allows) plus the one `held` at its place; f16 sums round once, integers wrap, as the
/// hardware's do.
fn add_elements(elem: Scalar, row: &mut [u8], held: &[u8]) {
    if elem == Scalar::F16 {
        for (sum, old) in row.chunks_exact_mut(2).zip(held.chunks_exact(2)) {
            let [a, b] = [&*sum, old].map(|v| f16::from_le_bytes([v[0], v[1]]).to_f32());
            sum.copy_from_slice(&f16::from_f32(a + b).to_le_bytes());
        }
        return;
    }
    for (sum, old) in row.chunks_exact_mut(4).zip(held.chunks_exact(4)) {
        let (a, b) = (
            <[u8; 4]>::try_from(&*sum).unwrap(),
            <[u8; 4]>::try_from(old).unwrap(),
        );
        let added = match elem {
            Scalar::F32 => (f32::from_le_bytes(a) + f32::from_le_bytes(b)).to_le_bytes(),
            _ => u32::from_le_bytes(a)
                .wrapping_add(u32::from_le_bytes(b))
                .to_le_bytes(),
        };
        sum.copy_from_slice(&added);
    }
}
