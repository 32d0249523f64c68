//! Replays `asa run` decision logs through today's decision policy: the classifier
//! probabilities each tick logged (`asa.decision` JSON lines) go through [`Policy`] again, with a
//! mapping table and cooldown of your choice, and the switches it makes are printed next to the
//! ones the logged agent made. For what-if questions about the policy (how many of a live
//! calibration's switches a rule would have held) without another VM run.
//!
//! ```sh
//! cargo run -p asa-agent --example replay_decisions -- --mapping TABLE [--cooldown-s 6] \
//!     [--horizon-s 60] [--class-vote-only] LOG.jsonl [LOG.jsonl ...]
//! ```
//! It also counts the unsure ticks (no vote, or one not confident) of both, and the replayed
//! ticks decided by the vote over experts (classes that go to the same expert voting together).
//!
//! The replay assumes every switch it decides succeeds at once (the log's own later ticks show
//! the logged agent's experts, which differ once the two disagree), and it starts each log from
//! the expert the log's first tick names.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use asa_agent::decision::policy::{Action, DecisionRecord, Policy, PolicyConfig, Reason};
use asa_mapping::MappingTable;

struct Args {
    mapping: PathBuf,
    cooldown: Duration,
    horizon: Duration,
    /// The policy without the vote over experts (`vote_over_experts = false`).
    class_vote_only: bool,
    logs: Vec<PathBuf>,
}

fn parse_args() -> Result<Args> {
    let mut mapping = None;
    let mut cooldown = Duration::from_secs(6);
    let mut horizon = PolicyConfig::default().horizon;
    let mut logs = Vec::new();
    let mut class_vote_only = false;
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--mapping" => mapping = Some(PathBuf::from(value()?)),
            "--cooldown-s" => cooldown = Duration::from_secs_f64(value()?.parse()?),
            "--horizon-s" => horizon = Duration::from_secs_f64(value()?.parse()?),
            "--class-vote-only" => class_vote_only = true,
            flag if flag.starts_with("--") => bail!("unknown option {flag}"),
            log => logs.push(PathBuf::from(log)),
        }
    }
    let Some(mapping) = mapping else {
        bail!(
            "usage: replay_decisions --mapping TABLE [--cooldown-s S] [--horizon-s S] [--class-vote-only] LOG.jsonl..."
        )
    };
    Ok(Args {
        mapping,
        cooldown,
        horizon,
        class_vote_only,
        logs,
    })
}

/// Short name of a decision reason, as the agent's log writes it.
fn kind(reason: &Reason) -> String {
    serde_json::to_value(reason)
        .ok()
        .and_then(|v| v.get("kind")?.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// No vote, or one not confident.
fn unsure(reason: &Reason) -> bool {
    matches!(reason, Reason::NoDecision | Reason::NotConfident { .. })
}

fn main() -> Result<()> {
    let args = parse_args()?;
    let table = MappingTable::load(&args.mapping)
        .with_context(|| format!("load {}", args.mapping.display()))?;
    let config = PolicyConfig {
        cooldown: args.cooldown,
        horizon: args.horizon,
        vote_over_experts: !args.class_vote_only,
        ..PolicyConfig::default()
    };
    let (mut logged_total, mut replayed_total) = (0, 0);
    let (mut unsure_logged, mut unsure_replayed, mut by_expert, mut ticks) = (0, 0, 0, 0);
    for log in &args.logs {
        let text =
            std::fs::read_to_string(log).with_context(|| format!("read {}", log.display()))?;
        let records: Vec<DecisionRecord> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(serde_json::from_str)
            .collect::<Result<_, _>>()
            .with_context(|| format!("parse {}", log.display()))?;
        let Some(first) = records.first() else {
            continue;
        };
        // The logged probabilities are a map; the policy takes them in a fixed class order.
        let classes: Vec<String> = first.probabilities.keys().cloned().collect();
        let mut policy = Policy::new(
            config,
            classes.clone(),
            &table,
            |_| true,
            first.current_expert.clone(),
        )?;
        let mut logged = Vec::new();
        let mut replayed = Vec::new();
        for record in &records {
            if record.action == Action::Switch {
                logged.push(format!(
                    "{}:{}→{}",
                    record.tick,
                    record.current_expert.as_deref().unwrap_or("-"),
                    record.target_expert.as_deref().unwrap_or("-")
                ));
            }
            let probabilities: Vec<f32> = classes
                .iter()
                .map(|c| record.probabilities.get(c).copied().unwrap_or(0.0))
                .collect();
            let now = Duration::from_secs_f64(record.at_s.max(0.0));
            let before = policy.current_expert().map(str::to_string);
            // A tick the agent left out as its own work (a standby loading) is left out again.
            let decision = match &record.reason {
                Reason::OwnWork { expert, .. } => {
                    policy.on_own_work_tick(now, &probabilities, expert)?
                }
                _ => policy.on_tick(now, &probabilities)?,
            };
            if !matches!(record.reason, Reason::OwnWork { .. }) {
                ticks += 1;
                unsure_logged += usize::from(unsure(&record.reason));
                unsure_replayed += usize::from(unsure(&decision.reason));
                by_expert += usize::from(decision.voted_expert.is_some());
            }
            if decision.action == Action::Switch {
                replayed.push(format!(
                    "{}:{}→{}",
                    decision.tick,
                    before.as_deref().unwrap_or("-"),
                    decision.target_expert.as_deref().unwrap_or("-")
                ));
            } else if record.action == Action::Switch {
                replayed.push(format!(
                    "{}:held({})",
                    decision.tick,
                    kind(&decision.reason)
                ));
            }
        }
        logged_total += logged.len();
        replayed_total += replayed.iter().filter(|s| !s.contains("held")).count();
        println!(
            "{}: logged {} | replayed {}",
            log.file_name().unwrap_or_default().to_string_lossy(),
            if logged.is_empty() {
                "-".to_string()
            } else {
                logged.join(" ")
            },
            if replayed.is_empty() {
                "-".to_string()
            } else {
                replayed.join(" ")
            }
        );
    }
    println!("switches: logged {logged_total}, replayed {replayed_total}");
    println!(
        "unsure ticks (no vote or not confident) of {ticks}: logged {unsure_logged}, replayed \
         {unsure_replayed}; replayed ticks decided by the vote over experts: {by_expert}"
    );
    Ok(())
}
