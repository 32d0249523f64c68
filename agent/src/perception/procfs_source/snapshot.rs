//! The system-wide /proc files of one instant, parsed into a [`ProcSnapshot`]: pure parsing,
//! text in and totals out, so every parser is tested on fixtures.

use std::collections::HashSet;
use std::io::Cursor;

use anyhow::{bail, Context, Result};
use procfs::prelude::*;
use procfs::{DiskStats, ExplicitSystemInfo, KernelStats, LoadAverage, Meminfo};

use super::processes::ProcessTick;

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

    pub(super) fn total(&self) -> u64 {
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
    pub(super) fn busy(&self) -> u64 {
        self.user + self.nice + self.system + self.irq + self.softirq
    }

    pub(super) fn saturating_sub(&self, o: &Self) -> Self {
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

#[cfg(test)]
mod tests {
    use super::*;

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
