//! The runner: pins an expert, waits for the same preconditions in every arm
//! ([`crate::precondition`]: dirty pages written back, the scheduler in place for the hold),
//! starts the scenario's background load(s), runs the foreground probe across all phases, stops
//! the loads and records everything (raw samples included).
//!
//! Pinning goes through the small [`ExpertSwitcher`] trait so the agent can use its own action
//! path; [`SupervisorSwitcher`] implements it over `asa_experts::Supervisor`, and
//! [`CurrentSchedulerOnly`] is for machines without sched_ext (it "pins" only the scheduler
//! already running, i.e. EEVDF, and refuses every other name).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{anyhow, bail, Context, Result};
use log::{info, warn};
use serde::{Deserialize, Serialize};

use crate::catalogue::{Catalogue, ScenarioSpec, IDLE};
use crate::loads::{LoadOutput, RunningLoad};
use crate::precondition::{self, LoadStart, Machine, Preconditions, SystemMachine, Waited};
use crate::probes::ProbeOutput;
use crate::work::WorkUnit;

/// Schema name of a results file.
pub const RESULTS_SCHEMA: &str = "asa.scenario-results";
/// Schema version of the results files this build writes. Version 2: every run waited for
/// the preconditions before its load ([`RunOptions::hold`], [`RunRecord::load_start`]), and the
/// built-in catalogue scores windowed tails and ln variance (`scenarios/catalogue/scenarios.toml`).
/// A results file is scored with the catalogue stored in it, so a version 1 file still gives
/// its own scores; runs of the two versions must not be pooled or resumed into one another
/// (`asa calibrate` refuses it).
pub const RESULTS_VERSION: u32 = 2;
/// The oldest results version this build reads (version 1: no hold, no load-start records).
pub const OLDEST_RESULTS_VERSION: u32 = 1;

/// Makes the machine run one expert for the length of a run.
pub trait ExpertSwitcher {
    /// Make the kernel run `expert` (catalogue name, `eevdf` = no BPF scheduler). Returns a
    /// short description of what runs (e.g. the sched_ext ops name).
    fn pin(&mut self, expert: &str) -> Result<String>;
    /// After a run: is `expert` still the one running? A run during which the expert crashed or
    /// was ejected is kept but marked invalid.
    fn still_pinned(&mut self, expert: &str) -> Result<bool>;
    /// Return the machine to its default scheduler.
    fn release(&mut self) -> Result<()>;
    /// Since when (ms since the epoch) the scheduler the last [`ExpertSwitcher::pin`] put in
    /// place has been running: when the expert was enabled, or for EEVDF when the previous
    /// scheduler was detached. The run's hold ([`RunOptions::hold`]) counts from it. `None`
    /// (the default): the switcher cannot tell, and the hold counts from the pin's return.
    fn scheduler_since(&self) -> Option<u64> {
        None
    }
    /// The preconditions are met and the run's first load starts now (after
    /// [`ExpertSwitcher::pin`]; e.g. a switcher that switches again mid-run times it from
    /// here). Does nothing by default.
    fn load_starting(&mut self) {}
}

/// A switcher over the expert supervisor (the real action path).
pub struct SupervisorSwitcher {
    supervisor: asa_experts::Supervisor,
}

impl SupervisorSwitcher {
    /// Wrap a supervisor.
    pub fn new(supervisor: asa_experts::Supervisor) -> Self {
        Self { supervisor }
    }

    /// A supervisor on this machine with the built-in catalogue and default timeouts.
    pub fn system() -> Result<Self> {
        Self::system_with(asa_experts::Catalogue::builtin())
    }

    /// A supervisor on this machine with the experts of `catalogue` (e.g. `asa --catalogue`)
    /// and default timeouts.
    pub fn system_with(catalogue: asa_experts::Catalogue) -> Result<Self> {
        let supervisor = asa_experts::Supervisor::new(
            catalogue,
            asa_experts::SchedExt::system()?,
            asa_experts::SupervisorConfig::default().with_env()?,
        )?;
        Ok(Self::new(supervisor))
    }
}

impl ExpertSwitcher for SupervisorSwitcher {
    fn pin(&mut self, expert: &str) -> Result<String> {
        let report = self
            .supervisor
            .switch_to(expert)
            .map_err(|e| anyhow!("pinning {expert}: {e}"))?;
        Ok(report.ops.unwrap_or_else(|| report.to.clone()))
    }

    fn still_pinned(&mut self, expert: &str) -> Result<bool> {
        if let Some(event) = self.supervisor.check() {
            warn!("during the run: {event}");
        }
        Ok(self.supervisor.active().expert == expert && self.supervisor.healthy())
    }

    fn release(&mut self) -> Result<()> {
        self.supervisor.stop()
    }

    /// The supervisor's `active` since: set when the expert reported `enabled`, or (EEVDF)
    /// when the previous expert was stopped or the supervisor started.
    fn scheduler_since(&self) -> Option<u64> {
        Some(self.supervisor.active().since_unix_ms)
    }
}

/// A switcher for machines without sched_ext: only the running scheduler can be "pinned".
#[derive(Debug, Clone)]
pub struct CurrentSchedulerOnly {
    /// Name of the scheduler that runs (normally `eevdf`).
    pub current: String,
}

impl CurrentSchedulerOnly {
    /// The kernel's default scheduler (`eevdf`), checked: when a sched_ext scheduler is
    /// attached, the running scheduler is not EEVDF and this is an error.
    pub fn eevdf() -> Result<Self> {
        let state = std::fs::read_to_string("/sys/kernel/sched_ext/state").unwrap_or_default();
        if state.trim() == "enabled" {
            bail!("a sched_ext scheduler is attached: the current scheduler is not EEVDF");
        }
        Ok(Self {
            current: asa_experts::EEVDF.to_owned(),
        })
    }
}

impl ExpertSwitcher for CurrentSchedulerOnly {
    fn pin(&mut self, expert: &str) -> Result<String> {
        if expert != self.current {
            bail!(
                "cannot pin `{expert}`: this machine runs only `{}` (no sched_ext; use the lab VM \
                 or a kernel with CONFIG_SCHED_CLASS_EXT)",
                self.current
            );
        }
        Ok(self.current.clone())
    }

    fn still_pinned(&mut self, expert: &str) -> Result<bool> {
        Ok(expert == self.current)
    }

    fn release(&mut self) -> Result<()> {
        Ok(())
    }

    /// Nothing switches here: the scheduler has run since the machine booted.
    fn scheduler_since(&self) -> Option<u64> {
        boot_unix_ms(&std::fs::read_to_string("/proc/stat").ok()?)
    }
}

/// Where the kernel publishes its boot id, a random UUID drawn at every boot.
pub const BOOT_ID_PATH: &str = "/proc/sys/kernel/random/boot_id";

/// This boot's id ([`BOOT_ID_PATH`]); `None` when it cannot be read (no procfs, another OS).
pub fn boot_id() -> Option<String> {
    parse_boot_id(&std::fs::read_to_string(BOOT_ID_PATH).ok()?)
}

/// The boot id in the text of [`BOOT_ID_PATH`] (trimmed; `None` when empty).
fn parse_boot_id(text: &str) -> Option<String> {
    Some(text.trim())
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
}

/// When the machine booted (ms since the epoch), from /proc/stat's `btime`.
fn boot_unix_ms(proc_stat: &str) -> Option<u64> {
    proc_stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|s| s * 1000)
}

/// How to run scenarios.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunOptions {
    /// Experts to compare, in order (`eevdf` should be among them for relative scores).
    pub experts: Vec<String>,
    /// Repetitions of each (scenario, expert) pair; experts are interleaved per repetition.
    pub reps: u32,
    /// Where [`run_scenario`] starts in `experts`: repetition `rep` of a scenario runs them
    /// rotated left by `rotation + rep`, so no expert is always first after a scenario's
    /// set-up (cold caches, a fresh work disk) or always last. The calibration passes the
    /// scenario's index. Not saved with the results (each run records its own start time).
    #[serde(skip)]
    pub rotation: usize,
    /// Probe duration, split over the phases.
    pub duration: Duration,
    /// Shortest phase: a scenario whose phases would be shorter at [`RunOptions::duration`]
    /// runs longer, so its shortest phase lasts this long (0: every scenario runs `duration`).
    #[serde(default)]
    pub min_phase: Duration,
    /// Time the first load runs before the probe starts.
    pub settle: Duration,
    /// How long the scheduler under test must have run before a run's first load starts
    /// (counted from [`ExpertSwitcher::scheduler_since`]); before that wait the runner syncs and
    /// waits for the dirty pages ([`crate::precondition`]). 0: no such step, the load starts
    /// right after the pin (results written before the step have 0).
    #[serde(default)]
    pub hold: Duration,
    /// Most `Dirty + Writeback` (KiB) at a run's first load start, waited for (up to
    /// [`precondition::DISK_QUIET_TIMEOUT`]) when [`RunOptions::hold`] is not 0.
    #[serde(default)]
    pub dirty_limit_kib: u64,
    /// Pause after each run (loads stopped), so one run's tail does not leak into the next.
    #[serde(default)]
    pub cooldown: Duration,
    /// Folder for load inputs (corpora, sources); reused across runs.
    pub work_dir: PathBuf,
    /// Calibrated work unit shared by every run.
    pub work_unit: WorkUnit,
}

impl RunOptions {
    /// The preconditions of a run's first load start.
    pub fn preconditions(&self) -> Preconditions {
        Preconditions {
            hold: self.hold,
            dirty_limit_kib: self.dirty_limit_kib,
            disk_timeout: precondition::DISK_QUIET_TIMEOUT,
        }
    }
}

/// The background of one phase in one run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PhaseRecord {
    /// Load name or `idle`.
    pub load: String,
    /// Planned phase length (s).
    pub planned_s: f64,
    /// What the load did (absent when idle).
    pub output: Option<LoadOutput>,
    /// When the phase began (ms since the epoch): its load was started (for the first phase,
    /// before the settle time) or, for an idle phase, the previous phase had ended. 0 in
    /// results written before phase times were recorded.
    #[serde(default)]
    pub started_unix_ms: u64,
    /// When the phase ended: its load had stopped (after reporting), or the idle time was over.
    #[serde(default)]
    pub ended_unix_ms: u64,
    /// The load's application class (its `app_class`; None when idle or in older results).
    #[serde(default)]
    pub app_class: Option<String>,
}

impl PhaseRecord {
    /// The workload class of this phase while `probe` runs in the foreground:
    /// `<probe>+<load>` (`<probe>+idle` without a load), as in `mapping/default.toml`.
    pub fn class(&self, probe: &str) -> String {
        workload_class(probe, &self.load)
    }
}

/// The workload class of a probe in front of a load: `<probe>+<load>` (the classifier's label
/// and the mapping table's key).
pub fn workload_class(probe: &str, load: &str) -> String {
    format!("{probe}+{load}")
}

/// One run: one expert, one repetition of one scenario.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    /// Expert name.
    pub expert: String,
    /// Repetition index (0-based).
    pub rep: u32,
    /// What the switcher said runs.
    pub pinned: String,
    /// When the run started (ms since the epoch).
    pub started_unix_ms: u64,
    /// When the foreground probe started, after the settle time (0 in older results).
    #[serde(default)]
    pub probe_started_unix_ms: u64,
    /// When the foreground probe ended (start + its measured length; 0 in older results).
    #[serde(default)]
    pub probe_ended_unix_ms: u64,
    /// The probe's measurements.
    pub probe: ProbeOutput,
    /// The background phases.
    pub phases: Vec<PhaseRecord>,
    /// False when the expert stopped running during the run (crash, ejection).
    pub valid: bool,
    /// The machine when the first load started (the scheduler's age, the quiet time, the dirty
    /// pages) and what the runner waited for it; `None` in results written before it was
    /// recorded.
    #[serde(default)]
    pub load_start: Option<LoadStart>,
    /// The process whose threads ran the probe: the runner itself (0 in older results).
    #[serde(default)]
    pub probe_tgid: u32,
    /// The probe's application class (its `app_class`; empty in older results).
    #[serde(default)]
    pub probe_app_class: String,
    /// The kernel's boot id when the run was made (`/proc/sys/kernel/random/boot_id`,
    /// [`boot_id`]): runs with the same id ran in one boot, and a results file resumed after
    /// a reboot holds runs of two. `None`: unknown (not readable, or results written before
    /// it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
}

/// A run that did not happen because its expert could not be pinned.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SkippedRun {
    /// Expert.
    pub expert: String,
    /// Repetition.
    pub rep: u32,
    /// The switcher's error.
    pub reason: String,
}

/// Every run of one scenario.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScenarioResult {
    /// Scenario name.
    pub scenario: String,
    /// Scenario title.
    pub title: String,
    /// Probe profile name.
    pub probe: String,
    /// The runs.
    pub runs: Vec<RunRecord>,
    /// Why the scenario could not run (tools missing, ...), when it could not.
    pub error: Option<String>,
    /// Runs that did not happen because the expert could not be pinned.
    #[serde(default)]
    pub skipped: Vec<SkippedRun>,
}

/// Where a result set was measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MachineInfo {
    /// Host name.
    pub hostname: String,
    /// `uname -r`.
    pub kernel: String,
    /// CPUs available.
    pub cpus: usize,
    /// CPU model from /proc/cpuinfo.
    pub cpu_model: String,
    /// MemTotal in MiB (0 in results written before it was recorded).
    #[serde(default)]
    pub memory_mib: u64,
    /// Whether SMT is active (/sys/devices/system/cpu/smt/active).
    #[serde(default)]
    pub smt: bool,
}

impl MachineInfo {
    /// Describe this machine.
    pub fn current() -> Self {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .unwrap_or_default()
                .trim()
                .to_owned()
        };
        let cpu_model = read("/proc/cpuinfo")
            .lines()
            .find_map(|l| {
                l.strip_prefix("model name")
                    .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
            })
            .unwrap_or_default();
        let memory_mib = read("/proc/meminfo")
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .map(|kib| kib / 1024)
            .unwrap_or(0);
        Self {
            hostname: read("/proc/sys/kernel/hostname"),
            kernel: read("/proc/sys/kernel/osrelease"),
            cpus: crate::loads::cpus(),
            cpu_model,
            memory_mib,
            smt: read("/sys/devices/system/cpu/smt/active") == "1",
        }
    }
}

/// A results file: every scenario of one `run` invocation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResultSet {
    /// Always [`RESULTS_SCHEMA`].
    pub schema: String,
    /// [`RESULTS_VERSION`] when written by this build; [`OLDEST_RESULTS_VERSION`] or later
    /// when read.
    pub version: u32,
    /// When the run started (ms since the epoch).
    pub created_unix_ms: u64,
    /// Where it ran.
    pub machine: MachineInfo,
    /// The options used.
    pub options: RunOptions,
    /// The scenario file's scenarios and their scoring, as used (so a report can be rebuilt).
    pub catalogue_toml: String,
    /// Results per scenario.
    pub scenarios: Vec<ScenarioResult>,
}

impl ResultSet {
    /// An empty result set for these options.
    pub fn new(options: RunOptions, catalogue_toml: String) -> Self {
        Self {
            schema: RESULTS_SCHEMA.to_owned(),
            version: RESULTS_VERSION,
            created_unix_ms: asa_experts::supervisor::unix_ms(SystemTime::now()),
            machine: MachineInfo::current(),
            options,
            catalogue_toml,
            scenarios: Vec::new(),
        }
    }

    /// Read a results file, checking schema and version ([`OLDEST_RESULTS_VERSION`] to
    /// [`RESULTS_VERSION`]; the set keeps the version it was written with).
    pub fn load(path: &std::path::Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading results {}", path.display()))?;
        let value: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
        let schema = value.get("schema").and_then(|v| v.as_str()).unwrap_or("");
        let version = value.get("version").and_then(|v| v.as_u64()).unwrap_or(0);
        let known = u64::from(OLDEST_RESULTS_VERSION)..=u64::from(RESULTS_VERSION);
        if schema != RESULTS_SCHEMA || !known.contains(&version) {
            bail!(
                "{}: schema {schema:?} version {version}, expected {RESULTS_SCHEMA:?} version \
                 {OLDEST_RESULTS_VERSION} to {RESULTS_VERSION}",
                path.display()
            );
        }
        serde_json::from_value(value)
            .with_context(|| format!("{}: malformed results", path.display()))
    }

    /// Write as pretty JSON (atomically: temporary file + rename).
    pub fn save(&self, path: &std::path::Path) -> Result<()> {
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(self)?)
            .with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))
    }
}

/// Check every tool and prepare every input of a scenario's loads.
pub fn prepare_scenario(
    catalogue: &Catalogue,
    scenario: &ScenarioSpec,
    work_dir: &std::path::Path,
) -> Result<()> {
    for phase in scenario.phases() {
        if phase.load == IDLE {
            continue;
        }
        let spec = &catalogue.loads[&phase.load];
        spec.check_tools(&phase.load)?;
        spec.prepare(&phase.load, &work_dir.join(&phase.load))
            .with_context(|| format!("preparing load `{}`", phase.load))?;
    }
    Ok(())
}

/// One application of a run with its label: the probe (this process's group) or a running
/// load's process group, with its `app_class` from the scenario file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelledApp {
    /// The process group.
    pub pgid: u32,
    /// Its application class (scenarios.toml `app_class`).
    pub class: String,
}

/// Watches runs as they happen, e.g. to record perception features alongside each run
/// ([`crate::dataset::FeatureRecorder`]).
pub trait RunObserver {
    /// The expert is pinned and the run's first load is about to start.
    fn run_starting(&mut self, scenario: &ScenarioSpec, expert: &str, rep: u32) -> Result<()>;
    /// The run's applications changed: a phase's load started (none when it is idle). `apps`
    /// are the probe and the running load's process groups, each with its label. An error
    /// fails the run.
    fn applications(&mut self, _apps: &[LabelledApp]) -> Result<()> {
        Ok(())
    }
    /// The run is over (loads stopped, probe joined); `record` is `None` when it failed.
    /// Called once for every successful `run_starting`.
    fn run_finished(&mut self, scenario: &ScenarioSpec, record: Option<&RunRecord>) -> Result<()>;
}

/// Two observers, each told everything, in order.
pub struct BothObservers<'a>(pub &'a mut dyn RunObserver, pub &'a mut dyn RunObserver);

impl RunObserver for BothObservers<'_> {
    fn run_starting(&mut self, scenario: &ScenarioSpec, expert: &str, rep: u32) -> Result<()> {
        self.0.run_starting(scenario, expert, rep)?;
        self.1.run_starting(scenario, expert, rep)
    }
    fn applications(&mut self, apps: &[LabelledApp]) -> Result<()> {
        self.0.applications(apps)?;
        self.1.applications(apps)
    }
    fn run_finished(&mut self, scenario: &ScenarioSpec, record: Option<&RunRecord>) -> Result<()> {
        // Both hear of the end, whatever the first says.
        let first = self.0.run_finished(scenario, record);
        let second = self.1.run_finished(scenario, record);
        first.and(second)
    }
}

/// An observer that does nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoObserver;

impl RunObserver for NoObserver {
    fn run_starting(&mut self, _: &ScenarioSpec, _: &str, _: u32) -> Result<()> {
        Ok(())
    }
    fn run_finished(&mut self, _: &ScenarioSpec, _: Option<&RunRecord>) -> Result<()> {
        Ok(())
    }
}

/// What became of one (scenario, expert, repetition).
#[derive(Debug, Clone)]
pub enum RunOutcome {
    /// The run happened (it may still be marked invalid).
    Ran(Box<RunRecord>),
    /// The expert could not be pinned.
    Skipped(SkippedRun),
}

/// How long a scenario's probe runs: [`RunOptions::duration`], or longer when its shortest
/// phase would be shorter than [`RunOptions::min_phase`].
pub fn scenario_duration(opts: &RunOptions, phases: &[crate::catalogue::PhaseSpec]) -> Duration {
    let total: f64 = phases.iter().map(|p| p.share).sum();
    let shortest = phases.iter().map(|p| p.share).fold(f64::INFINITY, f64::min);
    if opts.min_phase.is_zero() || !(shortest > 0.0 && total > 0.0) {
        return opts.duration;
    }
    opts.duration.max(opts.min_phase.mul_f64(total / shortest))
}

/// Run one scenario for every expert and repetition in `opts`.
pub fn run_scenario(
    catalogue: &Catalogue,
    scenario: &ScenarioSpec,
    switcher: &mut dyn ExpertSwitcher,
    opts: &RunOptions,
) -> Result<ScenarioResult> {
    run_scenario_observed(catalogue, scenario, switcher, opts, &mut NoObserver)
}

/// The probe runs in this process, so this process must be an application of its own, as one a
/// shell or a desktop starts is: started by the kernel's init outside any process group (the lab
/// guest's script), it would share process group 0 with the kernel threads, which per-application
/// perception leaves out. Then it leads a group of its own; under a shell's job control (any
/// other group) nothing changes, so Ctrl-C still reaches it.
pub fn lead_a_process_group_if_in_none() {
    // SAFETY: getpgrp and setpgid(0, 0) act on this process only.
    unsafe {
        if libc::getpgrp() == 0 && libc::setpgid(0, 0) != 0 {
            warn!(
                "this process is in process group 0 and could not lead its own: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

/// [`run_scenario`] with an observer told about every run.
pub fn run_scenario_observed(
    catalogue: &Catalogue,
    scenario: &ScenarioSpec,
    switcher: &mut dyn ExpertSwitcher,
    opts: &RunOptions,
    observer: &mut dyn RunObserver,
) -> Result<ScenarioResult> {
    prepare_scenario(catalogue, scenario, &opts.work_dir)?;
    lead_a_process_group_if_in_none();
    let mut result = ScenarioResult {
        scenario: scenario.name.clone(),
        title: scenario.title.clone(),
        probe: scenario.probe.clone(),
        runs: Vec::new(),
        error: None,
        skipped: Vec::new(),
    };
    let total = opts.reps as usize * opts.experts.len();
    for rep in 0..opts.reps {
        for expert in run_order(&opts.experts, opts.rotation + rep as usize) {
            let index = result.runs.len() + result.skipped.len() + 1;
            info!("[{}] run {index}/{total}", scenario.name);
            match run_one(catalogue, scenario, switcher, opts, expert, rep, observer)? {
                RunOutcome::Ran(r) => result.runs.push(*r),
                RunOutcome::Skipped(s) => result.skipped.push(s),
            }
        }
    }
    Ok(result)
}

/// `experts` rotated left by `rotation` (modulo their number).
pub fn run_order(experts: &[String], rotation: usize) -> impl Iterator<Item = &String> {
    let start = rotation.checked_rem(experts.len()).unwrap_or(0);
    experts[start..].iter().chain(&experts[..start])
}

/// One run of `scenario` under `expert` (repetition `rep`): pin, wait for the preconditions
/// ([`RunOptions::hold`]), start the first load, settle, run the probe across the phases, stop
/// everything, cool down. The scenario's inputs must be prepared ([`prepare_scenario`]). An
/// expert that cannot be pinned gives [`RunOutcome::Skipped`]; a load or probe failure is an
/// error.
pub fn run_one(
    catalogue: &Catalogue,
    scenario: &ScenarioSpec,
    switcher: &mut dyn ExpertSwitcher,
    opts: &RunOptions,
    expert: &str,
    rep: u32,
    observer: &mut dyn RunObserver,
) -> Result<RunOutcome> {
    // Every path to a run comes here (the CLI's orders as well as run_scenario_observed).
    lead_a_process_group_if_in_none();
    let probe = catalogue.probes.get(&scenario.probe).ok_or_else(|| {
        anyhow!(
            "scenario {}: unknown probe {}",
            scenario.name,
            scenario.probe
        )
    })?;
    info!(
        "[{}] {} ({}) under {expert}, rep {}",
        scenario.name,
        scenario.title,
        probe.settings.kind(),
        rep + 1
    );
    let pinned = match switcher.pin(expert) {
        Ok(p) => p,
        Err(e) => {
            // One expert that does not attach must not cost the other experts' runs.
            warn!(
                "[{}] skipping {expert}, rep {}: {e:#}",
                scenario.name,
                rep + 1
            );
            return Ok(RunOutcome::Skipped(SkippedRun {
                expert: expert.to_owned(),
                rep,
                reason: format!("{e:#}"),
            }));
        }
    };
    let pinned_unix_ms = now_ms();
    let waited = precondition::await_preconditions(
        &mut SystemMachine,
        &opts.preconditions(),
        switcher.scheduler_since(),
        pinned_unix_ms,
        &format!("[{}] {expert}", scenario.name),
    );
    switcher.load_starting();
    observer.run_starting(scenario, expert, rep)?;
    let record = measure(
        catalogue, scenario, switcher, opts, expert, rep, pinned, &waited, observer,
    );
    let finished = observer.run_finished(scenario, record.as_ref().ok());
    let record = record?;
    finished?;
    std::thread::sleep(opts.cooldown);
    Ok(RunOutcome::Ran(Box::new(record)))
}

fn now_ms() -> u64 {
    asa_experts::supervisor::unix_ms(SystemTime::now())
}

/// When the last load of a run in this process stopped (ms since the epoch; 0: none yet): the
/// start of the machine's quiet time before the next run's load.
static LAST_LOAD_STOPPED_UNIX_MS: AtomicU64 = AtomicU64::new(0);

fn load_stopped(at_unix_ms: u64) {
    LAST_LOAD_STOPPED_UNIX_MS.store(at_unix_ms, Ordering::Relaxed);
}

fn last_load_stopped() -> Option<u64> {
    Some(LAST_LOAD_STOPPED_UNIX_MS.load(Ordering::Relaxed)).filter(|&t| t > 0)
}

/// The measured part of [`run_one`], after the pin and the preconditions.
#[allow(clippy::too_many_arguments)]
fn measure(
    catalogue: &Catalogue,
    scenario: &ScenarioSpec,
    switcher: &mut dyn ExpertSwitcher,
    opts: &RunOptions,
    expert: &str,
    rep: u32,
    pinned: String,
    waited: &Waited,
    observer: &mut dyn RunObserver,
) -> Result<RunRecord> {
    let probe = &catalogue.probes[&scenario.probe];
    // SAFETY: getpgrp reads this process's group.
    let probe_group = unsafe { libc::getpgrp() } as u32;
    let mut announce = |load: Option<&RunningLoad>, name: &str| -> Result<()> {
        let mut apps = vec![LabelledApp {
            pgid: probe_group,
            class: probe.app_class.clone(),
        }];
        if let Some(load) = load {
            let class = &catalogue.loads[name].app_class;
            apps.extend(load.process_groups().into_iter().map(|pgid| LabelledApp {
                pgid,
                class: class.clone(),
            }));
        }
        observer.applications(&apps)
    };
    let phases = scenario.phases();
    let total_share: f64 = phases.iter().map(|p| p.share).sum();
    let duration = scenario_duration(opts, &phases);
    let started_unix_ms = now_ms();
    let t0 = Instant::now();
    let mut records = Vec::new();
    let phase_len = |share: f64| duration.mul_f64(share / total_share);
    let start_phase = |i: usize| -> Result<Option<RunningLoad>> {
        let p = &phases[i];
        if p.load == IDLE {
            return Ok(None);
        }
        let mut secs = phase_len(p.share).as_secs();
        if i == 0 {
            secs += opts.settle.as_secs();
        }
        RunningLoad::start(
            &p.load,
            &catalogue.loads[&p.load],
            &opts.work_dir.join(&p.load),
            secs.max(1),
        )
        .map(Some)
    };
    let dirty_kib = SystemMachine.dirty_writeback_kib();
    let mut phase_started = now_ms();
    let load_start = LoadStart::new(waited, phase_started, dirty_kib, last_load_stopped());
    let mut current = start_phase(0)?;
    announce(current.as_ref(), &phases[0].load)?;
    std::thread::sleep(opts.settle);
    let stop = Arc::new(AtomicBool::new(false));
    let settings = probe.settings.clone();
    let work = opts.work_unit;
    let stop_p = stop.clone();
    let probe_started_unix_ms = now_ms();
    let probe_thread = std::thread::Builder::new()
        .name("probe".into())
        .spawn(move || settings.run(duration, work, stop_p))
        .context("spawning the probe thread")?;
    let mut run_phases = || -> Result<()> {
        for (i, p) in phases.iter().enumerate() {
            let planned = phase_len(p.share);
            std::thread::sleep(planned);
            let output = match current.take() {
                Some(load) => {
                    let output = load.finish();
                    load_stopped(now_ms());
                    Some(output?)
                }
                None => None,
            };
            if let Some(o) = &output {
                info!(
                    "[{}]   phase {} {}: {} {}",
                    scenario.name,
                    i + 1,
                    p.load,
                    o.throughput
                        .map(|t| format!("{t:.3}"))
                        .unwrap_or("n/a".into()),
                    o.unit
                );
            }
            let ended = now_ms();
            records.push(PhaseRecord {
                load: p.load.clone(),
                planned_s: planned.as_secs_f64(),
                output,
                started_unix_ms: phase_started,
                ended_unix_ms: ended,
                app_class: catalogue.loads.get(&p.load).map(|l| l.app_class.clone()),
            });
            phase_started = ended;
            if i + 1 < phases.len() {
                current = start_phase(i + 1)?;
                announce(current.as_ref(), &phases[i + 1].load)?;
            }
        }
        Ok(())
    };
    if let Err(e) = run_phases() {
        // Stop the probe (and, by drop, any load still running) before giving up.
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = probe_thread.join();
        drop(current);
        load_stopped(now_ms());
        return Err(e.context(format!("scenario {} under {expert}", scenario.name)));
    }
    let probe_out = probe_thread
        .join()
        .map_err(|_| anyhow!("the probe thread panicked"))??;
    let valid = switcher.still_pinned(expert)?;
    if !valid {
        warn!(
            "[{}] {expert} was not running at the end of the run: marked invalid",
            scenario.name
        );
    }
    info!(
        "[{}]   {expert}: {} in {:.1} s",
        scenario.name,
        probe_out
            .summary
            .iter()
            .map(|(k, v)| format!("{k}={v:.2}"))
            .collect::<Vec<_>>()
            .join(" "),
        t0.elapsed().as_secs_f64()
    );
    let probe_ended_unix_ms = probe_started_unix_ms + (probe_out.elapsed_s * 1000.0) as u64;
    Ok(RunRecord {
        expert: expert.to_owned(),
        rep,
        pinned,
        started_unix_ms,
        probe_started_unix_ms,
        probe_ended_unix_ms,
        probe: probe_out,
        phases: records,
        valid,
        load_start: Some(load_start),
        probe_tgid: std::process::id(),
        probe_app_class: probe.app_class.clone(),
        boot_id: boot_id(),
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use super::{run_order, scenario_duration, RunOptions};

    fn phase(load: &str, share: f64) -> crate::catalogue::PhaseSpec {
        crate::catalogue::PhaseSpec {
            load: load.into(),
            share,
        }
    }

    /// A results file gives back the very floats it was written with (serde_json's
    /// `float_roundtrip`), so a report rebuilt from results.json (`asa calibrate --stage live
    /// --report-only`) equals the one the run wrote from memory. Without it serde_json parses
    /// some floats one unit in the last place off.
    #[test]
    fn a_process_in_a_group_keeps_its_group_for_job_control() {
        // SAFETY: getpgrp reads this process's group.
        let before = unsafe { libc::getpgrp() };
        assert_ne!(
            before, 0,
            "a test runs under a shell or cargo, in some group"
        );
        super::lead_a_process_group_if_in_none();
        assert_eq!(unsafe { libc::getpgrp() }, before);
    }

    #[test]
    fn saved_floats_read_back_bit_for_bit() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let values: Vec<f64> = (0..100_000)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 11) as f64 / (1u64 << 53) as f64
            })
            .collect();
        let back: Vec<f64> =
            serde_json::from_str(&serde_json::to_string(&values).unwrap()).unwrap();
        let off = values
            .iter()
            .zip(&back)
            .filter(|(a, b)| a.to_bits() != b.to_bits())
            .count();
        assert_eq!(off, 0, "{off} of {} floats read back changed", values.len());
    }

    /// P1's phases (shares 1, 2, 1) at 60 s would last 15, 30 and 15 s; with a 30 s minimum the
    /// scenario runs 120 s. A single-load scenario runs max(duration, min_phase).
    #[test]
    fn a_minimum_phase_lengthens_only_the_scenarios_that_need_it() {
        let opts = |duration_s: u64, min_phase_s: u64| RunOptions {
            experts: vec!["eevdf".into()],
            reps: 1,
            rotation: 0,
            duration: Duration::from_secs(duration_s),
            min_phase: Duration::from_secs(min_phase_s),
            settle: Duration::ZERO,
            hold: Duration::ZERO,
            dirty_limit_kib: 0,
            cooldown: Duration::ZERO,
            work_dir: PathBuf::new(),
            work_unit: crate::work::WorkUnit::calibrate_with(2, 1.0),
        };
        let p1 = [
            phase("idle", 1.0),
            phase("kernel_build", 2.0),
            phase("network", 1.0),
        ];
        let s1 = [phase("archive_extract", 1.0)];
        assert_eq!(
            scenario_duration(&opts(60, 30), &p1),
            Duration::from_secs(120)
        );
        assert_eq!(
            scenario_duration(&opts(60, 30), &s1),
            Duration::from_secs(60)
        );
        assert_eq!(
            scenario_duration(&opts(60, 0), &p1),
            Duration::from_secs(60)
        );
        assert_eq!(
            scenario_duration(&opts(20, 30), &s1),
            Duration::from_secs(30)
        );
    }

    /// A results file of an older `version` (no hold, no load starts, no boot ids): one S1 run
    /// under EEVDF, `reps` repetitions planned.
    fn old_results_json(version: u32, reps: u32) -> String {
        r#"{"schema":"asa.scenario-results","version":VERSION,"created_unix_ms":5,
            "machine":{"hostname":"h","kernel":"k","cpus":2,"cpu_model":"m"},
            "options":{"experts":["eevdf"],"reps":REPS,"duration":{"secs":20,"nanos":0},
              "settle":{"secs":2,"nanos":0},"work_dir":"/w",
              "work_unit":{"iterations_per_ms":1000.0}},
            "catalogue_toml":"",
            "scenarios":[{"scenario":"S1","title":"t","probe":"game","error":null,
              "runs":[{"expert":"eevdf","rep":0,"pinned":"eevdf","started_unix_ms":9,
                "probe":{"kind":"game","elapsed_s":1.0,"summary":{},"samples":{}},
                "phases":[],"valid":true}]}]}"#
            .replace("VERSION", &version.to_string())
            .replace("REPS", &reps.to_string())
    }

    /// A version 1 file (before the hold and the load-start records) still reads, with a hold
    /// of 0 and no load-start records; an unknown version is refused.
    #[test]
    fn a_version_1_results_file_reads_with_no_hold() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.json");
        let v1 = old_results_json(1, 1);
        std::fs::write(&path, &v1).unwrap();
        let set = super::ResultSet::load(&path).unwrap();
        assert_eq!(set.version, 1);
        assert_eq!(set.options.hold, Duration::ZERO);
        assert_eq!(set.scenarios[0].runs[0].load_start, None);
        std::fs::write(&path, v1.replace("\"version\":1", "\"version\":3")).unwrap();
        let err = super::ResultSet::load(&path).unwrap_err().to_string();
        assert!(err.contains("version 3") && err.contains("1 to 2"), "{err}");
    }

    /// A run records its boot id; a file written before that reads with the boot unknown, and
    /// the id survives a save and a load (a resumed set keeps every run's own boot).
    #[test]
    fn each_run_keeps_its_boot_id_and_older_runs_read_as_unknown() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.json");
        let old = old_results_json(2, 2);
        std::fs::write(&path, &old).unwrap();
        let mut set = super::ResultSet::load(&path).unwrap();
        assert_eq!(set.scenarios[0].runs[0].boot_id, None);
        // Resumed after a reboot: the second repetition ran in another boot.
        let mut second = set.scenarios[0].runs[0].clone();
        second.rep = 1;
        second.boot_id = Some("b2".into());
        set.scenarios[0].runs.push(second);
        set.save(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.matches("\"boot_id\"").count(), 1, "{text}");
        let back = super::ResultSet::load(&path).unwrap();
        let ids: Vec<Option<&str>> = back.scenarios[0]
            .runs
            .iter()
            .map(|r| r.boot_id.as_deref())
            .collect();
        assert_eq!(ids, [None, Some("b2")]);
    }

    #[test]
    fn the_boot_id_is_the_kernels_trimmed_uuid() {
        assert_eq!(
            super::parse_boot_id("403d662f-173a-4cd4-9e61-cd7dc3213e27\n").as_deref(),
            Some("403d662f-173a-4cd4-9e61-cd7dc3213e27")
        );
        assert_eq!(super::parse_boot_id(" \n"), None);
        // On Linux it is there, and the same for every run of this boot.
        let id = super::boot_id().expect("Linux publishes a boot id");
        assert_eq!(id.len(), 36, "{id}");
        assert_eq!(super::boot_id(), Some(id));
    }

    #[test]
    fn the_current_scheduler_has_run_since_boot() {
        let stat = "cpu  1 2 3\nintr 5\nbtime 1795900000\nprocesses 9\n";
        assert_eq!(super::boot_unix_ms(stat), Some(1_795_900_000_000));
        assert_eq!(super::boot_unix_ms("cpu 1 2 3\n"), None);
    }

    #[test]
    fn run_order_rotates_and_wraps() {
        let experts: Vec<String> = ["eevdf", "lavd", "bpfland"].map(String::from).into();
        let order = |r| {
            run_order(&experts, r)
                .map(String::as_str)
                .collect::<Vec<_>>()
        };
        assert_eq!(order(0), ["eevdf", "lavd", "bpfland"]);
        assert_eq!(order(1), ["lavd", "bpfland", "eevdf"]);
        assert_eq!(order(5), ["bpfland", "eevdf", "lavd"]);
        assert!(run_order(&[], 3).next().is_none());
    }
}
