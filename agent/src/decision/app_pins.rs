//! The user's word on applications: `asa app set <pid|cgroup> <class>` pins, kept across agent
//! restarts in a state file (default [`DEFAULT_PINS_FILE`]), and the admin's `[[app]]` pins of
//! the config file.
//!
//! A pin names its application one of two ways:
//! - a **cgroup** (path relative to the cgroup2 mount): whatever application runs in that cgroup
//!   has the class, now and later (a service, an `app-*.scope`);
//! - an **application** ([`AppKey`]: cgroup id and process group), from a pid: that application
//!   only; the pin is dropped when the application is gone (its key is reused by nothing else
//!   while it lives, and means nothing after).
//!
//! An application pin wins over a cgroup pin, a user's cgroup pin over the admin's. The class is
//! a name of the layer plan; the store does not know the plan (the daemon checks the names).
//!
//! The file is TOML, `[[pin]]` tables of `class` and either `cgroup` or `app = { cgroup, pgid }`
//! (with the `pid` it was given by, for people reading it). A malformed file is one error naming
//! the file, line and column; the agent then starts with no user pins (and says so in
//! `asa status`), and never overwrites the file until a pin is set.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::perception::apps::AppKey;

/// Where `asa run` keeps the user's application pins.
pub const DEFAULT_PINS_FILE: &str = "/var/lib/asa/app-pins.toml";

/// One pin as the file stores it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinEntry {
    /// The cgroup (relative to the cgroup2 mount) whose applications have the class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    /// The one application that has the class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<AppKey>,
    /// The pid the application pin was given by (informative).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The class (a layer plan's class name).
    pub class: String,
}

/// What a request names: a cgroup or one application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PinTarget {
    /// A cgroup, relative to the cgroup2 mount.
    Cgroup(String),
    /// The application of process `pid`, keyed by `key`.
    App {
        /// The application.
        key: AppKey,
        /// The pid it was named by.
        pid: u32,
    },
}

impl PinTarget {
    fn matches(&self, entry: &PinEntry) -> bool {
        match self {
            PinTarget::Cgroup(path) => entry.cgroup.as_deref() == Some(path.as_str()),
            PinTarget::App { key, .. } => entry.app == Some(*key),
        }
    }
}

impl std::fmt::Display for PinTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PinTarget::Cgroup(path) => write!(f, "cgroup /{path}"),
            PinTarget::App { key, pid } => write!(f, "the application of pid {pid} ({key})"),
        }
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PinFile {
    #[serde(default, rename = "pin")]
    pins: Vec<PinEntry>,
}

/// Parses a pins file's `text` (`origin` names it in errors, with line and column).
pub fn parse_pins(text: &str, origin: &str) -> Result<Vec<PinEntry>, String> {
    let file: PinFile = toml::from_str(text).map_err(|e| {
        format!(
            "application pins {origin}{}: {}",
            asa_layers::toml_error_place(text, &e),
            e.message().trim()
        )
    })?;
    for (i, pin) in file.pins.iter().enumerate() {
        if pin.cgroup.is_some() == pin.app.is_some() {
            return Err(format!(
                "application pins {origin}: pin {} (class {:?}) needs exactly one of `cgroup` and `app`",
                i + 1,
                pin.class
            ));
        }
    }
    Ok(file.pins)
}

/// The pins: the admin's (config file, cgroups only) and the user's (state file).
#[derive(Debug, Clone, Default)]
pub struct AppPins {
    file: Option<PathBuf>,
    admin: Vec<PinEntry>,
    user: Vec<PinEntry>,
    /// Applications pinned since the last [`AppPins::drop_gone`]: the walk that call judges by
    /// may predate the pin (and the application's process group), so they get one walk more.
    fresh: Vec<AppKey>,
}

impl AppPins {
    /// The user's pins from `file` (none when it does not exist) and the admin's `admin`
    /// (cgroup, class). A malformed file gives no user pins and its error, to report; the
    /// agent goes on.
    pub fn load(file: Option<&Path>, admin: &[(String, String)]) -> (Self, Option<String>) {
        let admin = admin
            .iter()
            .map(|(cgroup, class)| PinEntry {
                cgroup: Some(cgroup.trim_matches('/').to_string()),
                app: None,
                pid: None,
                class: class.clone(),
            })
            .collect();
        let mut pins = AppPins {
            file: file.map(Path::to_path_buf),
            admin,
            user: Vec::new(),
            fresh: Vec::new(),
        };
        let Some(path) = file else {
            return (pins, None);
        };
        let error = match std::fs::read_to_string(path) {
            Ok(text) => match parse_pins(&text, &path.display().to_string()) {
                Ok(user) => {
                    pins.user = user;
                    None
                }
                Err(e) => Some(e),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => Some(format!("application pins {}: {e}", path.display())),
        };
        (pins, error)
    }

    /// Every pin, the user's first.
    pub fn entries(&self) -> impl Iterator<Item = &PinEntry> {
        self.user.iter().chain(&self.admin)
    }

    /// The cgroups pins name (to resolve to ids).
    pub fn cgroups(&self) -> impl Iterator<Item = &str> {
        self.entries().filter_map(|p| p.cgroup.as_deref())
    }

    /// The class of application `key`, from its application pin, else a user's pin of its
    /// cgroup, else the admin's (`cgroup_ids`: the pins' cgroup paths resolved to ids).
    pub fn class_for(&self, key: &AppKey, cgroup_ids: &HashMap<String, u64>) -> Option<&str> {
        let of_cgroup = |p: &&PinEntry| {
            p.cgroup
                .as_ref()
                .and_then(|c| cgroup_ids.get(c))
                .is_some_and(|id| *id == key.cgroup)
        };
        self.user
            .iter()
            .find(|p| p.app == Some(*key))
            .or_else(|| self.user.iter().find(of_cgroup))
            .or_else(|| self.admin.iter().find(of_cgroup))
            .map(|p| p.class.as_str())
    }

    /// Pins `target` to `class` (replacing its earlier pin) and saves the file; on a failed
    /// save nothing changes.
    pub fn set(&mut self, target: &PinTarget, class: &str) -> Result<()> {
        let mut user = self.user.clone();
        user.retain(|p| !target.matches(p));
        user.push(match target {
            PinTarget::Cgroup(path) => PinEntry {
                cgroup: Some(path.clone()),
                app: None,
                pid: None,
                class: class.to_string(),
            },
            PinTarget::App { key, pid } => PinEntry {
                cgroup: None,
                app: Some(*key),
                pid: Some(*pid),
                class: class.to_string(),
            },
        });
        self.save(&user)?;
        self.user = user;
        if let PinTarget::App { key, .. } = target {
            self.fresh.push(*key);
        }
        Ok(())
    }

    /// Removes the user's pin of `target` and saves the file. An error when there is none (an
    /// admin's pin names the config file to edit).
    pub fn unset(&mut self, target: &PinTarget) -> Result<()> {
        if !self.user.iter().any(|p| target.matches(p)) {
            if self.admin.iter().any(|p| target.matches(p)) {
                bail!("{target} is pinned by the config file's [[app]]: edit it there");
            }
            bail!("{target} has no pin");
        }
        let user: Vec<PinEntry> = self
            .user
            .iter()
            .filter(|p| !target.matches(p))
            .cloned()
            .collect();
        self.save(&user)?;
        self.user = user;
        Ok(())
    }

    /// Drops the application pins whose application `alive` (one walk) says is gone, but not
    /// those set since the previous call; saves when any went.
    pub fn drop_gone(&mut self, alive: impl Fn(&AppKey) -> bool) -> Vec<PinEntry> {
        let fresh = std::mem::take(&mut self.fresh);
        let (gone, kept): (Vec<PinEntry>, Vec<PinEntry>) = self
            .user
            .drain(..)
            .partition(|p| p.app.is_some_and(|k| !fresh.contains(&k) && !alive(&k)));
        self.user = kept;
        if !gone.is_empty() {
            if let Err(e) = self.save(&self.user) {
                log::warn!("{e:#}");
            }
        }
        gone
    }

    /// Writes `user` to the file (through a temporary file and a rename).
    fn save(&self, user: &[PinEntry]) -> Result<()> {
        let Some(path) = &self.file else {
            return Ok(());
        };
        let text = toml::to_string(&PinFile {
            pins: user.to_vec(),
        })
        .context("write the application pins as TOML")?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("create {} for the application pins", dir.display()))?;
        }
        let temporary = path.with_extension("toml.tmp");
        std::fs::write(
            &temporary,
            format!("# asa app set/unset: the user's application pins\n{text}"),
        )
        .and_then(|()| std::fs::rename(&temporary, path))
        .with_context(|| format!("save the application pins to {}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(cgroup: u64, pgid: u32) -> AppKey {
        AppKey { cgroup, pgid }
    }

    #[test]
    fn a_pins_file_reads_cgroup_and_application_pins() {
        let text = "[[pin]]\ncgroup = \"system.slice/x.service\"\nclass = \"background\"\n\
                    [[pin]]\napp = { cgroup = 7, pgid = 42 }\npid = 42\nclass = \"interactive\"\n";
        let pins = parse_pins(text, "p.toml").unwrap();
        assert_eq!(pins[0].cgroup.as_deref(), Some("system.slice/x.service"));
        assert_eq!(pins[1].app, Some(key(7, 42)));
        assert_eq!(parse_pins("", "p.toml").unwrap(), vec![]);
    }

    #[test]
    fn a_malformed_pins_file_names_the_file_line_and_column() {
        let error = parse_pins(
            "[[pin]]\nclass = \"a\"\ncgroup = 3\n",
            "/var/lib/asa/p.toml",
        )
        .unwrap_err();
        assert!(
            error.starts_with("application pins /var/lib/asa/p.toml at line 3, column 10"),
            "{error}"
        );
        let both = "[[pin]]\nclass = \"a\"\ncgroup = \"x\"\napp = { cgroup = 1, pgid = 1 }\n";
        assert!(parse_pins(both, "p").unwrap_err().contains("exactly one"));
        assert!(parse_pins("[[pin]]\nclass = \"a\"\n", "p")
            .unwrap_err()
            .contains("exactly one"));
    }

    #[test]
    fn a_malformed_file_loads_no_user_pins_and_keeps_the_admins() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pins.toml");
        std::fs::write(&file, "[[pin]\n").unwrap();
        let admin = [("/a.slice".to_string(), "background".to_string())];
        let (pins, error) = AppPins::load(Some(&file), &admin);
        assert!(error.unwrap().contains("at line 1"));
        assert_eq!(pins.cgroups().collect::<Vec<_>>(), ["a.slice"]);
        // A missing file is no pins and no error.
        let (pins, error) = AppPins::load(Some(&dir.path().join("none.toml")), &[]);
        assert!(error.is_none() && pins.entries().next().is_none());
    }

    #[test]
    fn an_application_pin_wins_over_its_cgroups_and_the_users_over_the_admins() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pins.toml");
        let admin = [("s.slice".to_string(), "background".to_string())];
        let (mut pins, _) = AppPins::load(Some(&file), &admin);
        let ids = HashMap::from([("s.slice".to_string(), 5u64)]);
        assert_eq!(pins.class_for(&key(5, 1), &ids), Some("background"));
        assert_eq!(pins.class_for(&key(6, 1), &ids), None);
        pins.set(&PinTarget::Cgroup("s.slice".into()), "cpu_batch")
            .unwrap();
        assert_eq!(pins.class_for(&key(5, 1), &ids), Some("cpu_batch"));
        let app = PinTarget::App {
            key: key(5, 2),
            pid: 2,
        };
        pins.set(&app, "interactive").unwrap();
        assert_eq!(pins.class_for(&key(5, 2), &ids), Some("interactive"));
        assert_eq!(pins.class_for(&key(5, 3), &ids), Some("cpu_batch"));
    }

    #[test]
    fn pins_persist_and_a_gone_application_loses_its_pin_but_not_its_cgroups() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("state/pins.toml");
        let (mut pins, _) = AppPins::load(Some(&file), &[]);
        let app = PinTarget::App {
            key: key(9, 100),
            pid: 100,
        };
        pins.set(&app, "interactive").unwrap();
        pins.set(&PinTarget::Cgroup("u.slice".into()), "io_bound")
            .unwrap();
        pins.set(&app, "cpu_batch").unwrap();
        let (again, error) = AppPins::load(Some(&file), &[]);
        assert!(error.is_none());
        assert_eq!(again.entries().count(), 2);
        let ids = HashMap::new();
        assert_eq!(again.class_for(&key(9, 100), &ids), Some("cpu_batch"));
        let mut again = again;
        let gone = again.drop_gone(|_| false);
        assert_eq!(gone.len(), 1);
        let (last, _) = AppPins::load(Some(&file), &[]);
        assert_eq!(last.cgroups().collect::<Vec<_>>(), ["u.slice"]);
    }

    #[test]
    fn a_pin_set_after_the_walk_survives_that_walk_and_goes_at_the_next() {
        let (mut pins, _) = AppPins::load(None, &[]);
        let app = PinTarget::App {
            key: key(1, 209),
            pid: 209,
        };
        pins.set(&app, "cpu_batch").unwrap();
        // The walk this tick judges by was taken before the pin (and before the job's setsid).
        assert!(pins.drop_gone(|_| false).is_empty());
        assert_eq!(pins.entries().count(), 1);
        // The next walk does not see it either: now it is gone.
        assert_eq!(pins.drop_gone(|_| false).len(), 1);
    }

    #[test]
    fn unsetting_what_is_not_pinned_is_an_error_and_the_admins_pins_stay() {
        let admin = [("a.slice".to_string(), "background".to_string())];
        let (mut pins, _) = AppPins::load(None, &admin);
        let error = pins
            .unset(&PinTarget::Cgroup("a.slice".into()))
            .unwrap_err();
        assert!(error.to_string().contains("config file"), "{error}");
        let error = pins
            .unset(&PinTarget::Cgroup("b.slice".into()))
            .unwrap_err();
        assert!(error.to_string().contains("has no pin"), "{error}");
        pins.set(&PinTarget::Cgroup("b.slice".into()), "interactive")
            .unwrap();
        pins.unset(&PinTarget::Cgroup("b.slice".into())).unwrap();
        assert_eq!(pins.entries().count(), 1);
    }
}
