//! One tick's decision as the policy ([`super::policy`]) records it: what to do ([`Action`]),
//! why ([`Reason`]), and the [`DecisionRecord`] the daemon logs as a JSON line (schema
//! [`DECISION_SCHEMA`] v[`DECISION_VERSION`]) and `asa status` shows as one line
//! ([`DecisionRecord::summary`]). Pure data: the policy fills it, nothing here decides.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Schema name of a decision record.
pub const DECISION_SCHEMA: &str = "asa.decision";
/// Schema version of a decision record.
pub const DECISION_VERSION: u32 = 1;

/// What the caller should do after a tick.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Keep the current expert.
    Stay,
    /// Switch to `DecisionRecord::target_expert`.
    Switch,
}

/// Why the policy did what it did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reason {
    /// The window is empty or no probability in it is above θ.
    NoDecision,
    /// The vote is not clear enough.
    NotConfident {
        /// The vote's margin.
        margin: f64,
        /// Required margin.
        min_margin: f64,
        /// The vote's support.
        support: f64,
        /// Required support.
        min_support: f64,
    },
    /// The mapping table has no usable expert for the voted class.
    ClassNotMapped,
    /// The voted class's expert is already running.
    AlreadyRunning,
    /// The mapping table's switch cost (calibration stage 2) is larger than what the switch
    /// gains over the horizon: gain · (horizon − switch_s) / run_s ≤ cost, where gain is the
    /// class's score of the target minus that of the running expert, switch_s how long the
    /// switch takes (the gain starts after it) and cost the UX score one switch costs in a run
    /// of run_s seconds.
    NotWorthSwitching {
        /// Score gain of the target over the running expert for the voted class.
        gain: f64,
        /// Score cost of this switch.
        cost: f64,
        /// Run length the scores and the cost were measured over (s).
        run_s: f64,
        /// Horizon (s).
        horizon_s: f64,
        /// Measured duration of the switch (s; 0 when the table has none).
        #[serde(default)]
        switch_s: f64,
    },
    /// The class's first-ranked expert beats the running one by no more than calibration can
    /// tell from noise: gain ≤ threshold = max(the class's `noise`, 2 standard errors of the
    /// difference of the two scores, from their spreads and runs). A switch has a cost, so a
    /// lead within the noise is not worth one (the rule calibration applies to the kernel
    /// default, applied to every pair).
    WithinNoise {
        /// Score gain of the target over the running expert for the voted class.
        gain: f64,
        /// The gain a switch needs.
        threshold: f64,
    },
    /// A confident vote for a class whose first-ranked expert does not pay for its switch from
    /// the running one, while a lower-ranked expert does and pays more: the switch goes to
    /// `DecisionRecord::target_expert`, the best net of the switching penalty. Net value of a
    /// switch A → B for class c: (score_c(B) − score_c(A)) · horizon / run_s − cost(A→B).
    SwitchNetOfCost {
        /// The class's first-ranked usable expert.
        preferred: String,
        /// Net value of switching to `preferred` (≤ the chosen one's).
        preferred_net: f64,
        /// Net value of the switch made.
        net: f64,
    },
    /// An expert the agent itself was loading (a hot standby verifying its BPF programs) ran
    /// during this tick's sample: the sample describes the agent's work as much as the
    /// workload's, so the tick is left out of the vote and nothing is decided on it.
    OwnWork {
        /// The expert that was loading.
        expert: String,
        /// Such ticks in a row, this one included.
        ticks: u32,
    },
    /// The last switch was too recent.
    CoolingDown {
        /// Seconds until a switch is allowed.
        remaining_s: f64,
    },
    /// A confident vote for a class whose expert is not running, outside the cooldown.
    Switch,
    /// The vote has been unsure (no vote, or not confident) since the agent started, or for
    /// [`PolicyConfig::fallback_after_ticks`](super::policy::PolicyConfig::fallback_after_ticks) ticks while leading (or, without a vote, leaning)
    /// to a class the running expert does not serve first: the policy returns to the table's
    /// default expert, the best over all classes. Such a switch does not start the cooldown, so the
    /// first confident vote is followed at once.
    Fallback {
        /// Consecutive unsure ticks.
        unsure_ticks: u32,
    },
}

/// One tick's decision, for the log (one JSON line) and `asa status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    /// [`DECISION_SCHEMA`].
    pub schema: String,
    /// [`DECISION_VERSION`].
    pub version: u32,
    /// Tick number since the policy started (1 = first).
    pub tick: u64,
    /// The caller's monotonic time of the tick, in seconds.
    pub at_s: f64,
    /// Class → classifier probability this tick.
    pub probabilities: BTreeMap<String, f32>,
    /// Class → Algorithm 1 score over the window.
    pub vote_scores: BTreeMap<String, f64>,
    /// The voted class, if any.
    pub voted_class: Option<String>,
    /// The vote's margin (see [`Vote::margin`](super::voting::Vote::margin)).
    pub margin: f64,
    /// The vote's support (see [`Vote::support`](super::voting::Vote::support)).
    pub support: f64,
    /// Expert running before this tick's decision (as the policy knows it).
    pub current_expert: Option<String>,
    /// Expert the mapping table gives for the voted class.
    pub target_expert: Option<String>,
    /// Set when the vote over classes was not confident but the vote over the experts the
    /// classes go to first was ([`super::policy`]'s module doc): the expert that vote chose. The voted
    /// class, margin and support are then that vote's (the class: the one of the expert's
    /// classes the window favours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voted_expert: Option<String>,
    /// What to do.
    pub action: Action,
    /// Why.
    pub reason: Reason,
    /// Experts quarantined at this tick (skipped by the decision) and the seconds left.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub quarantined: BTreeMap<String, f64>,
}

impl DecisionRecord {
    /// The class this tick's classifier output favoured on its own (None: no output).
    pub fn most_probable_class(&self) -> Option<&str> {
        self.probabilities
            .iter()
            .max_by(|(_, a), (_, b)| a.total_cmp(b))
            .map(|(class, _)| class.as_str())
    }

    /// One human line: `tick 12: class game+kernel_build (margin 0.41, support 0.73) → bpfland: switch`.
    pub fn summary(&self) -> String {
        let why = match &self.reason {
            Reason::NoDecision => "no decision (no probability above θ in the window)".to_string(),
            Reason::NotConfident {
                margin,
                min_margin,
                support,
                min_support,
            } => format!(
                "stay: vote not confident (margin {margin:.2} of {min_margin:.2} needed, support {support:.2} of {min_support:.2})"
            ),
            Reason::ClassNotMapped => "stay: no usable expert mapped for this class".to_string(),
            Reason::AlreadyRunning => "stay: already running".to_string(),
            Reason::OwnWork { expert, ticks } => format!(
                "stay: the agent was loading {expert} as a hot standby during this sample, left out of the vote ({ticks} in a row)"
            ),
            Reason::CoolingDown { remaining_s } => {
                format!("stay: cooling down ({remaining_s:.1} s left)")
            }
            Reason::NotWorthSwitching {
                gain,
                cost,
                run_s,
                horizon_s,
                switch_s,
            } => format!(
                "stay: not worth a switch (gain {gain:.3} × ({horizon_s:.0} s − {switch_s:.1} s switching) / {run_s:.0} s ≤ cost {cost:.3})"
            ),
            Reason::WithinNoise { gain, threshold } => format!(
                "stay: the gain {gain:.3} is within the calibration noise ({threshold:.3} needed)"
            ),
            Reason::Switch => format!(
                "switch from {}",
                self.current_expert.as_deref().unwrap_or("(unknown)")
            ),
            Reason::Fallback { unsure_ticks } => format!(
                "switch from {} to the table's default expert: no confident vote for {unsure_ticks} tick(s)",
                self.current_expert.as_deref().unwrap_or("(unknown)")
            ),
            Reason::SwitchNetOfCost {
                preferred,
                preferred_net,
                net,
            } => format!(
                "switch from {} (net of switching cost {net:.3}; {preferred} would net {preferred_net:.3})",
                self.current_expert.as_deref().unwrap_or("(unknown)")
            ),
        };
        let quarantined = if self.quarantined.is_empty() {
            String::new()
        } else {
            let list: Vec<String> = self
                .quarantined
                .iter()
                .map(|(e, left)| format!("{e} ({left:.0} s left)"))
                .collect();
            format!(" [quarantined: {}]", list.join(", "))
        };
        let by_expert = match &self.voted_expert {
            Some(expert) => format!(", voted with the classes {expert} serves"),
            None => String::new(),
        };
        format!(
            "tick {}: class {} (margin {:.2}, support {:.2}{by_expert}) → {}: {}{}",
            self.tick,
            self.voted_class.as_deref().unwrap_or("-"),
            self.margin,
            self.support,
            self.target_expert.as_deref().unwrap_or("-"),
            why,
            quarantined
        )
    }
}
