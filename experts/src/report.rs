//! What the supervisor reports: how a switch went ([`SwitchReport`], or why it did not happen,
//! [`SwitchError`]), what it believes runs ([`Active`]) and what it noticed between switches
//! ([`SupervisorEvent`]). Plain data, shared by the supervisor and its standby pool.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::sched_ext::ScxState;

/// Milliseconds since the Unix epoch.
pub fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis() as u64
}

/// Milliseconds of a duration, for reports and logs.
pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// What one switch did and how long each step took.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SwitchReport {
    /// Expert that ran before.
    pub from: String,
    /// Expert that runs now.
    pub to: String,
    /// Time the new expert spent loading behind the attach gate while the old one still ran
    /// (ms); absent for break-before-make switches.
    #[serde(default)]
    pub prepare_ms: Option<f64>,
    /// SIGINT to `state=disabled` of the old expert (ms); absent when EEVDF was running.
    pub stop_ms: Option<f64>,
    /// Process start to `state=enabled` of the new expert (ms); absent when switching to EEVDF.
    pub start_ms: Option<f64>,
    /// Time the machine spent on EEVDF between the two experts (ms): old `disabled` to new
    /// `enabled`. Absent when either side is EEVDF.
    pub eevdf_gap_ms: Option<f64>,
    /// The whole switch (ms).
    pub total_ms: f64,
    /// `root/ops` after the switch.
    pub ops: Option<String>,
    /// `enable_seq` after the switch.
    pub enable_seq: u64,
    /// When the switch finished (ms since the epoch).
    pub at_unix_ms: u64,
    /// True when nothing had to change.
    pub no_op: bool,
    /// True when the new expert was a hot standby, loaded beforehand and held at its gate
    /// (`prepare_ms` is then how long the switch waited for it, `start_ms` gate release to
    /// `state=enabled`).
    #[serde(default)]
    pub standby: bool,
}

impl SwitchReport {
    /// `bpfland -> lavd in 1234 ms (EEVDF gap 56 ms)` (gap `-` when nothing ran before).
    pub fn summary(&self) -> String {
        format!(
            "{} -> {} in {:.0} ms (EEVDF gap {})",
            self.from,
            self.to,
            self.total_ms,
            self.eevdf_gap_ms
                .map(|g| format!("{g:.0} ms"))
                .unwrap_or_else(|| "-".into())
        )
    }
}

/// Why a switch did not happen.
#[derive(Debug, thiserror::Error)]
pub enum SwitchError {
    /// Rejected before anything was touched: the running scheduler is unchanged.
    #[error("{cause:#} (nothing was changed: {active} is still running)")]
    Rejected {
        /// What was wrong.
        cause: anyhow::Error,
        /// The scheduler that keeps running.
        active: String,
    },
    /// The target expert did not come up; `active` says what runs now.
    #[error("switch to {target} failed: {cause:#}; {recovery}")]
    Failed {
        /// The expert that was asked for.
        target: String,
        /// What went wrong.
        cause: anyhow::Error,
        /// The scheduler running after the failure.
        active: String,
        /// What was done about it, for humans.
        recovery: String,
    },
}

impl SwitchError {
    /// The scheduler the machine runs after this error.
    pub fn active(&self) -> &str {
        match self {
            Self::Rejected { active, .. } | Self::Failed { active, .. } => active,
        }
    }
}

/// Something the supervisor noticed between switches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SupervisorEvent {
    /// The expert process ended on its own (crash, kill, exit); the machine is on EEVDF.
    ExpertExited {
        /// The expert that ended.
        expert: String,
        /// How it ended.
        status: String,
        /// Last lines it printed.
        output_tail: Vec<String>,
    },
    /// The kernel detached the expert while its process lives (watchdog, error exit).
    Ejected {
        /// The expert that was detached.
        expert: String,
        /// The kernel state seen.
        state: ScxState,
    },
    /// An ejected expert attached itself again (the scx schedulers restart after some errors).
    Reattached {
        /// The expert.
        expert: String,
        /// The new `enable_seq`.
        enable_seq: u64,
    },
    /// A hot standby ended or is no longer held at its gate: it was discarded (never attached)
    /// and will be started again while it is wanted.
    StandbyLost {
        /// The expert.
        expert: String,
        /// Its PID.
        pid: u32,
        /// What happened to it.
        status: String,
        /// True when it had reached the gate.
        parked: bool,
        /// Last lines it printed.
        output_tail: Vec<String>,
    },
}

impl std::fmt::Display for SupervisorEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ExpertExited { expert, status, .. } => {
                write!(
                    f,
                    "expert {expert} ended ({status}); the machine is on EEVDF"
                )
            }
            Self::Ejected { expert, state } => write!(
                f,
                "the kernel detached {expert} (state {state}); the machine is on EEVDF"
            ),
            Self::Reattached { expert, enable_seq } => {
                write!(
                    f,
                    "{expert} attached itself again (enable_seq {enable_seq})"
                )
            }
            Self::StandbyLost {
                expert,
                pid: 0,
                status,
                ..
            } => write!(
                f,
                "standby {expert} was not started ({status}); it is tried again while wanted"
            ),
            Self::StandbyLost {
                expert,
                pid,
                status,
                parked,
                ..
            } => write!(
                f,
                "standby {expert} (pid {pid}, {}) was lost ({status}); discarded, never attached; it is started again while wanted",
                if *parked { "parked" } else { "loading" }
            ),
        }
    }
}

/// What the supervisor believes is running, and since when.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Active {
    /// Catalogue name of the running expert (`eevdf` when none).
    pub expert: String,
    /// Since when (ms since the epoch).
    pub since_unix_ms: u64,
    /// PID of the expert process.
    pub pid: Option<u32>,
}
