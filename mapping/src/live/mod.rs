//! Stage 3 of calibration ("live", ASA paper §4.3): run the real agent, `asa run`, on the
//! scenario catalogue next to every static expert, and see whether it delivers.
//!
//! The agent is one more column of the scenario runs: the pseudo-expert [`AGENT`]. Pinning it
//! ([`LiveSwitcher`]) returns the machine to EEVDF, gives up this process's supervisor (one ASA
//! process drives the scheduler at a time) and starts `asa run` with the table under test; the
//! agent then classifies the scenario as it runs and switches by itself. Pinning a static expert
//! stops the agent (SIGTERM: it restores EEVDF) and takes the supervisor back. Each agent run
//! writes its decision log next to the results, so the report can say what the agent chose.
//!
//! [`live_summary`] compares, scenario by scenario, the agent with EEVDF, every static expert
//! and the static oracle (the best static expert of that scenario, chosen after the fact), with
//! the paper's measures: win rate against EEVDF, Top-1 and Top-3 among the static set plus the
//! agent. That oracle is biased upward (the best of several noisy means), so the summary also
//! states the held-out oracle: each repetition's expert chosen on the other repetitions
//! ([`held_out`]). [`refine`] turns the static runs of the live session (plus earlier result
//! sets of the same machine) into the refined table: a new machine can start from any prototype
//! table and be calibrated by this stage alone.
//!
//! - [`switcher`]: runs `asa run` as a column of the scenario runs ([`LiveSwitcher`]);
//! - [`trace`]: what an agent run did, from its decision log ([`AgentTrace`]);
//! - [`summary`]: the agent against EEVDF, the static experts and the oracle ([`live_summary`]);
//! - [`held_out`]: the static oracle chosen on other repetitions than it is scored on;
//! - [`verdict`]: win, tie or loss beyond the measured noise;
//! - [`report`]: the summary as Markdown ([`markdown`]).

pub mod held_out;
pub mod report;
pub mod summary;
pub mod switcher;
pub mod trace;
pub mod verdict;

pub use held_out::{HeldOutOracle, HeldOutSummary, OneExpertHeldOut, StaticRuns};
pub use report::markdown;
pub use summary::{live_summary, static_runs, LiveScenario, LiveSummary};
pub use switcher::{AgentLauncher, LiveSwitcher};
pub use trace::{AgentTrace, PhaseTrace};

/// The pseudo-expert name of a run under the live agent (`asa run`).
pub const AGENT: &str = "asa";

/// The pseudo-expert name of a run under `asa run --dry-run`: the agent perceives and decides
/// but never switches, so the machine stays on EEVDF. Against EEVDF it measures what the agent's
/// own work costs the user; against [`AGENT`], what its switching is worth.
pub const AGENT_DRY_RUN: &str = "asa-dry-run";

/// Whether `name` is one of the agent's pseudo-experts (not a scheduler of the catalogue).
pub fn is_agent(name: &str) -> bool {
    name == AGENT || name == AGENT_DRY_RUN
}
