"""The in-BPF model's Python side: the quantiser (round trip, rounding, saturation), the
integer features and inference (exact, no overflow at the bounds), the exporter's checks,
and train_mlp.py end to end on a synthetic trace."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

TRAIN = os.path.join(os.path.dirname(__file__), "..")
sys.path.insert(0, TRAIN)
sys.path.insert(0, os.path.dirname(__file__))
import mlp_fixed as mf  # noqa: E402
from test_train_gru import write_trace  # noqa: E402


def test_quantise_round_trip_is_within_half_a_step():
    rng = np.random.default_rng(1)
    values = rng.uniform(-60, 60, 10_000)
    for f in (11, 14):
        back = mf.dequantise(mf.quantise(values, f), f)
        assert np.max(np.abs(back - values)) <= 0.5 / (1 << f) + 1e-12


def test_quantise_rounds_half_away_from_zero_like_the_seed():
    step = 1.0 / (1 << 11)
    assert mf.quantise([0.5 * step, -0.5 * step, 1.5 * step, -1.5 * step], 11).tolist() == \
        [1, -1, 2, -2]
    assert mf.quantise([0.49 * step, -0.49 * step], 11).tolist() == [0, 0]


def test_quantise_saturates_at_the_weight_bound():
    q = mf.quantise([1e9, -1e9, 511.9, -600.0], 11)
    assert q.tolist() == [mf.WEIGHT_MAX, -mf.WEIGHT_MAX, round(511.9 * 2048), -mf.WEIGHT_MAX]


def test_quantise_refuses_nan_and_infinity():
    with pytest.raises(ValueError):
        mf.quantise([0.0, float("nan")], 11)
    with pytest.raises(ValueError):
        mf.quantise([float("inf")], 11)


def test_log2q_is_exact_at_powers_of_two_and_linear_between():
    f = 11
    assert mf.log2q(1, f).item() == 0
    assert mf.log2q(1 << 40, f).item() == 40 << f
    assert mf.log2q(3, f).item() == (1 << f) + (1 << (f - 1))  # 1.5: linear mantissa
    assert mf.log2q((1 << 64) - 1, f).item() == (63 << f) + (1 << f) - 1
    v = np.arange(1, 5000, dtype=np.uint64)
    err = np.log2(v.astype(float)) - mf.log2q(v, f) / (1 << f)
    assert err.min() >= -1e-9 and err.max() <= 0.0861


def test_features_saturate_and_ignore_unknown_cpus():
    u = (1 << 64) - 1
    raw = {"prio": np.array([-5, 300]), "nr_cpus_allowed": np.array([0, 10**6], dtype=np.uint64),
           "runtime_ns": np.array([0, u], dtype=np.uint64),
           "nvcsw": np.array([0, u], dtype=np.uint64), "nivcsw": np.array([1, 2], dtype=np.uint64),
           "flags": np.array([mf.PF_KTHREAD, 0x40], dtype=np.uint64),
           "switch_count": np.array([0, 1], dtype=np.uint64)}
    x = mf.fixed_features(raw, np.array([-1, 1]), 2, 11)
    assert x[0].tolist() == [0, 0, 0, 0, 1 << 11, 1 << 11, 0, 0, 0]
    assert x[1, 0] == 255 << 11 and x[1, 1] == 4096 << 11
    assert x[1, 7:].tolist() == [0, 1 << 11]
    assert np.all(np.abs(x) <= mf.ACT_MAX)


def _tiny_model(f=11):
    return {"frac_bits": f, "w1": np.array([[1 << f, -(1 << f)], [1 << (f - 1), 0]]),
            "b1": np.array([0, 1 << f]), "w2": np.array([[1 << f, 0], [0, 1 << f]]),
            "b2": np.array([0, 0])}


def test_fixed_logits_floor_shift_relu_and_first_maximum():
    m = _tiny_model()
    x = np.array([[3 << 11, 1 << 11], [-3, 0]])
    # h = relu([2, 1.5 + 1]) -> logits [2, 2.5]; second row: h0 = relu(floor(-3)) = 0,
    # h1 = floor(-1.5) >> ... = -2 + 2048.
    logits = mf.fixed_logits(m, x)
    assert logits[0].tolist() == [2 << 11, (5 << 11) // 2]
    assert logits[1].tolist() == [0, ((-3 * 1024) >> 11) + 2048]
    assert mf.argmax_first(np.array([[5, 5, 1]])).tolist() == [0]


def test_fixed_logits_do_not_overflow_at_the_bounds():
    n_in, h, c = mf.MAX_IN, mf.MAX_HIDDEN, mf.MAX_CPUS
    m = {"frac_bits": 0, "w1": np.full((h, n_in), mf.WEIGHT_MAX), "b1": np.zeros(h, int),
         "w2": np.full((c, h), mf.WEIGHT_MAX), "b2": np.zeros(c, int)}
    x = np.full((1, n_in), mf.ACT_MAX)
    logits = mf.fixed_logits(m, x)
    assert logits.tolist()[0] == [mf.ACT_MAX] * c  # saturated, not wrapped
    assert mf.WEIGHT_MAX * mf.ACT_MAX * mf.MAX_IN < 2 ** 63


def test_exporter_writes_a_checked_document_and_the_checks_refuse_bad_ones():
    rng = np.random.default_rng(2)
    mean, std = rng.normal(size=9), rng.uniform(0.5, 2, 9)
    fixed = mf.fold_and_quantise(rng.normal(size=(4, 9)), rng.normal(size=4),
                                 rng.normal(size=(2, 4)), rng.normal(size=2), mean, std, 11)
    doc = json.loads(json.dumps(mf.model_document(fixed, 2, {"trained_on": "t"})))
    assert (doc["schema"], doc["version"], doc["frac_bits"]) == ("asa.gru-mlp", 1, 11)
    assert (doc["n_in"], doc["n_hidden"], doc["n_out"]) == (9, 4, 2)
    assert doc["format"] == "Q21.11 in int32, int64 accumulator"
    back = mf.model_from_document(doc)
    assert np.array_equal(back["w1"], fixed["w1"])
    for key, value in (("version", 2), ("n_out", 3), ("frac_bits", 17)):
        with pytest.raises(ValueError):
            mf.check_document({**doc, key: value})
    with pytest.raises(ValueError):
        mf.check_document({**doc, "b2": [mf.WEIGHT_MAX + 1, 0]})
    with pytest.raises(ValueError):
        mf.check_document({**doc, "w2": [[0] * 4]})


def test_folding_keeps_the_float_model_up_to_quantisation():
    rng = np.random.default_rng(3)
    w1, b1, w2, b2 = rng.normal(size=(8, 9)), rng.normal(size=8), rng.normal(size=(2, 8)), \
        rng.normal(size=2)
    mean, std = rng.normal(size=9), rng.uniform(0.5, 2, 9)
    fixed = mf.fold_and_quantise(w1, b1, w2, b2, mean, std, 11)
    xq = rng.integers(-4 << 11, 4 << 11, (500, 9))
    xf = (mf.dequantise(xq, 11) - mean) / std
    float_logits = np.maximum(xf @ w1.T + b1, 0) @ w2.T + b2
    fixed_logits = mf.dequantise(mf.fixed_logits(fixed, xq), 11)
    assert np.max(np.abs(float_logits - fixed_logits)) < 0.05


def test_train_mlp_exports_model_golden_and_report(tmp_path):
    trace = tmp_path / "trace-synthetic.csv"
    write_trace(trace, tasks=30, events=80)
    out = tmp_path / "model"
    subprocess.run([sys.executable, os.path.join(TRAIN, "train_mlp.py"), "--out", str(out),
                    "--epochs", "40", "--batch", "64", str(trace)], check=True, capture_output=True, text=True)
    doc = json.loads((out / "mlp.json").read_text())
    model = mf.model_from_document(doc)
    report = json.loads((out / "mlp_report.json").read_text())
    assert report["agreement_with_float"] >= 0.99
    # The synthetic scheduler keeps a task on its previous CPU 95 % of the time.
    assert report["agreement_with_eevdf"] >= report["previous_cpu_agreement_with_eevdf"] - 0.03
    golden = json.loads((out / "mlp_golden.json").read_text())
    for case in golden["cases"]:
        logits = mf.fixed_logits(model, np.array([case["features"]]))[0]
        assert logits.tolist() == case["logits"] and int(np.argmax(logits)) == case["cpu"]


def test_train_mlp_names_its_files_and_sizes_the_model_by_the_traces_cpus(tmp_path):
    trace = tmp_path / "trace-synthetic4.csv"
    write_trace(trace, nr_cpus=4, tasks=30, events=80)
    out = tmp_path / "model"
    subprocess.run([sys.executable, os.path.join(TRAIN, "train_mlp.py"), "--out", str(out),
                    "--name", "mlp-4cpu", "--epochs", "40", "--batch", "64", str(trace)],
                   check=True, capture_output=True, text=True)
    assert sorted(p.name for p in out.iterdir()) == \
        ["mlp-4cpu.json", "mlp-4cpu_golden.json", "mlp-4cpu_report.json"]
    doc = json.loads((out / "mlp-4cpu.json").read_text())
    assert (doc["n_in"], doc["n_out"]) == (7 + 4, 4)
    report = json.loads((out / "mlp-4cpu_report.json").read_text())
    assert report["cpus_in_traces"] == 4 and report["shape"] == [11, 12, 4]
    golden = json.loads((out / "mlp-4cpu_golden.json").read_text())
    assert golden["model"] == "mlp-4cpu.json"
    model = mf.model_from_document(doc)
    cpus = set()
    for case in golden["cases"]:
        logits = mf.fixed_logits(model, np.array([case["features"]]))[0]
        assert logits.tolist() == case["logits"] and int(np.argmax(logits)) == case["cpu"]
        cpus.add(case["cpu"])
    assert cpus - {0, 1}, "a 4-CPU model picks beyond CPUs 0-1 somewhere"
