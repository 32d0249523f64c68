//! `asa run`: the daemon. Perception → decision → action, once per tick:
//! sample the machine, classify it, vote (Algorithm 1), look the class up in the mapping table,
//! and switch through the controller when the policy says so, unless an `asa pin` holds the
//! scheduler. `--dry-run` decides and logs without a supervisor (no sched_ext and, procfs-only,
//! no root needed).
//!
//! - [`settings`]: the command line over the config file over the defaults;
//! - `pipeline`: one tick composed, perception's sample into the decision engine;
//! - `decision_loop`: the decision thread, tick by tick, and what it does with a decision;
//! - `steady`: when a glance at /proc may stand in for a full tick (a steady vote);
//! - `apps`: per-application mode (a layer-plan expert runs): applications, classes, hints;
//! - `status_sink`: where the loop reads the agent's state and publishes its decisions;
//! - `control_socket`: the socket from its bind on, and its answers before the controller's;
//! - `foreign_wait`: another tool's scheduler at start, waited for;
//! - [`heartbeat`]: the systemd watchdog, fed while the loop makes progress;
//! - [`decision_log`]: one JSON line per tick.
//!
//! The control socket serves `asa status` from the start (mode `starting` while the slow
//! start-up work runs, then `waiting` or `daemon`). Everything the decision needs (schema, ONNX
//! Runtime, model, mapping) is loaded and checked before the scheduler is touched: a bad model
//! is one error at start and nothing is switched. SIGINT/SIGTERM/SIGHUP stop the loop and the
//! controller returns the machine to EEVDF.

mod apps;
mod control_socket;
pub mod decision_log;
mod decision_loop;
mod foreign_wait;
pub mod heartbeat;
mod pipeline;
pub mod settings;
mod status_sink;
mod steady;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::SystemTime;

use anyhow::{bail, Context, Result};
use asa_experts::sched_ext::DEFAULT_SYSFS_ROOT;
use asa_experts::supervisor::unix_ms;
use asa_experts::{Active, Catalogue, SchedExt, ScxState, Supervisor, SupervisorConfig, EEVDF};

use crate::action::controller::{Controller, StandbySettings};
use crate::control::{self, AgentLink, AgentStatus, DecisionStatus};
use crate::dbus;
use crate::decision::engine::DecisionEngine;
use crate::sd_notify;
use crate::stop::Stop;
use apps::{AppMode, AppsControl};
use control_socket::{starting, status_only, ControlSocket, DRY_RUN_REFUSAL};
use decision_loop::decision_loop;
use foreign_wait::supervisor_once_free;
use heartbeat::Heartbeat;
use pipeline::Pipeline;
use settings::{RunArgs, RunSettings};
use status_sink::Sink;

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

impl DaemonContext {
    /// The context with `plan` given to the catalogue's layer-plan experts (each with its own
    /// `layer_policies` over it), at the default hint map.
    fn with_layer_plan(self, plan: &asa_layers::LayerPlan) -> Result<Self> {
        let catalogue = self
            .catalogue
            .with_layer_plan(std::path::Path::new(asa_layers::DEFAULT_HINT_MAP), plan)
            .map_err(|why| anyhow::anyhow!("the mapping table's layer plan: {why}"))?;
        Ok(Self { catalogue, ..self })
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
    let control = serve_while_starting(&ctx)?;
    // Everything the decision needs, before the scheduler is touched.
    let pipeline = Pipeline::load(&settings, &ctx.catalogue, EEVDF)?;
    // The layer-plan experts run the table's plan: its layer rows over the default plan.
    let plan = pipeline.engine.layer_plan().clone();
    let ctx = ctx.with_layer_plan(&plan)?;
    let apps = AppMode::new(&settings, &ctx.catalogue, plan)?;
    let scx = SchedExt::system()?;
    // The bus name too, before the scheduler is touched: scx_loader owning it is one error.
    let dbus_agent = AgentLink::refusing("the agent is starting: try again in a moment");
    let dbus_service = settings
        .dbus
        .then(|| serve_dbus(dbus_agent.clone(), &ctx.catalogue))
        .transpose()?;
    let heartbeat = Heartbeat::start(stop.clone());
    sd_notify::notify_or_log("READY=1\nSTATUS=starting");
    let links = [&control.link, &dbus_agent];
    let Some(supervisor) = supervisor_once_free(&scx, &ctx, &settings, &stop, &heartbeat, &links)?
    else {
        log::info!("stopped while waiting for the foreign scheduler to go");
        return Ok(());
    };
    let mut controller =
        start_controller(supervisor, &ctx, &pipeline.engine, &links, apps.control());
    log::info!(
        "agent serving {}; deciding every {} ms",
        ctx.socket.display(),
        settings.interval.as_millis()
    );
    sd_notify::notify_or_log("STATUS=deciding");
    let sink = Sink::Controller(controller.handle());
    let decisions = spawn_decision_thread(pipeline, sink, settings, stop.clone(), heartbeat, apps)?;
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

/// The control socket, bound and answering before the slow start-up work: mode `starting`,
/// EEVDF active (the agent has started nothing), the kernel's state read at each request.
fn serve_while_starting(ctx: &DaemonContext) -> Result<ControlSocket> {
    let eevdf = Active {
        expert: EEVDF.to_string(),
        since_unix_ms: unix_ms(SystemTime::now()),
        pid: None,
    };
    let sysfs = SchedExt::at(DEFAULT_SYSFS_ROOT);
    let control = ControlSocket::serve(
        &ctx.socket,
        AgentLink::new(starting(eevdf, sysfs, ctx.catalogue.clone())),
    )?;
    log::info!(
        "serving {} (mode starting) while the classifier model loads",
        ctx.socket.display()
    );
    sd_notify::notify_or_log("STATUS=starting: loading the classifier model");
    Ok(control)
}

/// The controller over `supervisor`, answering `links` from now on (the per-application
/// requests through `apps`); `asa status` shows the engine, and before the first vote the
/// standby pool holds the table's overall best.
fn start_controller(
    supervisor: Supervisor,
    ctx: &DaemonContext,
    engine: &DecisionEngine,
    links: &[&AgentLink],
    apps: AppsControl,
) -> Controller {
    let controller = Controller::new(
        supervisor,
        "daemon",
        "the decision engine chooses the expert; `asa pin` overrides it until `asa unpin`",
    )
    .with_standby(ctx.standby.clone());
    let handle = controller.handle();
    handle.set_standby_candidates(
        Vec::new(),
        engine.policy().insurance_expert().map(str::to_owned),
    );
    handle.set_decision(DecisionStatus::new(engine.info().clone()));
    for link in links {
        let (handle, apps) = (handle.clone(), apps.clone());
        link.set(move |request| apps.answer(request, &handle));
    }
    controller
}

/// The decision thread: the loop until it ends or `stop` is set; its end stops the agent.
fn spawn_decision_thread(
    pipeline: Pipeline,
    sink: Sink,
    settings: RunSettings,
    stop: Stop,
    heartbeat: Arc<Heartbeat>,
    apps: AppMode,
) -> Result<JoinHandle<Result<()>>> {
    std::thread::Builder::new()
        .name("decision".into())
        .spawn(move || {
            let result = decision_loop(pipeline, sink, &settings, &stop, &heartbeat, Some(apps));
            stop.request();
            result
        })
        .context("spawning the decision thread")
}

/// `--dry-run`: no supervisor; `asa status` is served, from the start as for [`run`], when the
/// socket can be bound (another agent may serve it: the dry run then goes without).
fn dry_run(settings: RunSettings, ctx: DaemonContext, stop: Stop) -> Result<()> {
    let scx = SchedExt::at(DEFAULT_SYSFS_ROOT);
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
    let pipeline = Pipeline::load(&settings, &ctx.catalogue, &current)?;
    let status = Arc::new(Mutex::new(AgentStatus {
        decision: Some(DecisionStatus::new(pipeline.engine.info().clone())),
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
    decision_loop(
        pipeline,
        Sink::DryRun(status),
        &settings,
        &stop,
        &heartbeat,
        None,
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

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use crate::control;

    /// The shipped unit (agent/dist/asa.service) keeps what issue 32 asks for: start limits
    /// with its restarts, notify readiness with a watchdog the agent feeds at half the period,
    /// and the sandbox settings the VM test rebuilds (vm_hardening.rs reads the capability set
    /// from the unit itself).
    #[test]
    fn the_shipped_unit_has_start_limits_a_watchdog_and_a_sandbox() {
        let unit = include_str!("../../dist/asa.service");
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
}
