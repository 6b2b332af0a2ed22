//! Built-in operations (math, shuffles, votes, atomics) and the table of LLVM NVVM intrinsics the
//! interpreter knows.
//!
//! Math functions are computed in f64 and rounded once to the operand type. The GPU uses
//! approximate instructions for several of them (`ex2.approx`, `lg2.approx`, `sin.approx`,
//! `rsqrt.approx`, ...), so results differ in the last bits: compare with a tolerance.

use zinc_dsl::ir::{
    flat_index, AtomicOp, Axis, BinOp, Builtin, Expr, ExprKind, MathFn, Scalar, ShuffleMode,
    Special, Type, VoteMode,
};

use crate::error::ErrorKind;
use crate::exec::{Lanes, Machine, Mask, Result, WgmmaUse, UNSET};
use crate::value::{ArithError, Value, Vector};

type Arith = std::result::Result<Value, ArithError>;

impl<'m> Machine<'m, '_> {
    pub(crate) fn builtin(
        &mut self,
        b: Builtin,
        args: &'m [Expr],
        e: &'m Expr,
        mask: &Mask,
    ) -> Result<Lanes> {
        let vals = self.eval_args(args, mask)?;
        let arg = |i: usize| -> Result<&Lanes> {
            vals.get(i)
                .ok_or_else(|| self.malformed(e.span, format!("{b:?} with too few arguments")))
        };
        match b {
            Builtin::Math(f) => {
                let x = arg(0)?;
                self.map_lanes(mask, |t| {
                    self.arith(lanewise(&[x[t]], |v| math(f, v[0])), t, e.span)
                })
            }
            Builtin::Max | Builtin::Min => {
                let (x, y) = (arg(0)?, arg(1)?);
                let max = b == Builtin::Max;
                self.map_lanes(mask, |t| {
                    self.arith(
                        lanewise(&[x[t], y[t]], |v| min_max(max, v[0], v[1])),
                        t,
                        e.span,
                    )
                })
            }
            Builtin::Fma => {
                let (x, y, z) = (arg(0)?, arg(1)?, arg(2)?);
                self.map_lanes(mask, |t| {
                    let r = lanewise(&[x[t], y[t], z[t]], |v| fma(v[0], v[1], v[2]));
                    self.arith(r, t, e.span)
                })
            }
            Builtin::Shuffle(mode) => self.shuffle(mode, arg(0)?, arg(1)?, mask, e),
            Builtin::Vote(mode) => self.vote(mode, arg(0)?, mask, e),
            Builtin::Atomic(op) => self.atomic(Some(op), &vals, mask, e),
            Builtin::AtomicCas => self.atomic(None, &vals, mask, e),
            Builtin::Mma => self.mma(&vals, mask, e),
            Builtin::Ldmatrix { count, trans } => self.ldmatrix(count, trans, arg(0)?, mask, e),
            Builtin::CpAsync { bytes } => self.cp_async(bytes, &vals, mask, e),
            Builtin::CpAsyncCommit => Ok(self.cp_async_commit(mask)),
            Builtin::CpAsyncWait(n) => self.cp_async_wait(n, mask, e),
            Builtin::Prmt => {
                let (a, b, s) = (arg(0)?, arg(1)?, arg(2)?);
                self.map_lanes(mask, |t| {
                    let u = |v: Value| v.reg_bits();
                    Ok(Value::U32(prmt(u(a[t]), u(b[t]), u(s[t]))))
                })
            }
            Builtin::Lop3(lut) => {
                let (a, b, c) = (arg(0)?, arg(1)?, arg(2)?);
                self.map_lanes(mask, |t| {
                    let u = |v: Value| v.reg_bits();
                    Ok(Value::U32(lop3(u(a[t]), u(b[t]), u(c[t]), lut)))
                })
            }
            Builtin::Wgmma { acc, first, n } => {
                let out = self.wgmma((acc, first, n), &vals, mask, e)?;
                // Until a wait covers it, the accumulators and an A fragment held in a register
                // array are the MMA's (`check_wgmma_use`).
                let depth = self.depth();
                let accumulators = WgmmaUse {
                    depth,
                    var: acc,
                    elements: (first, first + u32::from(n)),
                    accumulator: true,
                };
                let a = match &args[0].kind {
                    ExprKind::Element { var, index } => {
                        let Type::Array { dims, .. } = &self.frame_fn().vars[var.0 as usize].ty
                        else {
                            return Err(self.malformed(e.span, "an element of a non-array"));
                        };
                        let flat = flat_index(dims, index);
                        Some(WgmmaUse {
                            depth,
                            var: *var,
                            elements: (flat, flat + 1),
                            accumulator: false,
                        })
                    }
                    _ => None,
                };
                self.wgmma.issue(std::iter::once(accumulators).chain(a));
                Ok(out)
            }
            // Blocks run one at a time, each thread's accesses in program order: every access is
            // already ordered as a fence orders it.
            Builtin::FenceGpu => Ok(vec![UNSET; self.threads]),
            // What the async proxy's reads may see (`Memory::read_async_proxy`).
            Builtin::FenceProxyAsync => {
                for t in mask.lanes() {
                    self.mem.fence_proxy_async(self.cluster_thread(t));
                }
                Ok(vec![UNSET; self.threads])
            }
            // A tma_store writes global memory at once (tma.rs), and threads run one at a time:
            // nothing for the global fence between the proxies to order.
            Builtin::FenceProxyAsyncGlobal => Ok(vec![UNSET; self.threads]),
            // Time is not modelled: a sleep changes no state.
            Builtin::Nanosleep => Ok(vec![UNSET; self.threads]),
            Builtin::SyncWarp => {
                self.check_converged(mask, "sync_warp", e.span)?;
                Ok(vec![UNSET; self.threads])
            }
            // The MMAs ran at once; the fences have nothing to order, the groups only say which
            // registers are still the MMAs'.
            Builtin::WgmmaFence | Builtin::WgmmaCommit | Builtin::WgmmaWait(_) => {
                self.check_converged(mask, "wgmma_fence/commit/wait", e.span)?;
                match b {
                    Builtin::WgmmaCommit => self.wgmma.commit(),
                    Builtin::WgmmaWait(n) => self.wgmma.wait(usize::from(n)),
                    _ => {}
                }
                Ok(vec![UNSET; self.threads])
            }
            // Register budgets are the GPU's business: nothing to do here.
            Builtin::SetMaxNReg { .. } => Ok(vec![UNSET; self.threads]),
            Builtin::MbarrierInit => self.mbarrier_init(&vals, mask, e),
            Builtin::MbarrierExpectTx => self.mbarrier_expect_tx(&vals, mask, e),
            Builtin::MbarrierArrive => self.mbarrier_arrive(&vals, mask, e),
            Builtin::MbarrierWait => self.mbarrier_wait(&vals, mask, e),
            Builtin::TmaLoad => self.tma_load(&vals, mask, e),
            Builtin::TmaPrefetch => self.tma_prefetch(&vals, mask, e),
            Builtin::TmaLoadMulticast => self.tma_load_multicast(&vals, mask, e),
            Builtin::ClusterRank => self.map_lanes(mask, |_| Ok(Value::U32(self.rank as u32))),
            // Time is not modelled: the steps run so far stand in for it (they only grow).
            Builtin::Timer(_) => self.map_lanes(mask, |_| Ok(Value::U64(self.steps))),
            Builtin::ClusterSync => self.cluster_sync(mask, e.span),
            Builtin::MbarrierArriveCluster => self.mbarrier_arrive_cluster(&vals, mask, e),
            Builtin::TmaStore(op) => self.tma_store(op, &vals, mask, e),
            Builtin::TmaStoreCommit => Ok(self.tma_store_commit(mask)),
            // The writes landed at issue; what is left to check is each retired store's source.
            Builtin::TmaStoreWait(n) | Builtin::TmaStoreDone(n) => self.tma_store_wait(n, mask, e),
            Builtin::Dp4a { unsigned_a } => {
                let (a, b, c) = (arg(0)?, arg(1)?, arg(2)?);
                self.map_lanes(mask, |t| {
                    let u = |v: Value| v.reg_bits();
                    let sum = dp4a(u(a[t]), u(b[t]), u(c[t]) as i32, unsigned_a);
                    Ok(Value::I32(sum))
                })
            }
        }
    }

    fn eval_args(&mut self, args: &'m [Expr], mask: &Mask) -> Result<Vec<Lanes>> {
        args.iter().map(|a| self.eval(a, mask)).collect()
    }

    /// `shfl.sync` with a full member mask, clamp 31: a lane whose source is out of range keeps
    /// its own value (PTX); reading a lane that has exited is undefined on the GPU and an error
    /// here.
    fn shuffle(
        &self,
        mode: ShuffleMode,
        value: &Lanes,
        operand: &Lanes,
        mask: &Mask,
        e: &Expr,
    ) -> Result<Lanes> {
        self.check_converged(mask, "shuffle", e.span)?;
        self.map_lanes(mask, |t| {
            let lane = (t % 32) as i64;
            let b = operand[t]
                .as_int()
                .ok_or_else(|| self.malformed(e.span, "a non-integer shuffle operand"))?
                as i64;
            let source = match mode {
                ShuffleMode::Up => lane - b,
                ShuffleMode::Down => lane + b,
                ShuffleMode::Xor => lane ^ b,
                ShuffleMode::Idx => b & 31,
            };
            if !(0..32).contains(&source) {
                return Ok(value[t]);
            }
            let src = t - lane as usize + source as usize;
            if src >= self.threads || self.exited.get(src) {
                return Err(self.error_at(
                    e.span,
                    ErrorKind::ShuffleFromExited {
                        thread: self.thread_id(t),
                        lane: source as u32,
                    },
                ));
            }
            Ok(value[src])
        })
    }

    /// `vote.sync` with a full member mask; exited lanes do not vote (their ballot bit is 0).
    fn vote(&self, mode: VoteMode, pred: &Lanes, mask: &Mask, e: &Expr) -> Result<Lanes> {
        self.check_converged(mask, "vote", e.span)?;
        let mut ballots = vec![0u32; self.threads.div_ceil(32)];
        for t in mask.lanes() {
            if pred[t] == Value::Bool(true) {
                ballots[t / 32] |= 1 << (t % 32);
            }
        }
        self.map_lanes(mask, |t| {
            let warp = t / 32;
            let voters = (warp * 32..(warp * 32 + 32).min(self.threads))
                .filter(|&u| mask.get(u))
                .fold(0u32, |m, u| m | 1 << (u % 32));
            let ballot = ballots[warp];
            Ok(match mode {
                VoteMode::All => Value::Bool(ballot == voters),
                VoteMode::Any => Value::Bool(ballot != 0),
                VoteMode::Ballot => Value::U32(ballot),
            })
        })
    }

    /// Atomics (`op` None: compare-and-swap), one thread after another in thread order.
    fn atomic(
        &mut self,
        op: Option<AtomicOp>,
        vals: &[Lanes],
        mask: &Mask,
        e: &Expr,
    ) -> Result<Lanes> {
        let arity = if op.is_some() { 2 } else { 3 };
        if vals.len() != arity {
            return Err(self.malformed(e.span, "an atomic with the wrong number of arguments"));
        }
        let mut out = vec![UNSET; self.threads];
        for t in mask.lanes() {
            let ptr = self.pointer(vals[0][t], e.span)?;
            self.check_aligned(ptr, &e.ty, "an atomic", t, e.span)?;
            let (v, new) = (vals[1][t], vals[arity - 1][t]);
            let apply = |old: Value| match op {
                Some(AtomicOp::Add) => Value::binary(BinOp::Add, old, v),
                Some(AtomicOp::Max) => min_max(true, old, v),
                Some(AtomicOp::Min) => min_max(false, old, v),
                Some(AtomicOp::And) => Value::binary(BinOp::And, old, v),
                Some(AtomicOp::Or) => Value::binary(BinOp::Or, old, v),
                Some(AtomicOp::Xor) => Value::binary(BinOp::Xor, old, v),
                Some(AtomicOp::Exch) => Ok(v),
                // Compares bits, as `atom.cas.b32` does.
                None => Ok(if old.to_bits() == v.to_bits() {
                    new
                } else {
                    old
                }),
            };
            let who = self.touch(t, e.span);
            let old = self
                .mem
                .update(ptr, &e.ty, who, apply)
                .map_err(|f| self.fault(f, t, e.span))?;
            out[t] = self.arith(old, t, e.span)?;
        }
        Ok(out)
    }

    /// The intrinsics the interpreter implements; any other is an `Unsupported` error.
    pub(crate) fn intrinsic(
        &mut self,
        name: &str,
        args: &'m [Expr],
        e: &'m Expr,
        mask: &Mask,
    ) -> Result<Lanes> {
        if let Some(reg) = name.strip_prefix("llvm.nvvm.read.ptx.sreg.") {
            if reg == "warpsize" {
                return self.map_lanes(mask, |_| Ok(Value::U32(32)));
            }
            if let Some(s) = special_register(reg) {
                return self.map_lanes(mask, |t| Ok(Value::U32(self.special(s, t))));
            }
        }
        match name {
            "llvm.nvvm.barrier0" => {
                self.barrier(mask, e.span)?;
                return Ok(vec![UNSET; self.threads]);
            }
            "llvm.nvvm.membar.cta" | "llvm.nvvm.membar.gl" | "llvm.nvvm.membar.sys" => {
                return Ok(vec![UNSET; self.threads]);
            }
            // `__syncwarp()`: only the full-warp form, so every live lane must arrive. The
            // interpreter runs a warp's lanes in step, so there is nothing else to do.
            "llvm.nvvm.bar.warp.sync" => {
                let members = self.eval_args(args, mask)?;
                let full = members.len() == 1
                    && (0..self.threads)
                        .filter(|&t| mask.get(t))
                        .all(|t| members[0][t] == Value::U32(u32::MAX));
                if !full {
                    return Err(self.error_at(
                        e.span,
                        ErrorKind::Unsupported {
                            what: "`llvm.nvvm.bar.warp.sync` with a partial member mask"
                                .to_string(),
                        },
                    ));
                }
                self.check_converged(mask, "bar.warp.sync", e.span)?;
                return Ok(vec![UNSET; self.threads]);
            }
            _ => {}
        }
        let Some(op) = intrinsic_op(name) else {
            return Err(self.error_at(
                e.span,
                ErrorKind::Unsupported {
                    what: format!("intrinsic `{name}`"),
                },
            ));
        };
        let vals = self.eval_args(args, mask)?;
        if vals.len() != op.arity() {
            return Err(self.malformed(e.span, format!("`{name}` with {} arguments", vals.len())));
        }
        let ftz = name.contains(".ftz.");
        let result = self.scalar_of(e)?;
        self.map_lanes(mask, |t| {
            let xs: Vec<Value> = vals.iter().map(|v| flush(ftz, v[t])).collect();
            let r = op.apply(&xs, result).map(|v| flush(ftz, v));
            self.arith(r, t, e.span)
        })
    }
}

fn special_register(reg: &str) -> Option<Special> {
    if reg == "laneid" {
        return Some(Special::Lane);
    }
    let (kind, axis) = reg.split_once('.')?;
    let axis = match axis {
        "x" => Axis::X,
        "y" => Axis::Y,
        "z" => Axis::Z,
        _ => return None,
    };
    Some(match kind {
        "tid" => Special::ThreadIdx(axis),
        "ntid" => Special::BlockDim(axis),
        "ctaid" => Special::BlockIdx(axis),
        "nctaid" => Special::GridDim(axis),
        _ => return None,
    })
}

/// What a known intrinsic computes.
enum IntrinsicOp {
    /// A float function of one argument, computed in f64 and rounded to the result type.
    Float(fn(f64) -> f64),
    Fma,
    MinMax {
        max: bool,
    },
    Popc,
    Clz,
    Brev,
    MulHi,
}

impl IntrinsicOp {
    fn arity(&self) -> usize {
        match self {
            IntrinsicOp::Fma => 3,
            IntrinsicOp::MinMax { .. } | IntrinsicOp::MulHi => 2,
            _ => 1,
        }
    }

    fn apply(&self, xs: &[Value], result: Scalar) -> Arith {
        let int = |v: Value| v.as_int().ok_or(ArithError::Mismatch);
        let width = |v: Value| v.scalar().map_or(0, |s| s.size() * 8);
        match self {
            IntrinsicOp::Float(f) => {
                let x = xs[0].as_f64().ok_or(ArithError::Mismatch)?;
                Ok(Value::from_f64(result, f(x)))
            }
            IntrinsicOp::Fma => fma(xs[0], xs[1], xs[2]),
            IntrinsicOp::MinMax { max } => min_max(*max, xs[0], xs[1]),
            IntrinsicOp::Popc => Ok(Value::from_int(
                result,
                xs[0].to_bits().count_ones() as i128,
            )),
            IntrinsicOp::Clz => {
                let w = width(xs[0]);
                let lz = xs[0].to_bits().leading_zeros() - (64 - w);
                Ok(Value::from_int(result, lz as i128))
            }
            IntrinsicOp::Brev => {
                let w = width(xs[0]);
                Ok(Value::from_int(
                    result,
                    (xs[0].to_bits().reverse_bits() >> (64 - w)) as i128,
                ))
            }
            IntrinsicOp::MulHi => {
                let product = int(xs[0])?.wrapping_mul(int(xs[1])?);
                Ok(Value::from_int(result, product >> width(xs[0])))
            }
        }
    }
}

fn intrinsic_op(name: &str) -> Option<IntrinsicOp> {
    use IntrinsicOp::*;
    let base = name.strip_prefix("llvm.nvvm.")?.replace(".ftz", "");
    Some(match base.as_str() {
        "ex2.approx.f" | "ex2.approx.d" => Float(f64::exp2),
        "lg2.approx.f" | "lg2.approx.d" => Float(f64::log2),
        "sin.approx.f" => Float(f64::sin),
        "cos.approx.f" => Float(f64::cos),
        "sqrt.f" | "sqrt.rn.f" | "sqrt.approx.f" | "sqrt.rn.d" => Float(f64::sqrt),
        "rsqrt.approx.f" | "rsqrt.approx.d" => Float(|x| 1.0 / x.sqrt()),
        "rcp.rn.f" | "rcp.approx.f" | "rcp.rn.d" | "rcp.approx.d" => Float(f64::recip),
        "fma.rn.f" | "fma.rn.d" => Fma,
        "fmax.f" | "fmax.d" => MinMax { max: true },
        "fmin.f" | "fmin.d" => MinMax { max: false },
        "popc.i" | "popc.ll" => Popc,
        "clz.i" | "clz.ll" => Clz,
        "brev32" | "brev64" => Brev,
        "mulhi.i" | "mulhi.ui" | "mulhi.ll" | "mulhi.ull" => MulHi,
        _ => return None,
    })
}

/// `f` on scalars, or lane by lane on vectors (math, `max`, `min` and `fma` are lane-wise).
fn lanewise(args: &[Value], f: impl Fn(&[Value]) -> Arith) -> Arith {
    let Value::Vector(first) = args[0] else {
        return f(args);
    };
    let lane = |a: &Value, i: usize| match a {
        Value::Vector(v) if v.len() == first.len() => Ok(v.get(i)),
        _ => Err(ArithError::Mismatch),
    };
    let mut lanes = Vec::with_capacity(first.len());
    for i in 0..first.len() {
        let scalars = args
            .iter()
            .map(|a| lane(a, i))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        lanes.push(f(&scalars)?);
    }
    Vector::new(&lanes)
        .map(Value::Vector)
        .ok_or(ArithError::Mismatch)
}

/// PTX `prmt.b32` (default mode): result byte i is byte `s_i & 7` of the 8 bytes `b:a`
/// (a is bytes 0-3), where `s_i` is nibble i of the selector; with bit 3 of `s_i` set the
/// selected byte's sign bit fills the result byte.
pub(crate) fn prmt(a: u32, b: u32, selector: u32) -> u32 {
    let bytes = (u64::from(b) << 32 | u64::from(a)).to_le_bytes();
    (0..4).fold(0, |out, i| {
        let s = selector >> (4 * i) & 0xf;
        let byte = bytes[(s & 7) as usize];
        let byte = match s & 8 != 0 {
            true => ((byte as i8) >> 7) as u8,
            false => byte,
        };
        out | u32::from(byte) << (8 * i)
    })
}

/// PTX `lop3.b32`: each result bit is bit `4 a + 2 b + c` of the truth table.
pub(crate) fn lop3(a: u32, b: u32, c: u32, lut: u8) -> u32 {
    (0..32).fold(0, |out, i| {
        let index = (a >> i & 1) << 2 | (b >> i & 1) << 1 | (c >> i & 1);
        out | u32::from(lut >> index & 1) << i
    })
}

/// PTX `dp4a.{s32,u32}.s32`: `c` plus the four products of byte i of `a` (unsigned when
/// `unsigned_a`, else signed) and byte i of `b` (signed), wrapping.
pub(crate) fn dp4a(a: u32, b: u32, c: i32, unsigned_a: bool) -> i32 {
    let (a, b) = (a.to_le_bytes(), b.to_le_bytes());
    (0..4).fold(c, |sum, i| {
        let x = match unsigned_a {
            true => i32::from(a[i]),
            false => i32::from(a[i] as i8),
        };
        sum.wrapping_add(x * i32::from(b[i] as i8))
    })
}

/// Flush an f32 subnormal to a zero of the same sign (the `.ftz` variants).
fn flush(ftz: bool, v: Value) -> Value {
    match v {
        Value::F32(x) if ftz && x.is_subnormal() => Value::F32(0.0f32.copysign(x)),
        v => v,
    }
}

/// `x`, or a zero of its sign where it is an f32 subnormal (or smaller).
fn flush_f32_range(x: f64) -> f64 {
    match x.abs() < f64::from(f32::MIN_POSITIVE) {
        true => 0.0f64.copysign(x),
        false => x,
    }
}

fn math(f: MathFn, v: Value) -> Arith {
    let s = v.scalar().ok_or(ArithError::Mismatch)?;
    if s.is_int() {
        return match (f, s.is_signed()) {
            // Wraps: abs(MIN) is MIN, as PTX `abs.s32` gives.
            (MathFn::Abs, true) => Ok(Value::from_int(s, v.as_int().unwrap_or(0).abs())),
            _ => Err(ArithError::Mismatch),
        };
    }
    let x = v.as_f64().ok_or(ArithError::Mismatch)?;
    let r = match f {
        // ex2.approx.ftz: results below 2^-126 flush to zero.
        MathFn::Exp => flush_f32_range(x.exp()),
        MathFn::Log => x.ln(),
        MathFn::Exp2 => flush_f32_range(x.exp2()),
        MathFn::Log2 => x.log2(),
        MathFn::Sqrt => x.sqrt(),
        MathFn::Rsqrt => 1.0 / x.sqrt(),
        // rcp.approx.ftz (f16 and bf16 through f32): f32 subnormal inputs and results flush
        // to zeros of their sign.
        MathFn::Rcp => flush_f32_range(1.0 / flush_f32_range(x)),
        MathFn::Tanh => x.tanh(),
        MathFn::Sin => x.sin(),
        MathFn::Cos => x.cos(),
        MathFn::Abs => x.abs(),
        MathFn::Floor => x.floor(),
        MathFn::Ceil => x.ceil(),
    };
    Ok(Value::from_f64(s, r))
}

/// `max`/`min`; for floats a NaN operand loses to a number (PTX `max.f32`, IEEE maxNum).
fn min_max(max: bool, a: Value, b: Value) -> Arith {
    let s = a
        .scalar()
        .filter(|&s| b.scalar() == Some(s))
        .ok_or(ArithError::Mismatch)?;
    if let (Some(x), Some(y)) = (a.as_f64(), b.as_f64()) {
        return Ok(Value::from_f64(s, if max { x.max(y) } else { x.min(y) }));
    }
    let (x, y) = (
        a.as_int().ok_or(ArithError::Mismatch)?,
        b.as_int().ok_or(ArithError::Mismatch)?,
    );
    Ok(Value::from_int(s, if max { x.max(y) } else { x.min(y) }))
}

/// `a * b + c` rounded once: f32 and f64 exactly; f16/bf16 through an f64 fma (the product is
/// exact there) and one final rounding.
fn fma(a: Value, b: Value, c: Value) -> Arith {
    match (a, b, c) {
        (Value::F32(x), Value::F32(y), Value::F32(z)) => Ok(Value::F32(x.mul_add(y, z))),
        _ => {
            let s = a
                .scalar()
                .filter(|s| s.is_float())
                .ok_or(ArithError::Mismatch)?;
            if b.scalar() != Some(s) || c.scalar() != Some(s) {
                return Err(ArithError::Mismatch);
            }
            let (x, y, z) = (a.as_f64(), b.as_f64(), c.as_f64());
            let (Some(x), Some(y), Some(z)) = (x, y, z) else {
                return Err(ArithError::Mismatch);
            };
            Ok(Value::from_f64(s, x.mul_add(y, z)))
        }
    }
}
