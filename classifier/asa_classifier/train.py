"""Train, evaluate on held-out runs, export.

    python -m asa_classifier.train --manifest DATA/manifest.toml [--manifest MORE/manifest.toml] \
        [--manifests-from LIST] --feature-schema ../agent/feature_schema.toml [--feature-schema-version V] --out OUT \
        [--heldout-fraction 0.25] [--seed 0] \
        [--classes label|load] [--members xgboost,random_forest,svm] [--svm-max-ticks N] [--other-splits K] \
        [--older-as-missing] [--heldout-from MANIFEST]

`--classes load` trains on the background load only (`game+xz_compress` -> `xz_compress`).
`--older-as-missing` also takes recordings of older feature versions, their newer features
missing (NaN) on every tick (`compare` measures whether that helps); `--heldout-from` then
draws the held-out runs from the newest recordings only (among the --manifest), so the
accuracy is measured on ticks with every feature, as the agent sees them.
`--manifests-from LIST` adds the manifests a list file names (one a line, relative to the
list's folder, `#` comments): `models/lab/recordings.txt` is the lab model's recordings, which
`asa calibrate --retrain` trains on with the machine's own. A run name found both in a
`--heldout-from` manifest and in a training-only one keeps its name in the former and is
qualified with its manifest's folder in the latter (`DIR/S1-eevdf-r1`).

Writes OUT/classifier.onnx (trained on the training runs only, so the report describes it),
OUT/report.md and OUT/report.json (held-out runs: raw and voted metrics, the split, the
manifest's machine and schema), and checks that the ONNX model reproduces the Python
probabilities on the held-out ticks within 1e-5.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from .dataset import CLASS_SETS, load_manifest, merge, relabel, split_by_run, stack
from .ensemble import MEMBERS, Ensemble, train
from .export import OnnxClassifier, to_onnx
from .report import evaluate, markdown
from .schema import FeatureSchema, ignored_columns
from .voting import DEFAULT_DECAY, DEFAULT_THRESHOLD, DEFAULT_WINDOW

EXPORT_TOLERANCE = 1e-5


def latency_us(model: OnnxClassifier, x: np.ndarray, rounds: int = 300) -> dict:
    """Single-row inference latency of the exported model (one thread), p50/p99 in microseconds."""
    rows = [x[i % len(x)][None, :] for i in range(rounds + 30)]
    for row in rows[:30]:
        model.predict_proba(row)
    samples = []
    for row in rows[30:]:
        started = time.perf_counter()
        model.predict_proba(row)
        samples.append((time.perf_counter() - started) * 1e6)
    return {"p50": float(np.percentile(samples, 50)), "p99": float(np.percentile(samples, 99))}


def export_checked(ensemble: Ensemble, schema: FeatureSchema, path: Path, x: np.ndarray, training_date: str,
                   trained_on: str) -> float:
    """Writes the ensemble as one ONNX model to `path` and returns the largest |difference|
    between its probabilities (run as the agent runs it) and Python's on `x`; exits above
    EXPORT_TOLERANCE."""
    onnx.save(to_onnx(ensemble, schema, trained_on=trained_on, training_date=training_date), str(path))
    diff = float(np.abs(ensemble.predict_proba(x) - OnnxClassifier(path, schema).predict_proba(x)).max())
    if diff > EXPORT_TOLERANCE:
        raise SystemExit(f"exported model differs from Python by {diff} (> {EXPORT_TOLERANCE})")
    return diff


def read_manifest_list(path: Path) -> list[Path]:
    """The manifests a list file names: one a line, relative to the list's folder; blank lines
    and `#` comments are skipped. A listed manifest that does not exist is an error."""
    manifests = []
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        manifest = (Path(path).parent / line).resolve()
        if not manifest.is_file():
            raise ValueError(f"{path}:{number}: {line} does not exist ({manifest})")
        manifests.append(manifest)
    if not manifests:
        raise ValueError(f"{path}: lists no manifest")
    return manifests


def shown(path: str | Path) -> str:
    """A path as a report names it: relative to the working directory when it lies inside it (a
    shipped report must not carry the checkout's location), else as given."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def qualify_training_only(manifests: list[Path], loaded: list, heldout_from: list[Path]) -> None:
    """Run names must be unique over the merged manifests. A training-only manifest's run named
    like a run of a `heldout_from` manifest (a machine's calibration records `S1-eevdf-r1`, and
    so did the lab's scenario recording) is renamed `<its manifest's folder>/<name>`, so the
    held-out runs keep the names their own manifest gives them."""
    held = {r.name for path, data in zip(manifests, loaded) if path in heldout_from for r in data.runs}
    for path, data in zip(manifests, loaded):
        if path not in heldout_from:
            for r in data.runs:
                if r.name in held:
                    r.name = f"{shown(path.parent)}/{r.name}"


def run(manifest: Path | list[Path], schema: FeatureSchema, out: Path, heldout_fraction: float = 0.25, seed: int = 0,
        small: bool = False, members: tuple[str, ...] = MEMBERS, class_set: str = "label",
        svm_max_ticks: int | None = None, other_splits: int = 0, older_as_missing: bool = False,
        heldout_from: list[Path] | None = None, ignore: tuple[str, ...] = ()) -> dict:
    ignored = ignored_columns(schema, ignore)
    manifests = [manifest] if isinstance(manifest, (str, Path)) else list(manifest)
    if len(set(manifests)) != len(manifests):
        raise ValueError(f"a manifest is given twice: {', '.join(map(str, manifests))}")
    loaded = [load_manifest(m, schema, older_as_missing) for m in manifests]
    if heldout_from:
        # A manifest named by a list (absolute) and by --heldout-from (as typed) is one file.
        by_file = {Path(m).resolve(): m for m in manifests}
        missing = [h for h in heldout_from if Path(h).resolve() not in by_file]
        if missing:
            raise ValueError(f"--heldout-from {', '.join(map(str, missing))}: not among the manifests")
        heldout_from = [by_file[Path(h).resolve()] for h in heldout_from]
        qualify_training_only(manifests, loaded, heldout_from)
        for path, data in zip(manifests, loaded):
            if path not in heldout_from:
                for r in data.runs:
                    r.heldout = False  # training only
    dataset = merge(loaded)
    relabel(dataset.runs, class_set)
    manifest = ", ".join(shown(m) for m in manifests)
    classes = dataset.classes()
    fitted = fit_split(dataset.runs, classes, heldout_fraction, seed, small, members, svm_max_ticks, ignored)
    ensemble, train_runs, heldout_runs = fitted.ensemble, fitted.train_runs, fitted.heldout_runs
    x_test, y_test, test_runs = fitted.x_test, fitted.y_test, fitted.test_runs
    date = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    out.mkdir(parents=True, exist_ok=True)
    model_path = out / "classifier.onnx"
    export_diff = export_checked(ensemble, schema, model_path, x_test, date,
                                 f"{manifest} ({len(train_runs)} runs, classes by {class_set}, machine: {dataset.machine})")
    python_probs = ensemble.predict_proba(x_test)
    cost = latency_us(OnnxClassifier(model_path, schema), x_test)
    voting = dict(window=DEFAULT_WINDOW, threshold=DEFAULT_THRESHOLD, decay=DEFAULT_DECAY)
    members = {name: evaluate(p, y_test, test_runs, classes, voting)["raw"]["accuracy"]
               for name, p in ensemble.member_probabilities(x_test).items()}
    result = {
        "schema": "asa.classifier-report", "version": 1, "training_date": date,
        "manifest": str(manifest), "machine": dataset.machine,
        "feature_schema": schema.name, "feature_schema_version": schema.version,
        "classes": classes, "class_set": class_set, "weights": ensemble.weights, "voting": voting,
        "train_runs": [r.name for r in train_runs], "heldout_runs": [r.name for r in heldout_runs],
        "export_max_abs_diff": export_diff, "model_bytes": model_path.stat().st_size,
        "python_onnxruntime_latency_us": cost, "member_raw_accuracy": members,
        **evaluate(python_probs, y_test, test_runs, classes, voting),
    }
    result["per_run"] = per_run(python_probs, y_test, test_runs, classes, voting)
    result["other_splits"] = [split_accuracy(dataset.runs, classes, heldout_fraction, other, small, members,
                                             svm_max_ticks, voting, ignored)
                              for other in range(seed + 1, seed + 1 + other_splits)]
    if heldout_from:
        result["heldout_from"] = [shown(h) for h in heldout_from]
    result["ignored_features"] = [schema.features[i] for i in ignored]
    (out / "report.json").write_text(json.dumps(result, indent=1) + "\n")
    header = (f"# Workload classifier report ({date})\n\nManifest `{manifest}`, machine: {dataset.machine}; feature "
              f"schema {schema.name} v{schema.version}; {len(train_runs)} training runs, {len(heldout_runs)} held-out "
              f"runs (split by run{', drawn from ' + ', '.join(map(shown, heldout_from)) + ' only' if heldout_from else ''}): "
              f"{', '.join(result['heldout_runs'])}.\nEnsemble weights {ensemble.weights}; voting W={DEFAULT_WINDOW}, "
              f"theta={DEFAULT_THRESHOLD}, alpha={DEFAULT_DECAY}. "
              + (f"Ignored features (zero in training, masked in the model): {', '.join(result['ignored_features'])}. "
                 if ignored else "")
              + "Member raw accuracy: "
              + ", ".join(f"{k} {v:.4f}" for k, v in members.items())
              + f". ONNX vs Python max |diff| {export_diff:.1e}. Model {result['model_bytes'] / 1e6:.1f} MB; one-row "
              f"inference in Python onnxruntime p50 {cost['p50']:.0f} us, p99 {cost['p99']:.0f} us "
              "(the Rust figure: cargo bench -p asa-agent --bench decision with ASA_BENCH_MODEL).")
    if result["other_splits"]:
        raw = [s["raw"] for s in result["other_splits"]] + [result["raw"]["accuracy"]]
        voted = [s["voted"] for s in result["other_splits"]] + [result["voted"]["accuracy"]]
        header += (f"\n\nThe same training on {len(raw)} held-out splits (seeds {seed}..{seed + other_splits}; "
                   f"this model is seed {seed}): raw accuracy mean {np.mean(raw):.4f} (range {min(raw):.4f}-{max(raw):.4f}), "
                   f"voted mean {np.mean(voted):.4f} (range {min(voted):.4f}-{max(voted):.4f}).")
    per_run_lines = ["## Held-out runs", "", "| run | class | ticks | raw accuracy | voted accuracy |", "|---|---|---|---|---|"]
    per_run_lines += [f"| {r['run']} | {r['class']} | {r['ticks']} | {r['raw']:.3f} | {r['voted']:.3f} |"
                      for r in result["per_run"]]
    (out / "report.md").write_text(markdown(result, classes, header) + "\n".join(per_run_lines) + "\n")
    return result


@dataclass
class FittedSplit:
    """An ensemble trained on one split by run, with that split's held-out ticks."""

    ensemble: Ensemble
    train_runs: list
    heldout_runs: list
    x_test: np.ndarray
    y_test: np.ndarray
    test_runs: list[str]


def fit_split(runs, classes: list[str], heldout_fraction: float, seed: int, small: bool,
              members: tuple[str, ...], svm_max_ticks: int | None, ignored: tuple[int, ...] = ()) -> FittedSplit:
    """Splits `runs` by run with `seed` and trains the ensemble on the training side."""
    train_runs, heldout_runs = split_by_run(runs, heldout_fraction, seed)
    if not heldout_runs:
        raise SystemExit("no held-out run: record at least two runs of some class")
    x_train, y_train, _ = stack(train_runs, classes)
    x_test, y_test, test_runs = stack(heldout_runs, classes)
    ensemble = train(x_train, y_train, classes, seed=seed, small=small, members=members, svm_max_ticks=svm_max_ticks,
                     ignored=ignored)
    return FittedSplit(ensemble, train_runs, heldout_runs, x_test, y_test, test_runs)


def split_accuracy(runs, classes: list[str], heldout_fraction: float, seed: int, small: bool,
                   members: tuple[str, ...], svm_max_ticks: int | None, voting: dict,
                   ignored: tuple[int, ...] = ()) -> dict:
    """Held-out raw and voted accuracy of the same training on the split of `seed` (no export):
    how much the figure of one split owes to which runs it happened to hold out."""
    fitted = fit_split(runs, classes, heldout_fraction, seed, small, members, svm_max_ticks, ignored)
    m = evaluate(fitted.ensemble.predict_proba(fitted.x_test), fitted.y_test, fitted.test_runs, classes, voting)
    return {"seed": seed, "heldout_runs": len(fitted.heldout_runs), "ticks": m["raw"]["ticks"],
            "raw": m["raw"]["accuracy"], "voted": m["voted"]["accuracy"]}


def per_run(probabilities: np.ndarray, y_true: np.ndarray, runs: list[str], classes: list[str], voting: dict) -> list[dict]:
    """Raw and voted accuracy of each held-out run (the window restarts at each run)."""
    out = []
    names = np.array(runs)
    for name in dict.fromkeys(runs):
        mask = names == name
        m = evaluate(probabilities[mask], y_true[mask], [name] * int(mask.sum()), classes, voting)
        majority = int(np.bincount(y_true[mask]).argmax())
        out.append({"run": name, "class": classes[majority], "ticks": int(mask.sum()),
                    "raw": m["raw"]["accuracy"], "voted": m["voted"]["accuracy"]})
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--manifest", type=Path, action="append", default=[],
                        help="a dataset manifest; repeat to merge several")
    parser.add_argument("--manifests-from", type=Path, action="append", default=[], metavar="LIST",
                        help="a file listing manifests, one a line, relative to its folder (e.g. "
                             "models/lab/recordings.txt, the lab model's recordings); repeatable")
    parser.add_argument("--feature-schema", type=Path, required=True)
    parser.add_argument("--feature-schema-version", type=int, default=None,
                        help="train on the features of this older schema version (default: the file's version)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--heldout-fraction", type=float, default=0.25)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--classes", choices=CLASS_SETS, default="label",
                        help="label: the recorded labels; load: the background load only")
    parser.add_argument("--members", default=",".join(MEMBERS),
                        help=f"comma-separated subset of {','.join(MEMBERS)} (default: all)")
    parser.add_argument("--svm-max-ticks", type=int, default=None,
                        help="training ticks the SVM sees (a stratified subsample; default: the production size)")
    parser.add_argument("--other-splits", type=int, default=0,
                        help="also train on this many other held-out splits and report the accuracy's spread")
    parser.add_argument("--older-as-missing", action="store_true",
                        help="also train on recordings of older feature versions (newer features missing)")
    parser.add_argument("--heldout-from", type=Path, action="append", default=None,
                        help="draw the held-out runs from this manifest only (one of --manifest; repeat for several)")
    parser.add_argument("--ignore-features", default="",
                        help="comma-separated features the model must not use (zeroed in training, masked in the model)")
    args = parser.parse_args(argv)
    manifests = [m for listed in args.manifests_from for m in read_manifest_list(listed)] + args.manifest
    if not manifests:
        parser.error("give the recordings with --manifest or --manifests-from")
    schema = FeatureSchema.load(args.feature_schema)
    if args.feature_schema_version is not None:
        schema = schema.as_of(args.feature_schema_version)
    result = run(manifests, schema, args.out, args.heldout_fraction, args.seed,
                 members=tuple(m for m in args.members.split(",") if m), class_set=args.classes,
                 svm_max_ticks=args.svm_max_ticks, other_splits=args.other_splits,
                 older_as_missing=args.older_as_missing, heldout_from=args.heldout_from,
                 ignore=tuple(f for f in args.ignore_features.split(",") if f))
    print(f"held-out ticks {result['raw']['ticks']}: raw accuracy {result['raw']['accuracy']:.4f}, "
          f"voted {result['voted']['accuracy']:.4f} (coverage {result['voted']['coverage']:.4f}); wrote {args.out}")
    for other in result["other_splits"]:
        print(f"  split seed {other['seed']}: {other['ticks']} held-out ticks, raw {other['raw']:.4f}, voted {other['voted']:.4f}")


if __name__ == "__main__":
    main()
