//! Written types to IR types, with the rules of where each kind of type may appear.

use super::{suggest, Checker, Res};
use crate::ast::TypeExpr;
use crate::diag::Diagnostic;
use crate::ir::{Frag, FragRole, Scalar, Space, Type};

/// Where a type is written; each place admits different types.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Usage {
    Const,
    CtParam,
    KernelParam,
    FnParam,
    FnResult,
    Local,
    Cast,
    /// The target of `bitcast<T>`: casts' types, and views.
    Bitcast,
    SharedElem,
    /// The result of `intrinsic<T>` or `asm<T>`: `void` allowed.
    Foreign,
}

/// `f32x4` -> (F32, 4).
pub fn vector_type(name: &str) -> Option<(Scalar, u8)> {
    vector_of(name, Scalar::from_name)
}

/// `NAMExN` -> (the scalar `NAME` stands for, N), for N in 2, 3, 4.
fn vector_of(name: &str, scalar: impl Fn(&str) -> Option<Scalar>) -> Option<(Scalar, u8)> {
    let (elem, lanes) = name.rsplit_once('x')?;
    let lanes = match lanes {
        "2" => 2,
        "3" => 3,
        "4" => 4,
        _ => return None,
    };
    scalar(elem)
        .filter(|s| *s != Scalar::Bool)
        .map(|s| (s, lanes))
}

/// `frag_a` -> A, for the fragment type constructors.
pub fn frag_role(name: &str) -> Option<FragRole> {
    match name {
        "frag_a" => Some(FragRole::A),
        "frag_b" => Some(FragRole::B),
        "frag_acc" => Some(FragRole::Acc),
        _ => None,
    }
}

fn type_names() -> Vec<String> {
    let mut names: Vec<String> = Scalar::ALL.iter().map(|s| s.name().to_string()).collect();
    for s in Scalar::ALL.iter().filter(|s| **s != Scalar::Bool) {
        for n in 2..=4 {
            names.push(format!("{}x{n}", s.name()));
        }
    }
    names
}

pub fn resolve(ck: &mut Checker<'_>, t: &TypeExpr, usage: Usage) -> Res<Type> {
    let ty = match t {
        TypeExpr::Named(id) => {
            if let Some(s) = ck
                .type_param(&id.name)
                .or_else(|| Scalar::from_name(&id.name))
            {
                Type::Scalar(s)
            } else if let Some((s, n)) = vector_type(&id.name)
                // A type parameter's vectors: `OUTx2` where OUT is f16 is `f16x2`.
                .or_else(|| vector_of(&id.name, |p| ck.type_param(p)))
            {
                Type::Vector(s, n)
            } else if id.name == "void" && usage == Usage::Foreign {
                Type::Void
            } else {
                let names = type_names();
                let mut d = Diagnostic::error(format!("unknown type `{}`", id.name), id.span);
                if let Some(best) = suggest::closest(&id.name, names.iter().map(String::as_str)) {
                    d = d.with_note(format!("did you mean `{best}`?"), None);
                }
                return Err(ck.error(d));
            }
        }
        TypeExpr::Generic { name, arg, span } if name.name == "tensor_map" => {
            match resolve(ck, arg, Usage::SharedElem)? {
                Type::Scalar(s) => Type::TensorMap(s),
                elem => {
                    let d = Diagnostic::error(
                        format!("`tensor_map<{elem}>` is not a tensor map type: its element must be a scalar"),
                        *span,
                    );
                    return Err(ck.error(d));
                }
            }
        }
        TypeExpr::Generic { name, arg, span } => {
            let Some(role) = frag_role(&name.name) else {
                let d =
                    Diagnostic::error(format!("unknown generic type `{}`", name.name), name.span)
                        .with_note(
                            "the generic types are `frag_a`, `frag_b`, `frag_acc` and `tensor_map`",
                            None,
                        );
                return Err(ck.error(d));
            };
            let elem = resolve(ck, arg, Usage::SharedElem)?;
            let frag = elem.scalar().and_then(|s| Frag::new(role, s));
            let Some(frag) = frag else {
                let allowed = match role {
                    FragRole::Acc => "`f32` or `i32`",
                    _ => "`f16`, `bf16`, `i8` or `f32` (as tf32)",
                };
                let d = Diagnostic::error(
                    format!(
                        "`{}<{elem}>` is not a fragment type: its element must be {allowed}",
                        name.name
                    ),
                    *span,
                );
                return Err(ck.error(d));
            };
            Type::Frag(frag)
        }
        // Locals resolve their array types themselves (the dimensions may use the kernel's
        // compile-time parameters); anywhere else an array is out of place.
        TypeExpr::Array { span, .. } => {
            let d = Diagnostic::error(
                "register arrays can only be the type of a local (`var` or `let`)",
                *span,
            );
            return Err(ck.error(d));
        }
        TypeExpr::View {
            space,
            mutable,
            elem,
            ..
        } => {
            let elem = resolve(ck, elem, Usage::SharedElem)?;
            Type::View {
                space: *space,
                elem: Box::new(elem),
                mutable: *mutable,
            }
        }
    };
    let allowed = match (&ty, usage) {
        (Type::Scalar(_), _) => true,
        (Type::Void, u) => u == Usage::Foreign,
        (Type::Vector(..), u) => !matches!(u, Usage::Const | Usage::CtParam | Usage::KernelParam),
        (Type::Frag(_), u) => matches!(u, Usage::FnParam | Usage::FnResult | Usage::Local),
        (Type::Array { .. }, u) => u == Usage::Local,
        (Type::TensorMap(_), u) => u == Usage::FnParam,
        (Type::View { space, .. }, u) => match u {
            Usage::KernelParam => *space == Space::Global,
            Usage::FnParam | Usage::FnResult | Usage::Local | Usage::Bitcast => true,
            _ => false,
        },
    };
    if allowed {
        return Ok(ty);
    }
    let why = match (usage, &ty) {
        (Usage::KernelParam, Type::View { .. }) => {
            "kernel parameters cannot be shared views (declare the shared array in the kernel)"
        }
        (Usage::KernelParam, Type::TensorMap(_)) => {
            "kernels take no tensor maps; declare one with `let m = tensor_map(...)`"
        }
        (Usage::KernelParam, _) => "kernel parameters must be scalars or global views",
        (_, Type::TensorMap(_)) => {
            "tensor maps are declared with `let m = tensor_map(...)` in kernels and passed to functions' `tensor_map<T>` parameters"
        }
        (Usage::Const | Usage::CtParam, _) => "constants must have a scalar type",
        (Usage::Cast, _) => "casts convert scalars and vectors only",
        (Usage::Bitcast, _) => "bitcasts reinterpret scalars, vectors and views only",
        (Usage::SharedElem, _) => "elements must be scalars or vectors",
        (_, Type::Frag(_)) => {
            "fragments live in registers: locals, parameters and results of functions"
        }
        _ => "this type is not allowed here",
    };
    Err(ck.error(Diagnostic::error(
        format!("type `{ty}` cannot be used here: {why}"),
        t.span(),
    )))
}
