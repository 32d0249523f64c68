//! `asa run`: the daemon. Perception → decision → action, once per tick:
//! sample the machine, classify it, vote (Algorithm 1), look the class up in the mapping table,
//! and switch through the controller when the policy says so, unless an `asa pin` holds the
//! scheduler. `--dry-run` decides and logs without a supervisor (no sched_ext and, procfs-only,
//! no root needed).
//!
//! Settings come from the command line, else the config file (TOML, `/etc/asa/asa.toml` when it
//! exists, or `--config`), else the defaults. The control socket serves `asa status` from the
//! start (mode `starting` while the slow start-up work runs, then `waiting` or `daemon`).
//! Everything the decision needs (schema, ONNX Runtime, model, mapping) is loaded and checked
//! before the scheduler is touched: a bad model is one error at start and nothing is switched.
//! SIGINT/SIGTERM/SIGHUP stop the loop and the controller returns the machine to EEVDF.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context, Result};
use asa_experts::supervisor::unix_ms;
use asa_experts::{Active, Catalogue, SchedExt, ScxState, Supervisor, SupervisorConfig, EEVDF};
use serde::Deserialize;

use crate::action::controller::{Controller, ControllerHandle, StandbySettings};
use crate::action::foreign;
use crate::control::{self, AgentLink, AgentStatus, DecisionStatus, Request, Response};
use crate::dbus;
use crate::decision::engine::{
    default_model_path, DecisionEngine, EngineSources, Outcome, TickRecord, DEFAULT_MODEL_PATHS,
};
use crate::decision::policy::{PolicyConfig, Reason};
use crate::decision::quarantine::{QuarantineConfig, QuarantineEntry};
use crate::decision::standby::vote_candidates;
use crate::decision::voting::VotingConfig;
use crate::decision_log::DecisionLog;
use crate::sd_notify;
use crate::stop::Stop;

/// The config file read when it exists and `--config` is not given.
pub const DEFAULT_CONFIG: &str = "/etc/asa/asa.toml";
/// Default tick length.
pub const DEFAULT_INTERVAL_MS: u64 = 1000;
/// Default nice value of the decision thread: the workload the agent watches goes first.
pub const DEFAULT_DECISION_NICE: i32 = 19;
/// Default tick length while the table leaves nothing to decide ([`RunSettings::settled_interval`]).
pub const DEFAULT_SETTLED_INTERVAL_MS: u64 = 10_000;
/// Shortest tick (perception's process scan runs at most ~1/s anyway).
pub const MIN_INTERVAL_MS: u64 = 100;
/// After this many ticks in a row fail (perception or inference), the daemon stops (EEVDF is
/// restored; a service manager may restart it).
pub const MAX_FAILED_TICKS: u32 = 60;

/// `asa run` options. Each overrides the config file's setting of the same name.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RunArgs {
    /// Config file (TOML). Default: /etc/asa/asa.toml when it exists.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Classifier model (ONNX, exported by classifier/). Default: $ASA_MODEL, else
    /// /etc/asa/classifier.onnx, /usr/local/share/asa/classifier.onnx,
    /// /usr/share/asa/classifier.onnx, else the source tree's classifier/models/default/.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Mapping table (workload class -> experts). Default: the built-in mapping/default.toml.
    #[arg(long)]
    pub mapping: Option<PathBuf>,
    /// Feature schema. Default: the built-in agent/feature_schema.toml.
    #[arg(long)]
    pub schema: Option<PathBuf>,
    /// libonnxruntime.so. Default: $ORT_DYLIB_PATH, else the project cache.
    #[arg(long)]
    pub onnxruntime: Option<PathBuf>,
    /// Tick length in ms (default 1000; the voting window is counted in ticks).
    #[arg(long)]
    pub interval_ms: Option<u64>,
    /// Tick length in ms while the table leaves nothing to decide: the table's default expert
    /// runs and no class's vote could move it (every other expert a class maps to is within
    /// the noise of it or not worth its switch). A pin, an expert that fails or a quarantine
    /// ends it at the next tick. 0: tick every --interval-ms throughout (default 10000).
    #[arg(long)]
    pub settled_interval_ms: Option<u64>,
    /// Minimum seconds between two switches (default 15).
    #[arg(long)]
    pub cooldown_s: Option<f64>,
    /// Append every tick's decision as one JSON line to this file.
    #[arg(long)]
    pub decision_log: Option<PathBuf>,
    /// Put each tick's feature vector (by name) into its decision-log line, to compare live
    /// ticks with recorded ones (`python -m asa_classifier.live`).
    #[arg(long)]
    pub log_features: bool,
    /// Nice value of the decision thread (perception, inference, vote; -20..19, default 19). A
    /// positive value lets the workload the agent watches go first; switches run on another
    /// thread at the agent's own priority.
    #[arg(long, allow_hyphen_values = true)]
    pub nice: Option<i32>,
    /// Decide and log, never switch (no sched_ext needed; no root needed without BPF).
    #[arg(long)]
    pub dry_run: bool,
    /// Do not load the BPF probe (BPF features are missing).
    #[arg(long)]
    pub no_bpf: bool,
    /// Stop after this many seconds, as on SIGTERM (benchmarks, tests).
    #[arg(long)]
    pub duration_s: Option<f64>,
    /// When another tool's sched_ext scheduler is attached at start, ask its owner to stop
    /// (SIGINT to the one process holding a struct_ops BPF link) instead of only waiting for
    /// it to go. Never SIGKILL; with no owner or several, the agent waits.
    #[arg(long)]
    pub take_over: bool,
    /// Also serve scx_loader's D-Bus interface: the name org.scx.Loader on the system bus
    /// (DBUS_SYSTEM_BUS_ADDRESS, else /var/run/dbus/system_bus_socket), so `scxctl` and
    /// scx_loader's desktop clients pin experts (switch/start), return to EEVDF (stop) and hand
    /// the choice back (restore). Default: off (or `dbus = true` in the config file). Needs the
    /// bus policy agent/dist/org.scx.Loader.conf; the agent does not start when the bus is
    /// missing or another process (scx_loader) owns the name.
    #[arg(long)]
    pub dbus: bool,
}

/// The config file (all keys optional; relative paths are relative to the file).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// Classifier model.
    pub model: Option<PathBuf>,
    /// Mapping table.
    pub mapping: Option<PathBuf>,
    /// Feature schema.
    pub schema: Option<PathBuf>,
    /// libonnxruntime.so.
    pub onnxruntime: Option<PathBuf>,
    /// Tick length in ms.
    pub interval_ms: Option<u64>,
    /// Tick length in ms while the table leaves nothing to decide (0: off).
    pub settled_interval_ms: Option<u64>,
    /// JSON-lines decision log.
    pub decision_log: Option<PathBuf>,
    /// Feature vectors in the decision log.
    pub log_features: Option<bool>,
    /// Nice value of the decision thread.
    pub nice: Option<i32>,
    /// Do not load the BPF probe.
    pub no_bpf: Option<bool>,
    /// Ask a foreign scheduler's owner to stop at start instead of waiting for it.
    pub take_over: Option<bool>,
    /// Serve scx_loader's D-Bus interface (org.scx.Loader on the system bus).
    pub dbus: Option<bool>,
    /// Decision parameters.
    #[serde(default)]
    pub policy: PolicySection,
}

/// `[policy]` of the config file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicySection {
    /// Algorithm 1 window W, in ticks.
    pub window: Option<usize>,
    /// Algorithm 1 threshold θ.
    pub threshold: Option<f64>,
    /// Algorithm 1 decay α.
    pub decay: Option<f64>,
    /// Minimum seconds between two switches.
    pub cooldown_s: Option<f64>,
    /// Minimum vote margin.
    pub min_margin: Option<f64>,
    /// Minimum vote support.
    pub min_support: Option<f64>,
    /// Switching penalty horizon: how long a recognised class is expected to last (s).
    pub horizon_s: Option<f64>,
    /// Consecutive unsure ticks after which the agent returns to the table's default expert.
    pub fallback_after_ticks: Option<u32>,
    /// Failures within `quarantine_window_s` that quarantine an expert.
    pub quarantine_failures: Option<u32>,
    /// Window in which an expert's failures are counted (s).
    pub quarantine_window_s: Option<f64>,
    /// First quarantine (s); it doubles with each failure until the expert has run
    /// `healthy_after_s`.
    pub quarantine_base_s: Option<f64>,
    /// Longest quarantine (s).
    pub quarantine_max_s: Option<f64>,
    /// Run time after which an expert's failures and back-off are forgotten (s).
    pub healthy_after_s: Option<f64>,
}

impl ConfigFile {
    /// Reads and parses `path`; relative paths in it become relative to its folder.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the config file {}", path.display()))?;
        let mut config: ConfigFile = toml::from_str(&text)
            .with_context(|| format!("parsing the config file {}", path.display()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        for p in [
            &mut config.model,
            &mut config.mapping,
            &mut config.schema,
            &mut config.onnxruntime,
            &mut config.decision_log,
        ]
        .into_iter()
        .flatten()
        {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        }
        Ok(config)
    }
}

/// Everything `asa run` needs, resolved.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// Model, mapping, schema, ONNX Runtime, BPF.
    pub sources: EngineSources,
    /// Tick length.
    pub interval: Duration,
    /// Tick length while the table leaves nothing to decide
    /// ([`crate::decision::policy::Policy::settled`]); None: every
    /// `interval` throughout.
    pub settled_interval: Option<Duration>,
    /// Policy parameters.
    pub policy: PolicyConfig,
    /// JSON-lines decision log.
    pub decision_log: Option<PathBuf>,
    /// Each logged tick carries its feature vector.
    pub log_features: bool,
    /// Nice value of the decision thread (0: the agent's own).
    pub nice: i32,
    /// Never switch.
    pub dry_run: bool,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Ask a foreign scheduler's owner to stop at start (else wait for it to go).
    pub take_over: bool,
    /// Serve org.scx.Loader on the system bus.
    pub dbus: bool,
    /// The config file read, if any.
    pub config_file: Option<PathBuf>,
}

impl RunSettings {
    /// Command line over config file over defaults.
    pub fn resolve(args: &RunArgs) -> Result<Self> {
        let (config, config_file) = match &args.config {
            Some(path) => (ConfigFile::load(path)?, Some(path.clone())),
            None if Path::new(DEFAULT_CONFIG).is_file() => (
                ConfigFile::load(Path::new(DEFAULT_CONFIG))?,
                Some(PathBuf::from(DEFAULT_CONFIG)),
            ),
            None => (ConfigFile::default(), None),
        };
        Self::merge(args, config, config_file)
    }

    fn merge(args: &RunArgs, config: ConfigFile, config_file: Option<PathBuf>) -> Result<Self> {
        let model = match args.model.clone().or(config.model) {
            Some(path) => path,
            None => default_model_path().with_context(|| {
                format!(
                    "no classifier model: give --model, `model` in the config file or ASA_MODEL, or install one at {}",
                    DEFAULT_MODEL_PATHS.join(", ")
                )
            })?,
        };
        let interval_ms = args
            .interval_ms
            .or(config.interval_ms)
            .unwrap_or(DEFAULT_INTERVAL_MS);
        if interval_ms < MIN_INTERVAL_MS {
            bail!("the tick length must be at least {MIN_INTERVAL_MS} ms (got {interval_ms})");
        }
        let settled_ms = args
            .settled_interval_ms
            .or(config.settled_interval_ms)
            .unwrap_or(DEFAULT_SETTLED_INTERVAL_MS.max(interval_ms));
        if settled_ms != 0 && settled_ms < interval_ms {
            bail!(
                "the settled tick length must be 0 (off) or at least the tick length, {interval_ms} ms (got {settled_ms})"
            );
        }
        let defaults = PolicyConfig::default();
        let p = &config.policy;
        let cooldown_s = args
            .cooldown_s
            .or(p.cooldown_s)
            .unwrap_or(defaults.cooldown.as_secs_f64());
        if !cooldown_s.is_finite() || cooldown_s < 0.0 {
            bail!("the cooldown must be a number of seconds >= 0 (got {cooldown_s})");
        }
        let policy = PolicyConfig {
            voting: VotingConfig {
                window: p.window.unwrap_or(defaults.voting.window),
                threshold: p.threshold.unwrap_or(defaults.voting.threshold),
                decay: p.decay.unwrap_or(defaults.voting.decay),
            },
            cooldown: Duration::from_secs_f64(cooldown_s),
            min_margin: p.min_margin.unwrap_or(defaults.min_margin),
            min_support: p.min_support.unwrap_or(defaults.min_support),
            horizon: match p.horizon_s {
                Some(h) if !h.is_finite() || h <= 0.0 => {
                    bail!("[policy] horizon_s must be a number of seconds > 0 (got {h})")
                }
                Some(h) => Duration::from_secs_f64(h),
                None => defaults.horizon,
            },
            fallback_after_ticks: p
                .fallback_after_ticks
                .unwrap_or(defaults.fallback_after_ticks),
            quarantine: {
                let d = defaults.quarantine;
                let secs = |key: &str, v: Option<f64>, default: Duration| match v {
                    Some(v) if !v.is_finite() || v < 0.0 => {
                        bail!("[policy] {key} must be a number of seconds >= 0 (got {v})")
                    }
                    Some(v) => Ok(Duration::from_secs_f64(v)),
                    None => Ok(default),
                };
                let q = QuarantineConfig {
                    failures: p.quarantine_failures.unwrap_or(d.failures),
                    window: secs("quarantine_window_s", p.quarantine_window_s, d.window)?,
                    base: secs("quarantine_base_s", p.quarantine_base_s, d.base)?,
                    max: secs("quarantine_max_s", p.quarantine_max_s, d.max)?,
                    healthy_after: secs("healthy_after_s", p.healthy_after_s, d.healthy_after)?,
                };
                q.check().context("[policy] in the config file")?;
                q
            },
        };
        policy
            .voting
            .check()
            .context("[policy] in the config file")?;
        let nice = args.nice.or(config.nice).unwrap_or(DEFAULT_DECISION_NICE);
        if !(-20..=19).contains(&nice) {
            bail!("the nice value must be in -20..=19 (got {nice})");
        }
        let duration = match args.duration_s {
            Some(s) if !s.is_finite() || s <= 0.0 => bail!("--duration-s must be > 0"),
            Some(s) => Some(Duration::from_secs_f64(s)),
            None => None,
        };
        Ok(Self {
            sources: EngineSources {
                model,
                mapping: args.mapping.clone().or(config.mapping),
                schema: args.schema.clone().or(config.schema),
                onnxruntime: args.onnxruntime.clone().or(config.onnxruntime),
                no_bpf: args.no_bpf || config.no_bpf.unwrap_or(false),
            },
            interval: Duration::from_millis(interval_ms),
            settled_interval: (settled_ms != 0).then(|| Duration::from_millis(settled_ms)),
            policy,
            decision_log: args.decision_log.clone().or(config.decision_log),
            log_features: args.log_features || config.log_features.unwrap_or(false),
            nice,
            dry_run: args.dry_run,
            duration,
            take_over: args.take_over || config.take_over.unwrap_or(false),
            dbus: args.dbus || config.dbus.unwrap_or(false),
            config_file,
        })
    }
}

/// What `asa run` takes from the global command line.
#[derive(Debug, Clone)]
pub struct DaemonContext {
    /// The control socket.
    pub socket: PathBuf,
    /// The expert catalogue.
    pub catalogue: Catalogue,
    /// Supervisor settings.
    pub supervisor: SupervisorConfig,
    /// The hot-standby pool.
    pub standby: StandbySettings,
}

/// What `asa status` says while the agent loads what its decisions need.
pub const STARTING_NOTE: &str = "starting: loading the classifier model (ONNX Runtime, the model, the mapping table); nothing is switched until it is loaded";

/// What a pin or unpin is told meanwhile.
const STARTING_REFUSAL: &str =
    "the agent is starting (loading the classifier model): try again in a moment";

/// The control socket from its bind to the end of [`run`], however `run` ends (the socket file
/// is removed on drop). `link` answers it, and is replaced as the agent moves from starting to
/// waiting for a foreign scheduler to running.
struct ControlSocket {
    path: PathBuf,
    link: AgentLink,
}

impl ControlSocket {
    /// Binds `path` (refused while another agent serves it) and serves it, answered by `link`,
    /// with the bounds of [`control::serve`], for the life of the process.
    fn serve(path: &Path, link: AgentLink) -> Result<Self> {
        let listener = control::bind(path)?;
        let answer = link.clone();
        control::serve(listener, Arc::new(AtomicBool::new(false)), move |request| {
            answer.ask(request)
        });
        Ok(Self {
            path: path.to_owned(),
            link,
        })
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The control socket's answer while the agent starts (mode `starting`, [`STARTING_NOTE`]):
/// `status` with `active` (what the agent reports running until it is up: nothing it
/// started), the kernel's state read now and whether the kernel runs `active`; any other
/// request is refused until the agent is up.
fn starting(
    active: Active,
    scx: SchedExt,
    catalogue: Catalogue,
) -> impl Fn(Request) -> Response + Send + Sync + 'static {
    let status = AgentStatus::new("starting", active, STARTING_NOTE);
    move |request| match request {
        Request::Status => {
            let kernel = scx.snapshot().ok();
            let kernel_read_unix_ms = Some(unix_ms(SystemTime::now()));
            let consistent = kernel
                .as_ref()
                .map(|k| control::kernel_runs(&catalogue, &status.active.expert, k));
            Response {
                ok: true,
                error: None,
                status: Some(AgentStatus {
                    kernel,
                    kernel_read_unix_ms,
                    consistent,
                    ..status.clone()
                }),
                switch: None,
            }
        }
        _ => control::refusal(STARTING_REFUSAL),
    }
}

/// `asa run`: runs until `stop` is set (or `--duration-s`), then restores EEVDF.
///
/// The control socket is served first, before the slow start-up work (ONNX Runtime and the
/// model take seconds, 6 s under the lab's emulator): an agent started again after a crash
/// says at once what the machine runs (mode `starting`, the kernel's own scheduler). A second
/// `asa run` is refused at that bind, before it loads anything. Everything the decision needs
/// is then loaded and checked before the scheduler is touched: a bad model is one error and
/// nothing is switched.
pub fn run(args: &RunArgs, ctx: DaemonContext, stop: Stop) -> Result<()> {
    let settings = RunSettings::resolve(args)?;
    if let Some(path) = &settings.config_file {
        log::info!("config file {}", path.display());
    }
    if settings.dry_run {
        return dry_run(settings, ctx, stop);
    }
    if !nix::unistd::geteuid().is_root() {
        bail!(
            "asa run needs root (attaching a sched_ext scheduler needs CAP_SYS_ADMIN and CAP_BPF): run it with sudo, or use --dry-run to decide without switching"
        );
    }
    let eevdf = Active {
        expert: EEVDF.to_string(),
        since_unix_ms: unix_ms(SystemTime::now()),
        pid: None,
    };
    let sysfs = SchedExt::at(asa_experts::sched_ext::DEFAULT_SYSFS_ROOT);
    let control = ControlSocket::serve(
        &ctx.socket,
        AgentLink::new(starting(eevdf, sysfs, ctx.catalogue.clone())),
    )?;
    log::info!(
        "serving {} (mode starting) while the classifier model loads",
        ctx.socket.display()
    );
    sd_notify::notify_or_log("STATUS=starting: loading the classifier model");
    // Everything the decision needs, before the scheduler is touched.
    let mut engine = DecisionEngine::load(
        &settings.sources,
        &ctx.catalogue,
        settings.policy,
        settings.interval,
        false,
        EEVDF,
    )?;
    engine.log_features(settings.log_features);
    let scx = SchedExt::system()?;
    // The bus name too, before the scheduler is touched: scx_loader owning it is one error.
    let dbus_agent = AgentLink::refusing("the agent is starting: try again in a moment");
    let dbus_service = settings
        .dbus
        .then(|| serve_dbus(dbus_agent.clone(), &ctx.catalogue))
        .transpose()?;
    let heartbeat = Heartbeat::start(stop.clone());
    sd_notify::notify_or_log("READY=1\nSTATUS=starting");
    let supervisor = loop {
        // Another tool's scheduler: wait for it to go (or ask it to, --take-over), answering
        // `asa status` meanwhile, rather than fail and be restarted by systemd forever.
        let waited = wait_for_foreign_scheduler(
            &scx,
            &settings,
            stop.flag(),
            &heartbeat,
            &[&control.link, &dbus_agent],
        )?;
        if waited == foreign::Waited::Stopped {
            log::info!("stopped while waiting for the foreign scheduler to go");
            return Ok(());
        }
        match Supervisor::new(ctx.catalogue.clone(), scx.clone(), ctx.supervisor) {
            Ok(s) => break s,
            // A foreign scheduler attached between the look and the supervisor's: wait again.
            Err(e) if matches!(foreign::attached(&scx), Ok(Some(_))) => {
                log::warn!("{e:#}");
            }
            Err(e) => return Err(e),
        }
    };
    let mut controller = Controller::new(
        supervisor,
        "daemon",
        "the decision engine chooses the expert; `asa pin` overrides it until `asa unpin`",
    )
    .with_standby(ctx.standby.clone());
    let handle = controller.handle();
    // Before the first vote the pool holds the table's overall best.
    handle.set_standby_candidates(
        Vec::new(),
        engine.policy().overall_best().map(str::to_owned),
    );
    handle.set_decision(DecisionStatus::new(engine.info().clone()));
    for link in [&control.link, &dbus_agent] {
        let handle = handle.clone();
        link.set(move |request| handle.answer(request));
    }
    log::info!(
        "agent serving {}; deciding every {} ms",
        ctx.socket.display(),
        settings.interval.as_millis()
    );
    sd_notify::notify_or_log("STATUS=deciding");
    let decisions = {
        let stop = stop.clone();
        let sink = Sink::Controller(handle);
        std::thread::Builder::new()
            .name("decision".into())
            .spawn(move || {
                let result = decision_loop(engine, sink, &settings, &stop, &heartbeat);
                stop.request();
                result
            })
            .context("spawning the decision thread")?
    };
    let result = controller.run(stop.flag());
    sd_notify::notify_or_log("STOPPING=1\nSTATUS=returning the machine to EEVDF");
    // D-Bus callers from now on are told the agent is stopping; the name goes with the service.
    dbus_agent.set(|_| control::refusal("the agent is stopping"));
    drop(dbus_service);
    // Dropping the controller drops its job queue: a decision waiting for a switch returns.
    drop(controller);
    let decided = decisions
        .join()
        .unwrap_or_else(|_| Err(anyhow::anyhow!("the decision thread panicked")));
    drop(control);
    result?;
    log::info!("stopped; the machine is on EEVDF");
    decided
}

/// `--dry-run`: no supervisor; `asa status` is served, from the start as for [`run`], when the
/// socket can be bound (another agent may serve it: the dry run then goes without).
fn dry_run(settings: RunSettings, ctx: DaemonContext, stop: Stop) -> Result<()> {
    let scx = SchedExt::at(asa_experts::sched_ext::DEFAULT_SYSFS_ROOT);
    let current = running_expert(&ctx.catalogue, &scx);
    let active = Active {
        expert: current.clone(),
        since_unix_ms: unix_ms(SystemTime::now()),
        pid: None,
    };
    let link = AgentLink::new(starting(active.clone(), scx.clone(), ctx.catalogue.clone()));
    let _control = match ControlSocket::serve(&ctx.socket, link.clone()) {
        Ok(control) => {
            log::info!("dry run: `asa status` served on {}", ctx.socket.display());
            Some(control)
        }
        Err(e) => {
            log::warn!("dry run: no control socket, `asa status` will not see this run: {e:#}");
            None
        }
    };
    let mut engine = DecisionEngine::load(
        &settings.sources,
        &ctx.catalogue,
        settings.policy,
        settings.interval,
        true,
        &current,
    )?;
    engine.log_features(settings.log_features);
    let status = Arc::new(Mutex::new(AgentStatus {
        decision: Some(DecisionStatus::new(engine.info().clone())),
        ..AgentStatus::new(
            "dry-run",
            active,
            "dry run: decisions are logged, nothing is switched",
        )
    }));
    let refused = |_: &AgentStatus| DRY_RUN_REFUSAL.to_string();
    link.set(status_only(status.clone(), scx.clone(), refused));
    let _dbus_service = if settings.dbus {
        let agent = AgentLink::new(status_only(status.clone(), scx, refused));
        Some(serve_dbus(agent, &ctx.catalogue)?)
    } else {
        None
    };
    log::info!(
        "dry run: deciding every {} ms, switching nothing (the kernel runs {current})",
        settings.interval.as_millis()
    );
    let heartbeat = Heartbeat::start(stop.clone());
    sd_notify::notify_or_log("READY=1\nSTATUS=dry run: deciding, switching nothing");
    decision_loop(engine, Sink::DryRun(status), &settings, &stop, &heartbeat)
}

/// How long a switch the decision engine asked for may keep the decision thread (the
/// controller gives up on a job after 300 s): the watchdog keeps quiet that long.
const SWITCH_BOUND: Duration = Duration::from_secs(310);

/// The systemd watchdog: a thread sends `WATCHDOG=1` at half the interval systemd asks for,
/// as long as the decision loop (or the wait for a foreign scheduler) has shown progress within
/// the interval, or is inside a switch of bounded length. A stuck agent stops pinging and
/// systemd restarts it. Without a watchdog (not under systemd) beats cost two atomic stores.
pub struct Heartbeat {
    origin: Instant,
    last_ms: AtomicU64,
    busy_until_ms: AtomicU64,
}

impl Heartbeat {
    /// A heartbeat, and the pinging thread when systemd asks for a watchdog; the thread ends
    /// with `stop`.
    pub fn start(stop: Stop) -> Arc<Self> {
        let heartbeat = Arc::new(Self {
            origin: Instant::now(),
            last_ms: AtomicU64::new(0),
            busy_until_ms: AtomicU64::new(0),
        });
        if let Some(interval) = sd_notify::watchdog_interval() {
            log::info!(
                "systemd watchdog: {:.0} s; pinging every {:.0} s while the agent makes progress",
                interval.as_secs_f64(),
                interval.as_secs_f64() / 2.0
            );
            let hb = heartbeat.clone();
            let spawned = std::thread::Builder::new()
                .name("watchdog".into())
                .spawn(move || {
                    let mut warned = false;
                    while !stop.wait_until(Instant::now() + interval / 2) {
                        if hb.alive(interval) {
                            sd_notify::notify_or_log("WATCHDOG=1");
                            warned = false;
                        } else if !warned {
                            log::error!(
                                "the decision loop has made no progress for {:.0} s: no watchdog ping (systemd restarts a stuck agent)",
                                interval.as_secs_f64()
                            );
                            warned = true;
                        }
                    }
                });
            if let Err(e) = spawned {
                log::warn!("no watchdog thread: {e}");
            }
        }
        heartbeat
    }

    fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }

    /// The loop made progress now.
    pub fn beat(&self) {
        self.last_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    /// The loop waits for something bounded by `bound` (zero: not any more).
    pub fn busy_for(&self, bound: Duration) {
        let until = if bound.is_zero() {
            0
        } else {
            self.now_ms() + bound.as_millis() as u64
        };
        self.busy_until_ms.store(until, Ordering::Relaxed);
        self.beat();
    }

    /// True when the last beat is younger than `within`, or a bounded wait is not over.
    pub fn alive(&self, within: Duration) -> bool {
        let now = self.now_ms();
        now.saturating_sub(self.last_ms.load(Ordering::Relaxed)) < within.as_millis() as u64
            || now < self.busy_until_ms.load(Ordering::Relaxed)
    }
}

/// Before the supervisor: when another tool's scheduler is attached, answer `asa status` (mode
/// `waiting`) and refuse pins on `links` (the control socket's, D-Bus's) while
/// [`foreign::wait_until_gone`] waits (with `--take-over`, after asking its owner to stop). See
/// [`foreign`].
fn wait_for_foreign_scheduler(
    scx: &SchedExt,
    settings: &RunSettings,
    stop: &AtomicBool,
    heartbeat: &Heartbeat,
    links: &[&AgentLink],
) -> Result<foreign::Waited> {
    if foreign::attached(scx)?.is_none() {
        return Ok(foreign::Waited::NotNeeded);
    }
    let status = Arc::new(Mutex::new(AgentStatus::new(
        "waiting",
        Active {
            expert: EEVDF.to_string(),
            since_unix_ms: unix_ms(SystemTime::now()),
            pid: None,
        },
        "",
    )));
    let waiting = |st: &AgentStatus| {
        format!(
            "the agent is waiting for another tool's scheduler to detach ({}): it switches nothing until then",
            st.note
        )
    };
    for link in links {
        link.set(status_only(status.clone(), scx.clone(), waiting));
    }
    let since = unix_ms(SystemTime::now());
    let take_over = || foreign::take_over(Path::new("/proc"), foreign::sigint);
    foreign::wait_until_gone(
        scx,
        foreign::POLL,
        settings
            .take_over
            .then_some(&take_over as &dyn Fn() -> foreign::TakeOver),
        stop,
        |snap, taken| {
            let what = foreign::describe(snap);
            let mut st = status.lock().unwrap();
            st.note = match taken {
                Some(t) => format!("{what} is attached, not started by ASA; --take-over: {t}; the agent takes control once it has gone"),
                None => format!("{what} is attached, not started by ASA; the agent waits for it to go and then takes control (`asa run --take-over` asks its owner to stop)"),
            };
            st.last_event = Some(control::TimedEvent {
                at_unix_ms: since,
                message: format!("foreign scheduler {what} attached at start"),
            });
            sd_notify::notify_or_log(&format!(
                "STATUS=waiting for the foreign scheduler {what} to go"
            ));
        },
        || heartbeat.beat(),
    )
}

/// The expert the kernel runs now, by its ops name (EEVDF when none or no sched_ext).
fn running_expert(catalogue: &Catalogue, scx: &SchedExt) -> String {
    match scx.snapshot() {
        Ok(snap) if snap.state == ScxState::Enabled => snap
            .ops
            .as_deref()
            .and_then(|ops| catalogue.by_ops(ops))
            .map(|e| e.name.clone())
            .unwrap_or_else(|| format!("unknown ({})", snap.ops.unwrap_or_default())),
        _ => EEVDF.to_string(),
    }
}

/// `--dbus`: org.scx.Loader on the system bus, answered by `agent`; the error says how to run
/// without it.
fn serve_dbus(agent: AgentLink, catalogue: &Catalogue) -> Result<dbus::Service> {
    dbus::serve(agent, catalogue.clone(), &dbus::Bus::System).context(
        "--dbus: scx_loader's D-Bus interface cannot be served (without --dbus or `dbus = true` the agent runs without it)",
    )
}

/// What a dry run answers a pin or unpin.
const DRY_RUN_REFUSAL: &str =
    "this agent is a dry run (`asa run --dry-run`): it switches nothing, so it cannot pin";

/// A control-socket handler for an agent that switches nothing (a dry run, or one waiting for a
/// foreign scheduler): `status` answers from `status` with the kernel's state read now; every
/// other request is refused with `why(status)`.
fn status_only(
    status: Arc<Mutex<AgentStatus>>,
    scx: SchedExt,
    why: impl Fn(&AgentStatus) -> String + Send + Sync + 'static,
) -> impl Fn(Request) -> Response + Send + Sync + 'static {
    move |request| {
        let st = status.lock().unwrap().clone();
        match request {
            Request::Status => Response {
                ok: true,
                error: None,
                status: Some(AgentStatus {
                    kernel: scx.snapshot().ok(),
                    kernel_read_unix_ms: Some(unix_ms(SystemTime::now())),
                    ..st
                }),
                switch: None,
            },
            _ => control::refusal(why(&st)),
        }
    }
}

/// Where the decision loop gets the agent's state from and publishes its decisions.
enum Sink {
    Controller(ControllerHandle),
    DryRun(Arc<Mutex<AgentStatus>>),
}

impl Sink {
    fn status(&self) -> AgentStatus {
        match self {
            Sink::Controller(h) => h.status_cached(),
            Sink::DryRun(s) => s.lock().unwrap().clone(),
        }
    }

    fn publish(
        &self,
        record: &TickRecord,
        quarantine: Vec<QuarantineEntry>,
        unlogged: u64,
        settled: Option<Duration>,
    ) {
        let update = |d: &mut DecisionStatus| {
            d.ticks += 1;
            d.settled_interval_ms = settled.map(|s| s.as_millis() as u64);
            d.unlogged_ticks = unlogged;
            d.quarantine = quarantine;
            d.last = Some(record.clone());
            if record.outcome != Outcome::Stay {
                d.last_switch = Some(record.clone());
            }
        };
        match self {
            Sink::Controller(h) => h.update_decision(update),
            Sink::DryRun(s) => {
                let mut st = s.lock().unwrap();
                if let Some(d) = st.decision.as_mut() {
                    update(d);
                }
                if record.outcome == Outcome::WouldSwitch {
                    if let Some(target) = &record.decision.target_expert {
                        st.note = format!(
                            "dry run: decisions are logged, nothing is switched (the agent would run {target})"
                        );
                    }
                }
            }
        }
    }
}

/// Sets the calling thread's nice value (Linux: a thread's own, by its thread id); a failure
/// (a negative value without CAP_SYS_NICE) is a warning, the thread keeps its priority.
fn set_thread_nice(nice: i32) {
    // SAFETY: gettid and setpriority take plain integers and touch no memory of ours.
    let result = unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice)
    };
    if result == 0 {
        log::info!("decision thread at nice {nice}");
    } else {
        log::warn!(
            "could not set the decision thread's nice value to {nice}: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// The kind of a decision, for logging changes at info level.
fn decision_key(record: &TickRecord) -> (Option<String>, Option<String>, &'static str) {
    let kind = match record.decision.reason {
        Reason::NoDecision => "no_decision",
        Reason::NotConfident { .. } => "not_confident",
        Reason::ClassNotMapped => "class_not_mapped",
        Reason::AlreadyRunning => "already_running",
        Reason::CoolingDown { .. } => "cooling_down",
        Reason::NotWorthSwitching { .. } => "not_worth_switching",
        Reason::WithinNoise { .. } => "within_noise",
        Reason::Switch => "switch",
        Reason::SwitchNetOfCost { .. } => "switch_net_of_cost",
        Reason::Fallback { .. } => "fallback",
    };
    (
        record.decision.voted_class.clone(),
        record.decision.target_expert.clone(),
        kind,
    )
}

/// Counts a failure of `expert` towards its quarantine, and says so when it starts one.
fn note_failure(engine: &mut DecisionEngine, expert: &str, now: Duration, why: &str) {
    match engine.policy_mut().note_expert_failed(expert, now, why) {
        Some(length) => log::warn!(
            "{expert} failed again ({why}): quarantined for {:.0} s, the decision skips it meanwhile",
            length.as_secs_f64()
        ),
        None => log::info!("{expert} failed ({why}): counted towards its quarantine"),
    }
}

fn decision_loop(
    mut engine: DecisionEngine,
    sink: Sink,
    settings: &RunSettings,
    stop: &Stop,
    heartbeat: &Heartbeat,
) -> Result<()> {
    let mut log_file = match &settings.decision_log {
        Some(path) => Some(DecisionLog::open(path)?),
        None => None,
    };
    if settings.nice != 0 {
        set_thread_nice(settings.nice);
    }
    let started = Instant::now();
    let mut next = started + settings.interval;
    let mut last_pinned: Option<String> = None;
    let mut previous_key = None;
    let mut failed_in_a_row = 0u32;
    let mut last_event_ms: Option<u64> = None;
    // While settled: when the last full tick ran and what the controller reported then.
    let mut settled: Option<(Instant, ControllerState)> = None;
    loop {
        heartbeat.beat();
        if stop.wait_until(next) {
            return Ok(());
        }
        heartbeat.beat();
        if settings.duration.is_some_and(|d| started.elapsed() >= d) {
            log::info!("--duration-s reached: stopping");
            return Ok(());
        }
        next += settings.interval;
        let now_instant = Instant::now();
        if next < now_instant + settings.interval / 2 {
            // A switch or a stall made this tick late: skip the missed ticks and re-phase, so
            // no tick covers less than half an interval.
            next = now_instant + settings.interval;
        }
        let now = started.elapsed();
        // What the controller did since the last tick: pins, unpins, an expert that died.
        let status = sink.status();
        if let (Some(every), Some((last_full, seen))) = (settings.settled_interval, &settled) {
            if now_instant < *last_full + every && *seen == ControllerState::of(&status) {
                continue;
            }
        }
        if let Sink::Controller(_) = sink {
            if status.pinned != last_pinned {
                engine
                    .policy_mut()
                    .note_external_switch(&status.active.expert, now);
                last_pinned = status.pinned.clone();
            } else if status.switching_to.is_none()
                && engine.policy().current_expert() != Some(status.active.expert.as_str())
            {
                let believed = engine.policy().current_expert().unwrap_or("?").to_string();
                log::info!(
                    "the controller reports {} running (the policy believed {believed}): following it, cooldown restarted",
                    status.active.expert,
                );
                // The expert the policy believed running is gone without a switch: it exited
                // or the kernel ejected it (the supervisor's event says which).
                if status.active.expert == EEVDF && believed != EEVDF && believed != "?" {
                    let why = match &status.last_event {
                        Some(ev) if last_event_ms != Some(ev.at_unix_ms) => ev.message.clone(),
                        _ => format!("{believed} stopped running"),
                    };
                    note_failure(&mut engine, &believed, now, &why);
                }
                engine
                    .policy_mut()
                    .note_external_switch(&status.active.expert, now);
            }
            last_event_ms = status.last_event.as_ref().map(|e| e.at_unix_ms);
        }
        // The hot standbys' loading (BPF verification at low priority) is the agent's work,
        // not the workload's: never describe it as the busiest process.
        engine.ignore_processes(status.standby.experts.iter().map(|s| s.pid as i32));
        let mut record = match engine.tick(now) {
            Ok(r) => {
                failed_in_a_row = 0;
                r
            }
            Err(e) => {
                failed_in_a_row += 1;
                if failed_in_a_row == 1 || failed_in_a_row.is_multiple_of(10) {
                    log::warn!("tick failed ({failed_in_a_row} in a row): {e:#}");
                }
                if failed_in_a_row >= MAX_FAILED_TICKS {
                    return Err(e.context(format!(
                        "{MAX_FAILED_TICKS} ticks in a row failed: the decision engine stops"
                    )));
                }
                continue;
            }
        };
        record.pinned = status.pinned.clone();
        if let Sink::Controller(handle) = &sink {
            let policy = engine.policy();
            handle.set_standby_candidates(
                vote_candidates(&record.decision.vote_scores, |c| policy.expert_for(c)),
                policy.overall_best().map(str::to_owned),
            );
        }
        if record.outcome == Outcome::Switched {
            let target = record
                .decision
                .target_expert
                .clone()
                .expect("a switch has a target");
            match &sink {
                Sink::DryRun(_) => record.outcome = Outcome::WouldSwitch,
                Sink::Controller(_) if status.pinned.is_some() => {
                    record.outcome = Outcome::HeldByPin;
                    engine
                        .policy_mut()
                        .set_current_expert(Some(&status.active.expert));
                }
                Sink::Controller(handle) => {
                    log::info!("switching to {target}: {}", record.decision.summary());
                    // `asa status` names the switch from its start: the controller reports the
                    // new expert the moment it is up, before this thread publishes the outcome.
                    let started = record.clone();
                    handle.update_decision(|d| d.last_switch = Some(started));
                    // A switch may take minutes (two enable timeouts): the watchdog waits for it.
                    heartbeat.busy_for(SWITCH_BOUND);
                    let response = handle.decide(&target);
                    heartbeat.busy_for(Duration::ZERO);
                    let after = handle.status_cached();
                    if response.ok {
                        record.detail = response
                            .switch
                            .as_ref()
                            .map(|s| format!("{} -> {} in {:.0} ms", s.from, s.to, s.total_ms));
                    } else {
                        record.outcome = if after.pinned.is_some() {
                            Outcome::HeldByPin
                        } else {
                            Outcome::SwitchFailed
                        };
                        record.detail = response.error.clone();
                        if record.outcome == Outcome::SwitchFailed {
                            log::warn!(
                                "switch to {target} failed, {} runs: {}",
                                after.active.expert,
                                response.error.as_deref().unwrap_or("?")
                            );
                            let why = response.error.as_deref().unwrap_or("switch failed");
                            note_failure(&mut engine, &target, now, why);
                        }
                        engine
                            .policy_mut()
                            .set_current_expert(Some(&after.active.expert));
                    }
                    last_pinned = after.pinned.clone();
                }
            }
        }
        let mut line = serde_json::to_string(&record)?;
        if let Some(log) = log_file.as_mut() {
            log.append(&line);
        }
        // The console and `asa status` show the decision, not the 50-odd feature values.
        if record.features.take().is_some() {
            line = serde_json::to_string(&record)?;
        }
        let key = decision_key(&record);
        if record.outcome != Outcome::Stay || previous_key.as_ref() != Some(&key) {
            log::info!(target: "asa::decision", "{line}");
        } else {
            log::debug!(target: "asa::decision", "{line}");
        }
        previous_key = Some(key);
        let unlogged = log_file.as_ref().map_or(0, DecisionLog::unwritten);
        let now_settled = settings.settled_interval.is_some() && engine.policy().settled(now);
        if now_settled != settled.is_some() {
            match (now_settled, settings.settled_interval) {
                (true, Some(every)) => log::info!(
                    "the table leaves nothing to decide from {}: no class's vote would move it; ticking every {} ms until a pin, a failure or a quarantine",
                    engine.policy().current_expert().unwrap_or("?"),
                    every.as_millis()
                ),
                _ => log::info!(
                    "deciding every {} ms again ({} runs)",
                    settings.interval.as_millis(),
                    engine.policy().current_expert().unwrap_or("?")
                ),
            }
        }
        settled = now_settled.then(|| (now_instant, ControllerState::of(&sink.status())));
        sink.publish(
            &record,
            engine.policy().quarantine_entries(now),
            unlogged,
            settings.settled_interval.filter(|_| now_settled),
        );
    }
}

/// What the controller reports that ends a settled stretch when it changes: the pin, the
/// expert running, a switch under way, the latest event (an expert that failed).
#[derive(Debug, Clone, PartialEq)]
struct ControllerState {
    pinned: Option<String>,
    active: String,
    switching_to: Option<String>,
    last_event_ms: Option<u64>,
}

impl ControllerState {
    fn of(status: &AgentStatus) -> Self {
        ControllerState {
            pinned: status.pinned.clone(),
            active: status.active.expert.clone(),
            switching_to: status.switching_to.clone(),
            last_event_ms: status.last_event.as_ref().map(|e| e.at_unix_ms),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> RunArgs {
        RunArgs {
            model: Some("/m.onnx".into()),
            ..RunArgs::default()
        }
    }

    #[test]
    fn command_line_overrides_the_config_file_which_overrides_defaults() {
        let config: ConfigFile = toml::from_str(
            r#"
model = "/etc/asa/other.onnx"
mapping = "/etc/asa/mapping.toml"
interval_ms = 500
[policy]
window = 8
cooldown_s = 30
"#,
        )
        .unwrap();
        let mut a = args();
        a.cooldown_s = Some(5.0);
        let s = RunSettings::merge(&a, config, None).unwrap();
        assert_eq!(s.sources.model, PathBuf::from("/m.onnx"));
        assert_eq!(
            s.sources.mapping.as_deref(),
            Some(Path::new("/etc/asa/mapping.toml"))
        );
        assert_eq!(s.interval, Duration::from_millis(500));
        assert_eq!(s.policy.voting.window, 8);
        assert_eq!(s.policy.voting.decay, 0.8);
        assert_eq!(s.policy.cooldown, Duration::from_secs(5));
        assert_eq!(s.policy.min_margin, PolicyConfig::default().min_margin);
        let plain = RunSettings::merge(&args(), ConfigFile::default(), None).unwrap();
        assert_eq!(plain.interval, Duration::from_millis(DEFAULT_INTERVAL_MS));
        assert_eq!(
            plain.settled_interval,
            Some(Duration::from_millis(DEFAULT_SETTLED_INTERVAL_MS))
        );
        let config: ConfigFile = toml::from_str("settled_interval_ms = 0").unwrap();
        let off = RunSettings::merge(&args(), config, None).unwrap();
        assert_eq!(off.settled_interval, None, "0 turns it off");
        let mut a = args();
        a.interval_ms = Some(20_000);
        let slow = RunSettings::merge(&a, ConfigFile::default(), None).unwrap();
        assert_eq!(
            slow.settled_interval,
            Some(Duration::from_secs(20)),
            "never shorter than the tick by default"
        );
        assert_eq!(
            plain.nice, 19,
            "the decision thread yields to the workload by default"
        );
        assert_eq!(plain.policy, PolicyConfig::default());
        assert!(!plain.dry_run && plain.decision_log.is_none() && !plain.log_features);
        let config: ConfigFile = toml::from_str("log_features = true").unwrap();
        assert!(
            RunSettings::merge(&args(), config, None)
                .unwrap()
                .log_features
        );
        let mut a = args();
        a.log_features = true;
        let s = RunSettings::merge(&a, ConfigFile::default(), None).unwrap();
        assert!(s.log_features);
    }

    #[test]
    fn bad_settings_are_refused() {
        let mut a = args();
        a.interval_ms = Some(10);
        let err = RunSettings::merge(&a, ConfigFile::default(), None).unwrap_err();
        assert!(err.to_string().contains("at least 100 ms"), "{err}");
        let mut a = args();
        a.cooldown_s = Some(-1.0);
        assert!(RunSettings::merge(&a, ConfigFile::default(), None).is_err());
        for nice in [-21, 20] {
            let mut a = args();
            a.nice = Some(nice);
            let err = RunSettings::merge(&a, ConfigFile::default(), None).unwrap_err();
            assert!(err.to_string().contains("-20..=19"), "{err}");
        }
        let config: ConfigFile = toml::from_str("nice = 10").unwrap();
        assert_eq!(RunSettings::merge(&args(), config, None).unwrap().nice, 10);
        let config = ConfigFile {
            policy: PolicySection {
                decay: Some(0.0),
                ..PolicySection::default()
            },
            ..ConfigFile::default()
        };
        let err = RunSettings::merge(&args(), config, None).unwrap_err();
        assert!(format!("{err:#}").contains("[policy]"), "{err:#}");
        for bad in [
            "[policy]\nquarantine_failures = 0",
            "[policy]\nquarantine_base_s = -1",
            "[policy]\nquarantine_base_s = 100\nquarantine_max_s = 10",
        ] {
            let config: ConfigFile = toml::from_str(bad).unwrap();
            let err = RunSettings::merge(&args(), config, None).unwrap_err();
            assert!(format!("{err:#}").contains("quarantine"), "{bad}: {err:#}");
        }
        let config: ConfigFile =
            toml::from_str("[policy]\nquarantine_base_s = 20\nquarantine_failures = 3").unwrap();
        let q = RunSettings::merge(&args(), config, None)
            .unwrap()
            .policy
            .quarantine;
        assert_eq!((q.base, q.failures), (Duration::from_secs(20), 3));
        assert_eq!(q.max, QuarantineConfig::default().max);
        let mut a = args();
        a.settled_interval_ms = Some(500);
        let err = RunSettings::merge(&a, ConfigFile::default(), None).unwrap_err();
        assert!(err.to_string().contains("0 (off) or at least"), "{err}");
        let err = toml::from_str::<ConfigFile>("modle = \"x\"").unwrap_err();
        assert!(err.to_string().contains("unknown field"), "{err}");
    }

    /// The shipped example (agent/dist/asa.toml) is all comments; with every key uncommented
    /// it parses and sets every field, with the documented defaults.
    #[test]
    fn shipped_example_config_parses_with_every_key() {
        let text = include_str!("../dist/asa.toml");
        assert_eq!(
            toml::from_str::<ConfigFile>(text).unwrap(),
            ConfigFile::default()
        );
        let uncommented: String = text
            .lines()
            .map(|l| {
                let key = l.strip_prefix("# ").and_then(|rest| rest.split_once(" = "));
                match key {
                    Some((k, _)) if k.chars().all(|c| c.is_ascii_lowercase() || c == '_') => {
                        l[2..].to_string()
                    }
                    _ => l.to_string(),
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        let config: ConfigFile = toml::from_str(&uncommented).unwrap();
        assert!(config.model.is_some() && config.mapping.is_some() && config.onnxruntime.is_some());
        assert!(config.decision_log.is_some() && config.no_bpf == Some(false));
        assert_eq!(config.log_features, Some(false));
        assert_eq!(config.dbus, Some(false));
        assert_eq!(config.nice, Some(DEFAULT_DECISION_NICE));
        assert_eq!(config.interval_ms, Some(DEFAULT_INTERVAL_MS));
        assert_eq!(
            config.settled_interval_ms,
            Some(DEFAULT_SETTLED_INTERVAL_MS)
        );
        let s = RunSettings::merge(&RunArgs::default(), config, None).unwrap();
        assert_eq!(s.policy, PolicyConfig::default());
    }

    /// The shipped unit (agent/dist/asa.service) keeps what issue 32 asks for: start limits
    /// with its restarts, notify readiness with a watchdog the agent feeds at half the period,
    /// and the sandbox settings the VM test rebuilds (vm_hardening.rs reads the capability set
    /// from the unit itself).
    #[test]
    fn the_shipped_unit_has_start_limits_a_watchdog_and_a_sandbox() {
        let unit = include_str!("../dist/asa.service");
        let value = |key: &str| {
            unit.lines()
                .find_map(|l| l.strip_prefix(&format!("{key}=")))
                .unwrap_or_else(|| panic!("{key} is not set"))
        };
        let unit_section = unit.split("[Service]").next().unwrap();
        assert!(unit_section.contains("StartLimitIntervalSec=300"));
        assert!(unit_section.contains("StartLimitBurst=5"));
        assert_eq!(value("Restart"), "on-failure");
        assert_eq!(value("Type"), "notify");
        assert_eq!(value("NotifyAccess"), "main");
        let watchdog: u64 = value("WatchdogSec").parse().unwrap();
        assert!(Duration::from_secs(watchdog) >= Duration::from_secs(30));
        for (key, want) in [
            ("NoNewPrivileges", "yes"),
            ("ProtectSystem", "strict"),
            ("ProtectHome", "yes"),
            ("PrivateTmp", "yes"),
            ("PrivateDevices", "yes"),
            ("ProtectKernelTunables", "yes"),
            ("RestrictAddressFamilies", "AF_UNIX AF_NETLINK"),
            ("SystemCallArchitectures", "native"),
            ("MemoryDenyWriteExecute", "yes"),
            (
                "CapabilityBoundingSet",
                "CAP_SYS_ADMIN CAP_BPF CAP_PERFMON CAP_SYS_NICE CAP_SYS_PTRACE",
            ),
        ] {
            assert_eq!(value(key), want, "{key}");
        }
        // The runtime directories the agent writes (socket, lock) and the decision log's.
        assert!(value("RuntimeDirectory")
            .split_whitespace()
            .any(|d| d == "asa"));
        assert_eq!(
            Path::new(control::DEFAULT_SOCKET).parent(),
            Some(Path::new("/run/asa"))
        );
        assert_eq!(value("LogsDirectory"), "asa");
        // The system-call deny list keeps what the agent and the experts use.
        let denied = value("SystemCallFilter");
        assert!(denied.starts_with('~'));
        for needed in ["@privileged", "@debug", "@resources", "@process"] {
            assert!(!denied.contains(needed), "{needed} is denied");
        }
    }

    /// While the agent starts, `status` reports the kernel's own scheduler with the kernel's
    /// state read at each request, consistent exactly when no BPF scheduler is attached (a
    /// killed agent's expert still detaching is a disagreement, not hidden), and refuses pins.
    #[test]
    fn a_starting_agent_reports_eevdf_and_whether_the_kernel_runs_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("root")).unwrap();
        std::fs::write(root.join("enable_seq"), "3\n").unwrap();
        let eevdf = Active {
            expert: EEVDF.to_string(),
            since_unix_ms: 1,
            pid: None,
        };
        let answer = starting(eevdf, SchedExt::at(root), Catalogue::builtin());
        let status = || answer(Request::Status).status.unwrap();
        std::fs::write(root.join("state"), "enabled\n").unwrap();
        std::fs::write(root.join("root/ops"), "bpfland_1.1.4_x86_64\n").unwrap();
        let st = status();
        assert_eq!(
            (st.mode.as_str(), st.active.expert.as_str()),
            ("starting", EEVDF)
        );
        assert_eq!(st.note, STARTING_NOTE);
        assert_eq!(
            st.kernel.unwrap().ops.as_deref(),
            Some("bpfland_1.1.4_x86_64")
        );
        assert_eq!(st.consistent, Some(false));
        std::fs::write(root.join("state"), "disabled\n").unwrap();
        assert_eq!(status().consistent, Some(true));
        std::fs::remove_file(root.join("state")).unwrap();
        let st = status();
        assert!(st.kernel.is_none() && st.consistent.is_none(), "{st:?}");
        for request in [
            Request::Pin {
                expert: "bpfland".into(),
            },
            Request::Unpin,
        ] {
            let r = answer(request);
            assert!(
                !r.ok && r.error.as_deref() == Some(STARTING_REFUSAL),
                "{r:?}"
            );
        }
    }

    #[test]
    fn config_paths_are_relative_to_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("asa.toml");
        std::fs::write(
            &path,
            "model = \"models/c.onnx\"\ndecision_log = \"/var/log/d.jsonl\"\n",
        )
        .unwrap();
        let config = ConfigFile::load(&path).unwrap();
        assert_eq!(config.model, Some(dir.path().join("models/c.onnx")));
        assert_eq!(config.decision_log, Some(PathBuf::from("/var/log/d.jsonl")));
        let err = ConfigFile::load(&dir.path().join("none.toml")).unwrap_err();
        assert!(format!("{err:#}").contains("none.toml"), "{err:#}");
    }
}
