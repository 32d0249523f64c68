//! Web-like probe: a page that reacts to bursts of clicks, standing for a browser tab driven
//! by Selenium with JavaScript timers (the paper's method). Four threads, as in a browser:
//!
//! * input: delivers interactions on a fixed pseudo-random timeline — bursts of
//!   `burst_min..=burst_max` clicks `in_burst_gap_ms` apart, then an idle gap of
//!   `idle_min_ms..idle_max_ms`;
//! * main: runs the event handler (`script_ms` of work), hands `worker_ms` of work to a web
//!   worker and waits for it (fetch + parse), then lays out (`layout_ms`);
//! * worker: the web worker;
//! * compositor: rasterises and presents the frame (`raster_ms`).
//!
//! Response time = present time − the time the click was due. Clicks that arrive while the
//! page is busy queue up, so a slow handler delays the next click, as on a real page.
//!
//! Limits: no network, DOM, GPU or garbage collector; the work is synthetic CPU work split over
//! the threads a browser would use. It measures the scheduler's latency for a chain of
//! wake-ups across threads under load.

use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use serde::{Deserialize, Serialize};

use super::{non_negative, positive, running, ProbeOutput};
use crate::clock::{ms_between, now_ns, sleep_until_ns, Rng};
use crate::work::WorkUnit;

/// Summary metrics of the web probe.
pub const SUMMARY: &[(&str, &str)] = &[
    ("response_p50_ms", "ms"),
    ("response_p99_ms", "ms"),
    ("response_mean_ms", "ms"),
    ("interactions", "count"),
];

/// Raw-sample series of the web probe.
pub const SAMPLES: &[(&str, &str)] = &[("response_ms", "ms")];

/// Settings of the web probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebSettings {
    /// Event-handler work on the main thread (ms).
    pub script_ms: f64,
    /// Work handed to the web worker (ms).
    pub worker_ms: f64,
    /// Layout work on the main thread after the worker answered (ms).
    pub layout_ms: f64,
    /// Raster work on the compositor thread (ms).
    pub raster_ms: f64,
    /// Fewest clicks in a burst.
    pub burst_min: u64,
    /// Most clicks in a burst.
    pub burst_max: u64,
    /// Gap between clicks of a burst (ms).
    pub in_burst_gap_ms: f64,
    /// Shortest idle gap between bursts (ms).
    pub idle_min_ms: f64,
    /// Longest idle gap between bursts (ms).
    pub idle_max_ms: f64,
    /// Seed of the interaction timeline.
    pub seed: u64,
}

impl Default for WebSettings {
    fn default() -> Self {
        Self {
            script_ms: 6.0,
            worker_ms: 8.0,
            layout_ms: 4.0,
            raster_ms: 3.0,
            burst_min: 1,
            burst_max: 4,
            in_burst_gap_ms: 60.0,
            idle_min_ms: 200.0,
            idle_max_ms: 600.0,
            seed: 42,
        }
    }
}

impl WebSettings {
    /// Check ranges.
    pub fn validate(&self) -> Result<()> {
        non_negative("script_ms", self.script_ms)?;
        non_negative("worker_ms", self.worker_ms)?;
        non_negative("layout_ms", self.layout_ms)?;
        positive("raster_ms", self.raster_ms)?;
        positive("in_burst_gap_ms", self.in_burst_gap_ms)?;
        positive("idle_min_ms", self.idle_min_ms)?;
        if self.burst_min == 0 || self.burst_max < self.burst_min {
            anyhow::bail!("probe settings need 1 <= `burst_min` <= `burst_max`");
        }
        if self.idle_max_ms < self.idle_min_ms {
            anyhow::bail!("probe setting `idle_max_ms` must be >= `idle_min_ms`");
        }
        Ok(())
    }
}

/// Run the web probe.
pub fn run(
    s: &WebSettings,
    duration: Duration,
    work: WorkUnit,
    stop: &Arc<AtomicBool>,
) -> Result<ProbeOutput> {
    let start = now_ns();
    let end = start + duration.as_nanos() as u64;
    let (to_main, main_rx) = mpsc::channel::<u64>();
    let (to_worker, worker_rx) = mpsc::channel::<u64>();
    let (worker_done, worker_done_rx) = mpsc::channel::<u64>();
    let (to_compositor, compositor_rx) = mpsc::channel::<u64>();

    let worker_ms = s.worker_ms;
    let worker = std::thread::Builder::new()
        .name("probe-web-worker".into())
        .spawn(move || {
            for due in worker_rx {
                std::hint::black_box(work.spin(worker_ms));
                if worker_done.send(due).is_err() {
                    break;
                }
            }
        })
        .context("spawning the web worker thread")?;
    let raster_ms = s.raster_ms;
    let compositor = std::thread::Builder::new()
        .name("probe-web-compositor".into())
        .spawn(move || {
            let mut responses = Vec::new();
            for due in compositor_rx {
                std::hint::black_box(work.spin(raster_ms));
                responses.push(ms_between(due, now_ns()));
            }
            responses
        })
        .context("spawning the web compositor thread")?;
    let (script_ms, layout_ms) = (s.script_ms, s.layout_ms);
    let main = std::thread::Builder::new()
        .name("probe-web-main".into())
        .spawn(move || {
            for due in main_rx {
                std::hint::black_box(work.spin(script_ms));
                if to_worker.send(due).is_err() || worker_done_rx.recv().is_err() {
                    break;
                }
                std::hint::black_box(work.spin(layout_ms));
                if to_compositor.send(due).is_err() {
                    break;
                }
            }
        })
        .context("spawning the web main thread")?;

    // Input: this thread delivers clicks on the timeline.
    let mut rng = Rng::new(s.seed);
    let mut due = start;
    'outer: while running(stop, end) {
        due += (rng.uniform(s.idle_min_ms, s.idle_max_ms) * 1e6) as u64;
        for i in 0..rng.int(s.burst_min, s.burst_max) {
            if i > 0 {
                due += (s.in_burst_gap_ms * 1e6) as u64;
            }
            if due >= end {
                break 'outer;
            }
            sleep_until_ns(due);
            if !running(stop, end) || to_main.send(due).is_err() {
                break 'outer;
            }
        }
    }
    drop(to_main);
    main.join()
        .map_err(|_| anyhow!("web main thread panicked"))?;
    worker
        .join()
        .map_err(|_| anyhow!("web worker thread panicked"))?;
    let responses = compositor
        .join()
        .map_err(|_| anyhow!("web compositor thread panicked"))?;

    let mut out = ProbeOutput {
        kind: "web".into(),
        elapsed_s: ms_between(start, now_ns()) / 1e3,
        ..Default::default()
    };
    out.add_percentiles("response", &responses);
    if let Some(m) = crate::stats::mean(&responses) {
        out.summary.insert("response_mean_ms".into(), m);
    }
    out.summary
        .insert("interactions".into(), responses.len() as f64);
    out.samples.insert("response_ms".into(), responses);
    Ok(out)
}
