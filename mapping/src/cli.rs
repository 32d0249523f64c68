//! `asa calibrate` and `asa mapping show` (the agent binary wires these in).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use asa_scenarios::catalogue::Catalogue as ScenarioCatalogue;
use asa_scenarios::runner::{NoObserver, ResultSet, RunObserver, SupervisorSwitcher};
use asa_scenarios::ScenarioRunOptions;
use clap::{Args, Subcommand, ValueEnum};

use crate::budget::replay::{self, ReplayOptions};
use crate::budget::run::BudgetOptions;
use crate::calibrate::{self, CalibrationPlan, ClassScheme, PrototypeOptions};
use crate::live;
use crate::overhead::{self, MidRunSwitcher};
use crate::retrain;
use crate::MappingTable;

/// Calibration stages (ASA paper §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Stage {
    /// Run the scenario catalogue under every expert and rank the experts per class.
    Prototype,
    /// Measure the agent's own costs (switch cost, perception) as a switching penalty.
    Overhead,
    /// Run `asa run` on the catalogue and refine the table.
    Live,
    /// Per-application mode: run every scenario under `layered` (ASA's default layer plan) and
    /// whole-machine experts, and candidate policies (one class's slice changed) where their
    /// class has an application, with each application in its labelled class's layer, and
    /// write the table's `[[layer]]` rows (the policy per application class) and class rows
    /// (layered vs. the whole-machine experts); each results file counts as one boot, and a
    /// verdict needs 2 boots or more.
    Layers,
}

/// Arguments of `asa calibrate`.
#[derive(Debug, Clone, Args)]
pub struct CalibrateArgs {
    /// Calibration stage.
    #[arg(long, value_enum, default_value = "prototype")]
    pub stage: Stage,
    /// Folder of this calibration: raw results (resumable), report and table.
    #[arg(long)]
    pub dir: PathBuf,
    /// Build the table from these scenario result files (results.json) instead of running
    /// scenarios: comma-separated or the flag repeated, all of one machine (default: none,
    /// measure). Stage layers counts each file as one boot and needs 2 or more for a verdict
    /// across boots; with one, its rows say they rest on one boot.
    #[arg(long, value_delimiter = ',', value_name = "RESULTS.json,...")]
    pub from_results: Vec<PathBuf>,
    /// Scenarios to run (`all` = every single-phase scenario of the catalogue).
    #[arg(long, default_value = "all")]
    pub scenarios: String,
    /// Experts to compare, the baseline among them.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "eevdf,bpfland,lavd,rusty"
    )]
    pub experts: Vec<String>,
    /// Repetitions of each (scenario, expert): the noise rule measures the run-to-run spread
    /// from cells run twice or more (`asa scenario run`, a one-off comparison, runs once by
    /// default). With --budget: the most a (scenario, expert) may get.
    #[arg(long, default_value_t = 2)]
    pub reps: u32,
    /// Stage layers: the application classes whose layer policy to calibrate (classes of
    /// layers/default.toml, or `other` for every unclassified task). Default: the app_class of
    /// every selected scenario's probe and loads, plus `other`; with --from-results, every
    /// class a candidate of DIR/candidates.toml changes alone.
    #[arg(long, value_delimiter = ',', value_name = "CLASS,...")]
    pub layer_classes: Vec<String>,
    /// Stage layers: the time slices (µs) to try: one candidate per class and slice that
    /// differs from the class's default slice, named layered-<class>-<ms>ms, run only in the
    /// scenarios with an application of its class (every scenario for `other`).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "5000,2000",
        value_name = "US,..."
    )]
    pub layer_slices_us: Vec<u64>,
    /// Stage layers: the CPU shares to try for each class whose layer does not preempt
    /// (cpu_batch, background): one candidate per class and share, its layer grouped on that
    /// fraction of the CPUs, named layered-<class>-share<pct>; none with the flag alone.
    #[arg(
        long,
        value_delimiter = ',',
        num_args = 0..,
        default_value = "0.5",
        value_name = "FRACTION,..."
    )]
    pub layer_shares: Vec<f64>,
    /// Stage layers: the classes to try without preemption where their layer preempts (one
    /// candidate each, layered-<class>-nopreempt, if the class is calibrated): an application
    /// classed I/O- or network-bound may be a bulk transfer that holds a CPU; none with the
    /// flag alone.
    #[arg(
        long,
        value_delimiter = ',',
        num_args = 0..,
        default_value = "io_bound,network",
        value_name = "CLASS,..."
    )]
    pub layer_no_preempt: Vec<String>,
    /// Stage layers: the classes whose preempting layer to try with preemption of the waking
    /// task's previous CPU before any idle one (scx_layered `preempt_first`; one candidate each,
    /// layered-<class>-preemptfirst, if the class is calibrated and its layer preempts); default
    /// none.
    #[arg(long, value_delimiter = ',', num_args = 0.., value_name = "CLASS,...")]
    pub layer_preempt_first: Vec<String>,
    /// Stage layers: whole-machine experts run besides `layered`, so the class rows say per
    /// load whether the layers or one expert serve it better (--experts is stage prototype's,
    /// unused here); "" for none.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "cosmos",
        value_name = "EXPERT,..."
    )]
    pub layer_experts: Vec<String>,
    /// Stage layers: start from this mapping table's `[[layer]]` rows instead of ASA's default
    /// plan: `layered` runs that plan, each candidate changes one class from it, and the new
    /// table keeps the base rows of the classes not calibrated again (default: the default
    /// plan). With --from-results: the table DIR/candidates.toml was written from.
    #[arg(long, value_name = "TABLE")]
    pub layer_base: Option<PathBuf>,
    /// Stage layers: write DIR/candidates.toml and print where each candidate would run, and
    /// run nothing (needs neither root nor sched_ext; e.g. for mapping/lab/layers-run.sh).
    #[arg(long, conflicts_with = "from_results")]
    pub candidates_only: bool,
    /// Stage prototype: measure for at most this long (e.g. 90m, 2h, 1h30m), spending runs only
    /// where a class's choice is still open: every expert gets 2 runs of each class, then the
    /// leader is compared with each challenger until the challenger is below it beyond the
    /// noise or cannot beat it by --min-gain. Stops when every class is settled or the next run
    /// would not fit; rerun with the same --dir to continue (default: no budget, every
    /// scenario under every expert --reps times).
    #[arg(long, value_parser = parse_budget, value_name = "DURATION")]
    pub budget: Option<Duration>,
    /// A gain below this share of the best expert's score is not worth a switch: with --budget,
    /// a challenger that cannot beat the leader by this much gets no more runs; every table
    /// records whether each class is settled against it.
    #[arg(long, default_value_t = crate::budget::DEFAULT_MIN_GAIN)]
    pub min_gain: f64,
    /// Run nothing: replay --budget over the raw results of an exhaustive calibration
    /// (results.json), drawing the budgeted runs from the recorded ones, once per seed, and
    /// compare each class's verdict with the exhaustive one; writes DIR/replay.json and
    /// DIR/replay.md. Uses the set's own experts and scenarios, and --classes, --min-gain,
    /// --noise-floor, --stay.
    #[arg(long, value_name = "RESULTS.json")]
    pub replay: Option<PathBuf>,
    /// With --replay: replays with seeds 1 to N.
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub seeds: u64,
    /// With --replay: the budget as a share of the recorded runs, e.g. 0.35 (default: no
    /// budget; each replay runs until every class is settled or its plan is spent).
    #[arg(long, value_name = "SHARE")]
    pub replay_budget: Option<f64>,
    // Run times, input folder, baseline: the same as `asa scenario run`'s.
    #[command(flatten)]
    pub run: ScenarioRunOptions,
    /// Scenario catalogue (default: the built-in one; with --report-only, the one stored in
    /// the folder's results.json).
    #[arg(long)]
    pub catalogue: Option<PathBuf>,
    /// How runs are grouped into classes; must match the classifier's labels.
    #[arg(long, value_enum, default_value = "probe-load")]
    pub classes: ClassScheme,
    /// Score differences up to this are noise (default: measured from the runs).
    #[arg(long)]
    pub noise_floor: Option<f64>,
    /// The expert a class keeps unless another beats it by more than the noise (default: the
    /// table's default expert: the best mean over all classes, or for stage live the default
    /// of the table under test).
    #[arg(long)]
    pub stay: Option<String>,
    /// Stage overhead: the table to add switch costs to (a prototype table of this machine).
    #[arg(long)]
    pub table: Option<PathBuf>,
    /// Stage overhead: the switches to measure, FROM>TO, comma-separated.
    #[arg(long, default_value = "eevdf>bpfland,bpfland>eevdf")]
    pub pairs: String,
    /// Stage live: the classifier model `asa run` uses (default: its own default). With
    /// --retrain: the model the retrained one is compared with (default: the default model,
    /// models/default/classifier.onnx of --classifier).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Stage prototype: also record this machine's perception features during every run
    /// (`asa record` beside it, into DIR/features/, resumable with the runs), then train the
    /// load classifier on the recordings the default model was trained on plus this machine's
    /// (a quarter of this machine's runs held out) into DIR/model/classifier.onnx, and say in
    /// calibration.md whether the shipped model holds here or the retrained one is needed.
    /// Needs --classes load and the project's Python environment (classifier/setup.sh), checked
    /// before any run (default: off).
    #[arg(long)]
    pub retrain: bool,
    /// With --retrain: the project's classifier folder, with its Python environment (.venv),
    /// the default model and the list of its recordings (default: classifier/ of the source tree
    /// this asa was built from).
    #[arg(long, value_name = "DIR", requires = "retrain")]
    pub classifier: Option<PathBuf>,
    /// Stage live: libonnxruntime.so for `asa run` (default: its own default).
    #[arg(long)]
    pub onnxruntime: Option<PathBuf>,
    /// Stage live: `asa run --cooldown-s` (default: its own, 15 s).
    #[arg(long)]
    pub agent_cooldown_s: Option<f64>,
    /// Stage live: `asa run --interval-ms` (default: its own, 1000).
    #[arg(long)]
    pub agent_interval_ms: Option<u64>,
    /// Stage live: `asa run --nice` (the decision thread's nice value; default: its own, 19).
    #[arg(long, allow_hyphen_values = true)]
    pub agent_nice: Option<i32>,
    /// Stage live: `asa run --no-bpf` (perception without the BPF scheduler counters).
    #[arg(long)]
    pub agent_no_bpf: bool,
    /// Stage live: skip the `asa run --dry-run` runs (the agent's own cost on EEVDF).
    #[arg(long)]
    pub no_dry_run: bool,
    /// Stage live: run nothing, rewrite live.md, live.json and mapping.toml from the finished
    /// run in --dir (its results.json and agent/ logs) with the table under test given by
    /// --table; needs neither root nor sched_ext. The run's --scenarios, --experts, --reps,
    /// --duration, --settle, --hold and --no-dry-run must be given again (checked against
    /// results.json; a run written before --hold existed had none: --hold 0); the --agent-*
    /// options, --model and --onnxruntime are not needed (default: off: run the scenarios,
    /// then report).
    #[arg(long)]
    pub report_only: bool,
}

/// Arguments of `asa mapping`.
#[derive(Debug, Clone, Args)]
pub struct MappingArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: MappingCommand,
}

/// `asa mapping` subcommands.
#[derive(Debug, Clone, Subcommand)]
pub enum MappingCommand {
    /// Print a mapping table (default: the built-in hand-written one).
    Show {
        /// Table file.
        file: Option<PathBuf>,
    },
}

/// Runs `asa mapping ...`.
pub fn mapping_command(args: &MappingArgs) -> Result<()> {
    match &args.command {
        MappingCommand::Show { file } => {
            let table = match file {
                Some(f) => MappingTable::load(f)?,
                None => MappingTable::builtin_default()?,
            };
            let origin = file
                .as_ref()
                .map(|f| f.display().to_string())
                .unwrap_or("built-in default".into());
            table
                .validate(
                    &origin,
                    &asa_experts::Catalogue::builtin().names(),
                    &table
                        .classes
                        .iter()
                        .map(|c| c.name.as_str())
                        .collect::<Vec<_>>(),
                )
                .map_err(anyhow::Error::from)?;
            print!("{}", table.render());
            Ok(())
        }
    }
}

pub(crate) fn now_utc() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    asa_scenarios::report::iso_utc(secs)
}

/// `--budget`'s value parser.
fn parse_budget(text: &str) -> Result<Duration, String> {
    crate::budget::parse_duration(text)
}

/// Runs `asa calibrate`.
pub fn calibrate_command(args: &CalibrateArgs) -> Result<()> {
    calibrate_command_with(args, None)
}

/// Runs `asa calibrate` with the agent's oracle-hint writer for stage layers (`hints`, which
/// the agent binary makes: the mapping crate cannot depend on the agent); without it, stage
/// layers can only build rows `--from-results`. The other stages do not use it.
pub fn calibrate_command_with(
    args: &CalibrateArgs,
    hints: Option<crate::layers::ObserverFactory>,
) -> Result<()> {
    if args.report_only && args.stage != Stage::Live {
        bail!("--report-only re-renders a finished live run: use it with --stage live");
    }
    if !(args.min_gain.is_finite() && args.min_gain >= 0.0) {
        bail!(
            "--min-gain {} is no share of a score: give a number >= 0, e.g. 0.06 for 6 %",
            args.min_gain
        );
    }
    if args.retrain && (args.stage != Stage::Prototype || args.replay.is_some()) {
        bail!(
            "--retrain records the features of stage prototype's runs: use it without --stage \
             and --replay"
        );
    }
    if args.stage != Stage::Prototype && (args.budget.is_some() || args.replay.is_some()) {
        bail!(
            "--budget and --replay choose the runs of stage prototype: leave out --stage {}",
            format!("{:?}", args.stage).to_lowercase()
        );
    }
    if let Some(results) = &args.replay {
        return replay_command(args, results);
    }
    match args.stage {
        Stage::Prototype => prototype_stage(args),
        Stage::Overhead => overhead_stage(args),
        Stage::Live if args.report_only => live_report_only(args),
        Stage::Live => live_stage(args),
        Stage::Layers => crate::layers::stage::layers_stage(args, hints),
    }
}

fn prototype_stage(args: &CalibrateArgs) -> Result<()> {
    let experts = asa_experts::Catalogue::builtin();
    check_experts(args, &experts)?;
    if args.budget.is_some() && !args.from_results.is_empty() {
        bail!(
            "--budget chooses which runs to make, --from-results makes none: to see what a \
             budget would have chosen from recorded runs, use --replay"
        );
    }
    // Before any run: hours of runs must not end in a trainer that cannot start.
    let trainer = retrainer(args)?;
    let mut budget_note = None;
    let sets = if args.from_results.is_empty() {
        need_sched_ext()?;
        let plan = plan(args, args.experts.clone(), catalogue_text(args)?)?;
        let mut recorder = match &trainer {
            Some(_) => Some(retrain::recorder(&args.dir)?),
            None => None,
        };
        let mut no_observer = NoObserver;
        let observer: &mut dyn RunObserver = match recorder.as_mut() {
            Some(r) => r,
            None => &mut no_observer,
        };
        let mut switcher =
            SupervisorSwitcher::system().context("starting the expert supervisor")?;
        match args.budget {
            Some(budget) => {
                let opts = BudgetOptions {
                    budget: Some(budget),
                    min_gain: args.min_gain,
                    noise_floor: args.noise_floor,
                    experts: args.experts.clone(),
                };
                let (set, report) = calibrate::run_budgeted_observed(
                    &args.dir,
                    &plan.1,
                    &plan.0,
                    args.classes,
                    &opts,
                    &mut switcher,
                    observer,
                )?;
                budget_note = Some(crate::budget::run::describe(&report));
                vec![set]
            }
            None => vec![calibrate::run_or_resume_observed(
                &args.dir,
                &plan.1,
                &plan.0,
                &mut switcher,
                observer,
            )?],
        }
    } else {
        load_results(&args.from_results)?
    };
    let machine = crate::machine_fingerprint(&sets[0].machine, &experts);
    let opts = PrototypeOptions {
        stay: args.stay.clone(),
        noise_floor: args.noise_floor,
        scheme: args.classes,
        min_gain: args.min_gain,
        across_boots: calibrate::across_boots_for(&sets),
    };
    let proto = calibrate::prototype(&sets, machine, now_utc(), &opts)?;
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    let table_path = args.dir.join("mapping.toml");
    write(&table_path, &proto.table.to_toml()?)?;
    let mut report = calibrate::markdown(&proto, &sets);
    if let Some(note) = &budget_note {
        report.push_str("\n## Budget\n\n");
        report.push_str(note);
        print!("{note}");
    }
    write(&args.dir.join("calibration.md"), &report)?;
    print!("{}", proto.table.render());
    println!(
        "table: {}  report: {}",
        table_path.display(),
        args.dir.join("calibration.md").display()
    );
    if let Some(trainer) = &trainer {
        let measured = sets
            .iter()
            .flat_map(|s| &s.scenarios)
            .map(|r| r.runs.len())
            .sum();
        let shipped = match &args.model {
            Some(m) => {
                std::path::absolute(m).with_context(|| format!("resolving {}", m.display()))?
            }
            None => trainer.shipped_model(),
        };
        let retrained = retrain::retrain(trainer, &args.dir, &shipped, measured)?;
        let section = retrain::markdown(&retrained, &table_path);
        report.push_str(&section);
        write(&args.dir.join("calibration.md"), &report)?;
        print!("{section}");
    }
    Ok(())
}

/// With `--retrain` (stage prototype, measuring): the project's trainer, checked (a missing
/// Python environment says to run classifier/setup.sh); `None` without it.
fn retrainer(args: &CalibrateArgs) -> Result<Option<retrain::Trainer>> {
    if !args.retrain {
        return Ok(None);
    }
    if !args.from_results.is_empty() {
        bail!(
            "--retrain records this machine's features while the calibration's runs happen, \
             and --from-results makes no run: leave out one of them"
        );
    }
    if args.classes != ClassScheme::Load {
        bail!(
            "--retrain trains a model of the load classes (the default model's), and `asa run` needs \
             a table of the model's classes: add --classes load"
        );
    }
    let classifier = args
        .classifier
        .clone()
        .unwrap_or_else(retrain::source_tree_classifier);
    let trainer = retrain::Trainer::check(&classifier)?;
    let shipped = args
        .model
        .clone()
        .unwrap_or_else(|| trainer.shipped_model());
    if !shipped.is_file() {
        bail!(
            "--retrain compares the retrained model with {}, which is missing: give the model to \
             compare with as --model",
            shipped.display()
        );
    }
    Ok(Some(trainer))
}

/// `asa calibrate --replay RESULTS.json`: the budgeted calibration replayed over recorded runs
/// ([`crate::budget::replay`]), written to `DIR/replay.json` and `DIR/replay.md`.
fn replay_command(args: &CalibrateArgs, results: &Path) -> Result<()> {
    if args.seeds == 0 {
        bail!("--seeds 0 replays nothing: give at least 1");
    }
    if let Some(share) = args.replay_budget.filter(|s| !(s.is_finite() && *s > 0.0)) {
        bail!(
            "--replay-budget {share} is no share of the recorded runs: give a number above 0, \
             e.g. 0.35"
        );
    }
    let set = ResultSet::load(results)?;
    let opts = ReplayOptions {
        seeds: (1..=args.seeds).collect(),
        budget_share: args.replay_budget,
        min_gain: args.min_gain,
        noise_floor: args.noise_floor,
        scheme: args.classes,
        stay: args.stay.clone(),
    };
    let summary = replay::replay(&set, &opts).with_context(|| {
        format!(
            "replaying a budgeted calibration over {}",
            results.display()
        )
    })?;
    #[derive(serde::Serialize)]
    struct Written<'a> {
        source: String,
        #[serde(flatten)]
        summary: &'a replay::ReplaySummary,
    }
    let source = results.display().to_string();
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    write(
        &args.dir.join("replay.json"),
        &serde_json::to_string_pretty(&Written {
            source: source.clone(),
            summary: &summary,
        })?,
    )?;
    let report = replay::markdown(&summary, &source);
    write(&args.dir.join("replay.md"), &report)?;
    print!("{report}");
    Ok(())
}

/// Result files, all measured on one machine.
pub(crate) fn load_results(paths: &[PathBuf]) -> Result<Vec<ResultSet>> {
    let sets = paths
        .iter()
        .map(|p| ResultSet::load(p))
        .collect::<Result<Vec<_>>>()?;
    let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    calibrate::check_same_version(&sets, &names)?;
    for (set, path) in sets.iter().zip(paths).skip(1) {
        if !same_machine(&set.machine, &sets[0].machine) {
            bail!(
                "{} was measured on another machine ({} CPUs {}, kernel {}) than the first result set: a table is per machine",
                path.display(),
                set.machine.cpus,
                set.machine.cpu_model,
                set.machine.kernel
            );
        }
    }
    Ok(sets)
}

fn same_machine(
    a: &asa_scenarios::runner::MachineInfo,
    b: &asa_scenarios::runner::MachineInfo,
) -> bool {
    a.cpu_model == b.cpu_model && a.cpus == b.cpus && a.kernel == b.kernel
}

fn overhead_stage(args: &CalibrateArgs) -> Result<()> {
    let table_path = args.table.as_ref().context(
        "--stage overhead adds switch costs to a table: pass the prototype table with --table",
    )?;
    let mut table = MappingTable::load(table_path)?;
    let machine = table.machine.clone().with_context(|| {
        format!(
            "{} carries no machine fingerprint: calibrate a prototype table on this machine first",
            table_path.display()
        )
    })?;
    let pairs = overhead::parse_pairs(&args.pairs)?;
    let catalogue = asa_experts::Catalogue::builtin();
    for (a, b) in &pairs {
        catalogue.require(a)?;
        catalogue.require(b)?;
    }
    let set = match args.from_results.as_slice() {
        [] => {
            need_sched_ext()?;
            let (plan, text) = plan(args, overhead::experts_for(&pairs), catalogue_text(args)?)?;
            let supervisor =
                system_supervisor(&catalogue).context("starting the expert supervisor")?;
            std::fs::create_dir_all(&args.dir)
                .with_context(|| format!("creating {}", args.dir.display()))?;
            let mut switcher = MidRunSwitcher::new(supervisor, plan.settle + plan.duration / 2)
                .recording_times_in(&args.dir);
            calibrate::run_or_resume(&args.dir, &text, &plan, &mut switcher)?
        }
        [one] => ResultSet::load(one)?,
        _ => bail!("--stage overhead reads one result file"),
    };
    if set.machine.cpu_model != machine.cpu_model
        || set.machine.cpus as u32 != machine.cores
        || set.machine.kernel != machine.kernel_release
    {
        bail!(
            "{} was calibrated on another machine ({} CPUs {}, kernel {}) than these switch runs \
             ({} CPUs {}, kernel {})",
            table_path.display(),
            machine.cores,
            machine.cpu_model,
            machine.kernel_release,
            set.machine.cpus,
            set.machine.cpu_model,
            set.machine.kernel
        );
    }
    // Switch durations: from this folder, or from the folder of the given result file.
    let times_dir = match args.from_results.as_slice() {
        [one] => one.parent().unwrap_or(Path::new(".")).to_path_buf(),
        _ => args.dir.clone(),
    };
    let costs = overhead::switch_costs(&set, &overhead::read_switch_times(&times_dir)?)?;
    if costs.is_empty() {
        bail!("no switch run could be scored: nothing to add");
    }
    table.source = "overhead".into();
    table.created = now_utc();
    table.switches = costs;
    let text = table.to_toml()?;
    MappingTable::parse(&text, "the calibrated table")?;
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    let out = args.dir.join("mapping.toml");
    write(&out, &text)?;
    write(
        &args.dir.join("overhead.md"),
        &overhead::markdown(&table, &set),
    )?;
    print!("{}", overhead::markdown(&table, &set));
    println!("table: {}", out.display());
    Ok(())
}

fn live_stage(args: &CalibrateArgs) -> Result<()> {
    let (table_path, _) = table_under_test(args)?;
    let catalogue = asa_experts::Catalogue::builtin();
    check_experts(args, &catalogue)?;
    need_sched_ext()?;
    let (plan, text) = live_plan(args)?;
    // The decision logs carry every tick's features, to compare live ticks with recorded ones.
    let mut run_args = vec![
        "--mapping".to_string(),
        absolute(table_path)?,
        "--log-features".to_string(),
    ];
    if let Some(m) = &args.model {
        run_args.extend(["--model".to_string(), absolute(m)?]);
    }
    if let Some(o) = &args.onnxruntime {
        run_args.extend(["--onnxruntime".to_string(), absolute(o)?]);
    }
    if let Some(c) = args.agent_cooldown_s {
        run_args.extend(["--cooldown-s".to_string(), c.to_string()]);
    }
    if let Some(i) = args.agent_interval_ms {
        run_args.extend(["--interval-ms".to_string(), i.to_string()]);
    }
    if let Some(n) = args.agent_nice {
        run_args.extend(["--nice".to_string(), n.to_string()]);
    }
    if args.agent_no_bpf {
        run_args.push("--no-bpf".to_string());
    }
    let launcher = live::AgentLauncher::new(
        std::env::current_exe().context("locating the asa binary")?,
        run_args,
        agent_logs(args),
    );
    let make_supervisor = {
        let catalogue = catalogue.clone();
        Box::new(move || system_supervisor(&catalogue))
    };
    let mut switcher = live::LiveSwitcher::new(make_supervisor, launcher);
    let set = calibrate::run_or_resume(&args.dir, &text, &plan, &mut switcher)?;
    drop(switcher);
    live_report(args, &set)
}

/// `asa calibrate --stage live --report-only`: the report of a finished live run, rewritten
/// from its folder without running anything.
fn live_report_only(args: &CalibrateArgs) -> Result<()> {
    table_under_test(args)?;
    check_experts(args, &asa_experts::Catalogue::builtin())?;
    let path = calibrate::results_path(&args.dir);
    if !path.exists() {
        bail!(
            "{} is missing: --report-only rewrites the report of a finished live run from its \
             results.json and agent/ logs; point --dir at such a folder (a lab run's raw.tar.xz \
             holds both), or run the stage without --report-only to measure",
            path.display()
        );
    }
    let set = ResultSet::load(&path)?;
    // The scenario names are checked against the catalogue the run stored, unless given.
    let text = match &args.catalogue {
        Some(_) => catalogue_text(args)?,
        None => set.catalogue_toml.clone(),
    };
    let plan = plan(args, live_experts(args), text)?.0;
    let dry_run = set.options.experts.iter().any(|e| e == live::AGENT_DRY_RUN);
    if dry_run == args.no_dry_run {
        bail!(
            "{} was measured {} the `asa run --dry-run` column: pass the run's options, {} \
             --no-dry-run",
            path.display(),
            if dry_run { "with" } else { "without" },
            if dry_run { "without" } else { "with" }
        );
    }
    calibrate::check_options(&path, &set, &plan)?;
    let missing: Vec<&str> = plan
        .scenarios
        .iter()
        .filter(|name| !set.scenarios.iter().any(|r| &r.scenario == *name))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        bail!(
            "{} holds no results for {}: pass the --scenarios the run measured ({}), or finish \
             the run without --report-only",
            path.display(),
            missing.join(","),
            set.scenarios
                .iter()
                .map(|r| r.scenario.as_str())
                .collect::<Vec<_>>()
                .join(",")
        );
    }
    let logs = agent_logs(args);
    let agent_ran = set
        .scenarios
        .iter()
        .any(|r| r.runs.iter().any(|run| live::is_agent(&run.expert)));
    if agent_ran && !logs.is_dir() {
        bail!(
            "{} is missing: the report says what the agent did from its decision logs; extract \
             them next to results.json",
            logs.display()
        );
    }
    live_report(args, &set)
}

/// The table under test (`--table`): its path and the table, checked against the built-in
/// experts.
fn table_under_test(args: &CalibrateArgs) -> Result<(&Path, MappingTable)> {
    let table_path = args.table.as_ref().context(
        "--stage live runs `asa run` with a mapping table and refines it: pass it with --table \
         (a prototype table of this machine, or of another machine to start from; with \
         --report-only, the table the run tested)",
    )?;
    let table = MappingTable::load(table_path)?;
    let classes: Vec<&str> = table.classes.iter().map(|c| c.name.as_str()).collect();
    table
        .validate_builtin_experts(&table_path.display().to_string(), &classes)
        .map_err(anyhow::Error::from)?;
    Ok((table_path, table))
}

/// Where the live stage keeps the agent's decision logs.
fn agent_logs(args: &CalibrateArgs) -> PathBuf {
    args.dir.join("agent")
}

/// The live stage's columns: `--experts`, then the agent's dry run (unless `--no-dry-run`) and
/// the agent.
fn live_experts(args: &CalibrateArgs) -> Vec<String> {
    let mut experts = args.experts.clone();
    if !args.no_dry_run {
        experts.push(live::AGENT_DRY_RUN.to_string());
    }
    experts.push(live::AGENT.to_string());
    experts
}

/// The live stage's calibration plan and scenario catalogue text (checks no kernel: measuring
/// needs sched_ext).
pub fn live_plan(args: &CalibrateArgs) -> Result<(CalibrationPlan, String)> {
    plan(args, live_experts(args), catalogue_text(args)?)
}

/// The end of the live stage, after the runs: the summary of the live result set `set` and the
/// agent's logs in `DIR/agent/` (`DIR/live.md`, `DIR/live.json`) and the refined table
/// (`DIR/mapping.toml`: the static runs plus `--from-results`, refined over the table under
/// test), written and printed. A run and `--report-only` both end here.
pub fn live_report(args: &CalibrateArgs, set: &ResultSet) -> Result<()> {
    let (table_path, start_table) = table_under_test(args)?;
    let catalogue = asa_experts::Catalogue::builtin();
    let summary = live::live_summary(
        set,
        &args.run.baseline,
        &agent_logs(args),
        Some(&start_table),
    )?;

    // Refinement: the static runs of this session, plus earlier result sets of this machine.
    let mut sets = load_results(&args.from_results)?;
    for (s, path) in sets.iter().zip(&args.from_results) {
        if !same_machine(&s.machine, &set.machine) {
            bail!(
                "{} was measured on another machine than this live run: a table is per machine",
                path.display()
            );
        }
    }
    sets.push(live::static_runs(set));
    let mut names: Vec<String> = args
        .from_results
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    names.push(format!(
        "this live run ({})",
        calibrate::results_path(&args.dir).display()
    ));
    calibrate::check_same_version(&sets, &names)?;
    let machine = crate::machine_fingerprint(&set.machine, &catalogue);
    // The agent under test starts on, and falls back to, the table's default: a class measured
    // here stays on it unless another expert beats it beyond the noise.
    let opts = PrototypeOptions {
        stay: args.stay.clone().or_else(|| start_table.default_expert()),
        noise_floor: args.noise_floor,
        scheme: args.classes,
        min_gain: args.min_gain,
        across_boots: calibrate::across_boots_for(&sets),
    };
    let refined = calibrate::prototype(&sets, machine.clone(), now_utc(), &opts)?;
    let table = calibrate::refine_with(refined.table.clone(), &start_table, &machine);
    let text = table.to_toml()?;
    MappingTable::parse(&text, "the refined table")?;
    let out = args.dir.join("mapping.toml");
    write(&out, &text)?;
    let note = format!(
        "Table under test: {} (source {}, created {}).",
        table_path.display(),
        start_table.source,
        start_table.created
    );
    let mut report = live::markdown(&summary, set, &note);
    report.push_str(
        "
## Refined table

",
    );
    report.push_str(&calibrate::markdown(&refined, &sets).replacen(
        "# Mapping calibration, stage 1 (prototype)\n\n",
        "",
        1,
    ));
    write(&args.dir.join("live.md"), &report)?;
    write(
        &args.dir.join("live.json"),
        &serde_json::to_string_pretty(&summary)?,
    )?;
    print!("{report}");
    println!(
        "refined table: {}  report: {}",
        out.display(),
        args.dir.join("live.md").display()
    );
    Ok(())
}

/// `--experts` are in the catalogue and hold the baseline and the stay expert.
fn check_experts(args: &CalibrateArgs, catalogue: &asa_experts::Catalogue) -> Result<()> {
    for e in &args.experts {
        catalogue.require(e)?;
    }
    for (what, expert) in [
        ("baseline", Some(&args.run.baseline)),
        ("stay expert", args.stay.as_ref()),
    ] {
        if let Some(expert) = expert.filter(|e| !args.experts.contains(e)) {
            bail!(
                "the {what} {expert} must be among --experts ({})",
                args.experts.join(",")
            );
        }
    }
    Ok(())
}

/// A supervisor of this machine's sched_ext with the default settings.
fn system_supervisor(catalogue: &asa_experts::Catalogue) -> Result<asa_experts::Supervisor> {
    asa_experts::Supervisor::new(
        catalogue.clone(),
        asa_experts::SchedExt::system()?,
        asa_experts::SupervisorConfig::default().with_env()?,
    )
}

fn absolute(path: &Path) -> Result<String> {
    Ok(std::path::absolute(path)
        .with_context(|| format!("resolving {}", path.display()))?
        .display()
        .to_string())
}

pub(crate) fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// Measuring runs every expert, which needs sched_ext.
pub(crate) fn need_sched_ext() -> Result<()> {
    if !Path::new(asa_experts::sched_ext::DEFAULT_SYSFS_ROOT).exists() {
        bail!(
            "calibration runs every expert, which needs a kernel with sched_ext ({} is missing): \
             run it in the lab VM (see mapping/README.md), or pass --from-results",
            asa_experts::sched_ext::DEFAULT_SYSFS_ROOT
        );
    }
    Ok(())
}

/// The text of the scenario catalogue: `--catalogue` or the built-in one.
pub(crate) fn catalogue_text(args: &CalibrateArgs) -> Result<String> {
    asa_scenarios::catalogue::catalogue_text(args.catalogue.as_deref())
}

/// The calibration plan of `args` for `experts` over the scenario catalogue `text`, and that
/// text.
pub(crate) fn plan(
    args: &CalibrateArgs,
    experts: Vec<String>,
    text: String,
) -> Result<(CalibrationPlan, String)> {
    let catalogue = ScenarioCatalogue::parse(&text, "scenario catalogue")?;
    let scenarios: Vec<String> = if args.scenarios == "all" {
        catalogue
            .scenarios
            .iter()
            .filter(|s| !s.is_phased())
            .map(|s| s.name.clone())
            .collect()
    } else {
        catalogue
            .select(&args.scenarios)?
            .iter()
            .map(|s| s.name.clone())
            .collect()
    };
    if args.reps == 0 {
        bail!("--reps must be at least 1");
    }
    let times = args.run.times()?;
    let plan = CalibrationPlan {
        scenarios,
        experts,
        reps: args.reps,
        duration: times.duration,
        min_phase: times.min_phase,
        settle: times.settle,
        hold: times.hold,
        cooldown: times.cooldown,
        work_dir: args.run.work_dir(),
        skip: Default::default(),
    };
    Ok((plan, text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        calibrate: CalibrateArgs,
    }

    /// A calibration compares four experts twice each (the noise rule needs repetitions); the
    /// run options and their defaults are `asa scenario run`'s.
    #[test]
    fn calibrate_defaults() {
        let args = Cli::try_parse_from(["calibrate", "--dir", "cal"])
            .unwrap()
            .calibrate;
        assert_eq!(args.scenarios, "all");
        assert_eq!(args.experts, ["eevdf", "bpfland", "lavd", "rusty"]);
        assert_eq!(args.reps, 2);

        #[derive(Parser)]
        struct Scenario {
            #[command(flatten)]
            args: asa_scenarios::ScenarioArgs,
        }
        let scenario = Scenario::try_parse_from(["scenario", "run", "all"]).unwrap();
        let asa_scenarios::cli::ScenarioCommand::Run(run) = scenario.args.command else {
            panic!("not a run")
        };
        assert_eq!(args.run, run.run);
    }

    /// `--retrain` checks the project's trainer before anything else: a machine without the
    /// Python environment learns it at once, not after hours of runs, and nothing is measured
    /// or recorded (on a kernel without sched_ext the trainer's error still comes first).
    #[test]
    fn retrain_without_the_trainer_is_refused_before_any_run() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cal");
        let classifier = tmp.path().join("classifier");
        std::fs::create_dir_all(&classifier).unwrap();
        let args = Cli::try_parse_from([
            "calibrate",
            "--dir",
            dir.to_str().unwrap(),
            "--classes",
            "load",
            "--retrain",
            "--classifier",
            classifier.to_str().unwrap(),
        ])
        .unwrap()
        .calibrate;
        let err = format!("{:#}", calibrate_command(&args).unwrap_err());
        assert!(err.contains(".venv/bin/python is missing"), "{err}");
        assert!(err.contains("setup.sh"), "{err}");
        assert!(!dir.exists(), "nothing measured or recorded");
    }

    /// `--retrain` records stage prototype's runs: with no runs to record (--from-results) or
    /// another stage it is refused, as is a table of other classes than the model's (it trains
    /// the load classes), and `--classifier` means nothing without it.
    #[test]
    fn retrain_needs_runs_of_stage_prototype() {
        let parse = |extra: &[&str]| {
            let mut argv = vec![
                "calibrate",
                "--dir",
                "cal",
                "--classes",
                "load",
                "--retrain",
            ];
            argv.extend_from_slice(extra);
            Cli::try_parse_from(argv).map(|c| c.calibrate)
        };
        let err = calibrate_command(&parse(&["--from-results", "r.json"]).unwrap())
            .unwrap_err()
            .to_string();
        assert!(err.contains("--from-results makes no run"), "{err}");
        let err = calibrate_command(&parse(&["--stage", "live"]).unwrap())
            .unwrap_err()
            .to_string();
        assert!(err.contains("stage prototype"), "{err}");
        let probe_load = Cli::try_parse_from(["calibrate", "--dir", "cal", "--retrain"])
            .unwrap()
            .calibrate;
        let err = calibrate_command(&probe_load).unwrap_err().to_string();
        assert!(err.contains("add --classes load"), "{err}");
        assert!(Cli::try_parse_from(["calibrate", "--dir", "cal", "--classifier", "c"]).is_err());
        let args = Cli::try_parse_from(["calibrate", "--dir", "cal"])
            .unwrap()
            .calibrate;
        assert!(!args.retrain && args.classifier.is_none());
    }

    /// `--help` says what `--retrain` does, what it needs and its default.
    #[test]
    fn the_help_says_what_retrain_does_and_its_default() {
        use clap::CommandFactory;
        let help = Cli::command().render_long_help().to_string();
        let at = help.find("--retrain").unwrap();
        let text: String = help[at..].split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(text.contains("DIR/model/classifier.onnx"), "{text}");
        assert!(text.contains("classifier/setup.sh"), "{text}");
        assert!(text.contains("(default: off)"), "{text}");
    }

    /// Stage prototype from a folder resumed after a reboot (repetition 0 in one boot, 1 in
    /// the next) compares its rows across boots and labels them with their boots; from runs of
    /// one boot the rows are as before boots were counted.
    #[test]
    fn the_prototype_stage_compares_across_boots_when_its_runs_span_two() {
        use crate::budget::run::fixture::{empty_set, record, SCENARIO};
        use asa_scenarios::runner::ScenarioResult;

        let dir = tempfile::tempdir().unwrap();
        let row_boots = |ids: [&str; 2]| {
            let mut set = empty_set(&["eevdf", "cosmos"], 2);
            set.scenarios.push(ScenarioResult {
                scenario: SCENARIO.into(),
                title: "Web Browsing & Network Transfer".into(),
                probe: "web".into(),
                runs: (0..2u32)
                    .flat_map(|rep| {
                        [("eevdf", 250.0), ("cosmos", 40.0)].map(|(e, ms)| (e, rep, ms))
                    })
                    .map(|(e, rep, ms)| {
                        let mut run = record(e, rep, ms);
                        run.boot_id = Some(ids[rep as usize].to_string());
                        run
                    })
                    .collect(),
                error: None,
                skipped: Vec::new(),
            });
            let results = dir.path().join("results.json");
            set.save(&results).unwrap();
            let out = dir.path().join("cal");
            let args = Cli::try_parse_from([
                "calibrate",
                "--dir",
                out.to_str().unwrap(),
                "--from-results",
                results.to_str().unwrap(),
                "--experts",
                "eevdf,cosmos",
                "--stay",
                "eevdf",
            ])
            .unwrap()
            .calibrate;
            prototype_stage(&args).unwrap();
            let table = MappingTable::load(&out.join("mapping.toml")).unwrap();
            table.classes[0].boots
        };
        assert_eq!(row_boots(["boot-a", "boot-b"]), Some(2));
        assert_eq!(row_boots(["boot-a", "boot-a"]), None);
    }
}
