//! Writing GGUF v3 files: the header is built in memory, tensor data is streamed after it.

use std::io::Write;

use thiserror::Error;

use super::value::{Array, Value};
use super::{ALIGNMENT_KEY, DEFAULT_ALIGNMENT, MAGIC};
use crate::quant::GgmlType;

const VERSION: u32 = 3;

/// What the writer is told about a tensor before its data.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorSpec {
    pub name: String,
    /// ggml order: `dims[0]` is the row length.
    pub dims: Vec<u64>,
    pub ty: GgmlType,
}

#[derive(Debug, Error)]
pub enum WriteError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("general.alignment must be a u32 power of two")]
    BadAlignment,
    #[error("tensor '{name}': {reason}")]
    BadTensor { name: String, reason: String },
    #[error("tensor '{name}' needs {expected} bytes of data, got {actual}")]
    DataSize {
        name: String,
        expected: u64,
        actual: u64,
    },
    #[error("data was written for {written} of {expected} tensors")]
    TensorCount { expected: usize, written: usize },
}

type Result<T> = std::result::Result<T, WriteError>;

/// Streams a GGUF file: [`GgufWriter::new`] writes the header, then each tensor's data is passed
/// to [`GgufWriter::write_tensor_data`] in the order of the specs, then [`GgufWriter::finish`].
pub struct GgufWriter<W: Write> {
    out: W,
    alignment: u64,
    /// Name and data size of each tensor, in order.
    sizes: Vec<(String, u64)>,
    written: usize,
}

impl<W: Write> GgufWriter<W> {
    pub fn new(mut out: W, metadata: &[(String, Value)], tensors: &[TensorSpec]) -> Result<Self> {
        let alignment = match metadata.iter().find(|(k, _)| k == ALIGNMENT_KEY) {
            None => DEFAULT_ALIGNMENT,
            Some((_, Value::U32(a))) if a.is_power_of_two() => u64::from(*a),
            Some(_) => return Err(WriteError::BadAlignment),
        };
        let sizes = tensors
            .iter()
            .map(|t| Ok((t.name.clone(), tensor_size(t)?)))
            .collect::<Result<Vec<_>>>()?;

        let mut h = Vec::new();
        h.extend_from_slice(MAGIC);
        h.extend_from_slice(&VERSION.to_le_bytes());
        h.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
        h.extend_from_slice(&(metadata.len() as u64).to_le_bytes());
        for (key, value) in metadata {
            put_str(&mut h, key);
            h.extend_from_slice(&value.value_type().id().to_le_bytes());
            put_value(&mut h, value);
        }
        let mut offset = 0u64;
        for (t, &(_, size)) in tensors.iter().zip(&sizes) {
            put_str(&mut h, &t.name);
            h.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                h.extend_from_slice(&d.to_le_bytes());
            }
            h.extend_from_slice(&t.ty.id().to_le_bytes());
            h.extend_from_slice(&offset.to_le_bytes());
            offset += size.next_multiple_of(alignment);
        }
        h.resize((h.len() as u64).next_multiple_of(alignment) as usize, 0);
        out.write_all(&h)?;
        Ok(Self {
            out,
            alignment,
            sizes,
            written: 0,
        })
    }

    /// Writes the data of the next tensor, which must be exactly its size, plus alignment padding.
    pub fn write_tensor_data(&mut self, data: &[u8]) -> Result<()> {
        let Some((name, expected)) = self.sizes.get(self.written) else {
            return Err(WriteError::TensorCount {
                expected: self.sizes.len(),
                written: self.written + 1,
            });
        };
        if data.len() as u64 != *expected {
            return Err(WriteError::DataSize {
                name: name.clone(),
                expected: *expected,
                actual: data.len() as u64,
            });
        }
        self.out.write_all(data)?;
        let padding = expected.next_multiple_of(self.alignment) - expected;
        self.out.write_all(&vec![0; padding as usize])?;
        self.written += 1;
        Ok(())
    }

    /// Checks that every tensor got its data and returns the output.
    pub fn finish(mut self) -> Result<W> {
        if self.written != self.sizes.len() {
            return Err(WriteError::TensorCount {
                expected: self.sizes.len(),
                written: self.written,
            });
        }
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Writes a whole GGUF file whose tensor data is in memory.
pub fn write<W: Write>(
    out: W,
    metadata: &[(String, Value)],
    tensors: &[(TensorSpec, &[u8])],
) -> Result<W> {
    let specs: Vec<TensorSpec> = tensors.iter().map(|(spec, _)| spec.clone()).collect();
    let mut w = GgufWriter::new(out, metadata, &specs)?;
    for (_, data) in tensors {
        w.write_tensor_data(data)?;
    }
    w.finish()
}

fn tensor_size(t: &TensorSpec) -> Result<u64> {
    let bad = |reason: String| WriteError::BadTensor {
        name: t.name.clone(),
        reason,
    };
    if t.dims.len() > 4 {
        return Err(bad(format!(
            "{} dimensions; at most 4 are allowed",
            t.dims.len()
        )));
    }
    let row = t.dims.first().copied().unwrap_or(1);
    if !row.is_multiple_of(t.ty.block_size() as u64) {
        return Err(bad(format!(
            "row length {row} is not a multiple of the {} block size {}",
            t.ty,
            t.ty.block_size()
        )));
    }
    t.dims
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .and_then(|n| t.ty.bytes_for(n))
        .ok_or_else(|| bad(format!("shape {:?} is too large", t.dims)))
}

fn put_str(h: &mut Vec<u8>, s: &str) {
    h.extend_from_slice(&(s.len() as u64).to_le_bytes());
    h.extend_from_slice(s.as_bytes());
}

fn put_all<T: Copy, const N: usize>(h: &mut Vec<u8>, values: &[T], encode: fn(T) -> [u8; N]) {
    for &v in values {
        h.extend_from_slice(&encode(v));
    }
}

fn put_value(h: &mut Vec<u8>, value: &Value) {
    match value {
        Value::U8(v) => put_all(h, &[*v], u8::to_le_bytes),
        Value::I8(v) => put_all(h, &[*v], i8::to_le_bytes),
        Value::U16(v) => put_all(h, &[*v], u16::to_le_bytes),
        Value::I16(v) => put_all(h, &[*v], i16::to_le_bytes),
        Value::U32(v) => put_all(h, &[*v], u32::to_le_bytes),
        Value::I32(v) => put_all(h, &[*v], i32::to_le_bytes),
        Value::F32(v) => put_all(h, &[*v], f32::to_le_bytes),
        Value::Bool(v) => h.push(u8::from(*v)),
        Value::String(s) => put_str(h, s),
        Value::Array(a) => put_array(h, a),
        Value::U64(v) => put_all(h, &[*v], u64::to_le_bytes),
        Value::I64(v) => put_all(h, &[*v], i64::to_le_bytes),
        Value::F64(v) => put_all(h, &[*v], f64::to_le_bytes),
    }
}

fn put_array(h: &mut Vec<u8>, array: &Array) {
    h.extend_from_slice(&array.element_type().id().to_le_bytes());
    h.extend_from_slice(&(array.len() as u64).to_le_bytes());
    match array {
        Array::U8(v) => put_all(h, v, u8::to_le_bytes),
        Array::I8(v) => put_all(h, v, i8::to_le_bytes),
        Array::U16(v) => put_all(h, v, u16::to_le_bytes),
        Array::I16(v) => put_all(h, v, i16::to_le_bytes),
        Array::U32(v) => put_all(h, v, u32::to_le_bytes),
        Array::I32(v) => put_all(h, v, i32::to_le_bytes),
        Array::F32(v) => put_all(h, v, f32::to_le_bytes),
        Array::Bool(v) => h.extend(v.iter().map(|&b| u8::from(b))),
        Array::String(v) => v.iter().for_each(|s| put_str(h, s)),
        Array::Array(v) => v.iter().for_each(|a| put_array(h, a)),
        Array::U64(v) => put_all(h, v, u64::to_le_bytes),
        Array::I64(v) => put_all(h, v, i64::to_le_bytes),
        Array::F64(v) => put_all(h, v, f64::to_le_bytes),
    }
}
