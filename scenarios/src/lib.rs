//! ASA's scenario runner: scenarios as data (foreground probe × background load), probes that
//! measure what a person feels, background loads from real Debian tools, the paper's
//! user-experience score, and reports comparing schedulers. See `README.md`.

pub mod catalogue;
pub mod cli;
pub mod clock;
pub mod dataset;
pub mod loads;
pub mod precondition;
pub mod probes;
pub mod progress;
pub mod report;
pub mod runner;
pub mod score;
pub mod stats;
pub mod work;

pub use cli::{
    scenario_command, scenario_command_in, scenario_command_observed, scenario_command_with,
    ScenarioArgs, ScenarioCommand, ScenarioRunOptions,
};
pub use runner::{
    run_one, run_scenario, run_scenario_observed, CurrentSchedulerOnly, ExpertSwitcher,
    LabelledApp, RunObserver, RunOptions, RunOutcome, SupervisorSwitcher,
};
