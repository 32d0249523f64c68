//! The decision thread of `asa run`: every tick, follow what the controller did (pins, unpins,
//! an expert that died), run the [`Pipeline`] (sample → classifier → vote → policy), carry out
//! a switch the policy chose (through the controller, unless pinned or a dry run), log the
//! record and publish it to `asa status`. While the table leaves nothing to decide, full ticks
//! come every `--settled-interval-ms` instead, and only a change in the controller's state
//! cuts the stretch short. While the vote is steady (steady.rs), a glance at three /proc files
//! stands in for a full tick, at least every `--settled-interval-ms` a full one; a change in
//! the machine's activity or in the controller's state cuts that stretch short.

use std::time::{Duration, Instant};

use anyhow::Result;
use asa_experts::EEVDF;

use super::apps::AppMode;
use super::decision_log::DecisionLog;
use super::heartbeat::Heartbeat;
use super::pipeline::{thread_cpu_time, Pipeline};
use super::settings::RunSettings;
use super::status_sink::Sink;
use super::steady::{Steady, SteadyConfig, TickPlan, DEFAULT_STEADY_TICKS};
use crate::action::controller::ControllerHandle;
use crate::control::AgentStatus;
use crate::decision::engine::{DecisionEngine, Outcome, TickRecord};
use crate::decision::policy::Reason;
use crate::decision::standby::{insurance_standby, loading_during, vote_candidates};
use crate::perception::procfs_source::{ActivityTolerance, GlanceReader};
use crate::stop::Stop;

/// After this many ticks in a row fail (perception or inference), the daemon stops (EEVDF is
/// restored; a service manager may restart it).
pub const MAX_FAILED_TICKS: u32 = 60;

/// How long a switch the decision engine asked for may keep the decision thread (the
/// controller gives up on a job after 300 s): the watchdog keeps quiet that long.
const SWITCH_BOUND: Duration = Duration::from_secs(310);

/// The decision thread: a tick every `settings.interval` (see the module doc) until `stop`, the
/// `--duration-s` or [`MAX_FAILED_TICKS`] failed ticks in a row.
/// `apps`: per-application mode (`asa run` only).
pub(super) fn decision_loop(
    pipeline: Pipeline,
    sink: Sink,
    settings: &RunSettings,
    stop: &Stop,
    heartbeat: &Heartbeat,
    apps: Option<AppMode>,
) -> Result<()> {
    let mut state = DecisionLoop::start(pipeline, sink, settings, heartbeat)?;
    state.apps = apps;
    let started = Instant::now();
    let mut next = started + settings.interval;
    loop {
        heartbeat.beat();
        if stop.wait_until(next) {
            return Ok(());
        }
        heartbeat.beat();
        if settings.duration.is_some_and(|d| started.elapsed() >= d) {
            log::info!("--duration-s reached: stopping");
            return Ok(());
        }
        next += settings.interval;
        let at = Instant::now();
        if next < at + settings.interval / 2 {
            // A switch or a stall made this tick late: skip the missed ticks and re-phase, so
            // no tick covers less than half an interval.
            next = at + settings.interval;
        }
        state.tick(at, started.elapsed())?;
    }
}

/// The decision thread's state from one tick to the next.
struct DecisionLoop<'a> {
    pipeline: Pipeline,
    sink: Sink,
    settings: &'a RunSettings,
    heartbeat: &'a Heartbeat,
    log_file: Option<DecisionLog>,
    /// The pin the controller reported at the last tick.
    last_pinned: Option<String>,
    /// The kind of the last logged decision ([`decision_key`]).
    previous_key: Option<DecisionKey>,
    failed_in_a_row: u32,
    /// The time of the controller's latest event at the last tick.
    last_event_ms: Option<u64>,
    /// While settled: when the last full tick ran and what the controller reported then.
    settled: Option<(Instant, ControllerState)>,
    /// Per-application mode, and whether the last tick ran it (ticks are never skipped then).
    apps: Option<AppMode>,
    per_application: bool,
    /// When the last tick's sample was taken (ms since the epoch): the start of the next
    /// sample's window, which a loading standby must not overlap.
    last_sample_ms: Option<u64>,
    /// Steady stretches (None: `--settled-interval-ms 0`), the glances' reader, the
    /// controller's state at the last full tick, and the glances since it (count, CPU µs).
    steady: Option<Steady>,
    glance: GlanceReader,
    full_tick_state: Option<ControllerState>,
    glances_since_full: (u32, f64),
    glance_failed: bool,
}

impl<'a> DecisionLoop<'a> {
    /// Opens the decision log and sets the thread's nice value.
    fn start(
        pipeline: Pipeline,
        sink: Sink,
        settings: &'a RunSettings,
        heartbeat: &'a Heartbeat,
    ) -> Result<Self> {
        let log_file = match &settings.decision_log {
            Some(path) => Some(DecisionLog::open(path)?),
            None => None,
        };
        if settings.nice != 0 {
            set_thread_nice(settings.nice);
        }
        Ok(Self {
            pipeline,
            sink,
            settings,
            heartbeat,
            log_file,
            last_pinned: None,
            previous_key: None,
            failed_in_a_row: 0,
            last_event_ms: None,
            settled: None,
            apps: None,
            per_application: false,
            last_sample_ms: None,
            steady: settings.settled_interval.map(|longest| {
                Steady::new(SteadyConfig {
                    ticks: DEFAULT_STEADY_TICKS,
                    // Ticks jitter: the one due at `longest` must not fall a hair short of it.
                    longest: longest.saturating_sub(settings.interval / 2),
                    tolerance: ActivityTolerance::default(),
                })
            }),
            glance: GlanceReader::new(),
            full_tick_state: None,
            glances_since_full: (0, 0.0),
            glance_failed: false,
        })
    }

    /// One tick, at `at` (`now` since the loop started).
    fn tick(&mut self, at: Instant, now: Duration) -> Result<()> {
        // What the controller did since the last tick: pins, unpins, an expert that died.
        let status = self.sink.status();
        if !self.per_application && self.settled_stretch_holds(at, &status) {
            return Ok(());
        }
        if self.glance_holds(now, &status) {
            return Ok(());
        }
        if let Sink::Controller(_) = self.sink {
            self.follow_controller(&status, now);
        }
        // The hot standbys' loading (BPF verification at low priority) is the agent's work,
        // not the workload's: never describe it as the busiest process.
        self.pipeline
            .ignore_processes(status.standby.experts.iter().map(|s| s.pid as i32));
        // A standby loading during this sample, taking a CPU for it: the sample describes the
        // agent's own work too, so it is no evidence for the vote (the pipeline checks the CPU).
        let sample_ms = asa_experts::supervisor::unix_ms(std::time::SystemTime::now());
        let window_start = self
            .last_sample_ms
            .unwrap_or_else(|| sample_ms.saturating_sub(self.settings.interval.as_millis() as u64));
        let loading = loading_during(&status.standby.experts, window_start, sample_ms);
        let Some(mut record) = self.decide(now, loading)? else {
            if let Some(steady) = self.steady.as_mut() {
                steady.break_streak();
            }
            return Ok(());
        };
        let (glances, glance_cpu_us) = std::mem::take(&mut self.glances_since_full);
        record.cost.glances = glances;
        record.cost.glance_cpu_us = glance_cpu_us;
        self.last_sample_ms = Some(record.unix_ms);
        self.per_application_tick(&status, &record, now);
        record.pinned = status.pinned.clone();
        if let Sink::Controller(handle) = &self.sink {
            let policy = self.pipeline.engine.policy();
            handle.set_standby_candidates(
                vote_candidates(&record.decision.vote_scores, |c| policy.expert_for(c)),
                insurance_standby(policy.insurance_expert(), self.pipeline.idle_cpus())
                    .map(str::to_owned),
            );
        }
        if record.outcome == Outcome::Switched {
            self.carry_out(&mut record, &status, now);
        }
        self.follow_steadiness(&record, now);
        self.log(&mut record)?;
        self.publish(&record, at, now);
        Ok(())
    }

    /// A steady stretch's tick: a glance at /proc, and true when it is enough (the vote is
    /// steady, the activity holds, the controller's state is the last full tick's and no
    /// application walk is due); false for a full tick.
    fn glance_holds(&mut self, now: Duration, status: &AgentStatus) -> bool {
        let Some(steady) = self.steady.as_mut() else {
            return false;
        };
        let cpu0 = thread_cpu_time();
        let counters = match self.glance.glance() {
            Ok(c) => {
                self.glance_failed = false;
                Some(c)
            }
            Err(e) => {
                if !self.glance_failed {
                    log::warn!("{e:#}: full ticks until a glance succeeds");
                }
                self.glance_failed = true;
                None
            }
        };
        if self.per_application
            || self.full_tick_state.as_ref() != Some(&ControllerState::of(status))
        {
            steady.break_streak();
        }
        let class = steady.steady_class().map(str::to_owned);
        match steady.plan(now, counters) {
            TickPlan::Glance => {
                self.glances_since_full.0 += 1;
                self.glances_since_full.1 += (thread_cpu_time() - cpu0).as_secs_f64() * 1e6;
                self.sink.note_glance();
                true
            }
            TickPlan::Full { moved: Some(moved) } => {
                log::info!(
                    "the machine's activity moved ({moved}) while the vote held {}: full ticks every {} ms until it holds again",
                    class.as_deref().unwrap_or("?"),
                    self.settings.interval.as_millis()
                );
                false
            }
            TickPlan::Full { moved: None } => false,
        }
    }

    /// After a full tick: whether it continues a steady vote (said when one forms), and the
    /// controller's state a glance must find unchanged.
    fn follow_steadiness(&mut self, record: &TickRecord, now: Duration) {
        let Some(steady) = self.steady.as_mut() else {
            return;
        };
        let held = if self.per_application {
            None
        } else {
            held_class(record)
        };
        if steady.after_full_tick(now, held, record.decision.most_probable_class()) {
            log::info!(
                "the vote has held {} for {DEFAULT_STEADY_TICKS} ticks: a glance at /proc/stat, diskstats and net/dev stands in for each tick while the machine's activity holds, a full tick at least every {} ms",
                held.unwrap_or("?"),
                self.settings
                    .settled_interval
                    .unwrap_or(self.settings.interval)
                    .as_millis()
            );
        }
        self.full_tick_state = Some(ControllerState::of(&self.sink.status()));
    }

    /// Per-application mode's tick on this tick's walk (apps.rs), its mode into `asa status`:
    /// under a layer-plan expert, or ahead of one when `record` heads for it (its target, or
    /// the table's expert for the class this tick's classification favoured).
    fn per_application_tick(&mut self, status: &AgentStatus, record: &TickRecord, now: Duration) {
        let (Some(apps), Sink::Controller(handle)) = (self.apps.as_mut(), &self.sink) else {
            return;
        };
        let policy = self.pipeline.engine.policy();
        let toward: Vec<String> = record
            .decision
            .target_expert
            .iter()
            .map(String::as_str)
            .chain(
                record
                    .decision
                    .most_probable_class()
                    .and_then(|c| policy.expert_for(c)),
            )
            .map(str::to_owned)
            .collect();
        // Asked for now, the threads come with the next tick's walk: a whole-machine walk reads
        // half as much per thread.
        self.pipeline
            .want_threads(apps.wants_threads(&status.active.expert, &toward));
        let pipeline = &self.pipeline;
        let mode = apps.tick(now, &status.active.expert, &toward, |t| pipeline.threads(t));
        self.per_application = mode.mode == "per_application";
        handle.update_decision(|d| d.apps = Some(mode));
    }

    /// True while settled, within `--settled-interval-ms` of the last full tick, and the
    /// controller's state has not changed since: this tick is skipped.
    fn settled_stretch_holds(&self, at: Instant, status: &AgentStatus) -> bool {
        match (self.settings.settled_interval, &self.settled) {
            (Some(every), Some((last_full, seen))) => {
                at < *last_full + every && *seen == ControllerState::of(status)
            }
            _ => false,
        }
    }

    /// The policy follows what the controller did: a pin or unpin, or an expert running that
    /// the policy did not choose (an expert that died counts a failure towards its quarantine).
    fn follow_controller(&mut self, status: &AgentStatus, now: Duration) {
        let engine = &mut self.pipeline.engine;
        if status.pinned != self.last_pinned {
            engine
                .policy_mut()
                .note_external_switch(&status.active.expert, now);
            self.last_pinned = status.pinned.clone();
        } else if status.switching_to.is_none()
            && engine.policy().current_expert() != Some(status.active.expert.as_str())
        {
            let believed = engine.policy().current_expert().unwrap_or("?").to_string();
            log::info!(
                "the controller reports {} running (the policy believed {believed}): following it, cooldown restarted",
                status.active.expert,
            );
            // The expert the policy believed running is gone without a switch: it exited
            // or the kernel ejected it (the supervisor's event says which).
            if status.active.expert == EEVDF && believed != EEVDF && believed != "?" {
                let why = match &status.last_event {
                    Some(ev) if self.last_event_ms != Some(ev.at_unix_ms) => ev.message.clone(),
                    _ => format!("{believed} stopped running"),
                };
                note_failure(engine, &believed, now, &why);
            }
            engine
                .policy_mut()
                .note_external_switch(&status.active.expert, now);
        }
        self.last_event_ms = status.last_event.as_ref().map(|e| e.at_unix_ms);
    }

    /// The pipeline's tick; None when it failed (warned about), an error after
    /// [`MAX_FAILED_TICKS`] failures in a row.
    fn decide(&mut self, now: Duration, loading: Option<&str>) -> Result<Option<TickRecord>> {
        match self.pipeline.tick(now, loading) {
            Ok(r) => {
                self.failed_in_a_row = 0;
                Ok(Some(r))
            }
            Err(e) => {
                self.failed_in_a_row += 1;
                let failed = self.failed_in_a_row;
                if failed == 1 || failed.is_multiple_of(10) {
                    log::warn!("tick failed ({failed} in a row): {e:#}");
                }
                if failed >= MAX_FAILED_TICKS {
                    return Err(e.context(format!(
                        "{MAX_FAILED_TICKS} ticks in a row failed: the decision engine stops"
                    )));
                }
                Ok(None)
            }
        }
    }

    /// The policy chose a switch: a dry run only says it would; a pin holds it; else the
    /// controller switches, and the record says how that went.
    fn carry_out(&mut self, record: &mut TickRecord, status: &AgentStatus, now: Duration) {
        let target = record
            .decision
            .target_expert
            .clone()
            .expect("a switch has a target");
        match &self.sink {
            Sink::DryRun(_) => record.outcome = Outcome::WouldSwitch,
            Sink::Controller(_) if status.pinned.is_some() => {
                record.outcome = Outcome::HeldByPin;
                self.pipeline
                    .engine
                    .policy_mut()
                    .set_current_expert(Some(&status.active.expert));
            }
            Sink::Controller(handle) => {
                self.last_pinned = switch(
                    handle,
                    self.heartbeat,
                    &mut self.pipeline.engine,
                    record,
                    &target,
                    now,
                );
            }
        }
    }

    /// The record to the decision log (with its feature vector) and to the journal (without;
    /// at info level when the kind of decision changed or something was switched).
    fn log(&mut self, record: &mut TickRecord) -> Result<()> {
        let mut line = serde_json::to_string(&record)?;
        if let Some(log) = self.log_file.as_mut() {
            log.append(&line);
        }
        // The console and `asa status` show the decision, not the 50-odd feature values.
        if record.features.take().is_some() {
            line = serde_json::to_string(&record)?;
        }
        let key = decision_key(record);
        if record.outcome != Outcome::Stay || self.previous_key.as_ref() != Some(&key) {
            log::info!(target: "asa::decision", "{line}");
        } else {
            log::debug!(target: "asa::decision", "{line}");
        }
        self.previous_key = Some(key);
        Ok(())
    }

    /// Whether the table now leaves nothing to decide (said when that changes), and the record
    /// to `asa status`.
    fn publish(&mut self, record: &TickRecord, at: Instant, now: Duration) {
        let settings = self.settings;
        let policy = self.pipeline.engine.policy();
        let unlogged = self.log_file.as_ref().map_or(0, DecisionLog::unwritten);
        let now_settled = settings.settled_interval.is_some() && policy.settled(now);
        if now_settled != self.settled.is_some() {
            match (now_settled, settings.settled_interval) {
                (true, Some(every)) => log::info!(
                    "the table leaves nothing to decide from {}: no class's vote would move it; ticking every {} ms until a pin, a failure or a quarantine",
                    policy.current_expert().unwrap_or("?"),
                    every.as_millis()
                ),
                _ => log::info!(
                    "deciding every {} ms again ({} runs)",
                    settings.interval.as_millis(),
                    policy.current_expert().unwrap_or("?")
                ),
            }
        }
        self.settled = now_settled.then(|| (at, ControllerState::of(&self.sink.status())));
        self.sink.publish(
            record,
            policy.quarantine_entries(now),
            unlogged,
            settings.settled_interval.filter(|_| now_settled),
            self.steady.as_ref().and_then(Steady::steady_class),
        );
    }
}

/// The controller switches to `target` for `record` (the watchdog waits for it); a failure
/// counts towards the target's quarantine and the policy follows what runs after. Returns the
/// pin after the switch.
fn switch(
    handle: &ControllerHandle,
    heartbeat: &Heartbeat,
    engine: &mut DecisionEngine,
    record: &mut TickRecord,
    target: &str,
    now: Duration,
) -> Option<String> {
    log::info!("switching to {target}: {}", record.decision.summary());
    // `asa status` names the switch from its start: the controller reports the new expert
    // the moment it is up, before this thread publishes the outcome.
    let started = record.clone();
    handle.update_decision(|d| d.last_switch = Some(started));
    // A switch may take minutes (two enable timeouts): the watchdog waits for it.
    heartbeat.busy_for(SWITCH_BOUND);
    let response = handle.decide(target);
    heartbeat.busy_for(Duration::ZERO);
    let after = handle.status_cached();
    if response.ok {
        record.detail = response
            .switch
            .as_ref()
            .map(|s| format!("{} -> {} in {:.0} ms", s.from, s.to, s.total_ms));
    } else {
        record.outcome = if after.pinned.is_some() {
            Outcome::HeldByPin
        } else {
            Outcome::SwitchFailed
        };
        record.detail = response.error.clone();
        if record.outcome == Outcome::SwitchFailed {
            log::warn!(
                "switch to {target} failed, {} runs: {}",
                after.active.expert,
                response.error.as_deref().unwrap_or("?")
            );
            let why = response.error.as_deref().unwrap_or("switch failed");
            note_failure(engine, target, now, why);
        }
        engine
            .policy_mut()
            .set_current_expert(Some(&after.active.expert));
    }
    after.pinned
}

/// Sets the calling thread's nice value (Linux: a thread's own, by its thread id); a failure
/// (a negative value without CAP_SYS_NICE) is a warning, the thread keeps its priority.
fn set_thread_nice(nice: i32) {
    // SAFETY: gettid and setpriority take plain integers and touch no memory of ours.
    let result = unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice)
    };
    if result == 0 {
        log::info!("decision thread at nice {nice}");
    } else {
        log::warn!(
            "could not set the decision thread's nice value to {nice}: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// The kind of a decision: voted class, target expert, reason.
type DecisionKey = (Option<String>, Option<String>, &'static str);

/// The kind of a decision, for logging changes at info level.
fn decision_key(record: &TickRecord) -> DecisionKey {
    let kind = match record.decision.reason {
        Reason::NoDecision => "no_decision",
        Reason::NotConfident { .. } => "not_confident",
        Reason::ClassNotMapped => "class_not_mapped",
        Reason::AlreadyRunning => "already_running",
        Reason::CoolingDown { .. } => "cooling_down",
        Reason::NotWorthSwitching { .. } => "not_worth_switching",
        Reason::WithinNoise { .. } => "within_noise",
        Reason::Switch => "switch",
        Reason::SwitchNetOfCost { .. } => "switch_net_of_cost",
        Reason::Fallback { .. } => "fallback",
        Reason::OwnWork { .. } => "own_work",
    };
    (
        record.decision.voted_class.clone(),
        record.decision.target_expert.clone(),
        kind,
    )
}

/// The voted class when `record` stayed on a confident vote: the class's expert runs, the
/// class maps to none, or its expert is within the noise or not worth the switch. None for no
/// vote, an unsure one, a cooldown, the agent's own work or a switch.
fn held_class(record: &TickRecord) -> Option<&str> {
    let confident_stay = record.outcome == Outcome::Stay
        && matches!(
            record.decision.reason,
            Reason::AlreadyRunning
                | Reason::ClassNotMapped
                | Reason::WithinNoise { .. }
                | Reason::NotWorthSwitching { .. }
        );
    if confident_stay {
        record.decision.voted_class.as_deref()
    } else {
        None
    }
}

/// Counts a failure of `expert` towards its quarantine, and says so when it starts one.
fn note_failure(engine: &mut DecisionEngine, expert: &str, now: Duration, why: &str) {
    match engine.policy_mut().note_expert_failed(expert, now, why) {
        Some(length) => log::warn!(
            "{expert} failed again ({why}): quarantined for {:.0} s, the decision skips it meanwhile",
            length.as_secs_f64()
        ),
        None => log::info!("{expert} failed ({why}): counted towards its quarantine"),
    }
}

/// What the controller reports that ends a settled stretch when it changes: the pin, the
/// expert running, a switch under way, the latest event (an expert that failed).
#[derive(Debug, Clone, PartialEq)]
struct ControllerState {
    pinned: Option<String>,
    active: String,
    switching_to: Option<String>,
    last_event_ms: Option<u64>,
}

impl ControllerState {
    fn of(status: &AgentStatus) -> Self {
        ControllerState {
            pinned: status.pinned.clone(),
            active: status.active.expert.clone(),
            switching_to: status.switching_to.clone(),
            last_event_ms: status.last_event.as_ref().map(|e| e.at_unix_ms),
        }
    }
}
