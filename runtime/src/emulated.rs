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

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::signature::tests::VECTOR_ADD;
    use crate::{
        ActivationPool, Arg, Blas, Device, DeviceBuffer, Grid, KernelSignature, RuntimeError,
    };

    /// Runs `vector_add` (`c[i] = a[i] + b[i]` for `i < n`) and remembers each launch.
    #[derive(Debug, Default)]
    struct HostVectorAdd {
        launches: Mutex<Vec<(String, String, LaunchDims)>>,
    }

    impl HostLauncher for HostVectorAdd {
        fn launch(
            &self,
            module: &str,
            kernel: &str,
            dims: &LaunchDims,
            args: &mut [HostArg<'_>],
        ) -> Result<(), HostLaunchError> {
            self.launches
                .lock()
                .unwrap()
                .push((module.into(), kernel.into(), *dims));
            let f32s = |bytes: &[u8]| -> Vec<f32> {
                bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                    .collect()
            };
            let [HostArg::Buffer(a), HostArg::Buffer(b), HostArg::BufferMut(c), HostArg::Scalar(ScalarValue::U32(n))] =
                args
            else {
                return Err("not vector_add's arguments".into());
            };
            let (a, b) = (f32s(a), f32s(b));
            if let Some(i) = (a.len().min(b.len())..*n as usize).next() {
                return Err(format!("index {i} past the buffers").into());
            }
            for i in 0..*n as usize {
                c[4 * i..4 * i + 4].copy_from_slice(&(a[i] + b[i]).to_le_bytes());
            }
            Ok(())
        }
    }

    fn device() -> (Arc<HostVectorAdd>, Device) {
        let launcher = Arc::new(HostVectorAdd::default());
        let device = Device::emulated(launcher.clone());
        (launcher, device)
    }

    #[test]
    fn buffers_round_trip_and_start_unwritten_or_zero() {
        let (_, dev) = device();
        assert!(dev.is_emulated());
        assert_eq!(dev.props().arch(), "sm_90");
        let stream = dev.default_stream();
        let x = stream.upload(&[1.5f32, -2.0, 3.25]).unwrap();
        assert_eq!(stream.download(&x).unwrap(), [1.5, -2.0, 3.25]);
        let mut host = [0u16; 2];
        let h = stream.upload(&[7u16, 9]).unwrap();
        stream.copy_to_host(&h, &mut host).unwrap();
        assert_eq!(host, [7, 9]);
        let fresh: DeviceBuffer<f32> = stream.alloc(2).unwrap();
        assert!(stream.download(&fresh).unwrap().iter().all(|v| v.is_nan()));
        let zeros: DeviceBuffer<u32> = stream.alloc_zeros(3).unwrap();
        assert_eq!(stream.download(&zeros).unwrap(), [0; 3]);
        assert!(matches!(
            stream.upload(&[1u8]).unwrap().view(),
            Err(RuntimeError::Emulated(_))
        ));
        assert!(dev.free_memory().unwrap() >= 1 << 30);
    }

    #[test]
    fn launches_are_checked_then_run_by_the_launcher_in_place() {
        let (launcher, dev) = device();
        let sig = KernelSignature::from_json(VECTOR_ADD).unwrap();
        let kernel = dev.load_kernel("adds", "unused PTX", sig).unwrap();
        let stream = dev.new_stream().unwrap();
        let a = stream.upload(&[1.0f32; 300]).unwrap();
        let b = stream.upload(&[2.0f32; 300]).unwrap();
        // A pooled buffer is larger than asked for; the launcher sees exactly `len` elements.
        let mut pool = ActivationPool::new(stream.clone());
        let mut c: DeviceBuffer<f32> = pool.alloc(300).unwrap();
        assert!(c.capacity_bytes() > 1200);
        let mut args = [
            Arg::from(&a),
            Arg::from(&b),
            Arg::from(&mut c),
            Arg::from(300u32),
        ];
        let dims = kernel.launch(&stream, Grid::Auto, &mut args).unwrap();
        assert_eq!(dims.grid, [2, 1, 1]);
        assert_eq!(stream.download(&c).unwrap(), [3.0; 300]);
        let launches = launcher.launches.lock().unwrap();
        assert_eq!(
            launches[..],
            [("adds".to_string(), "vector_add".to_string(), dims)]
        );
        drop(launches);

        // The argument checks run first: a read-only output never reaches the launcher.
        let mut bad = [
            Arg::from(&a),
            Arg::from(&b),
            Arg::from(&c),
            Arg::from(300u32),
        ];
        assert!(matches!(
            kernel.launch(&stream, Grid::Auto, &mut bad),
            Err(RuntimeError::Launch(_))
        ));
        assert_eq!(launcher.launches.lock().unwrap().len(), 1);
        pool.release(c);
    }

    #[test]
    fn launcher_errors_name_the_kernel() {
        let (_, dev) = device();
        let sig = KernelSignature::from_json(VECTOR_ADD).unwrap();
        let kernel = dev.load_kernel("adds", "", sig).unwrap();
        let stream = dev.default_stream();
        let a = stream.upload(&[1.0f32; 4]).unwrap();
        let mut c = stream.alloc::<f32>(4).unwrap();
        // `n` past the buffers passes the signature checks; the launcher catches the overrun.
        let mut args = [
            Arg::from(&a),
            Arg::from(&a),
            Arg::from(&mut c),
            Arg::from(8u32),
        ];
        let err = kernel.launch(&stream, Grid::Auto, &mut args).unwrap_err();
        assert_eq!(
            err.to_string(),
            "kernel `vector_add` failed on the emulated device: index 4 past the buffers"
        );
    }

    #[test]
    fn what_needs_cuda_is_refused() {
        let (_, dev) = device();
        let stream = dev.default_stream();
        assert!(matches!(
            Blas::new(&stream),
            Err(RuntimeError::Emulated("cuBLAS"))
        ));
        assert!(matches!(
            stream.capture(|_| Ok(())),
            Err(RuntimeError::Emulated("graph capture"))
        ));
        assert!(matches!(
            dev.load_module("m", ""),
            Err(RuntimeError::Emulated(_))
        ));
        assert!(matches!(stream.cuda(), Err(RuntimeError::Emulated(_))));
        let start = stream.record().unwrap();
        let end = stream.record().unwrap();
        assert!(end.ms_since(&start).unwrap() >= 0.0);
    }
}
