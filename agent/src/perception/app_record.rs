//! `asa record --apps FILE`: the per-application features of every tick ([`super::apps`]) as
//! Parquet rows, beside the whole-machine recording, for the application classifier
//! (classifier/asa_classifier/apps.py labels them from the scenario runner's manifest).
//!
//! Columns, in order: `unix_ms` (int64: the tick), `tick` (int64, 0-based), `cgroup` (int64:
//! the cgroup-v2 id), `pgid` (int64), `tgids` (string: the application's processes,
//! comma-separated, lowest first), `threads` (int64), then one float64 column per
//! [`APP_FEATURES`] name. Key-value metadata: `asa.app_feature_schema` and
//! `asa.app_feature_schema_version`. An application has its first row at its second walk.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use parquet::basic::{Compression, LogicalType, Repetition, Type as PhysicalType};
use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;

use super::apps::{AppSample, APP_FEATURES, APP_FEATURE_SCHEMA, APP_FEATURE_VERSION};

/// Rows buffered before a row group is written (a tick has tens to hundreds of applications).
const ROWS_PER_ROW_GROUP: usize = 4096;

/// The columns before the features.
const KEY_COLUMNS: [&str; 6] = ["unix_ms", "tick", "cgroup", "pgid", "tgids", "threads"];

/// One row: a tick's application.
struct Row {
    unix_ms: i64,
    tick: i64,
    cgroup: i64,
    pgid: i64,
    tgids: String,
    threads: i64,
    features: Vec<f64>,
}

/// Writes the per-application rows of a recording to a Parquet file.
pub struct AppRecordingWriter {
    writer: SerializedFileWriter<File>,
    rows: Vec<Row>,
    tick: i64,
}

impl AppRecordingWriter {
    /// Creates `path` (it must end in `.parquet`).
    pub fn create(path: &Path) -> Result<Self> {
        if path.extension().and_then(|e| e.to_str()) != Some("parquet") {
            bail!(
                "{}: the per-application recording is Parquet only (use a .parquet extension)",
                path.display()
            );
        }
        let file = File::create(path).with_context(|| format!("create {}", path.display()))?;
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_key_value_metadata(Some(vec![
                KeyValue::new(
                    "asa.app_feature_schema".into(),
                    APP_FEATURE_SCHEMA.to_string(),
                ),
                KeyValue::new(
                    "asa.app_feature_schema_version".into(),
                    APP_FEATURE_VERSION.to_string(),
                ),
            ]))
            .build();
        let writer = SerializedFileWriter::new(file, Arc::new(schema()?), Arc::new(props))
            .context("start the per-application Parquet file")?;
        Ok(AppRecordingWriter {
            writer,
            rows: Vec::new(),
            tick: 0,
        })
    }

    /// Appends one tick's applications (taken at `unix_ms`).
    pub fn push(&mut self, unix_ms: u64, apps: &[AppSample]) -> Result<()> {
        let tick = self.tick;
        self.tick += 1;
        for app in apps {
            if app.features.len() != APP_FEATURES.len() {
                bail!(
                    "an application sample has {} features, the schema {}",
                    app.features.len(),
                    APP_FEATURES.len()
                );
            }
            self.rows.push(Row {
                unix_ms: unix_ms as i64,
                tick,
                cgroup: app.key.cgroup as i64,
                pgid: i64::from(app.key.pgid),
                tgids: app
                    .tgids
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
                threads: i64::from(app.threads),
                features: app.features.clone(),
            });
        }
        if self.rows.len() >= ROWS_PER_ROW_GROUP {
            self.write_row_group()?;
        }
        Ok(())
    }

    /// Flushes the last rows and closes the file.
    pub fn finish(mut self) -> Result<()> {
        if !self.rows.is_empty() {
            self.write_row_group()?;
        }
        self.writer
            .close()
            .context("close the per-application Parquet file")?;
        Ok(())
    }

    fn write_row_group(&mut self) -> Result<()> {
        let rows = std::mem::take(&mut self.rows);
        let mut group = self
            .writer
            .next_row_group()
            .context("start a Parquet row group")?;
        let mut column = 0usize;
        while let Some(mut col) = group.next_column()? {
            let int64 = |f: fn(&Row) -> i64| rows.iter().map(f).collect::<Vec<i64>>();
            match column {
                0 => col
                    .typed::<Int64Type>()
                    .write_batch(&int64(|r| r.unix_ms), None, None)?,
                1 => col
                    .typed::<Int64Type>()
                    .write_batch(&int64(|r| r.tick), None, None)?,
                2 => col
                    .typed::<Int64Type>()
                    .write_batch(&int64(|r| r.cgroup), None, None)?,
                3 => col
                    .typed::<Int64Type>()
                    .write_batch(&int64(|r| r.pgid), None, None)?,
                4 => {
                    let values: Vec<ByteArray> = rows
                        .iter()
                        .map(|r| ByteArray::from(r.tgids.as_str()))
                        .collect();
                    col.typed::<ByteArrayType>()
                        .write_batch(&values, None, None)?
                }
                5 => col
                    .typed::<Int64Type>()
                    .write_batch(&int64(|r| r.threads), None, None)?,
                c => {
                    let feature = c - KEY_COLUMNS.len();
                    let values: Vec<f64> = rows.iter().map(|r| r.features[feature]).collect();
                    col.typed::<DoubleType>().write_batch(&values, None, None)?
                }
            };
            col.close()?;
            column += 1;
        }
        group.close().context("write a Parquet row group")?;
        Ok(())
    }
}

fn schema() -> Result<Type> {
    let column = |name: &str, physical: PhysicalType, logical: Option<LogicalType>| {
        Type::primitive_type_builder(name, physical)
            .with_repetition(Repetition::REQUIRED)
            .with_logical_type(logical)
            .build()
            .map(Arc::new)
    };
    let mut fields = Vec::new();
    for name in KEY_COLUMNS {
        fields.push(if name == "tgids" {
            column(name, PhysicalType::BYTE_ARRAY, Some(LogicalType::String))?
        } else {
            column(name, PhysicalType::INT64, None)?
        });
    }
    for name in APP_FEATURES {
        fields.push(column(name, PhysicalType::DOUBLE, None)?);
    }
    Ok(Type::group_type_builder("asa_app_recording")
        .with_fields(fields)
        .build()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perception::apps::AppKey;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::RowAccessor;

    fn app(pgid: u32, tgids: &[u32], first: f64) -> AppSample {
        AppSample {
            key: AppKey { cgroup: 77, pgid },
            tgids: tgids.to_vec(),
            threads: tgids.len() as u32 + 1,
            features: (0..APP_FEATURES.len()).map(|i| first + i as f64).collect(),
        }
    }

    #[test]
    fn every_ticks_applications_become_rows_with_their_key_and_features() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("apps.parquet");
        let mut w = AppRecordingWriter::create(&path).unwrap();
        w.push(1_000, &[app(10, &[10, 12], 0.5)]).unwrap();
        w.push(2_000, &[]).unwrap();
        w.push(3_000, &[app(10, &[10], 1.5), app(20, &[20], 2.5)])
            .unwrap();
        w.finish().unwrap();

        let reader = SerializedFileReader::new(File::open(&path).unwrap()).unwrap();
        let meta = reader.metadata().file_metadata();
        let kv: Vec<(String, Option<String>)> = meta
            .key_value_metadata()
            .unwrap()
            .iter()
            .map(|k| (k.key.clone(), k.value.clone()))
            .collect();
        assert!(kv.contains(&(
            "asa.app_feature_schema".into(),
            Some(APP_FEATURE_SCHEMA.into())
        )));
        let names: Vec<String> = meta
            .schema_descr()
            .columns()
            .iter()
            .map(|c| c.name().to_string())
            .collect();
        assert_eq!(&names[..6], &KEY_COLUMNS);
        assert_eq!(&names[6..], &APP_FEATURES);
        let rows: Vec<_> = reader
            .get_row_iter(None)
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(rows.len(), 3, "one row per application per tick");
        assert_eq!(rows[0].get_long(0).unwrap(), 1_000);
        assert_eq!(rows[0].get_string(4).unwrap(), "10,12");
        assert_eq!(rows[0].get_long(5).unwrap(), 3);
        assert_eq!(
            rows[2].get_long(1).unwrap(),
            2,
            "the tick counts empty ticks too"
        );
        assert_eq!(rows[2].get_long(3).unwrap(), 20);
        assert_eq!(rows[2].get_double(6).unwrap(), 2.5);
        assert_eq!(rows[2].get_double(16).unwrap(), 12.5);
    }

    #[test]
    fn only_parquet_is_accepted() {
        let dir = tempfile::tempdir().unwrap();
        let error = AppRecordingWriter::create(&dir.path().join("apps.csv"))
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("Parquet only"), "{error}");
    }
}
