//! The seven model features (thesis table 3.3), how they are derived from a
//! [`TaskEvent`] sent by BPF, and the per-task sliding windows fed to the GRU.
//!
//! The same transforms are implemented in `train/gru_features.py`; the model's
//! metadata names them and [`check_feature_schema`] refuses a model whose
//! feature list differs from [`FEATURES`].

use std::collections::{HashMap, VecDeque};

use anyhow::{bail, ensure, Result};
use serde::{Deserialize, Serialize};

use crate::bpf_intf;

/// Number of features per event (shared with `intf.h`).
pub const NR_FEATURES: usize = bpf_intf::gru_consts_GRU_NR_FEATURES as usize;

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

/// One feature: its name (as in the model metadata) and transform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeatureSpec {
    /// Name used in the model metadata and the training data.
    pub name: &'static str,
    /// Transform applied to the raw field.
    pub transform: Transform,
}

/// The features, in tensor order. Must match `struct gru_task_event` (intf.h)
/// and `train/gru_features.py`.
pub const FEATURES: [FeatureSpec; NR_FEATURES] = [
    FeatureSpec {
        name: "prio",
        transform: Transform::Identity,
    },
    FeatureSpec {
        name: "nr_cpus_allowed",
        transform: Transform::Identity,
    },
    FeatureSpec {
        name: "runtime_ns",
        transform: Transform::Log1pUs,
    },
    FeatureSpec {
        name: "nvcsw",
        transform: Transform::Log1p,
    },
    FeatureSpec {
        name: "nivcsw",
        transform: Transform::Log1p,
    },
    FeatureSpec {
        name: "flags",
        transform: Transform::KthreadBit,
    },
    FeatureSpec {
        name: "switch_count",
        transform: Transform::Log1p,
    },
];

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

    /// The raw values of the features, in [`FEATURES`] order.
    pub fn raw_features(&self) -> [f64; NR_FEATURES] {
        [
            f64::from(self.prio),
            f64::from(self.nr_cpus_allowed),
            self.runtime_ns as f64,
            self.nvcsw as f64,
            self.nivcsw as f64,
            f64::from(self.flags),
            self.switch_count as f64,
        ]
    }
}

/// Standardization of the transformed features: `(x - mean) / std`.
#[derive(Debug, Clone, PartialEq)]
pub struct Scaling {
    /// Per-feature mean of the training data (after the transform).
    pub mean: [f32; NR_FEATURES],
    /// Per-feature standard deviation (after the transform); never zero.
    pub std: [f32; NR_FEATURES],
}

impl Scaling {
    /// No standardization.
    pub fn identity() -> Self {
        Self {
            mean: [0.0; NR_FEATURES],
            std: [1.0; NR_FEATURES],
        }
    }

    /// The model input vector of one event.
    pub fn features(&self, event: &TaskEvent) -> [f32; NR_FEATURES] {
        let raw = event.raw_features();
        let mut out = [0.0f32; NR_FEATURES];
        for (i, spec) in FEATURES.iter().enumerate() {
            out[i] = (spec.transform.apply(raw[i]) - self.mean[i]) / self.std[i];
        }
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

/// Checks that a model's feature list is exactly [`FEATURES`] (names,
/// order and transforms) and returns its scaling.
pub fn check_feature_schema(features: &[FeatureMeta]) -> Result<Scaling> {
    if features.len() != NR_FEATURES {
        bail!(
            "model has {} features, the BPF event carries {NR_FEATURES}",
            features.len()
        );
    }
    let mut scaling = Scaling::identity();
    for (i, (meta, spec)) in features.iter().zip(FEATURES.iter()).enumerate() {
        if meta.name != spec.name || meta.transform != spec.transform {
            bail!(
                "model feature {i} is {:?} ({:?}), the BPF event has {:?} ({:?})",
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
        scaling.mean[i] = meta.mean;
        scaling.std[i] = meta.std;
    }
    Ok(scaling)
}

/// The last `len` feature vectors of one task.
#[derive(Debug, Clone)]
struct TaskWindow {
    events: VecDeque<[f32; NR_FEATURES]>,
    last_seen_ns: u64,
}

/// Per-task sliding windows of the last `len` events.
#[derive(Debug)]
pub struct TaskWindows {
    len: usize,
    windows: HashMap<u32, TaskWindow>,
}

impl TaskWindows {
    /// Windows of `len` events each.
    pub fn new(len: usize) -> Self {
        assert!(len > 0, "a window holds at least one event");
        Self {
            len,
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

    /// Appends an event of `pid`; returns true when its window is full.
    pub fn push(&mut self, pid: u32, stamp_ns: u64, features: [f32; NR_FEATURES]) -> bool {
        let len = self.len;
        let window = self.windows.entry(pid).or_insert_with(|| TaskWindow {
            events: VecDeque::with_capacity(len),
            last_seen_ns: stamp_ns,
        });
        if window.events.len() == len {
            window.events.pop_front();
        }
        window.events.push_back(features);
        window.last_seen_ns = stamp_ns;
        window.events.len() == len
    }

    /// Writes the full window of `pid` (oldest first) into `out`
    /// (`len * NR_FEATURES` values); false if the window is not full.
    pub fn fill_tensor(&self, pid: u32, out: &mut [f32]) -> bool {
        let Some(window) = self.windows.get(&pid) else {
            return false;
        };
        if window.events.len() != self.len || out.len() != self.len * NR_FEATURES {
            return false;
        }
        for (chunk, features) in out.chunks_exact_mut(NR_FEATURES).zip(window.events.iter()) {
            chunk.copy_from_slice(features);
        }
        true
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
        let f = Scaling::identity().features(&event());
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
    }

    #[test]
    fn standardization_uses_mean_and_std() {
        let mut s = Scaling::identity();
        s.mean[0] = 100.0;
        s.std[0] = 10.0;
        assert_eq!(s.features(&event())[0], 2.0);
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
        let mut w = TaskWindows::new(3);
        let mut out = vec![0.0; 3 * NR_FEATURES];
        assert!(!w.push(1, 10, [1.0; NR_FEATURES]));
        assert!(!w.fill_tensor(1, &mut out));
        assert!(!w.push(1, 11, [2.0; NR_FEATURES]));
        assert!(w.push(1, 12, [3.0; NR_FEATURES]));
        assert!(w.push(1, 13, [4.0; NR_FEATURES]));
        assert!(w.fill_tensor(1, &mut out));
        assert_eq!(out[0], 2.0);
        assert_eq!(out[NR_FEATURES], 3.0);
        assert_eq!(out[2 * NR_FEATURES], 4.0);
        w.push(2, 5, [0.0; NR_FEATURES]);
        assert_eq!(w.evict_older_than(10), 1);
        assert_eq!(w.nr_tasks(), 1);
    }

    #[test]
    fn schema_check_rejects_reordered_features() {
        let mut metas: Vec<FeatureMeta> = FEATURES
            .iter()
            .map(|s| FeatureMeta {
                name: s.name.into(),
                transform: s.transform,
                mean: 0.0,
                std: 1.0,
            })
            .collect();
        assert!(check_feature_schema(&metas).is_ok());
        metas.swap(3, 4);
        assert!(check_feature_schema(&metas).is_err());
        metas.swap(3, 4);
        metas[0].std = 0.0;
        assert!(check_feature_schema(&metas).is_err());
        assert!(check_feature_schema(&metas[..6]).is_err());
    }
}
