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
//!
//! - [`recorder`]: [`FeatureRecorder`], which runs `asa record` beside each scenario run and
//!   writes the manifest;
//! - [`relabel`]: labels a recording's rows by the phase windows ([`relabel`]).

pub mod recorder;
pub mod relabel;

pub use recorder::{find_recorder, FeatureRecorder, RecorderConfig};
pub use relabel::{recording_metadata, relabel, LabelWindow, RelabelStats};

use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::runner::MachineInfo;

/// Schema name of the manifest (shared with the classifier).
pub const DATASET_SCHEMA: &str = "asa.dataset";
/// Schema version of the manifest.
pub const DATASET_VERSION: u32 = 1;
/// The manifest's file name in the dataset folder.
pub const MANIFEST_FILE: &str = "manifest.toml";

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
    /// The load's process groups (per-application labels: these applications are the load).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pgids: Vec<u32>,
    /// The load's application class (None when idle).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_class: Option<String>,
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
    /// Every application's features each tick (`asa record --apps`), relative to the
    /// manifest; None without `--record-apps`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apps_file: Option<String>,
    /// The process whose threads ran the probe (per-application labels).
    #[serde(default)]
    pub probe_tgid: u32,
    /// The probe's application class.
    #[serde(default)]
    pub probe_app_class: String,
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

#[cfg(test)]
pub(crate) mod test_support {
    //! A recording file shaped like `asa record`'s, for the tests of both modules.
    use std::fs::File;
    use std::path::Path;
    use std::sync::Arc;

    use parquet::basic::{LogicalType, Repetition, Type as PhysicalType};
    use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};
    use parquet::file::metadata::KeyValue;
    use parquet::file::properties::WriterProperties;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::file::writer::SerializedFileWriter;
    use parquet::record::Field;
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
}
