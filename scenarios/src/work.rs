//! A calibrated unit of CPU work, so a probe's "6 ms of frame work" means the same amount of
//! computation on any machine: 6 ms of *uncontended* time on this machine's cores.
//!
//! [`WorkUnit::calibrate`] times a fixed arithmetic kernel (a dependent integer/floating-point
//! chain that the compiler cannot remove, see [`std::hint::black_box`]) in several batches and
//! keeps the fastest batch, i.e. the one least disturbed by other tasks. The runner calibrates
//! once per run, on the idle machine and before any background load starts, and reuses the
//! same unit for every expert and repetition, so all schedulers get exactly the same work.
//! Under contention the same work takes longer: that stretch is what the probes measure.

use std::hint::black_box;

use serde::{Deserialize, Serialize};

use crate::clock::now_ns;

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
    /// Time the kernel in `batches` batches of about `batch_ms` each and keep the fastest.
    pub fn calibrate() -> Self {
        Self::calibrate_with(9, 3.0)
    }

    /// [`WorkUnit::calibrate`] with explicit batch count and length.
    pub fn calibrate_with(batches: usize, batch_ms: f64) -> Self {
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
        let mut best = f64::INFINITY;
        for b in 0..batches.max(1) {
            let t0 = now_ns();
            kernel(n, b as u64 + 2);
            best = best.min((now_ns() - t0) as f64 / 1e6);
        }
        let unit = Self {
            iterations_per_ms: n as f64 / best.max(1e-6),
        };
        log::info!(
            "work unit calibrated: {:.0} iterations per ms",
            unit.iterations_per_ms
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
    fn calibration_is_positive_and_spin_scales() {
        let unit = WorkUnit::calibrate_with(3, 2.0);
        assert!(unit.iterations_per_ms > 0.0);
        // Zero work takes (almost) no time; the result is still a value.
        black_box(unit.spin(0.0));
    }
}
