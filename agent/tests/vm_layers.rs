//! Per-application mode against a real sched_ext kernel: scx_layered from crates.io, started by
//! the agent's supervisor behind the attach gate with ASA's layer plan (the catalogue's
//! default, `layers/default.toml`; under `asa run`, the mapping table's `[[layer]]` rows laid
//! over it) and the shared task-hint map, in the lab VM.
//!
//! It needs the lab (qemu, the cached kernel, the experts): `make test` sets it up and runs
//! it with `--include-ignored`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use asa_lab::{GuestRun, Lab, VmOutcome};

mod daemon_common;

use daemon_common::{asa_run_guest, loop_test_model_classes, mapping_table, GUEST_RUN_ARGS};

/// One VM at a time.
static VM: Mutex<()> = Mutex::new(());

fn boot(run: &GuestRun) -> VmOutcome {
    let _one_at_a_time = VM.lock().unwrap_or_else(|e| e.into_inner());
    let lab = Lab::new().expect("the lab is set up (run lab/setup.sh)");
    let out = lab.run(run).expect("the lab VM ran");
    eprintln!(
        "---- guest console ({}) ----\n{}",
        run.name,
        out.script_output()
    );
    out
}

/// The most tasks scx_layered's monitor showed in each layer (its layer lines read
/// `▶ NAME ─ util/open/frac=… tasks=N`).
fn layer_tasks(monitor: &str) -> BTreeMap<String, u64> {
    let mut most: BTreeMap<String, u64> = BTreeMap::new();
    for line in monitor.lines() {
        let Some(rest) = line.trim_start().strip_prefix('\u{25B6}') else {
            continue;
        };
        let name = rest
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_string();
        let tasks = rest
            .split("tasks=")
            .nth(1)
            .and_then(|t| t.split_whitespace().next())
            .and_then(|t| t.parse().ok())
            .unwrap_or(0);
        let entry = most.entry(name).or_default();
        *entry = (*entry).max(tasks);
    }
    most
}

const SCRIPT: &str = r#"
set -u
rec() { echo "$1=$2" >> /lab/out/results; }
state() { cat /sys/kernel/sched_ext/state; }
sh -c 'while :; do :; done' & S1=$!
sh -c 'while :; do :; done' & S2=$!
asa pin layered > /lab/out/pin.log 2>&1 &
P=$!
asa status --wait-for layered --timeout 240 --json > /lab/out/layered.json; rec wait_layered $?
rec ops $(cat /sys/kernel/sched_ext/root/ops)
rec hint_map $(test -e /sys/fs/bpf/asa/task_hints && echo pinned || echo missing)
# The scheduler's own view of its layers, through its stats server.
timeout 6 scx_layered --monitor 1 > /lab/out/monitor.txt 2>&1
sleep 2; rec still $(state)
kill -INT $P
wait $P; rec foreground_exit $?
kill $S1 $S2
rec final_state $(state)
rec scx_processes $(pidof scx_layered | wc -w)
rec hint_map_after $(test -e /sys/fs/bpf/asa/task_hints && echo pinned || echo missing)
"#;

#[test]
#[ignore = "boots the lab VM"]
fn scx_layered_runs_asas_layer_plan_under_the_supervisor_and_stops_to_eevdf() {
    let mut run =
        GuestRun::new("layered", SCRIPT).with_asa(&PathBuf::from(env!("CARGO_BIN_EXE_asa")));
    run.experts = vec!["layered".into()];
    run.vm.timeout = Duration::from_secs(600);
    let lab = Lab::new().expect("the lab is set up (run lab/setup.sh)");
    let out = lab.run(&run).expect("the lab VM ran");
    eprintln!("---- guest console ----\n{}", out.script_output());
    assert_eq!(out.exit_code, 0);
    let r = out.read_results("results").unwrap();
    let pin_log = out.read_out("pin.log").unwrap_or_default();
    assert_eq!(r["wait_layered"], "0", "{r:?}\n{pin_log}");
    assert!(r["ops"].starts_with("layered"), "{r:?}");
    assert_eq!(r["still"], "enabled", "{r:?}\n{pin_log}");
    // The agent's plan and map: scx_layered pinned the hint map where the agent shares it, and
    // runs one layer per application class of the default plan, then `other`.
    assert_eq!(r["hint_map"], "pinned", "{r:?}");
    let monitor = out.read_out("monitor.txt").unwrap_or_default();
    let plan = asa_layers::default_plan();
    for layer in plan
        .classes
        .iter()
        .map(|c| c.class.as_str())
        .chain([asa_layers::OTHER_LAYER])
    {
        assert!(
            monitor.contains(layer),
            "layer {layer} not in the monitor output:\n{monitor}"
        );
    }
    // Ctrl-C of the foreground agent: EEVDF again, no scheduler left, and the hints' map stays
    // pinned for the next start (a restarted scheduler or agent reuses it).
    assert_eq!(r["foreground_exit"], "0", "{r:?}");
    assert_eq!(r["final_state"], "disabled", "{r:?}");
    assert_eq!(r["scx_processes"], "0", "{r:?}");
    assert_eq!(r["hint_map_after"], "pinned", "{r:?}");
}

/// Two jobs under `asa run` with scx_layered: the user pins one (a build-like loop of short
/// CPU-bound children) to `cpu_batch`
/// and the other (a shell waking every 10 ms) to `interactive`; `asa apps` shows the classes and layers, scx_layered's own monitor shows
/// tasks in both layers, an unpin takes the job back out, and the agent's exit leaves the
/// machine on EEVDF with no scheduler behind.
#[test]
#[ignore = "boots the lab VM"]
fn pinned_applications_run_in_their_classes_layers_under_asa_run() {
    let dir = tempfile::tempdir().unwrap();
    let mapping = dir.path().join("mapping.toml");
    // A calibrated layer row: scx_layered must run cpu_batch's layer with 5 ms slices.
    let layer_row = "[[layer]]\nclass = \"cpu_batch\"\npolicy = { kind = \"open\", slice_us = 5000, weight = 100 }\nranked = [{ expert = \"layered-cpu_batch-5ms\", score = 0.6, spread = 0.01, runs = 4 }]\n";
    std::fs::write(
        &mapping,
        mapping_table(&loop_test_model_classes(), |_| "layered") + layer_row,
    )
    .unwrap();
    let script = format!(
        r#"
set -u
rec() {{ echo "$1=$2" >> /lab/out/results; }}
asa run {GUEST_RUN_ARGS} > /lab/out/daemon.log 2>&1 &
D=$!
asa status --wait-for layered --timeout 300 > /dev/null; rec layered $?
tr '\0' '\n' < /proc/$(pidof scx_layered | cut -d' ' -f1)/cmdline | tail -n 1 > /lab/out/layer_config.json
# Two jobs, each in a process group of its own as a shell with job control starts them. The
# batch job works like a build: it keeps forking short CPU-bound children (they start with its
# hint, inherited at fork). A lone endless hog would not do: a task alone on its CPU keeps
# running with refilled slices and passes no scheduling event where scx_layered re-reads its
# hint (layers/README.md).
setsid sh -c 'while :; do sh -c "i=0; while [ \$i -lt 3000 ]; do i=\$((i+1)); done"; done' & H=$!
setsid sh -c 'while :; do sleep 0.01; done' & I=$!
sleep 1
asa app set $H cpu_batch; rec set_batch $?
asa app set $I interactive; rec set_interactive $?
asa app set $I no_such_class 2> /lab/out/bad_class.txt; rec bad_class $?
asa app set 999999 interactive 2> /lab/out/bad_pid.txt; rec bad_pid $?
sleep 3
asa apps --json > /lab/out/apps.json; rec apps $?
asa status > /lab/out/status.txt
timeout 6 scx_layered --monitor 1 > /lab/out/monitor.txt 2>&1
asa app unset $I; rec unset $?
sleep 3
asa apps --json > /lab/out/apps_after.json
kill -TERM $D
wait $D; rec daemon_exit $?
kill $H $I
rec final_state $(cat /sys/kernel/sched_ext/state)
rec scx_processes $(pidof scx_layered | wc -w)
"#
    );
    let run = asa_run_guest("layered-apps", &script, &mapping, &["layered"], vec![]);
    let out = boot(&run);
    let daemon_log = out.read_out("daemon.log").unwrap_or_default();
    assert_eq!(out.exit_code, 0, "{daemon_log}");
    let r = out.read_results("results").unwrap();
    for key in [
        "layered",
        "set_batch",
        "set_interactive",
        "apps",
        "unset",
        "daemon_exit",
    ] {
        assert_eq!(r[key], "0", "{key}: {r:?}\n{daemon_log}");
    }
    // Bad input: one error each, nothing else changes.
    assert_ne!(r["bad_class"], "0", "{r:?}");
    let bad_class = out.read_out("bad_class.txt").unwrap_or_default();
    assert!(
        bad_class.contains("cpu_batch"),
        "the error lists the classes: {bad_class}"
    );
    assert_ne!(r["bad_pid"], "0", "{r:?}");
    let apps: serde_json::Value =
        serde_json::from_str(&out.read_out("apps.json").unwrap()).unwrap();
    let classes: Vec<String> = apps["list"]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .filter_map(|a| a["class"].as_str().map(str::to_string))
        .collect();
    assert!(
        classes.contains(&"cpu_batch".to_string()) && classes.contains(&"interactive".to_string()),
        "{apps:#}\n{daemon_log}"
    );
    // The table's layer row reached scx_layered; the other layers kept the default plan's.
    let config: serde_json::Value =
        serde_json::from_str(out.read_out("layer_config.json").unwrap_or_default().trim())
            .unwrap_or_else(|e| panic!("scx_layered's last argument is its layer JSON: {e}"));
    let slice_of = |layer: &str| {
        config
            .as_array()
            .and_then(|layers| layers.iter().find(|l| l["name"] == layer))
            .map(|l| l["kind"]["Open"]["slice_us"].clone())
    };
    assert_eq!(slice_of("cpu_batch"), Some(5000.into()), "{config}");
    assert_eq!(slice_of("interactive"), Some(3000.into()), "{config}");
    let status = out.read_out("status.txt").unwrap_or_default();
    assert!(
        status.contains("layers:      cpu_batch 5 ms slices"),
        "{status}"
    );
    let monitor = out.read_out("monitor.txt").unwrap_or_default();
    let tasks = layer_tasks(&monitor);
    eprintln!("tasks per layer: {tasks:?}\n{status}");
    assert!(
        tasks.get("cpu_batch").copied().unwrap_or(0) >= 1,
        "{tasks:?}\n{monitor}"
    );
    assert!(
        tasks.get("interactive").copied().unwrap_or(0) >= 1,
        "{tasks:?}\n{monitor}"
    );
    let after: serde_json::Value =
        serde_json::from_str(&out.read_out("apps_after.json").unwrap()).unwrap();
    let still_interactive = after["list"]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .any(|a| a["class"] == "interactive");
    assert!(!still_interactive, "unpinned: {after:#}");
    assert_eq!(r["final_state"], "disabled", "{r:?}");
    assert_eq!(r["scx_processes"], "0", "{r:?}");
}

/// Nothing breaks when the agent goes (issue 40): an agent killed with SIGKILL takes scx_layered
/// with it (its death signal), so the machine is on EEVDF, and the applications run on, in no
/// group the agent made (it makes none: a hint is all). A restarted agent takes its applications
/// back: the pinned one is in its class again.
#[test]
#[ignore = "boots the lab VM"]
fn a_killed_agent_leaves_eevdf_and_a_restarted_one_takes_its_applications_back() {
    let dir = tempfile::tempdir().unwrap();
    let mapping = dir.path().join("mapping.toml");
    std::fs::write(
        &mapping,
        mapping_table(&loop_test_model_classes(), |_| "layered"),
    )
    .unwrap();
    let script = format!(
        r#"
set -u
rec() {{ echo "$1=$2" >> /lab/out/results; }}
asa run {GUEST_RUN_ARGS} > /lab/out/daemon.log 2>&1 &
D=$!
asa status --wait-for layered --timeout 300 > /dev/null; rec layered $?
setsid sh -c 'while :; do sh -c "i=0; while [ \$i -lt 3000 ]; do i=\$((i+1)); done"; done' & H=$!
sleep 1
asa app set $H cpu_batch; rec set_batch $?
cgroup_before=$(cat /proc/$H/cgroup)
sleep 3
kill -KILL $D
wait $D 2> /dev/null
sleep 3
rec state_after_kill $(cat /sys/kernel/sched_ext/state)
rec scx_after_kill $(pidof scx_layered | wc -w)
kill -0 $H; rec app_alive $?
[ "$(cat /proc/$H/cgroup)" = "$cgroup_before" ]; rec same_cgroup $?
asa run {GUEST_RUN_ARGS} > /lab/out/daemon2.log 2>&1 &
D=$!
asa status --wait-for layered --timeout 300 > /dev/null; rec layered_again $?
sleep 4
asa apps --json > /lab/out/apps.json; rec apps $?
kill -TERM $D
wait $D; rec daemon_exit $?
kill $H
rec final_state $(cat /sys/kernel/sched_ext/state)
"#
    );
    let run = asa_run_guest("layered-killed", &script, &mapping, &["layered"], vec![]);
    let out = boot(&run);
    let logs = format!(
        "{}\n--- after the restart ---\n{}",
        out.read_out("daemon.log").unwrap_or_default(),
        out.read_out("daemon2.log").unwrap_or_default()
    );
    assert_eq!(out.exit_code, 0, "{logs}");
    let r = out.read_results("results").unwrap();
    for key in [
        "layered",
        "set_batch",
        "app_alive",
        "same_cgroup",
        "layered_again",
        "apps",
        "daemon_exit",
    ] {
        assert_eq!(r[key], "0", "{key}: {r:?}\n{logs}");
    }
    assert_eq!(
        (r["state_after_kill"].as_str(), r["scx_after_kill"].as_str()),
        ("disabled", "0"),
        "the expert went with the agent: {r:?}\n{logs}"
    );
    let apps: serde_json::Value =
        serde_json::from_str(&out.read_out("apps.json").unwrap()).unwrap();
    let batch = apps["list"]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .any(|a| a["class"] == "cpu_batch");
    assert!(batch, "taken back after the restart: {apps:#}\n{logs}");
    assert_eq!(r["final_state"], "disabled", "{r:?}");
}
