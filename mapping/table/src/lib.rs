//! The mapping table: ASA's "scenario-optimal scheduler" memory (paper §3.3, §4.3).
//!
//! A versioned TOML file (schema [`MAPPING_SCHEMA`], version [`MAPPING_VERSION`]) that says, for
//! each workload class the classifier can recognise, which experts to use, best first, with the
//! score that ranked them, its spread and how many runs back it. It also names the machine it was
//! calibrated on. [`MappingTable::parse`] checks the format; [`MappingTable::validate`] checks the
//! names against the expert catalogue and the classifier's classes. Its `[[layer]]` rows give
//! per-application mode's layer policies ([`layers`]). See `mapping/README.md`.
//!
//! Its own crate so the agent's decision path links only the table: calibration, which makes
//! tables from scenario runs, is `asa-mapping`, whose public paths re-export this crate.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub mod layers;
pub use layers::LayerRow;

/// Schema name every mapping table must declare.
pub const MAPPING_SCHEMA: &str = "asa.mapping";
/// The mapping table version this build understands.
pub const MAPPING_VERSION: u32 = 1;
/// The hand-written default table (`mapping/default.toml`), compiled in.
pub const DEFAULT_TABLE: &str = include_str!("../../default.toml");

/// Name of a workload class made of an interactive foreground probe and a background load, as
/// used by the scenario catalogue (`game` + `kernel_build` → `game+kernel_build`).
pub fn workload_class_name(probe: &str, load: &str) -> String {
    format!("{probe}+{load}")
}

/// Errors found while reading or validating a mapping table.
#[derive(Debug, thiserror::Error)]
pub enum MappingError {
    /// The file could not be read. The I/O error is part of the message, not a source: an
    /// error chain printed whole (`{:#}`) names the cause once.
    #[error("cannot read mapping table {}: {error}; {}", path.display(), read_fix(error))]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// The text is not TOML of the expected shape.
    #[error("mapping table {origin} is not valid TOML for schema {MAPPING_SCHEMA} v{MAPPING_VERSION}{place}: {message}; mapping/default.toml shows the format")]
    Parse {
        /// Where the text came from.
        origin: String,
        /// " at line L, column C" where the parser gives the place, else empty.
        place: String,
        /// The parser's message (one line).
        message: String,
    },
    /// No schema name or version at all: not a mapping table, or one cut short.
    #[error("mapping table {origin} lacks {missing}: a mapping table declares schema = \"{MAPPING_SCHEMA}\" and version = {MAPPING_VERSION} at its top (regenerate it with `asa calibrate` or start from mapping/default.toml)")]
    MissingHeader {
        /// Where the text came from.
        origin: String,
        /// The missing fields, as a phrase ("the fields `schema` and `version`").
        missing: String,
    },
    /// Wrong schema name or version.
    #[error("mapping table {origin} is {schema} v{version}; this build reads {MAPPING_SCHEMA} v{MAPPING_VERSION} (regenerate it with `asa calibrate` or start from mapping/default.toml)")]
    WrongVersion {
        /// Where the text came from.
        origin: String,
        /// Declared schema.
        schema: String,
        /// Declared version.
        version: u32,
    },
    /// An expert name that the catalogue does not know.
    #[error(
        "mapping table {origin}: class {class:?} names unknown expert {expert:?} (known: {known})"
    )]
    UnknownExpert {
        /// Where the text came from.
        origin: String,
        /// The class entry.
        class: String,
        /// The unknown name.
        expert: String,
        /// Comma-separated known names.
        known: String,
    },
    /// A class name that the classifier does not know.
    #[error(
        "mapping table {origin}: unknown workload class {class:?} (the classifier knows: {known})"
    )]
    UnknownClass {
        /// Where the text came from.
        origin: String,
        /// The unknown class.
        class: String,
        /// Comma-separated known classes.
        known: String,
    },
    /// Any other inconsistency (duplicates, ordering, ranges).
    #[error("mapping table {origin}: {message}")]
    Invalid {
        /// Where the text came from.
        origin: String,
        /// What is wrong.
        message: String,
    },
}

/// What to do about a mapping table that cannot be read, by the I/O error's kind.
fn read_fix(error: &std::io::Error) -> &'static str {
    match error.kind() {
        std::io::ErrorKind::NotFound => {
            "check the path (`asa calibrate` writes a table; leave the mapping out for the built-in mapping/default.toml)"
        }
        std::io::ErrorKind::InvalidData => {
            "a mapping table is UTF-8 TOML text (regenerate it with `asa calibrate` or start from mapping/default.toml)"
        }
        std::io::ErrorKind::PermissionDenied => "make it readable by the user that reads it",
        _ => "check the file",
    }
}

/// The machine a table was calibrated on. A hand-written table has none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineFingerprint {
    /// CPU model string (`/proc/cpuinfo` "model name").
    pub cpu_model: String,
    /// Logical CPUs online.
    pub cores: u32,
    /// Whether SMT (hyper-threading) is active.
    pub smt: bool,
    /// Installed memory in MiB.
    pub memory_mib: u64,
    /// `uname -r` of the kernel the experts ran on.
    pub kernel_release: String,
    /// Expert name → version that was measured (e.g. `bpfland = "1.1.4"`).
    #[serde(default)]
    pub expert_versions: std::collections::BTreeMap<String, String>,
}

/// One expert's standing for one workload class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RankedExpert {
    /// Expert name from the catalogue (`experts/catalogue.toml`).
    pub expert: String,
    /// Mean UX score (paper §4.2, 0..1, higher is better). In a hand-written table: a prior.
    pub score: f64,
    /// Spread of the score over the runs (standard deviation; 0 when `runs` < 2).
    pub spread: f64,
    /// Number of scenario runs behind `score` (0 for a hand-written prior).
    pub runs: u32,
}

/// The ranked experts of one workload class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassMapping {
    /// Workload class name, as the classifier's model names it.
    pub name: String,
    /// Experts, best first (scores must not increase down the list by more than `noise`).
    pub ranked: Vec<RankedExpert>,
    /// Score differences up to this were judged noise by calibration: the ranking may then put
    /// the stay expert (the table's default; a switch costs something) above an expert that
    /// scored up to `noise` more. 0 (the default, omitted) in a hand-written table.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub noise: f64,
    /// The first expert's score minus the best score of the others: how far the row's choice
    /// leads its runner-up (negative when the stay expert was kept within the noise). Absent
    /// with one expert, in hand-written tables and in tables calibrated before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub margin: Option<f64>,
    /// Whether calibration settled the class: every other expert is below the best beyond the
    /// noise or cannot beat it by the calibration's `--min-gain`, so more runs would not
    /// change its choice. `false`: some comparison was still open when the runs ended (the
    /// plan or the budget ran out). Absent where it was not recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled: Option<bool>,
    /// The boots (VM runs or machine boots: the runs' recorded boot ids, else one per results
    /// file) the row's comparison rests on, where calibration compared across boots (stage
    /// layers always; stages prototype and live when their runs span 2 boots or more): with 2
    /// or more the noise includes the spread between boots; 1 means one boot's runs, no
    /// verdict across boots. Absent where boots were not counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boots: Option<u32>,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

impl ClassMapping {
    /// The best-ranked expert whose name `usable` accepts.
    pub fn best_usable(&self, usable: impl Fn(&str) -> bool) -> Option<&RankedExpert> {
        self.ranked.iter().find(|r| usable(&r.expert))
    }

    /// How sure the row is, for humans: `cosmos first, +0.027 over flash (noise 0.061),
    /// settled` — the margin to the runner-up, the noise it was judged against, and whether
    /// the calibration settled the class.
    pub fn confidence(&self) -> String {
        let first = &self.ranked[0].expert;
        let mut out = format!("{first} first");
        match (self.margin, self.ranked.get(1)) {
            (Some(m), Some(second)) => out.push_str(&format!(", {m:+.3} over {}", second.expert)),
            (None, Some(_)) => out.push_str(", margin not recorded"),
            (_, None) => out.push_str(", the only expert measured"),
        }
        if self.noise > 0.0 {
            out.push_str(&format!(" (noise {:.3})", self.noise));
        }
        out.push_str(match self.settled {
            Some(true) => ", settled",
            Some(false) => ", open: more runs could change it",
            None => "",
        });
        match self.boots {
            Some(1) => out.push_str(", one boot"),
            Some(n) if n > 1 => out.push_str(&format!(", {n} boots")),
            _ => {}
        }
        out
    }
}

/// The measured cost of one ordered switch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchCost {
    /// Expert switched from.
    pub from: String,
    /// Expert switched to.
    pub to: String,
    /// Mean UX score lost by one switch in a run of `run_s` seconds: mean over repetitions of
    /// (score(from) + score(to)) / 2 − score(from>to). Negative values are kept (a switch that
    /// measured as a gain is noise or a real benefit; the decision treats it as free).
    pub score_cost: f64,
    /// Sample standard deviation of the per-repetition costs.
    pub spread: f64,
    /// Repetitions (over every scenario) behind it.
    pub runs: u32,
    /// Probe duration of the runs, seconds (the cost is per switch in a run this long).
    pub run_s: f64,
    /// Median time the switch took, seconds (from starting `to` to `to` scheduling, the old
    /// expert's stop included): the gain of `to` only starts after it, so the decision counts
    /// the horizon minus this. Absent in tables written before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch_s: Option<f64>,
}

/// A mapping table file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MappingTable {
    /// Must be [`MAPPING_SCHEMA`].
    pub schema: String,
    /// Must be [`MAPPING_VERSION`].
    pub version: u32,
    /// How the table was made: `hand-written`, `prototype`, `overhead`, `live` or `layers`
    /// (calibration stage).
    pub source: String,
    /// When it was made (ISO 8601 date or date-time, UTC).
    pub created: String,
    /// The expert the agent runs when it starts and whenever its vote is not confident: the
    /// one with the best mean score over the table's classes ([`MappingTable::overall_best`];
    /// calibration writes it). Absent: the agent starts on, and keeps, what runs (EEVDF).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_expert: Option<String>,
    /// The machine it was calibrated on; absent for a hand-written table.
    #[serde(default)]
    pub machine: Option<MachineFingerprint>,
    /// One entry per workload class.
    #[serde(rename = "class", default)]
    pub classes: Vec<ClassMapping>,
    /// Measured cost of switching between experts (calibration stage 2); empty: switches are
    /// taken as free.
    #[serde(rename = "switch", default, skip_serializing_if = "Vec::is_empty")]
    pub switches: Vec<SwitchCost>,
    /// Per-application mode: application class → layer policy (calibration stage layers);
    /// empty: ASA's default layer plan.
    #[serde(rename = "layer", default, skip_serializing_if = "Vec::is_empty")]
    pub layers: Vec<LayerRow>,
}

/// Allowed values of [`MappingTable::source`].
pub const SOURCES: [&str; 5] = ["hand-written", "prototype", "overhead", "live", "layers"];

impl MappingTable {
    /// Parses and checks the format (schema, version, duplicates, ranges, ordering); names are
    /// checked by [`MappingTable::validate`].
    pub fn parse(text: &str, origin: &str) -> Result<Self, MappingError> {
        #[derive(Deserialize)]
        struct Header {
            schema: Option<String>,
            version: Option<u32>,
        }
        let parse_error = |e: toml::de::Error| MappingError::Parse {
            origin: origin.to_string(),
            place: asa_layers::toml_error_place(text, &e),
            message: e.message().split_whitespace().collect::<Vec<_>>().join(" "),
        };
        let header: Header = toml::from_str(text).map_err(parse_error)?;
        let (schema, version) = match (header.schema, header.version) {
            (Some(schema), Some(version)) => (schema, version),
            (schema, version) => {
                let missing = match (schema.is_none(), version.is_none()) {
                    (true, true) => "the fields `schema` and `version`",
                    (true, false) => "the field `schema`",
                    _ => "the field `version`",
                };
                return Err(MappingError::MissingHeader {
                    origin: origin.to_string(),
                    missing: missing.to_string(),
                });
            }
        };
        if schema != MAPPING_SCHEMA || version != MAPPING_VERSION {
            return Err(MappingError::WrongVersion {
                origin: origin.to_string(),
                schema,
                version,
            });
        }
        let table: MappingTable = toml::from_str(text).map_err(parse_error)?;
        table.check_format(origin)?;
        Ok(table)
    }

    /// Reads, parses and checks a file (format only; see [`MappingTable::validate`]).
    pub fn load(path: &Path) -> Result<Self, MappingError> {
        let text = std::fs::read_to_string(path).map_err(|error| MappingError::Read {
            path: path.to_path_buf(),
            error,
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// The compiled-in hand-written default table (format-checked).
    pub fn builtin_default() -> Result<Self, MappingError> {
        Self::parse(DEFAULT_TABLE, "mapping/default.toml (built in)")
    }

    fn check_format(&self, origin: &str) -> Result<(), MappingError> {
        let invalid = |message: String| MappingError::Invalid {
            origin: origin.to_string(),
            message,
        };
        if !SOURCES.contains(&self.source.as_str()) {
            return Err(invalid(format!(
                "source {:?} is not one of {}",
                self.source,
                SOURCES.join(", ")
            )));
        }
        if self.source != "hand-written" && self.machine.is_none() {
            return Err(invalid(format!(
                "a {} table must carry its [machine] fingerprint",
                self.source
            )));
        }
        if self.classes.is_empty() {
            return Err(invalid("the table maps no workload class".to_string()));
        }
        let mut seen_classes = BTreeSet::new();
        for class in &self.classes {
            if !seen_classes.insert(class.name.as_str()) {
                return Err(invalid(format!("class {:?} appears twice", class.name)));
            }
            if class.ranked.is_empty() {
                return Err(invalid(format!("class {:?} ranks no expert", class.name)));
            }
            if !class.noise.is_finite() || class.noise < 0.0 {
                return Err(invalid(format!(
                    "class {:?}: noise must be finite and >= 0 (noise {})",
                    class.name, class.noise
                )));
            }
            if class.margin.is_some_and(|m| !m.is_finite()) {
                return Err(invalid(format!(
                    "class {:?}: margin must be finite (margin {:?})",
                    class.name, class.margin
                )));
            }
            let mut seen_experts = BTreeSet::new();
            let mut previous_score = f64::INFINITY;
            for ranked in &class.ranked {
                if !seen_experts.insert(ranked.expert.as_str()) {
                    return Err(invalid(format!(
                        "class {:?} ranks expert {:?} twice",
                        class.name, ranked.expert
                    )));
                }
                if !ranked.score.is_finite() || !ranked.spread.is_finite() || ranked.spread < 0.0 {
                    return Err(invalid(format!(
                        "class {:?}, expert {:?}: score must be finite and spread finite and >= 0 (score {}, spread {})",
                        class.name, ranked.expert, ranked.score, ranked.spread
                    )));
                }
                if ranked.score > previous_score + class.noise {
                    return Err(invalid(format!(
                        "class {:?}: experts must be ranked best first, but {:?} scores {} after a score of {} (noise {})",
                        class.name, ranked.expert, ranked.score, previous_score, class.noise
                    )));
                }
                previous_score = ranked.score;
            }
        }
        layers::check_layer_rows(&self.layers).map_err(invalid)?;
        let mut seen_switches = BTreeSet::new();
        for sw in &self.switches {
            if !seen_switches.insert((sw.from.as_str(), sw.to.as_str())) {
                return Err(invalid(format!(
                    "switch {} -> {} appears twice",
                    sw.from, sw.to
                )));
            }
            let finite = sw.score_cost.is_finite() && sw.spread.is_finite() && sw.run_s.is_finite();
            let time_ok = sw.switch_s.is_none_or(|t| t.is_finite() && t >= 0.0);
            if !finite || !time_ok || sw.spread < 0.0 || sw.run_s <= 0.0 || sw.from == sw.to {
                return Err(invalid(format!(
                    "switch {} -> {}: needs two different experts, a finite score_cost, spread >= 0, run_s > 0 and switch_s >= 0",
                    sw.from, sw.to
                )));
            }
        }
        Ok(())
    }

    /// Checks every expert against `experts` (the catalogue's names) and every class against
    /// `classes` (the classifier's class names). Classes the classifier knows but the table
    /// does not map are allowed (the decision keeps the current expert for them) and returned.
    pub fn validate(
        &self,
        origin: &str,
        experts: &[&str],
        classes: &[&str],
    ) -> Result<Vec<String>, MappingError> {
        for class in &self.classes {
            if !classes.contains(&class.name.as_str()) {
                return Err(MappingError::UnknownClass {
                    origin: origin.to_string(),
                    class: class.name.clone(),
                    known: classes.join(", "),
                });
            }
            for ranked in &class.ranked {
                if !experts.contains(&ranked.expert.as_str()) {
                    return Err(MappingError::UnknownExpert {
                        origin: origin.to_string(),
                        class: class.name.clone(),
                        expert: ranked.expert.clone(),
                        known: experts.join(", "),
                    });
                }
            }
        }
        if let Some(expert) = &self.default_expert {
            if !experts.contains(&expert.as_str()) {
                return Err(MappingError::UnknownExpert {
                    origin: origin.to_string(),
                    class: "default_expert".into(),
                    expert: expert.clone(),
                    known: experts.join(", "),
                });
            }
        }
        for sw in &self.switches {
            for expert in [&sw.from, &sw.to] {
                if !experts.contains(&expert.as_str()) {
                    return Err(MappingError::UnknownExpert {
                        origin: origin.to_string(),
                        class: format!("switch {} -> {}", sw.from, sw.to),
                        expert: expert.clone(),
                        known: experts.join(", "),
                    });
                }
            }
        }
        Ok(classes
            .iter()
            .filter(|c| self.class(c).is_none())
            .map(|c| c.to_string())
            .collect())
    }

    /// Validates against the built-in expert catalogue (`asa_experts::Catalogue::builtin()`).
    pub fn validate_builtin_experts(
        &self,
        origin: &str,
        classes: &[&str],
    ) -> Result<Vec<String>, MappingError> {
        let catalogue = asa_experts::Catalogue::builtin();
        self.validate(origin, &catalogue.names(), classes)
    }

    /// The expert with the best mean score over the classes that compare experts (those ranking
    /// two or more: a class measured under one expert says nothing about the others), among
    /// the experts ranked in every such class, with that mean; ties go to the expert ranked
    /// first in the first such class. None when no class ranks two experts.
    pub fn overall_best(&self) -> Option<(String, f64)> {
        let compared: Vec<&ClassMapping> = self
            .classes
            .iter()
            .filter(|c| c.ranked.len() >= 2)
            .collect();
        let first = compared.first()?;
        let mut best: Option<(String, f64)> = None;
        for candidate in &first.ranked {
            let scores: Option<Vec<f64>> = compared
                .iter()
                .map(|c| {
                    c.ranked
                        .iter()
                        .find(|r| r.expert == candidate.expert)
                        .map(|r| r.score)
                })
                .collect();
            let Some(scores) = scores else { continue };
            let mean = scores.iter().sum::<f64>() / scores.len() as f64;
            if best.as_ref().is_none_or(|(_, b)| mean > *b) {
                best = Some((candidate.expert.clone(), mean));
            }
        }
        best
    }

    /// The expert the agent runs at start-up and when its vote is unsure: the stated
    /// `default_expert`, else, for a calibrated table, its [`MappingTable::overall_best`]
    /// (tables calibrated before the field existed); None for a hand-written table that names
    /// none.
    pub fn default_expert(&self) -> Option<String> {
        self.default_expert.clone().or_else(|| {
            (self.source != "hand-written")
                .then(|| self.overall_best().map(|(expert, _)| expert))
                .flatten()
        })
    }

    /// The table as TOML text (what `asa calibrate` writes).
    pub fn to_toml(&self) -> Result<String, MappingError> {
        let body = toml::to_string(self).map_err(|e| MappingError::Invalid {
            origin: "table".into(),
            message: format!("cannot be written as TOML: {e}"),
        })?;
        Ok(format!(
            "# ASA mapping table (schema {MAPPING_SCHEMA} v{MAPPING_VERSION}), written by asa calibrate; \
             see mapping/README.md.\n{body}"
        ))
    }

    /// The measured cost of switching `from` → `to`, in UX score lost by one switch in a
    /// scenario run of [`SwitchCost::run_s`] seconds, with that run length; `None`
    /// when this switch was not measured. A negative measured cost counts as 0.
    pub fn switch_cost(&self, from: &str, to: &str) -> Option<(f64, f64)> {
        self.switches
            .iter()
            .find(|s| s.from == from && s.to == to)
            .map(|s| (s.score_cost.max(0.0), s.run_s))
    }

    /// The entry of one class.
    pub fn class(&self, name: &str) -> Option<&ClassMapping> {
        self.classes.iter().find(|c| c.name == name)
    }

    /// Renders the table as aligned text (for `asa mapping show`).
    pub fn render(&self) -> String {
        let mut out = format!(
            "{} v{} · source {} · created {}\n",
            self.schema, self.version, self.source, self.created
        );
        match &self.machine {
            Some(m) => out.push_str(&format!(
                "machine: {} · {} CPUs{} · {} MiB · kernel {}\n",
                m.cpu_model,
                m.cores,
                if m.smt { " (SMT)" } else { "" },
                m.memory_mib,
                m.kernel_release
            )),
            None => out.push_str("machine: none (not calibrated)\n"),
        }
        let width = self
            .classes
            .iter()
            .map(|c| c.name.len())
            .max()
            .unwrap_or(5)
            .max(5);
        out.push_str(&format!(
            "{:width$}  ranked experts (score ± spread, runs)\n",
            "class"
        ));
        for class in &self.classes {
            let ranked: Vec<String> = class
                .ranked
                .iter()
                .map(|r| format!("{} {:.3}±{:.3} ({})", r.expert, r.score, r.spread, r.runs))
                .collect();
            let mut notes = Vec::new();
            if class.noise > 0.0 {
                notes.push(format!("noise {:.3}", class.noise));
            }
            if let Some(m) = class.margin {
                notes.push(format!("margin {m:+.3}"));
            }
            match class.settled {
                Some(true) => notes.push("settled".to_string()),
                Some(false) => notes.push("open".to_string()),
                None => {}
            }
            match class.boots {
                Some(1) => notes.push("one boot".to_string()),
                Some(n) if n > 1 => notes.push(format!("{n} boots")),
                _ => {}
            }
            let noise = if notes.is_empty() {
                String::new()
            } else {
                format!("  ({})", notes.join(", "))
            };
            out.push_str(&format!(
                "{:width$}  {}{noise}\n",
                class.name,
                ranked.join(" > ")
            ));
        }
        out.push_str(&self.render_layers());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXPERTS: [&str; 3] = ["eevdf", "bpfland", "lavd"];
    const CLASSES: [&str; 2] = ["game+kernel_build", "audio+disk_io"];

    fn table(body: &str) -> String {
        format!(
            "schema = \"asa.mapping\"\nversion = 1\nsource = \"hand-written\"\ncreated = \"2026-11-22\"\n{body}"
        )
    }

    const TWO_CLASSES: &str = r#"
[[class]]
name = "game+kernel_build"
ranked = [
  { expert = "bpfland", score = 0.8, spread = 0.05, runs = 3 },
  { expert = "eevdf", score = 0.6, spread = 0.02, runs = 3 },
]
[[class]]
name = "audio+disk_io"
ranked = [{ expert = "eevdf", score = 0.5, spread = 0.0, runs = 0 }]
"#;

    #[test]
    fn parses_and_validates_a_good_table() {
        let t = MappingTable::parse(&table(TWO_CLASSES), "t").unwrap();
        assert_eq!(t.classes.len(), 2);
        let best = t.class("game+kernel_build").unwrap().best_usable(|_| true);
        assert_eq!(best.unwrap().expert, "bpfland");
        let skip_bpfland = t
            .class("game+kernel_build")
            .unwrap()
            .best_usable(|e| e != "bpfland");
        assert_eq!(skip_bpfland.unwrap().expert, "eevdf");
        let unmapped = t.validate("t", &EXPERTS, &CLASSES).unwrap();
        assert!(unmapped.is_empty());
        let unmapped = t
            .validate(
                "t",
                &EXPERTS,
                &["game+kernel_build", "audio+disk_io", "idle"],
            )
            .unwrap();
        assert_eq!(unmapped, vec!["idle".to_string()]);
    }

    #[test]
    fn switch_costs_are_checked_and_looked_up() {
        let with = |switches: &str| {
            format!(
                "schema = \"asa.mapping\"\nversion = 1\nsource = \"overhead\"\ncreated = \"2026-11-22\"\n\
                 [machine]\ncpu_model = \"x\"\ncores = 2\nsmt = false\nmemory_mib = 1\nkernel_release = \"7\"\n\
                 {TWO_CLASSES}{switches}"
            )
        };
        let good = "[[switch]]\nfrom = \"eevdf\"\nto = \"bpfland\"\nscore_cost = 0.04\nspread = 0.01\nruns = 2\nrun_s = 20.0\n\
                    [[switch]]\nfrom = \"bpfland\"\nto = \"eevdf\"\nscore_cost = -0.01\nspread = 0.02\nruns = 2\nrun_s = 20.0\n";
        let t = MappingTable::parse(&with(good), "t").unwrap();
        assert_eq!(t.switch_cost("eevdf", "bpfland"), Some((0.04, 20.0)));
        assert_eq!(
            t.switch_cost("bpfland", "eevdf"),
            Some((0.0, 20.0)),
            "a gain counts as free"
        );
        assert_eq!(t.switch_cost("eevdf", "lavd"), None);
        assert!(t.validate("t", &EXPERTS, &CLASSES).is_ok());
        assert!(matches!(
            t.validate("t", &["eevdf", "lavd"], &CLASSES),
            Err(MappingError::UnknownExpert { .. })
        ));
        let twice = good.replace(
            "from = \"bpfland\"\nto = \"eevdf\"",
            "from = \"eevdf\"\nto = \"bpfland\"",
        );
        let err = MappingTable::parse(&with(&twice), "t")
            .unwrap_err()
            .to_string();
        assert!(err.contains("appears twice"), "{err}");
        let bad = good.replace("run_s = 20.0\n[[switch]]", "run_s = 0.0\n[[switch]]");
        let err = MappingTable::parse(&with(&bad), "t")
            .unwrap_err()
            .to_string();
        assert!(err.contains("run_s > 0"), "{err}");
        // The switch time is optional (older tables), and must be a duration when given.
        let timed = good.replace(
            "run_s = 20.0\n[[switch]]",
            "run_s = 20.0\nswitch_s = 31.5\n[[switch]]",
        );
        let t2 = MappingTable::parse(&with(&timed), "t").unwrap();
        assert_eq!(t2.switches[0].switch_s, Some(31.5));
        assert_eq!(t2.switches[1].switch_s, None);
        assert_eq!(
            MappingTable::parse(&t2.to_toml().unwrap(), "t").unwrap(),
            t2
        );
        let negative = timed.replace("switch_s = 31.5", "switch_s = -1.0");
        let err = MappingTable::parse(&with(&negative), "t")
            .unwrap_err()
            .to_string();
        assert!(err.contains("switch_s >= 0"), "{err}");
        // Round trip keeps them.
        assert_eq!(MappingTable::parse(&t.to_toml().unwrap(), "t").unwrap(), t);
    }

    /// Tables written before rows recorded their margin and settlement still read (both
    /// absent); a row that has them keeps them through a round trip and says them.
    #[test]
    fn a_row_records_its_margin_and_whether_it_is_settled() {
        let old = MappingTable::parse(&table(TWO_CLASSES), "t").unwrap();
        let row = old.class("game+kernel_build").unwrap();
        assert_eq!((row.margin, row.settled), (None, None));
        assert_eq!(row.confidence(), "bpfland first, margin not recorded");
        let text = table(TWO_CLASSES).replace(
            "name = \"game+kernel_build\"\n",
            "name = \"game+kernel_build\"\nmargin = 0.2\nsettled = true\n",
        );
        let t = MappingTable::parse(&text, "t").unwrap();
        let row = t.class("game+kernel_build").unwrap();
        assert_eq!((row.margin, row.settled), (Some(0.2), Some(true)));
        assert_eq!(
            row.confidence(),
            "bpfland first, +0.200 over eevdf, settled"
        );
        assert!(
            t.render().contains("(margin +0.200, settled)"),
            "{}",
            t.render()
        );
        assert_eq!(MappingTable::parse(&t.to_toml().unwrap(), "t").unwrap(), t);
        let mut open = row.clone();
        (open.margin, open.settled, open.noise) = (Some(-0.027), Some(false), 0.061);
        assert_eq!(
            open.confidence(),
            "bpfland first, -0.027 over eevdf (noise 0.061), open: more runs could change it"
        );
        let alone = t.class("audio+disk_io").unwrap();
        assert_eq!(alone.confidence(), "eevdf first, the only expert measured");
        assert_eq!(row.boots, None);
        let bad = text.replace("margin = 0.2", "margin = nan");
        let err = MappingTable::parse(&bad, "t").unwrap_err().to_string();
        assert!(err.contains("margin must be finite"), "{err}");
    }

    /// A row calibrated across boots says on how many; tables without `boots` parse as before.
    #[test]
    fn a_class_row_of_one_boot_is_labelled_as_one_boot() {
        let text = table(TWO_CLASSES).replace(
            "name = \"game+kernel_build\"\n",
            "name = \"game+kernel_build\"\nmargin = 0.2\nboots = 1\n",
        );
        let t = MappingTable::parse(&text, "t").unwrap();
        let row = t.class("game+kernel_build").unwrap();
        assert_eq!(row.boots, Some(1));
        assert_eq!(
            row.confidence(),
            "bpfland first, +0.200 over eevdf, one boot"
        );
        assert!(
            t.render().contains("(margin +0.200, one boot)"),
            "{}",
            t.render()
        );
        assert_eq!(MappingTable::parse(&t.to_toml().unwrap(), "t").unwrap(), t);
        let two = MappingTable::parse(&text.replace("boots = 1", "boots = 3"), "t").unwrap();
        assert!(two.render().contains("3 boots"), "{}", two.render());
    }

    #[test]
    fn wrong_version_and_schema_are_refused() {
        let text = table(TWO_CLASSES).replace("version = 1", "version = 2");
        let err = MappingTable::parse(&text, "t").unwrap_err();
        assert!(
            matches!(err, MappingError::WrongVersion { version: 2, .. }),
            "{err}"
        );
        let text = table(TWO_CLASSES).replace("asa.mapping", "asa.experts");
        let err = MappingTable::parse(&text, "t").unwrap_err();
        assert!(err.to_string().contains("asa.experts v1"), "{err}");
    }

    /// A class ranking one expert compares nothing and is left out: in TWO_CLASSES only the
    /// first class counts, where bpfland leads. Once the second ranks two experts, an expert
    /// must be ranked in both.
    #[test]
    fn the_overall_best_is_ranked_in_every_class_that_compares() {
        let t = MappingTable::parse(&table(TWO_CLASSES), "t").unwrap();
        let (expert, mean) = t.overall_best().unwrap();
        assert_eq!(expert, "bpfland");
        assert!((mean - 0.8).abs() < 1e-12);
        let both = TWO_CLASSES.replace(
            r#"ranked = [{ expert = "eevdf", score = 0.5, spread = 0.0, runs = 0 }]"#,
            r#"ranked = [{ expert = "eevdf", score = 0.5, spread = 0.0, runs = 0 }, { expert = "bpfland", score = 0.45, spread = 0.0, runs = 0 }]"#,
        );
        let t = MappingTable::parse(&table(&both), "t").unwrap();
        assert_eq!(t.overall_best().unwrap().0, "bpfland"); // (0.8 + 0.45) / 2 > 0.55
        let eevdf_better = both.replace("score = 0.45", "score = 0.2");
        let t = MappingTable::parse(&table(&eevdf_better), "t").unwrap();
        assert_eq!(t.overall_best().unwrap().0, "eevdf"); // 0.55 > (0.8 + 0.2) / 2
    }

    #[test]
    fn a_calibrated_table_without_a_default_expert_uses_its_overall_best() {
        let hand = MappingTable::parse(&table(TWO_CLASSES), "t").unwrap();
        assert_eq!(hand.default_expert(), None);
        let mut calibrated = hand.clone();
        calibrated.source = "live".into();
        assert_eq!(calibrated.default_expert().as_deref(), Some("bpfland"));
        calibrated.default_expert = Some("eevdf".into());
        assert_eq!(calibrated.default_expert().as_deref(), Some("eevdf"));
    }

    #[test]
    fn a_default_expert_must_be_in_the_catalogue() {
        let text = table(TWO_CLASSES).replace(
            "created = \"2026-11-22\"",
            "created = \"2026-11-22\"\ndefault_expert = \"nope\"",
        );
        let t = MappingTable::parse(&text, "t").unwrap();
        assert_eq!(t.default_expert.as_deref(), Some("nope"));
        let err = t.validate("t", &EXPERTS, &CLASSES).unwrap_err();
        assert!(
            matches!(&err, MappingError::UnknownExpert { expert, class, .. } if expert == "nope" && class == "default_expert"),
            "{err}"
        );
        let t = MappingTable::parse(&text.replace("nope", "bpfland"), "t").unwrap();
        t.validate("t", &EXPERTS, &CLASSES).unwrap();
        assert!(t
            .to_toml()
            .unwrap()
            .contains("default_expert = \"bpfland\""));
    }

    #[test]
    fn unknown_expert_and_class_are_refused() {
        let t = MappingTable::parse(&table(TWO_CLASSES), "t").unwrap();
        let err = t.validate("t", &["eevdf", "lavd"], &CLASSES).unwrap_err();
        assert!(
            matches!(&err, MappingError::UnknownExpert { expert, .. } if expert == "bpfland"),
            "{err}"
        );
        let err = t
            .validate("t", &EXPERTS, &["game+kernel_build"])
            .unwrap_err();
        assert!(
            matches!(&err, MappingError::UnknownClass { class, .. } if class == "audio+disk_io"),
            "{err}"
        );
    }

    /// Every error is one line (a journal line, a terminal line).
    fn one_line(err: &MappingError) -> String {
        let text = err.to_string();
        assert!(!text.contains('\n'), "more than one line: {text}");
        text
    }

    #[test]
    fn text_that_is_not_toml_is_refused_with_its_line_and_column() {
        let err =
            MappingTable::parse("schema = \"asa.mapping\"\nnot toml [[[\n", "m.toml").unwrap_err();
        let text = one_line(&err);
        assert!(
            text.starts_with("mapping table m.toml is not valid TOML"),
            "{text}"
        );
        assert!(text.contains(" at line 2, column 5: "), "{text}");
        assert!(text.contains("mapping/default.toml"), "{text}");
    }

    #[test]
    fn a_field_of_the_wrong_shape_is_refused_with_its_line_and_column() {
        let text = table(TWO_CLASSES).replace("ranked = [{", "rank = 1\nranked = [{");
        let err = MappingTable::parse(&text, "m.toml").unwrap_err();
        let message = one_line(&err);
        assert!(message.contains("unknown field `rank`"), "{message}");
        assert!(message.contains(" at line 14, column 1: "), "{message}");
        let err = MappingTable::parse("schema = \"asa.mapping\"\nversion = \"1\"\n", "m.toml")
            .unwrap_err();
        assert!(one_line(&err).contains(" at line 2, column 11: "), "{err}");
    }

    #[test]
    fn a_file_without_schema_and_version_is_told_what_they_should_be() {
        let err = MappingTable::parse("a = 1\n", "m.toml").unwrap_err();
        assert!(matches!(err, MappingError::MissingHeader { .. }), "{err}");
        let text = one_line(&err);
        assert!(
            text.contains("lacks the fields `schema` and `version`"),
            "{text}"
        );
        assert!(
            text.contains("schema = \"asa.mapping\" and version = 1"),
            "{text}"
        );
        assert!(!text.contains(" v0"), "{text}");
        let err = MappingTable::parse("schema = \"asa.mapping\"\n", "m.toml").unwrap_err();
        assert!(
            one_line(&err).contains("lacks the field `version`"),
            "{err}"
        );
        let err = MappingTable::parse("version = 1\n", "m.toml").unwrap_err();
        assert!(one_line(&err).contains("lacks the field `schema`"), "{err}");
    }

    /// The I/O error is in the message and is no source: printed as an error chain it appears
    /// once, with what to do.
    #[test]
    fn a_missing_or_non_utf8_file_names_its_cause_once_and_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("none.toml");
        let err = MappingTable::load(&missing).unwrap_err();
        assert!(std::error::Error::source(&err).is_none());
        let text = one_line(&err);
        assert!(text.contains(&missing.display().to_string()), "{text}");
        assert_eq!(text.matches("os error 2").count(), 1, "{text}");
        assert!(text.contains("check the path"), "{text}");
        let binary = dir.path().join("binary.toml");
        std::fs::write(&binary, b"\xff\xfe schema").unwrap();
        let text = one_line(&MappingTable::load(&binary).unwrap_err());
        assert_eq!(text.matches("valid UTF-8").count(), 1, "{text}");
        assert!(text.contains("UTF-8 TOML text"), "{text}");
    }

    #[test]
    fn format_errors_are_refused() {
        let cases = [
            // ranked worst first
            r#"[[class]]
name = "a"
ranked = [{ expert = "eevdf", score = 0.1, spread = 0.0, runs = 1 }, { expert = "lavd", score = 0.9, spread = 0.0, runs = 1 }]"#,
            // duplicate expert
            r#"[[class]]
name = "a"
ranked = [{ expert = "eevdf", score = 0.9, spread = 0.0, runs = 1 }, { expert = "eevdf", score = 0.1, spread = 0.0, runs = 1 }]"#,
            // duplicate class
            r#"[[class]]
name = "a"
ranked = [{ expert = "eevdf", score = 0.9, spread = 0.0, runs = 1 }]
[[class]]
name = "a"
ranked = [{ expert = "eevdf", score = 0.9, spread = 0.0, runs = 1 }]"#,
            // negative spread
            r#"[[class]]
name = "a"
ranked = [{ expert = "eevdf", score = 0.9, spread = -1.0, runs = 1 }]"#,
            // empty ranking
            "[[class]]\nname = \"a\"\nranked = []",
            // no class at all
            "",
            // unknown field
            r#"[[class]]
name = "a"
rank = []"#,
        ];
        for body in cases {
            let err = MappingTable::parse(&table(body), "t");
            assert!(err.is_err(), "accepted: {body}");
        }
    }

    #[test]
    fn calibrated_table_needs_a_machine() {
        let text = table(TWO_CLASSES).replace("hand-written", "prototype");
        let err = MappingTable::parse(&text, "t").unwrap_err();
        assert!(err.to_string().contains("[machine]"), "{err}");
        let with_machine = format!(
            "{text}\n[machine]\ncpu_model = \"AMD EPYC\"\ncores = 2\nsmt = false\nmemory_mib = 24576\nkernel_release = \"7.2.13\"\nexpert_versions = {{ bpfland = \"1.1.4\" }}\n"
        );
        let t = MappingTable::parse(&with_machine, "t").unwrap();
        assert_eq!(t.machine.as_ref().unwrap().cores, 2);
        assert!(t.render().contains("AMD EPYC · 2 CPUs · 24576 MiB"));
    }

    #[test]
    fn load_reports_missing_file_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("none.toml");
        let err = MappingTable::load(&path).unwrap_err();
        assert!(err.to_string().contains("none.toml"), "{err}");
        std::fs::write(&path, table(TWO_CLASSES)).unwrap();
        assert_eq!(MappingTable::load(&path).unwrap().classes.len(), 2);
    }
}
