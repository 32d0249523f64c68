//! The candidates of stage layers: for each application class, the reference plan's policy
//! with another time slice (`layered-<class>-<slice>`), for a class whose layer does not preempt
//! the same policy on a share of the CPUs (`layered-<class>-share<pct>`), and for a class whose
//! layer preempts the same policy without preemption (`layered-<class>-nopreempt`) or, asked
//! for, preempting the waking task's previous CPU first (`layered-<class>-preemptfirst`), each an
//! expert of its own, and the expert catalogue that holds them (`DIR/candidates.toml`).
//!
//! Invariant: a candidate differs from the reference plan (the default plan, or a base table's
//! rows over it: `--layer-base`) in one class's policy only — its slice, or the CPUs its layer
//! may use — so its runs against `layered` measure that and nothing else.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{anyhow, bail, Context, Result};
use asa_layers::{LayerKind, LayerPlan, LayerPolicy, OTHER_LAYER};
use asa_scenarios::catalogue::{Catalogue as ScenarioCatalogue, ScenarioSpec, IDLE};

use super::LAYERED;

/// The slices (µs) tried for each class unless `--layer-slices-us` says otherwise.
pub const DEFAULT_SLICES_US: [u64; 2] = [5000, 2000];

/// A share candidate's utilisation range: the layer grows above 90 % busy per owned CPU and
/// shrinks below 60 % (scx_layered's `util_range`), within its fixed share.
pub const SHARE_UTIL_RANGE: (f64, f64) = (0.6, 0.9);

/// One candidate: the reference plan with another policy for one class.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Expert name ([`candidate_name`]).
    pub name: String,
    /// The class (or [`OTHER_LAYER`]) whose policy it changes.
    pub class: String,
    /// That class's policy under this candidate.
    pub policy: LayerPolicy,
}

/// `layered-<class>-<n>ms`, or `layered-<class>-<n>us` for a slice that is no whole ms.
pub fn candidate_name(class: &str, slice_us: u64) -> String {
    if slice_us.is_multiple_of(1000) {
        format!("{LAYERED}-{class}-{}ms", slice_us / 1000)
    } else {
        format!("{LAYERED}-{class}-{slice_us}us")
    }
}

/// The policy `plan` gives `class` (the last layer's for [`OTHER_LAYER`]), if it has the class.
pub fn plan_policy(plan: &LayerPlan, class: &str) -> Option<LayerPolicy> {
    if class == OTHER_LAYER {
        return Some(plan.other);
    }
    plan.classes
        .iter()
        .find(|l| l.class == class)
        .map(|l| l.policy)
}

/// The policies `plan` gives differently from ASA's default plan, by class (or
/// [`OTHER_LAYER`]): what a base table (`--layer-base`) changes.
pub fn plan_changes(plan: &LayerPlan) -> BTreeMap<String, LayerPolicy> {
    let default = asa_layers::default_plan();
    plan_classes(plan)
        .into_iter()
        .filter_map(|class| {
            let policy = plan_policy(plan, &class)?;
            (plan_policy(&default, &class) != Some(policy)).then_some((class, policy))
        })
        .collect()
}

/// The names `plan` has layers for, in its order, then [`OTHER_LAYER`].
pub fn plan_classes(plan: &LayerPlan) -> Vec<String> {
    plan.classes
        .iter()
        .map(|l| l.class.clone())
        .chain([OTHER_LAYER.to_string()])
        .collect()
}

/// For each class of `classes` and each slice of `slices_us` other than the class's slice in
/// `plan`, the candidate with that slice (the rest of the class's policy unchanged), classes in
/// the given order, slices in theirs (repeats ignored). A class `plan` lacks, or a slice
/// scx_layered would refuse, is an error naming it.
pub fn candidates(
    plan: &LayerPlan,
    classes: &[String],
    slices_us: &[u64],
) -> Result<Vec<Candidate>> {
    let mut out = Vec::new();
    for class in classes {
        let base = plan_policy(plan, class).ok_or_else(|| {
            anyhow!(
                "layer class {class:?} is not in the layer plan (its classes: {})",
                plan_classes(plan).join(", ")
            )
        })?;
        let mut seen = BTreeSet::new();
        for &slice_us in slices_us {
            if slice_us == base.slice_us || !seen.insert(slice_us) {
                continue;
            }
            let policy = LayerPolicy { slice_us, ..base };
            policy
                .check()
                .map_err(|why| anyhow!("layer slice {slice_us} µs for class {class:?}: {why}"))?;
            out.push(Candidate {
                name: candidate_name(class, slice_us),
                class: class.clone(),
                policy,
            });
        }
    }
    Ok(out)
}

/// `layered-<class>-share<pct>`: the class's layer on `share` of the CPUs.
pub fn share_candidate_name(class: &str, share: f64) -> String {
    format!("{LAYERED}-{class}-share{}", (share * 100.0).round() as u32)
}

/// For each class of `classes` whose layer in `plan` does not preempt (background work, which
/// a foreground task should not have to wait behind on every CPU) and each share of `shares`,
/// the candidate with the class's policy grouped on that fraction of the machine's CPUs
/// (scx_layered `Grouped`, `cpus_frac` = [share, share]; the rest of its policy unchanged).
/// The last layer is left open: it holds kernel threads. A class `plan` lacks, or a share
/// outside (0, 1), is an error naming it.
pub fn share_candidates(
    plan: &LayerPlan,
    classes: &[String],
    shares: &[f64],
) -> Result<Vec<Candidate>> {
    if let Some(bad) = shares.iter().find(|s| !(**s > 0.0 && **s < 1.0)) {
        bail!(
            "--layer-shares {bad}: a share is a fraction of the CPUs above 0 and below 1, e.g. 0.5"
        );
    }
    let mut out = Vec::new();
    for class in classes.iter().filter(|c| c.as_str() != OTHER_LAYER) {
        let base = plan_policy(plan, class).ok_or_else(|| {
            anyhow!(
                "layer class {class:?} is not in the layer plan (its classes: {})",
                plan_classes(plan).join(", ")
            )
        })?;
        if base.preempt {
            continue;
        }
        let mut seen = BTreeSet::new();
        for &share in shares {
            let name = share_candidate_name(class, share);
            if !seen.insert(name.clone()) {
                continue;
            }
            let policy = LayerPolicy {
                kind: LayerKind::Grouped,
                util_range: Some(SHARE_UTIL_RANGE),
                cpus_frac: Some((share, share)),
                ..base
            };
            policy
                .check()
                .map_err(|why| anyhow!("layer share {share} for class {class:?}: {why}"))?;
            out.push(Candidate {
                name,
                class: class.clone(),
                policy,
            });
        }
    }
    Ok(out)
}

/// The name ending of a candidate without preemption.
const NO_PREEMPT: &str = "nopreempt";

/// `layered-<class>-nopreempt`: the class's layer without preemption.
pub fn no_preempt_candidate_name(class: &str) -> String {
    format!("{LAYERED}-{class}-{NO_PREEMPT}")
}

/// For each class of `classes` that `no_preempt` names and whose layer in `plan` preempts, the
/// candidate with the class's policy not preempting (the rest unchanged): an application the
/// plan's prior takes for latency-bound (an I/O- or network-bound one) may be a bulk transfer
/// that holds a CPU, and preempting then takes the CPU from the foreground. A class of
/// `no_preempt` that `plan` lacks is an error naming it; one that is not calibrated now, or
/// does not preempt, gets none.
pub fn no_preempt_candidates(
    plan: &LayerPlan,
    classes: &[String],
    no_preempt: &[String],
) -> Result<Vec<Candidate>> {
    switch_candidates(
        plan,
        classes,
        no_preempt,
        "--layer-no-preempt",
        |p| {
            p.preempt.then_some(LayerPolicy {
                preempt: false,
                ..p
            })
        },
        no_preempt_candidate_name,
    )
}

/// For each class of `classes` that `asked` names, the candidate with `change`'s policy (a class
/// `change` gives none, given its policy in `plan`, gets none), named by `name`. A class of
/// `asked` that `plan` lacks is an error naming it and the option (`flag`) that asked.
fn switch_candidates(
    plan: &LayerPlan,
    classes: &[String],
    asked: &[String],
    flag: &str,
    change: impl Fn(LayerPolicy) -> Option<LayerPolicy>,
    name: impl Fn(&str) -> String,
) -> Result<Vec<Candidate>> {
    for class in asked {
        if plan_policy(plan, class).is_none() {
            bail!(
                "{flag} {class}: not a class of the layer plan (its classes: {})",
                plan_classes(plan).join(", ")
            );
        }
    }
    Ok(classes
        .iter()
        .filter(|c| asked.contains(*c))
        .filter_map(|class| {
            let policy = change(plan_policy(plan, class).expect("checked above"))?;
            Some(Candidate {
                name: name(class),
                class: class.clone(),
                policy,
            })
        })
        .collect())
}

/// The name ending of a candidate that preempts the previous CPU first.
const PREEMPT_FIRST: &str = "preemptfirst";

/// `layered-<class>-preemptfirst`: the class's layer preempting the previous CPU first.
pub fn preempt_first_candidate_name(class: &str) -> String {
    format!("{LAYERED}-{class}-{PREEMPT_FIRST}")
}

/// For each class of `classes` that `preempt_first` names and whose layer in `plan` preempts but
/// not first, the candidate whose waking tasks preempt their previous CPU before looking for an
/// idle one (scx_layered `preempt_first`; the rest unchanged): a periodic task with a deadline
/// (audio) that scx_layered places on an idle CPU only after its search, or behind a queued
/// task, may miss it. A class of `preempt_first` that `plan` lacks is an error naming it; one
/// that is not calibrated now, or does not preempt, gets none.
pub fn preempt_first_candidates(
    plan: &LayerPlan,
    classes: &[String],
    preempt_first: &[String],
) -> Result<Vec<Candidate>> {
    switch_candidates(
        plan,
        classes,
        preempt_first,
        "--layer-preempt-first",
        |p| {
            (p.preempt && !p.preempt_first).then_some(LayerPolicy {
                preempt_first: true,
                ..p
            })
        },
        preempt_first_candidate_name,
    )
}

/// What a candidate changes, for its catalogue entry.
fn describe_candidate(c: &Candidate) -> String {
    if c.name.ends_with(NO_PREEMPT) {
        return format!("the {} layer without preemption", c.class);
    }
    if c.name.ends_with(PREEMPT_FIRST) {
        return format!(
            "the {} layer preempting the previous CPU before an idle one",
            c.class
        );
    }
    match (c.policy.kind, c.policy.cpus_frac) {
        (LayerKind::Grouped, Some((share, _))) => format!(
            "the {} layer on {:.0} % of the CPUs",
            c.class,
            share * 100.0
        ),
        _ => format!("the {} layer with {} µs slices", c.class, c.policy.slice_us),
    }
}

/// The application classes of a scenario: its probe's and every (non-idle) load's `app_class`.
pub fn scenario_classes(
    catalogue: &ScenarioCatalogue,
    spec: &ScenarioSpec,
) -> Result<BTreeSet<String>> {
    let probe = catalogue
        .probes
        .get(&spec.probe)
        .with_context(|| format!("scenario {}: unknown probe {}", spec.name, spec.probe))?;
    let mut classes = BTreeSet::from([probe.app_class.clone()]);
    for phase in spec.phases() {
        if phase.load == IDLE {
            continue;
        }
        let load = catalogue
            .loads
            .get(&phase.load)
            .with_context(|| format!("scenario {}: unknown load {}", spec.name, phase.load))?;
        classes.insert(load.app_class.clone());
    }
    Ok(classes)
}

/// The classes stage layers calibrates by default: every class of the `scenarios`' probes and
/// loads, in `plan`'s order, then [`OTHER_LAYER`] (every task no class claims is in every run).
pub fn default_classes(
    catalogue: &ScenarioCatalogue,
    scenarios: &[String],
    plan: &LayerPlan,
) -> Result<Vec<String>> {
    let mut found = BTreeSet::new();
    for name in scenarios {
        found.extend(scenario_classes(catalogue, catalogue.scenario(name)?)?);
    }
    found.insert(OTHER_LAYER.to_string());
    let order = plan_classes(plan);
    let mut classes: Vec<String> = order
        .iter()
        .filter(|c| found.contains(*c))
        .cloned()
        .collect();
    // A class of the scenarios that the plan lacks: [`candidates`] says so.
    classes.extend(found.into_iter().filter(|c| !order.contains(c)));
    Ok(classes)
}

/// A whole expert catalogue (TOML that [`asa_experts::Catalogue::parse`] accepts) with, from
/// `builtin` (the text of a catalogue, e.g. [`asa_experts::catalogue::BUILTIN_CATALOGUE`]): `eevdf`,
/// `cosmos` when it has one, `layered` and the `whole_machine` experts; then one entry per
/// candidate: `layered`'s entry named for the candidate with `layer_policies = { <class> =
/// <policy> }`. With `base` policies (a base table's rows, `--layer-base`), `layered` runs them
/// (`layer_policies = base`) and each candidate changes its class on top of them. An expert of
/// `whole_machine` that `builtin` lacks is an error naming it.
pub fn candidate_catalogue(
    builtin: &str,
    whole_machine: &[String],
    base: &BTreeMap<String, LayerPolicy>,
    candidates: &[Candidate],
) -> Result<String> {
    let doc: toml::Table = toml::from_str(builtin).context("reading the expert catalogue")?;
    let entries = doc
        .get("expert")
        .and_then(|e| e.as_array())
        .context("the expert catalogue has no [[expert]]")?;
    let entry = |name: &str| {
        entries
            .iter()
            .filter_map(|e| e.as_table())
            .find(|e| e.get("name").and_then(|n| n.as_str()) == Some(name))
    };
    let mut names: Vec<&str> = vec![asa_experts::EEVDF];
    if entry("cosmos").is_some() {
        names.push("cosmos");
    }
    names.push(LAYERED);
    for name in whole_machine {
        if !names.contains(&name.as_str()) {
            names.push(name);
        }
    }
    let mut experts = Vec::new();
    for name in names {
        let e = entry(name).with_context(|| {
            format!("expert {name:?} is not in the expert catalogue the candidates come from")
        })?;
        experts.push(toml::Value::Table(e.clone()));
    }
    let mut layered = entry(LAYERED)
        .expect("layered is among the entries")
        .clone();
    if !base.is_empty() {
        layered.insert(
            "layer_policies".into(),
            toml::Value::try_from(base).context("writing the base plan's policies")?,
        );
        let reference = experts
            .iter_mut()
            .find(|e| e.get("name").and_then(|n| n.as_str()) == Some(LAYERED))
            .expect("layered is among the experts");
        *reference = toml::Value::Table(layered.clone());
    }
    for c in candidates {
        let mut e = layered.clone();
        e.insert("name".into(), c.name.clone().into());
        e.insert(
            "description".into(),
            format!(
                "{LAYERED}, {} (stage layers candidate).",
                describe_candidate(c)
            )
            .into(),
        );
        let mut policies = base.clone();
        policies.insert(c.class.clone(), c.policy);
        e.insert(
            "layer_policies".into(),
            toml::Value::try_from(policies).context("writing a candidate's policy")?,
        );
        experts.push(toml::Value::Table(e));
    }
    let mut out = toml::Table::new();
    for key in ["schema", "version"] {
        if let Some(v) = doc.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    out.insert("expert".into(), toml::Value::Array(experts));
    let reference = if base.is_empty() {
        "ASA's default layer plan".to_string()
    } else {
        format!(
            "the base table's plan: its own policies\n# for {}",
            base.keys().cloned().collect::<Vec<_>>().join(", ")
        )
    };
    let text = format!(
        "# Candidates of `asa calibrate --stage layers` (written by it): `{LAYERED}` ({reference}),\n\
         # each candidate (`{LAYERED}` with another policy for one class), and the whole-machine\n\
         # experts compared with them. Also usable as `asa --catalogue FILE`.\n\n{}",
        toml::to_string(&out).context("writing the candidate catalogue")?
    );
    asa_experts::Catalogue::parse(&text, "the candidate catalogue").map_err(|e| anyhow!("{e}"))?;
    Ok(text)
}

/// Per scenario of `scenarios`, the candidates that need not run there: those changing a class
/// the scenario has no application of. A layer row scores a class's candidates only on the
/// scenarios with an application of the class ([`super::layer_rows`]), so their runs elsewhere
/// could not change a row. A candidate of [`OTHER_LAYER`] runs everywhere (its layer holds every
/// task no class claims, in every run). Scenarios with nothing to skip are absent.
pub fn candidate_skips(
    catalogue: &ScenarioCatalogue,
    scenarios: &[String],
    candidates: &[Candidate],
) -> Result<BTreeMap<String, BTreeSet<String>>> {
    let mut out = BTreeMap::new();
    for name in scenarios {
        let classes = scenario_classes(catalogue, catalogue.scenario(name)?)?;
        let skip: BTreeSet<String> = candidates
            .iter()
            .filter(|c| c.class != OTHER_LAYER && !classes.contains(&c.class))
            .map(|c| c.name.clone())
            .collect();
        if !skip.is_empty() {
            out.insert(name.clone(), skip);
        }
    }
    Ok(out)
}

/// Refuses options that would give no candidate: no slice at all.
pub fn check_slices(slices_us: &[u64]) -> Result<()> {
    if slices_us.is_empty() {
        bail!("--layer-slices-us needs at least one slice (µs), e.g. 5000,2000");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classes(names: &[&str]) -> Vec<String> {
        names.iter().map(|c| c.to_string()).collect()
    }

    /// Default plan: interactive 3 ms, io_bound 5 ms, cpu_batch 20 ms, other 20 ms. A slice
    /// equal to the class's own gives no candidate; a slice of no whole ms is named in µs.
    #[test]
    fn candidates_are_named_for_class_and_slice_and_skip_the_default_slice() {
        let plan = asa_layers::default_plan();
        let got = candidates(
            &plan,
            &classes(&["interactive", "io_bound", "other"]),
            &[5000, 2000, 2500, 5000],
        )
        .unwrap();
        let names: Vec<&str> = got.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "layered-interactive-5ms",
                "layered-interactive-2ms",
                "layered-interactive-2500us",
                "layered-io_bound-2ms",
                "layered-io_bound-2500us",
                "layered-other-5ms",
                "layered-other-2ms",
                "layered-other-2500us",
            ]
        );
        let interactive = plan_policy(&plan, "interactive").unwrap();
        assert_eq!(
            got[0].policy,
            LayerPolicy {
                slice_us: 5000,
                ..interactive
            }
        );
    }

    #[test]
    fn a_class_the_plan_lacks_or_a_refused_slice_is_an_error_naming_it() {
        let plan = asa_layers::default_plan();
        let e = candidates(&plan, &classes(&["gpu"]), &[5000])
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"gpu\"") && e.contains("cpu_batch"), "{e}");
        let e = candidates(&plan, &classes(&["cpu_batch"]), &[50])
            .unwrap_err()
            .to_string();
        assert!(e.contains("50 µs") && e.contains("cpu_batch"), "{e}");
    }

    /// The catalogue text parses; each candidate is `layered`'s binary with one policy, so its
    /// plan differs from the default in its own class only.
    #[test]
    fn the_candidate_catalogue_parses_and_each_candidate_changes_only_its_class() {
        let plan = asa_layers::default_plan();
        let cands = candidates(&plan, &classes(&["cpu_batch", "other"]), &[5000]).unwrap();
        let text = candidate_catalogue(
            asa_experts::catalogue::BUILTIN_CATALOGUE,
            &["lavd".to_string(), "cosmos".to_string()],
            &BTreeMap::new(),
            &cands,
        )
        .unwrap();
        let cat = asa_experts::Catalogue::parse(&text, "candidates.toml").unwrap();
        assert_eq!(
            cat.names(),
            [
                "eevdf",
                "cosmos",
                "layered",
                "lavd",
                "layered-cpu_batch-5ms",
                "layered-other-5ms"
            ]
        );
        let builtin = asa_experts::Catalogue::builtin();
        for name in ["eevdf", "cosmos", "layered", "lavd"] {
            assert_eq!(cat.get(name), builtin.get(name), "{name}");
        }
        let layered = builtin.get(LAYERED).unwrap();
        for c in &cands {
            let e = cat.get(&c.name).unwrap();
            assert!(e.layer_plan);
            assert_eq!(
                (&e.binary, &e.version, &e.ops_prefix),
                (&layered.binary, &layered.version, &layered.ops_prefix)
            );
            assert_eq!(
                e.layer_policies,
                BTreeMap::from([(c.class.clone(), c.policy)])
            );
            let own = plan.with_policies(&e.layer_policies).unwrap();
            for class in plan_classes(&plan) {
                let (mine, theirs) = (plan_policy(&own, &class), plan_policy(&plan, &class));
                if class == c.class {
                    assert_eq!(mine.unwrap().slice_us, 5000);
                } else {
                    assert_eq!(mine, theirs, "{} changed {class}", c.name);
                }
            }
            assert_eq!(
                e.args.last().unwrap(),
                &own.to_scx_layered_config().to_string()
            );
        }
        let e = candidate_catalogue(
            asa_experts::catalogue::BUILTIN_CATALOGUE,
            &["nope".into()],
            &BTreeMap::new(),
            &cands,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("\"nope\""), "{e}");
    }

    /// S20 (web + network transfer) has no cpu_batch application, S1 (game + archive
    /// extraction) has one: the 2 ms cpu_batch candidate runs in S1 only, the network one in
    /// S20 only, the `other` one in both.
    #[test]
    fn a_cpu_batch_candidate_is_not_run_in_a_scenario_without_a_cpu_batch_application() {
        let catalogue = ScenarioCatalogue::builtin().unwrap();
        let plan = asa_layers::default_plan();
        let scenarios = classes(&["S1", "S20"]);
        assert!(
            scenario_classes(&catalogue, catalogue.scenario("S1").unwrap())
                .unwrap()
                .contains("cpu_batch")
        );
        let cands =
            candidates(&plan, &classes(&["cpu_batch", "network", "other"]), &[2000]).unwrap();
        let skip = candidate_skips(&catalogue, &scenarios, &cands).unwrap();
        assert_eq!(
            skip,
            BTreeMap::from([
                (
                    "S1".to_string(),
                    BTreeSet::from(["layered-network-2ms".to_string()])
                ),
                (
                    "S20".to_string(),
                    BTreeSet::from(["layered-cpu_batch-2ms".to_string()])
                ),
            ])
        );
    }

    /// The built-in scenarios' probes are interactive and their loads cpu_batch, io_bound or
    /// network; `other` always comes last.
    #[test]
    fn default_classes_are_the_scenarios_app_classes_in_plan_order_then_other() {
        let catalogue = ScenarioCatalogue::builtin().unwrap();
        let plan = asa_layers::default_plan();
        let s20 = default_classes(&catalogue, &["S20".to_string()], &plan).unwrap();
        assert_eq!(s20, ["interactive", "network", "other"]);
        let all: Vec<String> = catalogue.scenarios.iter().map(|s| s.name.clone()).collect();
        let every = default_classes(&catalogue, &all, &plan).unwrap();
        assert_eq!(every.last().map(String::as_str), Some(OTHER_LAYER));
        assert!(every.contains(&"cpu_batch".to_string()));
    }

    #[test]
    fn share_candidates_group_only_non_preempting_classes_and_refuse_a_bad_share() {
        let plan = asa_layers::default_plan();
        let got = share_candidates(
            &plan,
            &classes(&["interactive", "cpu_batch", "background", "other"]),
            &[0.5, 0.5, 0.25],
        )
        .unwrap();
        let names: Vec<&str> = got.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "layered-cpu_batch-share50",
                "layered-cpu_batch-share25",
                "layered-background-share50",
                "layered-background-share25"
            ]
        );
        let base = plan_policy(&plan, "cpu_batch").unwrap();
        assert_eq!(
            got[1].policy,
            LayerPolicy {
                kind: LayerKind::Grouped,
                util_range: Some(SHARE_UTIL_RANGE),
                cpus_frac: Some((0.25, 0.25)),
                ..base
            }
        );
        for bad in [0.0, 1.0, -0.5] {
            let e = share_candidates(&plan, &classes(&["cpu_batch"]), &[bad])
                .unwrap_err()
                .to_string();
            assert!(e.contains("--layer-shares") && e.contains("above 0"), "{e}");
        }
        let e = share_candidates(&plan, &classes(&["gpu"]), &[0.5])
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"gpu\" is not in the layer plan"), "{e}");
        let cat = parsed_catalogue(&got[..1]);
        assert!(
            cat.contains("the cpu_batch layer on 50 % of the CPUs"),
            "{cat}"
        );
    }

    /// The candidate catalogue of `candidates` over the built-in one, checked to parse.
    fn parsed_catalogue(candidates: &[Candidate]) -> String {
        let cat = candidate_catalogue(
            asa_experts::catalogue::BUILTIN_CATALOGUE,
            &[],
            &BTreeMap::new(),
            candidates,
        )
        .unwrap();
        asa_experts::Catalogue::parse(&cat, "candidates").unwrap();
        cat
    }

    /// interactive preempts in the default plan: one candidate that preempts first, the rest of
    /// its policy kept; non-preempting classes get none, nor does a class not calibrated now;
    /// an unknown class is an error naming it.
    #[test]
    fn preempt_first_candidates_only_for_preempting_classes_that_ask() {
        let plan = asa_layers::default_plan();
        let got = preempt_first_candidates(
            &plan,
            &classes(&["interactive", "cpu_batch", "network"]),
            &classes(&["interactive", "cpu_batch", "io_bound"]),
        )
        .unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].name, "layered-interactive-preemptfirst");
        let base = plan_policy(&plan, "interactive").unwrap();
        assert!(base.preempt && !base.preempt_first);
        assert_eq!(
            got[0].policy,
            LayerPolicy {
                preempt_first: true,
                ..base
            }
        );
        assert_eq!(got[0].policy.check(), Ok(()));
        assert!(describe_candidate(&got[0]).contains("previous CPU before an idle one"));
        let none =
            preempt_first_candidates(&plan, &classes(&["cpu_batch"]), &classes(&["interactive"]))
                .unwrap();
        assert!(none.is_empty());
        let e = preempt_first_candidates(&plan, &classes(&["interactive"]), &classes(&["gpu"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--layer-preempt-first gpu"), "{e}");
        let cat = parsed_catalogue(&got);
        assert!(cat.contains("preempt_first = true"), "{cat}");
    }

    /// interactive preempts in the default plan: one candidate without preemption, the rest
    /// of its policy kept; cpu_batch and network do not preempt and get none; a class not
    /// calibrated now gets none; an unknown class is an error naming it.
    #[test]
    fn no_preempt_candidates_turn_off_preemption_of_preempting_classes_only() {
        let plan = asa_layers::default_plan();
        let got = no_preempt_candidates(
            &plan,
            &classes(&["interactive", "network", "cpu_batch"]),
            &classes(&["interactive", "io_bound", "network", "cpu_batch"]),
        )
        .unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].name, "layered-interactive-nopreempt");
        let base = plan_policy(&plan, "interactive").unwrap();
        assert!(base.preempt);
        assert_eq!(
            got[0].policy,
            LayerPolicy {
                preempt: false,
                ..base
            }
        );
        assert!(describe_candidate(&got[0]).contains("interactive layer without preemption"));
        let e = no_preempt_candidates(&plan, &classes(&["network"]), &classes(&["gpu"]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--layer-no-preempt gpu") && e.contains("interactive"),
            "{e}"
        );
    }
}
