//! The expert supervisor: the only code that starts and stops sched_ext schedulers.
//!
//! It keeps one invariant: at most one expert is attached, and the supervisor always knows
//! which scheduler the kernel is running; one supervisor per machine ([`ControlLock`]). A switch
//! starts the new expert behind the attach gate while the old one runs, then stops the old one
//! (SIGINT, then SIGKILL after a timeout), waits for `state=disabled`, opens the gate and waits
//! for `state=enabled` with the new expert's ops name and a higher `enable_seq` (without the
//! gate: stop old, then start new). When the new expert
//! fails, the previous one is restored (or, when that fails too, the machine stays on EEVDF),
//! and the error says which scheduler is running. [`Supervisor::check`] notices an expert that
//! exited, was killed or was ejected by the kernel's watchdog.
//!
//! **Hot standbys** ([`Supervisor::set_standby`]; the pool is `standby_pool.rs`): experts
//! started ahead of need, loaded and parked at their attach gates. A switch to a parked
//! standby is "stop the old one, release the gate". The extended invariant: every expert
//! process other than the active one is held at its gate (or still loading before it), so at
//! most one is attached; a standby is released only after the old expert is gone
//! (`state=disabled`), and only when its process is alive and the kernel still has its held
//! open pending ([`AttachGate::is_holding`](crate::attach_gate::AttachGate::is_holding));
//! otherwise it is reported ([`SupervisorEvent::StandbyLost`]), discarded, and the target is
//! started afresh behind the gate.
//!
//! How an expert process is started, signalled and heard is `process.rs`; what the supervisor
//! reports (switch reports, errors, events) is `report.rs`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context, Result};
use log::{info, warn};
use nix::sys::signal::Signal;
use serde::{Deserialize, Serialize};

use crate::catalogue::{Catalogue, Expert, EEVDF};
use crate::control_lock::{ControlLock, CONTROL_LOCK};
use crate::locate::{check_version, locate_binary};
use crate::process::{self, wait_at_gate, Launch, RunningExpert, Starting};
use crate::report::ms;
use crate::sched_ext::{SchedExt, ScxState};
use crate::standby_pool::StandbyPool;

pub use crate::process::describe_status;
pub use crate::report::{unix_ms, Active, SupervisorEvent, SwitchError, SwitchReport};
pub use crate::standby_pool::{
    bpf_memlock_kib, rss_kib, standby_retry_delay, StandbyInfo, StandbyState,
};

/// Timeouts and polling of the supervisor.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct SupervisorConfig {
    /// How long an expert may take from process start to `state=enabled`. scx_lavd needs
    /// about 25 s under qemu TCG (BPF verification), so the default allows a minute.
    pub enable_timeout: Duration,
    /// How long an expert may take to detach after SIGINT before it gets SIGKILL.
    pub stop_timeout: Duration,
    /// How long the kernel may take to reach `disabled` after the expert process is gone.
    pub disable_timeout: Duration,
    /// Polling interval while waiting for a state change.
    pub poll: Duration,
    /// Restore the previous expert when a switch fails (else fall back to EEVDF).
    pub rollback: bool,
    /// Load the new expert behind the attach gate while the old one runs (make before
    /// break; see [`crate::attach_gate`]).
    pub gate_attach: bool,
    /// Nice value the expert processes start with (0: the agent's). A negative value lets an
    /// expert's start (BPF load and verification run in its own process) go ahead of a
    /// saturating workload; needs CAP_SYS_NICE, silently kept at the agent's priority without.
    /// Default [`DEFAULT_EXPERT_NICE`].
    pub expert_nice: i32,
    /// Nice value hot standbys load at (default [`DEFAULT_STANDBY_NICE`]): their BPF
    /// verification only uses CPU time nothing else wants. Raised to `expert_nice` when a
    /// switch takes the standby.
    #[serde(default = "default_standby_nice")]
    pub standby_nice: i32,
    /// SIGKILL an expert that has not stopped this long after SIGINT (None: the expert's
    /// catalogue `stop_grace_ms`, else only after `stop_timeout`). scx_lavd and scx_bpfland take 0.1–1.2 s to act on SIGINT (uniformly
    /// spread: a once-a-second loop), most of a switch to a hot standby; the kernel detaches a
    /// killed scheduler the same way (its struct_ops link goes with the process), only the
    /// expert's own exit report is lost.
    #[serde(default)]
    pub stop_grace: Option<Duration>,
}

/// Hot standbys load at the lowest priority.
pub const DEFAULT_STANDBY_NICE: i32 = 19;

fn default_standby_nice() -> i32 {
    DEFAULT_STANDBY_NICE
}

impl Default for SupervisorConfig {
    fn default() -> Self {
        Self {
            enable_timeout: Duration::from_secs(60),
            stop_timeout: Duration::from_secs(10),
            disable_timeout: Duration::from_secs(5),
            poll: Duration::from_millis(5),
            rollback: true,
            gate_attach: true,
            expert_nice: DEFAULT_EXPERT_NICE,
            standby_nice: DEFAULT_STANDBY_NICE,
            stop_grace: None,
        }
    }
}

/// The experts' default nice value: under `stress-ng --cpu 2` in the lab VM (TCG, 2 vCPUs,
/// `lab/bench-switch-load.sh`, 3 interleaved rounds, 2026-11-24) starting them at -10 instead
/// of 0 cut the switch into rusty from 16.8 to 8.8 s and eevdf → bpfland from 5.6 to 3.4 s
/// (medians; `results/2026-11-24-switch-under-load/`).
pub const DEFAULT_EXPERT_NICE: i32 = -10;

/// The environment variable that sets [`SupervisorConfig::expert_nice`] for every supervisor
/// of an `asa` process (the scenario runner's and the calibration's too).
pub const EXPERT_NICE_ENV: &str = "ASA_EXPERT_NICE";

impl SupervisorConfig {
    /// These settings with `ASA_EXPERT_NICE` applied when it is set (an integer in -20..=19;
    /// anything else is an error naming the variable).
    pub fn with_env(mut self) -> Result<Self> {
        if let Some(text) = std::env::var_os(EXPERT_NICE_ENV) {
            let text = text.to_string_lossy();
            self.expert_nice = text
                .trim()
                .parse::<i32>()
                .ok()
                .filter(|n| (-20..=19).contains(n))
                .ok_or_else(|| {
                    anyhow::anyhow!("{EXPERT_NICE_ENV}={text:?}: expected a nice value in -20..=19")
                })?;
        }
        Ok(self)
    }
}

/// Durations of a switch's steps.
#[derive(Debug, Default, Clone, Copy)]
struct Timings {
    prepare: Option<Duration>,
    stop: Option<Duration>,
    start: Option<Duration>,
    gap: Option<Duration>,
}

/// Starts, stops and watches experts. See the module documentation.
pub struct Supervisor {
    catalogue: Catalogue,
    scx: SchedExt,
    config: SupervisorConfig,
    running: Option<RunningExpert>,
    active: Active,
    verified: HashSet<PathBuf>,
    /// The hot standbys, the ones wanted and the ones that keep failing.
    standby: StandbyPool,
    /// Events noticed inside a switch, handed out by the next [`Supervisor::check_standby`].
    pending_events: Vec<SupervisorEvent>,
    /// Held for the supervisor's life (dropped after `Drop::drop` has stopped the expert).
    _lock: ControlLock,
}

impl Supervisor {
    /// A supervisor for a machine that must be on EEVDF now; anything else is an error that
    /// names the scheduler attached by someone else.
    /// Only one supervisor per machine: a second one is refused, naming the first's process.
    pub fn new(catalogue: Catalogue, scx: SchedExt, config: SupervisorConfig) -> Result<Self> {
        scx.check_present()?;
        let lock = ControlLock::acquire(Path::new(CONTROL_LOCK))?;
        let snap = scx.snapshot()?;
        if snap.state != ScxState::Disabled {
            bail!(
                "another sched_ext scheduler is attached (state {}, ops {}); ASA only manages \
                 schedulers it started: stop that one first (SIGINT its process, or `scxctl stop`)",
                snap.state,
                snap.ops.as_deref().unwrap_or("?")
            );
        }
        Ok(Self {
            catalogue,
            scx,
            config,
            running: None,
            active: Active {
                expert: EEVDF.to_owned(),
                since_unix_ms: unix_ms(SystemTime::now()),
                pid: None,
            },
            verified: HashSet::new(),
            standby: StandbyPool::default(),
            pending_events: Vec::new(),
            _lock: lock,
        })
    }

    /// The catalogue in use.
    pub fn catalogue(&self) -> &Catalogue {
        &self.catalogue
    }

    /// The sysfs handle in use.
    pub fn sched_ext(&self) -> &SchedExt {
        &self.scx
    }

    /// What the supervisor believes runs now.
    pub fn active(&self) -> &Active {
        &self.active
    }

    /// The last lines the running expert printed.
    pub fn output_tail(&self, lines: usize) -> Vec<String> {
        self.running
            .as_ref()
            .map(|r| r.output_tail(lines))
            .unwrap_or_default()
    }

    fn set_active(&mut self, expert: &str, pid: Option<u32>) {
        self.active = Active {
            expert: expert.to_owned(),
            since_unix_ms: unix_ms(SystemTime::now()),
            pid,
        };
    }

    /// Check a switch target without touching anything: known name, binary present and
    /// runnable (its `--version` runs, once per binary). A version other than the catalogue's
    /// is used, with one warning. Returns the expert and its binary (none for EEVDF).
    pub fn preflight(&mut self, name: &str) -> Result<(Expert, Option<PathBuf>)> {
        let expert = self.catalogue.require(name)?.clone();
        if expert.is_kernel_default() {
            return Ok((expert, None));
        }
        let binary = locate_binary(&expert)?;
        if !self.verified.contains(&binary) {
            let version = check_version(&expert, &binary)
                .with_context(|| format!("expert {name} cannot run"))?;
            if let Some(warning) = version.warning(&expert, &binary) {
                warn!("{warning}");
            }
            self.verified.insert(binary.clone());
        }
        Ok((expert, Some(binary)))
    }

    /// Switch to the expert called `name` (`eevdf` detaches every BPF scheduler).
    ///
    /// With the attach gate (the default) the new expert is started and loads its BPF
    /// programs while the old one keeps scheduling; only when it waits at the gate is the old
    /// one stopped and the gate opened, so the machine spends only "stop + attach" on EEVDF.
    /// A new expert that fails before the gate leaves the old one running, untouched.
    pub fn switch_to(&mut self, name: &str) -> Result<SwitchReport, SwitchError> {
        let (expert, binary) = self
            .preflight(name)
            .map_err(|cause| SwitchError::Rejected {
                cause,
                active: self.active.expert.clone(),
            })?;
        let t0 = Instant::now();
        let from = self.active.expert.clone();
        if from == expert.name && self.healthy() {
            return Ok(self.report(from, Timings::default(), t0, true));
        }
        let previous = self
            .running
            .as_ref()
            .map(|r| (r.expert.clone(), r.binary.clone()));
        let mut prepared = None;
        let mut standby = false;
        if binary.is_some() {
            if let Some(promoted) = self.standby.take(&expert.name, self.config.expert_nice) {
                match promoted {
                    Ok(starting) => {
                        prepared = Some(starting);
                        standby = true;
                    }
                    Err(lost) => {
                        warn!("{lost}; starting {name} afresh");
                        self.pending_events.push(lost);
                    }
                }
            }
        }
        if let (Some(binary), true, None) = (&binary, self.config.gate_attach, &prepared) {
            prepared =
                self.prepare_gated(&expert, binary)
                    .map_err(|cause| SwitchError::Rejected {
                        cause,
                        active: self.active.expert.clone(),
                    })?;
        }
        let mut timings = Timings {
            prepare: prepared.as_ref().map(|_| t0.elapsed()),
            ..Timings::default()
        };
        timings.stop = self.stop_running().map_err(|cause| SwitchError::Failed {
            target: name.to_owned(),
            cause,
            active: self.active.expert.clone(),
            recovery: "the old expert did not stop cleanly".into(),
        })?;
        let disabled_at = Instant::now();
        let Some(binary) = binary else {
            info!("switched {from} -> eevdf");
            return Ok(self.report(from, timings, t0, false));
        };
        let started = match prepared {
            Some(mut starting) => {
                if standby {
                    // Loaded long ago: its start is the gate release to `enabled`.
                    starting.spawned_at = Instant::now();
                }
                self.finish_start(starting)
            }
            None => self
                .spawn(&expert, &binary, Launch::Now)
                .and_then(|starting| self.finish_start(starting)),
        };
        match started {
            Ok(start) => {
                timings.start = Some(start);
                timings.gap = timings.stop.map(|_| disabled_at.elapsed());
                let mut report = self.report(from, timings, t0, false);
                report.standby = standby;
                info!(
                    "switched {}{}",
                    report.summary(),
                    if standby { " (hot standby)" } else { "" }
                );
                // Never a standby of the expert that runs.
                self.standby.discard(&self.active.expert);
                Ok(report)
            }
            Err(cause) => {
                warn!("{name} failed to start: {cause:#}");
                let recovery = match previous {
                    Some((prev, prev_binary)) if self.config.rollback => {
                        match self
                            .spawn(&prev, &prev_binary, Launch::Now)
                            .and_then(|starting| self.finish_start(starting))
                        {
                            Ok(_) => format!("restored the previous expert {}", prev.name),
                            Err(e) => format!(
                                "restoring the previous expert {} failed too ({e:#}); the machine is on EEVDF",
                                prev.name
                            ),
                        }
                    }
                    _ => "the machine is on EEVDF".to_owned(),
                };
                Err(SwitchError::Failed {
                    target: name.to_owned(),
                    cause,
                    active: self.active.expert.clone(),
                    recovery,
                })
            }
        }
    }

    fn report(&self, from: String, t: Timings, t0: Instant, no_op: bool) -> SwitchReport {
        let snap = self.scx.snapshot().ok();
        SwitchReport {
            from,
            to: self.active.expert.clone(),
            prepare_ms: t.prepare.map(ms),
            stop_ms: t.stop.map(ms),
            start_ms: t.start.map(ms),
            eevdf_gap_ms: t.gap.map(ms),
            total_ms: ms(t0.elapsed()),
            ops: snap.as_ref().and_then(|s| s.ops.clone()),
            enable_seq: snap.map(|s| s.enable_seq).unwrap_or_default(),
            at_unix_ms: unix_ms(SystemTime::now()),
            no_op,
            standby: false,
        }
    }

    /// True when the believed expert is what the kernel runs.
    pub fn healthy(&self) -> bool {
        let Ok(snap) = self.scx.snapshot() else {
            return false;
        };
        match &self.running {
            None => snap.state == ScxState::Disabled,
            Some(r) => {
                !r.ejected
                    && snap.state == ScxState::Enabled
                    && snap
                        .ops
                        .as_deref()
                        .is_some_and(|ops| r.expert.owns_ops(ops))
            }
        }
    }

    /// Start an expert process, directly or behind the attach gate.
    fn spawn(&self, expert: &Expert, binary: &Path, launch: Launch) -> Result<Starting> {
        let seq_before = self.scx.enable_seq()?;
        let timeout = expert
            .enable_timeout_s
            .map(Duration::from_secs)
            .unwrap_or(self.config.enable_timeout);
        let nice = match launch {
            Launch::Standby => self.config.standby_nice,
            _ => self.config.expert_nice,
        };
        process::spawn(expert, binary, launch, nice, seq_before, timeout)
    }

    /// Start `expert` behind the attach gate and wait until it is loaded and waits to attach;
    /// the running expert is not touched. `Ok(None)`: the gate is not available here (no
    /// seccomp user notification), switch break-before-make instead.
    fn prepare_gated(&self, expert: &Expert, binary: &Path) -> Result<Option<Starting>> {
        let starting = match self.spawn(expert, binary, Launch::Gated) {
            Ok(s) => s,
            Err(e) => {
                warn!("attach gate unavailable ({e:#}); switching break-before-make");
                return Ok(None);
            }
        };
        wait_at_gate(starting).map(Some)
    }

    /// Let a started expert attach (open its gate) on a machine that is on EEVDF and wait
    /// until the kernel runs it. Returns the time since its process started.
    fn finish_start(&mut self, mut starting: Starting) -> Result<Duration> {
        debug_assert!(self.running.is_none());
        if let Some(gate) = &starting.gate {
            gate.release()?;
        }
        let released_at = Instant::now();
        let mut running = starting.running.take().expect("not finished");
        running.gate = starting.gate.take();
        let name = running.expert.name.clone();
        loop {
            if let Some(status) = running.child.try_wait()? {
                // Give the reader threads a moment to collect the last words.
                std::thread::sleep(Duration::from_millis(50));
                let tail = running.output_for_error();
                self.wait_disabled()?;
                bail!(
                    "{name} exited before it attached ({}){tail}",
                    describe_status(status)
                );
            }
            let snap = self.scx.snapshot()?;
            if snap.state == ScxState::Enabled && snap.enable_seq > starting.seq_before {
                let ops = snap.ops.unwrap_or_default();
                if running.expert.owns_ops(&ops) {
                    running.enable_seq = snap.enable_seq;
                    let pid = running.child.id();
                    self.running = Some(running);
                    self.set_active(&name, Some(pid));
                    return Ok(starting.spawned_at.elapsed());
                }
                running.kill_and_reap();
                bail!(
                    "a different scheduler ({ops}) attached while {name} was starting; it is not ours, stop it"
                );
            }
            if released_at.elapsed() > starting.timeout {
                let tail = running.output_for_error();
                running.kill_and_reap();
                self.wait_disabled()?;
                bail!(
                    "{name} did not attach within {:?} (state {}); killed it{tail}",
                    starting.timeout,
                    snap.state
                );
            }
            std::thread::sleep(self.config.poll);
        }
    }

    /// Wait until the kernel reports `disabled`.
    fn wait_disabled(&self) -> Result<()> {
        let t0 = Instant::now();
        loop {
            let state = self.scx.state()?;
            if state == ScxState::Disabled {
                return Ok(());
            }
            if t0.elapsed() > self.config.disable_timeout {
                bail!(
                    "sched_ext is still {state} {:?} after the expert process ended",
                    self.config.disable_timeout
                );
            }
            std::thread::sleep(self.config.poll);
        }
    }

    /// Stop the running expert, if any: SIGINT, wait for exit and `disabled`, SIGKILL after
    /// the stop timeout. Returns how long it took.
    fn stop_running(&mut self) -> Result<Option<Duration>> {
        let Some(mut running) = self.running.take() else {
            return Ok(None);
        };
        let t0 = Instant::now();
        let name = running.expert.name.clone();
        if let Err(e) = running.signal(Signal::SIGINT) {
            warn!("asking {name} to stop (SIGINT): {e}");
        }
        let mut killed = false;
        loop {
            let exited = running.child.try_wait()?.is_some();
            if exited && self.scx.state()? == ScxState::Disabled {
                break;
            }
            let grace = self
                .config
                .stop_grace
                .or(running.expert.stop_grace_ms.map(Duration::from_millis))
                .map_or(self.config.stop_timeout, |g| {
                    g.min(self.config.stop_timeout)
                });
            if !killed && t0.elapsed() > grace {
                if grace < self.config.stop_timeout {
                    info!("{name} did not stop within {grace:?} of SIGINT (its stop grace); sending SIGKILL");
                } else {
                    warn!("{name} did not stop within {grace:?} of SIGINT; sending SIGKILL");
                }
                running.kill_and_reap();
                killed = true;
            }
            if killed && t0.elapsed() > self.config.stop_timeout + self.config.disable_timeout {
                self.set_active(EEVDF, None);
                bail!("{name} was killed but sched_ext did not return to disabled");
            }
            std::thread::sleep(self.config.poll);
        }
        self.set_active(EEVDF, None);
        info!("stopped {name} in {:.0} ms", ms(t0.elapsed()));
        Ok(Some(t0.elapsed()))
    }

    /// Detach whatever runs and return to EEVDF (used on shutdown); every standby is killed.
    pub fn stop(&mut self) -> Result<()> {
        self.standby.clear();
        self.stop_running().map(|_| ())
    }

    /// The hot standbys wanted, most wanted first (the caller bounds how many). Unwanted ones
    /// are stopped and missing ones started, one at a time, by [`Self::check_standby`]; the
    /// active expert and EEVDF never stand by.
    pub fn set_standby(&mut self, wanted: &[String]) {
        self.standby.set_wanted(wanted);
    }

    /// The standbys wanted (as last set).
    pub fn standby_wanted(&self) -> &[String] {
        self.standby.wanted()
    }

    /// The hot standbys now; with their resident memory when `with_rss` (reads /proc).
    pub fn standby_info(&self, with_rss: bool) -> Vec<StandbyInfo> {
        self.standby.info(with_rss)
    }

    /// Look at the standbys once (non-blocking): note the ones that parked, report and discard
    /// the ones that died or are no longer held, stop unwanted ones and start the next missing
    /// one when none is loading. Returns what happened (also what a switch noticed).
    pub fn check_standby(&mut self) -> Vec<SupervisorEvent> {
        let mut events = std::mem::take(&mut self.pending_events);
        let (lost, next) = self.standby.check(&self.active.expert);
        events.extend(lost);
        if let Some(name) = next {
            if let Err(e) = self.start_standby(&name) {
                warn!("could not start hot standby {name}: {e:#}");
                self.standby.note_failure(&name);
                events.push(SupervisorEvent::StandbyLost {
                    expert: name,
                    pid: 0,
                    status: format!("{e:#}"),
                    parked: false,
                    output_tail: Vec::new(),
                });
            }
        }
        events
    }

    /// Start `name` as a hot standby now (behind its gate, at the standby priority). Refused
    /// for EEVDF, the active expert and an expert that already stands by.
    pub fn start_standby(&mut self, name: &str) -> Result<()> {
        let (expert, binary) = self.preflight(name)?;
        let Some(binary) = binary else {
            bail!("{name} is the kernel default: nothing to hold in standby");
        };
        if self.active.expert == expert.name {
            bail!("{name} is running: it cannot stand by");
        }
        if self.standby.stands_by(&expert.name) {
            bail!("{name} already stands by");
        }
        let starting = self.spawn(&expert, &binary, Launch::Standby)?;
        self.standby.add(starting);
        Ok(())
    }

    /// Look at the running expert once; returns what changed since the last look. A look
    /// that finds nothing changed costs one `waitid` and two sysfs reads (`state`, `root/ops`):
    /// the controller looks several times a second, beside the workload it serves.
    pub fn check(&mut self) -> Option<SupervisorEvent> {
        let running = self.running.as_mut()?;
        let mut exit = running.child.try_wait();
        let mut attached = None;
        if matches!(exit, Ok(None)) && !running.ejected {
            attached = Some(self.scx.runs(|o| running.expert.owns_ops(o)).ok()?);
            if attached == Some(false) && running.exiting() {
                // Dying: wait (bounded) so the exit is reported as such, not as an ejection.
                let t0 = Instant::now();
                while matches!(exit, Ok(None)) && t0.elapsed() < Duration::from_secs(2) {
                    std::thread::sleep(Duration::from_millis(2));
                    exit = running.child.try_wait();
                }
            }
        }
        match exit {
            Ok(Some(status)) => {
                std::thread::sleep(Duration::from_millis(20));
                let event = SupervisorEvent::ExpertExited {
                    expert: running.expert.name.clone(),
                    status: describe_status(status),
                    output_tail: running.output_tail(12),
                };
                self.running = None;
                // The kernel detaches within ~0.1 s once the process is gone.
                if let Err(e) = self.wait_disabled() {
                    warn!("{e:#}");
                }
                self.set_active(EEVDF, None);
                warn!("{event}");
                return Some(event);
            }
            Ok(None) => {}
            Err(e) => warn!("waiting on {}: {e}", running.expert.name),
        }
        let name = running.expert.name.clone();
        let attached = match attached {
            Some(attached) => attached,
            None => self.scx.runs(|o| running.expert.owns_ops(o)).ok()?,
        };
        if running.ejected {
            if attached {
                let enable_seq = self.scx.enable_seq().ok()?;
                if enable_seq > running.enable_seq {
                    running.ejected = false;
                    running.enable_seq = enable_seq;
                    let pid = running.child.id();
                    self.set_active(&name, Some(pid));
                    let event = SupervisorEvent::Reattached {
                        expert: name,
                        enable_seq,
                    };
                    info!("{event}");
                    return Some(event);
                }
            }
        } else if !attached {
            running.ejected = true;
            let state = self.scx.state().unwrap_or(ScxState::Disabled);
            self.set_active(EEVDF, None);
            let event = SupervisorEvent::Ejected {
                expert: name,
                state,
            };
            warn!("{event}");
            return Some(event);
        }
        None
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        if self.running.is_some() {
            if let Err(e) = self.stop_running() {
                warn!("stopping the expert on exit: {e:#}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ASA_EXPERT_NICE` sets the experts' nice value; a bad value is an error naming it. (The
    /// only test touching that variable.)
    #[test]
    fn expert_nice_comes_from_the_environment() {
        let config = || SupervisorConfig::default().with_env();
        std::env::remove_var(EXPERT_NICE_ENV);
        assert_eq!(config().unwrap().expert_nice, DEFAULT_EXPERT_NICE);
        std::env::set_var(EXPERT_NICE_ENV, "-10");
        assert_eq!(config().unwrap().expert_nice, -10);
        for bad in ["-21", "20", "low"] {
            std::env::set_var(EXPERT_NICE_ENV, bad);
            let err = config().unwrap_err().to_string();
            assert!(err.contains(EXPERT_NICE_ENV) && err.contains(bad), "{err}");
        }
        std::env::remove_var(EXPERT_NICE_ENV);
    }
}
