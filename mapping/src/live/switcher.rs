//! Runs the agent as a column of the scenario runs: pinning [`super::AGENT`] starts `asa run`
//! with the table under test; pinning a static expert stops it and takes the supervisor back.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context, Result};
use asa_experts::sched_ext::DEFAULT_SYSFS_ROOT;
use asa_experts::Supervisor;
use asa_scenarios::runner::{ExpertSwitcher, SupervisorSwitcher};
use log::{info, warn};

use super::{is_agent, AGENT_DRY_RUN};

/// How to start the agent for a live run.
#[derive(Debug, Clone)]
pub struct AgentLauncher {
    /// The `asa` binary.
    pub program: PathBuf,
    /// Arguments after `run` (mapping table, model, cooldown, ...).
    pub run_args: Vec<String>,
    /// Where each agent run's decision log (`agent-<unix ms>.jsonl`) and output go.
    pub log_dir: PathBuf,
    /// How long the agent may take to serve its control socket (at once since it serves it
    /// while loading its model, mode `starting`; older agents only after the load).
    pub ready_timeout: Duration,
    /// How long the agent may take to stop after SIGTERM (its expert's stop included).
    pub stop_timeout: Duration,
    /// How long to wait, once it serves its socket, for the agent to be warm (see
    /// [`warmth`]) before the scenario's load starts; past it the run goes on, with a warning.
    pub warm_timeout: Duration,
}

impl AgentLauncher {
    /// A launcher with the default timeouts (90 s to start, 120 s to be warm, 60 s to stop).
    pub fn new(program: PathBuf, run_args: Vec<String>, log_dir: PathBuf) -> Self {
        Self {
            program,
            run_args,
            log_dir,
            ready_timeout: Duration::from_secs(90),
            stop_timeout: Duration::from_secs(60),
            warm_timeout: Duration::from_secs(120),
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
    /// Since when the running agent's scheduler has run (ms since the epoch), read when it was
    /// found warm.
    agent_since: Option<u64>,
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
            agent_since: None,
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
        self.agent_since = None;
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
        // Ready when `asa status` reports this agent (mode `starting` while it loads its model:
        // the wait for warmth below waits for its decisions).
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
        self.wait_until_warm()
    }

    /// Waits until the agent is warm ([`warmth`]): a daemon that was running before the
    /// workload began, as `asa run` under systemd is, and as a static expert is attached
    /// before the load starts. Without it each run would charge the agent its start-up (model
    /// load, first switch, standbys loading) inside the probe's 60 s. Notes since when the
    /// agent's scheduler runs ([`agent_scheduler_since`]; the run's hold counts from it).
    fn wait_until_warm(&mut self) -> Result<()> {
        let Some(agent) = self.agent.as_mut() else {
            return Ok(());
        };
        let pid = agent.child.id();
        let started = Instant::now();
        let mut last = Warmth::NoStatus;
        let mut last_status = None;
        while started.elapsed() < self.launcher.warm_timeout {
            if let Some(status) = agent.child.try_wait()? {
                bail!(
                    "the agent exited while warming up ({status}): {}",
                    tail(&agent.log, 8)
                );
            }
            let status = status_json(&self.launcher.program);
            last = status
                .as_ref()
                .map_or(Warmth::NoStatus, |v| warmth(v, pid, WARM_TICKS));
            if status.is_some() {
                last_status = status;
            }
            if last == Warmth::Warm {
                info!("agent warm after {:.1} s", started.elapsed().as_secs_f64());
                break;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        if last != Warmth::Warm {
            warn!(
                "the agent was not warm within {:?} ({last:?}): the run starts anyway",
                self.launcher.warm_timeout
            );
        }
        let now = asa_experts::supervisor::unix_ms(SystemTime::now());
        self.agent_since = Some(
            last_status
                .and_then(|v| agent_scheduler_since(&v, pid))
                .unwrap_or(now),
        );
        Ok(())
    }
}

/// Ticks the agent must have decided since its last switch to count as warm: its start-up
/// choice made and held (a switch within the first ticks, e.g. to the idle class's expert, is
/// waited out).
pub const WARM_TICKS: u64 = 3;

/// How far a starting agent is from warm, read from its `asa status --json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Warmth {
    /// No status, or the status of another process.
    NoStatus,
    /// Fewer than the required ticks since start or since its last switch.
    Deciding {
        /// Ticks since the last switch (or since start).
        ticks: u64,
    },
    /// A switch is under way, or the kernel does not run what the agent believes.
    Switching,
    /// A wanted hot standby is not loaded and parked yet.
    StandbyLoading {
        /// The first such standby.
        expert: String,
    },
    /// Its start-up choice held for the required ticks, nothing switching, every wanted
    /// standby parked.
    Warm,
}

/// Warmth of the agent `pid` from its status (`asa status --json`), requiring `ticks`
/// decisions since its last switch.
pub fn warmth(status: &serde_json::Value, pid: u32, ticks: u64) -> Warmth {
    let agent = &status["agent"];
    if agent["pid"].as_u64() != Some(u64::from(pid)) {
        return Warmth::NoStatus;
    }
    let decision = &agent["decision"];
    let now = decision["last"]["tick"].as_u64().unwrap_or(0);
    let since = now
        - decision["last_switch"]["tick"]
            .as_u64()
            .unwrap_or(0)
            .min(now);
    if since < ticks {
        return Warmth::Deciding { ticks: since };
    }
    if !agent["switching_to"].is_null() || agent["consistent"] == serde_json::Value::Bool(false) {
        return Warmth::Switching;
    }
    let standby = &agent["standby"];
    let parked = |name: &str| {
        standby["experts"].as_array().is_some_and(|list| {
            list.iter()
                .any(|e| e["expert"] == name && e["state"] == "parked")
        })
    };
    let wanted = standby["wanted"].as_array().cloned().unwrap_or_default();
    if let Some(expert) = wanted
        .iter()
        .filter_map(|w| w.as_str())
        .find(|w| !parked(w))
    {
        return Warmth::StandbyLoading {
            expert: expert.to_string(),
        };
    }
    Warmth::Warm
}

/// Since when the scheduler the agent `pid` believes runs has run (ms since the epoch), from
/// its status (`asa status --json`): its `active.since_unix_ms`, set when its expert reported
/// `enabled` (or, on EEVDF, when the agent started or its expert stopped). `None` for another
/// process's status or one without it.
pub fn agent_scheduler_since(status: &serde_json::Value, pid: u32) -> Option<u64> {
    let agent = &status["agent"];
    if agent["pid"].as_u64() != Some(u64::from(pid)) {
        return None;
    }
    agent["active"]["since_unix_ms"].as_u64().filter(|&t| t > 0)
}

/// `asa status --json`, parsed.
fn status_json(program: &Path) -> Option<serde_json::Value> {
    let out = Command::new(program)
        .args(["status", "--json"])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    serde_json::from_slice(&out.stdout).ok()
}

/// Whether `asa status` reports the agent with process id `pid`.
fn serves_status(program: &Path, pid: u32) -> bool {
    status_json(program).is_some_and(|v| v["agent"]["pid"].as_u64() == Some(u64::from(pid)))
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

    /// The agent's scheduler as its status gave it once the agent was warm (the moment it was
    /// found warm when the status did not say); a static expert's or EEVDF's from the
    /// supervisor (made anew after the agent stopped: EEVDF counts from then).
    fn scheduler_since(&self) -> Option<u64> {
        if self.agent.is_some() {
            return self.agent_since;
        }
        self.supervisor.as_ref().and_then(|s| s.scheduler_since())
    }
}

impl Drop for LiveSwitcher {
    fn drop(&mut self) {
        if let Err(e) = self.stop_agent() {
            warn!("{e:#}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn status(
        last: u64,
        last_switch: Option<u64>,
        wanted: &[&str],
        parked: &[&str],
    ) -> serde_json::Value {
        json!({"agent": {
            "pid": 42,
            "switching_to": null,
            "consistent": true,
            "decision": {
                "last": {"tick": last},
                "last_switch": last_switch.map(|t| json!({"tick": t})),
            },
            "standby": {
                "wanted": wanted,
                "experts": parked.iter().map(|e| json!({"expert": e, "state": "parked"})).collect::<Vec<_>>(),
            },
        }})
    }

    #[test]
    fn the_agents_scheduler_runs_since_its_status_says() {
        let mut s = status(9, Some(1), &[], &[]);
        assert_eq!(agent_scheduler_since(&s, 42), None);
        s["agent"]["active"] = json!({"expert": "cosmos", "since_unix_ms": 1_795_900_001_500u64});
        assert_eq!(agent_scheduler_since(&s, 42), Some(1_795_900_001_500));
        assert_eq!(agent_scheduler_since(&s, 7), None, "another agent's");
    }

    #[test]
    fn another_process_status_is_no_status() {
        assert_eq!(warmth(&status(9, None, &[], &[]), 7, 3), Warmth::NoStatus);
        assert_eq!(warmth(&json!({}), 42, 3), Warmth::NoStatus);
    }

    #[test]
    fn an_agent_is_not_warm_until_its_choice_has_held_for_the_ticks() {
        assert_eq!(
            warmth(&status(0, None, &[], &[]), 42, 3),
            Warmth::Deciding { ticks: 0 }
        );
        assert_eq!(
            warmth(&status(3, Some(1), &[], &[]), 42, 3),
            Warmth::Deciding { ticks: 2 }
        );
        assert_eq!(warmth(&status(4, Some(1), &[], &[]), 42, 3), Warmth::Warm);
        assert_eq!(warmth(&status(3, None, &[], &[]), 42, 3), Warmth::Warm);
    }

    #[test]
    fn a_switch_under_way_or_an_inconsistent_kernel_is_not_warm() {
        let mut s = status(9, Some(1), &[], &[]);
        s["agent"]["switching_to"] = json!("lavd");
        assert_eq!(warmth(&s, 42, 3), Warmth::Switching);
        let mut s = status(9, Some(1), &[], &[]);
        s["agent"]["consistent"] = json!(false);
        assert_eq!(warmth(&s, 42, 3), Warmth::Switching);
    }

    #[test]
    fn every_wanted_standby_must_be_parked() {
        let mut s = status(9, Some(1), &["bpfland", "rusty"], &["bpfland"]);
        s["agent"]["standby"]["experts"]
            .as_array_mut()
            .unwrap()
            .push(json!({"expert": "rusty", "state": "loading"}));
        assert_eq!(
            warmth(&s, 42, 3),
            Warmth::StandbyLoading {
                expert: "rusty".into()
            }
        );
        let s = status(9, Some(1), &["bpfland", "rusty"], &["rusty", "bpfland"]);
        assert_eq!(warmth(&s, 42, 3), Warmth::Warm);
    }
}
