//! A Debian root filesystem for guests that need real tools (the scenario loads, sysbench,
//! fio, ffmpeg, ...): `debootstrap --variant=minbase` of the host's own suite with the named
//! packages, packed with `mkfs.ext4 -d` (no loop mount, no root filesystem of the host touched)
//! and cached by its package list. The guest gets it as an NVMe disk (the sid kernel has NVMe
//! and ext4 built in) opened with `snapshot=on`, so the cached image never changes; `/init`
//! mounts it and runs the script chrooted into it, with `/usr/local/bin` (the agent, the experts)
//! and `/lab` bound from the initramfs.

use std::collections::BTreeSet;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use log::info;

/// What goes into a root filesystem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootfsSpec {
    /// Debian suite; the host's own by default, so host binaries copied in find the same
    /// glibc.
    pub suite: String,
    /// Packages added to the minimal base.
    pub packages: BTreeSet<String>,
}

impl RootfsSpec {
    /// The host's suite with `packages`.
    pub fn with_packages<I: IntoIterator<Item = S>, S: Into<String>>(packages: I) -> Self {
        Self {
            suite: host_suite().unwrap_or_else(|| "bookworm".to_owned()),
            packages: packages.into_iter().map(Into::into).collect(),
        }
    }

    /// A stable name for the cache: suite plus a hash of the package list.
    pub fn cache_key(&self) -> String {
        let mut text = self.suite.clone();
        for p in &self.packages {
            text.push(' ');
            text.push_str(p);
        }
        format!("{}-{:016x}", self.suite, fnv1a(text.as_bytes()))
    }
}

/// FNV-1a, 64 bit: a hash that never changes between Rust versions.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The host's Debian codename (`VERSION_CODENAME` in /etc/os-release).
pub fn host_suite() -> Option<String> {
    let text = std::fs::read_to_string("/etc/os-release").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("VERSION_CODENAME="))
        .map(|v| v.trim_matches('"').to_owned())
        .filter(|v| !v.is_empty())
}

/// The cached image for `spec`, built first when missing. Builds are serialized with a lock
/// file, so parallel test binaries build it once.
pub fn ensure(cache: &Path, spec: &RootfsSpec) -> Result<PathBuf> {
    let dir = cache.join("rootfs");
    std::fs::create_dir_all(&dir)?;
    let image = dir.join(format!("{}.ext4", spec.cache_key()));
    let lock = std::fs::File::create(dir.join(".lock"))?;
    // SAFETY: flock on a file descriptor we own; released when `lock` is dropped.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
        bail!(
            "locking {}: {}",
            dir.display(),
            std::io::Error::last_os_error()
        );
    }
    if image.is_file() {
        return Ok(image);
    }
    build(spec, &image)?;
    Ok(image)
}

fn build(spec: &RootfsSpec, image: &Path) -> Result<()> {
    for (tool, package) in [("debootstrap", "debootstrap"), ("mkfs.ext4", "e2fsprogs")] {
        if crate::vm::which(tool).is_none() && !Path::new("/usr/sbin").join(tool).is_file() {
            bail!("{tool} not found: install it with `apt-get install {package}` (or run lab/setup.sh)");
        }
    }
    if !nix_is_root() {
        bail!("building the guest root filesystem needs root (debootstrap): run as root");
    }
    let mirror = crate::kernel::debian_mirror()?;
    let tree = image.with_extension("tree");
    let _ = std::fs::remove_dir_all(&tree);
    std::fs::create_dir_all(&tree)?;
    let include = spec.packages.iter().cloned().collect::<Vec<_>>().join(",");
    info!(
        "building the guest root filesystem ({} + {} packages; a few minutes, cached afterwards)",
        spec.suite,
        spec.packages.len()
    );
    let mut cmd = Command::new("debootstrap");
    cmd.args(["--variant=minbase", "--merged-usr"]);
    if !include.is_empty() {
        cmd.arg(format!("--include={include}"));
    }
    cmd.arg(&spec.suite).arg(&tree).arg(&mirror);
    let out = cmd.output().context("running debootstrap")?;
    if !out.status.success() {
        let log =
            std::fs::read_to_string(tree.join("debootstrap/debootstrap.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(15).collect();
        bail!(
            "debootstrap {} failed: {}\n{}",
            spec.suite,
            String::from_utf8_lossy(&out.stderr).trim(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    // Package caches are dead weight in the image.
    let archives = tree.join("var/cache/apt/archives");
    if let Ok(entries) = std::fs::read_dir(&archives) {
        for e in entries.flatten() {
            if e.path().extension().and_then(|x| x.to_str()) == Some("deb") {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    let _ = std::fs::remove_dir_all(tree.join("var/lib/apt/lists"));
    for d in ["lab", "usr/local/bin", "rootfs-marker"] {
        std::fs::create_dir_all(tree.join(d))?;
    }
    let used = du_bytes(&tree)?;
    // Room for the scenarios' own files on top: corpora, fio files, and the unpacked kernel
    // tree of kernel_build (about 1.5 GiB). The image file is sparse, so unused room costs
    // no disk.
    let size_mib = used / (1 << 20) * 13 / 10 + 6144;
    let partial = image.with_extension("partial");
    let out = Command::new("mkfs.ext4")
        .args(["-q", "-F", "-L", "asa-rootfs", "-E", "root_owner=0:0", "-d"])
        .arg(&tree)
        .arg(&partial)
        .arg(format!("{size_mib}M"))
        .output()
        .context("running mkfs.ext4")?;
    if !out.status.success() {
        bail!(
            "mkfs.ext4 failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    std::fs::rename(&partial, image)?;
    std::fs::remove_dir_all(&tree)?;
    info!(
        "guest root filesystem cached as {} ({size_mib} MiB)",
        image.display()
    );
    Ok(())
}

fn nix_is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn du_bytes(dir: &Path) -> Result<u64> {
    let out = Command::new("du")
        .args(["-sb", "--apparent-size"])
        .arg(dir)
        .output()
        .context("running du")?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .with_context(|| format!("du gave {text:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_key_depends_on_suite_and_package_set_only() {
        let a = RootfsSpec {
            suite: "bookworm".into(),
            packages: ["fio", "xz-utils"].into_iter().map(String::from).collect(),
        };
        let b = RootfsSpec {
            suite: "bookworm".into(),
            packages: ["xz-utils", "fio", "fio"]
                .into_iter()
                .map(String::from)
                .collect(),
        };
        assert_eq!(a.cache_key(), b.cache_key());
        let c = RootfsSpec {
            suite: "trixie".into(),
            ..a.clone()
        };
        assert_ne!(a.cache_key(), c.cache_key());
        assert!(a.cache_key().starts_with("bookworm-"));
        // FNV-1a reference value (empty input is the offset basis).
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
