//! Streams: the queue every copy, launch and timing goes through.

use std::sync::Arc;

use cudarc::driver::CudaStream;

use crate::error::{During, Result};

/// A CUDA stream. Cheap to clone; clones refer to the same stream.
#[derive(Clone, Debug)]
pub struct Stream {
    pub(crate) inner: Arc<CudaStream>,
}

impl Stream {
    pub(crate) fn new(inner: Arc<CudaStream>) -> Self {
        Stream { inner }
    }

    /// Blocks until all work queued on the stream has finished.
    pub fn synchronize(&self) -> Result<()> {
        self.inner.synchronize().during("synchronizing a stream")
    }

    /// The underlying cudarc stream, for what this crate does not wrap.
    pub fn cuda(&self) -> &Arc<CudaStream> {
        &self.inner
    }
}
