"""The per-application class model: trained on labelled application rows (apps.py), evaluated
with scenarios held out, exported as one ONNX model the agent loads like the workload model.

    python -m asa_classifier.train_apps DATASET_DIR [DATASET_DIR ...] --out MODEL.onnx --report DIR \
        [--folds 5] [--seed 0] [--members xgboost,random_forest,svm] [--svm-max-ticks N]

The ensemble is the workload model's (ensemble.py: XGBoost + RandomForest + SVM, soft voting,
production sizes), with every class weighing the same (background rows, the machine's idle
services, are most of the data) and the SVM seeing the heavy-tailed rates and sizes as
log(1 + x), inside the exported graph (apps.LOG1P_FEATURES), so the agent feeds raw features.

Evaluation: leave-scenarios-out folds (grouped K-fold on the manifest's scenario name, or the
run name where a run has none): every row is predicted once, by the ensemble trained on the
other folds' scenarios. A class with no training rows in a fold is absent from that fold's
model (its rows there are necessarily wrong; the fold lists it). The report: overall accuracy
(per row), balanced accuracy (mean of the per-class accuracies), per-class accuracy (recall)
and precision, rows per class, the confusion matrix, each member's accuracy, the share of
applications whose majority prediction is right, and each fold.

Writes MODEL.onnx (trained on every row), DIR/report.json and DIR/report.md; fails if the
exported model's probabilities differ from Python's by more than 1e-5.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path

import numpy as np
from sklearn.model_selection import GroupKFold

from .apps import APP_CLASSES, APP_SCHEMA, LOG1P_FEATURES, AppRows, load_datasets
from .ensemble import MEMBERS, Ensemble, train
from .export import OnnxClassifier
from .report import confusion_lines, metrics
from .train import export_checked, latency_us

REPORT_SCHEMA = "asa.app-classifier-report"
REPORT_VERSION = 1
EXPORT_CHECK_ROWS = 50_000


def class_indices(rows: AppRows, classes=APP_CLASSES) -> np.ndarray:
    index = {c: i for i, c in enumerate(classes)}
    return np.array([index[label] for label in rows.labels], dtype=np.int64)


def groups_of(rows: AppRows) -> np.ndarray:
    """The held-out unit of each row: its scenario, or its run when the manifest names none."""
    return np.array([s or f"run:{r}" for s, r in zip(rows.scenario, rows.run)], dtype=object)


def log_columns() -> tuple[int, ...]:
    return tuple(APP_SCHEMA.features.index(f) for f in LOG1P_FEATURES)


def fit(x: np.ndarray, y: np.ndarray, classes, seed: int = 0, small: bool = False,
        members: tuple[str, ...] = MEMBERS, svm_max_ticks: int | None = None) -> Ensemble:
    """The app model's ensemble: class-balanced, the SVM on log(1 + x) of LOG1P_FEATURES."""
    return train(x, y, list(classes), seed=seed, small=small, members=members, svm_max_ticks=svm_max_ticks,
                 balanced=True, svm_log_columns=log_columns())


def fit_present(x: np.ndarray, y: np.ndarray, n_classes: int, **options) -> tuple[Ensemble, np.ndarray]:
    """An ensemble on the classes present in `y` (indices into the full class list) and those
    indices; a fold's training scenarios may lack a class."""
    present = np.unique(y)
    if len(present) < 2:
        raise ValueError(f"a fold's training rows hold {len(present)} class(es); record more scenarios")
    remap = np.full(n_classes, -1, dtype=np.int64)
    remap[present] = np.arange(len(present))
    return fit(x, remap[y], [str(c) for c in present], **options), present


def expand(probabilities: np.ndarray, present: np.ndarray, n_classes: int) -> np.ndarray:
    """Probabilities over `present` classes as columns of all `n_classes` (0 for the others)."""
    full = np.zeros((len(probabilities), n_classes), dtype=np.float64)
    full[:, present] = probabilities
    return full


def cross_validate(rows: AppRows, folds: int, classes=APP_CLASSES, **options) -> tuple[dict, list[dict]]:
    """Leave-scenarios-out predictions: ({"ensemble" and each member: probabilities [rows, C]},
    one description per fold)."""
    groups = groups_of(rows)
    n_groups = len(set(groups.tolist()))
    if n_groups < 2:
        raise ValueError(f"leave-scenarios-out evaluation needs two scenarios or more, the data has {n_groups}")
    y = class_indices(rows, classes)
    n_classes = len(classes)
    probabilities: dict[str, np.ndarray] = {}
    descriptions = []
    splitter = GroupKFold(n_splits=min(folds, n_groups))
    for k, (train_idx, test_idx) in enumerate(splitter.split(rows.x, y, groups)):
        ensemble, present = fit_present(rows.x[train_idx], y[train_idx], n_classes, **options)
        x_test = rows.x[test_idx]
        outputs = {"ensemble": ensemble.predict_proba(x_test), **ensemble.member_probabilities(x_test)}
        for name, p in outputs.items():
            probabilities.setdefault(name, np.zeros((len(y), n_classes)))[test_idx] = expand(p, present, n_classes)
        predicted = probabilities["ensemble"][test_idx].argmax(axis=1)
        descriptions.append({
            "fold": k, "heldout_scenarios": sorted(set(groups[test_idx].tolist())),
            "rows": int(len(test_idx)),
            "rows_per_class": {c: int(np.sum(y[test_idx] == i)) for i, c in enumerate(classes)},
            "accuracy": float(np.mean(predicted == y[test_idx])),
            "balanced_accuracy": balanced_accuracy(y[test_idx], predicted, n_classes),
            "classes_not_in_training": [classes[i] for i in range(n_classes) if i not in set(present.tolist())],
        })
    return probabilities, descriptions


def per_class_accuracy(y: np.ndarray, predicted: np.ndarray, n_classes: int) -> list[float | None]:
    """The share of each class's rows predicted as that class (None: no row)."""
    return [float(np.mean(predicted[y == c] == c)) if np.any(y == c) else None for c in range(n_classes)]


def balanced_accuracy(y: np.ndarray, predicted: np.ndarray, n_classes: int) -> float | None:
    """The mean of the per-class accuracies over the classes with rows."""
    scores = [a for a in per_class_accuracy(y, predicted, n_classes) if a is not None]
    return float(np.mean(scores)) if scores else None


def app_majority(rows: AppRows, y: np.ndarray, predicted: np.ndarray, classes=APP_CLASSES) -> dict:
    """Per class: the applications (of a run, with that label) and the share whose most frequent
    prediction is their class (the agent decides per application over several ticks)."""
    ids = rows.app_ids()
    apps: dict[tuple[str, int], list[int]] = {}
    for app, label, p in zip(ids, y.tolist(), predicted.tolist()):
        apps.setdefault((app, label), []).append(p)
    out = {}
    for c, name in enumerate(classes):
        votes = [np.bincount(p, minlength=len(classes)).argmax() == c for (_, label), p in apps.items() if label == c]
        out[name] = {"apps": len(votes), "accuracy": float(np.mean(votes)) if votes else None}
    return out


def heldout_report(rows: AppRows, probabilities: dict, classes=APP_CLASSES) -> dict:
    """The held-out figures of the out-of-fold predictions."""
    y = class_indices(rows, classes)
    predicted = probabilities["ensemble"].argmax(axis=1)
    m = metrics(y, predicted.tolist(), list(classes))
    accuracy = per_class_accuracy(y, predicted, len(classes))
    return {
        "class_accuracy_heldout": {
            "overall": m["accuracy"], "balanced": balanced_accuracy(y, predicted, len(classes)),
            "per_class": dict(zip(classes, accuracy)), "rows": rows.rows_per_class(classes)},
        "precision_heldout": {c: m["per_class"][c]["precision"] for c in classes},
        # Rows: true class, columns: predicted class (every row has a prediction).
        "confusion_heldout": [row[:len(classes)] for row in m["confusion"]],
        "member_accuracy_heldout": {
            name: {"overall": float(np.mean(p.argmax(axis=1) == y)),
                   "balanced": balanced_accuracy(y, p.argmax(axis=1), len(classes))}
            for name, p in probabilities.items() if name != "ensemble"},
        "app_majority_heldout": app_majority(rows, y, predicted, classes),
    }


def class_medians(rows: AppRows, classes=APP_CLASSES) -> dict[str, list[float]]:
    """Each class's median row (feature by feature, APP_SCHEMA order, 4 significant digits):
    a typical application of the class, for checks of the exported model outside Python (the
    agent's test of the shipped model recognises each)."""
    out = {}
    for c in classes:
        x = rows.x[rows.labels == c]
        if len(x):
            out[c] = [float(f"{v:.4g}") for v in np.median(x.astype(np.float64), axis=0)]
    return out


def check_rows(rows: AppRows, limit: int = EXPORT_CHECK_ROWS, seed: int = 0) -> np.ndarray:
    """At most `limit` rows (seeded draw) to compare the exported model with Python on."""
    if len(rows) <= limit:
        return rows.x
    return rows.x[np.sort(np.random.default_rng(seed).choice(len(rows), size=limit, replace=False))]


def run(datasets: list[Path], out: Path, report_dir: Path, folds: int = 5, seed: int = 0, small: bool = False,
        members: tuple[str, ...] = MEMBERS, svm_max_ticks: int | None = None) -> dict:
    """Loads and labels the datasets, evaluates with scenarios held out, trains on every row,
    exports `out` and writes the report into `report_dir`; returns the report."""
    rows = load_datasets(datasets)
    counts = rows.rows_per_class()
    empty = [c for c, n in counts.items() if n == 0]
    if empty:
        raise ValueError(f"no labelled rows of class(es) {', '.join(empty)}: the app model outputs every class of "
                         f"the layer plan ({', '.join(APP_CLASSES)}); record loads of those classes")
    options = dict(seed=seed, small=small, members=members, svm_max_ticks=svm_max_ticks)
    probabilities, fold_list = cross_validate(rows, folds, **options)
    ensemble = fit(rows.x, class_indices(rows), APP_CLASSES, **options)
    date = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    names = ", ".join(str(d) for d in datasets)
    trained_on = (f"{names} ({len(rows)} application rows of {len(set(rows.run.tolist()))} runs; labels by "
                  f"asa_classifier.apps; class-balanced)")
    out.parent.mkdir(parents=True, exist_ok=True)
    x_check = check_rows(rows, seed=seed)
    export_diff = export_checked(ensemble, APP_SCHEMA, out, x_check, date, trained_on)
    result = {
        "schema": REPORT_SCHEMA, "version": REPORT_VERSION, "training_date": date,
        "datasets": [str(d) for d in datasets], "model": str(out), "model_bytes": out.stat().st_size,
        "app_feature_schema": APP_SCHEMA.name, "app_feature_schema_version": APP_SCHEMA.version,
        "features": list(APP_SCHEMA.features), "classes": list(APP_CLASSES),
        "rows": {"total": len(rows), "per_class": counts, "runs": len(set(rows.run.tolist())),
                 "scenarios": len(set(groups_of(rows).tolist())), "dropped": rows.dropped,
                 "runs_without_apps_file": rows.skipped_runs},
        "ensemble": {"weights": ensemble.weights, "class_weights": "balanced",
                     "svm_log1p_features": list(LOG1P_FEATURES)},
        "evaluation": f"leave-scenarios-out, grouped {len(fold_list)}-fold on the scenario name",
        **heldout_report(rows, probabilities),
        "class_medians": class_medians(rows),
        "folds": fold_list,
        "export_max_abs_diff": export_diff, "export_check_rows": int(len(x_check)),
        "python_onnxruntime_latency_us": latency_us(OnnxClassifier(out, APP_SCHEMA), x_check),
    }
    report_dir.mkdir(parents=True, exist_ok=True)
    (report_dir / "report.json").write_text(json.dumps(result, indent=1) + "\n")
    (report_dir / "report.md").write_text(markdown(result))
    return result


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.3f}"


def markdown(result: dict) -> str:
    """The report's Markdown: the data, the held-out figures by class, the confusion matrix, the folds."""
    classes = result["classes"]
    acc, rows = result["class_accuracy_heldout"], result["rows"]
    lines = [
        f"# Application class model report ({result['training_date']})", "",
        f"Datasets: {', '.join(f'`{d}`' for d in result['datasets'])}; {rows['total']} labelled application rows "
        f"of {rows['runs']} runs, {rows['scenarios']} scenarios (runs without an apps file: "
        f"{len(rows['runs_without_apps_file'])}; rows dropped: "
        + ", ".join(f"{k} {v}" for k, v in rows["dropped"].items()) + "). "
        f"Features {result['app_feature_schema']} v{result['app_feature_schema_version']}; ensemble weights "
        f"{result['ensemble']['weights']}, classes balanced, the SVM on log(1 + x) of "
        f"{', '.join(result['ensemble']['svm_log1p_features'])}. Model `{result['model']}` "
        f"({result['model_bytes'] / 1e6:.2f} MB, trained on every row; ONNX vs Python max |diff| "
        f"{result['export_max_abs_diff']:.1e}; one-row inference in Python onnxruntime p50 "
        f"{result['python_onnxruntime_latency_us']['p50']:.0f} us, p99 {result['python_onnxruntime_latency_us']['p99']:.0f} us).",
        "",
        f"## Held out by scenario ({result['evaluation']})", "",
        f"Accuracy {_fmt(acc['overall'])} per row, balanced (mean over classes) {_fmt(acc['balanced'])}. Members: "
        + ", ".join(f"{k} {_fmt(v['overall'])} / balanced {_fmt(v['balanced'])}"
                    for k, v in result["member_accuracy_heldout"].items()) + ".", "",
        "| class | rows | accuracy (recall) | precision | applications | right by majority |",
        "|---|---|---|---|---|---|",
    ]
    for c in classes:
        apps = result["app_majority_heldout"][c]
        lines.append(f"| {c} | {acc['rows'][c]} | {_fmt(acc['per_class'][c])} | {_fmt(result['precision_heldout'][c])} "
                     f"| {apps['apps']} | {_fmt(apps['accuracy'])} |")
    lines += ["", "Confusion matrix (rows: true, columns: predicted):", ""]
    lines += confusion_lines(classes, result["confusion_heldout"])
    lines += ["", "## Folds", "", "| fold | held-out scenarios | rows | accuracy | balanced | classes not in training |",
              "|---|---|---|---|---|---|"]
    for f in result["folds"]:
        lines.append(f"| {f['fold']} | {', '.join(f['heldout_scenarios'])} | {f['rows']} | {_fmt(f['accuracy'])} "
                     f"| {_fmt(f['balanced_accuracy'])} | {', '.join(f['classes_not_in_training']) or '-'} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m asa_classifier.train_apps", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("datasets", type=Path, nargs="+", metavar="DATASET_DIR",
                        help="a dataset folder (its manifest.toml) or a manifest file; several are combined")
    parser.add_argument("--out", type=Path, required=True, help="the ONNX model to write")
    parser.add_argument("--report", type=Path, required=True, help="folder for report.json and report.md")
    parser.add_argument("--folds", type=int, default=5, help="leave-scenarios-out folds (at most one per scenario)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--members", default=",".join(MEMBERS),
                        help=f"comma-separated subset of {','.join(MEMBERS)} (default: all)")
    parser.add_argument("--svm-max-ticks", type=int, default=None,
                        help="training rows the SVM sees (a subsample with as many of every class; default: the production size)")
    args = parser.parse_args(argv)
    if args.folds < 2:
        parser.error("--folds must be 2 or more")
    result = run(args.datasets, args.out, args.report, args.folds, args.seed,
                 members=tuple(m for m in args.members.split(",") if m), svm_max_ticks=args.svm_max_ticks)
    acc = result["class_accuracy_heldout"]
    print(f"{result['rows']['total']} rows, {len(result['folds'])} leave-scenarios-out folds: accuracy "
          f"{acc['overall']:.4f}, balanced {acc['balanced']:.4f} ("
          + ", ".join(f"{c} {_fmt(a)}" for c, a in acc["per_class"].items())
          + f"); wrote {args.out} and {args.report}")


if __name__ == "__main__":
    main()
