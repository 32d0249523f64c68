//! The guest script (`guest.sh`) with its placeholders filled from the arguments.
//!
//! Per load the script writes to `/lab/out`: the load's output `load-SCHED-ROUND-LOAD.txt`,
//! `perf stat`'s counters `perf-….txt`, snapshots before (`-0`) and after (`-1`) the load
//! (`ss-…` schedstat, `st-…` scx_gru's stats file, `bpf-…` bpftool, `lat-…` and `prof-…` for
//! the instruments), and a line `SCHED ROUND LOAD STATUS T0 T1 TICKS0 TICKS1` in `runs.txt`,
//! between `# start`/`# end` lines with sched_ext's state. `runs.rs` reads them.
//!
//! Placeholders: `__SECONDS__`, `__LOADS__`, `__BPF_STATS__`, `__THREADS__`, `__NO_THP__`
//! (0 or 1), `__IO_DISK__` (the I/O loads' folder), `__SCHEDSTAT__`, `__RECORD__`,
//! `__PROFILE__` (the instruments' shell functions), `__GRU_FLAGS__` (the variants' `case`
//! lines) and `__ROUNDS__` (every round's `start`/`loads`/`stop`).

use crate::args::Args;
use crate::{latency, profile, schedstat, variants};

/// The guest script with placeholders.
const SCRIPT: &str = include_str!("guest.sh");

/// "1" or "0", as the script's switches want them.
fn switch(on: bool) -> &'static str {
    if on {
        "1"
    } else {
        "0"
    }
}

/// The rounds: every scheduler once per round, the order rotated by one each round (round 1
/// starts with the first scheduler, eevdf).
fn rounds_shell(schedulers: &[String], rounds: u32) -> String {
    let mut body = String::new();
    for r in 1..=rounds {
        for i in 0..schedulers.len() {
            let s = &schedulers[(i + r as usize - 1) % schedulers.len()];
            body.push_str(&format!("start {s} {r}\nloads {s} {r}\nstop {s} {r}\n"));
        }
    }
    body
}

/// The guest script's lines that make `/root/sb`, the I/O loads' folder: on the root
/// filesystem's virtio disk, or with `Some(µs)` on a 512 MiB timer disk whose I/Os complete
/// after that many µs (`asa_lab::timer_disk`; exit 5 when the guest cannot make it), its
/// device and I/O scheduler written to `io-disk.txt`.
fn io_disk_shell(timer_us: Option<u32>) -> String {
    match timer_us {
        None => "mkdir -p /root/sb\necho virtio > $out/io-disk.txt".to_owned(),
        Some(us) => format!(
            "{}\ndev=$(timer_disk /root/sb {} 512) || exit 5\n\
             echo \"timer $dev {us} us $(cat /sys/block/${{dev#/dev/}}/queue/scheduler)\" \
             > $out/io-disk.txt",
            asa_lab::timer_disk::TIMER_DISK_SH,
            u64::from(us) * 1000
        ),
    }
}

/// The guest script for `args`' schedulers, rounds, seconds, loads and instruments.
pub fn script(args: &Args) -> String {
    SCRIPT
        .replace("__SECONDS__", &args.seconds.to_string())
        .replace("__LOADS__", &args.loads.join(" "))
        .replace("__IO_DISK__", &io_disk_shell(args.io_timer_disk_us))
        .replace("__BPF_STATS__", switch(args.bpf_prog_stats))
        .replace("__THREADS__", switch(args.thread_samples))
        .replace("__NO_THP__", switch(args.no_thp))
        .replace("__SCHEDSTAT__", schedstat::SNAPSHOT_SHELL)
        .replace(
            "__RECORD__",
            &latency::RECORD_SHELL.replace("__LAT__", switch(args.wakeup_latency)),
        )
        .replace(
            "__PROFILE__",
            &profile::PROFILE_SHELL.replace("__PROF__", switch(args.profile_scheduler)),
        )
        .replace("__GRU_FLAGS__", &variants::shell_cases())
        .replace("__ROUNDS__", &rounds_shell(&args.schedulers, args.rounds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::LOADS;

    #[test]
    fn every_switch_and_placeholder_is_filled() {
        let args = Args {
            rounds: 2,
            seconds: 5,
            ..Args::default()
        };
        let s = script(&args);
        assert!(s.contains("S=5\n"));
        assert!(s.contains("BPF_STATS=0\n"));
        let profiled = Args {
            bpf_prog_stats: true,
            ..Args::default()
        };
        assert!(script(&profiled).contains("BPF_STATS=1\n"));
        assert!(
            s.contains("PROF=0\n") && !s.contains("__"),
            "every placeholder filled"
        );
        let perf = Args {
            profile_scheduler: true,
            ..Args::default()
        };
        assert!(script(&perf).contains("PROF=1\n"));
        assert!(s.contains("LAT=0\n"));
        let latency = Args {
            wakeup_latency: true,
            ..Args::default()
        };
        assert!(script(&latency).contains("LAT=1\n"));
        assert!(s.contains("THREADS=0\n"));
        let sampled = Args {
            thread_samples: true,
            ..Args::default()
        };
        assert!(script(&sampled).contains("THREADS=1\n"));
        assert!(s.contains("if [ 0 = 1 ]; then\n  echo never"));
        let no_thp = Args {
            no_thp: true,
            ..Args::default()
        };
        assert!(script(&no_thp).contains("if [ 1 = 1 ]; then\n  echo never"));
        // The I/O loads' folder: on the root filesystem, or on a timer disk of 150 µs.
        assert!(s.contains("mkdir -p /root/sb\necho virtio > $out/io-disk.txt\ncd /root/sb\n"));
        let timer = script(&Args {
            io_timer_disk_us: Some(150),
            ..Args::default()
        });
        assert!(
            timer.contains("timer_disk() {")
                && timer.contains("dev=$(timer_disk /root/sb 150000 512) || exit 5\n")
                && !timer.contains("mkdir -p /root/sb\n")
                && !timer.contains("__"),
            "{timer}"
        );
    }

    #[test]
    fn rounds_rotate_the_order() {
        let s = script(&Args {
            rounds: 2,
            ..Args::default()
        });
        let starts: Vec<&str> = s.lines().filter(|l| l.starts_with("start ")).collect();
        assert_eq!(starts[0], "start eevdf 1");
        assert_eq!(starts[4], "start gru 2");
        assert_eq!(starts[7], "start eevdf 2");
        assert_eq!(starts.len(), 8);
    }

    /// The guest script's load filter, run by a real shell: `io` is not `io8`, every load
    /// by default.
    #[test]
    fn loads_filter_in_the_guest_shell() {
        let picked = |loads: &[&str]| -> Vec<String> {
            let script = script(&Args {
                loads: loads.iter().map(|l| l.to_string()).collect(),
                ..Args::default()
            });
            let filter: String = script
                .lines()
                .filter(|l| l.starts_with("LOADS=") || l.starts_with("want()"))
                .map(|l| format!("{l}\n"))
                .collect();
            let probe: String = LOADS
                .iter()
                .map(|l| format!("want {l} && echo {l}\n"))
                .collect();
            let out = std::process::Command::new("sh")
                .args(["-c", &format!("{filter}{probe}")])
                .output()
                .unwrap();
            String::from_utf8(out.stdout)
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect()
        };
        assert_eq!(picked(&["io"]), ["io"]);
        assert_eq!(picked(&["io8", "hackbench"]), ["io8", "hackbench"]);
        assert_eq!(picked(&LOADS), LOADS);
    }

    #[test]
    fn combined_variants_start_scx_gru_with_every_part_s_options() {
        let script = script(&Args {
            schedulers: vec!["eevdf".into()],
            ..Args::default()
        });
        let from = script.find("gru_flags() {").unwrap();
        let functions = &script[from..from + script[from..].find("\nstop() {").unwrap()];
        let out = std::env::temp_dir().join(format!("vm-compare-start-{}", std::process::id()));
        std::fs::create_dir_all(&out).unwrap();
        let start = |name: &str| {
            // The guest's `gru` and state helpers stubbed: print what scx_gru would be given.
            let shell = format!(
                "out={}\n{functions}\ngru() {{ echo \"$@\"; P=; }}\nstate() {{ :; }}\n\
                 start {name} 1",
                out.display()
            );
            let output = std::process::Command::new("sh")
                .arg("-c")
                .arg(&shell)
                .output()
                .unwrap();
            (
                output.status.success(),
                String::from_utf8_lossy(&output.stdout)
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" "),
            )
        };
        assert_eq!(start("gru"), (true, "gru 1".into()));
        assert_eq!(
            start("gru-burst8"),
            (true, "gru-burst8 1 --burst-cap-ms 8".into())
        );
        assert_eq!(
            start("gru-burst40"),
            (true, "gru-burst40 1 --burst-cap-ms 40".into())
        );
        assert_eq!(
            start("gru-wakebal2+burst8"),
            (
                true,
                "gru-wakebal2+burst8 1 --wake-balance 2 --burst-cap-ms 8".into()
            )
        );
        assert_eq!(
            start("gru-nowake+preempt0+fallback"),
            (
                true,
                "gru-nowake+preempt0+fallback 1 --no-wake-queues --preempt-min-run-us 0 --no-model"
                    .into()
            )
        );
        assert!(!start("gru-wakebal2+cfs").0, "an unknown part fails");
        std::fs::remove_dir_all(&out).unwrap();
    }

    /// Every variant's options, as the guest's `gru_flags` echoes them, are the table's.
    #[test]
    fn the_guest_gives_each_variant_the_table_s_options() {
        let script = script(&Args::default());
        let from = script.find("gru_flags() {").unwrap();
        let function = &script[from..from + script[from..].find("\nstart() {").unwrap()];
        for v in variants::VARIANTS {
            let (name, want) = match v.options {
                variants::Options::Fixed(options) => (format!("gru-{}", v.name), options.into()),
                variants::Options::Numbered(option) => {
                    (format!("gru-{}7", v.name), format!("{option} 7"))
                }
            };
            let out = std::process::Command::new("sh")
                .args(["-c", &format!("{function}\ngru_flags {name}")])
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), want, "{name}");
        }
    }
}
