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

    /// A glance stood in for a full tick: counted in `asa status`.
    pub(super) fn note_glance(&self) {
        let update = |d: &mut DecisionStatus| d.glances += 1;
        match self {
            Sink::Controller(h) => h.update_decision(update),
            Sink::DryRun(s) => {
                if let Some(d) = s.lock().unwrap().decision.as_mut() {
                    update(d);
                }
            }
        }
    }

    /// The tick's `record` into `asa status`, with the quarantine, the decision log's unwritten
    /// ticks, the settled tick length (None: not settled) and the class of a steady vote
    /// (None: not steady).
    pub(super) fn publish(
        &self,
        record: &TickRecord,
        quarantine: Vec<QuarantineEntry>,
        unlogged: u64,
        settled: Option<Duration>,
        steady: Option<&str>,
    ) {
        let update = |d: &mut DecisionStatus| {
            d.ticks += 1;
            d.settled_interval_ms = settled.map(|s| s.as_millis() as u64);
            d.steady_class = steady.map(str::to_string);
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
