//! The fault-injection suite's records (tests/vm_faults.rs, issue 32 point 7): what the guest
//! writes, the checks every row must pass and the Markdown table the test prints. Pure logic:
//! the guest's files come in as text, so the tests below run on a fixture of guest records
//! (tests/data/vm_faults/).
//!
//! The guest script (`guest.sh` here) appends one line per fact to `/lab/out/faults`:
//! `ROW KEY VALUE`, the value being the rest of the line. Rows come in the order they first
//! appear; a key given twice keeps its last value, except `note`, which adds one each time.
//!
//! | key | value |
//! |---|---|
//! | `fault` | what was done, for the table |
//! | `t_before` | when `ROW.before.json` (the status before the fault) was answered (`date +%s.%N`) |
//! | `t_inject` | when the fault was injected |
//! | `t_event` | when the fault took effect, if later than `t_inject` (the wrapper's kill 1 s after attach, a watchdog ejection, the killed agent's expert leaving the kernel) |
//! | `t_known` | when the first status poll that agrees with the kernel on a known scheduler came back, or `none` |
//! | `t_answer` | when the agent made that agreeing answer (its `kernel_read_unix_ms`), if it says |
//! | `poll_s` | how long the guest polled for it |
//! | `agent_pid` | the agent alive at the end of the row, or `none` |
//! | `procs` | every `scx_*` process at the end of the row: `PID/PPID/STATE/COMM`, space-separated |
//! | `orphan_wait_s` | how long the guest waited for `scx_*` processes not the agent's children to go (at most 5 s) |
//! | `t_final_start`, `t_final_end`, `final_rc` | the timed `asa status --json` at the end (`ROW.final.json`) |
//! | `during_status_s` | how long the agent took to answer an `asa status` while the fault lasts (the socket flood; its `answered_in_ms`: connect to answer), or `none` |
//! | `refuse_file`, `refuse_rc`, `refuse_msg` | a new `asa run --dry-run` given the damaged file: the file, its exit status and error |
//! | `note` | anything else worth a line in the table |
//!
//! Besides, `ROW.before.json`, `ROW.known.json` (the agreeing answer, else the last poll's) and
//! `ROW.final.json` hold `asa status --json` as the guest saw it.
#![allow(dead_code)]

use std::collections::BTreeMap;

use serde_json::Value;

/// Every row: the kernel and the agent agree on a known scheduler within this long.
pub const KNOWN_WITHIN_S: f64 = 2.0;
/// A row that killed the agent and started a new one, counted from the kernel's return to EEVDF
/// (the dead agent's expert detaching, 0.1–2.4 s under TCG, is the kernel's part): the new
/// process must first exist and bind the control socket (about 1.0 s after the kill under TCG),
/// and the guest's next poll, a new process that takes 0.3–0.8 s to start there, finds it:
/// [`KNOWN_WITHIN_S`] plus up to two poll periods. Measured to the agent's answer from the kill:
/// 1.19–1.87 s in eight runs, 4.23 s in one whose expert took 2.35 s to leave (lab VM, 2026-11-29).
pub const RESTARTED_AGENT_WITHIN_S: f64 = 4.0;
/// Every row: `asa status` answers within this long, at the end of the row and during a flood.
pub const STATUS_WITHIN_S: f64 = 1.0;

/// An `scx_*` process at the end of a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proc {
    pub pid: u32,
    pub ppid: u32,
    /// `ps` state letter (S, R, T for stopped, Z, ...).
    pub state: String,
    pub comm: String,
}

impl Proc {
    /// `PID/PPID/STATE/COMM`.
    fn parse(text: &str) -> Result<Self, String> {
        let parts: Vec<&str> = text.splitn(4, '/').collect();
        let [pid, ppid, state, comm] = parts[..] else {
            return Err(format!("process {text:?} is not PID/PPID/STATE/COMM"));
        };
        let num = |s: &str| {
            s.parse::<u32>()
                .map_err(|_| format!("process {text:?}: {s:?} is not a number"))
        };
        Ok(Self {
            pid: num(pid)?,
            ppid: num(ppid)?,
            state: state.to_owned(),
            comm: comm.to_owned(),
        })
    }

    fn describe(&self) -> String {
        format!(
            "{} (pid {}, parent {}, state {})",
            self.comm, self.pid, self.ppid, self.state
        )
    }
}

/// What one `asa status --json` said, as far as the table needs it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StatusView {
    /// An agent answered (`agent` is not null).
    pub answered: bool,
    pub agent_pid: Option<u32>,
    pub mode: Option<String>,
    pub active: Option<String>,
    pub active_pid: Option<u32>,
    pub consistent: Option<bool>,
    pub switching_to: Option<String>,
    /// (ms since the epoch, message).
    pub last_event: Option<(u64, String)>,
    /// The decision engine's tick counter.
    pub ticks: Option<u64>,
    /// The decision engine's tick length.
    pub interval_ms: Option<u64>,
    pub standby_pids: Vec<u32>,
    /// How long the agent took to answer (connect to answer, `answered_in_ms`), when said.
    pub answered_in_ms: Option<f64>,
}

impl StatusView {
    /// From `asa status --json`; anything unreadable (an empty file when `asa status` timed
    /// out) is "no agent answered".
    pub fn parse(text: &str) -> Self {
        let Ok(v) = serde_json::from_str::<Value>(text) else {
            return Self::default();
        };
        let a = &v["agent"];
        if !a.is_object() {
            return Self::default();
        }
        let u32_of = |v: &Value| v.as_u64().map(|n| n as u32);
        let str_of = |v: &Value| v.as_str().map(str::to_owned);
        Self {
            answered: true,
            agent_pid: u32_of(&a["pid"]),
            mode: str_of(&a["mode"]),
            active: str_of(&a["active"]["expert"]),
            active_pid: u32_of(&a["active"]["pid"]),
            consistent: a["consistent"].as_bool(),
            switching_to: str_of(&a["switching_to"]),
            last_event: a["last_event"]["at_unix_ms"]
                .as_u64()
                .zip(str_of(&a["last_event"]["message"])),
            ticks: a["decision"]["ticks"].as_u64(),
            interval_ms: a["decision"]["engine"]["interval_ms"].as_u64(),
            standby_pids: a["standby"]["experts"]
                .as_array()
                .map(|s| s.iter().filter_map(|e| u32_of(&e["pid"])).collect())
                .unwrap_or_default(),
            answered_in_ms: v["answered_in_ms"].as_f64(),
        }
    }
}

/// A new agent's answer to the damaged file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The damaged file, which the error must name.
    pub file: String,
    pub exit_code: i32,
    pub message: String,
}

/// The decision ticks a row cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ticks {
    /// `lost` of the `expected` ticks of the row's span were not made; `restarted`: by two
    /// agents (the counter restarts with the new one; the old one's ticks between the status
    /// before and its death are not counted).
    Lost {
        lost: u64,
        expected: u64,
        restarted: bool,
    },
    /// No agent answered at the end: every tick after the fault is lost.
    AgentGone { expected: u64 },
    /// The status before the fault had no tick counter.
    Unknown,
}

/// One fault and what followed.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultRow {
    pub name: String,
    pub fault: String,
    pub t_before: f64,
    pub t_inject: f64,
    pub t_event: Option<f64>,
    pub t_known: Option<f64>,
    /// When the agent made the agreeing answer (its own clock, the guest's), when it says.
    pub t_answer: Option<f64>,
    pub poll_s: Option<f64>,
    pub agent_pid: Option<u32>,
    pub procs: Vec<Proc>,
    pub orphan_wait_s: Option<f64>,
    pub t_final_start: f64,
    pub t_final_end: f64,
    pub final_rc: i32,
    /// `Some(None)`: measured, no answer.
    pub during_status_s: Option<Option<f64>>,
    pub refusal: Option<Refusal>,
    pub notes: Vec<String>,
    pub before: StatusView,
    pub known: StatusView,
    pub after: StatusView,
}

impl FaultRow {
    /// When the fault took effect: its own time when later than the injection.
    pub fn effect_at(&self) -> f64 {
        self.t_event.unwrap_or(self.t_inject).max(self.t_inject)
    }

    /// Seconds from the fault's effect to the first answer in which the agent agrees with the
    /// kernel on a known scheduler (None: never within the poll): when the agent made it, if
    /// the answer says, else when the poll came back. The poll's own start-up (an `asa status`
    /// process: 5 ms on the host, 0.7–0.8 s under TCG) is the guest's, not the agent's.
    pub fn known_after_s(&self) -> Option<f64> {
        self.t_known
            .map(|t| self.t_answer.filter(|a| *a <= t).unwrap_or(t))
            .map(|t| (t - self.effect_at()).max(0.0))
    }

    /// `scx_*` processes whose parent is not the live agent (all of them when no agent lives).
    pub fn orphans(&self) -> Vec<&Proc> {
        self.procs
            .iter()
            .filter(|p| Some(p.ppid) != self.agent_pid)
            .collect()
    }

    /// The agent's `scx_*` children that its final status names neither active nor standby
    /// (an ejected expert it has not reaped yet, say): shown, not a failure, since the agent
    /// still owns them.
    pub fn strays(&self) -> Vec<&Proc> {
        if !self.after.answered {
            return Vec::new();
        }
        self.procs
            .iter()
            .filter(|p| Some(p.ppid) == self.agent_pid)
            .filter(|p| {
                Some(p.pid) != self.after.active_pid && !self.after.standby_pids.contains(&p.pid)
            })
            .collect()
    }

    /// The ticks the row's span (status before the fault → status at the end) should have
    /// held against those the agent counted.
    pub fn ticks(&self) -> Ticks {
        let Some(interval) = self.before.interval_ms.or(self.after.interval_ms) else {
            return Ticks::Unknown;
        };
        let span_ms = ((self.t_final_start - self.t_before) * 1000.0).max(0.0);
        let expected = (span_ms / interval as f64).floor() as u64;
        let (Some(before), true) = (self.before.ticks, self.after.answered) else {
            return if self.after.answered {
                Ticks::Unknown
            } else {
                Ticks::AgentGone { expected }
            };
        };
        let after = self.after.ticks.unwrap_or(0);
        let restarted = self.before.agent_pid != self.after.agent_pid;
        let made = if restarted {
            after
        } else {
            after.saturating_sub(before)
        };
        Ticks::Lost {
            lost: expected.saturating_sub(made),
            expected,
            restarted,
        }
    }

    /// How long the agent took to answer the status at the end, when one answered: its
    /// `answered_in_ms` when the answer says, else the whole `asa status` process's time.
    pub fn status_answer_s(&self) -> Option<f64> {
        (self.final_rc == 0 && self.after.answered).then(|| {
            self.after
                .answered_in_ms
                .map(|ms| ms / 1e3)
                .unwrap_or((self.t_final_end - self.t_final_start).max(0.0))
        })
    }

    /// The row's bound for a known scheduler: [`RESTARTED_AGENT_WITHIN_S`] when a new agent
    /// took over during the row, else [`KNOWN_WITHIN_S`].
    pub fn known_within_s(&self) -> f64 {
        match self.ticks() {
            Ticks::Lost {
                restarted: true, ..
            } => RESTARTED_AGENT_WITHIN_S,
            _ => KNOWN_WITHIN_S,
        }
    }

    /// What fails the row: no known scheduler within [`KNOWN_WITHIN_S`], an orphaned expert,
    /// `asa status` not answering within [`STATUS_WITHIN_S`] (at the end, and during the
    /// fault when measured), an agent that disagrees with the kernel at the end, a new agent
    /// that accepts a damaged file.
    pub fn failures(&self) -> Vec<String> {
        let mut failures = Vec::new();
        let within = self.known_within_s();
        match self.known_after_s() {
            None => failures.push(format!(
                "the kernel and the agent did not agree on a known scheduler within the {} poll",
                self.poll_s
                    .map(|s| format!("{s:.0} s"))
                    .unwrap_or_else(|| "guest's".into())
            )),
            Some(s) if s > within => failures.push(format!(
                "a known scheduler only after {s:.2} s (at most {within} s)"
            )),
            Some(_) => {}
        }
        for p in self.orphans() {
            failures.push(format!("orphaned expert {}", p.describe()));
        }
        match self.status_answer_s() {
            None if self.final_rc == 124 => failures.push(format!(
                "`asa status` did not answer within {:.0} s at the end",
                self.t_final_end - self.t_final_start
            )),
            None => failures.push(format!(
                "no agent answered `asa status` at the end (exit {})",
                self.final_rc
            )),
            Some(s) if s > STATUS_WITHIN_S => failures.push(format!(
                "`asa status` took {s:.2} s at the end (at most {STATUS_WITHIN_S} s)"
            )),
            Some(_) => {}
        }
        if self.after.consistent == Some(false) {
            failures.push("at the end the agent and the kernel disagree".into());
        }
        match self.during_status_s {
            Some(None) => failures.push("`asa status` did not answer during the fault".into()),
            Some(Some(s)) if s > STATUS_WITHIN_S => failures.push(format!(
                "`asa status` took {s:.2} s during the fault (at most {STATUS_WITHIN_S} s)"
            )),
            _ => {}
        }
        if let Some(r) = &self.refusal {
            if r.exit_code == 0 {
                failures.push("a new agent accepted the damaged file".into());
            } else if !r.message.contains(&r.file) {
                failures.push(format!(
                    "a new agent refused the damaged file (exit {}) without naming {}: {:?}",
                    r.exit_code, r.file, r.message
                ));
            }
        }
        failures
    }
}

/// Parses the guest's `faults` records; `file` reads one of the guest's output files (None
/// when it is missing).
pub fn parse_records(
    records: &str,
    file: impl Fn(&str) -> Option<String>,
) -> Result<Vec<FaultRow>, String> {
    let mut order: Vec<String> = Vec::new();
    let mut facts: BTreeMap<String, (BTreeMap<String, String>, Vec<String>)> = BTreeMap::new();
    for (n, line) in records.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut parts = line.splitn(3, ' ');
        let (Some(row), Some(key)) = (parts.next(), parts.next()) else {
            return Err(format!("line {}: {line:?} is not `ROW KEY VALUE`", n + 1));
        };
        let value = parts.next().unwrap_or("").trim().to_owned();
        if !facts.contains_key(row) {
            order.push(row.to_owned());
        }
        let (keys, notes) = facts.entry(row.to_owned()).or_default();
        if key == "note" {
            notes.push(value);
        } else {
            keys.insert(key.to_owned(), value);
        }
    }
    order
        .iter()
        .map(|name| {
            let (keys, notes) = &facts[name];
            row_from(name, keys, notes.clone(), &file)
        })
        .collect()
}

fn row_from(
    name: &str,
    keys: &BTreeMap<String, String>,
    notes: Vec<String>,
    file: &impl Fn(&str) -> Option<String>,
) -> Result<FaultRow, String> {
    let get = |key: &str| -> Result<&str, String> {
        keys.get(key)
            .map(String::as_str)
            .ok_or_else(|| format!("row {name}: no {key}"))
    };
    let time = |key: &str| -> Result<f64, String> {
        let v = get(key)?;
        v.parse()
            .map_err(|_| format!("row {name}: {key} {v:?} is not a time"))
    };
    // "none" (or nothing) is None; anything else must parse.
    fn maybe<T: std::str::FromStr>(
        name: &str,
        keys: &BTreeMap<String, String>,
        key: &str,
    ) -> Result<Option<T>, String> {
        match keys.get(key).map(|v| v.trim()) {
            None | Some("none") | Some("") => Ok(None),
            Some(v) => v
                .parse()
                .map(Some)
                .map_err(|_| format!("row {name}: {key} {v:?} does not parse")),
        }
    }
    let status = |suffix: &str| {
        StatusView::parse(&file(&format!("{name}.{suffix}.json")).unwrap_or_default())
    };
    let refusal = maybe::<i32>(name, keys, "refuse_rc")?.map(|exit_code| Refusal {
        file: keys.get("refuse_file").cloned().unwrap_or_default(),
        exit_code,
        message: keys.get("refuse_msg").cloned().unwrap_or_default(),
    });
    let during_status_s = if keys.contains_key("during_status_s") {
        Some(maybe::<f64>(name, keys, "during_status_s")?)
    } else {
        None
    };
    Ok(FaultRow {
        name: name.to_owned(),
        fault: get("fault")?.to_owned(),
        t_before: time("t_before")?,
        t_inject: time("t_inject")?,
        t_event: maybe(name, keys, "t_event")?,
        t_known: maybe(name, keys, "t_known")?,
        t_answer: maybe(name, keys, "t_answer")?,
        poll_s: maybe(name, keys, "poll_s")?,
        agent_pid: maybe(name, keys, "agent_pid")?,
        procs: keys
            .get("procs")
            .map(|p| p.split_whitespace().map(Proc::parse).collect())
            .transpose()?
            .unwrap_or_default(),
        orphan_wait_s: maybe(name, keys, "orphan_wait_s")?,
        t_final_start: time("t_final_start")?,
        t_final_end: time("t_final_end")?,
        final_rc: maybe(name, keys, "final_rc")?.unwrap_or(-1),
        during_status_s,
        refusal,
        notes,
        before: status("before"),
        known: status("known"),
        after: status("final"),
    })
}

/// A table cell: one line, no column breaks.
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// At most `n` characters, with an ellipsis when cut.
fn clip(text: &str, n: usize) -> String {
    if text.chars().count() <= n {
        text.to_owned()
    } else {
        format!("{}…", text.chars().take(n).collect::<String>())
    }
}

/// One status answer in words: expert, consistency, and the last event when it came after
/// `since` (s since the epoch).
fn said(view: &StatusView, since: f64) -> String {
    if !view.answered {
        return "no agent answered".into();
    }
    let mut s = format!("`{}`", view.active.as_deref().unwrap_or("?"));
    s.push_str(match (view.consistent, &view.switching_to) {
        (Some(true), _) => ", consistent",
        (Some(false), _) => ", NOT consistent",
        (None, Some(_)) => ", switching",
        (None, None) => ", consistency unknown",
    });
    if let Some(to) = &view.switching_to {
        s.push_str(&format!(" (to {to})"));
    }
    if view.mode.as_deref().is_some_and(|m| m != "daemon") {
        s.push_str(&format!(", mode {}", view.mode.as_deref().unwrap_or("?")));
    }
    match &view.last_event {
        Some((at_ms, message)) if *at_ms as f64 >= since * 1000.0 - 50.0 => {
            s.push_str(&format!("; event: {}", clip(message, 110)))
        }
        _ => s.push_str("; no event since the fault"),
    }
    s
}

/// The Markdown table: fault → time back to a known scheduler → what `asa status` said → lost
/// decisions → orphans → `status` answers → notes; a last column says PASS or what failed.
pub fn markdown_table(rows: &[FaultRow]) -> String {
    let mut out = String::from(
        "| fault | back to a known scheduler | what `asa status` said | lost decisions | orphaned experts | `asa status` answers | notes | verdict |\n\
         |---|---:|---|---:|---|---|---|---|\n",
    );
    for row in rows {
        let known = match row.known_after_s() {
            Some(s) => format!("{s:.2} s"),
            None => format!(
                "not within {}",
                row.poll_s
                    .map(|s| format!("{s:.0} s"))
                    .unwrap_or_else(|| "the poll".into())
            ),
        };
        let ticks = match row.ticks() {
            Ticks::Lost {
                lost,
                expected,
                restarted,
            } => format!(
                "{lost} of {expected}{}",
                if restarted { " (agent restarted)" } else { "" }
            ),
            Ticks::AgentGone { expected } => format!("all {expected} (no agent)"),
            Ticks::Unknown => "?".into(),
        };
        let orphans = row.orphans();
        let orphans = if orphans.is_empty() {
            "none".to_owned()
        } else {
            orphans
                .iter()
                .map(|p| p.describe())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let answers = match row.status_answer_s() {
            Some(s) => format!(
                "{} ({:.0} ms): {}",
                if s <= STATUS_WITHIN_S {
                    "yes"
                } else {
                    "too slow"
                },
                s * 1000.0,
                said(&row.after, f64::INFINITY).trim_end_matches("; no event since the fault")
            ),
            None if row.final_rc == 124 => "no (timed out)".into(),
            None => "no (no agent)".into(),
        };
        let mut notes = row.notes.clone();
        if let Some(r) = &row.refusal {
            notes.push(format!(
                "a new agent: exit {}{}",
                r.exit_code,
                if r.message.is_empty() {
                    String::new()
                } else {
                    format!(", {}", clip(&r.message, 140))
                }
            ));
        }
        match row.during_status_s {
            Some(Some(s)) => notes.push(format!("`asa status` during it: {:.0} ms", s * 1000.0)),
            Some(None) => notes.push("`asa status` during it: no answer".into()),
            None => {}
        }
        if let Some(t) = row.t_event.filter(|&t| t > row.t_inject) {
            notes.push(format!(
                "timed from the fault's effect, {:.2} s after the injection",
                t - row.t_inject
            ));
        }
        for p in row.strays() {
            notes.push(format!(
                "agent child neither active nor standby: {}",
                p.describe()
            ));
        }
        if let Some(w) = row.orphan_wait_s.filter(|&w| w >= 0.05) {
            notes.push(format!("waited {w:.1} s for non-children to go"));
        }
        let failures = row.failures();
        let verdict = if failures.is_empty() {
            "PASS".to_owned()
        } else {
            format!("FAIL: {}", failures.join("; "))
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            cell(&row.fault),
            cell(&known),
            cell(&said(&row.known, row.effect_at())),
            cell(&ticks),
            cell(&orphans),
            cell(&answers),
            cell(&notes.join("; ")),
            cell(&verdict),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn fixture_dir() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/vm_faults")
    }

    fn fixture() -> Vec<FaultRow> {
        let dir = fixture_dir();
        let records = std::fs::read_to_string(dir.join("faults")).unwrap();
        parse_records(&records, |name| {
            std::fs::read_to_string(dir.join(name)).ok()
        })
        .unwrap()
    }

    fn row<'a>(rows: &'a [FaultRow], name: &str) -> &'a FaultRow {
        rows.iter().find(|r| r.name == name).unwrap()
    }

    #[test]
    fn rows_come_in_the_order_the_guest_wrote_them() {
        let names: Vec<String> = fixture().into_iter().map(|r| r.name).collect();
        assert_eq!(
            names,
            [
                "expert_sigkill",
                "expert_exits_1s_after_attach",
                "agent_sigkill_mid_switch",
                "model_truncated",
                "decision_log_disk_full",
                "control_socket_flood",
            ]
        );
    }

    #[test]
    fn a_killed_expert_back_on_eevdf_at_once_passes() {
        let rows = fixture();
        let r = row(&rows, "expert_sigkill");
        assert!((r.known_after_s().unwrap() - 0.25).abs() < 1e-6);
        assert_eq!(r.known.active.as_deref(), Some("eevdf"));
        assert!(r.failures().is_empty(), "{:?}", r.failures());
        // The agent's own standby (its child, listed in the status) is not an orphan.
        assert_eq!(r.procs.len(), 1);
        assert!(r.orphans().is_empty() && r.strays().is_empty());
        assert_eq!(
            r.ticks(),
            Ticks::Lost {
                lost: 0,
                expected: 5,
                restarted: false
            }
        );
    }

    #[test]
    fn the_time_back_counts_from_the_faults_effect_when_it_comes_later() {
        let rows = fixture();
        let r = row(&rows, "expert_exits_1s_after_attach");
        // Pinned at 2000.0, killed by its wrapper at 2002.1, agreed on EEVDF at 2002.4.
        assert!((r.known_after_s().unwrap() - 0.3).abs() < 1e-6);
        assert!(r.failures().is_empty(), "{:?}", r.failures());
    }

    #[test]
    fn an_orphan_and_a_slow_restart_fail_the_agent_kill_row() {
        let rows = fixture();
        let r = row(&rows, "agent_sigkill_mid_switch");
        let failures = r.failures();
        assert_eq!(failures.len(), 2, "{failures:?}");
        // A new agent took over: its own bound, not the other rows' 2 s.
        assert_eq!(r.known_within_s(), RESTARTED_AGENT_WITHIN_S);
        assert_eq!(
            row(&rows, "expert_sigkill").known_within_s(),
            KNOWN_WITHIN_S
        );
        assert!(
            failures[0].contains("only after 4.30 s (at most 4 s)"),
            "{failures:?}"
        );
        assert!(
            failures[1].contains("orphaned expert scx_rusty (pid 150, parent 1"),
            "{failures:?}"
        );
        // The counter restarted with the new agent: 6 of 9 ticks made.
        assert_eq!(
            r.ticks(),
            Ticks::Lost {
                lost: 3,
                expected: 9,
                restarted: true
            }
        );
    }

    #[test]
    fn an_agent_that_stopped_answering_fails_and_lost_every_tick() {
        let rows = fixture();
        let r = row(&rows, "decision_log_disk_full");
        let failures = r.failures();
        assert_eq!(
            failures,
            ["no agent answered `asa status` at the end (exit 0)"]
        );
        assert_eq!(r.ticks(), Ticks::AgentGone { expected: 6 });
        // The machine went back to EEVDF with the agent: nothing orphaned.
        assert!(r.orphans().is_empty());
    }

    #[test]
    fn a_damaged_file_passes_when_the_agent_goes_on_and_a_new_one_refuses_it() {
        let rows = fixture();
        let r = row(&rows, "model_truncated");
        assert!(r.failures().is_empty(), "{:?}", r.failures());
        let refusal = r.refusal.as_ref().unwrap();
        assert_eq!(refusal.exit_code, 1);
        assert!(refusal.message.contains("classifier.onnx"));
        let mut accepted = r.clone();
        accepted.refusal = Some(Refusal {
            exit_code: 0,
            ..refusal.clone()
        });
        assert_eq!(
            accepted.failures(),
            ["a new agent accepted the damaged file"]
        );
        // An error that does not say which file is wrong is no clear refusal (it may be
        // another fault altogether).
        let mut vague = r.clone();
        vague.refusal = Some(Refusal {
            message: "asa: error: another agent already serves /run/asa/control.sock".into(),
            ..refusal.clone()
        });
        assert_eq!(vague.failures().len(), 1);
        assert!(vague.failures()[0].contains("without naming /lab/classifier.onnx"));
    }

    #[test]
    fn a_slow_status_during_the_flood_fails_the_row() {
        let rows = fixture();
        let r = row(&rows, "control_socket_flood");
        assert_eq!(r.during_status_s, Some(Some(0.085)));
        assert!(r.failures().is_empty(), "{:?}", r.failures());
        let mut slow = r.clone();
        slow.during_status_s = Some(Some(1.4));
        assert_eq!(
            slow.failures(),
            ["`asa status` took 1.40 s during the fault (at most 1 s)"]
        );
        slow.during_status_s = Some(None);
        assert_eq!(
            slow.failures(),
            ["`asa status` did not answer during the fault"]
        );
    }

    /// The time back counts to the agent's own agreeing answer when it says when it made it,
    /// not to the poll's return; a time after the return (no such answer) is ignored.
    #[test]
    fn the_agents_own_answer_time_counts_not_the_polls_return() {
        let rows = fixture();
        let mut r = row(&rows, "expert_sigkill").clone();
        let by_poll = r.known_after_s().unwrap();
        assert!(by_poll > 0.0, "the fixture's row took time");
        r.t_answer = r.t_known.map(|t| t - by_poll / 2.0);
        assert!((by_poll / 2.0 - r.known_after_s().unwrap()).abs() < 1e-9);
        r.t_answer = r.t_known.map(|t| t + 0.5);
        assert_eq!(r.known_after_s(), Some(by_poll));
    }

    /// The status at the end is judged on the agent's own answer time when it says, not on
    /// the status process's start-up.
    #[test]
    fn the_final_status_counts_the_agents_answer_time_when_it_says() {
        let rows = fixture();
        let mut r = row(&rows, "expert_sigkill").clone();
        r.t_final_end = r.t_final_start + 1.5;
        assert_eq!(r.status_answer_s(), Some(1.5));
        assert!(!r.failures().is_empty(), "1.5 s by the process fails");
        r.after.answered_in_ms = Some(40.0);
        assert_eq!(r.status_answer_s(), Some(0.04));
        assert!(r.failures().is_empty(), "{:?}", r.failures());
    }

    #[test]
    fn never_agreeing_and_a_status_timeout_are_failures() {
        let rows = fixture();
        let mut r = row(&rows, "expert_sigkill").clone();
        r.t_known = None;
        r.final_rc = 124;
        r.t_final_end = r.t_final_start + 5.0;
        r.after = StatusView::default();
        assert_eq!(
            r.failures(),
            [
                "the kernel and the agent did not agree on a known scheduler within the 10 s poll",
                "`asa status` did not answer within 5 s at the end",
            ]
        );
    }

    #[test]
    fn an_agent_child_neither_active_nor_standby_is_shown_not_failed() {
        let rows = fixture();
        let mut r = row(&rows, "expert_sigkill").clone();
        r.procs.push(Proc {
            pid: 121,
            ppid: 100,
            state: "S".into(),
            comm: "scx_bpfland".into(),
        });
        assert_eq!(r.strays().len(), 1);
        assert!(r.failures().is_empty());
        assert!(markdown_table(&[r]).contains("agent child neither active nor standby"));
    }

    #[test]
    fn the_table_has_a_line_per_row_with_what_status_said() {
        let rows = fixture();
        let table = markdown_table(&rows);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 2 + rows.len(), "{table}");
        assert!(lines[0].starts_with("| fault | back to a known scheduler |"));
        let kill = lines[2];
        assert!(kill.contains("| 0.25 s |"), "{kill}");
        assert!(
            kill.contains("`eevdf`, consistent; event: expert bpfland ended (killed by SIGKILL)"),
            "{kill}"
        );
        assert!(kill.contains("| 0 of 5 |"), "{kill}");
        assert!(kill.ends_with("| PASS |"), "{kill}");
        let restart = lines[4];
        assert!(restart.contains("3 of 9 (agent restarted)"), "{restart}");
        assert!(
            restart.contains("FAIL: a known scheduler only after 4.30 s"),
            "{restart}"
        );
        let disk = lines[6];
        assert!(disk.contains("all 6 (no agent)"), "{disk}");
        assert!(disk.contains("| no (no agent) |"), "{disk}");
        // Every line has the same number of columns: nothing in a cell broke the table.
        for line in lines.iter().filter(|l| !l.starts_with("|---")) {
            assert_eq!(line.matches(" | ").count(), 7, "{line}");
        }
    }

    #[test]
    fn an_event_from_before_the_fault_is_not_shown_as_its_effect() {
        let view = StatusView {
            answered: true,
            active: Some("bpfland".into()),
            consistent: Some(true),
            last_event: Some((1_000_000, "an old event".into())),
            ..StatusView::default()
        };
        assert_eq!(
            said(&view, 2000.0),
            "`bpfland`, consistent; no event since the fault"
        );
        assert!(said(&view, 999.9).contains("an old event"));
    }

    #[test]
    fn malformed_records_are_errors_naming_the_row_and_key() {
        let none = |_: &str| None;
        let e = parse_records("r fault x\nr t_before 1\n", none).unwrap_err();
        assert!(e.contains("row r: no t_inject"), "{e}");
        let e = parse_records("r fault x\nr t_before 1\nr t_inject soon\n", none).unwrap_err();
        assert!(e.contains("t_inject \"soon\" is not a time"), "{e}");
        let e = parse_records(
            "r fault x\nr t_before 1\nr t_inject 2\nr t_final_start 3\nr t_final_end 3\nr procs 12/1\n",
            none,
        )
        .unwrap_err();
        assert!(e.contains("not PID/PPID/STATE/COMM"), "{e}");
    }
}
