//! Booting the guest under qemu (TCG) and running one script in it.
//!
//! The guest's `/init` (see [`INIT`]) mounts the usual filesystems, runs `/lab/run.sh`, packs
//! `/lab/out` as a tar stream into a virtio serial port (binary-clean, unlike the console) and
//! prints `ASA-LAB-EXIT <status>` on the serial console before it powers off. The host streams
//! the console, enforces a timeout, unpacks the files and returns the script's exit status.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use log::{debug, info};

use crate::image::ImageBuilder;
use crate::kernel::Kernel;

/// Marker the guest prints once it is up, with its uptime.
pub const BOOTED_MARKER: &str = "ASA-LAB-BOOTED";
/// Marker the guest prints with the script's exit status.
pub const EXIT_MARKER: &str = "ASA-LAB-EXIT";
/// Name of the virtio serial port that carries `/lab/out` back.
pub const OUT_PORT: &str = "asa.lab.out";

/// The guest's init: a busybox shell script.
pub const INIT: &str = r#"#!/bin/busybox sh
/bin/busybox mkdir -p /usr/bin /usr/sbin /sbin /usr/local/bin
/bin/busybox --install -s
export PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME=/root TERM=dumb
mkdir -p /proc /sys /dev /tmp /run /root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mount -t bpf bpf /sys/fs/bpf
mount -t tracefs tracefs /sys/kernel/tracing
mount -t debugfs debugfs /sys/kernel/debug
mkdir -p /sys/fs/cgroup && mount -t cgroup2 cgroup2 /sys/fs/cgroup
ip link set lo up 2>/dev/null
hostname asa-lab
echo "ASA-LAB-BOOTED $(cut -d' ' -f1 /proc/uptime) $(uname -r) cpus=$(nproc)"
mkdir -p /lab/out
cd /lab
# The block device of the ext4 file system labelled $1, waiting up to 10 s for it to appear
# (disks are probed in parallel: their names do not follow the command line's order).
disk() {
  i=0; while ! findfs LABEL=$1 > /dev/null 2>&1 && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
  findfs LABEL=$1 2>/dev/null
}
if grep -qw asa.rootfs /proc/cmdline; then
  # The kernel's modules the lab brings (the virtio block driver of the disks, null_blk), in
  # the order of the load list, with their parameters.
  while read -r m args; do
    insmod "/lib/modules/$m" $args || echo "ASA-LAB: cannot load module $m"
  done < /lib/modules/load.list
  # A Debian root filesystem on a disk: run the script chrooted into it.
  mkdir -p /rootfs
  if mount -t ext4 "$(disk asa-rootfs)" /rootfs; then
    if grep -qw asa.work /proc/cmdline; then
      # The persistent work disk: what runs leave in /var/tmp/asa-work is there next boot.
      mkdir -p /rootfs/var/tmp/asa-work
      if mount -t ext4 "$(disk asa-work)" /rootfs/var/tmp/asa-work; then
        echo "ASA-LAB: work disk at /var/tmp/asa-work, $(df -m /rootfs/var/tmp/asa-work | awk 'NR==2 {print $3}') MiB kept from earlier runs"
      else
        echo "ASA-LAB: cannot mount the work disk (label asa-work); /var/tmp/asa-work starts empty"
      fi
    fi
    for m in proc sys dev tmp run; do mkdir -p /rootfs/$m; mount --rbind /$m /rootfs/$m; done
    for m in lab boot usr/local/bin; do mkdir -p /rootfs/$m; mount --bind /$m /rootfs/$m; done
    # Support files of the experts (scx_gru's model and ONNX Runtime), when the run has any.
    for m in usr/local/lib usr/local/share; do
      [ -d /$m ] && { mkdir -p /rootfs/$m; mount --bind /$m /rootfs/$m; }
    done
    cp /etc/hostname /rootfs/etc/hostname 2>/dev/null
    chroot /rootfs /usr/bin/env -i PATH=$PATH HOME=/root TERM=dumb sh -c 'cd /lab && exec sh /lab/run.sh'
    rc=$?
  else
    echo "ASA-LAB: cannot mount the guest root filesystem (label asa-rootfs)"
    rc=125
  fi
else
  sh /lab/run.sh
  rc=$?
fi
dmesg > /lab/out/dmesg.txt 2>/dev/null
# The work disk outlives the VM: its data must be on it before the power goes.
sync
umount /rootfs/var/tmp/asa-work 2>/dev/null
port=
for p in /sys/class/virtio-ports/*; do
  [ "$(cat $p/name 2>/dev/null)" = "asa.lab.out" ] && port=/dev/$(basename $p)
done
if [ -n "$port" ]; then tar -C /lab/out -cf - . > "$port"; else echo "ASA-LAB: no output port"; fi
echo "ASA-LAB-EXIT $rc"
poweroff -f
"#;

/// Errors with a console tail, so a failed boot is diagnosable from the message alone.
#[derive(Debug, thiserror::Error)]
pub enum VmError {
    /// qemu is not installed.
    #[error("qemu-system-x86_64 not found: run lab/setup.sh (Debian 12: qemu from bookworm-backports; `apt-get install qemu-system-x86` elsewhere)")]
    QemuMissing,
    /// The guest did not finish in time.
    #[error("the lab VM did not finish within {timeout:?} ({phase}); last console lines:\n{tail}")]
    Timeout {
        /// The limit.
        timeout: Duration,
        /// Whether the guest had booted.
        phase: &'static str,
        /// The end of the console.
        tail: String,
    },
    /// qemu ended without the guest reporting an exit status (panic, qemu error).
    #[error("the lab VM stopped without reporting an exit status (qemu {status}); last console lines:\n{tail}")]
    NoExitStatus {
        /// qemu's exit status.
        status: String,
        /// The end of the console.
        tail: String,
    },
}

/// How to boot.
#[derive(Debug, Clone)]
pub struct VmConfig {
    /// Guest memory in MiB.
    pub memory_mib: u32,
    /// Virtual CPUs.
    pub cpus: u32,
    /// Limit for the whole run (boot, script, power-off).
    pub timeout: Duration,
    /// Copy the console to stderr while it runs.
    pub echo_console: bool,
    /// Extra kernel command line.
    pub extra_cmdline: String,
    /// A root filesystem image (ext4) attached as a disk, copy-on-write.
    pub rootfs: Option<PathBuf>,
    /// A persistent ext4 image (label `asa-work`) attached as a second disk, written in
    /// place and mounted at `/var/tmp/asa-work` in the root filesystem: what one run prepares
    /// there (the scenarios' unpacked kernel tree, corpora) is there at the next boot. Only
    /// with `rootfs`; see [`crate::work_disk`].
    pub work_disk: Option<PathBuf>,
    /// The emulated device of both disks.
    pub disk_bus: DiskBus,
    /// qemu's `-icount` value (see [`ICOUNT_ENV`], which sets it when this is None).
    pub icount: Option<String>,
}

/// The emulated device the guest's disks are attached as.
///
/// Virtio-blk by default since 2026-11-25: qemu 7.2's emulated NVMe controller under
/// single-threaded TCG loses completions when several I/Os are in flight (every eight-thread
/// `sysbench fileio` run, a third of the mixed loads: the guest driver's 30 s I/O timeout,
/// twice, then a controller reset; see gru_expert's README). NVMe is kept for reproducing the
/// lab runs measured on it before: `ASA_LAB_DISK=nvme`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskBus {
    /// `virtio-blk-pci` (the guest loads the `virtio_blk` module from the initramfs).
    Virtio,
    /// qemu's `nvme` controller (built into the guest kernel).
    Nvme,
}

/// Environment variable choosing qemu's TCG threading: `single` (the default: one host thread
/// emulates every vCPU in turn) or `multi` (MTTCG, a host thread per vCPU). `multi` is for
/// experiments only: it oopsed once at boot here (../shared/LAB.md). Under `single` a busy vCPU
/// hands the host thread to the others only when it leaves its translated code (an interrupt,
/// at the latest its next 4 ms tick), so an IPI to an idle vCPU can wait up to a tick.
pub const TCG_THREAD_ENV: &str = "ASA_LAB_TCG_THREAD";

/// qemu's `-accel` value by default (and in every run measured before [`TCG_THREAD_ENV`]).
pub const DEFAULT_TCG_ACCEL: &str = "tcg,thread=single";

/// qemu's `-accel` value: TCG with the threading [`TCG_THREAD_ENV`] names.
pub fn tcg_accel() -> Result<String> {
    match std::env::var(TCG_THREAD_ENV).as_deref().map(str::trim) {
        Err(_) | Ok("") | Ok("single") => Ok(DEFAULT_TCG_ACCEL.into()),
        Ok("multi") => Ok("tcg,thread=multi".into()),
        Ok(other) => bail!("{TCG_THREAD_ENV}={other:?}: use single (the default) or multi"),
    }
}

/// Environment variable turning on qemu's instruction counting: its value is passed as
/// `-icount VALUE` (e.g. `shift=2,sleep=off`: every guest instruction takes 2^2 ns of guest
/// time, and an idle guest's clock jumps to its next timer instead of following the host's).
/// The guest's clock then counts the instructions it executed, not the host's time: a
/// measurement in the guest no longer depends on what else the host does, at the price of a
/// simple cost model (every instruction costs the same; caches are not modelled, as under TCG
/// anyway). Single-threaded TCG only, and qemu [`ICOUNT_MIN_QEMU`] or newer with more than one
/// vCPU. Unset (the default): the guest's clock follows the host's.
pub const ICOUNT_ENV: &str = "ASA_LAB_ICOUNT";

/// The `-icount` value of a VM: `configured` ([`VmConfig::icount`]) if set, else
/// [`ICOUNT_ENV`]'s (if set and not empty), checked against the `-accel` value `accel`: an
/// error with multi-threaded TCG, which qemu cannot combine with it.
fn icount_for(configured: Option<&str>, accel: &str) -> Result<Option<String>> {
    let env = std::env::var(ICOUNT_ENV).ok();
    checked_icount(configured.or(env.as_deref()), accel)
}

/// `value` as an `-icount` value under the `-accel` value `accel`: None when empty.
fn checked_icount(value: Option<&str>, accel: &str) -> Result<Option<String>> {
    let Some(value) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    if accel != DEFAULT_TCG_ACCEL {
        bail!("-icount needs single-threaded TCG (-accel {DEFAULT_TCG_ACCEL}), not {accel}: unset {TCG_THREAD_ENV}");
    }
    if value.contains(char::is_whitespace) {
        bail!("-icount {value:?}: one value without spaces, e.g. shift=2,sleep=off");
    }
    Ok(Some(value.to_owned()))
}

/// The oldest qemu whose single-threaded TCG shares an `-icount` budget between the vCPUs
/// (8.1). qemu 7.2 gave the whole budget up to the next timer to the vCPU it ran first; while
/// that vCPU kept arming timers (the lab's I/O loads, completing every 100 µs) the other one
/// did not run, for up to a second at a time: its tasks, interrupts included, stood still
/// (results/2026-11-26-qemu72-icount-starves-a-vcpu).
pub const ICOUNT_MIN_QEMU: (u32, u32) = (8, 1);

/// How the first line of `qemu-system-x86_64 --version` starts, before the version.
const QEMU_VERSION_PREFIX: &str = "QEMU emulator version ";

/// The version (major, minor) in the first line of `qemu-system-x86_64 --version`
/// (`QEMU emulator version 10.0.2 (Debian ...)`).
pub fn parse_qemu_version(text: &str) -> Option<(u32, u32)> {
    let rest = text
        .lines()
        .next()?
        .trim()
        .strip_prefix(QEMU_VERSION_PREFIX)?;
    let version = rest.split_whitespace().next()?;
    let mut parts = version.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// The installed qemu's version line (`10.0.2 (Debian 1:10.0.2+ds-2+deb13u1~bpo12+1)`), for
/// reports.
pub fn qemu_version() -> Result<String> {
    let qemu = which("qemu-system-x86_64").ok_or(VmError::QemuMissing)?;
    let text = version_output(&qemu)?;
    let line = text.lines().next().unwrap_or_default();
    Ok(line
        .strip_prefix(QEMU_VERSION_PREFIX)
        .unwrap_or(line)
        .to_owned())
}

/// What `qemu --version` prints.
fn version_output(qemu: &Path) -> Result<String> {
    let out = Command::new(qemu)
        .arg("--version")
        .output()
        .with_context(|| format!("run {} --version", qemu.display()))?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// An error when `-icount` with `cpus` vCPUs would run on a qemu (`version_text`, its
/// `--version` output) older than [`ICOUNT_MIN_QEMU`].
fn check_icount_qemu(version_text: &str, cpus: u32) -> Result<()> {
    if cpus < 2 {
        return Ok(());
    }
    let (major, minor) = ICOUNT_MIN_QEMU;
    match parse_qemu_version(version_text) {
        Some(v) if v >= ICOUNT_MIN_QEMU => Ok(()),
        Some((have_major, have_minor)) => bail!(
            "-icount with {cpus} vCPUs needs qemu {major}.{minor} or newer (qemu \
             {have_major}.{have_minor} starves all but one vCPU while it arms timers): run \
             lab/setup.sh (Debian 12: qemu from bookworm-backports) or unset {ICOUNT_ENV}"
        ),
        None => bail!(
            "-icount with {cpus} vCPUs needs qemu {major}.{minor} or newer, and the version of \
             qemu-system-x86_64 is unknown ({:?}): unset {ICOUNT_ENV} or install a newer qemu",
            version_text.lines().next().unwrap_or_default()
        ),
    }
}

/// How qemu emulates the CPUs, for reports: the `-accel` value and the `-icount` one if any
/// (`tcg,thread=single -icount shift=2,sleep=off`).
pub fn cpu_emulation() -> Result<String> {
    let accel = tcg_accel()?;
    Ok(match icount_for(None, &accel)? {
        Some(icount) => format!("{accel} -icount {icount}"),
        None => accel,
    })
}

/// Environment variable choosing the disk bus (`virtio` or `nvme`).
pub const DISK_BUS_ENV: &str = "ASA_LAB_DISK";

impl DiskBus {
    /// The bus [`DISK_BUS_ENV`] names, if it is set (and not empty).
    pub fn from_env() -> Result<Option<Self>> {
        match std::env::var(DISK_BUS_ENV) {
            Ok(v) if !v.trim().is_empty() => v.parse().map(Some),
            _ => Ok(None),
        }
    }

    /// qemu arguments attaching the raw image `path` (drive id `id`, serial `asa-<id>`),
    /// copy-on-write when `snapshot`. A snapshot's overlay is thrown away when qemu exits, so
    /// the guest's flushes to it are not passed on to the host's disk (`cache=unsafe`): each
    /// one cost a host fdatasync whose time varied with whatever else the host wrote, and
    /// made the guest's I/O loads noisy.
    fn qemu_args(self, id: &str, path: &Path, snapshot: bool) -> [String; 4] {
        let snapshot = if snapshot {
            ",snapshot=on,cache=unsafe"
        } else {
            ""
        };
        let device = match self {
            Self::Virtio => "virtio-blk-pci",
            Self::Nvme => "nvme",
        };
        [
            "-drive".into(),
            format!(
                "file={},if=none,id={id},format=raw{snapshot}",
                path.display()
            ),
            "-device".into(),
            format!("{device},serial=asa-{id},drive={id}"),
        ]
    }
}

impl std::str::FromStr for DiskBus {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim() {
            "virtio" => Ok(Self::Virtio),
            "nvme" => Ok(Self::Nvme),
            other => bail!("{DISK_BUS_ENV}={other:?}: the lab's disk bus is virtio or nvme"),
        }
    }
}

/// Environment variable giving the lab VM's number of vCPUs (default [`DEFAULT_CPUS`]), so a
/// whole suite or a long run can be repeated on another machine shape: `ASA_LAB_CPUS=4`.
pub const CPUS_ENV: &str = "ASA_LAB_CPUS";
/// Environment variable giving the lab VM's memory in MiB (default [`DEFAULT_MEMORY_MIB`]).
pub const MEMORY_ENV: &str = "ASA_LAB_MEMORY_MIB";
/// vCPUs of a lab VM unless [`CPUS_ENV`] or the run says otherwise.
pub const DEFAULT_CPUS: u32 = 2;
/// Memory of a lab VM in MiB unless [`MEMORY_ENV`] or the run says otherwise.
pub const DEFAULT_MEMORY_MIB: u32 = 2048;
/// The vCPUs a lab VM may have (qemu's q35/pc machines take more; TCG emulates them on one
/// host thread, so more than this only slows every vCPU down).
const CPU_RANGE: (u32, u32) = (1, 64);
/// The memory a lab VM may have, MiB (the guest's userland and the experts need 512).
const MEMORY_RANGE: (u32, u32) = (512, 65_536);

/// The value of `name` (a whole number within `range`), `default` when it is unset or empty.
fn shape_from_env(name: &str, default: u32, range: (u32, u32)) -> Result<u32> {
    match std::env::var(name) {
        Err(_) => Ok(default),
        Ok(text) if text.trim().is_empty() => Ok(default),
        Ok(text) => match text.trim().parse::<u32>() {
            Ok(n) if (range.0..=range.1).contains(&n) => Ok(n),
            _ => bail!(
                "{name}={text:?}: give a whole number from {} to {}",
                range.0,
                range.1
            ),
        },
    }
}

impl VmConfig {
    /// The defaults with the machine shape from [`CPUS_ENV`] and [`MEMORY_ENV`]; an error says
    /// which variable holds what.
    pub fn from_env() -> Result<Self> {
        Ok(Self {
            cpus: shape_from_env(CPUS_ENV, DEFAULT_CPUS, CPU_RANGE)?,
            memory_mib: shape_from_env(MEMORY_ENV, DEFAULT_MEMORY_MIB, MEMORY_RANGE)?,
            ..Self::default()
        })
    }
}

impl Default for VmConfig {
    /// The defaults with the machine shape of [`VmConfig::from_env`] where it is valid (a
    /// malformed variable is refused when the VM boots, with [`VmConfig::from_env`]'s error).
    fn default() -> Self {
        Self {
            memory_mib: shape_from_env(MEMORY_ENV, DEFAULT_MEMORY_MIB, MEMORY_RANGE)
                .unwrap_or(DEFAULT_MEMORY_MIB),
            cpus: shape_from_env(CPUS_ENV, DEFAULT_CPUS, CPU_RANGE).unwrap_or(DEFAULT_CPUS),
            timeout: Duration::from_secs(600),
            echo_console: false,
            extra_cmdline: String::new(),
            rootfs: None,
            work_disk: None,
            disk_bus: DiskBus::Virtio,
            icount: None,
        }
    }
}

/// What a run produced.
#[derive(Debug)]
pub struct VmOutcome {
    /// Exit status of `/lab/run.sh`.
    pub exit_code: i32,
    /// Everything the guest printed on its console.
    pub console: String,
    /// Where `/lab/out` was unpacked (includes `dmesg.txt`).
    pub out_dir: PathBuf,
    /// Host time from qemu start to the boot marker.
    pub boot_time: Option<Duration>,
    /// Host time for the whole run.
    pub wall_time: Duration,
}

impl VmOutcome {
    /// The console lines the script printed (between the boot and exit markers).
    pub fn script_output(&self) -> &str {
        let start = self
            .console
            .find(BOOTED_MARKER)
            .and_then(|i| self.console[i..].find('\n').map(|j| i + j + 1))
            .unwrap_or(0);
        let end = self
            .console
            .rfind(EXIT_MARKER)
            .unwrap_or(self.console.len());
        &self.console[start..end.max(start)]
    }

    /// A file the guest left in `/lab/out`.
    pub fn read_out(&self, name: &str) -> Result<String> {
        let p = self.out_dir.join(name);
        std::fs::read_to_string(&p).with_context(|| format!("the guest left no {name} in /lab/out"))
    }

    /// The `KEY=VALUE` lines of a file the guest left in `/lab/out` (how the VM tests' scripts
    /// report exit codes and states), values trimmed, a later line winning over an earlier one.
    pub fn read_results(&self, name: &str) -> Result<std::collections::BTreeMap<String, String>> {
        Ok(self
            .read_out(name)?
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
            .collect())
    }
}

/// Add the guest's base system to `image`: busybox, `/init`, the kernel config.
pub fn add_base_system(image: &mut ImageBuilder, kernel: &Kernel) -> Result<()> {
    let busybox = ["/bin/busybox", "/usr/bin/busybox"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.is_file())
        .context("busybox not found: install it with `apt-get install busybox-static`")?;
    if !crate::image::shared_libraries(busybox)?.is_empty() {
        bail!(
            "{} is dynamically linked: install busybox-static",
            busybox.display()
        );
    }
    image.file(busybox, "/bin/busybox")?;
    image.bytes("/init", INIT, 0o755)?;
    image.file(&kernel.config, format!("/boot/config-{}", kernel.release))?;
    for module in &kernel.modules {
        let name = module.file_name().context("a module file has a name")?;
        image.file(module, Path::new("/lib/modules").join(name))?;
    }
    image.bytes("/lib/modules/load.list", kernel.module_load_list(), 0o644)?;
    for d in ["/proc", "/sys", "/dev", "/tmp", "/run", "/root", "/etc"] {
        image.dir(d)?;
    }
    image.bytes(
        "/etc/passwd",
        "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n",
        0o644,
    )?;
    image.bytes("/etc/group", "root:x:0:\nnogroup:x:65534:\n", 0o644)?;
    Ok(())
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The lab's one-VM-at-a-time rule: an exclusive `flock` on `lab/vm.lock` in the project
/// cache, held while a VM runs. The machines have two cores, so a second VM beside a
/// measurement would change its numbers; a second `boot` waits (and says so) instead. The lock
/// dies with its process, so a killed run never leaves it held.
struct VmLock {
    _file: std::fs::File,
}

impl VmLock {
    fn acquire() -> Result<Self> {
        let dir = asa_experts::cache_dir().join("lab");
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("creating the lab cache {}", dir.display()))?;
        let path = dir.join("vm.lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("opening the lab's VM lock {}", path.display()))?;
        use std::os::unix::io::AsRawFd;
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            info!(
                "another lab VM is running (lock {}): waiting for it, one VM at a time",
                path.display()
            );
            // SAFETY: as above; blocks until the other VM's process releases it.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
                return Err(std::io::Error::last_os_error())
                    .with_context(|| format!("locking {}", path.display()));
            }
        }
        Ok(Self { _file: file })
    }
}

/// Boot `kernel` with `initramfs`, wait for the guest to power off and collect its output.
pub fn boot(
    kernel: &Kernel,
    initramfs: &Path,
    work_dir: &Path,
    config: &VmConfig,
) -> Result<VmOutcome> {
    let qemu = which("qemu-system-x86_64").ok_or(VmError::QemuMissing)?;
    // A malformed machine shape is one clear error, not a silent default.
    VmConfig::from_env()?;
    if !(CPU_RANGE.0..=CPU_RANGE.1).contains(&config.cpus)
        || !(MEMORY_RANGE.0..=MEMORY_RANGE.1).contains(&config.memory_mib)
    {
        bail!(
            "a lab VM of {} vCPUs and {} MiB: vCPUs must be {}–{}, memory {}–{} MiB",
            config.cpus,
            config.memory_mib,
            CPU_RANGE.0,
            CPU_RANGE.1,
            MEMORY_RANGE.0,
            MEMORY_RANGE.1
        );
    }
    std::fs::create_dir_all(work_dir)?;
    let out_tar = work_dir.join("out.tar");
    let _ = std::fs::remove_file(&out_tar);
    let mut cmdline = "console=ttyS0 quiet panic=-1 rdinit=/init".to_owned();
    if config.rootfs.is_some() {
        cmdline.push_str(" asa.rootfs");
        if config.work_disk.is_some() {
            cmdline.push_str(" asa.work");
        }
    } else if config.work_disk.is_some() {
        bail!("a work disk needs a root filesystem (it is mounted at /var/tmp/asa-work in it)");
    }
    if !config.extra_cmdline.is_empty() {
        cmdline.push(' ');
        cmdline.push_str(&config.extra_cmdline);
    }
    let mut cmd = Command::new(&qemu);
    let accel = tcg_accel()?;
    if let Some(icount) = icount_for(config.icount.as_deref(), &accel)? {
        check_icount_qemu(&version_output(&qemu)?, config.cpus)?;
        cmd.args(["-icount", &icount]);
    }
    cmd.args(["-accel", &accel, "-cpu", "max", "-nodefaults"])
        .args(["-m", &config.memory_mib.to_string()])
        .args(["-smp", &config.cpus.to_string()])
        .arg("-kernel")
        .arg(&kernel.vmlinuz)
        .arg("-initrd")
        .arg(initramfs)
        .args(["-append", &cmdline])
        .args(["-display", "none", "-no-reboot", "-serial", "stdio"])
        .args(["-monitor", "none", "-device", "virtio-serial-pci"])
        .arg("-chardev")
        .arg(format!("file,id=labout,path={}", out_tar.display()))
        .args([
            "-device",
            &format!("virtserialport,chardev=labout,name={OUT_PORT}"),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if config.disk_bus == DiskBus::Virtio
        && config.rootfs.is_some()
        && kernel.module("virtio_blk").is_none()
    {
        bail!(
            "kernel {} in the cache has no virtio_blk module for the lab's virtio disks (cached \
             before the lab used them): `asa-lab kernel --refresh` fetches the current kernel \
             with it, or set {DISK_BUS_ENV}=nvme",
            kernel.release
        );
    }
    if let Some(rootfs) = &config.rootfs {
        // snapshot=on: the guest's writes go to a temporary overlay, the cache stays as built.
        cmd.args(config.disk_bus.qemu_args("rootfs", rootfs, true));
    }
    if let Some(work) = &config.work_disk {
        // Written in place (no snapshot): it is the point of the disk.
        cmd.args(config.disk_bus.qemu_args("work", work, false));
    }
    // The VM dies with the thread that started it (which waits for it below): a killed
    // asa-lab or test leaves no orphaned qemu burning a CPU for the rest of its timeout.
    // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    // Held until the VM is gone (dropped when this function returns).
    let _one_vm = VmLock::acquire()?;
    debug!("starting {cmd:?}");
    let t0 = Instant::now();
    let mut child = cmd.spawn().context("starting qemu")?;
    let console = Arc::new(Mutex::new(String::new()));
    let boot_time = Arc::new(Mutex::new(None));
    let reader = {
        let mut stdout = child.stdout.take().expect("piped stdout");
        let console = console.clone();
        let boot_time = boot_time.clone();
        let echo = config.echo_console;
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            let mut pending = Vec::new();
            loop {
                let n = match stdout.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                let text = decode_console(&mut pending, &buf[..n]).replace('\r', "");
                if echo {
                    eprint!("{text}");
                }
                let mut c = console.lock().unwrap();
                c.push_str(&text);
                let mut bt = boot_time.lock().unwrap();
                if bt.is_none() && c.contains(BOOTED_MARKER) {
                    *bt = Some(t0.elapsed());
                }
            }
        })
    };
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if t0.elapsed() > config.timeout {
            let _ = child.kill();
            let _ = child.wait();
            let _ = reader.join();
            let console = console.lock().unwrap();
            let phase = if console.contains(BOOTED_MARKER) {
                "the guest booted, its script did not finish"
            } else {
                "the guest never finished booting"
            };
            return Err(VmError::Timeout {
                timeout: config.timeout,
                phase,
                tail: tail(&console, 30),
            }
            .into());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = reader.join();
    let mut qemu_err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut qemu_err);
    }
    let console = std::mem::take(&mut *console.lock().unwrap());
    let exit_code = console
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix(EXIT_MARKER))
        .and_then(|rest| rest.trim().parse::<i32>().ok());
    let Some(exit_code) = exit_code else {
        return Err(VmError::NoExitStatus {
            status: format!("{status}, stderr: {}", qemu_err.trim()),
            tail: tail(&console, 30),
        }
        .into());
    };
    let out_dir = work_dir.join("out");
    let _ = std::fs::remove_dir_all(&out_dir);
    std::fs::create_dir_all(&out_dir)?;
    if out_tar.is_file() && std::fs::metadata(&out_tar)?.len() > 0 {
        let file = std::fs::File::open(&out_tar)?;
        tar::Archive::new(file)
            .unpack(&out_dir)
            .context("unpacking the guest's /lab/out")?;
    }
    let wall_time = t0.elapsed();
    let boot_time = *boot_time.lock().unwrap();
    info!(
        "lab VM finished: exit {exit_code}, boot {:?}, wall {:?}",
        boot_time, wall_time
    );
    Ok(VmOutcome {
        exit_code,
        console,
        out_dir,
        boot_time,
        wall_time,
    })
}

/// The first executable called `name` on `PATH`.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The text of the console bytes read so far: `pending` (bytes of a character split by the
/// previous read) and `chunk`, decoded up to the last complete character; an incomplete one at
/// the end waits in `pending` for the next read. The serial console arrives a few bytes at a
/// time, so decoding each read alone broke every multi-byte character it split ("—" → "���").
fn decode_console(pending: &mut Vec<u8>, chunk: &[u8]) -> String {
    pending.extend_from_slice(chunk);
    let complete = match std::str::from_utf8(pending) {
        Ok(_) => pending.len(),
        // Cut inside a character at the end: keep its first bytes for the next read.
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        // Invalid bytes (not a split): decode what there is, replacing them.
        Err(_) => pending.len(),
    };
    let text = String::from_utf8_lossy(&pending[..complete]).into_owned();
    pending.drain(..complete);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_character_split_across_console_reads_arrives_whole() {
        let line = "run 5/64 — S5 → disk\n".as_bytes();
        let mut pending = Vec::new();
        let text: String = line
            .iter()
            .map(|b| decode_console(&mut pending, std::slice::from_ref(b)))
            .collect();
        assert_eq!(text, "run 5/64 — S5 → disk\n");
        assert!(pending.is_empty());
        // Bytes that are no UTF-8 at all are replaced, not held back.
        assert_eq!(decode_console(&mut pending, b"a\xffb"), "a\u{fffd}b");
        assert!(pending.is_empty());
    }

    #[test]
    fn the_machine_shape_comes_from_the_environment_within_its_range() {
        // Variables of this test's own, so parallel tests do not see them.
        let name = "ASA_LAB_TEST_SHAPE_CPUS";
        std::env::remove_var(name);
        assert_eq!(shape_from_env(name, 2, CPU_RANGE).unwrap(), 2);
        std::env::set_var(name, " 4 ");
        assert_eq!(shape_from_env(name, 2, CPU_RANGE).unwrap(), 4);
        std::env::set_var(name, "");
        assert_eq!(shape_from_env(name, 2, CPU_RANGE).unwrap(), 2);
        for bad in ["0", "65", "four", "-1"] {
            std::env::set_var(name, bad);
            let error = shape_from_env(name, 2, CPU_RANGE).unwrap_err().to_string();
            assert!(error.contains(name) && error.contains("1 to 64"), "{error}");
        }
        std::env::remove_var(name);
    }

    #[test]
    fn qemu_versions_and_the_icount_minimum() {
        let debian10 = "QEMU emulator version 10.0.2 (Debian 1:10.0.2+ds-2+deb13u1~bpo12+1)\n\
                        Copyright (c) 2003-2025 Fabrice Bellard and the QEMU Project developers\n";
        let debian72 = "QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)\n";
        assert_eq!(parse_qemu_version(debian10), Some((10, 0)));
        assert_eq!(parse_qemu_version(debian72), Some((7, 2)));
        assert_eq!(
            parse_qemu_version("QEMU emulator version 8.1.0\n"),
            Some((8, 1))
        );
        assert_eq!(parse_qemu_version("qemu 9"), None);
        assert_eq!(parse_qemu_version(""), None);
        check_icount_qemu(debian10, 2).unwrap();
        check_icount_qemu("QEMU emulator version 8.1.0\n", 2).unwrap();
        let old = check_icount_qemu(debian72, 2).unwrap_err().to_string();
        assert!(
            old.contains("qemu 7.2") && old.contains("lab/setup.sh"),
            "{old}"
        );
        assert!(check_icount_qemu("QEMU emulator version 8.0.5\n", 2).is_err());
        assert!(check_icount_qemu("garbage", 2).is_err());
        // One vCPU has nobody to starve.
        check_icount_qemu(debian72, 1).unwrap();
    }

    #[test]
    fn disk_bus_names_and_qemu_arguments() {
        assert_eq!("virtio".parse::<DiskBus>().unwrap(), DiskBus::Virtio);
        assert_eq!(" nvme\n".parse::<DiskBus>().unwrap(), DiskBus::Nvme);
        let err = "scsi".parse::<DiskBus>().unwrap_err().to_string();
        assert!(
            err.contains(DISK_BUS_ENV) && err.contains("virtio or nvme"),
            "{err}"
        );
        let path = Path::new("/cache/rootfs.ext4");
        assert_eq!(
            DiskBus::Virtio.qemu_args("rootfs", path, true),
            [
                "-drive",
                "file=/cache/rootfs.ext4,if=none,id=rootfs,format=raw,snapshot=on,cache=unsafe",
                "-device",
                "virtio-blk-pci,serial=asa-rootfs,drive=rootfs",
            ]
        );
        assert_eq!(
            DiskBus::Nvme.qemu_args("work", path, false)[1..],
            [
                "file=/cache/rootfs.ext4,if=none,id=work,format=raw",
                "-device",
                "nvme,serial=asa-work,drive=work",
            ]
        );
    }

    /// An -icount value is passed on as it is, an empty one is none; it needs single-threaded
    /// TCG and one word.
    #[test]
    fn icount_values_are_checked() {
        let single = DEFAULT_TCG_ACCEL;
        assert_eq!(
            checked_icount(Some(" shift=2,sleep=off "), single).unwrap(),
            Some("shift=2,sleep=off".to_owned())
        );
        assert_eq!(checked_icount(Some(""), single).unwrap(), None);
        assert_eq!(checked_icount(None, single).unwrap(), None);
        let err = checked_icount(Some("shift=2"), "tcg,thread=multi").unwrap_err();
        assert!(err.to_string().contains(TCG_THREAD_ENV), "{err}");
        assert!(checked_icount(Some("shift=2 -smp 8"), single).is_err());
    }

    /// The guest's init loads the lab's modules before it looks for the disks, and only when
    /// it has a root filesystem to mount.
    #[test]
    fn init_loads_modules_before_mounting_disks() {
        let rootfs = INIT.find("if grep -qw asa.rootfs").unwrap();
        let insmod = INIT.find("insmod \"/lib/modules/$m\" $args").unwrap();
        let mount = INIT.find("mount -t ext4 \"$(disk asa-rootfs)\"").unwrap();
        assert!(rootfs < insmod && insmod < mount);
    }
}
