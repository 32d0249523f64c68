//! The action path: one thread owns the [`Supervisor`] and performs every switch; the control
//! socket's connections reach it through a channel, and `status` is answered from a shared
//! snapshot so it never waits behind a slow switch (scx_lavd takes ~25 s to attach under TCG).
//!
//! Between jobs the same thread tends the hot-standby pool: the wanted set
//! ([`crate::decision::standby::wanted_standby`], from the decision thread's candidates or a
//! fixed list) is handed to the supervisor, which starts and stops standbys without blocking;
//! a switch never waits for the pool, and `status` reads it from the snapshot.
//!
//! Every job has a deadline: the moment its submitter stops waiting for the answer
//! ([`JOB_TIMEOUT`] after it was queued). A job still queued at its deadline (behind a slow
//! switch) is dropped when it comes up and reported in `asa status` as the last error, never
//! run: a pin whose client was told "timed out" must not change the scheduler minutes later.
//! A job that has started when its deadline passes runs to its end (a switch is not abandoned
//! half-way); its outcome is in `asa status`.

use std::collections::HashMap;
use std::os::unix::net::UnixListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Result;
use asa_experts::supervisor::unix_ms;
use asa_experts::{Catalogue, SchedExt, Supervisor, SupervisorEvent, SwitchError, EEVDF};
use log::{info, warn};

use crate::control::{self, server, AgentStatus, DecisionStatus, Request, Response, TimedEvent};
use crate::decision::standby::{wanted_standby, StandbyBounds};

/// How often the standbys' memory (resident, and the BPF maps' and programs' from every
/// descriptor's /proc/PID/fdinfo) is read again for the pool's memory budget. A standby that
/// parked since the last read is read at once; a parked one holds still, and reading scx_layered's
/// few hundred descriptors every second cost the agent 2.4 % of a CPU in the lab VM, in bursts
/// beside the workload.
const STANDBY_RSS_INTERVAL: Duration = Duration::from_secs(60);

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

/// How often the controller looks at the running expert between requests (an exit or an
/// ejection shows in `status` within this; the kernel itself is back on EEVDF at once).
pub const WATCH_INTERVAL: Duration = Duration::from_millis(250);

/// How long a submitter waits for its job's answer, and so the job's deadline: two full
/// enable timeouts (switch and rollback) and some. The `asa pin`/`asa unpin` clients wait 5 s
/// longer, for the answer.
pub const JOB_TIMEOUT: Duration = Duration::from_secs(300);

/// What a job asks the controller to do.
#[derive(Debug, Clone, PartialEq, Eq)]
enum JobKind {
    Pin(String),
    Unpin,
    /// A switch the decision engine chose (refused while pinned).
    Decide(String),
}

impl std::fmt::Display for JobKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Pin(e) => write!(f, "pin {e}"),
            Self::Unpin => f.write_str("unpin"),
            Self::Decide(e) => write!(f, "the decision engine's switch to {e}"),
        }
    }
}

/// A queued request for the controller thread: what, where the answer goes, and until when
/// anyone waits for it.
struct Job {
    kind: JobKind,
    reply: Sender<Response>,
    queued_at: Instant,
    deadline: Instant,
}

/// A job that came up after its deadline: dropped, not run.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Expired {
    kind: JobKind,
    /// How long it had waited in the queue.
    waited: Duration,
}

impl std::fmt::Display for Expired {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} waited {:.0} s behind other work, past its {:.0} s deadline (its client had \
             stopped waiting): dropped, not run",
            self.kind,
            self.waited.as_secs_f64(),
            JOB_TIMEOUT.as_secs_f64()
        )
    }
}

impl Job {
    /// The job as it comes off the queue at `now`: its kind and reply channel while its
    /// submitter still waits (`now` at or before the deadline); else it is answered with an
    /// error (for a submitter that might still read it) and returned as [`Expired`].
    fn take(self, now: Instant) -> Result<(JobKind, Sender<Response>), Expired> {
        if now <= self.deadline {
            return Ok((self.kind, self.reply));
        }
        let expired = Expired {
            kind: self.kind,
            waited: now.saturating_duration_since(self.queued_at),
        };
        let _ = self.reply.send(failure(expired.to_string()));
        Err(expired)
    }
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
    /// The standbys that were parked at the last memory read (process ids).
    standby_parked_read: Vec<u32>,
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
            standby_parked_read: Vec::new(),
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
        let parked: Vec<u32> = self
            .supervisor
            .standby_info(false)
            .iter()
            .filter(|s| s.state == asa_experts::supervisor::StandbyState::Parked)
            .map(|s| s.pid)
            .collect();
        let unread_parked = parked
            .iter()
            .any(|pid| !self.standby_parked_read.contains(pid));
        let read_rss = unread_parked
            || self
                .standby_rss_read
                .is_none_or(|t| t.elapsed() >= STANDBY_RSS_INTERVAL);
        let info = self.supervisor.standby_info(read_rss);
        if read_rss {
            self.standby_rss_read = Some(Instant::now());
            self.standby_parked_read = parked;
            for s in &info {
                if let (asa_experts::supervisor::StandbyState::Parked, Some(memory)) =
                    (s.state, s.memory_kib())
                {
                    let first = self.standby_rss.insert(s.expert.clone(), memory).is_none();
                    let budget = self.standby.bounds.memory_kib;
                    if first && memory > budget {
                        warn!(
                            "hot standby {} takes {:.1} MiB parked (resident + BPF), more than the \
                             pool's {:.1} MiB budget: it is stopped and not loaded again as a \
                             standby (--standby-memory-mib raises the budget)",
                            s.expert,
                            memory as f64 / 1024.0,
                            budget as f64 / 1024.0
                        );
                    }
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

    /// Do one job.
    fn perform(&mut self, kind: JobKind) -> Response {
        match kind {
            JobKind::Pin(expert) => self.pin(&expert),
            JobKind::Decide(expert) => self.decide(&expert),
            JobKind::Unpin => {
                // Back to what the agent chose last (EEVDF when it never switched).
                let choice = self.agent_choice.clone();
                let mut r = self.pin(&choice);
                self.status.lock().unwrap().pinned = None;
                r.status = Some(self.handle.status_now());
                r
            }
        }
    }

    /// Serve jobs and watch the expert until `stop` is set, then return to EEVDF. A job that
    /// comes up past its deadline is dropped and reported (see the module documentation).
    pub fn run(&mut self, stop: &AtomicBool) -> Result<()> {
        while !stop.load(Ordering::Relaxed) {
            match next_job(&self.jobs, &self.status, WATCH_INTERVAL, Instant::now) {
                Next::Run(kind, reply) => {
                    let r = self.perform(kind);
                    let _ = reply.send(r);
                }
                Next::Idle => {}
                Next::Closed => break,
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

/// What the controller thread does next.
enum Next {
    /// Run this job and send its answer.
    Run(JobKind, Sender<Response>),
    /// Nothing to run now (no job came, or the one that came was past its deadline).
    Idle,
    /// Every handle is gone.
    Closed,
}

/// Wait up to `wait` for the next job; one that comes up past its deadline (by `now`, read
/// when it was taken off the queue) is dropped, logged and recorded as the last error in
/// `status`.
fn next_job(
    jobs: &Receiver<Job>,
    status: &Mutex<AgentStatus>,
    wait: Duration,
    now: impl FnOnce() -> Instant,
) -> Next {
    match jobs.recv_timeout(wait) {
        Ok(job) => match job.take(now()) {
            Ok((kind, reply)) => Next::Run(kind, reply),
            Err(expired) => {
                warn!("{expired}");
                status.lock().unwrap().last_error = Some(event(expired.to_string()));
                Next::Idle
            }
        },
        Err(RecvTimeoutError::Timeout) => Next::Idle,
        Err(RecvTimeoutError::Disconnected) => Next::Closed,
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
        st.kernel_read_unix_ms = Some(unix_ms(SystemTime::now()));
        st.consistent = match (&snap, &st.switching_to) {
            (Some(snap), None) => Some(control::kernel_runs(
                &self.catalogue,
                &st.active.expert,
                snap,
            )),
            _ => None,
        };
        st.kernel = snap;
        st
    }

    /// Answer one control request (`status` from the snapshot; `pin`/`unpin` wait for the
    /// controller, at most [`JOB_TIMEOUT`]), as the control socket and the D-Bus interface do.
    pub fn answer(&self, request: Request) -> Response {
        let kind = match request {
            Request::Status => {
                return Response {
                    ok: true,
                    error: None,
                    status: Some(self.status_now()),
                    switch: None,
                }
            }
            Request::Pin { expert } => JobKind::Pin(expert),
            Request::Unpin => JobKind::Unpin,
            Request::Apps | Request::AppSet { .. } | Request::AppUnset { .. } => {
                return failure(
                    "per-application requests are answered by the daemon (`asa run`), not by a foreground `asa pin`".into(),
                )
            }
        };
        self.submit(kind, JOB_TIMEOUT)
    }

    /// Queue a job with a deadline `wait` from now and wait for its answer until then.
    fn submit(&self, kind: JobKind, wait: Duration) -> Response {
        let (reply, answer) = mpsc::channel();
        let queued_at = Instant::now();
        let deadline = queued_at + wait;
        let job = Job {
            kind,
            reply,
            queued_at,
            deadline,
        };
        if self.jobs.send(job).is_err() {
            return failure("the agent is shutting down".into());
        }
        match answer.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(response) => response,
            Err(RecvTimeoutError::Timeout) => failure(format!(
                "the agent did not finish in {:.0} s (a job not started by then is dropped, \
                 one under way finishes: see `asa status`)",
                wait.as_secs_f64()
            )),
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
        self.submit(JobKind::Decide(expert.to_owned()), JOB_TIMEOUT)
    }

    /// Serve `listener` on a background thread with the bounds of [`server::serve`] (a line
    /// of at most 64 KiB within 5 s, at most 32 connections at once, a new one evicting the one
    /// that has waited longest for its request), root (or the agent's own user) only, for the
    /// life of the process.
    pub fn serve(self, listener: UnixListener) {
        server::serve(listener, Arc::new(AtomicBool::new(false)), move |request| {
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
    use crate::control::client;
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

    fn job(kind: JobKind, queued_at: Instant) -> (Job, Receiver<Response>) {
        let (reply, answer) = mpsc::channel();
        let job = Job {
            kind,
            reply,
            queued_at,
            deadline: queued_at + JOB_TIMEOUT,
        };
        (job, answer)
    }

    /// Up to its deadline (inclusive) a job runs; one moment later it is dropped, its waiter
    /// (if any is left) is told so, and how long it waited is reported.
    #[test]
    fn a_job_runs_until_its_deadline_and_is_dropped_after() {
        let t0 = Instant::now();
        let (on_time, _) = job(JobKind::Pin("bpfland".into()), t0);
        let (kind, _) = on_time.take(t0 + JOB_TIMEOUT).unwrap();
        assert_eq!(kind, JobKind::Pin("bpfland".into()));
        let (late, answer) = job(JobKind::Unpin, t0);
        let expired = late
            .take(t0 + JOB_TIMEOUT + Duration::from_secs(1))
            .unwrap_err();
        assert_eq!(
            expired,
            Expired {
                kind: JobKind::Unpin,
                waited: Duration::from_secs(301)
            }
        );
        let told = answer.try_recv().unwrap();
        assert!(!told.ok);
        let error = told.error.unwrap();
        assert!(
            error.contains("unpin waited 301 s") && error.contains("dropped, not run"),
            "{error}"
        );
    }

    /// A pin whose client stopped waiting (here after 50 ms, no controller thread to run it)
    /// is still queued when the controller comes to it: it is not run but recorded as the last
    /// error, which `asa status` shows.
    #[test]
    fn a_pin_whose_client_gave_up_is_dropped_not_run_later() {
        let (handle, queue) = handle();
        let answer = handle.submit(JobKind::Pin("lavd".into()), Duration::from_millis(50));
        assert!(!answer.ok);
        assert!(
            answer.error.as_deref().unwrap().contains("did not finish"),
            "{answer:?}"
        );
        let next = next_job(&queue, &handle.status, Duration::ZERO, Instant::now);
        assert!(
            matches!(next, Next::Idle),
            "the late pin was handed out to run"
        );
        let reported = handle.status_now().last_error.expect("reported");
        assert!(
            reported.message.contains("pin lavd waited 0 s")
                && reported.message.contains("dropped, not run"),
            "{}",
            reported.message
        );
        // The queue is empty: nothing runs it later either.
        assert!(matches!(
            next_job(&queue, &handle.status, Duration::ZERO, Instant::now),
            Next::Idle
        ));
    }

    /// A submitter still waiting when its job comes up past the deadline (a fake clock 301 s
    /// on) gets the "dropped" answer at once; on time, the same kind of job is handed out to
    /// run.
    #[test]
    fn a_waiting_submitter_learns_its_job_was_dropped() {
        let (handle, queue) = handle();
        let submitter = {
            let handle = handle.clone();
            std::thread::spawn(move || handle.decide("rusty"))
        };
        let queued = queue.recv_timeout(Duration::from_secs(5)).unwrap();
        let late = queued.queued_at + JOB_TIMEOUT + Duration::from_secs(1);
        handle.jobs.send(queued).unwrap();
        assert!(matches!(
            next_job(&queue, &handle.status, Duration::ZERO, || late),
            Next::Idle
        ));
        let answer = submitter.join().unwrap();
        assert!(
            answer
                .error
                .as_deref()
                .unwrap()
                .contains("the decision engine's switch to rusty waited 301 s"),
            "{answer:?}"
        );
        let (on_time, _answer) = job(JobKind::Decide("rusty".into()), Instant::now());
        handle.jobs.send(on_time).unwrap();
        assert!(matches!(
            next_job(&queue, &handle.status, Duration::ZERO, Instant::now),
            Next::Run(JobKind::Decide(e), _) if e == "rusty"
        ));
    }

    /// The controller's socket is the bounded server (`server::serve`): a flood of clients
    /// that connect and say nothing, more than its connections and threads, does not keep
    /// `status` out (answered at once, from the snapshot), and the flood's oldest client is
    /// told it was evicted (an unbounded server would have started a thread for each).
    #[test]
    fn the_controllers_socket_answers_status_past_a_flood_of_silent_clients() {
        use std::io::BufRead;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("control.sock");
        let (handle, _queue) = handle();
        handle.serve(server::bind(&path).unwrap());
        let flood: Vec<UnixStream> = (0..server::MAX_CONNECTION_THREADS + 1)
            .map(|_| UnixStream::connect(&path).unwrap())
            .collect();
        let t0 = Instant::now();
        let status = client::request(&path, &Request::Status, Duration::from_secs(10))
            .unwrap()
            .unwrap();
        assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
        assert!(status.ok, "{status:?}");
        assert_eq!(status.status.unwrap().mode, "test");
        flood[0]
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut told = String::new();
        std::io::BufReader::new(&flood[0])
            .read_line(&mut told)
            .unwrap();
        assert!(told.contains("waited longest for its request"), "{told}");
    }
}
