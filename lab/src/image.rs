//! The guest image: an uncompressed initramfs (cpio "newc") built from host files.
//!
//! Executables are added together with the shared libraries `ldd` names for them, at the same
//! paths, so host binaries (the agent, the scx experts, stress-ng) run unchanged in the guest.

use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// What one path in the image is.
#[derive(Debug, Clone)]
enum Entry {
    Dir,
    File { source: Source, mode: u32 },
    Symlink(String),
}

#[derive(Debug, Clone)]
enum Source {
    Host(PathBuf),
    Bytes(Vec<u8>),
}

/// Collects files for an initramfs and writes it.
#[derive(Debug, Default, Clone)]
pub struct ImageBuilder {
    entries: BTreeMap<PathBuf, Entry>,
}

fn normalize(guest: &Path) -> Result<PathBuf> {
    let mut out = PathBuf::new();
    for c in guest.components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(p) => out.push(p),
            _ => bail!("guest path {} must be absolute and plain", guest.display()),
        }
    }
    if out.as_os_str().is_empty() {
        bail!("guest path {} is the root", guest.display());
    }
    Ok(out)
}

impl ImageBuilder {
    /// An empty image.
    pub fn new() -> Self {
        Self::default()
    }

    fn insert(&mut self, guest: &Path, entry: Entry) -> Result<()> {
        let path = normalize(guest)?;
        let mut parent = path.parent();
        while let Some(p) = parent.filter(|p| !p.as_os_str().is_empty()) {
            self.entries.entry(p.to_owned()).or_insert(Entry::Dir);
            parent = p.parent();
        }
        self.entries.insert(path, entry);
        Ok(())
    }

    /// An empty directory.
    pub fn dir(&mut self, guest: impl AsRef<Path>) -> Result<&mut Self> {
        self.insert(guest.as_ref(), Entry::Dir)?;
        Ok(self)
    }

    /// A file with the given content and mode.
    pub fn bytes(
        &mut self,
        guest: impl AsRef<Path>,
        content: impl Into<Vec<u8>>,
        mode: u32,
    ) -> Result<&mut Self> {
        self.insert(
            guest.as_ref(),
            Entry::File {
                source: Source::Bytes(content.into()),
                mode,
            },
        )?;
        Ok(self)
    }

    /// A copy of a host file (links followed), keeping its permission bits.
    pub fn file(&mut self, host: impl AsRef<Path>, guest: impl AsRef<Path>) -> Result<&mut Self> {
        use std::os::unix::fs::PermissionsExt;
        let host = host.as_ref();
        let meta = std::fs::metadata(host)
            .with_context(|| format!("adding {} to the guest image", host.display()))?;
        if !meta.is_file() {
            bail!("{} is not a regular file", host.display());
        }
        self.insert(
            guest.as_ref(),
            Entry::File {
                source: Source::Host(host.to_owned()),
                mode: meta.permissions().mode() & 0o7777,
            },
        )?;
        Ok(self)
    }

    /// A symbolic link.
    pub fn symlink(&mut self, guest: impl AsRef<Path>, target: &str) -> Result<&mut Self> {
        self.insert(guest.as_ref(), Entry::Symlink(target.to_owned()))?;
        Ok(self)
    }

    /// An executable plus every shared library it loads (per `ldd`), at the host's paths.
    pub fn executable(
        &mut self,
        host: impl AsRef<Path>,
        guest: impl AsRef<Path>,
    ) -> Result<&mut Self> {
        let host = host.as_ref();
        self.file(host, guest)?;
        for lib in shared_libraries(host)? {
            self.file(&lib, &lib)?;
        }
        Ok(self)
    }

    /// True when the image holds `guest`.
    pub fn contains(&self, guest: impl AsRef<Path>) -> bool {
        normalize(guest.as_ref())
            .map(|p| self.entries.contains_key(&p))
            .unwrap_or(false)
    }

    /// Write the image as an uncompressed cpio newc archive.
    pub fn write(&self, out: &Path) -> Result<()> {
        let file = std::fs::File::create(out)
            .with_context(|| format!("creating guest image {}", out.display()))?;
        let mut w = BufWriter::with_capacity(1 << 20, file);
        for (ino, (path, entry)) in self.entries.iter().enumerate() {
            let name = path.to_string_lossy();
            match entry {
                Entry::Dir => write_entry(&mut w, ino + 1, &name, 0o040755, &[])?,
                Entry::Symlink(target) => {
                    write_entry(&mut w, ino + 1, &name, 0o120777, target.as_bytes())?
                }
                Entry::File { source, mode } => {
                    let data = match source {
                        Source::Bytes(b) => b.clone(),
                        Source::Host(p) => {
                            std::fs::read(p).with_context(|| format!("reading {}", p.display()))?
                        }
                    };
                    write_entry(&mut w, ino + 1, &name, 0o100000 | mode, &data)?
                }
            }
        }
        write_entry(&mut w, 0, "TRAILER!!!", 0, &[])?;
        w.flush()?;
        Ok(())
    }
}

fn pad4(w: &mut impl Write, len: usize) -> std::io::Result<()> {
    let pad = (4 - len % 4) % 4;
    w.write_all(&[0u8; 3][..pad])
}

fn write_entry(w: &mut impl Write, ino: usize, name: &str, mode: u32, data: &[u8]) -> Result<()> {
    let nlink = if mode & 0o170000 == 0o040000 { 2 } else { 1 };
    let header = format!(
        "070701{ino:08X}{mode:08X}{uid:08X}{gid:08X}{nlink:08X}{mtime:08X}{size:08X}\
         {dmaj:08X}{dmin:08X}{rmaj:08X}{rmin:08X}{namesize:08X}{check:08X}",
        uid = 0,
        gid = 0,
        mtime = 0,
        size = data.len(),
        dmaj = 0,
        dmin = 0,
        rmaj = 0,
        rmin = 0,
        namesize = name.len() + 1,
        check = 0,
    );
    w.write_all(header.as_bytes())?;
    w.write_all(name.as_bytes())?;
    w.write_all(&[0])?;
    pad4(w, header.len() + name.len() + 1)?;
    w.write_all(data)?;
    pad4(w, data.len())?;
    Ok(())
}

/// The shared libraries (and the dynamic loader) an executable needs, per `ldd`; empty for a
/// static executable.
pub fn shared_libraries(exe: &Path) -> Result<Vec<PathBuf>> {
    let out = Command::new("ldd")
        .arg(exe)
        .output()
        .context("running ldd (package libc-bin)")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        if text.contains("not a dynamic executable") || err.contains("not a dynamic executable") {
            return Ok(Vec::new());
        }
        bail!("ldd {} failed: {}", exe.display(), err.trim());
    }
    parse_ldd(&text)
        .map_err(|line| anyhow::anyhow!("{}: {line}", exe.display()))
        .map(|libs| libs.into_iter().map(PathBuf::from).collect())
}

/// Library paths in `ldd` output; a `not found` line is returned as the error.
fn parse_ldd(text: &str) -> Result<Vec<String>, String> {
    let mut libs = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.contains("not found") {
            return Err(format!("missing shared library: {line}"));
        }
        let path = match line.split_once("=>") {
            Some((_, rest)) => rest.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        if let Some(p) = path.filter(|p| p.starts_with('/')) {
            libs.push(p.to_owned());
        }
    }
    Ok(libs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ldd_output() {
        let text = "\tlinux-vdso.so.1 (0x00007ffc)\n\
                    \tlibelf.so.1 => /lib/x86_64-linux-gnu/libelf.so.1 (0x00007f1)\n\
                    \t/lib64/ld-linux-x86-64.so.2 (0x00007f2)\n";
        assert_eq!(
            parse_ldd(text).unwrap(),
            vec![
                "/lib/x86_64-linux-gnu/libelf.so.1",
                "/lib64/ld-linux-x86-64.so.2"
            ]
        );
        assert!(parse_ldd("\tlibfoo.so => not found\n").is_err());
    }

    #[test]
    fn writes_a_cpio_that_cpio_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut img = ImageBuilder::new();
        img.bytes("/lab/run.sh", "echo hi\n", 0o755).unwrap();
        img.symlink("/bin/sh", "busybox").unwrap();
        img.dir("/proc").unwrap();
        assert!(img.contains("/lab"));
        let out = dir.path().join("image.cpio");
        img.write(&out).unwrap();
        let bytes = std::fs::read(&out).unwrap();
        assert_eq!(bytes.len() % 4, 0);
        assert!(bytes.starts_with(b"070701"));
        // Cross-check with GNU cpio when the host has it.
        if let Ok(listing) = Command::new("cpio")
            .args(["-it", "--quiet", "-F"])
            .arg(&out)
            .output()
        {
            if listing.status.success() {
                let names = String::from_utf8_lossy(&listing.stdout);
                for want in ["lab", "lab/run.sh", "bin/sh", "proc"] {
                    assert!(names.lines().any(|l| l == want), "{want} in {names}");
                }
            }
        }
    }

    #[test]
    fn rejects_relative_escapes() {
        let mut img = ImageBuilder::new();
        assert!(img.bytes("/../etc/x", "", 0o644).is_err());
        assert!(img.bytes("/", "", 0o644).is_err());
    }
}
