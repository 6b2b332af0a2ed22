//! Kernels: compile-time parameters and `-D` defines (specialization), parameters and the launch
//! configuration.

use super::body::{Binding, Context, FnCx};
use super::expr::int_const;
use super::types::{self, Usage};
use super::{eval_or_report, suggest, Checked, Checker, Res};
use crate::ast::{self, Item};
use crate::consteval::{int_range, round_float};
use crate::diag::{Diagnostic, Severity};
use crate::ir::{self, ConstValue, CtValue, Scalar, Type};

/// Threads per block that every supported arch allows.
const MAX_THREADS: u64 = 1024;
/// Blocks per cluster that every cluster-capable GPU allows (more needs an opt-in at launch).
const MAX_CLUSTER_BLOCKS: u64 = 8;

pub fn root_kernels<'a>(ck: &Checker<'a>) -> impl Iterator<Item = &'a ast::KernelItem> {
    ck.loaded.files[0]
        .items
        .iter()
        .filter_map(|item| match item {
            Item::Kernel(k) => Some(k),
            _ => None,
        })
}

/// The kernel instances (`kernel NAME = KERNEL<...>;`) of the root file.
pub fn root_instances<'a>(ck: &Checker<'a>) -> impl Iterator<Item = &'a ast::KernelInstance> {
    ck.loaded.files[0]
        .items
        .iter()
        .filter_map(|item| match item {
            Item::KernelInstance(k) => Some(k),
            _ => None,
        })
}

/// Kernel `instance.of` checked again as `instance.name`, its arguments fixing compile-time
/// parameters over the defaults and the defines.
pub fn check_instance(
    ck: &mut Checker<'_>,
    instance: &ast::KernelInstance,
    defines: &[(String, String)],
) -> Option<Checked> {
    let Some((file, kernel)) = instance_target(ck, instance) else {
        let d = Diagnostic::error(
            format!(
                "`{}` is not a kernel of this file or of a file it imports",
                instance.of.name
            ),
            instance.of.span,
        );
        ck.error(d);
        return None;
    };
    let mut fixed = defines.to_vec();
    for (name, value) in &instance.args {
        if !kernel.ct_params.iter().any(|p| p.name.name == name.name) {
            let d = Diagnostic::error(
                format!(
                    "kernel `{}` has no compile-time parameter `{}`",
                    kernel.name.name, name.name
                ),
                name.span,
            );
            ck.error(d);
            return None;
        }
        let Some(text) = literal_text(value) else {
            let d = Diagnostic::error(
                "an instance's compile-time argument must be a literal",
                value.span,
            );
            ck.error(d);
            return None;
        };
        // Later entries win (`ct_value` takes the last define of a name).
        fixed.push((name.name.clone(), text));
    }
    check_kernel(ck, file, kernel, &instance.name.name, &fixed)
}

/// The kernel an instance repeats, and the loaded file that defines it.
fn instance_target<'a>(
    ck: &Checker<'a>,
    instance: &ast::KernelInstance,
) -> Option<(u32, &'a ast::KernelItem)> {
    let loaded = ck.loaded;
    (0u32..).zip(&loaded.files).find_map(|(file, ast)| {
        ast.items.iter().find_map(|item| match item {
            Item::Kernel(k) if k.name.name == instance.of.name => Some((file, k)),
            _ => None,
        })
    })
}

/// A literal (possibly negated), or a type parameter's type name, as the text of a define.
fn literal_text(e: &ast::Expr) -> Option<String> {
    match &e.kind {
        ast::ExprKind::Name(name) => Some(name.clone()),
        ast::ExprKind::Int { value, .. } => Some(value.to_string()),
        ast::ExprKind::Float { value, .. } => Some(value.to_string()),
        ast::ExprKind::Bool(b) => Some(b.to_string()),
        ast::ExprKind::Unary(ir::UnOp::Neg, inner) => Some(format!("-{}", literal_text(inner)?)),
        _ => None,
    }
}

/// Every define must name a compile-time parameter of some kernel of the root file.
pub fn check_defines(ck: &mut Checker<'_>, defines: &[(String, String)]) {
    let instanced: Vec<&ast::KernelItem> = root_instances(ck)
        .filter_map(|i| instance_target(ck, i).map(|(_, k)| k))
        .collect();
    let declared: Vec<&str> = (root_kernels(ck).chain(instanced))
        .flat_map(|k| k.ct_params.iter().map(|p| p.name.name.as_str()))
        .collect();
    for (name, value) in defines {
        if declared.contains(&name.as_str()) {
            continue;
        }
        let mut d = Diagnostic {
            severity: Severity::Error,
            message: format!(
                "`-D {name}={value}`: no kernel in `{}` has a compile-time parameter `{name}`",
                ck.file_name(0)
            ),
            span: None,
            notes: vec![],
        };
        if let Some(best) = suggest::closest(name, declared.iter().copied()) {
            d = d.with_note(format!("did you mean `{best}`?"), None);
        }
        ck.error(d);
    }
}

/// Parse a define's value as a constant of type `s`.
fn parse_define(text: &str, s: Scalar) -> Option<ConstValue> {
    let t = text.trim().replace('_', "");
    if s == Scalar::Bool {
        return match t.as_str() {
            "true" => Some(ConstValue::Bool(true)),
            "false" => Some(ConstValue::Bool(false)),
            _ => None,
        };
    }
    if s.is_float() {
        let v: f64 = t.parse().ok()?;
        return v.is_finite().then(|| ConstValue::Float(round_float(v, s)));
    }
    let (negative, body) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t.as_str()),
    };
    let (radix, digits) = match body.get(..2) {
        Some("0x" | "0X") => (16, &body[2..]),
        Some("0b" | "0B") => (2, &body[2..]),
        _ => (10, body),
    };
    if digits.starts_with(['+', '-']) {
        return None;
    }
    let v = i128::try_from(u128::from_str_radix(digits, radix).ok()?).ok()?;
    let v = if negative { -v } else { v };
    let (lo, hi) = int_range(s);
    (lo..=hi).contains(&v).then_some(ConstValue::Int(v))
}

fn dims_count(cx: &mut FnCx<'_, '_>, dims: &ast::LaunchDims, what: &str) -> Res<()> {
    if (1..=3).contains(&dims.dims.len()) {
        return Ok(());
    }
    let d = Diagnostic::error(
        format!(
            "`{what}(...)` takes 1 to 3 dimensions, found {}",
            dims.dims.len()
        ),
        dims.span,
    );
    Err(cx.error(d))
}

/// Kernel `k` of loaded file `file` checked under the name `name` (its own, or an instance's).
pub fn check_kernel(
    ck: &mut Checker<'_>,
    file: u32,
    k: &ast::KernelItem,
    name: &str,
    defines: &[(String, String)],
) -> Option<Checked> {
    let file_name = ck.file_name(file).to_string();
    let mut cx = FnCx::new(ck, file, Context::Kernel);
    let specialization = ct_params(&mut cx, k, defines);
    let mut params = Vec::new();
    for p in &k.params {
        match types::resolve(cx.ck, &p.ty, Usage::KernelParam) {
            Ok(ty) => params.push(cx.declare_param(&p.name.name, ty, p.name.span)),
            Err(_) => cx.bind(&p.name.name, Binding::Poisoned, p.name.span),
        }
    }
    let grid = grid(&mut cx, &k.grid);
    let block = block(&mut cx, &k.block);
    let cluster = cluster(&mut cx, k.cluster.as_ref());
    let body = cx.body(&k.body);
    let tensor_maps = std::mem::take(&mut cx.tensor_maps);
    cx.ck.type_params.clear();
    let (vars, shared, calls, failed) = cx.finish();
    if failed {
        return None;
    }
    Some(Checked {
        function: ir::Function {
            name: name.to_string(),
            kind: ir::FunctionKind::Kernel(ir::Launch {
                block: block.ok()?,
                cluster: cluster.ok()?,
                grid: grid.ok()?,
                specialization,
                tensor_maps,
            }),
            params,
            ret: Type::Void,
            vars,
            shared,
            body,
            span: k.span,
            file: file_name,
        },
        calls,
    })
}

/// Bind the compile-time parameters (default or define) and return their values: constants in
/// the kernel's scope, type parameters in the checker's (`types::resolve` reads them).
fn ct_params(
    cx: &mut FnCx<'_, '_>,
    k: &ast::KernelItem,
    defines: &[(String, String)],
) -> Vec<(String, CtValue)> {
    cx.ck.type_params.clear();
    let mut values: Vec<(String, CtValue)> = Vec::new();
    for (i, p) in k.ct_params.iter().enumerate() {
        let name = &p.name.name;
        if let Some(first) = k.ct_params[..i].iter().find(|q| &q.name.name == name) {
            let d = Diagnostic::error(
                format!("compile-time parameter `{name}` is declared twice"),
                p.name.span,
            )
            .with_note("first declared here", Some(first.name.span));
            cx.error(d);
            continue;
        }
        if is_type_param(p) {
            if let Ok(s) = ct_type(cx, p, defines) {
                cx.ck.type_params.push((name.clone(), s));
                values.push((name.clone(), CtValue::Type(s)));
            }
            continue;
        }
        let value = ct_value(cx, p, defines);
        match value {
            Ok((s, v)) => {
                cx.bind(name, Binding::Const(s, v.clone()), p.name.span);
                values.push((name.clone(), CtValue::Const(v)));
            }
            Err(_) => cx.bind(name, Binding::Poisoned, p.name.span),
        }
    }
    values
}

/// `NAME: type = DEFAULT`: a parameter whose value is a scalar type.
fn is_type_param(p: &ast::CtParam) -> bool {
    matches!(&p.ty, Some(ast::TypeExpr::Named(t)) if t.name == "type")
}

/// A type parameter's scalar type: its define's, else its default's.
fn ct_type(cx: &mut FnCx<'_, '_>, p: &ast::CtParam, defines: &[(String, String)]) -> Res<Scalar> {
    let name = &p.name.name;
    if Scalar::from_name(name).is_some() {
        let d = Diagnostic::error(
            format!("type parameter `{name}` cannot take the name of a scalar type"),
            p.name.span,
        );
        return Err(cx.error(d));
    }
    if let Some((_, text)) = defines.iter().rev().find(|(n, _)| n == name) {
        return Scalar::from_name(text.trim()).ok_or_else(|| {
            let d = Diagnostic::error(
                format!("invalid value `{text}` for type parameter `{name}` (from `-D {name}={text}`): it takes a scalar type such as `f16`"),
                p.name.span,
            );
            cx.error(d)
        });
    }
    let default = match &p.default.kind {
        ast::ExprKind::Name(t) => Scalar::from_name(t),
        _ => None,
    };
    default.ok_or_else(|| {
        let d = Diagnostic::error(
            format!("type parameter `{name}`'s default must be a scalar type such as `f32`"),
            p.default.span,
        );
        cx.error(d)
    })
}

fn ct_value(
    cx: &mut FnCx<'_, '_>,
    p: &ast::CtParam,
    defines: &[(String, String)],
) -> Res<(Scalar, ConstValue)> {
    let s = match &p.ty {
        Some(t) => match types::resolve(cx.ck, t, Usage::CtParam)? {
            Type::Scalar(s) => s,
            _ => unreachable!("Usage::CtParam admits scalars only"),
        },
        None => Scalar::U32,
    };
    let default = cx.constant(&p.default, s, "a compile-time parameter's default")?;
    let Some((_, text)) = defines.iter().rev().find(|(n, _)| *n == p.name.name) else {
        return Ok((s, default));
    };
    match parse_define(text, s) {
        Some(v) => Ok((s, v)),
        None => {
            let name = &p.name.name;
            let d = Diagnostic::error(
                format!(
                    "invalid value `{text}` for compile-time parameter `{name}: {}` (from `-D {name}={text}`)",
                    s.name()
                ),
                p.name.span,
            );
            Err(cx.error(d))
        }
    }
}

fn grid(cx: &mut FnCx<'_, '_>, dims: &ast::LaunchDims) -> Res<[ir::Expr; 3]> {
    dims_count(cx, dims, "grid")?;
    let u32_ty = Type::Scalar(Scalar::U32);
    let mut out = Vec::new();
    for d in &dims.dims {
        let Ok(x) = cx.expect(d, &u32_ty, "a grid dimension") else {
            continue;
        };
        if let Some(at) = cx.host_unknown(&x) {
            let d = Diagnostic::error(
                "`grid(...)` may only use the kernel's scalar parameters and constants",
                at,
            );
            cx.error(d);
            continue;
        }
        out.push(x);
    }
    if out.len() != dims.dims.len() {
        return Err(super::Reported);
    }
    while out.len() < 3 {
        out.push(int_const(1, Scalar::U32, dims.span));
    }
    out.try_into().map_err(|_| super::Reported)
}

/// The constant dimensions of `block(...)` or `cluster(...)` (`what`), each positive.
fn const_dims(cx: &mut FnCx<'_, '_>, dims: &ast::LaunchDims, what: &str) -> Res<[u32; 3]> {
    dims_count(cx, dims, what)?;
    let mut out = [1u32; 3];
    let mut failed = false;
    let dimension = format!("a {what} dimension");
    for (slot, d) in out.iter_mut().zip(&dims.dims) {
        let value = cx
            .expect(d, &Type::Scalar(Scalar::U32), &dimension)
            .and_then(|x| eval_or_report(cx.ck, &x, &dimension));
        match value {
            Ok(ConstValue::Int(v)) if v > 0 => *slot = v as u32,
            Ok(_) => {
                cx.error(Diagnostic::error(
                    format!("{what} dimensions must be positive"),
                    d.span,
                ));
                failed = true;
            }
            Err(_) => failed = true,
        }
    }
    if failed {
        return Err(super::Reported);
    }
    Ok(out)
}

/// Blocks per cluster (`cluster(...)`, clusters of one block without it): at most the 8 a
/// cluster may portably hold.
fn cluster(cx: &mut FnCx<'_, '_>, dims: Option<&ast::LaunchDims>) -> Res<[u32; 3]> {
    let Some(dims) = dims else {
        return Ok([1; 3]);
    };
    bounded_dims(cx, dims, "cluster", "blocks", MAX_CLUSTER_BLOCKS)
}

fn block(cx: &mut FnCx<'_, '_>, dims: &ast::LaunchDims) -> Res<[u32; 3]> {
    bounded_dims(cx, dims, "block", "threads", MAX_THREADS)
}

/// [`const_dims`] of `what` whose product (its `units`) is at most `max`.
fn bounded_dims(
    cx: &mut FnCx<'_, '_>,
    dims: &ast::LaunchDims,
    what: &str,
    units: &str,
    max: u64,
) -> Res<[u32; 3]> {
    let out = const_dims(cx, dims, what)?;
    let total: u64 = out.iter().map(|&v| u64::from(v)).product();
    if total > max {
        let d = Diagnostic::error(
            format!("a {what} of {total} {units} is too large: at most {max} {units} per {what}"),
            dims.span,
        );
        return Err(cx.error(d));
    }
    Ok(out)
}
