//! GGUF metadata values.

use std::fmt;

/// The type tag of a metadata value, with GGUF's ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum ValueType {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
}

impl ValueType {
    const ALL: [ValueType; 13] = [
        Self::U8,
        Self::I8,
        Self::U16,
        Self::I16,
        Self::U32,
        Self::I32,
        Self::F32,
        Self::Bool,
        Self::String,
        Self::Array,
        Self::U64,
        Self::I64,
        Self::F64,
    ];

    pub fn from_id(id: u32) -> Option<Self> {
        Self::ALL.get(usize::try_from(id).ok()?).copied()
    }

    pub fn id(self) -> u32 {
        self as u32
    }

    /// The fewest bytes one value of this type takes in a file: its size for fixed-size types,
    /// the length prefix for strings, the type tag and count for arrays. Bounds element counts
    /// before anything is allocated.
    pub(crate) fn min_size(self) -> usize {
        match self {
            Self::U8 | Self::I8 | Self::Bool => 1,
            Self::U16 | Self::I16 => 2,
            Self::U32 | Self::I32 | Self::F32 => 4,
            Self::U64 | Self::I64 | Self::F64 | Self::String => 8,
            Self::Array => 12,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::U8 => "u8",
            Self::I8 => "i8",
            Self::U16 => "u16",
            Self::I16 => "i16",
            Self::U32 => "u32",
            Self::I32 => "i32",
            Self::F32 => "f32",
            Self::Bool => "bool",
            Self::String => "string",
            Self::Array => "array",
            Self::U64 => "u64",
            Self::I64 => "i64",
            Self::F64 => "f64",
        }
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    Array(Array),
    U64(u64),
    I64(i64),
    F64(f64),
}

/// A metadata array. Arrays are homogeneous, so each element type gets a typed vector (a
/// 262k-token vocabulary is one `Vec<String>`, not 262k tagged values). Arrays of arrays may mix
/// element types between their members.
#[derive(Debug, Clone, PartialEq)]
pub enum Array {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    F32(Vec<f32>),
    Bool(Vec<bool>),
    String(Vec<String>),
    Array(Vec<Array>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F64(Vec<f64>),
}

impl Value {
    pub fn value_type(&self) -> ValueType {
        match self {
            Self::U8(_) => ValueType::U8,
            Self::I8(_) => ValueType::I8,
            Self::U16(_) => ValueType::U16,
            Self::I16(_) => ValueType::I16,
            Self::U32(_) => ValueType::U32,
            Self::I32(_) => ValueType::I32,
            Self::F32(_) => ValueType::F32,
            Self::Bool(_) => ValueType::Bool,
            Self::String(_) => ValueType::String,
            Self::Array(_) => ValueType::Array,
            Self::U64(_) => ValueType::U64,
            Self::I64(_) => ValueType::I64,
            Self::F64(_) => ValueType::F64,
        }
    }

    /// The value as an integer, if it is one of the integer types.
    pub fn as_i128(&self) -> Option<i128> {
        Some(match *self {
            Self::U8(v) => v.into(),
            Self::I8(v) => v.into(),
            Self::U16(v) => v.into(),
            Self::I16(v) => v.into(),
            Self::U32(v) => v.into(),
            Self::I32(v) => v.into(),
            Self::U64(v) => v.into(),
            Self::I64(v) => v.into(),
            _ => return None,
        })
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Self::Array(a) => Some(a),
            _ => None,
        }
    }

    /// A short description of the type for error messages, e.g. `"array of string"`.
    pub fn type_description(&self) -> String {
        match self {
            Self::Array(a) => format!("array of {}", a.element_type()),
            v => v.value_type().name().to_string(),
        }
    }
}

impl Array {
    pub fn element_type(&self) -> ValueType {
        match self {
            Self::U8(_) => ValueType::U8,
            Self::I8(_) => ValueType::I8,
            Self::U16(_) => ValueType::U16,
            Self::I16(_) => ValueType::I16,
            Self::U32(_) => ValueType::U32,
            Self::I32(_) => ValueType::I32,
            Self::F32(_) => ValueType::F32,
            Self::Bool(_) => ValueType::Bool,
            Self::String(_) => ValueType::String,
            Self::Array(_) => ValueType::Array,
            Self::U64(_) => ValueType::U64,
            Self::I64(_) => ValueType::I64,
            Self::F64(_) => ValueType::F64,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Self::U8(v) => v.len(),
            Self::I8(v) => v.len(),
            Self::U16(v) => v.len(),
            Self::I16(v) => v.len(),
            Self::U32(v) => v.len(),
            Self::I32(v) => v.len(),
            Self::F32(v) => v.len(),
            Self::Bool(v) => v.len(),
            Self::String(v) => v.len(),
            Self::Array(v) => v.len(),
            Self::U64(v) => v.len(),
            Self::I64(v) => v.len(),
            Self::F64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements as integers, if the array holds an integer type.
    pub fn to_i128s(&self) -> Option<Vec<i128>> {
        fn widen<T: Copy + Into<i128>>(v: &[T]) -> Vec<i128> {
            v.iter().map(|&x| x.into()).collect()
        }
        Some(match self {
            Self::U8(v) => widen(v),
            Self::I8(v) => widen(v),
            Self::U16(v) => widen(v),
            Self::I16(v) => widen(v),
            Self::U32(v) => widen(v),
            Self::I32(v) => widen(v),
            Self::U64(v) => widen(v),
            Self::I64(v) => widen(v),
            _ => return None,
        })
    }
}

/// Types that a metadata value converts to, for [`super::Gguf::get_as`].
///
/// Integers convert from any integer type whose value fits, because writers disagree on widths
/// (some store `context_length` as u64 or i32); floats convert from f32 or f64. Everything else
/// must match exactly.
pub trait FromValue<'a>: Sized {
    /// What the conversion expects, for error messages.
    const EXPECTED: &'static str;
    fn from_value(value: &'a Value) -> Option<Self>;
}

macro_rules! from_integer_value {
    ($($t:ty),*) => {$(
        impl FromValue<'_> for $t {
            const EXPECTED: &'static str = stringify!($t);
            fn from_value(value: &Value) -> Option<Self> {
                value.as_i128()?.try_into().ok()
            }
        }
    )*};
}
from_integer_value!(u32, u64, i32, i64);

impl FromValue<'_> for f32 {
    const EXPECTED: &'static str = "f32";
    fn from_value(value: &Value) -> Option<Self> {
        match *value {
            Value::F32(v) => Some(v),
            Value::F64(v) => Some(v as f32),
            _ => None,
        }
    }
}

impl FromValue<'_> for bool {
    const EXPECTED: &'static str = "bool";
    fn from_value(value: &Value) -> Option<Self> {
        match *value {
            Value::Bool(v) => Some(v),
            _ => None,
        }
    }
}

impl<'a> FromValue<'a> for &'a str {
    const EXPECTED: &'static str = "string";
    fn from_value(value: &'a Value) -> Option<Self> {
        value.as_str()
    }
}

impl<'a> FromValue<'a> for &'a Array {
    const EXPECTED: &'static str = "array";
    fn from_value(value: &'a Value) -> Option<Self> {
        value.as_array()
    }
}

macro_rules! from_array_value {
    ($($variant:ident: $t:ty),*) => {$(
        impl<'a> FromValue<'a> for &'a [$t] {
            const EXPECTED: &'static str = concat!("array of ", stringify!($variant));
            fn from_value(value: &'a Value) -> Option<Self> {
                match value.as_array()? {
                    Array::$variant(v) => Some(v),
                    _ => None,
                }
            }
        }
    )*};
}
from_array_value!(String: String, F32: f32, I32: i32, U32: u32);
