//! A read-only handle on the kernel's sched_ext state in sysfs (`/sys/kernel/sched_ext`).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// Where the kernel exposes sched_ext.
pub const DEFAULT_SYSFS_ROOT: &str = "/sys/kernel/sched_ext";

/// The kernel's sched_ext state (`/sys/kernel/sched_ext/state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScxState {
    /// No BPF scheduler: the kernel's default scheduler runs every task.
    Disabled,
    /// A BPF scheduler is being attached.
    Enabling,
    /// A BPF scheduler is attached.
    Enabled,
    /// A BPF scheduler is being detached.
    Disabling,
}

impl ScxState {
    fn parse(text: &str) -> Result<Self> {
        Ok(match text.trim() {
            "disabled" => Self::Disabled,
            "enabling" => Self::Enabling,
            "enabled" => Self::Enabled,
            "disabling" => Self::Disabling,
            other => bail!("unknown sched_ext state {other:?}"),
        })
    }
}

impl fmt::Display for ScxState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Disabled => "disabled",
            Self::Enabling => "enabling",
            Self::Enabled => "enabled",
            Self::Disabling => "disabling",
        })
    }
}

/// One reading of every sched_ext file the agent uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScxSnapshot {
    /// `state`.
    pub state: ScxState,
    /// `root/ops`: the attached scheduler's name, when one is attached.
    pub ops: Option<String>,
    /// `enable_seq`: how many times a BPF scheduler was attached since boot.
    pub enable_seq: u64,
    /// `nr_rejected`: tasks the BPF scheduler refused (e.g. SCHED_EXT policy with bad cpumask).
    pub nr_rejected: Option<u64>,
    /// `root/events`: the kernel's SCX_EV_* counters, when the kernel has them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub events: BTreeMap<String, u64>,
}

/// A handle on a sched_ext sysfs directory.
#[derive(Debug, Clone)]
pub struct SchedExt {
    root: PathBuf,
}

/// The counters of a `root/events` file ("NAME VALUE" lines; others are skipped).
pub fn parse_events(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.split_whitespace();
            let name = parts.next()?;
            let value = parts.next()?.parse().ok()?;
            Some((name.to_owned(), value))
        })
        .collect()
}

impl SchedExt {
    /// The kernel's sysfs directory; fails with advice when the kernel has no sched_ext.
    pub fn system() -> Result<Self> {
        let handle = Self::at(DEFAULT_SYSFS_ROOT);
        handle.check_present()?;
        Ok(handle)
    }

    /// A handle on another directory (tests).
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The directory this handle reads.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Fails with advice unless the directory holds a readable `state` file.
    pub fn check_present(&self) -> Result<()> {
        if !self.root.join("state").exists() {
            bail!(
                "this kernel has no sched_ext ({} is missing; it needs CONFIG_SCHED_CLASS_EXT=y, Linux 6.12 or newer). \
                 No BPF scheduler can attach here: use the lab VM (`make demo`) or boot a kernel with sched_ext",
                self.root.join("state").display()
            );
        }
        Ok(())
    }

    fn read(&self, rel: &str) -> Result<String> {
        let path = self.root.join(rel);
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
    }

    fn read_u64(&self, rel: &str) -> Result<u64> {
        let text = self.read(rel)?;
        text.trim()
            .parse()
            .with_context(|| format!("{rel} holds {text:?}, not a number"))
    }

    /// The current state.
    pub fn state(&self) -> Result<ScxState> {
        ScxState::parse(&self.read("state")?)
    }

    /// The attached scheduler's ops name, if one is attached.
    pub fn ops(&self) -> Option<String> {
        self.read("root/ops")
            .ok()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    }

    /// Whether an enabled scheduler is attached whose ops name `owns` accepts: two reads
    /// (`state`, then `root/ops` only when enabled), the cheap look of a watch loop.
    pub fn runs(&self, owns: impl Fn(&str) -> bool) -> Result<bool> {
        if self.state()? != ScxState::Enabled {
            return Ok(false);
        }
        Ok(self.ops().is_some_and(|o| owns(&o)))
    }

    /// The attach counter.
    pub fn enable_seq(&self) -> Result<u64> {
        self.read_u64("enable_seq")
    }

    /// The kernel's SCX_EV_* event counters (`root/events`, Linux 6.15+); empty when absent.
    pub fn events(&self) -> BTreeMap<String, u64> {
        self.read("root/events")
            .map(|text| parse_events(&text))
            .unwrap_or_default()
    }

    /// Read everything at once.
    pub fn snapshot(&self) -> Result<ScxSnapshot> {
        let state = self.state()?;
        let ops = if state == ScxState::Disabled {
            None
        } else {
            self.ops()
        };
        Ok(ScxSnapshot {
            state,
            ops,
            enable_seq: self.enable_seq()?,
            nr_rejected: self.read_u64("nr_rejected").ok(),
            events: self.events(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_state_and_rejects_garbage() {
        for (text, state) in [
            ("disabled\n", ScxState::Disabled),
            ("enabling", ScxState::Enabling),
            ("enabled\n", ScxState::Enabled),
            ("disabling\n", ScxState::Disabling),
        ] {
            assert_eq!(ScxState::parse(text).unwrap(), state);
            assert_eq!(state.to_string(), text.trim());
        }
        assert!(ScxState::parse("maybe").is_err());
    }

    #[test]
    fn runs_is_true_only_for_an_enabled_scheduler_the_caller_owns() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("root")).unwrap();
        let scx = SchedExt::at(dir.path().to_path_buf());
        let set = |state: &str, ops: &str| {
            std::fs::write(dir.path().join("state"), state).unwrap();
            std::fs::write(dir.path().join("root/ops"), ops).unwrap();
        };
        let bpfland = |o: &str| o.starts_with("bpfland");
        set("enabled\n", "bpfland_1.1.4\n");
        assert!(scx.runs(bpfland).unwrap());
        set("enabled\n", "rusty\n");
        assert!(!scx.runs(bpfland).unwrap());
        for state in ["disabled\n", "enabling\n", "disabling\n"] {
            set(state, "bpfland_1.1.4\n");
            assert!(!scx.runs(bpfland).unwrap(), "{state}");
        }
        std::fs::remove_file(dir.path().join("state")).unwrap();
        assert!(
            scx.runs(bpfland).is_err(),
            "no state file is an error, not 'not ours'"
        );
    }

    #[test]
    fn missing_directory_gives_advice() {
        let dir = tempfile::tempdir().unwrap();
        let err = SchedExt::at(dir.path().join("none"))
            .check_present()
            .unwrap_err();
        assert!(err.to_string().contains("CONFIG_SCHED_CLASS_EXT"), "{err}");
    }

    #[test]
    fn snapshot_reads_the_files_the_kernel_writes() {
        // Layout and formats as Linux 6.16+ writes them (root/events: "NAME VALUE" lines).
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("root")).unwrap();
        std::fs::write(root.join("state"), "enabled\n").unwrap();
        std::fs::write(root.join("enable_seq"), "7\n").unwrap();
        std::fs::write(root.join("nr_rejected"), "0\n").unwrap();
        std::fs::write(root.join("root/ops"), "bpfland_1.1.4\n").unwrap();
        std::fs::write(
            root.join("root/events"),
            "SCX_EV_SELECT_CPU_FALLBACK 3\nSCX_EV_DISPATCH_KEEP_LAST 12\n",
        )
        .unwrap();
        let snap = SchedExt::at(root).snapshot().unwrap();
        assert_eq!(snap.state, ScxState::Enabled);
        assert_eq!(snap.ops.as_deref(), Some("bpfland_1.1.4"));
        assert_eq!(snap.enable_seq, 7);
        assert_eq!(snap.nr_rejected, Some(0));
        assert_eq!(snap.events["SCX_EV_DISPATCH_KEEP_LAST"], 12);
    }
}
