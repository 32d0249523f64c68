//! The decision policy: per tick, classifier probabilities → vote (Algorithm 1) → mapping table
//! → expert, switching only on a confident vote and never within the cooldown of the previous
//! switch. Pure logic: the caller passes the time (a monotonic [`Duration`] since any fixed
//! origin), so tests drive it with a fake clock.
//!
//! When the vote over classes is not confident, the classes that go first to the same expert
//! vote together (look-alike classes the table serves alike, e.g. an archive extraction read
//! half as a kernel build, both on cosmos): a confident vote over experts decides as a
//! confident class vote would ([`DecisionRecord::voted_expert`]).
//!
//! Each tick yields a [`DecisionRecord`] (probabilities, vote scores, class, chosen expert, the
//! action and why) for the log and `asa status`. The caller carries out [`Action::Switch`] and
//! tells the policy about switches it did not ask for ([`Policy::note_external_switch`], e.g.
//! `asa pin`) or that failed ([`Policy::set_current_expert`]), and about experts that failed
//! ([`Policy::note_expert_failed`]): those that keep failing are quarantined
//! ([`super::quarantine`]) and skipped; the class then gets its next-ranked usable expert, or
//! the kernel default when all of them are quarantined.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{ensure, Result};
use asa_mapping_table::MappingTable;
use serde::{Deserialize, Serialize};

use super::quarantine::{Quarantine, QuarantineConfig, QuarantineEntry};
pub use super::record::{Action, DecisionRecord, Reason, DECISION_SCHEMA, DECISION_VERSION};
use super::voting::{TimeWeightedVoter, Vote, VotingConfig};

/// The expert a class falls back to when every expert ranked for it is quarantined.
pub const FALLBACK_EXPERT: &str = asa_experts::EEVDF;

/// Default cooldown between two switches: 15 s. Longer than a switch takes on real hardware
/// (about 1 s for bpfland/rusty; lavd's verifier is slower) and than the 6-tick window, so the
/// vote after a switch already reflects the new expert; short enough that a phase change a
/// minute later is followed.
pub const DEFAULT_COOLDOWN: Duration = Duration::from_secs(15);
/// Default minimum margin (A_best − A_second) / Σ A: 0.25. With the default voting parameters a
/// genuine change at probability 0.9 reaches 0.32 on its 3rd tick, a split 50/50 window 0.
pub const DEFAULT_MIN_MARGIN: f64 = 0.25;
/// Default minimum support A_best / max score: 0.5, i.e. at least half of a full, unanimous,
/// certain window. At start-up (window filling) this needs 3 ticks at probability 0.9
/// (2.196 / 3.689 = 0.595), so the agent does not act on its first impression.
pub const DEFAULT_MIN_SUPPORT: f64 = 0.5;

/// Default horizon of the switching penalty: 60 s. How long the agent expects a workload class
/// to last once recognised; a switch pays off when the mapped score gain, held this long, is
/// larger than the switch's measured cost (see [`Reason::NotWorthSwitching`]).
pub const DEFAULT_HORIZON: Duration = Duration::from_secs(60);

fn default_horizon() -> Duration {
    DEFAULT_HORIZON
}

/// Default number of consecutive unsure ticks (no vote, or one not confident) after which the
/// policy returns to the table's default expert: 6, one voting window, so a phase change (two
/// or three unsure ticks before the new class is clear) goes straight to the new class's expert.
pub const DEFAULT_FALLBACK_AFTER_TICKS: u32 = 6;

fn default_fallback_after() -> u32 {
    DEFAULT_FALLBACK_AFTER_TICKS
}

fn default_vote_over_experts() -> bool {
    true
}

/// Most consecutive ticks the policy leaves out of the vote as the agent's own work
/// ([`Policy::on_own_work_tick`]): 30. A hot standby verifies its BPF programs in about a second
/// on real hardware; under the lab's emulator the small experts take 2–3 s and scx_layered, the
/// catalogue's largest, 16–20 s at full priority on an idle VM and 22 s at nice 19 beside LLM
/// inference (2026-11-30; with a bound of 10 its last 12 loading ticks counted, voted nothing
/// and sent the agent back from cosmos: results/2026-11-30-per-app-eval). One that keeps loading
/// for longer (a standby lost and started again and again) must not blind the vote, so from the
/// 31st such tick in a row the ticks count again.
pub const MAX_OWN_WORK_TICKS: u32 = 30;

/// Parameters of the policy.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PolicyConfig {
    /// Algorithm 1 parameters.
    pub voting: VotingConfig,
    /// Minimum time between two switches.
    pub cooldown: Duration,
    /// Minimum vote margin to act on.
    pub min_margin: f64,
    /// Minimum vote support to act on.
    pub min_support: f64,
    /// How long a recognised class is expected to last: the switching penalty weighs the
    /// score gain over this long against the switch's cost.
    #[serde(default = "default_horizon")]
    pub horizon: Duration,
    /// Consecutive unsure ticks after which the policy returns to the table's default expert
    /// (before the first confident vote it does at once).
    #[serde(default = "default_fallback_after")]
    pub fallback_after_ticks: u32,
    /// When the vote over classes is not confident, let the classes that go to the same expert
    /// vote together (the module doc); false: the class vote alone decides.
    #[serde(default = "default_vote_over_experts")]
    pub vote_over_experts: bool,
    /// Quarantine of experts that keep failing.
    #[serde(default)]
    pub quarantine: QuarantineConfig,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        Self {
            voting: VotingConfig::default(),
            cooldown: DEFAULT_COOLDOWN,
            min_margin: DEFAULT_MIN_MARGIN,
            min_support: DEFAULT_MIN_SUPPORT,
            horizon: DEFAULT_HORIZON,
            fallback_after_ticks: DEFAULT_FALLBACK_AFTER_TICKS,
            vote_over_experts: true,
            quarantine: QuarantineConfig::default(),
        }
    }
}

/// For a table without a default expert (a hand-written one): the usable expert ranked first
/// in the most classes; on a tie the higher mean score over the classes that score it, then the
/// kernel default (no load, no switch), then the name. None when no class ranks a usable
/// expert.
pub fn first_in_most_classes(
    mapping: &MappingTable,
    usable: impl Fn(&str) -> bool,
) -> Option<String> {
    let mut firsts: BTreeMap<&str, usize> = BTreeMap::new();
    for class in &mapping.classes {
        if let Some(r) = class.ranked.iter().find(|r| usable(&r.expert)) {
            *firsts.entry(r.expert.as_str()).or_default() += 1;
        }
    }
    let mean = |e: &str| {
        let s: Vec<f64> = mapping
            .classes
            .iter()
            .filter_map(|c| c.ranked.iter().find(|r| r.expert == e).map(|r| r.score))
            .collect();
        if s.is_empty() {
            f64::NEG_INFINITY
        } else {
            s.iter().sum::<f64>() / s.len() as f64
        }
    };
    let is_default = |e: &str| e == asa_experts::EEVDF;
    firsts
        .into_iter()
        .max_by(|(a, na), (b, nb)| {
            na.cmp(nb)
                .then_with(|| mean(a).total_cmp(&mean(b)))
                .then_with(|| is_default(a).cmp(&is_default(b)))
                .then_with(|| b.cmp(a))
        })
        .map(|(e, _)| e.to_string())
}

/// The decision policy (see the module doc).
#[derive(Debug, Clone)]
pub struct Policy {
    config: PolicyConfig,
    classes: Vec<String>,
    /// Per class index: the usable experts of its ranking, best first.
    class_usable: Vec<Vec<String>>,
    /// Per class index: expert → its score in the mapping table and the standard error of that
    /// score (spread / √runs; 0 when fewer than 2 runs back it).
    class_scores: Vec<BTreeMap<String, (f64, f64)>>,
    /// Per class index: the table's `noise` for the class.
    class_noise: Vec<f64>,
    /// (from, to) → (score cost, run length in s, switch duration in s), from the table's
    /// `[[switch]]` entries; a pair whose cost was not measured (`runs = 0`: its switch never
    /// completed inside a calibration run) costs the largest measured cost of the table.
    switch_costs: BTreeMap<(String, String), (f64, f64, f64)>,
    voter: TimeWeightedVoter,
    overall_best: Option<String>,
    /// The usable expert first in the most classes once the overall best is left out.
    runner_up: Option<String>,
    current_expert: Option<String>,
    /// Since when the current expert runs (as far as the policy knows).
    current_since: Option<Duration>,
    last_switch: Option<Duration>,
    /// The time of the latest tick.
    last_now: Duration,
    quarantine: Quarantine,
    tick: u64,
    /// The table's default expert, when usable here.
    fallback: Option<String>,
    /// Consecutive ticks without a confident vote.
    unsure_ticks: u32,
    /// Whether any vote has been confident since the policy started.
    confident_seen: bool,
    /// Consecutive ticks left out of the vote as the agent's own work.
    own_work_ticks: u32,
}

impl Policy {
    /// A policy for the classifier's `classes` (in probability order). `mapping` must already be
    /// validated against the expert catalogue and these classes
    /// ([`MappingTable::validate`]); per class the best-ranked expert for which `usable` is
    /// true (installed, allowed on this machine) is used. `current_expert` is what runs now.
    pub fn new(
        config: PolicyConfig,
        classes: Vec<String>,
        mapping: &MappingTable,
        usable: impl Fn(&str) -> bool,
        current_expert: Option<String>,
    ) -> Result<Self> {
        ensure!(
            (0.0..=1.0).contains(&config.min_margin) && (0.0..=1.0).contains(&config.min_support),
            "min_margin and min_support must be in [0, 1]"
        );
        config.quarantine.check()?;
        let voter = TimeWeightedVoter::new(config.voting, classes.len())?;
        let fallback = mapping.default_expert().filter(|e| usable(e));
        let overall_best = fallback
            .clone()
            .or_else(|| first_in_most_classes(mapping, &usable));
        let runner_up =
            first_in_most_classes(mapping, |e| usable(e) && Some(e) != overall_best.as_deref());
        let class_usable = classes
            .iter()
            .map(|class| {
                mapping
                    .class(class)
                    .map(|c| {
                        c.ranked
                            .iter()
                            .filter(|r| usable(&r.expert))
                            .map(|r| r.expert.clone())
                            .collect()
                    })
                    .unwrap_or_default()
            })
            .collect();
        let class_scores = classes
            .iter()
            .map(|class| {
                mapping
                    .class(class)
                    .map(|c| {
                        c.ranked
                            .iter()
                            .map(|r| {
                                let se = if r.runs >= 2 {
                                    r.spread / f64::from(r.runs).sqrt()
                                } else {
                                    0.0
                                };
                                (r.expert.clone(), (r.score, se))
                            })
                            .collect()
                    })
                    .unwrap_or_default()
            })
            .collect();
        let class_noise = classes
            .iter()
            .map(|class| mapping.class(class).map_or(0.0, |c| c.noise))
            .collect();
        let unmeasured_cost = mapping
            .switches
            .iter()
            .filter(|c| c.runs > 0)
            .map(|c| c.score_cost)
            .fold(0.0f64, f64::max);
        let switch_costs = mapping
            .switches
            .iter()
            .map(|c| {
                let cost = if c.runs > 0 {
                    c.score_cost
                } else {
                    unmeasured_cost
                };
                (
                    (c.from.clone(), c.to.clone()),
                    (cost, c.run_s, c.switch_s.unwrap_or(0.0)),
                )
            })
            .collect();
        Ok(Self {
            config,
            classes,
            class_usable,
            class_scores,
            class_noise,
            switch_costs,
            voter,
            overall_best,
            runner_up,
            current_expert,
            current_since: None,
            last_switch: None,
            last_now: Duration::ZERO,
            quarantine: Quarantine::new(config.quarantine),
            tick: 0,
            fallback,
            unsure_ticks: 0,
            confident_seen: false,
            own_work_ticks: 0,
        })
    }

    /// The table's default expert, run at start-up and when the vote stays unsure (None: the
    /// table names none, or it is not usable here).
    pub fn fallback_expert(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    /// The parameters.
    pub fn config(&self) -> &PolicyConfig {
        &self.config
    }

    /// The expert the policy believes is running.
    pub fn current_expert(&self) -> Option<&str> {
        self.current_expert.as_deref()
    }

    /// The expert used for a class, if any (quarantines aside).
    pub fn expert_for(&self, class: &str) -> Option<&str> {
        let index = self.classes.iter().position(|c| c == class)?;
        self.class_usable[index].first().map(String::as_str)
    }

    /// The expert the table ranks best over all classes: its default expert
    /// ([`Policy::fallback_expert`]) when it has one usable here, else the usable expert first
    /// in the most classes ([`first_in_most_classes`]). The hot-standby pool keeps it loaded.
    pub fn overall_best(&self) -> Option<&str> {
        self.overall_best.as_deref()
    }

    /// The expert the hot-standby pool keeps as insurance: the overall best while another
    /// expert runs (the fallback's target), and while the overall best itself runs, the
    /// runner-up: the usable expert first in the most classes besides it — the likeliest
    /// switch from the overall best, made a release of its gate instead of a load (scx_layered
    /// verifies for a second or more on real hardware, 16–28 s under TCG).
    pub fn insurance_expert(&self) -> Option<&str> {
        match (&self.overall_best, &self.current_expert) {
            (Some(best), Some(running)) if best == running => self.runner_up.as_deref(),
            _ => self.overall_best.as_deref(),
        }
    }

    /// Corrects what runs without starting a cooldown (e.g. a switch the policy asked for
    /// failed and the old expert, or EEVDF, is running).
    pub fn set_current_expert(&mut self, expert: Option<&str>) {
        if self.current_expert.as_deref() != expert {
            self.current_since = Some(self.last_now);
        }
        self.current_expert = expert.map(str::to_string);
    }

    /// Records a switch the policy did not decide (`asa pin`/`unpin`): it starts the cooldown.
    pub fn note_external_switch(&mut self, expert: &str, now: Duration) {
        if self.current_expert.as_deref() != Some(expert) {
            self.current_since = Some(now);
        }
        self.current_expert = Some(expert.to_string());
        self.last_switch = Some(now);
    }

    /// `expert` failed at `now` (exited, was ejected, did not attach) because of `why`: counts
    /// towards its quarantine. Returns the length of the quarantine it starts, if any. The
    /// caller says what runs now with [`Self::note_external_switch`] or
    /// [`Self::set_current_expert`]. The fallback expert (the kernel default) is never
    /// quarantined.
    pub fn note_expert_failed(
        &mut self,
        expert: &str,
        now: Duration,
        why: &str,
    ) -> Option<Duration> {
        if expert == FALLBACK_EXPERT {
            return None;
        }
        self.quarantine.record_failure(expert, now, why)
    }

    /// The quarantine's records at `now`, for `asa status`.
    pub fn quarantine_entries(&self, now: Duration) -> Vec<QuarantineEntry> {
        self.quarantine.entries(now)
    }

    /// The experts quarantined at `now`, with the seconds left.
    pub fn quarantined(&self, now: Duration) -> BTreeMap<String, f64> {
        self.quarantine.quarantined(now)
    }

    /// Class index `class`'s usable experts at `now`, best first, without the quarantined
    /// ones; when that leaves none of a non-empty list, the kernel default.
    fn available(&self, class: usize, now: Duration) -> Vec<String> {
        let usable = &self.class_usable[class];
        let left: Vec<String> = usable
            .iter()
            .filter(|e| !self.quarantine.is_quarantined(e, now))
            .cloned()
            .collect();
        if left.is_empty() && !usable.is_empty() {
            vec![FALLBACK_EXPERT.to_string()]
        } else {
            left
        }
    }

    /// The classes whose confident vote would move the agent off the running expert at `now`
    /// (quarantines counted), each with where to: a class whose usable first choice is not
    /// running and whose lead is beyond the noise and worth its switch
    /// ([`Self::choose_target`]). Unmapped classes and those held by the noise or the
    /// switching penalty move nothing.
    pub fn classes_that_would_move(&self, now: Duration) -> Vec<(String, String)> {
        (0..self.classes.len())
            .filter_map(|c| {
                let available = self.available(c, now);
                let preferred = available.first()?;
                if Some(preferred) == self.current_expert.as_ref() {
                    return None;
                }
                match self.choose_target(c, &available)? {
                    (_, Reason::WithinNoise { .. } | Reason::NotWorthSwitching { .. }) => None,
                    (target, _) => Some((self.classes[c].clone(), target)),
                }
            })
            .collect()
    }

    /// True when the table leaves nothing to decide at `now`: the table's default expert runs
    /// (usable, not quarantined: where an unsure vote returns) and no class's vote would move
    /// it ([`Self::classes_that_would_move`]). Then what the classifier says cannot change the
    /// scheduler, and the caller may perceive less often; failures, pins and quarantines
    /// change what runs and end it. Never settled without a default expert.
    pub fn settled(&self, now: Duration) -> bool {
        let default_runs = self.fallback.as_ref().is_some_and(|f| {
            !self.quarantine.is_quarantined(f, now) && Some(f) == self.current_expert.as_ref()
        });
        default_runs && self.classes_that_would_move(now).is_empty()
    }

    /// Feeds one tick's classifier probabilities and decides. On [`Action::Switch`] the policy
    /// assumes the switch happens (current expert = target, cooldown starts at `now`).
    pub fn on_tick(&mut self, now: Duration, probabilities: &[f32]) -> Result<DecisionRecord> {
        self.own_work_ticks = 0;
        self.count_tick(now, probabilities)
    }

    /// A tick whose sample covers the agent's own work: `expert` was loading as a hot standby
    /// during it. Its probabilities are recorded but left out of the vote, and the policy
    /// stays ([`Reason::OwnWork`]): a standby started on a burst's first tick would otherwise
    /// make the next ticks look like the burst's load and turn a one-second burst into a
    /// switch. Unsure ticks are not counted either. What needs no evidence still happens: before
    /// any confident vote the table's default expert is switched to ([`Reason::Fallback`]), as
    /// on any first tick. After [`MAX_OWN_WORK_TICKS`] such ticks in a row they count again, as
    /// [`Self::on_tick`].
    pub fn on_own_work_tick(
        &mut self,
        now: Duration,
        probabilities: &[f32],
        expert: &str,
    ) -> Result<DecisionRecord> {
        ensure!(
            probabilities.len() == self.classes.len(),
            "{} probabilities for {} classes",
            probabilities.len(),
            self.classes.len()
        );
        self.own_work_ticks = self.own_work_ticks.saturating_add(1);
        if self.own_work_ticks > MAX_OWN_WORK_TICKS {
            if self.own_work_ticks == MAX_OWN_WORK_TICKS + 1 {
                log::warn!(
                    "{expert} has been loading as a hot standby for {MAX_OWN_WORK_TICKS} ticks: the ticks count in the vote again"
                );
            }
            return self.count_tick(now, probabilities);
        }
        self.begin_tick(now);
        let vote = self.voter.vote();
        if let Some(fallback) = self.fallback_due(now).filter(|_| !self.confident_seen) {
            let record = self.record(
                now,
                probabilities,
                &vote,
                None,
                Some(fallback.clone()),
                Action::Switch,
                Reason::Fallback {
                    unsure_ticks: self.unsure_ticks,
                },
            );
            self.current_expert = Some(fallback);
            self.current_since = Some(now);
            return Ok(record);
        }
        let target = vote
            .class
            .and_then(|c| self.available(c, now).into_iter().next());
        Ok(self.record(
            now,
            probabilities,
            &vote,
            None,
            target,
            Action::Stay,
            Reason::OwnWork {
                expert: expert.to_string(),
                ticks: self.own_work_ticks,
            },
        ))
    }

    /// A tick that is evidence: into the vote, then decided.
    fn count_tick(&mut self, now: Duration, probabilities: &[f32]) -> Result<DecisionRecord> {
        let vote = self.voter.push(probabilities)?;
        self.begin_tick(now);
        Ok(self.decide(now, probabilities, vote))
    }

    /// Every tick: its number, its time, and the running expert's time without failing.
    fn begin_tick(&mut self, now: Duration) {
        self.tick += 1;
        self.last_now = now;
        if let (Some(expert), Some(since)) = (self.current_expert.clone(), self.current_since) {
            if self.quarantine.record_running(&expert, since, now) {
                log::info!(
                    "{expert} has run {:.0} s without failing: its failures and back-off are reset",
                    now.saturating_sub(since).as_secs_f64()
                );
            }
        }
    }

    /// Net value of switching from the running expert to `target` for class index `class`:
    /// `(gain · max(horizon − switch_s, 0) / run_s − cost, gain, cost, run_s, switch_s)`: the
    /// gain only starts once the switch is done. `None` when the table lacks the running
    /// expert's score, the target's score or the pair's measurement.
    fn net_of_cost(&self, class: usize, target: &str) -> Option<(f64, f64, f64, f64, f64)> {
        let current = self.current_expert.as_deref()?;
        let scores = &self.class_scores[class];
        let gain = scores.get(target)?.0 - scores.get(current)?.0;
        let &(cost, run_s, switch_s) = self
            .switch_costs
            .get(&(current.to_string(), target.to_string()))?;
        if run_s <= 0.0 {
            return None;
        }
        let gaining_s = (self.config.horizon.as_secs_f64() - switch_s).max(0.0);
        Some((
            gain * gaining_s / run_s - cost.max(0.0),
            gain,
            cost,
            run_s,
            switch_s,
        ))
    }

    /// `(gain, threshold)` of `target` over the running expert for class index `class`, when the
    /// table scores both: the gain must be larger than the threshold (see
    /// [`Reason::WithinNoise`]).
    fn gain_and_noise(&self, class: usize, target: &str) -> Option<(f64, f64)> {
        let current = self.current_expert.as_deref()?;
        let scores = &self.class_scores[class];
        let (to, to_se) = *scores.get(target)?;
        let (from, from_se) = *scores.get(current)?;
        let two_se = 2.0 * (to_se * to_se + from_se * from_se).sqrt();
        Some((to - from, self.class_noise[class].max(two_se)))
    }

    /// True when the table scores both experts and `target` does not beat the running one by
    /// more than the noise.
    fn within_noise(&self, class: usize, target: &str) -> bool {
        self.gain_and_noise(class, target)
            .is_some_and(|(gain, threshold)| gain <= threshold)
    }

    /// The switching penalty (calibration stage 2). For a class whose first-ranked usable
    /// expert is not running, returns where to go and why:
    /// * the table lacks the running expert's score or the pair's cost: the first-ranked expert,
    ///   nothing holds the switch (hand-written tables, unmeasured pairs);
    /// * otherwise, among the class's usable experts with a score and a measured cost from the
    ///   running one, the one with the largest positive net value; the first-ranked one when it
    ///   is that ([`Reason::Switch`]), a lower-ranked one with
    ///   [`Reason::SwitchNetOfCost`] (e.g. lavd ranks first but takes half a minute to load,
    ///   bpfland scores a little less and loads in a second);
    /// * no positive net value: stay, [`Reason::NotWorthSwitching`] with the first-ranked
    ///   expert's numbers.
    ///
    /// Before any of that, the noise rule: when the first-ranked expert's lead over the running
    /// one is within the noise, stay ([`Reason::WithinNoise`]); lower-ranked experts whose lead
    /// is within the noise are not considered either.
    fn choose_target(&self, class: usize, usable: &[String]) -> Option<(String, Reason)> {
        let preferred = usable.first()?;
        if let Some((gain, threshold)) = self
            .gain_and_noise(class, preferred)
            .filter(|(gain, threshold)| gain <= threshold)
        {
            return Some((preferred.clone(), Reason::WithinNoise { gain, threshold }));
        }
        let Some((preferred_net, gain, cost, run_s, switch_s)) = self.net_of_cost(class, preferred)
        else {
            return Some((preferred.clone(), Reason::Switch));
        };
        let best = usable
            .iter()
            .filter(|e| Some(e.as_str()) != self.current_expert.as_deref())
            .filter(|e| !self.within_noise(class, e))
            .filter_map(|e| Some((e, self.net_of_cost(class, e)?.0)))
            .filter(|(_, net)| *net > 0.0)
            .fold(None::<(&String, f64)>, |best, (e, net)| match best {
                Some((_, b)) if b >= net => best,
                _ => Some((e, net)),
            });
        Some(match best {
            Some((e, _)) if e == preferred => (preferred.clone(), Reason::Switch),
            Some((e, net)) => (
                e.clone(),
                Reason::SwitchNetOfCost {
                    preferred: preferred.clone(),
                    preferred_net,
                    net,
                },
            ),
            None => (
                preferred.clone(),
                Reason::NotWorthSwitching {
                    gain,
                    cost,
                    run_s,
                    horizon_s: self.config.horizon.as_secs_f64(),
                    switch_s,
                },
            ),
        })
    }

    /// True when a vote is clear enough to act on (margin and support).
    fn confident(&self, vote: &Vote) -> bool {
        vote.class.is_some()
            && vote.margin >= self.config.min_margin
            && vote.support >= self.config.min_support
    }

    /// The vote to decide on, and the expert when it is the vote over experts: when the vote
    /// over classes is not confident, the classes that go first to the same usable expert
    /// vote together ([`TimeWeightedVoter::vote_grouped`]; a class without a usable expert is a
    /// group of its own). If that vote is confident, the decision follows it: its margin and
    /// support, and of its expert's classes the one with the largest time-weighted probability
    /// (whose noise and switch costs then apply). Otherwise the class vote stands.
    fn vote_over_experts(&self, vote: Vote, now: Duration) -> (Vote, Option<String>) {
        if !self.config.vote_over_experts || self.confident(&vote) {
            return (vote, None);
        }
        let mut groups: Vec<Option<String>> = Vec::new();
        let mut group_of = Vec::with_capacity(self.classes.len());
        for class in 0..self.classes.len() {
            let first = self.available(class, now).into_iter().next();
            let shared = first
                .as_ref()
                .and_then(|e| groups.iter().position(|g| g.as_ref() == Some(e)));
            group_of.push(shared.unwrap_or_else(|| {
                groups.push(first);
                groups.len() - 1
            }));
        }
        if groups.len() == self.classes.len() {
            return (vote, None); // no two classes share an expert
        }
        let Ok(grouped) = self.voter.vote_grouped(&group_of) else {
            return (vote, None);
        };
        let Some(expert) = grouped
            .class
            .filter(|_| self.confident(&grouped))
            .and_then(|g| groups[g].clone())
        else {
            return (vote, None);
        };
        let winner = grouped.class.expect("confident");
        let weighted = self.voter.weighted_probabilities();
        let member = (0..self.classes.len())
            .filter(|&c| group_of[c] == winner)
            .fold(None, |best: Option<usize>, c| match best {
                Some(b) if weighted[b] >= weighted[c] => Some(b),
                _ => Some(c),
            });
        let decided = Vote {
            class: member,
            margin: grouped.margin,
            support: grouped.support,
            ..vote
        };
        (decided, Some(expert))
    }

    fn decide(&mut self, now: Duration, probabilities: &[f32], vote: Vote) -> DecisionRecord {
        let (vote, voted_expert) = self.vote_over_experts(vote, now);
        // The class's experts without the quarantined ones (the kernel default when that
        // leaves none).
        let available = vote
            .class
            .map(|c| self.available(c, now))
            .unwrap_or_default();
        let preferred = available.first().cloned();
        // Where a confident vote would go, and why (the switching penalty may hold it or pick a
        // cheaper expert); only computed when the class's first choice is not running.
        let (target, switch_reason) = match (vote.class, &preferred) {
            (Some(c), Some(p)) if Some(p) != self.current_expert.as_ref() => {
                match self.choose_target(c, &available) {
                    Some((t, reason)) => (Some(t), reason),
                    None => (preferred.clone(), Reason::Switch),
                }
            }
            _ => (preferred.clone(), Reason::Switch),
        };
        let (action, reason) = if vote.class.is_none() {
            (Action::Stay, Reason::NoDecision)
        } else if !self.confident(&vote) {
            (
                Action::Stay,
                Reason::NotConfident {
                    margin: vote.margin,
                    min_margin: self.config.min_margin,
                    support: vote.support,
                    min_support: self.config.min_support,
                },
            )
        } else if target.is_none() {
            (Action::Stay, Reason::ClassNotMapped)
        } else if target == self.current_expert {
            (Action::Stay, Reason::AlreadyRunning)
        } else if matches!(
            switch_reason,
            Reason::NotWorthSwitching { .. } | Reason::WithinNoise { .. }
        ) {
            (Action::Stay, switch_reason)
        } else if let Some(remaining) = self
            .last_switch
            .map(|at| (at + self.config.cooldown).saturating_sub(now))
            .filter(|r| !r.is_zero())
        {
            (
                Action::Stay,
                Reason::CoolingDown {
                    remaining_s: remaining.as_secs_f64(),
                },
            )
        } else {
            (Action::Switch, switch_reason)
        };
        let unsure = matches!(reason, Reason::NoDecision | Reason::NotConfident { .. });
        self.unsure_ticks = if unsure { self.unsure_ticks + 1 } else { 0 };
        self.confident_seen |= !unsure;
        // Confidence is needed to move, not to stay: after a confident vote, an unsure vote
        // whose leading class is served first by the running expert keeps it — the voted class,
        // or where the window leans when no tick was sure enough to vote. (Live, archive
        // extraction under cosmos voted at p ~0.6 with support just under the threshold, and
        // beside the office at p 0.35-0.5, under θ on every tick; falling back to the default
        // expert there sent the machine back to the expert the table had left.) Start-up is
        // unchanged: before any confident vote the default expert runs.
        let leading_first = vote
            .class
            .or(vote.leaning)
            .and_then(|c| self.available(c, now).into_iter().next());
        let vote_keeps_running =
            self.confident_seen && leading_first.is_some() && leading_first == self.current_expert;
        let (target, action, reason) = match self.fallback_due(now) {
            Some(fallback) if unsure && !vote_keeps_running => (
                Some(fallback),
                Action::Switch,
                Reason::Fallback {
                    unsure_ticks: self.unsure_ticks,
                },
            ),
            _ => (target, action, reason),
        };
        let record = self.record(
            now,
            probabilities,
            &vote,
            voted_expert,
            target.clone(),
            action,
            reason,
        );
        if record.action == Action::Switch {
            self.current_expert = target;
            self.current_since = Some(now);
            if !matches!(record.reason, Reason::Fallback { .. }) {
                self.last_switch = Some(now);
            }
        }
        record
    }

    /// The tick's record.
    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        now: Duration,
        probabilities: &[f32],
        vote: &Vote,
        voted_expert: Option<String>,
        target: Option<String>,
        action: Action,
        reason: Reason,
    ) -> DecisionRecord {
        DecisionRecord {
            schema: DECISION_SCHEMA.to_string(),
            version: DECISION_VERSION,
            tick: self.tick,
            at_s: now.as_secs_f64(),
            probabilities: self
                .classes
                .iter()
                .cloned()
                .zip(probabilities.iter().copied())
                .collect(),
            vote_scores: self
                .classes
                .iter()
                .cloned()
                .zip(vote.scores.iter().copied())
                .collect(),
            voted_class: vote.class.map(|c| self.classes[c].clone()),
            margin: vote.margin,
            support: vote.support,
            current_expert: self.current_expert.clone(),
            target_expert: target,
            voted_expert,
            action,
            reason,
            quarantined: self.quarantine.quarantined(now),
        }
    }

    /// The default expert, when an unsure vote should go back to it now: it is usable, not
    /// quarantined and not running, the vote has been unsure since the start or for `fallback_after_ticks` ticks,
    /// and no cooldown runs. [`Self::decide`] also keeps the running expert while the unsure
    /// vote's leading class maps to it first.
    fn fallback_due(&self, now: Duration) -> Option<String> {
        let fallback = self
            .fallback
            .as_ref()
            .filter(|e| !self.quarantine.is_quarantined(e, now))?;
        let long_enough =
            !self.confident_seen || self.unsure_ticks >= self.config.fallback_after_ticks;
        let cooling = self
            .last_switch
            .is_some_and(|at| now < at + self.config.cooldown);
        (Some(fallback) != self.current_expert.as_ref() && long_enough && !cooling)
            .then(|| fallback.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = r#"
schema = "asa.mapping"
version = 1
source = "hand-written"
created = "2026-11-22"
[[class]]
name = "busy"
ranked = [
  { expert = "lavd", score = 0.9, spread = 0.0, runs = 0 },
  { expert = "bpfland", score = 0.8, spread = 0.0, runs = 0 },
]
[[class]]
name = "calm"
ranked = [{ expert = "eevdf", score = 0.7, spread = 0.0, runs = 0 }]
"#;

    const BUSY: [f32; 3] = [0.9, 0.05, 0.05];
    const CALM: [f32; 3] = [0.05, 0.9, 0.05];
    const UNMAPPED: [f32; 3] = [0.05, 0.05, 0.9];
    /// Below θ on every class, leaning to "odd", which the table does not map: no evidence
    /// for any of its experts.
    const UNSURE: [f32; 3] = [0.3, 0.3, 0.4];

    /// Classes busy, calm and "odd" (not in the table); everything usable unless `not_usable`.
    fn policy(cooldown_s: u64, not_usable: &'static str) -> Policy {
        let table = MappingTable::parse(TABLE, "test").unwrap();
        let classes = vec!["busy".to_string(), "calm".to_string(), "odd".to_string()];
        let names: Vec<&str> = classes.iter().map(String::as_str).collect();
        let unmapped = table
            .validate("test", &["eevdf", "lavd", "bpfland"], &names)
            .unwrap();
        assert_eq!(unmapped, vec!["odd".to_string()]);
        let config = PolicyConfig {
            cooldown: Duration::from_secs(cooldown_s),
            ..PolicyConfig::default()
        };
        Policy::new(
            config,
            classes,
            &table,
            move |e| e != not_usable,
            Some("eevdf".into()),
        )
        .unwrap()
    }

    fn at(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// TABLE naming bpfland as the default expert (the best over all classes).
    /// A policy with a default expert (bpfland, fallback after 4 unsure ticks, no cooldown)
    /// that six busy ticks have switched to busy's expert, lavd.
    fn busy_on_lavd() -> Policy {
        let mut p = policy_with_default(0, 4);
        for s in 1..=6 {
            p.on_tick(at(s), &BUSY).unwrap();
        }
        assert_eq!(p.current_expert(), Some("lavd"));
        p
    }

    fn policy_with_default(cooldown_s: u64, fallback_after_ticks: u32) -> Policy {
        let text = TABLE.replace(
            "created = \"2026-11-22\"",
            "created = \"2026-11-22\"\ndefault_expert = \"bpfland\"",
        );
        let table = MappingTable::parse(&text, "test").unwrap();
        let classes = vec!["busy".to_string(), "calm".to_string(), "odd".to_string()];
        let config = PolicyConfig {
            cooldown: Duration::from_secs(cooldown_s),
            fallback_after_ticks,
            ..PolicyConfig::default()
        };
        Policy::new(config, classes, &table, |_| true, Some("eevdf".into())).unwrap()
    }

    /// Before any confident vote the agent runs the table's default expert, from the first
    /// tick, and that switch starts no cooldown: the first confident vote is followed at once.
    #[test]
    fn starts_on_the_default_expert_and_follows_the_first_confident_vote() {
        let mut p = policy_with_default(15, 6);
        assert_eq!(p.fallback_expert(), Some("bpfland"));
        let r1 = p.on_tick(at(1), &BUSY).unwrap();
        assert_eq!(r1.action, Action::Switch);
        assert_eq!(r1.reason, Reason::Fallback { unsure_ticks: 1 });
        assert_eq!(r1.target_expert.as_deref(), Some("bpfland"));
        assert!(r1.summary().contains("default expert"), "{}", r1.summary());
        assert_eq!(p.current_expert(), Some("bpfland"));
        assert_eq!(p.on_tick(at(2), &BUSY).unwrap().action, Action::Stay);
        let r3 = p.on_tick(at(3), &BUSY).unwrap();
        assert_eq!((r3.action, r3.reason), (Action::Switch, Reason::Switch));
        assert_eq!(p.current_expert(), Some("lavd"));
    }

    /// After a confident switch, an unsure vote goes back to the default expert only after
    /// `fallback_after_ticks` unsure ticks and outside the cooldown; a phase change, whose
    /// vote is unsure for a tick or two, goes straight to the new class's expert.
    #[test]
    fn a_lasting_unsure_vote_returns_to_the_default_expert() {
        let mut p = busy_on_lavd();
        let mut fell_back_at = None;
        for s in 7..=20 {
            let r = p.on_tick(at(s), &UNSURE).unwrap();
            if r.action == Action::Switch {
                assert!(matches!(r.reason, Reason::Fallback { unsure_ticks } if unsure_ticks >= 4));
                fell_back_at = Some(s);
                break;
            }
        }
        let at_s = fell_back_at.expect("falls back while the vote stays unsure");
        assert_eq!(p.current_expert(), Some("bpfland"));
        // The busy window decays first: the vote is unsure from a few ticks in, then 4 more.
        assert!((10..=16).contains(&at_s), "fell back at t = {at_s}");
    }

    /// An unsure vote that still leads with the running expert's class keeps that expert: only
    /// a vote that no longer points there (here: no class at all) falls back to the default.
    #[test]
    fn an_unsure_vote_for_the_running_experts_class_does_not_fall_back() {
        let mut p = busy_on_lavd();
        // Busy at p 0.55 every other tick, below the threshold between: busy leads, with half
        // the support a confident vote needs.
        const LEANING: [f32; 3] = [0.55, 0.25, 0.2];
        const UNDER: [f32; 3] = [0.45, 0.3, 0.25];
        for s in 7..=30 {
            let r = p
                .on_tick(at(s), if s % 2 == 0 { &LEANING } else { &UNDER })
                .unwrap();
            assert_eq!(r.action, Action::Stay, "t = {s}: {r:?}");
            if s > 12 {
                assert_eq!(r.voted_class.as_deref(), Some("busy"), "t = {s}");
                assert!(
                    matches!(r.reason, Reason::NotConfident { support, .. } if support < 0.5),
                    "t = {s}: {:?}",
                    r.reason
                );
            }
        }
        assert_eq!(p.current_expert(), Some("lavd"));
        // The vote stops pointing at busy: the default expert, once the window has emptied.
        let fell_back =
            (31..=40).find(|&s| p.on_tick(at(s), &UNSURE).unwrap().action == Action::Switch);
        assert!(fell_back.is_some(), "falls back once no class leads");
        assert_eq!(p.current_expert(), Some("bpfland"));
    }

    /// A window where no tick reaches θ votes for nothing, but where it leans still counts:
    /// leaning to the running expert's class keeps it (archive extraction beside the office,
    /// live, at p 0.35-0.5 on every tick); leaning to another class falls back to the default.
    #[test]
    fn a_window_below_the_threshold_that_leans_to_the_running_experts_class_keeps_it() {
        let mut p = busy_on_lavd();
        const LEANS_BUSY: [f32; 3] = [0.4, 0.3, 0.3];
        for s in 7..=40 {
            let r = p.on_tick(at(s), &LEANS_BUSY).unwrap();
            assert_eq!(r.action, Action::Stay, "t = {s}: {r:?}");
            if s > 12 {
                assert_eq!(
                    (r.voted_class, r.reason.clone()),
                    (None, Reason::NoDecision)
                );
            }
        }
        assert_eq!(p.current_expert(), Some("lavd"));
        // Leaning to calm (eevdf's class): unsure, so not to eevdf but back to the default.
        const LEANS_CALM: [f32; 3] = [0.3, 0.4, 0.3];
        let fell_back =
            (41..=60).find(|&s| p.on_tick(at(s), &LEANS_CALM).unwrap().action == Action::Switch);
        assert!(
            fell_back.is_some(),
            "falls back once the window leans elsewhere"
        );
        assert_eq!(p.current_expert(), Some("bpfland"));
    }

    /// vm_decision's burst, in the policy: a hot standby started on a burst's first tick makes
    /// the next ticks look busy as well; those ticks are the agent's own work and are left out,
    /// so the burst's one tick switches nothing. The same ticks counted would have switched.
    #[test]
    fn ticks_of_the_agents_own_loading_do_not_turn_a_burst_into_a_switch() {
        let mut counted = policy(0, "");
        let mut skipped = policy(0, "");
        for s in 1..=6 {
            counted.on_tick(at(s), &CALM).unwrap();
            skipped.on_tick(at(s), &CALM).unwrap();
        }
        counted.on_tick(at(7), &BUSY).unwrap();
        skipped.on_tick(at(7), &BUSY).unwrap();
        let mut counted_switched = false;
        for s in 8..=10 {
            counted_switched |= counted.on_tick(at(s), &BUSY).unwrap().action == Action::Switch;
            let r = skipped.on_own_work_tick(at(s), &BUSY, "bpfland").unwrap();
            assert_eq!(r.action, Action::Stay);
            assert_eq!(
                r.reason,
                Reason::OwnWork {
                    expert: "bpfland".into(),
                    ticks: (s - 7) as u32
                }
            );
            assert!(r.summary().contains("loading bpfland"), "{}", r.summary());
            assert_eq!(
                r.probabilities["busy"], 0.9,
                "the tick's probabilities are logged"
            );
        }
        assert!(counted_switched, "counted, the busy ticks switch");
        for s in 11..=20 {
            let r = skipped.on_tick(at(s), &CALM).unwrap();
            assert_eq!(r.action, Action::Stay, "t = {s}: {}", r.summary());
        }
        assert_eq!(skipped.current_expert(), Some("eevdf"));
    }

    /// A standby that never finishes loading does not blind the vote: after
    /// MAX_OWN_WORK_TICKS such ticks in a row they count again, and a lasting load switches.
    #[test]
    fn own_work_ticks_count_again_after_the_cap() {
        let mut p = policy(0, "");
        let max = u64::from(MAX_OWN_WORK_TICKS);
        for s in 1..=max {
            let r = p.on_own_work_tick(at(s), &BUSY, "lavd").unwrap();
            assert!(
                matches!(r.reason, Reason::OwnWork { .. }),
                "{}",
                r.summary()
            );
        }
        let switched_at = (max + 1..=max + 6)
            .find(|&s| p.on_own_work_tick(at(s), &BUSY, "lavd").unwrap().action == Action::Switch)
            .expect("counted again, the busy ticks switch");
        assert_eq!(
            switched_at,
            max + 3,
            "three counted busy ticks, as at start-up"
        );
        assert_eq!(p.current_expert(), Some("lavd"));
        // A counted tick ends the run: the next own-work tick is left out again.
        let r = p.on_tick(at(max + 7), &BUSY).unwrap();
        assert!(!matches!(r.reason, Reason::OwnWork { .. }));
        let r = p.on_own_work_tick(at(max + 8), &CALM, "lavd").unwrap();
        assert_eq!(
            r.reason,
            Reason::OwnWork {
                expert: "lavd".into(),
                ticks: 1
            }
        );
    }

    /// What needs no evidence is not held by the agent's own work: at start-up (no confident
    /// vote yet) the default expert is switched to on the first tick, own work or not; later
    /// own-work ticks hold nothing back either way.
    #[test]
    fn the_start_up_switch_to_the_default_expert_does_not_wait_for_a_standby() {
        let mut p = policy_with_default(15, 6);
        let r = p.on_own_work_tick(at(1), &UNSURE, "bpfland").unwrap();
        assert_eq!(
            (r.action, r.reason),
            (Action::Switch, Reason::Fallback { unsure_ticks: 0 })
        );
        assert_eq!(p.current_expert(), Some("bpfland"));
        let r = p.on_own_work_tick(at(2), &UNSURE, "lavd").unwrap();
        assert_eq!(r.action, Action::Stay);
        assert!(
            matches!(r.reason, Reason::OwnWork { .. }),
            "{}",
            r.summary()
        );
        // Without a default expert nothing is due.
        let mut q = policy(0, "");
        let r = q.on_own_work_tick(at(1), &UNSURE, "bpfland").unwrap();
        assert_eq!(r.action, Action::Stay);
    }

    /// Own-work ticks are no decision: they neither count as unsure towards the fallback to the
    /// default expert nor reset the count; wrong-length probabilities are refused.
    #[test]
    fn own_work_ticks_leave_the_unsure_count_alone() {
        let mut p = busy_on_lavd();
        for s in 7..=8 {
            assert_eq!(p.on_tick(at(s), &UNSURE).unwrap().action, Action::Stay);
        }
        let unsure_before = p.unsure_ticks;
        for s in 9..=9 + u64::from(MAX_OWN_WORK_TICKS) - 1 {
            let r = p.on_own_work_tick(at(s), &UNSURE, "bpfland").unwrap();
            assert_eq!(r.action, Action::Stay, "t = {s}: {}", r.summary());
        }
        assert_eq!(p.unsure_ticks, unsure_before);
        assert_eq!(p.current_expert(), Some("lavd"));
        assert!(p.on_own_work_tick(at(30), &[0.5, 0.5], "bpfland").is_err());
    }

    #[test]
    fn an_unsure_vote_waits_for_the_cooldown_before_falling_back() {
        let mut p = policy_with_default(30, 1);
        for s in 1..=3 {
            p.on_tick(at(s), &BUSY).unwrap();
        }
        assert_eq!(p.current_expert(), Some("lavd")); // switched at t = 3: cooling until 33
        for s in 4..=32 {
            let r = p.on_tick(at(s), &UNSURE).unwrap();
            assert_eq!(r.action, Action::Stay, "t = {s}: {}", r.summary());
        }
        let r = p.on_tick(at(33), &UNSURE).unwrap();
        assert!(
            matches!(r.reason, Reason::Fallback { .. }),
            "{}",
            r.summary()
        );
    }

    #[test]
    fn without_a_default_expert_an_unsure_vote_keeps_what_runs() {
        let mut p = policy(0, "");
        assert_eq!(p.fallback_expert(), None);
        for s in 1..=20 {
            let r = p.on_tick(at(s), &UNSURE).unwrap();
            assert_eq!(r.action, Action::Stay, "t = {s}: {}", r.summary());
        }
        assert_eq!(p.current_expert(), Some("eevdf"));
    }

    /// The overall best: first in the most classes; on a tie the higher mean score; an
    /// expert that is not usable here does not count.
    #[test]
    fn the_overall_best_is_first_in_the_most_classes() {
        // busy → lavd, calm → eevdf: one first place each; lavd's mean 0.9 beats eevdf's 0.7.
        assert_eq!(policy(15, "").overall_best(), Some("lavd"));
        // lavd not usable: busy → bpfland (0.8) still beats eevdf (0.7).
        assert_eq!(policy(15, "lavd").overall_best(), Some("bpfland"));
        let table = MappingTable::parse(
            &TABLE.replace(
                "[[class]]\nname = \"calm\"",
                "[[class]]\nname = \"odd\"\nranked = [{ expert = \"eevdf\", score = 0.5, spread = 0.0, runs = 0 }]\n[[class]]\nname = \"calm\"",
            ),
            "test",
        )
        .unwrap();
        let classes = vec!["busy".to_string(), "calm".to_string(), "odd".to_string()];
        let p = Policy::new(PolicyConfig::default(), classes, &table, |_| true, None).unwrap();
        // eevdf is first in two classes (calm, odd), lavd in one.
        assert_eq!(p.overall_best(), Some("eevdf"));
        // A table that states it: its word, while that expert is usable here.
        let stated = MappingTable::parse(
            &TABLE.replace(
                "created = \"2026-11-22\"",
                "created = \"2026-11-22\"\ndefault_expert = \"bpfland\"",
            ),
            "test",
        )
        .unwrap();
        let classes = || vec!["busy".to_string(), "calm".to_string(), "odd".to_string()];
        let p = Policy::new(PolicyConfig::default(), classes(), &stated, |_| true, None).unwrap();
        assert_eq!(p.overall_best(), Some("bpfland"));
        let p = Policy::new(
            PolicyConfig::default(),
            classes(),
            &stated,
            |e| e != "bpfland",
            None,
        )
        .unwrap();
        assert_eq!(p.overall_best(), Some("lavd"));
        // A tie (one first place each, equal means) goes to the kernel default.
        let tie = MappingTable::parse(&TABLE.replace("0.7", "0.9"), "test").unwrap();
        let p = Policy::new(PolicyConfig::default(), classes(), &tie, |_| true, None).unwrap();
        assert_eq!(p.overall_best(), Some("eevdf"));
    }

    /// While the overall best runs, the insurance is the expert first in the most classes
    /// besides it; while anything else runs (or nothing is known), the overall best.
    #[test]
    fn the_insurance_is_the_runner_up_while_the_overall_best_runs() {
        let table = MappingTable::parse(
            &TABLE.replace(
                "created = \"2026-11-22\"",
                "created = \"2026-11-22\"\ndefault_expert = \"bpfland\"",
            ),
            "test",
        )
        .unwrap();
        let classes = || vec!["busy".to_string(), "calm".to_string()];
        let on = |running: Option<&str>| {
            Policy::new(
                PolicyConfig::default(),
                classes(),
                &table,
                |_| true,
                running.map(str::to_string),
            )
            .unwrap()
        };
        // busy → lavd, calm → eevdf: without bpfland, one first place each, lavd's mean higher.
        assert_eq!(on(Some("bpfland")).insurance_expert(), Some("lavd"));
        assert_eq!(on(Some("lavd")).insurance_expert(), Some("bpfland"));
        assert_eq!(on(Some("eevdf")).insurance_expert(), Some("bpfland"));
        assert_eq!(on(None).insurance_expert(), Some("bpfland"));
        // The runner-up must be usable here too.
        let p = Policy::new(
            PolicyConfig::default(),
            classes(),
            &table,
            |e| e != "lavd",
            Some("bpfland".to_string()),
        )
        .unwrap();
        assert_ne!(p.insurance_expert(), Some("lavd"));
        assert_ne!(p.insurance_expert(), Some("bpfland"));
    }

    /// TABLE with a third class, hectic, that goes to lavd first as busy does; calm to eevdf.
    /// Everything usable unless `usable` says otherwise.
    fn look_alike_policy_with(config: PolicyConfig, usable: fn(&str) -> bool) -> Policy {
        let text = TABLE.replace(
            "[[class]]\nname = \"calm\"",
            "[[class]]\nname = \"hectic\"\n\
             ranked = [{ expert = \"lavd\", score = 0.85, spread = 0.0, runs = 0 }]\n\
             [[class]]\nname = \"calm\"",
        );
        let table = MappingTable::parse(&text, "test").unwrap();
        let classes = vec!["busy".to_string(), "hectic".to_string(), "calm".to_string()];
        Policy::new(config, classes, &table, usable, Some("eevdf".into())).unwrap()
    }

    fn look_alike_policy() -> Policy {
        look_alike_policy_with(PolicyConfig::default(), |_| true)
    }

    /// Two classes the classifier cannot tell apart (0.45 each, neither above θ) that the table
    /// sends to the same expert: the class vote never decides, the vote over experts gives lavd
    /// 0.9 a tick and switches on the third tick, as one clear class would.
    #[test]
    fn look_alike_classes_that_share_an_expert_vote_for_it_together() {
        let mut p = look_alike_policy();
        let split = [0.45f32, 0.44, 0.11];
        for s in 1..=2 {
            let r = p.on_tick(at(s), &split).unwrap();
            assert_eq!((r.action, r.reason), (Action::Stay, Reason::NoDecision));
            assert_eq!(r.voted_expert, None);
        }
        let r = p.on_tick(at(3), &split).unwrap();
        assert_eq!(
            (r.action.clone(), r.reason.clone()),
            (Action::Switch, Reason::Switch)
        );
        assert_eq!(r.voted_expert.as_deref(), Some("lavd"));
        assert_eq!(r.voted_class.as_deref(), Some("busy"), "the likelier one");
        assert_eq!(r.target_expert.as_deref(), Some("lavd"));
        assert!((r.support - 0.89 * 2.44 / 3.68928).abs() < 1e-6, "{r:?}");
        assert!(
            r.summary().contains("voted with the classes lavd serves"),
            "{}",
            r.summary()
        );
        // Once a window of clear ticks backs one class, it decides without the vote over experts.
        let clear: Vec<DecisionRecord> = (4..=9)
            .map(|s| p.on_tick(at(s), &[0.9, 0.05, 0.05]).unwrap())
            .collect();
        assert!(clear.iter().all(|r| r.action == Action::Stay));
        assert_eq!(clear.last().unwrap().voted_expert, None);
        assert_eq!(p.current_expert(), Some("lavd"));
    }

    /// With `vote_over_experts` off the look-alike classes decide nothing, as before it.
    #[test]
    fn with_the_vote_over_experts_off_look_alike_classes_decide_nothing() {
        let config = PolicyConfig {
            vote_over_experts: false,
            ..PolicyConfig::default()
        };
        let mut p = look_alike_policy_with(config, |_| true);
        for s in 1..=8 {
            let r = p.on_tick(at(s), &[0.45, 0.44, 0.11]).unwrap();
            assert_eq!((r.action, r.reason), (Action::Stay, Reason::NoDecision));
        }
    }

    /// Classes that go to different experts are never merged: busy (lavd; with hectic 0.49) and
    /// calm (eevdf) at 0.47 each decide nothing, and a class whose expert is not usable leaves the group it
    /// shared (hectic's only expert, lavd, cannot run here: busy goes to bpfland alone).
    #[test]
    fn classes_that_go_to_different_experts_do_not_vote_together() {
        let mut p = look_alike_policy();
        for s in 1..=8 {
            let r = p.on_tick(at(s), &[0.47, 0.02, 0.47]).unwrap();
            assert_eq!((r.action, r.reason), (Action::Stay, Reason::NoDecision));
            assert_eq!(r.voted_expert, None);
        }
        let mut p = look_alike_policy_with(PolicyConfig::default(), |e| e != "lavd");
        for s in 1..=8 {
            let r = p.on_tick(at(s), &[0.45, 0.45, 0.1]).unwrap();
            assert_eq!(r.action, Action::Stay, "tick {s}: {r:?}");
            assert_eq!(r.voted_expert, None);
        }
    }

    /// Start-up: support after n ticks of p = 0.9 is 0.9·Σ_{k<n} 0.8^k / 3.68928:
    /// n = 1: 0.244, n = 2: 0.439 (< 0.5: not confident), n = 3: 0.595 → switch on tick 3.
    #[test]
    fn switches_on_the_third_confident_tick_at_start() {
        let mut p = policy(15, "");
        let r1 = p.on_tick(at(1), &BUSY).unwrap();
        assert!(
            matches!(r1.reason, Reason::NotConfident { support, .. } if (support - 0.9 / 3.68928).abs() < 1e-6)
        );
        assert_eq!(r1.voted_class.as_deref(), Some("busy"));
        assert_eq!(r1.target_expert.as_deref(), Some("lavd"));
        let r2 = p.on_tick(at(2), &BUSY).unwrap();
        assert_eq!(r2.action, Action::Stay);
        let r3 = p.on_tick(at(3), &BUSY).unwrap();
        assert_eq!(
            (r3.action.clone(), r3.reason.clone()),
            (Action::Switch, Reason::Switch)
        );
        assert_eq!(r3.current_expert.as_deref(), Some("eevdf"));
        assert_eq!(p.current_expert(), Some("lavd"));
        let r4 = p.on_tick(at(4), &BUSY).unwrap();
        assert_eq!(r4.reason, Reason::AlreadyRunning);
        assert!(
            r3.summary().contains("switch from eevdf"),
            "{}",
            r3.summary()
        );
    }

    #[test]
    fn one_tick_spike_never_switches() {
        let mut p = policy(0, "");
        for s in 1..=6 {
            p.on_tick(at(s), &BUSY).unwrap();
        }
        assert_eq!(p.current_expert(), Some("lavd"));
        let spike = p.on_tick(at(7), &CALM).unwrap();
        assert_eq!(spike.voted_class.as_deref(), Some("busy"));
        assert_eq!(spike.reason, Reason::AlreadyRunning);
        for s in 8..=20 {
            let r = p.on_tick(at(s), &BUSY).unwrap();
            assert_eq!(r.action, Action::Stay, "tick {s}: {}", r.summary());
        }
    }

    /// After a switch at t = 3 (cooldown 15 s, so allowed again from t = 18), the load changes at
    /// t = 4. The window holds only the 3 busy ticks of t1..t3 (all at p = 0.9):
    /// t4: busy 0.9·(0.8+0.64+0.512) = 1.7568, calm 0.9 → busy (support 0.476: not confident);
    /// t5: busy 0.9·(0.64+0.512+0.4096) = 1.40544, calm 1.62 → calm, margin 0.071: not confident;
    /// t6: busy 0.9·(0.512+0.4096+0.32768) = 1.124352, calm 2.196 → margin 0.32 ≥ 0.25, support
    /// 0.595 ≥ 0.5: confident, but the cooldown holds the switch until t = 18 (3 s left at t = 15).
    #[test]
    fn cooldown_delays_a_genuine_change() {
        let mut p = policy(15, "");
        for s in 1..=3 {
            p.on_tick(at(s), &BUSY).unwrap();
        }
        assert_eq!(p.current_expert(), Some("lavd"));
        let r4 = p.on_tick(at(4), &CALM).unwrap();
        assert_eq!(r4.voted_class.as_deref(), Some("busy"));
        // support 1.7568 / 3.68928 = 0.476 < 0.5: the window is not full of busy ticks yet.
        assert!(
            matches!(r4.reason, Reason::NotConfident { .. }),
            "{:?}",
            r4.reason
        );
        let r5 = p.on_tick(at(5), &CALM).unwrap();
        assert_eq!(r5.voted_class.as_deref(), Some("calm"));
        assert!((r5.margin - (1.62 - 1.40544) / 3.02544).abs() < 1e-6);
        assert!(matches!(r5.reason, Reason::NotConfident { .. }));
        for s in 6..=17 {
            let r = p.on_tick(at(s), &CALM).unwrap();
            assert_eq!(r.voted_class.as_deref(), Some("calm"), "tick {s}");
            assert!(
                matches!(r.reason, Reason::CoolingDown { .. }),
                "tick {s}: {:?}",
                r.reason
            );
            if s == 15 {
                assert_eq!(r.reason, Reason::CoolingDown { remaining_s: 3.0 });
            }
        }
        let r18 = p.on_tick(at(18), &CALM).unwrap();
        assert_eq!(r18.action, Action::Switch);
        assert_eq!(r18.target_expert.as_deref(), Some("eevdf"));
    }

    #[test]
    fn unsure_ticks_and_unmapped_classes_stay() {
        let mut p = policy(0, "");
        for s in 1..=6 {
            let r = p.on_tick(at(s), &UNSURE).unwrap();
            assert_eq!(r.reason, Reason::NoDecision);
            assert_eq!(r.voted_class, None);
        }
        // The UNSURE ticks add nothing (all ≤ θ): "odd" gets support 0.595 on its 3rd tick.
        for s in 7..=12 {
            let r = p.on_tick(at(s), &UNMAPPED).unwrap();
            assert_eq!(r.voted_class.as_deref(), Some("odd"));
            if s < 9 {
                assert!(matches!(r.reason, Reason::NotConfident { .. }), "tick {s}");
            } else {
                assert_eq!(r.reason, Reason::ClassNotMapped, "tick {s}");
            }
        }
        assert_eq!(p.current_expert(), Some("eevdf"));
    }

    /// Two classes alternating every tick: scores stay close, the margin below 0.25.
    /// After 6 ticks (newest busy): busy = 0.9·(1 + 0.64 + 0.4096) = 1.84464,
    /// calm = 0.9·(0.8 + 0.512 + 0.32768) = 1.475712, margin 0.368928/3.320352 = 0.111.
    #[test]
    fn alternating_classes_are_not_confident() {
        let mut p = policy(0, "");
        let mut last = None;
        for s in 1..=6 {
            let probs = if s % 2 == 0 { BUSY } else { CALM };
            last = Some(p.on_tick(at(s), &probs).unwrap());
        }
        let last = last.unwrap();
        assert!(
            (last.margin - 0.368928 / 3.320352).abs() < 1e-6,
            "{}",
            last.margin
        );
        assert!(matches!(last.reason, Reason::NotConfident { .. }));
        assert_eq!(p.current_expert(), Some("eevdf"));
    }

    #[test]
    fn unusable_expert_falls_back_to_the_next_ranked() {
        let p = policy(0, "lavd");
        assert_eq!(p.expert_for("busy"), Some("bpfland"));
        assert_eq!(p.expert_for("calm"), Some("eevdf"));
        assert_eq!(p.expert_for("odd"), None);
    }

    #[test]
    fn external_switch_starts_the_cooldown() {
        let mut p = policy(10, "");
        p.note_external_switch("bpfland", at(0));
        for s in 1..=9 {
            let r = p.on_tick(at(s), &BUSY).unwrap();
            assert_eq!(r.action, Action::Stay);
        }
        assert_eq!(p.on_tick(at(10), &BUSY).unwrap().action, Action::Switch);
        p.set_current_expert(Some("eevdf"));
        assert_eq!(p.current_expert(), Some("eevdf"));
    }

    #[test]
    fn record_round_trips_as_json() {
        let mut p = policy(0, "");
        let r = p.on_tick(at(1), &BUSY).unwrap();
        let line = serde_json::to_string(&r).unwrap();
        assert!(line.contains("\"schema\":\"asa.decision\""));
        assert!(line.contains("\"kind\":\"not_confident\""));
        let back: DecisionRecord = serde_json::from_str(&line).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.probabilities["busy"], 0.9);
    }

    /// TABLE with eevdf ranked third for busy (0.5) and the given measured switch costs
    /// (from, to, score cost) in 20 s runs.
    fn table_with_costs(costs: &[(&str, &str, f64)]) -> MappingTable {
        let timed: Vec<_> = costs.iter().map(|&(a, b, c)| (a, b, c, None)).collect();
        table_with_timed_costs(&timed)
    }

    /// [`table_with_costs`] with switch durations (s) where given.
    fn table_with_timed_costs(costs: &[(&str, &str, f64, Option<f64>)]) -> MappingTable {
        let mut text = TABLE.replace(
            "{ expert = \"bpfland\", score = 0.8, spread = 0.0, runs = 0 },",
            "{ expert = \"bpfland\", score = 0.8, spread = 0.0, runs = 0 },\n  { expert = \"eevdf\", score = 0.5, spread = 0.0, runs = 0 },",
        );
        for (from, to, cost, switch_s) in costs {
            text.push_str(&format!(
                "\n[[switch]]\nfrom = \"{from}\"\nto = \"{to}\"\nscore_cost = {cost}\nspread = 0.0\nruns = 2\nrun_s = 20.0\n"
            ));
            if let Some(t) = switch_s {
                text.push_str(&format!("switch_s = {t}\n"));
            }
        }
        MappingTable::parse(&text, "test").unwrap()
    }

    /// Three confident busy ticks from `current` (cooldown 0, the given horizon, every expert
    /// but `not_usable` usable): the last record and the expert running after it.
    fn three_busy_ticks(
        table: &MappingTable,
        horizon_s: u64,
        current: &str,
        not_usable: &'static str,
    ) -> (DecisionRecord, Option<String>) {
        let config = PolicyConfig {
            cooldown: Duration::ZERO,
            horizon: Duration::from_secs(horizon_s),
            ..PolicyConfig::default()
        };
        let classes = vec!["busy".to_string(), "calm".to_string(), "odd".to_string()];
        let mut p = Policy::new(
            config,
            classes,
            table,
            move |e| e != not_usable,
            Some(current.into()),
        )
        .unwrap();
        let last = (1..=3)
            .map(|s| p.on_tick(at(s), &BUSY).unwrap())
            .last()
            .unwrap();
        (last, p.current_expert().map(str::to_string))
    }

    /// The table's busy row scores lavd 0.9 and eevdf 0.5 (gain 0.4 for eevdf → lavd). With a
    /// measured cost of 0.5 per switch in a 20 s run: horizon 20 s gives 0.4 · 20/20 = 0.4 ≤ 0.5
    /// (stay), horizon 60 s gives 1.2 > 0.5 (switch). A pair the table has no cost for, or a
    /// running expert it has no score for, switches as before.
    #[test]
    fn a_switch_that_does_not_pay_for_its_cost_is_not_made() {
        let table = table_with_costs(&[("eevdf", "lavd", 0.5)]);
        let run =
            |horizon_s: u64, current: &str| three_busy_ticks(&table, horizon_s, current, "").0;
        let short = run(20, "eevdf");
        assert_eq!(short.action, Action::Stay);
        match short.reason {
            Reason::NotWorthSwitching {
                gain,
                cost,
                run_s,
                horizon_s,
                switch_s,
            } => {
                assert!((gain - 0.4).abs() < 1e-12);
                assert_eq!((cost, run_s, horizon_s, switch_s), (0.5, 20.0, 20.0, 0.0));
            }
            other => panic!("{other:?}"),
        }
        assert!(
            short.summary().contains("not worth a switch"),
            "{}",
            short.summary()
        );
        assert_eq!(run(60, "eevdf").action, Action::Switch);
        // bpfland → lavd: no measured cost; rusty: no score in the table.
        assert_eq!(run(20, "bpfland").action, Action::Switch);
        assert_eq!(run(20, "rusty").action, Action::Switch);
    }

    /// busy: lavd 0.9, bpfland 0.8, eevdf 0.5; measured from eevdf: lavd costs `lavd_cost`,
    /// bpfland 0.05, in 20 s runs. Net values (horizon h): lavd 0.4·h/20 − lavd_cost,
    /// bpfland 0.3·h/20 − 0.05.
    /// * h = 20, lavd 0.5: lavd −0.1, bpfland 0.25 → bpfland, net of cost.
    /// * h = 60, lavd 0.5: lavd 0.7, bpfland 0.85 → bpfland (half a minute of loading eats
    ///   more than lavd's lead earns in a minute).
    /// * h = 60, lavd 0.2: lavd 1.0 > 0.85 → lavd, the first choice, a plain switch.
    /// * h = 20, lavd 0.5, bpfland not usable: nothing pays → stay, numbers of lavd.
    #[test]
    fn the_switch_goes_where_it_pays_most_net_of_its_cost() {
        let run = |horizon_s: u64, lavd_cost: f64, not_usable: &'static str| {
            let table =
                table_with_costs(&[("eevdf", "lavd", lavd_cost), ("eevdf", "bpfland", 0.05)]);
            three_busy_ticks(&table, horizon_s, "eevdf", not_usable)
        };
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;

        let (r, now) = run(20, 0.5, "");
        assert_eq!(r.action, Action::Switch);
        assert_eq!(r.target_expert.as_deref(), Some("bpfland"));
        assert_eq!(now.as_deref(), Some("bpfland"));
        match &r.reason {
            Reason::SwitchNetOfCost {
                preferred,
                preferred_net,
                net,
            } => {
                assert_eq!(preferred, "lavd");
                assert!(close(*preferred_net, -0.1) && close(*net, 0.25), "{r:?}");
            }
            other => panic!("{other:?}"),
        }
        assert!(
            r.summary().contains("lavd would net -0.100"),
            "{}",
            r.summary()
        );

        let (r, _) = run(60, 0.5, "");
        assert_eq!(r.target_expert.as_deref(), Some("bpfland"));
        assert!(
            matches!(r.reason, Reason::SwitchNetOfCost { net, .. } if close(net, 0.85)),
            "{r:?}"
        );

        let (r, now) = run(60, 0.2, "");
        assert_eq!((r.action, r.reason), (Action::Switch, Reason::Switch));
        assert_eq!(now.as_deref(), Some("lavd"));

        let (r, now) = run(20, 0.5, "bpfland");
        assert_eq!(r.action, Action::Stay);
        assert_eq!(r.target_expert.as_deref(), Some("lavd"));
        assert!(
            matches!(r.reason, Reason::NotWorthSwitching { gain, cost, .. } if close(gain, 0.4) && close(cost, 0.5)),
            "{r:?}"
        );
        assert_eq!(now.as_deref(), Some("eevdf"));
    }

    /// The gain only starts once the switch is done. busy, from eevdf, horizon 60 s, 20 s runs:
    /// lavd (gain 0.4) costs nothing measurable but takes 50 s to switch: 0.4 · 10/20 = 0.2;
    /// bpfland (gain 0.3, cost 0.05, 2 s): 0.3 · 58/20 − 0.05 = 0.82 → bpfland. With bpfland
    /// unusable and lavd taking the whole horizon (60 s): nothing is gained → stay.
    #[test]
    fn a_slow_switch_earns_only_after_it_is_done() {
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        let table = table_with_timed_costs(&[
            ("eevdf", "lavd", 0.0, Some(50.0)),
            ("eevdf", "bpfland", 0.05, Some(2.0)),
        ]);
        let (r, now) = three_busy_ticks(&table, 60, "eevdf", "");
        assert_eq!(now.as_deref(), Some("bpfland"));
        assert!(
            matches!(r.reason, Reason::SwitchNetOfCost { preferred_net, net, .. }
                if close(preferred_net, 0.2) && close(net, 0.82)),
            "{r:?}"
        );
        let table = table_with_timed_costs(&[("eevdf", "lavd", 0.0, Some(60.0))]);
        let (r, now) = three_busy_ticks(&table, 60, "eevdf", "bpfland");
        assert_eq!(now.as_deref(), Some("eevdf"));
        assert!(
            matches!(r.reason, Reason::NotWorthSwitching { switch_s, .. } if switch_s == 60.0),
            "{r:?}"
        );
        assert!(r.summary().contains("60.0 s switching"), "{}", r.summary());
    }

    /// A table whose default is cosmos, with flash ahead of it for "busy" by `lead` (noise
    /// 0.05) and "calm" mapped to cosmos; the policy runs `current`.
    fn settling_policy(lead: f64, current: &str) -> Policy {
        let table = MappingTable::parse(
            &format!(
                r#"
schema = "asa.mapping"
version = 1
source = "hand-written"
created = "2026-11-28"
default_expert = "cosmos"
[[class]]
name = "busy"
noise = 0.05
ranked = [
  {{ expert = "flash", score = {}, spread = 0.0, runs = 1 }},
  {{ expert = "cosmos", score = 0.5, spread = 0.0, runs = 1 }},
]
[[class]]
name = "calm"
ranked = [{{ expert = "cosmos", score = 0.7, spread = 0.0, runs = 1 }}]
"#,
                0.5 + lead
            ),
            "test",
        )
        .unwrap();
        let classes = vec!["busy".to_string(), "calm".to_string(), "odd".to_string()];
        Policy::new(
            PolicyConfig::default(),
            classes,
            &table,
            |_| true,
            Some(current.into()),
        )
        .unwrap()
    }

    /// The 7-expert lab table's shape: every class maps to the default or to an expert within
    /// the noise of it. Running the default, no vote can change the scheduler.
    #[test]
    fn a_table_whose_classes_all_stay_within_the_noise_of_the_default_is_settled() {
        let p = settling_policy(0.03, "cosmos");
        assert!(p.classes_that_would_move(at(1)).is_empty());
        assert!(p.settled(at(1)));
    }

    #[test]
    fn a_class_whose_expert_leads_beyond_the_noise_keeps_the_agent_deciding() {
        let p = settling_policy(0.2, "cosmos");
        assert_eq!(
            p.classes_that_would_move(at(1)),
            vec![("busy".to_string(), "flash".to_string())]
        );
        assert!(!p.settled(at(1)));
    }

    /// After a failure the kernel default runs: an unsure vote would go back to the default
    /// expert, so the agent is not settled even when no class leads beyond the noise.
    #[test]
    fn away_from_the_default_expert_the_agent_is_never_settled() {
        let p = settling_policy(0.03, "eevdf");
        assert!(!p.settled(at(1)));
        let mut p = settling_policy(0.03, "cosmos");
        p.note_expert_failed("cosmos", at(1), "test");
        p.note_expert_failed("cosmos", at(2), "test");
        assert!(
            !p.quarantined(at(3)).is_empty(),
            "two failures (the default) quarantine cosmos"
        );
        assert!(!p.settled(at(3)), "a quarantined default is not settled");
    }

    #[test]
    fn a_table_without_a_default_expert_is_never_settled() {
        let p = policy(0, "");
        assert!(p
            .classes_that_would_move(at(1))
            .iter()
            .all(|(c, _)| c != "odd"));
        assert!(!p.settled(at(1)));
    }

    /// The lab's disk_io row (stage 2 table of 2026-11-23: mean ± spread over 4 runs). From
    /// bpfland, lavd leads by 0.026 while two standard errors of the difference are 0.094: the
    /// agent stays (live, it had switched bpfland → rusty on a lead of 0.008 and spent 7.4 s of
    /// a 40 s run switching). From eevdf, lavd leads by 0.176 > 0.156: it switches. A class
    /// `noise` (calibration kept the default within it) holds a switch the same way.
    #[test]
    fn a_lead_within_the_noise_is_not_worth_a_switch() {
        let table = MappingTable::parse(
            r#"
schema = "asa.mapping"
version = 1
source = "hand-written"
created = "2026-11-25"
[[class]]
name = "busy"
ranked = [
  { expert = "lavd", score = 0.396, spread = 0.084, runs = 4 },
  { expert = "rusty", score = 0.378, spread = 0.056, runs = 4 },
  { expert = "bpfland", score = 0.370, spread = 0.042, runs = 4 },
  { expert = "eevdf", score = 0.220, spread = 0.132, runs = 4 },
]
[[class]]
name = "calm"
noise = 0.2
ranked = [
  { expert = "bpfland", score = 0.75, spread = 0.0, runs = 1 },
  { expert = "eevdf", score = 0.7, spread = 0.0, runs = 1 },
]
"#,
            "test",
        )
        .unwrap();
        let close = |a: f64, b: f64| (a - b).abs() < 1e-3;
        let (r, now) = three_busy_ticks(&table, 60, "bpfland", "");
        assert_eq!(r.action, Action::Stay);
        assert_eq!(now.as_deref(), Some("bpfland"));
        assert!(
            matches!(r.reason, Reason::WithinNoise { gain, threshold }
                if close(gain, 0.026) && close(threshold, 0.0939)),
            "{r:?}"
        );
        assert!(r.summary().contains("within the calibration noise"));
        // rusty (lead 0.008) is no way round it either, with lavd not usable.
        let (r, _) = three_busy_ticks(&table, 60, "bpfland", "lavd");
        assert!(matches!(r.reason, Reason::WithinNoise { .. }), "{r:?}");
        let (r, now) = three_busy_ticks(&table, 60, "eevdf", "");
        assert_eq!((r.action, now.as_deref()), (Action::Switch, Some("lavd")));

        let classes = vec!["busy".to_string(), "calm".to_string(), "odd".to_string()];
        let config = PolicyConfig {
            cooldown: Duration::ZERO,
            ..PolicyConfig::default()
        };
        let mut p = Policy::new(config, classes, &table, |_| true, Some("eevdf".into())).unwrap();
        let last = (1..=3).map(|s| p.on_tick(at(s), &CALM).unwrap()).last();
        assert!(
            matches!(last.unwrap().reason, Reason::WithinNoise { threshold, .. } if threshold == 0.2)
        );
    }

    /// A pair calibration could not measure (`runs = 0`, its switch never completed inside a
    /// run) is not free: it costs the largest measured cost of the table. busy from eevdf,
    /// horizon 20 s: lavd (gain 0.4, unmeasured) would net 0.4 if free, 0.4 − 0.38 = 0.02 at the
    /// prior; bpfland (gain 0.3, measured 0.05) nets 0.25 → bpfland.
    #[test]
    fn an_unmeasured_switch_costs_the_largest_measured_cost() {
        let mut text = TABLE.replace(
            "{ expert = \"bpfland\", score = 0.8, spread = 0.0, runs = 0 },",
            "{ expert = \"bpfland\", score = 0.8, spread = 0.0, runs = 0 },\n  { expert = \"eevdf\", score = 0.5, spread = 0.0, runs = 0 },",
        );
        for (from, to, cost, runs) in [
            ("eevdf", "lavd", 0.0, 0),
            ("eevdf", "bpfland", 0.05, 2),
            ("rusty", "eevdf", 0.38, 1),
        ] {
            text.push_str(&format!(
                "\n[[switch]]\nfrom = \"{from}\"\nto = \"{to}\"\nscore_cost = {cost}\nspread = 0.0\nruns = {runs}\nrun_s = 20.0\n"
            ));
        }
        let table = MappingTable::parse(&text, "test").unwrap();
        let (r, now) = three_busy_ticks(&table, 20, "eevdf", "");
        assert_eq!(now.as_deref(), Some("bpfland"));
        assert!(
            matches!(r.reason, Reason::SwitchNetOfCost { preferred_net, net, .. }
                if (preferred_net - 0.02).abs() < 1e-9 && (net - 0.25).abs() < 1e-9),
            "{r:?}"
        );
    }

    /// The lab's failure (issue 32): lavd is ejected each time it attaches. busy ranks lavd,
    /// then bpfland. Cooldown 15 s, default quarantine (2 failures in 600 s → 60 s, doubling).
    /// lavd is chosen on tick 3 and fails at 5; chosen again when the cooldown ends (20) and
    /// fails at 22: quarantined until 82, so busy gets bpfland meanwhile, and every record says
    /// why. When bpfland fails twice as well, busy falls back to EEVDF.
    #[test]
    fn an_expert_that_keeps_failing_is_quarantined_and_the_class_falls_to_the_next() {
        let mut p = policy(15, "");
        for s in 1..=3 {
            p.on_tick(at(s), &BUSY).unwrap();
        }
        assert_eq!(p.current_expert(), Some("lavd"));
        assert_eq!(p.note_expert_failed("lavd", at(5), "ejected"), None);
        p.note_external_switch("eevdf", at(5));
        let mut chosen = Vec::new();
        let mut records = Vec::new();
        let mut quarantines = Vec::new();
        for s in 6..=100 {
            let r = p.on_tick(at(s), &BUSY).unwrap();
            if r.action == Action::Switch {
                chosen.push((s, r.target_expert.clone().unwrap()));
                if r.target_expert.as_deref() == Some("lavd") {
                    // Ejected 2 s after each attach.
                    let q = p.note_expert_failed("lavd", at(s + 2), "ejected");
                    quarantines.push(q.unwrap().as_secs());
                    p.note_external_switch("eevdf", at(s + 2));
                }
            }
            records.push(r);
        }
        // lavd again at 20 (cooldown from 5), fails at 22: quarantined until 82; bpfland once
        // the cooldown from 22 ends (37). lavd ranks first, so it is tried again when its
        // quarantine ends (82), fails at 84: quarantined for twice as long; bpfland at 99.
        assert_eq!(
            chosen,
            vec![
                (20, "lavd".into()),
                (37, "bpfland".into()),
                (82, "lavd".into()),
                (99, "bpfland".into())
            ]
        );
        assert_eq!(quarantines, [60, 120]);
        let during = &records[(50 - 6) as usize];
        assert_eq!(during.quarantined, BTreeMap::from([("lavd".into(), 32.0)]));
        assert!(
            during.summary().contains("[quarantined: lavd (32 s left)]"),
            "{}",
            during.summary()
        );
        let line = serde_json::to_string(during).unwrap();
        assert!(line.contains(r#""quarantined":{"lavd":32.0}"#), "{line}");
        // Before any quarantine the record has no such key (older readers see no change).
        assert!(!serde_json::to_string(&records[0])
            .unwrap()
            .contains("quarantined"));
        let entries = p.quarantine_entries(at(100));
        assert_eq!(entries.len(), 1);
        assert_eq!((entries[0].level, entries[0].total_failures), (2, 3));
        assert_eq!(entries[0].quarantined_for_s, Some(104.0));

        // Both quarantined: the class falls back to the kernel default.
        let mut p = policy(0, "");
        for e in ["lavd", "bpfland"] {
            p.note_expert_failed(e, at(0), "x");
            p.note_expert_failed(e, at(1), "x");
        }
        p.note_external_switch("lavd", at(1));
        let r = (2..=4)
            .map(|s| p.on_tick(at(s), &BUSY).unwrap())
            .last()
            .unwrap();
        assert_eq!(r.target_expert.as_deref(), Some("eevdf"));
        assert_eq!(r.action, Action::Switch);
        assert_eq!(r.quarantined.len(), 2);
        // The kernel default is never quarantined.
        assert_eq!(p.note_expert_failed("eevdf", at(5), "x"), None);
        assert_eq!(p.note_expert_failed("eevdf", at(6), "x"), None);
        assert!(p.quarantined(at(7)).keys().all(|e| e != "eevdf"));
    }

    /// An expert that runs healthy_after (300 s) without failing is forgiven: a single later
    /// failure quarantines nothing.
    #[test]
    fn an_expert_that_runs_long_enough_is_forgiven() {
        let mut p = policy(0, "");
        p.note_expert_failed("lavd", at(0), "x");
        for s in 1..=3 {
            p.on_tick(at(s), &BUSY).unwrap();
        }
        assert_eq!(p.current_expert(), Some("lavd"));
        // Fails at 200 s (197 s after its start): quarantined.
        assert!(p.note_expert_failed("lavd", at(200), "x").is_some());
        let mut p = policy(0, "");
        p.note_expert_failed("lavd", at(0), "x");
        for s in 1..=3 {
            p.on_tick(at(s), &BUSY).unwrap();
        }
        // Runs from 3 s; the tick at 303 s forgives it.
        p.on_tick(at(303), &BUSY).unwrap();
        assert_eq!(p.note_expert_failed("lavd", at(304), "x"), None);
    }

    #[test]
    fn wrong_probability_count_is_an_error() {
        let mut p = policy(0, "");
        assert!(p.on_tick(at(1), &[0.5, 0.5]).is_err());
    }
}
