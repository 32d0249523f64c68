//! Waits and fairness per load: every scheduler's run-queue waits from the kernel's schedstat
//! (with CPU busy and Jain's fairness index over sysbench's threads), and scx_gru's own queue
//! waits from its stats file (written every 0.5 s and copied 0.6 s after the previous load
//! ended and after this one, so no load's waits count for another).

use super::{fmt, per_load_rows, ratio};
use crate::parse::Waits;
use crate::runs::Run;
use crate::schedstat::LoadDelays;
use crate::stats::median;

/// Run-queue waits of every scheduler (the kernel's schedstat), per load: how busy the CPUs
/// were (tasks' run time over the load's wall time), time slices per second and the mean wait
/// before one, for every task and for kernel threads (with their two
/// busiest groups), the waits' ratio to EEVDF's, and Jain's fairness index over sysbench's
/// threads (medians over rounds).
pub fn delay_table(schedulers: &[String], runs: &[Run]) -> String {
    const GROUPS: [&str; 2] = ["kworker", "ksoftirqd"];
    let mut t = String::from(
        "| load | scheduler | CPU busy % | slices/s | wait µs / slice | wait / EEVDF | \
         kthread slices/s | kthread wait µs | kworker µs | ksoftirqd µs | fairness (Jain) |\n",
    );
    t.push_str("|---|---|---|---|---|---|---|---|---|---|---|\n");
    let each = |sched: &str, row: &str, f: &dyn Fn(&LoadDelays, f64) -> Option<f64>| {
        median(
            runs.iter()
                .filter(|r| r.scheduler == sched && r.row == row && r.wall_s > 0.0)
                .filter_map(|r| f(r.delays.as_ref()?, r.wall_s))
                .collect(),
        )
    };
    let mean_wait = |sched: &str, row: &str| each(sched, row, &|d, _| d.all.mean_wait_us());
    for (row, load) in per_load_rows() {
        for sched in schedulers.iter().map(String::as_str) {
            if !runs
                .iter()
                .any(|r| r.scheduler == sched && r.row == row && r.delays.is_some())
            {
                continue;
            }
            let ratio = ratio(mean_wait(sched, row), mean_wait("eevdf", row));
            let group = |g: &str| {
                fmt(
                    each(sched, row, &|d, _| d.kthread_groups.get(g)?.mean_wait_us()),
                    1,
                )
            };
            // The mixed load's fairness is its CPU part's (four threads).
            let fairness = median(
                runs.iter()
                    .filter(|r| r.scheduler == sched && r.row == row)
                    .filter_map(|r| r.sysbench?.fairness)
                    .collect(),
            );
            t.push_str(&format!(
                "| {load} | {sched} | {} | {} | {} | {ratio} | {} | {} | {} | {} | {} |\n",
                fmt(each(sched, row, &|d, wall| d.busy_pct(wall)), 1),
                fmt(
                    each(sched, row, &|d, wall| Some(d.all.slices as f64 / wall)),
                    0
                ),
                fmt(mean_wait(sched, row), 1),
                fmt(
                    each(sched, row, &|d, wall| Some(d.kthreads.slices as f64 / wall)),
                    0
                ),
                fmt(each(sched, row, &|d, _| d.kthreads.mean_wait_us()), 1),
                group(GROUPS[0]),
                group(GROUPS[1]),
                fmt(fairness, 3),
            ));
        }
    }
    t
}

/// scx_gru's queue waits per load and variant: waits per second and mean wait, short-burst
/// tasks and the others (medians over rounds).
pub fn queue_wait_table(schedulers: &[String], runs: &[Run]) -> String {
    let mut t = String::from(
        "| load | scheduler | short-burst waits/s | mean µs | other waits/s | mean µs |\n",
    );
    t.push_str("|---|---|---|---|---|---|\n");
    for (row, load) in per_load_rows() {
        for sched in schedulers.iter().filter(|s| s.starts_with("gru")) {
            let mine: Vec<(&Waits, f64)> = runs
                .iter()
                .filter(|r| &r.scheduler == sched && r.row == row && r.wall_s > 0.0)
                .filter_map(|r| Some((r.waits.as_ref()?, r.wall_s)))
                .collect();
            if mine.is_empty() {
                continue;
            }
            let each = |f: &dyn Fn(&Waits, f64) -> Option<f64>| {
                median(mine.iter().filter_map(|(w, wall)| f(w, *wall)).collect())
            };
            t.push_str(&format!(
                "| {load} | {sched} | {} | {} | {} | {} |\n",
                fmt(each(&|w, wall| Some(w.short_n as f64 / wall)), 0),
                fmt(each(&|w, _| w.mean_us(true)), 1),
                fmt(each(&|w, wall| Some(w.long_n as f64 / wall)), 0),
                fmt(each(&|w, _| w.mean_us(false)), 1),
            ));
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::Sysbench;
    use crate::schedstat::Delays;

    #[test]
    fn run_queue_waits_are_medians_with_a_ratio_to_eevdf_and_fairness() {
        let run = |scheduler: &str, wait_ns: u64, fairness: f64| Run {
            scheduler: scheduler.into(),
            round: 1,
            row: "cpu8".into(),
            wall_s: 10.0,
            sysbench: Some(Sysbench {
                fairness: Some(fairness),
                ..Sysbench::default()
            }),
            delays: Some(LoadDelays {
                all: Delays {
                    run_ns: 10_000_000_000,
                    wait_ns,
                    slices: 1000,
                },
                nr_cpus: 2,
                ..LoadDelays::default()
            }),
            ..Run::default()
        };
        let runs = vec![
            run("eevdf", 100_000_000, 0.99),
            run("bpfland", 300_000_000, 0.9),
            Run {
                delays: None,
                ..run("floor", 1, 1.0)
            },
        ];
        let schedulers: Vec<String> = ["eevdf", "bpfland", "floor"].map(String::from).to_vec();
        let t = delay_table(&schedulers, &runs);
        // 10 s of run on 2 CPUs in 10 s: 50 %; 1000 slices in 10 s; 100 ms / 1000 = 100 µs.
        assert!(
            t.contains("| cpu8 | eevdf | 50.0 | 100 | 100.0 | 1.00 | 0 | - | - | - | 0.990 |"),
            "{t}"
        );
        assert!(
            t.contains("| cpu8 | bpfland | 50.0 | 100 | 300.0 | 3.00 |"),
            "{t}"
        );
        assert!(!t.contains("floor"), "no schedstat snapshots, no row: {t}");
    }

    #[test]
    fn queue_waits_only_for_scx_gru_variants() {
        let run = |scheduler: &str| Run {
            scheduler: scheduler.into(),
            round: 1,
            row: "mixed-cpu".into(),
            wall_s: 2.0,
            waits: Some(Waits {
                short_n: 100,
                short_ns: 500_000,
                long_n: 10,
                long_ns: 1_000_000,
            }),
            ..Run::default()
        };
        let schedulers: Vec<String> = ["eevdf", "gru-burst8"].map(String::from).to_vec();
        let t = queue_wait_table(&schedulers, &[run("eevdf"), run("gru-burst8")]);
        assert!(
            t.contains("| mixed | gru-burst8 | 50 | 5.0 | 5 | 100.0 |\n"),
            "{t}"
        );
        assert!(!t.contains("| eevdf"), "{t}");
    }
}
