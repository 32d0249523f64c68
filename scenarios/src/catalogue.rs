//! The scenario file: probes with their scored metrics, background loads, and scenarios that
//! pair one probe with one load (or a sequence of loads: a *phased* scenario).
//!
//! ```toml
//! schema = "asa.scenarios"
//! version = 1
//!
//! [probe.game]
//! description = "..."
//! settings = { kind = "game", target_fps = 60.0 }
//! app_class = "interactive"
//! [[probe.game.metric]]
//! name = "frame_time_p99_ms"
//! value = { direction = "lower", theta = 33.4, scale = 16.7, k_v = 1.0, gamma_v = 1.0, weight = 2.0 }
//!
//! [load.video_encode]
//! ...
//!
//! [[scenario]]
//! name = "S1"
//! title = "Game Play & Archive Extraction"
//! probe = "game"
//! load = "archive_extract"
//! ```
//!
//! Loading checks the schema name and version, rejects unknown fields, and validates every
//! cross-reference; each error names the offending field.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::loads::LoadSpec;
use crate::probes::ProbeSettings;
use crate::score::{Scale, StabilitySpec, TailSpec, Threshold, ValueSpec};

/// Schema name every scenario file carries.
pub const SCENARIOS_SCHEMA: &str = "asa.scenarios";
/// Schema version this code reads.
pub const SCENARIOS_VERSION: u32 = 1;
/// The built-in scenario file.
pub const BUILTIN_SCENARIOS: &str = include_str!("../catalogue/scenarios.toml");

/// The text of the scenario file `file`, or of the built-in one ([`BUILTIN_SCENARIOS`]).
pub fn catalogue_text(file: Option<&Path>) -> Result<String> {
    match file {
        Some(p) => std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display())),
        None => Ok(BUILTIN_SCENARIOS.to_owned()),
    }
}

/// The built-in catalogue cut for the lab's calibration tests and the demo: the xz load's
/// corpus at 1 MB (8 in the catalogue), two single-phase scenarios against it, `CAL-GAME` (game
/// probe) and `CAL-AUDIO` (audio probe), by load `xz_compress`, and `CAL-IDLE` (the game probe
/// beside no load), by load `idle`. xz-utils has Debian priority "required", so every root
/// filesystem has it.
pub fn calibration_test_catalogue() -> String {
    let mut text = BUILTIN_SCENARIOS.replace(
        "prepare = [{ kind = \"text_corpus\", file = \"corpus.txt\", megabytes = 8 }]\ncommand = [\"xz\"",
        "prepare = [{ kind = \"text_corpus\", file = \"corpus.txt\", megabytes = 1 }]\ncommand = [\"xz\"",
    );
    text.push_str(
        r#"
[[scenario]]
name = "CAL-GAME"
title = "Game Play & xz Compression (calibration test)"
probe = "game"
load = "xz_compress"

[[scenario]]
name = "CAL-AUDIO"
title = "Audio & xz Compression (calibration test)"
probe = "audio"
load = "xz_compress"

[[scenario]]
name = "CAL-IDLE"
title = "Game Play on an Idle Machine (calibration test)"
probe = "game"
load = "idle"
"#,
    );
    text
}

/// The load name that means "no background load" in a phase.
pub const IDLE: &str = "idle";

/// A scored metric: a summary value (value score) and/or a sample series (stability score).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricSpec {
    /// Summary metric name of the probe (e.g. `frame_time_p99_ms`).
    pub name: String,
    /// Why this metric and these parameters.
    #[serde(default)]
    pub note: String,
    /// The value part scores the windowed tail of this sample series instead of the summary
    /// metric `name` ([`crate::score::windowed_percentile`]; the summary value stays in the
    /// results and the report's `plain` figures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tail: Option<TailSpec>,
    /// Value-score parameters.
    #[serde(default)]
    pub value: Option<ValueSpec>,
    /// Stability-score parameters.
    #[serde(default)]
    pub stability: Option<StabilitySpec>,
}

/// A foreground probe profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeProfile {
    /// What the probe stands for.
    pub description: String,
    /// Probe kind and its settings.
    pub settings: ProbeSettings,
    /// Scored metrics.
    pub metric: Vec<MetricSpec>,
    /// The application class the probe is labelled with in per-application recordings (one
    /// of the layer plan's classes; a probe stands for an interactive application).
    pub app_class: String,
}

/// One phase of a phased scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseSpec {
    /// Load name, or `idle` for none.
    pub load: String,
    /// Share of the scenario's duration (relative; the shares are normalised).
    pub share: f64,
}

/// A scenario as written in the file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioSpec {
    /// Short unique name (`S1`, `P1`).
    pub name: String,
    /// Human title.
    pub title: String,
    /// Probe profile name.
    pub probe: String,
    /// The background load for the whole run (exclusive with `phase`).
    #[serde(default)]
    pub load: Option<String>,
    /// Phases with changing background loads (exclusive with `load`).
    #[serde(default)]
    pub phase: Vec<PhaseSpec>,
}

impl ScenarioSpec {
    /// The phases: one phase with the single load, or the phased list.
    pub fn phases(&self) -> Vec<PhaseSpec> {
        match &self.load {
            Some(load) => vec![PhaseSpec {
                load: load.clone(),
                share: 1.0,
            }],
            None => self.phase.clone(),
        }
    }

    /// True when the background changes during the run.
    pub fn is_phased(&self) -> bool {
        self.load.is_none()
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFileRaw {
    schema: String,
    version: u32,
    #[serde(default)]
    description: String,
    probe: BTreeMap<String, ProbeProfile>,
    load: BTreeMap<String, LoadSpec>,
    scenario: Vec<ScenarioSpec>,
}

#[derive(Debug, Deserialize)]
struct Header {
    schema: Option<String>,
    version: Option<i64>,
}

/// A loaded and validated scenario file.
#[derive(Debug, Clone, PartialEq)]
pub struct Catalogue {
    /// Free text from the file.
    pub description: String,
    /// Probe profiles by name.
    pub probes: BTreeMap<String, ProbeProfile>,
    /// Loads by name.
    pub loads: BTreeMap<String, LoadSpec>,
    /// Scenarios in file order.
    pub scenarios: Vec<ScenarioSpec>,
}

impl Catalogue {
    /// The built-in catalogue (`scenarios/catalogue/scenarios.toml`).
    pub fn builtin() -> Result<Self> {
        Self::parse(BUILTIN_SCENARIOS, "built-in scenarios.toml")
    }

    /// Load a scenario file.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading scenario file {}", path.display()))?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parse and validate scenario-file text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self> {
        // Check the schema first, so an old or foreign file gets the right message.
        let header: Header = toml::from_str(text)
            .map_err(|e| anyhow::anyhow!("{origin}: not valid TOML: {}", e.message()))?;
        match header.schema.as_deref() {
            Some(SCENARIOS_SCHEMA) => {}
            Some(other) => {
                bail!("{origin}: field `schema` is \"{other}\", expected \"{SCENARIOS_SCHEMA}\"")
            }
            None => bail!("{origin}: field `schema` is missing (expected \"{SCENARIOS_SCHEMA}\")"),
        }
        match header.version {
            Some(v) if v == SCENARIOS_VERSION as i64 => {}
            Some(v) => bail!(
                "{origin}: field `version` is {v}, this build reads version {SCENARIOS_VERSION}"
            ),
            None => bail!("{origin}: field `version` is missing (expected {SCENARIOS_VERSION})"),
        }
        let raw: ScenarioFileRaw = toml::from_str(text)
            .map_err(|e| anyhow::anyhow!("{origin}: {}", describe_toml_error(&e, text)))?;
        debug_assert_eq!(
            (raw.schema.as_str(), raw.version),
            (SCENARIOS_SCHEMA, SCENARIOS_VERSION)
        );
        let cat = Self {
            description: raw.description,
            probes: raw.probe,
            loads: raw.load,
            scenarios: raw.scenario,
        };
        cat.validate()
            .with_context(|| format!("{origin}: invalid scenario file"))?;
        Ok(cat)
    }

    fn validate(&self) -> Result<()> {
        let plan = asa_layers::default_plan();
        let classes: Vec<&str> = plan.classes.iter().map(|c| c.class.as_str()).collect();
        let known_class = |what: String, class: &str| -> Result<()> {
            if !classes.contains(&class) {
                bail!(
                    "{what}: field `app_class` is {class:?}, not one of the layer plan's classes ({})",
                    classes.join(", ")
                );
            }
            Ok(())
        };
        for (name, load) in &self.loads {
            known_class(format!("load `{name}`"), &load.app_class)?;
        }
        for (name, probe) in &self.probes {
            known_class(format!("probe `{name}`"), &probe.app_class)?;
            probe
                .settings
                .validate()
                .with_context(|| format!("probe `{name}`: field `settings`"))?;
            if probe.metric.is_empty() {
                bail!("probe `{name}`: field `metric` needs at least one metric");
            }
            let summary: BTreeSet<&str> = probe
                .settings
                .summary_metrics()
                .iter()
                .map(|m| m.0)
                .collect();
            let series: BTreeSet<&str> =
                probe.settings.sample_series().iter().map(|m| m.0).collect();
            for m in &probe.metric {
                let at = format!("probe `{name}`, metric `{}`", m.name);
                if m.value.is_none() && m.stability.is_none() {
                    bail!("{at}: needs a `value` or a `stability` table");
                }
                if let Some(v) = &m.value {
                    if !summary.contains(m.name.as_str()) {
                        bail!(
                            "{at}: field `name` is not a {} metric (known: {})",
                            probe.settings.kind(),
                            summary.iter().copied().collect::<Vec<_>>().join(", ")
                        );
                    }
                    check_value(v).with_context(|| format!("{at}: field `value`"))?;
                }
                if let Some(t) = &m.tail {
                    if m.value.is_none() {
                        bail!("{at}: field `tail` needs a `value` table to score it");
                    }
                    if !series.contains(t.samples.as_str()) {
                        bail!(
                            "{at}: field `tail.samples` is `{}`, not a {} sample series (known: {})",
                            t.samples,
                            probe.settings.kind(),
                            series.iter().copied().collect::<Vec<_>>().join(", ")
                        );
                    }
                    if !(t.percentile.is_finite() && t.percentile > 0.0 && t.percentile <= 100.0) {
                        bail!(
                            "{at}: field `tail.percentile` must be in (0, 100], got {}",
                            t.percentile
                        );
                    }
                }
                if let Some(s) = &m.stability {
                    if !series.contains(s.samples.as_str()) {
                        bail!(
                            "{at}: field `stability.samples` is `{}`, not a {} sample series (known: {})",
                            s.samples,
                            probe.settings.kind(),
                            series.iter().copied().collect::<Vec<_>>().join(", ")
                        );
                    }
                    check_stability(s).with_context(|| format!("{at}: field `stability`"))?;
                }
            }
        }
        for (name, load) in &self.loads {
            if name == IDLE {
                bail!("load `{IDLE}` is reserved for \"no background load\"");
            }
            if load.command.is_empty() {
                bail!("load `{name}`: field `command` is empty");
            }
            if load.package.trim().is_empty() {
                bail!("load `{name}`: field `package` is empty");
            }
            check_value(&load.score).with_context(|| format!("load `{name}`: field `score`"))?;
            for r in &load.requires {
                if r.binary.is_none() == r.path_glob.is_none() {
                    bail!("load `{name}`: each `requires` entry needs exactly one of `binary` or `path_glob`");
                }
            }
        }
        let mut seen = BTreeSet::new();
        for s in &self.scenarios {
            let at = format!("scenario `{}`", s.name);
            if !seen.insert(s.name.as_str()) {
                bail!("{at}: field `name` is used twice");
            }
            if !self.probes.contains_key(&s.probe) {
                bail!(
                    "{at}: field `probe` names unknown probe `{}` (known: {})",
                    s.probe,
                    self.probes.keys().cloned().collect::<Vec<_>>().join(", ")
                );
            }
            match (&s.load, s.phase.is_empty()) {
                (Some(_), false) => bail!("{at}: fields `load` and `phase` exclude each other"),
                (None, true) => bail!("{at}: field `load` (or `phase`) is missing"),
                _ => {}
            }
            for (i, p) in s.phases().iter().enumerate() {
                let field = if s.is_phased() {
                    format!("phase[{i}].load")
                } else {
                    "load".to_owned()
                };
                if p.load != IDLE && !self.loads.contains_key(&p.load) {
                    bail!(
                        "{at}: field `{field}` names unknown load `{}` (known: {IDLE}, {})",
                        p.load,
                        self.loads.keys().cloned().collect::<Vec<_>>().join(", ")
                    );
                }
                if !(p.share.is_finite() && p.share > 0.0) {
                    bail!(
                        "{at}: field `phase[{i}].share` must be > 0, got {}",
                        p.share
                    );
                }
            }
        }
        Ok(())
    }

    /// The scenario called `name`.
    pub fn scenario(&self, name: &str) -> Result<&ScenarioSpec> {
        self.scenarios
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "no scenario called `{name}` (known: {})",
                    self.scenarios
                        .iter()
                        .map(|s| s.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })
    }

    /// The Debian packages the loads of `scenarios` need (each load's `package` and every
    /// `requires` entry's): what a lab root filesystem must hold to run them.
    pub fn packages(&self, scenarios: &[&ScenarioSpec]) -> BTreeSet<String> {
        let mut packages = BTreeSet::new();
        for s in scenarios {
            for phase in s.phases() {
                if let Some(load) = self.loads.get(&phase.load) {
                    packages.insert(load.package.clone());
                    packages.extend(load.requires.iter().map(|r| r.package.clone()));
                }
            }
        }
        packages
    }

    /// Scenarios selected by a comma-separated list of names, or `all`.
    pub fn select(&self, names: &str) -> Result<Vec<&ScenarioSpec>> {
        if names.trim() == "all" {
            return Ok(self.scenarios.iter().collect());
        }
        names
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(|n| self.scenario(n))
            .collect()
    }
}

fn describe_toml_error(e: &toml::de::Error, text: &str) -> String {
    // toml's message names the unknown or missing field; add the line and column for humans.
    match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.len() - before.rfind('\n').map(|i| i + 1).unwrap_or(0) + 1;
            format!("{} (line {line}, column {column})", e.message().trim())
        }
        None => e.message().trim().to_owned(),
    }
}

fn check_value(v: &ValueSpec) -> Result<()> {
    for (field, x) in [("k_v", v.k_v), ("gamma_v", v.gamma_v)] {
        if !(x.is_finite() && x > 0.0) {
            bail!("`{field}` must be > 0, got {x}");
        }
    }
    if !(v.weight.is_finite() && v.weight >= 0.0) {
        bail!("`weight` must be >= 0, got {}", v.weight);
    }
    if let (Threshold::Fixed(0.0), Scale::Theta) = (v.theta, v.scale) {
        bail!("`scale = \"theta\"` needs a non-zero `theta`");
    }
    Ok(())
}

fn check_stability(s: &StabilitySpec) -> Result<()> {
    if !(s.k_s.is_finite() && s.k_s >= 0.0) {
        bail!("`k_s` must be >= 0, got {}", s.k_s);
    }
    if !(s.gamma_s.is_finite() && s.gamma_s > 0.0) {
        bail!("`gamma_s` must be > 0, got {}", s.gamma_s);
    }
    if !(s.weight.is_finite() && s.weight >= 0.0) {
        bail!("`weight` must be >= 0, got {}", s.weight);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_catalogue_has_the_papers_28_scenarios_and_phased_ones() {
        let cat = Catalogue::builtin().unwrap();
        let plain: Vec<_> = cat.scenarios.iter().filter(|s| !s.is_phased()).collect();
        assert_eq!(plain.len(), 28);
        assert_eq!(plain[0].title, "Game Play & Archive Extraction");
        assert_eq!(plain[27].title, "Audio Remix & Video Render");
        // Every probe pairs with the same 7 loads.
        for probe in ["game", "office", "web", "audio"] {
            let loads: BTreeSet<_> = plain
                .iter()
                .filter(|s| s.probe == probe)
                .map(|s| s.load.clone().unwrap())
                .collect();
            assert_eq!(loads.len(), 7, "{probe}");
        }
        assert!(cat.scenarios.iter().filter(|s| s.is_phased()).count() >= 3);
        assert_eq!(cat.select("S1, P2").unwrap().len(), 2);
        assert_eq!(cat.select("all").unwrap().len(), cat.scenarios.len());
        assert!(cat.select("S99").unwrap_err().to_string().contains("S99"));
    }

    #[test]
    fn the_calibration_test_catalogue_cuts_the_xz_corpus_and_adds_three_scenarios() {
        let text = calibration_test_catalogue();
        assert!(
            text.contains("megabytes = 1 }]\ncommand = [\"xz\""),
            "the xz load changed"
        );
        let cat = Catalogue::parse(&text, "test").unwrap();
        let cal = cat.select("CAL-GAME,CAL-AUDIO").unwrap();
        assert_eq!(cal.len(), 2);
        assert!(cal.iter().all(|s| s.load.as_deref() == Some("xz_compress")));
        let idle = cat.select("CAL-IDLE").unwrap();
        assert_eq!(idle[0].load.as_deref(), Some(IDLE));
    }

    #[test]
    fn packages_cover_every_load_and_requirement_of_the_selection() {
        let cat = Catalogue::builtin().unwrap();
        let two = cat.select("S6,S22").unwrap();
        assert_eq!(
            cat.packages(&two).into_iter().collect::<Vec<_>>(),
            ["7zip", "iperf3"]
        );
        let p1 = cat.packages(&cat.select("P1").unwrap());
        for p in ["linux-source", "make", "gcc", "libelf-dev", "iperf3"] {
            assert!(p1.contains(p), "{p}: {p1:?}");
        }
        let all = cat.packages(&cat.select("all").unwrap());
        assert!(all.contains("ffmpeg") && all.contains("python3-numpy") && all.contains("fio"));
        assert!(!all.contains("idle"));
    }

    fn broken(from: &str, to: &str) -> String {
        assert!(BUILTIN_SCENARIOS.contains(from), "{from}");
        let text = BUILTIN_SCENARIOS.replacen(from, to, 1);
        format!("{:#}", Catalogue::parse(&text, "test.toml").unwrap_err())
    }

    #[test]
    fn bad_files_name_the_field() {
        let e = broken("schema = \"asa.scenarios\"", "schema = \"asa.experts\"");
        assert!(e.contains("`schema`"), "{e}");
        let e = broken("version = 1\n", "version = 2\n");
        assert!(e.contains("`version` is 2"), "{e}");
        let e = broken("version = 1\n", "");
        assert!(e.contains("`version` is missing"), "{e}");
        let e = broken("load = \"archive_extract\"", "lod = \"archive_extract\"");
        assert!(
            e.contains("unknown field `lod`") && e.contains("line "),
            "{e}"
        );
        let e = broken("load = \"kernel_build\"", "load = \"kernal_build\"");
        assert!(
            e.contains("field `load`") && e.contains("kernal_build"),
            "{e}"
        );
        let e = broken("app_class = \"io_bound\"", "app_class = \"disk\"");
        assert!(
            e.contains("load `disk_io`: field `app_class` is \"disk\"")
                && e.contains("interactive, io_bound, network, cpu_batch, background"),
            "{e}"
        );
        let e = broken("probe = \"web\"", "probe = \"browser\"");
        assert!(e.contains("field `probe`") && e.contains("browser"), "{e}");
        let e = broken("name = \"fps\"", "name = \"fpss\"");
        assert!(e.contains("field `name`") && e.contains("fpss"), "{e}");
        let e = broken(
            "stability = { samples = \"frame_time_ms\"",
            "stability = { samples = \"frames\"",
        );
        assert!(e.contains("stability.samples"), "{e}");
        let e = broken(
            "tail = { samples = \"frame_time_ms\"",
            "tail = { samples = \"frames\"",
        );
        assert!(e.contains("tail.samples"), "{e}");
        let e = broken(
            "tail = { samples = \"frame_time_ms\", percentile = 99.0 }",
            "tail = { samples = \"frame_time_ms\", percentile = 0.0 }",
        );
        assert!(e.contains("tail.percentile"), "{e}");
        let e = broken(
            "theta = 50.0, scale = 10.0",
            "theta = \"mean\", scale = 10.0",
        );
        assert!(e.contains("theta"), "{e}");
        let e = broken(
            "k_v = 1.0, gamma_v = 1.0, weight = 1.0 }",
            "k_v = -1.0, gamma_v = 1.0, weight = 1.0 }",
        );
        assert!(e.contains("k_v"), "{e}");
        let e = broken("frame_work_ms = 5.0", "frame_work_ms = 5.0, vsync = true");
        assert!(e.contains("vsync"), "{e}");
        let e = broken("package = \"fio\"", "packages = \"fio\"");
        assert!(e.contains("packages"), "{e}");
        let e = broken(
            "{ load = \"idle\", share = 1.0 }, { load = \"kernel_build\"",
            "{ load = \"idle\", share = 0.0 }, { load = \"kernel_build\"",
        );
        assert!(e.contains("phase[0].share"), "{e}");
        let e = broken(
            "kind = \"completions\", amount = 16.0",
            "kind = \"completion\", amount = 16.0",
        );
        assert!(e.contains("completion"), "{e}");
    }
}
