//! The feature schema (`agent/feature_schema.toml`): name, version and the ordered features
//! with unit, source and a one-line doc. The same file is read by the Python classifier
//! (`classifier/asa_classifier/schema.py`), so a model, a recording and the live sampler agree
//! on what column *i* means.

use std::collections::HashSet;
use std::fmt;
use std::path::Path;

use serde::Deserialize;
use thiserror::Error;

/// Schema name this build's sampler produces.
pub const SCHEMA_NAME: &str = "asa.features";
/// Schema version this build's sampler produces.
pub const SCHEMA_VERSION: u32 = 3;

/// The schema file compiled into the binary (the same bytes as `agent/feature_schema.toml`).
pub const BUILTIN_SCHEMA_TOML: &str = include_str!("../../feature_schema.toml");

/// Where a feature's value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FeatureSource {
    /// Read from /proc; always available.
    Procfs,
    /// Counted by the perception BPF program; NaN (missing) without BPF rights or BTF.
    Bpf,
}

impl fmt::Display for FeatureSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FeatureSource::Procfs => "procfs",
            FeatureSource::Bpf => "bpf",
        })
    }
}

/// One feature of the schema.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeatureSpec {
    /// Column name in recordings and model metadata.
    pub name: String,
    /// Unit (`share` = fraction in [0, 1], `1/s`, `ms`, `us`, ...).
    pub unit: String,
    /// Where the value comes from.
    pub source: FeatureSource,
    /// One-line description.
    pub doc: String,
    /// The schema version the feature first appeared in (1 when absent from the file).
    #[serde(default = "first_version")]
    pub since: u32,
}

fn first_version() -> u32 {
    1
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SchemaFileToml {
    schema: String,
    version: u32,
    #[serde(default)]
    feature: Vec<FeatureSpec>,
}

/// A loaded and validated feature schema file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaFile {
    /// Schema name (`asa.features`).
    pub name: String,
    /// Schema version.
    pub version: u32,
    /// Features in vector order.
    pub features: Vec<FeatureSpec>,
}

/// Why a schema file or a model's schema is refused.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SchemaError {
    /// The text is not valid TOML of the expected shape.
    #[error("{origin}: not a feature schema file (schema, version, [[feature]] name/unit/source/doc): {message}")]
    Parse {
        /// File name or "built-in".
        origin: String,
        /// The TOML parser's message.
        message: String,
    },
    /// The file is for another schema or version than this build's sampler produces.
    #[error("{origin}: feature schema {found_name} v{found_version}, this build samples {expected_name} v{expected_version}")]
    WrongSchema {
        /// File name or "built-in".
        origin: String,
        /// Name found in the file.
        found_name: String,
        /// Version found in the file.
        found_version: u32,
        /// [`SCHEMA_NAME`].
        expected_name: String,
        /// [`SCHEMA_VERSION`].
        expected_version: u32,
    },
    /// The file lists no feature.
    #[error("{origin}: the schema lists no feature")]
    Empty {
        /// File name or "built-in".
        origin: String,
    },
    /// A feature name appears twice.
    #[error("{origin}: feature {name:?} appears twice (positions {first} and {second})")]
    Duplicate {
        /// File name or "built-in".
        origin: String,
        /// The repeated name.
        name: String,
        /// First position.
        first: usize,
        /// Second position.
        second: usize,
    },
    /// A feature the sampler does not know how to compute.
    #[error("{origin}: feature {name:?} (position {position}) is not produced by this sampler")]
    UnknownFeature {
        /// File name or "built-in".
        origin: String,
        /// The unknown name.
        name: String,
        /// Its position.
        position: usize,
    },
    /// A feature declared with another source than the sampler's.
    #[error("{origin}: feature {name:?} is declared source {declared}, the sampler computes it from {actual}")]
    WrongSource {
        /// File name or "built-in".
        origin: String,
        /// The feature.
        name: String,
        /// Source in the file.
        declared: FeatureSource,
        /// Source in the sampler.
        actual: FeatureSource,
    },
    /// A feature's `since` is 0, above the schema's version, or below that of a feature
    /// before it (a version only appends features).
    #[error("{origin}: feature {name:?} (position {position}) has since = {since}: a version only appends features, so since must be 1..={version} and never decrease along the file")]
    BadSince {
        /// File name or "built-in".
        origin: String,
        /// The feature.
        name: String,
        /// Its position.
        position: usize,
        /// Its `since`.
        since: u32,
        /// The schema's version.
        version: u32,
    },
    /// A model (or recording) was made for another schema than the live one.
    #[error("{what} does not match the live feature schema: {message}")]
    Mismatch {
        /// What was checked (e.g. the model path).
        what: String,
        /// The first difference.
        message: String,
    },
}

impl SchemaFile {
    /// The schema compiled into the binary.
    pub fn builtin() -> Result<Self, SchemaError> {
        Self::parse(BUILTIN_SCHEMA_TOML, "built-in feature_schema.toml")
    }

    /// Loads and validates a schema file.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        use anyhow::Context;
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("read the feature schema {}", path.display()))?;
        Ok(Self::parse(&text, &path.display().to_string())?)
    }

    /// Parses and validates schema text: the right schema name and version, at least one
    /// feature, no duplicates, and every feature known to the sampler with its source.
    pub fn parse(text: &str, origin: &str) -> Result<Self, SchemaError> {
        let raw: SchemaFileToml = toml::from_str(text).map_err(|e| SchemaError::Parse {
            origin: origin.to_string(),
            message: e.message().to_string(),
        })?;
        if raw.schema != SCHEMA_NAME || raw.version != SCHEMA_VERSION {
            return Err(SchemaError::WrongSchema {
                origin: origin.to_string(),
                found_name: raw.schema,
                found_version: raw.version,
                expected_name: SCHEMA_NAME.to_string(),
                expected_version: SCHEMA_VERSION,
            });
        }
        let schema = SchemaFile {
            name: raw.schema,
            version: raw.version,
            features: raw.feature,
        };
        schema.validate(origin, super::known_feature_source)?;
        Ok(schema)
    }

    /// Structural checks; `known` maps a feature name to the source the sampler computes it
    /// from (None = unknown).
    fn validate(
        &self,
        origin: &str,
        known: impl Fn(&str) -> Option<FeatureSource>,
    ) -> Result<(), SchemaError> {
        if self.features.is_empty() {
            return Err(SchemaError::Empty {
                origin: origin.to_string(),
            });
        }
        let mut seen = std::collections::HashMap::new();
        let mut last_since = 1;
        for (position, feature) in self.features.iter().enumerate() {
            if feature.since == 0 || feature.since > self.version || feature.since < last_since {
                return Err(SchemaError::BadSince {
                    origin: origin.to_string(),
                    name: feature.name.clone(),
                    position,
                    since: feature.since,
                    version: self.version,
                });
            }
            last_since = feature.since;
            if let Some(first) = seen.insert(feature.name.as_str(), position) {
                return Err(SchemaError::Duplicate {
                    origin: origin.to_string(),
                    name: feature.name.clone(),
                    first,
                    second: position,
                });
            }
            match known(&feature.name) {
                None => {
                    return Err(SchemaError::UnknownFeature {
                        origin: origin.to_string(),
                        name: feature.name.clone(),
                        position,
                    })
                }
                Some(actual) if actual != feature.source => {
                    return Err(SchemaError::WrongSource {
                        origin: origin.to_string(),
                        name: feature.name.clone(),
                        declared: feature.source,
                        actual,
                    })
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// Feature names in vector order.
    pub fn names(&self) -> Vec<String> {
        self.features.iter().map(|f| f.name.clone()).collect()
    }

    /// Names of the features of one source.
    pub fn names_from(&self, source: FeatureSource) -> HashSet<&str> {
        self.features
            .iter()
            .filter(|f| f.source == source)
            .map(|f| f.name.as_str())
            .collect()
    }

    /// The schema as the classifier sees it (name, version, ordered names).
    pub fn to_feature_schema(&self) -> FeatureSchema {
        FeatureSchema {
            name: self.name.clone(),
            version: self.version,
            features: self.names(),
            since: self.features.iter().map(|f| f.since).collect(),
        }
    }

    /// Checks that a model (or a recording) was made for this schema: same name, this version
    /// or an older one, and exactly the feature names of that version in order (see
    /// [`check_schema`]); returns the live position of each of
    /// its features. `what` names the model in the error.
    pub fn check_model(
        &self,
        what: &str,
        name: &str,
        version: u32,
        features: &[String],
    ) -> Result<Vec<usize>, SchemaError> {
        let model = FeatureSchema {
            name: name.to_string(),
            version,
            features: features.to_vec(),
            since: Vec::new(),
        };
        check_schema(&self.to_feature_schema(), &model).map_err(|message| SchemaError::Mismatch {
            what: what.to_string(),
            message,
        })
    }
}

/// A feature schema as the classifier sees it: its name and version and the feature names in
/// the order the sampler writes them ([`SchemaFile::to_feature_schema`] for the live one; a
/// model declares its own).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, Deserialize)]
pub struct FeatureSchema {
    /// Schema name (e.g. `asa.features`).
    pub name: String,
    /// Schema version.
    pub version: u32,
    /// Feature names, in vector order.
    pub features: Vec<String>,
    /// The schema version each feature first appeared in, parallel to `features` (empty: all
    /// of them belong to `version`; so it is for a schema a model declares).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub since: Vec<u32>,
}

impl FeatureSchema {
    /// The positions (in this schema's vector) and names of the features an older `version`
    /// of this schema had, in order.
    pub fn as_of(&self, version: u32) -> (Vec<usize>, Vec<&str>) {
        self.features
            .iter()
            .enumerate()
            .filter(|(i, _)| self.since.get(*i).copied().unwrap_or(self.version) <= version)
            .map(|(i, name)| (i, name.as_str()))
            .unzip()
    }
}

/// Compares the model's schema with the live one. The model must be of the live schema, of
/// its version or an older one, and list exactly the live features of its version (those with
/// `since` <= its version), in order. Returns the live position of each model feature; the
/// error names the first difference.
pub fn check_schema(live: &FeatureSchema, model: &FeatureSchema) -> Result<Vec<usize>, String> {
    if live.name != model.name || model.version > live.version {
        return Err(format!(
            "the model was trained on feature schema {} v{}, the live schema is {} v{}{}",
            model.name,
            model.version,
            live.name,
            live.version,
            if live.name == model.name {
                " (a newer schema: update asa or use a model of this one)"
            } else {
                ""
            }
        ));
    }
    let (columns, names) = live.as_of(model.version);
    if names
        .iter()
        .copied()
        .ne(model.features.iter().map(String::as_str))
    {
        let first = names
            .iter()
            .zip(&model.features)
            .position(|(a, b)| a != b)
            .unwrap_or(names.len().min(model.features.len()));
        return Err(format!(
            "{} v{}: the model has {} features, the live schema {}{}; first difference at position {first}: model {:?}, live {:?}",
            live.name,
            model.version,
            model.features.len(),
            names.len(),
            if model.version < live.version {
                format!(" as of v{} (of {} in v{})", model.version, live.features.len(), live.version)
            } else {
                String::new()
            },
            model.features.get(first).map(String::as_str).unwrap_or("(none)"),
            names.get(first).copied().unwrap_or("(none)"),
        ));
    }
    Ok(columns)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(name: &str) -> Option<FeatureSource> {
        match name {
            "a" | "b" => Some(FeatureSource::Procfs),
            "s" => Some(FeatureSource::Bpf),
            _ => None,
        }
    }

    fn feature(name: &str, source: FeatureSource) -> FeatureSpec {
        FeatureSpec {
            name: name.into(),
            unit: "1/s".into(),
            source,
            doc: "d".into(),
            since: 1,
        }
    }

    fn schema(features: Vec<FeatureSpec>) -> SchemaFile {
        SchemaFile {
            name: SCHEMA_NAME.into(),
            version: SCHEMA_VERSION,
            features,
        }
    }

    #[test]
    fn builtin_schema_is_valid_and_every_known_feature_is_listed_once() {
        let schema = SchemaFile::builtin().expect("the committed schema validates");
        assert_eq!(schema.name, "asa.features");
        assert_eq!(schema.version, SCHEMA_VERSION);
        assert_eq!(
            schema.features.last().map(|f| f.since),
            Some(SCHEMA_VERSION),
            "each version appends features"
        );
        let names = schema.names();
        for known in super::super::KNOWN_FEATURES {
            assert_eq!(
                names.iter().filter(|n| *n == known.0).count(),
                1,
                "{} must be in the schema exactly once",
                known.0
            );
        }
        assert_eq!(names.len(), super::super::KNOWN_FEATURES.len());
    }

    #[test]
    fn structural_errors_are_reported() {
        use FeatureSource::*;
        assert_eq!(
            schema(vec![]).validate("t", known),
            Err(SchemaError::Empty { origin: "t".into() })
        );
        assert_eq!(
            schema(vec![
                feature("a", Procfs),
                feature("b", Procfs),
                feature("a", Procfs)
            ])
            .validate("t", known),
            Err(SchemaError::Duplicate {
                origin: "t".into(),
                name: "a".into(),
                first: 0,
                second: 2
            })
        );
        assert_eq!(
            schema(vec![feature("a", Procfs), feature("zz", Procfs)]).validate("t", known),
            Err(SchemaError::UnknownFeature {
                origin: "t".into(),
                name: "zz".into(),
                position: 1
            })
        );
        assert_eq!(
            schema(vec![feature("s", Procfs)]).validate("t", known),
            Err(SchemaError::WrongSource {
                origin: "t".into(),
                name: "s".into(),
                declared: Procfs,
                actual: Bpf
            })
        );
        assert!(schema(vec![feature("b", Procfs), feature("s", Bpf)])
            .validate("t", known)
            .is_ok());
        // `since`: 1..=version, never decreasing (a version only appends features).
        let since = |name: &str, since: u32| FeatureSpec {
            since,
            ..feature(name, Procfs)
        };
        let bad_since = |features: Vec<FeatureSpec>| match schema(features).validate("t", known) {
            Err(SchemaError::BadSince { name, .. }) => name,
            other => panic!("expected BadSince, got {other:?}"),
        };
        assert_eq!(bad_since(vec![since("a", 2), since("b", 1)]), "b");
        assert_eq!(bad_since(vec![since("a", SCHEMA_VERSION + 1)]), "a");
        assert_eq!(bad_since(vec![since("a", 1), since("b", 0)]), "b");
        let ok = schema(vec![since("a", 1), since("b", 2)]);
        assert!(ok.validate("t", known).is_ok());
        assert_eq!(ok.to_feature_schema().since, vec![1, 2]);
    }

    #[test]
    fn parse_errors_name_and_version() {
        let next = SCHEMA_VERSION + 1;
        let wrong_version = BUILTIN_SCHEMA_TOML.replace(
            &format!("\nversion = {SCHEMA_VERSION}\n"),
            &format!("\nversion = {next}\n"),
        );
        match SchemaFile::parse(&wrong_version, "f.toml") {
            Err(SchemaError::WrongSchema { found_version, .. }) if found_version == next => {}
            other => panic!("expected WrongSchema, got {other:?}"),
        }
        let bad_source = "schema = \"asa.features\"\nversion = 1\n[[feature]]\nname = \"ctxt_per_s\"\nunit = \"1/s\"\nsource = \"ebpf\"\ndoc = \"x\"\n";
        assert!(matches!(
            SchemaFile::parse(bad_source, "f.toml"),
            Err(SchemaError::Parse { .. })
        ));
        let missing_doc = "schema = \"asa.features\"\nversion = 1\n[[feature]]\nname = \"ctxt_per_s\"\nunit = \"1/s\"\nsource = \"procfs\"\n";
        let err = SchemaFile::parse(missing_doc, "f.toml").unwrap_err();
        assert!(err.to_string().contains("doc"), "{err}");
        let subset = format!("schema = \"asa.features\"\nversion = {SCHEMA_VERSION}\n[[feature]]\nname = \"ctxt_per_s\"\nunit = \"1/s\"\nsource = \"procfs\"\ndoc = \"x\"\n");
        assert_eq!(
            SchemaFile::parse(&subset, "f.toml").unwrap().names(),
            ["ctxt_per_s"]
        );
    }

    #[test]
    fn model_check_refuses_other_versions_and_orders() {
        let live = schema(vec![
            feature("a", FeatureSource::Procfs),
            feature("b", FeatureSource::Procfs),
        ]);
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(live
            .check_model("m", SCHEMA_NAME, SCHEMA_VERSION, &names(&["a", "b"]))
            .is_ok());
        let err = live
            .check_model("m.onnx", SCHEMA_NAME, 7, &names(&["a", "b"]))
            .unwrap_err();
        assert!(err.to_string().contains("v7"), "{err}");
        let err = live
            .check_model("m.onnx", SCHEMA_NAME, SCHEMA_VERSION, &names(&["b", "a"]))
            .unwrap_err();
        assert!(err.to_string().contains("position 0"), "{err}");
        assert!(live
            .check_model("m", "other", SCHEMA_VERSION, &names(&["a", "b"]))
            .is_err());
    }

    fn feature_schema(names: &[&str]) -> FeatureSchema {
        FeatureSchema {
            name: "asa.features".into(),
            version: 2,
            features: names.iter().map(|s| s.to_string()).collect(),
            since: Vec::new(),
        }
    }

    #[test]
    fn schema_check_names_the_first_difference() {
        let live = feature_schema(&["cpu_user", "cpu_system", "ctx_switches"]);
        assert!(check_schema(&live, &live.clone()).is_ok());
        let swapped = feature_schema(&["cpu_user", "ctx_switches", "cpu_system"]);
        let err = check_schema(&live, &swapped).unwrap_err();
        assert!(err.contains("position 1"), "{err}");
        assert!(err.contains("\"ctx_switches\""), "{err}");
        let shorter = feature_schema(&["cpu_user", "cpu_system"]);
        let err = check_schema(&live, &shorter).unwrap_err();
        assert!(
            err.contains("position 2") && err.contains("has 2 features"),
            "{err}"
        );
        let mut newer = live.clone();
        newer.version = 3;
        let err = check_schema(&live, &newer).unwrap_err();
        assert!(
            err.contains("asa.features v3")
                && err.contains("asa.features v2")
                && err.contains("newer"),
            "{err}"
        );
        let mut other = live.clone();
        other.name = "other.features".into();
        assert!(check_schema(&live, &other).is_err());
    }

    /// A model of an older schema version gets the features of its version, by position in
    /// the live vector; anything else is refused with the first difference.
    #[test]
    fn older_models_get_the_features_of_their_version() {
        let mut live = feature_schema(&["cpu_user", "top_threads", "cpu_system", "io_rate"]);
        live.since = vec![1, 2, 1, 2];
        assert_eq!(live.as_of(1), (vec![0, 2], vec!["cpu_user", "cpu_system"]));
        assert_eq!(
            check_schema(&live, &live.clone()).unwrap(),
            vec![0, 1, 2, 3]
        );
        let mut v1 = feature_schema(&["cpu_user", "cpu_system"]);
        v1.version = 1;
        assert_eq!(check_schema(&live, &v1).unwrap(), vec![0, 2]);
        // A v1 model that lists a v2 feature, or the v1 features in another order.
        v1.features = vec!["cpu_user".into(), "top_threads".into()];
        let err = check_schema(&live, &v1).unwrap_err();
        assert!(
            err.contains("as of v1 (of 4 in v2)") && err.contains("position 1"),
            "{err}"
        );
        v1.features = vec!["cpu_system".into(), "cpu_user".into()];
        assert!(check_schema(&live, &v1).unwrap_err().contains("position 0"));
        // Without `since`, every live feature is of the live version: a v1 model gets none.
        live.since.clear();
        v1.features = vec!["cpu_user".into(), "cpu_system".into()];
        assert!(check_schema(&live, &v1).is_err());
    }
}
