//! Persistent work disks: an ext4 image per (name, root filesystem) in the lab cache, attached
//! to the VM as a second NVMe disk and mounted at `/var/tmp/asa-work` (the scenario runner's
//! work directory in the lab scripts). The scenario loads prepare their inputs once (the
//! kernel tree of `kernel_build` takes 10–15 min under TCG) and skip that step when their
//! `creates` file is already there, so a second VM with the same disk starts its runs at once.
//!
//! One VM at a time per disk: the image is locked (`flock`) while a VM uses it, and a second
//! user gets an error naming the disk instead of corrupting it.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use log::info;

/// File system label the guest's `/init` looks for.
pub const LABEL: &str = "asa-work";
/// Size of a new disk (sparse: only what the guest writes takes host disk space).
pub const SIZE_MIB: u64 = 16 * 1024;

/// A work disk held for one VM run: unlocked when dropped.
#[derive(Debug)]
pub struct WorkDisk {
    /// The image file.
    pub path: PathBuf,
    _lock: File,
}

/// The image of work disk `name` for the root filesystem image `rootfs` under `cache`: one
/// disk per root filesystem, since what is prepared on it comes from that file system's
/// packages (e.g. the linux-source version).
pub fn path_for(cache: &Path, name: &str, rootfs: &Path) -> Result<PathBuf> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        bail!("work disk name {name:?}: use letters, digits, '-' and '_' only");
    }
    let stem = rootfs
        .file_stem()
        .and_then(|s| s.to_str())
        .with_context(|| format!("root filesystem image {} has no name", rootfs.display()))?;
    Ok(cache
        .join("lab/work")
        .join(format!("{name}-{stem}.{LABEL}.ext4")))
}

/// Opens (creating it empty when missing) and locks the work disk at `path`, waiting while
/// another VM's process holds it. Taken before the lab's VM lock (`vm::boot`), always in that
/// order, so two runs never hold one lock each and wait for the other.
pub fn acquire(path: &Path) -> Result<WorkDisk> {
    if !path.exists() {
        create(path)?;
    }
    let file = File::options()
        .read(true)
        .write(true)
        .open(path)
        .with_context(|| format!("opening work disk {}", path.display()))?;
    // SAFETY: flock on an open descriptor we own; no memory is passed.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(err).with_context(|| format!("locking work disk {}", path.display()));
        }
        // Its VM runs; the lab runs one VM at a time, so this one would wait for it anyway.
        info!(
            "work disk {} is in use by another lab VM: waiting for it (one VM per work disk)",
            path.display()
        );
        // SAFETY: as above; blocks until the other VM's process releases the disk.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("locking work disk {}", path.display()));
        }
    }
    Ok(WorkDisk {
        path: path.to_owned(),
        _lock: file,
    })
}

/// Makes an empty ext4 image (label [`LABEL`], [`SIZE_MIB`], sparse) at `path`.
fn create(path: &Path) -> Result<()> {
    let dir = path.parent().context("work disk path has no folder")?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let partial = path.with_extension("partial");
    let out = Command::new("mkfs.ext4")
        .args(["-q", "-F", "-L", LABEL, "-E", "root_owner=0:0"])
        .arg(&partial)
        .arg(format!("{SIZE_MIB}M"))
        .output()
        .context("running mkfs.ext4 (install e2fsprogs, or run lab/setup.sh)")?;
    if !out.status.success() {
        let _ = std::fs::remove_file(&partial);
        bail!(
            "mkfs.ext4 failed for work disk {}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    std::fs::rename(&partial, path)?;
    info!("new work disk {} ({SIZE_MIB} MiB, sparse)", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_disk_per_name_and_root_filesystem() {
        let cache = Path::new("/c");
        let a = path_for(cache, "scenarios", Path::new("/r/bookworm-aaaa.ext4")).unwrap();
        let b = path_for(cache, "scenarios", Path::new("/r/bookworm-bbbb.ext4")).unwrap();
        assert_eq!(
            a,
            Path::new("/c/lab/work/scenarios-bookworm-aaaa.asa-work.ext4")
        );
        assert_ne!(a, b);
        assert!(path_for(cache, "../x", Path::new("/r/a.ext4")).is_err());
        assert!(path_for(cache, "", Path::new("/r/a.ext4")).is_err());
    }

    #[test]
    fn a_new_disk_is_a_labelled_sparse_ext4_and_a_second_holder_waits_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w/disk.ext4");
        let held = acquire(&path).unwrap();
        let label = Command::new("e2label").arg(&path).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&label.stdout).trim(), LABEL);
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.len(), SIZE_MIB << 20);
        use std::os::unix::fs::MetadataExt;
        assert!(
            meta.blocks() * 512 < 256 << 20,
            "sparse: {} blocks",
            meta.blocks()
        );
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = {
            let path = path.clone();
            std::thread::spawn(move || {
                let second = acquire(&path);
                tx.send(()).unwrap();
                second
            })
        };
        assert!(
            rx.recv_timeout(std::time::Duration::from_millis(300))
                .is_err(),
            "a second holder waits while the first holds the disk"
        );
        drop(held);
        rx.recv_timeout(std::time::Duration::from_secs(10))
            .expect("the second holder gets the disk once the first is gone");
        waiter.join().unwrap().unwrap();
    }
}
