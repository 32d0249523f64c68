//! Per-application classes that persist: each application's class probabilities → its own
//! Algorithm 1 vote → a class that changes only on sustained evidence. Pure logic: the caller
//! passes the time (a monotonic [`Duration`] since any fixed origin), so tests drive it with a
//! fake clock.
//!
//! Invariants:
//! - an application gets its first class only once its vote is confident (margin and support at
//!   least [`AppClassConfig::min_margin`] / [`AppClassConfig::min_support`]);
//! - a class, once given, changes only after another class has led the application's vote
//!   confidently for [`AppClassConfig::change_after`] without a break — a burst of a second or
//!   two (a build step, a page load) never changes it;
//! - an application not observed for [`AppClassConfig::forget_after`] is forgotten (it ended,
//!   or its group went away), and so is its state: a new one under the same key starts afresh;
//! - a class the user set ([`AppClasses::pin`]) wins over every observation until unpinned.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{ensure, Result};
use serde::{Deserialize, Serialize};

use super::voting::{TimeWeightedVoter, VotingConfig};

/// Default minimum margin of an application's vote to give or change its class.
pub const DEFAULT_MIN_MARGIN: f64 = 0.25;
/// Default minimum support (share of a full, unanimous, certain window).
pub const DEFAULT_MIN_SUPPORT: f64 = 0.5;
/// Default time another class must lead without a break before a class changes: 5 s.
pub const DEFAULT_CHANGE_AFTER: Duration = Duration::from_secs(5);
/// Default time after which an application not observed is forgotten: 10 s.
pub const DEFAULT_FORGET_AFTER: Duration = Duration::from_secs(10);

/// Parameters of the per-application classes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AppClassConfig {
    /// Algorithm 1 per application.
    pub voting: VotingConfig,
    /// Minimum vote margin to give or change a class.
    pub min_margin: f64,
    /// Minimum vote support to give or change a class.
    pub min_support: f64,
    /// How long another class must lead confidently, without a break, to change a class.
    pub change_after: Duration,
    /// How long an application may go unobserved before it is forgotten.
    pub forget_after: Duration,
}

impl Default for AppClassConfig {
    fn default() -> Self {
        Self {
            voting: VotingConfig::default(),
            min_margin: DEFAULT_MIN_MARGIN,
            min_support: DEFAULT_MIN_SUPPORT,
            change_after: DEFAULT_CHANGE_AFTER,
            forget_after: DEFAULT_FORGET_AFTER,
        }
    }
}

/// Where an application's class came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClassSource {
    /// Recognised from its behaviour.
    Recognised,
    /// Set by the user (`asa app set`, the overrides file).
    Pinned,
    /// Found hinted by a previous agent ([`AppClasses::assume`]): a starting point, not yet
    /// confirmed by this agent's observation.
    Assumed,
}

/// An application's class as `asa apps` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppClass {
    /// The class index (into the classifier's classes).
    pub class: usize,
    /// Where it came from.
    pub source: ClassSource,
    /// The vote's support for it at the last observation (1.0 for a pinned class).
    pub confidence: f64,
    /// Since when the application has had this class.
    pub since: Duration,
}

/// One application's state.
#[derive(Debug, Clone)]
struct AppState {
    voter: TimeWeightedVoter,
    class: Option<AppClass>,
    /// A class leading confidently against the current one, and since when.
    challenger: Option<(usize, Duration)>,
    first_seen: Duration,
    last_seen: Duration,
}

/// The classes of every application the agent watches, keyed by `K` (a cgroup id, a process
/// group: whatever perception groups tasks by).
#[derive(Debug, Clone)]
pub struct AppClasses<K: Ord + Clone> {
    config: AppClassConfig,
    classes: usize,
    apps: BTreeMap<K, AppState>,
    pins: BTreeMap<K, usize>,
}

impl<K: Ord + Clone> AppClasses<K> {
    /// Per-application classes over `classes` classes.
    pub fn new(config: AppClassConfig, classes: usize) -> Result<Self> {
        config.voting.check()?;
        ensure!(classes > 0, "the application classifier has no classes");
        ensure!(
            (0.0..=1.0).contains(&config.min_margin) && (0.0..=1.0).contains(&config.min_support),
            "min_margin and min_support must be within 0–1"
        );
        Ok(Self {
            config,
            classes,
            apps: BTreeMap::new(),
            pins: BTreeMap::new(),
        })
    }

    /// One observation of `app` at `now`: the classifier's probabilities over the classes.
    /// Returns the application's class after it (None while not yet recognised).
    pub fn observe(
        &mut self,
        now: Duration,
        app: &K,
        probabilities: &[f32],
    ) -> Result<Option<AppClass>> {
        let config = self.config;
        let state = match self.apps.get_mut(app) {
            Some(state) => state,
            None => {
                let voter = TimeWeightedVoter::new(config.voting, self.classes)?;
                self.apps.entry(app.clone()).or_insert(AppState {
                    voter,
                    class: None,
                    challenger: None,
                    first_seen: now,
                    last_seen: now,
                })
            }
        };
        let vote = state.voter.push(probabilities)?;
        state.last_seen = now;
        let confident = vote.margin >= config.min_margin && vote.support >= config.min_support;
        match (vote.class, &mut state.class) {
            (Some(leader), None) if confident => {
                state.class = Some(AppClass {
                    class: leader,
                    source: ClassSource::Recognised,
                    confidence: vote.support,
                    since: now,
                });
            }
            (Some(leader), Some(current)) if leader == current.class => {
                current.confidence = vote.support;
                if confident && current.source == ClassSource::Assumed {
                    current.source = ClassSource::Recognised;
                }
                state.challenger = None;
            }
            (Some(leader), Some(current)) if confident => {
                let since = match state.challenger {
                    Some((class, since)) if class == leader => since,
                    _ => now,
                };
                if now.saturating_sub(since) >= config.change_after {
                    *current = AppClass {
                        class: leader,
                        source: ClassSource::Recognised,
                        confidence: vote.support,
                        since: now,
                    };
                    state.challenger = None;
                } else {
                    state.challenger = Some((leader, since));
                }
            }
            _ => state.challenger = None,
        }
        Ok(self.class_of(app))
    }

    /// Forgets the applications not observed for `forget_after` before `now` (a pin stays);
    /// returns their keys.
    pub fn forget_unseen(&mut self, now: Duration) -> Vec<K> {
        let forget_after = self.config.forget_after;
        let gone: Vec<K> = self
            .apps
            .iter()
            .filter(|(_, s)| now.saturating_sub(s.last_seen) >= forget_after)
            .map(|(k, _)| k.clone())
            .collect();
        for key in &gone {
            self.apps.remove(key);
        }
        gone
    }

    /// The application's class: the pinned one if the user set one, else the recognised one.
    pub fn class_of(&self, app: &K) -> Option<AppClass> {
        let state = self.apps.get(app);
        if let Some(&class) = self.pins.get(app) {
            return Some(AppClass {
                class,
                source: ClassSource::Pinned,
                confidence: 1.0,
                since: state.map_or(Duration::ZERO, |s| s.first_seen),
            });
        }
        state.and_then(|s| s.class.clone())
    }

    /// Gives `app` `class` as [`ClassSource::Assumed`], without evidence (confidence 0): what a
    /// restarted agent finds an application hinted with. Observation changes it like any
    /// recognised class (another class leading for [`AppClassConfig::change_after`]) and a
    /// confident vote for it makes it recognised; an application that already has a class
    /// keeps it.
    pub fn assume(&mut self, now: Duration, app: &K, class: usize) -> Result<()> {
        ensure!(
            class < self.classes,
            "class {class} is not one of the {} classes",
            self.classes
        );
        if self.apps.get(app).is_some_and(|s| s.class.is_some()) {
            return Ok(());
        }
        let voter = TimeWeightedVoter::new(self.config.voting, self.classes)?;
        let state = self.apps.entry(app.clone()).or_insert(AppState {
            voter,
            class: None,
            challenger: None,
            first_seen: now,
            last_seen: now,
        });
        state.class = Some(AppClass {
            class,
            source: ClassSource::Assumed,
            confidence: 0.0,
            since: now,
        });
        state.last_seen = now;
        Ok(())
    }

    /// Pins `app` to `class`, whatever its behaviour says.
    pub fn pin(&mut self, app: K, class: usize) -> Result<()> {
        ensure!(
            class < self.classes,
            "class {class} is not one of the {} classes",
            self.classes
        );
        self.pins.insert(app, class);
        Ok(())
    }

    /// Removes a pin; the recognised class (if any) applies again. Returns whether there was one.
    pub fn unpin(&mut self, app: &K) -> bool {
        self.pins.remove(app).is_some()
    }

    /// The applications watched, with their class (None: not yet recognised) and first sighting.
    pub fn apps(&self) -> impl Iterator<Item = (&K, Option<AppClass>, Duration)> + '_ {
        self.apps
            .iter()
            .map(|(k, s)| (k, self.class_of(k), s.first_seen))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERACTIVE: usize = 0;
    const BATCH: usize = 1;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn tracker() -> AppClasses<u64> {
        AppClasses::new(AppClassConfig::default(), 3).unwrap()
    }

    fn sure(class: usize) -> [f32; 3] {
        let mut p = [0.05; 3];
        p[class] = 0.9;
        p
    }

    #[test]
    fn an_application_is_recognised_once_its_vote_is_confident_not_on_first_sight() {
        let mut apps = tracker();
        assert_eq!(apps.observe(secs(0), &7, &sure(BATCH)).unwrap(), None);
        assert_eq!(apps.observe(secs(1), &7, &sure(BATCH)).unwrap(), None);
        let class = apps.observe(secs(2), &7, &sure(BATCH)).unwrap().unwrap();
        assert_eq!(class.class, BATCH);
        assert_eq!(class.source, ClassSource::Recognised);
        assert_eq!(class.since, secs(2));
    }

    #[test]
    fn a_two_second_burst_of_another_class_does_not_change_the_class() {
        let mut apps = tracker();
        for t in 0..10 {
            apps.observe(secs(t), &1, &sure(INTERACTIVE)).unwrap();
        }
        for t in 10..12 {
            apps.observe(secs(t), &1, &sure(BATCH)).unwrap();
        }
        for t in 12..20 {
            let class = apps
                .observe(secs(t), &1, &sure(INTERACTIVE))
                .unwrap()
                .unwrap();
            assert_eq!(class.class, INTERACTIVE);
            assert_eq!(class.since, secs(2));
        }
    }

    #[test]
    fn sustained_evidence_changes_the_class_after_change_after() {
        let mut apps = tracker();
        for t in 0..10 {
            apps.observe(secs(t), &1, &sure(INTERACTIVE)).unwrap();
        }
        let mut changed_at = None;
        for t in 10..30 {
            let class = apps.observe(secs(t), &1, &sure(BATCH)).unwrap().unwrap();
            if class.class == BATCH && changed_at.is_none() {
                changed_at = Some(t);
                assert_eq!(class.since, secs(t));
            }
        }
        let changed_at = changed_at.expect("the class changed");
        // The new class must first lead the window confidently (3 ticks at the default voting
        // parameters), then hold for change_after.
        assert!((15..=18).contains(&changed_at), "changed at {changed_at} s");
    }

    #[test]
    fn an_interrupted_challenge_starts_again() {
        let mut apps = tracker();
        for t in 0..10 {
            apps.observe(secs(t), &1, &sure(INTERACTIVE)).unwrap();
        }
        // Batch leads for a while, then interactive wins one tick back: the challenge restarts.
        let pattern = [
            BATCH,
            BATCH,
            BATCH,
            BATCH,
            BATCH,
            BATCH,
            INTERACTIVE,
            INTERACTIVE,
            INTERACTIVE,
        ];
        for (i, class) in pattern.iter().enumerate() {
            apps.observe(secs(10 + i as u64), &1, &sure(*class))
                .unwrap();
        }
        assert_eq!(apps.class_of(&1).unwrap().class, INTERACTIVE);
    }

    #[test]
    fn ambiguous_evidence_leaves_an_application_unrecognised() {
        let mut apps = tracker();
        for t in 0..20 {
            let p = if t % 2 == 0 {
                sure(INTERACTIVE)
            } else {
                sure(BATCH)
            };
            apps.observe(secs(t), &3, &p).unwrap();
        }
        assert_eq!(apps.class_of(&3), None);
    }

    #[test]
    fn an_application_not_seen_for_forget_after_is_forgotten_and_starts_afresh() {
        let mut apps = tracker();
        for t in 0..5 {
            apps.observe(secs(t), &1, &sure(BATCH)).unwrap();
            apps.observe(secs(t), &2, &sure(BATCH)).unwrap();
        }
        for t in 5..14 {
            apps.observe(secs(t), &2, &sure(BATCH)).unwrap();
        }
        assert_eq!(apps.forget_unseen(secs(14)), vec![1]);
        assert!(apps.class_of(&1).is_none());
        assert!(apps.class_of(&2).is_some());
        assert_eq!(apps.observe(secs(15), &1, &sure(BATCH)).unwrap(), None);
    }

    #[test]
    fn a_pinned_class_wins_over_behaviour_until_unpinned() {
        let mut apps = tracker();
        apps.pin(4, INTERACTIVE).unwrap();
        for t in 0..10 {
            let class = apps.observe(secs(t), &4, &sure(BATCH)).unwrap().unwrap();
            assert_eq!(
                (class.class, class.source),
                (INTERACTIVE, ClassSource::Pinned)
            );
        }
        assert!(apps.unpin(&4));
        assert_eq!(apps.class_of(&4).unwrap().class, BATCH);
        assert!(!apps.unpin(&4));
        assert!(apps.pin(4, 3).is_err());
    }

    #[test]
    fn a_pin_outlives_forgetting() {
        let mut apps = tracker();
        apps.pin(9, BATCH).unwrap();
        apps.observe(secs(0), &9, &sure(INTERACTIVE)).unwrap();
        apps.forget_unseen(secs(60));
        assert_eq!(apps.class_of(&9).unwrap().source, ClassSource::Pinned);
    }

    #[test]
    fn an_assumed_class_holds_until_sustained_evidence_overrules_it() {
        let mut classes = AppClasses::new(AppClassConfig::default(), 2).unwrap();
        classes.assume(secs(0), &"probe", BATCH).unwrap();
        assert_eq!(classes.class_of(&"probe").unwrap().class, BATCH);
        assert_eq!(
            classes.class_of(&"probe").unwrap().source,
            ClassSource::Assumed
        );
        // Interactive evidence: not before change_after of it, then it wins.
        let mut t = 1;
        while classes.class_of(&"probe").unwrap().class == BATCH {
            classes.observe(secs(t), &"probe", &[0.95, 0.05]).unwrap();
            t += 1;
            assert!(t < 30, "sustained evidence changes an assumed class");
        }
        assert!(t > 5, "not on the first observations: changed at {t} s");
        // Assuming again does not undo what observation found.
        classes.assume(secs(t), &"probe", BATCH).unwrap();
        assert_eq!(classes.class_of(&"probe").unwrap().class, INTERACTIVE);
    }

    #[test]
    fn an_assumed_class_becomes_recognised_once_a_confident_vote_agrees() {
        let mut classes = AppClasses::new(AppClassConfig::default(), 2).unwrap();
        classes.assume(secs(0), &"build", BATCH).unwrap();
        let mut t = 1;
        while classes.class_of(&"build").unwrap().source == ClassSource::Assumed {
            classes.observe(secs(t), &"build", &[0.05, 0.95]).unwrap();
            t += 1;
            assert!(
                t < 30,
                "agreeing evidence never confirmed the assumed class"
            );
        }
        let class = classes.class_of(&"build").unwrap();
        assert_eq!(
            (class.class, class.source),
            (BATCH, ClassSource::Recognised)
        );
        assert!(class.confidence >= AppClassConfig::default().min_support);
    }
}
