//! `asa`: the adaptive scheduling agent's command line: the subcommands wired to the library
//! (`asa status`'s client and its printing are in `cli/status.rs`).

mod cli {
    pub mod apps;
    pub mod status;
}

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use asa_agent::action::controller::{Controller, StandbySettings, JOB_TIMEOUT};
use asa_agent::action::switch_bench;
use asa_agent::control::{self, client, server, Request, Response};
use asa_agent::decision::standby::StandbyBounds;
use asa_agent::stop::Stop;
use asa_experts::{locate_binary, Catalogue, SchedExt, Supervisor, SupervisorConfig};
use clap::{Parser, Subcommand};

/// How long `asa pin`/`asa unpin` wait for the agent: its job deadline and a little more, so
/// the agent's own "did not finish" answer arrives before the client gives up.
const CLIENT_JOB_WAIT: Duration = JOB_TIMEOUT.saturating_add(Duration::from_secs(5));

#[derive(Parser)]
#[command(
    name = "asa",
    version,
    about = "ASA: adaptive scheduling agent for sched_ext"
)]
struct Cli {
    /// The agent's control socket.
    #[arg(long, global = true, env = "ASA_SOCKET", default_value = control::DEFAULT_SOCKET)]
    socket: PathBuf,
    /// Expert catalogue (default: the one built in, experts/catalogue.toml).
    #[arg(long, global = true, env = "ASA_CATALOGUE")]
    catalogue: Option<PathBuf>,
    /// Seconds an expert may take to attach.
    #[arg(long, global = true, default_value_t = 60)]
    enable_timeout: u64,
    /// Nice value the expert processes start with (-20..19; negative: their start, BPF
    /// loading and verification, goes ahead of a saturating workload).
    #[arg(long, global = true, env = "ASA_EXPERT_NICE", default_value_t = asa_experts::supervisor::DEFAULT_EXPERT_NICE, allow_hyphen_values = true,
          value_parser = clap::value_parser!(i32).range(-20..=19))]
    expert_nice: i32,
    /// Hot standbys to keep (0: none): experts started ahead of need at low priority, loaded
    /// and held at their attach gates, so a switch to one is "stop the old, release the gate".
    /// `asa run` keeps the experts of the next-voted classes and the table's overall best.
    #[arg(long, global = true, env = "ASA_STANDBY", default_value_t = asa_agent::decision::standby::DEFAULT_STANDBY)]
    standby: usize,
    /// Keep these experts standing by (comma-separated, most wanted first, within --standby)
    /// instead of the decision engine's choice; the only way a foreground `asa pin` keeps any.
    #[arg(
        long,
        global = true,
        env = "ASA_STANDBY_EXPERTS",
        value_delimiter = ','
    )]
    standby_experts: Option<Vec<String>>,
    /// Nice value hot standbys load at (-20..19; raised to --expert-nice when a switch takes
    /// one).
    #[arg(long, global = true, env = "ASA_STANDBY_NICE", default_value_t = asa_experts::supervisor::DEFAULT_STANDBY_NICE, allow_hyphen_values = true,
          value_parser = clap::value_parser!(i32).range(-20..=19))]
    standby_nice: i32,
    /// SIGKILL an expert that has not stopped this many ms after SIGINT, for every expert
    /// (default: the catalogue's `stop_grace_ms`, 250 for bpfland and lavd; else after 10 s).
    /// scx_lavd and scx_bpfland act on SIGINT only once a second; the kernel detaches a killed
    /// scheduler the same way, only its exit report is lost.
    #[arg(long, global = true, env = "ASA_STOP_GRACE_MS")]
    stop_grace_ms: Option<u64>,
    /// Memory budget of the standby pool (MiB over all standbys: resident memory plus the
    /// kernel memory of their BPF maps and programs).
    #[arg(long, global = true, default_value_t = asa_agent::decision::standby::DEFAULT_STANDBY_MEMORY_MIB)]
    standby_memory_mib: u64,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one expert until Ctrl-C (or, with `asa run` active, tell the agent to pin it).
    Pin {
        /// Catalogue name (`asa experts`); `eevdf` detaches every BPF scheduler.
        expert: String,
    },
    /// Hand the choice back to the agent (`asa run` only).
    Unpin,
    /// Show the kernel's scheduler and what the agent believes and did.
    Status(cli::status::StatusArgs),
    /// List the applications of per-application mode (an expert with a layer plan,
    /// scx_layered, runs under `asa run`): cgroup and process group, leader, threads, class,
    /// where the class came from, layer.
    Apps(cli::apps::AppsArgs),
    /// Pin or unpin an application's class (`asa run` only): `asa app set <pid|cgroup> <class>`,
    /// `asa app unset <pid|cgroup>`.
    #[command(subcommand)]
    App(cli::apps::AppCommand),
    /// Run the agent daemon: every tick perception -> classifier -> vote -> mapping -> switch;
    /// serves the control socket (`asa pin` overrides, `asa unpin` hands back).
    Run(asa_agent::daemon::settings::RunArgs),
    /// Serve scx_loader's D-Bus interface (org.scx.Loader on the system bus) for an agent that
    /// runs without --dbus (`asa run`, or a foreground `asa pin`): each call becomes a request
    /// on the control socket, so `scxctl` drives that agent. Runs until SIGINT/SIGTERM; fails
    /// when the bus is missing or another process (scx_loader) owns the name.
    Dbus,
    /// List the experts and whether their binaries are installed.
    Experts,
    /// Record the feature vector every tick to Parquet or CSV (training data for the classifier).
    Record(asa_agent::perception::RecordArgs),
    /// Scenario runner: interactive probes against background loads, scored under each expert.
    Scenario(asa_scenarios::ScenarioArgs),
    /// Calibrate this machine's mapping table (workload class -> best expert) from scenario scores.
    Calibrate(asa_mapping::cli::CalibrateArgs),
    /// Mapping tables: `asa mapping show [FILE]`.
    Mapping(asa_mapping::cli::MappingArgs),
    /// Benchmark: switch time for every ordered pair of experts (needs root and sched_ext).
    BenchSwitch(switch_bench::BenchArgs),
}

fn main() -> ExitCode {
    // Before any thread and before ONNX Runtime loads (see the function).
    asa_experts::opt_out_of_ort_telemetry();
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
        .format_timestamp_millis()
        .init();
    let cli = Cli::parse();
    // One source for the experts' nice value: the supervisors built outside this file (the
    // scenario runner's, the calibration's) and the `asa run` the calibration starts read
    // ASA_EXPERT_NICE, so `--expert-nice` is handed on through it (still single-threaded here).
    std::env::set_var(
        asa_experts::supervisor::EXPERT_NICE_ENV,
        cli.expert_nice.to_string(),
    );
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("asa: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn catalogue(cli: &Cli) -> Result<Catalogue> {
    match &cli.catalogue {
        Some(path) => Ok(Catalogue::load(path)?),
        None => Ok(Catalogue::builtin()),
    }
}

fn standby_settings(cli: &Cli) -> StandbySettings {
    StandbySettings {
        bounds: StandbyBounds {
            max: cli.standby,
            memory_kib: cli.standby_memory_mib.saturating_mul(1024),
        },
        fixed: cli.standby_experts.clone(),
    }
}

fn supervisor_config(cli: &Cli) -> SupervisorConfig {
    SupervisorConfig {
        enable_timeout: Duration::from_secs(cli.enable_timeout),
        expert_nice: cli.expert_nice,
        standby_nice: cli.standby_nice,
        stop_grace: cli.stop_grace_ms.map(Duration::from_millis),
        ..SupervisorConfig::default()
    }
}

fn require_root(what: &str) -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!(
            "{what} needs root (attaching a sched_ext scheduler needs CAP_SYS_ADMIN and CAP_BPF): run it with sudo"
        );
    }
    Ok(())
}

/// The stop of a foreground run or the daemon: SIGINT, SIGTERM or SIGHUP ends the controller
/// loop and EEVDF is restored.
fn stop_on_signals() -> Result<Stop> {
    Stop::on_signals(&asa_agent::stop::STOP_SIGNALS)
}

fn run(cli: Cli) -> Result<ExitCode> {
    match &cli.command {
        Command::Pin { expert } => pin(&cli, expert),
        Command::Record(args) => {
            asa_agent::perception::record(args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Scenario(args) => {
            // `--catalogue` / ASA_CATALOGUE: the runs pin that catalogue's experts.
            match &cli.catalogue {
                Some(_) => asa_scenarios::scenario_command_in(args.clone(), catalogue(&cli)?)?,
                None => asa_scenarios::scenario_command(args.clone())?,
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Calibrate(args) => {
            asa_mapping::cli::calibrate_command(args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Mapping(args) => {
            asa_mapping::cli::mapping_command(args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Unpin => {
            let resp = client::request(&cli.socket, &Request::Unpin, CLIENT_JOB_WAIT)?
                .context("no agent is running (`asa run`); nothing is pinned")?;
            print_response(&resp)
        }
        Command::Status(args) => cli::status::run(args, &cli.socket, || catalogue(&cli)),
        Command::Apps(args) => cli::apps::list(args, &cli.socket),
        Command::App(command) => cli::apps::command(command, &cli.socket),
        Command::Run(args) => daemon(&cli, args),
        Command::Dbus => dbus(&cli),
        Command::Experts => {
            let cat = catalogue(&cli)?;
            println!("{:<8} {:<15} {:<10} binary", "name", "kind", "version");
            for e in cat.experts() {
                let mut bin = if e.is_kernel_default() {
                    "(kernel)".to_owned()
                } else {
                    match locate_binary(e) {
                        Ok(p) => p.display().to_string(),
                        Err(err) => format!("MISSING: {err:#}"),
                    }
                };
                // Variants of one binary differ by their arguments only.
                for arg in &e.args {
                    bin.push(' ');
                    bin.push_str(arg);
                }
                let kind = serde_json::to_value(e.kind)?;
                println!(
                    "{:<8} {:<15} {:<10} {bin}",
                    e.name,
                    kind.as_str().unwrap_or(""),
                    e.version.as_deref().unwrap_or("-")
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::BenchSwitch(args) => {
            require_root("the switch benchmark")?;
            let table = switch_bench::command(args, catalogue(&cli)?, supervisor_config(&cli))?;
            print!("{table}");
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `asa pin`: through the agent when one runs, else supervise in the foreground.
fn pin(cli: &Cli, expert: &str) -> Result<ExitCode> {
    let cat = catalogue(cli)?;
    // Name and binary first: a bad request changes nothing and needs no root to diagnose.
    let target = cat.require(expert)?;
    if !target.is_kernel_default() {
        locate_binary(target)?;
    }
    if let Some(resp) = client::request(
        &cli.socket,
        &Request::Pin {
            expert: expert.to_owned(),
        },
        CLIENT_JOB_WAIT,
    )? {
        return print_response(&resp);
    }
    require_root("asa pin")?;
    let scx = SchedExt::system()?;
    let stop = stop_on_signals()?;
    let supervisor = Supervisor::new(cat, scx, supervisor_config(cli))?;
    let listener = server::bind(&cli.socket)?;
    let mut controller = Controller::new(
        supervisor,
        "foreground",
        "pinned from the command line; Ctrl-C restores EEVDF",
    )
    .with_standby(standby_settings(cli));
    controller.handle().serve(listener);
    let resp = controller.pin(expert);
    if !resp.ok {
        let _ = std::fs::remove_file(&cli.socket);
        eprintln!(
            "asa: error: {}",
            resp.error.as_deref().unwrap_or("switch failed")
        );
        return Ok(ExitCode::FAILURE);
    }
    if let Some(report) = &resp.switch {
        println!(
            "asa: {} is running (switch took {:.0} ms); Ctrl-C stops it and restores EEVDF",
            report.to, report.total_ms
        );
    }
    let result = controller.run(stop.flag());
    let _ = std::fs::remove_file(&cli.socket);
    result?;
    println!("asa: stopped; the machine is on EEVDF");
    Ok(ExitCode::SUCCESS)
}

fn daemon(cli: &Cli, args: &asa_agent::daemon::settings::RunArgs) -> Result<ExitCode> {
    let stop = stop_on_signals()?;
    let ctx = asa_agent::daemon::DaemonContext {
        socket: cli.socket.clone(),
        catalogue: catalogue(cli)?,
        supervisor: supervisor_config(cli),
        standby: standby_settings(cli),
    };
    asa_agent::daemon::run(args, ctx, stop)?;
    Ok(ExitCode::SUCCESS)
}

/// `asa dbus`: org.scx.Loader answered by the agent on the control socket.
fn dbus(cli: &Cli) -> Result<ExitCode> {
    let stop = stop_on_signals()?;
    let socket = cli.socket.clone();
    let agent = asa_agent::dbus::AgentLink::new(move |request| {
        // A status is answered from a snapshot at once; a switch may take minutes.
        let timeout = match request {
            Request::Status => Duration::from_secs(10),
            _ => Duration::from_secs(300),
        };
        match client::request(&socket, &request, timeout) {
            Ok(Some(response)) => response,
            Ok(None) => control::refusal(format!(
                "no agent is running (`asa run`): nothing answers on {}",
                socket.display()
            )),
            Err(e) => control::refusal(format!("{e:#}")),
        }
    });
    if agent.ask(Request::Status).error.is_some() {
        log::warn!(
            "no agent answers on {} yet: D-Bus calls fail until one does",
            cli.socket.display()
        );
    }
    let service = asa_agent::dbus::serve(agent, catalogue(cli)?, &asa_agent::dbus::Bus::System)?;
    log::info!(
        "asa dbus: requests go to the agent on {}; Ctrl-C stops",
        cli.socket.display()
    );
    stop.wait();
    drop(service);
    Ok(ExitCode::SUCCESS)
}

fn print_response(resp: &Response) -> Result<ExitCode> {
    if let Some(report) = &resp.switch {
        println!(
            "asa: {} -> {} in {:.0} ms",
            report.from, report.to, report.total_ms
        );
    }
    if resp.ok {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("asa: error: {}", resp.error.as_deref().unwrap_or("failed"));
        Ok(ExitCode::FAILURE)
    }
}
