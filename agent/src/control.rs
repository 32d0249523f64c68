//! The control socket: how `asa pin`, `asa unpin` and `asa status` talk to a running agent
//! (`asa run`, or a foreground `asa pin`).
//!
//! A Unix stream socket (default `/run/asa/control.sock`, in a 0700 directory, mode 0600);
//! the server also checks the peer's credentials and serves root only. One JSON request per
//! connection, one JSON response line back.
//!
//! Every wait on a client is bounded: a request line is at most [`MAX_REQUEST_BYTES`] and must
//! arrive within [`REQUEST_TIMEOUT`] (else the client gets an error answer and the connection is
//! closed), an answer that the client does not read within [`REQUEST_TIMEOUT`] is dropped, and
//! [`serve`] gives each connection its own thread, at most [`MAX_CONNECTIONS`] at once; when
//! they are all taken a new connection evicts the one that has waited longest for its request,
//! so neither one silent client nor a flood of them holds up another's `status`.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use asa_experts::supervisor::StandbyInfo;
use asa_experts::{Active, Catalogue, ScxSnapshot, ScxState, SwitchReport};

use crate::decision::engine::{EngineInfo, TickRecord};
use serde::{Deserialize, Serialize};

/// Default socket path.
pub const DEFAULT_SOCKET: &str = "/run/asa/control.sock";

/// The socket path: `ASA_SOCKET` or the default.
pub fn socket_path() -> PathBuf {
    std::env::var_os("ASA_SOCKET")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_SOCKET))
}

/// A request to the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum Request {
    /// Report what runs.
    Status,
    /// Run this expert until told otherwise (overrides decisions).
    Pin {
        /// Catalogue name.
        expert: String,
    },
    /// Let the agent decide again.
    Unpin,
}

/// One switch-related thing that happened, with its time.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TimedEvent {
    /// When (ms since the epoch).
    pub at_unix_ms: u64,
    /// What, for humans.
    pub message: String,
}

/// Everything `asa status` shows.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentStatus {
    /// The agent's PID.
    pub pid: u32,
    /// `daemon` (asa run) or `foreground` (asa pin without a daemon).
    pub mode: String,
    /// What the agent believes runs.
    pub active: Active,
    /// The pinned expert, if any.
    pub pinned: Option<String>,
    /// The expert being switched to right now.
    pub switching_to: Option<String>,
    /// The last successful switch.
    pub last_switch: Option<SwitchReport>,
    /// The last failed switch.
    pub last_error: Option<TimedEvent>,
    /// The last thing the supervisor noticed (expert exit, ejection).
    pub last_event: Option<TimedEvent>,
    /// Why the agent runs what it runs (decisions land with the decision engine).
    pub note: String,
    /// The kernel's view, read when the status was asked for.
    pub kernel: Option<ScxSnapshot>,
    /// When the kernel's view was read for this answer (ms since the epoch): the moment the
    /// answer describes, before it travelled back to the asking process.
    #[serde(default)]
    pub kernel_read_unix_ms: Option<u64>,
    /// True when the kernel runs what the agent believes.
    pub consistent: Option<bool>,
    /// The decision engine (`asa run`): its settings and latest decision. None for a
    /// foreground `asa pin`.
    #[serde(default)]
    pub decision: Option<DecisionStatus>,
    /// The hot-standby pool: experts loaded and held at their attach gates.
    #[serde(default)]
    pub standby: StandbyStatus,
}

impl AgentStatus {
    /// The status of this process in `mode`, with `active` running and nothing else known yet
    /// (no pin, switch, error, event, kernel reading, decision or standby).
    pub fn new(mode: &str, active: Active, note: &str) -> Self {
        AgentStatus {
            pid: std::process::id(),
            mode: mode.to_owned(),
            active,
            pinned: None,
            switching_to: None,
            last_switch: None,
            last_error: None,
            last_event: None,
            note: note.to_owned(),
            kernel: None,
            kernel_read_unix_ms: None,
            consistent: None,
            decision: None,
            standby: StandbyStatus::default(),
        }
    }
}

/// The hot-standby pool as `asa status` shows it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StandbyStatus {
    /// At most this many standbys (0: the pool is off).
    pub max: usize,
    /// Memory budget of the pool (KiB of resident plus BPF kernel memory).
    pub memory_budget_kib: u64,
    /// Where the wanted set comes from: `policy` (vote and mapping table), `fixed`
    /// (`--standby-experts`) or `off`.
    pub source: String,
    /// The standbys wanted now, most wanted first.
    pub wanted: Vec<String>,
    /// The standbys now (resident memory read when the status was asked for).
    pub experts: Vec<StandbyInfo>,
    /// Memory of all standbys (KiB): resident plus the kernel memory of their BPF maps and
    /// programs.
    pub memory_kib: u64,
    /// Standbys lost (died, or no longer held at their gate) since the agent started; each
    /// was discarded, never attached, and started again while wanted.
    pub lost: u64,
}

/// The decision engine's part of the status.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DecisionStatus {
    /// Model, mapping, parameters.
    pub engine: EngineInfo,
    /// Ticks decided so far.
    pub ticks: u64,
    /// The latest tick.
    pub last: Option<TickRecord>,
    /// The latest tick on which the policy chose to switch (whatever became of it).
    pub last_switch: Option<TickRecord>,
    /// Experts with failures on record: quarantined ones are skipped by the decision.
    #[serde(default)]
    pub quarantine: Vec<crate::decision::quarantine::QuarantineEntry>,
    /// Ticks whose decision-log line could not be written (a full disk): deciding goes on.
    #[serde(default)]
    pub unlogged_ticks: u64,
    /// Set while the table leaves nothing to decide (its default expert runs and no class's
    /// vote would move it): the tick length meanwhile, in ms.
    #[serde(default)]
    pub settled_interval_ms: Option<u64>,
}

impl DecisionStatus {
    /// Before the first tick.
    pub fn new(engine: EngineInfo) -> Self {
        DecisionStatus {
            engine,
            ticks: 0,
            last: None,
            last_switch: None,
            quarantine: Vec::new(),
            unlogged_ticks: 0,
            settled_interval_ms: None,
        }
    }
}

/// The agent's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Response {
    /// False when the request failed.
    pub ok: bool,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The agent's status after the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<AgentStatus>,
    /// The switch the request caused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch: Option<SwitchReport>,
}

/// Answers one control request.
pub type Answer = Arc<dyn Fn(Request) -> Response + Send + Sync>;

/// Whatever answers the agent's control requests now, replaceable while the socket (and the
/// D-Bus interface) serve: the agent moves through phases (starting, waiting for a foreign
/// scheduler, running, stopping) behind one socket that is bound once, at start.
#[derive(Clone)]
pub struct AgentLink(Arc<RwLock<Answer>>);

impl AgentLink {
    /// A link answering with `answer`.
    pub fn new(answer: impl Fn(Request) -> Response + Send + Sync + 'static) -> Self {
        Self(Arc::new(RwLock::new(Arc::new(answer))))
    }

    /// A link that refuses every request with `why` (until [`AgentLink::set`]).
    pub fn refusing(why: impl Into<String>) -> Self {
        let why = why.into();
        Self::new(move |_| refusal(why.clone()))
    }

    /// From now on, answer with `answer`.
    pub fn set(&self, answer: impl Fn(Request) -> Response + Send + Sync + 'static) {
        *self.0.write().unwrap() = Arc::new(answer);
    }

    /// The agent's answer to `request` (blocks for as long as the request takes: a switch may
    /// take minutes).
    pub fn ask(&self, request: Request) -> Response {
        let answer = self.0.read().unwrap().clone();
        answer(request)
    }
}

/// True when the kernel (`snap`) runs catalogue expert `expert`: EEVDF when no BPF scheduler is
/// attached (state `disabled`), any other expert when one is `enabled` with its ops name. An
/// expert the catalogue does not know never agrees.
pub fn kernel_runs(catalogue: &Catalogue, expert: &str, snap: &ScxSnapshot) -> bool {
    match catalogue.get(expert) {
        Some(e) if e.is_kernel_default() => snap.state == ScxState::Disabled,
        Some(e) => {
            snap.state == ScxState::Enabled && snap.ops.as_deref().is_some_and(|o| e.owns_ops(o))
        }
        None => false,
    }
}

/// Send one request; `Ok(None)` when no agent listens at `path`.
pub fn request(path: &Path, req: &Request, timeout: Duration) -> Result<Option<Response>> {
    let mut stream = match UnixStream::connect(path) {
        Ok(s) => s,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
            ) =>
        {
            return Ok(None)
        }
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => bail!(
            "this command needs root: the agent's control socket {} is for root only (run it with sudo)",
            path.display()
        ),
        Err(e) => return Err(e).with_context(|| format!("connecting to {}", path.display())),
    };
    stream.set_read_timeout(Some(timeout))?;
    let mut line = serde_json::to_string(req)?;
    line.push('\n');
    match stream.write_all(line.as_bytes()) {
        // A busy agent answers as it accepts and closes without reading: its answer is
        // already here even when our request could no longer be sent.
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
            ) => {}
        other => other.with_context(|| format!("sending to {}", path.display()))?,
    }
    let mut reply = String::new();
    BufReader::new(stream)
        .read_line(&mut reply)
        .with_context(|| format!("waiting for the agent's answer on {}", path.display()))?;
    if reply.is_empty() {
        bail!("the agent closed {} without answering", path.display());
    }
    Ok(Some(
        serde_json::from_str(&reply).context("the agent's answer is not valid JSON")?,
    ))
}

/// How long [`bind`] waits for a live control socket to go before calling it another agent's:
/// an agent killed a moment ago still listens until the kernel has torn its process down
/// (its memory first, its file descriptors last: hundreds of milliseconds for an agent with ONNX
/// Runtime loaded under emulation), and a restart (systemd, an operator) may come that soon.
pub const LIVE_SOCKET_GRACE: Duration = Duration::from_secs(3);

/// Bind the control socket: root-only directory and socket; a stale socket (no listener) is
/// replaced; one still listening after [`LIVE_SOCKET_GRACE`] is another agent's: an error.
pub fn bind(path: &Path) -> Result<UnixListener> {
    bind_within(path, LIVE_SOCKET_GRACE)
}

/// [`bind`], waiting at most `grace` for a live socket to go.
pub fn bind_within(path: &Path, grace: Duration) -> Result<UnixListener> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        if dir == Path::new("/run/asa") {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        }
    }
    if path.exists() {
        let deadline = Instant::now() + grace;
        while UnixStream::connect(path).is_ok() {
            if Instant::now() >= deadline {
                bail!(
                    "another agent already serves {} (see `asa status`)",
                    path.display()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        std::fs::remove_file(path).with_context(|| format!("removing stale {}", path.display()))?;
    }
    let listener =
        UnixListener::bind(path).with_context(|| format!("binding {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// The UID of the process at the other end of `stream`.
pub fn peer_uid(stream: &UnixStream) -> Result<u32> {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    let cred = getsockopt(stream, PeerCredentials).context("reading SO_PEERCRED")?;
    Ok(cred.uid())
}

/// The longest request line the agent reads: 64 KiB (a real request is under 100 bytes).
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;
/// How long a client has to send its whole request line, and to read the answer.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections served at once. When every one is taken, a new connection evicts the one that
/// has waited longest for its request, silent ones first ([`serve`]); only when all of them are
/// being answered (a request complete in each: pins waiting for a switch) is a new one told
/// "busy".
pub const MAX_CONNECTIONS: usize = 32;
/// Connection threads at most: the [`MAX_CONNECTIONS`] served, and evicted ones on their way
/// out (each writes one short error and ends at once). The server accepts no more connections
/// while this many threads live: new clients wait in the listen queue, none is refused.
pub const MAX_CONNECTION_THREADS: usize = 2 * MAX_CONNECTIONS;

/// Read one request from `stream`: one line of at most [`MAX_REQUEST_BYTES`], all of it within
/// [`REQUEST_TIMEOUT`].
pub fn read_request(stream: &UnixStream) -> Result<Request> {
    read_request_within(stream, MAX_REQUEST_BYTES, REQUEST_TIMEOUT)
}

/// [`read_request`] with its bounds as arguments. The deadline covers the whole line (a client
/// that trickles a byte now and then is cut off as well as a silent one); at most `max_bytes`
/// + 1 bytes are buffered.
pub fn read_request_within(
    stream: &UnixStream,
    max_bytes: usize,
    timeout: Duration,
) -> Result<Request> {
    read_request_noting(stream, max_bytes, timeout, &AtomicU8::new(SILENT))
}

/// How far a connection's request has come (for eviction: silent ones go first).
const SILENT: u8 = 0;
/// Some bytes of the request came, not the whole line.
const PARTIAL: u8 = 1;
/// The reading is over (a whole line, or an error): the connection is being answered.
const COMPLETE: u8 = 2;

/// [`read_request_within`], keeping `progress` (SILENT, PARTIAL, COMPLETE) up to date.
fn read_request_noting(
    stream: &UnixStream,
    max_bytes: usize,
    timeout: Duration,
    progress: &AtomicU8,
) -> Result<Request> {
    let line = read_line_within(stream, max_bytes, timeout, progress);
    progress.store(COMPLETE, Ordering::Relaxed);
    let line = line?;
    let line = String::from_utf8_lossy(&line);
    serde_json::from_str(&line).with_context(|| {
        let shown: String = line.trim().chars().take(200).collect();
        format!("malformed request {shown:?}")
    })
}

/// One line (without its newline) of at most `max_bytes`, all of it within `timeout`; what came
/// before the end of the stream when no newline came.
fn read_line_within(
    mut stream: &UnixStream,
    max_bytes: usize,
    timeout: Duration,
    progress: &AtomicU8,
) -> Result<Vec<u8>> {
    let deadline = Instant::now() + timeout;
    let mut line: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            bail!(
                "no complete request within {:.0} s: connection closed",
                timeout.as_secs_f64()
            );
        }
        stream.set_read_timeout(Some(left))?;
        let want = chunk.len().min(max_bytes + 1 - line.len());
        let n = match stream.read(&mut chunk[..want]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                bail!(
                    "no complete request within {:.0} s: connection closed",
                    timeout.as_secs_f64()
                )
            }
            Err(e) => return Err(e).context("reading the request"),
        };
        if n > 0 {
            progress.store(PARTIAL, Ordering::Relaxed);
        }
        if let Some(end) = chunk[..n].iter().position(|&b| b == b'\n') {
            line.extend_from_slice(&chunk[..end]);
            break;
        }
        line.extend_from_slice(&chunk[..n]);
        if line.len() > max_bytes {
            bail!("request longer than {max_bytes} bytes: connection closed");
        }
        if n == 0 {
            break; // End of stream: what came is the request.
        }
    }
    Ok(line)
}

/// Write one response to `stream` (given up after [`REQUEST_TIMEOUT`] when the client does not
/// read it).
pub fn write_response(mut stream: &UnixStream, response: &Response) -> Result<()> {
    let mut line = serde_json::to_string(response)?;
    line.push('\n');
    stream.set_write_timeout(Some(REQUEST_TIMEOUT))?;
    stream.write_all(line.as_bytes())?;
    Ok(())
}

/// A failed response with `error`.
pub fn refusal(error: impl Into<String>) -> Response {
    Response {
        ok: false,
        error: Some(error.into()),
        status: None,
        switch: None,
    }
}

/// One accepted connection, as [`serve`] keeps track of it.
struct Connection {
    accepted: Instant,
    /// The stream (a second descriptor), to shut its reading down when evicted.
    stream: UnixStream,
    /// SILENT, PARTIAL or COMPLETE (set by its thread).
    progress: AtomicU8,
    /// Set (under the table's lock) when a newer connection took its place.
    evicted: AtomicBool,
}

/// The connections [`serve`] has threads for.
#[derive(Default)]
struct Connections {
    open: Mutex<Vec<Arc<Connection>>>,
    /// Signalled when a connection's thread ends.
    ended: Condvar,
}

impl Connections {
    /// Makes room for `stream` and registers it; None when every served connection is being
    /// answered (nothing to evict: the caller says "busy"), or `stream` cannot be kept. Waits while
    /// [`MAX_CONNECTION_THREADS`] threads live. With [`MAX_CONNECTIONS`] served, it evicts the
    /// one that has waited longest for its request, silent ones before those that sent part of
    /// one: its reading is shut down, so its thread tells it why and ends.
    fn admit(&self, stream: &UnixStream) -> Option<Arc<Connection>> {
        let connection = Arc::new(Connection {
            accepted: Instant::now(),
            stream: stream.try_clone().ok()?,
            progress: AtomicU8::new(SILENT),
            evicted: AtomicBool::new(false),
        });
        let mut open = self.open.lock().unwrap();
        while open.len() >= MAX_CONNECTION_THREADS {
            open = self.ended.wait(open).unwrap();
        }
        let served = open
            .iter()
            .filter(|c| !c.evicted.load(Ordering::Relaxed))
            .count();
        if served >= MAX_CONNECTIONS {
            let victim = open
                .iter()
                .filter(|c| !c.evicted.load(Ordering::Relaxed))
                .filter(|c| c.progress.load(Ordering::Relaxed) < COMPLETE)
                .min_by_key(|c| (c.progress.load(Ordering::Relaxed), c.accepted))?;
            victim.evicted.store(true, Ordering::Relaxed);
            let _ = victim.stream.shutdown(std::net::Shutdown::Read);
        }
        open.push(connection.clone());
        Some(connection)
    }

    /// `connection`'s thread ends.
    fn end(&self, connection: &Arc<Connection>) {
        self.open
            .lock()
            .unwrap()
            .retain(|c| !Arc::ptr_eq(c, connection));
        self.ended.notify_all();
    }
}

/// Serve `listener` until `stop` is set (checked after each accepted connection: whoever sets
/// it connects once to wake the loop): each connection on its own thread. Only root and the
/// agent's own user are served; `answer` gets each well-formed request, with the bounds of
/// [`read_request`].
///
/// At most [`MAX_CONNECTIONS`] connections are served at once. When they are all taken, a new
/// connection is not refused: it evicts the one that has waited longest for its request (one
/// that sent nothing before one that sent part of a line), which is told so and closed. A flood
/// of clients that connect and say nothing therefore cannot keep `asa status` out: a real
/// client sends its line as it connects, so by the time it would be evicted it has its answer.
/// Only when every served connection is being answered (pins waiting for a switch) is a new one
/// told "busy". Threads are bounded too ([`MAX_CONNECTION_THREADS`]).
pub fn serve(
    listener: UnixListener,
    stop: Arc<AtomicBool>,
    answer: impl Fn(Request) -> Response + Send + Sync + 'static,
) -> std::thread::JoinHandle<()> {
    let answer = Arc::new(answer);
    std::thread::Builder::new()
        .name("control-socket".into())
        .spawn(move || {
            let me = nix::unistd::geteuid().as_raw();
            let connections = Arc::new(Connections::default());
            for stream in listener.incoming() {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let Some(connection) = connections.admit(&stream) else {
                    let busy = refusal(format!(
                        "the agent is busy ({MAX_CONNECTIONS} requests are being answered): try again"
                    ));
                    let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
                    let _ = write_response(&stream, &busy);
                    continue;
                };
                let (answer, open, ours) =
                    (answer.clone(), connections.clone(), connection.clone());
                let spawned = std::thread::Builder::new()
                    .name("control-client".into())
                    .spawn(move || {
                        let response = match peer_uid(&stream) {
                            Ok(uid) if uid == 0 || uid == me => match read_request_noting(
                                &stream,
                                MAX_REQUEST_BYTES,
                                REQUEST_TIMEOUT,
                                &ours.progress,
                            ) {
                                Ok(req) => answer(req),
                                Err(_) if ours.evicted.load(Ordering::Relaxed) => {
                                    refusal(evicted(ours.accepted.elapsed()))
                                }
                                Err(e) => refusal(format!("{e:#}")),
                            },
                            Ok(uid) => refusal(format!("uid {uid} may not control the agent")),
                            Err(e) => refusal(format!("{e:#}")),
                        };
                        if let Err(e) = write_response(&stream, &response) {
                            log::debug!("answering a control request: {e:#}");
                        }
                        open.end(&ours);
                    });
                if let Err(e) = spawned {
                    log::warn!("no thread for a control connection: {e}");
                    connections.end(&connection);
                }
            }
        })
        .expect("spawning the control socket thread")
}

/// What an evicted connection is told.
fn evicted(waited: Duration) -> String {
    format!(
        "closed without an answer: all {MAX_CONNECTIONS} of the agent's connections were taken and \
         this one had waited longest for its request ({:.1} s); send the request as you connect",
        waited.as_secs_f64()
    )
}

/// Stops a [`serve`] loop: sets `stop` and connects to `path` once to wake it.
pub fn stop_serving(path: &Path, stop: &AtomicBool, server: std::thread::JoinHandle<()>) {
    stop.store(true, Ordering::Relaxed);
    let _ = UnixStream::connect(path);
    let _ = server.join();
}

/// The statistics an expert keeps in its catalogue `stats_file` (scx_gru:
/// `/run/scx_gru/stats.json`), as `asa status` shows them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExpertStats {
    /// The expert (catalogue name).
    pub expert: String,
    /// The file read.
    pub file: PathBuf,
    /// Seconds since the file was last written.
    pub age_s: Option<f64>,
    /// False when the file was written before the expert last started (a previous run's
    /// numbers, or the new run has not written yet).
    pub current: bool,
    /// The file's JSON object; None when it could not be read (see `error`).
    pub stats: Option<serde_json::Value>,
    /// Why the file could not be read.
    pub error: Option<String>,
}

/// Read `expert`'s stats file, if the catalogue declares one. `since_unix_ms` is when the
/// expert started (from the agent), to tell this run's numbers from an earlier run's.
pub fn read_expert_stats(
    expert: &asa_experts::Expert,
    since_unix_ms: Option<u64>,
) -> Option<ExpertStats> {
    let file = expert.stats_file.clone()?;
    let mut out = ExpertStats {
        expert: expert.name.clone(),
        file: file.clone(),
        age_s: None,
        current: false,
        stats: None,
        error: None,
    };
    let read = || -> Result<(std::time::SystemTime, serde_json::Value)> {
        let modified = std::fs::metadata(&file)
            .and_then(|m| m.modified())
            .with_context(|| format!("reading {}", file.display()))?;
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("reading {}", file.display()))?;
        let value: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not JSON", file.display()))?;
        if !value.get("schema").is_some_and(|s| s.is_string()) {
            bail!("{} has no \"schema\" key", file.display());
        }
        Ok((modified, value))
    };
    match read() {
        Ok((modified, value)) => {
            let now = std::time::SystemTime::now();
            out.age_s = Some(
                now.duration_since(modified)
                    .unwrap_or_default()
                    .as_secs_f64(),
            );
            let modified_ms = asa_experts::supervisor::unix_ms(modified);
            out.current = since_unix_ms.is_none_or(|since| modified_ms >= since);
            out.stats = Some(value);
        }
        Err(e) => out.error = Some(format!("{e:#}")),
    }
    Some(out)
}

/// `key=value` for every number, string or boolean in a JSON object (nested objects are
/// skipped; [`format_expert_stats`] prints them on their own lines).
fn scalar_fields(object: &serde_json::Map<String, serde_json::Value>) -> String {
    object
        .iter()
        .filter_map(|(k, v)| match v {
            serde_json::Value::Number(n) => Some(format!("{k}={n}")),
            serde_json::Value::String(s) => Some(format!("{k}={s}")),
            serde_json::Value::Bool(b) => Some(format!("{k}={b}")),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The lines `asa status` prints for an expert's stats.
pub fn format_expert_stats(s: &ExpertStats) -> Vec<String> {
    let mut lines = Vec::new();
    let Some(serde_json::Value::Object(obj)) = &s.stats else {
        lines.push(format!(
            "expert stats: {}: {}",
            s.expert,
            s.error.as_deref().unwrap_or("not a JSON object")
        ));
        return lines;
    };
    lines.push(format!(
        "expert stats: {} ({}, written {:.1} s ago{})",
        s.expert,
        s.file.display(),
        s.age_s.unwrap_or(f64::NAN),
        if s.current {
            ""
        } else {
            ", BEFORE the expert started: not this run's numbers"
        }
    ));
    lines.push(format!("              {}", scalar_fields(obj)));
    for (k, v) in obj {
        if let serde_json::Value::Object(inner) = v {
            lines.push(format!("              {k}: {}", scalar_fields(inner)));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expert_stats_are_read_and_dated() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("stats.json");
        let mut gru = asa_experts::Catalogue::builtin()
            .get("gru")
            .unwrap()
            .clone();
        gru.stats_file = Some(file.clone());
        // No file yet: an error that names it.
        let missing = read_expert_stats(&gru, None).unwrap();
        assert!(missing.stats.is_none());
        assert!(missing.error.unwrap().contains("stats.json"));
        std::fs::write(
            &file,
            r#"{"schema":"asa.gru-stats","mode":"model","predictions_applied":12,
               "user":{"inferences":5,"inference_us_p99":40.5},"bpf":{"nr_events":7}}"#,
        )
        .unwrap();
        let now = asa_experts::supervisor::unix_ms(std::time::SystemTime::now());
        let s = read_expert_stats(&gru, Some(now - 60_000)).unwrap();
        assert!(s.current, "{s:?}");
        assert_eq!(s.stats.as_ref().unwrap()["predictions_applied"], 12);
        let text = format_expert_stats(&s).join("\n");
        assert!(text.contains("mode=model predictions_applied=12"), "{text}");
        assert!(
            text.contains("user: inference_us_p99=40.5 inferences=5"),
            "{text}"
        );
        assert!(text.contains("bpf: nr_events=7"), "{text}");
        // Written before the expert started: flagged.
        let old = read_expert_stats(&gru, Some(now + 60_000)).unwrap();
        assert!(!old.current);
        assert!(format_expert_stats(&old)
            .join("\n")
            .contains("not this run's numbers"));
        // Not a stats file.
        std::fs::write(&file, "[1, 2]").unwrap();
        assert!(read_expert_stats(&gru, None)
            .unwrap()
            .error
            .unwrap()
            .contains("no \"schema\""));
        // Experts without a stats file have none.
        let bpfland = asa_experts::Catalogue::builtin()
            .get("bpfland")
            .unwrap()
            .clone();
        assert!(read_expert_stats(&bpfland, None).is_none());
    }

    #[test]
    fn requests_have_a_stable_wire_format() {
        assert_eq!(
            serde_json::to_string(&Request::Pin {
                expert: "lavd".into()
            })
            .unwrap(),
            r#"{"cmd":"pin","expert":"lavd"}"#
        );
        assert_eq!(
            serde_json::from_str::<Request>(r#"{"cmd":"status"}"#).unwrap(),
            Request::Status
        );
        assert!(serde_json::from_str::<Request>(r#"{"cmd":"reboot"}"#).is_err());
    }

    #[test]
    fn no_listener_means_no_agent_and_stale_sockets_are_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sock");
        assert!(request(&path, &Request::Status, Duration::from_secs(1))
            .unwrap()
            .is_none());
        let first = bind(&path).unwrap();
        // A listener still live after the grace refuses a second agent.
        assert!(bind_within(&path, Duration::from_millis(200))
            .unwrap_err()
            .to_string()
            .contains("another agent"));
        drop(first);
        // The file is left behind but nobody listens: it is replaced.
        let _second = bind(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    /// An agent killed a moment ago listens until its process is torn down: a new agent started
    /// at once waits for its socket to go instead of refusing to start.
    #[test]
    fn a_socket_that_goes_within_the_grace_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sock");
        let dying = bind(&path).unwrap();
        let closer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            drop(dying);
        });
        let started = Instant::now();
        let _new = bind_within(&path, Duration::from_secs(3)).unwrap();
        assert!(started.elapsed() >= Duration::from_millis(250));
        closer.join().unwrap();
    }

    /// A server answering `status` with an empty ok response.
    fn status_server(path: &Path) -> (Arc<AtomicBool>, std::thread::JoinHandle<()>) {
        let stop = Arc::new(AtomicBool::new(false));
        let server = serve(bind(path).unwrap(), stop.clone(), |req| match req {
            Request::Status => Response {
                ok: true,
                error: None,
                status: None,
                switch: None,
            },
            _ => refusal("status only"),
        });
        (stop, server)
    }

    /// A server that waited for a silent client would answer after [`REQUEST_TIMEOUT`]; half
    /// of it tells the design apart from a loaded test machine (issue 32's "within 1 s" is
    /// measured in the lab VM by the fault suite's flood row).
    fn answered_without_waiting_for_a_silent_client(t0: Instant) {
        let took = t0.elapsed();
        eprintln!("answered in {took:?}");
        assert!(took < REQUEST_TIMEOUT / 2, "{took:?}");
    }

    #[test]
    fn a_silent_client_does_not_delay_another_clients_status() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sock");
        let (stop, server) = status_server(&path);
        // Three clients connect and say nothing (one half of a line, no newline).
        let silent: Vec<UnixStream> = (0..3)
            .map(|_| UnixStream::connect(&path).unwrap())
            .collect();
        (&silent[0]).write_all(br#"{"cmd":"sta"#).unwrap();
        let t0 = Instant::now();
        let resp = request(&path, &Request::Status, Duration::from_secs(5))
            .unwrap()
            .unwrap();
        assert!(resp.ok);
        answered_without_waiting_for_a_silent_client(t0);
        // The silent ones are answered with an error and closed after REQUEST_TIMEOUT.
        let mut reply = String::new();
        BufReader::new(&silent[1]).read_line(&mut reply).unwrap();
        assert!(reply.contains("no complete request within 5 s"), "{reply}");
        let waited = t0.elapsed();
        assert!(
            (Duration::from_secs(4)..Duration::from_secs(7)).contains(&waited),
            "{waited:?}"
        );
        stop_serving(&path, &stop, server);
    }

    #[test]
    fn an_overlong_request_line_is_refused_and_the_connection_closed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sock");
        let (stop, server) = status_server(&path);
        let stream = UnixStream::connect(&path).unwrap();
        let writer = stream.try_clone().unwrap();
        // 64 MiB without a newline; the server stops reading at 64 KiB + 1 and closes, so this
        // write fails part-way (EPIPE/ECONNRESET), which is the point.
        let flood = std::thread::spawn(move || {
            let block = vec![b'x'; 1 << 20];
            let mut sent = 0usize;
            for _ in 0..64 {
                match (&writer).write_all(&block) {
                    Ok(()) => sent += block.len(),
                    Err(_) => break,
                }
            }
            sent
        });
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut reply = String::new();
        BufReader::new(&stream).read_line(&mut reply).unwrap();
        let resp: Response = serde_json::from_str(&reply).unwrap();
        assert!(!resp.ok);
        assert!(
            resp.error
                .as_deref()
                .unwrap()
                .contains("request longer than 65536 bytes"),
            "{reply}"
        );
        let sent = flood.join().unwrap();
        assert!(sent < 64 << 20, "the server read all {sent} bytes");
        // The server still answers.
        assert!(
            request(&path, &Request::Status, Duration::from_secs(5))
                .unwrap()
                .unwrap()
                .ok
        );
        stop_serving(&path, &stop, server);
    }

    /// The deadline is for the whole line: a byte every 50 ms does not keep a 300 ms read open.
    #[test]
    fn a_trickling_client_is_cut_off_at_the_deadline() {
        let (a, b) = UnixStream::pair().unwrap();
        let trickle = std::thread::spawn(move || {
            for _ in 0..40 {
                if (&b).write_all(b" ").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let t0 = Instant::now();
        let err = read_request_within(&a, 1024, Duration::from_millis(300)).unwrap_err();
        assert!(err.to_string().contains("no complete request"), "{err}");
        assert!(
            t0.elapsed() < Duration::from_millis(600),
            "{:?}",
            t0.elapsed()
        );
        drop(a);
        trickle.join().unwrap();
        // A line within the bounds is read; one byte over is refused.
        let (a, b) = UnixStream::pair().unwrap();
        (&b).write_all(b"{\"cmd\":\"status\"}\n").unwrap();
        assert_eq!(
            read_request_within(&a, 16, Duration::from_secs(1)).unwrap(),
            Request::Status
        );
        (&b).write_all(b"{\"cmd\":\"status\"}\n").unwrap();
        let err = read_request_within(&a, 15, Duration::from_secs(1)).unwrap_err();
        assert!(err.to_string().contains("longer than 15 bytes"), "{err}");
    }

    /// Reads one line from `stream` within `timeout`.
    fn line_within(stream: &UnixStream, timeout: Duration) -> String {
        stream.set_read_timeout(Some(timeout)).unwrap();
        let mut reply = String::new();
        BufReader::new(stream).read_line(&mut reply).unwrap();
        reply
    }

    /// Bytes written to `stream` that its peer has not read yet (SIOCOUTQ).
    fn unread_by_peer(stream: &UnixStream) -> i32 {
        use std::os::fd::AsRawFd;
        let mut queued: libc::c_int = 0;
        // SAFETY: SIOCOUTQ writes one int through the pointer, which outlives the call.
        let rc = unsafe { libc::ioctl(stream.as_raw_fd(), libc::TIOCOUTQ, &mut queued) };
        assert_eq!(rc, 0, "SIOCOUTQ: {}", std::io::Error::last_os_error());
        queued
    }

    /// True when `stream` has nothing to read now (the server neither answered nor closed it).
    fn nothing_to_read(stream: &UnixStream) -> bool {
        stream.set_nonblocking(true).unwrap();
        let result = (&*stream).read(&mut [0u8; 1]);
        stream.set_nonblocking(false).unwrap();
        matches!(result, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
    }

    /// With every slot taken by clients that say nothing, a new client is not refused: it
    /// evicts the one that has waited longest, silent ones before one that sent part of a line.
    /// 100 clients hold connections (one with half a request, connected first); `status` is
    /// answered at once; the 69 oldest silent ones were told why they were closed, while the
    /// partial one and the 30 newest silent ones are still held (32 in all, with `status`).
    #[test]
    fn a_new_client_evicts_the_longest_silent_one_instead_of_being_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sock");
        let (stop, server) = status_server(&path);
        let partial = UnixStream::connect(&path).unwrap();
        (&partial).write_all(br#"{"cmd":"sta"#).unwrap();
        // The server has read the half line (else, on a loaded machine, it is still "silent"
        // when the evictions start, and the oldest).
        let t0 = Instant::now();
        while unread_by_peer(&partial) > 0 && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(20));
        let silent: Vec<UnixStream> = (0..99)
            .map(|_| UnixStream::connect(&path).unwrap())
            .collect();
        let t0 = Instant::now();
        let resp = request(&path, &Request::Status, Duration::from_secs(5))
            .unwrap()
            .unwrap();
        assert!(resp.ok, "{resp:?}");
        answered_without_waiting_for_a_silent_client(t0);
        // Connections are accepted in order: all 100 were when `status` was.
        let evicted = 100 + 1 - MAX_CONNECTIONS;
        assert!(nothing_to_read(&partial), "the partial request was evicted");
        for (i, held) in silent.iter().enumerate().skip(evicted) {
            assert!(nothing_to_read(held), "silent client {i} was evicted");
        }
        for (i, gone) in silent.iter().enumerate().take(evicted) {
            let reply = line_within(gone, Duration::from_secs(5));
            let resp: Response = serde_json::from_str(&reply)
                .unwrap_or_else(|e| panic!("silent client {i}: {e}: {reply:?}"));
            let error = resp.error.unwrap();
            assert!(
                !resp.ok && error.contains("had waited longest for its request"),
                "silent client {i}: {error}"
            );
        }
        stop_serving(&path, &stop, server);
    }

    /// "busy" is left for one case: every slot answers a request (here 32 pins held inside the
    /// answer, as behind a slow switch). A new client, silent or not, is then told at once;
    /// once the pins are answered, `status` is served again.
    #[test]
    fn only_a_full_house_of_requests_being_answered_makes_the_agent_busy() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sock");
        let stop = Arc::new(AtomicBool::new(false));
        let (entered, pins_in) = std::sync::mpsc::channel::<()>();
        let entered = Mutex::new(entered);
        let gate = Arc::new((Mutex::new(false), Condvar::new()));
        let held = gate.clone();
        let server = serve(bind(&path).unwrap(), stop.clone(), move |req| match req {
            Request::Pin { .. } => {
                entered.lock().unwrap().send(()).unwrap();
                let (open, opened) = &*held;
                let _open = opened
                    .wait_while(open.lock().unwrap(), |open| !*open)
                    .unwrap();
                refusal("released")
            }
            _ => Response {
                ok: true,
                error: None,
                status: None,
                switch: None,
            },
        });
        let pins: Vec<_> = (0..MAX_CONNECTIONS)
            .map(|_| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let pin = Request::Pin {
                        expert: "lavd".into(),
                    };
                    request(&path, &pin, Duration::from_secs(30))
                        .unwrap()
                        .unwrap()
                })
            })
            .collect();
        for _ in 0..MAX_CONNECTIONS {
            pins_in.recv_timeout(Duration::from_secs(30)).unwrap();
        }
        let t0 = Instant::now();
        let busy = request(&path, &Request::Status, Duration::from_secs(5))
            .unwrap()
            .unwrap();
        assert!(
            !busy.ok && busy.error.as_deref().unwrap().contains("busy"),
            "{busy:?}"
        );
        let quiet = UnixStream::connect(&path).unwrap();
        assert!(line_within(&quiet, Duration::from_secs(5)).contains("busy"));
        answered_without_waiting_for_a_silent_client(t0);
        *gate.0.lock().unwrap() = true;
        gate.1.notify_all();
        for pin in pins {
            assert_eq!(pin.join().unwrap().error.as_deref(), Some("released"));
        }
        let status = request(&path, &Request::Status, Duration::from_secs(5))
            .unwrap()
            .unwrap();
        assert!(status.ok, "{status:?}");
        stop_serving(&path, &stop, server);
    }

    /// A busy agent answers as it accepts and closes without reading the request: the client
    /// still gets that answer when its own write fails (here a 4 MiB line, far more than the
    /// socket buffers, so the write is still under way when the server closes).
    #[test]
    fn an_answer_sent_before_the_request_was_read_is_still_received() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sock");
        let listener = bind(&path).unwrap();
        let server = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            write_response(&stream, &refusal("the agent is busy: try again")).unwrap();
        });
        let pin = Request::Pin {
            expert: "x".repeat(4 << 20),
        };
        let resp = request(&path, &pin, Duration::from_secs(5))
            .unwrap()
            .expect("an answer");
        assert!(!resp.ok && resp.error.unwrap().contains("busy"));
        server.join().unwrap();
    }

    #[test]
    fn round_trip_through_a_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sock");
        let listener = bind(&path).unwrap();
        let server = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            assert_eq!(peer_uid(&stream).unwrap(), nix::unistd::geteuid().as_raw());
            let req = read_request(&stream).unwrap();
            assert_eq!(req, Request::Unpin);
            write_response(
                &stream,
                &Response {
                    ok: false,
                    error: Some("nope".into()),
                    status: None,
                    switch: None,
                },
            )
            .unwrap();
        });
        let resp = request(&path, &Request::Unpin, Duration::from_secs(5))
            .unwrap()
            .unwrap();
        server.join().unwrap();
        assert!(!resp.ok);
        assert_eq!(resp.error.as_deref(), Some("nope"));
    }
}
