//! The perception sampler inside the lab VM (Debian's sched_ext kernel under qemu): this test
//! binary copies itself into the guest and re-runs this same test there (as root, with the
//! guest kernel's BTF), where it checks that the BPF probe loads, repeats the ping-pong check
//! of the host test at a size TCG runs quickly, and records a short Parquet file that the
//! host then reads back.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use asa_agent::perception::{record, BpfMode, RecordArgs, Sampler, SchemaFile};
use asa_lab::{GuestRun, Lab};
use parquet::file::reader::{FileReader, SerializedFileReader};

mod perception_common;

const IN_GUEST: &str = "ASA_PERCEPTION_IN_GUEST";
const GUEST_EXE: &str = "/usr/local/bin/perception_vm";

fn guest_side() {
    let schema = SchemaFile::builtin().unwrap();
    let mut sampler = Sampler::new(schema.clone(), BpfMode::Auto).unwrap();
    assert!(
        sampler.bpf_active(),
        "BPF probe must load in the guest: {:?}",
        sampler.bpf_unavailable_reason()
    );
    perception_common::check_ping_pong(&mut sampler, &schema, 5_000);

    // Cost at 1 Hz for 5 s (informative; TCG inflates it).
    let cpu = || {
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        tv(u.ru_utime) + tv(u.ru_stime)
    };
    let (cpu0, t0) = (cpu(), Instant::now());
    for _ in 0..5 {
        std::thread::sleep(Duration::from_secs(1));
        sampler.sample().unwrap();
    }
    eprintln!(
        "guest sampler at 1 Hz: {:.3}% of one core",
        (cpu() - cpu0) / t0.elapsed().as_secs_f64() * 100.0
    );
    drop(sampler);

    record(&RecordArgs {
        label: "vm-idle".into(),
        out: PathBuf::from("/lab/out/vm.parquet"),
        interval_ms: 500,
        duration: Some(3.0),
        no_bpf: false,
        schema: None,
        apps: None,
    })
    .unwrap();
}

#[test]
#[ignore = "needs the lab VM: run with make test"]
fn sampler_runs_in_the_lab_vm() {
    if std::env::var_os(IN_GUEST).is_some() {
        guest_side();
        return;
    }
    let lab = Lab::new().expect("the lab is set up (run lab/setup.sh)");
    let script = format!(
        "{IN_GUEST}=1 {GUEST_EXE} --exact sampler_runs_in_the_lab_vm --include-ignored --nocapture --test-threads=1"
    );
    let mut run = GuestRun::new("perception", &script);
    run.executables
        .push((std::env::current_exe().unwrap(), PathBuf::from(GUEST_EXE)));
    run.vm.timeout = Duration::from_secs(600);
    let outcome = lab.run(&run).expect("the lab VM ran");
    let console = outcome.script_output();
    eprintln!("---- guest console ----\n{console}");
    assert_eq!(outcome.exit_code, 0, "guest side failed");
    assert!(console.contains("1 passed"), "the guest ran the test");

    let path = outcome.out_dir.join("vm.parquet");
    let reader = SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap();
    let rows = reader.metadata().file_metadata().num_rows();
    assert!((5..=7).contains(&rows), "3 s at 500 ms gave {rows} rows");
}
