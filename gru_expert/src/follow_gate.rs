//! Pauses inference while its predictions cannot be followed or change nothing.
//!
//! The BPF side follows a fresh prediction only when the predicted CPU is idle (queueing behind
//! a busy CPU while another may free up first gains nothing). On a saturated machine no CPU is
//! idle: in the lab, hackbench's usable predictions were followed 1 % of the time (34–60 of
//! ~5 000 a run), while the inference that made them took a vCPU for ~2 ms a run and cost 6–13 %
//! of hackbench's throughput against the policy without a model (lab runs 42–45,
//! 2026-11-25). On light loads 74–100 % of them are followed.
//!
//! [`FollowGate`] reads the BPF side's cumulative counters ([`PlacementCounts`]) over periods
//! of [`GateConfig::period_ns`]:
//! - **pause**: a period with at least [`GateConfig::min_samples`] usable predictions (fresh,
//!   allowed) of which fewer than [`GateConfig::min_followed_pct`] % were followed (the rest
//!   found their CPU busy) pauses inference for [`GateConfig::first_pause_ns`]; so does a
//!   period with fewer usable predictions but at least `min_samples` wake-ups of which fewer
//!   than `min_followed_pct` % found an idle CPU (a prediction is only followed onto an idle
//!   CPU, so on such a machine it would not be), without running the model first: at the
//!   start of hackbench, scx_gru ran batches for its 160 new tasks before any of their
//!   predictions could be counted (run 58);
//! - **pause, redundant**: a period with at least `min_samples` usable predictions of which
//!   fewer than [`GateConfig::min_moved_pct`] % moved a task off its previous CPU pauses it
//!   too: the rest were either not followed or kept the idle previous CPU, which the fallback
//!   does without a model (the one-thread I/O load: model mode cost up to ~4 % there, runs
//!   34–49, for predictions that say "stay");
//! - **resume early** (after a busy pause only): while paused there are no fresh predictions to
//!   count, so the gate watches the machine instead: a period with at least `min_samples`
//!   wake-ups of which [`GateConfig::resume_idle_pct`] % or more found an idle CPU ends the
//!   pause (the load changed) and resets the backoff;
//! - **probe**: otherwise the pause runs out and the next period measures again with inference
//!   on; each failed probe doubles the pause, up to [`GateConfig::max_pause_ns`], and a period
//!   that passes resets it.
//!
//! A pause also pauses the model on the BPF side (its `model_paused`, switched by the
//! predictor): placements skip the prediction lookup and send no events, as without a model,
//! since stale predictions and events cost every placement more (run 50). With no events the
//! predictor forgets the task windows: after the resume each fills again from new events, not
//! joined to events from before the pause. A busy pause keeps
//! the events with `--busy-pause-keeps-events`, so the task windows are current when
//! inference resumes (scx_gru's CPU on hackbench: 4.6 % against 1.7 %, run 59).
//! A period with fewer samples than the minimum (idle machine, no model output yet,
//! `--observe-only`, which follows nothing) decides nothing.

use crate::metrics::Metrics;

/// The BPF side's cumulative counters the gate reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlacementCounts {
    /// Placements on the predicted CPU (`nr_pred_applied`).
    pub followed: u64,
    /// ... of which off the task's previous CPU (`nr_pred_moved`).
    pub moved: u64,
    /// Fresh, allowed predictions whose CPU was busy (`nr_pred_busy`).
    pub busy: u64,
    /// Wake-ups placed on an idle CPU by select_cpu, by a prediction or by the fallback
    /// (`nr_pred_applied_select` + `nr_direct_idle`).
    pub idle_found: u64,
    /// Wake-ups that found no CPU idle (`nr_select_no_idle`).
    pub no_idle: u64,
}

impl PlacementCounts {
    /// Wake-ups that select_cpu counted as finding an idle CPU or none.
    fn wakeups(&self) -> u64 {
        self.idle_found + self.no_idle
    }

    /// The gate's inputs among the BPF side's counters.
    pub fn from_metrics(bpf: &Metrics) -> Self {
        Self {
            followed: bpf.nr_pred_applied,
            moved: bpf.nr_pred_moved,
            busy: bpf.nr_pred_busy,
            idle_found: bpf.nr_pred_applied_select + bpf.nr_direct_idle,
            no_idle: bpf.nr_select_no_idle,
        }
    }
}

/// Settings of the [`FollowGate`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GateConfig {
    /// Length of one measuring period (ns).
    pub period_ns: u64,
    /// Samples (usable predictions, or wake-ups while paused) a period needs to decide.
    pub min_samples: u64,
    /// Below this share (percent) of usable predictions followed, inference pauses
    /// (0: never).
    pub min_followed_pct: f64,
    /// Below this share (percent) of usable predictions moving a task off its previous CPU,
    /// inference pauses as redundant (0: never).
    pub min_moved_pct: f64,
    /// At or above this share (percent) of wake-ups finding an idle CPU, a busy pause ends
    /// early.
    pub resume_idle_pct: f64,
    /// First pause (ns); it doubles after every failed probe.
    pub first_pause_ns: u64,
    /// Longest pause (ns).
    pub max_pause_ns: u64,
}

impl Default for GateConfig {
    fn default() -> Self {
        Self {
            period_ns: 250_000_000,
            min_samples: 50,
            min_followed_pct: 10.0,
            min_moved_pct: 1.0,
            resume_idle_pct: 50.0,
            first_pause_ns: 1_000_000_000,
            max_pause_ns: 8_000_000_000,
        }
    }
}

/// What [`FollowGate::observe`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateChange {
    /// Nothing changed.
    None,
    /// Inference paused, for this reason, for at most this long (ns).
    Paused(PauseReason, u64),
    /// The pause ran out: the next period probes.
    Probing,
    /// Wake-ups found idle CPUs again: the pause ended early.
    ResumedIdle,
}

/// Why inference paused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PauseReason {
    /// The predicted CPUs were busy (a saturated machine).
    Busy,
    /// Followed predictions kept tasks where the fallback keeps them.
    Redundant,
}

/// The state of the gate (see the module documentation).
#[derive(Debug)]
pub struct FollowGate {
    config: GateConfig,
    period_start_ns: u64,
    at_start: PlacementCounts,
    /// Until when, and why, inference is paused.
    paused: Option<(u64, PauseReason)>,
    next_pause_ns: u64,
}

/// `part` is under `pct` percent of `whole`.
fn below_pct(part: u64, whole: u64, pct: f64) -> bool {
    (part as f64) * 100.0 < pct * whole as f64
}

impl FollowGate {
    /// A gate whose first period starts at `now_ns`, with the counters' values then.
    pub fn new(config: GateConfig, now_ns: u64, counts: PlacementCounts) -> Self {
        Self {
            config,
            period_start_ns: now_ns,
            at_start: counts,
            paused: None,
            next_pause_ns: config.first_pause_ns,
        }
    }

    /// True if inference may run at `now_ns` (call [`FollowGate::observe`] first).
    pub fn allows(&self, now_ns: u64) -> bool {
        self.paused.is_none_or(|(until, _)| now_ns >= until)
    }

    /// Takes the BPF side's cumulative counts at `now_ns`.
    pub fn observe(&mut self, now_ns: u64, counts: PlacementCounts) -> GateChange {
        let min = self.config.min_samples.max(1);
        if let Some((until, reason)) = self.paused {
            if now_ns >= until {
                // The probe period starts now.
                self.paused = None;
                self.restart_period(now_ns, counts);
                return GateChange::Probing;
            }
            let Some(period) = self.end_period(now_ns, counts) else {
                return GateChange::None;
            };
            let wakeups = period.wakeups();
            if reason == PauseReason::Busy
                && wakeups >= min
                && !below_pct(period.idle_found, wakeups, self.config.resume_idle_pct)
            {
                self.paused = None;
                self.next_pause_ns = self.config.first_pause_ns;
                return GateChange::ResumedIdle;
            }
            return GateChange::None;
        }
        let Some(period) = self.end_period(now_ns, counts) else {
            return GateChange::None;
        };
        let usable = period.followed + period.busy;
        let wakeups = period.wakeups();
        let reason = if usable < min {
            // Too few predictions to judge them, but the machine may show that they could not
            // be followed: a prediction is followed only onto an idle CPU.
            if self.config.min_followed_pct > 0.0
                && wakeups >= min
                && below_pct(period.idle_found, wakeups, self.config.min_followed_pct)
            {
                Some(PauseReason::Busy)
            } else {
                return GateChange::None;
            }
        } else if self.config.min_followed_pct > 0.0
            && below_pct(period.followed, usable, self.config.min_followed_pct)
        {
            Some(PauseReason::Busy)
        } else if self.config.min_moved_pct > 0.0
            && below_pct(period.moved, usable, self.config.min_moved_pct)
        {
            Some(PauseReason::Redundant)
        } else {
            None
        };
        if let Some(reason) = reason {
            let pause = self.next_pause_ns;
            self.paused = Some((now_ns + pause, reason));
            self.next_pause_ns = pause
                .saturating_mul(2)
                .min(self.config.max_pause_ns.max(pause));
            GateChange::Paused(reason, pause)
        } else {
            self.next_pause_ns = self.config.first_pause_ns;
            GateChange::None
        }
    }

    /// If the period is over at `now_ns`: what happened in it (the counters' differences),
    /// and the next period starts.
    fn end_period(&mut self, now_ns: u64, counts: PlacementCounts) -> Option<PlacementCounts> {
        if now_ns.saturating_sub(self.period_start_ns) < self.config.period_ns {
            return None;
        }
        let start = self.at_start;
        self.restart_period(now_ns, counts);
        Some(PlacementCounts {
            followed: counts.followed.saturating_sub(start.followed),
            moved: counts.moved.saturating_sub(start.moved),
            busy: counts.busy.saturating_sub(start.busy),
            idle_found: counts.idle_found.saturating_sub(start.idle_found),
            no_idle: counts.no_idle.saturating_sub(start.no_idle),
        })
    }

    fn restart_period(&mut self, now_ns: u64, counts: PlacementCounts) {
        self.period_start_ns = now_ns;
        self.at_start = counts;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use PauseReason::{Busy, Redundant};

    const MS: u64 = 1_000_000;

    fn gate() -> FollowGate {
        FollowGate::new(GateConfig::default(), 0, PlacementCounts::default())
    }

    /// Cumulative counts of a run: `followed` and `busy` predictions (every followed one moved
    /// its task), wake-ups finding an idle CPU or none.
    fn counts(followed: u64, busy: u64, idle_found: u64, no_idle: u64) -> PlacementCounts {
        PlacementCounts {
            followed,
            moved: followed,
            busy,
            idle_found,
            no_idle,
        }
    }

    /// The gate reads the BPF counters the module documentation names.
    #[test]
    fn counts_come_from_the_named_bpf_counters() {
        let bpf = Metrics {
            nr_pred_applied: 10,
            nr_pred_moved: 2,
            nr_pred_busy: 30,
            nr_pred_applied_select: 7,
            nr_direct_idle: 40,
            nr_select_no_idle: 50,
            nr_pred_prev_idle: 99,
            ..Metrics::default()
        };
        assert_eq!(
            PlacementCounts::from_metrics(&bpf),
            PlacementCounts {
                followed: 10,
                moved: 2,
                busy: 30,
                idle_found: 47,
                no_idle: 50,
            }
        );
    }

    /// A saturated machine (1 % followed, hackbench's share; 2 % of wake-ups finding an idle
    /// CPU) pauses after one period; the pause runs out on time, each failed probe doubles it,
    /// up to the longest.
    #[test]
    fn saturated_machine_pauses_with_backoff() {
        let mut g = gate();
        assert!(g.allows(0));
        assert_eq!(
            g.observe(100 * MS, counts(1, 99, 2, 98)),
            GateChange::None,
            "mid-period"
        );
        assert_eq!(
            g.observe(250 * MS, counts(2, 198, 4, 196)),
            GateChange::Paused(Busy, 1000 * MS)
        );
        assert!(!g.allows(251 * MS));
        // Saturated while paused: no early resume.
        assert_eq!(
            g.observe(600 * MS, counts(2, 198, 10, 500)),
            GateChange::None
        );
        assert!(!g.allows(1249 * MS));
        assert_eq!(
            g.observe(1250 * MS, counts(2, 198, 20, 1000)),
            GateChange::Probing
        );
        assert!(g.allows(1250 * MS));
        // The probe fails: twice as long, then 4 s and 8 s, and 8 s again.
        assert_eq!(
            g.observe(1500 * MS, counts(3, 298, 22, 1100)),
            GateChange::Paused(Busy, 2000 * MS)
        );
        let mut now = 3500 * MS;
        let (mut f, mut b) = (3, 298);
        for expected in [4000, 8000, 8000] {
            assert_eq!(g.observe(now, counts(f, b, 0, 0)), GateChange::Probing);
            f += 1;
            b += 200;
            now += 250 * MS;
            assert_eq!(
                g.observe(now, counts(f, b, 0, 0)),
                GateChange::Paused(Busy, expected * MS)
            );
            now += expected * MS;
        }
    }

    /// While paused, a period in which most wake-ups find an idle CPU ends the pause at once
    /// and resets the backoff; too few wake-ups decide nothing.
    #[test]
    fn idle_cpus_end_a_pause_early() {
        let mut g = gate();
        assert_eq!(
            g.observe(250 * MS, counts(0, 100, 0, 100)),
            GateChange::Paused(Busy, 1000 * MS)
        );
        assert_eq!(
            g.observe(500 * MS, counts(0, 100, 30, 119)),
            GateChange::None,
            "49 wake-ups: no signal"
        );
        assert_eq!(
            g.observe(750 * MS, counts(0, 100, 55, 169)),
            GateChange::None,
            "25 of 75 found an idle CPU"
        );
        assert!(!g.allows(750 * MS));
        assert_eq!(
            g.observe(1000 * MS, counts(0, 100, 85, 199)),
            GateChange::ResumedIdle,
            "exactly half"
        );
        assert!(g.allows(1000 * MS));
        // The backoff starts over.
        assert_eq!(
            g.observe(1250 * MS, counts(0, 200, 85, 199)),
            GateChange::Paused(Busy, 1000 * MS)
        );
    }

    /// Before there are predictions to count (a load that just started), a period whose
    /// wake-ups mostly found no idle CPU pauses inference as busy; one where enough found an
    /// idle CPU, or with too few wake-ups, does not; a threshold of 0 turns it off.
    #[test]
    fn busy_machine_pauses_before_predictions_can_be_counted() {
        let mut g = gate();
        assert_eq!(
            g.observe(250 * MS, counts(0, 10, 10, 90)),
            GateChange::None,
            "10 of 100 wake-ups found an idle CPU: exactly 10 %"
        );
        assert_eq!(
            g.observe(500 * MS, counts(0, 10, 19, 180)),
            GateChange::Paused(Busy, 1000 * MS),
            "9 of 99"
        );
        let mut g = gate();
        assert_eq!(
            g.observe(250 * MS, counts(0, 0, 0, 49)),
            GateChange::None,
            "49 wake-ups: no signal"
        );
        let off_config = GateConfig {
            min_followed_pct: 0.0,
            ..GateConfig::default()
        };
        let mut off = FollowGate::new(off_config, 0, PlacementCounts::default());
        assert_eq!(
            off.observe(250 * MS, counts(0, 0, 0, 1000)),
            GateChange::None
        );
    }

    /// A probe that passes ends the backoff: the next pause is the first length again.
    #[test]
    fn passing_probe_resets_the_backoff() {
        let mut g = gate();
        let c = |f, b| counts(f, b, 0, 0);
        assert_eq!(
            g.observe(250 * MS, c(0, 100)),
            GateChange::Paused(Busy, 1000 * MS)
        );
        assert_eq!(g.observe(1250 * MS, c(0, 100)), GateChange::Probing);
        assert_eq!(
            g.observe(1500 * MS, c(0, 200)),
            GateChange::Paused(Busy, 2000 * MS)
        );
        assert_eq!(g.observe(3500 * MS, c(0, 200)), GateChange::Probing);
        // Light load now: 80 % followed.
        assert_eq!(g.observe(3750 * MS, c(80, 220)), GateChange::None);
        assert!(g.allows(3750 * MS));
        assert_eq!(
            g.observe(4000 * MS, c(80, 320)),
            GateChange::Paused(Busy, 1000 * MS)
        );
    }

    /// Light loads (74–100 % followed in the lab), too few usable predictions, and thresholds
    /// of 0 never pause; the threshold itself is exclusive.
    #[test]
    fn followable_or_sparse_predictions_keep_inference_on() {
        let mut g = gate();
        let c = |f, b| counts(f, b, 0, 0);
        assert_eq!(g.observe(250 * MS, c(74, 26)), GateChange::None);
        assert_eq!(
            g.observe(500 * MS, c(74, 75)),
            GateChange::None,
            "49 usable: no signal"
        );
        assert_eq!(
            g.observe(750 * MS, c(79, 120)),
            GateChange::None,
            "exactly 10 %"
        );
        assert!(g.allows(750 * MS));
        let off_config = GateConfig {
            min_followed_pct: 0.0,
            min_moved_pct: 0.0,
            ..GateConfig::default()
        };
        let mut off = FollowGate::new(off_config, 0, PlacementCounts::default());
        assert_eq!(off.observe(250 * MS, c(0, 10_000)), GateChange::None);
        assert!(off.allows(250 * MS));
    }

    /// Predictions that are followed but keep every task on its previous CPU (the one-thread
    /// I/O load) pause inference as redundant; idle CPUs do not end that pause, the probe
    /// does; a probe where 1 % moved passes.
    #[test]
    fn redundant_predictions_pause_until_a_probe_passes() {
        let mut g = gate();
        let c = |followed, moved, busy, idle_found| PlacementCounts {
            followed,
            moved,
            busy,
            idle_found,
            no_idle: 0,
        };
        assert_eq!(
            g.observe(250 * MS, c(99, 0, 1, 100)),
            GateChange::Paused(Redundant, 1000 * MS)
        );
        assert_eq!(
            g.observe(500 * MS, c(99, 0, 1, 1000)),
            GateChange::None,
            "every wake-up found an idle CPU: no early resume"
        );
        assert!(!g.allows(999 * MS));
        assert_eq!(g.observe(1250 * MS, c(99, 0, 1, 2000)), GateChange::Probing);
        assert_eq!(
            g.observe(1500 * MS, c(198, 0, 2, 2100)),
            GateChange::Paused(Redundant, 2000 * MS)
        );
        assert_eq!(
            g.observe(3500 * MS, c(198, 0, 2, 2200)),
            GateChange::Probing
        );
        assert_eq!(
            g.observe(3750 * MS, c(297, 1, 3, 2300)),
            GateChange::None,
            "1 of 100 moved"
        );
        assert!(g.allows(3750 * MS));
        let keep_config = GateConfig {
            min_moved_pct: 0.0,
            ..GateConfig::default()
        };
        let mut keep = FollowGate::new(keep_config, 0, PlacementCounts::default());
        assert_eq!(keep.observe(250 * MS, c(99, 0, 1, 100)), GateChange::None);
    }
}
