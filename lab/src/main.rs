//! `asa-lab`: the VM lab's command line (kernel cache, runs, the demo, the switch benchmark).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use asa_lab::{demo, GuestRun, Kernel, Lab};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "asa-lab",
    version,
    about = "ASA's VM lab: a sched_ext kernel under qemu"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Download (or show) the cached sched_ext kernel.
    Kernel {
        /// Resolve and download the current kernel even when one is cached.
        #[arg(long)]
        refresh: bool,
    },
    /// Boot the VM and run a shell script in it; exits with the script's status.
    Run {
        /// Script file to run (busybox sh); `-` reads standard input.
        #[arg(long, conflicts_with = "command")]
        script: Option<PathBuf>,
        /// Script text to run.
        #[arg(short = 'c', long)]
        command: Option<String>,
        /// The `asa` binary to put in the guest (default: next to asa-lab).
        #[arg(long)]
        asa: Option<PathBuf>,
        /// Experts to put in the guest.
        #[arg(long = "expert", value_delimiter = ',')]
        experts: Vec<String>,
        /// Expert catalogue the --expert names are looked up in (default: the built-in one);
        /// the file goes to the guest as /lab/experts.toml (`asa --catalogue /lab/experts.toml`).
        #[arg(long)]
        catalogue: Option<PathBuf>,
        /// Host programs to copy into the guest (e.g. stress-ng).
        #[arg(long = "tool", value_delimiter = ',')]
        tools: Vec<String>,
        /// Host files to copy into the guest, HOST_PATH:GUEST_PATH (GUEST_PATH under /lab, e.g.
        /// `classifier/models/default/classifier.onnx:/lab/model.onnx`); repeatable.
        #[arg(long = "file", value_name = "HOST:GUEST")]
        files: Vec<String>,
        /// Run the script in a Debian root filesystem with these packages (built once, cached).
        #[arg(long, value_delimiter = ',', num_args = 0..)]
        rootfs: Option<Vec<String>>,
        /// Guest memory in MiB (default: ASA_LAB_MEMORY_MIB, else 2048).
        #[arg(long)]
        memory: Option<u32>,
        /// Guest vCPUs (default: ASA_LAB_CPUS, else 2).
        #[arg(long)]
        cpus: Option<u32>,
        /// A persistent work disk by name, mounted at /var/tmp/asa-work in the root filesystem
        /// (kept in the lab cache, one per name and root filesystem, one VM at a time).
        #[arg(long, value_name = "NAME", requires = "rootfs")]
        work_disk: Option<String>,
        /// Seconds before the VM is killed.
        #[arg(long, default_value_t = 600)]
        timeout: u64,
        /// Copy the guest's /lab/out here.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// The demo: boot the VM, calibrate a table for the idle machine and xz within a budget,
    /// let `asa run` (default classifier, that table) recognise an idle machine, then xz, then
    /// idle again and run each row's expert; pin the GRU expert under a load; end on EEVDF.
    Demo {
        /// The `asa` binary (default: next to asa-lab).
        #[arg(long)]
        asa: Option<PathBuf>,
    },
    /// Benchmark: switch time of every ordered pair of experts, in one VM run.
    BenchSwitch {
        /// The `asa` binary (default: next to asa-lab).
        #[arg(long)]
        asa: Option<PathBuf>,
        /// Experts, comma-separated.
        #[arg(long, default_value = "eevdf,bpfland,rusty,lavd")]
        experts: String,
        /// Rounds of the all-pairs circuit.
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Write the JSON result here.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Measure the baseline without the attach gate (stop old, then start new).
        #[arg(long, conflicts_with = "standby_targets")]
        break_before_make: bool,
        /// Measure switches to hot standbys: each target is parked at its gate first.
        #[arg(long)]
        standby_targets: bool,
    },
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
        .format_timestamp_millis()
        .init();
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("asa-lab: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The `asa` binary: the argument, else the one built next to this program.
fn asa_binary(arg: &Option<PathBuf>) -> Result<PathBuf> {
    if let Some(p) = arg {
        return Ok(p.clone());
    }
    let exe = std::env::current_exe()?;
    let candidate = exe.with_file_name("asa");
    if candidate.is_file() {
        return Ok(candidate);
    }
    bail!(
        "no asa binary next to {}: build it (`cargo build --release -p asa-agent`) or pass --asa",
        exe.display()
    )
}

fn exit_code(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// Copies the files and folders under `from` into `to` (created), keeping the layout.
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Kernel { refresh } => {
            let cache = asa_experts::cache_dir();
            let k = if refresh {
                Kernel::fetch(&cache)?
            } else {
                Kernel::ensure(&cache)?
            };
            println!(
                "release: {}\nvmlinuz: {}\nconfig:  {}\nmodules: {}",
                k.release,
                k.vmlinuz.display(),
                k.config.display(),
                k.modules
                    .iter()
                    .map(|m| m.display().to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Run {
            script,
            command,
            asa,
            experts,
            catalogue,
            tools,
            files,
            rootfs,
            memory,
            cpus,
            work_disk,
            timeout,
            out,
        } => {
            let text = match (script, command) {
                (Some(p), _) if p == Path::new("-") => std::io::read_to_string(std::io::stdin())?,
                (Some(p), _) => std::fs::read_to_string(&p)
                    .with_context(|| format!("reading {}", p.display()))?,
                (None, Some(c)) => c,
                (None, None) => bail!("give --script FILE or -c SCRIPT"),
            };
            let lab = Lab::new()?;
            let mut run = GuestRun::new("cli", &text);
            if asa.is_some() || !experts.is_empty() {
                run = run.with_asa(&asa_binary(&asa)?);
            }
            run.experts = experts;
            run.catalogue = catalogue;
            run.host_tools = tools;
            for f in &files {
                let (host, guest) = f
                    .split_once(':')
                    .with_context(|| format!("--file {f}: expected HOST_PATH:GUEST_PATH"))?;
                if !Path::new(host).is_file() {
                    bail!("--file {f}: {host} is not a file");
                }
                if !guest.starts_with("/lab/") {
                    bail!("--file {f}: the guest path must be under /lab/");
                }
                run.files.push((PathBuf::from(host), PathBuf::from(guest)));
            }
            run.rootfs = rootfs.map(asa_lab::RootfsSpec::with_packages);
            let shape = asa_lab::VmConfig::from_env()?;
            run.vm.memory_mib = memory.unwrap_or(shape.memory_mib);
            run.vm.cpus = cpus.unwrap_or(shape.cpus);
            run.work_disk = work_disk;
            run.vm.timeout = Duration::from_secs(timeout);
            run.vm.echo_console = true;
            let outcome = lab.run(&run)?;
            if let Some(dir) = out {
                copy_tree(&outcome.out_dir, &dir).with_context(|| {
                    format!("copying the guest's /lab/out to {}", dir.display())
                })?;
            }
            eprintln!(
                "asa-lab: guest exit status {} (boot {:.1} s, whole run {:.1} s)",
                outcome.exit_code,
                outcome.boot_time.unwrap_or_default().as_secs_f64(),
                outcome.wall_time.as_secs_f64()
            );
            Ok(exit_code(outcome.exit_code))
        }
        Command::Demo { asa } => {
            let lab = Lab::new()?;
            eprintln!(
                "asa-lab: booting {} under qemu (TCG, {} vCPUs)",
                lab.kernel.release,
                asa_lab::vm::VmConfig::from_env()?.cpus
            );
            let model = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../classifier/models/default/classifier.onnx");
            if !model.is_file() {
                bail!("the default classifier {} is missing", model.display());
            }
            // The gru expert brings ONNX Runtime into the guest; the agent's classifier uses it.
            let script = demo::script(
                "/lab/classifier.onnx",
                asa_lab::GRU_GUEST_ORT_LIB,
                "/lab/cal.toml",
            );
            let catalogue =
                std::env::temp_dir().join(format!("asa-demo-{}.toml", std::process::id()));
            std::fs::write(
                &catalogue,
                asa_scenarios::catalogue::calibration_test_catalogue(),
            )
            .with_context(|| format!("writing {}", catalogue.display()))?;
            let mut run = GuestRun::new("demo", &script).with_asa(&asa_binary(&asa)?);
            // Every expert of the catalogue, so the guest's `asa experts` lists none missing.
            run.experts = asa_experts::Catalogue::builtin()
                .available_schedulers()
                .map(|e| e.name.clone())
                .collect();
            run.host_tools = vec!["stress-ng".into(), "xz".into()];
            run.files
                .push((model, PathBuf::from("/lab/classifier.onnx")));
            run.files
                .push((catalogue.clone(), PathBuf::from("/lab/cal.toml")));
            run.vm.timeout = Duration::from_secs(600);
            run.vm.echo_console = true;
            let outcome = lab.run(&run);
            let _ = std::fs::remove_file(&catalogue);
            let outcome = outcome?;
            println!("\n=== what the agent did (its decision log)\n");
            match outcome.read_out(demo::DECISION_LOG) {
                Ok(log) => print!("{}", demo::summary(&log)),
                Err(e) => println!("no decision log: {e:#}"),
            }
            eprintln!(
                "asa-lab: demo finished with status {} (boot {:.1} s, whole run {:.1} s)",
                outcome.exit_code,
                outcome.boot_time.unwrap_or_default().as_secs_f64(),
                outcome.wall_time.as_secs_f64()
            );
            Ok(exit_code(outcome.exit_code))
        }
        Command::BenchSwitch {
            asa,
            experts,
            rounds,
            json,
            break_before_make,
            standby_targets,
        } => {
            let lab = Lab::new()?;
            let names: Vec<String> = experts.split(',').map(str::to_owned).collect();
            let (mode, label) = if break_before_make {
                (" --break-before-make", "break before make")
            } else if standby_targets {
                (
                    " --standby-targets",
                    "hot standby: each target parked at its gate before the switch",
                )
            } else {
                ("", "attach gate")
            };
            let script = format!(
                "asa bench-switch --experts {experts} --rounds {rounds}{mode} --json /lab/out/switch.json > /lab/out/switch.md\n"
            );
            let mut run = GuestRun::new("bench-switch", &script).with_asa(&asa_binary(&asa)?);
            run.experts = names;
            run.vm.timeout = Duration::from_secs(3600);
            run.vm.echo_console = true;
            let outcome = lab.run(&run)?;
            if outcome.exit_code != 0 {
                bail!(
                    "the benchmark failed in the guest (status {})",
                    outcome.exit_code
                );
            }
            let table = outcome.read_out("switch.md")?;
            if let Some(path) = json {
                std::fs::write(&path, outcome.read_out("switch.json")?)?;
            }
            println!(
                "Switch times in one lab VM run ({}; kernel {}, qemu TCG, {} vCPUs), median of {rounds} switches per pair:\n\n{table}",
                label,
                lab.kernel.release,
                asa_lab::vm::VmConfig::from_env()?.cpus
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_out_keeps_the_guests_folders() {
        let from = tempfile::tempdir().unwrap();
        std::fs::write(from.path().join("results"), "a=1\n").unwrap();
        std::fs::create_dir_all(from.path().join("sc/rec")).unwrap();
        std::fs::write(from.path().join("sc/rec/run.parquet"), "data").unwrap();
        let to = tempfile::tempdir().unwrap();
        let dest = to.path().join("out");
        copy_tree(from.path(), &dest).unwrap();
        assert_eq!(
            std::fs::read_to_string(dest.join("results")).unwrap(),
            "a=1\n"
        );
        assert_eq!(
            std::fs::read_to_string(dest.join("sc/rec/run.parquet")).unwrap(),
            "data"
        );
    }
}
