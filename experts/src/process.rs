//! Expert processes: how one is started (own process group, default signal dispositions and
//! an empty signal mask whatever the agent inherited, nice value, parent-death signal, behind
//! the attach gate or not, always from one lasting thread), signalled (through a
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
            // SIGINT must stop it, whatever the agent inherited.
            reset_signals_in_child()?;
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

/// Give the calling process default dispositions for every signal and an empty signal mask,
/// as systemd gives every service it starts. `exec` resets handled signals but keeps ignored
/// ones and the mask, so without this an expert inherits whatever the agent inherited: started
/// by `nohup` or as a script's background job the agent ignores SIGINT, and so would every
/// expert: the supervisor's SIGINT would do nothing (only the SIGKILL after the stop grace), and
/// its parent-death SIGINT neither. The dispositions are set with the system call itself: the C
/// library's `sigaction` refuses the two real-time signals it keeps for its threads (32 and 33),
/// which may be ignored too. SIGKILL and SIGSTOP cannot be changed (EINVAL, skipped).
///
/// # Safety
/// Call only in a freshly forked child before `exec` (`CommandExt::pre_exec`): it makes only
/// async-signal-safe calls (`rt_sigaction`, `sigprocmask`) and allocates nothing.
pub(crate) unsafe fn reset_signals_in_child() -> std::io::Result<()> {
    /// Linux's signals are 1..=64 (`_NSIG`), its signal sets 64 bits.
    const LAST_SIGNAL: libc::c_int = 64;
    const SIGSET_BYTES: libc::size_t = 8;
    // All zero, whatever the architecture's layout of the kernel's `struct sigaction`:
    // `SIG_DFL`, no flags, an empty mask. Larger than any layout.
    let default = [0u64; 8];
    for signal in 1..=LAST_SIGNAL {
        libc::syscall(
            libc::SYS_rt_sigaction,
            signal,
            default.as_ptr(),
            std::ptr::null_mut::<libc::c_void>(),
            SIGSET_BYTES,
        );
    }
    let mut none: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut none);
    if libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut()) != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
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

/// How long `<expert> --version` may take. Generous: under qemu TCG a large Rust binary
/// takes seconds to start; on real hardware it answers in milliseconds.
pub(crate) const VERSION_TIMEOUT: Duration = Duration::from_secs(20);

/// What `binary --version` printed (standard output, then standard error), or an error when
/// it cannot be executed (loader, shared libraries), exits with a failure or takes longer than
/// [`VERSION_TIMEOUT`]: the supervisor's preflight and `asa doctor`'s, through
/// [`crate::locate::check_version`].
pub(crate) fn version_output(binary: &Path) -> Result<String> {
    let mut cmd = Command::new(binary);
    cmd.arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| reset_signals_in_child());
    }
    let mut child = cmd
        .spawn()
        .with_context(|| format!("executing {}", binary.display()))?;
    // Read while it runs, so that no output can fill a pipe and stall it.
    let stdout = child.stdout.take().map(read_to_end_in_thread);
    let stderr = child.stderr.take().map(read_to_end_in_thread);
    let collect = |reader: Option<std::sync::mpsc::Receiver<Vec<u8>>>| {
        // A grandchild may hold the pipe open: wait briefly, never for ever.
        let bytes = reader
            .and_then(|r| r.recv_timeout(Duration::from_secs(1)).ok())
            .unwrap_or_default();
        String::from_utf8_lossy(&bytes).trim().to_owned()
    };
    let t0 = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            let (out, err) = (collect(stdout), collect(stderr));
            if status.success() {
                return Ok(match (out.is_empty(), err.is_empty()) {
                    (_, true) => out,
                    (true, false) => err,
                    (false, false) => format!("{out}\n{err}"),
                });
            }
            return Err(anyhow!(
                "`{} --version` failed ({}): {}",
                binary.display(),
                describe_status(status),
                err
            ));
        }
        if t0.elapsed() > VERSION_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "`{} --version` did not finish in {} s",
                binary.display(),
                VERSION_TIMEOUT.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Reads `stream` to its end on a thread of its own; the bytes arrive on the channel.
fn read_to_end_in_thread<R: Read + Send + 'static>(
    mut stream: R,
) -> std::sync::mpsc::Receiver<Vec<u8>> {
    let (send, receive) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("version-output".into())
        .spawn(move || {
            let mut bytes = Vec::new();
            let _ = stream.read_to_end(&mut bytes);
            let _ = send.send(bytes);
        });
    if let Err(e) = spawned {
        warn!("reading an expert's --version output: no thread: {e}");
    }
    receive
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::Catalogue;

    /// An expert process running `sh -c script`, started by [`spawn`] (see [`spawned`]).
    fn running_sh(script: &str) -> RunningExpert {
        spawned(Path::new("/bin/sh"), &["-c", script])
    }

    /// `binary args…` started by [`spawn`] as the supervisor starts an expert when the machine
    /// is on EEVDF (no gate), at the agent's priority; its pidfd is open.
    fn spawned(binary: &Path, args: &[&str]) -> RunningExpert {
        let mut expert = Catalogue::builtin().require("bpfland").unwrap().clone();
        expert.args = args.iter().map(|a| a.to_string()).collect();
        let timeout = Duration::from_secs(1);
        let mut starting = spawn(&expert, binary, Launch::Now, 0, 0, timeout).unwrap();
        let running = starting.running.take().expect("a start has a process");
        assert!(running.pidfd.is_some(), "pidfd_open works on this kernel");
        running
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
        // `exec`: the expert is `sleep` itself. A `sh` waiting for its child acts on SIGINT
        // only once the child has ended (here after 30 s, when the signal came after the fork).
        let mut live = running_sh("exec sleep 30");
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

    /// Set in the process [`an_expert_starts_with_default_signals_whatever_the_agent_inherited`]
    /// starts, which inherits ignored and blocked signals.
    const INHERITED_SIGNALS_ENV: &str = "ASA_TEST_SPAWN_WITH_INHERITED_SIGNALS";

    /// `SigIgn` and `SigBlk` of `pid` (/proc/PID/status; bit N-1 is signal N).
    fn ignored_and_blocked(pid: u32) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let mask = |key: &str| {
            let hex = status.lines().find_map(|l| l.strip_prefix(key)).unwrap();
            u64::from_str_radix(hex.trim(), 16).unwrap()
        };
        (mask("SigIgn:"), mask("SigBlk:"))
    }

    /// An agent started by `nohup` or as a script's background job ignores SIGINT (a library may
    /// also block signals), and `exec` keeps both. An expert it starts must not: it starts with
    /// every signal at its default and none blocked, so SIGINT stops it. Before, it ignored
    /// SIGINT too (`trap '' INT; cargo test` failed: `sleep 30` ended with exit code 0). The
    /// agent is this test binary run again (`INHERITED_SIGNALS_ENV` set) with SIGINT, SIGQUIT
    /// and SIGHUP ignored and SIGUSR1 blocked, so this test process keeps its own signals.
    #[test]
    fn an_expert_starts_with_default_signals_whatever_the_agent_inherited() {
        if std::env::var_os(INHERITED_SIGNALS_ENV).is_some() {
            return start_an_expert_with_inherited_signals();
        }
        let mut agent = Command::new(std::env::current_exe().unwrap());
        agent
            .args([
                "--exact",
                "process::tests::an_expert_starts_with_default_signals_whatever_the_agent_inherited",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(INHERITED_SIGNALS_ENV, "1")
            .stdin(Stdio::null());
        // SAFETY: async-signal-safe calls in the forked child.
        unsafe {
            agent.pre_exec(|| {
                for signal in [libc::SIGINT, libc::SIGQUIT, libc::SIGHUP] {
                    libc::signal(signal, libc::SIG_IGN);
                }
                let mut usr1: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut usr1);
                libc::sigaddset(&mut usr1, libc::SIGUSR1);
                if libc::sigprocmask(libc::SIG_BLOCK, &usr1, std::ptr::null_mut()) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let out = agent.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // libtest prints `test NAME ... ` before the test's own output, on the same line.
        let after = |marker: &str| {
            stdout
                .lines()
                .find_map(|l| Some(l.split_once(marker)?.1.trim().to_owned()))
                .unwrap_or_else(|| panic!("no {marker:?} in the agent's output:\n{stdout}"))
        };
        let bit = |signal: libc::c_int| 1u64 << (signal - 1);
        let inherited: Vec<u64> = after("agent masks:")
            .split_whitespace()
            .map(|m| u64::from_str_radix(m, 16).unwrap())
            .collect();
        assert!(
            inherited[0] & bit(libc::SIGINT) != 0 && inherited[1] & bit(libc::SIGUSR1) != 0,
            "the control case: the agent ignores SIGINT and blocks SIGUSR1 ({inherited:x?})"
        );
        assert_eq!(
            after("expert masks:"),
            "0000000000000000 0000000000000000",
            "SigIgn and SigBlk of the expert"
        );
        assert_eq!(after("expert after SIGINT:"), "killed by SIGINT");
    }

    /// The agent's role in [`an_expert_starts_with_default_signals_whatever_the_agent_inherited`]:
    /// start `sleep 30` as an expert, print its signal masks and how SIGINT ends it.
    fn start_an_expert_with_inherited_signals() {
        let (ignored, blocked) = ignored_and_blocked(std::process::id());
        println!("agent masks: {ignored:016x} {blocked:016x}");
        let mut expert = spawned(Path::new("sleep"), &["30"]);
        let (ignored, blocked) = ignored_and_blocked(expert.child.id());
        println!("expert masks: {ignored:016x} {blocked:016x}");
        assert!(expert.signal(Signal::SIGINT).unwrap());
        let t0 = Instant::now();
        let ended = loop {
            if let Some(status) = expert.child.try_wait().unwrap() {
                break describe_status(status);
            }
            if t0.elapsed() > Duration::from_secs(5) {
                expert.kill_and_reap();
                break "still running 5 s after SIGINT".to_owned();
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        println!("expert after SIGINT: {ended}");
    }
}
