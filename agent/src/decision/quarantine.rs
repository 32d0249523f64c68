//! Quarantine of experts that keep failing: an expert that exits, is ejected by the kernel or
//! fails to attach [`QuarantineConfig::failures`] times within [`QuarantineConfig::window`] is
//! not chosen for [`QuarantineConfig::base`]; each further failure before it has run
//! [`QuarantineConfig::healthy_after`] without failing doubles the quarantine, up to
//! [`QuarantineConfig::max`]. Running that long resets the expert's record. The agent never
//! gives up on an expert for good (scx_loader stops after 5 tries): a quarantine ends, the
//! expert is tried again, and `asa status` and the decision log say why it is not chosen
//! meanwhile.
//!
//! Pure logic: the caller passes the time (a monotonic [`Duration`] since any fixed origin), so
//! tests drive it with a fake clock. The kernel default (EEVDF) is never recorded: it cannot
//! fail, and it is where the decision falls back to.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Default failures within the window that quarantine an expert: 2. The first failure may be
/// bad luck (a switch during a stall); a second within minutes is a pattern.
pub const DEFAULT_FAILURES: u32 = 2;
/// Default window in which failures are counted: 10 minutes.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(600);
/// Default first quarantine: 60 s (four default cooldowns).
pub const DEFAULT_BASE: Duration = Duration::from_secs(60);
/// Default longest quarantine: 1 hour (reached after 7 quarantines in a row: 60 s · 2^6).
pub const DEFAULT_MAX: Duration = Duration::from_secs(3600);
/// Default run time after which an expert counts as working again: 5 minutes.
pub const DEFAULT_HEALTHY_AFTER: Duration = Duration::from_secs(300);

/// Parameters of the quarantine.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct QuarantineConfig {
    /// Failures within `window` that start the first quarantine (at least 1).
    pub failures: u32,
    /// How long a failure counts towards the first quarantine.
    pub window: Duration,
    /// Length of the first quarantine; the n-th in a row lasts `base · 2^(n-1)`.
    pub base: Duration,
    /// Longest quarantine.
    pub max: Duration,
    /// An expert that runs this long without failing is forgiven: its failures and its
    /// back-off are reset.
    pub healthy_after: Duration,
}

impl Default for QuarantineConfig {
    fn default() -> Self {
        Self {
            failures: DEFAULT_FAILURES,
            window: DEFAULT_WINDOW,
            base: DEFAULT_BASE,
            max: DEFAULT_MAX,
            healthy_after: DEFAULT_HEALTHY_AFTER,
        }
    }
}

impl QuarantineConfig {
    /// Checks the parameters.
    pub fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.failures >= 1, "quarantine_failures must be at least 1");
        anyhow::ensure!(
            !self.base.is_zero() && self.base <= self.max,
            "the quarantine must satisfy 0 < quarantine_base_s <= quarantine_max_s"
        );
        Ok(())
    }

    /// Length of quarantine number `level` (0 = the first).
    pub fn length(&self, level: u32) -> Duration {
        let factor = 1u32.checked_shl(level.min(31)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.max)
    }
}

/// One expert's record, as `asa status` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuarantineEntry {
    /// The expert (catalogue name).
    pub expert: String,
    /// Failures in the current window (before the next quarantine, or since the last one).
    pub recent_failures: u32,
    /// Failures recorded since the agent started.
    pub total_failures: u64,
    /// Quarantines in a row (0: never, or forgiven since).
    pub level: u32,
    /// Seconds of quarantine left (None: not quarantined now).
    pub quarantined_for_s: Option<f64>,
    /// Length of the current (or last) quarantine, seconds.
    pub last_quarantine_s: Option<f64>,
    /// Why the expert last failed.
    pub last_failure: Option<String>,
}

#[derive(Debug, Clone, Default)]
struct Record {
    /// Failure times within the window (oldest first); cleared when a quarantine starts.
    failures: VecDeque<Duration>,
    total: u64,
    /// Quarantines in a row.
    level: u32,
    /// (start, end) of the current or last quarantine.
    quarantine: Option<(Duration, Duration)>,
    last_failure: Option<String>,
}

/// The quarantine: per expert, its failures and back-off. See the module documentation.
#[derive(Debug, Clone)]
pub struct Quarantine {
    config: QuarantineConfig,
    records: BTreeMap<String, Record>,
}

impl Quarantine {
    /// An empty quarantine.
    pub fn new(config: QuarantineConfig) -> Self {
        Self {
            config,
            records: BTreeMap::new(),
        }
    }

    /// The parameters.
    pub fn config(&self) -> &QuarantineConfig {
        &self.config
    }

    /// `expert` failed at `now` (exited, was ejected, did not attach) because of `why`. Returns
    /// the length of the quarantine this failure starts, if it starts one: the threshold of
    /// failures within the window is reached, or the expert has been quarantined before and
    /// not forgiven since (then each failure doubles the quarantine).
    pub fn record_failure(&mut self, expert: &str, now: Duration, why: &str) -> Option<Duration> {
        let config = self.config;
        let record = self.records.entry(expert.to_string()).or_default();
        record.total += 1;
        record.last_failure = Some(why.to_string());
        while record
            .failures
            .front()
            .is_some_and(|&t| now.saturating_sub(t) > config.window)
        {
            record.failures.pop_front();
        }
        record.failures.push_back(now);
        let on_probation = record.level > 0;
        if !on_probation && (record.failures.len() as u32) < config.failures {
            return None;
        }
        if record.quarantine.is_some_and(|(_, end)| now < end) {
            // Failed while quarantined (e.g. pinned by hand): the quarantine stands as is.
            return None;
        }
        let length = config.length(record.level);
        record.level += 1;
        record.quarantine = Some((now, now + length));
        record.failures.clear();
        Some(length)
    }

    /// `expert` has run without failing since `since`: at `now`, once that is
    /// [`QuarantineConfig::healthy_after`] or more, its record is reset. Returns true when a
    /// record was reset.
    pub fn record_running(&mut self, expert: &str, since: Duration, now: Duration) -> bool {
        if now.saturating_sub(since) < self.config.healthy_after {
            return false;
        }
        let Some(record) = self.records.get_mut(expert) else {
            return false;
        };
        if record.failures.is_empty() && record.level == 0 {
            return false;
        }
        record.failures.clear();
        record.level = 0;
        true
    }

    /// Time left in `expert`'s quarantine at `now` (None: not quarantined).
    pub fn remaining(&self, expert: &str, now: Duration) -> Option<Duration> {
        let (_, end) = self.records.get(expert)?.quarantine?;
        (now < end).then(|| end - now)
    }

    /// True while `expert` is quarantined.
    pub fn is_quarantined(&self, expert: &str, now: Duration) -> bool {
        self.remaining(expert, now).is_some()
    }

    /// Quarantined experts and the seconds left, at `now`.
    pub fn quarantined(&self, now: Duration) -> BTreeMap<String, f64> {
        self.records
            .keys()
            .filter_map(|e| Some((e.clone(), self.remaining(e, now)?.as_secs_f64())))
            .collect()
    }

    /// Every expert with a failure on record, at `now`.
    pub fn entries(&self, now: Duration) -> Vec<QuarantineEntry> {
        self.records
            .iter()
            .map(|(expert, r)| QuarantineEntry {
                expert: expert.clone(),
                recent_failures: r
                    .failures
                    .iter()
                    .filter(|&&t| now.saturating_sub(t) <= self.config.window)
                    .count() as u32,
                total_failures: r.total,
                level: r.level,
                quarantined_for_s: self.remaining(expert, now).map(|d| d.as_secs_f64()),
                last_quarantine_s: r.quarantine.map(|(start, end)| (end - start).as_secs_f64()),
                last_failure: r.last_failure.clone(),
            })
            .collect()
    }
}

/// One human line per entry, for `asa status`.
pub fn describe(entry: &QuarantineEntry) -> String {
    let state = match entry.quarantined_for_s {
        Some(left) => format!(
            "QUARANTINED for {left:.0} s more (quarantine {} in a row, {:.0} s)",
            entry.level,
            entry.last_quarantine_s.unwrap_or_default()
        ),
        None if entry.level > 0 => format!(
            "on probation after {} quarantine(s): its next failure quarantines it again",
            entry.level
        ),
        None => format!(
            "{} recent failure(s), not quarantined",
            entry.recent_failures
        ),
    };
    format!(
        "{}: {state}; {} failure(s) in all, last: {}",
        entry.expert,
        entry.total_failures,
        entry.last_failure.as_deref().unwrap_or("-")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// Defaults: 2 failures within 600 s, 60 s doubling to 3600 s, healthy after 300 s.
    fn quarantine() -> Quarantine {
        Quarantine::new(QuarantineConfig::default())
    }

    #[test]
    fn two_failures_within_the_window_quarantine_for_the_base_length() {
        let mut q = quarantine();
        assert_eq!(q.record_failure("lavd", at(0), "ejected"), None);
        assert!(!q.is_quarantined("lavd", at(1)));
        assert_eq!(q.record_failure("lavd", at(20), "ejected"), Some(at(60)));
        assert!(q.is_quarantined("lavd", at(20)));
        assert!(q.is_quarantined("lavd", at(79)));
        assert!(!q.is_quarantined("lavd", at(80)));
        assert_eq!(q.remaining("lavd", at(50)), Some(at(30)));
        assert!(!q.is_quarantined("bpfland", at(50)), "per expert");
        assert_eq!(
            q.quarantined(at(50)),
            BTreeMap::from([("lavd".into(), 30.0)])
        );
    }

    #[test]
    fn failures_further_apart_than_the_window_do_not_add_up() {
        let mut q = quarantine();
        assert_eq!(q.record_failure("lavd", at(0), "x"), None);
        assert_eq!(q.record_failure("lavd", at(601), "x"), None);
        assert_eq!(q.record_failure("lavd", at(1202), "x"), None);
        assert_eq!(q.record_failure("lavd", at(1300), "x"), Some(at(60)));
    }

    /// After a quarantine the expert is on probation: each failure doubles the quarantine
    /// (60, 120, 240, ... s), capped at an hour.
    #[test]
    fn each_failure_on_probation_doubles_the_quarantine_up_to_the_cap() {
        let mut q = quarantine();
        q.record_failure("lavd", at(0), "x");
        let mut now = at(1);
        let mut lengths = Vec::new();
        for _ in 0..9 {
            let length = q.record_failure("lavd", now, "x").expect("quarantined");
            lengths.push(length.as_secs());
            // Tried again when the quarantine ends, fails 5 s later.
            now += length + at(5);
        }
        assert_eq!(lengths, [60, 120, 240, 480, 960, 1920, 3600, 3600, 3600]);
        assert_eq!(q.entries(now)[0].level, 9);
    }

    #[test]
    fn running_healthy_long_enough_resets_the_record() {
        let mut q = quarantine();
        q.record_failure("lavd", at(0), "x");
        q.record_failure("lavd", at(10), "x");
        // Back at 70; runs 299 s: not yet forgiven.
        assert!(!q.record_running("lavd", at(70), at(369)));
        assert!(q.record_running("lavd", at(70), at(370)));
        assert!(!q.record_running("lavd", at(70), at(371)), "once");
        // A fresh start: one failure quarantines nothing, two do, for the base length again.
        assert_eq!(q.record_failure("lavd", at(400), "x"), None);
        assert_eq!(q.record_failure("lavd", at(410), "x"), Some(at(60)));
        // An expert with nothing on record has nothing to reset.
        assert!(!q.record_running("bpfland", at(0), at(1000)));
    }

    #[test]
    fn a_failure_during_a_quarantine_does_not_extend_it() {
        let mut q = quarantine();
        q.record_failure("lavd", at(0), "x");
        q.record_failure("lavd", at(1), "x");
        assert_eq!(q.record_failure("lavd", at(30), "pinned and failed"), None);
        assert_eq!(q.remaining("lavd", at(30)), Some(at(31)));
        let e = &q.entries(at(30))[0];
        assert_eq!((e.total_failures, e.level), (3, 1));
        assert_eq!(e.last_failure.as_deref(), Some("pinned and failed"));
    }

    #[test]
    fn entries_describe_the_state_for_humans() {
        let mut q = Quarantine::new(QuarantineConfig {
            failures: 1,
            ..QuarantineConfig::default()
        });
        q.record_failure("lavd", at(0), "ejected by the kernel (disabled)");
        let e = &q.entries(at(15))[0];
        assert_eq!(e.quarantined_for_s, Some(45.0));
        assert_eq!(e.last_quarantine_s, Some(60.0));
        let line = describe(e);
        assert!(line.contains("lavd: QUARANTINED for 45 s more"), "{line}");
        assert!(line.contains("last: ejected by the kernel"), "{line}");
        let line = describe(&q.entries(at(61))[0]);
        assert!(line.contains("on probation"), "{line}");
        let back: QuarantineEntry =
            serde_json::from_str(&serde_json::to_string(e).unwrap()).unwrap();
        assert_eq!(&back, e);
    }

    #[test]
    fn bad_parameters_are_refused() {
        let ok = QuarantineConfig::default();
        assert!(ok.check().is_ok());
        for bad in [
            QuarantineConfig { failures: 0, ..ok },
            QuarantineConfig {
                base: Duration::ZERO,
                ..ok
            },
            QuarantineConfig {
                base: at(7200),
                ..ok
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
        assert_eq!(ok.length(40), ok.max);
    }
}
