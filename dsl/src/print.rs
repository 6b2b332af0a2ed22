//! The IR as deterministic text (`zincc build --emit ir`, snapshot tests). Variables print as
//! `name#id`, shared arrays as `@name`, constants with their type suffix, every binary operation
//! parenthesized.

use std::fmt::{self, Write};

use crate::ir::{
    AtomicOp, Axis, Builtin, ConstValue, Expr, ExprKind, FenceScope, Function, FunctionKind,
    LogicalOp, MathFn, Module, ShuffleMode, Space, Special, Stmt, StmtKind, TmaStoreOp, Type, UnOp,
    VoteMode,
};

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Void => f.write_str("void"),
            Type::Scalar(s) => f.write_str(s.name()),
            Type::Vector(s, n) => write!(f, "{}x{n}", s.name()),
            Type::View {
                space,
                elem,
                mutable,
            } => {
                let space = match space {
                    Space::Global => "global",
                    Space::Shared => "shared",
                };
                let m = if *mutable { " mut" } else { "" };
                write!(f, "{space}{m} [{elem}]")
            }
            Type::Frag(frag) => write!(f, "{}<{}>", frag.role_name(), frag.elem.name()),
            Type::Array { elem, dims } => {
                dims.iter().try_for_each(|d| write!(f, "[{d}]"))?;
                write!(f, " {elem}")
            }
            Type::TensorMap(elem) => write!(f, "tensor_map<{}>", elem.name()),
        }
    }
}

/// A constant without type: `3`, `-1.5`, `true`.
pub fn const_text(v: &ConstValue) -> String {
    match v {
        ConstValue::Bool(b) => b.to_string(),
        ConstValue::Int(i) => i.to_string(),
        ConstValue::Float(x) => format!("{x:?}"),
    }
}

pub fn print_ir(module: &Module) -> String {
    let mut p = Printer {
        out: String::new(),
        function: None,
        module,
    };
    for (i, f) in module.functions.iter().enumerate() {
        if i > 0 {
            p.out.push('\n');
        }
        p.function(i, f);
    }
    p.out
}

struct Printer<'m> {
    out: String,
    function: Option<&'m Function>,
    module: &'m Module,
}

impl<'m> Printer<'m> {
    fn function(&mut self, index: usize, f: &'m Function) {
        self.function = Some(f);
        let params: Vec<String> = f
            .params
            .iter()
            .map(|&v| format!("{}: {}", self.var(v.0), f.vars[v.0 as usize].ty))
            .collect();
        let word = match f.kind {
            FunctionKind::Device => "fn",
            FunctionKind::Kernel(_) => "kernel",
        };
        let _ = write!(
            self.out,
            "// {}\n{word} #{index} {}({})",
            f.file,
            f.name,
            params.join(", ")
        );
        if f.ret != Type::Void {
            let _ = write!(self.out, " -> {}", f.ret);
        }
        self.out.push('\n');
        if let FunctionKind::Kernel(launch) = &f.kind {
            if !launch.specialization.is_empty() {
                let values: Vec<String> = launch
                    .specialization
                    .iter()
                    .map(|(n, v)| format!("{n} = {v}"))
                    .collect();
                let _ = writeln!(self.out, "    specialize {}", values.join(", "));
            }
            let grid: Vec<String> = launch.grid.iter().map(|e| self.expr(e)).collect();
            let [x, y, z] = launch.block;
            let cluster = match launch.cluster {
                [1, 1, 1] => String::new(),
                [cx, cy, cz] => format!(" cluster({cx}, {cy}, {cz})"),
            };
            let _ = writeln!(
                self.out,
                "    grid({}) block({x}, {y}, {z}){cluster}",
                grid.join(", ")
            );
            for (i, m) in launch.tensor_maps.iter().enumerate() {
                let _ = writeln!(
                    self.out,
                    "    tensor_map #{i} @{} = ({} + {})[{}][{}] {} box [{}][{}]{}",
                    m.name,
                    self.var(m.param.0),
                    self.expr(&m.offset),
                    self.expr(&m.rows),
                    self.expr(&m.cols),
                    m.elem.name(),
                    m.box_rows,
                    m.box_cols,
                    match m.swizzle_bytes() {
                        0 => String::new(),
                        b => format!(" swizzle {b}"),
                    }
                );
            }
        }
        self.out.push_str("{\n");
        for (i, a) in f.shared.iter().enumerate() {
            let dims: String = a.dims.iter().map(|d| format!("[{d}]")).collect();
            let _ = writeln!(
                self.out,
                "    shared #{i} @{}: {dims} {}{};  // {} bytes",
                a.name,
                a.elem,
                a.layout,
                a.bytes()
            );
        }
        self.block(&f.body, 1);
        self.out.push_str("}\n");
    }

    fn var(&self, id: u32) -> String {
        let name = self
            .function
            .and_then(|f| f.vars.get(id as usize))
            .map_or("?", |v| v.name.as_str());
        format!("{name}#{id}")
    }

    fn block(&mut self, block: &[Stmt], depth: usize) {
        for s in block {
            self.stmt(s, depth);
        }
    }

    fn line(&mut self, depth: usize, text: &str) {
        for _ in 0..depth {
            self.out.push_str("    ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    fn stmt(&mut self, s: &Stmt, depth: usize) {
        let text = match &s.kind {
            StmtKind::Let { var, init } => {
                let v = self.function.and_then(|f| f.vars.get(var.0 as usize));
                let word = if v.is_some_and(|v| v.mutable) {
                    "var"
                } else {
                    "let"
                };
                let ty = v.map_or(String::new(), |v| v.ty.to_string());
                format!("{word} {}: {ty} = {};", self.var(var.0), self.expr(init))
            }
            StmtKind::Assign { var, value } => {
                format!("{} = {};", self.var(var.0), self.expr(value))
            }
            StmtKind::SetElement { var, index, value } => {
                format!(
                    "{}{} = {};",
                    self.var(var.0),
                    index_text(index),
                    self.expr(value)
                )
            }
            StmtKind::Store { ptr, value } => {
                format!("store {} <- {};", self.expr(ptr), self.expr(value))
            }
            StmtKind::If {
                cond,
                then_body,
                else_body,
            } => {
                self.line(depth, &format!("if {} {{", self.expr(cond)));
                self.block(then_body, depth + 1);
                if !else_body.is_empty() {
                    self.line(depth, "} else {");
                    self.block(else_body, depth + 1);
                }
                "}".to_string()
            }
            StmtKind::For {
                var,
                start,
                end,
                step,
                body,
            } => {
                let head = format!(
                    "for {} in {}..{} step {} {{",
                    self.var(var.0),
                    self.expr(start),
                    self.expr(end),
                    self.expr(step)
                );
                self.line(depth, &head);
                self.block(body, depth + 1);
                "}".to_string()
            }
            StmtKind::While { cond, body } => {
                self.line(depth, &format!("while {} {{", self.expr(cond)));
                self.block(body, depth + 1);
                "}".to_string()
            }
            StmtKind::Break => "break;".to_string(),
            StmtKind::Continue => "continue;".to_string(),
            StmtKind::Return(None) => "return;".to_string(),
            StmtKind::Return(Some(e)) => format!("return {};", self.expr(e)),
            StmtKind::Expr(e) => format!("{};", self.expr(e)),
            StmtKind::Barrier => "barrier;".to_string(),
            StmtKind::Fence(FenceScope::Block) => "fence.block;".to_string(),
            StmtKind::Fence(FenceScope::Device) => "fence.device;".to_string(),
        };
        self.line(depth, &text);
    }

    fn exprs(&self, args: &[Expr]) -> String {
        args.iter()
            .map(|a| self.expr(a))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn expr(&self, e: &Expr) -> String {
        match &e.kind {
            ExprKind::Const(v) => match v {
                ConstValue::Bool(b) => b.to_string(),
                // A fragment or array filled with one value.
                other if matches!(e.ty, Type::Frag(_) | Type::Array { .. }) => {
                    format!("{}({})", e.ty, const_text(other))
                }
                other => format!("{}{}", const_text(other), e.ty),
            },
            ExprKind::Var(v) => self.var(v.0),
            ExprKind::Element { var, index } => format!("{}{}", self.var(var.0), index_text(index)),
            ExprKind::SharedArray(id) => {
                let name = self
                    .function
                    .and_then(|f| f.shared.get(id.0 as usize))
                    .map_or("?", |a| a.name.as_str());
                format!("@{name}")
            }
            // Named as the kernel's header lists it: `tensor_map #0 @xm = ...`.
            ExprKind::TensorMap(i) => {
                let name = match self.function.map(|f| &f.kind) {
                    Some(FunctionKind::Kernel(launch)) => launch.tensor_maps.get(*i as usize),
                    _ => None,
                };
                format!("@{}", name.map_or("?", |m| m.name.as_str()))
            }
            ExprKind::Unary(op, x) => {
                let sym = match op {
                    UnOp::Neg => "-",
                    UnOp::Not => "!",
                };
                format!("({sym}{})", self.expr(x))
            }
            ExprKind::Binary(op, a, b) => {
                format!("({} {} {})", self.expr(a), op.symbol(), self.expr(b))
            }
            ExprKind::Logical(op, a, b) => {
                let sym = match op {
                    LogicalOp::And => "&&",
                    LogicalOp::Or => "||",
                };
                format!("({} {sym} {})", self.expr(a), self.expr(b))
            }
            ExprKind::Cast(x) => format!("({} as {})", self.expr(x), e.ty),
            ExprKind::Select(c, a, b) => {
                format!(
                    "select({}, {}, {})",
                    self.expr(c),
                    self.expr(a),
                    self.expr(b)
                )
            }
            ExprKind::Offset { base, index } => {
                format!("offset({}, {})", self.expr(base), self.expr(index))
            }
            ExprKind::Load(p) => format!("load({})", self.expr(p)),
            ExprKind::VectorBuild(args) => format!("{}({})", e.ty, self.exprs(args)),
            ExprKind::Extract(v, lane) => match v.ty {
                Type::Frag(_) => format!("{}[{lane}]", self.expr(v)),
                _ => format!(
                    "{}.{}",
                    self.expr(v),
                    ["x", "y", "z", "w"][usize::from(*lane) % 4]
                ),
            },
            ExprKind::Bitcast(x) => format!("bitcast<{}>({})", e.ty, self.expr(x)),
            ExprKind::Special(s) => special(*s),
            ExprKind::Builtin(b, args) => format!("{}({})", builtin(*b), self.exprs(args)),
            ExprKind::Call(id, args) => {
                let name = self
                    .module
                    .functions
                    .get(id.0 as usize)
                    .map_or("?", |f| f.name.as_str());
                format!("call #{} {name}({})", id.0, self.exprs(args))
            }
            ExprKind::Intrinsic { name, args } => {
                let sep = if args.is_empty() { "" } else { ", " };
                format!("intrinsic<{}>({name:?}{sep}{})", e.ty, self.exprs(args))
            }
            ExprKind::InlineAsm {
                template,
                constraints,
                args,
            } => {
                let sep = if args.is_empty() { "" } else { ", " };
                format!(
                    "asm<{}>({template:?}, {constraints:?}{sep}{})",
                    e.ty,
                    self.exprs(args)
                )
            }
        }
    }
}

/// `[1][2]`.
fn index_text(index: &[u32]) -> String {
    index.iter().map(|i| format!("[{i}]")).collect()
}

fn special(s: Special) -> String {
    let axis = |a: Axis| match a {
        Axis::X => "x",
        Axis::Y => "y",
        Axis::Z => "z",
    };
    match s {
        Special::ThreadIdx(a) => format!("thread.{}", axis(a)),
        Special::BlockIdx(a) => format!("block.{}", axis(a)),
        Special::BlockDim(a) => format!("block_dim.{}", axis(a)),
        Special::GridDim(a) => format!("grid_dim.{}", axis(a)),
        Special::Lane => "lane".to_string(),
        Special::Warp => "warp".to_string(),
    }
}

fn builtin(b: Builtin) -> String {
    let name = match b {
        Builtin::Math(m) => match m {
            MathFn::Exp => "exp",
            MathFn::Log => "log",
            MathFn::Exp2 => "exp2",
            MathFn::Log2 => "log2",
            MathFn::Sqrt => "sqrt",
            MathFn::Rsqrt => "rsqrt",
            MathFn::Rcp => "rcp",
            MathFn::Tanh => "tanh",
            MathFn::Sin => "sin",
            MathFn::Cos => "cos",
            MathFn::Abs => "abs",
            MathFn::Floor => "floor",
            MathFn::Ceil => "ceil",
        },
        Builtin::Max => "max",
        Builtin::Min => "min",
        Builtin::Fma => "fma",
        Builtin::Shuffle(m) => match m {
            ShuffleMode::Xor => "shfl_xor",
            ShuffleMode::Down => "shfl_down",
            ShuffleMode::Up => "shfl_up",
            ShuffleMode::Idx => "shfl_idx",
        },
        Builtin::Vote(m) => match m {
            VoteMode::All => "vote_all",
            VoteMode::Any => "vote_any",
            VoteMode::Ballot => "ballot",
        },
        Builtin::Atomic(op) => match op {
            AtomicOp::Add => "atomic_add",
            AtomicOp::Max => "atomic_max",
            AtomicOp::Min => "atomic_min",
            AtomicOp::And => "atomic_and",
            AtomicOp::Or => "atomic_or",
            AtomicOp::Xor => "atomic_xor",
            AtomicOp::Exch => "atomic_exch",
        },
        Builtin::AtomicCas => "atomic_cas",
        Builtin::Mma => "mma",
        Builtin::Ldmatrix { count, trans } => return format!("ldmatrix_x{count}<trans={trans}>"),
        Builtin::CpAsync { bytes } => return format!("cp_async<{bytes}>"),
        Builtin::CpAsyncCommit => "cp_async_commit",
        Builtin::CpAsyncWait(n) => return format!("cp_async_wait<{n}>"),
        Builtin::Prmt => "prmt",
        Builtin::Lop3(lut) => return format!("lop3<{lut:#04x}>"),
        Builtin::Dp4a { unsigned_a: false } => "dp4a",
        Builtin::Dp4a { unsigned_a: true } => "dp4a_us",
        Builtin::Wgmma { acc, first, n } => {
            return format!("wgmma<acc=v{}, first={first}, n={n}>", acc.0)
        }
        Builtin::WgmmaFence => "wgmma_fence",
        Builtin::SetMaxNReg { increase, regs } => {
            let way = if increase { "inc" } else { "dec" };
            return format!("setmaxnreg_{way}<{regs}>");
        }
        Builtin::WgmmaCommit => "wgmma_commit",
        Builtin::WgmmaWait(n) => return format!("wgmma_wait<{n}>"),
        Builtin::FenceProxyAsync => "fence_proxy_async",
        Builtin::FenceProxyAsyncGlobal => "fence_proxy_async_global",
        Builtin::FenceGpu => "fence_gpu",
        Builtin::SyncWarp => "sync_warp",
        Builtin::Nanosleep => "nanosleep",
        Builtin::MbarrierInit => "mbarrier_init",
        Builtin::MbarrierExpectTx => "mbarrier_expect_tx",
        Builtin::MbarrierArrive => "mbarrier_arrive",
        Builtin::MbarrierWait => "mbarrier_wait",
        Builtin::TmaLoad => "tma_load",
        Builtin::TmaPrefetch => "tma_prefetch",
        Builtin::TmaLoadMulticast => "tma_load_multicast",
        Builtin::ClusterRank => "cluster_rank",
        Builtin::Timer(false) => "clock64",
        Builtin::Timer(true) => "globaltimer",
        Builtin::ClusterSync => "cluster_sync",
        Builtin::MbarrierArriveCluster => "mbarrier_arrive_cluster",
        Builtin::TmaStore(TmaStoreOp::Write) => "tma_store",
        Builtin::TmaStore(TmaStoreOp::Add) => "tma_store_add",
        Builtin::TmaStoreCommit => "tma_store_commit",
        Builtin::TmaStoreWait(n) => return format!("tma_store_wait<{n}>"),
        Builtin::TmaStoreDone(n) => return format!("tma_store_done<{n}>"),
    };
    name.to_string()
}
