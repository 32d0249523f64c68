//! Perception: samples the system every tick into the feature vector of
//! `agent/feature_schema.toml` (rates and shares, so values compare across machines).
//!
//! - [`schema`]: the feature schema file, loaded and validated, and the check of a model's
//!   schema against it;
//! - [`procfs_source`]: CPU, memory, disk, network and process features from /proc;
//! - [`task_scan`]: the process scan as one BPF task iterator walk (the procfs scan's source
//!   when BPF is available);
//! - [`bpf`]: scheduler features (switches, migrations, wakeups, wakeup-to-run latency,
//!   run-queue wait) from a BPF program on the sched tracepoints;
//! - [`record`]: `asa record`, labelled samples to a Parquet (or CSV) file.
//!
//! Without BPF rights or kernel BTF the [`Sampler`] keeps running on procfs alone: it warns
//! once and reports the BPF features as NaN with their `missing` flag set.

pub mod app_record;
pub mod apps;
pub mod bpf;
pub mod procfs_source;
pub mod record;
pub mod schema;
pub mod task_scan;

use std::collections::HashMap;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::Result;

pub use procfs_source::ReadCost;
pub use record::{record, RecordArgs};
pub use schema::{FeatureSource, SchemaFile};

use bpf::{RawCounters, SchedProbe};
use procfs_source::{ProcReader, ProcSnapshot};

/// Every feature this sampler can compute, with its source. The schema file may list any
/// subset, in any order.
pub const KNOWN_FEATURES: &[(&str, FeatureSource)] = &{
    const P: usize = procfs_source::PROCFS_FEATURES.len();
    const B: usize = bpf::BPF_FEATURES.len();
    let mut all = [("", FeatureSource::Procfs); P + B];
    let mut i = 0;
    while i < P {
        all[i] = (procfs_source::PROCFS_FEATURES[i], FeatureSource::Procfs);
        i += 1;
    }
    while i < P + B {
        all[i] = (bpf::BPF_FEATURES[i - P], FeatureSource::Bpf);
        i += 1;
    }
    all
};

/// The source the sampler computes `name` from, or None if it does not know the feature.
pub fn known_feature_source(name: &str) -> Option<FeatureSource> {
    KNOWN_FEATURES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, source)| *source)
}

/// Whether the sampler tries to load the BPF program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BpfMode {
    /// Load it; on failure warn once and continue procfs-only.
    Auto,
    /// Do not load it (BPF features are missing).
    Off,
}

/// Where one [`Sampler::sample`] spent its time (µs of wall time), for the decision log and
/// the perception benchmark.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SampleCost {
    /// The procfs part, by file, parse and process scan.
    pub procfs: ReadCost,
    /// Reading the BPF counters (one per-CPU array lookup).
    pub bpf_us: f64,
    /// Computing the features from the readings.
    pub features_us: f64,
}

/// One tick's feature vector.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Wall-clock time of the reading, ms since the Unix epoch.
    pub unix_ms: u64,
    /// Seconds since the previous reading (the interval the rates are averaged over).
    pub interval_s: f64,
    /// Values in schema order; NaN where missing.
    pub values: Vec<f64>,
    /// `missing[i]` is true when feature i could not be measured this tick.
    pub missing: Vec<bool>,
    /// How many CPUs' worth of CPU time (CPU seconds per second of the process scan's
    /// interval) the processes passed to [`Sampler::ignore_processes`] used: the agent's own
    /// work in this sample (0 when none, or when the process scan is unavailable).
    pub ignored_cpus: f64,
    /// How many CPUs' worth of time the machine left idle over the interval (idle and I/O
    /// wait); None when no CPU time was counted between the readings.
    pub idle_cpus: Option<f64>,
}

impl Sample {
    /// The values as the classifier takes them (`f32`, schema order, NaN = missing). A value
    /// that is not finite as `f32` (an infinite rate, or one beyond `f32`'s range) is no
    /// measurement and is passed as missing: the classifier's graph is exact for finite and NaN
    /// inputs only (`classifier/asa_classifier/fold.py`).
    pub fn to_f32(&self) -> Vec<f32> {
        self.values
            .iter()
            .map(|&v| {
                let v = v as f32;
                if v.is_finite() {
                    v
                } else {
                    f32::NAN
                }
            })
            .collect()
    }

    /// The value of a feature by name (None if the schema has no such feature).
    pub fn get(&self, schema: &SchemaFile, name: &str) -> Option<f64> {
        schema
            .features
            .iter()
            .position(|f| f.name == name)
            .map(|i| self.values[i])
    }
}

/// The perception sampler: call [`Sampler::sample`] once per tick.
pub struct Sampler {
    last_cost: SampleCost,
    schema: SchemaFile,
    position: HashMap<&'static str, usize>,
    procfs: ProcReader,
    probe: Option<SchedProbe>,
    bpf_unavailable_reason: Option<String>,
    previous_proc: ProcSnapshot,
    previous_bpf: Option<RawCounters>,
    bpf_read_warned: bool,
}

impl Sampler {
    /// Builds a sampler for `schema` and takes the baseline reading (the first
    /// [`Sampler::sample`] reports the interval since this call).
    pub fn new(schema: SchemaFile, mode: BpfMode) -> Result<Self> {
        let position = KNOWN_FEATURES
            .iter()
            .filter_map(|(name, _)| {
                schema
                    .features
                    .iter()
                    .position(|f| f.name == *name)
                    .map(|i| (*name, i))
            })
            .collect();
        let wants_bpf = schema
            .features
            .iter()
            .any(|f| f.source == FeatureSource::Bpf);
        let (probe, reason) = match (mode, wants_bpf) {
            (BpfMode::Off, _) => (None, Some("disabled (--no-bpf)".to_string())),
            (BpfMode::Auto, false) => (None, Some("the schema has no BPF feature".to_string())),
            (BpfMode::Auto, true) => match SchedProbe::load() {
                Ok(probe) => (Some(probe), None),
                Err(e) => {
                    log::warn!(
                        "perception: BPF scheduler probe unavailable, sampling procfs only (BPF features are NaN/missing): {e:#}"
                    );
                    (None, Some(format!("{e:#}")))
                }
            },
        };
        let mut procfs = ProcReader::new();
        if mode == BpfMode::Auto {
            match task_scan::TaskScan::load() {
                Ok(scan) => procfs.use_task_scan(scan),
                Err(e) => log::info!(
                    "perception: the BPF task scan is unavailable, the process scan reads /proc/<pid>/stat: {e:#}"
                ),
            }
        }
        let previous_proc = procfs.snapshot()?;
        let previous_bpf = match &probe {
            Some(p) => Some(p.read()?),
            None => None,
        };
        Ok(Sampler {
            last_cost: SampleCost::default(),
            schema,
            position,
            procfs,
            probe,
            bpf_unavailable_reason: reason,
            previous_proc,
            previous_bpf,
            bpf_read_warned: false,
        })
    }

    /// The schema the samples follow.
    pub fn schema(&self) -> &SchemaFile {
        &self.schema
    }

    /// Where the last [`Sampler::sample`] spent its time.
    pub fn last_cost(&self) -> SampleCost {
        self.last_cost
    }

    /// Whether the process scan uses the BPF task iterator (else /proc/<pid>/stat).
    pub fn task_scan_active(&self) -> bool {
        self.procfs.uses_task_scan()
    }

    /// The last sample's threads, from the same BPF task walk, into `threads` (cleared first),
    /// for per-application perception ([`apps::AppGrouper`]): given only while asked for
    /// ([`Sampler::want_threads`]) and never without the BPF task walk.
    pub fn threads(&self, threads: &mut Vec<apps::ThreadSample>) -> apps::ThreadWalk {
        self.procfs.threads(threads)
    }

    /// Whether samples from the next on read every thread's application and behaviour for
    /// [`Sampler::threads`] (off at start: a whole-machine walk reads half as much per thread).
    pub fn want_threads(&mut self, on: bool) -> Result<()> {
        self.procfs.want_threads(on)
    }

    /// Leave these processes (besides the sampler's own) out of the per-process features from
    /// the next sample on, in place of the previous call's: the agent's hot-standby experts,
    /// whose loading is not the workload.
    pub fn ignore_processes(&mut self, pids: impl IntoIterator<Item = i32>) {
        self.procfs.ignore_also(pids);
    }

    /// Whether the BPF features are being measured.
    pub fn bpf_active(&self) -> bool {
        self.probe.is_some()
    }

    /// Why the BPF features are missing (None while BPF is active).
    pub fn bpf_unavailable_reason(&self) -> Option<&str> {
        self.bpf_unavailable_reason.as_deref()
    }

    /// Reads now and returns the features over the interval since the previous reading.
    pub fn sample(&mut self) -> Result<Sample> {
        let started = Instant::now();
        let unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let current = self.procfs.snapshot()?;
        let features_started = Instant::now();
        let n = self.schema.features.len();
        let mut values = vec![f64::NAN; n];
        let mut missing = vec![true; n];
        let position = &self.position;
        let mut emit = |name: &'static str, value: f64| {
            if let Some(&i) = position.get(name) {
                values[i] = value;
                missing[i] = false;
            }
        };
        procfs_source::procfs_features(&self.previous_proc, &current, &mut emit);
        let idle_cpus = procfs_source::idle_cpus(&self.previous_proc, &current);
        let dt = current.at_s - self.previous_proc.at_s;
        let bpf_started = Instant::now();
        let mut bpf_us = 0.0;
        if let Some(probe) = &self.probe {
            match probe.read() {
                Ok(now) => {
                    if let Some(before) = &self.previous_bpf {
                        bpf::bpf_features(&now.since(before), dt, current.cpus.len(), &mut emit);
                    }
                    self.previous_bpf = Some(now);
                }
                Err(e) if !self.bpf_read_warned => {
                    log::warn!("perception: reading the BPF counters failed, BPF features missing this tick: {e:#}");
                    self.bpf_read_warned = true;
                    self.previous_bpf = None;
                }
                Err(_) => self.previous_bpf = None,
            }
            bpf_us = bpf_started.elapsed().as_secs_f64() * 1e6;
        }
        self.last_cost = SampleCost {
            procfs: self.procfs.last_cost(),
            bpf_us,
            features_us: features_started.elapsed().as_secs_f64() * 1e6 - bpf_us,
        };
        let ignored_cpus = match &current.processes {
            // Over the process scan's own interval (scans are held between fast ticks).
            Some(p) if p.interval_s > 0.0 => {
                p.ignored_cpu_ticks as f64 / (procfs::ticks_per_second() as f64 * p.interval_s)
            }
            _ => 0.0,
        };
        self.previous_proc = current;
        log::trace!("perception tick took {:?}", started.elapsed());
        Ok(Sample {
            unix_ms,
            interval_s: dt,
            values,
            missing,
            ignored_cpus,
            idle_cpus,
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sampler_can_move_to_another_thread() {
        fn assert_send<T: Send>() {}
        assert_send::<super::Sampler>();
    }

    #[test]
    fn classifier_values_pass_non_finite_as_missing() {
        let sample = super::Sample {
            unix_ms: 0,
            interval_s: 1.0,
            values: vec![0.5, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e300, -3.0],
            missing: vec![false, true, false, false, false, false],
            ignored_cpus: 0.0,
            idle_cpus: None,
        };
        let values = sample.to_f32();
        assert_eq!(values[0], 0.5);
        assert!(values[1..5].iter().all(|v| v.is_nan()), "{values:?}");
        assert_eq!(values[5], -3.0);
    }
}
