//! cuBLAS baseline GEMM, the yardstick for zinc's own GEMM kernels.

use cudarc::cublas::sys::{cublasComputeType_t, cublasGemmAlgo_t, cublasOperation_t, cudaDataType};
use cudarc::cublas::{result as cublas, CudaBlas};
use cudarc::driver::{DevicePtr, DevicePtrMut};
use half::f16;

use crate::buffer::DeviceBuffer;
use crate::device::driver_present;
use crate::dtype::DeviceElem;
use crate::error::{During, Result, RuntimeError};
use crate::stream::Stream;

/// Output element types of [`Blas::gemm_f16`].
pub trait GemmOutput: DeviceElem {
    #[doc(hidden)]
    const CUDA_TYPE: cudaDataType;
}

impl GemmOutput for f16 {
    const CUDA_TYPE: cudaDataType = cudaDataType::CUDA_R_16F;
}

impl GemmOutput for f32 {
    const CUDA_TYPE: cudaDataType = cudaDataType::CUDA_R_32F;
}

/// A cuBLAS handle bound to one stream.
#[derive(Debug)]
pub struct Blas {
    inner: CudaBlas,
    stream: Stream,
}

impl Blas {
    /// `Emulated` for a stream of the emulated device.
    pub fn new(stream: &Stream) -> Result<Blas> {
        let cuda = stream
            .cuda()
            .map_err(|_| RuntimeError::Emulated("cuBLAS"))?;
        if !driver_present() {
            return Err(RuntimeError::NoDriver);
        }
        // SAFETY: only tries to open libcublas; cudarc panics on first use without it.
        if !unsafe { cudarc::cublas::sys::is_culib_present() } {
            return Err(RuntimeError::NoCublas);
        }
        let inner = CudaBlas::new(cuda.clone()).during("creating a cuBLAS handle")?;
        Ok(Blas {
            inner,
            stream: stream.clone(),
        })
    }

    /// `Y[T][N] = X[T][K] · W[N][K]^T` with f16 inputs and f32 accumulation, all row-major:
    /// zinc's linear-layer convention, where each weight row holds one output's K inputs.
    ///
    /// cuBLAS is column-major, and a row-major `R x C` matrix is a column-major `C x R` one, so
    /// this computes `Y^T (N x T) = W (N x K, from the K x N column-major view, transposed) ·
    /// X^T (K x T)`: `gemm(op_a = T, op_b = N, m = N, n = T, k = K, A = W, B = X)`.
    pub fn gemm_f16<Y: GemmOutput>(
        &self,
        t: usize,
        n: usize,
        k: usize,
        x: &DeviceBuffer<f16>,
        w: &DeviceBuffer<f16>,
        y: &mut DeviceBuffer<Y>,
    ) -> Result<()> {
        at_least("gemm_f16 input X[T][K]", t * k, x.len())?;
        at_least("gemm_f16 weight W[N][K]", n * k, w.len())?;
        at_least("gemm_f16 output Y[T][N]", t * n, y.len())?;
        let dim = |v: usize| i32::try_from(v).map_err(|_| RuntimeError::GemmTooLarge { t, n, k });
        let (m_, n_, k_) = (dim(n)?, dim(t)?, dim(k)?);
        let (alpha, beta) = (1.0f32, 0.0f32);
        let stream = self.stream.cuda()?;
        let (w_view, x_view, mut y_view) = (w.view()?, x.view()?, y.view_mut()?);
        let (w_ptr, _w_sync) = w_view.device_ptr(stream);
        let (x_ptr, _x_sync) = x_view.device_ptr(stream);
        let (y_ptr, _y_sync) = y_view.device_ptr_mut(stream);
        // SAFETY: the pointers address buffers at least as large as the shapes need (checked
        // above), alive until the `_sync` guards record their use, and alpha/beta are f32 as
        // CUBLAS_COMPUTE_32F requires.
        unsafe {
            cublas::gemm_ex(
                *self.inner.handle(),
                cublasOperation_t::CUBLAS_OP_T,
                cublasOperation_t::CUBLAS_OP_N,
                m_,
                n_,
                k_,
                (&alpha as *const f32).cast(),
                w_ptr as *const _,
                cudaDataType::CUDA_R_16F,
                k_,
                x_ptr as *const _,
                cudaDataType::CUDA_R_16F,
                k_,
                (&beta as *const f32).cast(),
                y_ptr as *mut _,
                Y::CUDA_TYPE,
                m_,
                cublasComputeType_t::CUBLAS_COMPUTE_32F,
                cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .during("running cublasGemmEx")
    }
}

fn at_least(what: &'static str, need: usize, got: usize) -> Result<()> {
    if got >= need {
        Ok(())
    } else {
        Err(RuntimeError::TooSmall { what, need, got })
    }
}
