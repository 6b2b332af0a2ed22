//! Compile-time evaluation of checked expressions: constants, shared-array dimensions, `block(...)`,
//! compile-time parameter defaults and constant loop steps. Integer arithmetic is exact and an
//! overflow of the expression's type is an error; casts wrap like Rust's `as`.

use crate::diag::Span;
use crate::ir::{BinOp, Builtin, ConstValue, Expr, ExprKind, LogicalOp, Scalar, Type, UnOp};

#[derive(Clone, Debug, PartialEq)]
pub enum ConstError {
    /// The expression at this span is only known at run time.
    NotConst(Span),
    Overflow(Span, Scalar),
    DivByZero(Span),
    BadShift(Span, Scalar),
}

impl ConstError {
    pub fn span(&self) -> Span {
        match self {
            ConstError::NotConst(s)
            | ConstError::Overflow(s, _)
            | ConstError::DivByZero(s)
            | ConstError::BadShift(s, _) => *s,
        }
    }

    pub fn message(&self) -> String {
        match self {
            ConstError::NotConst(_) => "this is not a compile-time constant".into(),
            ConstError::Overflow(_, ty) => format!("constant arithmetic overflows `{}`", ty.name()),
            ConstError::DivByZero(_) => "constant division by zero".into(),
            ConstError::BadShift(_, ty) => {
                format!("constant shift amount out of range for `{}`", ty.name())
            }
        }
    }
}

/// The smallest and largest value of an integer type.
pub fn int_range(s: Scalar) -> (i128, i128) {
    let bits = s.size() * 8;
    if s.is_signed() {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    }
}

/// Truncate to the type's width, then sign- or zero-extend (Rust's `as` between integers).
pub fn wrap(v: i128, s: Scalar) -> i128 {
    let bits = s.size() * 8;
    let mask = (1i128 << bits) - 1;
    let low = v & mask;
    if s.is_signed() && low >> (bits - 1) == 1 {
        low - (1i128 << bits)
    } else {
        low
    }
}

/// Round a float to the precision of its type (f16/bf16 are kept at f32 precision).
pub fn round_float(v: f64, s: Scalar) -> f64 {
    if s == Scalar::F64 {
        v
    } else {
        v as f32 as f64
    }
}

pub fn eval(e: &Expr) -> Result<ConstValue, ConstError> {
    let not_const = || ConstError::NotConst(e.span);
    let ty = match &e.ty {
        Type::Scalar(s) => *s,
        _ => return Err(not_const()),
    };
    match &e.kind {
        ExprKind::Const(v) => Ok(v.clone()),
        ExprKind::Unary(op, x) => unary(*op, eval(x)?, ty, e.span),
        ExprKind::Binary(op, a, b) => {
            let operand = a.ty.scalar().ok_or_else(not_const)?;
            binary(*op, eval(a)?, eval(b)?, operand, e.span)
        }
        ExprKind::Logical(op, a, b) => {
            let a = eval(a)?;
            match (op, a) {
                (LogicalOp::And, ConstValue::Bool(false)) => Ok(ConstValue::Bool(false)),
                (LogicalOp::Or, ConstValue::Bool(true)) => Ok(ConstValue::Bool(true)),
                _ => eval(b),
            }
        }
        ExprKind::Cast(x) => Ok(cast(eval(x)?, ty)),
        ExprKind::Select(c, a, b) => match eval(c)? {
            ConstValue::Bool(true) => eval(a),
            _ => eval(b),
        },
        ExprKind::Builtin(op @ (Builtin::Max | Builtin::Min), args) if args.len() == 2 => {
            let (a, b) = (eval(&args[0])?, eval(&args[1])?);
            let less = matches!(
                binary(BinOp::Lt, a.clone(), b.clone(), ty, e.span)?,
                ConstValue::Bool(true)
            );
            Ok(if less == (*op == Builtin::Min) { a } else { b })
        }
        _ => Err(not_const()),
    }
}

fn unary(op: UnOp, v: ConstValue, ty: Scalar, span: Span) -> Result<ConstValue, ConstError> {
    Ok(match (op, v) {
        (UnOp::Neg, ConstValue::Int(v)) => ConstValue::Int(fit(-v, ty, span)?),
        (UnOp::Neg, ConstValue::Float(v)) => ConstValue::Float(-v),
        (UnOp::Not, ConstValue::Bool(b)) => ConstValue::Bool(!b),
        (UnOp::Not, ConstValue::Int(v)) => ConstValue::Int(wrap(!v, ty)),
        _ => return Err(ConstError::NotConst(span)),
    })
}

fn fit(v: i128, ty: Scalar, span: Span) -> Result<i128, ConstError> {
    let (lo, hi) = int_range(ty);
    if (lo..=hi).contains(&v) {
        Ok(v)
    } else {
        Err(ConstError::Overflow(span, ty))
    }
}

/// `ty` is the operands' type.
fn binary(
    op: BinOp,
    a: ConstValue,
    b: ConstValue,
    ty: Scalar,
    span: Span,
) -> Result<ConstValue, ConstError> {
    use ConstValue::{Bool, Float, Int};
    let overflow = || ConstError::Overflow(span, ty);
    Ok(match (a, b) {
        (Int(a), Int(b)) => match op {
            BinOp::Add => Int(fit(a.checked_add(b).ok_or_else(overflow)?, ty, span)?),
            BinOp::Sub => Int(fit(a.checked_sub(b).ok_or_else(overflow)?, ty, span)?),
            BinOp::Mul => Int(fit(a.checked_mul(b).ok_or_else(overflow)?, ty, span)?),
            BinOp::Div | BinOp::Rem if b == 0 => return Err(ConstError::DivByZero(span)),
            BinOp::Div => Int(fit(a / b, ty, span)?),
            BinOp::Rem => Int(a % b),
            BinOp::And => Int(a & b),
            BinOp::Or => Int(a | b),
            BinOp::Xor => Int(a ^ b),
            BinOp::Shl | BinOp::Shr => {
                if !(0..i128::from(ty.size() * 8)).contains(&b) {
                    return Err(ConstError::BadShift(span, ty));
                }
                if op == BinOp::Shl {
                    Int(wrap(a.wrapping_shl(b as u32), ty))
                } else {
                    Int(a >> b)
                }
            }
            _ => Bool(compare(op, a.cmp(&b))),
        },
        (Float(a), Float(b)) => match op {
            BinOp::Add => Float(round_float(a + b, ty)),
            BinOp::Sub => Float(round_float(a - b, ty)),
            BinOp::Mul => Float(round_float(a * b, ty)),
            BinOp::Div => Float(round_float(a / b, ty)),
            BinOp::Rem => Float(round_float(a % b, ty)),
            _ => match a.partial_cmp(&b) {
                Some(ord) => Bool(compare(op, ord)),
                None => Bool(op == BinOp::Ne),
            },
        },
        (Bool(a), Bool(b)) => match op {
            BinOp::And => Bool(a & b),
            BinOp::Or => Bool(a | b),
            BinOp::Xor | BinOp::Ne => Bool(a ^ b),
            _ => Bool(compare(op, a.cmp(&b))),
        },
        _ => return Err(ConstError::NotConst(span)),
    })
}

fn compare(op: BinOp, ord: std::cmp::Ordering) -> bool {
    use std::cmp::Ordering::{Equal, Greater, Less};
    match op {
        BinOp::Eq => ord == Equal,
        BinOp::Ne => ord != Equal,
        BinOp::Lt => ord == Less,
        BinOp::Le => ord != Greater,
        BinOp::Gt => ord == Greater,
        _ => ord != Less,
    }
}

/// Convert a constant to `to` with Rust `as` semantics (float to int saturates; to bool is `!= 0`).
pub fn cast(v: ConstValue, to: Scalar) -> ConstValue {
    use ConstValue::{Bool, Float, Int};
    match (v, to) {
        (v, Scalar::Bool) => Bool(match v {
            Bool(b) => b,
            Int(i) => i != 0,
            Float(f) => f != 0.0,
        }),
        (Bool(b), t) if t.is_float() => Float(f64::from(u8::from(b))),
        (Bool(b), _) => Int(i128::from(b)),
        (Int(i), t) if t.is_float() => Float(round_float(i as f64, t)),
        (Int(i), t) => Int(wrap(i, t)),
        (Float(f), t) if t.is_float() => Float(round_float(f, t)),
        (Float(f), t) => {
            let (lo, hi) = int_range(t);
            Int(if f.is_nan() {
                0
            } else {
                (f as i128).clamp(lo, hi)
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_and_ranges() {
        assert_eq!(wrap(300, Scalar::U8), 44);
        assert_eq!(wrap(255, Scalar::I8), -1);
        assert_eq!(wrap(-1, Scalar::U32), 0xffff_ffff);
        assert_eq!(int_range(Scalar::I16), (-32768, 32767));
        assert_eq!(int_range(Scalar::U64), (0, u64::MAX as i128));
        assert_eq!(
            cast(ConstValue::Float(-3.7), Scalar::U8),
            ConstValue::Int(0)
        );
        assert_eq!(
            cast(ConstValue::Float(3.7), Scalar::I32),
            ConstValue::Int(3)
        );
        assert_eq!(
            cast(ConstValue::Int(-1), Scalar::U16),
            ConstValue::Int(65535)
        );
    }

    #[test]
    fn arithmetic_overflow_is_an_error() {
        let s = Span::default();
        let int = ConstValue::Int;
        assert_eq!(
            binary(
                BinOp::Add,
                int(4_000_000_000),
                int(400_000_000),
                Scalar::U32,
                s
            ),
            Err(ConstError::Overflow(s, Scalar::U32))
        );
        assert_eq!(
            binary(BinOp::Shl, int(0xffff_ffff), int(4), Scalar::U32, s),
            Ok(int(0xffff_fff0))
        );
        assert_eq!(
            binary(BinOp::Div, int(1), int(0), Scalar::I32, s),
            Err(ConstError::DivByZero(s))
        );
        assert_eq!(
            binary(BinOp::Div, int(-7), int(2), Scalar::I32, s),
            Ok(int(-3))
        );
    }
}
