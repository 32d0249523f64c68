//! The server side of the control socket: [`bind`] it (root only) and [`serve`] it.
//!
//! Every wait on a client is bounded: a request line is at most [`MAX_REQUEST_BYTES`] and must
//! arrive within [`REQUEST_TIMEOUT`] (else the client gets an error answer and the connection is
//! closed), an answer that the client does not read within [`REQUEST_TIMEOUT`] is dropped, and
//! [`serve`] gives each connection its own thread, at most [`MAX_CONNECTIONS`] at once; when
//! they are all taken a new connection evicts the one that has waited longest for its request,
//! so neither one silent client nor a flood of them holds up another's `status`.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::{refusal, Request, Response};

/// How long [`bind`] waits for a live control socket to go before calling it another agent's:
/// an agent killed a moment ago still listens until the kernel has torn its process down
/// (its memory first, its file descriptors last: hundreds of milliseconds for an agent with ONNX
/// Runtime loaded under emulation), and a restart (systemd, an operator) may come that soon.
pub const LIVE_SOCKET_GRACE: Duration = Duration::from_secs(3);

/// Bind the control socket: root-only directory and socket; a stale socket (no listener) is
/// replaced; one still listening after [`LIVE_SOCKET_GRACE`] is another agent's: an error.
pub fn bind(path: &Path) -> Result<UnixListener> {
    bind_within(path, LIVE_SOCKET_GRACE)
}

/// [`bind`], waiting at most `grace` for a live socket to go.
pub fn bind_within(path: &Path, grace: Duration) -> Result<UnixListener> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        if dir == Path::new("/run/asa") {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        }
    }
    if path.exists() {
        let deadline = Instant::now() + grace;
        while UnixStream::connect(path).is_ok() {
            if Instant::now() >= deadline {
                bail!(
                    "another agent already serves {} (see `asa status`)",
                    path.display()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        std::fs::remove_file(path).with_context(|| format!("removing stale {}", path.display()))?;
    }
    let listener =
        UnixListener::bind(path).with_context(|| format!("binding {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// The UID of the process at the other end of `stream`.
pub fn peer_uid(stream: &UnixStream) -> Result<u32> {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    let cred = getsockopt(stream, PeerCredentials).context("reading SO_PEERCRED")?;
    Ok(cred.uid())
}

/// The longest request line the agent reads: 64 KiB (a real request is under 100 bytes).
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;
/// How long a client has to send its whole request line, and to read the answer.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections served at once. When every one is taken, a new connection evicts the one that
/// has waited longest for its request, silent ones first ([`serve`]); only when all of them are
/// being answered (a request complete in each: pins waiting for a switch) is a new one told
/// "busy".
pub const MAX_CONNECTIONS: usize = 32;
/// Connection threads at most: the [`MAX_CONNECTIONS`] served, and evicted ones on their way
/// out (each writes one short error and ends at once). The server accepts no more connections
/// while this many threads live: new clients wait in the listen queue, none is refused.
pub const MAX_CONNECTION_THREADS: usize = 2 * MAX_CONNECTIONS;

/// Read one request from `stream`: one line of at most [`MAX_REQUEST_BYTES`], all of it within
/// [`REQUEST_TIMEOUT`].
pub fn read_request(stream: &UnixStream) -> Result<Request> {
    read_request_within(stream, MAX_REQUEST_BYTES, REQUEST_TIMEOUT)
}

/// [`read_request`] with its bounds as arguments. The deadline covers the whole line (a client
/// that trickles a byte now and then is cut off as well as a silent one); at most `max_bytes`
/// + 1 bytes are buffered.
pub fn read_request_within(
    stream: &UnixStream,
    max_bytes: usize,
    timeout: Duration,
) -> Result<Request> {
    read_request_noting(stream, max_bytes, timeout, &AtomicU8::new(SILENT))
}

/// How far a connection's request has come (for eviction: silent ones go first).
const SILENT: u8 = 0;
/// Some bytes of the request came, not the whole line.
const PARTIAL: u8 = 1;
/// The reading is over (a whole line, or an error): the connection is being answered.
const COMPLETE: u8 = 2;

/// [`read_request_within`], keeping `progress` (SILENT, PARTIAL, COMPLETE) up to date.
fn read_request_noting(
    stream: &UnixStream,
    max_bytes: usize,
    timeout: Duration,
    progress: &AtomicU8,
) -> Result<Request> {
    let line = read_line_within(stream, max_bytes, timeout, progress);
    progress.store(COMPLETE, Ordering::Relaxed);
    let line = line?;
    let line = String::from_utf8_lossy(&line);
    serde_json::from_str(&line).with_context(|| {
        let shown: String = line.trim().chars().take(200).collect();
        format!("malformed request {shown:?}")
    })
}

/// One line (without its newline) of at most `max_bytes`, all of it within `timeout`; what came
/// before the end of the stream when no newline came.
fn read_line_within(
    mut stream: &UnixStream,
    max_bytes: usize,
    timeout: Duration,
    progress: &AtomicU8,
) -> Result<Vec<u8>> {
    let deadline = Instant::now() + timeout;
    let mut line: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            bail!(
                "no complete request within {:.0} s: connection closed",
                timeout.as_secs_f64()
            );
        }
        stream.set_read_timeout(Some(left))?;
        let want = chunk.len().min(max_bytes + 1 - line.len());
        let n = match stream.read(&mut chunk[..want]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                bail!(
                    "no complete request within {:.0} s: connection closed",
                    timeout.as_secs_f64()
                )
            }
            Err(e) => return Err(e).context("reading the request"),
        };
        if n > 0 {
            progress.store(PARTIAL, Ordering::Relaxed);
        }
        if let Some(end) = chunk[..n].iter().position(|&b| b == b'\n') {
            line.extend_from_slice(&chunk[..end]);
            break;
        }
        line.extend_from_slice(&chunk[..n]);
        if line.len() > max_bytes {
            bail!("request longer than {max_bytes} bytes: connection closed");
        }
        if n == 0 {
            break; // End of stream: what came is the request.
        }
    }
    Ok(line)
}

/// Write one response to `stream` (given up after [`REQUEST_TIMEOUT`] when the client does not
/// read it).
pub fn write_response(mut stream: &UnixStream, response: &Response) -> Result<()> {
    let mut line = serde_json::to_string(response)?;
    line.push('\n');
    stream.set_write_timeout(Some(REQUEST_TIMEOUT))?;
    stream.write_all(line.as_bytes())?;
    Ok(())
}

/// One accepted connection, as [`serve`] keeps track of it.
struct Connection {
    accepted: Instant,
    /// The stream (a second descriptor), to shut its reading down when evicted.
    stream: UnixStream,
    /// SILENT, PARTIAL or COMPLETE (set by its thread).
    progress: AtomicU8,
    /// Set (under the table's lock) when a newer connection took its place.
    evicted: AtomicBool,
}

/// The connections [`serve`] has threads for.
#[derive(Default)]
struct Connections {
    open: Mutex<Vec<Arc<Connection>>>,
    /// Signalled when a connection's thread ends.
    ended: Condvar,
}

impl Connections {
    /// Makes room for `stream` and registers it; None when every served connection is being
    /// answered (nothing to evict: the caller says "busy"), or `stream` cannot be kept. Waits while
    /// [`MAX_CONNECTION_THREADS`] threads live. With [`MAX_CONNECTIONS`] served, it evicts the
    /// one that has waited longest for its request, silent ones before those that sent part of
    /// one: its reading is shut down, so its thread tells it why and ends.
    fn admit(&self, stream: &UnixStream) -> Option<Arc<Connection>> {
        let connection = Arc::new(Connection {
            accepted: Instant::now(),
            stream: stream.try_clone().ok()?,
            progress: AtomicU8::new(SILENT),
            evicted: AtomicBool::new(false),
        });
        let mut open = self.open.lock().unwrap();
        while open.len() >= MAX_CONNECTION_THREADS {
            open = self.ended.wait(open).unwrap();
        }
        let served = open
            .iter()
            .filter(|c| !c.evicted.load(Ordering::Relaxed))
            .count();
        if served >= MAX_CONNECTIONS {
            let victim = open
                .iter()
                .filter(|c| !c.evicted.load(Ordering::Relaxed))
                .filter(|c| c.progress.load(Ordering::Relaxed) < COMPLETE)
                .min_by_key(|c| (c.progress.load(Ordering::Relaxed), c.accepted))?;
            victim.evicted.store(true, Ordering::Relaxed);
            let _ = victim.stream.shutdown(std::net::Shutdown::Read);
        }
        open.push(connection.clone());
        Some(connection)
    }

    /// `connection`'s thread ends.
    fn end(&self, connection: &Arc<Connection>) {
        self.open
            .lock()
            .unwrap()
            .retain(|c| !Arc::ptr_eq(c, connection));
        self.ended.notify_all();
    }
}

/// Serve `listener` until `stop` is set (checked after each accepted connection: whoever sets
/// it connects once to wake the loop): each connection on its own thread. Only root and the
/// agent's own user are served; `answer` gets each well-formed request, with the bounds of
/// [`read_request`].
///
/// At most [`MAX_CONNECTIONS`] connections are served at once. When they are all taken, a new
/// connection is not refused: it evicts the one that has waited longest for its request (one
/// that sent nothing before one that sent part of a line), which is told so and closed. A flood
/// of clients that connect and say nothing therefore cannot keep `asa status` out: a real
/// client sends its line as it connects, so by the time it would be evicted it has its answer.
/// Only when every served connection is being answered (pins waiting for a switch) is a new one
/// told "busy". Threads are bounded too ([`MAX_CONNECTION_THREADS`]).
pub fn serve(
    listener: UnixListener,
    stop: Arc<AtomicBool>,
    answer: impl Fn(Request) -> Response + Send + Sync + 'static,
) -> std::thread::JoinHandle<()> {
    let answer = Arc::new(answer);
    std::thread::Builder::new()
        .name("control-socket".into())
        .spawn(move || {
            let me = nix::unistd::geteuid().as_raw();
            let connections = Arc::new(Connections::default());
            for stream in listener.incoming() {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let Some(connection) = connections.admit(&stream) else {
                    let busy = refusal(format!(
                        "the agent is busy ({MAX_CONNECTIONS} requests are being answered): try again"
                    ));
                    let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
                    let _ = write_response(&stream, &busy);
                    continue;
                };
                let (answer, open, ours) =
                    (answer.clone(), connections.clone(), connection.clone());
                let spawned = std::thread::Builder::new()
                    .name("control-client".into())
                    .spawn(move || {
                        let response = match peer_uid(&stream) {
                            Ok(uid) if uid == 0 || uid == me => match read_request_noting(
                                &stream,
                                MAX_REQUEST_BYTES,
                                REQUEST_TIMEOUT,
                                &ours.progress,
                            ) {
                                Ok(req) => answer(req),
                                Err(_) if ours.evicted.load(Ordering::Relaxed) => {
                                    refusal(evicted(ours.accepted.elapsed()))
                                }
                                Err(e) => refusal(format!("{e:#}")),
                            },
                            Ok(uid) => refusal(format!("uid {uid} may not control the agent")),
                            Err(e) => refusal(format!("{e:#}")),
                        };
                        if let Err(e) = write_response(&stream, &response) {
                            log::debug!("answering a control request: {e:#}");
                        }
                        open.end(&ours);
                    });
                if let Err(e) = spawned {
                    log::warn!("no thread for a control connection: {e}");
                    connections.end(&connection);
                }
            }
        })
        .expect("spawning the control socket thread")
}

/// What an evicted connection is told.
fn evicted(waited: Duration) -> String {
    format!(
        "closed without an answer: all {MAX_CONNECTIONS} of the agent's connections were taken and \
         this one had waited longest for its request ({:.1} s); send the request as you connect",
        waited.as_secs_f64()
    )
}

/// Stops a [`serve`] loop: sets `stop` and connects to `path` once to wake it.
pub fn stop_serving(path: &Path, stop: &AtomicBool, server: std::thread::JoinHandle<()>) {
    stop.store(true, Ordering::Relaxed);
    let _ = UnixStream::connect(path);
    let _ = server.join();
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader};

    use super::super::client::{flood_one_line, request};
    use super::*;

    #[test]
    fn no_listener_means_no_agent_and_stale_sockets_are_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sock");
        assert!(request(&path, &Request::Status, Duration::from_secs(1))
            .unwrap()
            .is_none());
        let first = bind(&path).unwrap();
        // A listener still live after the grace refuses a second agent.
        assert!(bind_within(&path, Duration::from_millis(200))
            .unwrap_err()
            .to_string()
            .contains("another agent"));
        drop(first);
        // The file is left behind but nobody listens: it is replaced.
        let _second = bind(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    /// An agent killed a moment ago listens until its process is torn down: a new agent started
    /// at once waits for its socket to go instead of refusing to start.
    #[test]
    fn a_socket_that_goes_within_the_grace_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sock");
        let dying = bind(&path).unwrap();
        let closer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            drop(dying);
        });
        let started = Instant::now();
        let _new = bind_within(&path, Duration::from_secs(3)).unwrap();
        assert!(started.elapsed() >= Duration::from_millis(250));
        closer.join().unwrap();
    }

    /// A server answering `status` with an empty ok response.
    fn status_server(path: &Path) -> (Arc<AtomicBool>, std::thread::JoinHandle<()>) {
        let stop = Arc::new(AtomicBool::new(false));
        let server = serve(bind(path).unwrap(), stop.clone(), |req| match req {
            Request::Status => Response {
                ok: true,
                error: None,
                status: None,
                switch: None,
            },
            _ => refusal("status only"),
        });
        (stop, server)
    }

    /// A server that waited for a silent client would answer after [`REQUEST_TIMEOUT`]; half
    /// of it tells the design apart from a loaded test machine (issue 32's "within 1 s" is
    /// measured in the lab VM by the fault suite's flood row).
    fn answered_without_waiting_for_a_silent_client(t0: Instant) {
        let took = t0.elapsed();
        eprintln!("answered in {took:?}");
        assert!(took < REQUEST_TIMEOUT / 2, "{took:?}");
    }

    #[test]
    fn a_silent_client_does_not_delay_another_clients_status() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sock");
        let (stop, server) = status_server(&path);
        // Three clients connect and say nothing (one half of a line, no newline).
        let silent: Vec<UnixStream> = (0..3)
            .map(|_| UnixStream::connect(&path).unwrap())
            .collect();
        (&silent[0]).write_all(br#"{"cmd":"sta"#).unwrap();
        let t0 = Instant::now();
        let resp = request(&path, &Request::Status, Duration::from_secs(5))
            .unwrap()
            .unwrap();
        assert!(resp.ok);
        answered_without_waiting_for_a_silent_client(t0);
        // The silent ones are answered with an error and closed after REQUEST_TIMEOUT.
        let mut reply = String::new();
        BufReader::new(&silent[1]).read_line(&mut reply).unwrap();
        assert!(reply.contains("no complete request within 5 s"), "{reply}");
        let waited = t0.elapsed();
        assert!(
            (Duration::from_secs(4)..Duration::from_secs(7)).contains(&waited),
            "{waited:?}"
        );
        stop_serving(&path, &stop, server);
    }

    #[test]
    fn an_overlong_request_line_is_refused_and_the_connection_closed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sock");
        let (stop, server) = status_server(&path);
        let stream = UnixStream::connect(&path).unwrap();
        // 64 MiB without a newline; the server stops reading at 64 KiB + 1 and closes, so this
        // write fails part-way (EPIPE/ECONNRESET), which is the point.
        let flood = flood_one_line(stream.try_clone().unwrap(), b'x');
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut reply = String::new();
        BufReader::new(&stream).read_line(&mut reply).unwrap();
        let resp: Response = serde_json::from_str(&reply).unwrap();
        assert!(!resp.ok);
        assert!(
            resp.error
                .as_deref()
                .unwrap()
                .contains("request longer than 65536 bytes"),
            "{reply}"
        );
        let sent = flood.join().unwrap();
        assert!(sent < 64 << 20, "the server read all {sent} bytes");
        // The server still answers.
        assert!(
            request(&path, &Request::Status, Duration::from_secs(5))
                .unwrap()
                .unwrap()
                .ok
        );
        stop_serving(&path, &stop, server);
    }

    /// The deadline is for the whole line: a byte every 50 ms does not keep a 300 ms read open.
    #[test]
    fn a_trickling_client_is_cut_off_at_the_deadline() {
        let (a, b) = UnixStream::pair().unwrap();
        let trickle = std::thread::spawn(move || {
            for _ in 0..40 {
                if (&b).write_all(b" ").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let t0 = Instant::now();
        let err = read_request_within(&a, 1024, Duration::from_millis(300)).unwrap_err();
        assert!(err.to_string().contains("no complete request"), "{err}");
        assert!(
            t0.elapsed() < Duration::from_millis(600),
            "{:?}",
            t0.elapsed()
        );
        drop(a);
        trickle.join().unwrap();
        // A line within the bounds is read; one byte over is refused.
        let (a, b) = UnixStream::pair().unwrap();
        (&b).write_all(b"{\"cmd\":\"status\"}\n").unwrap();
        assert_eq!(
            read_request_within(&a, 16, Duration::from_secs(1)).unwrap(),
            Request::Status
        );
        (&b).write_all(b"{\"cmd\":\"status\"}\n").unwrap();
        let err = read_request_within(&a, 15, Duration::from_secs(1)).unwrap_err();
        assert!(err.to_string().contains("longer than 15 bytes"), "{err}");
    }

    /// Reads one line from `stream` within `timeout`.
    fn line_within(stream: &UnixStream, timeout: Duration) -> String {
        stream.set_read_timeout(Some(timeout)).unwrap();
        let mut reply = String::new();
        BufReader::new(stream).read_line(&mut reply).unwrap();
        reply
    }

    /// Bytes written to `stream` that its peer has not read yet (SIOCOUTQ).
    fn unread_by_peer(stream: &UnixStream) -> i32 {
        use std::os::fd::AsRawFd;
        let mut queued: libc::c_int = 0;
        // SAFETY: SIOCOUTQ writes one int through the pointer, which outlives the call.
        let rc = unsafe { libc::ioctl(stream.as_raw_fd(), libc::TIOCOUTQ, &mut queued) };
        assert_eq!(rc, 0, "SIOCOUTQ: {}", std::io::Error::last_os_error());
        queued
    }

    /// True when `stream` has nothing to read now (the server neither answered nor closed it).
    fn nothing_to_read(stream: &UnixStream) -> bool {
        stream.set_nonblocking(true).unwrap();
        let result = (&*stream).read(&mut [0u8; 1]);
        stream.set_nonblocking(false).unwrap();
        matches!(result, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
    }

    /// With every slot taken by clients that say nothing, a new client is not refused: it
    /// evicts the one that has waited longest, silent ones before one that sent part of a line.
    /// 100 clients hold connections (one with half a request, connected first); `status` is
    /// answered at once; the 69 oldest silent ones were told why they were closed, while the
    /// partial one and the 30 newest silent ones are still held (32 in all, with `status`).
    #[test]
    fn a_new_client_evicts_the_longest_silent_one_instead_of_being_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sock");
        let (stop, server) = status_server(&path);
        let partial = UnixStream::connect(&path).unwrap();
        (&partial).write_all(br#"{"cmd":"sta"#).unwrap();
        // The server has read the half line (else, on a loaded machine, it is still "silent"
        // when the evictions start, and the oldest).
        let t0 = Instant::now();
        while unread_by_peer(&partial) > 0 && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(20));
        let silent: Vec<UnixStream> = (0..99)
            .map(|_| UnixStream::connect(&path).unwrap())
            .collect();
        let t0 = Instant::now();
        let resp = request(&path, &Request::Status, Duration::from_secs(5))
            .unwrap()
            .unwrap();
        assert!(resp.ok, "{resp:?}");
        answered_without_waiting_for_a_silent_client(t0);
        // Connections are accepted in order: all 100 were when `status` was.
        let evicted = 100 + 1 - MAX_CONNECTIONS;
        assert!(nothing_to_read(&partial), "the partial request was evicted");
        for (i, held) in silent.iter().enumerate().skip(evicted) {
            assert!(nothing_to_read(held), "silent client {i} was evicted");
        }
        for (i, gone) in silent.iter().enumerate().take(evicted) {
            let reply = line_within(gone, Duration::from_secs(5));
            let resp: Response = serde_json::from_str(&reply)
                .unwrap_or_else(|e| panic!("silent client {i}: {e}: {reply:?}"));
            let error = resp.error.unwrap();
            assert!(
                !resp.ok && error.contains("had waited longest for its request"),
                "silent client {i}: {error}"
            );
        }
        stop_serving(&path, &stop, server);
    }

    /// "busy" is left for one case: every slot answers a request (here 32 pins held inside the
    /// answer, as behind a slow switch). A new client, silent or not, is then told at once;
    /// once the pins are answered, `status` is served again.
    #[test]
    fn only_a_full_house_of_requests_being_answered_makes_the_agent_busy() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sock");
        let stop = Arc::new(AtomicBool::new(false));
        let (entered, pins_in) = std::sync::mpsc::channel::<()>();
        let entered = Mutex::new(entered);
        let gate = Arc::new((Mutex::new(false), Condvar::new()));
        let held = gate.clone();
        let server = serve(bind(&path).unwrap(), stop.clone(), move |req| match req {
            Request::Pin { .. } => {
                entered.lock().unwrap().send(()).unwrap();
                let (open, opened) = &*held;
                let _open = opened
                    .wait_while(open.lock().unwrap(), |open| !*open)
                    .unwrap();
                refusal("released")
            }
            _ => Response {
                ok: true,
                error: None,
                status: None,
                switch: None,
            },
        });
        let pins: Vec<_> = (0..MAX_CONNECTIONS)
            .map(|_| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let pin = Request::Pin {
                        expert: "lavd".into(),
                    };
                    request(&path, &pin, Duration::from_secs(30))
                        .unwrap()
                        .unwrap()
                })
            })
            .collect();
        for _ in 0..MAX_CONNECTIONS {
            pins_in.recv_timeout(Duration::from_secs(30)).unwrap();
        }
        let t0 = Instant::now();
        let busy = request(&path, &Request::Status, Duration::from_secs(5))
            .unwrap()
            .unwrap();
        assert!(
            !busy.ok && busy.error.as_deref().unwrap().contains("busy"),
            "{busy:?}"
        );
        let quiet = UnixStream::connect(&path).unwrap();
        assert!(line_within(&quiet, Duration::from_secs(5)).contains("busy"));
        answered_without_waiting_for_a_silent_client(t0);
        *gate.0.lock().unwrap() = true;
        gate.1.notify_all();
        for pin in pins {
            assert_eq!(pin.join().unwrap().error.as_deref(), Some("released"));
        }
        let status = request(&path, &Request::Status, Duration::from_secs(5))
            .unwrap()
            .unwrap();
        assert!(status.ok, "{status:?}");
        stop_serving(&path, &stop, server);
    }
}
