//! Comparisons across boots: one arm against its reference, paired within each boot.
//!
//! Runs within one boot of the lab VM agree to ~1 fps while the same expert moved by 14 fps
//! between boots (results/2026-11-29-calibrated-layers-pilot), so the spread of one boot's runs
//! understates the noise of a verdict. A boot offset moves every arm of that boot alike: the
//! difference arm − reference *within* a boot removes it, and the spread of those per-boot
//! differences is the noise a verdict across boots is held to. Each result set (results file)
//! counts as one boot: the scenario runner records no boot identity.
//!
//! Invariant: a verdict needs 2 boots or more; with one, [`BootPairs::two_standard_errors`]
//! is `None` and the comparison is labelled as resting on one boot.

use std::collections::BTreeMap;

use asa_scenarios::stats;
use serde::{Deserialize, Serialize};

/// The runs of one unit: a scenario measured in one boot, as (boot, [(expert, score)]).
pub type BootUnit = (usize, Vec<(String, f64)>);

/// An arm against its reference, paired within each boot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BootPairs {
    /// Per boot (result set index) where both ran in a common scenario, the mean over those
    /// scenarios of (arm's mean score − reference's mean score), in boot order.
    pub per_boot: Vec<(usize, f64)>,
}

impl BootPairs {
    /// The boots the comparison rests on.
    pub fn boots(&self) -> u32 {
        self.per_boot.len() as u32
    }

    /// Mean of the per-boot differences (None without a boot).
    pub fn mean(&self) -> Option<f64> {
        let xs: Vec<f64> = self.per_boot.iter().map(|(_, d)| *d).collect();
        stats::mean(&xs)
    }

    /// Sample spread (n − 1) of the per-boot differences (None with fewer than 2 boots).
    pub fn spread(&self) -> Option<f64> {
        if self.per_boot.len() < 2 {
            return None;
        }
        let xs: Vec<f64> = self.per_boot.iter().map(|(_, d)| *d).collect();
        let n = xs.len() as f64;
        stats::std_dev(&xs).map(|sd| sd * (n / (n - 1.0)).sqrt())
    }

    /// 2 standard errors of the mean per-boot difference: what a gain must exceed to be more
    /// than the variation between boots (None with fewer than 2 boots: not known).
    pub fn two_standard_errors(&self) -> Option<f64> {
        self.spread()
            .map(|s| 2.0 * s / f64::from(self.boots()).sqrt())
    }
}

/// `arm` against `reference` over `units`: in each unit where both ran, the difference of
/// their mean scores; per boot, the mean of its units' differences. Boots where one of them
/// never ran in a common scenario are left out.
pub fn boot_pairs(units: &[BootUnit], arm: &str, reference: &str) -> BootPairs {
    let mean_of = |runs: &[(String, f64)], expert: &str| {
        let xs: Vec<f64> = runs
            .iter()
            .filter(|(e, _)| e == expert)
            .map(|(_, x)| *x)
            .collect();
        stats::mean(&xs)
    };
    let mut by_boot: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    for (boot, runs) in units {
        if let (Some(a), Some(r)) = (mean_of(runs, arm), mean_of(runs, reference)) {
            by_boot.entry(*boot).or_default().push(a - r);
        }
    }
    BootPairs {
        per_boot: by_boot
            .into_iter()
            .map(|(boot, ds)| (boot, stats::mean(&ds).expect("a boot holds a difference")))
            .collect(),
    }
}

/// The threshold a gain over the reference must exceed: `within` (the noise rule on the pooled
/// runs: max(noise floor, 2 standard errors of the difference)) and, with 2 boots or more, at
/// least 2 standard errors of the per-boot paired differences too.
pub fn across_boots_threshold(within: f64, pairs: &BootPairs) -> f64 {
    pairs
        .two_standard_errors()
        .map_or(within, |between| within.max(between))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(boot: usize, runs: &[(&str, f64)]) -> BootUnit {
        (
            boot,
            runs.iter().map(|(e, x)| (e.to_string(), *x)).collect(),
        )
    }

    /// Boot 1 runs everything 0.3 higher: the offset cancels within each boot.
    #[test]
    fn a_boot_offset_that_moves_every_arm_alike_cancels_in_the_pairs() {
        let units = [
            unit(0, &[("a", 0.50), ("ref", 0.40)]),
            unit(1, &[("a", 0.81), ("ref", 0.70)]),
        ];
        let p = boot_pairs(&units, "a", "ref");
        assert_eq!(p.boots(), 2);
        assert!((p.mean().unwrap() - 0.105).abs() < 1e-9, "{p:?}");
        // spread of (0.10, 0.11): 0.00707; 2 SE = 2 × 0.00707 / √2 = 0.01.
        assert!(
            (p.two_standard_errors().unwrap() - 0.01).abs() < 1e-9,
            "{p:?}"
        );
        assert!((across_boots_threshold(0.03, &p) - 0.03).abs() < 1e-12);
    }

    /// Per boot, the mean over its scenarios; a scenario only one of them ran is no pair.
    #[test]
    fn each_boot_contributes_the_mean_of_its_paired_scenarios() {
        let units = [
            unit(0, &[("a", 0.6), ("a", 0.8), ("ref", 0.5)]),
            unit(0, &[("a", 0.2), ("ref", 0.3)]),
            unit(0, &[("a", 0.9)]),
            unit(1, &[("ref", 0.4)]),
        ];
        let p = boot_pairs(&units, "a", "ref");
        assert_eq!(p.per_boot.len(), 1);
        assert!((p.per_boot[0].1 - 0.05).abs() < 1e-9, "{p:?}");
        assert_eq!(p.two_standard_errors(), None);
        assert_eq!(across_boots_threshold(0.04, &p), 0.04);
    }
}
