//! Run-queue waits for every scheduler, from the kernel's own scheduling statistics
//! (`CONFIG_SCHED_INFO`): the thesis's `perf sched latency` totals (run time, number of times
//! tasks ran, weighted average wait) without tracing every switch, which under TCG would cost
//! more than the loads themselves.
//!
//! The kernel's core (not the scheduling class) keeps them: a task's wait starts when it is
//! enqueued on a run queue (woken, preempted, out of slice) and ends when it runs
//! (`sched_info_arrive`) or leaves the queue, so EEVDF and every sched_ext scheduler are
//! measured the same way. Per CPU, `/proc/schedstat` sums them for every task that ran there
//! (fields 7–9 of a `cpuN` line: run time ns, wait ns, time slices); per task,
//! `/proc/PID/task/TID/schedstat` has the same three numbers. A guest snapshot is
//! [`SNAPSHOT_SHELL`]'s output; two of them around a load give a [`LoadDelays`].
//!
//! The snapshot also has `/proc/interrupts`' `LOC:` line, each CPU's local timer interrupts:
//! the timer disk completes every I/O on a guest hrtimer of the CPU that submitted it, so
//! their difference shows where a load's I/O ran (under single-threaded TCG vCPU 1's timer
//! interrupts come late: `results/2026-11-27-lab-vcpu0-takes-interrupts-first/`).
//!
//! A task that exits during the load (the load's own threads, at its end) is in the per-CPU
//! totals but not in the per-task difference: the per-task part is kept to kernel threads,
//! which outlive the loads (the thesis's key tasks: kworker, ksoftirqd, khungtaskd, ...).

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// The guest shell function that writes a snapshot to the file `$1`: `/proc/schedstat`, the
/// local timer interrupts' line of `/proc/interrupts`, then every thread's `stat` and
/// `schedstat` as `PATH:LINE` (one grep; threads that end while it reads are skipped).
pub const SNAPSHOT_SHELL: &str = r#"schedstat() {
  { cat /proc/schedstat; grep '^ *LOC:' /proc/interrupts; echo "@@ tasks"
    grep -H '' /proc/[0-9]*/task/[0-9]*/stat /proc/[0-9]*/task/[0-9]*/schedstat 2>/dev/null
  } > $1
}"#;

/// The task flag of kernel threads (`PF_KTHREAD`, include/linux/sched.h).
const PF_KTHREAD: u64 = 0x0020_0000;

/// Run time, wait and time slices, summed over CPUs or tasks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delays {
    /// Time tasks ran, ns.
    pub run_ns: u64,
    /// Time tasks waited on a run queue before they ran, ns.
    pub wait_ns: u64,
    /// Times a task started running (time slices).
    pub slices: u64,
}

impl Delays {
    fn add(&mut self, other: Delays) {
        self.run_ns += other.run_ns;
        self.wait_ns += other.wait_ns;
        self.slices += other.slices;
    }
    fn since(self, before: Delays) -> Delays {
        Delays {
            run_ns: self.run_ns.saturating_sub(before.run_ns),
            wait_ns: self.wait_ns.saturating_sub(before.wait_ns),
            slices: self.slices.saturating_sub(before.slices),
        }
    }
    /// Mean wait per time slice, µs (the thesis's weighted average latency).
    pub fn mean_wait_us(&self) -> Option<f64> {
        crate::stats::mean_us(self.slices, self.wait_ns)
    }
}

/// One guest snapshot.
#[derive(Debug, Default)]
struct Snapshot {
    /// Summed over the CPUs of `/proc/schedstat`.
    cpus: Delays,
    /// The number of CPUs in `/proc/schedstat`.
    nr_cpus: u32,
    /// Kernel threads by tid: (group name, counters).
    kthreads: BTreeMap<u32, (String, Delays)>,
    /// Local timer interrupts by CPU (empty without a `LOC:` line).
    timer_irqs: Vec<u64>,
}

/// The waits of one load: every task (the CPUs' totals), and kernel threads, together and by
/// group (`kworker/u4:2-events` → `kworker`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)] // (runs.json of older guests lacks timer_irqs)
pub struct LoadDelays {
    /// Every task that ran during the load.
    pub all: Delays,
    /// Kernel threads (`PF_KTHREAD`) that existed at the end of the load.
    pub kthreads: Delays,
    /// Kernel threads by group.
    pub kthread_groups: BTreeMap<String, Delays>,
    /// The CPUs the run times are summed over.
    pub nr_cpus: u32,
    /// Local timer interrupts during the load, by CPU (empty when a snapshot has none, from
    /// an older guest, or the CPUs differ).
    pub timer_irqs: Vec<u64>,
}

impl LoadDelays {
    /// The difference of two snapshots ([`SNAPSHOT_SHELL`]'s files) taken before and after a
    /// load. A kernel thread that started during the load counts from zero.
    pub fn between(before: &str, after: &str) -> Result<Self> {
        let (before, after) = (parse(before)?, parse(after)?);
        let mut delays = LoadDelays {
            all: after.cpus.since(before.cpus),
            nr_cpus: after.nr_cpus,
            ..LoadDelays::default()
        };
        if before.timer_irqs.len() == after.timer_irqs.len() {
            delays.timer_irqs = (after.timer_irqs.iter().zip(&before.timer_irqs))
                .map(|(a, b)| a.saturating_sub(*b))
                .collect();
        }
        for (tid, (group, now)) in &after.kthreads {
            let start = before
                .kthreads
                .get(tid)
                .filter(|(g, _)| g == group)
                .map_or(Delays::default(), |(_, d)| *d);
            let d = now.since(start);
            delays.kthreads.add(d);
            delays
                .kthread_groups
                .entry(group.clone())
                .or_default()
                .add(d);
        }
        Ok(delays)
    }

    /// The share of the CPUs' time that tasks ran (not the idle task) over `wall_s` seconds,
    /// in percent: what a work-conserving scheduler keeps at 100 % while tasks wait. Interrupts
    /// are charged to the task they interrupt. None without CPUs or time.
    pub fn busy_pct(&self, wall_s: f64) -> Option<f64> {
        (self.nr_cpus > 0 && wall_s > 0.0)
            .then(|| self.all.run_ns as f64 / (wall_s * 1e9 * f64::from(self.nr_cpus)) * 100.0)
    }
}

/// The group of a kernel thread's name: up to the first `/` (`ksoftirqd/1`, `kworker/0:1H`),
/// else the name (`khungtaskd`, `rcu_preempt`).
fn group_of(comm: &str) -> &str {
    comm.split('/').next().unwrap_or(comm)
}

fn parse(text: &str) -> Result<Snapshot> {
    let (schedstat, tasks) = text
        .split_once("@@ tasks\n")
        .context("a schedstat snapshot has a '@@ tasks' line")?;
    let mut snap = Snapshot::default();
    if let Some(loc) = schedstat
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("LOC:"))
    {
        // "LOC:  12  34   Local timer interrupts": the counts, one per CPU, then the name.
        snap.timer_irqs = loc
            .split_whitespace()
            .map_while(|w| w.parse().ok())
            .collect();
    }
    let mut cpus = 0;
    for line in schedstat.lines().filter(|l| l.starts_with("cpu")) {
        let f: Vec<&str> = line.split_whitespace().collect();
        // cpuN yld 0 schedule goidle ttwu ttwu_local run_ns wait_ns slices
        if f.len() < 10 {
            bail!("a /proc/schedstat cpu line with fewer than 9 numbers: {line:?}");
        }
        let n = |i: usize| -> Result<u64> {
            f[i].parse()
                .with_context(|| format!("field {i} of {line:?}"))
        };
        snap.cpus.add(Delays {
            run_ns: n(7)?,
            wait_ns: n(8)?,
            slices: n(9)?,
        });
        cpus += 1;
    }
    if cpus == 0 {
        bail!("no cpu lines in the /proc/schedstat part of a snapshot");
    }
    snap.nr_cpus = cpus;
    // "/proc/P/task/T/stat:..." and ".../schedstat:..." lines, joined by tid.
    let mut stat: BTreeMap<u32, (String, bool)> = BTreeMap::new();
    let mut counters: BTreeMap<u32, Delays> = BTreeMap::new();
    for line in tasks.lines() {
        let Some((path, value)) = line.split_once(':') else {
            continue;
        };
        let mut parts = path.rsplit('/');
        let (Some(file), Some(tid)) = (parts.next(), parts.next()) else {
            continue;
        };
        let Ok(tid) = tid.parse::<u32>() else {
            continue;
        };
        match file {
            "stat" => {
                // "TID (COMM) STATE PPID PGRP SESSION TTY TPGID FLAGS ..."; COMM may hold
                // spaces and parentheses, so it ends at the last ')'.
                let (Some(open), Some(close)) = (value.find('('), value.rfind(')')) else {
                    continue;
                };
                let comm = &value[open + 1..close];
                let flags = value[close + 1..]
                    .split_whitespace()
                    .nth(6)
                    .and_then(|f| f.parse::<u64>().ok());
                if let Some(flags) = flags {
                    stat.insert(tid, (comm.to_owned(), flags & PF_KTHREAD != 0));
                }
            }
            "schedstat" => {
                let n: Vec<u64> = value
                    .split_whitespace()
                    .filter_map(|v| v.parse().ok())
                    .collect();
                if let [run_ns, wait_ns, slices] = n[..] {
                    counters.insert(
                        tid,
                        Delays {
                            run_ns,
                            wait_ns,
                            slices,
                        },
                    );
                }
            }
            _ => {}
        }
    }
    for (tid, (comm, kthread)) in stat {
        if let (true, Some(d)) = (kthread, counters.get(&tid)) {
            snap.kthreads.insert(tid, (group_of(&comm).to_owned(), *d));
        }
    }
    Ok(snap)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(cpu0: [u64; 3], cpu1: [u64; 3], tasks: &str) -> String {
        format!(
            "version 17\ntimestamp 4295\n\
             cpu0 0 0 100 40 0 0 {} {} {}\ndomain0 MC 3 0 0 0\n\
             cpu1 0 0 90 30 0 0 {} {} {}\n@@ tasks\n{tasks}",
            cpu0[0], cpu0[1], cpu0[2], cpu1[0], cpu1[1], cpu1[2]
        )
    }

    /// kworker 7 and ksoftirqd 9 are kernel threads (flags 0x208040 and 0x4208040), sysbench
    /// 300 is not (0x400040); kworker 8 starts during the load; a name with a space and a
    /// parenthesis is parsed up to the last ')'.
    #[test]
    fn load_delays_are_per_cpu_totals_and_kernel_thread_differences() {
        let before = snapshot(
            [1_000, 500, 10],
            [2_000, 700, 20],
            "/proc/7/task/7/stat:7 (kworker/0:1-events) I 2 0 0 0 -1 2129984 0 0\n\
             /proc/7/task/7/schedstat:5000 300 4\n\
             /proc/9/task/9/stat:9 (ksoftirqd/0) S 2 0 0 0 -1 69238848 0 0\n\
             /proc/9/task/9/schedstat:100 10 1\n\
             /proc/300/task/300/stat:300 (sysbench) R 1 300 1 0 -1 4194368 0 0\n\
             /proc/300/task/300/schedstat:9000000 80000 50\n",
        );
        let after = snapshot(
            [11_000, 4_500, 60],
            [2_500, 900, 30],
            "/proc/7/task/7/stat:7 (kworker/0:1-kblockd) I 2 0 0 0 -1 2129984 0 0\n\
             /proc/7/task/7/schedstat:6000 900 7\n\
             /proc/8/task/8/stat:8 (kworker/1:0) I 2 0 0 0 -1 2129984 0 0\n\
             /proc/8/task/8/schedstat:700 60 2\n\
             /proc/9/task/9/stat:9 (ksoftirqd/0) S 2 0 0 0 -1 69238848 0 0\n\
             /proc/9/task/9/schedstat:400 50 3\n\
             /proc/300/task/300/stat:300 (sysbench) R 1 300 1 0 -1 4194368 0 0\n\
             /proc/300/task/300/schedstat:19000000 90000 80\n\
             /proc/301/task/301/stat:301 (a (b) c) S 1 300 1 0 -1 4194368 0 0\n\
             /proc/301/task/301/schedstat:1 1 1\n",
        );
        let d = LoadDelays::between(&before, &after).unwrap();
        assert_eq!(
            d.all,
            Delays {
                run_ns: 10_500,
                wait_ns: 4_200,
                slices: 60
            }
        );
        assert_eq!(d.all.mean_wait_us(), Some(4_200.0 / 60.0 / 1e3));
        // Two CPUs: 10 500 ns of run time in 10 µs of wall time is 52.5 % of them.
        assert_eq!(d.nr_cpus, 2);
        let busy = d.busy_pct(10e-6).unwrap();
        assert!((busy - 52.5).abs() < 1e-9, "{busy}");
        assert_eq!(d.busy_pct(0.0), None);
        // kworker 7: +1000 run, +600 wait, +3; kworker 8 new: 700, 60, 2; ksoftirqd: 300, 40, 2.
        assert_eq!(
            d.kthread_groups["kworker"],
            Delays {
                run_ns: 1_700,
                wait_ns: 660,
                slices: 5
            }
        );
        assert_eq!(
            d.kthread_groups["ksoftirqd"],
            Delays {
                run_ns: 300,
                wait_ns: 40,
                slices: 2
            }
        );
        assert_eq!(d.kthread_groups.len(), 2, "{:?}", d.kthread_groups);
        assert_eq!(
            d.kthreads,
            Delays {
                run_ns: 2_000,
                wait_ns: 700,
                slices: 7
            }
        );
        assert_eq!(Delays::default().mean_wait_us(), None);
        assert!(d.timer_irqs.is_empty(), "no LOC lines: {:?}", d.timer_irqs);
    }

    #[test]
    fn local_timer_interrupts_by_cpu() {
        let with_loc = |cpu0: u64, cpu1: u64| {
            snapshot([1, 1, 1], [1, 1, 1], "").replace(
                "@@ tasks",
                &format!("LOC:  {cpu0}  {cpu1}   Local timer interrupts\n@@ tasks"),
            )
        };
        let d = LoadDelays::between(&with_loc(100, 7), &with_loc(2_600, 807)).unwrap();
        assert_eq!(d.timer_irqs, vec![2_500, 800]);
        // A snapshot without the line (older guests) gives none rather than wrong counts.
        let old = snapshot([1, 1, 1], [1, 1, 1], "");
        assert!(LoadDelays::between(&old, &with_loc(5, 5))
            .unwrap()
            .timer_irqs
            .is_empty());
    }

    #[test]
    fn a_broken_snapshot_is_an_error() {
        let tasks = "@@ tasks\n";
        assert!(LoadDelays::between("cpu0 1 2 3\n@@ tasks\n", tasks).is_err());
        assert!(LoadDelays::between("version 17\n", "version 17\n").is_err());
        let good = snapshot([1, 1, 1], [1, 1, 1], "");
        assert!(LoadDelays::between(&good, &format!("version 17\n{tasks}")).is_err());
        assert!(LoadDelays::between(&good, &good.replace("cpu1 0 0 90", "cpu1 x 0 90")).is_ok());
        assert!(
            LoadDelays::between(&good, &good.replace(" 1 1 1\n@@ tasks", " 1 z 1\n@@ tasks"))
                .is_err()
        );
    }

    #[test]
    fn groups_are_the_name_up_to_the_first_slash() {
        assert_eq!(group_of("kworker/u8:2-events_unbound"), "kworker");
        assert_eq!(group_of("migration/1"), "migration");
        assert_eq!(group_of("khungtaskd"), "khungtaskd");
    }
}
