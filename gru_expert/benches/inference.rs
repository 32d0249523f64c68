//! Inference cost with the committed model, through ONNX Runtime from Rust: one model run
//! on a batch of B tasks ([B, 10, 7 + CPUs] -> B CPUs) for B = 1, 8, 64. Prints p50/p99/max
//! of a run and the cost per predicted task (a run's p50 / B) in µs.
//!
//! Each batch size also prints the time of a fixed piece of plain Rust arithmetic (a chain of
//! dependent multiply-adds) measured just before it, in ns per 1000 steps: a shared or
//! throttled host slows both, so a slow pass can be told from slower inference code. (On the
//! 2-core EPYC guest of 2026-11-26 whole passes ran at half speed, the reference with them.)
//!
//! `cargo bench -p asa-gru-expert --bench inference [-- B...]` (ONNX Runtime from
//! `ORT_DYLIB_PATH` or `gru_expert/setup_ort.sh`; numbers after `--` choose the batch sizes)

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
    // cargo passes `--bench`; numbers choose the batch sizes.
    let mut batches: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .filter(|&b| b > 0)
        .collect();
    if batches.is_empty() {
        batches = vec![1, 8, 64];
    }
    for batch in batches {
        let reference_ns = host_reference_ns_per_1000();
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
             per task {:.2} us (p50 / batch) (predicted cpu0 {} / cpu1 {}); \
             host reference {reference_ns:.0} ns",
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

/// Nanoseconds per 1000 steps of a dependent multiply-add chain, the fastest of 20 tries of
/// 100 000 steps: how fast this host runs plain scalar code right now.
fn host_reference_ns_per_1000() -> f64 {
    let mut best = f64::MAX;
    for _ in 0..20 {
        let started = Instant::now();
        let mut x = std::hint::black_box(1.0f64);
        for _ in 0..100_000 {
            x = x * 0.999_999 + 1e-6;
        }
        std::hint::black_box(x);
        best = best.min(started.elapsed().as_nanos() as f64 / 100.0);
    }
    best
}
