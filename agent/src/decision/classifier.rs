//! The workload classifier: an ONNX model (XGBoost + RandomForest + SVM with soft voting,
//! exported by `classifier/`) run through ONNX Runtime.
//!
//! ONNX Runtime is not linked: `libonnxruntime.so` is loaded at run time (the `ort` crate's
//! `load-dynamic`), from the path given to [`OrtRuntime::load`], else `ORT_DYLIB_PATH`, else the
//! one installed beside the binary (`make install` and the Debian package ship it in
//! `<prefix>/lib/asa/`), else the project cache where `gru_expert/setup_ort.sh` puts it
//! ([`find_ort_library`]). The library comes from the pinned `onnxruntime` Python wheel. ONNX
//! Runtime allows one environment per process, so the runtime is a process-wide singleton.
//!
//! The model carries its metadata in ONNX `metadata_props` (keys [`meta`]); at load the feature
//! schema name, version and the ordered feature names must equal the live schema, otherwise the
//! model is refused with one [`ClassifierError::SchemaMismatch`].

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use ort::environment::Environment;
use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;
use ort::value::TensorRef;

use crate::perception::schema::{check_schema, FeatureSchema};

/// Metadata keys written by `classifier/asa_classifier/export.py` (`schema.py`).
pub mod meta {
    /// Must be [`MODEL_SCHEMA`].
    pub const MODEL_SCHEMA_KEY: &str = "asa.model_schema";
    /// Must be [`MODEL_VERSION`] (as a decimal string).
    pub const MODEL_VERSION_KEY: &str = "asa.model_version";
    /// Feature schema name the model was trained on.
    pub const FEATURE_SCHEMA: &str = "asa.feature_schema";
    /// Feature schema version (decimal string).
    pub const FEATURE_SCHEMA_VERSION: &str = "asa.feature_schema_version";
    /// JSON list of feature names, in input order.
    pub const FEATURE_NAMES: &str = "asa.feature_names";
    /// JSON list of class names, in output order.
    pub const CLASS_NAMES: &str = "asa.class_names";
    /// ISO 8601 UTC date-time of training.
    pub const TRAINING_DATE: &str = "asa.training_date";
    /// Free text: what data the model was trained on.
    pub const TRAINED_ON: &str = "asa.trained_on";
    /// Optional JSON list: features the model ignores (masked to 0 in its graph).
    pub const IGNORED_FEATURES: &str = "asa.ignored_features";
    /// Model schema name.
    pub const MODEL_SCHEMA: &str = "asa.classifier";
    /// Model schema version.
    pub const MODEL_VERSION: u32 = 1;
    /// Input tensor: float32 [N, features].
    pub const INPUT_NAME: &str = "features";
    /// Output tensor: float32 [N, classes], the soft-voted probabilities.
    pub const OUTPUT_NAME: &str = "probabilities";
}

/// What to do when ONNX Runtime is missing.
fn ort_hint() -> String {
    format!(
        "the package and `make install` put ONNX Runtime {ORT_VERSION} in \
         <prefix>/{INSTALLED_ORT_LIBRARY} (reinstall ASA to restore it); else name a \
         libonnxruntime.so of that version (the onnxruntime-linux-x64 release archive's lib/ \
         or the onnxruntime wheel's onnxruntime/capi/) as `onnxruntime = \"PATH\"` in \
         /etc/asa/asa.toml, --onnxruntime PATH or ORT_DYLIB_PATH; in a source tree, \
         gru_expert/setup_ort.sh puts it into the project cache"
    )
}

/// Where `make install` and the Debian package put ONNX Runtime, under the prefix the binary
/// is installed in (packaging/files.txt's `{libdir}/asa`).
pub const INSTALLED_ORT_LIBRARY: &str = "lib/asa/libonnxruntime.so";

/// The ONNX Runtime an install of the binary `exe` ships: `<prefix>/lib/asa/libonnxruntime.so`
/// for `<prefix>/bin/asa`.
pub fn ort_library_beside(exe: &Path) -> Option<PathBuf> {
    Some(exe.parent()?.parent()?.join(INSTALLED_ORT_LIBRARY))
}

/// The ONNX Runtime installed with the running binary, if it is there.
pub fn installed_ort_library() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    ort_library_beside(&exe).filter(|p| p.is_file())
}

/// ONNX Runtime version the project pins (the `onnxruntime` wheel, in classifier/requirements.txt
/// and gru_expert/setup_ort.sh), and where setup_ort.sh puts its library: one definition for the
/// workspace, in `asa-experts`.
pub use asa_experts::{cached_ort_library, ORT_VERSION};

/// ONNX Runtime's library: `ORT_DYLIB_PATH` if set, else the one installed with the binary
/// ([`installed_ort_library`]), else the project cache's, if the file exists.
pub fn find_ort_library() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("ORT_DYLIB_PATH").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(path));
    }
    installed_ort_library().or_else(|| Some(cached_ort_library()).filter(|p| p.is_file()))
}

/// [`find_ort_library`], else the library of the `onnxruntime` wheel in the source tree's
/// `classifier/.venv` (classifier/setup.sh): for the tests, benchmarks and examples run from a
/// checkout.
pub fn source_tree_ort_library() -> Option<PathBuf> {
    if let Some(path) = find_ort_library() {
        return Some(path);
    }
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("../classifier/.venv/lib");
    std::fs::read_dir(lib).ok()?.flatten().find_map(|python| {
        let capi = python.path().join("site-packages/onnxruntime/capi");
        std::fs::read_dir(capi)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("libonnxruntime.so."))
            })
    })
}

/// Errors of the classifier, each saying what to do.
#[derive(Debug, thiserror::Error)]
pub enum ClassifierError {
    /// ONNX Runtime could not be loaded.
    #[error("cannot load ONNX Runtime from {path}: {message}; {}", ort_hint())]
    Runtime {
        /// The library path tried.
        path: String,
        /// ONNX Runtime's / the loader's message.
        message: String,
    },
    /// The model file is missing, corrupt or not an ASA classifier.
    #[error("cannot use classifier model {path}: {message}; retrain and export it with classifier/ (python -m asa_classifier.train)")]
    BadModel {
        /// The model file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The model was trained on another feature schema than the live one.
    #[error("classifier model {path} does not match the live feature schema: {message}; retrain it on recordings of the live schema (python -m asa_classifier.train)")]
    SchemaMismatch {
        /// The model file.
        path: PathBuf,
        /// The first difference.
        message: String,
    },
    /// Inference failed or the input is wrong.
    #[error("classifier inference failed: {0}")]
    Inference(String),
}

/// The process-wide ONNX Runtime environment.
pub struct OrtRuntime {
    environment: Environment,
    library: PathBuf,
}

static RUNTIME: OnceLock<OrtRuntime> = OnceLock::new();
static RUNTIME_INIT: Mutex<()> = Mutex::new(());

impl OrtRuntime {
    /// Loads `libonnxruntime.so` from `library` (or, if `None`, [`find_ort_library`]) once per
    /// process and creates the environment. Later calls return the same runtime (a different
    /// path is ignored with a warning: a process can hold only one).
    pub fn load(library: Option<&Path>) -> Result<&'static OrtRuntime, ClassifierError> {
        let _guard = RUNTIME_INIT.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(runtime) = RUNTIME.get() {
            if let Some(path) = library {
                if path != runtime.library {
                    log::warn!(
                        "ONNX Runtime already loaded from {}; ignoring {}",
                        runtime.library.display(),
                        path.display()
                    );
                }
            }
            return Ok(runtime);
        }
        let library = match library {
            Some(path) => path.to_path_buf(),
            None => match find_ort_library() {
                Some(path) => path,
                None => {
                    return Err(ClassifierError::Runtime {
                        path: cached_ort_library().display().to_string(),
                        message: "no library path given, ORT_DYLIB_PATH is not set, none is installed beside the binary and the project cache has none".to_string(),
                    })
                }
            },
        };
        let runtime_error = |message: String| ClassifierError::Runtime {
            path: library.display().to_string(),
            message,
        };
        if !library.is_file() {
            return Err(runtime_error("no such file".to_string()));
        }
        asa_experts::warn_if_ort_telemetry_on("asa");
        let environment = ort::init_from(&library)
            .map_err(|e| runtime_error(e.to_string()))?
            .with_name("asa-decision")
            .build()
            .map_err(|e| runtime_error(e.to_string()))?;
        log::info!("ONNX Runtime loaded from {}", library.display());
        Ok(RUNTIME.get_or_init(|| OrtRuntime {
            environment,
            library,
        }))
    }

    /// The library the runtime was loaded from.
    pub fn library(&self) -> &Path {
        &self.library
    }
}

/// What the model says about itself.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ModelInfo {
    /// The feature schema it was trained on (name, version, ordered names).
    pub schema: FeatureSchema,
    /// Class names, in probability order.
    pub class_names: Vec<String>,
    /// When it was trained (ISO 8601 UTC).
    pub training_date: String,
    /// What it was trained on (free text).
    pub trained_on: String,
    /// Features the model ignores (it is fed them, and multiplies them by 0).
    #[serde(default)]
    pub ignored_features: Vec<String>,
}

/// A loaded classifier: one single-threaded ONNX Runtime session.
pub struct WorkloadClassifier {
    session: Session,
    info: ModelInfo,
    path: PathBuf,
    /// Length of the live feature vector [`WorkloadClassifier::predict`] takes.
    live_len: usize,
    /// For a model of an older schema version: the live positions of its features, in its
    /// order (None: the model takes the live vector as it is).
    columns: Option<Vec<usize>>,
    /// The model's input when `columns` picks from the live vector.
    input: Vec<f32>,
}

fn json_strings(text: &str, key: &str) -> Result<Vec<String>, String> {
    serde_json::from_str(text)
        .map_err(|e| format!("metadata {key} is not a JSON list of strings: {e}"))
}

impl WorkloadClassifier {
    /// Loads the model at `path` with `runtime`, reads its metadata and checks it against the
    /// live feature schema; one dry run checks the output shape.
    pub fn load(
        runtime: &OrtRuntime,
        path: &Path,
        live: &FeatureSchema,
    ) -> Result<Self, ClassifierError> {
        let bad = |message: String| ClassifierError::BadModel {
            path: path.to_path_buf(),
            message,
        };
        if !path.is_file() {
            return Err(bad("no such file".to_string()));
        }
        let session = small_session(runtime)
            .map_err(|e| bad(format!("cannot create a session: {e}")))?
            .commit_from_file(path)
            .map_err(|e| bad(format!("not a loadable ONNX model ({e})")))?;
        let info = read_info(&session).map_err(bad)?;
        let columns = check_schema(live, &info.schema).map_err(|message| {
            ClassifierError::SchemaMismatch {
                path: path.to_path_buf(),
                message,
            }
        })?;
        let identity = columns.iter().copied().eq(0..live.features.len());
        if info.class_names.is_empty() {
            return Err(bad("it names no class".to_string()));
        }
        for (what, names, wanted) in [
            ("input", session.inputs(), meta::INPUT_NAME),
            ("output", session.outputs(), meta::OUTPUT_NAME),
        ] {
            if !names.iter().any(|o| o.name() == wanted) {
                return Err(bad(format!("it has no {what} named {wanted:?}")));
            }
        }
        let mut classifier = Self {
            session,
            input: vec![0.0; info.schema.features.len()],
            info,
            path: path.to_path_buf(),
            live_len: live.features.len(),
            columns: (!identity).then_some(columns),
        };
        let zeros = vec![0.0f32; classifier.live_len];
        classifier
            .predict(&zeros)
            .map_err(|e| bad(format!("dry run failed: {e}")))?;
        log::info!(
            "classifier {} loaded: {} features ({} v{}{}), classes {:?}, trained {}",
            path.display(),
            classifier.info.schema.features.len(),
            classifier.info.schema.name,
            classifier.info.schema.version,
            if classifier.columns.is_some() {
                format!(", picked from the live v{} vector", live.version)
            } else {
                String::new()
            },
            classifier.info.class_names,
            classifier.info.training_date
        );
        Ok(classifier)
    }

    /// Reads a model's metadata without checking it against a live schema (for tools such as
    /// a benchmark or a future `asa model show`).
    pub fn read_model_info(
        runtime: &OrtRuntime,
        path: &Path,
    ) -> Result<ModelInfo, ClassifierError> {
        let bad = |message: String| ClassifierError::BadModel {
            path: path.to_path_buf(),
            message,
        };
        let session = Session::builder(&runtime.environment)
            .map_err(|e| bad(format!("cannot create a session: {e}")))?
            .commit_from_file(path)
            .map_err(|e| bad(format!("not a loadable ONNX model ({e})")))?;
        read_info(&session).map_err(bad)
    }

    /// The model's metadata.
    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    /// The model file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Class probabilities for one live feature vector (in the live schema's order; NaN =
    /// missing feature). A model of an older schema version gets its own features from it.
    pub fn predict(&mut self, features: &[f32]) -> Result<Vec<f32>, ClassifierError> {
        if features.len() != self.live_len {
            return Err(ClassifierError::Inference(format!(
                "{} features given, the live schema has {}",
                features.len(),
                self.live_len
            )));
        }
        let input = match &self.columns {
            None => features,
            Some(columns) => {
                for (slot, &i) in self.input.iter_mut().zip(columns) {
                    *slot = features[i];
                }
                &self.input[..]
            }
        };
        let expected = input.len();
        let tensor = TensorRef::from_array_view(([1usize, expected], input))
            .map_err(|e| ClassifierError::Inference(format!("input tensor: {e}")))?;
        let outputs = self
            .session
            .run(ort::inputs![meta::INPUT_NAME => tensor])
            .map_err(|e| ClassifierError::Inference(e.to_string()))?;
        let (_, probabilities) = outputs[meta::OUTPUT_NAME]
            .try_extract_tensor::<f32>()
            .map_err(|e| ClassifierError::Inference(format!("output tensor: {e}")))?;
        if probabilities.len() != self.info.class_names.len() {
            return Err(ClassifierError::Inference(format!(
                "model gave {} probabilities for {} classes",
                probabilities.len(),
                self.info.class_names.len()
            )));
        }
        Ok(probabilities.to_vec())
    }
}

/// Session options for a one-row model run once a second: one thread (no thread pool is
/// started) and no graph optimisation (the exported graph is 11 nodes: 3 ML operators, imputers,
/// a scaler and the weighted sum, with nothing for the optimisers to fold; skipping
/// the optimisers keeps their code out of memory: -0.4 MB RSS). Disabling the CPU memory arena,
/// the memory pattern or spinning changed neither RSS nor latency measurably (2026-11-23), so
/// they keep ONNX Runtime's defaults.
fn small_session(runtime: &OrtRuntime) -> ort::Result<ort::session::builder::SessionBuilder> {
    Ok(Session::builder(&runtime.environment)?
        .with_intra_threads(1)?
        .with_inter_threads(1)?
        .with_optimization_level(GraphOptimizationLevel::Disable)?)
}

/// Reads and checks the ASA metadata of a session's model.
fn read_info(session: &Session) -> Result<ModelInfo, String> {
    let metadata = session
        .metadata()
        .map_err(|e| format!("cannot read its metadata: {e}"))?;
    let get = |key: &str| {
        metadata.custom(key).ok_or_else(|| {
            format!("metadata key {key} is missing (not exported by asa_classifier?)")
        })
    };
    let model_schema = get(meta::MODEL_SCHEMA_KEY)?;
    let model_version = get(meta::MODEL_VERSION_KEY)?;
    if model_schema != meta::MODEL_SCHEMA || model_version != meta::MODEL_VERSION.to_string() {
        return Err(format!(
            "it is {model_schema} v{model_version}, this build reads {} v{}",
            meta::MODEL_SCHEMA,
            meta::MODEL_VERSION
        ));
    }
    let version_text = get(meta::FEATURE_SCHEMA_VERSION)?;
    let version = version_text.parse().map_err(|_| {
        format!(
            "metadata {} is not a number: {version_text:?}",
            meta::FEATURE_SCHEMA_VERSION
        )
    })?;
    let features = json_strings(&get(meta::FEATURE_NAMES)?, meta::FEATURE_NAMES)?;
    let ignored_features = match metadata.custom(meta::IGNORED_FEATURES) {
        Some(text) => json_strings(&text, meta::IGNORED_FEATURES)?,
        None => Vec::new(),
    };
    if let Some(unknown) = ignored_features.iter().find(|f| !features.contains(f)) {
        return Err(format!(
            "metadata {} names {unknown:?}, which is not among its features",
            meta::IGNORED_FEATURES
        ));
    }
    Ok(ModelInfo {
        schema: FeatureSchema {
            name: get(meta::FEATURE_SCHEMA)?,
            version,
            features,
            since: Vec::new(),
        },
        class_names: json_strings(&get(meta::CLASS_NAMES)?, meta::CLASS_NAMES)?,
        training_date: get(meta::TRAINING_DATE)?,
        trained_on: metadata.custom(meta::TRAINED_ON).unwrap_or_default(),
        ignored_features,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `asa run` may own the classifier in its decision thread.
    #[test]
    fn classifier_and_policy_can_move_between_threads() {
        fn assert_send<T: Send>() {}
        assert_send::<WorkloadClassifier>();
        assert_send::<crate::decision::policy::Policy>();
        assert_send::<&'static OrtRuntime>();
    }

    #[test]
    fn missing_runtime_library_says_what_to_do() {
        // Only meaningful while no runtime is loaded in this test process; the ORT tests are in
        // tests/decision_classifier.rs (their own process).
        if RUNTIME.get().is_some() {
            return;
        }
        let err = OrtRuntime::load(Some(Path::new("/nonexistent/libonnxruntime.so.1.32.0")))
            .err()
            .expect("a missing library must be an error");
        let text = err.to_string();
        assert!(text.contains("/nonexistent/libonnxruntime.so"), "{text}");
        assert!(
            text.contains("lib/asa/libonnxruntime.so")
                && text.contains("reinstall")
                && text.contains(ORT_VERSION)
                && text.contains("/etc/asa/asa.toml")
                && text.contains("--onnxruntime")
                && text.contains("ORT_DYLIB_PATH")
                && text.contains("setup_ort.sh"),
            "{text}"
        );
        // A file that is not a shared library.
        let dir = std::env::temp_dir().join(format!("asa-ort-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fake = dir.join("libonnxruntime.so.1.32.0");
        std::fs::write(&fake, b"not a library").unwrap();
        let err = OrtRuntime::load(Some(&fake))
            .err()
            .expect("a non-library must be an error");
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(matches!(err, ClassifierError::Runtime { .. }), "{err}");
        assert!(err.to_string().contains("ORT_DYLIB_PATH"), "{err}");
    }

    #[test]
    fn an_installed_binary_finds_onnx_runtime_under_its_own_prefix() {
        for (exe, lib) in [
            ("/usr/bin/asa", "/usr/lib/asa/libonnxruntime.so"),
            ("/usr/local/bin/asa", "/usr/local/lib/asa/libonnxruntime.so"),
            ("/opt/asa/bin/asa", "/opt/asa/lib/asa/libonnxruntime.so"),
        ] {
            assert_eq!(ort_library_beside(Path::new(exe)), Some(PathBuf::from(lib)));
        }
        assert_eq!(ort_library_beside(Path::new("/asa")), None);
        // This test binary is in target/…/deps, where nothing is installed.
        assert_eq!(installed_ort_library(), None);
    }
}
