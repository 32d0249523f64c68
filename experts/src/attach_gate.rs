//! The attach gate: make-before-break switching for unmodified sched_ext schedulers.
//!
//! A scx scheduler starts with `open → load → attach`. Loading (BPF verification) is the slow
//! part — scx_lavd needs ~25 s under qemu TCG — and it does not need the old scheduler gone.
//! Right before attaching, `scx_utils::scx_ops_attach!` reads `/sys/kernel/sched_ext/state` and
//! refuses to go on while another scheduler is enabled. The gate holds exactly that read: the
//! expert is started under a seccomp filter that turns its `openat()` calls into user
//! notifications; the supervisor continues every one of them at once except the first open of
//! the state file made after BPF programs were loaded, which it holds. While it is held the old
//! expert keeps scheduling; when the supervisor has stopped the old expert it releases the open,
//! the new expert reads `disabled` and attaches. The machine's time on EEVDF shrinks from
//! "stop + load + attach" to "stop + attach", and an expert that fails to load never touches the
//! running one.
//!
//! The filter only notifies `openat`; every other system call runs untouched, and after the
//! gate opens each `openat` is continued immediately by a thread that lives as long as the
//! expert (scx schedulers open few files once running).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use log::{debug, warn};

/// The file whose read the gate holds.
pub const SCHED_EXT_STATE: &str = "/sys/kernel/sched_ext/state";
/// The descriptor number the listener gets in the expert (out of the way of normal fds).
pub const LISTENER_FD: RawFd = 1021;

const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;

/// The seccomp program: notify on `openat`, allow everything else.
fn filter() -> [libc::sock_filter; 6] {
    const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    let stmt = |code, k| libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    };
    let jump = |k, jt, jf| libc::sock_filter {
        code: JEQ_K,
        jt,
        jf,
        k,
    };
    [
        stmt(LD_W_ABS, 4), // seccomp_data.arch
        jump(AUDIT_ARCH_X86_64, 0, 3),
        stmt(LD_W_ABS, 0), // seccomp_data.nr
        jump(libc::SYS_openat as u32, 0, 1),
        stmt(RET_K, libc::SECCOMP_RET_USER_NOTIF),
        stmt(RET_K, libc::SECCOMP_RET_ALLOW),
    ]
}

/// Install the filter in the calling process and move its listener to [`LISTENER_FD`].
/// Meant for `CommandExt::pre_exec`: only async-signal-safe calls.
///
/// # Safety
/// Call only in a freshly forked child before `exec`.
pub unsafe fn install_in_child() -> std::io::Result<()> {
    let prog = filter();
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    let fd = libc::syscall(
        libc::SYS_seccomp,
        libc::SECCOMP_SET_MODE_FILTER,
        libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
        &fprog as *const libc::sock_fprog,
    );
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let fd = fd as RawFd;
    if fd != LISTENER_FD {
        if libc::dup2(fd, LISTENER_FD) < 0 {
            return Err(std::io::Error::last_os_error());
        }
        libc::close(fd);
    }
    Ok(())
}

/// Which opens the gate holds.
#[derive(Debug, Clone)]
pub struct GatePolicy {
    /// The path whose open is held.
    pub path: String,
    /// Hold it only once the process has loaded BPF programs (the read right before attach,
    /// not an early capability check).
    pub require_bpf_loaded: bool,
}

impl Default for GatePolicy {
    fn default() -> Self {
        Self {
            path: SCHED_EXT_STATE.to_owned(),
            require_bpf_loaded: true,
        }
    }
}

/// The supervisor's end of a gate on one expert process.
pub struct AttachGate {
    listener: Arc<OwnedFd>,
    held: Arc<Mutex<Option<u64>>>,
    reached: Receiver<()>,
}

impl AttachGate {
    /// Take the listener out of the child `pid` (needs `pidfd_getfd`, Linux 5.6+) and start
    /// the thread that answers its notifications.
    pub fn attach_to(pid: u32, policy: GatePolicy) -> Result<Self> {
        // SAFETY: plain syscalls; the returned descriptors are owned below.
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        if pidfd < 0 {
            bail!("pidfd_open({pid}): {}", std::io::Error::last_os_error());
        }
        let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) };
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), LISTENER_FD, 0) };
        if fd < 0 {
            bail!(
                "pidfd_getfd({pid}, {LISTENER_FD}): {}",
                std::io::Error::last_os_error()
            );
        }
        let listener = Arc::new(unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
        let held = Arc::new(Mutex::new(None));
        let (tx, rx) = mpsc::channel();
        {
            let listener = listener.clone();
            let held = held.clone();
            std::thread::Builder::new()
                .name(format!("attach-gate-{pid}"))
                .spawn(move || serve(&listener, pid, &policy, &held, tx))
                .context("spawning the attach gate thread")?;
        }
        Ok(Self {
            listener,
            held,
            reached: rx,
        })
    }

    /// Wait up to `timeout` for the expert to reach the gate. `Ok(false)` on timeout; an
    /// error when the gate thread ended (the expert exited).
    pub fn wait_reached(&self, timeout: Duration) -> Result<bool> {
        match self.reached.recv_timeout(timeout) {
            Ok(()) => Ok(true),
            Err(mpsc::RecvTimeoutError::Timeout) => Ok(false),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                bail!("the expert exited before it reached attach")
            }
        }
    }

    /// True when the expert waits at the gate right now: an open is held and the kernel still
    /// has it pending (`SECCOMP_IOCTL_NOTIF_ID_VALID`: false once the process died or the
    /// held call was interrupted). A hot standby is released only after this said yes.
    pub fn is_holding(&self) -> bool {
        let Some(mut id) = *self.held.lock().unwrap() else {
            return false;
        };
        // SAFETY: the ioctl reads one u64 we own.
        let r = unsafe {
            libc::ioctl(
                self.listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
                &mut id as *mut u64,
            )
        };
        r == 0
    }

    /// Let the held open go on (and every later one).
    pub fn release(&self) -> Result<()> {
        let id = self.held.lock().unwrap().take();
        if let Some(id) = id {
            respond_continue(&self.listener, id).context("releasing the attach gate")?;
        }
        Ok(())
    }
}

impl Drop for AttachGate {
    fn drop(&mut self) {
        // Never leave an expert blocked in the gate.
        let _ = self.release();
    }
}

fn respond_continue(listener: &OwnedFd, id: u64) -> std::io::Result<()> {
    let mut resp = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: 0,
        flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
    };
    // SAFETY: the ioctl reads a seccomp_notif_resp we own.
    let r = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            &mut resp as *mut libc::seccomp_notif_resp,
        )
    };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        // ENOENT: the thread was interrupted or the process died; nothing waits any more.
        if e.raw_os_error() != Some(libc::ENOENT) {
            return Err(e);
        }
    }
    Ok(())
}

/// Read a NUL-terminated path from another process.
fn read_path(pid: u32, addr: u64) -> Option<String> {
    let mut buf = [0u8; 256];
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: reads into our own buffer; the remote side is validated by the kernel.
    let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
    let n = if n > 0 {
        n as usize
    } else {
        // The path may sit near the end of a mapping: read what /proc/pid/mem gives.
        use std::io::{Read, Seek, SeekFrom};
        let mut f = std::fs::File::open(format!("/proc/{pid}/mem")).ok()?;
        f.seek(SeekFrom::Start(addr)).ok()?;
        f.read(&mut buf).ok()?
    };
    let end = buf[..n].iter().position(|&b| b == 0)?;
    String::from_utf8(buf[..end].to_vec()).ok()
}

/// How many BPF programs the process holds open.
fn bpf_programs(pid: u32) -> usize {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    dir.flatten()
        .filter(|e| {
            std::fs::read_link(e.path())
                .map(|t| t.to_string_lossy() == "anon_inode:bpf-prog")
                .unwrap_or(false)
        })
        .count()
}

fn serve(
    listener: &OwnedFd,
    pid: u32,
    policy: &GatePolicy,
    held: &Mutex<Option<u64>>,
    reached: Sender<()>,
) {
    let mut gate_open = false;
    loop {
        let mut pfd = libc::pollfd {
            fd: listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd we own.
        let r = unsafe { libc::poll(&mut pfd, 1, 200) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            warn!("attach gate of {pid}: poll: {e}");
            return;
        }
        if pfd.revents & (libc::POLLHUP | libc::POLLERR) != 0 {
            debug!("attach gate of {pid}: the expert is gone");
            return;
        }
        if pfd.revents & libc::POLLIN == 0 {
            continue;
        }
        // SAFETY: zeroed plain-data struct filled by the kernel.
        let mut notif: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        let r = unsafe {
            libc::ioctl(
                listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_RECV,
                &mut notif as *mut libc::seccomp_notif,
            )
        };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if matches!(e.raw_os_error(), Some(libc::EINTR) | Some(libc::ENOENT)) {
                continue;
            }
            warn!("attach gate of {pid}: receive: {e}");
            return;
        }
        let hold = !gate_open
            && notif.data.nr == libc::SYS_openat as i32
            && read_path(notif.pid, notif.data.args[1]).as_deref() == Some(policy.path.as_str())
            && (!policy.require_bpf_loaded || bpf_programs(pid) > 0);
        if hold {
            gate_open = true;
            *held.lock().unwrap() = Some(notif.id);
            debug!("attach gate of {pid}: holding the expert before attach");
            let _ = reached.send(());
        } else if let Err(e) = respond_continue(listener, notif.id) {
            warn!("attach gate of {pid}: continue: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    use std::time::Instant;

    /// Starts `/bin/sh -c script` (`{state}` in it: a file holding `disabled`) behind a gate
    /// that holds its open of that file, and waits until it is held.
    fn held_child(
        dir: &std::path::Path,
        script: &str,
        stdout: Stdio,
    ) -> (std::process::Child, AttachGate) {
        let state = dir.join("state");
        std::fs::write(&state, "disabled\n").unwrap();
        let mut cmd = Command::new("/bin/sh");
        cmd.args([
            "-c",
            &script.replace("{state}", &state.display().to_string()),
        ])
        .stdout(stdout);
        unsafe {
            cmd.pre_exec(|| install_in_child());
        }
        let child = cmd.spawn().unwrap();
        let gate = AttachGate::attach_to(
            child.id(),
            GatePolicy {
                path: state.display().to_string(),
                require_bpf_loaded: false,
            },
        )
        .unwrap();
        assert!(gate.wait_reached(Duration::from_secs(20)).unwrap());
        (child, gate)
    }

    /// The gate on a plain process: the held open blocks it until released, every other
    /// open goes through.
    #[test]
    fn holds_the_named_open_until_released() {
        let dir = tempfile::tempdir().unwrap();
        let (mut child, gate) = held_child(
            dir.path(),
            "cat /etc/hostname > /dev/null; echo before; cat {state}; echo after",
            Stdio::piped(),
        );
        // Held: the child cannot finish.
        std::thread::sleep(Duration::from_millis(300));
        assert!(child.try_wait().unwrap().is_none(), "the gate did not hold");
        assert!(gate.is_holding());
        let t0 = Instant::now();
        gate.release().unwrap();
        let status = child.wait().unwrap();
        assert!(status.success());
        assert!(t0.elapsed() < Duration::from_secs(10));
        let mut out = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        assert_eq!(out, "before\ndisabled\nafter\n");
    }

    /// A process killed while it waits at the gate: the gate no longer claims to hold it
    /// (what the supervisor checks before it releases a hot standby).
    #[test]
    fn a_killed_process_is_no_longer_held() {
        let dir = tempfile::tempdir().unwrap();
        let (mut child, gate) = held_child(dir.path(), "exec cat {state}", Stdio::null());
        assert!(gate.is_holding());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!gate.is_holding(), "a dead process is still reported held");
        gate.release().unwrap();
    }

    #[test]
    fn gate_reports_a_process_that_exits_before_the_gate() {
        let mut cmd = Command::new("/bin/sh");
        cmd.args(["-c", "exit 3"]);
        unsafe {
            cmd.pre_exec(|| install_in_child());
        }
        let mut child = cmd.spawn().unwrap();
        let gate = AttachGate::attach_to(child.id(), GatePolicy::default());
        // The child may already be gone before the listener could be taken out of it.
        if let Ok(gate) = gate {
            let _ = child.wait();
            assert!(gate.wait_reached(Duration::from_secs(20)).is_err());
        } else {
            assert_eq!(child.wait().unwrap().code(), Some(3));
        }
    }
}
