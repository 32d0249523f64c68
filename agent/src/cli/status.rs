//! `asa status`: the client that asks the agent and prints its answer, the kernel's state and
//! the running expert's statistics (or all of it as JSON).

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Result};
use asa_agent::control::expert_stats::{self, ExpertStats};
use asa_agent::control::{client, AgentStatus, DecisionStatus, Request, StandbyStatus};
use asa_agent::decision::engine::{EngineInfo, TickRecord};
use asa_experts::supervisor::unix_ms;
use asa_experts::{Catalogue, SchedExt, ScxSnapshot};

/// `asa status` options.
#[derive(Debug, Clone, clap::Args)]
pub struct StatusArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Wait until the agent is up (not starting), reports this expert active and the kernel
    /// agrees. Asks the agent after 0.1, 0.2, 0.4 and 0.8 s, then once a second.
    #[arg(long)]
    pub wait_for: Option<String>,
    /// Seconds to wait with --wait-for.
    #[arg(long, default_value_t = 90)]
    pub timeout: u64,
}

/// The pause before poll number `n` (from 0) of `asa status --wait-for`: 100 ms, doubling, at
/// most a second. Each poll is a thread and a status snapshot in the agent, which the agent's
/// own perception counts: ten polls a second made an idle lab VM look busy to the classifier.
fn wait_poll_interval(n: u32) -> Duration {
    Duration::from_millis(100u64.saturating_mul(1 << n.min(4)).min(1000))
}

/// `asa status`: asks the agent on `socket` (with `--wait-for`, until it runs the expert) and
/// prints what it says, the kernel's state and the running expert's statistics (from
/// `catalogue`, read once the answer is in).
pub fn run(
    args: &StatusArgs,
    socket: &Path,
    catalogue: impl Fn() -> Result<Catalogue>,
) -> Result<ExitCode> {
    let (json, wait_for, timeout) = (args.json, args.wait_for.as_deref(), args.timeout);
    let t0 = Instant::now();
    let mut polls = 0;
    loop {
        let asked = Instant::now();
        let answer = client::request(socket, &Request::Status, Duration::from_secs(10))?;
        let answered_in = asked.elapsed();
        let agent = match answer {
            // An agent that refuses (busy: every connection answers a request) is no absent
            // agent: say so, or ask again while waiting.
            Some(r) if !r.ok && wait_for.is_none() => bail!(
                "the agent did not answer: {}",
                r.error.as_deref().unwrap_or("no reason given")
            ),
            Some(r) => r.status,
            None => None,
        };
        let done = match (wait_for, &agent) {
            (None, _) => true,
            // A starting agent runs nothing yet (it reports the kernel's own scheduler): wait
            // for it to be up.
            (Some(want), Some(st)) => {
                st.mode != "starting" && st.active.expert == want && st.consistent == Some(true)
            }
            (Some(_), None) => false,
        };
        if done || t0.elapsed() > Duration::from_secs(timeout) {
            let kernel = SchedExt::at(asa_experts::sched_ext::DEFAULT_SYSFS_ROOT)
                .snapshot()
                .ok();
            let stats = active_expert_stats(&catalogue()?, agent.as_ref(), kernel.as_ref());
            if json {
                let out = serde_json::json!({
                    "agent": agent,
                    "kernel": kernel,
                    "expert_stats": stats,
                    // Connect to answer, this process's start-up left out.
                    "answered_in_ms": agent.as_ref().map(|_| answered_in.as_secs_f64() * 1e3),
                });
                println!("{}", serde_json::to_string_pretty(&out)?);
            } else {
                print_status(agent.as_ref());
                for line in stats.iter().flat_map(expert_stats::format_expert_stats) {
                    println!("{line}");
                }
            }
            if !done {
                eprintln!(
                    "asa: error: the agent did not report {} within {timeout} s",
                    wait_for.unwrap_or_default()
                );
                return Ok(ExitCode::FAILURE);
            }
            return Ok(ExitCode::SUCCESS);
        }
        std::thread::sleep(wait_poll_interval(polls));
        polls += 1;
    }
}

/// The stats file of the expert that runs (the agent's view, else the kernel's ops name), when
/// the catalogue declares one.
fn active_expert_stats(
    catalogue: &Catalogue,
    agent: Option<&AgentStatus>,
    kernel: Option<&ScxSnapshot>,
) -> Option<ExpertStats> {
    let (expert, since) = match agent {
        Some(st) => (
            catalogue.get(&st.active.expert)?,
            Some(st.active.since_unix_ms),
        ),
        None => (catalogue.by_ops(kernel?.ops.as_deref()?)?, None),
    };
    expert_stats::read_expert_stats(expert, since)
}

fn ago(at_unix_ms: u64) -> String {
    let now = unix_ms(SystemTime::now());
    format!(
        "{:.1} s ago",
        now.saturating_sub(at_unix_ms) as f64 / 1000.0
    )
}

fn print_status(agent: Option<&AgentStatus>) {
    let scx = SchedExt::at(asa_experts::sched_ext::DEFAULT_SYSFS_ROOT);
    match scx.check_present().and_then(|_| scx.snapshot()) {
        Ok(k) => {
            println!(
                "kernel:      sched_ext {}{} (enable_seq {}, nr_rejected {})",
                k.state,
                k.ops
                    .as_deref()
                    .map(|o| format!(", ops {o}"))
                    .unwrap_or_default(),
                k.enable_seq,
                k.nr_rejected.map(|n| n.to_string()).unwrap_or("?".into())
            );
            let events: Vec<String> = k
                .events
                .iter()
                .filter(|(_, v)| **v != 0)
                .map(|(name, v)| format!("{}={v}", name.trim_start_matches("SCX_EV_")))
                .collect();
            if !events.is_empty() {
                println!("events:      {}", events.join(" "));
            }
        }
        Err(e) => println!("kernel:      {e:#}"),
    }
    let Some(st) = agent else {
        println!("agent:       not running (the kernel default runs unless another tool attached a scheduler)");
        return;
    };
    println!(
        "agent:       {} (pid {}){}",
        st.mode,
        st.pid,
        st.pinned
            .as_ref()
            .map(|p| format!(", pinned {p}"))
            .unwrap_or_default()
    );
    println!(
        "active:      {}{} since {}",
        st.active.expert,
        st.active
            .pid
            .map(|p| format!(" (pid {p})"))
            .unwrap_or_default(),
        ago(st.active.since_unix_ms)
    );
    if let Some(to) = &st.switching_to {
        println!("switching:   to {to}");
    }
    if let Some(s) = &st.last_switch {
        let f = |v: Option<f64>| v.map(|v| format!("{v:.0} ms")).unwrap_or("-".into());
        println!(
            "last switch: {} -> {} in {:.0} ms (new loaded while old ran {}, stop {}, start {}, EEVDF gap {}), {}",
            s.from,
            s.to,
            s.total_ms,
            f(s.prepare_ms),
            f(s.stop_ms),
            f(s.start_ms),
            f(s.eevdf_gap_ms),
            ago(s.at_unix_ms)
        );
    }
    if let Some(e) = &st.last_event {
        println!("last event:  {} ({})", e.message, ago(e.at_unix_ms));
    }
    if let Some(e) = &st.last_error {
        println!("last error:  {} ({})", e.message, ago(e.at_unix_ms));
    }
    // A starting agent has no pool yet (its settings apply once it is up).
    if st.mode != "starting" {
        print_standby(&st.standby);
    }
    if let Some(d) = &st.decision {
        print_decision(d, &st.active.expert);
    }
    println!("note:        {}", st.note);
    match st.consistent {
        Some(true) => println!("consistent:  yes (the kernel runs what the agent believes)"),
        Some(false) => println!("consistent:  NO (the kernel disagrees with the agent)"),
        None if st.mode == "dry-run" => println!("consistent:  (dry run: nothing is switched)"),
        None if st.mode == "waiting" => {
            println!("consistent:  (waiting: another tool's scheduler runs, see the note)")
        }
        None if st.mode == "starting" => {
            println!("consistent:  (starting: the kernel's state is unknown)")
        }
        None => println!("consistent:  (switch in progress)"),
    }
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn print_standby(s: &StandbyStatus) {
    if s.max == 0 {
        println!("standby:     off (--standby 0)");
        return;
    }
    println!(
        "standby:     {} of at most {} ({}: wanted [{}]), {} (resident + BPF) of {} budget, {} lost",
        s.experts.len(),
        s.max,
        s.source,
        s.wanted.join(", "),
        mib(s.memory_kib),
        mib(s.memory_budget_kib),
        s.lost
    );
    for e in &s.experts {
        println!(
            "             {:<8} pid {:<6} {:<7} since {}{}, RSS {}, BPF {}",
            e.expert,
            e.pid,
            e.state.to_string(),
            ago(e.since_unix_ms),
            e.load_ms
                .map(|l| format!(" (loaded in {:.1} s)", l / 1000.0))
                .unwrap_or_default(),
            e.rss_kib.map(mib).unwrap_or_else(|| "?".into()),
            e.bpf_kib.map(mib).unwrap_or_else(|| "?".into())
        );
    }
}

fn print_decision(d: &DecisionStatus, active: &str) {
    let e = &d.engine;
    println!(
        "decision:    {}every {} ms, {} ticks; model {} (trained {}, {} classes), mapping {}{}",
        if e.dry_run { "DRY RUN, " } else { "" },
        e.interval_ms,
        d.ticks,
        e.model.display(),
        e.model_info.training_date,
        e.model_info.class_names.len(),
        e.mapping,
        if e.bpf { "" } else { ", no BPF features" }
    );
    if let Some(apps) = &d.apps {
        // The snapshot is the last full tick's: in whole-machine mode the expert running now is
        // the controller's (a switch, or settled ticking, can be newer than the snapshot).
        let mode = if apps.mode == "per_application" {
            super::apps::mode_line(apps)
        } else {
            format!("whole machine: {active}{}", super::apps::ahead_line(apps))
        };
        println!("mode:        {mode}");
        if let Some(problem) = &apps.problem {
            println!("             {problem}");
        }
    }
    if let Some(layers) = layers_line(&e.layer_rows) {
        println!("layers:      {layers}");
    }
    if let Some(default) = &e.default_expert {
        println!(
            "default:     {default} (the table's best over all classes: run at start and after {} unsure ticks)",
            e.policy.fallback_after_ticks
        );
    } else if let Some(best) = &e.overall_best {
        println!("             the table's best over all classes: {best}");
    }
    let line = |what: &str, r: &TickRecord| {
        let outcome = serde_json::to_value(&r.outcome)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        println!(
            "{what:<13}{} [{outcome}{}] {}",
            r.decision.summary(),
            r.detail
                .as_deref()
                .map(|d| format!(": {d}"))
                .unwrap_or_default(),
            ago(r.unix_ms)
        );
    };
    if let (Some(every), Some(default)) = (d.settled_interval_ms, &e.default_expert) {
        println!(
            "settled:     the table leaves nothing to decide from {default} (no class's vote would move it): ticking every {every} ms until a pin, a failure or a quarantine"
        );
    }
    if let Some(class) = &d.steady_class {
        println!(
            "steady:      the vote has held {class}: glances at /proc stand in for full ticks while the machine's activity holds ({} glances so far)",
            d.glances
        );
    }
    if let Some(r) = &d.last {
        line("last tick:", r);
        let mut top: Vec<(&String, &f32)> = r.decision.probabilities.iter().collect();
        top.sort_by(|a, b| b.1.total_cmp(a.1));
        let top: Vec<String> = top
            .iter()
            .take(3)
            .map(|(c, p)| format!("{c} {p:.2}"))
            .collect();
        println!(
            "             top classes {}; tick cost {:.0} us (perception {:.0}, inference {:.0})",
            top.join(", "),
            r.cost.total_us(),
            r.cost.sample_us,
            r.cost.infer_us
        );
    }
    if let Some(row) = d.last.as_ref().and_then(|r| row_line(e, r)) {
        println!("row:         {row}");
    }
    if let Some(r) = &d.last_switch {
        line("last choice:", r);
    }
    for (i, q) in d.quarantine.iter().enumerate() {
        println!(
            "{:<13}{}",
            if i == 0 { "quarantine:" } else { "" },
            asa_agent::decision::quarantine::describe(q)
        );
    }
    if d.unlogged_ticks > 0 {
        println!(
            "{:<13}{} tick(s) could not be written to the decision log (is its disk full?)",
            "decision log:", d.unlogged_ticks
        );
    }
}

/// The mapping row of the tick's voted class and how sure it is (`kernel_build: cosmos first,
/// +0.012 over flash, settled`); None without a voted class or a row for it.
/// The mapping table's calibrated layer policies, one clause per row (None without rows):
/// `cpu_batch 5 ms slices (+0.070 over layered), the others the default plan's`.
fn layers_line(rows: &[asa_mapping_table::LayerRow]) -> Option<String> {
    if rows.is_empty() {
        return None;
    }
    let clauses: Vec<String> = rows
        .iter()
        .map(|r| {
            let slice = r.policy.slice_us as f64 / 1000.0;
            let lead = match (r.margin, r.ranked.get(1)) {
                (Some(m), Some(second)) => format!(" ({m:+.3} over {})", second.expert),
                _ => String::new(),
            };
            format!("{} {slice} ms slices{lead}", r.class)
        })
        .collect();
    Some(format!(
        "{}; the others the default plan's",
        clauses.join(", ")
    ))
}

fn row_line(engine: &EngineInfo, tick: &TickRecord) -> Option<String> {
    let class = tick.decision.voted_class.as_deref()?;
    let row = engine.class_rows.iter().find(|r| r.name == class)?;
    Some(format!("{class}: {}", row.confidence()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tick whose vote went to `class` (None: no vote), as a decision-log line.
    fn tick(class: Option<&str>) -> TickRecord {
        serde_json::from_value(serde_json::json!({
            "schema": "asa.decision", "version": 1, "tick": 7, "at_s": 7.0,
            "probabilities": {}, "vote_scores": {}, "voted_class": class,
            "margin": 0.6, "support": 0.9, "current_expert": "cosmos",
            "target_expert": "cosmos", "action": "stay", "reason": {"kind": "already_running"},
            "outcome": "stay", "unix_ms": 0, "missing_features": 0,
            "cost": {"sample_us": 0.0, "infer_us": 0.0, "decide_us": 0.0}
        }))
        .unwrap()
    }

    #[test]
    fn the_layer_line_names_each_calibrated_layer_and_its_lead() {
        assert_eq!(layers_line(&[]), None);
        let table = asa_mapping_table::MappingTable::parse(
            r#"schema = "asa.mapping"
version = 1
source = "hand-written"
created = "2026-11-29"
[[class]]
name = "kernel_build"
ranked = [{ expert = "layered", score = 1.0, spread = 0.0, runs = 0 }]
[[layer]]
class = "cpu_batch"
policy = { kind = "open", slice_us = 5000, weight = 100 }
ranked = [
  { expert = "layered-cpu_batch-5ms", score = 0.62, spread = 0.02, runs = 6 },
  { expert = "layered", score = 0.55, spread = 0.03, runs = 6 },
]
margin = 0.07
"#,
            "t",
        )
        .unwrap();
        assert_eq!(
            layers_line(&table.layers).unwrap(),
            "cpu_batch 5 ms slices (+0.070 over layered); the others the default plan's"
        );
    }

    #[test]
    fn the_row_in_use_says_its_margin_and_whether_it_is_settled() {
        let table = asa_mapping_table::MappingTable::parse(
            r#"schema = "asa.mapping"
version = 1
source = "hand-written"
created = "2026-11-29"
[[class]]
name = "kernel_build"
margin = 0.012
settled = true
ranked = [
  { expert = "cosmos", score = 0.556, spread = 0.04, runs = 4 },
  { expert = "flash", score = 0.544, spread = 0.09, runs = 4 },
]
"#,
            "t",
        )
        .unwrap();
        let engine = EngineInfo {
            class_rows: table.classes,
            ..EngineInfo::default()
        };
        assert_eq!(
            row_line(&engine, &tick(Some("kernel_build"))).as_deref(),
            Some("kernel_build: cosmos first, +0.012 over flash, settled")
        );
        assert_eq!(row_line(&engine, &tick(Some("idle"))), None);
        assert_eq!(row_line(&engine, &tick(None)), None);
    }

    #[test]
    fn wait_for_polls_back_off_to_once_a_second() {
        let pauses: Vec<u64> = (0..7)
            .map(|n| wait_poll_interval(n).as_millis() as u64)
            .collect();
        assert_eq!(pauses, [100, 200, 400, 800, 1000, 1000, 1000]);
        assert_eq!(wait_poll_interval(u32::MAX), Duration::from_secs(1));
    }
}
