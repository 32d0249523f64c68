//! A Linux kernel with sched_ext, taken from Debian's packages and cached.
//!
//! The host's apt state is never touched: a private apt configuration (its own source list,
//! package lists and cache under the project cache) resolves the current
//! `linux-image-cloud-amd64` of Debian sid (then trixie-backports), downloads the packages that
//! hold `vmlinuz` and the kernel `config`, and unpacks them with `dpkg-deb -x`. The config must
//! say `CONFIG_SCHED_CLASS_EXT=y`. The guest modules the lab loads ([`GUEST_MODULES`]: the
//! virtio block driver, a module in the cloud kernel) come from `linux-modules-<release>` and
//! are cached decompressed next to the image. The mirror is the one the host's apt already uses
//! (override: `ASA_DEBIAN_MIRROR`).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use log::info;

/// Suites tried in order for a kernel with sched_ext.
pub const SUITES: &[&str] = &["sid", "trixie-backports"];
/// The meta package that names the current cloud kernel (virtio drivers built in).
pub const META_PACKAGE: &str = "linux-image-cloud-amd64";

/// A module of the kernel's package that the guest loads at boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuestModule {
    /// Path under `/usr/lib/modules/<release>/`, without the compression suffix.
    pub path: &'static str,
    /// Parameters `insmod` passes (space-separated `name=value`; may be empty).
    pub args: &'static str,
}

impl GuestModule {
    /// The module's file name in the cache and in the guest (`virtio_blk.ko`).
    pub fn file_name(&self) -> &'static str {
        module_file_name(self.path)
    }
}

/// Modules of the kernel's package the guest loads at boot, in this order (a module after the
/// ones it depends on: busybox's `insmod` resolves no dependencies).
/// - `virtio_blk`: the lab's disks are virtio-blk (qemu's emulated NVMe loses completions under
///   TCG with several I/Os in flight; see [`crate::vm::DiskBus`]).
/// - `configfs` and `null_blk` (which needs configfs): a guest may create a RAM-backed block
///   device whose I/Os complete after a fixed delay on a guest timer, through
///   `/sys/kernel/config/nullb/` — an I/O load whose device time is the same under every
///   scheduler and does not pass through the host's disk. `nr_devices=0`: none at boot.
pub const GUEST_MODULES: &[GuestModule] = &[
    GuestModule {
        path: "kernel/drivers/block/virtio_blk.ko",
        args: "",
    },
    GuestModule {
        path: "kernel/fs/configfs/configfs.ko",
        args: "",
    },
    GuestModule {
        path: "kernel/drivers/block/null_blk/null_blk.ko",
        args: "nr_devices=0",
    },
];

/// Environment variable naming a cached kernel release to boot instead of the latest fetched
/// (e.g. to continue a calibration on the kernel its table was measured on).
pub const KERNEL_ENV: &str = "ASA_LAB_KERNEL";

/// A kernel ready to boot.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// `uname -r` of the kernel.
    pub release: String,
    /// The bootable image.
    pub vmlinuz: PathBuf,
    /// The kernel's config (copied to `/boot/config-<release>` in the guest for libbpf).
    pub config: PathBuf,
    /// The cached, decompressed [`GUEST_MODULES`] (`<name>.ko`) that exist: empty for a
    /// kernel cached before the lab used them (the NVMe disk bus still boots it).
    pub modules: Vec<PathBuf>,
}

impl Kernel {
    /// The cached kernel, downloading it first when the cache is empty.
    pub fn ensure(cache: &Path) -> Result<Self> {
        match Self::cached(cache)? {
            Some(k) => Ok(k),
            None => Self::fetch(cache),
        }
    }

    /// The kernel in the cache, if there is a complete one: the release named by
    /// [`KERNEL_ENV`] when it is set (an error when that one is not cached), else the latest
    /// fetched.
    pub fn cached(cache: &Path) -> Result<Option<Self>> {
        Self::cached_release(cache, std::env::var(KERNEL_ENV).ok().as_deref())
    }

    /// [`Kernel::cached`] with the override passed in.
    fn cached_release(cache: &Path, wanted: Option<&str>) -> Result<Option<Self>> {
        let dir = cache.join("kernel");
        if let Some(release) = wanted.filter(|r| !r.trim().is_empty()) {
            let kernel = Self::in_dir(&dir, release.trim());
            if !kernel.vmlinuz.is_file() || !kernel.config.is_file() {
                let cached: Vec<String> = std::fs::read_dir(&dir)
                    .map(|entries| {
                        entries
                            .filter_map(|e| e.ok())
                            .filter(|e| e.path().join("vmlinuz").is_file())
                            .map(|e| e.file_name().to_string_lossy().into_owned())
                            .collect()
                    })
                    .unwrap_or_default();
                bail!(
                    "{KERNEL_ENV}={} names no cached kernel in {} (cached: {}); unset it to use \
                     the latest (`asa-lab kernel` fetches it)",
                    kernel.release,
                    dir.display(),
                    if cached.is_empty() {
                        "none".to_string()
                    } else {
                        cached.join(", ")
                    }
                );
            }
            check_config(&kernel.config)?;
            return Ok(Some(kernel));
        }
        let Ok(release) = std::fs::read_to_string(dir.join("current")) else {
            return Ok(None);
        };
        let kernel = Self::in_dir(&dir, release.trim());
        // Complete only with every guest module: a kernel cached before the lab loaded modules
        // is fetched again (the newest release, as on a fresh machine).
        if kernel.vmlinuz.is_file()
            && kernel.config.is_file()
            && kernel.modules.len() == GUEST_MODULES.len()
        {
            check_config(&kernel.config)?;
            Ok(Some(kernel))
        } else {
            Ok(None)
        }
    }

    /// The kernel `release` as cached under `dir` (`<dir>/<release>/`), whatever of it exists.
    fn in_dir(dir: &Path, release: &str) -> Self {
        let base = dir.join(release);
        Self {
            vmlinuz: base.join("vmlinuz"),
            config: base.join("config"),
            modules: GUEST_MODULES
                .iter()
                .map(|m| base.join("modules").join(m.file_name()))
                .filter(|p| p.is_file())
                .collect(),
            release: release.to_owned(),
        }
    }

    /// The cached guest module named `name` (e.g. `virtio_blk`), if this kernel has it.
    pub fn module(&self, name: &str) -> Option<&Path> {
        self.modules
            .iter()
            .find(|p| p.file_stem().and_then(|s| s.to_str()) == Some(name))
            .map(PathBuf::as_path)
    }

    /// The guest's module load list: one line per cached module in [`GUEST_MODULES`]' order,
    /// its file name and its `insmod` parameters (`null_blk.ko nr_devices=0`).
    pub fn module_load_list(&self) -> String {
        GUEST_MODULES
            .iter()
            .filter(|m| self.module(m.file_name().trim_end_matches(".ko")).is_some())
            .map(|m| format!("{} {}\n", m.file_name(), m.args))
            .collect()
    }

    /// Resolve, download and unpack the current sched_ext kernel into the cache.
    pub fn fetch(cache: &Path) -> Result<Self> {
        let mirror = debian_mirror()?;
        let mut failures = Vec::new();
        for suite in SUITES {
            match fetch_from(cache, &mirror, suite) {
                Ok(k) => return Ok(k),
                Err(e) => {
                    info!("no usable kernel in {suite}: {e:#}");
                    failures.push(format!("{suite}: {e:#}"));
                }
            }
        }
        bail!(
            "kernel download failed: no Debian suite gave a kernel with CONFIG_SCHED_CLASS_EXT=y.\n  {}\n\
             Check the network to Debian's packages, or set ASA_DEBIAN_MIRROR to a Debian mirror URL",
            failures.join("\n  ")
        )
    }
}

/// Fail unless `config` enables sched_ext.
pub fn check_config(config: &Path) -> Result<()> {
    let text = std::fs::read_to_string(config)
        .with_context(|| format!("reading kernel config {}", config.display()))?;
    if !text.lines().any(|l| l.trim() == "CONFIG_SCHED_CLASS_EXT=y") {
        bail!(
            "kernel config {} does not set CONFIG_SCHED_CLASS_EXT=y",
            config.display()
        );
    }
    Ok(())
}

/// The Debian mirror: `ASA_DEBIAN_MIRROR`, else the first non-security URI in the host's apt
/// sources.
pub fn debian_mirror() -> Result<String> {
    if let Ok(m) = std::env::var("ASA_DEBIAN_MIRROR") {
        if !m.is_empty() {
            return Ok(m);
        }
    }
    let mut texts = Vec::new();
    for file in ["/etc/apt/sources.list"] {
        if let Ok(t) = std::fs::read_to_string(file) {
            texts.push(t);
        }
    }
    if let Ok(dir) = std::fs::read_dir("/etc/apt/sources.list.d") {
        let mut paths: Vec<_> = dir.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for p in paths {
            let ext = p.extension().and_then(|e| e.to_str());
            if matches!(ext, Some("list") | Some("sources")) {
                if let Ok(t) = std::fs::read_to_string(&p) {
                    texts.push(t);
                }
            }
        }
    }
    texts
        .iter()
        .find_map(|t| mirror_in(t))
        .context("no Debian mirror found in the host's apt sources; set ASA_DEBIAN_MIRROR")
}

/// The first Debian archive URI (not the security archive) in an apt sources text, in either
/// the one-line or the deb822 format.
fn mirror_in(text: &str) -> Option<String> {
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        let uris: Vec<&str> = if let Some(rest) = line.strip_prefix("URIs:") {
            rest.split_whitespace().collect()
        } else if let Some(rest) = line.strip_prefix("deb ") {
            rest.split_whitespace()
                .filter(|w| w.contains("://"))
                .take(1)
                .collect()
        } else {
            continue;
        };
        if let Some(uri) = uris
            .into_iter()
            .find(|u| u.trim_end_matches('/').ends_with("/debian"))
        {
            return Some(uri.trim_end_matches('/').to_owned());
        }
    }
    None
}

struct PrivateApt {
    dir: PathBuf,
}

impl PrivateApt {
    fn new(dir: PathBuf, mirror: &str, suite: &str) -> Result<Self> {
        std::fs::create_dir_all(dir.join("lists/partial"))?;
        std::fs::create_dir_all(dir.join("cache/archives/partial"))?;
        std::fs::write(
            dir.join("sources.list"),
            format!("deb [trusted=yes] {mirror} {suite} main\n"),
        )?;
        Ok(Self { dir })
    }

    fn command(&self, tool: &str) -> Command {
        let mut c = Command::new(tool);
        let d = self.dir.display();
        c.args([
            "-q",
            "-o",
            &format!("Dir::Etc::SourceList={d}/sources.list"),
            "-o",
            "Dir::Etc::SourceParts=/dev/null",
            "-o",
            &format!("Dir::State::Lists={d}/lists"),
            "-o",
            &format!("Dir::Cache={d}/cache"),
            "-o",
            "APT::Architecture=amd64",
            "-o",
            "APT::Sandbox::User=root",
            "-o",
            "Debug::NoLocking=1",
        ])
        .current_dir(&self.dir);
        c
    }

    fn run(&self, tool: &str, args: &[&str]) -> Result<String> {
        let out = self
            .command(tool)
            .args(args)
            .output()
            .with_context(|| format!("running {tool} (is apt installed?)"))?;
        if !out.status.success() {
            bail!(
                "{tool} {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

fn fetch_from(cache: &Path, mirror: &str, suite: &str) -> Result<Kernel> {
    let work = cache.join("kernel").join(format!("apt-{suite}"));
    let apt = PrivateApt::new(work.clone(), mirror, suite)?;
    info!("resolving {META_PACKAGE} in Debian {suite}");
    apt.run("apt-get", &["update"])?;
    let show = apt.run("apt-cache", &["show", META_PACKAGE])?;
    let release = release_from_depends(&show)
        .with_context(|| format!("{META_PACKAGE} in {suite} names no linux-image-<release>"))?;
    info!("current kernel in {suite}: {release}");
    // Newer kernels split the image: vmlinuz in linux-binary-*, config in linux-base-*,
    // modules in linux-modules-*; older ones keep all of it in linux-image-*.
    let candidates = [
        format!("linux-binary-{release}"),
        format!("linux-base-{release}"),
        format!("linux-modules-{release}"),
        format!("linux-image-{release}"),
    ];
    let unpack = work.join("unpacked");
    let _ = std::fs::remove_dir_all(&unpack);
    std::fs::create_dir_all(&unpack)?;
    for pkg in &candidates {
        if apt.run("apt-get", &["download", pkg]).is_err() {
            continue;
        }
    }
    let mut debs = Vec::new();
    for entry in std::fs::read_dir(&work)? {
        let p = entry?.path();
        if p.extension().and_then(|e| e.to_str()) == Some("deb")
            && p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.contains(&release))
        {
            debs.push(p);
        }
    }
    if debs.is_empty() {
        bail!("none of {candidates:?} could be downloaded");
    }
    for deb in &debs {
        let status = Command::new("dpkg-deb")
            .arg("-x")
            .arg(deb)
            .arg(&unpack)
            .status()
            .context("running dpkg-deb")?;
        if !status.success() {
            bail!("dpkg-deb -x {} failed", deb.display());
        }
    }
    let find = |names: &[PathBuf]| names.iter().map(|n| unpack.join(n)).find(|p| p.is_file());
    let vmlinuz = find(&[
        PathBuf::from(format!("usr/lib/modules/{release}/vmlinuz")),
        PathBuf::from(format!("boot/vmlinuz-{release}")),
    ])
    .context("the packages hold no vmlinuz")?;
    let config = find(&[
        PathBuf::from(format!("usr/lib/modules/{release}/config")),
        PathBuf::from(format!("boot/config-{release}")),
    ])
    .context("the packages hold no kernel config")?;
    check_config(&config)?;
    let dest = cache.join("kernel").join(&release);
    std::fs::create_dir_all(dest.join("modules"))?;
    let tree = unpack.join(format!("usr/lib/modules/{release}"));
    for module in GUEST_MODULES {
        let target = dest.join("modules").join(module.file_name());
        unpack_module(&tree, module.path, &target)
            .with_context(|| format!("guest module {} of {release}", module.path))?;
    }
    std::fs::copy(&vmlinuz, dest.join("vmlinuz"))?;
    std::fs::copy(&config, dest.join("config"))?;
    std::fs::write(cache.join("kernel").join("current"), &release)?;
    for deb in debs {
        let _ = std::fs::remove_file(deb);
    }
    let _ = std::fs::remove_dir_all(&unpack);
    info!("kernel {release} cached in {}", dest.display());
    Ok(Kernel::in_dir(&cache.join("kernel"), &release))
}

/// `virtio_blk.ko` for `kernel/drivers/block/virtio_blk.ko`.
fn module_file_name(module: &str) -> &str {
    module.rsplit('/').next().unwrap_or(module)
}

/// Copy `module` (a path under the unpacked `/usr/lib/modules/<release>/` tree, without a
/// compression suffix) to `target`, decompressed: Debian compresses modules (xz; zstd and gzip
/// are handled too), and busybox's `insmod` in the guest loads only plain ELF files.
fn unpack_module(tree: &Path, module: &str, target: &Path) -> Result<()> {
    let plain = tree.join(module);
    if plain.is_file() {
        std::fs::copy(&plain, target)?;
        return Ok(());
    }
    for (suffix, tool) in [("xz", "xz"), ("zst", "zstd"), ("gz", "gzip")] {
        let packed = tree.join(format!("{module}.{suffix}"));
        if !packed.is_file() {
            continue;
        }
        let out = Command::new(tool)
            .arg("-dc")
            .arg(&packed)
            .output()
            .with_context(|| format!("running {tool} (apt-get install xz-utils zstd gzip)"))?;
        if !out.status.success() {
            bail!(
                "{tool} -dc {} failed: {}",
                packed.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        if !out.stdout.starts_with(b"\x7fELF") {
            bail!("{} did not decompress to an ELF file", packed.display());
        }
        std::fs::write(target, &out.stdout)?;
        return Ok(());
    }
    bail!(
        "the kernel packages hold no {} (plain, .xz, .zst or .gz)",
        plain.display()
    )
}

/// The release named by `Depends: linux-image-<release>` in `apt-cache show` output (the
/// newest version's stanza comes first).
fn release_from_depends(show: &str) -> Option<String> {
    let depends = show.lines().find_map(|l| l.strip_prefix("Depends:"))?;
    depends.split(',').find_map(|dep| {
        let name = dep.split_whitespace().next()?;
        name.strip_prefix("linux-image-").map(str::to_owned)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_release_in_the_meta_package() {
        let show = "Package: linux-image-cloud-amd64\nVersion: 7.2.13-1\n\
                    Depends: linux-base-cloud-amd64 (= 7.2.13-1), linux-image-7.2.13+deb14-cloud-amd64 (= 7.2.13-1)\n";
        assert_eq!(
            release_from_depends(show).as_deref(),
            Some("7.2.13+deb14-cloud-amd64")
        );
        assert_eq!(release_from_depends("Package: x\n"), None);
    }

    #[test]
    fn finds_the_mirror_in_both_source_formats() {
        let deb822 = "Types: deb\n# URIs: http://old.example/debian\nURIs: http://mirror.example/debian-security\n\n\
                      Types: deb\nURIs: http://mirror.example/debian/\nSuites: bookworm\n";
        // The security archive is skipped; the trailing slash is dropped.
        assert_eq!(
            mirror_in(deb822).as_deref(),
            Some("http://mirror.example/debian")
        );
        let one_line = "deb [arch=amd64] http://m.example/debian bookworm main\n";
        assert_eq!(
            mirror_in(one_line).as_deref(),
            Some("http://m.example/debian")
        );
        assert_eq!(mirror_in("# nothing\n"), None);
    }

    #[test]
    fn modules_are_unpacked_plain_or_decompressed() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("tree");
        std::fs::create_dir_all(tree.join("kernel/drivers/block")).unwrap();
        let elf = b"\x7fELF\x02\x01 a module";
        let packed = tree.join("kernel/drivers/block/virtio_blk.ko");
        std::fs::write(&packed, elf).unwrap();
        let status = Command::new("xz").arg(&packed).status().unwrap();
        assert!(status.success());
        assert!(!packed.is_file(), "xz replaced it with .ko.xz");
        let target = dir.path().join("virtio_blk.ko");
        unpack_module(&tree, GUEST_MODULES[0].path, &target).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), elf);
        assert_eq!(GUEST_MODULES[0].file_name(), "virtio_blk.ko");
        // Missing, or not an ELF file after decompression: an error naming it.
        let err = unpack_module(&tree, "kernel/drivers/block/nbd.ko", &target).unwrap_err();
        assert!(err.to_string().contains("nbd.ko"), "{err}");
        let junk = tree.join("kernel/drivers/block/junk.ko");
        std::fs::write(&junk, "not elf").unwrap();
        Command::new("xz").arg(&junk).status().unwrap();
        let err = unpack_module(&tree, "kernel/drivers/block/junk.ko", &target).unwrap_err();
        assert!(err.to_string().contains("ELF"), "{err}");
    }

    #[test]
    fn config_without_sched_ext_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("config");
        std::fs::write(&cfg, "CONFIG_BPF=y\n# CONFIG_SCHED_CLASS_EXT is not set\n").unwrap();
        let err = check_config(&cfg).unwrap_err().to_string();
        assert!(err.contains("CONFIG_SCHED_CLASS_EXT=y"), "{err}");
        std::fs::write(&cfg, "CONFIG_SCHED_CLASS_EXT=y\n").unwrap();
        check_config(&cfg).unwrap();
    }

    /// Two cached releases, `current` naming the newer: no override boots `current`, an
    /// override boots the one it names, an unknown one is an error that lists what is cached.
    #[test]
    fn an_override_picks_a_cached_release() {
        let cache = tempfile::tempdir().unwrap();
        let kernels = cache.path().join("kernel");
        for release in ["7.2.13+deb14-cloud-amd64", "7.3.4+deb13-cloud-amd64"] {
            std::fs::create_dir_all(kernels.join(release)).unwrap();
            std::fs::write(kernels.join(release).join("vmlinuz"), "").unwrap();
            std::fs::write(
                kernels.join(release).join("config"),
                "CONFIG_SCHED_CLASS_EXT=y\n",
            )
            .unwrap();
        }
        std::fs::write(kernels.join("current"), "7.3.4+deb13-cloud-amd64\n").unwrap();
        // Without its guest modules the current kernel is not complete (it is fetched again).
        assert!(Kernel::cached_release(cache.path(), None)
            .unwrap()
            .is_none());
        let modules = kernels.join("7.3.4+deb13-cloud-amd64/modules");
        std::fs::create_dir_all(&modules).unwrap();
        std::fs::write(modules.join("virtio_blk.ko"), "\x7fELF").unwrap();
        // Not complete with one of its modules either (a kernel cached before null_blk).
        assert!(Kernel::cached_release(cache.path(), None)
            .unwrap()
            .is_none());
        for module in &GUEST_MODULES[1..] {
            std::fs::write(modules.join(module.file_name()), "\x7fELF").unwrap();
        }
        let release =
            |wanted| Kernel::cached_release(cache.path(), wanted).map(|k| k.map(|k| k.release));
        assert_eq!(
            release(None).unwrap().as_deref(),
            Some("7.3.4+deb13-cloud-amd64")
        );
        assert_eq!(
            release(Some("")).unwrap().as_deref(),
            Some("7.3.4+deb13-cloud-amd64")
        );
        assert_eq!(
            release(Some("7.2.13+deb14-cloud-amd64"))
                .unwrap()
                .as_deref(),
            Some("7.2.13+deb14-cloud-amd64")
        );
        // An override boots a kernel without modules (on the NVMe disk bus); the current one
        // has its module.
        let older = Kernel::cached_release(cache.path(), Some("7.2.13+deb14-cloud-amd64"))
            .unwrap()
            .unwrap();
        assert!(older.module("virtio_blk").is_none());
        let current = Kernel::cached_release(cache.path(), None).unwrap().unwrap();
        assert_eq!(
            current.module("virtio_blk"),
            Some(modules.join("virtio_blk.ko").as_path())
        );
        // The guest loads them in order, configfs before null_blk (which needs it), with
        // their parameters; the older kernel loads none.
        assert_eq!(
            current.module_load_list(),
            "virtio_blk.ko \nconfigfs.ko \nnull_blk.ko nr_devices=0\n"
        );
        assert_eq!(older.module_load_list(), "");
        let err = release(Some("6.1.0-cloud-amd64")).unwrap_err().to_string();
        assert!(
            err.contains("ASA_LAB_KERNEL=6.1.0-cloud-amd64")
                && err.contains("7.2.13+deb14-cloud-amd64")
                && err.contains("7.3.4+deb13-cloud-amd64"),
            "{err}"
        );
    }
}
