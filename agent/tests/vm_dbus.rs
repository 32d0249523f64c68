//! scx_loader's D-Bus interface in the lab VM (Debian's sched_ext kernel under qemu, the Debian
//! test root filesystem with dbus-daemon), with the real agent, the real scx experts and the
//! real `scxctl` (the pinned version) against a real dbus-daemon on the default system bus
//! address, configured with the system bus's default rules and the shipped policy
//! (agent/dist/org.scx.Loader.conf):
//! - `asa run --dbus` refuses to start while another process owns org.scx.Loader (as when
//!   scx_loader runs), before touching the scheduler;
//! - `scxctl get`, `switch --sched bpfland`, `stop` behave as against scx_loader (switch on
//!   EEVDF is refused by scxctl, `start` then runs the expert), each becomes the agent's pin,
//!   and `asa status` and the kernel agree after each; RestoreDefault (dbus-send) unpins;
//! - another user reads the properties (ASA's `org.asa.Agent1` mode too) and is refused a
//!   switch (no polkit in the guest);
//! - SIGTERM releases the name and leaves the machine on EEVDF.
//!
//! The mapping table sends every class to EEVDF, so the agent's own choice never switches
//! and every attach in the run is one the D-Bus calls asked for.

mod daemon_common;
mod dbus_common;

use std::path::PathBuf;
use std::time::Duration;

use asa_lab::Lab;
use daemon_common::{asa_run_guest, loop_test_model_classes, mapping_table, GUEST_RUN_ARGS};
use serde_json::Value;

const SCRIPT: &str = r#"
set -u
rec() { echo "$1=$2" >> /lab/out/results; }
state() { cat /sys/kernel/sched_ext/state; }
# run NAME CMD...: stdout to NAME.out, stderr to NAME.err, exit status recorded as NAME.
run() { n=$1; shift; "$@" > /lab/out/$n.out 2> /lab/out/$n.err; rec $n $?; }
st() { asa status --json > /lab/out/$1.json; }
owned() { dbus-send --system --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
  org.freedesktop.DBus.NameHasOwner string:org.scx.Loader | grep -c 'boolean true'; }
nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }

# The system bus at its default address (no DBUS_SYSTEM_BUS_ADDRESS: asa and scxctl find it).
mkdir -p /var/run/dbus
[ -s /etc/machine-id ] || dbus-uuidgen --ensure=/etc/machine-id
dbus-daemon --config-file=/lab/bus.conf --fork --print-address=1 > /lab/out/bus.address
rec bus $?

# 1. Another process owns the name (scx_loader would): asa run --dbus does not start.
asa --socket /run/asa-other.sock dbus > /lab/out/holder.log 2>&1 &
H=$!
i=0; while [ "$(owned)" != 1 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
asa run {args} --dbus --standby 0 --duration-s 60 > /lab/out/taken.log 2>&1; rec taken $?
rec taken_enable_seq $(cat /sys/kernel/sched_ext/enable_seq)
kill -TERM $H; wait $H; rec holder_exit $?

# 2. The agent with D-Bus, driven by scxctl.
asa run {args} --dbus --standby 0 > /lab/out/daemon.log 2>&1 &
D=$!
i=0; until scxctl get > /dev/null 2>&1 || [ $i -ge 600 ]; do sleep 0.1; i=$((i+1)); done
run get_eevdf scxctl get
run list scxctl list
run switch_on_eevdf scxctl switch --sched bpfland
run start_bpfland scxctl start --sched bpfland
st bpfland
run get_bpfland scxctl get
run switch_rusty scxctl switch --sched rusty
st rusty
run switch_bpfland scxctl switch --sched bpfland
st bpfland_again
run nobody_get nobody scxctl get
run nobody_mode nobody dbus-send --system --print-reply --dest=org.scx.Loader /org/scx/Loader \
  org.freedesktop.DBus.Properties.Get string:org.asa.Agent1 string:Mode
run nobody_expert nobody dbus-send --system --print-reply --dest=org.scx.Loader /org/scx/Loader \
  org.freedesktop.DBus.Properties.Get string:org.asa.Agent1 string:Expert
run nobody_stop nobody scxctl stop
run stop scxctl stop
st stopped
rec stopped_state $(state)
run get_stopped scxctl get
run restore dbus-send --system --print-reply --dest=org.scx.Loader /org/scx/Loader \
  org.scx.Loader.RestoreDefault
st restored
kill -TERM $D; wait $D; rec agent_exit $?
rec owned_after_exit $(owned)
rec final_state $(state)
rec enable_seq $(cat /sys/kernel/sched_ext/enable_seq)
"#;

fn lab_run() -> asa_lab::VmOutcome {
    let dir = tempfile::tempdir().unwrap();
    let mapping = dir.path().join("mapping.toml");
    std::fs::write(
        &mapping,
        mapping_table(&loop_test_model_classes(), |_| "eevdf"),
    )
    .unwrap();
    let bus_conf = dir.path().join("bus.conf");
    std::fs::write(
        &bus_conf,
        dbus_common::system_bus_config(
            std::path::Path::new("/var/run/dbus/system_bus_socket"),
            std::path::Path::new("/lab/org.scx.Loader.conf"),
        ),
    )
    .unwrap();
    let scxctl = dbus_common::scxctl_path();
    assert!(
        scxctl.is_file(),
        "scxctl {} is not installed at {} (run lab/setup.sh)",
        dbus_common::scxctl_version(),
        scxctl.display()
    );
    let script = SCRIPT.replace("{args}", GUEST_RUN_ARGS);
    let files = vec![
        (bus_conf, PathBuf::from("/lab/bus.conf")),
        (
            dbus_common::shipped_policy(),
            PathBuf::from("/lab/org.scx.Loader.conf"),
        ),
    ];
    let mut run = asa_run_guest("dbus", &script, &mapping, &["bpfland", "rusty"], files);
    run.executables
        .push((scxctl, PathBuf::from(asa_lab::GUEST_BIN).join("scxctl")));
    run.vm.timeout = Duration::from_secs(420);
    let lab = Lab::new().expect("the lab is set up (run lab/setup.sh)");
    lab.run(&run).expect("the lab VM ran")
}

#[test]
#[ignore = "boots the lab VM"]
fn scxctl_drives_the_agent_over_the_system_bus_and_asa_status_agrees() {
    let out = lab_run();
    let console = out.script_output().to_string();
    eprintln!("---- guest console ----\n{console}");
    let file = |n: &str| out.read_out(n).unwrap_or_default();
    let r = out.read_results("results").unwrap();
    eprintln!("{r:#?}");
    for log in ["holder.log", "taken.log", "daemon.log"] {
        eprintln!("---- {log} ----\n{}", file(log));
    }
    let status = |n: &str| -> Value {
        let text = file(&format!("{n}.json"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{n}.json: {e}: {text}"))
    };
    let says = |n: &str, line: &str| {
        assert_eq!(r[n], "0", "{n}: {}", file(&format!("{n}.err")));
        assert_eq!(file(&format!("{n}.out")).trim(), line, "{n}");
    };
    assert_eq!(out.exit_code, 0);
    assert_eq!(r["bus"], "0", "{}", file("bus.address"));

    // 1. The name taken: one error at start, nothing attached.
    assert_eq!(r["taken"], "1");
    let taken = file("taken.log");
    assert!(taken.contains("org.scx.Loader is already owned"), "{taken}");
    assert!(taken.contains("(asa)"), "{taken}");
    assert_eq!(r["taken_enable_seq"], "0");
    assert_eq!(r["holder_exit"], "0");

    // 2. get / switch / start / stop as against scx_loader.
    says("get_eevdf", "no scx scheduler running");
    says(
        "list",
        r#"supported schedulers: ["bpfland", "lavd", "rusty", "p2dq", "flash", "cosmos", "gru", "layered"]"#,
    );
    assert_eq!(r["switch_on_eevdf"], "1");
    assert!(file("switch_on_eevdf.err")
        .contains("no scx scheduler running, use 'start' instead of 'switch'"));
    says("start_bpfland", "started Bpfland in Auto mode");
    says("get_bpfland", "running Bpfland in Auto mode");
    says("switch_rusty", "switched to Rusty in Auto mode");
    says("switch_bpfland", "switched to Bpfland in Auto mode");
    for (n, expert) in [
        ("bpfland", "bpfland"),
        ("rusty", "rusty"),
        ("bpfland_again", "bpfland"),
    ] {
        let st = status(n);
        let agent = &st["agent"];
        assert_eq!(agent["active"]["expert"], expert, "{st:#}");
        assert_eq!(agent["pinned"], expert, "{st:#}");
        assert_eq!(agent["consistent"], true, "{st:#}");
        assert_eq!(st["kernel"]["state"], "enabled", "{st:#}");
        let ops = st["kernel"]["ops"].as_str().unwrap_or_default();
        assert!(ops.starts_with(expert), "{n}: ops {ops}");
    }
    // Another user reads, and may not switch (no polkit in the guest).
    says("nobody_get", "running Bpfland in Auto mode");
    // ASA's own interface beside scx_loader's, readable by anyone: the mode and the expert.
    assert_eq!(r["nobody_mode"], "0", "{}", file("nobody_mode.err"));
    assert!(
        file("nobody_mode.out").contains("\"whole_machine\""),
        "{}",
        file("nobody_mode.out")
    );
    assert!(
        file("nobody_expert.out").contains("\"bpfland\""),
        "{}",
        file("nobody_expert.out")
    );
    assert_eq!(r["nobody_stop"], "1");
    let refused = file("nobody_stop.err");
    assert!(refused.contains("AccessDenied"), "{refused}");
    assert!(refused.contains("uid 65534"), "{refused}");
    // stop: EEVDF, pinned there, and scxctl says nothing runs.
    says("stop", "stopped");
    let st = status("stopped");
    assert_eq!(st["agent"]["active"]["expert"], "eevdf", "{st:#}");
    assert_eq!(st["agent"]["pinned"], "eevdf", "{st:#}");
    assert_eq!(st["agent"]["consistent"], true, "{st:#}");
    assert_eq!(r["stopped_state"], "disabled");
    says("get_stopped", "no scx scheduler running");
    // RestoreDefault: the agent decides again (its table: EEVDF).
    assert_eq!(r["restore"], "0", "{}", file("restore.err"));
    let st = status("restored");
    assert!(st["agent"]["pinned"].is_null(), "{st:#}");
    assert_eq!(st["agent"]["active"]["expert"], "eevdf", "{st:#}");

    // SIGTERM: clean exit, the name released, EEVDF; three attaches, all asked for over D-Bus.
    assert_eq!(r["agent_exit"], "0");
    assert_eq!(r["owned_after_exit"], "0");
    assert_eq!(r["final_state"], "disabled");
    assert_eq!(r["enable_seq"], "3", "{r:?}");
    let daemon = file("daemon.log");
    assert!(daemon.contains("serving org.scx.Loader"), "{daemon}");
    assert!(
        daemon.contains("D-Bus StopScheduler from") && daemon.contains("uid 65534"),
        "{daemon}"
    );
}
