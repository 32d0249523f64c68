//! Standalone scenario runner (`asa-scenarios list|run|report`), for the lab guest and for
//! hosts without the agent. Same commands as `asa scenario ...`.

use std::process::ExitCode;

use clap::Parser;

/// ASA scenario runner: foreground probes × background loads, scored per expert.
#[derive(Debug, Parser)]
#[command(name = "asa-scenarios", version)]
struct Cli {
    #[command(flatten)]
    args: asa_scenarios::ScenarioArgs,
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    match asa_scenarios::scenario_command(Cli::parse().args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
