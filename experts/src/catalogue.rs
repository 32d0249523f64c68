//! The expert catalogue: a versioned TOML file naming every scheduler ASA may switch to.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Schema name every catalogue file must declare.
pub const CATALOGUE_SCHEMA: &str = "asa.experts";
/// The catalogue schema version this build understands.
pub const CATALOGUE_VERSION: u32 = 1;
/// Name of the entry that stands for the kernel's default scheduler.
pub const EEVDF: &str = "eevdf";

/// The catalogue shipped with the repository (`experts/catalogue.toml`), compiled in.
pub const BUILTIN_CATALOGUE: &str = include_str!("../catalogue.toml");

/// Errors found while reading or validating a catalogue.
#[derive(Debug, thiserror::Error)]
pub enum CatalogueError {
    #[error("cannot read expert catalogue {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("expert catalogue {origin} is not valid TOML for schema {CATALOGUE_SCHEMA} v{CATALOGUE_VERSION}: {message}")]
    Parse { origin: String, message: String },
    #[error("expert catalogue {origin}: {message}")]
    Invalid { origin: String, message: String },
}

/// How an expert is provided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExpertKind {
    /// The kernel's default scheduler: no BPF scheduler attached.
    KernelDefault,
    /// A sched_ext scheduler from crates.io, installed at an exact version.
    ScxCrate,
    /// A sched_ext scheduler built from this workspace.
    Workspace,
}

/// One catalogue entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expert {
    /// Short name used on the command line (`asa pin <name>`).
    pub name: String,
    /// How the expert is provided.
    pub kind: ExpertKind,
    /// crates.io crate name (kind `scx-crate`).
    #[serde(rename = "crate", default)]
    pub crate_name: Option<String>,
    /// Exact crate version (kind `scx-crate`).
    #[serde(default)]
    pub version: Option<String>,
    /// Workspace package name (kind `workspace`).
    #[serde(default)]
    pub package: Option<String>,
    /// Executable name.
    #[serde(default)]
    pub binary: Option<String>,
    /// Prefix of `/sys/kernel/sched_ext/root/ops` while this expert is attached.
    #[serde(default)]
    pub ops_prefix: Option<String>,
    /// Extra command-line arguments passed to the expert.
    #[serde(default)]
    pub args: Vec<String>,
    /// Seconds this expert may take to attach, when it needs longer (or shorter) than the
    /// supervisor's default.
    #[serde(default)]
    pub enable_timeout_s: Option<u64>,
    /// Milliseconds after SIGINT before this expert gets SIGKILL, for experts that act on
    /// SIGINT only once a second (their stop is most of a switch to a hot standby); none: only
    /// after the supervisor's stop timeout. `--stop-grace-ms` overrides it for every expert.
    #[serde(default)]
    pub stop_grace_ms: Option<u64>,
    /// False for an entry that is declared but cannot be used yet.
    #[serde(default = "default_true")]
    pub available: bool,
    /// A JSON file the expert keeps its statistics in (rewritten while it runs; an object
    /// with a `schema` key); `asa status` shows it while this expert is active.
    #[serde(default)]
    pub stats_file: Option<PathBuf>,
    /// True for an expert that schedules each application by ASA's layer plan (scx_layered):
    /// its arguments end with `--task-hint-map <map>` and the plan's layer configuration — the
    /// default plan (`layers/default.toml`) from the catalogue file, another one through
    /// [`Catalogue::with_layer_plan`].
    #[serde(default)]
    pub layer_plan: bool,
    /// A `layer_plan` expert's own policies for some layers (class, or `other`, → policy),
    /// in place of the plan's: a variant of the plan for comparing policies (`asa scenario
    /// run --oracle-hints`), the classes and their hints unchanged.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub layer_policies: BTreeMap<String, asa_layers::LayerPolicy>,
    /// Whether the arguments end with a plan's three (never read from a file).
    #[serde(skip)]
    layer_plan_given: bool,
    /// One line for humans.
    #[serde(default)]
    pub description: String,
}

fn default_true() -> bool {
    true
}

impl Expert {
    /// True for the kernel default (EEVDF) entry.
    pub fn is_kernel_default(&self) -> bool {
        self.kind == ExpertKind::KernelDefault
    }

    /// True when `ops` (the content of `root/ops`) belongs to this expert.
    pub fn owns_ops(&self, ops: &str) -> bool {
        match &self.ops_prefix {
            Some(prefix) => ops.starts_with(prefix.as_str()),
            None => false,
        }
    }

    /// The executable name; empty for EEVDF.
    pub fn binary_name(&self) -> &str {
        self.binary.as_deref().unwrap_or("")
    }

    /// Directory under the expert cache where `cargo install --root` puts this crate.
    pub fn install_root_name(&self) -> Option<String> {
        match (&self.crate_name, &self.version) {
            (Some(c), Some(v)) => Some(format!("{c}-{v}")),
            _ => None,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogueFile {
    schema: String,
    version: u32,
    #[serde(rename = "expert")]
    experts: Vec<Expert>,
}

/// A validated expert catalogue.
#[derive(Debug, Clone)]
pub struct Catalogue {
    experts: Vec<Expert>,
}

impl Catalogue {
    /// The catalogue compiled into the binary.
    pub fn builtin() -> Self {
        Self::parse(BUILTIN_CATALOGUE, "built-in catalogue").expect("built-in catalogue is valid")
    }

    /// Read and validate a catalogue file.
    pub fn load(path: &Path) -> Result<Self, CatalogueError> {
        let text = std::fs::read_to_string(path).map_err(|source| CatalogueError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parse and validate catalogue text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, CatalogueError> {
        let file: CatalogueFile = toml::from_str(text).map_err(|e| CatalogueError::Parse {
            origin: origin.to_owned(),
            message: e.to_string(),
        })?;
        let invalid = |message: String| CatalogueError::Invalid {
            origin: origin.to_owned(),
            message,
        };
        if file.schema != CATALOGUE_SCHEMA {
            return Err(invalid(format!(
                "schema is {:?}, expected {CATALOGUE_SCHEMA:?}",
                file.schema
            )));
        }
        if file.version != CATALOGUE_VERSION {
            return Err(invalid(format!(
                "version {} is not supported (this build reads version {CATALOGUE_VERSION})",
                file.version
            )));
        }
        let mut names = BTreeSet::new();
        for e in &file.experts {
            if e.name.is_empty()
                || !e
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(invalid(format!(
                    "expert name {:?} must be [A-Za-z0-9_-]+",
                    e.name
                )));
            }
            if !names.insert(e.name.clone()) {
                return Err(invalid(format!("expert {:?} is declared twice", e.name)));
            }
            if !e.layer_policies.is_empty() && !e.layer_plan {
                return Err(invalid(format!(
                    "expert {:?}: layer_policies need layer_plan = true",
                    e.name
                )));
            }
            if let Some(path) = &e.stats_file {
                if !path.is_absolute() {
                    return Err(invalid(format!(
                        "expert {:?}: stats_file {} must be an absolute path",
                        e.name,
                        path.display()
                    )));
                }
            }
            let need = |field: &str, value: &Option<String>| match value {
                Some(v) if !v.is_empty() => Ok(()),
                _ => Err(invalid(format!(
                    "expert {:?} needs field `{field}`",
                    e.name
                ))),
            };
            match e.kind {
                ExpertKind::KernelDefault => {
                    if e.binary.is_some() || e.ops_prefix.is_some() || e.stats_file.is_some() {
                        return Err(invalid(format!(
                            "expert {:?} is the kernel default and takes no binary, ops_prefix or stats_file",
                            e.name
                        )));
                    }
                }
                ExpertKind::ScxCrate => {
                    need("crate", &e.crate_name)?;
                    need("version", &e.version)?;
                    need("binary", &e.binary)?;
                    need("ops_prefix", &e.ops_prefix)?;
                }
                ExpertKind::Workspace => {
                    need("package", &e.package)?;
                    need("binary", &e.binary)?;
                    need("ops_prefix", &e.ops_prefix)?;
                }
            }
        }
        let defaults = file
            .experts
            .iter()
            .filter(|e| e.is_kernel_default())
            .count();
        if defaults != 1
            || !file
                .experts
                .iter()
                .any(|e| e.name == EEVDF && e.is_kernel_default())
        {
            return Err(invalid(format!(
                "exactly one entry must be the kernel default, named {EEVDF:?}"
            )));
        }
        Self {
            experts: file.experts,
        }
        .with_layer_plan(
            Path::new(asa_layers::DEFAULT_HINT_MAP),
            &asa_layers::default_plan(),
        )
        .map_err(invalid)
    }

    /// All entries, in file order.
    pub fn experts(&self) -> &[Expert] {
        &self.experts
    }

    /// The sched_ext schedulers that can be run: every entry but the kernel default and the
    /// ones declared `available = false`, in file order.
    pub fn available_schedulers(&self) -> impl Iterator<Item = &Expert> {
        self.experts
            .iter()
            .filter(|e| e.available && !e.is_kernel_default())
    }

    /// Look an expert up by name.
    pub fn get(&self, name: &str) -> Option<&Expert> {
        self.experts.iter().find(|e| e.name == name)
    }

    /// Look an expert up by name, with an error that lists the known names.
    pub fn require(&self, name: &str) -> anyhow::Result<&Expert> {
        self.get(name).ok_or_else(|| {
            anyhow::anyhow!(
                "unknown expert {name:?}; known experts: {}",
                self.names().join(", ")
            )
        })
    }

    /// Names of all entries.
    pub fn names(&self) -> Vec<&str> {
        self.experts.iter().map(|e| e.name.as_str()).collect()
    }

    /// The expert whose `ops_prefix` matches a live `root/ops` value.
    pub fn by_ops(&self, ops: &str) -> Option<&Expert> {
        self.experts.iter().find(|e| e.owns_ops(ops))
    }

    /// The catalogue with `plan` given to every `layer_plan` expert (with the expert's own
    /// `layer_policies` over it): its arguments end with `--task-hint-map <hint_map>` and the
    /// layer configuration (scx_layered reads JSON given inline as its last argument), in place
    /// of the plan it had. An expert's policy for a class the plan lacks is an error naming
    /// both.
    pub fn with_layer_plan(
        mut self,
        hint_map: &Path,
        plan: &asa_layers::LayerPlan,
    ) -> Result<Self, String> {
        for e in self.experts.iter_mut().filter(|e| e.layer_plan) {
            let own = plan
                .with_policies(&e.layer_policies)
                .map_err(|why| format!("expert {:?}: layer_policies: {why}", e.name))?;
            if e.layer_plan_given {
                e.args.truncate(e.args.len() - 3);
            }
            e.args.extend([
                "--task-hint-map".to_string(),
                hint_map.display().to_string(),
                own.to_scx_layered_config().to_string(),
            ]);
            e.layer_plan_given = true;
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_layer_plan_expert_has_the_default_plan_until_given_another() {
        let c = Catalogue::builtin();
        let layered = c.get("layered").expect("layered in the catalogue");
        assert!(layered.layer_plan);
        let n = layered.args.len();
        assert_eq!(
            layered.args[n - 3..n - 1],
            ["--task-hint-map", asa_layers::DEFAULT_HINT_MAP]
        );
        let default: serde_json::Value = serde_json::from_str(&layered.args[n - 1]).unwrap();
        assert_eq!(default, asa_layers::default_plan().to_scx_layered_config());
        let mut other = asa_layers::default_plan();
        other.other.slice_us = 7000;
        let c = c
            .with_layer_plan(Path::new("/sys/fs/bpf/x"), &asa_layers::default_plan())
            .unwrap()
            .with_layer_plan(Path::new("/sys/fs/bpf/y"), &other)
            .unwrap();
        let layered = c.get("layered").unwrap();
        assert_eq!(layered.args.len(), n);
        assert_eq!(
            layered.args[n - 3..],
            [
                "--task-hint-map",
                "/sys/fs/bpf/y",
                &other.to_scx_layered_config().to_string()
            ]
        );
        assert!(c.get("cosmos").unwrap().args.is_empty());
        let skipped = "schema = \"asa.experts\"\nversion = 1\n[[expert]]\nname = \"eevdf\"\n\
                       kind = \"kernel-default\"\n[[expert]]\nname = \"l\"\nkind = \"scx-crate\"\n\
                       crate = \"scx_l\"\nversion = \"1\"\nbinary = \"scx_l\"\nops_prefix = \"l\"\n\
                       layer_plan_given = true\n";
        assert!(
            Catalogue::parse(skipped, "t").is_err(),
            "layer_plan_given is not a file key"
        );
    }

    #[test]
    fn builtin_catalogue_is_valid_and_has_the_issue_experts() {
        let c = Catalogue::builtin();
        for name in ["eevdf", "bpfland", "lavd", "rusty", "gru"] {
            assert!(c.get(name).is_some(), "{name} missing");
        }
        assert!(c.get("eevdf").unwrap().is_kernel_default());
        assert_eq!(
            c.by_ops("bpfland_1.1.4_x86_64_unknown_linux_gnu")
                .unwrap()
                .name,
            "bpfland"
        );
        assert!(c.by_ops("somebody_else").is_none());
        assert_eq!(
            c.get("gru").unwrap().stats_file.as_deref(),
            Some(Path::new("/run/scx_gru/stats.json"))
        );
        assert!(c.get("bpfland").unwrap().stats_file.is_none());
        assert_eq!(
            c.get("lavd").unwrap().install_root_name().as_deref(),
            Some("scx_lavd-1.1.4")
        );
    }

    /// The experiment catalogue of expert variants (`experts/variants.toml`): it loads; the
    /// entries named like built-in ones are those entries unchanged (the run's anchors mean
    /// what they mean in the committed runs); every other entry runs a built-in binary with
    /// arguments of its own.
    #[test]
    fn variants_catalogue_loads_and_runs_builtin_binaries_with_other_arguments() {
        let variants = Catalogue::parse(include_str!("../variants.toml"), "variants.toml")
            .expect("experts/variants.toml is valid");
        let builtin = Catalogue::builtin();
        let mut seen_args = BTreeSet::new();
        let mut new_entries = 0;
        for e in variants.experts() {
            if let Some(base) = builtin.get(&e.name) {
                assert_eq!(e, base, "{} differs from the built-in entry", e.name);
                continue;
            }
            new_entries += 1;
            assert!(!e.args.is_empty(), "variant {} has no arguments", e.name);
            assert!(
                seen_args.insert((e.binary.clone(), e.args.clone())),
                "variant {} repeats another's binary and arguments",
                e.name
            );
            let base = builtin
                .experts()
                .iter()
                .find(|b| b.binary == e.binary && b.kind == e.kind)
                .unwrap_or_else(|| panic!("variant {} runs no built-in binary", e.name));
            assert_eq!(
                (&e.crate_name, &e.version, &e.ops_prefix, e.stop_grace_ms),
                (
                    &base.crate_name,
                    &base.version,
                    &base.ops_prefix,
                    base.stop_grace_ms
                ),
                "variant {} must run {}'s binary as {} does",
                e.name,
                base.name,
                base.name
            );
            assert!(
                base.args.is_empty(),
                "{} has arguments of its own",
                base.name
            );
        }
        assert!(new_entries > 0, "no variant in variants.toml");
        for anchor in ["eevdf", "cosmos", "flash"] {
            assert!(variants.get(anchor).is_some(), "{anchor} missing");
        }
    }

    /// The experiment catalogue of layer-plan variants (`experts/layer-variants.toml`): it
    /// loads; `eevdf`, `cosmos` and `layered` are the built-in entries unchanged; every other
    /// entry is `layered` with policies or scx_layered options of its own, its plan the default
    /// plan's classes and hints.
    #[test]
    fn layer_variants_differ_from_layered_in_their_policies_or_options_only() {
        let variants = Catalogue::parse(
            include_str!("../layer-variants.toml"),
            "layer-variants.toml",
        )
        .expect("experts/layer-variants.toml is valid");
        let builtin = Catalogue::builtin();
        let layered = builtin.get("layered").unwrap();
        let default = asa_layers::default_plan();
        let mut plans = BTreeSet::new();
        for e in variants.experts() {
            if let Some(base) = builtin.get(&e.name) {
                assert_eq!(e, base, "{} differs from the built-in entry", e.name);
                continue;
            }
            assert!(
                e.layer_plan && (!e.layer_policies.is_empty() || e.args.len() > layered.args.len()),
                "{} needs policies or options of its own",
                e.name
            );
            assert_eq!(
                (&e.crate_name, &e.version, &e.binary, &e.ops_prefix),
                (
                    &layered.crate_name,
                    &layered.version,
                    &layered.binary,
                    &layered.ops_prefix
                ),
                "variant {} must run layered's binary",
                e.name
            );
            let plan = default.with_policies(&e.layer_policies).unwrap();
            assert_eq!(
                e.args.last().unwrap(),
                &plan.to_scx_layered_config().to_string()
            );
            assert!(
                plans.insert(e.args.join(" ")),
                "{} repeats another variant's options and plan",
                e.name
            );
        }
        assert!(plans.len() >= 2, "at least two variants");
        for anchor in ["eevdf", "cosmos", "layered"] {
            assert!(variants.get(anchor).is_some(), "{anchor} missing");
        }
    }

    #[test]
    fn layer_policies_need_a_layer_plan_expert_and_a_class_of_the_plan() {
        let entry = |extra: &str| {
            format!(
                "schema = \"asa.experts\"\nversion = 1\n[[expert]]\nname = \"eevdf\"\n\
                 kind = \"kernel-default\"\n[[expert]]\nname = \"l\"\nkind = \"scx-crate\"\n\
                 crate = \"scx_layered\"\nversion = \"1\"\nbinary = \"scx_layered\"\n\
                 ops_prefix = \"layered\"\n{extra}"
            )
        };
        let policy =
            "[expert.layer_policies]\nvideo = { kind = \"open\", slice_us = 5000, weight = 100 }\n";
        let unknown = Catalogue::parse(&entry(&format!("layer_plan = true\n{policy}")), "t")
            .unwrap_err()
            .to_string();
        assert!(
            unknown.contains("expert \"l\": layer_policies: no layer for class \"video\""),
            "{unknown}"
        );
        let plain = Catalogue::parse(&entry(policy), "t")
            .unwrap_err()
            .to_string();
        assert!(
            plain.contains("layer_policies need layer_plan = true"),
            "{plain}"
        );
    }

    #[test]
    fn unknown_expert_error_lists_known_names() {
        let err = Catalogue::builtin().require("cfs").unwrap_err().to_string();
        assert!(err.contains("unknown expert \"cfs\""), "{err}");
        assert!(err.contains("bpfland"), "{err}");
    }

    fn parse(text: &str) -> Result<Catalogue, CatalogueError> {
        Catalogue::parse(text, "test")
    }

    const EEVDF_ENTRY: &str = "[[expert]]\nname = \"eevdf\"\nkind = \"kernel-default\"\n";

    #[test]
    fn available_schedulers_leave_out_the_kernel_default_and_unavailable_entries() {
        let builtin = Catalogue::builtin();
        let names: Vec<&str> = builtin
            .available_schedulers()
            .map(|e| e.name.as_str())
            .collect();
        assert_eq!(
            names,
            ["bpfland", "lavd", "rusty", "p2dq", "flash", "cosmos", "gru", "layered"]
        );
        let c = parse(&format!(
            "schema = \"asa.experts\"\nversion = 1\n{EEVDF_ENTRY}\
             [[expert]]\nname = \"later\"\nkind = \"scx-crate\"\ncrate = \"scx_later\"\n\
             version = \"1.0.0\"\nbinary = \"scx_later\"\nops_prefix = \"later\"\navailable = false\n"
        ))
        .unwrap();
        assert_eq!(c.available_schedulers().count(), 0);
    }

    #[test]
    fn rejects_wrong_schema_version_and_fields() {
        let e = parse(&format!(
            "schema = \"asa.experts\"\nversion = 2\n{EEVDF_ENTRY}"
        ))
        .unwrap_err();
        assert!(e.to_string().contains("version 2 is not supported"), "{e}");
        let e = parse(&format!("schema = \"other\"\nversion = 1\n{EEVDF_ENTRY}")).unwrap_err();
        assert!(e.to_string().contains("schema is \"other\""), "{e}");
        let e = parse(&format!(
            "schema = \"asa.experts\"\nversion = 1\n{EEVDF_ENTRY}colour = 1\n"
        ))
        .unwrap_err();
        assert!(e.to_string().contains("colour"), "{e}");
    }

    #[test]
    fn rejects_incomplete_or_duplicate_entries() {
        let head = format!("schema = \"asa.experts\"\nversion = 1\n{EEVDF_ENTRY}");
        let e = parse(&format!(
            "{head}[[expert]]\nname = \"x\"\nkind = \"scx-crate\"\ncrate = \"scx_x\"\nbinary = \"scx_x\"\nops_prefix = \"x\"\n"
        ))
        .unwrap_err();
        assert!(e.to_string().contains("needs field `version`"), "{e}");
        let e = parse(&format!("{head}{EEVDF_ENTRY}")).unwrap_err();
        assert!(e.to_string().contains("declared twice"), "{e}");
        let e = parse(&format!(
            "{head}[[expert]]\nname = \"y\"\nkind = \"workspace\"\npackage = \"p\"\nbinary = \"scx_y\"\nops_prefix = \"y\"\nstats_file = \"stats.json\"\n"
        ))
        .unwrap_err();
        assert!(e.to_string().contains("must be an absolute path"), "{e}");
        let e = parse("schema = \"asa.experts\"\nversion = 1\nexpert = []\n").unwrap_err();
        assert!(e.to_string().contains("kernel default"), "{e}");
    }
}
