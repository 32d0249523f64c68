//! `asa doctor`: checks whether `asa run` can run on this machine and says, one line per
//! check, what it found or what is wrong and how to fix it.
//!
//! The checks, in order: the kernel (sched_ext, its build option, BTF), the process's
//! privileges, bpffs and cgroup v2, a scheduler another tool attached, every expert of the
//! catalogue, what `asa run` would load with the same options (config file, feature schema,
//! ONNX Runtime, classifier model, mapping table, application model; each loaded and checked
//! by the agent's own loaders), and the tools of the scenario catalogue's loads.
//!
//! The kernel, privilege and scheduler checks read the machine through [`Machine`], a root
//! folder that is `/` for real and a fake `/sys` and `/proc` tree in the tests; the expert
//! checks take the binary lookup and the `--version` run as functions; the decision checks
//! load the files they are pointed at. Each yields a [`Check`] with a [`Severity`]:
//! [`Severity::Fail`] is something that makes `asa run` impossible (exit status 1);
//! [`Severity::Warn`] something that turns a part off or may keep the agent waiting.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use asa_agent::daemon::settings::{RunArgs, RunSettings, DEFAULT_CONFIG};
use asa_agent::decision::app_model::{AppModel, DEFAULT_APP_MODEL_PATHS};
use asa_agent::decision::classifier::{OrtRuntime, WorkloadClassifier};
use asa_agent::decision::engine::DecisionEngine;
use asa_agent::perception::schema::FeatureSchema;
use asa_agent::perception::SchemaFile;
use asa_experts::control_lock::CONTROL_LOCK;
use asa_experts::sched_ext::DEFAULT_SYSFS_ROOT;
use asa_experts::{Catalogue, Expert, Located, SchedExt, ScxState, VersionCheck, EEVDF};
use asa_mapping_table::MappingTable;
use serde::Serialize;

/// `asa doctor` options: `--json`, and the files `asa run` would be given, so the report is
/// about what that `asa run` would load.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DoctorArgs {
    /// Print the checks as JSON.
    #[arg(long)]
    pub json: bool,
    /// Config file, as `asa run --config` (default: /etc/asa/asa.toml when it exists).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Classifier model, as `asa run --model`.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Mapping table, as `asa run --mapping` (default: the built-in mapping/default.toml).
    #[arg(long)]
    pub mapping: Option<PathBuf>,
    /// Feature schema, as `asa run --schema` (default: the built-in one).
    #[arg(long)]
    pub schema: Option<PathBuf>,
    /// libonnxruntime.so, as `asa run --onnxruntime`.
    #[arg(long)]
    pub onnxruntime: Option<PathBuf>,
    /// Application model, as `asa run --app-model`.
    #[arg(long)]
    pub app_model: Option<PathBuf>,
}

impl DoctorArgs {
    /// The `asa run` options these stand for (everything else at its default).
    fn run_args(&self) -> RunArgs {
        RunArgs {
            config: self.config.clone(),
            model: self.model.clone(),
            mapping: self.mapping.clone(),
            schema: self.schema.clone(),
            onnxruntime: self.onnxruntime.clone(),
            app_model: self.app_model.clone(),
            ..RunArgs::default()
        }
    }
}

/// How bad a check's finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Fine.
    Ok,
    /// Not checked, or not about `asa run` (the scenarios' tools).
    Info,
    /// `asa run` runs, with a part off or waiting (exit status 0).
    Warn,
    /// `asa run` cannot run here (exit status 1).
    Fail,
}

impl Severity {
    /// The line's first word.
    fn label(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Info => "info",
            Self::Warn => "WARN",
            Self::Fail => "FAIL",
        }
    }
}

/// One finding: what was checked, how it went, and what was found or what to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// What was checked (`sched_ext`, `expert bpfland`, ...).
    pub name: String,
    /// How it went.
    pub severity: Severity,
    /// What was found; for a WARN or FAIL, what is wrong and the fix.
    pub detail: String,
}

impl Check {
    /// A check; a detail of several lines (an error that quotes its file) is made one.
    fn new(name: impl Into<String>, severity: Severity, detail: impl Into<String>) -> Self {
        let detail: String = detail.into();
        let detail = if detail.contains('\n') {
            detail
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        } else {
            detail
        };
        Self {
            name: name.into(),
            severity,
            detail,
        }
    }

    fn ok(name: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(name, Severity::Ok, detail)
    }

    fn info(name: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(name, Severity::Info, detail)
    }

    fn warn(name: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(name, Severity::Warn, detail)
    }

    fn fail(name: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(name, Severity::Fail, detail)
    }

    /// `ok   sched_ext: /sys/kernel/sched_ext (state disabled)`.
    pub fn line(&self) -> String {
        format!(
            "{:<4} {}: {}",
            self.severity.label(),
            self.name,
            self.detail
        )
    }
}

/// The machine's files, under a root folder (`/` for real).
#[derive(Debug, Clone)]
pub struct Machine {
    root: PathBuf,
}

impl Machine {
    /// This machine.
    pub fn system() -> Self {
        Self::at("/")
    }

    /// The tree under `root` (tests: a fake `/sys` and `/proc`).
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// Where the machine's absolute `path` is.
    fn path(&self, path: &str) -> PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }

    fn exists(&self, path: &str) -> bool {
        self.path(path).exists()
    }

    fn read(&self, path: &str) -> std::io::Result<Vec<u8>> {
        std::fs::read(self.path(path))
    }

    fn read_string(&self, path: &str) -> Option<String> {
        std::fs::read_to_string(self.path(path)).ok()
    }

    /// `uname -r`, from /proc/sys/kernel/osrelease.
    fn kernel_release(&self) -> Option<String> {
        self.read_string("/proc/sys/kernel/osrelease")
            .map(|r| r.trim().to_owned())
            .filter(|r| !r.is_empty())
    }

    /// The kernel's build configuration: /proc/config.gz, else /boot/config-<release>, with
    /// the file it came from; None when neither is readable.
    fn kernel_config(&self) -> Option<(String, String)> {
        if let Ok(gz) = self.read("/proc/config.gz") {
            let mut text = String::new();
            if flate2::read::GzDecoder::new(&gz[..])
                .read_to_string(&mut text)
                .is_ok()
            {
                return Some(("/proc/config.gz".to_owned(), text));
            }
        }
        let boot = format!("/boot/config-{}", self.kernel_release()?);
        let text = self.read_string(&boot)?;
        Some((boot, text))
    }
}

/// The value of `option` in a kernel config (`y`, `m`, a string); None when it is not set.
pub fn config_value<'a>(config: &'a str, option: &str) -> Option<&'a str> {
    config.lines().find_map(|line| {
        line.strip_prefix(option)
            .and_then(|rest| rest.strip_prefix('='))
            .map(str::trim)
    })
}

/// What to do on a kernel without sched_ext.
const SCHED_EXT_FIX: &str = "boot a kernel built with CONFIG_SCHED_CLASS_EXT=y (Linux 6.12 or \
newer; Debian: linux-image-amd64 from trixie-backports or sid), or use the lab VM (`make demo`)";

/// The kernel's sched_ext sysfs folder.
pub fn sched_ext_check(machine: &Machine) -> Check {
    let scx = SchedExt::at(machine.path(DEFAULT_SYSFS_ROOT));
    match scx.state() {
        Ok(state) => Check::ok("sched_ext", format!("{DEFAULT_SYSFS_ROOT} (state {state})")),
        Err(_) if machine.exists(DEFAULT_SYSFS_ROOT) => Check::fail(
            "sched_ext",
            format!(
                "{DEFAULT_SYSFS_ROOT}/state is not readable or not a sched_ext state — is /sys \
                 mounted read-write and this a Linux 6.12+ kernel? {SCHED_EXT_FIX}"
            ),
        ),
        Err(_) => Check::fail(
            "sched_ext",
            format!("the kernel has no {DEFAULT_SYSFS_ROOT} — {SCHED_EXT_FIX}"),
        ),
    }
}

/// CONFIG_SCHED_CLASS_EXT in the kernel's build configuration, when it is readable.
pub fn kernel_config_check(machine: &Machine) -> Check {
    const OPTION: &str = "CONFIG_SCHED_CLASS_EXT";
    let Some((origin, text)) = machine.kernel_config() else {
        return Check::info(
            "kernel config",
            format!(
                "neither /proc/config.gz nor /boot/config-{} is readable: {OPTION} not checked",
                machine.kernel_release().as_deref().unwrap_or("<release>")
            ),
        );
    };
    match config_value(&text, OPTION) {
        Some("y") => Check::ok("kernel config", format!("{OPTION}=y ({origin})")),
        Some(other) => Check::fail(
            "kernel config",
            format!("{origin} has {OPTION}={other} — boot a kernel built with {OPTION}=y"),
        ),
        None => Check::fail(
            "kernel config",
            format!("{origin} has {OPTION} not set — boot a kernel built with {OPTION}=y"),
        ),
    }
}

/// The kernel's BTF, which every sched_ext expert and the agent's BPF probe are built against.
pub fn btf_check(machine: &Machine) -> Check {
    const BTF: &str = "/sys/kernel/btf/vmlinux";
    match std::fs::metadata(machine.path(BTF)) {
        Ok(meta) => Check::ok("BTF", format!("{BTF} ({} KiB)", meta.len() / 1024)),
        Err(_) => Check::fail(
            "BTF",
            format!(
                "the kernel has no {BTF}: the experts' BPF programs cannot load — boot a kernel \
                 built with CONFIG_DEBUG_INFO_BTF=y (every Debian kernel is)"
            ),
        ),
    }
}

/// The capabilities attaching a sched_ext scheduler and the agent's BPF probe need, with their
/// bit numbers.
const NEEDED_CAPS: [(&str, u32); 3] = [("CAP_SYS_ADMIN", 21), ("CAP_PERFMON", 38), ("CAP_BPF", 39)];

/// The process's effective user id and capabilities, from /proc/self/status (`Uid:` and
/// `CapEff:`).
pub fn privileges_check(status: &str) -> Check {
    let field = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map(str::trim)
    };
    let euid: Option<u32> = field("Uid:")
        .and_then(|ids| ids.split_whitespace().nth(1))
        .and_then(|id| id.parse().ok());
    let caps = field("CapEff:").and_then(|hex| u64::from_str_radix(hex, 16).ok());
    let (Some(euid), Some(caps)) = (euid, caps) else {
        return Check::fail(
            "privileges",
            "/proc/self/status has no Uid: or CapEff: line: is /proc mounted?",
        );
    };
    let missing: Vec<&str> = NEEDED_CAPS
        .iter()
        .filter(|(_, bit)| caps & (1 << bit) == 0)
        .map(|(name, _)| *name)
        .collect();
    match (euid, missing.is_empty()) {
        (0, true) => Check::ok(
            "privileges",
            "root, with CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN",
        ),
        (0, false) => Check::fail(
            "privileges",
            format!(
                "root, but without {} (CapEff {caps:016x}): a container or service that drops \
                 capabilities — give the agent CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN",
                missing.join(", ")
            ),
        ),
        (uid, true) => Check::fail(
            "privileges",
            format!(
                "uid {uid} has CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN, but `asa run` starts only \
                 as root — run it with sudo"
            ),
        ),
        (uid, false) => Check::fail(
            "privileges",
            format!(
                "not root (uid {uid}, without {}): attaching a sched_ext scheduler needs root — \
                 run `sudo asa run` (`asa run --dry-run` decides without switching)",
                missing.join(", ")
            ),
        ),
    }
}

/// One line of /proc/self/mountinfo: where, and which file system type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// The mount point.
    pub point: String,
    /// The file system type (`bpf`, `cgroup2`, ...).
    pub fstype: String,
}

/// The mounts of a /proc/self/mountinfo text (`… mount-point … - fstype source options`).
pub fn mounts(mountinfo: &str) -> Vec<Mount> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            Some(Mount {
                point: left.split_whitespace().nth(4)?.to_owned(),
                fstype: right.split_whitespace().next()?.to_owned(),
            })
        })
        .collect()
}

/// bpffs at /sys/fs/bpf, where per-application mode pins scx_layered's task-hint map.
pub fn bpffs_check(mounts: &[Mount]) -> Check {
    let hint_map = asa_layers::DEFAULT_HINT_MAP;
    if mounts
        .iter()
        .any(|m| m.fstype == "bpf" && m.point == "/sys/fs/bpf")
    {
        Check::ok("bpffs", format!("/sys/fs/bpf (task hints at {hint_map})"))
    } else {
        Check::warn(
            "bpffs",
            format!(
                "no bpf file system at /sys/fs/bpf: per-application mode is off (the task-hint \
                 map {hint_map} cannot be pinned) — `mount -t bpf bpf /sys/fs/bpf`"
            ),
        )
    }
}

/// The cgroup v2 hierarchy, which per-application mode groups applications and pins by.
pub fn cgroup2_check(mounts: &[Mount]) -> Check {
    match mounts.iter().find(|m| m.fstype == "cgroup2") {
        Some(m) if m.point == "/sys/fs/cgroup" => Check::ok("cgroup v2", "/sys/fs/cgroup"),
        Some(m) => Check::ok("cgroup v2", format!("{} (a hybrid hierarchy)", m.point)),
        None => Check::warn(
            "cgroup v2",
            "no cgroup2 file system is mounted: per-application pins by cgroup (`asa app set \
             <cgroup>`, `[[app]]`) cannot be resolved — `mount -t cgroup2 none /sys/fs/cgroup`",
        ),
    }
}

/// The scheduler attached now: none, one an ASA process runs, or another tool's, which
/// `asa run` waits for. None when the kernel has no sched_ext (its own check says so).
pub fn scheduler_check(machine: &Machine, catalogue: &Catalogue) -> Option<Check> {
    let scx = SchedExt::at(machine.path(DEFAULT_SYSFS_ROOT));
    let state = scx.state().ok()?;
    if state == ScxState::Disabled {
        return Some(Check::ok(
            "scheduler",
            "no sched_ext scheduler attached (the kernel's EEVDF runs)",
        ));
    }
    let ops = scx.ops().unwrap_or_else(|| "unknown ops".to_owned());
    let ours = catalogue.by_ops(&ops).filter(|e| !e.is_kernel_default());
    if let (Some(expert), Some(pid)) = (ours, asa_process(machine)) {
        return Some(Check::ok(
            "scheduler",
            format!(
                "{ops} ({state}) is expert {} of the ASA process {pid}",
                expert.name
            ),
        ));
    }
    Some(Check::warn(
        "scheduler",
        format!(
            "another tool's scheduler is attached: {ops} ({state}) — `asa run` waits until it \
             goes; stop it (`scxctl stop`, `systemctl stop scx_loader`) or start `asa run \
             --take-over`"
        ),
    ))
}

/// The pid of the ASA process holding the supervisor lock, when that process lives: the pid
/// the lock file names, if /proc says its command is `asa`.
fn asa_process(machine: &Machine) -> Option<u32> {
    let pid: u32 = machine.read_string(CONTROL_LOCK)?.trim().parse().ok()?;
    let comm = machine.read_string(&format!("/proc/{pid}/comm"))?;
    (comm.trim() == "asa").then_some(pid)
}

/// Every expert of the catalogue: its binary found by `locate` (the lookup `asa experts` and
/// the supervisor use) and its version checked by `version` (`--version` against the
/// catalogue's, the supervisor's preflight). An expert that is missing or does not run, or
/// whose version differs from the catalogue's, is a WARN; none usable at all is a FAIL.
pub fn expert_checks(
    catalogue: &Catalogue,
    locate: impl Fn(&Expert) -> Result<Located>,
    version: impl Fn(&Expert, &Path) -> Result<VersionCheck>,
) -> Vec<Check> {
    let mut checks = Vec::new();
    let mut usable = 0;
    for expert in catalogue.experts() {
        let name = format!("expert {}", expert.name);
        if expert.is_kernel_default() {
            checks.push(Check::ok(name, "the kernel's own scheduler (no binary)"));
            continue;
        }
        if !expert.available {
            checks.push(Check::info(
                name,
                "declared in the catalogue, not available yet",
            ));
            continue;
        }
        let found = locate(expert).and_then(|found| {
            let check = version(expert, &found.path)
                .with_context(|| format!("{} does not run", found.path.display()))?;
            Ok((found, check))
        });
        // The line names the expert already.
        let prefix = format!("{name}: ");
        let unnamed = |text: String| match text.strip_prefix(&prefix) {
            Some(rest) => rest.to_owned(),
            None => text,
        };
        match found {
            Ok((found, check)) => {
                usable += 1;
                checks.push(match check.warning(expert, &found.path) {
                    Some(warning) => Check::warn(name, unnamed(warning)),
                    None => Check::ok(
                        name,
                        format!(
                            "{}{} (from {})",
                            found.path.display(),
                            check.found().map(|v| format!(" {v}")).unwrap_or_default(),
                            found.origin
                        ),
                    ),
                });
            }
            Err(e) => checks.push(Check::warn(name, unnamed(format!("{e:#}")))),
        }
    }
    if usable == 0 {
        checks.push(Check::fail(
            "experts",
            "no sched_ext expert can run here: `asa run` could only keep EEVDF — install them \
             with `lab/setup.sh` or your distribution's scx package (see `asa experts`)",
        ));
    }
    checks
}

/// What `asa run` with `args` would load, loaded by the agent's own loaders: the settings
/// (config file), the feature schema, ONNX Runtime, the classifier model, the mapping table
/// against the model and `catalogue`, and the application model.
pub fn decision_checks(args: &RunArgs, catalogue: &Catalogue) -> Vec<Check> {
    let mut checks = Vec::new();
    let settings = match RunSettings::resolve(args) {
        Ok(settings) => settings,
        Err(e) => {
            checks.push(Check::fail("settings", format!("{e:#}")));
            return checks;
        }
    };
    checks.push(match &settings.config_file {
        Some(path) => Check::ok("config", path.display().to_string()),
        None => Check::ok(
            "config",
            format!("none ({DEFAULT_CONFIG} does not exist): the defaults"),
        ),
    });
    let schema = match &settings.schema {
        Some(path) => SchemaFile::load(path),
        None => SchemaFile::builtin().context("the built-in feature schema"),
    };
    let live = match schema {
        Ok(file) => {
            let live = file.to_feature_schema();
            checks.push(Check::ok(
                "schema",
                format!(
                    "{} ({} v{}, {} features)",
                    settings
                        .schema
                        .as_ref()
                        .map_or("built in".to_owned(), |p| p.display().to_string()),
                    live.name,
                    live.version,
                    live.features.len()
                ),
            ));
            Some(live)
        }
        Err(e) => {
            checks.push(Check::fail("schema", format!("{e:#}")));
            None
        }
    };
    let runtime = match OrtRuntime::load(settings.sources.onnxruntime.as_deref()) {
        Ok(runtime) => {
            checks.push(Check::ok(
                "onnxruntime",
                runtime.library().display().to_string(),
            ));
            Some(runtime)
        }
        Err(e) => {
            checks.push(Check::fail("onnxruntime", e.to_string()));
            None
        }
    };
    let model = &settings.sources.model;
    let classifier = match (runtime, &live) {
        (Some(runtime), Some(live)) => match WorkloadClassifier::load(runtime, model, live) {
            Ok(classifier) => {
                let info = classifier.info();
                checks.push(Check::ok(
                    "model",
                    format!(
                        "{} ({} classes, trained {})",
                        model.display(),
                        info.class_names.len(),
                        info.training_date
                    ),
                ));
                true
            }
            Err(e) => {
                checks.push(Check::fail("model", e.to_string()));
                false
            }
        },
        _ => {
            checks.push(Check::info(
                "model",
                format!(
                    "{} not loaded (needs the schema and ONNX Runtime)",
                    model.display()
                ),
            ));
            false
        }
    };
    checks.push(mapping_check(
        &settings,
        live.as_ref().filter(|_| classifier),
        catalogue,
    ));
    checks.push(app_model_check(&settings, runtime));
    checks
}

/// The mapping table: its format always; with a `live` schema (the model loaded), the whole
/// decision engine as `asa run` loads it, which checks the table against the model's classes
/// and the catalogue and says which classes have no installed expert.
fn mapping_check(
    settings: &RunSettings,
    live: Option<&FeatureSchema>,
    catalogue: &Catalogue,
) -> Check {
    let table = match &settings.sources.mapping {
        Some(path) => MappingTable::load(path),
        None => MappingTable::builtin_default(),
    };
    let table = match table {
        Ok(table) => table,
        Err(e) => return Check::fail("mapping", e.to_string()),
    };
    let origin = settings
        .sources
        .mapping
        .as_ref()
        .map_or("mapping/default.toml (built in)".to_owned(), |p| {
            p.display().to_string()
        });
    let Some(live) = live else {
        return Check::info(
            "mapping",
            format!(
                "{origin}: {} table of {} classes, read; not checked against the model, which did \
                 not load",
                table.source,
                table.classes.len()
            ),
        );
    };
    let engine = DecisionEngine::load(
        &settings.sources,
        live,
        catalogue,
        settings.policy,
        settings.interval,
        true,
        EEVDF,
    );
    let engine = match engine {
        Ok(engine) => engine,
        Err(e) => return Check::fail("mapping", format!("{e:#}")),
    };
    let info = engine.info();
    let default = info
        .default_expert
        .as_deref()
        .map_or(String::new(), |e| format!(", default expert {e}"));
    let default = if info.layer_rows.is_empty() {
        default
    } else {
        let classes: Vec<&str> = info.layer_rows.iter().map(|r| r.class.as_str()).collect();
        format!(
            "{default}, calibrated layer policies: {}",
            classes.join(", ")
        )
    };
    let without: Vec<&str> = info
        .class_experts
        .iter()
        .filter(|(_, expert)| expert.is_none())
        .map(|(class, _)| class.as_str())
        .collect();
    if without.is_empty() {
        Check::ok(
            "mapping",
            format!(
                "{origin}: {} table, each of the model's {} classes has an installed expert{default}",
                table.source,
                info.class_experts.len()
            ),
        )
    } else {
        Check::warn(
            "mapping",
            format!(
                "{origin}: the classes {} have no installed expert mapped, the agent keeps the \
                 running expert for them — install their experts (`asa experts`) or map them",
                without.join(", ")
            ),
        )
    }
}

/// The application model of per-application mode: found where `asa run` looks, and loaded
/// against the default layer plan. Without one (or one that does not load) classes come from
/// pins only: a WARN.
fn app_model_check(settings: &RunSettings, runtime: Option<&'static OrtRuntime>) -> Check {
    let Some(path) = &settings.app_model else {
        return Check::warn(
            "app model",
            format!(
                "none ($ASA_APP_MODEL, {}, the source tree's): per-application classes come \
                 from pins only — give --app-model or install one",
                DEFAULT_APP_MODEL_PATHS.join(", ")
            ),
        );
    };
    let Some(runtime) = runtime else {
        return Check::info(
            "app model",
            format!("{} not loaded (needs ONNX Runtime)", path.display()),
        );
    };
    match AppModel::load(runtime, path, &asa_layers::default_plan()) {
        Ok(_) => Check::ok("app model", path.display().to_string()),
        Err(e) => Check::warn(
            "app model",
            format!("{e:#}: per-application classes come from pins only"),
        ),
    }
}

/// The tools each load of the scenario catalogue needs (`asa scenario run`, `asa calibrate`;
/// not `asa run`, hence info): one line when all are there, else one per load that lacks one.
pub fn scenario_checks() -> Vec<Check> {
    let catalogue = match asa_scenarios::catalogue::Catalogue::builtin() {
        Ok(catalogue) => catalogue,
        Err(e) => return vec![Check::fail("scenarios", format!("{e:#}"))],
    };
    let missing: Vec<Check> = catalogue
        .loads
        .iter()
        .filter_map(|(name, load)| {
            load.check_tools(name)
                .err()
                .map(|e| Check::info(format!("scenario load {name}"), format!("{e:#}")))
        })
        .collect();
    if missing.is_empty() {
        vec![Check::ok(
            "scenarios",
            format!(
                "the tools of all {} loads are installed",
                catalogue.loads.len()
            ),
        )]
    } else {
        missing
    }
}

/// Every check on `machine` (the real one: also the experts' binaries, the files `asa run`
/// would load and the scenarios' tools).
pub fn all_checks(machine: &Machine, catalogue: &Catalogue, args: &RunArgs) -> Vec<Check> {
    let mountinfo = machine
        .read_string("/proc/self/mountinfo")
        .unwrap_or_default();
    let mounts = mounts(&mountinfo);
    let mut checks = vec![
        sched_ext_check(machine),
        kernel_config_check(machine),
        btf_check(machine),
        privileges_check(&machine.read_string("/proc/self/status").unwrap_or_default()),
        bpffs_check(&mounts),
        cgroup2_check(&mounts),
    ];
    checks.extend(scheduler_check(machine, catalogue));
    checks.extend(expert_checks(
        catalogue,
        asa_experts::locate,
        asa_experts::check_version,
    ));
    checks.extend(decision_checks(args, catalogue));
    checks.extend(scenario_checks());
    checks
}

/// Whether a check failed: `asa doctor` then exits with status 1.
pub fn any_failed(checks: &[Check]) -> bool {
    checks.iter().any(|c| c.severity == Severity::Fail)
}

/// The last line: how many failed and warned, and what that means for `asa run`.
pub fn summary(checks: &[Check]) -> String {
    let count = |s: Severity| checks.iter().filter(|c| c.severity == s).count();
    let (fail, warn) = (count(Severity::Fail), count(Severity::Warn));
    if fail > 0 {
        format!(
            "{fail} FAIL, {warn} WARN: `asa run` cannot run here until the FAIL lines are fixed"
        )
    } else if warn > 0 {
        format!("{warn} WARN: `asa run` can run here, with the parts the WARN lines name off")
    } else {
        "`asa run` can run here".to_owned()
    }
}

/// The JSON report: `{"ok": bool, "checks": [{"name", "severity", "detail"}]}`.
pub fn to_json(checks: &[Check]) -> serde_json::Value {
    serde_json::json!({
        "ok": !any_failed(checks),
        "checks": checks,
    })
}

/// `asa doctor`.
pub fn run(args: &DoctorArgs, catalogue: &Catalogue) -> Result<ExitCode> {
    // The report is the checks; the loaders' own progress messages would only repeat them.
    if std::env::var_os("RUST_LOG").is_none() {
        log::set_max_level(log::LevelFilter::Error);
    }
    let checks = all_checks(&Machine::system(), catalogue, &args.run_args());
    if args.json {
        println!("{}", serde_json::to_string_pretty(&to_json(&checks))?);
    } else {
        for check in &checks {
            println!("{}", check.line());
        }
        println!("{}", summary(&checks));
    }
    Ok(if any_failed(&checks) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use asa_experts::Origin;

    use super::*;

    /// A fake machine: `files` (absolute path → content) under a temporary root.
    fn machine(files: &[(&str, &[u8])]) -> (tempfile::TempDir, Machine) {
        let dir = tempfile::tempdir().unwrap();
        for (path, content) in files {
            let file = dir.path().join(path.trim_start_matches('/'));
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, content).unwrap();
        }
        let machine = Machine::at(dir.path());
        (dir, machine)
    }

    fn gzip(text: &str) -> Vec<u8> {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(text.as_bytes()).unwrap();
        gz.finish().unwrap()
    }

    const ROOT_STATUS: &str = "Name:\tasa\nUid:\t0\t0\t0\t0\nCapEff:\t000001ffffffffff\n";

    #[test]
    fn a_kernel_without_sched_ext_fails_with_the_kernel_option_to_build() {
        let (_dir, m) = machine(&[("/proc/sys/kernel/osrelease", b"6.18.4\n")]);
        let check = sched_ext_check(&m);
        assert_eq!(check.severity, Severity::Fail);
        assert!(
            check.detail.contains("no /sys/kernel/sched_ext"),
            "{check:?}"
        );
        assert!(
            check.detail.contains("CONFIG_SCHED_CLASS_EXT=y"),
            "{check:?}"
        );
        assert!(
            check
                .line()
                .starts_with("FAIL sched_ext: the kernel has no"),
            "{}",
            check.line()
        );
    }

    #[test]
    fn a_kernel_with_sched_ext_is_ok_and_says_its_state() {
        let (_dir, m) = machine(&[("/sys/kernel/sched_ext/state", b"disabled\n")]);
        assert_eq!(
            sched_ext_check(&m).line(),
            "ok   sched_ext: /sys/kernel/sched_ext (state disabled)"
        );
    }

    #[test]
    fn the_kernel_config_is_read_from_proc_config_gz_then_boot() {
        let (_dir, m) = machine(&[(
            "/proc/config.gz",
            &gzip("CONFIG_BPF=y\n# CONFIG_SCHED_CLASS_EXT is not set\n"),
        )]);
        let check = kernel_config_check(&m);
        assert_eq!(check.severity, Severity::Fail);
        assert!(
            check
                .detail
                .starts_with("/proc/config.gz has CONFIG_SCHED_CLASS_EXT not set"),
            "{check:?}"
        );
        let (_dir, m) = machine(&[
            ("/proc/sys/kernel/osrelease", b"6.12.9-amd64\n"),
            ("/boot/config-6.12.9-amd64", b"CONFIG_SCHED_CLASS_EXT=y\n"),
        ]);
        assert_eq!(
            kernel_config_check(&m).line(),
            "ok   kernel config: CONFIG_SCHED_CLASS_EXT=y (/boot/config-6.12.9-amd64)"
        );
        let (_dir, m) = machine(&[("/proc/sys/kernel/osrelease", b"6.12.9\n")]);
        let check = kernel_config_check(&m);
        assert_eq!(
            check.severity,
            Severity::Info,
            "unreadable is not a failure"
        );
        assert!(check.detail.contains("/boot/config-6.12.9"), "{check:?}");
    }

    #[test]
    fn config_values_are_read_by_exact_option_name() {
        let config = "CONFIG_SCHED_CLASS_EXT_X=y\nCONFIG_SCHED_CLASS_EXT=m\n";
        assert_eq!(config_value(config, "CONFIG_SCHED_CLASS_EXT"), Some("m"));
        assert_eq!(config_value("# CONFIG_A is not set\n", "CONFIG_A"), None);
    }

    #[test]
    fn missing_btf_fails() {
        let (_dir, m) = machine(&[]);
        let check = btf_check(&m);
        assert_eq!(check.severity, Severity::Fail);
        assert!(
            check.detail.contains("CONFIG_DEBUG_INFO_BTF=y"),
            "{check:?}"
        );
        let (_dir, m) = machine(&[("/sys/kernel/btf/vmlinux", &[0u8; 4096])]);
        assert_eq!(
            btf_check(&m).line(),
            "ok   BTF: /sys/kernel/btf/vmlinux (4 KiB)"
        );
    }

    #[test]
    fn root_with_the_capabilities_passes_and_anyone_else_fails_with_the_fix() {
        assert_eq!(privileges_check(ROOT_STATUS).severity, Severity::Ok);
        // Root in a container that dropped CAP_BPF (bit 39) and CAP_PERFMON (bit 38).
        let dropped = ROOT_STATUS.replace("000001ffffffffff", "0000003fffffffff");
        let check = privileges_check(&dropped);
        assert_eq!(check.severity, Severity::Fail);
        assert!(
            check.detail.contains("without CAP_PERFMON, CAP_BPF"),
            "{check:?}"
        );
        let user = "Uid:\t1000\t1000\t1000\t1000\nCapEff:\t0000000000000000\n";
        let check = privileges_check(user);
        assert_eq!(check.severity, Severity::Fail);
        assert!(
            check.detail.contains("uid 1000") && check.detail.contains("sudo"),
            "{check:?}"
        );
        // The effective uid counts (setuid: real 1000, effective 0).
        let setuid = ROOT_STATUS.replace("Uid:\t0\t0", "Uid:\t1000\t0");
        assert_eq!(privileges_check(&setuid).severity, Severity::Ok);
        let capable = "Uid:\t1000\t1000\t1000\t1000\nCapEff:\t000000c000200000\n";
        let check = privileges_check(capable);
        assert_eq!(
            check.severity,
            Severity::Fail,
            "asa run starts only as root"
        );
        assert!(check.detail.contains("only as root"), "{check:?}");
    }

    const MOUNTINFO: &str = "\
22 1 0:21 / /sys rw,nosuid - sysfs sysfs rw
30 22 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate
31 22 0:27 / /sys/fs/bpf rw - bpf bpf rw,mode=700
";

    #[test]
    fn bpffs_and_cgroup2_are_found_in_mountinfo() {
        let m = mounts(MOUNTINFO);
        assert_eq!(bpffs_check(&m).severity, Severity::Ok);
        assert_eq!(cgroup2_check(&m).line(), "ok   cgroup v2: /sys/fs/cgroup");
        let hybrid = mounts(
            "40 22 0:30 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n\
             41 22 0:31 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n",
        );
        assert!(cgroup2_check(&hybrid)
            .detail
            .contains("/sys/fs/cgroup/unified"));
    }

    #[test]
    fn no_bpffs_only_warns_that_per_application_mode_is_off() {
        let m = mounts(&MOUNTINFO.replace(" - bpf bpf", " - tmpfs tmpfs"));
        let check = bpffs_check(&m);
        assert_eq!(check.severity, Severity::Warn);
        assert!(
            check.detail.contains("per-application mode is off")
                && check.detail.contains("mount -t bpf bpf /sys/fs/bpf"),
            "{check:?}"
        );
        let check = cgroup2_check(&mounts(""));
        assert_eq!(check.severity, Severity::Warn);
    }

    #[test]
    fn a_scheduler_another_tool_attached_warns_and_asas_own_is_ok() {
        let catalogue = Catalogue::builtin();
        let (_dir, m) = machine(&[("/sys/kernel/sched_ext/state", b"disabled\n")]);
        assert_eq!(
            scheduler_check(&m, &catalogue).unwrap().severity,
            Severity::Ok
        );
        // scx_bpfland started by scx_loader: no ASA process holds the lock.
        let attached: [(&str, &[u8]); 2] = [
            ("/sys/kernel/sched_ext/state", b"enabled\n"),
            ("/sys/kernel/sched_ext/root/ops", b"bpfland_1.1.4_g\n"),
        ];
        let (_dir, m) = machine(&attached);
        let check = scheduler_check(&m, &catalogue).unwrap();
        assert_eq!(check.severity, Severity::Warn);
        assert!(
            check.detail.contains("bpfland_1.1.4_g (enabled)")
                && check.detail.contains("--take-over"),
            "{check:?}"
        );
        // The same, run by asa (pid 42 holds the supervisor lock).
        let mut files = attached.to_vec();
        files.push((CONTROL_LOCK, b"42\n"));
        files.push(("/proc/42/comm", b"asa\n"));
        let (_dir, m) = machine(&files);
        let check = scheduler_check(&m, &catalogue).unwrap();
        assert_eq!(check.severity, Severity::Ok, "{check:?}");
        assert!(check
            .detail
            .contains("expert bpfland of the ASA process 42"));
        // A stale lock (its pid now another program) is no ASA process.
        files.pop();
        files.push(("/proc/42/comm", b"bash\n"));
        let (_dir, m) = machine(&files);
        assert_eq!(
            scheduler_check(&m, &catalogue).unwrap().severity,
            Severity::Warn
        );
        let (_dir, m) = machine(&[]);
        assert!(
            scheduler_check(&m, &catalogue).is_none(),
            "no sched_ext: no line"
        );
    }

    /// `path`, found on `$PATH`.
    fn on_path(path: impl Into<PathBuf>) -> Result<Located> {
        Ok(Located {
            path: path.into(),
            origin: Origin::Path,
        })
    }

    /// The catalogue's version, reported.
    fn same_version(expert: &Expert, _: &Path) -> Result<VersionCheck> {
        Ok(VersionCheck::compare(
            expert.version.as_deref(),
            expert.version.as_deref(),
        ))
    }

    #[test]
    fn a_missing_expert_warns_and_none_usable_fails() {
        let catalogue = Catalogue::builtin();
        let all = expert_checks(
            &catalogue,
            |e| on_path(format!("/x/{}", e.binary_name())),
            same_version,
        );
        assert!(all.iter().all(|c| c.severity <= Severity::Info), "{all:?}");
        assert!(all
            .iter()
            .any(|c| c.line() == "ok   expert bpfland: /x/scx_bpfland 1.1.4 (from PATH)"));
        let one_missing = expert_checks(
            &catalogue,
            |e| match e.name.as_str() {
                "lavd" => {
                    anyhow::bail!("expert lavd: executable \"scx_lavd\" not found; install it")
                }
                _ => on_path("/x"),
            },
            same_version,
        );
        let lavd = one_missing
            .iter()
            .find(|c| c.name == "expert lavd")
            .unwrap();
        assert_eq!(lavd.severity, Severity::Warn);
        assert!(lavd.detail.contains("install it"), "{lavd:?}");
        assert!(
            lavd.detail.starts_with("executable"),
            "named once: {lavd:?}"
        );
        assert!(one_missing.iter().all(|c| c.severity != Severity::Fail));
        let broken = expert_checks(
            &catalogue,
            |_| on_path("/x/scx"),
            |_, _| {
                anyhow::bail!("`/x/scx --version` failed: libbpf.so.1: cannot open shared object")
            },
        );
        let fail = broken
            .iter()
            .find(|c| c.severity == Severity::Fail)
            .unwrap();
        assert_eq!(fail.name, "experts");
        assert!(fail.detail.contains("lab/setup.sh"), "{fail:?}");
        assert!(broken
            .iter()
            .any(|c| c.detail.contains("/x/scx does not run") && c.detail.contains("libbpf")));
    }

    #[test]
    fn an_expert_of_another_version_warns_naming_both_and_counts_as_usable() {
        let catalogue = Catalogue::builtin();
        let checks = expert_checks(
            &catalogue,
            |e| on_path(format!("/usr/bin/{}", e.binary_name())),
            |e, _| {
                Ok(VersionCheck::compare(
                    e.version.as_deref(),
                    e.version.as_ref().map(|_| "1.0.14"),
                ))
            },
        );
        let bpfland = checks.iter().find(|c| c.name == "expert bpfland").unwrap();
        assert_eq!(bpfland.severity, Severity::Warn);
        for part in ["/usr/bin/scx_bpfland", "1.0.14", "1.1.4"] {
            assert!(bpfland.detail.contains(part), "{part}: {bpfland:?}");
        }
        assert!(
            bpfland
                .line()
                .starts_with("WARN expert bpfland: /usr/bin/scx_bpfland is version"),
            "the expert named once: {}",
            bpfland.line()
        );
        assert!(!any_failed(&checks), "{checks:?}");
    }

    #[test]
    fn a_mapping_file_that_does_not_parse_fails_with_its_place() {
        let dir = tempfile::tempdir().unwrap();
        let mapping = dir.path().join("mapping.toml");
        std::fs::write(
            &mapping,
            "schema = \"asa.mapping\"\nversion = 1\nclass = ]\n",
        )
        .unwrap();
        let args = RunArgs {
            model: Some(dir.path().join("no-model.onnx")),
            mapping: Some(mapping.clone()),
            ..RunArgs::default()
        };
        let checks = decision_checks(&args, &Catalogue::builtin());
        let check = checks.iter().find(|c| c.name == "mapping").unwrap();
        assert_eq!(check.severity, Severity::Fail, "{checks:?}");
        assert!(
            check.detail.contains(&mapping.display().to_string())
                && check.detail.contains("at line 3, column"),
            "{check:?}"
        );
        assert!(any_failed(&checks));
    }

    #[test]
    fn a_missing_model_fails() {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("none.onnx");
        let args = RunArgs {
            model: Some(model.clone()),
            ..RunArgs::default()
        };
        let checks = decision_checks(&args, &Catalogue::builtin());
        let check = checks.iter().find(|c| c.name == "model").unwrap();
        assert_ne!(check.severity, Severity::Ok, "{checks:?}");
        assert!(
            check.detail.contains(&model.display().to_string()),
            "{check:?}"
        );
        assert!(any_failed(&checks));
    }

    #[test]
    fn a_config_file_that_does_not_load_fails_as_settings() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("asa.toml");
        let args = RunArgs {
            config: Some(config.clone()),
            ..RunArgs::default()
        };
        let checks = decision_checks(&args, &Catalogue::builtin());
        assert_eq!(checks.len(), 1, "{checks:?}");
        assert_eq!(checks[0].severity, Severity::Fail);
        assert!(checks[0].detail.contains("asa.toml"), "{checks:?}");
    }

    /// The scenarios' tools concern `asa scenario run` and `asa calibrate`, not `asa run`.
    #[test]
    fn missing_scenario_tools_are_information_only() {
        let checks = scenario_checks();
        assert!(!checks.is_empty());
        assert!(
            checks.iter().all(|c| c.severity <= Severity::Info),
            "{checks:?}"
        );
    }

    #[test]
    fn a_detail_of_several_lines_is_made_one() {
        let check = Check::fail(
            "config",
            "parsing the config file a.toml: TOML parse error at line 1, column 1\n  |\n1 | a = 1\n",
        );
        assert_eq!(
            check.line(),
            "FAIL config: parsing the config file a.toml: TOML parse error at line 1, column 1 | 1 | a = 1"
        );
    }

    #[test]
    fn fails_set_the_exit_status_and_warnings_do_not() {
        let warn = vec![Check::ok("a", "x"), Check::warn("b", "y")];
        assert!(!any_failed(&warn));
        assert!(summary(&warn).starts_with("1 WARN: `asa run` can run here"));
        let fail = vec![Check::fail("c", "z"), Check::warn("b", "y")];
        assert!(any_failed(&fail));
        assert!(summary(&fail).starts_with("1 FAIL, 1 WARN"));
        assert_eq!(to_json(&fail)["ok"], false);
        assert_eq!(to_json(&warn)["checks"][1]["severity"], "warn");
        assert_eq!(to_json(&warn)["checks"][1]["name"], "b");
    }
}
