//! Stage 2 of calibration ("overhead", ASA paper §4.3): what a switch costs the user.
//!
//! A switch is not free: the new expert verifies and loads its BPF programs (CPU time taken
//! from the workload, up to tens of seconds for scx_lavd under emulation), the machine runs on
//! EEVDF for the attach gap, and caches and queues are cold afterwards. This stage measures that
//! cost on the scenario metrics themselves: a scenario run that starts under expert A and
//! switches to B half way (the pseudo-expert `A>B`, see [`MidRunSwitcher`]) is scored like any
//! run, and the cost of the switch is how much lower it scores than the average of a run under A
//! and a run under B, repetition by repetition ([`switch_costs`]). The decision then switches only
//! when the mapped gain pays for it ([`crate::MappingTable::switch_penalty`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use asa_experts::Supervisor;
use asa_scenarios::catalogue::Catalogue as ScenarioCatalogue;
use asa_scenarios::report::score_scenario;
use asa_scenarios::runner::{ExpertSwitcher, ResultSet};
use asa_scenarios::stats;
use log::{info, warn};
use serde::{Deserialize, Serialize};

/// Separator of a mid-run switch pseudo-expert: `bpfland>lavd`.
pub const SWITCH_MARK: char = '>';

/// The pseudo-expert name of a switch from `from` to `to` half way through a run.
pub fn switch_name(from: &str, to: &str) -> String {
    format!("{from}{SWITCH_MARK}{to}")
}

/// `("bpfland", "lavd")` from `bpfland>lavd`; `None` for a plain expert name.
pub fn parse_switch(name: &str) -> Option<(&str, &str)> {
    name.split_once(SWITCH_MARK)
}

/// The measured cost of one ordered switch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchCost {
    /// Expert switched from.
    pub from: String,
    /// Expert switched to.
    pub to: String,
    /// Mean UX score lost by one switch in a run of `run_s` seconds: mean over repetitions of
    /// (score(from) + score(to)) / 2 − score(from>to). Negative values are kept (a switch that
    /// measured as a gain is noise or a real benefit; the decision treats it as free).
    pub score_cost: f64,
    /// Sample standard deviation of the per-repetition costs.
    pub spread: f64,
    /// Repetitions (over every scenario) behind it.
    pub runs: u32,
    /// Probe duration of the runs, seconds (the cost is per switch in a run this long).
    pub run_s: f64,
}

/// An [`ExpertSwitcher`] over the supervisor that also understands `A>B`: pin A now, and switch
/// to B after `delay` (the run's settle plus half its probe duration), from a timer thread.
pub struct MidRunSwitcher {
    supervisor: Arc<Mutex<Supervisor>>,
    delay: Duration,
    pending: Option<JoinHandle<Result<()>>>,
}

impl MidRunSwitcher {
    /// Wrap a supervisor; `delay` is when, after the pin, the second expert takes over.
    pub fn new(supervisor: Supervisor, delay: Duration) -> Self {
        Self {
            supervisor: Arc::new(Mutex::new(supervisor)),
            delay,
            pending: None,
        }
    }

    fn supervisor(&self) -> std::sync::MutexGuard<'_, Supervisor> {
        self.supervisor.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for a pending mid-run switch; its error, if it failed.
    fn finish_pending(&mut self) -> Result<()> {
        match self.pending.take() {
            Some(h) => h
                .join()
                .map_err(|_| anyhow!("the mid-run switch thread panicked"))?,
            None => Ok(()),
        }
    }
}

impl ExpertSwitcher for MidRunSwitcher {
    fn pin(&mut self, expert: &str) -> Result<String> {
        if let Err(e) = self.finish_pending() {
            warn!("the previous mid-run switch failed: {e:#}");
        }
        let (first, second) = match parse_switch(expert) {
            Some((a, b)) => (a.to_string(), Some(b.to_string())),
            None => (expert.to_string(), None),
        };
        let report = self
            .supervisor()
            .switch_to(&first)
            .map_err(|e| anyhow!("pinning {first}: {e}"))?;
        if let Some(second) = second {
            let supervisor = self.supervisor.clone();
            let delay = self.delay;
            self.pending = Some(std::thread::spawn(move || {
                std::thread::sleep(delay);
                let mut sup = supervisor.lock().unwrap_or_else(|e| e.into_inner());
                let report = sup
                    .switch_to(&second)
                    .map_err(|e| anyhow!("mid-run switch to {second}: {e}"))?;
                info!(
                    "mid-run switch {} -> {} in {:.0} ms (EEVDF gap {})",
                    report.from,
                    report.to,
                    report.total_ms,
                    report
                        .eevdf_gap_ms
                        .map(|g| format!("{g:.0} ms"))
                        .unwrap_or("-".into())
                );
                Ok(())
            }));
        }
        Ok(report.ops.unwrap_or(report.to))
    }

    fn still_pinned(&mut self, expert: &str) -> Result<bool> {
        // A switch still under way when the run ends (lavd loads for 40-80 s under TCG, longer
        // than a probe) left the probe on the first expert plus the second one's loading: no
        // cost of a switch can be read from such a run, so it is not counted.
        let in_time = self.pending.as_ref().is_none_or(|h| h.is_finished());
        let switched = match self.finish_pending() {
            Ok(()) if in_time => true,
            Ok(()) => {
                warn!(
                    "{expert}: the switch was still under way when the run ended (the switch                      takes longer than the rest of the probe): run not counted"
                );
                false
            }
            Err(e) => {
                warn!("{e:#}");
                false
            }
        };
        let last = parse_switch(expert).map_or(expert, |(_, b)| b);
        let mut sup = self.supervisor();
        if let Some(event) = sup.check() {
            warn!("during the run: {event}");
        }
        Ok(switched && sup.active().expert == last && sup.healthy())
    }

    fn release(&mut self) -> Result<()> {
        let pending = self.finish_pending();
        self.supervisor().stop()?;
        pending
    }
}

/// The experts list of an overhead run: every expert of `pairs`, then each pair's switch.
pub fn experts_for(pairs: &[(String, String)]) -> Vec<String> {
    let mut experts: Vec<String> = Vec::new();
    for (a, b) in pairs {
        for e in [a, b] {
            if !experts.contains(e) {
                experts.push(e.clone());
            }
        }
    }
    experts.extend(pairs.iter().map(|(a, b)| switch_name(a, b)));
    experts
}

/// Parses `eevdf>bpfland,bpfland>lavd`.
pub fn parse_pairs(text: &str) -> Result<Vec<(String, String)>> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|p| match parse_switch(p) {
            Some((a, b)) if !a.is_empty() && !b.is_empty() && a != b => {
                Ok((a.to_string(), b.to_string()))
            }
            _ => bail!("switch pair {p:?} is not FROM{SWITCH_MARK}TO with two different experts"),
        })
        .collect()
}

/// The cost of every switch measured in `set` (runs of `A`, `B` and `A>B` of the same
/// scenario and repetition).
pub fn switch_costs(set: &ResultSet) -> Result<Vec<SwitchCost>> {
    let catalogue = ScenarioCatalogue::parse(&set.catalogue_toml, "result set")?;
    // (from, to) -> per-repetition costs
    let mut costs: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    for result in set.scenarios.iter().filter(|r| r.error.is_none()) {
        let scored = score_scenario(&catalogue, result)?;
        let score = |expert: &str, rep: u32| {
            scored
                .runs
                .iter()
                .find(|r| r.expert == expert && r.rep == rep)
                .map(|r| r.score)
        };
        for run in &scored.runs {
            let Some((a, b)) = parse_switch(&run.expert) else {
                continue;
            };
            if let (Some(sa), Some(sb)) = (score(a, run.rep), score(b, run.rep)) {
                costs
                    .entry((a.to_string(), b.to_string()))
                    .or_default()
                    .push((sa + sb) / 2.0 - run.score);
            }
        }
    }
    let run_s = set.options.duration.as_secs_f64();
    Ok(costs
        .into_iter()
        .map(|((from, to), xs)| {
            let n = xs.len() as f64;
            let spread = if xs.len() < 2 {
                0.0
            } else {
                stats::std_dev(&xs).unwrap_or(0.0) * (n / (n - 1.0)).sqrt()
            };
            SwitchCost {
                from,
                to,
                score_cost: stats::mean(&xs).unwrap_or(0.0),
                spread,
                runs: xs.len() as u32,
                run_s,
            }
        })
        .collect())
}

/// A markdown report of the switch costs in `table`, measured in `set`.
pub fn markdown(table: &crate::MappingTable, set: &ResultSet) -> String {
    let o = &set.options;
    let mut out = format!(
        "# Mapping calibration, stage 2 (overhead): switch costs\n\n\
         Measured on {} ({} CPUs, kernel {}): {} scenario(s) × {} rep(s), {:.0} s probe, the \
         switch half way through the probe. Cost = mean over repetitions of \
         (score(from) + score(to)) / 2 − score(from>to), in UX score (0..1) per switch in a run \
         this long.\n\n| switch | score cost | spread | runs |\n|---|---:|---:|---:|\n",
        set.machine.cpu_model,
        set.machine.cpus,
        set.machine.kernel,
        set.scenarios.len(),
        o.reps,
        o.duration.as_secs_f64()
    );
    for s in &table.switches {
        out.push_str(&format!(
            "| {} → {} | {:+.3} | {:.3} | {} |\n",
            s.from, s.to, s.score_cost, s.spread, s.runs
        ));
    }
    let unmeasured: Vec<String> = o
        .experts
        .iter()
        .filter_map(|e| parse_switch(e))
        .filter(|(a, b)| !table.switches.iter().any(|s| s.from == *a && s.to == *b))
        .map(|(a, b)| format!("{a} → {b}"))
        .collect();
    if !unmeasured.is_empty() {
        out.push_str(&format!(
            "\nNo cost measured for {}: none of their runs was valid (the switch did not complete \
             within the probe, or an expert failed; `results.json` has each run's note). The \
             decision puts no penalty on these switches.\n",
            unmeasured.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_parse_and_expand_into_experts() {
        let pairs = parse_pairs("eevdf>bpfland, bpfland>lavd").unwrap();
        assert_eq!(
            experts_for(&pairs),
            ["eevdf", "bpfland", "lavd", "eevdf>bpfland", "bpfland>lavd"]
        );
        for bad in ["eevdf", "eevdf>eevdf", ">lavd", "lavd>"] {
            assert!(parse_pairs(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_switch("a>b"), Some(("a", "b")));
        assert_eq!(parse_switch("lavd"), None);
    }
}
