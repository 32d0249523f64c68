//! The action path: one thread owns the [`Supervisor`] and performs every switch; the control
//! socket's connections reach it through a channel, and `status` is answered from a shared
//! snapshot so it never waits behind a slow switch (scx_lavd takes ~25 s to attach under TCG).
//!
//! Between jobs the same thread tends the hot-standby pool: the wanted set
//! ([`crate::decision::standby::wanted_standby`], from the decision thread's candidates or a
//! fixed list) is handed to the supervisor, which starts and stops standbys without blocking;
//! a switch never waits for the pool, and `status` reads it from the snapshot.

use std::collections::HashMap;
use std::os::unix::net::UnixListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Result;
use asa_experts::supervisor::unix_ms;
use asa_experts::{Catalogue, SchedExt, ScxState, Supervisor, SupervisorEvent, SwitchError, EEVDF};
use log::info;

use crate::control::{self, AgentStatus, DecisionStatus, Request, Response, TimedEvent};
use crate::decision::standby::{wanted_standby, StandbyBounds};

/// How often the standbys' resident memory is read for the pool's memory budget.
const STANDBY_RSS_INTERVAL: Duration = Duration::from_secs(1);

/// The hot-standby pool's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StandbySettings {
    /// Count and memory bounds.
    pub bounds: StandbyBounds,
    /// Keep exactly these standing by (most wanted first, within the bounds) instead of the
    /// decision engine's choice (`--standby-experts`; also the only source for a foreground
    /// `asa pin`, which has no decision engine).
    pub fixed: Option<Vec<String>>,
}

/// What the decision thread proposes for the pool: the vote's candidates (best first) and
/// the table's overall best.
#[derive(Debug, Clone, Default)]
struct StandbyCandidates {
    vote: Vec<String>,
    overall_best: Option<String>,
}

/// How often the controller looks at the running expert between requests.
pub const WATCH_INTERVAL: Duration = Duration::from_millis(50);

enum Job {
    Pin(String, Sender<Response>),
    Unpin(Sender<Response>),
    /// A switch the decision engine chose (refused while pinned).
    Decide(String, Sender<Response>),
}

/// What the socket server needs to answer requests.
#[derive(Clone)]
pub struct ControllerHandle {
    status: Arc<Mutex<AgentStatus>>,
    jobs: Sender<Job>,
    catalogue: Catalogue,
    scx: SchedExt,
    candidates: Arc<Mutex<StandbyCandidates>>,
}

/// Owns the supervisor; see the module documentation.
pub struct Controller {
    supervisor: Supervisor,
    status: Arc<Mutex<AgentStatus>>,
    jobs: Receiver<Job>,
    handle: ControllerHandle,
    /// The expert the agent itself chose last (EEVDF until the decision engine switches):
    /// `asa unpin` returns to it.
    agent_choice: String,
    standby: StandbySettings,
    /// Each expert's memory (resident plus BPF kernel memory) when last seen parked (KiB),
    /// for the memory budget.
    standby_rss: HashMap<String, u64>,
    standby_rss_read: Option<Instant>,
}

fn event(message: String) -> TimedEvent {
    TimedEvent {
        at_unix_ms: unix_ms(SystemTime::now()),
        message,
    }
}

impl Controller {
    /// A controller around `supervisor`; `mode` is shown by `asa status`.
    pub fn new(supervisor: Supervisor, mode: &str, note: &str) -> Self {
        let (tx, rx) = mpsc::channel();
        let status = Arc::new(Mutex::new(AgentStatus::new(
            mode,
            supervisor.active().clone(),
            note,
        )));
        let handle = ControllerHandle {
            status: status.clone(),
            jobs: tx,
            catalogue: supervisor.catalogue().clone(),
            scx: supervisor.sched_ext().clone(),
            candidates: Arc::default(),
        };
        Self {
            supervisor,
            status,
            jobs: rx,
            handle,
            agent_choice: EEVDF.to_owned(),
            standby: StandbySettings {
                bounds: StandbyBounds {
                    max: 0,
                    ..StandbyBounds::default()
                },
                fixed: None,
            },
            standby_rss: HashMap::new(),
            standby_rss_read: None,
        }
    }

    /// Keep a hot-standby pool with these settings (the default controller keeps none).
    pub fn with_standby(mut self, settings: StandbySettings) -> Self {
        {
            let mut st = self.status.lock().unwrap();
            st.standby.max = settings.bounds.max;
            st.standby.memory_budget_kib = settings.bounds.memory_kib;
            st.standby.source = match (&settings.fixed, settings.bounds.max) {
                (_, 0) => "off",
                (Some(_), _) => "fixed",
                (None, _) => "policy",
            }
            .to_owned();
        }
        self.standby = settings;
        self
    }

    /// Hand the wanted standby set to the supervisor, let it start, stop and check standbys
    /// (never blocking), and publish the pool for `asa status`.
    fn tend_standby(&mut self) {
        let wanted = if self.standby.bounds.max == 0 {
            Vec::new()
        } else {
            let (vote, best) = match &self.standby.fixed {
                Some(fixed) => (fixed.clone(), None),
                None => {
                    let c = self.handle.candidates.lock().unwrap();
                    (c.vote.clone(), c.overall_best.clone())
                }
            };
            let running = self.supervisor.active().expert.clone();
            let pool: Vec<String> = self
                .supervisor
                .standby_info(false)
                .into_iter()
                .map(|s| s.expert)
                .collect();
            wanted_standby(
                &vote,
                best.as_deref(),
                &pool,
                &running,
                EEVDF,
                |e| self.standby_rss.get(e).copied(),
                self.standby.bounds,
            )
        };
        self.supervisor.set_standby(&wanted);
        let events = self.supervisor.check_standby();
        let read_rss = self
            .standby_rss_read
            .is_none_or(|t| t.elapsed() >= STANDBY_RSS_INTERVAL);
        let info = self.supervisor.standby_info(read_rss);
        if read_rss {
            self.standby_rss_read = Some(Instant::now());
            for s in &info {
                if let (asa_experts::supervisor::StandbyState::Parked, Some(memory)) =
                    (s.state, s.memory_kib())
                {
                    self.standby_rss.insert(s.expert.clone(), memory);
                }
            }
        }
        let mut st = self.status.lock().unwrap();
        st.standby.wanted = wanted;
        // Keep the last memory reading between reads.
        let previous = std::mem::take(&mut st.standby.experts);
        st.standby.experts = info
            .into_iter()
            .map(|mut s| {
                if let Some(p) = previous.iter().find(|p| p.pid == s.pid) {
                    s.rss_kib = s.rss_kib.or(p.rss_kib);
                    s.bpf_kib = s.bpf_kib.or(p.bpf_kib);
                }
                s
            })
            .collect();
        st.standby.lost += events
            .iter()
            .filter(|e| matches!(e, SupervisorEvent::StandbyLost { .. }))
            .count() as u64;
        if let Some(ev) = events.last() {
            st.last_event = Some(event(ev.to_string()));
        }
    }

    /// A handle for the socket server.
    pub fn handle(&self) -> ControllerHandle {
        self.handle.clone()
    }

    /// Pin `expert` now (on the controller's thread).
    pub fn pin(&mut self, expert: &str) -> Response {
        self.switch(expert, true)
    }

    /// A switch the decision engine asked for: refused while an expert is pinned.
    fn decide(&mut self, expert: &str) -> Response {
        if let Some(pinned) = self.status.lock().unwrap().pinned.clone() {
            return failure(format!(
                "{pinned} is pinned (`asa unpin` hands the choice back to the agent)"
            ));
        }
        let response = self.switch(expert, false);
        if response.ok {
            self.agent_choice = expert.to_owned();
        }
        response
    }

    fn switch(&mut self, expert: &str, pin: bool) -> Response {
        self.status.lock().unwrap().switching_to = Some(expert.to_owned());
        let result = self.supervisor.switch_to(expert);
        let mut st = self.status.lock().unwrap();
        st.switching_to = None;
        st.active = self.supervisor.active().clone();
        let response = match result {
            Ok(report) => {
                if pin {
                    st.pinned = Some(expert.to_owned());
                }
                st.last_switch = Some(report.clone());
                Response {
                    ok: true,
                    error: None,
                    status: None,
                    switch: Some(report),
                }
            }
            Err(e) => {
                let message = e.to_string();
                st.last_error = Some(event(message.clone()));
                if matches!(e, SwitchError::Failed { .. }) {
                    st.pinned = None;
                }
                Response {
                    ok: false,
                    error: Some(message),
                    status: None,
                    switch: None,
                }
            }
        };
        drop(st);
        // The standby taken leaves the pool and its replacement starts now, before the answer.
        self.tend_standby();
        Response {
            status: Some(self.handle.status_now()),
            ..response
        }
    }

    /// Serve jobs and watch the expert until `stop` is set, then return to EEVDF.
    pub fn run(&mut self, stop: &AtomicBool) -> Result<()> {
        while !stop.load(Ordering::Relaxed) {
            match self.jobs.recv_timeout(WATCH_INTERVAL) {
                Ok(Job::Pin(expert, reply)) => {
                    let r = self.pin(&expert);
                    let _ = reply.send(r);
                }
                Ok(Job::Decide(expert, reply)) => {
                    let r = self.decide(&expert);
                    let _ = reply.send(r);
                }
                Ok(Job::Unpin(reply)) => {
                    // Back to what the agent chose last (EEVDF when it never switched).
                    let choice = self.agent_choice.clone();
                    let mut r = self.pin(&choice);
                    self.status.lock().unwrap().pinned = None;
                    r.status = Some(self.handle.status_now());
                    let _ = reply.send(r);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if let Some(ev) = self.supervisor.check() {
                let mut st = self.status.lock().unwrap();
                st.active = self.supervisor.active().clone();
                st.last_event = Some(event(ev.to_string()));
            }
            self.tend_standby();
        }
        info!("stopping: returning the machine to EEVDF");
        let result = self.supervisor.stop();
        self.status.lock().unwrap().active = self.supervisor.active().clone();
        result
    }
}

impl ControllerHandle {
    /// The status with a fresh reading of the kernel.
    pub fn status_now(&self) -> AgentStatus {
        let mut st = self.status.lock().unwrap().clone();
        for s in &mut st.standby.experts {
            s.rss_kib = asa_experts::supervisor::rss_kib(s.pid).or(s.rss_kib);
            s.bpf_kib = asa_experts::supervisor::bpf_memlock_kib(s.pid).or(s.bpf_kib);
        }
        st.standby.memory_kib = st
            .standby
            .experts
            .iter()
            .filter_map(|s| s.memory_kib())
            .sum();
        let snap = self.scx.snapshot().ok();
        st.consistent = match (&snap, &st.switching_to) {
            (Some(snap), None) => Some(match self.catalogue.get(&st.active.expert) {
                Some(e) if e.is_kernel_default() => snap.state == ScxState::Disabled,
                Some(e) => {
                    snap.state == ScxState::Enabled
                        && snap.ops.as_deref().is_some_and(|o| e.owns_ops(o))
                }
                None => false,
            }),
            _ => None,
        };
        st.kernel = snap;
        st
    }

    fn answer(&self, request: Request) -> Response {
        let (tx, rx) = mpsc::channel();
        let job = match request {
            Request::Status => {
                return Response {
                    ok: true,
                    error: None,
                    status: Some(self.status_now()),
                    switch: None,
                }
            }
            Request::Pin { expert } => Job::Pin(expert, tx),
            Request::Unpin => Job::Unpin(tx),
        };
        self.submit(job, rx)
    }

    fn submit(&self, job: Job, rx: Receiver<Response>) -> Response {
        if self.jobs.send(job).is_err() {
            return failure("the agent is shutting down".into());
        }
        // Two full enable timeouts (switch + rollback) and some.
        match rx.recv_timeout(Duration::from_secs(300)) {
            Ok(response) => response,
            Err(RecvTimeoutError::Timeout) => {
                failure("the agent did not finish the switch in 300 s".into())
            }
            Err(RecvTimeoutError::Disconnected) => failure("the agent is shutting down".into()),
        }
    }

    /// The status as last recorded, without reading the kernel (cheap: for the decision
    /// engine's every tick).
    pub fn status_cached(&self) -> AgentStatus {
        self.status.lock().unwrap().clone()
    }

    /// The decision thread's proposal for the standby pool: the experts of the voted classes,
    /// best first, and the table's overall best.
    pub fn set_standby_candidates(&self, vote: Vec<String>, overall_best: Option<String>) {
        *self.candidates.lock().unwrap() = StandbyCandidates { vote, overall_best };
    }

    /// Publish the decision engine's state for `asa status`.
    pub fn set_decision(&self, decision: DecisionStatus) {
        self.status.lock().unwrap().decision = Some(decision);
    }

    /// Update the decision engine's state for `asa status` in place.
    pub fn update_decision(&self, update: impl FnOnce(&mut DecisionStatus)) {
        if let Some(d) = self.status.lock().unwrap().decision.as_mut() {
            update(d);
        }
    }

    /// Switch to `expert` for the decision engine; waits for the switch. Fails (changing
    /// nothing) while an expert is pinned, and when the controller has stopped.
    pub fn decide(&self, expert: &str) -> Response {
        let (tx, rx) = mpsc::channel();
        self.submit(Job::Decide(expert.to_owned(), tx), rx)
    }

    /// Serve `listener` on a background thread with the bounds of [`control::serve`] (a line
    /// of at most 64 KiB within 5 s, at most 32 connections at once), root (or the agent's own
    /// user) only, for the life of the process.
    pub fn serve(self, listener: UnixListener) {
        control::serve(listener, Arc::new(AtomicBool::new(false)), move |request| {
            self.answer(request)
        });
    }
}

fn failure(error: String) -> Response {
    control::refusal(error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use asa_experts::Active;
    use std::os::unix::net::UnixStream;

    /// A handle with no controller thread behind it, and the controller's end of its queue.
    fn handle() -> (ControllerHandle, Receiver<Job>) {
        let (jobs, queue) = mpsc::channel();
        let active = Active {
            expert: EEVDF.to_owned(),
            since_unix_ms: 0,
            pid: None,
        };
        let handle = ControllerHandle {
            status: Arc::new(Mutex::new(AgentStatus::new("test", active, ""))),
            jobs,
            catalogue: Catalogue::builtin(),
            scx: SchedExt::at("/nonexistent/sched_ext"),
            candidates: Arc::default(),
        };
        (handle, queue)
    }

    /// The controller's socket is the bounded server: with `MAX_CONNECTIONS` clients connected
    /// and silent, one more is told at once that the agent is busy (an unbounded server starts
    /// a thread for it and every further client); once they leave, `status` answers.
    #[test]
    fn the_controllers_socket_turns_away_clients_beyond_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("control.sock");
        let (handle, _queue) = handle();
        handle.serve(control::bind(&path).unwrap());
        let held: Vec<UnixStream> = (0..control::MAX_CONNECTIONS)
            .map(|_| UnixStream::connect(&path).unwrap())
            .collect();
        let t0 = Instant::now();
        let busy = control::request(&path, &Request::Status, Duration::from_secs(10))
            .unwrap()
            .unwrap();
        assert!(
            !busy.ok && busy.error.as_deref().unwrap().contains("busy"),
            "{busy:?}"
        );
        assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
        drop(held);
        let t0 = Instant::now();
        let status = loop {
            let r = control::request(&path, &Request::Status, Duration::from_secs(5))
                .unwrap()
                .unwrap();
            if r.ok || t0.elapsed() > Duration::from_secs(3) {
                break r;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.ok, "{status:?}");
        assert_eq!(status.status.unwrap().mode, "test");
    }
}
