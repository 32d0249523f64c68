//! scx_gru's statistics: one [`Metrics`], as every scx scheduler has. It is what the scx_stats
//! server serves ([`server_data`]: each client gets the change since its previous request; the
//! client behind `--stats` and `--monitor` is [`monitor`]) and what the stats file holds
//! (`--stats-file`: JSON, schema [`STATS_SCHEMA`] v[`STATS_VERSION`], the metrics as they are,
//! cumulative since attach; [`Metrics::write_to`], [`Metrics::read_from`]). `asa status` and
//! the lab's tests and tools read the file. The counters come from the BPF program's .bss
//! ([`Metrics::from_bss`]) and from the user-space side's
//! [`UserCounters`](crate::stats::UserCounters).

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use scx_stats::prelude::*;
use scx_stats_derive::{stat_doc, Stats};
use serde::{Deserialize, Serialize};

/// The name that starts every line [`Metrics::format`] writes.
pub const SCHEDULER_NAME: &str = "scx_gru";
/// Schema name of the stats file.
pub const STATS_SCHEMA: &str = "asa.gru-stats";
/// The mode of scx_gru with `--bpf-model` (header field `mode`).
pub const MODE_BPF_MODEL: &str = "bpf-model";
/// Schema version of the stats file: 2 is [`Metrics`], flat (v1 had the counters in `bpf` and
/// `user` sections).
pub const STATS_VERSION: u32 = 2;

/// The statistics of scx_gru: a header (the file's schema, the mode, the model, the uptime),
/// then the BPF program's counters (`nr_*`, `wait_ns_*`) and the user-space side's. The stats
/// file holds them cumulative since attach; a stats-server client gets each counter's change
/// since its previous request ([`Metrics::delta`]); the gauges (marked so) are current values.
/// A file without some counters (written before they existed) reads them as 0.
#[stat_doc]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, Stats)]
#[serde(default)]
#[stat(top, desc = "scx_gru statistics")]
pub struct Metrics {
    #[stat(desc = "Schema of the stats file, asa.gru-stats (gauge)")]
    pub schema: String,
    #[stat(desc = "Schema version of the stats file (gauge)")]
    pub version: u32,
    #[stat(
        desc = "\"model\" (GRU predictions), \"bpf-model\" (the in-BPF model) or \"fallback-only\" (gauge)"
    )]
    pub mode: String,
    #[stat(desc = "The model's file (GRU metadata or in-BPF model), empty without one (gauge)")]
    pub model: String,
    #[stat(desc = "Seconds since attach (gauge)")]
    pub uptime_s: f64,
    #[stat(desc = "Placements by the default policy (sum of the nr_pred_* reasons)")]
    pub fallbacks: u64,

    #[stat(desc = "Events written to the ring buffer")]
    pub nr_events: u64,
    #[stat(desc = "Events lost because the ring buffer was full")]
    pub nr_ringbuf_drops: u64,
    #[stat(desc = "Events not sent: the task's prediction was younger than the refresh age")]
    pub nr_events_fresh: u64,
    #[stat(desc = "Events not sent: the task had sent one within the event gap")]
    pub nr_events_gap: u64,
    /// Woken: a batch waits or the oldest event is old enough.
    #[stat(desc = "Ring-buffer submits that woke the poller")]
    pub nr_ringbuf_wakeups: u64,
    #[stat(desc = "Placements on the predicted CPU")]
    pub nr_pred_applied: u64,
    #[stat(desc = "Placements on the predicted CPU decided in select_cpu")]
    pub nr_pred_applied_select: u64,
    /// A prediction that changed the placement: keeping an idle previous CPU is what the
    /// fallback does too.
    #[stat(desc = "Placements on the predicted CPU that moved the task off its previous CPU")]
    pub nr_pred_moved: u64,
    #[stat(desc = "Fallback placements: no prediction for the task")]
    pub nr_pred_missing: u64,
    #[stat(desc = "Fallback placements: prediction older than the TTL")]
    pub nr_pred_stale: u64,
    #[stat(desc = "Fallback placements: predicted CPU not allowed")]
    pub nr_pred_disallowed: u64,
    #[stat(desc = "Fallback placements: predicted CPU busy")]
    pub nr_pred_busy: u64,
    /// Decided in select_cpu.
    #[stat(desc = "Fallback placements: another CPU predicted, the idle previous CPU kept")]
    pub nr_pred_prev_idle: u64,
    #[stat(desc = "Fallback placements: a usable prediction not followed (--observe-only)")]
    pub nr_pred_ignored: u64,
    /// Paused as redundant, or as busy unless `--busy-pause-keeps-events`: no prediction looked
    /// up, no event sent.
    #[stat(desc = "Fallback placements while the follow gate paused the model")]
    pub nr_pred_paused: u64,
    #[stat(desc = "Fallback placements on an idle CPU found by the kernel (select_cpu)")]
    pub nr_direct_idle: u64,
    #[stat(desc = "Fallback placements in a deadline-ordered DSQ (shared or a wake queue)")]
    pub nr_shared_enqueued: u64,
    /// Neither prediction nor fallback.
    #[stat(desc = "Single-CPU tasks placed on their CPU")]
    pub nr_pinned_local: u64,
    /// Neither prediction nor fallback.
    #[stat(desc = "scx_gru's own threads placed on their CPU")]
    pub nr_usersched_local: u64,
    /// Unless `--usersched-always-first`.
    #[stat(desc = "scx_gru's own threads out of slice, queued in the shared DSQ by vtime")]
    pub nr_usersched_queued: u64,
    /// Queued in a wake queue or the shared DSQ: no CPU was idle, and the running task was
    /// ahead of the wakee by more than `--preempt-margin-us`.
    #[stat(desc = "Queued wake-ups that preempted their previous CPU")]
    pub nr_wakeup_preempts: u64,
    /// Per-CPU kernel threads; `--no-pinned-preempt` turns this off.
    #[stat(desc = "Wake-ups of single-CPU tasks that preempted the task on their CPU")]
    pub nr_pinned_preempts: u64,
    /// A hog on their previous CPU they would have preempted but for `--preempt-min-run-us`;
    /// the timer preempts it once it has run `--deferred-preempt-us` (0 turns this off).
    #[stat(desc = "Wake-ups that armed a timer to preempt a CPU hog (--deferred-preempt-us)")]
    pub nr_deferred_preempts: u64,
    /// They found the same task running and tasks waiting in the shared DSQ, the CPU's wake
    /// queue or (with `--kthread-preempt-us`) its local DSQ.
    #[stat(desc = "Deferred-preemption timers that preempted the running task")]
    pub nr_timer_preempts: u64,
    /// Before `--preempt-min-run-us`, at once or by arming the CPU's timer (whose preemptions
    /// are in `nr_timer_preempts`).
    #[stat(desc = "Wake-ups of kernel threads that preempted a CPU hog (--kthread-preempt-us)")]
    pub nr_kthread_preempts: u64,
    /// Because tasks were waiting in the shared DSQ.
    #[stat(desc = "Placements given a slice shorter than --slice-us (--slice-min-us)")]
    pub nr_slices_shortened: u64,
    /// Queued behind their vtime by the vtime they used since they last woke up.
    #[stat(desc = "Shared-DSQ inserts keyed by vtime + burst (--burst-cap-ms)")]
    pub nr_burst_keyed: u64,
    /// No prediction lookup, no idle-CPU scan: nothing could be placed.
    #[stat(desc = "Wake-ups that select_cpu left to enqueue because no CPU was idle")]
    pub nr_select_no_idle: u64,
    /// Within `--dispatch-affinity-us` of the head.
    #[stat(desc = "Shared-DSQ tasks taken ahead of the head by the CPU they last ran on")]
    pub nr_dispatch_affine: u64,
    /// Nothing else to run; the kernel would give it 20 ms.
    #[stat(desc = "Dispatches that gave the running task, out of slice, a new slice")]
    pub nr_prev_kept: u64,
    /// No idle CPU; counted in `nr_shared_enqueued` too (`--no-wake-queues` turns the queues
    /// off).
    #[stat(desc = "Wake-ups queued in their CPU's wake queue")]
    pub nr_wake_queued: u64,
    #[stat(desc = "Wake-queue tasks taken by another CPU that had nothing else to run")]
    pub nr_wake_stolen: u64,
    /// Shorter than their own CPU's by at least `--wake-balance`, a CPU hog running there.
    #[stat(desc = "Wake-ups queued in a shorter wake queue of another CPU (--wake-balance)")]
    pub nr_wake_balanced: u64,
    /// Counted from the insert until the task runs, so never fewer than the truth (the same
    /// for the wake queues).
    #[stat(desc = "Tasks waiting in the shared DSQ (gauge)")]
    pub nr_hint_shared: u64,
    #[stat(desc = "Tasks waiting in the wake queues (gauge)")]
    pub nr_hint_wake: u64,
    /// Index = CPU; empty without `--wake-balance`.
    #[stat(desc = "Tasks waiting per CPU's wake queue (gauge; --wake-balance only)")]
    pub nr_hint_wake_by_cpu: Vec<u64>,
    /// Runnable → running (the kernel's `run_delay`); short: under 1 ms before they last slept
    /// and in progress.
    #[stat(desc = "Queue waits of tasks with short bursts (under 1 ms: I/O threads)")]
    pub nr_waits_short: u64,
    #[stat(desc = "Total time of those waits, ns")]
    pub wait_ns_short: u64,
    /// CPU-bound tasks.
    #[stat(desc = "Queue waits of the other tasks (bursts of 1 ms or more)")]
    pub nr_waits_long: u64,
    #[stat(desc = "Total time of those waits, ns")]
    pub wait_ns_long: u64,
    /// `--bpf-model`: select_cpu ran the in-BPF model (a CPU was idle somewhere).
    #[stat(desc = "Wake-ups the in-BPF model chose a CPU for (--bpf-model)")]
    pub nr_bpf_model_decisions: u64,
    #[stat(desc = "In-BPF model decisions followed: the task placed on the idle CPU chosen")]
    pub nr_bpf_model_applied: u64,
    #[stat(desc = "Followed in-BPF model decisions that moved the task off its previous CPU")]
    pub nr_bpf_model_moved: u64,
    /// The default policy placed the task.
    #[stat(desc = "In-BPF model decisions not followed: the CPU busy or not allowed")]
    pub nr_bpf_model_busy: u64,
    /// The default policy placed the task.
    #[stat(desc = "Wake-ups the in-BPF model could not decide: no valid model in the map")]
    pub nr_bpf_model_invalid: u64,
    /// Index = CPU, up to the last CPU chosen; empty without `--bpf-model`.
    #[stat(desc = "In-BPF model decisions by the CPU chosen")]
    pub nr_bpf_model_by_cpu: Vec<u64>,
    /// Written by the BPF side at its decisions: the model it used.
    #[stat(desc = "model_seq of the in-BPF model of the last decision (gauge; 0: none yet)")]
    pub bpf_model_seq_used: u64,

    #[stat(desc = "Events decoded from the ring buffer")]
    pub events_received: u64,
    /// Kept for the schema: the poller and the inference are one thread since the events are
    /// handed over in place.
    #[stat(desc = "Events dropped because the inference lagged (always 0 now)")]
    pub events_dropped_queue: u64,
    #[stat(desc = "Model runs (each predicts a batch of tasks)")]
    pub inferences: u64,
    #[stat(desc = "Tasks predicted by successful model runs")]
    pub tasks_predicted: u64,
    #[stat(desc = "Model runs that failed")]
    pub inference_errors: u64,
    #[stat(desc = "Task predictions skipped because the CPU budget of the second was spent")]
    pub inferences_over_budget: u64,
    /// The follow gate.
    #[stat(desc = "Times inference paused because its predictions' CPUs were busy")]
    pub inference_pauses: u64,
    /// Its followed predictions kept tasks where the fallback keeps them (the follow gate).
    #[stat(desc = "Times inference paused because its predictions changed no placement")]
    pub inference_pauses_redundant: u64,
    /// Tasks whose windows filled during a pause that kept the events (see
    /// [`crate::stats::UserCounters`]).
    #[stat(desc = "Task predictions skipped while inference was paused")]
    pub inferences_paused: u64,
    #[stat(desc = "Predictions written into pid_to_cpu")]
    pub predictions_written: u64,
    #[stat(desc = "pid_to_cpu updates that failed")]
    pub map_update_errors: u64,
    /// Bumped by every model written into the map (1: the one loaded at start).
    #[stat(desc = "model_seq of the in-BPF model in the map (gauge; 0: none)")]
    pub bpf_model_seq: u64,
    #[stat(desc = "In-BPF models written into the map (the first, then each SIGHUP swap)")]
    pub bpf_model_installs: u64,
    /// Malformed or unreadable files: the model in use kept deciding.
    #[stat(desc = "In-BPF model replacements refused by the checks")]
    pub bpf_model_refused: u64,
    /// One run predicts a batch.
    #[stat(desc = "Median latency of the last 8192 model runs, us (gauge; 0 before the first)")]
    pub inference_us_p50: f64,
    #[stat(desc = "99th percentile of the same, us (gauge; 0 before the first)")]
    pub inference_us_p99: f64,
}

/// [`Metrics`] with the listed fields taken from `$src` (the same names), the others default.
macro_rules! copy_fields {
    ($src:expr; $($field:ident),* $(,)?) => {
        Metrics {
            $($field: $src.$field,)*
            ..Metrics::default()
        }
    };
}

/// Writes `$cur` with each listed counter replaced by its change since `$prev` (a counter
/// that went back, as after a restart, counts from 0).
macro_rules! counter_delta {
    ($cur:expr, $prev:expr; $($field:ident),* $(,)?) => {
        Metrics {
            $($field: $cur.$field.saturating_sub($prev.$field),)*
            ..$cur.clone()
        }
    };
}

impl Metrics {
    /// The counters of the BPF scheduler's .bss (and `fallbacks`, their sum); `wake_cpus` is
    /// how many CPUs' wake-queue counts to copy (0 without `--wake-balance`, which alone keeps
    /// them). The header and the user-space counters are left empty.
    pub fn from_bss(bss: &crate::bpf_skel::types::bss, wake_cpus: usize) -> Self {
        let mut m = copy_fields!(bss;
            nr_events, nr_ringbuf_drops, nr_events_fresh, nr_events_gap, nr_ringbuf_wakeups,
            nr_pred_applied, nr_pred_applied_select, nr_pred_moved, nr_pred_missing,
            nr_pred_stale, nr_pred_disallowed, nr_pred_busy, nr_pred_prev_idle, nr_pred_ignored,
            nr_pred_paused, nr_direct_idle, nr_shared_enqueued, nr_pinned_local,
            nr_usersched_local, nr_usersched_queued, nr_wakeup_preempts, nr_pinned_preempts,
            nr_deferred_preempts, nr_timer_preempts, nr_kthread_preempts, nr_slices_shortened,
            nr_burst_keyed, nr_select_no_idle, nr_dispatch_affine, nr_prev_kept, nr_wake_queued,
            nr_wake_stolen, nr_wake_balanced, nr_hint_shared, nr_hint_wake, nr_waits_short,
            wait_ns_short, nr_waits_long, wait_ns_long, nr_bpf_model_decisions,
            nr_bpf_model_applied, nr_bpf_model_moved, nr_bpf_model_busy, nr_bpf_model_invalid,
            bpf_model_seq_used,
        );
        let chosen = bss
            .nr_bpf_model_by_cpu
            .iter()
            .rposition(|n| *n > 0)
            .map_or(0, |last| last + 1);
        m.nr_bpf_model_by_cpu = bss.nr_bpf_model_by_cpu[..chosen].to_vec();
        m.nr_hint_wake_by_cpu =
            bss.nr_hint_wake_cpu[..wake_cpus.min(bss.nr_hint_wake_cpu.len())].to_vec();
        m.fallbacks = m.fallback_reasons();
        m
    }

    /// Sets the header: the stats file's schema and version, the mode (`"model"` or
    /// `"fallback-only"`), the model's metadata path (empty without one) and the uptime.
    pub fn with_header(self, mode: &str, model: &str, uptime_s: f64) -> Self {
        Self {
            schema: STATS_SCHEMA.into(),
            version: STATS_VERSION,
            mode: mode.into(),
            model: model.into(),
            uptime_s,
            ..self
        }
    }

    /// All placements that did not follow a prediction: the sum of the reasons.
    pub fn fallback_reasons(&self) -> u64 {
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

    /// The change since `prev`: every counter minus its value in `prev`; the header and the
    /// gauges (tasks waiting, inference latency) as in `self`.
    pub fn delta(&self, prev: &Self) -> Self {
        let mut delta = counter_delta!(self, prev;
            fallbacks, nr_events, nr_ringbuf_drops, nr_events_fresh, nr_events_gap,
            nr_ringbuf_wakeups, nr_pred_applied, nr_pred_applied_select, nr_pred_moved,
            nr_pred_missing, nr_pred_stale, nr_pred_disallowed, nr_pred_busy, nr_pred_prev_idle,
            nr_pred_ignored, nr_pred_paused, nr_direct_idle, nr_shared_enqueued, nr_pinned_local,
            nr_usersched_local, nr_usersched_queued, nr_wakeup_preempts, nr_pinned_preempts,
            nr_deferred_preempts, nr_timer_preempts, nr_kthread_preempts, nr_slices_shortened,
            nr_burst_keyed, nr_select_no_idle, nr_dispatch_affine, nr_prev_kept, nr_wake_queued,
            nr_wake_stolen, nr_wake_balanced, nr_waits_short, wait_ns_short, nr_waits_long,
            wait_ns_long, events_received, events_dropped_queue, inferences, tasks_predicted,
            inference_errors, inferences_over_budget, inference_pauses,
            inference_pauses_redundant, inferences_paused, predictions_written,
            map_update_errors, nr_bpf_model_decisions, nr_bpf_model_applied, nr_bpf_model_moved,
            nr_bpf_model_busy, nr_bpf_model_invalid, bpf_model_installs, bpf_model_refused,
        );
        delta.nr_bpf_model_by_cpu = self
            .nr_bpf_model_by_cpu
            .iter()
            .enumerate()
            .map(|(cpu, n)| {
                n.saturating_sub(prev.nr_bpf_model_by_cpu.get(cpu).copied().unwrap_or(0))
            })
            .collect();
        delta
    }

    /// Writes the metrics as three lines for `--stats` and `--monitor` (counters as they are:
    /// the change over the interval when they come from the stats server).
    pub fn format<W: Write>(&self, w: &mut W) -> Result<()> {
        let mean_us = |short: bool| us(self.mean_wait_us(short).unwrap_or(0.0));
        writeln!(
            w,
            "[{SCHEDULER_NAME}] {} up {:.0}s | predicted {} (moved {}) fallbacks {} (missing {} \
             stale {} disallowed {} busy {} prev_idle {} ignored {} paused {}) pinned {}",
            self.mode,
            self.uptime_s,
            self.nr_pred_applied,
            self.nr_pred_moved,
            self.fallbacks,
            self.nr_pred_missing,
            self.nr_pred_stale,
            self.nr_pred_disallowed,
            self.nr_pred_busy,
            self.nr_pred_prev_idle,
            self.nr_pred_ignored,
            self.nr_pred_paused,
            self.nr_pinned_local,
        )?;
        writeln!(
            w,
            "  events {} (not sent: fresh {} gap {}; wakeups {}; drops {}) | inferences {} \
             (tasks {}, errors {}, over budget {}, paused {} in {} busy + {} redundant pauses) \
             infer_us p50 {} p99 {}",
            self.nr_events,
            self.nr_events_fresh,
            self.nr_events_gap,
            self.nr_ringbuf_wakeups,
            self.nr_ringbuf_drops,
            self.inferences,
            self.tasks_predicted,
            self.inference_errors,
            self.inferences_over_budget,
            self.inferences_paused,
            self.inference_pauses,
            self.inference_pauses_redundant,
            us(self.inference_us_p50),
            us(self.inference_us_p99),
        )?;
        writeln!(
            w,
            "  preempts {} (pinned {}, by timer {} of {} deferred, kthread {}) | wake queued {} \
             (stolen {}, balanced {}) | waiting shared {} wake {} | wait_us short {} long {}",
            self.nr_wakeup_preempts,
            self.nr_pinned_preempts,
            self.nr_timer_preempts,
            self.nr_deferred_preempts,
            self.nr_kthread_preempts,
            self.nr_wake_queued,
            self.nr_wake_stolen,
            self.nr_wake_balanced,
            self.nr_hint_shared,
            self.nr_hint_wake,
            mean_us(true),
            mean_us(false),
        )?;
        if self.mode == MODE_BPF_MODEL {
            writeln!(w, "  {}", self.bpf_model_line())?;
        }
        Ok(())
    }

    /// The in-BPF model's counters on one line (`--bpf-model`).
    pub fn bpf_model_line(&self) -> String {
        format!(
            "bpf model seq {} (used {}; installs {}, refused {}) | decisions {} (applied {}, \
             moved {}, busy {}) invalid {} | by cpu {:?}",
            self.bpf_model_seq,
            self.bpf_model_seq_used,
            self.bpf_model_installs,
            self.bpf_model_refused,
            self.nr_bpf_model_decisions,
            self.nr_bpf_model_applied,
            self.nr_bpf_model_moved,
            self.nr_bpf_model_busy,
            self.nr_bpf_model_invalid,
            self.nr_bpf_model_by_cpu,
        )
    }

    /// One log line (scx_gru logs it every `--stats-interval`, cumulative counters).
    pub fn summary(&self) -> String {
        let line = self.summary_common();
        if self.mode == MODE_BPF_MODEL {
            format!("{line} | {}", self.bpf_model_line())
        } else {
            line
        }
    }

    /// [`Self::summary`] without the in-BPF model's part.
    fn summary_common(&self) -> String {
        format!(
            "[{}] applied {} fallbacks {} (missing {} stale {} disallowed {} busy {} prev_idle {} paused {}) \
             pinned {} events {} (not sent: fresh {} gap {}; wakeups {}) ringbuf_drops {} \
             queue_drops {} inferences {} (tasks {}, over budget {}, paused {} in {} busy + {} redundant pauses) \
             infer_us p50 {} p99 {} \
             preempts {} (pinned {}, by timer {} of {} deferred, kthread {}) wait_us short {} long {}",
            self.mode,
            self.nr_pred_applied,
            self.fallbacks,
            self.nr_pred_missing,
            self.nr_pred_stale,
            self.nr_pred_disallowed,
            self.nr_pred_busy,
            self.nr_pred_prev_idle,
            self.nr_pred_paused,
            self.nr_pinned_local,
            self.nr_events,
            self.nr_events_fresh,
            self.nr_events_gap,
            self.nr_ringbuf_wakeups,
            self.nr_ringbuf_drops,
            self.events_dropped_queue,
            self.inferences,
            self.tasks_predicted,
            self.inferences_over_budget,
            self.inferences_paused,
            self.inference_pauses,
            self.inference_pauses_redundant,
            us(self.inference_us_p50),
            us(self.inference_us_p99),
            self.nr_wakeup_preempts,
            self.nr_pinned_preempts,
            self.nr_timer_preempts,
            self.nr_deferred_preempts,
            self.nr_kthread_preempts,
            us(self.mean_wait_us(true).unwrap_or(0.0)),
            us(self.mean_wait_us(false).unwrap_or(0.0)),
        )
    }

    /// Writes the metrics to the stats file at `path` atomically (temporary file + rename).
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

    /// Reads a stats file and checks its schema and version.
    pub fn read_from(path: &Path) -> Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
        let metrics: Self =
            serde_json::from_str(&text).with_context(|| format!("parse {}", path.display()))?;
        anyhow::ensure!(
            metrics.schema == STATS_SCHEMA && metrics.version == STATS_VERSION,
            "{} is {:?} v{}, expected {STATS_SCHEMA} v{STATS_VERSION}",
            path.display(),
            metrics.schema,
            metrics.version
        );
        Ok(metrics)
    }
}

/// A latency in µs with one decimal, "-" for none yet (0).
fn us(v: f64) -> String {
    if v > 0.0 {
        format!("{v:.1}")
    } else {
        "-".into()
    }
}

/// Wakes the scheduler's loop to answer a request (it may be asleep in its epoll).
pub type Waker = Arc<dyn Fn() + Send + Sync>;

/// The stats server's data: the metadata of [`Metrics`] and its `top` target. A request makes
/// the server ask the scheduler (a `()` on the request channel, then `wake`) for its
/// cumulative [`Metrics`] (on the response channel) and answers with the change since the
/// same client's previous request (since its first, for the first).
pub fn server_data(wake: Waker) -> StatsServerData<(), Metrics> {
    let open: Box<dyn StatsOpener<(), Metrics>> = Box::new(move |(req_ch, res_ch)| {
        req_ch.send(())?;
        wake();
        let mut prev = res_ch.recv()?;
        let wake = wake.clone();
        let read: Box<dyn StatsReader<(), Metrics>> = Box::new(move |_args, (req_ch, res_ch)| {
            req_ch.send(())?;
            wake();
            let cur = res_ch.recv()?;
            let delta = cur.delta(&prev);
            prev = cur;
            delta.to_json()
        });
        Ok(read)
    });
    StatsServerData::new()
        .add_meta(Metrics::meta())
        .add_ops("top", StatsOps { open, close: None })
}

/// Prints the metrics of the running scx_gru every `interval` (through its stats server,
/// waiting for one to appear) until `shutdown` is set.
pub fn monitor(interval: Duration, shutdown: Arc<AtomicBool>) -> Result<()> {
    scx_utils::monitor_stats::<Metrics>(
        &[],
        interval,
        || shutdown.load(Ordering::Relaxed),
        |metrics| metrics.format(&mut std::io::stdout()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fields that are current values, not counters.
    const GAUGES: [&str; 12] = [
        "schema",
        "version",
        "mode",
        "model",
        "uptime_s",
        "nr_hint_shared",
        "nr_hint_wake",
        "nr_hint_wake_by_cpu",
        "inference_us_p50",
        "inference_us_p99",
        "bpf_model_seq_used",
        "bpf_model_seq",
    ];

    /// Metrics whose every number is `v`.
    fn all_numbers(v: u64) -> Metrics {
        let mut json = serde_json::to_value(Metrics {
            nr_hint_wake_by_cpu: vec![0, 0],
            nr_bpf_model_by_cpu: vec![0, 0],
            ..Default::default()
        })
        .unwrap();
        for (_, field) in json.as_object_mut().unwrap() {
            match field {
                serde_json::Value::Number(n) if n.is_u64() => *field = v.into(),
                serde_json::Value::Number(_) => *field = (v as f64).into(),
                serde_json::Value::Array(a) => a.iter_mut().for_each(|x| *x = v.into()),
                _ => {}
            }
        }
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn every_counter_is_a_delta_and_every_gauge_a_current_value() {
        let delta = serde_json::to_value(all_numbers(10).delta(&all_numbers(3))).unwrap();
        for (name, value) in delta.as_object().unwrap() {
            let expected = if GAUGES.contains(&name.as_str()) {
                10.0
            } else {
                7.0
            };
            let got = match value {
                serde_json::Value::Number(n) => n.as_f64().unwrap(),
                serde_json::Value::Array(a) => a[0].as_f64().unwrap(),
                serde_json::Value::String(_) => continue,
                other => panic!("{name}: {other}"),
            };
            assert_eq!(got, expected, "{name}");
        }
    }

    #[test]
    fn a_counter_that_went_back_counts_from_zero() {
        assert_eq!(all_numbers(3).delta(&all_numbers(10)).nr_events, 0);
    }

    #[test]
    fn the_bss_counters_come_with_their_fallback_sum() {
        // SAFETY: the .bss holds integers, bools and a raw pointer: all zeros is valid (and
        // is how the BPF program starts).
        let mut bss: crate::bpf_skel::types::bss = unsafe { std::mem::zeroed() };
        bss.nr_pred_applied = 5;
        bss.nr_pred_missing = 1;
        bss.nr_pred_stale = 2;
        bss.nr_pred_disallowed = 3;
        bss.nr_pred_busy = 4;
        bss.nr_pred_prev_idle = 6;
        bss.nr_pred_ignored = 10;
        bss.nr_pred_paused = 20;
        bss.nr_pinned_local = 100;
        bss.wait_ns_long = 9;
        bss.nr_hint_wake_cpu[1] = 8;
        let m = Metrics::from_bss(&bss, 2);
        assert_eq!(
            (
                m.nr_pred_applied,
                m.fallbacks,
                m.nr_pinned_local,
                m.wait_ns_long
            ),
            (5, 46, 100, 9)
        );
        assert_eq!(m.nr_hint_wake_by_cpu, vec![0, 8]);
        assert!(Metrics::from_bss(&bss, 0).nr_hint_wake_by_cpu.is_empty());
        assert_eq!((m.schema.as_str(), m.version), ("", 0), "no header yet");
        let m = m.with_header("model", "/m/gru.toml", 1.5);
        assert_eq!(
            (
                m.schema.as_str(),
                m.version,
                m.mode.as_str(),
                m.model.as_str()
            ),
            (STATS_SCHEMA, STATS_VERSION, "model", "/m/gru.toml")
        );
        assert_eq!((m.uptime_s, m.fallbacks), (1.5, 46));
    }

    #[test]
    fn the_bpf_model_counters_come_by_cpu_and_show_in_bpf_model_mode_only() {
        // SAFETY: as above.
        let mut bss: crate::bpf_skel::types::bss = unsafe { std::mem::zeroed() };
        assert!(Metrics::from_bss(&bss, 0).nr_bpf_model_by_cpu.is_empty());
        bss.nr_bpf_model_decisions = 7;
        bss.nr_bpf_model_by_cpu[0] = 3;
        bss.nr_bpf_model_by_cpu[2] = 4;
        bss.bpf_model_seq_used = 2;
        let m = Metrics::from_bss(&bss, 0);
        assert_eq!(
            m.nr_bpf_model_by_cpu,
            vec![3, 0, 4],
            "up to the last CPU chosen"
        );
        assert_eq!((m.nr_bpf_model_decisions, m.bpf_model_seq_used), (7, 2));
        // A counter vector: its change by CPU, CPUs new since the previous request counted
        // from 0.
        let prev = Metrics {
            nr_bpf_model_by_cpu: vec![1],
            bpf_model_seq_used: 1,
            ..Default::default()
        };
        let d = m.delta(&prev);
        assert_eq!(d.nr_bpf_model_by_cpu, vec![2, 0, 4]);
        assert_eq!(d.bpf_model_seq_used, 2, "a gauge");
        let shown = |mode: &str| {
            let m = m.clone().with_header(mode, "", 1.0);
            let mut out = Vec::new();
            m.format(&mut out).unwrap();
            (String::from_utf8(out).unwrap(), m.summary())
        };
        let (text, line) = shown(MODE_BPF_MODEL);
        assert_eq!(text.lines().count(), 4, "{text}");
        assert!(
            text.contains("bpf model seq 0 (used 2;") && text.contains("by cpu [3, 0, 4]"),
            "{text}"
        );
        assert!(line.contains("| bpf model seq 0 (used 2;"), "{line}");
        let (text, line) = shown("model");
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(!line.contains("bpf model"), "{line}");
    }

    #[test]
    fn mean_waits_are_per_wait_in_microseconds() {
        let waits = Metrics {
            nr_waits_short: 4,
            wait_ns_short: 10_000,
            nr_waits_long: 1,
            wait_ns_long: 2_500_000,
            ..Default::default()
        };
        assert_eq!(waits.mean_wait_us(true), Some(2.5));
        assert_eq!(waits.mean_wait_us(false), Some(2500.0));
        assert_eq!(Metrics::default().mean_wait_us(true), None);
    }

    #[test]
    fn the_lines_of_stats_monitor_and_the_log() {
        let m = Metrics {
            nr_pred_applied: 5,
            nr_pred_missing: 2,
            nr_pred_busy: 1,
            fallbacks: 3,
            nr_waits_long: 4,
            wait_ns_long: 8_000,
            inferences: 9,
            inference_us_p50: 12.5,
            ..Default::default()
        }
        .with_header("model", "", 3.0);
        let mut out = Vec::new();
        m.format(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(
            text.starts_with("[scx_gru] model up 3s | predicted 5"),
            "{text}"
        );
        assert!(text.contains("p50 12.5 p99 -"), "{text}");
        assert!(text.contains("wait_us short - long 2.0"), "{text}");
        let line = m.summary();
        assert!(
            line.starts_with("[model] applied 5 fallbacks 3 (missing 2 stale 0"),
            "{line}"
        );
        assert!(line.contains("inferences 9 (tasks 0"), "{line}");
        assert!(
            line.ends_with(
                "infer_us p50 12.5 p99 - preempts 0 (pinned 0, by timer 0 of 0 \
                 deferred, kthread 0) wait_us short - long 2.0"
            ),
            "{line}"
        );
    }

    #[test]
    fn the_stats_file_is_the_metrics_flat_and_round_trips() {
        let m = Metrics {
            nr_pred_applied: 5,
            nr_events_fresh: 7,
            inferences: 2,
            inference_us_p99: 40.5,
            nr_hint_wake_by_cpu: vec![1, 2],
            ..Default::default()
        }
        .with_header("model", "/m/gru.toml", 1.5);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s/stats.json");
        m.write_to(&path).unwrap();
        assert_eq!(Metrics::read_from(&path).unwrap(), m);
        // Flat: the header, the BPF side's and the user-space side's counters side by side.
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["schema"], STATS_SCHEMA);
        assert_eq!(v["version"], STATS_VERSION);
        assert_eq!(
            (&v["nr_pred_applied"], &v["inferences"]),
            (&5.into(), &2.into())
        );
        assert_eq!(v["inference_us_p99"], 40.5);
        let names = serde_json::to_value(Metrics::default()).unwrap();
        assert_eq!(
            v.as_object().unwrap().len(),
            names.as_object().unwrap().len()
        );
        assert!(v.as_object().unwrap().values().all(|x| !x.is_object()));
    }

    #[test]
    fn files_without_the_newer_counters_still_read_and_other_schemas_do_not() {
        let m = Metrics::default().with_header("fallback-only", "", 1.0);
        let mut v = serde_json::to_value(&m).unwrap();
        for key in ["nr_pred_paused", "nr_hint_wake_by_cpu", "inferences_paused"] {
            assert!(v.as_object_mut().unwrap().remove(key).is_some());
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.json");
        std::fs::write(&path, v.to_string()).unwrap();
        assert_eq!(Metrics::read_from(&path).unwrap(), m);
        // v1 (the counters in `bpf` and `user` sections) is refused, not read as zeros.
        let v1 = r#"{"schema":"asa.gru-stats","version":1,"mode":"model","bpf":{"nr_events":3}}"#;
        std::fs::write(&path, v1).unwrap();
        let err = Metrics::read_from(&path).unwrap_err().to_string();
        assert!(err.contains("v1, expected asa.gru-stats v2"), "{err}");
    }

    #[test]
    fn a_client_gets_the_change_since_its_previous_request() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stats");
        let wakes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = wakes.clone();
        let wake: Waker = Arc::new(move || {
            counted.fetch_add(1, Ordering::Relaxed);
        });
        let server = StatsServer::new(server_data(wake))
            .set_path(&path)
            .launch()
            .unwrap();
        // The scheduler's side: answers each request with cumulative counters, 10 more
        // events each time (10, 20, 30, ...).
        let (res_ch, req_ch) = server.channels();
        std::thread::spawn(move || {
            let mut events = 0;
            while req_ch.recv().is_ok() {
                events += 10;
                let metrics = Metrics {
                    mode: "model".into(),
                    nr_events: events,
                    nr_hint_shared: 3,
                    ..Default::default()
                };
                if res_ch.send(metrics).is_err() {
                    break;
                }
            }
        });
        // Connecting opens (the first answer, 10, is the base); each request then gets 10.
        let mut client = StatsClient::new().set_path(&path).connect(None).unwrap();
        for _ in 0..2 {
            let m: Metrics = client.request("stats", vec![]).unwrap();
            assert_eq!(
                (m.mode.as_str(), m.nr_events, m.nr_hint_shared),
                ("model", 10, 3)
            );
        }
        // Each question to the scheduler woke it: the opening and the two requests.
        assert_eq!(wakes.load(Ordering::Relaxed), 3);
        // Another client has its own base.
        let mut other = StatsClient::new().set_path(&path).connect(None).unwrap();
        let m: Metrics = other.request("stats", vec![]).unwrap();
        assert_eq!(m.nr_events, 10);
    }

    #[test]
    fn the_stats_server_describes_every_metric() {
        let meta = Metrics::meta();
        assert_eq!(meta.attrs.top.as_deref(), Some("true"));
        let names = serde_json::to_value(Metrics::default()).unwrap();
        assert_eq!(meta.fields.len(), names.as_object().unwrap().len());
        assert!(meta.fields.values().all(|f| f.attrs.desc.is_some()));
        let mut help = Vec::new();
        server_data(Arc::new(|| {}))
            .describe_meta(&mut help, None)
            .unwrap();
        let help = String::from_utf8(help).unwrap();
        assert!(
            help.contains("nr_pred_applied") && help.contains("inference_us_p99"),
            "{help}"
        );
    }
}
