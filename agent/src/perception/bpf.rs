//! The BPF half of the sampler: loads `src/bpf/perception.bpf.c` (BTF tracepoints on
//! sched_switch, sched_wakeup, sched_wakeup_new, sched_migrate_task), reads its per-CPU
//! counters each tick and turns two readings into rates and latency percentiles.
//!
//! tp_btf programs attach through the BPF link API by BTF id, so tracefs need not be
//! mounted; they need `/sys/kernel/btf/vmlinux` and CAP_BPF + CAP_PERFMON (or root).

use std::mem::MaybeUninit;
use std::path::Path;

use anyhow::{bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, MapHandle};

bpf_skeleton!("perception.skel.rs");

/// Number of log2 latency buckets (`PERCEPTION_LATENCY_BUCKETS` in src/bpf/perception.h).
pub const LATENCY_BUCKETS: usize = 32;
const SCALAR_COUNTERS: usize = 9;
/// Size of `struct perception_counters` in bytes.
pub const RAW_COUNTERS_BYTES: usize = (SCALAR_COUNTERS + LATENCY_BUCKETS) * 8;

/// Counters of `struct perception_counters` (src/bpf/perception.h), cumulative since load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawCounters {
    /// All context switches.
    pub switches: u64,
    /// Switches where the outgoing (non-idle) task blocked.
    pub voluntary: u64,
    /// Switches where the outgoing (non-idle) task was still runnable.
    pub involuntary: u64,
    /// Task migrations.
    pub migrations: u64,
    /// Wakeups (new tasks included).
    pub wakeups: u64,
    /// Wakeups of new tasks.
    pub wakeups_new: u64,
    /// Total run-queue wait, ns (after wakeups and preemptions).
    pub runq_wait_ns: u64,
    /// Number of waits summed in `runq_wait_ns`.
    pub runq_waits: u64,
    /// Number of wakeup-to-run latencies in the histogram.
    pub wakeup_latency_count: u64,
    /// log2 histogram of wakeup-to-run latency (ns): bucket i = [2^i, 2^(i+1)).
    pub wakeup_latency_hist: [u64; LATENCY_BUCKETS],
}

impl Default for RawCounters {
    fn default() -> Self {
        RawCounters {
            switches: 0,
            voluntary: 0,
            involuntary: 0,
            migrations: 0,
            wakeups: 0,
            wakeups_new: 0,
            runq_wait_ns: 0,
            runq_waits: 0,
            wakeup_latency_count: 0,
            wakeup_latency_hist: [0; LATENCY_BUCKETS],
        }
    }
}

impl RawCounters {
    /// Decodes one CPU's value of the per-CPU map (native endian u64s).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        if bytes.len() < RAW_COUNTERS_BYTES {
            bail!(
                "perception counters: {} bytes, expected {RAW_COUNTERS_BYTES} (BPF and Rust layouts differ)",
                bytes.len()
            );
        }
        let word = |i: usize| u64::from_ne_bytes(bytes[i * 8..i * 8 + 8].try_into().unwrap());
        let mut hist = [0u64; LATENCY_BUCKETS];
        for (i, h) in hist.iter_mut().enumerate() {
            *h = word(SCALAR_COUNTERS + i);
        }
        Ok(RawCounters {
            switches: word(0),
            voluntary: word(1),
            involuntary: word(2),
            migrations: word(3),
            wakeups: word(4),
            wakeups_new: word(5),
            runq_wait_ns: word(6),
            runq_waits: word(7),
            wakeup_latency_count: word(8),
            wakeup_latency_hist: hist,
        })
    }

    /// Adds another CPU's counters.
    pub fn add(&mut self, o: &Self) {
        self.switches += o.switches;
        self.voluntary += o.voluntary;
        self.involuntary += o.involuntary;
        self.migrations += o.migrations;
        self.wakeups += o.wakeups;
        self.wakeups_new += o.wakeups_new;
        self.runq_wait_ns += o.runq_wait_ns;
        self.runq_waits += o.runq_waits;
        self.wakeup_latency_count += o.wakeup_latency_count;
        for (a, b) in self
            .wakeup_latency_hist
            .iter_mut()
            .zip(&o.wakeup_latency_hist)
        {
            *a += b;
        }
    }

    /// `self - earlier`, counter by counter (saturating).
    pub fn since(&self, earlier: &Self) -> Self {
        let mut hist = [0u64; LATENCY_BUCKETS];
        for (i, h) in hist.iter_mut().enumerate() {
            *h = self.wakeup_latency_hist[i].saturating_sub(earlier.wakeup_latency_hist[i]);
        }
        RawCounters {
            switches: self.switches.saturating_sub(earlier.switches),
            voluntary: self.voluntary.saturating_sub(earlier.voluntary),
            involuntary: self.involuntary.saturating_sub(earlier.involuntary),
            migrations: self.migrations.saturating_sub(earlier.migrations),
            wakeups: self.wakeups.saturating_sub(earlier.wakeups),
            wakeups_new: self.wakeups_new.saturating_sub(earlier.wakeups_new),
            runq_wait_ns: self.runq_wait_ns.saturating_sub(earlier.runq_wait_ns),
            runq_waits: self.runq_waits.saturating_sub(earlier.runq_waits),
            wakeup_latency_count: self
                .wakeup_latency_count
                .saturating_sub(earlier.wakeup_latency_count),
            wakeup_latency_hist: hist,
        }
    }
}

/// The `q` quantile (0 < q <= 1) of a log2 histogram in ns, interpolated linearly inside the
/// bucket that holds it (bucket 0 spans [0, 2) ns, bucket i >= 1 spans [2^i, 2^(i+1)) ns).
/// Returns 0 for an empty histogram.
pub fn log2_histogram_quantile(hist: &[u64], q: f64) -> f64 {
    let total: u64 = hist.iter().sum();
    if total == 0 {
        return 0.0;
    }
    let target = q.clamp(0.0, 1.0) * total as f64;
    let mut below = 0u64;
    for (i, &count) in hist.iter().enumerate() {
        if count == 0 {
            continue;
        }
        if (below + count) as f64 >= target {
            let lower = if i == 0 { 0.0 } else { (1u64 << i) as f64 };
            let upper = (1u64 << (i + 1)) as f64;
            let fraction = ((target - below as f64) / count as f64).clamp(0.0, 1.0);
            return lower + fraction * (upper - lower);
        }
        below += count;
    }
    unreachable!("the cumulative count reaches the total")
}

/// Names [`bpf_features`] emits, in emission order.
pub const BPF_FEATURES: &[&str] = &[
    "sched_voluntary_switches_per_s",
    "sched_involuntary_switches_per_s",
    "sched_migrations_per_s",
    "sched_wakeups_per_s",
    "sched_wakeup_latency_p50_us",
    "sched_wakeup_latency_p99_us",
    "sched_runq_wait_mean_us",
    "sched_runq_waiting_per_cpu",
];

/// Computes the BPF features from the counters accumulated during one tick of `dt_s` seconds
/// on `ncpu` CPUs.
pub fn bpf_features(
    tick: &RawCounters,
    dt_s: f64,
    ncpu: usize,
    emit: &mut dyn FnMut(&'static str, f64),
) {
    let dt = dt_s.max(1e-9);
    emit("sched_voluntary_switches_per_s", tick.voluntary as f64 / dt);
    emit(
        "sched_involuntary_switches_per_s",
        tick.involuntary as f64 / dt,
    );
    emit("sched_migrations_per_s", tick.migrations as f64 / dt);
    emit("sched_wakeups_per_s", tick.wakeups as f64 / dt);
    emit(
        "sched_wakeup_latency_p50_us",
        log2_histogram_quantile(&tick.wakeup_latency_hist, 0.5) / 1000.0,
    );
    emit(
        "sched_wakeup_latency_p99_us",
        log2_histogram_quantile(&tick.wakeup_latency_hist, 0.99) / 1000.0,
    );
    let mean_us = if tick.runq_waits > 0 {
        tick.runq_wait_ns as f64 / tick.runq_waits as f64 / 1000.0
    } else {
        0.0
    };
    emit("sched_runq_wait_mean_us", mean_us);
    emit(
        "sched_runq_waiting_per_cpu",
        tick.runq_wait_ns as f64 / 1e9 / dt / ncpu.max(1) as f64,
    );
}

/// The loaded and attached perception BPF program. Dropping it detaches the programs.
pub struct SchedProbe {
    counters: MapHandle,
    _links: Vec<Link>,
}

/// Where the running kernel exposes its BTF (needed by tp_btf programs and CO-RE).
pub const KERNEL_BTF: &str = "/sys/kernel/btf/vmlinux";

impl SchedProbe {
    /// Loads and attaches the programs. Fails (with the reason) without BTF or BPF rights.
    pub fn load() -> Result<Self> {
        if !Path::new(KERNEL_BTF).exists() {
            bail!("{KERNEL_BTF} is missing: the kernel has no BTF (CONFIG_DEBUG_INFO_BTF)");
        }
        let mut storage = MaybeUninit::uninit();
        let open = skel::PerceptionSkelBuilder::default()
            .open(&mut storage)
            .context("open the perception BPF object")?;
        let skel = open
            .load()
            .context("load the perception BPF programs (needs root or CAP_BPF + CAP_PERFMON)")?;
        let mut links = Vec::new();
        for (name, prog) in [
            ("sched_switch", &skel.progs.asa_sched_switch),
            ("sched_wakeup", &skel.progs.asa_sched_wakeup),
            ("sched_wakeup_new", &skel.progs.asa_sched_wakeup_new),
            ("sched_migrate_task", &skel.progs.asa_sched_migrate_task),
        ] {
            links.push(
                prog.attach()
                    .with_context(|| format!("attach the perception program to tp_btf/{name}"))?,
            );
        }
        let counters =
            MapHandle::try_from(&skel.maps.counters).context("keep the perception counters map")?;
        // The links and the map handle keep the programs and the map alive after the skeleton
        // (and its object) is dropped here.
        Ok(SchedProbe {
            counters,
            _links: links,
        })
    }

    /// Current cumulative counters, summed over CPUs.
    pub fn read(&self) -> Result<RawCounters> {
        let per_cpu = self
            .counters
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
            .context("read the perception counters")?
            .context("the perception counters map has no entry 0")?;
        let mut sum = RawCounters::default();
        for bytes in per_cpu {
            sum.add(&RawCounters::from_bytes(&bytes)?);
        }
        Ok(sum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_inside_log2_buckets() {
        let mut hist = [0u64; LATENCY_BUCKETS];
        assert_eq!(log2_histogram_quantile(&hist, 0.5), 0.0);
        // 100 samples in [1024, 2048): p50 = 1024 + 0.5 * 1024.
        hist[10] = 100;
        assert_eq!(log2_histogram_quantile(&hist, 0.5), 1536.0);
        assert_eq!(log2_histogram_quantile(&hist, 0.99), 1024.0 + 0.99 * 1024.0);
        // 90 in [1024, 2048), 10 in [65536, 131072): p50 in the first, p99 in the second.
        hist[10] = 90;
        hist[16] = 10;
        // p50: target 50 of 90 in bucket 10 -> 1024 + 50/90 * 1024.
        let p50 = log2_histogram_quantile(&hist, 0.5);
        assert!(
            (p50 - (1024.0 + 50.0 / 90.0 * 1024.0)).abs() < 1e-9,
            "{p50}"
        );
        // p99: target 99, 9 into the 10 of bucket 16 -> 65536 + 0.9 * 65536.
        let p99 = log2_histogram_quantile(&hist, 0.99);
        assert!((p99 - (65536.0 + 0.9 * 65536.0)).abs() < 1e-6, "{p99}");
        // Bucket 0 spans [0, 2).
        let mut low = [0u64; LATENCY_BUCKETS];
        low[0] = 4;
        assert_eq!(log2_histogram_quantile(&low, 0.5), 1.0);
    }

    #[test]
    fn counters_decode_sum_and_difference() {
        let mut bytes = vec![0u8; RAW_COUNTERS_BYTES];
        for i in 0..SCALAR_COUNTERS + LATENCY_BUCKETS {
            bytes[i * 8..i * 8 + 8].copy_from_slice(&(i as u64 + 1).to_ne_bytes());
        }
        let one = RawCounters::from_bytes(&bytes).unwrap();
        assert_eq!(one.switches, 1);
        assert_eq!(one.wakeup_latency_count, 9);
        assert_eq!(one.wakeup_latency_hist[0], 10);
        assert_eq!(one.wakeup_latency_hist[31], 41);
        let mut two = one;
        two.add(&one);
        assert_eq!(two.voluntary, 4);
        assert_eq!(two.since(&one), one);
        assert!(RawCounters::from_bytes(&bytes[..100]).is_err());
    }

    #[test]
    fn features_are_rates_over_the_tick() {
        let mut tick = RawCounters {
            voluntary: 1000,
            involuntary: 200,
            migrations: 50,
            wakeups: 1000,
            runq_wait_ns: 1_000_000_000, // 1 s of waiting in a 2 s tick on 2 CPUs
            runq_waits: 4000,
            ..Default::default()
        };
        tick.wakeup_latency_hist[12] = 1000; // [4096, 8192) ns
        let mut got = std::collections::HashMap::new();
        bpf_features(&tick, 2.0, 2, &mut |n, v| {
            got.insert(n, v);
        });
        assert_eq!(got.len(), BPF_FEATURES.len());
        assert_eq!(got["sched_voluntary_switches_per_s"], 500.0);
        assert_eq!(got["sched_involuntary_switches_per_s"], 100.0);
        assert_eq!(got["sched_migrations_per_s"], 25.0);
        assert_eq!(got["sched_wakeups_per_s"], 500.0);
        assert_eq!(got["sched_wakeup_latency_p50_us"], 6.144);
        assert_eq!(got["sched_runq_wait_mean_us"], 250.0);
        assert_eq!(got["sched_runq_waiting_per_cpu"], 0.25);
    }
}
