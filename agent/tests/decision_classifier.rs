//! The classifier through ONNX Runtime, on the tiny model made by the Python side
//! (tests/data/classifier_tiny.onnx, generator classifier/asa_classifier/make_test_model.py):
//! Rust probabilities equal Python's, metadata is read, mismatched and corrupt models are refused.
//!
//! Needs libonnxruntime.so: ORT_DYLIB_PATH, the project cache (gru_expert/setup_ort.sh) or
//! classifier/.venv (classifier/setup.sh).

use std::path::{Path, PathBuf};

use asa_agent::decision::classifier::{ClassifierError, OrtRuntime, WorkloadClassifier};
use asa_agent::perception::schema::FeatureSchema;
use serde::Deserialize;

const NEEDS_ORT: &str = "needs ONNX Runtime: run classifier/setup.sh (or set ORT_DYLIB_PATH)";

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// ORT_DYLIB_PATH, else the project cache (gru_expert/setup_ort.sh), else classifier/.venv.
fn ort_library() -> PathBuf {
    asa_agent::decision::classifier::source_tree_ort_library()
        .unwrap_or_else(|| panic!("no ONNX Runtime library: {NEEDS_ORT}"))
}

#[derive(Deserialize)]
struct Golden {
    feature_schema: String,
    feature_schema_version: u32,
    feature_names: Vec<String>,
    class_names: Vec<String>,
    inputs: Vec<Vec<Option<f32>>>,
    probabilities: Vec<Vec<f64>>,
}

fn golden() -> Golden {
    serde_json::from_str(&std::fs::read_to_string(data("classifier_tiny_golden.json")).unwrap())
        .unwrap()
}

fn live_schema(g: &Golden) -> FeatureSchema {
    FeatureSchema {
        name: g.feature_schema.clone(),
        version: g.feature_schema_version,
        features: g.feature_names.clone(),
        since: Vec::new(),
    }
}

#[test]
#[ignore = "needs ONNX Runtime: run classifier/setup.sh (or set ORT_DYLIB_PATH)"]
fn rust_probabilities_equal_python() {
    let g = golden();
    let runtime = OrtRuntime::load(Some(&ort_library())).unwrap();
    let mut classifier =
        WorkloadClassifier::load(runtime, &data("classifier_tiny.onnx"), &live_schema(&g)).unwrap();
    let info = classifier.info();
    assert_eq!(info.class_names, g.class_names);
    assert_eq!(info.schema.features, g.feature_names);
    assert_eq!(info.training_date, "2026-11-22T00:00:00Z");
    assert!(info.trained_on.contains("synthetic"), "{}", info.trained_on);
    let mut worst = 0.0f64;
    for (input, expected) in g.inputs.iter().zip(&g.probabilities) {
        let features: Vec<f32> = input.iter().map(|v| v.unwrap_or(f32::NAN)).collect();
        let probabilities = classifier.predict(&features).unwrap();
        assert_eq!(probabilities.len(), expected.len());
        for (p, e) in probabilities.iter().zip(expected) {
            worst = worst.max((f64::from(*p) - e).abs());
        }
        let sum: f32 = probabilities.iter().sum();
        assert!((sum - 1.0).abs() < 1e-5, "probabilities sum to {sum}");
    }
    assert!(worst < 1e-5, "Rust vs Python max difference {worst}");
    assert!(
        g.inputs.iter().any(|row| row.contains(&None)),
        "golden set has a NaN input"
    );
    let err = classifier.predict(&[0.0; 3]).unwrap_err();
    assert!(matches!(err, ClassifierError::Inference(_)), "{err}");
}

/// A model of an older schema version under a newer live schema (one feature more, placed
/// second): the model gets its own features from the live vector, by name, and gives the same
/// probabilities as Python gave on its own vector.
#[test]
#[ignore = "needs ONNX Runtime: run classifier/setup.sh (or set ORT_DYLIB_PATH)"]
fn older_model_is_fed_its_features_from_a_newer_live_vector() {
    let g = golden();
    let runtime = OrtRuntime::load(Some(&ort_library())).unwrap();
    let mut live = live_schema(&g);
    live.version = g.feature_schema_version + 1;
    live.features
        .insert(1, "feature_of_the_next_version".into());
    live.since = vec![g.feature_schema_version; live.features.len()];
    live.since[1] = live.version;
    let mut classifier =
        WorkloadClassifier::load(runtime, &data("classifier_tiny.onnx"), &live).unwrap();
    let mut worst = 0.0f64;
    for (input, expected) in g.inputs.iter().zip(&g.probabilities) {
        let mut features: Vec<f32> = input.iter().map(|v| v.unwrap_or(f32::NAN)).collect();
        features.insert(1, 1.0e6); // what the model must not see
        let probabilities = classifier.predict(&features).unwrap();
        for (p, e) in probabilities.iter().zip(expected) {
            worst = worst.max((f64::from(*p) - e).abs());
        }
    }
    assert!(worst < 1e-5, "Rust vs Python max difference {worst}");
    // The model's own vector length is now wrong: the live vector is expected.
    let own = vec![0.0f32; g.feature_names.len()];
    assert!(classifier.predict(&own).is_err());
}

#[test]
#[ignore = "needs ONNX Runtime: run classifier/setup.sh (or set ORT_DYLIB_PATH)"]
fn mismatched_schema_is_refused_with_one_clear_error() {
    let g = golden();
    let runtime = OrtRuntime::load(Some(&ort_library())).unwrap();
    let model = data("classifier_tiny.onnx");
    let mut reordered = live_schema(&g);
    reordered.features.swap(0, 1);
    let err = WorkloadClassifier::load(runtime, &model, &reordered)
        .err()
        .unwrap();
    let text = err.to_string();
    assert!(
        matches!(err, ClassifierError::SchemaMismatch { .. }),
        "{text}"
    );
    assert!(
        text.contains("position 0") && text.contains("retrain"),
        "{text}"
    );
    let mut newer = live_schema(&g);
    newer.version += 1;
    let err = WorkloadClassifier::load(runtime, &model, &newer)
        .err()
        .unwrap();
    assert!(err.to_string().contains("asa.features.test v1"), "{err}");
}

#[test]
#[ignore = "needs ONNX Runtime: run classifier/setup.sh (or set ORT_DYLIB_PATH)"]
fn corrupt_or_missing_model_is_a_clear_error() {
    let g = golden();
    let runtime = OrtRuntime::load(Some(&ort_library())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let corrupt = dir.path().join("corrupt.onnx");
    let mut bytes = std::fs::read(data("classifier_tiny.onnx")).unwrap();
    bytes.truncate(bytes.len() / 3);
    std::fs::write(&corrupt, &bytes).unwrap();
    // A valid ONNX model that is not an ASA classifier (the GRU expert's model): no metadata.
    let foreign = Path::new(env!("CARGO_MANIFEST_DIR")).join("../gru_expert/model/gru.onnx");
    let err = WorkloadClassifier::load(runtime, &foreign, &live_schema(&g))
        .err()
        .unwrap();
    assert!(
        err.to_string()
            .contains("metadata key asa.model_schema is missing"),
        "{err}"
    );
    for path in [corrupt, dir.path().join("missing.onnx")] {
        let err = WorkloadClassifier::load(runtime, &path, &live_schema(&g))
            .err()
            .unwrap();
        let text = err.to_string();
        assert!(matches!(err, ClassifierError::BadModel { .. }), "{text}");
        assert!(
            text.contains(&path.display().to_string()) && text.contains("asa_classifier"),
            "{text}"
        );
    }
}

/// `bytes` (a serialized ONNX ModelProto) with one more metadata_props entry (field 14, a
/// StringStringEntryProto {key = 1, value = 2}): appending a repeated field to a serialized
/// message is valid protobuf.
fn with_metadata(mut bytes: Vec<u8>, key: &str, value: &str) -> Vec<u8> {
    fn varint(out: &mut Vec<u8>, mut v: usize) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    let mut entry = Vec::new();
    for (tag, text) in [(0x0a, key), (0x12, value)] {
        entry.push(tag);
        varint(&mut entry, text.len());
        entry.extend_from_slice(text.as_bytes());
    }
    bytes.push(0x72); // field 14, length-delimited
    varint(&mut bytes, entry.len());
    bytes.extend(entry);
    bytes
}

/// A model's ignored features (metadata `asa.ignored_features`) are read, and must be among its
/// features.
#[test]
#[ignore = "needs ONNX Runtime: run classifier/setup.sh (or set ORT_DYLIB_PATH)"]
fn ignored_features_are_read_from_the_metadata_and_checked() {
    let g = golden();
    let runtime = OrtRuntime::load(Some(&ort_library())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tiny = std::fs::read(data("classifier_tiny.onnx")).unwrap();
    let plain =
        WorkloadClassifier::load(runtime, &data("classifier_tiny.onnx"), &live_schema(&g)).unwrap();
    assert!(plain.info().ignored_features.is_empty());
    let ignoring = dir.path().join("ignoring.onnx");
    let list = format!("[\"{}\"]", g.feature_names[1]);
    std::fs::write(
        &ignoring,
        with_metadata(tiny.clone(), "asa.ignored_features", &list),
    )
    .unwrap();
    let model = WorkloadClassifier::load(runtime, &ignoring, &live_schema(&g)).unwrap();
    assert_eq!(
        model.info().ignored_features,
        vec![g.feature_names[1].clone()]
    );
    let unknown = dir.path().join("unknown.onnx");
    std::fs::write(
        &unknown,
        with_metadata(tiny, "asa.ignored_features", "[\"no_such_feature\"]"),
    )
    .unwrap();
    let err = WorkloadClassifier::load(runtime, &unknown, &live_schema(&g))
        .err()
        .unwrap();
    assert!(
        err.to_string().contains("\"no_such_feature\"") && err.to_string().contains("unknown.onnx"),
        "{err}"
    );
}

/// The whole decision path on the tiny model: feature vectors → ONNX Runtime → Algorithm 1 →
/// mapping → expert. The model puts > 0.82 on a at (0, 0, …) and on c at (4, −2, …) (the
/// synthetic classes are shifted by +2 on feature 0 and −1 on feature 1 per class), so the
/// default voting/policy arithmetic of policy.rs applies: the start-up switch on the 3rd tick,
/// a 1-tick spike ignored, a change followed on its 3rd tick once the cooldown has passed.
#[test]
#[ignore = "needs ONNX Runtime: run classifier/setup.sh (or set ORT_DYLIB_PATH)"]
fn feature_vectors_to_expert_decisions() {
    use asa_agent::decision::policy::{Action, Policy, PolicyConfig, Reason};
    use std::time::Duration;

    let g = golden();
    let runtime = OrtRuntime::load(Some(&ort_library())).unwrap();
    let mut classifier =
        WorkloadClassifier::load(runtime, &data("classifier_tiny.onnx"), &live_schema(&g)).unwrap();
    let table = asa_mapping::MappingTable::parse(
        r#"schema = "asa.mapping"
version = 1
source = "hand-written"
created = "2026-11-22"
[[class]]
name = "a"
ranked = [{ expert = "eevdf", score = 0.6, spread = 0.0, runs = 0 }]
[[class]]
name = "c"
ranked = [{ expert = "bpfland", score = 0.7, spread = 0.0, runs = 0 }]
"#,
        "test",
    )
    .unwrap();
    let classes = classifier.info().class_names.clone();
    let names: Vec<&str> = classes.iter().map(String::as_str).collect();
    let unmapped = table.validate_builtin_experts("test", &names).unwrap();
    assert_eq!(unmapped, vec!["b".to_string()]);
    let config = PolicyConfig {
        cooldown: Duration::from_secs(5),
        ..PolicyConfig::default()
    };
    let mut policy =
        Policy::new(config, classes, &table, |_| true, Some("bpfland".into())).unwrap();
    let class_a = [0.0f32, 0.0, 0.0, 0.0, 0.0, 0.0];
    let class_c = [4.0f32, -2.0, 0.0, 0.0, 0.0, 0.0];
    let mut tick = |second: u64, features: &[f32]| {
        let probabilities = classifier.predict(features).unwrap();
        policy
            .on_tick(Duration::from_secs(second), &probabilities)
            .unwrap()
    };
    let decisions: Vec<_> = (1..=3).map(|s| tick(s, &class_a)).collect();
    assert_eq!(decisions[0].action, Action::Stay);
    assert_eq!(decisions[1].action, Action::Stay);
    assert_eq!(
        decisions[2].action,
        Action::Switch,
        "{}",
        decisions[2].summary()
    );
    assert_eq!(decisions[2].target_expert.as_deref(), Some("eevdf"));
    for s in 4..=10 {
        assert_eq!(tick(s, &class_a).reason, Reason::AlreadyRunning);
    }
    let spike = tick(11, &class_c);
    assert_eq!(
        spike.voted_class.as_deref(),
        Some("a"),
        "{}",
        spike.summary()
    );
    assert_eq!(spike.action, Action::Stay);
    for s in 12..=17 {
        assert_eq!(tick(s, &class_a).action, Action::Stay);
    }
    // Change to c at t = 18: switch on its 3rd tick (t = 20), the cooldown (5 s from t = 3) is over.
    assert_eq!(tick(18, &class_c).action, Action::Stay);
    assert_eq!(tick(19, &class_c).action, Action::Stay);
    let switch = tick(20, &class_c);
    assert_eq!(switch.action, Action::Switch, "{}", switch.summary());
    assert_eq!(switch.voted_class.as_deref(), Some("c"));
    assert_eq!(switch.target_expert.as_deref(), Some("bpfland"));
}

/// The shipped application model (classifier/models/default/app-classifier.onnx) loads against
/// the per-application schema, puts its classes in the layer plan's order, and recognises the
/// median application of each class in its training data (`class_medians` of its report,
/// results/2026-11-29-app-classifier-own-group/report.json).
#[test]
fn the_shipped_application_model_recognises_each_class_median_in_plan_order() {
    use asa_agent::decision::app_model::{source_tree_app_model, AppModel};
    let runtime = OrtRuntime::load(Some(&ort_library())).expect(NEEDS_ORT);
    let plan = asa_layers::default_plan();
    let mut model = AppModel::load(runtime, &source_tree_app_model(), &plan).unwrap();
    let medians: [(&str, [f64; 11]); 5] = [
        (
            "interactive",
            [
                0.1155, 0.02168, 2.422, 280.4, 3.389, 0.1333, 0.6422, 0.0, 4.547e-05, 3.114, 3.585,
            ],
        ),
        (
            "io_bound",
            [
                0.05216, 0.03477, 1.664, 46.7, 17.35, 0.125, 3.841, 0.0, 0.0006203, 15.98, 2.0,
            ],
        ),
        (
            "network",
            [
                0.2718, 0.4039, 6.874, 177.9, 1.272, 0.9505, 0.4794, 0.0, 25.29, 249.6, 1.292,
            ],
        ),
        (
            "cpu_batch",
            [
                0.4776, 0.194, 10.85, 506.6, 0.3346, 0.9714, 0.1943, 0.0, 1.688e-05, 0.9833, 2.585,
            ],
        ),
        (
            "background",
            [
                0.05078, 0.01307, 5.517, 1951.0, 0.5007, 0.6667, 0.4238, 0.0, 0.02008, 16.04, 1.585,
            ],
        ),
    ];
    for (class, features) in medians {
        let p = model.probabilities(&features).unwrap();
        assert_eq!(p.len(), plan.classes.len());
        assert!((p.iter().sum::<f32>() - 1.0).abs() < 1e-4, "{p:?}");
        let best = (0..p.len()).max_by(|&a, &b| p[a].total_cmp(&p[b])).unwrap();
        assert_eq!(plan.classes[best].class, class, "{p:?}");
        assert!(p[best] > 0.9, "{class}: {p:?}");
    }
}
