"""The in-BPF placement model's integer arithmetic, in Python: features, quantiser, inference.

This module is the reference for `src/bpf/mlp.bpf.h` (and `src/bpf/mlp_intf.h`): every function
here that produces integers computes exactly what the BPF code computes, bit for bit. The Rust
golden test (`tests/bpf_mlp.rs`) runs the BPF program on inputs written by `train_mlp.py` and
requires the same logits and CPU.

Invariant (what keeps the 64-bit accumulators exact in BPF and here):
  * features and activations are clamped to |v| <= ACT_MAX (2^30 - 1);
  * weights and biases are saturated to |w| <= WEIGHT_MAX (2^20 - 1) when quantised;
  * a layer has at most MAX_IN (23) inputs, so |sum w*x| < 23 * 2^50 < 2^55: no overflow.

Number format: Q(32-F).F fixed point in signed 32-bit words, F = `frac_bits` (11 by default:
Q21.11 as in the seed `ml_load_balancing_paper.txt`), products in 64 bits, then an arithmetic
(flooring) right shift by F. Conversion rounds half away from zero, as the seed does.

Per decision the model sees one event of a task (the scheduler's view when it wakes up):
  prio, nr_cpus_allowed, log2(1 + runtime_ns / 1024), log2(1 + nvcsw), log2(1 + nivcsw),
  is-kthread, log2(1 + switch_count), then one column per CPU: 1 on the task's previous CPU.
The logarithms are the integer log2 with a linear mantissa (exact at powers of two, at most
0.086 below log2 elsewhere), computable in BPF with shifts only.
"""
import numpy as np

MODEL_SCHEMA = "asa.gru-mlp"
MODEL_VERSION = 1
DEFAULT_FRAC_BITS = 11
MAX_FRAC_BITS = 16
NR_TASK_FEATURES = 7
MAX_CPUS = 16
MAX_IN = NR_TASK_FEATURES + MAX_CPUS
MAX_HIDDEN = 16
WEIGHT_MAX = (1 << 20) - 1
ACT_MAX = (1 << 30) - 1
PF_KTHREAD = 0x00200000
PRIO_MAX = 255
NR_CPUS_ALLOWED_MAX = 4096
U64_MAX = (1 << 64) - 1

# (name, how the raw field becomes a fixed-point feature), in tensor order.
TASK_FEATURES = [
    ("prio", "clamp_0_255"),
    ("nr_cpus_allowed", "clamp_0_4096"),
    ("runtime_ns", "log2q_1p_div1024"),
    ("nvcsw", "log2q_1p"),
    ("nivcsw", "log2q_1p"),
    ("flags", "kthread_bit"),
    ("switch_count", "log2q_1p"),
]
RAW_FIELDS = [name for name, _ in TASK_FEATURES]


def feature_table(nr_cpus):
    """Input columns of a model for nr_cpus CPUs: the task features, then prev_cpu_0.."""
    return TASK_FEATURES + [(f"prev_cpu_{c}", "one_hot") for c in range(nr_cpus)]


def log2q(v, frac_bits):
    """Integer log2 of v >= 1 (uint64 numpy array or int) in Q.F with a linear mantissa:
    msb(v) << F | the F bits below the msb. Exact at powers of two."""
    v = np.asarray(v, dtype=np.uint64)
    if np.any(v == 0):
        raise ValueError("log2q of 0")
    n = np.zeros(v.shape, dtype=np.int64)
    for k in range(1, 64):
        n += (v >= np.uint64(1 << k)).astype(np.int64)
    mask = (1 << frac_bits) - 1
    down = np.right_shift(v, np.maximum(n - frac_bits, 0).astype(np.uint64))
    up = np.left_shift(v, np.maximum(frac_bits - n, 0).astype(np.uint64))
    frac = np.where(n >= frac_bits, down, up).astype(np.uint64) & np.uint64(mask)
    return (n << frac_bits) | frac.astype(np.int64)


def _one_plus(v):
    """1 + v for uint64 v, saturated below 2^64."""
    v = np.asarray(v, dtype=np.uint64)
    return np.minimum(v, np.uint64(U64_MAX - 1)) + np.uint64(1)


def fixed_features(raw, prev_cpu, nr_cpus, frac_bits):
    """Fixed-point features [n, 7 + nr_cpus] int64 from raw event fields.

    raw: dict of the seven RAW_FIELDS -> integer arrays (uint64-compatible, prio may be signed);
    prev_cpu: int array, the CPU of the task's previous event (-1: none)."""
    one = 1 << frac_bits
    prio = np.clip(np.asarray(raw["prio"], dtype=np.int64), 0, PRIO_MAX) << frac_bits
    allowed = np.clip(np.asarray(raw["nr_cpus_allowed"], dtype=np.int64), 0,
                      NR_CPUS_ALLOWED_MAX) << frac_bits
    runtime = log2q(_one_plus(np.right_shift(np.asarray(raw["runtime_ns"], dtype=np.uint64),
                                             np.uint64(10))), frac_bits)
    nvcsw = log2q(_one_plus(raw["nvcsw"]), frac_bits)
    nivcsw = log2q(_one_plus(raw["nivcsw"]), frac_bits)
    flags = np.asarray(raw["flags"], dtype=np.uint64)
    kthread = np.where((flags & np.uint64(PF_KTHREAD)) != 0, one, 0).astype(np.int64)
    switches = log2q(_one_plus(raw["switch_count"]), frac_bits)
    prev = np.asarray(prev_cpu, dtype=np.int64)
    onehot = np.where(prev[:, None] == np.arange(nr_cpus)[None, :], one, 0).astype(np.int64)
    cols = [prio, allowed, runtime, nvcsw, nivcsw, kthread, switches]
    x = np.concatenate([np.stack(cols, axis=1), onehot], axis=1)
    return np.clip(x, -ACT_MAX, ACT_MAX)


def quantise(values, frac_bits):
    """Float array -> fixed-point int64 array: round half away from zero, saturated to
    +-WEIGHT_MAX. Refuses NaN and infinities."""
    v = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(v)):
        raise ValueError("cannot quantise a NaN or an infinity")
    scaled = v * float(1 << frac_bits)
    rounded = np.where(scaled >= 0, np.floor(scaled + 0.5), np.ceil(scaled - 0.5))
    return np.clip(rounded, -WEIGHT_MAX, WEIGHT_MAX).astype(np.int64)


def dequantise(values, frac_bits):
    """Fixed-point integers -> floats."""
    return np.asarray(values, dtype=np.float64) / float(1 << frac_bits)


def _layer(x, w, b, frac_bits):
    """One fixed-point affine layer: (x @ w.T) >> F + b, clamped to +-ACT_MAX (int64 exact)."""
    acc = np.asarray(x, dtype=np.int64) @ np.asarray(w, dtype=np.int64).T
    out = (acc >> frac_bits) + np.asarray(b, dtype=np.int64)[None, :]
    return np.clip(out, -ACT_MAX, ACT_MAX)


def fixed_logits(model, x):
    """Integer inference: fixed-point features [n, n_in] -> logits [n, n_out] (int64), as BPF."""
    f = model["frac_bits"]
    h = np.maximum(_layer(x, model["w1"], model["b1"], f), 0)
    return _layer(h, model["w2"], model["b2"], f)


def argmax_first(logits):
    """Index of the first maximum per row (BPF takes the first on ties; so does numpy)."""
    return np.argmax(logits, axis=1)


def fold_and_quantise(w1, b1, w2, b2, mean, std, frac_bits):
    """Folds the standardisation (x - mean) / std into the first layer of a float MLP whose
    inputs are dequantised features, and quantises every tensor.

    Float model: h = relu(W1 ((x/2^F - mean) / std) + b1); logits = W2 h + b2.
    Folded:      h = relu(W1' (x/2^F) + b1') with W1' = W1 / std, b1' = b1 - W1' mean."""
    w1f = w1 / std[None, :]
    b1f = b1 - w1f @ mean
    return {
        "frac_bits": frac_bits,
        "w1": quantise(w1f, frac_bits),
        "b1": quantise(b1f, frac_bits),
        "w2": quantise(w2, frac_bits),
        "b2": quantise(b2, frac_bits),
    }


def model_document(model, nr_cpus, extra=None):
    """The exported model file's content (JSON-serialisable): schema, version, shape, scale,
    the feature table and the integer tensors (row-major: w1[hidden][in], w2[out][hidden])."""
    w1, w2 = np.asarray(model["w1"]), np.asarray(model["w2"])
    n_hidden, n_in = w1.shape
    n_out = w2.shape[0]
    doc = {
        "schema": MODEL_SCHEMA,
        "version": MODEL_VERSION,
        "format": f"Q{32 - model['frac_bits']}.{model['frac_bits']} in int32, int64 accumulator",
        "frac_bits": int(model["frac_bits"]),
        "n_in": int(n_in),
        "n_hidden": int(n_hidden),
        "n_out": int(n_out),
        "features": [{"name": n, "transform": t} for n, t in feature_table(nr_cpus)],
        "w1": [[int(v) for v in row] for row in w1],
        "b1": [int(v) for v in model["b1"]],
        "w2": [[int(v) for v in row] for row in w2],
        "b2": [int(v) for v in model["b2"]],
    }
    if extra:
        doc.update(extra)
    check_document(doc)
    return doc


def check_document(doc):
    """The checks the Rust loader makes (schema, version, shapes, bounds); raises ValueError."""
    if doc.get("schema") != MODEL_SCHEMA or doc.get("version") != MODEL_VERSION:
        raise ValueError(f"schema {doc.get('schema')} v{doc.get('version')}, "
                         f"expected {MODEL_SCHEMA} v{MODEL_VERSION}")
    f, n_in, n_hidden, n_out = doc["frac_bits"], doc["n_in"], doc["n_hidden"], doc["n_out"]
    if not 0 <= f <= MAX_FRAC_BITS:
        raise ValueError(f"frac_bits {f} outside 0..{MAX_FRAC_BITS}")
    if not (1 <= n_out <= MAX_CPUS and n_in == NR_TASK_FEATURES + n_out
            and 1 <= n_hidden <= MAX_HIDDEN):
        raise ValueError(f"shape {n_in}-{n_hidden}-{n_out} does not fit the BPF model "
                         f"(n_in = 7 + n_out, n_out <= {MAX_CPUS}, n_hidden <= {MAX_HIDDEN})")
    if [x["name"] for x in doc["features"]] != [n for n, _ in feature_table(n_out)]:
        raise ValueError("feature table differs from mlp_fixed.feature_table")
    shapes = {"w1": (n_hidden, n_in), "b1": (n_hidden,), "w2": (n_out, n_hidden), "b2": (n_out,)}
    for name, shape in shapes.items():
        arr = np.asarray(doc[name], dtype=np.int64)
        if arr.shape != shape:
            raise ValueError(f"{name} has shape {arr.shape}, expected {shape}")
        if np.any(np.abs(arr) > WEIGHT_MAX):
            raise ValueError(f"{name} has a value beyond +-{WEIGHT_MAX}")


def model_from_document(doc):
    """The integer model (numpy arrays) of a checked document."""
    check_document(doc)
    return {"frac_bits": doc["frac_bits"], **{k: np.asarray(doc[k], dtype=np.int64)
                                              for k in ("w1", "b1", "w2", "b2")}}
