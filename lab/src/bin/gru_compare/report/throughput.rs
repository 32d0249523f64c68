//! The main table: throughput, latency, context switches, migrations and the scheduler's own CPU
//! time per load and scheduler, with medians' ratios to EEVDF.
//!
//! "sched CPU %" is the CPU time of the scheduler's user-space process (all its threads, from
//! `/proc/PID/stat`) during the load in percent of one CPU; BPF programs run in the context of
//! the scheduled tasks and are not in it ("BPF CPU %", with `--bpf-prog-stats`, is their time).

use super::{fmt, ratio};
use crate::runs::{Run, ROWS};
use crate::stats::median;

/// The main table: per load and scheduler, medians over rounds of throughput (and its range),
/// sysbench's latencies, context switches and migrations, wall time, the scheduler's CPU, and
/// the ratios of throughput, context switches and migrations to EEVDF's medians.
pub fn table(schedulers: &[String], runs: &[Run]) -> String {
    let cell = |sched: &str, row: &str, f: &dyn Fn(&Run) -> Option<f64>| {
        median(
            runs.iter()
                .filter(|r| r.scheduler == sched && r.row == row)
                .filter_map(f)
                .collect(),
        )
    };
    let mut t = String::new();
    t.push_str("| load | scheduler | events/s (range) | lat avg / p95 / max ms | cs/s | cs / event | migr/s | wall s | sched CPU % | BPF CPU % | thr / EEVDF | cs / EEVDF | migr / EEVDF |\n");
    t.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for row in ROWS {
        let thr = |s: &str| cell(s, row, &|r| r.throughput());
        let cs = |s: &str| cell(s, row, &|r| r.per_s(r.context_switches));
        let mig = |s: &str| cell(s, row, &|r| r.per_s(r.migrations));
        for sched in schedulers.iter().map(String::as_str) {
            let mine: Vec<&Run> = runs
                .iter()
                .filter(|r| r.scheduler == sched && r.row == row)
                .collect();
            if mine.is_empty() {
                continue;
            }
            let thr_all: Vec<f64> = mine.iter().filter_map(|r| r.throughput()).collect();
            let (lo, hi) = thr_all
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
                    (lo.min(*v), hi.max(*v))
                });
            let throughput = if row == "hackbench" {
                // Show hackbench's own time; the ratio uses 1 / time.
                format!(
                    "{} s ({:.2}–{:.2})",
                    fmt(cell(sched, row, &|r| r.hackbench_s), 2),
                    1.0 / hi,
                    1.0 / lo
                )
            } else {
                format!("{} ({lo:.0}–{hi:.0})", fmt(thr(sched), 1))
            };
            let lat = if row == "hackbench" {
                "-".to_string()
            } else {
                format!(
                    "{} / {} / {}",
                    fmt(cell(sched, row, &|r| r.sysbench.map(|s| s.lat_avg_ms)), 2),
                    fmt(cell(sched, row, &|r| r.sysbench.map(|s| s.lat_p95_ms)), 2),
                    fmt(cell(sched, row, &|r| r.sysbench.map(|s| s.lat_max_ms)), 1),
                )
            };
            t.push_str(&format!(
                "| {row} | {sched} | {throughput} | {lat} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                fmt(cs(sched), 0),
                fmt(cell(sched, row, &|r| r.cs_per_event()), 2),
                fmt(mig(sched), 1),
                fmt(cell(sched, row, &|r| Some(r.wall_s)), 1),
                fmt(cell(sched, row, &|r| r.sched_cpu_pct()), 1),
                fmt(cell(sched, row, &|r| r.bpf_cpu_pct()), 2),
                ratio(thr(sched), thr("eevdf")),
                ratio(cs(sched), cs("eevdf")),
                ratio(mig(sched), mig("eevdf")),
            ));
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::Sysbench;

    #[test]
    fn rows_show_medians_ranges_and_ratios_to_eevdf() {
        let run = |scheduler: &str, round: u32, events_per_s: f64, cs: f64| Run {
            scheduler: scheduler.into(),
            round,
            row: "cpu8".into(),
            sysbench: Some(Sysbench {
                events_per_s,
                lat_avg_ms: 1.0,
                lat_p95_ms: 2.0,
                lat_max_ms: 9.0,
                fairness: None,
            }),
            context_switches: Some(cs),
            migrations: Some(10.0),
            wall_s: 10.0,
            sched_cpu_s: (scheduler != "eevdf").then_some(0.1),
            ..Run::default()
        };
        let runs = vec![
            run("eevdf", 1, 1000.0, 1000.0),
            run("eevdf", 2, 1200.0, 2000.0),
            run("gru", 1, 900.0, 4000.0),
            run("gru", 2, 1300.0, 4000.0),
        ];
        let schedulers = vec!["eevdf".to_string(), "gru".to_string()];
        let t = table(&schedulers, &runs);
        assert!(
            t.contains("| cpu8 | eevdf | 1100.0 (1000–1200) | 1.00 / 2.00 / 9.0 | 150 | 0.13 | 1.0 | 10.0 | - | - | 1.00 | 1.00 | 1.00 |\n"),
            "{t}"
        );
        assert!(
            t.contains("| cpu8 | gru | 1100.0 (900–1300) | 1.00 / 2.00 / 9.0 | 400 | 0.38 | 1.0 | 10.0 | 1.0 | - | 1.00 | 2.67 | 1.00 |\n"),
            "{t}"
        );
        assert_eq!(t.lines().count(), 4, "header, rule, two rows: {t}");
    }

    #[test]
    fn hackbench_shows_its_time_and_runs_per_second_as_the_range() {
        let run = |round: u32, s: f64| Run {
            scheduler: "eevdf".into(),
            round,
            row: "hackbench".into(),
            hackbench_s: Some(s),
            wall_s: 3.0,
            ..Run::default()
        };
        let t = table(&["eevdf".to_string()], &[run(1, 2.0), run(2, 4.0)]);
        assert!(
            t.contains("| hackbench | eevdf | 3.00 s (2.00–4.00) | - |"),
            "{t}"
        );
    }
}
