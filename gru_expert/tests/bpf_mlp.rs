//! The in-BPF model on the host kernel (BPF, no sched_ext needed): the BPF programs of
//! `src/bpf/mlp_bench.bpf.c` must compute, bit for bit, the features, logits and CPU that
//! `train/mlp_fixed.py` computed for the golden cases of every committed model
//! (`model/mlp_golden.json`, 2 CPUs; `model/mlp-4cpu_golden.json`, 4), must
//! refuse a missing or malformed model, and must take a model swapped in through the two
//! slots scx_gru's `--bpf-model` uses ([`ModelSlots`], `gru_mlp_active()`) at once.
//!
//! These tests need root and a kernel with BTF. Without them they print why and pass
//! (skip); with them, any difference fails.

use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};

use asa_gru_expert::mlp::{
    bpf_available, BenchProg, BpfMlp, Golden, MlpModel, ModelSlots, BENCH_SLOTS, WEIGHT_MAX,
};
use asa_gru_expert::mlp_intf;

/// The committed models (`model/NAME.json` with `NAME_golden.json`).
const COMMITTED_MODELS: [&str; 2] = ["mlp", "mlp-4cpu"];

fn model_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("model")
}

/// None (and a note on stderr) when BPF cannot be used here.
fn bpf_or_skip(test: &str) -> Option<()> {
    match bpf_available() {
        Ok(()) => Some(()),
        Err(why) => {
            eprintln!("SKIPPED {test}: {why}");
            None
        }
    }
}

#[test]
fn bpf_model_computes_what_python_fixed_point_computes() {
    if bpf_or_skip("bpf_model_computes_what_python_fixed_point_computes").is_none() {
        return;
    }
    // Every committed model: 2 CPUs (host traces) and 4 (lab VM traces).
    for name in COMMITTED_MODELS {
        let model = MlpModel::load(&model_dir().join(format!("{name}.json"))).unwrap();
        let golden = Golden::load(&model_dir().join(format!("{name}_golden.json"))).unwrap();
        let mut open_object = MaybeUninit::uninit();
        let bpf = BpfMlp::load(&mut open_object).unwrap();
        bpf.set_model(&model, 1).unwrap();
        for (k, case) in golden.cases.iter().enumerate() {
            let (features, logits, cpu) = bpf.eval(&case.raw()).unwrap();
            let features: Vec<i64> = features[..model.n_in].iter().map(|v| *v as i64).collect();
            let logits: Vec<i64> = logits[..model.n_out].iter().map(|v| *v as i64).collect();
            assert_eq!(
                features, case.features,
                "{name}: features of golden case {k}"
            );
            assert_eq!(logits, case.logits, "{name}: logits of golden case {k}");
            assert_eq!(cpu, case.cpu as i32, "{name}: CPU of golden case {k}");
        }
        // The timed program decides the same: one pass over its input slots.
        let raws: Vec<_> = golden.cases.iter().map(|c| c.raw()).collect();
        bpf.set_bench_inputs(&raws).unwrap();
        bpf.time(BenchProg::Decide, BENCH_SLOTS as u32).unwrap();
        let cpus = bpf.bench_cpus().unwrap();
        for (slot, cpu) in cpus.iter().enumerate() {
            let want = golden.cases[slot % golden.cases.len()].cpu as i32;
            assert_eq!(*cpu, want, "{name}: timed program, slot {slot}");
        }
    }
}

#[test]
fn bpf_model_refuses_a_missing_or_malformed_model_and_takes_a_new_one() {
    if bpf_or_skip("bpf_model_refuses_a_missing_or_malformed_model_and_takes_a_new_one").is_none() {
        return;
    }
    let model = MlpModel::load(&model_dir().join("mlp.json")).unwrap();
    let golden = Golden::load(&model_dir().join("mlp_golden.json")).unwrap();
    let case = &golden.cases[0];
    let mut open_object = MaybeUninit::uninit();
    let bpf = BpfMlp::load(&mut open_object).unwrap();
    let err = |e: u32| -(e as i32);
    // An empty map slot: no magic.
    assert_eq!(
        bpf.eval(&case.raw()).unwrap().2,
        err(mlp_intf::gru_mlp_err_GRU_MLP_ERR_NO_MODEL)
    );
    let good = model.map_value(1);
    let mut v = good;
    v.version += 1;
    bpf.set_model_value(&v).unwrap();
    assert_eq!(
        bpf.eval(&case.raw()).unwrap().2,
        err(mlp_intf::gru_mlp_err_GRU_MLP_ERR_VERSION)
    );
    for broken in [
        |v: &mut mlp_intf::gru_mlp_model| v.n_in += 1,
        |v: &mut mlp_intf::gru_mlp_model| v.n_out = 17,
        |v: &mut mlp_intf::gru_mlp_model| v.n_hidden = 0,
        |v: &mut mlp_intf::gru_mlp_model| v.frac_bits = 17,
    ] {
        let mut v = good;
        broken(&mut v);
        bpf.set_model_value(&v).unwrap();
        assert_eq!(
            bpf.eval(&case.raw()).unwrap().2,
            err(mlp_intf::gru_mlp_err_GRU_MLP_ERR_SHAPE)
        );
    }
    // A model update through the map takes effect at the next decision.
    bpf.set_model(&model, 2).unwrap();
    assert_eq!(bpf.eval(&case.raw()).unwrap().2, case.cpu as i32);
}

#[test]
fn a_model_swapped_through_the_slots_decides_at_once_and_a_refused_one_changes_nothing() {
    if bpf_or_skip(
        "a_model_swapped_through_the_slots_decides_at_once_and_a_refused_one_changes_nothing",
    )
    .is_none()
    {
        return;
    }
    let model = MlpModel::load(&model_dir().join("mlp.json")).unwrap();
    let golden = Golden::load(&model_dir().join("mlp_golden.json")).unwrap();
    let mut open_object = MaybeUninit::uninit();
    let bpf = BpfMlp::load(&mut open_object).unwrap();
    let mut slots: ModelSlots = bpf.slots().unwrap();
    let decisions = |bpf: &BpfMlp| -> Vec<(i32, u32)> {
        golden
            .cases
            .iter()
            .map(|c| bpf.eval_active(&c.raw()).unwrap())
            .collect()
    };
    let want = |cpu: &dyn Fn(usize) -> usize, seq: u32| -> Vec<(i32, u32)> {
        (0..golden.cases.len())
            .map(|k| (cpu(k) as i32, seq))
            .collect()
    };
    // Nothing installed yet: no model (scx_gru's select_cpu then uses the default policy).
    let none = -(mlp_intf::gru_mlp_err_GRU_MLP_ERR_NO_MODEL as i32);
    assert!(decisions(&bpf).iter().all(|d| *d == (none, 0)));
    assert_eq!(slots.seq(), 0);
    // The first model: the golden decisions, model_seq 1.
    assert_eq!(slots.install(&model).unwrap(), 1);
    let golden_cpu = |k: usize| golden.cases[k].cpu;
    assert_eq!(decisions(&bpf), want(&golden_cpu, 1));
    // A replacement that always picks the last CPU decides from the next decision on.
    let last = model.n_out - 1;
    assert_eq!(slots.install(&model.always(last)).unwrap(), 2);
    assert_eq!(decisions(&bpf), want(&|_| last, 2));
    // A malformed replacement is refused before it reaches a slot: model 2 keeps deciding.
    let mut bad = model.clone();
    bad.w1[0][0] = WEIGHT_MAX + 1;
    let err = slots.install(&bad).unwrap_err().to_string();
    assert!(err.contains("beyond"), "{err}");
    assert_eq!(slots.seq(), 2);
    assert_eq!(decisions(&bpf), want(&|_| last, 2));
    // And back (into the first slot again): model_seq 3.
    assert_eq!(slots.install(&model).unwrap(), 3);
    assert_eq!(decisions(&bpf), want(&golden_cpu, 3));
}
