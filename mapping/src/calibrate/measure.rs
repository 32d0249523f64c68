//! Measuring on this machine: the calibration plan, its results folder (checked, resumable),
//! the fixed plan ([`run_or_resume`]) and the budgeted one ([`run_budgeted`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use asa_scenarios::catalogue::Catalogue as ScenarioCatalogue;
use asa_scenarios::progress::Progress;
use asa_scenarios::runner::{
    prepare_scenario, run_one, run_scenario_observed, scenario_duration, ExpertSwitcher,
    NoObserver, ResultSet, RunObserver, RunOptions, RunOutcome, ScenarioResult,
};
use asa_scenarios::work::WorkUnit;
use log::{info, warn};

use super::{stored_catalogue, ClassScheme};
use crate::budget::run::{planned_classes, run_budget, BudgetOptions, BudgetReport, Runner};

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
    /// Per scenario, experts of `experts` it does not run because their runs there cannot
    /// change a verdict (stage layers: a candidate for a class the scenario has no application
    /// of). Empty: every scenario runs every expert.
    pub skip: BTreeMap<String, BTreeSet<String>>,
}

impl CalibrationPlan {
    /// The experts `scenario` runs: `experts` without its `skip` entries, in their order.
    pub fn experts_for(&self, scenario: &str) -> Vec<String> {
        let skip = self.skip.get(scenario);
        self.experts
            .iter()
            .filter(|e| skip.is_none_or(|s| !s.contains(*e)))
            .cloned()
            .collect()
    }

    /// The runs the plan makes: every scenario's experts × repetitions.
    pub fn total_runs(&self) -> usize {
        self.scenarios
            .iter()
            .map(|s| self.experts_for(s).len() * self.reps as usize)
            .sum()
    }

    /// The runs `skip` saves against running every expert in every scenario.
    pub fn saved_runs(&self) -> usize {
        self.scenarios.len() * self.experts.len() * self.reps as usize - self.total_runs()
    }
}

/// File of the raw results inside a calibration folder.
pub fn results_path(dir: &Path) -> PathBuf {
    dir.join("results.json")
}

/// True when `result` holds a run (or a skipped run) of every (expert, repetition) the plan
/// makes in its scenario ([`CalibrationPlan::experts_for`]); runs beyond those (a folder
/// measured before a `skip` existed) do not make it incomplete.
pub(super) fn complete(result: &ScenarioResult, plan: &CalibrationPlan) -> bool {
    let done: BTreeSet<(&str, u32)> = result
        .runs
        .iter()
        .map(|r| (r.expert.as_str(), r.rep))
        .chain(result.skipped.iter().map(|s| (s.expert.as_str(), s.rep)))
        .collect();
    result.error.is_none()
        && plan
            .experts_for(&result.scenario)
            .iter()
            .all(|e| (0..plan.reps).all(|rep| done.contains(&(e.as_str(), rep))))
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
    run_or_resume_observed(dir, catalogue_text, plan, switcher, &mut NoObserver)
}

/// [`run_or_resume`] with `observer` told of every run (stage layers: the oracle-hint writer
/// that puts each application in its labelled class's layer).
pub fn run_or_resume_observed(
    dir: &Path,
    catalogue_text: &str,
    plan: &CalibrationPlan,
    switcher: &mut dyn ExpertSwitcher,
    observer: &mut dyn RunObserver,
) -> Result<ResultSet> {
    let catalogue = ScenarioCatalogue::parse(catalogue_text, "scenario catalogue")?;
    for name in &plan.scenarios {
        catalogue.scenario(name)?;
    }
    info!(
        "calibrating {} scenario(s) × {} expert(s) × {} rep(s) into {}: {} run(s){}",
        plan.scenarios.len(),
        plan.experts.len(),
        plan.reps,
        dir.display(),
        plan.total_runs(),
        match plan.saved_runs() {
            0 => String::new(),
            n => format!(", {n} fewer than every expert in every scenario"),
        }
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
            plan.reps as usize * plan.experts_for(&partial.scenario).len()
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
        options.experts = plan.experts_for(name);
        let result = match run_scenario_observed(&catalogue, spec, switcher, &options, observer) {
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
pub(super) fn open_results(
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
pub(super) struct SystemRunner<'a> {
    catalogue: &'a ScenarioCatalogue,
    switcher: &'a mut dyn ExpertSwitcher,
    observer: &'a mut dyn RunObserver,
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
            self.observer,
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
    run_budgeted_observed(
        dir,
        catalogue_text,
        plan,
        scheme,
        opts,
        switcher,
        &mut NoObserver,
    )
}

/// [`run_budgeted`] with `observer` told of every run (`--retrain`: the feature recorder).
pub fn run_budgeted_observed(
    dir: &Path,
    catalogue_text: &str,
    plan: &CalibrationPlan,
    scheme: ClassScheme,
    opts: &BudgetOptions,
    switcher: &mut dyn ExpertSwitcher,
    observer: &mut dyn RunObserver,
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
            observer,
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
