//! Running the guest script in the lab VM: builds scx_gru (and `asa` for `--wakeup-latency`),
//! gives the VM the schedulers, packages and a time budget, and checks that the script
//! finished. `--from-out` skips the VM and reads an earlier run's guest out folder.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use asa_lab::{GuestRun, Lab, RootfsSpec, VmOutcome};

use crate::args::Args;
use crate::guest;

/// The cargo profile of this tool, and so of the scx_gru it runs (the same target folder).
pub const PROFILE: &str = if cfg!(debug_assertions) {
    "debug"
} else {
    "release"
};
/// The guest's Debian packages for the loads.
const PACKAGES: [&str; 3] = ["sysbench", "rt-tests", "linux-perf"];
/// The guest's package for `--bpf-prog-stats` (a root filesystem of its own, cached).
const BPF_STATS_PACKAGE: &str = "bpftool";
/// The file in the guest out folder that names qemu's `-accel` of the run.
pub const ACCEL_FILE: &str = "accel.txt";
/// The file in the guest out folder with the version of the qemu that ran it.
pub const QEMU_FILE: &str = "qemu.txt";

/// Where the guest finds the in-BPF model (`gru-bpfmodel`'s `--bpf-model`).
pub const GUEST_BPF_MODEL: &str = "/usr/local/share/scx_gru/mlp.json";

/// Whether scheduler `name` runs scx_gru with the in-BPF model (a `bpfmodel` part).
pub fn uses_bpf_model(name: &str) -> bool {
    name.strip_prefix("gru-")
        .is_some_and(|parts| parts.split('+').any(|p| p == "bpfmodel"))
}

/// The committed in-BPF model for a machine of `cpus` CPUs (scx_gru refuses a model of
/// another CPU count): `gru_expert/model/mlp.json` for 2, `mlp-{cpus}cpu.json` otherwise.
pub fn bpf_model_for(cpus: u32) -> Result<PathBuf> {
    let name = if cpus == 2 {
        "mlp.json".to_owned()
    } else {
        format!("mlp-{cpus}cpu.json")
    };
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../gru_expert/model")
        .join(name);
    ensure!(
        path.is_file(),
        "gru-bpfmodel at {cpus} vCPUs needs an in-BPF model trained for {cpus} CPUs, {} \
         (gru_expert/train/record_vm.sh, then train_mlp.py --name mlp-{cpus}cpu)",
        path.display()
    );
    Ok(path)
}

/// How long the guest script may take: a minute per measurement for 10 s loads (every load,
/// scheduler and round, the warm-up round too) and 5 minutes for the boot and the fileio
/// files.
pub fn vm_budget(args: &Args) -> Duration {
    let per_measurement = 3 * u64::from(args.seconds) + 30;
    let measurements =
        (args.loads.len() * args.schedulers.len()) as u64 * u64::from(args.rounds + 1);
    Duration::from_secs(per_measurement * measurements + 300)
}

/// Under `cargo run`, builds the scx_gru binary the lab will copy into the guest: `cargo run
/// -p asa-lab` builds asa-lab's binaries only, and a stale scx_gru without a newer option never
/// attaches. With `with_asa`, the `asa` agent too (its `asa record` measures wakeup latency in
/// the guest).
fn build_scx_gru(with_asa: bool) -> Result<()> {
    let Some(cargo) = std::env::var_os("CARGO") else {
        return Ok(()); // run directly: the caller built what it runs
    };
    let mut command = std::process::Command::new(cargo);
    command.args([
        "build",
        "-p",
        "asa-gru-expert",
        "--bin",
        "scx_gru",
        "--bin",
        "scx_floor",
    ]);
    if with_asa {
        command.args(["-p", "asa-agent", "--bin", "asa"]);
    }
    if PROFILE == "release" {
        command.arg("--release");
    }
    let status = command.status().context("run cargo build for scx_gru")?;
    ensure!(status.success(), "cargo build of scx_gru failed ({status})");
    Ok(())
}

/// Builds scx_gru, runs the guest script in the lab VM and checks that it finished.
pub fn run_guest(args: &Args) -> Result<VmOutcome> {
    build_scx_gru(args.wakeup_latency)?;
    let lab = Lab::new().context("the lab is set up (run lab/setup.sh)")?;
    let script = guest::script(args);
    let mut run = GuestRun::new("gru-compare", &script);
    // "gru" brings scx_gru with the committed model and ONNX Runtime at its default paths.
    run.experts = vec!["gru".into(), "bpfland".into()];
    // The control: the cheapest sched_ext scheduler (src/bin/scx_floor.rs).
    if args.schedulers.iter().any(|s| s == "floor") {
        run.executables.push((
            asa_lab::workspace_binary("scx_floor")?,
            PathBuf::from("/usr/local/bin/scx_floor"),
        ));
    }
    // The in-BPF model (gru-bpfmodel): the committed one for the VM's CPU count.
    if args.schedulers.iter().any(|s| uses_bpf_model(s)) {
        run.files
            .push((bpf_model_for(run.vm.cpus)?, PathBuf::from(GUEST_BPF_MODEL)));
    }
    if args.wakeup_latency {
        run = run.with_asa(&asa_lab::workspace_binary("asa")?);
    }
    let mut packages = PACKAGES.to_vec();
    if args.bpf_prog_stats {
        packages.push(BPF_STATS_PACKAGE);
    }
    run.rootfs = Some(RootfsSpec::with_packages(packages));
    run.vm.timeout = vm_budget(args);
    let outcome = lab.run(&run).context("the lab VM ran")?;
    ensure!(
        outcome.exit_code == 0,
        "the guest script failed (status {}):\n{}",
        outcome.exit_code,
        outcome.script_output()
    );
    // How qemu emulated the vCPUs (ASA_LAB_TCG_THREAD, ASA_LAB_ICOUNT), for the report, also
    // with --from-out.
    std::fs::write(
        outcome.out_dir.join(ACCEL_FILE),
        asa_lab::vm::cpu_emulation()?,
    )
    .context("write the accel file")?;
    std::fs::write(
        outcome.out_dir.join(QEMU_FILE),
        asa_lab::vm::qemu_version()?,
    )
    .context("write the qemu file")?;
    println!("guest out folder: {}", outcome.out_dir.display());
    Ok(outcome)
}

/// The outcome of an earlier run from its guest out folder (`--from-out`).
pub fn earlier_run(out_dir: &Path) -> Result<VmOutcome> {
    ensure!(
        out_dir.join("runs.txt").is_file(),
        "{} has no runs.txt: not the out folder of an asa-gru-compare guest",
        out_dir.display()
    );
    Ok(VmOutcome {
        exit_code: 0,
        console: String::new(),
        out_dir: out_dir.to_owned(),
        boot_time: None,
        wall_time: Duration::ZERO,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vm_budget_grows_with_loads_schedulers_and_rounds() {
        let args = Args::default(); // 6 loads, 4 schedulers, 3 rounds (+ warm-up), 10 s
        assert_eq!(vm_budget(&args), Duration::from_secs(60 * 6 * 4 * 4 + 300));
        let one = Args {
            loads: vec!["mixed".into()],
            schedulers: vec!["eevdf".into(), "gru".into()],
            rounds: 1,
            ..Args::default()
        };
        assert_eq!(vm_budget(&one), Duration::from_secs(60 * 2 * 2 + 300));
    }

    #[test]
    fn the_bpf_model_variant_brings_the_model_of_the_vms_cpu_count() {
        assert!(uses_bpf_model("gru-bpfmodel"));
        assert!(uses_bpf_model("gru-burst8+bpfmodel"));
        assert!(!uses_bpf_model("gru") && !uses_bpf_model("gru-fallback"));
        assert!(!uses_bpf_model("bpfmodel") && !uses_bpf_model("gru-bpfmodel2"));
        assert!(bpf_model_for(2).unwrap().ends_with("model/mlp.json"));
        assert!(bpf_model_for(4).unwrap().ends_with("model/mlp-4cpu.json"));
        let err = bpf_model_for(3).unwrap_err().to_string();
        assert!(
            err.contains("trained for 3 CPUs") && err.contains("mlp-3cpu.json"),
            "{err}"
        );
    }

    #[test]
    fn an_earlier_run_needs_a_runs_txt() {
        let dir = tempfile::tempdir().unwrap();
        assert!(earlier_run(dir.path()).is_err());
        std::fs::write(dir.path().join("runs.txt"), "").unwrap();
        let outcome = earlier_run(dir.path()).unwrap();
        assert_eq!(
            (outcome.exit_code, outcome.out_dir),
            (0, dir.path().to_owned())
        );
    }
}
