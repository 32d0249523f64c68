"""Recordings written by `asa record`, the dataset manifest, and the held-out split by run.

Recording format expected from perception (issue 3; to be checked against agent/src/perception
when it lands): one file per run, Parquet (or CSV for hand-made data), one row per tick, with a
column per feature named as in the feature schema (NaN = feature missing on that tick) and a
`label` column holding the workload class. Extra columns are ignored.

Manifest (TOML, schema `asa.dataset` v1):

    schema = "asa.dataset"
    version = 1
    feature_schema = "asa.features"
    feature_schema_version = 1
    machine = "lab VM (TCG, 2 vCPUs), kernel 7.2.13"
    [[run]]
    file = "runs/S3-eevdf-1.parquet"   # relative to the manifest
    label = "game+kernel_build"        # default label when the file has no label column
    scenario = "S3"
    expert = "eevdf"
    heldout = false                    # optional: force a run into the held-out set
"""

from __future__ import annotations

import csv
import random
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .schema import FeatureSchema, SchemaMismatch

DATASET_SCHEMA = "asa.dataset"
DATASET_VERSION = 1


@dataclass
class Run:
    """One recording: its ticks (rows = ticks, columns = features in schema order)."""

    name: str
    x: np.ndarray
    labels: list[str]
    scenario: str = ""
    expert: str = ""
    heldout: bool | None = None


@dataclass
class Dataset:
    schema: FeatureSchema
    machine: str
    runs: list[Run] = field(default_factory=list)

    def classes(self) -> list[str]:
        return sorted({label for run in self.runs for label in run.labels})


def read_recording(path: Path, schema: FeatureSchema, default_label: str | None = None,
                   absent: frozenset[str] = frozenset()) -> tuple[np.ndarray, list[str]]:
    """Reads one recording into (x [ticks, features] float32, labels); the features named in
    `absent` (newer than the recording's declared version) are NaN, missing on every tick,
    even if the file has a column of that name."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq
        table = pq.read_table(path)
        columns = {name: table.column(name).to_numpy(zero_copy_only=False) for name in table.column_names}
    elif path.suffix == ".csv":
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
        columns = {name: np.array([r[name] for r in rows]) for name in (rows[0].keys() if rows else [])}
    else:
        raise ValueError(f"{path}: unknown recording format (expected .parquet or .csv)")
    missing = [name for name in schema.features if name not in columns and name not in absent]
    if missing:
        raise ValueError(f"{path}: recording lacks features of schema {schema.name} v{schema.version}: {missing}")
    n_rows = len(next(iter(columns.values()))) if columns else 0
    x = np.column_stack([np.full(n_rows, np.nan) if n in absent else np.asarray(columns[n], dtype=np.float64)
                         for n in schema.features]).astype(np.float32)
    if "label" in columns:
        labels = [str(v) for v in columns["label"]]
    elif default_label is not None:
        labels = [default_label] * len(x)
    else:
        raise ValueError(f"{path}: no label column and no label in the manifest")
    return x, labels


def load_manifest(path: str | Path, live: FeatureSchema, older_as_missing: bool = False) -> Dataset:
    """Loads every run of a manifest; refuses a manifest for another feature schema, and one
    recorded with an older version unless `older_as_missing` (then the newer features are
    missing, NaN, on all of its ticks: XGBoost learns from them where they exist, the other
    members impute them)."""
    path = Path(path)
    data = tomllib.loads(path.read_text())
    if data.get("schema") != DATASET_SCHEMA or data.get("version") != DATASET_VERSION:
        raise ValueError(f"{path}: not a {DATASET_SCHEMA} v{DATASET_VERSION} manifest")
    declared_name, declared_version = data["feature_schema"], int(data["feature_schema_version"])
    if declared_name != live.name or (declared_version < live.version and not older_as_missing):
        # A newer recording holds every feature of an older version (names keep their meaning),
        # an older one lacks the newer features.
        raise SchemaMismatch(f"dataset {path} uses feature schema {declared_name} v{declared_version}, "
                             f"training needs {live.name} v{live.version} or newer")
    absent = frozenset()
    if declared_version < live.version:
        if not live.since:
            raise SchemaMismatch(f"{live.name} v{live.version} does not say which version each feature is from")
        absent = frozenset(f for f, since in zip(live.features, live.since) if since > declared_version)
    dataset = Dataset(live, str(data.get("machine", "")))
    for entry in data.get("run", []):
        file = path.parent / entry["file"]
        x, labels = read_recording(file, live, entry.get("label"), absent)
        dataset.runs.append(Run(entry.get("name", Path(entry["file"]).stem), x, labels,
                                entry.get("scenario", ""), entry.get("expert", ""), entry.get("heldout")))
    if not dataset.runs:
        raise ValueError(f"{path}: the manifest lists no run")
    return dataset


def merge(datasets: list[Dataset]) -> Dataset:
    """One dataset from several manifests (already checked against the same live schema); run
    names must stay unique."""
    if not datasets:
        raise ValueError("no dataset to merge")
    merged = Dataset(datasets[0].schema, "; ".join(dict.fromkeys(d.machine for d in datasets)))
    seen = set()
    for d in datasets:
        for run in d.runs:
            if run.name in seen:
                raise ValueError(f"run name {run.name!r} appears in two manifests")
            seen.add(run.name)
            merged.runs.append(run)
    return merged


CLASS_SETS = ("label", "load")


def relabel(runs: list[Run], class_set: str) -> None:
    """Applies a class set in place: `label` keeps the recorded labels; `load` keeps only the
    background load of a `<probe>+<load>` label (a label without `+` is a load already)."""
    if class_set not in CLASS_SETS:
        raise ValueError(f"unknown class set {class_set!r} (known: {', '.join(CLASS_SETS)})")
    if class_set == "load":
        for run in runs:
            run.labels = [label.split("+", 1)[1] if "+" in label else label for label in run.labels]


def split_by_run(runs: list[Run], heldout_fraction: float = 0.25, seed: int = 0) -> tuple[list[Run], list[Run]]:
    """Splits whole runs (never ticks of one run) into (train, held-out).

    Runs with an explicit `heldout` flag go where it says. The others are grouped by their
    majority label; in every group with at least two runs, round(fraction * n) runs (at least 1,
    at most n - 1) go to the held-out set, chosen with `seed`; a class with one run stays in
    training, so every class is learnt.
    """
    train, heldout, free = [], [], {}
    for run in runs:
        if run.heldout is True:
            heldout.append(run)
        elif run.heldout is False:
            train.append(run)
        else:
            majority = max(sorted(set(run.labels)), key=run.labels.count)  # ties: the first name
            free.setdefault(majority, []).append(run)
    rng = random.Random(seed)
    for label in sorted(free):
        group = sorted(free[label], key=lambda r: r.name)
        rng.shuffle(group)
        n_out = 0 if len(group) < 2 else min(len(group) - 1, max(1, round(heldout_fraction * len(group))))
        heldout.extend(group[:n_out])
        train.extend(group[n_out:])
    return train, heldout


def stack(runs: list[Run], classes: list[str]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Concatenates runs: (x, y as class indices, run name per tick)."""
    index = {c: i for i, c in enumerate(classes)}
    x = np.concatenate([r.x for r in runs]).astype(np.float32)
    y = np.array([index[label] for r in runs for label in r.labels], dtype=np.int64)
    run_of_tick = [r.name for r in runs for _ in r.labels]
    return x, y, run_of_tick
