//! Inference cost with the committed model, through ONNX Runtime from Rust: one model run
//! on a batch of B tasks ([B, 10, 7 + CPUs] -> B CPUs) for B = 1, 8, 64. Prints p50/p99/max
//! of a run and the cost per predicted task (a run's p50 / B) in µs.
//!
//! Each batch size also prints a host reference measured just before it: ns per load of a
//! pointer chase through 512 KiB. On a shared host whose neighbours take the caches, the
//! model's runs and the chase slow down together, so a slow pass can be told from slower
//! inference code (on the 2-core EPYC guest of 2026-11-26/27 whole passes ran at half speed:
//! p50 10.8-11.1 against 18.6-20.1 us per run, the chase 6.5-7.7 against 10.7-12.1 ns).
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
        let reference_ns = host_reference_ns_per_load();
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
             host reference {reference_ns:.1} ns per load",
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

/// Nanoseconds per load of a pointer chase through 512 KiB (one random cycle over 65 536
/// slots, Sattolo's shuffle from a fixed seed), the fastest of 5 passes of 1 M loads: how
/// fast this host's caches answer right now. Plain arithmetic does not show the slow
/// passes of a shared host (a dependent multiply-add chain kept 1.9 ns per step through
/// them on 2026-11-27); the caches do (this chase 6.5-7.7 ns in fast passes, 10.7-12.1 in
/// slow ones).
fn host_reference_ns_per_load() -> f64 {
    const SLOTS: usize = 65_536; // 8-byte slots: 512 KiB
    let mut next: Vec<usize> = (0..SLOTS).collect();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for i in (1..SLOTS).rev() {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let j = (seed >> 33) as usize % i;
        next.swap(i, j);
    }
    let mut best = f64::MAX;
    let mut at = 0usize;
    for _ in 0..5 {
        let started = Instant::now();
        for _ in 0..1_000_000 {
            at = next[at];
        }
        best = best.min(started.elapsed().as_nanos() as f64 / 1e6);
    }
    std::hint::black_box(at);
    best
}
