//! The decision log: one JSON line per tick, appended to a file (`asa run --decision-log`).
//!
//! Invariant: the log never stops the agent. A write that fails (the disk is full, the file's
//! file system went read-only) is counted and warned about once, the decision goes on, and
//! writing resumes by itself when the file takes lines again. Every line in the file is whole:
//! a line cut short by a failing write is ended before the next one, so a reader skips one
//! fragment and never sees two records glued together.

use std::fs::File;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// An open decision log ([`DecisionLog::append`] one line per tick).
pub struct DecisionLog<W: Write = File> {
    path: PathBuf,
    out: W,
    /// Lines not written since the last success (0 while writes succeed).
    unwritten_now: u64,
    /// Lines not written since the log was opened.
    unwritten_total: u64,
    /// The last write stopped inside a line: end it before the next one.
    cut_line: bool,
}

impl DecisionLog<File> {
    /// Opens (creates, appends to) the log at `path`. Failing to open it is an error: the user
    /// asked for a log the agent cannot write.
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::options()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("opening the decision log {}", path.display()))?;
        Ok(Self::new(path, file))
    }
}

impl<W: Write> DecisionLog<W> {
    /// A log writing to `out`, named `path` in messages.
    pub fn new(path: &Path, out: W) -> Self {
        DecisionLog {
            path: path.to_path_buf(),
            out,
            unwritten_now: 0,
            unwritten_total: 0,
            cut_line: false,
        }
    }

    /// Appends `line` (without its newline). Never fails: a failed write is counted
    /// ([`DecisionLog::unwritten`]) and warned about once until writes succeed again.
    pub fn append(&mut self, line: &str) {
        let mut bytes = Vec::with_capacity(line.len() + 2);
        if self.cut_line {
            bytes.push(b'\n');
        }
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        match write_counting(&mut self.out, &bytes) {
            Ok(()) => {
                self.cut_line = false;
                if self.unwritten_now > 0 {
                    log::info!(
                        "the decision log {} takes lines again; {} tick(s) were not logged",
                        self.path.display(),
                        self.unwritten_now
                    );
                    self.unwritten_now = 0;
                }
            }
            Err((written, e)) => {
                // Anything written, but not the whole line, leaves a fragment to end.
                if written > 0 || self.cut_line {
                    self.cut_line = bytes[..written].last() != Some(&b'\n');
                }
                if self.unwritten_now == 0 {
                    log::warn!(
                        "writing the decision log {}: {e}; deciding goes on, unlogged, until it takes lines again",
                        self.path.display()
                    );
                }
                self.unwritten_now += 1;
                self.unwritten_total += 1;
            }
        }
    }

    /// Ticks whose line could not be written since the log was opened.
    pub fn unwritten(&self) -> u64 {
        self.unwritten_total
    }
}

/// `write_all` that says how many bytes went out before an error.
fn write_counting(out: &mut impl Write, bytes: &[u8]) -> Result<(), (usize, std::io::Error)> {
    let mut written = 0;
    while written < bytes.len() {
        match out.write(&bytes[written..]) {
            Ok(0) => {
                return Err((
                    written,
                    std::io::Error::new(ErrorKind::WriteZero, "wrote 0 bytes"),
                ))
            }
            Ok(n) => written += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err((written, e)),
        }
    }
    out.flush().map_err(|e| (written, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file that takes `room` more bytes, then fails with "no space" until given more.
    struct Disk {
        data: Vec<u8>,
        room: usize,
    }

    impl Write for Disk {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.room == 0 {
                return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
            }
            let n = buf.len().min(self.room);
            self.data.extend_from_slice(&buf[..n]);
            self.room -= n;
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn log_on(room: usize) -> DecisionLog<Disk> {
        DecisionLog::new(
            Path::new("/var/log/asa/decisions.jsonl"),
            Disk {
                data: Vec::new(),
                room,
            },
        )
    }

    #[test]
    fn lines_are_appended_whole_while_the_disk_takes_them() {
        let mut log = log_on(1000);
        log.append(r#"{"tick":1}"#);
        log.append(r#"{"tick":2}"#);
        assert_eq!(log.out.data, b"{\"tick\":1}\n{\"tick\":2}\n");
        assert_eq!(log.unwritten(), 0);
    }

    #[test]
    fn a_full_disk_counts_the_lost_lines_and_never_fails_the_tick() {
        let mut log = log_on(0);
        for _ in 0..3 {
            log.append(r#"{"tick":1}"#);
        }
        assert_eq!(log.unwritten(), 3);
        assert!(log.out.data.is_empty());
    }

    #[test]
    fn a_line_cut_by_the_full_disk_is_ended_before_the_next_one() {
        // Room for the first line and 4 bytes of the second.
        let mut log = log_on(11 + 4);
        log.append(r#"{"tick":1}"#);
        log.append(r#"{"tick":2}"#);
        log.append(r#"{"tick":3}"#);
        assert_eq!(log.unwritten(), 2);
        // Space freed: the fragment is ended, the next record starts a line of its own.
        log.out.room = 1000;
        log.append(r#"{"tick":4}"#);
        let text = String::from_utf8(log.out.data.clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines, [r#"{"tick":1}"#, r#"{"ti"#, r#"{"tick":4}"#]);
        assert_eq!(log.unwritten(), 2);
    }

    #[test]
    fn no_empty_line_is_added_when_the_failed_write_wrote_nothing() {
        let mut log = log_on(11);
        log.append(r#"{"tick":1}"#);
        log.append(r#"{"tick":2}"#); // no room at all: nothing written
        log.out.room = 1000;
        log.append(r#"{"tick":3}"#);
        assert_eq!(log.out.data, b"{\"tick\":1}\n{\"tick\":3}\n");
    }

    #[test]
    fn a_log_in_a_missing_folder_is_an_error_naming_the_file() {
        let e = DecisionLog::open(Path::new("/nonexistent-asa-dir/decisions.jsonl"))
            .err()
            .unwrap();
        assert!(format!("{e:#}").contains("/nonexistent-asa-dir/decisions.jsonl"));
    }
}
