//! Decision: classifier probabilities → time-weighted vote → mapping table → expert.
//!
//! - [`voting`]: Algorithm 1 of the ASA paper (time-weighted probability voting), streaming;
//! - [`classifier`]: the workload classifier, an ONNX model run through ONNX Runtime (`ort`,
//!   loaded at run time from `libonnxruntime.so`), checked against the live feature schema;
//! - [`policy`]: vote → mapping table → expert, with a cooldown and a confidence margin, and a
//!   [`policy::DecisionRecord`] per tick for the log and `asa status`;
//! - [`quarantine`]: experts that keep failing are not chosen for a while, with exponential
//!   back-off.
//!
//! The live feature schema comes from perception (`agent/src/perception`, issue 3); this module
//! only needs its name, version and ordered feature names, see [`FeatureSchema`].

pub mod classifier;
pub mod engine;
pub mod policy;
pub mod quarantine;
pub mod standby;
pub mod voting;

/// What the decision module needs to know about the live feature schema: its name and version
/// and the feature names in the order the sampler writes them. Integration point with
/// perception: build it from `agent/feature_schema.toml` (schema name, version, ordered names).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
