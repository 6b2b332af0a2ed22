//! The runtime's error type.

use cudarc::cublas::result::CublasError;
use cudarc::driver::DriverError;
use thiserror::Error;

use crate::check::LaunchError;
use crate::signature::SignatureError;

pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;

#[derive(Debug, Error)]
pub enum RuntimeError {
    #[error(
        "no CUDA driver (libcuda.so) found: zinc needs an NVIDIA GPU and driver for this command"
    )]
    NoDriver,
    #[error("no CUDA device {ordinal}: the driver reports {count} device(s)")]
    NoDevice { ordinal: usize, count: usize },
    #[error(
        "cuBLAS (libcublas.so) not found: the cuBLAS baseline needs the CUDA toolkit's cuBLAS"
    )]
    NoCublas,
    #[error("CUDA driver call failed while {during}: {source}")]
    Driver {
        during: &'static str,
        source: DriverError,
    },
    #[error("cuBLAS call failed while {during}: {source}")]
    Cublas {
        during: &'static str,
        source: CublasError,
    },
    #[error("loading PTX module `{module}` failed: {source}{}", format_log(log))]
    ModuleLoad {
        module: String,
        source: DriverError,
        /// The JIT compiler's error log, when it gave one.
        log: String,
    },
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("PTX module `{0}` contains a NUL byte")]
    PtxNul(String),
    #[error("kernel `{kernel}` not found in PTX module `{module}`: {source}")]
    KernelNotFound {
        module: String,
        kernel: String,
        source: DriverError,
    },
    #[error("{what}: expected {expected} elements, got {got}")]
    Length {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    #[error("{what}: needs at least {need} elements, has {got}")]
    TooSmall {
        what: &'static str,
        need: usize,
        got: usize,
    },
    #[error("GEMM shape {t}x{n}x{k} exceeds cuBLAS's 32-bit dimensions")]
    GemmTooLarge { t: usize, n: usize, k: usize },
    #[error("stream capture produced an empty graph")]
    EmptyGraph,
    #[error("{0} is not available on the emulated device")]
    Emulated(&'static str),
    #[error("a buffer or kernel of one device used with a stream of another (CUDA and emulated)")]
    WrongDevice,
    #[error("kernel `{kernel}` failed on the emulated device: {source}")]
    HostLaunch {
        kernel: String,
        source: crate::emulated::HostLaunchError,
    },
    #[error(transparent)]
    Signature(#[from] SignatureError),
    #[error(transparent)]
    Launch(#[from] LaunchError),
}

fn format_log(log: &str) -> String {
    if log.is_empty() {
        String::new()
    } else {
        format!("\nJIT log:\n{log}")
    }
}

/// Attaches what the runtime was doing to a CUDA or cuBLAS error.
pub(crate) trait During<T> {
    fn during(self, what: &'static str) -> Result<T>;
}

impl<T> During<T> for std::result::Result<T, DriverError> {
    fn during(self, during: &'static str) -> Result<T> {
        self.map_err(|source| RuntimeError::Driver { during, source })
    }
}

impl<T> During<T> for std::result::Result<T, CublasError> {
    fn during(self, during: &'static str) -> Result<T> {
        self.map_err(|source| RuntimeError::Cublas { during, source })
    }
}
