//! The model features, how they are derived from a [`TaskEvent`] sent by BPF,
//! and the per-task sliding windows fed to the GRU.
//!
//! Per event the model sees the seven task features of the thesis (table 3.3)
//! and, beyond the thesis, where that event placed the task: one 0/1 column per
//! CPU of the model (`placed_cpu_K`). The default scheduler keeps a task on its
//! previous CPU about 99 % of the time; without that column a model imitating
//! it can only guess from the kind of task (test accuracy 0.448 on the first
//! model, below the best constant CPU).
//!
//! The same features are computed in `train/gru_features.py`; the model's
//! metadata names them and [`check_feature_schema`] refuses a model whose
//! feature list differs from [`feature_specs`] for its number of CPUs.

use std::collections::{HashMap, VecDeque};

use anyhow::{bail, ensure, Result};
use serde::{Deserialize, Serialize};

use crate::bpf_intf;

/// Number of per-task features per event (thesis table 3.3; shared with `intf.h`).
pub const NR_TASK_FEATURES: usize = bpf_intf::gru_consts_GRU_NR_TASK_FEATURES as usize;

/// PF_KTHREAD as used by the kernel (shared with `intf.h`).
pub const PF_KTHREAD: u32 = bpf_intf::gru_consts_GRU_PF_KTHREAD;

/// How a raw event field becomes a model input, before standardization.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transform {
    /// The value as is.
    Identity,
    /// `ln(1 + x)`: counters and times spanning many orders of magnitude.
    Log1p,
    /// `ln(1 + x / 1000)`: nanoseconds, in log-microseconds.
    Log1pUs,
    /// 1.0 if the PF_KTHREAD bit is set in the task flags, else 0.0.
    KthreadBit,
}

impl Transform {
    /// Applies the transform to one raw value.
    pub fn apply(self, raw: f64) -> f32 {
        match self {
            Transform::Identity => raw as f32,
            Transform::Log1p => raw.max(0.0).ln_1p() as f32,
            Transform::Log1pUs => (raw.max(0.0) / 1000.0).ln_1p() as f32,
            Transform::KthreadBit => {
                if (raw as u64) & u64::from(PF_KTHREAD) != 0 {
                    1.0
                } else {
                    0.0
                }
            }
        }
    }
}

/// Which field of a [`TaskEvent`] a feature reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawField {
    /// `task_struct->prio`.
    Prio,
    /// `task_struct->nr_cpus_allowed`.
    NrCpusAllowed,
    /// `se.sum_exec_runtime` (ns).
    RuntimeNs,
    /// Voluntary context switches.
    Nvcsw,
    /// Involuntary context switches.
    Nivcsw,
    /// `task_struct->flags`.
    Flags,
    /// Switch-ins counted by the BPF program.
    SwitchCount,
    /// 1.0 if the event placed the task on this CPU, else 0.0.
    PlacedCpuIs(i32),
}

impl RawField {
    /// The raw value of this field in `event`.
    pub fn read(self, event: &TaskEvent) -> f64 {
        match self {
            RawField::Prio => f64::from(event.prio),
            RawField::NrCpusAllowed => f64::from(event.nr_cpus_allowed),
            RawField::RuntimeNs => event.runtime_ns as f64,
            RawField::Nvcsw => event.nvcsw as f64,
            RawField::Nivcsw => event.nivcsw as f64,
            RawField::Flags => f64::from(event.flags),
            RawField::SwitchCount => event.switch_count as f64,
            RawField::PlacedCpuIs(cpu) => {
                if event.cpu == cpu {
                    1.0
                } else {
                    0.0
                }
            }
        }
    }
}

/// One model input column: its name (as in the model metadata), the event field
/// it reads and its transform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeatureSpec {
    /// Name used in the model metadata and the training data.
    pub name: String,
    /// The event field.
    pub field: RawField,
    /// Transform applied to the raw field.
    pub transform: Transform,
}

/// The seven task features (thesis table 3.3), in tensor order. Must match
/// `struct gru_task_event` (intf.h) and `train/gru_features.py`.
pub const TASK_FEATURES: [(&str, RawField, Transform); NR_TASK_FEATURES] = [
    ("prio", RawField::Prio, Transform::Identity),
    (
        "nr_cpus_allowed",
        RawField::NrCpusAllowed,
        Transform::Identity,
    ),
    ("runtime_ns", RawField::RuntimeNs, Transform::Log1pUs),
    ("nvcsw", RawField::Nvcsw, Transform::Log1p),
    ("nivcsw", RawField::Nivcsw, Transform::Log1p),
    ("flags", RawField::Flags, Transform::KthreadBit),
    ("switch_count", RawField::SwitchCount, Transform::Log1p),
];

/// Every input column of a model for `nr_cpus` CPUs, in tensor order: the seven
/// task features, then `placed_cpu_0` .. `placed_cpu_{nr_cpus-1}`.
pub fn feature_specs(nr_cpus: usize) -> Vec<FeatureSpec> {
    let task = TASK_FEATURES
        .iter()
        .map(|(name, field, transform)| FeatureSpec {
            name: (*name).to_string(),
            field: *field,
            transform: *transform,
        });
    let placed = (0..nr_cpus).map(|cpu| FeatureSpec {
        name: format!("placed_cpu_{cpu}"),
        field: RawField::PlacedCpuIs(cpu as i32),
        transform: Transform::Identity,
    });
    task.chain(placed).collect()
}

/// A task event as decoded from the ring buffer (`struct gru_task_event`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskEvent {
    /// CLOCK_MONOTONIC time of the event (ns).
    pub stamp_ns: u64,
    /// Thread id.
    pub pid: u32,
    /// CPU the task was placed on.
    pub cpu: i32,
    /// Kernel priority (`task_struct->prio`).
    pub prio: i32,
    /// Number of CPUs the task may run on.
    pub nr_cpus_allowed: u32,
    /// Total run time (`se.sum_exec_runtime`, ns).
    pub runtime_ns: u64,
    /// Voluntary context switches.
    pub nvcsw: u64,
    /// Involuntary context switches.
    pub nivcsw: u64,
    /// Switch-ins counted by the BPF program.
    pub switch_count: u64,
    /// `task_struct->flags`.
    pub flags: u32,
    /// `enum gru_event_source`.
    pub source: u32,
    /// Task name.
    pub comm: String,
}

impl TaskEvent {
    /// Size of the C struct this decodes.
    pub const WIRE_SIZE: usize = std::mem::size_of::<bpf_intf::gru_task_event>();

    /// Decodes one ring-buffer record; errors if it is too short.
    pub fn from_bytes(data: &[u8]) -> Result<Self> {
        ensure!(
            data.len() >= Self::WIRE_SIZE,
            "ring buffer record of {} bytes, expected {}",
            data.len(),
            Self::WIRE_SIZE
        );
        // SAFETY: the length is checked above, the struct is plain old data and
        // read_unaligned copes with any alignment of the record.
        let raw: bpf_intf::gru_task_event =
            unsafe { std::ptr::read_unaligned(data.as_ptr() as *const bpf_intf::gru_task_event) };
        let comm_bytes: Vec<u8> = raw
            .comm
            .iter()
            .take_while(|c| **c != 0)
            .map(|c| *c as u8)
            .collect();
        Ok(Self {
            stamp_ns: raw.stamp_ns,
            pid: raw.pid,
            cpu: raw.cpu,
            prio: raw.prio,
            nr_cpus_allowed: raw.nr_cpus_allowed,
            runtime_ns: raw.runtime_ns,
            nvcsw: raw.nvcsw,
            nivcsw: raw.nivcsw,
            switch_count: raw.switch_count,
            flags: raw.flags,
            source: raw.source,
            comm: String::from_utf8_lossy(&comm_bytes).into_owned(),
        })
    }
}

/// The model's input columns with their standardization: `(x - mean) / std`.
#[derive(Debug, Clone, PartialEq)]
pub struct Scaling {
    specs: Vec<FeatureSpec>,
    /// Per-column mean of the training data (after the transform).
    pub mean: Vec<f32>,
    /// Per-column standard deviation (after the transform); never zero.
    pub std: Vec<f32>,
}

impl Scaling {
    /// No standardization, for a model of `nr_cpus` CPUs.
    pub fn identity(nr_cpus: usize) -> Self {
        let specs = feature_specs(nr_cpus);
        Self {
            mean: vec![0.0; specs.len()],
            std: vec![1.0; specs.len()],
            specs,
        }
    }

    /// Number of input columns per event.
    pub fn width(&self) -> usize {
        self.specs.len()
    }

    /// Writes the model input vector of one event into `out` ([`Scaling::width`] values).
    pub fn features_into(&self, event: &TaskEvent, out: &mut [f32]) {
        for (i, (spec, slot)) in self.specs.iter().zip(out.iter_mut()).enumerate() {
            *slot = (spec.transform.apply(spec.field.read(event)) - self.mean[i]) / self.std[i];
        }
    }

    /// The model input vector of one event.
    pub fn features(&self, event: &TaskEvent) -> Vec<f32> {
        let mut out = vec![0.0; self.width()];
        self.features_into(event, &mut out);
        out
    }
}

/// A feature named in a model's metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeatureMeta {
    /// Feature name.
    pub name: String,
    /// Transform the model was trained with.
    pub transform: Transform,
    /// Training mean after the transform.
    pub mean: f32,
    /// Training standard deviation after the transform.
    pub std: f32,
}

/// Checks that a model's feature list is exactly [`feature_specs`] for its
/// `nr_cpus` (names, order and transforms) and returns its scaling.
pub fn check_feature_schema(features: &[FeatureMeta], nr_cpus: usize) -> Result<Scaling> {
    let mut scaling = Scaling::identity(nr_cpus);
    if features.len() != scaling.width() {
        bail!(
            "model has {} features, scx_gru computes {} for a {nr_cpus}-CPU model \
             ({NR_TASK_FEATURES} task features and placed_cpu_0..{}); retrain it with train/train_gru.py",
            features.len(),
            scaling.width(),
            nr_cpus.saturating_sub(1)
        );
    }
    for (i, (meta, spec)) in features.iter().zip(scaling.specs.iter()).enumerate() {
        if meta.name != spec.name || meta.transform != spec.transform {
            bail!(
                "model feature {i} is {:?} ({:?}), scx_gru computes {:?} ({:?})",
                meta.name,
                meta.transform,
                spec.name,
                spec.transform
            );
        }
        ensure!(
            meta.std.is_finite() && meta.std > 0.0 && meta.mean.is_finite(),
            "model feature {:?} has an invalid scaling (mean {}, std {})",
            meta.name,
            meta.mean,
            meta.std
        );
    }
    for (i, meta) in features.iter().enumerate() {
        scaling.mean[i] = meta.mean;
        scaling.std[i] = meta.std;
    }
    Ok(scaling)
}

/// The last `len` feature vectors of one task, flattened (oldest first).
#[derive(Debug, Clone)]
struct TaskWindow {
    values: VecDeque<f32>,
    last_seen_ns: u64,
}

/// Per-task sliding windows of the last `len` events of `width` values each.
#[derive(Debug)]
pub struct TaskWindows {
    len: usize,
    width: usize,
    windows: HashMap<u32, TaskWindow>,
}

impl TaskWindows {
    /// Windows of `len` events of `width` values each.
    pub fn new(len: usize, width: usize) -> Self {
        assert!(len > 0, "a window holds at least one event");
        assert!(width > 0, "an event has at least one value");
        Self {
            len,
            width,
            windows: HashMap::new(),
        }
    }

    /// Events per full window.
    pub fn window_len(&self) -> usize {
        self.len
    }

    /// Number of tasks tracked.
    pub fn nr_tasks(&self) -> usize {
        self.windows.len()
    }

    /// Appends an event of `pid` (`width` values); returns true when its window is full.
    pub fn push(&mut self, pid: u32, stamp_ns: u64, features: &[f32]) -> bool {
        assert_eq!(features.len(), self.width, "event of the wrong width");
        let full = self.len * self.width;
        let window = self.windows.entry(pid).or_insert_with(|| TaskWindow {
            values: VecDeque::with_capacity(full),
            last_seen_ns: stamp_ns,
        });
        if window.values.len() == full {
            window.values.drain(..self.width);
        }
        window.values.extend(features.iter().copied());
        window.last_seen_ns = stamp_ns;
        window.values.len() == full
    }

    /// Writes the full window of `pid` (oldest first) into `out`
    /// (`len * width` values); false if the window is not full.
    pub fn fill_tensor(&self, pid: u32, out: &mut [f32]) -> bool {
        let Some(window) = self.windows.get(&pid) else {
            return false;
        };
        let full = self.len * self.width;
        if window.values.len() != full || out.len() != full {
            return false;
        }
        for (slot, value) in out.iter_mut().zip(window.values.iter()) {
            *slot = *value;
        }
        true
    }

    /// Forgets every task's events (the event stream had a gap: windows would join events
    /// from before and after it, a sequence the model never saw).
    pub fn clear(&mut self) {
        self.windows.clear();
    }

    /// Forgets tasks not seen since `oldest_ns`; returns how many.
    pub fn evict_older_than(&mut self, oldest_ns: u64) -> usize {
        let before = self.windows.len();
        self.windows.retain(|_, w| w.last_seen_ns >= oldest_ns);
        before - self.windows.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event() -> TaskEvent {
        TaskEvent {
            stamp_ns: 1,
            pid: 42,
            cpu: 1,
            prio: 120,
            nr_cpus_allowed: 2,
            runtime_ns: 999_000,
            nvcsw: 0,
            nivcsw: 6,
            switch_count: 1,
            flags: PF_KTHREAD | 0x40,
            source: 2,
            comm: "t".into(),
        }
    }

    #[test]
    fn transforms_match_hand_computed_values() {
        let f = Scaling::identity(2).features(&event());
        assert_eq!(f.len(), NR_TASK_FEATURES + 2);
        assert_eq!(f[0], 120.0);
        assert_eq!(f[1], 2.0);
        // ln(1 + 999 us) = ln(1000)
        assert!((f[2] - 1000f32.ln()).abs() < 1e-5);
        assert_eq!(f[3], 0.0);
        // ln(7)
        assert!((f[4] - 7f32.ln()).abs() < 1e-6);
        assert_eq!(f[5], 1.0);
        // ln(2)
        assert!((f[6] - 2f32.ln()).abs() < 1e-6);
        // Placed on CPU 1 of 2.
        assert_eq!(&f[7..], &[0.0, 1.0]);
    }

    #[test]
    fn placed_cpu_columns_follow_the_model_size() {
        let names: Vec<String> = feature_specs(3).into_iter().map(|s| s.name).collect();
        assert_eq!(
            &names[7..],
            &["placed_cpu_0", "placed_cpu_1", "placed_cpu_2"]
        );
        let mut ev = event();
        ev.cpu = 2;
        assert_eq!(&Scaling::identity(3).features(&ev)[7..], &[0.0, 0.0, 1.0]);
        // A CPU the model does not know sets no column.
        ev.cpu = 5;
        assert_eq!(&Scaling::identity(3).features(&ev)[7..], &[0.0, 0.0, 0.0]);
    }

    #[test]
    fn standardization_uses_mean_and_std() {
        let mut s = Scaling::identity(2);
        s.mean[0] = 100.0;
        s.std[0] = 10.0;
        s.mean[8] = 0.5;
        s.std[8] = 0.5;
        let f = s.features(&event());
        assert_eq!((f[0], f[8]), (2.0, 1.0));
    }

    #[test]
    fn decodes_a_c_record() {
        let mut raw: bpf_intf::gru_task_event = unsafe { std::mem::zeroed() };
        raw.pid = 7;
        raw.cpu = 3;
        raw.nvcsw = 5;
        raw.comm[0] = b'a' as _;
        raw.comm[1] = b'b' as _;
        let bytes = unsafe {
            std::slice::from_raw_parts(&raw as *const _ as *const u8, TaskEvent::WIRE_SIZE)
        };
        let ev = TaskEvent::from_bytes(bytes).unwrap();
        assert_eq!(
            (ev.pid, ev.cpu, ev.nvcsw, ev.comm.as_str()),
            (7, 3, 5, "ab")
        );
        assert!(TaskEvent::from_bytes(&bytes[..8]).is_err());
    }

    #[test]
    fn window_fills_slides_and_evicts() {
        let mut w = TaskWindows::new(3, 2);
        let mut out = vec![0.0; 3 * 2];
        assert!(!w.push(1, 10, &[1.0, 1.5]));
        assert!(!w.fill_tensor(1, &mut out));
        assert!(!w.push(1, 11, &[2.0, 2.5]));
        assert!(w.push(1, 12, &[3.0, 3.5]));
        assert!(w.push(1, 13, &[4.0, 4.5]));
        assert!(w.fill_tensor(1, &mut out));
        assert_eq!(out, [2.0, 2.5, 3.0, 3.5, 4.0, 4.5]);
        assert!(!w.fill_tensor(1, &mut out[..4]));
        w.push(2, 5, &[0.0, 0.0]);
        assert_eq!(w.evict_older_than(10), 1);
        assert_eq!(w.nr_tasks(), 1);
    }

    fn metas(nr_cpus: usize) -> Vec<FeatureMeta> {
        feature_specs(nr_cpus)
            .into_iter()
            .map(|s| FeatureMeta {
                name: s.name,
                transform: s.transform,
                mean: 0.0,
                std: 1.0,
            })
            .collect()
    }

    #[test]
    fn schema_check_rejects_reordered_features() {
        let mut metas = metas(2);
        assert!(check_feature_schema(&metas, 2).is_ok());
        // A model of another size, or one without the placed-CPU columns.
        assert!(check_feature_schema(&metas, 3).is_err());
        let err = check_feature_schema(&metas[..NR_TASK_FEATURES], 2).unwrap_err();
        assert!(err.to_string().contains("retrain"), "{err}");
        metas.swap(3, 4);
        assert!(check_feature_schema(&metas, 2).is_err());
        metas.swap(3, 4);
        metas.swap(7, 8);
        assert!(check_feature_schema(&metas, 2).is_err());
        metas.swap(7, 8);
        metas[0].std = 0.0;
        assert!(check_feature_schema(&metas, 2).is_err());
    }
}
