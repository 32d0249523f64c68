//! Inference cost of one prediction ([1, 10, 7 + CPUs] -> CPU) with the committed
//! model, through ONNX Runtime from Rust. Prints p50/p99/mean in µs.
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
    let n = 20_000;
    let mut window = LatencyWindow::new(n);
    let mut input = vec![0.0f32; model.input_len()];
    let mut cpus = [0u64; 2];
    for i in 0..n {
        // Vary the input so no caching can help.
        for (j, v) in input.iter_mut().enumerate() {
            *v = (((i * 31 + j * 17) % 97) as f32 - 48.0) / 24.0;
        }
        let started = Instant::now();
        let cpu = model.predict(&input)?;
        window.record(started.elapsed().as_nanos() as u64);
        cpus[cpu.min(1)] += 1;
    }
    let us = |q: f64| window.quantile(q).unwrap_or(0) as f64 / 1000.0;
    println!(
        "inference per prediction over {n} runs: p50 {:.1} us, p99 {:.1} us, max {:.1} us (predicted cpu0 {} / cpu1 {})",
        us(0.5),
        us(0.99),
        us(1.0),
        cpus[0],
        cpus[1]
    );
    Ok(())
}
