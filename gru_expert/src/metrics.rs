//! scx_gru's statistics through scx_stats, as every scx scheduler serves them: [`Metrics`]
//! (the counters of the stats file, flat), the stats server's data ([`server_data`]: each
//! client gets the change since its previous request) and the client behind `--stats` and
//! `--monitor` ([`monitor`]). The stats file (`asa.gru-stats`, see [`crate::stats`]) stays:
//! `asa status` and the lab tests read it.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use scx_stats::prelude::*;
use scx_stats_derive::{stat_doc, Stats};
use serde::{Deserialize, Serialize};

use crate::stats::StatsSnapshot;

/// The name that starts every line [`Metrics::format`] writes.
pub const SCHEDULER_NAME: &str = "scx_gru";

/// The counters of scx_gru, as the stats server serves them: those of the stats file's `bpf`
/// and `user` sections, flat. A client gets each counter's change since its previous request
/// ([`Metrics::delta`]); the gauges (marked so) are current values.
#[stat_doc]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, Stats)]
#[stat(top, desc = "scx_gru statistics")]
pub struct Metrics {
    #[stat(desc = "\"model\" (GRU predictions) or \"fallback-only\" (gauge)")]
    pub mode: String,
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
    #[stat(desc = "Ring-buffer submits that woke the poller")]
    pub nr_ringbuf_wakeups: u64,
    #[stat(desc = "Placements on the predicted CPU")]
    pub nr_pred_applied: u64,
    #[stat(desc = "Placements on the predicted CPU decided in select_cpu")]
    pub nr_pred_applied_select: u64,
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
    #[stat(desc = "Fallback placements: another CPU predicted, the idle previous CPU kept")]
    pub nr_pred_prev_idle: u64,
    #[stat(desc = "Fallback placements: a usable prediction not followed (--observe-only)")]
    pub nr_pred_ignored: u64,
    #[stat(desc = "Fallback placements while the follow gate paused the model")]
    pub nr_pred_paused: u64,
    #[stat(desc = "Fallback placements on an idle CPU found by the kernel (select_cpu)")]
    pub nr_direct_idle: u64,
    #[stat(desc = "Fallback placements in a deadline-ordered DSQ (shared or a wake queue)")]
    pub nr_shared_enqueued: u64,
    #[stat(desc = "Single-CPU tasks placed on their CPU")]
    pub nr_pinned_local: u64,
    #[stat(desc = "scx_gru's own threads placed on their CPU")]
    pub nr_usersched_local: u64,
    #[stat(desc = "scx_gru's own threads out of slice, queued in the shared DSQ by vtime")]
    pub nr_usersched_queued: u64,
    #[stat(desc = "Queued wake-ups that preempted their previous CPU")]
    pub nr_wakeup_preempts: u64,
    #[stat(desc = "Wake-ups of single-CPU tasks that preempted the task on their CPU")]
    pub nr_pinned_preempts: u64,
    #[stat(desc = "Wake-ups that armed a timer to preempt a CPU hog (--deferred-preempt-us)")]
    pub nr_deferred_preempts: u64,
    #[stat(desc = "Deferred-preemption timers that preempted the running task")]
    pub nr_timer_preempts: u64,
    #[stat(desc = "Wake-ups of kernel threads that preempted a CPU hog (--kthread-preempt-us)")]
    pub nr_kthread_preempts: u64,
    #[stat(desc = "Placements given a slice shorter than --slice-us (--slice-min-us)")]
    pub nr_slices_shortened: u64,
    #[stat(desc = "Shared-DSQ inserts keyed by vtime + burst (--burst-cap-ms)")]
    pub nr_burst_keyed: u64,
    #[stat(desc = "Wake-ups that select_cpu left to enqueue because no CPU was idle")]
    pub nr_select_no_idle: u64,
    #[stat(desc = "Shared-DSQ tasks taken ahead of the head by the CPU they last ran on")]
    pub nr_dispatch_affine: u64,
    #[stat(desc = "Dispatches that gave the running task, out of slice, a new slice")]
    pub nr_prev_kept: u64,
    #[stat(desc = "Wake-ups queued in their CPU's wake queue")]
    pub nr_wake_queued: u64,
    #[stat(desc = "Wake-queue tasks taken by another CPU that had nothing else to run")]
    pub nr_wake_stolen: u64,
    #[stat(desc = "Wake-ups queued in a shorter wake queue of another CPU (--wake-balance)")]
    pub nr_wake_balanced: u64,
    #[stat(desc = "Tasks waiting in the shared DSQ (gauge)")]
    pub nr_hint_shared: u64,
    #[stat(desc = "Tasks waiting in the wake queues (gauge)")]
    pub nr_hint_wake: u64,
    #[stat(desc = "Tasks waiting per CPU's wake queue (gauge; --wake-balance only)")]
    pub nr_hint_wake_by_cpu: Vec<u64>,
    #[stat(desc = "Queue waits of tasks with short bursts (under 1 ms: I/O threads)")]
    pub nr_waits_short: u64,
    #[stat(desc = "Total time of those waits, ns")]
    pub wait_ns_short: u64,
    #[stat(desc = "Queue waits of the other tasks (bursts of 1 ms or more)")]
    pub nr_waits_long: u64,
    #[stat(desc = "Total time of those waits, ns")]
    pub wait_ns_long: u64,

    #[stat(desc = "Events decoded from the ring buffer")]
    pub events_received: u64,
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
    #[stat(desc = "Times inference paused because its predictions' CPUs were busy")]
    pub inference_pauses: u64,
    #[stat(desc = "Times inference paused because its predictions changed no placement")]
    pub inference_pauses_redundant: u64,
    #[stat(desc = "Task predictions skipped while inference was paused")]
    pub inferences_paused: u64,
    #[stat(desc = "Predictions written into pid_to_cpu")]
    pub predictions_written: u64,
    #[stat(desc = "pid_to_cpu updates that failed")]
    pub map_update_errors: u64,
    #[stat(desc = "Median latency of the last 8192 model runs, us (gauge; 0 before the first)")]
    pub inference_us_p50: f64,
    #[stat(desc = "99th percentile of the same, us (gauge; 0 before the first)")]
    pub inference_us_p99: f64,
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
    /// The metrics of a stats-file snapshot (cumulative, as the file's).
    pub fn from_snapshot(snap: &StatsSnapshot) -> Self {
        let (bpf, user) = (&snap.bpf, &snap.user);
        Self {
            mode: snap.mode.clone(),
            uptime_s: snap.uptime_s,
            fallbacks: snap.fallbacks,
            nr_events: bpf.nr_events,
            nr_ringbuf_drops: bpf.nr_ringbuf_drops,
            nr_events_fresh: bpf.nr_events_fresh,
            nr_events_gap: bpf.nr_events_gap,
            nr_ringbuf_wakeups: bpf.nr_ringbuf_wakeups,
            nr_pred_applied: bpf.nr_pred_applied,
            nr_pred_applied_select: bpf.nr_pred_applied_select,
            nr_pred_moved: bpf.nr_pred_moved,
            nr_pred_missing: bpf.nr_pred_missing,
            nr_pred_stale: bpf.nr_pred_stale,
            nr_pred_disallowed: bpf.nr_pred_disallowed,
            nr_pred_busy: bpf.nr_pred_busy,
            nr_pred_prev_idle: bpf.nr_pred_prev_idle,
            nr_pred_ignored: bpf.nr_pred_ignored,
            nr_pred_paused: bpf.nr_pred_paused,
            nr_direct_idle: bpf.nr_direct_idle,
            nr_shared_enqueued: bpf.nr_shared_enqueued,
            nr_pinned_local: bpf.nr_pinned_local,
            nr_usersched_local: bpf.nr_usersched_local,
            nr_usersched_queued: bpf.nr_usersched_queued,
            nr_wakeup_preempts: bpf.nr_wakeup_preempts,
            nr_pinned_preempts: bpf.nr_pinned_preempts,
            nr_deferred_preempts: bpf.nr_deferred_preempts,
            nr_timer_preempts: bpf.nr_timer_preempts,
            nr_kthread_preempts: bpf.nr_kthread_preempts,
            nr_slices_shortened: bpf.nr_slices_shortened,
            nr_burst_keyed: bpf.nr_burst_keyed,
            nr_select_no_idle: bpf.nr_select_no_idle,
            nr_dispatch_affine: bpf.nr_dispatch_affine,
            nr_prev_kept: bpf.nr_prev_kept,
            nr_wake_queued: bpf.nr_wake_queued,
            nr_wake_stolen: bpf.nr_wake_stolen,
            nr_wake_balanced: bpf.nr_wake_balanced,
            nr_hint_shared: bpf.nr_hint_shared,
            nr_hint_wake: bpf.nr_hint_wake,
            nr_hint_wake_by_cpu: bpf.nr_hint_wake_by_cpu.clone(),
            nr_waits_short: bpf.nr_waits_short,
            wait_ns_short: bpf.wait_ns_short,
            nr_waits_long: bpf.nr_waits_long,
            wait_ns_long: bpf.wait_ns_long,
            events_received: user.events_received,
            events_dropped_queue: user.events_dropped_queue,
            inferences: user.inferences,
            tasks_predicted: user.tasks_predicted,
            inference_errors: user.inference_errors,
            inferences_over_budget: user.inferences_over_budget,
            inference_pauses: user.inference_pauses,
            inference_pauses_redundant: user.inference_pauses_redundant,
            inferences_paused: user.inferences_paused,
            predictions_written: user.predictions_written,
            map_update_errors: user.map_update_errors,
            inference_us_p50: user.inference_us_p50.unwrap_or(0.0),
            inference_us_p99: user.inference_us_p99.unwrap_or(0.0),
        }
    }

    /// The change since `prev`: every counter minus its value in `prev`; the gauges (mode,
    /// uptime, tasks waiting, inference latency) as in `self`.
    pub fn delta(&self, prev: &Self) -> Self {
        counter_delta!(self, prev;
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
            map_update_errors,
        )
    }

    /// Writes the metrics as three lines for `--stats` and `--monitor` (counters as they are:
    /// the change over the interval when they come from the stats server).
    pub fn format<W: Write>(&self, w: &mut W) -> Result<()> {
        let us = |v: f64| {
            if v > 0.0 {
                format!("{v:.1}")
            } else {
                "-".into()
            }
        };
        let mean_us = |n: u64, ns: u64| {
            us(if n > 0 {
                ns as f64 / n as f64 / 1e3
            } else {
                0.0
            })
        };
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
            mean_us(self.nr_waits_short, self.wait_ns_short),
            mean_us(self.nr_waits_long, self.wait_ns_long),
        )?;
        Ok(())
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
    use crate::stats::{BpfCounters, UserSnapshot};

    /// The fields that are current values, not counters.
    const GAUGES: [&str; 7] = [
        "mode",
        "uptime_s",
        "nr_hint_shared",
        "nr_hint_wake",
        "nr_hint_wake_by_cpu",
        "inference_us_p50",
        "inference_us_p99",
    ];

    /// Metrics whose every number is `v`.
    fn all_numbers(v: u64) -> Metrics {
        let mut json = serde_json::to_value(Metrics {
            nr_hint_wake_by_cpu: vec![0, 0],
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
    fn metrics_carry_the_stats_file_counters() {
        let bpf = BpfCounters {
            nr_pred_applied: 5,
            nr_pred_missing: 2,
            nr_pred_busy: 1,
            nr_waits_long: 4,
            wait_ns_long: 8_000,
            nr_hint_wake_by_cpu: vec![1, 2],
            ..Default::default()
        };
        let user = UserSnapshot {
            inferences: 9,
            inference_us_p50: Some(12.5),
            ..Default::default()
        };
        let snap = StatsSnapshot::new("model", None, 3.0, bpf, user);
        let m = Metrics::from_snapshot(&snap);
        assert_eq!(
            (m.mode.as_str(), m.uptime_s, m.fallbacks, m.nr_pred_applied),
            ("model", 3.0, 3, 5)
        );
        assert_eq!(
            (m.inferences, m.inference_us_p50, m.inference_us_p99),
            (9, 12.5, 0.0)
        );
        assert_eq!(m.nr_hint_wake_by_cpu, vec![1, 2]);
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
