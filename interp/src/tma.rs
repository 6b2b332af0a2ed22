//! Hopper's mbarriers and TMA tensor copies (`tma_load`, `cp.async.bulk.tensor.2d`; `tma_prefetch`
//! only checks its map).
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

use std::collections::HashMap;

use zinc_dsl::ir::{Expr, Function, FunctionKind, Scalar, TensorMap, Type};

use crate::error::ErrorKind;
use crate::exec::{Lanes, Machine, Mask, Result, UNSET};
use crate::memory::TmaGuard;
use crate::value::{Pointer, Region, Value};

/// Where an mbarrier lives: shared array and byte offset.
pub(crate) type BarrierKey = (usize, i64);

/// The block's mbarriers, by address.
#[derive(Default)]
pub(crate) struct Mbarriers {
    bars: HashMap<BarrierKey, Mbarrier>,
    /// Ids handed out so far; each `mbarrier_init` takes a fresh one, so that the phases of a
    /// re-initialized barrier are not confused with the old ones.
    inits: u32,
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
            let id = self.mbarriers.inits;
            self.mbarriers.inits += 1;
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
        self.mem.arrive(id, t);
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
                if self.suspend(Self::key(p), parity)? {
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
            self.mem.observe(id, t, completed);
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
        let kernel = self.kernel_fn();
        for t in mask.lanes() {
            let (tm, encoded) = self.checked_map(map[t], "tma_load", e)?;
            let EncodedMap {
                tensor,
                offset,
                rows,
                cols,
            } = encoded;
            let d = self.pointer(dst[t], e.span)?;
            let Region::Shared(array) = d.region else {
                return Err(self.malformed(e.span, "a tma_load destination outside shared memory"));
            };
            // A swizzled box needs the pattern's period: 8 rows of its width.
            let align = match tm.swizzle_bytes() {
                0 => 128,
                b => 8 * u64::from(b),
            };
            if d.offset % align as i64 != 0 || kernel.shared[array].align() < align {
                let op = match tm.swizzle_bytes() {
                    0 => "tma_load (the destination must be 128-byte aligned)",
                    _ => "tma_load (a swizzled box needs a destination aligned to 8 of its rows: a `swizzle`d array of rows of its width)",
                };
                return Err(self.error_at(
                    e.span,
                    ErrorKind::Misaligned {
                        op,
                        thread: self.thread_id(t),
                        offset: d.offset,
                        align: align as u32,
                    },
                ));
            }
            let data = self.read_box(tm, tensor, [offset, rows, cols], [row[t], col[t]], t, e)?;
            let p = self.mbarrier_at(bar[t], t, "tma_load", e)?;
            self.touch_mbarrier(p, t, e)?;
            let b = self.mbarrier("tma_load", p, t, e)?;
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
            self.complete_phase(p, t, e)?;
        }
        Ok(vec![UNSET; self.threads])
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

    /// The box of `tm` whose first element is `(row, col)`, as it lands in shared memory: row
    /// after row, each `box_cols` elements, in the map's swizzle when it has one (address bits
    /// 4.. XORed with the bits 7.. that count 128-byte lines, as many bits as the swizzle has
    /// 16-byte chunks per row: the layout of a `swizzle`d array of rows of that width), zero
    /// where the box leaves the tensor, which starts `offset` elements into `tensor`.
    fn read_box(
        &mut self,
        tm: &TensorMap,
        tensor: Value,
        [offset, rows, cols]: [u64; 3],
        [row, col]: [Value; 2],
        t: usize,
        e: &'m Expr,
    ) -> Result<Vec<u8>> {
        let mut src = self.pointer(tensor, e.span)?;
        let size = tm.elem.size() as usize;
        src.offset += (offset as usize * size) as i64;
        if src.offset % 16 != 0 {
            let map = tm.name.clone();
            let what = format!(
                "the tensor starts {} bytes into its buffer: TMA needs a 16-byte aligned start",
                src.offset
            );
            return Err(self.error_at(e.span, ErrorKind::TensorMap { map, what }));
        }
        let chunk_mask = (tm.swizzle_bytes() as usize / 16).saturating_sub(1);
        let (row, col) = (u64::from(row.reg_bits()), u64::from(col.reg_bits()));
        let mut data = vec![0u8; tm.box_bytes() as usize];
        // Columns of the box inside the tensor; the rest stay zero.
        let inside = cols.saturating_sub(col).min(u64::from(tm.box_cols)) as usize;
        for r in 0..u64::from(tm.box_rows) {
            if row + r >= rows || inside == 0 {
                continue;
            }
            let start = Pointer {
                region: src.region,
                offset: src.offset + (((row + r) * cols + col) as usize * size) as i64,
            };
            let who = self.touch(t, e.span);
            let bytes = self
                .mem
                .read(start, inside * size, who)
                .map_err(|f| self.fault(f, t, e.span))?;
            for (c, element) in bytes.chunks_exact(size).enumerate() {
                let mut at = (r as usize * tm.box_cols as usize + c) * size;
                at ^= ((at >> 7) & chunk_mask) << 4;
                data[at..at + size].copy_from_slice(element);
            }
        }
        Ok(data)
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
