//! [`ProcReader`]: the I/O of the procfs sampler. The system files stay open and are re-read
//! from offset 0 into reused buffers once per tick; the process scan runs at most about once
//! per second.

use std::collections::HashSet;
use std::fs::File;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::pread::pread_file;
use super::processes::{ProcessScanner, ProcessStat, ProcessTick};
use super::snapshot::{DiskFilter, ProcSnapshot, ProcTexts};
use crate::perception::apps::{ThreadSample, ThreadWalk};
use crate::perception::task_scan::TaskScan;

/// The per-process scan (one read of every /proc/<pid>/stat, the dominant cost of a tick) runs
/// at most about once per second: at faster ticks the process features are held between scans
/// and `top_proc_cpu_share` is averaged over the scan interval. 0.9 s, not 1 s, so a 1 Hz
/// sampler whose ticks jitter early still scans every tick.
pub const PROCESS_SCAN_MIN_INTERVAL_S: f64 = 0.9;

/// What one [`ProcReader::snapshot`] took, in µs of wall time, by part: each system file's
/// read, the parse of them all, and the per-process scan (0 on ticks that reuse the last scan).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ReadCost {
    /// Reading /proc/stat, /proc/meminfo, /proc/diskstats, /proc/net/dev, /proc/net/snmp and
    /// /proc/loadavg, in that order.
    pub files_us: [f64; 6],
    /// Parsing the system files into the snapshot.
    pub parse_us: f64,
    /// The per-process scan.
    pub scan_us: f64,
    /// Processes the scan saw (0 when this tick reused the last scan).
    pub processes: u64,
    /// Whether the scan came from the BPF task iterator (else from /proc/<pid>/stat).
    #[serde(default)]
    pub task_iter: bool,
}

impl ReadCost {
    /// The system files' reads together.
    pub fn files_total_us(&self) -> f64 {
        self.files_us.iter().sum()
    }
}

/// Reads the system-wide /proc files into reused buffers.
pub struct ProcReader {
    root: std::path::PathBuf,
    buffers: [Vec<u8>; 6],
    /// The system files, kept open and re-read from offset 0 (reopened after a failed read).
    files: [Option<File>; 6],
    disks: DiskFilter,
    scanner: ProcessScanner,
    last_scan: Option<(f64, ProcessTick)>,
    warned: HashSet<&'static str>,
    epoch: Instant,
    last_cost: ReadCost,
    /// The process scan's BPF source, when loaded ([`ProcReader::use_task_scan`]).
    task_scan: Option<TaskScan>,
    /// Whether the last snapshot walked the tasks (else it held the previous scan).
    walked: bool,
    task_stats: Vec<ProcessStat>,
    task_io: std::collections::HashMap<i32, u64>,
}

/// The system files [`ProcReader`] reads, in the order of [`ReadCost::files_us`].
pub const SYSTEM_FILES: [&str; 6] = [
    "stat",
    "meminfo",
    "diskstats",
    "net/dev",
    "net/snmp",
    "loadavg",
];

impl ProcReader {
    /// A reader of `/proc` (physical disks detected from /sys/block). The calling process is
    /// left out of the per-process features ([`ProcessScanner::ignoring`]).
    pub fn new() -> Self {
        Self::with_root(Path::new("/proc"), DiskFilter::detect())
    }

    /// A reader of another procfs mount (tests).
    pub fn with_root(root: &Path, disks: DiskFilter) -> Self {
        ProcReader {
            root: root.to_path_buf(),
            buffers: std::array::from_fn(|_| Vec::with_capacity(8192)),
            files: Default::default(),
            disks,
            scanner: ProcessScanner::ignoring(std::process::id() as i32),
            last_scan: None,
            warned: HashSet::new(),
            epoch: Instant::now(),
            last_cost: ReadCost::default(),
            task_scan: None,
            walked: false,
            task_stats: Vec::new(),
            task_io: Default::default(),
        }
    }

    /// Reads one snapshot. Fails only when /proc/stat cannot be read; any other file that
    /// cannot be read or parsed leaves its features missing, with one warning per file.
    pub fn snapshot(&mut self) -> Result<ProcSnapshot> {
        let at_s = self.epoch.elapsed().as_secs_f64();
        let mut cost = ReadCost::default();
        let mut readable = [false; 6];
        for (i, name) in SYSTEM_FILES.iter().enumerate() {
            let started = Instant::now();
            let kept = match &self.files[i] {
                Some(file) => pread_file(file, &mut self.buffers[i], false).is_ok(),
                None => false,
            };
            let read = if kept {
                Ok(())
            } else {
                self.files[i] = None;
                File::open(self.root.join(name)).and_then(|file| {
                    pread_file(&file, &mut self.buffers[i], false)?;
                    self.files[i] = Some(file);
                    Ok(())
                })
            };
            cost.files_us[i] = micros(started);
            match read {
                Ok(()) => readable[i] = std::str::from_utf8(&self.buffers[i]).is_ok(),
                Err(e) if i == 0 => {
                    return Err(e).with_context(|| format!("read {}/stat", self.root.display()))
                }
                Err(_) => {}
            }
        }
        self.walked = false;
        let processes = match self.last_scan {
            Some((scanned_at, tick)) if at_s - scanned_at < PROCESS_SCAN_MIN_INTERVAL_S => {
                Some(tick)
            }
            previous => match self.timed_scan(&mut cost) {
                Ok(mut tick) => {
                    tick.interval_s = previous.map(|(t, _)| at_s - t).unwrap_or(0.0);
                    self.last_scan = Some((at_s, tick));
                    Some(tick)
                }
                Err(e) => {
                    if self.warned.insert("process scan") {
                        log::warn!(
                            "perception: process scan failed, process features missing: {e:#}"
                        );
                    }
                    None
                }
            },
        };
        let text = |i: usize| {
            readable[i].then(|| std::str::from_utf8(&self.buffers[i]).unwrap_or_default())
        };
        let parse_started = Instant::now();
        let snapshot = ProcSnapshot::parse(
            &ProcTexts {
                stat: text(0),
                meminfo: text(1),
                diskstats: text(2),
                net_dev: text(3),
                snmp: text(4),
                loadavg: text(5),
            },
            &self.disks,
            processes,
            at_s,
        )?;
        cost.parse_us = micros(parse_started);
        self.last_cost = cost;
        for (group, reason) in &snapshot.unavailable {
            if self.warned.insert(group) {
                log::warn!("perception: {group} unusable ({reason}); its features are missing");
            }
        }
        Ok(snapshot)
    }
}

impl ProcReader {
    /// What the last [`ProcReader::snapshot`] took, by part.
    pub fn last_cost(&self) -> ReadCost {
        self.last_cost
    }

    /// Takes the per-process accounting from the BPF task iterator instead of reading every
    /// /proc/<pid>/stat (the same [`ProcessTick`], at a fraction of the cost). Should a walk
    /// fail later, the reader warns once and goes back to /proc.
    pub fn use_task_scan(&mut self, scan: TaskScan) {
        self.task_scan = Some(scan);
    }

    /// Leave these processes out of the per-process features too, in place of the previous
    /// call's ([`ProcessScanner::ignore_also`]).
    pub fn ignore_also(&mut self, pids: impl IntoIterator<Item = i32>) {
        self.scanner.ignore_also(pids);
    }

    /// Whether the process scan uses the BPF task iterator.
    pub fn uses_task_scan(&self) -> bool {
        self.task_scan.is_some()
    }

    /// The last snapshot's threads from the BPF task walk into `threads` (cleared first):
    /// only when that snapshot walked (the scan is held between walks
    /// [`PROCESS_SCAN_MIN_INTERVAL_S`] apart) with the application fields on.
    pub fn threads(&self, threads: &mut Vec<ThreadSample>) -> ThreadWalk {
        match &self.task_scan {
            Some(scan) if self.walked && scan.threads(threads) => ThreadWalk::Threads,
            Some(_) => {
                threads.clear();
                ThreadWalk::NextWalk
            }
            None => {
                threads.clear();
                ThreadWalk::Unavailable
            }
        }
    }

    /// Whether the BPF task walks from the next snapshot on read each thread's application and
    /// behaviour (for [`ProcfsReader::threads`]); nothing without the BPF task walk.
    pub fn want_threads(&mut self, on: bool) -> Result<()> {
        match self.task_scan.as_mut() {
            Some(scan) => scan.set_with_apps(on),
            None => Ok(()),
        }
    }

    /// The process scan, with its time, source and process count put into `cost`.
    fn timed_scan(&mut self, cost: &mut ReadCost) -> Result<ProcessTick> {
        let started = Instant::now();
        let tick = match self.task_scan.as_mut() {
            Some(scan) => match scan.read(&mut self.task_stats, &mut self.task_io) {
                Ok(()) => {
                    cost.task_iter = true;
                    self.walked = true;
                    let io = &self.task_io;
                    Ok(self
                        .scanner
                        .rank(&self.task_stats, |pid| io.get(&pid).copied()))
                }
                Err(e) => {
                    log::warn!(
                        "perception: the BPF task scan failed, reading /proc/<pid>/stat from now on: {e:#}"
                    );
                    self.task_scan = None;
                    self.scanner.scan(&self.root)
                }
            },
            None => self.scanner.scan(&self.root),
        };
        cost.scan_us = micros(started);
        cost.processes = tick.as_ref().map_or(0, |t| t.count);
        tick
    }
}

/// Microseconds since `started`.
fn micros(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1e6
}

impl Default for ProcReader {
    fn default() -> Self {
        Self::new()
    }
}
