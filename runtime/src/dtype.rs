//! Element and scalar types shared by signatures, buffers and launch arguments.

use std::fmt;

use cudarc::driver::DeviceRepr;
use half::{bf16, f16};

/// A scalar type of the tile language, spelled as in its sources (`u32`, `f16`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    Bool,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F16,
    Bf16,
    F32,
    F64,
}

impl DType {
    const ALL: [DType; 13] = [
        DType::Bool,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::F16,
        DType::Bf16,
        DType::F32,
        DType::F64,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
            DType::F16 => "f16",
            DType::Bf16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
        }
    }

    pub fn parse(name: &str) -> Option<DType> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    pub fn size_bytes(self) -> usize {
        match self {
            DType::Bool | DType::I8 | DType::U8 => 1,
            DType::I16 | DType::U16 | DType::F16 | DType::Bf16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 | DType::U64 | DType::F64 => 8,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The element type of a view parameter: a scalar or a short vector of `lanes` scalars
/// (spelled `f16x2`). A vector view takes a buffer of its scalar type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ElemType {
    pub scalar: DType,
    pub lanes: u8,
}

impl ElemType {
    pub fn scalar(scalar: DType) -> Self {
        ElemType { scalar, lanes: 1 }
    }

    pub fn parse(name: &str) -> Option<ElemType> {
        if let Some(scalar) = DType::parse(name) {
            return Some(ElemType::scalar(scalar));
        }
        let (scalar, lanes) = name.rsplit_once('x')?;
        let lanes: u8 = lanes.parse().ok()?;
        matches!(lanes, 2..=4).then_some(ElemType {
            scalar: DType::parse(scalar)?,
            lanes,
        })
    }
}

impl fmt::Display for ElemType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.lanes {
            1 => write!(f, "{}", self.scalar),
            n => write!(f, "{}x{n}", self.scalar),
        }
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A type that device buffers can hold.
pub trait DeviceElem: DeviceRepr + Copy + Default + Send + Sync + 'static + sealed::Sealed {
    const DTYPE: DType;
}

macro_rules! device_elem {
    ($($t:ty => $d:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl DeviceElem for $t {
            const DTYPE: DType = DType::$d;
        }
    )*};
}

device_elem!(
    u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32,
    u64 => U64, i64 => I64, f16 => F16, bf16 => Bf16, f32 => F32, f64 => F64,
);

/// A scalar kernel argument with its type.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ScalarValue {
    I32(i32),
    I64(i64),
    U32(u32),
    U64(u64),
    F16(f16),
    Bf16(bf16),
    F32(f32),
    F64(f64),
}

impl ScalarValue {
    pub fn dtype(self) -> DType {
        match self {
            ScalarValue::I32(_) => DType::I32,
            ScalarValue::I64(_) => DType::I64,
            ScalarValue::U32(_) => DType::U32,
            ScalarValue::U64(_) => DType::U64,
            ScalarValue::F16(_) => DType::F16,
            ScalarValue::Bf16(_) => DType::Bf16,
            ScalarValue::F32(_) => DType::F32,
            ScalarValue::F64(_) => DType::F64,
        }
    }

    /// The value of an integer scalar, for binding grid-expression names.
    pub fn as_integer(self) -> Option<i128> {
        match self {
            ScalarValue::I32(v) => Some(v.into()),
            ScalarValue::I64(v) => Some(v.into()),
            ScalarValue::U32(v) => Some(v.into()),
            ScalarValue::U64(v) => Some(v.into()),
            _ => None,
        }
    }
}

macro_rules! scalar_from {
    ($($t:ty => $v:ident),* $(,)?) => {$(
        impl From<$t> for ScalarValue {
            fn from(v: $t) -> Self {
                ScalarValue::$v(v)
            }
        }
    )*};
}

scalar_from!(i32 => I32, i64 => I64, u32 => U32, u64 => U64, f16 => F16, bf16 => Bf16, f32 => F32, f64 => F64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dtype_names_round_trip() {
        for t in DType::ALL {
            assert_eq!(DType::parse(t.name()), Some(t));
        }
        assert_eq!(DType::parse("float"), None);
    }

    #[test]
    fn elem_types_parse_scalars_and_vectors() {
        assert_eq!(ElemType::parse("f32"), Some(ElemType::scalar(DType::F32)));
        let v = ElemType::parse("f16x2").unwrap();
        assert_eq!((v.scalar, v.lanes), (DType::F16, 2));
        assert_eq!(v.to_string(), "f16x2");
        assert_eq!(ElemType::parse("f16x8"), None);
        assert_eq!(ElemType::parse("block_q4k"), None);
    }

    #[test]
    fn integer_scalars_bind_grid_names() {
        assert_eq!(ScalarValue::from(7u32).as_integer(), Some(7));
        assert_eq!(ScalarValue::from(-3i64).as_integer(), Some(-3));
        assert_eq!(ScalarValue::from(1.0f32).as_integer(), None);
    }
}
