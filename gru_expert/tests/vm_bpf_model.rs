//! scx_gru's in-BPF model (`--bpf-model`, issue 42) against a real sched_ext kernel (the lab
//! VM), in one boot: a malformed model file at start, and a model trained for another CPU
//! count, are each one error line, a non-zero exit and EEVDF throughout; with the committed
//! model for the VM's CPU count (`model/mlp.json` at 2 vCPUs, `model/mlp-4cpu.json` at 4:
//! `ASA_LAB_CPUS`) scx_gru attaches and select_cpu decides with no
//! user-space step: decisions go on while scx_gru's process is stopped (SIGSTOP) and no GRU,
//! event or inference ever runs (`no_user_round_trip`); a model swapped in by SIGHUP decides
//! from then on (its model_seq in the stats, its CPU in the decisions); a malformed
//! replacement is refused with one log line while the swapped-in model keeps deciding. Needs
//! the lab (`lab/setup.sh`); not ONNX Runtime.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use asa_gru_expert::metrics::{Metrics, MODE_BPF_MODEL};
use asa_gru_expert::mlp::{MlpModel, WEIGHT_MAX};
use asa_lab::{GuestRun, Lab, VmOutcome};

/// Where the guest finds the model files (the live one is `mlp.json`).
const GUEST_DIR: &str = "/usr/local/share/scx_gru";

/// The guest script: each phase records `key=value` results in /lab/out/results and copies
/// the stats file (rewritten every second) to /lab/out/NAME.json at the points compared.
const SCRIPT: &str = r#"
set -u
rec() { echo "$1=$2" >> /lab/out/results; }
state() { cat /sys/kernel/sched_ext/state; }
snap() { cp /lab/out/stats.json /lab/out/$1.json; }
# Until the stats file holds $1 (at most 10 s).
wait_stats() {
  i=0
  while ! grep -q "$1" /lab/out/stats.json 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
}
# A small load: one stress-ng ping-pong pair (wake-ups with a CPU idle), $2 seconds.
load() { stress-ng --switch 1 --timeout $2 --metrics-brief > /lab/out/$1.log 2>&1; rec $1_rc $?; }
D=GUEST_DIR

rec before "$(state)"
# A malformed model at start: one error, a non-zero exit, never attached.
scx_gru --bpf-model $D/mlp-bad-start.json --stats-file /lab/out/stats-bad.json > /lab/out/bad-start.log 2>&1
rec bad_start_rc $?
rec bad_start_state "$(state)"
# A model trained for another CPU count: refused the same way.
scx_gru --bpf-model $D/mlp-wrong-cpus.json --stats-file /lab/out/stats-bad.json > /lab/out/wrong-cpus.log 2>&1
rec wrong_cpus_rc $?
rec wrong_cpus_state "$(state)"

# The committed model decides.
scx_gru --bpf-model $D/mlp.json --stats-interval 1 --stats-file /lab/out/stats.json > /lab/out/scx_gru.log 2>&1 &
PID=$!
i=0
while [ "$(state)" != enabled ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
rec attached "$(state)"
rec ops "$(cat /sys/kernel/sched_ext/root/ops 2>/dev/null)"
load load1 3
sleep 1.5
snap first

# No user round trip: scx_gru's process stopped, the load runs, the model decides.
kill -STOP $PID
snap stopped0
load stopped 4
rec stopped_state "$(state)"
kill -CONT $PID
sleep 2.5
snap stopped1
# The same stretch without the load, to compare with.
sleep 6.5
snap idle1

# A model swapped in at run time (SIGHUP): it always picks CPU 1.
cp $D/mlp-cpu1.json $D/mlp.json
kill -HUP $PID
wait_stats '"bpf_model_seq": 2'
# (a file written a second after the swap: no decision of the old model is still under way)
sleep 1.2
snap swap0
load swap 3
sleep 1.5
snap swap1

# A malformed replacement: refused, the model of model_seq 2 keeps deciding.
cp $D/mlp-bad-swap.json $D/mlp.json
kill -HUP $PID
wait_stats '"bpf_model_refused": 1'
sleep 1.2
snap bad0
load bad 3
sleep 1.5
snap bad1

rec during "$(state)"
kill -INT $PID
wait $PID
rec sched_rc $?
i=0
while [ "$(state)" != disabled ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
rec after "$(state)"
"#;

/// The committed in-BPF model trained for `cpus` CPUs.
fn committed_model(cpus: u32) -> PathBuf {
    let name = match cpus {
        2 => "mlp.json".to_owned(),
        n => format!("mlp-{n}cpu.json"),
    };
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("model")
        .join(name)
}

/// The model files of the run for a VM of `cpus` vCPUs, written into `dir`: (host path,
/// guest path). `mlp-wrong-cpus.json` is a committed model of another CPU count.
fn model_files(dir: &Path, cpus: u32) -> Vec<(PathBuf, PathBuf)> {
    let model = MlpModel::load(&committed_model(cpus)).unwrap();
    let wrong = MlpModel::load(&committed_model(if cpus == 2 { 4 } else { 2 })).unwrap();
    // Out of the value bounds at start; another file version as a replacement.
    let mut bad_start = model.clone();
    bad_start.w1[0][0] = WEIGHT_MAX + 1;
    let mut bad_swap = serde_json::to_value(&model).unwrap();
    bad_swap["version"] = 2.into();
    let files: Vec<(&str, serde_json::Value)> = vec![
        ("mlp.json", serde_json::to_value(&model).unwrap()),
        (
            "mlp-cpu1.json",
            serde_json::to_value(model.always(1)).unwrap(),
        ),
        (
            "mlp-bad-start.json",
            serde_json::to_value(&bad_start).unwrap(),
        ),
        ("mlp-bad-swap.json", bad_swap),
        ("mlp-wrong-cpus.json", serde_json::to_value(&wrong).unwrap()),
    ];
    files
        .into_iter()
        .map(|(name, json)| {
            let host = dir.join(name);
            std::fs::write(&host, serde_json::to_string_pretty(&json).unwrap()).unwrap();
            (host, Path::new(GUEST_DIR).join(name))
        })
        .collect()
}

fn results(outcome: &VmOutcome) -> BTreeMap<String, String> {
    outcome
        .read_out("results")
        .expect("the guest script wrote results")
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
        .collect()
}

/// The stats file the guest copied to `name`.json.
fn stats(outcome: &VmOutcome, name: &str) -> Metrics {
    Metrics::read_from(&outcome.out_dir.join(format!("{name}.json")))
        .unwrap_or_else(|e| panic!("{name}: {e:#}"))
}

/// Decisions of the in-BPF model for `cpu` in `m` (0 if it never chose it).
fn for_cpu(m: &Metrics, cpu: usize) -> u64 {
    m.nr_bpf_model_by_cpu.get(cpu).copied().unwrap_or(0)
}

#[test]
#[ignore = "boots the lab VM"]
fn vm_bpf_model_decides_in_select_cpu_swaps_at_run_time_and_refuses_malformed_models() {
    let lab = Lab::new().expect("the lab is set up (run lab/setup.sh)");
    let dir = tempfile::tempdir().unwrap();
    let mut run = GuestRun::new("gru-bpf-model", &SCRIPT.replace("GUEST_DIR", GUEST_DIR));
    run.executables.push((
        PathBuf::from(env!("CARGO_BIN_EXE_scx_gru")),
        PathBuf::from("/usr/local/bin/scx_gru"),
    ));
    run.files = model_files(dir.path(), run.vm.cpus);
    run.host_tools = vec!["stress-ng".into()];
    run.vm.timeout = Duration::from_secs(300);
    let outcome = lab.run(&run).expect("the lab VM ran");
    eprintln!("---- guest ----\n{}", outcome.script_output());
    for file in ["bad-start.log", "wrong-cpus.log", "scx_gru.log"] {
        if let Ok(log) = outcome.read_out(file) {
            eprintln!("---- {file} ----\n{log}");
        }
    }
    let r = results(&outcome);

    // A malformed model at start: one clear error line, a non-zero exit, EEVDF throughout.
    assert_eq!(r["before"], "disabled", "{r:?}");
    assert_ne!(r["bad_start_rc"], "0", "{r:?}");
    assert_eq!(r["bad_start_state"], "disabled", "{r:?}");
    let log = outcome.read_out("bad-start.log").unwrap();
    let errors: Vec<&str> = log.lines().filter(|l| l.contains("ERROR")).collect();
    assert_eq!(errors.len(), 1, "{log}");
    assert!(
        errors[0].contains("mlp-bad-start.json") && errors[0].contains("beyond"),
        "{log}"
    );
    assert!(!log.contains("attached"), "{log}");
    // A model trained for another CPU count: the same, the error says so.
    assert_ne!(r["wrong_cpus_rc"], "0", "{r:?}");
    assert_eq!(r["wrong_cpus_state"], "disabled", "{r:?}");
    let log = outcome.read_out("wrong-cpus.log").unwrap();
    let errors: Vec<&str> = log.lines().filter(|l| l.contains("ERROR")).collect();
    assert_eq!(errors.len(), 1, "{log}");
    assert!(
        errors[0].contains("mlp-wrong-cpus.json")
            && errors[0].contains(&format!("this machine has {}", run.vm.cpus)),
        "{log}"
    );
    assert!(!log.contains("attached"), "{log}");

    // Attached with the model; every load completed under it.
    assert_eq!(r["attached"], "enabled", "{r:?}");
    assert!(r["ops"].starts_with("gru"), "ops {:?}", r["ops"]);
    for load in ["load1", "stopped", "swap", "bad"] {
        assert_eq!(
            r[&format!("{load}_rc")],
            "0",
            "the {load} load failed: {r:?}"
        );
    }

    // The model decides in select_cpu from the first wake-up: it was in its map before the
    // scheduler attached, so no wake-up ever found no valid model.
    let first = stats(&outcome, "first");
    eprintln!("first: {}", first.summary());
    assert_eq!(first.mode, MODE_BPF_MODEL, "{first:#?}");
    assert_eq!(
        (
            first.bpf_model_seq,
            first.bpf_model_installs,
            first.bpf_model_seq_used
        ),
        (1, 1, 1),
        "{first:#?}"
    );
    assert!(first.nr_bpf_model_decisions > 0, "{first:#?}");
    assert!(first.nr_bpf_model_applied > 0, "{first:#?}");
    assert_eq!(first.nr_bpf_model_invalid, 0, "{first:#?}");

    // no_user_round_trip: while scx_gru's process was stopped the scheduler stayed attached
    // and the model went on deciding for the load: many more decisions over that stretch than
    // over as long a stretch without the load after it.
    assert_eq!(r["stopped_state"], "enabled", "{r:?}");
    let (s0, s1, idle) = (
        stats(&outcome, "stopped0"),
        stats(&outcome, "stopped1"),
        stats(&outcome, "idle1"),
    );
    let while_stopped = s1.nr_bpf_model_decisions - s0.nr_bpf_model_decisions;
    let without_load = idle.nr_bpf_model_decisions - s1.nr_bpf_model_decisions;
    eprintln!(
        "decisions: {while_stopped} over the stretch with scx_gru stopped and the load, \
         {without_load} over the one without the load"
    );
    assert!(
        while_stopped > 2 * without_load + 200,
        "{while_stopped} decisions with scx_gru stopped and the load, {without_load} without"
    );

    // A model swapped in at run time decides from then on: its model_seq in the stats (user
    // space's and the BPF side's), and every decision since is its CPU, 1.
    let (w0, w1) = (stats(&outcome, "swap0"), stats(&outcome, "swap1"));
    eprintln!("after the swap: {}", w1.summary());
    assert_eq!((w0.bpf_model_seq, w0.bpf_model_installs), (2, 2), "{w0:#?}");
    assert_eq!(w1.bpf_model_seq_used, 2, "{w1:#?}");
    assert!(for_cpu(&w1, 1) > for_cpu(&w0, 1), "{w0:#?}\n{w1:#?}");
    assert_eq!(for_cpu(&w1, 0), for_cpu(&w0, 0), "{w0:#?}\n{w1:#?}");
    let log = outcome.read_out("scx_gru.log").unwrap();
    assert!(
        log.contains("swapped in (SIGHUP)") && log.contains("model_seq 2 replaces 1"),
        "{log}"
    );

    // A malformed replacement is refused with one log line; the model of model_seq 2 keeps
    // deciding (CPU 1 only).
    let (b0, b1) = (stats(&outcome, "bad0"), stats(&outcome, "bad1"));
    eprintln!("after the refusal: {}", b1.summary());
    assert_eq!(
        (
            b0.bpf_model_refused,
            b0.bpf_model_seq,
            b0.bpf_model_installs
        ),
        (1, 2, 2),
        "{b0:#?}"
    );
    assert!(
        b1.nr_bpf_model_decisions > b0.nr_bpf_model_decisions,
        "{b0:#?}\n{b1:#?}"
    );
    assert_eq!(b1.bpf_model_seq_used, 2, "{b1:#?}");
    assert_eq!(for_cpu(&b1, 0), for_cpu(&b0, 0), "{b0:#?}\n{b1:#?}");
    let refusals: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("replacement refused"))
        .collect();
    assert_eq!(refusals.len(), 1, "{log}");
    assert!(
        refusals[0].contains("model_seq 2 keeps deciding") && refusals[0].contains("v2"),
        "{log}"
    );

    // Detached cleanly; the user-space side never ran a model nor got an event.
    assert_eq!(r["during"], "enabled", "{r:?}");
    assert_eq!(r["sched_rc"], "0", "{r:?}");
    assert_eq!(r["after"], "disabled", "{r:?}");
    let last = stats(&outcome, "stats");
    eprintln!("at the end: {}", last.summary());
    assert_eq!(last.mode, MODE_BPF_MODEL, "{last:#?}");
    assert_eq!(
        (
            last.inferences,
            last.tasks_predicted,
            last.events_received,
            last.nr_events,
            last.nr_pred_applied
        ),
        (0, 0, 0, 0, 0),
        "{last:#?}"
    );
    assert_eq!(last.nr_bpf_model_invalid, 0, "{last:#?}");
    assert!(
        last.nr_bpf_model_decisions >= b1.nr_bpf_model_decisions,
        "{last:#?}"
    );
}

/// The files the VM test puts in the guest are what it says they are (no VM needed): the
/// committed model and the CPU-1 replacement pass the checks scx_gru makes, the two malformed
/// ones fail them with the reasons the test looks for in the guest's logs.
#[test]
fn the_vm_tests_model_files_pass_or_fail_the_checks_as_intended() {
    let dir = tempfile::tempdir().unwrap();
    let files = model_files(dir.path(), 2);
    let host = |name: &str| {
        files
            .iter()
            .find(|(_, guest)| guest.ends_with(name))
            .map(|(host, _)| host.clone())
            .unwrap()
    };
    let model = MlpModel::load(&host("mlp.json")).unwrap();
    let cpu1 = MlpModel::load(&host("mlp-cpu1.json")).unwrap();
    assert_eq!(cpu1.describe(), model.describe());
    assert_eq!(cpu1, model.always(1));
    let err = format!(
        "{:#}",
        MlpModel::load(&host("mlp-bad-start.json")).unwrap_err()
    );
    assert!(
        err.contains("mlp-bad-start.json") && err.contains("beyond"),
        "{err}"
    );
    let err = format!(
        "{:#}",
        MlpModel::load(&host("mlp-bad-swap.json")).unwrap_err()
    );
    assert!(err.contains("v2"), "{err}");
    let wrong = MlpModel::load(&host("mlp-wrong-cpus.json")).unwrap();
    wrong.check().unwrap();
    model.fit_cpus(2).unwrap();
    let err = wrong.fit_cpus(2).unwrap_err().to_string();
    assert!(
        err.contains("trained for 4 CPUs, this machine has 2"),
        "{err}"
    );
    // At 4 vCPUs the roles swap.
    let files = model_files(dir.path(), 4);
    let four = MlpModel::load(&files[0].0).unwrap();
    four.fit_cpus(4).unwrap();
    assert_eq!(four.always(1).b2.len(), 4);
    let wrong = MlpModel::load(&files.last().unwrap().0).unwrap();
    assert!(wrong.fit_cpus(4).is_err());
}
