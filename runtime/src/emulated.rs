//! The emulated device: buffers in host memory and kernel launches run on the CPU by a
//! [`HostLauncher`] (the engine's is the zinc interpreter), so that code written against
//! [`Device`](crate::Device), [`Stream`](crate::Stream) and [`Kernel`](crate::Kernel) runs
//! unchanged, and is tested, on machines without a GPU.
//!
//! Work runs as it is queued, so synchronizing is a no-op and events measure host wall time.
//! Graph capture and cuBLAS are refused with [`RuntimeError::Emulated`](crate::RuntimeError).

use std::error::Error;
use std::fmt::Debug;

use crate::check::LaunchDims;
use crate::device::DeviceProps;
use crate::dtype::ScalarValue;

/// The error a [`HostLauncher`] reports.
pub type HostLaunchError = Box<dyn Error + Send + Sync>;

/// Runs kernels on the CPU for the emulated device.
pub trait HostLauncher: Debug + Send + Sync {
    /// Runs kernel `kernel` of module `module` (the names given to
    /// [`Device::load_kernel`](crate::Device::load_kernel)) over `dims`. Buffers are the
    /// arguments' bytes, exactly `len` elements each; a kernel writes through
    /// [`HostArg::BufferMut`] in place, as it would through a device pointer.
    fn launch(
        &self,
        module: &str,
        kernel: &str,
        dims: &LaunchDims,
        args: &mut [HostArg<'_>],
    ) -> Result<(), HostLaunchError>;
}

/// One kernel argument on the emulated device.
#[derive(Debug)]
pub enum HostArg<'a> {
    Buffer(&'a [u8]),
    BufferMut(&'a mut [u8]),
    Scalar(ScalarValue),
}

/// What the emulated device reports: an H200's limits, so launches are checked as on one, and
/// memory enough for any model a test builds.
pub(crate) fn props() -> DeviceProps {
    DeviceProps {
        ordinal: 0,
        name: "emulated (kernels run on the CPU)".into(),
        compute_capability: (9, 0),
        sm_count: 132,
        warp_size: 32,
        max_threads_per_block: 1024,
        max_block_dims: [1024, 1024, 64],
        max_grid_dims: [i32::MAX as u32, 65535, 65535],
        max_shared_per_block: 48 * 1024,
        max_shared_per_block_optin: 227 * 1024,
        l2_bytes: 60 << 20,
        total_memory: EMULATED_MEMORY,
    }
}

/// Bytes of memory the emulated device reports, all of it free.
pub(crate) const EMULATED_MEMORY: u64 = 1 << 40;
