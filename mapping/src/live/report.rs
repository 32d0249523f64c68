//! The live summary as Markdown.

use asa_scenarios::runner::ResultSet;

use super::held_out::{HeldOutOracle, HeldOutSummary, WinCeiling};
use super::summary::{LiveScenario, LiveSummary};
use super::trace::PhaseTrace;
use super::verdict::Verdict;
use super::AGENT;
use super::AGENT_DRY_RUN;

/// A cell as `mean ± spread` (the spread only for cells run more than once).
fn cell_text(s: &LiveScenario, expert: &str) -> String {
    match s.cells.get(expert) {
        Some(c) if c.runs >= 2 => format!("{:.3} ± {:.3}", c.mean, c.spread),
        Some(c) => format!("{:.3}", c.mean),
        None => s
            .means
            .get(expert)
            .map(|m| format!("{m:.3}"))
            .unwrap_or("–".into()),
    }
}

/// A mark for a verdict against the baseline: ▲ beyond the noise above, ▼ below, = within.
fn verdict_mark(v: Option<Verdict>) -> &'static str {
    match v {
        Some(Verdict::Win) => " ▲",
        Some(Verdict::Loss) => " ▼",
        Some(Verdict::Tie) => " =",
        None => "",
    }
}

fn pct(x: Option<f64>) -> String {
    x.map(|v| format!("{:.1}%", v * 100.0))
        .unwrap_or_else(|| "n/a".into())
}

fn ratio(x: Option<f64>) -> String {
    x.map(|r| format!("{r:.3}")).unwrap_or("n/a".into())
}

/// The experts of `picks` in order, each once.
fn distinct(picks: &[String]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for p in picks {
        if !seen.contains(&p.as_str()) {
            seen.push(p);
        }
    }
    seen.join(", ")
}

/// A scenario's held-out oracle as `score (picks)`, `–` when it is not defined.
fn held_out_cell(o: Option<&HeldOutOracle>) -> String {
    o.map(|o| format!("{:.3} ({})", o.score, o.picks.join(", ")))
        .unwrap_or("–".into())
}

/// The paragraph on the held-out oracle: the agent against it, how far the hindsight oracle
/// sits above it, and one expert for all chosen the same way; or why it is not defined.
fn held_out_paragraph(held_out: Option<&HeldOutSummary>) -> String {
    let Some(h) = held_out else {
        return "**Held-out oracle**: not defined: it needs 2 or more repetitions of every static \
                expert in a scenario.\n\n"
            .into();
    };
    let one = h
        .one_expert
        .as_ref()
        .map(|o| {
            format!(
                " One expert for all, chosen the same way over every scenario: {}, {:.3} ({} of \
                 the static oracle).",
                distinct(&o.picks),
                o.score,
                ratio((h.hindsight > 0.0).then(|| o.score / h.hindsight))
            )
        })
        .unwrap_or_default();
    format!(
        "**Held-out oracle** (the static oracle is each scenario's best mean, picked after the \
         fact, and the best of noisy means is biased upward; the held-out oracle picks, for each \
         repetition, the expert with the best mean over the other repetitions and takes its \
         score in that one): over {} scenario(s), {} repetitions, agent / held-out oracle {} \
         (agent / static oracle {}); held-out / static oracle {} ({:.3} / {:.3}).{one}\n\n",
        h.scenarios,
        h.reps,
        ratio(h.agent_over_held_out),
        ratio(h.agent_over_hindsight),
        ratio(h.held_out_over_hindsight),
        h.held_out,
        h.hindsight,
    )
}

/// The paragraph on the most runs any choice among the static experts won over the baseline,
/// or nothing when it is not defined.
fn win_ceiling_paragraph(ceiling: Option<&WinCeiling>, baseline: &str) -> String {
    let Some(c) = ceiling else {
        return String::new();
    };
    let share = |n: usize| format!("{n}/{} ({:.1}%)", c.runs, 100.0 * n as f64 / c.runs as f64);
    format!(
        "**Runs won over {baseline}, at best** (scenarios with 2+ runs of every static expert; a \
         run against {baseline}'s run of the same repetition): each run's best static expert, \
         picked after the fact, {}; the static oracle {}; the held-out oracle {}. No choice among \
         these experts can expect more than the first.\n\n",
        share(c.per_run),
        share(c.hindsight),
        share(c.held_out),
    )
}

/// The markdown report of stage 3.
pub fn markdown(summary: &LiveSummary, set: &ResultSet, table_note: &str) -> String {
    let mut out = String::from("# Mapping calibration, stage 3 (live)\n\n");
    let o = &set.options;
    out.push_str(&format!(
        "Machine: {} · {} CPUs · kernel {}. Runs: {} scenario(s) × ({} + `asa run`), {} rep(s), \
         {:.0} s probe, {:.0} s settle, each load started once its scheduler had run {:.0} s. \
         {table_note}\n\n",
        set.machine.cpu_model,
        set.machine.cpus,
        set.machine.kernel,
        set.scenarios.len(),
        summary.experts.join(", "),
        o.reps,
        o.duration.as_secs_f64(),
        o.settle.as_secs_f64(),
        o.hold.as_secs_f64(),
    ));
    let wl = summary.vs_baseline;
    out.push_str(&format!(
        "**`asa run` against {}**: {} wins, {} ties, {} losses (win rate {}); Top-1 {}, Top-3 {} \
         among the static experts plus the agent; agent / static oracle {}. Phased scenarios \
         where the agent beat the static oracle: {}.\n\n(The paper: 86.4% wins, 45.4% Top-1, \
         78.9% Top-3.)\n\n{}{}",
        summary.baseline,
        wl.wins,
        wl.ties,
        wl.losses,
        pct(wl.rate()),
        pct(summary.top1),
        pct(summary.top3),
        summary
            .oracle_ratio
            .map(|r| format!("{r:.3}"))
            .unwrap_or("n/a".into()),
        if summary.phased_wins.is_empty() {
            "none".to_string()
        } else {
            summary.phased_wins.join(", ")
        },
        held_out_paragraph(summary.held_out.as_ref()),
        win_ceiling_paragraph(summary.win_ceiling.as_ref(), &summary.baseline),
    ));
    if let Some(noise) = &summary.noise {
        let n = summary.agent_beyond_noise;
        out.push_str(&format!(
            "**Beyond the noise** (floor {:.3}: {}; a difference counts when larger than max(floor, \
             2 standard errors)): `asa run` against {} {} wins, {} ties, {} losses per scenario \
             (win rate {}); mean gain {}; phased scenarios above the static oracle: {}.{}\n\n",
            noise.floor,
            noise.source,
            summary.baseline,
            n.wins,
            n.ties,
            n.losses,
            pct(n.win_rate()),
            summary
                .mean_gain_vs_baseline
                .map(|g| format!("{:+.1}%", g * 100.0))
                .unwrap_or("n/a".into()),
            if summary.phased_wins_beyond_noise.is_empty() {
                "none".to_string()
            } else {
                summary.phased_wins_beyond_noise.join(", ")
            },
            summary
                .dry_run_beyond_noise
                .map(|d| format!(
                    " The dry run against {}: {} wins, {} ties, {} losses.",
                    summary.baseline, d.wins, d.ties, d.losses
                ))
                .unwrap_or_default(),
        ));
    }
    if let (Some(d), Some(a)) = (summary.dry_run_vs_baseline, summary.agent_vs_dry_run) {
        out.push_str(&format!(
            "**The agent's own cost** (`asa run --dry-run`: it perceives and decides, the machine \
             stays on EEVDF) against {}: {} wins, {} ties, {} losses, mean score difference {}. \
             **What switching is worth**: `asa run` against the dry run: {} wins, {} ties, {} \
             losses.\n\n",
            summary.baseline,
            d.wins,
            d.ties,
            d.losses,
            summary
                .dry_run_mean_gain
                .map(|g| format!("{g:+.3}"))
                .unwrap_or("n/a".into()),
            a.wins,
            a.ties,
            a.losses
        ));
    }
    let dry = summary
        .scenarios
        .iter()
        .any(|s| s.means.contains_key(AGENT_DRY_RUN));
    out.push_str("| scenario |");
    for e in &summary.experts {
        out.push_str(&format!(" {e} |"));
    }
    if dry {
        out.push_str(" asa dry run |");
    }
    out.push_str(
        " static oracle | held-out oracle | asa run | asa / oracle | rank | agent switched to |\n|---|",
    );
    for _ in &summary.experts {
        out.push_str("---:|");
    }
    if dry {
        out.push_str("---:|");
    }
    out.push_str("---|---:|---:|---:|---:|---|\n");
    for s in &summary.scenarios {
        out.push_str(&format!(
            "| {}{} |",
            s.scenario,
            if s.phased { " (phased)" } else { "" }
        ));
        for e in &summary.experts {
            out.push_str(&format!(" {} |", cell_text(s, e)));
        }
        if dry {
            out.push_str(&format!(
                " {}{} |",
                cell_text(s, AGENT_DRY_RUN),
                verdict_mark(s.dry_run_vs_baseline)
            ));
        }
        let switched: Vec<String> = s
            .traces
            .iter()
            .map(|t| {
                if t.switches.is_empty() {
                    "(stayed)".to_string()
                } else {
                    t.switches.join(" → ")
                }
            })
            .collect();
        out.push_str(&format!(
            " {} | {} | {}{} | {} | {} | {} |\n",
            s.oracle
                .as_ref()
                .map(|(e, m)| format!("{e} {m:.3}"))
                .unwrap_or("–".into()),
            held_out_cell(s.held_out_oracle.as_ref()),
            cell_text(s, AGENT),
            verdict_mark(s.agent_vs_baseline),
            match (s.agent, &s.oracle) {
                (Some(a), Some((_, o))) if *o > 0.0 => format!("{:.3}", a / o),
                _ => "–".into(),
            },
            s.agent_rank
                .map(|r| (r + 1).to_string())
                .unwrap_or("–".into()),
            switched.join("; ")
        ));
    }
    if summary.noise.is_some() {
        out.push_str(&format!(
            "\nCells: mean ± spread over the repetitions. Against {}: ▲ better beyond the noise, \
             ▼ worse beyond it, = within it. Held-out oracle: mean over the repetitions of the \
             score of the expert chosen on the other repetitions (the choices in repetition \
             order).\n",
            summary.baseline
        ));
    }
    out.push_str(&phase_section(summary));
    out
}

/// The agent's runs of phased scenarios, phase by phase: what it voted while each load ran and
/// when it switched (empty when no run has phase times).
fn phase_section(summary: &LiveSummary) -> String {
    let mut lines = Vec::new();
    for s in &summary.scenarios {
        for (i, t) in s.traces.iter().enumerate() {
            if t.phases.is_empty() {
                continue;
            }
            let phases: Vec<String> = t.phases.iter().map(PhaseTrace::summary).collect();
            lines.push(format!(
                "- {} run {}: {}\n",
                s.scenario,
                i + 1,
                phases.join("; ")
            ));
        }
    }
    if lines.is_empty() {
        return String::new();
    }
    let (mapped, never) = summary.phases_mapped;
    let reach = match summary.phase_reach_median_s {
        Some(m) if mapped > 0 => format!(
            " Time from a phase's start to its mapped expert running: median {m:.1} s over {} \
             phase(s); {never} of {mapped} never ran it.",
            mapped - never
        ),
        _ if mapped > 0 => format!(" The mapped expert never ran in any of {mapped} phase(s)."),
        _ => String::new(),
    };
    format!(
        "\n**The agent phase by phase** (ticks voted while each phase's load ran, the first \
         tick of a phase left out; switches timed from the phase's start).{reach}\n\n{}",
        lines.concat()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::OneExpertHeldOut;

    #[test]
    fn the_win_ceiling_paragraph_gives_each_count_with_its_share() {
        let c = WinCeiling {
            runs: 14,
            per_run: 10,
            hindsight: 9,
            held_out: 8,
        };
        let text = win_ceiling_paragraph(Some(&c), "eevdf");
        assert!(
            text.starts_with("**Runs won over eevdf, at best**"),
            "{text}"
        );
        assert!(text.contains("after the fact, 10/14 (71.4%)"), "{text}");
        assert!(text.contains("static oracle 9/14 (64.3%)"), "{text}");
        assert!(text.contains("held-out oracle 8/14 (57.1%)"), "{text}");
        assert_eq!(win_ceiling_paragraph(None, "eevdf"), "");
    }

    #[test]
    fn without_repetitions_the_report_says_the_held_out_oracle_is_not_defined() {
        let text = held_out_paragraph(None);
        assert!(text.contains("**Held-out oracle**: not defined"), "{text}");
        assert!(
            !text.chars().any(|c| c.is_ascii_digit() && c != '2'),
            "{text}"
        );
        assert_eq!(held_out_cell(None), "–");
    }

    #[test]
    fn the_report_states_the_agent_against_both_oracles_and_one_expert_for_all() {
        let h = HeldOutSummary {
            scenarios: 5,
            reps: 2,
            hindsight: 0.490,
            held_out: 0.455,
            held_out_over_hindsight: Some(0.455 / 0.490),
            agent_over_hindsight: Some(0.807),
            agent_over_held_out: Some(0.870),
            one_expert: Some(OneExpertHeldOut {
                score: 0.452,
                picks: vec!["cosmos".into(), "cosmos".into()],
            }),
        };
        let text = held_out_paragraph(Some(&h));
        for part in [
            "over 5 scenario(s), 2 repetitions",
            "agent / held-out oracle 0.870 (agent / static oracle 0.807)",
            "held-out / static oracle 0.929 (0.455 / 0.490)",
            "One expert for all, chosen the same way over every scenario: cosmos, 0.452 (0.922 \
             of the static oracle)",
        ] {
            assert!(text.contains(part), "{part:?} in {text}");
        }
        let o = HeldOutOracle {
            reps: 2,
            hindsight: 0.58,
            score: 0.5425,
            picks: vec!["flash".into(), "cosmos".into()],
        };
        assert_eq!(held_out_cell(Some(&o)), "0.542 (flash, cosmos)");
    }
}
