//! Host tests of the perception sampler on the real kernel (run as root: the BPF probe needs
//! it; this host has BTF and BPF tracing). Each test drives a workload of known size between
//! two sampler readings and checks the features move by the expected amount, after
//! subtracting the background measured over an equal idle interval just before.
//!
//! The tests share one lock: they measure the whole machine and must not overlap.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use asa_agent::perception::{BpfMode, Sample, Sampler, SchemaFile};

mod perception_common;

static MACHINE: Mutex<()> = Mutex::new(());

fn is_root() -> bool {
    unsafe { libc::geteuid() == 0 }
}

fn sampler(mode: BpfMode) -> (Sampler, SchemaFile) {
    let schema = SchemaFile::builtin().expect("built-in schema");
    let sampler = Sampler::new(schema.clone(), mode).expect("sampler starts");
    (sampler, schema)
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
    perception_common::check_ping_pong(&mut sampler, &schema, 50_000);
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
