//! One tick of `asa run`, composed: perception samples the machine, the decision engine turns
//! the sample into a decision. The pipeline owns both halves, so neither imports the other
//! upwards: perception knows nothing of the decision, and the decision engine takes a
//! [`Sample`](crate::perception::Sample) and the live schema from here.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use asa_experts::Catalogue;

use super::settings::RunSettings;
use crate::decision::engine::{DecisionEngine, TickRecord};
use crate::decision::standby::OWN_WORK_MIN_CPUS;
use crate::perception::apps::{ThreadSample, ThreadWalk};
use crate::perception::{BpfMode, Sampler, SchemaFile};

/// CPU time the calling thread has used (CLOCK_THREAD_CPUTIME_ID).
pub(super) fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Sampler + decision engine: [`Pipeline::tick`] is sample → classifier → vote → policy.
pub(super) struct Pipeline {
    sampler: Sampler,
    /// The decision engine (its policy is told about switches the loop sees).
    pub(super) engine: DecisionEngine,
    /// The schema's feature names, when every tick's record carries its feature vector.
    feature_log: Option<Vec<String>>,
    /// The last sample's idle CPUs ([`crate::perception::Sample::idle_cpus`]).
    idle_cpus: Option<f64>,
}

impl Pipeline {
    /// Loads and checks everything a decision needs, before the scheduler is touched: the
    /// feature schema, then the engine (ONNX Runtime, the model against the live schema, the
    /// mapping table), then the sampler. `current_expert` is what runs now.
    pub(super) fn load(
        settings: &RunSettings,
        catalogue: &Catalogue,
        current_expert: &str,
    ) -> Result<Self> {
        let schema = match &settings.schema {
            Some(path) => SchemaFile::load(path)?,
            None => SchemaFile::builtin().context("the built-in feature schema")?,
        };
        // Each start-up phase faults in code it alone runs; releasing it between phases keeps
        // it out of the peak RSS (crate::memory).
        crate::memory::release_after("reading the configuration");
        let mut engine = DecisionEngine::load(
            &settings.sources,
            &schema.to_feature_schema(),
            catalogue,
            settings.policy,
            settings.interval,
            settings.dry_run,
            current_expert,
        )?;
        // The sampler last: its first sample() covers the interval since here.
        let mode = if settings.no_bpf {
            BpfMode::Off
        } else {
            BpfMode::Auto
        };
        let sampler = Sampler::new(schema, mode)?;
        crate::memory::release_after("loading the sampler");
        if !sampler.bpf_active() {
            log::warn!(
                "the BPF scheduler features are missing ({}): they are NaN for the classifier, which was trained with them; expect lower accuracy",
                sampler.bpf_unavailable_reason().unwrap_or("unavailable")
            );
        }
        engine.set_bpf(sampler.bpf_active());
        let feature_log = settings.log_features.then(|| sampler.schema().names());
        Ok(Self {
            sampler,
            engine,
            feature_log,
            idle_cpus: None,
        })
    }

    /// Processes the perception leaves out of the per-process features from the next tick on
    /// (the agent's hot-standby experts), in place of the previous call's.
    /// How many CPUs' worth of time the machine left idle over the last tick's sample (None
    /// before the first, or when no CPU time was counted).
    pub(super) fn idle_cpus(&self) -> Option<f64> {
        self.idle_cpus
    }

    pub(super) fn ignore_processes(&mut self, pids: impl IntoIterator<Item = i32>) {
        self.sampler.ignore_processes(pids);
    }

    /// The last tick's threads from perception's BPF task walk, while asked for
    /// ([`Pipeline::want_threads`]).
    pub(super) fn threads(&self, threads: &mut Vec<ThreadSample>) -> ThreadWalk {
        self.sampler.threads(threads)
    }

    /// Whether the next ticks' walks read every thread's application (per-application mode);
    /// a failure is logged and the walks stay as they were.
    pub(super) fn want_threads(&mut self, on: bool) {
        if let Err(e) = self.sampler.want_threads(on) {
            log::warn!("per-application perception: {e:#}");
        }
    }

    /// One tick at `now` (monotonic, since any fixed origin): a perception sample, then the
    /// engine's decision on it, with the whole tick's cost (and, with `--log-features`, the
    /// feature vector by name) in the record. `loading`: a hot standby the agent was loading
    /// during the sample; when the ignored processes (the standbys) took at least
    /// [`OWN_WORK_MIN_CPUS`] of CPU in it, the sample is the agent's own work and left out of
    /// the vote (see [`DecisionEngine::decide`]).
    pub(super) fn tick(&mut self, now: Duration, loading: Option<&str>) -> Result<TickRecord> {
        let t0 = Instant::now();
        let cpu0 = thread_cpu_time();
        let sample = self.sampler.sample().context("perception sample")?;
        let sample_us = t0.elapsed().as_secs_f64() * 1e6;
        let own_work = loading.filter(|_| sample.ignored_cpus >= OWN_WORK_MIN_CPUS);
        self.idle_cpus = sample.idle_cpus;
        let mut record = self.engine.decide(now, &sample, own_work)?;
        record.cost.sample_us = sample_us;
        record.cost.perception = self.sampler.last_cost();
        record.cost.cpu_us = (thread_cpu_time() - cpu0).as_secs_f64() * 1e6;
        record.features = self.feature_log.as_ref().map(|names| {
            names
                .iter()
                .zip(&sample.values)
                .map(|(name, &v)| (name.clone(), v.is_finite().then_some(v)))
                .collect()
        });
        Ok(record)
    }
}
