//! ggml tensor types: their block layouts, dequantization to f32 and quantization from f32.
//!
//! Every quantized format stores a row as a sequence of fixed-size blocks; a block of
//! [`GgmlType::block_size`] weights takes [`GgmlType::type_size`] bytes. Rows must hold a whole
//! number of blocks.

mod dequant;
mod planar;
mod quantize;
mod types;

pub use dequant::{dequantize_row, kquant_split_row, IQ4_LEVELS};
pub use planar::{from_planar, has_planar, planar_fields, to_planar, PlanarFields};
pub use quantize::quantize_row;
pub use types::GgmlType;

use thiserror::Error;

/// Errors from converting between f32 and a ggml type.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum QuantError {
    #[error("{op} is not supported for {ty}")]
    Unsupported { ty: GgmlType, op: &'static str },
    #[error("{len} values is not a multiple of the {ty} block size {block_size}")]
    NotBlockMultiple {
        ty: GgmlType,
        len: usize,
        block_size: usize,
    },
    #[error("{len} {ty} values take {expected} bytes, but the buffer has {actual}")]
    SizeMismatch {
        ty: GgmlType,
        len: usize,
        expected: usize,
        actual: usize,
    },
}

impl GgmlType {
    /// Whether [`dequantize_row`] supports this type.
    pub fn can_dequantize(self) -> bool {
        dequant::block_kernel(self).is_some()
    }

    /// Whether [`quantize_row`] supports this type.
    pub fn can_quantize(self) -> bool {
        quantize::block_kernel(self).is_some()
    }
}

/// Checks that `len` values of `ty` fit exactly in `n_bytes` bytes; returns the block count.
fn check_sizes(ty: GgmlType, len: usize, n_bytes: usize) -> Result<usize, QuantError> {
    let block_size = ty.block_size();
    if !len.is_multiple_of(block_size) {
        return Err(QuantError::NotBlockMultiple {
            ty,
            len,
            block_size,
        });
    }
    let blocks = len / block_size;
    let expected = blocks * ty.type_size();
    if n_bytes != expected {
        return Err(QuantError::SizeMismatch {
            ty,
            len,
            expected,
            actual: n_bytes,
        });
    }
    Ok(blocks)
}

#[cfg(test)]
mod tests;
