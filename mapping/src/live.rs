//! Stage 3 of calibration ("live", ASA paper §4.3): run the real agent, `asa run`, on the
//! scenario catalogue next to every static expert, and see whether it delivers.
//!
//! The agent is one more column of the scenario runs: the pseudo-expert [`AGENT`]. Pinning it
//! ([`LiveSwitcher`]) returns the machine to EEVDF, gives up this process's supervisor (one ASA
//! process drives the scheduler at a time) and starts `asa run` with the table under test; the
//! agent then classifies the scenario as it runs and switches by itself. Pinning a static expert
//! stops the agent (SIGTERM: it restores EEVDF) and takes the supervisor back. Each agent run
//! writes its decision log next to the results, so the report can say what the agent chose.
//!
//! [`live_summary`] compares, scenario by scenario, the agent with EEVDF, every static expert
//! and the static oracle (the best static expert of that scenario, chosen after the fact), with
//! the paper's measures: win rate against EEVDF, Top-1 and Top-3 among the static set plus the
//! agent. [`refine`] turns the static runs of the live session (plus earlier result sets of the
//! same machine) into the refined table: a new machine can start from any prototype table and be
//! calibrated by this stage alone.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context, Result};
use asa_experts::sched_ext::DEFAULT_SYSFS_ROOT;
use asa_experts::Supervisor;
use asa_scenarios::catalogue::Catalogue as ScenarioCatalogue;
use asa_scenarios::report::{score_scenario, score_table, win_loss, ScoreTable, WinLoss};
use asa_scenarios::runner::{ExpertSwitcher, ResultSet, RunRecord, SupervisorSwitcher};
use asa_scenarios::stats;
use log::{info, warn};
use serde::{Deserialize, Serialize};

/// The pseudo-expert name of a run under the live agent (`asa run`).
pub const AGENT: &str = "asa";

/// The pseudo-expert name of a run under `asa run --dry-run`: the agent perceives and decides
/// but never switches, so the machine stays on EEVDF. Against EEVDF it measures what the agent's
/// own work costs the user; against [`AGENT`], what its switching is worth.
pub const AGENT_DRY_RUN: &str = "asa-dry-run";

/// Whether `name` is one of the agent's pseudo-experts (not a scheduler of the catalogue).
pub fn is_agent(name: &str) -> bool {
    name == AGENT || name == AGENT_DRY_RUN
}

/// How to start the agent for a live run.
#[derive(Debug, Clone)]
pub struct AgentLauncher {
    /// The `asa` binary.
    pub program: PathBuf,
    /// Arguments after `run` (mapping table, model, cooldown, ...).
    pub run_args: Vec<String>,
    /// Where each agent run's decision log (`agent-<unix ms>.jsonl`) and output go.
    pub log_dir: PathBuf,
    /// How long the agent may take to serve its control socket (model and ONNX Runtime load).
    pub ready_timeout: Duration,
    /// How long the agent may take to stop after SIGTERM (its expert's stop included).
    pub stop_timeout: Duration,
}

impl AgentLauncher {
    /// A launcher with the default timeouts (90 s to start, 60 s to stop).
    pub fn new(program: PathBuf, run_args: Vec<String>, log_dir: PathBuf) -> Self {
        Self {
            program,
            run_args,
            log_dir,
            ready_timeout: Duration::from_secs(90),
            stop_timeout: Duration::from_secs(60),
        }
    }
}

struct RunningAgent {
    child: Child,
    log: PathBuf,
}

/// An [`ExpertSwitcher`] for stage 3: static experts through this process's supervisor, and
/// [`AGENT`] by handing the scheduler to a real `asa run` (see the module doc).
pub struct LiveSwitcher {
    make_supervisor: Box<dyn FnMut() -> Result<Supervisor>>,
    supervisor: Option<SupervisorSwitcher>,
    launcher: AgentLauncher,
    agent: Option<RunningAgent>,
    sysfs: PathBuf,
}

impl LiveSwitcher {
    /// A switcher that builds its supervisor with `make_supervisor` whenever it needs one.
    pub fn new(
        make_supervisor: Box<dyn FnMut() -> Result<Supervisor>>,
        launcher: AgentLauncher,
    ) -> Self {
        Self {
            make_supervisor,
            supervisor: None,
            launcher,
            agent: None,
            sysfs: PathBuf::from(DEFAULT_SYSFS_ROOT),
        }
    }

    fn supervisor(&mut self) -> Result<&mut SupervisorSwitcher> {
        if self.supervisor.is_none() {
            let s = (self.make_supervisor)().context("starting the expert supervisor")?;
            self.supervisor = Some(SupervisorSwitcher::new(s));
        }
        Ok(self.supervisor.as_mut().expect("just set"))
    }

    fn sched_ext_state(&self) -> String {
        std::fs::read_to_string(self.sysfs.join("state"))
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|_| "unknown".into())
    }

    /// Stops the agent (SIGTERM, SIGKILL after the timeout) and checks the machine is back on
    /// EEVDF.
    fn stop_agent(&mut self) -> Result<()> {
        let Some(mut agent) = self.agent.take() else {
            return Ok(());
        };
        let pid = nix::unistd::Pid::from_raw(agent.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + self.launcher.stop_timeout;
        let status = loop {
            if let Some(status) = agent.child.try_wait()? {
                break Some(status);
            }
            if Instant::now() >= deadline {
                warn!(
                    "the agent did not stop within {:?} of SIGTERM: killing it",
                    self.launcher.stop_timeout
                );
                let _ = agent.child.kill();
                let _ = agent.child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        // The agent's expert is its child; give the kernel a moment to detach it.
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.sched_ext_state() == "enabled" && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        let state = self.sched_ext_state();
        if state == "enabled" {
            bail!(
                "the agent stopped ({}) but a sched_ext scheduler is still attached: stop it \
                 (its process, or sysrq-S) before calibrating again; log {}",
                status
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| "killed".into()),
                agent.log.display()
            );
        }
        if status.is_none_or(|s| !s.success()) {
            warn!(
                "the agent exited with {:?}; see {}",
                status,
                agent.log.display()
            );
        }
        Ok(())
    }

    fn start_agent(&mut self, dry_run: bool) -> Result<()> {
        // One ASA process drives the scheduler: hand the machine over on EEVDF.
        if let Some(mut s) = self.supervisor.take() {
            s.release()
                .context("returning to EEVDF before the agent starts")?;
        }
        std::fs::create_dir_all(&self.launcher.log_dir)
            .with_context(|| format!("creating {}", self.launcher.log_dir.display()))?;
        let stamp = asa_experts::supervisor::unix_ms(SystemTime::now());
        let decisions = self.launcher.log_dir.join(format!("agent-{stamp}.jsonl"));
        let log = self.launcher.log_dir.join(format!("agent-{stamp}.log"));
        let out =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let child = Command::new(&self.launcher.program)
            .arg("run")
            .args(&self.launcher.run_args)
            .args(dry_run.then_some("--dry-run"))
            .arg("--decision-log")
            .arg(&decisions)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("starting {} run", self.launcher.program.display()))?;
        let mut agent = RunningAgent { child, log };
        // Ready when `asa status` reports this agent: the daemon serves its socket once its
        // supervisor exists.
        let deadline = Instant::now() + self.launcher.ready_timeout;
        loop {
            if let Some(status) = agent.child.try_wait()? {
                bail!(
                    "the agent exited at start ({status}): {}",
                    tail(&agent.log, 8)
                );
            }
            if serves_status(&self.launcher.program, agent.child.id()) {
                break;
            }
            if Instant::now() >= deadline {
                let _ = agent.child.kill();
                let _ = agent.child.wait();
                bail!(
                    "the agent did not serve its control socket within {:?}: {}",
                    self.launcher.ready_timeout,
                    tail(&agent.log, 8)
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        info!("agent started (decision log {})", decisions.display());
        self.agent = Some(agent);
        Ok(())
    }
}

/// Whether `asa status` reports the agent with process id `pid`.
fn serves_status(program: &Path, pid: u32) -> bool {
    let Ok(out) = Command::new(program)
        .args(["status", "--json"])
        .stderr(Stdio::null())
        .output()
    else {
        return false;
    };
    serde_json::from_slice::<serde_json::Value>(&out.stdout)
        .map(|v| v["agent"]["pid"].as_u64() == Some(u64::from(pid)))
        .unwrap_or(false)
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

impl ExpertSwitcher for LiveSwitcher {
    fn pin(&mut self, expert: &str) -> Result<String> {
        self.stop_agent()?;
        if is_agent(expert) {
            self.start_agent(expert == AGENT_DRY_RUN)?;
            return Ok(expert.to_owned());
        }
        self.supervisor()?.pin(expert)
    }

    fn still_pinned(&mut self, expert: &str) -> Result<bool> {
        if is_agent(expert) {
            return match self.agent.as_mut() {
                Some(a) => Ok(a.child.try_wait()?.is_none()),
                None => Ok(false),
            };
        }
        match self.supervisor.as_mut() {
            Some(s) => s.still_pinned(expert),
            None => Ok(false),
        }
    }

    fn release(&mut self) -> Result<()> {
        let stopped = self.stop_agent();
        if let Some(s) = self.supervisor.as_mut() {
            s.release()?;
        }
        stopped
    }
}

impl Drop for LiveSwitcher {
    fn drop(&mut self) {
        if let Err(e) = self.stop_agent() {
            warn!("{e:#}");
        }
    }
}

/// What the agent did during one run, from its decision log.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentTrace {
    /// The experts it switched to, in order.
    pub switches: Vec<String>,
    /// Switches that failed.
    pub failed: u32,
    /// Ticks per voted class.
    pub voted: BTreeMap<String, u32>,
    /// Ticks logged.
    pub ticks: u32,
    /// Per phase of a phased scenario's run (its phase times are known): what was voted and
    /// switched while that phase's load ran. Empty for single-load scenarios and old results.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<PhaseTrace>,
    /// Each tick's time, voted class and switch (kept to split the log by phase).
    #[serde(skip)]
    marks: Vec<TickMark>,
}

/// One logged tick, as far as the phase split needs it.
#[derive(Debug, Clone, PartialEq)]
struct TickMark {
    unix_ms: u64,
    voted: Option<String>,
    switched_to: Option<String>,
}

/// What the agent did during one phase of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseTrace {
    /// The phase's background load (`idle` for none).
    pub load: String,
    /// Ticks per voted class among the ticks logged after the phase began and until it ended,
    /// the first one left out (it covers time before the phase).
    pub voted: BTreeMap<String, u32>,
    /// Successful switches during the phase: the expert and the seconds since the phase began.
    pub switches: Vec<(String, f64)>,
}

impl PhaseTrace {
    /// One line for the report: `idle: voted idle 5/6, xz_compress 1/6, → bpfland at +2.6 s`.
    pub fn summary(&self) -> String {
        let total: u32 = self.voted.values().sum();
        let votes: Vec<String> = self
            .voted
            .iter()
            .map(|(class, n)| format!("{class} {n}/{total}"))
            .collect();
        let mut line = format!(
            "{}: voted {}",
            self.load,
            if votes.is_empty() {
                "nothing".to_string()
            } else {
                votes.join(", ")
            }
        );
        for (expert, after) in &self.switches {
            line.push_str(&format!(", → {expert} at +{after:.1} s"));
        }
        line
    }
}

impl AgentTrace {
    /// Reads one decision log (JSON lines of `asa run --decision-log`).
    pub fn read(path: &Path) -> Result<Self> {
        let file =
            std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let mut trace = AgentTrace::default();
        for line in BufReader::new(file).lines() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            let v: serde_json::Value = serde_json::from_str(&line)
                .with_context(|| format!("{}: not a decision record", path.display()))?;
            trace.ticks += 1;
            let voted = v["voted_class"].as_str().map(str::to_owned);
            if let Some(class) = &voted {
                *trace.voted.entry(class.clone()).or_default() += 1;
            }
            let mut switched_to = None;
            match v["outcome"].as_str() {
                Some("switched") => {
                    let expert = v["target_expert"].as_str().unwrap_or("?").to_owned();
                    trace.switches.push(expert.clone());
                    switched_to = Some(expert);
                }
                Some("switch_failed") => trace.failed += 1,
                _ => {}
            }
            if let Some(unix_ms) = v["unix_ms"].as_u64() {
                trace.marks.push(TickMark {
                    unix_ms,
                    voted,
                    switched_to,
                });
            }
        }
        Ok(trace)
    }

    /// This trace split by the phases of `run` (see [`AgentTrace::phases`]); unchanged when the
    /// run has a single phase or its phase times were not recorded.
    pub fn with_phases(mut self, run: &RunRecord) -> Self {
        if run.phases.len() < 2
            || run
                .phases
                .iter()
                .any(|p| p.started_unix_ms == 0 || p.ended_unix_ms == 0)
        {
            return self;
        }
        self.phases = run
            .phases
            .iter()
            .map(|phase| {
                let inside: Vec<&TickMark> = self
                    .marks
                    .iter()
                    .filter(|m| {
                        m.unix_ms > phase.started_unix_ms && m.unix_ms <= phase.ended_unix_ms
                    })
                    .collect();
                let mut voted = BTreeMap::new();
                for class in inside.iter().skip(1).filter_map(|m| m.voted.as_ref()) {
                    *voted.entry(class.clone()).or_default() += 1;
                }
                let switches = inside
                    .iter()
                    .filter_map(|m| {
                        let expert = m.switched_to.as_ref()?;
                        let after_s = (m.unix_ms - phase.started_unix_ms) as f64 / 1000.0;
                        Some((expert.clone(), after_s))
                    })
                    .collect();
                PhaseTrace {
                    load: phase.load.clone(),
                    voted,
                    switches,
                }
            })
            .collect();
        self
    }

    /// The agent's logs in `dir`, by the time each agent run started (ms since the epoch).
    pub fn read_dir(dir: &Path) -> Result<BTreeMap<u64, AgentTrace>> {
        let mut traces = BTreeMap::new();
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Ok(traces);
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(stamp) = name
                .strip_prefix("agent-")
                .and_then(|n| n.strip_suffix(".jsonl"))
                .and_then(|n| n.parse::<u64>().ok())
            {
                traces.insert(stamp, AgentTrace::read(&e.path())?);
            }
        }
        Ok(traces)
    }
}

/// One scenario of the live comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LiveScenario {
    /// Scenario name.
    pub scenario: String,
    /// Whether its background changes mid-run.
    pub phased: bool,
    /// Mean score per expert (the agent included).
    pub means: BTreeMap<String, f64>,
    /// The best static expert and its mean score.
    pub oracle: Option<(String, f64)>,
    /// The agent's mean score.
    pub agent: Option<f64>,
    /// Static experts with a strictly higher mean than the agent.
    pub agent_rank: Option<usize>,
    /// What the agent did in each of its runs.
    pub traces: Vec<AgentTrace>,
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
}

/// Compares the agent with the static experts in `set` (see the module doc). `logs` is the
/// folder of the agent's decision logs.
pub fn live_summary(set: &ResultSet, baseline: &str, logs: &Path) -> Result<LiveSummary> {
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
    let (mut top1, mut top3, mut ranked, mut ratios) = (0, 0, 0, Vec::new());
    let mut phased_wins = Vec::new();
    for result in set.scenarios.iter().filter(|r| r.error.is_none()) {
        let Some(row) = table.get(&result.scenario) else {
            continue;
        };
        let means: BTreeMap<String, f64> = row
            .iter()
            .filter_map(|(e, reps)| {
                let xs: Vec<f64> = reps.iter().flatten().copied().collect();
                stats::mean(&xs).map(|m| (e.clone(), m))
            })
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
                    .map(|(_, t)| t.clone().with_phases(r))
            })
            .collect();
        scenarios.push(LiveScenario {
            scenario: result.scenario.clone(),
            phased,
            means,
            oracle,
            agent,
            agent_rank,
            traces: run_traces,
        });
    }
    let share = |n: usize| (ranked > 0).then(|| n as f64 / ranked as f64);
    let dry = set.options.experts.iter().any(|e| e == AGENT_DRY_RUN);
    let dry_gains: Vec<f64> = scenarios
        .iter()
        .filter_map(|s| Some(s.means.get(AGENT_DRY_RUN)? - s.means.get(baseline)?))
        .collect();
    Ok(LiveSummary {
        experts,
        baseline: baseline.to_owned(),
        vs_baseline: win_loss(&table, AGENT, baseline),
        top1: share(top1),
        top3: share(top3),
        oracle_ratio: stats::mean(&ratios),
        phased_wins,
        scenarios,
        dry_run_vs_baseline: dry.then(|| win_loss(&table, AGENT_DRY_RUN, baseline)),
        agent_vs_dry_run: dry.then(|| win_loss(&table, AGENT, AGENT_DRY_RUN)),
        dry_run_mean_gain: stats::mean(&dry_gains),
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

fn pct(x: Option<f64>) -> String {
    x.map(|v| format!("{:.1}%", v * 100.0))
        .unwrap_or_else(|| "n/a".into())
}

/// The markdown report of stage 3.
pub fn markdown(summary: &LiveSummary, set: &ResultSet, table_note: &str) -> String {
    let mut out = String::from("# Mapping calibration, stage 3 (live)\n\n");
    let o = &set.options;
    out.push_str(&format!(
        "Machine: {} · {} CPUs · kernel {}. Runs: {} scenario(s) × ({} + `asa run`), {} rep(s), \
         {:.0} s probe, {:.0} s settle. {table_note}\n\n",
        set.machine.cpu_model,
        set.machine.cpus,
        set.machine.kernel,
        set.scenarios.len(),
        summary.experts.join(", "),
        o.reps,
        o.duration.as_secs_f64(),
        o.settle.as_secs_f64(),
    ));
    let wl = summary.vs_baseline;
    out.push_str(&format!(
        "**`asa run` against {}**: {} wins, {} ties, {} losses (win rate {}); Top-1 {}, Top-3 {} \
         among the static experts plus the agent; agent / static oracle {}. Phased scenarios \
         where the agent beat the static oracle: {}.\n\n(The paper: 86.4% wins, 45.4% Top-1, \
         78.9% Top-3.)\n\n",
        summary.baseline,
        wl.wins,
        wl.ties,
        wl.losses,
        pct(wl.rate()),
        pct(summary.top1),
        pct(summary.top3),
        summary
            .oracle_ratio
            .map(|r| format!("{r:.3}"))
            .unwrap_or("n/a".into()),
        if summary.phased_wins.is_empty() {
            "none".to_string()
        } else {
            summary.phased_wins.join(", ")
        }
    ));
    if let (Some(d), Some(a)) = (summary.dry_run_vs_baseline, summary.agent_vs_dry_run) {
        out.push_str(&format!(
            "**The agent's own cost** (`asa run --dry-run`: it perceives and decides, the machine \
             stays on EEVDF) against {}: {} wins, {} ties, {} losses, mean score difference {}. \
             **What switching is worth**: `asa run` against the dry run: {} wins, {} ties, {} \
             losses.\n\n",
            summary.baseline,
            d.wins,
            d.ties,
            d.losses,
            summary
                .dry_run_mean_gain
                .map(|g| format!("{g:+.3}"))
                .unwrap_or("n/a".into()),
            a.wins,
            a.ties,
            a.losses
        ));
    }
    let dry = summary
        .scenarios
        .iter()
        .any(|s| s.means.contains_key(AGENT_DRY_RUN));
    out.push_str("| scenario |");
    for e in &summary.experts {
        out.push_str(&format!(" {e} |"));
    }
    if dry {
        out.push_str(" asa dry run |");
    }
    out.push_str(" static oracle | asa run | asa / oracle | rank | agent switched to |\n|---|");
    for _ in &summary.experts {
        out.push_str("---:|");
    }
    if dry {
        out.push_str("---:|");
    }
    out.push_str("---|---:|---:|---:|---|\n");
    for s in &summary.scenarios {
        out.push_str(&format!(
            "| {}{} |",
            s.scenario,
            if s.phased { " (phased)" } else { "" }
        ));
        for e in &summary.experts {
            out.push_str(&format!(
                " {} |",
                s.means
                    .get(e)
                    .map(|m| format!("{m:.3}"))
                    .unwrap_or("–".into())
            ));
        }
        if dry {
            out.push_str(&format!(
                " {} |",
                s.means
                    .get(AGENT_DRY_RUN)
                    .map(|m| format!("{m:.3}"))
                    .unwrap_or("–".into())
            ));
        }
        let switched: Vec<String> = s
            .traces
            .iter()
            .map(|t| {
                if t.switches.is_empty() {
                    "(stayed)".to_string()
                } else {
                    t.switches.join(" → ")
                }
            })
            .collect();
        out.push_str(&format!(
            " {} | {} | {} | {} | {} |\n",
            s.oracle
                .as_ref()
                .map(|(e, m)| format!("{e} {m:.3}"))
                .unwrap_or("–".into()),
            s.agent.map(|m| format!("{m:.3}")).unwrap_or("–".into()),
            match (s.agent, &s.oracle) {
                (Some(a), Some((_, o))) if *o > 0.0 => format!("{:.3}", a / o),
                _ => "–".into(),
            },
            s.agent_rank
                .map(|r| (r + 1).to_string())
                .unwrap_or("–".into()),
            switched.join("; ")
        ));
    }
    out.push_str(&phase_section(summary));
    out
}

/// The agent's runs of phased scenarios, phase by phase: what it voted while each load ran and
/// when it switched (empty when no run has phase times).
fn phase_section(summary: &LiveSummary) -> String {
    let mut lines = Vec::new();
    for s in &summary.scenarios {
        for (i, t) in s.traces.iter().enumerate() {
            if t.phases.is_empty() {
                continue;
            }
            let phases: Vec<String> = t.phases.iter().map(PhaseTrace::summary).collect();
            lines.push(format!(
                "- {} run {}: {}\n",
                s.scenario,
                i + 1,
                phases.join("; ")
            ));
        }
    }
    if lines.is_empty() {
        return String::new();
    }
    format!(
        "\n**The agent phase by phase** (ticks voted while each phase's load ran, the first \
         tick of a phase left out; switches timed from the phase's start):\n\n{}",
        lines.concat()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phased_run_splits_the_log_by_its_phase_times() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("agent-900.jsonl");
        let tick = |ms: u64, voted: &str, outcome: &str| {
            format!(
                r#"{{"unix_ms":{ms},"voted_class":{voted},"target_expert":"bpfland","outcome":"{outcome}"}}"#
            )
        };
        let lines = [
            tick(1500, "null", "stay"),
            tick(2500, r#""idle""#, "stay"),
            tick(3500, r#""idle""#, "stay"),
            tick(4500, r#""xz_compress""#, "stay"),
            tick(5500, r#""xz_compress""#, "switched"),
            tick(6500, r#""xz_compress""#, "stay"),
            tick(7500, r#""xz_compress""#, "stay"),
        ];
        std::fs::write(&log, lines.join("\n")).unwrap();
        let phase = |load: &str, from: u64, to: u64| {
            format!(
                r#"{{"load":"{load}","planned_s":3.0,"output":null,"started_unix_ms":{from},"ended_unix_ms":{to}}}"#
            )
        };
        let run = |phases: &str| -> RunRecord {
            serde_json::from_str(&format!(
                r#"{{"expert":"asa","rep":0,"pinned":"asa","started_unix_ms":900,
                "probe":{{"kind":"game","elapsed_s":6.0,"summary":{{}},"samples":{{}}}},
                "phases":[{phases}],"valid":true}}"#
            ))
            .unwrap()
        };
        let trace = AgentTrace::read(&log).unwrap();
        let phased = trace.clone().with_phases(&run(&format!(
            "{},{}",
            phase("idle", 1000, 4000),
            phase("xz_compress", 4000, 7000)
        )));
        assert_eq!(phased.phases.len(), 2);
        let (idle, xz) = (&phased.phases[0], &phased.phases[1]);
        assert_eq!(idle.load, "idle");
        // The first tick of each phase covers time before it: left out of the votes.
        assert_eq!(idle.voted, BTreeMap::from([("idle".to_string(), 2)]));
        assert!(idle.switches.is_empty());
        assert_eq!(xz.voted, BTreeMap::from([("xz_compress".to_string(), 2)]));
        assert_eq!(xz.switches, [("bpfland".to_string(), 1.5)]);
        assert_eq!(idle.summary(), "idle: voted idle 2/2");
        assert_eq!(
            xz.summary(),
            "xz_compress: voted xz_compress 2/2, → bpfland at +1.5 s"
        );
        // A single phase, or phases without times (older results): no split.
        let single = trace
            .clone()
            .with_phases(&run(&phase("xz_compress", 1000, 7000)));
        assert!(single.phases.is_empty());
        let untimed = trace.with_phases(&run(&format!(
            "{},{}",
            phase("idle", 0, 0),
            phase("xz_compress", 0, 0)
        )));
        assert!(untimed.phases.is_empty());
    }

    #[test]
    fn a_decision_log_gives_the_switches_and_the_voted_classes() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("agent-1000.jsonl");
        std::fs::write(
            &log,
            r#"{"voted_class":null,"target_expert":null,"outcome":"stay"}
{"voted_class":"xz_compress","target_expert":"bpfland","outcome":"switched"}
{"voted_class":"xz_compress","target_expert":"bpfland","outcome":"stay"}
{"voted_class":"idle","target_expert":"eevdf","outcome":"switch_failed"}

"#,
        )
        .unwrap();
        std::fs::write(dir.path().join("agent-2000.log"), "not a log").unwrap();
        let traces = AgentTrace::read_dir(dir.path()).unwrap();
        assert_eq!(traces.keys().copied().collect::<Vec<_>>(), [1000]);
        let t = &traces[&1000];
        assert_eq!(t.ticks, 4);
        assert_eq!(t.switches, ["bpfland"]);
        assert_eq!(t.failed, 1);
        assert_eq!(t.voted["xz_compress"], 2);
        assert_eq!(t.voted["idle"], 1);
        std::fs::write(dir.path().join("agent-3000.jsonl"), "{oops").unwrap();
        let err = AgentTrace::read_dir(dir.path()).unwrap_err();
        assert!(format!("{err:#}").contains("agent-3000.jsonl"), "{err:#}");
    }
}
