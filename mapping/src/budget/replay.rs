//! Replay: how a budgeted calibration would have decided, from an exhaustive calibration's
//! recorded runs (`asa calibrate --replay RESULTS.json`). The recorded runs are the population:
//! for each seed, every class's units are put in a random order, and the budgeted loop
//! ([`super::run::run_budget`], the one `asa calibrate --budget` runs) draws its runs from the
//! recorded ones, without replacement, scoring them as it goes. Each class's budgeted verdict —
//! the best expert of the table the budgeted runs make — is compared with the exhaustive one:
//! they agree when it is the same expert or one within the noise of it on all the runs
//! (the verdict rule of [`crate::live::verdict::compare`], ties counted equal). Reported over
//! the seeds: the share of classes that agree and the budgeted runs ÷ the exhaustive runs.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{bail, Result};
use asa_scenarios::runner::{ResultSet, RunOutcome, RunRecord, SkippedRun};
use serde::{Deserialize, Serialize};

use super::run::{planned_classes, run_budget, BudgetOptions, PlannedClass, Runner, Stop};
use crate::calibrate::{self, ClassEvidence, ClassScheme, PrototypeOptions};
use crate::live::verdict::{compare, Verdict};

/// A small seeded random number generator (SplitMix64): the replay's draws, reproducible from
/// their seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator started from `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u = 1.0 - self.uniform();
        let v = self.uniform();
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    /// Shuffles `xs` in place (Fisher–Yates).
    pub fn shuffle<T>(&mut self, xs: &mut [T]) {
        for i in (1..xs.len()).rev() {
            let j = (self.next_u64() % (i as u64 + 1)) as usize;
            xs.swap(i, j);
        }
    }
}

/// How to replay.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    /// One replay per seed.
    pub seeds: Vec<u64>,
    /// The budget as a share of the exhaustive runs (None: no budget; the loop stops when every
    /// class is settled or its plan spent).
    pub budget_share: Option<f64>,
    /// `--min-gain`.
    pub min_gain: f64,
    /// `--noise-floor` (None: measured).
    pub noise_floor: Option<f64>,
    /// Class grouping.
    pub scheme: ClassScheme,
    /// `--stay` (None: the table's default expert).
    pub stay: Option<String>,
}

/// One class in one replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassReplay {
    /// Class name.
    pub class: String,
    /// The best expert of the budgeted runs (None: no run of the class was made).
    pub budgeted_best: Option<String>,
    /// It is the exhaustive best or within the noise of it.
    pub agrees: bool,
    /// It is the exhaustive best.
    pub exact: bool,
    /// The budgeted table's first expert (the stay rule applied) is the exhaustive table's
    /// or within the noise of it.
    pub table_agrees: bool,
    /// The budgeted loop ended with the class settled.
    pub settled: bool,
    /// Budgeted runs of the class.
    pub runs: usize,
}

/// One replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeedReplay {
    /// Its seed.
    pub seed: u64,
    /// Budgeted runs.
    pub runs: usize,
    /// Budgeted runs ÷ exhaustive runs.
    pub runs_ratio: f64,
    /// Share of classes whose budgeted best agrees with the exhaustive one.
    pub agreement: f64,
    /// Why the loop stopped.
    pub stop: Stop,
    /// Every class.
    pub classes: Vec<ClassReplay>,
}

/// A class's exhaustive verdict and how the replays did on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassSummary {
    /// Class name.
    pub class: String,
    /// The best expert over all the recorded runs.
    pub exhaustive_best: String,
    /// The experts within the noise of it (itself included).
    pub ties: Vec<String>,
    /// The exhaustive table's first expert (the stay rule applied).
    pub exhaustive_table_first: String,
    /// Recorded runs of the class.
    pub exhaustive_runs: usize,
    /// Share of the replays whose budgeted best agrees.
    pub agreement: f64,
    /// Share of the replays whose budgeted best is the exhaustive best itself.
    pub exact: f64,
    /// Mean budgeted runs of the class.
    pub mean_runs: f64,
    /// Share of the replays that ended with the class settled.
    pub settled: f64,
}

/// The replay over every seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplaySummary {
    /// The seeds.
    pub seeds: Vec<u64>,
    /// The experts compared.
    pub experts: Vec<String>,
    /// Runs of the exhaustive calibration (its classes and experts).
    pub exhaustive_runs: usize,
    /// Budget as a share of the exhaustive runs (None: none).
    pub budget_share: Option<f64>,
    /// `--min-gain`.
    pub min_gain: f64,
    /// The exhaustive calibration's noise floor.
    pub noise_floor: f64,
    /// Share of classes whose budgeted best agrees with the exhaustive one (ties within the
    /// noise counted equal), mean over the seeds.
    pub agreement_with_exhaustive: f64,
    /// The lowest agreement of any seed.
    pub agreement_min: f64,
    /// Share of classes whose budgeted best is the exhaustive best itself, mean over seeds.
    pub exact_agreement: f64,
    /// Share of classes whose budgeted table's first expert agrees with the exhaustive
    /// table's (ties counted equal), mean over the seeds.
    pub table_agreement: f64,
    /// Budgeted runs ÷ exhaustive runs, mean over the seeds.
    pub runs_ratio: f64,
    /// Its range over the seeds.
    pub runs_ratio_range: (f64, f64),
    /// Share of classes settled at the end, mean over the seeds.
    pub settled_share: f64,
    /// How many replays stopped for each reason.
    pub stops: BTreeMap<String, usize>,
    /// Every class.
    pub classes: Vec<ClassSummary>,
    /// Every replay.
    pub replays: Vec<SeedReplay>,
}

/// Recorded runs as a [`Runner`]: each run is the recorded one of the same scenario, expert and
/// repetition, and costs one second of the replay's clock.
struct Recorded<'a> {
    runs: BTreeMap<(&'a str, &'a str, u32), &'a RunRecord>,
    skipped: BTreeMap<(&'a str, &'a str, u32), &'a SkippedRun>,
    clock: Duration,
}

/// What one recorded run costs on the replay's clock.
const RUN_COST: Duration = Duration::from_secs(1);

impl Runner for Recorded<'_> {
    fn run(&mut self, scenario: &str, expert: &str, rep: u32) -> Result<RunOutcome> {
        self.clock += RUN_COST;
        let key = (scenario, expert, rep);
        if let Some(r) = self.runs.get(&key) {
            return Ok(RunOutcome::Ran(Box::new((*r).clone())));
        }
        let skipped = self.skipped.get(&key).map(|s| (*s).clone());
        Ok(RunOutcome::Skipped(skipped.unwrap_or(SkippedRun {
            expert: expert.to_string(),
            rep,
            reason: "not among the recorded runs".to_string(),
        })))
    }

    fn elapsed(&self) -> Duration {
        self.clock
    }

    fn nominal_cost(&self, _scenario: &str) -> Duration {
        RUN_COST
    }
}

/// The experts of a result set that are experts of their own (no switch pairs, not the agent).
fn own_experts(set: &ResultSet) -> Vec<String> {
    set.options
        .experts
        .iter()
        .filter(|e| {
            crate::overhead::parse_switch(e).is_none() && !crate::live::is_agent(e.as_str())
        })
        .cloned()
        .collect()
}

/// The prototype of `sets` with `opts`, None when no run can be scored.
fn table_of(sets: &[ResultSet], opts: &PrototypeOptions) -> Result<Option<calibrate::Prototype>> {
    let scored = sets.iter().any(|s| {
        s.scenarios
            .iter()
            .any(|r| r.error.is_none() && r.runs.iter().any(|run| run.valid))
    });
    if !scored {
        return Ok(None);
    }
    let machine = crate::machine_fingerprint(&sets[0].machine, &asa_experts::Catalogue::builtin());
    calibrate::prototype(sets, machine, String::new(), opts).map(Some)
}

/// Replays the budgeted calibration over `source`, an exhaustive calibration's results, once per
/// seed of `opts` (see the module doc).
pub fn replay(source: &ResultSet, opts: &ReplayOptions) -> Result<ReplaySummary> {
    if opts.seeds.is_empty() {
        bail!("a replay needs at least one seed");
    }
    let catalogue = calibrate::stored_catalogue(source, "the stored scenario catalogue")?;
    let experts = own_experts(source);
    let scenarios: Vec<String> = source
        .scenarios
        .iter()
        .filter(|r| r.error.is_none())
        .map(|r| r.scenario.clone())
        .collect();
    let (plan, _) = planned_classes(&catalogue, &scenarios, source.options.reps, opts.scheme)?;
    let proto_opts = PrototypeOptions {
        stay: opts.stay.clone(),
        noise_floor: opts.noise_floor,
        scheme: opts.scheme,
        min_gain: opts.min_gain,
        across_boots: false,
    };
    let Some(exhaustive) = table_of(std::slice::from_ref(source), &proto_opts)? else {
        bail!("the result set holds no valid run: nothing to replay");
    };
    let floor = exhaustive.noise.floor;
    let evidence: BTreeMap<&str, &ClassEvidence> = exhaustive
        .evidence
        .iter()
        .map(|e| (e.class.as_str(), e))
        .collect();
    // Within the noise of `best` on all the recorded runs of `class`.
    let tie = |class: &str, best: &str, other: &str| -> bool {
        let Some(e) = evidence.get(class) else {
            return false;
        };
        let cell = |x: &str| e.cells.iter().find(|c| c.expert == x);
        match (cell(best), cell(other)) {
            (Some(a), Some(b)) => a.expert == b.expert || compare(a, b, floor) == Verdict::Tie,
            _ => false,
        }
    };
    let mut runs: BTreeMap<(&str, &str, u32), &RunRecord> = BTreeMap::new();
    let mut skipped: BTreeMap<(&str, &str, u32), &SkippedRun> = BTreeMap::new();
    for r in &source.scenarios {
        for run in &r.runs {
            runs.insert((r.scenario.as_str(), run.expert.as_str(), run.rep), run);
        }
        for s in &r.skipped {
            skipped.insert((r.scenario.as_str(), s.expert.as_str(), s.rep), s);
        }
    }
    let recorded_in = |class: &PlannedClass| -> usize {
        let (runs, skipped) = (&runs, &skipped);
        class
            .units
            .iter()
            .flat_map(|(s, rep)| {
                experts.iter().filter(move |e| {
                    let key = (s.as_str(), e.as_str(), *rep);
                    runs.contains_key(&key) || skipped.contains_key(&key)
                })
            })
            .count()
    };
    let exhaustive_runs: usize = plan.iter().map(recorded_in).sum();
    let budget_opts = BudgetOptions {
        budget: opts
            .budget_share
            .map(|share| RUN_COST.mul_f64(share * exhaustive_runs as f64)),
        min_gain: opts.min_gain,
        noise_floor: opts.noise_floor,
        experts: experts.clone(),
    };
    let mut replays = Vec::new();
    for &seed in &opts.seeds {
        let mut rng = Rng::new(seed);
        let shuffled: Vec<PlannedClass> = plan
            .iter()
            .map(|c| {
                let mut units = c.units.clone();
                rng.shuffle(&mut units);
                PlannedClass {
                    class: c.class.clone(),
                    units,
                }
            })
            .collect();
        let mut set = source.clone();
        set.scenarios.clear();
        let mut runner = Recorded {
            runs: runs.clone(),
            skipped: skipped.clone(),
            clock: Duration::ZERO,
        };
        let report = run_budget(
            &mut set,
            &catalogue,
            &shuffled,
            &budget_opts,
            &mut runner,
            &mut |_| Ok(()),
            &mut |_| {},
        )?;
        let budgeted = table_of(std::slice::from_ref(&set), &proto_opts)?;
        let classes: Vec<ClassReplay> = plan
            .iter()
            .zip(&report.states)
            .map(|(planned, state)| {
                let e = budgeted
                    .as_ref()
                    .and_then(|p| p.evidence.iter().find(|e| e.class == planned.class));
                let best = e.map(|e| e.cells[0].expert.clone());
                let first = e.map(|e| e.chosen.clone());
                let exhaustive = evidence.get(planned.class.as_str());
                let agrees = match (&best, exhaustive) {
                    (Some(b), Some(x)) => tie(&planned.class, &x.cells[0].expert, b),
                    _ => false,
                };
                let exact = match (&best, exhaustive) {
                    (Some(b), Some(x)) => *b == x.cells[0].expert,
                    _ => false,
                };
                let table_agrees = match (&first, exhaustive) {
                    (Some(f), Some(x)) => tie(&planned.class, &x.chosen, f),
                    _ => false,
                };
                let class_runs = set
                    .scenarios
                    .iter()
                    .filter(|r| planned.units.iter().any(|(s, _)| *s == r.scenario))
                    .map(|r| r.runs.len() + r.skipped.len())
                    .sum();
                ClassReplay {
                    class: planned.class.clone(),
                    budgeted_best: best,
                    agrees,
                    exact,
                    table_agrees,
                    settled: state.settled(),
                    runs: class_runs,
                }
            })
            .collect();
        let agreement =
            classes.iter().filter(|c| c.agrees).count() as f64 / classes.len().max(1) as f64;
        replays.push(SeedReplay {
            seed,
            runs: report.total_runs,
            runs_ratio: report.total_runs as f64 / exhaustive_runs.max(1) as f64,
            agreement,
            stop: report.stop,
            classes,
        });
    }
    let n = replays.len() as f64;
    let mean = |f: &dyn Fn(&SeedReplay) -> f64| replays.iter().map(f).sum::<f64>() / n;
    let share = |s: &SeedReplay, f: &dyn Fn(&ClassReplay) -> bool| {
        s.classes.iter().filter(|c| f(c)).count() as f64 / s.classes.len().max(1) as f64
    };
    let mut stops = BTreeMap::new();
    for r in &replays {
        let name = match r.stop {
            Stop::Settled => "settled",
            Stop::PlanSpent => "plan_spent",
            Stop::Budget { .. } => "budget",
        };
        *stops.entry(name.to_string()).or_default() += 1;
    }
    let classes = plan
        .iter()
        .enumerate()
        .filter_map(|(i, planned)| {
            let e = evidence.get(planned.class.as_str())?;
            let best = e.cells[0].expert.clone();
            let of = |f: &dyn Fn(&ClassReplay) -> f64| {
                replays.iter().map(|r| f(&r.classes[i])).sum::<f64>() / n
            };
            Some(ClassSummary {
                class: planned.class.clone(),
                ties: e
                    .cells
                    .iter()
                    .filter(|c| tie(&planned.class, &best, &c.expert))
                    .map(|c| c.expert.clone())
                    .collect(),
                exhaustive_best: best,
                exhaustive_table_first: e.chosen.clone(),
                exhaustive_runs: recorded_in(planned),
                agreement: of(&|c| f64::from(u8::from(c.agrees))),
                exact: of(&|c| f64::from(u8::from(c.exact))),
                mean_runs: of(&|c| c.runs as f64),
                settled: of(&|c| f64::from(u8::from(c.settled))),
            })
        })
        .collect();
    let ratios = replays.iter().map(|r| r.runs_ratio);
    Ok(ReplaySummary {
        seeds: opts.seeds.clone(),
        experts,
        exhaustive_runs,
        budget_share: opts.budget_share,
        min_gain: opts.min_gain,
        noise_floor: floor,
        agreement_with_exhaustive: mean(&|r| r.agreement),
        agreement_min: replays
            .iter()
            .map(|r| r.agreement)
            .fold(f64::INFINITY, f64::min),
        exact_agreement: mean(&|r| share(r, &|c| c.exact)),
        table_agreement: mean(&|r| share(r, &|c| c.table_agrees)),
        runs_ratio: mean(&|r| r.runs_ratio),
        runs_ratio_range: (
            ratios.clone().fold(f64::INFINITY, f64::min),
            ratios.fold(0.0, f64::max),
        ),
        settled_share: mean(&|r| share(r, &|c| c.settled)),
        stops,
        classes,
        replays,
    })
}

/// The replay as Markdown: the numbers, then each class's exhaustive verdict and how often the
/// budgeted one agreed.
pub fn markdown(summary: &ReplaySummary, source: &str) -> String {
    let mut out = format!(
        "# Budgeted calibration replayed over {source}\n\n\
         {} seeds ({}–{}), experts {}, {} exhaustive runs, min-gain {:.2}, noise floor {:.3}, \
         budget {}.\n\n",
        summary.seeds.len(),
        summary.seeds.first().copied().unwrap_or(0),
        summary.seeds.last().copied().unwrap_or(0),
        summary.experts.join(", "),
        summary.exhaustive_runs,
        summary.min_gain,
        summary.noise_floor,
        summary
            .budget_share
            .map(|s| format!("{:.0} % of the exhaustive runs", s * 100.0))
            .unwrap_or("none (until settled or the plan is spent)".into())
    );
    out.push_str(&format!(
        "- agreement with the exhaustive verdict (ties within the noise equal): **{:.3}** (lowest \
         seed {:.3}); the exhaustive best itself {:.3}; the table's first expert {:.3}\n\
         - runs ratio (budgeted ÷ exhaustive): **{:.3}** ({:.3}–{:.3})\n\
         - classes settled at the end: {:.3}; stops: {}\n\n",
        summary.agreement_with_exhaustive,
        summary.agreement_min,
        summary.exact_agreement,
        summary.table_agreement,
        summary.runs_ratio,
        summary.runs_ratio_range.0,
        summary.runs_ratio_range.1,
        summary.settled_share,
        summary
            .stops
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    out.push_str(
        "| class | exhaustive best | within its noise | table's first | agreement | exact | \
         runs (of exhaustive) | settled |\n|---|---|---|---|---:|---:|---:|---:|\n",
    );
    for c in &summary.classes {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {:.3} | {:.3} | {:.1} ({}) | {:.3} |\n",
            c.class,
            c.exhaustive_best,
            c.ties.join(", "),
            c.exhaustive_table_first,
            c.agreement,
            c.exact,
            c.mean_runs,
            c.exhaustive_runs,
            c.settled
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::run::fixture::{empty_set, record, SCENARIO};
    use super::*;
    use asa_scenarios::runner::ScenarioResult;

    /// S20 × 4 repetitions, all recorded: good answers in 40, 70, 50 and 60 ms, close in 74,
    /// 44, 64 and 54 (means 55 and 59, far apart in each repetition), bad in 250.
    fn exhaustive() -> ResultSet {
        let mut set = empty_set(&["good", "close", "bad"], 4);
        let mut runs = Vec::new();
        for (rep, (good, close)) in [(40.0, 74.0), (70.0, 44.0), (50.0, 64.0), (60.0, 54.0)]
            .into_iter()
            .enumerate()
        {
            let rep = rep as u32;
            runs.push(record("good", rep, good));
            runs.push(record("close", rep, close));
            runs.push(record("bad", rep, 250.0));
        }
        set.scenarios.push(ScenarioResult {
            scenario: SCENARIO.into(),
            title: "Web Browsing & Network Transfer".into(),
            probe: "web".into(),
            runs,
            error: None,
            skipped: Vec::new(),
        });
        set
    }

    fn options(budget_share: Option<f64>) -> ReplayOptions {
        ReplayOptions {
            seeds: (1..=5).collect(),
            budget_share,
            min_gain: crate::budget::DEFAULT_MIN_GAIN,
            noise_floor: None,
            scheme: ClassScheme::ProbeLoad,
            stay: None,
        }
    }

    #[test]
    fn the_rng_is_reproducible_and_shuffles_into_a_permutation() {
        let (mut a, mut b) = (Rng::new(3), Rng::new(3));
        assert_eq!(a.next_u64(), b.next_u64());
        let mut xs: Vec<u32> = (0..20).collect();
        a.shuffle(&mut xs);
        assert_ne!(xs, (0..20).collect::<Vec<_>>());
        xs.sort();
        assert_eq!(xs, (0..20).collect::<Vec<_>>());
        let u = Rng::new(9).uniform();
        assert!((0.0..1.0).contains(&u));
    }

    /// bad is dropped after its 2 warm-up runs, so at most 10 of the 12 recorded runs are
    /// drawn (6 when the warm-up's repetitions happen to set close apart too); the budgeted
    /// best is good or close, both within the noise of the exhaustive best.
    #[test]
    fn a_replay_draws_from_the_recorded_runs_and_agrees_within_the_noise() {
        let summary = replay(&exhaustive(), &options(None)).unwrap();
        assert_eq!(summary.exhaustive_runs, 12);
        assert_eq!(summary.seeds, [1, 2, 3, 4, 5]);
        assert_eq!(summary.agreement_with_exhaustive, 1.0);
        let class = &summary.classes[0];
        assert_eq!(class.class, "web+network");
        assert_eq!(class.exhaustive_best, "good");
        assert!(
            class.ties.contains(&"close".to_string()),
            "{:?}",
            class.ties
        );
        assert!(!class.ties.contains(&"bad".to_string()));
        for r in &summary.replays {
            assert!((6..=10).contains(&r.runs), "{r:?}");
            assert!((r.runs_ratio - r.runs as f64 / 12.0).abs() < 1e-12);
        }
        let mean = summary.replays.iter().map(|r| r.runs_ratio).sum::<f64>() / 5.0;
        assert!((summary.runs_ratio - mean).abs() < 1e-12);
        let md = markdown(&summary, "results.json");
        assert!(
            md.contains(&format!(
                "runs ratio (budgeted ÷ exhaustive): **{:.3}**",
                summary.runs_ratio
            )),
            "{md}"
        );
    }

    #[test]
    fn a_budget_share_caps_the_replayed_runs() {
        let summary = replay(&exhaustive(), &options(Some(0.5))).unwrap();
        assert!(
            (summary.runs_ratio - 0.5).abs() < 1e-12,
            "{}",
            summary.runs_ratio
        );
        assert_eq!(summary.stops.values().sum::<usize>(), 5);
        assert!(summary.stops.contains_key("budget"), "{:?}", summary.stops);
        assert_eq!(summary.agreement_with_exhaustive, 1.0);
    }

    #[test]
    fn a_set_without_valid_runs_cannot_be_replayed() {
        let mut set = exhaustive();
        for run in &mut set.scenarios[0].runs {
            run.valid = false;
        }
        let err = replay(&set, &options(None)).unwrap_err().to_string();
        assert!(err.contains("no valid run"), "{err}");
    }
}
