//! The agent's stop request, shared by its threads: made once — by SIGINT, SIGTERM or SIGHUP,
//! or by a thread that ends — and seen by all.
//!
//! Invariant: a thread waiting in [`Stop::wait_until`] or [`Stop::wait`] is woken when the stop
//! is requested, and otherwise not before its deadline. Nothing polls: a thread that waits for
//! its next tick wakes once per tick, not every few milliseconds to look at a flag (a sleeper
//! that wakes often is what an interactive-first scheduler favours beside the user's threads).
//! Loops that do a unit of work and look in between read [`Stop::flag`].

use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use anyhow::{Context, Result};

/// A stop request; clones share it.
#[derive(Clone, Default)]
pub struct Stop {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    requested: AtomicBool,
    /// Held while the flag is checked before a wait and while waiters are notified, so a
    /// request between the check and the wait cannot be missed.
    lock: Mutex<()>,
    woken: Condvar,
}

/// The signals that end a foreground run or the daemon.
pub const STOP_SIGNALS: [c_int; 3] = [
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGTERM,
    signal_hook::consts::SIGHUP,
];

impl Stop {
    /// A stop nobody has requested yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A stop requested by the first of `signals` to arrive: a thread blocks on them (it wakes
    /// only for a signal) and makes the request.
    pub fn on_signals(signals: &[c_int]) -> Result<Self> {
        let stop = Self::new();
        let mut incoming = signal_hook::iterator::Signals::new(signals)
            .with_context(|| format!("installing the handlers of signals {signals:?}"))?;
        let requester = stop.clone();
        std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                if let Some(signal) = incoming.forever().next() {
                    log::info!("signal {signal}: stopping");
                    requester.request();
                }
            })
            .context("spawning the signal thread")?;
        Ok(stop)
    }

    /// Requests the stop and wakes every waiter.
    pub fn request(&self) {
        self.inner.requested.store(true, Ordering::SeqCst);
        let _held = self.inner.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.inner.woken.notify_all();
    }

    /// Whether the stop was requested.
    pub fn is_requested(&self) -> bool {
        self.inner.requested.load(Ordering::SeqCst)
    }

    /// The flag itself, for loops that look at it between units of work. Read it only: a stop
    /// stored in it directly would not wake the waiters ([`Stop::request`] does).
    pub fn flag(&self) -> &AtomicBool {
        &self.inner.requested
    }

    /// Waits until `deadline` or until the stop is requested; true when it was.
    pub fn wait_until(&self, deadline: Instant) -> bool {
        let mut held = self.inner.lock.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if self.is_requested() {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            held = self
                .inner
                .woken
                .wait_timeout(held, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Waits until the stop is requested.
    pub fn wait(&self) {
        let mut held = self.inner.lock.lock().unwrap_or_else(|e| e.into_inner());
        while !self.is_requested() {
            held = self
                .inner
                .woken
                .wait(held)
                .unwrap_or_else(|e| e.into_inner());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_wait_nobody_stops_ends_at_its_deadline() {
        let stop = Stop::new();
        let t0 = Instant::now();
        assert!(!stop.wait_until(t0 + Duration::from_millis(30)));
        assert!(t0.elapsed() >= Duration::from_millis(30));
        assert!(!stop.is_requested());
    }

    #[test]
    fn a_stop_requested_before_the_wait_returns_at_once() {
        let stop = Stop::new();
        stop.request();
        let t0 = Instant::now();
        assert!(stop.wait_until(t0 + Duration::from_secs(600)));
        stop.wait();
        assert!(stop.flag().load(Ordering::SeqCst));
    }

    #[test]
    fn a_request_wakes_every_waiter_long_before_its_deadline() {
        let stop = Stop::new();
        let deadline = Instant::now() + Duration::from_secs(600);
        let waiters: Vec<_> = (0..3)
            .map(|i| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    if i == 0 {
                        stop.wait();
                        true
                    } else {
                        stop.wait_until(deadline)
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(20));
        stop.request();
        for waiter in waiters {
            // A missed wake-up would keep the waiter until its deadline, 10 minutes away.
            assert!(waiter.join().unwrap());
        }
        assert!(Instant::now() < deadline);
    }

    #[test]
    fn a_signal_requests_the_stop() {
        let stop = Stop::on_signals(&[signal_hook::consts::SIGUSR2]).unwrap();
        assert!(!stop.is_requested());
        // SAFETY: raise only sends a signal to this process, whose handler signal_hook installed.
        assert_eq!(unsafe { libc::raise(signal_hook::consts::SIGUSR2) }, 0);
        assert!(stop.wait_until(Instant::now() + Duration::from_secs(600)));
    }
}
