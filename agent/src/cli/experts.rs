//! `asa experts`: the catalogue, and for each expert the binary that would run, where it was
//! found (`ASA_EXPERTS_PATH`, `cache`, `beside asa`, `PATH`, `distribution`) and its version
//! against the catalogue's.

use std::path::Path;

use anyhow::Result;
use asa_experts::{Catalogue, Expert, Located, VersionCheck};

/// One expert as `asa experts` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// Catalogue name.
    pub name: String,
    /// How it is provided (`kernel-default`, `scx-crate`, `workspace`).
    pub kind: String,
    /// The catalogue's version ("-": none pinned).
    pub catalogue: String,
    /// The version the binary reports ("-": none or not found; "refused": it does not run).
    pub found: String,
    /// Where the binary was found ("-": nowhere).
    pub from: String,
    /// The binary and the catalogue's arguments, or why there is none.
    pub binary: String,
    /// A line to print below the table: a version other than the catalogue's, or why the
    /// expert will not be started.
    pub note: Option<String>,
}

/// The row of `expert`, its binary found by `locate` and its version checked by `version`
/// (the supervisor's lookup and preflight).
pub fn row(
    expert: &Expert,
    locate: impl Fn(&Expert) -> Result<Located>,
    version: impl Fn(&Expert, &Path) -> Result<VersionCheck>,
) -> Row {
    let kind = serde_json::to_value(expert.kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let mut row = Row {
        name: expert.name.clone(),
        kind,
        catalogue: expert.version.clone().unwrap_or_else(|| "-".into()),
        found: "-".into(),
        from: "-".into(),
        binary: String::new(),
        note: None,
    };
    if expert.is_kernel_default() {
        row.binary = "(kernel)".into();
        return row;
    }
    match locate(expert) {
        Ok(located) => {
            row.from = located.origin.to_string();
            row.binary = located.path.display().to_string();
            match version(expert, &located.path) {
                Ok(check) => {
                    row.found = check.found().unwrap_or("-").to_owned();
                    row.note = check
                        .warning(expert, &located.path)
                        .map(|w| format!("warning: {w}"));
                }
                Err(e) => {
                    row.found = "refused".into();
                    row.note = Some(format!(
                        "refused: expert {} will not be started: {e:#} (reinstall it, or put \
                         a working one earlier on the search path: `lab/setup.sh` fills the \
                         project cache)",
                        expert.name
                    ));
                }
            }
        }
        Err(e) => row.binary = format!("MISSING: {e:#}"),
    }
    // Variants of one binary differ by their arguments only.
    for arg in &expert.args {
        row.binary.push(' ');
        row.binary.push_str(&shown_arg(arg));
    }
    row
}

/// Arguments longer than this are shortened in the table (scx_layered's layer plan is a JSON
/// argument of a few kilobytes).
const LONGEST_SHOWN_ARG: usize = 48;

/// `arg` as the table shows it: whole, or its start and its length when it is long.
fn shown_arg(arg: &str) -> String {
    if arg.chars().count() <= LONGEST_SHOWN_ARG {
        return arg.to_owned();
    }
    let start: String = arg.chars().take(LONGEST_SHOWN_ARG / 2).collect();
    format!("{start}… ({} bytes)", arg.len())
}

/// The table (a header and a line per row), then the rows' notes.
pub fn render(rows: &[Row]) -> String {
    let mut out = format!(
        "{:<8} {:<15} {:<10} {:<10} {:<16} binary\n",
        "name", "kind", "catalogue", "found", "from"
    );
    for r in rows {
        out.push_str(&format!(
            "{:<8} {:<15} {:<10} {:<10} {:<16} {}\n",
            r.name, r.kind, r.catalogue, r.found, r.from, r.binary
        ));
    }
    for note in rows.iter().filter_map(|r| r.note.as_deref()) {
        out.push_str(note);
        out.push('\n');
    }
    out
}

/// `asa experts`: every expert of `catalogue`, found and version-checked as the supervisor
/// does (each binary's `--version` runs once).
pub fn list(catalogue: &Catalogue) -> String {
    let rows: Vec<Row> = catalogue
        .experts()
        .iter()
        .map(|e| row(e, asa_experts::locate, asa_experts::check_version))
        .collect();
    render(&rows)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use asa_experts::Origin;

    use super::*;

    #[test]
    fn a_long_argument_such_as_a_layer_plan_is_shortened_to_its_start_and_length() {
        assert_eq!(shown_arg("--task-hint-map"), "--task-hint-map");
        let plan = format!("[{}]", "{\"name\":\"interactive\"},".repeat(40));
        let shown = shown_arg(&plan);
        assert!(shown.starts_with("[{\"name\":\"interactive\"},"), "{shown}");
        assert!(
            shown.ends_with(&format!("… ({} bytes)", plan.len())),
            "{shown}"
        );
        assert!(shown.chars().count() < 48, "{shown}");
    }

    fn expert(name: &str) -> Expert {
        Catalogue::builtin().require(name).unwrap().clone()
    }

    fn in_distribution(e: &Expert) -> Result<Located> {
        Ok(Located {
            path: PathBuf::from("/usr/bin").join(e.binary_name()),
            origin: Origin::Distribution,
        })
    }

    #[test]
    fn each_expert_says_where_it_came_from_and_its_version_against_the_catalogues() {
        let same = row(&expert("bpfland"), in_distribution, |_, _| {
            Ok(VersionCheck::compare(Some("1.1.4"), Some("1.1.4")))
        });
        assert_eq!(
            (
                same.catalogue.as_str(),
                same.found.as_str(),
                same.from.as_str()
            ),
            ("1.1.4", "1.1.4", "distribution")
        );
        assert_eq!(same.binary, "/usr/bin/scx_bpfland");
        assert_eq!(same.note, None);

        let other = row(&expert("cosmos"), in_distribution, |_, _| {
            Ok(VersionCheck::compare(Some("1.1.7"), Some("1.0.14")))
        });
        assert_eq!(
            (other.catalogue.as_str(), other.found.as_str()),
            ("1.1.7", "1.0.14")
        );
        let note = other.note.clone().unwrap();
        assert!(note.starts_with("warning: expert cosmos: /usr/bin/scx_cosmos is version 1.0.14, the catalogue's is 1.1.7"), "{note}");

        let broken = row(&expert("rusty"), in_distribution, |_, _| {
            anyhow::bail!("`/usr/bin/scx_rusty --version` failed (exit status 127)")
        });
        assert_eq!(broken.found, "refused");
        assert!(broken
            .note
            .as_deref()
            .unwrap()
            .starts_with("refused: expert rusty"));

        let missing = row(
            &expert("lavd"),
            |_| anyhow::bail!("expert lavd: executable \"scx_lavd\" not found"),
            |_, _| unreachable!("nothing to run"),
        );
        assert!(missing.binary.starts_with("MISSING: "), "{missing:?}");
        let kernel = row(&expert("eevdf"), in_distribution, |_, _| unreachable!());
        assert_eq!(kernel.binary, "(kernel)");

        let table = render(&[same, other, broken, missing, kernel]);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("name     kind            catalogue  found      from"));
        assert!(lines[1].starts_with("bpfland  scx-crate       1.1.4      1.1.4      distribution     /usr/bin/scx_bpfland"), "{table}");
        assert_eq!(lines.len(), 1 + 5 + 2, "{table}");
        assert!(lines[6].starts_with("warning: expert cosmos"));
        assert!(lines[7].starts_with("refused: expert rusty"));
    }
}
