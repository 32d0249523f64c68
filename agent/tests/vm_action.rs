//! The action path against a real sched_ext kernel: each test boots the lab VM (Debian's
//! kernel under qemu), runs the real `asa` binary and the real scx experts in it, and checks
//! what the kernel and the agent report. These are the acceptance tests of issue 2.
//!
//! They need the lab (qemu, the cached kernel, the experts): `make test` sets it up and runs
//! them with `--include-ignored`.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

mod daemon_common;

use asa_lab::{GuestRun, Lab, VmOutcome};
use serde_json::Value;

/// One VM at a time: each uses a host core, and attach times must not depend on the others.
static VM: Mutex<()> = Mutex::new(());

fn asa() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_asa"))
}

fn guest(name: &str, script: &str, experts: &[&str], files: Vec<(PathBuf, PathBuf)>) -> VmOutcome {
    let mut run = GuestRun::new(name, script).with_asa(&asa());
    run.experts = experts.iter().map(|s| s.to_string()).collect();
    run.files = files;
    run.vm.timeout = Duration::from_secs(600);
    guest_run(&run)
}

/// Boot `run` (one VM at a time) and print its console.
fn guest_run(run: &GuestRun) -> VmOutcome {
    let _one_at_a_time = VM.lock().unwrap_or_else(|e| e.into_inner());
    let lab = Lab::new().expect("the lab is set up (run lab/setup.sh)");
    let outcome = lab.run(run).expect("the lab VM ran");
    eprintln!(
        "---- guest console ({}) ----\n{}",
        run.name,
        outcome.script_output()
    );
    outcome
}

fn json(outcome: &VmOutcome, file: &str) -> Value {
    let text = outcome.read_out(file).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}: {text}"))
}

/// `key=value` lines the guest script wrote to `/lab/out/results`.
fn results(outcome: &VmOutcome) -> std::collections::BTreeMap<String, String> {
    outcome.read_results("results").unwrap()
}

/// Check one `asa status --json` output: the agent believes `expert`, the kernel agrees.
fn assert_running(status: &Value, expert: &str, ops_prefix: Option<&str>) {
    let agent = &status["agent"];
    assert_eq!(agent["active"]["expert"], expert, "{status:#}");
    assert_eq!(agent["consistent"], true, "{status:#}");
    let kernel = &status["kernel"];
    match ops_prefix {
        Some(prefix) => {
            assert_eq!(kernel["state"], "enabled", "{status:#}");
            let ops = kernel["ops"].as_str().unwrap_or_default();
            assert!(
                ops.starts_with(prefix),
                "ops {ops:?} is not {prefix}: {status:#}"
            );
        }
        None => {
            assert_eq!(kernel["state"], "disabled", "{status:#}");
            assert!(kernel["ops"].is_null(), "{status:#}");
        }
    }
}

const RECORD: &str = r#"
set -u
rec() { echo "$1=$2" >> /lab/out/results; }
state() { cat /sys/kernel/sched_ext/state; }
"#;

#[test]
#[ignore = "boots the lab VM"]
fn pin_every_expert_in_turn_then_eevdf() {
    let script = format!(
        r#"{RECORD}
asa --expert-nice -5 pin bpfland &
P=$!
asa status --wait-for bpfland --timeout 120 --json > /lab/out/bpfland.json; rec wait_bpfland $?
rec bpfland_nice $(awk '{{print $19}}' /proc/$(pidof scx_bpfland)/stat)
asa pin lavd; rec pin_lavd $?
asa status --json > /lab/out/lavd.json
rec lavd_nice $(awk '{{print $19}}' /proc/$(pidof scx_lavd)/stat)
asa pin rusty; rec pin_rusty $?
asa status --json > /lab/out/rusty.json
asa pin eevdf; rec pin_eevdf $?
asa status --json > /lab/out/eevdf.json
asa pin bpfland; rec pin_bpfland_again $?
kill -INT $P
wait $P; rec foreground_exit $?
rec final_state $(state)
rec enable_seq $(cat /sys/kernel/sched_ext/enable_seq)
rec scx_processes $(pidof scx_bpfland scx_lavd scx_rusty | wc -w)
"#
    );
    let out = guest("pin-all", &script, &["bpfland", "lavd", "rusty"], vec![]);
    assert_eq!(out.exit_code, 0);
    let r = results(&out);
    for key in [
        "wait_bpfland",
        "pin_lavd",
        "pin_rusty",
        "pin_eevdf",
        "pin_bpfland_again",
        "foreground_exit",
    ] {
        assert_eq!(r[key], "0", "{key}: {r:?}");
    }
    assert_running(&json(&out, "bpfland.json"), "bpfland", Some("bpfland"));
    // `--expert-nice -5` of the supervising `asa pin`: every expert it starts runs at -5.
    assert_eq!(r["bpfland_nice"], "-5", "{r:?}");
    assert_eq!(r["lavd_nice"], "-5", "{r:?}");
    let lavd = json(&out, "lavd.json");
    assert_running(&lavd, "lavd", Some("lavd"));
    // Switching between two BPF schedulers passes through EEVDF: the gap is measured.
    let sw = &lavd["agent"]["last_switch"];
    assert_eq!(sw["from"], "bpfland", "{lavd:#}");
    let gap = sw["eevdf_gap_ms"].as_f64().unwrap();
    assert!(gap > 0.0, "{lavd:#}");
    // Make before break: lavd loaded (seconds of verification) while bpfland still ran, so
    // the time on EEVDF is a small part of lavd's start.
    let prepare = sw["prepare_ms"].as_f64().unwrap();
    assert!(
        prepare > 0.0 && gap < sw["start_ms"].as_f64().unwrap() / 2.0,
        "{lavd:#}"
    );
    assert!(sw["stop_ms"].as_f64().unwrap() > 0.0, "{lavd:#}");
    assert_running(&json(&out, "rusty.json"), "rusty", Some("rusty"));
    let eevdf = json(&out, "eevdf.json");
    assert_running(&eevdf, "eevdf", None);
    assert!(eevdf["agent"]["last_switch"]["eevdf_gap_ms"].is_null());
    // Ctrl-C of the foreground agent restored EEVDF and left no expert behind.
    assert_eq!(r["final_state"], "disabled");
    assert_eq!(r["scx_processes"], "0");
    // bpfland, lavd, rusty, bpfland: four attaches, none repeated by a retry.
    assert_eq!(r["enable_seq"], "4");
}

/// The portfolio beyond the first three: p2dq, flash and cosmos from crates.io each load
/// behind the gate, attach, run under a CPU load, report themselves, and stop on a switch.
#[test]
#[ignore = "boots the lab VM"]
fn p2dq_flash_and_cosmos_each_attach_run_a_load_and_stop() {
    let script = format!(
        r#"{RECORD}
# A load on both vCPUs.
sh -c 'while :; do :; done' & S1=$!
sh -c 'while :; do :; done' & S2=$!
asa pin p2dq &
P=$!
asa status --wait-for p2dq --timeout 180 --json > /lab/out/p2dq.json; rec wait_p2dq $?
sleep 2; rec p2dq_still $(state)
asa pin flash; rec pin_flash $?
sleep 2; asa status --json > /lab/out/flash.json
asa pin cosmos; rec pin_cosmos $?
sleep 2; asa status --json > /lab/out/cosmos.json
kill -INT $P
wait $P; rec foreground_exit $?
kill $S1 $S2
rec final_state $(state)
rec enable_seq $(cat /sys/kernel/sched_ext/enable_seq)
rec scx_processes $(pidof scx_p2dq scx_flash scx_cosmos | wc -w)
"#
    );
    let experts = ["p2dq", "flash", "cosmos"];
    let out = guest("portfolio", &script, &experts, vec![]);
    assert_eq!(out.exit_code, 0);
    let r = results(&out);
    for key in ["wait_p2dq", "pin_flash", "pin_cosmos", "foreground_exit"] {
        assert_eq!(r[key], "0", "{key}: {r:?}");
    }
    assert_eq!(r["p2dq_still"], "enabled", "{r:?}");
    for expert in experts {
        assert_running(&json(&out, &format!("{expert}.json")), expert, Some(expert));
    }
    assert_eq!(r["final_state"], "disabled");
    assert_eq!(r["scx_processes"], "0");
    // One attach each, none repeated by a retry.
    assert_eq!(r["enable_seq"], "3");
}

#[test]
#[ignore = "boots the lab VM"]
fn killed_expert_is_reported_as_eevdf_within_a_second() {
    let script = format!(
        r#"{RECORD}
asa pin bpfland &
P=$!
asa status --wait-for bpfland --timeout 120 > /dev/null; rec up $?
kill -9 $(pidof scx_bpfland)
t0=$(cut -d' ' -f1 /proc/uptime)
asa status --wait-for eevdf --timeout 1 --json > /lab/out/after_kill.json; rec noticed $?
t1=$(cut -d' ' -f1 /proc/uptime)
rec t0 $t0
rec t1 $t1
rec state_after_kill $(state)
kill -INT $P
wait $P; rec foreground_exit $?
"#
    );
    let out = guest("kill-9", &script, &["bpfland"], vec![]);
    assert_eq!(out.exit_code, 0);
    let r = results(&out);
    assert_eq!(r["up"], "0", "{r:?}");
    assert_eq!(
        r["noticed"], "0",
        "the agent did not report EEVDF within 1 s: {r:?}"
    );
    let elapsed = r["t1"].parse::<f64>().unwrap() - r["t0"].parse::<f64>().unwrap();
    eprintln!("kill -9 to `asa status` reporting EEVDF: {elapsed:.2} s (guest clock, includes asa start-up)");
    let status = json(&out, "after_kill.json");
    assert_running(&status, "eevdf", None);
    let event = status["agent"]["last_event"]["message"].as_str().unwrap();
    assert!(
        event.contains("bpfland") && event.contains("SIGKILL"),
        "{event}"
    );
    assert_eq!(r["state_after_kill"], "disabled");
    assert_eq!(r["foreground_exit"], "0");
}

/// A catalogue with experts that fail the two ways a real one can: the process dies before
/// the kernel enables it (as when the verifier rejects the program), or it never attaches.
const BROKEN_CATALOGUE: &str = r#"
schema = "asa.experts"
version = 1
[[expert]]
name = "eevdf"
kind = "kernel-default"
[[expert]]
name = "bpfland"
kind = "scx-crate"
crate = "scx_bpfland"
version = "1.1.4"
binary = "scx_bpfland"
ops_prefix = "bpfland"
[[expert]]
name = "rusty"
kind = "scx-crate"
crate = "scx_rusty"
version = "1.1.4"
binary = "scx_rusty"
ops_prefix = "rusty"
[[expert]]
name = "crashes"
kind = "scx-crate"
crate = "scx_crashes"
version = "0.0.0"
binary = "scx_crashes"
ops_prefix = "crashes"
[[expert]]
name = "hangs"
kind = "scx-crate"
crate = "scx_hangs"
version = "0.0.0"
binary = "scx_hangs"
ops_prefix = "hangs"
enable_timeout_s = 3
"#;

#[test]
#[ignore = "boots the lab VM"]
fn bad_requests_fail_clearly_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let catalogue = write("catalogue.toml", BROKEN_CATALOGUE);
    let crashes = write(
        "scx_crashes",
        "#!/bin/sh\n[ \"${1:-}\" = --version ] && { echo scx_crashes 0.0.0; exit 0; }\n\
         echo 'libbpf: prog crashes_enqueue: BPF program load failed: Permission denied' >&2\nexit 1\n",
    );
    let hangs = write(
        "scx_hangs",
        "#!/bin/sh\n[ \"${1:-}\" = --version ] && { echo scx_hangs 0.0.0; exit 0; }\nexec sleep 1000\n",
    );
    let files = vec![
        (catalogue, PathBuf::from("/lab/catalogue.toml")),
        (crashes, PathBuf::from("/usr/local/bin/scx_crashes")),
        (hangs, PathBuf::from("/usr/local/bin/scx_hangs")),
    ];
    let script = format!(
        r#"{RECORD}
chmod +x /usr/local/bin/scx_crashes /usr/local/bin/scx_hangs
export ASA_CATALOGUE=/lab/catalogue.toml
try() {{ name=$1; shift; "$@" > /lab/out/$name.out 2> /lab/out/$name.err; rec $name $?; }}
# Without an agent: nothing runs before, nothing may run after.
try unknown asa pin cfs
rec unknown_state $(state)
try missing asa pin rusty
rec missing_state $(state)
try crashes asa pin crashes
rec crashes_state $(state)
try noroot su -s /bin/sh nobody -c "ASA_CATALOGUE=/lab/catalogue.toml asa pin bpfland"
rec noroot_state $(state)
# With an agent running bpfland: every failure leaves bpfland running.
asa pin bpfland &
P=$!
asa status --wait-for bpfland --timeout 120 > /dev/null; rec up $?
try agent_unknown asa pin cfs
try agent_missing asa pin rusty
try agent_crashes asa pin crashes
asa status --json > /lab/out/after_crash.json
try agent_hangs asa pin hangs
asa status --json > /lab/out/after_hang.json
rec hangs_left $(pidof scx_hangs | wc -w)
kill -INT $P
wait $P; rec foreground_exit $?
rec final_state $(state)
"#
    );
    // rusty is deliberately not installed in this guest.
    let out = guest("bad-input", &script, &["bpfland"], files);
    assert_eq!(out.exit_code, 0);
    let r = results(&out);
    let err = |name: &str| out.read_out(&format!("{name}.err")).unwrap();
    for (case, needle) in [
        ("unknown", "unknown expert \"cfs\""),
        ("missing", "executable \"scx_rusty\" not found"),
        ("crashes", "exited before it attached"),
        ("noroot", "needs root"),
        ("agent_unknown", "unknown expert \"cfs\""),
        ("agent_missing", "executable \"scx_rusty\" not found"),
        (
            "agent_crashes",
            "nothing was changed: bpfland is still running",
        ),
        ("agent_hangs", "did not attach within 3s"),
    ] {
        assert_ne!(r[case], "0", "{case} should fail: {r:?}");
        let e = err(case);
        assert!(e.contains(needle), "{case}: {needle:?} not in {e:?}");
        // One clear error: a single `asa: error:` line.
        assert_eq!(e.matches("asa: error:").count(), 1, "{case}: {e}");
    }
    assert!(
        err("crashes").contains("BPF program load failed"),
        "the expert's own words are shown"
    );
    for case in ["unknown", "missing", "crashes", "noroot"] {
        assert_eq!(r[&format!("{case}_state")], "disabled", "{case}: {r:?}");
    }
    let after_crash = json(&out, "after_crash.json");
    assert_running(&after_crash, "bpfland", Some("bpfland"));
    // The failing expert never got near the kernel: bpfland was never stopped.
    assert_eq!(after_crash["kernel"]["enable_seq"], 1, "{after_crash:#}");
    let after_hang = json(&out, "after_hang.json");
    assert_running(&after_hang, "bpfland", Some("bpfland"));
    assert_eq!(after_hang["kernel"]["enable_seq"], 1, "{after_hang:#}");
    assert_eq!(r["hangs_left"], "0", "the hung expert was killed");
    assert_eq!(r["foreground_exit"], "0");
    assert_eq!(r["final_state"], "disabled");
}

#[test]
#[ignore = "boots the lab VM"]
fn daemon_serves_pin_unpin_and_restores_eevdf_on_sigterm() {
    // The decision engine runs with the loop tests' model and a mapping that keeps every class on
    // EEVDF, so every switch here is a pin (the decisions themselves: tests/vm_decision.rs).
    let dir = tempfile::tempdir().unwrap();
    let mapping = dir.path().join("mapping.toml");
    std::fs::write(
        &mapping,
        daemon_common::mapping_table(&daemon_common::loop_test_model_classes(), |_| "eevdf"),
    )
    .unwrap();
    let args = daemon_common::GUEST_RUN_ARGS;
    let script = format!(
        r#"{RECORD}
asa run {args} > /lab/out/daemon.log 2>&1 &
D=$!
# Up: the socket answers from the start (mode starting), the daemon once its model is loaded.
i=0; until asa status --json 2>/dev/null | grep -q '"mode": "daemon"' || [ $i -ge 300 ]; do sleep 0.2; i=$((i+1)); done
asa status --json > /lab/out/idle.json; rec idle $?
asa run {args} > /lab/out/second.out 2> /lab/out/second.err; rec second_daemon $?
asa pin bpfland; rec pin $?
asa status --json > /lab/out/pinned.json
asa unpin; rec unpin $?
asa status --json > /lab/out/unpinned.json
asa pin bpfland; rec pin_again $?
kill -TERM $D
wait $D; rec daemon_exit $?
rec final_state $(state)
rec socket_left $(ls /run/asa/control.sock 2>/dev/null | wc -w)
"#
    );
    let mut run = daemon_common::asa_run_guest("daemon", &script, &mapping, &["bpfland"], vec![]);
    run.rootfs = None; // the busybox guest
    let out = guest_run(&run);
    assert_eq!(out.exit_code, 0);
    let r = results(&out);
    for key in ["idle", "pin", "unpin", "pin_again", "daemon_exit"] {
        assert_eq!(r[key], "0", "{key}: {r:?}");
    }
    assert_ne!(r["second_daemon"], "0");
    assert!(out
        .read_out("second.err")
        .unwrap()
        .contains("another agent already serves"));
    let idle = json(&out, "idle.json");
    assert_running(&idle, "eevdf", None);
    assert_eq!(idle["agent"]["mode"], "daemon");
    let pinned = json(&out, "pinned.json");
    assert_running(&pinned, "bpfland", Some("bpfland"));
    assert_eq!(pinned["agent"]["pinned"], "bpfland");
    let unpinned = json(&out, "unpinned.json");
    assert_running(&unpinned, "eevdf", None);
    assert!(unpinned["agent"]["pinned"].is_null());
    assert_eq!(r["final_state"], "disabled");
    assert_eq!(r["socket_left"], "0");
}

#[test]
#[ignore = "boots the lab VM"]
fn expert_ejected_by_the_kernel_is_reported_as_eevdf() {
    // SysRq-S makes the kernel disable the BPF scheduler itself, while its process lives:
    // the same path as a watchdog ejection (runnable task stall) or a scheduler error exit.
    let script = format!(
        r#"{RECORD}
asa pin bpfland > /lab/out/pin.log 2>&1 &
P=$!
asa status --wait-for bpfland --timeout 120 > /dev/null; rec up $?
echo S > /proc/sysrq-trigger
asa status --wait-for eevdf --timeout 2 --json > /lab/out/after_eject.json; rec noticed $?
sleep 1
asa status --json > /lab/out/settled.json
rec scx_processes $(pidof scx_bpfland | wc -w)
kill -INT $P
wait $P; rec foreground_exit $?
rec final_state $(state)
"#
    );
    let out = guest("eject", &script, &["bpfland"], vec![]);
    assert_eq!(out.exit_code, 0);
    let r = results(&out);
    assert_eq!(r["up"], "0", "{r:?}");
    assert_eq!(
        r["noticed"], "0",
        "the ejection was not reported within 2 s: {r:?}"
    );
    let after = json(&out, "after_eject.json");
    assert_running(&after, "eevdf", None);
    let settled = json(&out, "settled.json");
    assert_running(&settled, "eevdf", None);
    let event = settled["agent"]["last_event"]["message"].as_str().unwrap();
    assert!(
        event.contains("bpfland") && event.contains("the machine is on EEVDF"),
        "{event}"
    );
    let dmesg = out.read_out("dmesg.txt").unwrap();
    assert!(
        dmesg.contains("sysrq"),
        "the kernel logged the SysRq ejection"
    );
    assert_eq!(r["foreground_exit"], "0");
    assert_eq!(r["final_state"], "disabled");
}
