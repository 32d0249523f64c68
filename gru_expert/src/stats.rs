//! Statistics of scx_gru: counters of the BPF program, of the inference
//! thread, and the snapshot written to the stats file (JSON, schema
//! `asa.gru-stats` v1; see README.md).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// Schema name of the stats file.
pub const STATS_SCHEMA: &str = "asa.gru-stats";
/// Schema version of the stats file.
pub const STATS_VERSION: u32 = 1;

/// Counters kept by the BPF scheduler (its .bss), copied at snapshot time.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BpfCounters {
    /// Events written to the ring buffer.
    pub nr_events: u64,
    /// Events lost because the ring buffer was full.
    pub nr_ringbuf_drops: u64,
    /// Events not sent: the task's prediction was younger than the refresh age.
    #[serde(default)]
    pub nr_events_fresh: u64,
    /// Events not sent: the task had sent one within the event gap.
    #[serde(default)]
    pub nr_events_gap: u64,
    /// Ring-buffer submits that woke the poller (a batch waiting or the oldest event old enough).
    #[serde(default)]
    pub nr_ringbuf_wakeups: u64,
    /// Placements on the predicted CPU.
    pub nr_pred_applied: u64,
    /// ... of which decided in select_cpu.
    pub nr_pred_applied_select: u64,
    /// ... of which put the task on another CPU than its previous one (a prediction that changed
    /// the placement; keeping an idle previous CPU is what the fallback does too).
    #[serde(default)]
    pub nr_pred_moved: u64,
    /// Fallback placements: no prediction for the task.
    pub nr_pred_missing: u64,
    /// Fallback placements: prediction older than the TTL.
    pub nr_pred_stale: u64,
    /// Fallback placements: predicted CPU not allowed.
    pub nr_pred_disallowed: u64,
    /// Fallback placements: predicted CPU busy.
    pub nr_pred_busy: u64,
    /// Fallback placements: another CPU predicted, the idle previous CPU kept (select_cpu).
    #[serde(default)]
    pub nr_pred_prev_idle: u64,
    /// Fallback placements: a usable prediction not followed (`--observe-only`).
    #[serde(default)]
    pub nr_pred_ignored: u64,
    /// Fallback placements while the follow gate paused the model (as redundant, or as busy
    /// unless `--busy-pause-keeps-events`): no prediction looked up, no event sent.
    #[serde(default)]
    pub nr_pred_paused: u64,
    /// Fallback placements on an idle CPU found by the kernel (select_cpu).
    pub nr_direct_idle: u64,
    /// Fallback placements in a deadline-ordered DSQ: the shared one or a wake queue.
    pub nr_shared_enqueued: u64,
    /// Single-CPU tasks placed on their CPU (neither prediction nor fallback).
    pub nr_pinned_local: u64,
    /// scx_gru's own threads placed on their CPU (neither prediction nor fallback).
    pub nr_usersched_local: u64,
    /// scx_gru's own threads out of slice, queued in the shared DSQ by their vtime (unless
    /// `--usersched-always-first`).
    #[serde(default)]
    pub nr_usersched_queued: u64,
    /// Queued wake-ups (a wake queue or the shared DSQ) that preempted their previous CPU (no
    /// CPU was idle and the running task was ahead of the wakee by more than
    /// `--preempt-margin-us`).
    #[serde(default)]
    pub nr_wakeup_preempts: u64,
    /// Wake-ups of single-CPU tasks (per-CPU kernel threads) that preempted the task running
    /// on their CPU (`--no-pinned-preempt` turns this off).
    #[serde(default)]
    pub nr_pinned_preempts: u64,
    /// Queued wake-ups that would have preempted a CPU hog on their previous CPU but for
    /// `--preempt-min-run-us` and armed that CPU's timer to preempt the hog once it has run
    /// `--deferred-preempt-us` (0 turns this off).
    #[serde(default)]
    pub nr_deferred_preempts: u64,
    /// Deferred-preemption timers that found the same task running and tasks waiting in the
    /// shared DSQ, the CPU's wake queue or (with `--kthread-preempt-us`) its local DSQ, and
    /// preempted it.
    #[serde(default)]
    pub nr_timer_preempts: u64,
    /// Wake-ups of kernel threads that preempted a CPU hog before `--preempt-min-run-us`, at
    /// once or by arming the CPU's timer (`--kthread-preempt-us`; the timer's preemptions are
    /// in `nr_timer_preempts`).
    #[serde(default)]
    pub nr_kthread_preempts: u64,
    /// Placements given a slice shorter than `--slice-us` because tasks were waiting in the
    /// shared DSQ (`--slice-min-us`).
    #[serde(default)]
    pub nr_slices_shortened: u64,
    /// Shared-DSQ inserts queued behind their vtime by the vtime they used since they last
    /// woke up (`--burst-cap-ms`).
    #[serde(default)]
    pub nr_burst_keyed: u64,
    /// Wake-ups that select_cpu left to enqueue at once because no CPU was idle (no
    /// prediction lookup, no idle-CPU scan: nothing could be placed).
    #[serde(default)]
    pub nr_select_no_idle: u64,
    /// Shared-DSQ tasks a CPU took ahead of the queue's head because they last ran on it
    /// (`--dispatch-affinity-us`).
    #[serde(default)]
    pub nr_dispatch_affine: u64,
    /// Dispatches that found nothing else to run and gave the running task, out of slice, a
    /// new slice of scx_gru's (the kernel would give it 20 ms).
    #[serde(default)]
    pub nr_prev_kept: u64,
    /// Wake-ups that found no idle CPU, queued in their CPU's wake queue (counted in
    /// `nr_shared_enqueued` too; `--no-wake-queues` turns the queues off).
    #[serde(default)]
    pub nr_wake_queued: u64,
    /// Of those, taken by another CPU that had nothing else to run.
    #[serde(default)]
    pub nr_wake_stolen: u64,
    /// Of those, queued in another CPU's wake queue, shorter than their own CPU's by at least
    /// `--wake-balance`, with a CPU hog running there.
    #[serde(default)]
    pub nr_wake_balanced: u64,
    /// Tasks waiting in the shared DSQ at the snapshot (a gauge; counted from the insert until
    /// the task runs, so never fewer than the truth).
    #[serde(default)]
    pub nr_hint_shared: u64,
    /// Tasks waiting in the wake queues at the snapshot (a gauge, counted the same way).
    #[serde(default)]
    pub nr_hint_wake: u64,
    /// The same per CPU's wake queue, index = CPU (kept, and shown, with `--wake-balance`
    /// only; empty otherwise).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nr_hint_wake_by_cpu: Vec<u64>,
    /// Queue waits (runnable → running, the kernel's `run_delay`) of tasks with short bursts
    /// (under 1 ms before they last slept and in progress: I/O threads).
    #[serde(default)]
    pub nr_waits_short: u64,
    /// Their total time, ns.
    #[serde(default)]
    pub wait_ns_short: u64,
    /// Queue waits of every other task (bursts of 1 ms or more: CPU-bound tasks).
    #[serde(default)]
    pub nr_waits_long: u64,
    /// Their total time, ns.
    #[serde(default)]
    pub wait_ns_long: u64,
}

impl BpfCounters {
    /// The counters of the BPF scheduler's .bss; `wake_cpus` is how many CPUs' wake-queue
    /// counts to copy (0 without `--wake-balance`, which alone keeps them).
    pub fn from_bss(bss: &crate::bpf_skel::types::bss, wake_cpus: usize) -> Self {
        Self {
            nr_events: bss.nr_events,
            nr_ringbuf_drops: bss.nr_ringbuf_drops,
            nr_events_fresh: bss.nr_events_fresh,
            nr_events_gap: bss.nr_events_gap,
            nr_ringbuf_wakeups: bss.nr_ringbuf_wakeups,
            nr_pred_applied: bss.nr_pred_applied,
            nr_pred_applied_select: bss.nr_pred_applied_select,
            nr_pred_moved: bss.nr_pred_moved,
            nr_pred_missing: bss.nr_pred_missing,
            nr_pred_stale: bss.nr_pred_stale,
            nr_pred_disallowed: bss.nr_pred_disallowed,
            nr_pred_busy: bss.nr_pred_busy,
            nr_pred_prev_idle: bss.nr_pred_prev_idle,
            nr_pred_ignored: bss.nr_pred_ignored,
            nr_pred_paused: bss.nr_pred_paused,
            nr_direct_idle: bss.nr_direct_idle,
            nr_shared_enqueued: bss.nr_shared_enqueued,
            nr_pinned_local: bss.nr_pinned_local,
            nr_usersched_local: bss.nr_usersched_local,
            nr_usersched_queued: bss.nr_usersched_queued,
            nr_wakeup_preempts: bss.nr_wakeup_preempts,
            nr_pinned_preempts: bss.nr_pinned_preempts,
            nr_deferred_preempts: bss.nr_deferred_preempts,
            nr_timer_preempts: bss.nr_timer_preempts,
            nr_kthread_preempts: bss.nr_kthread_preempts,
            nr_slices_shortened: bss.nr_slices_shortened,
            nr_burst_keyed: bss.nr_burst_keyed,
            nr_select_no_idle: bss.nr_select_no_idle,
            nr_dispatch_affine: bss.nr_dispatch_affine,
            nr_prev_kept: bss.nr_prev_kept,
            nr_wake_queued: bss.nr_wake_queued,
            nr_wake_stolen: bss.nr_wake_stolen,
            nr_wake_balanced: bss.nr_wake_balanced,
            nr_hint_shared: bss.nr_hint_shared,
            nr_hint_wake: bss.nr_hint_wake,
            nr_hint_wake_by_cpu: bss.nr_hint_wake_cpu[..wake_cpus.min(bss.nr_hint_wake_cpu.len())]
                .to_vec(),
            nr_waits_short: bss.nr_waits_short,
            wait_ns_short: bss.wait_ns_short,
            nr_waits_long: bss.nr_waits_long,
            wait_ns_long: bss.wait_ns_long,
        }
    }

    /// All placements that did not follow a prediction.
    pub fn fallbacks(&self) -> u64 {
        self.nr_pred_missing
            + self.nr_pred_stale
            + self.nr_pred_disallowed
            + self.nr_pred_busy
            + self.nr_pred_prev_idle
            + self.nr_pred_ignored
            + self.nr_pred_paused
    }

    /// Mean queue wait in µs of short-burst tasks (`short`) or of the others, if any waited.
    pub fn mean_wait_us(&self, short: bool) -> Option<f64> {
        let (n, ns) = if short {
            (self.nr_waits_short, self.wait_ns_short)
        } else {
            (self.nr_waits_long, self.wait_ns_long)
        };
        (n > 0).then(|| ns as f64 / n as f64 / 1e3)
    }
}

/// Keeps the last `capacity` latencies (ns) for percentiles.
#[derive(Debug)]
pub struct LatencyWindow {
    samples: Vec<u64>,
    next: usize,
    capacity: usize,
    total: u64,
}

impl LatencyWindow {
    /// A window of `capacity` samples.
    pub fn new(capacity: usize) -> Self {
        Self {
            samples: Vec::with_capacity(capacity),
            next: 0,
            capacity,
            total: 0,
        }
    }

    /// Adds one sample.
    pub fn record(&mut self, ns: u64) {
        if self.samples.len() < self.capacity {
            self.samples.push(ns);
        } else {
            self.samples[self.next] = ns;
        }
        self.next = (self.next + 1) % self.capacity;
        self.total += 1;
    }

    /// Samples recorded since the start.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The `q` quantile (0..=1, nearest rank) of the kept samples, in ns.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.samples.is_empty() {
            return None;
        }
        let mut sorted = self.samples.clone();
        sorted.sort_unstable();
        let rank = (q * sorted.len() as f64).ceil() as usize;
        Some(sorted[rank.clamp(1, sorted.len()) - 1])
    }
}

/// Counters of the user-space side, shared between threads.
#[derive(Debug)]
pub struct UserCounters {
    /// Events decoded from the ring buffer.
    pub events_received: AtomicU64,
    /// Events dropped because the inference lagged (kept for the schema: the poller and the
    /// inference are one thread since the events are handed over in place, so it stays 0).
    pub events_dropped_queue: AtomicU64,
    /// Model runs (each predicts a batch of tasks).
    pub inferences: AtomicU64,
    /// Tasks predicted by successful model runs.
    pub tasks_predicted: AtomicU64,
    /// Model runs that failed.
    pub inference_errors: AtomicU64,
    /// Task predictions skipped because the CPU budget of the second was spent.
    pub inferences_over_budget: AtomicU64,
    /// Times inference paused because its predictions' CPUs were busy (the follow gate).
    pub inference_pauses: AtomicU64,
    /// Times inference paused because its followed predictions kept tasks where the fallback
    /// keeps them (the follow gate).
    pub inference_pauses_redundant: AtomicU64,
    /// Task predictions skipped while inference was paused: tasks whose windows filled during
    /// a pause that kept the events (`--busy-pause-keeps-events`); a pause that stops them
    /// forgets the windows, so then hardly any wait (the placements count in `nr_pred_paused`).
    pub inferences_paused: AtomicU64,
    /// Predictions written into pid_to_cpu.
    pub predictions_written: AtomicU64,
    /// pid_to_cpu updates that failed.
    pub map_update_errors: AtomicU64,
    /// Latencies of model runs.
    pub latency: Mutex<LatencyWindow>,
}

impl Default for UserCounters {
    fn default() -> Self {
        Self {
            events_received: AtomicU64::new(0),
            events_dropped_queue: AtomicU64::new(0),
            inferences: AtomicU64::new(0),
            tasks_predicted: AtomicU64::new(0),
            inference_errors: AtomicU64::new(0),
            inferences_over_budget: AtomicU64::new(0),
            inference_pauses: AtomicU64::new(0),
            inference_pauses_redundant: AtomicU64::new(0),
            inferences_paused: AtomicU64::new(0),
            predictions_written: AtomicU64::new(0),
            map_update_errors: AtomicU64::new(0),
            latency: Mutex::new(LatencyWindow::new(8192)),
        }
    }
}

/// User-space counters at snapshot time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UserSnapshot {
    /// Events decoded from the ring buffer.
    pub events_received: u64,
    /// Events dropped because the inference thread lagged.
    pub events_dropped_queue: u64,
    /// Model runs (each predicts a batch of tasks).
    pub inferences: u64,
    /// Tasks predicted by successful model runs (absent in stats written before batching:
    /// one task per run then).
    #[serde(default)]
    pub tasks_predicted: u64,
    /// Model runs that failed.
    pub inference_errors: u64,
    /// Task predictions skipped because the CPU budget of the second was spent.
    pub inferences_over_budget: u64,
    /// Times inference paused because its predictions' CPUs were busy (the follow gate;
    /// absent in stats written before it).
    #[serde(default)]
    pub inference_pauses: u64,
    /// Times inference paused because its followed predictions kept tasks where the fallback
    /// keeps them (absent in stats written before it).
    #[serde(default)]
    pub inference_pauses_redundant: u64,
    /// Task predictions skipped while inference was paused (see [`UserCounters`]).
    #[serde(default)]
    pub inferences_paused: u64,
    /// Predictions written into pid_to_cpu.
    pub predictions_written: u64,
    /// pid_to_cpu updates that failed.
    pub map_update_errors: u64,
    /// Median latency of the last 8192 model runs (µs; one run predicts a batch).
    pub inference_us_p50: Option<f64>,
    /// 99th percentile of the same (µs).
    pub inference_us_p99: Option<f64>,
}

impl UserCounters {
    /// Copies the counters.
    pub fn snapshot(&self) -> UserSnapshot {
        let latency = self.latency.lock().unwrap_or_else(|e| e.into_inner());
        UserSnapshot {
            events_received: self.events_received.load(Ordering::Relaxed),
            events_dropped_queue: self.events_dropped_queue.load(Ordering::Relaxed),
            inferences: self.inferences.load(Ordering::Relaxed),
            tasks_predicted: self.tasks_predicted.load(Ordering::Relaxed),
            inference_errors: self.inference_errors.load(Ordering::Relaxed),
            inferences_over_budget: self.inferences_over_budget.load(Ordering::Relaxed),
            inference_pauses: self.inference_pauses.load(Ordering::Relaxed),
            inference_pauses_redundant: self.inference_pauses_redundant.load(Ordering::Relaxed),
            inferences_paused: self.inferences_paused.load(Ordering::Relaxed),
            predictions_written: self.predictions_written.load(Ordering::Relaxed),
            map_update_errors: self.map_update_errors.load(Ordering::Relaxed),
            inference_us_p50: latency.quantile(0.50).map(|ns| ns as f64 / 1000.0),
            inference_us_p99: latency.quantile(0.99).map(|ns| ns as f64 / 1000.0),
        }
    }
}

/// The stats file's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatsSnapshot {
    /// [`STATS_SCHEMA`].
    pub schema: String,
    /// [`STATS_VERSION`].
    pub version: u32,
    /// Always "scx_gru".
    pub scheduler: String,
    /// "model" (GRU predictions) or "fallback-only" (no model loaded).
    pub mode: String,
    /// Model metadata path, if any.
    pub model: Option<String>,
    /// Seconds since attach.
    pub uptime_s: f64,
    /// Placements on the predicted CPU (= bpf.nr_pred_applied).
    pub predictions_applied: u64,
    /// Placements that fell back to the default policy (sum of the reasons).
    pub fallbacks: u64,
    /// Ring-buffer drops (= bpf.nr_ringbuf_drops).
    pub ringbuf_drops: u64,
    /// Counters of the BPF program.
    pub bpf: BpfCounters,
    /// Counters of the user-space side.
    pub user: UserSnapshot,
}

impl StatsSnapshot {
    /// Builds a snapshot.
    pub fn new(
        mode: &str,
        model: Option<String>,
        uptime_s: f64,
        bpf: BpfCounters,
        user: UserSnapshot,
    ) -> Self {
        Self {
            schema: STATS_SCHEMA.into(),
            version: STATS_VERSION,
            scheduler: "scx_gru".into(),
            mode: mode.into(),
            model,
            uptime_s,
            predictions_applied: bpf.nr_pred_applied,
            fallbacks: bpf.fallbacks(),
            ringbuf_drops: bpf.nr_ringbuf_drops,
            bpf,
            user,
        }
    }

    /// One log line.
    pub fn summary(&self) -> String {
        let us = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
        format!(
            "[{}] applied {} fallbacks {} (missing {} stale {} disallowed {} busy {} prev_idle {} paused {}) \
             pinned {} events {} (not sent: fresh {} gap {}; wakeups {}) ringbuf_drops {} \
             queue_drops {} inferences {} (tasks {}, over budget {}, paused {} in {} busy + {} redundant pauses) \
             infer_us p50 {} p99 {} \
             preempts {} (pinned {}, by timer {} of {} deferred, kthread {}) wait_us short {} long {}",
            self.mode,
            self.predictions_applied,
            self.fallbacks,
            self.bpf.nr_pred_missing,
            self.bpf.nr_pred_stale,
            self.bpf.nr_pred_disallowed,
            self.bpf.nr_pred_busy,
            self.bpf.nr_pred_prev_idle,
            self.bpf.nr_pred_paused,
            self.bpf.nr_pinned_local,
            self.bpf.nr_events,
            self.bpf.nr_events_fresh,
            self.bpf.nr_events_gap,
            self.bpf.nr_ringbuf_wakeups,
            self.ringbuf_drops,
            self.user.events_dropped_queue,
            self.user.inferences,
            self.user.tasks_predicted,
            self.user.inferences_over_budget,
            self.user.inferences_paused,
            self.user.inference_pauses,
            self.user.inference_pauses_redundant,
            us(self.user.inference_us_p50),
            us(self.user.inference_us_p99),
            self.bpf.nr_wakeup_preempts,
            self.bpf.nr_pinned_preempts,
            self.bpf.nr_timer_preempts,
            self.bpf.nr_deferred_preempts,
            self.bpf.nr_kthread_preempts,
            us(self.bpf.mean_wait_us(true)),
            us(self.bpf.mean_wait_us(false)),
        )
    }

    /// Writes the snapshot atomically (temporary file + rename).
    pub fn write_to(&self, path: &Path) -> Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
        }
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(self).context("serialize stats")?;
        std::fs::write(&tmp, text + "\n").with_context(|| format!("write {}", tmp.display()))?;
        std::fs::rename(&tmp, path)
            .with_context(|| format!("rename {} to {}", tmp.display(), path.display()))
    }

    /// Reads a stats file and checks its schema.
    pub fn read_from(path: &Path) -> Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
        let snap: Self =
            serde_json::from_str(&text).with_context(|| format!("parse {}", path.display()))?;
        anyhow::ensure!(
            snap.schema == STATS_SCHEMA && snap.version == STATS_VERSION,
            "{} is {} v{}, expected {STATS_SCHEMA} v{STATS_VERSION}",
            path.display(),
            snap.schema,
            snap.version
        );
        Ok(snap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_by_nearest_rank() {
        let mut w = LatencyWindow::new(100);
        for v in 1..=100 {
            w.record(v);
        }
        assert_eq!(w.quantile(0.5), Some(50));
        assert_eq!(w.quantile(0.99), Some(99));
        assert_eq!(w.quantile(1.0), Some(100));
        assert_eq!(LatencyWindow::new(4).quantile(0.5), None);
    }

    #[test]
    fn window_keeps_only_the_last_samples() {
        let mut w = LatencyWindow::new(2);
        w.record(100);
        w.record(1);
        w.record(2);
        assert_eq!(w.quantile(1.0), Some(2));
        assert_eq!(w.total(), 3);
    }

    #[test]
    fn fallbacks_sum_the_reasons_and_file_round_trips() {
        let bpf = BpfCounters {
            nr_pred_applied: 5,
            nr_pred_missing: 1,
            nr_pred_stale: 2,
            nr_pred_disallowed: 3,
            nr_pred_busy: 4,
            nr_pred_prev_idle: 6,
            nr_pred_ignored: 10,
            nr_pred_paused: 20,
            nr_pinned_local: 100,
            nr_events_fresh: 7,
            ..Default::default()
        };
        let snap = StatsSnapshot::new("model", None, 1.5, bpf, UserSnapshot::default());
        assert_eq!(snap.fallbacks, 46);
        assert_eq!(snap.bpf.mean_wait_us(true), None);
        let waits = BpfCounters {
            nr_waits_short: 4,
            wait_ns_short: 10_000,
            nr_waits_long: 1,
            wait_ns_long: 2_500_000,
            ..Default::default()
        };
        assert_eq!(waits.mean_wait_us(true), Some(2.5));
        assert_eq!(waits.mean_wait_us(false), Some(2500.0));
        assert_eq!(snap.predictions_applied, 5);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s/stats.json");
        snap.write_to(&path).unwrap();
        assert_eq!(StatsSnapshot::read_from(&path).unwrap(), snap);
    }

    #[test]
    fn files_without_the_newer_counters_still_read() {
        let snap = StatsSnapshot::new(
            "model",
            None,
            1.0,
            BpfCounters::default(),
            UserSnapshot::default(),
        );
        let mut v = serde_json::to_value(&snap).unwrap();
        for key in [
            "nr_events_fresh",
            "nr_events_gap",
            "nr_ringbuf_wakeups",
            "nr_pred_prev_idle",
            "nr_waits_short",
            "wait_ns_short",
            "nr_waits_long",
            "wait_ns_long",
            "nr_select_no_idle",
            "nr_dispatch_affine",
            "nr_prev_kept",
            "nr_pred_ignored",
            "nr_pinned_preempts",
            "nr_deferred_preempts",
            "nr_timer_preempts",
            "nr_kthread_preempts",
            "nr_pred_paused",
            "nr_wake_queued",
            "nr_wake_stolen",
            "nr_wake_balanced",
            "nr_hint_shared",
            "nr_hint_wake",
        ] {
            assert!(v["bpf"].as_object_mut().unwrap().remove(key).is_some());
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.json");
        std::fs::write(&path, v.to_string()).unwrap();
        assert_eq!(StatsSnapshot::read_from(&path).unwrap(), snap);
    }
}
