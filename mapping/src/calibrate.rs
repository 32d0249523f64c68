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
use std::time::Duration;

use anyhow::{bail, Context, Result};
use asa_scenarios::catalogue::Catalogue as ScenarioCatalogue;
use asa_scenarios::progress::Progress;
use asa_scenarios::report::score_scenario;
use asa_scenarios::runner::{run_scenario, ExpertSwitcher, ResultSet, RunOptions, ScenarioResult};
use asa_scenarios::stats;
use asa_scenarios::work::WorkUnit;
use log::{info, warn};
use serde::{Deserialize, Serialize};

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
}

impl Default for PrototypeOptions {
    fn default() -> Self {
        Self {
            stay: None,
            noise_floor: None,
            scheme: ClassScheme::ProbeLoad,
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

/// Scores of every valid run, grouped by class and expert, from result sets.
type ClassScores = BTreeMap<String, (Vec<String>, BTreeMap<String, Vec<f64>>)>;

fn collect_scores(
    sets: &[ResultSet],
    scheme: ClassScheme,
    left_out: &mut Vec<(String, String)>,
) -> Result<ClassScores> {
    let mut classes: ClassScores = BTreeMap::new();
    // class → one (expert, score) list per scenario of the class.
    let mut per_scenario: BTreeMap<String, Vec<Vec<(String, f64)>>> = BTreeMap::new();
    for (i, set) in sets.iter().enumerate() {
        let catalogue = ScenarioCatalogue::parse(&set.catalogue_toml, &format!("result set {i}"))
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
            let scored = score_scenario(&catalogue, result)?;
            if scored.runs.is_empty() {
                left_out.push((result.scenario.clone(), "no valid run".into()));
                continue;
            }
            let class = scheme.class_of(&result.probe, &phases[0].load);
            let entry = classes.entry(class.clone()).or_default();
            if !entry.0.contains(&result.scenario) {
                entry.0.push(result.scenario.clone());
            }
            // Mid-run switch runs (`a>b`, stage 2) and the live agent's runs (stage 3) are no
            // expert of their own.
            let runs: Vec<_> = scored
                .runs
                .into_iter()
                .filter(|r| {
                    crate::overhead::parse_switch(&r.expert).is_none()
                        && !crate::live::is_agent(&r.expert)
                })
                .collect();
            per_scenario
                .entry(class)
                .or_default()
                .push(runs.into_iter().map(|r| (r.expert, r.score)).collect());
        }
    }
    for (class, scenarios) in per_scenario {
        classes.get_mut(&class).expect("entered above").1 = centred_by_scenario(&scenarios);
    }
    Ok(classes)
}

/// Per expert, the run scores of a class's scenarios, each centred on its scenario's mean over
/// every run and shifted back by the mean of all runs. A class that pools several scenarios
/// (`--classes load`: one per probe, at very different score levels) then compares the experts
/// within each scenario: the spreads measure how consistently an expert does against the
/// others, not how different the probes are. A class of one scenario keeps its scores.
pub fn centred_by_scenario(scenarios: &[Vec<(String, f64)>]) -> BTreeMap<String, Vec<f64>> {
    let all: Vec<f64> = scenarios.iter().flatten().map(|(_, x)| *x).collect();
    let overall = stats::mean(&all).unwrap_or(0.0);
    let mut cells: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for runs in scenarios {
        let xs: Vec<f64> = runs.iter().map(|(_, x)| *x).collect();
        let level = stats::mean(&xs).unwrap_or(0.0);
        for (expert, x) in runs {
            cells
                .entry(expert.clone())
                .or_default()
                .push(x - level + overall);
        }
    }
    cells
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
        None => {
            let spreads: Vec<f64> = classes
                .values()
                .flat_map(|(_, experts)| experts.values())
                .filter(|xs| xs.len() >= 2)
                .map(|xs| sample_spread(xs))
                .collect();
            noise_estimate(&spreads, "(class, expert) cells")
        }
    };
    let classes: Vec<(String, Vec<String>, Vec<CellStats>)> = classes
        .into_iter()
        .map(|(class, (scenarios, experts))| {
            let cells = experts
                .iter()
                .map(|(expert, xs)| cell_stats(expert, xs))
                .collect();
            (class, scenarios, cells)
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
    for (class, scenarios, cells) in classes {
        let Ranking {
            cells,
            ordered,
            gain,
            threshold,
            kept_stay,
        } = rank(cells, &stay, noise.floor);
        let chosen = ordered[0].expert.clone();
        table_classes.push(ClassMapping {
            name: class.clone(),
            ranked: ranked_rows(&ordered),
            noise: if kept_stay { threshold } else { 0.0 },
        });
        evidence.push(ClassEvidence {
            class,
            scenarios,
            cells,
            gain_over_stay: gain,
            threshold,
            chosen,
            kept_stay,
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
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = results_path(dir);
    let mut set = if path.exists() {
        let set = ResultSet::load(&path)?;
        check_version(&path, &set)?;
        check_options(&path, &set, plan)?;
        let done = set.scenarios.iter().filter(|r| complete(r, plan)).count();
        info!(
            "resuming {}: {done} scenario(s) already measured",
            path.display()
        );
        set
    } else {
        // Calibrate the work unit once, on the default scheduler and an idle machine; a resumed
        // run reuses the stored one so every run stays comparable.
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
         the difference).\n\n",
        proto.noise.floor, proto.noise.source, proto.stay
    ));
    out.push_str(&format!("| class | scenarios | chosen | gain over {} | threshold | scores (mean ± spread, runs) |\n|---|---|---|---:|---:|---|\n", proto.stay));
    for e in &proto.evidence {
        out.push_str(&format!(
            "| {} | {} | {}{} | {} | {:.3} | {} |\n",
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
