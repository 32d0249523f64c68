//! [`FeatureRecorder`]: runs `asa record` beside every scenario run, then labels the run's
//! rows ([`super::relabel`]) and lists the run in the dataset's manifest.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{anyhow, bail, Context, Result};
use log::{info, warn};

use crate::catalogue::ScenarioSpec;
use crate::runner::{MachineInfo, RunObserver, RunRecord};

use super::*;

/// How the recorder is run.
#[derive(Debug, Clone)]
pub struct RecorderConfig {
    /// The `asa` binary (its `record` subcommand).
    pub program: PathBuf,
    /// The dataset folder.
    pub dir: PathBuf,
    /// Tick length passed to `asa record --interval-ms`.
    pub interval_ms: u64,
    /// Further arguments to `asa record` (e.g. `--no-bpf`).
    pub extra_args: Vec<String>,
    /// How long `asa record` may take to start sampling (it loads a BPF program).
    pub start_timeout: Duration,
    /// Free text describing the machine, added to the manifest's `machine` line.
    pub machine_note: Option<String>,
    /// Also record every application's features (`asa record --apps`).
    pub apps: bool,
}

impl RecorderConfig {
    /// Defaults: 1 s ticks (the agent's default), 120 s start timeout.
    pub fn new(program: PathBuf, dir: PathBuf) -> Self {
        Self {
            program,
            dir,
            interval_ms: 1000,
            extra_args: Vec::new(),
            start_timeout: Duration::from_secs(120),
            machine_note: None,
            apps: false,
        }
    }
}

/// The `asa` binary for `asa record`: `explicit` when given, else the running executable when
/// it is `asa` itself, else `asa` next to the running executable, else `asa` on PATH.
pub fn find_recorder(explicit: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = explicit {
        if !p.is_file() {
            bail!("--recorder {}: no such file", p.display());
        }
        return Ok(p.to_owned());
    }
    let exe = std::env::current_exe().context("finding the running executable")?;
    if exe.file_name().and_then(|n| n.to_str()) == Some("asa") {
        return Ok(exe);
    }
    if let Some(dir) = exe.parent() {
        let next = dir.join("asa");
        if next.is_file() {
            return Ok(next);
        }
    }
    crate::loads::find_on_path("asa").ok_or_else(|| {
        anyhow!(
            "feature recording needs the agent binary `asa` (for `asa record`), found neither next \
             to {} nor on PATH: build it (cargo build --release -p asa-agent) or give --recorder PATH",
            exe.display()
        )
    })
}

struct Active {
    child: Child,
    name: String,
    raw: PathBuf,
    log: PathBuf,
}

/// Runs `asa record` alongside every run and builds the labelled dataset ([`RunObserver`]).
pub struct FeatureRecorder {
    config: RecorderConfig,
    manifest: Manifest,
    active: Option<Active>,
}

impl FeatureRecorder {
    /// Check the recorder binary and create the dataset folder. An existing manifest in the
    /// folder is continued (its runs kept; a run recorded again replaces its entry).
    pub fn new(config: RecorderConfig) -> Result<Self> {
        let out = Command::new(&config.program)
            .args(["record", "--help"])
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("running {} record --help", config.program.display()))?;
        if !out.status.success() {
            bail!(
                "{} has no working `record` subcommand ({}): give the agent binary `asa` as \
                 --recorder",
                config.program.display(),
                out.status
            );
        }
        for sub in ["raw", "runs"] {
            let d = config.dir.join(sub);
            std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
        }
        let machine_info = MachineInfo::current();
        let mut machine = format!(
            "{} ({}, {} CPUs, {} MiB), kernel {}",
            machine_info.hostname,
            machine_info.cpu_model,
            machine_info.cpus,
            machine_info.memory_mib,
            machine_info.kernel
        );
        if let Some(note) = &config.machine_note {
            machine = format!("{note}; {machine}");
        }
        let path = config.dir.join(MANIFEST_FILE);
        let manifest = if path.is_file() {
            let mut m = Manifest::load(&path)?;
            if m.interval_ms != config.interval_ms {
                bail!(
                    "{}: recorded with {} ms ticks, this run asks for {} ms: use another folder",
                    path.display(),
                    m.interval_ms,
                    config.interval_ms
                );
            }
            m.machine = machine;
            m
        } else {
            Manifest {
                schema: DATASET_SCHEMA.into(),
                version: DATASET_VERSION,
                feature_schema: String::new(),
                feature_schema_version: 0,
                machine,
                kernel: machine_info.kernel.clone(),
                interval_ms: config.interval_ms,
                created_unix_ms: asa_experts::supervisor::unix_ms(SystemTime::now()),
                labelling: "a row covers the time since the previous tick; it is kept only when \
                            that span lies inside one phase and inside the probe's window, and is \
                            labelled <probe>+<load> of that phase"
                    .into(),
                machine_info,
                run: Vec::new(),
                dropped: Vec::new(),
            }
        };
        Ok(Self {
            config,
            manifest,
            active: None,
        })
    }

    /// The manifest so far.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    fn stop_active(&mut self) -> Result<Option<Active>> {
        let Some(mut a) = self.active.take() else {
            return Ok(None);
        };
        // SAFETY: kill(2) on the pid of a child we own and have not reaped.
        unsafe {
            libc::kill(a.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let t0 = Instant::now();
        let status = loop {
            if let Some(s) = a.child.try_wait()? {
                break s;
            }
            if t0.elapsed() > Duration::from_secs(30) {
                let _ = a.child.kill();
                let _ = a.child.wait();
                bail!(
                    "asa record for {} did not stop within 30 s of SIGTERM (killed); log {}:\n{}",
                    a.name,
                    a.log.display(),
                    log_tail(&a.log)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        if !status.success() {
            bail!(
                "asa record for {} failed ({status}); log {}:\n{}",
                a.name,
                a.log.display(),
                log_tail(&a.log)
            );
        }
        Ok(Some(a))
    }

    fn add_run(&mut self, a: &Active, scenario: &ScenarioSpec, record: &RunRecord) -> Result<()> {
        let meta = recording_metadata(&a.raw)?;
        let schema = meta
            .get("asa.feature_schema")
            .cloned()
            .ok_or_else(|| anyhow!("{}: no asa.feature_schema metadata", a.raw.display()))?;
        let version: u32 = meta
            .get("asa.feature_schema_version")
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| {
                anyhow!(
                    "{}: no asa.feature_schema_version metadata",
                    a.raw.display()
                )
            })?;
        if self.manifest.feature_schema.is_empty() {
            self.manifest.feature_schema = schema;
            self.manifest.feature_schema_version = version;
        } else if (
            self.manifest.feature_schema.as_str(),
            self.manifest.feature_schema_version,
        ) != (schema.as_str(), version)
        {
            bail!(
                "{}: feature schema {schema} v{version}, the dataset has {} v{}",
                a.raw.display(),
                self.manifest.feature_schema,
                self.manifest.feature_schema_version
            );
        }
        let windows: Vec<LabelWindow> = record
            .phases
            .iter()
            .map(|p| LabelWindow {
                class: p.class(&scenario.probe),
                from_unix_ms: p.started_unix_ms.max(record.probe_started_unix_ms),
                to_unix_ms: p.ended_unix_ms.min(record.probe_ended_unix_ms),
            })
            .collect();
        let file = format!("runs/{}.parquet", a.name);
        let raw_file = format!("raw/{}.parquet", a.name);
        let apps_file = format!("raw/{}.apps.parquet", a.name);
        let apps_file =
            (self.config.apps && self.config.dir.join(&apps_file).is_file()).then_some(apps_file);
        let mut extra = vec![
            ("asa.run".to_owned(), a.name.clone()),
            ("asa.scenario".to_owned(), scenario.name.clone()),
            ("asa.expert".to_owned(), record.expert.clone()),
            ("asa.rep".to_owned(), (record.rep + 1).to_string()),
        ];
        let classes: Vec<String> = windows.iter().map(|w| w.class.clone()).collect();
        let probe_classes = classes.join(",");
        extra.push(("asa.classes".to_owned(), probe_classes));
        let stats = relabel(
            &a.raw,
            &self.config.dir.join(&file),
            &windows,
            self.config.interval_ms,
            &extra,
        )?;
        self.manifest.run.retain(|r| r.name != a.name);
        self.manifest.dropped.retain(|r| r.name != a.name);
        if stats.rows == 0 {
            warn!(
                "{}: no tick lies wholly inside a phase of the probe window ({} raw rows); \
                 left out of the dataset (a longer --duration or shorter --record-interval-ms helps)",
                a.name, stats.raw_rows
            );
            let _ = std::fs::remove_file(self.config.dir.join(&file));
            self.manifest.dropped.push(DroppedRun {
                name: a.name.clone(),
                raw_file,
                reason: format!(
                    "no tick inside a phase of the probe window ({} raw rows)",
                    stats.raw_rows
                ),
            });
        } else {
            let label = stats
                .per_window
                .iter()
                .zip(&windows)
                .max_by_key(|(n, _)| **n)
                .map(|(_, w)| w.class.clone())
                .unwrap_or_default();
            self.manifest.run.push(RunEntry {
                name: a.name.clone(),
                file,
                raw_file,
                label,
                classes,
                scenario: scenario.name.clone(),
                expert: record.expert.clone(),
                rep: record.rep + 1,
                valid: record.valid,
                rows: stats.rows,
                raw_rows: stats.raw_rows,
                load_started_unix_ms: record
                    .phases
                    .first()
                    .map(|p| p.started_unix_ms)
                    .unwrap_or(record.started_unix_ms),
                probe_started_unix_ms: record.probe_started_unix_ms,
                probe_ended_unix_ms: record.probe_ended_unix_ms,
                apps_file,
                probe_tgid: record.probe_tgid,
                probe_app_class: record.probe_app_class.clone(),
                phase: record
                    .phases
                    .iter()
                    .zip(&windows)
                    .zip(&stats.per_window)
                    .map(|((p, w), n)| PhaseEntry {
                        class: w.class.clone(),
                        load: p.load.clone(),
                        started_unix_ms: p.started_unix_ms,
                        ended_unix_ms: p.ended_unix_ms,
                        window_from_unix_ms: w.from_unix_ms,
                        window_to_unix_ms: w.to_unix_ms,
                        rows: *n,
                        pgids: p
                            .output
                            .as_ref()
                            .map(|o| o.process_groups.clone())
                            .unwrap_or_default(),
                        app_class: p.app_class.clone(),
                    })
                    .collect(),
            });
            info!(
                "{}: {} of {} ticks labelled ({})",
                a.name,
                stats.rows,
                stats.raw_rows,
                stats
                    .per_window
                    .iter()
                    .zip(&windows)
                    .map(|(n, w)| format!("{} {n}", w.class))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        self.manifest.save(&self.config.dir.join(MANIFEST_FILE))
    }
}

impl RunObserver for FeatureRecorder {
    fn run_starting(&mut self, scenario: &ScenarioSpec, expert: &str, rep: u32) -> Result<()> {
        self.stop_active()?;
        let name = format!("{}-{expert}-r{}", scenario.name, rep + 1);
        let raw = self.config.dir.join("raw").join(format!("{name}.parquet"));
        let apps = self
            .config
            .dir
            .join("raw")
            .join(format!("{name}.apps.parquet"));
        let log = self.config.dir.join("raw").join(format!("{name}.log"));
        let _ = std::fs::remove_file(&raw);
        let label = scenario
            .phases()
            .iter()
            .map(|p| crate::runner::workload_class(&scenario.probe, &p.load))
            .collect::<Vec<_>>()
            .join(">");
        let log_file = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let mut cmd = Command::new(&self.config.program);
        cmd.arg("record")
            .args(["--label", &label, "--interval-ms"])
            .arg(self.config.interval_ms.to_string())
            .arg("--out")
            .arg(&raw)
            .args(&self.config.extra_args)
            // Its own process group: in per-application recordings the recorder is one more
            // background application, not part of the runner's (the probe's).
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(log_file.try_clone()?)
            .stderr(log_file);
        if self.config.apps {
            let _ = std::fs::remove_file(&apps);
            cmd.arg("--apps").arg(&apps);
        }
        if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", "info");
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {} record", self.config.program.display()))?;
        self.active = Some(Active {
            child,
            name: name.clone(),
            raw: raw.clone(),
            log: log.clone(),
        });
        // `asa record` creates its file once the sampler (and its BPF probe) is ready.
        let t0 = Instant::now();
        loop {
            if raw.is_file() {
                break;
            }
            let a = self.active.as_mut().expect("just set");
            if let Some(status) = a.child.try_wait()? {
                self.active = None;
                bail!(
                    "asa record for {name} exited before sampling ({status}); log {}:\n{}",
                    log.display(),
                    log_tail(&log)
                );
            }
            if t0.elapsed() > self.config.start_timeout {
                let _ = a.child.kill();
                let _ = a.child.wait();
                self.active = None;
                bail!(
                    "asa record for {name} did not start sampling within {:?}; log {}:\n{}",
                    self.config.start_timeout,
                    log.display(),
                    log_tail(&log)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        info!(
            "[{}] recording features to {} (ready after {:.1} s)",
            scenario.name,
            raw.display(),
            t0.elapsed().as_secs_f64()
        );
        Ok(())
    }

    fn run_finished(&mut self, scenario: &ScenarioSpec, record: Option<&RunRecord>) -> Result<()> {
        let Some(a) = self.stop_active()? else {
            return Ok(());
        };
        match record {
            Some(r) => self.add_run(&a, scenario, r),
            None => {
                warn!(
                    "{}: the run failed; its recording stays in {} unlabelled",
                    a.name,
                    a.raw.display()
                );
                Ok(())
            }
        }
    }
}

impl Drop for FeatureRecorder {
    fn drop(&mut self) {
        if let Some(mut a) = self.active.take() {
            let _ = a.child.kill();
            let _ = a.child.wait();
        }
    }
}

fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(10)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::test_support::*;

    /// A stand-in for `asa record`: logs its arguments and process group, copies a prepared
    /// recording to `--out` (so the file appears once "sampling" starts) and to `--apps`, and
    /// runs until SIGTERM.
    fn fake_recorder(dir: &Path, fixture: &Path, on_record: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join("asa");
        let script = format!(
            "#!/bin/sh\necho \"$@\" >> {args}\n[ \"$2\" = --help ] && exit 0\n{on_record}\n\
             echo \"pid=$$ pgid=$(cut -d' ' -f5 /proc/$$/stat)\" >> {args}\n\
             while [ $# -gt 0 ]; do [ \"$1\" = --out ] && out=$2; [ \"$1\" = --apps ] && apps=$2; shift; done\n\
             trap 'exit 0' TERM\n[ -n \"$apps\" ] && cp {fixture} \"$apps\"\ncp {fixture} \"$out\"\n\
             while :; do sleep 0.05; done\n",
            args = dir.join("args.log").display(),
            fixture = fixture.display(),
        );
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    fn phased_setup() -> (
        crate::catalogue::Catalogue,
        crate::runner::RunOptions,
        tempfile::TempDir,
    ) {
        let mut text = crate::catalogue::BUILTIN_SCENARIOS.to_owned();
        text.push_str(
            "\n[[scenario]]\nname = \"SMOKE-P\"\ntitle = \"Audio: idle, then xz\"\nprobe = \"audio\"\n\
             phase = [{ load = \"idle\", share = 1.0 }, { load = \"xz_compress\", share = 1.0 }]\n",
        );
        let cat = crate::catalogue::Catalogue::parse(&text, "test").unwrap();
        let work = tempfile::tempdir().unwrap();
        let opts = crate::runner::RunOptions {
            experts: vec!["eevdf".into()],
            reps: 1,
            rotation: 0,
            duration: Duration::from_millis(2400),
            min_phase: Duration::ZERO,
            settle: Duration::from_millis(300),
            hold: Duration::ZERO,
            dirty_limit_kib: 0,
            cooldown: Duration::ZERO,
            work_dir: work.path().to_owned(),
            work_unit: crate::work::WorkUnit::calibrate_with(2, 1.0),
        };
        (cat, opts, work)
    }

    #[test]
    fn the_recorder_runs_alongside_a_phased_run_and_labels_each_phase() {
        let dir = tempfile::tempdir().unwrap();
        let now = asa_experts::supervisor::unix_ms(SystemTime::now()) as i64;
        // A tick every 100 ms from 1 s before now to 60 s after: covers the whole run.
        let times: Vec<i64> = (0..610).map(|i| now - 1000 + i * 100).collect();
        let fixture = dir.path().join("fixture.parquet");
        write_recording(&fixture, &times, &["f1", "f2"], "unlabelled");
        let program = fake_recorder(dir.path(), &fixture, "");
        let data = dir.path().join("dataset");
        let mut config = RecorderConfig::new(program, data.clone());
        config.interval_ms = 100;
        config.apps = true;
        let mut recorder = FeatureRecorder::new(config).unwrap();
        let (cat, opts, _work) = phased_setup();
        let scenario = cat.scenario("SMOKE-P").unwrap();
        let mut switcher = crate::runner::CurrentSchedulerOnly::eevdf().unwrap();
        let result = crate::runner::run_scenario_observed(
            &cat,
            scenario,
            &mut switcher,
            &opts,
            &mut recorder,
        )
        .unwrap();
        let record = &result.runs[0];

        let args = std::fs::read_to_string(dir.path().join("args.log")).unwrap();
        let raw = data.join("raw/SMOKE-P-eevdf-r1.parquet");
        assert!(
            args.contains(&format!(
                "record --label audio+idle>audio+xz_compress --interval-ms 100 --out {}",
                raw.display()
            )),
            "{args}"
        );
        let m = Manifest::load(&data.join(MANIFEST_FILE)).unwrap();
        assert_eq!(
            (m.feature_schema.as_str(), m.feature_schema_version),
            ("asa.features", 1)
        );
        assert_eq!(m.interval_ms, 100);
        assert_eq!(m.run.len(), 1, "{m:?}");
        let run = &m.run[0];
        assert_eq!(run.name, "SMOKE-P-eevdf-r1");
        assert_eq!(run.file, "runs/SMOKE-P-eevdf-r1.parquet");
        assert_eq!(
            (run.scenario.as_str(), run.expert.as_str(), run.rep),
            ("SMOKE-P", "eevdf", 1)
        );
        assert_eq!(run.classes, ["audio+idle", "audio+xz_compress"]);
        assert_eq!(run.phase.len(), 2);
        let (p0, p1) = (&run.phase[0], &run.phase[1]);
        // The timeline: load start <= probe start < phase change < probe end, phases back to back.
        assert_eq!(run.load_started_unix_ms, p0.started_unix_ms);
        assert!(p0.started_unix_ms <= run.probe_started_unix_ms);
        assert_eq!(p0.window_from_unix_ms, run.probe_started_unix_ms);
        assert_eq!(p0.ended_unix_ms, p1.started_unix_ms);
        assert!(
            run.probe_started_unix_ms + 900 <= p0.ended_unix_ms,
            "{run:?}"
        );
        assert!(
            p1.started_unix_ms + 900 <= run.probe_ended_unix_ms,
            "{run:?}"
        );
        assert_eq!(
            p1.window_to_unix_ms,
            run.probe_ended_unix_ms.min(p1.ended_unix_ms)
        );
        assert_eq!(run.probe_started_unix_ms, record.probe_started_unix_ms);
        // About 12 ticks of 100 ms per 1.2 s phase; the edges are left out.
        assert!(
            (6..=13).contains(&p0.rows) && (6..=13).contains(&p1.rows),
            "{run:?}"
        );
        assert_eq!(run.rows, p0.rows + p1.rows);
        let rows = read_back(&data.join(&run.file));
        assert_eq!(rows.len() as u64, run.rows);
        for (t, _, _, label, _) in &rows {
            let p = if label == "audio+idle" { p0 } else { p1 };
            assert_eq!(label, &p.class);
            assert!(
                (p.window_from_unix_ms as i64) <= t - 100 && *t <= p.window_to_unix_ms as i64,
                "{t} {label} {p:?}"
            );
        }
        // The raw file is kept whole.
        assert_eq!(run.raw_rows, 610);
        // What labels the applications: the per-application file, the probe's process (this
        // one: the probe is its threads), the load's process groups and classes.
        let apps = data.join("raw/SMOKE-P-eevdf-r1.apps.parquet");
        assert!(
            args.contains(&format!("--apps {}", apps.display())),
            "{args}"
        );
        assert_eq!(
            run.apps_file.as_deref(),
            Some("raw/SMOKE-P-eevdf-r1.apps.parquet")
        );
        assert_eq!(run.probe_tgid, std::process::id());
        assert_eq!(run.probe_app_class, "interactive");
        assert!(p0.pgids.is_empty() && p0.app_class.is_none(), "{p0:?}");
        assert_eq!(p1.app_class.as_deref(), Some("cpu_batch"));
        assert_eq!(p1.pgids.len(), 1, "xz's one process group: {p1:?}");
        // The recorder leads a process group of its own, apart from the probe's.
        let (pid, pgid) = args
            .lines()
            .find_map(|l| {
                let rest = l.strip_prefix("pid=")?;
                let (pid, pgid) = rest.split_once(" pgid=")?;
                Some((pid.parse::<u32>().ok()?, pgid.parse::<u32>().ok()?))
            })
            .expect("the fake recorder logged its process group");
        assert_eq!(pid, pgid, "{args}");
    }

    #[test]
    fn a_recorder_that_dies_fails_the_run_with_its_log() {
        let dir = tempfile::tempdir().unwrap();
        let fixture = dir.path().join("fixture.parquet");
        write_recording(&fixture, &[1000], &["f1", "f2"], "x");
        let program = fake_recorder(dir.path(), &fixture, "echo 'no BPF for you' >&2; exit 3");
        let mut recorder =
            FeatureRecorder::new(RecorderConfig::new(program, dir.path().join("d"))).unwrap();
        let (cat, opts, _work) = phased_setup();
        let mut switcher = crate::runner::CurrentSchedulerOnly::eevdf().unwrap();
        let err = crate::runner::run_scenario_observed(
            &cat,
            cat.scenario("SMOKE-P").unwrap(),
            &mut switcher,
            &opts,
            &mut recorder,
        )
        .unwrap_err();
        let msg = format!("{err:#}");
        assert!(
            msg.contains("exited before sampling") && msg.contains("no BPF for you"),
            "{msg}"
        );
    }

    #[test]
    fn a_missing_recorder_names_the_flag() {
        let err = find_recorder(Some(Path::new("/nonexistent/asa"))).unwrap_err();
        assert!(err.to_string().contains("--recorder"), "{err}");
    }
}
