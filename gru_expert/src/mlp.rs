//! The in-BPF placement model (issue 42): the fixed-point MLP file written by
//! `train/train_mlp.py` (schema `asa.gru-mlp` v1), its checks, its map value for
//! `src/bpf/mlp.bpf.h`, a Rust reference of the integer inference, [`ModelSlots`] (how
//! scx_gru's `--bpf-model` fills and swaps the model its `select_cpu` reads), and [`BpfMlp`],
//! the host programs of `src/bpf/mlp_bench.bpf.c` run through `BPF_PROG_TEST_RUN`.
//!
//! Invariant: a model reaches a map only through [`MlpModel::load`] / [`MlpModel::check`]
//! (schema, version, shape within the BPF bounds, every weight within
//! ±[`WEIGHT_MAX`]), and [`MlpModel::decide`] computes bit for bit what the BPF code and
//! `train/mlp_fixed.py` compute (pinned by the golden cases in `model/mlp_golden.json`).

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd};
use std::path::Path;

use anyhow::{bail, ensure, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle, OpenObject};
use serde::{Deserialize, Serialize};

use crate::mlp_bench_skel::{MlpBenchSkel, MlpBenchSkelBuilder};
use crate::mlp_intf;

/// Schema name of a model file.
pub const MODEL_SCHEMA: &str = "asa.gru-mlp";
/// Version of the model file and of `struct gru_mlp_model`.
pub const MODEL_VERSION: u32 = mlp_intf::gru_mlp_consts_GRU_MLP_VERSION;
/// Task features per event (before the previous-CPU columns).
pub const TASK_FEATURES: usize = mlp_intf::gru_mlp_consts_GRU_MLP_TASK_FEATURES as usize;
/// Most CPUs a model may have.
pub const MAX_CPUS: usize = mlp_intf::gru_mlp_consts_GRU_MLP_MAX_CPUS as usize;
/// Most inputs a model may have.
pub const MAX_IN: usize = mlp_intf::gru_mlp_consts_GRU_MLP_MAX_IN as usize;
/// Most hidden units a model may have.
pub const MAX_HIDDEN: usize = mlp_intf::gru_mlp_consts_GRU_MLP_MAX_HIDDEN as usize;
/// Largest `frac_bits`.
pub const MAX_FRAC_BITS: u32 = mlp_intf::gru_mlp_consts_GRU_MLP_MAX_FRAC_BITS;
/// Bound of every weight and bias.
pub const WEIGHT_MAX: i64 = mlp_intf::gru_mlp_consts_GRU_MLP_WEIGHT_MAX as i64;
/// Bound of every activation.
pub const ACT_MAX: i64 = mlp_intf::gru_mlp_consts_GRU_MLP_ACT_MAX as i64;
/// Inputs the timed program cycles through.
pub const BENCH_SLOTS: usize = mlp_intf::gru_mlp_consts_GRU_MLP_BENCH_SLOTS as usize;
/// Model slots of a scheduler's model map (see [`ModelSlots`]).
pub const SLOTS: u32 = mlp_intf::gru_mlp_consts_GRU_MLP_SLOTS;
const PF_KTHREAD: u32 = 0x0020_0000;

/// The model's raw input: the task state one decision reads (`struct gru_mlp_raw`).
pub type RawInput = mlp_intf::gru_mlp_raw;

/// One feature column of the model file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeatureName {
    /// Column name (`prio` .. `switch_count`, then `prev_cpu_K`).
    pub name: String,
    /// How the raw field becomes the fixed-point value (documentation; the code is fixed).
    pub transform: String,
}

/// A fixed-point MLP as exported by `train/train_mlp.py`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MlpModel {
    /// `asa.gru-mlp`.
    pub schema: String,
    /// [`MODEL_VERSION`].
    pub version: u32,
    /// Fractional bits F of every tensor (Q(32-F).F; 11 is the seed's Q21.11).
    pub frac_bits: u32,
    /// Inputs: 7 task features + `n_out` previous-CPU columns.
    pub n_in: usize,
    /// Hidden ReLU units.
    pub n_hidden: usize,
    /// Outputs: one logit per CPU.
    pub n_out: usize,
    /// The input columns, in order.
    pub features: Vec<FeatureName>,
    /// First layer, `[n_hidden][n_in]`, standardisation folded in.
    pub w1: Vec<Vec<i64>>,
    /// First-layer biases.
    pub b1: Vec<i64>,
    /// Output layer, `[n_out][n_hidden]`.
    pub w2: Vec<Vec<i64>>,
    /// Output biases.
    pub b2: Vec<i64>,
}

/// The names of the input columns of a model of `nr_cpus` CPUs (as `mlp_fixed.feature_table`).
pub fn feature_names(nr_cpus: usize) -> Vec<String> {
    [
        "prio",
        "nr_cpus_allowed",
        "runtime_ns",
        "nvcsw",
        "nivcsw",
        "flags",
        "switch_count",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain((0..nr_cpus).map(|c| format!("prev_cpu_{c}")))
    .collect()
}

impl MlpModel {
    /// Reads and checks a model file.
    pub fn load(path: &Path) -> Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
        let model: Self = serde_json::from_str(&text)
            .with_context(|| format!("parse the model file {}", path.display()))?;
        model
            .check()
            .with_context(|| format!("check the model file {}", path.display()))?;
        Ok(model)
    }

    /// The checks BPF relies on: schema and version, a shape within the BPF bounds with
    /// `n_in = 7 + n_out`, the feature list, tensor shapes and every value within
    /// ±[`WEIGHT_MAX`].
    pub fn check(&self) -> Result<()> {
        ensure!(
            self.schema == MODEL_SCHEMA && self.version == MODEL_VERSION,
            "model schema {} v{}, this build reads {MODEL_SCHEMA} v{MODEL_VERSION}",
            self.schema,
            self.version
        );
        ensure!(
            self.frac_bits <= MAX_FRAC_BITS,
            "frac_bits {} beyond {MAX_FRAC_BITS}",
            self.frac_bits
        );
        ensure!(
            (1..=MAX_CPUS).contains(&self.n_out)
                && (1..=MAX_HIDDEN).contains(&self.n_hidden)
                && self.n_in == TASK_FEATURES + self.n_out,
            "model shape {}-{}-{} does not fit the BPF model (n_in = {TASK_FEATURES} + n_out, \
             n_out <= {MAX_CPUS}, n_hidden <= {MAX_HIDDEN})",
            self.n_in,
            self.n_hidden,
            self.n_out
        );
        let names: Vec<&str> = self.features.iter().map(|f| f.name.as_str()).collect();
        ensure!(
            names == feature_names(self.n_out),
            "model features {names:?} differ from {:?}",
            feature_names(self.n_out)
        );
        let rows = |name: &str, m: &[Vec<i64>], r: usize, c: usize| -> Result<()> {
            ensure!(
                m.len() == r && m.iter().all(|row| row.len() == c),
                "{name} is not {r}x{c}"
            );
            Ok(())
        };
        rows("w1", &self.w1, self.n_hidden, self.n_in)?;
        rows("w2", &self.w2, self.n_out, self.n_hidden)?;
        ensure!(
            self.b1.len() == self.n_hidden,
            "b1 has {} values",
            self.b1.len()
        );
        ensure!(
            self.b2.len() == self.n_out,
            "b2 has {} values",
            self.b2.len()
        );
        let all = self
            .w1
            .iter()
            .chain(self.w2.iter())
            .flatten()
            .chain(self.b1.iter())
            .chain(self.b2.iter());
        for v in all {
            if v.abs() > WEIGHT_MAX {
                bail!("a weight of {v} is beyond ±{WEIGHT_MAX} (the exporter saturates)");
            }
        }
        Ok(())
    }

    /// What the model is, for the log: `9-12-2 MLP, Q21.11`.
    pub fn describe(&self) -> String {
        format!(
            "{}-{}-{} MLP, Q{}.{}",
            self.n_in,
            self.n_hidden,
            self.n_out,
            32 - self.frac_bits,
            self.frac_bits
        )
    }

    /// Whether the model fits a machine of `nr_cpus` CPUs: it must have been trained for
    /// exactly that many (`n_out == nr_cpus`). A model for more CPUs could pick CPUs the
    /// machine lacks; one for fewer never picks the others, and its previous-CPU input has no
    /// column for them, so it would be deciding for a machine it never saw.
    pub fn fit_cpus(&self, nr_cpus: usize) -> Result<()> {
        ensure!(
            self.n_out == nr_cpus,
            "the model was trained for {} CPUs, this machine has {nr_cpus}: give a model \
             trained for {nr_cpus} (gru_expert/train/train_mlp.py on traces recorded with \
             {nr_cpus} CPUs)",
            self.n_out
        );
        Ok(())
    }

    /// A model of the same shape whose every decision is `cpu` (its output layer zero, its
    /// output biases at the bounds): a replacement whose decisions a test knows.
    pub fn always(&self, cpu: usize) -> Self {
        assert!(cpu < self.n_out, "CPU {cpu} of a {}-CPU model", self.n_out);
        let mut m = self.clone();
        m.w2 = vec![vec![0; m.n_hidden]; m.n_out];
        m.b2 = (0..m.n_out)
            .map(|c| if c == cpu { WEIGHT_MAX } else { -WEIGHT_MAX })
            .collect();
        m
    }

    /// The value of the BPF model map (`struct gru_mlp_model`), padding zeroed.
    pub fn map_value(&self, model_seq: u32) -> mlp_intf::gru_mlp_model {
        let mut v = mlp_intf::gru_mlp_model {
            magic: mlp_intf::gru_mlp_consts_GRU_MLP_MAGIC,
            version: MODEL_VERSION,
            n_in: self.n_in as u32,
            n_hidden: self.n_hidden as u32,
            n_out: self.n_out as u32,
            frac_bits: self.frac_bits,
            model_seq,
            pad: 0,
            w1: [[0; MAX_IN]; MAX_HIDDEN],
            b1: [0; MAX_HIDDEN],
            w2: [[0; MAX_HIDDEN]; MAX_CPUS],
            b2: [0; MAX_CPUS],
        };
        for (j, row) in self.w1.iter().enumerate() {
            for (i, w) in row.iter().enumerate() {
                v.w1[j][i] = *w as i32;
            }
            v.b1[j] = self.b1[j] as i32;
        }
        for (j, row) in self.w2.iter().enumerate() {
            for (i, w) in row.iter().enumerate() {
                v.w2[j][i] = *w as i32;
            }
            v.b2[j] = self.b2[j] as i32;
        }
        v
    }

    /// The fixed-point features of one decision (`gru_mlp_features` in BPF).
    pub fn features(&self, raw: &RawInput) -> Vec<i64> {
        let f = self.frac_bits;
        let log2q_1p = |x: u64| -> i64 {
            let v = x.min(u64::MAX - 1) + 1;
            let n = 63 - v.leading_zeros();
            let mask = (1u64 << f) - 1;
            let frac = if n >= f {
                (v >> (n - f)) & mask
            } else {
                (v << (f - n)) & mask
            };
            ((u64::from(n) << f) | frac) as i64
        };
        let mut x = vec![
            i64::from(raw.prio.clamp(0, 255)) << f,
            i64::from(raw.nr_cpus_allowed.min(4096)) << f,
            log2q_1p(raw.runtime_ns >> 10),
            log2q_1p(raw.nvcsw),
            log2q_1p(raw.nivcsw),
            if raw.flags & PF_KTHREAD != 0 {
                1 << f
            } else {
                0
            },
            log2q_1p(raw.switch_count),
        ];
        x.extend((0..self.n_out).map(|c| {
            if raw.prev_cpu == c as i32 {
                1i64 << f
            } else {
                0
            }
        }));
        x
    }

    /// One decision in Rust, the reference of the BPF code: (features, logits, CPU).
    pub fn decide(&self, raw: &RawInput) -> (Vec<i64>, Vec<i64>, usize) {
        let f = self.frac_bits;
        let x = self.features(raw);
        let layer = |w: &[Vec<i64>], b: &[i64], input: &[i64]| -> Vec<i64> {
            w.iter()
                .zip(b)
                .map(|(row, bias)| {
                    let acc: i64 = row.iter().zip(input).map(|(w, x)| w * x).sum();
                    ((acc >> f) + bias).clamp(-ACT_MAX, ACT_MAX)
                })
                .collect()
        };
        let h: Vec<i64> = layer(&self.w1, &self.b1, &x)
            .into_iter()
            .map(|v| v.max(0))
            .collect();
        let logits = layer(&self.w2, &self.b2, &h);
        let mut best = 0;
        for (j, v) in logits.iter().enumerate() {
            if *v > logits[best] {
                best = j;
            }
        }
        (x, logits, best)
    }
}

/// The model a BPF program reads through `gru_mlp_active()` (`src/bpf/mlp.bpf.h`): a map of
/// [`SLOTS`] models and a one-entry map naming the active one (0: none yet, else slot + 1).
/// [`ModelSlots::install`] checks a model, writes it with the next `model_seq` into the slot
/// not in use and only then names that slot: a decision reads the old model or the new one,
/// never half of each (two installs within one decision, microseconds, would be needed for
/// a decision to see the slot it reads rewritten). A model the checks refuse changes nothing.
pub struct ModelSlots {
    models: MapHandle,
    active: MapHandle,
    /// The active slot and its model's `model_seq`, once a model is installed.
    current: Option<(u32, u32)>,
}

impl ModelSlots {
    /// The slots in `models` (an array of [`SLOTS`] `struct gru_mlp_model`) and the active
    /// map `active` (an array of one `u32`), both as the BPF program declares them.
    pub fn new(models: MapHandle, active: MapHandle) -> Result<Self> {
        ensure!(
            models.value_size() as usize == std::mem::size_of::<mlp_intf::gru_mlp_model>()
                && models.max_entries() == SLOTS,
            "the model map holds {} values of {} bytes, expected {SLOTS} of {}",
            models.max_entries(),
            models.value_size(),
            std::mem::size_of::<mlp_intf::gru_mlp_model>()
        );
        ensure!(
            active.value_size() == 4 && active.max_entries() == 1,
            "the active-model map is not one u32"
        );
        Ok(Self {
            models,
            active,
            current: None,
        })
    }

    /// Installs `model` (after [`MlpModel::check`]) as the next one; returns its `model_seq`
    /// (1 for the first). On an error the model in use, if any, stays in use.
    pub fn install(&mut self, model: &MlpModel) -> Result<u32> {
        model.check()?;
        let (slot, seq) = match self.current {
            None => (0, 1),
            Some((slot, seq)) => ((slot + 1) % SLOTS, seq.wrapping_add(1).max(1)),
        };
        self.models
            .update(
                &slot.to_ne_bytes(),
                as_bytes(&model.map_value(seq)),
                MapFlags::ANY,
            )
            .with_context(|| format!("write model slot {slot}"))?;
        self.active
            .update(
                &0u32.to_ne_bytes(),
                &(slot + 1).to_ne_bytes(),
                MapFlags::ANY,
            )
            .context("name the active model slot")?;
        self.current = Some((slot, seq));
        Ok(seq)
    }

    /// The `model_seq` of the model in use (0: none yet).
    pub fn seq(&self) -> u32 {
        self.current.map_or(0, |(_, seq)| seq)
    }
}

/// One golden case of `model/mlp_golden.json`: a raw input and what Python computed.
#[derive(Debug, Clone, Deserialize)]
pub struct GoldenCase {
    /// `task_struct->prio`.
    pub prio: i32,
    /// CPUs the task may run on.
    pub nr_cpus_allowed: u32,
    /// `se.sum_exec_runtime`.
    pub runtime_ns: u64,
    /// Voluntary switches.
    pub nvcsw: u64,
    /// Involuntary switches.
    pub nivcsw: u64,
    /// `task_struct->flags`.
    pub flags: u32,
    /// Switch-ins.
    pub switch_count: u64,
    /// The task's previous CPU (-1: none).
    pub prev_cpu: i32,
    /// Python's fixed-point features.
    pub features: Vec<i64>,
    /// Python's fixed-point logits.
    pub logits: Vec<i64>,
    /// Python's decision.
    pub cpu: usize,
}

impl GoldenCase {
    /// The raw input as BPF reads it.
    pub fn raw(&self) -> RawInput {
        RawInput {
            runtime_ns: self.runtime_ns,
            nvcsw: self.nvcsw,
            nivcsw: self.nivcsw,
            switch_count: self.switch_count,
            prio: self.prio,
            nr_cpus_allowed: self.nr_cpus_allowed,
            flags: self.flags,
            prev_cpu: self.prev_cpu,
        }
    }
}

/// The golden file written by `train_mlp.py`.
#[derive(Debug, Clone, Deserialize)]
pub struct Golden {
    /// `asa.gru-mlp-golden`.
    pub schema: String,
    /// 1.
    pub version: u32,
    /// The cases.
    pub cases: Vec<GoldenCase>,
}

impl Golden {
    /// Reads a golden file and checks its schema.
    pub fn load(path: &Path) -> Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
        let golden: Self =
            serde_json::from_str(&text).with_context(|| format!("parse {}", path.display()))?;
        ensure!(
            golden.schema == "asa.gru-mlp-golden" && golden.version == 1,
            "{}: schema {} v{}, expected asa.gru-mlp-golden v1",
            path.display(),
            golden.schema,
            golden.version
        );
        ensure!(!golden.cases.is_empty(), "{}: no cases", path.display());
        Ok(golden)
    }
}

/// Views a plain-old-data value as bytes.
fn as_bytes<T: Copy>(v: &T) -> &[u8] {
    // SAFETY: T is a bindgen struct of integers (no padding the kernel could mind: padding
    // bytes are sent as they are, and the BPF side never reads them).
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>()) }
}

/// Whether this process may load BPF programs here; `Err` says why not (not root, no BTF).
pub fn bpf_available() -> std::result::Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not root: loading BPF programs needs CAP_BPF and CAP_NET_ADMIN".into());
    }
    if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        return Err("the kernel has no BTF (/sys/kernel/btf/vmlinux)".into());
    }
    Ok(())
}

/// What the verifier and the JIT made of one program.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ProgStats {
    /// Instructions the verifier processed (`bpf_prog_info.verified_insns`, "processed N insns").
    pub verified_insns: u32,
    /// Instructions of the program after the verifier's rewrites (`xlated_prog_len / 8`).
    pub xlated_insns: u32,
    /// Bytes of JITed machine code.
    pub jited_bytes: u32,
}

/// Which timed program to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchProg {
    /// Map lookups, features, the MLP and the argmax: one whole decision.
    Decide,
    /// The same map lookups without the model: the harness's floor.
    Empty,
}

/// The host programs of `mlp_bench.bpf.c`, loaded, with a model in their map.
pub struct BpfMlp<'obj> {
    skel: MlpBenchSkel<'obj>,
}

impl<'obj> BpfMlp<'obj> {
    /// Opens and loads the programs (root; no sched_ext needed).
    pub fn load(open_object: &'obj mut MaybeUninit<OpenObject>) -> Result<Self> {
        let open = MlpBenchSkelBuilder::default()
            .open(open_object)
            .context("open the in-BPF model's BPF object")?;
        let skel = open
            .load()
            .context("load the in-BPF model's BPF programs (verifier)")?;
        Ok(Self { skel })
    }

    /// Writes `model` into the model map (slot 0).
    pub fn set_model(&self, model: &MlpModel, model_seq: u32) -> Result<()> {
        model.check()?;
        self.set_model_value(&model.map_value(model_seq))
    }

    /// Writes a raw map value (tests write malformed ones).
    pub fn set_model_value(&self, value: &mlp_intf::gru_mlp_model) -> Result<()> {
        self.skel
            .maps
            .gru_mlp_models
            .update(&0u32.to_ne_bytes(), as_bytes(value), MapFlags::ANY)
            .context("write the model map")
    }

    /// One decision by the syscall program: (features, logits, CPU or -error).
    pub fn eval(&self, raw: &RawInput) -> Result<(Vec<i32>, Vec<i32>, i32)> {
        let io = self.run_eval(raw, false)?;
        Ok((io.features.to_vec(), io.logits.to_vec(), io.cpu))
    }

    /// The model slots `gru_mlp_eval_active` reads, as scx_gru's select_cpu reads its own.
    pub fn slots(&self) -> Result<ModelSlots> {
        ModelSlots::new(
            MapHandle::try_from(&self.skel.maps.gru_mlp_slots).context("handle of the slots")?,
            MapHandle::try_from(&self.skel.maps.gru_mlp_active_slot)
                .context("handle of the active slot")?,
        )
    }

    /// One decision on the active slot's model, as scx_gru's select_cpu decides: (CPU or
    /// -error, the `model_seq` of the model used, 0 without one).
    pub fn eval_active(&self, raw: &RawInput) -> Result<(i32, u32)> {
        let io = self.run_eval(raw, true)?;
        Ok((io.cpu, io.model_seq))
    }

    /// Runs `gru_mlp_eval` (or `gru_mlp_eval_active`) on `raw`.
    fn run_eval(&self, raw: &RawInput, active: bool) -> Result<mlp_intf::gru_mlp_io> {
        // SAFETY: gru_mlp_io is plain integers; all-zero is a valid value.
        let mut io: mlp_intf::gru_mlp_io = unsafe { std::mem::zeroed() };
        io.raw = *raw;
        // SAFETY: as in as_bytes, and the buffer is exactly one gru_mlp_io.
        let ctx = unsafe {
            std::slice::from_raw_parts_mut(
                (&mut io as *mut mlp_intf::gru_mlp_io).cast::<u8>(),
                std::mem::size_of::<mlp_intf::gru_mlp_io>(),
            )
        };
        let input = libbpf_rs::ProgramInput {
            context_in: Some(ctx),
            ..Default::default()
        };
        let program = if active {
            &self.skel.progs.gru_mlp_eval_active
        } else {
            &self.skel.progs.gru_mlp_eval
        };
        program
            .test_run(input)
            .context("BPF_PROG_TEST_RUN of the evaluation program")?;
        Ok(io)
    }

    /// Writes the timed program's inputs (cycled through `BENCH_SLOTS` slots).
    pub fn set_bench_inputs(&self, inputs: &[RawInput]) -> Result<()> {
        ensure!(!inputs.is_empty(), "no benchmark inputs");
        for slot in 0..BENCH_SLOTS {
            let raw = &inputs[slot % inputs.len()];
            self.skel
                .maps
                .bench_inputs
                .update(&(slot as u32).to_ne_bytes(), as_bytes(raw), MapFlags::ANY)
                .with_context(|| format!("write benchmark input {slot}"))?;
        }
        Ok(())
    }

    /// The CPU the timed program last decided for each slot.
    pub fn bench_cpus(&self) -> Result<Vec<i32>> {
        (0..BENCH_SLOTS)
            .map(|slot| {
                let v = self
                    .skel
                    .maps
                    .bench_cpus
                    .lookup(&(slot as u32).to_ne_bytes(), MapFlags::ANY)
                    .context("read bench_cpus")?
                    .context("bench_cpus slot missing")?;
                Ok(i32::from_ne_bytes(v[..4].try_into()?))
            })
            .collect()
    }

    /// Runs a timed program `repeat` times in the kernel; returns the mean ns per run the
    /// kernel measured (`BPF_PROG_TEST_RUN`'s duration).
    pub fn time(&self, prog: BenchProg, repeat: u32) -> Result<u64> {
        // The smallest packet a tc program's test run accepts (an Ethernet header).
        let packet = [0u8; 64];
        let input = libbpf_rs::ProgramInput {
            data_in: Some(&packet),
            repeat,
            ..Default::default()
        };
        let program = match prog {
            BenchProg::Decide => &self.skel.progs.gru_mlp_bench,
            BenchProg::Empty => &self.skel.progs.gru_mlp_bench_empty,
        };
        let out = program
            .test_run(input)
            .with_context(|| format!("BPF_PROG_TEST_RUN of {prog:?}"))?;
        ensure!(
            out.return_value == 0,
            "{prog:?} returned {} (a map lookup failed)",
            out.return_value
        );
        Ok(out.duration.as_nanos() as u64)
    }

    /// Verifier and JIT figures of the decision programs (gru_mlp_eval, gru_mlp_bench).
    pub fn prog_stats(&self) -> Result<(ProgStats, ProgStats)> {
        Ok((
            prog_stats(self.skel.progs.gru_mlp_eval.as_fd())?,
            prog_stats(self.skel.progs.gru_mlp_bench.as_fd())?,
        ))
    }
}

/// `bpf_prog_info` of a loaded program.
fn prog_stats(fd: std::os::fd::BorrowedFd<'_>) -> Result<ProgStats> {
    let mut info = libbpf_rs::libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: info is a bpf_prog_info of len bytes with every pointer field zero (the kernel
    // then copies no arrays).
    let rc = unsafe {
        libbpf_rs::libbpf_sys::bpf_obj_get_info_by_fd(
            fd.as_raw_fd(),
            (&mut info as *mut libbpf_rs::libbpf_sys::bpf_prog_info).cast(),
            &mut len,
        )
    };
    ensure!(
        rc == 0,
        "bpf_obj_get_info_by_fd: {}",
        std::io::Error::from_raw_os_error(-rc)
    );
    Ok(ProgStats {
        verified_insns: info.verified_insns,
        xlated_insns: info.xlated_prog_len / 8,
        jited_bytes: info.jited_prog_len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model_dir() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("model")
    }

    #[test]
    fn committed_model_passes_the_checks_bpf_relies_on() {
        let model = MlpModel::load(&model_dir().join("mlp.json")).unwrap();
        assert_eq!(model.n_in, TASK_FEATURES + model.n_out);
        assert_eq!(model.frac_bits, 11, "the committed model is Q21.11");
    }

    #[test]
    fn rust_reference_matches_python_fixed_point_on_golden_cases() {
        let model = MlpModel::load(&model_dir().join("mlp.json")).unwrap();
        let golden = Golden::load(&model_dir().join("mlp_golden.json")).unwrap();
        for (k, case) in golden.cases.iter().enumerate() {
            let (x, logits, cpu) = model.decide(&case.raw());
            assert_eq!(x, case.features, "features of case {k}");
            assert_eq!(logits, case.logits, "logits of case {k}");
            assert_eq!(cpu, case.cpu, "CPU of case {k}");
        }
        let cpus: std::collections::BTreeSet<usize> = golden.cases.iter().map(|c| c.cpu).collect();
        assert!(
            cpus.len() > 1,
            "golden cases should name several CPUs: {cpus:?}"
        );
    }

    #[test]
    fn malformed_models_are_refused_with_the_reason() {
        let good = MlpModel::load(&model_dir().join("mlp.json")).unwrap();
        let mut m = good.clone();
        m.version = 2;
        assert!(m.check().unwrap_err().to_string().contains("v2"));
        let mut m = good.clone();
        m.n_in += 1;
        assert!(m.check().unwrap_err().to_string().contains("shape"));
        let mut m = good.clone();
        m.w1[0][0] = WEIGHT_MAX + 1;
        assert!(m.check().unwrap_err().to_string().contains("beyond"));
        let mut m = good.clone();
        m.w2.pop();
        assert!(m.check().is_err());
        let mut m = good;
        m.features.swap(0, 1);
        assert!(m.check().unwrap_err().to_string().contains("features"));
    }

    #[test]
    fn a_model_fits_only_a_machine_with_its_own_cpu_count() {
        let model = MlpModel::load(&model_dir().join("mlp.json")).unwrap();
        assert_eq!(model.describe(), "9-12-2 MLP, Q21.11");
        model.fit_cpus(2).unwrap();
        for cpus in [1, 4] {
            let err = model.fit_cpus(cpus).unwrap_err().to_string();
            assert!(
                err.contains(&format!("trained for 2 CPUs, this machine has {cpus}")),
                "{err}"
            );
        }
        let four = MlpModel::load(&model_dir().join("mlp-4cpu.json")).unwrap();
        assert_eq!(four.describe(), "11-12-4 MLP, Q21.11");
        four.fit_cpus(4).unwrap();
        assert!(four.fit_cpus(2).is_err() && four.fit_cpus(8).is_err());
    }

    #[test]
    fn an_always_model_passes_the_checks_and_always_picks_its_cpu() {
        let model = MlpModel::load(&model_dir().join("mlp.json")).unwrap();
        let golden = Golden::load(&model_dir().join("mlp_golden.json")).unwrap();
        for cpu in 0..model.n_out {
            let always = model.always(cpu);
            always.check().unwrap();
            assert!(golden
                .cases
                .iter()
                .all(|c| always.decide(&c.raw()).2 == cpu));
        }
    }

    #[test]
    fn map_value_carries_header_and_zero_padding() {
        let model = MlpModel::load(&model_dir().join("mlp.json")).unwrap();
        let v = model.map_value(7);
        assert_eq!(v.magic, mlp_intf::gru_mlp_consts_GRU_MLP_MAGIC);
        assert_eq!((v.version, v.model_seq), (MODEL_VERSION, 7));
        assert_eq!(v.w1[0][model.n_in - 1] as i64, model.w1[0][model.n_in - 1]);
        assert_eq!(v.w1[0][MAX_IN - 1], 0);
        assert_eq!(v.w2[MAX_CPUS - 1][0], 0);
    }
}
