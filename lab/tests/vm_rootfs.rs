//! The lab itself, in the VM: the busybox guest reports status and files, and a Debian root
//! filesystem guest runs real Debian tools next to the agent and an expert.

use std::sync::Mutex;

use asa_lab::{GuestRun, Lab, RootfsSpec};

static VM: Mutex<()> = Mutex::new(());

#[test]
#[ignore = "boots the lab VM"]
fn busybox_guest_returns_status_console_and_files() {
    let _one = VM.lock().unwrap_or_else(|e| e.into_inner());
    let lab = Lab::new().unwrap();
    let run = GuestRun::new(
        "lab-basics",
        "echo console-line\nprintf 'a\\0b' > /lab/out/binary.bin\ncat /sys/kernel/sched_ext/state > /lab/out/state\nexit 7\n",
    );
    let out = lab.run(&run).unwrap();
    assert_eq!(out.exit_code, 7);
    assert!(out.script_output().contains("console-line"));
    assert_eq!(
        std::fs::read(out.out_dir.join("binary.bin")).unwrap(),
        b"a\0b"
    );
    assert_eq!(out.read_out("state").unwrap().trim(), "disabled");
    assert!(out.read_out("dmesg.txt").unwrap().contains("Linux version"));
    assert!(out.boot_time.is_some());
}

#[test]
#[ignore = "boots the lab VM"]
fn debian_rootfs_guest_runs_debian_tools_and_an_expert() {
    let _one = VM.lock().unwrap_or_else(|e| e.into_inner());
    let lab = Lab::new().unwrap();
    let mut run = GuestRun::new(
        "lab-rootfs",
        r#"set -u
. /etc/os-release; echo "$VERSION_CODENAME" > /lab/out/codename
xz --version | head -1 > /lab/out/xz
head -c 1000000 /dev/urandom > /tmp/blob && xz -T2 -k /tmp/blob && test -s /tmp/blob.xz; echo "xz=$?" >> /lab/out/results
scx_bpfland > /tmp/bpfland.log 2>&1 &
P=$!
i=0; while [ "$(cat /sys/kernel/sched_ext/state)" != enabled ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
cat /sys/kernel/sched_ext/root/ops > /lab/out/ops
kill -INT $P; wait $P; echo "bpfland_exit=$?" >> /lab/out/results
cat /sys/kernel/sched_ext/state > /lab/out/state_after
"#,
    );
    run.experts = vec!["bpfland".into()];
    run.rootfs = Some(RootfsSpec::with_packages(asa_lab::TEST_ROOTFS_PACKAGES));
    let out = lab.run(&run).unwrap();
    eprintln!("{}", out.script_output());
    assert_eq!(out.exit_code, 0);
    assert_eq!(
        out.read_out("codename").unwrap().trim(),
        asa_lab::rootfs::host_suite().unwrap()
    );
    assert!(out.read_out("xz").unwrap().starts_with("xz (XZ Utils)"));
    let results = out.read_out("results").unwrap();
    assert!(results.contains("xz=0"), "{results}");
    assert!(results.contains("bpfland_exit=0"), "{results}");
    assert!(out.read_out("ops").unwrap().starts_with("bpfland"));
    assert_eq!(out.read_out("state_after").unwrap().trim(), "disabled");
}

/// A work disk keeps what one boot wrote in /var/tmp/asa-work for the next boot, while the
/// rest of the root filesystem starts from the cached image again (copy-on-write).
#[test]
#[ignore = "boots the lab VM"]
fn work_disk_keeps_its_files_across_boots() {
    let _one = VM.lock().unwrap_or_else(|e| e.into_inner());
    let lab = Lab::new().unwrap();
    let name = format!("test-{}", std::process::id());
    let token = format!("{:x}", std::time::UNIX_EPOCH.elapsed().unwrap().as_nanos());
    let boot = |script: &str| {
        let mut run = GuestRun::new("lab-work-disk", script);
        run.rootfs = Some(RootfsSpec::with_packages(asa_lab::TEST_ROOTFS_PACKAGES));
        run.work_disk = Some(name.clone());
        let out = lab.run(&run).unwrap();
        eprintln!("{}", out.script_output());
        out
    };
    let first = boot(&format!(
        "set -u\nawk '$2 == \"/var/tmp/asa-work\" {{ print $3 }}' /proc/mounts > /lab/out/fstype\n\
         echo {token} > /var/tmp/asa-work/marker\necho gone > /var/tmp/not-kept\n"
    ));
    assert_eq!(first.exit_code, 0);
    assert_eq!(first.read_out("fstype").unwrap().trim(), "ext4");
    assert!(
        first
            .console
            .contains("ASA-LAB: work disk at /var/tmp/asa-work"),
        "{}",
        first.console
    );
    let second = boot(
        "cat /var/tmp/asa-work/marker > /lab/out/marker\n\
         test -e /var/tmp/not-kept && echo kept > /lab/out/other || echo absent > /lab/out/other\n",
    );
    let rootfs_image = std::fs::read_dir(lab.cache.join("lab/work"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{name}-")))
        })
        .collect::<Vec<_>>();
    for p in &rootfs_image {
        std::fs::remove_file(p).unwrap();
    }
    assert_eq!(rootfs_image.len(), 1, "one image for this name");
    assert_eq!(second.exit_code, 0);
    assert_eq!(second.read_out("marker").unwrap().trim(), token);
    assert_eq!(second.read_out("other").unwrap().trim(), "absent");
}

/// The lab's disks take many I/Os in flight: eight threads of random O_DIRECT reads and writes
/// (`sysbench fileio`, as asa-gru-compare runs them) for 10 s on the root filesystem's
/// disk complete and the guest kernel logs no I/O timeout. qemu's emulated NVMe, the lab's disk
/// before 2026-11-25, lost completions under this load with TCG (the driver's 30 s timeout,
/// then a controller reset: `ASA_LAB_DISK=nvme` makes this test fail). The disk is virtio-blk
/// unless `ASA_LAB_DISK` says otherwise.
#[test]
#[ignore = "boots the lab VM"]
fn disk_completes_eight_direct_io_streams() {
    let _one = VM.lock().unwrap_or_else(|e| e.into_inner());
    let lab = Lab::new().unwrap();
    let mut run = GuestRun::new(
        "lab-disk-io",
        r#"set -u
ls /sys/block > /lab/out/blocks
mkdir -p /root/sb && cd /root/sb
FILES="--file-total-size=64M --file-num=8"
sysbench fileio $FILES prepare > /dev/null 2>&1; echo "prepare=$?" >> /lab/out/results
sysbench fileio $FILES --file-test-mode=rndrw --file-extra-flags=direct --threads=8 --time=10 \
  run > /lab/out/fileio.txt 2>&1
echo "run=$?" >> /lab/out/results
dmesg | grep -iE "timeout|reset|I/O error" > /lab/out/io-errors || true
"#,
    );
    run.rootfs = Some(RootfsSpec::with_packages(asa_lab::TEST_ROOTFS_PACKAGES));
    let out = lab.run(&run).unwrap();
    eprintln!("{}", out.script_output());
    assert_eq!(out.exit_code, 0);
    let results = out.read_results("results").unwrap();
    assert_eq!(
        results.get("prepare").map(String::as_str),
        Some("0"),
        "{results:?}"
    );
    assert_eq!(
        results.get("run").map(String::as_str),
        Some("0"),
        "{results:?}"
    );
    let report = out.read_out("fileio.txt").unwrap();
    assert!(report.contains("reads/s:"), "{report}");
    let errors = out.read_out("io-errors").unwrap();
    assert!(
        errors.trim().is_empty(),
        "the guest kernel logged: {errors}"
    );
    if std::env::var_os(asa_lab::vm::DISK_BUS_ENV).is_none() {
        let blocks = out.read_out("blocks").unwrap();
        assert!(
            blocks.lines().any(|b| b == "vda"),
            "no virtio disk: {blocks}"
        );
    }
}

/// The timer disk (`asa_lab::timer_disk`): a RAM-backed null_blk device made in the guest,
/// formatted and mounted, whose I/Os take the configured 2 ms on a guest timer. One thread of
/// O_DIRECT random reads and writes (no fsync) can then never see an I/O faster than 2 ms nor
/// complete more than 500 a second; on the virtio disk the same load takes about 0.25 ms an
/// I/O. The files are on the null_blk device, not on the root filesystem's disk.
#[test]
#[ignore = "boots the lab VM"]
fn timer_disk_completes_each_io_after_its_latency() {
    let _one = VM.lock().unwrap_or_else(|e| e.into_inner());
    let lab = Lab::new().unwrap();
    let script = format!(
        r#"set -u
{}
dev=$(timer_disk /root/td 2000000 128) || exit 7
echo "dev=$dev" >> /lab/out/results
df /root/td | awk 'NR==2 {{print "mounted=" $1}}' >> /lab/out/results
cd /root/td
FILES="--file-total-size=16M --file-num=4"
sysbench fileio $FILES prepare > /dev/null 2>&1; echo "prepare=$?" >> /lab/out/results
sysbench fileio $FILES --file-test-mode=rndrw --file-extra-flags=direct --file-fsync-freq=0 \
  --threads=1 --time=3 run > /lab/out/fileio.txt 2>&1
echo "run=$?" >> /lab/out/results
"#,
        asa_lab::timer_disk::TIMER_DISK_SH
    );
    let mut run = GuestRun::new("lab-timer-disk", &script);
    run.rootfs = Some(RootfsSpec::with_packages(asa_lab::TEST_ROOTFS_PACKAGES));
    let out = lab.run(&run).unwrap();
    eprintln!("{}", out.script_output());
    assert_eq!(out.exit_code, 0);
    let results = out.read_results("results").unwrap();
    let dev = results.get("dev").expect("the device").clone();
    assert!(
        dev.starts_with("/dev/asa") || dev.starts_with("/dev/nullb"),
        "{results:?}"
    );
    assert_eq!(results.get("mounted"), Some(&dev), "{results:?}");
    assert_eq!(results.get("prepare").map(String::as_str), Some("0"));
    assert_eq!(results.get("run").map(String::as_str), Some("0"));
    let report = out.read_out("fileio.txt").unwrap();
    let number_after = |label: &str| -> f64 {
        let line = report.lines().find(|l| l.contains(label)).unwrap();
        line[line.find(label).unwrap() + label.len()..]
            .split_whitespace()
            .next()
            .unwrap()
            .trim_end_matches('s')
            .parse()
            .unwrap()
    };
    let min_ms = number_after("min:");
    let events = number_after("total number of events:");
    let total_s = number_after("total time:");
    assert!(
        min_ms >= 1.99,
        "an I/O faster than the 2 ms device: {report}"
    );
    assert!(events > 100.0, "too few I/Os: {report}");
    assert!(
        events / total_s <= 505.0,
        "more I/Os than 2 ms each allows: {report}"
    );
}

/// With `-icount shift=2,sleep=off` (`VmConfig::icount`, or `ASA_LAB_ICOUNT`) the guest's clock
/// counts instructions and jumps over idle time: a guest that sleeps 120 s by its own clock
/// finishes in far less host time (without -icount the sleep alone takes 120 s of it), and a
/// fixed busy loop takes the same guest time on every run of it, to within 1 %.
#[test]
#[ignore = "boots the lab VM"]
fn icount_guest_time_counts_instructions() {
    let _one = VM.lock().unwrap_or_else(|e| e.into_inner());
    let lab = Lab::new().unwrap();
    let mut run = GuestRun::new(
        "lab-icount",
        r#"set -u
up() { cut -d' ' -f1 /proc/uptime; }
t0=$(up); sleep 120; t1=$(up)
echo "slept=$(awk "BEGIN {print $t1 - $t0}")" >> /lab/out/results
for n in 1 2 3; do
  t0=$(up); i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; t1=$(up)
  echo "loop$n=$(awk "BEGIN {print $t1 - $t0}")" >> /lab/out/results
done
"#,
    );
    run.vm.icount = Some("shift=2,sleep=off".into());
    let started = std::time::Instant::now();
    let out = lab.run(&run).unwrap();
    let host_s = started.elapsed().as_secs_f64();
    assert_eq!(out.exit_code, 0, "{}", out.script_output());
    let results = out.read_results("results").unwrap();
    let secs = |k: &str| -> f64 { results[k].parse().unwrap() };
    assert!(secs("slept") >= 120.0, "{results:?}");
    assert!(
        host_s < 90.0,
        "a 120 s guest sleep took {host_s:.1} s of host time: the guest clock follows the host's"
    );
    let loops = [secs("loop1"), secs("loop2"), secs("loop3")];
    let (lo, hi) = (
        loops.iter().cloned().fold(f64::INFINITY, f64::min),
        loops.iter().cloned().fold(0.0, f64::max),
    );
    assert!(lo > 0.0 && hi / lo < 1.01, "busy loops took {loops:?} s");
}
