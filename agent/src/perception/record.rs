//! `asa record`: samples every tick and writes labelled rows to a columnar file.
//!
//! Format by extension: `.parquet` (default; Snappy, one row group per
//! [`ROWS_PER_ROW_GROUP`] ticks, key-value metadata with the schema) or `.csv` (header row of
//! column names, `nan` for missing values). Columns, in order: `unix_ms` (int64), `tick`
//! (int64, 0-based), one float64 column per schema feature (schema order), `label` (string),
//! `missing` (string: comma-separated names of the features missing on that tick, empty if
//! none). pandas reads both (`pd.read_parquet`, `pd.read_csv`).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use parquet::basic::{Compression, LogicalType, Repetition, Type as PhysicalType};
use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;

use super::app_record::AppRecordingWriter;
use super::apps::{AppGrouper, ThreadSample, ThreadWalk};
use super::{BpfMode, Sample, Sampler, SchemaFile};
use crate::stop::Stop;

/// Ticks buffered before a Parquet row group is written.
pub const ROWS_PER_ROW_GROUP: usize = 60;
/// Shortest tick `asa record` accepts.
pub const MIN_INTERVAL_MS: u64 = 100;

/// Arguments of `asa record`.
#[derive(Debug, Clone, clap::Args)]
pub struct RecordArgs {
    /// Workload class written in the `label` column of every row.
    #[arg(long)]
    pub label: String,
    /// Output file: `.parquet` or `.csv`.
    #[arg(long)]
    pub out: PathBuf,
    /// Tick length in milliseconds (at least 100).
    #[arg(long, default_value_t = 1000)]
    pub interval_ms: u64,
    /// Seconds to record (default: until Ctrl-C / SIGTERM).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Do not load the BPF program (BPF features are written as missing).
    #[arg(long)]
    pub no_bpf: bool,
    /// Feature schema file (default: the one built in, agent/feature_schema.toml).
    #[arg(long)]
    pub schema: Option<PathBuf>,
    /// Also write every application's features each tick to this `.parquet` file (schema
    /// asa.app-features; needs the BPF task walk). Default: none.
    #[arg(long, value_name = "FILE")]
    pub apps: Option<PathBuf>,
}

/// Runs `asa record`: samples until the duration elapses or SIGINT/SIGTERM arrives, then
/// closes the file (a Parquet file is only readable once closed).
pub fn record(args: &RecordArgs) -> Result<()> {
    if args.interval_ms < MIN_INTERVAL_MS {
        bail!(
            "--interval-ms {} is below the minimum of {MIN_INTERVAL_MS}",
            args.interval_ms
        );
    }
    if args.label.trim().is_empty() {
        bail!("--label must not be empty");
    }
    let schema = match &args.schema {
        Some(path) => SchemaFile::load(path)?,
        None => SchemaFile::builtin()?,
    };
    let stop = Stop::on_signals(&[signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM])?;
    let mode = if args.no_bpf {
        BpfMode::Off
    } else {
        BpfMode::Auto
    };
    let mut sampler = Sampler::new(schema.clone(), mode)?;
    let mut writer = RecordingWriter::create(&args.out, &schema, &args.label)?;
    let mut apps = match &args.apps {
        Some(path) => Some(AppRecording::start(&mut sampler, path)?),
        None => None,
    };
    log::info!(
        "recording {} features every {} ms to {} (label {:?}, BPF {})",
        schema.features.len(),
        args.interval_ms,
        args.out.display(),
        args.label,
        if sampler.bpf_active() { "on" } else { "off" }
    );
    let interval = Duration::from_millis(args.interval_ms);
    let deadline = args
        .duration
        .map(|s| Instant::now() + Duration::from_secs_f64(s.max(0.0)));
    let mut next = Instant::now() + interval;
    let mut ticks = 0u64;
    loop {
        if deadline.is_some_and(|d| next > d + interval / 2) {
            break;
        }
        if stop.wait_until(next) {
            break;
        }
        let sample = sampler.sample()?;
        writer.push(&sample)?;
        if let Some(apps) = apps.as_mut() {
            apps.push(&sampler, sample.unix_ms)?;
        }
        ticks += 1;
        next += interval;
        let now = Instant::now();
        if next < now {
            // Fell behind (suspended or overloaded): skip the lost ticks rather than burst.
            next = now + interval;
        }
    }
    writer.finish()?;
    if let Some(apps) = apps {
        apps.writer.finish()?;
    }
    log::info!("recorded {ticks} ticks to {}", args.out.display());
    Ok(())
}

/// The per-application part of a recording: the sampler's task walk grouped every tick.
struct AppRecording {
    grouper: AppGrouper,
    threads: Vec<ThreadSample>,
    started: Instant,
    writer: AppRecordingWriter,
}

impl AppRecording {
    /// Asks the sampler's walks for every thread's application and creates `path`; fails
    /// without the BPF task walk (there is nothing to group).
    fn start(sampler: &mut Sampler, path: &Path) -> Result<Self> {
        if !sampler.task_scan_active() {
            bail!(
                "--apps needs the BPF task walk (root or CAP_BPF + CAP_PERFMON, and a kernel with BTF); \
                 this sampler reads /proc"
            );
        }
        sampler.want_threads(true)?;
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
        Ok(AppRecording {
            grouper: AppGrouper::new(cpus),
            threads: Vec::new(),
            started: Instant::now(),
            writer: AppRecordingWriter::create(path)?,
        })
    }

    /// The applications of the sample just taken.
    fn push(&mut self, sampler: &Sampler, unix_ms: u64) -> Result<()> {
        if sampler.threads(&mut self.threads) != ThreadWalk::Threads {
            return Ok(());
        }
        let apps = self.grouper.update(self.started.elapsed(), &self.threads);
        self.writer.push(unix_ms, &apps)
    }
}

/// Writes samples of one schema to a `.parquet` or `.csv` file.
pub struct RecordingWriter {
    inner: Inner,
    feature_names: Vec<String>,
    label: String,
    tick: i64,
}

enum Inner {
    Parquet {
        writer: SerializedFileWriter<File>,
        rows: Vec<(i64, i64, Vec<f64>, String)>,
    },
    Csv(BufWriter<File>),
}

impl RecordingWriter {
    /// Creates the file (format from the extension) for `schema` with every row labelled `label`.
    pub fn create(path: &Path, schema: &SchemaFile, label: &str) -> Result<Self> {
        let feature_names = schema.names();
        for reserved in ["unix_ms", "tick", "label", "missing"] {
            if feature_names.iter().any(|n| n == reserved) {
                bail!("feature name {reserved:?} collides with a recording column");
            }
        }
        let file = File::create(path).with_context(|| format!("create {}", path.display()))?;
        let inner = match path.extension().and_then(|e| e.to_str()) {
            Some("csv") => {
                let mut out = BufWriter::new(file);
                let header: Vec<&str> = ["unix_ms", "tick"]
                    .into_iter()
                    .chain(feature_names.iter().map(String::as_str))
                    .chain(["label", "missing"])
                    .collect();
                writeln!(out, "{}", header.join(",")).context("write the CSV header")?;
                Inner::Csv(out)
            }
            Some("parquet") => {
                let props = WriterProperties::builder()
                    .set_compression(Compression::SNAPPY)
                    .set_key_value_metadata(Some(vec![
                        KeyValue::new("asa.feature_schema".into(), schema.name.clone()),
                        KeyValue::new(
                            "asa.feature_schema_version".into(),
                            schema.version.to_string(),
                        ),
                        KeyValue::new("asa.label".into(), label.to_string()),
                    ]))
                    .build();
                let writer = SerializedFileWriter::new(
                    file,
                    Arc::new(parquet_schema(&feature_names)?),
                    Arc::new(props),
                )
                .context("start the Parquet file")?;
                Inner::Parquet {
                    writer,
                    rows: Vec::with_capacity(ROWS_PER_ROW_GROUP),
                }
            }
            _ => bail!(
                "{}: unknown recording format (use a .parquet or .csv extension)",
                path.display()
            ),
        };
        Ok(RecordingWriter {
            inner,
            feature_names,
            label: label.to_string(),
            tick: 0,
        })
    }

    /// Appends one tick.
    pub fn push(&mut self, sample: &Sample) -> Result<()> {
        if sample.values.len() != self.feature_names.len() {
            bail!(
                "sample has {} values, the recording {} columns",
                sample.values.len(),
                self.feature_names.len()
            );
        }
        let missing = self
            .feature_names
            .iter()
            .zip(&sample.missing)
            .filter(|(_, m)| **m)
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .join(",");
        let tick = self.tick;
        self.tick += 1;
        match &mut self.inner {
            Inner::Csv(out) => {
                write!(out, "{},{}", sample.unix_ms, tick)?;
                for v in &sample.values {
                    if v.is_nan() {
                        write!(out, ",nan")?;
                    } else {
                        write!(out, ",{v}")?;
                    }
                }
                writeln!(out, ",{},\"{}\"", csv_field(&self.label), missing)?;
                out.flush().context("write the CSV row")?;
            }
            Inner::Parquet { writer, rows } => {
                rows.push((sample.unix_ms as i64, tick, sample.values.clone(), missing));
                if rows.len() >= ROWS_PER_ROW_GROUP {
                    write_row_group(writer, rows, &self.label)?;
                }
            }
        }
        Ok(())
    }

    /// Flushes the last rows and closes the file.
    pub fn finish(self) -> Result<()> {
        match self.inner {
            Inner::Csv(mut out) => out.flush().context("flush the CSV file")?,
            Inner::Parquet {
                mut writer,
                mut rows,
            } => {
                if !rows.is_empty() {
                    write_row_group(&mut writer, &mut rows, &self.label)?;
                }
                writer.close().context("close the Parquet file")?;
            }
        }
        Ok(())
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn parquet_schema(feature_names: &[String]) -> Result<Type> {
    let required = |name: &str, physical: PhysicalType| {
        Type::primitive_type_builder(name, physical)
            .with_repetition(Repetition::REQUIRED)
            .build()
            .map(Arc::new)
    };
    let string = |name: &str| {
        Type::primitive_type_builder(name, PhysicalType::BYTE_ARRAY)
            .with_repetition(Repetition::REQUIRED)
            .with_logical_type(Some(LogicalType::String))
            .build()
            .map(Arc::new)
    };
    let mut fields = vec![
        required("unix_ms", PhysicalType::INT64)?,
        required("tick", PhysicalType::INT64)?,
    ];
    for name in feature_names {
        fields.push(required(name, PhysicalType::DOUBLE)?);
    }
    fields.push(string("label")?);
    fields.push(string("missing")?);
    Ok(Type::group_type_builder("asa_recording")
        .with_fields(fields)
        .build()?)
}

fn write_row_group(
    writer: &mut SerializedFileWriter<File>,
    rows: &mut Vec<(i64, i64, Vec<f64>, String)>,
    label: &str,
) -> Result<()> {
    let n_features = rows.first().map(|r| r.2.len()).unwrap_or(0);
    let mut group = writer
        .next_row_group()
        .context("start a Parquet row group")?;
    let mut column = 0usize;
    while let Some(mut col) = group.next_column()? {
        match column {
            0 | 1 => {
                let values: Vec<i64> = rows
                    .iter()
                    .map(|r| if column == 0 { r.0 } else { r.1 })
                    .collect();
                col.typed::<Int64Type>().write_batch(&values, None, None)?;
            }
            c if c < 2 + n_features => {
                let values: Vec<f64> = rows.iter().map(|r| r.2[c - 2]).collect();
                col.typed::<DoubleType>().write_batch(&values, None, None)?;
            }
            c if c == 2 + n_features => {
                let values = vec![ByteArray::from(label); rows.len()];
                col.typed::<ByteArrayType>()
                    .write_batch(&values, None, None)?;
            }
            _ => {
                let values: Vec<ByteArray> =
                    rows.iter().map(|r| ByteArray::from(r.3.as_str())).collect();
                col.typed::<ByteArrayType>()
                    .write_batch(&values, None, None)?;
            }
        }
        col.close()?;
        column += 1;
    }
    group.close().context("write a Parquet row group")?;
    rows.clear();
    Ok(())
}
