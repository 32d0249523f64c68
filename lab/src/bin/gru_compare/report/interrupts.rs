//! Local timer interrupts per vCPU and second during the I/O loads, per round: which vCPU
//! carried a round's I/O.

use super::per_load_rows;
use crate::runs::Run;

/// Local timer interrupts per second on each vCPU, per I/O load, scheduler and round (from
/// the schedstat snapshots' `LOC:` line): the timer disk completes an I/O on the vCPU that
/// submitted it, so under single-threaded TCG, where vCPU 1's interrupts come late, this shows
/// which vCPU carried a round's I/O. Empty when no snapshot had the line.
pub fn timer_irq_table(schedulers: &[String], runs: &[Run]) -> String {
    let mut t = String::new();
    for (row, load) in per_load_rows().filter(|(_, load)| ["io", "io8", "mixed"].contains(load)) {
        for sched in schedulers {
            let rounds: Vec<String> = runs
                .iter()
                .filter(|r| &r.scheduler == sched && r.row == row && r.wall_s > 0.0)
                .filter_map(|r| {
                    let irqs = &r.delays.as_ref()?.timer_irqs;
                    (!irqs.is_empty()).then(|| {
                        let each: Vec<String> = irqs
                            .iter()
                            .map(|n| format!("{:.0}", *n as f64 / r.wall_s))
                            .collect();
                        format!("r{} {}", r.round, each.join(" / "))
                    })
                })
                .collect();
            if !rounds.is_empty() {
                t.push_str(&format!("| {load} | {sched} | {} |\n", rounds.join(", ")));
            }
        }
    }
    if t.is_empty() {
        return t;
    }
    format!("| load | scheduler | per round: vCPU 0 / vCPU 1 |\n|---|---|---|\n{t}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedstat::LoadDelays;

    #[test]
    fn timer_interrupts_are_listed_per_round_for_the_io_loads() {
        let run = |row: &str, round: u32, irqs: Vec<u64>| Run {
            scheduler: "eevdf".into(),
            round,
            row: row.into(),
            wall_s: 10.0,
            delays: Some(LoadDelays {
                timer_irqs: irqs,
                ..LoadDelays::default()
            }),
            ..Run::default()
        };
        let schedulers = vec!["eevdf".to_string()];
        let runs = vec![
            run("mixed-cpu", 1, vec![21_000, 6_700]),
            run("mixed-io", 1, vec![21_000, 6_700]),
            run("mixed-cpu", 2, vec![9_000, 13_000]),
            run("cpu1", 1, vec![2_500, 10]),
        ];
        let t = timer_irq_table(&schedulers, &runs);
        assert!(
            t.contains("| mixed | eevdf | r1 2100 / 670, r2 900 / 1300 |"),
            "{t}"
        );
        assert!(!t.contains("cpu1"), "{t}");
        let without: Vec<Run> = runs
            .iter()
            .cloned()
            .map(|mut r| {
                r.delays = None;
                r
            })
            .collect();
        assert_eq!(timer_irq_table(&schedulers, &without), "");
    }
}
