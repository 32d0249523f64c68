//! The memory floor of the classifier: a process that only loads ONNX Runtime and a model (the
//! agent's own loaders and session options) and runs it, printing its resident memory after
//! each step, split into ONNX Runtime's code, its other mapped pages, the heap and the rest.
//! The model is checked against the built-in feature schema, as `asa run` does by default.
//! With `--release-pages` it releases clean start-up pages between the steps as `asa run` does
//! (`asa_agent::memory`).
//!
//! Run: `cargo run --release -p asa-agent --example ort_floor [-- --release-pages] [MODEL]`
//! (ONNX Runtime from `ORT_DYLIB_PATH` or the project cache, as for `asa run`).

use std::path::PathBuf;

use asa_agent::decision::classifier::{OrtRuntime, WorkloadClassifier};
use asa_agent::memory::release_clean_file_pages;
use asa_agent::perception::SchemaFile;

/// KiB resident per kind of mapping, from /proc/self/smaps.
fn report(step: &str) {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let (mut ort_code, mut ort_other, mut heap, mut other_anon, mut other_files) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut header: Vec<String> = Vec::new();
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if first.contains('-') && first.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            header = line.split_whitespace().map(str::to_string).collect();
            continue;
        }
        let Some(rest) = line.strip_prefix("Rss:") else {
            continue;
        };
        let kib: u64 = rest.split_whitespace().next().unwrap().parse().unwrap();
        let perms = header.get(1).map(String::as_str).unwrap_or("");
        let name = header.get(5).map(String::as_str).unwrap_or("");
        if name.contains("libonnxruntime") {
            if perms.contains('x') {
                ort_code += kib
            } else {
                ort_other += kib
            }
        } else if name == "[heap]" {
            heap += kib
        } else if name.starts_with('/') {
            other_files += kib
        } else {
            other_anon += kib
        }
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let field = |key: &str| -> f64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1024.0
    };
    let mb = |kib: u64| kib as f64 / 1024.0;
    println!(
        "{step:<34} RSS {:5.1} MB (anon {:4.1}) = ORT code {:4.1} + ORT data {:3.1} + heap {:3.1} + other anon {:3.1} + other files {:3.1}; peak {:5.1} MB",
        field("VmRSS:"),
        field("RssAnon:"),
        mb(ort_code),
        mb(ort_other),
        mb(heap),
        mb(other_anon),
        mb(other_files),
        field("VmHWM:"),
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let release = args.iter().any(|a| a == "--release-pages");
    let model = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .map(PathBuf::from)
        .unwrap_or_else(asa_agent::decision::engine::source_tree_model);
    let step = |name: &str| {
        report(name);
        if release {
            release_clean_file_pages().unwrap();
            report(&format!("{name}, released"));
        }
    };
    step("start");
    let runtime = OrtRuntime::load(None).unwrap_or_else(|e| panic!("{e}"));
    step("ONNX Runtime loaded");
    let schema = SchemaFile::builtin().unwrap().to_feature_schema();
    let mut classifier =
        WorkloadClassifier::load(runtime, &model, &schema).unwrap_or_else(|e| panic!("{e}"));
    step("model loaded (dry run)");
    let features = vec![0.0f32; schema.features.len()];
    for _ in 0..100 {
        classifier.predict(&features).unwrap();
    }
    report("100 more predictions");
}
