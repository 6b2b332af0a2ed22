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

use zinc_dsl::ir::{Expr, Frag, FragRole, Type};

use crate::error::ErrorKind;
use crate::exec::{Lanes, Machine, Mask, Result, UNSET};
use crate::value::{FragValue, Value};

/// The mantissa bits of an f32 that a tf32 operand does not have.
const TF32_DROPPED: u32 = (1 << 13) - 1;

/// Bytes in a row of an ldmatrix 8x8 matrix of 16-bit units.
const ROW_BYTES: usize = 16;

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
