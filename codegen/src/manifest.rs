//! Per-kernel launch manifests: what the runtime needs to check arguments and launch a kernel
//! without the compiler (parameters, block, grid expressions, shared memory).

use std::fmt::Write;

use zinc_dsl::diag::Diagnostic;
use zinc_dsl::ir::{self, BinOp, Builtin, ConstValue, ExprKind, Function, Scalar, Space, Type};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelInfo {
    pub name: String,
    pub params: Vec<ParamInfo>,
    pub block: [u32; 3],
    /// Blocks per cluster per axis ([1, 1, 1]: no clusters); the grid must be a multiple.
    pub cluster: [u32; 3],
    /// Grid size per axis over the integer scalar parameters: integers, names, `+ - * / %`,
    /// parentheses, `min(a, b)`, `max(a, b)` and `cdiv(a, b)`.
    pub grid: [String; 3],
    pub static_shared_bytes: u64,
    /// Shared memory the launch must request dynamically (arrays past the static limit).
    pub dynamic_shared_bytes: u64,
    /// Compile-time parameters and their values in this specialization.
    pub specialization: Vec<(String, String)>,
    /// The tensor maps the host encodes and passes by value after the parameters, in order.
    pub tensor_maps: Vec<TensorMapInfo>,
}

/// A TMA tensor map over a view parameter: `rows` x `cols` elements (grid-expression text),
/// rows dense, in boxes of `box_rows` x `box_cols`; `swizzle` is the 128-byte swizzle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorMapInfo {
    pub param: String,
    pub elem: Scalar,
    /// In elements, from the start of the parameter's buffer.
    pub offset: String,
    pub rows: String,
    pub cols: String,
    pub box_rows: u32,
    pub box_cols: u32,
    /// The box's swizzle in bytes: 0 (none), 32, 64 or 128.
    pub swizzle: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamInfo {
    pub name: String,
    pub kind: ParamKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParamKind {
    Scalar(Scalar),
    View {
        space: Space,
        elem: Type,
        mutable: bool,
    },
}

impl KernelInfo {
    /// The manifest as JSON, e.g.
    /// `{"name": "k", "params": [{"name": "n", "kind": "scalar", "type": "u32"}], "block": [256, 1, 1],
    /// "grid": ["((n + 255) / 256)", "1", "1"], "static_shared_bytes": 0,
    /// "dynamic_shared_bytes": 0, "specialization": [["BLOCK", "256"]]}`.
    pub fn to_json(&self) -> String {
        let mut s = String::from("{\n");
        let _ = writeln!(s, "  \"name\": {},", json_str(&self.name));
        s.push_str("  \"params\": [");
        for (i, p) in self.params.iter().enumerate() {
            s.push_str(if i == 0 { "\n    " } else { ",\n    " });
            s.push_str(&param_json(p));
        }
        s.push_str(if self.params.is_empty() {
            "],\n"
        } else {
            "\n  ],\n"
        });
        let [bx, by, bz] = self.block;
        let _ = writeln!(s, "  \"block\": [{bx}, {by}, {bz}],");
        if self.cluster != [1, 1, 1] {
            let [cx, cy, cz] = self.cluster;
            let _ = writeln!(s, "  \"cluster\": [{cx}, {cy}, {cz}],");
        }
        let grid: Vec<String> = self.grid.iter().map(|g| json_str(g)).collect();
        let _ = writeln!(s, "  \"grid\": [{}],", grid.join(", "));
        let _ = writeln!(
            s,
            "  \"static_shared_bytes\": {},",
            self.static_shared_bytes
        );
        let _ = writeln!(
            s,
            "  \"dynamic_shared_bytes\": {},",
            self.dynamic_shared_bytes
        );
        let spec: Vec<String> = self
            .specialization
            .iter()
            .map(|(k, v)| format!("[{}, {}]", json_str(k), json_str(v)))
            .collect();
        let _ = writeln!(s, "  \"specialization\": [{}],", spec.join(", "));
        let maps: Vec<String> = self
            .tensor_maps
            .iter()
            .map(|m| {
                format!(
                    "{{\"param\": {}, \"elem\": \"{}\", \"offset\": {}, \"rows\": {}, \"cols\": {}, \"box\": [{}, {}], \"swizzle\": {}}}",
                    json_str(&m.param),
                    m.elem.name(),
                    json_str(&m.offset),
                    json_str(&m.rows),
                    json_str(&m.cols),
                    m.box_rows,
                    m.box_cols,
                    m.swizzle
                )
            })
            .collect();
        let _ = writeln!(s, "  \"tensor_maps\": [{}]", maps.join(", "));
        s.push_str("}\n");
        s
    }
}

fn param_json(p: &ParamInfo) -> String {
    let name = json_str(&p.name);
    match &p.kind {
        ParamKind::Scalar(s) => {
            format!("{{\"name\": {name}, \"kind\": \"scalar\", \"type\": \"{}\"}}", s.name())
        }
        ParamKind::View {
            space,
            elem,
            mutable,
        } => format!(
            "{{\"name\": {name}, \"kind\": \"view\", \"space\": \"{}\", \"elem\": \"{}\", \"mutable\": {mutable}}}",
            space_name(*space),
            type_name(elem)
        ),
    }
}

fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn space_name(space: Space) -> &'static str {
    match space {
        Space::Global => "global",
        Space::Shared => "shared",
    }
}

/// The language's spelling of a scalar or vector type ("f32", "f16x2").
pub(crate) fn type_name(ty: &Type) -> String {
    match ty {
        Type::Scalar(s) => s.name().to_string(),
        Type::Vector(s, n) => format!("{}x{n}", s.name()),
        Type::Void => "void".to_string(),
        Type::View {
            space,
            elem,
            mutable,
        } => format!(
            "{} {}[{}]",
            space_name(*space),
            if *mutable { "mut " } else { "" },
            type_name(elem)
        ),
        Type::Frag(_) | Type::Array { .. } | Type::TensorMap(_) => ty.to_string(),
    }
}

/// Builds the manifest of a kernel; `shared` is (static, dynamic) bytes.
pub(crate) fn kernel_info(
    f: &Function,
    launch: &ir::Launch,
    shared: (u64, u64),
) -> Result<KernelInfo, Diagnostic> {
    let params = f
        .params
        .iter()
        .map(|&id| {
            let var = &f.vars[id.0 as usize];
            let kind = match &var.ty {
                Type::Scalar(s) => ParamKind::Scalar(*s),
                Type::View {
                    space,
                    elem,
                    mutable,
                } => ParamKind::View {
                    space: *space,
                    elem: (**elem).clone(),
                    mutable: *mutable,
                },
                other => {
                    return Err(Diagnostic::error(
                        format!(
                            "kernel parameter `{}` has type {}; kernels take scalars and views",
                            var.name,
                            type_name(other)
                        ),
                        var.span,
                    ))
                }
            };
            Ok(ParamInfo {
                name: var.name.clone(),
                kind,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let [gx, gy, gz] = &launch.grid;
    Ok(KernelInfo {
        name: f.name.clone(),
        params,
        block: launch.block,
        cluster: launch.cluster,
        grid: [grid_text(gx, f)?, grid_text(gy, f)?, grid_text(gz, f)?],
        static_shared_bytes: shared.0,
        dynamic_shared_bytes: shared.1,
        specialization: launch
            .specialization
            .iter()
            .map(|(k, v)| (k.clone(), v.to_string()))
            .collect(),
        tensor_maps: launch
            .tensor_maps
            .iter()
            .map(|m| {
                Ok(TensorMapInfo {
                    param: f.vars[m.param.0 as usize].name.clone(),
                    elem: m.elem,
                    offset: grid_text(&m.offset, f)?,
                    rows: grid_text(&m.rows, f)?,
                    cols: grid_text(&m.cols, f)?,
                    box_rows: m.box_rows,
                    box_cols: m.box_cols,
                    swizzle: m.swizzle_bytes(),
                })
            })
            .collect::<Result<Vec<_>, Diagnostic>>()?,
    })
}

/// Renders a grid expression in the runtime's grammar; anything else is a located error.
fn grid_text(e: &ir::Expr, f: &Function) -> Result<String, Diagnostic> {
    let unsupported = |what: &str| {
        Diagnostic::error(
            format!("{what} cannot appear in a grid expression: the runtime evaluates grids with integer `+ - * / %`, `min` and `max` over scalar parameters"),
            e.span,
        )
    };
    // Constant parts (compile-time parameters, `select`s on them) fold to their value.
    if let Ok(ConstValue::Int(i)) = zinc_dsl::consteval::eval(e) {
        return Ok(i.to_string());
    }
    Ok(match &e.kind {
        ExprKind::Const(ConstValue::Int(i)) => i.to_string(),
        ExprKind::Const(_) => return Err(unsupported("a non-integer constant")),
        ExprKind::Select(c, a, b) => match zinc_dsl::consteval::eval(c) {
            Ok(ConstValue::Bool(pick_a)) => grid_text(if pick_a { a } else { b }, f)?,
            _ => return Err(unsupported("a `select` on a run-time condition")),
        },
        ExprKind::Var(id) => f.vars[id.0 as usize].name.clone(),
        // Integer casts keep the value for the non-negative sizes a grid is made of.
        ExprKind::Cast(inner) if inner.ty.scalar().is_some_and(Scalar::is_int) => {
            grid_text(inner, f)?
        }
        // The checker desugars `cdiv(a, b)` to `(a + b - 1) / b`; the runtime has `cdiv`, which
        // cannot overflow the way the u32 sum could.
        ExprKind::Binary(BinOp::Div, num, b) if cdiv_numerator(num, b).is_some() => {
            let a = cdiv_numerator(num, b).expect("checked by the guard");
            format!("cdiv({}, {})", grid_text(a, f)?, grid_text(b, f)?)
        }
        ExprKind::Binary(op, a, b) => {
            let op = match op {
                BinOp::Add => "+",
                BinOp::Sub => "-",
                BinOp::Mul => "*",
                BinOp::Div => "/",
                BinOp::Rem => "%",
                _ => return Err(unsupported("this operator")),
            };
            format!("({} {op} {})", grid_text(a, f)?, grid_text(b, f)?)
        }
        ExprKind::Builtin(b @ (Builtin::Max | Builtin::Min), args) if args.len() == 2 => {
            let name = if *b == Builtin::Max { "max" } else { "min" };
            format!(
                "{name}({}, {})",
                grid_text(&args[0], f)?,
                grid_text(&args[1], f)?
            )
        }
        _ => return Err(unsupported("this expression")),
    })
}

/// `a` when `num` is `a + b - 1` (either operand order of the sum).
fn cdiv_numerator<'e>(num: &'e ir::Expr, b: &ir::Expr) -> Option<&'e ir::Expr> {
    let ExprKind::Binary(BinOp::Sub, sum, one) = &num.kind else {
        return None;
    };
    let ExprKind::Binary(BinOp::Add, x, y) = &sum.kind else {
        return None;
    };
    let same = |e: &ir::Expr| e.kind == b.kind;
    match one.kind == ExprKind::Const(ConstValue::Int(1)) {
        true if same(y) => Some(x),
        true if same(x) => Some(y),
        _ => None,
    }
}
