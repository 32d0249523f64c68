//! `asa run --dry-run` cost on this machine (harness = false): the real binary, the committed
//! default model, a 1 Hz tick, for ASA_BENCH_SECONDS (default 60) after a warm-up.
//!
//! Prints
//! - the agent's CPU time in % of one core over the measured window (sum of its threads'
//!   on-CPU time from /proc/<pid>/task/*/schedstat, in ns), and over the whole run including
//!   start-up (utime + stime),
//! - its peak RSS (VmHWM),
//! - per-tick perception → decision latency p50/p99 (sample, inference, vote + policy, total)
//!   from the decision log the agent writes.
//!
//! Needs ONNX Runtime (gru_expert/setup_ort.sh or classifier/setup.sh). As root the BPF probe is
//! loaded (as in production); ASA_BENCH_NO_BPF=1 measures procfs-only.
//! Run: `cargo bench -p asa-agent --bench daemon`.

#[path = "../tests/daemon_common/mod.rs"]
mod daemon_common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use asa_agent::decision::engine::TickRecord;

fn percentile(sorted: &[f64], q: f64) -> f64 {
    let index = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[index]
}

/// On-CPU time of every thread of `pid`, in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let mut total = 0u64;
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            if let Ok(text) = std::fs::read_to_string(task.path().join("schedstat")) {
                total += text
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    total as f64 / 1e9
}

/// utime + stime of `pid` in seconds (USER_HZ = 100).
fn stat_seconds(pid: u32) -> f64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &text[text.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 / 100.0
}

fn status_kib(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` does not: keep that run short.
    let quick = !std::env::args().any(|a| a == "--bench");
    let seconds: f64 = std::env::var("ASA_BENCH_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { 3.0 } else { 60.0 });
    let warmup = if quick { 2.0 } else { 5.0 };
    let model = std::env::var_os("ASA_BENCH_MODEL")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(daemon_common::default_model);
    let no_bpf = std::env::var("ASA_BENCH_NO_BPF").is_ok_and(|v| v == "1");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("decisions.jsonl");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_asa"));
    cmd.env("RUST_LOG", "warn")
        .arg("--socket")
        .arg(dir.path().join("control.sock"))
        .args(["run", "--dry-run", "--interval-ms", "1000", "--model"])
        .arg(&model)
        .arg("--onnxruntime")
        .arg(daemon_common::ort_library())
        .arg("--decision-log")
        .arg(&log)
        .args(["--duration-s", &format!("{}", seconds + warmup + 3.0)])
        .stdout(Stdio::null());
    if no_bpf {
        cmd.arg("--no-bpf");
    }
    let started = Instant::now();
    let mut child = cmd.spawn().expect("starting asa run --dry-run");
    let pid = child.id();
    std::thread::sleep(Duration::from_secs_f64(warmup));
    let (cpu0, t0) = (cpu_seconds(pid), Instant::now());
    std::thread::sleep(Duration::from_secs_f64(seconds));
    let (cpu1, t1) = (cpu_seconds(pid), Instant::now());
    let whole_cpu = stat_seconds(pid);
    let whole_wall = started.elapsed().as_secs_f64();
    let hwm = status_kib(pid, "VmHWM:");
    let rss = status_kib(pid, "VmRSS:");
    let threads = status_kib(pid, "Threads:");
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let status = child.wait().unwrap();
    assert!(status.success(), "asa run exited {status:?}");
    let ticks: Vec<TickRecord> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!ticks.is_empty(), "no tick logged");
    let window = (t1 - t0).as_secs_f64();
    println!(
        "asa run --dry-run, 1 Hz, model {} ({:.1} MB), BPF {}, {:.0} s measured after {warmup:.0} s warm-up",
        model.display(),
        std::fs::metadata(&model).map(|m| m.len()).unwrap_or(0) as f64 / 1e6,
        if no_bpf { "off" } else { "on (if root)" },
        window
    );
    println!(
        "agent CPU: {:.3} % of one core (threads' on-CPU time over the window); {:.3} % over the whole run incl. start-up ({whole_cpu:.2} s in {whole_wall:.0} s)",
        100.0 * (cpu1 - cpu0) / window,
        100.0 * whole_cpu / whole_wall,
    );
    println!(
        "memory: peak RSS (VmHWM) {:.1} MB, RSS at end {:.1} MB, {threads} threads",
        hwm as f64 / 1024.0,
        rss as f64 / 1024.0
    );
    let missing = ticks.iter().map(|t| t.missing_features).max().unwrap_or(0);
    println!(
        "ticks: {} (max features missing in a tick: {missing})",
        ticks.len()
    );
    // The first tick includes lazy initialisation; report it apart.
    println!(
        "first tick: {:.0} us (sample {:.0}, inference {:.0})",
        ticks[0].cost.total_us(),
        ticks[0].cost.sample_us,
        ticks[0].cost.infer_us
    );
    for (name, f) in [
        (
            "perception (sample)",
            (|t: &TickRecord| t.cost.sample_us) as fn(&TickRecord) -> f64,
        ),
        ("inference", |t| t.cost.infer_us),
        ("vote + policy", |t| t.cost.decide_us),
        ("perception -> decision (total)", |t| t.cost.total_us()),
    ] {
        let mut v: Vec<f64> = ticks.iter().skip(1).map(f).collect();
        if v.is_empty() {
            continue;
        }
        v.sort_by(f64::total_cmp);
        println!(
            "{name:<32} n={:<4} p50={:>9.1} us  p99={:>9.1} us  max={:>9.1} us",
            v.len(),
            percentile(&v, 0.5),
            percentile(&v, 0.99),
            v[v.len() - 1]
        );
    }
}
