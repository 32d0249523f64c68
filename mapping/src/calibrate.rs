//! Stage 1 of calibration ("prototype", ASA paper §4.3): run the scenario catalogue under every
//! expert, score each run with the user-experience score, and rank the experts per workload
//! class. A class keeps the *stay expert* — the table's default, the best over all classes,
//! which the agent runs at start-up and whenever its vote is unsure — unless another expert
//! beats it by more than the measured noise, because a switch costs something.
//!
//! [`run_or_resume`] measures (resumable: results are saved after every scenario and a rerun
//! with the same options continues where the last one stopped); [`prototype`] turns result sets
//! into a [`MappingTable`] plus the evidence behind every row ([`ClassEvidence`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use asa_scenarios::catalogue::Catalogue as ScenarioCatalogue;
use asa_scenarios::progress::Progress;
use asa_scenarios::report::score_scenario;
use asa_scenarios::runner::{
    prepare_scenario, run_one, run_scenario, scenario_duration, ExpertSwitcher, NoObserver,
    ResultSet, RunOptions, RunOutcome, ScenarioResult,
};
use asa_scenarios::stats;
use asa_scenarios::work::WorkUnit;
use log::{info, warn};
use serde::{Deserialize, Serialize};

use crate::budget::run::{planned_classes, run_budget, BudgetOptions, BudgetReport, Runner};
use crate::budget::{class_state, ClassRuns, Rules, Standing};
use crate::{
    workload_class_name, ClassMapping, MachineFingerprint, MappingTable, RankedExpert,
    MAPPING_SCHEMA, MAPPING_VERSION,
};

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
}

impl Default for PrototypeOptions {
    fn default() -> Self {
        Self {
            stay: None,
            noise_floor: None,
            scheme: ClassScheme::ProbeLoad,
            min_gain: crate::budget::DEFAULT_MIN_GAIN,
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
}

/// Sample standard deviation (n − 1: the spread of repeated runs); 0 for fewer than two.
fn sample_spread(xs: &[f64]) -> f64 {
    let n = xs.len() as f64;
    if xs.len() < 2 {
        return 0.0;
    }
    stats::std_dev(xs).unwrap_or(0.0) * (n / (n - 1.0)).sqrt()
}

/// One expert's cell from its runs' scores (at least one): their mean, sample spread and count.
pub fn cell_stats(expert: &str, xs: &[f64]) -> CellStats {
    CellStats {
        expert: expert.to_owned(),
        mean: stats::mean(xs).expect("a cell holds at least one run"),
        spread: sample_spread(xs),
        runs: xs.len() as u32,
    }
}

/// The noise floor from the spreads of the cells measured twice or more: their median, or
/// [`DEFAULT_NOISE_FLOOR`] when there is none. `cells` names them for the source line.
pub fn noise_estimate(spreads: &[f64], cells: &str) -> NoiseEstimate {
    match stats::median(spreads) {
        Some(m) => NoiseEstimate {
            floor: m,
            source: format!(
                "median run-to-run spread of the {} {cells} with 2+ runs",
                spreads.len()
            ),
        },
        None => NoiseEstimate {
            floor: DEFAULT_NOISE_FLOOR,
            source: "default: no cell was measured twice, so no spread is known".into(),
        },
    }
}

/// What the difference of two cells' means must exceed to count: max(noise floor, 2 standard
/// errors of the difference), a cell measured once borrowing the floor as its spread.
pub fn difference_threshold(a: &CellStats, b: &CellStats, noise_floor: f64) -> f64 {
    let variance_of_mean = |c: &CellStats| {
        let s = if c.runs >= 2 { c.spread } else { noise_floor };
        s * s / f64::from(c.runs.max(1))
    };
    noise_floor.max(2.0 * (variance_of_mean(a) + variance_of_mean(b)).sqrt())
}

/// One class's runs from result sets.
#[derive(Debug, Clone)]
struct ClassData {
    /// Scenarios pooled into it.
    scenarios: Vec<String>,
    /// Per scenario, every scored run as (expert, score).
    per_scenario: Vec<Vec<(String, f64)>>,
    /// The runs by unit (result set, scenario, repetition), for the comparisons of
    /// [`crate::budget`].
    runs: ClassRuns,
}

/// Every run of one scenario result with its score (`None`: skipped or invalid), as
/// (expert, repetition, score); mid-run switch runs (`a>b`, stage 2) and the live agent's runs
/// (stage 3) are no expert of their own and are left out.
pub fn scored_runs(
    catalogue: &ScenarioCatalogue,
    result: &ScenarioResult,
) -> Result<Vec<(String, u32, Option<f64>)>> {
    let scored = score_scenario(catalogue, result)?;
    let score_of = |expert: &str, rep: u32| {
        scored
            .runs
            .iter()
            .find(|r| r.expert == expert && r.rep == rep)
            .map(|r| r.score)
    };
    let own = |expert: &str| {
        crate::overhead::parse_switch(expert).is_none() && !crate::live::is_agent(expert)
    };
    let mut runs: Vec<(String, u32, Option<f64>)> = result
        .runs
        .iter()
        .filter(|r| own(&r.expert))
        .map(|r| {
            let score = if r.valid {
                score_of(&r.expert, r.rep)
            } else {
                None
            };
            (r.expert.clone(), r.rep, score)
        })
        .collect();
    runs.extend(
        result
            .skipped
            .iter()
            .filter(|s| own(&s.expert))
            .map(|s| (s.expert.clone(), s.rep, None)),
    );
    Ok(runs)
}

/// The scenario catalogue a result set stored, which scores its runs (`origin` names it in
/// errors). A catalogue stored before probes and loads named their application class
/// (`app_class`: per-application mode's, unused by the scores) gets the built-in catalogue's
/// class of the same probe or load.
pub fn stored_catalogue(set: &ResultSet, origin: &str) -> Result<ScenarioCatalogue> {
    ScenarioCatalogue::parse(&set.catalogue_toml, origin).or_else(|first| {
        match with_builtin_app_classes(&set.catalogue_toml) {
            Some(text) => ScenarioCatalogue::parse(&text, origin).map_err(|_| first),
            None => Err(first),
        }
    })
}

/// `text` with every probe and load lacking `app_class` given the built-in catalogue's; None
/// when none lacks it or one is not in the built-in catalogue.
fn with_builtin_app_classes(text: &str) -> Option<String> {
    let mut doc: toml::Table = toml::from_str(text).ok()?;
    let builtin: toml::Table = toml::from_str(asa_scenarios::catalogue::BUILTIN_SCENARIOS).ok()?;
    let mut changed = false;
    for kind in ["probe", "load"] {
        let Some(entries) = doc.get_mut(kind).and_then(|v| v.as_table_mut()) else {
            continue;
        };
        for (name, entry) in entries.iter_mut() {
            let Some(entry) = entry.as_table_mut() else {
                continue;
            };
            if !entry.contains_key("app_class") {
                let class = builtin.get(kind)?.get(name)?.get("app_class")?.clone();
                entry.insert("app_class".into(), class);
                changed = true;
            }
        }
    }
    changed.then(|| toml::to_string(&doc).ok()).flatten()
}

fn collect_scores(
    sets: &[ResultSet],
    scheme: ClassScheme,
    left_out: &mut Vec<(String, String)>,
) -> Result<BTreeMap<String, ClassData>> {
    // class → its scenarios with, per scenario, the set it came from and its scored runs.
    type Scenario = (usize, String, Vec<(String, u32, Option<f64>)>);
    let mut grouped: BTreeMap<String, Vec<Scenario>> = BTreeMap::new();
    for (i, set) in sets.iter().enumerate() {
        let catalogue = stored_catalogue(set, &format!("result set {i}"))
            .context("the scenario catalogue stored in a result set")?;
        for result in &set.scenarios {
            if let Some(e) = &result.error {
                left_out.push((result.scenario.clone(), format!("failed: {e}")));
                continue;
            }
            let spec = catalogue.scenario(&result.scenario)?;
            let phases = spec.phases();
            if phases.len() != 1 {
                left_out.push((
                    result.scenario.clone(),
                    "phased: its background changes, so it is no single class (stage 3)".into(),
                ));
                continue;
            }
            let runs = scored_runs(&catalogue, result)?;
            if runs.iter().all(|(_, _, score)| score.is_none()) {
                left_out.push((result.scenario.clone(), "no valid run".into()));
                continue;
            }
            let class = scheme.class_of(&result.probe, &phases[0].load);
            grouped
                .entry(class)
                .or_default()
                .push((i, result.scenario.clone(), runs));
        }
    }
    let mut classes = BTreeMap::new();
    for (class, scenarios) in grouped {
        let mut names: Vec<String> = Vec::new();
        let mut per_scenario = Vec::new();
        let mut units: Vec<(usize, u32, String)> = Vec::new();
        let mut experts: Vec<String> = Vec::new();
        for (set, scenario, runs) in &scenarios {
            if !names.contains(scenario) {
                names.push(scenario.clone());
            }
            per_scenario.push(
                runs.iter()
                    .filter_map(|(e, _, x)| Some((e.clone(), (*x)?)))
                    .collect::<Vec<_>>(),
            );
            let reps = sets[*set].options.reps.max(1);
            let most = runs.iter().map(|(_, r, _)| r + 1).max().unwrap_or(0);
            for rep in 0..reps.max(most) {
                units.push((*set, rep, scenario.clone()));
            }
            for (e, _, _) in runs {
                if !experts.contains(e) {
                    experts.push(e.clone());
                }
            }
        }
        units.sort();
        units.dedup();
        let mut class_runs = ClassRuns::new(&class, units.len(), &experts);
        for (set, scenario, runs) in &scenarios {
            for (e, rep, x) in runs {
                let key = (*set, *rep, scenario.clone());
                let unit = units
                    .binary_search(&key)
                    .expect("every run's unit is listed");
                class_runs.record(e, unit, *x);
            }
        }
        classes.insert(
            class,
            ClassData {
                scenarios: names,
                per_scenario,
                runs: class_runs,
            },
        );
    }
    Ok(classes)
}

/// The noise floor of classes' runs (each class's scenarios as (expert, score) lists): the
/// median spread of the (class, expert) cells with 2+ runs, scores centred by scenario
/// ([`centred_by_scenario`]).
pub fn measured_noise<'a>(
    classes: impl IntoIterator<Item = &'a [Vec<(String, f64)>]>,
) -> NoiseEstimate {
    let spreads: Vec<f64> = classes
        .into_iter()
        .flat_map(|scenarios| centred_by_scenario(scenarios).into_values())
        .filter(|xs| xs.len() >= 2)
        .map(|xs| sample_spread(&xs))
        .collect();
    noise_estimate(&spreads, "(class, expert) cells")
}

/// Per expert, the run scores of a class's scenarios, each centred on its scenario's level and
/// shifted back by the mean of all runs. A class that pools several scenarios (`--classes
/// load`: one per probe, at very different score levels) then compares the experts within each
/// scenario: the spreads measure how consistently an expert does against the others, not how
/// different the probes are. A class of one scenario keeps its scores. A scenario's level is
/// its mean over every run when every expert ran it equally often; otherwise (a budgeted
/// calibration gives the experts it drops fewer runs) the level of the additive fit
/// [`additive_fit`], so that which experts ran a scenario does not move its level.
pub fn centred_by_scenario(scenarios: &[Vec<(String, f64)>]) -> BTreeMap<String, Vec<f64>> {
    let all: Vec<f64> = scenarios.iter().flatten().map(|(_, x)| *x).collect();
    let overall = stats::mean(&all).unwrap_or(0.0);
    let runs: Vec<(String, usize, f64)> = scenarios
        .iter()
        .enumerate()
        .flat_map(|(i, runs)| runs.iter().map(move |(e, x)| (e.clone(), i, *x)))
        .collect();
    let fit = additive_fit(&runs);
    let mut cells: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (expert, i, x) in runs {
        cells
            .entry(expert)
            .or_default()
            .push(x - fit.levels[&i] + overall);
    }
    cells
}

/// Scores explained as an expert's effect plus a unit's level (a scenario, or a scenario's
/// repetition): [`additive_fit`].
#[derive(Debug, Clone, PartialEq)]
pub struct AdditiveFit {
    /// Each expert's effect: its mean score above the mean unit level.
    pub effects: BTreeMap<String, f64>,
    /// Each unit's level.
    pub levels: BTreeMap<usize, f64>,
}

impl AdditiveFit {
    /// Each expert's mean score with the units' levels taken out, on the scale of the scores
    /// (its effect plus the mean unit level): when every expert ran every unit, its plain mean.
    pub fn adjusted_means(&self) -> BTreeMap<String, f64> {
        let levels: Vec<f64> = self.levels.values().copied().collect();
        let base = stats::mean(&levels).unwrap_or(0.0);
        self.effects
            .iter()
            .map(|(e, effect)| (e.clone(), effect + base))
            .collect()
    }
}

/// Fits score = expert effect + unit level to runs `(expert, unit, score)` by alternating means
/// (least squares). Where every expert ran every unit once, a unit's level is its mean and an
/// expert's effect its mean minus the mean of all runs; where some ran fewer units, the fit
/// still compares the experts within units: a unit only the best experts ran does not look
/// better for it.
pub fn additive_fit(runs: &[(String, usize, f64)]) -> AdditiveFit {
    let mut by_unit: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    for (_, u, x) in runs {
        by_unit.entry(*u).or_default().push(*x);
    }
    let mut levels: BTreeMap<usize, f64> = by_unit
        .iter()
        .map(|(u, xs)| (*u, stats::mean(xs).unwrap_or(0.0)))
        .collect();
    let mut effects: BTreeMap<String, f64> = BTreeMap::new();
    for _ in 0..10_000 {
        let mut sums: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
        for (e, u, x) in runs {
            let s = sums.entry(e.as_str()).or_default();
            s.0 += x - levels[u];
            s.1 += 1.0;
        }
        effects = sums
            .into_iter()
            .map(|(e, (sum, n))| (e.to_string(), sum / n))
            .collect();
        let mut sums: BTreeMap<usize, (f64, f64)> = BTreeMap::new();
        for (e, u, x) in runs {
            let s = sums.entry(*u).or_default();
            s.0 += x - effects[e];
            s.1 += 1.0;
        }
        let mut moved: f64 = 0.0;
        for (u, (sum, n)) in sums {
            let level = sum / n;
            moved = moved.max((level - levels[&u]).abs());
            levels.insert(u, level);
        }
        if moved < 1e-12 {
            break;
        }
    }
    AdditiveFit { effects, levels }
}

/// One class's experts ranked by the noise rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranking {
    /// Cells by mean score, best first.
    pub cells: Vec<CellStats>,
    /// The table's order: `cells`, or the stay expert moved first when the best one's gain
    /// over it is within the threshold.
    pub ordered: Vec<CellStats>,
    /// Best mean minus the stay expert's (None without a cell of it).
    pub gain: Option<f64>,
    /// max(noise floor, 2 standard errors of the difference best − stay); a cell measured
    /// once borrows the noise floor as its spread.
    pub threshold: f64,
    /// True when the stay expert was moved first.
    pub kept_stay: bool,
}

/// Ranks one class's experts: by mean score, except that `stay` stays first unless the best
/// expert beats it by more than the threshold.
pub fn rank(mut cells: Vec<CellStats>, stay: &str, noise_floor: f64) -> Ranking {
    cells.sort_by(|a, b| b.mean.total_cmp(&a.mean).then(a.expert.cmp(&b.expert)));
    let base = cells.iter().position(|c| c.expert == stay);
    let (gain, threshold) = match base {
        Some(b) => (
            Some(cells[0].mean - cells[b].mean),
            difference_threshold(&cells[0], &cells[b], noise_floor),
        ),
        None => (None, noise_floor),
    };
    let kept_stay = matches!((base, gain), (Some(b), Some(g)) if b != 0 && g <= threshold);
    let mut ordered = cells.clone();
    if let (true, Some(b)) = (kept_stay, base) {
        let moved = ordered.remove(b);
        ordered.insert(0, moved);
    }
    Ranking {
        cells,
        ordered,
        gain,
        threshold,
        kept_stay,
    }
}

/// A class's table rows from its cells, in the cells' order.
fn ranked_rows(cells: &[CellStats]) -> Vec<RankedExpert> {
    cells
        .iter()
        .map(|c| RankedExpert {
            expert: c.expert.clone(),
            score: c.mean,
            spread: c.spread,
            runs: c.runs,
        })
        .collect()
}

/// The expert with the best mean over every class that compares two or more experts (among
/// those measured in all of them), each class's cells as `(class, cells)`: the table's default
/// expert, which the agent runs at start-up and when its vote is unsure, and so the expert a
/// class stays on unless another beats it by more than the noise. None without such an expert.
pub fn stay_expert<'a>(
    classes: impl IntoIterator<Item = (&'a str, &'a [CellStats])>,
) -> Option<String> {
    let provisional = MappingTable {
        schema: MAPPING_SCHEMA.to_string(),
        version: MAPPING_VERSION,
        source: "prototype".to_string(),
        created: String::new(),
        default_expert: None,
        machine: None,
        classes: classes
            .into_iter()
            .map(|(name, cells)| ClassMapping {
                name: name.to_string(),
                ranked: ranked_rows(cells),
                noise: 0.0,
                margin: None,
                settled: None,
            })
            .collect(),
        switches: Vec::new(),
    };
    provisional.overall_best().map(|(expert, _)| expert)
}

/// Builds the prototype table from result sets measured on the machine `machine` describes.
pub fn prototype(
    sets: &[ResultSet],
    machine: MachineFingerprint,
    created: String,
    opts: &PrototypeOptions,
) -> Result<Prototype> {
    let mut left_out = Vec::new();
    let classes = collect_scores(sets, opts.scheme, &mut left_out)?;
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
            ordered,
            gain,
            threshold,
            kept_stay,
        } = rank(cells, &stay, noise.floor);
        let chosen = ordered[0].expert.clone();
        let margin = ordered[1..]
            .iter()
            .map(|c| c.mean)
            .max_by(f64::total_cmp)
            .map(|runner_up| ordered[0].mean - runner_up);
        let state = class_state(&data.runs, &rules);
        let undecided: Vec<String> = state
            .comparisons
            .iter()
            .filter(|c| !matches!(c.standing, Standing::Below | Standing::WithinMinGain))
            .map(|c| c.challenger.clone())
            .collect();
        table_classes.push(ClassMapping {
            name: class.clone(),
            ranked: ranked_rows(&ordered),
            noise: if kept_stay { threshold } else { 0.0 },
            margin,
            settled: Some(state.settled()),
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
            settled: state.settled(),
            undecided,
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
    })
}

/// The refined table of a live session (stage 3): `measured`, the prototype of this session's
/// static runs (and earlier result sets of the machine), over `start`, the table under test.
/// Classes the runs did not cover keep `start`'s rows; `start`'s switch costs are kept when it
/// was measured on `machine`; the default expert is the best over all the classes of the
/// result, not over the few a live session measures (one class favouring EEVDF must not make
/// EEVDF the agent's default for every class).
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
    table.default_expert = table
        .overall_best()
        .map(|(expert, _)| expert)
        .or_else(|| start.default_expert());
    table
}

/// What a calibration run measures.
#[derive(Debug, Clone)]
pub struct CalibrationPlan {
    /// Scenario names, in order.
    pub scenarios: Vec<String>,
    /// Experts (the baseline among them).
    pub experts: Vec<String>,
    /// Repetitions per (scenario, expert).
    pub reps: u32,
    /// Probe duration.
    pub duration: Duration,
    /// Shortest phase ([`RunOptions::min_phase`]).
    pub min_phase: Duration,
    /// Load start before the probe.
    pub settle: Duration,
    /// How long the scheduler under test must have run before a run's load starts
    /// ([`RunOptions::hold`]; 0: no wait).
    pub hold: Duration,
    /// Pause after each run.
    pub cooldown: Duration,
    /// Inputs of the loads.
    pub work_dir: PathBuf,
}

/// File of the raw results inside a calibration folder.
pub fn results_path(dir: &Path) -> PathBuf {
    dir.join("results.json")
}

fn complete(result: &ScenarioResult, plan: &CalibrationPlan) -> bool {
    result.error.is_none()
        && result.runs.len() + result.skipped.len() == plan.reps as usize * plan.experts.len()
}

/// Refuses a result set (read from `path`) measured with other options than `plan`'s: its
/// scores would not be comparable with the plan's (a resumed run) or would not be what the
/// plan describes (a re-rendered report).
pub fn check_options(path: &Path, set: &ResultSet, plan: &CalibrationPlan) -> Result<()> {
    let o = &set.options;
    if o.experts != plan.experts
        || o.reps != plan.reps
        || o.duration != plan.duration
        || o.min_phase != plan.min_phase
        || o.settle != plan.settle
        || o.hold != plan.hold
    {
        bail!(
            "{} was measured with other options (experts {}, reps {}, duration {:?}, \
             min-phase {:?}, settle {:?}, hold {:?}): rerun with those, or calibrate into \
             another --dir",
            path.display(),
            o.experts.join(","),
            o.reps,
            o.duration,
            o.min_phase,
            o.settle,
            o.hold
        );
    }
    Ok(())
}

/// Refuses to resume a result set (read from `path`) written under another results version
/// than this build's ([`asa_scenarios::runner::RESULTS_VERSION`]): its runs were measured under
/// other preconditions and are scored by another catalogue, so new runs would not be
/// comparable with them.
pub fn check_version(path: &Path, set: &ResultSet) -> Result<()> {
    if set.version != asa_scenarios::runner::RESULTS_VERSION {
        bail!(
            "{} holds results version {}, this build writes version {} (runs wait for a held \
             scheduler before their load and scores use windowed tails): its runs cannot be \
             resumed into; calibrate into another --dir",
            path.display(),
            set.version,
            asa_scenarios::runner::RESULTS_VERSION
        );
    }
    Ok(())
}

/// Refuses to pool result sets (named by `paths`) of different results versions: their runs
/// were measured under other preconditions and scored by other catalogues.
pub fn check_same_version(sets: &[ResultSet], paths: &[String]) -> Result<()> {
    if let Some(first) = sets.first() {
        for (set, path) in sets.iter().zip(paths).skip(1) {
            if set.version != first.version {
                bail!(
                    "{path} holds results version {}, {} version {}: runs of different \
                     versions are not pooled (other preconditions, other scores)",
                    set.version,
                    paths[0],
                    first.version
                );
            }
        }
    }
    Ok(())
}

/// Runs every scenario of `plan` that `dir` does not already hold complete results for, saving
/// after each scenario, and returns the whole result set. A folder measured with other
/// options or under another results version is refused (mixing them would make the scores
/// incomparable).
pub fn run_or_resume(
    dir: &Path,
    catalogue_text: &str,
    plan: &CalibrationPlan,
    switcher: &mut dyn ExpertSwitcher,
) -> Result<ResultSet> {
    let catalogue = ScenarioCatalogue::parse(catalogue_text, "scenario catalogue")?;
    for name in &plan.scenarios {
        catalogue.scenario(name)?;
    }
    info!(
        "calibrating {} scenario(s) × {} expert(s) × {} rep(s) into {}",
        plan.scenarios.len(),
        plan.experts.len(),
        plan.reps,
        dir.display()
    );
    let (path, mut set) = open_results(dir, catalogue_text, plan, switcher)?;
    // Only a budgeted calibration saves a scenario before all its runs are made.
    if let Some(partial) = set
        .scenarios
        .iter()
        .find(|r| r.error.is_none() && !r.runs.is_empty() && !complete(r, plan))
    {
        bail!(
            "{} holds the runs of a budgeted calibration ({} has {} of its {} runs): continue \
             it with --budget, which runs only what can still change a class's choice, or \
             calibrate into another --dir",
            path.display(),
            partial.scenario,
            partial.runs.len() + partial.skipped.len(),
            plan.reps as usize * plan.experts.len()
        );
    }
    // The stored options win (work unit above all); only the input folder may move.
    let mut options = set.options.clone();
    options.work_dir = plan.work_dir.clone();
    options.cooldown = plan.cooldown;
    let progress = Progress::new(plan.scenarios.len());
    for (i, name) in plan.scenarios.iter().enumerate() {
        if set
            .scenarios
            .iter()
            .any(|r| &r.scenario == name && complete(r, plan))
        {
            continue;
        }
        set.scenarios.retain(|r| &r.scenario != name);
        let spec = catalogue.scenario(name)?;
        info!(
            "calibration scenario {}: {name} — {}",
            progress.line(i + 1),
            spec.title
        );
        // Each scenario starts at another expert (and the agent's modes), so none always
        // runs first after the scenario's set-up or last.
        options.rotation = i;
        let result = match run_scenario(&catalogue, spec, switcher, &options) {
            Ok(r) => r,
            Err(e) => {
                warn!("scenario {name} failed: {e:#}");
                ScenarioResult {
                    scenario: name.clone(),
                    title: spec.title.clone(),
                    probe: spec.probe.clone(),
                    runs: Vec::new(),
                    error: Some(format!("{e:#}")),
                    skipped: Vec::new(),
                }
            }
        };
        set.scenarios.push(result);
        set.save(&path)?;
    }
    switcher.release()?;
    Ok(set)
}

/// The result set of the calibration folder `dir` — resumed when it holds one (refused when
/// measured with other options or under another results version), else a new one whose work
/// unit is calibrated now, on the default scheduler and an idle machine (a resumed set reuses
/// its stored one, so every run stays comparable) — and the path of its file.
fn open_results(
    dir: &Path,
    catalogue_text: &str,
    plan: &CalibrationPlan,
    switcher: &mut dyn ExpertSwitcher,
) -> Result<(PathBuf, ResultSet)> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = results_path(dir);
    let set = if path.exists() {
        let set = ResultSet::load(&path)?;
        check_version(&path, &set)?;
        check_options(&path, &set, plan)?;
        let done = set.scenarios.iter().filter(|r| complete(r, plan)).count();
        let runs: usize = set.scenarios.iter().map(|r| r.runs.len()).sum();
        info!(
            "resuming {}: {done} scenario(s) complete, {runs} run(s) measured",
            path.display()
        );
        set
    } else {
        switcher.pin(asa_experts::EEVDF).ok();
        let options = RunOptions {
            experts: plan.experts.clone(),
            reps: plan.reps,
            rotation: 0,
            duration: plan.duration,
            min_phase: plan.min_phase,
            settle: plan.settle,
            hold: plan.hold,
            dirty_limit_kib: asa_scenarios::precondition::DIRTY_LIMIT_KIB,
            cooldown: plan.cooldown,
            work_dir: plan.work_dir.clone(),
            work_unit: WorkUnit::calibrate(),
        };
        ResultSet::new(options, catalogue_text.to_string())
    };
    Ok((path, set))
}

/// The scenario runner on this machine as the budgeted loop's [`Runner`]: each scenario's
/// inputs are prepared before its first run.
struct SystemRunner<'a> {
    catalogue: &'a ScenarioCatalogue,
    switcher: &'a mut dyn ExpertSwitcher,
    options: RunOptions,
    prepared: Vec<String>,
    started: Instant,
}

impl Runner for SystemRunner<'_> {
    fn run(&mut self, scenario: &str, expert: &str, rep: u32) -> Result<RunOutcome> {
        let spec = self.catalogue.scenario(scenario)?;
        if !self.prepared.iter().any(|s| s == scenario) {
            prepare_scenario(self.catalogue, spec, &self.options.work_dir)?;
            self.prepared.push(scenario.to_string());
        }
        run_one(
            self.catalogue,
            spec,
            self.switcher,
            &self.options,
            expert,
            rep,
            &mut NoObserver,
        )
    }

    fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    fn nominal_cost(&self, scenario: &str) -> Duration {
        let phases = self
            .catalogue
            .scenario(scenario)
            .map(|s| s.phases())
            .unwrap_or_default();
        let o = &self.options;
        o.hold + o.settle + scenario_duration(o, &phases) + o.cooldown
    }
}

/// `asa calibrate --budget`: runs where the ranking of a class is still open, within `opts`'s
/// budget ([`crate::budget`]), into the folder `dir` (resumable like [`run_or_resume`]: the runs
/// it holds count, and a rerun continues from them). Returns the result set and what the loop
/// did.
pub fn run_budgeted(
    dir: &Path,
    catalogue_text: &str,
    plan: &CalibrationPlan,
    scheme: ClassScheme,
    opts: &BudgetOptions,
    switcher: &mut dyn ExpertSwitcher,
) -> Result<(ResultSet, BudgetReport)> {
    let catalogue = ScenarioCatalogue::parse(catalogue_text, "scenario catalogue")?;
    let (classes, left_out) = planned_classes(&catalogue, &plan.scenarios, plan.reps, scheme)?;
    for (scenario, why) in &left_out {
        warn!("{scenario} is left out of the budgeted calibration: {why}");
    }
    if classes.is_empty() {
        bail!(
            "no single-phase scenario among --scenarios {}: a budgeted calibration compares \
             experts per class of single-phase scenarios",
            plan.scenarios.join(",")
        );
    }
    let units: usize = classes.iter().map(|c| c.units.len()).sum();
    info!(
        "budgeted calibration of {} class(es), {} unit(s) × {} expert(s) at most, into {}{}",
        classes.len(),
        units,
        plan.experts.len(),
        dir.display(),
        opts.budget
            .map(|b| format!(" within {}", crate::budget::human(b)))
            .unwrap_or_default()
    );
    let (path, mut set) = open_results(dir, catalogue_text, plan, switcher)?;
    let stored = stored_catalogue(&set, "the stored scenario catalogue")?;
    let mut options = set.options.clone();
    options.work_dir = plan.work_dir.clone();
    options.cooldown = plan.cooldown;
    let report = {
        let mut runner = SystemRunner {
            catalogue: &catalogue,
            switcher: &mut *switcher,
            options,
            prepared: Vec::new(),
            started: Instant::now(),
        };
        run_budget(
            &mut set,
            &stored,
            &classes,
            opts,
            &mut runner,
            &mut |set| set.save(&path),
            &mut |line| info!("{line}"),
        )
    };
    // The machine goes back to its default scheduler whether or not the loop ended well.
    let released = switcher.release();
    let report = report?;
    released?;
    Ok((set, report))
}

/// A markdown report of a prototype: the table's reasons, class by class.
pub fn markdown(proto: &Prototype, sets: &[ResultSet]) -> String {
    let mut out = String::from("# Mapping calibration, stage 1 (prototype)\n\n");
    if let Some(m) = &proto.table.machine {
        out.push_str(&format!(
            "Machine: {} · {} CPUs{} · {} MiB · kernel {} · experts {}\n\n",
            m.cpu_model,
            m.cores,
            if m.smt { " (SMT)" } else { "" },
            m.memory_mib,
            m.kernel_release,
            m.expert_versions
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    for set in sets {
        let o = &set.options;
        out.push_str(&format!(
            "Runs: {} scenario(s), experts {}, {} rep(s), {:.0} s probe, {:.0} s settle, {:.0} s hold (measured on {}, {} CPUs, kernel {}).\n",
            set.scenarios.len(),
            o.experts.join(", "),
            o.reps,
            o.duration.as_secs_f64(),
            o.settle.as_secs_f64(),
            o.hold.as_secs_f64(),
            set.machine.cpu_model,
            set.machine.cpus,
            set.machine.kernel
        ));
    }
    out.push_str(&format!(
        "\nNoise floor: {:.3} ({}). A class stays on {} (the stay expert) unless another \
         expert's mean score beats its mean by more than max(noise floor, 2 standard errors of \
         the difference). Margin: the chosen expert's mean minus the best other mean. Settled: \
         every other expert is below the best beyond the noise or cannot gain {:.0} % over it \
         (runs paired by scenario and repetition, the threshold widened for repeated looks; \
         mapping/src/budget/mod.rs).\n\n",
        proto.noise.floor,
        proto.noise.source,
        proto.stay,
        proto.min_gain * 100.0
    ));
    out.push_str(&format!("| class | scenarios | chosen | gain over {} | threshold | margin | settled | scores (mean ± spread, runs) |\n|---|---|---|---:|---:|---:|---|---|\n", proto.stay));
    for e in &proto.evidence {
        out.push_str(&format!(
            "| {} | {} | {}{} | {} | {:.3} | {} | {} | {} |\n",
            e.class,
            e.scenarios.join(", "),
            e.chosen,
            if e.kept_stay {
                " (kept: within noise)"
            } else {
                ""
            },
            e.gain_over_stay
                .map(|g| format!("{g:+.3}"))
                .unwrap_or("n/a".into()),
            e.threshold,
            e.margin.map(|m| format!("{m:+.3}")).unwrap_or("n/a".into()),
            if e.settled {
                "yes".to_string()
            } else {
                format!("no ({} undecided)", e.undecided.join(", "))
            },
            e.cells
                .iter()
                .map(|c| format!("{} {:.3}±{:.3} ({})", c.expert, c.mean, c.spread, c.runs))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let mut chosen: BTreeMap<&str, usize> = BTreeMap::new();
    for e in &proto.evidence {
        *chosen.entry(e.chosen.as_str()).or_default() += 1;
    }
    out.push_str(&format!(
        "\nChosen per class: {}.\n",
        chosen
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    if !proto.left_out.is_empty() {
        out.push_str("\nLeft out:\n\n");
        for (s, why) in &proto.left_out {
            out.push_str(&format!("- {s}: {why}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::run::fixture::{empty_set, record, SCENARIO};

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

    /// A budgeted calibration leaves scenarios with some of their runs; the fixed plan would
    /// measure them again whole, throwing those runs away, so it refuses and says what to do.
    #[test]
    fn a_fixed_plan_refuses_a_folder_with_a_budgeted_calibrations_runs() {
        let dir = tempfile::tempdir().unwrap();
        let mut set = measured(&[("good", 40.0), ("bad", 250.0)], 4);
        set.scenarios[0].runs.truncate(3);
        set.save(&results_path(dir.path())).unwrap();
        let o = &set.options;
        let plan = CalibrationPlan {
            scenarios: vec![SCENARIO.into()],
            experts: o.experts.clone(),
            reps: o.reps,
            duration: o.duration,
            min_phase: o.min_phase,
            settle: o.settle,
            hold: o.hold,
            cooldown: o.cooldown,
            work_dir: o.work_dir.clone(),
        };
        let err = run_or_resume(dir.path(), &set.catalogue_toml, &plan, &mut NoSwitcher)
            .unwrap_err()
            .to_string();
        assert!(err.contains("S20 has 3 of its 8 runs"), "{err}");
        assert!(err.contains("continue it with --budget"), "{err}");
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
            }],
            switches: Vec::new(),
        };
        let text = table.to_toml().unwrap();
        let back = MappingTable::parse(&text, "t").unwrap();
        assert_eq!(back, table);
        // Without the noise field the same order is refused.
        let bad = text.replace(&format!("noise = {}", r.threshold), "");
        assert!(MappingTable::parse(&bad, "t").is_err());
    }
}
