//! The trained GRU: its metadata file (TOML, schema `asa.gru-model` v1) and
//! inference through ONNX Runtime, loaded at run time from a shared library.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{bail, ensure, Context, Result};
use ort::environment::Environment;
use ort::session::Session;
use ort::value::TensorRef;
use serde::{Deserialize, Serialize};

use crate::features::{check_feature_schema, FeatureMeta, Scaling};

/// Schema name of the model metadata file.
pub const MODEL_SCHEMA: &str = "asa.gru-model";
/// Schema version of the model metadata file (2: the placed-CPU input columns).
pub const MODEL_VERSION: u32 = 2;

/// Version of ONNX Runtime that `setup_ort.sh` puts into the project cache, and where (one
/// definition for the workspace, in `asa-experts`).
pub use asa_experts::{cached_ort_library, ORT_VERSION};

/// Where scx_gru looks for a model when --model / GRU_MODEL is not given.
pub const DEFAULT_MODEL: &str = "/usr/local/share/scx_gru/gru.toml";
/// Where scx_gru looks for ONNX Runtime when --ort-lib / ORT_DYLIB_PATH is not given.
pub const DEFAULT_ORT_LIB: &str = "/usr/local/lib/scx_gru/libonnxruntime.so";

/// ONNX Runtime's shared library: `ORT_DYLIB_PATH`, else the project cache.
pub fn find_ort_library() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("ORT_DYLIB_PATH").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    let cached = cached_ort_library();
    if cached.is_file() {
        return Ok(cached);
    }
    bail!(
        "ONNX Runtime not found: set ORT_DYLIB_PATH or run gru_expert/setup_ort.sh (it puts the library at {})",
        cached.display()
    )
}

/// Metadata written by `train/train_gru.py` next to the ONNX file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelMeta {
    /// Must be [`MODEL_SCHEMA`].
    pub schema: String,
    /// Must be [`MODEL_VERSION`].
    pub version: u32,
    /// ONNX file, relative to the metadata file.
    pub onnx: String,
    /// Events per input sequence (N).
    pub window: usize,
    /// Number of output classes (CPUs).
    pub nr_cpus: usize,
    /// GRU hidden size (informative).
    pub hidden: usize,
    /// Name of the input tensor ([1, window, features], f32).
    pub input_name: String,
    /// Name of the output tensor ([1, nr_cpus], logits).
    pub output_name: String,
    /// Free text: where the training data came from.
    pub trained_on: String,
    /// The features, in order, with their standardization.
    #[serde(rename = "feature")]
    pub features: Vec<FeatureMeta>,
}

impl ModelMeta {
    /// Reads and checks a metadata file.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("read model metadata {}", path.display()))?;
        let meta: ModelMeta = toml::from_str(&text)
            .with_context(|| format!("parse model metadata {}", path.display()))?;
        meta.check()
            .with_context(|| format!("check model metadata {}", path.display()))?;
        Ok(meta)
    }

    /// Schema, version and shape checks (the feature list is checked by
    /// [`ModelMeta::scaling`]).
    pub fn check(&self) -> Result<()> {
        ensure!(
            self.schema == MODEL_SCHEMA,
            "model metadata has schema {:?}, expected {MODEL_SCHEMA:?}",
            self.schema
        );
        ensure!(
            self.version == MODEL_VERSION,
            "model metadata is {MODEL_SCHEMA} v{}, this scx_gru reads v{MODEL_VERSION} \
             (v2 added the placed-CPU inputs): retrain the model with train/train_gru.py",
            self.version
        );
        ensure!(self.window > 0, "window must be at least 1");
        ensure!(self.nr_cpus > 0, "nr_cpus must be at least 1");
        self.scaling().map(|_| ())
    }

    /// The standardization, after checking the feature list against the BPF event.
    pub fn scaling(&self) -> Result<Scaling> {
        check_feature_schema(&self.features, self.nr_cpus)
    }

    /// Path of the ONNX file.
    pub fn onnx_path(&self, meta_path: &Path) -> PathBuf {
        meta_path
            .parent()
            .unwrap_or(Path::new("."))
            .join(&self.onnx)
    }
}

/// Index of the largest of the first `limit` values (ties: the lowest index).
pub fn argmax(values: &[f32], limit: usize) -> Option<usize> {
    values
        .iter()
        .take(limit)
        .enumerate()
        .fold(None, |best: Option<(usize, f32)>, (i, v)| match best {
            Some((_, b)) if *v <= b => best,
            _ if v.is_nan() => best,
            _ => Some((i, *v)),
        })
        .map(|(i, _)| i)
}

/// ONNX Runtime allows one environment per process: the first model load creates it from
/// `ort_lib`, later loads (tests, benches) share it.
fn ort_environment(ort_lib: &Path) -> Result<Environment> {
    static ENVIRONMENT: Mutex<Option<Environment>> = Mutex::new(None);
    let mut slot = ENVIRONMENT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(environment) = slot.as_ref() {
        return Ok(environment.clone());
    }
    asa_experts::warn_if_ort_telemetry_on("scx_gru");
    let environment = ort::init_from(ort_lib)
        .with_context(|| format!("load ONNX Runtime from {}", ort_lib.display()))?
        .with_name("scx_gru")
        .build()
        .context("create the ONNX Runtime environment")?;
    *slot = Some(environment.clone());
    Ok(environment)
}

/// A loaded GRU: one ONNX Runtime session, single-threaded.
pub struct GruModel {
    session: Session,
    meta: ModelMeta,
    scaling: Scaling,
    nr_cpus_online: usize,
}

impl GruModel {
    /// Loads ONNX Runtime from `ort_lib` (libonnxruntime.so), then the model
    /// described by `meta_path`; checks its input and output against the metadata.
    /// Predictions are limited to the first `nr_cpus_online` classes.
    pub fn load(meta_path: &Path, ort_lib: &Path, nr_cpus_online: usize) -> Result<Self> {
        let meta = ModelMeta::load(meta_path)?;
        let scaling = meta.scaling()?;
        let environment = ort_environment(ort_lib)?;
        let onnx = meta.onnx_path(meta_path);
        let session = Session::builder(&environment)
            .context("create an ONNX Runtime session builder")?
            .with_intra_threads(1)
            .map_err(|e| anyhow::anyhow!("set intra-op threads: {e}"))?
            .with_inter_threads(1)
            .map_err(|e| anyhow::anyhow!("set inter-op threads: {e}"))?
            .commit_from_file(&onnx)
            .with_context(|| format!("load ONNX model {}", onnx.display()))?;
        if !session.inputs().iter().any(|i| i.name() == meta.input_name) {
            bail!(
                "ONNX model {} has no input {:?}",
                onnx.display(),
                meta.input_name
            );
        }
        if !session
            .outputs()
            .iter()
            .any(|o| o.name() == meta.output_name)
        {
            bail!(
                "ONNX model {} has no output {:?}",
                onnx.display(),
                meta.output_name
            );
        }
        let mut model = Self {
            session,
            meta,
            scaling,
            nr_cpus_online,
        };
        // One dry run checks the shapes end to end.
        let zeros = vec![0.0f32; model.input_len()];
        model.predict(&zeros).context("dry run of the model")?;
        Ok(model)
    }

    /// The metadata.
    pub fn meta(&self) -> &ModelMeta {
        &self.meta
    }

    /// The feature standardization.
    pub fn scaling(&self) -> &Scaling {
        &self.scaling
    }

    /// Number of f32 values of one input sequence (window × features).
    pub fn input_len(&self) -> usize {
        self.meta.window * self.scaling.width()
    }

    /// Runs the GRU on one standardized sequence ([1, window, features], oldest
    /// first) and returns the predicted CPU.
    pub fn predict(&mut self, input: &[f32]) -> Result<usize> {
        let mut cpus = Vec::with_capacity(1);
        self.predict_batch(input, &mut cpus)?;
        Ok(cpus[0])
    }

    /// Runs the GRU once on a batch of standardized sequences laid end to end
    /// ([batch, window, features], each oldest first) and replaces `cpus` with
    /// the predicted CPU of each, in order. One call costs little more than a
    /// single sequence: the runtime's fixed cost per run dominates a model
    /// this small (and under emulation it is most of the time).
    pub fn predict_batch(&mut self, inputs: &[f32], cpus: &mut Vec<usize>) -> Result<()> {
        let per_sequence = self.input_len();
        ensure!(
            !inputs.is_empty() && inputs.len().is_multiple_of(per_sequence),
            "input of {} values, expected a non-zero multiple of {per_sequence}",
            inputs.len(),
        );
        let batch = inputs.len() / per_sequence;
        let shape = [batch, self.meta.window, self.scaling.width()];
        let tensor =
            TensorRef::from_array_view((shape, inputs)).context("build the input tensor")?;
        let outputs = self
            .session
            .run(ort::inputs![self.meta.input_name.as_str() => tensor])
            .context("run the GRU")?;
        let (_, logits) = outputs[self.meta.output_name.as_str()]
            .try_extract_tensor::<f32>()
            .context("read the GRU output")?;
        ensure!(
            logits.len() == batch * self.meta.nr_cpus,
            "GRU output has {} values for {batch} sequences, metadata says {} CPUs",
            logits.len(),
            self.meta.nr_cpus
        );
        let limit = self.nr_cpus_online.min(self.meta.nr_cpus);
        cpus.clear();
        for row in logits.chunks_exact(self.meta.nr_cpus) {
            cpus.push(argmax(row, limit).context("GRU output has no finite value")?);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::feature_specs;

    fn meta_toml() -> String {
        let mut s = String::from(
            "schema = \"asa.gru-model\"\nversion = 2\nonnx = \"m.onnx\"\nwindow = 10\nnr_cpus = 2\n\
             hidden = 16\ninput_name = \"events\"\noutput_name = \"logits\"\ntrained_on = \"test\"\n",
        );
        for f in feature_specs(2) {
            let t = serde_json::to_string(&f.transform).unwrap();
            s.push_str(&format!(
                "[[feature]]\nname = \"{}\"\ntransform = {t}\nmean = 0.5\nstd = 2.0\n",
                f.name
            ));
        }
        s
    }

    #[test]
    fn argmax_takes_first_maximum_within_limit() {
        assert_eq!(argmax(&[0.1, 0.9, 0.9, 5.0], 3), Some(1));
        assert_eq!(argmax(&[f32::NAN, 0.2], 2), Some(1));
        assert_eq!(argmax(&[], 2), None);
    }

    #[test]
    fn metadata_round_trip_and_checks() {
        let meta: ModelMeta = toml::from_str(&meta_toml()).unwrap();
        meta.check().unwrap();
        assert_eq!(meta.scaling().unwrap().std[3], 2.0);
        assert_eq!(
            meta.onnx_path(Path::new("/m/gru.toml")),
            PathBuf::from("/m/m.onnx")
        );
        let old = meta_toml().replace("version = 2", "version = 1");
        let meta: ModelMeta = toml::from_str(&old).unwrap();
        let err = meta.check().unwrap_err().to_string();
        assert!(err.contains("retrain"), "{err}");
        // The feature list must fit the model's CPU count.
        let wider = meta_toml().replace("nr_cpus = 2", "nr_cpus = 4");
        let meta: ModelMeta = toml::from_str(&wider).unwrap();
        assert!(meta.check().is_err());
    }

    /// Golden cases written by train_gru.py (inputs and ONNX Runtime logits in Python).
    #[derive(Deserialize)]
    struct Golden {
        schema: String,
        version: u32,
        inputs: Vec<Vec<f32>>,
        logits: Vec<Vec<f32>>,
    }

    /// The committed model gives, from Rust, the CPU Python's ONNX Runtime gave.
    #[test]
    #[ignore = "needs ONNX Runtime: ORT_DYLIB_PATH or gru_expert/setup_ort.sh"]
    fn committed_model_matches_python_golden_cases() {
        let lib = find_ort_library().unwrap();
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("model");
        let golden: Golden =
            serde_json::from_str(&std::fs::read_to_string(dir.join("golden.json")).unwrap())
                .unwrap();
        assert_eq!(
            (golden.schema.as_str(), golden.version),
            ("asa.gru-golden", 1)
        );
        let mut model = GruModel::load(&dir.join("gru.toml"), Path::new(&lib), 2).unwrap();
        assert!(!golden.inputs.is_empty());
        let mut expected = Vec::new();
        for (input, logits) in golden.inputs.iter().zip(&golden.logits) {
            expected.push(argmax(logits, logits.len()).unwrap());
            assert_eq!(model.predict(input).unwrap(), *expected.last().unwrap());
        }
        // All cases in one batch give the same CPUs, in order.
        let batch: Vec<f32> = golden.inputs.concat();
        let mut cpus = vec![99];
        model.predict_batch(&batch, &mut cpus).unwrap();
        assert_eq!(cpus, expected);
        assert!(model.predict_batch(&batch[1..], &mut cpus).is_err());
        assert!(model.predict_batch(&[], &mut cpus).is_err());
    }

    /// A batch gives each sequence the CPU it gets alone, in order, on inputs
    /// whose answers differ (the golden cases all name one CPU, so they cannot
    /// show an order mix-up).
    #[test]
    #[ignore = "needs ONNX Runtime: ORT_DYLIB_PATH or gru_expert/setup_ort.sh"]
    fn a_batch_predicts_what_each_sequence_predicts_alone() {
        let lib = find_ort_library().unwrap();
        let meta = Path::new(env!("CARGO_MANIFEST_DIR")).join("model/gru.toml");
        let mut model = GruModel::load(&meta, Path::new(&lib), 2).unwrap();
        let n = model.input_len();
        let mut batch = Vec::new();
        let mut alone = Vec::new();
        for i in 0..48usize {
            let input: Vec<f32> = (0..n)
                .map(|j| (((i * 7919 + j * 104_729) % 211) as f32 - 105.0) / 40.0)
                .collect();
            alone.push(model.predict(&input).unwrap());
            batch.extend_from_slice(&input);
        }
        assert!(
            alone.contains(&0) && alone.contains(&1),
            "inputs should reach both CPUs: {alone:?}"
        );
        let mut cpus = Vec::new();
        model.predict_batch(&batch, &mut cpus).unwrap();
        assert_eq!(cpus, alone);
    }
}
