//! The statistics an expert keeps in its catalogue `stats_file`, read for `asa status`.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// The statistics an expert keeps in its catalogue `stats_file` (scx_gru:
/// `/run/scx_gru/stats.json`), as `asa status` shows them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExpertStats {
    /// The expert (catalogue name).
    pub expert: String,
    /// The file read.
    pub file: PathBuf,
    /// Seconds since the file was last written.
    pub age_s: Option<f64>,
    /// False when the file was written before the expert last started (a previous run's
    /// numbers, or the new run has not written yet).
    pub current: bool,
    /// The file's JSON object; None when it could not be read (see `error`).
    pub stats: Option<serde_json::Value>,
    /// Why the file could not be read.
    pub error: Option<String>,
}

/// Read `expert`'s stats file, if the catalogue declares one. `since_unix_ms` is when the
/// expert started (from the agent), to tell this run's numbers from an earlier run's.
pub fn read_expert_stats(
    expert: &asa_experts::Expert,
    since_unix_ms: Option<u64>,
) -> Option<ExpertStats> {
    let file = expert.stats_file.clone()?;
    let mut out = ExpertStats {
        expert: expert.name.clone(),
        file: file.clone(),
        age_s: None,
        current: false,
        stats: None,
        error: None,
    };
    let read = || -> Result<(std::time::SystemTime, serde_json::Value)> {
        let modified = std::fs::metadata(&file)
            .and_then(|m| m.modified())
            .with_context(|| format!("reading {}", file.display()))?;
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("reading {}", file.display()))?;
        let value: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not JSON", file.display()))?;
        if !value.get("schema").is_some_and(|s| s.is_string()) {
            bail!("{} has no \"schema\" key", file.display());
        }
        Ok((modified, value))
    };
    match read() {
        Ok((modified, value)) => {
            let now = std::time::SystemTime::now();
            out.age_s = Some(
                now.duration_since(modified)
                    .unwrap_or_default()
                    .as_secs_f64(),
            );
            let modified_ms = asa_experts::supervisor::unix_ms(modified);
            out.current = since_unix_ms.is_none_or(|since| modified_ms >= since);
            out.stats = Some(value);
        }
        // The expert writes its first numbers a few seconds after it starts: no file yet is
        // normal operation, not an error.
        Err(e) if !file.exists() && e.root_cause().downcast_ref::<std::io::Error>().is_some() => {
            out.error = Some(format!(
                "none yet ({} appears once the expert has run a few seconds)",
                file.display()
            ))
        }
        Err(e) => out.error = Some(format!("{e:#}")),
    }
    Some(out)
}

/// Where the stats lines start (under "expert stats: ").
const STATS_INDENT: &str = "              ";
/// The widest a stats line grows before the next field goes on a line of its own.
const STATS_WIDTH: usize = 100;

/// `key=value` for every number, string or boolean in a JSON object (nested objects are
/// skipped; [`format_expert_stats`] prints them on their own lines), as lines of at most
/// [`STATS_WIDTH`] columns (a single longer field keeps a line to itself) after `lead` on the
/// first and the indent on the others.
fn scalar_lines(lead: &str, object: &serde_json::Map<String, serde_json::Value>) -> Vec<String> {
    let fields = object.iter().filter_map(|(k, v)| match v {
        serde_json::Value::Number(n) => Some(format!("{k}={n}")),
        serde_json::Value::String(s) => Some(format!("{k}={s}")),
        serde_json::Value::Bool(b) => Some(format!("{k}={b}")),
        _ => None,
    });
    let mut lines = Vec::new();
    let mut line = format!("{STATS_INDENT}{lead}");
    let mut empty = true;
    for field in fields {
        if !empty && line.chars().count() + 1 + field.chars().count() > STATS_WIDTH {
            lines.push(std::mem::replace(&mut line, STATS_INDENT.to_string()));
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(&field);
        empty = false;
    }
    if !empty {
        lines.push(line);
    }
    lines
}

/// The lines `asa status` prints for an expert's stats.
pub fn format_expert_stats(s: &ExpertStats) -> Vec<String> {
    let mut lines = Vec::new();
    let Some(serde_json::Value::Object(obj)) = &s.stats else {
        lines.push(format!(
            "expert stats: {}: {}",
            s.expert,
            s.error.as_deref().unwrap_or("not a JSON object")
        ));
        return lines;
    };
    lines.push(format!(
        "expert stats: {} ({}, written {:.1} s ago{})",
        s.expert,
        s.file.display(),
        s.age_s.unwrap_or(f64::NAN),
        if s.current {
            ""
        } else {
            ", BEFORE the expert started: not this run's numbers"
        }
    ));
    lines.extend(scalar_lines("", obj));
    for (k, v) in obj {
        if let serde_json::Value::Object(inner) = v {
            lines.extend(scalar_lines(&format!("{k}: "), inner));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flat_stats_file_prints_as_lines_of_at_most_the_width() {
        let mut object = serde_json::Map::new();
        for i in 0..60 {
            object.insert(format!("nr_counter_{i:02}"), serde_json::json!(i * 1000));
        }
        object.insert("schema".into(), serde_json::json!("asa.gru-stats"));
        let lines = scalar_lines("", &object);
        assert!(lines.len() > 10, "{lines:?}");
        assert!(
            lines.iter().all(|l| l.chars().count() <= STATS_WIDTH),
            "{lines:?}"
        );
        assert!(lines.iter().all(|l| l.starts_with(STATS_INDENT)));
        let joined = lines.join(" ");
        assert_eq!(joined.matches('=').count(), 61, "every field once");
        assert!(joined.contains("schema=asa.gru-stats"));
    }

    #[test]
    fn expert_stats_are_read_and_dated() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("stats.json");
        let mut gru = asa_experts::Catalogue::builtin()
            .get("gru")
            .unwrap()
            .clone();
        gru.stats_file = Some(file.clone());
        // No file yet (the expert's first seconds): said as such, naming the file.
        let missing = read_expert_stats(&gru, None).unwrap();
        assert!(missing.stats.is_none());
        let said = format_expert_stats(&missing).join("\n");
        assert!(said.contains("gru: none yet"), "{said}");
        assert!(said.contains("stats.json appears once"), "{said}");
        assert!(!said.contains("No such file"), "{said}");
        std::fs::write(
            &file,
            r#"{"schema":"asa.gru-stats","mode":"model","predictions_applied":12,
               "user":{"inferences":5,"inference_us_p99":40.5},"bpf":{"nr_events":7}}"#,
        )
        .unwrap();
        let now = asa_experts::supervisor::unix_ms(std::time::SystemTime::now());
        let s = read_expert_stats(&gru, Some(now - 60_000)).unwrap();
        assert!(s.current, "{s:?}");
        assert_eq!(s.stats.as_ref().unwrap()["predictions_applied"], 12);
        let text = format_expert_stats(&s).join("\n");
        assert!(text.contains("mode=model predictions_applied=12"), "{text}");
        assert!(
            text.contains("user: inference_us_p99=40.5 inferences=5"),
            "{text}"
        );
        assert!(text.contains("bpf: nr_events=7"), "{text}");
        // Written before the expert started: flagged.
        let old = read_expert_stats(&gru, Some(now + 60_000)).unwrap();
        assert!(!old.current);
        assert!(format_expert_stats(&old)
            .join("\n")
            .contains("not this run's numbers"));
        // Not a stats file.
        std::fs::write(&file, "[1, 2]").unwrap();
        assert!(read_expert_stats(&gru, None)
            .unwrap()
            .error
            .unwrap()
            .contains("no \"schema\""));
        // Experts without a stats file have none.
        let bpfland = asa_experts::Catalogue::builtin()
            .get("bpfland")
            .unwrap()
            .clone();
        assert!(read_expert_stats(&bpfland, None).is_none());
    }
}
