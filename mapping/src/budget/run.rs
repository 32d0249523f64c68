//! The budgeted calibration's loop: score the runs so far, ask [`super::next_run`] for the next
//! one, check that it fits the budget, run it, record it in the result set and save — until
//! every class is settled, the plan is spent or the budget cannot fit another run. The runs
//! come from a [`Runner`]: the scenario runner on this machine
//! ([`crate::calibrate::run_budgeted`]) or the recorded runs of an exhaustive calibration
//! ([`super::replay`]); both go through this same loop.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use asa_scenarios::catalogue::Catalogue as ScenarioCatalogue;
use asa_scenarios::runner::{ResultSet, RunOutcome, ScenarioResult, SkippedRun};
use serde::{Deserialize, Serialize};

use super::{
    class_state, estimate_cost, fits, human, next_run, runs_left_at_most, ClassRuns, ClassState,
    Rules, MIN_RUNS,
};
use crate::calibrate::{measured_noise, scored_runs, ClassScheme, NoiseEstimate};

/// Runs that fail one after another before the calibration stops: a cause that does not go
/// away (a missing tool, a broken expert) must not eat the budget.
const FAILURES_IN_A_ROW: usize = 3;

/// A class of the plan and its units — (scenario, repetition) — in the order they are run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedClass {
    /// Class name.
    pub class: String,
    /// Its units.
    pub units: Vec<(String, u32)>,
}

/// Scenarios left out of a plan, each with the reason.
pub type LeftOut = Vec<(String, String)>;

/// The classes of `scenarios` (single-phase ones; phased ones are returned with the reason
/// they are left out), each with its units in repetition-major order: every scenario's first
/// repetition, then every second one, and so on, so a class's first runs span its scenarios.
pub fn planned_classes(
    catalogue: &ScenarioCatalogue,
    scenarios: &[String],
    reps: u32,
    scheme: ClassScheme,
) -> Result<(Vec<PlannedClass>, LeftOut)> {
    let mut classes: Vec<(String, Vec<String>)> = Vec::new();
    let mut left_out = Vec::new();
    for name in scenarios {
        let spec = catalogue.scenario(name)?;
        let phases = spec.phases();
        if phases.len() != 1 {
            left_out.push((
                name.clone(),
                "phased: its background changes, so it is no single class".to_string(),
            ));
            continue;
        }
        let class = scheme.class_of(&spec.probe, &phases[0].load);
        match classes.iter_mut().find(|(c, _)| *c == class) {
            Some((_, names)) => names.push(name.clone()),
            None => classes.push((class, vec![name.clone()])),
        }
    }
    let planned = classes
        .into_iter()
        .map(|(class, names)| PlannedClass {
            class,
            units: (0..reps)
                .flat_map(|rep| names.iter().map(move |s| (s.clone(), rep)))
                .collect(),
        })
        .collect();
    Ok((planned, left_out))
}

/// Where the runs of a budgeted calibration come from.
pub trait Runner {
    /// Runs `expert` on repetition `rep` of `scenario` (an error: the run failed).
    fn run(&mut self, scenario: &str, expert: &str, rep: u32) -> Result<RunOutcome>;
    /// Time spent since the runner was made (a replay keeps its own clock).
    fn elapsed(&self) -> Duration;
    /// What one run of `scenario` costs by the plan, before any run is measured.
    fn nominal_cost(&self, scenario: &str) -> Duration;
}

/// How a budgeted calibration is run.
#[derive(Debug, Clone)]
pub struct BudgetOptions {
    /// Time this invocation may spend running (None: until settled or the plan is spent).
    pub budget: Option<Duration>,
    /// `--min-gain`: a gain below this share of the leader's score is not worth a switch.
    pub min_gain: f64,
    /// `--noise-floor` (None: measured from the runs so far).
    pub noise_floor: Option<f64>,
    /// The experts compared.
    pub experts: Vec<String>,
}

/// Why the loop stopped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// Every class settled.
    Settled,
    /// No class asks for a run, but some comparison used every unit of the plan undecided.
    PlanSpent,
    /// The next run would not fit in what is left of the budget.
    Budget {
        /// Budget left, seconds.
        left_s: f64,
        /// The next run's estimated cost, seconds.
        next_s: f64,
    },
}

/// What a budgeted calibration did.
#[derive(Debug, Clone)]
pub struct BudgetReport {
    /// Runs made by this invocation.
    pub runs: usize,
    /// Runs in the result set, every invocation's (spent units, scored or not).
    pub total_runs: usize,
    /// Why it stopped.
    pub stop: Stop,
    /// Every class's standing at the end.
    pub states: Vec<ClassState>,
    /// The noise floor of the last look.
    pub noise: NoiseEstimate,
    /// Time spent by this invocation.
    pub spent: Duration,
}

/// Each scenario's runs with their scores, re-scored only when the scenario gets a run (the
/// catalogue's relative thresholds move with every run of a scenario).
struct Scores<'a> {
    catalogue: &'a ScenarioCatalogue,
    by_scenario: BTreeMap<String, Vec<(String, u32, Option<f64>)>>,
}

impl<'a> Scores<'a> {
    fn new(catalogue: &'a ScenarioCatalogue, set: &ResultSet) -> Result<Self> {
        let mut scores = Scores {
            catalogue,
            by_scenario: BTreeMap::new(),
        };
        for result in &set.scenarios {
            scores.update(result)?;
        }
        Ok(scores)
    }

    fn update(&mut self, result: &ScenarioResult) -> Result<()> {
        let runs = scored_runs(self.catalogue, result)
            .with_context(|| format!("scoring the runs of {}", result.scenario))?;
        self.by_scenario.insert(result.scenario.clone(), runs);
        Ok(())
    }

    /// Every planned class's runs by unit, and the noise floor they measure (or `given`).
    fn classes(
        &self,
        plan: &[PlannedClass],
        experts: &[String],
        given: Option<f64>,
    ) -> (Vec<ClassRuns>, NoiseEstimate) {
        let mut per_class_scenarios: Vec<Vec<Vec<(String, f64)>>> = Vec::new();
        let classes = plan
            .iter()
            .map(|planned| {
                let mut class = ClassRuns::new(&planned.class, planned.units.len(), experts);
                let mut scenarios: Vec<&str> = Vec::new();
                for (unit, (scenario, rep)) in planned.units.iter().enumerate() {
                    if !scenarios.contains(&scenario.as_str()) {
                        scenarios.push(scenario);
                    }
                    for (e, r, x) in self.by_scenario.get(scenario).into_iter().flatten() {
                        if r == rep && experts.contains(e) {
                            class.record(e, unit, *x);
                        }
                    }
                }
                per_class_scenarios.push(
                    scenarios
                        .iter()
                        .map(|s| {
                            self.by_scenario
                                .get(*s)
                                .into_iter()
                                .flatten()
                                .filter(|(e, _, _)| experts.contains(e))
                                .filter_map(|(e, _, x)| Some((e.clone(), (*x)?)))
                                .collect()
                        })
                        .collect(),
                );
                class
            })
            .collect();
        let noise = match given {
            Some(floor) => NoiseEstimate {
                floor,
                source: "given (--noise-floor)".into(),
            },
            None => measured_noise(per_class_scenarios.iter().map(Vec::as_slice)),
        };
        (classes, noise)
    }
}

/// Runs the budgeted calibration of `plan` into `set` (which may hold earlier runs: they count),
/// saving with `save` after every run and telling `progress` a line before each. The scenarios
/// are scored with `catalogue`.
pub fn run_budget(
    set: &mut ResultSet,
    catalogue: &ScenarioCatalogue,
    plan: &[PlannedClass],
    opts: &BudgetOptions,
    runner: &mut dyn Runner,
    save: &mut dyn FnMut(&ResultSet) -> Result<()>,
    progress: &mut dyn FnMut(&str),
) -> Result<BudgetReport> {
    let mut scores = Scores::new(catalogue, set)?;
    let started = runner.elapsed();
    let mut measured: Vec<(String, Duration)> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    let mut runs = 0;
    loop {
        let (classes, noise) = scores.classes(plan, &opts.experts, opts.noise_floor);
        let rules = Rules {
            min_runs: MIN_RUNS,
            min_gain: opts.min_gain,
            noise_floor: noise.floor,
        };
        let states: Vec<ClassState> = classes.iter().map(|c| class_state(c, &rules)).collect();
        let spent = runner.elapsed().saturating_sub(started);
        let report = |stop: Stop, states: Vec<ClassState>| BudgetReport {
            runs,
            total_runs: classes.iter().map(ClassRuns::runs).sum(),
            stop,
            states,
            noise: noise.clone(),
            spent,
        };
        let Some(next) = next_run(&classes, &rules) else {
            let stop = if states.iter().all(ClassState::settled) {
                Stop::Settled
            } else {
                Stop::PlanSpent
            };
            return Ok(report(stop, states));
        };
        let (scenario, rep) = plan[next.class].units[next.unit].clone();
        let estimate = estimate_cost(&measured, &next.expert, runner.nominal_cost(&scenario));
        if let Some(budget) = opts.budget {
            if !fits(spent, budget, estimate) {
                let left = budget.saturating_sub(spent);
                return Ok(report(
                    Stop::Budget {
                        left_s: left.as_secs_f64(),
                        next_s: estimate.as_secs_f64(),
                    },
                    states,
                ));
            }
        }
        progress(&progress_line(
            runs + 1,
            &plan[next.class].class,
            &scenario,
            &next.expert,
            rep,
            &classes,
            &states,
            &rules,
            spent,
            opts.budget,
            estimate,
        ));
        let before = runner.elapsed();
        let outcome = runner.run(&scenario, &next.expert, rep);
        measured.push((next.expert.clone(), runner.elapsed().saturating_sub(before)));
        runs += 1;
        let spec = catalogue.scenario(&scenario)?;
        let index = match set.scenarios.iter().position(|r| r.scenario == scenario) {
            Some(i) => i,
            None => {
                set.scenarios.push(ScenarioResult {
                    scenario: scenario.clone(),
                    title: spec.title.clone(),
                    probe: spec.probe.clone(),
                    runs: Vec::new(),
                    error: None,
                    skipped: Vec::new(),
                });
                set.scenarios.len() - 1
            }
        };
        let result = &mut set.scenarios[index];
        match outcome {
            Ok(RunOutcome::Ran(record)) => {
                failures.clear();
                result.runs.push(*record);
            }
            Ok(RunOutcome::Skipped(skipped)) => result.skipped.push(skipped),
            Err(e) => {
                let reason = format!("run failed: {e:#}");
                log::warn!(
                    "{scenario} under {}, rep {}: {reason}",
                    next.expert,
                    rep + 1
                );
                result.skipped.push(SkippedRun {
                    expert: next.expert.clone(),
                    rep,
                    reason: reason.clone(),
                });
                failures.push(format!("{scenario} under {}: {reason}", next.expert));
            }
        }
        scores.update(&set.scenarios[index])?;
        save(set)?;
        if failures.len() >= FAILURES_IN_A_ROW {
            bail!(
                "{FAILURES_IN_A_ROW} runs in a row failed (last: {}): fix the cause and rerun \
                 the same command, which continues from the runs saved so far",
                failures.last().expect("just pushed")
            );
        }
    }
}

/// The console line before a run: which run, where the budget stands, the run's class and its
/// open comparisons, every open class, and the time left at most.
#[allow(clippy::too_many_arguments)]
fn progress_line(
    n: usize,
    class: &str,
    scenario: &str,
    expert: &str,
    rep: u32,
    classes: &[ClassRuns],
    states: &[ClassState],
    rules: &Rules,
    spent: Duration,
    budget: Option<Duration>,
    estimate: Duration,
) -> String {
    let open: Vec<&ClassState> = states.iter().filter(|s| s.open()).collect();
    let runs_left: usize = classes
        .iter()
        .zip(states)
        .map(|(c, s)| runs_left_at_most(c, s, rules))
        .sum();
    let mut eta = estimate * runs_left as u32;
    if let Some(b) = budget {
        eta = eta.min(b.saturating_sub(spent));
    }
    let describe = |s: &ClassState| {
        let leader = s.leader.as_deref().unwrap_or("none yet");
        if s.warming_up {
            format!("{} (warm-up, {leader} leads)", s.class)
        } else {
            let open: Vec<&str> = s
                .open_challengers()
                .map(|c| c.challenger.as_str())
                .collect();
            format!("{} ({leader} leads; open {})", s.class, open.join(", "))
        }
    };
    let spent_line = match budget {
        Some(b) => format!("{} of {} spent", human(spent), human(b)),
        None => format!("{} spent", human(spent)),
    };
    format!(
        "budgeted run {n} ({spent_line}, a run about {}): {scenario} under {expert}, rep {} — \
         {}; open {} of {} classes: {}; at most {} left",
        human(estimate),
        rep + 1,
        class,
        open.len(),
        states.len(),
        open.iter()
            .map(|s| describe(s))
            .collect::<Vec<_>>()
            .join("; "),
        human(eta)
    )
}

/// What a budgeted calibration's end means, for the console and the report: why it stopped,
/// how to continue, and every class's standing.
pub fn describe(report: &BudgetReport) -> String {
    let mut out = format!(
        "{} run(s) in {} ({} in the folder); noise floor {:.3} ({}).\n",
        report.runs,
        human(report.spent),
        report.total_runs,
        report.noise.floor,
        report.noise.source
    );
    out.push_str(&match &report.stop {
        Stop::Settled => "Stopped: every class is settled.\n".to_string(),
        Stop::PlanSpent => "Stopped: the open comparisons have run every unit of the plan; to \
             compare them further, rerun with more --reps (in a new --dir: the repetitions are \
             part of the folder's options).\n"
            .to_string(),
        Stop::Budget { left_s, next_s } => format!(
            "Stopped: {} of the budget left, the next run takes about {}; rerun the same \
             command (with a new --budget) to continue from these runs.\n",
            human(Duration::from_secs_f64(*left_s)),
            human(Duration::from_secs_f64(*next_s))
        ),
    });
    for s in &report.states {
        let leader = s.leader.as_deref().unwrap_or("none yet");
        let line = if s.settled() {
            format!("- {}: {leader} leads, settled", s.class)
        } else {
            let undecided: Vec<String> = s
                .comparisons
                .iter()
                .filter(|c| {
                    !matches!(
                        c.standing,
                        super::Standing::Below | super::Standing::WithinMinGain
                    )
                })
                .map(|c| {
                    format!(
                        "{} {:+.3} ({}, {} pair(s), below needs > {:.3})",
                        c.challenger,
                        -c.difference,
                        match c.standing {
                            super::Standing::Exhausted => "plan spent",
                            _ => "open",
                        },
                        c.pairs,
                        c.threshold
                    )
                })
                .collect();
            let warm = if s.warming_up {
                " (warm-up not done)"
            } else {
                ""
            };
            format!(
                "- {}: {leader} leads{warm}; undecided: {}",
                s.class,
                undecided.join(", ")
            )
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// Recorded-looking runs of one builtin scenario for tests: `S20` (web + network), each run's
/// response time constant at the expert's level, so the score orders the experts by it.
#[cfg(test)]
pub(crate) mod fixture {
    use std::time::Duration;

    use anyhow::{bail, Result};
    use asa_scenarios::catalogue::BUILTIN_SCENARIOS;
    use asa_scenarios::loads::LoadOutput;
    use asa_scenarios::probes::ProbeOutput;
    use asa_scenarios::runner::{PhaseRecord, ResultSet, RunOptions, RunOutcome, RunRecord};
    use asa_scenarios::work::WorkUnit;

    use super::Runner;

    /// The scenario the fixture runs.
    pub const SCENARIO: &str = "S20";

    /// One run of S20 under `expert` with every click answered in `response_ms`.
    pub fn record(expert: &str, rep: u32, response_ms: f64) -> RunRecord {
        let mut probe = ProbeOutput {
            kind: "web".into(),
            ..Default::default()
        };
        probe.summary.insert("response_p99_ms".into(), response_ms);
        probe.summary.insert("response_p50_ms".into(), response_ms);
        probe
            .samples
            .insert("response_ms".into(), vec![response_ms; 120]);
        RunRecord {
            expert: expert.into(),
            rep,
            pinned: expert.into(),
            started_unix_ms: 0,
            probe_started_unix_ms: 0,
            probe_ended_unix_ms: 0,
            probe,
            phases: vec![PhaseRecord {
                load: "network".into(),
                planned_s: 1.0,
                output: Some(LoadOutput {
                    load: "network".into(),
                    throughput: Some(3.0),
                    unit: "Gbit/s".into(),
                    ..Default::default()
                }),
                started_unix_ms: 0,
                ended_unix_ms: 0,
                app_class: Some("network".into()),
            }],
            valid: true,
            load_start: None,
            probe_tgid: 0,
            probe_app_class: "interactive".into(),
            boot_id: None,
        }
    }

    /// An empty result set of `experts` × `reps` over the built-in catalogue.
    pub fn empty_set(experts: &[&str], reps: u32) -> ResultSet {
        let options = RunOptions {
            experts: experts.iter().map(|e| e.to_string()).collect(),
            reps,
            rotation: 0,
            duration: Duration::from_secs(20),
            min_phase: Duration::ZERO,
            settle: Duration::from_secs(2),
            hold: Duration::ZERO,
            dirty_limit_kib: 0,
            cooldown: Duration::from_secs(1),
            work_dir: "/nonexistent".into(),
            work_unit: WorkUnit {
                iterations_per_ms: 1000.0,
            },
        };
        ResultSet::new(options, BUILTIN_SCENARIOS.to_string())
    }

    /// Runs S20 with each expert's response time (`levels`; a repetition adds 1 ms), each run
    /// `cost` long on its own clock; experts listed in `failing` fail.
    pub struct FakeRunner {
        pub levels: Vec<(&'static str, f64)>,
        pub cost: Duration,
        pub clock: Duration,
        pub failing: Vec<&'static str>,
        pub made: Vec<(String, u32)>,
    }

    impl FakeRunner {
        pub fn new(levels: &[(&'static str, f64)], cost: Duration) -> Self {
            FakeRunner {
                levels: levels.to_vec(),
                cost,
                clock: Duration::ZERO,
                failing: Vec::new(),
                made: Vec::new(),
            }
        }
    }

    impl Runner for FakeRunner {
        fn run(&mut self, scenario: &str, expert: &str, rep: u32) -> Result<RunOutcome> {
            assert_eq!(scenario, SCENARIO);
            self.clock += self.cost;
            self.made.push((expert.to_string(), rep));
            if self.failing.contains(&expert) {
                bail!("the network load's server did not start");
            }
            let level = self.levels.iter().find(|(e, _)| *e == expert).unwrap().1;
            Ok(RunOutcome::Ran(Box::new(record(
                expert,
                rep,
                level + f64::from(rep),
            ))))
        }

        fn elapsed(&self) -> Duration {
            self.clock
        }

        fn nominal_cost(&self, _scenario: &str) -> Duration {
            self.cost
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixture::{empty_set, FakeRunner, SCENARIO};
    use super::*;

    fn plan(reps: u32) -> Vec<PlannedClass> {
        let catalogue = ScenarioCatalogue::builtin().unwrap();
        planned_classes(
            &catalogue,
            &[SCENARIO.to_string()],
            reps,
            ClassScheme::ProbeLoad,
        )
        .unwrap()
        .0
    }

    fn opts(experts: &[&str], budget: Option<Duration>) -> BudgetOptions {
        BudgetOptions {
            budget,
            min_gain: crate::budget::DEFAULT_MIN_GAIN,
            noise_floor: None,
            experts: experts.iter().map(|e| e.to_string()).collect(),
        }
    }

    fn run(
        set: &mut ResultSet,
        plan: &[PlannedClass],
        opts: &BudgetOptions,
        runner: &mut FakeRunner,
    ) -> Result<(BudgetReport, usize, Vec<String>)> {
        let catalogue = ScenarioCatalogue::builtin().unwrap();
        let mut saves = 0;
        let mut lines = Vec::new();
        let report = run_budget(
            set,
            &catalogue,
            plan,
            opts,
            runner,
            &mut |_| {
                saves += 1;
                Ok(())
            },
            &mut |line| lines.push(line.to_string()),
        )?;
        Ok((report, saves, lines))
    }

    #[test]
    fn units_run_repetition_by_repetition_across_a_classes_scenarios() {
        let catalogue = ScenarioCatalogue::builtin().unwrap();
        let names: Vec<String> = ["S6", "S13", "P1"].iter().map(|s| s.to_string()).collect();
        let (classes, left_out) =
            planned_classes(&catalogue, &names, 2, ClassScheme::Load).unwrap();
        assert_eq!(classes.len(), 1);
        assert_eq!(classes[0].class, "network");
        let units: Vec<(&str, u32)> = classes[0]
            .units
            .iter()
            .map(|(s, r)| (s.as_str(), *r))
            .collect();
        assert_eq!(units, [("S6", 0), ("S13", 0), ("S6", 1), ("S13", 1)]);
        assert_eq!(left_out.len(), 1);
        assert_eq!(left_out[0].0, "P1");
    }

    /// good answers in 40 ms, bad in 250 ms: after the warm-up (2 runs each) bad is below
    /// beyond the noise and the loop stops, 4 of the plan's 8 runs made; a rerun over the same
    /// set makes none.
    #[test]
    fn a_clear_winner_settles_after_the_warm_up_and_a_rerun_adds_nothing() {
        let experts = ["good", "bad"];
        let mut set = empty_set(&experts, 4);
        let mut runner =
            FakeRunner::new(&[("good", 40.0), ("bad", 250.0)], Duration::from_secs(60));
        let (report, saves, lines) =
            run(&mut set, &plan(4), &opts(&experts, None), &mut runner).unwrap();
        assert_eq!(report.stop, Stop::Settled);
        assert_eq!((report.runs, report.total_runs, saves), (4, 4, 4));
        assert_eq!(report.states[0].leader.as_deref(), Some("good"));
        assert!(
            lines[0]
                .starts_with("budgeted run 1 (0s spent, a run about 1m00s): S20 under bad, rep 1"),
            "{}",
            lines[0]
        );
        assert!(
            lines[0].contains("open 1 of 1 classes: web+network (warm-up"),
            "{}",
            lines[0]
        );
        let (again, _, _) = run(&mut set, &plan(4), &opts(&experts, None), &mut runner).unwrap();
        assert_eq!(
            (again.runs, again.total_runs, &again.stop),
            (0, 4, &Stop::Settled)
        );
        assert!(describe(&again).contains("web+network: good leads, settled"));
    }

    /// Runs of 60 s in a budget of 150 s: two fit, the third would end at 180 s. A rerun with
    /// another 150 s continues from the two saved runs.
    #[test]
    fn the_budget_stops_before_a_run_that_would_not_fit_and_a_rerun_continues() {
        let experts = ["good", "bad"];
        let mut set = empty_set(&experts, 4);
        let budget = opts(&experts, Some(Duration::from_secs(150)));
        let mut runner =
            FakeRunner::new(&[("good", 40.0), ("bad", 250.0)], Duration::from_secs(60));
        let (report, _, _) = run(&mut set, &plan(4), &budget, &mut runner).unwrap();
        assert_eq!(report.runs, 2);
        assert_eq!(
            report.stop,
            Stop::Budget {
                left_s: 30.0,
                next_s: 60.0
            }
        );
        assert!(describe(&report).contains("rerun the same command"));
        let (report, _, _) = run(&mut set, &plan(4), &budget, &mut runner).unwrap();
        assert_eq!(
            (report.runs, report.total_runs, report.stop),
            (2, 4, Stop::Settled)
        );
        assert_eq!(runner.made.len(), 4);
    }

    /// Equal experts with a noise floor of 0.05: the interval of their difference stays wider
    /// than the min-gain, so the loop pairs every unit of the plan and stops undecided. (With
    /// the floor measured from these noiseless runs, it would settle them as equal.)
    #[test]
    fn equal_experts_in_noise_use_the_whole_plan_and_stay_undecided() {
        let experts = ["a", "b"];
        let mut set = empty_set(&experts, 3);
        let mut runner = FakeRunner::new(&[("a", 100.0), ("b", 100.0)], Duration::from_secs(1));
        let noisy = BudgetOptions {
            noise_floor: Some(0.05),
            ..opts(&experts, None)
        };
        let (report, _, _) = run(&mut set, &plan(3), &noisy, &mut runner).unwrap();
        assert_eq!((&report.stop, report.total_runs), (&Stop::PlanSpent, 6));
        assert!(!report.states[0].settled());
        assert!(
            describe(&report).contains("plan spent"),
            "{}",
            describe(&report)
        );
    }

    #[test]
    fn runs_that_keep_failing_stop_the_calibration_with_what_failed() {
        let experts = ["good", "bad"];
        let mut set = empty_set(&experts, 4);
        let mut runner = FakeRunner::new(&[("good", 40.0), ("bad", 250.0)], Duration::from_secs(1));
        runner.failing = vec!["good", "bad"];
        let err = run(&mut set, &plan(4), &opts(&experts, None), &mut runner)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("3 runs in a row failed"), "{err}");
        assert!(
            err.contains("server did not start") && err.contains("rerun the same command"),
            "{err}"
        );
        let skipped = &set.scenarios[0].skipped;
        assert_eq!(skipped.len(), 3);
        assert!(skipped[0].reason.starts_with("run failed: "));
    }
}
