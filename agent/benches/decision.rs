//! Decision benchmark (harness = false): per-tick cost of
//! 1. classifier inference through ONNX Runtime on the tiny test model (tests/data/classifier_tiny.onnx),
//! 2. Algorithm 1 voting alone (W = 6, 3 and 32 classes),
//! 3. a full policy tick (vote + mapping + decision record).
//!
//! Also the committed default model (classifier/models/default/), and with
//! `ASA_BENCH_MODEL=path.onnx` (absolute, or relative to agent/) any other, e.g. a full-size one
//! (make_bench_model.py).
//! Prints p50/p99/max in microseconds. Needs libonnxruntime.so for part 1: ORT_DYLIB_PATH or
//! classifier/.venv (classifier/setup.sh); without it part 1 is skipped with a message.
//! Run: `cargo bench -p asa-agent --bench decision`.

use std::path::Path;
use std::time::{Duration, Instant};

use asa_agent::decision::classifier::{OrtRuntime, WorkloadClassifier};
use asa_agent::decision::policy::{Policy, PolicyConfig};
use asa_agent::decision::voting::{TimeWeightedVoter, VotingConfig};
use asa_mapping::MappingTable;

fn percentile(sorted: &[f64], q: f64) -> f64 {
    let index = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[index]
}

fn report(name: &str, mut samples_us: Vec<f64>) {
    samples_us.sort_by(f64::total_cmp);
    println!(
        "{name:<44} n={:<6} p50={:>8.2} us  p99={:>8.2} us  max={:>8.2} us",
        samples_us.len(),
        percentile(&samples_us, 0.5),
        percentile(&samples_us, 0.99),
        samples_us[samples_us.len() - 1]
    );
}

/// Deterministic pseudo-random numbers (xorshift), so runs are comparable.
struct Rng(u64);
impl Rng {
    fn next_f32(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32
    }
    fn probabilities(&mut self, classes: usize) -> Vec<f32> {
        let raw: Vec<f32> = (0..classes).map(|_| self.next_f32().powi(4)).collect();
        let sum: f32 = raw.iter().sum();
        raw.iter().map(|v| v / sum).collect()
    }
}

/// Loads `model` with the schema its metadata declares and times `rounds` single-row predictions.
fn bench_model(runtime: &OrtRuntime, model: &Path, label: &str, rounds: usize) {
    let schema = WorkloadClassifier::read_model_info(runtime, model)
        .expect("read model metadata")
        .schema;
    let started = Instant::now();
    let mut classifier = WorkloadClassifier::load(runtime, model, &schema).expect("load model");
    println!(
        "{label}: load (session + metadata + dry run) {:.1} ms, {} features, {} classes",
        started.elapsed().as_secs_f64() * 1e3,
        schema.features.len(),
        classifier.info().class_names.len()
    );
    let width = schema.features.len();
    let mut rng = Rng(0x9e3779b97f4a7c15);
    let inputs: Vec<Vec<f32>> = (0..256)
        .map(|_| (0..width).map(|_| rng.next_f32() * 6.0 - 2.0).collect())
        .collect();
    for input in inputs.iter().take(64) {
        classifier.predict(input).unwrap();
    }
    let mut samples = Vec::with_capacity(rounds);
    for i in 0..rounds {
        let input = &inputs[i % inputs.len()];
        let t = Instant::now();
        let p = classifier.predict(input).unwrap();
        samples.push(t.elapsed().as_secs_f64() * 1e6);
        std::hint::black_box(p);
    }
    report(&format!("inference, {label} (1 row)"), samples);
}

fn bench_inference(rounds: usize) {
    let Some(library) = asa_agent::decision::classifier::source_tree_ort_library() else {
        println!(
            "inference: skipped (no ONNX Runtime: run classifier/setup.sh or set ORT_DYLIB_PATH)"
        );
        return;
    };
    let runtime = OrtRuntime::load(Some(&library)).expect("load ONNX Runtime");
    let tiny = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/classifier_tiny.onnx");
    bench_model(runtime, &tiny, "tiny test model", rounds);
    // The committed default model (what `asa run` uses).
    let default = asa_agent::decision::engine::source_tree_model();
    if default.is_file() {
        bench_model(runtime, &default, "default model", rounds);
    }
    // A full-size model (classifier/asa_classifier/make_bench_model.py), if given.
    if let Some(model) = std::env::var_os("ASA_BENCH_MODEL") {
        bench_model(runtime, Path::new(&model), "ASA_BENCH_MODEL", rounds / 4);
    }
}

fn bench_voting(classes: usize, rounds: usize) {
    let mut voter = TimeWeightedVoter::new(VotingConfig::default(), classes).unwrap();
    let mut rng = Rng(42);
    let ticks: Vec<Vec<f32>> = (0..512).map(|_| rng.probabilities(classes)).collect();
    let mut samples = Vec::with_capacity(rounds);
    for i in 0..rounds {
        let t = Instant::now();
        let vote = voter.push(&ticks[i % ticks.len()]).unwrap();
        samples.push(t.elapsed().as_secs_f64() * 1e6);
        std::hint::black_box(vote);
    }
    report(
        &format!("voting push+vote (W=6, {classes} classes)"),
        samples,
    );
}

fn bench_policy(rounds: usize) {
    let table = MappingTable::builtin_default().unwrap();
    let classes: Vec<String> = table.classes.iter().map(|c| c.name.clone()).collect();
    let mut policy = Policy::new(
        PolicyConfig::default(),
        classes.clone(),
        &table,
        |_| true,
        Some("eevdf".into()),
    )
    .unwrap();
    let mut rng = Rng(7);
    let ticks: Vec<Vec<f32>> = (0..512).map(|_| rng.probabilities(classes.len())).collect();
    let mut samples = Vec::with_capacity(rounds);
    for i in 0..rounds {
        let now = Duration::from_secs(i as u64);
        let t = Instant::now();
        let record = policy.on_tick(now, &ticks[i % ticks.len()]).unwrap();
        samples.push(t.elapsed().as_secs_f64() * 1e6);
        std::hint::black_box(record);
    }
    report(
        &format!("policy tick (vote + record, {} classes)", classes.len()),
        samples,
    );
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` does not: keep that run short.
    let quick = !std::env::args().any(|a| a == "--bench");
    let rounds = if quick { 200 } else { 20_000 };
    bench_inference(rounds);
    bench_voting(3, rounds);
    bench_voting(32, rounds);
    bench_policy(rounds);
}
