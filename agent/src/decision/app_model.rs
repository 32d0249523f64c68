//! The application classifier: the ONNX model `asa_classifier.train_apps` exports (schema
//! [`APP_FEATURE_SCHEMA`]), run by the same loader as the workload classifier, its classes put
//! in the layer plan's order so that [`super::app_classes::AppClasses`] votes on plan classes.
//!
//! Where the model is found ([`default_app_model_path`]): `$ASA_APP_MODEL`, the installed
//! locations [`DEFAULT_APP_MODEL_PATHS`], else the model committed in the source tree.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use asa_layers::LayerPlan;

use super::classifier::{OrtRuntime, WorkloadClassifier};
use crate::perception::apps::{APP_FEATURES, APP_FEATURE_SCHEMA, APP_FEATURE_VERSION};
use crate::perception::schema::FeatureSchema;

/// Installed locations of the application model, searched in order.
pub const DEFAULT_APP_MODEL_PATHS: &[&str] = &[
    "/etc/asa/app-classifier.onnx",
    "/usr/local/share/asa/app-classifier.onnx",
    "/usr/share/asa/app-classifier.onnx",
];

/// The application model committed in the source tree this binary was built from.
pub fn source_tree_app_model() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../classifier/models/default/app-classifier.onnx")
}

/// `$ASA_APP_MODEL`, else the first of [`DEFAULT_APP_MODEL_PATHS`] and the source tree's model
/// that exists.
pub fn default_app_model_path() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("ASA_APP_MODEL").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(path));
    }
    DEFAULT_APP_MODEL_PATHS
        .iter()
        .map(PathBuf::from)
        .chain(std::iter::once(source_tree_app_model()))
        .find(|p| p.is_file())
}

/// The per-application feature schema as the model loader checks it.
pub fn app_feature_schema() -> FeatureSchema {
    FeatureSchema {
        name: APP_FEATURE_SCHEMA.to_string(),
        version: APP_FEATURE_VERSION,
        features: APP_FEATURES.iter().map(|f| f.to_string()).collect(),
        since: Vec::new(),
    }
}

/// A loaded application model whose probabilities come in the layer plan's class order.
pub struct AppModel {
    classifier: WorkloadClassifier,
    /// For each model class, its position in the plan.
    to_plan: Vec<usize>,
    plan_classes: usize,
    input: Vec<f32>,
}

impl AppModel {
    /// Loads the model at `path`: its schema must be the per-application one and every class it
    /// names one of `plan`'s (a plan class the model does not know gets probability 0).
    pub fn load(runtime: &OrtRuntime, path: &Path, plan: &LayerPlan) -> Result<Self> {
        let classifier = WorkloadClassifier::load(runtime, path, &app_feature_schema())
            .with_context(|| format!("load the application model {}", path.display()))?;
        let mut to_plan = Vec::new();
        for name in &classifier.info().class_names {
            match plan.classes.iter().position(|c| &c.class == name) {
                Some(i) => to_plan.push(i),
                None => bail!(
                    "the application model {} has class {name:?}, which the layer plan has not ({})",
                    path.display(),
                    plan.classes
                        .iter()
                        .map(|c| c.class.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }
        }
        Ok(AppModel {
            classifier,
            to_plan,
            plan_classes: plan.classes.len(),
            input: vec![0.0; APP_FEATURES.len()],
        })
    }

    /// The model file.
    pub fn path(&self) -> &Path {
        self.classifier.path()
    }

    /// Class probabilities, in the plan's order, for one application's features
    /// ([`APP_FEATURES`] order).
    pub fn probabilities(&mut self, features: &[f64]) -> Result<Vec<f32>> {
        if features.len() != self.input.len() {
            bail!(
                "{} application features given, the schema has {}",
                features.len(),
                self.input.len()
            );
        }
        for (slot, value) in self.input.iter_mut().zip(features) {
            *slot = *value as f32;
        }
        let model = self.classifier.predict(&self.input)?;
        let mut plan = vec![0.0; self.plan_classes];
        for (p, &i) in model.iter().zip(&self.to_plan) {
            plan[i] += p;
        }
        Ok(plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_app_schema_is_the_perception_feature_list() {
        let schema = app_feature_schema();
        assert_eq!(schema.name, "asa.app-features");
        assert_eq!(schema.features.len(), 11);
        assert_eq!(schema.features[0], "cpu_share");
    }
}
