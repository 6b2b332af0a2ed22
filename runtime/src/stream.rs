//! Streams: the queue every copy, launch and timing goes through.

use std::sync::Arc;

use cudarc::driver::CudaStream;

use crate::error::{During, Result, RuntimeError};

/// A CUDA stream, or the emulated device's queue (which runs everything as it is queued).
/// Cheap to clone; clones refer to the same stream.
#[derive(Clone, Debug)]
pub struct Stream {
    pub(crate) kind: StreamKind,
}

#[derive(Clone, Debug)]
pub(crate) enum StreamKind {
    Cuda(Arc<CudaStream>),
    Emulated,
}

impl Stream {
    pub(crate) fn new(inner: Arc<CudaStream>) -> Self {
        Stream {
            kind: StreamKind::Cuda(inner),
        }
    }

    pub(crate) fn emulated() -> Self {
        Stream {
            kind: StreamKind::Emulated,
        }
    }

    /// Blocks until all work queued on the stream has finished.
    pub fn synchronize(&self) -> Result<()> {
        match &self.kind {
            StreamKind::Cuda(stream) => stream.synchronize().during("synchronizing a stream"),
            StreamKind::Emulated => Ok(()),
        }
    }

    /// The underlying cudarc stream, for what this crate does not wrap; `Emulated` on the
    /// emulated device.
    pub fn cuda(&self) -> Result<&Arc<CudaStream>> {
        match &self.kind {
            StreamKind::Cuda(stream) => Ok(stream),
            StreamKind::Emulated => Err(RuntimeError::Emulated("a cudarc stream")),
        }
    }
}
