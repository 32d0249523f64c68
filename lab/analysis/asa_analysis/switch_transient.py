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
It also counts the agent's tail events in three windows -- before the last
switch was decided, from its decision to its end (+ margin), and after -- a tail
event being a sample above the best static expert's p99: at the static expert's
own rate about 1 % of its samples, so a window's rate per second says where the
agent's tail comes from.

Reads a live calibration folder: its results.json (per scenario, every run's
expert, repetition, start and probe times and raw probe samples) and the agent's
decision logs agent/agent-*.jsonl (a line per decision; a switch has outcome
"switched" and detail "FROM -> TO in N ms"), as kept in
results/2026-11-25-agent-live-vs-static/ (switch-transient.md is this output).
Prints a Markdown table; --json also writes its rows.

Sample times: a game frame's series is placed by its cumulative frame time;
other series are taken as spread evenly over the probe (periodic probes) -- an
approximation the output says it uses.

Usage (from lab/analysis, or with PYTHONPATH=lab/analysis):
    python -m asa_analysis.switch_transient CALIBRATION_DIR [--margin-s 1.0] [--json OUT]
"""
import argparse
import glob
import json
import os
import re
import sys

from .common import read_json, read_text

SWITCH = re.compile(r"(\S+) -> (\S+) in (\d+) ms")


def quantile(values, q):
    """Nearest-rank quantile (the scenario runner's convention), None when empty."""
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, max(0, int(round(q * len(v) + 0.5)) - 1))]


def decision_records(text):
    """The JSON objects of a decision log's lines (lines that are not JSON skipped)."""
    out = []
    for line in text.split("\n"):
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def read_decisions(agent_dir):
    """Every decision record of the agent-*.jsonl logs in agent_dir, file by file (sorted)."""
    out = []
    for path in sorted(glob.glob(os.path.join(agent_dir, "agent-*.jsonl"))):
        out += decision_records(read_text(path))
    return out


def agent_switches(decisions, start_ms, end_ms):
    """(switch end unix ms, from, to, decision unix ms) of every completed switch among the
    decision records logged in [start_ms, end_ms], sorted."""
    out = []
    for d in decisions:
        if not isinstance(d, dict) or d.get("outcome") != "switched" or not d.get("detail"):
            continue
        m = SWITCH.search(d["detail"])
        at = d.get("unix_ms")
        if not m or at is None or not start_ms <= at <= end_ms:
            continue
        out.append((at + int(m.group(3)), m.group(1), m.group(2), at))
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


def analyse(results, decisions, margin_s=1.0):
    """A row per asa run and probe series: its switches, when the last ended (s into the
    probe), the static experts' p99 (mean over repetitions), the agent's whole-run p99 and
    its p99 and sample counts before and after the split (last switch end + margin_s).
    results: a calibration's results.json data; decisions: the agent's decision records."""
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
            switches = agent_switches(decisions, run["started_unix_ms"] - 5000, p1)
            elapsed = run["probe"].get("elapsed_s") or (p1 - p0) / 1000.0
            split_s = decided_s = None
            if switches:
                split_s = (switches[-1][0] - p0) / 1000.0 + margin_s
                decided_s = min(max((switches[-1][3] - p0) / 1000.0, 0.0), split_s)
            for name, values in run["probe"]["samples"].items():
                times = sample_times(name, values, elapsed)
                before = [v for v, t in zip(values, times) if split_s is None or t < split_s]
                after = [v for v, t in zip(values, times) if split_s is not None and t >= split_s]
                best = min((sum(v) / len(v) for v in static.get(name, {}).values() if v),
                           default=None)
                rows.append({
                    "scenario": sc["scenario"], "rep": run["rep"], "series": name,
                    "switches": [f"{a}->{b}" for _, a, b, _ in switches],
                    "switch_done_s": None if split_s is None else round(split_s - margin_s, 2),
                    "static_p99": {e: round(sum(v) / len(v), 2) for e, v in static.get(name, {}).items()},
                    "asa_p99": quantile(values, 0.99),
                    "asa_before_p99": quantile(before, 0.99), "before_n": len(before),
                    "asa_after_p99": quantile(after, 0.99), "after_n": len(after),
                    "tail_events": tail_events(values, times, best, decided_s, split_s, elapsed),
                })
    return rows


def tail_events(values, times, threshold, decided_s, split_s, elapsed_s):
    """Samples above `threshold` and each window's length (s): before the last switch was
    decided, from then to its end + margin (`switch`), after; None without a threshold.
    Without a switch the whole probe is `before`."""
    if threshold is None:
        return None
    edges = [0.0, elapsed_s, elapsed_s, elapsed_s]
    if decided_s is not None:
        edges = [0.0, decided_s, min(split_s, elapsed_s), elapsed_s]
    out = {}
    for i, window in enumerate(("before", "switch", "after")):
        lo, hi = edges[i], edges[i + 1]
        last = i == 2
        n = sum(1 for v, t in zip(values, times)
                if v > threshold and lo <= t and (t < hi or (last and t >= hi)))
        out[window] = {"n": n, "s": round(max(hi - lo, 0.0), 2)}
    return out


def rate(window):
    """A window's tail events per second, as printed ("-" for an empty window)."""
    return "-" if window["s"] <= 0 else f"{window['n'] / window['s']:.2f}"


def fmt(v):
    return "-" if v is None else f"{v:.1f}"


def format_table(rows, margin_s):
    """The lines switch_transient prints: a note, a blank line, the Markdown table."""
    out = ["p99 (ms) of each raw probe series; static experts: whole run (mean over repetitions); "
           f"asa: whole run, before / after its last switch ended (+{margin_s} s). Times of "
           "non-frame samples are spread evenly over the probe (approximation).\n",
           "| scenario | rep | series | static experts | asa whole | asa before (n) | asa after (n) "
           "| switches (last done at s) | over best static p99 /s: before, switch, after |",
           "|---|---:|---|---|---:|---:|---:|---|---|"]
    for r in rows:
        st = ", ".join(f"{e} {v:.1f}" for e, v in sorted(r["static_p99"].items(), key=lambda kv: kv[1]))
        out.append(f"| {r['scenario']} | {r['rep']} | {r['series']} | {st} | {fmt(r['asa_p99'])} | "
                   f"{fmt(r['asa_before_p99'])} ({r['before_n']}) | {fmt(r['asa_after_p99'])} ({r['after_n']}) | "
                   f"{' '.join(r['switches']) or 'none'} ({fmt(r['switch_done_s'])}) | "
                   f"{events_cell(r['tail_events'])} |")
    return out


def events_cell(events):
    """"0.02, 3.10 (31 in 10.0 s), 0.01": the rates, the switch window's count and length."""
    if events is None:
        return "-"
    sw = events["switch"]
    middle = rate(sw) if sw["s"] <= 0 else f"{rate(sw)} ({sw['n']} in {sw['s']:.1f} s)"
    return f"{rate(events['before'])}, {middle}, {rate(events['after'])}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", help="a live calibration folder (results.json, agent/)")
    ap.add_argument("--margin-s", type=float, default=1.0,
                    help="seconds after the switch ended still counted as its transient")
    ap.add_argument("--json", help="also write the rows as JSON here")
    args = ap.parse_args(argv)
    results_path = os.path.join(args.dir, "results.json")
    if not os.path.exists(results_path):
        sys.exit(f"{args.dir}: no results.json (not a calibration folder?)")
    rows = analyse(read_json(results_path), read_decisions(os.path.join(args.dir, "agent")),
                   args.margin_s)
    print("\n".join(format_table(rows, args.margin_s)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
