"""Per-application rows recorded by the scenario runner, labelled with the application class.

The agent groups tasks into applications (a cgroup and a process group) and computes the
features of each every tick (agent/src/perception/apps.rs: schema `asa.app-features` v1, the
names of APP_SCHEMA). `asa record --apps` writes them beside the whole-machine recording, and
the scenario runner lists that file in the dataset manifest (schema `asa.dataset` v1, as
dataset.py reads it) with what labels the rows:

    [[run]]
    name = "D-office-xz_compress-eevdf-r1"
    scenario = "D-office-xz_compress"
    apps_file = "raw/D-office-xz_compress-eevdf-r1.apps.parquet"  # relative; absent: run skipped
    probe_tgid = 4242                  # the process whose threads run the foreground probe
    probe_app_class = "interactive"    # (0 and "", or absent: a run without a probe)
    [[run.phase]]
    window_from_unix_ms = 1795460230909
    window_to_unix_ms = 1795460265742
    pgids = [4250, 4261]               # the phase's load: its command loop's group, any server's
    app_class = "cpu_batch"            # (absent, with no pgids: an idle phase)

The apps file (Parquet): one row per (tick, application), columns `unix_ms`, `tick`, `cgroup`,
`pgid` (int64), `tgids` (string: the application's processes, comma-separated), `threads`
(int64), then the features (float64, schema order); key-value metadata APP_SCHEMA_KEY and
APP_SCHEMA_VERSION_KEY name the feature schema.

Labelling (`label_rows`): a row belongs to phase P when P's window holds its `unix_ms` (both
ends included). In that window, in this order: a row whose `tgids` holds `probe_tgid` is the
probe's class; a row whose `pgid` is one of P's `pgids` is P's `app_class`; a row of process
group 0 (kernel threads) is dropped; a row of another phase's `pgids` is dropped (a load
winding down or starting early); every other row is `background` (the machine's services and
daemons). Rows outside every window are dropped, and so are rows inside two windows (phases
sharing a boundary millisecond: their label would be a guess).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .dataset import DATASET_SCHEMA, DATASET_VERSION
from .schema import FeatureSchema, SchemaMismatch

# agent/src/perception/apps.rs: APP_FEATURE_SCHEMA, APP_FEATURE_VERSION, APP_FEATURES.
APP_SCHEMA = FeatureSchema("asa.app-features", 1, (
    "cpu_share", "cpu_per_thread", "run_burst_ms", "sleep_ms", "wakeups_per_s_per_thread",
    "involuntary_share", "run_delay_per_cpu", "storage_mib_per_s", "char_mib_per_s",
    "io_calls_per_s", "threads_log2"))
# The layer plan's classes (layers/default.toml), in the model's output order.
APP_CLASSES = ("interactive", "io_bound", "network", "cpu_batch", "background")
BACKGROUND = "background"
# Rates, times and sizes with a heavy tail: the SVM sees them as log(1 + x) (ensemble.py). The
# shares (0-1) and threads_log2 (a log already) stay as they are.
LOG1P_FEATURES = ("run_burst_ms", "sleep_ms", "wakeups_per_s_per_thread", "run_delay_per_cpu",
                  "storage_mib_per_s", "char_mib_per_s", "io_calls_per_s")
# Key-value metadata of the apps file.
APP_SCHEMA_KEY = "asa.app_feature_schema"
APP_SCHEMA_VERSION_KEY = "asa.app_feature_schema_version"
KEY_COLUMNS = ("unix_ms", "tick", "cgroup", "pgid", "tgids", "threads")

# Why a row was dropped (`label_rows` gives "" as its label and one of these as its reason).
DROP_OUTSIDE = "outside_windows"
DROP_AMBIGUOUS = "in_two_windows"
DROP_KERNEL = "kernel_threads"
DROP_OTHER_PHASE = "other_phase_load"
DROP_REASONS = (DROP_OUTSIDE, DROP_AMBIGUOUS, DROP_KERNEL, DROP_OTHER_PHASE)


@dataclass(frozen=True)
class Phase:
    """One phase's labelled window, its load's process groups and their class."""

    window_from_ms: int
    window_to_ms: int
    pgids: frozenset[int]
    app_class: str | None


@dataclass
class AppRows:
    """Labelled application rows: features in APP_SCHEMA order and, per row, its label and what
    it came from (run, scenario, expert, application key), for grouping and held-out splits."""

    x: np.ndarray  # float32 [rows, features]
    labels: np.ndarray  # str
    run: np.ndarray  # str: the manifest's run name
    scenario: np.ndarray  # str
    expert: np.ndarray  # str
    cgroup: np.ndarray  # int64
    pgid: np.ndarray  # int64
    unix_ms: np.ndarray  # int64
    # Rows dropped by the labelling, per reason, and runs without an apps file.
    dropped: dict[str, int] = field(default_factory=dict)
    skipped_runs: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.labels)

    def app_ids(self) -> np.ndarray:
        """One id per application of a run: `run/cgroup:pgid` (a pgid is reused across runs)."""
        return np.array([f"{r}/{c}:{p}" for r, c, p in zip(self.run, self.cgroup, self.pgid)], dtype=object)

    def rows_per_class(self, classes=APP_CLASSES) -> dict[str, int]:
        return {c: int(np.sum(self.labels == c)) for c in classes}


def _empty_rows() -> AppRows:
    text = np.array([], dtype=object)
    ints = np.array([], dtype=np.int64)
    return AppRows(np.zeros((0, len(APP_SCHEMA.features)), dtype=np.float32), text, text, text, text,
                   ints, ints, ints)


def concat(parts: list[AppRows]) -> AppRows:
    """One AppRows from several (drop counts added, skipped runs listed)."""
    if not parts:
        return _empty_rows()
    arrays = {name: np.concatenate([getattr(p, name) for p in parts])
              for name in ("x", "labels", "run", "scenario", "expert", "cgroup", "pgid", "unix_ms")}
    dropped = {reason: sum(p.dropped.get(reason, 0) for p in parts) for reason in DROP_REASONS}
    return AppRows(**arrays, dropped=dropped, skipped_runs=[r for p in parts for r in p.skipped_runs])


def check_app_schema(meta: dict[bytes, bytes] | None, path, schema: FeatureSchema = APP_SCHEMA) -> None:
    """Refuses an apps file of another feature schema, or of an older version than `schema`
    (a newer version only appends features, so it holds every feature of this one, by name)."""
    meta = meta or {}
    name = meta.get(APP_SCHEMA_KEY.encode())
    version = meta.get(APP_SCHEMA_VERSION_KEY.encode())
    if name is None or version is None:
        raise SchemaMismatch(f"{path}: no {APP_SCHEMA_KEY} / {APP_SCHEMA_VERSION_KEY} metadata: not an "
                             f"apps file of `asa record --apps` (the app model needs {schema.name} v{schema.version})")
    name = name.decode()
    try:
        version = int(version.decode())
    except ValueError:
        raise SchemaMismatch(f"{path}: {APP_SCHEMA_VERSION_KEY} is {version.decode()!r}, not a number") from None
    if name != schema.name or version < schema.version:
        raise SchemaMismatch(f"{path}: application features of schema {name} v{version}; the app model is "
                             f"trained on {schema.name} v{schema.version} (or a newer version of it)")


def read_apps_file(path: Path, schema: FeatureSchema = APP_SCHEMA) -> dict[str, np.ndarray]:
    """The columns of one apps file: the key columns and `x` (float32 [rows, features])."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    check_app_schema(table.schema.metadata, path, schema)
    missing = [c for c in KEY_COLUMNS + schema.features if c not in table.column_names]
    if missing:
        raise ValueError(f"{path}: apps file lacks columns {missing}")
    columns = {c: table.column(c).to_numpy(zero_copy_only=False) for c in KEY_COLUMNS}
    columns["x"] = (np.column_stack([table.column(f).to_numpy(zero_copy_only=False).astype(np.float64)
                                     for f in schema.features]).astype(np.float32)
                    if table.num_rows else np.zeros((0, len(schema.features)), dtype=np.float32))
    return columns


def _known_class(value, where: str) -> str:
    if value not in APP_CLASSES:
        raise ValueError(f"{where}: app class {value!r} is not one of the layer plan's ({', '.join(APP_CLASSES)})")
    return value


def read_probe(entry: dict, where: str) -> tuple[int | None, str | None]:
    """A run's probe process and its class; (None, None) for a run without a probe (no
    `probe_tgid`, or 0: the scenario runner writes 0 and "" when it ran none)."""
    probe_tgid = int(entry.get("probe_tgid", 0))
    probe_class = entry.get("probe_app_class") or None
    if probe_tgid <= 0:
        return None, None
    if probe_class is None:
        raise ValueError(f"{where}: probe_tgid without a probe_app_class")
    return probe_tgid, _known_class(probe_class, f"{where} probe")


def read_phases(entry: dict, where: str) -> list[Phase]:
    """The phases of a manifest run with their windows, load process groups and class."""
    phases = []
    for i, p in enumerate(entry.get("phase", [])):
        pgids = frozenset(int(g) for g in p.get("pgids", []))
        app_class = p.get("app_class") or None  # absent (or empty) for an idle phase
        if app_class is not None:
            _known_class(app_class, f"{where} phase {i + 1}")
        elif pgids:
            raise ValueError(f"{where} phase {i + 1}: pgids without an app_class")
        phases.append(Phase(int(p["window_from_unix_ms"]), int(p["window_to_unix_ms"]), pgids, app_class))
    return phases


def holds_pid(tgids: str, pid: int) -> bool:
    """Whether a comma-separated pid list holds `pid`."""
    wanted = str(pid)
    return any(t.strip() == wanted for t in tgids.split(","))


def label_rows(unix_ms: np.ndarray, pgid: np.ndarray, tgids, phases: list[Phase],
               probe_tgid: int | None, probe_class: str | None) -> tuple[np.ndarray, np.ndarray]:
    """(label, drop reason) per row by the module docstring's rule; a kept row has reason "",
    a dropped one label ""."""
    n = len(unix_ms)
    labels = np.full(n, "", dtype=object)
    reasons = np.full(n, DROP_OUTSIDE, dtype=object)
    inside = np.array([(unix_ms >= p.window_from_ms) & (unix_ms <= p.window_to_ms) for p in phases],
                      dtype=bool).reshape(len(phases), n)
    windows = inside.sum(axis=0)
    reasons[windows > 1] = DROP_AMBIGUOUS
    all_load_pgids = frozenset().union(*(p.pgids for p in phases))
    probe = np.array([probe_tgid is not None and holds_pid(str(t), probe_tgid) for t in tgids], dtype=bool)
    for k, phase in enumerate(phases):
        rows = inside[k] & (windows == 1)
        load = np.isin(pgid, list(phase.pgids)) if phase.pgids else np.zeros(n, dtype=bool)
        other = np.isin(pgid, list(all_load_pgids - phase.pgids)) if all_load_pgids else np.zeros(n, dtype=bool)
        rules = ((probe, probe_class, ""), (load, phase.app_class, ""), (pgid == 0, "", DROP_KERNEL),
                 (other, "", DROP_OTHER_PHASE), (np.ones(n, dtype=bool), BACKGROUND, ""))
        undecided = rows.copy()
        for match, label, reason in rules:
            hit = undecided & match
            labels[hit] = label
            reasons[hit] = reason
            undecided &= ~match
    return labels, reasons


def label_run(entry: dict, base: Path, where: str, schema: FeatureSchema = APP_SCHEMA) -> AppRows:
    """The labelled rows of one manifest run (its apps file must exist)."""
    name = entry.get("name", Path(entry["file"]).stem if "file" in entry else where)
    probe_tgid, probe_class = read_probe(entry, where)
    phases = read_phases(entry, where)
    columns = read_apps_file(base / entry["apps_file"], schema)
    unix_ms = columns["unix_ms"].astype(np.int64)
    pgid = columns["pgid"].astype(np.int64)
    labels, reasons = label_rows(unix_ms, pgid, columns["tgids"], phases, probe_tgid, probe_class)
    keep = reasons == ""
    n = int(keep.sum())
    return AppRows(
        columns["x"][keep], labels[keep].astype(object), np.full(n, name, dtype=object),
        np.full(n, str(entry.get("scenario", "")), dtype=object), np.full(n, str(entry.get("expert", "")), dtype=object),
        columns["cgroup"].astype(np.int64)[keep], pgid[keep], unix_ms[keep],
        dropped={r: int(np.sum(reasons == r)) for r in DROP_REASONS})


def manifest_path(dataset: str | Path) -> Path:
    """A dataset folder's manifest.toml (a manifest file's path is taken as it is)."""
    path = Path(dataset)
    return path / "manifest.toml" if path.is_dir() else path


def load_dataset(dataset: str | Path, schema: FeatureSchema = APP_SCHEMA) -> AppRows:
    """The labelled application rows of one dataset; runs without `apps_file` are skipped."""
    path = manifest_path(dataset)
    data = tomllib.loads(path.read_text())
    if data.get("schema") != DATASET_SCHEMA or data.get("version") != DATASET_VERSION:
        raise ValueError(f"{path}: not a {DATASET_SCHEMA} v{DATASET_VERSION} manifest")
    parts, skipped = [], []
    for i, entry in enumerate(data.get("run", [])):
        where = f"{path} run {entry.get('name', i + 1)}"
        if "apps_file" not in entry:
            skipped.append(str(entry.get("name", i + 1)))
            continue
        parts.append(label_run(entry, path.parent, where, schema))
    rows = concat(parts)
    rows.skipped_runs = skipped
    return rows


def load_datasets(datasets, schema: FeatureSchema = APP_SCHEMA) -> AppRows:
    """Several datasets' rows together, and some row must remain. A dataset given twice is an
    error; runs of two recordings that share a name (each recording names its runs
    `<scenario>-<expert>-r<rep>`) are told apart by the later dataset's folder name, prefixed
    to each of its run names."""
    manifests: dict[Path, str] = {}
    for dataset in datasets:
        manifest = manifest_path(dataset).resolve()
        if manifest in manifests:
            raise ValueError(f"dataset {dataset} is given twice (as {manifests[manifest]} too)")
        manifests[manifest] = str(dataset)
    loaded = [load_dataset(d, schema) for d in datasets]
    seen: set[str] = set()
    for dataset, rows in zip(datasets, loaded):
        names = set(rows.run.tolist())
        if names & seen:
            prefix = f"{manifest_path(dataset).resolve().parent.name}/"
            rows.run = np.array([prefix + r for r in rows.run.tolist()])
            rows.skipped_runs = [prefix + r for r in rows.skipped_runs]
            names = set(rows.run.tolist())
        seen |= names
    rows = concat(loaded)
    if not len(rows):
        raise ValueError(f"no labelled application row in {', '.join(map(str, datasets))} (runs without "
                         f"apps_file: {len(rows.skipped_runs)}); record with the scenario runner's apps recording")
    return rows
