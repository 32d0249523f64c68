//! Scores out of result sets: each run's UX score, grouped into workload classes by the
//! scenario catalogue stored with the results.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use asa_scenarios::catalogue::Catalogue as ScenarioCatalogue;
use asa_scenarios::report::score_scenario;
use asa_scenarios::runner::{ResultSet, ScenarioResult};

use super::{runs_by_boot, BootNumbers, BootUnit, ClassScheme};
use crate::budget::ClassRuns;

/// One class's runs from result sets.
#[derive(Debug, Clone)]
pub(super) struct ClassData {
    /// Scenarios pooled into it.
    pub(super) scenarios: Vec<String>,
    /// Per scenario and boot (a scenario result whose runs span two boots gives two entries),
    /// every scored run as (expert, score).
    pub(super) per_scenario: Vec<Vec<(String, f64)>>,
    /// Per entry of `per_scenario`, its boot ([`BootNumbers`]).
    pub(super) boots: Vec<usize>,
    /// The runs by unit (result set, scenario, repetition), for the comparisons of
    /// [`crate::budget`].
    pub(super) runs: ClassRuns,
}

/// Every run of one scenario result with its score (`None`: skipped or invalid), as
/// (expert, repetition, score); mid-run switch runs (`a>b`, stage 2) and the live agent's runs
/// (stage 3) are no expert of their own and are left out.
pub fn scored_runs(
    catalogue: &ScenarioCatalogue,
    result: &ScenarioResult,
) -> Result<Vec<(String, u32, Option<f64>)>> {
    let scored = score_scenario(catalogue, result)?;
    let score_of = |expert: &str, rep: u32| {
        scored
            .runs
            .iter()
            .find(|r| r.expert == expert && r.rep == rep)
            .map(|r| r.score)
    };
    let own = |expert: &str| {
        crate::overhead::parse_switch(expert).is_none() && !crate::live::is_agent(expert)
    };
    let mut runs: Vec<(String, u32, Option<f64>)> = result
        .runs
        .iter()
        .filter(|r| own(&r.expert))
        .map(|r| {
            let score = if r.valid {
                score_of(&r.expert, r.rep)
            } else {
                None
            };
            (r.expert.clone(), r.rep, score)
        })
        .collect();
    runs.extend(
        result
            .skipped
            .iter()
            .filter(|s| own(&s.expert))
            .map(|s| (s.expert.clone(), s.rep, None)),
    );
    Ok(runs)
}

/// The scenario catalogue a result set stored, which scores its runs (`origin` names it in
/// errors). A catalogue stored before probes and loads named their application class
/// (`app_class`: per-application mode's, unused by the scores) gets the built-in catalogue's
/// class of the same probe or load.
pub fn stored_catalogue(set: &ResultSet, origin: &str) -> Result<ScenarioCatalogue> {
    ScenarioCatalogue::parse(&set.catalogue_toml, origin).or_else(|first| {
        match with_builtin_app_classes(&set.catalogue_toml) {
            Some(text) => ScenarioCatalogue::parse(&text, origin).map_err(|_| first),
            None => Err(first),
        }
    })
}

/// `text` with every probe and load lacking `app_class` given the built-in catalogue's; None
/// when none lacks it or one is not in the built-in catalogue.
pub(super) fn with_builtin_app_classes(text: &str) -> Option<String> {
    let mut doc: toml::Table = toml::from_str(text).ok()?;
    let builtin: toml::Table = toml::from_str(asa_scenarios::catalogue::BUILTIN_SCENARIOS).ok()?;
    let mut changed = false;
    for kind in ["probe", "load"] {
        let Some(entries) = doc.get_mut(kind).and_then(|v| v.as_table_mut()) else {
            continue;
        };
        for (name, entry) in entries.iter_mut() {
            let Some(entry) = entry.as_table_mut() else {
                continue;
            };
            if !entry.contains_key("app_class") {
                let class = builtin.get(kind)?.get(name)?.get("app_class")?.clone();
                entry.insert("app_class".into(), class);
                changed = true;
            }
        }
    }
    changed.then(|| toml::to_string(&doc).ok()).flatten()
}

/// Every class's runs out of `sets`, each run's boot numbered by `boots` in file order.
pub(super) fn collect_scores(
    sets: &[ResultSet],
    scheme: ClassScheme,
    boots: &mut BootNumbers,
    left_out: &mut Vec<(String, String)>,
) -> Result<BTreeMap<String, ClassData>> {
    // class → its scenarios with, per scenario, the set it came from, its scored runs and
    // those runs by boot.
    type Scenario = (
        usize,
        String,
        Vec<(String, u32, Option<f64>)>,
        Vec<BootUnit>,
    );
    let mut grouped: BTreeMap<String, Vec<Scenario>> = BTreeMap::new();
    for (i, set) in sets.iter().enumerate() {
        let catalogue = stored_catalogue(set, &format!("result set {i}"))
            .context("the scenario catalogue stored in a result set")?;
        for result in &set.scenarios {
            if let Some(e) = &result.error {
                left_out.push((result.scenario.clone(), format!("failed: {e}")));
                continue;
            }
            let spec = catalogue.scenario(&result.scenario)?;
            let phases = spec.phases();
            if phases.len() != 1 {
                left_out.push((
                    result.scenario.clone(),
                    "phased: its background changes, so it is no single class (stage 3)".into(),
                ));
                continue;
            }
            let runs = scored_runs(&catalogue, result)?;
            if runs.iter().all(|(_, _, score)| score.is_none()) {
                left_out.push((result.scenario.clone(), "no valid run".into()));
                continue;
            }
            let class = scheme.class_of(&result.probe, &phases[0].load);
            let by_boot = runs_by_boot(i, result, &runs, boots);
            grouped
                .entry(class)
                .or_default()
                .push((i, result.scenario.clone(), runs, by_boot));
        }
    }
    let mut classes = BTreeMap::new();
    for (class, scenarios) in grouped {
        let mut names: Vec<String> = Vec::new();
        let mut per_scenario = Vec::new();
        let mut unit_boots = Vec::new();
        let mut units: Vec<(usize, u32, String)> = Vec::new();
        let mut experts: Vec<String> = Vec::new();
        for (set, scenario, runs, by_boot) in &scenarios {
            if !names.contains(scenario) {
                names.push(scenario.clone());
            }
            for (boot, scored) in by_boot {
                per_scenario.push(scored.clone());
                unit_boots.push(*boot);
            }
            let reps = sets[*set].options.reps.max(1);
            let most = runs.iter().map(|(_, r, _)| r + 1).max().unwrap_or(0);
            for rep in 0..reps.max(most) {
                units.push((*set, rep, scenario.clone()));
            }
            for (e, _, _) in runs {
                if !experts.contains(e) {
                    experts.push(e.clone());
                }
            }
        }
        units.sort();
        units.dedup();
        let mut class_runs = ClassRuns::new(&class, units.len(), &experts);
        for (set, scenario, runs, _) in &scenarios {
            for (e, rep, x) in runs {
                let key = (*set, *rep, scenario.clone());
                let unit = units
                    .binary_search(&key)
                    .expect("every run's unit is listed");
                class_runs.record(e, unit, *x);
            }
        }
        classes.insert(
            class,
            ClassData {
                scenarios: names,
                per_scenario,
                boots: unit_boots,
                runs: class_runs,
            },
        );
    }
    Ok(classes)
}
