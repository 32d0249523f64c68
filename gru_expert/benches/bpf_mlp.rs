//! The in-BPF placement model timed on the host kernel (issue 42): one decision (map lookups,
//! fixed-point features, the MLP, the argmax) as a tc program run by BPF_PROG_TEST_RUN with a
//! repeat count, the kernel measuring the mean ns per run of each batch; p50/p99 over the
//! batches, beside the same program without the model (the harness's floor), single runs
//! (repeat 1, which include the kernel's clock reads), the verifier's processed-instruction
//! count, and the user-space GRU through ONNX Runtime on the same host (one task per run, as
//! `benches/inference.rs` batch 1).
//!
//! Before timing it checks that the BPF programs give the golden cases' logits and CPUs
//! (`model/NAME_golden.json`, written by `train/train_mlp.py`) and fails otherwise.
//!
//! `cargo bench -p asa-gru-expert --bench bpf_mlp [-- --model NAME --batches N --repeat R
//! --out DIR]` (root). `--model` names the committed model (`model/NAME.json`; default `mlp`,
//! the 2-CPU one; `mlp-4cpu` the 4-CPU one). With `--out`, writes DIR/summary.json, merging
//! the agreements of `model/NAME_report.json` (cargo runs benches in `gru_expert/`: give DIR
//! as an absolute path).

use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use asa_gru_expert::mlp::{bpf_available, BenchProg, BpfMlp, Golden, MlpModel};
use asa_gru_expert::model::GruModel;

/// Command line: `--model NAME`, `--batches N`, `--repeat R`, `--singles N`, `--out DIR`
/// (cargo adds `--bench`).
struct Args {
    model: String,
    batches: usize,
    repeat: u32,
    singles: usize,
    out: Option<PathBuf>,
}

fn parse_args() -> Result<Args> {
    let mut args = Args {
        model: "mlp".to_owned(),
        batches: 2000,
        repeat: 100,
        singles: 20_000,
        out: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().with_context(|| format!("{a} needs a value"));
        match a.as_str() {
            "--model" => args.model = value()?,
            "--batches" => args.batches = value()?.parse().context("--batches")?,
            "--repeat" => args.repeat = value()?.parse().context("--repeat")?,
            "--singles" => args.singles = value()?.parse().context("--singles")?,
            "--out" => args.out = Some(PathBuf::from(value()?)),
            "--bench" => {}
            other => bail!("unknown argument {other:?}"),
        }
    }
    ensure!(
        args.batches > 0 && args.repeat > 0,
        "batches and repeat must be positive"
    );
    Ok(args)
}

/// The q-quantile (nearest rank) of sorted values.
fn quantile(sorted: &[u64], q: f64) -> u64 {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// p50, p99 and max of a sample, in ns.
fn summary(mut v: Vec<u64>) -> (u64, u64, u64) {
    v.sort_unstable();
    (
        quantile(&v, 0.5),
        quantile(&v, 0.99),
        *v.last().unwrap_or(&0),
    )
}

/// ns per GRU run through ONNX Runtime, one task per run (p50, p99), or why not measured.
fn onnx_gru_ns(runs: usize) -> Result<(u64, u64)> {
    let lib = asa_gru_expert::model::find_ort_library()?;
    let meta = Path::new(env!("CARGO_MANIFEST_DIR")).join("model/gru.toml");
    let mut model = GruModel::load(&meta, Path::new(&lib), 2)?;
    let n = model.input_len();
    let mut input = vec![0.0f32; n];
    let mut times = Vec::with_capacity(runs);
    for i in 0..runs + 1000 {
        for (j, v) in input.iter_mut().enumerate() {
            *v = (((i * 31 + j * 17) % 97) as f32 - 48.0) / 24.0;
        }
        let started = Instant::now();
        std::hint::black_box(model.predict(&input)?);
        if i >= 1000 {
            times.push(started.elapsed().as_nanos() as u64);
        }
    }
    let (p50, p99, _) = summary(times);
    Ok((p50, p99))
}

fn main() -> Result<()> {
    let args = parse_args()?;
    if let Err(why) = bpf_available() {
        bail!("cannot load BPF programs here: {why}");
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("model");
    let model = MlpModel::load(&dir.join(format!("{}.json", args.model)))?;
    let golden = Golden::load(&dir.join(format!("{}_golden.json", args.model)))?;
    let mut open_object = MaybeUninit::uninit();
    let bpf = BpfMlp::load(&mut open_object)?;
    bpf.set_model(&model, 1)?;

    // The BPF result must be Python's fixed-point result, case by case.
    for (k, case) in golden.cases.iter().enumerate() {
        let (_, logits, cpu) = bpf.eval(&case.raw())?;
        let logits: Vec<i64> = logits[..model.n_out].iter().map(|v| *v as i64).collect();
        ensure!(
            logits == case.logits && cpu == case.cpu as i32,
            "golden case {k}: BPF gave logits {logits:?} cpu {cpu}, Python {:?} cpu {}",
            case.logits,
            case.cpu
        );
    }
    let raws: Vec<_> = golden.cases.iter().map(|c| c.raw()).collect();
    bpf.set_bench_inputs(&raws)?;
    let (eval_stats, bench_stats) = bpf.prog_stats()?;

    // Warm up, then interleave the two programs batch by batch.
    for _ in 0..50 {
        bpf.time(BenchProg::Decide, args.repeat)?;
        bpf.time(BenchProg::Empty, args.repeat)?;
    }
    let mut decide = Vec::with_capacity(args.batches);
    let mut empty = Vec::with_capacity(args.batches);
    for _ in 0..args.batches {
        decide.push(bpf.time(BenchProg::Decide, args.repeat)?);
        empty.push(bpf.time(BenchProg::Empty, args.repeat)?);
    }
    let mut single = Vec::with_capacity(args.singles);
    let mut single_empty = Vec::with_capacity(args.singles);
    for _ in 0..args.singles {
        single.push(bpf.time(BenchProg::Decide, 1)?);
        single_empty.push(bpf.time(BenchProg::Empty, 1)?);
    }
    // The timed program decides what Python decided for every slot (one more pass: the
    // empty program writes the slots too).
    bpf.time(BenchProg::Decide, asa_gru_expert::mlp::BENCH_SLOTS as u32)?;
    for (slot, cpu) in bpf.bench_cpus()?.iter().enumerate() {
        let want = golden.cases[slot % golden.cases.len()].cpu as i32;
        ensure!(
            *cpu == want,
            "timed program, slot {slot}: cpu {cpu}, golden {want}"
        );
    }
    let (d50, d99, dmax) = summary(decide);
    let (e50, e99, _) = summary(empty);
    let (s50, s99, _) = summary(single);
    let (se50, se99, _) = summary(single_empty);
    println!(
        "model {}-{}-{} Q{}.{}; {} golden cases equal in BPF and Python",
        model.n_in,
        model.n_hidden,
        model.n_out,
        32 - model.frac_bits,
        model.frac_bits,
        golden.cases.len()
    );
    println!(
        "BPF decision (tc program, {} batches of {} runs, mean ns per run per batch): \
         p50 {d50} ns, p99 {d99} ns, max {dmax} ns; without the model p50 {e50} ns, p99 {e99} ns",
        args.batches, args.repeat
    );
    println!(
        "BPF decision, single runs (repeat 1, {} runs, incl. the kernel's clock reads): \
         p50 {s50} ns, p99 {s99} ns; without the model p50 {se50} ns, p99 {se99} ns",
        args.singles
    );
    println!(
        "verifier: processed {} insns (gru_mlp_bench), {} (gru_mlp_eval); program {} insns, \
         {} bytes JITed (gru_mlp_bench)",
        bench_stats.verified_insns,
        eval_stats.verified_insns,
        bench_stats.xlated_insns,
        bench_stats.jited_bytes
    );
    let onnx = onnx_gru_ns(20_000);
    match &onnx {
        Ok((p50, p99)) => println!(
            "user-space GRU (ONNX Runtime, 1 task per run, 20000 runs): p50 {p50} ns, p99 {p99} ns"
        ),
        Err(e) => println!("user-space GRU not measured: {e:#}"),
    }

    if let Some(out) = args.out {
        let report_path = dir.join(format!("{}_report.json", args.model));
        let report: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(&report_path)
                .with_context(|| format!("read {}", report_path.display()))?,
        )
        .with_context(|| format!("parse {}", report_path.display()))?;
        let (u50, u99) = match onnx {
            Ok((a, b)) => (Some(a), Some(b)),
            Err(_) => (None, None),
        };
        let summary = serde_json::json!({
            "schema": "asa.in-kernel-model-summary",
            "version": 1,
            "model": format!("{}.json", args.model),
            "agreement_with_float": report["agreement_with_float"],
            "agreement_with_float_min_per_load": report["agreement_with_float_min_per_load"],
            "agreement_with_eevdf": report["agreement_with_eevdf"],
            "previous_cpu_agreement_with_eevdf": report["previous_cpu_agreement_with_eevdf"],
            "agreement_per_load": report["per_load"],
            "cpus_in_traces": report["cpus_in_traces"],
            "model_shape": [model.n_in, model.n_hidden, model.n_out],
            "frac_bits": model.frac_bits,
            "golden_cases_equal": golden.cases.len(),
            "host_ns_per_decision_p50": d50,
            "host_ns_per_decision_p99": d99,
            "host_ns_per_decision_max": dmax,
            "host_ns_harness_floor_p50": e50,
            "host_ns_harness_floor_p99": e99,
            "host_timing": format!("tc program, BPF_PROG_TEST_RUN repeat {}, {} batches; \
                                    quantiles of the per-batch mean", args.repeat, args.batches),
            "host_ns_single_run_p50": s50,
            "host_ns_single_run_p99": s99,
            "host_ns_single_run_floor_p50": se50,
            "host_ns_single_run_floor_p99": se99,
            "user_space_ns_per_prediction_p50": u50,
            "user_space_ns_per_prediction_p99": u99,
            "verifier_insns": bench_stats.verified_insns,
            "verifier_insns_eval_program": eval_stats.verified_insns,
            "program_insns": bench_stats.xlated_insns,
            "jited_bytes": bench_stats.jited_bytes,
        });
        std::fs::create_dir_all(&out).with_context(|| format!("create {}", out.display()))?;
        let path = out.join("summary.json");
        std::fs::write(&path, serde_json::to_string_pretty(&summary)? + "\n")
            .with_context(|| format!("write {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
