"""Trains the in-BPF placement model (a small MLP) on gru_record traces and exports it in fixed
point for `src/bpf/mlp.bpf.h`.

What it learns: for every event of a task (a wake-up or a migration recorded under EEVDF), the
CPU EEVDF placed it on, from the task's state at that event and the CPU of its previous event
(see mlp_fixed.py for the features). Model: (7 + C) -> H ReLU -> C logits, softmax
cross-entropy, Adam, early stopping on the validation loss; numpy only. The standardisation is
folded into the first layer, then every tensor is quantised (Q21.11 by default).

Evaluation, per trace in time order 60/20/20 (train / validation / test), on the test part:
  agreement_with_float  fixed-point CPU == float model's CPU
  agreement_with_eevdf  fixed-point CPU == the CPU EEVDF chose
  previous_cpu          the rule "stay on the previous CPU" == EEVDF's choice (a baseline)
per load (one trace per load) and pooled.

Outputs in --out, named after --name (default mlp): NAME.json (the model: schema asa.gru-mlp
v1), NAME_golden.json (raw inputs and the integer logits and CPU this script computes, for the
BPF equality test) and NAME_report.json (the agreements). A model is for the CPU count of its
traces only (scx_gru refuses it on another): the committed ones are mlp (2 CPUs, host traces)
and mlp-4cpu (4 vCPUs, lab VM traces).

Usage:
  python train_mlp.py --out ../model [--name mlp-4cpu] TRACE.csv [TRACE.csv ...]
"""
import argparse
import datetime
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gru_features as gf  # noqa: E402
import mlp_fixed as mf  # noqa: E402
from train_gru import Adam  # noqa: E402  (the GRU trainer's optimiser)


class Mlp:
    """Float MLP: relu(x W1^T + b1) W2^T + b2."""

    def __init__(self, n_in, hidden, n_out, rng):
        self.p = {
            "w1": rng.normal(0, np.sqrt(2.0 / n_in), (hidden, n_in)),
            "b1": np.zeros(hidden),
            "w2": rng.normal(0, np.sqrt(1.0 / hidden), (n_out, hidden)),
            "b2": np.zeros(n_out),
        }

    def forward(self, x, keep=False):
        z = x @ self.p["w1"].T + self.p["b1"]
        h = np.maximum(z, 0.0)
        logits = h @ self.p["w2"].T + self.p["b2"]
        return (logits, z, h) if keep else logits

    def loss_and_grads(self, x, y):
        logits, z, h = self.forward(x, keep=True)
        n = len(y)
        m = logits.max(axis=1, keepdims=True)
        e = np.exp(logits - m)
        prob = e / e.sum(axis=1, keepdims=True)
        loss = -np.mean(np.log(prob[np.arange(n), y] + 1e-12))
        d = prob
        d[np.arange(n), y] -= 1.0
        d /= n
        dh = d @ self.p["w2"]
        dz = dh * (z > 0)
        return loss, {"w2": d.T @ h, "b2": d.sum(axis=0), "w1": dz.T @ x, "b1": dz.sum(axis=0)}


def mean_loss(model, x, y):
    logits = model.forward(x)
    m = logits.max(axis=1, keepdims=True)
    logp = logits - m - np.log(np.exp(logits - m).sum(axis=1, keepdims=True))
    return float(-np.mean(logp[np.arange(len(y)), y]))


def samples(rows):
    """Per task, every event after its first: (raw fields dict, prev_cpu, label cpu, stamp,
    source), in the trace's row order."""
    last_cpu = {}
    keep, prev = [], []
    for i, r in enumerate(rows):
        pid = int(r["pid"])
        if pid in last_cpu:
            keep.append(i)
            prev.append(last_cpu[pid])
        last_cpu[pid] = int(r["cpu"])
    raw = {f: np.array([int(rows[i][f]) for i in keep], dtype=object) for f in mf.RAW_FIELDS}
    raw = {f: (v.astype(np.int64) if f == "prio" else v.astype(np.uint64)) for f, v in raw.items()}
    y = np.array([int(rows[i]["cpu"]) for i in keep], dtype=np.int64)
    stamp = np.array([int(rows[i]["stamp_ns"]) for i in keep], dtype=np.int64)
    source = np.array([int(rows[i]["source"]) for i in keep], dtype=np.int64)
    return raw, np.array(prev, dtype=np.int64), y, stamp, source


def golden_cases(x_raw, prev, logits, n=24):
    """Up to n rows taking each predicted CPU in turn (so a swapped output shows)."""
    by_cpu = {}
    for i, cpu in enumerate(mf.argmax_first(logits)):
        by_cpu.setdefault(int(cpu), []).append(i)
    queues = [by_cpu[c] for c in sorted(by_cpu)]
    picked = []
    while len(picked) < min(n, len(logits)):
        for q in queues:
            if q and len(picked) < n:
                picked.append(q.pop(0))
    return sorted(picked)


def edge_cases(nr_cpus):
    """Raw inputs at the edges of the feature transforms (saturation, no previous CPU, a CPU
    beyond the model, a kernel thread, zero counters)."""
    u64_max = (1 << 64) - 1
    return [
        {"prio": 120, "nr_cpus_allowed": nr_cpus, "runtime_ns": 0, "nvcsw": 0, "nivcsw": 0,
         "flags": 0, "switch_count": 0, "prev_cpu": 0},
        {"prio": 0, "nr_cpus_allowed": 1, "runtime_ns": u64_max, "nvcsw": u64_max,
         "nivcsw": u64_max, "flags": mf.PF_KTHREAD, "switch_count": u64_max, "prev_cpu": -1},
        {"prio": 139, "nr_cpus_allowed": 100000, "runtime_ns": 1023, "nvcsw": 1, "nivcsw": 2,
         "flags": 0xffffffff, "switch_count": 3, "prev_cpu": nr_cpus},
        {"prio": -5, "nr_cpus_allowed": 0, "runtime_ns": 1 << 40, "nvcsw": (1 << 11) + 1,
         "nivcsw": 12345, "flags": 0x40, "switch_count": 1 << 63, "prev_cpu": nr_cpus - 1},
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--out", required=True, help="directory for mlp.json, mlp_golden.json, "
                    "mlp_report.json")
    ap.add_argument("--name", default="mlp",
                    help="file names: NAME.json, NAME_golden.json, NAME_report.json")
    ap.add_argument("--hidden", type=int, default=12)
    ap.add_argument("--frac-bits", type=int, default=mf.DEFAULT_FRAC_BITS)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--patience", type=int, default=5)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    if not 1 <= args.hidden <= mf.MAX_HIDDEN:
        sys.exit(f"--hidden must be 1..{mf.MAX_HIDDEN} (the BPF model's bound)")
    rng = np.random.default_rng(args.seed)
    F = args.frac_bits

    traces = [(path, *gf.read_trace(path)) for path in args.traces]
    nr_cpus = max(int(header["nr_cpus"]) for _, header, _ in traces)
    if nr_cpus > mf.MAX_CPUS:
        sys.exit(f"{nr_cpus} CPUs: the BPF model holds at most {mf.MAX_CPUS}")
    parts = {"train": [], "val": [], "test": []}
    loads = []
    for path, header, rows in traces:
        raw, prev, y, stamp, source = samples(rows)
        x = mf.fixed_features(raw, prev, nr_cpus, F)
        order = np.argsort(stamp, kind="stable")
        n = len(y)
        a, b = int(0.6 * n), int(0.8 * n)
        name = os.path.basename(path).removesuffix(".csv").removeprefix("trace-")
        loads.append({"load": name, "label": header.get("label", ""), "events": len(rows),
                      "samples": n})
        raw_sorted = {k: v[order] for k, v in raw.items()}
        for part, sl in (("train", slice(0, a)), ("val", slice(a, b)), ("test", slice(b, n))):
            o = order[sl]
            parts[part].append({"load": name, "x": x[o], "y": y[o], "prev": prev[o],
                                "source": source[o],
                                "raw": {k: v[sl] for k, v in raw_sorted.items()}})
    xtr = np.concatenate([p["x"] for p in parts["train"]])
    ytr = np.concatenate([p["y"] for p in parts["train"]])
    xva = np.concatenate([p["x"] for p in parts["val"]])
    yva = np.concatenate([p["y"] for p in parts["val"]])
    if len(ytr) < 100:
        sys.exit(f"only {len(ytr)} training samples: record more")

    # Standardisation of the dequantised features, from the training split.
    ftr = mf.dequantise(xtr, F)
    mean = ftr.mean(axis=0)
    std = ftr.std(axis=0)
    std[std < 1e-6] = 1.0

    def norm(x):
        return (mf.dequantise(x, F) - mean) / std

    ntr, nva = norm(xtr), norm(xva)
    model = Mlp(xtr.shape[1], args.hidden, nr_cpus, rng)
    opt = Adam(model.p, args.lr)
    best = (np.inf, None, 0)
    for epoch in range(args.epochs):
        perm = rng.permutation(len(ytr))
        losses = []
        for i in range(0, len(perm), args.batch):
            idx = perm[i:i + args.batch]
            loss, g = model.loss_and_grads(ntr[idx], ytr[idx])
            opt.step(model.p, g)
            losses.append(loss)
        val_loss = mean_loss(model, nva, yva)
        val_acc = float(np.mean(model.forward(nva).argmax(axis=1) == yva))
        print(f"epoch {epoch:3d} train loss {np.mean(losses):.4f} val loss {val_loss:.4f} "
              f"val acc {val_acc:.4f}", flush=True)
        if val_loss < best[0] - 1e-5:
            best = (val_loss, {k: v.copy() for k, v in model.p.items()}, epoch)
        elif epoch - best[2] >= args.patience:
            print(f"early stop: no val improvement since epoch {best[2]}")
            break
    model.p = best[1]
    fixed = mf.fold_and_quantise(model.p["w1"], model.p["b1"], model.p["w2"], model.p["b2"],
                                 mean, std, F)

    # Evaluation on the test part of every trace.
    def evaluate(p):
        float_cpu = model.forward(norm(p["x"])).argmax(axis=1)
        logits = mf.fixed_logits(fixed, p["x"])
        fixed_cpu = mf.argmax_first(logits)
        wake = p["source"] == 3
        return {
            "load": p["load"],
            "test_samples": int(len(p["y"])),
            "agreement_with_float": float(np.mean(fixed_cpu == float_cpu)),
            "agreement_with_eevdf": float(np.mean(fixed_cpu == p["y"])),
            "float_agreement_with_eevdf": float(np.mean(float_cpu == p["y"])),
            "previous_cpu_agreement_with_eevdf": float(np.mean(p["prev"] == p["y"])),
            "wakeups_agreement_with_eevdf": float(np.mean(fixed_cpu[wake] == p["y"][wake]))
            if wake.any() else None,
            "migrations": int(np.sum(p["source"] == 4)),
            "eevdf_moved": float(np.mean(p["prev"] != p["y"])),
        }, logits

    per_load = []
    pooled = {"fixed": [], "float_agree": [], "eevdf": [], "prev": []}
    test_logits = []
    for p in parts["test"]:
        row, logits = evaluate(p)
        per_load.append(row)
        test_logits.append(logits)
        fixed_cpu = mf.argmax_first(logits)
        float_cpu = model.forward(norm(p["x"])).argmax(axis=1)
        pooled["float_agree"].append(fixed_cpu == float_cpu)
        pooled["eevdf"].append(fixed_cpu == p["y"])
        pooled["prev"].append(p["prev"] == p["y"])
    agree_float = float(np.mean(np.concatenate(pooled["float_agree"])))
    agree_eevdf = float(np.mean(np.concatenate(pooled["eevdf"])))
    prev_rule = float(np.mean(np.concatenate(pooled["prev"])))
    per_load_float = [r["agreement_with_float"] for r in per_load]

    # Golden cases: test rows of every load, then edge cases; raw inputs as BPF reads them.
    golden = []
    for p, logits in zip(parts["test"], test_logits):
        for i in golden_cases(None, p["prev"], logits, n=8):
            golden.append({**{k: int(p["raw"][k][i]) for k in mf.RAW_FIELDS},
                           "prev_cpu": int(p["prev"][i])})
    golden += edge_cases(nr_cpus)
    g_raw = {k: np.array([g[k] for g in golden],
                         dtype=np.int64 if k == "prio" else np.uint64) for k in mf.RAW_FIELDS}
    g_x = mf.fixed_features(g_raw, np.array([g["prev_cpu"] for g in golden]), nr_cpus, F)
    g_logits = mf.fixed_logits(fixed, g_x)
    for g, x, lg in zip(golden, g_x, g_logits):
        g["features"] = [int(v) for v in x]
        g["logits"] = [int(v) for v in lg]
        g["cpu"] = int(np.argmax(lg))

    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    os.makedirs(args.out, exist_ok=True)
    doc = mf.model_document(fixed, nr_cpus, {
        "trained_on": ", ".join(os.path.basename(t) for t in args.traces),
        "created": now,
        "float_mean": [float(v) for v in mean],
        "float_std": [float(v) for v in std],
    })
    with open(os.path.join(args.out, f"{args.name}.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    with open(os.path.join(args.out, f"{args.name}_golden.json"), "w") as f:
        json.dump({"schema": "asa.gru-mlp-golden", "version": 1, "model": f"{args.name}.json",
                   "cases": golden}, f)
        f.write("\n")
    report = {
        "schema": "asa.gru-mlp-report", "version": 1, "created": now,
        "command": "python train_mlp.py " + " ".join(
            a if os.sep not in a else os.path.basename(a) for a in sys.argv[1:]),
        "shape": [int(xtr.shape[1]), args.hidden, nr_cpus], "frac_bits": F,
        "cpus_in_traces": nr_cpus,
        "agreement_with_float": agree_float,
        "agreement_with_float_min_per_load": float(min(per_load_float)),
        "agreement_with_eevdf": agree_eevdf,
        "previous_cpu_agreement_with_eevdf": prev_rule,
        "float_val_loss": best[0], "best_epoch": best[2],
        "loads": loads, "per_load": per_load,
    }
    with open(os.path.join(args.out, f"{args.name}_report.json"), "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    print(f"test: agreement_with_float {agree_float:.4f} (min per load "
          f"{min(per_load_float):.4f}), agreement_with_eevdf {agree_eevdf:.4f}, "
          f"previous-CPU rule {prev_rule:.4f}")
    for r in per_load:
        print(f"  {r['load']:>10}: n {r['test_samples']:>6} float {r['agreement_with_float']:.4f} "
              f"eevdf {r['agreement_with_eevdf']:.4f} (float model {r['float_agreement_with_eevdf']:.4f}, "
              f"prev-cpu {r['previous_cpu_agreement_with_eevdf']:.4f})")


if __name__ == "__main__":
    main()
