//! Keeping the agent's resident set small.
//!
//! Most of `asa run`'s resident memory is not its own data but clean pages of code it ran once
//! at start-up: ONNX Runtime builds its operator schema and kernel registries when the
//! environment and the session are created, which faults in ~19 MB of `libonnxruntime.so`
//! scattered over its 27 MB of code, and the `asa` binary's argument, TOML and catalogue code
//! is not run again either. Those pages stay mapped (and counted in RSS) until the kernel
//! reclaims them under pressure.
//!
//! [`release_clean_file_pages`] unmaps them at the end of each start-up phase with
//! `madvise(MADV_DONTNEED)`, but only from mappings where that cannot change what the process
//! reads: private, non-writable, file-backed mappings that hold no anonymous (copy-on-write)
//! page, i.e. whose resident pages are all the file's page-cache pages. A page used again is
//! mapped back from the page cache on its next access (a minor fault); the kernel could drop
//! these pages the same way at any time, so this adds no hazard the process did not have.
//! Mappings with relocated data (RELRO: read-only now but with copy-on-write pages) and every
//! writable or anonymous mapping are left alone.

use std::io;

/// One mapping of `/proc/self/smaps` that can be released.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Releasable {
    /// Start address.
    pub start: usize,
    /// End address (exclusive).
    pub end: usize,
    /// Resident KiB before the release.
    pub rss_kib: u64,
    /// The mapped file.
    pub path: String,
}

/// The path of an smaps mapping line: what follows address, perms, offset, device and inode
/// (it may contain spaces; empty for anonymous mappings).
fn path_of(line: &str) -> &str {
    let mut rest = line;
    for _ in 0..5 {
        rest = rest.trim_start();
        match rest.find(char::is_whitespace) {
            Some(i) => rest = &rest[i..],
            None => return "",
        }
    }
    rest.trim()
}

/// The mappings of an smaps text that hold only clean file pages: private (`p`), not writable,
/// backed by a file (a path, not `[vdso]` or anonymous), resident, `Anonymous: 0 kB`.
pub fn releasable_mappings(smaps: &str) -> Vec<Releasable> {
    struct Current {
        start: usize,
        end: usize,
        eligible: bool,
        path: String,
        rss: Option<u64>,
        anonymous: Option<u64>,
    }
    fn finish(current: Option<Current>, out: &mut Vec<Releasable>) {
        let Some(c) = current else { return };
        if c.eligible && c.anonymous == Some(0) && c.rss.is_some_and(|r| r > 0) {
            out.push(Releasable {
                start: c.start,
                end: c.end,
                rss_kib: c.rss.unwrap_or(0),
                path: c.path,
            });
        }
    }
    let kib = |rest: &str| rest.split_whitespace().next()?.parse::<u64>().ok();
    let mut out = Vec::new();
    let mut current: Option<Current> = None;
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let first = fields.next().unwrap_or("");
        if let Some((a, b)) = first.split_once('-') {
            if let (Ok(start), Ok(end)) =
                (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
            {
                finish(current.take(), &mut out);
                let perms = fields.next().unwrap_or("");
                let path = path_of(line);
                let p = perms.as_bytes();
                let eligible = p.len() == 4
                    && p[0] == b'r'
                    && p[1] == b'-'
                    && p[3] == b'p'
                    && path.starts_with('/');
                current = Some(Current {
                    start,
                    end,
                    eligible,
                    path: path.to_string(),
                    rss: None,
                    anonymous: None,
                });
                continue;
            }
        }
        if let Some(c) = current.as_mut() {
            if let Some(rest) = line.strip_prefix("Rss:") {
                c.rss = kib(rest);
            } else if let Some(rest) = line.strip_prefix("Anonymous:") {
                c.anonymous = kib(rest);
            }
        }
    }
    finish(current, &mut out);
    out
}

/// Unmaps the clean file pages of this process (see the module doc); returns the KiB that were
/// resident in the released mappings.
pub fn release_clean_file_pages() -> io::Result<u64> {
    let smaps = std::fs::read_to_string("/proc/self/smaps")?;
    let mut released = 0;
    for m in releasable_mappings(&smaps) {
        // SAFETY: the range is one whole mapping of this process that is private, not writable
        // and holds no anonymous page: MADV_DONTNEED only drops page-table entries of page-cache
        // pages, and every later access reads the same bytes from the file again.
        let rc = unsafe {
            libc::madvise(
                m.start as *mut libc::c_void,
                m.end - m.start,
                libc::MADV_DONTNEED,
            )
        };
        if rc == 0 {
            released += m.rss_kib;
        } else {
            log::debug!(
                "madvise(MADV_DONTNEED) on {} {:x}-{:x}: {}",
                m.path,
                m.start,
                m.end,
                io::Error::last_os_error()
            );
        }
    }
    Ok(released)
}

/// [`release_clean_file_pages`] with a debug log line naming the phase that just ended;
/// errors are logged, not returned (the agent works the same without the release).
pub fn release_after(phase: &str) {
    let before = memory_summary();
    match release_clean_file_pages() {
        Ok(kib) => log::debug!(
            "memory after {phase}: {before}; released {:.1} MB of clean file pages: {}",
            kib as f64 / 1024.0,
            memory_summary()
        ),
        Err(e) => log::debug!("after {phase}: cannot read /proc/self/smaps: {e}"),
    }
}

/// `VmRSS (anon + file)` of this process, for debug logs.
pub fn memory_summary() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .map(|kib| format!("{:.1} MB", kib as f64 / 1024.0))
            .unwrap_or_else(|| "?".into())
    };
    format!(
        "RSS {} (anon {}, file {}), peak {}",
        field("VmRSS:"),
        field("RssAnon:"),
        field("RssFile:"),
        field("VmHWM:")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const SMAPS: &str = "\
55d0c0a00000-55d0c0b00000 r-xp 00010000 fd:01 123 /usr/bin/asa
Size:               1024 kB
Rss:                 400 kB
Anonymous:             0 kB
55d0c0b00000-55d0c0b10000 r--p 00110000 fd:01 123 /usr/bin/asa
Size:                 64 kB
Rss:                  64 kB
Anonymous:            12 kB
55d0c0b10000-55d0c0b20000 rw-p 00120000 fd:01 123 /usr/bin/asa
Rss:                  64 kB
Anonymous:             0 kB
7f0000000000-7f0000100000 r--p 00000000 fd:01 456 /opt/my libs/libonnxruntime.so
Rss:                 128 kB
Anonymous:             0 kB
7f0000100000-7f0000200000 r--s 00000000 fd:01 789 /dev/shm/x
Rss:                   8 kB
Anonymous:             0 kB
7f0000200000-7f0000300000 r-xp 00000000 fd:01 790 /tmp/old.so (deleted)
Rss:                   8 kB
Anonymous:             0 kB
7f0000300000-7f0000400000 r-xp 00000000 fd:01 791 /usr/lib/cold.so
Rss:                   0 kB
Anonymous:             0 kB
7f0000400000-7f0000500000 r--p 00000000 00:00 0
Rss:                   4 kB
Anonymous:             4 kB
7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0                          [vdso]
Rss:                   8 kB
Anonymous:             0 kB
";

    #[test]
    fn only_private_read_only_file_mappings_without_anonymous_pages() {
        let found = releasable_mappings(SMAPS);
        assert_eq!(
            found,
            vec![
                Releasable {
                    start: 0x55d0c0a00000,
                    end: 0x55d0c0b00000,
                    rss_kib: 400,
                    path: "/usr/bin/asa".into()
                },
                Releasable {
                    start: 0x7f0000000000,
                    end: 0x7f0000100000,
                    rss_kib: 128,
                    path: "/opt/my libs/libonnxruntime.so".into()
                },
                // A deleted file's pages stay in the page cache while it is mapped.
                Releasable {
                    start: 0x7f0000200000,
                    end: 0x7f0000300000,
                    rss_kib: 8,
                    path: "/tmp/old.so (deleted)".into()
                },
            ]
        );
    }

    fn mapping_rss_kib(start: usize) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let header = format!("{start:x}-");
        let mut lines = smaps.lines().skip_while(|l| !l.starts_with(&header));
        lines.next().expect("the mapping is listed");
        lines
            .find_map(|l| l.strip_prefix("Rss:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap()
    }

    /// Maps `file` privately, read-only (after writing `patch` at offset 0 through a
    /// copy-on-write page when given), touches every page; returns the address.
    fn map(file: &std::fs::File, len: usize, patch: Option<&[u8]>) -> *mut u8 {
        use std::os::fd::AsRawFd;
        let prot = if patch.is_some() {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        // SAFETY: a fresh private mapping of an open file, unmapped by the caller.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        assert_ne!(addr, libc::MAP_FAILED);
        let addr = addr.cast::<u8>();
        if let Some(patch) = patch {
            // SAFETY: within the writable mapping.
            unsafe {
                std::ptr::copy_nonoverlapping(patch.as_ptr(), addr, patch.len());
                assert_eq!(libc::mprotect(addr.cast(), len, libc::PROT_READ), 0);
            }
        }
        for offset in (0..len).step_by(4096) {
            // SAFETY: within the mapping.
            unsafe { std::ptr::read_volatile(addr.add(offset)) };
        }
        addr
    }

    #[test]
    fn releases_clean_pages_and_keeps_copy_on_write_pages() {
        let len = 64 * 4096;
        let contents: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&contents).unwrap();
        let clean = map(&file, len, None);
        let patched = map(&file, len, Some(b"patched"));
        assert!(mapping_rss_kib(clean as usize) > 0);
        let before = mapping_rss_kib(patched as usize);
        assert!(before > 0);

        release_clean_file_pages().unwrap();

        // The clean mapping is no longer resident, and reads the file's bytes again.
        assert_eq!(mapping_rss_kib(clean as usize), 0);
        // SAFETY: both mappings are `len` bytes, unmapped below.
        let (clean_bytes, patched_bytes) = unsafe {
            (
                std::slice::from_raw_parts(clean, len),
                std::slice::from_raw_parts(patched, len),
            )
        };
        assert!(clean_bytes == &contents[..]);
        // The mapping with a copy-on-write page was left alone: still resident, still patched.
        assert_eq!(mapping_rss_kib(patched as usize), before);
        assert_eq!(&patched_bytes[..7], b"patched");
        assert!(patched_bytes[7..] == contents[7..]);
        // SAFETY: the mappings made above.
        unsafe {
            libc::munmap(clean.cast(), len);
            libc::munmap(patched.cast(), len);
        }
    }
}
