//! zinc's CUDA runtime: a thin layer over cudarc that opens devices, moves typed buffers, loads
//! the compiler's PTX, and launches kernels with arguments checked against the signature the
//! compiler wrote for each kernel.
//!
//! libcuda (and libcublas) are loaded at run time. Without them every entry point returns
//! [`RuntimeError::NoDriver`] (or `NoCublas`) instead of panicking, so binaries built on machines
//! without a GPU still run there and fail cleanly. [`Device::emulated`] gives a device with the
//! same API whose buffers live in host memory and whose kernels a [`HostLauncher`] runs on the
//! CPU (see [`emulated`]).
//!
//! ```no_run
//! use zinc_runtime::{Arg, Device, Grid};
//!
//! let dev = Device::new(0)?;
//! let stream = dev.default_stream();
//! let kernel = dev.load_kernel_from_dir("out".as_ref(), "vector_add")?;
//! let a = stream.upload(&[1.0f32; 1000])?;
//! let b = stream.upload(&[2.0f32; 1000])?;
//! let mut c = stream.alloc::<f32>(1000)?;
//! kernel.launch(&stream, Grid::Auto, &mut [Arg::from(&a), Arg::from(&b), Arg::from(&mut c), Arg::from(1000u32)])?;
//! assert_eq!(stream.download(&c)?[0], 3.0);
//! # Ok::<(), zinc_runtime::RuntimeError>(())
//! ```

mod blas;
mod buffer;
mod check;
mod device;
mod dtype;
pub mod emulated;
mod error;
mod graph;
mod grid_expr;
mod launch;
mod module;
mod pool;
mod signature;
mod stream;
mod tensor_map;
mod timing;

pub use blas::{Blas, GemmOutput};
pub use buffer::{DeviceBuffer, Storage};
pub use check::{
    plan_launch, tensor_map_extents, ArgDesc, DeviceLimits, Grid, LaunchDims, LaunchError,
};
pub use device::{driver_present, Device, DeviceProps};
pub use dtype::{DType, DeviceElem, ElemType, ScalarValue};
pub use emulated::{HostArg, HostLauncher};
pub use error::{Result, RuntimeError};
pub use graph::Graph;
pub use grid_expr::{GridExpr, GridExprError};
pub use launch::Arg;
pub use module::Kernel;
pub use pool::{size_class, ActivationPool, SizeClassPool};
pub use signature::{KernelSignature, Param, ParamKind, SignatureError, TensorMapSpec};
pub use stream::Stream;
pub use timing::{median, time_median_ms, Event};

/// Re-exported so callers can reach what this crate does not wrap.
pub use cudarc;
pub use half;
