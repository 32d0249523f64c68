//! The systemd watchdog's heartbeat: the decision loop (and the wait for a foreign scheduler)
//! beats, a thread pings systemd while the beats come.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::sd_notify;
use crate::stop::Stop;

/// The systemd watchdog: a thread sends `WATCHDOG=1` at half the interval systemd asks for,
/// as long as the decision loop (or the wait for a foreign scheduler) has shown progress within
/// the interval, or is inside a switch of bounded length. A stuck agent stops pinging and
/// systemd restarts it. Without a watchdog (not under systemd) beats cost two atomic stores.
pub struct Heartbeat {
    origin: Instant,
    last_ms: AtomicU64,
    busy_until_ms: AtomicU64,
}

impl Heartbeat {
    /// A heartbeat, and the pinging thread when systemd asks for a watchdog; the thread ends
    /// with `stop`.
    pub fn start(stop: Stop) -> Arc<Self> {
        let heartbeat = Arc::new(Self {
            origin: Instant::now(),
            last_ms: AtomicU64::new(0),
            busy_until_ms: AtomicU64::new(0),
        });
        if let Some(interval) = sd_notify::watchdog_interval() {
            log::info!(
                "systemd watchdog: {:.0} s; pinging every {:.0} s while the agent makes progress",
                interval.as_secs_f64(),
                interval.as_secs_f64() / 2.0
            );
            let hb = heartbeat.clone();
            let spawned = std::thread::Builder::new()
                .name("watchdog".into())
                .spawn(move || {
                    let mut warned = false;
                    while !stop.wait_until(Instant::now() + interval / 2) {
                        if hb.alive(interval) {
                            sd_notify::notify_or_log("WATCHDOG=1");
                            warned = false;
                        } else if !warned {
                            log::error!(
                                "the decision loop has made no progress for {:.0} s: no watchdog ping (systemd restarts a stuck agent)",
                                interval.as_secs_f64()
                            );
                            warned = true;
                        }
                    }
                });
            if let Err(e) = spawned {
                log::warn!("no watchdog thread: {e}");
            }
        }
        heartbeat
    }

    fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }

    /// The loop made progress now.
    pub fn beat(&self) {
        self.last_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    /// The loop waits for something bounded by `bound` (zero: not any more).
    pub fn busy_for(&self, bound: Duration) {
        let until = if bound.is_zero() {
            0
        } else {
            self.now_ms() + bound.as_millis() as u64
        };
        self.busy_until_ms.store(until, Ordering::Relaxed);
        self.beat();
    }

    /// True when the last beat is younger than `within`, or a bounded wait is not over.
    pub fn alive(&self, within: Duration) -> bool {
        let now = self.now_ms();
        now.saturating_sub(self.last_ms.load(Ordering::Relaxed)) < within.as_millis() as u64
            || now < self.busy_until_ms.load(Ordering::Relaxed)
    }
}
