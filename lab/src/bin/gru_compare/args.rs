//! The bench's command line: which schedulers and loads, how long, and the optional
//! instruments (each of which makes a profiling run rather than a throughput one).

use std::path::PathBuf;

use anyhow::{ensure, Result};
use clap::{ArgAction, Parser};

use crate::variants;

/// The loads of the guest script, in the order it runs them.
pub const LOADS: [&str; 6] = ["cpu1", "cpu8", "io", "io8", "mixed", "hackbench"];

/// Compares schedulers on sysbench, hackbench and perf loads in one lab VM run, with ratios to
/// EEVDF (lab/src/bin/gru_compare/main.rs describes the loads and the tables).
#[derive(Debug, Clone, PartialEq, Eq, Parser)]
#[command(
    name = "asa-gru-compare",
    args_override_self = true,
    after_long_help = variants::help()
)]
pub struct Args {
    /// Rounds; each runs every scheduler once, the order rotated per round.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub rounds: u32,
    /// Seconds of each load.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub seconds: u32,
    /// Write table.md, runs.json, runs.txt and dmesg.txt to DIR (default: print only).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Schedulers, comma-separated, eevdf first (the baseline of every ratio): eevdf, gru,
    /// bpfland, floor, or scx_gru variants gru-NAME[+NAME...] (listed below with --help).
    #[arg(
        long,
        value_delimiter = ',',
        action = ArgAction::Set,
        default_value = "eevdf,gru,gru-fallback,bpfland"
    )]
    pub schedulers: Vec<String>,
    /// Loads to run, comma-separated, of cpu1, cpu8, io, io8, mixed, hackbench.
    #[arg(
        long,
        value_delimiter = ',',
        action = ArgAction::Set,
        default_value = "cpu1,cpu8,io,io8,mixed,hackbench"
    )]
    pub loads: Vec<String>,
    /// Record every BPF program's run time (kernel.bpf_stats_enabled: two clock reads per
    /// program run) and add the struct_ops programs' table. Off by default.
    #[arg(long)]
    pub bpf_prog_stats: bool,
    /// Record every task's wakeup-to-run latency with `asa record` around every load and add
    /// its table. Off by default.
    #[arg(long)]
    pub wakeup_latency: bool,
    /// Profile the scheduler's user-space process with `perf record` during every load and add
    /// a table by symbol. Off by default.
    #[arg(long)]
    pub profile_scheduler: bool,
    /// Sample every sysbench thread's last CPU and schedstat every 0.5 s during every load into
    /// the guest's thr-SCHED-ROUND-LOAD.txt (read by `python -m asa_analysis.thread_samples`;
    /// costs io8 about 8 %). Off by default.
    #[arg(long)]
    pub thread_samples: bool,
    /// Turn transparent huge pages off in the guest (`never`), so khugepaged has nothing to
    /// collapse. Off by default.
    #[arg(long)]
    pub no_thp: bool,
    /// Report on the guest out folder of an earlier run (the lab keeps it in
    /// ~/.cache/asa/lab/runs/gru-compare-PID/out) instead of running the VM; give that run's
    /// --schedulers, --rounds and instrument flags; --loads may pick some of its loads.
    #[arg(long, value_name = "GUEST_OUT_DIR")]
    pub from_out: Option<PathBuf>,
    /// Put the I/O loads' files on the lab's timer disk (RAM-backed null_blk, every I/O
    /// completing US µs after submission on a guest timer) instead of the root filesystem's
    /// virtio disk (the default).
    #[arg(long = "io-timer-disk", value_name = "US")]
    pub io_timer_disk_us: Option<u32>,
}

impl Default for Args {
    /// The defaults of the command line.
    fn default() -> Self {
        Self::parse_from(["asa-gru-compare"])
    }
}

impl Args {
    /// The checks clap does not make: known schedulers, eevdf first, known loads.
    pub fn check(&self) -> Result<()> {
        for s in &self.schedulers {
            ensure!(
                variants::known_scheduler(s),
                "unknown scheduler {s:?} (known: {}, N a number; scx_gru variants combine \
                 with +, e.g. gru-wakebal2+burst8)",
                variants::known_names()
            );
        }
        for l in &self.loads {
            ensure!(
                LOADS.contains(&l.as_str()),
                "unknown load {l:?} (known: {})",
                LOADS.join(", ")
            );
        }
        ensure!(!self.loads.is_empty(), "--loads needs at least one load");
        ensure!(
            self.schedulers.first().map(String::as_str) == Some("eevdf"),
            "--schedulers must start with eevdf (the baseline of every ratio)"
        );
        Ok(())
    }

    /// Whether `--loads` left some load out.
    pub fn some_loads(&self) -> bool {
        self.loads.len() < LOADS.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args> {
        let args =
            Args::try_parse_from(std::iter::once("asa-gru-compare").chain(args.iter().copied()))?;
        args.check()?;
        Ok(args)
    }

    #[test]
    fn defaults_are_three_rounds_of_ten_seconds_every_load_four_schedulers() {
        let args = Args::default();
        assert_eq!((args.rounds, args.seconds), (3, 10));
        assert_eq!(args.schedulers, ["eevdf", "gru", "gru-fallback", "bpfland"]);
        assert_eq!(args.loads, LOADS);
        assert!(!args.some_loads());
        assert!(!(args.bpf_prog_stats || args.wakeup_latency || args.profile_scheduler));
        assert!(!(args.thread_samples || args.no_thp));
        args.check().unwrap();
        assert_eq!(
            (args.out, args.from_out, args.io_timer_disk_us),
            (None, None, None)
        );
    }

    #[test]
    fn every_flag_parses_to_its_field() {
        let args = parse(&[
            "--rounds",
            "60",
            "--seconds",
            "5",
            "--out",
            "dir",
            "--schedulers",
            "eevdf,gru-wakebal2+burst8",
            "--loads",
            "mixed,io",
            "--bpf-prog-stats",
            "--wakeup-latency",
            "--profile-scheduler",
            "--thread-samples",
            "--no-thp",
            "--from-out",
            "guest",
            "--io-timer-disk",
            "100",
        ])
        .unwrap();
        assert_eq!((args.rounds, args.seconds), (60, 5));
        assert_eq!(args.out, Some(PathBuf::from("dir")));
        assert_eq!(args.schedulers, ["eevdf", "gru-wakebal2+burst8"]);
        assert_eq!(args.loads, ["mixed", "io"]);
        assert!(args.some_loads());
        assert!(args.bpf_prog_stats && args.wakeup_latency && args.profile_scheduler);
        assert!(args.thread_samples && args.no_thp);
        assert_eq!(args.from_out, Some(PathBuf::from("guest")));
        assert_eq!(args.io_timer_disk_us, Some(100));
    }

    #[test]
    fn a_repeated_option_takes_its_last_value() {
        let args = parse(&[
            "--rounds",
            "2",
            "--rounds",
            "4",
            "--loads",
            "io,io8",
            "--loads",
            "cpu1",
            "--schedulers",
            "eevdf,gru",
            "--schedulers",
            "eevdf,floor",
            "--no-thp",
            "--no-thp",
        ])
        .unwrap();
        assert_eq!((args.rounds, args.loads), (4, vec!["cpu1".to_string()]));
        assert_eq!(args.schedulers, ["eevdf", "floor"]);
    }

    #[test]
    fn bad_arguments_are_errors() {
        for bad in [
            &["--rounds", "0"][..],
            &["--seconds", "0"],
            &["--rounds", "x"],
            &["--schedulers", "gru,eevdf"],
            &["--schedulers", "eevdf,cfs"],
            &["--loads", "io9"],
            &["--loads", ""],
            &["--io-timer-disk", "-1"],
            &["--frobnicate"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
