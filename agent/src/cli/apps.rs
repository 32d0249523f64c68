//! `asa apps` (the applications and their classes, per-application mode) and
//! `asa app set|unset` (the user's word on an application's class), through the running agent.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use asa_agent::control::{client, AppRow, AppsStatus, Request, Response};

/// `asa apps` options.
#[derive(Debug, Clone, clap::Args)]
pub struct AppsArgs {
    /// Print JSON (the mode and every application).
    #[arg(long)]
    pub json: bool,
}

/// `asa app` subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum AppCommand {
    /// Pin an application's class: TARGET is a pid (its application: its process group in its
    /// cgroup) or a cgroup path (absolute under the cgroup2 mount, or relative to it: every
    /// application in it). Kept across agent restarts; a pid's pin goes with its application.
    Set {
        /// A pid or a cgroup path.
        target: String,
        /// A class of the layer plan (interactive, cpu_batch, io_bound, network, background).
        class: String,
    },
    /// Remove an application's pin (it falls back to the layer of unclassified tasks).
    Unset {
        /// A pid or a cgroup path, as given to `asa app set`.
        target: String,
    },
}

/// The agent's answer to `request`, or one error.
fn ask(socket: &Path, request: &Request) -> Result<Response> {
    let response = client::request(socket, request, Duration::from_secs(10))?
        .context("no agent is running (`asa run`): applications have classes only under it")?;
    if !response.ok {
        bail!(
            "{}",
            response.error.as_deref().unwrap_or("the agent refused")
        );
    }
    Ok(response)
}

/// `asa apps`.
pub fn list(args: &AppsArgs, socket: &Path) -> Result<ExitCode> {
    let response = ask(socket, &Request::Apps)?;
    let apps = response
        .status
        .and_then(|s| s.decision)
        .and_then(|d| d.apps)
        .unwrap_or_default();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&apps)?);
    } else {
        print!("{}", table(&apps));
    }
    Ok(ExitCode::SUCCESS)
}

/// `asa app set|unset`.
pub fn command(command: &AppCommand, socket: &Path) -> Result<ExitCode> {
    match command {
        AppCommand::Set { target, class } => {
            ask(
                socket,
                &Request::AppSet {
                    target: target.clone(),
                    class: class.clone(),
                },
            )?;
            println!(
                "asa: {target} has class {class} (pinned; `asa app unset {target}` removes it)"
            );
        }
        AppCommand::Unset { target } => {
            ask(
                socket,
                &Request::AppUnset {
                    target: target.clone(),
                },
            )?;
            println!("asa: {target} is no longer pinned");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// "whole machine: lavd" or "per application (layered): 40 applications, 2 with a class,
/// classes from pins only" (or "from <application model>").
pub fn mode_line(apps: &AppsStatus) -> String {
    if apps.mode == "per_application" {
        format!(
            "per application ({}): {} applications, {} with a class, classes from {}",
            apps.expert,
            apps.applications,
            apps.with_class,
            apps.app_model.as_deref().unwrap_or("pins only")
        )
    } else {
        format!("whole machine: {}{}", apps.expert, ahead_line(apps))
    }
}

/// "; 40 applications classified ahead of layered (2 with a class)" while the decision heads
/// for a layer-plan expert, else nothing.
pub fn ahead_line(apps: &AppsStatus) -> String {
    match &apps.ahead_of {
        Some(expert) => format!(
            "; {} applications classified ahead of {expert} ({} with a class)",
            apps.applications, apps.with_class
        ),
        None => String::new(),
    }
}

/// The applications as a table, classed ones first.
pub fn table(apps: &AppsStatus) -> String {
    let mut out = format!("{}\n", mode_line(apps));
    if let Some(problem) = &apps.problem {
        out.push_str(&format!("{problem}\n"));
    }
    if apps.list.is_empty() {
        return out;
    }
    let mut rows: Vec<&AppRow> = apps.list.iter().collect();
    rows.sort_by_key(|r| (r.class.is_none(), r.cgroup.clone(), r.pgid));
    out.push_str(&format!(
        "{:<44} {:<22} {:>7} {:<12} {:<10} {:>5} {:<12} {:>7}\n",
        "application (cgroup pgid)",
        "leader",
        "threads",
        "class",
        "source",
        "conf",
        "layer",
        "since"
    ));
    for r in rows {
        let application = format!("{} {}", r.cgroup, r.pgid);
        out.push_str(&format!(
            "{:<44} {:<22} {:>7} {:<12} {:<10} {:>5} {:<12} {:>6.0}s\n",
            application,
            format!("{} ({})", r.leader_comm, r.leader_pid),
            r.threads,
            r.class.as_deref().unwrap_or("-"),
            r.source.as_deref().unwrap_or("-"),
            r.confidence.map_or("-".into(), |c| format!("{c:.2}")),
            r.layer,
            r.seen_s
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cgroup: &str, pgid: u32, class: Option<&str>) -> AppRow {
        AppRow {
            cgroup: cgroup.into(),
            cgroup_id: 1,
            pgid,
            leader_pid: pgid,
            leader_comm: "sh".into(),
            threads: 2,
            class: class.map(str::to_string),
            source: class.map(|_| "pinned".to_string()),
            confidence: class.map(|_| 1.0),
            layer: class.unwrap_or("other").into(),
            seen_s: 12.4,
        }
    }

    #[test]
    fn the_mode_line_says_whole_machine_or_per_application_with_counts() {
        let mut apps = AppsStatus {
            mode: "whole_machine".into(),
            expert: "lavd".into(),
            ..AppsStatus::default()
        };
        assert_eq!(mode_line(&apps), "whole machine: lavd");
        apps.mode = "per_application".into();
        apps.expert = "layered".into();
        apps.applications = 40;
        apps.with_class = 2;
        assert_eq!(
            mode_line(&apps),
            "per application (layered): 40 applications, 2 with a class, classes from pins only"
        );
        apps.app_model = Some("/usr/share/asa/app-classifier.onnx".into());
        assert!(mode_line(&apps).ends_with("classes from /usr/share/asa/app-classifier.onnx"));
    }

    #[test]
    fn the_mode_line_says_when_applications_are_classified_ahead_of_a_layer_plan_expert() {
        let apps = AppsStatus {
            mode: "whole_machine".into(),
            expert: "cosmos".into(),
            ahead_of: Some("layered".into()),
            applications: 12,
            with_class: 3,
            ..AppsStatus::default()
        };
        assert_eq!(
            mode_line(&apps),
            "whole machine: cosmos; 12 applications classified ahead of layered (3 with a class)"
        );
    }

    #[test]
    fn the_apps_table_lists_classed_applications_first_with_layer_and_source() {
        let apps = AppsStatus {
            mode: "per_application".into(),
            expert: "layered".into(),
            applications: 2,
            with_class: 1,
            list: vec![
                row("/a.slice", 5, None),
                row("/user.slice/x.scope", 77, Some("interactive")),
            ],
            ..AppsStatus::default()
        };
        let text = table(&apps);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[1].starts_with("application (cgroup pgid)"));
        assert!(lines[2].starts_with("/user.slice/x.scope 77"), "{text}");
        for column in ["sh (77)", "interactive", "pinned", "1.00", "12s"] {
            assert!(lines[2].contains(column), "{column} in {}", lines[2]);
        }
        assert!(lines[3].contains(" - ") && lines[3].contains("other"));
    }
}
