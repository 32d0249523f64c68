//! Expert processes: how one is started (own process group, nice value, parent-death
//! signal, behind the attach gate or not, always from one lasting thread), signalled (through a
//! pidfd, never a pid the kernel may have given to someone else), heard (its output, last lines
//! kept), waited for at its gate, and how its end is described. No policy: which expert runs,
//! and when, is the supervisor's call.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use log::{debug, info, warn};
use nix::sys::signal::Signal;

use crate::attach_gate::{self, AttachGate, GatePolicy, ListenerHandoff};
use crate::catalogue::Expert;

/// How many lines of an expert's output are kept for error messages and `asa status`.
const OUTPUT_LINES_KEPT: usize = 200;

/// An expert process the supervisor started.
pub(crate) struct RunningExpert {
    pub(crate) expert: Expert,
    pub(crate) binary: PathBuf,
    pub(crate) child: Child,
    /// A pidfd on `child`, opened right after spawn (before it could be reaped); every signal
    /// goes through it. None without pidfd support (Linux < 5.3).
    pub(crate) pidfd: Option<OwnedFd>,
    pub(crate) output: Arc<Mutex<VecDeque<String>>>,
    /// `enable_seq` when it last attached.
    pub(crate) enable_seq: u64,
    /// True while the kernel has detached it but its process lives.
    pub(crate) ejected: bool,
    /// Its attach gate (open), if it was started behind one.
    #[allow(dead_code)]
    pub(crate) gate: Option<AttachGate>,
}

impl RunningExpert {
    /// Send `signal` to the expert's process, never to a pid it no longer owns (see
    /// [`signal_child`]). Ok(false): it was already gone.
    pub(crate) fn signal(&mut self, signal: Signal) -> std::io::Result<bool> {
        signal_child(&mut self.child, self.pidfd.as_ref(), signal)
    }

    /// SIGKILL the process (if it still runs) and reap it.
    pub(crate) fn kill_and_reap(&mut self) {
        if let Err(e) = self.signal(Signal::SIGKILL) {
            warn!(
                "killing {} (pid {}): {e}",
                self.expert.name,
                self.child.id()
            );
        }
        let _ = self.child.wait();
    }

    pub(crate) fn output_tail(&self, lines: usize) -> Vec<String> {
        let out = self.output.lock().unwrap();
        out.iter()
            .skip(out.len().saturating_sub(lines))
            .cloned()
            .collect()
    }

    /// The last lines, for an error message.
    pub(crate) fn output_for_error(&self) -> String {
        let tail = self.output_tail(12);
        if tail.iter().all(|l| l.trim().is_empty()) {
            " (it printed nothing)".to_owned()
        } else {
            format!("; its last output:\n  {}", tail.join("\n  "))
        }
    }

    /// True while the process is exiting (PF_EXITING): the kernel may already be detaching
    /// its scheduler before the process can be reaped.
    pub(crate) fn exiting(&self) -> bool {
        const PF_EXITING: u64 = 0x4;
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())) else {
            return true;
        };
        // Fields after the command name: state is the 1st, flags the 7th.
        let flags = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(6))
            .and_then(|f| f.parse::<u64>().ok());
        matches!(
            stat.rsplit_once(')')
                .and_then(|(_, r)| r.split_whitespace().next()),
            Some("Z" | "X")
        ) || flags.is_some_and(|f| f & PF_EXITING != 0)
    }
}

/// An expert process on its way to attaching.
pub(crate) struct Starting {
    pub(crate) running: Option<RunningExpert>,
    pub(crate) gate: Option<AttachGate>,
    pub(crate) spawned_at: Instant,
    pub(crate) seq_before: u64,
    pub(crate) timeout: Duration,
}

impl Drop for Starting {
    /// An expert that never finished starting must not linger (or stay blocked in the gate).
    fn drop(&mut self) {
        if let Some(mut r) = self.running.take() {
            r.kill_and_reap();
        }
    }
}

/// How an expert process is started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Launch {
    /// Attaches as soon as it can (the machine is on EEVDF).
    Now,
    /// Behind the attach gate, at the experts' priority, for the switch in progress.
    Gated,
    /// Behind the attach gate at the standby priority, for a later switch.
    Standby,
}

/// Start an expert process, directly or behind the attach gate, at nice value `nice`.
/// `seq_before` is `enable_seq` before it started, `timeout` how long it may take to attach.
pub(crate) fn spawn(
    expert: &Expert,
    binary: &Path,
    launch: Launch,
    nice: i32,
    seq_before: u64,
    timeout: Duration,
) -> Result<Starting> {
    let gated = launch != Launch::Now;
    let mut cmd = Command::new(binary);
    cmd.args(&expert.args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Own process group: a terminal's Ctrl-C reaches the agent, which stops the expert
        // in order, instead of racing it.
        .process_group(0);
    // The gated child hands its seccomp listener over before exec and keeps none.
    let handoff = if gated {
        Some(ListenerHandoff::new()?)
    } else {
        None
    };
    let handoff_fd = handoff.as_ref().map(ListenerHandoff::child_end);
    let death_signal = match launch {
        Launch::Standby => libc::SIGKILL,
        _ => libc::SIGINT,
    };
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if nice != 0 {
                // Best effort: without CAP_SYS_NICE the expert keeps the agent's priority.
                let _ = libc::setpriority(libc::PRIO_PROCESS, 0, nice);
            }
            // If the agent dies, the expert gets SIGINT and detaches: no orphaned scheduler.
            // A standby gets SIGKILL: SIGINT would restart its held open past the gate
            // (the kernel detaches a killed scheduler too).
            if libc::prctl(libc::PR_SET_PDEATHSIG, death_signal) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(fd) = handoff_fd {
                attach_gate::install_in_child(fd)?;
            }
            Ok(())
        });
    }
    let spawned_at = Instant::now();
    let mut child =
        spawn_from_lasting_thread(cmd).with_context(|| format!("starting {}", binary.display()))?;
    // Before anything could reap it: the pidfd names this process and no other.
    let pidfd = open_pidfd(&child);
    let gate = match handoff {
        Some(handoff) => match handoff
            .receive()
            .and_then(|l| AttachGate::start(l, child.id(), GatePolicy::default()))
        {
            Ok(g) => Some(g),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e.context("the attach gate could not take the listener"));
            }
        },
        None => None,
    };
    let output = Arc::new(Mutex::new(VecDeque::new()));
    spawn_reader(&expert.name, child.stdout.take(), output.clone());
    spawn_reader(&expert.name, child.stderr.take(), output.clone());
    info!(
        "started {} (pid {}){}",
        expert.name,
        child.id(),
        match launch {
            Launch::Standby => ", a hot standby loading at low priority behind its attach gate",
            Launch::Gated => ", loading it behind the attach gate",
            Launch::Now => ", waiting for sched_ext to enable it",
        }
    );
    Ok(Starting {
        running: Some(RunningExpert {
            expert: expert.clone(),
            binary: binary.to_owned(),
            child,
            pidfd,
            output,
            enable_seq: seq_before,
            ejected: false,
            gate: None,
        }),
        gate,
        spawned_at,
        seq_before,
        timeout,
    })
}

/// Wait until a gated expert waits at its gate (or fails, or times out: then it is killed).
pub(crate) fn wait_at_gate(mut starting: Starting) -> Result<Starting> {
    let expert = starting
        .running
        .as_ref()
        .expect("not finished")
        .expert
        .clone();
    loop {
        let gate = starting.gate.as_ref().expect("gated start has a gate");
        let reached = gate.wait_reached(Duration::from_millis(50));
        let running = starting.running.as_mut().expect("not finished");
        match reached {
            Ok(true) => return Ok(starting),
            Ok(false) if starting.spawned_at.elapsed() > starting.timeout => {
                let tail = running.output_for_error();
                bail!(
                    "{} did not attach within {:?} (it never finished loading); killed it{tail}",
                    expert.name,
                    starting.timeout
                );
            }
            Ok(false) => {}
            // The gate thread ended: the process is going away; reap it below.
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
        if let Some(status) = running.child.try_wait()? {
            std::thread::sleep(Duration::from_millis(50));
            bail!(
                "{} exited before it attached ({}){}",
                expert.name,
                describe_status(status),
                running.output_for_error()
            );
        }
    }
}

/// A pidfd on `child` (`pidfd_open`), or None when the kernel has none (Linux < 5.3). Open it
/// before the child is waited for: then it refers to this process even if it has exited.
fn open_pidfd(child: &Child) -> Option<OwnedFd> {
    // SAFETY: a plain syscall; the descriptor is owned below.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, child.id() as libc::pid_t, 0) };
    if fd < 0 {
        debug!(
            "pidfd_open({}): {}; signals go by pid while it is not reaped",
            child.id(),
            std::io::Error::last_os_error()
        );
        return None;
    }
    // SAFETY: a fresh descriptor nobody else owns.
    Some(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Send `signal` to `child` without ever hitting another process that reuses its pid. Through
/// `pidfd` (from [`open_pidfd`]) when there is one: a process that has exited or been reaped
/// gets nothing (`ESRCH`, Ok(false)). Without one, by pid only while `try_wait` says the child
/// has not been reaped (until its parent reaps it, the kernel gives its pid to no one).
/// Ok(true): the signal was sent.
fn signal_child(
    child: &mut Child,
    pidfd: Option<&OwnedFd>,
    signal: Signal,
) -> std::io::Result<bool> {
    let sent = match pidfd {
        Some(fd) => {
            // SAFETY: a plain syscall on a descriptor we own; no siginfo.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    fd.as_raw_fd(),
                    signal as libc::c_int,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                )
            };
            r == 0
        }
        None => {
            if child.try_wait()?.is_some() {
                return Ok(false);
            }
            // SAFETY: a plain syscall; the pid is our unreaped child's.
            unsafe { libc::kill(child.id() as libc::pid_t, signal as libc::c_int) == 0 }
        }
    };
    if sent {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::ESRCH) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// Describe how a process ended, for humans.
pub fn describe_status(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(sig)) => format!(
            "killed by {}",
            Signal::try_from(sig)
                .map(|s| s.as_str().to_owned())
                .unwrap_or_else(|_| format!("signal {sig}"))
        ),
        _ => "ended".to_owned(),
    }
}

/// A spawn request: the command and where to send the child.
type SpawnRequest = (Command, std::sync::mpsc::Sender<std::io::Result<Child>>);

/// Starts `cmd` from one thread that lives as long as the process.
///
/// `PR_SET_PDEATHSIG` (set in the expert's `pre_exec`) fires when the *thread* that forked the
/// child exits, not the process: an expert started from a short-lived thread (the mid-run
/// switch of calibration stage 2) got SIGINT and detached as soon as that thread ended. Forking
/// from this thread keeps the promise "the expert detaches when the agent dies" and nothing
/// else.
pub(crate) fn spawn_from_lasting_thread(cmd: Command) -> std::io::Result<Child> {
    use std::sync::mpsc;
    use std::sync::OnceLock;
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (requests, incoming) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("asa-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in incoming {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("starting the process spawner thread");
        Mutex::new(requests)
    });
    let (reply, child) = mpsc::channel();
    let gone = || std::io::Error::other("the process spawner thread is gone");
    spawner
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send((cmd, reply))
        .map_err(|_| gone())?;
    child.recv().map_err(|_| gone())?
}

fn spawn_reader<R: Read + Send + 'static>(
    name: &str,
    stream: Option<R>,
    sink: Arc<Mutex<VecDeque<String>>>,
) {
    let Some(stream) = stream else { return };
    let name = name.to_owned();
    std::thread::Builder::new()
        .name(format!("{name}-output"))
        .spawn(move || {
            for line in BufReader::new(stream).lines() {
                let Ok(line) = line else { break };
                debug!(target: "expert", "[{name}] {line}");
                let mut out = sink.lock().unwrap();
                if out.len() == OUTPUT_LINES_KEPT {
                    out.pop_front();
                }
                out.push_back(line);
            }
        })
        .expect("spawning an output reader thread");
}

/// Run `binary --version` to prove it can be executed (loader, shared libraries).
pub(crate) fn check_runs(binary: &Path) -> Result<()> {
    let mut child = Command::new(binary)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("executing {}", binary.display()))?;
    let t0 = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            if status.success() {
                return Ok(());
            }
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            return Err(anyhow!(
                "`{} --version` failed ({}): {}",
                binary.display(),
                describe_status(status),
                err.trim()
            ));
        }
        if t0.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            bail!("`{} --version` did not finish in 20 s", binary.display());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::Catalogue;
    /// An expert process like [`spawn`] makes one (pidfd opened right after spawn),
    /// running `sh -c script`.
    fn running_sh(script: &str) -> RunningExpert {
        let child = Command::new("/bin/sh")
            .args(["-c", script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let pidfd = open_pidfd(&child);
        assert!(pidfd.is_some(), "pidfd_open works on this kernel");
        RunningExpert {
            expert: Catalogue::builtin().require("bpfland").unwrap().clone(),
            binary: "/bin/sh".into(),
            child,
            pidfd,
            output: Arc::default(),
            enable_seq: 0,
            ejected: false,
            gate: None,
        }
    }

    /// A `sleep 30` with the pid of `reaped` (a process already reaped): the kernel is told to
    /// hand out that pid next (`/proc/sys/kernel/ns_last_pid`, root only), retried while other
    /// processes take it first.
    fn with_reused_pid(reaped: u32) -> Child {
        for _ in 0..200 {
            std::fs::write("/proc/sys/kernel/ns_last_pid", (reaped - 1).to_string())
                .expect("writing /proc/sys/kernel/ns_last_pid (the test needs root)");
            let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
            if sleeper.id() == reaped {
                return sleeper;
            }
            let _ = sleeper.kill();
            let _ = sleeper.wait();
        }
        panic!("pid {reaped} could not be handed to another process in 200 tries");
    }

    /// An expert that exited and was reaped while it was starting (what `wait_at_gate` and a
    /// lost standby do), its pid since taken by another process: dropping its `Starting`
    /// (SIGKILL, then reap) must not touch that other process. Before the pidfd it got a
    /// SIGKILL sent to the raw pid.
    #[test]
    fn a_dropped_start_whose_process_was_reaped_kills_no_one_else() {
        let mut r = running_sh("exit 0");
        assert!(r.child.wait().unwrap().success());
        let mut other = with_reused_pid(r.child.id());
        drop(Starting {
            running: Some(r),
            gate: None,
            spawned_at: Instant::now(),
            seq_before: 0,
            timeout: Duration::from_secs(1),
        });
        std::thread::sleep(Duration::from_millis(100));
        let hit = other.try_wait().unwrap();
        let _ = other.kill();
        let _ = other.wait();
        assert_eq!(hit, None, "the process that reused the pid was signalled");
    }

    /// `stop_running`'s signals (SIGINT, then SIGKILL and reap) to an expert that has already
    /// exited and been reaped, its pid since taken by another process: nothing is sent, quietly
    /// (`Ok(false)`), and the other process lives. A live expert does get them.
    #[test]
    fn signals_to_a_reaped_expert_reach_no_one_else() {
        let mut live = running_sh("sleep 30");
        assert!(
            live.signal(Signal::SIGINT).unwrap(),
            "a live expert is signalled"
        );
        assert_eq!(
            describe_status(live.child.wait().unwrap()),
            "killed by SIGINT"
        );
        // Reaped: the pidfd still names it, and it is gone.
        assert!(!live.signal(Signal::SIGINT).unwrap());
        let mut gone = running_sh("exit 0");
        assert!(gone.child.wait().unwrap().success());
        let mut other = with_reused_pid(gone.child.id());
        let sent = gone.signal(Signal::SIGINT).unwrap();
        gone.kill_and_reap();
        std::thread::sleep(Duration::from_millis(100));
        let hit = other.try_wait().unwrap();
        let _ = other.kill();
        let _ = other.wait();
        assert!(!sent, "a signal was sent for a reaped expert");
        assert_eq!(hit, None, "the process that reused the pid was signalled");
        // Without a pidfd (Linux < 5.3) the handle's own status keeps the pid out of reach.
        let mut old_kernel = running_sh("exit 0");
        old_kernel.pidfd = None;
        assert!(old_kernel.child.wait().unwrap().success());
        assert!(!old_kernel.signal(Signal::SIGKILL).unwrap());
    }

    /// A child with PR_SET_PDEATHSIG started from a thread that then exits: forked by that
    /// thread it would be killed at once; through the lasting spawner it keeps running.
    #[test]
    fn a_child_outlives_the_short_lived_thread_that_asked_for_it() {
        let start = |via_spawner: bool| {
            std::thread::spawn(move || {
                let mut cmd = Command::new("sleep");
                cmd.arg("30");
                // SAFETY: prctl is async-signal-safe.
                unsafe {
                    cmd.pre_exec(|| {
                        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        Ok(())
                    });
                }
                if via_spawner {
                    spawn_from_lasting_thread(cmd).unwrap()
                } else {
                    cmd.spawn().unwrap()
                }
            })
            .join()
            .unwrap()
        };
        let mut direct = start(false);
        let mut kept = start(true);
        std::thread::sleep(Duration::from_millis(300));
        let direct_status = direct.try_wait().unwrap();
        let kept_status = kept.try_wait().unwrap();
        let _ = kept.kill();
        let _ = kept.wait();
        let _ = direct.kill();
        let _ = direct.wait();
        assert!(
            direct_status.is_some(),
            "the control case: a child of an exited thread gets its death signal"
        );
        assert_eq!(kept_status, None, "the spawner's child was killed");
    }
}
