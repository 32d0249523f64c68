//! Reading a procfs file that is already open, from offset 0: the one I/O helper the process
//! scan ([`super::processes`]) and the system files' reader ([`super::reader`]) share. A leaf:
//! it imports nothing of the agent.

use std::fs::File;

/// Reads a procfs file that is already open, from offset 0 (procfs formats it again for a
/// read at offset 0), into `buffer` (cleared first), with plain pread(2) calls: unlike
/// `read_to_end`, no statx/lseek probing of the size (procfs reports 0 anyway). With
/// `single_read`, a read that does not fill the buffer ends the file: true of
/// /proc/<pid>/stat, which the kernel formats whole into the first read's buffer.
pub(super) fn pread_file(
    file: &File,
    buffer: &mut Vec<u8>,
    single_read: bool,
) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    const CHUNK: usize = 4096;
    buffer.clear();
    loop {
        let len = buffer.len();
        buffer.resize(len + CHUNK, 0);
        let n = match file.read_at(&mut buffer[len..], len as u64) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                buffer.truncate(len);
                continue;
            }
            Err(e) => {
                buffer.truncate(len);
                return Err(e);
            }
        };
        buffer.truncate(len + n);
        if n == 0 || (single_read && n < CHUNK) {
            return Ok(());
        }
    }
}
