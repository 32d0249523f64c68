//! Shared by the `asa run` tests on the host and in the lab VM.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The committed default classifier model (classifier/models/default/).
pub fn default_model() -> PathBuf {
    asa_agent::decision::engine::source_tree_model()
}

/// Class names of the default model, from its report (classifier/models/default/report.json).
pub fn default_model_classes() -> Vec<String> {
    classes_of(&default_model().with_file_name("report.json"))
}

/// The `classes` of a training report.
fn classes_of(report: &Path) -> Vec<String> {
    let text =
        std::fs::read_to_string(report).unwrap_or_else(|e| panic!("{}: {e}", report.display()));
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json["classes"]
        .as_array()
        .expect("report.json lists the classes")
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect()
}

/// The model the lab VM tests of `asa run` run (tests/data/loop-model/: two classes, `idle`
/// and `xz_compress`, called crisply; see its README): they time the loop, not the classifier.
pub fn loop_test_model() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/loop-model/classifier.onnx")
}

/// Class names of [`loop_test_model`], from its training report.
pub fn loop_test_model_classes() -> Vec<String> {
    classes_of(&loop_test_model().with_file_name("report.json"))
}

/// A mapping table (asa.mapping v1, hand-written) giving each class the one expert `expert_of`
/// names.
pub fn mapping_table(classes: &[String], expert_of: impl Fn(&str) -> &'static str) -> String {
    let mut text = String::from(
        "schema = \"asa.mapping\"\nversion = 1\nsource = \"hand-written\"\ncreated = \"2026-11-22\"\n",
    );
    for class in classes {
        text.push_str(&format!(
            "[[class]]\nname = \"{class}\"\nranked = [{{ expert = \"{}\", score = 0.5, spread = 0.0, runs = 0 }}]\n",
            expert_of(class)
        ));
    }
    text
}

/// ORT_DYLIB_PATH, else the project cache (gru_expert/setup_ort.sh), else classifier/.venv.
pub fn ort_library() -> PathBuf {
    asa_agent::decision::classifier::source_tree_ort_library().unwrap_or_else(|| {
        panic!("no ONNX Runtime library: run gru_expert/setup_ort.sh or classifier/setup.sh")
    })
}

/// (host path, guest path) pairs for a `GuestRun`.
pub type GuestFiles = Vec<(PathBuf, PathBuf)>;

/// The `asa run` arguments that point at what [`asa_run_guest`] puts in the guest: the model
/// and mapping in /lab, ONNX Runtime as /lab/libonnxruntime.so.
pub const GUEST_RUN_ARGS: &str =
    "--model /lab/classifier.onnx --mapping /lab/mapping.toml --onnxruntime /lab/libonnxruntime.so";

/// A lab guest that runs `script` with `asa run` [`GUEST_RUN_ARGS`] at hand: this package's
/// `asa`, the loop tests' model ([`loop_test_model`]), the mapping table at `mapping` and ONNX Runtime (with its libraries,
/// for the busybox guest), then `files`; the `experts`, the test root filesystem
/// ([`asa_lab::TEST_ROOTFS_PACKAGES`]) and a 600 s bound. A test that differs sets the field
/// after.
pub fn asa_run_guest(
    name: &str,
    script: &str,
    mapping: &Path,
    experts: &[&str],
    files: GuestFiles,
) -> asa_lab::GuestRun {
    let mut run =
        asa_lab::GuestRun::new(name, script).with_asa(Path::new(env!("CARGO_BIN_EXE_asa")));
    run.experts = experts.iter().map(|e| e.to_string()).collect();
    run.executables
        .push((ort_library(), PathBuf::from("/lab/libonnxruntime.so")));
    run.files = vec![
        (loop_test_model(), PathBuf::from("/lab/classifier.onnx")),
        (mapping.to_path_buf(), PathBuf::from("/lab/mapping.toml")),
    ];
    run.files.extend(files);
    run.rootfs = Some(asa_lab::RootfsSpec::with_packages(
        asa_lab::TEST_ROOTFS_PACKAGES,
    ));
    run.vm.timeout = std::time::Duration::from_secs(600);
    run
}
