//! The control socket: how `asa pin`, `asa unpin` and `asa status` talk to a running agent
//! (`asa run`, or a foreground `asa pin`). This module is the protocol: [`Request`],
//! [`Response`], [`AgentStatus`] and what answers them ([`AgentLink`]).
//!
//! - [`server`]: the agent's side: binding the socket and serving it, every wait on a client
//!   bounded;
//! - [`client`]: the `asa` commands' side: one request, one answer;
//! - [`expert_stats`]: the statistics file an expert keeps, as `asa status` shows it.
//!
//! A Unix stream socket (default `/run/asa/control.sock`, in a 0700 directory, mode 0600);
//! the server also checks the peer's credentials and serves root only. One JSON request per
//! connection, one JSON response line back.

pub mod client;
pub mod expert_stats;
pub mod server;

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use asa_experts::supervisor::StandbyInfo;
use asa_experts::{Active, Catalogue, ScxSnapshot, ScxState, SwitchReport};
use serde::{Deserialize, Serialize};

use crate::decision::engine::{EngineInfo, TickRecord};
use crate::decision::quarantine::QuarantineEntry;

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
    /// List the applications (per-application mode) with their classes.
    Apps,
    /// Pin an application's class (`asa run` only; kept across restarts).
    AppSet {
        /// A pid (its application) or a cgroup path (absolute under the cgroup2 mount, or
        /// relative to it: every application in that cgroup).
        target: String,
        /// A class of the layer plan.
        class: String,
    },
    /// Remove an application's pin.
    AppUnset {
        /// As for [`Request::AppSet`].
        target: String,
    },
}

/// Per-application mode as `asa status` and `asa apps` show it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AppsStatus {
    /// `whole_machine` (one expert for everything) or `per_application` (a layer per class).
    pub mode: String,
    /// The expert running.
    pub expert: String,
    /// In whole-machine mode, the layer-plan expert the decision heads for: the applications
    /// are grouped, classified and hinted ahead of its start (None: nothing walked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ahead_of: Option<String>,
    /// Applications seen at the last walk (per-application mode, or ahead of it).
    pub applications: usize,
    /// Of those, with a class.
    pub with_class: usize,
    /// Pins (the user's and the config file's).
    pub pins: usize,
    /// The application model giving unpinned applications their class (None: pins only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_model: Option<String>,
    /// Why per-application mode is off although the expert takes a layer plan (no BPF, no
    /// bpffs), or why the pins file was not read: said once, the agent runs on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// The applications (only in the answer to [`Request::Apps`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub list: Vec<AppRow>,
}

/// One application in `asa apps`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppRow {
    /// Its cgroup path under the cgroup2 mount (`/` the root).
    pub cgroup: String,
    /// Its cgroup id.
    pub cgroup_id: u64,
    /// Its process group.
    pub pgid: u32,
    /// Its leading process (the process group's leader if alive, else its lowest pid).
    pub leader_pid: u32,
    /// That process's command name.
    pub leader_comm: String,
    /// Threads alive.
    pub threads: u32,
    /// Its class, if any.
    pub class: Option<String>,
    /// `pinned` or `recognised`.
    pub source: Option<String>,
    /// The class's confidence (1 for a pin).
    pub confidence: Option<f64>,
    /// The scheduler layer its threads go to.
    pub layer: String,
    /// Seconds since the agent first saw it.
    pub seen_s: f64,
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
    pub quarantine: Vec<QuarantineEntry>,
    /// Ticks whose decision-log line could not be written (a full disk): deciding goes on.
    #[serde(default)]
    pub unlogged_ticks: u64,
    /// Set while the table leaves nothing to decide (its default expert runs and no class's
    /// vote would move it): the tick length meanwhile, in ms.
    #[serde(default)]
    pub settled_interval_ms: Option<u64>,
    /// Set while the vote is steady (daemon/steady.rs): the class it has held; glances at
    /// /proc stand in for full ticks meanwhile.
    #[serde(default)]
    pub steady_class: Option<String>,
    /// Glances that stood in for full ticks since the agent started.
    #[serde(default)]
    pub glances: u64,
    /// Whole-machine or per-application mode.
    #[serde(default)]
    pub apps: Option<AppsStatus>,
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
            steady_class: None,
            glances: 0,
            apps: None,
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

/// A failed response with `error`.
pub fn refusal(error: impl Into<String>) -> Response {
    Response {
        ok: false,
        error: Some(error.into()),
        status: None,
        switch: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(
            serde_json::to_string(&Request::AppSet {
                target: "42".into(),
                class: "interactive".into()
            })
            .unwrap(),
            r#"{"cmd":"app_set","target":"42","class":"interactive"}"#
        );
    }
}
