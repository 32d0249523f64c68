"""The noise floor of the scenario score: how far apart repetitions of one (scenario, expert) cell
land, from an `asa scenario run` report.json (issue 40, step 0).

A cell is one scenario under one expert; its spread is the sample standard deviation of its
repetitions' scores. The noise floor is the median spread over the cells measured at least twice:
the rule mapping/src/live/verdict.rs uses, so a floor reported here is the one the verdicts apply.
Two cells then differ when their means are further apart than max(floor, 2 standard errors of the
difference). Repetitions do not lower that per-run floor; they lower the standard error of a
cell's mean (sd / sqrt(n)), whose median over the repeated cells is reported beside it.

    python -m asa_analysis.noise_floor report.json [report.json ...] [--json out.json]
"""
import argparse
import json
import math
import statistics
import sys


def cells(reports):
    """{(scenario, expert): [score, ...]} over every report's runs."""
    out = {}
    for report in reports:
        for scenario in report['scenarios']:
            for run in scenario['runs']:
                out.setdefault((scenario['scenario'], run['expert']), []).append(run['score'])
    return out


def spread(scores):
    """Sample standard deviation (0 for one score)."""
    return statistics.stdev(scores) if len(scores) >= 2 else 0.0


def threshold(a, b, floor):
    """The difference two cells must exceed to differ: max(floor, 2 SE of the difference); a cell
    run once borrows the floor as its spread (as calibrate::difference_threshold)."""
    def se2(scores):
        s = spread(scores) if len(scores) >= 2 else floor
        return s * s / len(scores)
    return max(floor, 2.0 * math.sqrt(se2(a) + se2(b)))


def analyse(reports):
    table = cells(reports)
    rows = []
    for (scenario, expert), scores in sorted(table.items()):
        sd = spread(scores)
        rows.append({'scenario': scenario, 'expert': expert, 'n': len(scores),
                     'mean': statistics.fmean(scores), 'sd': sd,
                     'se': sd / math.sqrt(len(scores)), 'scores': scores})
    repeated = [r['sd'] for r in rows if r['n'] >= 2]
    floor = statistics.median(repeated) if repeated else None
    of_means = statistics.median([r['se'] for r in rows if r['n'] >= 2]) if repeated else None
    pairs = []
    if floor is not None:
        scenarios = sorted({r['scenario'] for r in rows})
        for s in scenarios:
            here = [r for r in rows if r['scenario'] == s]
            for i, a in enumerate(here):
                for b in here[i + 1:]:
                    t = threshold(a['scores'], b['scores'], floor)
                    d = a['mean'] - b['mean']
                    pairs.append({'scenario': s, 'a': a['expert'], 'b': b['expert'],
                                  'difference': d, 'threshold': t,
                                  'verdict': 'a' if d > t else 'b' if d < -t else 'tie'})
    return {'cells': rows, 'noise_floor': floor, 'noise_floor_of_means': of_means,
            'cells_repeated': len(repeated),
            'spread_max': max(repeated) if repeated else None, 'pairs': pairs}


def text(result):
    lines = ['| scenario | expert | n | mean | sd | scores |', '|---|---|---:|---:|---:|---|']
    for r in result['cells']:
        lines.append(f"| {r['scenario']} | {r['expert']} | {r['n']} | {r['mean']:.3f} | "
                     f"{r['sd']:.3f} | {', '.join(f'{s:.3f}' for s in r['scores'])} |")
    floor = result['noise_floor']
    lines.append('')
    lines.append(f"noise floor (median sd of {result['cells_repeated']} repeated cells): "
                 + ('n/a' if floor is None else f"{floor:.4f}")
                 + ('' if result['spread_max'] is None else f", max sd {result['spread_max']:.4f}"))
    if result['noise_floor_of_means'] is not None:
        lines.append(f"standard error of a cell's mean (median): {result['noise_floor_of_means']:.4f}")
    for p in result['pairs']:
        lines.append(f"{p['scenario']}: {p['a']} - {p['b']} = {p['difference']:+.3f} "
                     f"(threshold {p['threshold']:.3f}): {p['verdict']}")
    return '\n'.join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('reports', nargs='+', help='report.json files of asa scenario run')
    ap.add_argument('--json', help='write the analysis here')
    args = ap.parse_args(argv)
    reports = []
    for path in args.reports:
        with open(path) as f:
            reports.append(json.load(f))
    result = analyse(reports)
    print(text(result))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
