//! The held-out oracle: the static oracle without the winner's curse.
//!
//! The static oracle of a scenario is the expert with the best mean score, chosen after the fact
//! (the **hindsight** oracle). With noisy runs the best of several means is biased upward: it
//! takes the luck of the repetitions it is chosen on. The **held-out** oracle chooses on other
//! runs than it is scored on: for each repetition r, the expert with the best mean over the
//! other repetitions, scored on r; the mean over r is what a perfect per-scenario choice made in
//! advance earns. **One expert for all** is chosen the same way over every scenario at once (the
//! best mean of scenario means over the other repetitions): what choosing a single expert for
//! the machine earns.
//!
//! The **win ceiling** counts the runs a choice among the static experts wins over the baseline's
//! run of the same repetition: the run's best expert picked after the fact (no agent can: it
//! would have to know the noise of the run it is in), the hindsight and the held-out oracle. An
//! agent's win rate over the baseline is bounded by what its experts win; a target above the
//! first count is out of reach with them.
//!
//! All need two or more repetitions of every static expert; with fewer they are not defined
//! (None), not guessed. Each expert's first `reps` scores are used, `reps` being the fewest any
//! expert has; a tie goes to the first expert in run order. Pure logic: scores in, oracles out.

use std::collections::BTreeMap;

use asa_scenarios::stats;
use serde::{Deserialize, Serialize};

/// A scenario's static runs: each expert's scores, in repetition order (runs without a score
/// left out).
pub type StaticRuns = BTreeMap<String, Vec<f64>>;

/// One scenario's held-out oracle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeldOutOracle {
    /// Repetitions used: the fewest any static expert of the scenario has.
    pub reps: usize,
    /// The hindsight oracle over those repetitions: the best mean, chosen after the fact.
    pub hindsight: f64,
    /// Mean over the repetitions r of the score in r of the expert chosen on the others.
    pub score: f64,
    /// The expert chosen for each repetition, in repetition order.
    pub picks: Vec<String>,
}

/// One expert for every scenario, chosen on the other repetitions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OneExpertHeldOut {
    /// Mean over the repetitions r of the chosen expert's mean score over the scenarios in r.
    pub score: f64,
    /// The expert chosen for each repetition, in repetition order.
    pub picks: Vec<String>,
}

/// The held-out oracle over a live run's scenarios, against the hindsight one and the agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeldOutSummary {
    /// Scenarios with a held-out oracle (2+ repetitions of every static expert).
    pub scenarios: usize,
    /// Repetitions the single expert is chosen and scored on: the fewest of those scenarios.
    pub reps: usize,
    /// Mean over those scenarios of the hindsight oracle.
    pub hindsight: f64,
    /// Mean over those scenarios of the held-out oracle.
    pub held_out: f64,
    /// held-out / hindsight (ratio of the two means; None when the hindsight mean is not > 0).
    pub held_out_over_hindsight: Option<f64>,
    /// Mean over those scenarios with an agent score (and an oracle > 0) of agent / hindsight
    /// oracle.
    pub agent_over_hindsight: Option<f64>,
    /// Mean over those scenarios with an agent score (and an oracle > 0) of agent / held-out
    /// oracle.
    pub agent_over_held_out: Option<f64>,
    /// One expert for all, chosen on the other repetitions.
    pub one_expert: Option<OneExpertHeldOut>,
}

/// The runs (scenario × repetition) won over the baseline's run of the same repetition, at best.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WinCeiling {
    /// Runs compared: the repetitions of the scenarios where every expert has 2+ scores.
    pub runs: usize,
    /// Won by each run's best expert other than the baseline, picked after the fact.
    pub per_run: usize,
    /// Won by the scenario's best mean other than the baseline (the hindsight oracle).
    pub hindsight: usize,
    /// Won by the expert with the best mean over the other repetitions (the held-out oracle).
    pub held_out: usize,
}

/// The counts of two sets of scenarios together.
impl std::ops::Add for WinCeiling {
    type Output = Self;

    fn add(self, other: Self) -> Self {
        Self {
            runs: self.runs + other.runs,
            per_run: self.per_run + other.per_run,
            hindsight: self.hindsight + other.hindsight,
            held_out: self.held_out + other.held_out,
        }
    }
}

/// The scenario's [`WinCeiling`] over the baseline among the static `experts` (the baseline
/// among them); None unless each has 2+ scores and another expert than the baseline ran.
pub fn win_ceiling(experts: &[String], baseline: &str, runs: &StaticRuns) -> Option<WinCeiling> {
    let rivals: Vec<String> = experts.iter().filter(|e| *e != baseline).cloned().collect();
    let base = runs.get(baseline)?;
    let reps = common_reps(experts, runs).min(base.len());
    if reps < 2 || rivals.is_empty() {
        return None;
    }
    let by_mean = best(&rivals, |e| stats::mean(&runs[e][..reps]).unwrap_or(0.0));
    let mut c = WinCeiling {
        runs: reps,
        ..WinCeiling::default()
    };
    for (r, &b) in base[..reps].iter().enumerate() {
        let held = best(&rivals, |e| mean_without(&runs[e], reps, r));
        let best_run = rivals
            .iter()
            .map(|e| runs[e][r])
            .fold(f64::NEG_INFINITY, f64::max);
        c.per_run += usize::from(best_run > b);
        c.hindsight += usize::from(runs[by_mean][r] > b);
        c.held_out += usize::from(runs[held][r] > b);
    }
    Some(c)
}

/// Repetitions every expert has a score for (0 without experts).
fn common_reps(experts: &[String], runs: &StaticRuns) -> usize {
    experts
        .iter()
        .map(|e| runs.get(e).map_or(0, Vec::len))
        .min()
        .unwrap_or(0)
}

/// Mean of `xs[..reps]` without `xs[r]`.
fn mean_without(xs: &[f64], reps: usize, r: usize) -> f64 {
    let rest: Vec<f64> = xs[..reps]
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != r)
        .map(|(_, x)| *x)
        .collect();
    stats::mean(&rest).unwrap_or(0.0)
}

/// The expert with the highest value, the first in `experts` on a tie.
fn best(experts: &[String], value: impl Fn(&str) -> f64) -> &String {
    let mut best = &experts[0];
    let mut top = value(best);
    for e in &experts[1..] {
        let v = value(e);
        if v > top {
            (best, top) = (e, v);
        }
    }
    best
}

/// Mean over the scenarios of `value`.
fn mean_over(scenarios: &[&StaticRuns], value: impl Fn(&StaticRuns) -> f64) -> f64 {
    let values: Vec<f64> = scenarios.iter().map(|runs| value(runs)).collect();
    stats::mean(&values).unwrap_or(0.0)
}

/// The scenario's held-out oracle over the static `experts` (in run order); None unless each
/// has 2+ scores.
pub fn held_out_oracle(experts: &[String], runs: &StaticRuns) -> Option<HeldOutOracle> {
    let reps = common_reps(experts, runs);
    if reps < 2 {
        return None;
    }
    let hindsight = experts
        .iter()
        .map(|e| stats::mean(&runs[e][..reps]).unwrap_or(0.0))
        .fold(f64::NEG_INFINITY, f64::max);
    let picks: Vec<String> = (0..reps)
        .map(|r| best(experts, |e| mean_without(&runs[e], reps, r)).clone())
        .collect();
    let scores: Vec<f64> = picks.iter().enumerate().map(|(r, e)| runs[e][r]).collect();
    Some(HeldOutOracle {
        reps,
        hindsight,
        score: stats::mean(&scores)?,
        picks,
    })
}

/// One expert for all the `scenarios` (each as in [`held_out_oracle`]), chosen for each
/// repetition by its mean over the scenarios of its mean over the other repetitions; None
/// unless every scenario has 2+ scores of each expert.
pub fn one_expert_held_out(
    experts: &[String],
    scenarios: &[&StaticRuns],
) -> Option<OneExpertHeldOut> {
    let reps = scenarios
        .iter()
        .map(|runs| common_reps(experts, runs))
        .min()?;
    if reps < 2 {
        return None;
    }
    let picks: Vec<String> = (0..reps)
        .map(|r| {
            best(experts, |e| {
                mean_over(scenarios, |runs| mean_without(&runs[e], reps, r))
            })
            .clone()
        })
        .collect();
    let scores: Vec<f64> = picks
        .iter()
        .enumerate()
        .map(|(r, e)| mean_over(scenarios, |runs| runs[e][r]))
        .collect();
    Some(OneExpertHeldOut {
        score: stats::mean(&scores)?,
        picks,
    })
}

/// The held-out oracle over `scenarios` (each: the static runs as in [`held_out_oracle`], its
/// held-out oracle computed from them, and the agent's mean score, if it ran), against the
/// hindsight oracle and the agent; the scenarios without a held-out oracle are left out, and
/// None is returned when none has one.
pub fn held_out_summary(
    experts: &[String],
    scenarios: &[(&StaticRuns, Option<&HeldOutOracle>, Option<f64>)],
) -> Option<HeldOutSummary> {
    let defined: Vec<(&StaticRuns, &HeldOutOracle, Option<f64>)> = scenarios
        .iter()
        .filter_map(|(runs, oracle, agent)| Some((*runs, (*oracle)?, *agent)))
        .collect();
    let hindsight = stats::mean(&defined.iter().map(|d| d.1.hindsight).collect::<Vec<_>>())?;
    let held_out = stats::mean(&defined.iter().map(|d| d.1.score).collect::<Vec<_>>())?;
    let agent_over = |oracle: fn(&HeldOutOracle) -> f64| {
        let ratios: Vec<f64> = defined
            .iter()
            .filter(|(_, o, _)| oracle(o) > 0.0)
            .filter_map(|(_, o, a)| a.map(|a| a / oracle(o)))
            .collect();
        stats::mean(&ratios)
    };
    let all: Vec<&StaticRuns> = defined.iter().map(|d| d.0).collect();
    Some(HeldOutSummary {
        scenarios: defined.len(),
        reps: defined.iter().map(|d| d.1.reps).min()?,
        hindsight,
        held_out,
        held_out_over_hindsight: (hindsight > 0.0).then(|| held_out / hindsight),
        agent_over_hindsight: agent_over(|o| o.hindsight),
        agent_over_held_out: agent_over(|o| o.score),
        one_expert: one_expert_held_out(experts, &all),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn experts(names: &[&str]) -> Vec<String> {
        names.iter().map(|e| e.to_string()).collect()
    }

    fn runs(cells: &[(&str, &[f64])]) -> StaticRuns {
        cells
            .iter()
            .map(|(e, xs)| (e.to_string(), xs.to_vec()))
            .collect()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn a_noisy_tie_between_two_experts_puts_the_held_out_oracle_below_the_hindsight_one() {
        // Both experts average 0.5; a's first run was lucky, b's second.
        let s = runs(&[("a", &[0.6, 0.4]), ("b", &[0.45, 0.55])]);
        let o = held_out_oracle(&experts(&["a", "b"]), &s).unwrap();
        assert!(close(o.hindsight, 0.5), "{o:?}");
        // Rep 0: b is chosen on rep 1 (0.55 > 0.4) and scores 0.45; rep 1: a, on rep 0, 0.4.
        assert_eq!(o.picks, ["b", "a"]);
        assert!(close(o.score, (0.45 + 0.4) / 2.0), "{o:?}");
        assert!(o.score < o.hindsight);
    }

    #[test]
    fn a_consistently_best_expert_makes_both_oracles_equal() {
        let s = runs(&[("a", &[0.8, 0.7]), ("b", &[0.5, 0.6]), ("c", &[0.2, 0.3])]);
        let o = held_out_oracle(&experts(&["a", "b", "c"]), &s).unwrap();
        assert_eq!(o.picks, ["a", "a"]);
        assert!(close(o.score, o.hindsight) && close(o.score, 0.75), "{o:?}");
    }

    #[test]
    fn one_repetition_leaves_the_held_out_oracle_undefined() {
        let s = runs(&[("a", &[0.8]), ("b", &[0.5])]);
        assert_eq!(held_out_oracle(&experts(&["a", "b"]), &s), None);
        assert_eq!(
            held_out_summary(&experts(&["a", "b"]), &[(&s, None, Some(0.7))]),
            None
        );
    }

    #[test]
    fn an_expert_run_once_or_never_leaves_its_scenario_undefined() {
        let once = runs(&[("a", &[0.8, 0.7]), ("b", &[0.5])]);
        let never = runs(&[("a", &[0.8, 0.7])]);
        let e = experts(&["a", "b"]);
        assert_eq!(held_out_oracle(&e, &once), None);
        assert_eq!(held_out_oracle(&e, &never), None);
    }

    #[test]
    fn extra_repetitions_of_one_expert_are_left_out() {
        // a's third run would make it the hindsight oracle; b and a are compared on two.
        let s = runs(&[("a", &[0.5, 0.5, 0.9]), ("b", &[0.6, 0.6])]);
        let o = held_out_oracle(&experts(&["a", "b"]), &s).unwrap();
        assert_eq!(o.reps, 2);
        assert!(close(o.hindsight, 0.6) && close(o.score, 0.6), "{o:?}");
    }

    #[test]
    fn with_three_repetitions_each_is_scored_by_the_pick_of_the_other_two() {
        let s = runs(&[("a", &[0.9, 0.5, 0.5]), ("b", &[0.6, 0.6, 0.6])]);
        let o = held_out_oracle(&experts(&["a", "b"]), &s).unwrap();
        // Rep 0: a 0.5 vs b 0.6 → b; reps 1 and 2: a 0.7 vs b 0.6 → a.
        assert_eq!(o.picks, ["b", "a", "a"]);
        assert!(close(o.score, (0.6 + 0.5 + 0.5) / 3.0), "{o:?}");
        assert!(close(o.hindsight, 0.6333333333333333), "{o:?}");
    }

    #[test]
    fn a_tie_goes_to_the_first_expert_in_run_order() {
        let s = runs(&[("eevdf", &[0.5, 0.5]), ("bpfland", &[0.5, 0.5])]);
        let o = held_out_oracle(&experts(&["eevdf", "bpfland"]), &s).unwrap();
        assert_eq!(o.picks, ["eevdf", "eevdf"]);
    }

    #[test]
    fn one_expert_for_all_is_the_best_over_every_scenario_on_the_other_repetitions() {
        // a is best in S1, b in S2 by less: a router takes each; one expert for all takes a.
        let s1 = runs(&[("a", &[0.8, 0.8]), ("b", &[0.4, 0.4])]);
        let s2 = runs(&[("a", &[0.5, 0.5]), ("b", &[0.6, 0.6])]);
        let e = experts(&["a", "b"]);
        let one = one_expert_held_out(&e, &[&s1, &s2]).unwrap();
        assert_eq!(one.picks, ["a", "a"]);
        assert!(close(one.score, 0.65), "{one:?}");
        let (o1, o2) = (held_out_oracle(&e, &s1), held_out_oracle(&e, &s2));
        let sum =
            held_out_summary(&e, &[(&s1, o1.as_ref(), None), (&s2, o2.as_ref(), None)]).unwrap();
        assert!(
            close(sum.held_out, 0.7) && close(sum.hindsight, 0.7),
            "{sum:?}"
        );
        assert!(sum.one_expert.unwrap().score < sum.held_out);
    }

    #[test]
    fn only_an_after_the_fact_choice_wins_runs_the_noise_decides() {
        // a wins rep 0, b wins rep 1, each only in its own run; b's mean (0.55) is the best.
        let s = runs(&[
            ("eevdf", &[0.5, 0.5]),
            ("a", &[0.9, 0.1]),
            ("b", &[0.3, 0.8]),
        ]);
        let c = win_ceiling(&experts(&["eevdf", "a", "b"]), "eevdf", &s).unwrap();
        // Held out: rep 0 takes b (its other run 0.8 > 0.1), rep 1 takes a: both lose.
        assert_eq!(
            c,
            WinCeiling {
                runs: 2,
                per_run: 2,
                hindsight: 1,
                held_out: 0
            }
        );
        assert_eq!((c + c).per_run, 4);
    }

    #[test]
    fn a_ceiling_needs_two_repetitions_the_baseline_and_a_rival() {
        let e = experts(&["eevdf", "a"]);
        let once = runs(&[("eevdf", &[0.5]), ("a", &[0.9])]);
        assert_eq!(win_ceiling(&e, "eevdf", &once), None);
        let no_base = runs(&[("a", &[0.9, 0.8])]);
        assert_eq!(win_ceiling(&experts(&["a"]), "eevdf", &no_base), None);
        let alone = runs(&[("eevdf", &[0.5, 0.6])]);
        assert_eq!(win_ceiling(&experts(&["eevdf"]), "eevdf", &alone), None);
        // A tie with the baseline's run is no win.
        let tie = runs(&[("eevdf", &[0.5, 0.5]), ("a", &[0.5, 0.5])]);
        assert_eq!(win_ceiling(&e, "eevdf", &tie).unwrap().per_run, 0);
    }

    #[test]
    fn the_summary_compares_the_agent_with_both_oracles_over_the_defined_scenarios() {
        let e = experts(&["a", "b"]);
        let noisy = runs(&[("a", &[0.6, 0.4]), ("b", &[0.45, 0.55])]);
        let steady = runs(&[("a", &[0.8, 0.8]), ("b", &[0.4, 0.4])]);
        let once = runs(&[("a", &[0.9]), ("b", &[0.1])]);
        let oracles = [&noisy, &steady, &once].map(|runs| held_out_oracle(&e, runs));
        let sum = held_out_summary(
            &e,
            &[
                (&noisy, oracles[0].as_ref(), Some(0.425)),
                (&steady, oracles[1].as_ref(), Some(0.4)),
                (&once, oracles[2].as_ref(), Some(0.9)),
            ],
        )
        .unwrap();
        assert_eq!((sum.scenarios, sum.reps), (2, 2));
        assert!(close(sum.hindsight, (0.5 + 0.8) / 2.0), "{sum:?}");
        assert!(close(sum.held_out, (0.425 + 0.8) / 2.0), "{sum:?}");
        assert!(close(sum.held_out_over_hindsight.unwrap(), 1.225 / 1.3));
        // agent / hindsight: 0.85 and 0.5; agent / held-out: 1.0 and 0.5.
        assert!(close(sum.agent_over_hindsight.unwrap(), 0.675), "{sum:?}");
        assert!(close(sum.agent_over_held_out.unwrap(), 0.75), "{sum:?}");
    }
}
