//! `asa calibrate` against a real sched_ext kernel: the lab VM (Debian's kernel under qemu) runs
//! the real `asa` binary, which pins EEVDF and scx_bpfland through the supervisor for every run
//! of two cheap scenarios. The calibration is killed with SIGTERM after its first scenario
//! (a script's background job ignores SIGINT; Ctrl-C in a terminal ends it the same way):
//! the machine must be back on EEVDF, and the rerun must resume with the second scenario only.
//! While it runs, a second `asa` that wants to drive the scheduler is refused.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use asa_lab::{GuestRun, Lab, RootfsSpec};
use asa_mapping::MappingTable;
use asa_scenarios::runner::ResultSet;

fn asa() -> PathBuf {
    asa_lab::workspace_binary("asa").unwrap()
}

const SCRIPT: &str = r#"
set -u
args="--dir /lab/out/cal --catalogue /lab/cal.toml --scenarios CAL-GAME,CAL-AUDIO \
  --experts eevdf,bpfland --reps 2 --duration 3 --settle 0.5 --hold 0 --cooldown 0.2 \
  --work-dir /tmp/work"
asa calibrate $args > /lab/out/first.log 2>&1 &
pid=$!
# Once the first scenario is saved (results.json appears after each scenario):
i=0
while [ ! -f /lab/out/cal/results.json ] && [ $i -lt 600 ]; do sleep 0.5; i=$((i+1)); done
# a second ASA process may not drive the scheduler at the same time,
asa pin bpfland > /lab/out/second-pin.log 2>&1
echo "second_pin_exit=$?" >> /lab/out/results
# and the calibration is killed (a script's background job ignores SIGINT).
kill -TERM $pid
wait $pid
echo "first_exit=$?" >> /lab/out/results
# The expert must be gone with the agent (its parent-death signal): back on EEVDF. The kernel
# disables a scheduler asynchronously, and one killed while it was still enabling takes longer
# under TCG, so wait for it (up to 5 s) and record how long it took.
i=0
while [ "$(cat /sys/kernel/sched_ext/state)" != disabled ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
echo "state_after_interrupt=$(cat /sys/kernel/sched_ext/state)" >> /lab/out/results
echo "disabled_after_interrupt_ds=$i" >> /lab/out/results
cp /lab/out/cal/results.json /lab/out/results-after-interrupt.json
asa calibrate $args > /lab/out/second.log 2>&1
echo "second_exit=$?" >> /lab/out/results
echo "state_at_end=$(cat /sys/kernel/sched_ext/state)" >> /lab/out/results
asa mapping show /lab/out/cal/mapping.toml > /lab/out/show.txt 2>&1
echo "show_exit=$?" >> /lab/out/results
# Stage 2: the cost of a switch half way through a run, added to the prototype table.
asa calibrate --stage overhead --dir /lab/out/ovh --table /lab/out/cal/mapping.toml \
  --pairs 'eevdf>bpfland,bpfland>eevdf' --catalogue /lab/cal.toml --scenarios CAL-GAME \
  --reps 2 --duration 8 --settle 0.5 --hold 0 --cooldown 0.2 --work-dir /tmp/work \
  > /lab/out/overhead.log 2>&1
echo "overhead_exit=$?" >> /lab/out/results
echo "state_after_overhead=$(cat /sys/kernel/sched_ext/state)" >> /lab/out/results
"#;

#[test]
#[ignore = "boots the lab VM"]
fn calibration_in_the_vm_pins_every_expert_survives_an_interrupt_and_resumes() {
    let lab = Lab::new().expect("the lab is set up (run lab/setup.sh)");
    let catalogue = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(catalogue.path(), common::calibration_catalogue_text()).unwrap();
    let mut run = GuestRun::new("calibrate", SCRIPT).with_asa(&asa());
    run.experts = vec!["bpfland".into()];
    run.files = vec![(catalogue.path().to_owned(), PathBuf::from("/lab/cal.toml"))];
    run.rootfs = Some(RootfsSpec::with_packages(asa_lab::TEST_ROOTFS_PACKAGES));
    run.vm.timeout = Duration::from_secs(900);
    let out = lab.run(&run).expect("the lab VM ran");
    eprintln!("---- guest console ----\n{}", out.script_output());
    for log in [
        "first.log",
        "second-pin.log",
        "second.log",
        "show.txt",
        "overhead.log",
    ] {
        eprintln!("---- {log} ----\n{}", out.read_out(log).unwrap_or_default());
    }
    assert_eq!(out.exit_code, 0);
    let results = out.read_results("results").unwrap();
    assert_ne!(results["second_pin_exit"], "0");
    assert!(out
        .read_out("second-pin.log")
        .unwrap()
        .contains("another ASA process controls the scheduler"));
    assert_ne!(
        results["first_exit"], "0",
        "the first run was to be interrupted"
    );
    eprintln!(
        "back on EEVDF {} ms after the calibration ended",
        results["disabled_after_interrupt_ds"]
            .parse::<u64>()
            .unwrap()
            * 100
    );
    assert_eq!(results["state_after_interrupt"], "disabled");
    assert_eq!(results["second_exit"], "0");
    assert_eq!(results["state_at_end"], "disabled");
    assert_eq!(results["show_exit"], "0");

    let first = ResultSet::load(&out.out_dir.join("results-after-interrupt.json")).unwrap();
    assert_eq!(
        first.scenarios.len(),
        1,
        "interrupted after the first scenario"
    );
    assert!(out
        .read_out("second.log")
        .unwrap()
        .contains("1 scenario(s) complete"));
    let set = ResultSet::load(&out.out_dir.join("cal/results.json")).unwrap();
    let names: Vec<&str> = set.scenarios.iter().map(|s| s.scenario.as_str()).collect();
    assert_eq!(names, ["CAL-GAME", "CAL-AUDIO"]);
    // The first scenario's runs were kept, not re-measured.
    assert_eq!(
        set.scenarios[0].runs[0].started_unix_ms,
        first.scenarios[0].runs[0].started_unix_ms
    );
    for s in &set.scenarios {
        assert_eq!(s.runs.len(), 4, "{}: {:?}", s.scenario, s.skipped);
        for r in &s.runs {
            assert!(r.valid, "{} {} rep {}", s.scenario, r.expert, r.rep);
            if r.expert == "bpfland" {
                assert!(r.pinned.starts_with("bpfland"), "pinned {}", r.pinned);
            }
            assert!(!r.probe.samples.is_empty());
        }
    }
    let table = MappingTable::load(&out.out_dir.join("cal/mapping.toml")).unwrap();
    assert_eq!(table.source, "prototype");
    let machine = table.machine.as_ref().unwrap();
    assert!(machine.kernel_release.contains("deb"), "{machine:?}");
    assert_eq!(machine.cores, 2);
    let classes: Vec<&str> = table.classes.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(classes, ["audio+xz_compress", "game+xz_compress"]);
    for class in &table.classes {
        let mut experts: Vec<&str> = class.ranked.iter().map(|r| r.expert.as_str()).collect();
        experts.sort();
        assert_eq!(experts, ["bpfland", "eevdf"]);
        assert!(class.ranked.iter().all(|r| r.runs == 2));
    }
    assert!(out
        .read_out("cal/calibration.md")
        .unwrap()
        .contains("Noise floor"));

    // Stage 2: the switch runs happened, the experts they switched to kept running to the end
    // of the run (an expert started by the mid-run switch thread once got its parent-death
    // signal when that thread ended), and the table gained the costs.
    assert_eq!(results["overhead_exit"], "0");
    assert_eq!(results["state_after_overhead"], "disabled");
    let overhead_log = out.read_out("overhead.log").unwrap();
    assert!(
        !overhead_log.contains("ended (exit code"),
        "an expert died during the switch runs"
    );
    let switches = ResultSet::load(&out.out_dir.join("ovh/results.json")).unwrap();
    let runs: Vec<_> = switches.scenarios[0]
        .runs
        .iter()
        .filter(|r| r.expert.contains('>'))
        .collect();
    assert_eq!(runs.len(), 4, "2 pairs x 2 reps");
    for r in &runs {
        // Invalid only when the switch was still loading at the end of the run (logged).
        assert!(
            r.valid
                || overhead_log.contains(&format!("{}: the switch was still under way", r.expert)),
            "{} rep {} invalid: {overhead_log}",
            r.expert,
            r.rep
        );
    }
    let costed = MappingTable::load(&out.out_dir.join("ovh/mapping.toml")).unwrap();
    assert_eq!(costed.source, "overhead");
    assert!(
        costed
            .switches
            .iter()
            .any(|c| c.from == "bpfland" && c.to == "eevdf" && c.runs >= 1),
        "{:?}",
        costed.switches
    );
    // Every pair's switch duration was measured (4 switches recorded, each a duration).
    let times = asa_mapping::overhead::read_switch_times(&out.out_dir.join("ovh")).unwrap();
    assert_eq!(times.len(), 4, "{times:?}");
    assert!(times.iter().all(|t| t.switch_s >= 0.0 && t.switch_s < 60.0));
    for c in &costed.switches {
        assert!(c.switch_s.is_some(), "{c:?}");
    }
}
