//! The profiling runs' tables: the scheduler's BPF programs (`--bpf-prog-stats`) and its
//! user-space process by symbol (`--profile-scheduler`).

use std::collections::BTreeMap;

use super::{fmt, per_load_rows};
use crate::parse::BpfOp;
use crate::profile;
use crate::runs::Run;
use crate::stats::median;

/// With `--bpf-prog-stats`: per load and scheduler, each BPF op's calls per second, time per
/// call and share of one CPU (medians over rounds).
pub fn bpf_op_table(schedulers: &[String], runs: &[Run]) -> String {
    let mut t = String::from("| load | scheduler | op | calls/s | ns / call | CPU % |\n");
    t.push_str("|---|---|---|---|---|---|\n");
    for (row, load) in per_load_rows() {
        for sched in schedulers.iter().map(String::as_str) {
            let mine: Vec<&Run> = runs
                .iter()
                .filter(|r| r.scheduler == sched && r.row == row && r.wall_s > 0.0)
                .collect();
            let names: std::collections::BTreeSet<&String> =
                mine.iter().flat_map(|r| r.bpf_ops.keys()).collect();
            for name in names {
                let each = |f: &dyn Fn(&BpfOp, f64) -> Option<f64>| {
                    median(
                        mine.iter()
                            .filter_map(|r| f(r.bpf_ops.get(name)?, r.wall_s))
                            .collect(),
                    )
                };
                let calls = each(&|op, wall| Some(op.calls as f64 / wall));
                let ns_per_call =
                    each(&|op, _| (op.calls > 0).then(|| op.ns as f64 / op.calls as f64));
                let pct = each(&|op, wall| Some(op.ns as f64 / 1e9 / wall * 100.0));
                t.push_str(&format!(
                    "| {load} | {sched} | {name} | {} | {} | {} |\n",
                    fmt(calls, 0),
                    fmt(ns_per_call, 0),
                    fmt(pct, 2)
                ));
            }
        }
    }
    t
}

/// Symbols per load and scheduler in the `--profile-scheduler` table.
pub const PROFILE_TOP: usize = 12;

/// `--profile-scheduler`'s table: per load and scheduler, the samples of every round summed,
/// the [`PROFILE_TOP`] symbols with the most, with their share.
pub fn profile_table(schedulers: &[String], runs: &[Run]) -> String {
    let mut t = String::from("| load | scheduler | samples | symbol | samples | share % |\n");
    t.push_str("|---|---|---|---|---|---|\n");
    for (row, load) in per_load_rows() {
        for sched in schedulers.iter().filter(|s| *s != "eevdf") {
            let mut all = BTreeMap::new();
            for r in runs
                .iter()
                .filter(|r| &r.scheduler == sched && r.row == row)
            {
                profile::merge(&mut all, &r.profile);
            }
            let (total, rows) = profile::top(&all, PROFILE_TOP);
            for (symbol, n, share) in rows {
                t.push_str(&format!(
                    "| {load} | {sched} | {total} | `{}` | {n} | {share:.1} |\n",
                    symbol.replace('|', "\\|")
                ));
            }
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bpf_ops_per_second_per_call_and_share_of_a_cpu() {
        let run = Run {
            scheduler: "gru".into(),
            round: 1,
            row: "cpu1".into(),
            wall_s: 2.0,
            bpf_ops: BTreeMap::from([
                (
                    "gru_enqueue".to_string(),
                    BpfOp {
                        calls: 2000,
                        ns: 4_000_000,
                    },
                ),
                ("gru_tick".to_string(), BpfOp { calls: 0, ns: 0 }),
            ]),
            ..Run::default()
        };
        let t = bpf_op_table(&["eevdf".to_string(), "gru".to_string()], &[run]);
        assert!(
            t.contains("| cpu1 | gru | gru_enqueue | 1000 | 2000 | 0.20 |\n"),
            "{t}"
        );
        assert!(
            t.contains("| cpu1 | gru | gru_tick | 0 | - | 0.00 |\n"),
            "{t}"
        );
    }

    #[test]
    fn profiles_sum_the_rounds_and_escape_pipes() {
        let run = |round: u32, n: u64| Run {
            scheduler: "gru".into(),
            round,
            row: "io".into(),
            profile: BTreeMap::from([
                ("scx_gru: [.] a".to_string(), n),
                ("scx_gru: [.] <T as X|Y>::f".to_string(), 1),
            ]),
            ..Run::default()
        };
        let t = profile_table(
            &["eevdf".to_string(), "gru".to_string()],
            &[run(1, 3), run(2, 5)],
        );
        assert!(
            t.contains("| io | gru | 10 | `scx_gru: [.] a` | 8 | 80.0 |\n"),
            "{t}"
        );
        assert!(
            t.contains("`scx_gru: [.] <T as X\\|Y>::f` | 2 | 20.0 |"),
            "{t}"
        );
    }
}
