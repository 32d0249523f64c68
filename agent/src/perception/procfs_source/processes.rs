//! The per-process scan: one pass over /proc/<pid>/stat per tick, ranked into the busiest,
//! second-busiest and most-I/O processes since the previous scan ([`ProcessTick`]).

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;

use anyhow::{Context, Result};
use procfs::prelude::*;

use super::pread::pread_file;

/// The per-process part of a tick, computed by [`ProcessScanner`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcessTick {
    /// Number of processes seen.
    pub count: u64,
    /// Largest CPU time (user + system, clock ticks) one process used since the previous scan
    /// (processes first seen in this scan are not counted).
    pub top_cpu_ticks: u64,
    /// Largest resident set of one process, bytes.
    pub top_rss_bytes: u64,
    /// Threads of the process with the most CPU time since the previous scan (0 if none).
    pub top_threads: u64,
    /// Minor page faults of that process since the previous scan.
    pub top_minflt: u64,
    /// Bytes that process read and wrote through system calls since the previous scan
    /// (rchar + wchar of /proc/<pid>/io: files, pipes, sockets, /dev/null alike); None when
    /// unknown (it was neither among the busiest nor the newest processes of the previous
    /// scan, or its io file is not readable: another user's process without root).
    pub top_io_bytes: Option<u64>,
    /// CPU time (clock ticks) of the second-busiest process since the previous scan (0 when
    /// fewer than two processes used CPU): the busiest one is often the user's foreground
    /// application, the second the background load, or the reverse.
    pub second_cpu_ticks: u64,
    /// Threads of the second-busiest process (0 if none).
    pub second_threads: u64,
    /// Minor page faults of the second-busiest process since the previous scan.
    pub second_minflt: u64,
    /// The largest I/O (rchar + wchar) one process did since the previous scan, among the
    /// processes whose io file was read at both scans (the busiest and the newest of each
    /// scan); 0 when none.
    pub io_top_bytes: u64,
    /// Threads of that process (0 if none).
    pub io_top_threads: u64,
    /// Seconds between this scan and the previous one (0 for the first scan).
    pub interval_s: f64,
    /// CPU time (clock ticks) the processes passed to [`ProcessScanner::ignore_also`] (the
    /// agent's hot standbys) used since the previous scan; all of it for one not tracked
    /// before (a standby is new: its CPU time is its loading).
    pub ignored_cpu_ticks: u64,
}

/// Each scan reads /proc/<pid>/io of this many processes, those with the most CPU time since
/// the previous scan, ...
pub const IO_READS_PER_SCAN: usize = 4;
/// ... and of up to this many processes first seen in this scan (the newest): the next scan's
/// busiest process is almost always among them, so its I/O since then is known. (A process
/// that was idle at the previous scan and is the busiest now is not: its I/O rate is missing
/// on that tick.)
pub const IO_NEW_READS_PER_SCAN: usize = 8;

/// At most this many /proc/<pid>/stat files stay open between scans (beyond: opened and
/// closed per scan), well inside the default limit of 1024 open files.
pub const MAX_OPEN_STAT_FILES: usize = 512;

/// One process's cumulative accounting at one scan, whatever read it (its
/// `/proc/<pid>/stat`, or the BPF task iterator of [`crate::perception::task_scan`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessStat {
    /// Process id (thread-group id).
    pub pid: i32,
    /// Start time, in any unit that is fixed for the process's life: with the pid, the key
    /// that tells a reused pid from the old process.
    pub start: u64,
    /// User + system CPU time of all its threads, clock ticks.
    pub cpu_ticks: u64,
    /// Minor page faults of all its threads.
    pub minflt: u64,
    /// Live threads.
    pub threads: u64,
    /// Resident set, bytes.
    pub rss_bytes: u64,
}

/// The /proc/<pid>/stat files of every process, kept open between scans and re-read from
/// offset 0 (procfs formats them afresh on every read): a scan costs one pread per process
/// instead of open + read + close and the path walk. A file of a process that exited fails to
/// read (ESRCH) and is reopened by path, which finds the process now holding the pid, if any.
pub struct StatFiles {
    /// pid → (its open stat file, the scan that last saw the pid).
    open: HashMap<i32, (File, u64)>,
    scans: u64,
    buffer: Vec<u8>,
    page_size: u64,
}

impl Default for StatFiles {
    fn default() -> Self {
        StatFiles {
            open: HashMap::new(),
            scans: 0,
            buffer: Vec::with_capacity(8192),
            page_size: procfs::page_size(),
        }
    }
}

impl StatFiles {
    /// One pass over `proc_root`: every process's [`ProcessStat`] into `out` (cleared first).
    /// Processes that vanish mid-scan are skipped.
    pub fn read_all(&mut self, proc_root: &Path, out: &mut Vec<ProcessStat>) -> Result<()> {
        out.clear();
        self.scans += 1;
        let scan = self.scans;
        let entries = std::fs::read_dir(proc_root)
            .with_context(|| format!("list {}", proc_root.display()))?;
        let mut path = proc_root.to_path_buf();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(pid) = name.to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            let reread = match self.open.get_mut(&pid) {
                Some((file, seen)) => {
                    *seen = scan;
                    pread_file(file, &mut self.buffer, true).is_ok()
                }
                None => false,
            };
            if !reread {
                self.open.remove(&pid);
                path.push(&name);
                path.push("stat");
                let opened = File::open(&path);
                path.pop();
                path.pop();
                let Ok(file) = opened else {
                    continue; // exited between readdir and open
                };
                if pread_file(&file, &mut self.buffer, true).is_err() {
                    continue;
                }
                if self.open.len() < MAX_OPEN_STAT_FILES {
                    self.open.insert(pid, (file, scan));
                }
            }
            let Ok(stat) = procfs::process::Stat::from_read(&self.buffer[..]) else {
                continue;
            };
            out.push(ProcessStat {
                pid,
                start: stat.starttime,
                cpu_ticks: stat.utime + stat.stime,
                minflt: stat.minflt,
                threads: stat.num_threads.max(0) as u64,
                rss_bytes: stat.rss * self.page_size,
            });
        }
        self.open.retain(|_, (_, seen)| *seen == scan);
        Ok(())
    }
}

/// rchar + wchar of `/proc/<pid>/io` under `proc_root` (None when unreadable).
pub fn proc_io_bytes(proc_root: &Path, pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(proc_root.join(pid.to_string()).join("io")).ok()?;
    io_bytes(&text)
}

/// Ranks each scan's processes against the previous scan (keyed by pid and start time, so a
/// reused pid is not mistaken for the old process): the busiest and second-busiest by CPU time
/// since then, the largest resident set, and the most I/O among the processes whose I/O was
/// read at both scans (the busiest and newest of each: [`IO_READS_PER_SCAN`],
/// [`IO_NEW_READS_PER_SCAN`]). [`ProcessScanner::scan`] reads /proc itself;
/// [`ProcessScanner::rank`] takes the processes from any source.
pub struct ProcessScanner {
    /// (pid, start time) → (CPU ticks, minor faults, threads) at the previous scan.
    previous: HashMap<(i32, u64), (u64, u64, u64)>,
    current: HashMap<(i32, u64), (u64, u64, u64)>,
    /// (pid, start time) → rchar + wchar at the previous scan, for the busiest and newest
    /// processes.
    io_previous: HashMap<(i32, u64), u64>,
    io_current: HashMap<(i32, u64), u64>,
    /// This scan's processes that used CPU since the previous scan.
    busy: Vec<BusyProcess>,
    /// (pid, start time) of the processes first seen in this scan.
    fresh: Vec<(i32, u64)>,
    /// The procfs source of [`ProcessScanner::scan`].
    files: StatFiles,
    stats: Vec<ProcessStat>,
    /// A process left out of the rankings (busiest, second-busiest, most I/O, largest RSS):
    /// the sampling process itself, so the agent does not describe its own work.
    ignored_pid: Option<i32>,
    /// More processes left out of the rankings, replaced by [`ProcessScanner::ignore_also`]:
    /// the agent's hot-standby experts, whose loading (BPF verification) is not the workload.
    also_ignored: Vec<i32>,
    /// CPU time of the `also_ignored` processes at the previous scan, by (pid, start time).
    ignored_previous: HashMap<(i32, u64), u64>,
}

impl Default for ProcessScanner {
    fn default() -> Self {
        Self::new()
    }
}

impl ProcessScanner {
    /// A scanner with no history (the first scan reports top CPU 0).
    pub fn new() -> Self {
        ProcessScanner {
            previous: HashMap::new(),
            current: HashMap::new(),
            io_previous: HashMap::new(),
            io_current: HashMap::new(),
            busy: Vec::new(),
            fresh: Vec::new(),
            files: StatFiles::default(),
            stats: Vec::new(),
            ignored_pid: None,
            also_ignored: Vec::new(),
            ignored_previous: HashMap::new(),
        }
    }

    /// A scanner that counts process `pid` but leaves it out of the per-process features
    /// (busiest, second-busiest, most I/O, largest RSS). The sampler passes its own process:
    /// live, the agent (`asa run`, with ONNX Runtime loaded) would otherwise be the largest
    /// process and rank among the busiest, which it never was in the recordings (`asa record`
    /// samples from its own, leaner process).
    pub fn ignoring(pid: i32) -> Self {
        ProcessScanner {
            ignored_pid: Some(pid),
            ..Self::new()
        }
    }

    /// Leave `pids` out of the rankings too (counted, never ranked), in place of the previous
    /// call's: the agent passes its hot-standby experts' processes each tick.
    pub fn ignore_also(&mut self, pids: impl IntoIterator<Item = i32>) {
        self.also_ignored.clear();
        self.also_ignored.extend(pids);
    }

    /// One pass over /proc (every /proc/<pid>/stat, and /proc/<pid>/io of the candidates for
    /// the I/O features), ranked by [`ProcessScanner::rank`].
    pub fn scan(&mut self, proc_root: &Path) -> Result<ProcessTick> {
        let mut stats = std::mem::take(&mut self.stats);
        let read = self.files.read_all(proc_root, &mut stats);
        let tick = read.map(|()| self.rank(&stats, |pid| proc_io_bytes(proc_root, pid)));
        self.stats = stats;
        tick
    }

    /// Ranks one scan's processes: counts them, finds the two largest CPU-time deltas since the
    /// previous scan (and those processes' threads and minor faults, and the busiest one's
    /// I/O), the process with the most I/O among those whose I/O is known, and the largest
    /// RSS. `io_bytes(pid)` gives a process's rchar + wchar; it is asked only for the busiest
    /// and the newest processes, whose I/O the next scan compares against.
    pub fn rank(
        &mut self,
        processes: &[ProcessStat],
        mut io_bytes: impl FnMut(i32) -> Option<u64>,
    ) -> ProcessTick {
        let mut tick = ProcessTick::default();
        self.current.clear();
        self.busy.clear();
        self.fresh.clear();
        let mut ignored_seen: Vec<((i32, u64), u64)> = Vec::new();
        for stat in processes {
            tick.count += 1;
            if self.also_ignored.contains(&stat.pid) {
                let key = (stat.pid, stat.start);
                let before = self.ignored_previous.get(&key).copied().unwrap_or(0);
                tick.ignored_cpu_ticks += stat.cpu_ticks.saturating_sub(before);
                ignored_seen.push((key, stat.cpu_ticks));
                continue;
            }
            if Some(stat.pid) == self.ignored_pid {
                continue;
            }
            let key = (stat.pid, stat.start);
            if let Some(&(cpu_before, minflt_before, _)) = self.previous.get(&key) {
                let used = stat.cpu_ticks.saturating_sub(cpu_before);
                if used > 0 {
                    self.busy.push(BusyProcess {
                        cpu_ticks: used,
                        key,
                        threads: stat.threads,
                        minflt: stat.minflt.saturating_sub(minflt_before),
                    });
                }
            } else {
                self.fresh.push(key);
            }
            self.current
                .insert(key, (stat.cpu_ticks, stat.minflt, stat.threads));
            tick.top_rss_bytes = tick.top_rss_bytes.max(stat.rss_bytes);
        }
        std::mem::swap(&mut self.previous, &mut self.current);
        self.ignored_previous.clear();
        self.ignored_previous.extend(ignored_seen);

        // The busiest first (ties: lowest pid).
        self.busy
            .sort_unstable_by(|a, b| b.cpu_ticks.cmp(&a.cpu_ticks).then(a.key.0.cmp(&b.key.0)));
        if let Some(second) = self.busy.get(1) {
            tick.second_cpu_ticks = second.cpu_ticks;
            tick.second_threads = second.threads;
            tick.second_minflt = second.minflt;
        }

        // The I/O of the busiest and the newest processes; a delta for those read last time
        // too.
        self.io_current.clear();
        // The newest first-seen processes (highest start time).
        self.fresh
            .sort_unstable_by(|a, b| b.1.cmp(&a.1).then(b.0.cmp(&a.0)));
        let busiest = self.busy.iter().take(IO_READS_PER_SCAN);
        let newest = self.fresh.iter().take(IO_NEW_READS_PER_SCAN);
        for (pid, start) in busiest.map(|b| b.key).chain(newest.copied()) {
            if let Some(bytes) = io_bytes(pid) {
                self.io_current.insert((pid, start), bytes);
            }
        }
        let io_delta = |key: &(i32, u64)| {
            let (before, now) = (self.io_previous.get(key)?, self.io_current.get(key)?);
            Some(now.saturating_sub(*before))
        };
        if let Some(top) = self.busy.first() {
            tick.top_cpu_ticks = top.cpu_ticks;
            tick.top_threads = top.threads;
            tick.top_minflt = top.minflt;
            tick.top_io_bytes = io_delta(&top.key);
        } else {
            // Nothing used CPU since the previous scan: no busiest process, no I/O.
            tick.top_io_bytes = Some(0);
        }
        // The most I/O (ties: lowest pid); its threads from this scan's stat.
        let io_top = self
            .io_current
            .keys()
            .filter_map(|key| Some((io_delta(key)?, *key)))
            .max_by(|a, b| a.0.cmp(&b.0).then(b.1 .0.cmp(&a.1 .0)));
        if let Some((bytes, key)) = io_top {
            tick.io_top_bytes = bytes;
            tick.io_top_threads = self.previous.get(&key).map_or(0, |v| v.2);
        }
        std::mem::swap(&mut self.io_previous, &mut self.io_current);
        tick
    }
}

/// A process that used CPU since the previous scan.
struct BusyProcess {
    /// CPU time since the previous scan, clock ticks.
    cpu_ticks: u64,
    /// (pid, start time).
    key: (i32, u64),
    threads: u64,
    /// Minor page faults since the previous scan.
    minflt: u64,
}

/// rchar + wchar of a /proc/<pid>/io text (None if either line is missing).
fn io_bytes(text: &str) -> Option<u64> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse::<u64>().ok())
    };
    Some(field("rchar:")?.saturating_add(field("wchar:")?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn write_stat(root: &Path, pid: i32, cpu: (u64, u64), starttime: u64, rss_pages: u64) {
        write_stat_faults(root, pid, cpu, starttime, rss_pages, 99, 3);
    }

    /// A stat line with `minflt` minor faults and `threads` threads.
    fn write_stat_faults(
        root: &Path,
        pid: i32,
        cpu: (u64, u64),
        starttime: u64,
        rss_pages: u64,
        minflt: u64,
        threads: u64,
    ) {
        let dir = root.join(pid.to_string());
        std::fs::create_dir_all(&dir).unwrap();
        let line = format!(
            "{pid} (odd ) name) S 1 1 1 0 -1 4194304 {minflt} 0 1 0 {} {} 0 0 20 0 {threads} 0 {starttime} 3133440 {rss_pages} 18446744073709551615 1 1 1 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 1 1 1 1 1 1 1 0\n",
            cpu.0, cpu.1
        );
        std::fs::write(dir.join("stat"), line).unwrap();
    }

    fn write_io(root: &Path, pid: i32, rchar: u64, wchar: u64) {
        let text = format!("rchar: {rchar}\nwchar: {wchar}\nsyscr: 1\nsyscw: 1\nread_bytes: 0\nwrite_bytes: 0\ncancelled_write_bytes: 0\n");
        std::fs::write(root.join(pid.to_string()).join("io"), text).unwrap();
    }

    /// The busiest process's threads, minor faults and I/O: its I/O rate is known when it was
    /// among the busiest or the newest processes of the previous scan, missing when it was
    /// idle then; a scan where nothing used CPU has no busiest process.
    #[test]
    fn process_scan_reports_the_busiest_process_threads_faults_and_io() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        write_stat_faults(r, 20, (10, 0), 100, 1, 1000, 4);
        write_io(r, 20, 5_000, 1_000);
        write_stat_faults(r, 21, (10, 0), 101, 1, 50, 1);
        write_io(r, 21, 0, 0);
        let mut scanner = ProcessScanner::new();
        let first = scanner.scan(r).unwrap();
        assert_eq!((first.top_threads, first.top_io_bytes), (0, Some(0)));

        // 21 is busiest; its io was read last scan as a new process: +700 read, +300 written.
        write_stat_faults(r, 20, (30, 0), 100, 1, 1400, 4); // +20 ticks, +400 faults
        write_stat_faults(r, 21, (50, 5), 101, 1, 60, 1); // +45 ticks, +10 faults
        write_io(r, 21, 700, 300);
        let second = scanner.scan(r).unwrap();
        assert_eq!(second.top_cpu_ticks, 45);
        assert_eq!((second.top_threads, second.top_minflt), (1, 10));
        assert_eq!(second.top_io_bytes, Some(1_000));
        // 20 is second-busiest; both io files were read at both scans: 21 did the most I/O.
        assert_eq!(second.second_cpu_ticks, 20);
        assert_eq!((second.second_threads, second.second_minflt), (4, 400));
        assert_eq!((second.io_top_bytes, second.io_top_threads), (1_000, 1));

        // Now 20 is busiest and was among the busiest last scan: +4000 read, +2000 written.
        // 22 appears (new: its io is read).
        write_stat_faults(r, 20, (130, 0), 100, 1, 2400, 8); // +100 ticks, +1000 faults
        write_io(r, 20, 9_000, 3_000);
        write_stat_faults(r, 22, (0, 0), 102, 1, 0, 2);
        write_io(r, 22, 0, 0);
        let third = scanner.scan(r).unwrap();
        assert_eq!(third.top_cpu_ticks, 100);
        assert_eq!((third.top_threads, third.top_minflt), (8, 1000));
        assert_eq!(third.top_io_bytes, Some(6_000));
        // 21 used no CPU (not second, its io not read now); 22 is new: no second-busiest.
        assert_eq!((third.second_cpu_ticks, third.second_threads), (0, 0));
        assert_eq!((third.io_top_bytes, third.io_top_threads), (6_000, 8));

        // Nothing ran: no busiest process.
        let fourth = scanner.scan(r).unwrap();
        assert_eq!(fourth.top_cpu_ticks, 0);
        assert_eq!((fourth.top_threads, fourth.top_io_bytes), (0, Some(0)));
        assert_eq!((fourth.io_top_bytes, fourth.io_top_threads), (0, 0));

        // 22, idle (and not new) at the previous scan, is busiest now: its I/O rate is unknown.
        write_stat_faults(r, 22, (7, 0), 102, 1, 0, 2);
        write_io(r, 22, 50, 50);
        let fifth = scanner.scan(r).unwrap();
        assert_eq!((fifth.top_cpu_ticks, fifth.top_threads), (7, 2));
        assert_eq!(fifth.top_io_bytes, None);
    }

    /// The ignored process (the sampler's own) is counted but never the busiest, the
    /// second-busiest, the one with the most I/O or the largest.
    #[test]
    fn the_ignored_process_is_counted_but_never_ranked() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        let page = procfs::page_size();
        // 30 is the sampler: the most CPU, the most I/O, the largest RSS.
        write_stat_faults(r, 30, (100, 0), 100, 5000, 10, 4);
        write_stat_faults(r, 31, (10, 0), 101, 200, 10, 2);
        write_stat_faults(r, 32, (10, 0), 102, 100, 10, 6);
        write_io(r, 30, 0, 0);
        write_io(r, 31, 0, 0);
        let mut scanner = ProcessScanner::ignoring(30);
        let mut plain = ProcessScanner::new();
        for s in [&mut scanner, &mut plain] {
            s.scan(r).unwrap();
        }
        write_stat_faults(r, 30, (190, 0), 100, 5000, 500, 4); // +90, the busiest
        write_stat_faults(r, 31, (40, 0), 101, 200, 20, 2); // +30
        write_stat_faults(r, 32, (20, 0), 102, 100, 30, 6); // +10
        write_io(r, 30, 1 << 20, 1 << 20);
        write_io(r, 31, 300, 0);
        let mine = scanner.scan(r).unwrap();
        let all = plain.scan(r).unwrap();
        assert_eq!((mine.count, all.count), (3, 3));
        assert_eq!((all.top_cpu_ticks, all.top_threads), (90, 4));
        assert_eq!(all.top_rss_bytes, 5000 * page);
        assert_eq!(
            (mine.top_cpu_ticks, mine.top_threads, mine.top_minflt),
            (30, 2, 10)
        );
        assert_eq!((mine.second_cpu_ticks, mine.second_threads), (10, 6));
        assert_eq!(mine.top_rss_bytes, 200 * page);
        assert_eq!(mine.top_io_bytes, Some(300));
        assert_eq!((mine.io_top_bytes, mine.io_top_threads), (300, 2));
    }

    /// Processes passed to `ignore_also` (the agent's standby experts) are left out like the
    /// sampler itself, and a later call replaces the set; their own CPU time is reported.
    #[test]
    fn processes_ignored_also_are_counted_but_never_ranked_until_replaced() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        write_stat(r, 40, (0, 0), 100, 10);
        write_stat(r, 41, (0, 0), 101, 10);
        write_stat(r, 42, (0, 0), 102, 10);
        let mut scanner = ProcessScanner::ignoring(40);
        scanner.ignore_also([41]);
        scanner.scan(r).unwrap();
        // 41, a standby loading, is the busiest; 42 the workload.
        write_stat(r, 40, (50, 0), 100, 10);
        write_stat(r, 41, (80, 0), 101, 10);
        write_stat(r, 42, (20, 0), 102, 10);
        let tick = scanner.scan(r).unwrap();
        assert_eq!(tick.count, 3);
        assert_eq!((tick.top_cpu_ticks, tick.second_cpu_ticks), (20, 0));
        assert_eq!(tick.ignored_cpu_ticks, 80, "the standby's own CPU time");
        // A standby not tracked before: all its CPU time is its loading.
        write_stat(r, 43, (30, 5), 103, 10);
        scanner.ignore_also([41, 43]);
        write_stat(r, 41, (90, 0), 101, 10);
        let tick = scanner.scan(r).unwrap();
        assert_eq!(tick.ignored_cpu_ticks, 10 + 35);
        scanner.ignore_also([41]);
        std::fs::remove_dir_all(r.join("43")).unwrap();
        // The standby was attached (no longer ignored): first seen again at the next scan,
        // ranked from the one after.
        scanner.ignore_also([]);
        write_stat(r, 41, (160, 0), 101, 10);
        write_stat(r, 42, (30, 0), 102, 10);
        let tick = scanner.scan(r).unwrap();
        assert_eq!((tick.top_cpu_ticks, tick.second_cpu_ticks), (10, 0));
        assert_eq!(tick.ignored_cpu_ticks, 0);
        write_stat(r, 41, (200, 0), 101, 10);
        write_stat(r, 42, (35, 0), 102, 10);
        let tick = scanner.scan(r).unwrap();
        assert_eq!((tick.top_cpu_ticks, tick.second_cpu_ticks), (40, 5));
    }

    #[test]
    fn io_file_parse_needs_rchar_and_wchar() {
        assert_eq!(io_bytes("rchar: 10\nwchar: 5\nsyscr: 1\n"), Some(15));
        assert_eq!(io_bytes("rchar: 10\n"), None);
        assert_eq!(io_bytes(""), None);
    }

    #[test]
    fn process_scan_takes_cpu_deltas_per_process_and_ignores_reused_pids() {
        let root = tempfile::tempdir().unwrap();
        let page = procfs::page_size();
        write_stat(root.path(), 10, (60, 40), 1000, 10);
        write_stat(root.path(), 11, (50, 0), 1001, 300);
        write_stat(root.path(), 12, (0, 0), 1002, 5);
        std::fs::create_dir_all(root.path().join("13")).unwrap(); // vanished: no stat file
        std::fs::create_dir_all(root.path().join("self")).unwrap(); // not a pid
        let mut scanner = ProcessScanner::new();
        let first = scanner.scan(root.path()).unwrap();
        assert_eq!(first.count, 3);
        assert_eq!(first.top_cpu_ticks, 0, "no history yet");
        assert_eq!(first.top_rss_bytes, 300 * page);

        write_stat(root.path(), 10, (80, 50), 1000, 10); // +30
        write_stat(root.path(), 11, (100, 20), 1001, 20); // +70
        write_stat(root.path(), 12, (900, 0), 5000, 7); // pid reused: new process, no delta
        let second = scanner.scan(root.path()).unwrap();
        assert_eq!(second.count, 3);
        assert_eq!(second.top_cpu_ticks, 70);
        assert_eq!(second.top_rss_bytes, 20 * page);

        write_stat(root.path(), 12, (1000, 0), 5000, 7); // +100 for the new process
        let third = scanner.scan(root.path()).unwrap();
        assert_eq!(third.top_cpu_ticks, 100);
        assert_eq!(
            scanner.files.open.len(),
            3,
            "the three stat files stay open"
        );

        // pid 11 exits, 14 starts: the exited one's file is closed, the new one read.
        std::fs::remove_dir_all(root.path().join("11")).unwrap();
        write_stat(root.path(), 14, (5, 5), 6000, 1);
        write_stat(root.path(), 10, (85, 50), 1000, 10); // +5
        let fourth = scanner.scan(root.path()).unwrap();
        assert_eq!(fourth.count, 3);
        assert_eq!(fourth.top_cpu_ticks, 5);
        let mut open: Vec<i32> = scanner.files.open.keys().copied().collect();
        open.sort();
        assert_eq!(open, vec![10, 12, 14]);
    }

    /// On the real /proc: the scanner's own process is found with a CPU time that grows
    /// between scans, through its kept-open stat file, and a child that exits is dropped.
    #[test]
    fn process_scan_of_the_real_proc_rereads_kept_files() {
        let mut scanner = ProcessScanner::new();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let child_pid = child.id() as i32;
        let first = scanner.scan(Path::new("/proc")).unwrap();
        assert!(first.count >= 2, "{first:?}");
        assert!(scanner.files.open.contains_key(&child_pid));
        let me = std::process::id() as i32;
        let key = *scanner.previous.keys().find(|(pid, _)| *pid == me).unwrap();
        let before = scanner.previous[&key].0;
        let spin = Instant::now();
        while spin.elapsed() < std::time::Duration::from_millis(300) {
            std::hint::black_box(spin.elapsed());
        }
        child.kill().unwrap();
        child.wait().unwrap();
        scanner.scan(Path::new("/proc")).unwrap();
        assert!(
            scanner.previous[&key].0 > before,
            "own CPU time did not grow: {before} -> {}",
            scanner.previous[&key].0
        );
        assert!(
            !scanner.files.open.contains_key(&child_pid),
            "exited child still open"
        );
    }
}
