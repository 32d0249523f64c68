"""Does a model hold on a machine shape it was not trained on?

    python -m asa_classifier.shapes --feature-schema ../agent/feature_schema.toml \
        --shape 2cpu=A/manifest.toml[,B/manifest.toml] --shape 4cpu=C/manifest.toml \
        [--classes load] [--ignore-features a,b] [--splits 5] --out OUT

A *shape* is a set of recordings made on one kind of machine (CPU count, memory). For every
ordered pair of shapes (train, test) the ensemble is trained on every run of the training
shape and evaluated on every run of the other one (raw: argmax per tick; voted: Algorithm 1,
the window restarted per run): the accuracy a user of another machine would see. Beside it, the
same training's accuracy *within* each shape (split by run, `--splits` seeds, held-out runs of
that shape only), so the loss owed to the shape is the difference, not the raw figure.

`adapted` is the path a user of a new shape takes when it does not hold (`asa calibrate
--retrain`): the model also learns from half of the new shape's runs and is tested on the other
half (2 folds, each class's runs dealt alternately).

Per feature, the drift between shapes: for each class both shapes have, the difference of the
class's medians in units of the training shape's interquartile range (a robust z), the median
over the classes. A feature that counts events over all CPUs (switches per second) is expected
to drift with the CPU count; a share per CPU is not.

Writes OUT/shapes.json and OUT/shapes.md, and with `--summary-between` OUT/summary.json
(issue 41's figures; shapes given as unions of others, `2+4cpu=A,C` beside `2cpu=A` and
`4cpu=C`, train on several shapes and do not count as shapes of their own). `heldout_shape_accuracy` is the lowest voted accuracy
over the ordered pairs evaluated (the shape left out of training; `--pair TRAIN->TEST` limits
them, e.g. to the direction whose training shape has the recordings a model ships with). No
model is exported.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path

import numpy as np

from .dataset import CLASS_SETS, load_manifest, merge, relabel, split_by_run, stack
from .ensemble import train
from .report import evaluate
from .schema import FeatureSchema, ignored_columns
from .voting import DEFAULT_DECAY, DEFAULT_THRESHOLD, DEFAULT_WINDOW

VOTING = dict(window=DEFAULT_WINDOW, threshold=DEFAULT_THRESHOLD, decay=DEFAULT_DECAY)


def parse_shape(spec: str) -> tuple[str, list[Path]]:
    """`NAME=PATH[,PATH...]` -> (NAME, [PATH, ...])."""
    name, sep, paths = spec.partition("=")
    if not sep or not name or not paths:
        raise ValueError(f"--shape {spec!r}: expected NAME=MANIFEST[,MANIFEST...]")
    return name, [Path(p) for p in paths.split(",")]


def load_shape(paths: list[Path], schema: FeatureSchema, class_set: str):
    """Every run of the shape's recordings, relabelled to `class_set`."""
    dataset = merge([load_manifest(p, schema) for p in paths])
    relabel(dataset.runs, class_set)
    return dataset


def _recalls(m: dict, classes: list[str]) -> dict:
    return {c: m["per_class"][c]["recall"] for c in classes if c in m.get("per_class", {})}


def _confused_with(confusion: list[list[int]], classes: list[str]) -> dict:
    """Per class: the wrong answer it got most often (the last column is "no decision")."""
    out = {}
    for k, row in enumerate(confusion):
        wrong = [(n, j) for j, n in enumerate(row) if j != k and n]
        if wrong:
            n, j = max(wrong)
            out[classes[k]] = classes[j] if j < len(classes) else "no decision"
    return out


def cross(train_runs, test_runs, classes: list[str], ignored: tuple[int, ...], small: bool, seed: int = 0) -> dict:
    """Train on `train_runs`, evaluate on every run of `test_runs`."""
    x_train, y_train, _ = stack(train_runs, classes)
    x_test, y_test, names = stack(test_runs, classes)
    ensemble = train(x_train, y_train, classes, seed=seed, small=small, ignored=ignored)
    m = evaluate(ensemble.predict_proba(x_test), y_test, names, classes, VOTING)
    return {"train_runs": len(train_runs), "test_runs": len(test_runs), "ticks": m["raw"]["ticks"],
            "raw": m["raw"]["accuracy"], "voted": m["voted"]["accuracy"],
            "voted_recall": _recalls(m["voted"], classes),
            "voted_confused_with": _confused_with(m["voted"]["confusion"], classes)}


def halves(runs, seed: int = 0) -> tuple[list, list]:
    """Two halves of `runs`, each class's runs dealt alternately (by name, shuffled by `seed`)."""
    import random
    groups: dict[str, list] = {}
    for r in runs:
        groups.setdefault(max(sorted(set(r.labels)), key=r.labels.count), []).append(r)
    a, b = [], []
    rng = random.Random(seed)
    for label in sorted(groups):
        group = sorted(groups[label], key=lambda r: r.name)
        rng.shuffle(group)
        a += group[0::2]
        b += group[1::2]
    return a, b


def adapted(train_runs, test_runs, classes: list[str], ignored: tuple[int, ...], small: bool) -> dict:
    """What recording on the new shape buys (`asa calibrate --retrain`): train on the training
    shape and one half of the new shape's runs, test on the other half, then swap (2 folds)."""
    a, b = halves(test_runs)
    probs, ys, names = [], [], []
    for learn, test in ((a, b), (b, a)):
        if not learn or not test:
            return {"folds": 0}
        x_test, y_test, n = stack(test, classes)
        x_train, y_train, _ = stack(train_runs + learn, classes)
        probs.append(train(x_train, y_train, classes, small=small, ignored=ignored).predict_proba(x_test))
        ys.append(y_test)
        names += n
    m = evaluate(np.concatenate(probs), np.concatenate(ys), names, classes, VOTING)
    return {"folds": 2, "ticks": m["raw"]["ticks"], "raw": m["raw"]["accuracy"], "voted": m["voted"]["accuracy"]}


def within(runs, classes: list[str], ignored: tuple[int, ...], small: bool, splits: int,
           heldout_fraction: float) -> dict:
    """The same training's accuracy inside one shape: `splits` splits by run."""
    raw, voted = [], []
    for seed in range(splits):
        train_runs, held = split_by_run(runs, heldout_fraction, seed)
        present = {label for r in train_runs for label in r.labels}
        if not held or present != set(classes):
            continue
        c = cross(train_runs, held, classes, ignored, small, seed)
        raw.append(c["raw"])
        voted.append(c["voted"])
    if not raw:
        return {"splits": 0}
    return {"splits": len(raw), "raw_mean": float(np.mean(raw)), "voted_mean": float(np.mean(voted)),
            "voted_min": float(np.min(voted)), "voted_max": float(np.max(voted))}


def drift(a_runs, b_runs, classes: list[str], features: list[str]) -> list[dict]:
    """Per feature: the median over shared classes of (median_b - median_a) / IQR_a."""
    xa, ya, _ = stack(a_runs, classes)
    xb, yb, _ = stack(b_runs, classes)
    out = []
    for j, name in enumerate(features):
        zs, ratios = [], []
        for k in range(len(classes)):
            a = xa[ya == k, j]
            b = xb[yb == k, j]
            a, b = a[np.isfinite(a)], b[np.isfinite(b)]
            if len(a) < 4 or len(b) < 4:
                continue
            q1, q3 = np.percentile(a, [25, 75])
            # A feature constant within a class (IQR 0) is scaled by its spread over all ticks.
            scale = max(q3 - q1, float(np.std(xa[:, j][np.isfinite(xa[:, j])])), 1e-9)
            zs.append((np.median(b) - np.median(a)) / scale)
            if np.median(a) > 0:
                ratios.append(np.median(b) / np.median(a))
        if zs:
            out.append({"feature": name, "robust_z": float(np.median(zs)),
                        "median_ratio": float(np.median(ratios)) if ratios else None})
    return sorted(out, key=lambda d: -abs(d["robust_z"]))


def shapes(schema: FeatureSchema, named: list[tuple[str, list[Path]]], class_set: str = "load",
           ignore: tuple[str, ...] = (), splits: int = 5, heldout_fraction: float = 0.25,
           small: bool = False, only: list[tuple[str, str]] | None = None) -> dict:
    """Every ordered pair of shapes (or the pairs of `only`): train on one, test on the other;
    and each shape alone."""
    if len(named) < 2:
        raise ValueError("need at least two shapes")
    if len({n for n, _ in named}) != len(named):
        raise ValueError("shape names must differ")
    ignored = ignored_columns(schema, ignore)
    data = {name: load_shape(paths, schema, class_set) for name, paths in named}
    classes = sorted(set.intersection(*(set(d.classes()) for d in data.values())))
    if len(classes) < 2:
        raise ValueError(f"the shapes share fewer than two classes ({classes})")
    runs = {n: [r for r in d.runs if set(r.labels) <= set(classes)] for n, d in data.items()}
    names = [n for n, _ in named]
    for a, b in only or []:
        if a not in names or b not in names or a == b:
            raise ValueError(f"pair {a}->{b}: both must be shapes given, and differ ({', '.join(names)})")
    pairs = []
    for a in names:
        for b in names:
            if a != b and (not only or (a, b) in only):
                pairs.append({"train": a, "test": b, **cross(runs[a], runs[b], classes, ignored, small),
                              "adapted": adapted(runs[a], runs[b], classes, ignored, small)})
    result = {
        "schema": "asa.classifier-shapes", "version": 1,
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "feature_schema": schema.name, "feature_schema_version": schema.version,
        "class_set": class_set, "classes": classes, "voting": VOTING,
        "ignored_features": [schema.features[i] for i in ignored],
        "shapes": {n: {"manifests": [str(p) for p in paths], "machine": data[n].machine,
                       "runs": len(runs[n]), "within": within(runs[n], classes, ignored, small, splits,
                                                              heldout_fraction)}
                   for n, paths in named},
        "pairs": pairs,
        "drift": {f"{p['train']}->{p['test']}": drift(runs[p["train"]], runs[p["test"]], classes, schema.features)
                  for p in pairs},
    }
    result["heldout_shape_accuracy"] = min(p["voted"] for p in pairs)
    return result


def markdown(report: dict) -> str:
    lines = [f"# Across machine shapes ({report['date']})", "",
             f"Classes ({len(report['classes'])}, by {report['class_set']}): {', '.join(report['classes'])}.", "",
             "| trained on | tested on | train runs | test runs | ticks | raw | voted | voted, with half the test "
             "shape's runs in training (2 folds) |", "|---|---|---|---|---|---|---|---|"]
    for p in report["pairs"]:
        ad = p["adapted"]
        lines.append(f"| {p['train']} | {p['test']} | {p['train_runs']} | {p['test_runs']} | {p['ticks']} | "
                     f"{p['raw']:.3f} | {p['voted']:.3f} | " + (f"{ad['voted']:.3f} |" if ad.get("folds") else "- |"))
    lines += ["", "Within each shape (split by run):", "", "| shape | runs | splits | raw mean | voted mean (range) |",
              "|---|---|---|---|---|"]
    for n, s in report["shapes"].items():
        w = s["within"]
        if w.get("splits"):
            lines.append(f"| {n} | {s['runs']} | {w['splits']} | {w['raw_mean']:.3f} | {w['voted_mean']:.3f} "
                         f"({w['voted_min']:.3f}-{w['voted_max']:.3f}) |")
        else:
            lines.append(f"| {n} | {s['runs']} | 0 | - | - |")
    for key, rows in report["drift"].items():
        lines += ["", f"Most drifted features, {key} (median over classes of the median's move / training IQR):", "",
                  "| feature | robust z | median ratio |", "|---|---|---|"]
        for d in rows[:10]:
            ratio = "-" if d["median_ratio"] is None else f"{d['median_ratio']:.2f}"
            lines.append(f"| {d['feature']} | {d['robust_z']:+.1f} | {ratio} |")
    lines += ["", "Voted recall per class when tested on the other shape (its most frequent wrong answer):", "",
              "| class | " + " | ".join(f"{p['train']}->{p['test']}" for p in report["pairs"]) + " |",
              "|---|" + "---|" * len(report["pairs"])]
    for c in report["classes"]:
        lines.append(f"| {c} | " + " | ".join(
            f"{p['voted_recall'].get(c, float('nan')):.2f}"
            + (f" ({p['voted_confused_with'][c]})" if c in p["voted_confused_with"] else "")
            for p in report["pairs"]) + " |")
    return "\n".join(lines) + "\n"


TARGET = 0.95
"""Issue 41's target for the voted accuracy on a shape left out of training."""


def base_shapes(named: list[tuple[str, list[Path]]]) -> list[str]:
    """The shapes that are recordings of one machine shape: every shape given whose manifests
    are not the union of two or more other shapes' (`2+4cpu=A,B` beside `2cpu=A`, `4cpu=B`)."""
    sets = {name: frozenset(paths) for name, paths in named}
    out = []
    for name, own in sets.items():
        parts = [m for other, m in sets.items() if other != name and m < own]
        covered = frozenset().union(*parts) if parts else frozenset()
        if not (len(parts) >= 2 and covered == own):
            out.append(name)
    return out


def summary(report: dict, named: list[tuple[str, list[Path]]], between: tuple[str, str],
            beyond: tuple[str, str] | None = None) -> dict:
    """Issue 41's acceptance figures from a report: `heldout_shape_accuracy` is the voted accuracy
    of the pair `between` (a model trained on shapes on both sides of the one it is tested on),
    `beyond_trained_shapes_accuracy` that of `beyond` (tested on a shape outside the trained
    range), each with the accuracy once half the test shape's runs are in training (`adapted`:
    the `asa calibrate --retrain` path)."""
    by = {(p["train"], p["test"]): p for p in report["pairs"]}
    for pair in filter(None, (between, beyond)):
        if pair not in by:
            raise ValueError(f"pair {pair[0]}->{pair[1]} was not evaluated")
    out = {"schema": "asa.model-across-shapes-summary", "version": 2,
           "classes": len(report["classes"]), "shapes": len(base_shapes(named)),
           "target": TARGET,
           "heldout_shape_accuracy": by[between]["voted"],
           "heldout_shape": between[1], "trained_on": between[0],
           "heldout_shape_accuracy_raw": by[between]["raw"],
           "heldout_shape_adapted_voted": by[between]["adapted"].get("voted"),
           "holds_between_trained_shapes": by[between]["voted"] >= TARGET}
    if beyond:
        out.update({"beyond_trained_shapes_accuracy": by[beyond]["voted"],
                    "beyond_shape": beyond[1], "beyond_trained_on": beyond[0],
                    "beyond_adapted_voted": by[beyond]["adapted"].get("voted"),
                    "holds_beyond_trained_shapes": by[beyond]["voted"] >= TARGET})
    out["pairs_voted"] = {f"{p['train']}->{p['test']}": p["voted"] for p in report["pairs"]}
    out["pairs_train_runs"] = {f"{p['train']}->{p['test']}": p["train_runs"] for p in report["pairs"]}
    return out


def parse_pair(spec: str) -> tuple[str, str]:
    """`TRAIN->TEST` -> (TRAIN, TEST)."""
    train_shape, sep, test_shape = spec.partition("->")
    if not sep or not train_shape or not test_shape:
        raise ValueError(f"--pair {spec!r}: expected TRAIN->TEST")
    return train_shape, test_shape


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--feature-schema", type=Path, required=True)
    parser.add_argument("--shape", action="append", required=True, metavar="NAME=MANIFEST[,MANIFEST...]",
                        help="a machine shape's recordings; at least two")
    parser.add_argument("--pair", action="append", default=[], metavar="TRAIN->TEST",
                        help="evaluate only these ordered pairs (default: every ordered pair)")
    parser.add_argument("--classes", choices=CLASS_SETS, default="load")
    parser.add_argument("--ignore-features", default="",
                        help="comma-separated features the models must not use (default: none)")
    parser.add_argument("--splits", type=int, default=5, help="splits of the within-shape baseline (default 5)")
    parser.add_argument("--heldout-fraction", type=float, default=0.25)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--summary-between", metavar="TRAIN->TEST",
                        help="also write OUT/summary.json (issue 41's figures): this pair's test shape lies "
                             "between its training shapes (its voted accuracy is heldout_shape_accuracy)")
    parser.add_argument("--summary-beyond", metavar="TRAIN->TEST",
                        help="with --summary-between: a pair whose test shape lies outside its training shapes")
    args = parser.parse_args(argv)
    schema = FeatureSchema.load(args.feature_schema)
    report = shapes(schema, [parse_shape(s) for s in args.shape], args.classes,
                    tuple(f for f in args.ignore_features.split(",") if f), args.splits, args.heldout_fraction,
                    only=[parse_pair(p) for p in args.pair] or None)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "shapes.json").write_text(json.dumps(report, indent=1) + "\n")
    (args.out / "shapes.md").write_text(markdown(report))
    if args.summary_between:
        named = [parse_shape(s) for s in args.shape]
        beyond = parse_pair(args.summary_beyond) if args.summary_beyond else None
        figures = summary(report, named, parse_pair(args.summary_between), beyond)
        (args.out / "summary.json").write_text(json.dumps(figures, indent=1) + "\n")
    print(markdown(report))


if __name__ == "__main__":
    main()
