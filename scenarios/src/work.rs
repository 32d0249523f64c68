//! A calibrated unit of CPU work, so a probe's "6 ms of frame work" means the same amount of
//! computation on any machine: 6 ms of *uncontended* time on this machine's cores.
//!
//! [`WorkUnit::calibrate`] times a fixed arithmetic kernel (a dependent integer/floating-point
//! chain that the compiler cannot remove, see [`std::hint::black_box`]) in short bursts with a
//! sleep between them, the way the probes run (a burst of frame work, then a wait), and keeps
//! the median burst. The runner calibrates once per run, on the idle machine and before any
//! background load starts, and reuses the same unit for every expert and repetition, so all
//! schedulers get exactly the same work. Under contention the same work takes longer: that
//! stretch is what the probes measure.
//!
//! Why the median of separated bursts and not the fastest of back-to-back batches (the first
//! design): in the lab VM (qemu TCG) the fastest of nine back-to-back 3 ms batches came out
//! bimodal between processes, about 24 000 or 42 000 iterations per ms (18 runs, 2026-11-27),
//! so the probes' work, their CPU share and the classifier's input changed 1.7x from one
//! `asa scenario run` to the next. Bursts after a sleep ran at 18 000-20 000 in every process;
//! their median stayed within 5 % across processes, and it is the speed the probes' own
//! bursts get. On a KVM guest (this project's 2-vCPU AMD EPYC host) the median was 4-5 % below
//! the fastest burst and within 1.3 % across five processes (459 000-471 000).

use std::hint::black_box;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::clock::now_ns;

/// The sleep before each calibration burst: about a frame's idle gap.
const BURST_GAP: Duration = Duration::from_millis(10);

/// The middle value of sorted, non-empty `values` (the mean of the two middle ones when even).
fn median(values: &[f64]) -> f64 {
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

/// Iterations of the kernel per millisecond of uncontended CPU time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WorkUnit {
    /// Kernel iterations that take one millisecond on an idle core.
    pub iterations_per_ms: f64,
}

/// The work kernel: `n` iterations of a dependent chain. Returns a value so it is not removed.
#[inline(never)]
fn kernel(n: u64, seed: u64) -> u64 {
    let mut x = seed | 1;
    let mut f = 1.000_001_f64;
    for i in 0..n {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i);
        f = f * 1.000_000_1 + (x >> 60) as f64 * 1e-9;
    }
    black_box(x ^ f.to_bits())
}

impl WorkUnit {
    /// Time the kernel in 31 bursts of about 3 ms, 10 ms apart (about 0.4 s), and keep the
    /// median burst.
    pub fn calibrate() -> Self {
        Self::calibrate_with(31, 3.0)
    }

    /// [`WorkUnit::calibrate`] with explicit burst count and length (bursts 10 ms apart).
    pub fn calibrate_with(batches: usize, batch_ms: f64) -> Self {
        Self::calibrate_spaced(batches, batch_ms, BURST_GAP)
    }

    /// [`WorkUnit::calibrate`] with explicit burst count, length and the sleep between bursts.
    pub fn calibrate_spaced(batches: usize, batch_ms: f64, gap: Duration) -> Self {
        // Find an iteration count that takes about batch_ms.
        let mut n: u64 = 10_000;
        loop {
            let t0 = now_ns();
            kernel(n, 1);
            let ms = (now_ns() - t0) as f64 / 1e6;
            if ms >= batch_ms / 4.0 || n > 1 << 40 {
                n = ((n as f64) * (batch_ms / ms.max(1e-3))).max(1000.0) as u64;
                break;
            }
            n *= 4;
        }
        let mut rates: Vec<f64> = (0..batches.max(1))
            .map(|b| {
                std::thread::sleep(gap);
                let t0 = now_ns();
                kernel(n, b as u64 + 2);
                n as f64 / ((now_ns() - t0) as f64 / 1e6).max(1e-6)
            })
            .collect();
        rates.sort_by(f64::total_cmp);
        let unit = Self {
            iterations_per_ms: median(&rates),
        };
        log::info!(
            "work unit calibrated: {:.0} iterations per ms (median of {} bursts; range {:.0}-{:.0})",
            unit.iterations_per_ms,
            rates.len(),
            rates[0],
            rates[rates.len() - 1]
        );
        unit
    }

    /// Do `ms` milliseconds' worth of uncontended work; returns a value to feed `black_box`.
    pub fn spin(&self, ms: f64) -> u64 {
        let n = (self.iterations_per_ms * ms.max(0.0)).round() as u64;
        kernel(n, 0x5eed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[1.0, 2.0, 10.0]), 2.0);
        assert_eq!(median(&[1.0, 2.0, 4.0, 10.0]), 3.0);
        assert_eq!(median(&[7.0]), 7.0);
    }

    #[test]
    fn spaced_calibration_without_a_gap_is_positive() {
        let unit = WorkUnit::calibrate_spaced(3, 1.0, Duration::ZERO);
        assert!(unit.iterations_per_ms > 0.0);
    }

    #[test]
    fn calibration_is_positive_and_spin_scales() {
        let unit = WorkUnit::calibrate_with(3, 2.0);
        assert!(unit.iterations_per_ms > 0.0);
        // Zero work takes (almost) no time; the result is still a value.
        black_box(unit.spin(0.0));
    }
}
