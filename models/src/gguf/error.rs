use thiserror::Error;

use crate::quant::{GgmlType, QuantError};

/// Arrays nested deeper than this are rejected, so a crafted file cannot exhaust the stack.
pub const MAX_ARRAY_DEPTH: usize = 16;

/// Everything that can be wrong with a GGUF file or a lookup in it. Errors about the file's bytes
/// name the byte offset where the problem is.
#[derive(Debug, Error)]
pub enum GgufError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// `found` is the first four bytes, escaped as ASCII.
    #[error("not a GGUF file: magic at offset 0 is \"{found}\", expected \"GGUF\"")]
    BadMagic { found: String },
    #[error("unsupported GGUF version {version} at offset 4 (supported: 2 and 3, little-endian)")]
    UnsupportedVersion { version: u32 },
    #[error("file truncated: {what} at offset {offset} needs {needed} bytes, but only {available} remain")]
    Truncated {
        what: &'static str,
        offset: u64,
        needed: u64,
        available: u64,
    },
    #[error("{what} {count} at offset {offset} is impossible: the {available} bytes left in the file hold at most {max}")]
    CountTooLarge {
        what: &'static str,
        count: u64,
        offset: u64,
        available: u64,
        max: u64,
    },
    #[error("unknown metadata value type {id} at offset {offset}")]
    BadValueType { id: u32, offset: u64 },
    #[error("invalid bool byte {value} at offset {offset} (must be 0 or 1)")]
    BadBool { value: u8, offset: u64 },
    #[error("string at offset {offset} is not valid UTF-8")]
    BadUtf8 { offset: u64 },
    #[error("arrays nested more than {MAX_ARRAY_DEPTH} deep at offset {offset}")]
    NestingTooDeep { offset: u64 },
    #[error("duplicate metadata key '{key}' at offset {offset}")]
    DuplicateKey { key: String, offset: u64 },
    #[error("metadata key '{key}': {error}")]
    InKey { key: String, error: Box<GgufError> },
    #[error("tensor info #{index}: {error}")]
    InTensorInfo { index: usize, error: Box<GgufError> },
    #[error("general.alignment must be a nonzero power of two, got {value}")]
    BadAlignment { value: u64 },
    #[error("duplicate tensor name '{name}' at offset {offset}")]
    DuplicateTensor { name: String, offset: u64 },
    #[error("tensor '{name}' has {n_dims} dimensions (offset {offset}); at most 4 are allowed")]
    TooManyDims {
        name: String,
        n_dims: u32,
        offset: u64,
    },
    #[error("tensor '{name}' shape {dims:?} has more elements than fit in 64 bits")]
    ShapeOverflow { name: String, dims: Vec<u64> },
    #[error("tensor '{name}' has unknown ggml type id {id}")]
    UnknownType { name: String, id: u32 },
    #[error("tensor '{name}' of type {ty}: row length {row} is not a multiple of the block size {block_size}")]
    PartialBlock {
        name: String,
        ty: GgmlType,
        row: u64,
        block_size: usize,
    },
    #[error("tensor '{name}' data offset {offset} is not a multiple of the alignment {alignment}")]
    Misaligned {
        name: String,
        offset: u64,
        alignment: u64,
    },
    #[error("tensor '{name}' data (offset {offset}, {size} bytes) runs past the end of the file (size {file_size})")]
    OutOfBounds {
        name: String,
        offset: u64,
        size: u64,
        file_size: u64,
    },
    #[error("metadata key '{key}' not found")]
    MissingKey { key: String },
    #[error("metadata key '{key}' is {found}, expected {expected}")]
    WrongType {
        key: String,
        expected: &'static str,
        found: String,
    },
    #[error("tensor '{name}' not found")]
    MissingTensor { name: String },
    #[error("tensor '{name}': {error}")]
    Quant { name: String, error: QuantError },
}
