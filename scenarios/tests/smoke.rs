//! Host smoke test: two short scenarios on the current scheduler (EEVDF, no sched_ext on the
//! host) with xz as the background load (xz-utils has Debian priority "required"). Checks that
//! the probes measured something with sane units and that the report holds a number for every
//! cell.

use std::path::Path;
use std::time::Duration;

use asa_scenarios::catalogue::{Catalogue, BUILTIN_SCENARIOS};
use asa_scenarios::probes::ProbeSettings;
use asa_scenarios::runner::{ResultSet, RunOptions};
use asa_scenarios::work::WorkUnit;
use asa_scenarios::{run_scenario, CurrentSchedulerOnly, ExpertSwitcher};

/// The built-in catalogue with a small xz corpus and two smoke scenarios.
fn smoke_catalogue_text() -> String {
    let mut text = BUILTIN_SCENARIOS.replace(
        "prepare = [{ kind = \"text_corpus\", file = \"corpus.txt\", megabytes = 8 }]\ncommand = [\"xz\"",
        "prepare = [{ kind = \"text_corpus\", file = \"corpus.txt\", megabytes = 1 }]\ncommand = [\"xz\"",
    );
    text = text.replace(
        "command = [\"xz\", \"-T0\", \"-3\", \"--block-size=1MiB\", \"-c\", \"{work}/corpus.txt\"]\nrepeat = true\ndiscard_stdout = true\nthroughput = { kind = \"completions\", amount = 8.0",
        "command = [\"xz\", \"-T0\", \"-1\", \"--block-size=1MiB\", \"-c\", \"{work}/corpus.txt\"]\nrepeat = true\ndiscard_stdout = true\nthroughput = { kind = \"completions\", amount = 1.0",
    );
    // Level 1 and 1 MiB: a run takes a fraction of a second even on a busy 2-core machine.
    assert!(
        text.contains("megabytes = 1 }")
            && text.contains("\"-1\"")
            && text.contains("amount = 1.0"),
        "the xz load changed: update the smoke test"
    );
    text.push_str(
        r#"
[[scenario]]
name = "SMOKE-GAME"
title = "Game Play & xz Compression (smoke)"
probe = "game"
load = "xz_compress"

[[scenario]]
name = "SMOKE-WEB"
title = "Web Browsing: idle, then xz Compression (smoke)"
probe = "web"
phase = [{ load = "idle", share = 1.0 }, { load = "xz_compress", share = 1.0 }]
"#,
    );
    text
}

/// Options of a quick run: one repetition, no settle or cooldown, a small work unit.
fn quick_options(experts: &[&str], duration: Duration, work_dir: &Path) -> RunOptions {
    RunOptions {
        experts: experts.iter().map(|e| e.to_string()).collect(),
        reps: 1,
        rotation: 0,
        duration,
        min_phase: Duration::ZERO,
        settle: Duration::ZERO,
        hold: Duration::ZERO,
        dirty_limit_kib: 0,
        cooldown: Duration::ZERO,
        work_dir: work_dir.to_owned(),
        work_unit: WorkUnit::calibrate_with(2, 1.0),
    }
}

/// The fastest of five runs of `ms` of `work`: the least time a probe's work can take.
fn fastest_ms(work: WorkUnit, ms: f64) -> f64 {
    (0..5)
        .map(|_| {
            let t0 = std::time::Instant::now();
            std::hint::black_box(work.spin(ms));
            t0.elapsed().as_secs_f64() * 1e3
        })
        .fold(f64::INFINITY, f64::min)
}

#[test]
fn two_scenarios_on_the_current_scheduler_produce_samples_and_a_full_report() {
    let _ = env_logger::builder().is_test(true).try_init();
    let text = smoke_catalogue_text();
    let cat = Catalogue::parse(&text, "smoke").unwrap();
    let work = tempfile::tempdir().unwrap();
    let opts = RunOptions {
        experts: vec!["eevdf".into()],
        reps: 2,
        rotation: 0,
        duration: Duration::from_secs(2),
        min_phase: Duration::ZERO,
        settle: Duration::from_millis(300),
        hold: Duration::ZERO,
        dirty_limit_kib: 0,
        cooldown: Duration::from_millis(100),
        work_dir: work.path().to_owned(),
        work_unit: WorkUnit::calibrate(),
    };
    let mut switcher = CurrentSchedulerOnly::eevdf().unwrap();
    let mut set = ResultSet::new(opts.clone(), text.clone());
    let mut completed_xz_runs = 0;
    // The web chain's least time, measured before the runs and again after them: the other
    // tests of this binary run loads beside this one, and a floor taken only while they
    // contend the core can be longer than a click measured while they did not.
    let ProbeSettings::Web(w) = &cat.probes["web"].settings else {
        panic!("the web probe's settings are not web settings")
    };
    let chain_ms = w.script_ms + w.worker_ms + w.layout_ms + w.raster_ms;
    let floor_before = fastest_ms(opts.work_unit, chain_ms);
    for name in ["SMOKE-GAME", "SMOKE-WEB"] {
        let s = cat.scenario(name).unwrap();
        let r = run_scenario(&cat, s, &mut switcher, &opts).unwrap();
        assert_eq!(r.runs.len(), 2);
        for run in &r.runs {
            assert!(run.valid);
            // No hold: nothing waited for, the load start still recorded.
            let start = run.load_start.as_ref().unwrap();
            assert_eq!((start.waited_ms, start.disk_quiet), (0, None), "{start:?}");
            assert!(
                (1.5..4.0).contains(&run.probe.elapsed_s),
                "{}",
                run.probe.elapsed_s
            );
            for (series, xs) in &run.probe.samples {
                if series == "tick_ms" || series.ends_with("_ms") {
                    assert!(!xs.is_empty(), "{name}: empty {series}");
                    // Milliseconds: non-negative, and below the run length.
                    assert!(
                        xs.iter().all(|x| (0.0..4000.0).contains(x)),
                        "{name}: {series} {xs:?}"
                    );
                }
            }
            let last = run.phases.last().unwrap().output.as_ref().unwrap();
            assert_eq!(last.unit, "MiB/s");
            assert_eq!(last.failed_runs, 0, "{:?}", last.last_error);
            assert!(last.throughput.is_some(), "{last:?}");
            completed_xz_runs += last.completed_runs;
        }
        let game = &r.runs[0].probe.summary;
        if name == "SMOKE-GAME" {
            assert!(game["fps"] > 5.0 && game["fps"] < 61.0, "{game:?}");
            assert!(game["frame_time_p50_ms"] >= 16.0, "{game:?}");
        } else {
            // A click's chain does script, worker, layout and raster work in turn. Compared
            // with the unit's fastest run of that work, not with its nominal milliseconds: the
            // tests beside this one may have contended the calibration, which makes its
            // milliseconds short on a free core. Half the floor: a probe that skipped its work
            // answers in well under a millisecond, one that did it cannot beat the floor by 2x.
            let floor = floor_before.min(fastest_ms(opts.work_unit, chain_ms));
            let p50 = game["response_p50_ms"];
            assert!(p50 >= 0.5 * floor, "{p50} ms, work {floor} ms: {game:?}");
        }
        set.scenarios.push(r);
    }

    assert!(completed_xz_runs > 0, "xz never finished a run");

    let out = tempfile::tempdir().unwrap();
    set.save(&out.path().join("results.json")).unwrap();
    let reloaded = ResultSet::load(&out.path().join("results.json")).unwrap();
    let report = asa_scenarios::report::write_report(&reloaded, "eevdf", out.path()).unwrap();
    for s in ["SMOKE-GAME", "SMOKE-WEB"] {
        let score = report.means[s]["eevdf"];
        assert!((0.0..=1.0).contains(&score), "{s}: {score}");
    }
    let eevdf = &report.ranking[0];
    assert_eq!(
        eevdf.top1,
        Some(1.0),
        "a single expert is always the oracle"
    );
    for f in [
        "report.md",
        "report.json",
        "heatmap.svg",
        "dist-frame_time_ms.svg",
        "dist-response_ms.svg",
    ] {
        let body = std::fs::read_to_string(out.path().join(f)).unwrap();
        assert!(!body.is_empty(), "{f}");
    }
    let md = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    assert!(!md.contains("| n/a"), "every cell holds a number:\n{md}");
}

#[test]
fn missing_tool_fails_the_scenario_naming_the_package() {
    let text = smoke_catalogue_text().replace(
        "command = [\"xz\", \"-T0\"",
        "command = [\"asa-test-no-such-xz\", \"-T0\"",
    );
    let cat = Catalogue::parse(&text, "smoke").unwrap();
    let work = tempfile::tempdir().unwrap();
    let opts = quick_options(&["eevdf"], Duration::from_millis(200), work.path());
    let mut switcher = CurrentSchedulerOnly::eevdf().unwrap();
    let err = run_scenario(
        &cat,
        cat.scenario("SMOKE-GAME").unwrap(),
        &mut switcher,
        &opts,
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("asa-test-no-such-xz") && err.contains("xz-utils"),
        "{err}"
    );
}

#[test]
fn current_scheduler_switcher_refuses_other_experts() {
    let mut s = CurrentSchedulerOnly::eevdf().unwrap();
    assert_eq!(s.pin("eevdf").unwrap(), "eevdf");
    let err = s.pin("lavd").unwrap_err().to_string();
    assert!(err.contains("lavd") && err.contains("sched_ext"), "{err}");
}

#[test]
fn a_load_failing_mid_run_stops_the_run_with_its_output() {
    let mut text = smoke_catalogue_text();
    text.push_str(
        r#"
[load.always_fails]
description = "a tool that fails at once"
package = "dash"
command = ["sh", "-c", "echo broken-tool-output >&2; exit 3"]
repeat = true
throughput = { kind = "completions", amount = 1.0, unit = "runs" }
score = { direction = "higher", theta = "median", scale = "theta", k_v = 4.0, gamma_v = 1.0, weight = 1.0 }
app_class = "cpu_batch"

[[scenario]]
name = "SMOKE-FAIL"
title = "Audio: idle, then a failing load"
probe = "audio"
phase = [{ load = "idle", share = 1.0 }, { load = "always_fails", share = 1.0 }]
"#,
    );
    let cat = Catalogue::parse(&text, "smoke").unwrap();
    let work = tempfile::tempdir().unwrap();
    let opts = quick_options(&["eevdf"], Duration::from_secs(2), work.path());
    let mut switcher = CurrentSchedulerOnly::eevdf().unwrap();
    let t0 = std::time::Instant::now();
    let err = run_scenario(
        &cat,
        cat.scenario("SMOKE-FAIL").unwrap(),
        &mut switcher,
        &opts,
    )
    .unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains("always_fails") && msg.contains("broken-tool-output"),
        "{msg}"
    );
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
}

#[test]
fn an_expert_that_cannot_be_pinned_is_skipped_and_reported() {
    let text = smoke_catalogue_text();
    let cat = Catalogue::parse(&text, "smoke").unwrap();
    let work = tempfile::tempdir().unwrap();
    let opts = quick_options(&["eevdf", "lavd"], Duration::from_secs(1), work.path());
    let mut switcher = CurrentSchedulerOnly::eevdf().unwrap();
    let r = run_scenario(
        &cat,
        cat.scenario("SMOKE-GAME").unwrap(),
        &mut switcher,
        &opts,
    )
    .unwrap();
    assert_eq!(r.runs.len(), 1);
    assert_eq!(r.runs[0].expert, "eevdf");
    assert_eq!(r.skipped.len(), 1);
    assert_eq!(r.skipped[0].expert, "lavd");
    assert!(
        r.skipped[0].reason.contains("sched_ext"),
        "{}",
        r.skipped[0].reason
    );

    let mut set = ResultSet::new(opts, text);
    set.scenarios.push(r);
    let report = asa_scenarios::report::build_report(&set, "eevdf").unwrap();
    let md = asa_scenarios::report::markdown(&report, &set);
    assert!(
        md.contains("Runs skipped") && md.contains("SMOKE-GAME lavd rep 1"),
        "{md}"
    );
    let lavd = report.ranking.iter().find(|e| e.expert == "lavd").unwrap();
    assert_eq!(lavd.mean_score, None);
    assert!(asa_scenarios::report::heatmap_svg(&report).contains("n/a"));
}

/// The current scheduler, reported as freshly in place at every pin (as a switch to a new
/// expert would be).
struct FreshAtEveryPin {
    inner: CurrentSchedulerOnly,
    since: Option<u64>,
    loads_started: u32,
}

impl ExpertSwitcher for FreshAtEveryPin {
    fn pin(&mut self, expert: &str) -> anyhow::Result<String> {
        let pinned = self.inner.pin(expert)?;
        self.since = Some(asa_experts::supervisor::unix_ms(
            std::time::SystemTime::now(),
        ));
        Ok(pinned)
    }
    fn still_pinned(&mut self, expert: &str) -> anyhow::Result<bool> {
        self.inner.still_pinned(expert)
    }
    fn release(&mut self) -> anyhow::Result<()> {
        self.inner.release()
    }
    fn scheduler_since(&self) -> Option<u64> {
        self.since
    }
    fn load_starting(&mut self) {
        self.loads_started += 1;
    }
}

/// With a hold, each run's load starts only once the scheduler has run that long, and the run
/// records its load start: the scheduler's age, the quiet time since the last load stopped and
/// the dirty pages.
#[test]
fn a_run_starts_its_load_once_the_scheduler_has_held() {
    let _ = env_logger::builder().is_test(true).try_init();
    let text = smoke_catalogue_text();
    let cat = Catalogue::parse(&text, "smoke").unwrap();
    let work = tempfile::tempdir().unwrap();
    let mut opts = quick_options(&["eevdf"], Duration::from_millis(500), work.path());
    opts.reps = 2;
    opts.hold = Duration::from_millis(1500);
    // Not this host's other writers' pages: the wait for them is the fake machine's test.
    opts.dirty_limit_kib = u64::MAX;
    let mut switcher = FreshAtEveryPin {
        inner: CurrentSchedulerOnly::eevdf().unwrap(),
        since: None,
        loads_started: 0,
    };
    let r = run_scenario(
        &cat,
        cat.scenario("SMOKE-GAME").unwrap(),
        &mut switcher,
        &opts,
    )
    .unwrap();
    assert_eq!(switcher.loads_started, 2);
    for (i, run) in r.runs.iter().enumerate() {
        let start = run.load_start.as_ref().expect("a load start record");
        assert!(start.scheduler_since_known);
        assert!(start.scheduler_age_ms >= 1500, "{start:?}");
        // The pin set `since` just before the wait: sync(), the dirty pages (no limit here) and
        // the hold together took about the hold (sync() alone may take it all on a busy host).
        assert!(start.waited_ms >= 1400, "{start:?}");
        assert_eq!(
            start.waited_ms,
            start.sync_ms + start.dirty_wait_ms + start.hold_wait_ms
        );
        assert!(start.dirty_writeback_kib.is_some(), "{start:?}");
        assert!(start.disk_quiet.is_some(), "{start:?}");
        assert!(run.phases[0].started_unix_ms >= start.scheduler_since_unix_ms + 1500);
        if i == 1 {
            // The first run's load had stopped (the quiet time is the process's: the other
            // tests of this file run loads beside this one).
            assert!(start.quiet_ms.is_some(), "{start:?}");
        }
    }
}
