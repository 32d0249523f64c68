//! Perception benchmark (harness = false): the sampler's own cost at 1 Hz and 10 Hz.
//!
//! Each rate runs in a fresh child process (so peak RSS is per rate) that builds a
//! [`Sampler`] (BPF on when allowed) and samples for `ASA_BENCH_SECONDS` (default 60) seconds;
//! "1 Hz + applications" also reads every thread's application in the walk and groups them
//! into per-application features each tick (per-application mode's perception).
//! Printed per rate:
//! - user-space CPU: the child's user + system time during the run (getrusage) / wall time,
//!   in % of one core; the child does nothing but sample and sleep;
//! - tick latency p50 / p99 / max of `Sampler::sample()`;
//! - peak RSS (VmHWM) of the child, MB;
//! - in-kernel BPF time (as root): run time of the perception programs over the run, from the
//!   kernel's BPF run-time statistics (enabled for the run only), in % of one core and ns per
//!   event. This cost is paid by the tasks being switched, not by the sampler process, and it
//!   is independent of the sampling rate.
//!
//! Then the probe's cost to a scheduling-heavy workload: a pinned two-thread ping-pong
//! (100 000 round trips, 5 interleaved rounds) without and with the BPF probe loaded, and the
//! programs' in-kernel time per event during it.
//!
//! Run: `cargo bench -p asa-agent --bench perception` (`ASA_BENCH_SECONDS=10` for a short run).

use std::process::Command;
use std::time::{Duration, Instant};

use asa_agent::perception::apps::{AppGrouper, ThreadWalk};
use asa_agent::perception::procfs_source::SYSTEM_FILES;
use asa_agent::perception::{BpfMode, SampleCost, Sampler, SchemaFile};

const CHILD_ENV: &str = "ASA_PERCEPTION_BENCH_HZ";

#[path = "../tests/perception_common/mod.rs"]
#[allow(dead_code)]
mod perception_common;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Ping-pong time without and with the probe (the probe's cost to the workload), interleaved
/// over 5 rounds (the probe is loaded and dropped each round) so drifts hit both sides.
fn workload_overhead() {
    const ROUND_TRIPS: usize = 100_000;
    const ROUNDS: usize = 5;
    let stats_fd = unsafe {
        libbpf_rs::libbpf_sys::bpf_enable_stats(libbpf_rs::libbpf_sys::BPF_STATS_RUN_TIME)
    };
    let schema = SchemaFile::builtin().expect("built-in schema");
    let (mut without, mut with) = (Vec::new(), Vec::new());
    let (mut bpf_ns, mut bpf_events) = (0u64, 0u64);
    perception_common::ping_pong(ROUND_TRIPS / 10); // warm-up
    for _ in 0..ROUNDS {
        without.push(perception_common::ping_pong(ROUND_TRIPS));
        let sampler = Sampler::new(schema.clone(), BpfMode::Auto).expect("sampler");
        if !sampler.bpf_active() {
            println!(
                "workload overhead: skipped, BPF unavailable ({:?})",
                sampler.bpf_unavailable_reason()
            );
            return;
        }
        let (ns0, n0) = bpf_program_stats();
        with.push(perception_common::ping_pong(ROUND_TRIPS));
        let (ns1, n1) = bpf_program_stats();
        bpf_ns += ns1.saturating_sub(ns0);
        bpf_events += n1.saturating_sub(n0);
    }
    let (without, with) = (median(without), median(with));
    let per_trip = |d: Duration| d.as_secs_f64() * 1e6 / ROUND_TRIPS as f64;
    println!(
        "ping-pong {ROUND_TRIPS} round trips (median of {ROUNDS}, interleaved): {:.2} us/round trip without the probe, {:.2} us with ({:+.1}%); BPF {:.0} ns/event, {:.1} events/round trip{}",
        per_trip(without),
        per_trip(with),
        (with.as_secs_f64() / without.as_secs_f64() - 1.0) * 100.0,
        if bpf_events > 0 { bpf_ns as f64 / bpf_events as f64 } else { f64::NAN },
        bpf_events as f64 / (ROUND_TRIPS * ROUNDS) as f64,
        if stats_fd < 0 { " (BPF stats unavailable)" } else { "" }
    );
    if stats_fd >= 0 {
        unsafe { libc::close(stats_fd) };
    }
}

/// Every tick's cost by part, for the per-part p50 / p99 line.
#[derive(Default)]
struct Parts {
    files: [Vec<f64>; 6],
    parse: Vec<f64>,
    scan: Vec<f64>,
    processes: Vec<f64>,
    bpf: Vec<f64>,
    features: Vec<f64>,
}

impl Parts {
    fn add(&mut self, cost: &SampleCost) {
        for (all, us) in self.files.iter_mut().zip(cost.procfs.files_us) {
            all.push(us);
        }
        self.parse.push(cost.procfs.parse_us);
        if cost.procfs.processes > 0 {
            self.scan.push(cost.procfs.scan_us);
            self.processes.push(cost.procfs.processes as f64);
        }
        self.bpf.push(cost.bpf_us);
        self.features.push(cost.features_us);
    }

    fn print(mut self) {
        let mut line = String::from("      by part, p50 / p99 us:");
        let mut part = |name: &str, v: &mut Vec<f64>| {
            v.sort_by(|a, b| a.total_cmp(b));
            line += &format!(
                " {name} {:.0}/{:.0};",
                percentile(v, 0.5),
                percentile(v, 0.99)
            );
        };
        for (name, v) in SYSTEM_FILES.iter().zip(self.files.iter_mut()) {
            part(name, v);
        }
        part("parse", &mut self.parse);
        part("process scan", &mut self.scan);
        part("bpf read", &mut self.bpf);
        part("features", &mut self.features);
        self.processes.sort_by(|a, b| a.total_cmp(b));
        println!(
            "{line} processes scanned p50 {:.0}",
            percentile(&self.processes, 0.5)
        );
    }
}

fn cpu_seconds() -> f64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn peak_rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

/// (run time ns, run count) summed over the loaded perception programs.
fn bpf_program_stats() -> (u64, u64) {
    libbpf_rs::query::ProgInfoIter::default()
        .filter(|p| p.name.to_string_lossy().starts_with("asa_sched"))
        .fold((0, 0), |(t, n), p| (t + p.run_time_ns, n + p.run_cnt))
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn child(hz: f64, seconds: f64, apps: bool) {
    // Kernel BPF run-time statistics are on while this fd is open (root only).
    let stats_fd = unsafe {
        libbpf_rs::libbpf_sys::bpf_enable_stats(libbpf_rs::libbpf_sys::BPF_STATS_RUN_TIME)
    };
    let schema = SchemaFile::builtin().expect("built-in schema");
    let mut sampler = Sampler::new(schema, BpfMode::Auto).expect("sampler");
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    let mut grouper = AppGrouper::new(cpus);
    let mut threads = Vec::new();
    let mut applications = 0usize;
    if apps {
        sampler.want_threads(true).expect("application fields");
    }
    let interval = Duration::from_secs_f64(1.0 / hz);
    let (bpf_ns0, bpf_n0) = bpf_program_stats();
    let cpu0 = cpu_seconds();
    let start = Instant::now();
    let mut next = start + interval;
    let mut tick_us = Vec::new();
    let mut parts = Parts::default();
    while next <= start + Duration::from_secs_f64(seconds) {
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let t = Instant::now();
        std::hint::black_box(sampler.sample().expect("sample"));
        if apps && sampler.threads(&mut threads) == ThreadWalk::Threads {
            let samples = grouper.update(start.elapsed(), &threads);
            applications = samples.len();
            std::hint::black_box(samples);
        }
        tick_us.push(t.elapsed().as_secs_f64() * 1e6);
        parts.add(&sampler.last_cost());
        next += interval;
    }
    let wall = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    let (bpf_ns1, bpf_n1) = bpf_program_stats();
    tick_us.sort_by(|a, b| a.total_cmp(b));
    let bpf = if sampler.bpf_active() && stats_fd >= 0 {
        let ns = bpf_ns1.saturating_sub(bpf_ns0) as f64;
        let n = bpf_n1.saturating_sub(bpf_n0) as f64;
        format!(
            "BPF in kernel {:.3}% of one core ({:.0} events/s, {:.0} ns/event)",
            ns / 1e9 / wall * 100.0,
            n / wall,
            if n > 0.0 { ns / n } else { 0.0 }
        )
    } else {
        format!(
            "BPF off ({})",
            sampler
                .bpf_unavailable_reason()
                .unwrap_or("stats unavailable")
        )
    };
    let label = if apps {
        format!("{hz} Hz + applications ({applications} at the end)")
    } else {
        format!("{hz:>4} Hz")
    };
    println!(
        "{label}, {wall:.0} s, {} ticks: sampler CPU {:.3}% of one core, tick p50 {:.0} us p99 {:.0} us max {:.0} us, peak RSS {:.1} MB; {bpf}",
        tick_us.len(),
        cpu / wall * 100.0,
        percentile(&tick_us, 0.5),
        percentile(&tick_us, 0.99),
        tick_us.last().copied().unwrap_or(f64::NAN),
        peak_rss_mb(),
    );
    parts.print();
    if stats_fd >= 0 {
        unsafe { libc::close(stats_fd) };
    }
}

fn main() {
    let seconds: f64 = std::env::var("ASA_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60.0);
    if let Ok(hz) = std::env::var(CHILD_ENV) {
        if hz == "workload" {
            workload_overhead();
        } else {
            match hz.strip_suffix("apps") {
                Some(rate) => child(rate.parse().expect("rate"), seconds, true),
                None => child(hz.parse().expect("rate"), seconds, false),
            }
        }
        return;
    }
    let procs = String::from_utf8_lossy(
        &Command::new("sh")
            .args(["-c", "ls -d /proc/[0-9]* | wc -l"])
            .output()
            .map(|o| o.stdout)
            .unwrap_or_default(),
    )
    .trim()
    .to_string();
    println!(
        "perception sampler benchmark: {seconds} s per rate, {procs} processes on this machine"
    );
    let exe = std::env::current_exe().expect("own path");
    for hz in ["1", "1apps", "10", "workload"] {
        let status = Command::new(&exe)
            .env(CHILD_ENV, hz)
            .env("ASA_BENCH_SECONDS", seconds.to_string())
            .status()
            .expect("run the benchmark child");
        assert!(status.success(), "benchmark child at {hz} Hz failed");
    }
}
