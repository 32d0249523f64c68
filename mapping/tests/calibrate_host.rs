//! Host test of calibration (stage 1) on real scenario runs. The host has no sched_ext, so the
//! two "experts" are the kernel's own scheduler alone (`eevdf`) and the same scheduler with a
//! CPU hog competing with the probe (`hog`, a stand-in for a bad expert): the calibrated table
//! must rank `eevdf` first for every class, measure a noise floor from the repetitions, and a
//! calibration interrupted after one scenario must resume without re-running it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Result;
use asa_mapping::calibrate::{self, CalibrationPlan, PrototypeOptions};
use asa_scenarios::ExpertSwitcher;

mod common;
use common::calibration_catalogue_text;

/// The tests of this file run real probes against real hogs: one test's hogs would disturb the
/// other's EEVDF runs (seen in `make test`: EEVDF's game score spread 0.198 over two runs, the
/// hog's lead lost in it), so they take turns.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// `eevdf`: nothing added. `hog`: one busy thread per CPU at the probe's priority while pinned.
#[derive(Default)]
struct HogSwitcher {
    pins: Vec<String>,
    hogs: Vec<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
}

impl HogSwitcher {
    fn stop_hogs(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.hogs.drain(..) {
            h.join().unwrap();
        }
        self.stop = Arc::new(AtomicBool::new(false));
    }
}

impl ExpertSwitcher for HogSwitcher {
    fn pin(&mut self, expert: &str) -> Result<String> {
        self.stop_hogs();
        self.pins.push(expert.to_string());
        if expert == "hog" {
            let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
            for _ in 0..cpus * 2 {
                let stop = self.stop.clone();
                self.hogs.push(std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                }));
            }
        }
        Ok(expert.to_string())
    }

    fn still_pinned(&mut self, _expert: &str) -> Result<bool> {
        Ok(true)
    }

    fn release(&mut self) -> Result<()> {
        self.stop_hogs();
        Ok(())
    }
}

fn plan(scenarios: &[&str], reps: u32, work: &std::path::Path) -> CalibrationPlan {
    CalibrationPlan {
        scenarios: scenarios.iter().map(|s| s.to_string()).collect(),
        experts: vec!["eevdf".into(), "hog".into()],
        reps,
        duration: Duration::from_secs(2),
        min_phase: Duration::ZERO,
        settle: Duration::from_millis(300),
        hold: Duration::ZERO,
        cooldown: Duration::from_millis(100),
        work_dir: work.to_owned(),
        skip: Default::default(),
    }
}

#[test]
fn calibration_ranks_the_better_scheduler_first_and_resumes() {
    let _turn = one_at_a_time();
    let _ = env_logger::builder().is_test(true).try_init();
    let text = calibration_catalogue_text();
    let dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();

    // "Interrupted" after the first scenario: only CAL-GAME is measured.
    let mut first = HogSwitcher::default();
    let set = calibrate::run_or_resume(
        dir.path(),
        &text,
        &plan(&["CAL-GAME"], 2, work.path()),
        &mut first,
    )
    .unwrap();
    assert_eq!(set.scenarios.len(), 1);
    // The work-unit calibration pin, then 2 reps × 2 experts.
    assert_eq!(first.pins.len(), 1 + 4, "{:?}", first.pins);
    // Scenario 0: the experts in order, then rotated by one for the second repetition.
    assert_eq!(first.pins[1..], ["eevdf", "hog", "hog", "eevdf"]);

    // Rerun with the whole plan: CAL-GAME is kept, only CAL-AUDIO runs.
    let mut second = HogSwitcher::default();
    let set = calibrate::run_or_resume(
        dir.path(),
        &text,
        &plan(&["CAL-GAME", "CAL-AUDIO"], 2, work.path()),
        &mut second,
    )
    .unwrap();
    assert_eq!(second.pins.len(), 4, "{:?}", second.pins);
    // Scenario 1 starts one further on: no expert always runs first after the set-up.
    assert_eq!(second.pins, ["hog", "eevdf", "eevdf", "hog"]);
    let names: Vec<&str> = set.scenarios.iter().map(|s| s.scenario.as_str()).collect();
    assert_eq!(names, ["CAL-GAME", "CAL-AUDIO"]);

    // Other options on the same folder are refused, with advice.
    let err = calibrate::run_or_resume(
        dir.path(),
        &text,
        &plan(&["CAL-GAME"], 3, work.path()),
        &mut HogSwitcher::default(),
    )
    .unwrap_err();
    assert!(format!("{err:#}").contains("other options"), "{err:#}");

    // A folder of an older results version is not resumed into, nor pooled with this one.
    let path = calibrate::results_path(dir.path());
    let text_v2 = std::fs::read_to_string(&path).unwrap();
    let version = format!("\"version\": {}", asa_scenarios::runner::RESULTS_VERSION);
    assert!(text_v2.contains(&version), "{version}");
    std::fs::write(&path, text_v2.replace(&version, "\"version\": 1")).unwrap();
    let err = calibrate::run_or_resume(
        dir.path(),
        &text,
        &plan(&["CAL-GAME", "CAL-AUDIO"], 2, work.path()),
        &mut HogSwitcher::default(),
    )
    .unwrap_err();
    assert!(format!("{err:#}").contains("results version 1"), "{err:#}");
    let older = asa_scenarios::runner::ResultSet::load(&path).unwrap();
    let err = calibrate::check_same_version(
        &[set.clone(), older],
        &["new.json".into(), "old.json".into()],
    )
    .unwrap_err();
    assert!(
        format!("{err:#}").contains("old.json holds results version 1"),
        "{err:#}"
    );
    std::fs::write(&path, text_v2).unwrap();

    let machine =
        asa_mapping::machine_fingerprint(&set.machine, &asa_experts::Catalogue::builtin());
    let proto = calibrate::prototype(
        std::slice::from_ref(&set),
        machine,
        "2026-11-22T00:00:00Z".into(),
        &PrototypeOptions::default(),
    )
    .unwrap();
    assert!(proto.noise.source.contains("2+ runs"), "{:?}", proto.noise);
    assert!(proto.noise.floor.is_finite() && proto.noise.floor >= 0.0);
    let classes: Vec<&str> = proto
        .table
        .classes
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(classes, ["audio+xz_compress", "game+xz_compress"]);
    for class in &proto.table.classes {
        assert_eq!(class.ranked[0].expert, "eevdf", "{}", proto.table.render());
        assert!(class.ranked.iter().all(|r| r.runs == 2));
    }
    // The probes felt the hog: the game's score dropped by more than the noise.
    let game = proto
        .evidence
        .iter()
        .find(|e| e.class == "game+xz_compress")
        .unwrap();
    let score = |expert: &str| game.cells.iter().find(|c| c.expert == expert).unwrap().mean;
    assert!(
        score("eevdf") - score("hog") > game.threshold,
        "{}",
        calibrate::markdown(&proto, std::slice::from_ref(&set))
    );
    let report = calibrate::markdown(&proto, std::slice::from_ref(&set));
    assert!(
        report.contains("| game+xz_compress | CAL-GAME | eevdf |"),
        "{report}"
    );
}

/// Stage 3's comparison on real runs: `asa` (here a stand-in that adds nothing, like `eevdf`)
/// is compared with the static set; the hog is never the oracle nor ahead of it, and the
/// refinement ranks the static experts only.
#[test]
fn the_live_summary_compares_the_agent_with_the_static_experts() {
    let _turn = one_at_a_time();
    use asa_mapping::live::{self, AGENT};
    let text = calibration_catalogue_text();
    let dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mut plan = plan(&["CAL-GAME"], 1, work.path());
    plan.experts.push(AGENT.into());
    let set =
        calibrate::run_or_resume(dir.path(), &text, &plan, &mut HogSwitcher::default()).unwrap();
    let logs = dir.path().join("agent");
    std::fs::create_dir_all(&logs).unwrap();
    // The stand-in agent's "decision log", started before its run.
    let started = set.scenarios[0]
        .runs
        .iter()
        .find(|r| r.expert == AGENT)
        .unwrap()
        .started_unix_ms;
    std::fs::write(
        logs.join(format!("agent-{}.jsonl", started - 500)),
        "{\"voted_class\":\"xz_compress\",\"target_expert\":\"bpfland\",\"outcome\":\"switched\"}\n",
    )
    .unwrap();
    let summary = live::live_summary(&set, "eevdf", &logs, None).unwrap();
    assert_eq!(summary.experts, ["eevdf", "hog"]);
    let s = &summary.scenarios[0];
    assert_eq!(s.oracle.as_ref().unwrap().0, "eevdf", "{summary:#?}");
    assert!(s.agent_rank.unwrap() <= 1, "{summary:#?}");
    assert_eq!(summary.top3, Some(1.0));
    let wl = summary.vs_baseline;
    assert_eq!(wl.wins + wl.ties + wl.losses, 1);
    assert_eq!(s.traces.len(), 1);
    assert_eq!(s.traces[0].switches, ["bpfland"]);
    // One repetition: the verdicts use the default noise floor, and every cell has one run.
    let noise = summary.noise.as_ref().unwrap();
    assert_eq!(noise.floor, asa_mapping::calibrate::DEFAULT_NOISE_FLOOR);
    assert_eq!(s.cells[AGENT].runs, 1);
    assert!(s.agent_vs_baseline.is_some(), "{summary:#?}");
    let n = summary.agent_beyond_noise;
    assert_eq!(n.wins + n.ties + n.losses, 1);
    // One repetition: no held-out oracle, and the report says so instead of a number.
    assert_eq!(s.held_out_oracle, None);
    assert_eq!(summary.held_out, None);
    let md = live::markdown(&summary, &set, "");
    assert!(
        md.contains("| CAL-GAME |") && md.contains("bpfland") && md.contains("Beyond the noise"),
        "{md}"
    );
    assert!(md.contains("**Held-out oracle**: not defined"), "{md}");

    let statics = live::static_runs(&set);
    assert_eq!(statics.options.experts, ["eevdf", "hog"]);
    let machine =
        asa_mapping::machine_fingerprint(&set.machine, &asa_experts::Catalogue::builtin());
    let proto = calibrate::prototype(
        std::slice::from_ref(&set),
        machine,
        "2026-11-23T00:00:00Z".into(),
        &PrototypeOptions::default(),
    )
    .unwrap();
    assert!(proto.table.classes[0]
        .ranked
        .iter()
        .all(|r| r.expert != AGENT));
}

/// `asa calibrate ...` as the binary parses it (the agent flattens the same arguments).
#[derive(clap::Parser)]
struct Calibrate {
    #[command(flatten)]
    args: asa_mapping::cli::CalibrateArgs,
}

fn calibrate_args(words: &[&str]) -> asa_mapping::cli::CalibrateArgs {
    use clap::Parser;
    Calibrate::parse_from(std::iter::once("calibrate").chain(words.iter().copied())).args
}

/// The files the live stage writes after its runs, `mapping.toml` without its `created` stamp
/// (when the refined table was made: each rendering makes it anew).
fn live_files(dir: &std::path::Path) -> [String; 3] {
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
    let table = read("mapping.toml")
        .lines()
        .filter(|l| !l.starts_with("created = "))
        .map(|l| format!("{l}\n"))
        .collect();
    [read("live.md"), read("live.json"), table]
}

/// `--report-only` rewrites live.md, live.json and mapping.toml of a finished live folder (its
/// results.json and agent/ logs) exactly as the run wrote them, without running anything; a
/// folder measured with other options, or lacking a scenario asked for, is refused and left
/// as it was.
#[test]
fn report_only_rewrites_a_finished_live_run_as_the_run_wrote_it() {
    let _turn = one_at_a_time();
    let _ = env_logger::builder().is_test(true).try_init();
    use asa_mapping::cli;
    use asa_mapping::live::AGENT;
    let dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let inputs = tempfile::tempdir().unwrap();
    let catalogue = inputs.path().join("scenarios.toml");
    std::fs::write(&catalogue, calibration_catalogue_text()).unwrap();
    let table = inputs.path().join("table.toml");
    std::fs::write(&table, asa_mapping::DEFAULT_TABLE).unwrap();
    let (dir_s, work_s) = (dir.path().to_str().unwrap(), work.path().to_str().unwrap());
    let (catalogue_s, table_s) = (catalogue.to_str().unwrap(), table.to_str().unwrap());
    // The run's arguments, `changed` replacing some values, and `flags`.
    let args = |changed: &[(&str, &str)], flags: &[&str]| {
        let mut words: Vec<(&str, &str)> = vec![
            ("--stage", "live"),
            ("--dir", dir_s),
            ("--table", table_s),
            ("--catalogue", catalogue_s),
            ("--work-dir", work_s),
            ("--scenarios", "CAL-GAME"),
            ("--experts", "eevdf,bpfland"),
            ("--classes", "load"),
            ("--reps", "2"),
            ("--duration", "2"),
            ("--settle", "0.3"),
            ("--hold", "0"),
            ("--cooldown", "0.1"),
        ];
        for (key, value) in changed {
            words.iter_mut().find(|(k, _)| k == key).unwrap().1 = value;
        }
        let mut words: Vec<&str> = words.into_iter().flat_map(|(k, v)| [k, v]).collect();
        words.extend(flags);
        calibrate_args(&words)
    };

    // The run, with the stage's own plan and a stand-in agent (the host has no sched_ext): two
    // repetitions, so the report states a held-out oracle.
    let run = args(&[], &["--no-dry-run"]);
    let (plan, text) = cli::live_plan(&run).unwrap();
    assert_eq!(plan.experts, ["eevdf", "bpfland", AGENT]);
    let set =
        calibrate::run_or_resume(dir.path(), &text, &plan, &mut HogSwitcher::default()).unwrap();
    let logs = dir.path().join("agent");
    std::fs::create_dir_all(&logs).unwrap();
    for r in set.scenarios[0].runs.iter().filter(|r| r.expert == AGENT) {
        std::fs::write(
            logs.join(format!("agent-{}.jsonl", r.started_unix_ms - 500)),
            "{\"voted_class\":\"xz_compress\",\"target_expert\":\"bpfland\",\"outcome\":\"switched\"}\n",
        )
        .unwrap();
    }
    cli::live_report(&run, &set).unwrap();
    let written = live_files(dir.path());
    assert!(written[0].contains("**Held-out oracle**"), "{}", written[0]);
    assert!(written[0].contains("## Refined table"), "{}", written[0]);

    // The report files gone, then re-rendered from results.json and agent/ alone.
    for name in ["live.md", "live.json", "mapping.toml"] {
        std::fs::remove_file(dir.path().join(name)).unwrap();
    }
    cli::calibrate_command(&args(&[], &["--no-dry-run", "--report-only"])).unwrap();
    let rendered = live_files(dir.path());
    assert_eq!(rendered[0], written[0], "live.md");
    assert_eq!(rendered[1], written[1], "live.json");
    assert_eq!(rendered[2], written[2], "mapping.toml");
    assert!(std::fs::read_to_string(dir.path().join("mapping.toml"))
        .unwrap()
        .contains("source = \"live\""));

    // Other options than the run's: refused, the report left as it was.
    let refused = |changed: &[(&str, &str)], flags: &[&str]| {
        let err = cli::calibrate_command(&args(changed, flags)).unwrap_err();
        format!("{err:#}")
    };
    let only = ["--no-dry-run", "--report-only"];
    let err = refused(&[("--reps", "3")], &only);
    assert!(err.contains("other options"), "{err}");
    // A run measured without the hold before its loads is not re-rendered as one with it.
    let err = refused(&[("--hold", "30")], &only);
    assert!(
        err.contains("other options") && err.contains("hold 0ns"),
        "{err}"
    );
    // Phases stretched to a minimum change every phased scenario's runs.
    let err = refused(&[], &["--no-dry-run", "--report-only", "--min-phase", "1"]);
    assert!(err.contains("min-phase 0ns"), "{err}");
    let err = refused(&[("--scenarios", "CAL-GAME,CAL-AUDIO")], &only);
    assert!(err.contains("no results for CAL-AUDIO"), "{err}");
    let err = refused(&[], &["--report-only"]);
    assert!(
        err.contains("without the `asa run --dry-run` column"),
        "{err}"
    );
    assert_eq!(live_files(dir.path()), rendered);
}

/// A folder without results.json: one error naming the missing file and what to do, and
/// nothing written.
#[test]
fn report_only_without_results_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = tempfile::tempdir().unwrap();
    let table = inputs.path().join("table.toml");
    std::fs::write(&table, asa_mapping::DEFAULT_TABLE).unwrap();
    let args = calibrate_args(&[
        "--stage",
        "live",
        "--report-only",
        "--dir",
        dir.path().to_str().unwrap(),
        "--table",
        table.to_str().unwrap(),
    ]);
    let err = format!(
        "{:#}",
        asa_mapping::cli::calibrate_command(&args).unwrap_err()
    );
    assert!(
        err.contains(&format!(
            "{} is missing",
            dir.path().join("results.json").display()
        )) && err.contains("without --report-only"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// Counts what a run observer hears (`--retrain`'s feature recorder in the real calibration).
#[derive(Default)]
struct Heard {
    started: Vec<(String, String, u32)>,
    finished: usize,
}

impl asa_scenarios::runner::RunObserver for Heard {
    fn run_starting(
        &mut self,
        scenario: &asa_scenarios::catalogue::ScenarioSpec,
        expert: &str,
        rep: u32,
    ) -> Result<()> {
        self.started
            .push((scenario.name.clone(), expert.to_string(), rep));
        Ok(())
    }
    fn run_finished(
        &mut self,
        _: &asa_scenarios::catalogue::ScenarioSpec,
        record: Option<&asa_scenarios::runner::RunRecord>,
    ) -> Result<()> {
        assert!(record.is_some(), "a run failed");
        self.finished += 1;
        Ok(())
    }
}

/// `--retrain` records every run of a budgeted calibration as of a fixed one: the observer hears
/// each run the result set holds begin and end, once.
#[test]
fn the_budgeted_calibration_tells_the_observer_of_every_run() {
    let _turn = one_at_a_time();
    let _ = env_logger::builder().is_test(true).try_init();
    let text = calibration_catalogue_text();
    let dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mut heard = Heard::default();
    let opts = asa_mapping::budget::run::BudgetOptions {
        budget: None,
        min_gain: asa_mapping::budget::DEFAULT_MIN_GAIN,
        noise_floor: None,
        experts: vec!["eevdf".into(), "hog".into()],
    };
    let (set, _) = calibrate::run_budgeted_observed(
        dir.path(),
        &text,
        &plan(&["CAL-GAME"], 2, work.path()),
        calibrate::ClassScheme::Load,
        &opts,
        &mut HogSwitcher::default(),
        &mut heard,
    )
    .unwrap();
    let mut runs: Vec<(String, String, u32)> = set
        .scenarios
        .iter()
        .flat_map(|s| {
            s.runs
                .iter()
                .map(move |r| (s.scenario.clone(), r.expert.clone(), r.rep))
        })
        .collect();
    // The warm-up: every expert twice.
    assert_eq!(runs.len(), 4, "{runs:?}");
    heard.started.sort();
    runs.sort();
    assert_eq!(heard.started, runs);
    assert_eq!(heard.finished, 4);
}
