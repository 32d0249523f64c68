//! Steady stretches of `asa run`: while the vote has said the same thing for a while and the
//! machine's activity has not moved, a tick is a glance at three /proc files instead of a full
//! sample, classification and vote.
//!
//! Invariant: a glance never replaces a full tick unless (1) the last [`SteadyConfig::ticks`]
//! full ticks in a row each stayed on a confident vote for the same class, (2) the last full
//! tick is less than [`SteadyConfig::longest`] ago, and (3) every glance since has found the
//! activity within tolerance of the range the class's full ticks have seen. A glance that
//! finds it moved ends the streak: full ticks until the vote has held again for as many. The
//! range holds only the activity of full ticks whose own classification was the held class: a
//! writeback burst beside the same load joins it, a short burst of another load that the vote
//! sat out does not (it would hide that load when it comes to stay). What the controller does
//! (pins, failures, switches) is the decision loop's to check; per-application mode never
//! glances (its applications' classes need every walk).
//!
//! Why: next to the expert it runs, the agent's full tick (about 7 ms of CPU a second in the
//! lab VM, mostly the task walk and the model) costs the foreground a few ms of latency at
//! every tick; when nothing changes, the tick learns nothing. The settled stretch
//! (decision_loop.rs) covers a table that leaves nothing to decide; this covers a table that
//! could decide, on a machine whose load holds.
//!
//! Pure logic on plain numbers and a caller's clock, like the policy.

use std::time::Duration;

use crate::perception::procfs_source::{Activity, ActivityRange, ActivityTolerance, Counters};

/// Full ticks in a row on the same confident vote before glances replace ticks: 5 (about 5 s
/// at the default tick, one voting window's worth of agreement, short of a phase).
pub const DEFAULT_STEADY_TICKS: u32 = 5;

/// When glances may replace full ticks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SteadyConfig {
    /// Full ticks in a row on the same confident vote that make a streak steady.
    pub ticks: u32,
    /// Longest time between two full ticks while steady.
    pub longest: Duration,
    /// How far the activity may stray from the streak's baseline.
    pub tolerance: ActivityTolerance,
}

/// What a tick should be.
#[derive(Debug, Clone, PartialEq)]
pub enum TickPlan {
    /// A glance is enough: the streak is steady and the activity holds.
    Glance,
    /// A full tick; `moved` names the rate that broke a steady streak, if one did.
    Full {
        /// The activity change that ended the stretch (None: not steady, or its time is up).
        moved: Option<String>,
    },
}

/// The streak of full ticks and the glances between them.
#[derive(Debug, Clone)]
pub struct Steady {
    config: SteadyConfig,
    /// The class the vote holds, and the full ticks in a row that held it since the class
    /// came or a glance saw the activity move.
    class: Option<String>,
    streak: u32,
    /// The range of the windows at this class's full ticks that the classifier itself put in
    /// the class (moves included when it did: a writeback burst is the load's own activity).
    range: Option<ActivityRange>,
    /// When the last full tick ran.
    last_full: Option<Duration>,
    /// The latest tick's counters (full or glance), and the window that ended with them.
    latest: Option<Counters>,
    window: Option<Activity>,
}

impl Steady {
    /// No streak yet.
    pub fn new(config: SteadyConfig) -> Self {
        Steady {
            config,
            class: None,
            streak: 0,
            range: None,
            last_full: None,
            latest: None,
            window: None,
        }
    }

    /// The class the vote has held steadily, while glances may stand in for ticks.
    pub fn steady_class(&self) -> Option<&str> {
        if self.streak >= self.config.ticks && self.range.is_some() {
            self.class.as_deref()
        } else {
            None
        }
    }

    /// At a tick at `now` with this tick's glance (None: it failed): a glance or a full tick.
    pub fn plan(&mut self, now: Duration, counters: Option<Counters>) -> TickPlan {
        let previous = std::mem::replace(&mut self.latest, counters);
        self.window = match (previous, counters) {
            (Some(a), Some(b)) => Activity::between(&a, &b),
            _ => None,
        };
        let full = TickPlan::Full { moved: None };
        if self.steady_class().is_none() {
            return full;
        }
        let (Some(range), Some(last_full), Some(window)) =
            (self.range, self.last_full, self.window)
        else {
            return full;
        };
        if now >= last_full + self.config.longest {
            return full;
        }
        match range.moved(&window, &self.config.tolerance) {
            None => TickPlan::Glance,
            Some(moved) => {
                self.streak = 0;
                TickPlan::Full { moved: Some(moved) }
            }
        }
    }

    /// After a full tick at `now`: `held` is the voted class when the tick stayed on a
    /// confident vote (None: no vote, an unsure one, a switch, or the agent's own work), and
    /// `seen_as` the class this tick's classification favoured on its own. The tick counts
    /// towards the streak when the vote held; its activity joins the range only when it was
    /// also seen as the held class. Returns true when this tick made the vote steady.
    pub fn after_full_tick(
        &mut self,
        now: Duration,
        held: Option<&str>,
        seen_as: Option<&str>,
    ) -> bool {
        self.last_full = Some(now);
        let was_steady = self.steady_class().is_some();
        let Some(class) = held else {
            self.break_streak();
            return false;
        };
        if self.class.as_deref() == Some(class) {
            self.streak += 1;
        } else {
            self.class = Some(class.to_string());
            self.streak = 1;
            self.range = None;
        }
        if let (Some(window), true) = (&self.window, seen_as == Some(class)) {
            match self.range.as_mut() {
                Some(range) => range.widen(window),
                None => self.range = Some(ActivityRange::of(window)),
            }
        }
        !was_steady && self.steady_class().is_some()
    }

    /// Something outside the vote changed (the controller's state, per-application mode):
    /// full ticks until a new streak has formed.
    pub fn break_streak(&mut self) {
        self.class = None;
        self.streak = 0;
        self.range = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn config() -> SteadyConfig {
        SteadyConfig {
            ticks: 3,
            longest: Duration::from_secs(10),
            tolerance: ActivityTolerance::default(),
        }
    }

    /// A machine whose two CPUs are `busy` CPUs busy, 4000 switches a second.
    struct Machine {
        c: Counters,
    }

    impl Machine {
        fn new() -> Self {
            Machine {
                c: Counters {
                    cpus: 2,
                    disk_bytes: Some(0),
                    net_bytes: Some(0),
                    ..Counters::default()
                },
            }
        }

        /// One second of `busy` CPUs and `mib` MiB/s of disk traffic.
        fn second(&mut self, busy: f64, mib: u64) -> Counters {
            self.c.at_s += 1.0;
            self.c.total_ticks += 200;
            self.c.busy_ticks += (busy * 100.0) as u64;
            self.c.ctxt += 4000;
            self.c.disk_bytes = self.c.disk_bytes.map(|b| b + mib * 1024 * 1024);
            self.c
        }
    }

    /// Runs full ticks held on `class` until the streak is steady; returns the time.
    fn make_steady(steady: &mut Steady, m: &mut Machine, busy: f64) -> Duration {
        let mut now = Duration::ZERO;
        for i in 0..3 {
            now += S;
            assert_eq!(
                steady.plan(now, Some(m.second(busy, 0))),
                TickPlan::Full { moved: None }
            );
            let became = steady.after_full_tick(now, Some("inference"), Some("inference"));
            assert_eq!(became, i == 2, "tick {i}");
        }
        now
    }

    #[test]
    fn a_vote_held_for_the_streak_length_turns_ticks_into_glances() {
        let mut steady = Steady::new(config());
        let mut m = Machine::new();
        let mut now = make_steady(&mut steady, &mut m, 1.5);
        assert_eq!(steady.steady_class(), Some("inference"));
        for _ in 0..5 {
            now += S;
            assert_eq!(steady.plan(now, Some(m.second(1.5, 0))), TickPlan::Glance);
        }
    }

    #[test]
    fn a_streak_needs_the_same_class_in_a_row() {
        let mut steady = Steady::new(config());
        let mut m = Machine::new();
        let mut now = Duration::ZERO;
        for class in [
            "inference",
            "inference",
            "video_encode",
            "inference",
            "inference",
        ] {
            now += S;
            steady.plan(now, Some(m.second(1.5, 0)));
            assert!(
                !steady.after_full_tick(now, Some(class), Some(class)),
                "{class}"
            );
        }
        now += S;
        assert_eq!(
            steady.plan(now, Some(m.second(1.5, 0))),
            TickPlan::Full { moved: None }
        );
        assert!(steady.after_full_tick(now, Some("inference"), Some("inference")));
    }

    #[test]
    fn an_unsure_tick_breaks_the_streak() {
        let mut steady = Steady::new(config());
        let mut m = Machine::new();
        let mut now = make_steady(&mut steady, &mut m, 1.5);
        now += S;
        steady.plan(now, Some(m.second(1.5, 0)));
        now += S;
        assert_eq!(steady.plan(now, Some(m.second(1.5, 0))), TickPlan::Glance);
        // The stretch's time is up: a full tick, whose vote is unsure.
        now += Duration::from_secs(10);
        assert_eq!(
            steady.plan(now, Some(m.second(1.5, 0))),
            TickPlan::Full { moved: None }
        );
        steady.after_full_tick(now, None, None);
        assert_eq!(steady.steady_class(), None);
        now += S;
        assert_eq!(
            steady.plan(now, Some(m.second(1.5, 0))),
            TickPlan::Full { moved: None }
        );
    }

    #[test]
    fn a_full_tick_comes_at_least_every_longest() {
        let mut steady = Steady::new(config());
        let mut m = Machine::new();
        let start = make_steady(&mut steady, &mut m, 1.5);
        let mut now = start;
        let mut glances = 0;
        loop {
            now += S;
            match steady.plan(now, Some(m.second(1.5, 0))) {
                TickPlan::Glance => glances += 1,
                TickPlan::Full { moved } => {
                    assert_eq!(moved, None);
                    break;
                }
            }
        }
        assert_eq!((glances, now - start), (9, Duration::from_secs(10)));
        // Held again: still steady, glances resume at once.
        assert!(!steady.after_full_tick(now, Some("inference"), Some("inference")));
        now += S;
        assert_eq!(steady.plan(now, Some(m.second(1.5, 0))), TickPlan::Glance);
    }

    #[test]
    fn activity_that_moves_ends_the_stretch_at_the_next_glance_and_breaks_the_streak() {
        let mut steady = Steady::new(config());
        let mut m = Machine::new();
        let mut now = make_steady(&mut steady, &mut m, 1.5);
        now += S;
        assert_eq!(steady.plan(now, Some(m.second(1.5, 0))), TickPlan::Glance);
        // The load gives way to disk traffic at the same CPU time.
        now += S;
        let TickPlan::Full { moved: Some(moved) } = steady.plan(now, Some(m.second(1.5, 50)))
        else {
            panic!("a change of load went unseen")
        };
        assert!(moved.starts_with("disk"), "{moved}");
        // The vote still says inference (its window is older than the change): no glance
        // until a whole new streak has formed.
        assert!(!steady.after_full_tick(now, Some("inference"), Some("inference")));
        now += S;
        assert_eq!(
            steady.plan(now, Some(m.second(1.5, 50))),
            TickPlan::Full { moved: None }
        );
    }

    #[test]
    fn a_move_the_vote_sits_out_joins_the_range() {
        let mut steady = Steady::new(config());
        let mut m = Machine::new();
        let mut now = make_steady(&mut steady, &mut m, 1.5);
        // Writeback: a burst of disk traffic beside the same load.
        now += S;
        assert!(matches!(
            steady.plan(now, Some(m.second(1.5, 50))),
            TickPlan::Full { moved: Some(_) }
        ));
        // That tick held the vote: with two more the streak is whole again.
        assert!(!steady.after_full_tick(now, Some("inference"), Some("inference")));
        for i in 0..2 {
            now += S;
            assert_eq!(
                steady.plan(now, Some(m.second(1.5, 0))),
                TickPlan::Full { moved: None }
            );
            assert_eq!(
                steady.after_full_tick(now, Some("inference"), Some("inference")),
                i == 1,
                "tick {i}"
            );
        }
        // Steady again, and the next burst is within what this load has shown.
        now += S;
        assert_eq!(steady.plan(now, Some(m.second(1.5, 50))), TickPlan::Glance);
    }

    #[test]
    fn a_burst_of_another_load_the_vote_sits_out_stays_out_of_the_range() {
        // Steady on a quiet machine; a short burst of a CPU load that the classifier sees as
        // another class, and the vote sits out.
        let mut steady = Steady::new(config());
        let mut m = Machine::new();
        let mut now = make_steady(&mut steady, &mut m, 0.05);
        now += S;
        assert!(matches!(
            steady.plan(now, Some(m.second(2.0, 0))),
            TickPlan::Full { moved: Some(_) }
        ));
        assert!(!steady.after_full_tick(now, Some("inference"), Some("xz_compress")));
        for i in 0..2 {
            now += S;
            steady.plan(now, Some(m.second(0.05, 0)));
            assert_eq!(
                steady.after_full_tick(now, Some("inference"), Some("inference")),
                i == 1,
                "tick {i}"
            );
        }
        // Steady again; when the load comes to stay, the first glance sees it.
        now += S;
        assert!(matches!(
            steady.plan(now, Some(m.second(2.0, 0))),
            TickPlan::Full { moved: Some(_) }
        ));
    }

    #[test]
    fn a_failed_glance_means_a_full_tick() {
        let mut steady = Steady::new(config());
        let mut m = Machine::new();
        let mut now = make_steady(&mut steady, &mut m, 1.5);
        now += S;
        assert_eq!(steady.plan(now, None), TickPlan::Full { moved: None });
        steady.after_full_tick(now, Some("inference"), Some("inference"));
        // The next glance has no previous counters to compare with either.
        now += S;
        assert_eq!(
            steady.plan(now, Some(m.second(1.5, 0))),
            TickPlan::Full { moved: None }
        );
        steady.after_full_tick(now, Some("inference"), Some("inference"));
        now += S;
        assert_eq!(steady.plan(now, Some(m.second(1.5, 0))), TickPlan::Glance);
    }

    #[test]
    fn the_baseline_is_the_streaks_own_activity() {
        // Steady at 0.5 CPUs busy: a glance at 1.5 is a change, though 1.5 is a common load.
        let mut steady = Steady::new(config());
        let mut m = Machine::new();
        let mut now = make_steady(&mut steady, &mut m, 0.5);
        now += S;
        assert!(matches!(
            steady.plan(now, Some(m.second(1.5, 0))),
            TickPlan::Full { moved: Some(_) }
        ));
    }
}
