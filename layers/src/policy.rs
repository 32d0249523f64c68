//! A layer policy: how scx_layered schedules the applications of one class.
//!
//! The knobs are the subset of scx_layered's layer spec (`LayerKind` and `LayerCommon` in
//! scx_layered 1.1.4's `src/config.rs`) by which one class of application should be treated
//! differently from another: the layer's kind (open to every CPU, or grouped on a share of the
//! CPUs it grows and shrinks with its utilisation), its time slice, whether it preempts tasks of
//! non-preempting layers (and whether a waking task tries its previous CPU's preemption before
//! an idle CPU), and its weight under contention. Everything else stays at
//! scx_layered's defaults. [`LayerPolicy::check`] refuses what scx_layered would refuse.

use serde::{Deserialize, Serialize};

/// scx_layered's weight bounds (`MIN_LAYER_WEIGHT`, `MAX_LAYER_WEIGHT`); 0 means its default.
pub const WEIGHT_RANGE: (u32, u32) = (1, 10_000);

/// The shortest time slice a policy may ask for, µs (scx_layered takes any; below this the
/// scheduling overhead dominates on every machine).
pub const MIN_SLICE_US: u64 = 100;

/// How the layer's CPUs are allotted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LayerKind {
    /// Any CPU, no allotment (scx_layered `Open`).
    Open,
    /// A share of the CPUs that grows while the layer's utilisation per owned CPU is above
    /// `util_range.1` and shrinks below `util_range.0`, between `cpus_frac.0` and `cpus_frac.1`
    /// of the machine's CPUs; its tasks may also run on CPUs no layer owns (scx_layered
    /// `Grouped`).
    Grouped,
}

/// How scx_layered schedules one class of application.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayerPolicy {
    /// How the layer's CPUs are allotted.
    pub kind: LayerKind,
    /// Time slice, µs.
    pub slice_us: u64,
    /// Whether the layer's tasks preempt tasks of non-preempting layers when no CPU is idle.
    #[serde(default)]
    pub preempt: bool,
    /// A preempting layer only: a waking task preempts its previous CPU before it looks for an
    /// idle one (scx_layered `preempt_first`; it keeps the task's cache warm and skips the idle
    /// search, at the cost of the task running there now).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub preempt_first: bool,
    /// Weight under contention (1–10 000; scx_layered's default is 100).
    pub weight: u32,
    /// `grouped` only: utilisation per owned CPU below which the layer shrinks and above which
    /// it grows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub util_range: Option<(f64, f64)>,
    /// `grouped` only: the least and the most of the machine's CPUs the layer owns, as
    /// fractions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus_frac: Option<(f64, f64)>,
}

impl LayerPolicy {
    /// ` on 50 % of the CPUs` (or ` on 25–50 % …`) for a grouped layer, empty for an open one.
    pub fn cpu_share_words(&self) -> String {
        match self.cpus_frac {
            Some((lo, hi)) if lo == hi => format!(" on {:.0} % of the CPUs", lo * 100.0),
            Some((lo, hi)) => format!(" on {:.0}–{:.0} % of the CPUs", lo * 100.0, hi * 100.0),
            None => String::new(),
        }
    }

    /// Checks the policy against scx_layered's rules; the error says which value is wrong.
    pub fn check(&self) -> Result<(), String> {
        if self.slice_us < MIN_SLICE_US {
            return Err(format!(
                "slice_us = {} is below {MIN_SLICE_US} µs",
                self.slice_us
            ));
        }
        if self.preempt_first && !self.preempt {
            return Err("preempt_first = true needs preempt = true".into());
        }
        if self.weight < WEIGHT_RANGE.0 || self.weight > WEIGHT_RANGE.1 {
            return Err(format!(
                "weight = {} is outside {}–{}",
                self.weight, WEIGHT_RANGE.0, WEIGHT_RANGE.1
            ));
        }
        let (util_range, cpus_frac) = match (self.kind, self.util_range, self.cpus_frac) {
            (LayerKind::Open, None, None) => return Ok(()),
            (LayerKind::Open, _, _) => {
                return Err("util_range and cpus_frac belong to kind = \"grouped\" only".into())
            }
            (LayerKind::Grouped, Some(util), Some(cpus)) => (util, cpus),
            (LayerKind::Grouped, _, _) => {
                return Err("kind = \"grouped\" needs util_range and cpus_frac".into())
            }
        };
        {
            let in_unit = |x: f64| (0.0..=1.0).contains(&x);
            if !(in_unit(util_range.0) && in_unit(util_range.1) && util_range.0 < util_range.1) {
                return Err(format!(
                    "util_range = [{}, {}] must be two fractions, the first below the second",
                    util_range.0, util_range.1
                ));
            }
            if !(in_unit(cpus_frac.0) && in_unit(cpus_frac.1) && cpus_frac.0 <= cpus_frac.1) {
                return Err(format!(
                    "cpus_frac = [{}, {}] must be two fractions, the first not above the second",
                    cpus_frac.0, cpus_frac.1
                ));
            }
        }
        Ok(())
    }

    /// The layer's `kind` object in scx_layered's JSON layer spec.
    pub fn to_scx_layered_kind(&self) -> serde_json::Value {
        let mut common = serde_json::json!({
            "slice_us": self.slice_us,
            "preempt": self.preempt,
            "weight": self.weight,
        });
        if self.preempt_first {
            common["preempt_first"] = serde_json::json!(true);
        }
        match self.kind {
            LayerKind::Open => serde_json::json!({ "Open": common }),
            LayerKind::Grouped => {
                let fields = common.as_object_mut().expect("a JSON object");
                fields.insert("util_range".into(), serde_json::json!(self.util_range));
                fields.insert("cpus_range_frac".into(), serde_json::json!(self.cpus_frac));
                serde_json::json!({ "Grouped": common })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(slice_us: u64, weight: u32) -> LayerPolicy {
        LayerPolicy {
            kind: LayerKind::Open,
            slice_us,
            preempt: true,
            preempt_first: false,
            weight,
            util_range: None,
            cpus_frac: None,
        }
    }

    #[test]
    fn an_open_policy_becomes_an_open_layer_with_its_three_knobs() {
        let kind = open(3000, 400).to_scx_layered_kind();
        assert_eq!(
            kind,
            serde_json::json!({"Open": {"slice_us": 3000, "preempt": true, "weight": 400}})
        );
    }

    #[test]
    fn preempt_first_is_written_only_when_asked_for_and_needs_preemption() {
        let first = LayerPolicy {
            preempt_first: true,
            ..open(3000, 400)
        };
        assert_eq!(first.check(), Ok(()));
        assert_eq!(
            first.to_scx_layered_kind(),
            serde_json::json!({"Open": {"slice_us": 3000, "preempt": true,
                "preempt_first": true, "weight": 400}})
        );
        let text = toml::to_string(&open(3000, 400)).unwrap();
        assert!(!text.contains("preempt_first"), "{text}");
        let back: LayerPolicy = toml::from_str(&toml::to_string(&first).unwrap()).unwrap();
        assert_eq!(back, first);
        let without_preempt = LayerPolicy {
            preempt: false,
            ..first
        };
        assert!(without_preempt
            .check()
            .unwrap_err()
            .contains("preempt_first = true needs preempt = true"));
    }

    #[test]
    fn a_grouped_policy_carries_its_utilisation_and_cpu_share() {
        let policy = LayerPolicy {
            kind: LayerKind::Grouped,
            slice_us: 20_000,
            preempt: false,
            preempt_first: false,
            weight: 50,
            util_range: Some((0.5, 0.8)),
            cpus_frac: Some((0.25, 0.75)),
        };
        assert_eq!(policy.check(), Ok(()));
        let kind = policy.to_scx_layered_kind();
        assert_eq!(kind["Grouped"]["util_range"], serde_json::json!([0.5, 0.8]));
        assert_eq!(
            kind["Grouped"]["cpus_range_frac"],
            serde_json::json!([0.25, 0.75])
        );
        assert_eq!(kind["Grouped"]["slice_us"], 20_000);
        assert_eq!(policy.cpu_share_words(), " on 25–75 % of the CPUs");
        let half = LayerPolicy {
            cpus_frac: Some((0.5, 0.5)),
            ..policy
        };
        assert_eq!(half.cpu_share_words(), " on 50 % of the CPUs");
        assert_eq!(open(3000, 400).cpu_share_words(), "");
    }

    #[test]
    fn values_scx_layered_refuses_are_refused_with_the_value() {
        assert!(open(50, 100).check().unwrap_err().contains("slice_us = 50"));
        assert!(open(1000, 0).check().unwrap_err().contains("weight = 0"));
        assert!(open(1000, 20_000)
            .check()
            .unwrap_err()
            .contains("weight = 20000"));
        let mut grouped = open(1000, 100);
        grouped.kind = LayerKind::Grouped;
        assert!(grouped.check().unwrap_err().contains("needs util_range"));
        grouped.util_range = Some((0.9, 0.5));
        grouped.cpus_frac = Some((0.0, 1.0));
        assert!(grouped
            .check()
            .unwrap_err()
            .contains("util_range = [0.9, 0.5]"));
        grouped.util_range = Some((0.5, 0.9));
        grouped.cpus_frac = Some((0.8, 0.2));
        assert!(grouped.check().unwrap_err().contains("cpus_frac"));
        let mut open_with_share = open(1000, 100);
        open_with_share.cpus_frac = Some((0.1, 0.2));
        assert!(open_with_share
            .check()
            .unwrap_err()
            .contains("belong to kind = \"grouped\" only"));
    }

    #[test]
    fn a_policy_reads_from_toml_with_its_kind_inline() {
        let policy: LayerPolicy = toml::from_str(
            "kind = \"grouped\"\nutil_range = [0.5, 0.8]\ncpus_frac = [0.1, 0.5]\nslice_us = 20000\nweight = 50\n",
        )
        .unwrap();
        assert!(!policy.preempt);
        assert_eq!(policy.kind, LayerKind::Grouped);
        assert_eq!(policy.util_range, Some((0.5, 0.8)));
        assert_eq!(policy.check(), Ok(()));
        let unknown = toml::from_str::<LayerPolicy>(
            "kind = \"open\"\nslice_us = 1000\nweight = 1\nslcie = 3\n",
        );
        assert!(unknown.is_err());
    }
}
