"""in_kernel_summary.py: the throughput ratio paired within rounds, the mixed load counted
once, the earlier figures kept under their key, and the script end to end."""
import json
import math
import os
import subprocess
import sys

import pytest

TRAIN = os.path.join(os.path.dirname(__file__), "..")
sys.path.insert(0, TRAIN)
import in_kernel_summary as ks  # noqa: E402


def run(sched, rnd, row, value):
    if row == "hackbench":
        return {"scheduler": sched, "round": rnd, "row": row, "sysbench": None,
                "hackbench_s": 1.0 / value}
    return {"scheduler": sched, "round": rnd, "row": row,
            "sysbench": {"events_per_s": value}, "hackbench_s": None}


def runs():
    out = []
    for rnd in (1, 2, 3):
        for row, base in (("cpu1", 100.0), ("io", 50.0), ("mixed-cpu", 40.0),
                          ("mixed-io", 20.0), ("hackbench", 0.5)):
            out.append(run("eevdf", rnd, row, base))
            # bpf: 0.9 x on cpu1, 1.1 x on io, mixed parts 0.5 x and 2 x, hackbench 1 x
            factor = {"cpu1": 0.9, "io": 1.1, "mixed-cpu": 0.5, "mixed-io": 2.0}.get(row, 1.0)
            out.append(run("gru-bpfmodel", rnd, row, base * factor * (1 + 0.01 * (rnd - 2))))
            out.append(run("gru", rnd, row, base))
    return out


def test_the_mixed_load_counts_once_as_the_mean_of_its_parts():
    per_load = ks.round_ratios(runs(), "gru-bpfmodel")
    assert sorted(per_load) == ["cpu1", "hackbench", "io", "mixed"]
    assert per_load["mixed"][2] == pytest.approx(1.0)  # sqrt(0.5 * 2)
    assert per_load["cpu1"][1] == pytest.approx(0.9 * 0.99)


def test_throughput_is_the_geometric_mean_over_loads_then_rounds_with_an_interval():
    t = ks.throughput_vs(runs(), "gru-bpfmodel")
    loads = [0.9, 1.1, 1.0, 1.0]
    want = math.exp(sum(math.log(v) for v in loads) / 4)
    assert t["rounds"] == 3 and t["loads"] == ["cpu1", "hackbench", "io", "mixed"]
    # per round the factor (0.99, 1, 1.01) scales every load alike
    assert t["per_round"][0] == pytest.approx(want * 0.99)
    assert t["geometric_mean"] == pytest.approx(want * (0.99 * 1.01) ** (1 / 3))
    low, high = t["ci95"]
    assert low < t["geometric_mean"] < high
    assert ks.throughput_vs(runs(), "gru")["geometric_mean"] == pytest.approx(1.0)
    assert ks.throughput_vs(runs(), "bpfland") is None


def test_one_round_has_no_interval():
    one = [r for r in runs() if r["round"] == 1]
    t = ks.throughput_vs(one, "gru-bpfmodel")
    assert t["rounds"] == 1 and t["ci95"] is None


def test_the_script_merges_bench_comparison_and_the_earlier_half(tmp_path):
    bench = {"schema": "asa.in-kernel-model-summary", "version": 1, "cpus_in_traces": 4,
             "agreement_with_float": 0.999, "host_ns_per_decision_p50": 700}
    previous = {"schema": "asa.in-kernel-model-summary", "version": 1, "cpus_in_traces": 2,
                "agreement_with_float": 0.9999}
    paths = {}
    for name, doc in (("bench", bench), ("compare", {"seconds": 10, "runs": runs()}),
                      ("previous", previous)):
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(doc))
    out = tmp_path / "summary.json"
    cmd = [sys.executable, os.path.join(TRAIN, "in_kernel_summary.py"),
           "--bench", str(paths["bench"]), "--compare", str(paths["compare"]),
           "--previous", str(paths["previous"]), "--set", "no_user_round_trip=true",
           "--set", "machine=lab VM", "--out", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    s = json.loads(out.read_text())
    assert (s["schema"], s["version"], s["cpus_in_traces"]) == \
        ("asa.in-kernel-model-summary", 2, 4)
    assert s["host_2cpu"] == {"cpus_in_traces": 2, "agreement_with_float": 0.9999}
    assert s["no_user_round_trip"] is True and s["machine"] == "lab VM"
    assert s["throughput_vs_eevdf"] == pytest.approx(
        ks.throughput_vs(runs(), "gru-bpfmodel")["geometric_mean"])
    assert s["throughput_vs_eevdf_others"]["gru"]["geometric_mean"] == pytest.approx(1.0)
    # Run again on its own output: the earlier half stays as it was.
    paths["previous"].write_text(out.read_text())
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    assert json.loads(out.read_text())["host_2cpu"] == s["host_2cpu"]
