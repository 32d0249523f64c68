//! The text around the tables: `table.md`'s header (the command line, qemu, the guest's
//! versions, the I/O disk), the caveat for the mixed load under single-threaded TCG, and the
//! printed summaries of the guest's kernel log and of scx_gru's stats files.

use crate::args::Args;
use crate::parse::gru_stat;

/// What the report says about where the runs ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Environment {
    /// The guest's `versions.txt` (perf, sysbench, kernel; one a line).
    pub versions: String,
    /// The guest's `io-disk.txt` ([`describe_io_disk`]).
    pub io_disk: String,
    /// qemu's `-accel` (with `-icount` when counting instructions).
    pub accel: String,
    /// qemu's version.
    pub qemu: String,
    /// The cargo profile of scx_gru.
    pub profile: &'static str,
}

/// The report's words for the guest's `io-disk.txt` (`virtio`, or `timer DEV US us
/// [none] mq-deadline`); runs before the file existed used the virtio disk.
pub fn describe_io_disk(io_disk: &str) -> String {
    let words: Vec<&str> = io_disk.split_whitespace().collect();
    match words.as_slice() {
        ["timer", dev, us, "us", sched @ ..] => format!(
            "the timer disk ({dev}: RAM-backed null_blk, every I/O completes {us} µs after \
             submission on a guest timer; I/O scheduler {}), ext4",
            sched.join(" ")
        ),
        _ => "the root filesystem's virtio-blk disk (a file on the host), ext4".to_owned(),
    }
}

/// A warning for the report when the emulation scores where a load's threads sit rather than
/// how they are scheduled: the mixed load under single-threaded TCG (the lab's default, and
/// the only mode of `-icount`). Its vCPUs run in turn from vCPU 0, whose interrupts are taken
/// first: an I/O thread beside a hog did 4.7× fewer I/Os on vCPU 1 than on vCPU 0 under
/// instruction counting, the same on either under MTTCG
/// (`results/2026-11-27-lab-vcpu0-takes-interrupts-first/`).
pub fn accel_caveat(accel: &str, loads: &[String]) -> Option<String> {
    let single_threaded = accel.starts_with("tcg") && !accel.contains("thread=multi");
    (single_threaded && loads.iter().any(|l| l == "mixed")).then(|| {
        format!(
            "**Caveat: the mixed load under single-threaded TCG (`-accel {accel}`).** The vCPUs \
             run in turn from vCPU 0, which takes its interrupts first, so the I/O part depends \
             on which vCPU holds the I/O threads (results/2026-11-27-lab-vcpu0-takes-interrupts-first/): \
             read the parts' ratios as placement, compare the load by its \"mixed (both parts)\" \
             row, or run it with {}=multi (equal vCPUs, real-time scatter).",
            asa_lab::vm::TCG_THREAD_ENV
        )
    })
}

/// The command line that reproduces the run, as `table.md` quotes it.
fn command_line(args: &Args) -> String {
    let flags: String = [
        (args.bpf_prog_stats, " --bpf-prog-stats"),
        (args.wakeup_latency, " --wakeup-latency"),
        (args.profile_scheduler, " --profile-scheduler"),
        (args.thread_samples, " --thread-samples"),
        (args.no_thp, " --no-thp"),
    ]
    .iter()
    .filter(|(on, _)| *on)
    .map(|(_, flag)| *flag)
    .collect();
    format!(
        "cargo run -p asa-lab --bin asa-gru-compare -- --rounds {} --seconds {} \
         --schedulers {}{}{}{}",
        args.rounds,
        args.seconds,
        args.schedulers.join(","),
        if args.some_loads() {
            format!(" --loads {}", args.loads.join(","))
        } else {
            String::new()
        },
        flags,
        args.io_timer_disk_us
            .map(|us| format!(" --io-timer-disk {us}"))
            .unwrap_or_default(),
    )
}

/// `table.md`: a header naming the run's command line and environment, then `tables`.
pub fn markdown(args: &Args, env: &Environment, tables: &str) -> String {
    let caveat = accel_caveat(&env.accel, &args.loads);
    format!(
        "# asa-gru-compare: {} (lab VM)\n\n\
         `{}`; medians over {} rounds (order rotated per round), ratios to EEVDF. \
         qemu {} `-accel {}`, 2 vCPUs, 2 GiB. scx_gru: {} build.\n\nGuest: {}\n\nI/O loads' disk: \
         {}\n\n{}{tables}",
        args.schedulers.join(" vs "),
        command_line(args),
        args.rounds,
        env.qemu,
        env.accel,
        env.profile,
        env.versions.lines().collect::<Vec<_>>().join(", "),
        describe_io_disk(&env.io_disk),
        caveat.map(|c| format!("{c}\n\n")).unwrap_or_default()
    )
}

/// The guest kernel log's size and its lines about timeouts, resets and hung tasks (a load
/// that stalls may leave a device or hung-task message), one per line after a summary line.
pub fn kernel_log_summary(dmesg: &str) -> String {
    let notable: Vec<&str> = dmesg
        .lines()
        .filter(|l| {
            let l = l.to_ascii_lowercase();
            [
                "timeout",
                "timed out",
                "blocked for more than",
                "reset",
                "abort",
            ]
            .iter()
            .any(|w| l.contains(w))
        })
        .collect();
    let mut out = format!(
        "guest kernel log: {} lines, {} about timeouts/resets/hung tasks\n",
        dmesg.lines().count(),
        notable.len()
    );
    for l in &notable {
        out.push_str(&format!("  {l}\n"));
    }
    out
}

/// One line of scx_gru's counters from its stats file `v` (`asa.gru-stats`, v2 or v1: see
/// [`gru_stat`]) of variant and round `key`.
pub fn gru_stats_line(key: &str, v: &serde_json::Value) -> String {
    let s = |name: &str| gru_stat(v, name);
    format!(
        "{key}: mode {} predictions_applied {} fallbacks {} (prev_idle {}) select_no_idle {} wakeup_preempts {} (pinned {}, by timer {} of {} deferred) events {} (not sent: fresh {} gap {}) wakeups {} inferences {} (tasks {}) over_budget {} paused {} in {} + {} pauses moved {} ringbuf_drops {} inference p50/p99 {} / {} us",
        s("mode"), s("nr_pred_applied"), s("fallbacks"), s("nr_pred_prev_idle"),
        s("nr_select_no_idle"),
        s("nr_wakeup_preempts"),
        s("nr_pinned_preempts"),
        s("nr_timer_preempts"),
        s("nr_deferred_preempts"),
        s("nr_events"), s("nr_events_fresh"), s("nr_events_gap"),
        s("nr_ringbuf_wakeups"), s("inferences"), s("tasks_predicted"),
        s("inferences_over_budget"), s("inferences_paused"),
        s("inference_pauses"), s("inference_pauses_redundant"),
        s("nr_pred_moved"), s("nr_ringbuf_drops"),
        s("inference_us_p50"), s("inference_us_p99")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(accel: &str) -> Environment {
        Environment {
            versions: "perf version 6.1\nsysbench 1.0.20\n6.12\n".into(),
            io_disk: "virtio\n".into(),
            accel: accel.into(),
            qemu: "10.0.2".into(),
            profile: "release",
        }
    }

    #[test]
    fn the_report_names_the_io_disk() {
        let timer = describe_io_disk("timer /dev/asa0 100 us [none] mq-deadline\n");
        assert!(
            timer.contains("/dev/asa0") && timer.contains("100 µs") && timer.contains("[none]"),
            "{timer}"
        );
        // Runs from before the file, and the virtio disk.
        assert!(describe_io_disk("").contains("virtio-blk"));
        assert!(describe_io_disk("virtio\n").contains("virtio-blk"));
    }

    #[test]
    fn the_mixed_load_under_single_threaded_tcg_gets_a_caveat() {
        let loads = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let icount = "tcg,thread=single -icount shift=2,sleep=off";
        let caveat = accel_caveat(icount, &loads(&["cpu1", "mixed"])).expect("a caveat");
        assert!(
            caveat.contains(icount) && caveat.contains("=multi"),
            "{caveat}"
        );
        assert!(accel_caveat(asa_lab::vm::DEFAULT_TCG_ACCEL, &loads(&["mixed"])).is_some());
        assert_eq!(accel_caveat("tcg,thread=multi", &loads(&["mixed"])), None);
        assert_eq!(accel_caveat("kvm", &loads(&["mixed"])), None, "not TCG");
        assert_eq!(
            accel_caveat(icount, &loads(&["cpu1", "io8", "hackbench"])),
            None
        );
    }

    #[test]
    fn the_header_quotes_a_command_line_that_reproduces_the_run() {
        let args = Args {
            rounds: 60,
            schedulers: vec!["eevdf".into(), "gru".into()],
            loads: vec!["mixed".into()],
            no_thp: true,
            bpf_prog_stats: true,
            io_timer_disk_us: Some(100),
            ..Args::default()
        };
        let md = markdown(&args, &env("tcg,thread=multi"), "TABLES");
        assert!(md.starts_with(
            "# asa-gru-compare: eevdf vs gru (lab VM)\n\n`cargo run -p asa-lab --bin \
             asa-gru-compare -- --rounds 60 --seconds 10 --schedulers eevdf,gru --loads mixed \
             --bpf-prog-stats --no-thp --io-timer-disk 100`; medians over 60 rounds"
        ));
        assert!(md.contains(
            "qemu 10.0.2 `-accel tcg,thread=multi`, 2 vCPUs, 2 GiB. scx_gru: release build."
        ));
        assert!(md.contains("\n\nGuest: perf version 6.1, sysbench 1.0.20, 6.12\n\n"));
        assert!(md.ends_with("virtio-blk disk (a file on the host), ext4\n\nTABLES"));
        // Every load: no --loads; single-threaded TCG with the mixed load: the caveat first.
        let all = markdown(&Args::default(), &env("tcg,thread=single"), "TABLES");
        assert!(!all.contains("--loads"));
        assert!(all.contains("ext4\n\n**Caveat: the mixed load"));
    }

    #[test]
    fn the_kernel_log_summary_lists_timeouts_resets_and_hung_tasks() {
        let dmesg = "[1] ok\n[2] nvme nvme0: I/O 5 QID 1 timeout, aborting\n\
                     [3] INFO: task jbd2 blocked for more than 120 seconds.\n[4] fine\n";
        assert_eq!(
            kernel_log_summary(dmesg),
            "guest kernel log: 4 lines, 2 about timeouts/resets/hung tasks\n\
             \x20 [2] nvme nvme0: I/O 5 QID 1 timeout, aborting\n\
             \x20 [3] INFO: task jbd2 blocked for more than 120 seconds.\n"
        );
        assert_eq!(
            kernel_log_summary(""),
            "guest kernel log: 0 lines, 0 about timeouts/resets/hung tasks\n"
        );
    }

    #[test]
    fn a_stats_line_shows_missing_counters_as_null() {
        let v = serde_json::json!({"mode": "model", "bpf": {"nr_events": 7}, "user": {}});
        let line = gru_stats_line("gru-1", &v);
        assert!(
            line.starts_with("gru-1: mode \"model\" predictions_applied null"),
            "{line}"
        );
        assert!(line.contains(" events 7 (not sent: fresh null"), "{line}");
    }

    #[test]
    fn a_stats_line_reads_flat_and_sectioned_stats_files() {
        let v2 = serde_json::json!({"schema": "asa.gru-stats", "version": 2, "mode": "model",
            "nr_pred_applied": 5, "nr_ringbuf_drops": 1, "inferences": 3,
            "inference_us_p99": 40.5});
        let v1 = serde_json::json!({"schema": "asa.gru-stats", "version": 1, "mode": "model",
            "predictions_applied": 5, "ringbuf_drops": 1,
            "bpf": {"nr_pred_applied": 5, "nr_ringbuf_drops": 1},
            "user": {"inferences": 3, "inference_us_p99": 40.5}});
        for v in [v2, v1] {
            let line = gru_stats_line("gru-1", &v);
            assert!(
                line.starts_with("gru-1: mode \"model\" predictions_applied 5 fallbacks null"),
                "{line}"
            );
            assert!(line.contains(" inferences 3 (tasks null)"), "{line}");
            assert!(
                line.contains(" ringbuf_drops 1 inference p50/p99 null / 40.5 us"),
                "{line}"
            );
        }
    }
}
