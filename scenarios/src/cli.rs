//! The `scenario` command line: `list`, `run`, `report`. The agent binary embeds it as
//! `asa scenario ...` (see the README); the crate's own `asa-scenarios` binary runs it
//! standalone, e.g. inside the lab guest.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use log::{error, info};

use crate::catalogue::{catalogue_text, Catalogue, ScenarioSpec};
use crate::dataset::{find_recorder, FeatureRecorder, RecorderConfig};
use crate::progress::Progress;
use crate::runner::{
    prepare_scenario, run_one, run_scenario_observed, BothObservers, CurrentSchedulerOnly,
    ExpertSwitcher, NoObserver, ResultSet, RunObserver, RunOptions, RunOutcome, ScenarioResult,
    SkippedRun, SupervisorSwitcher,
};
use crate::work::WorkUnit;

/// `scenario` command-line arguments.
#[derive(Debug, Clone, Args)]
pub struct ScenarioArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: ScenarioCommand,
}

/// The `scenario` subcommands.
// Parsed once per process: a boxed `RunArgs` would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Subcommand)]
pub enum ScenarioCommand {
    /// List the scenarios (and, with --check-tools, whether each load's tools are installed).
    List {
        /// Scenario file (default: the built-in catalogue).
        #[arg(long)]
        file: Option<PathBuf>,
        /// Check that every load's tools are on PATH.
        #[arg(long)]
        check_tools: bool,
    },
    /// Print the Debian packages the scenarios' loads need, comma-separated (for a lab root
    /// filesystem: `asa-lab run --rootfs $(asa-scenarios packages S6,S22) ...`).
    Packages {
        /// Comma-separated scenario names, or `all`.
        #[arg(default_value = "all")]
        scenarios: String,
        /// Scenario file (default: the built-in catalogue).
        #[arg(long)]
        file: Option<PathBuf>,
    },
    /// Run scenarios under each expert and write results.json plus a report.
    Run(RunArgs),
    /// Rebuild the report from a results.json.
    Report {
        /// The results file written by `run`.
        results: PathBuf,
        /// Output folder (default: the results file's folder).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Expert the scores are compared with.
        #[arg(long, default_value = "eevdf")]
        baseline: String,
    },
}

/// Which way experts are pinned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SwitcherChoice {
    /// The supervisor when the kernel has sched_ext, else the current scheduler only.
    Auto,
    /// The expert supervisor (needs sched_ext and root).
    Supervisor,
    /// No switching: only the running scheduler (EEVDF) can be measured.
    Current,
}

/// In which order the runs happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RunOrder {
    /// Scenario by scenario; within a scenario the experts alternate per repetition (eevdf,
    /// lavd, ..., eevdf, lavd, ...), which spreads drift evenly but switches before every run.
    Interleaved,
    /// Expert by expert: each expert is pinned once and runs every scenario (per repetition).
    /// Far fewer switches (lavd takes about 30 s to attach under TCG); drift of the machine
    /// over time then falls between experts, so prefer it only where switching dominates.
    ByExpert,
}

/// The options of a series of scenario runs that `asa scenario run` and `asa calibrate` share
/// (each flattens them into its arguments): how long each run lasts, waits and pauses, where
/// the loads keep their inputs, and the expert the report compares with. Which scenarios, which
/// experts and how many repetitions each command defines itself: their defaults follow the
/// command's purpose (a one-off comparison, or a calibration that measures the noise).
#[derive(Debug, Clone, PartialEq, Args)]
pub struct ScenarioRunOptions {
    /// Probe duration per run in seconds (split over the phases).
    #[arg(long, default_value_t = 20.0)]
    pub duration: f64,
    /// Shortest phase in seconds: a scenario whose phases would be shorter at --duration runs
    /// longer (0: every scenario runs --duration).
    #[arg(long, default_value_t = 0.0)]
    pub min_phase: f64,
    /// Seconds the background load runs before the probe starts.
    #[arg(long, default_value_t = 2.0)]
    pub settle: f64,
    /// Seconds the scheduler under test (the expert, EEVDF, or the agent's expert) must have
    /// been running before a run's first load starts. Before that wait each run calls sync()
    /// and waits for Dirty + Writeback of /proc/meminfo to fall to 2 MiB (each up to 30 s),
    /// the same for every expert. 0 skips this step: the load starts right after the expert
    /// is in place.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub hold: f64,
    /// Seconds of pause after each run, with every load stopped.
    #[arg(long, default_value_t = 1.0)]
    pub cooldown: f64,
    /// Folder for load inputs (corpora, sources), reused between runs (default:
    /// $TMPDIR/asa-scenarios-work).
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// Expert the report compares the others with (wins, ties and losses against it).
    #[arg(long, default_value = "eevdf")]
    pub baseline: String,
}

/// The times of [`ScenarioRunOptions`], checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunTimes {
    /// `--duration`.
    pub duration: Duration,
    /// `--min-phase`.
    pub min_phase: Duration,
    /// `--settle`.
    pub settle: Duration,
    /// `--hold`.
    pub hold: Duration,
    /// `--cooldown`.
    pub cooldown: Duration,
}

impl ScenarioRunOptions {
    /// The times in seconds as durations: `--duration` must be > 0, the others >= 0.
    pub fn times(&self) -> Result<RunTimes> {
        let secs = |s: f64, what: &str| -> Result<Duration> {
            if !s.is_finite() || s < 0.0 {
                bail!("--{what} must be a finite number of seconds >= 0");
            }
            Ok(Duration::from_secs_f64(s))
        };
        if !(self.duration.is_finite() && self.duration > 0.0) {
            bail!("--duration must be a finite number of seconds > 0");
        }
        Ok(RunTimes {
            duration: secs(self.duration, "duration")?,
            min_phase: secs(self.min_phase, "min-phase")?,
            settle: secs(self.settle, "settle")?,
            hold: secs(self.hold, "hold")?,
            cooldown: secs(self.cooldown, "cooldown")?,
        })
    }

    /// `--work-dir`, or its default `$TMPDIR/asa-scenarios-work`.
    pub fn work_dir(&self) -> PathBuf {
        self.work_dir
            .clone()
            .unwrap_or_else(|| std::env::temp_dir().join("asa-scenarios-work"))
    }
}

/// `scenario run` arguments.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Comma-separated scenario names, or `all`.
    pub scenarios: String,
    /// Experts to compare (catalogue names), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "eevdf")]
    pub experts: Vec<String>,
    /// Repetitions of every (scenario, expert) pair (`asa calibrate` repeats twice by default:
    /// its noise rule needs the run-to-run spread).
    #[arg(long, default_value_t = 1)]
    pub reps: u32,
    // Run times, input folder, baseline: the same as `asa calibrate`'s.
    #[command(flatten)]
    pub run: ScenarioRunOptions,
    /// Scenario file (default: the built-in catalogue).
    #[arg(long)]
    pub file: Option<PathBuf>,
    /// Output folder for results.json and the report.
    #[arg(long, default_value = "scenario-results")]
    pub out: PathBuf,
    /// How experts are pinned.
    #[arg(long, value_enum, default_value = "auto")]
    pub switcher: SwitcherChoice,
    /// Go on with the next scenario when one cannot run (the command still fails at the end).
    #[arg(long)]
    pub keep_going: bool,
    /// Order of the runs.
    #[arg(long, value_enum, default_value = "interleaved")]
    pub order: RunOrder,
    /// Record perception features with `asa record` alongside every run into this folder:
    /// one labelled Parquet file per run plus manifest.toml for the workload classifier.
    #[arg(long, value_name = "DIR")]
    pub record_features: Option<PathBuf>,
    /// The agent binary whose `record` subcommand records (default: this executable when it
    /// is `asa`, else `asa` next to it, else on PATH).
    #[arg(long, value_name = "PATH", requires = "record_features")]
    pub recorder: Option<PathBuf>,
    /// Tick of the feature recording in ms (`asa record --interval-ms`).
    #[arg(long, default_value_t = 1000, requires = "record_features")]
    pub record_interval_ms: u64,
    /// Free text describing the machine, written into the dataset manifest.
    #[arg(long, requires = "record_features")]
    pub machine_note: Option<String>,
    /// Also record every application's features each tick (`asa record --apps`), labelled in
    /// the manifest for the application classifier: the probe, the load's process groups.
    /// Needs the BPF task walk.
    #[arg(long, requires = "record_features")]
    pub record_apps: bool,
    /// Under an expert that takes a layer plan (scx_layered), put the probe and each load in
    /// the layer of its labelled class (`app_class`) through the task-hint map, as a perfect
    /// per-application classifier would; other experts run as without it. Only `asa scenario
    /// run` (it needs the agent's BPF hint writer).
    #[arg(long)]
    pub oracle_hints: bool,
}

fn origin(file: &Option<PathBuf>) -> String {
    file.as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "built-in scenarios.toml".into())
}

/// Run a `scenario` command; experts are pinned as `--switcher` says.
pub fn scenario_command(args: ScenarioArgs) -> Result<()> {
    scenario_command_with(args, None)
}

/// Run a `scenario` command with the caller's own way of pinning experts (e.g. the agent's
/// supervisor built from its catalogue and timeouts, or its control socket); `None` builds one
/// from `--switcher`.
pub fn scenario_command_with(
    args: ScenarioArgs,
    switcher: Option<Box<dyn ExpertSwitcher>>,
) -> Result<()> {
    command(args, switcher, None, None)
}

/// Run a `scenario` command with `observer` told of every run as well (`asa scenario run
/// --oracle-hints`: the agent's hint writer), experts from `experts` when given (as
/// [`scenario_command_in`]).
pub fn scenario_command_observed(
    args: ScenarioArgs,
    experts: Option<asa_experts::Catalogue>,
    observer: Box<dyn RunObserver>,
) -> Result<()> {
    if let (ScenarioCommand::Run(run), Some(experts)) = (&args.command, &experts) {
        for name in &run.experts {
            experts.require(name)?;
        }
    }
    command(args, None, experts, Some(observer))
}

/// Run a `scenario` command whose experts come from `experts` instead of the built-in
/// catalogue (`asa --catalogue FILE scenario run ...`: variants of an expert with other
/// arguments, say). `run` checks every `--experts` name against it before anything runs.
pub fn scenario_command_in(args: ScenarioArgs, experts: asa_experts::Catalogue) -> Result<()> {
    if let ScenarioCommand::Run(run) = &args.command {
        for name in &run.experts {
            experts.require(name)?;
        }
    }
    command(args, None, Some(experts), None)
}

fn command(
    args: ScenarioArgs,
    switcher: Option<Box<dyn ExpertSwitcher>>,
    experts: Option<asa_experts::Catalogue>,
    observer: Option<Box<dyn RunObserver>>,
) -> Result<()> {
    match args.command {
        ScenarioCommand::List { file, check_tools } => {
            let cat = Catalogue::parse(&catalogue_text(file.as_deref())?, &origin(&file))?;
            list(&cat, check_tools);
            Ok(())
        }
        ScenarioCommand::Packages { scenarios, file } => {
            let cat = Catalogue::parse(&catalogue_text(file.as_deref())?, &origin(&file))?;
            let selected = cat.select(&scenarios)?;
            let packages: Vec<String> = cat.packages(&selected).into_iter().collect();
            println!("{}", packages.join(","));
            Ok(())
        }
        ScenarioCommand::Run(run) => run_command(run, switcher, experts, observer),
        ScenarioCommand::Report {
            results,
            out,
            baseline,
        } => {
            let set = ResultSet::load(&results)?;
            let dir = out.unwrap_or_else(|| results.parent().unwrap_or(Path::new(".")).to_owned());
            let report = crate::report::write_report(&set, &baseline, &dir)?;
            print_ranking(&report);
            Ok(())
        }
    }
}

fn list(cat: &Catalogue, check_tools: bool) {
    println!("{:<5} {:<7} {:<48} title", "name", "probe", "background");
    for s in &cat.scenarios {
        let bg = s
            .phases()
            .iter()
            .map(|p| p.load.clone())
            .collect::<Vec<_>>()
            .join(" -> ");
        println!("{:<5} {:<7} {:<48} {}", s.name, s.probe, bg, s.title);
    }
    if check_tools {
        println!();
        for (name, load) in &cat.loads {
            match load.check_tools(name) {
                Ok(()) => println!("load {name:<16} ok ({})", load.package),
                Err(e) => println!("load {name:<16} MISSING: {e}"),
            }
        }
    }
}

/// The switcher `choice` names; its supervisor runs the experts of `experts` (default: the
/// built-in catalogue).
fn make_switcher(
    choice: SwitcherChoice,
    experts: Option<asa_experts::Catalogue>,
) -> Result<Box<dyn ExpertSwitcher>> {
    let has_scx = Path::new(asa_experts::sched_ext::DEFAULT_SYSFS_ROOT).exists();
    Ok(match (choice, has_scx) {
        (SwitcherChoice::Supervisor, _) | (SwitcherChoice::Auto, true) => Box::new(
            SupervisorSwitcher::system_with(
                experts.unwrap_or_else(asa_experts::Catalogue::builtin),
            )
            .context("starting the expert supervisor")?,
        ),
        (SwitcherChoice::Current, _) | (SwitcherChoice::Auto, false) => {
            info!("no sched_ext on this kernel: measuring the current scheduler only");
            Box::new(CurrentSchedulerOnly::eevdf()?)
        }
    })
}

fn run_command(
    args: RunArgs,
    switcher: Option<Box<dyn ExpertSwitcher>>,
    experts: Option<asa_experts::Catalogue>,
    mut extra: Option<Box<dyn RunObserver>>,
) -> Result<()> {
    if args.oracle_hints && extra.is_none() {
        bail!("--oracle-hints needs the agent's hint writer: run it as `asa scenario run`");
    }
    let text = catalogue_text(args.file.as_deref())?;
    let cat = Catalogue::parse(&text, &origin(&args.file))?;
    let selected = cat.select(&args.scenarios)?;
    if args.experts.is_empty() {
        bail!("--experts needs at least one expert");
    }
    if args.reps == 0 {
        bail!("--reps must be at least 1");
    }
    let times = args.run.times()?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let mut switcher = match switcher {
        Some(s) => s,
        None => make_switcher(args.switcher, experts)?,
    };
    // Calibrate once, on the default scheduler and an idle machine, for every run.
    switcher.pin(asa_experts::EEVDF).ok();
    let work_unit = WorkUnit::calibrate();
    let opts = RunOptions {
        experts: args.experts.clone(),
        reps: args.reps,
        rotation: 0,
        duration: times.duration,
        min_phase: times.min_phase,
        settle: times.settle,
        hold: times.hold,
        dirty_limit_kib: crate::precondition::DIRTY_LIMIT_KIB,
        cooldown: times.cooldown,
        work_dir: args.run.work_dir(),
        work_unit,
    };
    let results_path = args.out.join("results.json");
    let mut recorder = match &args.record_features {
        Some(dir) => {
            let mut config =
                RecorderConfig::new(find_recorder(args.recorder.as_deref())?, dir.clone());
            config.interval_ms = args.record_interval_ms;
            config.machine_note = args.machine_note.clone();
            config.apps = args.record_apps;
            Some(FeatureRecorder::new(config)?)
        }
        None => None,
    };
    let mut no_observer = NoObserver;
    let mut no_extra = NoObserver;
    let mut both = BothObservers(
        match recorder.as_mut() {
            Some(r) => r,
            None => &mut no_observer,
        },
        match extra.as_mut() {
            Some(e) => e.as_mut(),
            None => &mut no_extra,
        },
    );
    let observer: &mut dyn RunObserver = &mut both;
    let mut set = ResultSet::new(opts.clone(), text);
    let run_all = match args.order {
        RunOrder::Interleaved => run_interleaved,
        RunOrder::ByExpert => run_by_expert,
    };
    let outcome = run_all(
        &cat,
        &selected,
        switcher.as_mut(),
        &opts,
        observer,
        &mut set,
        &results_path,
        args.keep_going,
    );
    let failed = match outcome {
        Ok(failed) => failed,
        Err(e) => {
            set.save(&results_path)?;
            let _ = switcher.release();
            return Err(e);
        }
    };
    drop(recorder);
    switcher.release()?;
    info!("results: {}", results_path.display());
    let report = crate::report::write_report(&set, &args.run.baseline, &args.out)?;
    print_ranking(&report);
    if !failed.is_empty() {
        bail!(
            "{} scenario(s) could not run: {}",
            failed.len(),
            failed.join(", ")
        );
    }
    let skipped: Vec<String> = set
        .scenarios
        .iter()
        .flat_map(|s| {
            s.skipped
                .iter()
                .map(move |k| format!("{}/{}", s.scenario, k.expert))
        })
        .collect();
    if !skipped.is_empty() {
        bail!(
            "{} run(s) skipped because the expert could not be pinned ({}); see the report",
            skipped.len(),
            skipped.join(", ")
        );
    }
    Ok(())
}

/// Scenario by scenario (experts alternating within each). Returns the scenarios that could
/// not run; an error when one could not run and `keep_going` is off.
#[allow(clippy::too_many_arguments)]
fn run_interleaved(
    cat: &Catalogue,
    selected: &[&ScenarioSpec],
    switcher: &mut dyn ExpertSwitcher,
    opts: &RunOptions,
    observer: &mut dyn RunObserver,
    set: &mut ResultSet,
    results_path: &Path,
    keep_going: bool,
) -> Result<Vec<String>> {
    let progress = Progress::new(selected.len());
    let mut failed = Vec::new();
    for (i, s) in selected.iter().enumerate() {
        info!(
            "scenario {}: {} — {}",
            progress.line(i + 1),
            s.name,
            s.title
        );
        // Each scenario starts at another expert (`RunOptions::rotation`).
        let opts = RunOptions {
            rotation: i,
            ..opts.clone()
        };
        match run_scenario_observed(cat, s, switcher, &opts, observer) {
            Ok(r) => set.scenarios.push(r),
            Err(e) => {
                error!("scenario {} failed: {e:#}", s.name);
                failed.push(s.name.clone());
                let mut r = empty_result(s);
                r.error = Some(format!("{e:#}"));
                set.scenarios.push(r);
                if !keep_going {
                    return Err(e.context(format!("scenario {}", s.name)));
                }
            }
        }
        set.save(results_path)?;
    }
    Ok(failed)
}

/// A pin that failed this many times in a row is not retried for the rest of the block.
const PIN_FAILURES_BEFORE_GIVING_UP: u32 = 2;

/// Expert by expert: each expert pinned once per repetition and every scenario run under it.
/// A scenario that failed is not run again under the following experts.
#[allow(clippy::too_many_arguments)]
fn run_by_expert(
    cat: &Catalogue,
    selected: &[&ScenarioSpec],
    switcher: &mut dyn ExpertSwitcher,
    opts: &RunOptions,
    observer: &mut dyn RunObserver,
    set: &mut ResultSet,
    results_path: &Path,
    keep_going: bool,
) -> Result<Vec<String>> {
    let first = set.scenarios.len();
    set.scenarios
        .extend(selected.iter().map(|s| empty_result(s)));
    let mut prepared = std::collections::BTreeSet::new();
    let mut failed = Vec::new();
    let progress = Progress::new(selected.len() * opts.experts.len() * opts.reps as usize);
    let mut index = 0;
    for rep in 0..opts.reps {
        for expert in &opts.experts {
            let mut pin_failures = 0;
            let mut last_reason = String::new();
            for (k, s) in selected.iter().enumerate() {
                index += 1;
                let result = &mut set.scenarios[first + k];
                if result.error.is_some() {
                    continue;
                }
                if pin_failures >= PIN_FAILURES_BEFORE_GIVING_UP {
                    result.skipped.push(SkippedRun {
                        expert: expert.clone(),
                        rep,
                        reason: format!(
                            "not retried after {pin_failures} failed pins in a row: {last_reason}"
                        ),
                    });
                    continue;
                }
                info!(
                    "run {}: {expert}, rep {}, scenario {} — {}",
                    progress.line(index),
                    rep + 1,
                    s.name,
                    s.title
                );
                let outcome = if prepared.insert(s.name.clone()) {
                    prepare_scenario(cat, s, &opts.work_dir)
                } else {
                    Ok(())
                }
                .and_then(|()| run_one(cat, s, switcher, opts, expert, rep, observer));
                match outcome {
                    Ok(RunOutcome::Ran(r)) => {
                        pin_failures = 0;
                        result.runs.push(*r);
                    }
                    Ok(RunOutcome::Skipped(skip)) => {
                        pin_failures += 1;
                        last_reason = skip.reason.clone();
                        result.skipped.push(skip);
                    }
                    Err(e) => {
                        error!("scenario {} failed under {expert}: {e:#}", s.name);
                        failed.push(s.name.clone());
                        result.error = Some(format!("under {expert}, rep {}: {e:#}", rep + 1));
                        if !keep_going {
                            return Err(e.context(format!("scenario {}", s.name)));
                        }
                    }
                }
                set.save(results_path)?;
            }
        }
    }
    Ok(failed)
}

fn empty_result(s: &ScenarioSpec) -> ScenarioResult {
    ScenarioResult {
        scenario: s.name.clone(),
        title: s.title.clone(),
        probe: s.probe.clone(),
        runs: Vec::new(),
        error: None,
        skipped: Vec::new(),
    }
}

fn print_ranking(report: &crate::report::Report) {
    println!(
        "{:<10} {:>10} {:>12} {:>8} {:>8} {:>10}",
        "expert", "mean score", "win vs base", "Top-1", "Top-3", "vs oracle"
    );
    let f = |x: Option<f64>| {
        x.map(|v| format!("{:.1}%", v * 100.0))
            .unwrap_or("n/a".into())
    };
    for r in &report.ranking {
        println!(
            "{:<10} {:>10} {:>12} {:>8} {:>8} {:>10}",
            r.expert,
            r.mean_score
                .map(|v| format!("{v:.3}"))
                .unwrap_or("n/a".into()),
            f(r.vs_baseline.rate()),
            f(r.top1),
            f(r.top3),
            f(r.oracle_ratio)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        scenario: ScenarioArgs,
    }

    fn args(line: &str) -> ScenarioArgs {
        Cli::try_parse_from(std::iter::once("asa").chain(line.split_whitespace()))
            .unwrap()
            .scenario
    }

    /// A one-off run: eevdf alone, once; the run options are the ones `asa calibrate` shares.
    #[test]
    fn run_defaults() {
        let ScenarioCommand::Run(run) = args("run S1").command else {
            panic!("not a run")
        };
        assert_eq!(run.experts, ["eevdf"]);
        assert_eq!(run.reps, 1);
        assert_eq!(
            run.run,
            ScenarioRunOptions {
                duration: 20.0,
                min_phase: 0.0,
                settle: 2.0,
                hold: 30.0,
                cooldown: 1.0,
                work_dir: None,
                baseline: "eevdf".into(),
            }
        );
        assert_eq!(
            run.run.work_dir(),
            std::env::temp_dir().join("asa-scenarios-work")
        );
    }

    /// `--help` says what `--hold` waits for and its default.
    #[test]
    fn hold_help_says_what_it_waits_for_and_its_default() {
        use clap::CommandFactory;
        let mut cli = Cli::command();
        let help = cli
            .find_subcommand_mut("run")
            .unwrap()
            .render_long_help()
            .to_string();
        let hold = &help[help.find("--hold <SECONDS>").expect("--hold in the help")..];
        let hold = &hold[..hold.find("\n      --").unwrap_or(hold.len())];
        for words in [
            "scheduler under test",
            "sync()",
            "Dirty + Writeback",
            "0 skips",
        ] {
            assert!(hold.contains(words), "{words}: {hold}");
        }
        assert!(hold.contains("[default: 30]"), "{hold}");
    }

    #[test]
    fn run_times_are_checked() {
        let times = |line: &str| {
            let ScenarioCommand::Run(run) = args(line).command else {
                panic!("not a run")
            };
            run.run.times().map_err(|e| e.to_string())
        };
        let t = times("run S1 --duration 1.5 --min-phase 3 --settle 0 --hold 0 --cooldown 0.25")
            .unwrap();
        assert_eq!(
            t,
            RunTimes {
                duration: Duration::from_millis(1500),
                min_phase: Duration::from_secs(3),
                settle: Duration::ZERO,
                hold: Duration::ZERO,
                cooldown: Duration::from_millis(250),
            }
        );
        assert_eq!(
            times("run S1 --hold 12.5").unwrap().hold,
            Duration::from_millis(12_500)
        );
        for (line, flag) in [
            ("run S1 --duration 0", "--duration"),
            ("run S1 --duration NaN", "--duration"),
            ("run S1 --min-phase inf", "--min-phase"),
            ("run S1 --settle=-1", "--settle"),
            ("run S1 --hold=-30", "--hold"),
            ("run S1 --hold inf", "--hold"),
            ("run S1 --cooldown=-0.5", "--cooldown"),
        ] {
            let err = times(line).unwrap_err();
            assert!(err.starts_with(flag), "{line}: {err}");
        }
    }

    #[test]
    fn a_run_with_a_name_its_catalogue_lacks_fails_before_anything_runs() {
        let out = tempfile::tempdir().unwrap();
        let variants = asa_experts::Catalogue::parse(
            include_str!("../../experts/variants.toml"),
            "variants.toml",
        )
        .unwrap();
        let line = format!(
            "run S1 --experts cosmos,cosmos-bogus --switcher current --out {}",
            out.path().join("results").display()
        );
        let err = scenario_command_in(args(&line), variants).unwrap_err();
        assert!(
            format!("{err:#}").contains("unknown expert \"cosmos-bogus\""),
            "{err:#}"
        );
        assert!(!out.path().join("results").exists());
    }
}
