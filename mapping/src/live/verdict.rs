//! Verdicts that respect the noise: a scenario's agent score beats, ties or loses to another
//! expert's only by more than the measured run-to-run noise.
//!
//! Each (scenario, expert) cell is the mean of its repetitions with their sample spread. The
//! **noise floor** is the median spread of the static experts' cells measured at least twice
//! (a run without repetitions falls back to [`crate::calibrate::DEFAULT_NOISE_FLOOR`]). Two cells differ when
//! their means are further apart than max(noise floor, 2 standard errors of the difference),
//! a cell run once borrowing the floor as its spread — the rule the calibration's ranking
//! uses ([`crate::calibrate::rank`]), so a live report and a table agree on what is noise.
//! Pure logic: cells in, verdicts out.

use serde::{Deserialize, Serialize};

use crate::calibrate::{
    cell_stats, difference_threshold, noise_estimate, CellStats, NoiseEstimate,
};

/// How one cell compares with another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Higher by more than the threshold.
    Win,
    /// Within the threshold.
    Tie,
    /// Lower by more than the threshold.
    Loss,
}

/// Wins, ties and losses counted by [`Verdict`] (one per scenario).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerdictCount {
    /// Scenarios won beyond the noise.
    pub wins: u32,
    /// Scenarios within the noise.
    pub ties: u32,
    /// Scenarios lost beyond the noise.
    pub losses: u32,
}

impl VerdictCount {
    /// Adds one verdict.
    pub fn add(&mut self, v: Verdict) {
        match v {
            Verdict::Win => self.wins += 1,
            Verdict::Tie => self.ties += 1,
            Verdict::Loss => self.losses += 1,
        }
    }

    /// wins / verdicts (None without verdicts).
    pub fn win_rate(&self) -> Option<f64> {
        let n = self.wins + self.ties + self.losses;
        (n > 0).then(|| f64::from(self.wins) / f64::from(n))
    }
}

/// A cell from its repetitions' scores: mean and sample spread (0 for one run); None for none.
pub fn cell(expert: &str, scores: &[f64]) -> Option<CellStats> {
    (!scores.is_empty()).then(|| cell_stats(expert, scores))
}

/// The noise floor from the cells measured at least twice: their median spread.
pub fn noise_floor<'a>(cells: impl IntoIterator<Item = &'a CellStats>) -> NoiseEstimate {
    let spreads: Vec<f64> = cells
        .into_iter()
        .filter(|c| c.runs >= 2)
        .map(|c| c.spread)
        .collect();
    noise_estimate(&spreads, "static cells")
}

/// How `a` compares with `b` beyond the noise.
pub fn compare(a: &CellStats, b: &CellStats, floor: f64) -> Verdict {
    let t = difference_threshold(a, b, floor);
    let d = a.mean - b.mean;
    if d > t {
        Verdict::Win
    } else if d < -t {
        Verdict::Loss
    } else {
        Verdict::Tie
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(mean: f64, spread: f64, runs: u32) -> CellStats {
        CellStats {
            expert: "x".into(),
            mean,
            spread,
            runs,
        }
    }

    #[test]
    fn a_cell_is_the_mean_and_sample_spread_of_its_runs() {
        let x = cell("bpfland", &[0.4, 0.6]).unwrap();
        assert!((x.mean - 0.5).abs() < 1e-12);
        assert!((x.spread - 0.141_421_356).abs() < 1e-6, "{}", x.spread);
        assert_eq!(x.runs, 2);
        assert_eq!(cell("lavd", &[0.3]).unwrap().spread, 0.0);
        assert!(cell("rusty", &[]).is_none());
    }

    #[test]
    fn the_noise_floor_is_the_median_spread_of_repeated_cells() {
        let cells = [
            c(0.5, 0.02, 2),
            c(0.5, 0.04, 2),
            c(0.5, 0.10, 3),
            c(0.5, 0.9, 1),
        ];
        let n = noise_floor(&cells);
        assert!((n.floor - 0.04).abs() < 1e-12, "{n:?}");
        assert!(n.source.contains("3 static cells"));
    }

    #[test]
    fn without_repetitions_the_floor_is_the_default() {
        let n = noise_floor(&[c(0.5, 0.0, 1)]);
        assert_eq!(n.floor, crate::calibrate::DEFAULT_NOISE_FLOOR);
    }

    #[test]
    fn a_lead_within_the_floor_is_a_tie() {
        assert_eq!(
            compare(&c(0.52, 0.0, 2), &c(0.50, 0.0, 2), 0.03),
            Verdict::Tie
        );
        assert_eq!(
            compare(&c(0.54, 0.0, 2), &c(0.50, 0.0, 2), 0.03),
            Verdict::Win
        );
        assert_eq!(
            compare(&c(0.46, 0.0, 2), &c(0.50, 0.0, 2), 0.03),
            Verdict::Loss
        );
    }

    #[test]
    fn scattered_repetitions_widen_the_threshold_beyond_the_floor() {
        // spreads 0.1 over 2 runs each: 2 * sqrt(0.005 + 0.005) = 0.2
        let (a, b) = (c(0.65, 0.1, 2), c(0.50, 0.1, 2));
        assert!((difference_threshold(&a, &b, 0.03) - 0.2).abs() < 1e-12);
        assert_eq!(compare(&a, &b, 0.03), Verdict::Tie);
    }

    #[test]
    fn a_single_run_borrows_the_floor_as_its_spread() {
        // 2 * sqrt(0.05² + 0.05²) = 0.1414
        let t = difference_threshold(&c(0.6, 0.0, 1), &c(0.5, 0.0, 1), 0.05);
        assert!((t - 0.141_421_356).abs() < 1e-6, "{t}");
    }

    #[test]
    fn counts_give_a_win_rate_over_every_verdict() {
        let mut n = VerdictCount::default();
        for v in [Verdict::Win, Verdict::Win, Verdict::Tie, Verdict::Loss] {
            n.add(v);
        }
        assert_eq!((n.wins, n.ties, n.losses), (2, 1, 1));
        assert_eq!(n.win_rate(), Some(0.5));
        assert_eq!(VerdictCount::default().win_rate(), None);
    }
}
