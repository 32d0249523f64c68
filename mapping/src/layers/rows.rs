//! The table's layer rows from measured runs: per calibrated class, `layered` (the reference
//! plan: the default one, or a base table's) and the candidates that change that class alone, scored over the scenarios with an
//! application of the class and ranked with `layered` as the stay arm.
//!
//! Invariant: a row's policy is the reference plan's unless a candidate's mean score beats
//! `layered`'s by more than max(noise floor, 2 standard errors of the difference), the rule
//! stage prototype ranks experts by ([`crate::calibrate::rank`]), and, with runs from 2 boots
//! or more, by more than 2 standard errors of its per-boot differences to `layered`
//! ([`crate::calibrate::boot_pairs`]); a row from one boot says so (`boots = 1`).

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{anyhow, bail, Result};
use asa_experts::{Catalogue, Expert};
use asa_layers::{LayerPlan, LayerPolicy, OTHER_LAYER};
use asa_scenarios::runner::ResultSet;

use super::candidates::{plan_classes, plan_policy, scenario_classes};
use super::LAYERED;
use crate::calibrate::{
    across_boots_threshold, boot_pairs, cell_stats, centred_by_scenario, difference_threshold,
    noise_estimate, rank, runs_by_boot, scored_runs, stored_catalogue, BootNumbers, BootPairs,
    BootUnit, CellStats, NoiseEstimate,
};
use crate::{LayerRow, RankedExpert};

/// One scenario result's scored runs and the application classes in it.
#[derive(Debug, Clone, PartialEq)]
pub struct ScenarioRuns {
    /// Scenario name.
    pub scenario: String,
    /// The boot its runs were made in ([`BootNumbers`]: the runs' boot id, else their results
    /// file); a scenario result whose runs span two boots gives one entry per boot.
    pub boot: usize,
    /// The app classes of its probe and loads ([`super::scenario_classes`]).
    pub classes: BTreeSet<String>,
    /// Every valid run's (expert, UX score) of that boot, all the result's runs scored
    /// together.
    pub runs: Vec<(String, f64)>,
}

/// One arm of a class's comparison: an expert and the policy it gives the class.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerArm {
    /// Expert name.
    pub expert: String,
    /// The class's policy under it.
    pub policy: LayerPolicy,
}

/// Why a layer row says what it says.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerEvidence {
    /// The class.
    pub class: String,
    /// The scenarios scored (each with an application of the class; all for `other`).
    pub scenarios: Vec<String>,
    /// Every measured arm's cell, best mean first.
    pub cells: Vec<CellStats>,
    /// Every arm of the class (measured or not) and its policy.
    pub arms: Vec<LayerArm>,
    /// Best mean minus `layered`'s.
    pub gain: f64,
    /// The best-scoring arm other than `layered` (None when no candidate ran).
    pub challenger: Option<String>,
    /// The challenger against `layered`, paired within each boot.
    pub pairs: BootPairs,
    /// The boots the row rests on: those of `pairs`, or with no challenger those holding
    /// runs of `layered`.
    pub boots: u32,
    /// What a gain over `layered` had to exceed: max(noise floor, 2 standard errors of
    /// challenger − layered) and, with 2 boots or more, 2 standard errors of the per-boot
    /// differences.
    pub threshold: f64,
    /// True when a better-scoring candidate was within the threshold, so `layered` stays.
    pub kept_default: bool,
    /// The arm ranked first.
    pub chosen: String,
}

/// The layer rows and the evidence behind them.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerCalibration {
    /// One row per calibrated class, in the order asked for.
    pub rows: Vec<LayerRow>,
    /// One entry per row.
    pub evidence: Vec<LayerEvidence>,
    /// The noise floor used.
    pub noise: NoiseEstimate,
    /// The boots the scenarios' runs came from.
    pub boots: u32,
    /// What each boot number stands for (its boot id or results file).
    pub boot_numbers: BootNumbers,
}

/// True for an expert that is a variant of the layer plan (an expert other than `layered` with
/// policies of its own): a candidate, not an expert the agent can run for a whole machine.
/// `layered` itself is the reference arm even when it carries the policies of a base table
/// (`--layer-base`).
pub fn is_plan_variant(expert: &Expert) -> bool {
    expert.layer_plan && expert.name != LAYERED && !expert.layer_policies.is_empty()
}

/// The plan a layer-plan expert of a candidate catalogue runs: its `layer_policies` over the
/// default plan, as the scenario runner gives them; None when they do not fit the default plan
/// (a catalogue that loaded has been checked against it).
pub fn expert_plan(expert: &Expert) -> Option<LayerPlan> {
    asa_layers::default_plan()
        .with_policies(&expert.layer_policies)
        .ok()
}

/// The classes (and [`OTHER_LAYER`]) whose policy under `expert` differs from `plan`'s, with
/// the expert's policy for each: what a candidate changes relative to the reference plan.
pub fn changes_from(expert: &Expert, plan: &LayerPlan) -> BTreeMap<String, LayerPolicy> {
    let Some(own) = expert_plan(expert) else {
        return expert.layer_policies.clone();
    };
    plan_classes(plan)
        .into_iter()
        .filter_map(|class| {
            let mine = plan_policy(&own, &class)?;
            (plan_policy(plan, &class) != Some(mine)).then_some((class, mine))
        })
        .collect()
}

/// The reference plan of a candidate catalogue: the plan its `layered` entry runs (the
/// default plan, or a base table's rows over it).
pub fn reference_plan(catalogue: &Catalogue) -> Option<LayerPlan> {
    catalogue.get(LAYERED).and_then(expert_plan)
}

/// The arms of `class`: `layered` with `plan`'s policy for it, then every expert of
/// `catalogue` whose plan differs from `plan` in exactly that class, in catalogue order.
pub fn arms(catalogue: &Catalogue, plan: &LayerPlan, class: &str) -> Result<Vec<LayerArm>> {
    let policy = plan_policy(plan, class).ok_or_else(|| {
        anyhow!(
            "layer class {class:?} is not in the layer plan (its classes: {})",
            plan_classes(plan).join(", ")
        )
    })?;
    let mut arms = vec![LayerArm {
        expert: LAYERED.to_string(),
        policy,
    }];
    arms.extend(
        catalogue
            .experts()
            .iter()
            .filter(|e| is_plan_variant(e))
            .filter_map(|e| {
                let changes = changes_from(e, plan);
                (changes.len() == 1)
                    .then(|| changes.get(class).copied())
                    .flatten()
                    .map(|policy| LayerArm {
                        expert: e.name.clone(),
                        policy,
                    })
            }),
    );
    Ok(arms)
}

/// The classes `catalogue`'s single-class variants (plans that differ from `plan` in one class)
/// change, in `plan`'s order (`other` last).
pub fn varied_classes(catalogue: &Catalogue, plan: &LayerPlan) -> Vec<String> {
    let varied: BTreeSet<String> = catalogue
        .experts()
        .iter()
        .filter(|e| is_plan_variant(e))
        .map(|e| changes_from(e, plan))
        .filter(|changes| changes.len() == 1)
        .flat_map(|changes| changes.into_keys())
        .collect();
    plan_classes(plan)
        .into_iter()
        .filter(|c| varied.contains(c))
        .collect()
}

/// Every scenario result of `sets` with its scored runs (its runs scored together, as
/// stage prototype scores them), split by boot (the runs' boot id, else their results file,
/// numbered by `boots` in file order: [`runs_by_boot`]), and its application classes from the
/// catalogue stored with the set; failed results and results without a valid run go to
/// `left_out` with the reason.
pub fn scenario_runs(
    sets: &[ResultSet],
    boots: &mut BootNumbers,
    left_out: &mut Vec<(String, String)>,
) -> Result<Vec<ScenarioRuns>> {
    let mut out = Vec::new();
    for (i, set) in sets.iter().enumerate() {
        let catalogue = stored_catalogue(set, &format!("result set {i}"))?;
        for result in &set.scenarios {
            if let Some(e) = &result.error {
                left_out.push((result.scenario.clone(), format!("failed: {e}")));
                continue;
            }
            let spec = catalogue.scenario(&result.scenario)?;
            let by_boot = runs_by_boot(i, result, &scored_runs(&catalogue, result)?, boots);
            if by_boot.is_empty() {
                left_out.push((result.scenario.clone(), "no valid run".into()));
                continue;
            }
            let classes = scenario_classes(&catalogue, spec)?;
            out.extend(by_boot.into_iter().map(|(boot, runs)| ScenarioRuns {
                scenario: result.scenario.clone(),
                boot,
                classes: classes.clone(),
                runs,
            }));
        }
    }
    Ok(out)
}

/// The noise floor: `given`, else the median run-to-run spread of the (scenario, arm) cells
/// with 2+ runs among `arms` (0.03 without one: [`crate::calibrate::DEFAULT_NOISE_FLOOR`]).
pub fn layer_noise(
    scenarios: &[ScenarioRuns],
    arms: &BTreeSet<&str>,
    given: Option<f64>,
) -> NoiseEstimate {
    if let Some(floor) = given {
        return NoiseEstimate {
            floor,
            source: "given (--noise-floor)".into(),
        };
    }
    let mut spreads = Vec::new();
    for s in scenarios {
        let mut cells: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for (expert, x) in &s.runs {
            if arms.contains(expert.as_str()) {
                cells.entry(expert).or_default().push(*x);
            }
        }
        spreads.extend(
            cells
                .iter()
                .filter(|(_, xs)| xs.len() >= 2)
                .map(|(e, xs)| cell_stats(e, xs).spread),
        );
    }
    noise_estimate(&spreads, "(scenario, layer-plan expert) cells")
}

/// One row per class of `classes` from `scenarios` measured with `catalogue`'s candidates
/// (their boots numbered by `boots`, kept for the report):
///
/// * arms: [`arms`] — `layered` (`plan`'s policy) and the candidates changing that class only;
/// * scenarios: those with an application of the class ([`ScenarioRuns::classes`]); every
///   scenario for [`OTHER_LAYER`], whose layer holds every unclassified task in every run;
/// * scores: each arm's runs in those scenarios, centred by (boot, scenario)
///   ([`centred_by_scenario`]), as a cell (mean, sample spread, runs: [`cell_stats`]);
/// * ranking: by mean, except that `layered` stays first unless the best arm beats it by more
///   than the threshold: max(noise floor, 2 standard errors of the difference) — the noise
///   floor of [`layer_noise`] (`noise_floor`, else measured) — and, with runs of both in 2
///   boots or more, 2 standard errors of their per-boot paired differences ([`boot_pairs`]);
/// * row: `policy` = the first arm's policy, `ranked` = the ranked cells, `noise` = that
///   threshold for the best other arm (at least the floor), `margin` = first mean − best other
///   mean (none with one arm), `boots` = the boots the comparison rests on (1: one boot's
///   runs, no verdict across boots).
///
/// A class whose scenarios hold no scored run of `layered` is an error naming the class.
pub fn layer_rows(
    scenarios: &[ScenarioRuns],
    boots: &BootNumbers,
    catalogue: &Catalogue,
    plan: &LayerPlan,
    classes: &[String],
    noise_floor: Option<f64>,
) -> Result<LayerCalibration> {
    let per_class: Vec<(&String, Vec<LayerArm>)> = classes
        .iter()
        .map(|c| Ok((c, arms(catalogue, plan, c)?)))
        .collect::<Result<_>>()?;
    let every_arm: BTreeSet<&str> = per_class
        .iter()
        .flat_map(|(_, arms)| arms.iter().map(|a| a.expert.as_str()))
        .collect();
    let noise = layer_noise(scenarios, &every_arm, noise_floor);
    let mut rows = Vec::new();
    let mut evidence = Vec::new();
    for (class, arms) in per_class {
        let names: BTreeSet<&str> = arms.iter().map(|a| a.expert.as_str()).collect();
        let mut used: Vec<String> = Vec::new();
        let mut units: Vec<BootUnit> = Vec::new();
        for s in scenarios {
            if class != OTHER_LAYER && !s.classes.contains(class) {
                continue;
            }
            let runs: Vec<(String, f64)> = s
                .runs
                .iter()
                .filter(|(e, _)| names.contains(e.as_str()))
                .cloned()
                .collect();
            if runs.is_empty() {
                continue;
            }
            if !used.contains(&s.scenario) {
                used.push(s.scenario.clone());
            }
            units.push((s.boot, runs));
        }
        if !units.iter().flat_map(|(_, r)| r).any(|(e, _)| e == LAYERED) {
            bail!(
                "layer class {class:?}: no scored run of {LAYERED} (the default plan) in {}: a \
                 class's candidates are compared with {LAYERED} on the same scenarios; measure \
                 {LAYERED} there too, or leave the class out of --layer-classes",
                if used.is_empty() {
                    "any scenario with an application of the class".to_string()
                } else {
                    format!("its scenarios ({})", used.join(", "))
                }
            );
        }
        let per_scenario: Vec<Vec<(String, f64)>> =
            units.iter().map(|(_, runs)| runs.clone()).collect();
        let cells: Vec<CellStats> = centred_by_scenario(&per_scenario)
            .iter()
            .map(|(e, xs)| cell_stats(e, xs))
            .collect();
        // Sorted by mean, best first (ties by name).
        let cells = rank(cells, LAYERED, noise.floor).cells;
        let default = cells
            .iter()
            .find(|c| c.expert == LAYERED)
            .expect("layered has runs here");
        let challenger = cells.iter().find(|c| c.expert != LAYERED);
        let (pairs, threshold) = match challenger {
            Some(c) => {
                let pairs = boot_pairs(&units, &c.expert, LAYERED);
                let within = difference_threshold(c, default, noise.floor);
                let threshold = across_boots_threshold(within, &pairs);
                (pairs, threshold)
            }
            None => (
                BootPairs {
                    per_boot: Vec::new(),
                },
                noise.floor,
            ),
        };
        let boots = match challenger {
            Some(_) => pairs.boots(),
            None => units
                .iter()
                .map(|(boot, _)| *boot)
                .collect::<BTreeSet<_>>()
                .len() as u32,
        };
        let gain = cells[0].mean - default.mean;
        // A challenger that never ran in a boot with `layered` differs from it by the boots'
        // offsets as much as by its policy: the default stays, the gain counted as noise.
        let threshold = if challenger.is_some() && boots == 0 {
            threshold.max(gain)
        } else {
            threshold
        };
        let kept_default = cells[0].expert != LAYERED && gain <= threshold;
        let mut ordered = cells.clone();
        if kept_default {
            let at = ordered
                .iter()
                .position(|c| c.expert == LAYERED)
                .expect("a cell");
            let moved = ordered.remove(at);
            ordered.insert(0, moved);
        }
        let first = &ordered[0];
        let policy = arms
            .iter()
            .find(|a| a.expert == first.expert)
            .expect("every cell is an arm's")
            .policy;
        let margin = ordered[1..]
            .iter()
            .map(|c| c.mean)
            .max_by(f64::total_cmp)
            .map(|runner_up| first.mean - runner_up);
        rows.push(LayerRow {
            class: class.clone(),
            policy,
            ranked: ordered
                .iter()
                .map(|c| RankedExpert {
                    expert: c.expert.clone(),
                    score: c.mean,
                    spread: c.spread,
                    runs: c.runs,
                })
                .collect(),
            noise: threshold,
            margin,
            boots,
        });
        evidence.push(LayerEvidence {
            class: class.clone(),
            scenarios: used,
            chosen: first.expert.clone(),
            challenger: challenger.map(|c| c.expert.clone()),
            cells,
            arms,
            gain,
            pairs,
            boots,
            threshold,
            kept_default,
        });
    }
    Ok(LayerCalibration {
        rows,
        evidence,
        noise,
        boots: scenarios
            .iter()
            .map(|s| s.boot)
            .collect::<BTreeSet<_>>()
            .len() as u32,
        boot_numbers: boots.clone(),
    })
}

/// `sets` without the runs of `catalogue`'s layer-plan variants (the candidates): the runs of
/// `layered` and the whole-machine experts, for the table's class rows.
pub fn without_variants(sets: &[ResultSet], catalogue: &Catalogue) -> Vec<ResultSet> {
    let variant = |name: &str| catalogue.get(name).is_some_and(is_plan_variant);
    sets.iter()
        .map(|set| {
            let mut set = set.clone();
            set.options.experts.retain(|e| !variant(e));
            for result in &mut set.scenarios {
                result.runs.retain(|r| !variant(&r.expert));
                result.skipped.retain(|s| !variant(&s.expert));
            }
            set
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rows written into the built-in table parse back (the table's own checks accept them).
    fn assert_a_table_takes(rows: &[LayerRow]) {
        crate::MappingTable::parse(
            &crate::MappingTable {
                layers: rows.to_vec(),
                ..crate::MappingTable::builtin_default().unwrap()
            }
            .to_toml()
            .unwrap(),
            "t",
        )
        .unwrap();
    }
    use crate::layers::{candidate_catalogue, candidates, markdown};

    fn catalogue() -> Catalogue {
        let plan = asa_layers::default_plan();
        let classes: Vec<String> = ["interactive", "cpu_batch", "other"]
            .iter()
            .map(|c| c.to_string())
            .collect();
        let cands = candidates(&plan, &classes, &[5000, 2000]).unwrap();
        let text = candidate_catalogue(
            asa_experts::catalogue::BUILTIN_CATALOGUE,
            &["cosmos".to_string()],
            &BTreeMap::new(),
            &cands,
        )
        .unwrap();
        Catalogue::parse(&text, "candidates.toml").unwrap()
    }

    /// A scenario with `classes` and runs (expert, score).
    fn scenario(name: &str, classes: &[&str], runs: &[(&str, f64)]) -> ScenarioRuns {
        in_boot(0, name, classes, runs)
    }

    /// A scenario measured in boot `boot` (its number, as [`BootNumbers`] gives them).
    fn in_boot(boot: usize, name: &str, classes: &[&str], runs: &[(&str, f64)]) -> ScenarioRuns {
        ScenarioRuns {
            boot,
            scenario: name.into(),
            classes: classes.iter().map(|c| c.to_string()).collect(),
            runs: runs.iter().map(|(e, x)| (e.to_string(), *x)).collect(),
        }
    }

    fn rows(scenarios: &[ScenarioRuns], classes: &[&str], floor: f64) -> Result<LayerCalibration> {
        let classes: Vec<String> = classes.iter().map(|c| c.to_string()).collect();
        layer_rows(
            scenarios,
            &BootNumbers::default(),
            &catalogue(),
            &asa_layers::default_plan(),
            &classes,
            Some(floor),
        )
    }

    /// Two cpu_batch scenarios; layered-cpu_batch-5ms scores 0.20 above layered in both
    /// (spreads 0.014 over 2 runs: 2 standard errors 0.028 < floor 0.03 < gain 0.20).
    #[test]
    fn a_candidate_beating_the_default_beyond_the_noise_is_chosen_with_its_policy_and_margin() {
        let runs = [
            ("layered", 0.50),
            ("layered", 0.52),
            ("layered-cpu_batch-5ms", 0.70),
            ("layered-cpu_batch-5ms", 0.72),
            ("layered-cpu_batch-2ms", 0.55),
            ("layered-cpu_batch-2ms", 0.57),
        ];
        let s = [
            scenario("S1", &["interactive", "cpu_batch"], &runs),
            scenario("S2", &["interactive", "cpu_batch"], &runs),
        ];
        let cal = rows(&s, &["cpu_batch"], 0.03).unwrap();
        let row = &cal.rows[0];
        assert_eq!(row.class, "cpu_batch");
        assert_eq!(row.ranked[0].expert, "layered-cpu_batch-5ms");
        assert_eq!(row.policy.slice_us, 5000);
        let default = plan_policy(&asa_layers::default_plan(), "cpu_batch").unwrap();
        assert_eq!(
            row.policy,
            LayerPolicy {
                slice_us: 5000,
                ..default
            }
        );
        // margin = 0.71 − 0.56 (the 2 ms candidate, the best other).
        assert!((row.margin.unwrap() - 0.15).abs() < 1e-9, "{row:?}");
        assert_eq!(row.ranked[0].runs, 4);
        assert!((row.noise - 0.03).abs() < 1e-12);
        // Candidates of other classes are no arms of this row.
        assert!(row.ranked.iter().all(|r| !r.expert.contains("interactive")));
        let e = &cal.evidence[0];
        assert!(!e.kept_default && (e.gain - 0.20).abs() < 1e-9);
        let table_check = crate::MappingTable {
            layers: cal.rows.clone(),
            ..crate::MappingTable::builtin_default().unwrap()
        };
        crate::MappingTable::parse(&table_check.to_toml().unwrap(), "t").unwrap();
        assert!(markdown(&cal).contains("Choice: **layered-cpu_batch-5ms**"));
    }

    /// A candidate 0.02 above layered with a floor of 0.05: layered stays first, with the
    /// default policy, a negative margin and the threshold as the row's noise.
    #[test]
    fn within_the_noise_the_default_policy_stays() {
        let s = [scenario(
            "S1",
            &["cpu_batch"],
            &[
                ("layered", 0.50),
                ("layered", 0.50),
                ("layered-cpu_batch-5ms", 0.52),
                ("layered-cpu_batch-5ms", 0.52),
            ],
        )];
        let cal = rows(&s, &["cpu_batch"], 0.05).unwrap();
        let row = &cal.rows[0];
        assert_eq!(row.ranked[0].expert, LAYERED);
        assert_eq!(
            row.policy,
            plan_policy(&asa_layers::default_plan(), "cpu_batch").unwrap()
        );
        assert!((row.margin.unwrap() + 0.02).abs() < 1e-9);
        assert!((row.noise - 0.05).abs() < 1e-12);
        assert!(cal.evidence[0].kept_default);
        let table_check = crate::MappingTable {
            layers: cal.rows.clone(),
            ..crate::MappingTable::builtin_default().unwrap()
        };
        crate::MappingTable::parse(&table_check.to_toml().unwrap(), "t").unwrap();
    }

    /// A scenario without cpu_batch (where the 5 ms candidate would lose badly) is not scored
    /// for the cpu_batch row; the interactive row does score it.
    #[test]
    fn scenarios_without_the_class_do_not_count() {
        let s = [
            scenario(
                "S1",
                &["interactive", "cpu_batch"],
                &[("layered", 0.5), ("layered-cpu_batch-5ms", 0.7)],
            ),
            scenario(
                "S20",
                &["interactive", "network"],
                &[
                    ("layered", 0.9),
                    ("layered-cpu_batch-5ms", 0.1),
                    ("layered-interactive-2ms", 0.95),
                ],
            ),
        ];
        let cal = rows(&s, &["cpu_batch", "interactive"], 0.03).unwrap();
        assert_eq!(cal.evidence[0].scenarios, ["S1"]);
        let batch = &cal.rows[0];
        assert_eq!(batch.ranked[0].expert, "layered-cpu_batch-5ms");
        assert_eq!(batch.ranked[0].runs, 1);
        assert!((batch.margin.unwrap() - 0.2).abs() < 1e-9);
        assert_eq!(cal.evidence[1].scenarios, ["S1", "S20"]);
    }

    /// `other` holds every unclassified task in every run: all scenarios count.
    #[test]
    fn the_other_layer_uses_every_scenario() {
        let s = [
            scenario(
                "S1",
                &["interactive", "cpu_batch"],
                &[("layered", 0.5), ("layered-other-5ms", 0.6)],
            ),
            scenario(
                "S20",
                &["interactive", "network"],
                &[("layered", 0.7), ("layered-other-5ms", 0.8)],
            ),
        ];
        let cal = rows(&s, &["other"], 0.03).unwrap();
        assert_eq!(cal.evidence[0].scenarios, ["S1", "S20"]);
        let row = &cal.rows[0];
        assert_eq!(row.class, OTHER_LAYER);
        assert_eq!(row.ranked[0].expert, "layered-other-5ms");
        assert_eq!(row.ranked[0].runs, 2);
        assert_eq!(row.policy.slice_us, 5000);
    }

    #[test]
    fn a_class_without_runs_of_the_default_arm_is_an_error_naming_it() {
        let s = [scenario(
            "S1",
            &["cpu_batch"],
            &[("cosmos", 0.5), ("layered-cpu_batch-5ms", 0.7)],
        )];
        let e = rows(&s, &["cpu_batch"], 0.03).unwrap_err().to_string();
        assert!(e.contains("\"cpu_batch\"") && e.contains("S1"), "{e}");
        let e = rows(&s, &["interactive"], 0.03).unwrap_err().to_string();
        assert!(
            e.contains("\"interactive\"") && e.contains("any scenario"),
            "{e}"
        );
    }

    /// Two runs per arm and scenario in boot `boot`: layered at `base`, the cpu_batch 5 ms
    /// candidate `diff` above it (each pair of runs ±0.005 apart).
    fn batch_boot(boot: usize, base: f64, diff: f64) -> Vec<ScenarioRuns> {
        ["S1", "S10"]
            .iter()
            .map(|name| {
                in_boot(
                    boot,
                    name,
                    &["interactive", "cpu_batch"],
                    &[
                        ("layered", base - 0.005),
                        ("layered", base + 0.005),
                        ("layered-cpu_batch-5ms", base + diff - 0.005),
                        ("layered-cpu_batch-5ms", base + diff + 0.005),
                    ],
                )
            })
            .collect()
    }

    /// Boot 1: the candidate 0.10 above layered (the runs agree within 0.01: within that boot
    /// alone a clear win); boot 2, 0.25 higher for every arm: 0.05 below. The per-boot
    /// differences (+0.10, −0.05) spread 0.106, 2 standard errors 0.150 > the mean gain 0.025:
    /// layered stays, labelled with 2 boots.
    #[test]
    fn a_candidate_better_in_one_boot_and_worse_in_another_is_not_a_verdict() {
        let one = batch_boot(0, 0.40, 0.10);
        let alone = rows(&one, &["cpu_batch"], 0.03).unwrap();
        assert_eq!(alone.rows[0].ranked[0].expert, "layered-cpu_batch-5ms");
        let both = [one, batch_boot(1, 0.65, -0.05)].concat();
        let cal = rows(&both, &["cpu_batch"], 0.03).unwrap();
        let row = &cal.rows[0];
        assert_eq!(row.ranked[0].expert, LAYERED);
        assert_eq!(
            row.policy,
            plan_policy(&asa_layers::default_plan(), "cpu_batch").unwrap()
        );
        assert_eq!(row.boots, 2);
        assert!((row.noise - 0.15).abs() < 1e-9, "{row:?}");
        let e = &cal.evidence[0];
        assert!(e.kept_default && (e.gain - 0.025).abs() < 1e-9, "{e:?}");
        assert_eq!(e.pairs.per_boot.len(), 2);
        assert_eq!(cal.boots, 2);
        let report = markdown(&cal);
        assert!(
            report.contains(
                "Boots: 2 — layered-cpu_batch-5ms − layered per boot: boot 1 +0.100, boot 2 -0.050"
            ),
            "{report}"
        );
        assert_a_table_takes(&cal.rows);
    }

    /// The candidate 0.10 and 0.12 above layered in two boots whose levels differ by 0.25:
    /// the boot offset cancels in the pairs and the gain is a verdict.
    #[test]
    fn a_candidate_better_in_every_boot_beyond_their_spread_is_a_verdict() {
        let s = [batch_boot(0, 0.40, 0.10), batch_boot(1, 0.65, 0.12)].concat();
        let cal = rows(&s, &["cpu_batch"], 0.03).unwrap();
        let row = &cal.rows[0];
        assert_eq!(row.ranked[0].expert, "layered-cpu_batch-5ms");
        assert_eq!(row.policy.slice_us, 5000);
        assert_eq!(row.boots, 2);
        // 2 standard errors of (0.10, 0.12): 0.02, below the floor.
        assert!((row.noise - 0.03).abs() < 1e-9, "{row:?}");
        assert!(!cal.evidence[0].kept_default);
    }

    /// One boot: the within-boot rule still ranks (the candidate leads beyond its runs'
    /// spread), and the row and the report say it rests on one boot.
    #[test]
    fn one_boot_is_labelled_as_one_boot() {
        let cal = rows(&batch_boot(0, 0.40, 0.10), &["cpu_batch"], 0.03).unwrap();
        let row = &cal.rows[0];
        assert_eq!(row.ranked[0].expert, "layered-cpu_batch-5ms");
        assert_eq!(row.boots, 1);
        assert_eq!(cal.boots, 1);
        let report = markdown(&cal);
        assert!(report.contains("Boots: 1 — rests on one boot"), "{report}");
        assert!(
            report.contains("no row is a verdict across boots"),
            "{report}"
        );
        let table = crate::MappingTable {
            layers: cal.rows.clone(),
            ..crate::MappingTable::builtin_default().unwrap()
        };
        assert!(table.render().contains("one boot"), "{}", table.render());
    }

    /// The candidate ran only in boot 2, layered only in boot 1: the candidate's lead could be
    /// the boots' offset, so layered stays and the row rests on no boot.
    #[test]
    fn a_candidate_never_run_in_a_boot_with_the_default_does_not_replace_it() {
        let s = [
            in_boot(
                0,
                "S1",
                &["cpu_batch"],
                &[("layered", 0.40), ("layered", 0.41)],
            ),
            in_boot(
                1,
                "S1",
                &["cpu_batch"],
                &[
                    ("layered-cpu_batch-5ms", 0.70),
                    ("layered-cpu_batch-5ms", 0.71),
                ],
            ),
        ];
        let cal = rows(&s, &["cpu_batch"], 0.03).unwrap();
        let row = &cal.rows[0];
        assert_eq!(row.ranked[0].expert, LAYERED);
        assert_eq!(row.boots, 0);
        assert!(markdown(&cal).contains("never ran in the same boot"));
        assert_a_table_takes(&cal.rows);
    }

    /// The measured floor is the median spread of the (scenario, arm) cells run twice;
    /// whole-machine experts' cells do not count.
    #[test]
    fn the_measured_noise_floor_comes_from_the_layer_plan_arms_cells() {
        let s = [scenario(
            "S1",
            &["cpu_batch"],
            &[
                ("layered", 0.50),
                ("layered", 0.52),
                ("cosmos", 0.1),
                ("cosmos", 0.9),
            ],
        )];
        let arms = BTreeSet::from([LAYERED, "layered-cpu_batch-5ms"]);
        let noise = layer_noise(&s, &arms, None);
        assert!(
            (noise.floor - 0.02f64 / 2f64.sqrt()).abs() < 1e-9,
            "{noise:?}"
        );
        assert_eq!(layer_noise(&s, &arms, Some(0.1)).floor, 0.1);
    }
}
