//! Training data for the workload classifier (issue 5): `asa record` runs alongside every
//! scenario run and samples the perception features; afterwards every row is labelled with
//! the workload class of the phase it was sampled in, and the run is listed in a manifest.
//!
//! Layout of the dataset folder:
//!
//! ```text
//! manifest.toml            schema asa.dataset v1 (read by classifier/asa_classifier/dataset.py)
//! runs/<run>.parquet       labelled ticks of the probe window only (what the classifier reads)
//! raw/<run>.parquet        everything `asa record` wrote, settle time and phase edges included
//! raw/<run>.log            the recorder's own log
//! ```
//!
//! A run is one (scenario, expert, repetition): `<scenario>-<expert>-r<rep>`. A row (a tick)
//! covers the time since the previous tick; it is kept in `runs/` only when that whole span lies
//! inside one phase *and* inside the probe's window, and then labelled `<probe>+<load>` of that
//! phase (`<probe>+idle` for a phase without a load). So the settle time (load without the
//! probe) and ticks straddling a phase change are left out of the labelled file, and each phase
//! of a phased scenario gets its own class. The manifest keeps every boundary (ms since the
//! epoch), so the raw files can be labelled differently later. Split train and held-out **by
//! run** (the manifest's `[[run]]` entries), never by tick.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{anyhow, bail, Context, Result};
use log::{info, warn};
use parquet::basic::{Compression, Type as PhysicalType};
use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::writer::SerializedFileWriter;
use parquet::record::Field;
use serde::{Deserialize, Serialize};

use crate::catalogue::ScenarioSpec;
use crate::runner::{MachineInfo, RunObserver, RunRecord};

/// Schema name of the manifest (shared with the classifier).
pub const DATASET_SCHEMA: &str = "asa.dataset";
/// Schema version of the manifest.
pub const DATASET_VERSION: u32 = 1;
/// The manifest's file name in the dataset folder.
pub const MANIFEST_FILE: &str = "manifest.toml";

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

/// One phase of a run in the manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseEntry {
    /// `<probe>+<load>` (or `<probe>+idle`).
    pub class: String,
    /// Load name or `idle`.
    pub load: String,
    /// Phase start (ms since the epoch).
    pub started_unix_ms: u64,
    /// Phase end.
    pub ended_unix_ms: u64,
    /// Labelled window: the phase within the probe's window.
    pub window_from_unix_ms: u64,
    /// End of the labelled window.
    pub window_to_unix_ms: u64,
    /// Rows labelled with this phase's class.
    pub rows: u64,
}

/// One run in the manifest (a `[[run]]` entry; the classifier reads `file`, `name`, `label`,
/// `scenario`, `expert` and ignores the rest).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunEntry {
    /// Run id, unique in the dataset: `<scenario>-<expert>-r<rep>`.
    pub name: String,
    /// The labelled recording, relative to the manifest.
    pub file: String,
    /// The whole recording, relative to the manifest.
    pub raw_file: String,
    /// The run's majority class (every row also carries its own label).
    pub label: String,
    /// Every class in the run, in phase order.
    pub classes: Vec<String>,
    /// Scenario name.
    pub scenario: String,
    /// Expert the run was measured under.
    pub expert: String,
    /// Repetition, 1-based.
    pub rep: u32,
    /// False when the expert stopped running during the run.
    pub valid: bool,
    /// Rows in the labelled file.
    pub rows: u64,
    /// Rows `asa record` wrote.
    pub raw_rows: u64,
    /// When the first load started (settle time begins).
    pub load_started_unix_ms: u64,
    /// Probe start.
    pub probe_started_unix_ms: u64,
    /// Probe end.
    pub probe_ended_unix_ms: u64,
    /// The phases with their boundaries.
    pub phase: Vec<PhaseEntry>,
}

/// A run that left no labelled row (too short for one whole tick inside a phase).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DroppedRun {
    /// Run id.
    pub name: String,
    /// The whole recording.
    pub raw_file: String,
    /// Why it is not in `[[run]]`.
    pub reason: String,
}

/// The dataset manifest (`manifest.toml`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    /// Always [`DATASET_SCHEMA`].
    pub schema: String,
    /// Always [`DATASET_VERSION`].
    pub version: u32,
    /// Feature schema of the recordings (from their Parquet metadata).
    pub feature_schema: String,
    /// Its version.
    pub feature_schema_version: u32,
    /// One line describing where it was recorded.
    pub machine: String,
    /// Kernel release.
    pub kernel: String,
    /// Tick length (ms).
    pub interval_ms: u64,
    /// When recording started (ms since the epoch).
    pub created_unix_ms: u64,
    /// How rows were labelled.
    pub labelling: String,
    /// The machine in detail.
    pub machine_info: MachineInfo,
    /// The runs.
    pub run: Vec<RunEntry>,
    /// Runs without a labelled row.
    #[serde(default)]
    pub dropped: Vec<DroppedRun>,
}

impl Manifest {
    /// Read a manifest, checking schema and version.
    pub fn load(path: &Path) -> Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let m: Manifest = toml::from_str(&text)
            .with_context(|| format!("{}: malformed manifest", path.display()))?;
        if m.schema != DATASET_SCHEMA || m.version != DATASET_VERSION {
            bail!(
                "{}: schema {:?} version {}, expected {DATASET_SCHEMA:?} version {DATASET_VERSION}",
                path.display(),
                m.schema,
                m.version
            );
        }
        Ok(m)
    }

    fn save(&self, path: &Path) -> Result<()> {
        let text = toml::to_string(self).context("serialising the dataset manifest")?;
        let tmp = path.with_extension("toml.tmp");
        std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))
    }
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
            .stdin(Stdio::null())
            .stdout(log_file.try_clone()?)
            .stderr(log_file);
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

/// A span of time and the class of the rows wholly inside it.
#[derive(Debug, Clone, PartialEq)]
pub struct LabelWindow {
    /// The class.
    pub class: String,
    /// Start (ms since the epoch).
    pub from_unix_ms: u64,
    /// End.
    pub to_unix_ms: u64,
}

/// What [`relabel`] did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RelabelStats {
    /// Rows in the input.
    pub raw_rows: u64,
    /// Rows written.
    pub rows: u64,
    /// Rows written per window (same order).
    pub per_window: Vec<u64>,
}

/// The key-value metadata of a Parquet recording.
pub fn recording_metadata(path: &Path) -> Result<BTreeMap<String, String>> {
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let reader = SerializedFileReader::new(file)
        .with_context(|| format!("{}: not a readable Parquet file", path.display()))?;
    Ok(reader
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .map(|kv| {
            kv.iter()
                .map(|k| (k.key.clone(), k.value.clone().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default())
}

enum Column {
    I64(Vec<i64>),
    F64(Vec<f64>),
    Bytes(Vec<ByteArray>),
}

/// Rewrite an `asa record` Parquet file keeping only the rows (ticks) whose span — from the
/// previous tick (or `interval_ms` before the first) to the tick — lies wholly inside one
/// window, with `label` set to that window's class. `extra` key-value pairs are added to the
/// file's metadata (`asa.label` becomes the majority class).
pub fn relabel(
    raw: &Path,
    out: &Path,
    windows: &[LabelWindow],
    interval_ms: u64,
    extra: &[(String, String)],
) -> Result<RelabelStats> {
    let file = File::open(raw).with_context(|| format!("opening {}", raw.display()))?;
    let reader = SerializedFileReader::new(file)
        .with_context(|| format!("{}: not a readable Parquet file", raw.display()))?;
    let meta = reader.metadata().file_metadata();
    let descr = meta.schema_descr_ptr();
    let names: Vec<String> = descr
        .columns()
        .iter()
        .map(|c| c.name().to_owned())
        .collect();
    let index = |n: &str| {
        names
            .iter()
            .position(|c| c == n)
            .ok_or_else(|| anyhow!("{}: no `{n}` column (not an asa recording)", raw.display()))
    };
    let (ts_col, label_col) = (index("unix_ms")?, index("label")?);
    let mut columns: Vec<Column> = descr
        .columns()
        .iter()
        .map(|c| match c.physical_type() {
            PhysicalType::INT64 => Ok(Column::I64(Vec::new())),
            PhysicalType::DOUBLE => Ok(Column::F64(Vec::new())),
            PhysicalType::BYTE_ARRAY => Ok(Column::Bytes(Vec::new())),
            t => Err(anyhow!(
                "{}: column `{}` has type {t}, not one asa record writes",
                raw.display(),
                c.name()
            )),
        })
        .collect::<Result<_>>()?;
    let mut stats = RelabelStats {
        per_window: vec![0; windows.len()],
        ..Default::default()
    };
    let mut previous: Option<i64> = None;
    let mut kept_labels: Vec<usize> = Vec::new();
    for row in reader
        .get_row_iter(None)
        .with_context(|| format!("reading {}", raw.display()))?
    {
        let row = row.with_context(|| format!("reading a row of {}", raw.display()))?;
        stats.raw_rows += 1;
        let fields: Vec<&Field> = row.get_column_iter().map(|(_, f)| f).collect();
        if fields.len() != columns.len() {
            bail!("{}: a row with {} fields", raw.display(), fields.len());
        }
        let Field::Long(t) = *fields[ts_col] else {
            bail!("{}: `unix_ms` is not an int64", raw.display());
        };
        let from = previous.unwrap_or(t - interval_ms as i64);
        previous = Some(t);
        let Some(w) = windows
            .iter()
            .position(|w| w.from_unix_ms as i64 <= from && t <= w.to_unix_ms as i64)
        else {
            continue;
        };
        stats.per_window[w] += 1;
        stats.rows += 1;
        kept_labels.push(w);
        for (i, (col, f)) in columns.iter_mut().zip(&fields).enumerate() {
            match (col, f) {
                (Column::I64(v), Field::Long(x)) => v.push(*x),
                (Column::F64(v), Field::Double(x)) => v.push(*x),
                (Column::Bytes(v), _) if i == label_col => {
                    v.push(ByteArray::from(windows[w].class.as_str()))
                }
                (Column::Bytes(v), Field::Str(s)) => v.push(ByteArray::from(s.as_str())),
                (Column::Bytes(v), Field::Bytes(b)) => v.push(ByteArray::from(b.data().to_vec())),
                (_, f) => bail!(
                    "{}: column `{}` holds {f:?}, which does not match its type",
                    raw.display(),
                    names[i]
                ),
            }
        }
    }
    let majority = stats
        .per_window
        .iter()
        .enumerate()
        .max_by_key(|(_, n)| **n)
        .map(|(i, _)| windows[i].class.clone())
        .unwrap_or_default();
    let mut kv: Vec<KeyValue> = meta
        .key_value_metadata()
        .map(|kv| {
            kv.iter()
                .filter(|k| k.key != "asa.label" && !extra.iter().any(|(e, _)| *e == k.key))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    kv.push(KeyValue::new("asa.label".to_owned(), majority));
    kv.extend(
        extra
            .iter()
            .map(|(k, v)| KeyValue::new(k.clone(), v.clone())),
    );
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_key_value_metadata(Some(kv))
        .build();
    let tmp = out.with_extension("parquet.tmp");
    let file = File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    let mut writer = SerializedFileWriter::new(file, descr.root_schema_ptr(), Arc::new(props))
        .with_context(|| format!("starting {}", tmp.display()))?;
    if stats.rows > 0 {
        let mut group = writer.next_row_group()?;
        let mut i = 0;
        while let Some(mut col) = group.next_column()? {
            match &columns[i] {
                Column::I64(v) => {
                    col.typed::<Int64Type>().write_batch(v, None, None)?;
                }
                Column::F64(v) => {
                    col.typed::<DoubleType>().write_batch(v, None, None)?;
                }
                Column::Bytes(v) => {
                    col.typed::<ByteArrayType>().write_batch(v, None, None)?;
                }
            }
            col.close()?;
            i += 1;
        }
        group.close()?;
    }
    writer
        .close()
        .with_context(|| format!("closing {}", tmp.display()))?;
    std::fs::rename(&tmp, out).with_context(|| format!("renaming to {}", out.display()))?;
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::basic::{LogicalType, Repetition};
    use parquet::schema::types::Type;

    /// Write a file shaped like `asa record`'s: unix_ms, tick, features..., label, missing.
    pub(crate) fn write_recording(path: &Path, times: &[i64], features: &[&str], label: &str) {
        let required = |name: &str, t: PhysicalType| {
            Arc::new(
                Type::primitive_type_builder(name, t)
                    .with_repetition(Repetition::REQUIRED)
                    .build()
                    .unwrap(),
            )
        };
        let string = |name: &str| {
            Arc::new(
                Type::primitive_type_builder(name, PhysicalType::BYTE_ARRAY)
                    .with_repetition(Repetition::REQUIRED)
                    .with_logical_type(Some(LogicalType::String))
                    .build()
                    .unwrap(),
            )
        };
        let mut fields = vec![
            required("unix_ms", PhysicalType::INT64),
            required("tick", PhysicalType::INT64),
        ];
        fields.extend(features.iter().map(|f| required(f, PhysicalType::DOUBLE)));
        fields.push(string("label"));
        fields.push(string("missing"));
        let schema = Type::group_type_builder("asa_recording")
            .with_fields(fields)
            .build()
            .unwrap();
        let props = WriterProperties::builder()
            .set_key_value_metadata(Some(vec![
                KeyValue::new("asa.feature_schema".to_owned(), "asa.features".to_owned()),
                KeyValue::new("asa.feature_schema_version".to_owned(), "1".to_owned()),
                KeyValue::new("asa.label".to_owned(), label.to_owned()),
            ]))
            .build();
        let mut w = SerializedFileWriter::new(
            File::create(path).unwrap(),
            Arc::new(schema),
            Arc::new(props),
        )
        .unwrap();
        // Two row groups, like a long recording.
        for chunk in times.chunks(3) {
            let mut g = w.next_row_group().unwrap();
            let mut c = 0;
            while let Some(mut col) = g.next_column().unwrap() {
                match c {
                    0 => col
                        .typed::<Int64Type>()
                        .write_batch(chunk, None, None)
                        .map(|_| ())
                        .unwrap(),
                    1 => {
                        let ticks: Vec<i64> = chunk.iter().map(|t| t / 1000).collect();
                        col.typed::<Int64Type>()
                            .write_batch(&ticks, None, None)
                            .unwrap();
                    }
                    c if c < 2 + features.len() => {
                        let v: Vec<f64> = chunk
                            .iter()
                            .map(|t| if c == 2 { f64::NAN } else { *t as f64 * 0.5 })
                            .collect();
                        col.typed::<DoubleType>()
                            .write_batch(&v, None, None)
                            .unwrap();
                    }
                    c => {
                        let text = if c == 2 + features.len() { label } else { "f1" };
                        let v = vec![ByteArray::from(text); chunk.len()];
                        col.typed::<ByteArrayType>()
                            .write_batch(&v, None, None)
                            .unwrap();
                    }
                }
                col.close().unwrap();
                c += 1;
            }
            g.close().unwrap();
        }
        w.close().unwrap();
    }

    pub(crate) fn read_back(path: &Path) -> Vec<(i64, f64, f64, String, String)> {
        let reader = SerializedFileReader::new(File::open(path).unwrap()).unwrap();
        reader
            .get_row_iter(None)
            .unwrap()
            .map(|r| {
                let r = r.unwrap();
                let f: Vec<Field> = r.get_column_iter().map(|(_, f)| f.clone()).collect();
                let (
                    Field::Long(t),
                    Field::Double(a),
                    Field::Double(b),
                    Field::Str(l),
                    Field::Str(m),
                ) = (&f[0], &f[2], &f[3], &f[4], &f[5])
                else {
                    panic!("{f:?}")
                };
                (*t, *a, *b, l.clone(), m.clone())
            })
            .collect()
    }

    #[test]
    fn rows_are_labelled_by_the_phase_their_whole_tick_lies_in() {
        let dir = tempfile::tempdir().unwrap();
        let raw = dir.path().join("raw.parquet");
        // Ticks every second at 1000..8000 ms; a late tick at 8700.
        let times = [1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 8700];
        write_recording(&raw, &times, &["f1", "f2"], "placeholder");
        let windows = [
            // Probe window starts at 1500: the tick at 2000 spans 1000..2000, left out.
            LabelWindow {
                class: "game+idle".into(),
                from_unix_ms: 1500,
                to_unix_ms: 4500,
            },
            // Phase change at 4500: the tick at 5000 (4000..5000) straddles it, left out.
            LabelWindow {
                class: "game+network".into(),
                from_unix_ms: 4500,
                to_unix_ms: 8700,
            },
        ];
        let out = dir.path().join("out.parquet");
        let extra = [("asa.run".to_owned(), "P9-eevdf-r1".to_owned())];
        let stats = relabel(&raw, &out, &windows, 1000, &extra).unwrap();
        assert_eq!(stats.raw_rows, 9);
        assert_eq!(stats.per_window, vec![2, 4]);
        assert_eq!(stats.rows, 6);
        let rows = read_back(&out);
        let got: Vec<(i64, &str)> = rows.iter().map(|r| (r.0, r.3.as_str())).collect();
        assert_eq!(
            got,
            vec![
                (3000, "game+idle"),
                (4000, "game+idle"),
                (6000, "game+network"),
                (7000, "game+network"),
                (8000, "game+network"),
                (8700, "game+network"),
            ]
        );
        // Feature values and the other string column travel unchanged (NaN stays NaN).
        assert!(rows.iter().all(|r| r.1.is_nan()));
        assert_eq!(rows[0].2, 1500.0);
        assert!(rows.iter().all(|r| r.4 == "f1"));
        let meta = recording_metadata(&out).unwrap();
        assert_eq!(meta["asa.label"], "game+network");
        assert_eq!(meta["asa.run"], "P9-eevdf-r1");
        assert_eq!(meta["asa.feature_schema"], "asa.features");
    }

    #[test]
    fn a_recording_outside_every_window_gives_an_empty_file() {
        let dir = tempfile::tempdir().unwrap();
        let raw = dir.path().join("raw.parquet");
        write_recording(&raw, &[1000, 2000], &["f1", "f2"], "x");
        let out = dir.path().join("out.parquet");
        let windows = [LabelWindow {
            class: "audio+disk_io".into(),
            from_unix_ms: 5000,
            to_unix_ms: 9000,
        }];
        let stats = relabel(&raw, &out, &windows, 1000, &[]).unwrap();
        assert_eq!((stats.raw_rows, stats.rows), (2, 0));
        assert!(read_back(&out).is_empty());
    }

    #[test]
    fn a_file_that_is_not_a_recording_is_refused_with_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let raw = dir.path().join("junk.parquet");
        std::fs::write(&raw, b"not parquet").unwrap();
        let err = relabel(&raw, &dir.path().join("o.parquet"), &[], 1000, &[]).unwrap_err();
        assert!(format!("{err:#}").contains("junk.parquet"), "{err:#}");
    }

    /// A stand-in for `asa record`: logs its arguments, copies a prepared recording to
    /// `--out` (so the file appears once "sampling" starts) and runs until SIGTERM.
    fn fake_recorder(dir: &Path, fixture: &Path, on_record: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join("asa");
        let script = format!(
            "#!/bin/sh\necho \"$@\" >> {args}\n[ \"$2\" = --help ] && exit 0\n{on_record}\n\
             while [ $# -gt 0 ]; do [ \"$1\" = --out ] && out=$2; shift; done\n\
             trap 'exit 0' TERM\ncp {fixture} \"$out\"\nwhile :; do sleep 0.05; done\n",
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
            settle: Duration::from_millis(300),
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
