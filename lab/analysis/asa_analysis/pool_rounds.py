"""Pool asa-gru-compare rounds of one load row over several runs (runs.json files).

EEVDF's own rounds of the mixed load scatter by 10-20 % inside one run, so a per-round ratio
mostly measures EEVDF's scatter. Pooling every EEVDF round of the same lab set-up gives a
steadier baseline; each scheduler's pooled geometric mean is then compared with it.

Reads asa-gru-compare runs.json files (a {'runs': [...]} object or a bare list of runs; each run
has row, scheduler, and sysbench.events_per_s or hackbench_s). Prints, per --row, a Markdown
table with a line per scheduler: rounds, runs (files), geometric mean with its 95 % interval
(Student's t on the logs), range, and the ratio of geometric means to the baseline's pooled
one with its 95 % interval (Welch's t on the logs) and what that says about the target of at
least 0.97 x EEVDF (met: the whole interval at or above it; missed: all below; open: it
straddles it). Scheduler names are taken as they are: only pool runs whose code for a name is
the same.

Usage (from lab/analysis, or with PYTHONPATH=lab/analysis), e.g.:
    python -m asa_analysis.pool_rounds --row mixed-cpu --row mixed-io \\
        ../../results/2026-11-27-gru-mixed-load-mttcg*/runs.json
"""
import argparse
import math
import statistics
import sys
from pathlib import Path

from .common import read_json, runs_of

# Two-sided 97.5 % quantiles of Student's t for 1..30 degrees of freedom.
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
        2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
        2.060, 2.056, 2.052, 2.048, 2.045, 2.042]
TARGET = 0.97


def throughput(run):
    """events/s of a sysbench row, 1 / time of hackbench (as asa-gru-compare's ratios)."""
    sysbench = run.get("sysbench") or {}
    if sysbench.get("events_per_s"):
        return sysbench["events_per_s"]
    seconds = run.get("hackbench_s")
    return 1.0 / seconds if seconds else None


def geometric(values):
    """Geometric mean and its 95 % interval (Student's t on the logs)."""
    logs = [math.log(v) for v in values]
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(mean), None, None
    half = T975[min(len(logs) - 1, len(T975)) - 1] * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def ratio_interval(values, base):
    """95 % interval of the ratio of two geometric means (Welch's t on the logs; the degrees
    of freedom rounded down, so a little wider than scipy's ttest_ind(equal_var=False))."""
    a = [math.log(v) for v in values]
    b = [math.log(v) for v in base]
    if len(a) < 2 or len(b) < 2:
        return None, None
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    if va + vb == 0:
        return None, None
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    t = T975[min(max(int(df), 1), len(T975)) - 1]
    diff = statistics.fmean(a) - statistics.fmean(b)
    half = t * math.sqrt(va + vb)
    return math.exp(diff - half), math.exp(diff + half)


def verdict(low, high, target=TARGET):
    """met, missed or open for a ratio interval against the target; - without an interval."""
    if low is None:
        return "-"
    return "met" if low >= target else "missed" if high < target else "open"


def pool(files, rows):
    """{(row, scheduler): [(value, run name)]} of the given rows; files: [(run name, runs)]."""
    pooled = {}
    for name, runs in files:
        for run in runs:
            if run["row"] not in rows:
                continue
            value = throughput(run)
            if value:
                pooled.setdefault((run["row"], run["scheduler"]), []).append((value, name))
    return pooled


def row_table(row, pooled, baseline="eevdf"):
    """The lines of one row's table; None when the baseline has no rounds of it."""
    base = pooled.get((row, baseline))
    if not base:
        return None
    base_values = [v for v, _ in base]
    base_mean = geometric(base_values)[0]
    out = [f"\n{row} (baseline {baseline}: {base_mean:.1f})",
           "| scheduler | rounds | runs | geometric mean (95 % interval) | range "
           "| ÷ baseline (95 % interval) | ≥ 0.97 |",
           "|---|---|---|---|---|---|---|"]
    for (r, scheduler), rounds in sorted(pooled.items()):
        if r != row:
            continue
        values = [v for v, _ in rounds]
        mean, low, high = geometric(values)
        interval = f"{low:.1f}–{high:.1f}" if low else "-"
        runs = len({run for _, run in rounds})
        low, high = ratio_interval(values, base_values)
        ratio = f"{mean / base_mean:.2f}" + (f" ({low:.2f}–{high:.2f})" if low else "")
        out.append(f"| {scheduler} | {len(values)} | {runs} | {mean:.1f} ({interval}) | "
                   f"{min(values):.1f}–{max(values):.1f} | {ratio} | {verdict(low, high)} |")
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--row", action="append", required=True, help="load row, e.g. mixed-cpu")
    parser.add_argument("--baseline", default="eevdf")
    parser.add_argument("runs", nargs="+", type=Path, help="asa-gru-compare runs.json files")
    args = parser.parse_args(argv)
    pooled = pool([(path.parent.name, runs_of(read_json(path))) for path in args.runs], args.row)
    for row in args.row:
        lines = row_table(row, pooled, args.baseline)
        if lines is None:
            sys.exit(f"no {args.baseline} rounds of {row} in these runs")
        print("\n".join(lines))


if __name__ == "__main__":
    main()
