//! GGUF files (llama.cpp's model format), versions 2 and 3.
//!
//! A file is a header (magic, version, tensor count, metadata count), typed key-value metadata,
//! one info per tensor (name, dims, ggml type, data offset), then the tensor data, which starts at
//! the first multiple of `general.alignment` after the infos. [`Gguf`] parses a file over a memory
//! map and hands out tensor data as borrowed bytes or dequantized f32.

mod error;
mod reader;
mod value;
mod writer;

pub use error::{GgufError, MAX_ARRAY_DEPTH};
pub use value::{Array, FromValue, Value, ValueType};
pub use writer::{write, GgufWriter, TensorSpec, WriteError};

use std::fs::File;
use std::ops::{Deref, Range};
use std::path::Path;

use memmap2::Mmap;
use rayon::prelude::*;

use crate::quant::{dequantize_row, GgmlType, QuantError};

pub const MAGIC: &[u8; 4] = b"GGUF";
pub const ALIGNMENT_KEY: &str = "general.alignment";
pub const ARCHITECTURE_KEY: &str = "general.architecture";
/// The data alignment when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;

type Result<T> = std::result::Result<T, GgufError>;

/// One tensor's entry in the header. Its data lies at `offset` bytes into the data section.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    /// ggml order: `dims[0]` is the row length (the contiguous dimension).
    pub dims: Vec<u64>,
    /// The raw ggml type id; see [`TensorInfo::ggml_type`].
    pub type_id: u32,
    pub offset: u64,
    n_elements: u64,
}

impl TensorInfo {
    pub fn n_elements(&self) -> u64 {
        self.n_elements
    }

    /// The tensor's type; an id this reader does not know is an error only here, when used.
    pub fn ggml_type(&self) -> Result<GgmlType> {
        GgmlType::from_id(self.type_id).ok_or_else(|| GgufError::UnknownType {
            name: self.name.clone(),
            id: self.type_id,
        })
    }

    /// Size of the tensor's data in bytes.
    pub fn n_bytes(&self) -> Result<u64> {
        let ty = self.ggml_type()?;
        let row = self.dims.first().copied().unwrap_or(1);
        if !row.is_multiple_of(ty.block_size() as u64) {
            return Err(GgufError::PartialBlock {
                name: self.name.clone(),
                ty,
                row,
                block_size: ty.block_size(),
            });
        }
        // Whole rows of whole blocks, so the only failure left is overflow.
        ty.bytes_for(self.n_elements)
            .ok_or_else(|| GgufError::ShapeOverflow {
                name: self.name.clone(),
                dims: self.dims.clone(),
            })
    }
}

/// Where `t`'s data lies in a file of `file_size` bytes whose data section starts at `data_offset`.
fn data_range(t: &TensorInfo, data_offset: u64, file_size: u64) -> Result<Range<usize>> {
    let size = t.n_bytes()?;
    let start = data_offset.saturating_add(t.offset);
    match start.checked_add(size) {
        // Both ends are within the file, whose size fits in usize.
        Some(end) if end <= file_size => Ok(start as usize..end as usize),
        _ => Err(GgufError::OutOfBounds {
            name: t.name.clone(),
            offset: start,
            size,
            file_size,
        }),
    }
}

/// The bytes a [`Gguf`] reads from.
enum Bytes {
    Mapped(Mmap),
    Owned(Vec<u8>),
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

/// A parsed GGUF file.
pub struct Gguf {
    bytes: Bytes,
    header: reader::Header,
}

/// Tensors are dequantized in chunks of about this many weights, one rayon task each.
const DEQUANT_CHUNK: usize = 1 << 16;

impl Gguf {
    /// Memory-maps and parses the file at `path`. The file must not change while mapped.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let file = File::open(path)?;
        // SAFETY: the map is read-only; like every mmap-based model loader we rely on the file
        // not being truncated or rewritten while it is open.
        let map = unsafe { Mmap::map(&file)? };
        Self::parse(Bytes::Mapped(map))
    }

    /// Parses a GGUF file held in memory.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self> {
        Self::parse(Bytes::Owned(bytes))
    }

    fn parse(bytes: Bytes) -> Result<Self> {
        let header = reader::parse(&bytes)?;
        Ok(Self { bytes, header })
    }

    pub fn version(&self) -> u32 {
        self.header.version
    }

    pub fn file_size(&self) -> u64 {
        self.bytes.len() as u64
    }

    pub fn alignment(&self) -> u64 {
        self.header.alignment
    }

    /// File offset where the data section starts.
    pub fn data_offset(&self) -> u64 {
        self.header.data_offset
    }

    /// All metadata in file order.
    pub fn metadata(&self) -> &[(String, Value)] {
        &self.header.metadata
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.header
            .keys
            .get(key)
            .map(|&i| &self.header.metadata[i].1)
    }

    /// The value of `key` converted to `T`; an error if it is missing or of another type.
    pub fn get_as<'a, T: FromValue<'a>>(&'a self, key: &str) -> Result<T> {
        self.get_opt(key)?
            .ok_or_else(|| GgufError::MissingKey { key: key.into() })
    }

    /// The value of `key` converted to `T`, or `None` if it is missing; an error if it is of
    /// another type.
    pub fn get_opt<'a, T: FromValue<'a>>(&'a self, key: &str) -> Result<Option<T>> {
        let Some(value) = self.get(key) else {
            return Ok(None);
        };
        T::from_value(value)
            .map(Some)
            .ok_or_else(|| GgufError::WrongType {
                key: key.into(),
                expected: T::EXPECTED,
                found: value.type_description(),
            })
    }

    pub fn get_u32(&self, key: &str) -> Result<u32> {
        self.get_as(key)
    }

    pub fn get_u64(&self, key: &str) -> Result<u64> {
        self.get_as(key)
    }

    pub fn get_f32(&self, key: &str) -> Result<f32> {
        self.get_as(key)
    }

    pub fn get_bool(&self, key: &str) -> Result<bool> {
        self.get_as(key)
    }

    pub fn get_str(&self, key: &str) -> Result<&str> {
        self.get_as(key)
    }

    pub fn get_str_array(&self, key: &str) -> Result<&[String]> {
        self.get_as(key)
    }

    pub fn get_f32_array(&self, key: &str) -> Result<&[f32]> {
        self.get_as(key)
    }

    pub fn get_i32_array(&self, key: &str) -> Result<&[i32]> {
        self.get_as(key)
    }

    /// `general.architecture`, e.g. `"llama"`.
    pub fn architecture(&self) -> Result<&str> {
        self.get_str(ARCHITECTURE_KEY)
    }

    /// The architecture-prefixed key: `arch_key("block_count")` is `"llama.block_count"` in a
    /// llama file.
    pub fn arch_key(&self, suffix: &str) -> Result<String> {
        Ok(format!("{}.{suffix}", self.architecture()?))
    }

    /// All tensor infos in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.header.tensors
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.header
            .names
            .get(name)
            .map(|&i| &self.header.tensors[i])
    }

    fn require_tensor(&self, name: &str) -> Result<&TensorInfo> {
        self.tensor(name)
            .ok_or_else(|| GgufError::MissingTensor { name: name.into() })
    }

    /// The raw bytes of `t`'s data, checked to lie inside the file.
    pub fn tensor_data(&self, t: &TensorInfo) -> Result<&[u8]> {
        Ok(&self.bytes[data_range(t, self.header.data_offset, self.file_size())?])
    }

    /// The tensor `name` dequantized to f32, in ggml element order (row-major, `dims[0]` fastest).
    pub fn tensor_f32(&self, name: &str) -> Result<Vec<f32>> {
        let t = self.require_tensor(name)?;
        let ty = t.ggml_type()?;
        let bytes = self.tensor_data(t)?;
        let quant_error = |error| GgufError::Quant {
            name: name.into(),
            error,
        };
        // Refuse before allocating: the output is bounded by the file size only for known formats.
        if !ty.can_dequantize() {
            return Err(quant_error(QuantError::Unsupported {
                ty,
                op: "dequantization",
            }));
        }
        let mut out = vec![0.0f32; t.n_elements() as usize];
        let blocks = (DEQUANT_CHUNK / ty.block_size()).max(1);
        out.par_chunks_mut(blocks * ty.block_size())
            .zip(bytes.par_chunks(blocks * ty.type_size()))
            .try_for_each(|(out, bytes)| dequantize_row(ty, bytes, out))
            .map_err(quant_error)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
