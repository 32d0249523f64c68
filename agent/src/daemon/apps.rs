//! Per-application mode in `asa run`: while the expert running takes a layer plan
//! (scx_layered), every tick groups the perception walk's threads into applications, gives each
//! its class (today from pins only: `asa app set` and the config file's `[[app]]`; the
//! application classifier comes later) and writes each class's hint into scx_layered's task-hint
//! map, which puts the application's threads into that class's layer.
//!
//! Ahead of such an expert: while another expert runs and the decision heads for a layer-plan
//! expert (the vote's target, or the table's expert for the tick's most probable class), the
//! same ticks run in whole-machine mode, so that every application already has its class and
//! its threads their hints when scx_layered attaches: a task's layer is matched at the
//! scheduler's start, and an application it cannot match yet runs in `other` beside the load
//! (results/2026-12-01-apps-ahead-of-layered). Other schedulers ignore the hints.
//!
//! Nothing is moved between cgroups and no process is touched: a hint is all. The hint map's
//! BPF object is loaded when per-application mode first starts; without BPF or bpffs the mode
//! is off with one warning and the agent runs on. Under another expert, and not heading for a
//! layer-plan expert, nothing is walked.
//!
//! - [`AppMode`]: the decision thread's part (grouping, classes, hints), one call a tick;
//! - [`AppsControl`]: what the control socket's `apps`, `app_set` and `app_unset` reach,
//!   shared with the decision thread (the pins, the last walk's applications).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Result};
use asa_experts::Catalogue;
use asa_layers::LayerPlan;

use super::settings::RunSettings;
use crate::action::app_hints::{AppHints, DEFAULT_HINT_MAP};
use crate::action::controller::ControllerHandle;
use crate::control::{self, AppRow, AppsStatus, Request, Response};
use crate::decision::app_classes::{AppClass, AppClassConfig, AppClasses, ClassSource};
use crate::decision::app_model::AppModel;
use crate::decision::app_pins::{AppPins, PinTarget};
use crate::decision::classifier::OrtRuntime;
use crate::perception::apps::{self, AppGrouper, AppKey, ThreadSample, ThreadWalk};

/// One application at the last walk.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    tgids: Vec<u32>,
    threads: u32,
    class: Option<AppClass>,
    first_seen: Duration,
}

/// What the decision thread and the control requests share.
struct Shared {
    pins: AppPins,
    plan: LayerPlan,
    /// The last walk's applications (per-application mode only).
    seen: BTreeMap<AppKey, Seen>,
    /// The pins file's error at start, or why per-application mode is off.
    problem: Option<String>,
    status: AppsStatus,
    now: Duration,
}

/// The control requests' side of per-application mode.
#[derive(Clone)]
pub(super) struct AppsControl(Arc<Mutex<Shared>>);

/// The decision thread's side: one [`AppMode::tick`] a tick.
pub(super) struct AppMode {
    shared: AppsControl,
    layer_plan_experts: BTreeSet<String>,
    grouper: AppGrouper,
    classes: AppClasses<AppKey>,
    hints: Option<AppHints>,
    /// Per-application mode cannot run (said once).
    off: Option<String>,
    hint_map: PathBuf,
    threads: Vec<ThreadSample>,
    /// Applications a restarted agent found hinted, with their class: assumed at the first
    /// per-application tick ([`AppClasses::assume`]), not pinned.
    adopted: BTreeMap<AppKey, usize>,
    /// The application model: where it is, and once per-application mode first ran, the
    /// loaded model (None after a failure, said once: classes from pins only).
    model_path: Option<PathBuf>,
    onnxruntime: Option<PathBuf>,
    model: Option<AppModel>,
    model_tried: bool,
    first_seen: BTreeMap<AppKey, Duration>,
}

impl AppMode {
    /// Per-application mode for `asa run`: the pins (a malformed file is logged and reported by
    /// `asa status`, and there are no user pins), the catalogue's layer-plan experts and the
    /// plan they were given (the mapping table's: its layer rows over the default plan).
    pub(super) fn new(
        settings: &RunSettings,
        catalogue: &Catalogue,
        plan: LayerPlan,
    ) -> Result<Self> {
        let (pins, problem) = AppPins::load(Some(&settings.app_pins), &settings.admin_app_pins);
        if let Some(e) = &problem {
            log::error!("{e}: starting with no application pins of `asa app set`");
        }
        for (cgroup, class) in &settings.admin_app_pins {
            if plan.hint_of(class).is_none() {
                log::warn!(
                    "config file [[app]] cgroup {cgroup:?}: class {class:?} is not one of the layer plan's ({}): ignored",
                    class_names(&plan)
                );
            }
        }
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
        let classes = AppClasses::new(AppClassConfig::default(), plan.classes.len())?;
        let status = AppsStatus {
            pins: pins.entries().count(),
            problem: problem.clone(),
            ..AppsStatus::default()
        };
        Ok(Self {
            shared: AppsControl(Arc::new(Mutex::new(Shared {
                pins,
                plan,
                seen: BTreeMap::new(),
                problem,
                status,
                now: Duration::ZERO,
            }))),
            layer_plan_experts: catalogue
                .experts()
                .iter()
                .filter(|e| e.layer_plan)
                .map(|e| e.name.clone())
                .collect(),
            grouper: AppGrouper::new(cpus),
            classes,
            hints: None,
            off: None,
            hint_map: PathBuf::from(DEFAULT_HINT_MAP),
            threads: Vec::new(),
            adopted: BTreeMap::new(),
            first_seen: BTreeMap::new(),
            model_path: settings.app_model.clone(),
            onnxruntime: settings.sources.onnxruntime.clone(),
            model: None,
            model_tried: false,
        })
    }

    /// The control requests' handle.
    pub(super) fn control(&self) -> AppsControl {
        self.shared.clone()
    }

    /// The layer-plan expert to classify applications for with `expert` running and the
    /// decision heading `toward` these experts: `expert` itself when it takes a layer plan,
    /// else the first of `toward` that does (None: whole machine, nothing to walk).
    fn layer_plan_expert<'a>(&self, expert: &'a str, toward: &'a [String]) -> Option<&'a str> {
        std::iter::once(expert)
            .chain(toward.iter().map(String::as_str))
            .find(|e| self.layer_plan_experts.contains(*e))
    }

    /// Whether the perception walk should read every thread's application: while `expert`
    /// takes a layer plan, or the decision heads `toward` one, and the mode is not off.
    pub(super) fn wants_threads(&self, expert: &str, toward: &[String]) -> bool {
        self.off.is_none() && self.layer_plan_expert(expert, toward).is_some()
    }

    /// One tick at `now` with `expert` running and the decision heading `toward` these
    /// experts; `walk` fills the tick's threads (see [`ThreadWalk`]). Returns the mode for
    /// `asa status`.
    pub(super) fn tick(
        &mut self,
        now: Duration,
        expert: &str,
        toward: &[String],
        walk: impl FnOnce(&mut Vec<ThreadSample>) -> ThreadWalk,
    ) -> AppsStatus {
        let Some(planned) = self.layer_plan_expert(expert, toward) else {
            return self.tick_inner(now, expert, None);
        };
        let ahead_of = (planned != expert).then_some(planned);
        match self.ready(walk) {
            ThreadWalk::Threads => self.tick_inner(now, expert, Some(ahead_of)),
            // A tick between walks keeps the applications, their classes and hints as they are.
            ThreadWalk::NextWalk if self.walked_last_tick(expert, ahead_of) => {
                self.shared.0.lock().unwrap().status.clone()
            }
            _ => self.tick_inner(now, expert, None),
        }
    }

    /// Whether the last tick walked the applications with `expert` running, ahead of the same
    /// expert.
    fn walked_last_tick(&self, expert: &str, ahead_of: Option<&str>) -> bool {
        let shared = self.shared.0.lock().unwrap();
        let status = &shared.status;
        status.expert == expert
            && status.ahead_of.as_deref() == ahead_of
            && (status.mode == "per_application" || ahead_of.is_some())
    }

    /// The tick after the walk: `walked` is None for the whole machine with nothing walked,
    /// `Some(None)` per application, `Some(Some(layered))` ahead of that layer-plan expert.
    fn tick_inner(
        &mut self,
        now: Duration,
        expert: &str,
        walked: Option<Option<&str>>,
    ) -> AppsStatus {
        let mut shared = self.shared.0.lock().unwrap();
        shared.now = now;
        let Some(ahead_of) = walked else {
            shared.seen.clear();
            shared.status = AppsStatus {
                mode: "whole_machine".into(),
                expert: expert.to_string(),
                pins: shared.pins.entries().count(),
                problem: shared.problem.clone(),
                ..AppsStatus::default()
            };
            return shared.status.clone();
        };
        // The applications of this walk, and what the model says of each.
        let samples = self.grouper.update(now, &self.threads);
        if let Some(model) = self.model.as_mut() {
            for sample in &samples {
                let observed = model
                    .probabilities(&sample.features)
                    .and_then(|p| self.classes.observe(now, &sample.key, &p));
                if let Err(e) = observed {
                    log::warn!(
                        "the application model failed, classes come from pins only from now on: {e:#}"
                    );
                    shared.problem = Some(format!("application model off: {e:#}"));
                    self.model = None;
                    break;
                }
            }
        }
        let mut seen: BTreeMap<AppKey, Seen> = BTreeMap::new();
        for t in self.threads.iter().filter(|t| t.in_application()) {
            let key = t.app_key();
            let first = *self.first_seen.entry(key).or_insert(now);
            let app = seen.entry(key).or_insert_with(|| Seen {
                tgids: Vec::new(),
                threads: 0,
                class: None,
                first_seen: first,
            });
            app.threads += 1;
            if t.leader {
                app.tgids.push(t.tgid);
            }
        }
        self.first_seen.retain(|k, _| seen.contains_key(k));
        // What a previous agent hinted: the class to start from, which observation may change
        // (not the user's word: a mistake of the model must not outlive the agent that made it).
        for (key, class) in std::mem::take(&mut self.adopted) {
            if seen.contains_key(&key) {
                let _ = self.classes.assume(now, &key, class);
            }
        }
        for gone in shared.pins.drop_gone(|k| seen.contains_key(k)) {
            log::info!(
                "the application pinned to {} (pid {}) is gone: its pin is dropped",
                gone.class,
                gone.pid.unwrap_or(0)
            );
        }
        // Pins: the user's word over anything observed.
        let cgroup_ids: HashMap<String, u64> = shared
            .pins
            .cgroups()
            .filter_map(|c| {
                apps::resolve_cgroup(c)
                    .ok()
                    .map(|(_, id)| (c.to_string(), id))
            })
            .collect();
        let mut hints = BTreeMap::new();
        for (key, app) in seen.iter_mut() {
            let pinned = shared
                .pins
                .class_for(key, &cgroup_ids)
                .and_then(|name| shared.plan.classes.iter().position(|c| c.class == name));
            match pinned {
                Some(class) => {
                    let _ = self.classes.pin(*key, class);
                }
                None => {
                    self.classes.unpin(key);
                }
            }
            app.class = self.classes.class_of(key);
            if let Some(class) = &app.class {
                hints.insert(*key, shared.plan.classes[class.class].hint);
                let before = shared.seen.get(key).and_then(|s| s.class.as_ref());
                if before.map(|b| (b.class, b.source)) != Some((class.class, class.source)) {
                    log::info!(
                        "application pgid={} cgroup={} leader={}: class {} ({:?}, support {:.2}), {:.1} s after it appeared",
                        key.pgid,
                        key.cgroup,
                        app.tgids.first().copied().unwrap_or(0),
                        shared.plan.classes[class.class].class,
                        class.source,
                        class.confidence,
                        now.saturating_sub(app.first_seen).as_secs_f64()
                    );
                }
            }
        }
        self.classes.forget_unseen(now);
        if let Some(h) = self.hints.as_mut() {
            if let Err(e) = h.set(&hints).and_then(|()| h.apply().map(|_| ())) {
                log::warn!("writing the applications' task hints failed: {e:#}");
            }
        }
        let with_class = seen.values().filter(|a| a.class.is_some()).count();
        if let (Some(planned), None) = (ahead_of, shared.status.ahead_of.as_deref()) {
            log::info!(
                "heading for {planned}: classifying {} applications ahead of its start ({with_class} with a class)",
                seen.len()
            );
        }
        shared.status = AppsStatus {
            mode: if ahead_of.is_some() {
                "whole_machine"
            } else {
                "per_application"
            }
            .into(),
            ahead_of: ahead_of.map(str::to_string),
            expert: expert.to_string(),
            applications: seen.len(),
            with_class,
            pins: shared.pins.entries().count(),
            app_model: self.model.as_ref().map(|m| m.path().display().to_string()),
            problem: shared.problem.clone(),
            list: Vec::new(),
        };
        shared.seen = seen;
        shared.status.clone()
    }

    /// Whether per-application mode can run this tick ([`ThreadWalk::Threads`]): the walk
    /// gave threads (else not this tick, [`ThreadWalk::NextWalk`]) and the hint map is loaded
    /// (at the first call). No BPF walk or no hint map turns the mode off with one warning
    /// ([`ThreadWalk::Unavailable`], as every tick after).
    fn ready(&mut self, walk: impl FnOnce(&mut Vec<ThreadSample>) -> ThreadWalk) -> ThreadWalk {
        if self.off.is_some() {
            return ThreadWalk::Unavailable;
        }
        match walk(&mut self.threads) {
            ThreadWalk::Threads => {}
            ThreadWalk::NextWalk => return ThreadWalk::NextWalk,
            ThreadWalk::Unavailable => {
                return self.turn_off(
                    "the BPF task walk is unavailable (perception reads /proc): no application grouping"
                        .into(),
                )
            }
        }
        if self.hints.is_none() {
            match AppHints::load(&self.hint_map) {
                Ok(h) => {
                    let shared = self.shared.0.lock().unwrap();
                    for (key, hint) in h.adopted() {
                        if let Some(class) =
                            shared.plan.classes.iter().position(|c| c.hint == *hint)
                        {
                            self.adopted.insert(*key, class);
                        }
                    }
                    log::info!(
                        "per-application mode: task hints at {} ({} applications taken back from a previous agent)",
                        self.hint_map.display(),
                        self.adopted.len()
                    );
                    drop(shared);
                    self.hints = Some(h);
                }
                Err(e) => return self.turn_off(format!("{e:#}")),
            }
        }
        if !self.model_tried {
            self.model_tried = true;
            self.model = self.load_model();
        }
        ThreadWalk::Threads
    }

    /// The application model, if there is one and it loads; else why not is logged and
    /// reported once, and classes come from pins only.
    fn load_model(&mut self) -> Option<AppModel> {
        let Some(path) = self.model_path.clone() else {
            log::info!("per-application mode: no application model, classes come from pins only");
            return None;
        };
        let loaded = OrtRuntime::load(self.onnxruntime.as_deref())
            .map_err(anyhow::Error::from)
            .and_then(|runtime| {
                let shared = self.shared.0.lock().unwrap();
                AppModel::load(runtime, &path, &shared.plan)
            });
        match loaded {
            Ok(model) => {
                log::info!("per-application mode: classes from {}", path.display());
                Some(model)
            }
            Err(e) => {
                log::error!("{e:#}: classes come from pins only");
                self.shared.0.lock().unwrap().problem =
                    Some(format!("application model off: {e:#}"));
                None
            }
        }
    }

    fn turn_off(&mut self, why: String) -> ThreadWalk {
        log::warn!(
            "per-application mode is off, the expert schedules the whole machine as one: {why}"
        );
        self.shared.0.lock().unwrap().problem = Some(format!("per-application mode off: {why}"));
        self.off = Some(why);
        ThreadWalk::Unavailable
    }
}

/// The plan's class names, for errors.
fn class_names(plan: &LayerPlan) -> String {
    plan.classes
        .iter()
        .map(|c| c.class.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

impl AppsControl {
    /// Answers `apps`, `app_set` and `app_unset`; anything else goes to `controller`.
    pub(super) fn answer(&self, request: Request, controller: &ControllerHandle) -> Response {
        let status = || {
            let mut st = controller.status_cached();
            if let Some(d) = st.decision.as_mut() {
                d.apps = Some(self.0.lock().unwrap().status.clone());
            }
            st
        };
        let result = match request {
            Request::Apps => {
                let mut st = controller.status_cached();
                if let Some(d) = st.decision.as_mut() {
                    d.apps = Some(self.list());
                }
                return ok(st);
            }
            Request::AppSet { target, class } => self.set(&target, &class),
            Request::AppUnset { target } => self.unset(&target),
            other => return controller.answer(other),
        };
        match result {
            Ok(()) => ok(status()),
            Err(e) => control::refusal(format!("{e:#}")),
        }
    }

    /// `asa app set`: the class must be the plan's, the target must exist.
    pub(super) fn set(&self, target: &str, class: &str) -> Result<()> {
        let mut shared = self.0.lock().unwrap();
        if shared.plan.hint_of(class).is_none() {
            bail!(
                "no class {class:?}: the layer plan's classes are {}",
                class_names(&shared.plan)
            );
        }
        let target = resolve_target(target)?;
        shared.pins.set(&target, class)?;
        log::info!("{target}: class {class} (asa app set)");
        Ok(())
    }

    /// `asa app unset`.
    pub(super) fn unset(&self, target: &str) -> Result<()> {
        let mut shared = self.0.lock().unwrap();
        let target = resolve_target(target)?;
        shared.pins.unset(&target)?;
        log::info!("{target}: pin removed (asa app unset)");
        Ok(())
    }

    /// The status with the last walk's applications listed.
    fn list(&self) -> AppsStatus {
        let shared = self.0.lock().unwrap();
        let mut status = shared.status.clone();
        status.list = shared
            .seen
            .iter()
            .map(|(key, app)| row(key, app, &shared.plan, shared.now))
            .collect();
        status
    }
}

/// A pid (digits) or a cgroup path.
fn resolve_target(target: &str) -> Result<PinTarget> {
    if let Ok(pid) = target.parse::<u32>() {
        let key = AppKey::of_process(pid)?;
        return Ok(PinTarget::App { key, pid });
    }
    let (relative, _) = apps::resolve_cgroup(target)?;
    Ok(PinTarget::Cgroup(relative))
}

/// One application's row, its cgroup path and leader's name read now.
fn row(key: &AppKey, app: &Seen, plan: &LayerPlan, now: Duration) -> AppRow {
    let leader_pid = if app.tgids.contains(&key.pgid) {
        key.pgid
    } else {
        app.tgids.iter().copied().min().unwrap_or(0)
    };
    let leader_comm = std::fs::read_to_string(format!("/proc/{leader_pid}/comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let cgroup = apps::cgroup_of_process(leader_pid)
        .map(|c| format!("/{c}"))
        .unwrap_or_else(|_| format!("#{}", key.cgroup));
    let class = app.class.as_ref();
    let name = class.map(|c| plan.classes[c.class].class.clone());
    AppRow {
        cgroup,
        cgroup_id: key.cgroup,
        pgid: key.pgid,
        leader_pid,
        leader_comm,
        threads: app.threads,
        layer: name
            .clone()
            .unwrap_or_else(|| asa_layers::OTHER_LAYER.into()),
        class: name,
        source: class.map(|c| {
            match c.source {
                ClassSource::Pinned => "pinned",
                ClassSource::Recognised => "recognised",
                ClassSource::Assumed => "assumed",
            }
            .to_string()
        }),
        confidence: class.map(|c| c.confidence),
        seen_s: now.saturating_sub(app.first_seen).as_secs_f64(),
    }
}

fn ok(status: control::AgentStatus) -> Response {
    Response {
        ok: true,
        error: None,
        status: Some(status),
        switch: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(dir: &std::path::Path) -> AppMode {
        let mut settings = RunSettings::for_tests();
        settings.app_pins = dir.join("pins.toml");
        let catalogue = Catalogue::builtin();
        AppMode::new(&settings, &catalogue, asa_layers::default_plan()).unwrap()
    }

    #[test]
    fn an_unknown_class_is_one_error_listing_the_plans_classes() {
        let dir = tempfile::tempdir().unwrap();
        let apps = mode(dir.path()).control();
        let error = apps
            .set(&std::process::id().to_string(), "turbo")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("no class \"turbo\"") && error.contains("interactive, io_bound"),
            "{error}"
        );
        assert!(!dir.path().join("pins.toml").exists(), "nothing was saved");
    }

    #[test]
    fn a_vanished_pid_or_a_missing_cgroup_is_one_error_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let apps = mode(dir.path()).control();
        let gone = apps.set(&(u32::MAX / 2).to_string(), "interactive");
        assert!(format!("{:#}", gone.unwrap_err()).contains("is gone"));
        let missing = apps.set("no-such.slice", "interactive");
        assert!(format!("{:#}", missing.unwrap_err()).contains("no cgroup no-such.slice"));
        assert!(!dir.path().join("pins.toml").exists());
        assert_eq!(apps.0.lock().unwrap().pins.entries().count(), 0);
    }

    #[test]
    fn a_pinned_process_gets_its_class_and_hint_each_tick_and_loses_it_when_unset() {
        let dir = tempfile::tempdir().unwrap();
        let mut mode = mode(dir.path());
        let apps = mode.control();
        let me = std::process::id();
        let key = AppKey::of_process(me).unwrap();
        apps.set(&me.to_string(), "cpu_batch").unwrap();
        // Stand-in for the walk: this process's one thread (no hint map loaded).
        let thread = ThreadSample {
            tgid: me,
            pid: me,
            pgid: key.pgid,
            cgroup: key.cgroup,
            leader: true,
            ..ThreadSample::default()
        };
        mode.threads = vec![thread];
        let status = mode.tick_inner(Duration::from_secs(1), "layered", Some(None));
        assert_eq!((status.applications, status.with_class), (1, 1));
        let list = apps.list().list;
        assert_eq!(list[0].class.as_deref(), Some("cpu_batch"));
        assert_eq!(list[0].layer, "cpu_batch");
        assert_eq!(list[0].source.as_deref(), Some("pinned"));
        assert_eq!(list[0].threads, 1);
        apps.unset(&me.to_string()).unwrap();
        let status = mode.tick_inner(Duration::from_secs(2), "layered", Some(None));
        assert_eq!(status.with_class, 0);
        assert_eq!(apps.list().list[0].layer, "other");
        // Another expert: nothing walked, the whole machine.
        let status = mode.tick(Duration::from_secs(3), "lavd", &[], |_| unreachable!());
        assert_eq!(status.mode, "whole_machine");
        assert!(apps.list().list.is_empty());
    }

    #[test]
    fn a_whole_machine_walk_defers_the_mode_a_tick_and_no_bpf_walk_turns_it_off() {
        let dir = tempfile::tempdir().unwrap();
        let mut mode = mode(dir.path());
        assert!(mode.wants_threads("layered", &[]) && !mode.wants_threads("cosmos", &[]));
        let status = mode.tick(Duration::from_secs(1), "layered", &[], |_| {
            ThreadWalk::NextWalk
        });
        assert_eq!(status.mode, "whole_machine");
        assert!(status.problem.is_none(), "not off: {:?}", status.problem);
        assert!(
            mode.wants_threads("layered", &[]),
            "asked again for the next walk"
        );
        let status = mode.tick(Duration::from_secs(2), "layered", &[], |_| {
            ThreadWalk::Unavailable
        });
        assert_eq!(status.mode, "whole_machine");
        let status = mode.tick(Duration::from_secs(3), "layered", &[], |_| unreachable!());
        assert!(
            status
                .problem
                .is_some_and(|p| p.contains("BPF task walk is unavailable")),
            "off, and says why"
        );
        assert!(
            !mode.wants_threads("layered", &[]),
            "an off mode asks for no threads"
        );
    }

    #[test]
    fn a_tick_between_walks_keeps_the_applications_as_they_are() {
        let dir = tempfile::tempdir().unwrap();
        let mut mode = mode(dir.path());
        let me = std::process::id();
        let key = AppKey::of_process(me).unwrap();
        mode.threads = vec![ThreadSample {
            tgid: me,
            pid: me,
            pgid: key.pgid,
            cgroup: key.cgroup,
            leader: true,
            ..ThreadSample::default()
        }];
        let walked = mode.tick_inner(Duration::from_secs(1), "layered", Some(None));
        assert_eq!(
            (walked.mode.as_str(), walked.applications),
            ("per_application", 1)
        );
        let held = mode.tick(Duration::from_millis(1500), "layered", &[], |_| {
            ThreadWalk::NextWalk
        });
        assert_eq!(held, walked, "nothing changed between walks");
        assert_eq!(mode.control().list().list.len(), 1);
    }

    #[test]
    fn heading_for_a_layer_plan_expert_classifies_and_hints_ahead_of_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let mut mode = mode(dir.path());
        let apps = mode.control();
        let me = std::process::id();
        let key = AppKey::of_process(me).unwrap();
        apps.set(&me.to_string(), "interactive").unwrap();
        // Heading nowhere that takes a layer plan: nothing to walk.
        let lavd = ["lavd".to_string()];
        assert!(!mode.wants_threads("cosmos", &lavd));
        let status = mode.tick(Duration::from_secs(1), "cosmos", &lavd, |_| unreachable!());
        assert_eq!(
            (status.mode.as_str(), status.ahead_of),
            ("whole_machine", None)
        );
        // The vote heads for scx_layered: walk, classify and hint while cosmos runs.
        let layered = ["lavd".to_string(), "layered".to_string()];
        assert!(mode.wants_threads("cosmos", &layered));
        mode.threads = vec![ThreadSample {
            tgid: me,
            pid: me,
            pgid: key.pgid,
            cgroup: key.cgroup,
            leader: true,
            ..ThreadSample::default()
        }];
        let ahead = mode.tick_inner(Duration::from_secs(2), "cosmos", Some(Some("layered")));
        assert_eq!(
            ahead.mode, "whole_machine",
            "cosmos still runs the whole machine"
        );
        assert_eq!(ahead.ahead_of.as_deref(), Some("layered"));
        assert_eq!((ahead.applications, ahead.with_class), (1, 1));
        assert_eq!(apps.list().list[0].layer, "interactive");
        // A tick between walks keeps that.
        assert!(mode.walked_last_tick("cosmos", Some("layered")));
        assert!(!mode.walked_last_tick("cosmos", None));
        // scx_layered attached: the same applications, per application from its first tick.
        let per_app = mode.tick_inner(Duration::from_secs(3), "layered", Some(None));
        assert_eq!(per_app.mode, "per_application");
        assert_eq!(per_app.ahead_of, None);
        assert_eq!(
            apps.list().list[0].seen_s,
            1.0,
            "the application was seen ahead"
        );
    }
}
