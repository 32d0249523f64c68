//! The folders runs work in (`$ASA_CACHE/lab/runs/<name>-<pid>`): each holds the run's
//! initramfs while the VM boots and the guest's `/lab/out` afterwards. The initramfs (up to
//! 300 MB with the experts and ONNX Runtime in it) goes as soon as the VM is gone; the folders
//! of finished processes are pruned to the newest [`KEEP_FINISHED`], so a machine that runs
//! `make test` every day does not fill its disk (473 folders took 59 GB here before this).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{Context, Result};
use log::{debug, warn};

/// How many run folders of processes that have exited are kept for inspection.
pub const KEEP_FINISHED: usize = 40;

/// The process id a run folder is named after (`<name>-<pid>`), if it is named so.
fn owner_pid(dir: &Path) -> Option<i32> {
    let name = dir.file_name()?.to_str()?;
    let (_, pid) = name.rsplit_once('-')?;
    pid.parse().ok().filter(|&p| p > 0)
}

/// Whether process `pid` exists (a folder of a live process may be in use by a run).
fn process_alive(pid: i32) -> bool {
    // SAFETY: signal 0 checks only for existence and permission; nothing is sent.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Remove all but the newest `keep` run folders under `runs` whose process has exited.
/// Folders of live processes (this one included: its other runs may be in use) are never
/// touched. Returns how many folders were removed; one that cannot be removed is logged and
/// left.
pub fn prune(runs: &Path, keep: usize) -> Result<usize> {
    let entries = match std::fs::read_dir(runs) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e).with_context(|| format!("listing {}", runs.display())),
    };
    let mut finished: Vec<(SystemTime, PathBuf)> = Vec::new();
    for entry in entries {
        let entry = entry.with_context(|| format!("listing {}", runs.display()))?;
        let path = entry.path();
        let Some(pid) = owner_pid(&path) else {
            continue;
        };
        if !entry.file_type().map(|t| t.is_dir()).unwrap_or(false) || process_alive(pid) {
            continue;
        }
        let modified = entry
            .metadata()
            .and_then(|m| m.modified())
            .unwrap_or(SystemTime::UNIX_EPOCH);
        finished.push((modified, path));
    }
    finished.sort_by_key(|f| std::cmp::Reverse(f.0));
    let mut removed = 0;
    for (_, path) in finished.into_iter().skip(keep) {
        match std::fs::remove_dir_all(&path) {
            Ok(()) => removed += 1,
            Err(e) => warn!("cannot remove the old run folder {}: {e}", path.display()),
        }
    }
    if removed > 0 {
        debug!("removed {removed} old run folders in {}", runs.display());
    }
    Ok(removed)
}

/// Remove what a finished run no longer needs from its folder: the initramfs it booted
/// (rebuilt by every run) and, when `unpacked` (the run returned an outcome), the guest's
/// archive, which is then in `out/`. A run that failed (timeout, a guest that died) keeps its
/// archive: it is the only copy of what the guest wrote.
pub fn drop_boot_files(work: &Path, unpacked: bool) {
    let names: &[&str] = if unpacked {
        &["initramfs.cpio", "out.tar"]
    } else {
        &["initramfs.cpio"]
    };
    for name in names {
        let path = work.join(name);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => warn!("cannot remove {}: {e}", path.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A pid that is not running: the highest pid the kernel allows is never handed out
    /// while lower ones are free, and pid_max + 1 never exists.
    fn dead_pid() -> i32 {
        let max: i32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(!process_alive(max + 1));
        max + 1
    }

    fn make_run(runs: &Path, name: &str, age_s: u64) -> PathBuf {
        let dir = runs.join(name);
        std::fs::create_dir_all(dir.join("out")).unwrap();
        std::fs::write(dir.join("out/result.txt"), "x").unwrap();
        let when = SystemTime::now() - Duration::from_secs(age_s);
        std::fs::File::open(&dir)
            .unwrap()
            .set_modified(when)
            .unwrap();
        dir
    }

    #[test]
    fn keeps_the_newest_finished_runs_and_every_live_one() {
        let tmp = tempfile::tempdir().unwrap();
        let runs = tmp.path();
        let dead = dead_pid();
        let live = std::process::id() as i32;
        let old_live = make_run(runs, &format!("old-live-{live}"), 10_000);
        let finished: Vec<PathBuf> = (0..5)
            .map(|i| make_run(runs, &format!("run{i}-{dead}"), 100 * (i + 1)))
            .collect();
        let unnamed = make_run(runs, "not-a-run", 100_000);
        std::fs::write(runs.join(format!("file-{dead}")), "a file, not a run").unwrap();

        assert_eq!(prune(runs, 2).unwrap(), 3);
        // The two newest finished runs (smallest age) stay, the three older ones go.
        assert!(finished[0].is_dir() && finished[1].is_dir());
        assert!(finished[2..].iter().all(|d| !d.exists()));
        // A live process's folder stays however old; so do folders and files not named
        // <name>-<pid>.
        assert!(old_live.is_dir());
        assert!(unnamed.is_dir());
        assert!(runs.join(format!("file-{dead}")).is_file());
        // Nothing more to remove.
        assert_eq!(prune(runs, 2).unwrap(), 0);
    }

    #[test]
    fn a_missing_runs_folder_is_nothing_to_prune() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(prune(&tmp.path().join("none"), 1).unwrap(), 0);
    }

    #[test]
    fn boot_files_go_but_the_guest_archive_only_when_unpacked() {
        let tmp = tempfile::tempdir().unwrap();
        let unpacked = tmp.path().join("a");
        let failed = tmp.path().join("b");
        for (dir, ok) in [(&unpacked, true), (&failed, false)] {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::write(dir.join("initramfs.cpio"), "image").unwrap();
            std::fs::write(dir.join("out.tar"), "archive").unwrap();
            drop_boot_files(dir, ok);
            assert!(!dir.join("initramfs.cpio").exists());
        }
        assert!(!unpacked.join("out.tar").exists());
        assert!(
            failed.join("out.tar").is_file(),
            "the only copy of a failed guest's files"
        );
        // Running it again on a cleaned folder is fine.
        drop_boot_files(&unpacked, true);
    }
}
