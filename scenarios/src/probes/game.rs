//! Game-like probe: a render loop paced to a display refresh plus a simulation tick thread,
//! standing for Minecraft's client (renders the view each frame) and its integrated server
//! (20 ticks per second of world simulation).
//!
//! Render thread: each frame does `frame_work_ms` of calibrated work (culling, draw-call
//! building), reads the latest simulation state, then waits for the next refresh deadline
//! (vsync). A frame that finishes after its deadline is shown immediately and the next
//! deadline moves to the next refresh slot after it (a missed vsync). The frame time is the
//! interval between two consecutive presents, as a frame-time overlay measures it.
//! Simulation thread: every `1/tick_hz` s it runs `tick_work_ms` of work; the tick's wall
//! time is recorded as MSPT (milliseconds per tick), and a late tick is followed at once by
//! the next one (catch-up, as Minecraft's server does).
//!
//! Limits: no GPU, no driver, no memory-bandwidth-heavy work; one render thread and one server
//! thread where the real game has several worker threads (chunk meshing, lighting). It measures
//! how the scheduler serves two periodic CPU-bound threads with deadlines, not rendering speed.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::{positive, running, ProbeOutput};
use crate::clock::{ms_between, now_ns, sleep_until_ns};
use crate::work::WorkUnit;

/// Summary metrics of the game probe.
pub const SUMMARY: &[(&str, &str)] = &[
    ("fps", "frames/s"),
    ("frame_time_p50_ms", "ms"),
    ("frame_time_p99_ms", "ms"),
    ("late_frame_share", "fraction"),
    ("tick_p50_ms", "ms"),
    ("tick_p99_ms", "ms"),
];

/// Raw-sample series of the game probe.
pub const SAMPLES: &[(&str, &str)] = &[("frame_time_ms", "ms"), ("tick_ms", "ms")];

/// Settings of the game probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GameSettings {
    /// Refresh rate the frame loop is paced to.
    pub target_fps: f64,
    /// Calibrated CPU work per frame (ms).
    pub frame_work_ms: f64,
    /// Simulation ticks per second.
    pub tick_hz: f64,
    /// Calibrated CPU work per tick (ms).
    pub tick_work_ms: f64,
    /// A frame is late when its frame time exceeds this many refresh periods.
    pub late_factor: f64,
}

impl Default for GameSettings {
    fn default() -> Self {
        Self {
            target_fps: 60.0,
            frame_work_ms: 5.0,
            tick_hz: 20.0,
            tick_work_ms: 10.0,
            late_factor: 1.5,
        }
    }
}

impl GameSettings {
    /// Check ranges.
    pub fn validate(&self) -> Result<()> {
        positive("target_fps", self.target_fps)?;
        positive("frame_work_ms", self.frame_work_ms)?;
        positive("tick_hz", self.tick_hz)?;
        positive("tick_work_ms", self.tick_work_ms)?;
        positive("late_factor", self.late_factor)
    }
}

/// Run the game probe.
pub fn run(
    s: &GameSettings,
    duration: Duration,
    work: WorkUnit,
    stop: &Arc<AtomicBool>,
) -> Result<ProbeOutput> {
    let start = now_ns();
    let end = start + duration.as_nanos() as u64;
    let world = Arc::new(AtomicU64::new(0));

    let tick_period = (1e9 / s.tick_hz) as u64;
    let tick_work = s.tick_work_ms;
    let (stop_t, world_t) = (stop.clone(), world.clone());
    let sim = std::thread::Builder::new()
        .name("probe-game-sim".into())
        .spawn(move || {
            let mut ticks = Vec::new();
            let mut next = now_ns();
            while running(&stop_t, end) {
                let t0 = now_ns();
                let v = work.spin(tick_work);
                world_t.fetch_add(v & 1, Ordering::Relaxed);
                let t1 = now_ns();
                ticks.push(ms_between(t0, t1));
                next += tick_period;
                if next < t1 {
                    next = t1; // behind: catch up with the next tick at once
                }
                sleep_until_ns(next.min(end));
            }
            ticks
        })
        .context("spawning the game simulation thread")?;

    let period = (1e9 / s.target_fps) as u64;
    let mut frame_times = Vec::new();
    let mut frames = 0u64;
    let mut last_present = now_ns();
    let first_present = last_present;
    let mut deadline = last_present + period;
    while running(stop, end) {
        let v = work.spin(s.frame_work_ms);
        std::hint::black_box(v ^ world.load(Ordering::Relaxed));
        let done = now_ns();
        if done <= deadline {
            sleep_until_ns(deadline);
        } else {
            // Missed the refresh: present now, aim at the next refresh slot after it.
            let missed = (done - deadline) / period + 1;
            deadline += missed * period;
        }
        let present = now_ns();
        frame_times.push(ms_between(last_present, present));
        last_present = present;
        frames += 1;
        deadline += period;
        if deadline <= present {
            deadline = present + period;
        }
    }
    let elapsed_s = ms_between(first_present, last_present) / 1e3;
    let ticks = sim
        .join()
        .map_err(|_| anyhow::anyhow!("the game simulation thread panicked"))?;

    let mut out = ProbeOutput {
        kind: "game".into(),
        elapsed_s: ms_between(start, now_ns()) / 1e3,
        ..Default::default()
    };
    if elapsed_s > 0.0 {
        out.summary.insert("fps".into(), frames as f64 / elapsed_s);
    }
    out.add_percentiles("frame_time", &frame_times);
    out.add_percentiles("tick", &ticks);
    if !frame_times.is_empty() {
        let late_limit = s.late_factor * 1e3 / s.target_fps;
        let late = frame_times.iter().filter(|&&t| t > late_limit).count();
        out.summary.insert(
            "late_frame_share".into(),
            late as f64 / frame_times.len() as f64,
        );
    }
    out.samples.insert("frame_time_ms".into(), frame_times);
    out.samples.insert("tick_ms".into(), ticks);
    Ok(out)
}
