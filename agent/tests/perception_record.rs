//! `asa record` end to end on the host: a short recording to Parquet and to CSV, read back.
//! Runs procfs-only (`no_bpf`) so it needs no root; the BPF columns must then be NaN and
//! named in the `missing` column.

use std::path::Path;

use asa_agent::perception::procfs_source::SOMETIMES_MISSING_FEATURE;
use asa_agent::perception::{record, FeatureSource, RecordArgs, SchemaFile};
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;

/// With `ASA_KEEP_RECORDINGS=DIR`, the recordings are copied there for inspection (pandas).
fn keep(out: &Path) {
    if let Some(dir) = std::env::var_os("ASA_KEEP_RECORDINGS") {
        let target = Path::new(&dir).join(out.file_name().unwrap());
        std::fs::copy(out, &target).unwrap();
        eprintln!("kept {}", target.display());
    }
}

fn args(out: &Path) -> RecordArgs {
    RecordArgs {
        label: "idle".into(),
        out: out.to_path_buf(),
        interval_ms: 200,
        duration: Some(1.0),
        no_bpf: true,
        schema: None,
        apps: None,
    }
}

#[test]
fn parquet_recording_has_schema_columns_label_and_missing_mask() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.parquet");
    record(&args(&out)).expect("record");
    keep(&out);
    let schema = SchemaFile::builtin().unwrap();
    let reader = SerializedFileReader::new(std::fs::File::open(&out).unwrap()).unwrap();
    let meta = reader.metadata().file_metadata();
    let ticks = meta.num_rows();
    assert!((4..=6).contains(&ticks), "1 s at 200 ms gave {ticks} rows");
    let columns: Vec<String> = meta
        .schema_descr()
        .columns()
        .iter()
        .map(|c| c.name().to_string())
        .collect();
    let mut expected = vec!["unix_ms".to_string(), "tick".to_string()];
    expected.extend(schema.names());
    expected.extend(["label".to_string(), "missing".to_string()]);
    assert_eq!(columns, expected);
    let kv: Vec<(String, Option<String>)> = meta
        .key_value_metadata()
        .unwrap()
        .iter()
        .map(|kv| (kv.key.clone(), kv.value.clone()))
        .collect();
    assert!(kv.contains(&("asa.feature_schema".into(), Some("asa.features".into()))));
    assert!(kv.contains(&(
        "asa.feature_schema_version".into(),
        Some(asa_agent::perception::schema::SCHEMA_VERSION.to_string())
    )));

    let bpf_names: Vec<String> = schema
        .features
        .iter()
        .filter(|f| f.source == FeatureSource::Bpf)
        .map(|f| f.name.clone())
        .collect();
    for (i, row) in reader.get_row_iter(None).unwrap().enumerate() {
        let row = row.unwrap();
        let fields: Vec<(String, Field)> = row
            .get_column_iter()
            .map(|(n, f)| (n.clone(), f.clone()))
            .collect();
        let get = |name: &str| &fields.iter().find(|(n, _)| n == name).unwrap().1;
        assert_eq!(get("tick"), &Field::Long(i as i64));
        assert_eq!(get("label"), &Field::Str("idle".into()));
        // The BPF columns are missing on every tick; the busiest process's I/O rate may be
        // too (that process idle at the previous scan), in schema order among them.
        let missing = match get("missing") {
            Field::Str(m) => m.split(',').collect::<Vec<_>>(),
            other => panic!("unexpected {other:?}"),
        };
        let without_io: Vec<&str> = missing
            .iter()
            .copied()
            .filter(|&m| m != SOMETIMES_MISSING_FEATURE)
            .collect();
        assert_eq!(without_io, bpf_names, "missing features");
        match get("sched_wakeups_per_s") {
            Field::Double(v) => assert!(v.is_nan()),
            other => panic!("unexpected {other:?}"),
        }
        match get("cpu_idle_share") {
            Field::Double(v) => assert!((0.0..=1.0).contains(v), "{v}"),
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[test]
fn csv_recording_has_header_and_nan_for_missing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.csv");
    record(&args(&out)).expect("record");
    keep(&out);
    let text = std::fs::read_to_string(&out).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let schema = SchemaFile::builtin().unwrap();
    assert_eq!(header.len(), schema.features.len() + 4);
    assert_eq!(header[2], schema.features[0].name);
    let rows: Vec<&str> = lines.collect();
    assert!((4..=6).contains(&rows.len()), "{} rows", rows.len());
    let wakeups = header
        .iter()
        .position(|h| *h == "sched_wakeups_per_s")
        .unwrap();
    for row in rows {
        // The quoted `missing` field holds commas: split the numeric part only.
        let fields: Vec<&str> = row.splitn(header.len() - 1, ',').collect();
        assert_eq!(fields[wakeups], "nan");
        assert!(row.ends_with('"'), "{row}");
    }
}

#[test]
fn bad_arguments_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = args(&dir.path().join("run.parquet"));
    a.interval_ms = 50;
    assert!(record(&a).unwrap_err().to_string().contains("minimum"));
    let a = args(&dir.path().join("run.feather"));
    assert!(record(&a)
        .unwrap_err()
        .to_string()
        .contains("unknown recording format"));
}

/// As root on this host the BPF probe loads: nothing is missing and the scheduler columns
/// carry measurements (any running system wakes tasks every tick). The one exception by
/// design is the busiest process's I/O rate on a tick where that process was idle at the
/// previous scan (its I/O since then is unknown); it must be known on some tick.
#[test]
fn parquet_recording_with_bpf_as_root_has_no_missing_feature() {
    let mut io_known = 0;
    assert_eq!(unsafe { libc::geteuid() }, 0, "run as root (BPF probe)");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run-bpf.parquet");
    let mut a = args(&out);
    a.no_bpf = false;
    record(&a).expect("record");
    keep(&out);
    let reader = SerializedFileReader::new(std::fs::File::open(&out).unwrap()).unwrap();
    for row in reader.get_row_iter(None).unwrap() {
        let row = row.unwrap();
        for (name, field) in row.get_column_iter() {
            match (name.as_str(), field) {
                ("missing", Field::Str(m)) => {
                    assert!(
                        m.is_empty() || m == SOMETIMES_MISSING_FEATURE,
                        "missing features: {m}"
                    )
                }
                ("sched_wakeups_per_s", Field::Double(v)) => assert!(*v > 0.0, "no wakeups seen"),
                (SOMETIMES_MISSING_FEATURE, Field::Double(v)) => {
                    io_known += usize::from(v.is_finite())
                }
                (_, Field::Double(v)) => assert!(v.is_finite(), "{name} = {v}"),
                _ => {}
            }
        }
    }
    assert!(io_known > 0, "{SOMETIMES_MISSING_FEATURE} never known");
}

/// The flags `asa record` takes, parsed as the lead's main.rs will (a subcommand holding
/// `RecordArgs`).
#[test]
fn record_arguments_parse_as_a_subcommand() {
    use clap::{Parser, Subcommand};
    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        command: Command,
    }
    #[derive(Subcommand)]
    enum Command {
        Record(RecordArgs),
    }
    let cli = Cli::try_parse_from([
        "asa",
        "record",
        "--label",
        "web+disk_io",
        "--out",
        "run.parquet",
        "--interval-ms",
        "200",
        "--duration",
        "30",
    ])
    .unwrap();
    let Command::Record(a) = cli.command;
    assert_eq!(a.label, "web+disk_io");
    assert_eq!(a.out, Path::new("run.parquet"));
    assert_eq!(a.interval_ms, 200);
    assert_eq!(a.duration, Some(30.0));
    assert!(!a.no_bpf && a.schema.is_none());
    let defaults =
        Cli::try_parse_from(["asa", "record", "--label", "x", "--out", "o.csv"]).unwrap();
    let Command::Record(d) = defaults.command;
    assert_eq!((d.interval_ms, d.duration), (1000, None));
    assert!(
        Cli::try_parse_from(["asa", "record", "--out", "o.csv"]).is_err(),
        "--label is required"
    );
}

#[test]
fn recording_applications_without_the_bpf_task_walk_is_one_error_saying_what_it_needs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.parquet");
    let mut a = args(&out);
    a.apps = Some(dir.path().join("apps.parquet"));
    let error = format!("{:#}", record(&a).unwrap_err());
    assert!(
        error.contains("--apps needs the BPF task walk") && error.contains("CAP_BPF"),
        "{error}"
    );
    assert!(!dir.path().join("apps.parquet").exists(), "nothing written");
}
