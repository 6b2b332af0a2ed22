//! A small builder for hand-written IR modules.

use zinc_dsl::diag::{SourceMap, Span};
use zinc_dsl::ir::*;

/// Every line of the fake source file is this long (with its newline), so `line(n)` can point a
/// span at line n.
const LINE: u32 = 32;

pub fn line(n: u32) -> Span {
    Span::new(0, ((n - 1) * LINE) as usize, ((n - 1) * LINE + 4) as usize)
}

/// A source map whose file `test.tile` has 200 numbered lines.
pub fn sources() -> SourceMap {
    let mut map = SourceMap::default();
    let text: String = (1..=200)
        .map(|i| format!("{:<31}\n", format!("line {i}")))
        .collect();
    map.add("test.tile", text);
    map
}

pub fn u32t() -> Type {
    Type::Scalar(Scalar::U32)
}
pub fn f32t() -> Type {
    Type::Scalar(Scalar::F32)
}
pub fn view(elem: Scalar, mutable: bool) -> Type {
    Type::View {
        space: Space::Global,
        elem: Box::new(Type::Scalar(elem)),
        mutable,
    }
}

fn ex(kind: ExprKind, ty: Type) -> Expr {
    Expr {
        kind,
        ty,
        span: line(1),
    }
}

pub fn at(mut e: Expr, span: Span) -> Expr {
    e.span = span;
    e
}

pub fn cu(x: u32) -> Expr {
    ex(ExprKind::Const(ConstValue::Int(x as i128)), u32t())
}
pub fn cf(x: f32) -> Expr {
    ex(ExprKind::Const(ConstValue::Float(x as f64)), f32t())
}
pub fn cb(x: bool) -> Expr {
    ex(
        ExprKind::Const(ConstValue::Bool(x)),
        Type::Scalar(Scalar::Bool),
    )
}
pub fn tid() -> Expr {
    ex(ExprKind::Special(Special::ThreadIdx(Axis::X)), u32t())
}
pub fn bid() -> Expr {
    ex(ExprKind::Special(Special::BlockIdx(Axis::X)), u32t())
}
pub fn special(s: Special) -> Expr {
    ex(ExprKind::Special(s), u32t())
}

pub fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    let ty = match op {
        BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
            Type::Scalar(Scalar::Bool)
        }
        _ => a.ty.clone(),
    };
    ex(ExprKind::Binary(op, Box::new(a), Box::new(b)), ty)
}
pub fn add(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Add, a, b)
}
pub fn lt(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Lt, a, b)
}
pub fn eq(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Eq, a, b)
}

fn elem_of(v: &Expr) -> Type {
    match &v.ty {
        Type::View { elem, .. } => (**elem).clone(),
        t => panic!("not a view: {t:?}"),
    }
}

pub fn offset(v: Expr, i: Expr) -> Expr {
    let ty = v.ty.clone();
    ex(
        ExprKind::Offset {
            base: Box::new(v),
            index: Box::new(i),
        },
        ty,
    )
}

/// `v[i]` as a value.
pub fn load(v: Expr, i: Expr) -> Expr {
    let elem = elem_of(&v);
    ex(ExprKind::Load(Box::new(offset(v, i))), elem)
}

pub fn builtin(b: Builtin, args: Vec<Expr>, ty: Type) -> Expr {
    ex(ExprKind::Builtin(b, args), ty)
}

pub fn call(f: u32, args: Vec<Expr>, ty: Type) -> Expr {
    ex(ExprKind::Call(FuncId(f), args), ty)
}

pub fn st(kind: StmtKind, span: Span) -> Stmt {
    Stmt { kind, span }
}

/// `v[i] = value;`
pub fn store(v: Expr, i: Expr, value: Expr, span: Span) -> Stmt {
    st(
        StmtKind::Store {
            ptr: offset(v, i),
            value,
        },
        span,
    )
}

pub fn if_(cond: Expr, then_body: Block, else_body: Block) -> Stmt {
    st(
        StmtKind::If {
            cond,
            then_body,
            else_body,
        },
        line(1),
    )
}

pub fn stmt(kind: StmtKind) -> Stmt {
    st(kind, line(1))
}

/// Builds one function: declare parameters and locals, then finish with a body.
#[derive(Default)]
pub struct Fb {
    vars: Vec<Var>,
    params: Vec<VarId>,
    shared: Vec<SharedArray>,
}

impl Fb {
    pub fn param(&mut self, name: &str, ty: Type) -> Expr {
        let e = self.local(name, ty);
        self.params.push(self.last());
        e
    }

    /// A new variable; the expression reads it.
    pub fn local(&mut self, name: &str, ty: Type) -> Expr {
        self.vars.push(Var {
            name: name.into(),
            ty: ty.clone(),
            mutable: true,
            span: line(1),
        });
        ex(ExprKind::Var(self.last()), ty)
    }

    pub fn last(&self) -> VarId {
        VarId(self.vars.len() as u32 - 1)
    }

    /// A shared array; the expression is its view.
    pub fn shared(&mut self, name: &str, elem: Scalar, dims: Vec<u64>) -> Expr {
        self.shared.push(SharedArray {
            name: name.into(),
            elem: Type::Scalar(elem),
            dims,
            layout: TileLayout::RowMajor,
            span: line(1),
        });
        let ty = Type::View {
            space: Space::Shared,
            elem: Box::new(Type::Scalar(elem)),
            mutable: true,
        };
        ex(
            ExprKind::SharedArray(SharedId(self.shared.len() as u32 - 1)),
            ty,
        )
    }

    pub fn kernel(self, name: &str, block: [u32; 3], grid: [Expr; 3], body: Block) -> Function {
        self.finish(
            name,
            FunctionKind::Kernel(Launch {
                block,
                cluster: [1, 1, 1],
                grid,
                specialization: vec![],
                tensor_maps: vec![],
            }),
            Type::Void,
            body,
        )
    }

    pub fn device(self, name: &str, ret: Type, body: Block) -> Function {
        self.finish(name, FunctionKind::Device, ret, body)
    }

    fn finish(self, name: &str, kind: FunctionKind, ret: Type, body: Block) -> Function {
        Function {
            name: name.into(),
            kind,
            params: self.params,
            ret,
            vars: self.vars,
            shared: self.shared,
            body,
            span: line(1),
            file: "test.tile".into(),
        }
    }
}

pub fn var_id(e: &Expr) -> VarId {
    match e.kind {
        ExprKind::Var(v) => v,
        _ => panic!("not a variable"),
    }
}

pub fn let_(v: &Expr, init: Expr) -> Stmt {
    stmt(StmtKind::Let {
        var: var_id(v),
        init,
    })
}

pub fn assign(v: &Expr, value: Expr) -> Stmt {
    stmt(StmtKind::Assign {
        var: var_id(v),
        value,
    })
}

pub fn grid1(x: Expr) -> [Expr; 3] {
    [x, cu(1), cu(1)]
}

pub fn module(functions: Vec<Function>) -> Module {
    Module { functions }
}
