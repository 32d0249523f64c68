//! ASA's per-application enforcement through scx_layered.
//!
//! The agent recognises each application's class from its behaviour; this crate says how each
//! class is scheduled and turns that into the layer configuration scx_layered (crates.io, by
//! Meta) runs: [`policy`] is one class's layer policy (kind, slice, preemption, weight),
//! [`plan`] the whole configuration — a layer per class matched by a task hint, and a last layer
//! for everything else — with scx_layered's own checks made at load. The default plan
//! ([`DEFAULT_PLAN`], `layers/default.toml`) holds priors until calibration measures this
//! machine's.

pub mod plan;
pub mod policy;

pub use plan::{ClassLayer, LayerPlan, MAX_HINT, MAX_LAYERS, OTHER_LAYER};
pub use policy::{LayerKind, LayerPolicy};

/// The default layer plan (`layers/default.toml`), compiled in.
pub const DEFAULT_PLAN: &str = include_str!("../default.toml");

/// Where the agent and scx_layered share the task-hint map (bpffs) unless told otherwise:
/// scx_layered's `--task-hint-map`, and the pin of the agent's hint writer.
pub const DEFAULT_HINT_MAP: &str = "/sys/fs/bpf/asa/task_hints";

/// The default layer plan, read and checked.
pub fn default_plan() -> LayerPlan {
    parse_plan(DEFAULT_PLAN, "the default plan").expect("the default plan is valid")
}

/// Where in `text` a TOML parse `error` is, as " at line L, column C" (1-based; empty when the
/// parser gives no place): every TOML file ASA reads names the place of its errors this way.
pub fn toml_error_place(text: &str, error: &toml::de::Error) -> String {
    error
        .span()
        .map(|span| {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            format!(" at line {line}, column {column}")
        })
        .unwrap_or_default()
}

/// Reads a layer plan from TOML text and checks it; `origin` names the text in the error
/// (a path, or "the default plan"), with the line and column where the parser gives them.
pub fn parse_plan(text: &str, origin: &str) -> Result<LayerPlan, String> {
    let plan: LayerPlan = toml::from_str(text).map_err(|e| {
        format!(
            "layer plan {origin}{}: {}",
            toml_error_place(text, &e),
            e.message()
        )
    })?;
    plan.check()
        .map_err(|e| format!("layer plan {origin}: {e}"))?;
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_plan_reads_and_passes_scx_layereds_checks() {
        let plan = default_plan();
        for class in [
            "interactive",
            "cpu_batch",
            "io_bound",
            "network",
            "background",
        ] {
            assert!(plan.hint_of(class).is_some(), "{class} has no layer");
        }
        assert_eq!(
            plan.to_scx_layered_config().as_array().unwrap().len(),
            plan.classes.len() + 1
        );
    }

    #[test]
    fn a_malformed_plan_names_its_origin_line_and_column() {
        let text = "[other]\nkind = \"open\"\nslice_us = 1000\nweight = 100\nsurprise = 1\n";
        let error = parse_plan(text, "/etc/asa/layers.toml").unwrap_err();
        assert!(
            error.starts_with("layer plan /etc/asa/layers.toml at line 5, column 1"),
            "{error}"
        );
        let error = parse_plan("class = 3", "x.toml").unwrap_err();
        assert!(error.contains("x.toml at line 1"), "{error}");
    }

    #[test]
    fn a_plan_that_breaks_scx_layereds_rules_is_refused_at_parse() {
        let text = "[other]\nkind = \"open\"\nslice_us = 1000\nweight = 100\n\
                    [[class]]\nclass = \"a\"\nhint = 2000\n\
                    policy = { kind = \"open\", slice_us = 1000, weight = 100 }\n";
        let error = parse_plan(text, "p.toml").unwrap_err();
        assert!(error.contains("hint = 2000"), "{error}");
    }
}
