//! `asa doctor` and the one-line errors of the files `asa` reads, run as the built binary on
//! the host. The host has no sched_ext (the lab VM has): there `asa doctor` must name the
//! missing kernel support and exit with status 1; on a kernel with sched_ext it must say so.

use std::path::Path;
use std::process::{Command, Output};

mod daemon_common;

fn asa() -> Command {
    Command::new(env!("CARGO_BIN_EXE_asa"))
}

fn run(args: &[&str]) -> Output {
    asa().args(args).output().expect("running asa")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The one `asa: error:` line of a failed command (and nothing else on stderr).
fn one_error_line(out: &Output) -> String {
    assert!(!out.status.success(), "succeeded: {}", stdout(out));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "not one line: {stderr}");
    assert!(lines[0].starts_with("asa: error: "), "{stderr}");
    lines[0].to_owned()
}

fn has_sched_ext() -> bool {
    Path::new("/sys/kernel/sched_ext/state").exists()
}

#[test]
fn doctor_names_the_missing_kernel_support_and_fails_without_sched_ext() {
    let out = run(&["doctor"]);
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    let (summary, checks) = lines.split_last().expect("no output");
    for line in checks {
        assert!(
            ["ok   ", "info ", "WARN ", "FAIL "]
                .iter()
                .any(|label| line.starts_with(label)),
            "not a check line: {line:?}\n{text}"
        );
    }
    for name in [
        "sched_ext",
        "BTF",
        "privileges",
        "bpffs",
        "expert bpfland",
        "model",
        "mapping",
    ] {
        assert!(
            checks
                .iter()
                .any(|l| l[5..].starts_with(&format!("{name}: "))),
            "no {name} line:\n{text}"
        );
    }
    let sched_ext = checks
        .iter()
        .find(|l| l[5..].starts_with("sched_ext: "))
        .unwrap();
    if has_sched_ext() {
        assert!(
            sched_ext.starts_with("ok   sched_ext: /sys/kernel/sched_ext (state "),
            "{text}"
        );
    } else {
        assert!(
            sched_ext.starts_with("FAIL sched_ext: the kernel has no /sys/kernel/sched_ext — "),
            "{text}"
        );
        assert!(sched_ext.contains("CONFIG_SCHED_CLASS_EXT=y"), "{text}");
        assert_eq!(out.status.code(), Some(1), "{text}");
        assert!(summary.contains("cannot run here"), "{text}");
    }
}

#[test]
fn doctor_json_has_the_same_checks_and_verdict() {
    let out = run(&["doctor", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let checks = json["checks"].as_array().unwrap();
    let sched_ext = checks.iter().find(|c| c["name"] == "sched_ext").unwrap();
    let failed = checks.iter().any(|c| c["severity"] == "fail");
    assert_eq!(json["ok"], !failed);
    assert_eq!(out.status.code(), Some(if failed { 1 } else { 0 }));
    if !has_sched_ext() {
        assert_eq!(sched_ext["severity"], "fail", "{json}");
        assert_eq!(json["ok"], false);
    }
}

#[test]
fn doctor_reports_the_mapping_table_it_is_given_with_the_place_of_its_error() {
    let dir = tempfile::tempdir().unwrap();
    let mapping = dir.path().join("mapping.toml");
    std::fs::write(
        &mapping,
        "schema = \"asa.mapping\"\nversion = 1\nclass = ]\n",
    )
    .unwrap();
    let out = run(&["doctor", "--mapping", mapping.to_str().unwrap()]);
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l.starts_with("FAIL mapping: "))
        .unwrap_or_else(|| panic!("no FAIL mapping line:\n{text}"));
    assert!(
        line.contains(mapping.to_str().unwrap()) && line.contains("at line 3, column 9"),
        "{line}"
    );
    assert_eq!(out.status.code(), Some(1));
}

/// A table of the default model's classes with one `[[layer]]` row of `class`, cpu_batch's
/// policy with 5 ms slices.
fn table_with_layer_row(dir: &Path, class: &str) -> std::path::PathBuf {
    let classes =
        daemon_common::mapping_table(&daemon_common::default_model_classes(), |_| "eevdf");
    let path = dir.join(format!("{class}.toml"));
    std::fs::write(
        &path,
        format!(
            "{classes}\n[[layer]]\nclass = \"{class}\"\npolicy = {{ kind = \"open\", slice_us = 5000, weight = 100 }}\nranked = [{{ expert = \"layered-{class}-5ms\", score = 0.6, spread = 0.01, runs = 4 }}]\n"
        ),
    )
    .unwrap();
    path
}

#[test]
fn doctor_names_the_tables_layer_rows_and_refuses_a_class_the_plan_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let good = table_with_layer_row(dir.path(), "cpu_batch");
    let text = stdout(&run(&["doctor", "--mapping", good.to_str().unwrap()]));
    let line = text
        .lines()
        .find(|l| l[5..].starts_with("mapping: "))
        .unwrap_or_else(|| panic!("no mapping line:\n{text}"));
    assert!(
        line.contains("calibrated layer policies: cpu_batch"),
        "{line}"
    );
    let bad = table_with_layer_row(dir.path(), "gpu");
    let out = run(&["doctor", "--mapping", bad.to_str().unwrap()]);
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l.starts_with("FAIL mapping: "))
        .unwrap_or_else(|| panic!("no FAIL mapping line:\n{text}"));
    assert!(line.contains("\"gpu\"") && line.contains("layer"), "{line}");
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn a_mapping_file_that_is_not_toml_names_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let mapping = dir.path().join("m.toml");
    std::fs::write(&mapping, "schema = \"asa.mapping\"\nnot toml [[[\n").unwrap();
    let error = one_error_line(&run(&["mapping", "show", mapping.to_str().unwrap()]));
    assert!(error.contains(mapping.to_str().unwrap()), "{error}");
    assert!(error.contains(" at line 2, column 5: "), "{error}");
}

#[test]
fn a_mapping_file_without_schema_and_version_says_what_they_should_be() {
    let dir = tempfile::tempdir().unwrap();
    let mapping = dir.path().join("m.toml");
    std::fs::write(&mapping, "a = 1\n").unwrap();
    let error = one_error_line(&run(&["mapping", "show", mapping.to_str().unwrap()]));
    assert!(
        error.contains("lacks the fields `schema` and `version`"),
        "{error}"
    );
    assert!(
        error.contains("schema = \"asa.mapping\" and version = 1"),
        "{error}"
    );
    assert!(!error.contains("is  v0"), "{error}");
}

#[test]
fn a_missing_or_non_utf8_mapping_file_names_its_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.toml");
    let error = one_error_line(&run(&["mapping", "show", missing.to_str().unwrap()]));
    assert_eq!(
        error.matches("No such file or directory").count(),
        1,
        "{error}"
    );
    assert!(error.contains("check the path"), "{error}");
    let binary = dir.path().join("binary.toml");
    std::fs::write(&binary, b"\xff\xfe\n").unwrap();
    let error = one_error_line(&run(&["mapping", "show", binary.to_str().unwrap()]));
    assert_eq!(error.matches("valid UTF-8").count(), 1, "{error}");
}

#[test]
fn a_missing_config_file_names_its_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("asa.toml");
    let out = asa()
        .arg("--socket")
        .arg(dir.path().join("control.sock"))
        .args(["run", "--dry-run", "--config"])
        .arg(&missing)
        .output()
        .unwrap();
    let error = one_error_line(&out);
    assert!(error.contains(missing.to_str().unwrap()), "{error}");
    assert_eq!(
        error.matches("No such file or directory").count(),
        1,
        "{error}"
    );
}

#[test]
fn status_help_lists_its_own_options_and_not_the_daemons() {
    let out = run(&["status", "--help"]);
    let text = stdout(&out);
    assert!(out.status.success());
    assert!(text.contains("--wait-for"), "{text}");
    for daemon_option in [
        "--standby",
        "--expert-nice",
        "--stop-grace-ms",
        "--take-over",
    ] {
        assert!(!text.contains(daemon_option), "{daemon_option} in:\n{text}");
    }
    let run_help = stdout(&run(&["run", "--help"]));
    assert!(run_help.contains("--standby") && run_help.contains("--take-over"));
}
