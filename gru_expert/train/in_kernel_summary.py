"""Writes results/<date>-in-kernel-model/summary.json (issue 42's acceptance file) from what
the measurements wrote, without copying a number by hand:

  --bench FILE      summary.json of `cargo bench -p asa-gru-expert --bench bpf_mlp -- --model
                    NAME --out DIR` (host timing, verifier, golden cases, and the agreements of
                    the model's NAME_report.json) for the model of the machine asked about
  --compare FILE    runs.json of `asa-gru-compare` (throughput per scheduler, round and load)
  --scheduler NAME  the in-BPF scheduler in --compare (default gru-bpfmodel); every other
                    scx_gru scheduler there is reported beside it
  --previous FILE   an earlier summary.json whose figures are kept under --previous-key
                    (e.g. the 2-CPU host half under `host_2cpu`); if FILE already has that key,
                    its value is kept as it is (the script can be run again on its own output)
  --set KEY=VALUE   more top-level keys (JSON values: numbers, true/false, strings)

throughput_vs_eevdf: per round, the geometric mean over the benchmark loads of scheduler ÷
EEVDF in that round (the mixed load counted once, as the geometric mean of its CPU and I/O
parts' ratios, as asa-gru-compare's "mixed (both parts)"); then the geometric mean over the
rounds with a 95 % interval (Student's t on the log ratios), and each load's geometric mean.

Usage:
  python in_kernel_summary.py --bench B.json --compare runs.json --previous summary.json \\
      --previous-key host_2cpu --out summary.json
"""
import argparse
import json
import math
import sys

# Two-sided 95 % quantiles of Student's t for 1..=30 degrees of freedom (as lab/src/bin/
# gru_compare/paired.rs).
T_975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042]
MIXED_PARTS = ("mixed-cpu", "mixed-io")


def throughput(run):
    """events/s for sysbench rows, 1 / time for hackbench (as asa-gru-compare)."""
    if run.get("sysbench"):
        return run["sysbench"]["events_per_s"]
    t = run.get("hackbench_s")
    return 1.0 / t if t and t > 0 else None


def geo(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def geometric_ci(ratios):
    """(geometric mean, low, high) of positive ratios; the interval needs two of them."""
    n = len(ratios)
    logs = [math.log(r) for r in ratios]
    mean = sum(logs) / n
    if n < 2:
        return math.exp(mean), None, None
    var = sum((v - mean) ** 2 for v in logs) / (n - 1)
    half = (T_975[n - 2] if n - 1 <= 30 else 1.960) * math.sqrt(var / n)
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def round_ratios(runs, scheduler, baseline="eevdf"):
    """{load: {round: scheduler ÷ baseline}}, the mixed load's parts joined (geometric mean)."""
    value = {}
    for r in runs:
        t = throughput(r)
        if t is not None and t > 0:
            value[(r["scheduler"], r["row"], r["round"])] = t
    rows = sorted({row for (_, row, _) in value})
    out = {}
    for row in rows:
        for rnd in sorted({k[2] for k in value if k[1] == row}):
            s, b = value.get((scheduler, row, rnd)), value.get((baseline, row, rnd))
            if s is not None and b is not None:
                out.setdefault(row, {})[rnd] = s / b
    if all(p in out for p in MIXED_PARTS):
        both = set(out[MIXED_PARTS[0]]) & set(out[MIXED_PARTS[1]])
        out["mixed"] = {rnd: geo([out[p][rnd] for p in MIXED_PARTS]) for rnd in sorted(both)}
    for p in MIXED_PARTS:
        out.pop(p, None)
    return out


def throughput_vs(runs, scheduler, baseline="eevdf"):
    """The geometric mean over loads and rounds of scheduler ÷ baseline, its interval over the
    rounds, and each load's geometric mean; None when the scheduler did not run."""
    per_load = round_ratios(runs, scheduler, baseline)
    if not per_load:
        return None
    rounds = sorted(set.intersection(*(set(v) for v in per_load.values())))
    per_round = [geo([per_load[load][rnd] for load in per_load]) for rnd in rounds]
    g, low, high = geometric_ci(per_round)
    return {
        "geometric_mean": g,
        "ci95": [low, high] if low is not None else None,
        "rounds": len(rounds),
        "loads": sorted(per_load),
        "per_round": per_round,
        "per_load": {load: geo(list(v.values())) for load, v in sorted(per_load.items())},
    }


def parse_set(text):
    key, _, value = text.partition("=")
    if not key or not _:
        raise argparse.ArgumentTypeError(f"--set wants KEY=VALUE, not {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def build(bench, compare, scheduler, previous, previous_key, extra):
    summary = {"schema": "asa.in-kernel-model-summary", "version": 2}
    summary.update({k: v for k, v in bench.items() if k not in ("schema", "version")})
    if compare is not None:
        runs = compare["runs"]
        mine = throughput_vs(runs, scheduler)
        if mine is None:
            raise ValueError(f"{scheduler} did not run in the comparison")
        summary["throughput_vs_eevdf"] = mine["geometric_mean"]
        summary["throughput_vs_eevdf_ci95"] = mine["ci95"]
        summary["throughput_vs_eevdf_per_load"] = mine["per_load"]
        summary["throughput_rounds"] = mine["rounds"]
        summary["throughput_seconds_per_load"] = compare.get("seconds")
        others = {}
        for name in sorted({r["scheduler"] for r in runs} - {"eevdf", scheduler}):
            o = throughput_vs(runs, name)
            if o is not None:
                others[name] = {k: o[k] for k in ("geometric_mean", "ci95", "per_load")}
        summary["throughput_vs_eevdf_others"] = others
    summary.update(extra)
    if previous is not None:
        kept = previous.get(previous_key, previous)
        summary[previous_key] = {k: v for k, v in kept.items() if k not in ("schema", "version")}
    return summary


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", required=True)
    ap.add_argument("--compare")
    ap.add_argument("--scheduler", default="gru-bpfmodel")
    ap.add_argument("--previous")
    ap.add_argument("--previous-key", default="host_2cpu")
    ap.add_argument("--set", action="append", default=[], type=parse_set)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)

    def load(path):
        with open(path) as f:
            return json.load(f)

    try:
        summary = build(load(args.bench), load(args.compare) if args.compare else None,
                        args.scheduler, load(args.previous) if args.previous else None,
                        args.previous_key, dict(args.set))
    except ValueError as e:
        sys.exit(str(e))
    with open(args.out, "w") as f:
        json.dump(summary, f, indent=2, sort_keys=True)
        f.write("\n")
    if "throughput_vs_eevdf" in summary:
        print(f"throughput_vs_eevdf {summary['throughput_vs_eevdf']:.4f} "
              f"{summary['throughput_vs_eevdf_ci95']}")


if __name__ == "__main__":
    main()
