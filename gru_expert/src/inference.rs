//! The two user-space threads of scx_gru: the ring-buffer poller and the
//! inference loop that writes predictions into `pid_to_cpu`.
//!
//! Nothing here can block scheduling: the BPF side never waits for user space
//! (a missing or stale prediction falls back), the poller never waits for the
//! inference thread (a full queue drops the event and counts it).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use libbpf_rs::{MapCore, MapFlags, MapHandle, RingBufferBuilder};
use log::warn;

use crate::features::{TaskEvent, TaskWindows};
use crate::model::GruModel;
use crate::stats::UserCounters;

/// CLOCK_MONOTONIC in ns: the clock of bpf_ktime_get_ns().
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Longest time an event waits in the ring buffer before it is read.
pub const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// Polls the `events` ring buffer until `shutdown`, sending decoded events to
/// the inference thread without ever waiting for it.
pub fn poll_ring_buffer(
    events: MapHandle,
    queue: SyncSender<TaskEvent>,
    counters: Arc<UserCounters>,
    shutdown: Arc<AtomicBool>,
) -> Result<()> {
    let mut decode_errors = 0u64;
    let mut builder = RingBufferBuilder::new();
    builder
        .add(&events, move |data: &[u8]| {
            match TaskEvent::from_bytes(data) {
                Ok(event) => {
                    counters.events_received.fetch_add(1, Ordering::Relaxed);
                    match queue.try_send(event) {
                        Ok(()) => {}
                        Err(TrySendError::Full(_)) => {
                            counters
                                .events_dropped_queue
                                .fetch_add(1, Ordering::Relaxed);
                        }
                        Err(TrySendError::Disconnected(_)) => return -1,
                    }
                }
                Err(e) => {
                    decode_errors += 1;
                    if decode_errors == 1 {
                        warn!("undecodable ring buffer record: {e:#}");
                    }
                }
            }
            0
        })
        .context("register the events ring buffer")?;
    let ring = builder.build().context("build the ring buffer poller")?;
    while !shutdown.load(Ordering::Relaxed) {
        // The BPF side wakes us only for a batch of events; whatever is
        // waiting is drained at least every POLL_INTERVAL.
        let polled = ring.poll(POLL_INTERVAL).and_then(|()| ring.consume());
        if let Err(e) = polled {
            // EINTR (a signal) is expected at shutdown; the callback returning
            // -1 means the inference thread is gone.
            if shutdown.load(Ordering::Relaxed) {
                break;
            }
            return Err(e).context("poll the events ring buffer");
        }
    }
    Ok(())
}

/// Settings of the inference loop.
#[derive(Debug, Clone, Copy)]
pub struct InferenceConfig {
    /// Do not predict again for a task whose prediction is younger than this.
    pub repredict_ns: u64,
    /// Forget tasks without events for this long.
    pub forget_ns: u64,
    /// Inference time allowed per second of wall time (ns): beyond it,
    /// inferences are skipped until the next second, so the model never takes
    /// more than this share of one CPU from the workload.
    pub budget_ns_per_s: u64,
}

/// Time spent on inference in the current one-second period.
#[derive(Debug)]
pub struct InferenceBudget {
    per_period_ns: u64,
    period_start_ns: u64,
    spent_ns: u64,
}

impl InferenceBudget {
    /// A budget of `per_period_ns` per second, starting at `now_ns`.
    pub fn new(per_period_ns: u64, now_ns: u64) -> Self {
        Self {
            per_period_ns,
            period_start_ns: now_ns,
            spent_ns: 0,
        }
    }

    /// True if an inference may run at `now_ns`.
    pub fn allows(&mut self, now_ns: u64) -> bool {
        if now_ns.saturating_sub(self.period_start_ns) >= 1_000_000_000 {
            self.period_start_ns = now_ns;
            self.spent_ns = 0;
        }
        self.spent_ns < self.per_period_ns
    }

    /// Charges one inference.
    pub fn charge(&mut self, ns: u64) {
        self.spent_ns += ns;
    }
}

/// Consumes events, keeps per-task windows, runs the GRU on every task whose
/// window is full and changed, and writes the predicted CPU with a timestamp
/// into `pid_to_cpu`.
pub fn run_inference(
    mut model: GruModel,
    queue: Receiver<TaskEvent>,
    pid_to_cpu: MapHandle,
    counters: Arc<UserCounters>,
    shutdown: Arc<AtomicBool>,
    config: InferenceConfig,
) -> Result<()> {
    let mut windows = TaskWindows::new(model.meta().window);
    let mut last_prediction_ns: HashMap<u32, u64> = HashMap::new();
    let mut dirty: HashSet<u32> = HashSet::new();
    let mut input = vec![0.0f32; model.input_len()];
    let mut last_eviction = monotonic_ns();
    let mut model_seq = 0u32;
    let mut logged_errors = 0u32;
    let scaling = model.scaling().clone();
    let mut budget = InferenceBudget::new(config.budget_ns_per_s, monotonic_ns());

    while !shutdown.load(Ordering::Relaxed) {
        let first = match queue.recv_timeout(Duration::from_millis(100)) {
            Ok(event) => event,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        // Take what is queued now, bounded so predictions keep flowing.
        for event in std::iter::once(first).chain(queue.try_iter().take(4096)) {
            if windows.push(event.pid, event.stamp_ns, scaling.features(&event)) {
                dirty.insert(event.pid);
            }
        }
        for pid in dirty.drain() {
            let now = monotonic_ns();
            if let Some(last) = last_prediction_ns.get(&pid) {
                if now.saturating_sub(*last) < config.repredict_ns {
                    continue;
                }
            }
            if !windows.fill_tensor(pid, &mut input) {
                continue;
            }
            if !budget.allows(now) {
                counters
                    .inferences_over_budget
                    .fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let started = Instant::now();
            let result = model.predict(&input);
            let elapsed = started.elapsed().as_nanos() as u64;
            budget.charge(elapsed);
            counters.inferences.fetch_add(1, Ordering::Relaxed);
            let cpu = match result {
                Ok(cpu) => cpu,
                Err(e) => {
                    counters.inference_errors.fetch_add(1, Ordering::Relaxed);
                    if logged_errors < 5 {
                        logged_errors += 1;
                        warn!("inference failed: {e:#}");
                    }
                    continue;
                }
            };
            counters
                .latency
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .record(elapsed);
            model_seq = model_seq.wrapping_add(1);
            let stamp = monotonic_ns();
            let value = prediction_bytes(stamp, cpu as i32, model_seq);
            match pid_to_cpu.update(&pid.to_ne_bytes(), &value, MapFlags::ANY) {
                Ok(()) => {
                    counters.predictions_written.fetch_add(1, Ordering::Relaxed);
                    last_prediction_ns.insert(pid, stamp);
                }
                Err(e) => {
                    counters.map_update_errors.fetch_add(1, Ordering::Relaxed);
                    if logged_errors < 5 {
                        logged_errors += 1;
                        warn!("pid_to_cpu update failed: {e}");
                    }
                }
            }
        }
        let now = monotonic_ns();
        if now.saturating_sub(last_eviction) > config.forget_ns {
            let oldest = now.saturating_sub(config.forget_ns);
            windows.evict_older_than(oldest);
            last_prediction_ns.retain(|_, t| *t >= oldest);
            last_eviction = now;
        }
    }
    Ok(())
}

/// The bytes of a `struct gru_prediction`.
pub fn prediction_bytes(stamp_ns: u64, cpu: i32, model_seq: u32) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&stamp_ns.to_ne_bytes());
    out[8..12].copy_from_slice(&cpu.to_ne_bytes());
    out[12..].copy_from_slice(&model_seq.to_ne_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf_intf;

    #[test]
    fn prediction_layout_matches_the_c_struct() {
        assert_eq!(std::mem::size_of::<bpf_intf::gru_prediction>(), 16);
        let bytes = prediction_bytes(0x0102_0304_0506_0708, -1, 9);
        // SAFETY: 16 bytes, plain old data.
        let p: bpf_intf::gru_prediction =
            unsafe { std::ptr::read_unaligned(bytes.as_ptr() as *const bpf_intf::gru_prediction) };
        assert_eq!(
            (p.stamp_ns, p.cpu, p.model_seq),
            (0x0102_0304_0506_0708, -1, 9)
        );
    }

    #[test]
    fn budget_refills_every_second() {
        let mut b = InferenceBudget::new(100, 0);
        assert!(b.allows(10));
        b.charge(60);
        assert!(b.allows(20));
        b.charge(60);
        assert!(!b.allows(999_999_999));
        assert!(b.allows(1_000_000_000));
    }

    #[test]
    fn monotonic_clock_advances() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(b >= a && a > 0);
    }
}
