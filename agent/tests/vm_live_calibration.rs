//! Calibration stage 3 (live) in the lab VM: `asa calibrate --stage live` runs two scenarios
//! under EEVDF, scx_bpfland and the real agent (`asa run` with the loop tests' model and a
//! table mapping `xz_compress` to bpfland). The agent must start and stop cleanly between the
//! static runs (one ASA process drives the scheduler at a time), switch to bpfland by itself
//! while xz runs (in the phased scenario only once xz starts), and leave EEVDF at the end; the
//! dry runs (`asa run --dry-run`) decide the same switch without making it; the report (with the
//! agent phase by phase) and the refined table must be written.

#[path = "daemon_common/mod.rs"]
mod daemon_common;

use std::path::PathBuf;
use std::time::Duration;

use asa_lab::Lab;
use asa_mapping::live::{LiveSummary, AGENT, AGENT_DRY_RUN};
use asa_mapping::MappingTable;
use asa_scenarios::runner::ResultSet;
use daemon_common::{asa_run_guest, loop_test_model_classes, mapping_table};

/// The built-in catalogue with a small xz corpus, a single-phase scenario against xz and a phased
/// one (idle, then xz).
fn catalogue_text() -> String {
    // The corpus and the work each completed run counts (the throughput's amount) shrink
    // together: until 2026-11-27 the amount stayed at 8 MiB, so the test's xz rates read 8×.
    let mut text = asa_scenarios::catalogue::BUILTIN_SCENARIOS
        .replace(
            "prepare = [{ kind = \"text_corpus\", file = \"corpus.txt\", megabytes = 8 }]\ncommand = [\"xz\"",
            "prepare = [{ kind = \"text_corpus\", file = \"corpus.txt\", megabytes = 1 }]\ncommand = [\"xz\"",
        )
        .replace(
            "throughput = { kind = \"completions\", amount = 8.0, unit = \"MiB\" }",
            "throughput = { kind = \"completions\", amount = 1.0, unit = \"MiB\" }",
        );
    assert!(text.contains("megabytes = 1 }"), "the xz load changed");
    assert!(
        text.contains("amount = 1.0, unit = \"MiB\""),
        "the xz load's throughput changed"
    );
    text.push_str(
        r#"
[[scenario]]
name = "LIVE-GAME"
title = "Game Play & xz Compression (live calibration test)"
probe = "game"
load = "xz_compress"

[[scenario]]
name = "LIVE-PHASED"
title = "Game Play: idle, then xz Compression (live calibration test)"
probe = "game"
phase = [{ load = "idle", share = 1.0 }, { load = "xz_compress", share = 2.0 }]
"#,
    );
    text
}

const SCRIPT: &str = r#"
set -u
asa calibrate --stage live --dir /lab/out/live --table /lab/mapping.toml \
  --model /lab/classifier.onnx --onnxruntime /lab/libonnxruntime.so --agent-cooldown-s 3 \
  --catalogue /lab/live.toml --scenarios LIVE-GAME,LIVE-PHASED --experts eevdf,bpfland \
  --classes load --reps 1 --duration 18 --settle 1 --cooldown 0.5 --hold 0 --work-dir /tmp/work \
  > /lab/out/live.log 2>&1
echo "live_exit=$?" >> /lab/out/results
echo "state_at_end=$(cat /sys/kernel/sched_ext/state)" >> /lab/out/results
echo "left=$(pidof scx_bpfland asa | wc -w)" >> /lab/out/results
"#;

#[test]
#[ignore = "boots the lab VM"]
fn live_calibration_runs_the_agent_next_to_the_static_experts() {
    let classes = loop_test_model_classes();
    assert!(
        classes.iter().any(|c| c == "xz_compress") && classes.iter().any(|c| c == "idle"),
        "{classes:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let mapping = dir.path().join("mapping.toml");
    std::fs::write(
        &mapping,
        mapping_table(&classes, |c| {
            if c == "xz_compress" {
                "bpfland"
            } else {
                "eevdf"
            }
        }),
    )
    .unwrap();
    let catalogue = dir.path().join("live.toml");
    std::fs::write(&catalogue, catalogue_text()).unwrap();
    let files = vec![(catalogue, PathBuf::from("/lab/live.toml"))];
    let mut run = asa_run_guest("live-calibration", SCRIPT, &mapping, &["bpfland"], files);
    run.vm.timeout = Duration::from_secs(900);

    let lab = Lab::new().expect("the lab is set up (run lab/setup.sh)");
    let out = lab.run(&run).expect("the lab VM ran");
    eprintln!(
        "---- guest console ----\n{}\n---- live.log ----\n{}",
        out.script_output(),
        out.read_out("live.log").unwrap_or_default()
    );
    assert_eq!(out.exit_code, 0);
    let r = out.read_results("results").unwrap();
    assert_eq!(r["live_exit"], "0", "{r:?}");
    assert_eq!(r["state_at_end"], "disabled");
    assert_eq!(r["left"], "0", "no expert and no agent left running");

    let set = ResultSet::load(&out.out_dir.join("live/results.json")).unwrap();
    assert_eq!(
        set.options.experts,
        ["eevdf", "bpfland", AGENT_DRY_RUN, AGENT]
    );
    for s in &set.scenarios {
        assert!(s.error.is_none() && s.skipped.is_empty(), "{s:?}");
        assert_eq!(s.runs.len(), 4, "{}", s.scenario);
        for run in &s.runs {
            assert!(run.valid, "{} under {}", s.scenario, run.expert);
        }
    }
    let summary: LiveSummary =
        serde_json::from_str(&out.read_out("live/live.json").unwrap()).unwrap();
    assert_eq!(summary.experts, ["eevdf", "bpfland"]);
    assert_eq!(summary.scenarios.len(), 2);
    for s in &summary.scenarios {
        let agent = s.agent.expect("the agent's runs were scored");
        assert!((0.0..=1.0).contains(&agent), "{s:?}");
        assert!(s.oracle.is_some() && s.agent_rank.is_some());
        // The agent recognised xz and switched to its expert by itself, once.
        assert_eq!(s.traces.len(), 1, "{s:?}");
        assert_eq!(s.traces[0].switches, ["bpfland"], "{s:?}");
        assert_eq!(s.traces[0].failed, 0);
    }
    // Phase by phase (the runner's phase times against the decision log's tick times): the
    // idle phase is voted idle on most of its ticks and the switch to bpfland comes once xz
    // runs, not before. (Before 2026-11-27 this only asked for one idle vote in the whole run,
    // which the first tick gave while the idle phase itself was voted xz_compress.)
    let phased = &summary.scenarios[1];
    assert!(phased.phased);
    let phases = &phased.traces[0].phases;
    assert_eq!(phases.len(), 2, "{phased:?}");
    let (idle, xz) = (&phases[0], &phases[1]);
    let votes =
        |p: &asa_mapping::live::PhaseTrace, class: &str| p.voted.get(class).copied().unwrap_or(0);
    assert_eq!(idle.load, "idle");
    assert!(
        votes(idle, "idle") > votes(idle, "xz_compress"),
        "the idle phase was recognised: {phased:?}"
    );
    assert!(idle.switches.is_empty(), "no switch while idle: {phased:?}");
    assert_eq!(xz.load, "xz_compress");
    assert_eq!(
        xz.switches
            .iter()
            .map(|(e, _)| e.as_str())
            .collect::<Vec<_>>(),
        ["bpfland"],
        "the switch came while xz ran: {phased:?}"
    );
    assert!(votes(xz, "xz_compress") > votes(xz, "idle"), "{phased:?}");
    let wl = summary.vs_baseline;
    assert_eq!(wl.wins + wl.ties + wl.losses, 2);
    // The dry run decided the same but switched nothing: it is EEVDF plus the agent's work.
    let dry = summary.dry_run_vs_baseline.expect("dry runs compared");
    assert_eq!(dry.wins + dry.ties + dry.losses, 2);
    assert!(summary.agent_vs_dry_run.is_some() && summary.dry_run_mean_gain.is_some());
    let logs = out.out_dir.join("live/agent");
    let would_switch = std::fs::read_dir(&logs)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .filter(|text| text.contains("\"outcome\":\"would_switch\""))
        .count();
    assert_eq!(
        would_switch, 2,
        "each dry run would have switched to bpfland once"
    );
    // The calibration asks the agent for its feature vectors (`--log-features`).
    for entry in std::fs::read_dir(&logs).unwrap().flatten() {
        if entry.path().extension().is_some_and(|x| x == "jsonl") {
            let text = std::fs::read_to_string(entry.path()).unwrap();
            assert!(!text.is_empty(), "{}", entry.path().display());
            for line in text.lines() {
                let tick: serde_json::Value = serde_json::from_str(line).unwrap();
                assert!(
                    tick["features"]["cpu_user_share"].is_number(),
                    "{}: {line}",
                    entry.path().display()
                );
            }
        }
    }

    let table = MappingTable::load(&out.out_dir.join("live/mapping.toml")).unwrap();
    assert_eq!(table.source, "live");
    let xz = table
        .class("xz_compress")
        .expect("refined from the static runs");
    assert!(xz.ranked.iter().all(|e| e.runs == 1 && e.expert != AGENT));
    assert!(
        table.class("idle").is_some(),
        "a class the runs did not cover keeps its row"
    );
    let report = out.read_out("live/live.md").unwrap();
    assert!(report.contains("LIVE-PHASED (phased)"), "{report}");
    assert!(
        report.contains("**The agent phase by phase**")
            && report.contains("LIVE-PHASED run 1: idle: voted"),
        "{report}"
    );
}
