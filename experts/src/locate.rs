//! Finding an expert's executable (`$ASA_EXPERTS_PATH`, the project cache, `$PATH`, the
//! distribution's directories) and checking its version against the catalogue's.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use anyhow::{bail, Result};

use crate::catalogue::{Expert, ExpertKind};

/// The project cache: `$ASA_CACHE`, else `$XDG_CACHE_HOME/asa`, else `~/.cache/asa`.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("ASA_CACHE").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir).join("asa");
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
    PathBuf::from(home).join(".cache").join("asa")
}

/// The ONNX Runtime release `gru_expert/setup_ort.sh` puts into the project cache.
pub const ORT_VERSION: &str = "1.32.0";

/// Where `gru_expert/setup_ort.sh` (run by `lab/setup.sh`) puts ONNX Runtime's shared library:
/// `$ASA_CACHE/onnxruntime-<ORT_VERSION>/libonnxruntime.so`.
pub fn cached_ort_library() -> PathBuf {
    cache_dir()
        .join(format!("onnxruntime-{ORT_VERSION}"))
        .join("libonnxruntime.so")
}

/// ONNX Runtime's telemetry opt-out. Official builds since 1.29 send telemetry on Linux too:
/// at its first environment, 1.32 starts a thread that keeps a device id and an offline cache in
/// `~/.cache/Microsoft/DeveloperTools/.onnxruntime/` and resolves and connects to an upload
/// endpoint (seen from scx_gru, in the middle of a measured load in the lab VM). The variable
/// set to `1` before ONNX Runtime initializes turns all of it off.
pub const ORT_TELEMETRY_OPT_OUT: &str = "ORT_DISABLE_TELEMETRY";

/// Opts the process out of ONNX Runtime's telemetry: sets `ORT_DISABLE_TELEMETRY=1` unless the
/// variable is set already (an explicit choice wins). Call it first thing in `main`, while the
/// process has one thread (setting the environment races with threads that read it), before
/// ONNX Runtime is loaded.
pub fn opt_out_of_ort_telemetry() {
    if std::env::var_os(ORT_TELEMETRY_OPT_OUT).is_none() {
        std::env::set_var(ORT_TELEMETRY_OPT_OUT, "1");
    }
}

/// Whether ONNX Runtime's telemetry is off in this process (`ORT_DISABLE_TELEMETRY=1`).
pub fn ort_telemetry_off() -> bool {
    std::env::var_os(ORT_TELEMETRY_OPT_OUT).is_some_and(|v| v == "1")
}

/// Called by a loader just before it initializes ONNX Runtime: warns when telemetry is on, so
/// a program that skipped [`opt_out_of_ort_telemetry`] (or a user who turned it on) hears of it.
/// `program` names whose `main` opts out.
pub fn warn_if_ort_telemetry_on(program: &str) {
    if !ort_telemetry_off() {
        log::warn!(
            "ONNX Runtime's telemetry is on ({ORT_TELEMETRY_OPT_OUT}=1 is not set): it may write \
             to ~/.cache/Microsoft and connect to an upload endpoint; {program}'s main sets it, \
             a library user should too"
        );
    }
}

/// Where `cargo install --root` puts the experts from crates.io.
pub fn experts_cache_dir() -> PathBuf {
    cache_dir().join("experts")
}

/// The system's own directories for executables, searched after `$PATH` (those not on it):
/// where distributions install their scx packages (Arch's and CachyOS's `scx-scheds`, Fedora's
/// COPR builds and Flatcar's sysext put `scx_*` in `/usr/bin`), and where a local build goes.
pub const DISTRIBUTION_DIRS: &[&str] = &["/usr/local/bin", "/usr/bin"];

/// Where an expert's executable was found: the part of the search path it is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A directory of `$ASA_EXPERTS_PATH`.
    ExpertsPath,
    /// The project cache (`$ASA_CACHE/experts/<crate>-<version>/bin`, filled by `lab/setup.sh`).
    Cache,
    /// Next to the `asa` binary: a workspace expert built by cargo with it.
    BesideAsa,
    /// A directory of `$PATH`.
    Path,
    /// One of [`DISTRIBUTION_DIRS`] that is not on `$PATH`.
    Distribution,
}

impl Origin {
    /// The name `asa experts` prints.
    pub fn name(self) -> &'static str {
        match self {
            Origin::ExpertsPath => "ASA_EXPERTS_PATH",
            Origin::Cache => "cache",
            Origin::BesideAsa => "beside asa",
            Origin::Path => "PATH",
            Origin::Distribution => "distribution",
        }
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// An expert's executable and where it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The executable.
    pub path: PathBuf,
    /// The part of the search path it was found in.
    pub origin: Origin,
}

/// The directories an expert's executable is looked for in, by part, searched in this order:
/// `$ASA_EXPERTS_PATH`, the project cache, next to `asa` (workspace experts), `$PATH`, then the
/// distribution's directories that `$PATH` lacks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchPath {
    /// `$ASA_EXPERTS_PATH`.
    pub experts_path: Vec<PathBuf>,
    /// The project's expert cache ([`experts_cache_dir`]); an scx crate is in
    /// `<cache>/<crate>-<version>/bin`.
    pub cache: PathBuf,
    /// The folders of the running executable (for workspace experts).
    pub beside_asa: Vec<PathBuf>,
    /// `$PATH`.
    pub path: Vec<PathBuf>,
    /// [`DISTRIBUTION_DIRS`].
    pub distribution: Vec<PathBuf>,
}

impl SearchPath {
    /// The search path of this process: its environment and its executable's folder.
    pub fn from_env() -> Self {
        let split = |var: &str| {
            std::env::var_os(var)
                .map(|list| std::env::split_paths(&list).collect())
                .unwrap_or_default()
        };
        // Built by cargo next to the `asa` binary (target/<profile>/); from a test or an
        // example (target/<profile>/{deps,examples}/), the folder above.
        let mut beside_asa = Vec::new();
        if let Some(dir) = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(Path::to_owned))
        {
            let in_cargo_subdir = matches!(
                dir.file_name().and_then(|n| n.to_str()),
                Some("deps" | "examples")
            );
            let parent = dir.parent().map(Path::to_owned);
            beside_asa.push(dir);
            if let Some(parent) = parent.filter(|_| in_cargo_subdir) {
                beside_asa.push(parent);
            }
        }
        Self {
            experts_path: split("ASA_EXPERTS_PATH"),
            cache: experts_cache_dir(),
            beside_asa,
            path: split("PATH"),
            distribution: DISTRIBUTION_DIRS.iter().map(PathBuf::from).collect(),
        }
    }

    /// The directories searched for `expert`'s executable, in order, each with its part.
    pub fn dirs(&self, expert: &Expert) -> Vec<(PathBuf, Origin)> {
        let mut dirs: Vec<(PathBuf, Origin)> = self
            .experts_path
            .iter()
            .map(|d| (d.clone(), Origin::ExpertsPath))
            .collect();
        match expert.kind {
            ExpertKind::ScxCrate => {
                if let Some(root) = expert.install_root_name() {
                    dirs.push((self.cache.join(root).join("bin"), Origin::Cache));
                }
            }
            ExpertKind::Workspace => {
                dirs.extend(
                    self.beside_asa
                        .iter()
                        .map(|d| (d.clone(), Origin::BesideAsa)),
                );
            }
            ExpertKind::KernelDefault => {}
        }
        dirs.extend(self.path.iter().map(|d| (d.clone(), Origin::Path)));
        dirs.extend(
            self.distribution
                .iter()
                .filter(|d| !self.path.contains(d))
                .map(|d| (d.clone(), Origin::Distribution)),
        );
        dirs
    }

    /// The executable for `expert` and where it was found, or an error that says how to
    /// install it.
    pub fn locate(&self, expert: &Expert) -> Result<Located> {
        if expert.is_kernel_default() {
            bail!(
                "expert {} is the kernel default and has no binary",
                expert.name
            );
        }
        if !expert.available {
            bail!(
                "expert {} is declared in the catalogue but not available yet: {}",
                expert.name,
                expert.description
            );
        }
        let name = expert.binary_name();
        for (dir, origin) in self.dirs(expert) {
            let candidate = dir.join(name);
            if is_executable(&candidate) {
                return Ok(Located {
                    path: candidate,
                    origin,
                });
            }
        }
        let how = match expert.kind {
            ExpertKind::ScxCrate => format!(
                "install it with `lab/setup.sh` (it runs `cargo install --locked --root {}/{} {}@{}`) \
                 or from your distribution's scx package",
                self.cache.display(),
                expert.install_root_name().unwrap_or_default(),
                expert.crate_name.as_deref().unwrap_or_default(),
                expert.version.as_deref().unwrap_or_default()
            ),
            _ => format!(
                "build it with `cargo build -p {}`",
                expert.package.as_deref().unwrap_or_default()
            ),
        };
        bail!(
            "expert {}: executable {name:?} not found (searched $ASA_EXPERTS_PATH, the project \
             cache, $PATH and {}); {how}",
            expert.name,
            DISTRIBUTION_DIRS.join(", ")
        )
    }
}

/// The directories searched for an expert's binary, in order ([`SearchPath::dirs`] of this
/// process).
pub fn search_dirs(expert: &Expert) -> Vec<PathBuf> {
    SearchPath::from_env()
        .dirs(expert)
        .into_iter()
        .map(|(dir, _)| dir)
        .collect()
}

/// The executable for `expert` and where it was found ([`SearchPath::locate`] of this
/// process), or an error that says how to install it.
pub fn locate(expert: &Expert) -> Result<Located> {
    SearchPath::from_env().locate(expert)
}

/// The executable for `expert`, or an error that says how to install it.
pub fn locate_binary(expert: &Expert) -> Result<PathBuf> {
    locate(expert).map(|found| found.path)
}

/// An expert binary's version against the one the catalogue pins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionCheck {
    /// The binary reports the catalogue's version.
    Same(String),
    /// The catalogue pins no version (a workspace expert); what the binary reported, if anything.
    Unpinned(Option<String>),
    /// Another version than the catalogue's: the binary is used, with a warning.
    Differs {
        /// What the binary reported.
        found: String,
        /// What the catalogue pins.
        pinned: String,
    },
    /// `--version` ran but printed no version: the binary is used, with a warning.
    Unreported {
        /// What the catalogue pins.
        pinned: String,
    },
}

impl VersionCheck {
    /// `found` (what `--version` reported) against `pinned` (the catalogue's version).
    pub fn compare(pinned: Option<&str>, found: Option<&str>) -> Self {
        match (pinned, found) {
            (None, found) => VersionCheck::Unpinned(found.map(str::to_owned)),
            (Some(pinned), None) => VersionCheck::Unreported {
                pinned: pinned.to_owned(),
            },
            (Some(pinned), Some(found)) if pinned == found => VersionCheck::Same(found.to_owned()),
            (Some(pinned), Some(found)) => VersionCheck::Differs {
                found: found.to_owned(),
                pinned: pinned.to_owned(),
            },
        }
    }

    /// The version the binary reported.
    pub fn found(&self) -> Option<&str> {
        match self {
            VersionCheck::Same(v) | VersionCheck::Differs { found: v, .. } => Some(v),
            VersionCheck::Unpinned(v) => v.as_deref(),
            VersionCheck::Unreported { .. } => None,
        }
    }

    /// The one warning line for `expert`'s `binary` with this version, if it needs one.
    pub fn warning(&self, expert: &Expert, binary: &Path) -> Option<String> {
        let fix = |pinned: &str| {
            format!(
                "`lab/setup.sh` installs {pinned} into the project cache, which is searched \
                 first"
            )
        };
        match self {
            VersionCheck::Same(_) | VersionCheck::Unpinned(_) => None,
            VersionCheck::Differs { found, pinned } => {
                let major = |v: &str| v.split('.').next().map(str::to_owned);
                let risk = if major(found) == major(pinned) {
                    "ASA's measurements are of"
                } else {
                    "another major version may reject the catalogue's arguments; ASA's \
                     measurements are of"
                };
                Some(format!(
                    "expert {}: {} is version {found}, the catalogue's is {pinned}: using it \
                     ({risk} {pinned}; {})",
                    expert.name,
                    binary.display(),
                    fix(pinned)
                ))
            }
            VersionCheck::Unreported { pinned } => Some(format!(
                "expert {}: `{} --version` reports no version, the catalogue's is {pinned}: \
                 using it ({})",
                expert.name,
                binary.display(),
                fix(pinned)
            )),
        }
    }
}

/// The first `MAJOR.MINOR.PATCH` in `--version` output, without a pre-release or build suffix:
/// `scx_bpfland 1.0.14-g1a2b3c x86_64-unknown-linux-gnu` and `scx_p2dq: v1.0.14` give `1.0.14`.
pub fn parse_version(output: &str) -> Option<String> {
    output
        .split(|c: char| c.is_whitespace() || matches!(c, ':' | ',' | '(' | ')' | '"'))
        .filter_map(|word| {
            let word = word.strip_prefix('v').unwrap_or(word);
            let core = word.split(['-', '+']).next()?;
            let parts: Vec<&str> = core.split('.').collect();
            let numeric = |p: &&str| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit());
            (parts.len() == 3 && parts.iter().all(numeric)).then(|| core.to_owned())
        })
        .next()
}

/// The identity of the file at a path: a binary replaced (an upgrade) is probed anew.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: i64,
    mtime_nsec: i64,
}

impl FileId {
    fn of(path: &Path) -> Option<Self> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path).ok()?;
        Some(Self {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime: m.mtime(),
            mtime_nsec: m.mtime_nsec(),
        })
    }
}

/// The version `binary --version` reports (None: it printed none), or an error when it does
/// not run. Run once per binary file and process: a success is kept (by path, until the file
/// there changes), a failure is tried again next time.
pub fn reported_version(binary: &Path) -> Result<Option<String>> {
    type Probes = HashMap<PathBuf, (FileId, Option<String>)>;
    static PROBES: OnceLock<Mutex<Probes>> = OnceLock::new();
    let probes = PROBES.get_or_init(Default::default);
    let id = FileId::of(binary);
    if let Some(id) = id {
        let known = probes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((known_id, version)) = known.get(binary) {
            if *known_id == id {
                return Ok(version.clone());
            }
        }
    }
    let version = parse_version(&crate::process::version_output(binary)?);
    if let Some(id) = id {
        probes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(binary.to_owned(), (id, version.clone()));
    }
    Ok(version)
}

/// `binary`'s version against `expert`'s in the catalogue ([`reported_version`], once per
/// binary): an error only when `binary --version` does not run.
pub fn check_version(expert: &Expert, binary: &Path) -> Result<VersionCheck> {
    let found = reported_version(binary)?;
    Ok(VersionCheck::compare(
        expert.version.as_deref(),
        found.as_deref(),
    ))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Catalogue;

    /// Writes an executable shell script `dir/name` running `body`. Written by a child `sh`, so
    /// that this process never holds the file open for writing: a child forked meanwhile by
    /// another test's thread would inherit that descriptor and make exec fail with ETXTBSY.
    fn fake_binary(dir: &Path, name: &str, body: &str) -> PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        let path = dir.join(name);
        let status = std::process::Command::new("/bin/sh")
            .args([
                "-c",
                "printf '#!/bin/sh\\n%s\\n' \"$1\" > \"$2\" && chmod 755 \"$2\"",
            ])
            .args(["sh", body])
            .arg(&path)
            .status()
            .unwrap();
        assert!(status.success());
        path
    }

    /// The built-in bpfland (catalogue version 1.1.4).
    fn bpfland() -> Expert {
        Catalogue::builtin().get("bpfland").unwrap().clone()
    }

    /// A search path with only a cache and `$PATH`, both under `root`.
    fn search(root: &Path) -> SearchPath {
        SearchPath {
            cache: root.join("cache"),
            path: vec![root.join("path")],
            ..SearchPath::default()
        }
    }

    #[test]
    fn an_expert_on_path_with_the_catalogue_version_is_used_without_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let bin = fake_binary(
            &dir.path().join("path"),
            "scx_bpfland",
            "echo 'scx_bpfland 1.1.4 x86_64-unknown-linux-gnu'",
        );
        let found = search(dir.path()).locate(&bpfland()).unwrap();
        assert_eq!(
            found,
            Located {
                path: bin.clone(),
                origin: Origin::Path
            }
        );
        let version = check_version(&bpfland(), &bin).unwrap();
        assert_eq!(version, VersionCheck::Same("1.1.4".into()));
        assert_eq!(version.warning(&bpfland(), &bin), None);
    }

    #[test]
    fn another_version_is_used_with_one_warning_naming_both_and_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let bin = fake_binary(
            &dir.path().join("path"),
            "scx_bpfland",
            "echo 'scx_bpfland: 1.0.14-g1a2b3c4 x86_64-unknown-linux-gnu'",
        );
        let version = check_version(&bpfland(), &bin).unwrap();
        assert_eq!(
            version,
            VersionCheck::Differs {
                found: "1.0.14".into(),
                pinned: "1.1.4".into()
            }
        );
        let warning = version.warning(&bpfland(), &bin).unwrap();
        assert!(!warning.contains('\n'), "one line: {warning}");
        for part in [
            "expert bpfland",
            "1.0.14",
            "1.1.4",
            "using it",
            "lab/setup.sh",
        ] {
            assert!(warning.contains(part), "{part:?} missing: {warning}");
        }
        assert!(warning.contains(&bin.display().to_string()), "{warning}");
        assert!(!warning.contains("major"), "{warning}");

        let major = VersionCheck::compare(Some("1.1.4"), Some("2.0.0"));
        let warning = major.warning(&bpfland(), &bin).unwrap();
        assert!(warning.contains("another major version"), "{warning}");
    }

    #[test]
    fn a_binary_that_reports_no_version_is_used_with_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let bin = fake_binary(
            &dir.path().join("path"),
            "scx_bpfland",
            "echo 'scx_bpfland'",
        );
        let version = check_version(&bpfland(), &bin).unwrap();
        assert_eq!(
            version,
            VersionCheck::Unreported {
                pinned: "1.1.4".into()
            }
        );
        let warning = version.warning(&bpfland(), &bin).unwrap();
        assert!(warning.contains("reports no version"), "{warning}");
        assert!(warning.contains("1.1.4"), "{warning}");
    }

    #[test]
    fn a_binary_whose_version_does_not_run_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let failing = fake_binary(
            &dir.path().join("a"),
            "scx_bpfland",
            "echo 'error while loading shared libraries: libbpf.so.1' >&2; exit 127",
        );
        let err = format!("{:#}", check_version(&bpfland(), &failing).unwrap_err());
        assert!(err.contains("--version` failed"), "{err}");
        assert!(err.contains("libbpf.so.1"), "{err}");
        // A script whose interpreter is missing cannot even be executed.
        let unrunnable = dir.path().join("b/scx_bpfland");
        std::fs::create_dir_all(unrunnable.parent().unwrap()).unwrap();
        let status = std::process::Command::new("/bin/sh")
            .args([
                "-c",
                "printf '#!/nonexistent/sh\\n' > \"$1\" && chmod 755 \"$1\"",
                "sh",
            ])
            .arg(&unrunnable)
            .status()
            .unwrap();
        assert!(status.success());
        let err = format!("{:#}", check_version(&bpfland(), &unrunnable).unwrap_err());
        assert!(err.contains("executing"), "{err}");
    }

    #[test]
    fn the_cache_wins_over_path() {
        let dir = tempfile::tempdir().unwrap();
        let search = search(dir.path());
        fake_binary(&dir.path().join("path"), "scx_bpfland", "echo 1.1.4");
        let cached = fake_binary(
            &search.cache.join("scx_bpfland-1.1.4/bin"),
            "scx_bpfland",
            "echo 1.1.4",
        );
        assert_eq!(
            search.locate(&bpfland()).unwrap(),
            Located {
                path: cached,
                origin: Origin::Cache
            }
        );
    }

    #[test]
    fn distribution_dirs_are_searched_after_path_unless_on_it() {
        let dir = tempfile::tempdir().unwrap();
        let distro = dir.path().join("usr-bin");
        let mut search = search(dir.path());
        search.experts_path = vec![dir.path().join("mine")];
        search.distribution = vec![distro.clone()];
        let in_distro = fake_binary(&distro, "scx_bpfland", "echo 1.1.4");
        let origins: Vec<Origin> = search.dirs(&bpfland()).into_iter().map(|d| d.1).collect();
        assert_eq!(
            origins,
            [
                Origin::ExpertsPath,
                Origin::Cache,
                Origin::Path,
                Origin::Distribution
            ]
        );
        assert_eq!(
            search.locate(&bpfland()).unwrap(),
            Located {
                path: in_distro.clone(),
                origin: Origin::Distribution
            }
        );
        // Already on $PATH: found there, and searched once.
        search.path.push(distro.clone());
        assert_eq!(
            search.locate(&bpfland()).unwrap().origin,
            Origin::Path,
            "{:?}",
            search.dirs(&bpfland())
        );
        assert_eq!(
            search
                .dirs(&bpfland())
                .iter()
                .filter(|(d, _)| *d == distro)
                .count(),
            1
        );
        let mine = fake_binary(&dir.path().join("mine"), "scx_bpfland", "echo 1.1.4");
        assert_eq!(
            search.locate(&bpfland()).unwrap(),
            Located {
                path: mine,
                origin: Origin::ExpertsPath
            }
        );
    }

    #[test]
    fn a_version_is_probed_once_per_binary_file() {
        let dir = tempfile::tempdir().unwrap();
        let runs = dir.path().join("runs");
        let body = format!("echo run >> '{}'; echo 'scx_bpfland 1.1.4'", runs.display());
        let bin = fake_binary(&dir.path().join("path"), "scx_bpfland", &body);
        let count = || std::fs::read_to_string(&runs).unwrap().lines().count();
        assert_eq!(reported_version(&bin).unwrap().as_deref(), Some("1.1.4"));
        assert_eq!(reported_version(&bin).unwrap().as_deref(), Some("1.1.4"));
        assert_eq!(count(), 1, "probed again");
        // Replaced (an upgrade; another size, as the clock may not have moved): probed anew.
        let body = format!(
            "echo run >> '{}'; echo 'scx_bpfland 1.10.5'",
            runs.display()
        );
        fake_binary(&dir.path().join("path"), "scx_bpfland", &body);
        assert_eq!(reported_version(&bin).unwrap().as_deref(), Some("1.10.5"));
        assert_eq!(count(), 2);
    }

    #[test]
    fn versions_are_read_from_what_scx_binaries_print() {
        for (output, want) in [
            ("scx_bpfland 1.1.4 x86_64-unknown-linux-gnu", Some("1.1.4")),
            ("scx_p2dq: 1.1.4 x86_64-unknown-linux-gnu", Some("1.1.4")),
            ("scx_bpfland 1.0.14-g1a2b3c4 x86_64", Some("1.0.14")),
            ("scx_lavd v1.0.19+git", Some("1.0.19")),
            ("scx_gru 0.1.0", Some("0.1.0")),
            ("built 2026.11.29.1 (1.2)", None),
            ("scx_bpfland", None),
            ("", None),
        ] {
            assert_eq!(parse_version(output).as_deref(), want, "{output:?}");
        }
    }

    #[test]
    fn missing_binary_error_says_how_to_install() {
        let mut expert = Catalogue::builtin().get("bpfland").unwrap().clone();
        expert.binary = Some("scx_definitely_not_installed".into());
        let err = locate_binary(&expert).unwrap_err().to_string();
        assert!(err.contains("not found"), "{err}");
        assert!(err.contains("/usr/bin"), "{err}");
        assert!(err.contains("cargo install --locked"), "{err}");
        assert!(err.contains("scx_bpfland@1.1.4"), "{err}");
    }

    #[test]
    fn ort_version_is_the_one_setup_ort_installs() {
        let script = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../gru_expert/setup_ort.sh"),
        )
        .unwrap();
        assert!(
            script
                .lines()
                .any(|l| l == format!("version={ORT_VERSION}")),
            "gru_expert/setup_ort.sh does not install ONNX Runtime {ORT_VERSION}"
        );
        assert!(
            cached_ort_library().ends_with(format!("onnxruntime-{ORT_VERSION}/libonnxruntime.so"))
        );
    }

    #[test]
    fn workspace_experts_are_searched_above_test_binaries() {
        // This test runs from target/<profile>/deps/: scx_gru is built one folder up.
        let gru = Catalogue::builtin().get("gru").unwrap().clone();
        let exe = std::env::current_exe().unwrap();
        let deps = exe.parent().unwrap();
        let dirs = search_dirs(&gru);
        assert_eq!(
            dirs[..2],
            [deps.to_owned(), deps.parent().unwrap().to_owned()]
        );
    }

    #[test]
    fn unavailable_and_default_entries_have_no_binary() {
        let c = Catalogue::builtin();
        assert!(locate_binary(c.get("eevdf").unwrap()).is_err());
        let mut gru = c.get("gru").unwrap().clone();
        gru.available = false;
        assert!(locate_binary(&gru)
            .unwrap_err()
            .to_string()
            .contains("not available yet"));
    }
}
