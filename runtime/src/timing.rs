//! Kernel timing with CUDA events.

use cudarc::driver::sys::CUevent_flags;

use crate::error::{During, Result};
use crate::stream::Stream;

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
    let ctx = stream.inner.context();
    let mut events = Vec::with_capacity(iters + 1);
    for _ in 0..=iters {
        events.push(
            ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .during("creating a timing event")?,
        );
    }
    // Back-to-back runs share events: run i lies between events i and i + 1.
    events[0]
        .record(&stream.inner)
        .during("recording an event")?;
    for end in &events[1..] {
        work()?;
        end.record(&stream.inner).during("recording an event")?;
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
pub struct Event(cudarc::driver::CudaEvent);

impl Stream {
    /// An event recorded now, after everything queued so far.
    pub fn record(&self) -> Result<Event> {
        let event = self
            .inner
            .context()
            .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .during("creating a timing event")?;
        event.record(&self.inner).during("recording an event")?;
        Ok(Event(event))
    }
}

impl Event {
    /// Milliseconds of GPU time from `start` to this event; waits for this one to complete.
    pub fn ms_since(&self, start: &Event) -> Result<f32> {
        start
            .0
            .elapsed_ms(&self.0)
            .during("reading an event timing")
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
