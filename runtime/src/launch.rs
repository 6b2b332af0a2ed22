//! Typed kernel launches: arguments are checked against the kernel's signature and the device
//! limits (see [`crate::check`]) before anything reaches the driver.

use std::sync::atomic::Ordering;

use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{
    CudaFunction, CudaStream, DevicePtr, LaunchArgs, LaunchConfig, PushKernelArg,
};

use crate::buffer::{DeviceBuffer, Storage};
use crate::check::{plan_launch, tensor_map_extents, ArgDesc, Grid, LaunchDims, LaunchError};
use crate::dtype::{DType, DeviceElem, ScalarValue};
use crate::emulated::{HostArg, HostLauncher};
use crate::error::{During, Result, RuntimeError};
use crate::module::{Kernel, KernelFunc};
use crate::stream::{Stream, StreamKind};
use crate::tensor_map::{encode, TensorMapArg};

/// One kernel argument. Build with `Arg::from(&buf)` for a buffer the kernel only reads,
/// `Arg::from(&mut buf)` for one it writes, and `Arg::from(n)` for scalars.
#[derive(Debug)]
pub enum Arg<'a> {
    Buffer {
        raw: &'a Storage,
        elem: DType,
        len: usize,
    },
    BufferMut {
        raw: &'a mut Storage,
        elem: DType,
        len: usize,
    },
    Scalar(ScalarValue),
}

impl Arg<'_> {
    /// The same argument, borrowed for a shorter while (one launch among others sharing it).
    pub fn reborrow(&mut self) -> Arg<'_> {
        match self {
            Arg::Buffer { raw, elem, len } => Arg::Buffer {
                raw,
                elem: *elem,
                len: *len,
            },
            Arg::BufferMut { raw, elem, len } => Arg::BufferMut {
                raw,
                elem: *elem,
                len: *len,
            },
            Arg::Scalar(v) => Arg::Scalar(*v),
        }
    }

    /// What the launch check sees of this argument.
    pub fn desc(&self) -> ArgDesc {
        match *self {
            Arg::Buffer { elem, len, .. } => ArgDesc::Buffer {
                elem,
                len,
                mutable: false,
            },
            Arg::BufferMut { elem, len, .. } => ArgDesc::Buffer {
                elem,
                len,
                mutable: true,
            },
            Arg::Scalar(v) => ArgDesc::Scalar(v),
        }
    }
}

impl<'a, T: DeviceElem> From<&'a DeviceBuffer<T>> for Arg<'a> {
    fn from(buf: &'a DeviceBuffer<T>) -> Self {
        Arg::Buffer {
            raw: buf.raw(),
            elem: T::DTYPE,
            len: buf.len(),
        }
    }
}

impl<'a, T: DeviceElem> From<&'a mut DeviceBuffer<T>> for Arg<'a> {
    fn from(buf: &'a mut DeviceBuffer<T>) -> Self {
        let len = buf.len();
        Arg::BufferMut {
            raw: buf.raw_mut(),
            elem: T::DTYPE,
            len,
        }
    }
}

impl From<ScalarValue> for Arg<'_> {
    fn from(v: ScalarValue) -> Self {
        Arg::Scalar(v)
    }
}

macro_rules! scalar_arg {
    ($($t:ty),*) => {$(
        impl From<$t> for Arg<'_> {
            fn from(v: $t) -> Self {
                Arg::Scalar(v.into())
            }
        }
    )*};
}

scalar_arg!(i32, i64, u32, u64, f32, f64, half::f16, half::bf16);

impl Kernel {
    /// Checks `args` and the launch shape against the signature and device, then launches on
    /// `stream`. Returns the dimensions used.
    ///
    /// The checks cover what the ABI needs (argument count, kinds, element and scalar types,
    /// mutability, grid, block and shared memory); the index ranges a kernel derives from its
    /// scalar arguments are the kernel's contract. An out-of-range access is reported by the
    /// driver as an illegal-address error at the next synchronization.
    pub fn launch(&self, stream: &Stream, grid: Grid, args: &mut [Arg<'_>]) -> Result<LaunchDims> {
        let descs: Vec<ArgDesc> = args.iter().map(Arg::desc).collect();
        let dims = plan_launch(&self.sig, &descs, grid, &self.limits)?;
        match (&self.func, &stream.kind) {
            (KernelFunc::Cuda(func), StreamKind::Cuda(stream)) => {
                self.launch_cuda(func, stream, &dims, &descs, args)?;
            }
            (KernelFunc::Emulated { launcher, module }, StreamKind::Emulated) => {
                self.launch_emulated(&**launcher, module, &dims, args)?;
            }
            _ => return Err(RuntimeError::WrongDevice),
        }
        Ok(dims)
    }

    fn launch_cuda(
        &self,
        func: &CudaFunction,
        stream: &CudaStream,
        dims: &LaunchDims,
        descs: &[ArgDesc],
        args: &mut [Arg<'_>],
    ) -> Result<()> {
        if dims.needs_shared_opt_in() && !self.shared_opt_in_done.load(Ordering::Relaxed) {
            func.set_attribute(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                dims.dynamic_shared_bytes as i32,
            )
            .during("opting in to dynamic shared memory")?;
            self.shared_opt_in_done.store(true, Ordering::Relaxed);
        }

        let maps = self.tensor_maps(stream, descs, args)?;
        let cfg = LaunchConfig {
            grid_dim: dims.grid.into(),
            block_dim: dims.block.into(),
            shared_mem_bytes: dims.dynamic_shared_bytes,
        };
        let mut builder = stream.launch_builder(func);
        for arg in args.iter_mut() {
            match arg {
                Arg::Buffer {
                    raw: Storage::Cuda(raw),
                    ..
                } => {
                    builder.arg(raw);
                }
                Arg::BufferMut {
                    raw: Storage::Cuda(raw),
                    ..
                } => {
                    builder.arg(raw);
                }
                Arg::Buffer { .. } | Arg::BufferMut { .. } => {
                    return Err(RuntimeError::WrongDevice)
                }
                Arg::Scalar(v) => push_scalar(&mut builder, v),
            }
        }
        for map in &maps {
            builder.arg(map);
        }
        // SAFETY: the arguments match the kernel's parameter list in count, order and type
        // (checked above against the manifest the compiler wrote with this PTX), and every
        // buffer outlives the launch through cudarc's stream-ordered frees.
        unsafe { builder.launch(cfg) }.during("launching a kernel")?;
        Ok(())
    }

    /// The kernel's tensor maps over these arguments' buffers, encoded for this launch.
    fn tensor_maps(
        &self,
        stream: &CudaStream,
        descs: &[ArgDesc],
        args: &[Arg<'_>],
    ) -> Result<Vec<TensorMapArg>> {
        if self.sig.tensor_maps.is_empty() {
            return Ok(Vec::new());
        }
        let extents = tensor_map_extents(&self.sig, descs)?;
        self.sig
            .tensor_maps
            .iter()
            .zip(extents)
            .map(|(spec, extent)| {
                let ptr = match &args[spec.param] {
                    Arg::Buffer {
                        raw: Storage::Cuda(raw),
                        ..
                    }
                    | Arg::BufferMut {
                        raw: Storage::Cuda(raw),
                        ..
                    } => raw.device_ptr(stream).0,
                    _ => return Err(RuntimeError::WrongDevice),
                };
                let [offset, rows, cols] = extent;
                let start = ptr + offset * spec.elem.size_bytes() as u64;
                if !start.is_multiple_of(16) {
                    return Err(LaunchError::TensorMap {
                        kernel: self.sig.name.clone(),
                        param: self.sig.params[spec.param].name.clone(),
                        reason: format!("the tensor's address {start:#x} is not 16-byte aligned"),
                    }
                    .into());
                }
                encode(spec, start, [rows, cols]).during("encoding a TMA tensor map")
            })
            .collect()
    }

    /// Hands the launch to the emulated device's launcher, each buffer cut to its `len`
    /// elements so that the launcher sees exactly what the kernel may address.
    fn launch_emulated(
        &self,
        launcher: &dyn HostLauncher,
        module: &str,
        dims: &LaunchDims,
        args: &mut [Arg<'_>],
    ) -> Result<()> {
        let host_args = args
            .iter_mut()
            .map(|arg| match arg {
                Arg::Buffer {
                    raw: Storage::Host(bytes),
                    elem,
                    len,
                } => Ok(HostArg::Buffer(&bytes[..*len * elem.size_bytes()])),
                Arg::BufferMut {
                    raw: Storage::Host(bytes),
                    elem,
                    len,
                } => Ok(HostArg::BufferMut(&mut bytes[..*len * elem.size_bytes()])),
                Arg::Scalar(v) => Ok(HostArg::Scalar(*v)),
                Arg::Buffer { .. } | Arg::BufferMut { .. } => Err(RuntimeError::WrongDevice),
            })
            .collect::<Result<Vec<_>>>();
        launcher
            .launch(module, &self.sig.name, dims, &mut host_args?)
            .map_err(|source| RuntimeError::HostLaunch {
                kernel: self.sig.name.clone(),
                source,
            })
    }
}

fn push_scalar<'a>(builder: &mut LaunchArgs<'a>, v: &'a ScalarValue) {
    match v {
        ScalarValue::I32(x) => builder.arg(x),
        ScalarValue::I64(x) => builder.arg(x),
        ScalarValue::U32(x) => builder.arg(x),
        ScalarValue::U64(x) => builder.arg(x),
        ScalarValue::F16(x) => builder.arg(x),
        ScalarValue::Bf16(x) => builder.arg(x),
        ScalarValue::F32(x) => builder.arg(x),
        ScalarValue::F64(x) => builder.arg(x),
    };
}
