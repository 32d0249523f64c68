//! The run records: one [`Run`] per scheduler, round and row (the mixed load gives two rows),
//! read from the guest out folder ([`collect`]) and saved in `runs.json`.

use std::collections::BTreeMap;

use anyhow::{bail, ensure, Context, Result};
use asa_lab::VmOutcome;
use serde::{Deserialize, Serialize};

use crate::args::Args;
use crate::latency::{self, WakeLatency};
use crate::parse::{self, BpfOp, Sysbench, Waits};
use crate::profile;
use crate::schedstat::LoadDelays;

/// Rows of the tables: the mixed load has a CPU part and an I/O part.
pub const ROWS: [&str; 7] = [
    "cpu1",
    "cpu8",
    "io",
    "io8",
    "mixed-cpu",
    "mixed-io",
    "hackbench",
];

/// Measurements of one scheduler, one round, one row.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Run {
    pub scheduler: String,
    pub round: u32,
    pub row: String,
    pub sysbench: Option<Sysbench>,
    /// hackbench's own time, s.
    pub hackbench_s: Option<f64>,
    pub context_switches: Option<f64>,
    pub migrations: Option<f64>,
    pub wall_s: f64,
    /// CPU time of the scheduler's user-space process during the load, s (None under EEVDF).
    pub sched_cpu_s: Option<f64>,
    /// With `--bpf-prog-stats`: the scheduler's struct_ops programs during the load, by name.
    pub bpf_ops: BTreeMap<String, BpfOp>,
    /// With `--profile-scheduler`: perf samples of the scheduler's process during the load, by
    /// "shared object: symbol".
    pub profile: BTreeMap<String, u64>,
    /// scx_gru's queue waits during the load (None for other schedulers).
    pub waits: Option<Waits>,
    /// Run-queue waits of every task and of the kernel threads, from the kernel's schedstat
    /// (any scheduler; None when a snapshot is missing).
    pub delays: Option<LoadDelays>,
    /// With `--wakeup-latency`: every task's wakeup-to-run latency during the load.
    pub wake: Option<WakeLatency>,
}

impl Run {
    /// events/s for sysbench rows, runs per second (1 / time) for hackbench.
    pub fn throughput(&self) -> Option<f64> {
        self.sysbench
            .map(|s| s.events_per_s)
            .or(self.hackbench_s.filter(|t| *t > 0.0).map(|t| 1.0 / t))
    }
    /// The scheduler process's CPU time as a percentage of one CPU over the load's wall time.
    pub fn sched_cpu_pct(&self) -> Option<f64> {
        self.per_s(self.sched_cpu_s).map(|v| v * 100.0)
    }
    /// The time in the scheduler's BPF programs as a percentage of one CPU over the load.
    pub fn bpf_cpu_pct(&self) -> Option<f64> {
        let ns: u64 = self.bpf_ops.values().map(|op| op.ns).sum();
        (!self.bpf_ops.is_empty())
            .then(|| self.per_s(Some(ns as f64 / 1e9)))
            .flatten()
            .map(|v| v * 100.0)
    }
    /// Context switches per completed event, for a load that is one sysbench run (the mixed
    /// load's switches belong to both of its parts): on an I/O load a scheduler that runs
    /// fewer I/Os also switches less per second, not per I/O.
    pub fn cs_per_event(&self) -> Option<f64> {
        let events_per_s = self.sysbench?.events_per_s;
        (!self.row.starts_with("mixed") && events_per_s > 0.0)
            .then(|| self.per_s(self.context_switches))
            .flatten()
            .map(|cs| cs / events_per_s)
    }
    /// `v` per second of the load's wall time.
    pub fn per_s(&self, v: Option<f64>) -> Option<f64> {
        v.filter(|_| self.wall_s > 0.0).map(|v| v / self.wall_s)
    }
}

/// The two snapshots `PREFIX-SCHED-ROUND-LOAD-{0,1}.EXT` the guest took before and after a
/// load, or None with a warning that the load's `what` is left out: the load's own numbers
/// stand (a stats-file copy can go missing; older out folders lack newer snapshots).
fn snapshot_pair(
    outcome: &VmOutcome,
    [sched, round, load]: [&str; 3],
    prefix: &str,
    ext: &str,
    what: &str,
) -> Option<(String, String)> {
    let snap = |i: u32| outcome.read_out(&format!("{prefix}-{sched}-{round}-{load}-{i}.{ext}"));
    match (snap(0), snap(1)) {
        (Ok(before), Ok(after)) => Some((before, after)),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("warning: {sched}/{round}/{load}: no {what}: {e:#}");
            None
        }
    }
}

/// Checks a `# start|end SCHED ROUND STATE [OPS]` line of `runs.txt`: sched_ext disabled under
/// EEVDF, enabled with the scheduler's ops otherwise.
fn check_state_line(line: &str, rest: &str) -> Result<()> {
    let g: Vec<&str> = rest.split_whitespace().collect();
    ensure!(g.len() >= 4, "bad runs.txt line {line:?}");
    let (sched, state) = (g[1], g[3]);
    let want = if sched == "eevdf" {
        "disabled"
    } else {
        "enabled"
    };
    ensure!(
        state == want,
        "{sched} round {}: sched_ext was {state} at {} of its loads (want {want}): {line:?}",
        g[2],
        g[0]
    );
    if sched != "eevdf" {
        let prefix = match sched {
            "bpfland" | "floor" => sched,
            _ => "gru",
        };
        ensure!(
            g.get(4).is_some_and(|ops| ops.starts_with(prefix)),
            "{sched}: ops is not {prefix}: {line:?}"
        );
    }
    Ok(())
}

/// Read every measured run; fails on a failed load or a scheduler that was not attached for
/// the whole of its loads.
pub fn collect(outcome: &VmOutcome, args: &Args) -> Result<Vec<Run>> {
    let runs_txt = outcome.read_out("runs.txt")?;
    let clk_tck: f64 = outcome
        .read_out("clk_tck.txt")?
        .trim()
        .parse()
        .context("clk_tck.txt")?;
    let mut runs = Vec::new();
    for line in runs_txt.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if let Some(rest) = line.strip_prefix("# ") {
            check_state_line(line, rest)?;
            println!("{line}");
            continue;
        }
        ensure!(f.len() == 8, "bad runs.txt line {line:?}");
        let (sched, round, load, rc) = (f[0], f[1], f[2], f[3]);
        let file = |name: &str| outcome.read_out(&format!("load-{sched}-{round}-{name}.txt"));
        if rc != "0" {
            bail!(
                "{sched}/{round}/{load} failed with status {rc}: {}",
                file(load)?
            );
        }
        // (With --from-out, --loads picks some of the loads the run measured.)
        if sched == "warmup" || !args.loads.iter().any(|l| l == load) {
            continue;
        }
        let perf = outcome.read_out(&format!("perf-{sched}-{round}-{load}.txt"))?;
        let snapshots = |prefix: &str, ext: &str, what: &str| {
            snapshot_pair(outcome, [sched, round, load], prefix, ext, what)
        };
        let waits = if sched.starts_with("gru") {
            snapshots("st", "json", "queue waits")
                .map(|(before, after)| {
                    Waits::between(&before, &after)
                        .with_context(|| format!("{sched}/{round}/{load}: scx_gru's queue waits"))
                })
                .transpose()?
        } else {
            None
        };
        // (A guest out folder from before the schedstat snapshots, read with --from-out, has none.)
        let delays = snapshots("ss", "txt", "run-queue waits")
            .map(|(before, after)| {
                LoadDelays::between(&before, &after)
                    .with_context(|| format!("{sched}/{round}/{load}: schedstat"))
            })
            .transpose()?;
        let wake = if args.wakeup_latency {
            let (start, end) =
                latency::span(&outcome.read_out(&format!("lat-{sched}-{round}-{load}.span"))?)?;
            let csv = outcome.read_out(&format!("lat-{sched}-{round}-{load}.csv"))?;
            Some(
                latency::from_record(&csv, start, end)
                    .with_context(|| format!("{sched}/{round}/{load}: wakeup latency"))?,
            )
        } else {
            None
        };
        let bpf_ops = if args.bpf_prog_stats {
            let dump = |i: u32| outcome.read_out(&format!("bpf-{sched}-{round}-{load}-{i}.json"));
            parse::bpf_op_deltas(&dump(0)?, &dump(1)?)
                .with_context(|| format!("{sched}/{round}/{load}: BPF program stats"))?
        } else {
            BTreeMap::new()
        };
        let profile = if args.profile_scheduler && sched != "eevdf" {
            let report = outcome.read_out(&format!("prof-{sched}-{round}-{load}.txt"))?;
            profile::parse_report(&report)
                .with_context(|| format!("{sched}/{round}/{load}: perf report"))?
        } else {
            BTreeMap::new()
        };
        let base = Run {
            scheduler: sched.to_owned(),
            round: round.parse()?,
            context_switches: parse::perf_counter(&perf, "context-switches"),
            migrations: parse::perf_counter(&perf, "cpu-migrations"),
            wall_s: f[5].parse::<f64>()? - f[4].parse::<f64>()?,
            sched_cpu_s: (sched != "eevdf")
                .then(|| -> Result<f64> {
                    Ok((f[7].parse::<f64>()? - f[6].parse::<f64>()?) / clk_tck)
                })
                .transpose()?,
            bpf_ops,
            profile,
            waits,
            delays,
            wake,
            ..Run::default()
        };
        let parts: Vec<(&str, String)> = match load {
            "mixed" => vec![
                ("mixed-cpu", file("mixed-cpu")?),
                ("mixed-io", file("mixed-io")?),
            ],
            _ => vec![(load, file(load)?)],
        };
        for (row, text) in parts {
            let mut run = Run {
                row: row.to_owned(),
                ..base.clone()
            };
            if row == "hackbench" {
                run.hackbench_s = Some(
                    parse::hackbench(&text)
                        .with_context(|| format!("no hackbench time in {text:?}"))?,
                );
            } else {
                run.sysbench =
                    Some(parse::sysbench(&text).with_context(|| {
                        format!("{sched}/{row}: no sysbench report in {text:?}")
                    })?);
            }
            runs.push(run);
        }
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn context_switches_per_event_only_for_single_sysbench_loads() {
        let io = Run {
            row: "io".into(),
            sysbench: Some(Sysbench {
                events_per_s: 4000.0,
                ..Sysbench::default()
            }),
            context_switches: Some(84_000.0),
            wall_s: 10.0,
            ..Run::default()
        };
        // 8400 switches/s over 4000 I/Os/s.
        assert_eq!(io.cs_per_event(), Some(2.1));
        // The mixed load's switches belong to both parts; hackbench has no events.
        let mixed = Run {
            row: "mixed-io".into(),
            ..io.clone()
        };
        assert_eq!(mixed.cs_per_event(), None);
        let hackbench = Run {
            row: "hackbench".into(),
            sysbench: None,
            hackbench_s: Some(2.0),
            ..io.clone()
        };
        assert_eq!(hackbench.cs_per_event(), None);
        assert_eq!(hackbench.throughput(), Some(0.5));
        let no_perf = Run {
            context_switches: None,
            ..io
        };
        assert_eq!(no_perf.cs_per_event(), None);
    }

    #[test]
    fn bpf_cpu_is_the_struct_ops_time_over_the_wall_time() {
        let run = Run {
            wall_s: 2.0,
            bpf_ops: BTreeMap::from([
                ("a".to_string(), BpfOp { calls: 1, ns: 3000 }),
                ("b".to_string(), BpfOp { calls: 1, ns: 690 }),
            ]),
            sched_cpu_s: Some(0.5),
            ..Run::default()
        };
        // 3690 ns over 2 s.
        assert!((run.bpf_cpu_pct().unwrap() - 3690e-9 / 2.0 * 100.0).abs() < 1e-12);
        assert_eq!(run.sched_cpu_pct(), Some(25.0));
        assert!(Run::default().bpf_cpu_pct().is_none());
        assert!(Run::default().sched_cpu_pct().is_none());
    }

    #[test]
    fn state_lines_want_sched_ext_off_under_eevdf_and_the_scheduler_s_ops_otherwise() {
        let check = |line: &str| check_state_line(line, line.strip_prefix("# ").unwrap());
        assert!(check("# start eevdf 1 disabled").is_ok());
        assert!(check("# end gru-burst8 2 enabled gru_1.0").is_ok());
        assert!(check("# start floor 1 enabled floor").is_ok());
        assert!(check("# start eevdf 1 enabled gru").is_err());
        assert!(check("# end gru 1 disabled").is_err());
        assert!(check("# start bpfland 1 enabled gru").is_err());
        assert!(check("# start gru 1").is_err());
    }

    /// A guest out folder with one EEVDF and one scx_gru mixed run and the warm-up.
    #[test]
    fn collect_reads_an_out_folder() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
        let sysbench = |events: u32| {
            format!(
                "    total time:  10.0s\n    total number of events:  {events}\n\
                 Latency (ms):\n  avg: 1.00\n  max: 9.0\n  95th percentile: 2.00\n"
            )
        };
        write("clk_tck.txt", "100\n");
        write(
            "runs.txt",
            "warmup 0 mixed 0 1.0 11.0 0 0\n\
             # start eevdf 1 disabled\neevdf 1 mixed 0 20.0 30.0 0 0\n# end eevdf 1 disabled\n\
             # start gru 1 enabled gru\ngru 1 mixed 0 40.0 50.5 100 150\n# end gru 1 enabled gru\n",
        );
        for s in ["eevdf", "gru"] {
            write(&format!("load-{s}-1-mixed-cpu.txt"), &sysbench(3000));
            write(&format!("load-{s}-1-mixed-io.txt"), &sysbench(40000));
            write(
                &format!("perf-{s}-1-mixed.txt"),
                "500,,context-switches,1,100.00,,\n7,,cpu-migrations,1,100.00,,\n",
            );
        }
        let outcome = VmOutcome {
            exit_code: 0,
            console: String::new(),
            out_dir: dir.path().to_owned(),
            boot_time: None,
            wall_time: Duration::ZERO,
        };
        let args = Args {
            loads: vec!["mixed".into()],
            ..Args::default()
        };
        let runs = collect(&outcome, &args).unwrap();
        let rows: Vec<(&str, &str)> = runs
            .iter()
            .map(|r| (r.scheduler.as_str(), r.row.as_str()))
            .collect();
        assert_eq!(
            rows,
            [
                ("eevdf", "mixed-cpu"),
                ("eevdf", "mixed-io"),
                ("gru", "mixed-cpu"),
                ("gru", "mixed-io")
            ]
        );
        let gru = &runs[3];
        assert_eq!(gru.wall_s, 10.5);
        assert_eq!(gru.sched_cpu_s, Some(0.5), "50 ticks at 100 per second");
        assert_eq!(gru.throughput(), Some(4000.0));
        assert_eq!(
            (gru.context_switches, gru.migrations),
            (Some(500.0), Some(7.0))
        );
        assert!(gru.waits.is_none() && gru.delays.is_none(), "no snapshots");
        assert_eq!(runs[0].sched_cpu_s, None);
        // --loads picks some of the measured loads.
        let none = collect(
            &outcome,
            &Args {
                loads: vec!["io".into()],
                ..Args::default()
            },
        )
        .unwrap();
        assert!(none.is_empty());
        // A failed load is an error.
        write("runs.txt", "eevdf 1 mixed 3 20.0 30.0 0 0\n");
        assert!(collect(&outcome, &args).is_err());
    }
}
