//! The step between a run's pin and its first load: the same preconditions for every arm
//! (a static expert, EEVDF, the agent), so that no arm's load starts on a machine another arm
//! never sees.
//!
//! 1. `sync()`: the previous runs' dirty pages are written back (bounded by
//!    [`DISK_QUIET_TIMEOUT`]);
//! 2. wait until `Dirty + Writeback` of /proc/meminfo is at most
//!    [`RunOptions::dirty_limit_kib`](crate::runner::RunOptions::dirty_limit_kib) (bounded by
//!    the same timeout; past it the run goes on with a warning);
//! 3. wait until the scheduler under test has been in place for
//!    [`RunOptions::hold`](crate::runner::RunOptions::hold), counted from when the switcher says
//!    it took over ([`ExpertSwitcher::scheduler_since`](crate::runner::ExpertSwitcher::scheduler_since)).
//!
//! Why: in the live evaluation of 2026-11-28 a static expert was attached 0.0 s before its load
//! started and stalled the probes for 0.2–4 s in 13 of 30 such load starts, 2.4–9.6 s after
//! the attach; loads started under an expert 30 s old or more stalled in 1 of 50, and the agent
//! (whose expert was 31–33 s old at its load start) and EEVDF never stalled
//! (results/2026-11-29-yardstick-stalls). A hold of 0 turns the whole step off.
//!
//! The waiting is in [`await_preconditions`] over a [`Machine`] (the clock, `sync()` and
//! /proc/meminfo), so tests drive it with a fake one.

use std::time::Duration;

use log::{info, warn};
use serde::{Deserialize, Serialize};

/// Default limit of `Dirty + Writeback` before a load starts (KiB). After `sync()` an idle
/// machine holds a few dozen KiB (the lab VM's agent saw 0.00–0.21 MiB 3 s after a kernel
/// build); 2 MiB leaves room for a logging daemon without waiting out a write burst.
pub const DIRTY_LIMIT_KIB: u64 = 2048;

/// How long `sync()`, and then the wait for the dirty-page limit, may each take before the
/// run goes on with a warning.
pub const DISK_QUIET_TIMEOUT: Duration = Duration::from_secs(30);

/// How often /proc/meminfo is read while waiting for the dirty-page limit.
const POLL: Duration = Duration::from_millis(200);

/// What the step waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preconditions {
    /// How long the scheduler under test must have run before the load starts (0: no step).
    pub hold: Duration,
    /// Most `Dirty + Writeback` (KiB) at the load start.
    pub dirty_limit_kib: u64,
    /// Bound of `sync()` and, separately, of the wait for the dirty-page limit.
    pub disk_timeout: Duration,
}

impl Preconditions {
    /// False for a hold of 0: the load starts right after the pin.
    pub fn enabled(&self) -> bool {
        !self.hold.is_zero()
    }
}

/// What the step reads and waits on: the machine, or a fake one in tests.
pub trait Machine {
    /// The wall clock (ms since the epoch).
    fn now_unix_ms(&self) -> u64;
    /// Sleep (a fake machine advances its clock).
    fn sleep(&mut self, d: Duration);
    /// `sync()`, waiting at most `timeout` for it: true when it returned in time.
    fn sync(&mut self, timeout: Duration) -> bool;
    /// `Dirty + Writeback` of /proc/meminfo (KiB); `None` when unreadable.
    fn dirty_writeback_kib(&mut self) -> Option<u64>;
}

/// This machine.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemMachine;

impl Machine for SystemMachine {
    fn now_unix_ms(&self) -> u64 {
        asa_experts::supervisor::unix_ms(std::time::SystemTime::now())
    }

    fn sleep(&mut self, d: Duration) {
        std::thread::sleep(d);
    }

    fn sync(&mut self, timeout: Duration) -> bool {
        // sync(2) cannot be interrupted: it runs on a thread of its own, which a write-back
        // slower than `timeout` leaves behind (it ends when the write-back does).
        let (done, wait) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("sync".into())
            .spawn(move || {
                // SAFETY: sync(2) takes no arguments and cannot fail.
                unsafe { libc::sync() };
                let _ = done.send(());
            });
        spawned.is_ok() && wait.recv_timeout(timeout).is_ok()
    }

    fn dirty_writeback_kib(&mut self) -> Option<u64> {
        dirty_writeback_kib(&std::fs::read_to_string("/proc/meminfo").ok()?)
    }
}

/// `Dirty + Writeback` (KiB) of a /proc/meminfo text; `None` when either line is missing.
pub fn dirty_writeback_kib(meminfo: &str) -> Option<u64> {
    let field = |name: &str| -> Option<u64> {
        meminfo.lines().find_map(|l| {
            l.strip_prefix(name)?
                .strip_prefix(':')?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
    };
    Some(field("Dirty")? + field("Writeback")?)
}

/// How much longer the scheduler that took over at `since_unix_ms` must run before it has
/// run `hold` at `now_unix_ms` (zero once it has; a `since` in the future counts as now).
pub fn hold_remaining(since_unix_ms: u64, now_unix_ms: u64, hold: Duration) -> Duration {
    hold.saturating_sub(Duration::from_millis(
        now_unix_ms.saturating_sub(since_unix_ms),
    ))
}

/// What [`await_preconditions`] did: the part of a run's [`LoadStart`] known before the load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waited {
    /// When the scheduler under test took over (ms since the epoch).
    pub scheduler_since_unix_ms: u64,
    /// Whether that time came from the switcher (else it is the pin's return).
    pub scheduler_since_known: bool,
    /// Time in `sync()` (ms).
    pub sync_ms: u64,
    /// Time waiting for the dirty-page limit (ms).
    pub dirty_wait_ms: u64,
    /// Time waiting for the scheduler's hold (ms).
    pub hold_wait_ms: u64,
    /// Whether the write-back finished and the dirty pages fell to the limit in time (`None`:
    /// not waited for, the step being off).
    pub disk_quiet: Option<bool>,
}

/// Runs the step on `machine`: `sync()`, the dirty-page limit, then the hold, for a scheduler
/// that took over at `scheduler_since` (`None`: the switcher cannot tell, and the hold counts
/// from `pinned_unix_ms`, when the pin returned). `what` names the run in the log. With a hold
/// of 0 nothing is waited for.
pub fn await_preconditions(
    machine: &mut dyn Machine,
    p: &Preconditions,
    scheduler_since: Option<u64>,
    pinned_unix_ms: u64,
    what: &str,
) -> Waited {
    let mut waited = Waited {
        scheduler_since_unix_ms: scheduler_since.unwrap_or(pinned_unix_ms),
        scheduler_since_known: scheduler_since.is_some(),
        sync_ms: 0,
        dirty_wait_ms: 0,
        hold_wait_ms: 0,
        disk_quiet: None,
    };
    if !p.enabled() {
        return waited;
    }
    let t0 = machine.now_unix_ms();
    let synced = machine.sync(p.disk_timeout);
    let t1 = machine.now_unix_ms();
    waited.sync_ms = t1.saturating_sub(t0);
    if !synced {
        warn!(
            "{what}: sync() did not return within {:?}: the load starts during the write-back",
            p.disk_timeout
        );
    }
    let mut quiet = synced;
    loop {
        let elapsed = machine.now_unix_ms().saturating_sub(t1);
        match machine.dirty_writeback_kib() {
            Some(kib) if kib <= p.dirty_limit_kib => break,
            Some(kib) if elapsed >= p.disk_timeout.as_millis() as u64 => {
                warn!(
                    "{what}: Dirty + Writeback still {kib} KiB (limit {} KiB) after {:?}: the \
                     load starts anyway",
                    p.dirty_limit_kib, p.disk_timeout
                );
                quiet = false;
                break;
            }
            Some(_) => machine.sleep(POLL),
            None => {
                warn!("{what}: /proc/meminfo unreadable: not waiting for the dirty pages");
                quiet = false;
                break;
            }
        }
    }
    let t2 = machine.now_unix_ms();
    waited.dirty_wait_ms = t2.saturating_sub(t1);
    waited.disk_quiet = Some(quiet);
    let rest = hold_remaining(waited.scheduler_since_unix_ms, t2, p.hold);
    if !rest.is_zero() {
        info!(
            "{what}: waiting {:.1} s, until the scheduler has run {:.0} s",
            rest.as_secs_f64(),
            p.hold.as_secs_f64()
        );
        machine.sleep(rest);
    }
    waited.hold_wait_ms = machine.now_unix_ms().saturating_sub(t2);
    waited
}

/// The machine when a run's first load started, and what the runner waited for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadStart {
    /// When the scheduler under test took over (ms since the epoch): a static expert's
    /// `enabled`, EEVDF's previous scheduler detached, the agent's expert taking over.
    pub scheduler_since_unix_ms: u64,
    /// False when the switcher could not tell and the pin's return stands in for it.
    pub scheduler_since_known: bool,
    /// How long the scheduler had run when the first load started (ms).
    pub scheduler_age_ms: u64,
    /// Time since the previous run's last load stopped (ms); `None` for the first run of the
    /// process.
    pub quiet_ms: Option<u64>,
    /// `Dirty + Writeback` of /proc/meminfo when the first load started (KiB); `None` when
    /// unreadable.
    pub dirty_writeback_kib: Option<u64>,
    /// Time spent waiting for the preconditions (ms): `sync_ms + dirty_wait_ms + hold_wait_ms`.
    pub waited_ms: u64,
    /// Of which in `sync()` (ms).
    pub sync_ms: u64,
    /// Of which waiting for the dirty-page limit (ms).
    pub dirty_wait_ms: u64,
    /// Of which waiting for the scheduler's hold (ms).
    pub hold_wait_ms: u64,
    /// Whether the write-back finished and the dirty pages fell to the limit in time; `None`
    /// when the step was off (a hold of 0).
    pub disk_quiet: Option<bool>,
}

impl LoadStart {
    /// The record of a load starting at `now_unix_ms` after `waited`, with `dirty_kib` read
    /// just before and the previous load stopped at `last_load_stopped_unix_ms`.
    pub fn new(
        waited: &Waited,
        now_unix_ms: u64,
        dirty_kib: Option<u64>,
        last_load_stopped_unix_ms: Option<u64>,
    ) -> Self {
        Self {
            scheduler_since_unix_ms: waited.scheduler_since_unix_ms,
            scheduler_since_known: waited.scheduler_since_known,
            scheduler_age_ms: now_unix_ms.saturating_sub(waited.scheduler_since_unix_ms),
            quiet_ms: last_load_stopped_unix_ms.map(|t| now_unix_ms.saturating_sub(t)),
            dirty_writeback_kib: dirty_kib,
            waited_ms: waited.sync_ms + waited.dirty_wait_ms + waited.hold_wait_ms,
            sync_ms: waited.sync_ms,
            dirty_wait_ms: waited.dirty_wait_ms,
            hold_wait_ms: waited.hold_wait_ms,
            disk_quiet: waited.disk_quiet,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A machine whose clock moves only when it sleeps or syncs, with scripted readings.
    struct Fake {
        now: u64,
        sync_takes_ms: u64,
        /// Dirty + Writeback readings, one per read; the last one repeats.
        dirty: Vec<Option<u64>>,
        reads: usize,
        synced: bool,
    }

    impl Fake {
        fn at(now: u64, dirty: &[Option<u64>]) -> Self {
            Self {
                now,
                sync_takes_ms: 0,
                dirty: dirty.to_vec(),
                reads: 0,
                synced: false,
            }
        }
    }

    impl Machine for Fake {
        fn now_unix_ms(&self) -> u64 {
            self.now
        }
        fn sleep(&mut self, d: Duration) {
            self.now += d.as_millis() as u64;
        }
        fn sync(&mut self, timeout: Duration) -> bool {
            self.synced = true;
            let took = self.sync_takes_ms.min(timeout.as_millis() as u64);
            self.now += took;
            self.sync_takes_ms <= timeout.as_millis() as u64
        }
        fn dirty_writeback_kib(&mut self) -> Option<u64> {
            let v = self.dirty[self.reads.min(self.dirty.len() - 1)];
            self.reads += 1;
            v
        }
    }

    fn hold(secs: u64) -> Preconditions {
        Preconditions {
            hold: Duration::from_secs(secs),
            dirty_limit_kib: 2048,
            disk_timeout: Duration::from_secs(30),
        }
    }

    #[test]
    fn the_hold_counts_from_when_the_scheduler_took_over() {
        let hold = Duration::from_secs(30);
        assert_eq!(hold_remaining(1_000, 1_000, hold), hold);
        assert_eq!(
            hold_remaining(1_000, 11_500, hold),
            Duration::from_millis(19_500)
        );
        assert_eq!(hold_remaining(1_000, 31_000, hold), Duration::ZERO);
        assert_eq!(hold_remaining(1_000, 90_000, hold), Duration::ZERO);
        // A `since` ahead of the clock (another clock's reading): the full hold.
        assert_eq!(hold_remaining(5_000, 1_000, hold), hold);
    }

    #[test]
    fn a_freshly_attached_expert_is_held_until_it_has_run_the_hold() {
        let mut m = Fake::at(100_000, &[Some(12)]);
        m.sync_takes_ms = 1_500;
        // The expert was enabled 2 s before the pin returned at 100 s.
        let w = await_preconditions(&mut m, &hold(30), Some(98_000), 100_000, "t");
        assert!(m.synced);
        assert_eq!((w.sync_ms, w.dirty_wait_ms), (1_500, 0));
        assert_eq!(w.hold_wait_ms, 30_000 - 2_000 - 1_500);
        assert_eq!(m.now, 98_000 + 30_000);
        assert_eq!(w.disk_quiet, Some(true));
        let start = LoadStart::new(&w, m.now, Some(12), Some(97_000));
        assert_eq!(start.scheduler_age_ms, 30_000);
        assert_eq!(start.quiet_ms, Some(31_000));
        assert_eq!(start.waited_ms, 28_000);
        assert!(start.scheduler_since_known);
    }

    #[test]
    fn an_expert_older_than_the_hold_starts_its_load_at_once() {
        let mut m = Fake::at(100_000, &[Some(0)]);
        let w = await_preconditions(&mut m, &hold(30), Some(40_000), 100_000, "t");
        assert_eq!(w.hold_wait_ms, 0);
        assert_eq!(m.now, 100_000);
    }

    #[test]
    fn dirty_pages_are_waited_for_until_the_limit() {
        let mut m = Fake::at(0, &[Some(90_000), Some(50_000), Some(3_000), Some(1_000)]);
        let w = await_preconditions(&mut m, &hold(1), Some(0), 0, "t");
        // Three reads above the limit, 200 ms apart, then the fourth is below it; the hold
        // (1 s from 0) has passed by then.
        assert_eq!(w.dirty_wait_ms, 600);
        assert_eq!(w.hold_wait_ms, 400);
        assert_eq!(w.disk_quiet, Some(true));
    }

    #[test]
    fn dirty_pages_that_stay_high_are_waited_for_only_up_to_the_timeout() {
        let mut m = Fake::at(0, &[Some(500_000)]);
        let w = await_preconditions(&mut m, &hold(1), Some(0), 0, "t");
        assert_eq!(w.dirty_wait_ms, 30_000);
        assert_eq!(w.disk_quiet, Some(false));
        assert_eq!(w.hold_wait_ms, 0);
    }

    #[test]
    fn a_sync_past_the_timeout_or_an_unreadable_meminfo_goes_on_with_a_warning() {
        let mut m = Fake::at(0, &[Some(0)]);
        m.sync_takes_ms = 45_000;
        let w = await_preconditions(&mut m, &hold(1), Some(0), 0, "t");
        assert_eq!((w.sync_ms, w.disk_quiet), (30_000, Some(false)));
        let mut m = Fake::at(0, &[None]);
        let w = await_preconditions(&mut m, &hold(2), Some(0), 0, "t");
        assert_eq!((w.dirty_wait_ms, w.hold_wait_ms), (0, 2_000));
        assert_eq!(w.disk_quiet, Some(false));
    }

    #[test]
    fn without_the_switchers_time_the_hold_counts_from_the_pin() {
        let mut m = Fake::at(50_000, &[Some(0)]);
        let w = await_preconditions(&mut m, &hold(5), None, 50_000, "t");
        assert_eq!(
            (w.scheduler_since_unix_ms, w.scheduler_since_known),
            (50_000, false)
        );
        assert_eq!(w.hold_wait_ms, 5_000);
    }

    #[test]
    fn a_hold_of_zero_waits_for_nothing_and_still_records_the_load_start() {
        let mut m = Fake::at(10_000, &[Some(900_000)]);
        let w = await_preconditions(&mut m, &hold(0), Some(9_990), 10_000, "t");
        assert!(!m.synced);
        assert_eq!(m.reads, 0);
        assert_eq!(w.disk_quiet, None);
        let start = LoadStart::new(&w, 10_010, Some(900_000), None);
        assert_eq!(start.scheduler_age_ms, 20);
        assert_eq!((start.quiet_ms, start.waited_ms), (None, 0));
    }

    #[test]
    fn meminfo_dirty_and_writeback_are_summed() {
        let text = "MemTotal:        4012345 kB\nDirty:               132 kB\nWriteback:            16 kB\nWritebackTmp:          0 kB\n";
        assert_eq!(dirty_writeback_kib(text), Some(148));
        assert_eq!(dirty_writeback_kib("Dirty: 5 kB\n"), None);
        assert_eq!(dirty_writeback_kib(""), None);
    }
}
