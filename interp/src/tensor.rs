//! Warp-wide tensor-core operations with the hardware's fragment layouts (PTX ISA, "Matrix
//! fragments for mma.m16n8k16 / mma.m16n8k32" and "ldmatrix"): lane `l` has group `g = l / 4`
//! and index `t = l % 4` in it; a 32-bit operand register packs `e` elements (2 for f16/bf16,
//! 4 for i8) and K is `8 e`.
//!
//! - A (16 x K, row-major), register r: row `g + 8 (r % 2)`, columns `t e + K/2 (r / 2) + j`.
//! - B (K x 8), register r: rows `t e + K/2 r + j`, column `g`.
//! - accumulator element i: row `g + 8 (i / 2)`, column `2 t + i % 2`.
//!
//! tf32 operands (f32 registers, `e` = 1, m16n8k8) follow the same formulas; the tensor cores
//! ignore the low 13 mantissa bits of each, so the interpreter clears them.

use zinc_dsl::ir::{Expr, Frag, FragRole, Type, VarId};

use crate::error::ErrorKind;
use crate::exec::{Lanes, Machine, Mask, Result, UNSET};
use crate::value::{FragValue, Pointer, Region, Value};

/// The mantissa bits of an f32 that a tf32 operand does not have.
const TF32_DROPPED: u32 = (1 << 13) - 1;

/// Bytes in a row of an ldmatrix 8x8 matrix of 16-bit units.
const ROW_BYTES: usize = 16;

/// Threads of a warpgroup, which issues `wgmma` together.
const WARPGROUP: usize = 128;

/// Bytes per B row in wgmma's 128-byte swizzle, and the period of its XOR pattern.
const SWIZZLE_ROW: i64 = 128;
const SWIZZLE_SPAN: u64 = 1024;

impl<'m> Machine<'m, '_> {
    /// The warps (first thread, thread range) that have an active thread.
    fn active_warps(&self, mask: &Mask) -> Vec<std::ops::Range<usize>> {
        (0..self.threads)
            .step_by(32)
            .map(|start| start..(start + 32).min(self.threads))
            .filter(|w| w.clone().any(|t| mask.get(t)))
            .collect()
    }

    /// A lane whose value a warp-wide operation needs but which has exited.
    fn exited_lane(&self, op: &str, t: usize, e: &Expr) -> crate::InterpError {
        self.error_at(
            e.span,
            ErrorKind::Unsupported {
                what: format!("{op} needs lane {} of the warp, which has exited", t % 32),
            },
        )
    }

    /// `ldmatrix.sync.aligned.m8n8.x{count}[.trans].b16`.
    pub(crate) fn ldmatrix(
        &mut self,
        count: u8,
        trans: bool,
        rows: &Lanes,
        mask: &Mask,
        e: &'m Expr,
    ) -> Result<Lanes> {
        self.check_converged(mask, "ldmatrix", e.span)?;
        let mut out = vec![UNSET; self.threads];
        for warp in self.active_warps(mask) {
            // data[i][r]: row r of matrix i, read from the address lane 8 i + r gave.
            let mut data = vec![[[0u8; ROW_BYTES]; 8]; usize::from(count)];
            for (i, matrix) in data.iter_mut().enumerate() {
                for (r, row) in matrix.iter_mut().enumerate() {
                    let t = warp.start + 8 * i + r;
                    if t >= warp.end || !mask.get(t) {
                        return Err(self.exited_lane("ldmatrix", t, e));
                    }
                    let ptr = self.pointer(rows[t], e.span)?;
                    if ptr.offset % ROW_BYTES as i64 != 0 {
                        return Err(self.error_at(
                            e.span,
                            ErrorKind::Misaligned {
                                op: "ldmatrix",
                                thread: self.thread_id(t),
                                offset: ptr.offset,
                                align: ROW_BYTES as u32,
                            },
                        ));
                    }
                    let who = self.touch(t, e.span);
                    let bytes = self
                        .mem
                        .read(ptr, ROW_BYTES, who)
                        .map_err(|f| self.fault(f, t, e.span))?;
                    row.copy_from_slice(&bytes);
                }
            }
            for t in warp.filter(|&t| mask.get(t)) {
                let l = t % 32;
                let regs: Vec<u32> = data
                    .iter()
                    .map(|m| {
                        let unit = |row: usize, col: usize| {
                            u32::from(u16::from_le_bytes([m[row][2 * col], m[row][2 * col + 1]]))
                        };
                        match trans {
                            // Column l/4 of rows 2 (l%4) and 2 (l%4) + 1.
                            true => unit(2 * (l % 4), l / 4) | unit(2 * (l % 4) + 1, l / 4) << 16,
                            // Units 2 (l%4) and 2 (l%4) + 1 of row l/4.
                            false => unit(l / 4, 2 * (l % 4)) | unit(l / 4, 2 * (l % 4) + 1) << 16,
                        }
                    })
                    .collect();
                out[t] = match &e.ty {
                    Type::Frag(frag) => {
                        let mut bits = [0; 4];
                        bits[..regs.len()].copy_from_slice(&regs);
                        Value::Frag(FragValue {
                            frag: *frag,
                            regs: bits,
                        })
                    }
                    reg => Value::from_reg(reg, regs[0]),
                };
            }
        }
        Ok(out)
    }

    /// `wgmma.mma_async` m64nNk16 (f16 in, f32 accumulators; `ir::Builtin::Wgmma`) by every
    /// warpgroup with an active thread, all of whose 128 threads must be active and give one B
    /// address (and one A address, for A in shared memory). It runs at once: a kernel that reads the accumulators or rewrites A or B before
    /// its `wgmma_wait` gets the finished result here, and undefined values on the GPU.
    /// Products are exact and summed in f64, added to the accumulator with one rounding.
    pub(crate) fn wgmma(
        &mut self,
        (acc, first, n): (VarId, u32, u16),
        args: &[Lanes],
        mask: &Mask,
        e: &'m Expr,
    ) -> Result<Lanes> {
        let [a, b] = args else {
            return Err(self.malformed(e.span, "wgmma without A and B"));
        };
        let Type::Array { dims, .. } = &self.frame_fn().vars[acc.0 as usize].ty else {
            return Err(self.malformed(e.span, "wgmma into a non-array"));
        };
        let len = dims.iter().product::<u32>();
        let cols = 8 * usize::from(n);
        let olds = (first..first + u32::from(n))
            .map(|j| self.element(acc, j))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| self.malformed(e.span, "wgmma into an undefined array"))?;
        let mut news = olds.clone();
        for start in (0..self.threads).step_by(WARPGROUP) {
            if !(start..(start + WARPGROUP).min(self.threads)).any(|t| mask.get(t)) {
                continue;
            }
            if let Some(t) = (start..start + WARPGROUP).find(|&t| t >= self.threads || !mask.get(t))
            {
                let what =
                    format!(
                    "wgmma by part of a warpgroup: thread {t} of the block ({}) does not take part",
                    if t >= self.threads { "past the block" } else { "inactive or exited" }
                );
                return Err(self.error_at(e.span, ErrorKind::Unsupported { what }));
            }
            // mb[r][k]: B row r (an output column), k 0..16.
            let mb = self.wgmma_shared_rows(b, "B", start, cols, e)?;
            // ma[m][k]: A row m. From shared memory, laid out as B; from registers, warp w of
            // the group gives rows 16 w.. as an mma A fragment.
            let ma = if let Value::Ptr(_) = a[start] {
                self.wgmma_shared_rows(a, "A", start, 64, e)?
            } else {
                let mut ma = vec![[0f64; 16]; 64];
                for (t, &fa) in a.iter().enumerate().skip(start).take(WARPGROUP) {
                    let Value::Frag(fa) = fa else {
                        return Err(self.malformed(e.span, "wgmma of a non-fragment A"));
                    };
                    let (w, g, q) = ((t - start) / 32, t % 32 / 4, t % 4);
                    for r in 0..4 {
                        for j in 0..2 {
                            ma[16 * w + g + 8 * (r % 2)][2 * q + 8 * (r / 2) + j] =
                                fa.element(r, j);
                        }
                    }
                }
                ma
            };
            for t in start..start + WARPGROUP {
                let (w, g, q) = ((t - start) / 32, t % 32 / 4, t % 4);
                for (j, new) in news.iter_mut().enumerate() {
                    let Value::Frag(old) = olds[j][t] else {
                        return Err(self.malformed(e.span, "wgmma into a non-fragment"));
                    };
                    let mut regs = [0u32; 4];
                    for (i, reg) in regs.iter_mut().enumerate() {
                        let (row, col) = (16 * w + g + 8 * (i / 2), 8 * j + 2 * q + i % 2);
                        let dot: f64 = (0..16).map(|k| ma[row][k] * mb[col][k]).sum();
                        *reg = ((old.element(i, 0) + dot) as f32).to_bits();
                    }
                    new[t] = Value::Frag(FragValue {
                        frag: old.frag,
                        regs,
                    });
                }
            }
        }
        for (j, new) in news.iter().enumerate() {
            self.set_element(acc, len, Some(first + j as u32), new, mask);
        }
        Ok(vec![UNSET; self.threads])
    }

    /// The `rows` x 16 f16 operand of the warpgroup from thread `start` that `ptrs` points to in
    /// shared memory, K-major in the 128-byte swizzle: row r's 16 elements from byte 128 r on,
    /// each address XORed with ((address >> 7) % 8) << 4. Every thread of the group must give
    /// the same address, 16-byte aligned in a 1024-byte aligned array. Thread `start` reads it
    /// through the async proxy, which needs the stores it reads fenced for it.
    fn wgmma_shared_rows(
        &mut self,
        ptrs: &Lanes,
        operand: &str,
        start: usize,
        rows: usize,
        e: &'m Expr,
    ) -> Result<Vec<[f64; 16]>> {
        let base = self.pointer(ptrs[start], e.span)?;
        for &p in ptrs.iter().skip(start).take(WARPGROUP) {
            if self.pointer(p, e.span)? != base {
                let what = format!("wgmma with different {operand} addresses in one warpgroup");
                return Err(self.error_at(e.span, ErrorKind::Unsupported { what }));
            }
        }
        let aligned = match base.region {
            Region::Shared(i) => self.kernel_fn().shared[i].align() >= SWIZZLE_SPAN,
            Region::Global(_) => false,
        };
        if !aligned || base.offset % 16 != 0 {
            return Err(self.error_at(
                e.span,
                ErrorKind::Misaligned {
                    op: "wgmma (A or B in the 128-byte swizzle: a `swizzle`d shared array of 64 f16 per row)",
                    thread: self.thread_id(start),
                    offset: base.offset,
                    align: SWIZZLE_SPAN as u32,
                },
            ));
        }
        let mut m = vec![[0f64; 16]; rows];
        for (r, row) in m.iter_mut().enumerate() {
            for (k, x) in row.iter_mut().enumerate() {
                let at = base.offset + r as i64 * SWIZZLE_ROW + 2 * k as i64;
                let ptr = Pointer {
                    region: base.region,
                    offset: at ^ (((at >> 7) & 7) << 4),
                };
                let who = self.touch(start, e.span);
                let bytes = self
                    .mem
                    .read_async_proxy(ptr, 2, who, "wgmma")
                    .map_err(|f| self.fault(f, start, e.span))?;
                *x = f64::from(half::f16::from_le_bytes([bytes[0], bytes[1]]));
            }
        }
        Ok(m)
    }

    /// `mma.sync.aligned` (m16n8k16 f16/bf16 -> f32, m16n8k32 i8 -> i32, m16n8k8 tf32 -> f32)
    /// by each active warp.
    /// Float products are exact and summed in f64, then added to the accumulator with one
    /// rounding to f32 (the tensor cores round differently in the last bits); integers are exact
    /// and wrap at 32 bits.
    pub(crate) fn mma(&mut self, args: &[Lanes], mask: &Mask, e: &'m Expr) -> Result<Lanes> {
        self.check_converged(mask, "mma", e.span)?;
        let [a, b, c] = args else {
            return Err(self.malformed(e.span, "mma without three fragments"));
        };
        let Type::Frag(acc_frag) = e.ty else {
            return Err(self.malformed(e.span, "mma with a non-fragment result"));
        };
        let mut out = vec![UNSET; self.threads];
        for warp in self.active_warps(mask) {
            let frag = |v: &Lanes, t: usize| match v[t] {
                Value::Frag(f) => Ok(f),
                _ => Err(self.malformed(e.span, "mma of a non-fragment")),
            };
            let mut lanes = Vec::with_capacity(32);
            for t in warp.start..warp.start + 32 {
                if t >= warp.end || !mask.get(t) {
                    return Err(self.exited_lane("mma", t, e));
                }
                lanes.push((frag(a, t)?, frag(b, t)?, frag(c, t)?));
            }
            let elem = lanes[0].0.frag.elem;
            let per_reg = 4 / elem.size() as usize;
            let operand = |f: &FragValue, r: usize, j: usize| match elem {
                zinc_dsl::ir::Scalar::F32 => f64::from(f32::from_bits(f.regs[r] & !TF32_DROPPED)),
                _ => f.element(r, j),
            };
            let k = Frag::k(elem) as usize;
            let mut ma = vec![[0f64; 32]; 16];
            let mut mb = vec![[0f64; 8]; 32];
            let mut mc = [[0f64; 8]; 16];
            for (l, (fa, fb, fc)) in lanes.iter().enumerate() {
                let (g, t) = (l / 4, l % 4);
                for r in 0..4 {
                    for j in 0..per_reg {
                        let col = t * per_reg + k / 2 * (r / 2) + j;
                        ma[g + 8 * (r % 2)][col] = operand(fa, r, j);
                    }
                    mc[g + 8 * (r / 2)][2 * t + r % 2] = fc.element(r, 0);
                }
                for r in 0..2 {
                    for j in 0..per_reg {
                        mb[t * per_reg + k / 2 * r + j][g] = operand(fb, r, j);
                    }
                }
            }
            for (l, t) in (warp.start..warp.end).enumerate() {
                let (g, q) = (l / 4, l % 4);
                let mut regs = [0u32; 4];
                for (i, reg) in regs.iter_mut().enumerate() {
                    let (row, col) = (g + 8 * (i / 2), 2 * q + i % 2);
                    let dot: f64 = (0..k).map(|kk| ma[row][kk] * mb[kk][col]).sum();
                    *reg = match acc_frag.elem.is_float() {
                        true => ((mc[row][col] + dot) as f32).to_bits(),
                        // |dot| <= 32 * 128 * 128 fits f64 exactly; the sum wraps like IMMA.
                        false => (mc[row][col] as i64 + dot as i64) as i32 as u32,
                    };
                }
                out[t] = Value::Frag(FragValue {
                    frag: Frag {
                        role: FragRole::Acc,
                        elem: acc_frag.elem,
                    },
                    regs,
                });
            }
        }
        Ok(out)
    }
}
