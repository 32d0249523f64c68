"""Median switch times per ordered pair, attach gate against hot standby, from the per-round
JSON files `lab/bench-switch-standby.sh` writes (gate-r<N>.json, standby-r<N>.json), and each
standby expert's load time and resident set when parked.

Usage: python -m asa_analysis.standby_switch_times FOLDER > table.md
       (e.g. results/2026-11-27-standby-switch-times/run2)
"""
import argparse
import glob
import json
import os
import statistics
import sys


def load(pattern):
    switches, parked = [], []
    for path in sorted(glob.glob(pattern)):
        with open(path) as f:
            bench = json.load(f)
        switches += bench["switches"]
        parked += bench.get("parked", [])
    return switches, parked


def by_pair(switches):
    out = {}
    for s in switches:
        out.setdefault((s["from"], s["to"]), []).append(s)
    return out


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v, scale=1.0, digits=0):
    return "–" if v is None else f"{v / scale:.{digits}f}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('folder', help='a bench folder with gate-r*.json and standby-r*.json')
    d = parser.parse_args(argv).folder
    gate, _ = load(os.path.join(d, "gate-r*.json"))
    standby, parked = load(os.path.join(d, "standby-r*.json"))
    g, s = by_pair(gate), by_pair(standby)
    order = []
    for sw in gate + standby:
        if (sw["from"], sw["to"]) not in order:
            order.append((sw["from"], sw["to"]))
    print("| from → to | gate: request → enabled (s) | standby: request → enabled (s) "
          "| gate: EEVDF gap (ms) | standby: EEVDF gap (ms) | standby: stop old (ms) "
          "| standby: release → enabled (ms) | n gate / standby |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for pair in order:
        gs, ss = g.get(pair, []), s.get(pair, [])
        print(f"| {pair[0]} → {pair[1]} "
              f"| {fmt(med([x['total_ms'] for x in gs]), 1000, 2)} "
              f"| {fmt(med([x['total_ms'] for x in ss]), 1000, 2)} "
              f"| {fmt(med([x['eevdf_gap_ms'] for x in gs]))} "
              f"| {fmt(med([x['eevdf_gap_ms'] for x in ss]))} "
              f"| {fmt(med([x['stop_ms'] for x in ss]))} "
              f"| {fmt(med([x['start_ms'] for x in ss]))} "
              f"| {len(gs)} / {len(ss)} |")
    print()
    print("| standby | load at nice 19 to parked (s, median) | RSS parked (MiB, median, max) | n |")
    print("|---|---:|---:|---:|")
    experts = []
    for p in parked:
        if p["expert"] not in experts:
            experts.append(p["expert"])
    for e in experts:
        ps = [p for p in parked if p["expert"] == e]
        rss = [p["rss_kib"] / 1024 for p in ps if p.get("rss_kib")]
        print(f"| {e} | {med([p['load_ms'] for p in ps]) / 1000:.1f} "
              f"| {fmt(med(rss), 1, 1)}, {fmt(max(rss) if rss else None, 1, 1)} | {len(ps)} |")
    ns = [x for x in standby if x["to"] != "eevdf"]
    print()
    print(f"standby switches to a BPF expert: {len(ns)}, "
          f"all {sum(1 for x in ns if x.get('standby'))} through the parked standby; "
          f"request → enabled max {max(x['total_ms'] for x in ns) / 1000:.2f} s, "
          f"EEVDF gap max {fmt(max((x['eevdf_gap_ms'] or 0) for x in ns))} ms")


if __name__ == "__main__":
    main()
