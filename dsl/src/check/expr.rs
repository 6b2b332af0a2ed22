//! Checking expressions. Types flow bottom-up, except that an untyped literal takes the type its
//! context wants (`want`): the other operand, the declared type, the parameter type.

use super::body::{Binding, FnCx};
use super::{suggest, types, ItemRef, Lookup, Reported, Res};
use crate::ast::{self, ExprKind};
use crate::consteval::{self, int_range, ConstError};
use crate::diag::{Diagnostic, Span};
use crate::ir::{self, Axis, BinOp, ConstValue, Scalar, Space, Special, Type, UnOp};

/// Built-in values with `.x .y .z` components.
const SPECIAL_GROUPS: [&str; 4] = ["thread", "block", "block_dim", "grid_dim"];

/// Where `v[i]` points.
pub struct Place {
    pub ptr: ir::Expr,
    pub elem: Type,
    pub mutable: bool,
    /// The view's name, type and declaration, when it is a named variable.
    pub decl: Option<(String, Type, Span)>,
}

pub fn mk(kind: ir::ExprKind, ty: Type, span: Span) -> ir::Expr {
    ir::Expr { kind, ty, span }
}

pub fn int_const(v: i128, s: Scalar, span: Span) -> ir::Expr {
    mk(
        ir::ExprKind::Const(ConstValue::Int(v)),
        Type::Scalar(s),
        span,
    )
}

fn is_numeric(ty: &Type) -> bool {
    match ty {
        Type::Scalar(s) | Type::Vector(s, _) => *s != Scalar::Bool,
        _ => false,
    }
}

fn is_int(ty: &Type) -> bool {
    match ty {
        Type::Scalar(s) | Type::Vector(s, _) => s.is_int(),
        _ => false,
    }
}

/// Types a value may be passed or assigned as: equal, or a mutable view where a read-only view
/// of the same elements is expected.
pub fn assignable(from: &Type, to: &Type) -> bool {
    match (from, to) {
        (
            Type::View {
                space: s1,
                elem: e1,
                mutable: m1,
            },
            Type::View {
                space: s2,
                elem: e2,
                mutable: m2,
            },
        ) => s1 == s2 && e1 == e2 && (*m1 || !*m2),
        _ => from == to,
    }
}

impl FnCx<'_, '_> {
    /// An expression with a value (not a call of a function without result).
    pub fn value(&mut self, e: &ast::Expr, want: Option<&Type>) -> Res<ir::Expr> {
        let x = self.expr(e, want)?;
        if x.ty == Type::Void {
            let d = Diagnostic::error(
                "this call has no value; it can only be used as a statement",
                e.span,
            );
            return Err(self.error(d));
        }
        Ok(x)
    }

    /// A value of type `ty` (`what` names it in the message).
    pub fn expect(&mut self, e: &ast::Expr, ty: &Type, what: &str) -> Res<ir::Expr> {
        let x = self.value(e, Some(ty))?;
        if !assignable(&x.ty, ty) {
            let d = Diagnostic::error(
                format!("mismatched types: {what} must be `{ty}`, found `{}`", x.ty),
                e.span,
            );
            return Err(self.error(d));
        }
        Ok(x)
    }

    /// Two operands that must share a type: an untyped literal side adapts to the other.
    pub fn unify(
        &mut self,
        a: &ast::Expr,
        b: &ast::Expr,
        want: Option<&Type>,
    ) -> Res<(ir::Expr, ir::Expr)> {
        if a.is_untyped() && !b.is_untyped() {
            let y = self.value(b, want)?;
            let x = self.value(a, Some(&y.ty))?;
            Ok((x, y))
        } else {
            let x = self.value(a, want)?;
            let y = self.value(b, Some(&x.ty))?;
            Ok((x, y))
        }
    }

    pub fn expr(&mut self, e: &ast::Expr, want: Option<&Type>) -> Res<ir::Expr> {
        match (want, e.is_untyped()) {
            (Some(Type::Frag(frag)), true) => return self.frag_fill(e, *frag),
            (Some(ty @ Type::Array { .. }), true) => return self.array_fill(e, ty),
            _ => {}
        }
        match &e.kind {
            ExprKind::Int { value, suffix } => {
                self.int_literal(*value, false, *suffix, want, e.span)
            }
            ExprKind::Float { value, suffix } => self.float_literal(*value, *suffix, want, e.span),
            ExprKind::Bool(b) => Ok(mk(
                ir::ExprKind::Const(ConstValue::Bool(*b)),
                Type::Scalar(Scalar::Bool),
                e.span,
            )),
            ExprKind::Name(n) => self.name(n, e.span),
            ExprKind::Field(base, field) => self.field(base, field, e.span),
            ExprKind::Index(..) if self.indexed_array(e).is_some() => self.array_element(e),
            ExprKind::Index(base, index) if !self.indexes_shared(e) => {
                let b = self.value(base, None)?;
                if let Type::Frag(frag) = b.ty {
                    return self.frag_element(b, frag, index, e.span);
                }
                let place = self.view_place(b, base, index, e.span)?;
                Ok(mk(
                    ir::ExprKind::Load(Box::new(place.ptr)),
                    place.elem,
                    e.span,
                ))
            }
            ExprKind::Index(..) => {
                let place = self.place(e)?;
                Ok(mk(
                    ir::ExprKind::Load(Box::new(place.ptr)),
                    place.elem,
                    e.span,
                ))
            }
            ExprKind::Call { callee, args } => self.call(callee, args, want, e.span),
            ExprKind::Unary(UnOp::Neg, inner) => match &inner.kind {
                // Negative literals are checked against the range as a whole (`-128i8`).
                ExprKind::Int { value, suffix } => {
                    self.int_literal(*value, true, *suffix, want, e.span)
                }
                ExprKind::Float { value, suffix } => {
                    self.float_literal(-value, *suffix, want, e.span)
                }
                _ => self.unary(UnOp::Neg, inner, want, e.span),
            },
            ExprKind::Unary(op, inner) => self.unary(*op, inner, want, e.span),
            ExprKind::Binary(op, a, b) => {
                let want = if op.is_comparison() { None } else { want };
                if *op == BinOp::Add && !a.is_untyped() {
                    // `view + i` offsets the view; anything else is arithmetic.
                    let x = self.value(a, want)?;
                    if let Type::View { .. } = x.ty {
                        let index = self.index(b)?;
                        let ty = x.ty.clone();
                        let offset = ir::ExprKind::Offset {
                            base: Box::new(x),
                            index: Box::new(index),
                        };
                        return Ok(mk(offset, ty, e.span));
                    }
                    let y = self.value(b, Some(&x.ty))?;
                    return self.binary_typed(*op, x, y, e.span);
                }
                let (x, y) = self.unify(a, b, want)?;
                self.binary_typed(*op, x, y, e.span)
            }
            ExprKind::Logical(op, a, b) => {
                let bool_ty = Type::Scalar(Scalar::Bool);
                let x = self.expect(a, &bool_ty, "an operand of `&&` and `||`");
                let y = self.expect(b, &bool_ty, "an operand of `&&` and `||`");
                Ok(mk(
                    ir::ExprKind::Logical(*op, Box::new(x?), Box::new(y?)),
                    bool_ty,
                    e.span,
                ))
            }
            ExprKind::Cast(inner, ty) => self.cast(inner, ty, e.span),
            ExprKind::Bitcast(inner, ty) => self.bitcast(inner, ty, e.span),
            ExprKind::Intrinsic { ty, name, args } => {
                let ty = types::resolve(self.ck, ty, types::Usage::Foreign)?;
                if !name.value.starts_with("llvm.") {
                    let d = Diagnostic::error(
                        format!("intrinsic name `{}` must start with `llvm.`", name.value),
                        name.span,
                    );
                    return Err(self.error(d));
                }
                let args = self.values(args)?;
                Ok(mk(
                    ir::ExprKind::Intrinsic {
                        name: name.value.clone(),
                        args,
                    },
                    ty,
                    e.span,
                ))
            }
            ExprKind::Asm {
                ty,
                template,
                constraints,
                args,
            } => {
                let ty = types::resolve(self.ck, ty, types::Usage::Foreign)?;
                let args = self.values(args)?;
                Ok(mk(
                    ir::ExprKind::InlineAsm {
                        template: template.value.clone(),
                        constraints: constraints.value.clone(),
                        args,
                    },
                    ty,
                    e.span,
                ))
            }
        }
    }

    /// Check every argument (all of them, so that each error is reported).
    fn values(&mut self, args: &[ast::Expr]) -> Res<Vec<ir::Expr>> {
        let checked: Vec<Res<ir::Expr>> = args.iter().map(|a| self.value(a, None)).collect();
        checked.into_iter().collect()
    }

    fn literal_type(suffix: Option<Scalar>, want: Option<&Type>, float: bool) -> Scalar {
        match (suffix, want) {
            (Some(s), _) => s,
            (None, Some(Type::Scalar(s))) if s.is_float() || (!float && s.is_int()) => *s,
            _ if float => Scalar::F32,
            _ => Scalar::I32,
        }
    }

    fn int_literal(
        &mut self,
        value: u128,
        negative: bool,
        suffix: Option<Scalar>,
        want: Option<&Type>,
        span: Span,
    ) -> Res<ir::Expr> {
        let ty = Self::literal_type(suffix, want, false);
        let sign = if negative { "-" } else { "" };
        if ty.is_float() {
            let v = value as f64;
            return self.float_literal(if negative { -v } else { v }, Some(ty), None, span);
        }
        if ty == Scalar::Bool {
            let d = Diagnostic::error("an integer literal cannot have type `bool`", span);
            return Err(self.error(d));
        }
        let (lo, hi) = int_range(ty);
        let v = i128::try_from(value)
            .ok()
            .map(|v| if negative { -v } else { v })
            .filter(|v| (lo..=hi).contains(v));
        let Some(v) = v else {
            let d = Diagnostic::error(
                format!(
                    "literal `{sign}{value}` is out of range for `{}` ({lo}..={hi})",
                    ty.name()
                ),
                span,
            );
            return Err(self.error(d));
        };
        Ok(int_const(v, ty, span))
    }

    fn float_literal(
        &mut self,
        value: f64,
        suffix: Option<Scalar>,
        want: Option<&Type>,
        span: Span,
    ) -> Res<ir::Expr> {
        let ty = Self::literal_type(suffix, want, true);
        if !ty.is_float() {
            let d = Diagnostic::error(
                format!("a float literal cannot have type `{}`", ty.name()),
                span,
            );
            return Err(self.error(d));
        }
        let max = match ty {
            Scalar::F16 => 65504.0,
            Scalar::Bf16 => 3.389_531_4e38,
            Scalar::F32 => f64::from(f32::MAX),
            _ => f64::MAX,
        };
        if value.is_nan() || value.abs() > max {
            let d = Diagnostic::error(
                format!("literal `{value:e}` is out of range for `{}`", ty.name()),
                span,
            );
            return Err(self.error(d));
        }
        Ok(mk(
            ir::ExprKind::Const(ConstValue::Float(value)),
            Type::Scalar(ty),
            span,
        ))
    }

    fn name(&mut self, n: &str, span: Span) -> Res<ir::Expr> {
        match self.lookup(n).cloned() {
            Some(Binding::Var(id)) => {
                let ty = self.vars[id.0 as usize].ty.clone();
                if let Type::TensorMap(_) = ty {
                    return Err(self.not_a_value_map(n, span));
                }
                if let Type::Array { .. } = ty {
                    let d = Diagnostic::error(
                        format!("register array `{n}` cannot be used as a whole; index its elements, `{n}[i]`"),
                        span,
                    );
                    return Err(self.error(d));
                }
                return Ok(mk(ir::ExprKind::Var(id), ty, span));
            }
            Some(Binding::Shared(id)) => {
                let elem = self.shared[id.0 as usize].elem.clone();
                let ty = Type::View {
                    space: Space::Shared,
                    elem: Box::new(elem),
                    mutable: true,
                };
                return Ok(mk(ir::ExprKind::SharedArray(id), ty, span));
            }
            Some(Binding::Const(s, v)) => {
                return Ok(mk(ir::ExprKind::Const(v), Type::Scalar(s), span))
            }
            Some(Binding::TensorMap(_)) => return Err(self.not_a_value_map(n, span)),
            Some(Binding::Poisoned) => return Err(Reported),
            None => {}
        }
        if self.ck.type_param(n).is_some() {
            let d = Diagnostic::error(
                format!("`{n}` is a type parameter, not a value; it can be written where a type is (`x as {n}`)"),
                span,
            );
            return Err(self.error(d));
        }
        let message = match self.ck.lookup(self.file, n) {
            Lookup::Found(ItemRef::Const(i)) => {
                let (s, v) = self.ck.const_value(i)?;
                return Ok(mk(ir::ExprKind::Const(v), Type::Scalar(s), span));
            }
            Lookup::Found(ItemRef::Fn(_)) => {
                format!("`{n}` is a function; call it with `{n}(...)`")
            }
            Lookup::Found(ItemRef::Kernel { .. }) => {
                format!("`{n}` is a kernel and cannot be used in an expression")
            }
            Lookup::NotImported(file) => {
                format!(
                    "`{n}` is defined in `{}`, which this file does not import",
                    self.ck.file_name(file)
                )
            }
            Lookup::Missing => match n {
                "lane" => {
                    return Ok(mk(
                        ir::ExprKind::Special(Special::Lane),
                        Type::Scalar(Scalar::U32),
                        span,
                    ))
                }
                "warp" => {
                    return Ok(mk(
                        ir::ExprKind::Special(Special::Warp),
                        Type::Scalar(Scalar::U32),
                        span,
                    ))
                }
                _ if SPECIAL_GROUPS.contains(&n) => {
                    format!("`{n}` has components `.x`, `.y` and `.z`; use `{n}.x`")
                }
                _ => return Err(self.unknown_name(n, span)),
            },
        };
        Err(self.error(Diagnostic::error(message, span)))
    }

    /// Tensor map `n` used where a value is wanted.
    fn not_a_value_map(&mut self, n: &str, span: Span) -> Reported {
        let d = Diagnostic::error(
            format!("`{n}` is a tensor map, which only `tma_load`, `tma_prefetch` and `tma_store` take, or a function's `tensor_map<T>` parameter"),
            span,
        );
        self.error(d)
    }

    fn unknown_name(&mut self, n: &str, span: Span) -> Reported {
        let mut names = self.scope_names();
        names.extend(self.ck.visible_names(self.file, false));
        names.extend(SPECIAL_GROUPS);
        names.extend(["lane", "warp"]);
        let best = suggest::closest(n, names).map(str::to_string);
        let mut d = Diagnostic::error(format!("unknown name `{n}`"), span);
        if let Some(best) = best {
            d = d.with_note(format!("did you mean `{best}`?"), None);
        }
        self.error(d)
    }

    fn field(&mut self, base: &ast::Expr, field: &ast::Ident, span: Span) -> Res<ir::Expr> {
        if let ExprKind::Name(n) = &base.kind {
            let shadowed = self.lookup(n).is_some()
                || !matches!(self.ck.lookup(self.file, n), Lookup::Missing);
            if SPECIAL_GROUPS.contains(&n.as_str()) && !shadowed {
                let axis = match field.name.as_str() {
                    "x" => Axis::X,
                    "y" => Axis::Y,
                    "z" => Axis::Z,
                    other => {
                        let d = Diagnostic::error(
                            format!("`{n}` has no component `{other}`; it has `.x`, `.y` and `.z`"),
                            field.span,
                        );
                        return Err(self.error(d));
                    }
                };
                let special = match n.as_str() {
                    "thread" => Special::ThreadIdx(axis),
                    "block" => Special::BlockIdx(axis),
                    "block_dim" => Special::BlockDim(axis),
                    _ => Special::GridDim(axis),
                };
                return Ok(mk(
                    ir::ExprKind::Special(special),
                    Type::Scalar(Scalar::U32),
                    span,
                ));
            }
        }
        let x = self.value(base, None)?;
        let lane = ["x", "y", "z", "w"].iter().position(|c| *c == field.name);
        match (&x.ty, lane) {
            (Type::Vector(s, n), Some(lane)) if lane < usize::from(*n) => {
                let s = *s;
                Ok(mk(
                    ir::ExprKind::Extract(Box::new(x), lane as u8),
                    Type::Scalar(s),
                    span,
                ))
            }
            (ty, _) => {
                let d = Diagnostic::error(
                    format!("type `{ty}` has no component `{}`", field.name),
                    field.span,
                );
                Err(self.error(d))
            }
        }
    }

    /// An index: any integer type (an untyped literal becomes u32).
    fn index(&mut self, e: &ast::Expr) -> Res<ir::Expr> {
        let x = self.value(e, Some(&Type::Scalar(Scalar::U32)))?;
        if !x.ty.scalar().is_some_and(Scalar::is_int) {
            let d = Diagnostic::error(
                format!("an index must be an integer, found `{}`", x.ty),
                e.span,
            );
            return Err(self.error(d));
        }
        Ok(x)
    }

    /// The element `e` (an `Index` expression) designates.
    pub fn place(&mut self, e: &ast::Expr) -> Res<Place> {
        // Peel `s[i][j]` down to its root to see whether it indexes a shared array.
        let (root, indices) = peel_indices(e);
        if let ExprKind::Name(n) = &root.kind {
            if let Some(Binding::Shared(id)) = self.lookup(n).cloned() {
                return self.shared_place(id, root, &indices, e.span);
            }
        }
        let ExprKind::Index(base, index) = &e.kind else {
            unreachable!("place() is only called on index expressions")
        };
        let b = self.value(base, None)?;
        self.view_place(b, base, index, e.span)
    }

    /// The register array that the index expression `e` indexes (`acc[i][j]`), if any.
    pub fn indexed_array(&self, e: &ast::Expr) -> Option<ir::VarId> {
        let (root, _) = peel_indices(e);
        let ExprKind::Name(n) = &root.kind else {
            return None;
        };
        match self.lookup(n) {
            Some(Binding::Var(id)) if matches!(self.vars[id.0 as usize].ty, Type::Array { .. }) => {
                Some(*id)
            }
            _ => None,
        }
    }

    /// The register array element `e` designates: the array, one constant index per
    /// dimension, and the element type; the indices that follow, if any.
    fn array_index<'e>(
        &mut self,
        e: &'e ast::Expr,
    ) -> Res<(ir::VarId, Vec<u32>, Type, Vec<&'e ast::Expr>)> {
        let var = self.indexed_array(e).ok_or(Reported)?;
        let (_, indices) = peel_indices(e);
        let v = &self.vars[var.0 as usize];
        let (name, ty) = (v.name.clone(), v.ty.clone());
        let Type::Array { elem, dims } = ty else {
            unreachable!("indexed_array() finds arrays")
        };
        if indices.len() < dims.len() {
            let d = Diagnostic::error(
                format!(
                    "register array `{name}` has {} dimensions: give an index for each (arrays cannot be used as a whole)",
                    dims.len()
                ),
                e.span,
            );
            return Err(self.error(d));
        }
        let mut index = Vec::with_capacity(dims.len());
        for (i, &dim) in indices.iter().zip(&dims) {
            let x = self.index(i)?;
            let k = match consteval::eval(&x) {
                Ok(ConstValue::Int(k)) => k,
                Ok(_) => unreachable!("indices are integers"),
                Err(ConstError::NotConst(at)) => {
                    let mut d = Diagnostic::error(
                        format!("index register array `{name}` with a constant or an unrolled loop variable"),
                        i.span,
                    )
                    .with_note(
                        "register arrays live in registers, which cannot be indexed at run time; write `for i in a..b unroll { }`",
                        None,
                    );
                    if at != i.span {
                        d = d.with_note("this part is only known at run time", Some(at));
                    }
                    return Err(self.error(d));
                }
                Err(other) => {
                    return Err(self.error(Diagnostic::error(other.message(), other.span())))
                }
            };
            if !(0..i128::from(dim)).contains(&k) {
                let d = Diagnostic::error(
                    format!(
                        "index {k} is out of bounds for register array `{name}` (`{}`): the dimension is {dim}",
                        self.vars[var.0 as usize].ty
                    ),
                    i.span,
                );
                return Err(self.error(d));
            }
            index.push(k as u32);
        }
        let rest = indices[dims.len()..].to_vec();
        Ok((var, index, *elem, rest))
    }

    /// A row of a register array, `acc[i]` of `acc: [M][N] T` or `acc` of `acc: [N] T` (every
    /// index but the last, constant): the array, the flat index of the row's first element, the
    /// row's length and the element type.
    pub fn array_row(&mut self, e: &ast::Expr) -> Res<(ir::VarId, u32, u32, Type)> {
        let var = self.indexed_array(e).ok_or(Reported)?;
        let (_, indices) = peel_indices(e);
        let v = &self.vars[var.0 as usize];
        let (name, ty) = (v.name.clone(), v.ty.clone());
        let Type::Array { elem, dims } = ty else {
            unreachable!("indexed_array() finds arrays")
        };
        if indices.len() + 1 != dims.len() {
            let d = Diagnostic::error(
                format!(
                    "`{name}` has {} dimensions: name a row of it, with {} constant indices",
                    dims.len(),
                    dims.len() - 1
                ),
                e.span,
            );
            return Err(self.error(d));
        }
        let row = *dims.last().expect("arrays have a dimension");
        let mut first = 0u64;
        for (i, &dim) in indices.iter().zip(&dims) {
            let x = self.index(i)?;
            let k = match consteval::eval(&x) {
                Ok(ConstValue::Int(k)) if (0..i128::from(dim)).contains(&k) => k as u64,
                _ => {
                    let d = Diagnostic::error(
                        format!("index register array `{name}` with a constant below {dim}"),
                        i.span,
                    );
                    return Err(self.error(d));
                }
            };
            first = first * u64::from(dim) + k;
        }
        Ok((var, (first * u64::from(row)) as u32, row, *elem))
    }

    /// Reading `acc[i][j]` of a register array, and a fragment register after it (`a[i][0]`).
    fn array_element(&mut self, e: &ast::Expr) -> Res<ir::Expr> {
        let (var, index, elem, rest) = self.array_index(e)?;
        let element = mk(ir::ExprKind::Element { var, index }, elem.clone(), e.span);
        match (rest.as_slice(), &elem) {
            ([], _) => Ok(element),
            ([reg], Type::Frag(frag)) => self.frag_element(element, *frag, reg, e.span),
            _ => {
                let d =
                    Diagnostic::error(format!("cannot index an element of type `{elem}`"), e.span);
                Err(self.error(d))
            }
        }
    }

    /// The target of `acc[i][j] = ...`: the array, its index and the element type.
    pub fn element_target(&mut self, e: &ast::Expr) -> Res<(ir::VarId, Vec<u32>, Type)> {
        let (var, index, elem, rest) = self.array_index(e)?;
        if !rest.is_empty() {
            let d = Diagnostic::error(
                format!("cannot assign into an element of type `{elem}`; assign the whole element"),
                e.span,
            );
            return Err(self.error(d));
        }
        Ok((var, index, elem))
    }

    /// Whether the index expression `e` indexes a shared array (`s[i][j]`).
    pub fn indexes_shared(&self, e: &ast::Expr) -> bool {
        let mut root = e;
        while let ExprKind::Index(base, _) = &root.kind {
            root = base;
        }
        matches!(&root.kind, ExprKind::Name(n) if matches!(self.lookup(n), Some(Binding::Shared(_))))
    }

    /// The element `b[index]` of the checked view `b`.
    fn view_place(
        &mut self,
        b: ir::Expr,
        base: &ast::Expr,
        index: &ast::Expr,
        span: Span,
    ) -> Res<Place> {
        let Type::View { elem, mutable, .. } = b.ty.clone() else {
            let why = match b.ty {
                Type::Frag(_) => "fragment elements can be read but not written; build a new fragment with `frag(...)`",
                _ => "only views and shared arrays can be indexed",
            };
            let d = Diagnostic::error(
                format!("cannot index a value of type `{}` here; {why}", b.ty),
                base.span,
            );
            return Err(self.error(d));
        };
        let index = self.index(index)?;
        let decl = match &b.kind {
            ir::ExprKind::Var(id) => {
                let v = &self.vars[id.0 as usize];
                Some((v.name.clone(), v.ty.clone(), v.span))
            }
            _ => None,
        };
        let ty = b.ty.clone();
        let ptr = mk(
            ir::ExprKind::Offset {
                base: Box::new(b),
                index: Box::new(index),
            },
            ty,
            span,
        );
        Ok(Place {
            ptr,
            elem: *elem,
            mutable,
            decl,
        })
    }

    /// `s[i][j]` of a `[D0][D1]` array: offset `i * D1 + j`, computed in u32 (u64 if any index is
    /// 64-bit). A single index is used as it is. With a layout the last two indices are a row
    /// `r` and column `c` of a tile: the row stride is `D1 + P` for `pad(P)`, and `swizzle`
    /// stores column `c` at `((c / E) ^ (r / (8 / RC) % RC)) * E + c % E` (E elements per
    /// 16-byte chunk, RC chunks per row), so `r` and `c` are evaluated twice.
    fn shared_place(
        &mut self,
        id: ir::SharedId,
        root: &ast::Expr,
        indices: &[&ast::Expr],
        span: Span,
    ) -> Res<Place> {
        let array = &self.shared[id.0 as usize];
        let (name, dims, elem, layout) = (
            array.name.clone(),
            array.dims.clone(),
            array.elem.clone(),
            array.layout,
        );
        if indices.len() != dims.len() {
            let dims_text = match dims.len() {
                1 => "1 dimension".to_string(),
                n => format!("{n} dimensions"),
            };
            let given = match indices.len() {
                1 => "1 index was".to_string(),
                n => format!("{n} indices were"),
            };
            let d = Diagnostic::error(
                format!("shared array `{name}` has {dims_text} but {given} given"),
                span,
            );
            return Err(self.error(d));
        }
        let checked: Vec<Res<ir::Expr>> = indices.iter().map(|i| self.index(i)).collect();
        let mut xs = checked.into_iter().collect::<Res<Vec<_>>>()?;
        if let ir::TileLayout::Swizzled { .. } = layout {
            for (x, i) in xs.iter().zip(indices).rev().take(2) {
                if ir::has_effects(x) {
                    let d = Diagnostic::error(
                        format!("the row and column of swizzled shared array `{name}` are used twice; bind this index with `let` first"),
                        i.span,
                    );
                    return Err(self.error(d));
                }
            }
        }
        // With a layout, a row `e + C` (C constant) is addressed as C rows past row `e`: a
        // separate offset, so that it becomes an address immediate (see `split_constant_rows`).
        let mut row_split: Option<i128> = None;
        // With a layout, the outer indices (whole tiles) are an offset of their own too, so the
        // tile's address is computed once for all rows and columns of it.
        let mut tile_split: Option<ir::Expr> = None;
        let offset = if xs.len() == 1 {
            xs.remove(0)
        } else {
            let s = if xs.iter().any(|x| x.ty.size() == 8) {
                Scalar::U64
            } else {
                Scalar::U32
            };
            let ty = Type::Scalar(s);
            let convert = |x: ir::Expr| {
                if x.ty == ty {
                    x
                } else {
                    let span = x.span;
                    mk(ir::ExprKind::Cast(Box::new(x)), ty.clone(), span)
                }
            };
            let bin = |op: BinOp, a: ir::Expr, b: ir::Expr| {
                let span = a.span.to(b.span);
                mk(
                    ir::ExprKind::Binary(op, Box::new(a), Box::new(b)),
                    ty.clone(),
                    span,
                )
            };
            let konst = |v: u64, span: Span| int_const(i128::from(v), s, span);
            let cols = *dims.last().expect("two or more dimensions");
            let row_stride = match layout {
                ir::TileLayout::Padded(p) => cols + u64::from(p),
                _ => cols,
            };
            let mut xs: Vec<ir::Expr> = xs.into_iter().map(convert).collect();
            let col = xs.pop().expect("two or more indices");
            if layout != ir::TileLayout::RowMajor {
                let row = xs.pop().expect("two or more indices");
                let (row, rows_after) = split_constant_rows(row, layout);
                if rows_after != 0 {
                    row_split = Some(rows_after * row_stride as i128);
                }
                if !xs.is_empty() {
                    let mut outer = xs.remove(0);
                    for (x, dim) in xs.drain(..).zip(&dims[1..dims.len() - 2]) {
                        let span = outer.span.to(x.span);
                        outer = bin(BinOp::Add, bin(BinOp::Mul, outer, konst(*dim, span)), x);
                    }
                    let span = outer.span;
                    let tile = dims[dims.len() - 2] * row_stride;
                    tile_split = Some(bin(BinOp::Mul, outer, konst(tile, span)));
                }
                xs.push(row);
            }
            let row = xs.last().cloned().expect("two or more indices");
            let mut acc = xs.remove(0);
            for (x, dim) in xs.into_iter().zip(&dims[1..dims.len() - 1]) {
                let span = acc.span.to(x.span);
                acc = bin(BinOp::Add, bin(BinOp::Mul, acc, konst(*dim, span)), x);
            }
            let span = acc.span;
            let row_start = bin(BinOp::Mul, acc, konst(row_stride, span));
            let col = match layout {
                ir::TileLayout::Swizzled { row_chunks } => {
                    let chunk = 16 / u64::from(elem.size());
                    let rc = u64::from(row_chunks);
                    let at = col.span;
                    let chunk_of_col = bin(BinOp::Div, col.clone(), konst(chunk, at));
                    let line_rows = bin(BinOp::Div, row, konst(8 / rc, at));
                    let key = bin(BinOp::Rem, line_rows, konst(rc, at));
                    let moved = bin(BinOp::Xor, chunk_of_col, key);
                    let within = bin(BinOp::Rem, col, konst(chunk, at));
                    bin(BinOp::Add, bin(BinOp::Mul, moved, konst(chunk, at)), within)
                }
                _ => col,
            };
            bin(BinOp::Add, row_start, col)
        };
        let view = Type::View {
            space: Space::Shared,
            elem: Box::new(elem.clone()),
            mutable: true,
        };
        let base = mk(ir::ExprKind::SharedArray(id), view.clone(), root.span);
        let index_ty = offset.ty.scalar().unwrap_or(Scalar::U32);
        let at = |base: ir::Expr, index: ir::Expr| {
            mk(
                ir::ExprKind::Offset {
                    base: Box::new(base),
                    index: Box::new(index),
                },
                view.clone(),
                span,
            )
        };
        let tile = match tile_split {
            Some(tile) => at(base, tile),
            None => base,
        };
        let mut ptr = at(tile, offset);
        if let Some(elements) = row_split {
            ptr = mk(
                ir::ExprKind::Offset {
                    base: Box::new(ptr),
                    index: Box::new(int_const(elements, index_ty, span)),
                },
                view,
                span,
            );
        }
        Ok(Place {
            ptr,
            elem,
            mutable: true,
            decl: None,
        })
    }

    pub fn check_writable(&mut self, place: &Place, span: Span) -> Res<()> {
        if place.mutable {
            return Ok(());
        }
        let d = match &place.decl {
            Some((name, ty, decl)) => {
                let mut_ty = match ty {
                    Type::View { space, elem, .. } => Type::View {
                        space: *space,
                        elem: elem.clone(),
                        mutable: true,
                    },
                    other => other.clone(),
                };
                Diagnostic::error(
                    format!("cannot write through `{name}`: it is a read-only view (`{ty}`)"),
                    span,
                )
                .with_note(
                    format!("`{name}` declared here; declare it `{mut_ty}` to write through it"),
                    Some(*decl),
                )
            }
            None => Diagnostic::error("cannot write through a read-only view", span),
        };
        Err(self.error(d))
    }

    /// A literal where a fragment is wanted: every element of the fragment has its value.
    fn frag_fill(&mut self, e: &ast::Expr, frag: ir::Frag) -> Res<ir::Expr> {
        let x = self.value(e, Some(&Type::Scalar(frag.elem)))?;
        let ir::ExprKind::Const(c) = x.kind else {
            let d = Diagnostic::error(
                "a fragment can only be filled with a single literal",
                e.span,
            );
            return Err(self.error(d));
        };
        Ok(mk(ir::ExprKind::Const(c), Type::Frag(frag), e.span))
    }

    /// A literal where an array is wanted: every element gets its value (every register of a
    /// fragment element, every lane of a vector one).
    fn array_fill(&mut self, e: &ast::Expr, ty: &Type) -> Res<ir::Expr> {
        let Type::Array { elem, .. } = ty else {
            unreachable!("called for arrays")
        };
        let fill = match **elem {
            Type::Vector(s, _) => Type::Scalar(s),
            ref t => t.clone(),
        };
        let x = self.expect(e, &fill, "an array's fill value")?;
        let ir::ExprKind::Const(c) = x.kind else {
            let d = Diagnostic::error("an array can only be filled with a single literal", e.span);
            return Err(self.error(d));
        };
        Ok(mk(ir::ExprKind::Const(c), ty.clone(), e.span))
    }

    /// `f[i]` of a fragment: register `i` (an element of an accumulator), `i` a constant.
    fn frag_element(
        &mut self,
        f: ir::Expr,
        frag: ir::Frag,
        index: &ast::Expr,
        span: Span,
    ) -> Res<ir::Expr> {
        let i = self.index(index)?;
        let n = frag.regs();
        let what = "a fragment index";
        match super::eval_or_report(self.ck, &i, what)? {
            ConstValue::Int(k) if (0..i128::from(n)).contains(&k) => Ok(mk(
                ir::ExprKind::Extract(Box::new(f), k as u8),
                frag.reg_type(),
                span,
            )),
            _ => {
                let d = Diagnostic::error(
                    format!("`{}` has {n} registers: the index must be below {n}", f.ty),
                    index.span,
                );
                Err(self.error(d))
            }
        }
    }

    /// `bitcast<T>(x)`: the same bits as another scalar or vector type of the same size, or the
    /// same address as a view of another element type (in the same space, no more mutable).
    fn bitcast(&mut self, inner: &ast::Expr, ty: &ast::TypeExpr, span: Span) -> Res<ir::Expr> {
        let to = types::resolve(self.ck, ty, types::Usage::Bitcast);
        let x = self.value(inner, None)?;
        let to = to?;
        if let (Type::View { .. }, _) | (_, Type::View { .. }) = (&x.ty, &to) {
            return self.view_bitcast(x, to, span);
        }
        let plain = |t: &Type| match t {
            Type::Scalar(s) | Type::Vector(s, _) => *s != Scalar::Bool,
            _ => false,
        };
        if !plain(&x.ty) || !plain(&to) || x.ty.size() != to.size() {
            let d = Diagnostic::error(
                format!(
                    "cannot bitcast `{}` ({} bytes) to `{to}` ({} bytes): bitcasts reinterpret non-bool scalars and vectors of one size",
                    x.ty,
                    x.ty.size(),
                    to.size()
                ),
                span,
            );
            return Err(self.error(d));
        }
        Ok(mk(ir::ExprKind::Bitcast(Box::new(x)), to, span))
    }

    /// `bitcast<global [f32x2]>(y + n)`: the view's address with another element type, so that
    /// one access moves several elements (its alignment is the program's to keep).
    fn view_bitcast(&mut self, x: ir::Expr, to: Type, span: Span) -> Res<ir::Expr> {
        let why = match (&x.ty, &to) {
            (
                Type::View {
                    space: from_space,
                    mutable: from_mut,
                    ..
                },
                Type::View { space, mutable, .. },
            ) => {
                if from_space != space {
                    Some("a view keeps its memory space")
                } else if *mutable && !from_mut {
                    Some("a bitcast cannot make a view mutable")
                } else {
                    None
                }
            }
            _ => Some("views bitcast only to views"),
        };
        match why {
            None => Ok(mk(ir::ExprKind::Bitcast(Box::new(x)), to, span)),
            Some(why) => {
                let d =
                    Diagnostic::error(format!("cannot bitcast `{}` to `{to}`: {why}", x.ty), span);
                Err(self.error(d))
            }
        }
    }

    fn unary(
        &mut self,
        op: UnOp,
        inner: &ast::Expr,
        want: Option<&Type>,
        span: Span,
    ) -> Res<ir::Expr> {
        let x = self.value(inner, want)?;
        let ok = match (op, &x.ty) {
            (UnOp::Neg, Type::Scalar(s) | Type::Vector(s, _)) => s.is_float() || s.is_signed(),
            (UnOp::Not, Type::Scalar(s) | Type::Vector(s, _)) => s.is_int() || *s == Scalar::Bool,
            _ => false,
        };
        if !ok {
            let sym = if op == UnOp::Neg { "-" } else { "!" };
            let d = Diagnostic::error(
                format!("unary `{sym}` cannot be applied to `{}`", x.ty),
                span,
            );
            return Err(self.error(d));
        }
        let ty = x.ty.clone();
        Ok(mk(ir::ExprKind::Unary(op, Box::new(x)), ty, span))
    }

    /// `x op y` for already checked operands.
    pub fn binary_typed(
        &mut self,
        op: BinOp,
        x: ir::Expr,
        y: ir::Expr,
        span: Span,
    ) -> Res<ir::Expr> {
        let sym = op.symbol();
        if x.ty != y.ty {
            let d = Diagnostic::error(
                format!(
                    "mismatched types: `{sym}` needs operands of one type, found `{}` and `{}`",
                    x.ty, y.ty
                ),
                span,
            );
            return Err(self.error(d));
        }
        let ty = &x.ty;
        let scalar = matches!(ty, Type::Scalar(_));
        let ok = match op {
            BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Rem => is_numeric(ty),
            BinOp::And | BinOp::Or | BinOp::Xor => is_int(ty) || *ty == Type::Scalar(Scalar::Bool),
            BinOp::Shl | BinOp::Shr => is_int(ty),
            BinOp::Eq | BinOp::Ne => scalar,
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => scalar && is_numeric(ty),
        };
        if !ok {
            let d = Diagnostic::error(format!("`{sym}` cannot be applied to `{ty}`"), span);
            return Err(self.error(d));
        }
        let result = if op.is_comparison() {
            Type::Scalar(Scalar::Bool)
        } else {
            ty.clone()
        };
        Ok(mk(
            ir::ExprKind::Binary(op, Box::new(x), Box::new(y)),
            result,
            span,
        ))
    }

    fn cast(&mut self, inner: &ast::Expr, ty: &ast::TypeExpr, span: Span) -> Res<ir::Expr> {
        let to = types::resolve(self.ck, ty, types::Usage::Cast);
        let x = self.value(inner, None)?;
        let to = to?;
        let ok = match (&x.ty, &to) {
            (Type::Scalar(_), Type::Scalar(_)) => true,
            (Type::Vector(_, a), Type::Vector(_, b)) => a == b,
            _ => false,
        };
        if !ok {
            let d = Diagnostic::error(format!("cannot cast `{}` to `{to}`", x.ty), span);
            return Err(self.error(d));
        }
        if x.ty == to {
            return Ok(x);
        }
        Ok(mk(ir::ExprKind::Cast(Box::new(x)), to, span))
    }
}

/// `s[i][j]` as its root `s` and the indices `[i, j]`.
fn peel_indices(e: &ast::Expr) -> (&ast::Expr, Vec<&ast::Expr>) {
    let mut indices = Vec::new();
    let mut root = e;
    while let ExprKind::Index(base, index) = &root.kind {
        indices.push(index.as_ref());
        root = base;
    }
    indices.reverse();
    (root, indices)
}

/// A laid-out tile's row index `e + C` or `C + e` with C a compile-time constant (a multiple of
/// 8 for `swizzle`, whose pattern repeats every 8 rows) as (`e`, C): the checker addresses it as
/// C rows past row `e`, so the constant part is an address immediate rather than part of the
/// 32-bit index (whose widening to an address would keep it from folding). Anything else is
/// (row, 0).
fn split_constant_rows(row: ir::Expr, layout: ir::TileLayout) -> (ir::Expr, i128) {
    let period = match layout {
        ir::TileLayout::Swizzled { .. } => 8,
        _ => 1,
    };
    let constant = |x: &ir::Expr| match consteval::eval(x) {
        Ok(ConstValue::Int(c)) if c % period == 0 => Some(c),
        _ => None,
    };
    if let ir::ExprKind::Binary(BinOp::Add, a, b) = &row.kind {
        if let Some(c) = constant(b) {
            return (*a.clone(), c);
        }
        if let Some(c) = constant(a) {
            return (*b.clone(), c);
        }
    }
    (row, 0)
}
