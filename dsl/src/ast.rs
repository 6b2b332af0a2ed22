//! The syntax tree the parser builds: names are still strings, types still written, literals
//! still untyped. Every node carries its span.

use crate::diag::Span;
use crate::ir::{BinOp, LogicalOp, Scalar, Space, UnOp};

/// Deepest nesting of expressions and statements the parser accepts; it bounds the recursion of
/// every later pass so that no input can overflow the stack.
pub const MAX_DEPTH: u32 = 128;

#[derive(Clone, Debug)]
pub struct File {
    pub items: Vec<Item>,
}

#[derive(Clone, Debug)]
pub enum Item {
    Import(Import),
    Const(ConstItem),
    Fn(FnItem),
    Kernel(KernelItem),
    KernelInstance(KernelInstance),
}

/// `kernel NAME = KERNEL<PARAM = VALUE, ...>;`: kernel KERNEL (of this file or an imported
/// one) compiled as NAME with some compile-time parameters fixed to literal values (which `-D`
/// does not override).
#[derive(Clone, Debug)]
pub struct KernelInstance {
    pub name: Ident,
    pub of: Ident,
    pub args: Vec<(Ident, Expr)>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct Import {
    pub path: String,
    /// The span of the path string.
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct ConstItem {
    pub name: Ident,
    pub ty: TypeExpr,
    pub value: Expr,
}

#[derive(Clone, Debug)]
pub struct Param {
    pub name: Ident,
    pub ty: TypeExpr,
}

#[derive(Clone, Debug)]
pub struct FnItem {
    pub name: Ident,
    pub params: Vec<Param>,
    pub ret: Option<TypeExpr>,
    pub body: Block,
    pub span: Span,
}

/// A compile-time parameter `<NAME: TYPE = DEFAULT>`.
#[derive(Clone, Debug)]
pub struct CtParam {
    pub name: Ident,
    pub ty: Option<TypeExpr>,
    pub default: Expr,
}

#[derive(Clone, Debug)]
pub struct KernelItem {
    pub name: Ident,
    pub ct_params: Vec<CtParam>,
    pub params: Vec<Param>,
    pub grid: LaunchDims,
    pub block: LaunchDims,
    /// `cluster(...)`, blocks per cluster; absent: clusters of one block.
    pub cluster: Option<LaunchDims>,
    pub body: Block,
    pub span: Span,
}

/// The expressions of `grid(...)` or `block(...)`; `span` covers the whole clause.
#[derive(Clone, Debug)]
pub struct LaunchDims {
    pub dims: Vec<Expr>,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum TypeExpr {
    Named(Ident),
    /// `name<arg>`: a fragment type such as `frag_acc<f32>`.
    Generic {
        name: Ident,
        arg: Box<TypeExpr>,
        span: Span,
    },
    View {
        space: Space,
        mutable: bool,
        elem: Box<TypeExpr>,
        span: Span,
    },
    /// `[D0][D1]... elem`: a register array (locals only).
    Array {
        dims: Vec<Expr>,
        elem: Box<TypeExpr>,
        span: Span,
    },
}

impl TypeExpr {
    pub fn span(&self) -> Span {
        match self {
            TypeExpr::Named(id) => id.span,
            TypeExpr::View { span, .. }
            | TypeExpr::Generic { span, .. }
            | TypeExpr::Array { span, .. } => *span,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Block {
    pub stmts: Vec<Stmt>,
    pub span: Span,
}

impl Block {
    fn depth(&self) -> u32 {
        self.stmts.iter().map(|s| s.depth).max().unwrap_or(0)
    }
}

#[derive(Clone, Debug)]
pub struct Stmt {
    pub kind: StmtKind,
    pub span: Span,
    /// Nesting depth of this statement's tree (see [`MAX_DEPTH`]).
    pub depth: u32,
}

// Statements are built once and rarely moved, so the size spread of the variants is harmless.
/// The layout word of a shared declaration (`swizzle`, `pad(8)`), checked by the checker.
#[derive(Clone, Debug)]
pub struct LayoutSpec {
    pub word: Ident,
    pub arg: Option<Expr>,
    pub span: Span,
}

#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum StmtKind {
    /// `let` (mutable: false) or `var` (mutable: true).
    Let {
        mutable: bool,
        name: Ident,
        ty: Option<TypeExpr>,
        init: Expr,
    },
    /// `shared name: [D0]... T [layout];`
    Shared {
        name: Ident,
        dims: Vec<Expr>,
        elem: TypeExpr,
        layout: Option<LayoutSpec>,
    },
    /// `target = value`, or `target op= value` when `op` is set.
    Assign {
        target: Expr,
        op: Option<BinOp>,
        value: Expr,
    },
    If {
        cond: Expr,
        then_body: Block,
        /// `else { }`; an `else if` is an else block holding one `If`.
        else_body: Option<Block>,
    },
    For {
        var: Ident,
        start: Expr,
        end: Expr,
        step: Option<Expr>,
        /// `unroll`: the bounds and step are constants and the body is copied per iteration.
        unroll: bool,
        body: Block,
    },
    While {
        cond: Expr,
        body: Block,
    },
    /// `pipeline var in start..end step step stages stages { copy } compute { compute }`:
    /// sugar for a cp.async ring of `stages` buffers, desugared by the checker.
    Pipeline {
        var: Ident,
        start: Expr,
        end: Expr,
        step: Expr,
        stages: Expr,
        copy: Block,
        compute: Block,
    },
    Break,
    Continue,
    Return(Option<Expr>),
    Expr(Expr),
}

impl Stmt {
    pub fn new(kind: StmtKind, span: Span) -> Stmt {
        let e = |e: &Expr| e.depth;
        let depth = 1 + match &kind {
            StmtKind::Let { init, .. } => e(init),
            StmtKind::Shared { dims, layout, .. } => {
                let arg = layout.as_ref().and_then(|l| l.arg.as_ref()).map_or(0, e);
                dims.iter().map(e).max().unwrap_or(0).max(arg)
            }
            StmtKind::Assign { target, value, .. } => e(target).max(e(value)),
            StmtKind::If {
                cond,
                then_body,
                else_body,
            } => e(cond)
                .max(then_body.depth())
                .max(else_body.as_ref().map_or(0, Block::depth)),
            StmtKind::For {
                start,
                end,
                step,
                body,
                ..
            } => e(start)
                .max(e(end))
                .max(step.as_ref().map_or(0, e))
                .max(body.depth()),
            StmtKind::While { cond, body } => e(cond).max(body.depth()),
            StmtKind::Pipeline {
                start,
                end,
                step,
                stages,
                copy,
                compute,
                ..
            } => e(start)
                .max(e(end))
                .max(e(step))
                .max(e(stages))
                .max(copy.depth())
                .max(compute.depth()),
            StmtKind::Break | StmtKind::Continue | StmtKind::Return(None) => 0,
            StmtKind::Return(Some(x)) | StmtKind::Expr(x) => e(x),
        };
        Stmt { kind, span, depth }
    }
}

#[derive(Clone, Debug)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
    /// Nesting depth of this expression tree (see [`MAX_DEPTH`]).
    pub depth: u32,
}

#[derive(Clone, Debug)]
pub enum ExprKind {
    Int {
        value: u128,
        suffix: Option<Scalar>,
    },
    Float {
        value: f64,
        suffix: Option<Scalar>,
    },
    Bool(bool),
    Name(String),
    /// `base.field`: a vector component or a built-in's axis (`thread.x`).
    Field(Box<Expr>, Ident),
    Index(Box<Expr>, Box<Expr>),
    Call {
        callee: Ident,
        args: Vec<Expr>,
    },
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Logical(LogicalOp, Box<Expr>, Box<Expr>),
    Cast(Box<Expr>, TypeExpr),
    /// `bitcast<T>(e)`.
    Bitcast(Box<Expr>, TypeExpr),
    Intrinsic {
        ty: TypeExpr,
        name: StrLit,
        args: Vec<Expr>,
    },
    Asm {
        ty: TypeExpr,
        template: StrLit,
        constraints: StrLit,
        args: Vec<Expr>,
    },
}

#[derive(Clone, Debug)]
pub struct StrLit {
    pub value: String,
    pub span: Span,
}

impl Expr {
    pub fn new(kind: ExprKind, span: Span) -> Expr {
        let max = |args: &[Expr]| args.iter().map(|a| a.depth).max().unwrap_or(0);
        let depth = 1 + match &kind {
            ExprKind::Int { .. } | ExprKind::Float { .. } | ExprKind::Bool(_) => 0,
            ExprKind::Name(_) => 0,
            ExprKind::Field(e, _)
            | ExprKind::Unary(_, e)
            | ExprKind::Cast(e, _)
            | ExprKind::Bitcast(e, _) => e.depth,
            ExprKind::Index(a, b) | ExprKind::Binary(_, a, b) | ExprKind::Logical(_, a, b) => {
                a.depth.max(b.depth)
            }
            ExprKind::Call { args, .. }
            | ExprKind::Intrinsic { args, .. }
            | ExprKind::Asm { args, .. } => max(args),
        };
        Expr { kind, span, depth }
    }

    /// An expression made only of unsuffixed literals (`1`, `-2.5`, `(1 + 2)`): it takes its
    /// type from the context.
    pub fn is_untyped(&self) -> bool {
        match &self.kind {
            ExprKind::Int { suffix, .. } | ExprKind::Float { suffix, .. } => suffix.is_none(),
            ExprKind::Unary(_, e) => e.is_untyped(),
            ExprKind::Binary(op, a, b) => !op.is_comparison() && a.is_untyped() && b.is_untyped(),
            _ => false,
        }
    }
}

impl BinOp {
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge
        )
    }

    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::And => "&",
            BinOp::Or => "|",
            BinOp::Xor => "^",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
        }
    }
}
