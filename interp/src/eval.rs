//! Expressions, evaluated for all active threads of the block at once.

use zinc_dsl::diag::Span;
use zinc_dsl::ir::{flat_index, Axis, Expr, ExprKind, LogicalOp, Scalar, Space, Special, Type};

use crate::error::{ErrorKind, InterpError, Location, RaceAccess};
use crate::exec::{Lanes, Machine, Mask, Result, UNSET};
use crate::memory::{decode, encode, Access, Fault, Touch};
use crate::value::{ArithError, FragValue, Pointer, Region, Value, Vector};

impl<'m> Machine<'m, '_> {
    /// The value of `e` for each thread in `mask` ([`UNSET`] for the others).
    pub(crate) fn eval(&mut self, e: &'m Expr, mask: &Mask) -> Result<Lanes> {
        match &e.kind {
            ExprKind::Const(c) => {
                let Some(v) = Value::from_const_typed(&e.ty, c) else {
                    return Err(self.malformed(e.span, "a constant of a non-scalar type"));
                };
                self.map_lanes(mask, |_| Ok(v))
            }
            ExprKind::Var(v) => {
                let values = self.var(*v);
                if values.is_empty() {
                    return Err(self.malformed(e.span, "a variable read before its definition"));
                }
                Ok(values.clone())
            }
            ExprKind::Element { var, index } => {
                let Type::Array { dims, .. } = &self.frame_fn().vars[var.0 as usize].ty else {
                    return Err(self.malformed(e.span, "an element of a non-array"));
                };
                let flat = flat_index(dims, index);
                self.check_wgmma_use(*var, flat, Access::Read, e.span)?;
                self.element(*var, flat)
                    .ok_or_else(|| self.malformed(e.span, "an array read before its definition"))
            }
            ExprKind::SharedArray(id) => {
                let ptr = Value::Ptr(Pointer {
                    region: Region::Shared(id.0 as usize),
                    offset: 0,
                });
                self.map_lanes(mask, |_| Ok(ptr))
            }
            ExprKind::TensorMap(map) => self.map_lanes(mask, |_| Ok(Value::TensorMap(*map))),
            ExprKind::Unary(op, a) => {
                let a = self.eval(a, mask)?;
                self.map_lanes(mask, |t| self.arith(Value::unary(*op, a[t]), t, e.span))
            }
            ExprKind::Binary(op, a, b) => {
                let a = self.eval(a, mask)?;
                let b = self.eval(b, mask)?;
                self.map_lanes(mask, |t| {
                    self.arith(Value::binary(*op, a[t], b[t]), t, e.span)
                })
            }
            ExprKind::Logical(op, a, b) => self.logical(*op, a, b, mask),
            ExprKind::Cast(a) => {
                let a = self.eval(a, mask)?;
                self.map_lanes(mask, |t| self.arith(a[t].cast(&e.ty), t, e.span))
            }
            ExprKind::Select(c, a, b) => {
                let c = self.eval(c, mask)?;
                let a = self.eval(a, mask)?;
                let b = self.eval(b, mask)?;
                self.map_lanes(mask, |t| {
                    Ok(if c[t] == Value::Bool(true) {
                        a[t]
                    } else {
                        b[t]
                    })
                })
            }
            ExprKind::Offset { base, index } => {
                let Type::View { elem, .. } = &base.ty else {
                    return Err(self.malformed(e.span, "an offset from a non-view"));
                };
                let size = elem.size() as i64;
                let bases = self.eval(base, mask)?;
                let index = self.eval(index, mask)?;
                self.map_lanes(mask, |t| {
                    let mut p = self.pointer(bases[t], base.span)?;
                    let i = index[t]
                        .as_int()
                        .ok_or_else(|| self.malformed(e.span, "a non-integer view index"))?;
                    p.offset = p.offset.wrapping_add((i as i64).wrapping_mul(size));
                    Ok(Value::Ptr(p))
                })
            }
            ExprKind::Load(ptr) => {
                let ptrs = self.eval(ptr, mask)?;
                let mut out = vec![UNSET; self.threads];
                for t in mask.lanes() {
                    let p = self.pointer(ptrs[t], ptr.span)?;
                    self.check_aligned(p, &e.ty, "a load", t, e.span)?;
                    let who = self.touch(t, e.span);
                    out[t] = self
                        .mem
                        .load(p, &e.ty, who)
                        .map_err(|f| self.fault(f, t, e.span))?;
                }
                Ok(out)
            }
            ExprKind::VectorBuild(regs) if matches!(e.ty, Type::Frag(_)) => {
                let Type::Frag(frag) = e.ty else {
                    unreachable!("matched above")
                };
                let regs = regs
                    .iter()
                    .map(|r| self.eval(r, mask))
                    .collect::<Result<Vec<_>>>()?;
                self.map_lanes(mask, |t| {
                    let mut bits = [0; 4];
                    for (b, r) in bits.iter_mut().zip(&regs) {
                        *b = r[t].reg_bits();
                    }
                    Ok(Value::Frag(FragValue { frag, regs: bits }))
                })
            }
            // A view's bitcast keeps its address (pointers count bytes).
            ExprKind::Bitcast(x) if matches!(e.ty, Type::View { .. }) => self.eval(x, mask),
            ExprKind::Bitcast(x) => {
                let v = self.eval(x, mask)?;
                let size = x.ty.size() as usize;
                self.map_lanes(mask, |t| {
                    let mut bytes = vec![0; size];
                    encode(v[t], &mut bytes);
                    Ok(decode(&e.ty, &bytes))
                })
            }
            ExprKind::VectorBuild(parts) => {
                let parts = parts
                    .iter()
                    .map(|p| self.eval(p, mask))
                    .collect::<Result<Vec<_>>>()?;
                self.map_lanes(mask, |t| {
                    let lanes: Vec<Value> = parts.iter().map(|p| p[t]).collect();
                    Vector::new(&lanes).map(Value::Vector).ok_or_else(|| {
                        self.malformed(e.span, "a vector of mixed or too many lanes")
                    })
                })
            }
            ExprKind::Extract(v, lane) => {
                let v = self.eval(v, mask)?;
                self.map_lanes(mask, |t| match v[t] {
                    Value::Vector(vec) if (*lane as usize) < vec.len() => {
                        Ok(vec.get(*lane as usize))
                    }
                    Value::Frag(f) if *lane < f.frag.regs() => Ok(f.reg(*lane as usize)),
                    _ => Err(self.malformed(e.span, "extracting a lane of a non-vector")),
                })
            }
            ExprKind::Special(s) => self.map_lanes(mask, |t| Ok(Value::U32(self.special(*s, t)))),
            ExprKind::Builtin(b, args) => self.builtin(*b, args, e, mask),
            ExprKind::Call(f, args) => self.call(*f, args, mask, e.span),
            ExprKind::Intrinsic { name, args } => self.intrinsic(name, args, e, mask),
            ExprKind::InlineAsm { template, .. } => Err(self.error_at(
                e.span,
                ErrorKind::Unsupported {
                    what: format!("inline PTX `{template}`"),
                },
            )),
        }
    }

    /// `a && b` / `a || b`: `b` only for the threads whose `a` does not decide.
    fn logical(&mut self, op: LogicalOp, a: &'m Expr, b: &'m Expr, mask: &Mask) -> Result<Lanes> {
        let a = self.eval(a, mask)?;
        let (yes, no) = mask.split(&a);
        let (rest, decided) = match op {
            LogicalOp::And => (yes, false),
            LogicalOp::Or => (no, true),
        };
        let b = if rest.any() {
            self.eval(b, &rest)?
        } else {
            Vec::new()
        };
        self.map_lanes(mask, |t| {
            Ok(if rest.get(t) {
                b[t]
            } else {
                Value::Bool(decided)
            })
        })
    }

    /// A special register of thread `t`.
    pub(crate) fn special(&self, s: Special, t: usize) -> u32 {
        let axis = |a: Axis| match a {
            Axis::X => 0,
            Axis::Y => 1,
            Axis::Z => 2,
        };
        match s {
            Special::ThreadIdx(a) => self.thread_xyz(t)[axis(a)],
            Special::BlockIdx(a) => self.block[axis(a)],
            Special::BlockDim(a) => self.dim[axis(a)],
            Special::GridDim(a) => self.grid[axis(a)],
            Special::Lane => (t % 32) as u32,
            Special::Warp => (t / 32) as u32,
        }
    }

    /// Compute one value per active thread.
    pub(crate) fn map_lanes(
        &self,
        mask: &Mask,
        mut f: impl FnMut(usize) -> Result<Value>,
    ) -> Result<Lanes> {
        let mut out = vec![UNSET; self.threads];
        for t in mask.lanes() {
            out[t] = f(t)?;
        }
        Ok(out)
    }

    pub(crate) fn arith(
        &self,
        r: std::result::Result<Value, ArithError>,
        t: usize,
        span: Span,
    ) -> Result<Value> {
        r.map_err(|err| match err {
            ArithError::DivByZero => self.error_at(
                span,
                ErrorKind::DivByZero {
                    thread: self.thread_id(t),
                },
            ),
            ArithError::ShiftOutOfRange { amount, bits } => self.error_at(
                span,
                ErrorKind::ShiftOutOfRange {
                    amount,
                    bits,
                    thread: self.thread_id(t),
                },
            ),
            ArithError::Mismatch => self.malformed(span, "operands of unexpected types"),
        })
    }

    pub(crate) fn pointer(&self, v: Value, span: Span) -> Result<Pointer> {
        match v {
            Value::Ptr(p) => Ok(p),
            _ => Err(self.malformed(span, "a view was expected")),
        }
    }

    pub(crate) fn touch(&self, t: usize, span: Span) -> Touch<'m> {
        Touch {
            thread: self.cluster_thread(t) as u32,
            site: self.site(span),
        }
    }

    /// A memory fault of thread `t` at `span`, as an error.
    /// An access of a `ty` at `p` must sit at its natural alignment (its size; a 3-lane vector's
    /// lane size), which a view's bitcast to a wider element can miss (the GPU faults). Shared
    /// arrays and buffers start at least 16-byte aligned.
    pub(crate) fn check_aligned(
        &self,
        p: Pointer,
        ty: &Type,
        op: &'static str,
        t: usize,
        span: Span,
    ) -> Result<()> {
        let align = match ty {
            Type::Vector(s, 3) => s.size(),
            other => other.size(),
        };
        if p.offset % i64::from(align) == 0 {
            return Ok(());
        }
        Err(self.error_at(
            span,
            ErrorKind::Misaligned {
                op,
                thread: self.thread_id(t),
                offset: p.offset,
                align,
            },
        ))
    }

    pub(crate) fn fault(&self, f: Fault<'m>, t: usize, span: Span) -> InterpError {
        match f {
            Fault::OutOfBounds {
                space,
                buffer,
                index,
                len,
                kind,
            } => self.error_at(
                span,
                ErrorKind::OutOfBounds {
                    thread: self.thread_id(t),
                    access: kind,
                    space: match space {
                        Space::Global => "global",
                        Space::Shared => "shared",
                    },
                    buffer,
                    index,
                    len,
                },
            ),
            Fault::InFlight {
                array,
                index,
                issued,
                kind,
                tma,
            } => {
                let issued = RaceAccess {
                    thread: self.cluster_thread_id(issued.thread),
                    access: Access::Write,
                    at: Location::new(issued.site, self.sources),
                };
                let (thread, access) = (self.thread_id(t), kind);
                let kind = match tma {
                    true => ErrorKind::TmaInFlight {
                        array,
                        index,
                        thread,
                        access,
                        issued,
                    },
                    false => ErrorKind::CopyInFlight {
                        array,
                        index,
                        thread,
                        access,
                        issued,
                    },
                };
                self.error_at(span, kind)
            }
            Fault::Unfenced {
                op,
                array,
                index,
                write,
            } => self.error_at(
                span,
                ErrorKind::UnfencedWrite {
                    op,
                    thread: self.thread_id(t),
                    array,
                    index,
                    write: RaceAccess {
                        thread: self.cluster_thread_id(write.thread),
                        access: Access::Write,
                        at: Location::new(write.site, self.sources),
                    },
                },
            ),
            Fault::Race {
                array,
                index,
                earlier,
                earlier_kind,
                kind,
            } => self.error_at(
                span,
                ErrorKind::SharedRace {
                    array,
                    index,
                    thread: self.thread_id(t),
                    access: kind,
                    earlier: RaceAccess {
                        thread: self.cluster_thread_id(earlier.thread),
                        access: earlier_kind,
                        at: Location::new(earlier.site, self.sources),
                    },
                },
            ),
        }
    }

    /// The scalar type of an expression that must have one.
    pub(crate) fn scalar_of(&self, e: &Expr) -> Result<Scalar> {
        e.ty.scalar()
            .ok_or_else(|| self.malformed(e.span, "a scalar was expected"))
    }
}
