//! The report: Markdown tables from the run records, printed and, with `--out`, written as
//! `table.md` next to `runs.json`.
//!
//! [`tables`] and the table modules are pure (runs in, Markdown out); [`report`] reads the
//! guest out folder and writes the files.

pub mod document;
mod interrupts;
mod profiling;
mod ratios;
mod throughput;
mod waits;
mod wakeup;

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use asa_lab::VmOutcome;

use crate::args::Args;
use crate::lab;
use crate::runs::{self, Run, ROWS};

pub use document::Environment;

/// A table cell: `a / b` with two decimals, or "-" without both or with `b` not positive.
fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
        _ => "-".into(),
    }
}

/// A table cell: the value with `digits` decimals, or "-".
fn fmt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

/// The loads of the per-load tables: the mixed load's two rows come from one run, so it is
/// shown once, as "mixed" (its row "mixed-cpu" holds the run). Yields (row, load name).
fn per_load_rows() -> impl Iterator<Item = (&'static str, &'static str)> {
    ROWS.into_iter()
        .filter(|row| *row != "mixed-io")
        .map(|row| (row, if row == "mixed-cpu" { "mixed" } else { row }))
}

/// Every table of the report with the sentences that introduce them: the instruments' tables
/// only when their flag was on, scx_gru's queue waits when an scx_gru variant ran.
pub fn tables(args: &Args, runs: &[Run]) -> String {
    let schedulers = &args.schedulers;
    let mut table = throughput::table(schedulers, runs);
    table.push_str(&format!(
        "\nThroughput / EEVDF within each round (hackbench: 1 / time), the geometric mean's 95 % \
         interval (Student's t on the log ratios) and what it says about issue 7's target of at \
         least {:.2} × EEVDF (met: the whole interval at or above it; missed: all \
         below; open: it straddles it); mixed (both parts): per round, the geometric mean of \
         the two parts' ratios:\n\n{}",
        ratios::THROUGHPUT_FLOOR,
        ratios::round_ratio_table(schedulers, runs)
    ));
    let variants = ratios::variant_ratio_table(schedulers, runs);
    if !variants.is_empty() {
        table.push_str(&format!(
            "\nscx_gru's variants paired with the policy without a model in the same rounds \
             (throughput ratio, 95 % interval as above):\n\n{variants}"
        ));
    }
    if runs.iter().any(|r| r.delays.is_some()) {
        table.push_str(&format!(
            "\nRun-queue waits (the kernel's schedstat, any scheduler: CPU busy is the tasks' run \
             time over the CPUs' wall time, a time slice is a task starting to run, its wait the \
             time since it was queued) and Jain's fairness index over sysbench's threads:\n\n{}",
            waits::delay_table(schedulers, runs)
        ));
    }
    let irqs = interrupts::timer_irq_table(schedulers, runs);
    if !irqs.is_empty() {
        table.push_str(&format!(
            "\nLocal timer interrupts per second on each vCPU during the I/O loads (the timer \
             disk completes each I/O on the vCPU that submitted it; ~250/s more on a busy vCPU \
             are the tick):\n\n{irqs}"
        ));
    }
    if schedulers.iter().any(|s| s.starts_with("gru")) {
        table.push_str(&format!(
            "\nscx_gru's queue waits (runnable → running; short-burst tasks ran under 1 ms before \
             they slept and since):\n\n{}",
            waits::queue_wait_table(schedulers, runs)
        ));
    }
    if args.wakeup_latency {
        table.push_str(&format!(
            "\nWakeup-to-run latency of every task (`asa record`'s BPF probes on sched_wakeup and \
             sched_switch, a log2 histogram per 1 s tick, the ticks wholly inside the load; \
             medians over rounds of each run's median tick, and the worst tick of all):\n\n{}",
            wakeup::latency_table(schedulers, runs)
        ));
    }
    if args.bpf_prog_stats {
        table.push_str(&format!(
            "\nBPF programs (kernel.bpf_stats_enabled, which adds two clock reads per run):\n\n{}",
            profiling::bpf_op_table(schedulers, runs)
        ));
    }
    if args.profile_scheduler {
        table.push_str(&format!(
            "\nThe scheduler's user-space process by symbol (`perf record -e cpu-clock -F 999 -p \
             PID` around every load, its threads' user and kernel samples; samples summed over \
             the rounds, the {} symbols with the most):\n\n{}",
            profiling::PROFILE_TOP,
            profiling::profile_table(schedulers, runs)
        ));
    }
    table
}

/// The scx_gru stats files the guest copied out (`stats-SCHED-ROUND.json`, one per variant
/// and round), by `SCHED-ROUND`.
fn gru_stats(args: &Args, outcome: &VmOutcome) -> Result<BTreeMap<String, serde_json::Value>> {
    let mut gru_stats = BTreeMap::new();
    for r in 1..=args.rounds {
        for s in args.schedulers.iter().filter(|s| s.starts_with("gru")) {
            if let Ok(text) = outcome.read_out(&format!("stats-{s}-{r}.json")) {
                let v: serde_json::Value =
                    serde_json::from_str(&text).with_context(|| format!("stats-{s}-{r}.json"))?;
                gru_stats.insert(format!("{s}-{r}"), v);
            }
        }
    }
    Ok(gru_stats)
}

/// The report's two texts: what is printed and `table.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// The tables, then failed stats-file copies, qemu's `-accel` when not the lab's default,
    /// the caveat and the kernel log's summary.
    pub printed: String,
    /// `table.md`: a header and the tables.
    pub table_md: String,
}

/// The report of `runs` with the guest's `snap-errors.txt` and `dmesg.txt`.
pub fn render(
    args: &Args,
    runs: &[Run],
    env: &Environment,
    snap_errors: &str,
    dmesg: &str,
) -> Rendered {
    let table = tables(args, runs);
    let mut printed = format!("{table}\n");
    if !snap_errors.trim().is_empty() {
        printed.push_str(&format!(
            "stats-file copies that failed in the guest:\n{}\n",
            snap_errors.trim_end()
        ));
    }
    if env.accel != asa_lab::vm::DEFAULT_TCG_ACCEL {
        printed.push_str(&format!(
            "qemu ran with -accel {} ({})\n",
            env.accel,
            asa_lab::vm::TCG_THREAD_ENV
        ));
    }
    if let Some(c) = document::accel_caveat(&env.accel, &args.loads) {
        printed.push_str(&format!("{c}\n"));
    }
    printed.push_str(&document::kernel_log_summary(dmesg));
    Rendered {
        printed,
        table_md: document::markdown(args, env, &table),
    }
}

/// The report of a finished guest run: printed and, with `--out`, written with the raw files.
pub fn report(args: &Args, outcome: &VmOutcome) -> Result<()> {
    let runs = runs::collect(outcome, args)?;
    let env = Environment {
        versions: outcome.read_out("versions.txt").unwrap_or_default(),
        io_disk: outcome.read_out("io-disk.txt").unwrap_or_default(),
        // Written by run_guest next to the guest's files (older out folders: the lab's default then).
        accel: outcome
            .read_out(lab::ACCEL_FILE)
            .map(|a| a.trim().to_owned())
            .unwrap_or_else(|_| asa_lab::vm::DEFAULT_TCG_ACCEL.into()),
        // Older out folders ran on qemu 7.2 without recording it.
        qemu: outcome
            .read_out(lab::QEMU_FILE)
            .map(|v| v.trim().to_owned())
            .unwrap_or_else(|_| "7.2 (not recorded)".into()),
        profile: lab::PROFILE,
    };
    let snap_errors = outcome.read_out("snap-errors.txt").unwrap_or_default();
    let dmesg = outcome.read_out("dmesg.txt").unwrap_or_default();
    let rendered = render(args, &runs, &env, &snap_errors, &dmesg);
    print!("{}", rendered.printed);
    let gru_stats = gru_stats(args, outcome)?;
    for (k, v) in &gru_stats {
        println!("{}", document::gru_stats_line(k, v));
    }
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        std::fs::write(dir.join("table.md"), &rendered.table_md)?;
        let json = serde_json::json!({
            "rounds": args.rounds, "seconds": args.seconds, "versions": env.versions,
            "io_disk": env.io_disk.trim(),
            "runs": runs, "gru_stats": gru_stats,
        });
        std::fs::write(dir.join("runs.json"), serde_json::to_string_pretty(&json)?)?;
        let copy = |name: &str| std::fs::copy(outcome.out_dir.join(name), dir.join(name));
        copy("runs.txt").context("copying runs.txt")?;
        if !dmesg.is_empty() {
            std::fs::write(dir.join("dmesg.txt"), &dmesg)?;
        }
        println!("written to {}", dir.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::Sysbench;

    #[test]
    fn cells_are_dashes_without_values() {
        assert_eq!(ratio(Some(1.0), Some(4.0)), "0.25");
        assert_eq!(ratio(Some(1.0), Some(0.0)), "-");
        assert_eq!(ratio(None, Some(1.0)), "-");
        assert_eq!(fmt(Some(2.345), 1), "2.3");
        assert_eq!(fmt(None, 1), "-");
    }

    #[test]
    fn the_mixed_load_is_one_row_of_the_per_load_tables() {
        let loads: Vec<&str> = per_load_rows().map(|(_, load)| load).collect();
        assert_eq!(loads, ["cpu1", "cpu8", "io", "io8", "mixed", "hackbench"]);
        assert!(per_load_rows().any(|(row, load)| (row, load) == ("mixed-cpu", "mixed")));
    }

    #[test]
    fn the_instruments_tables_appear_only_with_their_flags() {
        let run = |scheduler: &str| Run {
            scheduler: scheduler.into(),
            round: 1,
            row: "cpu1".into(),
            wall_s: 10.0,
            sysbench: Some(Sysbench {
                events_per_s: 100.0,
                ..Sysbench::default()
            }),
            ..Run::default()
        };
        let runs = vec![run("eevdf"), run("bpfland")];
        let args = Args {
            schedulers: vec!["eevdf".into(), "bpfland".into()],
            ..Args::default()
        };
        let plain = tables(&args, &runs);
        assert!(plain.starts_with("| load | scheduler | events/s (range) |"));
        assert!(
            plain.contains("| cpu1 | bpfland | 1.00 | - | - | 1.00 |"),
            "{plain}"
        );
        for absent in [
            "scx_gru's queue waits",
            "Run-queue waits",
            "Local timer interrupts",
            "Wakeup-to-run",
            "BPF programs",
            "by symbol",
            "paired with the policy without a model",
        ] {
            assert!(!plain.contains(absent), "{absent}");
        }
        let all = tables(
            &Args {
                wakeup_latency: true,
                bpf_prog_stats: true,
                profile_scheduler: true,
                ..args
            },
            &runs,
        );
        for present in ["Wakeup-to-run", "BPF programs", "by symbol"] {
            assert!(all.contains(present), "{present}");
        }
    }
}
