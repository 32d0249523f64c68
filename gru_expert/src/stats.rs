//! The live counters of scx_gru's user-space side (the inference thread's, shared between
//! threads) and the window of model-run latencies behind their percentiles;
//! [`UserCounters::copy_into`] puts them in the [`Metrics`] that the stats server serves and
//! the stats file holds (see [`crate::metrics`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::metrics::Metrics;

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
    /// `--bpf-model`: the `model_seq` of the in-BPF model in the map (0: none).
    pub bpf_model_seq: AtomicU64,
    /// `--bpf-model`: models written into the map (the first included).
    pub bpf_model_installs: AtomicU64,
    /// `--bpf-model`: replacements refused by the checks (the model in use kept deciding).
    pub bpf_model_refused: AtomicU64,
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
            bpf_model_seq: AtomicU64::new(0),
            bpf_model_installs: AtomicU64::new(0),
            bpf_model_refused: AtomicU64::new(0),
        }
    }
}

impl UserCounters {
    /// Copies the counters, and the median and 99th percentile of the kept latencies in µs
    /// (0 before the first model run), into `metrics`.
    pub fn copy_into(&self, metrics: &mut Metrics) {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        metrics.events_received = load(&self.events_received);
        metrics.events_dropped_queue = load(&self.events_dropped_queue);
        metrics.inferences = load(&self.inferences);
        metrics.tasks_predicted = load(&self.tasks_predicted);
        metrics.inference_errors = load(&self.inference_errors);
        metrics.inferences_over_budget = load(&self.inferences_over_budget);
        metrics.inference_pauses = load(&self.inference_pauses);
        metrics.inference_pauses_redundant = load(&self.inference_pauses_redundant);
        metrics.inferences_paused = load(&self.inferences_paused);
        metrics.predictions_written = load(&self.predictions_written);
        metrics.map_update_errors = load(&self.map_update_errors);
        metrics.bpf_model_seq = load(&self.bpf_model_seq);
        metrics.bpf_model_installs = load(&self.bpf_model_installs);
        metrics.bpf_model_refused = load(&self.bpf_model_refused);
        let latency = self.latency.lock().unwrap_or_else(|e| e.into_inner());
        let us = |q: f64| latency.quantile(q).map_or(0.0, |ns| ns as f64 / 1000.0);
        metrics.inference_us_p50 = us(0.50);
        metrics.inference_us_p99 = us(0.99);
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
    fn the_counters_and_latencies_go_into_the_metrics() {
        let counters = UserCounters::default();
        let mut metrics = Metrics::default();
        counters.copy_into(&mut metrics);
        assert_eq!(
            (
                metrics.inferences,
                metrics.inference_us_p50,
                metrics.inference_us_p99
            ),
            (0, 0.0, 0.0),
            "no model run yet"
        );
        counters.inferences.store(3, Ordering::Relaxed);
        counters.map_update_errors.store(2, Ordering::Relaxed);
        counters.events_received.store(7, Ordering::Relaxed);
        counters.bpf_model_seq.store(2, Ordering::Relaxed);
        counters.bpf_model_refused.store(1, Ordering::Relaxed);
        for ns in [10_000, 20_000, 30_000] {
            counters.latency.lock().unwrap().record(ns);
        }
        counters.copy_into(&mut metrics);
        assert_eq!(
            (
                metrics.inferences,
                metrics.map_update_errors,
                metrics.events_received
            ),
            (3, 2, 7)
        );
        assert_eq!(
            (metrics.inference_us_p50, metrics.inference_us_p99),
            (20.0, 30.0)
        );
        assert_eq!((metrics.bpf_model_seq, metrics.bpf_model_refused), (2, 1));
    }
}
