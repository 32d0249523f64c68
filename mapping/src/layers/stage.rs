//! The command of stage layers: measure (or read recorded runs), then write `DIR/mapping.toml`
//! (class rows and layer rows) and `DIR/calibration.md`, and print the table.
//!
//! Invariant: the runs are made with the candidate catalogue written to `DIR/candidates.toml`,
//! and rows are read against that same file, so a row's policy is what its arm ran.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use asa_experts::Catalogue;
use asa_layers::{LayerPlan, LayerPolicy};
use asa_scenarios::catalogue::Catalogue as ScenarioCatalogue;
use asa_scenarios::runner::{ResultSet, RunObserver, SupervisorSwitcher};

use super::{
    candidate_catalogue, candidate_skips, candidates, changes_from, check_slices, default_classes,
    is_plan_variant, layer_rows, markdown, no_preempt_candidates, plan_changes, plan_classes,
    preempt_first_candidates, reference_plan, scenario_classes, scenario_runs, share_candidates,
    varied_classes, without_variants, LAYERED,
};
use crate::calibrate::{self, stored_catalogue, PrototypeOptions};
use crate::cli::{self, CalibrateArgs};
use crate::MappingTable;

/// Makes the observer that puts each run's applications into their labelled classes' layers
/// (the agent's `asa_agent::action::oracle_hints::OracleHints`), for the runs of the given
/// catalogue's layer-plan experts. The mapping crate cannot depend on the agent, so the agent
/// binary hands it in.
pub type ObserverFactory = Box<dyn FnOnce(&Catalogue) -> Box<dyn RunObserver>>;

/// The candidate catalogue of a calibration folder: `DIR/candidates.toml`.
pub fn candidates_path(dir: &Path) -> PathBuf {
    dir.join("candidates.toml")
}

/// The reference plan of stage layers and the rows it comes from: `--layer-base`'s `[[layer]]`
/// rows over ASA's default plan, or the default plan and no rows.
fn base_plan(args: &CalibrateArgs) -> Result<(LayerPlan, Vec<crate::LayerRow>)> {
    let default = asa_layers::default_plan();
    let Some(path) = &args.layer_base else {
        return Ok((default, Vec::new()));
    };
    let table = MappingTable::load(path).map_err(|e| {
        anyhow::anyhow!("--layer-base: {e} (give the mapping.toml of an earlier stage layers)")
    })?;
    if table.layers.is_empty() {
        bail!(
            "--layer-base {}: the table has no [[layer]] rows, so its plan is the default one: \
             leave the flag out, or give the mapping.toml of an earlier stage layers",
            path.display()
        );
    }
    let plan = table.layer_plan(&default, &path.display().to_string())?;
    Ok((plan, table.layers))
}

/// `asa calibrate --stage layers`.
pub(crate) fn layers_stage(args: &CalibrateArgs, hints: Option<ObserverFactory>) -> Result<()> {
    let (plan, base_rows) = base_plan(args)?;
    if args.candidates_only {
        return write_candidates(args, &plan);
    }
    let (sets, catalogue, classes) = if args.from_results.is_empty() {
        measure(args, &plan, hints)?
    } else {
        recorded(args, &plan)?
    };
    let opts = PrototypeOptions {
        stay: args.stay.clone(),
        noise_floor: args.noise_floor,
        scheme: args.classes,
        min_gain: args.min_gain,
        across_boots: true,
    };
    let (table, report) = layers_table(
        &sets,
        &catalogue,
        &plan,
        &base_rows,
        &classes,
        &opts,
        cli::now_utc(),
    )?;
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    let table_path = args.dir.join("mapping.toml");
    cli::write(&table_path, &table.to_toml()?)?;
    let report_path = args.dir.join("calibration.md");
    cli::write(&report_path, &report)?;
    print!("{}", table.render());
    println!(
        "table: {}  report: {}",
        table_path.display(),
        report_path.display()
    );
    Ok(())
}

/// The whole-machine experts of `--layer-experts`: built-in, `layered` left out (it always
/// runs), repeats and empty names ignored.
fn whole_machine_experts(args: &CalibrateArgs) -> Result<Vec<String>> {
    let builtin = Catalogue::builtin();
    let mut out: Vec<String> = Vec::new();
    for name in args.layer_experts.iter().map(|e| e.trim()) {
        if name.is_empty() || name == LAYERED || out.iter().any(|e| e == name) {
            continue;
        }
        if is_plan_variant(builtin.require(name)?) {
            bail!("--layer-experts {name}: a layer-plan variant is no whole-machine expert");
        }
        out.push(name.to_string());
    }
    Ok(out)
}

/// What stage layers measures: the calibration plan (every selected scenario under `layered`,
/// the candidates where their class has an application, the whole-machine experts), its
/// scenario catalogue text, the candidate catalogue (text and parsed), the classes and their
/// candidates.
struct MeasuringPlan {
    plan: calibrate::CalibrationPlan,
    scenarios_text: String,
    catalogue_text: String,
    catalogue: Catalogue,
    classes: Vec<String>,
    candidates: Vec<super::Candidate>,
}

/// The measuring plan of `args` (checks options only: no kernel, nothing written). A
/// candidate runs only in the scenarios with an application of its class (every scenario for
/// `other`): elsewhere its runs could not change its row ([`super::candidate_skips`]).
fn measuring_plan(args: &CalibrateArgs, plan: &LayerPlan) -> Result<MeasuringPlan> {
    check_slices(&args.layer_slices_us)?;
    let whole = whole_machine_experts(args)?;
    let (mut cal_plan, text) = cli::plan(args, Vec::new(), cli::catalogue_text(args)?)?;
    let scenarios = ScenarioCatalogue::parse(&text, "scenario catalogue")?;
    let present = default_classes(&scenarios, &cal_plan.scenarios, plan)?;
    let classes = if args.layer_classes.is_empty() {
        present.clone()
    } else {
        args.layer_classes.clone()
    };
    let mut cands = candidates(plan, &classes, &args.layer_slices_us)?;
    cands.extend(share_candidates(plan, &classes, &args.layer_shares)?);
    cands.extend(no_preempt_candidates(
        plan,
        &classes,
        &args.layer_no_preempt,
    )?);
    cands.extend(preempt_first_candidates(
        plan,
        &classes,
        &args.layer_preempt_first,
    )?);
    // A class no selected scenario has would get no row: say so before hours of runs.
    if let Some(absent) = classes.iter().find(|c| !present.contains(c)) {
        bail!(
            "--layer-classes {absent}: no selected scenario has an application of that class \
             (theirs: {}); select scenarios that do, or leave it out",
            present.join(", ")
        );
    }
    let catalogue_text = candidate_catalogue(
        asa_experts::catalogue::BUILTIN_CATALOGUE,
        &whole,
        &plan_changes(plan),
        &cands,
    )?;
    let catalogue = Catalogue::parse(&catalogue_text, "the candidate catalogue")?;
    cal_plan.experts = std::iter::once(LAYERED.to_string())
        .chain(cands.iter().map(|c| c.name.clone()))
        .chain(whole)
        .collect();
    cal_plan.skip = candidate_skips(&scenarios, &cal_plan.scenarios, &cands)?;
    Ok(MeasuringPlan {
        plan: cal_plan,
        scenarios_text: text,
        catalogue_text,
        catalogue,
        classes,
        candidates: cands,
    })
}

/// The plan in a few lines, for the console: classes, candidates with the scenarios each runs
/// in, and the runs saved by running candidates only where their class is.
fn describe_plan(m: &MeasuringPlan) -> String {
    let p = &m.plan;
    let mut out = format!(
        "stage layers: classes {}; {} candidate(s); {} run(s) ({} scenario(s), {} rep(s))",
        m.classes.join(", "),
        m.candidates.len(),
        p.total_runs(),
        p.scenarios.len(),
        p.reps
    );
    let saved = p.saved_runs();
    if saved > 0 {
        out.push_str(&format!(
            ", {saved} saved: a candidate runs only where its class has an application"
        ));
    }
    for c in &m.candidates {
        let where_: Vec<&str> = p
            .scenarios
            .iter()
            .filter(|s| p.experts_for(s).contains(&c.name))
            .map(String::as_str)
            .collect();
        out.push_str(&format!("\n  {}: {}", c.name, where_.join(",")));
    }
    out
}

/// `--candidates-only`: writes `DIR/candidates.toml` and prints the measuring plan.
fn write_candidates(args: &CalibrateArgs, plan: &LayerPlan) -> Result<()> {
    let m = measuring_plan(args, plan)?;
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    let path = candidates_path(&args.dir);
    cli::write(&path, &m.catalogue_text)?;
    println!("{}\ncandidates: {}", describe_plan(&m), path.display());
    Ok(())
}

/// Measures: writes `DIR/candidates.toml`, runs the [`measuring_plan`] with the hints of
/// `hints` (resumable into `DIR/results.json`).
fn measure(
    args: &CalibrateArgs,
    plan: &LayerPlan,
    hints: Option<ObserverFactory>,
) -> Result<(Vec<ResultSet>, Catalogue, Vec<String>)> {
    let m = measuring_plan(args, plan)?;
    let hints = hints.context(
        "stage layers runs the applications in their labelled classes' layers with the agent's \
         hint writer: run it as `asa calibrate --stage layers`, or pass --from-results",
    )?;
    cli::need_sched_ext()?;
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    let path = candidates_path(&args.dir);
    if calibrate::results_path(&args.dir).exists() && path.exists() {
        let written = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        if written != m.catalogue_text {
            bail!(
                "{} holds other candidates than these options give (--layer-classes, \
                 --layer-slices-us, --layer-shares, --layer-no-preempt, --layer-preempt-first, \
                 --layer-experts, --layer-base, --scenarios): rerun with the options its runs were made with, or \
                 calibrate into another --dir",
                path.display()
            );
        }
    }
    cli::write(&path, &m.catalogue_text)?;
    log::info!("{}", describe_plan(&m));
    let mut observer = hints(&m.catalogue);
    let mut switcher = SupervisorSwitcher::system_with(m.catalogue.clone())
        .context("starting the expert supervisor")?;
    let set = calibrate::run_or_resume_observed(
        &args.dir,
        &m.scenarios_text,
        &m.plan,
        &mut switcher,
        observer.as_mut(),
    )?;
    Ok((vec![set], m.catalogue, m.classes))
}

/// Recorded runs (`--from-results`: results files of one machine, from one boot or several)
/// and the candidate catalogue they were measured with, `DIR/candidates.toml`; the classes are `--layer-classes`, else every class a candidate of
/// the catalogue changes alone.
fn recorded(
    args: &CalibrateArgs,
    plan: &LayerPlan,
) -> Result<(Vec<ResultSet>, Catalogue, Vec<String>)> {
    let path = candidates_path(&args.dir);
    if !path.exists() {
        bail!(
            "{} is missing: --from-results reads the candidates' layer policies from the \
             expert catalogue the runs were measured with; copy it there (the candidates.toml \
             `asa calibrate --stage layers` wrote, or the file given to `asa --catalogue` for \
             `asa scenario run --oracle-hints`)",
            path.display()
        );
    }
    let catalogue = Catalogue::load(&path)?;
    check_reference(&catalogue, plan, &path, args.layer_base.as_deref())?;
    let sets = cli::load_results(&args.from_results)?;
    let boots = calibrate::boots_spanned(&sets);
    log::info!(
        "stage layers from {} results file(s), runs from {boots} boot(s){}",
        sets.len(),
        if boots < 2 {
            ": the rows rest on one boot (no verdict across boots)"
        } else {
            ""
        }
    );
    let classes = if args.layer_classes.is_empty() {
        varied_classes(&catalogue, plan)
    } else {
        args.layer_classes.clone()
    };
    if classes.is_empty() {
        bail!(
            "{} has no candidate that changes one class's policy alone: name the classes with \
             --layer-classes",
            path.display()
        );
    }
    Ok((sets, catalogue, classes))
}

/// Checks that the `layered` of the candidate catalogue at `path` runs `plan` (the default
/// plan, or `base`'s rows over it), so that its candidates' changes are read against the plan
/// they were measured beside.
fn check_reference(
    catalogue: &Catalogue,
    plan: &LayerPlan,
    path: &Path,
    base: Option<&Path>,
) -> Result<()> {
    let reference = reference_plan(catalogue).with_context(|| {
        format!(
            "{}: no `{LAYERED}` entry whose policies fit the default plan: give the \
             candidates.toml stage layers wrote",
            path.display()
        )
    })?;
    if &reference == plan {
        return Ok(());
    }
    let describe = |changes: BTreeMap<String, LayerPolicy>| {
        if changes.is_empty() {
            "the default plan".to_string()
        } else {
            format!(
                "the default plan with other policies for {}",
                changes.keys().cloned().collect::<Vec<_>>().join(", ")
            )
        }
    };
    let given = match base {
        Some(b) => format!("--layer-base {}", b.display()),
        None => "no --layer-base".to_string(),
    };
    bail!(
        "{}: its `{LAYERED}` ran {}, but {given} gives {}: pass the --layer-base its \
         candidates were written from (or none if they were made from the default plan)",
        path.display(),
        describe(plan_changes(&reference)),
        describe(plan_changes(plan)),
    )
}

/// The table of stage layers and its report from result sets measured with `catalogue`'s
/// candidates (each run's boot its boot id, else its results file): class rows from the runs
/// of every expert but the candidates (stage prototype's rows, with `opts`, always compared
/// across boots), and one layer row per class of `classes` ([`layer_rows`], the noise floor
/// `opts.noise_floor` or measured), then the rows of `base_rows` (a base table's, whose plan is
/// `plan`) for the classes not calibrated again. The table passes the checks a loaded one gets
/// and lays over `plan`.
pub fn layers_table(
    sets: &[ResultSet],
    catalogue: &Catalogue,
    plan: &LayerPlan,
    base_rows: &[crate::LayerRow],
    classes: &[String],
    opts: &PrototypeOptions,
    created: String,
) -> Result<(MappingTable, String)> {
    let Some(first) = sets.first() else {
        bail!("no result set: nothing to calibrate from");
    };
    let mut left_out = Vec::new();
    let mut boots = calibrate::BootNumbers::default();
    let scenarios = scenario_runs(sets, &mut boots, &mut left_out)?;
    let cal = layer_rows(
        &scenarios,
        &boots,
        catalogue,
        plan,
        classes,
        opts.noise_floor,
    )?;
    let kept: Vec<crate::LayerRow> = base_rows
        .iter()
        .filter(|r| !cal.rows.iter().any(|c| c.class == r.class))
        .cloned()
        .collect();
    let mut rows = cal.rows.clone();
    rows.extend(kept.iter().cloned());
    if !kept.is_empty() {
        let order = plan_classes(plan);
        rows.sort_by_key(|r| order.iter().position(|c| *c == r.class));
    }
    let (whole, stands_for) = calibrated_plan_runs(sets, catalogue, plan, &rows);
    let machine = crate::machine_fingerprint(&first.machine, &Catalogue::builtin());
    let opts = PrototypeOptions {
        across_boots: true,
        ..opts.clone()
    };
    let proto = calibrate::prototype(&whole, machine, created, &opts)?;
    let mut table = proto.table.clone();
    table.source = "layers".into();
    table.layers = rows;
    let table = MappingTable::parse(&table.to_toml()?, "the calibrated table")?;
    table.layer_plan(plan, "the calibrated table")?;
    let mut report = markdown(&cal);
    if !kept.is_empty() {
        report.push_str(&format!(
            "\n## Kept from the base table\n\n`{LAYERED}` ran the base table's plan \
             (--layer-base); these rows were not calibrated again and are kept as they were: {}.\n",
            kept.iter()
                .map(|r| format!("{} ({})", r.class, r.ranked[0].expert))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    report.push_str("\n# Class rows (layered and the whole-machine experts)\n\n");
    report.push_str(&stands_for);
    report.push_str("\n\n");
    report.push_str(&calibrate::markdown(&proto, &whole).replacen(
        "# Mapping calibration, stage 1 (prototype)\n\n",
        "",
        1,
    ));
    Ok((table, report))
}

/// The runs the class rows rank `layered` by: those of the arms that ran the calibrated plan
/// (`plan`, the reference plan `layered` ran, with `rows` laid over it), renamed `layered`
/// (what the agent's `layered` will run), beside the whole-machine experts' runs; the other
/// plan arms' runs are left out. A layer with no application in a scenario schedules nothing
/// there, so in each scenario the calibrated plan is the arm that changed exactly the
/// calibrated layers of that scenario's classes (and `other`, in every scenario): `layered`
/// itself where none of them changed, a candidate where one did — so rows that change two
/// layers, each measured alone, are measured wherever the two never meet. When the rows change
/// no layer, that arm is `layered` everywhere; when a scenario has no arm that ran its part of
/// the calibrated plan (two changed layers meet there), the reference plan's runs stand in
/// everywhere and the returned note says so.
pub fn calibrated_plan_runs(
    sets: &[ResultSet],
    catalogue: &Catalogue,
    plan: &LayerPlan,
    rows: &[asa_mapping_table::LayerRow],
) -> (Vec<ResultSet>, String) {
    let reference = if plan_changes(plan).is_empty() {
        "the default plan"
    } else {
        "the base table's plan"
    };
    let changed: BTreeMap<String, LayerPolicy> = rows
        .iter()
        .filter(|r| super::plan_policy(plan, &r.class) != Some(r.policy))
        .map(|r| (r.class.clone(), r.policy))
        .collect();
    if changed.is_empty() {
        return (
            without_variants(sets, catalogue),
            format!("`layered` here is {reference}, which every layer row kept."),
        );
    }
    let arm_of = |changes: &BTreeMap<String, LayerPolicy>| -> Option<String> {
        if changes.is_empty() {
            return Some(LAYERED.to_string());
        }
        catalogue
            .experts()
            .iter()
            .find(|e| is_plan_variant(e) && changes_from(e, plan) == *changes)
            .map(|e| e.name.clone())
    };
    // Per set, per scenario result: the arm that ran the calibrated plan there.
    let mut arms: Vec<Vec<String>> = Vec::new();
    let mut unmeasured = Vec::new();
    for set in sets {
        let scenarios = stored_catalogue(set, "a result set")
            .ok()
            .or_else(|| ScenarioCatalogue::builtin().ok());
        let mut set_arms = Vec::new();
        for result in &set.scenarios {
            let present = scenarios.as_ref().and_then(|c| {
                let spec = c.scenario(&result.scenario).ok()?;
                scenario_classes(c, spec).ok()
            });
            let here: BTreeMap<String, LayerPolicy> = changed
                .iter()
                .filter(|(class, _)| {
                    *class == asa_layers::OTHER_LAYER
                        || present.as_ref().is_none_or(|p| p.contains(*class))
                })
                .map(|(c, p)| (c.clone(), *p))
                .collect();
            let ran = |arm: &str| {
                result.runs.iter().any(|r| r.expert == arm)
                    || result.skipped.iter().any(|r| r.expert == arm)
            };
            match arm_of(&here).filter(|a| a == LAYERED || ran(a)) {
                Some(arm) => set_arms.push(arm),
                None => {
                    unmeasured.push(result.scenario.clone());
                    set_arms.push(String::new());
                }
            }
        }
        arms.push(set_arms);
    }
    if !unmeasured.is_empty() {
        unmeasured.dedup();
        return (
            without_variants(sets, catalogue),
            format!(
                "The calibrated plan changes the layers {} together, and no arm ran that plan in \
                 {}: `layered` here is {reference} (measure the calibrated plan against the \
                 whole-machine experts to rank it).",
                changed.keys().cloned().collect::<Vec<_>>().join(", "),
                unmeasured.join(", ")
            ),
        );
    }
    // Which arm stood for the plan in which scenarios, for the note.
    let mut by_arm: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (set, set_arms) in sets.iter().zip(&arms) {
        for (result, arm) in set.scenarios.iter().zip(set_arms) {
            let list = by_arm.entry(arm.as_str()).or_default();
            if !list.contains(&result.scenario.as_str()) {
                list.push(result.scenario.as_str());
            }
        }
    }
    let mut parts: Vec<String> = by_arm
        .iter()
        .filter(|(arm, _)| **arm != LAYERED)
        .map(|(arm, scenarios)| format!("`{arm}` ran it ({})", scenarios.join(", ")))
        .collect();
    if let Some(scenarios) = by_arm.get(LAYERED) {
        parts.push(format!(
            "{reference} ran it where no changed layer has an application ({})",
            scenarios.join(", ")
        ));
    }
    let note = format!(
        "`layered` here is the calibrated plan, as {}.",
        parts.join("; ")
    );
    let whole_machine = |name: &str| catalogue.get(name).is_none_or(|e| !e.layer_plan);
    let used: BTreeSet<&str> = arms.iter().flatten().map(String::as_str).collect();
    let sets = sets
        .iter()
        .zip(&arms)
        .map(|(set, set_arms)| {
            let mut set = set.clone();
            let mut experts = Vec::new();
            for e in &set.options.experts {
                let name = if used.contains(e.as_str()) {
                    LAYERED.to_string()
                } else if whole_machine(e) {
                    e.clone()
                } else {
                    continue;
                };
                if !experts.contains(&name) {
                    experts.push(name);
                }
            }
            set.options.experts = experts;
            for (result, arm) in set.scenarios.iter_mut().zip(set_arms) {
                let keep = |name: &str| name == arm || whole_machine(name);
                let rename = |name: &mut String| {
                    if name == arm {
                        *name = LAYERED.to_string();
                    }
                };
                result.runs.retain(|r| keep(&r.expert));
                result.runs.iter_mut().for_each(|r| rename(&mut r.expert));
                result.skipped.retain(|r| keep(&r.expert));
                result
                    .skipped
                    .iter_mut()
                    .for_each(|r| rename(&mut r.expert));
            }
            set
        })
        .collect();
    (sets, note)
}

#[cfg(test)]
mod tests {
    use asa_scenarios::runner::ScenarioResult;
    use clap::Parser;

    use super::*;

    /// The default plan with a network layer that preempts (the default's does not): a class
    /// that gets a no-preemption candidate and no share candidate.
    fn plan_with_preempting_network() -> LayerPlan {
        let plan = asa_layers::default_plan();
        let network = plan
            .classes
            .iter()
            .find(|l| l.class == "network")
            .unwrap()
            .policy;
        let preempting = LayerPolicy {
            preempt: true,
            ..network
        };
        plan.with_policies(&BTreeMap::from([("network".to_string(), preempting)]))
            .unwrap()
    }

    /// The table of `sets` over `classes` with the default plan and options.
    fn default_plan_table(sets: &[ResultSet], classes: &[String]) -> (MappingTable, String) {
        layers_table(
            sets,
            &catalogue(classes),
            &asa_layers::default_plan(),
            &[],
            classes,
            &PrototypeOptions::default(),
            "2026-11-30T00:00:00Z".into(),
        )
        .unwrap()
    }
    use crate::budget::run::fixture::{empty_set, record, SCENARIO};
    use crate::cli::Stage;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        calibrate: CalibrateArgs,
    }

    fn args(words: &[&str]) -> CalibrateArgs {
        let mut all = vec!["calibrate", "--stage", "layers"];
        all.extend(words);
        Cli::try_parse_from(all).unwrap().calibrate
    }

    /// S20 (web: interactive; network load: network) × 4 repetitions; response times in ms.
    fn measured(levels: &[(&str, f64)]) -> ResultSet {
        let experts: Vec<&str> = levels.iter().map(|(e, _)| *e).collect();
        let mut set = empty_set(&experts, 4);
        set.scenarios.push(ScenarioResult {
            scenario: SCENARIO.into(),
            title: "Web Browsing & Network Transfer".into(),
            probe: "web".into(),
            runs: (0..4)
                .flat_map(|rep| {
                    levels
                        .iter()
                        .map(move |(e, ms)| record(e, rep, ms + f64::from(rep)))
                })
                .collect(),
            error: None,
            skipped: Vec::new(),
        });
        set
    }

    /// The candidates.toml text of `classes` with these slices, from the default plan, beside
    /// cosmos.
    fn default_candidates_text(classes: &[String], slices_us: &[u64]) -> String {
        let cands = candidates(&asa_layers::default_plan(), classes, slices_us).unwrap();
        candidate_catalogue(
            asa_experts::catalogue::BUILTIN_CATALOGUE,
            &["cosmos".into()],
            &BTreeMap::new(),
            &cands,
        )
        .unwrap()
    }

    fn catalogue(classes: &[String]) -> Catalogue {
        Catalogue::parse(
            &default_candidates_text(classes, &[2000]),
            "candidates.toml",
        )
        .unwrap()
    }

    /// The 2 ms network candidate answers in 40 ms where layered takes 250: it wins the
    /// network row; the 2 ms interactive candidate is worse, so interactive stays on layered;
    /// the class rows rank layered and cosmos only, `layered` being the calibrated plan (the
    /// network candidate's runs), which beats cosmos (60 ms).
    #[test]
    fn the_table_has_class_rows_of_whole_machine_experts_and_a_layer_row_per_class() {
        let classes: Vec<String> = ["interactive", "network", "other"]
            .iter()
            .map(|c| c.to_string())
            .collect();
        let set = measured(&[
            (LAYERED, 250.0),
            ("layered-network-2ms", 40.0),
            ("layered-interactive-2ms", 300.0),
            ("cosmos", 60.0),
        ]);
        let (table, report) = layers_table(
            &[set],
            &catalogue(&classes),
            &asa_layers::default_plan(),
            &[],
            &classes,
            &PrototypeOptions::default(),
            "2026-11-30T00:00:00Z".into(),
        )
        .unwrap();
        let experts: Vec<&str> = table.classes[0]
            .ranked
            .iter()
            .map(|r| r.expert.as_str())
            .collect();
        assert_eq!(experts, [LAYERED, "cosmos"]);
        assert!(
            report.contains("the calibrated plan, as `layered-network-2ms` ran it (S20)"),
            "{report}"
        );
        let layer_classes: Vec<&str> = table.layers.iter().map(|r| r.class.as_str()).collect();
        assert_eq!(layer_classes, ["interactive", "network", "other"]);
        let network = table.layer("network").unwrap();
        assert_eq!(network.ranked[0].expert, "layered-network-2ms");
        assert_eq!(network.policy.slice_us, 2000);
        assert_eq!(
            table.layer("interactive").unwrap().ranked[0].expert,
            LAYERED
        );
        // No run of the other candidate: layered alone, no margin.
        let other = table.layer("other").unwrap();
        assert_eq!(other.ranked.len(), 1);
        assert_eq!(other.margin, None);
        assert!(report.contains("## Layer network") && report.contains("# Class rows"));
        assert!(table.render().contains("layered-network-2ms"));
    }

    fn row(class: &str, slice_us: u64) -> asa_mapping_table::LayerRow {
        let mut policy = super::super::plan_policy(&asa_layers::default_plan(), class).unwrap();
        policy.slice_us = slice_us;
        asa_mapping_table::LayerRow {
            class: class.into(),
            policy,
            ranked: Vec::new(),
            noise: 0.0,
            margin: None,
            boots: 1,
        }
    }

    /// What `layered`'s runs of the set's `i`th scenario result pinned (the arm they came from).
    fn layered_pinned(set: &ResultSet, i: usize) -> Vec<&str> {
        set.scenarios[i]
            .runs
            .iter()
            .filter(|r| r.expert == LAYERED)
            .map(|r| r.pinned.as_str())
            .collect()
    }

    #[test]
    fn class_rows_rank_the_default_plan_when_no_arm_ran_the_calibrated_plan() {
        let classes: Vec<String> = ["interactive", "network"]
            .iter()
            .map(|c| c.to_string())
            .collect();
        let set = measured(&[
            (LAYERED, 250.0),
            ("layered-network-2ms", 40.0),
            ("layered-interactive-2ms", 45.0),
            ("cosmos", 60.0),
        ]);
        let cat = catalogue(&classes);
        let plan = asa_layers::default_plan();
        let runs_of = |sets: &[ResultSet]| -> Vec<String> {
            sets[0].scenarios[0]
                .runs
                .iter()
                .filter(|r| r.rep == 0)
                .map(|r| r.expert.clone())
                .collect()
        };
        // Both layers changed, each measured alone: the default plan stands in, said so.
        let both = [row("interactive", 2000), row("network", 2000)];
        let (sets, note) = calibrated_plan_runs(std::slice::from_ref(&set), &cat, &plan, &both);
        assert!(note.contains("interactive, network together"), "{note}");
        assert_eq!(runs_of(&sets), [LAYERED, "cosmos"]);
        // No layer changed: the default plan, and its own runs.
        let none = [row("network", 5000)];
        let (sets, note) = calibrated_plan_runs(std::slice::from_ref(&set), &cat, &plan, &none);
        assert!(
            note.contains("default plan, which every layer row kept"),
            "{note}"
        );
        assert_eq!(runs_of(&sets).len(), 2);
        // One layer changed: its arm's runs, renamed.
        let one = [row("network", 2000), row("interactive", 3000)];
        let (sets, _) = calibrated_plan_runs(&[set], &cat, &plan, &one);
        assert_eq!(sets[0].options.experts, [LAYERED, "cosmos"]);
        assert_eq!(runs_of(&sets).len(), 2);
    }

    /// Rows that change two layers, each measured alone, where the two never meet (S20 has a
    /// network application and no cpu_batch one, S1 the reverse): in each scenario `layered`
    /// is the arm that changed its own class's layer, the note names both.
    #[test]
    fn class_rows_take_each_scenarios_arm_where_the_changed_layers_never_meet() {
        let cat = catalogue(&["network".to_string(), "cpu_batch".to_string()]);
        let arms = [
            (LAYERED, 250.0),
            ("layered-network-2ms", 40.0),
            ("layered-cpu_batch-2ms", 300.0),
            ("cosmos", 60.0),
        ];
        let mut set = measured(&arms);
        let mut s1 = set.scenarios[0].clone();
        s1.scenario = "S1".into();
        set.scenarios.push(s1);
        let rows = [row("network", 2000), row("cpu_batch", 2000)];
        let (sets, note) = calibrated_plan_runs(&[set], &cat, &asa_layers::default_plan(), &rows);
        assert!(
            note.contains("`layered-network-2ms` ran it (S20)")
                && note.contains("`layered-cpu_batch-2ms` ran it (S1)"),
            "{note}"
        );
        assert_eq!(sets[0].options.experts, [LAYERED, "cosmos"]);
        let pinned = |i: usize| layered_pinned(&sets[0], i);
        assert_eq!(pinned(0), ["layered-network-2ms"; 4], "S20");
        assert_eq!(pinned(1), ["layered-cpu_batch-2ms"; 4], "S1");
        assert!(sets[0]
            .scenarios
            .iter()
            .flat_map(|s| &s.runs)
            .all(|r| r.expert == LAYERED || r.expert == "cosmos"));
    }

    /// S20 measured in two boots (files) with the network candidate 210 ms faster in both: the
    /// row rests on 2 boots; one file alone gives a row of one boot.
    #[test]
    fn two_results_files_are_two_boots_in_the_rows() {
        let classes: Vec<String> = ["network"].iter().map(|c| c.to_string()).collect();
        let arms = |layered: f64| {
            measured(&[
                (LAYERED, layered),
                ("layered-network-2ms", layered - 210.0),
                ("cosmos", 60.0),
            ])
        };
        let sets = [arms(250.0), arms(270.0)];
        let table = |sets: &[ResultSet]| default_plan_table(sets, &classes);
        let (two, report) = table(&sets);
        let row = two.layer("network").unwrap();
        assert_eq!(
            (row.boots, row.ranked[0].expert.as_str()),
            (2, "layered-network-2ms")
        );
        assert!(report.contains("Boots: 2."), "{report}");
        let (one, report) = table(&sets[..1]);
        assert_eq!(one.layer("network").unwrap().boots, 1);
        assert!(
            report.contains("Boots: 1 — every row rests on one boot"),
            "{report}"
        );
    }

    /// Each run's boot is its boot id: S20's layer row from one folder resumed after a reboot
    /// (repetitions 0–1 in one boot, 2–3 in the next) rests on 2 boots, the report naming
    /// them; the same runs as two files of one boot rest on 1.
    #[test]
    fn a_layer_row_counts_the_boots_of_its_runs_not_its_files() {
        let classes: Vec<String> = ["network"].iter().map(|c| c.to_string()).collect();
        let booted = |ids: [&str; 4]| {
            let mut set = measured(&[
                (LAYERED, 250.0),
                ("layered-network-2ms", 40.0),
                ("cosmos", 60.0),
            ]);
            for run in &mut set.scenarios[0].runs {
                run.boot_id = Some(ids[run.rep as usize].to_string());
            }
            set
        };
        let table = |sets: &[ResultSet]| default_plan_table(sets, &classes);
        let resumed = booted(["aaaaaaaa-1", "aaaaaaaa-1", "bbbbbbbb-2", "bbbbbbbb-2"]);
        let (t, report) = table(&[resumed]);
        assert_eq!(t.layer("network").unwrap().boots, 2);
        assert!(
            report.contains("boot 1: boot id aaaaaaaa; boot 2: boot id bbbbbbbb"),
            "{report}"
        );
        let one_boot = || booted(["aaaaaaaa-1"; 4]);
        let (t, _) = table(&[one_boot(), one_boot()]);
        assert_eq!(t.layer("network").unwrap().boots, 1);
    }

    #[test]
    fn from_results_takes_several_files_comma_separated_or_repeated() {
        let a = args(&["--dir", "d", "--from-results", "a.json,b.json"]);
        assert_eq!(a.from_results, [PathBuf::from("a.json"), "b.json".into()]);
        let a = args(&[
            "--dir",
            "d",
            "--from-results",
            "a.json",
            "--from-results",
            "b.json",
        ]);
        assert_eq!(a.from_results, [PathBuf::from("a.json"), "b.json".into()]);
    }

    /// S1 (game + archive extraction: cpu_batch) and S20 (web + network transfer: network, its
    /// layer preempting here): each class's candidates run only where the class is, `other`'s,
    /// `layered` and cosmos everywhere; cpu_batch (which does not preempt) also gets a share
    /// candidate, network (which does) and `other` (kernel threads) none; network gets one
    /// without preemption;
    /// 4 candidates × 1 scenario × 2 reps saved, and the plan says so.
    #[test]
    fn the_measuring_plan_runs_a_candidate_only_where_its_class_has_an_application() {
        let a = args(&[
            "--dir",
            "d",
            "--scenarios",
            "S1,S20",
            "--layer-classes",
            "cpu_batch,network,other",
            "--layer-slices-us",
            "2000",
        ]);
        let m = measuring_plan(&a, &plan_with_preempting_network()).unwrap();
        let p = &m.plan;
        assert_eq!(
            p.experts,
            [
                LAYERED,
                "layered-cpu_batch-2ms",
                "layered-network-2ms",
                "layered-other-2ms",
                "layered-cpu_batch-share50",
                "layered-network-nopreempt",
                "cosmos"
            ]
        );
        assert_eq!(
            p.experts_for("S1"),
            [
                LAYERED,
                "layered-cpu_batch-2ms",
                "layered-other-2ms",
                "layered-cpu_batch-share50",
                "cosmos"
            ]
        );
        assert_eq!(
            p.experts_for("S20"),
            [
                LAYERED,
                "layered-network-2ms",
                "layered-other-2ms",
                "layered-network-nopreempt",
                "cosmos"
            ]
        );
        assert_eq!((p.total_runs(), p.saved_runs()), (20, 8));
        let text = describe_plan(&m);
        assert!(
            text.contains("20 run(s)") && text.contains("8 saved"),
            "{text}"
        );
        assert!(text.contains("layered-cpu_batch-2ms: S1\n"), "{text}");
        assert!(text.contains("layered-other-2ms: S1,S20"), "{text}");
        assert!(text.contains("layered-cpu_batch-share50: S1\n"), "{text}");
        assert!(text.ends_with("layered-network-nopreempt: S20"), "{text}");
        let share = m
            .candidates
            .iter()
            .find(|c| c.name == "layered-cpu_batch-share50")
            .unwrap();
        assert_eq!(share.policy.kind, asa_layers::LayerKind::Grouped);
        assert_eq!(share.policy.cpus_frac, Some((0.5, 0.5)));
        assert_eq!(share.policy.slice_us, 20_000, "only the CPUs differ");
        let no_shares = measuring_plan(
            &args(&[
                "--dir",
                "d",
                "--scenarios",
                "S1",
                "--layer-classes",
                "cpu_batch",
                "--layer-shares",
            ]),
            &asa_layers::default_plan(),
        )
        .unwrap();
        assert!(no_shares
            .candidates
            .iter()
            .all(|c| !c.name.contains("share")));
    }

    /// The cpu_batch candidate ran S1 only (S20 has no cpu_batch application): the class rows'
    /// `layered` is its runs in S1 and the default plan's in S20, where the candidate's plan
    /// would have run the same.
    #[test]
    fn layered_stands_for_the_calibrated_plan_where_its_arm_did_not_run() {
        let classes: Vec<String> = ["cpu_batch"].iter().map(|c| c.to_string()).collect();
        let text = default_candidates_text(&classes, &[5000]);
        let cat = Catalogue::parse(&text, "candidates.toml").unwrap();
        let mut set = measured(&[(LAYERED, 250.0), ("cosmos", 60.0)]);
        let mut s1 = set.scenarios[0].clone();
        s1.scenario = "S1".into();
        s1.runs
            .iter_mut()
            .filter(|r| r.expert == LAYERED)
            .for_each(|r| {
                r.expert = "layered-cpu_batch-5ms".into();
                r.pinned = r.expert.clone();
            });
        s1.runs.extend(
            set.scenarios[0]
                .runs
                .iter()
                .filter(|r| r.expert == LAYERED)
                .cloned(),
        );
        set.scenarios.push(s1);
        let (sets, note) = calibrated_plan_runs(
            &[set],
            &cat,
            &asa_layers::default_plan(),
            &[row("cpu_batch", 5000)],
        );
        assert!(note.contains("`layered-cpu_batch-5ms` ran it"), "{note}");
        for result in &sets[0].scenarios {
            let layered = result.runs.iter().filter(|r| r.expert == LAYERED).count();
            assert_eq!(
                (result.scenario.as_str(), layered),
                (result.scenario.as_str(), 4)
            );
            assert!(result
                .runs
                .iter()
                .all(|r| r.expert == LAYERED || r.expert == "cosmos"));
        }
        let pinned = |i: usize| layered_pinned(&sets[0], i);
        assert_eq!(pinned(0), [LAYERED; 4], "S20: the default plan's runs");
        assert_eq!(
            pinned(1),
            ["layered-cpu_batch-5ms"; 4],
            "S1: the candidate's runs"
        );
    }

    #[test]
    fn stage_layers_flags_default_to_5_and_2_ms_and_cosmos() {
        let a = args(&["--dir", "d"]);
        assert_eq!(a.stage, Stage::Layers);
        assert_eq!(a.layer_slices_us, [5000, 2000]);
        assert_eq!(a.layer_shares, [0.5]);
        assert_eq!(a.layer_no_preempt, ["io_bound", "network"]);
        assert!(args(&["--dir", "d", "--layer-no-preempt"])
            .layer_no_preempt
            .is_empty());
        assert_eq!(a.layer_experts, ["cosmos"]);
        assert!(a.layer_preempt_first.is_empty());
        assert_eq!(
            args(&["--dir", "d", "--layer-preempt-first", "interactive"]).layer_preempt_first,
            ["interactive"]
        );
        assert!(args(&["--dir", "d", "--layer-shares"])
            .layer_shares
            .is_empty());
        assert!(a.layer_classes.is_empty());
        let a = args(&["--dir", "d", "--layer-classes", "cpu_batch,other"]);
        assert_eq!(a.layer_classes, ["cpu_batch", "other"]);
    }

    #[test]
    fn from_results_without_the_candidate_catalogue_says_what_to_give() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap();
        let e = layers_stage(&args(&["--dir", d, "--from-results", "r.json"]), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("candidates.toml is missing"), "{e}");
        assert!(e.contains("asa --catalogue"), "{e}");
    }

    /// Measuring needs the agent's hint writer; without it nothing is written.
    #[test]
    fn measuring_without_the_hint_writer_is_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("cal");
        let e = layers_stage(&args(&["--dir", d.to_str().unwrap()]), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("hint writer"), "{e}");
        assert!(!d.exists());
    }

    /// S20 has interactive and network applications: a cpu_batch row could never be made.
    #[test]
    fn a_class_no_selected_scenario_has_is_refused_before_measuring() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("cal");
        let words = ["--dir", d.to_str().unwrap(), "--scenarios", "S20"];
        let e = layers_stage(
            &args(&[&words[..], &["--layer-classes", "cpu_batch"]].concat()),
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("cpu_batch") && e.contains("interactive, network, other"),
            "{e}"
        );
        let e = layers_stage(
            &args(&[&words[..], &["--layer-classes", "gpu"]].concat()),
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("\"gpu\" is not in the layer plan"), "{e}");
        assert!(!d.exists());
    }

    /// A base table's row, ranked first by `expert`.
    fn base_row(class: &str, slice_us: u64, expert: &str) -> asa_mapping_table::LayerRow {
        asa_mapping_table::LayerRow {
            ranked: vec![asa_mapping_table::RankedExpert {
                expert: expert.into(),
                score: 0.5,
                spread: 0.0,
                runs: 4,
            }],
            ..row(class, slice_us)
        }
    }

    /// The base table ran interactive at 2 ms: `layered` runs that plan, the 2 ms network
    /// candidate changes network on top of it (its catalogue entry carries both), wins S20, and
    /// the new table holds its row and the base's interactive row, kept and said so.
    #[test]
    fn a_base_table_is_the_reference_and_its_rows_not_calibrated_again_are_kept() {
        let base = [base_row("interactive", 2000, "layered-interactive-2ms")];
        let plan = asa_layers::default_plan()
            .with_policies(&BTreeMap::from([(
                "interactive".to_string(),
                base[0].policy,
            )]))
            .unwrap();
        let classes = vec!["network".to_string()];
        let cands = candidates(&plan, &classes, &[2000]).unwrap();
        let text = candidate_catalogue(
            asa_experts::catalogue::BUILTIN_CATALOGUE,
            &["cosmos".into()],
            &plan_changes(&plan),
            &cands,
        )
        .unwrap();
        let cat = Catalogue::parse(&text, "candidates.toml").unwrap();
        assert_eq!(reference_plan(&cat), Some(plan.clone()));
        assert!(!is_plan_variant(cat.get(LAYERED).unwrap()));
        let cand = cat.get("layered-network-2ms").unwrap();
        assert_eq!(
            cand.layer_policies.len(),
            2,
            "the base's policy and its own"
        );
        assert_eq!(
            changes_from(cand, &plan).into_keys().collect::<Vec<_>>(),
            ["network"]
        );
        assert_eq!(varied_classes(&cat, &plan), ["network"]);
        let set = measured(&[
            (LAYERED, 250.0),
            ("layered-network-2ms", 40.0),
            ("cosmos", 60.0),
        ]);
        let (table, report) = layers_table(
            &[set],
            &cat,
            &plan,
            &base,
            &classes,
            &PrototypeOptions::default(),
            "2026-11-30T00:00:00Z".into(),
        )
        .unwrap();
        let layers: Vec<(&str, u64)> = table
            .layers
            .iter()
            .map(|r| (r.class.as_str(), r.policy.slice_us))
            .collect();
        assert_eq!(layers, [("interactive", 2000), ("network", 2000)]);
        assert_eq!(
            table.layer("network").unwrap().ranked[0].expert,
            "layered-network-2ms"
        );
        assert!(
            report.contains("## Kept from the base table")
                && report.contains("interactive (layered-interactive-2ms)"),
            "{report}"
        );
        assert!(
            report.contains("the calibrated plan, as `layered-network-2ms` ran it (S20)"),
            "{report}"
        );
    }

    /// Rows read from recorded runs against another reference than the candidates were made
    /// from would misread every candidate: refused, naming what each side runs.
    #[test]
    fn recorded_candidates_of_another_reference_plan_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("cal");
        std::fs::create_dir_all(&d).unwrap();
        let text = default_candidates_text(&["network".to_string()], &[2000]);
        std::fs::write(candidates_path(&d), text).unwrap();
        let base = dir.path().join("base.toml");
        let table = MappingTable {
            layers: vec![base_row("interactive", 2000, "layered-interactive-2ms")],
            ..MappingTable::builtin_default().unwrap()
        };
        std::fs::write(&base, table.to_toml().unwrap()).unwrap();
        let words = [
            "--dir",
            d.to_str().unwrap(),
            "--from-results",
            "r.json",
            "--layer-base",
            base.to_str().unwrap(),
        ];
        let e = layers_stage(&args(&words), None).unwrap_err().to_string();
        assert!(
            e.contains("its `layered` ran the default plan")
                && e.contains("other policies for interactive")
                && e.contains("pass the --layer-base"),
            "{e}"
        );
    }

    /// A base table without layer rows, or one that does not load, says what to give.
    #[test]
    fn a_base_table_without_layer_rows_or_unreadable_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain.toml");
        let table = MappingTable::builtin_default().unwrap();
        assert!(table.layers.is_empty());
        std::fs::write(&plain, table.to_toml().unwrap()).unwrap();
        let d = dir.path().join("cal");
        let run = |base: &Path| {
            layers_stage(
                &args(&[
                    "--dir",
                    d.to_str().unwrap(),
                    "--layer-base",
                    base.to_str().unwrap(),
                ]),
                None,
            )
            .unwrap_err()
            .to_string()
        };
        let e = run(&plain);
        assert!(
            e.contains("no [[layer]] rows") && e.contains("leave the flag out"),
            "{e}"
        );
        let e = run(&dir.path().join("missing.toml"));
        assert!(
            e.starts_with("--layer-base: ") && e.contains("missing.toml"),
            "{e}"
        );
        assert!(!d.exists());
    }

    /// `--candidates-only` writes the candidate catalogue from a base table without a kernel:
    /// the share candidate keeps the base's 5 ms cpu_batch slice.
    #[test]
    fn candidates_only_writes_the_catalogue_of_a_base_table_and_runs_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("base.toml");
        let table = MappingTable {
            layers: vec![base_row("cpu_batch", 5000, "layered-cpu_batch-5ms")],
            ..MappingTable::builtin_default().unwrap()
        };
        std::fs::write(&base, table.to_toml().unwrap()).unwrap();
        let d = dir.path().join("cal");
        let words = [
            "--dir",
            d.to_str().unwrap(),
            "--scenarios",
            "S1",
            "--layer-classes",
            "cpu_batch",
            "--layer-slices-us",
            "5000",
            "--layer-base",
            base.to_str().unwrap(),
            "--candidates-only",
        ];
        layers_stage(&args(&words), None).unwrap();
        let cat = Catalogue::load(&candidates_path(&d)).unwrap();
        let names: Vec<&str> = cat.experts().iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            ["eevdf", "cosmos", LAYERED, "layered-cpu_batch-share50"]
        );
        let share = &cat.get("layered-cpu_batch-share50").unwrap().layer_policies["cpu_batch"];
        assert_eq!((share.slice_us, share.cpus_frac), (5000, Some((0.5, 0.5))));
        assert_eq!(
            cat.get(LAYERED).unwrap().layer_policies["cpu_batch"].slice_us,
            5000
        );
        assert!(!calibrate::results_path(&d).exists());
    }
}
