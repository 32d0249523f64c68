//! Audio-like probe: a periodic deadline task standing for PulseAudio mixing several tracks
//! with effects. Every `period_ms` the mixer thread wakes at an absolute deadline, computes
//! `compute_ms` of calibrated work (the mix + effects of one period), and hands the buffer to
//! the "device". The device holds `buffer_periods` periods: the buffer woken at `t` must be
//! ready by `t + buffer_periods · period`, otherwise the device plays silence (an underrun,
//! heard as a click). After an underrun the stream restarts its timeline from now, as ALSA's
//! xrun recovery does.
//!
//! Metrics: underruns (count and per minute), compute latency (wake deadline to buffer ready,
//! includes the wake-up delay) and wake latency (deadline to the thread running).
//!
//! Limits: no sound card, no IPC between client and server, no real DSP data; one mixer thread
//! where PulseAudio has a client and a server thread. It measures how well the scheduler
//! serves a short, frequent, deadline-bound task under contention.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::{positive, running, ProbeOutput};
use crate::clock::{ms_between, now_ns, sleep_until_ns};
use crate::work::WorkUnit;

/// Summary metrics of the audio probe.
pub const SUMMARY: &[(&str, &str)] = &[
    ("underruns", "count"),
    ("underruns_per_min", "1/min"),
    ("compute_latency_p50_ms", "ms"),
    ("compute_latency_p99_ms", "ms"),
    ("wake_latency_p99_ms", "ms"),
];

/// Raw-sample series of the audio probe.
pub const SAMPLES: &[(&str, &str)] = &[("compute_latency_ms", "ms"), ("wake_latency_ms", "ms")];

/// Settings of the audio probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AudioSettings {
    /// Period of the mixer (ms).
    pub period_ms: f64,
    /// Calibrated CPU work per period (ms).
    pub compute_ms: f64,
    /// Periods of buffering the device holds.
    pub buffer_periods: f64,
}

impl Default for AudioSettings {
    fn default() -> Self {
        Self {
            period_ms: 5.0,
            compute_ms: 1.0,
            buffer_periods: 2.0,
        }
    }
}

impl AudioSettings {
    /// Check ranges.
    pub fn validate(&self) -> Result<()> {
        positive("period_ms", self.period_ms)?;
        positive("compute_ms", self.compute_ms)?;
        positive("buffer_periods", self.buffer_periods)?;
        if self.compute_ms >= self.period_ms {
            anyhow::bail!(
                "probe setting `compute_ms` ({}) must be below `period_ms` ({})",
                self.compute_ms,
                self.period_ms
            );
        }
        Ok(())
    }
}

/// Run the audio probe on the calling thread.
pub fn run(
    s: &AudioSettings,
    duration: Duration,
    work: WorkUnit,
    stop: &Arc<AtomicBool>,
) -> Result<ProbeOutput> {
    let start = now_ns();
    let end = start + duration.as_nanos() as u64;
    let period = (s.period_ms * 1e6) as u64;
    let budget = (s.buffer_periods * s.period_ms * 1e6) as u64;
    let mut compute = Vec::new();
    let mut wake = Vec::new();
    let mut underruns = 0u64;
    let mut due = start + period;
    while running(stop, end) {
        sleep_until_ns(due);
        let woke = now_ns();
        std::hint::black_box(work.spin(s.compute_ms));
        let ready = now_ns();
        wake.push(ms_between(due, woke));
        compute.push(ms_between(due, ready));
        if ready > due + budget {
            underruns += 1;
            due = ready + period; // xrun recovery: restart the stream timeline
        } else {
            due += period;
        }
    }
    let elapsed_s = ms_between(start, now_ns()) / 1e3;
    let mut out = ProbeOutput {
        kind: "audio".into(),
        elapsed_s,
        ..Default::default()
    };
    out.summary.insert("underruns".into(), underruns as f64);
    if elapsed_s > 0.0 {
        out.summary.insert(
            "underruns_per_min".into(),
            underruns as f64 * 60.0 / elapsed_s,
        );
    }
    out.add_percentiles("compute_latency", &compute);
    if let Some(p99) = crate::stats::percentile(&wake, 99.0) {
        out.summary.insert("wake_latency_p99_ms".into(), p99);
    }
    out.samples.insert("compute_latency_ms".into(), compute);
    out.samples.insert("wake_latency_ms".into(), wake);
    Ok(out)
}
