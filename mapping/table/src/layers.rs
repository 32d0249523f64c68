//! The table's layer rows: per-application mode's half of the per-machine memory.
//!
//! Where a class row ([`crate::ClassMapping`]) says which expert serves a workload best, a layer
//! row says how scx_layered should schedule one *application class* on this machine: the
//! policy of that class's layer (`[[layer]]` in the table), chosen by `asa calibrate --stage
//! layers` among candidate policies run with every application in its labelled class, with
//! the score, spread and runs of each candidate and the margin of the choice. The agent lays
//! the rows over ASA's default layer plan ([`MappingTable::layer_plan`]): a class the table has
//! no row for keeps the default plan's policy.
//!
//! Invariant: a table whose layer rows pass [`check_layer_rows`] gives a plan scx_layered
//! accepts for every class the rows name ([`asa_layers::LayerPolicy::check`]), and the policy
//! applied is the one the first-ranked candidate was measured with.

use std::collections::{BTreeMap, BTreeSet};

use asa_layers::{LayerPlan, LayerPolicy};
use serde::{Deserialize, Serialize};

use crate::{MappingError, MappingTable, RankedExpert};

/// One application class's layer policy on this machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayerRow {
    /// Application class of the layer plan (`layers/default.toml`), or `other`
    /// ([`asa_layers::OTHER_LAYER`]: every task no application class claims).
    pub class: String,
    /// The policy the agent gives the class's layer: the first-ranked candidate's.
    pub policy: LayerPolicy,
    /// The candidates measured (calibration's layer-plan experts), best first; each `score`
    /// is the mean UX score of the scenarios with an application of this class.
    pub ranked: Vec<RankedExpert>,
    /// Score differences up to this were judged noise: the default plan's candidate is kept
    /// unless another beats it by more.
    #[serde(default)]
    pub noise: f64,
    /// The first candidate's score minus the best of the others (absent with one candidate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub margin: Option<f64>,
    /// The boots (VM runs or machine boots: the runs' recorded boot ids, else one per results
    /// file) the comparison rests on: with 2 or more, `noise` includes the spread between
    /// boots and the first candidate is a verdict; with 1, the row rests on one boot's runs,
    /// whose spread misses what moves between boots. 0: not recorded (a table written before
    /// boots were counted).
    #[serde(default)]
    pub boots: u32,
}

/// Checks the layer rows' format: one row per class, at least one candidate each, finite
/// scores ranked best first within the noise, and a policy scx_layered accepts.
pub(crate) fn check_layer_rows(rows: &[LayerRow]) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    for row in rows {
        let class = &row.class;
        if !seen.insert(class.as_str()) {
            return Err(format!("layer {class:?} appears twice"));
        }
        if row.ranked.is_empty() {
            return Err(format!("layer {class:?} ranks no candidate"));
        }
        if !row.noise.is_finite() || row.noise < 0.0 {
            return Err(format!(
                "layer {class:?}: noise must be finite and >= 0 (noise {})",
                row.noise
            ));
        }
        if row.margin.is_some_and(|m| !m.is_finite()) {
            return Err(format!("layer {class:?}: margin must be finite"));
        }
        row.policy
            .check()
            .map_err(|why| format!("layer {class:?}: policy: {why}"))?;
        let mut previous = f64::INFINITY;
        let mut names = BTreeSet::new();
        for r in &row.ranked {
            if !names.insert(r.expert.as_str()) {
                return Err(format!("layer {class:?} ranks {:?} twice", r.expert));
            }
            if !r.score.is_finite() || !r.spread.is_finite() || r.spread < 0.0 {
                return Err(format!(
                    "layer {class:?}, candidate {:?}: score must be finite and spread finite and >= 0",
                    r.expert
                ));
            }
            if r.score > previous + row.noise {
                return Err(format!(
                    "layer {class:?}: candidates must be ranked best first, but {:?} scores {} after {} (noise {})",
                    r.expert, r.score, previous, row.noise
                ));
            }
            previous = r.score;
        }
    }
    Ok(())
}

impl MappingTable {
    /// The layer rows' policies, class → policy.
    pub fn layer_policies(&self) -> BTreeMap<String, LayerPolicy> {
        self.layers
            .iter()
            .map(|row| (row.class.clone(), row.policy))
            .collect()
    }

    /// `base` (ASA's default plan) with this table's layer rows laid over it. A row whose
    /// class the plan lacks is an error naming it and the plan's classes.
    pub fn layer_plan(&self, base: &LayerPlan, origin: &str) -> Result<LayerPlan, MappingError> {
        base.with_policies(&self.layer_policies())
            .map_err(|message| MappingError::Invalid {
                origin: origin.to_string(),
                message: format!("[[layer]] rows: {message}"),
            })
    }

    /// The layer row of one class.
    pub fn layer(&self, class: &str) -> Option<&LayerRow> {
        self.layers.iter().find(|row| row.class == class)
    }

    /// The layer rows as aligned text (part of [`MappingTable::render`]); empty without rows.
    pub fn render_layers(&self) -> String {
        if self.layers.is_empty() {
            return String::new();
        }
        let width = self
            .layers
            .iter()
            .map(|r| r.class.len())
            .max()
            .unwrap_or(5)
            .max(5);
        let mut out = format!(
            "{:width$}  layer policy; candidates (score ± spread, runs)\n",
            "layer"
        );
        for row in &self.layers {
            let p = &row.policy;
            let policy = format!(
                "{:?}{} slice {} µs{} weight {}",
                p.kind,
                p.cpu_share_words(),
                p.slice_us,
                match (p.preempt, p.preempt_first) {
                    (true, true) => " preempt first",
                    (true, false) => " preempt",
                    _ => "",
                },
                p.weight
            )
            .to_lowercase();
            let ranked: Vec<String> = row
                .ranked
                .iter()
                .map(|r| format!("{} {:.3}±{:.3} ({})", r.expert, r.score, r.spread, r.runs))
                .collect();
            let mut notes = Vec::new();
            if row.noise > 0.0 {
                notes.push(format!("noise {:.3}", row.noise));
            }
            if let Some(m) = row.margin {
                notes.push(format!("margin {m:+.3}"));
            }
            match row.boots {
                0 => {}
                1 => notes.push("one boot".to_string()),
                n => notes.push(format!("{n} boots")),
            }
            let notes = if notes.is_empty() {
                String::new()
            } else {
                format!("  ({})", notes.join(", "))
            };
            out.push_str(&format!(
                "{:width$}  {policy}; {}{notes}\n",
                row.class,
                ranked.join(" > ")
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(layers: &str) -> Result<MappingTable, MappingError> {
        MappingTable::parse(
            &format!(
                r#"schema = "asa.mapping"
version = 1
source = "hand-written"
created = "2026-11-29"

[[class]]
name = "kernel_build"
ranked = [{{ expert = "layered", score = 1.0, spread = 0.0, runs = 0 }}]
{layers}"#
            ),
            "t.toml",
        )
    }

    const CPU_BATCH_5MS: &str = r#"
[[layer]]
class = "cpu_batch"
policy = { kind = "open", slice_us = 5000, weight = 100 }
ranked = [
  { expert = "layered-cpu_batch-5ms", score = 0.62, spread = 0.02, runs = 6 },
  { expert = "layered", score = 0.55, spread = 0.03, runs = 6 },
]
noise = 0.03
margin = 0.07
boots = 2
"#;

    #[test]
    fn a_layer_row_changes_its_class_and_leaves_the_others_at_the_default_plan() {
        let t = table(CPU_BATCH_5MS).unwrap();
        let base = asa_layers::default_plan();
        let plan = t.layer_plan(&base, "t.toml").unwrap();
        for (mine, theirs) in plan.classes.iter().zip(&base.classes) {
            if mine.class == "cpu_batch" {
                assert_eq!(mine.policy.slice_us, 5000);
            } else {
                assert_eq!(mine.policy, theirs.policy, "{}", mine.class);
            }
        }
        assert_eq!(plan.other, base.other);
        assert_eq!(t.layer("cpu_batch").unwrap().margin, Some(0.07));
    }

    #[test]
    fn a_table_without_layer_rows_gives_the_default_plan_and_writes_none() {
        let t = table("").unwrap();
        let base = asa_layers::default_plan();
        assert_eq!(t.layer_plan(&base, "t").unwrap(), base);
        assert!(!t.to_toml().unwrap().contains("[[layer]]"));
        assert_eq!(t.render_layers(), "");
    }

    #[test]
    fn layer_rows_survive_writing_and_reading() {
        let t = table(CPU_BATCH_5MS).unwrap();
        let again = MappingTable::parse(&t.to_toml().unwrap(), "again").unwrap();
        assert_eq!(again.layers, t.layers);
        assert!(t.render().contains("layered-cpu_batch-5ms 0.620±0.020 (6)"));
        assert!(
            t.render().contains("margin +0.070, 2 boots"),
            "{}",
            t.render()
        );
    }

    /// Tables written before boots were counted parse, with 0 (not recorded), and say nothing
    /// about boots; a row of one boot says so.
    #[test]
    fn a_row_without_a_boot_count_parses_as_not_recorded_and_one_boot_is_labelled() {
        let t = table(&CPU_BATCH_5MS.replace("boots = 2\n", "")).unwrap();
        assert_eq!(t.layers[0].boots, 0);
        assert!(!t.render().contains("boot"), "{}", t.render());
        let t = table(&CPU_BATCH_5MS.replace("boots = 2", "boots = 1")).unwrap();
        assert!(t.render().contains("one boot"), "{}", t.render());
    }

    #[test]
    fn the_other_layer_may_have_a_row() {
        let t = table(&CPU_BATCH_5MS.replace("\"cpu_batch\"", "\"other\"")).unwrap();
        let plan = t.layer_plan(&asa_layers::default_plan(), "t").unwrap();
        assert_eq!(plan.other.slice_us, 5000);
    }

    #[test]
    fn a_class_the_plan_lacks_is_refused_naming_it() {
        let t = table(&CPU_BATCH_5MS.replace("\"cpu_batch\"", "\"gpu\"")).unwrap();
        let e = t
            .layer_plan(&asa_layers::default_plan(), "t.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("gpu") && e.contains("t.toml"), "{e}");
    }

    #[test]
    fn malformed_layer_rows_are_refused_with_the_reason() {
        let cases = [
            (format!("{CPU_BATCH_5MS}{CPU_BATCH_5MS}"), "appears twice"),
            (CPU_BATCH_5MS.replace("slice_us = 5000", "slice_us = 5"), "slice_us"),
            (
                CPU_BATCH_5MS.replace("score = 0.62", "score = 0.42"),
                "best first",
            ),
            (CPU_BATCH_5MS.replace("noise = 0.03", "noise = -1.0"), "noise"),
            (
                CPU_BATCH_5MS.replace("[\n  { expert", "[\n  { expert = \"layered\", score = 0.9, spread = 0.0, runs = 1 },\n  { expert"),
                "twice",
            ),
        ];
        for (body, why) in cases {
            let e = table(&body).unwrap_err().to_string();
            assert!(e.contains(why), "{why}: {e}");
        }
        let none = "\n[[layer]]\nclass = \"cpu_batch\"\npolicy = { kind = \"open\", slice_us = 5000, weight = 100 }\nranked = []\n";
        assert!(table(none)
            .unwrap_err()
            .to_string()
            .contains("no candidate"));
    }
}
