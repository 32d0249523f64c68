//! The decision engine of `asa run`: one tick's feature vector (perception's [`Sample`]) →
//! classifier → Algorithm 1 vote → policy, timed, as a [`TickRecord`] (the decision record plus
//! what became of it). The daemon's tick pipeline samples and hands the vector down; the engine
//! never reads the machine.
//!
//! Everything is loaded and checked in [`DecisionEngine::load`] before the daemon touches the
//! scheduler: ONNX Runtime, the model (its schema must equal the live one, which the caller
//! passes), the mapping table (its classes must be the model's, its experts the catalogue's, its
//! layer rows classes of ASA's layer plan). A bad model or table is one clear error at start,
//! and nothing is switched.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use asa_experts::Catalogue;
use asa_layers::LayerPlan;
use asa_mapping_table::{ClassMapping, LayerRow, MappingTable};
use serde::{Deserialize, Serialize};

use super::classifier::{ModelInfo, OrtRuntime, WorkloadClassifier};
use super::policy::{DecisionRecord, Policy, PolicyConfig};
use crate::perception::schema::FeatureSchema;
use crate::perception::Sample;

/// What became of a tick's decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The policy said stay.
    Stay,
    /// The policy said switch and the controller switched.
    Switched,
    /// The policy said switch; `--dry-run`, so nothing was switched (the policy carries on as
    /// if it had been, so the log shows the sequence a real run would follow).
    WouldSwitch,
    /// The policy said switch while an `asa pin` held the scheduler: not switched.
    HeldByPin,
    /// The policy said switch and the switch failed (`detail` says why; the old expert, or
    /// EEVDF, runs).
    SwitchFailed,
}

/// Per-tick cost in microseconds (wall clock on the decision thread).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TickCost {
    /// Perception: reading /proc and the BPF counters into the feature vector.
    pub sample_us: f64,
    /// Classifier inference (ONNX Runtime).
    pub infer_us: f64,
    /// Vote and policy.
    pub decide_us: f64,
    /// Perception by part (procfs files, process scan, BPF counters, features).
    #[serde(default)]
    pub perception: crate::perception::SampleCost,
    /// CPU time the decision thread used for the tick (perception, inference and decision),
    /// µs: the agent's own cost, without the time it waited for a CPU (which the wall-clock
    /// parts include on a busy machine).
    #[serde(default)]
    pub cpu_us: f64,
    /// Glances that stood in for full ticks since the previous full tick (a steady stretch of
    /// `asa run`), and the CPU time they used together, µs.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub glances: u32,
    /// See `glances`.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub glance_cpu_us: f64,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_zero_f64(x: &f64) -> bool {
    *x == 0.0
}

impl TickCost {
    /// Perception → decision, the whole tick before any switch.
    pub fn total_us(&self) -> f64 {
        self.sample_us + self.infer_us + self.decide_us
    }
}

/// One tick as logged (JSON line) and shown by `asa status`: the policy's record, flattened,
/// plus its outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TickRecord {
    /// The policy's decision (schema `asa.decision`).
    #[serde(flatten)]
    pub decision: DecisionRecord,
    /// What was done.
    pub outcome: Outcome,
    /// The pinned expert, if an `asa pin` held the scheduler this tick.
    #[serde(default)]
    pub pinned: Option<String>,
    /// Switch time or the error of a failed switch.
    #[serde(default)]
    pub detail: Option<String>,
    /// Wall-clock time of the sample (ms since the epoch).
    pub unix_ms: u64,
    /// Features missing this tick (NaN in the classifier's input).
    pub missing_features: usize,
    /// What the tick cost.
    pub cost: TickCost,
    /// The feature vector the classifier was given, by name (null = missing), when the engine
    /// logs features (`asa run --log-features`): to compare live ticks with recorded ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<BTreeMap<String, Option<f64>>>,
}

/// The decision engine's settings, as `asa status` shows them (`Default`: no model, no table).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EngineInfo {
    /// The classifier model file.
    pub model: PathBuf,
    /// The model's metadata (schema, classes, training date, data).
    pub model_info: ModelInfo,
    /// Where the mapping table came from.
    pub mapping: String,
    /// Class → the expert used for it (None: the class is not mapped, or no ranked expert is
    /// usable here).
    pub class_experts: Vec<(String, Option<String>)>,
    /// The expert the table ranks best over all classes (see
    /// [`Policy::overall_best`]): the hot-standby pool keeps it loaded.
    #[serde(default)]
    pub overall_best: Option<String>,
    /// Tick length.
    pub interval_ms: u64,
    /// Whether the BPF features are measured.
    pub bpf: bool,
    /// Policy parameters.
    pub policy: PolicyConfig,
    /// `--dry-run`: decide and log, never switch.
    pub dry_run: bool,
    /// The table's default expert, run at start-up and when the vote stays unsure (None: the
    /// table names none, or it is not usable here).
    #[serde(default)]
    pub default_expert: Option<String>,
    /// The table's rows of the model's classes: `asa status` says how sure the row in use is
    /// (its margin to the runner-up, whether calibration settled it).
    #[serde(default)]
    pub class_rows: Vec<ClassMapping>,
    /// The table's layer rows (per-application mode's calibrated layer policies; empty: the
    /// default layer plan throughout).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layer_rows: Vec<LayerRow>,
}

/// Where the decision engine's inputs come from.
#[derive(Debug, Clone, Default)]
pub struct EngineSources {
    /// The classifier model.
    pub model: PathBuf,
    /// The mapping table (None: the built-in mapping/default.toml).
    pub mapping: Option<PathBuf>,
    /// `libonnxruntime.so` (None: `ORT_DYLIB_PATH`, then the project cache).
    pub onnxruntime: Option<PathBuf>,
}

/// Classifier + policy.
pub struct DecisionEngine {
    classifier: WorkloadClassifier,
    policy: Policy,
    info: EngineInfo,
    layer_plan: LayerPlan,
}

impl DecisionEngine {
    /// Loads and checks everything (see the module doc). `live` is the feature schema the
    /// samples will follow; `current_expert` is what runs now.
    pub fn load(
        sources: &EngineSources,
        live: &FeatureSchema,
        catalogue: &Catalogue,
        config: PolicyConfig,
        interval: Duration,
        dry_run: bool,
        current_expert: &str,
    ) -> Result<Self> {
        // Each start-up phase faults in code it alone runs (ONNX Runtime's registries above
        // all); releasing it between phases keeps it out of the peak RSS (crate::memory).
        let runtime = OrtRuntime::load(sources.onnxruntime.as_deref())?;
        crate::memory::release_after("loading ONNX Runtime");
        let classifier = WorkloadClassifier::load(runtime, &sources.model, live)?;
        crate::memory::release_after("loading the model");
        if !classifier.info().ignored_features.is_empty() {
            log::info!(
                "the model ignores the features {:?} (masked in its graph)",
                classifier.info().ignored_features
            );
        }
        let classes = classifier.info().class_names.clone();
        let names: Vec<&str> = classes.iter().map(String::as_str).collect();
        let (table, origin) = match &sources.mapping {
            Some(path) => (MappingTable::load(path)?, path.display().to_string()),
            None => {
                // The built-in table covers every class of the lab's catalogue; a model trained
                // on fewer classes uses its part (a table the user gives must fit exactly).
                let mut table = MappingTable::builtin_default()?;
                let (kept, dropped): (Vec<_>, Vec<_>) = std::mem::take(&mut table.classes)
                    .into_iter()
                    .partition(|c| names.contains(&c.name.as_str()));
                if !dropped.is_empty() {
                    log::info!(
                        "built-in mapping: {} classes the model does not know are left out",
                        dropped.len()
                    );
                }
                table.classes = kept;
                (table, "mapping/default.toml (built in)".to_string())
            }
        };
        let unmapped = table
            .validate(&origin, &catalogue.names(), &names)
            .with_context(|| {
                format!(
                    "the mapping table {origin} does not fit the classifier {}",
                    sources.model.display()
                )
            })?;
        let layer_plan = table
            .layer_plan(&asa_layers::default_plan(), &origin)
            .context("the mapping table's layer rows do not fit ASA's layer plan")?;
        if !table.layers.is_empty() {
            log::info!(
                "mapping {origin}: layer policies of {} calibrated, the other layers the default plan's",
                table
                    .layers
                    .iter()
                    .map(|r| r.class.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        if !unmapped.is_empty() {
            log::warn!(
                "mapping {origin} maps no expert for the classifier's classes {unmapped:?}: the agent keeps the current expert for them"
            );
        }
        let usable = |expert: &str| expert_usable(catalogue, expert);
        let policy = Policy::new(
            config,
            classes.clone(),
            &table,
            usable,
            Some(current_expert.to_string()),
        )?;
        let class_experts: Vec<(String, Option<String>)> = classes
            .iter()
            .map(|c| (c.clone(), policy.expert_for(c).map(str::to_string)))
            .collect();
        let not_usable: Vec<&str> = class_experts
            .iter()
            .filter(|(c, e)| e.is_none() && !unmapped.contains(c))
            .map(|(c, _)| c.as_str())
            .collect();
        if !not_usable.is_empty() {
            log::warn!(
                "no ranked expert is installed for classes {not_usable:?} (see `asa experts`): the agent keeps the current expert for them"
            );
        }
        let info = EngineInfo {
            model: sources.model.clone(),
            model_info: classifier.info().clone(),
            mapping: origin,
            class_experts,
            overall_best: policy.overall_best().map(str::to_string),
            interval_ms: interval.as_millis() as u64,
            // Perception's to say, once its sampler is up (DecisionEngine::set_bpf).
            bpf: false,
            policy: config,
            dry_run,
            default_expert: policy.fallback_expert().map(str::to_string),
            class_rows: table
                .classes
                .iter()
                .filter(|c| classes.contains(&c.name))
                .cloned()
                .collect(),
            layer_rows: table.layers.clone(),
        };
        Ok(Self {
            classifier,
            policy,
            info,
            layer_plan,
        })
    }

    /// Whether perception measures the BPF features, for [`EngineInfo::bpf`] (the caller
    /// knows once its sampler is up, which it starts after the engine).
    pub fn set_bpf(&mut self, measured: bool) {
        self.info.bpf = measured;
    }

    /// The engine's settings.
    pub fn info(&self) -> &EngineInfo {
        &self.info
    }

    /// The layer plan per-application mode gives scx_layered: ASA's default plan with the
    /// mapping table's layer rows laid over it.
    pub fn layer_plan(&self) -> &LayerPlan {
        &self.layer_plan
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The policy (to tell it about switches it did not decide, or that failed).
    pub fn policy_mut(&mut self) -> &mut Policy {
        &mut self.policy
    }

    /// Decides on one tick's `sample` at `now` (monotonic, since any fixed origin): classifier,
    /// vote, policy. The outcome is [`Outcome::Stay`] or, when the policy says switch,
    /// [`Outcome::Switched`] until the caller says otherwise. The record's cost holds inference
    /// and decision; perception's part, the thread's CPU time and the feature vector are the
    /// caller's to fill in. `own_work` names an expert the agent was loading during the sample
    /// (a hot standby): the tick is classified and logged but left out of the vote
    /// ([`Policy::on_own_work_tick`]).
    pub fn decide(
        &mut self,
        now: Duration,
        sample: &Sample,
        own_work: Option<&str>,
    ) -> Result<TickRecord> {
        let t1 = Instant::now();
        let features = sample.to_f32();
        let probabilities = self.classifier.predict(&features)?;
        let t2 = Instant::now();
        let decision = match own_work {
            Some(expert) => self.policy.on_own_work_tick(now, &probabilities, expert)?,
            None => self.policy.on_tick(now, &probabilities)?,
        };
        let t3 = Instant::now();
        let outcome = match decision.action {
            super::policy::Action::Stay => Outcome::Stay,
            super::policy::Action::Switch => Outcome::Switched,
        };
        let us = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1e6;
        Ok(TickRecord {
            decision,
            outcome,
            pinned: None,
            detail: None,
            unix_ms: sample.unix_ms,
            missing_features: sample.missing.iter().filter(|m| **m).count(),
            cost: TickCost {
                infer_us: us(t1, t2),
                decide_us: us(t2, t3),
                ..TickCost::default()
            },
            features: None,
        })
    }
}

/// Whether an expert can run here: the kernel default always, a BPF expert when its binary is
/// installed.
pub fn expert_usable(catalogue: &Catalogue, expert: &str) -> bool {
    match catalogue.get(expert) {
        Some(e) if e.is_kernel_default() => true,
        Some(e) => asa_experts::locate_binary(e).is_ok(),
        None => false,
    }
}

/// The default model: `ASA_MODEL`, else the first file that exists of
/// [`DEFAULT_MODEL_PATHS`], else the model committed in the source tree
/// (`classifier/models/default/classifier.onnx`, for runs from a checkout).
pub fn default_model_path() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("ASA_MODEL").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(path));
    }
    DEFAULT_MODEL_PATHS
        .iter()
        .map(PathBuf::from)
        .chain(std::iter::once(source_tree_model()))
        .find(|p| p.is_file())
}

/// Installed locations of the default classifier model, searched in order.
pub const DEFAULT_MODEL_PATHS: &[&str] = &[
    "/etc/asa/classifier.onnx",
    "/usr/local/share/asa/classifier.onnx",
    "/usr/share/asa/classifier.onnx",
];

/// The model committed in the source tree this binary was built from.
pub fn source_tree_model() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../classifier/models/default/classifier.onnx")
}
