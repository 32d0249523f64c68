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

    // The hog is another process: the sampler leaves its own process out of the per-process
    // features. A process counts from the scan after the one that first sees it (scans at most
    // about once per second), so one sample registers it and the next measures it.
    let mut hog = std::process::Command::new("sh")
        .args(["-c", "while :; do :; done"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    sampler.sample().unwrap(); // the scan that first sees the hog
    std::thread::sleep(Duration::from_millis(1500));
    let busy = sampler.sample().unwrap();
    hog.kill().unwrap();
    hog.wait().unwrap();
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
    // The hog is the top process: about one CPU over the tick.
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
    // The child's BPF load attempt and start-up must not overlap another test's measurement.
    let _machine = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
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

/// `n` TCP connections over loopback, each accepted and then closed by both ends: TCP
/// counters (which include loopback) see 2n opens (n active + n passive) and 2n sockets leave
/// the established state; nothing stays established.
#[test]
fn tcp_connections_move_new_and_closed_counters() {
    let _machine = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let (mut sampler, schema) = sampler(BpfMode::Off);
    const CONNECTIONS: usize = 300;
    sampler.sample().unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let idle = sampler.sample().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let started = Instant::now();
    for _ in 0..CONNECTIONS {
        let client = std::net::TcpStream::connect(address).unwrap();
        let (server, _) = listener.accept().unwrap();
        drop(client);
        drop(server);
    }
    // Let the last FIN/ACKs through before reading.
    std::thread::sleep(Duration::from_millis(700).saturating_sub(started.elapsed()));
    let busy = sampler.sample().unwrap();
    let moved = |name: &str| {
        let per_s = |s: &Sample| s.get(&schema, name).unwrap();
        (per_s(&busy) - per_s(&idle)) * busy.interval_s
    };
    let new = moved("tcp_new_conn_per_s");
    let closed = moved("tcp_closed_conn_per_s");
    eprintln!("{CONNECTIONS} loopback connections: new {new:.0}, closed {closed:.0} (background subtracted)");
    let want = 2.0 * CONNECTIONS as f64;
    for (name, got) in [("new", new), ("closed", closed)] {
        assert!(
            (got - want).abs() <= 0.1 * want,
            "{name} connections moved by {got:.0}, expected {want:.0} ± 10%"
        );
    }
    assert!(busy.get(&schema, "tcp_share_of_tcp_udp").unwrap() > 0.5);
}

/// 32 MiB written and fsync'ed to a file on the root disk: the disk features account for at
/// least that much data in completed writes (average size × operations), with a latency.
#[test]
fn disk_writes_move_the_disk_features() {
    let _machine = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let (mut sampler, schema) = sampler(BpfMode::Off);
    const MIB: usize = 32;
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("disk-test.bin");
    let chunk = vec![0x5au8; 1 << 20];
    sampler.sample().unwrap();
    {
        use std::io::Write;
        let mut file = std::fs::File::create(&path).unwrap();
        for _ in 0..MIB {
            file.write_all(&chunk).unwrap();
        }
        file.sync_all().unwrap();
    }
    let busy = sampler.sample().unwrap();
    let get = |name: &str| busy.get(&schema, name).unwrap();
    let ops = (get("disk_read_ops_per_s") + get("disk_write_ops_per_s")) * busy.interval_s;
    let kib = ops * get("disk_avg_io_kib");
    eprintln!(
        "{MIB} MiB written: {:.0} write ops, {kib:.0} KiB moved, write latency {:.2} ms, busy {:.2}",
        get("disk_write_ops_per_s") * busy.interval_s,
        get("disk_write_latency_ms"),
        get("disk_busy_share")
    );
    assert!(get("disk_write_ops_per_s") > 0.0);
    assert!(
        kib >= 0.95 * (MIB * 1024) as f64,
        "{kib:.0} KiB moved, expected at least {} KiB",
        MIB * 1024
    );
    assert!(get("disk_write_latency_ms") > 0.0);
    assert!(get("disk_busy_share") > 0.0);
}

/// Twice as many spinning threads as CPUs: on average one per CPU waits in a run queue, so the
/// Little's-law feature reads 1 waiting task per CPU (±25 %), the sampled runnable count is at
/// least 2 per CPU, and the spinners are switched involuntarily.
#[test]
fn oversubscription_moves_the_run_queue_features() {
    assert!(
        is_root(),
        "run the perception host tests as root (BPF probe)"
    );
    let _machine = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let (mut sampler, schema) = sampler(BpfMode::Auto);
    assert!(sampler.bpf_active());
    let ncpu = std::thread::available_parallelism().unwrap().get();
    let spinners_count = 2 * ncpu;
    sampler.sample().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let idle = sampler.sample().unwrap();

    let until = Instant::now() + Duration::from_millis(2500);
    let spinners: Vec<_> = (0..spinners_count)
        .map(|_| {
            std::thread::spawn(move || {
                let mut x = 0u64;
                while Instant::now() < until {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    sampler.sample().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let busy = sampler.sample().unwrap();
    for s in spinners {
        s.join().unwrap();
    }
    let get = |s: &Sample, n: &str| s.get(&schema, n).unwrap();
    let waiting =
        get(&busy, "sched_runq_waiting_per_cpu") - get(&idle, "sched_runq_waiting_per_cpu");
    let runnable = get(&busy, "procs_runnable_per_cpu");
    let involuntary = get(&busy, "sched_involuntary_switches_per_s")
        - get(&idle, "sched_involuntary_switches_per_s");
    // Spinners beyond the CPUs left free by whatever else runs (measured before they start:
    // a process spinning elsewhere on this host is one more runnable task) wait.
    let background = ((1.0 - get(&idle, "cpu_idle_share")) * ncpu as f64).round();
    let expected = (spinners_count as f64 + background - ncpu as f64) / ncpu as f64;
    eprintln!(
        "{spinners_count} spinners on {ncpu} CPUs, {background} busy before: waiting per CPU +{waiting:.2} (expected {expected:.2}), runnable per CPU {runnable:.2}, \
         involuntary +{involuntary:.0}/s, run-queue wait mean {:.0} us",
        get(&busy, "sched_runq_wait_mean_us")
    );
    assert!(
        (waiting - expected).abs() <= 0.25 * expected,
        "waiting tasks per CPU moved by {waiting:.2}, expected {expected:.2} ± 25%"
    );
    assert!(runnable >= 2.0, "runnable per CPU {runnable}");
    assert!(
        involuntary > 10.0,
        "spinners must be preempted: {involuntary}/s"
    );
}

/// The BPF task iterator gives each process the accounting /proc/<pid>/stat prints: the same
/// processes, threads, CPU time (to a few clock ticks: the two reads are not at one instant),
/// minor faults and resident set, for this test process after three threads spun.
#[test]
fn the_bpf_task_scan_agrees_with_proc_pid_stat() {
    use asa_agent::perception::procfs_source::processes::{ProcessStat, StatFiles};
    use asa_agent::perception::task_scan::TaskScan;
    use std::collections::HashMap;

    assert!(is_root(), "run the perception host tests as root (BPF)");
    let _machine = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let mut scan = TaskScan::load().expect("the task iterator loads as root");
    let spinners: Vec<_> = (0..3)
        .map(|_| {
            std::thread::spawn(|| {
                let until = Instant::now() + Duration::from_millis(300);
                let mut x = 0u64;
                while Instant::now() < until {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
                std::thread::sleep(Duration::from_millis(500));
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(350));
    let (mut from_bpf, mut io) = (Vec::new(), HashMap::new());
    scan.read(&mut from_bpf, &mut io).expect("a walk");
    let mut from_proc = Vec::new();
    StatFiles::default()
        .read_all(std::path::Path::new("/proc"), &mut from_proc)
        .expect("/proc scan");
    for s in spinners {
        s.join().unwrap();
    }

    let by_pid = |v: &[ProcessStat]| v.iter().map(|p| (p.pid, *p)).collect::<HashMap<_, _>>();
    let (bpf, proc) = (by_pid(&from_bpf), by_pid(&from_proc));
    assert!(
        (bpf.len() as i64 - proc.len() as i64).abs() <= 5,
        "processes: {} from BPF, {} from /proc",
        bpf.len(),
        proc.len()
    );
    let me = std::process::id() as i32;
    let (b, p) = (bpf[&me], proc[&me]);
    assert_eq!(b.threads, p.threads, "threads of this process");
    assert!(
        p.cpu_ticks >= 80 && b.cpu_ticks.abs_diff(p.cpu_ticks) <= 3,
        "CPU ticks of this process: {} from BPF, {} from /proc",
        b.cpu_ticks,
        p.cpu_ticks
    );
    assert!(
        b.minflt.abs_diff(p.minflt) <= 10.max(p.minflt / 20),
        "minor faults: {} from BPF, {} from /proc",
        b.minflt,
        p.minflt
    );
    assert!(
        b.rss_bytes.abs_diff(p.rss_bytes) <= p.rss_bytes / 10,
        "resident set: {} from BPF, {} from /proc",
        b.rss_bytes,
        p.rss_bytes
    );
    let same_threads = proc
        .iter()
        .filter(|(pid, p)| bpf.get(pid).is_some_and(|b| b.threads == p.threads))
        .count();
    assert!(
        same_threads * 100 >= proc.len() * 95,
        "threads agree for {same_threads} of {} processes",
        proc.len()
    );
    assert!(io[&me] > 0, "this process has read and written something");
}

/// The same walk names each thread's application as `AppKey::of_process` reads it from /proc
/// (process group, cgroup-v2 id), for a child in a process group of its own and for this
/// process, and counts its context switches and read/write calls — only once asked to.
#[test]
fn the_bpf_task_scan_names_each_threads_application_as_proc_does() {
    use asa_agent::perception::apps::AppKey;
    use asa_agent::perception::task_scan::TaskScan;
    use std::collections::HashMap;
    use std::os::unix::process::CommandExt;

    assert!(is_root(), "run the perception host tests as root (BPF)");
    let _machine = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let mut scan = TaskScan::load().expect("the task iterator loads as root");
    let mut child = std::process::Command::new("sh")
        .args(["-c", "for i in 1 2 3 4 5; do sleep 0.01; done; sleep 5"])
        .process_group(0)
        .spawn()
        .expect("spawn sh");
    std::thread::sleep(Duration::from_millis(200));
    let (mut stats, mut io) = (Vec::new(), HashMap::new());
    let mut threads = Vec::new();
    scan.read(&mut stats, &mut io)
        .expect("a whole-machine walk");
    assert!(
        !scan.threads(&mut threads) && threads.is_empty(),
        "a walk before set_with_apps(true) gives no threads"
    );
    let whole_machine = stats.clone();
    scan.set_with_apps(true)
        .expect("turn the application fields on");
    scan.read(&mut stats, &mut io)
        .expect("a walk with applications");
    assert!(scan.threads(&mut threads), "this walk gives threads");
    assert!(
        whole_machine.iter().any(|p| p.pid == child.id() as i32),
        "the whole-machine walk saw the child too"
    );
    let child_key = AppKey::of_process(child.id()).expect("the child's application");
    let me_key = AppKey::of_process(std::process::id()).expect("this process's application");
    let _ = child.kill();
    let _ = child.wait();

    let leader_of = |pid: u32| {
        threads
            .iter()
            .find(|t| t.pid == pid && t.leader)
            .copied()
            .unwrap_or_else(|| panic!("no leader record for {pid}"))
    };
    let c = leader_of(child.id());
    assert_eq!(c.pgid, child.id(), "the child leads its own process group");
    assert_eq!(
        (c.cgroup, c.pgid),
        (child_key.cgroup, child_key.pgid),
        "the walk's key of the child"
    );
    assert!(c.nvcsw >= 1, "the child blocked in wait(): {c:?}");
    let me = leader_of(std::process::id());
    assert_eq!((me.cgroup, me.pgid), (me_key.cgroup, me_key.pgid));
    // Every thread of this process is in this process's application.
    for t in threads.iter().filter(|t| t.tgid == std::process::id()) {
        assert_eq!((t.cgroup, t.pgid), (me_key.cgroup, me_key.pgid), "{t:?}");
    }
    let calls: u64 = threads
        .iter()
        .filter(|t| t.tgid == std::process::id())
        .map(|t| t.io_calls + t.exited.io_calls)
        .sum();
    assert!(calls > 0, "this process read files (syscr + syscw)");
    assert!(
        threads.iter().filter(|t| t.cgroup != 0).count() * 10 >= threads.len() * 9,
        "most threads have a cgroup id"
    );
}

/// `asa record --apps` with the BPF task walk: every walk after the first (walks are at least
/// 0.9 s apart) has a row per application, this process's among them, with the schema's columns.
#[test]
fn recording_applications_writes_a_row_per_application_each_tick() {
    use asa_agent::perception::apps::{AppKey, APP_FEATURES};
    use asa_agent::perception::{record, RecordArgs};
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::RowAccessor;

    assert!(is_root(), "run the perception host tests as root (BPF)");
    let _machine = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let apps = dir.path().join("apps.parquet");
    record(&RecordArgs {
        label: "idle".into(),
        out: dir.path().join("run.parquet"),
        interval_ms: 1000,
        duration: Some(4.0),
        no_bpf: false,
        schema: None,
        apps: Some(apps.clone()),
    })
    .expect("record with --apps");
    let reader = SerializedFileReader::new(std::fs::File::open(&apps).unwrap()).unwrap();
    let meta = reader.metadata().file_metadata();
    let columns: Vec<String> = meta
        .schema_descr()
        .columns()
        .iter()
        .map(|c| c.name().to_string())
        .collect();
    assert_eq!(&columns[6..], &APP_FEATURES);
    let me = AppKey::of_process(std::process::id()).unwrap();
    let rows: Vec<_> = reader
        .get_row_iter(None)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    let ticks: std::collections::BTreeSet<i64> =
        rows.iter().map(|r| r.get_long(1).unwrap()).collect();
    assert!(ticks.len() >= 2, "rows from {} ticks", ticks.len());
    let mine: Vec<_> = rows
        .iter()
        .filter(|r| {
            r.get_long(2).unwrap() as u64 == me.cgroup
                && r.get_long(3).unwrap() == i64::from(me.pgid)
        })
        .collect();
    assert!(
        mine.len() >= 2,
        "this process's application each tick: {}",
        mine.len()
    );
    assert!(mine.iter().all(|r| r
        .get_string(4)
        .unwrap()
        .split(',')
        .any(|p| p == std::process::id().to_string())));
}
