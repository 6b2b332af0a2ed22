//! Checking function bodies: scopes, variables and statements.

use std::collections::HashMap;

use super::expr::mk;
use super::{builtins, eval_or_report, Checker, Lookup, Reported, Res};
use crate::ast::{self, ExprKind, StmtKind};
use crate::consteval::{self, ConstError};
use crate::diag::{Diagnostic, Span};
use crate::ir::{self, ConstValue, Scalar, SharedId, Space, Type, VarId};

/// What kind of code is being checked.
pub enum Context {
    /// A constant's value or a compile-time parameter's default: no variables.
    Const,
    Device {
        ret: Type,
    },
    Kernel,
}

/// What a name in scope stands for.
#[derive(Clone, Debug)]
pub enum Binding {
    Var(VarId),
    Shared(SharedId),
    /// A tensor map, by index into the kernel's `tensor_maps` (only `tma_load`, `tma_prefetch`,
    /// `tma_store` and functions' `tensor_map<T>` parameters take it).
    TensorMap(u32),
    /// A compile-time parameter.
    Const(Scalar, ConstValue),
    /// A variable whose declaration failed to check; uses are not reported again.
    Poisoned,
}

/// The loops around the statement being checked, innermost last.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum LoopKind {
    Run,
    /// An `unroll` loop: its iterations are copied out, so nothing can jump out of them.
    Unrolled,
    /// The copy or compute block of a `pipeline`: every thread must reach the commits, waits
    /// and barriers around it, so nothing can jump out of it.
    Pipeline,
}

/// Most iterations an `unroll` loop may have: each is a copy of the body.
const MAX_UNROLL: i128 = 256;

/// Most stages a `pipeline` may have (its waits leave at most 7 groups in flight).
const MAX_STAGES: i128 = 8;

/// Most elements a register array may have.
const MAX_ARRAY_ELEMS: u64 = 1024;

/// How a variable came to be, for the message when it is assigned.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Origin {
    Param,
    Let,
    Var,
    Loop,
}

pub struct FnCx<'c, 'a> {
    pub ck: &'c mut Checker<'a>,
    pub file: u32,
    pub context: Context,
    pub vars: Vec<ir::Var>,
    origins: Vec<Origin>,
    pub shared: Vec<ir::SharedArray>,
    pub tensor_maps: Vec<ir::TensorMap>,
    scopes: Vec<HashMap<String, (Binding, Span)>>,
    loops: Vec<LoopKind>,
    /// Device functions called, by index into `Checker::fns`, with the call's span.
    pub calls: Vec<(usize, Span)>,
    errors_before: usize,
}

impl<'c, 'a> FnCx<'c, 'a> {
    pub fn new(ck: &'c mut Checker<'a>, file: u32, context: Context) -> Self {
        let errors_before = ck.diags.len();
        FnCx {
            ck,
            file,
            context,
            vars: Vec::new(),
            origins: Vec::new(),
            shared: Vec::new(),
            tensor_maps: Vec::new(),
            scopes: vec![HashMap::new()],
            loops: Vec::new(),
            calls: Vec::new(),
            errors_before,
        }
    }

    /// The variables, shared arrays and calls, and whether any error was reported meanwhile.
    #[allow(clippy::type_complexity)]
    pub fn finish(self) -> (Vec<ir::Var>, Vec<ir::SharedArray>, Vec<(usize, Span)>, bool) {
        let failed = self.failed();
        (self.vars, self.shared, self.calls, failed)
    }

    /// Whether an error was reported since this function's checking began.
    pub fn failed(&self) -> bool {
        self.ck.diags.len() > self.errors_before
    }

    pub fn error(&mut self, d: Diagnostic) -> Reported {
        self.ck.error(d)
    }

    pub fn lookup(&self, name: &str) -> Option<&Binding> {
        self.scopes
            .iter()
            .rev()
            .find_map(|s| s.get(name))
            .map(|(b, _)| b)
    }

    /// Names bound in any open scope, for suggestions.
    pub fn scope_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .scopes
            .iter()
            .flat_map(|s| s.keys().map(String::as_str))
            .collect();
        names.sort_unstable();
        names
    }

    pub fn bind(&mut self, name: &str, binding: Binding, span: Span) {
        if let Some(scope) = self.scopes.last_mut() {
            scope.insert(name.to_string(), (binding, span));
        }
    }

    fn new_var(&mut self, name: &str, ty: Type, origin: Origin, span: Span) -> VarId {
        let id = self.hidden_var(name, ty, origin, span);
        self.bind(name, Binding::Var(id), span);
        id
    }

    /// A variable that no name in scope refers to (made by a desugaring).
    fn hidden_var(&mut self, name: &str, ty: Type, origin: Origin, span: Span) -> VarId {
        let id = VarId(self.vars.len() as u32);
        self.vars.push(ir::Var {
            name: name.to_string(),
            ty,
            mutable: origin == Origin::Var,
            span,
        });
        self.origins.push(origin);
        id
    }

    pub fn declare_param(&mut self, name: &str, ty: Type, span: Span) -> VarId {
        if let Some((_, first)) = self.scopes.last().and_then(|s| s.get(name)) {
            let first = *first;
            self.error(
                Diagnostic::error(format!("parameter `{name}` is declared twice"), span)
                    .with_note("first declared here", Some(first)),
            );
        }
        self.new_var(name, ty, Origin::Param, span)
    }

    /// Check `e` as a compile-time constant of type `s`.
    pub fn constant(&mut self, e: &ast::Expr, s: Scalar, what: &str) -> Res<ConstValue> {
        let x = self.expect(e, &Type::Scalar(s), what)?;
        eval_or_report(self.ck, &x, what)
    }

    /// A function or kernel body: its top-level statements may declare shared arrays.
    pub fn body(&mut self, block: &ast::Block) -> ir::Block {
        self.stmts(&block.stmts, true)
    }

    fn block(&mut self, block: &ast::Block) -> ir::Block {
        self.scopes.push(HashMap::new());
        let out = self.stmts(&block.stmts, false);
        self.scopes.pop();
        out
    }

    fn stmts(&mut self, stmts: &[ast::Stmt], top: bool) -> ir::Block {
        stmts
            .iter()
            .flat_map(|s| self.stmt(s, top).unwrap_or_default())
            .collect()
    }

    /// The IR of one statement: none for a shared array declaration, several for an unrolled
    /// loop.
    fn stmt(&mut self, s: &ast::Stmt, top: bool) -> Res<Vec<ir::Stmt>> {
        let kind = match &s.kind {
            StmtKind::Let {
                mutable,
                name,
                ty,
                init,
            } => {
                if let Some(args) = self.tensor_map_call(init) {
                    let declared =
                        self.tensor_map_decl(name, *mutable, ty.is_some(), args, s.span, top);
                    if declared.is_err() {
                        self.bind(&name.name, Binding::Poisoned, name.span);
                    }
                    return declared.map(|()| Vec::new());
                }
                let init = self.let_init(ty.as_ref(), init);
                let Ok(init) = init else {
                    self.bind(&name.name, Binding::Poisoned, name.span);
                    return Err(Reported);
                };
                let ty = init.1;
                let origin = if *mutable { Origin::Var } else { Origin::Let };
                let var = self.new_var(&name.name, ty, origin, name.span);
                ir::StmtKind::Let { var, init: init.0 }
            }
            StmtKind::Shared {
                name,
                dims,
                elem,
                layout,
            } => {
                let declared = self.shared_decl(name, dims, elem, layout.as_ref(), s.span, top);
                if declared.is_err() {
                    self.bind(&name.name, Binding::Poisoned, name.span);
                }
                return declared.map(|()| Vec::new());
            }
            StmtKind::Assign { target, op, value } => self.assign(target, *op, value, s.span)?,
            StmtKind::If {
                cond,
                then_body,
                else_body,
            } => {
                let cond = self.expect(cond, &Type::Scalar(Scalar::Bool), "an `if` condition");
                let then_body = self.block(then_body);
                let else_body = else_body
                    .as_ref()
                    .map(|b| self.block(b))
                    .unwrap_or_default();
                ir::StmtKind::If {
                    cond: cond?,
                    then_body,
                    else_body,
                }
            }
            StmtKind::For {
                var,
                start,
                end,
                step,
                unroll,
                body,
            } => {
                let header = self.loop_header(var, start, end, step.as_ref(), body)?;
                if *unroll {
                    return self.unrolled_loop(var, header, body, s.span);
                }
                let (start, end, step) = header;
                self.scopes.push(HashMap::new());
                let ty = start.ty.clone();
                let var = self.new_var(&var.name, ty, Origin::Loop, var.span);
                let body = self.loop_block(LoopKind::Run, body);
                self.scopes.pop();
                ir::StmtKind::For {
                    var,
                    start,
                    end,
                    step,
                    body,
                }
            }
            StmtKind::Pipeline {
                var,
                start,
                end,
                step,
                stages,
                copy,
                compute,
            } => {
                let header = self.pipeline_header(start, end, step, stages);
                let Ok(header) = header else {
                    // Still check the blocks, so errors inside them are found.
                    for b in [copy, compute] {
                        self.scopes.push(HashMap::new());
                        self.bind(&var.name, Binding::Poisoned, var.span);
                        self.bind("stage", Binding::Poisoned, var.span);
                        self.loop_block(LoopKind::Pipeline, b);
                        self.scopes.pop();
                    }
                    return Err(Reported);
                };
                return self.pipeline(var, header, copy, compute, s.span);
            }
            StmtKind::While { cond, body } => {
                let cond = self.expect(cond, &Type::Scalar(Scalar::Bool), "a `while` condition");
                let body = self.loop_block(LoopKind::Run, body);
                ir::StmtKind::While { cond: cond?, body }
            }
            StmtKind::Break | StmtKind::Continue => {
                let word = if matches!(s.kind, StmtKind::Break) {
                    "break"
                } else {
                    "continue"
                };
                let why = match self.loops.last() {
                    None => Some(format!("`{word}` outside of a loop")),
                    Some(LoopKind::Unrolled) => Some(format!(
                        "`{word}` cannot leave an `unroll` loop: its iterations are copied out at compile time"
                    )),
                    Some(LoopKind::Pipeline) => Some(format!(
                        "`{word}` cannot leave a `pipeline` block: every thread must reach the pipeline's commits, waits and barriers"
                    )),
                    Some(LoopKind::Run) => None,
                };
                if let Some(message) = why {
                    return Err(self.error(Diagnostic::error(message, s.span)));
                }
                if word == "break" {
                    ir::StmtKind::Break
                } else {
                    ir::StmtKind::Continue
                }
            }
            StmtKind::Return(_) if self.loops.contains(&LoopKind::Pipeline) => {
                let d = Diagnostic::error(
                    "`return` cannot leave a `pipeline` block: every thread must reach the pipeline's commits, waits and barriers",
                    s.span,
                );
                return Err(self.error(d));
            }
            StmtKind::Return(value) => self.return_stmt(value.as_ref(), s.span)?,
            StmtKind::Expr(e) => self.expr_stmt(e)?,
        };
        Ok(vec![ir::Stmt { kind, span: s.span }])
    }

    /// A loop body, checked in its own scope.
    fn loop_block(&mut self, kind: LoopKind, body: &ast::Block) -> ir::Block {
        self.loops.push(kind);
        let out = self.block(body);
        self.loops.pop();
        out
    }

    fn let_init(&mut self, ty: Option<&ast::TypeExpr>, init: &ast::Expr) -> Res<(ir::Expr, Type)> {
        match ty {
            Some(t) => {
                let ty = self.local_type(t)?;
                let init = self.expect(init, &ty, "the initializer")?;
                Ok((init, ty))
            }
            None => {
                let init = self.value(init, None)?;
                let ty = init.ty.clone();
                Ok((init, ty))
            }
        }
    }

    fn shared_decl(
        &mut self,
        name: &ast::Ident,
        dims: &[ast::Expr],
        elem: &ast::TypeExpr,
        layout: Option<&ast::LayoutSpec>,
        span: Span,
        top: bool,
    ) -> Res<()> {
        if !top || !matches!(self.context, Context::Kernel) {
            let d = Diagnostic::error(
                "shared arrays can only be declared at the top level of a kernel body",
                span,
            );
            return Err(self.error(d));
        }
        if let Some(first) = self.shared.iter().find(|a| a.name == name.name) {
            let first = first.span;
            let d = Diagnostic::error(
                format!("shared array `{}` is declared twice", name.name),
                name.span,
            )
            .with_note("first declared here", Some(first));
            return Err(self.error(d));
        }
        let elem = super::types::resolve(self.ck, elem, super::types::Usage::SharedElem);
        let what = format!("shared array `{}`", name.name);
        let sizes = self.dims(dims, "shared array", &what, u64::from(u32::MAX), span)?;
        let elem = elem?;
        let layout = match layout {
            Some(spec) => self.tile_layout(spec, &what, &sizes, &elem)?,
            None => ir::TileLayout::RowMajor,
        };
        let id = SharedId(self.shared.len() as u32);
        let array = ir::SharedArray {
            name: name.name.clone(),
            elem,
            dims: sizes,
            layout,
            span: name.span,
        };
        if array.len() > u64::from(u32::MAX) {
            let d = Diagnostic::error(
                format!("{what} holds more than 2^32 - 1 elements with its padding"),
                span,
            );
            return Err(self.error(d));
        }
        self.shared.push(array);
        self.bind(&name.name, Binding::Shared(id), name.span);
        Ok(())
    }

    /// The first part of `e` the host cannot evaluate from a launch's arguments: anything but
    /// constants, the kernel's parameters, integer arithmetic, `select`, `min` and `max`.
    pub fn host_unknown(&self, e: &ir::Expr) -> Option<Span> {
        use ir::ExprKind as K;
        match &e.kind {
            K::Const(_) => None,
            K::Var(id) if self.origins[id.0 as usize] == Origin::Param => None,
            K::Unary(_, x) | K::Cast(x) => self.host_unknown(x),
            K::Binary(_, a, b) | K::Logical(_, a, b) => {
                self.host_unknown(a).or_else(|| self.host_unknown(b))
            }
            K::Select(c, a, b) => self
                .host_unknown(c)
                .or_else(|| self.host_unknown(a))
                .or_else(|| self.host_unknown(b)),
            K::Builtin(ir::Builtin::Max | ir::Builtin::Min, args) => {
                args.iter().find_map(|a| self.host_unknown(a))
            }
            _ => Some(e.span),
        }
    }

    /// The arguments of `init` when it is a call of the built-in `tensor_map` (not shadowed by
    /// a function of that name).
    fn tensor_map_call<'e>(&self, init: &'e ast::Expr) -> Option<&'e [ast::Expr]> {
        match &init.kind {
            ast::ExprKind::Call { callee, args }
                if callee.name == "tensor_map"
                    && matches!(self.ck.lookup(self.file, "tensor_map"), Lookup::Missing) =>
            {
                Some(args)
            }
            _ => None,
        }
    }

    /// `let m = tensor_map(x, rows, cols, box_rows, box_cols)` at the top of a kernel body: `x`
    /// a global view parameter of 1-, 2-, 4- or 8-byte scalars, or `x + offset` for a tensor
    /// that starts `offset` elements in; the offset, `rows` and `cols` over the scalar
    /// parameters and constants (the host evaluates them), the box constants of 1 to 256 with
    /// rows a multiple of 16 bytes.
    fn tensor_map_decl(
        &mut self,
        name: &ast::Ident,
        mutable: bool,
        typed: bool,
        args: &[ast::Expr],
        span: Span,
        top: bool,
    ) -> Res<()> {
        if !top || !matches!(self.context, Context::Kernel) || mutable || typed {
            let d = Diagnostic::error(
                "a tensor map is declared as `let name = tensor_map(...)`, without a type, at the top level of a kernel body",
                span,
            );
            return Err(self.error(d));
        }
        self.arity("tensor_map", args, 5, span)?;
        // `x + offset`: the tensor starts `offset` elements into the buffer. The parser reads
        // `x + a + b` as `(x + a) + b`, so the offset is every term after the leftmost.
        let mut base = &args[0];
        let mut terms = Vec::new();
        while let ast::ExprKind::Binary(ir::BinOp::Add, a, b) = &base.kind {
            terms.push(&**b);
            base = &**a;
        }
        let offset = terms.into_iter().rev().cloned().reduce(|a, b| ast::Expr {
            span: a.span.to(b.span),
            depth: a.depth.max(b.depth) + 1,
            kind: ast::ExprKind::Binary(ir::BinOp::Add, Box::new(a), Box::new(b)),
        });
        let param = match &base.kind {
            ast::ExprKind::Name(n) => match self.lookup(n) {
                Some(Binding::Var(id)) if self.origins[id.0 as usize] == Origin::Param => Some(*id),
                _ => None,
            },
            _ => None,
        };
        let elem = param.and_then(|id| match &self.vars[id.0 as usize].ty {
            Type::View {
                space: Space::Global,
                elem,
                ..
            } => elem.scalar().filter(|s| matches!(s.size(), 1 | 2 | 4 | 8)),
            _ => None,
        });
        let (Some(param), Some(elem)) = (param, elem) else {
            let d = Diagnostic::error(
                "the first argument of `tensor_map` must be a global view parameter of the kernel with 1-, 2-, 4- or 8-byte scalar elements",
                args[0].span,
            );
            return Err(self.error(d));
        };
        let u32_ty = Type::Scalar(Scalar::U32);
        let zero = ast::Expr {
            kind: ast::ExprKind::Int {
                value: 0,
                suffix: Some(Scalar::U32),
            },
            span: args[0].span,
            depth: 1,
        };
        let mut extents = Vec::new();
        for (a, what) in [offset.as_ref().unwrap_or(&zero), &args[1], &args[2]]
            .into_iter()
            .zip(["offset", "rows", "columns"])
        {
            let x = self.expect(a, &u32_ty, &format!("a tensor map's {what}"))?;
            if let Some(at) = self.host_unknown(&x) {
                let d = Diagnostic::error(
                    "a tensor map's offset, rows and columns may only use the kernel's scalar parameters and constants",
                    at,
                );
                return Err(self.error(d));
            }
            extents.push(x);
        }
        let mut boxes = Vec::new();
        for (a, what) in args[3..].iter().zip(["box rows", "box columns"]) {
            let v = self.constant(a, Scalar::U32, &format!("a tensor map's {what}"))?;
            match v {
                ConstValue::Int(v @ 1..=256) => boxes.push(v as u32),
                _ => {
                    let d = Diagnostic::error(
                        format!("a tensor map's {what} must be 1 to 256"),
                        a.span,
                    );
                    return Err(self.error(d));
                }
            }
        }
        let row_bytes = boxes[1] * elem.size();
        if row_bytes % 16 != 0 {
            let d = Diagnostic::error(
                format!(
                    "a tensor map's box rows must be a multiple of 16 bytes, found {row_bytes}"
                ),
                args[4].span,
            );
            return Err(self.error(d));
        }
        let [offset, rows, cols]: [ir::Expr; 3] = extents.try_into().map_err(|_| Reported)?;
        self.tensor_maps.push(ir::TensorMap {
            name: name.name.clone(),
            param,
            elem,
            offset,
            rows,
            cols,
            box_rows: boxes[0],
            box_cols: boxes[1],
            span: name.span,
        });
        let id = self.tensor_maps.len() as u32 - 1;
        self.bind(&name.name, Binding::TensorMap(id), name.span);
        Ok(())
    }

    /// The layout `spec` of shared array `what` (dimensions `dims`, elements `elem`): `swizzle`
    /// needs rows of 1 to 8 (a power of two) whole 16-byte chunks of elements that divide a
    /// chunk, `pad(P)` a positive constant P; both need rows (two dimensions or more).
    fn tile_layout(
        &mut self,
        spec: &ast::LayoutSpec,
        what: &str,
        dims: &[u64],
        elem: &Type,
    ) -> Res<ir::TileLayout> {
        let word = spec.word.name.as_str();
        let arg = match (word, &spec.arg) {
            ("swizzle", None) => None,
            ("pad", Some(arg)) => Some(arg),
            ("swizzle", Some(arg)) => {
                let d = Diagnostic::error("`swizzle` takes no argument", arg.span);
                return Err(self.error(d));
            }
            ("pad", None) => {
                let d = Diagnostic::error(
                    "`pad` needs the number of elements to add to every row: `pad(8)`",
                    spec.span,
                );
                return Err(self.error(d));
            }
            _ => {
                let d = Diagnostic::error(
                    format!(
                        "unknown shared-memory layout `{word}`; expected `swizzle` or `pad(N)`"
                    ),
                    spec.word.span,
                );
                return Err(self.error(d));
            }
        };
        let Some(&cols) = dims.last().filter(|_| dims.len() >= 2) else {
            let d = Diagnostic::error(
                format!(
                    "`{word}` lays out rows: {what} needs two dimensions or more ([rows][columns])"
                ),
                spec.span,
            );
            return Err(self.error(d));
        };
        if let Some(arg) = arg {
            let pad = match self.constant(arg, Scalar::U32, "the padding of a shared array")? {
                ConstValue::Int(p) if p > 0 => p as u32,
                v => {
                    let d = Diagnostic::error(
                        format!(
                            "the padding of a shared array is a positive number of elements, not {}",
                            crate::print::const_text(&v)
                        ),
                        arg.span,
                    );
                    return Err(self.error(d));
                }
            };
            return Ok(ir::TileLayout::Padded(pad));
        }
        let size = elem.size() as u64;
        let row_bytes = cols * size;
        let why = if !16u64.is_multiple_of(size) {
            Some(format!(
                "its `{elem}` elements ({size} bytes) do not divide a 16-byte chunk"
            ))
        } else if !row_bytes.is_multiple_of(16) {
            Some(format!(
                "its rows of {cols} `{elem}` are {row_bytes} bytes, not whole 16-byte chunks"
            ))
        } else if !(row_bytes / 16).is_power_of_two() || row_bytes / 16 > 8 {
            Some(format!(
                "its rows are {} 16-byte chunks; the swizzle needs 1, 2, 4 or 8 (rows of at most 128 bytes)",
                row_bytes / 16
            ))
        } else {
            None
        };
        if let Some(why) = why {
            let d = Diagnostic::error(format!("{what} cannot be swizzled: {why}"), spec.span);
            return Err(self.error(d));
        }
        Ok(ir::TileLayout::Swizzled {
            row_chunks: (row_bytes / 16) as u32,
        })
    }

    /// The dimensions of a `kind` array (`what` names it), positive compile-time integers with
    /// at most `max` elements in all.
    fn dims(
        &mut self,
        dims: &[ast::Expr],
        kind: &str,
        what: &str,
        max: u64,
        span: Span,
    ) -> Res<Vec<u64>> {
        let mut sizes = Vec::new();
        let mut len: u64 = 1;
        for d in dims {
            let x = self.value(d, Some(&Type::Scalar(Scalar::U32)))?;
            if !x.ty.scalar().is_some_and(Scalar::is_int) {
                let d = Diagnostic::error(
                    format!("{kind} dimensions must be integers, found `{}`", x.ty),
                    d.span,
                );
                return Err(self.error(d));
            }
            let v = eval_or_report(self.ck, &x, &format!("a {kind} dimension"))?;
            let n = match v {
                ConstValue::Int(n) if n > 0 => u64::try_from(n).ok(),
                _ => {
                    let d = Diagnostic::error(
                        format!(
                            "{what} has a dimension of {}: dimensions must be positive",
                            crate::print::const_text(&v)
                        ),
                        d.span,
                    );
                    return Err(self.error(d));
                }
            };
            len = match n.and_then(|n| len.checked_mul(n)) {
                Some(len) if len <= max => len,
                _ => {
                    let d = Diagnostic::error(
                        format!("{what} is too large: at most {max} elements"),
                        span,
                    );
                    return Err(self.error(d));
                }
            };
            sizes.push(n.unwrap_or(0));
        }
        Ok(sizes)
    }

    /// The declared type of a local: register arrays take their dimensions from constants and
    /// compile-time parameters, which only the function's scope knows.
    fn local_type(&mut self, t: &ast::TypeExpr) -> Res<Type> {
        let ast::TypeExpr::Array { dims, elem, span } = t else {
            return super::types::resolve(self.ck, t, super::types::Usage::Local);
        };
        let elem = super::types::resolve(self.ck, elem, super::types::Usage::Local);
        let dims = self.dims(
            dims,
            "register array",
            "a register array",
            MAX_ARRAY_ELEMS,
            *span,
        )?;
        let elem = elem?;
        if let Type::View { .. } = elem {
            let d = Diagnostic::error(
                format!("type `{elem}` cannot be an array element: elements must be scalars, vectors or fragments"),
                *span,
            );
            return Err(self.error(d));
        }
        Ok(Type::Array {
            elem: Box::new(elem),
            // The product is at most MAX_ARRAY_ELEMS, so every dimension fits.
            dims: dims.into_iter().map(|d| d as u32).collect(),
        })
    }

    fn assign(
        &mut self,
        target: &ast::Expr,
        op: Option<ir::BinOp>,
        value: &ast::Expr,
        span: Span,
    ) -> Res<ir::StmtKind> {
        match &target.kind {
            ExprKind::Name(n) => {
                let var = match self.lookup(n).cloned() {
                    Some(Binding::Var(id)) => id,
                    Some(Binding::Poisoned) => return Err(Reported),
                    Some(Binding::Shared(_)) => {
                        let d = Diagnostic::error(
                            format!("cannot assign to shared array `{n}`; assign to its elements, `{n}[i] = ...`"),
                            target.span,
                        );
                        return Err(self.error(d));
                    }
                    Some(Binding::TensorMap(_)) => {
                        let d = Diagnostic::error(
                            format!("cannot assign to tensor map `{n}`"),
                            target.span,
                        );
                        return Err(self.error(d));
                    }
                    Some(Binding::Const(..)) => {
                        let d = Diagnostic::error(
                            format!("cannot assign to compile-time parameter `{n}`"),
                            target.span,
                        );
                        return Err(self.error(d));
                    }
                    None => {
                        // Report an unknown name, or that the name is not a variable.
                        self.value(target, None)?;
                        let d = Diagnostic::error(
                            format!("cannot assign to `{n}`: it is not a variable"),
                            target.span,
                        );
                        return Err(self.error(d));
                    }
                };
                self.check_mutable(var, target.span)?;
                let ty = self.vars[var.0 as usize].ty.clone();
                let value = match op {
                    None => self.expect(value, &ty, "the assigned value")?,
                    Some(op) => {
                        let current = ir::Expr {
                            kind: ir::ExprKind::Var(var),
                            ty: ty.clone(),
                            span: target.span,
                        };
                        self.compound(op, current, value, &ty, span)?
                    }
                };
                Ok(ir::StmtKind::Assign { var, value })
            }
            ExprKind::Index(..) if self.indexed_array(target).is_some() => {
                let (var, index, elem) = self.element_target(target)?;
                self.check_mutable(var, target.span)?;
                let value = match op {
                    None => self.expect(value, &elem, "the assigned value")?,
                    Some(op) => {
                        let current = ir::Expr {
                            kind: ir::ExprKind::Element {
                                var,
                                index: index.clone(),
                            },
                            ty: elem.clone(),
                            span: target.span,
                        };
                        self.compound(op, current, value, &elem, span)?
                    }
                };
                Ok(ir::StmtKind::SetElement { var, index, value })
            }
            ExprKind::Index(..) => {
                let place = self.place(target)?;
                self.check_writable(&place, target.span)?;
                let value = match op {
                    None => self.expect(value, &place.elem, "the stored value")?,
                    Some(op) => {
                        let current = ir::Expr {
                            kind: ir::ExprKind::Load(Box::new(place.ptr.clone())),
                            ty: place.elem.clone(),
                            span: target.span,
                        };
                        self.compound(op, current, value, &place.elem, span)?
                    }
                };
                Ok(ir::StmtKind::Store {
                    ptr: place.ptr,
                    value,
                })
            }
            ExprKind::Field(..) => {
                let d = Diagnostic::error(
                    "cannot assign to a vector component; build a new vector instead",
                    target.span,
                );
                Err(self.error(d))
            }
            _ => {
                let d = Diagnostic::error("this cannot be assigned to", target.span);
                Err(self.error(d))
            }
        }
    }

    /// `current op= value`, desugared to `current op value` of the target's type.
    fn compound(
        &mut self,
        op: ir::BinOp,
        current: ir::Expr,
        value: &ast::Expr,
        ty: &Type,
        span: Span,
    ) -> Res<ir::Expr> {
        let value = self.value(value, Some(ty))?;
        let result = self.binary_typed(op, current, value, span)?;
        if &result.ty != ty {
            let d = Diagnostic::error(
                format!("mismatched types: expected `{ty}`, found `{}`", result.ty),
                span,
            );
            return Err(self.error(d));
        }
        Ok(result)
    }

    pub(super) fn check_mutable(&mut self, var: VarId, span: Span) -> Res<()> {
        let v = &self.vars[var.0 as usize];
        let (name, decl) = (v.name.clone(), v.span);
        let (message, note) = match self.origins[var.0 as usize] {
            Origin::Var => return Ok(()),
            Origin::Let => (
                format!("cannot assign to `{name}`: it is declared with `let`"),
                format!("`{name}` declared here; use `var` to make it mutable"),
            ),
            Origin::Param => (
                format!("cannot assign to parameter `{name}`"),
                format!("`{name}` declared here; copy it into a `var` to change it"),
            ),
            Origin::Loop => (
                format!("cannot assign to loop variable `{name}`"),
                format!("`{name}` declared here"),
            ),
        };
        let d = Diagnostic::error(message, span).with_note(note, Some(decl));
        Err(self.error(d))
    }

    /// A `for` header: the bounds and the step (1 if not given), of the loop variable's type.
    fn loop_header(
        &mut self,
        var: &ast::Ident,
        start: &ast::Expr,
        end: &ast::Expr,
        step: Option<&ast::Expr>,
        body: &ast::Block,
    ) -> Res<(ir::Expr, ir::Expr, ir::Expr)> {
        let bounds = self.unify(start, end, None);
        let (start, end) = match bounds {
            Ok(b) => b,
            Err(r) => {
                self.check_loop_body(var, body);
                return Err(r);
            }
        };
        let ty = start.ty.clone();
        let bad = if start.ty != end.ty {
            Some(format!(
                "mismatched types: the loop runs from `{}` to `{}`",
                start.ty, end.ty
            ))
        } else if !ty.scalar().is_some_and(Scalar::is_int) {
            Some(format!("loop bounds must be integers, found `{ty}`"))
        } else {
            None
        };
        if let Some(message) = bad {
            self.error(Diagnostic::error(message, start.span.to(end.span)));
            self.check_loop_body(var, body);
            return Err(Reported);
        }
        let step = match step {
            Some(s) => {
                let x = self.expect(s, &ty, "the loop step")?;
                match consteval::eval(&x) {
                    Ok(ConstValue::Int(v)) if v <= 0 => {
                        let d = Diagnostic::error(
                            format!("loop step must be positive, found {v}"),
                            x.span,
                        );
                        return Err(self.error(d));
                    }
                    Ok(_) | Err(ConstError::NotConst(_)) => x,
                    Err(other) => {
                        return Err(self.error(Diagnostic::error(other.message(), other.span())))
                    }
                }
            }
            None => ir::Expr {
                kind: ir::ExprKind::Const(ConstValue::Int(1)),
                ty: ty.clone(),
                span: var.span,
            },
        };
        Ok((start, end, step))
    }

    /// `for i in a..b step s unroll { body }`: the body is checked once per iteration with `i`
    /// bound to that iteration's value as a constant, and the copies follow each other. So a
    /// register array indexed with `i` gets constant indices, and code generation and the
    /// interpreter never see the loop.
    fn unrolled_loop(
        &mut self,
        var: &ast::Ident,
        (start, end, step): (ir::Expr, ir::Expr, ir::Expr),
        body: &ast::Block,
        span: Span,
    ) -> Res<Vec<ir::Stmt>> {
        let what = "the bounds and step of an `unroll` loop";
        let (first, last, step_v) = match (
            eval_or_report(self.ck, &start, what)?,
            eval_or_report(self.ck, &end, what)?,
            eval_or_report(self.ck, &step, what)?,
        ) {
            (ConstValue::Int(a), ConstValue::Int(b), ConstValue::Int(s)) => (a, b, s),
            _ => unreachable!("loop bounds are integers"),
        };
        let trips = if last > first {
            (last - first + step_v - 1) / step_v
        } else {
            0
        };
        if trips > MAX_UNROLL {
            let d = Diagnostic::error(
                format!(
                    "this `unroll` loop has {trips} iterations; at most {MAX_UNROLL} can be unrolled"
                ),
                span,
            );
            return Err(self.error(d));
        }
        let s = start.ty.scalar().ok_or(Reported)?;
        let mut out = Vec::new();
        for k in 0..trips {
            let value = first + k * step_v;
            let errors = self.ck.diags.len();
            self.scopes.push(HashMap::new());
            self.bind(
                &var.name,
                Binding::Const(s, ConstValue::Int(value)),
                var.span,
            );
            out.extend(self.loop_block(LoopKind::Unrolled, body));
            self.scopes.pop();
            // Report an error once, for the first iteration that has it.
            if self.ck.diags.len() > errors {
                let note = format!("in the iteration where `{}` = {value}", var.name);
                for d in &mut self.ck.diags[errors..] {
                    *d = d.clone().with_note(note.clone(), Some(var.span));
                }
                return Err(Reported);
            }
        }
        Ok(out)
    }

    /// The header of a `pipeline`: start, end and step as `u32`, and the stage count.
    fn pipeline_header(
        &mut self,
        start: &ast::Expr,
        end: &ast::Expr,
        step: &ast::Expr,
        stages: &ast::Expr,
    ) -> Res<(ir::Expr, ir::Expr, ir::Expr, u32)> {
        let u = Type::Scalar(Scalar::U32);
        let start = self.expect(start, &u, "the start of a `pipeline`");
        let end = self.expect(end, &u, "the end of a `pipeline`");
        let step_x = self.expect(step, &u, "the step of a `pipeline`");
        let n = self.constant(stages, Scalar::U32, "the stage count of a `pipeline`");
        let step_x = step_x?;
        match consteval::eval(&step_x) {
            Ok(ConstValue::Int(v)) if v <= 0 => {
                let d = Diagnostic::error(
                    format!("the step of a `pipeline` must be positive, found {v}"),
                    step_x.span,
                );
                return Err(self.error(d));
            }
            Ok(_) | Err(ConstError::NotConst(_)) => {}
            Err(other) => return Err(self.error(Diagnostic::error(other.message(), other.span()))),
        }
        let n = match n? {
            ConstValue::Int(n) if (1..=MAX_STAGES).contains(&n) => n as u32,
            v => {
                let d = Diagnostic::error(
                    format!(
                        "a `pipeline` has 1 to {MAX_STAGES} stages, not {}",
                        crate::print::const_text(&v)
                    ),
                    stages.span,
                );
                return Err(self.error(d));
            }
        };
        Ok((start?, end?, step_x, n))
    }

    /// `pipeline k in START..END step BK stages S { copy } compute { compute }`, desugared
    /// (see "Asynchronous copies" in docs/LANGUAGE.md): for S > 1,
    ///
    /// ```text
    /// let k_start = START; let k_end = END; let k_step = BK;
    /// // prologue, for i in 0..S-1:
    /// let k = k_start + i * k_step; let stage = i; if k < k_end { copy } cp_async_commit();
    /// var k_ring = 0; var k_fill = S - 1;
    /// for k in k_start..k_end step k_step {
    ///     cp_async_wait(S - 2); barrier();
    ///     let k = k + (S - 1) * k_step; let stage = k_fill;
    ///     if k < k_end { copy } cp_async_commit();
    ///     k_fill = select(k_fill == S - 1, 0, k_fill + 1);
    ///     let stage = k_ring;
    ///     compute
    ///     k_ring = select(k_ring == S - 1, 0, k_ring + 1);
    /// }
    /// cp_async_wait(0); barrier();
    /// ```
    ///
    /// and for S = 1 the synchronous form: per tile, `let stage = 0; copy; cp_async_commit();
    /// cp_async_wait(0); barrier(); compute; barrier();`.
    fn pipeline(
        &mut self,
        var: &ast::Ident,
        (start, end, step, n): (ir::Expr, ir::Expr, ir::Expr, u32),
        copy: &ast::Block,
        compute: &ast::Block,
        span: Span,
    ) -> Res<Vec<ir::Stmt>> {
        let u = Type::Scalar(Scalar::U32);
        let name = &var.name;
        let c = |v: i128| mk(ir::ExprKind::Const(ConstValue::Int(v)), u.clone(), span);
        let rd = |v: VarId| mk(ir::ExprKind::Var(v), u.clone(), span);
        let bin = |op: ir::BinOp, a: ir::Expr, b: ir::Expr| {
            let ty = if op.is_comparison() {
                Type::Scalar(Scalar::Bool)
            } else {
                a.ty.clone()
            };
            mk(ir::ExprKind::Binary(op, Box::new(a), Box::new(b)), ty, span)
        };
        let st = |kind: ir::StmtKind| ir::Stmt { kind, span };
        let builtin = |b: ir::Builtin| {
            st(ir::StmtKind::Expr(mk(
                ir::ExprKind::Builtin(b, vec![]),
                Type::Void,
                span,
            )))
        };
        let errors = self.ck.diags.len();
        let mut out = Vec::new();
        let hidden = |cx: &mut Self, suffix: &str, init: ir::Expr, out: &mut Vec<ir::Stmt>| {
            let v = cx.hidden_var(&format!("{name}_{suffix}"), u.clone(), Origin::Let, span);
            out.push(st(ir::StmtKind::Let { var: v, init }));
            v
        };
        let k_start = hidden(self, "start", start, &mut out);
        let k_end = hidden(self, "end", end, &mut out);
        let k_step = hidden(self, "step", step, &mut out);
        let stages = i128::from(n);

        // `copy` with `k` and `stage` bound to new `let`s of these values, guarded by
        // `k < k_end` when `guard`.
        let copy_block = |cx: &mut Self, k: ir::Expr, stage: ir::Expr, guard: bool| {
            let mut out = Vec::new();
            cx.scopes.push(HashMap::new());
            let kv = cx.new_var(name, u.clone(), Origin::Let, var.span);
            out.push(st(ir::StmtKind::Let { var: kv, init: k }));
            let sv = cx.new_var("stage", u.clone(), Origin::Let, var.span);
            out.push(st(ir::StmtKind::Let {
                var: sv,
                init: stage,
            }));
            let body = cx.loop_block(LoopKind::Pipeline, copy);
            cx.scopes.pop();
            if guard {
                out.push(ir::Stmt {
                    kind: ir::StmtKind::If {
                        cond: bin(ir::BinOp::Lt, rd(kv), rd(k_end)),
                        then_body: body,
                        else_body: Vec::new(),
                    },
                    span: copy.span,
                });
            } else {
                out.extend(body);
            }
            out
        };

        if n == 1 {
            self.scopes.push(HashMap::new());
            let kv = self.new_var(name, u.clone(), Origin::Loop, var.span);
            let mut body = copy_block(self, rd(kv), c(0), false);
            body.push(builtin(ir::Builtin::CpAsyncCommit));
            body.push(builtin(ir::Builtin::CpAsyncWait(0)));
            body.push(st(ir::StmtKind::Barrier));
            let sv = self.new_var("stage", u.clone(), Origin::Let, var.span);
            body.push(st(ir::StmtKind::Let {
                var: sv,
                init: c(0),
            }));
            body.extend(self.loop_block(LoopKind::Pipeline, compute));
            body.push(st(ir::StmtKind::Barrier));
            self.scopes.pop();
            out.push(st(ir::StmtKind::For {
                var: kv,
                start: rd(k_start),
                end: rd(k_end),
                step: rd(k_step),
                body,
            }));
        } else {
            let times_step = |i: i128| {
                if i == 1 {
                    rd(k_step)
                } else {
                    bin(ir::BinOp::Mul, c(i), rd(k_step))
                }
            };
            for i in 0..stages - 1 {
                let k = if i == 0 {
                    rd(k_start)
                } else {
                    bin(ir::BinOp::Add, rd(k_start), times_step(i))
                };
                out.extend(copy_block(self, k, c(i), true));
                out.push(builtin(ir::Builtin::CpAsyncCommit));
                if self.ck.diags.len() > errors {
                    return Err(Reported);
                }
            }
            let ring = self.hidden_var(&format!("{name}_ring"), u.clone(), Origin::Var, span);
            out.push(st(ir::StmtKind::Let {
                var: ring,
                init: c(0),
            }));
            let fill = self.hidden_var(&format!("{name}_fill"), u.clone(), Origin::Var, span);
            out.push(st(ir::StmtKind::Let {
                var: fill,
                init: c(stages - 1),
            }));
            self.scopes.push(HashMap::new());
            let kv = self.new_var(name, u.clone(), Origin::Loop, var.span);
            let mut body = vec![
                builtin(ir::Builtin::CpAsyncWait((n - 2) as u8)),
                st(ir::StmtKind::Barrier),
            ];
            // Two ring counters advanced by selects on wrap-around, as hand-written rings do:
            // `% S` costs a multiply-high sequence per tile when S is not a power of two, and
            // deriving the fill slot from the read slot costs a select more per tile.
            let select = |cond: ir::Expr, a: ir::Expr, b: ir::Expr| {
                mk(
                    ir::ExprKind::Select(Box::new(cond), Box::new(a), Box::new(b)),
                    u.clone(),
                    span,
                )
            };
            let next = bin(ir::BinOp::Add, rd(kv), times_step(stages - 1));
            let advance = |v: VarId| {
                st(ir::StmtKind::Assign {
                    var: v,
                    value: select(
                        bin(ir::BinOp::Eq, rd(v), c(stages - 1)),
                        c(0),
                        bin(ir::BinOp::Add, rd(v), c(1)),
                    ),
                })
            };
            body.extend(copy_block(self, next, rd(fill), true));
            body.push(builtin(ir::Builtin::CpAsyncCommit));
            body.push(advance(fill));
            let sv = self.new_var("stage", u.clone(), Origin::Let, var.span);
            body.push(st(ir::StmtKind::Let {
                var: sv,
                init: rd(ring),
            }));
            body.extend(self.loop_block(LoopKind::Pipeline, compute));
            body.push(advance(ring));
            self.scopes.pop();
            out.push(st(ir::StmtKind::For {
                var: kv,
                start: rd(k_start),
                end: rd(k_end),
                step: rd(k_step),
                body,
            }));
            out.push(builtin(ir::Builtin::CpAsyncWait(0)));
            out.push(st(ir::StmtKind::Barrier));
        }
        if self.ck.diags.len() > errors {
            return Err(Reported);
        }
        Ok(out)
    }

    /// Check a loop body whose header failed, so errors inside it are still found.
    fn check_loop_body(&mut self, var: &ast::Ident, body: &ast::Block) {
        self.scopes.push(HashMap::new());
        self.bind(&var.name, Binding::Poisoned, var.span);
        self.loop_block(LoopKind::Run, body);
        self.scopes.pop();
    }

    fn return_stmt(&mut self, value: Option<&ast::Expr>, span: Span) -> Res<ir::StmtKind> {
        let ret = match &self.context {
            Context::Device { ret } => ret.clone(),
            _ => Type::Void,
        };
        match (value, &ret) {
            (None, Type::Void) => Ok(ir::StmtKind::Return(None)),
            (Some(v), Type::Void) => {
                let what = if matches!(self.context, Context::Kernel) {
                    "kernels return nothing"
                } else {
                    "this function returns nothing"
                };
                let d = Diagnostic::error(format!("cannot return a value: {what}"), v.span);
                Err(self.error(d))
            }
            (None, ret) => {
                let d = Diagnostic::error(
                    format!("`return;` in a function that returns `{ret}`"),
                    span,
                );
                Err(self.error(d))
            }
            (Some(v), ret) => Ok(ir::StmtKind::Return(Some(self.expect(
                v,
                ret,
                "the returned value",
            )?))),
        }
    }

    fn expr_stmt(&mut self, e: &ast::Expr) -> Res<ir::StmtKind> {
        match &e.kind {
            ExprKind::Call { callee, args } => {
                let kind = match builtins::lookup(&callee.name) {
                    Some(builtins::Name::Barrier) => ir::StmtKind::Barrier,
                    Some(builtins::Name::Fence(scope)) => ir::StmtKind::Fence(scope),
                    _ => return Ok(ir::StmtKind::Expr(self.expr(e, None)?)),
                };
                self.arity(&callee.name, args, 0, e.span)?;
                Ok(kind)
            }
            ExprKind::Intrinsic { .. } | ExprKind::Asm { .. } => {
                Ok(ir::StmtKind::Expr(self.expr(e, None)?))
            }
            _ => {
                let d = Diagnostic::error(
                    "this expression does nothing; only calls can stand alone as statements",
                    e.span,
                );
                Err(self.error(d))
            }
        }
    }
}

/// Whether every path through `block` ends in a `return`.
pub fn always_returns(block: &ir::Block) -> bool {
    block.iter().any(|s| match &s.kind {
        ir::StmtKind::Return(_) => true,
        ir::StmtKind::If {
            then_body,
            else_body,
            ..
        } => always_returns(then_body) && always_returns(else_body),
        _ => false,
    })
}
