//! Host tests of the per-application hint writer on the real kernel (run as root: BPF). The
//! host has no sched_ext, but the task-hint map, the apply walk and the fork-time inheritance
//! are plain BPF: what scx_layered would read is checked here, in the map itself, through a
//! private bpffs mount.
//!
//! The tests share one lock: each mounts its own bpffs, but the walks see every task.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use asa_agent::action::app_hints::AppHints;
use asa_agent::perception::apps::AppKey;

static MACHINE: Mutex<()> = Mutex::new(());

/// A private bpffs mount, unmounted on drop.
struct Bpffs {
    dir: tempfile::TempDir,
}

impl Bpffs {
    fn mount() -> Bpffs {
        assert!(
            unsafe { libc::geteuid() } == 0,
            "run the hint writer's host tests as root (BPF)"
        );
        let dir = tempfile::tempdir().unwrap();
        let target = CString::new(dir.path().as_os_str().as_encoded_bytes()).unwrap();
        let fstype = CString::new("bpf").unwrap();
        // SAFETY: mount with valid C strings and no data.
        let rc = unsafe {
            libc::mount(
                fstype.as_ptr(),
                target.as_ptr(),
                fstype.as_ptr(),
                0,
                std::ptr::null(),
            )
        };
        assert_eq!(rc, 0, "mount bpffs: {}", std::io::Error::last_os_error());
        Bpffs { dir }
    }

    fn pin(&self) -> PathBuf {
        self.dir.path().join("asa/task_hints")
    }
}

impl Drop for Bpffs {
    fn drop(&mut self) {
        let target = CString::new(self.dir.path().as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: umount of the path mounted above.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    }
}

/// `sh -c script` in a process group of its own (a job, as a shell starts one), killed on drop.
struct Job(Child);

impl Job {
    fn start(script: &str) -> Job {
        use std::os::unix::process::CommandExt;
        Job(Command::new("sh")
            .args(["-c", script])
            .process_group(0)
            .spawn()
            .unwrap())
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }

    /// Waits up to 5 s until the job's process runs `comm` (its shell has exec'd it), so that
    /// no task of the job is still to come.
    fn running(self, comm: &str) -> Job {
        let path = format!("/proc/{}/comm", self.pid());
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::fs::read_to_string(&path).unwrap_or_default().trim() != comm {
            assert!(Instant::now() < deadline, "the job never ran {comm}");
            std::thread::sleep(Duration::from_millis(20));
        }
        self
    }

    fn key(&self) -> AppKey {
        AppKey::of_process(self.pid()).unwrap()
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        // SAFETY: kill of the job's own process group.
        unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

/// The children of `pid`'s main thread, waiting up to 5 s for at least one.
fn children(pid: u32) -> Vec<u32> {
    let path = format!("/proc/{pid}/task/{pid}/children");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let kids: Vec<u32> = text
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        if !kids.is_empty() || Instant::now() > deadline {
            return kids;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn load(pin: &Path) -> AppHints {
    AppHints::load(pin).expect("the hint writer loads on this host as root")
}

#[test]
fn an_applications_hint_reaches_its_tasks_and_only_them() {
    let _machine = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let fs = Bpffs::mount();
    let mut hints = load(&fs.pin());
    assert!(fs.pin().exists(), "the task-hint map is pinned");
    // Each job one task (the shell execs sleep): a second walk then finds nothing new.
    let job = Job::start("exec sleep 30").running("sleep");
    let other = Job::start("exec sleep 30").running("sleep");
    hints.set(&BTreeMap::from([(job.key(), 3)])).unwrap();
    let totals = hints.apply().unwrap();
    println!("apply walk: {totals:?}");
    assert!(totals.tasks > 10, "the walk saw every task: {totals:?}");
    assert!(totals.set >= 1, "{totals:?}");
    assert_eq!(hints.hint_of_task(job.pid()).unwrap(), Some(3));
    assert_eq!(hints.hint_of_task(other.pid()).unwrap(), None);
    assert_eq!(hints.hint_of_task(std::process::id()).unwrap(), None);
    // Nothing changed: a second walk writes nothing.
    assert_eq!(hints.apply().unwrap().set, 0);
}

#[test]
fn a_class_change_and_a_class_removal_reach_the_tasks_at_the_next_walk() {
    let _machine = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let fs = Bpffs::mount();
    let mut hints = load(&fs.pin());
    let job = Job::start("sleep 30");
    hints.set(&BTreeMap::from([(job.key(), 1)])).unwrap();
    hints.apply().unwrap();
    hints.set(&BTreeMap::from([(job.key(), 4)])).unwrap();
    assert_eq!(
        hints.hint_of_task(job.pid()).unwrap(),
        Some(1),
        "not before the walk"
    );
    hints.apply().unwrap();
    assert_eq!(hints.hint_of_task(job.pid()).unwrap(), Some(4));
    hints.set(&BTreeMap::new()).unwrap();
    let totals = hints.apply().unwrap();
    assert!(totals.cleared >= 1, "{totals:?}");
    assert_eq!(hints.hint_of_task(job.pid()).unwrap(), None);
}

#[test]
fn a_process_forked_after_the_walk_starts_with_its_parents_hint() {
    let _machine = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let fs = Bpffs::mount();
    let mut hints = load(&fs.pin());
    // The shell forks its child a second after the walk; no walk runs after that.
    let job = Job::start("sleep 1; sleep 30 & wait");
    hints.set(&BTreeMap::from([(job.key(), 5)])).unwrap();
    hints.apply().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let kids = children(job.pid());
    let child = *kids.last().expect("the shell forked its child");
    assert_eq!(
        hints.hint_of_task(child).unwrap(),
        Some(5),
        "child {child} of {kids:?}"
    );
}

#[test]
fn a_restarted_writer_adopts_the_applications_and_their_hints() {
    let _machine = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let fs = Bpffs::mount();
    let job = Job::start("sleep 30");
    {
        let mut first = load(&fs.pin());
        first.set(&BTreeMap::from([(job.key(), 2)])).unwrap();
        first.apply().unwrap();
    }
    let mut second = load(&fs.pin());
    assert_eq!(second.hint_of_task(job.pid()).unwrap(), Some(2));
    // It adopts the earlier writer's applications: its first walk keeps their hints.
    assert_eq!(second.adopted(), &BTreeMap::from([(job.key(), 2)]));
    let totals = second.apply().unwrap();
    assert_eq!((totals.set, totals.cleared), (0, 0), "{totals:?}");
    assert_eq!(second.hint_of_task(job.pid()).unwrap(), Some(2));
}

#[test]
fn a_vanished_task_is_one_clear_error() {
    let _machine = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let fs = Bpffs::mount();
    let hints = load(&fs.pin());
    let error = hints.hint_of_task(u32::MAX / 2).unwrap_err();
    assert!(format!("{error:#}").contains("gone"), "{error:#}");
}

/// `asa scenario run --oracle-hints`: during a layer-plan expert's run the labelled groups get
/// their class's hint, including a process forked later by the runner (it inherits the
/// runner's hint at fork, and the re-apply gives it its own); at the end of the run every hint
/// is gone; another expert's run writes none.
#[test]
fn oracle_hints_label_a_layer_plan_run_and_leave_nothing_after_it() {
    use asa_agent::action::oracle_hints::{OracleHints, REAPPLY};
    use asa_scenarios::{LabelledApp, RunObserver};
    let _machine = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let fs = Bpffs::mount();
    let plan = asa_layers::default_plan();
    let batch = plan.hint_of("cpu_batch").unwrap();
    let mut oracle = OracleHints::new(asa_experts::Catalogue::builtin(), plan.clone(), fs.pin());
    let scenario: asa_scenarios::catalogue::ScenarioSpec = toml::from_str(
        r#"
name = "T1"
title = "a test"
probe = "office"
load = "kernel_build"
"#,
    )
    .unwrap();
    let job = Job::start("sleep 30");
    let label = |pgid| LabelledApp {
        pgid,
        class: "cpu_batch".into(),
    };

    // Another expert: nothing written.
    oracle.run_starting(&scenario, "cosmos", 0).unwrap();
    oracle.applications(&[label(job.pid())]).unwrap();
    oracle.run_finished(&scenario, None).unwrap();
    // A second handle on the map, to read it (it writes nothing).
    let hints = load(&fs.pin());
    assert_eq!(hints.hint_of_task(job.pid()).unwrap(), None);

    // A layer-plan run: the group gets its hint, and so does a process forked into it later.
    oracle.run_starting(&scenario, "layered", 0).unwrap();
    oracle.applications(&[label(job.pid())]).unwrap();
    let late = Job::start("sleep 30");
    oracle
        .applications(&[label(job.pid()), label(late.pid())])
        .unwrap();
    std::thread::sleep(REAPPLY * 3);
    assert_eq!(hints.hint_of_task(job.pid()).unwrap(), Some(batch.into()));
    assert_eq!(hints.hint_of_task(late.pid()).unwrap(), Some(batch.into()));
    assert_eq!(hints.hint_of_task(std::process::id()).unwrap(), None);

    // The end of the run: no hint left.
    oracle.run_finished(&scenario, None).unwrap();
    assert_eq!(hints.hint_of_task(job.pid()).unwrap(), None);
    assert_eq!(hints.hint_of_task(late.pid()).unwrap(), None);
}
