//! Applications as units of perception: the threads of one task walk grouped into
//! applications, and each application's behaviour over the last interval as a feature vector
//! (schema [`APP_FEATURE_SCHEMA`] v[`APP_FEATURE_VERSION`], names in [`APP_FEATURES`]).
//!
//! **Grouping.** An application is the set of processes that share a cgroup and a process
//! group: where systemd or a desktop gives each application a cgroup (a service, an
//! `app-*.scope`), the cgroup separates them; where cgroups are flat (one session scope, or no
//! cgroup manager at all), the process group does — a shell puts each job (a pipeline, a
//! `make -j` and every compiler it forks) in one, and a service manager one per service.
//!
//! **Features** are rates and shares over the interval between two walks, normalised per CPU
//! and per second so that they mean the same on a machine of another size; none is a name or
//! an identity: the class comes from behaviour. Counters of threads that exited during the
//! interval are not lost: the walk reports the process's exited-thread totals on its leader.
//!
//! Kernel threads (process group 0) are no application ([`ThreadSample::in_application`]).
//!
//! Pure logic: [`AppGrouper::update`] takes one walk's [`ThreadSample`]s and the time, and keeps
//! the previous walk's totals per application; an application absent from a walk is dropped.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// Schema name of the per-application feature vector.
pub const APP_FEATURE_SCHEMA: &str = "asa.app-features";
/// Schema version of the per-application feature vector.
pub const APP_FEATURE_VERSION: u32 = 1;

/// The per-application features, in vector order.
pub const APP_FEATURES: [&str; 11] = [
    // CPU time over the interval, per CPU of the machine (0–1).
    "cpu_share",
    // CPU time over the interval, in CPUs (how many it keeps busy), per thread alive.
    "cpu_per_thread",
    // Mean length of a run between two switches, ms (log-scaled by the classifier if needed).
    "run_burst_ms",
    // Mean length of a sleep (off-CPU time not waiting to run, per voluntary switch), ms.
    "sleep_ms",
    // Voluntary switches (blocks, hence wake-ups) per second, per thread alive.
    "wakeups_per_s_per_thread",
    // Share of switches that were preemptions (involuntary): 0 = always blocks, 1 = always
    // preempted.
    "involuntary_share",
    // Time waiting on a run queue per unit of CPU time.
    "run_delay_per_cpu",
    // Storage I/O (bytes read and written that reached the block layer), MiB/s.
    "storage_mib_per_s",
    // Character I/O (read/write system calls: files, pipes, sockets), MiB/s.
    "char_mib_per_s",
    // Read and write system calls per second.
    "io_calls_per_s",
    // Threads alive (log2(1 + n)).
    "threads_log2",
];

/// The key of an application: its cgroup (kernfs id) and process group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AppKey {
    /// The cgroup (v2) id of the process's threads.
    pub cgroup: u64,
    /// The process group id.
    pub pgid: u32,
}

impl AppKey {
    /// The application process `pid` belongs to now, from /proc: its process group
    /// (/proc/PID/stat) and its cgroup-v2 id (the inode of its cgroup's folder under the
    /// cgroup2 mount, which is the kernfs id the BPF walk reads).
    pub fn of_process(pid: u32) -> Result<AppKey> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .with_context(|| format!("process {pid} is gone (read /proc/{pid}/stat)"))?;
        // pid (comm) state ppid pgrp …: comm may hold spaces and parentheses, so split after
        // its last ')'.
        let pgid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(2))
            .and_then(|field| field.parse().ok())
            .with_context(|| format!("no process group in /proc/{pid}/stat"))?;
        let path = cgroup_of_process(pid)?;
        let folder = cgroup2_mount()?.join(path);
        let cgroup = std::fs::metadata(&folder)
            .with_context(|| format!("stat the cgroup folder {}", folder.display()))?
            .ino();
        Ok(AppKey { cgroup, pgid })
    }
}

/// The cgroup-v2 path of process `pid` (its `0::` line of /proc/PID/cgroup), relative to the
/// cgroup2 mount, without a leading `/` (the root cgroup is "").
pub fn cgroup_of_process(pid: u32) -> Result<String> {
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .with_context(|| format!("process {pid} is gone (read /proc/{pid}/cgroup)"))?;
    cgroups
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .map(|p| p.trim_start_matches('/').to_string())
        .with_context(|| format!("process {pid} has no cgroup-v2 line in /proc/{pid}/cgroup"))
}

/// A cgroup named by its path, absolute (under the cgroup2 mount, e.g.
/// /sys/fs/cgroup/user.slice) or relative to the mount (user.slice): its path relative to the
/// mount and its id (the folder's inode, the kernfs id the BPF walk reads). An error when no
/// such cgroup exists.
pub fn resolve_cgroup(path: &str) -> Result<(String, u64)> {
    let mount = cgroup2_mount()?;
    let given = std::path::Path::new(path);
    let relative = match given.strip_prefix(&mount) {
        Ok(rest) => rest.to_path_buf(),
        Err(_) if given.is_absolute() => {
            // /user.slice/… as /proc/PID/cgroup prints it, when not under the mount.
            given.strip_prefix("/").unwrap_or(given).to_path_buf()
        }
        Err(_) => given.to_path_buf(),
    };
    let relative = relative.to_string_lossy().trim_matches('/').to_string();
    let folder = mount.join(&relative);
    let meta = std::fs::metadata(&folder)
        .with_context(|| format!("no cgroup {path} (no folder {})", folder.display()))?;
    if !meta.is_dir() {
        bail!("no cgroup {path}: {} is not a folder", folder.display());
    }
    Ok((relative, meta.ino()))
}

/// Where the cgroup-v2 hierarchy is mounted (/proc/self/mountinfo): /sys/fs/cgroup on a
/// unified system, /sys/fs/cgroup/unified on a hybrid one.
pub fn cgroup2_mount() -> Result<PathBuf> {
    let mountinfo =
        std::fs::read_to_string("/proc/self/mountinfo").context("read /proc/self/mountinfo")?;
    for line in mountinfo.lines() {
        // … mount-point … - fstype source options
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        if right.split_whitespace().next() == Some("cgroup2") {
            if let Some(point) = left.split_whitespace().nth(4) {
                return Ok(PathBuf::from(point));
            }
        }
    }
    bail!("no cgroup2 file system is mounted (/proc/self/mountinfo): mount it at /sys/fs/cgroup")
}

impl std::fmt::Display for AppKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cgroup {} pgid {}", self.cgroup, self.pgid)
    }
}

/// What the last task walk gave per-application perception.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadWalk {
    /// Every thread, with its application and behaviour.
    Threads,
    /// Not this tick: the last sample held the previous walk (walks are at least
    /// `PROCESS_SCAN_MIN_INTERVAL_S` apart) or walked without the application fields (asked
    /// for, they come with the next walk).
    NextWalk,
    /// No BPF task walk (perception reads /proc): no threads, ever.
    Unavailable,
}

/// One thread's cumulative counters from a task walk (on the thread-group leader also the
/// process's exited threads' totals, so a process's sum does not drop when a thread exits).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThreadSample {
    /// Process (thread-group) id.
    pub tgid: u32,
    /// Thread id.
    pub pid: u32,
    /// Process group id.
    pub pgid: u32,
    /// cgroup (v2) id.
    pub cgroup: u64,
    /// CPU time, ns.
    pub runtime_ns: u64,
    /// Voluntary context switches.
    pub nvcsw: u64,
    /// Involuntary context switches.
    pub nivcsw: u64,
    /// Time spent waiting on a run queue, ns.
    pub run_delay_ns: u64,
    /// Bytes read and written through the block layer.
    pub storage_bytes: u64,
    /// Bytes read and written through read/write system calls.
    pub char_bytes: u64,
    /// Read and write system calls.
    pub io_calls: u64,
    /// Whether this is the thread-group leader.
    pub leader: bool,
    /// Leader only: the process's exited threads' counters (same fields, summed).
    pub exited: ExitedTotals,
}

impl ThreadSample {
    /// Whether the thread belongs to an application: kernel threads, and processes the kernel
    /// started outside any process group, have process group 0 and are left out (a hint would
    /// move ksoftirqd and the kworkers with them).
    pub fn in_application(&self) -> bool {
        self.pgid != 0
    }

    /// Its application.
    pub fn app_key(&self) -> AppKey {
        AppKey {
            cgroup: self.cgroup,
            pgid: self.pgid,
        }
    }
}

/// A process's exited threads' counters, reported on its leader.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExitedTotals {
    /// CPU time, ns.
    pub runtime_ns: u64,
    /// Voluntary context switches.
    pub nvcsw: u64,
    /// Involuntary context switches.
    pub nivcsw: u64,
    /// Bytes read and written through the block layer.
    pub storage_bytes: u64,
    /// Bytes read and written through read/write system calls.
    pub char_bytes: u64,
    /// Read and write system calls.
    pub io_calls: u64,
}

/// One application's counters summed over its threads, and its size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Totals {
    runtime_ns: u64,
    nvcsw: u64,
    nivcsw: u64,
    run_delay_ns: u64,
    storage_bytes: u64,
    char_bytes: u64,
    io_calls: u64,
    threads: u32,
    processes: u32,
}

impl Totals {
    fn add(&mut self, t: &ThreadSample) {
        self.runtime_ns += t.runtime_ns + t.exited.runtime_ns;
        self.nvcsw += t.nvcsw + t.exited.nvcsw;
        self.nivcsw += t.nivcsw + t.exited.nivcsw;
        self.run_delay_ns += t.run_delay_ns;
        self.storage_bytes += t.storage_bytes + t.exited.storage_bytes;
        self.char_bytes += t.char_bytes + t.exited.char_bytes;
        self.io_calls += t.io_calls + t.exited.io_calls;
        self.threads += 1;
        self.processes += u32::from(t.leader);
    }
}

/// One application's features over the last interval, with the pids it holds now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppSample {
    /// The application.
    pub key: AppKey,
    /// Its processes, lowest first.
    pub tgids: Vec<u32>,
    /// Threads alive at the walk.
    pub threads: u32,
    /// The features, in [`APP_FEATURES`] order.
    pub features: Vec<f64>,
}

/// Groups each walk's threads into applications and turns the counters' growth since the
/// previous walk into features.
#[derive(Debug, Clone)]
pub struct AppGrouper {
    cpus: u32,
    previous: BTreeMap<AppKey, Totals>,
    previous_at: Option<Duration>,
}

impl AppGrouper {
    /// A grouper for a machine with `cpus` CPUs (the features' per-CPU normalisation).
    pub fn new(cpus: u32) -> Self {
        Self {
            cpus: cpus.max(1),
            previous: BTreeMap::new(),
            previous_at: None,
        }
    }

    /// One walk at `now`: the features of every application that was also in the previous walk
    /// (a new one has its first sample at the next walk). Applications are in key order.
    pub fn update(&mut self, now: Duration, threads: &[ThreadSample]) -> Vec<AppSample> {
        let mut totals: BTreeMap<AppKey, Totals> = BTreeMap::new();
        let mut tgids: BTreeMap<AppKey, Vec<u32>> = BTreeMap::new();
        for t in threads.iter().filter(|t| t.in_application()) {
            let key = t.app_key();
            totals.entry(key).or_default().add(t);
            if t.leader {
                tgids.entry(key).or_default().push(t.tgid);
            }
        }
        let interval = self.previous_at.map(|at| now.saturating_sub(at));
        let mut samples = Vec::new();
        if let Some(interval) = interval.filter(|i| !i.is_zero()) {
            for (key, now_totals) in &totals {
                let Some(before) = self.previous.get(key) else {
                    continue;
                };
                let mut pids = tgids.get(key).cloned().unwrap_or_default();
                pids.sort_unstable();
                samples.push(AppSample {
                    key: *key,
                    tgids: pids,
                    threads: now_totals.threads,
                    features: features(before, now_totals, interval, self.cpus).to_vec(),
                });
            }
        }
        self.previous = totals;
        self.previous_at = Some(now);
        samples
    }
}

/// The features of one application from its totals at two walks `interval` apart. Counters that
/// went down (a process of the group exited, taking its counters along) count as no growth.
fn features(before: &Totals, now: &Totals, interval: Duration, cpus: u32) -> [f64; 11] {
    let seconds = interval.as_secs_f64();
    let grew = |a: u64, b: u64| b.saturating_sub(a) as f64;
    let runtime_s = grew(before.runtime_ns, now.runtime_ns) / 1e9;
    let voluntary = grew(before.nvcsw, now.nvcsw);
    let involuntary = grew(before.nivcsw, now.nivcsw);
    let switches = voluntary + involuntary;
    let run_delay_s = grew(before.run_delay_ns, now.run_delay_ns) / 1e9;
    let threads = f64::from(now.threads.max(1));
    let cpus_busy = runtime_s / seconds;
    // Off-CPU time not spent waiting to run, over every thread alive for the interval.
    let sleeping_s = (threads * seconds - runtime_s - run_delay_s).max(0.0);
    [
        (cpus_busy / f64::from(cpus)).min(1.0),
        cpus_busy / threads,
        if switches > 0.0 {
            runtime_s * 1e3 / switches
        } else {
            runtime_s * 1e3
        },
        if voluntary > 0.0 {
            sleeping_s * 1e3 / voluntary
        } else {
            sleeping_s * 1e3 / threads
        },
        voluntary / seconds / threads,
        if switches > 0.0 {
            involuntary / switches
        } else {
            0.0
        },
        if runtime_s > 0.0 {
            run_delay_s / runtime_s
        } else {
            0.0
        },
        grew(before.storage_bytes, now.storage_bytes) / seconds / (1024.0 * 1024.0),
        grew(before.char_bytes, now.char_bytes) / seconds / (1024.0 * 1024.0),
        grew(before.io_calls, now.io_calls) / seconds,
        (1.0 + threads).log2(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn thread(tgid: u32, pid: u32, pgid: u32, cgroup: u64) -> ThreadSample {
        ThreadSample {
            tgid,
            pid,
            pgid,
            cgroup,
            leader: tgid == pid,
            ..ThreadSample::default()
        }
    }

    fn feature(sample: &AppSample, name: &str) -> f64 {
        let i = APP_FEATURES.iter().position(|n| *n == name).unwrap();
        sample.features[i]
    }

    #[test]
    fn processes_sharing_a_cgroup_and_a_process_group_are_one_application_kernel_threads_none() {
        let mut grouper = AppGrouper::new(2);
        // make (100) and two compilers (101, 102) in one job; an editor (200) in another job
        // of the same session cgroup; a service (300) in its own cgroup.
        let walk = [
            thread(100, 100, 100, 5),
            thread(101, 101, 100, 5),
            thread(102, 102, 100, 5),
            thread(102, 103, 100, 5),
            thread(200, 200, 200, 5),
            thread(300, 300, 1, 9),
            // kernel threads: process group 0, in the root cgroup
            thread(2, 2, 0, 1),
            thread(40, 40, 0, 1),
        ];
        assert!(grouper.update(Duration::from_secs(0), &walk).is_empty());
        let apps = grouper.update(Duration::from_secs(1), &walk);
        let keys: Vec<(u64, u32)> = apps.iter().map(|a| (a.key.cgroup, a.key.pgid)).collect();
        assert_eq!(
            keys,
            vec![(5, 100), (5, 200), (9, 1)],
            "no kernel application"
        );
        assert_eq!(apps[0].tgids, vec![100, 101, 102]);
        assert_eq!(apps[0].threads, 4);
    }

    #[test]
    fn a_cpu_hog_and_an_interactive_task_differ_in_burst_sleep_and_share() {
        let mut grouper = AppGrouper::new(2);
        let mut hog = thread(10, 10, 10, 1);
        let mut ui = thread(20, 20, 20, 1);
        grouper.update(Duration::from_secs(0), &[hog, ui]);
        // Over 1 s: the hog ran 950 ms in 10 slices (preempted); the UI task ran 20 ms in 100
        // short bursts, blocking each time.
        hog.runtime_ns = 950 * MS;
        hog.nivcsw = 10;
        ui.runtime_ns = 20 * MS;
        ui.nvcsw = 100;
        let apps = grouper.update(Duration::from_secs(1), &[hog, ui]);
        let (hog, ui) = (&apps[0], &apps[1]);
        assert!((feature(hog, "cpu_share") - 0.475).abs() < 1e-9);
        assert!((feature(hog, "run_burst_ms") - 95.0).abs() < 1e-9);
        assert_eq!(feature(hog, "involuntary_share"), 1.0);
        assert!((feature(ui, "run_burst_ms") - 0.2).abs() < 1e-9);
        assert!((feature(ui, "sleep_ms") - 9.8).abs() < 1e-9);
        assert_eq!(feature(ui, "wakeups_per_s_per_thread"), 100.0);
        assert_eq!(feature(ui, "involuntary_share"), 0.0);
    }

    #[test]
    fn features_are_per_second_whatever_the_interval() {
        let mut one = AppGrouper::new(4);
        let mut two = AppGrouper::new(4);
        let mut t = thread(1, 1, 1, 1);
        one.update(Duration::ZERO, &[t]);
        two.update(Duration::ZERO, &[t]);
        t.runtime_ns = 500 * MS;
        t.nvcsw = 50;
        t.char_bytes = 1 << 20;
        t.io_calls = 50;
        let a = one.update(Duration::from_secs(1), &[t]);
        t.runtime_ns = 1000 * MS;
        t.nvcsw = 100;
        t.char_bytes = 2 << 20;
        t.io_calls = 100;
        let b = two.update(Duration::from_secs(2), &[t]);
        for (x, y) in a[0].features.iter().zip(&b[0].features) {
            assert!(
                (x - y).abs() < 1e-9,
                "{:?} vs {:?}",
                a[0].features,
                b[0].features
            );
        }
    }

    #[test]
    fn an_exited_thread_keeps_its_counters_through_the_leaders_totals() {
        let mut grouper = AppGrouper::new(1);
        let mut leader = thread(7, 7, 7, 1);
        let mut worker = thread(7, 8, 7, 1);
        worker.runtime_ns = 400 * MS;
        grouper.update(Duration::ZERO, &[leader, worker]);
        // The worker ran 100 ms more and exited; its 500 ms moved into the leader's totals.
        leader.exited.runtime_ns = 500 * MS;
        let apps = grouper.update(Duration::from_secs(1), &[leader]);
        assert!((feature(&apps[0], "cpu_share") - 0.1).abs() < 1e-9);
    }

    #[test]
    fn a_process_leaving_the_group_counts_as_no_growth_not_a_negative_one() {
        let mut grouper = AppGrouper::new(1);
        let mut a = thread(1, 1, 1, 1);
        let mut b = thread(2, 2, 1, 1);
        a.runtime_ns = 100 * MS;
        b.runtime_ns = 900 * MS;
        grouper.update(Duration::ZERO, &[a, b]);
        a.runtime_ns = 150 * MS;
        let apps = grouper.update(Duration::from_secs(1), &[a]);
        assert_eq!(feature(&apps[0], "cpu_share"), 0.0);
        assert!(apps[0].features.iter().all(|f| f.is_finite() && *f >= 0.0));
    }

    #[test]
    fn an_application_absent_from_a_walk_is_dropped_and_starts_afresh() {
        let mut grouper = AppGrouper::new(1);
        let t = thread(1, 1, 1, 1);
        grouper.update(Duration::ZERO, &[t]);
        assert!(grouper.update(Duration::from_secs(1), &[]).is_empty());
        assert!(grouper.update(Duration::from_secs(2), &[t]).is_empty());
        assert_eq!(grouper.update(Duration::from_secs(3), &[t]).len(), 1);
    }

    #[test]
    fn this_process_has_an_application_key_with_its_own_process_group() {
        let key = AppKey::of_process(std::process::id()).unwrap();
        // SAFETY: getpgrp has no preconditions.
        assert_eq!(key.pgid, unsafe { libc::getpgrp() } as u32);
        assert!(key.cgroup > 0);
        let gone = AppKey::of_process(u32::MAX / 2).unwrap_err();
        assert!(format!("{gone:#}").contains("is gone"));
    }

    #[test]
    fn a_cgroup_is_found_by_its_absolute_or_relative_path_with_the_walks_id() {
        let mine = cgroup_of_process(std::process::id()).unwrap();
        let key = AppKey::of_process(std::process::id()).unwrap();
        let (relative, id) = resolve_cgroup(&mine).unwrap();
        assert_eq!((relative.as_str(), id), (mine.as_str(), key.cgroup));
        let absolute = cgroup2_mount().unwrap().join(&mine);
        let (relative, id) = resolve_cgroup(absolute.to_str().unwrap()).unwrap();
        assert_eq!((relative.as_str(), id), (mine.as_str(), key.cgroup));
        let missing = resolve_cgroup("no-such.slice/nothing").unwrap_err();
        assert!(format!("{missing:#}").contains("no cgroup no-such.slice/nothing"));
    }

    #[test]
    fn the_feature_list_and_the_vector_agree() {
        let mut grouper = AppGrouper::new(1);
        let t = thread(1, 1, 1, 1);
        grouper.update(Duration::ZERO, &[t]);
        let apps = grouper.update(Duration::from_secs(1), &[t]);
        assert_eq!(apps[0].features.len(), APP_FEATURES.len());
    }
}
