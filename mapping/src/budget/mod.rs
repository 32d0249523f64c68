//! Calibration with a budget (`asa calibrate --budget`): which run next, and when a class is
//! settled. Pure logic: runs in, the next run and each class's standing out; [`run`] drives it
//! over real runs or recorded ones ([`replay`]).
//!
//! **Units and pairs.** A class's plan is a list of *units*, each a (scenario, repetition) of
//! one of its scenarios; every expert can run each unit once. Two experts' runs of the same unit
//! are a *pair*: their difference takes out the unit's level (the probe of a pooled scenario,
//! the machine's state during one repetition), so comparisons are made on paired differences.
//!
//! **Leader and challengers.** A class's *leader* is the expert with the best mean after the
//! units' levels are taken out ([`crate::calibrate::additive_fit`]; with every expert on the
//! same units, the best plain mean). Every other expert is a *challenger*, compared with the
//! leader on their pairs: mean difference `m` (leader − challenger) and its standard error
//! `se`. A challenger is
//! - **below** when `m > max(noise floor, z · se)`: the verdict rule of
//!   [`crate::calibrate::difference_threshold`] and [`crate::live::verdict`] (means further apart
//!   than max(noise floor, 2 standard errors of the difference)) with `z` widened for the
//!   repeated looks (below);
//! - **within min-gain** when even the top of its confidence interval, `−m + z · se`, gains less
//!   over the leader than `--min-gain` × the leader's mean: whatever the rest of its runs say,
//!   it cannot win enough to be worth a switch;
//! - **exhausted** when the plan has no unit left to pair them on (undecided: the whole plan
//!   could not tell them apart);
//! - **open** otherwise.
//!
//! A class is **settled** when every challenger is below or within min-gain. Before any
//! challenger is judged, every expert of a class gets [`MIN_RUNS`] runs (the *warm-up*, run
//! round by round over all classes so that a short budget leaves no expert unmeasured).
//!
//! **Repeated looks.** A comparison is looked at after every new pair, up to once per unit of
//! the plan; testing each look at 2 standard errors would separate equal experts far more often
//! than one look at the end. Two guards keep the rate of false separations at or below that
//! of one look at the whole plan (pinned by a simulation test below):
//! - *alpha spending* (Bonferroni): the error rate of the single-look rule, 2·(1 − Φ(2)) =
//!   0.0455, is split evenly over the looks the plan allows, `units − MIN_RUNS + 1`, so
//!   `z = Φ⁻¹(1 − 0.0455 / (2 · looks))` (2 for one look, 2.43 for three, 2.72 for seven);
//! - *a floor on the spread*: the spread of the paired differences is taken as at least √2 ×
//!   the noise floor (the spread of the difference of two runs at the floor), because the
//!   spread of 2 or 3 differences is little better than a guess and a small one by chance
//!   would make `se` tiny.
//!
//! **Which run next.** Warm-up runs first; then, among the classes with an open challenger, the
//! class with the fewest runs so far, its open challenger with the fewest pairs, on the lowest
//! unit that completes a pair (the leader's runs are shared by all its challengers).
//!
//! **Budget.** A run's cost is estimated from the runs of this invocation ([`estimate_cost`]);
//! the calibration stops when the next run would not fit in what is left ([`fits`]). Everything
//! measured stays in the folder; a rerun continues from it.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::calibrate::additive_fit;

pub mod replay;
pub mod run;

/// Runs every expert of a class gets before any comparison may settle it.
pub const MIN_RUNS: usize = 2;

/// Default `--min-gain`: 0.06, a gain of 6 % of the leader's score. The noise floor of one
/// run measured with the current yardstick (results/2026-11-29-noise-floor: 0.036, 60 s runs)
/// is 5.9 % of the median cell mean of those runs (0.61): a smaller gain is inside one run's
/// noise, and the table's noise rule would not switch for it anyway.
pub const DEFAULT_MIN_GAIN: f64 = 0.06;

/// The error rate of one look of the verdict rule, 2 · (1 − Φ(2)): the two-sided tail of a
/// normal distribution beyond 2 standard errors.
const TWO_SE_ALPHA: f64 = 0.045_500_263_896_358_42;

/// What settles a comparison.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rules {
    /// Runs every expert gets before any comparison may settle ([`MIN_RUNS`]).
    pub min_runs: usize,
    /// A gain below this share of the leader's mean is not worth a switch (`--min-gain`).
    pub min_gain: f64,
    /// Score differences up to this are noise (the calibration's noise floor).
    pub noise_floor: f64,
}

/// One class's runs so far: for each expert, the units it ran and each run's score (`None`:
/// the unit was spent without a score — the expert could not be pinned, or the run failed or
/// was invalid).
#[derive(Debug, Clone, PartialEq)]
pub struct ClassRuns {
    /// Class name.
    pub class: String,
    /// Units in the class's plan (its scenarios × repetitions): each expert runs each at most
    /// once.
    pub units: usize,
    /// Expert → unit → score.
    pub experts: BTreeMap<String, BTreeMap<usize, Option<f64>>>,
}

impl ClassRuns {
    /// A class of `units` units with no run yet of any of `experts`.
    pub fn new(class: &str, units: usize, experts: &[String]) -> Self {
        ClassRuns {
            class: class.to_string(),
            units,
            experts: experts
                .iter()
                .map(|e| (e.clone(), BTreeMap::new()))
                .collect(),
        }
    }

    /// Records a run of `expert` on `unit` (an expert not yet known is added).
    pub fn record(&mut self, expert: &str, unit: usize, score: Option<f64>) {
        self.experts
            .entry(expert.to_string())
            .or_default()
            .insert(unit, score);
    }

    /// Runs spent so far, scored or not.
    pub fn runs(&self) -> usize {
        self.experts.values().map(BTreeMap::len).sum()
    }

    fn of(&self, expert: &str) -> &BTreeMap<usize, Option<f64>> {
        &self.experts[expert]
    }

    fn scored(&self, expert: &str) -> usize {
        self.of(expert).values().filter(|s| s.is_some()).count()
    }

    /// The lowest unit `expert` has not spent.
    fn next_unit(&self, expert: &str) -> Option<usize> {
        let runs = self.of(expert);
        (0..self.units).find(|u| !runs.contains_key(u))
    }

    /// Units both have scored: (leader's score, challenger's score).
    fn pairs(&self, a: &str, b: &str) -> Vec<(f64, f64)> {
        let (ra, rb) = (self.of(a), self.of(b));
        ra.iter()
            .filter_map(|(u, x)| Some(((*x)?, rb.get(u).copied().flatten()?)))
            .collect()
    }

    /// Units on which `a` and `b` could still make a pair: neither spent it without a score,
    /// and not both have run it.
    fn pairable(&self, a: &str, b: &str) -> Vec<usize> {
        let (ra, rb) = (self.of(a), self.of(b));
        (0..self.units)
            .filter(|u| {
                let (x, y) = (ra.get(u), rb.get(u));
                let failed = matches!(x, Some(None)) || matches!(y, Some(None));
                let both_ran = x.is_some() && y.is_some();
                !failed && !both_ran
            })
            .collect()
    }
}

/// Where a challenger stands against its class's leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Standing {
    /// Needs more pairs.
    Open,
    /// Below the leader beyond the noise.
    Below,
    /// Cannot beat the leader by `--min-gain`.
    WithinMinGain,
    /// No unit of the plan is left to pair them on: undecided.
    Exhausted,
}

/// A challenger against its class's leader.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The challenger.
    pub challenger: String,
    /// Units both scored.
    pub pairs: usize,
    /// Mean of leader − challenger over the pairs (0 without pairs).
    pub difference: f64,
    /// Its standard error (spread at least √2 × the noise floor; 0 without pairs).
    pub standard_error: f64,
    /// What `difference` must exceed for "below": max(noise floor, z · standard error).
    pub threshold: f64,
    /// The verdict so far.
    pub standing: Standing,
}

/// A class's leader and the standing of every challenger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassState {
    /// Class name.
    pub class: String,
    /// The expert with the best adjusted mean (None before any run).
    pub leader: Option<String>,
    /// Each expert's mean with the units' levels taken out.
    pub means: BTreeMap<String, f64>,
    /// Every challenger, in name order.
    pub comparisons: Vec<Comparison>,
    /// True while some expert still lacks its [`Rules::min_runs`] runs and has units left.
    pub warming_up: bool,
}

impl ClassState {
    /// Every challenger below the leader or within min-gain of it (after the warm-up): more
    /// runs would not change the class's choice.
    pub fn settled(&self) -> bool {
        !self.warming_up
            && self
                .comparisons
                .iter()
                .all(|c| matches!(c.standing, Standing::Below | Standing::WithinMinGain))
    }

    /// True while the class asks for runs: its warm-up, or an open challenger.
    pub fn open(&self) -> bool {
        self.warming_up || self.open_challengers().next().is_some()
    }

    /// The challengers still open.
    pub fn open_challengers(&self) -> impl Iterator<Item = &Comparison> {
        self.comparisons
            .iter()
            .filter(|c| c.standing == Standing::Open)
    }
}

/// How many looks at one comparison a plan of `units` units allows after the warm-up of
/// `min_runs` runs: one per pair from the `min_runs`-th to the last (at least one).
pub fn looks(units: usize, min_runs: usize) -> usize {
    (units.saturating_sub(min_runs) + 1).max(1)
}

/// The number of standard errors a difference must exceed at each of `looks` looks so that all
/// of them together separate equal experts no more often than one look at 2 standard errors:
/// Φ⁻¹(1 − 0.0455 / (2 · looks)) (Bonferroni).
pub fn critical_z(looks: usize) -> f64 {
    normal_quantile(1.0 - TWO_SE_ALPHA / (2.0 * looks.max(1) as f64))
}

/// Φ⁻¹(p) for 0 < p < 1 (P. J. Acklam's rational approximation, relative error below 1.2e-9).
fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    const LOW: f64 = 0.02425;
    if p < LOW {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - LOW {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

/// The leader of a class and where each challenger stands (see the module doc).
pub fn class_state(class: &ClassRuns, rules: &Rules) -> ClassState {
    let runs: Vec<(String, usize, f64)> = class
        .experts
        .iter()
        .flat_map(|(e, units)| {
            units
                .iter()
                .filter_map(move |(u, x)| Some((e.clone(), *u, (*x)?)))
        })
        .collect();
    let means = additive_fit(&runs).adjusted_means();
    let leader = means
        .iter()
        .max_by(|(a, x), (b, y)| {
            x.total_cmp(y)
                .then(class.scored(a).cmp(&class.scored(b)))
                .then(b.cmp(a))
        })
        .map(|(e, _)| e.clone());
    let warming_up = class
        .experts
        .keys()
        .any(|e| class.scored(e) < rules.min_runs && class.next_unit(e).is_some());
    let z = critical_z(looks(class.units, rules.min_runs));
    let comparisons = match &leader {
        None => Vec::new(),
        Some(leader) => class
            .experts
            .keys()
            .filter(|e| *e != leader)
            .map(|challenger| compare(class, leader, challenger, z, rules))
            .collect(),
    };
    ClassState {
        class: class.class.clone(),
        leader,
        means,
        comparisons,
        warming_up,
    }
}

fn compare(class: &ClassRuns, leader: &str, challenger: &str, z: f64, rules: &Rules) -> Comparison {
    let pairs = class.pairs(leader, challenger);
    let can_pair = !class.pairable(leader, challenger).is_empty();
    let n = pairs.len();
    let floor = rules.noise_floor;
    if n == 0 {
        return Comparison {
            challenger: challenger.to_string(),
            pairs: 0,
            difference: 0.0,
            standard_error: 0.0,
            threshold: floor,
            standing: if can_pair {
                Standing::Open
            } else {
                Standing::Exhausted
            },
        };
    }
    let d: Vec<f64> = pairs.iter().map(|(l, c)| l - c).collect();
    let m = d.iter().sum::<f64>() / n as f64;
    let spread = if n >= 2 {
        let ss: f64 = d.iter().map(|x| (x - m).powi(2)).sum();
        (ss / (n - 1) as f64).sqrt()
    } else {
        0.0
    };
    let se = spread.max(std::f64::consts::SQRT_2 * floor) / (n as f64).sqrt();
    let threshold = floor.max(z * se);
    let leader_mean = pairs.iter().map(|(l, _)| l).sum::<f64>() / n as f64;
    let standing = if m > threshold {
        Standing::Below
    } else if -m + z * se < rules.min_gain * leader_mean.abs() {
        Standing::WithinMinGain
    } else if can_pair {
        Standing::Open
    } else {
        Standing::Exhausted
    };
    Comparison {
        challenger: challenger.to_string(),
        pairs: n,
        difference: m,
        standard_error: se,
        threshold,
        standing,
    }
}

/// One run to do: `expert` on unit `unit` of `classes[class]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NextRun {
    /// Index of the class.
    pub class: usize,
    /// The expert to run.
    pub expert: String,
    /// The unit to run it on.
    pub unit: usize,
}

/// The next run (see the module doc), or None when no class asks for one: every class settled
/// or its plan spent.
pub fn next_run(classes: &[ClassRuns], rules: &Rules) -> Option<NextRun> {
    for round in 0..rules.min_runs {
        // This round's runs go to the class with the fewest runs so far, its experts in name
        // order: a budget that ends mid-round leaves the classes evenly measured.
        let due = |class: &ClassRuns| {
            class
                .experts
                .keys()
                .filter(|e| class.scored(e) <= round)
                .find_map(|e| Some((e.clone(), class.next_unit(e)?)))
        };
        let next = classes
            .iter()
            .enumerate()
            .filter_map(|(i, c)| Some((c.runs(), i, due(c)?)))
            .min_by_key(|(runs, i, _)| (*runs, *i));
        if let Some((_, i, (expert, unit))) = next {
            return Some(NextRun {
                class: i,
                expert,
                unit,
            });
        }
    }
    let (i, class, state) = classes
        .iter()
        .enumerate()
        .map(|(i, c)| (i, c, class_state(c, rules)))
        .filter(|(_, _, s)| s.open_challengers().next().is_some())
        .min_by_key(|(i, c, _)| (c.runs(), *i))?;
    let leader = state.leader.as_deref()?;
    let challenger = state
        .open_challengers()
        .min_by(|a, b| a.pairs.cmp(&b.pairs).then(a.challenger.cmp(&b.challenger)))?;
    let c = challenger.challenger.as_str();
    let (runs_l, runs_c) = (class.of(leader), class.of(c));
    let pairable = class.pairable(leader, c);
    let run = |expert: &str, unit: usize| NextRun {
        class: i,
        expert: expert.to_string(),
        unit,
    };
    // The leader completes a pair its challenger opened; else the challenger completes one
    // of the leader's; else the challenger opens a new unit.
    if let Some(&u) = pairable.iter().find(|u| runs_c.contains_key(u)) {
        return Some(run(leader, u));
    }
    if let Some(&u) = pairable.iter().find(|u| runs_l.contains_key(u)) {
        return Some(run(c, u));
    }
    pairable.first().map(|&u| run(c, u))
}

/// At most how many more runs a class can ask for: its warm-up runs still due, and for each
/// open challenger and its leader the units they have not run.
pub fn runs_left_at_most(class: &ClassRuns, state: &ClassState, rules: &Rules) -> usize {
    let units_left = |e: &str| class.units - class.of(e).len();
    let warm_up: usize = class
        .experts
        .keys()
        .map(|e| {
            rules
                .min_runs
                .saturating_sub(class.scored(e))
                .min(units_left(e))
        })
        .sum();
    let open: Vec<&str> = state
        .open_challengers()
        .map(|c| c.challenger.as_str())
        .collect();
    let leader = match (&state.leader, open.is_empty()) {
        (Some(l), false) => units_left(l),
        _ => 0,
    };
    warm_up.max(open.iter().map(|e| units_left(e)).sum::<usize>() + leader)
}

/// What one run of `expert` is expected to cost: the median of its runs measured so far
/// (`measured`: expert and wall time of every run of this invocation), else the median of all
/// of them, else `nominal` (the plan's hold, settle, probe and cool-down).
pub fn estimate_cost(measured: &[(String, Duration)], expert: &str, nominal: Duration) -> Duration {
    let median = |mut xs: Vec<Duration>| -> Option<Duration> {
        xs.sort();
        let n = xs.len();
        match n {
            0 => None,
            _ if n % 2 == 1 => Some(xs[n / 2]),
            _ => Some((xs[n / 2 - 1] + xs[n / 2]) / 2),
        }
    };
    let own = measured
        .iter()
        .filter(|(e, _)| e == expert)
        .map(|(_, d)| *d)
        .collect();
    median(own)
        .or_else(|| median(measured.iter().map(|(_, d)| *d).collect()))
        .unwrap_or(nominal)
}

/// Whether a run expected to take `estimate` fits in `budget` after `spent`.
pub fn fits(spent: Duration, budget: Duration, estimate: Duration) -> bool {
    spent + estimate <= budget
}

/// `1h02m`, `15m10s` or `42s`.
pub fn human(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

/// Parses a budget: hours, minutes and seconds as `2h`, `90m`, `1h30m`, `45s`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || {
        format!(
            "{text:?} is not a duration: write hours, minutes and seconds as 2h, 90m, 1h30m or \
             45s"
        )
    };
    let mut secs = 0u64;
    let mut digits = String::new();
    for ch in text.trim().chars() {
        match ch {
            '0'..='9' => digits.push(ch),
            'h' | 'm' | 's' if !digits.is_empty() => {
                let n: u64 = digits.parse().map_err(|_| bad())?;
                let unit = match ch {
                    'h' => 3600,
                    'm' => 60,
                    _ => 1,
                };
                secs = n
                    .checked_mul(unit)
                    .and_then(|x| secs.checked_add(x))
                    .ok_or_else(bad)?;
                digits.clear();
            }
            _ => return Err(bad()),
        }
    }
    if !digits.is_empty() || secs == 0 {
        return Err(bad());
    }
    Ok(Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXPERTS: [&str; 3] = ["a", "b", "c"];

    fn experts() -> Vec<String> {
        EXPERTS.iter().map(|e| e.to_string()).collect()
    }

    fn rules(floor: f64) -> Rules {
        Rules {
            min_runs: MIN_RUNS,
            min_gain: DEFAULT_MIN_GAIN,
            noise_floor: floor,
        }
    }

    /// A class of `units` units where each expert ran its listed scores on units 0, 1, ….
    fn class(units: usize, runs: &[(&str, &[f64])]) -> ClassRuns {
        let mut c = ClassRuns::new("k", units, &[]);
        for (expert, scores) in runs {
            c.experts.entry(expert.to_string()).or_default();
            for (u, x) in scores.iter().enumerate() {
                c.record(expert, u, Some(*x));
            }
        }
        c
    }

    fn standing(state: &ClassState, expert: &str) -> Standing {
        state
            .comparisons
            .iter()
            .find(|c| c.challenger == expert)
            .unwrap()
            .standing
    }

    #[test]
    fn one_look_is_two_standard_errors_and_more_looks_widen_it() {
        assert!((critical_z(1) - 2.0).abs() < 1e-6, "{}", critical_z(1));
        // 0.0455 / 6 = 0.00758 in each tail: Φ⁻¹(0.99242) = 2.428.
        assert!((critical_z(3) - 2.428).abs() < 1e-3, "{}", critical_z(3));
        assert!((critical_z(7) - 2.721).abs() < 1e-3, "{}", critical_z(7));
        for n in 1..20 {
            assert!(critical_z(n + 1) > critical_z(n));
        }
        assert_eq!(looks(4, 2), 3);
        assert_eq!(looks(1, 2), 1);
        assert!((normal_quantile(0.5)).abs() < 1e-12);
        assert!((normal_quantile(0.975) - 1.959_964).abs() < 1e-6);
        assert!((normal_quantile(0.001) + 3.090_232).abs() < 1e-6);
    }

    #[test]
    fn every_expert_gets_the_minimum_round_by_round_before_any_comparison() {
        let mut classes = vec![
            ClassRuns::new("x", 4, &experts()),
            ClassRuns::new("y", 4, &experts()),
        ];
        let r = rules(0.03);
        let mut order = Vec::new();
        for _ in 0..12 {
            let next = next_run(&classes, &r).unwrap();
            order.push((next.class, next.expert.clone(), next.unit));
            // a far ahead of b, b far ahead of c: after the warm-up nothing stays open.
            let score = match next.expert.as_str() {
                "a" => 0.9,
                "b" => 0.5,
                _ => 0.1,
            };
            classes[next.class].record(&next.expert, next.unit, Some(score));
        }
        // The classes take turns, the experts of each in name order.
        let first_round: Vec<_> = order[..6]
            .iter()
            .map(|(c, e, u)| (*c, e.as_str(), *u))
            .collect();
        assert_eq!(
            first_round,
            [
                (0, "a", 0),
                (1, "a", 0),
                (0, "b", 0),
                (1, "b", 0),
                (0, "c", 0),
                (1, "c", 0)
            ]
        );
        assert!(order[6..].iter().all(|(_, _, u)| *u == 1));
        assert_eq!(next_run(&classes, &r), None);
        for c in &classes {
            let s = class_state(c, &r);
            assert_eq!(s.leader.as_deref(), Some("a"));
            assert!(s.settled());
            assert_eq!(standing(&s, "b"), Standing::Below);
        }
    }

    /// Leader 0.60, challenger 0.40 on two units, floor 0.03, a plan of 4 units (3 looks):
    /// se = √2·0.03/√2 = 0.03, threshold max(0.03, 2.428·0.03) = 0.073 < 0.20.
    #[test]
    fn a_challenger_far_below_the_leader_is_settled_after_the_minimum() {
        let c = class(4, &[("a", &[0.60, 0.60]), ("b", &[0.40, 0.40])]);
        let s = class_state(&c, &rules(0.03));
        let cmp = &s.comparisons[0];
        assert_eq!((cmp.standing, cmp.pairs), (Standing::Below, 2));
        assert!((cmp.standard_error - 0.03).abs() < 1e-12);
        assert!(
            (cmp.threshold - 2.428 * 0.03).abs() < 1e-4,
            "{}",
            cmp.threshold
        );
        assert!(s.settled());
    }

    /// Leader and challenger 0.02 apart with a floor of 0.05: neither below beyond the noise
    /// nor surely within 6 % (the interval's top, −0.02 + 2.43 · 0.05, exceeds 0.03): open
    /// until the plan's units are all paired, then exhausted.
    #[test]
    fn a_challenger_within_the_noise_stays_open_until_the_plan_runs_out() {
        let c = class(4, &[("a", &[0.52, 0.52]), ("b", &[0.50, 0.50])]);
        let s = class_state(&c, &rules(0.05));
        assert_eq!(standing(&s, "b"), Standing::Open);
        assert!(!s.settled() && s.open());
        let c = class(4, &[("a", &[0.52; 4]), ("b", &[0.50; 4])]);
        let s = class_state(&c, &rules(0.05));
        assert_eq!(standing(&s, "b"), Standing::Exhausted);
        assert!(!s.settled() && !s.open());
        assert_eq!(next_run(&[c], &rules(0.05)), None);
    }

    /// Six pairs 0.011–0.013 apart, floor 0.01, 8 units (7 looks, z 2.72): se =
    /// √2·0.01/√6 = 0.00577, not below (0.012 < 0.0157), but the top of the gain's interval,
    /// −0.012 + 0.0157 = 0.0037, is under 6 % of 0.5.
    #[test]
    fn a_challenger_that_cannot_gain_min_gain_is_settled() {
        let c = class(
            8,
            &[
                ("a", &[0.5; 6]),
                ("b", &[0.488, 0.487, 0.489, 0.488, 0.487, 0.489]),
            ],
        );
        let r = rules(0.01);
        let s = class_state(&c, &r);
        assert_eq!(standing(&s, "b"), Standing::WithinMinGain);
        assert!(s.settled());
        // With no minimum gain it stays open.
        let s = class_state(&c, &Rules { min_gain: 0.0, ..r });
        assert_eq!(standing(&s, "b"), Standing::Open);
    }

    /// Unit 0 is a hard scenario (scores 0.2), unit 1 an easy one (0.8). a ran both, b only
    /// the easy one, c only the hard one; within each unit c > a > b by 0.05. Plain means
    /// would rank b (0.75) first; with the units' levels taken out the order is c, a, b.
    #[test]
    fn the_leader_is_the_best_mean_once_the_units_levels_are_taken_out() {
        let mut k = ClassRuns::new("k", 4, &experts());
        k.record("a", 0, Some(0.20));
        k.record("a", 1, Some(0.80));
        k.record("b", 1, Some(0.75));
        k.record("c", 0, Some(0.25));
        let s = class_state(&k, &rules(0.03));
        assert_eq!(s.leader.as_deref(), Some("c"));
        assert!(s.means["a"] > s.means["b"], "{:?}", s.means);
        assert!(
            (s.means["c"] - s.means["a"] - 0.05).abs() < 1e-9,
            "{:?}",
            s.means
        );
    }

    #[test]
    fn the_next_run_completes_a_pair_of_the_least_measured_open_challenger() {
        // After the warm-up b and c are both open against a (within the noise); b has 3
        // pairs, c 2: c goes next, on unit 2, which the leader has already run.
        let mut k = class(
            6,
            &[
                ("a", &[0.5, 0.5, 0.5]),
                ("b", &[0.49, 0.49, 0.49]),
                ("c", &[0.49, 0.49]),
            ],
        );
        let r = rules(0.05);
        assert_eq!(
            next_run(std::slice::from_ref(&k), &r),
            Some(NextRun {
                class: 0,
                expert: "c".into(),
                unit: 2
            })
        );
        // A unit the challenger ran and the leader did not is completed by the leader.
        k.record("c", 2, Some(0.49));
        k.record("c", 3, Some(0.49));
        k.record("b", 3, Some(0.49));
        assert_eq!(
            next_run(std::slice::from_ref(&k), &r),
            Some(NextRun {
                class: 0,
                expert: "a".into(),
                unit: 3
            })
        );
        // A unit the leader spent without a score is no pair for anyone: b (3 pairs, first by
        // name) opens the next one.
        k.record("a", 3, None);
        let next = next_run(std::slice::from_ref(&k), &r).unwrap();
        assert_eq!((next.expert.as_str(), next.unit), ("b", 4));
    }

    #[test]
    fn the_class_with_the_fewest_runs_goes_first() {
        let open = |extra: usize| {
            let mut k = class(8, &[("a", &[0.5, 0.5]), ("b", &[0.49, 0.49])]);
            for u in 2..2 + extra {
                k.record("a", u, Some(0.5));
                k.record("b", u, Some(0.49));
            }
            k
        };
        let classes = [open(2), open(0), open(1)];
        assert_eq!(next_run(&classes, &rules(0.05)).unwrap().class, 1);
    }

    #[test]
    fn an_expert_that_cannot_run_leaves_the_warm_up_when_its_units_are_spent() {
        let mut k = ClassRuns::new("k", 2, &experts());
        for u in 0..2 {
            k.record("a", u, Some(0.5));
            k.record("b", u, Some(0.1));
            k.record("c", u, None);
        }
        let s = class_state(&k, &rules(0.03));
        assert!(!s.warming_up);
        assert_eq!(standing(&s, "c"), Standing::Exhausted);
        assert_eq!(standing(&s, "b"), Standing::Below);
        assert!(!s.settled());
        assert_eq!(next_run(&[k], &rules(0.03)), None);
    }

    /// Equal experts (both N(0.5, 0.05) per run, the floor known as 0.05), a plan of 8 units:
    /// stopping as soon as a look separates them must not do so more often than one look at
    /// all 8 pairs with the verdict rule of the exhaustive calibration.
    #[test]
    fn repeated_looks_separate_equal_experts_no_more_often_than_one_look_at_the_whole_plan() {
        let floor = 0.05;
        let r = Rules {
            min_runs: MIN_RUNS,
            min_gain: 0.0,
            noise_floor: floor,
        };
        let mut rng = replay::Rng::new(7);
        let trials = 2000;
        let (mut sequential, mut single) = (0, 0);
        for _ in 0..trials {
            let draws: Vec<(f64, f64)> = (0..8)
                .map(|_| (0.5 + floor * rng.normal(), 0.5 + floor * rng.normal()))
                .collect();
            let mut k = ClassRuns::new("k", 8, &["a".into(), "b".into()]);
            while let Some(next) = next_run(std::slice::from_ref(&k), &r) {
                let (x, y) = draws[next.unit];
                let score = if next.expert == "a" { x } else { y };
                k.record(&next.expert, next.unit, Some(score));
            }
            let s = class_state(&k, &r);
            if s.comparisons[0].standing == Standing::Below {
                sequential += 1;
            }
            let cell = |xs: Vec<f64>| crate::calibrate::cell_stats("x", &xs);
            let a = cell(draws.iter().map(|d| d.0).collect());
            let b = cell(draws.iter().map(|d| d.1).collect());
            if crate::live::verdict::compare(&a, &b, floor) != crate::live::verdict::Verdict::Tie {
                single += 1;
            }
        }
        let (sequential, single) = (
            sequential as f64 / trials as f64,
            single as f64 / trials as f64,
        );
        assert!(
            sequential <= single,
            "sequential {sequential}, one look {single}"
        );
        assert!(sequential < 0.05, "{sequential}");
    }

    #[test]
    fn the_runs_left_are_bounded_by_the_open_comparisons_units() {
        let k = class(
            6,
            &[
                ("a", &[0.5, 0.5, 0.5]),
                ("b", &[0.49, 0.49, 0.49]),
                ("c", &[0.1, 0.1]),
            ],
        );
        let r = rules(0.05);
        let s = class_state(&k, &r);
        assert_eq!(standing(&s, "c"), Standing::Below);
        // b open: 3 units left for b, 3 for the leader.
        assert_eq!(runs_left_at_most(&k, &s, &r), 6);
        let fresh = ClassRuns::new("k", 6, &experts());
        assert_eq!(runs_left_at_most(&fresh, &class_state(&fresh, &r), &r), 6);
    }

    #[test]
    fn a_run_costs_the_median_of_its_experts_runs_else_of_all_else_the_plan() {
        let s = Duration::from_secs;
        let measured = vec![
            ("lavd".to_string(), s(120)),
            ("lavd".to_string(), s(100)),
            ("cosmos".to_string(), s(70)),
        ];
        assert_eq!(estimate_cost(&measured, "lavd", s(60)), s(110));
        assert_eq!(estimate_cost(&measured, "eevdf", s(60)), s(100));
        assert_eq!(estimate_cost(&[], "eevdf", s(60)), s(60));
        assert!(fits(s(80 * 60), s(90 * 60), s(600)));
        assert!(!fits(s(80 * 60), s(90 * 60), s(601)));
    }

    #[test]
    fn budgets_read_as_hours_minutes_and_seconds() {
        let s = Duration::from_secs;
        assert_eq!(parse_duration("90m"), Ok(s(5400)));
        assert_eq!(parse_duration("2h"), Ok(s(7200)));
        assert_eq!(parse_duration("1h30m"), Ok(s(5400)));
        assert_eq!(parse_duration("45s"), Ok(s(45)));
        for bad in ["90", "m", "1.5h", "0m", "1d", ""] {
            let err = parse_duration(bad).unwrap_err();
            assert!(err.contains("2h, 90m, 1h30m or 45s"), "{bad}: {err}");
        }
        assert_eq!(human(s(3725)), "1h02m");
        assert_eq!(human(s(910)), "15m10s");
        assert_eq!(human(s(42)), "42s");
    }
}
