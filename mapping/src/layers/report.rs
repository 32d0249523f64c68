//! The layer rows' report: the section of `DIR/calibration.md` that says, per row, which arms
//! were compared on which scenarios and boots, their scores, the threshold and the choice.
//!
//! Invariant: it reports the [`LayerCalibration`] it is given, nothing recomputed.

use super::{LayerCalibration, LayerEvidence, LAYERED};
use asa_layers::{LayerPolicy, OTHER_LAYER};

/// A policy in a few words: `open, 5000 µs slice, preempt, weight 100`, `grouped on 50 % of
/// the CPUs, …`.
pub fn describe_policy(p: &LayerPolicy) -> String {
    format!(
        "{}{}, {} µs slice{}, weight {}",
        format!("{:?}", p.kind).to_lowercase(),
        p.cpu_share_words(),
        p.slice_us,
        match (p.preempt, p.preempt_first) {
            (true, true) => ", preempt (previous CPU first)",
            (true, false) => ", preempt",
            _ => "",
        },
        p.weight
    )
}

/// What a row's comparison rests on: its boots and, with a challenger, the per-boot
/// differences challenger − `layered`.
pub fn boots_line(e: &LayerEvidence) -> String {
    let Some(challenger) = &e.challenger else {
        return format!("Boots: {} (no candidate ran: nothing compared).", e.boots);
    };
    let diffs: Vec<String> = e
        .pairs
        .per_boot
        .iter()
        .map(|(boot, d)| format!("boot {} {d:+.3}", boot + 1))
        .collect();
    match e.boots {
        0 => format!(
            "Boots: 0 — {challenger} and {LAYERED} never ran in the same boot and scenario: \
             their difference cannot be told from the boots' offsets, so {LAYERED} stays."
        ),
        1 => format!(
            "Boots: 1 — rests on one boot ({challenger} − {LAYERED}: {}): no verdict across \
             boots.",
            diffs.join(", ")
        ),
        n => format!(
            "Boots: {n} — {challenger} − {LAYERED} per boot: {}; spread {:.3}, 2 standard \
             errors {:.3}.",
            diffs.join(", "),
            e.pairs.spread().unwrap_or(0.0),
            e.pairs.two_standard_errors().unwrap_or(0.0)
        ),
    }
}

/// The layer rows' section of `DIR/calibration.md`: the rule, then per row its scenarios,
/// arms (policy, score ± spread, runs), threshold and choice.
pub fn markdown(cal: &LayerCalibration) -> String {
    let mut out = String::from("# Mapping calibration, layers\n\n");
    out.push_str(&format!(
        "Noise floor: {:.3} ({}). A layer keeps {LAYERED}'s policy (the default plan, or the base \
         table's with --layer-base) unless a candidate's mean score over the scenarios with an application of the class (every \
         scenario for `{OTHER_LAYER}`), centred by (boot, scenario), beats {LAYERED}'s by more than \
         max(noise floor, 2 standard errors of the difference) and, with runs of both in 2 \
         boots or more, by more than 2 standard errors of their differences paired within each \
         boot (a run's boot is the boot id recorded with it, else its results file; a boot \
         offset moves every arm alike). Margin: the chosen arm's mean minus the best other \
         mean.\n\nBoots: {}{}.{}\n",
        cal.noise.floor,
        cal.noise.source,
        cal.boots,
        if cal.boots < 2 {
            " — every row rests on one boot's runs, whose spread misses what moves between \
             boots: no row is a verdict across boots; calibrate again after a reboot (into \
             another --dir) and pass both results files (--from-results a.json,b.json)"
        } else {
            ""
        },
        if cal.boot_numbers.keys().is_empty() {
            String::new()
        } else {
            format!(" Which boot is which: {}.", cal.boot_numbers.legend())
        }
    ));
    for (e, row) in cal.evidence.iter().zip(&cal.rows) {
        out.push_str(&format!(
            "\n## Layer {}\n\nScenarios: {}.\n\n{}\n\n| arm | policy | score | spread | runs |\n|---|---|---:|---:|---:|\n",
            e.class,
            e.scenarios.join(", "),
            boots_line(e)
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
                "{:+.3} over {LAYERED}, beyond the threshold {:.3}{}",
                e.gain,
                e.threshold,
                if e.boots < 2 {
                    " of one boot (no verdict across boots)"
                } else {
                    ""
                }
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
