//! Hot standbys against a real sched_ext kernel (issue 31, point 1): each test boots the lab VM
//! and runs the real `asa` and scx experts in it. A foreground `asa pin` with
//! `--standby-experts` keeps a fixed pool, so the tests do not depend on the classifier's vote.
//!
//! Switch times here are bounds for a regression, not the measurement: the numbers come from
//! `asa-lab bench-switch --standby-targets` (`results/2026-11-27-standby-switch-times/`).
//! Kept short for CI: bpfland and rusty only (lavd needs 25–45 s to load under TCG).

mod daemon_common;

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use asa_lab::{GuestRun, Lab, VmOutcome};
use daemon_common::{asa_run_guest, loop_test_model_classes, GUEST_RUN_ARGS};
use serde_json::Value;

/// One VM at a time: each uses a host core, and attach times must not depend on the others.
static VM: Mutex<()> = Mutex::new(());

fn guest(name: &str, script: &str, experts: &[&str]) -> VmOutcome {
    let _one_at_a_time = VM.lock().unwrap_or_else(|e| e.into_inner());
    let lab = Lab::new().expect("the lab is set up (run lab/setup.sh)");
    let mut run = GuestRun::new(name, script).with_asa(&PathBuf::from(env!("CARGO_BIN_EXE_asa")));
    run.experts = experts.iter().map(|s| s.to_string()).collect();
    run.vm.timeout = Duration::from_secs(600);
    let outcome = lab.run(&run).expect("the lab VM ran");
    eprintln!(
        "---- guest console ({name}) ----\n{}",
        outcome.script_output()
    );
    outcome
}

fn json(outcome: &VmOutcome, file: &str) -> Value {
    let text = outcome.read_out(file).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}: {text}"))
}

/// Shell helpers: `rec KEY VALUE` to /lab/out/results; `parked NAME [NOT_PID]` waits (up to
/// 120 s) until `asa status` lists NAME parked (with a PID other than NOT_PID) and prints its
/// PID; `st FILE` saves `asa status --json`.
const HELPERS: &str = r#"
set -u
rec() { echo "$1=$2" >> /lab/out/results; }
st() { asa status --json > /lab/out/$1; }
parked() {
  i=0
  while [ $i -lt 240 ]; do
    pid=$(asa status 2>/dev/null | awk -v e="$1" '$1 == e && $2 == "pid" && $4 == "parked" { print $3 }')
    if [ -n "$pid" ] && [ "$pid" != "${2:-}" ]; then echo $pid; return 0; fi
    sleep 0.5
    i=$((i + 1))
  done
  return 1
}
"#;

fn results(outcome: &VmOutcome) -> std::collections::BTreeMap<String, String> {
    outcome.read_results("results").unwrap()
}

/// The pool entry of `expert` in a status, if any.
fn standby<'a>(status: &'a Value, expert: &str) -> Option<&'a Value> {
    status["agent"]["standby"]["experts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["expert"] == expert)
}

#[test]
#[ignore = "boots the lab VM"]
fn a_switch_to_a_parked_standby_is_quick_and_the_pool_is_refilled() {
    let script = format!(
        r#"{HELPERS}
asa --standby 2 --standby-experts rusty,bpfland pin bpfland &
P=$!
asa status --wait-for bpfland --timeout 120 > /dev/null; rec up $?
R=$(parked rusty); rec rusty_parked $?
st before.json
asa pin rusty; rec pin_rusty $?
st after.json
B=$(parked bpfland); rec bpfland_parked $?
st refilled.json
asa pin bpfland; rec pin_bpfland $?
st back.json
R2=$(parked rusty "$R"); rec rusty_parked_again $?
kill -INT $P
wait $P; rec foreground_exit $?
rec final_state $(cat /sys/kernel/sched_ext/state)
rec enable_seq $(cat /sys/kernel/sched_ext/enable_seq)
rec scx_processes $(pidof scx_bpfland scx_rusty | wc -w)
"#
    );
    let out = guest("standby-switch", &script, &["bpfland", "rusty"]);
    assert_eq!(out.exit_code, 0);
    let r = results(&out);
    for key in [
        "up",
        "rusty_parked",
        "pin_rusty",
        "bpfland_parked",
        "pin_bpfland",
        "rusty_parked_again",
        "foreground_exit",
    ] {
        assert_eq!(r[key], "0", "{key}: {r:?}");
    }
    let before = json(&out, "before.json");
    let pool = &before["agent"]["standby"];
    assert_eq!(pool["source"], "fixed", "{before:#}");
    // bpfland runs, so only rusty stands by; its memory is shown.
    assert_eq!(pool["experts"].as_array().unwrap().len(), 1, "{before:#}");
    let rusty = standby(&before, "rusty").unwrap();
    assert_eq!(rusty["state"], "parked", "{before:#}");
    assert!(rusty["rss_kib"].as_u64().unwrap() > 0, "{before:#}");
    assert!(pool["memory_kib"].as_u64().unwrap() > 0, "{before:#}");
    for (file, from, to) in [
        ("after.json", "bpfland", "rusty"),
        ("back.json", "rusty", "bpfland"),
    ] {
        let status = json(&out, file);
        let sw = &status["agent"]["last_switch"];
        assert_eq!(status["agent"]["active"]["expert"], to, "{status:#}");
        assert_eq!(status["agent"]["consistent"], true, "{status:#}");
        assert_eq!(
            (sw["from"].as_str(), sw["to"].as_str()),
            (Some(from), Some(to))
        );
        assert_eq!(sw["standby"], true, "not a standby switch: {status:#}");
        let total = sw["total_ms"].as_f64().unwrap();
        let gap = sw["eevdf_gap_ms"].as_f64().unwrap();
        eprintln!("{from} -> {to} to a parked standby: {total:.0} ms, EEVDF gap {gap:.0} ms");
        assert!(
            total <= 1000.0,
            "{from} -> {to} took {total:.0} ms: {status:#}"
        );
        // The standby taken is not in the pool any more (it runs).
        assert!(standby(&status, to).is_none(), "{status:#}");
    }
    // After bpfland -> rusty, the pool started bpfland (the expert replaced) in rusty's place.
    let refilled = json(&out, "refilled.json");
    assert_eq!(standby(&refilled, "bpfland").unwrap()["state"], "parked");
    assert_eq!(refilled["agent"]["standby"]["lost"], 0, "{refilled:#}");
    // Three attaches (bpfland, rusty, bpfland) and none by a standby on its own.
    assert_eq!(r["enable_seq"], "3", "{r:?}");
    assert_eq!(r["final_state"], "disabled");
    // Ctrl-C of the foreground agent killed the standby too.
    assert_eq!(r["scx_processes"], "0", "{r:?}");
}

#[test]
#[ignore = "boots the lab VM"]
fn a_killed_standby_is_reported_and_replaced_and_never_attached() {
    let script = format!(
        r#"{HELPERS}
asa --standby-experts rusty pin bpfland &
P=$!
asa status --wait-for bpfland --timeout 120 > /dev/null; rec up $?
R1=$(parked rusty); rec parked_1 $?
rec pid_1 $R1
kill -9 $R1
sleep 1
st lost.json
R2=$(parked rusty "$R1"); rec parked_2 $?
rec pid_2 $R2
rec seq_before $(cat /sys/kernel/sched_ext/enable_seq)
# Killed right before the switch: the agent must not release a dead standby's gate.
kill -9 $R2
asa pin rusty; rec pin_rusty $?
st switched.json
rec seq_after $(cat /sys/kernel/sched_ext/enable_seq)
rec rusty_pid $(pidof scx_rusty)
kill -INT $P
wait $P; rec foreground_exit $?
rec final_state $(cat /sys/kernel/sched_ext/state)
"#
    );
    let out = guest("standby-killed", &script, &["bpfland", "rusty"]);
    assert_eq!(out.exit_code, 0);
    let r = results(&out);
    for key in ["up", "parked_1", "parked_2", "pin_rusty", "foreground_exit"] {
        assert_eq!(r[key], "0", "{key}: {r:?}");
    }
    // Reported: the event names the standby and the signal; the lost count shows it.
    let lost = json(&out, "lost.json");
    let event = lost["agent"]["last_event"]["message"].as_str().unwrap();
    assert!(
        event.contains("standby rusty") && event.contains("SIGKILL"),
        "{event}"
    );
    assert_eq!(lost["agent"]["standby"]["lost"], 1, "{lost:#}");
    // bpfland kept running through it.
    assert_eq!(lost["agent"]["active"]["expert"], "bpfland");
    assert_eq!(lost["agent"]["consistent"], true, "{lost:#}");
    // Replaced: a new process parked.
    assert_ne!(r["pid_1"], r["pid_2"], "{r:?}");
    // The switch after the second kill worked, with a live rusty (not the killed one), and
    // attached once.
    let switched = json(&out, "switched.json");
    assert_eq!(
        switched["agent"]["active"]["expert"], "rusty",
        "{switched:#}"
    );
    assert_eq!(switched["agent"]["consistent"], true, "{switched:#}");
    assert_ne!(r["rusty_pid"], r["pid_2"], "{r:?}");
    let seq = |k: &str| r[k].parse::<u64>().unwrap();
    assert_eq!(seq("seq_after"), seq("seq_before") + 1, "{r:?}");
    assert!(
        switched["agent"]["standby"]["lost"].as_u64().unwrap() >= 2,
        "{switched:#}"
    );
    assert_eq!(r["final_state"], "disabled");
}

/// `asa run` chooses the pool itself. The loop tests' model knows two classes; the table maps
/// `xz_compress` to bpfland (0.5; rusty 0.4) and every other class to rusty (0.9), so each is
/// first once and rusty, with the higher mean score, is the table's overall best: the pool
/// loads it while the agent starts on EEVDF, and the agent's switch to rusty (the idle vote)
/// takes it. Then, rusty running, the insurance is the runner-up, bpfland (first in the most
/// classes besides rusty): it loads while the machine is idle.
#[test]
#[ignore = "boots the lab VM"]
fn the_daemon_keeps_the_tables_overall_best_standing_by_and_switches_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let classes = loop_test_model_classes();
    let mapping = dir.path().join("mapping.toml");
    let mut table = String::from(
        "schema = \"asa.mapping\"\nversion = 1\nsource = \"hand-written\"\ncreated = \"2026-11-27\"\n",
    );
    for class in &classes {
        let ranked = if class == "xz_compress" {
            r#"{ expert = "bpfland", score = 0.5, spread = 0.0, runs = 0 }, { expert = "rusty", score = 0.4, spread = 0.0, runs = 0 }"#
        } else {
            r#"{ expert = "rusty", score = 0.9, spread = 0.0, runs = 0 }"#
        };
        table.push_str(&format!(
            "[[class]]\nname = \"{class}\"\nranked = [{ranked}]\n"
        ));
    }
    std::fs::write(&mapping, table).unwrap();
    let args = GUEST_RUN_ARGS;
    let script = format!(
        r#"{HELPERS}
asa run {args} > /lab/out/daemon.log 2>&1 &
D=$!
# Up: the socket answers from the start (mode starting), the daemon once its model is loaded.
i=0; until asa status --json 2>/dev/null | grep -q '"mode": "daemon"' || [ $i -ge 300 ]; do sleep 0.2; i=$((i+1)); done
asa status --json > /lab/out/start.json
asa status --wait-for rusty --timeout 120 > /dev/null; rec switched $?
sleep 1
st rusty.json
# rusty runs: the runner-up stands by (loading or parked) within a minute of the idle machine.
i=0; until asa status | grep -Eq '^ +bpfland +pid' || [ $i -ge 120 ]; do sleep 0.5; i=$((i+1)); done
st runner-up.json
kill -TERM $D
wait $D; rec daemon_exit $?
rec final_state $(cat /sys/kernel/sched_ext/state)
rec scx_processes $(pidof scx_bpfland scx_rusty | wc -w)
"#
    );
    let run = asa_run_guest(
        "standby-daemon",
        &script,
        &mapping,
        &["bpfland", "rusty"],
        vec![],
    );
    let _one_at_a_time = VM.lock().unwrap_or_else(|e| e.into_inner());
    let lab = Lab::new().expect("the lab is set up (run lab/setup.sh)");
    let out = lab.run(&run).expect("the lab VM ran");
    eprintln!(
        "---- guest console (standby-daemon) ----\n{}\n---- daemon.log ----\n{}",
        out.script_output(),
        out.read_out("daemon.log").unwrap_or_default()
    );
    assert_eq!(out.exit_code, 0);
    let r = results(&out);
    for key in ["switched", "daemon_exit"] {
        assert_eq!(r[key], "0", "{key}: {r:?}");
    }
    let start = json(&out, "start.json");
    let engine = &start["agent"]["decision"]["engine"];
    assert_eq!(engine["overall_best"], "rusty", "{start:#}");
    assert_eq!(start["agent"]["standby"]["source"], "policy", "{start:#}");
    let status = json(&out, "rusty.json");
    let sw = &status["agent"]["last_switch"];
    // Usually eevdf -> rusty; once the first ticks (agent start, rusty loading) looked busy
    // to the classifier, it went to bpfland first and to rusty after the cooldown: either
    // way the switch into rusty takes the standby.
    assert_eq!(sw["to"], "rusty", "{status:#}");
    assert_eq!(
        sw["standby"], true,
        "the first switch did not take the standby: {status:#}"
    );
    assert_eq!(status["agent"]["standby"]["lost"], 0, "{status:#}");
    let runner_up = json(&out, "runner-up.json");
    assert_eq!(
        runner_up["agent"]["active"]["expert"], "rusty",
        "{runner_up:#}"
    );
    assert!(
        standby(&runner_up, "bpfland").is_some(),
        "with the overall best running, the runner-up does not stand by: {runner_up:#}"
    );
    assert_eq!(r["final_state"], "disabled");
    assert_eq!(r["scx_processes"], "0", "{r:?}");
}
