//! Per-application mode against a real sched_ext kernel: scx_layered from crates.io, started by
//! the agent's supervisor behind the attach gate with ASA's layer plan (the catalogue's
//! default, `layers/default.toml`) and the shared task-hint map, in the lab VM.
//!
//! It needs the lab (qemu, the cached kernel, the experts): `make test` sets it up and runs
//! it with `--include-ignored`.

use std::path::PathBuf;
use std::time::Duration;

use asa_lab::{GuestRun, Lab};

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
