//! What one agent run did, read from its decision log: the switches it made and the classes
//! it voted, overall and phase by phase.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;

use anyhow::{Context, Result};
use asa_scenarios::runner::RunRecord;
use serde::{Deserialize, Serialize};

/// What the agent did during one run, from its decision log.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentTrace {
    /// The experts it switched to, in order.
    pub switches: Vec<String>,
    /// Switches that failed.
    pub failed: u32,
    /// Ticks per voted class.
    pub voted: BTreeMap<String, u32>,
    /// Ticks logged.
    pub ticks: u32,
    /// Per phase of a phased scenario's run (its phase times are known): what was voted and
    /// switched while that phase's load ran. Empty for single-load scenarios and old results.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<PhaseTrace>,
    /// Each tick's time, voted class and switch (kept to split the log by phase).
    #[serde(skip)]
    marks: Vec<TickMark>,
}

/// One logged tick, as far as the phase split needs it.
#[derive(Debug, Clone, PartialEq)]
struct TickMark {
    unix_ms: u64,
    voted: Option<String>,
    switched_to: Option<String>,
    /// The expert running before the tick's decision.
    current: Option<String>,
}

/// What the agent did during one phase of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseTrace {
    /// The phase's background load (`idle` for none).
    pub load: String,
    /// Ticks per voted class among the ticks logged after the phase began and until it ended,
    /// the first one left out (it covers time before the phase).
    pub voted: BTreeMap<String, u32>,
    /// Successful switches during the phase: the expert and the seconds since the phase began.
    pub switches: Vec<(String, f64)>,
    /// The expert the table under test maps the phase's load to (its first-ranked one).
    #[serde(default)]
    pub mapped: Option<String>,
    /// Seconds from the phase's start until the mapped expert ran: 0 when it already ran,
    /// None when it never did during the phase (or nothing is mapped).
    #[serde(default)]
    pub reached_s: Option<f64>,
}

impl PhaseTrace {
    /// One line for the report: `idle: voted idle 5/6, xz_compress 1/6, → bpfland at +2.6 s`.
    pub fn summary(&self) -> String {
        let total: u32 = self.voted.values().sum();
        let votes: Vec<String> = self
            .voted
            .iter()
            .map(|(class, n)| format!("{class} {n}/{total}"))
            .collect();
        let mut line = format!(
            "{}: voted {}",
            self.load,
            if votes.is_empty() {
                "nothing".to_string()
            } else {
                votes.join(", ")
            }
        );
        for (expert, after) in &self.switches {
            line.push_str(&format!(", → {expert} at +{after:.1} s"));
        }
        if let Some(mapped) = &self.mapped {
            match self.reached_s {
                Some(s) => line.push_str(&format!(" (mapped {mapped} running at +{s:.1} s)")),
                None => line.push_str(&format!(" (mapped {mapped} never ran)")),
            }
        }
        line
    }
}

impl AgentTrace {
    /// Reads one decision log (JSON lines of `asa run --decision-log`).
    pub fn read(path: &Path) -> Result<Self> {
        let file =
            std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let mut trace = AgentTrace::default();
        for line in BufReader::new(file).lines() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            let v: serde_json::Value = serde_json::from_str(&line)
                .with_context(|| format!("{}: not a decision record", path.display()))?;
            trace.ticks += 1;
            let voted = v["voted_class"].as_str().map(str::to_owned);
            if let Some(class) = &voted {
                *trace.voted.entry(class.clone()).or_default() += 1;
            }
            let mut switched_to = None;
            match v["outcome"].as_str() {
                Some("switched") => {
                    let expert = v["target_expert"].as_str().unwrap_or("?").to_owned();
                    trace.switches.push(expert.clone());
                    switched_to = Some(expert);
                }
                Some("switch_failed") => trace.failed += 1,
                _ => {}
            }
            if let Some(unix_ms) = v["unix_ms"].as_u64() {
                trace.marks.push(TickMark {
                    unix_ms,
                    voted,
                    switched_to,
                    current: v["current_expert"].as_str().map(str::to_owned),
                });
            }
        }
        Ok(trace)
    }

    /// This trace split by the phases of `run` (see [`AgentTrace::phases`]); unchanged when the
    /// run has a single phase or its phase times were not recorded. `mapped(load)` is the
    /// expert the table under test gives a phase's load, for [`PhaseTrace::reached_s`].
    pub fn with_phases(mut self, run: &RunRecord, mapped: &dyn Fn(&str) -> Option<String>) -> Self {
        if run.phases.len() < 2
            || run
                .phases
                .iter()
                .any(|p| p.started_unix_ms == 0 || p.ended_unix_ms == 0)
        {
            return self;
        }
        self.phases = run
            .phases
            .iter()
            .map(|phase| {
                let inside: Vec<&TickMark> = self
                    .marks
                    .iter()
                    .filter(|m| {
                        m.unix_ms > phase.started_unix_ms && m.unix_ms <= phase.ended_unix_ms
                    })
                    .collect();
                let mut voted = BTreeMap::new();
                for class in inside.iter().skip(1).filter_map(|m| m.voted.as_ref()) {
                    *voted.entry(class.clone()).or_default() += 1;
                }
                let switches = inside
                    .iter()
                    .filter_map(|m| {
                        let expert = m.switched_to.as_ref()?;
                        let after_s = (m.unix_ms - phase.started_unix_ms) as f64 / 1000.0;
                        Some((expert.clone(), after_s))
                    })
                    .collect();
                let mapped = mapped(&phase.load);
                let reached_s = mapped
                    .as_ref()
                    .and_then(|m| self.reached(m, phase.started_unix_ms, phase.ended_unix_ms));
                PhaseTrace {
                    load: phase.load.clone(),
                    voted,
                    switches,
                    mapped,
                    reached_s,
                }
            })
            .collect();
        self
    }

    /// Seconds from `start` (ms since the epoch) until `expert` ran, within [start, end]: 0 when
    /// it ran at the start (the last switch before it, else the first tick's running expert).
    fn reached(&self, expert: &str, start: u64, end: u64) -> Option<f64> {
        let at_start = self
            .marks
            .iter()
            .filter(|m| m.unix_ms <= start)
            .filter_map(|m| m.switched_to.as_deref())
            .next_back()
            .or_else(|| {
                self.marks
                    .iter()
                    .find(|m| m.unix_ms > start)
                    .and_then(|m| m.current.as_deref())
            });
        if at_start == Some(expert) {
            return Some(0.0);
        }
        self.marks
            .iter()
            .filter(|m| m.unix_ms > start && m.unix_ms <= end)
            .find(|m| m.switched_to.as_deref() == Some(expert))
            .map(|m| (m.unix_ms - start) as f64 / 1000.0)
    }

    /// The agent's logs in `dir`, by the time each agent run started (ms since the epoch).
    pub fn read_dir(dir: &Path) -> Result<BTreeMap<u64, AgentTrace>> {
        let mut traces = BTreeMap::new();
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Ok(traces);
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(stamp) = name
                .strip_prefix("agent-")
                .and_then(|n| n.strip_suffix(".jsonl"))
                .and_then(|n| n.parse::<u64>().ok())
            {
                traces.insert(stamp, AgentTrace::read(&e.path())?);
            }
        }
        Ok(traces)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phased_run_splits_the_log_by_its_phase_times() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("agent-900.jsonl");
        let tick = |ms: u64, voted: &str, outcome: &str| {
            format!(
                r#"{{"unix_ms":{ms},"voted_class":{voted},"target_expert":"bpfland","outcome":"{outcome}"}}"#
            )
        };
        let lines = [
            tick(1500, "null", "stay"),
            tick(2500, r#""idle""#, "stay"),
            tick(3500, r#""idle""#, "stay"),
            tick(4500, r#""xz_compress""#, "stay"),
            tick(5500, r#""xz_compress""#, "switched"),
            tick(6500, r#""xz_compress""#, "stay"),
            tick(7500, r#""xz_compress""#, "stay"),
        ];
        std::fs::write(&log, lines.join("\n")).unwrap();
        let phase = |load: &str, from: u64, to: u64| {
            format!(
                r#"{{"load":"{load}","planned_s":3.0,"output":null,"started_unix_ms":{from},"ended_unix_ms":{to}}}"#
            )
        };
        let run = |phases: &str| -> RunRecord {
            serde_json::from_str(&format!(
                r#"{{"expert":"asa","rep":0,"pinned":"asa","started_unix_ms":900,
                "probe":{{"kind":"game","elapsed_s":6.0,"summary":{{}},"samples":{{}}}},
                "phases":[{phases}],"valid":true}}"#
            ))
            .unwrap()
        };
        let trace = AgentTrace::read(&log).unwrap();
        let unmapped = |_: &str| None;
        let phased = trace.clone().with_phases(
            &run(&format!(
                "{},{}",
                phase("idle", 1000, 4000),
                phase("xz_compress", 4000, 7000)
            )),
            &unmapped,
        );
        assert_eq!(phased.phases.len(), 2);
        let (idle, xz) = (&phased.phases[0], &phased.phases[1]);
        assert_eq!(idle.load, "idle");
        // The first tick of each phase covers time before it: left out of the votes.
        assert_eq!(idle.voted, BTreeMap::from([("idle".to_string(), 2)]));
        assert!(idle.switches.is_empty());
        assert_eq!(xz.voted, BTreeMap::from([("xz_compress".to_string(), 2)]));
        assert_eq!(xz.switches, [("bpfland".to_string(), 1.5)]);
        assert_eq!(idle.summary(), "idle: voted idle 2/2");
        assert_eq!(
            xz.summary(),
            "xz_compress: voted xz_compress 2/2, → bpfland at +1.5 s"
        );
        // A single phase, or phases without times (older results): no split.
        let single = trace
            .clone()
            .with_phases(&run(&phase("xz_compress", 1000, 7000)), &unmapped);
        assert!(single.phases.is_empty());
        let untimed = trace.with_phases(
            &run(&format!(
                "{},{}",
                phase("idle", 0, 0),
                phase("xz_compress", 0, 0)
            )),
            &unmapped,
        );
        assert!(untimed.phases.is_empty());
    }

    /// The time to the mapped expert is 0 when it ran when the phase began, the time of the
    /// switch to it otherwise, and unknown when it never ran in the phase.
    #[test]
    fn each_phase_gives_the_time_until_its_mapped_expert_ran() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("agent-900.jsonl");
        let tick = |ms: u64, current: &str, target: &str, outcome: &str| {
            format!(
                r#"{{"unix_ms":{ms},"voted_class":null,"current_expert":"{current}","target_expert":"{target}","outcome":"{outcome}"}}"#
            )
        };
        let lines = [
            tick(1500, "eevdf", "bpfland", "switched"), // idle phase: bpfland from +0.5 s
            tick(2500, "bpfland", "bpfland", "stay"),
            tick(4500, "bpfland", "bpfland", "stay"), // xz phase: maps to bpfland, running
            tick(7500, "bpfland", "lavd", "switched"), // S phase: lavd at +0.5 s
            tick(9500, "lavd", "lavd", "stay"),       // last phase: rusty never runs
        ];
        std::fs::write(&log, lines.join("\n")).unwrap();
        let phases = [
            ("idle", 1000, 4000),
            ("xz_compress", 4000, 7000),
            ("kernel_build", 7000, 9000),
            ("disk_io", 9000, 10000),
        ]
        .map(|(load, from, to)| {
            format!(
                r#"{{"load":"{load}","planned_s":3.0,"output":null,"started_unix_ms":{from},"ended_unix_ms":{to}}}"#
            )
        })
        .join(",");
        let run: RunRecord = serde_json::from_str(&format!(
            r#"{{"expert":"asa","rep":0,"pinned":"asa","started_unix_ms":900,
            "probe":{{"kind":"game","elapsed_s":9.0,"summary":{{}},"samples":{{}}}},
            "phases":[{phases}],"valid":true}}"#
        ))
        .unwrap();
        let mapped = |load: &str| {
            Some(
                match load {
                    "idle" | "xz_compress" => "bpfland",
                    "kernel_build" => "lavd",
                    _ => "rusty",
                }
                .to_string(),
            )
        };
        let t = AgentTrace::read(&log).unwrap().with_phases(&run, &mapped);
        let reached: Vec<Option<f64>> = t.phases.iter().map(|p| p.reached_s).collect();
        assert_eq!(reached, [Some(0.5), Some(0.0), Some(0.5), None]);
        assert!(t.phases[3].summary().ends_with("(mapped rusty never ran)"));
    }

    #[test]
    fn a_decision_log_gives_the_switches_and_the_voted_classes() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("agent-1000.jsonl");
        std::fs::write(
            &log,
            r#"{"voted_class":null,"target_expert":null,"outcome":"stay"}
{"voted_class":"xz_compress","target_expert":"bpfland","outcome":"switched"}
{"voted_class":"xz_compress","target_expert":"bpfland","outcome":"stay"}
{"voted_class":"idle","target_expert":"eevdf","outcome":"switch_failed"}

"#,
        )
        .unwrap();
        std::fs::write(dir.path().join("agent-2000.log"), "not a log").unwrap();
        let traces = AgentTrace::read_dir(dir.path()).unwrap();
        assert_eq!(traces.keys().copied().collect::<Vec<_>>(), [1000]);
        let t = &traces[&1000];
        assert_eq!(t.ticks, 4);
        assert_eq!(t.switches, ["bpfland"]);
        assert_eq!(t.failed, 1);
        assert_eq!(t.voted["xz_compress"], 2);
        assert_eq!(t.voted["idle"], 1);
        std::fs::write(dir.path().join("agent-3000.jsonl"), "{oops").unwrap();
        let err = AgentTrace::read_dir(dir.path()).unwrap_err();
        assert!(format!("{err:#}").contains("agent-3000.jsonl"), "{err:#}");
    }
}
