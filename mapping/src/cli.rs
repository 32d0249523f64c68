//! `asa calibrate` and `asa mapping show` (the agent binary wires these in).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use asa_scenarios::catalogue::Catalogue as ScenarioCatalogue;
use asa_scenarios::runner::{ResultSet, SupervisorSwitcher};
use clap::{Args, Subcommand, ValueEnum};
use log::info;

use crate::calibrate::{self, CalibrationPlan, ClassScheme, PrototypeOptions};
use crate::{MachineFingerprint, MappingTable};

/// Calibration stages (ASA paper §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Stage {
    /// Run the scenario catalogue under every expert and rank the experts per class.
    Prototype,
    /// Measure the agent's own costs (switch cost, perception) as a switching penalty.
    Overhead,
    /// Run `asa run` on the catalogue and refine the table.
    Live,
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
    /// Build the table from these scenario result files instead of running scenarios.
    #[arg(long, value_delimiter = ',')]
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
    /// Repetitions of each (scenario, expert); 2 or more measure the noise.
    #[arg(long, default_value_t = 2)]
    pub reps: u32,
    /// Probe duration per run (s).
    #[arg(long, default_value_t = 20.0)]
    pub duration: f64,
    /// Load start before the probe (s).
    #[arg(long, default_value_t = 2.0)]
    pub settle: f64,
    /// Pause after each run (s).
    #[arg(long, default_value_t = 1.0)]
    pub cooldown: f64,
    /// Inputs of the loads (corpora, sources), reused across runs.
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// Scenario catalogue (default: the built-in one).
    #[arg(long)]
    pub catalogue: Option<PathBuf>,
    /// How runs are grouped into classes; must match the classifier's labels.
    #[arg(long, value_enum, default_value = "probe-load")]
    pub classes: ClassScheme,
    /// Score differences up to this are noise (default: measured from the runs).
    #[arg(long)]
    pub noise_floor: Option<f64>,
    /// The expert kept when nothing beats it by more than the noise.
    #[arg(long, default_value = "eevdf")]
    pub baseline: String,
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

fn now_utc() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    asa_scenarios::report::iso_utc(secs)
}

/// Runs `asa calibrate`.
pub fn calibrate_command(args: &CalibrateArgs) -> Result<()> {
    match args.stage {
        Stage::Prototype => {}
        Stage::Overhead | Stage::Live => bail!(
            "calibration stage {:?} is not built yet (issue 6): only --stage prototype works",
            args.stage
        ),
    }
    let experts = asa_experts::Catalogue::builtin();
    for e in &args.experts {
        experts.require(e)?;
    }
    if !args.experts.contains(&args.baseline) {
        bail!(
            "the baseline {} must be among --experts ({})",
            args.baseline,
            args.experts.join(",")
        );
    }
    let sets = if args.from_results.is_empty() {
        vec![measure(args)?]
    } else {
        args.from_results
            .iter()
            .map(|p| ResultSet::load(p))
            .collect::<Result<Vec<_>>>()?
    };
    let machine = MachineFingerprint::of(&sets[0].machine, &experts);
    for (set, path) in sets.iter().zip(&args.from_results).skip(1) {
        if set.machine.cpu_model != sets[0].machine.cpu_model
            || set.machine.cpus != sets[0].machine.cpus
            || set.machine.kernel != sets[0].machine.kernel
        {
            bail!(
                "{} was measured on another machine ({} CPUs {}, kernel {}) than the first result set: a table is per machine",
                path.display(),
                set.machine.cpus,
                set.machine.cpu_model,
                set.machine.kernel
            );
        }
    }
    let opts = PrototypeOptions {
        baseline: args.baseline.clone(),
        noise_floor: args.noise_floor,
        scheme: args.classes,
    };
    let proto = calibrate::prototype(&sets, machine, now_utc(), &opts)?;
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    let table_path = args.dir.join("mapping.toml");
    write(&table_path, &proto.table.to_toml()?)?;
    write(
        &args.dir.join("calibration.md"),
        &calibrate::markdown(&proto, &sets),
    )?;
    print!("{}", proto.table.render());
    println!(
        "table: {}  report: {}",
        table_path.display(),
        args.dir.join("calibration.md").display()
    );
    Ok(())
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// Runs (or resumes) the scenario catalogue under every expert into `--dir`.
fn measure(args: &CalibrateArgs) -> Result<ResultSet> {
    if !Path::new(asa_experts::sched_ext::DEFAULT_SYSFS_ROOT).exists() {
        bail!(
            "calibration runs every expert, which needs a kernel with sched_ext ({} is missing): \
             run it in the lab VM (see mapping/README.md), or pass --from-results",
            asa_experts::sched_ext::DEFAULT_SYSFS_ROOT
        );
    }
    let text = match &args.catalogue {
        Some(p) => {
            std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?
        }
        None => asa_scenarios::catalogue::BUILTIN_SCENARIOS.to_string(),
    };
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
    let secs = |s: f64, what: &str| -> Result<Duration> {
        if !s.is_finite() || s < 0.0 {
            bail!("--{what} must be a finite number of seconds >= 0");
        }
        Ok(Duration::from_secs_f64(s))
    };
    if args.reps == 0 || args.duration <= 0.0 {
        bail!("--reps must be at least 1 and --duration > 0");
    }
    let plan = CalibrationPlan {
        scenarios,
        experts: args.experts.clone(),
        reps: args.reps,
        duration: secs(args.duration, "duration")?,
        settle: secs(args.settle, "settle")?,
        cooldown: secs(args.cooldown, "cooldown")?,
        work_dir: args
            .work_dir
            .clone()
            .unwrap_or_else(|| std::env::temp_dir().join("asa-scenarios-work")),
    };
    info!(
        "calibrating {} scenario(s) × {} expert(s) × {} rep(s) into {}",
        plan.scenarios.len(),
        plan.experts.len(),
        plan.reps,
        args.dir.display()
    );
    let mut switcher = SupervisorSwitcher::system().context("starting the expert supervisor")?;
    calibrate::run_or_resume(&args.dir, &text, &plan, &mut switcher)
}
