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
//!
//! The filter's listener is created in the expert's process between fork and exec and sent to
//! the supervisor over a socket pair ([`ListenerHandoff`]); the expert closes its copy before
//! exec. Only the supervisor holds it, so when the supervisor dies the kernel fails the
//! expert's trapped `openat` calls (`ENOSYS`) instead of keeping them waiting for an answer
//! that never comes, and the expert can act on its parent-death signal and exit.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use log::{debug, warn};

/// The file whose read the gate holds.
pub const SCHED_EXT_STATE: &str = "/sys/kernel/sched_ext/state";
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

/// Room for one `SCM_RIGHTS` message with one descriptor, 8-byte aligned as `cmsghdr` wants.
const FD_CMSG_SPACE: usize =
    // SAFETY: CMSG_SPACE is plain arithmetic.
    unsafe { libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) } as usize;
#[repr(C, align(8))]
struct FdCmsgBuf([u8; FD_CMSG_SPACE]);

/// How the gated child hands its listener to the supervisor: a Unix socket pair (both ends
/// close-on-exec). The child sends the listener over its end in `pre_exec` and closes its own
/// copy, so after `exec` the only listener is the supervisor's gate thread's: when the
/// supervisor dies or that thread ends, the listener closes and the kernel fails the child's
/// trapped `openat` calls (`ENOSYS`) instead of holding them for good.
pub struct ListenerHandoff {
    ours: OwnedFd,
    theirs: OwnedFd,
}

impl ListenerHandoff {
    /// A new socket pair.
    pub fn new() -> Result<Self> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: socketpair fills the two descriptors, owned below.
        let r = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        if r < 0 {
            bail!(
                "socketpair for the attach gate: {}",
                std::io::Error::last_os_error()
            );
        }
        // SAFETY: fresh descriptors nobody else owns.
        Ok(unsafe {
            Self {
                ours: OwnedFd::from_raw_fd(fds[0]),
                theirs: OwnedFd::from_raw_fd(fds[1]),
            }
        })
    }

    /// The descriptor the child sends its listener on (for [`install_in_child`]). Valid as long
    /// as `self` lives: keep it until the child has been spawned.
    pub fn child_end(&self) -> RawFd {
        self.theirs.as_raw_fd()
    }

    /// After the child was spawned (its `pre_exec` has run, so the listener was sent or the
    /// spawn failed): take the listener it sent. Never waits.
    pub fn receive(self) -> Result<OwnedFd> {
        drop(self.theirs);
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: byte.len(),
        };
        let mut control = FdCmsgBuf([0; FD_CMSG_SPACE]);
        // SAFETY: a zeroed msghdr pointing at buffers we own; the kernel fills them.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.0.as_mut_ptr().cast();
        msg.msg_controllen = FD_CMSG_SPACE;
        let n = unsafe {
            libc::recvmsg(
                self.ours.as_raw_fd(),
                &mut msg,
                libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC,
            )
        };
        if n < 0 {
            bail!(
                "the gated process sent no seccomp listener: {}",
                std::io::Error::last_os_error()
            );
        }
        // SAFETY: the kernel wrote msg_controllen bytes of control messages into `control`.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            if cmsg.is_null()
                || (*cmsg).cmsg_level != libc::SOL_SOCKET
                || (*cmsg).cmsg_type != libc::SCM_RIGHTS
                || (*cmsg).cmsg_len
                    < libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as usize
            {
                bail!("the gated process sent no seccomp listener ({n} bytes, no descriptor)");
            }
            let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const libc::c_int);
            Ok(OwnedFd::from_raw_fd(fd))
        }
    }
}

/// Install the filter in the calling process, send its listener over `handoff` (the child's
/// end of a [`ListenerHandoff`]) and close it here: the process keeps no listener. Meant for
/// `CommandExt::pre_exec`: only async-signal-safe calls, nothing allocated.
///
/// # Safety
/// Call only in a freshly forked child before `exec`.
pub unsafe fn install_in_child(handoff: RawFd) -> std::io::Result<()> {
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
    let listener = fd as libc::c_int;
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: byte.len(),
    };
    let mut control = FdCmsgBuf([0; FD_CMSG_SPACE]);
    let mut msg: libc::msghdr = std::mem::zeroed();
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = FD_CMSG_SPACE;
    let cmsg = libc::CMSG_FIRSTHDR(&msg);
    (*cmsg).cmsg_level = libc::SOL_SOCKET;
    (*cmsg).cmsg_type = libc::SCM_RIGHTS;
    (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as usize;
    std::ptr::write_unaligned(libc::CMSG_DATA(cmsg) as *mut libc::c_int, listener);
    let sent = libc::sendmsg(handoff, &msg, libc::MSG_NOSIGNAL);
    let err = std::io::Error::last_os_error();
    libc::close(listener);
    if sent < 0 {
        return Err(err);
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
    /// The listener, owned by the serving thread: it closes when that thread ends.
    listener: Weak<OwnedFd>,
    held: Arc<Mutex<Option<u64>>>,
    reached: Receiver<()>,
}

impl AttachGate {
    /// Serve the gate of the child `pid` through `listener` (from
    /// [`ListenerHandoff::receive`]): start the thread that answers its notifications. The
    /// thread owns the listener and serves as long as the child lives, so every `openat` after
    /// the gate opened is continued. When the thread ends (the child is gone, or an error) or
    /// the supervisor dies, the listener closes with it: the child's `openat` calls then fail
    /// instead of waiting for an answer that cannot come, and this gate holds nothing.
    pub fn start(listener: OwnedFd, pid: u32, policy: GatePolicy) -> Result<Self> {
        let owned = Arc::new(listener);
        let listener = Arc::downgrade(&owned);
        let held = Arc::new(Mutex::new(None));
        let (tx, rx) = mpsc::channel();
        {
            let held = held.clone();
            std::thread::Builder::new()
                .name(format!("attach-gate-{pid}"))
                .spawn(move || serve(&owned, pid, &policy, &held, tx))
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
    /// held call was interrupted, or the serving thread has ended). A hot standby is released
    /// only after this said yes.
    pub fn is_holding(&self) -> bool {
        let Some(mut id) = *self.held.lock().unwrap() else {
            return false;
        };
        let Some(listener) = self.listener.upgrade() else {
            return false;
        };
        // SAFETY: the ioctl reads one u64 we own.
        let r = unsafe {
            libc::ioctl(
                listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
                &mut id as *mut u64,
            )
        };
        r == 0
    }

    /// Let the held open go on (and every later one). Nothing to do when the serving thread
    /// has ended: its listener closed, and the held open failed.
    pub fn release(&self) -> Result<()> {
        let id = self.held.lock().unwrap().take();
        if let (Some(id), Some(listener)) = (id, self.listener.upgrade()) {
            respond_continue(&listener, id).context("releasing the attach gate")?;
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
    use crate::process::reset_signals_in_child;
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    use std::path::Path;
    use std::process::{Command, Stdio};
    use std::time::Instant;

    /// Spawns `cmd` behind a gate with `policy`, running `before` in the child first (like the
    /// supervisor: the listener is handed over before exec).
    fn spawn_gated(
        mut cmd: Command,
        policy: GatePolicy,
        mut before: impl FnMut() -> std::io::Result<()> + Send + Sync + 'static,
    ) -> (std::process::Child, AttachGate) {
        let handoff = ListenerHandoff::new().unwrap();
        let fd = handoff.child_end();
        unsafe {
            cmd.pre_exec(move || {
                // Default signals, as the supervisor starts an expert: a shell cannot trap a
                // signal ignored when it starts.
                reset_signals_in_child()?;
                before()?;
                install_in_child(fd)
            });
        }
        let child = cmd.spawn().unwrap();
        let listener = handoff.receive().unwrap();
        let gate = AttachGate::start(listener, child.id(), policy).unwrap();
        (child, gate)
    }

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
        let (child, gate) = spawn_gated(
            cmd,
            GatePolicy {
                path: state.display().to_string(),
                require_bpf_loaded: false,
            },
            || Ok(()),
        );
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

    /// The seccomp notification listeners `pid` holds open (`/proc/PID/fd` links to
    /// `anon_inode:seccomp notify`).
    fn seccomp_listeners(pid: u32) -> Vec<String> {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .flatten()
            .filter(|e| {
                std::fs::read_link(e.path())
                    .is_ok_and(|t| t.to_string_lossy() == "anon_inode:seccomp notify")
            })
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    }

    /// The listener lives in the supervisor only: the gated process holds none (one there
    /// would keep its every `openat` waiting for an answer after the supervisor died).
    #[test]
    fn a_gated_process_holds_no_listener() {
        let dir = tempfile::tempdir().unwrap();
        let (mut child, gate) = held_child(dir.path(), "exec cat {state}", Stdio::null());
        assert!(
            !seccomp_listeners(std::process::id()).is_empty(),
            "the supervisor's end is seen"
        );
        let in_child = seccomp_listeners(child.id());
        gate.release().unwrap();
        child.wait().unwrap();
        assert!(
            in_child.is_empty(),
            "the gated process holds listener fd(s) {in_child:?}"
        );
    }

    /// The listener lives exactly as long as its serving thread: once the gated process is
    /// gone the thread ends and the listener is closed although the gate still exists (the
    /// path an error in the thread takes too: the process's next `openat` then fails instead
    /// of waiting), and the gate no longer claims to hold anything.
    #[test]
    fn the_listener_closes_when_its_serving_thread_ends() {
        let dir = tempfile::tempdir().unwrap();
        let (mut child, gate) = held_child(dir.path(), "exec cat {state}", Stdio::null());
        assert!(gate.listener.upgrade().is_some());
        child.kill().unwrap();
        child.wait().unwrap();
        let t0 = Instant::now();
        while gate.listener.upgrade().is_some() && t0.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            gate.listener.upgrade().is_none(),
            "the listener outlives its serving thread"
        );
        assert!(!gate.is_holding());
        gate.release().unwrap();
    }

    /// Set in the process [`killing_the_gate_holder_frees_the_gated_child`] starts to hold the
    /// gate: the state file's path.
    const HOLDER_ENV: &str = "ASA_TEST_GATE_HOLDER_STATE";

    /// The gate holder dies (SIGKILL) while a gated process runs past its released gate; the
    /// process gets its parent-death SIGINT and, like an scx scheduler, opens a file on its way
    /// out. That open must fail (the listener died with the holder), not wait forever: the
    /// process is gone within 2 s. The holder is this test binary run again in the holder
    /// role (`HOLDER_ENV` set), so the test process itself survives.
    #[test]
    fn killing_the_gate_holder_frees_the_gated_child() {
        if let Some(state) = std::env::var_os(HOLDER_ENV) {
            return hold_a_gated_child(Path::new(&state));
        }
        use std::io::BufRead;
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        std::fs::write(&state, "disabled\n").unwrap();
        /// Killed when the test ends, however it ends.
        struct Holder(std::process::Child);
        impl Drop for Holder {
            fn drop(&mut self) {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
        let mut holder = Holder(
            Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "attach_gate::tests::killing_the_gate_holder_frees_the_gated_child",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(HOLDER_ENV, &state)
                .stdout(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        // libtest prints `test NAME ... ` before the test's own output, on the same line.
        let pid: i32 = std::io::BufReader::new(holder.0.stdout.take().unwrap())
            .lines()
            .map_while(Result::ok)
            .find_map(|l| l.split_once("gated child ")?.1.trim().parse().ok())
            .expect("the holder names its gated child");
        let gone = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
                matches!(
                    s.rsplit_once(')')
                        .and_then(|(_, r)| r.split_whitespace().next()),
                    Some("Z" | "X")
                )
            })
        };
        std::thread::sleep(Duration::from_millis(300));
        assert!(!gone(), "the gated child runs past its gate");
        drop(holder);
        let t0 = Instant::now();
        while !gone() && t0.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let freed = gone();
        if !freed {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        assert!(
            freed,
            "the gated child still runs 2 s after its gate holder died (blocked in openat)"
        );
    }

    /// The holder role: start a gated `sh` with SIGINT as its parent-death signal (as the
    /// supervisor starts an expert), let it through its gate, name it and wait to be killed.
    fn hold_a_gated_child(state: &Path) {
        let state = state.display().to_string();
        let script = "trap 'read s < {state}; exit 0' INT; read s < {state}; \
                      while :; do sleep 0.1; done"
            .replace("{state}", &state);
        let mut cmd = Command::new("/bin/sh");
        // No pipe of the test's: a child stuck for good must not keep `cargo test` waiting.
        cmd.args(["-c", &script])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let policy = GatePolicy {
            path: state,
            require_bpf_loaded: false,
        };
        let (child, gate) = spawn_gated(cmd, policy, || {
            // SAFETY: async-signal-safe calls in the forked child.
            unsafe {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGINT) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
        assert!(gate.wait_reached(Duration::from_secs(20)).unwrap());
        gate.release().unwrap();
        println!("gated child {}", child.id());
        // Killed by the test long before this.
        std::thread::sleep(Duration::from_secs(60));
    }

    /// A process that exits before it reaches the gate: waiting for it is an error, not a
    /// wait for ever.
    #[test]
    fn gate_reports_a_process_that_exits_before_the_gate() {
        let mut cmd = Command::new("/bin/sh");
        cmd.args(["-c", "exit 3"]);
        let (mut child, gate) = spawn_gated(cmd, GatePolicy::default(), || Ok(()));
        assert_eq!(child.wait().unwrap().code(), Some(3));
        assert!(gate.wait_reached(Duration::from_secs(20)).is_err());
    }

    /// A child whose `pre_exec` fails before it sent its listener: the spawn fails, and the
    /// handoff says no listener came (it does not wait).
    #[test]
    fn no_listener_is_an_error_not_a_wait() {
        let handoff = ListenerHandoff::new().unwrap();
        let mut cmd = Command::new("/bin/true");
        unsafe {
            cmd.pre_exec(|| Err(std::io::Error::from_raw_os_error(libc::EPERM)));
        }
        assert!(cmd.spawn().is_err());
        let t0 = Instant::now();
        let err = handoff.receive().unwrap_err().to_string();
        assert!(err.contains("sent no seccomp listener"), "{err}");
        assert!(t0.elapsed() < Duration::from_secs(1));
    }
}
