//! Parsers of the tools' output in the guest out folder: sysbench, hackbench, `perf stat -x,`,
//! `bpftool -j prog show` and scx_gru's stats file. Pure: text in, numbers out.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// One sysbench report.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Sysbench {
    pub events_per_s: f64,
    pub lat_avg_ms: f64,
    pub lat_p95_ms: f64,
    pub lat_max_ms: f64,
    /// Jain's fairness index over the threads' event counts, (Σx)² / (n·Σx²) = 1 / (1 + cv²),
    /// from sysbench's "events (avg/stddev)" (the population deviation over the threads):
    /// 1 when every thread did as much, 1/n when one did everything.
    pub fairness: Option<f64>,
}

/// The number after `label` on the first line that contains it (`label: 12.5` or `12.5s`).
fn value_after(text: &str, label: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.contains(label))?;
    let rest = &line[line.find(label)? + label.len()..];
    rest.trim()
        .trim_end_matches('s')
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// sysbench 1.0 (cpu or fileio): events / total time, latency avg / 95th percentile / max.
pub fn sysbench(text: &str) -> Option<Sysbench> {
    let total_s = value_after(text, "total time:")?;
    let events = value_after(text, "total number of events:")?;
    let latency = &text[text.find("Latency (ms):")?..];
    Some(Sysbench {
        events_per_s: (total_s > 0.0).then(|| events / total_s)?,
        lat_avg_ms: value_after(latency, "avg:")?,
        lat_p95_ms: value_after(latency, "95th percentile:")?,
        lat_max_ms: value_after(latency, "max:")?,
        fairness: jain_fairness(text),
    })
}

/// Jain's fairness index from sysbench's "events (avg/stddev): 1234.5000/12.34" line.
fn jain_fairness(text: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.contains("events (avg/stddev):"))?;
    let (avg, stddev) = line.split(':').nth(1)?.trim().split_once('/')?;
    let (avg, stddev): (f64, f64) = (avg.parse().ok()?, stddev.parse().ok()?);
    (avg > 0.0).then(|| 1.0 / (1.0 + (stddev / avg).powi(2)))
}

/// hackbench's "Time: 1.234".
pub fn hackbench(text: &str) -> Option<f64> {
    value_after(text, "Time:")
}

/// A counter from `perf stat -x,` output.
pub fn perf_counter(text: &str, event: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.split(',').nth(2) == Some(event))
        .and_then(|l| l.split(',').next()?.parse().ok())
}

/// Calls and run time of one BPF program during one load (kernel.bpf_stats_enabled).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct BpfOp {
    pub calls: u64,
    pub ns: u64,
}

/// The struct_ops programs' run counts and times between two `bpftool -j prog show` dumps,
/// by program name (programs are matched by id; a program absent before counts from zero).
pub fn bpf_op_deltas(before: &str, after: &str) -> Result<BTreeMap<String, BpfOp>> {
    let parse = |text: &str| -> Result<BTreeMap<u64, (String, BpfOp)>> {
        let progs: Vec<serde_json::Value> =
            serde_json::from_str(text).with_context(|| format!("bpftool output {text:?}"))?;
        Ok(progs
            .iter()
            .filter(|p| p["type"] == "struct_ops")
            .filter_map(|p| {
                let op = BpfOp {
                    // bpftool leaves both fields out while the run time is 0.
                    calls: p["run_cnt"].as_u64().unwrap_or(0),
                    ns: p["run_time_ns"].as_u64().unwrap_or(0),
                };
                Some((p["id"].as_u64()?, (p["name"].as_str()?.to_owned(), op)))
            })
            .collect())
    };
    let before = parse(before)?;
    let mut ops = BTreeMap::new();
    for (id, (name, after)) in parse(after)? {
        let start = before.get(&id).map_or(BpfOp::default(), |(_, op)| *op);
        ops.insert(
            name,
            BpfOp {
                calls: after.calls.saturating_sub(start.calls),
                ns: after.ns.saturating_sub(start.ns),
            },
        );
    }
    Ok(ops)
}

/// A counter (or the mode) of scx_gru's stats file `v` (`asa.gru-stats`) by name: at the top
/// level since v2 (flat), in the `bpf` or `user` section in v1 (older out folders, read with
/// `--from-out`); null when absent.
pub fn gru_stat<'a>(v: &'a serde_json::Value, key: &str) -> &'a serde_json::Value {
    [&v[key], &v["bpf"][key], &v["user"][key]]
        .into_iter()
        .find(|x| !x.is_null())
        .unwrap_or(&serde_json::Value::Null)
}

/// scx_gru's queue waits (runnable → running) during one load, from its stats file copied
/// before and after the load: count and total ns, short-burst tasks and the others.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Waits {
    pub short_n: u64,
    pub short_ns: u64,
    pub long_n: u64,
    pub long_ns: u64,
}

impl Waits {
    /// The difference of the wait counters of two stats files (`asa.gru-stats`).
    pub fn between(before: &str, after: &str) -> Result<Self> {
        let counters = |text: &str| -> Result<[u64; 4]> {
            let v: serde_json::Value = serde_json::from_str(text).context("a stats file")?;
            let get = |k: &str| gru_stat(&v, k).as_u64().with_context(|| format!("no {k}"));
            Ok([
                get("nr_waits_short")?,
                get("wait_ns_short")?,
                get("nr_waits_long")?,
                get("wait_ns_long")?,
            ])
        };
        let (a, b) = (counters(before)?, counters(after)?);
        let d = |i: usize| b[i].saturating_sub(a[i]);
        Ok(Self {
            short_n: d(0),
            short_ns: d(1),
            long_n: d(2),
            long_ns: d(3),
        })
    }

    /// Mean wait in µs of short-burst tasks (`short`) or of the others (as scx_gru's stats
    /// compute it).
    pub fn mean_us(&self, short: bool) -> Option<f64> {
        if short {
            crate::stats::mean_us(self.short_n, self.short_ns)
        } else {
            crate::stats::mean_us(self.long_n, self.long_ns)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CPU: &str = "CPU speed:\n    events per second:   287.66\n\n\
        General statistics:\n    total time:                          10.0025s\n\
        \x20   total number of events:              2878\n\n\
        Latency (ms):\n         min:                                    2.91\n\
        \x20        avg:                                    3.47\n\
        \x20        max:                                   41.08\n\
        \x20        95th percentile:                        4.82\n\
        \x20        sum:                                 9988.20\n";

    #[test]
    fn sysbench_gives_events_per_second_latency_and_fairness() {
        let s = sysbench(CPU).unwrap();
        assert!((s.events_per_s - 2878.0 / 10.0025).abs() < 1e-9, "{s:?}");
        assert_eq!(
            (s.lat_avg_ms, s.lat_p95_ms, s.lat_max_ms),
            (3.47, 4.82, 41.08)
        );
        assert!(sysbench("FATAL: no such test").is_none());
        // Jain's index: events 80 and 120 on two threads are avg 100, stddev 20 (population),
        // (200)² / (2 · (80² + 120²)) = 1 / (1 + 0.2²).
        assert_eq!(s.fairness, None, "this report has no fairness lines");
        let fair = format!(
            "{CPU}\nThreads fairness:\n    events (avg/stddev):           100.0000/20.00\n\
             \x20   execution time (avg/stddev):   9.9/0.01\n"
        );
        let jain = sysbench(&fair).unwrap().fairness.unwrap();
        assert!(
            (jain - 40_000.0 / (2.0 * (6_400.0 + 14_400.0))).abs() < 1e-12,
            "{jain}"
        );
        assert_eq!(
            jain_fairness("    events (avg/stddev):           1742.0000/0.00"),
            Some(1.0)
        );
        assert_eq!(
            jain_fairness("    events (avg/stddev):    0.0000/0.00"),
            None
        );
    }

    #[test]
    fn hackbench_gives_its_time_and_perf_its_counters() {
        assert_eq!(
            hackbench("Running in process mode with 4 groups\nTime: 2.345\n"),
            Some(2.345)
        );
        assert_eq!(
            perf_counter(
                "83,,context-switches,2063609346,100.00,,\n5,,cpu-migrations,1,100.00,,",
                "cpu-migrations"
            ),
            Some(5.0)
        );
        assert_eq!(
            perf_counter("<not counted>,,cpu-migrations,0,0,,", "cpu-migrations"),
            None
        );
    }

    #[test]
    fn bpf_op_deltas_are_per_struct_ops_program() {
        let before = r#"[{"id":7,"type":"struct_ops","name":"gru_enqueue","run_time_ns":1000,"run_cnt":10},
            {"id":8,"type":"struct_ops","name":"gru_running"},
            {"id":3,"type":"tracing","name":"other","run_time_ns":5,"run_cnt":1}]"#;
        let after = r#"[{"id":7,"type":"struct_ops","name":"gru_enqueue","run_time_ns":4000,"run_cnt":25},
            {"id":8,"type":"struct_ops","name":"gru_running","run_time_ns":600,"run_cnt":3},
            {"id":9,"type":"struct_ops","name":"gru_stopping","run_time_ns":90,"run_cnt":2},
            {"id":3,"type":"tracing","name":"other","run_time_ns":500,"run_cnt":9}]"#;
        let ops = bpf_op_deltas(before, after).unwrap();
        assert_eq!(ops.len(), 3, "{ops:?}");
        assert_eq!(
            ops["gru_enqueue"],
            BpfOp {
                calls: 15,
                ns: 3000
            }
        );
        assert_eq!(ops["gru_running"], BpfOp { calls: 3, ns: 600 });
        assert_eq!(ops["gru_stopping"], BpfOp { calls: 2, ns: 90 });
        assert!(bpf_op_deltas("Error: no BTF", after).is_err());
    }

    #[test]
    fn waits_are_the_difference_of_two_stats_files() {
        // v2, flat.
        let file = |n: u64, ns: u64| {
            format!(
                r#"{{"version":2,"nr_waits_short":{n},"wait_ns_short":{ns},"nr_waits_long":2,"wait_ns_long":9000}}"#
            )
        };
        let w = Waits::between(&file(10, 5_000), &file(14, 25_000)).unwrap();
        assert_eq!((w.short_n, w.short_ns, w.long_n), (4, 20_000, 0));
        // v1, the counters in the `bpf` section.
        let file = |n: u64, ns: u64| {
            format!(
                r#"{{"bpf":{{"nr_waits_short":{n},"wait_ns_short":{ns},"nr_waits_long":2,"wait_ns_long":9000}}}}"#
            )
        };
        let w = Waits::between(&file(10, 5_000), &file(14, 25_000)).unwrap();
        assert_eq!(
            w,
            Waits {
                short_n: 4,
                short_ns: 20_000,
                long_n: 0,
                long_ns: 0
            }
        );
        assert_eq!(w.mean_us(true), Some(5.0));
        assert_eq!(w.mean_us(false), None);
        // A stats file from before the wait counters is an error, not zeros.
        assert!(Waits::between(r#"{"bpf":{}}"#, &file(1, 1)).is_err());
    }
}
