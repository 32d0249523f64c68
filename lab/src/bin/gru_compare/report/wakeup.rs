//! `--wakeup-latency`'s table: every task's wakeup-to-run latency per load and scheduler.

use super::{fmt, per_load_rows, ratio};
use crate::latency;
use crate::runs::Run;
use crate::stats::median;

/// With `--wakeup-latency`: per load and scheduler, medians over rounds of every task's
/// wakeup-to-run latency ([`latency::WakeLatency`]); the worst tick is the worst of all rounds.
pub fn latency_table(schedulers: &[String], runs: &[Run]) -> String {
    let mut t = String::from(
        "| load | scheduler | ticks | wake-ups/s | p50 µs | p99 µs | p99 / EEVDF | worst p99 µs |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    let of = |sched: &str, row: &str| -> Vec<latency::WakeLatency> {
        runs.iter()
            .filter(|r| r.scheduler == sched && r.row == row)
            .filter_map(|r| r.wake)
            .collect()
    };
    let p99 = |sched: &str, row: &str| median(of(sched, row).iter().map(|w| w.p99_us).collect());
    for (row, load) in per_load_rows() {
        for sched in schedulers.iter().map(String::as_str) {
            let mine = of(sched, row);
            if mine.is_empty() {
                continue;
            }
            let med = |f: fn(&latency::WakeLatency) -> f64| median(mine.iter().map(f).collect());
            let p99_us = med(|w| w.p99_us);
            t.push_str(&format!(
                "| {load} | {sched} | {} | {} | {} | {} | {} | {} |\n",
                mine.iter().map(|w| w.ticks).sum::<usize>(),
                fmt(med(|w| w.wakeups_per_s), 0),
                fmt(med(|w| w.p50_us), 1),
                fmt(p99_us, 1),
                ratio(p99_us, p99("eevdf", row)),
                fmt(mine.iter().map(|w| w.p99_worst_us).reduce(f64::max), 1),
            ));
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::WakeLatency;

    #[test]
    fn medians_over_rounds_and_the_worst_tick_of_all() {
        let run = |scheduler: &str, round: u32, p99_us: f64, worst: f64| Run {
            scheduler: scheduler.into(),
            round,
            row: "io".into(),
            wake: Some(WakeLatency {
                ticks: 9,
                wakeups_per_s: 1000.0,
                p50_us: 10.0,
                p99_us,
                p99_worst_us: worst,
            }),
            ..Run::default()
        };
        let runs = vec![
            run("eevdf", 1, 100.0, 300.0),
            run("gru", 1, 150.0, 900.0),
            run("gru", 2, 250.0, 400.0),
        ];
        let schedulers: Vec<String> = ["eevdf", "gru"].map(String::from).to_vec();
        let t = latency_table(&schedulers, &runs);
        assert!(
            t.contains("| io | gru | 18 | 1000 | 10.0 | 200.0 | 2.00 | 900.0 |\n"),
            "{t}"
        );
        assert!(t.contains("| io | eevdf | 9 | 1000 | 10.0 | 100.0 | 1.00 | 300.0 |\n"));
    }
}
