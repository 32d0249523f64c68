//! The per-application action: each application's class, as its layer's task hint, into
//! scx_layered's task-hint map (`src/bpf/app_hints.bpf.c`).
//!
//! scx_layered, started with `--task-hint-map PATH`, pins its task-storage map of hints at PATH
//! — or reuses the map already pinned there — and puts a task whose hint a layer matches
//! (`HintEquals`) into that layer, re-checking when the hint changes. [`AppHints::load`] pins
//! (or reuses) the same map at the same path, so the agent and the scheduler share it whichever
//! starts first, and hints outlive either process: a restarted agent finds its applications'
//! hints in place, and a scheduler restarted under a running agent reads them at once.
//!
//! The agent keeps the table application → hint ([`AppHints::set`]), pinned beside the hint map
//! (`<PATH>_apps`; bpffs names take no dot) so that a restarted agent finds it ([`AppHints::adopted`]) and takes its
//! applications back instead of clearing them; one task walk ([`AppHints::apply`]) writes every
//! task's hint from it and removes the hints of tasks whose application has none; new threads
//! and processes inherit their parent's hint at fork.
//! Nothing is moved between cgroups: no application can be left in a group of ours.

use std::collections::BTreeMap;
use std::io::Read;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Iter, Link, MapCore, MapFlags, MapHandle};

use crate::perception::apps::AppKey;

bpf_skeleton!("app_hints.skel.rs");

pub use asa_layers::DEFAULT_HINT_MAP;

/// Size of `struct app_key` (src/bpf/app_hints.h): u64 cgroup, u32 pgid, u32 padding.
const APP_KEY_BYTES: usize = 16;
/// Size of scx_layered's `struct task_hint`: the hint and three reserved u64.
const TASK_HINT_BYTES: usize = 32;
/// Size of `struct apply_totals`: three u64.
const TOTALS_BYTES: usize = 24;

/// `pidfd_open`'s flag for a pidfd of one thread rather than of its process (Linux 6.9+).
const PIDFD_THREAD: libc::c_uint = libc::O_EXCL as libc::c_uint;

/// What one apply walk did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ApplyTotals {
    /// Tasks walked.
    pub tasks: u64,
    /// Hints written (a task's first, or a changed one).
    pub set: u64,
    /// Hints removed (the task's application has no class).
    pub cleared: u64,
}

fn app_key_bytes(key: &AppKey) -> [u8; APP_KEY_BYTES] {
    let mut bytes = [0u8; APP_KEY_BYTES];
    bytes[..8].copy_from_slice(&key.cgroup.to_ne_bytes());
    bytes[8..12].copy_from_slice(&key.pgid.to_ne_bytes());
    bytes
}

/// The loaded hint writer: the shared hint map, the agent's application table, the apply walk
/// and the fork-time inheritance.
pub struct AppHints {
    hint_map: MapHandle,
    app_hints: MapHandle,
    apply: Link,
    _inherit: Link,
    pinned: PathBuf,
    written: BTreeMap<AppKey, u32>,
    buffer: Vec<u8>,
}

impl AppHints {
    /// Loads the program with the hint map pinned at `pin` (created with its parent folder if
    /// missing, reused if scx_layered or an earlier agent pinned it), and attaches the
    /// fork-time inheritance. Needs bpffs mounted at the pin's file system, BTF, and root.
    pub fn load(pin: &Path) -> Result<Self> {
        if let Some(dir) = pin.parent() {
            std::fs::create_dir_all(dir).with_context(|| {
                format!(
                    "create {} for the task-hint map (is bpffs mounted there? `mount -t bpf bpf /sys/fs/bpf`)",
                    dir.display()
                )
            })?;
        }
        let mut storage = MaybeUninit::uninit();
        let mut open = skel::AppHintsSkelBuilder::default()
            .open(&mut storage)
            .context("open the application-hint BPF object")?;
        open.maps
            .scx_layered_task_hint_map
            .set_pin_path(pin)
            .with_context(|| format!("pin the task-hint map at {}", pin.display()))?;
        let table_pin = app_table_pin(pin);
        open.maps
            .app_hints
            .set_pin_path(&table_pin)
            .with_context(|| format!("pin the application table at {}", table_pin.display()))?;
        let skel = open.load().with_context(|| {
            format!(
                "load the application-hint BPF program with the task-hint map at {} (needs root, \
                 kernel BTF, and a map there of scx_layered's layout if one is pinned)",
                pin.display()
            )
        })?;
        let apply = skel
            .progs
            .asa_apply_hints
            .attach()
            .context("attach the apply walk (task iterator)")?;
        let inherit = skel
            .progs
            .asa_inherit_hint
            .attach()
            .context("attach the hint inheritance (sched_process_fork)")?;
        let hint_map = MapHandle::try_from(&skel.maps.scx_layered_task_hint_map)
            .context("hold the task-hint map")?;
        let app_hints =
            MapHandle::try_from(&skel.maps.app_hints).context("hold the application table")?;
        let written = read_table(&app_hints)?;
        Ok(Self {
            hint_map,
            app_hints,
            apply,
            _inherit: inherit,
            pinned: pin.to_path_buf(),
            written,
            buffer: Vec::with_capacity(TOTALS_BYTES),
        })
    }

    /// The application table as this writer found or last set it: after a restart, the
    /// applications an earlier agent had classified, with their hints.
    pub fn adopted(&self) -> &BTreeMap<AppKey, u32> {
        &self.written
    }

    /// Where the task-hint map is pinned.
    pub fn pinned(&self) -> &Path {
        &self.pinned
    }

    /// Makes the application table `hints` (application → hint): entries that changed are
    /// written, those gone are removed. Takes effect at the next [`AppHints::apply`] (and at
    /// once for threads forked after it from a task that already has the hint).
    pub fn set(&mut self, hints: &BTreeMap<AppKey, u32>) -> Result<()> {
        for (key, hint) in hints {
            if self.written.get(key) != Some(hint) {
                self.app_hints
                    .update(
                        &app_key_bytes(key),
                        &u64::from(*hint).to_ne_bytes(),
                        MapFlags::ANY,
                    )
                    .with_context(|| format!("write the hint of {key}"))?;
            }
        }
        for key in self.written.keys().filter(|k| !hints.contains_key(k)) {
            // Absent already is fine: the outcome is the same.
            let _ = self.app_hints.delete(&app_key_bytes(key));
        }
        self.written = hints.clone();
        Ok(())
    }

    /// One walk over every task: each gets its application's hint, or loses its hint if its
    /// application has none.
    pub fn apply(&mut self) -> Result<ApplyTotals> {
        let mut iter = Iter::new(&self.apply).context("start an apply walk")?;
        self.buffer.clear();
        iter.read_to_end(&mut self.buffer)
            .context("read the apply walk")?;
        if self.buffer.len() != TOTALS_BYTES {
            bail!(
                "the apply walk gave {} bytes, not its {TOTALS_BYTES}-byte totals",
                self.buffer.len()
            );
        }
        let at = |i: usize| u64::from_ne_bytes(self.buffer[8 * i..8 * i + 8].try_into().unwrap());
        Ok(ApplyTotals {
            tasks: at(0),
            set: at(1),
            cleared: at(2),
        })
    }

    /// The hint task (thread) `tid` has now, if any.
    pub fn hint_of_task(&self, tid: u32) -> Result<Option<u64>> {
        let pidfd = thread_pidfd(tid)?;
        let key = pidfd.as_raw_fd().to_ne_bytes();
        let value = self
            .hint_map
            .lookup(&key, MapFlags::ANY)
            .with_context(|| format!("look up the hint of task {tid}"))?;
        Ok(value
            .filter(|v| v.len() == TASK_HINT_BYTES)
            .map(|v| u64::from_ne_bytes(v[..8].try_into().unwrap())))
    }
}

/// Where the application table is pinned: beside the task-hint map.
fn app_table_pin(hint_map: &Path) -> PathBuf {
    let mut path = hint_map.as_os_str().to_owned();
    path.push("_apps");
    PathBuf::from(path)
}

/// Every entry of a (pinned) application table.
fn read_table(table: &MapHandle) -> Result<BTreeMap<AppKey, u32>> {
    let mut entries = BTreeMap::new();
    for key in table.keys() {
        let Some(value) = table
            .lookup(&key, MapFlags::ANY)
            .context("read the pinned application table")?
        else {
            continue; // removed while we walked
        };
        if key.len() != APP_KEY_BYTES || value.len() != 8 {
            bail!("the pinned application table has entries of another layout: remove it");
        }
        let app = AppKey {
            cgroup: u64::from_ne_bytes(key[..8].try_into().unwrap()),
            pgid: u32::from_ne_bytes(key[8..12].try_into().unwrap()),
        };
        let hint = u64::from_ne_bytes(value[..8].try_into().unwrap());
        entries.insert(app, u32::try_from(hint).unwrap_or(u32::MAX));
    }
    Ok(entries)
}

/// A pidfd of one thread (`pidfd_open` with `PIDFD_THREAD`), the key of a task-storage map.
fn thread_pidfd(tid: u32) -> Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, tid as libc::pid_t, PIDFD_THREAD) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("pidfd_open of task {tid} (gone, or a kernel before 6.9)"));
    }
    // SAFETY: the descriptor is new and ours alone.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_app_key_is_laid_out_as_the_bpf_side_reads_it() {
        let bytes = app_key_bytes(&AppKey {
            cgroup: 0x0102_0304_0506_0708,
            pgid: 0x0a0b_0c0d,
        });
        assert_eq!(&bytes[..8], &0x0102_0304_0506_0708u64.to_ne_bytes());
        assert_eq!(&bytes[8..12], &0x0a0b_0c0du32.to_ne_bytes());
        assert_eq!(&bytes[12..], &[0; 4]);
    }
}
