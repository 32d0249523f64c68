"""Features of scx_gru, as in src/features.rs (names, order, transforms).

Per event: the seven task features of the thesis (table 3.3), then one 0/1
column per CPU of the model, placed_cpu_K: the event placed the task on CPU K
(the event's `cpu` field). A model's metadata lists these names and
transforms; scx_gru refuses a model whose list differs from its own, so both
files must change together.
"""
import csv
import math

import numpy as np

TRACE_SCHEMA = "asa.gru-trace"
TRACE_VERSION = 1
PF_KTHREAD = 0x00200000

# (name, transform) in tensor order; raw values come from struct gru_task_event.
TASK_FEATURES = [
    ("prio", "identity"),
    ("nr_cpus_allowed", "identity"),
    ("runtime_ns", "log1p_us"),
    ("nvcsw", "log1p"),
    ("nivcsw", "log1p"),
    ("flags", "kthread_bit"),
    ("switch_count", "log1p"),
]
NR_TASK_FEATURES = len(TASK_FEATURES)


def feature_table(nr_cpus):
    """Every input column of a model for nr_cpus CPUs, (name, transform), in
    tensor order: the task features, then placed_cpu_0 .. placed_cpu_{n-1}."""
    return TASK_FEATURES + [(f"placed_cpu_{c}", "identity") for c in range(nr_cpus)]


def transform(kind, raw):
    """Applies one transform to a numpy array of raw values (float64)."""
    raw = np.asarray(raw, dtype=np.float64)
    if kind == "identity":
        return raw
    if kind == "log1p":
        return np.log1p(np.maximum(raw, 0.0))
    if kind == "log1p_us":
        return np.log1p(np.maximum(raw, 0.0) / 1000.0)
    if kind == "kthread_bit":
        return ((raw.astype(np.int64) & PF_KTHREAD) != 0).astype(np.float64)
    raise ValueError(f"unknown transform {kind}")


def read_trace(path):
    """Reads a gru_record CSV; returns (header dict, list of row dicts)."""
    with open(path, newline="") as f:
        first = f.readline().strip()
        if not first.startswith("# "):
            raise ValueError(f"{path}: missing schema line")
        header = {}
        text = first[2:]
        if " label=" in text:
            text, header["label"] = text.split(" label=", 1)
        for part in text.split(" "):
            if "=" in part:
                k, v = part.split("=", 1)
                header.setdefault(k, v)
        if header.get("schema") != TRACE_SCHEMA or header.get("version") != str(TRACE_VERSION):
            raise ValueError(f"{path}: schema {header.get('schema')} v{header.get('version')}, "
                             f"expected {TRACE_SCHEMA} v{TRACE_VERSION}")
        rows = list(csv.DictReader(f))
    return header, rows


def raw_matrix(rows, nr_cpus):
    """Raw feature values of each row, [n, 7 + nr_cpus] float64 (the placed-CPU
    columns are 0/1 already)."""
    names = [name for name, _ in TASK_FEATURES]
    task = np.array([[float(r[n]) for n in names] for r in rows], dtype=np.float64).reshape(-1, len(names))
    cpu = np.array([int(r["cpu"]) for r in rows], dtype=np.int64)
    placed = (cpu[:, None] == np.arange(nr_cpus)[None, :]).astype(np.float64)
    return np.concatenate([task, placed], axis=1)


def transformed(raw, nr_cpus):
    """Applies every column's transform to a [n, 7 + nr_cpus] raw matrix."""
    table = feature_table(nr_cpus)
    if raw.shape[1] != len(table):
        raise ValueError(f"{raw.shape[1]} raw columns, the {nr_cpus}-CPU table has {len(table)}")
    out = np.empty_like(raw)
    for j, (_, kind) in enumerate(table):
        out[:, j] = transform(kind, raw[:, j])
    return out


def windows_per_task(rows, feats, window):
    """Per-task sliding windows: for each task, every run of `window`
    consecutive events followed by one more event gives one sample, labelled
    with the CPU of that next event (the placement the prediction is used for).
    Returns (X [n, window, columns], y [n], last_cpu [n], stamp [n])."""
    by_pid = {}
    for i, r in enumerate(rows):
        by_pid.setdefault(int(r["pid"]), []).append(i)
    xs, ys, last, stamps = [], [], [], []
    for idx in by_pid.values():
        idx.sort(key=lambda i: int(rows[i]["stamp_ns"]))
        for end in range(window, len(idx)):
            seq = idx[end - window:end]
            xs.append(feats[seq])
            ys.append(int(rows[idx[end]]["cpu"]))
            last.append(int(rows[seq[-1]]["cpu"]))
            stamps.append(int(rows[idx[end]]["stamp_ns"]))
    if not xs:
        return (np.zeros((0, window, feats.shape[1])), np.zeros(0, int), np.zeros(0, int), np.zeros(0, int))
    return np.stack(xs), np.array(ys), np.array(last), np.array(stamps)


def self_check():
    """Hand-computed values, the same as the Rust unit test."""
    row = {"prio": "120", "nr_cpus_allowed": "2", "runtime_ns": "999000", "nvcsw": "0",
           "nivcsw": "6", "flags": str(PF_KTHREAD | 0x40), "switch_count": "1", "cpu": "1"}
    f = transformed(raw_matrix([row], 2), 2)[0]
    assert f[0] == 120 and f[1] == 2 and f[3] == 0 and f[5] == 1
    assert abs(f[2] - math.log(1000)) < 1e-9 and abs(f[4] - math.log(7)) < 1e-9
    assert abs(f[6] - math.log(2)) < 1e-9
    assert list(f[7:]) == [0.0, 1.0]
    assert [n for n, _ in feature_table(3)][7:] == ["placed_cpu_0", "placed_cpu_1", "placed_cpu_2"]


if __name__ == "__main__":
    self_check()
    print("gru_features: self-check passed")
