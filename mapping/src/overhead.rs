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

pub use asa_mapping_table::SwitchCost;

/// The file in a stage 2 folder where every mid-run switch's duration is appended (one JSON
/// object per line: `pair`, `switch_s`, `in_run`), so a resumed calibration keeps them.
pub const SWITCH_TIMES_FILE: &str = "switch-times.jsonl";

/// One mid-run switch's duration, as appended to [`SWITCH_TIMES_FILE`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SwitchTime {
    /// The pseudo-expert, `from>to`.
    pub pair: String,
    /// How long the switch took, seconds.
    pub switch_s: f64,
    /// Whether it completed before its run ended (only then does the run count for the cost).
    pub in_run: bool,
}

/// Reads [`SWITCH_TIMES_FILE`] of a stage 2 folder (none yet: empty).
pub fn read_switch_times(dir: &std::path::Path) -> Result<Vec<SwitchTime>> {
    let path = dir.join(SWITCH_TIMES_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(anyhow!("reading {}: {e}", path.display())),
    };
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| anyhow!("{} line {}: {e}", path.display(), i + 1))
        })
        .collect()
}

/// An [`ExpertSwitcher`] over the supervisor that also understands `A>B`: pin A now, and switch
/// to B `delay` (the run's settle plus half its probe duration) after the run's first load
/// started ([`ExpertSwitcher::load_starting`]), from a timer thread.
pub struct MidRunSwitcher {
    supervisor: Arc<Mutex<Supervisor>>,
    delay: Duration,
    /// A pair pinned whose load has not started yet: (pair, second expert).
    armed: Option<(String, String)>,
    /// The pair under way and its switch thread (the switch's duration in seconds).
    pending: Option<(String, JoinHandle<Result<f64>>)>,
    /// Where switch durations are appended ([`SWITCH_TIMES_FILE`]), if anywhere.
    times: Option<std::path::PathBuf>,
}

impl MidRunSwitcher {
    /// Wrap a supervisor; `delay` is when, after the run's first load started, the second
    /// expert takes over.
    pub fn new(supervisor: Supervisor, delay: Duration) -> Self {
        Self {
            supervisor: Arc::new(Mutex::new(supervisor)),
            delay,
            armed: None,
            pending: None,
            times: None,
        }
    }

    /// Appends every switch's duration to `dir`/[`SWITCH_TIMES_FILE`].
    pub fn recording_times_in(mut self, dir: &std::path::Path) -> Self {
        self.times = Some(dir.join(SWITCH_TIMES_FILE));
        self
    }

    fn record_time(&self, time: &SwitchTime) {
        let Some(path) = &self.times else { return };
        let line = match serde_json::to_string(time) {
            Ok(l) => l,
            Err(e) => return warn!("switch time not recorded: {e}"),
        };
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, format!("{line}\n").as_bytes()));
        if let Err(e) = appended {
            warn!("switch time not recorded in {}: {e}", path.display());
        }
    }

    fn supervisor(&self) -> std::sync::MutexGuard<'_, Supervisor> {
        self.supervisor.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for a pending mid-run switch and records its duration (`in_run`: it had
    /// completed before the run ended); its error, if it failed.
    fn finish_pending(&mut self, in_run: bool) -> Result<()> {
        if let Some((pair, _)) = self.armed.take() {
            warn!("{pair}: the run ended before its load started: no switch");
        }
        let Some((pair, handle)) = self.pending.take() else {
            return Ok(());
        };
        let switch_s = handle
            .join()
            .map_err(|_| anyhow!("the mid-run switch thread panicked"))??;
        self.record_time(&SwitchTime {
            pair,
            switch_s,
            in_run,
        });
        Ok(())
    }
}

impl ExpertSwitcher for MidRunSwitcher {
    fn pin(&mut self, expert: &str) -> Result<String> {
        if let Err(e) = self.finish_pending(false) {
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
        self.armed = second.map(|second| (expert.to_string(), second));
        Ok(report.ops.unwrap_or(report.to))
    }

    fn load_starting(&mut self) {
        let Some((pair, second)) = self.armed.take() else {
            return;
        };
        let supervisor = self.supervisor.clone();
        let delay = self.delay;
        self.pending = Some((
            pair,
            std::thread::spawn(move || {
                std::thread::sleep(delay);
                let mut sup = supervisor.lock().unwrap_or_else(|e| e.into_inner());
                let report = sup
                    .switch_to(&second)
                    .map_err(|e| anyhow!("mid-run switch to {second}: {e}"))?;
                info!("mid-run switch {}", report.summary());
                Ok(report.total_ms / 1000.0)
            }),
        ));
    }

    /// The first expert's: the hold counts before the run, not up to the mid-run switch.
    fn scheduler_since(&self) -> Option<u64> {
        Some(self.supervisor().active().since_unix_ms)
    }

    fn still_pinned(&mut self, expert: &str) -> Result<bool> {
        // A switch still under way when the run ends (lavd loads for 40-80 s under TCG, longer
        // than a probe) left the probe on the first expert plus the second one's loading: no
        // cost of a switch can be read from such a run, so it is not counted.
        let in_time = self.pending.as_ref().is_none_or(|(_, h)| h.is_finished());
        let switched = match self.finish_pending(in_time) {
            Ok(()) if in_time => true,
            Ok(()) => {
                warn!(
                    "{expert}: the switch was still under way when the run ended (the switch takes longer than the rest of the probe): run not counted"
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
        let pending = self.finish_pending(false);
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
pub fn switch_costs(set: &ResultSet, times: &[SwitchTime]) -> Result<Vec<SwitchCost>> {
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
    // Durations per pair, whether or not the switch completed within its run: a switch that
    // is too slow for the run still has a known duration (and no measured score cost).
    let mut durations: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    for t in times {
        if let Some((a, b)) = parse_switch(&t.pair) {
            durations
                .entry((a.to_string(), b.to_string()))
                .or_default()
                .push(t.switch_s);
            costs.entry((a.to_string(), b.to_string())).or_default();
        }
    }
    let run_s = set.options.duration.as_secs_f64();
    Ok(costs
        .into_iter()
        .map(|((from, to), xs)| {
            let switch_s = durations
                .get(&(from.clone(), to.clone()))
                .and_then(|d| median(d));
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
                switch_s,
            }
        })
        .collect())
}

fn median(xs: &[f64]) -> Option<f64> {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => None,
        n if n % 2 == 1 => Some(v[n / 2]),
        n => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// A markdown report of the switch costs in `table`, measured in `set`.
pub fn markdown(table: &crate::MappingTable, set: &ResultSet) -> String {
    let o = &set.options;
    let mut out = format!(
        "# Mapping calibration, stage 2 (overhead): switch costs\n\n\
         Measured on {} ({} CPUs, kernel {}): {} scenario(s) × {} rep(s), {:.0} s probe, the \
         switch half way through the probe. Cost = mean over repetitions of \
         (score(from) + score(to)) / 2 − score(from>to), in UX score (0..1) per switch in a run \
         this long, over the runs whose switch completed within the run; switch time = median \
         duration of the switch (the decision counts the class gain only after it).\n\n\
         | switch | score cost | spread | runs | switch time |\n|---|---:|---:|---:|---:|\n",
        set.machine.cpu_model,
        set.machine.cpus,
        set.machine.kernel,
        set.scenarios.len(),
        o.reps,
        o.duration.as_secs_f64()
    );
    for s in &table.switches {
        let time = s
            .switch_s
            .map(|t| format!("{t:.1} s"))
            .unwrap_or("-".into());
        if s.runs == 0 {
            out.push_str(&format!(
                "| {} → {} | - (never completed within a run) | - | 0 | {time} |\n",
                s.from, s.to
            ));
        } else {
            out.push_str(&format!(
                "| {} → {} | {:+.3} | {:.3} | {} | {time} |\n",
                s.from, s.to, s.score_cost, s.spread, s.runs
            ));
        }
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
            "\nNothing measured for {}: no valid run and no switch time (an expert failed; \
             `results.json` has each run's note). The decision puts no penalty on these \
             switches.\n",
            unmeasured.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switch_times_read_back_and_their_median() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read_switch_times(dir.path()).unwrap().is_empty());
        std::fs::write(
            dir.path().join(SWITCH_TIMES_FILE),
            "{\"pair\":\"eevdf>lavd\",\"switch_s\":60.2,\"in_run\":false}\n\n\
             {\"pair\":\"eevdf>lavd\",\"switch_s\":43.9,\"in_run\":false}\n",
        )
        .unwrap();
        let times = read_switch_times(dir.path()).unwrap();
        assert_eq!(times.len(), 2);
        assert_eq!(times[1].switch_s, 43.9);
        assert_eq!(median(&[60.2, 43.9]), Some(52.05));
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[]), None);
        std::fs::write(dir.path().join(SWITCH_TIMES_FILE), "{\"pair\":1}\n").unwrap();
        let err = read_switch_times(dir.path()).unwrap_err().to_string();
        assert!(err.contains("line 1"), "{err}");
    }

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
