//! TMA tensor maps: the 128-byte descriptors `cp.async.bulk.tensor` reads, encoded by the driver
//! at each launch from the buffer's address and the extents the manifest gives.

use cudarc::driver::sys::{
    self, CUtensorMapDataType as Data, CUtensorMapFloatOOBfill, CUtensorMapInterleave,
    CUtensorMapL2promotion, CUtensorMapSwizzle,
};
use cudarc::driver::{DeviceRepr, DriverError};

use crate::dtype::DType;
use crate::signature::TensorMapSpec;

/// A `CUtensorMap`, passed to the kernel by value (a 64-byte aligned `.param` of 128 bytes).
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug)]
pub(crate) struct TensorMapArg([u64; 16]);

// SAFETY: plain bytes with the layout and alignment of the driver's CUtensorMap.
unsafe impl DeviceRepr for TensorMapArg {}

/// TMA copies bits; the type matters only for the out-of-bounds fill, which is zero here.
fn data_type(elem: DType) -> Data {
    match elem {
        DType::Bool | DType::I8 | DType::U8 => Data::CU_TENSOR_MAP_DATA_TYPE_UINT8,
        DType::I16 | DType::U16 => Data::CU_TENSOR_MAP_DATA_TYPE_UINT16,
        DType::F16 => Data::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        DType::Bf16 => Data::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        DType::I32 => Data::CU_TENSOR_MAP_DATA_TYPE_INT32,
        DType::U32 => Data::CU_TENSOR_MAP_DATA_TYPE_UINT32,
        DType::F32 => Data::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
        DType::I64 => Data::CU_TENSOR_MAP_DATA_TYPE_INT64,
        DType::U64 => Data::CU_TENSOR_MAP_DATA_TYPE_UINT64,
        DType::F64 => Data::CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
    }
}

/// The map of `spec` over the tensor at device address `ptr`, `[rows, cols]` elements.
pub(crate) fn encode(
    spec: &TensorMapSpec,
    ptr: sys::CUdeviceptr,
    [rows, cols]: [u64; 2],
) -> Result<TensorMapArg, DriverError> {
    let mut map = std::mem::MaybeUninit::<sys::CUtensorMap>::uninit();
    let dims = [cols, rows];
    let strides = [cols * spec.elem.size_bytes() as u64];
    let [box_rows, box_cols] = spec.box_dims;
    let boxes = [box_cols, box_rows];
    let steps = [1u32, 1];
    let swizzle = match spec.swizzle {
        128 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
        64 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_64B,
        32 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_32B,
        _ => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE,
    };
    // SAFETY: every array holds the rank (2) entries the driver reads (strides: rank - 1), and
    // `map` is written by the driver before it is read.
    let map = unsafe {
        sys::cuTensorMapEncodeTiled(
            map.as_mut_ptr(),
            data_type(spec.elem),
            2,
            ptr as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            steps.as_ptr(),
            CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle,
            CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
        .result()?;
        map.assume_init()
    };
    Ok(TensorMapArg(map.opaque))
}
