//! The agent against EEVDF, every static expert and the static oracle, scenario by scenario,
//! with the paper's measures (win rate, Top-1, Top-3), and against the held-out oracle
//! ([`super::held_out`]).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use asa_scenarios::catalogue::Catalogue as ScenarioCatalogue;
use asa_scenarios::report::{score_scenario, score_table, win_loss, ScoreTable, WinLoss};
use asa_scenarios::runner::ResultSet;
use asa_scenarios::stats;
use serde::{Deserialize, Serialize};

use super::held_out::{self, HeldOutOracle, HeldOutSummary, StaticRuns, WinCeiling};
use super::trace::{AgentTrace, PhaseTrace};
use super::verdict::{self, Verdict, VerdictCount};
use super::{is_agent, AGENT, AGENT_DRY_RUN};
use crate::calibrate::{CellStats, NoiseEstimate};
use crate::MappingTable;

/// One scenario of the live comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LiveScenario {
    /// Scenario name.
    pub scenario: String,
    /// Whether its background changes mid-run.
    pub phased: bool,
    /// Mean score per expert (the agent included).
    pub means: BTreeMap<String, f64>,
    /// The best static expert and its mean score (the hindsight oracle).
    pub oracle: Option<(String, f64)>,
    /// The static oracle chosen on other repetitions than it is scored on (None with fewer
    /// than 2 repetitions of every static expert).
    #[serde(default)]
    pub held_out_oracle: Option<HeldOutOracle>,
    /// The agent's mean score.
    pub agent: Option<f64>,
    /// Static experts with a strictly higher mean than the agent.
    pub agent_rank: Option<usize>,
    /// What the agent did in each of its runs.
    pub traces: Vec<AgentTrace>,
    /// Mean, spread and runs per expert (the agent included).
    #[serde(default)]
    pub cells: BTreeMap<String, CellStats>,
    /// The agent against the baseline, beyond the noise.
    #[serde(default)]
    pub agent_vs_baseline: Option<Verdict>,
    /// The dry run against the baseline, beyond the noise.
    #[serde(default)]
    pub dry_run_vs_baseline: Option<Verdict>,
    /// The agent against the static oracle, beyond the noise.
    #[serde(default)]
    pub agent_vs_oracle: Option<Verdict>,
}

/// The live comparison of a result set holding [`AGENT`] runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LiveSummary {
    /// The static experts, in run order.
    pub experts: Vec<String>,
    /// The baseline (EEVDF).
    pub baseline: String,
    /// Per scenario.
    pub scenarios: Vec<LiveScenario>,
    /// The agent against the baseline, repetition by repetition.
    pub vs_baseline: WinLoss,
    /// Share of scenarios where the agent's mean is the best of the static set plus the agent.
    pub top1: Option<f64>,
    /// Share where at most two static experts beat it.
    pub top3: Option<f64>,
    /// Mean of agent / static oracle.
    pub oracle_ratio: Option<f64>,
    /// The held-out oracle over the scenarios where it is defined, against the hindsight one
    /// and the agent (None when it is defined in no scenario).
    #[serde(default)]
    pub held_out: Option<HeldOutSummary>,
    /// The most runs a choice among the static experts won over the baseline, summed over the
    /// scenarios where it is defined (None in none).
    #[serde(default)]
    pub win_ceiling: Option<WinCeiling>,
    /// Phased scenarios where the agent beat the static oracle.
    pub phased_wins: Vec<String>,
    /// `asa run --dry-run` against the baseline (the agent's own cost), when it was run.
    #[serde(default)]
    pub dry_run_vs_baseline: Option<WinLoss>,
    /// `asa run` against `asa run --dry-run` (what the switching is worth), when it was run.
    #[serde(default)]
    pub agent_vs_dry_run: Option<WinLoss>,
    /// Mean over scenarios of dry-run score − baseline score.
    #[serde(default)]
    pub dry_run_mean_gain: Option<f64>,
    /// The noise floor the verdicts use.
    #[serde(default)]
    pub noise: Option<NoiseEstimate>,
    /// The agent against the baseline, one verdict per scenario, beyond the noise.
    #[serde(default)]
    pub agent_beyond_noise: VerdictCount,
    /// The dry run against the baseline, one verdict per scenario, beyond the noise.
    #[serde(default)]
    pub dry_run_beyond_noise: Option<VerdictCount>,
    /// Mean over scenarios of (agent − baseline) / baseline.
    #[serde(default)]
    pub mean_gain_vs_baseline: Option<f64>,
    /// Phased scenarios where the agent beat the static oracle beyond the noise.
    #[serde(default)]
    pub phased_wins_beyond_noise: Vec<String>,
    /// Over the phases of the phased scenarios' agent runs with a mapped expert: the median
    /// seconds from the phase's start until that expert ran, over the phases where it did.
    #[serde(default)]
    pub phase_reach_median_s: Option<f64>,
    /// Phases with a mapped expert, and how many of them never ran it.
    #[serde(default)]
    pub phases_mapped: (u32, u32),
}

/// Compares the agent with the static experts in `set` (see the module doc). `logs` is the
/// folder of the agent's decision logs; `table`, the table under test, gives each phase's
/// mapped expert (for the time the agent took to run it).
pub fn live_summary(
    set: &ResultSet,
    baseline: &str,
    logs: &Path,
    table: Option<&MappingTable>,
) -> Result<LiveSummary> {
    let mapped = |load: &str| -> Option<String> {
        let class = table?.class(load)?;
        class.ranked.first().map(|r| r.expert.clone())
    };
    let catalogue = ScenarioCatalogue::parse(&set.catalogue_toml, "the live result set")?;
    let traces = AgentTrace::read_dir(logs)?;
    let mut scored = Vec::new();
    for result in &set.scenarios {
        if result.error.is_some() {
            continue;
        }
        scored.push(score_scenario(&catalogue, result)?);
    }
    let table: ScoreTable = score_table(&scored);
    let experts: Vec<String> = set
        .options
        .experts
        .iter()
        .filter(|e| !is_agent(e))
        .cloned()
        .collect();
    let mut scenarios = Vec::new();
    // Each scenario's static runs, in the order of `scenarios`.
    let mut static_runs: Vec<StaticRuns> = Vec::new();
    let (mut top1, mut top3, mut ranked, mut ratios) = (0, 0, 0, Vec::new());
    let mut phased_wins = Vec::new();
    for result in set.scenarios.iter().filter(|r| r.error.is_none()) {
        let Some(row) = table.get(&result.scenario) else {
            continue;
        };
        let cells: BTreeMap<String, CellStats> = row
            .iter()
            .filter_map(|(e, reps)| {
                let xs: Vec<f64> = reps.iter().flatten().copied().collect();
                verdict::cell(e, &xs).map(|c| (e.clone(), c))
            })
            .collect();
        let means: BTreeMap<String, f64> = cells.iter().map(|(e, c)| (e.clone(), c.mean)).collect();
        let runs: StaticRuns = row
            .iter()
            .filter(|(e, _)| !is_agent(e))
            .map(|(e, reps)| (e.clone(), reps.iter().flatten().copied().collect()))
            .collect();
        let oracle = means
            .iter()
            .filter(|(e, _)| !is_agent(e))
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(e, m)| (e.clone(), *m));
        let agent = means.get(AGENT).copied();
        let agent_rank = agent.map(|a| {
            means
                .iter()
                .filter(|(e, m)| !is_agent(e) && **m > a)
                .count()
        });
        let phased = catalogue
            .scenario(&result.scenario)
            .map(|s| s.is_phased())
            .unwrap_or(false);
        if let (Some(a), Some((_, o))) = (agent, &oracle) {
            ranked += 1;
            let rank = agent_rank.unwrap_or(usize::MAX);
            top1 += usize::from(rank == 0);
            top3 += usize::from(rank < 3);
            if *o > 0.0 {
                ratios.push(a / o);
            }
            if phased && a > *o {
                phased_wins.push(result.scenario.clone());
            }
        }
        // Each agent run's log: the newest log started before the run did.
        let run_traces = result
            .runs
            .iter()
            .filter(|r| r.expert == AGENT)
            .filter_map(|r| {
                traces
                    .range(..=r.started_unix_ms)
                    .next_back()
                    .map(|(_, t)| t.clone().with_phases(r, &mapped))
            })
            .collect();
        let held_out_oracle = held_out::held_out_oracle(&experts, &runs);
        static_runs.push(runs);
        scenarios.push(LiveScenario {
            scenario: result.scenario.clone(),
            phased,
            means,
            held_out_oracle,
            oracle,
            agent,
            agent_rank,
            traces: run_traces,
            cells,
            agent_vs_baseline: None,
            dry_run_vs_baseline: None,
            agent_vs_oracle: None,
        });
    }
    let noise = verdict::noise_floor(
        scenarios
            .iter()
            .flat_map(|s| s.cells.values())
            .filter(|c| !is_agent(&c.expert)),
    );
    let (mut agent_beyond_noise, mut dry_beyond_noise) =
        (VerdictCount::default(), VerdictCount::default());
    let (mut gains, mut phased_wins_beyond_noise) = (Vec::new(), Vec::new());
    for s in &mut scenarios {
        let base = s.cells.get(baseline).cloned();
        let vs = |who: &str| {
            Some(verdict::compare(
                s.cells.get(who)?,
                base.as_ref()?,
                noise.floor,
            ))
        };
        s.agent_vs_baseline = vs(AGENT);
        s.dry_run_vs_baseline = vs(AGENT_DRY_RUN);
        s.agent_vs_oracle = match (&s.oracle, s.cells.get(AGENT)) {
            (Some((o, _)), Some(a)) => s
                .cells
                .get(o)
                .map(|oc| verdict::compare(a, oc, noise.floor)),
            _ => None,
        };
        if let Some(v) = s.agent_vs_baseline {
            agent_beyond_noise.add(v);
        }
        if let Some(v) = s.dry_run_vs_baseline {
            dry_beyond_noise.add(v);
        }
        if let (Some(a), Some(b)) = (s.cells.get(AGENT), &base) {
            if b.mean > 0.0 {
                gains.push((a.mean - b.mean) / b.mean);
            }
        }
        if s.phased && s.agent_vs_oracle == Some(Verdict::Win) {
            phased_wins_beyond_noise.push(s.scenario.clone());
        }
    }
    let phases: Vec<&PhaseTrace> = scenarios
        .iter()
        .flat_map(|s| s.traces.iter().flat_map(|t| t.phases.iter()))
        .filter(|p| p.mapped.is_some())
        .collect();
    let reached: Vec<f64> = phases.iter().filter_map(|p| p.reached_s).collect();
    let phases_mapped = (phases.len() as u32, (phases.len() - reached.len()) as u32);
    let share = |n: usize| (ranked > 0).then(|| n as f64 / ranked as f64);
    let dry = set.options.experts.iter().any(|e| e == AGENT_DRY_RUN);
    let dry_gains: Vec<f64> = scenarios
        .iter()
        .filter_map(|s| Some(s.means.get(AGENT_DRY_RUN)? - s.means.get(baseline)?))
        .collect();
    let held_out = held_out::held_out_summary(
        &experts,
        &static_runs
            .iter()
            .zip(&scenarios)
            .map(|(runs, s)| (runs, s.held_out_oracle.as_ref(), s.agent))
            .collect::<Vec<_>>(),
    );
    let win_ceiling = static_runs
        .iter()
        .filter_map(|runs| held_out::win_ceiling(&experts, baseline, runs))
        .reduce(|a, b| a + b);
    Ok(LiveSummary {
        win_ceiling,
        experts,
        baseline: baseline.to_owned(),
        vs_baseline: win_loss(&table, AGENT, baseline),
        top1: share(top1),
        top3: share(top3),
        oracle_ratio: stats::mean(&ratios),
        held_out,
        phased_wins,
        scenarios,
        dry_run_vs_baseline: dry.then(|| win_loss(&table, AGENT_DRY_RUN, baseline)),
        agent_vs_dry_run: dry.then(|| win_loss(&table, AGENT, AGENT_DRY_RUN)),
        dry_run_mean_gain: stats::mean(&dry_gains),
        noise: Some(noise),
        agent_beyond_noise,
        dry_run_beyond_noise: dry.then_some(dry_beyond_noise),
        mean_gain_vs_baseline: stats::mean(&gains),
        phased_wins_beyond_noise,
        phase_reach_median_s: stats::median(&reached),
        phases_mapped,
    })
}

/// The result set without the agent's runs: the static evidence a table is ranked from.
pub fn static_runs(set: &ResultSet) -> ResultSet {
    let mut set = set.clone();
    set.options.experts.retain(|e| !is_agent(e));
    for s in &mut set.scenarios {
        s.runs.retain(|r| !is_agent(&r.expert));
        s.skipped.retain(|r| !is_agent(&r.expert));
    }
    set
}
