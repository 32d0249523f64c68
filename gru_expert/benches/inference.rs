//! Inference cost with the committed model, through ONNX Runtime from Rust: one model run
//! on a batch of B tasks ([B, 10, 7 + CPUs] -> B CPUs) for B = 1, 8, 64. Prints p50/p99/max
//! of a run and the cost per predicted task (a run's p50 / B) in µs.
//!
//! `cargo bench -p asa-gru-expert --bench inference` (ONNX Runtime from
//! `ORT_DYLIB_PATH` or `gru_expert/setup_ort.sh`)

use std::path::Path;
use std::time::Instant;

use asa_gru_expert::model::GruModel;
use asa_gru_expert::stats::LatencyWindow;

fn main() -> anyhow::Result<()> {
    let lib = asa_gru_expert::model::find_ort_library()?;
    let meta = Path::new(env!("CARGO_MANIFEST_DIR")).join("model/gru.toml");
    let mut model = GruModel::load(&meta, Path::new(&lib), 2)?;
    let per_task = model.input_len();
    let mut cpus = Vec::new();
    for batch in [1usize, 8, 64] {
        let runs = 160_000 / (batch + 7);
        let mut window = LatencyWindow::new(runs);
        let mut input = vec![0.0f32; per_task * batch];
        let mut predicted = [0u64; 2];
        for i in 0..runs {
            // Vary the input so no caching can help.
            for (j, v) in input.iter_mut().enumerate() {
                *v = (((i * 31 + j * 17) % 97) as f32 - 48.0) / 24.0;
            }
            let started = Instant::now();
            model.predict_batch(&input, &mut cpus)?;
            window.record(started.elapsed().as_nanos() as u64);
            for cpu in &cpus {
                predicted[(*cpu).min(1)] += 1;
            }
        }
        let us = |q: f64| window.quantile(q).unwrap_or(0) as f64 / 1000.0;
        println!(
            "batch {batch:>2}: {runs} runs, per run p50 {:.1} us, p99 {:.1} us, max {:.1} us; \
             per task {:.2} us (p50 / batch) (predicted cpu0 {} / cpu1 {})",
            us(0.5),
            us(0.99),
            us(1.0),
            us(0.5) / batch as f64,
            predicted[0],
            predicted[1]
        );
    }
    Ok(())
}
