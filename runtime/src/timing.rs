//! Kernel timing with CUDA events (host wall time on the emulated device).

use std::time::{Duration, Instant};

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::Ptx;

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
/// median in milliseconds. `work` must queue its GPU work on `stream`.
///
/// The GPU must never wait for the host between runs: a short kernel finishes before the host
/// has queued the next launch and its event (5-7 us), and events around host-bound runs time
/// the host (on an H200 every kernel of up to 64 rows of 4096 measured 6.5-7.8 us so:
/// docs/PERF.md). So each batch of runs is queued behind a kernel that keeps the stream busy
/// for longer than queueing the batch takes ([`SPIN_PER_RUN`] a run), and batches stay within
/// what a stream queues without blocking.
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
    let spin = ctx
        .load_module(Ptx::from_src(SPIN_PTX))
        .and_then(|module| module.load_function("zinc_spin"))
        .during("loading the timing spin kernel")?;
    let mut batches = Vec::new();
    for first in (0..iters).step_by(BATCH_RUNS) {
        let runs = BATCH_RUNS.min(iters - first);
        let ns = (runs as u64) * SPIN_PER_RUN.as_nanos() as u64;
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (1, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: zinc_spin takes one u64 and touches no memory.
        unsafe { cuda.launch_builder(&spin).arg(&ns).launch(cfg) }
            .during("launching the timing spin kernel")?;
        let mut events = Vec::with_capacity(runs + 1);
        for _ in 0..=runs {
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
        batches.push(events);
    }
    let mut samples = Vec::with_capacity(iters);
    for events in &batches {
        for pair in events.windows(2) {
            samples.push(
                pair[0]
                    .elapsed_ms(&pair[1])
                    .during("reading an event timing")?,
            );
        }
    }
    Ok(median(&mut samples))
}

/// Runs queued behind one spin: with their events, well inside the driver's queue of pending
/// work (about a thousand entries), past which the host would wait for the GPU after all.
const BATCH_RUNS: usize = 128;

/// How long the spin holds the stream per run queued behind it: a few times the host's cost of
/// queueing a launch and an event.
const SPIN_PER_RUN: Duration = Duration::from_micros(25);

/// `zinc_spin(ns)`: one thread that returns once `ns` nanoseconds have passed on the GPU's global
/// timer (sm_70 and later: nanosleep).
const SPIN_PTX: &str = r#"
.version 7.0
.target sm_70
.address_size 64

.visible .entry zinc_spin(.param .u64 ns)
{
    .reg .pred %p;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [ns];
    mov.u64 %rd2, %globaltimer;
SPIN:
    nanosleep.u32 1000;
    mov.u64 %rd3, %globaltimer;
    sub.u64 %rd4, %rd3, %rd2;
    setp.lt.u64 %p, %rd4, %rd1;
    @%p bra SPIN;
    ret;
}
"#;

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
    use super::{median, SPIN_PTX};
    use std::path::Path;
    use std::process::Command;

    /// The driver JIT-compiles the spin kernel for whatever GPU it finds: ptxas (which
    /// scripts/test.sh installs) must take it for every arch the engine targets.
    #[test]
    fn spin_ptx_assembles() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let ptxas = root.join(".tools/cuda/bin/ptxas");
        assert!(ptxas.exists(), "no ptxas: run scripts/setup.sh --deps");
        let file = std::env::temp_dir().join(format!("zinc-spin-{}.ptx", std::process::id()));
        std::fs::write(&file, SPIN_PTX).unwrap();
        for arch in ["sm_89", "sm_90", "sm_120"] {
            let out = Command::new(&ptxas)
                .arg(format!("-arch={arch}"))
                .args(["-o", "/dev/null"])
                .arg(&file)
                .output()
                .expect("running ptxas");
            let log = String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.success(),
                "ptxas rejected the spin for {arch}:\n{log}"
            );
        }
        std::fs::remove_file(&file).ok();
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&mut [5.0]), 5.0);
        assert!(median(&mut []).is_nan());
    }
}
