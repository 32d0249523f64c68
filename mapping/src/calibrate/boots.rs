//! Comparisons across boots: one arm against its reference, paired within each boot.
//!
//! Runs within one boot of the lab VM agree to ~1 fps while the same expert moved by 14 fps
//! between boots (results/2026-11-29-calibrated-layers-pilot), so the spread of one boot's runs
//! understates the noise of a verdict. A boot offset moves every arm of that boot alike: the
//! difference arm − reference *within* a boot removes it, and the spread of those per-boot
//! differences is the noise a verdict across boots is held to.
//!
//! A run's boot is the kernel boot id the runner recorded with it
//! ([`asa_scenarios::runner::RunRecord::boot_id`]): runs of one boot in two results files are
//! one boot, and a results file resumed after a reboot holds two. A run without one (results
//! written before boot ids were recorded) falls back to its results file: each file's runs
//! without a boot id count as one boot of their own ([`BootKey`]).
//!
//! Invariant: a verdict needs 2 boots or more; with one, [`BootPairs::two_standard_errors`]
//! is `None` and the comparison is labelled as resting on one boot.

use std::collections::BTreeMap;

use asa_scenarios::runner::{ResultSet, RunRecord, ScenarioResult};
use asa_scenarios::stats;
use serde::{Deserialize, Serialize};

/// Which boot a run was made in.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum BootKey {
    /// The kernel's boot id recorded with the run.
    Id(String),
    /// No boot id recorded: the results file (its index among the sets read) stands for one
    /// boot.
    File(usize),
}

impl BootKey {
    /// The boot of `run`, a run of the `set`-th result set.
    pub fn of_run(set: usize, run: &RunRecord) -> Self {
        match &run.boot_id {
            Some(id) => BootKey::Id(id.clone()),
            None => BootKey::File(set),
        }
    }

    /// In a few words: `boot id 403d662f` or `results file 2 (no boot id)` (files from 1).
    pub fn describe(&self) -> String {
        match self {
            BootKey::Id(id) => format!("boot id {}", id.get(..8).unwrap_or(id)),
            BootKey::File(set) => format!("results file {} (no boot id)", set + 1),
        }
    }
}

/// Numbers boots 0, 1, … in the order they are first met; the numbers are the boots of
/// [`BootUnit`] and [`BootPairs::per_boot`] (reports print them from 1).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BootNumbers {
    keys: Vec<BootKey>,
}

impl BootNumbers {
    /// The number of `key`, given the next free one when it is new.
    pub fn number(&mut self, key: BootKey) -> usize {
        match self.keys.iter().position(|k| *k == key) {
            Some(i) => i,
            None => {
                self.keys.push(key);
                self.keys.len() - 1
            }
        }
    }

    /// The boots numbered so far, by number.
    pub fn keys(&self) -> &[BootKey] {
        &self.keys
    }

    /// What each boot number stands for, one line: `boot 1: boot id 403d662f; boot 2: …`.
    pub fn legend(&self) -> String {
        self.keys
            .iter()
            .enumerate()
            .map(|(i, k)| format!("boot {}: {}", i + 1, k.describe()))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// The scored runs of `result` (a scenario of the `set`-th result set), given as its
/// `(expert, repetition, score)` ([`super::scored_runs`]), split by boot ([`BootKey::of_run`]),
/// each boot numbered by `boots`: per boot in order of its first run, its runs with a score as
/// (expert, score). Runs without a score (skipped, invalid) are left out.
pub fn runs_by_boot(
    set: usize,
    result: &ScenarioResult,
    scored: &[(String, u32, Option<f64>)],
    boots: &mut BootNumbers,
) -> Vec<BootUnit> {
    let mut out: Vec<BootUnit> = Vec::new();
    for (expert, rep, score) in scored {
        let Some(score) = score else { continue };
        let key = result
            .runs
            .iter()
            .find(|r| r.expert == *expert && r.rep == *rep)
            .map_or(BootKey::File(set), |r| BootKey::of_run(set, r));
        let boot = boots.number(key);
        match out.iter_mut().find(|(b, _)| *b == boot) {
            Some((_, runs)) => runs.push((expert.clone(), *score)),
            None => out.push((boot, vec![(expert.clone(), *score)])),
        }
    }
    out
}

/// How many boots the valid runs of `sets` were made in ([`BootKey::of_run`]).
pub fn boots_spanned(sets: &[ResultSet]) -> usize {
    let mut boots = BootNumbers::default();
    for (i, set) in sets.iter().enumerate() {
        for run in set.scenarios.iter().flat_map(|s| &s.runs) {
            if run.valid {
                boots.number(BootKey::of_run(i, run));
            }
        }
    }
    boots.keys().len()
}

/// Whether stages prototype and live compare across boots
/// ([`super::PrototypeOptions::across_boots`]): when the valid runs of `sets` span 2 boots or
/// more. Within one boot there is no spread between boots to hold a verdict to, and the rows
/// stay as they were before boots were counted (no `boots`).
pub fn across_boots_for(sets: &[ResultSet]) -> bool {
    boots_spanned(sets) >= 2
}

/// The runs of one unit: a scenario measured in one boot, as (boot, [(expert, score)]).
pub type BootUnit = (usize, Vec<(String, f64)>);

/// An arm against its reference, paired within each boot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BootPairs {
    /// Per boot ([`BootNumbers`]) where both ran in a common scenario, the mean over those
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
    use asa_scenarios::runner::ScenarioResult;

    use super::*;
    use crate::budget::run::fixture::{empty_set, record, SCENARIO};
    use crate::calibrate::{prototype, PrototypeOptions};

    /// One repetition of S20: its runs' boot id (None: not recorded) and each expert's
    /// response time in ms.
    type Rep<'a> = (Option<&'a str>, &'a [(&'a str, f64)]);

    /// A results file of S20 with `reps`, one after the other.
    fn results(reps: &[Rep]) -> ResultSet {
        let experts: Vec<&str> = reps[0].1.iter().map(|(e, _)| *e).collect();
        let mut set = empty_set(&experts, reps.len() as u32);
        set.scenarios.push(ScenarioResult {
            scenario: SCENARIO.into(),
            title: "Web Browsing & Network Transfer".into(),
            probe: "web".into(),
            runs: reps
                .iter()
                .enumerate()
                .flat_map(|(rep, (boot, levels))| {
                    levels.iter().map(move |(e, ms)| {
                        let mut run = record(e, rep as u32, *ms);
                        run.boot_id = boot.map(str::to_owned);
                        run
                    })
                })
                .collect(),
            error: None,
            skipped: Vec::new(),
        });
        set
    }

    const LEVELS: &[(&str, f64)] = &[("good", 40.0), ("stay", 250.0)];

    /// The prototype of `sets` compared across boots: its one class row's boots and the boots
    /// it numbered.
    fn across(sets: &[ResultSet]) -> (Option<u32>, BootNumbers) {
        let opts = PrototypeOptions {
            stay: Some("stay".into()),
            noise_floor: Some(0.01),
            across_boots: true,
            ..PrototypeOptions::default()
        };
        let machine =
            crate::machine_fingerprint(&sets[0].machine, &asa_experts::Catalogue::builtin());
        let proto = prototype(sets, machine, String::new(), &opts).unwrap();
        (proto.table.classes[0].boots, proto.boots)
    }

    #[test]
    fn runs_of_one_boot_in_two_files_are_one_boot() {
        let a = results(&[
            (Some("0a1b2c3d-aaaa"), LEVELS),
            (Some("0a1b2c3d-aaaa"), LEVELS),
        ]);
        let b = results(&[(Some("0a1b2c3d-aaaa"), LEVELS)]);
        let sets = [a, b];
        assert_eq!(boots_spanned(&sets), 1);
        assert!(!across_boots_for(&sets));
        let (row, boots) = across(&sets);
        assert_eq!(row, Some(1));
        assert_eq!(boots.legend(), "boot 1: boot id 0a1b2c3d");
    }

    /// A folder resumed after a reboot: repetition 0 in one boot, 1 in the next, every arm
    /// slower there. One file, two boots, each paired within itself.
    #[test]
    fn a_resumed_results_set_after_a_reboot_is_two_boots() {
        let set = results(&[
            (Some("boot-a"), LEVELS),
            (Some("boot-b"), &[("good", 60.0), ("stay", 300.0)]),
        ]);
        let sets = [set];
        assert_eq!(boots_spanned(&sets), 2);
        assert!(across_boots_for(&sets));
        let (row, boots) = across(&sets);
        assert_eq!(row, Some(2));
        assert_eq!(
            boots.keys(),
            [BootKey::Id("boot-a".into()), BootKey::Id("boot-b".into())]
        );
        // The scenario's runs split into one unit per boot, each holding its boot's arms.
        let result = &sets[0].scenarios[0];
        let scored: Vec<(String, u32, Option<f64>)> = result
            .runs
            .iter()
            .map(|r| (r.expert.clone(), r.rep, Some(f64::from(r.rep))))
            .collect();
        let mut numbers = BootNumbers::default();
        let units = runs_by_boot(0, result, &scored, &mut numbers);
        let split: Vec<(usize, Vec<String>)> = units
            .iter()
            .map(|(boot, runs)| (*boot, runs.iter().map(|(e, _)| e.clone()).collect()))
            .collect();
        let arms = vec!["good".to_string(), "stay".to_string()];
        assert_eq!(split, [(0, arms.clone()), (1, arms)]);
    }

    /// Results written before boot ids were recorded: each file is one boot, as before.
    #[test]
    fn results_without_boot_ids_count_one_boot_per_file() {
        let old = || results(&[(None, LEVELS), (None, LEVELS)]);
        assert_eq!(boots_spanned(&[old()]), 1);
        assert_eq!(across(&[old()]).0, Some(1));
        let (row, boots) = across(&[old(), old()]);
        assert_eq!(row, Some(2));
        assert_eq!(
            boots.legend(),
            "boot 1: results file 1 (no boot id); boot 2: results file 2 (no boot id)"
        );
    }

    /// A file resumed by this build after runs of an older one: the old runs are their file's
    /// boot, the new ones their boot id's, also in another file.
    #[test]
    fn runs_without_a_boot_id_count_as_their_files_boot_beside_runs_with_one() {
        let mixed = results(&[(None, LEVELS), (Some("boot-a"), LEVELS)]);
        let later = results(&[(Some("boot-a"), LEVELS)]);
        let (row, boots) = across(&[mixed, later]);
        assert_eq!(row, Some(2));
        assert_eq!(
            boots.keys(),
            [BootKey::File(0), BootKey::Id("boot-a".into())]
        );
    }

    /// Only valid runs count: an expert ejected in a second boot adds no boot.
    #[test]
    fn an_invalid_run_adds_no_boot() {
        let mut set = results(&[(Some("boot-a"), LEVELS), (Some("boot-b"), LEVELS)]);
        for run in &mut set.scenarios[0].runs {
            run.valid = run.boot_id.as_deref() == Some("boot-a");
        }
        assert_eq!(boots_spanned(&[set]), 1);
    }

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
