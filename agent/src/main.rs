//! `asa`: the adaptive scheduling agent's command line: the subcommands wired to the library
//! (`asa status`'s client and its printing are in `cli/status.rs`).

mod cli {
    pub mod apps;
    pub mod doctor;
    pub mod experts;
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
    /// `--socket` before the command (`asa --socket S status`), for the commands that take it.
    #[command(flatten)]
    socket: SocketArg,
    /// `--catalogue` before the command, for the commands that take it.
    #[command(flatten)]
    catalogue: CatalogueArg,
    /// The supervisor's options before the command (`asa --standby 0 pin bpfland`);
    /// `--expert-nice` here also sets the experts of `asa scenario` and `asa calibrate`.
    #[command(
        flatten,
        next_help_heading = "Supervisor options (run, pin, bench-switch)"
    )]
    supervisor: SupervisorArgs,
    #[command(subcommand)]
    command: Command,
}

/// The options a command shares with others are its own: each command lists only the ones it
/// uses. For scripts they are also accepted before the command (`asa --socket S status`);
/// given on both sides, the one after the command wins.
#[derive(Debug, Clone, Default, clap::Args)]
struct SocketArg {
    /// The agent's control socket (default: /run/asa/control.sock).
    #[arg(long, env = "ASA_SOCKET")]
    socket: Option<PathBuf>,
}

/// `--catalogue` (see [`SocketArg`]).
#[derive(Debug, Clone, Default, clap::Args)]
struct CatalogueArg {
    /// Expert catalogue (default: the one built in, experts/catalogue.toml).
    #[arg(long, env = "ASA_CATALOGUE")]
    catalogue: Option<PathBuf>,
}

/// `asa app`: the socket, taken before or after the subcommand (`asa app set --socket S ...`).
#[derive(Debug, Clone, clap::Args)]
struct AppArgs {
    /// The agent's control socket (default: /run/asa/control.sock).
    #[arg(long, global = true, env = "ASA_SOCKET")]
    socket: Option<PathBuf>,
    #[command(subcommand)]
    command: cli::apps::AppCommand,
}

/// How the commands that run experts (`asa run`, a foreground `asa pin`, `asa bench-switch`)
/// supervise them. Every field is optional so that a value given after the command can be told
/// from one given before it; the defaults are applied by [`Supervising::from`].
#[derive(Debug, Clone, Default, clap::Args)]
struct SupervisorArgs {
    /// Seconds an expert may take to attach (default 60; an expert's `enable_timeout_s` in the
    /// catalogue wins).
    #[arg(long)]
    enable_timeout: Option<u64>,
    /// Nice value the expert processes start with, -20..19 (default -10: their start, BPF
    /// loading and verification, goes ahead of a saturating workload).
    #[arg(long, env = "ASA_EXPERT_NICE", allow_hyphen_values = true,
          value_parser = clap::value_parser!(i32).range(-20..=19))]
    expert_nice: Option<i32>,
    /// Hot standbys to keep: experts started ahead of need at low priority, loaded and held at
    /// their attach gates, so a switch to one is "stop the old, release the gate". `asa run`
    /// keeps the experts of the next-voted classes and the table's overall best, or while that
    /// one runs the expert first in the most classes besides it (default 2; 0: none).
    #[arg(long, env = "ASA_STANDBY")]
    standby: Option<usize>,
    /// Keep exactly these experts standing by (comma-separated, most wanted first, at most
    /// --standby) instead of the decision engine's choice; a foreground `asa pin` keeps only
    /// these.
    #[arg(long, env = "ASA_STANDBY_EXPERTS", value_delimiter = ',')]
    standby_experts: Option<Vec<String>>,
    /// Nice value hot standbys load at, -20..19 (default 19; raised to --expert-nice when a
    /// switch takes one).
    #[arg(long, env = "ASA_STANDBY_NICE", allow_hyphen_values = true,
          value_parser = clap::value_parser!(i32).range(-20..=19))]
    standby_nice: Option<i32>,
    /// SIGKILL an expert this many ms after SIGINT if it has not stopped, for every expert
    /// (default: the expert's `stop_grace_ms` in the catalogue, else 10 s).
    #[arg(long, env = "ASA_STOP_GRACE_MS")]
    stop_grace_ms: Option<u64>,
    /// Memory budget of the standby pool in MiB, over all standbys: resident memory plus the
    /// kernel memory of their BPF maps and programs (default a tenth of the machine's memory, at
    /// least 256).
    #[arg(long)]
    standby_memory_mib: Option<u64>,
}

impl SupervisorArgs {
    /// These options over `before` (the same options given before the command).
    fn over(&self, before: &SupervisorArgs) -> SupervisorArgs {
        SupervisorArgs {
            enable_timeout: self.enable_timeout.or(before.enable_timeout),
            expert_nice: self.expert_nice.or(before.expert_nice),
            standby: self.standby.or(before.standby),
            standby_experts: self
                .standby_experts
                .clone()
                .or_else(|| before.standby_experts.clone()),
            standby_nice: self.standby_nice.or(before.standby_nice),
            stop_grace_ms: self.stop_grace_ms.or(before.stop_grace_ms),
            standby_memory_mib: self.standby_memory_mib.or(before.standby_memory_mib),
        }
    }
}

/// The supervisor options with their defaults applied.
#[derive(Debug, Clone)]
struct Supervising {
    config: SupervisorConfig,
    standby: StandbySettings,
}

impl From<&SupervisorArgs> for Supervising {
    fn from(args: &SupervisorArgs) -> Self {
        let defaults = SupervisorConfig::default();
        Self {
            config: SupervisorConfig {
                enable_timeout: args
                    .enable_timeout
                    .map_or(defaults.enable_timeout, Duration::from_secs),
                expert_nice: args
                    .expert_nice
                    .unwrap_or(asa_experts::supervisor::DEFAULT_EXPERT_NICE),
                standby_nice: args
                    .standby_nice
                    .unwrap_or(asa_experts::supervisor::DEFAULT_STANDBY_NICE),
                stop_grace: args.stop_grace_ms.map(Duration::from_millis),
                ..defaults
            },
            standby: StandbySettings {
                bounds: StandbyBounds {
                    max: args
                        .standby
                        .unwrap_or(asa_agent::decision::standby::DEFAULT_STANDBY),
                    memory_kib: args.standby_memory_mib.map_or_else(
                        || {
                            asa_agent::decision::standby::default_standby_memory_kib(
                                asa_agent::decision::standby::mem_total_kib(),
                            )
                        },
                        |mib| mib.saturating_mul(1024),
                    ),
                },
                fixed: args.standby_experts.clone(),
            },
        }
    }
}

#[derive(Subcommand)]
// Parsed once per process: boxing the larger arguments (calibrate's) would buy nothing.
#[allow(clippy::large_enum_variant)]
enum Command {
    /// Run one expert until Ctrl-C (or, with `asa run` active, tell the agent to pin it).
    Pin {
        /// Catalogue name (`asa experts`); `eevdf` detaches every BPF scheduler.
        expert: String,
        #[command(flatten)]
        socket: SocketArg,
        #[command(flatten)]
        catalogue: CatalogueArg,
        #[command(flatten, next_help_heading = "Supervisor options")]
        supervisor: SupervisorArgs,
    },
    /// Hand the choice back to the agent (`asa run` only).
    Unpin {
        #[command(flatten)]
        socket: SocketArg,
    },
    /// Show the kernel's scheduler and what the agent believes and did.
    Status {
        #[command(flatten)]
        args: cli::status::StatusArgs,
        #[command(flatten)]
        socket: SocketArg,
        #[command(flatten)]
        catalogue: CatalogueArg,
    },
    /// List the applications of per-application mode (an expert with a layer plan,
    /// scx_layered, runs under `asa run`): cgroup and process group, leader, threads, class,
    /// where the class came from, layer.
    Apps {
        #[command(flatten)]
        args: cli::apps::AppsArgs,
        #[command(flatten)]
        socket: SocketArg,
    },
    /// Pin or unpin an application's class (`asa run` only): `asa app set <pid|cgroup> <class>`,
    /// `asa app unset <pid|cgroup>`.
    App(AppArgs),
    /// Run the agent daemon: every tick perception -> classifier -> vote -> mapping -> switch;
    /// serves the control socket (`asa pin` overrides, `asa unpin` hands back).
    Run {
        #[command(flatten)]
        args: asa_agent::daemon::settings::RunArgs,
        #[command(flatten)]
        socket: SocketArg,
        #[command(flatten)]
        catalogue: CatalogueArg,
        #[command(flatten, next_help_heading = "Supervisor options")]
        supervisor: SupervisorArgs,
    },
    /// Serve scx_loader's D-Bus interface (org.scx.Loader on the system bus) for an agent that
    /// runs without --dbus (`asa run`, or a foreground `asa pin`): each call becomes a request
    /// on the control socket, so `scxctl` drives that agent. Runs until SIGINT/SIGTERM; fails
    /// when the bus is missing or another process (scx_loader) owns the name.
    Dbus {
        #[command(flatten)]
        socket: SocketArg,
        #[command(flatten)]
        catalogue: CatalogueArg,
    },
    /// List the experts: for each, the binary that would run, where it was found
    /// ($ASA_EXPERTS_PATH, the project cache, beside asa, $PATH, the distribution's /usr/bin)
    /// and its version against the catalogue's.
    Experts {
        #[command(flatten)]
        catalogue: CatalogueArg,
    },
    /// Record the feature vector every tick to Parquet or CSV (training data for the classifier).
    Record(asa_agent::perception::RecordArgs),
    /// Scenario runner: interactive probes against background loads, scored under each expert.
    Scenario {
        #[command(flatten)]
        args: asa_scenarios::ScenarioArgs,
        #[command(flatten)]
        catalogue: CatalogueArg,
    },
    /// Calibrate this machine's mapping table (workload class -> best expert) from scenario scores.
    Calibrate(asa_mapping::cli::CalibrateArgs),
    /// Mapping tables: `asa mapping show [FILE]`.
    Mapping(asa_mapping::cli::MappingArgs),
    /// Benchmark: switch time for every ordered pair of experts (needs root and sched_ext).
    BenchSwitch {
        #[command(flatten)]
        args: switch_bench::BenchArgs,
        #[command(flatten)]
        catalogue: CatalogueArg,
        #[command(flatten, next_help_heading = "Supervisor options")]
        supervisor: SupervisorArgs,
    },
    /// Check whether `asa run` can run on this machine: the kernel (sched_ext, BTF), the
    /// privileges, bpffs and cgroup v2, a scheduler another tool attached, the experts, the
    /// files `asa run` would load and the scenarios' tools; one line each, with the fix. Exit
    /// status 1 when something makes `asa run` impossible.
    Doctor {
        #[command(flatten)]
        args: cli::doctor::DoctorArgs,
        #[command(flatten)]
        catalogue: CatalogueArg,
    },
}

impl Command {
    /// Whether the command only prints and exits (a client of the agent or a listing). Such a
    /// command dies quietly of SIGPIPE when its reader goes (`asa scenario list | head`), as
    /// Unix tools do; the daemon, the supervisors and the runners keep Rust's SIGPIPE ignored,
    /// so that a closed pipe or socket is an error they handle, not their death.
    fn only_prints(&self) -> bool {
        match self {
            Command::Status { .. }
            | Command::Apps { .. }
            | Command::App(_)
            | Command::Unpin { .. }
            | Command::Experts { .. }
            | Command::Mapping(_)
            | Command::Doctor { .. } => true,
            Command::Scenario { args, .. } => matches!(
                args.command,
                asa_scenarios::ScenarioCommand::List { .. }
                    | asa_scenarios::ScenarioCommand::Packages { .. }
            ),
            _ => false,
        }
    }
}

fn main() -> ExitCode {
    // Before any thread and before ONNX Runtime loads (see the function).
    asa_experts::opt_out_of_ort_telemetry();
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
        .format_timestamp_millis()
        .init();
    let cli = Cli::parse();
    if cli.command.only_prints() {
        // SAFETY: single-threaded still; restores the default action of one signal.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    // One source for the experts' nice value: the supervisors built outside this file (the
    // scenario runner's, the calibration's) and the `asa run` the calibration starts read
    // ASA_EXPERT_NICE, so `--expert-nice` is handed on through it (still single-threaded here).
    std::env::set_var(
        asa_experts::supervisor::EXPERT_NICE_ENV,
        cli.supervising().config.expert_nice.to_string(),
    );
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("asa: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

impl Cli {
    /// The control socket: the command's `--socket`, else the one before the command, else
    /// the default.
    fn socket(&self) -> PathBuf {
        let after = match &self.command {
            Command::Pin { socket, .. }
            | Command::Unpin { socket }
            | Command::Status { socket, .. }
            | Command::Apps { socket, .. }
            | Command::Run { socket, .. }
            | Command::Dbus { socket, .. } => socket.socket.clone(),
            Command::App(app) => app.socket.clone(),
            _ => None,
        };
        after
            .or_else(|| self.socket.socket.clone())
            .unwrap_or_else(|| PathBuf::from(control::DEFAULT_SOCKET))
    }

    /// The expert catalogue file given: the command's `--catalogue`, else the one before the
    /// command (None: the one built in).
    fn catalogue_file(&self) -> Option<&PathBuf> {
        let after = match &self.command {
            Command::Pin { catalogue, .. }
            | Command::Status { catalogue, .. }
            | Command::Run { catalogue, .. }
            | Command::Dbus { catalogue, .. }
            | Command::Experts { catalogue }
            | Command::Scenario { catalogue, .. }
            | Command::BenchSwitch { catalogue, .. }
            | Command::Doctor { catalogue, .. } => catalogue.catalogue.as_ref(),
            _ => None,
        };
        after.or(self.catalogue.catalogue.as_ref())
    }

    /// The expert catalogue ([`Cli::catalogue_file`], else the one built in).
    fn catalogue(&self) -> Result<Catalogue> {
        match self.catalogue_file() {
            Some(path) => Ok(Catalogue::load(path)?),
            None => Ok(Catalogue::builtin()),
        }
    }

    /// The supervisor options: the command's over those given before it.
    fn supervising(&self) -> Supervising {
        let after = match &self.command {
            Command::Pin { supervisor, .. }
            | Command::Run { supervisor, .. }
            | Command::BenchSwitch { supervisor, .. } => supervisor.over(&self.supervisor),
            _ => self.supervisor.clone(),
        };
        Supervising::from(&after)
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
        Command::Pin { expert, .. } => pin(&cli, expert),
        Command::Record(args) => {
            asa_agent::perception::record(args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Scenario { args, .. } => {
            // `--catalogue` / ASA_CATALOGUE: the runs pin that catalogue's experts.
            let experts = cli.catalogue_file().map(|_| cli.catalogue()).transpose()?;
            match &args.command {
                asa_scenarios::ScenarioCommand::Run(run) if run.oracle_hints => {
                    let hints = asa_agent::action::oracle_hints::OracleHints::new(
                        experts.clone().unwrap_or_else(Catalogue::builtin),
                        asa_layers::default_plan(),
                        asa_layers::DEFAULT_HINT_MAP.into(),
                    );
                    asa_scenarios::scenario_command_observed(
                        args.clone(),
                        experts,
                        Box::new(hints),
                    )?
                }
                _ => match experts {
                    Some(experts) => asa_scenarios::scenario_command_in(args.clone(), experts)?,
                    None => asa_scenarios::scenario_command(args.clone())?,
                },
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Calibrate(args) => {
            // Stage layers runs each application in its labelled class's layer, as
            // `asa scenario run --oracle-hints` does; the other stages do not use it.
            let hints: asa_mapping::layers::ObserverFactory = Box::new(|experts| {
                Box::new(asa_agent::action::oracle_hints::OracleHints::new(
                    experts.clone(),
                    asa_layers::default_plan(),
                    asa_layers::DEFAULT_HINT_MAP.into(),
                ))
            });
            asa_mapping::cli::calibrate_command_with(args, Some(hints))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Mapping(args) => {
            asa_mapping::cli::mapping_command(args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Unpin { .. } => {
            let resp = client::request(&cli.socket(), &Request::Unpin, CLIENT_JOB_WAIT)?
                .context("no agent is running (`asa run`); nothing is pinned")?;
            print_response(&resp)
        }
        Command::Status { args, .. } => cli::status::run(args, &cli.socket(), || cli.catalogue()),
        Command::Apps { args, .. } => cli::apps::list(args, &cli.socket()),
        Command::App(app) => cli::apps::command(&app.command, &cli.socket()),
        Command::Run { args, .. } => daemon(&cli, args),
        Command::Dbus { .. } => dbus(&cli),
        Command::Experts { .. } => {
            print!("{}", cli::experts::list(&cli.catalogue()?));
            Ok(ExitCode::SUCCESS)
        }
        Command::Doctor { args, .. } => cli::doctor::run(args, &cli.catalogue()?),
        Command::BenchSwitch { args, .. } => {
            require_root("the switch benchmark")?;
            let table = switch_bench::command(args, cli.catalogue()?, cli.supervising().config)?;
            print!("{table}");
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `asa pin`: through the agent when one runs, else supervise in the foreground.
fn pin(cli: &Cli, expert: &str) -> Result<ExitCode> {
    let cat = cli.catalogue()?;
    let socket = cli.socket();
    // Name and binary first: a bad request changes nothing and needs no root to diagnose.
    let target = cat.require(expert)?;
    if !target.is_kernel_default() {
        locate_binary(target)?;
    }
    if let Some(resp) = client::request(
        &socket,
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
    let supervising = cli.supervising();
    let supervisor = Supervisor::new(cat, scx, supervising.config)?;
    let listener = server::bind(&socket)?;
    let mut controller = Controller::new(
        supervisor,
        "foreground",
        "pinned from the command line; Ctrl-C restores EEVDF",
    )
    .with_standby(supervising.standby);
    controller.handle().serve(listener);
    let resp = controller.pin(expert);
    if !resp.ok {
        let _ = std::fs::remove_file(&socket);
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
    let _ = std::fs::remove_file(&socket);
    result?;
    println!("asa: stopped; the machine is on EEVDF");
    Ok(ExitCode::SUCCESS)
}

fn daemon(cli: &Cli, args: &asa_agent::daemon::settings::RunArgs) -> Result<ExitCode> {
    let stop = stop_on_signals()?;
    let ctx = asa_agent::daemon::DaemonContext {
        socket: cli.socket(),
        catalogue: cli.catalogue()?,
        supervisor: cli.supervising().config,
        standby: cli.supervising().standby,
    };
    asa_agent::daemon::run(args, ctx, stop)?;
    Ok(ExitCode::SUCCESS)
}

/// `asa dbus`: org.scx.Loader answered by the agent on the control socket.
fn dbus(cli: &Cli) -> Result<ExitCode> {
    let stop = stop_on_signals()?;
    let socket = cli.socket();
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
            cli.socket().display()
        );
    }
    let service = asa_agent::dbus::serve(agent, cli.catalogue()?, &asa_agent::dbus::Bus::System)?;
    log::info!(
        "asa dbus: requests go to the agent on {}; Ctrl-C stops",
        cli.socket().display()
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// `asa <command> --help`, as printed.
    fn help(command: &str) -> String {
        let mut cli = Cli::command();
        cli.build();
        let sub = cli
            .find_subcommand_mut(command)
            .unwrap_or_else(|| panic!("no command {command}"));
        sub.render_long_help().to_string()
    }

    fn parse(args: &[&str]) -> Cli {
        Cli::try_parse_from(args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn commands_that_supervise_no_expert_show_no_supervisor_options() {
        for command in [
            "status", "unpin", "apps", "experts", "doctor", "dbus", "mapping",
        ] {
            let text = help(command);
            for option in [
                "--standby",
                "--expert-nice",
                "--stop-grace-ms",
                "--enable-timeout",
            ] {
                assert!(
                    !text.contains(option),
                    "`asa {command} --help` lists {option}"
                );
            }
        }
        assert!(help("status").contains("--wait-for"));
    }

    #[test]
    fn commands_that_supervise_show_the_supervisor_options() {
        for command in ["run", "pin", "bench-switch"] {
            let text = help(command);
            for option in [
                "--standby",
                "--standby-experts",
                "--standby-nice",
                "--standby-memory-mib",
                "--expert-nice",
                "--stop-grace-ms",
                "--enable-timeout",
            ] {
                assert!(
                    text.contains(option),
                    "`asa {command} --help` lacks {option}"
                );
            }
        }
        assert!(help("run").contains("--take-over"), "and the daemon's own");
    }

    #[test]
    fn socket_and_catalogue_are_listed_only_by_the_commands_that_use_them() {
        for command in ["record", "mapping", "calibrate"] {
            let text = help(command);
            assert!(
                !text.contains("--socket"),
                "`asa {command} --help` lists --socket"
            );
        }
        for command in ["record", "mapping", "unpin", "apps"] {
            let text = help(command);
            assert!(
                !text.contains("--catalogue <"),
                "`asa {command} --help` lists --catalogue"
            );
        }
        for command in ["status", "pin", "unpin", "apps", "app", "run", "dbus"] {
            assert!(
                help(command).contains("--socket"),
                "`asa {command}` lacks --socket"
            );
        }
        for command in [
            "status",
            "pin",
            "run",
            "dbus",
            "experts",
            "scenario",
            "bench-switch",
            "doctor",
        ] {
            assert!(
                help(command).contains("--catalogue"),
                "`asa {command}` lacks --catalogue"
            );
        }
    }

    #[test]
    fn socket_and_catalogue_count_before_and_after_the_command() {
        let before = parse(&["asa", "--socket", "/tmp/a.sock", "status"]);
        assert_eq!(before.socket(), PathBuf::from("/tmp/a.sock"));
        let both = parse(&[
            "asa",
            "--socket",
            "/tmp/a.sock",
            "status",
            "--socket",
            "/tmp/b.sock",
        ]);
        assert_eq!(both.socket(), PathBuf::from("/tmp/b.sock"));
        let app = parse(&[
            "asa",
            "app",
            "set",
            "--socket",
            "/tmp/c.sock",
            "1",
            "interactive",
        ]);
        assert_eq!(app.socket(), PathBuf::from("/tmp/c.sock"));
        let scenario = parse(&["asa", "--catalogue", "/tmp/x.toml", "scenario", "list"]);
        assert_eq!(
            scenario.catalogue_file(),
            Some(&PathBuf::from("/tmp/x.toml"))
        );
        let after = parse(&["asa", "experts", "--catalogue", "/tmp/y.toml"]);
        assert_eq!(after.catalogue_file(), Some(&PathBuf::from("/tmp/y.toml")));
    }

    /// Scripts put them before the command (`asa --standby 0 pin bpfland`); given on both
    /// sides, the one after the command wins.
    #[test]
    fn supervisor_options_count_before_and_after_the_command() {
        let before = parse(&[
            "asa",
            "--standby",
            "0",
            "--expert-nice",
            "-5",
            "pin",
            "bpfland",
        ]);
        let s = before.supervising();
        assert_eq!((s.standby.bounds.max, s.config.expert_nice), (0, -5));
        let after = parse(&["asa", "pin", "bpfland", "--standby-experts", "rusty,lavd"]);
        assert_eq!(
            after.supervising().standby.fixed,
            Some(vec!["rusty".to_owned(), "lavd".to_owned()])
        );
        let both = parse(&[
            "asa",
            "--standby",
            "1",
            "run",
            "--standby",
            "3",
            "--dry-run",
        ]);
        assert_eq!(both.supervising().standby.bounds.max, 3);
        let bench = parse(&[
            "asa",
            "bench-switch",
            "--stop-grace-ms",
            "250",
            "--rounds",
            "1",
        ]);
        assert_eq!(
            bench.supervising().config.stop_grace,
            Some(Duration::from_millis(250))
        );
        // `asa scenario` supervises through ASA_EXPERT_NICE, set from the option before it.
        let scenario = parse(&["asa", "--expert-nice", "3", "experts"]);
        assert_eq!(scenario.supervising().config.expert_nice, 3);
    }

    /// The defaults the help texts name are the ones applied.
    #[test]
    fn the_defaults_in_the_help_are_the_defaults_applied() {
        let s = Supervising::from(&SupervisorArgs::default());
        assert_eq!(s.config.enable_timeout, Duration::from_secs(60));
        assert_eq!(s.config.expert_nice, -10);
        assert_eq!(s.config.standby_nice, 19);
        assert_eq!(s.config.stop_grace, None);
        assert_eq!(s.standby.bounds.max, 2);
        assert_eq!(
            s.standby.bounds.memory_kib,
            asa_agent::decision::standby::default_standby_memory_kib(
                asa_agent::decision::standby::mem_total_kib()
            )
        );
        assert_eq!(s.standby.fixed, None);
        let text = help("run");
        for default in [
            "default 60",
            "default -10",
            "default 2",
            "default 19",
            "default a tenth of the machine's memory",
        ] {
            assert!(text.contains(default), "`asa run --help` lacks {default:?}");
        }
    }

    /// A `--help` says what an option does and its default, not how it came to be: no
    /// measurements, lab anecdotes or expert-specific values.
    #[test]
    fn help_texts_carry_no_history() {
        let mut cli = Cli::command();
        cli.build();
        let mut texts = vec![cli.render_long_help().to_string()];
        for sub in cli.get_subcommands_mut() {
            texts.push(sub.render_long_help().to_string());
        }
        for text in texts {
            for stale in ["lab VM", "ten polls", "250 for bpfland", "made an idle"] {
                assert!(!text.contains(stale), "{stale:?} in:\n{text}");
            }
        }
    }
}
