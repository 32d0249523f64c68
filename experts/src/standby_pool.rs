//! The pool of hot standbys: experts started ahead of need
//! ([`Supervisor::set_standby`](crate::supervisor::Supervisor::set_standby)), each behind its
//! own attach gate at a low priority
//! ([`SupervisorConfig::standby_nice`](crate::supervisor::SupervisorConfig::standby_nice)),
//! that load and verify their BPF programs while the active expert runs and are then parked at
//! the gate (their first open of the state file, right before attaching, is held).
//!
//! The pool never releases a gate. It hands a standby to the supervisor's switch
//! ([`StandbyPool::take`]) raised to the experts' priority and checked alive and still held
//! ([`AttachGate::is_holding`]); a lost one is reported ([`SupervisorEvent::StandbyLost`]) and
//! discarded instead. A standby is stopped with SIGKILL (never SIGINT: a signal restarts the
//! held open, which the gate would let through), and its parent-death signal is SIGKILL too
//! (the kernel detaches a killed scheduler within ~0.1 s). [`StandbyPool::check`] notices
//! standbys that park or die, stops unwanted ones and names the next missing one to start (one
//! loading at a time; one that keeps dying is retried ever more slowly,
//! [`standby_retry_delay`]). Also here: what a standby costs in memory ([`rss_kib`],
//! [`bpf_memlock_kib`]).

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

use log::{info, warn};
use serde::{Deserialize, Serialize};

use crate::attach_gate::AttachGate;
use crate::process::{describe_status, wait_at_gate, RunningExpert, Starting};
use crate::report::{ms, unix_ms, SupervisorEvent};

/// A standby may take this many times an expert's enable timeout to load (it loads at the
/// standby priority).
const STANDBY_TIMEOUT_FACTOR: u32 = 5;

/// A hot standby: an expert started ahead of need behind its attach gate.
struct Standby {
    starting: Starting,
    since: SystemTime,
    /// How long it took to reach the gate, once it did.
    loaded_in: Option<Duration>,
}

impl Standby {
    fn name(&self) -> &str {
        &self.running().expert.name
    }

    fn running(&self) -> &RunningExpert {
        self.starting
            .running
            .as_ref()
            .expect("a standby has a process")
    }

    fn gate(&self) -> &AttachGate {
        self.starting.gate.as_ref().expect("a standby has a gate")
    }

    fn pid(&self) -> u32 {
        self.running().child.id()
    }
}

/// Where a hot standby is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StandbyState {
    /// Started, loading and verifying its BPF programs.
    Loading,
    /// Loaded and held at its attach gate: a switch to it only releases the gate.
    Parked,
}

impl std::fmt::Display for StandbyState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Loading => "loading",
            Self::Parked => "parked",
        })
    }
}

/// One hot standby, for `asa status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StandbyInfo {
    /// Catalogue name.
    pub expert: String,
    /// Its process.
    pub pid: u32,
    /// When it was started (ms since the epoch).
    pub since_unix_ms: u64,
    /// Loading or parked.
    pub state: StandbyState,
    /// Process start to parked at the gate (ms), once parked.
    pub load_ms: Option<f64>,
    /// Resident memory (`VmRSS` of /proc/PID/status, KiB), when readable.
    pub rss_kib: Option<u64>,
    /// Kernel memory of its BPF maps and programs (the `memlock` of each bpf-map and bpf-prog
    /// descriptor it holds, /proc/PID/fdinfo; KiB): not in its RSS, and for rusty ten times
    /// larger (80 MiB of vmalloc'ed maps in the lab).
    #[serde(default)]
    pub bpf_kib: Option<u64>,
}

impl StandbyInfo {
    /// What it costs in memory: resident plus BPF kernel memory (KiB), when known.
    pub fn memory_kib(&self) -> Option<u64> {
        match (self.rss_kib, self.bpf_kib) {
            (None, None) => None,
            (r, b) => Some(r.unwrap_or(0) + b.unwrap_or(0)),
        }
    }
}

/// Resident memory of a process (`VmRSS` in /proc/PID/status), in KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// Kernel memory of the BPF maps and programs `pid` holds open (sum of the `memlock:` lines
/// of its bpf-map and bpf-prog descriptors in /proc/PID/fdinfo), in KiB.
pub fn bpf_memlock_kib(pid: u32) -> Option<u64> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    let mut bytes = 0u64;
    for entry in dir.flatten() {
        let Ok(target) = std::fs::read_link(entry.path()) else {
            continue;
        };
        let target = target.to_string_lossy();
        if target != "anon_inode:bpf-map" && target != "anon_inode:bpf-prog" {
            continue;
        }
        let info = format!("/proc/{pid}/fdinfo/{}", entry.file_name().to_string_lossy());
        if let Ok(text) = std::fs::read_to_string(info) {
            bytes += text
                .lines()
                .find_map(|l| l.strip_prefix("memlock:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    Some(bytes / 1024)
}

/// Set the nice value of every thread of `pid` (a nice value is per thread on Linux, and an
/// expert may have started threads at its old priority). Best effort.
fn renice_process(pid: u32, nice: i32) {
    let tids: Vec<libc::id_t> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_else(|_| vec![pid as libc::id_t]);
    for tid in tids {
        // SAFETY: plain integers.
        let _ = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, nice) };
    }
}

/// How long a lost standby's exit status is waited for before it is described by why it was
/// found lost.
const LOST_STANDBY_REAP_WAIT: Duration = Duration::from_millis(250);

/// How long to wait before starting a standby again after it was lost `failures` times in a
/// row: at once the first time, then 5 s doubling up to 2 min (an expert that cannot load must
/// not be restarted in a tight loop).
pub fn standby_retry_delay(failures: u32) -> Duration {
    match failures {
        0 | 1 => Duration::ZERO,
        n => Duration::from_secs((5u64 << (n - 2).min(5)).min(120)),
    }
}

/// A supervisor's hot standbys, the ones wanted, and the ones that keep failing.
#[derive(Default)]
pub(crate) struct StandbyPool {
    /// Hot standbys, in the order they were started.
    standby: Vec<Standby>,
    /// The standbys wanted, most wanted first (see
    /// [`Supervisor::set_standby`](crate::supervisor::Supervisor::set_standby)).
    wanted: Vec<String>,
    /// Per expert: standbys lost in a row, and when it may be started again.
    failures: HashMap<String, (u32, Instant)>,
}

impl StandbyPool {
    /// Set the standbys wanted, most wanted first.
    pub(crate) fn set_wanted(&mut self, wanted: &[String]) {
        if self.wanted != wanted {
            info!("hot standbys wanted: [{}]", wanted.join(", "));
            self.wanted = wanted.to_vec();
        }
    }

    /// The standbys wanted (as last set).
    pub(crate) fn wanted(&self) -> &[String] {
        &self.wanted
    }

    /// Want none and kill every standby.
    pub(crate) fn clear(&mut self) {
        self.wanted.clear();
        self.standby.clear();
    }

    /// True when `name` stands by (loading or parked).
    pub(crate) fn stands_by(&self, name: &str) -> bool {
        self.standby.iter().any(|s| s.name() == name)
    }

    /// Kill `name`'s standby, if there is one (never a standby of the expert that runs).
    pub(crate) fn discard(&mut self, name: &str) {
        self.standby.retain(|s| s.name() != name);
    }

    /// Add a standby just started behind its gate at the standby priority.
    pub(crate) fn add(&mut self, mut starting: Starting) {
        // At nice 19 on a busy machine loading may take much longer than a start.
        starting.timeout *= STANDBY_TIMEOUT_FACTOR;
        self.standby.push(Standby {
            starting,
            since: SystemTime::now(),
            loaded_in: None,
        });
    }

    /// The hot standbys now; with their resident memory when `with_rss` (reads /proc).
    pub(crate) fn info(&self, with_rss: bool) -> Vec<StandbyInfo> {
        self.standby
            .iter()
            .map(|s| StandbyInfo {
                expert: s.name().to_owned(),
                pid: s.pid(),
                since_unix_ms: unix_ms(s.since),
                state: if s.loaded_in.is_some() {
                    StandbyState::Parked
                } else {
                    StandbyState::Loading
                },
                load_ms: s.loaded_in.map(ms),
                rss_kib: if with_rss { rss_kib(s.pid()) } else { None },
                bpf_kib: if with_rss {
                    bpf_memlock_kib(s.pid())
                } else {
                    None
                },
            })
            .collect()
    }

    /// Take `name`'s standby out of the pool, if there is one, to be the switch's new expert
    /// (see [`Self::promote`]).
    pub(crate) fn take(
        &mut self,
        name: &str,
        expert_nice: i32,
    ) -> Option<Result<Starting, SupervisorEvent>> {
        let i = self.standby.iter().position(|s| s.name() == name)?;
        let sb = self.standby.remove(i);
        Some(self.promote(sb, expert_nice))
    }

    /// Make a standby the switch's new expert: raise it to the experts' priority and check it
    /// is alive and held at its gate (one still loading is waited for, now at full priority).
    /// A lost one is killed and reported; the switch then starts the expert afresh.
    fn promote(&mut self, mut sb: Standby, expert_nice: i32) -> Result<Starting, SupervisorEvent> {
        let pid = sb.pid();
        let name = sb.name().to_owned();
        renice_process(pid, expert_nice);
        let parked = sb.loaded_in.is_some();
        let alive = matches!(
            sb.starting.running.as_mut().map(|r| r.child.try_wait()),
            Some(Ok(None))
        );
        if parked && alive && sb.gate().is_holding() {
            info!("{name} is a parked hot standby (pid {pid})");
            return Ok(sb.starting);
        }
        if !parked && alive {
            info!("{name} is a hot standby still loading (pid {pid}); waiting for it at full priority");
            let mut starting = sb.starting;
            // From now on it has a start's time limit.
            starting.timeout =
                starting.spawned_at.elapsed() + starting.timeout / STANDBY_TIMEOUT_FACTOR;
            return wait_at_gate(starting).map_err(|e| {
                self.note_failure(&name);
                SupervisorEvent::StandbyLost {
                    expert: name,
                    pid,
                    status: format!("{e:#}"),
                    parked: false,
                    output_tail: Vec::new(),
                }
            });
        }
        Err(self.lose(sb, "no longer held at its gate".to_owned()))
    }

    /// Discard a standby (killed and reaped when dropped) and describe why.
    fn lose(&mut self, mut sb: Standby, why: String) -> SupervisorEvent {
        let pid = sb.pid();
        let name = sb.name().to_owned();
        // A killed standby's gate can let go a moment before its exit can be reaped: wait a
        // little for the exit status, which says more than "no longer held".
        let deadline = Instant::now() + LOST_STANDBY_REAP_WAIT;
        let status = loop {
            match sb.starting.running.as_mut().map(|r| r.child.try_wait()) {
                Some(Ok(Some(status))) => break describe_status(status),
                Some(Ok(None)) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                _ => break why,
            }
        };
        // Give the reader threads a moment to collect the last words.
        std::thread::sleep(Duration::from_millis(20));
        let output_tail = sb.running().output_tail(12);
        let event = SupervisorEvent::StandbyLost {
            expert: name.clone(),
            pid,
            status,
            parked: sb.loaded_in.is_some(),
            output_tail,
        };
        drop(sb);
        self.note_failure(&name);
        warn!("{event}");
        event
    }

    /// Count a lost standby of `name` and put off its next start (see
    /// [`standby_retry_delay`]).
    pub(crate) fn note_failure(&mut self, name: &str) {
        let entry = self
            .failures
            .entry(name.to_owned())
            .or_insert((0, Instant::now()));
        entry.0 += 1;
        entry.1 = Instant::now() + standby_retry_delay(entry.0);
    }

    /// Look at the standbys once (non-blocking): note the ones that parked, report and discard
    /// the ones that died or are no longer held, and stop unwanted ones (`active`, the expert
    /// that runs, is never wanted). Returns the losses and, when none is loading, the next
    /// missing standby to start (not one whose retry delay runs).
    pub(crate) fn check(&mut self, active: &str) -> (Vec<SupervisorEvent>, Option<String>) {
        let mut events = Vec::new();
        let mut i = 0;
        while i < self.standby.len() {
            let sb = &mut self.standby[i];
            let exited = match sb.starting.running.as_mut().map(|r| r.child.try_wait()) {
                Some(Ok(Some(status))) => Some(describe_status(status)),
                Some(Err(e)) => Some(format!("waiting on it: {e}")),
                _ => None,
            };
            let lost = match exited {
                Some(status) => Some(status),
                None if sb.loaded_in.is_none() => match sb.gate().wait_reached(Duration::ZERO) {
                    Ok(true) => {
                        let loaded = sb.starting.spawned_at.elapsed();
                        sb.loaded_in = Some(loaded);
                        info!(
                            "hot standby {} (pid {}) loaded in {:.0} ms; parked at its gate",
                            sb.name(),
                            sb.pid(),
                            ms(loaded)
                        );
                        let name = sb.name().to_owned();
                        self.failures.remove(&name);
                        None
                    }
                    Ok(false) if sb.starting.spawned_at.elapsed() > sb.starting.timeout => Some(
                        format!("did not finish loading within {:?}", sb.starting.timeout),
                    ),
                    Ok(false) => None,
                    Err(_) => Some("exited before it reached its gate".to_owned()),
                },
                None if !sb.gate().is_holding() => Some("no longer held at its gate".to_owned()),
                None => None,
            };
            match lost {
                Some(why) => {
                    let sb = self.standby.remove(i);
                    events.push(self.lose(sb, why));
                }
                None => i += 1,
            }
        }
        let wanted: Vec<String> = self
            .wanted
            .iter()
            .filter(|w| **w != active)
            .cloned()
            .collect();
        let before = self.standby.len();
        self.standby
            .retain(|s| wanted.iter().any(|w| w == s.name()));
        if self.standby.len() != before {
            info!(
                "stopped {} unwanted standby(s)",
                before - self.standby.len()
            );
        }
        let mut next = None;
        if self.standby.iter().all(|s| s.loaded_in.is_some()) {
            let now = Instant::now();
            next = wanted
                .iter()
                .find(|w| {
                    !self.standby.iter().any(|s| s.name() == w.as_str())
                        && self
                            .failures
                            .get(w.as_str())
                            .is_none_or(|(_, at)| *at <= now)
                })
                .cloned();
        }
        (events, next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lost standby is started again at once the first time, then after a delay that
    /// doubles from 5 s to at most 2 min: an expert that cannot load is not restarted in a
    /// tight loop.
    #[test]
    fn a_standby_lost_again_and_again_is_restarted_ever_more_slowly() {
        let delays: Vec<u64> = (1..=9).map(|n| standby_retry_delay(n).as_secs()).collect();
        assert_eq!(delays, [0, 5, 10, 20, 40, 80, 120, 120, 120]);
        assert_eq!(standby_retry_delay(u32::MAX), Duration::from_secs(120));
    }

    /// `VmRSS` of the test process itself is read, and a process that does not exist has none;
    /// likewise its BPF memory.
    #[test]
    fn resident_memory_comes_from_proc_status() {
        let own = rss_kib(std::process::id()).unwrap();
        assert!(own > 100, "{own} KiB");
        assert_eq!(rss_kib(u32::MAX - 1), None);
        // No BPF map or program open here: none of its memory.
        assert_eq!(bpf_memlock_kib(std::process::id()), Some(0));
        assert_eq!(bpf_memlock_kib(u32::MAX - 1), None);
    }
}
