//! `make demo` (`asa-lab demo`): the agent doing its main job in the lab VM, the way a user
//! runs it. `asa calibrate --budget` first measures this machine's table for the idle machine
//! and xz compression (two probes beside xz, one beside nothing, under EEVDF, bpfland and
//! cosmos); then `asa run`, with the default classifier (the ten load classes) and that table,
//! watches an idle machine, then `xz` compressing (as the classifier's recordings ran it), then
//! idle again, and runs the expert the table measured best for each; `asa status` shows what it
//! sees and decides at each step. Then `asa pin gru` runs our learned scheduler under a load,
//! and the machine goes back to EEVDF. Afterwards [`summary`] turns the agent's decision log
//! into a short table of what it did and when.

use std::fmt::Write as _;

/// Where the guest writes the agent's decision log (under /lab/out, copied back).
pub const DECISION_LOG: &str = "decisions.jsonl";

/// Where the guest's calibration keeps its runs and writes its table.
pub const CALIBRATION_DIR: &str = "/tmp/asa-cal";

/// The guest script. `model` and `onnxruntime` are the guest paths of the classifier and of
/// ONNX Runtime's library; `catalogue` the scenario catalogue the calibration measures
/// ([`asa_scenarios::catalogue::calibration_test_catalogue`]).
pub fn script(model: &str, onnxruntime: &str, catalogue: &str) -> String {
    format!(
        r#"set -u
step() {{ echo; echo "=== $*"; }}
step "kernel $(uname -r), sched_ext state: $(cat /sys/kernel/sched_ext/state)"
asa experts
step "asa calibrate --budget 2m: this machine's table (idle and xz beside the game and audio probes, eevdf/bpfland/cosmos)"
asa calibrate --dir {CALIBRATION_DIR} --catalogue {catalogue} --scenarios CAL-IDLE,CAL-GAME,CAL-AUDIO \
  --experts eevdf,bpfland,cosmos --classes load --budget 2m --duration 4 --settle 0.5 --hold 0 \
  --cooldown 0.2 --work-dir /tmp/asa-cal-work 2>&1 | grep -v ' INFO '
test -s {CALIBRATION_DIR}/mapping.toml || exit 1
seq 1 1200000 > /tmp/corpus   # 8 MB of text, like the recorded load's corpus
step "asa run: the default classifier (ten load classes) on the table just measured"
# Where the table leaves nothing to decide the agent ticks every 10 s; here every second, so
# that each vote shows.
RUST_LOG=info,asa::decision=warn asa run --model {model} --onnxruntime {onnxruntime} \
  --mapping {CALIBRATION_DIR}/mapping.toml --settled-interval-ms 0 --cooldown-s 5 \
  --decision-log /lab/out/{DECISION_LOG} &
AGENT=$!
sleep 12
step "idle for 12 s: what the agent sees and decides"
asa status
# The host's xz (busybox's applet only decompresses), as the classifier's recordings ran it.
step "xz -T0 -3 for 30 s: the agent should recognise xz_compress and run its row's expert"
end=$(( $(date +%s) + 30 ))
( while [ $(date +%s) -lt $end ]; do /usr/local/bin/xz -T0 -3 --block-size=1MiB -c /tmp/corpus > /dev/null; done ) &
XZ=$!
sleep 15
asa status
wait $XZ
step "idle again for 20 s: the agent goes back to the idle row's expert"
sleep 20
asa status
step "SIGTERM to asa run: it restores EEVDF"
kill -TERM $AGENT
wait $AGENT
step "asa pin gru: our learned scheduler under stress-ng (2 CPU hogs, 2 context-switch pairs)"
asa pin gru &
PIN=$!
asa status --wait-for gru --timeout 120 || exit 1
stress-ng --cpu 2 --switch 2 --timeout 10s --metrics-brief 2>&1 | grep -v 'dispatching'
asa status
kill -INT $PIN
wait $PIN
step "sched_ext state: $(cat /sys/kernel/sched_ext/state)"
"#
    )
}

/// One tick of the decision log, as far as the summary needs it.
#[derive(Debug, Clone, PartialEq)]
struct Tick {
    at_s: f64,
    voted: Option<String>,
    current: Option<String>,
    target: Option<String>,
    outcome: String,
    detail: Option<String>,
}

fn parse_tick(line: &str) -> Option<Tick> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    let text = |k: &str| v[k].as_str().map(str::to_string);
    Some(Tick {
        at_s: v["at_s"].as_f64()?,
        voted: text("voted_class"),
        current: text("current_expert"),
        target: text("target_expert"),
        outcome: text("outcome").unwrap_or_default(),
        detail: text("detail"),
    })
}

/// The decision log (JSON lines of `asa run --decision-log`) as a short Markdown summary: one
/// row per stretch of ticks with the same voted class and expert, then every switch with its
/// time and how long it took.
pub fn summary(log: &str) -> String {
    let ticks: Vec<Tick> = log.lines().filter_map(parse_tick).collect();
    if ticks.is_empty() {
        return "The agent logged no tick.\n".to_string();
    }
    let mut out = String::from(
        "| from s | to s | ticks | voted class | expert running |\n|---:|---:|---:|---|---|\n",
    );
    let mut start = 0;
    for i in 1..=ticks.len() {
        let same = i < ticks.len()
            && ticks[i].voted == ticks[start].voted
            && ticks[i].current == ticks[start].current;
        if !same {
            let (a, b) = (&ticks[start], &ticks[i - 1]);
            let _ = writeln!(
                out,
                "| {:.0} | {:.0} | {} | {} | {} |",
                a.at_s,
                b.at_s,
                i - start,
                a.voted.as_deref().unwrap_or("(none yet)"),
                a.current.as_deref().unwrap_or("?"),
            );
            start = i;
        }
    }
    let switches: Vec<&Tick> = ticks
        .iter()
        .filter(|t| t.outcome == "switched" || t.outcome == "switch_failed")
        .collect();
    if switches.is_empty() {
        out.push_str("\nNo switch.\n");
    }
    for t in switches {
        let _ = writeln!(
            out,
            "\n- at {:.0} s: {} → {} ({}){}",
            t.at_s,
            t.current.as_deref().unwrap_or("?"),
            t.target.as_deref().unwrap_or("?"),
            t.voted.as_deref().unwrap_or("no confident vote"),
            match (&t.outcome[..], &t.detail) {
                ("switch_failed", Some(d)) => format!(": FAILED, {d}"),
                (_, Some(d)) => format!(": {d}"),
                _ => String::new(),
            }
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(at_s: f64, voted: &str, current: &str, target: &str, outcome: &str) -> String {
        format!(
            r#"{{"at_s":{at_s},"voted_class":{voted},"current_expert":"{current}","target_expert":"{target}","outcome":"{outcome}","detail":null}}"#
        )
    }

    #[test]
    fn the_summary_groups_ticks_by_class_and_expert_and_lists_the_switches() {
        let log = [
            line(1.0, "null", "eevdf", "eevdf", "stay"),
            line(2.0, r#""idle""#, "eevdf", "eevdf", "stay"),
            line(3.0, r#""idle""#, "eevdf", "eevdf", "stay"),
            line(4.0, r#""xz_compress""#, "eevdf", "bpfland", "switched"),
            line(5.0, r#""xz_compress""#, "bpfland", "bpfland", "stay"),
        ]
        .join("\n");
        let s = summary(&log);
        assert!(s.contains("| 1 | 1 | 1 | (none yet) | eevdf |"), "{s}");
        assert!(s.contains("| 2 | 3 | 2 | idle | eevdf |"), "{s}");
        assert!(s.contains("| 4 | 4 | 1 | xz_compress | eevdf |"), "{s}");
        assert!(s.contains("| 5 | 5 | 1 | xz_compress | bpfland |"), "{s}");
        assert!(s.contains("- at 4 s: eevdf → bpfland (xz_compress)"), "{s}");
    }

    #[test]
    fn an_empty_or_broken_log_says_so() {
        assert_eq!(summary(""), "The agent logged no tick.\n");
        assert_eq!(summary("not json\n"), "The agent logged no tick.\n");
        assert!(summary(&line(1.0, "null", "eevdf", "eevdf", "stay")).contains("No switch."));
    }

    #[test]
    fn the_script_calibrates_runs_the_agent_on_its_table_then_pins_gru_and_ends_on_eevdf() {
        let s = script("/lab/m.onnx", "/lab/ort.so", "/lab/cal.toml");
        assert!(s.contains("asa run --model /lab/m.onnx --onnxruntime /lab/ort.so"));
        assert!(s.contains(&format!("--mapping {CALIBRATION_DIR}/mapping.toml")));
        assert!(s.find("asa calibrate --dir").unwrap() < s.find("asa run").unwrap());
        assert!(s.contains("--catalogue /lab/cal.toml --scenarios CAL-IDLE,CAL-GAME,CAL-AUDIO"));
        assert!(s.contains(&format!("--decision-log /lab/out/{DECISION_LOG}")));
        assert!(s.find("asa run").unwrap() < s.find("asa pin gru").unwrap());
        assert!(s.contains("kill -TERM $AGENT") && s.contains("kill -INT $PIN"));
    }
}
