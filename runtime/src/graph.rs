//! CUDA graphs: record a stream's work once, replay it with one launch.

use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::CudaGraph;

use crate::error::{During, Result, RuntimeError};
use crate::stream::Stream;

/// An instantiated graph, replayed on the stream it was captured from.
pub struct Graph {
    inner: CudaGraph,
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph").finish_non_exhaustive()
    }
}

impl Stream {
    /// Captures the work `record` queues on this stream into a graph and instantiates it.
    ///
    /// The stream must not be the default stream (which cannot be captured), and buffers used
    /// inside should be allocated after [`crate::Device::disable_event_tracking`] so that no
    /// launch waits on an event recorded outside the capture. Capture is thread-local: other
    /// threads may keep using CUDA meanwhile. Refused with `Emulated` on the emulated device.
    pub fn capture(&self, record: impl FnOnce(&Stream) -> Result<()>) -> Result<Graph> {
        let stream = self
            .cuda()
            .map_err(|_| RuntimeError::Emulated("graph capture"))?;
        stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .during("beginning stream capture")?;
        let recorded = record(self);
        // End the capture even when recording failed, so the stream stays usable.
        let ended = stream.end_capture(CUgraphInstantiate_flags(0));
        recorded?;
        let inner = ended
            .during("ending stream capture")?
            .ok_or(RuntimeError::EmptyGraph)?;
        Ok(Graph { inner })
    }
}

impl Graph {
    /// Queues one replay of the graph on its stream.
    pub fn launch(&self) -> Result<()> {
        self.inner.launch().during("launching a graph")
    }

    /// Uploads the graph to the device ahead of its first launch.
    pub fn upload(&self) -> Result<()> {
        self.inner.upload().during("uploading a graph")
    }
}
