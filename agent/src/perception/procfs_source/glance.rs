//! A glance at the machine between full ticks: /proc/stat, /proc/diskstats and /proc/net/dev
//! only — no process scan, no BPF counters, no classifier — reduced to a few activity rates,
//! and the rule that says when the activity of a glance left the range seen before.
//!
//! `asa run` glances instead of sampling fully while its vote is steady
//! (`daemon/steady.rs`): a glance costs the read and parse of three small files, a full tick
//! the six system files, the task walk and the model. The rule errs towards "moved": a false
//! alarm costs one full tick, a missed change costs the time until the next full tick.
//!
//! - [`Counters`]: the cumulative counters of one glance (plain numbers);
//! - [`Activity`]: two glances' counters as rates;
//! - [`ActivityRange`]: the range of rates a set of windows spans, and whether a window left
//!   it (and which rate did);
//! - [`GlanceReader`]: the I/O (its own open files, re-read from offset 0).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};

use super::pread::pread_file;
use super::snapshot::{DiskFilter, ProcSnapshot, ProcTexts};

/// The cumulative counters one glance reads.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counters {
    /// Seconds on a monotonic clock.
    pub at_s: f64,
    /// Online CPUs.
    pub cpus: u32,
    /// CPU ticks, all CPUs: busy (user, nice, system, irq, softirq), I/O wait, and in total.
    pub busy_ticks: u64,
    /// See `busy_ticks`.
    pub iowait_ticks: u64,
    /// See `busy_ticks`.
    pub total_ticks: u64,
    /// Context switches since boot.
    pub ctxt: u64,
    /// Forks since boot.
    pub forks: u64,
    /// Bytes read and written on the physical disks (None: /proc/diskstats unusable).
    pub disk_bytes: Option<u64>,
    /// Bytes received and sent on every interface but lo (None: /proc/net/dev unusable).
    pub net_bytes: Option<u64>,
}

impl Counters {
    /// The counters of a snapshot (any other part of it is ignored).
    pub fn of(snapshot: &ProcSnapshot) -> Self {
        let cpu = &snapshot.cpu_total;
        Counters {
            at_s: snapshot.at_s,
            cpus: snapshot.cpus.len().max(1) as u32,
            busy_ticks: cpu.busy(),
            iowait_ticks: cpu.iowait,
            total_ticks: cpu.total(),
            ctxt: snapshot.ctxt,
            forks: snapshot.forks,
            disk_bytes: snapshot
                .disk
                .as_ref()
                .map(|(d, _)| (d.sectors_read + d.sectors_written) * 512),
            net_bytes: snapshot.net_dev.map(|n| n.rx_bytes + n.tx_bytes),
        }
    }
}

/// The machine's activity over a window, as rates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Activity {
    /// Online CPUs.
    pub cpus: u32,
    /// CPUs' worth of busy time.
    pub busy_cpus: f64,
    /// CPUs' worth of time waiting for I/O.
    pub iowait_cpus: f64,
    /// Context switches per second.
    pub ctxt_per_s: f64,
    /// Forks per second.
    pub forks_per_s: f64,
    /// Disk MiB read and written per second.
    pub disk_mib_per_s: Option<f64>,
    /// Network MiB received and sent per second.
    pub net_mib_per_s: Option<f64>,
}

impl Activity {
    /// The activity between two glances, `prev` before `cur`; None when no time or no CPU
    /// tick passed between them (or the counters went backwards in time).
    pub fn between(prev: &Counters, cur: &Counters) -> Option<Self> {
        let dt = cur.at_s - prev.at_s;
        let ticks = cur.total_ticks.saturating_sub(prev.total_ticks);
        if dt <= 0.0 || ticks == 0 {
            return None;
        }
        let cpus = f64::from(cur.cpus);
        let share = |a: u64, b: u64| b.saturating_sub(a) as f64 / ticks as f64 * cpus;
        let per_s = |a: u64, b: u64| b.saturating_sub(a) as f64 / dt;
        let mib = |a: Option<u64>, b: Option<u64>| Some(per_s(a?, b?) / (1024.0 * 1024.0));
        Some(Activity {
            cpus: cur.cpus,
            busy_cpus: share(prev.busy_ticks, cur.busy_ticks),
            iowait_cpus: share(prev.iowait_ticks, cur.iowait_ticks),
            ctxt_per_s: per_s(prev.ctxt, cur.ctxt),
            forks_per_s: per_s(prev.forks, cur.forks),
            disk_mib_per_s: mib(prev.disk_bytes, cur.disk_bytes),
            net_mib_per_s: mib(prev.net_bytes, cur.net_bytes),
        })
    }
}

/// How far a window's activity may stray from the range seen before and still count as the
/// same.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ActivityTolerance {
    /// Busy and I/O-wait time: this share of the machine's CPUs, and at least `min_cpus`.
    pub cpu_share: f64,
    /// See `cpu_share`.
    pub min_cpus: f64,
    /// Rates (switches, forks, disk, network): a window may be this many times above the
    /// highest rate seen, or below the lowest, unless it is below the rate's floor.
    pub ratio: f64,
    /// Context switches per second below which a rate never counts as moved.
    pub ctxt_floor: f64,
    /// Forks per second, likewise.
    pub forks_floor: f64,
    /// Disk or network MiB per second, likewise.
    pub io_floor_mib: f64,
}

impl Default for ActivityTolerance {
    /// A tenth of the machine (at least 0.3 CPUs) for CPU time; a factor of 2 for rates
    /// above 2000 switches, 20 forks or 4 MiB a second. A load starting or ending, or one
    /// kind of load giving way to another, moves at least one of them by far more.
    fn default() -> Self {
        ActivityTolerance {
            cpu_share: 0.1,
            min_cpus: 0.3,
            ratio: 2.0,
            ctxt_floor: 2000.0,
            forks_floor: 20.0,
            io_floor_mib: 4.0,
        }
    }
}

/// The lowest and highest of every rate over a set of windows: what one load looks like,
/// bursts included (writeback comes in bursts seconds apart; a range holds both the burst and
/// the quiet, where a mean would fit neither).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ActivityRange {
    lo: Activity,
    hi: Activity,
}

impl ActivityRange {
    /// The range of one window.
    pub fn of(window: &Activity) -> Self {
        ActivityRange {
            lo: *window,
            hi: *window,
        }
    }

    /// Widens the range to hold `window` too.
    pub fn widen(&mut self, window: &Activity) {
        let (lo, hi) = (&mut self.lo, &mut self.hi);
        lo.busy_cpus = lo.busy_cpus.min(window.busy_cpus);
        hi.busy_cpus = hi.busy_cpus.max(window.busy_cpus);
        lo.iowait_cpus = lo.iowait_cpus.min(window.iowait_cpus);
        hi.iowait_cpus = hi.iowait_cpus.max(window.iowait_cpus);
        lo.ctxt_per_s = lo.ctxt_per_s.min(window.ctxt_per_s);
        hi.ctxt_per_s = hi.ctxt_per_s.max(window.ctxt_per_s);
        lo.forks_per_s = lo.forks_per_s.min(window.forks_per_s);
        hi.forks_per_s = hi.forks_per_s.max(window.forks_per_s);
        let pair = |a: Option<f64>, b: Option<f64>, f: fn(f64, f64) -> f64| Some(f(a?, b?));
        lo.disk_mib_per_s = pair(lo.disk_mib_per_s, window.disk_mib_per_s, f64::min);
        hi.disk_mib_per_s = pair(hi.disk_mib_per_s, window.disk_mib_per_s, f64::max);
        lo.net_mib_per_s = pair(lo.net_mib_per_s, window.net_mib_per_s, f64::min);
        hi.net_mib_per_s = pair(hi.net_mib_per_s, window.net_mib_per_s, f64::max);
        hi.cpus = window.cpus;
        lo.cpus = window.cpus;
    }

    /// Which rate of `window` left the range by more than `tolerance`, as a short phrase
    /// ("busy 0.20 CPUs, seen 1.40–1.80"); None while every rate is within it. A rate either
    /// side cannot read is no change.
    pub fn moved(&self, window: &Activity, tolerance: &ActivityTolerance) -> Option<String> {
        let (lo, hi) = (&self.lo, &self.hi);
        let cpu_tolerance = (tolerance.cpu_share * f64::from(window.cpus)).max(tolerance.min_cpus);
        let cpus = |what: &str, lo: f64, hi: f64, x: f64| {
            (x < lo - cpu_tolerance || x > hi + cpu_tolerance)
                .then(|| format!("{what} {x:.2} CPUs, seen {lo:.2}–{hi:.2}"))
        };
        let rate = |what: &str, unit: &str, lo: f64, hi: f64, x: f64, floor: f64| {
            let above = x >= floor && x > hi * tolerance.ratio;
            let below = lo >= floor && x < lo / tolerance.ratio;
            (above || below).then(|| format!("{what} {x:.1} {unit}, seen {lo:.1}–{hi:.1}"))
        };
        let io = |what: &str, lo: Option<f64>, hi: Option<f64>, x: Option<f64>| {
            rate(what, "MiB/s", lo?, hi?, x?, tolerance.io_floor_mib)
        };
        cpus("busy", lo.busy_cpus, hi.busy_cpus, window.busy_cpus)
            .or_else(|| {
                cpus(
                    "I/O wait",
                    lo.iowait_cpus,
                    hi.iowait_cpus,
                    window.iowait_cpus,
                )
            })
            .or_else(|| {
                rate(
                    "context switches",
                    "/s",
                    lo.ctxt_per_s,
                    hi.ctxt_per_s,
                    window.ctxt_per_s,
                    tolerance.ctxt_floor,
                )
            })
            .or_else(|| {
                rate(
                    "forks",
                    "/s",
                    lo.forks_per_s,
                    hi.forks_per_s,
                    window.forks_per_s,
                    tolerance.forks_floor,
                )
            })
            .or_else(|| {
                io(
                    "disk",
                    lo.disk_mib_per_s,
                    hi.disk_mib_per_s,
                    window.disk_mib_per_s,
                )
            })
            .or_else(|| {
                io(
                    "network",
                    lo.net_mib_per_s,
                    hi.net_mib_per_s,
                    window.net_mib_per_s,
                )
            })
    }
}

/// The glance's files, in this order.
const GLANCE_FILES: [&str; 3] = ["stat", "diskstats", "net/dev"];

/// Reads glances: keeps /proc/stat, /proc/diskstats and /proc/net/dev open (its own handles,
/// apart from the full sampler's) and re-reads them from offset 0.
pub struct GlanceReader {
    root: PathBuf,
    files: [Option<File>; 3],
    buffers: [Vec<u8>; 3],
    disks: DiskFilter,
    epoch: Instant,
}

impl GlanceReader {
    /// A reader of `/proc` (physical disks detected from /sys/block).
    pub fn new() -> Self {
        Self::with_root(Path::new("/proc"), DiskFilter::detect())
    }

    /// A reader of another procfs mount (tests).
    pub fn with_root(root: &Path, disks: DiskFilter) -> Self {
        GlanceReader {
            root: root.to_path_buf(),
            files: Default::default(),
            buffers: std::array::from_fn(|_| Vec::with_capacity(4096)),
            disks,
            epoch: Instant::now(),
        }
    }

    /// One glance. Fails only when /proc/stat cannot be read or parsed; an unreadable
    /// diskstats or net/dev leaves its rate out.
    pub fn glance(&mut self) -> Result<Counters> {
        let at_s = self.epoch.elapsed().as_secs_f64();
        let mut readable = [false; 3];
        for (i, name) in GLANCE_FILES.iter().enumerate() {
            let kept = match &self.files[i] {
                Some(file) => pread_file(file, &mut self.buffers[i], false).is_ok(),
                None => false,
            };
            let read = kept || {
                self.files[i] = None;
                File::open(self.root.join(name))
                    .and_then(|file| {
                        pread_file(&file, &mut self.buffers[i], false)?;
                        self.files[i] = Some(file);
                        Ok(())
                    })
                    .is_ok()
            };
            readable[i] = read && std::str::from_utf8(&self.buffers[i]).is_ok();
        }
        let text = |i: usize| {
            readable[i].then(|| std::str::from_utf8(&self.buffers[i]).unwrap_or_default())
        };
        let snapshot = ProcSnapshot::parse(
            &ProcTexts {
                stat: text(0),
                diskstats: text(1),
                net_dev: text(2),
                ..ProcTexts::default()
            },
            &self.disks,
            None,
            at_s,
        )
        .with_context(|| format!("a glance at {}", self.root.display()))?;
        Ok(Counters::of(&snapshot))
    }
}

impl Default for GlanceReader {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steady_load() -> Activity {
        Activity {
            cpus: 2,
            busy_cpus: 1.6,
            iowait_cpus: 0.05,
            ctxt_per_s: 4000.0,
            forks_per_s: 2.0,
            disk_mib_per_s: Some(0.5),
            net_mib_per_s: Some(0.0),
        }
    }

    fn moved(range: &Activity, window: &Activity) -> Option<String> {
        ActivityRange::of(range).moved(window, &ActivityTolerance::default())
    }

    #[test]
    fn the_same_load_within_its_noise_has_not_moved() {
        let window = Activity {
            busy_cpus: 1.4,
            ctxt_per_s: 6000.0,
            forks_per_s: 15.0,
            disk_mib_per_s: Some(3.0),
            ..steady_load()
        };
        assert_eq!(moved(&steady_load(), &window), None);
    }

    #[test]
    fn bursts_seen_before_are_within_the_range() {
        let burst = Activity {
            disk_mib_per_s: Some(60.0),
            ..steady_load()
        };
        let mut range = ActivityRange::of(&steady_load());
        assert!(range.moved(&burst, &ActivityTolerance::default()).is_some());
        range.widen(&burst);
        let tolerance = ActivityTolerance::default();
        assert_eq!(range.moved(&burst, &tolerance), None);
        assert_eq!(range.moved(&steady_load(), &tolerance), None);
        let heavier = Activity {
            disk_mib_per_s: Some(200.0),
            ..steady_load()
        };
        assert!(range.moved(&heavier, &tolerance).is_some());
    }

    #[test]
    fn a_steady_rate_that_stops_has_moved() {
        let fio = Activity {
            disk_mib_per_s: Some(30.0),
            ..steady_load()
        };
        let stopped = Activity {
            disk_mib_per_s: Some(0.0),
            ..steady_load()
        };
        let m = moved(&fio, &stopped).unwrap();
        assert!(m.starts_with("disk 0.0 MiB/s"), "{m}");
    }

    #[test]
    fn a_load_that_ends_moves_the_busy_time() {
        let idle = Activity {
            busy_cpus: 0.2,
            ctxt_per_s: 600.0,
            ..steady_load()
        };
        let m = moved(&steady_load(), &idle).unwrap();
        assert!(m.starts_with("busy 0.20 CPUs, seen 1.60"), "{m}");
    }

    #[test]
    fn disk_traffic_starting_beside_the_same_cpu_time_is_a_change() {
        let io = Activity {
            disk_mib_per_s: Some(40.0),
            ..steady_load()
        };
        let m = moved(&steady_load(), &io).unwrap();
        assert!(m.starts_with("disk"), "{m}");
    }

    #[test]
    fn rates_below_their_floor_never_count() {
        let base = Activity {
            ctxt_per_s: 300.0,
            forks_per_s: 0.0,
            net_mib_per_s: Some(0.0),
            ..steady_load()
        };
        let window = Activity {
            ctxt_per_s: 1900.0,
            forks_per_s: 19.0,
            net_mib_per_s: Some(3.9),
            ..base
        };
        assert_eq!(moved(&base, &window), None);
    }

    #[test]
    fn the_cpu_tolerance_grows_with_the_machine() {
        let big = |busy| Activity {
            cpus: 64,
            busy_cpus: busy,
            ..steady_load()
        };
        assert_eq!(moved(&big(40.0), &big(34.0)), None);
        assert!(moved(&big(40.0), &big(30.0)).is_some());
    }

    #[test]
    fn an_unreadable_rate_is_no_change() {
        let window = Activity {
            disk_mib_per_s: None,
            ..steady_load()
        };
        assert_eq!(moved(&steady_load(), &window), None);
    }

    #[test]
    fn rates_come_from_the_counters_difference() {
        let a = Counters {
            at_s: 10.0,
            cpus: 2,
            busy_ticks: 1000,
            iowait_ticks: 10,
            total_ticks: 2000,
            ctxt: 50_000,
            forks: 100,
            disk_bytes: Some(0),
            net_bytes: None,
        };
        let b = Counters {
            at_s: 12.0,
            busy_ticks: 1300,
            iowait_ticks: 50,
            total_ticks: 2400,
            ctxt: 58_000,
            forks: 104,
            disk_bytes: Some(8 * 1024 * 1024),
            ..a
        };
        let r = Activity::between(&a, &b).unwrap();
        assert!((r.busy_cpus - 1.5).abs() < 1e-9, "{r:?}");
        assert!((r.iowait_cpus - 0.2).abs() < 1e-9, "{r:?}");
        assert_eq!((r.ctxt_per_s, r.forks_per_s), (4000.0, 2.0));
        assert_eq!((r.disk_mib_per_s, r.net_mib_per_s), (Some(4.0), None));
        assert_eq!(Activity::between(&b, &a), None, "backwards in time");
    }

    #[test]
    fn a_glance_reads_the_three_files_of_a_procfs_tree() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("net")).unwrap();
        let stat = "cpu  100 0 50 800 10 0 5 0 0 0\ncpu0 50 0 25 400 5 0 3 0 0 0\ncpu1 50 0 25 400 5 0 2 0 0 0\nctxt 12345\nbtime 1\nprocesses 77\nprocs_running 2\nprocs_blocked 0\n";
        std::fs::write(dir.path().join("stat"), stat).unwrap();
        std::fs::write(
            dir.path().join("diskstats"),
            "   8       0 sda 10 0 100 5 20 0 300 7 0 9 12 0 0 0 0 0 0\n",
        )
        .unwrap();
        let names = DiskFilter::Names(["sda".to_string()].into_iter().collect());
        let mut reader = GlanceReader::with_root(dir.path(), names);
        let c = reader.glance().unwrap();
        assert_eq!((c.cpus, c.ctxt, c.forks), (2, 12345, 77));
        assert_eq!(
            (c.busy_ticks, c.iowait_ticks, c.total_ticks),
            (155, 10, 965)
        );
        assert_eq!(c.disk_bytes, Some(400 * 512));
        assert_eq!(c.net_bytes, None, "no net/dev file");
        std::fs::remove_file(dir.path().join("stat")).unwrap();
        std::fs::write(dir.path().join("stat"), "garbage").unwrap();
        // The kept handle still reads the removed file's inode; a fresh reader fails.
        let mut fresh = GlanceReader::with_root(dir.path(), DiskFilter::NotVirtual);
        assert!(fresh.glance().is_err());
    }
}
