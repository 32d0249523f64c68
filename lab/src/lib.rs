//! The ASA VM lab: boots a Debian kernel with sched_ext under qemu (TCG) with a small
//! initramfs holding the binaries a run needs, runs one script in it and brings back its exit
//! status, console and files. Everything in ASA that claims to switch schedulers is tested here.
//!
//! ```no_run
//! let lab = asa_lab::Lab::new()?;
//! let mut run = asa_lab::GuestRun::new("hello", "cat /sys/kernel/sched_ext/state");
//! run.experts.push("bpfland".into());
//! let outcome = lab.run(&run)?;
//! assert_eq!(outcome.exit_code, 0);
//! # anyhow::Ok(())
//! ```

pub mod demo;
pub mod image;
pub mod kernel;
pub mod rootfs;
pub mod run_dirs;
pub mod timer_disk;
pub mod vm;
pub mod work_disk;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

pub use image::ImageBuilder;
pub use kernel::Kernel;
pub use rootfs::RootfsSpec;
pub use vm::{DiskBus, VmConfig, VmError, VmOutcome};

/// Packages every guest root filesystem gets: the libraries the agent and the experts load.
pub const BASE_ROOTFS_PACKAGES: &[&str] = &["libelf1", "zlib1g", "procps"];

/// The one package set the workspace's VM tests ask for (xz for the decision and calibration
/// tests, 7-Zip and iperf3 for the scenario smoke test, sysbench for the lab's disk test,
/// dbus-daemon for the D-Bus test's system bus), so a fresh machine builds and caches a single
/// test root filesystem.
pub const TEST_ROOTFS_PACKAGES: [&str; 5] =
    ["7zip", "dbus-daemon", "iperf3", "sysbench", "xz-utils"];

/// A binary of this workspace's build, for tests of crates that cannot name it with
/// `CARGO_BIN_EXE_*` and for the lab's own tools: the folder above the running test's `deps/`
/// (`cargo test --workspace`, as `make test` runs it, builds every binary before the tests), or
/// the running binary's own folder (`target/<profile>/`, as for `asa-gru-compare`).
pub fn workspace_binary(name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe().context("locating the running program")?;
    let path = binary_dir(&exe)
        .context("the running program is not in a target folder")?
        .join(name);
    anyhow::ensure!(
        path.is_file(),
        "{} is missing: build it first (cargo build --workspace; make test does)",
        path.display()
    );
    Ok(path)
}

/// The cargo output folder (`target/<profile>/`) of the program at `exe`: its own folder, or
/// the one above for a test or an example (`target/<profile>/{deps,examples}/`).
fn binary_dir(exe: &Path) -> Option<&Path> {
    let dir = exe.parent()?;
    match dir.file_name().and_then(|n| n.to_str()) {
        Some("deps" | "examples") => dir.parent(),
        _ => Some(dir),
    }
}

/// Where a run's own expert catalogue ([`GuestRun::catalogue`]) is put in the guest, for
/// `asa --catalogue /lab/experts.toml ...` there.
pub const GUEST_CATALOGUE: &str = "/lab/experts.toml";

/// Where host tools named in [`GuestRun::host_tools`] are put in the guest.
pub const GUEST_BIN: &str = "/usr/local/bin";

/// Where scx_gru looks for its model by default (`gru.toml` next to `gru.onnx`); the lab puts
/// the committed model (`gru_expert/model/`) there whenever a run asks for expert `gru`.
pub const GRU_GUEST_MODEL: &str = "/usr/local/share/scx_gru/gru.toml";
/// Where scx_gru looks for ONNX Runtime by default; the lab copies the project cache's library
/// (`asa_experts::cached_ort_library`) there whenever a run asks for expert `gru`.
pub const GRU_GUEST_ORT_LIB: &str = "/usr/local/lib/scx_gru/libonnxruntime.so";
/// The workspace package that builds scx_gru.
const GRU_PACKAGE: &str = "asa-gru-expert";

/// What an expert needs in the guest besides its executable: for scx_gru (package
/// `asa-gru-expert`), the committed model and ONNX Runtime's library at its default paths, so
/// `asa pin gru` runs with the model. Returns (host path, guest path, executable) triples;
/// executables come with their shared libraries.
pub fn expert_support_files(expert: &asa_experts::Expert) -> Result<Vec<(PathBuf, PathBuf, bool)>> {
    if expert.package.as_deref() != Some(GRU_PACKAGE) {
        return Ok(Vec::new());
    }
    let ort = asa_experts::cached_ort_library();
    anyhow::ensure!(
        ort.is_file(),
        "expert {}: ONNX Runtime's library is not in the project cache ({}): run lab/setup.sh \
         (it runs gru_expert/setup_ort.sh)",
        expert.name,
        ort.display()
    );
    let model_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../gru_expert/model");
    let guest_model = Path::new(GRU_GUEST_MODEL);
    let guest_dir = guest_model.parent().context("model path has a folder")?;
    let mut files = vec![(ort, PathBuf::from(GRU_GUEST_ORT_LIB), true)];
    for name in ["gru.toml", "gru.onnx"] {
        let host = model_dir.join(name);
        anyhow::ensure!(
            host.is_file(),
            "expert {}: the committed model file {} is missing",
            expert.name,
            host.display()
        );
        files.push((host, guest_dir.join(name), false));
    }
    Ok(files)
}

/// Put `run`'s experts in the guest image: each binary once (variants of one binary differ by
/// their arguments only), found with `locate`, with what it needs besides; and the run's own
/// catalogue, if any, at [`GUEST_CATALOGUE`].
fn add_experts(
    image: &mut ImageBuilder,
    run: &GuestRun,
    locate: impl Fn(&asa_experts::Expert) -> Result<PathBuf>,
) -> Result<()> {
    let catalogue = match &run.catalogue {
        Some(path) => {
            image.file(path, GUEST_CATALOGUE)?;
            asa_experts::Catalogue::load(path)?
        }
        None => asa_experts::Catalogue::builtin(),
    };
    for name in &run.experts {
        let expert = catalogue.require(name)?;
        let guest_bin = Path::new(GUEST_BIN).join(expert.binary_name());
        if expert.is_kernel_default() || image.contains(&guest_bin) {
            continue;
        }
        image.executable(locate(expert)?, &guest_bin)?;
        for (host, guest, executable) in expert_support_files(expert)? {
            if executable {
                image.executable(&host, &guest)?;
            } else {
                image.file(&host, &guest)?;
            }
        }
    }
    Ok(())
}

/// One script to run in a fresh guest, and what the guest needs for it.
#[derive(Debug, Clone)]
pub struct GuestRun {
    /// Short name, used for the work directory.
    pub name: String,
    /// Shell script run as `/lab/run.sh` (busybox sh); files left in `/lab/out` come back.
    pub script: String,
    /// Host executables copied with their shared libraries: (host path, guest path).
    pub executables: Vec<(PathBuf, PathBuf)>,
    /// Plain host files: (host path, guest path).
    pub files: Vec<(PathBuf, PathBuf)>,
    /// Experts from the catalogue to install in the guest (into [`GUEST_BIN`]), with what they
    /// need besides ([`expert_support_files`]: scx_gru's model and ONNX Runtime).
    pub experts: Vec<String>,
    /// The catalogue [`GuestRun::experts`] are looked up in, as a file that is also put in
    /// the guest at [`GUEST_CATALOGUE`]; `None`: the built-in one (nothing is put there).
    /// Variants of one binary (other `args`) install it once.
    pub catalogue: Option<PathBuf>,
    /// Programs on the host's PATH to copy into [`GUEST_BIN`] (e.g. `stress-ng`).
    pub host_tools: Vec<String>,
    /// A Debian root filesystem to run the script in (chrooted), for real tools; `None`
    /// runs it in the busybox initramfs.
    pub rootfs: Option<RootfsSpec>,
    /// A persistent work disk by name ([`work_disk`]), mounted at `/var/tmp/asa-work` in the
    /// root filesystem; `None`: that folder starts empty every boot.
    pub work_disk: Option<String>,
    /// How to boot.
    pub vm: VmConfig,
}

impl GuestRun {
    /// A run of `script` with nothing else in the guest.
    pub fn new(name: &str, script: &str) -> Self {
        Self {
            name: name.to_owned(),
            script: script.to_owned(),
            executables: Vec::new(),
            files: Vec::new(),
            experts: Vec::new(),
            catalogue: None,
            host_tools: Vec::new(),
            rootfs: None,
            work_disk: None,
            vm: VmConfig::default(),
        }
    }

    /// Add the `asa` agent binary as `/usr/local/bin/asa`.
    pub fn with_asa(mut self, asa: &Path) -> Self {
        self.executables
            .push((asa.to_owned(), Path::new(GUEST_BIN).join("asa")));
        self
    }
}

/// A ready lab: the kernel is in the cache.
#[derive(Debug, Clone)]
pub struct Lab {
    /// The kernel every run boots.
    pub kernel: Kernel,
    /// The project cache (`asa_experts::cache_dir()`).
    pub cache: PathBuf,
}

impl Lab {
    /// Use the cached kernel, downloading it when needed.
    pub fn new() -> Result<Self> {
        let cache = asa_experts::cache_dir();
        let kernel = Kernel::ensure(&cache)?;
        Ok(Self { kernel, cache })
    }

    /// Build the image for `run`, boot it and return what happened. A non-zero exit status of
    /// the script is not an error here: callers check [`VmOutcome::exit_code`].
    pub fn run(&self, run: &GuestRun) -> Result<VmOutcome> {
        let runs = self.cache.join("lab/runs");
        run_dirs::prune(&runs, run_dirs::KEEP_FINISHED)?;
        let work = runs.join(format!("{}-{}", run.name, std::process::id()));
        std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
        let mut image = ImageBuilder::new();
        vm::add_base_system(&mut image, &self.kernel)?;
        image.bytes("/lab/run.sh", run.script.as_bytes(), 0o755)?;
        image.dir("/lab/out")?;
        for (host, guest) in &run.executables {
            image.executable(host, guest)?;
        }
        for (host, guest) in &run.files {
            image.file(host, guest)?;
        }
        add_experts(&mut image, run, asa_experts::locate_binary)?;
        for tool in &run.host_tools {
            let host = vm::which(tool).with_context(|| {
                format!(
                    "{tool} is not installed on the host (needed in the guest); run lab/setup.sh"
                )
            })?;
            image.executable(&host, Path::new(GUEST_BIN).join(tool))?;
        }
        let initramfs = work.join("initramfs.cpio");
        image.write(&initramfs)?;
        let mut vm = run.vm.clone();
        if let Some(bus) = vm::DiskBus::from_env()? {
            vm.disk_bus = bus;
        }
        if let Some(spec) = &run.rootfs {
            let mut spec = spec.clone();
            // The experts link libelf, which a minimal Debian lacks.
            spec.packages
                .extend(BASE_ROOTFS_PACKAGES.iter().map(|p| p.to_string()));
            vm.rootfs = Some(rootfs::ensure(&self.cache, &spec)?);
        }
        // Held (locked) until the VM is gone.
        let _work_disk = match (&run.work_disk, &vm.rootfs) {
            (Some(name), Some(rootfs)) => {
                let disk = work_disk::acquire(&work_disk::path_for(&self.cache, name, rootfs)?)?;
                vm.work_disk = Some(disk.path.clone());
                Some(disk)
            }
            (Some(name), None) => {
                bail!("work disk {name}: a work disk needs a root filesystem (--rootfs)")
            }
            (None, _) => None,
        };
        let outcome = vm::boot(&self.kernel, &initramfs, &work, &vm);
        run_dirs::drop_boot_files(&work, outcome.is_ok());
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_binaries_are_beside_a_binary_and_above_a_test_or_an_example() {
        let target = Path::new("/w/target/release");
        for exe in ["asa-gru-compare", "deps/vm_gru-0123", "examples/demo"] {
            assert_eq!(binary_dir(&target.join(exe)), Some(target), "{exe}");
        }
        assert_eq!(binary_dir(Path::new("/")), None);
    }

    #[test]
    fn variants_of_one_binary_install_it_once_with_their_catalogue() {
        let variants = Path::new(env!("CARGO_MANIFEST_DIR")).join("../experts/variants.toml");
        let mut run = GuestRun::new("variants", "true");
        run.catalogue = Some(variants);
        run.experts = [
            "eevdf",
            "cosmos",
            "cosmos-nosync",
            "cosmos-busy75",
            "flash-lag5",
        ]
        .map(String::from)
        .to_vec();
        let located = std::cell::RefCell::new(Vec::new());
        let mut image = ImageBuilder::new();
        add_experts(&mut image, &run, |e| {
            located.borrow_mut().push(e.name.clone());
            Ok(PathBuf::from("/bin/true"))
        })
        .unwrap();
        assert_eq!(*located.borrow(), ["cosmos", "flash-lag5"]);
        assert!(image.contains("/usr/local/bin/scx_cosmos"));
        assert!(image.contains("/usr/local/bin/scx_flash"));
        assert!(image.contains(GUEST_CATALOGUE));

        // A name the run's catalogue lacks is an error; the built-in one has no variants.
        run.experts = vec!["cosmos-bogus".into()];
        let err = add_experts(&mut ImageBuilder::new(), &run, |_| Ok("/bin/true".into()));
        assert!(format!("{:#}", err.unwrap_err()).contains("cosmos-bogus"));
        run.catalogue = None;
        run.experts = vec!["cosmos-nosync".into()];
        let mut image = ImageBuilder::new();
        assert!(add_experts(&mut image, &run, |_| Ok("/bin/true".into())).is_err());
        assert!(!image.contains(GUEST_CATALOGUE));
    }
}
