//! Calls: built-in functions, vector constructors and device functions.

use super::body::FnCx;
use super::expr::{int_const, mk};
use super::{suggest, types, ItemRef, Lookup, Res};
use crate::ast;
use crate::diag::{Diagnostic, Span};
use crate::ir::{
    self, AtomicOp, BinOp, Builtin, FenceScope, FuncId, MathFn, Scalar, ShuffleMode, Type, VoteMode,
};

/// A built-in function.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Name {
    Math(MathFn),
    Max,
    Min,
    Fma,
    Select,
    Cdiv,
    Barrier,
    Fence(FenceScope),
    Shuffle(ShuffleMode),
    Vote(VoteMode),
    Atomic(AtomicOp),
    AtomicCas,
}

const TABLE: &[(&str, Name)] = &[
    ("exp", Name::Math(MathFn::Exp)),
    ("log", Name::Math(MathFn::Log)),
    ("exp2", Name::Math(MathFn::Exp2)),
    ("log2", Name::Math(MathFn::Log2)),
    ("sqrt", Name::Math(MathFn::Sqrt)),
    ("rsqrt", Name::Math(MathFn::Rsqrt)),
    ("tanh", Name::Math(MathFn::Tanh)),
    ("sin", Name::Math(MathFn::Sin)),
    ("cos", Name::Math(MathFn::Cos)),
    ("abs", Name::Math(MathFn::Abs)),
    ("floor", Name::Math(MathFn::Floor)),
    ("ceil", Name::Math(MathFn::Ceil)),
    ("max", Name::Max),
    ("min", Name::Min),
    ("fma", Name::Fma),
    ("select", Name::Select),
    ("cdiv", Name::Cdiv),
    ("barrier", Name::Barrier),
    ("fence", Name::Fence(FenceScope::Device)),
    ("fence_block", Name::Fence(FenceScope::Block)),
    ("shfl_xor", Name::Shuffle(ShuffleMode::Xor)),
    ("shfl_down", Name::Shuffle(ShuffleMode::Down)),
    ("shfl_up", Name::Shuffle(ShuffleMode::Up)),
    ("shfl_idx", Name::Shuffle(ShuffleMode::Idx)),
    ("vote_all", Name::Vote(VoteMode::All)),
    ("vote_any", Name::Vote(VoteMode::Any)),
    ("ballot", Name::Vote(VoteMode::Ballot)),
    ("atomic_add", Name::Atomic(AtomicOp::Add)),
    ("atomic_max", Name::Atomic(AtomicOp::Max)),
    ("atomic_min", Name::Atomic(AtomicOp::Min)),
    ("atomic_and", Name::Atomic(AtomicOp::And)),
    ("atomic_or", Name::Atomic(AtomicOp::Or)),
    ("atomic_xor", Name::Atomic(AtomicOp::Xor)),
    ("atomic_exch", Name::Atomic(AtomicOp::Exch)),
    ("atomic_cas", Name::AtomicCas),
];

pub fn lookup(name: &str) -> Option<Name> {
    TABLE.iter().find(|(n, _)| *n == name).map(|(_, b)| *b)
}

/// Names items may not take: built-in functions and values, and type names.
pub fn is_reserved(name: &str) -> bool {
    lookup(name).is_some()
        || [
            "thread",
            "block",
            "block_dim",
            "grid_dim",
            "lane",
            "warp",
            "void",
        ]
        .contains(&name)
        || Scalar::from_name(name).is_some()
        || types::vector_type(name).is_some()
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

impl FnCx<'_, '_> {
    pub fn arity(&mut self, name: &str, args: &[ast::Expr], n: usize, span: Span) -> Res<()> {
        if args.len() == n {
            return Ok(());
        }
        let d = Diagnostic::error(
            format!(
                "`{name}` takes {n} argument{} but {} {} given",
                plural(n),
                args.len(),
                if args.len() == 1 { "was" } else { "were" }
            ),
            span,
        );
        Err(self.error(d))
    }

    pub fn call(
        &mut self,
        callee: &ast::Ident,
        args: &[ast::Expr],
        want: Option<&Type>,
        span: Span,
    ) -> Res<ir::Expr> {
        let name = callee.name.as_str();
        let message = match self.ck.lookup(self.file, name) {
            Lookup::Found(ItemRef::Fn(i)) => return self.call_fn(i, callee, args, span),
            Lookup::Found(_) => format!("`{name}` is not a function"),
            Lookup::NotImported(file) => format!(
                "`{name}` is defined in `{}`, which this file does not import",
                self.ck.file_name(file)
            ),
            Lookup::Missing => {
                if let Some(b) = lookup(name) {
                    return self.builtin(b, name, args, want, span);
                }
                if let Some((s, n)) = types::vector_type(name) {
                    return self.vector(s, n, name, args, span);
                }
                if Scalar::from_name(name).is_some() {
                    format!("`{name}` is a type, not a function; convert with `x as {name}`")
                } else {
                    let mut names = self.ck.visible_names(self.file, true);
                    names.extend(TABLE.iter().map(|(n, _)| *n));
                    let mut d =
                        Diagnostic::error(format!("unknown function `{name}`"), callee.span);
                    if let Some(best) = suggest::closest(name, names) {
                        d = d.with_note(format!("did you mean `{best}`?"), None);
                    }
                    return Err(self.error(d));
                }
            }
        };
        Err(self.error(Diagnostic::error(message, callee.span)))
    }

    fn call_fn(
        &mut self,
        i: usize,
        callee: &ast::Ident,
        args: &[ast::Expr],
        span: Span,
    ) -> Res<ir::Expr> {
        let sig = self.ck.fns[i].sig.clone().ok_or(super::Reported)?;
        let decl = self.ck.fns[i].item.name.span;
        if args.len() != sig.params.len() {
            let n = sig.params.len();
            let d = Diagnostic::error(
                format!(
                    "`{}` takes {n} argument{} but {} {} given",
                    callee.name,
                    plural(n),
                    args.len(),
                    if args.len() == 1 { "was" } else { "were" }
                ),
                span,
            )
            .with_note(format!("`{}` is defined here", callee.name), Some(decl));
            return Err(self.error(d));
        }
        let mut checked = Vec::new();
        for (k, (arg, (pname, pty, _))) in args.iter().zip(&sig.params).enumerate() {
            let what = format!("argument {} (`{pname}`) of `{}`", k + 1, callee.name);
            checked.push(self.expect(arg, pty, &what));
        }
        let args = checked.into_iter().collect::<Res<Vec<_>>>()?;
        self.calls.push((i, span));
        Ok(mk(
            ir::ExprKind::Call(FuncId(i as u32), args),
            sig.ret,
            span,
        ))
    }

    fn vector(
        &mut self,
        s: Scalar,
        n: u8,
        name: &str,
        args: &[ast::Expr],
        span: Span,
    ) -> Res<ir::Expr> {
        self.arity(name, args, usize::from(n), span)?;
        let lane = Type::Scalar(s);
        let checked: Vec<_> = args
            .iter()
            .map(|a| self.expect(a, &lane, "a vector lane"))
            .collect();
        let lanes = checked.into_iter().collect::<Res<Vec<_>>>()?;
        Ok(mk(
            ir::ExprKind::VectorBuild(lanes),
            Type::Vector(s, n),
            span,
        ))
    }

    fn builtin(
        &mut self,
        b: Name,
        name: &str,
        args: &[ast::Expr],
        want: Option<&Type>,
        span: Span,
    ) -> Res<ir::Expr> {
        let scalar_of = |x: &ir::Expr| x.ty.scalar();
        // Math, `max`, `min` and `fma` also work lane-wise on vectors.
        let lane_of = |x: &ir::Expr| match x.ty {
            Type::Scalar(s) | Type::Vector(s, _) => Some(s),
            _ => None,
        };
        match b {
            Name::Barrier | Name::Fence(_) => {
                let d =
                    Diagnostic::error(format!("`{name}()` is a statement and has no value"), span);
                Err(self.error(d))
            }
            Name::Math(f) => {
                self.arity(name, args, 1, span)?;
                let x = self.value(&args[0], want)?;
                let ok = lane_of(&x)
                    .is_some_and(|s| s.is_float() || (f == MathFn::Abs && s.is_signed()));
                if !ok {
                    let need = if f == MathFn::Abs {
                        "a float or signed integer"
                    } else {
                        "a float"
                    };
                    return Err(self.bad_arg(name, need, &x));
                }
                let ty = x.ty.clone();
                Ok(mk(
                    ir::ExprKind::Builtin(Builtin::Math(f), vec![x]),
                    ty,
                    span,
                ))
            }
            Name::Max | Name::Min => {
                self.arity(name, args, 2, span)?;
                let (x, y) = self.same_type(name, &args[0], &args[1], want, span)?;
                if !lane_of(&x).is_some_and(|s| s != Scalar::Bool) {
                    return Err(self.bad_arg(name, "numbers", &x));
                }
                let op = if b == Name::Max {
                    Builtin::Max
                } else {
                    Builtin::Min
                };
                let ty = x.ty.clone();
                Ok(mk(ir::ExprKind::Builtin(op, vec![x, y]), ty, span))
            }
            Name::Fma => {
                self.arity(name, args, 3, span)?;
                let (x, y) = self.same_type(name, &args[0], &args[1], want, span)?;
                if !lane_of(&x).is_some_and(Scalar::is_float) {
                    return Err(self.bad_arg(name, "floats", &x));
                }
                let z = self.expect(&args[2], &x.ty.clone(), "the addend of `fma`")?;
                let ty = x.ty.clone();
                Ok(mk(
                    ir::ExprKind::Builtin(Builtin::Fma, vec![x, y, z]),
                    ty,
                    span,
                ))
            }
            Name::Select => {
                self.arity(name, args, 3, span)?;
                let c = self.expect(
                    &args[0],
                    &Type::Scalar(Scalar::Bool),
                    "the condition of `select`",
                );
                let (x, y) = self.same_type(name, &args[1], &args[2], want, span)?;
                let ty = x.ty.clone();
                Ok(mk(
                    ir::ExprKind::Select(Box::new(c?), Box::new(x), Box::new(y)),
                    ty,
                    span,
                ))
            }
            Name::Cdiv => {
                self.arity(name, args, 2, span)?;
                let (x, y) = self.same_type(name, &args[0], &args[1], want, span)?;
                let Some(s) = scalar_of(&x).filter(|s| s.is_int()) else {
                    return Err(self.bad_arg(name, "integer scalars", &x));
                };
                // (a + b - 1) / b
                let ty = x.ty.clone();
                let sum = mk(
                    ir::ExprKind::Binary(BinOp::Add, Box::new(x), Box::new(y.clone())),
                    ty.clone(),
                    span,
                );
                let less = mk(
                    ir::ExprKind::Binary(
                        BinOp::Sub,
                        Box::new(sum),
                        Box::new(int_const(1, s, span)),
                    ),
                    ty.clone(),
                    span,
                );
                Ok(mk(
                    ir::ExprKind::Binary(BinOp::Div, Box::new(less), Box::new(y)),
                    ty,
                    span,
                ))
            }
            Name::Shuffle(mode) => {
                self.arity(name, args, 2, span)?;
                let x = self.value(&args[0], want);
                let lane = self.expect(
                    &args[1],
                    &Type::Scalar(Scalar::U32),
                    "the lane operand of a shuffle",
                );
                let x = x?;
                if !matches!(scalar_of(&x), Some(Scalar::I32 | Scalar::U32 | Scalar::F32)) {
                    return Err(self.bad_arg(name, "a 32-bit scalar (`i32`, `u32` or `f32`)", &x));
                }
                let ty = x.ty.clone();
                Ok(mk(
                    ir::ExprKind::Builtin(Builtin::Shuffle(mode), vec![x, lane?]),
                    ty,
                    span,
                ))
            }
            Name::Vote(mode) => {
                self.arity(name, args, 1, span)?;
                let p = self.expect(
                    &args[0],
                    &Type::Scalar(Scalar::Bool),
                    "the predicate of a vote",
                )?;
                let ty = Type::Scalar(if mode == VoteMode::Ballot {
                    Scalar::U32
                } else {
                    Scalar::Bool
                });
                Ok(mk(
                    ir::ExprKind::Builtin(Builtin::Vote(mode), vec![p]),
                    ty,
                    span,
                ))
            }
            Name::Atomic(op) => {
                self.arity(name, args, 2, span)?;
                let bitwise = matches!(op, AtomicOp::And | AtomicOp::Or | AtomicOp::Xor);
                let (ptr, elem) = self.atomic_place(name, &args[0], !bitwise)?;
                let v = self.expect(&args[1], &elem, "the operand of an atomic")?;
                Ok(mk(
                    ir::ExprKind::Builtin(Builtin::Atomic(op), vec![ptr, v]),
                    elem,
                    span,
                ))
            }
            Name::AtomicCas => {
                self.arity(name, args, 3, span)?;
                let (ptr, elem) = self.atomic_place(name, &args[0], true)?;
                let expected = self.expect(&args[1], &elem, "the expected value of `atomic_cas`");
                let new = self.expect(&args[2], &elem, "the new value of `atomic_cas`");
                Ok(mk(
                    ir::ExprKind::Builtin(Builtin::AtomicCas, vec![ptr, expected?, new?]),
                    elem,
                    span,
                ))
            }
        }
    }

    fn bad_arg(&mut self, name: &str, need: &str, got: &ir::Expr) -> super::Reported {
        let d = Diagnostic::error(
            format!("`{name}` needs {need}, found `{}`", got.ty),
            got.span,
        );
        self.error(d)
    }

    /// Two arguments of one type.
    fn same_type(
        &mut self,
        name: &str,
        a: &ast::Expr,
        b: &ast::Expr,
        want: Option<&Type>,
        span: Span,
    ) -> Res<(ir::Expr, ir::Expr)> {
        let (x, y) = self.unify(a, b, want)?;
        if x.ty != y.ty {
            let d = Diagnostic::error(
                format!(
                    "mismatched types: the arguments of `{name}` are `{}` and `{}`",
                    x.ty, y.ty
                ),
                span,
            );
            return Err(self.error(d));
        }
        Ok((x, y))
    }

    /// The first argument of an atomic: a writable element `v[i]` of a 32- or 64-bit integer
    /// (or float, when `float_ok`: all but the bitwise atomics).
    fn atomic_place(
        &mut self,
        name: &str,
        arg: &ast::Expr,
        float_ok: bool,
    ) -> Res<(ir::Expr, Type)> {
        if !matches!(arg.kind, ast::ExprKind::Index(..)) {
            let d = Diagnostic::error(
                format!("the first argument of `{name}` must be an element of a view, like `v[i]`"),
                arg.span,
            );
            return Err(self.error(d));
        }
        let place = self.place(arg)?;
        self.check_writable(&place, arg.span)?;
        let ok = match place.elem.scalar() {
            Some(s) if s.is_int() => s.size() >= 4,
            Some(Scalar::F32 | Scalar::F64) => float_ok,
            _ => false,
        };
        if !ok {
            let need = if float_ok {
                "a 32- or 64-bit integer or float element"
            } else {
                "a 32- or 64-bit integer element"
            };
            let d = Diagnostic::error(
                format!("`{name}` needs {need}, found `{}`", place.elem),
                arg.span,
            );
            return Err(self.error(d));
        }
        Ok((place.ptr, place.elem))
    }
}
