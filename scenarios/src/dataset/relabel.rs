//! Labels a recording's rows by phase: a row is kept only when its whole tick lies inside one
//! phase window and the probe's window, and gets that phase's label.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use parquet::basic::{Compression, Type as PhysicalType};
use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::writer::SerializedFileWriter;
use parquet::record::Field;

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
    use crate::dataset::test_support::*;

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
}
