//! `asa calibrate --retrain`: the load classifier trained on this machine's own ticks.
//!
//! A model trained on some machine shapes need not hold on another (trained at 2 and 3 vCPUs,
//! the load model voted 0.895 on 4 vCPUs; results/2026-11-30-model-across-three-shapes). With `--retrain`, every
//! calibration run also records the perception features (`asa record` beside the run, as
//! `asa scenario run --record-features`) into `DIR/features/` (a dataset manifest of labelled
//! ticks, continued when the calibration resumes). After the runs, the project's trainer
//! (`python -m asa_classifier.train`, in the Python environment `classifier/setup.sh` makes)
//! learns the load classes from the recordings the default model was trained on (the list
//! `classifier/models/default/recordings.txt`) plus this machine's, holding out a quarter of
//! this machine's runs, and writes `DIR/model/classifier.onnx`; `python -m
//! asa_classifier.evaluate` scores the shipped default model on the same held-out runs and on
//! every recorded run. The
//! calibration report then says which model this machine needs ([`markdown`]).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use asa_scenarios::dataset::{find_recorder, FeatureRecorder, RecorderConfig, MANIFEST_FILE};
use log::{info, warn};
use serde::Serialize;

/// The recording's folder inside the calibration folder.
pub const FEATURES_DIR: &str = "features";
/// The retrained model's folder inside the calibration folder.
pub const MODEL_DIR: &str = "model";
/// The list of the default model's recordings, relative to the classifier folder.
pub const RECORDINGS_LIST: &str = "models/default/recordings.txt";
/// The shipped model the retrained one is compared with, relative to the classifier folder.
pub const SHIPPED_MODEL: &str = "models/default/classifier.onnx";
/// Features the load model ignores: they describe the page cache built up since boot, not the
/// load (classifier/models/default/README.md).
pub const IGNORED_FEATURES: &str = "mem_buffers_share,mem_free_share,mem_cached_share";
/// The shipped model's evaluation, inside [`MODEL_DIR`].
pub const SHIPPED_EVALUATION: &str = "shipped-model.json";
/// Voted accuracy on this machine's held-out runs at which the shipped model holds: issue 41's
/// bar for a model on a machine shape it was not trained on.
pub const HOLDS_AT: f64 = 0.95;

/// The classifier folder of the source tree this binary was built from.
pub fn source_tree_classifier() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../classifier")
}

/// The recording folder of the calibration folder `dir`.
pub fn features_dir(dir: &Path) -> PathBuf {
    dir.join(FEATURES_DIR)
}

/// The project's trainer: the classifier folder, its Python environment and what it trains on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trainer {
    /// The classifier folder (absolute).
    pub classifier: PathBuf,
    /// `.venv/bin/python` in it.
    pub python: PathBuf,
    /// The list of the default model's recordings ([`RECORDINGS_LIST`]).
    pub recordings: PathBuf,
    /// The agent's feature schema (`agent/feature_schema.toml` beside the classifier folder).
    pub feature_schema: PathBuf,
}

impl Trainer {
    /// The trainer of the classifier folder `classifier`, its files checked (nothing run): a
    /// missing Python environment is one error that says to run `classifier/setup.sh`.
    pub fn locate(classifier: &Path) -> Result<Trainer> {
        // Canonical where it exists: the messages name /src/asa/classifier, not
        // /src/asa/mapping/../classifier.
        let classifier = match std::fs::canonicalize(classifier) {
            Ok(path) => path,
            Err(_) => std::path::absolute(classifier)
                .with_context(|| format!("resolving {}", classifier.display()))?,
        };
        let python = classifier.join(".venv/bin/python");
        if !python.is_file() {
            bail!(
                "--retrain trains the classifier in the project's Python environment and {} is \
                 missing: run {} first (or point --classifier at the project's classifier folder)",
                python.display(),
                classifier.join("setup.sh").display()
            );
        }
        let recordings = classifier.join(RECORDINGS_LIST);
        let feature_schema = classifier.join("../agent/feature_schema.toml");
        for (what, path) in [
            ("the list of the default model's recordings", &recordings),
            ("the feature schema", &feature_schema),
        ] {
            if !path.is_file() {
                bail!(
                    "--retrain needs {what}, {}, which is missing: point --classifier at the \
                     classifier folder of an ASA checkout",
                    path.display()
                );
            }
        }
        Ok(Trainer {
            classifier,
            python,
            recordings,
            feature_schema,
        })
    }

    /// [`Trainer::locate`], then the environment must import the trainer and the evaluator
    /// (a few seconds; an environment set up before them, or half installed, fails here and
    /// not after hours of runs).
    pub fn check(classifier: &Path) -> Result<Trainer> {
        let trainer = Self::locate(classifier)?;
        let out = Command::new(&trainer.python)
            .args(["-c", "import asa_classifier.train, asa_classifier.evaluate"])
            .current_dir(&trainer.classifier)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("running {}", trainer.python.display()))?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let last = stderr.lines().last().unwrap_or("").trim();
            bail!(
                "--retrain: {} cannot import the trainer ({}: {last}): run {} again",
                trainer.python.display(),
                out.status,
                trainer.classifier.join("setup.sh").display()
            );
        }
        Ok(trainer)
    }

    /// The trainer's arguments: the load classes of the default model's recordings plus this
    /// machine's (`machine`, its manifest), held out from this machine's runs only, the memory
    /// features ignored, the model into `out`.
    pub fn train_args(&self, machine: &Path, out: &Path) -> Vec<String> {
        let machine = machine.display().to_string();
        [
            "-m",
            "asa_classifier.train",
            "--classes",
            "load",
            "--manifests-from",
            &self.recordings.display().to_string(),
            "--manifest",
            &machine,
            "--heldout-from",
            &machine,
            // The lab's recordings span feature schema v1-v3, as the default model's training did.
            "--older-as-missing",
            "--ignore-features",
            IGNORED_FEATURES,
            "--feature-schema",
            &self.feature_schema.display().to_string(),
            "--out",
            &out.display().to_string(),
        ]
        .map(String::from)
        .to_vec()
    }

    /// The evaluator's arguments: `model` on every run of `machine` and on the runs the
    /// training report `report` held out, written to `json`.
    pub fn evaluate_args(
        &self,
        model: &Path,
        machine: &Path,
        report: &Path,
        json: &Path,
    ) -> Vec<String> {
        [
            "-m".to_string(),
            "asa_classifier.evaluate".into(),
            "--model".into(),
            model.display().to_string(),
            "--manifest".into(),
            machine.display().to_string(),
            "--classes".into(),
            "load".into(),
            "--feature-schema".into(),
            self.feature_schema.display().to_string(),
            "--heldout-of".into(),
            report.display().to_string(),
            "--json".into(),
            json.display().to_string(),
        ]
        .to_vec()
    }

    /// The shipped model of this classifier folder ([`SHIPPED_MODEL`]).
    pub fn shipped_model(&self) -> PathBuf {
        self.classifier.join(SHIPPED_MODEL)
    }

    /// Runs the environment's Python with `args` in the classifier folder, its output shown.
    fn run(&self, args: &[String], what: &str) -> Result<()> {
        info!("{what}: {} {}", self.python.display(), args.join(" "));
        let status = Command::new(&self.python)
            .args(args)
            .current_dir(&self.classifier)
            // Run as root (sudo asa calibrate), it must leave no root-owned __pycache__ in the
            // user's checkout.
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::null())
            .status()
            .with_context(|| format!("running {}", self.python.display()))?;
        if !status.success() {
            bail!(
                "{what} failed ({status}); its output is above. The recordings are kept: rerun \
                 the same `asa calibrate` to train again (complete scenarios are not run again)"
            );
        }
        Ok(())
    }
}

/// The feature recorder of the calibration folder `dir`: `asa record` beside every run into
/// `DIR/features/` (an existing recording there is continued, a run recorded again replaces
/// its entry).
pub fn recorder(dir: &Path) -> Result<FeatureRecorder> {
    let mut config = RecorderConfig::new(find_recorder(None)?, features_dir(dir));
    config.machine_note = Some("asa calibrate --retrain".into());
    FeatureRecorder::new(config).context("setting up the feature recording of --retrain")
}

/// A model's accuracy on some of this machine's runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Accuracy {
    /// Runs.
    pub runs: usize,
    /// Labelled ticks.
    pub ticks: u64,
    /// Argmax per tick.
    pub raw: f64,
    /// After Algorithm 1 voting (the window restarted per run; no decision counts as wrong).
    pub voted: f64,
}

/// What `--retrain` measured and wrote.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Retrained {
    /// This machine's recording (its dataset manifest).
    pub features: PathBuf,
    /// The retrained model.
    pub model: PathBuf,
    /// The trainer's report (`report.md`).
    pub report: PathBuf,
    /// Runs in this machine's recording.
    pub recorded_runs: usize,
    /// Runs the calibration measured (more than recorded when it was begun without
    /// `--retrain`).
    pub measured_runs: usize,
    /// The retrained model on this machine's held-out runs.
    pub retrained: Accuracy,
    /// The model it is compared with.
    pub shipped_model: PathBuf,
    /// The shipped model on the same held-out runs.
    pub shipped_heldout: Option<Accuracy>,
    /// The shipped model on every recorded run of this machine.
    pub shipped_all: Accuracy,
    /// Recorded classes the shipped model does not know.
    pub unknown_to_shipped: Vec<String>,
}

impl Retrained {
    /// True when this machine needs the retrained model: the shipped one votes below
    /// [`HOLDS_AT`] on the held-out runs and the retrained one does better there.
    pub fn needs_retrained(&self) -> bool {
        let shipped = self.shipped_heldout.unwrap_or(self.shipped_all).voted;
        shipped < HOLDS_AT && self.retrained.voted > shipped
    }
}

/// Runs in the dataset manifest at `path`.
pub fn recorded_runs(path: &Path) -> Result<usize> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let manifest: toml::Value =
        toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    Ok(manifest
        .get("run")
        .and_then(|r| r.as_array())
        .map_or(0, Vec::len))
}

/// After the calibration's runs (`measured_runs` of them): trains on the recordings of the
/// calibration folder `dir` with `trainer`, evaluates `shipped` on the same ticks, and returns
/// what both scored. Trains again on every call (a rerun after a failed training retries it).
pub fn retrain(
    trainer: &Trainer,
    dir: &Path,
    shipped: &Path,
    measured_runs: usize,
) -> Result<Retrained> {
    let manifest = std::path::absolute(features_dir(dir).join(MANIFEST_FILE))
        .with_context(|| format!("resolving {}", dir.display()))?;
    let recorded = if manifest.is_file() {
        recorded_runs(&manifest)?
    } else {
        0
    };
    if recorded == 0 {
        bail!(
            "--retrain: {} holds no recorded run, nothing to train on (runs are recorded as they \
             are measured; scenarios completed before --retrain was given are not run again: \
             calibrate into another --dir with --retrain)",
            features_dir(dir).display()
        );
    }
    if recorded < measured_runs {
        warn!(
            "--retrain: {recorded} of the calibration's {measured_runs} runs were recorded (the \
             others were measured without --retrain); training on those"
        );
    }
    let out = std::path::absolute(dir.join(MODEL_DIR))
        .with_context(|| format!("resolving {}", dir.display()))?;
    trainer.run(
        &trainer.train_args(&manifest, &out),
        "training the load classifier on the project's recordings and this machine's",
    )?;
    let report = out.join("report.json");
    let trained = read_json(&report)?;
    let retrained = Accuracy {
        runs: trained["heldout_runs"].as_array().map_or(0, Vec::len),
        ticks: trained["raw"]["ticks"].as_u64().unwrap_or(0),
        raw: number(&trained["raw"]["accuracy"], &report, "raw.accuracy")?,
        voted: number(&trained["voted"]["accuracy"], &report, "voted.accuracy")?,
    };
    let json = out.join(SHIPPED_EVALUATION);
    trainer.run(
        &trainer.evaluate_args(shipped, &manifest, &report, &json),
        "evaluating the shipped model on this machine's recorded ticks",
    )?;
    let evaluation = read_json(&json)?;
    let shipped_all = accuracy(&evaluation["all"], &json)?;
    let shipped_heldout = match &evaluation["heldout"] {
        serde_json::Value::Null => None,
        held => Some(accuracy(held, &json)?),
    };
    let unknown_to_shipped = evaluation["all"]["classes_unknown_to_model"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|c| c.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    Ok(Retrained {
        features: manifest,
        model: out.join("classifier.onnx"),
        report: out.join("report.md"),
        recorded_runs: recorded,
        measured_runs,
        retrained,
        shipped_model: shipped.to_owned(),
        shipped_heldout,
        shipped_all,
        unknown_to_shipped,
    })
}

fn read_json(path: &Path) -> Result<serde_json::Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

fn number(value: &serde_json::Value, path: &Path, key: &str) -> Result<f64> {
    value
        .as_f64()
        .with_context(|| format!("{}: no number at {key}", path.display()))
}

fn accuracy(value: &serde_json::Value, path: &Path) -> Result<Accuracy> {
    Ok(Accuracy {
        runs: value["runs"].as_u64().unwrap_or(0) as usize,
        ticks: value["ticks"].as_u64().unwrap_or(0),
        raw: number(&value["raw"], path, "raw")?,
        voted: number(&value["voted"], path, "voted")?,
    })
}

/// How to run the agent with the calibrated `table` and the model this machine needs.
pub fn usage(r: &Retrained, table: &Path) -> String {
    if r.needs_retrained() {
        format!(
            "sudo asa run --model {} --mapping {}",
            r.model.display(),
            table.display()
        )
    } else {
        format!(
            "sudo asa run --model {} --mapping {}",
            r.shipped_model.display(),
            table.display()
        )
    }
}

/// The calibration report's section on the classifier: the shipped model against the
/// retrained one on this machine's held-out runs (and the shipped one on every recorded run),
/// which one this machine needs, and how to run it with `table`.
pub fn markdown(r: &Retrained, table: &Path) -> String {
    let row = |what: &str, a: &Accuracy| {
        format!(
            "| {what} | {} | {} | {:.3} | {:.3} |\n",
            a.runs, a.ticks, a.raw, a.voted
        )
    };
    let mut out = String::from("\n## Classifier on this machine (--retrain)\n\n");
    out.push_str(&format!(
        "The load classes recorded during this calibration's runs ({} of {} runs, `{}`), \
         classified by the shipped model (`{}`) and by the model retrained on the lab's \
         recordings plus these (`{}`; a quarter of this machine's runs per class, at least one, \
         held out of its training, report `{}`). Voted: Algorithm 1, the window restarted per \
         run, no decision counted as wrong.\n\n",
        r.recorded_runs,
        r.measured_runs,
        r.features.display(),
        r.shipped_model.display(),
        r.model.display(),
        r.report.display()
    ));
    out.push_str("| model, runs | runs | ticks | raw | voted |\n|---|---:|---:|---:|---:|\n");
    if let Some(held) = &r.shipped_heldout {
        out.push_str(&row("shipped, held-out runs", held));
    }
    out.push_str(&row("retrained, held-out runs", &r.retrained));
    out.push_str(&row("shipped, every recorded run", &r.shipped_all));
    if !r.unknown_to_shipped.is_empty() {
        out.push_str(&format!(
            "\nClasses the shipped model does not know (wrong on every tick): {}.\n",
            r.unknown_to_shipped.join(", ")
        ));
    }
    let shipped = r.shipped_heldout.unwrap_or(r.shipped_all).voted;
    out.push_str(&format!(
        "\n**{}** The shipped model holds when it votes at least {HOLDS_AT:.2} on the held-out \
         runs or no worse than the retrained one ({shipped:.3} against {:.3}). Run:\n\n```sh\n{}\n```\n",
        if r.needs_retrained() {
            "This machine needs the retrained model."
        } else {
            "The shipped model holds on this machine."
        },
        r.retrained.voted,
        usage(r, table)
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retrained(shipped: f64, retrained: f64) -> Retrained {
        let acc = |voted| Accuracy {
            runs: 20,
            ticks: 400,
            raw: voted - 0.01,
            voted,
        };
        Retrained {
            features: "cal/features/manifest.toml".into(),
            model: "cal/model/classifier.onnx".into(),
            report: "cal/model/report.md".into(),
            recorded_runs: 80,
            measured_runs: 80,
            retrained: acc(retrained),
            shipped_model: "classifier/models/default/classifier.onnx".into(),
            shipped_heldout: Some(acc(shipped)),
            shipped_all: Accuracy {
                runs: 80,
                ..acc(shipped)
            },
            unknown_to_shipped: Vec::new(),
        }
    }

    /// A stand-in classifier folder: the files the trainer needs, and `.venv/bin/python` when
    /// `python` holds its script.
    fn classifier_folder(python: Option<&str>) -> tempfile::TempDir {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let classifier = root.path().join("classifier");
        std::fs::create_dir_all(classifier.join("models/default")).unwrap();
        std::fs::create_dir_all(root.path().join("agent")).unwrap();
        std::fs::write(classifier.join(RECORDINGS_LIST), "x/manifest.toml\n").unwrap();
        std::fs::write(root.path().join("agent/feature_schema.toml"), "").unwrap();
        if let Some(script) = python {
            let path = classifier.join(".venv/bin/python");
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, script).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        root
    }

    #[test]
    fn a_missing_python_environment_is_one_error_that_says_to_run_setup() {
        let root = classifier_folder(None);
        let err = Trainer::check(&root.path().join("classifier"))
            .unwrap_err()
            .to_string();
        assert!(err.contains(".venv/bin/python is missing"), "{err}");
        assert!(err.contains("classifier/setup.sh"), "{err}");
    }

    #[test]
    fn an_environment_that_cannot_import_the_trainer_is_refused() {
        let root = classifier_folder(Some(
            "#!/bin/sh\necho 'ModuleNotFoundError: No module named xgboost' >&2\nexit 1\n",
        ));
        let err = Trainer::check(&root.path().join("classifier"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("cannot import the trainer"), "{err}");
        assert!(err.contains("No module named xgboost"), "{err}");
        assert!(err.contains("setup.sh again"), "{err}");
    }

    #[test]
    fn the_trainer_learns_the_loads_of_the_labs_recordings_plus_this_machines_held_out() {
        let root = classifier_folder(Some("#!/bin/sh\nexit 0\n"));
        let trainer = Trainer::check(&root.path().join("classifier")).unwrap();
        let c = &trainer.classifier;
        let args = trainer.train_args(
            Path::new("/cal/features/manifest.toml"),
            Path::new("/cal/model"),
        );
        let want: Vec<String> = [
            "-m",
            "asa_classifier.train",
            "--classes",
            "load",
            "--manifests-from",
            &c.join("models/default/recordings.txt")
                .display()
                .to_string(),
            "--manifest",
            "/cal/features/manifest.toml",
            "--heldout-from",
            "/cal/features/manifest.toml",
            "--older-as-missing",
            "--ignore-features",
            "mem_buffers_share,mem_free_share,mem_cached_share",
            "--feature-schema",
            &c.join("../agent/feature_schema.toml").display().to_string(),
            "--out",
            "/cal/model",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(args, want);
        let eval = trainer.evaluate_args(
            &trainer.shipped_model(),
            Path::new("/cal/features/manifest.toml"),
            Path::new("/cal/model/report.json"),
            Path::new("/cal/model/shipped-model.json"),
        );
        assert_eq!(eval[..2], ["-m", "asa_classifier.evaluate"]);
        let pair = |flag: &str| eval[eval.iter().position(|a| a == flag).unwrap() + 1].clone();
        assert_eq!(
            pair("--model"),
            c.join("models/default/classifier.onnx")
                .display()
                .to_string()
        );
        assert_eq!(pair("--heldout-of"), "/cal/model/report.json");
        assert_eq!(pair("--classes"), "load");
    }

    /// The real ignored features are the default model's, and the recordings list is the
    /// classifier's own file (not a list kept here), every machine shape recorded in it.
    #[test]
    fn the_ignored_features_and_the_recordings_list_are_the_default_models() {
        let readme =
            std::fs::read_to_string(source_tree_classifier().join("models/default/README.md"))
                .unwrap();
        assert!(readme.contains(&format!("--ignore-features {IGNORED_FEATURES}")));
        let list = std::fs::read_to_string(source_tree_classifier().join(RECORDINGS_LIST)).unwrap();
        assert!(list.contains("2026-11-23-lab-vm-schema-v3/probe/manifest.toml"));
        assert!(list.contains("2026-11-30-lab-vm-3cpu/probe/manifest.toml"));
        assert!(list.contains("2026-11-29-lab-vm-4cpu/probe/manifest.toml"));
        assert!(source_tree_classifier().join(SHIPPED_MODEL).is_file());
    }

    /// The whole path after the runs, with a stand-in Python that logs its arguments and writes
    /// what the trainer and the evaluator would.
    #[test]
    fn after_the_runs_it_trains_then_scores_the_shipped_model_on_the_same_runs() {
        let script = r#"#!/bin/sh
echo "$@" >> "$(dirname "$0")/args.log"
case "$2" in
asa_classifier.train)
  while [ $# -gt 0 ]; do [ "$1" = --out ] && out=$2; shift; done
  mkdir -p "$out"; : > "$out/classifier.onnx"
  echo '{"heldout_runs": ["S1-eevdf-r1", "S2-cosmos-r2"], "raw": {"ticks": 40, "accuracy": 0.97}, "voted": {"accuracy": 0.99}}' > "$out/report.json";;
asa_classifier.evaluate)
  while [ $# -gt 0 ]; do [ "$1" = --json ] && json=$2; shift; done
  echo '{"all": {"runs": 8, "ticks": 160, "raw": 0.85, "voted": 0.875, "classes_unknown_to_model": ["network"]}, "heldout": {"runs": 2, "ticks": 40, "raw": 0.8, "voted": 0.85}}' > "$json";;
esac
"#;
        let root = classifier_folder(Some(script));
        let trainer = Trainer::check(&root.path().join("classifier")).unwrap();
        let cal = tempfile::tempdir().unwrap();
        let err = retrain(&trainer, cal.path(), &trainer.shipped_model(), 8).unwrap_err();
        assert!(err.to_string().contains("holds no recorded run"), "{err}");

        std::fs::create_dir_all(cal.path().join("features")).unwrap();
        std::fs::write(
            cal.path().join("features/manifest.toml"),
            "schema = \"asa.dataset\"\n[[run]]\nname = \"a\"\n[[run]]\nname = \"b\"\n",
        )
        .unwrap();
        let r = retrain(&trainer, cal.path(), &trainer.shipped_model(), 8).unwrap();
        assert_eq!((r.recorded_runs, r.measured_runs), (2, 8));
        assert_eq!(
            r.retrained,
            Accuracy {
                runs: 2,
                ticks: 40,
                raw: 0.97,
                voted: 0.99
            }
        );
        assert_eq!(r.shipped_heldout.unwrap().voted, 0.85);
        assert_eq!(r.shipped_all.runs, 8);
        assert_eq!(r.unknown_to_shipped, ["network"]);
        assert!(r.needs_retrained());
        assert!(r.model.ends_with("model/classifier.onnx") && r.model.is_absolute());
        let log = std::fs::read_to_string(trainer.classifier.join(".venv/bin/args.log")).unwrap();
        let lines: Vec<&str> = log.lines().collect();
        // The import check, the training, then the evaluation on the training's held-out runs.
        assert_eq!(lines.len(), 3, "{log}");
        assert!(lines[1].starts_with("-m asa_classifier.train"), "{log}");
        assert!(lines[2].starts_with("-m asa_classifier.evaluate"), "{log}");
        assert!(lines[2].contains("model/report.json"), "{log}");
    }

    #[test]
    fn the_report_says_this_machine_needs_the_retrained_model_when_the_shipped_one_falls_short() {
        let r = retrained(0.884, 0.93);
        assert!(r.needs_retrained());
        let text = markdown(&r, Path::new("cal/mapping.toml"));
        assert!(text.contains("## Classifier on this machine"), "{text}");
        assert!(
            text.contains("(80 of 80 runs, `cal/features/manifest.toml`)"),
            "{text}"
        );
        assert!(
            text.contains("| shipped, held-out runs | 20 | 400 | 0.874 | 0.884 |"),
            "{text}"
        );
        assert!(
            text.contains("| retrained, held-out runs | 20 | 400 | 0.920 | 0.930 |"),
            "{text}"
        );
        assert!(
            text.contains("| shipped, every recorded run | 80 |"),
            "{text}"
        );
        assert!(
            text.contains("**This machine needs the retrained model.**"),
            "{text}"
        );
        assert!(
            text.contains(
                "sudo asa run --model cal/model/classifier.onnx --mapping cal/mapping.toml"
            ),
            "{text}"
        );
    }

    #[test]
    fn the_report_keeps_the_shipped_model_where_it_holds() {
        // At the bar: holds, whatever the retrained one scores.
        let r = retrained(0.95, 0.99);
        assert!(!r.needs_retrained());
        let text = markdown(&r, Path::new("cal/mapping.toml"));
        assert!(
            text.contains("**The shipped model holds on this machine.**"),
            "{text}"
        );
        assert!(
            text.contains(
                "--model classifier/models/default/classifier.onnx --mapping cal/mapping.toml"
            ),
            "{text}"
        );
        // Below the bar but the retrained model is no better: nothing to gain.
        assert!(!retrained(0.80, 0.80).needs_retrained());
    }
}
