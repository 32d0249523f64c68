//! The user-space side of scx_gru in model mode: one thread polls the ring
//! buffer, keeps the per-task windows and runs the GRU, writing predictions
//! into `pid_to_cpu` (the thesis's design: one user-space loop).
//!
//! Nothing here can block scheduling: the BPF side never waits for user space
//! (a missing or stale prediction falls back, a full ring buffer drops the
//! event and counts it). One thread instead of a poller handing events to an
//! inference thread: every hand-over woke the second thread, a context switch
//! per poll that the machine paid for no gain.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use libbpf_rs::{MapCore, MapFlags, MapHandle, RingBuffer, RingBufferBuilder};
use log::{debug, warn};

use crate::features::{Scaling, TaskEvent, TaskWindows};
use crate::follow_gate::{FollowGate, GateChange, GateConfig, PauseReason, PlacementCounts};
use crate::model::GruModel;
use crate::stats::UserCounters;

/// The time of `clock` in ns.
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_MONOTONIC in ns: the clock of bpf_ktime_get_ns().
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CPU time of the calling thread in ns (CLOCK_THREAD_CPUTIME_ID).
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Longest a poll waits: the BPF side wakes the poller when a batch of events is waiting or
/// the oldest waiting event is old enough, and a signal interrupts the wait; this bounds how
/// late a lone event or a kernel-side exit is noticed.
pub const MAX_POLL_WAIT: Duration = Duration::from_secs(1);

/// The events ring buffer, delivering decoded events to a [`Predictor`].
pub fn event_ring(
    events: &MapHandle,
    predictor: Rc<RefCell<Predictor>>,
) -> Result<RingBuffer<'static>> {
    let mut decode_errors = 0u64;
    let mut builder = RingBufferBuilder::new();
    builder
        .add(events, move |data: &[u8]| {
            match TaskEvent::from_bytes(data) {
                Ok(event) => predictor.borrow_mut().push(&event),
                Err(e) => {
                    decode_errors += 1;
                    if decode_errors == 1 {
                        warn!("undecodable ring buffer record: {e:#}");
                    }
                }
            }
            0
        })
        .context("register the events ring buffer")?;
    builder.build().context("build the ring buffer poller")
}

/// Waits up to `timeout` for events and hands them to the ring's callback. Returns false
/// if the wait was interrupted (a signal), true otherwise.
pub fn poll_events(ring: &RingBuffer<'_>, timeout: Duration) -> Result<bool> {
    match ring.poll(timeout) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == libbpf_rs::ErrorKind::Interrupted => Ok(false),
        Err(e) => Err(e).context("poll the events ring buffer"),
    }
}

/// Where predictions go: `pid_to_cpu` in the BPF program (a [`MapHandle`]), or a recorder
/// in tests.
pub trait PredictionMap {
    /// Writes the `struct gru_prediction` bytes of task `pid`.
    fn write(&mut self, pid: u32, prediction: &[u8; 16]) -> Result<()>;
}

impl PredictionMap for MapHandle {
    fn write(&mut self, pid: u32, prediction: &[u8; 16]) -> Result<()> {
        self.update(&pid.to_ne_bytes(), prediction, MapFlags::ANY)
            .context("update pid_to_cpu")
    }
}

/// Settings of the inference loop.
#[derive(Debug, Clone, Copy)]
pub struct InferenceConfig {
    /// Do not predict again for a task whose prediction is younger than this.
    pub repredict_ns: u64,
    /// Forget tasks without events for this long.
    pub forget_ns: u64,
    /// Inference CPU time allowed per second of wall time (ns): beyond it,
    /// inferences are skipped until the next second, so the model never takes
    /// more than this share of one CPU from the workload.
    pub budget_ns_per_s: u64,
    /// Most tasks predicted by one model run (0 counts as 1).
    pub max_batch: usize,
    /// When inference pauses because its predictions cannot be followed.
    pub gate: GateConfig,
    /// A busy pause pauses the model on the BPF side too (no prediction lookup, no events),
    /// as a redundant pause does (`scx_gru`'s default); off, events keep the task windows
    /// current for the resume.
    pub busy_pause_stops_events: bool,
}

/// Time spent on inference in the current one-second period.
#[derive(Debug)]
pub struct InferenceBudget {
    per_period_ns: u64,
    period_start_ns: u64,
    spent_ns: u64,
}

impl InferenceBudget {
    /// A budget of `per_period_ns` per second, starting at `now_ns`.
    pub fn new(per_period_ns: u64, now_ns: u64) -> Self {
        Self {
            per_period_ns,
            period_start_ns: now_ns,
            spent_ns: 0,
        }
    }

    /// True if an inference may run at `now_ns`.
    pub fn allows(&mut self, now_ns: u64) -> bool {
        if now_ns.saturating_sub(self.period_start_ns) >= 1_000_000_000 {
            self.period_start_ns = now_ns;
            self.spent_ns = 0;
        }
        self.spent_ns < self.per_period_ns
    }

    /// Charges one inference.
    pub fn charge(&mut self, ns: u64) {
        self.spent_ns += ns;
    }
}

/// Per-task windows and the GRU: [`Predictor::push`] takes events, [`Predictor::predict`]
/// runs the model on every task whose window is full and changed — all of them in one
/// batch, up to `max_batch` — and writes each predicted CPU with a timestamp into
/// `pid_to_cpu`.
pub struct Predictor<M: PredictionMap = MapHandle> {
    model: GruModel,
    scaling: Scaling,
    pid_to_cpu: M,
    counters: Arc<UserCounters>,
    config: InferenceConfig,
    windows: TaskWindows,
    last_prediction_ns: HashMap<u32, u64>,
    dirty: HashSet<u32>,
    input: Vec<f32>,
    batch_pids: Vec<u32>,
    batch_cpus: Vec<usize>,
    event_features: Vec<f32>,
    last_eviction: u64,
    model_seq: u32,
    logged_errors: u32,
    budget: InferenceBudget,
    gate: FollowGate,
    /// Tells the BPF side to pause or resume the model (`model_paused`), if set.
    pause_switch: Option<PauseSwitch>,
    bpf_paused: bool,
}

/// Pauses (true) or resumes (false) the model on the BPF side: while paused it neither looks
/// up predictions nor sends events, placing every task as the no-model policy does.
pub type PauseSwitch = Box<dyn FnMut(bool) -> Result<()>>;

impl<M: PredictionMap> Predictor<M> {
    /// A predictor writing into `pid_to_cpu`.
    pub fn new(
        model: GruModel,
        pid_to_cpu: M,
        counters: Arc<UserCounters>,
        config: InferenceConfig,
    ) -> Self {
        let now = monotonic_ns();
        let config = InferenceConfig {
            max_batch: config.max_batch.max(1),
            ..config
        };
        Self {
            windows: TaskWindows::new(model.meta().window, model.scaling().width()),
            event_features: vec![0.0f32; model.scaling().width()],
            input: Vec::with_capacity(model.input_len() * config.max_batch),
            batch_pids: Vec::with_capacity(config.max_batch),
            batch_cpus: Vec::with_capacity(config.max_batch),
            scaling: model.scaling().clone(),
            model,
            pid_to_cpu,
            counters,
            config,
            last_prediction_ns: HashMap::new(),
            dirty: HashSet::new(),
            last_eviction: now,
            model_seq: 0,
            logged_errors: 0,
            budget: InferenceBudget::new(config.budget_ns_per_s, now),
            gate: FollowGate::new(config.gate, now, PlacementCounts::default()),
            pause_switch: None,
            bpf_paused: false,
        }
    }

    /// Lets the predictor pause the model on the BPF side while inference is paused as
    /// redundant (its predictions would change nothing, its events feed nothing) or, with
    /// [`InferenceConfig::busy_pause_stops_events`], as busy, and resume it when the gate
    /// probes again or resumes early.
    pub fn set_pause_switch(&mut self, switch: PauseSwitch) {
        self.pause_switch = Some(switch);
    }

    /// Pauses or resumes the model on the BPF side, if there is a switch and it changes
    /// anything.
    fn switch_bpf_pause(&mut self, paused: bool) {
        if self.bpf_paused == paused {
            return;
        }
        let Some(switch) = self.pause_switch.as_mut() else {
            return;
        };
        match switch(paused) {
            Ok(()) => {
                self.bpf_paused = paused;
                if paused {
                    // No events come while paused: after the resume each task's window
                    // starts again from its first new event instead of joining events from
                    // both sides of the pause.
                    self.windows.clear();
                    self.dirty.clear();
                }
            }
            Err(e) => self.count_failure(
                |c| &c.map_update_errors,
                || format!("model_paused update failed: {e:#}"),
            ),
        }
    }

    /// Feeds the BPF side's cumulative placement counts to the [`FollowGate`] (before
    /// [`Predictor::predict`]): inference pauses while its predictions cannot be followed.
    pub fn observe_placements(&mut self, counts: PlacementCounts) {
        match self.gate.observe(monotonic_ns(), counts) {
            GateChange::Paused(reason, ns) => {
                let (counter, why) = match reason {
                    PauseReason::Busy => (
                        &self.counters.inference_pauses,
                        "its predictions' CPUs were busy",
                    ),
                    PauseReason::Redundant => (
                        &self.counters.inference_pauses_redundant,
                        "its predictions kept tasks where the fallback keeps them",
                    ),
                };
                counter.fetch_add(1, Ordering::Relaxed);
                debug!("inference paused for {} ms: {why}", ns / 1_000_000);
                // Busy pauses keep the events if told to: the windows are current when
                // inference resumes.
                if reason == PauseReason::Redundant || self.config.busy_pause_stops_events {
                    self.switch_bpf_pause(true);
                }
            }
            GateChange::Probing => {
                self.switch_bpf_pause(false);
                debug!("inference probing after its pause");
            }
            GateChange::ResumedIdle => {
                self.switch_bpf_pause(false);
                debug!("inference resumed: wake-ups find idle CPUs");
            }
            GateChange::None => {}
        }
    }

    /// Adds one event to its task's window.
    pub fn push(&mut self, event: &TaskEvent) {
        self.counters
            .events_received
            .fetch_add(1, Ordering::Relaxed);
        self.scaling.features_into(event, &mut self.event_features);
        if self
            .windows
            .push(event.pid, event.stamp_ns, &self.event_features)
        {
            self.dirty.insert(event.pid);
        }
    }

    /// Predicts for every task with a full, changed window (at most once per
    /// `repredict_ns` per task, within the CPU budget, unless the [`FollowGate`] has paused
    /// inference), up to `max_batch` tasks per model run; forgets silent tasks.
    pub fn predict(&mut self) {
        let mut pending: Vec<u32> = self.dirty.drain().collect();
        let now = monotonic_ns();
        pending.retain(|pid| {
            let recent = self
                .last_prediction_ns
                .get(pid)
                .is_some_and(|last| now.saturating_sub(*last) < self.config.repredict_ns);
            if recent {
                // Still changed: predict when the interval is over.
                self.dirty.insert(*pid);
            }
            !recent
        });
        let per_sequence = self.model.input_len();
        let mut start = 0;
        if !self.gate.allows(now) {
            self.counters
                .inferences_paused
                .fetch_add(pending.len() as u64, Ordering::Relaxed);
            start = pending.len();
        }
        while start < pending.len() {
            if !self.budget.allows(monotonic_ns()) {
                self.counters
                    .inferences_over_budget
                    .fetch_add((pending.len() - start) as u64, Ordering::Relaxed);
                break;
            }
            self.batch_pids.clear();
            self.input.clear();
            while start < pending.len() && self.batch_pids.len() < self.config.max_batch {
                let pid = pending[start];
                start += 1;
                let at = self.input.len();
                self.input.resize(at + per_sequence, 0.0);
                if self.windows.fill_tensor(pid, &mut self.input[at..]) {
                    self.batch_pids.push(pid);
                } else {
                    self.input.truncate(at);
                }
            }
            if !self.batch_pids.is_empty() {
                self.predict_batch();
            }
        }
        let now = monotonic_ns();
        if now.saturating_sub(self.last_eviction) > self.config.forget_ns {
            let oldest = now.saturating_sub(self.config.forget_ns);
            self.windows.evict_older_than(oldest);
            self.last_prediction_ns.retain(|_, t| *t >= oldest);
            self.last_eviction = now;
        }
    }

    /// One model run on the sequences in `input` (the tasks of `batch_pids`),
    /// each predicted CPU written into `pid_to_cpu`.
    fn predict_batch(&mut self) {
        let started = Instant::now();
        let cpu_before = thread_cpu_ns();
        let result = self.model.predict_batch(&self.input, &mut self.batch_cpus);
        let elapsed = started.elapsed().as_nanos() as u64;
        // The budget is a share of a CPU: the run's CPU time, not its wall time (which includes
        // the waits of a run preempted on a busy machine).
        self.budget
            .charge(thread_cpu_ns().saturating_sub(cpu_before));
        self.counters.inferences.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = result {
            self.count_failure(
                |c| &c.inference_errors,
                || format!("inference failed: {e:#}"),
            );
            return;
        }
        self.counters
            .latency
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record(elapsed);
        self.counters
            .tasks_predicted
            .fetch_add(self.batch_pids.len() as u64, Ordering::Relaxed);
        let stamp = monotonic_ns();
        for i in 0..self.batch_pids.len() {
            let (pid, cpu) = (self.batch_pids[i], self.batch_cpus[i]);
            self.model_seq = self.model_seq.wrapping_add(1);
            let value = prediction_bytes(stamp, cpu as i32, self.model_seq);
            match self.pid_to_cpu.write(pid, &value) {
                Ok(()) => {
                    self.counters
                        .predictions_written
                        .fetch_add(1, Ordering::Relaxed);
                    self.last_prediction_ns.insert(pid, stamp);
                }
                Err(e) => {
                    self.count_failure(
                        |c| &c.map_update_errors,
                        || format!("pid_to_cpu update failed: {e:#}"),
                    );
                }
            }
        }
    }

    /// Counts one failure in its counter and logs the first `LOGGED_FAILURES` failures of the
    /// run (of any kind): a failing model or map fails on every prediction.
    fn count_failure(
        &mut self,
        counter: fn(&UserCounters) -> &AtomicU64,
        message: impl FnOnce() -> String,
    ) {
        counter(&self.counters).fetch_add(1, Ordering::Relaxed);
        if self.logged_errors < LOGGED_FAILURES {
            self.logged_errors += 1;
            warn!("{}", message());
        }
    }
}

/// How many failed predictions (inference or map update) a run logs; later ones are only
/// counted.
const LOGGED_FAILURES: u32 = 5;

/// Polls until `shutdown`: events into `predictor`, then the BPF side's `placements()` into
/// its gate and predictions after every poll, and `tick` after every poll (stats; returning
/// false stops the loop). Waits at most `max_wait()` per poll.
pub fn run_event_loop(
    ring: &RingBuffer<'_>,
    predictor: &RefCell<Predictor>,
    shutdown: &AtomicBool,
    mut max_wait: impl FnMut() -> Duration,
    mut placements: impl FnMut() -> PlacementCounts,
    mut tick: impl FnMut() -> bool,
) -> Result<()> {
    while !shutdown.load(Ordering::Relaxed) {
        poll_events(ring, max_wait())?;
        let mut predictor = predictor.borrow_mut();
        predictor.observe_placements(placements());
        predictor.predict();
        drop(predictor);
        if !tick() {
            break;
        }
    }
    Ok(())
}

/// The bytes of a `struct gru_prediction`.
pub fn prediction_bytes(stamp_ns: u64, cpu: i32, model_seq: u32) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&stamp_ns.to_ne_bytes());
    out[8..12].copy_from_slice(&cpu.to_ne_bytes());
    out[12..].copy_from_slice(&model_seq.to_ne_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf_intf;
    use crate::model::find_ort_library;
    use std::path::Path;

    /// Records what the predictor writes (pid, cpu).
    type Written = Rc<RefCell<Vec<(u32, i32)>>>;

    /// The predictor's user-space counters, as the stats copy them.
    fn user_metrics(p: &Predictor<Written>) -> crate::metrics::Metrics {
        let mut metrics = crate::metrics::Metrics::default();
        p.counters.copy_into(&mut metrics);
        metrics
    }

    impl PredictionMap for Written {
        fn write(&mut self, pid: u32, prediction: &[u8; 16]) -> Result<()> {
            let cpu = i32::from_ne_bytes(prediction[8..12].try_into().unwrap());
            self.borrow_mut().push((pid, cpu));
            Ok(())
        }
    }

    fn predictor(budget_ns_per_s: u64, max_batch: usize) -> (Predictor<Written>, Written) {
        predictor_with_gate(budget_ns_per_s, max_batch, GateConfig::default())
    }

    fn predictor_with_gate(
        budget_ns_per_s: u64,
        max_batch: usize,
        gate: GateConfig,
    ) -> (Predictor<Written>, Written) {
        let lib = find_ort_library().unwrap();
        let meta = Path::new(env!("CARGO_MANIFEST_DIR")).join("model/gru.toml");
        let model = GruModel::load(&meta, Path::new(&lib), 2).unwrap();
        let written = Written::default();
        let config = InferenceConfig {
            repredict_ns: 60_000_000_000,
            forget_ns: 60_000_000_000,
            budget_ns_per_s,
            max_batch,
            gate,
            busy_pause_stops_events: false,
        };
        let p = Predictor::new(model, written.clone(), Arc::default(), config);
        (p, written)
    }

    fn push_events(p: &mut Predictor<Written>, pid: u32, n: usize) {
        for i in 0..n {
            p.push(&TaskEvent {
                stamp_ns: monotonic_ns(),
                pid,
                cpu: ((pid as usize + i) % 2) as i32,
                prio: 120,
                nr_cpus_allowed: 2,
                runtime_ns: 1_000_000 * i as u64,
                nvcsw: i as u64,
                nivcsw: 0,
                switch_count: i as u64,
                flags: 0,
                source: 0,
                comm: "t".into(),
            });
        }
    }

    /// 20 tasks with full windows and one without: four model runs of at most 6 tasks,
    /// every full task written once, the short one never; a task predicted again before
    /// `repredict_ns` waits; with no budget nothing runs and every task is counted.
    #[test]
    #[ignore = "needs ONNX Runtime: ORT_DYLIB_PATH or gru_expert/setup_ort.sh"]
    fn tasks_are_predicted_in_batches_within_the_budget() {
        let (mut p, written) = predictor(1_000_000_000, 6);
        let window = p.model.meta().window;
        for pid in 1..=20 {
            push_events(&mut p, pid, window);
        }
        push_events(&mut p, 99, window - 1);
        p.predict();
        let user = user_metrics(&p);
        assert_eq!((user.inferences, user.tasks_predicted), (4, 20));
        assert_eq!(user.predictions_written, 20);
        let mut pids: Vec<u32> = written.borrow().iter().map(|(pid, _)| *pid).collect();
        pids.sort_unstable();
        assert_eq!(pids, (1..=20).collect::<Vec<u32>>());
        assert!(written.borrow().iter().all(|(_, cpu)| (0..2).contains(cpu)));

        push_events(&mut p, 1, 1);
        p.predict();
        assert_eq!(
            written.borrow().len(),
            20,
            "predicted again within repredict_ns"
        );
        assert!(
            p.dirty.contains(&1),
            "the changed task waits for its next turn"
        );

        let (mut p, written) = predictor(0, 8);
        for pid in 1..=3 {
            push_events(&mut p, pid, window);
        }
        p.predict();
        let user = user_metrics(&p);
        assert_eq!((user.inferences, user.inferences_over_budget), (0, 3));
        assert!(written.borrow().is_empty());
    }

    /// A redundant pause stops the BPF side's events and the probe after it resumes them; a
    /// busy pause keeps them without `busy_pause_stops_events`.
    #[test]
    #[ignore = "needs ONNX Runtime: ORT_DYLIB_PATH or gru_expert/setup_ort.sh"]
    fn redundant_pauses_stop_the_events_until_the_probe() {
        let gate = GateConfig {
            period_ns: 1_000_000,
            first_pause_ns: 30_000_000,
            max_pause_ns: 30_000_000,
            ..GateConfig::default()
        };
        let (mut p, _) = predictor_with_gate(1_000_000_000, 8, gate);
        let switched: Rc<RefCell<Vec<bool>>> = Rc::default();
        let record = switched.clone();
        p.set_pause_switch(Box::new(move |paused| {
            record.borrow_mut().push(paused);
            Ok(())
        }));
        let counts = |followed, moved, busy| PlacementCounts {
            followed,
            moved,
            busy,
            ..PlacementCounts::default()
        };
        std::thread::sleep(Duration::from_millis(2));
        // 100 followed, none moved: redundant.
        p.observe_placements(counts(100, 0, 0));
        assert_eq!(*switched.borrow(), [true]);
        assert!(!p.gate.allows(monotonic_ns()));
        std::thread::sleep(Duration::from_millis(35));
        p.observe_placements(counts(100, 0, 0));
        assert_eq!(*switched.borrow(), [true, false], "the probe resumes them");
        std::thread::sleep(Duration::from_millis(2));
        // 100 usable, none followed: busy; the events stay on.
        p.observe_placements(counts(100, 0, 100));
        assert!(!p.gate.allows(monotonic_ns()));
        assert_eq!(*switched.borrow(), [true, false]);
        let user = user_metrics(&p);
        assert_eq!(
            (user.inference_pauses, user.inference_pauses_redundant),
            (1, 1)
        );
    }

    /// With `busy_pause_stops_events`, a busy pause pauses the BPF side too, and forgets the
    /// task windows (a task one event short of a full window before it needs a whole window
    /// after it); the early resume (wake-ups find idle CPUs again) resumes it.
    #[test]
    #[ignore = "needs ONNX Runtime: ORT_DYLIB_PATH or gru_expert/setup_ort.sh"]
    fn busy_pauses_can_stop_the_events_until_the_resume() {
        let gate = GateConfig {
            period_ns: 1_000_000,
            ..GateConfig::default()
        };
        let (mut p, written) = predictor_with_gate(1_000_000_000, 8, gate);
        p.config.busy_pause_stops_events = true;
        let window = p.model.meta().window;
        push_events(&mut p, 7, window - 1);
        let switched: Rc<RefCell<Vec<bool>>> = Rc::default();
        let record = switched.clone();
        p.set_pause_switch(Box::new(move |paused| {
            record.borrow_mut().push(paused);
            Ok(())
        }));
        std::thread::sleep(Duration::from_millis(2));
        // 100 usable, none followed: busy.
        let busy = PlacementCounts {
            busy: 100,
            ..PlacementCounts::default()
        };
        p.observe_placements(busy);
        assert_eq!(*switched.borrow(), [true]);
        assert!(!p.gate.allows(monotonic_ns()));
        // The windows from before the pause are gone: no events come during it.
        assert_eq!(p.windows.nr_tasks(), 0);
        assert!(p.dirty.is_empty());
        std::thread::sleep(Duration::from_millis(2));
        // 100 wake-ups that all found an idle CPU: the pause ends, the events resume.
        p.observe_placements(PlacementCounts {
            idle_found: 100,
            ..busy
        });
        assert_eq!(*switched.borrow(), [true, false]);
        assert!(p.gate.allows(monotonic_ns()));
        // A task predicts again once it has a full window of events from after the pause.
        let window = p.model.meta().window;
        push_events(&mut p, 7, window - 1);
        p.predict();
        assert!(written.borrow().is_empty(), "predicted from a part window");
        push_events(&mut p, 7, 1);
        p.predict();
        assert_eq!(written.borrow().len(), 1);
    }

    #[test]
    fn prediction_layout_matches_the_c_struct() {
        assert_eq!(std::mem::size_of::<bpf_intf::gru_prediction>(), 16);
        let bytes = prediction_bytes(0x0102_0304_0506_0708, -1, 9);
        // SAFETY: 16 bytes, plain old data.
        let p: bpf_intf::gru_prediction =
            unsafe { std::ptr::read_unaligned(bytes.as_ptr() as *const bpf_intf::gru_prediction) };
        assert_eq!(
            (p.stamp_ns, p.cpu, p.model_seq),
            (0x0102_0304_0506_0708, -1, 9)
        );
    }

    #[test]
    fn budget_refills_every_second() {
        let mut b = InferenceBudget::new(100, 0);
        assert!(b.allows(10));
        b.charge(60);
        assert!(b.allows(20));
        b.charge(60);
        assert!(!b.allows(999_999_999));
        assert!(b.allows(1_000_000_000));
    }

    #[test]
    fn monotonic_clock_advances() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(b >= a && a > 0);
    }

    /// The thread's CPU clock counts work, not sleep.
    #[test]
    fn thread_cpu_clock_counts_work_not_sleep() {
        let before = thread_cpu_ns();
        std::thread::sleep(Duration::from_millis(50));
        let slept = thread_cpu_ns() - before;
        let before = thread_cpu_ns();
        let started = Instant::now();
        let mut x = 0u64;
        while started.elapsed() < Duration::from_millis(50) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let worked = thread_cpu_ns() - before;
        assert!(slept < 10_000_000, "sleeping 50 ms counted {slept} ns");
        assert!(
            worked > slept,
            "working counted {worked} ns, sleeping {slept}"
        );
    }
}
