//! The procfs half of the sampler: one [`ProcSnapshot`] per tick, and
//! [`procfs_features`] turning two consecutive snapshots into rates and shares.
//!
//! Cost per tick: /proc/stat, /proc/meminfo, /proc/diskstats, /proc/net/dev, /proc/net/snmp
//! and /proc/loadavg are each read once into reused buffers and parsed with `procfs-core`;
//! every /proc/<pid>/stat is read exactly once (CPU time, minor faults, threads and RSS), and
//! besides that only /proc/<pid>/io of the few busiest and newest processes
//! ([`IO_READS_PER_SCAN`], [`IO_NEW_READS_PER_SCAN`]), for the I/O rates of the busiest
//! process and of the process doing the most I/O (no status/statm/fd directories). NET_RX
//! softirqs come from the `softirq` line of the /proc/stat read already made, not from a
//! second file.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::Cursor;
use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use procfs::prelude::*;
use procfs::{DiskStats, ExplicitSystemInfo, KernelStats, LoadAverage, Meminfo};

/// Share of a tick a CPU must be busy to count as a hot spot.
pub const HOTSPOT_BUSY_SHARE: f64 = 0.9;

/// The per-process scan (one read of every /proc/<pid>/stat, the dominant cost of a tick) runs
/// at most about once per second: at faster ticks the process features are held between scans
/// and `top_proc_cpu_share` is averaged over the scan interval. 0.9 s, not 1 s, so a 1 Hz
/// sampler whose ticks jitter early still scans every tick.
pub const PROCESS_SCAN_MIN_INTERVAL_S: f64 = 0.9;

/// The texts of the system-wide /proc files one snapshot is parsed from (None = unreadable).
#[derive(Debug, Clone, Default)]
pub struct ProcTexts<'a> {
    /// /proc/stat
    pub stat: Option<&'a str>,
    /// /proc/meminfo
    pub meminfo: Option<&'a str>,
    /// /proc/diskstats
    pub diskstats: Option<&'a str>,
    /// /proc/net/dev
    pub net_dev: Option<&'a str>,
    /// /proc/net/snmp
    pub snmp: Option<&'a str>,
    /// /proc/loadavg
    pub loadavg: Option<&'a str>,
}

/// Cumulative counters of one CPU (ticks).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuTicks {
    /// user (includes guest)
    pub user: u64,
    /// nice (includes guest_nice)
    pub nice: u64,
    /// system
    pub system: u64,
    /// idle
    pub idle: u64,
    /// iowait
    pub iowait: u64,
    /// irq
    pub irq: u64,
    /// softirq
    pub softirq: u64,
    /// steal
    pub steal: u64,
}

impl CpuTicks {
    fn from_cpu_time(t: &procfs::CpuTime) -> Self {
        CpuTicks {
            user: t.user,
            nice: t.nice,
            system: t.system,
            idle: t.idle,
            iowait: t.iowait.unwrap_or(0),
            irq: t.irq.unwrap_or(0),
            softirq: t.softirq.unwrap_or(0),
            steal: t.steal.unwrap_or(0),
        }
    }

    fn total(&self) -> u64 {
        self.user
            + self.nice
            + self.system
            + self.idle
            + self.iowait
            + self.irq
            + self.softirq
            + self.steal
    }

    /// Time not idle, not waiting for I/O and not stolen.
    fn busy(&self) -> u64 {
        self.user + self.nice + self.system + self.irq + self.softirq
    }

    fn saturating_sub(&self, o: &Self) -> Self {
        CpuTicks {
            user: self.user.saturating_sub(o.user),
            nice: self.nice.saturating_sub(o.nice),
            system: self.system.saturating_sub(o.system),
            idle: self.idle.saturating_sub(o.idle),
            iowait: self.iowait.saturating_sub(o.iowait),
            irq: self.irq.saturating_sub(o.irq),
            softirq: self.softirq.saturating_sub(o.softirq),
            steal: self.steal.saturating_sub(o.steal),
        }
    }
}

/// Cumulative disk counters summed over the physical disks.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DiskTotals {
    /// Completed reads.
    pub reads: u64,
    /// Completed writes.
    pub writes: u64,
    /// Sectors (512 B) read.
    pub sectors_read: u64,
    /// Sectors (512 B) written.
    pub sectors_written: u64,
    /// ms spent on reads.
    pub read_ms: u64,
    /// ms spent on writes.
    pub write_ms: u64,
    /// Weighted ms with I/O in flight (sum over disks).
    pub weighted_ms: u64,
}

/// Cumulative interface counters (all interfaces but lo).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct NetDevTotals {
    /// Bytes received.
    pub rx_bytes: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Packets received.
    pub rx_packets: u64,
    /// Packets sent.
    pub tx_packets: u64,
}

/// TCP and UDP counters of /proc/net/snmp (loopback included).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TcpUdpTotals {
    /// TCP ActiveOpens.
    pub tcp_active_opens: u64,
    /// TCP PassiveOpens.
    pub tcp_passive_opens: u64,
    /// TCP AttemptFails.
    pub tcp_attempt_fails: u64,
    /// TCP EstabResets.
    pub tcp_estab_resets: u64,
    /// TCP CurrEstab (a gauge).
    pub tcp_curr_estab: u64,
    /// TCP InSegs.
    pub tcp_in_segs: u64,
    /// TCP OutSegs.
    pub tcp_out_segs: u64,
    /// TCP RetransSegs.
    pub tcp_retrans_segs: u64,
    /// UDP InDatagrams.
    pub udp_in: u64,
    /// UDP OutDatagrams.
    pub udp_out: u64,
}

/// Memory gauges of /proc/meminfo, bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MemTotals {
    /// MemTotal.
    pub total: u64,
    /// MemFree.
    pub free: u64,
    /// MemAvailable (MemFree on kernels without it).
    pub available: u64,
    /// Cached.
    pub cached: u64,
    /// Buffers.
    pub buffers: u64,
    /// SwapTotal.
    pub swap_total: u64,
    /// SwapFree.
    pub swap_free: u64,
    /// Dirty + Writeback: file data waiting to be written or being written.
    pub dirty: u64,
}

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
}

/// Everything system-wide read from /proc at one instant. /proc/stat is required; every other
/// group is None when its file could not be read or parsed (its features are then missing
/// instead of the sampler failing, e.g. on a kernel whose file format a parser does not know).
#[derive(Debug, Clone, PartialEq)]
pub struct ProcSnapshot {
    /// Seconds on a monotonic clock.
    pub at_s: f64,
    /// All CPUs.
    pub cpu_total: CpuTicks,
    /// Per online CPU.
    pub cpus: Vec<CpuTicks>,
    /// Context switches since boot.
    pub ctxt: u64,
    /// Forks since boot.
    pub forks: u64,
    /// Tasks runnable now.
    pub procs_running: Option<u64>,
    /// Tasks blocked on I/O now.
    pub procs_blocked: Option<u64>,
    /// NET_RX softirqs since boot (None if the kernel prints no softirq line).
    pub net_rx_softirqs: Option<u64>,
    /// /proc/meminfo.
    pub memory: Option<MemTotals>,
    /// /proc/diskstats: totals over the physical disks, and per disk the ms with I/O in
    /// flight (io_ticks) by name.
    pub disk: Option<(DiskTotals, Vec<(String, u64)>)>,
    /// /proc/net/dev.
    pub net_dev: Option<NetDevTotals>,
    /// /proc/net/snmp.
    pub tcp_udp: Option<TcpUdpTotals>,
    /// Threads in the system (/proc/loadavg).
    pub threads: Option<u64>,
    /// Per-process part.
    pub processes: Option<ProcessTick>,
    /// Groups that are None in this snapshot, with the reason.
    pub unavailable: Vec<(&'static str, String)>,
}

/// Which block devices count as disks: whole physical devices, not partitions, loop, RAM,
/// device-mapper or md devices (they would count the same I/O twice).
#[derive(Debug, Clone)]
pub enum DiskFilter {
    /// Exactly these names (from /sys/block/*/device).
    Names(HashSet<String>),
    /// /sys unavailable: every device whose name does not start with a virtual prefix.
    NotVirtual,
}

impl DiskFilter {
    /// Physical disks of this machine: /sys/block entries that have a `device` link.
    pub fn detect() -> Self {
        match std::fs::read_dir("/sys/block") {
            Ok(entries) => DiskFilter::Names(
                entries
                    .flatten()
                    .filter(|e| e.path().join("device").exists())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect(),
            ),
            Err(e) => {
                log::warn!("perception: /sys/block unreadable ({e}); counting every non-virtual block device as a disk");
                DiskFilter::NotVirtual
            }
        }
    }

    fn accepts(&self, name: &str) -> bool {
        match self {
            DiskFilter::Names(names) => names.contains(name),
            DiskFilter::NotVirtual => !["loop", "ram", "zram", "dm-", "md", "sr", "nbd"]
                .iter()
                .any(|p| name.starts_with(p)),
        }
    }
}

/// Parses the `softirq` line of /proc/stat: `softirq total HI TIMER NET_TX NET_RX ...`.
fn net_rx_softirqs(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("softirq "))?;
    line.split_ascii_whitespace().nth(5)?.parse().ok()
}

/// Parses the `Proto: Name Name ...` / `Proto: value value ...` line pairs of
/// /proc/net/snmp and returns a lookup of one counter. Own parser, not procfs-core's `Snmp`:
/// that one requires every field of a fixed kernel version (it fails on kernels without
/// UDP-Lite, e.g. 7.x), while this one needs only the counters used here.
fn parse_snmp(text: &str) -> Result<impl Fn(&str, &str) -> Result<u64> + '_> {
    let mut sections: Vec<(&str, Vec<&str>, Vec<&str>)> = Vec::new();
    let mut lines = text.lines();
    while let Some(names) = lines.next() {
        let values = lines
            .next()
            .with_context(|| format!("header {names:?} without a value line"))?;
        let (Some((proto, names)), Some((proto_v, values))) =
            (names.split_once(':'), values.split_once(':'))
        else {
            bail!("malformed line pair {names:?} / {values:?}");
        };
        if proto != proto_v {
            bail!("header {proto:?} followed by values of {proto_v:?}");
        }
        sections.push((
            proto,
            names.split_ascii_whitespace().collect(),
            values.split_ascii_whitespace().collect(),
        ));
    }
    Ok(move |proto: &str, name: &str| -> Result<u64> {
        let (_, names, values) = sections
            .iter()
            .find(|(p, _, _)| *p == proto)
            .with_context(|| format!("no {proto} section"))?;
        let i = names
            .iter()
            .position(|n| *n == name)
            .with_context(|| format!("no {proto}:{name} counter"))?;
        let value = values
            .get(i)
            .with_context(|| format!("no value for {proto}:{name}"))?;
        // MaxConn is -1 on Linux: parse signed; the counters read here are never negative.
        Ok(value
            .parse::<i64>()
            .with_context(|| format!("{proto}:{name} = {value:?}"))? as u64)
    })
}

fn system_info() -> ExplicitSystemInfo {
    ExplicitSystemInfo {
        boot_time_secs: 0,
        ticks_per_second: procfs::ticks_per_second(),
        page_size: procfs::page_size(),
        is_little_endian: cfg!(target_endian = "little"),
    }
}

impl ProcSnapshot {
    /// Parses the system-wide files (None = the file could not be read); `processes` comes
    /// from a [`ProcessScanner`]. Fails only if /proc/stat is missing or unparsable.
    pub fn parse(
        texts: &ProcTexts<'_>,
        disks: &DiskFilter,
        processes: Option<ProcessTick>,
        at_s: f64,
    ) -> Result<Self> {
        let si = system_info();
        let stat_text = texts.stat.context("/proc/stat is unreadable")?;
        let stat =
            KernelStats::from_read(Cursor::new(stat_text), &si).context("parse /proc/stat")?;
        let mut unavailable = Vec::new();
        let mut group =
            |name: &'static str, text: Option<&str>, parse: &dyn Fn(&str) -> Result<()>| {
                let outcome = match text {
                    None => Err(anyhow::anyhow!("unreadable")),
                    Some(text) => parse(text),
                };
                if let Err(e) = outcome {
                    unavailable.push((name, format!("{e:#}")));
                }
            };
        let memory = std::cell::Cell::new(None);
        group("/proc/meminfo", texts.meminfo, &|text| {
            let m = Meminfo::from_read(Cursor::new(text))?;
            memory.set(Some(MemTotals {
                total: m.mem_total,
                free: m.mem_free,
                available: m.mem_available.unwrap_or(m.mem_free),
                cached: m.cached,
                buffers: m.buffers,
                swap_total: m.swap_total,
                swap_free: m.swap_free,
                dirty: m.dirty + m.writeback,
            }));
            Ok(())
        });
        let disk = std::cell::RefCell::new(None);
        group("/proc/diskstats", texts.diskstats, &|text| {
            let stats = DiskStats::from_read(Cursor::new(text))?;
            let mut totals = DiskTotals::default();
            let mut busy = Vec::new();
            for d in stats.0.iter().filter(|d| disks.accepts(&d.name)) {
                totals.reads += d.reads;
                totals.writes += d.writes;
                totals.sectors_read += d.sectors_read;
                totals.sectors_written += d.sectors_written;
                totals.read_ms += d.time_reading;
                totals.write_ms += d.time_writing;
                totals.weighted_ms += d.weighted_time_in_progress;
                busy.push((d.name.clone(), d.time_in_progress));
            }
            *disk.borrow_mut() = Some((totals, busy));
            Ok(())
        });
        let net_dev = std::cell::Cell::new(None);
        group("/proc/net/dev", texts.net_dev, &|text| {
            let status = procfs::net::InterfaceDeviceStatus::from_read(Cursor::new(text))?;
            let mut net = NetDevTotals::default();
            for (_, dev) in status.0.iter().filter(|(name, _)| *name != "lo") {
                net.rx_bytes += dev.recv_bytes;
                net.tx_bytes += dev.sent_bytes;
                net.rx_packets += dev.recv_packets;
                net.tx_packets += dev.sent_packets;
            }
            net_dev.set(Some(net));
            Ok(())
        });
        let tcp_udp = std::cell::Cell::new(None);
        group("/proc/net/snmp", texts.snmp, &|text| {
            let snmp = parse_snmp(text)?;
            tcp_udp.set(Some(TcpUdpTotals {
                tcp_active_opens: snmp("Tcp", "ActiveOpens")?,
                tcp_passive_opens: snmp("Tcp", "PassiveOpens")?,
                tcp_attempt_fails: snmp("Tcp", "AttemptFails")?,
                tcp_estab_resets: snmp("Tcp", "EstabResets")?,
                tcp_curr_estab: snmp("Tcp", "CurrEstab")?,
                tcp_in_segs: snmp("Tcp", "InSegs")?,
                tcp_out_segs: snmp("Tcp", "OutSegs")?,
                tcp_retrans_segs: snmp("Tcp", "RetransSegs")?,
                udp_in: snmp("Udp", "InDatagrams")?,
                udp_out: snmp("Udp", "OutDatagrams")?,
            }));
            Ok(())
        });
        let threads = std::cell::Cell::new(None);
        group("/proc/loadavg", texts.loadavg, &|text| {
            threads.set(Some(LoadAverage::from_read(Cursor::new(text))?.max as u64));
            Ok(())
        });
        if processes.is_none() {
            unavailable.push(("/proc/<pid>/stat", "process scan failed".to_string()));
        }
        Ok(ProcSnapshot {
            at_s,
            cpu_total: CpuTicks::from_cpu_time(&stat.total),
            cpus: stat.cpu_time.iter().map(CpuTicks::from_cpu_time).collect(),
            ctxt: stat.ctxt,
            forks: stat.processes,
            procs_running: stat.procs_running.map(u64::from),
            procs_blocked: stat.procs_blocked.map(u64::from),
            net_rx_softirqs: net_rx_softirqs(stat_text),
            memory: memory.get(),
            disk: disk.into_inner(),
            net_dev: net_dev.get(),
            tcp_udp: tcp_udp.get(),
            threads: threads.get(),
            processes,
            unavailable,
        })
    }
}

fn ratio(num: f64, den: f64) -> f64 {
    if den > 0.0 {
        num / den
    } else {
        0.0
    }
}

/// Computes the procfs features from two consecutive snapshots; `emit(name, value)` is called
/// once per feature (names as in the schema) whose inputs are present in both snapshots.
pub fn procfs_features(
    prev: &ProcSnapshot,
    cur: &ProcSnapshot,
    emit: &mut dyn FnMut(&'static str, f64),
) {
    let dt = (cur.at_s - prev.at_s).max(1e-9);
    let ncpu = cur.cpus.len().max(1) as f64;
    let per_s = |a: u64, b: u64| b.saturating_sub(a) as f64 / dt;

    // CPU shares over all CPUs.
    let d = cur.cpu_total.saturating_sub(&prev.cpu_total);
    let total = d.total() as f64;
    emit("cpu_user_share", ratio(d.user as f64, total));
    emit("cpu_nice_share", ratio(d.nice as f64, total));
    emit("cpu_system_share", ratio(d.system as f64, total));
    emit("cpu_idle_share", ratio(d.idle as f64, total));
    emit("cpu_iowait_share", ratio(d.iowait as f64, total));
    emit("cpu_irq_share", ratio(d.irq as f64, total));
    emit("cpu_softirq_share", ratio(d.softirq as f64, total));
    emit("cpu_steal_share", ratio(d.steal as f64, total));
    let hot = cur
        .cpus
        .iter()
        .zip(&prev.cpus)
        .filter(|(c, p)| {
            let d = c.saturating_sub(p);
            d.total() > 0 && d.busy() as f64 >= HOTSPOT_BUSY_SHARE * d.total() as f64
        })
        .count();
    emit(
        "cpu_hotspot_core_ratio",
        ratio(hot as f64, cur.cpus.len() as f64),
    );
    emit("ctxt_per_s", per_s(prev.ctxt, cur.ctxt));
    emit("forks_per_s", per_s(prev.forks, cur.forks));
    if let Some(running) = cur.procs_running {
        emit("procs_runnable_per_cpu", running as f64 / ncpu);
    }
    if let Some(blocked) = cur.procs_blocked {
        emit("procs_blocked_per_cpu", blocked as f64 / ncpu);
    }
    if let (Some(a), Some(b)) = (prev.net_rx_softirqs, cur.net_rx_softirqs) {
        emit("net_rx_softirq_per_s", per_s(a, b));
    }

    // Memory (gauges, shares of the total).
    if let Some(m) = &cur.memory {
        let total = m.total as f64;
        emit("mem_free_share", ratio(m.free as f64, total));
        emit("mem_available_share", ratio(m.available as f64, total));
        emit("mem_cached_share", ratio(m.cached as f64, total));
        emit("mem_buffers_share", ratio(m.buffers as f64, total));
        emit("mem_dirty_share", ratio(m.dirty as f64, total));
        emit(
            "swap_used_share",
            ratio(
                m.swap_total.saturating_sub(m.swap_free) as f64,
                m.swap_total as f64,
            ),
        );
    }

    // Disks.
    if let (Some((a, a_busy)), Some((b, b_busy))) = (&prev.disk, &cur.disk) {
        let reads = b.reads.saturating_sub(a.reads) as f64;
        let writes = b.writes.saturating_sub(a.writes) as f64;
        emit("disk_read_ops_per_s", reads / dt);
        emit("disk_write_ops_per_s", writes / dt);
        emit(
            "disk_read_latency_ms",
            ratio(b.read_ms.saturating_sub(a.read_ms) as f64, reads),
        );
        emit(
            "disk_write_latency_ms",
            ratio(b.write_ms.saturating_sub(a.write_ms) as f64, writes),
        );
        let sectors =
            (b.sectors_read + b.sectors_written).saturating_sub(a.sectors_read + a.sectors_written);
        emit(
            "disk_avg_io_kib",
            ratio(sectors as f64 * 512.0 / 1024.0, reads + writes),
        );
        emit(
            "disk_queue_len",
            b.weighted_ms.saturating_sub(a.weighted_ms) as f64 / (dt * 1000.0),
        );
        let busiest_ms = b_busy
            .iter()
            .filter_map(|(name, ms)| {
                let before = a_busy.iter().find(|(n, _)| n == name)?.1;
                Some(ms.saturating_sub(before))
            })
            .max()
            .unwrap_or(0);
        emit(
            "disk_busy_share",
            (busiest_ms as f64 / (dt * 1000.0)).min(1.0),
        );
    }

    // Network.
    if let (Some(a), Some(b)) = (&prev.net_dev, &cur.net_dev) {
        emit("net_rx_kib_per_s", per_s(a.rx_bytes, b.rx_bytes) / 1024.0);
        emit("net_tx_kib_per_s", per_s(a.tx_bytes, b.tx_bytes) / 1024.0);
        emit("net_rx_packets_per_s", per_s(a.rx_packets, b.rx_packets));
        emit("net_tx_packets_per_s", per_s(a.tx_packets, b.tx_packets));
    }
    if let (Some(a), Some(b)) = (&prev.tcp_udp, &cur.tcp_udp) {
        emit("tcp_established", b.tcp_curr_estab as f64);
        let opened = (b.tcp_active_opens + b.tcp_passive_opens)
            .saturating_sub(a.tcp_active_opens + a.tcp_passive_opens);
        emit("tcp_new_conn_per_s", opened as f64 / dt);
        let established =
            opened.saturating_sub(b.tcp_attempt_fails.saturating_sub(a.tcp_attempt_fails)) as f64;
        let closed = (established - (b.tcp_curr_estab as f64 - a.tcp_curr_estab as f64)).max(0.0);
        emit("tcp_closed_conn_per_s", closed / dt);
        emit(
            "tcp_reset_per_s",
            per_s(a.tcp_estab_resets, b.tcp_estab_resets),
        );
        let out_segs = b.tcp_out_segs.saturating_sub(a.tcp_out_segs) as f64;
        emit(
            "tcp_retrans_share",
            ratio(
                b.tcp_retrans_segs.saturating_sub(a.tcp_retrans_segs) as f64,
                out_segs,
            )
            .min(1.0),
        );
        let tcp = out_segs + b.tcp_in_segs.saturating_sub(a.tcp_in_segs) as f64;
        let udp = (b.udp_in + b.udp_out).saturating_sub(a.udp_in + a.udp_out) as f64;
        emit("tcp_share_of_tcp_udp", ratio(tcp, tcp + udp));
    }

    // Processes.
    if let Some(threads) = cur.threads {
        emit("thread_count", threads as f64);
    }
    if let Some(p) = &cur.processes {
        emit("process_count", p.count as f64);
        let ticks_per_s = procfs::ticks_per_second() as f64;
        emit(
            "top_proc_cpu_share",
            ratio(p.top_cpu_ticks as f64, ticks_per_s * p.interval_s * ncpu).min(1.0),
        );
        if let Some(m) = &cur.memory {
            emit(
                "top_proc_mem_share",
                ratio(p.top_rss_bytes as f64, m.total as f64),
            );
        }
        emit("top_proc_threads", p.top_threads as f64);
        emit(
            "top_proc_minflt_per_s",
            ratio(p.top_minflt as f64, p.interval_s),
        );
        if let Some(bytes) = p.top_io_bytes {
            emit(
                "top_proc_io_kib_per_s",
                ratio(bytes as f64 / 1024.0, p.interval_s),
            );
        }
        emit(
            "second_proc_cpu_share",
            ratio(p.second_cpu_ticks as f64, ticks_per_s * p.interval_s * ncpu).min(1.0),
        );
        emit("second_proc_threads", p.second_threads as f64);
        emit(
            "second_proc_minflt_per_s",
            ratio(p.second_minflt as f64, p.interval_s),
        );
        emit(
            "io_top_proc_kib_per_s",
            ratio(p.io_top_bytes as f64 / 1024.0, p.interval_s),
        );
        emit("io_top_proc_threads", p.io_top_threads as f64);
    }
}

/// The one procfs feature that can be missing on a tick even when every source is readable:
/// the busiest process's I/O rate, unknown when that process was idle at the previous scan
/// (its `/proc/<pid>/io` was not read then, so there is no delta).
pub const SOMETIMES_MISSING_FEATURE: &str = "top_proc_io_kib_per_s";

/// Every name [`procfs_features`] can emit.
pub const PROCFS_FEATURES: &[&str] = &[
    "cpu_user_share",
    "cpu_nice_share",
    "cpu_system_share",
    "cpu_idle_share",
    "cpu_iowait_share",
    "cpu_irq_share",
    "cpu_softirq_share",
    "cpu_steal_share",
    "cpu_hotspot_core_ratio",
    "mem_free_share",
    "mem_available_share",
    "mem_cached_share",
    "mem_buffers_share",
    "swap_used_share",
    "disk_read_ops_per_s",
    "disk_write_ops_per_s",
    "disk_read_latency_ms",
    "disk_write_latency_ms",
    "disk_avg_io_kib",
    "disk_queue_len",
    "disk_busy_share",
    "net_rx_kib_per_s",
    "net_tx_kib_per_s",
    "net_rx_packets_per_s",
    "net_tx_packets_per_s",
    "tcp_established",
    "tcp_new_conn_per_s",
    "tcp_closed_conn_per_s",
    "tcp_reset_per_s",
    "tcp_retrans_share",
    "tcp_share_of_tcp_udp",
    "net_rx_softirq_per_s",
    "procs_runnable_per_cpu",
    "procs_blocked_per_cpu",
    "process_count",
    "thread_count",
    "top_proc_cpu_share",
    "top_proc_mem_share",
    "ctxt_per_s",
    "forks_per_s",
    "mem_dirty_share",
    "top_proc_threads",
    "top_proc_minflt_per_s",
    "top_proc_io_kib_per_s",
    "second_proc_cpu_share",
    "second_proc_threads",
    "second_proc_minflt_per_s",
    "io_top_proc_kib_per_s",
    "io_top_proc_threads",
];

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

/// Scans /proc/<pid>/stat once per tick and remembers each process's CPU time for the next
/// scan (keyed by pid and start time, so a reused pid is not mistaken for the old process).
///
/// The stat files stay open between scans and are re-read from offset 0 (procfs formats them
/// afresh on every read): a scan costs one pread per process instead of open + read + close
/// and the path walk, which is most of the agent's own CPU time in an emulated guest. A file
/// of a process that exited fails to read (ESRCH) and is reopened by path, which finds the
/// process now holding the pid, if any.
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
    /// pid → (its open stat file, the scan that last saw the pid).
    open: HashMap<i32, (File, u64)>,
    scans: u64,
    buffer: Vec<u8>,
    page_size: u64,
    /// A process left out of the rankings (busiest, second-busiest, most I/O, largest RSS):
    /// the sampling process itself, so the agent does not describe its own work.
    ignored_pid: Option<i32>,
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
            open: HashMap::new(),
            scans: 0,
            buffer: Vec::with_capacity(8192),
            page_size: procfs::page_size(),
            ignored_pid: None,
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

    /// One pass over /proc: counts processes, finds the two largest CPU-time deltas (and those
    /// processes' threads and minor faults, and the busiest one's I/O), the process with the
    /// most I/O among those whose I/O is known, and the largest RSS. Processes that vanish
    /// mid-scan are skipped.
    pub fn scan(&mut self, proc_root: &Path) -> Result<ProcessTick> {
        let mut tick = ProcessTick::default();
        self.current.clear();
        self.busy.clear();
        self.fresh.clear();
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
            tick.count += 1;
            if Some(pid) == self.ignored_pid {
                continue;
            }
            let cpu = stat.utime + stat.stime;
            let key = (pid, stat.starttime);
            let threads = stat.num_threads.max(0) as u64;
            if let Some(&(cpu_before, minflt_before, _)) = self.previous.get(&key) {
                let used = cpu.saturating_sub(cpu_before);
                if used > 0 {
                    self.busy.push(BusyProcess {
                        cpu_ticks: used,
                        key,
                        threads,
                        minflt: stat.minflt.saturating_sub(minflt_before),
                    });
                }
            } else {
                self.fresh.push(key);
            }
            self.current.insert(key, (cpu, stat.minflt, threads));
            tick.top_rss_bytes = tick.top_rss_bytes.max(stat.rss * self.page_size);
        }
        self.open.retain(|_, (_, seen)| *seen == scan);
        std::mem::swap(&mut self.previous, &mut self.current);

        // The busiest first (ties: lowest pid).
        self.busy
            .sort_unstable_by(|a, b| b.cpu_ticks.cmp(&a.cpu_ticks).then(a.key.0.cmp(&b.key.0)));
        if let Some(second) = self.busy.get(1) {
            tick.second_cpu_ticks = second.cpu_ticks;
            tick.second_threads = second.threads;
            tick.second_minflt = second.minflt;
        }

        // /proc/<pid>/io of the busiest and the newest processes; a delta for those read last
        // time too.
        self.io_current.clear();
        // The newest first-seen processes (highest start time).
        self.fresh
            .sort_unstable_by(|a, b| b.1.cmp(&a.1).then(b.0.cmp(&a.0)));
        let mut path = proc_root.to_path_buf();
        let busiest = self.busy.iter().take(IO_READS_PER_SCAN);
        let newest = self.fresh.iter().take(IO_NEW_READS_PER_SCAN);
        for (pid, start) in busiest.map(|b| b.key).chain(newest.copied()) {
            path.push(pid.to_string());
            path.push("io");
            let bytes = std::fs::read_to_string(&path)
                .ok()
                .and_then(|text| io_bytes(&text));
            path.pop();
            path.pop();
            if let Some(bytes) = bytes {
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
        Ok(tick)
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
}

/// The files of [`ProcReader`], in buffer order.
const SYSTEM_FILES: [&str; 6] = [
    "stat",
    "meminfo",
    "diskstats",
    "net/dev",
    "net/snmp",
    "loadavg",
];

/// Reads a procfs file that is already open, from offset 0 (procfs formats it again for a
/// read at offset 0), into `buffer` (cleared first), with plain pread(2) calls: unlike
/// `read_to_end`, no statx/lseek probing of the size (procfs reports 0 anyway). With
/// `single_read`, a read that does not fill the buffer ends the file: true of
/// /proc/<pid>/stat, which the kernel formats whole into the first read's buffer.
fn pread_file(file: &File, buffer: &mut Vec<u8>, single_read: bool) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    const CHUNK: usize = 4096;
    buffer.clear();
    loop {
        let len = buffer.len();
        buffer.resize(len + CHUNK, 0);
        let n = match file.read_at(&mut buffer[len..], len as u64) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                buffer.truncate(len);
                continue;
            }
            Err(e) => {
                buffer.truncate(len);
                return Err(e);
            }
        };
        buffer.truncate(len + n);
        if n == 0 || (single_read && n < CHUNK) {
            return Ok(());
        }
    }
}

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
        }
    }

    /// Reads one snapshot. Fails only when /proc/stat cannot be read; any other file that
    /// cannot be read or parsed leaves its features missing, with one warning per file.
    pub fn snapshot(&mut self) -> Result<ProcSnapshot> {
        let at_s = self.epoch.elapsed().as_secs_f64();
        let mut readable = [false; 6];
        for (i, name) in SYSTEM_FILES.iter().enumerate() {
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
            match read {
                Ok(()) => readable[i] = std::str::from_utf8(&self.buffers[i]).is_ok(),
                Err(e) if i == 0 => {
                    return Err(e).with_context(|| format!("read {}/stat", self.root.display()))
                }
                Err(_) => {}
            }
        }
        let processes = match self.last_scan {
            Some((scanned_at, tick)) if at_s - scanned_at < PROCESS_SCAN_MIN_INTERVAL_S => {
                Some(tick)
            }
            previous => match self.scanner.scan(&self.root) {
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
        for (group, reason) in &snapshot.unavailable {
            if self.warned.insert(group) {
                log::warn!("perception: {group} unusable ({reason}); its features are missing");
            }
        }
        Ok(snapshot)
    }
}

impl Default for ProcReader {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/perception/testdata")
            .join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    fn snapshot(tag: &str, at_s: f64, processes: ProcessTick) -> ProcSnapshot {
        let processes = Some(processes);
        let texts = [
            fixture(&format!("stat_{tag}")),
            fixture(&format!("meminfo_{tag}")),
            fixture(&format!("diskstats_{tag}")),
            fixture(&format!("net_dev_{tag}")),
            fixture(&format!("snmp_{tag}")),
            fixture(&format!("loadavg_{tag}")),
        ];
        let disks = DiskFilter::Names(["vda".to_string()].into_iter().collect());
        ProcSnapshot::parse(
            &ProcTexts {
                stat: Some(&texts[0]),
                meminfo: Some(&texts[1]),
                diskstats: Some(&texts[2]),
                net_dev: Some(&texts[3]),
                snmp: Some(&texts[4]),
                loadavg: Some(&texts[5]),
            },
            &disks,
            processes,
            at_s,
        )
        .expect("fixtures parse")
    }

    /// Two hand-written snapshots 2 s apart on 2 CPUs; every expected value is computed by
    /// hand from the counters in testdata/*_a and *_b (see the comments).
    #[test]
    fn rates_and_shares_from_two_snapshots() {
        let a = snapshot("a", 10.0, ProcessTick::default());
        let b = snapshot(
            "b",
            12.0,
            ProcessTick {
                count: 120,
                top_cpu_ticks: 150,
                top_rss_bytes: 819_200_000,
                top_threads: 6,
                top_minflt: 300,
                top_io_bytes: Some(4096 * 1024),
                second_cpu_ticks: 60,
                second_threads: 9,
                second_minflt: 30,
                io_top_bytes: 8192 * 1024,
                io_top_threads: 3,
                interval_s: 2.0,
            },
        );
        let mut got = HashMap::new();
        procfs_features(&a, &b, &mut |name, value| {
            assert!(got.insert(name, value).is_none(), "{name} emitted twice");
        });
        let emitted: Vec<&str> = PROCFS_FEATURES.to_vec();
        let mut names: Vec<&str> = got.keys().copied().collect();
        names.sort();
        let mut expected_names = emitted.clone();
        expected_names.sort();
        assert_eq!(names, expected_names);

        let tps = procfs::ticks_per_second() as f64;
        let expect = [
            // CPU: deltas over both CPUs user 210, nice 10, system 35, idle 105, iowait 20,
            // irq 5, softirq 5, steal 10 = 400 ticks; cpu0 busy 195/200 (hot), cpu1 70/200.
            ("cpu_user_share", 210.0 / 400.0),
            ("cpu_nice_share", 10.0 / 400.0),
            ("cpu_system_share", 35.0 / 400.0),
            ("cpu_idle_share", 105.0 / 400.0),
            ("cpu_iowait_share", 20.0 / 400.0),
            ("cpu_irq_share", 5.0 / 400.0),
            ("cpu_softirq_share", 5.0 / 400.0),
            ("cpu_steal_share", 10.0 / 400.0),
            ("cpu_hotspot_core_ratio", 0.5),
            // Memory (b): total 8e6 kB, free 2e6, available 4e6, buffers 4e5, cached 1.6e6,
            // swap 1e6 of which 7.5e5 free.
            ("mem_free_share", 0.25),
            ("mem_available_share", 0.5),
            ("mem_cached_share", 0.2),
            ("mem_buffers_share", 0.05),
            ("swap_used_share", 0.25),
            // Dirty 1200 kB + Writeback 400 kB.
            ("mem_dirty_share", 1600.0 / 8e6),
            // vda only (vda1 and loop0 ignored): +100 reads in +300 ms, +100 writes in +500 ms,
            // +10000 sectors = 5000 KiB over 200 ops, +3000 weighted ms, +1000 io ms, in 2 s.
            ("disk_read_ops_per_s", 50.0),
            ("disk_write_ops_per_s", 50.0),
            ("disk_read_latency_ms", 3.0),
            ("disk_write_latency_ms", 5.0),
            ("disk_avg_io_kib", 25.0),
            ("disk_queue_len", 1.5),
            ("disk_busy_share", 0.5),
            // eth0 only (lo ignored): +2048000 B, +4000 pkts in; +1024000 B, +1000 pkts out.
            ("net_rx_kib_per_s", 1000.0),
            ("net_tx_kib_per_s", 500.0),
            ("net_rx_packets_per_s", 2000.0),
            ("net_tx_packets_per_s", 500.0),
            // TCP: opens +30 active +10 passive, +4 failed, CurrEstab 20 -> 26, +4 resets,
            // +50 retrans of +1000 out segs, +1000 in segs; UDP +300 in, +700 out.
            ("tcp_established", 26.0),
            ("tcp_new_conn_per_s", 20.0),
            ("tcp_closed_conn_per_s", (36.0 - 6.0) / 2.0),
            ("tcp_reset_per_s", 2.0),
            ("tcp_retrans_share", 0.05),
            ("tcp_share_of_tcp_udp", 2000.0 / 3000.0),
            // softirq line: NET_RX 300 -> 700.
            ("net_rx_softirq_per_s", 200.0),
            // procs_running 3, procs_blocked 1 on 2 CPUs; 250 threads; 120 processes.
            ("procs_runnable_per_cpu", 1.5),
            ("procs_blocked_per_cpu", 0.5),
            ("process_count", 120.0),
            ("thread_count", 250.0),
            // Top process: 150 ticks in 2 s on 2 CPUs; RSS 819200000 B of 8192000000 B.
            ("top_proc_cpu_share", 150.0 / (tps * 2.0 * 2.0)),
            ("top_proc_mem_share", 0.1),
            // Its 6 threads, +300 minor faults and 4 MiB read + written in 2 s.
            ("top_proc_threads", 6.0),
            ("top_proc_minflt_per_s", 150.0),
            ("top_proc_io_kib_per_s", 2048.0),
            // Second-busiest: 60 ticks, 9 threads, +30 faults; most I/O: 8 MiB, 3 threads.
            ("second_proc_cpu_share", 60.0 / (tps * 2.0 * 2.0)),
            ("second_proc_threads", 9.0),
            ("second_proc_minflt_per_s", 15.0),
            ("io_top_proc_kib_per_s", 4096.0),
            ("io_top_proc_threads", 3.0),
            // ctxt +10000, processes +10 in 2 s.
            ("ctxt_per_s", 5000.0),
            ("forks_per_s", 5.0),
        ];
        assert_eq!(expect.len(), PROCFS_FEATURES.len());
        for (name, want) in expect {
            let value = got[name];
            assert!(
                (value - want).abs() < 1e-9,
                "{name}: got {value}, expected {want}"
            );
        }
    }

    #[test]
    fn unusable_files_leave_only_their_features_missing() {
        let a = snapshot("a", 10.0, ProcessTick::default());
        let stat = fixture("stat_b");
        let b = ProcSnapshot::parse(
            &ProcTexts {
                stat: Some(&stat),
                meminfo: None,
                diskstats: Some("garbage"),
                net_dev: None,
                snmp: Some("Tcp: ActiveOpens\nTcp: 1\n"),
                loadavg: None,
            },
            &DiskFilter::NotVirtual,
            None,
            12.0,
        )
        .unwrap();
        let groups: Vec<&str> = b.unavailable.iter().map(|(g, _)| *g).collect();
        assert_eq!(
            groups,
            [
                "/proc/meminfo",
                "/proc/diskstats",
                "/proc/net/dev",
                "/proc/net/snmp",
                "/proc/loadavg",
                "/proc/<pid>/stat"
            ]
        );
        let mut got = HashMap::new();
        procfs_features(&a, &b, &mut |name, value| {
            got.insert(name, value);
        });
        let mut names: Vec<&str> = got.keys().copied().collect();
        names.sort();
        assert_eq!(
            names,
            [
                "cpu_hotspot_core_ratio",
                "cpu_idle_share",
                "cpu_iowait_share",
                "cpu_irq_share",
                "cpu_nice_share",
                "cpu_softirq_share",
                "cpu_steal_share",
                "cpu_system_share",
                "cpu_user_share",
                "ctxt_per_s",
                "forks_per_s",
                "net_rx_softirq_per_s",
                "procs_blocked_per_cpu",
                "procs_runnable_per_cpu",
            ]
        );
        assert!(
            ProcSnapshot::parse(&ProcTexts::default(), &DiskFilter::NotVirtual, None, 0.0).is_err()
        );
    }

    #[test]
    fn counters_going_backwards_give_zero_not_garbage() {
        // Swapped order: every cumulative counter decreases; rates must not wrap.
        let a = snapshot("a", 10.0, ProcessTick::default());
        let b = snapshot("b", 12.0, ProcessTick::default());
        procfs_features(&b, &a, &mut |name, value| {
            assert!(value.is_finite() && value >= 0.0, "{name} = {value}");
        });
    }

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
        assert_eq!(scanner.open.len(), 3, "the three stat files stay open");

        // pid 11 exits, 14 starts: the exited one's file is closed, the new one read.
        std::fs::remove_dir_all(root.path().join("11")).unwrap();
        write_stat(root.path(), 14, (5, 5), 6000, 1);
        write_stat(root.path(), 10, (85, 50), 1000, 10); // +5
        let fourth = scanner.scan(root.path()).unwrap();
        assert_eq!(fourth.count, 3);
        assert_eq!(fourth.top_cpu_ticks, 5);
        let mut open: Vec<i32> = scanner.open.keys().copied().collect();
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
        assert!(scanner.open.contains_key(&child_pid));
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
            !scanner.open.contains_key(&child_pid),
            "exited child still open"
        );
    }

    #[test]
    fn snmp_parser_needs_only_the_counters_it_reads() {
        // No UdpLite section and an unknown extra counter, as on 7.x kernels.
        let text = "Tcp: RtoAlgorithm MaxConn ActiveOpens\nTcp: 1 -1 42\nUdp: InDatagrams NewThing\nUdp: 7 9\n";
        let get = parse_snmp(text).unwrap();
        assert_eq!(get("Tcp", "ActiveOpens").unwrap(), 42);
        assert_eq!(get("Udp", "InDatagrams").unwrap(), 7);
        assert!(get("Tcp", "InSegs")
            .unwrap_err()
            .to_string()
            .contains("Tcp:InSegs"));
        assert!(get("Icmp", "InMsgs").is_err());
        assert!(parse_snmp("Tcp: A B\nUdp: 1 2\n").is_err());
        assert!(parse_snmp("Tcp: A B\n").is_err());
    }

    #[test]
    fn net_rx_softirqs_come_from_the_stat_softirq_line() {
        assert_eq!(net_rx_softirqs("cpu 1 2\nsoftirq 9 0 1 2 77 3\n"), Some(77));
        assert_eq!(net_rx_softirqs("cpu 1 2\n"), None);
    }
}
