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
//! **Hot standbys.** The supervisor may also keep a pool of experts started ahead of need
//! ([`Supervisor::set_standby`]): each is started behind its own attach gate at a low priority
//! ([`SupervisorConfig::standby_nice`]), loads and verifies its BPF programs while the active
//! expert runs, and is then parked at the gate (its first open of the state file, right before
//! attaching, is held). A switch to a parked standby is "stop the old one, release the gate".
//! The extended invariant: every expert process other than the active one is held at its gate
//! (or still loading before it), so at most one is attached; a standby is released only after
//! the old expert is gone (`state=disabled`), and only when its process is alive and the kernel
//! still has its held open pending ([`AttachGate::is_holding`]); otherwise it is reported
//! ([`SupervisorEvent::StandbyLost`]), discarded, and the target is started afresh behind the
//! gate. A standby is stopped with SIGKILL (never SIGINT: a signal restarts the held open,
//! which the gate would let through), and its parent-death signal is SIGKILL too (the kernel
//! detaches a killed scheduler within ~0.1 s). [`Supervisor::check_standby`] notices standbys
//! that park or die, replaces lost ones and starts missing ones, one loading at a time.

use std::collections::{HashSet, VecDeque};
use std::io::{BufRead, BufReader, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};
use log::{debug, info, warn};
use nix::sys::signal::Signal;
use serde::{Deserialize, Serialize};

use crate::attach_gate::{self, AttachGate, GatePolicy, ListenerHandoff};
use crate::catalogue::{Catalogue, Expert, EEVDF};
use crate::control_lock::{ControlLock, CONTROL_LOCK};
use crate::locate::locate_binary;
use crate::sched_ext::{SchedExt, ScxState};

/// How many lines of an expert's output are kept for error messages and `asa status`.
const OUTPUT_LINES_KEPT: usize = 200;

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

/// A standby may take this many times an expert's enable timeout to load (it loads at the
/// standby priority).
const STANDBY_TIMEOUT_FACTOR: u32 = 5;

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

/// Milliseconds since the Unix epoch.
pub fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis() as u64
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// What one switch did and how long each step took.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SwitchReport {
    /// Expert that ran before.
    pub from: String,
    /// Expert that runs now.
    pub to: String,
    /// Time the new expert spent loading behind the attach gate while the old one still ran
    /// (ms); absent for break-before-make switches.
    #[serde(default)]
    pub prepare_ms: Option<f64>,
    /// SIGINT to `state=disabled` of the old expert (ms); absent when EEVDF was running.
    pub stop_ms: Option<f64>,
    /// Process start to `state=enabled` of the new expert (ms); absent when switching to EEVDF.
    pub start_ms: Option<f64>,
    /// Time the machine spent on EEVDF between the two experts (ms): old `disabled` to new
    /// `enabled`. Absent when either side is EEVDF.
    pub eevdf_gap_ms: Option<f64>,
    /// The whole switch (ms).
    pub total_ms: f64,
    /// `root/ops` after the switch.
    pub ops: Option<String>,
    /// `enable_seq` after the switch.
    pub enable_seq: u64,
    /// When the switch finished (ms since the epoch).
    pub at_unix_ms: u64,
    /// True when nothing had to change.
    pub no_op: bool,
    /// True when the new expert was a hot standby, loaded beforehand and held at its gate
    /// (`prepare_ms` is then how long the switch waited for it, `start_ms` gate release to
    /// `state=enabled`).
    #[serde(default)]
    pub standby: bool,
}

impl SwitchReport {
    /// `bpfland -> lavd in 1234 ms (EEVDF gap 56 ms)` (gap `-` when nothing ran before).
    pub fn summary(&self) -> String {
        format!(
            "{} -> {} in {:.0} ms (EEVDF gap {})",
            self.from,
            self.to,
            self.total_ms,
            self.eevdf_gap_ms
                .map(|g| format!("{g:.0} ms"))
                .unwrap_or_else(|| "-".into())
        )
    }
}

/// Why a switch did not happen.
#[derive(Debug, thiserror::Error)]
pub enum SwitchError {
    /// Rejected before anything was touched: the running scheduler is unchanged.
    #[error("{cause:#} (nothing was changed: {active} is still running)")]
    Rejected {
        /// What was wrong.
        cause: anyhow::Error,
        /// The scheduler that keeps running.
        active: String,
    },
    /// The target expert did not come up; `active` says what runs now.
    #[error("switch to {target} failed: {cause:#}; {recovery}")]
    Failed {
        /// The expert that was asked for.
        target: String,
        /// What went wrong.
        cause: anyhow::Error,
        /// The scheduler running after the failure.
        active: String,
        /// What was done about it, for humans.
        recovery: String,
    },
}

impl SwitchError {
    /// The scheduler the machine runs after this error.
    pub fn active(&self) -> &str {
        match self {
            Self::Rejected { active, .. } | Self::Failed { active, .. } => active,
        }
    }
}

/// Something the supervisor noticed between switches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SupervisorEvent {
    /// The expert process ended on its own (crash, kill, exit); the machine is on EEVDF.
    ExpertExited {
        /// The expert that ended.
        expert: String,
        /// How it ended.
        status: String,
        /// Last lines it printed.
        output_tail: Vec<String>,
    },
    /// The kernel detached the expert while its process lives (watchdog, error exit).
    Ejected {
        /// The expert that was detached.
        expert: String,
        /// The kernel state seen.
        state: ScxState,
    },
    /// An ejected expert attached itself again (the scx schedulers restart after some errors).
    Reattached {
        /// The expert.
        expert: String,
        /// The new `enable_seq`.
        enable_seq: u64,
    },
    /// A hot standby ended or is no longer held at its gate: it was discarded (never attached)
    /// and will be started again while it is wanted.
    StandbyLost {
        /// The expert.
        expert: String,
        /// Its PID.
        pid: u32,
        /// What happened to it.
        status: String,
        /// True when it had reached the gate.
        parked: bool,
        /// Last lines it printed.
        output_tail: Vec<String>,
    },
}

impl std::fmt::Display for SupervisorEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ExpertExited { expert, status, .. } => {
                write!(
                    f,
                    "expert {expert} ended ({status}); the machine is on EEVDF"
                )
            }
            Self::Ejected { expert, state } => write!(
                f,
                "the kernel detached {expert} (state {state}); the machine is on EEVDF"
            ),
            Self::Reattached { expert, enable_seq } => {
                write!(
                    f,
                    "{expert} attached itself again (enable_seq {enable_seq})"
                )
            }
            Self::StandbyLost {
                expert,
                pid: 0,
                status,
                ..
            } => write!(
                f,
                "standby {expert} was not started ({status}); it is tried again while wanted"
            ),
            Self::StandbyLost {
                expert,
                pid,
                status,
                parked,
                ..
            } => write!(
                f,
                "standby {expert} (pid {pid}, {}) was lost ({status}); discarded, never attached; it is started again while wanted",
                if *parked { "parked" } else { "loading" }
            ),
        }
    }
}

/// An expert process this supervisor started.
struct RunningExpert {
    expert: Expert,
    binary: PathBuf,
    child: Child,
    /// A pidfd on `child`, opened right after spawn (before it could be reaped); every signal
    /// goes through it. None without pidfd support (Linux < 5.3).
    pidfd: Option<OwnedFd>,
    output: Arc<Mutex<VecDeque<String>>>,
    /// `enable_seq` when it last attached.
    enable_seq: u64,
    /// True while the kernel has detached it but its process lives.
    ejected: bool,
    /// Its attach gate (open), if it was started behind one.
    #[allow(dead_code)]
    gate: Option<AttachGate>,
}

impl RunningExpert {
    /// Send `signal` to the expert's process, never to a pid it no longer owns (see
    /// [`signal_child`]). Ok(false): it was already gone.
    fn signal(&mut self, signal: Signal) -> std::io::Result<bool> {
        signal_child(&mut self.child, self.pidfd.as_ref(), signal)
    }

    /// SIGKILL the process (if it still runs) and reap it.
    fn kill_and_reap(&mut self) {
        if let Err(e) = self.signal(Signal::SIGKILL) {
            warn!(
                "killing {} (pid {}): {e}",
                self.expert.name,
                self.child.id()
            );
        }
        let _ = self.child.wait();
    }

    fn output_tail(&self, lines: usize) -> Vec<String> {
        let out = self.output.lock().unwrap();
        out.iter()
            .skip(out.len().saturating_sub(lines))
            .cloned()
            .collect()
    }

    /// The last lines, for an error message.
    fn output_for_error(&self) -> String {
        let tail = self.output_tail(12);
        if tail.iter().all(|l| l.trim().is_empty()) {
            " (it printed nothing)".to_owned()
        } else {
            format!("; its last output:\n  {}", tail.join("\n  "))
        }
    }

    /// True while the process is exiting (PF_EXITING): the kernel may already be detaching
    /// its scheduler before the process can be reaped.
    fn exiting(&self) -> bool {
        const PF_EXITING: u64 = 0x4;
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())) else {
            return true;
        };
        // Fields after the command name: state is the 1st, flags the 7th.
        let flags = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(6))
            .and_then(|f| f.parse::<u64>().ok());
        matches!(
            stat.rsplit_once(')')
                .and_then(|(_, r)| r.split_whitespace().next()),
            Some("Z" | "X")
        ) || flags.is_some_and(|f| f & PF_EXITING != 0)
    }
}

/// An expert process on its way to attaching.
struct Starting {
    running: Option<RunningExpert>,
    gate: Option<AttachGate>,
    spawned_at: Instant,
    seq_before: u64,
    timeout: Duration,
}

impl Drop for Starting {
    /// An expert that never finished starting must not linger (or stay blocked in the gate).
    fn drop(&mut self) {
        if let Some(mut r) = self.running.take() {
            r.kill_and_reap();
        }
    }
}

/// A hot standby: an expert started ahead of need behind its attach gate.
struct Standby {
    starting: Starting,
    since: SystemTime,
    /// How long it took to reach the gate, once it did.
    loaded_in: Option<Duration>,
}

impl Standby {
    fn name(&self) -> &str {
        &self.running().expert.name
    }

    fn running(&self) -> &RunningExpert {
        self.starting
            .running
            .as_ref()
            .expect("a standby has a process")
    }

    fn gate(&self) -> &AttachGate {
        self.starting.gate.as_ref().expect("a standby has a gate")
    }

    fn pid(&self) -> u32 {
        self.running().child.id()
    }
}

/// Where a hot standby is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StandbyState {
    /// Started, loading and verifying its BPF programs.
    Loading,
    /// Loaded and held at its attach gate: a switch to it only releases the gate.
    Parked,
}

impl std::fmt::Display for StandbyState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Loading => "loading",
            Self::Parked => "parked",
        })
    }
}

/// One hot standby, for `asa status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StandbyInfo {
    /// Catalogue name.
    pub expert: String,
    /// Its process.
    pub pid: u32,
    /// When it was started (ms since the epoch).
    pub since_unix_ms: u64,
    /// Loading or parked.
    pub state: StandbyState,
    /// Process start to parked at the gate (ms), once parked.
    pub load_ms: Option<f64>,
    /// Resident memory (`VmRSS` of /proc/PID/status, KiB), when readable.
    pub rss_kib: Option<u64>,
    /// Kernel memory of its BPF maps and programs (the `memlock` of each bpf-map and bpf-prog
    /// descriptor it holds, /proc/PID/fdinfo; KiB): not in its RSS, and for rusty ten times
    /// larger (80 MiB of vmalloc'ed maps in the lab).
    #[serde(default)]
    pub bpf_kib: Option<u64>,
}

impl StandbyInfo {
    /// What it costs in memory: resident plus BPF kernel memory (KiB), when known.
    pub fn memory_kib(&self) -> Option<u64> {
        match (self.rss_kib, self.bpf_kib) {
            (None, None) => None,
            (r, b) => Some(r.unwrap_or(0) + b.unwrap_or(0)),
        }
    }
}

/// Resident memory of a process (`VmRSS` in /proc/PID/status), in KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// Kernel memory of the BPF maps and programs `pid` holds open (sum of the `memlock:` lines
/// of its bpf-map and bpf-prog descriptors in /proc/PID/fdinfo), in KiB.
pub fn bpf_memlock_kib(pid: u32) -> Option<u64> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    let mut bytes = 0u64;
    for entry in dir.flatten() {
        let Ok(target) = std::fs::read_link(entry.path()) else {
            continue;
        };
        let target = target.to_string_lossy();
        if target != "anon_inode:bpf-map" && target != "anon_inode:bpf-prog" {
            continue;
        }
        let info = format!("/proc/{pid}/fdinfo/{}", entry.file_name().to_string_lossy());
        if let Ok(text) = std::fs::read_to_string(info) {
            bytes += text
                .lines()
                .find_map(|l| l.strip_prefix("memlock:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    Some(bytes / 1024)
}

/// Set the nice value of every thread of `pid` (a nice value is per thread on Linux, and an
/// expert may have started threads at its old priority). Best effort.
fn renice_process(pid: u32, nice: i32) {
    let tids: Vec<libc::id_t> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_else(|_| vec![pid as libc::id_t]);
    for tid in tids {
        // SAFETY: plain integers.
        let _ = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, nice) };
    }
}

/// How long a lost standby's exit status is waited for before it is described by why it was
/// found lost.
const LOST_STANDBY_REAP_WAIT: Duration = Duration::from_millis(250);

/// How long to wait before starting a standby again after it was lost `failures` times in a
/// row: at once the first time, then 5 s doubling up to 2 min (an expert that cannot load must
/// not be restarted in a tight loop).
pub fn standby_retry_delay(failures: u32) -> Duration {
    match failures {
        0 | 1 => Duration::ZERO,
        n => Duration::from_secs((5u64 << (n - 2).min(5)).min(120)),
    }
}

/// How an expert process is started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Launch {
    /// Attaches as soon as it can (the machine is on EEVDF).
    Now,
    /// Behind the attach gate, at the experts' priority, for the switch in progress.
    Gated,
    /// Behind the attach gate at the standby priority, for a later switch.
    Standby,
}

/// Durations of a switch's steps.
#[derive(Debug, Default, Clone, Copy)]
struct Timings {
    prepare: Option<Duration>,
    stop: Option<Duration>,
    start: Option<Duration>,
    gap: Option<Duration>,
}

/// What the supervisor believes is running, and since when.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Active {
    /// Catalogue name of the running expert (`eevdf` when none).
    pub expert: String,
    /// Since when (ms since the epoch).
    pub since_unix_ms: u64,
    /// PID of the expert process.
    pub pid: Option<u32>,
}

/// Starts, stops and watches experts. See the module documentation.
pub struct Supervisor {
    catalogue: Catalogue,
    scx: SchedExt,
    config: SupervisorConfig,
    running: Option<RunningExpert>,
    active: Active,
    verified: HashSet<PathBuf>,
    /// Hot standbys, in the order they were started.
    standby: Vec<Standby>,
    /// The standbys wanted, most wanted first (see [`Supervisor::set_standby`]).
    standby_wanted: Vec<String>,
    /// Per expert: standbys lost in a row, and when it may be started again.
    standby_failures: std::collections::HashMap<String, (u32, Instant)>,
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
            standby: Vec::new(),
            standby_wanted: Vec::new(),
            standby_failures: std::collections::HashMap::new(),
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
    /// runnable. Returns the expert and its binary (none for EEVDF).
    pub fn preflight(&mut self, name: &str) -> Result<(Expert, Option<PathBuf>)> {
        let expert = self.catalogue.require(name)?.clone();
        if expert.is_kernel_default() {
            return Ok((expert, None));
        }
        let binary = locate_binary(&expert)?;
        if !self.verified.contains(&binary) {
            check_runs(&binary).with_context(|| format!("expert {name} cannot run"))?;
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
            if let Some(sb) = self.take_standby(&expert.name) {
                match self.promote(sb) {
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
                let active = self.active.expert.clone();
                self.standby.retain(|s| s.name() != active);
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
        let gated = launch != Launch::Now;
        let seq_before = self.scx.enable_seq()?;
        let timeout = expert
            .enable_timeout_s
            .map(Duration::from_secs)
            .unwrap_or(self.config.enable_timeout);
        let mut cmd = Command::new(binary);
        cmd.args(&expert.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Own process group: a terminal's Ctrl-C reaches the agent, which stops the expert
            // in order, instead of racing it.
            .process_group(0);
        // The gated child hands its seccomp listener over before exec and keeps none.
        let handoff = if gated {
            Some(ListenerHandoff::new()?)
        } else {
            None
        };
        let handoff_fd = handoff.as_ref().map(ListenerHandoff::child_end);
        let (nice, death_signal) = match launch {
            Launch::Standby => (self.config.standby_nice, libc::SIGKILL),
            _ => (self.config.expert_nice, libc::SIGINT),
        };
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if nice != 0 {
                    // Best effort: without CAP_SYS_NICE the expert keeps the agent's priority.
                    let _ = libc::setpriority(libc::PRIO_PROCESS, 0, nice);
                }
                // If the agent dies, the expert gets SIGINT and detaches: no orphaned scheduler.
                // A standby gets SIGKILL: SIGINT would restart its held open past the gate
                // (the kernel detaches a killed scheduler too).
                if libc::prctl(libc::PR_SET_PDEATHSIG, death_signal) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if let Some(fd) = handoff_fd {
                    attach_gate::install_in_child(fd)?;
                }
                Ok(())
            });
        }
        let spawned_at = Instant::now();
        let mut child = spawn_from_lasting_thread(cmd)
            .with_context(|| format!("starting {}", binary.display()))?;
        // Before anything could reap it: the pidfd names this process and no other.
        let pidfd = open_pidfd(&child);
        let gate = match handoff {
            Some(handoff) => match handoff
                .receive()
                .and_then(|l| AttachGate::start(l, child.id(), GatePolicy::default()))
            {
                Ok(g) => Some(g),
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(e.context("the attach gate could not take the listener"));
                }
            },
            None => None,
        };
        let output = Arc::new(Mutex::new(VecDeque::new()));
        spawn_reader(&expert.name, child.stdout.take(), output.clone());
        spawn_reader(&expert.name, child.stderr.take(), output.clone());
        info!(
            "started {} (pid {}){}",
            expert.name,
            child.id(),
            match launch {
                Launch::Standby => ", a hot standby loading at low priority behind its attach gate",
                Launch::Gated => ", loading it behind the attach gate",
                Launch::Now => ", waiting for sched_ext to enable it",
            }
        );
        Ok(Starting {
            running: Some(RunningExpert {
                expert: expert.clone(),
                binary: binary.to_owned(),
                child,
                pidfd,
                output,
                enable_seq: seq_before,
                ejected: false,
                gate: None,
            }),
            gate,
            spawned_at,
            seq_before,
            timeout,
        })
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
        self.wait_at_gate(starting).map(Some)
    }

    /// Wait until a gated expert waits at its gate (or fails, or times out: then it is killed).
    fn wait_at_gate(&self, mut starting: Starting) -> Result<Starting> {
        let expert = starting
            .running
            .as_ref()
            .expect("not finished")
            .expert
            .clone();
        loop {
            let gate = starting.gate.as_ref().expect("gated start has a gate");
            let reached = gate.wait_reached(Duration::from_millis(50));
            let running = starting.running.as_mut().expect("not finished");
            match reached {
                Ok(true) => return Ok(starting),
                Ok(false) if starting.spawned_at.elapsed() > starting.timeout => {
                    let tail = running.output_for_error();
                    bail!(
                        "{} did not attach within {:?} (it never finished loading); killed it{tail}",
                        expert.name,
                        starting.timeout
                    );
                }
                Ok(false) => {}
                // The gate thread ended: the process is going away; reap it below.
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
            if let Some(status) = running.child.try_wait()? {
                std::thread::sleep(Duration::from_millis(50));
                bail!(
                    "{} exited before it attached ({}){}",
                    expert.name,
                    describe_status(status),
                    running.output_for_error()
                );
            }
        }
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
        self.standby_wanted.clear();
        self.standby.clear();
        self.stop_running().map(|_| ())
    }

    /// The hot standbys wanted, most wanted first (the caller bounds how many). Unwanted ones
    /// are stopped and missing ones started, one at a time, by [`Self::check_standby`]; the
    /// active expert and EEVDF never stand by.
    pub fn set_standby(&mut self, wanted: &[String]) {
        if self.standby_wanted != wanted {
            info!("hot standbys wanted: [{}]", wanted.join(", "));
            self.standby_wanted = wanted.to_vec();
        }
    }

    /// The standbys wanted (as last set).
    pub fn standby_wanted(&self) -> &[String] {
        &self.standby_wanted
    }

    /// The hot standbys now; with their resident memory when `with_rss` (reads /proc).
    pub fn standby_info(&self, with_rss: bool) -> Vec<StandbyInfo> {
        self.standby
            .iter()
            .map(|s| StandbyInfo {
                expert: s.name().to_owned(),
                pid: s.pid(),
                since_unix_ms: unix_ms(s.since),
                state: if s.loaded_in.is_some() {
                    StandbyState::Parked
                } else {
                    StandbyState::Loading
                },
                load_ms: s.loaded_in.map(ms),
                rss_kib: if with_rss { rss_kib(s.pid()) } else { None },
                bpf_kib: if with_rss {
                    bpf_memlock_kib(s.pid())
                } else {
                    None
                },
            })
            .collect()
    }

    /// Take `name`'s standby out of the pool, if there is one.
    fn take_standby(&mut self, name: &str) -> Option<Standby> {
        let i = self.standby.iter().position(|s| s.name() == name)?;
        Some(self.standby.remove(i))
    }

    /// Make a standby the switch's new expert: raise it to the experts' priority and check it
    /// is alive and held at its gate (one still loading is waited for, now at full priority).
    /// A lost one is killed and reported; the switch then starts the expert afresh.
    fn promote(&mut self, mut sb: Standby) -> Result<Starting, SupervisorEvent> {
        let pid = sb.pid();
        let name = sb.name().to_owned();
        renice_process(pid, self.config.expert_nice);
        let parked = sb.loaded_in.is_some();
        let alive = matches!(
            sb.starting.running.as_mut().map(|r| r.child.try_wait()),
            Some(Ok(None))
        );
        if parked && alive && sb.gate().is_holding() {
            info!("{name} is a parked hot standby (pid {pid})");
            return Ok(sb.starting);
        }
        if !parked && alive {
            info!("{name} is a hot standby still loading (pid {pid}); waiting for it at full priority");
            let mut starting = sb.starting;
            // From now on it has a start's time limit.
            starting.timeout =
                starting.spawned_at.elapsed() + starting.timeout / STANDBY_TIMEOUT_FACTOR;
            return self.wait_at_gate(starting).map_err(|e| {
                self.note_standby_failure(&name);
                SupervisorEvent::StandbyLost {
                    expert: name,
                    pid,
                    status: format!("{e:#}"),
                    parked: false,
                    output_tail: Vec::new(),
                }
            });
        }
        Err(self.lose(sb, "no longer held at its gate".to_owned()))
    }

    /// Discard a standby (killed and reaped when dropped) and describe why.
    fn lose(&mut self, mut sb: Standby, why: String) -> SupervisorEvent {
        let pid = sb.pid();
        let name = sb.name().to_owned();
        // A killed standby's gate can let go a moment before its exit can be reaped: wait a
        // little for the exit status, which says more than "no longer held".
        let deadline = Instant::now() + LOST_STANDBY_REAP_WAIT;
        let status = loop {
            match sb.starting.running.as_mut().map(|r| r.child.try_wait()) {
                Some(Ok(Some(status))) => break describe_status(status),
                Some(Ok(None)) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                _ => break why,
            }
        };
        // Give the reader threads a moment to collect the last words.
        std::thread::sleep(Duration::from_millis(20));
        let output_tail = sb.running().output_tail(12);
        let event = SupervisorEvent::StandbyLost {
            expert: name.clone(),
            pid,
            status,
            parked: sb.loaded_in.is_some(),
            output_tail,
        };
        drop(sb);
        self.note_standby_failure(&name);
        warn!("{event}");
        event
    }

    fn note_standby_failure(&mut self, name: &str) {
        let entry = self
            .standby_failures
            .entry(name.to_owned())
            .or_insert((0, Instant::now()));
        entry.0 += 1;
        entry.1 = Instant::now() + standby_retry_delay(entry.0);
    }

    /// Look at the standbys once (non-blocking): note the ones that parked, report and discard
    /// the ones that died or are no longer held, stop unwanted ones and start the next missing
    /// one when none is loading. Returns what happened (also what a switch noticed).
    pub fn check_standby(&mut self) -> Vec<SupervisorEvent> {
        let mut events = std::mem::take(&mut self.pending_events);
        let mut i = 0;
        while i < self.standby.len() {
            let sb = &mut self.standby[i];
            let exited = match sb.starting.running.as_mut().map(|r| r.child.try_wait()) {
                Some(Ok(Some(status))) => Some(describe_status(status)),
                Some(Err(e)) => Some(format!("waiting on it: {e}")),
                _ => None,
            };
            let lost = match exited {
                Some(status) => Some(status),
                None if sb.loaded_in.is_none() => match sb.gate().wait_reached(Duration::ZERO) {
                    Ok(true) => {
                        let loaded = sb.starting.spawned_at.elapsed();
                        sb.loaded_in = Some(loaded);
                        info!(
                            "hot standby {} (pid {}) loaded in {:.0} ms; parked at its gate",
                            sb.name(),
                            sb.pid(),
                            ms(loaded)
                        );
                        let name = sb.name().to_owned();
                        self.standby_failures.remove(&name);
                        None
                    }
                    Ok(false) if sb.starting.spawned_at.elapsed() > sb.starting.timeout => Some(
                        format!("did not finish loading within {:?}", sb.starting.timeout),
                    ),
                    Ok(false) => None,
                    Err(_) => Some("exited before it reached its gate".to_owned()),
                },
                None if !sb.gate().is_holding() => Some("no longer held at its gate".to_owned()),
                None => None,
            };
            match lost {
                Some(why) => {
                    let sb = self.standby.remove(i);
                    events.push(self.lose(sb, why));
                }
                None => i += 1,
            }
        }
        let active = self.active.expert.clone();
        let wanted: Vec<String> = self
            .standby_wanted
            .iter()
            .filter(|w| **w != active)
            .cloned()
            .collect();
        let before = self.standby.len();
        self.standby
            .retain(|s| wanted.iter().any(|w| w == s.name()));
        if self.standby.len() != before {
            info!(
                "stopped {} unwanted standby(s)",
                before - self.standby.len()
            );
        }
        if self.standby.iter().all(|s| s.loaded_in.is_some()) {
            let now = Instant::now();
            let next = wanted.iter().find(|w| {
                !self.standby.iter().any(|s| s.name() == w.as_str())
                    && self
                        .standby_failures
                        .get(w.as_str())
                        .is_none_or(|(_, at)| *at <= now)
            });
            if let Some(name) = next.cloned() {
                if let Err(e) = self.start_standby(&name) {
                    warn!("could not start hot standby {name}: {e:#}");
                    self.note_standby_failure(&name);
                    events.push(SupervisorEvent::StandbyLost {
                        expert: name,
                        pid: 0,
                        status: format!("{e:#}"),
                        parked: false,
                        output_tail: Vec::new(),
                    });
                }
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
        if self.standby.iter().any(|s| s.name() == expert.name) {
            bail!("{name} already stands by");
        }
        let mut starting = self.spawn(&expert, &binary, Launch::Standby)?;
        // At nice 19 on a busy machine loading may take much longer than a start.
        starting.timeout *= STANDBY_TIMEOUT_FACTOR;
        self.standby.push(Standby {
            starting,
            since: SystemTime::now(),
            loaded_in: None,
        });
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

/// A pidfd on `child` (`pidfd_open`), or None when the kernel has none (Linux < 5.3). Open it
/// before the child is waited for: then it refers to this process even if it has exited.
fn open_pidfd(child: &Child) -> Option<OwnedFd> {
    // SAFETY: a plain syscall; the descriptor is owned below.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, child.id() as libc::pid_t, 0) };
    if fd < 0 {
        debug!(
            "pidfd_open({}): {}; signals go by pid while it is not reaped",
            child.id(),
            std::io::Error::last_os_error()
        );
        return None;
    }
    // SAFETY: a fresh descriptor nobody else owns.
    Some(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Send `signal` to `child` without ever hitting another process that reuses its pid. Through
/// `pidfd` (from [`open_pidfd`]) when there is one: a process that has exited or been reaped
/// gets nothing (`ESRCH`, Ok(false)). Without one, by pid only while `try_wait` says the child
/// has not been reaped (until its parent reaps it, the kernel gives its pid to no one).
/// Ok(true): the signal was sent.
fn signal_child(
    child: &mut Child,
    pidfd: Option<&OwnedFd>,
    signal: Signal,
) -> std::io::Result<bool> {
    let sent = match pidfd {
        Some(fd) => {
            // SAFETY: a plain syscall on a descriptor we own; no siginfo.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    fd.as_raw_fd(),
                    signal as libc::c_int,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                )
            };
            r == 0
        }
        None => {
            if child.try_wait()?.is_some() {
                return Ok(false);
            }
            // SAFETY: a plain syscall; the pid is our unreaped child's.
            unsafe { libc::kill(child.id() as libc::pid_t, signal as libc::c_int) == 0 }
        }
    };
    if sent {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::ESRCH) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// Describe how a process ended, for humans.
pub fn describe_status(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(sig)) => format!(
            "killed by {}",
            Signal::try_from(sig)
                .map(|s| s.as_str().to_owned())
                .unwrap_or_else(|_| format!("signal {sig}"))
        ),
        _ => "ended".to_owned(),
    }
}

/// A spawn request: the command and where to send the child.
type SpawnRequest = (Command, std::sync::mpsc::Sender<std::io::Result<Child>>);

/// Starts `cmd` from one thread that lives as long as the process.
///
/// `PR_SET_PDEATHSIG` (set in the expert's `pre_exec`) fires when the *thread* that forked the
/// child exits, not the process: an expert started from a short-lived thread (the mid-run
/// switch of calibration stage 2) got SIGINT and detached as soon as that thread ended. Forking
/// from this thread keeps the promise "the expert detaches when the agent dies" and nothing
/// else.
pub(crate) fn spawn_from_lasting_thread(cmd: Command) -> std::io::Result<Child> {
    use std::sync::mpsc;
    use std::sync::OnceLock;
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (requests, incoming) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("asa-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in incoming {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("starting the process spawner thread");
        Mutex::new(requests)
    });
    let (reply, child) = mpsc::channel();
    let gone = || std::io::Error::other("the process spawner thread is gone");
    spawner
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send((cmd, reply))
        .map_err(|_| gone())?;
    child.recv().map_err(|_| gone())?
}

fn spawn_reader<R: Read + Send + 'static>(
    name: &str,
    stream: Option<R>,
    sink: Arc<Mutex<VecDeque<String>>>,
) {
    let Some(stream) = stream else { return };
    let name = name.to_owned();
    std::thread::Builder::new()
        .name(format!("{name}-output"))
        .spawn(move || {
            for line in BufReader::new(stream).lines() {
                let Ok(line) = line else { break };
                debug!(target: "expert", "[{name}] {line}");
                let mut out = sink.lock().unwrap();
                if out.len() == OUTPUT_LINES_KEPT {
                    out.pop_front();
                }
                out.push_back(line);
            }
        })
        .expect("spawning an output reader thread");
}

/// Run `binary --version` to prove it can be executed (loader, shared libraries).
fn check_runs(binary: &Path) -> Result<()> {
    let mut child = Command::new(binary)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("executing {}", binary.display()))?;
    let t0 = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            if status.success() {
                return Ok(());
            }
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            return Err(anyhow!(
                "`{} --version` failed ({}): {}",
                binary.display(),
                describe_status(status),
                err.trim()
            ));
        }
        if t0.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            bail!("`{} --version` did not finish in 20 s", binary.display());
        }
        std::thread::sleep(Duration::from_millis(5));
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

    /// A lost standby is started again at once the first time, then after a delay that
    /// doubles from 5 s to at most 2 min: an expert that cannot load is not restarted in a
    /// tight loop.
    #[test]
    fn a_standby_lost_again_and_again_is_restarted_ever_more_slowly() {
        let delays: Vec<u64> = (1..=9).map(|n| standby_retry_delay(n).as_secs()).collect();
        assert_eq!(delays, [0, 5, 10, 20, 40, 80, 120, 120, 120]);
        assert_eq!(standby_retry_delay(u32::MAX), Duration::from_secs(120));
    }

    /// `VmRSS` of the test process itself is read, and a process that does not exist has none;
    /// likewise its BPF memory.
    #[test]
    fn resident_memory_comes_from_proc_status() {
        let own = rss_kib(std::process::id()).unwrap();
        assert!(own > 100, "{own} KiB");
        assert_eq!(rss_kib(u32::MAX - 1), None);
        // No BPF map or program open here: none of its memory.
        assert_eq!(bpf_memlock_kib(std::process::id()), Some(0));
        assert_eq!(bpf_memlock_kib(u32::MAX - 1), None);
    }

    /// An expert process like `Supervisor::spawn` makes one (pidfd opened right after spawn),
    /// running `sh -c script`.
    fn running_sh(script: &str) -> RunningExpert {
        let child = Command::new("/bin/sh")
            .args(["-c", script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let pidfd = open_pidfd(&child);
        assert!(pidfd.is_some(), "pidfd_open works on this kernel");
        RunningExpert {
            expert: Catalogue::builtin().require("bpfland").unwrap().clone(),
            binary: "/bin/sh".into(),
            child,
            pidfd,
            output: Arc::default(),
            enable_seq: 0,
            ejected: false,
            gate: None,
        }
    }

    /// A `sleep 30` with the pid of `reaped` (a process already reaped): the kernel is told to
    /// hand out that pid next (`/proc/sys/kernel/ns_last_pid`, root only), retried while other
    /// processes take it first.
    fn with_reused_pid(reaped: u32) -> Child {
        for _ in 0..200 {
            std::fs::write("/proc/sys/kernel/ns_last_pid", (reaped - 1).to_string())
                .expect("writing /proc/sys/kernel/ns_last_pid (the test needs root)");
            let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
            if sleeper.id() == reaped {
                return sleeper;
            }
            let _ = sleeper.kill();
            let _ = sleeper.wait();
        }
        panic!("pid {reaped} could not be handed to another process in 200 tries");
    }

    /// An expert that exited and was reaped while it was starting (what `wait_at_gate` and a
    /// lost standby do), its pid since taken by another process: dropping its `Starting`
    /// (SIGKILL, then reap) must not touch that other process. Before the pidfd it got a
    /// SIGKILL sent to the raw pid.
    #[test]
    fn a_dropped_start_whose_process_was_reaped_kills_no_one_else() {
        let mut r = running_sh("exit 0");
        assert!(r.child.wait().unwrap().success());
        let mut other = with_reused_pid(r.child.id());
        drop(Starting {
            running: Some(r),
            gate: None,
            spawned_at: Instant::now(),
            seq_before: 0,
            timeout: Duration::from_secs(1),
        });
        std::thread::sleep(Duration::from_millis(100));
        let hit = other.try_wait().unwrap();
        let _ = other.kill();
        let _ = other.wait();
        assert_eq!(hit, None, "the process that reused the pid was signalled");
    }

    /// `stop_running`'s signals (SIGINT, then SIGKILL and reap) to an expert that has already
    /// exited and been reaped, its pid since taken by another process: nothing is sent, quietly
    /// (`Ok(false)`), and the other process lives. A live expert does get them.
    #[test]
    fn signals_to_a_reaped_expert_reach_no_one_else() {
        let mut live = running_sh("sleep 30");
        assert!(
            live.signal(Signal::SIGINT).unwrap(),
            "a live expert is signalled"
        );
        assert_eq!(
            describe_status(live.child.wait().unwrap()),
            "killed by SIGINT"
        );
        // Reaped: the pidfd still names it, and it is gone.
        assert!(!live.signal(Signal::SIGINT).unwrap());
        let mut gone = running_sh("exit 0");
        assert!(gone.child.wait().unwrap().success());
        let mut other = with_reused_pid(gone.child.id());
        let sent = gone.signal(Signal::SIGINT).unwrap();
        gone.kill_and_reap();
        std::thread::sleep(Duration::from_millis(100));
        let hit = other.try_wait().unwrap();
        let _ = other.kill();
        let _ = other.wait();
        assert!(!sent, "a signal was sent for a reaped expert");
        assert_eq!(hit, None, "the process that reused the pid was signalled");
        // Without a pidfd (Linux < 5.3) the handle's own status keeps the pid out of reach.
        let mut old_kernel = running_sh("exit 0");
        old_kernel.pidfd = None;
        assert!(old_kernel.child.wait().unwrap().success());
        assert!(!old_kernel.signal(Signal::SIGKILL).unwrap());
    }

    /// A child with PR_SET_PDEATHSIG started from a thread that then exits: forked by that
    /// thread it would be killed at once; through the lasting spawner it keeps running.
    #[test]
    fn a_child_outlives_the_short_lived_thread_that_asked_for_it() {
        let start = |via_spawner: bool| {
            std::thread::spawn(move || {
                let mut cmd = Command::new("sleep");
                cmd.arg("30");
                // SAFETY: prctl is async-signal-safe.
                unsafe {
                    cmd.pre_exec(|| {
                        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        Ok(())
                    });
                }
                if via_spawner {
                    spawn_from_lasting_thread(cmd).unwrap()
                } else {
                    cmd.spawn().unwrap()
                }
            })
            .join()
            .unwrap()
        };
        let mut direct = start(false);
        let mut kept = start(true);
        std::thread::sleep(Duration::from_millis(300));
        let direct_status = direct.try_wait().unwrap();
        let kept_status = kept.try_wait().unwrap();
        let _ = kept.kill();
        let _ = kept.wait();
        let _ = direct.kill();
        let _ = direct.wait();
        assert!(
            direct_status.is_some(),
            "the control case: a child of an exited thread gets its death signal"
        );
        assert_eq!(kept_status, None, "the spawner's child was killed");
    }
}
