//! Device selection and properties.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::sys::{CUdevice_attribute, CUresult};
use cudarc::driver::{CudaContext, CudaModule, DriverError};

use crate::check::DeviceLimits;
use crate::emulated::{self, HostLauncher};
use crate::error::{During, Result, RuntimeError};
use crate::stream::Stream;

/// Whether the CUDA driver library can be loaded. cudarc panics on first use without it, so
/// every entry point checks this first.
pub fn driver_present() -> bool {
    // SAFETY: only tries to open libcuda; nothing from it is called.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// What the runtime reads about a device once, when it is opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceProps {
    pub ordinal: usize,
    pub name: String,
    /// (major, minor), e.g. (9, 0) for Hopper.
    pub compute_capability: (u32, u32),
    pub sm_count: u32,
    pub warp_size: u32,
    pub max_threads_per_block: u32,
    pub max_block_dims: [u32; 3],
    pub max_grid_dims: [u32; 3],
    /// Shared memory a block gets without opting in.
    pub max_shared_per_block: u32,
    /// Shared memory a block may opt in to (`cudaFuncAttributeMaxDynamicSharedMemorySize`).
    pub max_shared_per_block_optin: u32,
    pub l2_bytes: u64,
    pub total_memory: u64,
}

impl DeviceProps {
    /// The PTX target name, e.g. `sm_90`.
    pub fn arch(&self) -> String {
        let (major, minor) = self.compute_capability;
        format!("sm_{major}{minor}")
    }

    pub fn limits(&self) -> DeviceLimits {
        DeviceLimits {
            max_threads_per_block: self.max_threads_per_block,
            max_block_dims: self.max_block_dims,
            max_grid_dims: self.max_grid_dims,
            max_shared_per_block_optin: self.max_shared_per_block_optin,
        }
    }
}

/// An opened GPU (its context, properties and the PTX modules loaded into it), or the emulated
/// device (see [`Device::emulated`]).
#[derive(Debug)]
pub struct Device {
    pub(crate) kind: DeviceKind,
    props: DeviceProps,
}

#[derive(Debug)]
pub(crate) enum DeviceKind {
    Cuda {
        ctx: Arc<CudaContext>,
        modules: Mutex<HashMap<String, Arc<CudaModule>>>,
    },
    Emulated(Arc<dyn HostLauncher>),
}

impl Device {
    /// The number of CUDA devices; `NoDriver` when there is no driver at all.
    pub fn count() -> Result<usize> {
        if !driver_present() {
            return Err(RuntimeError::NoDriver);
        }
        match CudaContext::device_count() {
            Ok(n) => Ok(usize::try_from(n).unwrap_or(0)),
            Err(DriverError(CUresult::CUDA_ERROR_NO_DEVICE)) => Ok(0),
            Err(e) => Err(e).during("counting devices"),
        }
    }

    /// Opens device `ordinal` (its primary context).
    pub fn new(ordinal: usize) -> Result<Device> {
        let count = Self::count()?;
        if ordinal >= count {
            return Err(RuntimeError::NoDevice { ordinal, count });
        }
        let ctx = CudaContext::new(ordinal).during("creating a context")?;
        let props = read_props(&ctx)?;
        Ok(Device {
            kind: DeviceKind::Cuda {
                ctx,
                modules: Mutex::new(HashMap::new()),
            },
            props,
        })
    }

    /// The emulated device: host memory, kernels run by `launcher` (see [`crate::emulated`]).
    /// It reports an H200 (sm_90) and its limits.
    pub fn emulated(launcher: Arc<dyn HostLauncher>) -> Device {
        Device {
            kind: DeviceKind::Emulated(launcher),
            props: emulated::props(),
        }
    }

    /// Whether this is the emulated device.
    pub fn is_emulated(&self) -> bool {
        matches!(self.kind, DeviceKind::Emulated(_))
    }

    pub fn props(&self) -> &DeviceProps {
        &self.props
    }

    /// Bytes of device memory free now.
    pub fn free_memory(&self) -> Result<u64> {
        let ctx = match &self.kind {
            DeviceKind::Cuda { ctx, .. } => ctx,
            DeviceKind::Emulated(_) => return Ok(emulated::EMULATED_MEMORY),
        };
        ctx.bind_to_thread().during("binding the context")?;
        let (free, _total) =
            cudarc::driver::result::mem_get_info().during("reading the free memory")?;
        Ok(free as u64)
    }

    /// The context's default (legacy NULL) stream. It cannot be captured into a graph.
    pub fn default_stream(&self) -> Stream {
        match &self.kind {
            DeviceKind::Cuda { ctx, .. } => Stream::new(ctx.default_stream()),
            DeviceKind::Emulated(_) => Stream::emulated(),
        }
    }

    /// A new non-blocking stream.
    pub fn new_stream(&self) -> Result<Stream> {
        match &self.kind {
            DeviceKind::Cuda { ctx, .. } => {
                Ok(Stream::new(ctx.new_stream().during("creating a stream")?))
            }
            DeviceKind::Emulated(_) => Ok(Stream::emulated()),
        }
    }

    /// Stops cudarc from recording an event per buffer use. Needed before graph capture, whose
    /// streams must not wait on events recorded outside the capture.
    ///
    /// # Safety
    /// Buffers allocated afterwards are no longer synchronized across streams: the caller
    /// orders every cross-stream use (and frees) by hand.
    pub unsafe fn disable_event_tracking(&self) {
        if let DeviceKind::Cuda { ctx, .. } = &self.kind {
            // SAFETY: forwarded to the caller.
            unsafe { ctx.disable_event_tracking() }
        }
    }

    pub fn synchronize(&self) -> Result<()> {
        match &self.kind {
            DeviceKind::Cuda { ctx, .. } => ctx.synchronize().during("synchronizing the device"),
            DeviceKind::Emulated(_) => Ok(()),
        }
    }

    /// The underlying cudarc context, for what this crate does not wrap; `Emulated` on the
    /// emulated device.
    pub fn cuda(&self) -> Result<&Arc<CudaContext>> {
        match &self.kind {
            DeviceKind::Cuda { ctx, .. } => Ok(ctx),
            DeviceKind::Emulated(_) => Err(RuntimeError::Emulated("a CUDA context")),
        }
    }
}

fn read_props(ctx: &Arc<CudaContext>) -> Result<DeviceProps> {
    use CUdevice_attribute::*;
    let attr = |a: CUdevice_attribute| -> Result<u32> {
        let v = ctx.attribute(a).during("reading device attributes")?;
        Ok(u32::try_from(v).unwrap_or(0))
    };
    let (major, minor) = ctx
        .compute_capability()
        .during("reading the compute capability")?;
    Ok(DeviceProps {
        ordinal: ctx.ordinal(),
        name: ctx.name().during("reading the device name")?,
        compute_capability: (major as u32, minor as u32),
        sm_count: attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        warp_size: attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE)?,
        max_threads_per_block: attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
        max_block_dims: [
            attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
            attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
            attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
        ],
        max_grid_dims: [
            attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
            attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
            attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
        ],
        max_shared_per_block: attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?,
        max_shared_per_block_optin: attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
        l2_bytes: attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?.into(),
        total_memory: ctx.total_mem().during("reading the memory size")? as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_driver_is_an_error_not_a_panic() {
        match Device::new(0) {
            Err(RuntimeError::NoDriver) => assert!(!driver_present()),
            Err(RuntimeError::NoDevice { .. }) => assert_eq!(Device::count().unwrap(), 0),
            Err(e) => panic!("unexpected error opening device 0: {e}"),
            Ok(dev) => println!("found {} ({})", dev.props().name, dev.props().arch()),
        }
        if !driver_present() {
            let msg = Device::count().unwrap_err().to_string();
            assert!(msg.starts_with("no CUDA driver (libcuda.so) found"));
        }
    }

    #[test]
    fn arch_name_from_compute_capability() {
        // The emulated device reports an H200's figures.
        let props = DeviceProps {
            name: "H200".into(),
            total_memory: 141 << 30,
            ..emulated::props()
        };
        assert_eq!(props.arch(), "sm_90");
        assert_eq!(props.limits().max_shared_per_block_optin, 227 * 1024);
    }
}
