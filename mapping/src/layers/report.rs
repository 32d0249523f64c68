//! The layer rows' report: the section of `DIR/calibration.md` that says, per row, which arms
//! were compared on which scenarios, their scores, the threshold and the choice.
//!
//! Invariant: it reports the [`LayerCalibration`] it is given, nothing recomputed.

use super::{LayerCalibration, LAYERED};
use asa_layers::{LayerPolicy, OTHER_LAYER};

/// A policy in a few words: `open, 5000 µs slice, preempt, weight 100`.
pub fn describe_policy(p: &LayerPolicy) -> String {
    format!(
        "{}, {} µs slice{}, weight {}",
        format!("{:?}", p.kind).to_lowercase(),
        p.slice_us,
        if p.preempt { ", preempt" } else { "" },
        p.weight
    )
}

/// The layer rows' section of `DIR/calibration.md`: the rule, then per row its scenarios,
/// arms (policy, score ± spread, runs), threshold and choice.
pub fn markdown(cal: &LayerCalibration) -> String {
    let mut out = String::from("# Mapping calibration, layers\n\n");
    out.push_str(&format!(
        "Noise floor: {:.3} ({}). A layer keeps the default plan's policy ({LAYERED}) unless a \
         candidate's mean score over the scenarios with an application of the class (every \
         scenario for `{OTHER_LAYER}`), centred by scenario, beats {LAYERED}'s by more than \
         max(noise floor, 2 standard errors of the difference). Margin: the chosen arm's mean \
         minus the best other mean.\n",
        cal.noise.floor, cal.noise.source
    ));
    for (e, row) in cal.evidence.iter().zip(&cal.rows) {
        out.push_str(&format!(
            "\n## Layer {}\n\nScenarios: {}.\n\n| arm | policy | score | spread | runs |\n|---|---|---:|---:|---:|\n",
            e.class,
            e.scenarios.join(", ")
        ));
        for arm in &e.arms {
            let cell = e.cells.iter().find(|c| c.expert == arm.expert);
            let (score, spread, runs) = match cell {
                Some(c) => (
                    format!("{:.3}", c.mean),
                    format!("{:.3}", c.spread),
                    c.runs.to_string(),
                ),
                None => ("n/a".into(), "n/a".into(), "0".into()),
            };
            out.push_str(&format!(
                "| {}{} | {} | {score} | {spread} | {runs} |\n",
                arm.expert,
                if arm.expert == LAYERED {
                    " (default)"
                } else {
                    ""
                },
                describe_policy(&arm.policy)
            ));
        }
        let best = &e.cells[0].expert;
        let why = if e.chosen == LAYERED && best == LAYERED {
            "the best score".to_string()
        } else if e.kept_default {
            format!(
                "{best} leads it by {:+.3}, within the threshold {:.3}",
                e.gain, e.threshold
            )
        } else {
            format!(
                "{:+.3} over {LAYERED}, beyond the threshold {:.3}",
                e.gain, e.threshold
            )
        };
        out.push_str(&format!(
            "\nChoice: **{}** ({}): {why}; margin {}.\n",
            e.chosen,
            describe_policy(&row.policy),
            row.margin
                .map(|m| format!("{m:+.3}"))
                .unwrap_or("n/a (one arm)".into())
        ));
    }
    out
}
