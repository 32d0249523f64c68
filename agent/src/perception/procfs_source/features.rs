//! Two consecutive [`ProcSnapshot`]s → the schema's procfs features (rates and shares).

use super::snapshot::ProcSnapshot;

/// Share of a tick a CPU must be busy to count as a hot spot.
pub const HOTSPOT_BUSY_SHARE: f64 = 0.9;

fn ratio(num: f64, den: f64) -> f64 {
    if den > 0.0 {
        num / den
    } else {
        0.0
    }
}

/// How many CPUs' worth of time the machine left idle (idle and I/O wait) between two
/// snapshots: the idle share of every CPU's time times the number of CPUs; None when no CPU
/// time passed (the first snapshot, or a counter that went back).
pub fn idle_cpus(prev: &ProcSnapshot, cur: &ProcSnapshot) -> Option<f64> {
    let d = cur.cpu_total.saturating_sub(&prev.cpu_total);
    let total = d.total();
    (total > 0).then(|| (d.idle + d.iowait) as f64 / total as f64 * cur.cpus.len() as f64)
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::path::Path;

    use crate::perception::procfs_source::{DiskFilter, ProcTexts, ProcessTick};

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
                ignored_cpu_ticks: 0,
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

        // Idle 105 + iowait 20 of 400 ticks on 2 CPUs; none without a previous snapshot.
        assert_eq!(idle_cpus(&a, &b), Some(125.0 / 400.0 * 2.0));
        assert_eq!(idle_cpus(&a, &a), None);

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
}
