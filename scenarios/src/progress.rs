//! Progress of a long run on the console: which step of how many, the time elapsed and an
//! estimate of the time left (the mean time of the finished steps times the steps left).
//! [`progress_line`] is pure (the caller passes the elapsed time); [`Progress`] keeps the clock.

use std::time::{Duration, Instant};

/// `3/24, 2m10s elapsed, about 15m10s left` for step `step` (1-based, starting now) of `total`
/// after `elapsed`; before any step has finished there is no estimate yet.
pub fn progress_line(step: usize, total: usize, elapsed: Duration) -> String {
    let finished = step.saturating_sub(1);
    let left = if finished == 0 {
        "no estimate yet".to_string()
    } else {
        let per_step = elapsed.as_secs_f64() / finished as f64;
        let remaining = total.saturating_sub(finished) as f64 * per_step;
        format!("about {} left", human(Duration::from_secs_f64(remaining)))
    };
    format!("{step}/{total}, {} elapsed, {left}", human(elapsed))
}

/// `1h02m`, `15m10s` or `42s`.
fn human(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

/// A run's steps against the wall clock since [`Progress::new`].
#[derive(Debug, Clone)]
pub struct Progress {
    total: usize,
    started: Instant,
}

impl Progress {
    /// A run of `total` steps starting now.
    pub fn new(total: usize) -> Self {
        Progress {
            total,
            started: Instant::now(),
        }
    }

    /// The line for step `step` (1-based), about to start.
    pub fn line(&self, step: usize) -> String {
        progress_line(step, self.total, self.started.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_step_has_no_estimate() {
        assert_eq!(
            progress_line(1, 24, Duration::from_secs(3)),
            "1/24, 3s elapsed, no estimate yet"
        );
    }

    #[test]
    fn the_estimate_is_the_mean_step_time_times_the_steps_left() {
        // 2 steps done in 60 s: 30 s a step, 22 left (the third starts now) → 11 min.
        assert_eq!(
            progress_line(3, 24, Duration::from_secs(60)),
            "3/24, 1m00s elapsed, about 11m00s left"
        );
    }

    #[test]
    fn long_runs_read_in_hours_and_minutes() {
        assert_eq!(
            progress_line(11, 20, Duration::from_secs(3725)),
            "11/20, 1h02m elapsed, about 1h02m left"
        );
    }
}
