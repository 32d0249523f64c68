//! The switch benchmark: every ordered pair of experts, several times, in one boot.
//!
//! The experts are visited along an Eulerian circuit of the complete directed graph, so each
//! switch is both a measured pair and the set-up of the next one: n·(n−1) switches a round.
//!
//! With `standby`, the target of each switch (unless EEVDF) is first started as a hot standby
//! and the switch is requested only once it is parked at its gate: the switch then measures
//! "stop the old one, release the gate" (request to `enabled`, and the EEVDF gap).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use asa_experts::{
    Catalogue, SchedExt, StandbyState, Supervisor, SupervisorConfig, SupervisorEvent, SwitchReport,
};
use serde::{Deserialize, Serialize};

/// `asa bench-switch` options.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Experts, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "eevdf,bpfland,rusty,lavd"
    )]
    pub experts: Vec<String>,
    /// Rounds of the all-pairs circuit.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Write the full result as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Stop the old expert before starting the new one (no attach gate): the baseline the
    /// gate is measured against.
    #[arg(long, conflicts_with = "standby_targets")]
    pub break_before_make: bool,
    /// Before each switch, start the target as a hot standby and wait until it is parked
    /// at its gate: measures the switch to a standby (request to `enabled`, EEVDF gap).
    #[arg(long)]
    pub standby_targets: bool,
}

/// `asa bench-switch`: the benchmark with a supervisor of `catalogue` and `config` (without
/// the attach gate under `--break-before-make`) on this machine's sched_ext; writes the JSON
/// result when asked and returns the Markdown table.
pub fn command(args: &BenchArgs, catalogue: Catalogue, config: SupervisorConfig) -> Result<String> {
    let config = SupervisorConfig {
        gate_attach: !args.break_before_make,
        ..config
    };
    let mut sup = Supervisor::new(catalogue, SchedExt::system()?, config)?;
    let bench = run(&mut sup, &args.experts, args.rounds, args.standby_targets)?;
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&bench)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(markdown(&bench))
}

/// A closed walk that uses every ordered pair `(a, b)`, `a != b`, exactly once, starting and
/// ending at `nodes[0]`.
pub fn all_pairs_circuit(nodes: &[String]) -> Vec<String> {
    let n = nodes.len();
    if n < 2 {
        return nodes.to_vec();
    }
    // Hierholzer's algorithm on the complete digraph.
    let mut unused: Vec<Vec<usize>> = (0..n)
        .map(|v| (0..n).filter(|&u| u != v).rev().collect())
        .collect();
    let mut stack = vec![0usize];
    let mut circuit = Vec::with_capacity(n * (n - 1) + 1);
    while let Some(&v) = stack.last() {
        if let Some(u) = unused[v].pop() {
            stack.push(u);
        } else {
            circuit.push(stack.pop().unwrap());
        }
    }
    circuit.reverse();
    circuit.into_iter().map(|i| nodes[i].clone()).collect()
}

/// Median of a non-empty slice.
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// Summary of the switches from one expert to another.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PairSummary {
    /// From.
    pub from: String,
    /// To.
    pub to: String,
    /// Switches measured.
    pub samples: usize,
    /// Median whole switch (ms).
    pub total_ms: f64,
    /// Median time the new expert loaded behind the attach gate while the old one ran (ms).
    pub prepare_ms: Option<f64>,
    /// Median stop of the old expert (ms), when it was a BPF scheduler.
    pub stop_ms: Option<f64>,
    /// Median start of the new expert (ms), when it is a BPF scheduler.
    pub start_ms: Option<f64>,
    /// Median time on EEVDF between two BPF schedulers (ms).
    pub eevdf_gap_ms: Option<f64>,
}

/// The benchmark's result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SwitchBench {
    /// The experts, in order.
    pub experts: Vec<String>,
    /// Rounds of the circuit.
    pub rounds: usize,
    /// Every switch.
    pub switches: Vec<SwitchReport>,
    /// One row per ordered pair.
    pub pairs: Vec<PairSummary>,
    /// Switches went to hot standbys parked beforehand.
    #[serde(default)]
    pub standby: bool,
    /// Each standby as it parked, before its switch (standby mode).
    #[serde(default)]
    pub parked: Vec<ParkedStandby>,
}

/// A hot standby parked at its gate, as the benchmark saw it before switching to it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ParkedStandby {
    /// The expert.
    pub expert: String,
    /// While this expert ran.
    pub beside: String,
    /// Process start to parked (ms), at the standby priority.
    pub load_ms: f64,
    /// Resident memory once parked (KiB).
    pub rss_kib: Option<u64>,
}

/// Start `target` as a hot standby and wait until it is parked.
fn park(supervisor: &mut Supervisor, target: &str) -> Result<ParkedStandby> {
    supervisor.set_standby(&[target.to_owned()]);
    let t0 = Instant::now();
    loop {
        for e in supervisor.check_standby() {
            if let SupervisorEvent::StandbyLost { expert, .. } = &e {
                if expert == target {
                    bail!("{e}");
                }
            }
        }
        let info = supervisor.standby_info(true);
        if let Some(s) = info
            .iter()
            .find(|s| s.expert == target && s.state == StandbyState::Parked)
        {
            return Ok(ParkedStandby {
                expert: target.to_owned(),
                beside: supervisor.active().expert.clone(),
                load_ms: s.load_ms.unwrap_or_default(),
                rss_kib: s.rss_kib,
            });
        }
        if t0.elapsed() > Duration::from_secs(300) {
            bail!("{target} did not park at its gate within 300 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn median_of(reports: &[&SwitchReport], f: impl Fn(&SwitchReport) -> Option<f64>) -> Option<f64> {
    let mut v: Vec<f64> = reports.iter().filter_map(|r| f(r)).collect();
    (!v.is_empty()).then(|| median(&mut v))
}

/// Summarize switches per ordered pair.
pub fn summarize(experts: &[String], switches: &[SwitchReport]) -> Vec<PairSummary> {
    let mut by_pair: BTreeMap<(usize, usize), Vec<&SwitchReport>> = BTreeMap::new();
    for s in switches {
        let pos = |name: &str| experts.iter().position(|e| e == name);
        if let (Some(a), Some(b)) = (pos(&s.from), pos(&s.to)) {
            by_pair.entry((a, b)).or_default().push(s);
        }
    }
    by_pair
        .into_iter()
        .map(|((a, b), reports)| PairSummary {
            from: experts[a].clone(),
            to: experts[b].clone(),
            samples: reports.len(),
            total_ms: median_of(&reports, |r| Some(r.total_ms)).unwrap_or_default(),
            prepare_ms: median_of(&reports, |r| r.prepare_ms),
            stop_ms: median_of(&reports, |r| r.stop_ms),
            start_ms: median_of(&reports, |r| r.start_ms),
            eevdf_gap_ms: median_of(&reports, |r| r.eevdf_gap_ms),
        })
        .collect()
}

/// Run `rounds` rounds of the all-pairs circuit with `supervisor`, ending on EEVDF; with
/// `standby`, each target is parked as a hot standby before its switch is requested.
pub fn run(
    supervisor: &mut Supervisor,
    experts: &[String],
    rounds: usize,
    standby: bool,
) -> Result<SwitchBench> {
    if experts.len() < 2 {
        bail!("the switch benchmark needs at least two experts");
    }
    for e in experts {
        supervisor.preflight(e)?;
    }
    let circuit = all_pairs_circuit(experts);
    supervisor.switch_to(&circuit[0])?;
    let mut switches = Vec::new();
    let mut parked = Vec::new();
    let progress = asa_scenarios::progress::Progress::new(rounds * (circuit.len() - 1));
    for round in 0..rounds {
        for target in &circuit[1..] {
            eprintln!("switch {}: to {target}", progress.line(switches.len() + 1));
            if standby && target != asa_experts::EEVDF {
                let p = park(supervisor, target)?;
                eprintln!(
                    "round {}: {} parked beside {} after {:.0} ms, RSS {} KiB",
                    round + 1,
                    p.expert,
                    p.beside,
                    p.load_ms,
                    p.rss_kib.unwrap_or_default()
                );
                parked.push(p);
            }
            let report = supervisor.switch_to(target)?;
            if standby && target != asa_experts::EEVDF && !report.standby {
                bail!("the switch to {target} did not use its parked standby");
            }
            supervisor.set_standby(&[]);
            let _ = supervisor.check_standby();
            eprintln!("round {}: {}", round + 1, report.summary());
            switches.push(report);
        }
    }
    supervisor.switch_to(asa_experts::EEVDF)?;
    Ok(SwitchBench {
        experts: experts.to_vec(),
        rounds,
        pairs: summarize(experts, &switches),
        switches,
        standby,
        parked,
    })
}

/// The pair table as Markdown.
pub fn markdown(bench: &SwitchBench) -> String {
    let opt = |v: Option<f64>| v.map(|v| format!("{v:.0}")).unwrap_or_else(|| "–".into());
    if bench.standby {
        let mut out = String::from(
            "| from → to | request → enabled, to a parked standby (ms) | stop old (ms) | gate release → enabled (ms) | EEVDF gap (ms) | n |\n|---|---:|---:|---:|---:|---:|\n",
        );
        for p in &bench.pairs {
            out.push_str(&format!(
                "| {} → {} | {:.0} | {} | {} | {} | {} |\n",
                p.from,
                p.to,
                p.total_ms,
                opt(p.stop_ms),
                opt(p.start_ms),
                opt(p.eevdf_gap_ms),
                p.samples
            ));
        }
        let mut by_expert: BTreeMap<&str, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
        for p in &bench.parked {
            let e = by_expert.entry(&p.expert).or_default();
            e.0.push(p.load_ms);
            if let Some(r) = p.rss_kib {
                e.1.push(r as f64 / 1024.0);
            }
        }
        out.push_str("\n| standby | load at nice 19, to parked (ms, median) | RSS parked (MiB, median) | n |\n|---|---:|---:|---:|\n");
        for (e, (mut load, mut rss)) in by_expert {
            let n = load.len();
            out.push_str(&format!(
                "| {e} | {:.0} | {} | {n} |\n",
                median(&mut load),
                if rss.is_empty() {
                    "–".to_owned()
                } else {
                    format!("{:.1}", median(&mut rss))
                }
            ));
        }
        return out;
    }
    let mut out = String::from(
        "| from → to | switch (ms) | new loads while old runs (ms) | stop old (ms) | start new (ms) | EEVDF gap (ms) | n |\n|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for p in &bench.pairs {
        out.push_str(&format!(
            "| {} → {} | {:.0} | {} | {} | {} | {} | {} |\n",
            p.from,
            p.to,
            p.total_ms,
            opt(p.prepare_ms),
            opt(p.stop_ms),
            opt(p.start_ms),
            opt(p.eevdf_gap_ms),
            p.samples
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn circuit_uses_every_ordered_pair_once() {
        for n in 2..=5 {
            let nodes: Vec<String> = (0..n).map(|i| format!("e{i}")).collect();
            let c = all_pairs_circuit(&nodes);
            assert_eq!(c.len(), n * (n - 1) + 1);
            assert_eq!(c.first(), c.last());
            let mut pairs: Vec<(String, String)> =
                c.windows(2).map(|w| (w[0].clone(), w[1].clone())).collect();
            assert!(pairs.iter().all(|(a, b)| a != b));
            pairs.sort();
            pairs.dedup();
            assert_eq!(pairs.len(), n * (n - 1));
        }
    }

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    fn report(from: &str, to: &str, total: f64, gap: Option<f64>) -> SwitchReport {
        SwitchReport {
            from: from.into(),
            to: to.into(),
            prepare_ms: None,
            stop_ms: None,
            start_ms: None,
            eevdf_gap_ms: gap,
            total_ms: total,
            ops: None,
            enable_seq: 0,
            at_unix_ms: 0,
            no_op: false,
            standby: false,
        }
    }

    #[test]
    fn summary_takes_medians_per_pair() {
        let experts = names(&["eevdf", "a", "b"]);
        let s = vec![
            report("a", "b", 10.0, Some(1.0)),
            report("a", "b", 30.0, Some(3.0)),
            report("a", "b", 20.0, Some(2.0)),
            report("b", "eevdf", 5.0, None),
        ];
        let p = summarize(&experts, &s);
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].from.as_str(), p[0].to.as_str()), ("a", "b"));
        assert_eq!(p[0].total_ms, 20.0);
        assert_eq!(p[0].eevdf_gap_ms, Some(2.0));
        assert_eq!(p[0].samples, 3);
        assert_eq!(p[1].eevdf_gap_ms, None);
        let md = markdown(&SwitchBench {
            experts,
            rounds: 1,
            switches: s,
            pairs: p,
            standby: false,
            parked: vec![],
        });
        assert!(md.contains("| a → b | 20 | – | – | – | 2 | 3 |"), "{md}");
    }
}
