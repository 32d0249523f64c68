//! Stage 1 of calibration ("prototype", ASA paper §4.3): run the scenario catalogue under every
//! expert, score each run with the user-experience score, and rank the experts per workload
//! class. A class keeps the *stay expert* — the table's default, the best over all classes,
//! which the agent runs at start-up and whenever its vote is unsure — unless another expert
//! beats it by more than the measured noise, because a switch costs something.
//!
//! [`run_or_resume`] measures (resumable: results are saved after every scenario and a rerun
//! with the same options continues where the last one stopped); [`prototype`] turns result sets
//! into a [`MappingTable`] plus the evidence behind every row ([`ClassEvidence`]).
//!
//! One job per file, every public item re-exported here (`calibrate::rank`, …):
//! - this file: the prototype table from scored classes, and its refinement by a later stage;
//! - `scores.rs`: each run's score out of result sets, grouped into workload classes;
//! - `ranking.rs`: cell statistics, the noise floor, when two cells differ, centring by
//!   scenario, the ranking of a class's experts and the stay expert;
//! - `boots.rs`: each run's boot (its recorded boot id, else its results file) and an expert
//!   against its reference paired within each boot, for verdicts across boots;
//! - `measure.rs`: the plan and its results folder, the fixed and the budgeted calibration;
//! - `report.rs`: the prototype's markdown report.

use anyhow::{bail, Result};
use asa_scenarios::runner::ResultSet;
use serde::{Deserialize, Serialize};

use crate::budget::{class_state, Rules, Standing};
use crate::{
    workload_class_name, ClassMapping, MachineFingerprint, MappingTable, MAPPING_SCHEMA,
    MAPPING_VERSION,
};

mod boots;
mod measure;
mod ranking;
mod report;
mod scores;

pub use boots::*;
pub use measure::*;
pub use ranking::*;
pub use report::*;
pub use scores::*;

/// Noise floor used when no (scenario, expert) cell was measured twice, so no spread is known.
/// Run-to-run spreads of the UX score in the lab VM were 0.01–0.05 (results/2026-11-23-scenarios-every-expert); 0.03
/// sits in that range. Measure with `--reps 2` or more to replace it with the data's own.
pub const DEFAULT_NOISE_FLOOR: f64 = 0.03;

/// How scenario runs are grouped into workload classes (must match the classifier's labels).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum ClassScheme {
    /// `<probe>+<load>`: one class per scenario of the paper's catalogue.
    ProbeLoad,
    /// `<load>`: the background load alone (every probe pooled).
    Load,
}

impl ClassScheme {
    /// The class of a single-phase scenario run.
    pub fn class_of(self, probe: &str, load: &str) -> String {
        match self {
            ClassScheme::ProbeLoad => workload_class_name(probe, load),
            ClassScheme::Load => load.to_string(),
        }
    }
}

/// Options of the prototype stage.
#[derive(Debug, Clone)]
pub struct PrototypeOptions {
    /// The expert a class keeps when nothing beats it by more than the noise; `None`: the
    /// table's default expert, the best mean over all the classes ([`stay_expert`]).
    pub stay: Option<String>,
    /// Score differences up to this are noise; `None`: estimated from the data.
    pub noise_floor: Option<f64>,
    /// Class grouping.
    pub scheme: ClassScheme,
    /// A gain below this share of the best expert's score is not worth a switch: a class whose
    /// every other expert is below the best beyond the noise or cannot gain this much over it
    /// is recorded as settled ([`crate::budget`]).
    pub min_gain: f64,
    /// Compare across boots (each run's boot from its boot id, else its results file:
    /// [`BootKey`], [`boot_pairs`]): the best expert must also beat the stay expert by more
    /// than 2 standard errors of their per-boot paired differences when both ran in 2 boots or
    /// more, and every row records its boots. False: the runs pooled, no boots recorded. Stage
    /// layers always compares across boots; stages prototype and live do when their runs span
    /// 2 boots or more ([`across_boots_for`]).
    pub across_boots: bool,
}

impl Default for PrototypeOptions {
    fn default() -> Self {
        Self {
            stay: None,
            noise_floor: None,
            scheme: ClassScheme::ProbeLoad,
            min_gain: crate::budget::DEFAULT_MIN_GAIN,
            across_boots: false,
        }
    }
}

/// Mean, spread and count of one expert's scores in one class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellStats {
    /// Expert.
    pub expert: String,
    /// Mean UX score.
    pub mean: f64,
    /// Sample standard deviation (0 with one run).
    pub spread: f64,
    /// Runs.
    pub runs: u32,
}

/// Why a class maps where it maps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassEvidence {
    /// Class name.
    pub class: String,
    /// Scenarios pooled into it.
    pub scenarios: Vec<String>,
    /// Every expert's scores, best mean first.
    pub cells: Vec<CellStats>,
    /// Best mean minus the stay expert's mean (None when it was not measured).
    pub gain_over_stay: Option<f64>,
    /// The gain an expert needs to be chosen over the stay expert: max(noise floor, 2 standard
    /// errors of the difference).
    pub threshold: f64,
    /// The expert ranked first.
    pub chosen: String,
    /// True when the best expert was not chosen because its gain was within the noise.
    pub kept_stay: bool,
    /// The chosen expert's mean minus the best mean of the others (None with one expert).
    pub margin: Option<f64>,
    /// Every other expert below the best beyond the noise or unable to gain `--min-gain` over
    /// it, on runs paired by scenario and repetition ([`crate::budget::class_state`]).
    pub settled: bool,
    /// The experts still undecided against the best (empty when settled).
    pub undecided: Vec<String>,
    /// With [`PrototypeOptions::across_boots`]: the best expert other than the stay expert
    /// against the stay expert, paired within each boot (None otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boots: Option<BootPairs>,
}

/// How the noise floor was obtained.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NoiseEstimate {
    /// The floor used.
    pub floor: f64,
    /// Where it came from.
    pub source: String,
}

/// The prototype table and the evidence behind it.
#[derive(Debug, Clone)]
pub struct Prototype {
    /// The table (source `prototype`).
    pub table: MappingTable,
    /// One entry per class, in table order.
    pub evidence: Vec<ClassEvidence>,
    /// The noise floor used.
    pub noise: NoiseEstimate,
    /// The expert a class kept when nothing beat it by more than the noise.
    pub stay: String,
    /// Scenarios left out (phased, failed or without valid runs), with the reason.
    pub left_out: Vec<(String, String)>,
    /// The `--min-gain` the classes were settled against.
    pub min_gain: f64,
    /// The boots the scored runs were made in, by their number in [`BootPairs::per_boot`].
    pub boots: BootNumbers,
}

/// Builds the prototype table from result sets measured on the machine `machine` describes.
pub fn prototype(
    sets: &[ResultSet],
    machine: MachineFingerprint,
    created: String,
    opts: &PrototypeOptions,
) -> Result<Prototype> {
    let mut left_out = Vec::new();
    let mut boot_numbers = BootNumbers::default();
    let classes = collect_scores(sets, opts.scheme, &mut boot_numbers, &mut left_out)?;
    if classes.is_empty() {
        bail!("no scenario run could be scored: nothing to calibrate from");
    }
    let noise = match opts.noise_floor {
        Some(floor) => NoiseEstimate {
            floor,
            source: "given (--noise-floor)".into(),
        },
        None => measured_noise(classes.values().map(|c| c.per_scenario.as_slice())),
    };
    let rules = Rules {
        min_runs: crate::budget::MIN_RUNS,
        min_gain: opts.min_gain,
        noise_floor: noise.floor,
    };
    let classes: Vec<(String, ClassData, Vec<CellStats>)> = classes
        .into_iter()
        .map(|(class, data)| {
            let cells = centred_by_scenario(&data.per_scenario)
                .iter()
                .map(|(expert, xs)| cell_stats(expert, xs))
                .collect();
            (class, data, cells)
        })
        .collect();
    let stay = match &opts.stay {
        Some(expert) => expert.clone(),
        None => stay_expert(
            classes
                .iter()
                .map(|(c, _, cells)| (c.as_str(), cells.as_slice())),
        )
        .unwrap_or_else(|| asa_experts::EEVDF.to_string()),
    };
    let mut table_classes = Vec::new();
    let mut evidence = Vec::new();
    for (class, data, cells) in classes {
        let Ranking {
            cells,
            mut ordered,
            gain,
            mut threshold,
            mut kept_stay,
        } = rank(cells, &stay, noise.floor);
        let boots = opts
            .across_boots
            .then(|| {
                let challenger = cells.iter().find(|c| c.expert != stay)?;
                let units: Vec<BootUnit> = data
                    .boots
                    .iter()
                    .copied()
                    .zip(data.per_scenario.iter().cloned())
                    .collect();
                Some(boot_pairs(&units, &challenger.expert, &stay))
            })
            .flatten();
        // The best expert beat the stay expert within the pooled runs: it must also beat the
        // spread between boots (or, never run in a boot with it, stays behind it). Where it
        // does not, more boots could change the row: it is not settled.
        let mut overruled = false;
        if let (Some(pairs), Some(g), false) = (&boots, gain, kept_stay) {
            if cells[0].expert != stay {
                threshold = across_boots_threshold(threshold, pairs);
                if pairs.boots() == 0 {
                    threshold = threshold.max(g);
                }
                if g <= threshold {
                    kept_stay = true;
                    overruled = true;
                    let at = ordered
                        .iter()
                        .position(|c| c.expert == stay)
                        .expect("a cell");
                    let moved = ordered.remove(at);
                    ordered.insert(0, moved);
                }
            }
        }
        let chosen = ordered[0].expert.clone();
        let margin = ordered[1..]
            .iter()
            .map(|c| c.mean)
            .max_by(f64::total_cmp)
            .map(|runner_up| ordered[0].mean - runner_up);
        let state = class_state(&data.runs, &rules);
        let mut undecided: Vec<String> = state
            .comparisons
            .iter()
            .filter(|c| !matches!(c.standing, Standing::Below | Standing::WithinMinGain))
            .map(|c| c.challenger.clone())
            .collect();
        // The best expert against the stay expert is what the boots left open.
        if overruled && !undecided.contains(&stay) {
            undecided.push(stay.clone());
        }
        let settled = state.settled() && !overruled;
        table_classes.push(ClassMapping {
            name: class.clone(),
            ranked: ranked_rows(&ordered),
            noise: if kept_stay { threshold } else { 0.0 },
            margin,
            settled: Some(settled),
            boots: boots.as_ref().map(BootPairs::boots),
        });
        evidence.push(ClassEvidence {
            class,
            scenarios: data.scenarios,
            cells,
            gain_over_stay: gain,
            threshold,
            chosen,
            kept_stay,
            margin,
            settled,
            undecided,
            boots,
        });
    }
    let mut table = MappingTable {
        schema: MAPPING_SCHEMA.to_string(),
        version: MAPPING_VERSION,
        source: "prototype".to_string(),
        created,
        default_expert: None,
        machine: Some(machine),
        classes: table_classes,
        switches: Vec::new(),
        layers: Vec::new(),
    };
    table.default_expert = table.overall_best().map(|(expert, _)| expert);
    // The same checks a loaded file gets.
    let table = MappingTable::parse(&table.to_toml()?, "the calibrated table")?;
    Ok(Prototype {
        table,
        evidence,
        noise,
        stay,
        left_out,
        min_gain: opts.min_gain,
        boots: boot_numbers,
    })
}

/// The refined table of a live session (stage 3): `measured`, the prototype of this session's
/// static runs (and earlier result sets of the machine), over `start`, the table under test.
/// Classes the runs did not cover keep `start`'s rows; `start`'s switch costs are kept when it
/// was measured on `machine`, and its layer rows; the default expert is the best over all the
/// classes of the result, not over the few a live session measures (one class favouring EEVDF
/// must not make EEVDF the agent's default for every class).
pub fn refine_with(
    measured: MappingTable,
    start: &MappingTable,
    machine: &MachineFingerprint,
) -> MappingTable {
    let mut table = measured;
    table.source = "live".into();
    for class in &start.classes {
        if table.class(&class.name).is_none() {
            table.classes.push(class.clone());
        }
    }
    if start.machine.as_ref() == Some(machine) {
        table.switches = start.switches.clone();
    }
    // The live stage runs applications under the table's plan; it does not measure layers.
    if table.layers.is_empty() {
        table.layers = start.layers.clone();
    }
    table.default_expert = table
        .overall_best()
        .map(|(expert, _)| expert)
        .or_else(|| start.default_expert());
    table
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use asa_scenarios::catalogue::Catalogue as ScenarioCatalogue;
    use asa_scenarios::runner::{ExpertSwitcher, ScenarioResult};

    use super::*;
    use crate::budget::run::fixture::{empty_set, record, SCENARIO};
    use crate::RankedExpert;

    /// S20 × 4 repetitions of `levels` (expert, response time in ms, + 1 ms a repetition).
    fn measured(levels: &[(&str, f64)], reps: u32) -> ResultSet {
        let experts: Vec<&str> = levels.iter().map(|(e, _)| *e).collect();
        let mut set = empty_set(&experts, reps);
        set.scenarios.push(ScenarioResult {
            scenario: SCENARIO.into(),
            title: "Web Browsing & Network Transfer".into(),
            probe: "web".into(),
            runs: (0..reps)
                .flat_map(|rep| {
                    levels
                        .iter()
                        .map(move |(e, ms)| record(e, rep, ms + f64::from(rep)))
                })
                .collect(),
            error: None,
            skipped: Vec::new(),
        });
        set
    }

    /// Every row says how far its choice leads the runner-up and whether the class is settled:
    /// here good (40 ms) leads bad (250 ms) beyond the noise in all 4 paired repetitions.
    #[test]
    fn a_row_records_its_margin_and_that_the_class_is_settled() {
        let set = measured(&[("good", 40.0), ("bad", 250.0)], 4);
        let proto = prototype(
            std::slice::from_ref(&set),
            test_machine(),
            "2026-11-29T00:00:00Z".into(),
            &PrototypeOptions::default(),
        )
        .unwrap();
        let row = &proto.table.classes[0];
        assert_eq!(row.ranked[0].expert, "good");
        let gap = row.ranked[0].score - row.ranked[1].score;
        assert!(
            (row.margin.unwrap() - gap).abs() < 1e-12 && gap > 0.1,
            "{row:?}"
        );
        assert_eq!(row.settled, Some(true));
        let e = &proto.evidence[0];
        assert!(e.settled && e.undecided.is_empty());
        assert!(markdown(&proto, &[set]).contains(" | yes | "));
    }

    /// Boot 1: `good` answers in 40 ms, the stay expert in 250; boot 2: `good` 110, the stay
    /// expert 100. Pooled, `good` leads beyond the runs' spread; compared across boots, its
    /// per-boot differences (far above, a little below) spread wider than its lead: the stay
    /// expert stays, the row labelled with its 2 boots.
    #[test]
    fn a_class_row_better_in_one_boot_and_worse_in_another_is_not_a_verdict() {
        let sets = [
            measured(&[("good", 40.0), ("stay", 250.0)], 2),
            measured(&[("good", 110.0), ("stay", 100.0)], 2),
        ];
        let pooled = PrototypeOptions {
            stay: Some("stay".into()),
            noise_floor: Some(0.01),
            ..PrototypeOptions::default()
        };
        let proto = prototype(&sets, test_machine(), String::new(), &pooled).unwrap();
        assert_eq!(proto.table.classes[0].ranked[0].expert, "good");
        assert_eq!(proto.table.classes[0].boots, None);
        let across = PrototypeOptions {
            across_boots: true,
            ..pooled
        };
        let proto = prototype(&sets, test_machine(), String::new(), &across).unwrap();
        let row = &proto.table.classes[0];
        assert_eq!(row.ranked[0].expert, "stay");
        assert_eq!(row.boots, Some(2));
        assert_eq!(row.settled, Some(false));
        let e = &proto.evidence[0];
        assert!(
            e.kept_stay && e.gain_over_stay.unwrap() <= e.threshold,
            "{e:?}"
        );
        assert!(e.undecided.contains(&"stay".to_string()), "{e:?}");
        let report = markdown(&proto, &sets);
        assert!(
            report.contains(": 2 boots, good − stay per boot"),
            "{report}"
        );
        // Each results file has its line, numbered (the two here share their settings).
        assert!(
            report.contains("Runs (results file 1 of 2): ")
                && report.contains("Runs (results file 2 of 2): "),
            "{report}"
        );
        // One boot: ranked as before, labelled as one boot.
        let proto = prototype(&sets[..1], test_machine(), String::new(), &across).unwrap();
        assert_eq!(proto.table.classes[0].ranked[0].expert, "good");
        assert_eq!(proto.table.classes[0].boots, Some(1));
        let report = markdown(&proto, &sets[..1]);
        assert!(report.contains("rests on one boot"), "{report}");
        assert!(report.contains("\nRuns: "), "{report}");
    }

    /// Two experts 1 ms apart in a plan of 2 repetitions: the runs cannot tell them apart, so
    /// the class is open, the runner-up undecided.
    #[test]
    fn a_class_the_runs_could_not_decide_is_recorded_as_open() {
        let set = measured(&[("a", 60.0), ("b", 61.0)], 2);
        let opts = PrototypeOptions {
            noise_floor: Some(0.05),
            ..PrototypeOptions::default()
        };
        let proto = prototype(&[set], test_machine(), String::new(), &opts).unwrap();
        assert_eq!(proto.table.classes[0].settled, Some(false));
        assert_eq!(proto.evidence[0].undecided, ["b"]);
    }

    /// A result set saved before probes and loads named their application class is scored
    /// with the built-in catalogue's classes.
    #[test]
    fn a_catalogue_stored_before_application_classes_still_scores() {
        let mut set = measured(&[("good", 40.0)], 1);
        set.catalogue_toml = asa_scenarios::catalogue::BUILTIN_SCENARIOS
            .lines()
            .filter(|l| !l.starts_with("app_class"))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(ScenarioCatalogue::parse(&set.catalogue_toml, "old").is_err());
        let catalogue = stored_catalogue(&set, "old").unwrap();
        assert!(catalogue.scenario(SCENARIO).is_ok());
        let mut broken = set.clone();
        broken.catalogue_toml = "not toml".into();
        assert!(stored_catalogue(&broken, "old").is_err());
    }

    struct NoSwitcher;

    impl ExpertSwitcher for NoSwitcher {
        fn pin(&mut self, expert: &str) -> Result<String> {
            panic!("nothing may run, asked for {expert}")
        }
        fn still_pinned(&mut self, _: &str) -> Result<bool> {
            Ok(true)
        }
        fn release(&mut self) -> Result<()> {
            Ok(())
        }
    }

    /// The plan that measured `set` (its scenario S20 and options), skipping `skip`.
    fn plan_of(
        set: &ResultSet,
        skip: BTreeMap<String, std::collections::BTreeSet<String>>,
    ) -> CalibrationPlan {
        let o = &set.options;
        CalibrationPlan {
            scenarios: vec![SCENARIO.into()],
            experts: o.experts.clone(),
            reps: o.reps,
            duration: o.duration,
            min_phase: o.min_phase,
            settle: o.settle,
            hold: o.hold,
            cooldown: o.cooldown,
            work_dir: o.work_dir.clone(),
            skip,
        }
    }

    /// A budgeted calibration leaves scenarios with some of their runs; the fixed plan would
    /// measure them again whole, throwing those runs away, so it refuses and says what to do.
    #[test]
    fn a_fixed_plan_refuses_a_folder_with_a_budgeted_calibrations_runs() {
        let dir = tempfile::tempdir().unwrap();
        let mut set = measured(&[("good", 40.0), ("bad", 250.0)], 4);
        set.scenarios[0].runs.truncate(3);
        set.save(&results_path(dir.path())).unwrap();
        let plan = plan_of(&set, Default::default());
        let err = run_or_resume(dir.path(), &set.catalogue_toml, &plan, &mut NoSwitcher)
            .unwrap_err()
            .to_string();
        assert!(err.contains("S20 has 3 of its 8 runs"), "{err}");
        assert!(err.contains("continue it with --budget"), "{err}");
    }

    /// A plan that skips `bad` in S20: a scenario holding `good`'s runs alone is complete, so
    /// a resumed calibration runs nothing (NoSwitcher panics on a run); one measured before the
    /// skip (every expert's runs) is complete too.
    #[test]
    fn a_scenario_is_complete_with_every_planned_run_and_skipped_experts_are_not_awaited() {
        let dir = tempfile::tempdir().unwrap();
        let full = measured(&[("good", 40.0), ("bad", 250.0)], 2);
        let plan = plan_of(
            &full,
            [(SCENARIO.to_string(), ["bad".to_string()].into())].into(),
        );
        assert_eq!(plan.experts_for(SCENARIO), ["good"]);
        assert_eq!((plan.total_runs(), plan.saved_runs()), (2, 2));
        let mut only_good = full.clone();
        only_good.scenarios[0].runs.retain(|r| r.expert == "good");
        assert!(measure::complete(&only_good.scenarios[0], &plan));
        assert!(measure::complete(&full.scenarios[0], &plan));
        let mut one_rep = only_good.clone();
        one_rep.scenarios[0].runs.retain(|r| r.rep == 0);
        assert!(!measure::complete(&one_rep.scenarios[0], &plan));
        only_good.save(&results_path(dir.path())).unwrap();
        let set = run_or_resume(dir.path(), &full.catalogue_toml, &plan, &mut NoSwitcher).unwrap();
        assert_eq!(set.scenarios[0].runs.len(), 2);
    }

    fn cell(expert: &str, mean: f64, spread: f64, runs: u32) -> CellStats {
        CellStats {
            expert: expert.into(),
            mean,
            spread,
            runs,
        }
    }

    fn names(cells: &[CellStats]) -> Vec<&str> {
        cells.iter().map(|c| c.expert.as_str()).collect()
    }

    /// Two scenarios at score levels 0.1 and 0.7; `b` beats `a` by 0.1 in both. Centred:
    /// level 0.15 → a −0.05, b +0.05; level 0.75 → the same; overall mean 0.45, so a = 0.40 and
    /// b = 0.50 in both, with no spread (pooled raw scores would spread by 0.35).
    #[test]
    fn pooled_scenarios_are_compared_within_each_scenario() {
        let scenarios = vec![
            vec![("a".to_string(), 0.1), ("b".to_string(), 0.2)],
            vec![("a".to_string(), 0.7), ("b".to_string(), 0.8)],
        ];
        let cells = centred_by_scenario(&scenarios);
        for (expert, want) in [("a", 0.40), ("b", 0.50)] {
            let xs = &cells[expert];
            assert_eq!(xs.len(), 2);
            assert!(
                xs.iter().all(|x| (x - want).abs() < 1e-12),
                "{expert}: {xs:?}"
            );
        }
        // One scenario: unchanged.
        let one = centred_by_scenario(&scenarios[..1]);
        assert!((one["a"][0] - 0.1).abs() < 1e-12 && (one["b"][0] - 0.2).abs() < 1e-12);
    }

    /// A budgeted calibration dropped b after the first scenario: the second, easy one (0.7)
    /// only a ran. On plain scenario means a's runs would sit 0.05 below and right at their
    /// levels; on the additive fit they agree, and b stays 0.1 above a, as in the one scenario
    /// both ran.
    #[test]
    fn a_scenario_only_some_experts_ran_does_not_move_the_comparison() {
        let scenarios = vec![
            vec![("a".to_string(), 0.1), ("b".to_string(), 0.2)],
            vec![("a".to_string(), 0.7)],
        ];
        let cells = centred_by_scenario(&scenarios);
        let (a, b) = (&cells["a"], &cells["b"]);
        assert!((a[0] - a[1]).abs() < 1e-9, "{a:?}");
        assert!((b[0] - a[0] - 0.1).abs() < 1e-9, "{a:?} {b:?}");
    }

    #[test]
    fn spread_is_the_sample_standard_deviation() {
        // [1, 3]: mean 2, Σ(x−m)² = 2, n − 1 = 1 → √2.
        assert!((sample_spread(&[1.0, 3.0]) - 2f64.sqrt()).abs() < 1e-12);
        assert_eq!(sample_spread(&[0.7]), 0.0);
    }

    #[test]
    fn a_clear_winner_is_ranked_first() {
        // gain 0.20; se = sqrt(0.02²/4 + 0.02²/4) = 0.01414, threshold = max(0.03, 0.0283).
        let r = rank(
            vec![
                cell("eevdf", 0.60, 0.02, 4),
                cell("bpfland", 0.80, 0.02, 4),
                cell("lavd", 0.70, 0.02, 4),
            ],
            "eevdf",
            0.03,
        );
        assert_eq!(names(&r.ordered), ["bpfland", "lavd", "eevdf"]);
        assert!(!r.kept_stay);
        assert!((r.gain.unwrap() - 0.20).abs() < 1e-12);
        assert!((r.threshold - 0.03).abs() < 1e-12);
    }

    #[test]
    fn a_gain_within_two_standard_errors_keeps_the_stay_expert() {
        // gain 0.05; se = sqrt(0.06²/2 + 0.04²/2) = 0.05099, threshold = 0.10198 > 0.05.
        let r = rank(
            vec![cell("eevdf", 0.60, 0.04, 2), cell("lavd", 0.65, 0.06, 2)],
            "eevdf",
            0.01,
        );
        assert_eq!(names(&r.ordered), ["eevdf", "lavd"]);
        assert!(r.kept_stay);
        assert!((r.threshold - 0.10198).abs() < 1e-4, "{}", r.threshold);
    }

    #[test]
    fn single_runs_borrow_the_noise_floor() {
        // One run each: se = sqrt(0.03² + 0.03²) = 0.04243, threshold 0.0849 > gain 0.08.
        let r = rank(
            vec![cell("eevdf", 0.50, 0.0, 1), cell("rusty", 0.58, 0.0, 1)],
            "eevdf",
            0.03,
        );
        assert!(r.kept_stay);
        // With a gain of 0.09 it wins.
        let r = rank(
            vec![cell("eevdf", 0.50, 0.0, 1), cell("rusty", 0.59, 0.0, 1)],
            "eevdf",
            0.03,
        );
        assert!(!r.kept_stay);
        assert_eq!(r.ordered[0].expert, "rusty");
    }

    /// cosmos 0.525 over the two classes, flash 0.45, eevdf 0.35; lavd was measured in one
    /// class only and cannot be compared; a class of one expert compares nothing.
    #[test]
    fn the_stay_expert_is_the_best_mean_over_the_classes() {
        let a = [
            cell("eevdf", 0.30, 0.0, 2),
            cell("cosmos", 0.50, 0.0, 2),
            cell("flash", 0.60, 0.0, 2),
            cell("lavd", 0.90, 0.0, 2),
        ];
        let b = [
            cell("eevdf", 0.40, 0.0, 2),
            cell("cosmos", 0.55, 0.0, 2),
            cell("flash", 0.30, 0.0, 2),
        ];
        let alone = [cell("rusty", 0.99, 0.0, 2)];
        let classes = [("a", &a[..]), ("b", &b[..]), ("alone", &alone[..])];
        assert_eq!(stay_expert(classes).as_deref(), Some("cosmos"));
        assert_eq!(stay_expert([("alone", &alone[..])]), None);
    }

    /// The lab's `network` class (2026-11-28 live refinement): lavd 0.449 ± 0.120, cosmos
    /// 0.410 ± 0.019, eevdf 0.334 ± 0.072, four runs each, noise floor 0.14. Kept against
    /// EEVDF the class went to EEVDF, the worst of the three; kept against the table's default
    /// (cosmos) it stays on cosmos, which the agent already runs: no switch to a worse expert.
    #[test]
    fn a_class_within_noise_of_the_default_expert_stays_on_it_not_on_eevdf() {
        let cells = || {
            vec![
                cell("eevdf", 0.334, 0.072, 4),
                cell("lavd", 0.449, 0.120, 4),
                cell("cosmos", 0.410, 0.019, 4),
            ]
        };
        let against_eevdf = rank(cells(), "eevdf", 0.14);
        assert_eq!(names(&against_eevdf.ordered)[0], "eevdf");
        let against_default = rank(cells(), "cosmos", 0.14);
        assert_eq!(names(&against_default.ordered), ["cosmos", "lavd", "eevdf"]);
        assert!(against_default.kept_stay);
        // A clear win over the default still switches.
        let mut clear = cells();
        clear[1].mean = 0.60;
        assert_eq!(rank(clear, "cosmos", 0.14).ordered[0].expert, "lavd");
    }

    #[test]
    fn stay_expert_best_or_missing() {
        let r = rank(
            vec![cell("eevdf", 0.9, 0.0, 3), cell("lavd", 0.5, 0.0, 3)],
            "eevdf",
            0.03,
        );
        assert_eq!(names(&r.ordered), ["eevdf", "lavd"]);
        assert!(!r.kept_stay);
        assert_eq!(r.gain, Some(0.0));
        let r = rank(
            vec![cell("bpfland", 0.4, 0.0, 3), cell("lavd", 0.5, 0.0, 3)],
            "eevdf",
            0.03,
        );
        assert_eq!(names(&r.ordered), ["lavd", "bpfland"]);
        assert_eq!(r.gain, None);
    }

    fn test_machine() -> MachineFingerprint {
        MachineFingerprint {
            cpu_model: "test".into(),
            cores: 2,
            smt: false,
            memory_mib: 1024,
            kernel_release: "7.2".into(),
            expert_versions: BTreeMap::new(),
        }
    }

    fn class(name: &str, ranked: &[(&str, f64)]) -> ClassMapping {
        ClassMapping {
            name: name.into(),
            ranked: ranked
                .iter()
                .map(|&(expert, score)| RankedExpert {
                    expert: expert.into(),
                    score,
                    spread: 0.0,
                    runs: 2,
                })
                .collect(),
            noise: 0.0,
            margin: None,
            settled: None,
            boots: None,
        }
    }

    fn table(default: Option<&str>, classes: Vec<ClassMapping>) -> MappingTable {
        MappingTable {
            schema: MAPPING_SCHEMA.into(),
            version: MAPPING_VERSION,
            source: "prototype".into(),
            created: "2026-11-28T00:00:00Z".into(),
            default_expert: default.map(str::to_owned),
            machine: None,
            classes,
            switches: Vec::new(),
            layers: Vec::new(),
        }
    }

    /// The lab's live session of 2026-11-28 measured one single-phase class (inference, where
    /// EEVDF led) and wrote `default_expert = "eevdf"` over a table where cosmos leads the
    /// other six: the agent then fell back to EEVDF on every unsure stretch. The default is
    /// the best over every class of the refined table.
    #[test]
    fn a_live_refinement_keeps_the_default_of_all_classes_not_of_the_measured_few() {
        let start = table(
            Some("cosmos"),
            vec![
                class("inference", &[("cosmos", 0.42), ("eevdf", 0.20)]),
                class("kernel_build", &[("cosmos", 0.56), ("eevdf", 0.31)]),
                class("povray_render", &[("cosmos", 0.53), ("eevdf", 0.35)]),
            ],
        );
        let measured = table(
            Some("eevdf"),
            vec![class("inference", &[("eevdf", 0.45), ("cosmos", 0.34)])],
        );
        let refined = refine_with(measured, &start, &test_machine());
        assert_eq!(refined.source, "live");
        assert_eq!(refined.classes.len(), 3);
        assert_eq!(
            refined.class("inference").unwrap().ranked[0].expert,
            "eevdf"
        );
        assert_eq!(refined.default_expert.as_deref(), Some("cosmos"));
    }

    #[test]
    fn a_kept_stay_expert_table_passes_the_format_check() {
        let r = rank(
            vec![cell("eevdf", 0.60, 0.04, 2), cell("lavd", 0.65, 0.06, 2)],
            "eevdf",
            0.01,
        );
        let table = MappingTable {
            schema: MAPPING_SCHEMA.into(),
            version: MAPPING_VERSION,
            source: "prototype".into(),
            created: "2026-11-22T00:00:00Z".into(),
            default_expert: None,
            machine: Some(test_machine()),
            classes: vec![ClassMapping {
                name: "game+kernel_build".into(),
                ranked: ranked_rows(&r.ordered),
                noise: r.threshold,
                margin: None,
                settled: None,
                boots: None,
            }],
            switches: Vec::new(),
            layers: Vec::new(),
        };
        let text = table.to_toml().unwrap();
        let back = MappingTable::parse(&text, "t").unwrap();
        assert_eq!(back, table);
        // Without the noise field the same order is refused.
        let bad = text.replace(&format!("noise = {}", r.threshold), "");
        assert!(MappingTable::parse(&bad, "t").is_err());
    }
}
