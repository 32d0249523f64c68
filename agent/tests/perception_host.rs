//! Host tests of the perception sampler on the real kernel (run as root: the BPF probe needs
//! it; this host has BTF and BPF tracing). Each test drives a workload of known size between
//! two sampler readings and checks the features move by the expected amount, after
//! subtracting the background measured over an equal idle interval just before.
//!
//! The tests share one lock: they measure the whole machine and must not overlap.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use asa_agent::perception::{BpfMode, Sample, Sampler, SchemaFile};

static MACHINE: Mutex<()> = Mutex::new(());

fn is_root() -> bool {
    unsafe { libc::geteuid() == 0 }
}

fn sampler(mode: BpfMode) -> (Sampler, SchemaFile) {
    let schema = SchemaFile::builtin().expect("built-in schema");
    let sampler = Sampler::new(schema.clone(), mode).expect("sampler starts");
    (sampler, schema)
}

fn value(sample: &Sample, schema: &SchemaFile, name: &str) -> f64 {
    sample
        .get(schema, name)
        .unwrap_or_else(|| panic!("{name} not in schema"))
}

/// Events of a per-second feature over the sample's interval.
fn events(sample: &Sample, schema: &SchemaFile, name: &str) -> f64 {
    value(sample, schema, name) * sample.interval_s
}

fn pin_to_cpu(cpu: usize) {
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
            0,
            "pin to CPU {cpu}"
        );
    }
}

/// Two threads on two different CPUs exchange `round_trips` one-byte messages over a
/// socket pair: each round trip blocks each thread once (2 voluntary switches) and wakes each
/// once (2 wakeups), and each block is a switch to and from idle (4 context switches).
fn ping_pong(round_trips: usize) -> Duration {
    let (mut a, mut b) = UnixStream::pair().unwrap();
    let ncpu = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let started = Instant::now();
    let echo = std::thread::spawn(move || {
        if ncpu > 1 {
            pin_to_cpu(1);
        }
        let mut byte = [0u8; 1];
        for _ in 0..round_trips {
            b.read_exact(&mut byte).unwrap();
            b.write_all(&byte).unwrap();
        }
    });
    if ncpu > 1 {
        pin_to_cpu(0);
    }
    let mut byte = [7u8; 1];
    for _ in 0..round_trips {
        a.write_all(&byte).unwrap();
        a.read_exact(&mut byte).unwrap();
    }
    echo.join().unwrap();
    let elapsed = started.elapsed();
    // Undo the pin for the rest of this thread's life.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for cpu in 0..ncpu {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
    elapsed
}

#[test]
fn ping_pong_moves_switch_and_wakeup_features_by_its_size() {
    assert!(
        is_root(),
        "run the perception host tests as root (BPF probe)"
    );
    let _machine = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let (mut sampler, schema) = sampler(BpfMode::Auto);
    assert!(
        sampler.bpf_active(),
        "BPF probe must load on this host as root: {:?}",
        sampler.bpf_unavailable_reason()
    );
    const ROUND_TRIPS: usize = 50_000;
    let expected_blocks = 2.0 * ROUND_TRIPS as f64;

    // Background: an idle interval of about the workload's length.
    let probe_run = ping_pong(2_000);
    let workload_guess = probe_run.mul_f64(ROUND_TRIPS as f64 / 2_000.0);
    sampler.sample().unwrap();
    std::thread::sleep(workload_guess.max(Duration::from_millis(500)));
    let idle = sampler.sample().unwrap();
    let per_s = |s: &Sample, n: &str| value(s, &schema, n);

    let took = ping_pong(ROUND_TRIPS);
    let busy = sampler.sample().unwrap();
    let background = |name: &str| per_s(&idle, name) * busy.interval_s;
    let moved = |name: &str| events(&busy, &schema, name) - background(name);

    let voluntary = moved("sched_voluntary_switches_per_s");
    let wakeups = moved("sched_wakeups_per_s");
    let ctxt = moved("ctxt_per_s");
    eprintln!(
        "ping-pong {ROUND_TRIPS} round trips in {took:?}: voluntary {voluntary:.0}, wakeups {wakeups:.0}, \
         ctxt {ctxt:.0} (background subtracted), wakeup p50 {:.1} us p99 {:.1} us",
        per_s(&busy, "sched_wakeup_latency_p50_us"),
        per_s(&busy, "sched_wakeup_latency_p99_us")
    );
    // Tolerance: -10% (a message can occasionally be read without blocking) to +30%
    // (background noise on a shared machine that the idle interval did not capture).
    for (name, got, want) in [
        ("voluntary switches", voluntary, expected_blocks),
        ("wakeups", wakeups, expected_blocks),
        ("context switches (procfs)", ctxt, 2.0 * expected_blocks),
    ] {
        assert!(
            got >= 0.9 * want && got <= 1.3 * want,
            "{name}: moved by {got:.0}, expected {want:.0} within -10%/+30%"
        );
    }
    let p50 = per_s(&busy, "sched_wakeup_latency_p50_us");
    let p99 = per_s(&busy, "sched_wakeup_latency_p99_us");
    assert!(p50 > 0.0 && p50 <= p99, "p50 {p50} us, p99 {p99} us");
    // A round trip is two wakeups plus two message copies: the median wakeup latency
    // cannot exceed the mean round-trip time.
    let round_trip_us = took.as_secs_f64() * 1e6 / ROUND_TRIPS as f64;
    assert!(
        p50 <= round_trip_us,
        "p50 {p50} us > round trip {round_trip_us} us"
    );
    assert!(
        busy.missing.iter().all(|m| !m),
        "nothing missing with BPF on"
    );
}

#[test]
fn cpu_hog_moves_the_cpu_shares() {
    let _machine = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let (mut sampler, schema) = sampler(BpfMode::Off);
    let ncpu = std::thread::available_parallelism().unwrap().get() as f64;
    sampler.sample().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let idle = sampler.sample().unwrap();

    let hog = std::thread::spawn(|| {
        let until = Instant::now() + Duration::from_millis(1500);
        let mut x = 0u64;
        while Instant::now() < until {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        x
    });
    hog.join().unwrap();
    let busy = sampler.sample().unwrap();
    let share = |s: &Sample, n: &str| s.get(&schema, n).unwrap();
    let busy_share = |s: &Sample| {
        1.0 - share(s, "cpu_idle_share")
            - share(s, "cpu_iowait_share")
            - share(s, "cpu_steal_share")
    };
    let moved = busy_share(&busy) - busy_share(&idle);
    let user_moved = share(&busy, "cpu_user_share") - share(&idle, "cpu_user_share");
    let top = share(&busy, "top_proc_cpu_share");
    eprintln!("one hog thread on {ncpu} CPUs: busy share +{moved:.3}, user share +{user_moved:.3}, top process {top:.3}");
    // One spinning thread is one CPU out of ncpu; allow -25% for the scheduler giving the
    // CPU to others now and then, +25% for background.
    let one_cpu = 1.0 / ncpu;
    assert!(
        moved >= 0.75 * one_cpu && moved <= 1.25 * one_cpu,
        "busy share moved by {moved}, expected {one_cpu}"
    );
    assert!(
        user_moved >= 0.75 * one_cpu,
        "user share moved by {user_moved}, expected about {one_cpu}"
    );
    // This test process is the top process: at least the hog's CPU over the tick.
    assert!(
        top >= 0.75 * one_cpu,
        "top process share {top}, expected about {one_cpu}"
    );
    for (spec, (v, m)) in schema
        .features
        .iter()
        .zip(busy.values.iter().zip(&busy.missing))
    {
        if spec.unit == "share" && !m {
            assert!(
                (0.0..=1.0 + 1e-9).contains(v),
                "{} = {v} out of [0, 1]",
                spec.name
            );
        }
    }
}

#[test]
fn without_bpf_the_bpf_features_are_missing_and_procfs_ones_present() {
    let _machine = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let (mut sampler, schema) = sampler(BpfMode::Off);
    assert!(!sampler.bpf_active());
    std::thread::sleep(Duration::from_millis(200));
    let sample = sampler.sample().unwrap();
    for (i, spec) in schema.features.iter().enumerate() {
        let bpf = spec.source == asa_agent::perception::FeatureSource::Bpf;
        assert_eq!(sample.missing[i], bpf, "{} missing flag", spec.name);
        assert_eq!(
            sample.values[i].is_nan(),
            bpf,
            "{} = {}",
            spec.name,
            sample.values[i]
        );
    }
}

/// Degradation without rights: the test binary re-runs itself as `nobody` (no capabilities),
/// where loading BPF fails; the sampler must warn, keep going and flag the BPF features.
#[test]
fn unprivileged_sampler_degrades_to_procfs_only() {
    if std::env::var_os("ASA_PERCEPTION_UNPRIVILEGED_CHILD").is_some() {
        assert_ne!(unsafe { libc::geteuid() }, 0, "child must not be root");
        let (mut sampler, schema) = sampler(BpfMode::Auto);
        assert!(!sampler.bpf_active(), "BPF must not load without rights");
        assert!(sampler.bpf_unavailable_reason().is_some());
        std::thread::sleep(Duration::from_millis(200));
        let sample = sampler.sample().unwrap();
        let bpf_missing = schema
            .features
            .iter()
            .zip(&sample.missing)
            .filter(|(f, _)| f.source == asa_agent::perception::FeatureSource::Bpf)
            .all(|(_, m)| *m);
        assert!(bpf_missing);
        assert!(
            !sample.values[0].is_nan(),
            "procfs features are still measured"
        );
        return;
    }
    assert!(is_root(), "needs root to switch to nobody");
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().unwrap();
    let output = std::process::Command::new(&exe)
        .args([
            "--exact",
            "unprivileged_sampler_degrades_to_procfs_only",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("ASA_PERCEPTION_UNPRIVILEGED_CHILD", "1")
        .env("RUST_LOG", "warn")
        .current_dir("/")
        .uid(65534)
        .gid(65534)
        .output()
        .expect("run the test binary as nobody");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success() && text.contains("1 passed"),
        "unprivileged run failed (is the test binary readable by nobody?):\n{text}"
    );
}
