//! One ASA process drives sched_ext at a time.
//!
//! Two supervisors on one machine would each believe their own expert runs while stopping and
//! starting the other's: the kernel's state would be known to neither. [`ControlLock`] is an
//! exclusive `flock(2)` on [`CONTROL_LOCK`], taken when a supervisor is created and held for its
//! life; the kernel drops it when the process ends, however it ends (even SIGKILL), so a stale
//! lock never blocks the next run. The file holds the owner's pid for the error message.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// The lock every supervisor takes.
pub const CONTROL_LOCK: &str = "/run/asa/supervisor.lock";

/// The held lock; released when dropped or when the process ends.
#[derive(Debug)]
pub struct ControlLock {
    _file: File,
    path: PathBuf,
}

impl ControlLock {
    /// Takes the lock at `path` without waiting; when another process holds it, the error
    /// names that process.
    pub fn acquire(path: &Path) -> Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .open(path)
            .with_context(|| format!("opening the control lock {}", path.display()))?;
        // SAFETY: flock on a file descriptor we own.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(err).with_context(|| format!("locking {}", path.display()));
            }
            let mut owner = String::new();
            let _ = file.read_to_string(&mut owner);
            let pid = owner.trim();
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|b| {
                    String::from_utf8_lossy(&b)
                        .replace('\0', " ")
                        .trim()
                        .to_owned()
                })
                .unwrap_or_default();
            bail!(
                "another ASA process controls the scheduler (pid {pid}{}): stop it first, or \
                 when it is `asa run`, switch through it with `asa pin` / `asa unpin`",
                if cmdline.is_empty() {
                    String::new()
                } else {
                    format!(": {cmdline}")
                }
            );
        }
        file.set_len(0)?;
        file.rewind()?;
        writeln!(file, "{}", std::process::id())?;
        Ok(Self {
            _file: file,
            path: path.to_owned(),
        })
    }

    /// Where the lock lives.
    pub fn path(&self) -> &Path {
        &self.path
    }
}
