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
