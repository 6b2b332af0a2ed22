//! The escape hatches: calls of any LLVM intrinsic by name, and inline PTX. Both are checked
//! before the module sees them, because LLVM aborts the process on some malformed ones.

use inkwell::attributes::AttributeLoc;
use inkwell::intrinsics::Intrinsic;
use inkwell::types::{BasicTypeEnum, FunctionType};
use inkwell::values::{BasicMetadataValueEnum, BasicValueEnum};
use zinc_dsl::diag::{Diagnostic, Span};
use zinc_dsl::ir::{Expr, ExprKind, Scalar, Type};

use super::types::elem_scalar;
use super::{convergent, fn_type, At, FnLowerer, Result};
use crate::manifest::type_name;

impl<'a, 'ctx> FnLowerer<'a, 'ctx> {
    fn signature(&self, ret: &Type, args: &[BasicValueEnum<'ctx>]) -> FunctionType<'ctx> {
        let params: Vec<BasicTypeEnum> = args.iter().map(|a| a.get_type()).collect();
        fn_type(self.ctx, self.types.value(ret), &params)
    }

    /// `intrinsic<T>("llvm.nvvm.name", args...)`: declared with the IR's types as the signature.
    pub(super) fn user_intrinsic(
        &mut self,
        name: &str,
        args: &[Expr],
        ret: &Type,
        span: Span,
    ) -> Result<Option<BasicValueEnum<'ctx>>> {
        let vals = args
            .iter()
            .map(|a| self.value(a))
            .collect::<Result<Vec<_>>>()?;
        if Intrinsic::find(name).is_none() {
            return Err(
                Diagnostic::error(format!("LLVM 22 has no intrinsic `{name}`"), span).with_note(
                    "intrinsic names look like `llvm.nvvm.read.ptx.sreg.clock`",
                    None,
                ),
            );
        }
        let sig = self.signature(ret, &vals);
        let func = match self.module.get_function(name) {
            Some(f) if f.get_type() == sig => f,
            Some(f) => {
                return Err(Diagnostic::error(
                    format!(
                        "intrinsic `{name}` is called here as `{}` but elsewhere as `{}`",
                        sig.print_to_string(),
                        f.get_type().print_to_string()
                    ),
                    span,
                ))
            }
            None => {
                self.check_intrinsic_call(name, sig, &vals, span)?;
                self.module.add_function(name, sig, None)
            }
        };
        self.call(func, &vals, span)
    }

    /// Verifies one call of the intrinsic in a scratch module: LLVM's verifier checks the types
    /// against the intrinsic's definition (and immediate operands) without touching ours.
    fn check_intrinsic_call(
        &self,
        name: &str,
        sig: FunctionType<'ctx>,
        args: &[BasicValueEnum<'ctx>],
        span: Span,
    ) -> Result<()> {
        let scratch = self.ctx.create_module("intrinsic_check");
        let decl = scratch.add_function(name, sig, None);
        let probe_ty = self.ctx.void_type().fn_type(&sig.get_param_types(), false);
        let probe = scratch.add_function("probe", probe_ty, None);
        let b = self.ctx.create_builder();
        b.position_at_end(self.ctx.append_basic_block(probe, "entry"));
        // Constants stay constants (immediate operands must be); the rest become parameters.
        let call_args: Vec<BasicMetadataValueEnum> = args
            .iter()
            .zip(probe.get_param_iter())
            .map(|(&a, p)| match is_plain_constant(a) {
                true => a.into(),
                false => p.into(),
            })
            .collect();
        b.build_call(decl, &call_args, "").at(span)?;
        b.build_return(None).at(span)?;
        scratch.verify().map_err(|msg| {
            let msg = msg.to_string();
            let first = msg
                .lines()
                .next()
                .unwrap_or("invalid call")
                .trim_end_matches('!');
            Diagnostic::error(
                format!(
                    "LLVM rejects this call of `{name}`: {}",
                    first.to_lowercase()
                ),
                span,
            )
            .with_note(
                format!("zinc declared it as `{}`", sig.print_to_string()),
                None,
            )
        })
    }

    /// `asm<T>(template, constraints, args...)`: inline PTX, always treated as having side
    /// effects (the IR has no way to say it is pure).
    pub(super) fn inline_asm(
        &mut self,
        template: &str,
        constraints: &str,
        args: &[Expr],
        ret: &Type,
        span: Span,
    ) -> Result<Option<BasicValueEnum<'ctx>>> {
        let operands = check_constraints(constraints, ret, args, span)?;
        check_template(template, operands, span)?;
        let vals = args
            .iter()
            .map(|a| self.value(a))
            .collect::<Result<Vec<_>>>()?;
        let sig = self.signature(ret, &vals);
        let asm = self.ctx.create_inline_asm(
            sig,
            template.to_string(),
            constraints.to_string(),
            true,
            false,
            None,
            false,
        );
        let args: Vec<BasicMetadataValueEnum> = vals.iter().map(|&v| v.into()).collect();
        let site = self.b.build_indirect_call(sig, asm, &args, "").at(span)?;
        // The asm may hold warp-synchronous instructions (shfl, bar, mma).
        site.add_attribute(AttributeLoc::Function, convergent(self.ctx));
        Ok(site.try_as_basic_value().basic())
    }
}

/// An integer or float constant (not one that refers to a global of our module).
fn is_plain_constant(v: BasicValueEnum) -> bool {
    match v {
        BasicValueEnum::IntValue(i) => i.is_const(),
        BasicValueEnum::FloatValue(f) => f.is_const(),
        _ => false,
    }
}

/// Checks an NVPTX constraint string against the result and argument types; returns the number
/// of operands (`$0`...) the template may use. A mismatch here would make LLVM's register
/// allocator abort the process.
fn check_constraints(constraints: &str, ret: &Type, args: &[Expr], span: Span) -> Result<usize> {
    let err = |msg: String| Err(Diagnostic::error(msg, span));
    let parts: Vec<&str> = match constraints.trim() {
        "" => vec![],
        c => c.split(',').map(str::trim).collect(),
    };
    let outputs: Vec<&str> = parts.iter().filter_map(|p| p.strip_prefix('=')).collect();
    let inputs: Vec<&str> = parts
        .iter()
        .copied()
        .filter(|p| !p.starts_with('=') && !p.starts_with('~'))
        .collect();
    if let Some(pos) = parts.iter().position(|p| !p.starts_with('=')) {
        if parts[pos..].iter().any(|p| p.starts_with('=')) {
            return err("outputs (`=r`, ...) must come before inputs in the constraints".into());
        }
    }
    match (outputs.len(), ret) {
        (0, Type::Void) | (1, Type::Scalar(_) | Type::Vector(..)) => {}
        (n, Type::Void) => {
            return err(format!(
                "asm<void> has no result, but the constraints declare {n} output(s)"
            ))
        }
        (n, _) => {
            return err(format!(
                "asm<{}> has one result, so the constraints need exactly one `=` output, not {n}",
                type_name(ret)
            ))
        }
    }
    if inputs.len() != args.len() {
        return err(format!(
            "the constraints declare {} input(s) but the asm has {} argument(s)",
            inputs.len(),
            args.len()
        ));
    }
    if let Some(out) = outputs.first() {
        check_letter(out.trim_start_matches('&'), ret, None, span)?;
    }
    for (c, arg) in inputs.iter().zip(args) {
        match c.parse::<usize>() {
            Ok(tied) if tied < outputs.len() && arg.ty == *ret => {}
            Ok(tied) => {
                return err(format!(
                    "input constraint `{tied}` must name an output of the same type ({})",
                    type_name(&arg.ty)
                ))
            }
            Err(_) => check_letter(c, &arg.ty, Some(arg), span)?,
        }
    }
    Ok(outputs.len() + inputs.len())
}

/// Checks that a one-letter NVPTX constraint fits the operand's type.
fn check_letter(c: &str, ty: &Type, arg: Option<&Expr>, span: Span) -> Result<()> {
    let size = ty.size();
    let is = |s: Scalar| elem_scalar(ty) == Some(s) && matches!(ty, Type::Scalar(_));
    let is_bool = is(Scalar::Bool);
    let fits = match c {
        "b" => is_bool,
        "c" => !is_bool && matches!(size, 1 | 2),
        "h" => !is_bool && size == 2,
        "r" => !is_bool && size == 4,
        "l" => !is_bool && size == 8,
        "f" => is(Scalar::F32),
        "d" => is(Scalar::F64),
        "n" => {
            matches!(
                arg,
                Some(Expr {
                    kind: ExprKind::Const(_),
                    ..
                })
            ) && elem_scalar(ty).is_some_and(Scalar::is_int)
        }
        _ => {
            return Err(Diagnostic::error(
                format!("unsupported asm constraint `{c}`; NVPTX takes b, c, h, r, l, f, d and n"),
                span,
            ))
        }
    };
    if fits {
        return Ok(());
    }
    let want = match c {
        "b" => "a bool",
        "c" => "an 8- or 16-bit value",
        "h" => "a 16-bit value",
        "r" => "a 32-bit value",
        "l" => "a 64-bit value or a view",
        "f" => "an f32",
        "d" => "an f64",
        _ => "an integer constant",
    };
    Err(Diagnostic::error(
        format!("asm constraint `{c}` needs {want}, not {}", type_name(ty)),
        span,
    ))
}

/// Checks the `$N` / `${N:mod}` operand references of a template (`$$` is a literal `$`).
fn check_template(template: &str, operands: usize, span: Span) -> Result<()> {
    let bytes = template.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'$' {
            i += 1;
            continue;
        }
        let rest = &template[i + 1..];
        let digits = rest.strip_prefix('{').unwrap_or(rest);
        let n: String = digits.chars().take_while(char::is_ascii_digit).collect();
        let operand = match (rest.starts_with('$'), n.parse::<usize>()) {
            (true, _) => {
                i += 2;
                continue;
            }
            (false, Ok(k)) => k,
            (false, Err(_)) => {
                return Err(Diagnostic::error(
                    "`$` in an asm template must be followed by an operand number (`$0`, `${0}`) or another `$`",
                    span,
                ))
            }
        };
        if operand >= operands {
            return Err(Diagnostic::error(
                format!("asm template uses `${operand}` but the constraints declare {operands} operand(s)"),
                span,
            ));
        }
        i += 1 + n.len();
    }
    Ok(())
}
