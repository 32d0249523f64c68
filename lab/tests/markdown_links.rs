//! Every relative link in the repository's Markdown files points at a file or folder that
//! exists: READMEs link to experiments in `results/`, and a moved or dropped experiment must
//! not leave a dangling link behind. And every committed experiment folder in `results/` (one
//! with a tracked README) is listed in `results/README.md`, the index a reader starts from.
//!
//! Links inside fenced code blocks and inline code are not links; `http(s)://`, `mailto:` and
//! in-page `#anchor` links are not checked (no network here).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root (this crate is `lab/`).
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("lab/ has a parent")
        .to_path_buf()
}

/// The Markdown files git tracks.
fn tracked_markdown(root: &Path) -> Vec<PathBuf> {
    let out = Command::new("git")
        .args(["ls-files", "-z", "--", "*.md"])
        .current_dir(root)
        .output()
        .expect("git ls-files runs");
    assert!(out.status.success(), "git ls-files failed");
    out.stdout
        .split(|&b| b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| root.join(String::from_utf8_lossy(p).as_ref()))
        .collect()
}

/// Drops inline code spans (`...`) from one line of prose.
fn without_inline_code(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
        } else if !in_code {
            out.push(c);
        }
    }
    out
}

/// The targets of the inline links `[text](target)` in `text`, outside code.
fn link_targets(text: &str) -> Vec<(usize, String)> {
    let mut targets = Vec::new();
    let mut fenced = false;
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let prose = without_inline_code(line);
        let mut rest = prose.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].split_whitespace().next().unwrap_or("");
            targets.push((n + 1, target.to_string()));
            rest = &after[end..];
        }
    }
    targets
}

/// Whether a link target is checked here (relative paths only).
fn is_local(target: &str) -> bool {
    !(target.is_empty()
        || target.starts_with('#')
        || target.starts_with("http://")
        || target.starts_with("https://")
        || target.starts_with("mailto:"))
}

#[test]
fn every_relative_markdown_link_resolves() {
    let root = repo_root();
    let files = tracked_markdown(&root);
    assert!(
        files.len() > 10,
        "expected the repository's READMEs, found {}",
        files.len()
    );
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).expect("tracked Markdown is readable");
        let dir = file.parent().expect("a file has a folder");
        for (line, target) in link_targets(&text) {
            if !is_local(&target) {
                continue;
            }
            let path = target.split('#').next().unwrap_or("");
            checked += 1;
            if !dir.join(path).exists() {
                let shown = file.strip_prefix(&root).unwrap_or(file);
                broken.push(format!("{}:{line}: {target}", shown.display()));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "{} of {checked} relative links do not resolve:\n{}",
        broken.len(),
        broken.join("\n")
    );
}

#[test]
fn every_experiment_folder_is_in_the_results_index() {
    let results = repo_root().join("results");
    let index = std::fs::read_to_string(results.join("README.md")).expect("results/README.md");
    let listed: Vec<String> = link_targets(&index).into_iter().map(|(_, t)| t).collect();
    // The committed experiments: a run still writing its folder is not one yet.
    let mut missing: Vec<String> = tracked_markdown(&repo_root())
        .iter()
        .filter_map(|f| f.strip_prefix(&results).ok())
        .filter_map(|rel| {
            let mut parts = rel.components();
            let folder = parts.next()?.as_os_str().to_string_lossy().into_owned();
            (parts.next()?.as_os_str() == "README.md" && parts.next().is_none()).then_some(folder)
        })
        .filter(|name| !listed.iter().any(|t| t.trim_end_matches('/') == name))
        .collect();
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "results/README.md does not list: {}",
        missing.join(", ")
    );
}

#[test]
fn links_in_code_are_not_links() {
    let text = "see [a](x.md) and `[b](y.md)`\n```\n[c](z.md)\n```\n[d](w.md#part)";
    let targets: Vec<String> = link_targets(text).into_iter().map(|(_, t)| t).collect();
    assert_eq!(targets, vec!["x.md", "w.md#part"]);
}

#[test]
fn web_and_anchor_links_are_not_checked() {
    assert!(!is_local("https://example.org/a"));
    assert!(!is_local("#status"));
    assert!(is_local("../results/2026-11-27-x/"));
}
