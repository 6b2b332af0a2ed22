//! Values of one thread and the arithmetic on them, with the semantics of the GPU: integers wrap
//! at their width, f16/bf16/f32 results are rounded to their type after every operation, and
//! float-to-int casts saturate like PTX `cvt.rzi`.

use half::{bf16, f16};
use zinc_dsl::ir::{BinOp, ConstValue, Frag, Scalar, Space, Type, UnOp};

/// One thread's value of an expression.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Value {
    Bool(bool),
    I8(i8),
    I16(i16),
    I32(i32),
    I64(i64),
    U8(u8),
    U16(u16),
    U32(u32),
    U64(u64),
    F16(f16),
    Bf16(bf16),
    F32(f32),
    F64(f64),
    Vector(Vector),
    /// A view into global or shared memory; only the interpreter creates these.
    Ptr(Pointer),
    /// One lane's registers of a tensor-core fragment.
    Frag(FragValue),
    /// The running kernel's tensor map with this index (in its launch's `tensor_maps`); only
    /// the interpreter creates these.
    TensorMap(u32),
}

/// One lane's part of a fragment: up to four 32-bit registers, as raw bits.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct FragValue {
    pub frag: Frag,
    pub regs: [u32; 4],
}

impl FragValue {
    /// Register `i` as a value of the fragment's register type (`f16x2`, `f32`, ...).
    pub fn reg(&self, i: usize) -> Value {
        Value::from_reg(&self.frag.reg_type(), self.regs[i])
    }

    /// Element `j` of register `i` (an accumulator register is one element), exactly.
    pub(crate) fn element(&self, i: usize, j: usize) -> f64 {
        let size = self.frag.elem.size() as usize;
        let bits = u64::from(self.regs[i] >> (8 * size * j));
        let v = Value::from_bits(self.frag.elem, bits);
        v.as_f64()
            .or_else(|| v.as_int().map(|x| x as f64))
            .unwrap_or(0.0)
    }
}

/// A short vector (2 to 4 lanes); lanes are kept as raw bits so that the value stays `Copy`.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Vector {
    elem: Scalar,
    len: u8,
    bits: [u64; 4],
}

/// Where a view points: a memory region and a byte offset into it (negative while an offset
/// computation is in progress; checked on access).
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Pointer {
    pub(crate) region: Region,
    pub(crate) offset: i64,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Region {
    /// The buffer passed as the kernel parameter with this index.
    Global(usize),
    /// A shared array of the running kernel, by index in `Function::shared`.
    Shared(usize),
}

impl Region {
    pub(crate) fn space(self) -> Space {
        match self {
            Region::Global(_) => Space::Global,
            Region::Shared(_) => Space::Shared,
        }
    }
}

/// Why an operation has no result.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum ArithError {
    DivByZero,
    /// A shift by at least the operand's bit width (or a negative amount): undefined on the GPU.
    ShiftOutOfRange {
        amount: i128,
        bits: u32,
    },
    /// Operand types the front end should never have let through.
    Mismatch,
}

impl Vector {
    /// A vector of 2 to 4 scalars of one type.
    pub fn new(lanes: &[Value]) -> Option<Vector> {
        let elem = lanes.first()?.scalar()?;
        if !(2..=4).contains(&lanes.len()) || lanes.iter().any(|v| v.scalar() != Some(elem)) {
            return None;
        }
        let mut bits = [0; 4];
        for (b, v) in bits.iter_mut().zip(lanes) {
            *b = v.to_bits();
        }
        Some(Vector {
            elem,
            len: lanes.len() as u8,
            bits,
        })
    }

    pub fn elem(&self) -> Scalar {
        self.elem
    }

    pub fn len(&self) -> usize {
        self.len as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn get(&self, lane: usize) -> Value {
        Value::from_bits(self.elem, self.bits[lane])
    }

    pub fn lanes(&self) -> impl Iterator<Item = Value> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    fn map(
        &self,
        elem: Scalar,
        mut f: impl FnMut(Value) -> Result<Value, ArithError>,
    ) -> Result<Vector, ArithError> {
        let mut bits = [0; 4];
        for (i, b) in bits.iter_mut().enumerate().take(self.len()) {
            *b = f(self.get(i))?.to_bits();
        }
        Ok(Vector {
            elem,
            len: self.len,
            bits,
        })
    }
}

impl Value {
    /// The scalar type of a scalar value.
    pub fn scalar(&self) -> Option<Scalar> {
        Some(match self {
            Value::Bool(_) => Scalar::Bool,
            Value::I8(_) => Scalar::I8,
            Value::I16(_) => Scalar::I16,
            Value::I32(_) => Scalar::I32,
            Value::I64(_) => Scalar::I64,
            Value::U8(_) => Scalar::U8,
            Value::U16(_) => Scalar::U16,
            Value::U32(_) => Scalar::U32,
            Value::U64(_) => Scalar::U64,
            Value::F16(_) => Scalar::F16,
            Value::Bf16(_) => Scalar::Bf16,
            Value::F32(_) => Scalar::F32,
            Value::F64(_) => Scalar::F64,
            Value::Vector(_) | Value::Ptr(_) | Value::Frag(_) | Value::TensorMap(_) => return None,
        })
    }

    /// A 32-bit register of type `ty` (a 4-byte scalar or vector) from its bits.
    pub(crate) fn from_reg(ty: &Type, bits: u32) -> Value {
        crate::memory::decode(ty, &bits.to_le_bytes())
    }

    /// The bits of a 4-byte scalar or vector (a fragment register).
    pub(crate) fn reg_bits(self) -> u32 {
        let mut bytes = [0u8; 4];
        crate::memory::encode(self, &mut bytes);
        u32::from_le_bytes(bytes)
    }

    /// Whether this value can be a value of `ty` (views only by kind: their element type is not
    /// carried at run time).
    pub fn has_type(&self, ty: &Type) -> bool {
        match (self, ty) {
            (Value::Frag(f), Type::Frag(t)) => f.frag == *t,
            (Value::Vector(v), Type::Vector(s, n)) => v.elem == *s && v.len == *n,
            (Value::Ptr(_), Type::View { .. }) => true,
            (Value::TensorMap(_), Type::TensorMap(_)) => true,
            (v, Type::Scalar(s)) => v.scalar() == Some(*s),
            _ => false,
        }
    }

    /// A short name of the value's type, for messages.
    pub fn type_name(&self) -> String {
        match self {
            Value::Vector(v) => format!("{}x{}", v.elem.name(), v.len),
            Value::Ptr(_) => "view".to_string(),
            Value::TensorMap(_) => "tensor map".to_string(),
            Value::Frag(f) => Type::Frag(f.frag).to_string(),
            v => v.scalar().map_or("?", Scalar::name).to_string(),
        }
    }

    /// The raw bits of a scalar, zero-extended (bool: 0 or 1).
    pub fn to_bits(&self) -> u64 {
        match *self {
            Value::Bool(b) => b as u64,
            Value::I8(x) => x as u8 as u64,
            Value::I16(x) => x as u16 as u64,
            Value::I32(x) => x as u32 as u64,
            Value::I64(x) => x as u64,
            Value::U8(x) => x as u64,
            Value::U16(x) => x as u64,
            Value::U32(x) => x as u64,
            Value::U64(x) => x,
            Value::F16(x) => x.to_bits() as u64,
            Value::Bf16(x) => x.to_bits() as u64,
            Value::F32(x) => x.to_bits() as u64,
            Value::F64(x) => x.to_bits(),
            Value::Vector(_) | Value::Ptr(_) | Value::Frag(_) | Value::TensorMap(_) => 0,
        }
    }

    /// A scalar from its raw bits (the low `size` bytes are used).
    pub fn from_bits(s: Scalar, bits: u64) -> Value {
        match s {
            Scalar::Bool => Value::Bool(bits & 0xff != 0),
            Scalar::I8 => Value::I8(bits as i8),
            Scalar::I16 => Value::I16(bits as i16),
            Scalar::I32 => Value::I32(bits as i32),
            Scalar::I64 => Value::I64(bits as i64),
            Scalar::U8 => Value::U8(bits as u8),
            Scalar::U16 => Value::U16(bits as u16),
            Scalar::U32 => Value::U32(bits as u32),
            Scalar::U64 => Value::U64(bits),
            Scalar::F16 => Value::F16(f16::from_bits(bits as u16)),
            Scalar::Bf16 => Value::Bf16(bf16::from_bits(bits as u16)),
            Scalar::F32 => Value::F32(f32::from_bits(bits as u32)),
            Scalar::F64 => Value::F64(f64::from_bits(bits)),
        }
    }

    /// The integer value of an integer or bool, sign- or zero-extended per its type.
    pub fn as_int(&self) -> Option<i128> {
        Some(match *self {
            Value::Bool(b) => b as i128,
            Value::I8(x) => x as i128,
            Value::I16(x) => x as i128,
            Value::I32(x) => x as i128,
            Value::I64(x) => x as i128,
            Value::U8(x) => x as i128,
            Value::U16(x) => x as i128,
            Value::U32(x) => x as i128,
            Value::U64(x) => x as i128,
            _ => return None,
        })
    }

    /// The value of a float, exactly (every narrower float is exact in f64).
    pub fn as_f64(&self) -> Option<f64> {
        Some(match *self {
            Value::F16(x) => x.to_f64(),
            Value::Bf16(x) => x.to_f64(),
            Value::F32(x) => x as f64,
            Value::F64(x) => x,
            _ => return None,
        })
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// An integer (or bool) of type `s` from `x`, wrapped to the width of `s`.
    pub fn from_int(s: Scalar, x: i128) -> Value {
        match s {
            Scalar::Bool => Value::Bool(x != 0),
            s if s.is_float() => int_to_float(s, x),
            s => Value::from_bits(s, x as u64),
        }
    }

    /// A float of type `s` from `x`, rounded to nearest even once.
    pub fn from_f64(s: Scalar, x: f64) -> Value {
        match s {
            Scalar::F16 => Value::F16(f16::from_f64(x)),
            Scalar::Bf16 => Value::Bf16(bf16::from_f64(x)),
            Scalar::F32 => Value::F32(x as f32),
            Scalar::F64 => Value::F64(x),
            Scalar::Bool => Value::Bool(x != 0.0),
            _ => float_to_int(s, x),
        }
    }

    /// A constant of a scalar type, or a vector or fragment with every element `c`.
    pub(crate) fn from_const_typed(ty: &Type, c: &ConstValue) -> Option<Value> {
        match ty {
            Type::Scalar(s) => Some(Value::from_const(*s, c)),
            Type::Vector(s, n) => {
                let lanes = vec![Value::from_const(*s, c); usize::from(*n)];
                Some(Value::Vector(Vector::new(&lanes)?))
            }
            Type::Frag(frag) => {
                let elem = Value::from_const(frag.elem, c);
                let lanes = vec![elem; 4 / frag.elem.size() as usize];
                let reg = match lanes.len() {
                    1 => elem,
                    _ => Value::Vector(Vector::new(&lanes)?),
                };
                Some(Value::Frag(FragValue {
                    frag: *frag,
                    regs: [reg.reg_bits(); 4],
                }))
            }
            _ => None,
        }
    }

    /// A constant of scalar type `s`.
    pub fn from_const(s: Scalar, c: &ConstValue) -> Value {
        match *c {
            ConstValue::Bool(b) => Value::from_int(s, b as i128),
            ConstValue::Int(x) => Value::from_int(s, x),
            ConstValue::Float(x) => Value::from_f64(s, x),
        }
    }

    /// Convert to `to` (a scalar type, or a vector type of the same length for vectors).
    pub(crate) fn cast(self, to: &Type) -> Result<Value, ArithError> {
        match (self, to) {
            (Value::Vector(v), Type::Vector(s, n)) if v.len == *n => {
                Ok(Value::Vector(v.map(*s, |x| x.cast(&Type::Scalar(*s)))?))
            }
            (v, Type::Scalar(s)) => v.cast_scalar(*s).ok_or(ArithError::Mismatch),
            _ => Err(ArithError::Mismatch),
        }
    }

    fn cast_scalar(self, to: Scalar) -> Option<Value> {
        if to == Scalar::Bool {
            return Some(Value::Bool(match self.as_f64() {
                Some(x) => x != 0.0,
                None => self.as_int()? != 0,
            }));
        }
        Some(match (self.as_f64(), self.as_int()) {
            (Some(x), _) => Value::from_f64(to, x),
            (None, Some(i)) => Value::from_int(to, i),
            (None, None) => return None,
        })
    }

    pub(crate) fn unary(op: UnOp, a: Value) -> Result<Value, ArithError> {
        if let Value::Vector(v) = a {
            return Ok(Value::Vector(v.map(v.elem, |x| Value::unary(op, x))?));
        }
        let s = a.scalar().ok_or(ArithError::Mismatch)?;
        match (op, a) {
            (UnOp::Not, Value::Bool(b)) => Ok(Value::Bool(!b)),
            (UnOp::Not, _) if s.is_int() => Ok(Value::from_int(s, !a.as_int().unwrap_or(0))),
            (UnOp::Neg, _) if s.is_float() => Ok(Value::from_f64(s, -a.as_f64().unwrap_or(0.0))),
            (UnOp::Neg, _) if s.is_int() => {
                Ok(Value::from_int(s, a.as_int().unwrap_or(0).wrapping_neg()))
            }
            _ => Err(ArithError::Mismatch),
        }
    }

    /// `a op b` with both operands of one type (vectors lane-wise).
    pub(crate) fn binary(op: BinOp, a: Value, b: Value) -> Result<Value, ArithError> {
        if let (Value::Vector(x), Value::Vector(y)) = (a, b) {
            if x.elem != y.elem || x.len != y.len {
                return Err(ArithError::Mismatch);
            }
            let elem = if is_comparison(op) {
                Scalar::Bool
            } else {
                x.elem
            };
            let mut lane = 0;
            return Ok(Value::Vector(x.map(elem, |xi| {
                let r = Value::binary(op, xi, y.get(lane));
                lane += 1;
                r
            })?));
        }
        let s = a.scalar().ok_or(ArithError::Mismatch)?;
        if b.scalar() != Some(s) {
            return Err(ArithError::Mismatch);
        }
        if s == Scalar::Bool {
            return bool_binary(
                op,
                a.as_bool().unwrap_or(false),
                b.as_bool().unwrap_or(false),
            );
        }
        match (a.as_f64(), b.as_f64()) {
            (Some(x), Some(y)) => float_binary(op, s, x, y),
            _ => int_binary(op, s, a.as_int().unwrap_or(0), b.as_int().unwrap_or(0)),
        }
    }
}

fn is_comparison(op: BinOp) -> bool {
    matches!(
        op,
        BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge
    )
}

fn compare<T: PartialOrd>(op: BinOp, a: T, b: T) -> bool {
    match op {
        BinOp::Eq => a == b,
        BinOp::Ne => a != b,
        BinOp::Lt => a < b,
        BinOp::Le => a <= b,
        BinOp::Gt => a > b,
        _ => a >= b,
    }
}

fn bool_binary(op: BinOp, a: bool, b: bool) -> Result<Value, ArithError> {
    Ok(Value::Bool(match op {
        BinOp::And => a & b,
        BinOp::Or => a | b,
        BinOp::Xor => a ^ b,
        _ if is_comparison(op) => compare(op, a, b),
        _ => return Err(ArithError::Mismatch),
    }))
}

/// Float arithmetic in f64, then one rounding to the operand type. For + - * / (and fmod, which
/// is exact) f64 has more than twice the precision of f32/f16/bf16, so this equals the correctly
/// rounded operation in the narrow type, as `add.rn.f32` etc. compute it.
fn float_binary(op: BinOp, s: Scalar, a: f64, b: f64) -> Result<Value, ArithError> {
    let r = match op {
        BinOp::Add => a + b,
        BinOp::Sub => a - b,
        BinOp::Mul => a * b,
        BinOp::Div => a / b,
        BinOp::Rem => a % b,
        // `!=` is unordered (true when either side is NaN), the others ordered.
        _ if is_comparison(op) => return Ok(Value::Bool(compare(op, a, b))),
        _ => return Err(ArithError::Mismatch),
    };
    Ok(Value::from_f64(s, r))
}

/// Integer arithmetic on the exact (sign- or zero-extended) values, wrapped to the type's width.
fn int_binary(op: BinOp, s: Scalar, a: i128, b: i128) -> Result<Value, ArithError> {
    let bits = s.size() * 8;
    let r = match op {
        BinOp::Add => a.wrapping_add(b),
        BinOp::Sub => a.wrapping_sub(b),
        BinOp::Mul => a.wrapping_mul(b),
        // Truncating division; the remainder takes the dividend's sign. MIN / -1 wraps to MIN.
        BinOp::Div | BinOp::Rem if b == 0 => return Err(ArithError::DivByZero),
        BinOp::Div => a / b,
        BinOp::Rem => a % b,
        BinOp::And => a & b,
        BinOp::Or => a | b,
        BinOp::Xor => a ^ b,
        // The generated code shifts with LLVM's shl/lshr/ashr, which give poison for amounts of
        // at least the width, so such a shift is reported rather than given a value.
        BinOp::Shl | BinOp::Shr if !(0..bits as i128).contains(&b) => {
            return Err(ArithError::ShiftOutOfRange { amount: b, bits })
        }
        BinOp::Shl => a << b,
        BinOp::Shr => a >> b,
        _ => return Ok(Value::Bool(compare(op, a, b))),
    };
    Ok(Value::from_int(s, r))
}

/// Round to nearest even; f32 directly from the integer, the others through f64 (exact for every
/// integer up to 2^53; beyond that f16 is infinite anyway).
fn int_to_float(s: Scalar, x: i128) -> Value {
    match s {
        Scalar::F32 => Value::F32(x as f32),
        _ => Value::from_f64(s, x as f64),
    }
}

/// Truncate toward zero and saturate to the target range; NaN gives 0 (PTX `cvt.rzi.sat`).
fn float_to_int(s: Scalar, x: f64) -> Value {
    let bits = s.size() * 8;
    let (min, max) = if s.is_signed() {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    };
    // Rust's float-to-int `as` already truncates, saturates and maps NaN to 0.
    Value::from_int(s, (x as i128).clamp(min, max))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bin(op: BinOp, a: Value, b: Value) -> Value {
        Value::binary(op, a, b).unwrap()
    }

    #[test]
    fn integers_wrap_at_their_width() {
        assert_eq!(bin(BinOp::Add, Value::U8(250), Value::U8(10)), Value::U8(4));
        assert_eq!(
            bin(BinOp::Mul, Value::I32(i32::MAX), Value::I32(2)),
            Value::I32(-2)
        );
        assert_eq!(
            bin(BinOp::Div, Value::I32(i32::MIN), Value::I32(-1)),
            Value::I32(i32::MIN)
        );
        assert_eq!(
            bin(BinOp::Rem, Value::I32(-7), Value::I32(2)),
            Value::I32(-1)
        );
        assert_eq!(
            bin(BinOp::Div, Value::U32(u32::MAX), Value::U32(2)),
            Value::U32(u32::MAX / 2)
        );
        assert_eq!(
            Value::binary(BinOp::Div, Value::U32(1), Value::U32(0)),
            Err(ArithError::DivByZero)
        );
    }

    #[test]
    fn shifts_within_the_width_and_errors_beyond() {
        assert_eq!(
            bin(BinOp::Shl, Value::U32(1), Value::U32(31)),
            Value::U32(1 << 31)
        );
        assert_eq!(
            bin(BinOp::Shr, Value::I32(-8), Value::I32(1)),
            Value::I32(-4)
        );
        assert_eq!(
            bin(BinOp::Shr, Value::U32(u32::MAX), Value::U32(31)),
            Value::U32(1)
        );
        assert_eq!(
            bin(BinOp::Shl, Value::U64(3), Value::U64(63)),
            Value::U64(1 << 63)
        );
        for (op, a, b, amount, bits) in [
            (BinOp::Shl, Value::U32(1), Value::U32(32), 32, 32),
            (BinOp::Shr, Value::I32(-8), Value::I32(99), 99, 32),
            (BinOp::Shr, Value::I32(8), Value::I32(-1), -1, 32),
            (BinOp::Shl, Value::U8(1), Value::U8(8), 8, 8),
        ] {
            assert_eq!(
                Value::binary(op, a, b),
                Err(ArithError::ShiftOutOfRange { amount, bits })
            );
        }
    }

    #[test]
    fn half_precision_rounds_every_operation() {
        let a = Value::F16(f16::from_f32(2048.0));
        let one = Value::F16(f16::ONE);
        // 2049 is not representable in f16: ties to even gives 2048.
        assert_eq!(bin(BinOp::Add, a, one), a);
        let b = Value::Bf16(bf16::from_f32(1.0));
        let tiny = Value::Bf16(bf16::from_f32(1.0 / 512.0));
        assert_eq!(bin(BinOp::Add, b, tiny), b);
    }

    #[test]
    fn float_to_int_saturates() {
        let to = |v: f32, s: Scalar| Value::F32(v).cast(&Type::Scalar(s)).unwrap();
        assert_eq!(to(f32::NAN, Scalar::I32), Value::I32(0));
        assert_eq!(to(1e20, Scalar::I32), Value::I32(i32::MAX));
        assert_eq!(to(-1e20, Scalar::I32), Value::I32(i32::MIN));
        assert_eq!(to(-3.7, Scalar::I32), Value::I32(-3));
        assert_eq!(to(-3.7, Scalar::U32), Value::U32(0));
        assert_eq!(to(300.5, Scalar::U8), Value::U8(255));
        assert_eq!(to(0.5, Scalar::Bool), Value::Bool(true));
    }

    #[test]
    fn int_casts_extend_per_source_sign() {
        let c = |v: Value, s: Scalar| v.cast(&Type::Scalar(s)).unwrap();
        assert_eq!(c(Value::I8(-1), Scalar::U32), Value::U32(u32::MAX));
        assert_eq!(c(Value::U8(255), Scalar::I32), Value::I32(255));
        assert_eq!(
            c(Value::I32(-1), Scalar::F16),
            Value::F16(f16::from_f32(-1.0))
        );
        assert_eq!(c(Value::U32(70000), Scalar::F16), Value::F16(f16::INFINITY));
    }

    #[test]
    fn vectors_work_lane_wise() {
        let v =
            |a: f32, b: f32| Value::Vector(Vector::new(&[Value::F32(a), Value::F32(b)]).unwrap());
        assert_eq!(bin(BinOp::Mul, v(1.5, 2.0), v(2.0, -1.0)), v(3.0, -2.0));
        let Value::Vector(cmp) = bin(BinOp::Lt, v(1.0, 3.0), v(2.0, 2.0)) else {
            panic!("comparison of vectors gives a vector");
        };
        assert_eq!(
            cmp.lanes().collect::<Vec<_>>(),
            [Value::Bool(true), Value::Bool(false)]
        );
    }
}
