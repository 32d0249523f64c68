//! Where the decision loop reads the agent's state and publishes its decisions: the
//! controller (`asa run`) or the dry run's own status.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::action::controller::ControllerHandle;
use crate::control::{AgentStatus, DecisionStatus};
use crate::decision::engine::{Outcome, TickRecord};
use crate::decision::quarantine::QuarantineEntry;

/// Where the decision loop gets the agent's state from and publishes its decisions.
pub(super) enum Sink {
    /// `asa run`: the controller's snapshot and decision status.
    Controller(ControllerHandle),
    /// `--dry-run`: the status the control socket answers.
    DryRun(Arc<Mutex<AgentStatus>>),
}

impl Sink {
    /// The agent's status now (the controller's cached snapshot).
    pub(super) fn status(&self) -> AgentStatus {
        match self {
            Sink::Controller(h) => h.status_cached(),
            Sink::DryRun(s) => s.lock().unwrap().clone(),
        }
    }

    /// The tick's `record` into `asa status`, with the quarantine, the decision log's unwritten
    /// ticks and the settled tick length (None: not settled).
    pub(super) fn publish(
        &self,
        record: &TickRecord,
        quarantine: Vec<QuarantineEntry>,
        unlogged: u64,
        settled: Option<Duration>,
    ) {
        let update = |d: &mut DecisionStatus| {
            d.ticks += 1;
            d.settled_interval_ms = settled.map(|s| s.as_millis() as u64);
            d.unlogged_ticks = unlogged;
            d.quarantine = quarantine;
            d.last = Some(record.clone());
            if record.outcome != Outcome::Stay {
                d.last_switch = Some(record.clone());
            }
        };
        match self {
            Sink::Controller(h) => h.update_decision(update),
            Sink::DryRun(s) => {
                let mut st = s.lock().unwrap();
                if let Some(d) = st.decision.as_mut() {
                    update(d);
                }
                if record.outcome == Outcome::WouldSwitch {
                    if let Some(target) = &record.decision.target_expert {
                        st.note = format!(
                            "dry run: decisions are logged, nothing is switched (the agent would run {target})"
                        );
                    }
                }
            }
        }
    }
}
