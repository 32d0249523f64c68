//! Another tool's sched_ext scheduler at start (issue 32, point 3).
//!
//! ASA only manages schedulers it started, and it must not fight another tool over the
//! scheduler, nor crash-loop under systemd's `Restart=on-failure` while that tool's scheduler
//! runs. So `asa run` finding a scheduler attached at start:
//! - by default **waits**: it logs once (and again when the foreign scheduler changes), answers
//!   `asa status` (mode `waiting`, the foreign ops name, since when) and refuses pins, looks
//!   every [`POLL`] and takes control as soon as the kernel is back on EEVDF;
//! - with `--take-over` (or `take_over = true`) first asks the scheduler's owner to leave:
//!   SIGINT, which every scx scheduler handles by detaching cleanly (what `scxctl stop` and
//!   scx_loader do), to the one process that holds a struct_ops BPF link. It never sends
//!   SIGKILL, and signals nothing when no process or more than one holds such a link (a
//!   pinned link, or something it cannot tell apart): then it waits as above. A tool that
//!   restarts its scheduler (a service with `Restart=`) is not fought: the agent waits.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use asa_experts::{SchedExt, ScxSnapshot, ScxState};

/// How often the agent looks whether the foreign scheduler has gone.
pub const POLL: Duration = Duration::from_millis(500);

/// A process holding a struct_ops BPF link (a sched_ext scheduler's owner).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// Its PID.
    pub pid: u32,
    /// Its command name.
    pub comm: String,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (pid {})", self.comm, self.pid)
    }
}

/// The kernel's scheduler when it is not EEVDF (state enabled, enabling or disabling).
pub fn attached(scx: &SchedExt) -> Result<Option<ScxSnapshot>> {
    let snap = scx.snapshot()?;
    Ok((snap.state != ScxState::Disabled).then_some(snap))
}

/// `ops (state)` for humans.
pub fn describe(snap: &ScxSnapshot) -> String {
    format!(
        "{} ({})",
        snap.ops.as_deref().unwrap_or("unknown ops"),
        snap.state
    )
}

/// The processes under `proc_root` (normally `/proc`) with a file descriptor on a struct_ops
/// BPF link (`/proc/PID/fdinfo/FD` says `link_type: struct_ops`), `except` left out.
pub fn struct_ops_holders(proc_root: &Path, except: u32) -> Vec<Holder> {
    let Ok(entries) = std::fs::read_dir(proc_root) else {
        return Vec::new();
    };
    let mut holders = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == except {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        let holds = fds.flatten().any(|fd| {
            let is_link =
                std::fs::read_link(fd.path()).is_ok_and(|t| t.as_os_str() == "anon_inode:bpf_link");
            is_link
                && std::fs::read_to_string(entry.path().join("fdinfo").join(fd.file_name()))
                    .is_ok_and(|info| {
                        info.lines().any(|l| {
                            l.strip_prefix("link_type:")
                                .is_some_and(|t| t.trim() == "struct_ops")
                        })
                    })
        });
        if holds {
            let comm = std::fs::read_to_string(entry.path().join("comm"))
                .map(|c| c.trim().to_string())
                .unwrap_or_else(|_| "?".into());
            holders.push(Holder { pid, comm });
        }
    }
    holders.sort_by_key(|h| h.pid);
    holders
}

/// What `--take-over` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TakeOver {
    /// SIGINT was sent to the scheduler's owner.
    Signalled(Holder),
    /// No process holds a struct_ops link (e.g. the link is pinned in bpffs): nothing sent.
    NoOwner,
    /// More than one process holds one: nothing sent rather than a guess.
    Ambiguous(Vec<Holder>),
    /// The signal failed.
    Failed(Holder, String),
}

impl std::fmt::Display for TakeOver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TakeOver::Signalled(h) => write!(f, "sent SIGINT to its owner {h}"),
            TakeOver::NoOwner => write!(
                f,
                "no process holds a struct_ops BPF link (a pinned link?): nothing to signal"
            ),
            TakeOver::Ambiguous(hs) => write!(
                f,
                "{} processes hold struct_ops BPF links ({}): not guessing which owns it",
                hs.len(),
                hs.iter()
                    .map(|h| h.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            TakeOver::Failed(h, e) => write!(f, "SIGINT to {h} failed: {e}"),
        }
    }
}

/// Asks the foreign scheduler's owner to detach: SIGINT (through `signal`) to the one process
/// under `proc_root` holding a struct_ops BPF link, if exactly one does.
pub fn take_over(
    proc_root: &Path,
    signal: impl Fn(u32) -> std::result::Result<(), String>,
) -> TakeOver {
    let mut holders = struct_ops_holders(proc_root, std::process::id());
    match holders.len() {
        0 => TakeOver::NoOwner,
        1 => {
            let holder = holders.remove(0);
            match signal(holder.pid) {
                Ok(()) => TakeOver::Signalled(holder),
                Err(e) => TakeOver::Failed(holder, e),
            }
        }
        _ => TakeOver::Ambiguous(holders),
    }
}

/// SIGINT to `pid`.
pub fn sigint(pid: u32) -> std::result::Result<(), String> {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .map_err(|e| e.to_string())
}

/// What became of the wait.
#[derive(Debug, Clone, PartialEq)]
pub enum Waited {
    /// Nothing was attached: no wait.
    NotNeeded,
    /// The foreign scheduler went after this long.
    Gone(Duration),
    /// `stop` was set while waiting.
    Stopped,
}

/// Waits until the kernel is on EEVDF: returns at once when it is; else logs what is
/// attached, calls `on_change` with it (and again whenever another ops name is attached), with `take_over`
/// asks its owner to leave, and polls every `poll` (calling `on_poll` each time: the watchdog)
/// until it has gone or `stop` is set.
pub fn wait_until_gone(
    scx: &SchedExt,
    poll: Duration,
    take_over: Option<&dyn Fn() -> TakeOver>,
    stop: &AtomicBool,
    mut on_change: impl FnMut(&ScxSnapshot, Option<&TakeOver>),
    mut on_poll: impl FnMut(),
) -> Result<Waited> {
    let Some(first) = attached(scx)? else {
        return Ok(Waited::NotNeeded);
    };
    let t0 = Instant::now();
    let taken = take_over.map(|f| f());
    match &taken {
        Some(t) => log::warn!(
            "another sched_ext scheduler is attached: {}; --take-over: {t}; the agent takes control once it has gone",
            describe(&first)
        ),
        None => log::warn!(
            "another sched_ext scheduler is attached: {} (not started by ASA); the agent waits for it to go and then takes control (`asa run --take-over` asks its owner to stop)",
            describe(&first)
        ),
    }
    on_change(&first, taken.as_ref());
    // Only a change of scheduler is news (not `enabled` → `disabling` on its way out).
    let mut shown = first.ops.clone();
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(Waited::Stopped);
        }
        on_poll();
        match attached(scx)? {
            None => {
                log::info!(
                    "the foreign scheduler has gone after {:.1} s: taking control",
                    t0.elapsed().as_secs_f64()
                );
                return Ok(Waited::Gone(t0.elapsed()));
            }
            Some(snap) if snap.ops != shown => {
                log::warn!("still waiting: now {} is attached", describe(&snap));
                shown = snap.ops.clone();
                on_change(&snap, None);
            }
            Some(_) => {}
        }
        std::thread::sleep(poll);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn fake_sysfs(state: &str, ops: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("root")).unwrap();
        std::fs::write(root.join("state"), format!("{state}\n")).unwrap();
        std::fs::write(root.join("enable_seq"), "3\n").unwrap();
        std::fs::write(root.join("nr_rejected"), "0\n").unwrap();
        std::fs::write(root.join("root/ops"), format!("{ops}\n")).unwrap();
        dir
    }

    /// A /proc with `pid` holding fds of the given (link target, fdinfo) kinds.
    fn fake_proc(proc: &Path, pid: u32, comm: &str, fds: &[(&str, &str)]) {
        let dir = proc.join(pid.to_string());
        std::fs::create_dir_all(dir.join("fd")).unwrap();
        std::fs::create_dir_all(dir.join("fdinfo")).unwrap();
        std::fs::write(dir.join("comm"), format!("{comm}\n")).unwrap();
        for (i, (target, info)) in fds.iter().enumerate() {
            std::os::unix::fs::symlink(target, dir.join("fd").join(i.to_string())).unwrap();
            std::fs::write(dir.join("fdinfo").join(i.to_string()), info).unwrap();
        }
    }

    const STRUCT_OPS: (&str, &str) = (
        "anon_inode:bpf_link",
        "pos:\t0\nflags:\t02000002\nlink_type:\tstruct_ops\nlink_id:\t7\n",
    );
    const TRACING: (&str, &str) = (
        "anon_inode:bpf_link",
        "pos:\t0\nlink_type:\ttracing\nlink_id:\t3\n",
    );

    #[test]
    fn the_owner_is_the_one_process_holding_a_struct_ops_link() {
        let proc = tempfile::tempdir().unwrap();
        fake_proc(
            proc.path(),
            100,
            "scx_bpfland",
            &[("/dev/null", ""), STRUCT_OPS],
        );
        fake_proc(proc.path(), 200, "perf_tool", &[TRACING]);
        fake_proc(proc.path(), 300, "bash", &[("pipe:[1]", "")]);
        std::fs::create_dir(proc.path().join("self")).unwrap();
        let holders = struct_ops_holders(proc.path(), 0);
        assert_eq!(
            holders,
            vec![Holder {
                pid: 100,
                comm: "scx_bpfland".into()
            }]
        );
        assert!(struct_ops_holders(proc.path(), 100).is_empty(), "except");
        let signalled = std::sync::Mutex::new(Vec::new());
        let t = take_over(proc.path(), |pid| {
            signalled.lock().unwrap().push(pid);
            Ok(())
        });
        assert_eq!(
            t.to_string(),
            "sent SIGINT to its owner scx_bpfland (pid 100)"
        );
        assert_eq!(*signalled.lock().unwrap(), vec![100]);
    }

    #[test]
    fn no_owner_or_several_owners_signal_nothing() {
        let never = |_: u32| -> std::result::Result<(), String> { panic!("signalled") };
        let proc = tempfile::tempdir().unwrap();
        fake_proc(proc.path(), 300, "bash", &[TRACING]);
        assert_eq!(take_over(proc.path(), never), TakeOver::NoOwner);
        fake_proc(proc.path(), 100, "scx_a", &[STRUCT_OPS]);
        fake_proc(proc.path(), 101, "scx_b", &[STRUCT_OPS]);
        let t = take_over(proc.path(), never);
        assert!(
            matches!(&t, TakeOver::Ambiguous(h) if h.len() == 2),
            "{t:?}"
        );
        assert!(t.to_string().contains("not guessing"), "{t}");
    }

    #[test]
    fn the_wait_ends_when_the_foreign_scheduler_goes_or_on_stop() {
        // Nothing attached: no wait, no callback.
        let idle = fake_sysfs("disabled", "");
        let stop = AtomicBool::new(false);
        let w = wait_until_gone(
            &SchedExt::at(idle.path()),
            Duration::from_millis(10),
            None,
            &stop,
            |_, _| panic!("nothing to report"),
            || {},
        )
        .unwrap();
        assert_eq!(w, Waited::NotNeeded);

        // Attached; another thread detaches it after 300 ms (swapping ops on the way).
        let busy = fake_sysfs("enabled", "bpfland_1.1.4");
        let root = busy.path().to_path_buf();
        let detach = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150));
            std::fs::write(root.join("root/ops"), "lavd_1.1.4\n").unwrap();
            std::thread::sleep(Duration::from_millis(150));
            std::fs::write(root.join("state"), "disabled\n").unwrap();
        });
        let mut seen = Vec::new();
        let mut polls = 0;
        let w = wait_until_gone(
            &SchedExt::at(busy.path()),
            Duration::from_millis(10),
            None,
            &stop,
            |snap, taken| {
                assert!(taken.is_none());
                seen.push(snap.ops.clone().unwrap());
            },
            || polls += 1,
        )
        .unwrap();
        detach.join().unwrap();
        assert!(
            matches!(w, Waited::Gone(d) if d >= Duration::from_millis(250)),
            "{w:?}"
        );
        assert_eq!(seen, ["bpfland_1.1.4", "lavd_1.1.4"]);
        assert!(
            polls >= 10,
            "{polls} polls: the watchdog is fed while waiting"
        );

        // Stopped while waiting (SIGTERM); --take-over reported with the first callback.
        std::fs::write(busy.path().join("state"), "enabled\n").unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let setter = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            setter.store(true, Ordering::Relaxed);
        });
        let take = || TakeOver::NoOwner;
        let mut reported = None;
        let w = wait_until_gone(
            &SchedExt::at(busy.path()),
            Duration::from_millis(10),
            Some(&take),
            &stop,
            |_, taken| reported = taken.cloned(),
            || {},
        )
        .unwrap();
        assert_eq!(w, Waited::Stopped);
        assert_eq!(reported, Some(TakeOver::NoOwner));
    }
}
