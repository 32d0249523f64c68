"""Trains the scx_gru model on gru_record traces and exports it to ONNX.

The GRU is trained in numpy with hand-written backpropagation through time
(no torch: its wheel pulls gigabytes of CUDA). The forward pass follows the
ONNX GRU operator exactly (gate order z, r, h; linear_before_reset = 0), so
the exported graph (Transpose -> GRU -> Squeeze -> Gemm) computes the same
logits; the script checks that with ONNX Runtime.

Model: GRU(7 + C -> H) over the last N events of a task (the seven task
features of the thesis and, per CPU, whether the event placed the task there),
a linear layer to one logit per CPU, softmax cross-entropy against the CPU the default scheduler
chose for the task's next placement; Adam; early stopping on the validation
loss. Column-norm constraint: after every Adam step each input column of the
GRU input weight matrix W (3H x (7 + C), one column per feature) is projected back
to a norm >= tau, so no feature can be switched off.

Usage:
  python train_gru.py --out ../model TRACE.csv [TRACE.csv ...]
"""
import argparse
import datetime
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gru_features as gf  # noqa: E402

MODEL_SCHEMA = "asa.gru-model"
MODEL_VERSION = 2


def sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


class Gru:
    """GRU + linear head; parameters in ONNX layout."""

    def __init__(self, n_in, hidden, n_out, rng):
        k = 1.0 / np.sqrt(hidden)
        self.p = {
            "W": rng.uniform(-k, k, (3 * hidden, n_in)),
            "R": rng.uniform(-k, k, (3 * hidden, hidden)),
            "bW": np.zeros(3 * hidden),
            "bR": np.zeros(3 * hidden),
            "Wo": rng.uniform(-k, k, (n_out, hidden)),
            "bo": np.zeros(n_out),
        }
        self.H = hidden

    def forward(self, X, keep=False):
        """X [B, T, D] -> logits [B, C] (and the cache for backward)."""
        p, H = self.p, self.H
        B, T, _ = X.shape
        h = np.zeros((B, H))
        cache = []
        Rz, Rr, Rh = p["R"][:H], p["R"][H:2 * H], p["R"][2 * H:]
        bRz, bRr, bRh = p["bR"][:H], p["bR"][H:2 * H], p["bR"][2 * H:]
        for t in range(T):
            xw = X[:, t] @ p["W"].T + p["bW"]
            z = sigmoid(xw[:, :H] + h @ Rz.T + bRz)
            r = sigmoid(xw[:, H:2 * H] + h @ Rr.T + bRr)
            rh = r * h
            n = np.tanh(xw[:, 2 * H:] + rh @ Rh.T + bRh)
            h_new = (1.0 - z) * n + z * h
            if keep:
                cache.append((X[:, t], h, z, r, rh, n))
            h = h_new
        logits = h @ p["Wo"].T + p["bo"]
        return (logits, h, cache) if keep else logits

    def loss_and_grads(self, X, y):
        p, H = self.p, self.H
        logits, hT, cache = self.forward(X, keep=True)
        B = X.shape[0]
        m = logits.max(axis=1, keepdims=True)
        e = np.exp(logits - m)
        prob = e / e.sum(axis=1, keepdims=True)
        loss = -np.mean(np.log(prob[np.arange(B), y] + 1e-12))
        d = prob.copy()
        d[np.arange(B), y] -= 1.0
        d /= B
        g = {k: np.zeros_like(v) for k, v in p.items()}
        g["Wo"] = d.T @ hT
        g["bo"] = d.sum(axis=0)
        dh = d @ p["Wo"]
        Rz, Rr, Rh = p["R"][:H], p["R"][H:2 * H], p["R"][2 * H:]
        for x, h, z, r, rh, n in reversed(cache):
            dn = dh * (1.0 - z)
            dz = dh * (h - n)
            dh_prev = dh * z
            dah = dn * (1.0 - n * n)
            drh = dah @ Rh
            dh_prev += drh * r
            dar = drh * h * r * (1.0 - r)
            daz = dz * z * (1.0 - z)
            dh_prev += dar @ Rr + daz @ Rz
            da = np.concatenate([daz, dar, dah], axis=1)
            g["W"] += da.T @ x
            g["bW"] += da.sum(axis=0)
            g["R"][:H] += daz.T @ h
            g["R"][H:2 * H] += dar.T @ h
            g["R"][2 * H:] += dah.T @ rh
            g["bR"] += da.sum(axis=0)
            dh = dh_prev
        return loss, g

    def column_norms(self):
        return np.linalg.norm(self.p["W"], axis=0)

    def project_columns(self, tau):
        """Rescales every input column of W with a norm below tau to tau."""
        W = self.p["W"]
        norms = np.linalg.norm(W, axis=0)
        for j in np.where(norms < tau)[0]:
            if norms[j] == 0.0:
                W[:, j] = tau / np.sqrt(W.shape[0])
            else:
                W[:, j] *= tau / norms[j]


class Adam:
    def __init__(self, params, lr, b1=0.9, b2=0.999, eps=1e-8):
        self.lr, self.b1, self.b2, self.eps, self.t = lr, b1, b2, eps, 0
        self.m = {k: np.zeros_like(v) for k, v in params.items()}
        self.v = {k: np.zeros_like(v) for k, v in params.items()}

    def step(self, params, grads):
        self.t += 1
        for k in params:
            self.m[k] = self.b1 * self.m[k] + (1 - self.b1) * grads[k]
            self.v[k] = self.b2 * self.v[k] + (1 - self.b2) * grads[k] ** 2
            mh = self.m[k] / (1 - self.b1 ** self.t)
            vh = self.v[k] / (1 - self.b2 ** self.t)
            params[k] -= self.lr * mh / (np.sqrt(vh) + self.eps)


def grad_check(rng):
    """Finite differences on a tiny model: returns the worst relative error."""
    model = Gru(3, 4, 2, rng)
    for k in ("bW", "bR", "bo"):
        model.p[k] = rng.normal(0, 0.3, model.p[k].shape)
    X = rng.normal(size=(5, 4, 3))
    y = rng.integers(0, 2, 5)
    _, g = model.loss_and_grads(X, y)
    worst = 0.0
    for k, v in model.p.items():
        for idx in np.ndindex(v.shape):
            old = v[idx]
            v[idx] = old + 1e-6
            lp, _ = model.loss_and_grads(X, y)
            v[idx] = old - 1e-6
            lm, _ = model.loss_and_grads(X, y)
            v[idx] = old
            num = (lp - lm) / 2e-6
            worst = max(worst, abs(num - g[k][idx]) / max(1e-8, abs(num) + abs(g[k][idx])))
    return worst


def accuracy(model, X, y):
    if len(y) == 0:
        return float("nan")
    return float(np.mean(model.forward(X).argmax(axis=1) == y))


def mean_loss(model, X, y):
    logits = model.forward(X)
    m = logits.max(axis=1, keepdims=True)
    logp = logits - m - np.log(np.exp(logits - m).sum(axis=1, keepdims=True))
    return float(-np.mean(logp[np.arange(len(y)), y]))


def export_onnx(model, window, n_in, n_cpus, path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    H, p = model.H, model.p
    inits = [
        numpy_helper.from_array(p["W"][None].astype(np.float32), "W"),
        numpy_helper.from_array(p["R"][None].astype(np.float32), "R"),
        numpy_helper.from_array(np.concatenate([p["bW"], p["bR"]])[None].astype(np.float32), "B"),
        numpy_helper.from_array(p["Wo"].astype(np.float32), "Wo"),
        numpy_helper.from_array(p["bo"].astype(np.float32), "bo"),
        numpy_helper.from_array(np.array([0], dtype=np.int64), "axis0"),
    ]
    nodes = [
        helper.make_node("Transpose", ["events"], ["seq_major"], perm=[1, 0, 2]),
        helper.make_node("GRU", ["seq_major", "W", "R", "B"], ["Y", "Y_h"], hidden_size=H,
                         linear_before_reset=0),
        helper.make_node("Squeeze", ["Y_h", "axis0"], ["h_last"]),
        helper.make_node("Gemm", ["h_last", "Wo", "bo"], ["logits"], transB=1),
    ]
    graph = helper.make_graph(
        nodes, "scx_gru",
        [helper.make_tensor_value_info("events", TensorProto.FLOAT, ["batch", window, n_in])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", n_cpus])],
        inits)
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                   producer_name="asa gru_expert/train")
    onnx_model.ir_version = 9
    onnx.checker.check_model(onnx_model)
    onnx.save(onnx_model, path)


def golden_cases(logits, n=8):
    """Indices of up to n probe rows, taking each predicted CPU in turn, so the
    golden cases cover every CPU the model predicts on the probe (a batch that
    swapped rows would then give a wrong answer)."""
    by_cpu = {}
    for i, cpu in enumerate(np.argmax(logits, axis=1)):
        by_cpu.setdefault(int(cpu), []).append(i)
    queues = [by_cpu[c] for c in sorted(by_cpu)]
    picked = []
    while len(picked) < min(n, len(logits)):
        for q in queues:
            if q and len(picked) < n:
                picked.append(q.pop(0))
    return sorted(picked)


def toml_str(s):
    return json.dumps(s)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--out", required=True, help="directory for gru.onnx, gru.toml, training_report.md")
    ap.add_argument("--window", type=int, default=10)
    ap.add_argument("--hidden", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=80)
    ap.add_argument("--patience", type=int, default=6)
    ap.add_argument("--tau", type=float, default=0.25, help="minimum norm of every input column of W")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()

    gf.self_check()
    rng = np.random.default_rng(args.seed)
    worst = grad_check(rng)
    if worst > 1e-4:
        sys.exit(f"gradient check failed: worst relative error {worst:.2e}")

    # Per trace: windows, then a chronological split (60/20/20) so the test
    # set is later in time than anything trained on.
    parts = {"train": [], "val": [], "test": []}
    trace_lines = []
    traces = [(path, *gf.read_trace(path)) for path in args.traces]
    n_cpus = max(int(header["nr_cpus"]) for _, header, _ in traces)
    table = gf.feature_table(n_cpus)
    for path, header, rows in traces:
        feats = gf.transformed(gf.raw_matrix(rows, n_cpus), n_cpus)
        X, y, last, stamp = gf.windows_per_task(rows, feats, args.window)
        order = np.argsort(stamp, kind="stable")
        X, y, last = X[order], y[order], last[order]
        n = len(y)
        a, b = int(0.6 * n), int(0.8 * n)
        for name, sl in (("train", slice(0, a)), ("val", slice(a, b)), ("test", slice(b, n))):
            parts[name].append((X[sl], y[sl], last[sl]))
        trace_lines.append(f"| {os.path.basename(path)} | {header.get('label', '')} | {len(rows)} | {n} |")
    data = {}
    for name, lst in parts.items():
        data[name] = tuple(np.concatenate([t[i] for t in lst]) for i in range(3))
    Xtr, ytr, _ = data["train"]
    if len(ytr) < 100:
        sys.exit(f"only {len(ytr)} training samples: record more")

    # Standardization from the training split.
    flat = Xtr.reshape(-1, len(table))
    mean = flat.mean(axis=0)
    std = flat.std(axis=0)
    std[std < 1e-6] = 1.0
    norm = {k: ((v[0] - mean) / std, v[1], v[2]) for k, v in data.items()}

    model = Gru(len(table), args.hidden, n_cpus, rng)
    model.project_columns(args.tau)
    opt = Adam(model.p, args.lr)
    Xtr, ytr, _ = norm["train"]
    Xva, yva, _ = norm["val"]
    best = (np.inf, None, 0)
    history = []
    for epoch in range(args.epochs):
        perm = rng.permutation(len(ytr))
        losses = []
        for i in range(0, len(perm), args.batch):
            idx = perm[i:i + args.batch]
            loss, g = model.loss_and_grads(Xtr[idx], ytr[idx])
            opt.step(model.p, g)
            model.project_columns(args.tau)
            losses.append(loss)
        val_loss = mean_loss(model, Xva, yva)
        history.append((epoch, float(np.mean(losses)), val_loss, accuracy(model, Xva, yva)))
        print(f"epoch {epoch:3d} train loss {np.mean(losses):.4f} val loss {val_loss:.4f} "
              f"val acc {history[-1][3]:.4f}", flush=True)
        if val_loss < best[0] - 1e-4:
            best = (val_loss, {k: v.copy() for k, v in model.p.items()}, epoch)
        elif epoch - best[2] >= args.patience:
            print(f"early stop: no val improvement since epoch {best[2]}")
            break
    model.p = best[1]

    os.makedirs(args.out, exist_ok=True)
    onnx_path = os.path.join(args.out, "gru.onnx")
    export_onnx(model, args.window, len(table), n_cpus, onnx_path)

    # The exported graph must compute what numpy computes. (onnxruntime 1.29+ sends telemetry
    # from Linux unless ORT_DISABLE_TELEMETRY=1 when it loads; an explicit setting wins.)
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    import onnxruntime as ort
    sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    Xte, yte, last_te = norm["test"]
    probe = Xte[:512].astype(np.float32)
    ort_logits = sess.run(["logits"], {"events": probe})[0]
    max_diff = float(np.abs(ort_logits - model.forward(probe.astype(np.float64))).max())
    if max_diff > 1e-4:
        sys.exit(f"ONNX export differs from numpy by {max_diff}")

    # Golden cases for the Rust side (standardized inputs -> ORT logits).
    cases = golden_cases(ort_logits)
    golden = {"schema": "asa.gru-golden", "version": 1, "window": args.window,
              "inputs": [probe[i].reshape(-1).tolist() for i in cases],
              "logits": [ort_logits[i].tolist() for i in cases]}
    with open(os.path.join(args.out, "golden.json"), "w") as f:
        json.dump(golden, f)

    with open(os.path.join(args.out, "gru.toml"), "w") as f:
        f.write("# scx_gru model metadata (written by train/train_gru.py)\n")
        f.write(f'schema = "{MODEL_SCHEMA}"\nversion = {MODEL_VERSION}\nonnx = "gru.onnx"\n')
        f.write(f"window = {args.window}\nnr_cpus = {n_cpus}\nhidden = {args.hidden}\n")
        f.write('input_name = "events"\noutput_name = "logits"\n')
        f.write(f"trained_on = {toml_str(', '.join(os.path.basename(t) for t in args.traces))}\n")
        for j, (name, kind) in enumerate(table):
            f.write(f'\n[[feature]]\nname = "{name}"\ntransform = "{kind}"\n'
                    f"mean = {float(mean[j])!r}\nstd = {float(std[j])!r}\n")

    # Report.
    def row(name):
        X, y, last = norm[name]
        maj = np.bincount(data["train"][1], minlength=n_cpus).argmax()
        best_const = max(np.mean(y == c) for c in range(n_cpus))
        return (f"| {name} | {len(y)} | {accuracy(model, X, y):.4f} | {np.mean(y == maj):.4f} | "
                f"{best_const:.4f} | {np.mean(y == last):.4f} |")

    pred_te = model.forward(Xte).argmax(axis=1)
    conf = np.zeros((n_cpus, n_cpus), int)
    for t, pr in zip(yte, pred_te):
        conf[t, pr] += 1
    norms = model.column_norms()
    lines = [
        "# scx_gru model: training report",
        "",
        f"Generated {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')} by "
        f"`train/train_gru.py` (numpy BPTT, seed {args.seed}):",
        "",
        "    python train_gru.py " + " ".join(
            a if os.sep not in a else os.path.basename(a) for a in sys.argv[1:]),
        "",
        "## Data (recorded with `gru_record` under the kernel's default scheduler, EEVDF)",
        "",
        "| trace | label | events | samples |",
        "|---|---|---|---|",
        *trace_lines,
        "",
        f"Sample: the last {args.window} events of one task (per-task window) -> the CPU of that task's "
        "next placement. Split per trace in time order: 60% train, 20% validation, 20% test.",
        "",
        "## Accuracy against the default scheduler's choices",
        "",
        "| split | samples | GRU | majority CPU of train | best constant CPU of this split (hindsight) "
        "| task's previous CPU (copied from the input) |",
        "|---|---|---|---|---|---|",
        row("train"), row("val"), row("test"),
        "",
        "The default scheduler keeps a task on its previous CPU almost always. The seven thesis "
        "features (table 3.3) do not include that CPU (a model of those alone reached 0.448 on "
        "the test split, below the best constant CPU), so the model also sees, per event, the CPU "
        "the event placed the task on (placed_cpu_K); the last column of the table is the rule "
        "'the next placement is where the last event put it', the bar the GRU has to meet. "
        "Features that are constant in the data (std 0, kept at 1) give "
        "a zero input after standardization, so their column norm stays where the constraint "
        "puts it without the data ever using it.",
        "",
        "Test confusion matrix (rows: CPU chosen by the default scheduler, columns: GRU):",
        "",
        "| | " + " | ".join(f"cpu{c}" for c in range(n_cpus)) + " |",
        "|---|" + "---|" * n_cpus,
        *[f"| cpu{t} | " + " | ".join(str(v) for v in conf[t]) + " |" for t in range(n_cpus)],
        "",
        f"## Column-norm constraint (tau = {args.tau}: every column projected to norm >= tau after each step)",
        "",
        "| feature | transform | mean | std | norm of W[:, j] |",
        "|---|---|---|---|---|",
        *[f"| {n} | {k} | {mean[j]:.4g} | {std[j]:.4g} | {norms[j]:.4f} |"
          for j, (n, k) in enumerate(table)],
        "",
        f"Minimum column norm: {norms.min():.4f} (constraint holds: {bool(norms.min() >= args.tau - 1e-9)}).",
        "",
        "## Training",
        "",
        f"GRU hidden {args.hidden}, {n_cpus} classes, Adam lr {args.lr}, batch {args.batch}, "
        f"early stopping patience {args.patience}; best epoch {best[2]} "
        f"(validation loss {best[0]:.4f}); gradient check worst relative error {worst:.2e}; "
        f"ONNX Runtime {ort.__version__} vs numpy logits max |diff| {max_diff:.2e}.",
        "",
        "| epoch | train loss | val loss | val acc |",
        "|---|---|---|---|",
        *[f"| {e} | {tl:.4f} | {vl:.4f} | {va:.4f} |" for e, tl, vl, va in history],
        "",
    ]
    with open(os.path.join(args.out, "training_report.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines[:40]))


if __name__ == "__main__":
    main()
