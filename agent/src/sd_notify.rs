//! The systemd notification protocol, the part the agent needs: `READY=1`, `STATUS=...`,
//! `STOPPING=1` and `WATCHDOG=1` datagrams to `$NOTIFY_SOCKET` (`Type=notify`, `WatchdogSec=`
//! in agent/dist/asa.service). A few lines instead of a dependency; without `$NOTIFY_SOCKET`
//! (not started by systemd) every call does nothing.

use std::io;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::time::Duration;

/// Sends `state` (newline-separated `KEY=VALUE` assignments) to the service manager. Returns
/// false when no manager listens (`$NOTIFY_SOCKET` unset or empty).
pub fn notify(state: &str) -> io::Result<bool> {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET").filter(|p| !p.is_empty()) else {
        return Ok(false);
    };
    let socket = UnixDatagram::unbound()?;
    let bytes = path.as_encoded_bytes();
    if let Some(name) = bytes.strip_prefix(b"@") {
        // An abstract socket (systemd's default for services is a path, containers use these).
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
        socket.send_to_addr(state.as_bytes(), &addr)?;
    } else {
        socket.send_to(state.as_bytes(), Path::new(&path))?;
    }
    Ok(true)
}

/// [`notify`], with a failure logged instead of returned (the agent runs on without systemd).
pub fn notify_or_log(state: &str) {
    if let Err(e) = notify(state) {
        log::warn!("sd_notify {:?}: {e}", state.lines().next().unwrap_or(""));
    }
}

/// The watchdog interval systemd asks for (`$WATCHDOG_USEC`, for this process when
/// `$WATCHDOG_PID` names one): the agent sends `WATCHDOG=1` at half of it. None: no watchdog.
pub fn watchdog_interval() -> Option<Duration> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.trim().parse().ok()?;
    if let Ok(pid) = std::env::var("WATCHDOG_PID") {
        if pid.trim().parse::<u32>().ok()? != std::process::id() {
            return None;
        }
    }
    (usec > 0).then(|| Duration::from_micros(usec))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One test for both, since both read the process environment.
    #[test]
    fn notifications_reach_the_socket_and_the_watchdog_interval_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let manager = UnixDatagram::bind(&path).unwrap();
        std::env::set_var("NOTIFY_SOCKET", &path);
        assert!(notify("READY=1\nSTATUS=deciding").unwrap());
        let mut buf = [0u8; 256];
        let n = manager.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\nSTATUS=deciding");
        // An abstract socket.
        let name = format!("asa-test-{}", std::process::id());
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let abstract_manager = UnixDatagram::bind_addr(&addr).unwrap();
        std::env::set_var("NOTIFY_SOCKET", format!("@{name}"));
        assert!(notify("WATCHDOG=1").unwrap());
        let n = abstract_manager.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"WATCHDOG=1");
        std::env::remove_var("NOTIFY_SOCKET");
        assert!(!notify("READY=1").unwrap());

        std::env::set_var("WATCHDOG_USEC", "30000000");
        std::env::remove_var("WATCHDOG_PID");
        assert_eq!(watchdog_interval(), Some(Duration::from_secs(30)));
        std::env::set_var("WATCHDOG_PID", std::process::id().to_string());
        assert_eq!(watchdog_interval(), Some(Duration::from_secs(30)));
        std::env::set_var("WATCHDOG_PID", "1");
        assert_eq!(watchdog_interval(), None, "another process's watchdog");
        std::env::remove_var("WATCHDOG_PID");
        std::env::set_var("WATCHDOG_USEC", "0");
        assert_eq!(watchdog_interval(), None);
        std::env::remove_var("WATCHDOG_USEC");
        assert_eq!(watchdog_interval(), None);
    }
}
