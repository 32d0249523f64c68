"""Paired comparison of feature-schema versions: every version is tested on the same runs.

    python -m asa_classifier.compare --feature-schema ../agent/feature_schema.toml \
        --heldout-from NEWEST/manifest.toml [--heldout-from ...] [--manifest OTHER/manifest.toml ...] \
        --versions 1,2,3,3+older [--splits 5] [--heldout-fraction 0.25] [--classes load] \
        [--xgboost NAME=JSON ...] --out OUT

Split s (seed s) holds out runs of the `--heldout-from` recordings only (`split_by_run`, by
run), so every version's accuracy is measured on the same ticks. Version v trains on every
other run of the manifests recorded with v or newer: an older version may train on more
recordings (they lack the newer features), a newer one has more features. The report gives the
training-run count next to each accuracy, so that trade is visible. `V+older` trains version
V on the older recordings too, their newer features missing on every tick
(`load_manifest(older_as_missing=True)`). The `--heldout-from` recording must hold every
compared version's features (they are the newest ones).

`--xgboost NAME=JSON` (repeatable) trains every version with each of these XGBoost settings
(overrides of the production parameters, e.g. `d6={"max_depth": 6}`) instead of the production
ones alone: a variant is then `VERSION NAME`. The report pairs every variant with the first
one split by split (mean difference, its standard error, the splits where it is higher), since
the split-to-split spread is larger than most differences between variants.

Writes OUT/compare.json and OUT/compare.md. No model is exported: this chooses a feature
version or a model size; `train` builds the model.
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
from .schema import FeatureSchema, SchemaMismatch, ignored_columns
from .voting import DEFAULT_DECAY, DEFAULT_THRESHOLD, DEFAULT_WINDOW


def parse_variant(spec: str) -> tuple[int, bool, bool]:
    """`3` -> (3, False, False); `3+older` -> (3, True, False): also train on older recordings;
    a `-ignored` suffix (`3-ignored`, `3+older-ignored`): without the --ignore-features."""
    spec = str(spec)
    ignored = spec.endswith("-ignored")
    version, _, older = spec.removesuffix("-ignored").partition("+")
    if older not in ("", "older") or not version.isdigit():
        raise ValueError(f"version {spec!r}: expected N, N+older, N-ignored or N+older-ignored")
    return int(version), older == "older", ignored


def compare(schema: FeatureSchema, heldout_from: list[Path], manifests: list[Path], versions: list[str],
            splits: int = 5, heldout_fraction: float = 0.25, class_set: str = "load",
            small: bool = False, ignore: tuple[str, ...] = (), xgboost: dict[str, dict] | None = None) -> dict:
    """Trains one ensemble per (version, XGBoost setting, split) and evaluates it on that split's
    held-out runs."""
    if splits < 1 or not versions:
        raise ValueError("need at least one split and one version")
    variants = [(str(spec), *parse_variant(spec)) for spec in versions]
    if any(v[3] for v in variants) and not ignore:
        raise ValueError("a -ignored variant needs --ignore-features")
    heldout_from = list(dict.fromkeys(heldout_from))
    if not heldout_from:
        raise ValueError("need at least one --heldout-from recording")
    manifests = heldout_from + [m for m in dict.fromkeys(manifests) if m not in heldout_from]
    voting = dict(window=DEFAULT_WINDOW, threshold=DEFAULT_THRESHOLD, decay=DEFAULT_DECAY)
    # The held-out runs of each split, by name, drawn from the --heldout-from recordings.
    newest = merge([load_manifest(h, schema.as_of(max(v for _, v, _, _ in variants))) for h in heldout_from])
    relabel(newest.runs, class_set)
    heldout = {seed: {r.name for r in split_by_run(newest.runs, heldout_fraction, seed)[1]} for seed in range(splits)}
    if not all(heldout.values()):
        raise ValueError(f"{heldout_from}: some split holds out no run (record at least two runs of a class)")
    results = []
    for variant, version, older_as_missing, with_ignore in variants:
        live = schema.as_of(version)
        ignored = ignored_columns(live, [f for f in ignore if f in live.features]) if with_ignore else ()
        datasets, skipped = [], []
        for path in manifests:
            try:
                datasets.append(load_manifest(path, live, older_as_missing and path not in heldout_from))
            except SchemaMismatch:
                if path in heldout_from:
                    raise
                skipped.append(str(path))
        data = merge(datasets)
        relabel(data.runs, class_set)
        classes = data.classes()
        for seed in range(splits):
            train_runs = [r for r in data.runs if r.name not in heldout[seed]]
            test_runs = [r for r in data.runs if r.name in heldout[seed]]
            x_train, y_train, _ = stack(train_runs, classes)
            x_test, y_test, tick_runs = stack(test_runs, classes)
            for setting, params in (xgboost or {"": {}}).items():
                ensemble = train(x_train, y_train, classes, seed=seed, small=small, ignored=ignored,
                                 xgboost_params=params)
                m = evaluate(ensemble.predict_proba(x_test), y_test, tick_runs, classes, voting)
                results.append({
                    "variant": f"{variant} {setting}".strip(), "version": version, "xgboost": params,
                    "features": len(live.features), "seed": seed,
                    "train_runs": len(train_runs), "heldout_runs": len(test_runs), "ticks": m["raw"]["ticks"],
                    "raw": m["raw"]["accuracy"], "voted": m["voted"]["accuracy"],
                    "voted_recall": {c: v["recall"] for c, v in m["voted"]["per_class"].items()},
                    "skipped_manifests": skipped,
                })
    return {
        "schema": "asa.classifier-compare", "version": 1,
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "feature_schema": schema.name, "heldout_from": [str(h) for h in heldout_from], "manifests": [str(m) for m in manifests],
        "class_set": class_set, "heldout_fraction": heldout_fraction, "voting": voting,
        "ignored_features": list(ignore),
        "heldout": {str(seed): sorted(names) for seed, names in heldout.items()}, "results": results,
    }


def markdown(report: dict) -> str:
    versions = list(dict.fromkeys(r["variant"] for r in report["results"]))
    seeds = sorted({r["seed"] for r in report["results"]})
    rows = {v: [r for r in report["results"] if r["variant"] == v] for v in versions}
    sizes = any(r.get("xgboost") for r in report["results"])
    title = "Feature versions and XGBoost settings" if sizes else "Feature versions"
    lines = [f"# {title} on the same held-out runs ({report['date']})", "",
             f"Held-out runs drawn from {', '.join(f'`{h}`' for h in report['heldout_from'])} ({report['heldout_fraction']:.0%} by run per class, "
             f"seeds {seeds[0]}..{seeds[-1]}); classes by {report['class_set']}; each version trains on every other run "
             "of the manifests recorded with it or a newer version (`+older`: with the older ones too, their newer "
             "features missing)"
             + (f"; `-ignored`: without {', '.join(f'`{f}`' for f in report['ignored_features'])} (zeroed in training)"
                if report.get("ignored_features") else "") + ":", ""]
    lines += [f"- `{m}`" for m in report["manifests"]]
    lines += ["", "| version (features) | training runs | raw per split | raw mean | voted per split | voted mean |",
              "|---|---:|---|---:|---|---:|"]
    for v in versions:
        r = rows[v]
        lines.append(f"| v{v} ({r[0]['features']}) | {min(x['train_runs'] for x in r)}-{max(x['train_runs'] for x in r)} | "
                     + " ".join(f"{x['raw']:.3f}" for x in r) + f" | **{np.mean([x['raw'] for x in r]):.3f}** | "
                     + " ".join(f"{x['voted']:.3f}" for x in r) + f" | **{np.mean([x['voted'] for x in r]):.3f}** |")
    if len(versions) > 1:
        lines += ["", f"Paired with v{versions[0]}, split by split (difference of the means ± its standard error; "
                  "splits where the variant is higher):", "", "| variant | raw | voted |", "|---|---|---|"]
        for v in versions[1:]:
            cells = []
            for key in ("raw", "voted"):
                diff = np.array([x[key] for x in rows[v]]) - np.array([x[key] for x in rows[versions[0]]])
                se = diff.std(ddof=1) / np.sqrt(len(diff)) if len(diff) > 1 else float("nan")
                cells.append(f"{diff.mean():+.4f} ± {se:.4f} ({int((diff > 0).sum())}/{len(diff)})")
            lines.append(f"| v{v} | " + " | ".join(cells) + " |")
    classes = sorted(rows[versions[0]][0]["voted_recall"])
    lines += ["", "Voted recall per class, mean over the splits:", "",
              "| class | " + " | ".join(f"v{v}" for v in versions) + " |", "|---" * (len(versions) + 1) + "|"]
    for c in classes:
        cells = []
        for v in versions:
            values = [x["voted_recall"].get(c) for x in rows[v]]
            values = [x for x in values if x is not None]
            cells.append(f"{np.mean(values):.2f}" if values else "-")
        lines.append(f"| {c} | " + " | ".join(cells) + " |")
    skipped = {v: rows[v][0]["skipped_manifests"] for v in versions if rows[v][0]["skipped_manifests"]}
    if skipped:
        lines += ["", "Recorded with an older version (not usable by the newer one): "
                  + "; ".join(f"v{v}: {len(s)} manifest(s)" for v, s in skipped.items()) + "."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--feature-schema", type=Path, required=True)
    parser.add_argument("--heldout-from", type=Path, required=True, action="append",
                        help="a manifest the held-out runs are drawn from (it must have every compared version); repeat for several")
    parser.add_argument("--manifest", type=Path, action="append", default=[],
                        help="more training recordings; repeat (each is used by the versions it holds)")
    parser.add_argument("--versions", required=True,
                        help="comma-separated feature-schema versions, e.g. 1,2,3,3+older,3+older-ignored")
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--heldout-fraction", type=float, default=0.25)
    parser.add_argument("--classes", choices=CLASS_SETS, default="load")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--ignore-features", default="",
                        help="comma-separated features the -ignored variants do not use (zeroed in training)")
    parser.add_argument("--xgboost", action="append", default=[], metavar="NAME=JSON",
                        help='an XGBoost setting to train every version with (overrides of the production '
                             'parameters, e.g. d6={"max_depth": 6}); repeat for several')
    args = parser.parse_args(argv)
    xgboost = {}
    for spec in args.xgboost:
        name, _, params = spec.partition("=")
        try:
            xgboost[name] = json.loads(params)
        except json.JSONDecodeError as e:
            parser.error(f"--xgboost {spec!r}: not NAME=JSON ({e})")
        if not name or not isinstance(xgboost[name], dict):
            parser.error(f"--xgboost {spec!r}: expected NAME={{...}}")
    schema = FeatureSchema.load(args.feature_schema)
    versions = [v for v in args.versions.split(",") if v]
    ignore = tuple(f for f in args.ignore_features.split(",") if f)
    ignored_columns(schema, ignore)  # an unknown name is an error before any training
    report = compare(schema, args.heldout_from, args.manifest, versions, args.splits, args.heldout_fraction, args.classes,
                     ignore=ignore, xgboost=xgboost or None)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "compare.json").write_text(json.dumps(report, indent=1) + "\n")
    text = markdown(report)
    (args.out / "compare.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
