//! The client side of the control socket: one request, one answer ([`request`]).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::{Request, Response};

/// Send one request; `Ok(None)` when no agent listens at `path`.
pub fn request(path: &Path, req: &Request, timeout: Duration) -> Result<Option<Response>> {
    let mut stream = match UnixStream::connect(path) {
        Ok(s) => s,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
            ) =>
        {
            return Ok(None)
        }
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => bail!(
            "this command needs root: the agent's control socket {} is for root only (run it with sudo)",
            path.display()
        ),
        Err(e) => return Err(e).with_context(|| format!("connecting to {}", path.display())),
    };
    stream.set_read_timeout(Some(timeout))?;
    let mut line = serde_json::to_string(req)?;
    line.push('\n');
    match stream.write_all(line.as_bytes()) {
        // A busy agent answers as it accepts and closes without reading: its answer is
        // already here even when our request could no longer be sent.
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
            ) => {}
        other => other.with_context(|| format!("sending to {}", path.display()))?,
    }
    let mut reply = String::new();
    BufReader::new(stream)
        .read_line(&mut reply)
        .with_context(|| format!("waiting for the agent's answer on {}", path.display()))?;
    if reply.is_empty() {
        bail!("the agent closed {} without answering", path.display());
    }
    Ok(Some(
        serde_json::from_str(&reply).context("the agent's answer is not valid JSON")?,
    ))
}

/// A client that misbehaves, for the tests of the server's bounds: on its own thread, writes
/// 64 MiB of `byte` to `stream` as one line without its end, 1 MiB at a time, until a write
/// fails (the server closed the connection); returns the bytes it got written.
pub fn flood_one_line(stream: UnixStream, byte: u8) -> JoinHandle<usize> {
    std::thread::spawn(move || {
        let block = vec![byte; 1 << 20];
        let mut sent = 0usize;
        for _ in 0..64 {
            match (&stream).write_all(&block) {
                Ok(()) => sent += block.len(),
                Err(_) => break,
            }
        }
        sent
    })
}

#[cfg(test)]
mod tests {
    use super::super::refusal;
    use super::super::server::{bind, peer_uid, read_request, write_response};
    use super::*;

    /// A busy agent answers as it accepts and closes without reading the request: the client
    /// still gets that answer when its own write fails (here a 4 MiB line, far more than the
    /// socket buffers, so the write is still under way when the server closes).
    #[test]
    fn an_answer_sent_before_the_request_was_read_is_still_received() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sock");
        let listener = bind(&path).unwrap();
        let server = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            write_response(&stream, &refusal("the agent is busy: try again")).unwrap();
        });
        let pin = Request::Pin {
            expert: "x".repeat(4 << 20),
        };
        let resp = request(&path, &pin, Duration::from_secs(5))
            .unwrap()
            .expect("an answer");
        assert!(!resp.ok && resp.error.unwrap().contains("busy"));
        server.join().unwrap();
    }

    #[test]
    fn round_trip_through_a_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sock");
        let listener = bind(&path).unwrap();
        let server = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            assert_eq!(peer_uid(&stream).unwrap(), nix::unistd::geteuid().as_raw());
            let req = read_request(&stream).unwrap();
            assert_eq!(req, Request::Unpin);
            write_response(
                &stream,
                &Response {
                    ok: false,
                    error: Some("nope".into()),
                    status: None,
                    switch: None,
                },
            )
            .unwrap();
        });
        let resp = request(&path, &Request::Unpin, Duration::from_secs(5))
            .unwrap()
            .unwrap();
        server.join().unwrap();
        assert!(!resp.ok);
        assert_eq!(resp.error.as_deref(), Some("nope"));
    }
}
