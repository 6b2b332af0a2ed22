//! Builds typed-IR modules by hand, the way the front end will.

use zinc_dsl::diag::Span;
use zinc_dsl::ir::*;

pub fn span(start: u32) -> Span {
    Span {
        file: 0,
        start,
        end: start + 1,
    }
}

pub fn ex(kind: ExprKind, ty: Type) -> Expr {
    Expr {
        kind,
        ty,
        span: span(0),
    }
}

pub fn at(mut e: Expr, start: u32) -> Expr {
    e.span = span(start);
    e
}

pub fn st(kind: StmtKind) -> Stmt {
    Stmt {
        kind,
        span: span(0),
    }
}

pub fn sc(s: Scalar) -> Type {
    Type::Scalar(s)
}

pub const U32: Type = Type::Scalar(Scalar::U32);
pub const F32: Type = Type::Scalar(Scalar::F32);
pub const BOOL: Type = Type::Scalar(Scalar::Bool);

pub fn view(space: Space, elem: Type, mutable: bool) -> Type {
    Type::View {
        space,
        elem: Box::new(elem),
        mutable,
    }
}

pub fn global(elem: Type, mutable: bool) -> Type {
    view(Space::Global, elem, mutable)
}

pub fn int(v: i128, ty: Type) -> Expr {
    ex(ExprKind::Const(ConstValue::Int(v)), ty)
}

pub fn u32c(v: i128) -> Expr {
    int(v, U32)
}

pub fn float(v: f64, ty: Type) -> Expr {
    ex(ExprKind::Const(ConstValue::Float(v)), ty)
}

pub fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    let ty = match op {
        BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => match &a.ty {
            Type::Vector(_, n) => Type::Vector(Scalar::Bool, *n),
            _ => BOOL,
        },
        _ => a.ty.clone(),
    };
    ex(ExprKind::Binary(op, Box::new(a), Box::new(b)), ty)
}

pub fn cast(x: Expr, to: Type) -> Expr {
    ex(ExprKind::Cast(Box::new(x)), to)
}

pub fn special(s: Special) -> Expr {
    ex(ExprKind::Special(s), U32)
}

pub fn builtin(b: Builtin, args: Vec<Expr>, ty: Type) -> Expr {
    ex(ExprKind::Builtin(b, args), ty)
}

pub fn offset(base: Expr, index: Expr) -> Expr {
    let ty = base.ty.clone();
    ex(
        ExprKind::Offset {
            base: Box::new(base),
            index: Box::new(index),
        },
        ty,
    )
}

pub fn load(ptr: Expr) -> Expr {
    let ty = match &ptr.ty {
        Type::View { elem, .. } => (**elem).clone(),
        _ => panic!("load of a non-view"),
    };
    ex(ExprKind::Load(Box::new(ptr)), ty)
}

/// `v[i]`
pub fn index(v: Expr, i: Expr) -> Expr {
    load(offset(v, i))
}

/// `v[i] = x;`
pub fn store(v: Expr, i: Expr, x: Expr) -> Stmt {
    st(StmtKind::Store {
        ptr: offset(v, i),
        value: x,
    })
}

pub fn global_id() -> Expr {
    let base = bin(
        BinOp::Mul,
        special(Special::BlockIdx(Axis::X)),
        special(Special::BlockDim(Axis::X)),
    );
    bin(BinOp::Add, base, special(Special::ThreadIdx(Axis::X)))
}

/// Collects a function's variables and shared arrays.
#[derive(Default)]
pub struct Func {
    vars: Vec<Var>,
    params: Vec<VarId>,
    shared: Vec<SharedArray>,
}

impl Func {
    fn var(&mut self, name: &str, ty: Type, mutable: bool) -> VarId {
        self.vars.push(Var {
            name: name.into(),
            ty,
            mutable,
            span: span(0),
        });
        VarId(self.vars.len() as u32 - 1)
    }

    pub fn param(&mut self, name: &str, ty: Type) -> Expr {
        let id = self.var(name, ty.clone(), false);
        self.params.push(id);
        ex(ExprKind::Var(id), ty)
    }

    /// A mutable local: its id and a read of it.
    pub fn local(&mut self, name: &str, ty: Type) -> (VarId, Expr) {
        let id = self.var(name, ty.clone(), true);
        (id, ex(ExprKind::Var(id), ty))
    }

    /// A shared array declared at byte offset `at` (for diagnostics); returns its view.
    pub fn shared(&mut self, name: &str, elem: Type, dims: &[u64], at: u32) -> Expr {
        self.shared.push(SharedArray {
            name: name.into(),
            elem: elem.clone(),
            dims: dims.to_vec(),
            layout: TileLayout::RowMajor,
            span: span(at),
        });
        let id = SharedId(self.shared.len() as u32 - 1);
        ex(ExprKind::SharedArray(id), view(Space::Shared, elem, true))
    }

    pub fn kernel(self, name: &str, block: [u32; 3], grid: [Expr; 3], body: Block) -> Function {
        self.build(
            name,
            FunctionKind::Kernel(Launch {
                block,
                cluster: [1, 1, 1],
                grid,
                specialization: vec![(
                    "BLOCK".into(),
                    CtValue::Const(ConstValue::Int(block[0] as i128)),
                )],
                tensor_maps: vec![],
            }),
            Type::Void,
            body,
        )
    }

    pub fn device(self, name: &str, ret: Type, body: Block) -> Function {
        self.build(name, FunctionKind::Device, ret, body)
    }

    fn build(self, name: &str, kind: FunctionKind, ret: Type, body: Block) -> Function {
        Function {
            name: name.into(),
            kind,
            params: self.params,
            ret,
            vars: self.vars,
            shared: self.shared,
            body,
            span: span(0),
            file: "test.tile".into(),
        }
    }
}

/// grid(x) with y = z = 1.
pub fn grid1(x: Expr) -> [Expr; 3] {
    [x, u32c(1), u32c(1)]
}
