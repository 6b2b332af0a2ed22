//! Parsing of the GGUF header: metadata and tensor infos. Every read is bounds-checked and every
//! count is checked against the bytes left in the file before anything is allocated for it.

use std::collections::HashMap;

use super::error::MAX_ARRAY_DEPTH;
use super::value::{Array, FromValue, Value, ValueType};
use super::{data_range, GgufError, TensorInfo, ALIGNMENT_KEY, DEFAULT_ALIGNMENT, MAGIC};
use crate::quant::GgmlType;

type Result<T> = std::result::Result<T, GgufError>;

/// The smallest possible tensor info: empty name (8), n_dims (4), no dims, type (4), offset (8).
const MIN_TENSOR_INFO_SIZE: usize = 24;
/// The smallest possible key-value pair: empty key (8), type (4), a one-byte value.
const MIN_KV_SIZE: usize = 13;
/// ggml tensors have at most this many dimensions.
const MAX_DIMS: u32 = 4;

/// Everything in a GGUF file but the tensor data.
pub(super) struct Header {
    pub version: u32,
    pub metadata: Vec<(String, Value)>,
    pub keys: HashMap<String, usize>,
    pub tensors: Vec<TensorInfo>,
    pub names: HashMap<String, usize>,
    pub alignment: u64,
    pub data_offset: u64,
}

pub(super) fn parse(buf: &[u8]) -> Result<Header> {
    let mut c = Cursor { buf, pos: 0 };
    let magic = c.take(4, "magic")?;
    if magic != MAGIC {
        return Err(GgufError::BadMagic {
            found: magic.escape_ascii().to_string(),
        });
    }
    let version = c.u32("version")?;
    if !(2..=3).contains(&version) {
        return Err(GgufError::UnsupportedVersion { version });
    }
    let n_tensors = c.count("tensor count", MIN_TENSOR_INFO_SIZE)?;
    let n_kv = c.count("metadata count", MIN_KV_SIZE)?;

    let mut metadata = Vec::with_capacity(n_kv);
    let mut keys = HashMap::with_capacity(n_kv);
    for _ in 0..n_kv {
        let at = c.offset();
        let key = c.string("metadata key")?;
        if keys.contains_key(&key) {
            return Err(GgufError::DuplicateKey { key, offset: at });
        }
        let value = c.typed_value().map_err(|e| GgufError::InKey {
            key: key.clone(),
            error: Box::new(e),
        })?;
        keys.insert(key.clone(), metadata.len());
        metadata.push((key, value));
    }
    let alignment = match keys.get(ALIGNMENT_KEY) {
        None => DEFAULT_ALIGNMENT,
        Some(&i) => {
            let value = &metadata[i].1;
            let a = u32::from_value(value).ok_or_else(|| GgufError::WrongType {
                key: ALIGNMENT_KEY.into(),
                expected: "u32",
                found: value.type_description(),
            })?;
            if !a.is_power_of_two() {
                return Err(GgufError::BadAlignment { value: a.into() });
            }
            u64::from(a)
        }
    };

    let mut tensors = Vec::with_capacity(n_tensors);
    let mut names = HashMap::with_capacity(n_tensors);
    for index in 0..n_tensors {
        let at = c.offset();
        let info = c.tensor_info().map_err(|e| GgufError::InTensorInfo {
            index,
            error: Box::new(e),
        })?;
        if names.contains_key(&info.name) {
            return Err(GgufError::DuplicateTensor {
                name: info.name,
                offset: at,
            });
        }
        names.insert(info.name.clone(), tensors.len());
        tensors.push(info);
    }

    let data_offset = c.offset().next_multiple_of(alignment);
    let file_size = buf.len() as u64;
    for t in &tensors {
        if !t.offset.is_multiple_of(alignment) {
            return Err(GgufError::Misaligned {
                name: t.name.clone(),
                offset: t.offset,
                alignment,
            });
        }
        // A tensor of unknown type has unknown size; it is checked when used.
        if GgmlType::from_id(t.type_id).is_some() {
            data_range(t, data_offset, file_size)?;
        }
    }
    Ok(Header {
        version,
        metadata,
        keys,
        tensors,
        names,
        alignment,
        data_offset,
    })
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn offset(&self) -> u64 {
        self.pos as u64
    }

    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(GgufError::Truncated {
                what,
                offset: self.offset(),
                needed: n as u64,
                available: self.remaining() as u64,
            });
        }
        let bytes = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N]> {
        let bytes = self.take(N, what)?;
        Ok(std::array::from_fn(|i| bytes[i]))
    }

    fn u32(&mut self, what: &'static str) -> Result<u32> {
        self.array(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &'static str) -> Result<u64> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// Reads a u64 count of items that each take at least `min_size` bytes, rejecting counts that
    /// the rest of the file cannot hold.
    fn count(&mut self, what: &'static str, min_size: usize) -> Result<usize> {
        let offset = self.offset();
        let count = self.u64(what)?;
        let max = (self.remaining() / min_size) as u64;
        if count > max {
            return Err(GgufError::CountTooLarge {
                what,
                count,
                offset,
                available: self.remaining() as u64,
                max,
            });
        }
        Ok(count as usize)
    }

    fn string(&mut self, what: &'static str) -> Result<String> {
        let len = self.u64(what)?;
        let start = self.offset();
        let bytes = self.take(usize::try_from(len).unwrap_or(usize::MAX), what)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_owned()),
            Err(e) => Err(GgufError::BadUtf8 {
                offset: start + e.valid_up_to() as u64,
            }),
        }
    }

    fn bools(&mut self, n: usize, what: &'static str) -> Result<Vec<bool>> {
        let start = self.offset();
        self.take(n, what)?
            .iter()
            .enumerate()
            .map(|(i, &value)| match value {
                0 | 1 => Ok(value == 1),
                _ => Err(GgufError::BadBool {
                    value,
                    offset: start + i as u64,
                }),
            })
            .collect()
    }

    /// Reads `n` fixed-size little-endian values; `n` was bounded by [`Self::count`].
    fn fixed<T, const N: usize>(
        &mut self,
        n: usize,
        what: &'static str,
        decode: fn([u8; N]) -> T,
    ) -> Result<Vec<T>> {
        let bytes = self.take(n * N, what)?;
        Ok(bytes
            .chunks_exact(N)
            .map(|b| decode(std::array::from_fn(|i| b[i])))
            .collect())
    }

    fn value_type(&mut self, what: &'static str) -> Result<ValueType> {
        let offset = self.offset();
        let id = self.u32(what)?;
        ValueType::from_id(id).ok_or(GgufError::BadValueType { id, offset })
    }

    /// A type tag followed by a value of that type.
    fn typed_value(&mut self) -> Result<Value> {
        let ty = self.value_type("value type")?;
        self.value(ty)
    }

    fn value(&mut self, ty: ValueType) -> Result<Value> {
        Ok(match ty {
            ValueType::U8 => Value::U8(u8::from_le_bytes(self.array("u8 value")?)),
            ValueType::I8 => Value::I8(i8::from_le_bytes(self.array("i8 value")?)),
            ValueType::U16 => Value::U16(u16::from_le_bytes(self.array("u16 value")?)),
            ValueType::I16 => Value::I16(i16::from_le_bytes(self.array("i16 value")?)),
            ValueType::U32 => Value::U32(self.u32("u32 value")?),
            ValueType::I32 => Value::I32(i32::from_le_bytes(self.array("i32 value")?)),
            ValueType::F32 => Value::F32(f32::from_le_bytes(self.array("f32 value")?)),
            ValueType::Bool => Value::Bool(self.bools(1, "bool value")?[0]),
            ValueType::String => Value::String(self.string("string value")?),
            ValueType::Array => Value::Array(self.array_value(1)?),
            ValueType::U64 => Value::U64(self.u64("u64 value")?),
            ValueType::I64 => Value::I64(i64::from_le_bytes(self.array("i64 value")?)),
            ValueType::F64 => Value::F64(f64::from_le_bytes(self.array("f64 value")?)),
        })
    }

    /// An array at nesting level `depth` (1 for an array that is itself a metadata value).
    fn array_value(&mut self, depth: usize) -> Result<Array> {
        if depth > MAX_ARRAY_DEPTH {
            return Err(GgufError::NestingTooDeep {
                offset: self.offset(),
            });
        }
        let ty = self.value_type("array element type")?;
        let n = self.count("array length", ty.min_size())?;
        Ok(match ty {
            ValueType::U8 => Array::U8(self.fixed(n, "u8 array", u8::from_le_bytes)?),
            ValueType::I8 => Array::I8(self.fixed(n, "i8 array", i8::from_le_bytes)?),
            ValueType::U16 => Array::U16(self.fixed(n, "u16 array", u16::from_le_bytes)?),
            ValueType::I16 => Array::I16(self.fixed(n, "i16 array", i16::from_le_bytes)?),
            ValueType::U32 => Array::U32(self.fixed(n, "u32 array", u32::from_le_bytes)?),
            ValueType::I32 => Array::I32(self.fixed(n, "i32 array", i32::from_le_bytes)?),
            ValueType::F32 => Array::F32(self.fixed(n, "f32 array", f32::from_le_bytes)?),
            ValueType::Bool => Array::Bool(self.bools(n, "bool array")?),
            ValueType::String => Array::String(
                (0..n)
                    .map(|_| self.string("string array element"))
                    .collect::<Result<_>>()?,
            ),
            ValueType::Array => Array::Array(
                (0..n)
                    .map(|_| self.array_value(depth + 1))
                    .collect::<Result<_>>()?,
            ),
            ValueType::U64 => Array::U64(self.fixed(n, "u64 array", u64::from_le_bytes)?),
            ValueType::I64 => Array::I64(self.fixed(n, "i64 array", i64::from_le_bytes)?),
            ValueType::F64 => Array::F64(self.fixed(n, "f64 array", f64::from_le_bytes)?),
        })
    }

    fn tensor_info(&mut self) -> Result<TensorInfo> {
        let name = self.string("tensor name")?;
        let at = self.offset();
        let n_dims = self.u32("tensor dimension count")?;
        if n_dims > MAX_DIMS {
            return Err(GgufError::TooManyDims {
                name,
                n_dims,
                offset: at,
            });
        }
        let dims = self.fixed(n_dims as usize, "tensor dimensions", u64::from_le_bytes)?;
        let type_id = self.u32("tensor type")?;
        let offset = self.u64("tensor data offset")?;
        let n_elements = dims.iter().try_fold(1u64, |n, &d| n.checked_mul(d));
        let Some(n_elements) = n_elements else {
            return Err(GgufError::ShapeOverflow { name, dims });
        };
        Ok(TensorInfo {
            name,
            dims,
            type_id,
            offset,
            n_elements,
        })
    }
}
