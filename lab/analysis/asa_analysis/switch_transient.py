#!/usr/bin/env python3
"""What the agent's switches cost inside a live calibration run, and what the
expert it chose was worth once the switch was over.

A live run (`asa calibrate --stage live`) scores `asa run` on the whole probe,
switch included, against static experts that were attached before the probe
began. Probe scores rest on tail latencies (p99), and a switch under TCG takes
1.5-8 s (BPF verification is emulated): a transient that alone can set a 40 s
run's p99. This splits every `asa run` probe at the end of the agent's last
switch (from its decision log) and prints, per scenario and raw latency series,
the p99 of each static expert's whole run next to the agent's whole run, its
samples before the switch ended (the time under the previous scheduler, the
load phase of the new one) and after it (the chosen expert's steady state).

  mapping/lab/switch_transient.py CALIBRATION_DIR [--margin-s 1.0] [--json OUT]

Stdlib only. Sample times: a game frame's series is placed by its cumulative
frame time; other series are taken as spread evenly over the probe (periodic
probes) -- an approximation the output says it uses.
"""
import argparse
import glob
import json
import os
import re
import sys

SWITCH = re.compile(r"(\S+) -> (\S+) in (\d+) ms")


def quantile(values, q):
    """Nearest-rank quantile (the scenario runner's convention), None when empty."""
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, max(0, int(round(q * len(v) + 0.5)) - 1))]


def agent_switches(agent_dir, start_ms, end_ms):
    """(switch end unix ms, from, to) of every completed switch logged in
    [start_ms, end_ms] by any decision log in agent_dir."""
    out = []
    for path in sorted(glob.glob(os.path.join(agent_dir, "agent-*.jsonl"))):
        with open(path) as f:
            for line in f:
                try:
                    d = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if d.get("outcome") != "switched" or not d.get("detail"):
                    continue
                m = SWITCH.search(d["detail"])
                at = d.get("unix_ms")
                if not m or at is None or not start_ms <= at <= end_ms:
                    continue
                out.append((at + int(m.group(3)), m.group(1), m.group(2)))
    return sorted(out)


def sample_times(name, values, elapsed_s):
    """Seconds since the probe start of every sample of one series."""
    if name == "frame_time_ms":
        t, out = 0.0, []
        for v in values:
            t += v / 1000.0
            out.append(t)
        return out
    n = len(values)
    return [(i + 0.5) * elapsed_s / n for i in range(n)] if n else []


def analyse(cal_dir, margin_s):
    with open(os.path.join(cal_dir, "results.json")) as f:
        results = json.load(f)
    agent_dir = os.path.join(cal_dir, "agent")
    rows = []
    for sc in results["scenarios"]:
        static = {}
        for run in sc["runs"]:
            if run["expert"] in ("asa", "asa-dry-run"):
                continue
            for name, values in run["probe"]["samples"].items():
                static.setdefault(name, {}).setdefault(run["expert"], []).append(quantile(values, 0.99))
        for run in sc["runs"]:
            if run["expert"] != "asa":
                continue
            p0, p1 = run["probe_started_unix_ms"], run["probe_ended_unix_ms"]
            switches = agent_switches(agent_dir, run["started_unix_ms"] - 5000, p1)
            elapsed = run["probe"].get("elapsed_s") or (p1 - p0) / 1000.0
            split_s = None
            if switches:
                split_s = (switches[-1][0] - p0) / 1000.0 + margin_s
            for name, values in run["probe"]["samples"].items():
                times = sample_times(name, values, elapsed)
                before = [v for v, t in zip(values, times) if split_s is None or t < split_s]
                after = [v for v, t in zip(values, times) if split_s is not None and t >= split_s]
                rows.append({
                    "scenario": sc["scenario"], "rep": run["rep"], "series": name,
                    "switches": [f"{a}->{b}" for _, a, b in switches],
                    "switch_done_s": None if split_s is None else round(split_s - margin_s, 2),
                    "static_p99": {e: round(sum(v) / len(v), 2) for e, v in static.get(name, {}).items()},
                    "asa_p99": quantile(values, 0.99),
                    "asa_before_p99": quantile(before, 0.99), "before_n": len(before),
                    "asa_after_p99": quantile(after, 0.99), "after_n": len(after),
                })
    return rows


def fmt(v):
    return "-" if v is None else f"{v:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", help="a live calibration folder (results.json, agent/)")
    ap.add_argument("--margin-s", type=float, default=1.0,
                    help="seconds after the switch ended still counted as its transient")
    ap.add_argument("--json", help="also write the rows as JSON here")
    args = ap.parse_args()
    if not os.path.exists(os.path.join(args.dir, "results.json")):
        sys.exit(f"{args.dir}: no results.json (not a calibration folder?)")
    rows = analyse(args.dir, args.margin_s)
    print("p99 (ms) of each raw probe series; static experts: whole run (mean over repetitions); "
          f"asa: whole run, before / after its last switch ended (+{args.margin_s} s). Times of "
          "non-frame samples are spread evenly over the probe (approximation).\n")
    print("| scenario | rep | series | static experts | asa whole | asa before (n) | asa after (n) "
          "| switches (last done at s) |")
    print("|---|---:|---|---|---:|---:|---:|---|")
    for r in rows:
        st = ", ".join(f"{e} {v:.1f}" for e, v in sorted(r["static_p99"].items(), key=lambda kv: kv[1]))
        print(f"| {r['scenario']} | {r['rep']} | {r['series']} | {st} | {fmt(r['asa_p99'])} | "
              f"{fmt(r['asa_before_p99'])} ({r['before_n']}) | {fmt(r['asa_after_p99'])} ({r['after_n']}) | "
              f"{' '.join(r['switches']) or 'none'} ({fmt(r['switch_done_s'])}) |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
