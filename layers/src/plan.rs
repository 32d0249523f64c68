//! The layer plan: one scx_layered layer per application class, each matched by its class's
//! task hint, and a last layer for every task no class claims.
//!
//! The agent tells scx_layered an application's class by writing the class's hint (0–1024)
//! into scx_layered's task-hint map for each of the application's threads; a layer whose only
//! match is `HintEquals(hint)` takes them, and scx_layered's BPF side re-checks a task's layer
//! whenever its hint changes (`maybe_refresh_task_layer_from_hint`), so a class change takes
//! effect at the task's next scheduling event without restarting the scheduler. Hints are fixed
//! per class in the plan, not by position, because they outlive both processes: the hint map is
//! pinned in bpffs, and a restarted agent or scheduler must read the same hint as the same class.
//!
//! [`LayerPlan::check`] refuses what scx_layered's `verify_layer_specs` would refuse (at most
//! 16 layers, hints within 0–1024 and one layer per hint, a terminal layer matching every task),
//! so a bad plan is an error of the agent's, at load, not a scheduler that fails to start.

use serde::{Deserialize, Serialize};

use crate::policy::LayerPolicy;

/// scx_layered's `MAX_LAYERS`: the plan's classes plus the last layer.
pub const MAX_LAYERS: usize = 16;

/// The largest hint scx_layered accepts.
pub const MAX_HINT: u32 = 1024;

/// The name of the last layer, which takes every task no class's hint claims.
pub const OTHER_LAYER: &str = "other";

/// One application class's layer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassLayer {
    /// The application class (a class of the per-application classifier).
    pub class: String,
    /// The task hint that puts a thread into this layer (1–1024; unique in the plan).
    pub hint: u32,
    /// How the layer schedules.
    pub policy: LayerPolicy,
}

/// Every class's layer and the policy of the last layer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayerPlan {
    /// One layer per application class, in the order scx_layered gets them.
    #[serde(rename = "class")]
    pub classes: Vec<ClassLayer>,
    /// The last layer's policy: unclassified applications and every other task.
    pub other: LayerPolicy,
}

impl LayerPlan {
    /// Checks the plan against scx_layered's rules; the error names the class and the value.
    pub fn check(&self) -> Result<(), String> {
        if self.classes.len() + 1 > MAX_LAYERS {
            return Err(format!(
                "{} classes and the last layer make {} layers; scx_layered takes at most {MAX_LAYERS}",
                self.classes.len(),
                self.classes.len() + 1
            ));
        }
        for (i, layer) in self.classes.iter().enumerate() {
            if layer.class.is_empty() || layer.class == OTHER_LAYER {
                return Err(format!(
                    "class {:?}: a class needs a name other than {OTHER_LAYER:?}",
                    layer.class
                ));
            }
            if layer.hint == 0 || layer.hint > MAX_HINT {
                return Err(format!(
                    "class {:?}: hint = {} is outside 1–{MAX_HINT}",
                    layer.class, layer.hint
                ));
            }
            if let Some(earlier) = self.classes[..i]
                .iter()
                .find(|e| e.class == layer.class || e.hint == layer.hint)
            {
                return Err(format!(
                    "class {:?} (hint {}) repeats the name or the hint of class {:?} (hint {})",
                    layer.class, layer.hint, earlier.class, earlier.hint
                ));
            }
            layer
                .policy
                .check()
                .map_err(|e| format!("class {:?}: {e}", layer.class))?;
        }
        self.other
            .check()
            .map_err(|e| format!("{OTHER_LAYER}: {e}"))
    }

    /// The hint of `class`, if the plan has a layer for it.
    pub fn hint_of(&self, class: &str) -> Option<u32> {
        self.classes
            .iter()
            .find(|l| l.class == class)
            .map(|l| l.hint)
    }

    /// The class whose layer `hint` selects, if any.
    pub fn class_of_hint(&self, hint: u32) -> Option<&str> {
        self.classes
            .iter()
            .find(|l| l.hint == hint)
            .map(|l| l.class.as_str())
    }

    /// This plan with other policies for some layers: `policies` maps a class (or
    /// [`OTHER_LAYER`]) to its new policy; the classes and their hints stay as they are, so
    /// the applications hinted under one plan are in the same classes under the other. An
    /// unknown class or a policy scx_layered would refuse is an error naming it.
    pub fn with_policies(
        &self,
        policies: &std::collections::BTreeMap<String, LayerPolicy>,
    ) -> Result<LayerPlan, String> {
        let mut plan = self.clone();
        for (class, policy) in policies {
            if class == OTHER_LAYER {
                plan.other = *policy;
                continue;
            }
            let layer = plan
                .classes
                .iter_mut()
                .find(|l| &l.class == class)
                .ok_or_else(|| {
                    let known: Vec<&str> = self.classes.iter().map(|l| l.class.as_str()).collect();
                    format!(
                        "no layer for class {class:?} (the plan's: {}, {OTHER_LAYER})",
                        known.join(", ")
                    )
                })?;
            layer.policy = *policy;
        }
        plan.check()?;
        Ok(plan)
    }

    /// scx_layered's layer configuration (the JSON it reads with `f:PATH`): a layer per class
    /// matched by `HintEquals` alone, then the terminal layer with an empty match.
    pub fn to_scx_layered_config(&self) -> serde_json::Value {
        let mut layers: Vec<serde_json::Value> = self
            .classes
            .iter()
            .map(|l| {
                serde_json::json!({
                    "name": l.class,
                    "comment": format!("applications of class {} (task hint {})", l.class, l.hint),
                    "matches": [[{ "HintEquals": l.hint }]],
                    "kind": l.policy.to_scx_layered_kind(),
                })
            })
            .collect();
        layers.push(serde_json::json!({
            "name": OTHER_LAYER,
            "comment": "every task no application class claims",
            "matches": [[]],
            "kind": self.other.to_scx_layered_kind(),
        }));
        serde_json::Value::Array(layers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::LayerKind;

    fn policy(slice_us: u64, preempt: bool, weight: u32) -> LayerPolicy {
        LayerPolicy {
            kind: LayerKind::Open,
            slice_us,
            preempt,
            preempt_first: false,
            weight,
            util_range: None,
            cpus_frac: None,
        }
    }

    fn plan(classes: &[(&str, u32)]) -> LayerPlan {
        LayerPlan {
            classes: classes
                .iter()
                .map(|(class, hint)| ClassLayer {
                    class: class.to_string(),
                    hint: *hint,
                    policy: policy(3000, true, 400),
                })
                .collect(),
            other: policy(10_000, false, 100),
        }
    }

    #[test]
    fn other_policies_keep_every_class_and_hint_and_are_checked() {
        let base = plan(&[("interactive", 1), ("cpu_batch", 2)]);
        let short = policy(5000, false, 100);
        let changed = base
            .with_policies(&std::collections::BTreeMap::from([
                ("cpu_batch".to_string(), short),
                (OTHER_LAYER.to_string(), short),
            ]))
            .unwrap();
        assert_eq!(changed.classes[1].policy, short);
        assert_eq!(changed.other, short);
        assert_eq!(changed.classes[0], base.classes[0]);
        let hints = |p: &LayerPlan| {
            p.classes
                .iter()
                .map(|l| (l.class.clone(), l.hint))
                .collect::<Vec<_>>()
        };
        assert_eq!(hints(&changed), hints(&base));
        let unknown = base
            .with_policies(&std::collections::BTreeMap::from([(
                "video".to_string(),
                short,
            )]))
            .unwrap_err();
        assert!(
            unknown.contains("no layer for class \"video\""),
            "{unknown}"
        );
        let refused = base
            .with_policies(&std::collections::BTreeMap::from([(
                "cpu_batch".to_string(),
                policy(1, false, 100),
            )]))
            .unwrap_err();
        assert!(
            refused.contains("cpu_batch") && refused.contains("slice_us"),
            "{refused}"
        );
    }

    #[test]
    fn each_class_is_a_hint_matched_layer_and_the_last_matches_every_task() {
        let config = plan(&[("interactive", 1), ("cpu_batch", 2)]).to_scx_layered_config();
        let layers = config.as_array().unwrap();
        assert_eq!(layers.len(), 3);
        assert_eq!(layers[0]["name"], "interactive");
        assert_eq!(
            layers[0]["matches"],
            serde_json::json!([[{"HintEquals": 1}]])
        );
        assert_eq!(
            layers[1]["matches"],
            serde_json::json!([[{"HintEquals": 2}]])
        );
        assert_eq!(layers[2]["name"], OTHER_LAYER);
        assert_eq!(layers[2]["matches"], serde_json::json!([[]]));
        assert_eq!(layers[2]["kind"]["Open"]["slice_us"], 10_000);
    }

    #[test]
    fn a_hint_names_its_class_both_ways() {
        let plan = plan(&[("interactive", 7), ("network", 3)]);
        assert_eq!(plan.hint_of("network"), Some(3));
        assert_eq!(plan.class_of_hint(7), Some("interactive"));
        assert_eq!(plan.hint_of("io_bound"), None);
        assert_eq!(plan.class_of_hint(0), None);
    }

    #[test]
    fn plans_scx_layered_would_refuse_are_refused_naming_the_class() {
        assert_eq!(plan(&[("a", 1), ("b", 1024)]).check(), Ok(()));
        let repeated_hint = plan(&[("a", 1), ("b", 1)]).check().unwrap_err();
        assert!(repeated_hint.contains("\"b\"") && repeated_hint.contains("\"a\""));
        assert!(plan(&[("a", 1), ("a", 2)]).check().is_err());
        assert!(plan(&[("a", 1025)])
            .check()
            .unwrap_err()
            .contains("hint = 1025"));
        assert!(plan(&[("a", 0)]).check().unwrap_err().contains("hint = 0"));
        assert!(plan(&[(OTHER_LAYER, 1)]).check().is_err());
        let names: Vec<String> = (1..=16).map(|i| format!("c{i}")).collect();
        let many: Vec<(&str, u32)> = names
            .iter()
            .zip(1..)
            .map(|(n, h)| (n.as_str(), h))
            .collect();
        assert!(plan(&many).check().unwrap_err().contains("17 layers"));
        let mut bad_policy = plan(&[("a", 1)]);
        bad_policy.classes[0].policy.weight = 0;
        assert!(bad_policy
            .check()
            .unwrap_err()
            .starts_with("class \"a\": weight"));
    }
}
