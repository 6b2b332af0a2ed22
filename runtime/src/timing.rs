//! Kernel timing with CUDA events (host wall time on the emulated device).

use std::time::Instant;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::CudaEvent;

use crate::error::{During, Result, RuntimeError};
use crate::stream::{Stream, StreamKind};

/// The median of `samples` (the mean of the middle two for an even count); NaN when empty.
pub fn median(samples: &mut [f32]) -> f32 {
    if samples.is_empty() {
        return f32::NAN;
    }
    samples.sort_by(f32::total_cmp);
    let mid = samples.len() / 2;
    if samples.len() % 2 == 1 {
        samples[mid]
    } else {
        (samples[mid - 1] + samples[mid]) / 2.0
    }
}

/// Runs `work` `warmup` times, then times `iters` runs with events around each and returns the
/// median in milliseconds. `work` must queue its GPU work on `stream`. All runs are queued before
/// any timing is read, so the GPU never idles between them and host launch latency stays hidden.
pub fn time_median_ms(
    stream: &Stream,
    warmup: usize,
    iters: usize,
    mut work: impl FnMut() -> Result<()>,
) -> Result<f32> {
    for _ in 0..warmup {
        work()?;
    }
    let cuda = match &stream.kind {
        StreamKind::Cuda(cuda) => cuda,
        StreamKind::Emulated => {
            let mut samples = (0..iters)
                .map(|_| {
                    let start = Instant::now();
                    work()?;
                    Ok(start.elapsed().as_secs_f32() * 1e3)
                })
                .collect::<Result<Vec<f32>>>()?;
            return Ok(median(&mut samples));
        }
    };
    let ctx = cuda.context();
    let mut events = Vec::with_capacity(iters + 1);
    for _ in 0..=iters {
        events.push(
            ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .during("creating a timing event")?,
        );
    }
    // Back-to-back runs share events: run i lies between events i and i + 1.
    events[0].record(cuda).during("recording an event")?;
    for end in &events[1..] {
        work()?;
        end.record(cuda).during("recording an event")?;
    }
    let mut samples = events
        .windows(2)
        .map(|pair| {
            pair[0]
                .elapsed_ms(&pair[1])
                .during("reading an event timing")
        })
        .collect::<Result<Vec<f32>>>()?;
    Ok(median(&mut samples))
}

/// A point in a stream's queued work; two of them time the work between.
pub struct Event(EventKind);

enum EventKind {
    Cuda(CudaEvent),
    /// The emulated device runs work as it is queued: the time of the record is the time the
    /// work before it finished.
    Emulated(Instant),
}

impl Stream {
    /// An event recorded now, after everything queued so far.
    pub fn record(&self) -> Result<Event> {
        let stream = match &self.kind {
            StreamKind::Cuda(stream) => stream,
            StreamKind::Emulated => return Ok(Event(EventKind::Emulated(Instant::now()))),
        };
        let event = stream
            .context()
            .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .during("creating a timing event")?;
        event.record(stream).during("recording an event")?;
        Ok(Event(EventKind::Cuda(event)))
    }
}

impl Event {
    /// Milliseconds of GPU time from `start` to this event; waits for this one to complete.
    pub fn ms_since(&self, start: &Event) -> Result<f32> {
        match (&start.0, &self.0) {
            (EventKind::Cuda(start), EventKind::Cuda(end)) => {
                start.elapsed_ms(end).during("reading an event timing")
            }
            (EventKind::Emulated(start), EventKind::Emulated(end)) => {
                Ok(end.duration_since(*start).as_secs_f32() * 1e3)
            }
            _ => Err(RuntimeError::WrongDevice),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&mut [5.0]), 5.0);
        assert!(median(&mut []).is_nan());
    }
}
