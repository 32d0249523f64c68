//! `asa run`'s settings: the command line ([`RunArgs`]) over the config file ([`ConfigFile`],
//! TOML: `/etc/asa/asa.toml` when it exists, or `--config`; agent/dist/asa.toml is the
//! commented example) over the defaults, resolved into [`RunSettings`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use crate::decision::app_pins::DEFAULT_PINS_FILE;
use crate::decision::engine::{default_model_path, EngineSources, DEFAULT_MODEL_PATHS};
use crate::decision::policy::PolicyConfig;
use crate::decision::quarantine::QuarantineConfig;
use crate::decision::voting::VotingConfig;

/// The config file read when it exists and `--config` is not given.
pub const DEFAULT_CONFIG: &str = "/etc/asa/asa.toml";
/// Default tick length.
pub const DEFAULT_INTERVAL_MS: u64 = 1000;
/// Default nice value of the decision thread: the workload the agent watches goes first.
pub const DEFAULT_DECISION_NICE: i32 = 19;
/// Default tick length while the table leaves nothing to decide, and longest time between
/// full ticks while the vote is steady ([`RunSettings::settled_interval`]).
pub const DEFAULT_SETTLED_INTERVAL_MS: u64 = 10_000;
/// Shortest tick (perception's process scan runs at most ~1/s anyway).
pub const MIN_INTERVAL_MS: u64 = 100;
/// `asa run` options. Each overrides the config file's setting of the same name.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RunArgs {
    /// Config file (TOML). Default: /etc/asa/asa.toml when it exists.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Classifier model (ONNX, exported by classifier/). Default: $ASA_MODEL, else
    /// /etc/asa/classifier.onnx, /usr/local/share/asa/classifier.onnx,
    /// /usr/share/asa/classifier.onnx, else the source tree's classifier/models/default/.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Mapping table (workload class -> experts). Default: the built-in mapping/default.toml.
    #[arg(long)]
    pub mapping: Option<PathBuf>,
    /// Feature schema. Default: the built-in agent/feature_schema.toml.
    #[arg(long)]
    pub schema: Option<PathBuf>,
    /// libonnxruntime.so. Default: $ORT_DYLIB_PATH, else the one installed with asa
    /// (<prefix>/lib/asa/), else the project cache's.
    #[arg(long)]
    pub onnxruntime: Option<PathBuf>,
    /// Tick length in ms (default 1000; the voting window is counted in ticks).
    #[arg(long)]
    pub interval_ms: Option<u64>,
    /// Tick length in ms while the table leaves nothing to decide: the table's default expert
    /// runs and no class's vote could move it (every other expert a class maps to is within
    /// the noise of it or not worth its switch). A pin, an expert that fails or a quarantine
    /// ends it at the next tick. Also the longest time between full ticks while the vote is
    /// steady (the same confident class 5 full ticks in a row, its expert running, outside
    /// per-application mode): meanwhile every tick is a glance at /proc/stat, /proc/diskstats
    /// and /proc/net/dev, and one whose activity moved is a full tick again. 0: a full tick
    /// every --interval-ms throughout (default 10000).
    #[arg(long)]
    pub settled_interval_ms: Option<u64>,
    /// Minimum seconds between two switches (default 15).
    #[arg(long)]
    pub cooldown_s: Option<f64>,
    /// Append every tick's decision as one JSON line to this file.
    #[arg(long)]
    pub decision_log: Option<PathBuf>,
    /// Put each tick's feature vector (by name) into its decision-log line, to compare live
    /// ticks with recorded ones (`python -m asa_classifier.live`).
    #[arg(long)]
    pub log_features: bool,
    /// Nice value of the decision thread (perception, inference, vote; -20..19, default 19). A
    /// positive value lets the workload the agent watches go first; switches run on another
    /// thread at the agent's own priority.
    #[arg(long, allow_hyphen_values = true)]
    pub nice: Option<i32>,
    /// Decide and log, never switch (no sched_ext needed; no root needed without BPF).
    #[arg(long)]
    pub dry_run: bool,
    /// Do not load the BPF probe (BPF features are missing).
    #[arg(long)]
    pub no_bpf: bool,
    /// Stop after this many seconds, as on SIGTERM (benchmarks, tests).
    #[arg(long)]
    pub duration_s: Option<f64>,
    /// When another tool's sched_ext scheduler is attached at start, ask its owner to stop
    /// (SIGINT to the one process holding a struct_ops BPF link) instead of only waiting for
    /// it to go. Never SIGKILL; with no owner or several, the agent waits.
    #[arg(long)]
    pub take_over: bool,
    /// Also serve scx_loader's D-Bus interface: the name org.scx.Loader on the system bus
    /// (DBUS_SYSTEM_BUS_ADDRESS, else /var/run/dbus/system_bus_socket), so `scxctl` and
    /// scx_loader's desktop clients pin experts (switch/start), return to EEVDF (stop) and hand
    /// the choice back (restore). Default: off (or `dbus = true` in the config file). Needs the
    /// bus policy agent/dist/org.scx.Loader.conf; the agent does not start when the bus is
    /// missing or another process (scx_loader) owns the name.
    #[arg(long)]
    pub dbus: bool,
    /// Where `asa app set` pins are kept across restarts (default: /var/lib/asa/app-pins.toml,
    /// or `app_pins` in the config file). Per-application mode only.
    #[arg(long)]
    pub app_pins: Option<PathBuf>,
    /// The application classifier (ONNX, exported by `asa_classifier.train_apps`) that gives
    /// applications their class in per-application mode. Default: $ASA_APP_MODEL, else
    /// /etc/asa/app-classifier.onnx, /usr/local/share/asa/app-classifier.onnx,
    /// /usr/share/asa/app-classifier.onnx, else the source tree's; without one, classes come
    /// from pins only.
    #[arg(long)]
    pub app_model: Option<PathBuf>,
}

/// The config file (all keys optional; relative paths are relative to the file).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// Classifier model.
    pub model: Option<PathBuf>,
    /// Mapping table.
    pub mapping: Option<PathBuf>,
    /// Feature schema.
    pub schema: Option<PathBuf>,
    /// libonnxruntime.so.
    pub onnxruntime: Option<PathBuf>,
    /// Tick length in ms.
    pub interval_ms: Option<u64>,
    /// Tick length in ms while the table leaves nothing to decide, and the longest time
    /// between full ticks while the vote is steady (0: off).
    pub settled_interval_ms: Option<u64>,
    /// JSON-lines decision log.
    pub decision_log: Option<PathBuf>,
    /// Feature vectors in the decision log.
    pub log_features: Option<bool>,
    /// Nice value of the decision thread.
    pub nice: Option<i32>,
    /// Do not load the BPF probe.
    pub no_bpf: Option<bool>,
    /// Ask a foreign scheduler's owner to stop at start instead of waiting for it.
    pub take_over: Option<bool>,
    /// Serve scx_loader's D-Bus interface (org.scx.Loader on the system bus).
    pub dbus: Option<bool>,
    /// Where `asa app set` pins are kept.
    pub app_pins: Option<PathBuf>,
    /// The application classifier.
    pub app_model: Option<PathBuf>,
    /// Decision parameters.
    #[serde(default)]
    pub policy: PolicySection,
    /// The admin's application pins: `[[app]]` tables of `cgroup` and `class`.
    #[serde(default)]
    pub app: Vec<AppSection>,
}

/// One `[[app]]` of the config file: every application in `cgroup` (a path under the cgroup2
/// mount, absolute or relative to it) has `class` (a class of the layer plan).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppSection {
    /// The cgroup.
    pub cgroup: String,
    /// The class.
    pub class: String,
}

/// `[policy]` of the config file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicySection {
    /// Algorithm 1 window W, in ticks.
    pub window: Option<usize>,
    /// Algorithm 1 threshold θ.
    pub threshold: Option<f64>,
    /// Algorithm 1 decay α.
    pub decay: Option<f64>,
    /// Minimum seconds between two switches.
    pub cooldown_s: Option<f64>,
    /// Minimum vote margin.
    pub min_margin: Option<f64>,
    /// Minimum vote support.
    pub min_support: Option<f64>,
    /// Switching penalty horizon: how long a recognised class is expected to last (s).
    pub horizon_s: Option<f64>,
    /// Consecutive unsure ticks after which the agent returns to the table's default expert.
    pub fallback_after_ticks: Option<u32>,
    /// Whether the classes that go to the same expert vote together when the class vote is
    /// not confident.
    pub vote_over_experts: Option<bool>,
    /// Failures within `quarantine_window_s` that quarantine an expert.
    pub quarantine_failures: Option<u32>,
    /// Window in which an expert's failures are counted (s).
    pub quarantine_window_s: Option<f64>,
    /// First quarantine (s); it doubles with each failure until the expert has run
    /// `healthy_after_s`.
    pub quarantine_base_s: Option<f64>,
    /// Longest quarantine (s).
    pub quarantine_max_s: Option<f64>,
    /// Run time after which an expert's failures and back-off are forgotten (s).
    pub healthy_after_s: Option<f64>,
}

/// For an unknown key inside a table (`[policy]`), the table's header: a top-level key
/// appended at the end of the file lands in the last table.
fn key_in_table(text: &str, error: &toml::de::Error) -> Option<String> {
    if !error.message().starts_with("unknown field") {
        return None;
    }
    let at = error.span()?.start.min(text.len());
    text[..at]
        .lines()
        .map(str::trim)
        .rev()
        .find(|l| l.starts_with('['))
        .map(str::to_owned)
}

impl ConfigFile {
    /// Reads and parses `path`; relative paths in it become relative to its folder.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the config file {}", path.display()))?;
        let mut config: ConfigFile = toml::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "the config file {}{}: {}{} (agent/dist/asa.toml, installed as \
                 /etc/asa/asa.toml, lists every key)",
                path.display(),
                asa_layers::toml_error_place(&text, &e),
                e.message(),
                key_in_table(&text, &e)
                    .map(|table| format!(
                        "; this line is in the {table} table: keys of the file itself go above \
                         the first table"
                    ))
                    .unwrap_or_default()
            )
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        for p in [
            &mut config.model,
            &mut config.mapping,
            &mut config.schema,
            &mut config.onnxruntime,
            &mut config.decision_log,
            &mut config.app_pins,
            &mut config.app_model,
        ]
        .into_iter()
        .flatten()
        {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        }
        Ok(config)
    }
}

/// Everything `asa run` needs, resolved.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// The decision engine's model, mapping and ONNX Runtime.
    pub sources: EngineSources,
    /// Perception's feature schema (None: the built-in agent/feature_schema.toml).
    pub schema: Option<PathBuf>,
    /// Perception loads no BPF probe.
    pub no_bpf: bool,
    /// Tick length.
    pub interval: Duration,
    /// Tick length while the table leaves nothing to decide
    /// ([`crate::decision::policy::Policy::settled`]); None: every
    /// `interval` throughout.
    pub settled_interval: Option<Duration>,
    /// Policy parameters.
    pub policy: PolicyConfig,
    /// JSON-lines decision log.
    pub decision_log: Option<PathBuf>,
    /// Each logged tick carries its feature vector.
    pub log_features: bool,
    /// Nice value of the decision thread (0: the agent's own).
    pub nice: i32,
    /// Never switch.
    pub dry_run: bool,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Ask a foreign scheduler's owner to stop at start (else wait for it to go).
    pub take_over: bool,
    /// Serve org.scx.Loader on the system bus.
    pub dbus: bool,
    /// The config file read, if any.
    pub config_file: Option<PathBuf>,
    /// Where `asa app set` pins are kept.
    pub app_pins: PathBuf,
    /// The config file's `[[app]]` pins: (cgroup, class).
    pub admin_app_pins: Vec<(String, String)>,
    /// The application classifier (None: none found, classes from pins only).
    pub app_model: Option<PathBuf>,
}

impl RunSettings {
    /// Command line over config file over defaults.
    pub fn resolve(args: &RunArgs) -> Result<Self> {
        let (config, config_file) = match &args.config {
            Some(path) => (ConfigFile::load(path)?, Some(path.clone())),
            None if Path::new(DEFAULT_CONFIG).is_file() => (
                ConfigFile::load(Path::new(DEFAULT_CONFIG))?,
                Some(PathBuf::from(DEFAULT_CONFIG)),
            ),
            None => (ConfigFile::default(), None),
        };
        Self::merge(args, config, config_file)
    }

    fn merge(args: &RunArgs, config: ConfigFile, config_file: Option<PathBuf>) -> Result<Self> {
        let model = match args.model.clone().or(config.model) {
            Some(path) => path,
            None => default_model_path().with_context(|| {
                format!(
                    "no classifier model: give --model, `model` in the config file or ASA_MODEL, or install one at {}",
                    DEFAULT_MODEL_PATHS.join(", ")
                )
            })?,
        };
        let interval_ms = args
            .interval_ms
            .or(config.interval_ms)
            .unwrap_or(DEFAULT_INTERVAL_MS);
        if interval_ms < MIN_INTERVAL_MS {
            bail!("the tick length must be at least {MIN_INTERVAL_MS} ms (got {interval_ms})");
        }
        let settled_ms = args
            .settled_interval_ms
            .or(config.settled_interval_ms)
            .unwrap_or(DEFAULT_SETTLED_INTERVAL_MS.max(interval_ms));
        if settled_ms != 0 && settled_ms < interval_ms {
            bail!(
                "the settled tick length must be 0 (off) or at least the tick length, {interval_ms} ms (got {settled_ms})"
            );
        }
        let defaults = PolicyConfig::default();
        let p = &config.policy;
        let cooldown_s = args
            .cooldown_s
            .or(p.cooldown_s)
            .unwrap_or(defaults.cooldown.as_secs_f64());
        if !cooldown_s.is_finite() || cooldown_s < 0.0 {
            bail!("the cooldown must be a number of seconds >= 0 (got {cooldown_s})");
        }
        let policy = PolicyConfig {
            voting: VotingConfig {
                window: p.window.unwrap_or(defaults.voting.window),
                threshold: p.threshold.unwrap_or(defaults.voting.threshold),
                decay: p.decay.unwrap_or(defaults.voting.decay),
            },
            cooldown: Duration::from_secs_f64(cooldown_s),
            min_margin: p.min_margin.unwrap_or(defaults.min_margin),
            min_support: p.min_support.unwrap_or(defaults.min_support),
            horizon: match p.horizon_s {
                Some(h) if !h.is_finite() || h <= 0.0 => {
                    bail!("[policy] horizon_s must be a number of seconds > 0 (got {h})")
                }
                Some(h) => Duration::from_secs_f64(h),
                None => defaults.horizon,
            },
            fallback_after_ticks: p
                .fallback_after_ticks
                .unwrap_or(defaults.fallback_after_ticks),
            vote_over_experts: p.vote_over_experts.unwrap_or(defaults.vote_over_experts),
            quarantine: {
                let d = defaults.quarantine;
                let secs = |key: &str, v: Option<f64>, default: Duration| match v {
                    Some(v) if !v.is_finite() || v < 0.0 => {
                        bail!("[policy] {key} must be a number of seconds >= 0 (got {v})")
                    }
                    Some(v) => Ok(Duration::from_secs_f64(v)),
                    None => Ok(default),
                };
                let q = QuarantineConfig {
                    failures: p.quarantine_failures.unwrap_or(d.failures),
                    window: secs("quarantine_window_s", p.quarantine_window_s, d.window)?,
                    base: secs("quarantine_base_s", p.quarantine_base_s, d.base)?,
                    max: secs("quarantine_max_s", p.quarantine_max_s, d.max)?,
                    healthy_after: secs("healthy_after_s", p.healthy_after_s, d.healthy_after)?,
                };
                q.check().context("[policy] in the config file")?;
                q
            },
        };
        policy
            .voting
            .check()
            .context("[policy] in the config file")?;
        let nice = args.nice.or(config.nice).unwrap_or(DEFAULT_DECISION_NICE);
        if !(-20..=19).contains(&nice) {
            bail!("the nice value must be in -20..=19 (got {nice})");
        }
        let duration = match args.duration_s {
            Some(s) if !s.is_finite() || s <= 0.0 => bail!("--duration-s must be > 0"),
            Some(s) => Some(Duration::from_secs_f64(s)),
            None => None,
        };
        Ok(Self {
            sources: EngineSources {
                model,
                mapping: args.mapping.clone().or(config.mapping),
                onnxruntime: args.onnxruntime.clone().or(config.onnxruntime),
            },
            schema: args.schema.clone().or(config.schema),
            no_bpf: args.no_bpf || config.no_bpf.unwrap_or(false),
            interval: Duration::from_millis(interval_ms),
            settled_interval: (settled_ms != 0).then(|| Duration::from_millis(settled_ms)),
            policy,
            decision_log: args.decision_log.clone().or(config.decision_log),
            log_features: args.log_features || config.log_features.unwrap_or(false),
            nice,
            dry_run: args.dry_run,
            duration,
            take_over: args.take_over || config.take_over.unwrap_or(false),
            dbus: args.dbus || config.dbus.unwrap_or(false),
            config_file,
            app_pins: args
                .app_pins
                .clone()
                .or(config.app_pins)
                .unwrap_or_else(|| PathBuf::from(DEFAULT_PINS_FILE)),
            admin_app_pins: config
                .app
                .into_iter()
                .map(|a| (a.cgroup, a.class))
                .collect(),
            app_model: args
                .app_model
                .clone()
                .or(config.app_model)
                .or_else(crate::decision::app_model::default_app_model_path),
        })
    }

    /// The defaults, with a model path that need not exist (other modules' tests).
    #[cfg(test)]
    pub(super) fn for_tests() -> Self {
        let args = RunArgs {
            model: Some("/m.onnx".into()),
            ..RunArgs::default()
        };
        Self::merge(&args, ConfigFile::default(), None).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> RunArgs {
        RunArgs {
            model: Some("/m.onnx".into()),
            ..RunArgs::default()
        }
    }

    #[test]
    fn command_line_overrides_the_config_file_which_overrides_defaults() {
        let config: ConfigFile = toml::from_str(
            r#"
model = "/etc/asa/other.onnx"
mapping = "/etc/asa/mapping.toml"
interval_ms = 500
[policy]
window = 8
cooldown_s = 30
"#,
        )
        .unwrap();
        let mut a = args();
        a.cooldown_s = Some(5.0);
        let s = RunSettings::merge(&a, config, None).unwrap();
        assert_eq!(s.sources.model, PathBuf::from("/m.onnx"));
        assert_eq!(
            s.sources.mapping.as_deref(),
            Some(Path::new("/etc/asa/mapping.toml"))
        );
        assert_eq!(s.interval, Duration::from_millis(500));
        assert_eq!(s.policy.voting.window, 8);
        assert_eq!(s.policy.voting.decay, 0.8);
        assert_eq!(s.policy.cooldown, Duration::from_secs(5));
        assert_eq!(s.policy.min_margin, PolicyConfig::default().min_margin);
        let plain = RunSettings::merge(&args(), ConfigFile::default(), None).unwrap();
        assert_eq!(plain.interval, Duration::from_millis(DEFAULT_INTERVAL_MS));
        assert_eq!(
            plain.settled_interval,
            Some(Duration::from_millis(DEFAULT_SETTLED_INTERVAL_MS))
        );
        let config: ConfigFile = toml::from_str("settled_interval_ms = 0").unwrap();
        let off = RunSettings::merge(&args(), config, None).unwrap();
        assert_eq!(off.settled_interval, None, "0 turns it off");
        let mut a = args();
        a.interval_ms = Some(20_000);
        let slow = RunSettings::merge(&a, ConfigFile::default(), None).unwrap();
        assert_eq!(
            slow.settled_interval,
            Some(Duration::from_secs(20)),
            "never shorter than the tick by default"
        );
        assert_eq!(
            plain.nice, 19,
            "the decision thread yields to the workload by default"
        );
        assert_eq!(plain.policy, PolicyConfig::default());
        assert!(!plain.dry_run && plain.decision_log.is_none() && !plain.log_features);
        let config: ConfigFile = toml::from_str("log_features = true").unwrap();
        assert!(
            RunSettings::merge(&args(), config, None)
                .unwrap()
                .log_features
        );
        let mut a = args();
        a.log_features = true;
        let s = RunSettings::merge(&a, ConfigFile::default(), None).unwrap();
        assert!(s.log_features);
    }

    #[test]
    fn bad_settings_are_refused() {
        let mut a = args();
        a.interval_ms = Some(10);
        let err = RunSettings::merge(&a, ConfigFile::default(), None).unwrap_err();
        assert!(err.to_string().contains("at least 100 ms"), "{err}");
        let mut a = args();
        a.cooldown_s = Some(-1.0);
        assert!(RunSettings::merge(&a, ConfigFile::default(), None).is_err());
        for nice in [-21, 20] {
            let mut a = args();
            a.nice = Some(nice);
            let err = RunSettings::merge(&a, ConfigFile::default(), None).unwrap_err();
            assert!(err.to_string().contains("-20..=19"), "{err}");
        }
        let config: ConfigFile = toml::from_str("nice = 10").unwrap();
        assert_eq!(RunSettings::merge(&args(), config, None).unwrap().nice, 10);
        let config = ConfigFile {
            policy: PolicySection {
                decay: Some(0.0),
                ..PolicySection::default()
            },
            ..ConfigFile::default()
        };
        let err = RunSettings::merge(&args(), config, None).unwrap_err();
        assert!(format!("{err:#}").contains("[policy]"), "{err:#}");
        for bad in [
            "[policy]\nquarantine_failures = 0",
            "[policy]\nquarantine_base_s = -1",
            "[policy]\nquarantine_base_s = 100\nquarantine_max_s = 10",
        ] {
            let config: ConfigFile = toml::from_str(bad).unwrap();
            let err = RunSettings::merge(&args(), config, None).unwrap_err();
            assert!(format!("{err:#}").contains("quarantine"), "{bad}: {err:#}");
        }
        let config: ConfigFile =
            toml::from_str("[policy]\nquarantine_base_s = 20\nquarantine_failures = 3").unwrap();
        let q = RunSettings::merge(&args(), config, None)
            .unwrap()
            .policy
            .quarantine;
        assert_eq!((q.base, q.failures), (Duration::from_secs(20), 3));
        assert_eq!(q.max, QuarantineConfig::default().max);
        let mut a = args();
        a.settled_interval_ms = Some(500);
        let err = RunSettings::merge(&a, ConfigFile::default(), None).unwrap_err();
        assert!(err.to_string().contains("0 (off) or at least"), "{err}");
        let err = toml::from_str::<ConfigFile>("modle = \"x\"").unwrap_err();
        assert!(err.to_string().contains("unknown field"), "{err}");
    }

    #[test]
    fn a_config_file_that_is_not_valid_is_one_line_with_its_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("asa.toml");
        std::fs::write(&path, "interval_ms = 1000\nnice = \"low\"\n").unwrap();
        let error = format!("{:#}", ConfigFile::load(&path).unwrap_err());
        assert!(
            error.contains("asa.toml at line 2, column 8") && !error.contains('\n'),
            "{error}"
        );
    }

    /// An admin who appends a top-level key to the shipped file puts it into its last table:
    /// the error says so.
    #[test]
    fn a_top_level_key_appended_after_a_table_is_explained() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("asa.toml");
        std::fs::write(
            &path,
            "nice = 19\n[policy]\nwindow = 6\nonnxruntime = \"/x.so\"\n",
        )
        .unwrap();
        let error = format!("{:#}", ConfigFile::load(&path).unwrap_err());
        assert!(
            error.contains("unknown field `onnxruntime`")
                && error.contains("this line is in the [policy] table")
                && !error.contains('\n'),
            "{error}"
        );
        std::fs::write(&path, "modle = \"x\"\n[policy]\nwindow = 6\n").unwrap();
        let error = format!("{:#}", ConfigFile::load(&path).unwrap_err());
        assert!(
            error.contains("unknown field `modle`") && !error.contains("table"),
            "{error}"
        );
    }

    /// The shipped example (agent/dist/asa.toml) is all comments; with every key uncommented
    /// it parses and sets every field, with the documented defaults.
    #[test]
    fn shipped_example_config_parses_with_every_key() {
        let text = include_str!("../../dist/asa.toml");
        assert_eq!(
            toml::from_str::<ConfigFile>(text).unwrap(),
            ConfigFile::default()
        );
        let uncommented: String = text
            .lines()
            .map(|l| {
                let key = l.strip_prefix("# ").and_then(|rest| rest.split_once(" = "));
                match key {
                    Some((k, _)) if k.chars().all(|c| c.is_ascii_lowercase() || c == '_') => {
                        l[2..].to_string()
                    }
                    _ => l.to_string(),
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        let config: ConfigFile = toml::from_str(&uncommented).unwrap();
        assert!(config.model.is_some() && config.mapping.is_some() && config.onnxruntime.is_some());
        assert!(config.decision_log.is_some() && config.no_bpf == Some(false));
        assert_eq!(config.log_features, Some(false));
        assert_eq!(config.dbus, Some(false));
        assert_eq!(config.nice, Some(DEFAULT_DECISION_NICE));
        assert_eq!(config.interval_ms, Some(DEFAULT_INTERVAL_MS));
        assert_eq!(
            config.settled_interval_ms,
            Some(DEFAULT_SETTLED_INTERVAL_MS)
        );
        assert!(config.app_pins.is_some() && config.app_model.is_some());
        let s = RunSettings::merge(&RunArgs::default(), config, None).unwrap();
        assert_eq!(s.policy, PolicyConfig::default());
        assert_eq!(s.app_pins, Path::new(DEFAULT_PINS_FILE));
    }

    #[test]
    fn the_config_files_app_tables_are_the_admins_pins() {
        let text = "[[app]]\ncgroup = \"system.slice/backup.service\"\nclass = \"background\"\n\
                    [[app]]\ncgroup = \"/user.slice\"\nclass = \"interactive\"\n";
        let config: ConfigFile = toml::from_str(text).unwrap();
        let s = RunSettings::merge(&args(), config, None).unwrap();
        assert_eq!(
            s.admin_app_pins,
            [
                ("system.slice/backup.service".into(), "background".into()),
                ("/user.slice".into(), "interactive".into())
            ]
        );
        let unknown = toml::from_str::<ConfigFile>("[[app]]\npid = 3\nclass = \"x\"\n");
        assert!(unknown.is_err());
    }

    #[test]
    fn config_paths_are_relative_to_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("asa.toml");
        std::fs::write(
            &path,
            "model = \"models/c.onnx\"\ndecision_log = \"/var/log/d.jsonl\"\n",
        )
        .unwrap();
        let config = ConfigFile::load(&path).unwrap();
        assert_eq!(config.model, Some(dir.path().join("models/c.onnx")));
        assert_eq!(config.decision_log, Some(PathBuf::from("/var/log/d.jsonl")));
        let err = ConfigFile::load(&dir.path().join("none.toml")).unwrap_err();
        assert!(format!("{err:#}").contains("none.toml"), "{err:#}");
    }
}
