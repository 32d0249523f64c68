//! `asa`'s listings in a pipeline, run as the built binary on the host: a command that only
//! prints (`asa scenario list`, `asa experts`, …) whose reader has gone dies quietly of
//! SIGPIPE, as `ls | head` does, instead of panicking with "failed printing to stdout".

use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

/// A pipe whose read end is already closed: every write to the returned end fails with EPIPE
/// (or raises SIGPIPE).
fn pipe_without_reader() -> OwnedFd {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe(2) writes.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe(2)");
    // SAFETY: pipe(2) returned these descriptors and nothing else owns them.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    write
}

#[test]
fn a_listing_whose_reader_has_gone_ends_by_sigpipe_without_a_panic() {
    for args in [
        &["scenario", "list"][..],
        &["scenario", "packages", "all"],
        &["experts"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_asa"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(pipe_without_reader()))
            .stderr(Stdio::piped())
            .output()
            .expect("running asa");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "asa {args:?}: {stderr}");
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGPIPE),
            "asa {args:?}: {:?}, stderr: {stderr}",
            out.status
        );
    }
}
