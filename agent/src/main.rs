//! `asa`: the adaptive scheduling agent's command line.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context, Result};
use asa_agent::action::controller::{Controller, StandbySettings, JOB_TIMEOUT};
use asa_agent::action::switch_bench;
use asa_agent::control::{self, client, expert_stats, server, AgentStatus, Request, Response};
use asa_agent::decision::standby::StandbyBounds;
use asa_agent::stop::Stop;
use asa_experts::supervisor::unix_ms;
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
    Status {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Wait until the agent is up (not starting), reports this expert active and the kernel
        /// agrees. Polls the agent after 0.1, 0.2, 0.4, 0.8 s and then once a second: each poll
        /// is a thread and a status snapshot in the agent, which the agent's own perception
        /// counts (ten polls a second made an idle lab VM look busy to the classifier).
        #[arg(long)]
        wait_for: Option<String>,
        /// Seconds to wait with --wait-for.
        #[arg(long, default_value_t = 90)]
        timeout: u64,
    },
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
        Command::Status {
            json,
            wait_for,
            timeout,
        } => status(&cli, *json, wait_for.as_deref(), *timeout),
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

/// The pause before poll number `n` (from 0) of `asa status --wait-for`: 100 ms, doubling, at
/// most a second.
fn wait_poll_interval(n: u32) -> Duration {
    Duration::from_millis(100u64.saturating_mul(1 << n.min(4)).min(1000))
}

fn status(cli: &Cli, json: bool, wait_for: Option<&str>, timeout: u64) -> Result<ExitCode> {
    let t0 = Instant::now();
    let mut polls = 0;
    loop {
        let asked = Instant::now();
        let answer = client::request(&cli.socket, &Request::Status, Duration::from_secs(10))?;
        let answered_in = asked.elapsed();
        let agent = match answer {
            // An agent that refuses (busy: every connection answers a request) is no absent
            // agent: say so, or ask again while waiting.
            Some(r) if !r.ok && wait_for.is_none() => bail!(
                "the agent did not answer: {}",
                r.error.as_deref().unwrap_or("no reason given")
            ),
            Some(r) => r.status,
            None => None,
        };
        let done = match (wait_for, &agent) {
            (None, _) => true,
            // A starting agent runs nothing yet (it reports the kernel's own scheduler): wait
            // for it to be up.
            (Some(want), Some(st)) => {
                st.mode != "starting" && st.active.expert == want && st.consistent == Some(true)
            }
            (Some(_), None) => false,
        };
        if done || t0.elapsed() > Duration::from_secs(timeout) {
            let kernel = SchedExt::at(asa_experts::sched_ext::DEFAULT_SYSFS_ROOT)
                .snapshot()
                .ok();
            let stats = active_expert_stats(&catalogue(cli)?, agent.as_ref(), kernel.as_ref());
            if json {
                let out = serde_json::json!({
                    "agent": agent,
                    "kernel": kernel,
                    "expert_stats": stats,
                    // Connect to answer, this process's start-up left out.
                    "answered_in_ms": agent.as_ref().map(|_| answered_in.as_secs_f64() * 1e3),
                });
                println!("{}", serde_json::to_string_pretty(&out)?);
            } else {
                print_status(agent.as_ref());
                for line in stats.iter().flat_map(expert_stats::format_expert_stats) {
                    println!("{line}");
                }
            }
            if !done {
                eprintln!(
                    "asa: error: the agent did not report {} within {timeout} s",
                    wait_for.unwrap_or_default()
                );
                return Ok(ExitCode::FAILURE);
            }
            return Ok(ExitCode::SUCCESS);
        }
        std::thread::sleep(wait_poll_interval(polls));
        polls += 1;
    }
}

/// The stats file of the expert that runs (the agent's view, else the kernel's ops name), when
/// the catalogue declares one.
fn active_expert_stats(
    catalogue: &Catalogue,
    agent: Option<&AgentStatus>,
    kernel: Option<&asa_experts::ScxSnapshot>,
) -> Option<expert_stats::ExpertStats> {
    let (expert, since) = match agent {
        Some(st) => (
            catalogue.get(&st.active.expert)?,
            Some(st.active.since_unix_ms),
        ),
        None => (catalogue.by_ops(kernel?.ops.as_deref()?)?, None),
    };
    expert_stats::read_expert_stats(expert, since)
}

fn ago(at_unix_ms: u64) -> String {
    let now = unix_ms(SystemTime::now());
    format!(
        "{:.1} s ago",
        now.saturating_sub(at_unix_ms) as f64 / 1000.0
    )
}

fn print_status(agent: Option<&AgentStatus>) {
    let scx = SchedExt::at(asa_experts::sched_ext::DEFAULT_SYSFS_ROOT);
    match scx.check_present().and_then(|_| scx.snapshot()) {
        Ok(k) => {
            println!(
                "kernel:      sched_ext {}{} (enable_seq {}, nr_rejected {})",
                k.state,
                k.ops
                    .as_deref()
                    .map(|o| format!(", ops {o}"))
                    .unwrap_or_default(),
                k.enable_seq,
                k.nr_rejected.map(|n| n.to_string()).unwrap_or("?".into())
            );
            let events: Vec<String> = k
                .events
                .iter()
                .filter(|(_, v)| **v != 0)
                .map(|(name, v)| format!("{}={v}", name.trim_start_matches("SCX_EV_")))
                .collect();
            if !events.is_empty() {
                println!("events:      {}", events.join(" "));
            }
        }
        Err(e) => println!("kernel:      {e:#}"),
    }
    let Some(st) = agent else {
        println!("agent:       not running (the kernel default runs unless another tool attached a scheduler)");
        return;
    };
    println!(
        "agent:       {} (pid {}){}",
        st.mode,
        st.pid,
        st.pinned
            .as_ref()
            .map(|p| format!(", pinned {p}"))
            .unwrap_or_default()
    );
    println!(
        "active:      {}{} since {}",
        st.active.expert,
        st.active
            .pid
            .map(|p| format!(" (pid {p})"))
            .unwrap_or_default(),
        ago(st.active.since_unix_ms)
    );
    if let Some(to) = &st.switching_to {
        println!("switching:   to {to}");
    }
    if let Some(s) = &st.last_switch {
        let f = |v: Option<f64>| v.map(|v| format!("{v:.0} ms")).unwrap_or("-".into());
        println!(
            "last switch: {} -> {} in {:.0} ms (new loaded while old ran {}, stop {}, start {}, EEVDF gap {}), {}",
            s.from,
            s.to,
            s.total_ms,
            f(s.prepare_ms),
            f(s.stop_ms),
            f(s.start_ms),
            f(s.eevdf_gap_ms),
            ago(s.at_unix_ms)
        );
    }
    if let Some(e) = &st.last_event {
        println!("last event:  {} ({})", e.message, ago(e.at_unix_ms));
    }
    if let Some(e) = &st.last_error {
        println!("last error:  {} ({})", e.message, ago(e.at_unix_ms));
    }
    // A starting agent has no pool yet (its settings apply once it is up).
    if st.mode != "starting" {
        print_standby(&st.standby);
    }
    if let Some(d) = &st.decision {
        print_decision(d);
    }
    println!("note:        {}", st.note);
    match st.consistent {
        Some(true) => println!("consistent:  yes (the kernel runs what the agent believes)"),
        Some(false) => println!("consistent:  NO (the kernel disagrees with the agent)"),
        None if st.mode == "dry-run" => println!("consistent:  (dry run: nothing is switched)"),
        None if st.mode == "waiting" => {
            println!("consistent:  (waiting: another tool's scheduler runs, see the note)")
        }
        None if st.mode == "starting" => {
            println!("consistent:  (starting: the kernel's state is unknown)")
        }
        None => println!("consistent:  (switch in progress)"),
    }
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn print_standby(s: &control::StandbyStatus) {
    if s.max == 0 {
        println!("standby:     off (--standby 0)");
        return;
    }
    println!(
        "standby:     {} of at most {} ({}: wanted [{}]), {} (resident + BPF) of {} budget, {} lost",
        s.experts.len(),
        s.max,
        s.source,
        s.wanted.join(", "),
        mib(s.memory_kib),
        mib(s.memory_budget_kib),
        s.lost
    );
    for e in &s.experts {
        println!(
            "             {:<8} pid {:<6} {:<7} since {}{}, RSS {}, BPF {}",
            e.expert,
            e.pid,
            e.state.to_string(),
            ago(e.since_unix_ms),
            e.load_ms
                .map(|l| format!(" (loaded in {:.1} s)", l / 1000.0))
                .unwrap_or_default(),
            e.rss_kib.map(mib).unwrap_or_else(|| "?".into()),
            e.bpf_kib.map(mib).unwrap_or_else(|| "?".into())
        );
    }
}

fn print_decision(d: &asa_agent::control::DecisionStatus) {
    let e = &d.engine;
    println!(
        "decision:    {}every {} ms, {} ticks; model {} (trained {}, {} classes), mapping {}{}",
        if e.dry_run { "DRY RUN, " } else { "" },
        e.interval_ms,
        d.ticks,
        e.model.display(),
        e.model_info.training_date,
        e.model_info.class_names.len(),
        e.mapping,
        if e.bpf { "" } else { ", no BPF features" }
    );
    if let Some(default) = &e.default_expert {
        println!(
            "default:     {default} (the table's best over all classes: run at start and after {} unsure ticks)",
            e.policy.fallback_after_ticks
        );
    } else if let Some(best) = &e.overall_best {
        println!("             the table's best over all classes: {best}");
    }
    let line = |what: &str, r: &asa_agent::decision::engine::TickRecord| {
        let outcome = serde_json::to_value(&r.outcome)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        println!(
            "{what:<13}{} [{outcome}{}] {}",
            r.decision.summary(),
            r.detail
                .as_deref()
                .map(|d| format!(": {d}"))
                .unwrap_or_default(),
            ago(r.unix_ms)
        );
    };
    if let (Some(every), Some(default)) = (d.settled_interval_ms, &e.default_expert) {
        println!(
            "settled:     the table leaves nothing to decide from {default} (no class's vote would move it): ticking every {every} ms until a pin, a failure or a quarantine"
        );
    }
    if let Some(r) = &d.last {
        line("last tick:", r);
        let mut top: Vec<(&String, &f32)> = r.decision.probabilities.iter().collect();
        top.sort_by(|a, b| b.1.total_cmp(a.1));
        let top: Vec<String> = top
            .iter()
            .take(3)
            .map(|(c, p)| format!("{c} {p:.2}"))
            .collect();
        println!(
            "             top classes {}; tick cost {:.0} us (perception {:.0}, inference {:.0})",
            top.join(", "),
            r.cost.total_us(),
            r.cost.sample_us,
            r.cost.infer_us
        );
    }
    if let Some(r) = &d.last_switch {
        line("last choice:", r);
    }
    for (i, q) in d.quarantine.iter().enumerate() {
        println!(
            "{:<13}{}",
            if i == 0 { "quarantine:" } else { "" },
            asa_agent::decision::quarantine::describe(q)
        );
    }
    if d.unlogged_ticks > 0 {
        println!(
            "{:<13}{} tick(s) could not be written to the decision log (is its disk full?)",
            "decision log:", d.unlogged_ticks
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_for_polls_back_off_to_once_a_second() {
        let pauses: Vec<u64> = (0..7)
            .map(|n| wait_poll_interval(n).as_millis() as u64)
            .collect();
        assert_eq!(pauses, [100, 200, 400, 800, 1000, 1000, 1000]);
        assert_eq!(wait_poll_interval(u32::MAX), Duration::from_secs(1));
    }
}
