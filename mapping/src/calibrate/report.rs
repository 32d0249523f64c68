//! The prototype's markdown report: each class's table rows and why.

use std::collections::BTreeMap;

use asa_scenarios::runner::ResultSet;

use super::Prototype;

/// A markdown report of a prototype: the table's reasons, class by class.
pub fn markdown(proto: &Prototype, sets: &[ResultSet]) -> String {
    let mut out = String::from("# Mapping calibration, stage 1 (prototype)\n\n");
    if let Some(m) = &proto.table.machine {
        out.push_str(&format!(
            "Machine: {} · {} CPUs{} · {} MiB · kernel {} · experts {}\n\n",
            m.cpu_model,
            m.cores,
            if m.smt { " (SMT)" } else { "" },
            m.memory_mib,
            m.kernel_release,
            m.expert_versions
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    for (i, set) in sets.iter().enumerate() {
        let o = &set.options;
        // One line per results file: several files (boots, sessions) may share settings, so
        // each says which file it is.
        let which = if sets.len() > 1 {
            format!(" (results file {} of {})", i + 1, sets.len())
        } else {
            String::new()
        };
        out.push_str(&format!(
            "Runs{which}: {} scenario(s), experts {}, {} rep(s), {:.0} s probe, {:.0} s settle, {:.0} s hold (measured on {}, {} CPUs, kernel {}).\n",
            set.scenarios.len(),
            o.experts.join(", "),
            o.reps,
            o.duration.as_secs_f64(),
            o.settle.as_secs_f64(),
            o.hold.as_secs_f64(),
            set.machine.cpu_model,
            set.machine.cpus,
            set.machine.kernel
        ));
    }
    out.push_str(&format!(
        "\nNoise floor: {:.3} ({}). A class stays on {} (the stay expert) unless another \
         expert's mean score beats its mean by more than max(noise floor, 2 standard errors of \
         the difference). Margin: the chosen expert's mean minus the best other mean. Settled: \
         every other expert is below the best beyond the noise or cannot gain {:.0} % over it \
         (runs paired by scenario and repetition, the threshold widened for repeated looks; \
         mapping/src/budget/mod.rs).\n\n",
        proto.noise.floor,
        proto.noise.source,
        proto.stay,
        proto.min_gain * 100.0
    ));
    out.push_str(&format!("| class | scenarios | chosen | gain over {} | threshold | margin | settled | scores (mean ± spread, runs) |\n|---|---|---|---:|---:|---:|---|---|\n", proto.stay));
    for e in &proto.evidence {
        out.push_str(&format!(
            "| {} | {} | {}{} | {} | {:.3} | {} | {} | {} |\n",
            e.class,
            e.scenarios.join(", "),
            e.chosen,
            if e.kept_stay {
                " (kept: within noise)"
            } else {
                ""
            },
            e.gain_over_stay
                .map(|g| format!("{g:+.3}"))
                .unwrap_or("n/a".into()),
            e.threshold,
            e.margin.map(|m| format!("{m:+.3}")).unwrap_or("n/a".into()),
            if e.settled {
                "yes".to_string()
            } else {
                format!("no ({} undecided)", e.undecided.join(", "))
            },
            e.cells
                .iter()
                .map(|c| format!("{} {:.3}±{:.3} ({})", c.expert, c.mean, c.spread, c.runs))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let boots: Vec<String> = proto
        .evidence
        .iter()
        .filter_map(|e| {
            let pairs = e.boots.as_ref()?;
            let Some(challenger) = e.cells.iter().find(|c| c.expert != proto.stay) else {
                return Some(format!("- {}: one expert, nothing compared", e.class));
            };
            let diffs: Vec<String> = pairs
                .per_boot
                .iter()
                .map(|(boot, d)| format!("boot {} {d:+.3}", boot + 1))
                .collect();
            Some(match pairs.boots() {
                0 => format!(
                    "- {}: {} and {} never ran in the same boot and scenario: {} stays",
                    e.class, challenger.expert, proto.stay, proto.stay
                ),
                1 => format!(
                    "- {}: rests on one boot ({} − {}: {}): no verdict across boots",
                    e.class,
                    challenger.expert,
                    proto.stay,
                    diffs.join(", ")
                ),
                n => format!(
                    "- {}: {n} boots, {} − {} per boot: {}; 2 standard errors {:.3}",
                    e.class,
                    challenger.expert,
                    proto.stay,
                    diffs.join(", "),
                    pairs.two_standard_errors().unwrap_or(0.0)
                ),
            })
        })
        .collect();
    if !boots.is_empty() {
        out.push_str(&format!(
            "\nAcross boots (a run's boot is the boot id recorded with it, else its results \
             file; {}. With 2 boots or more the best expert must also beat the stay expert by \
             more than 2 standard errors of their differences paired within each boot, and the \
             threshold above includes them):\n\n",
            proto.boots.legend()
        ));
        out.push_str(&boots.join("\n"));
        out.push('\n');
    }
    let mut chosen: BTreeMap<&str, usize> = BTreeMap::new();
    for e in &proto.evidence {
        *chosen.entry(e.chosen.as_str()).or_default() += 1;
    }
    out.push_str(&format!(
        "\nChosen per class: {}.\n",
        chosen
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    if !proto.left_out.is_empty() {
        out.push_str("\nLeft out:\n\n");
        for (s, why) in &proto.left_out {
            out.push_str(&format!("- {s}: {why}\n"));
        }
    }
    out
}
