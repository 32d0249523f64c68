"""How far an expert run again in a later lab run (an anchor) moved from its earlier scores.

Reads a scenario report (`report.json` of `asa scenario report`) built from results merged with
`asa_analysis.merge_results --anchors keep SUFFIX`, where each anchor appears twice: under its
own name (the earlier run) and renamed (the later one, e.g. cosmos@new). Per pair A=B it prints
each scenario's two scores and B - A, and over the scenarios both have: the mean difference
with its standard error (drift of the later boot as a whole), the mean and largest absolute
difference, how many exceed the noise floor (default 0.07, one 12 s run:
results/2026-11-23-mapping-stage1-ranking), and the mean difference per background load of the
single-phase scenarios. A variant's gain over its base expert that is not beyond these is not
beyond the noise of two boots.

Any two experts of one report make a pair: `cosmos=cosmos-busy75` gives a variant's gain over
its base, scenario by scenario and per load (what a load-keyed table could route on).

Usage: python -m asa_analysis.anchor_drift REPORT_JSON A=B [A=B ...] [--floor 0.07] [--json]
"""
import argparse
import json
import math
import sys

from .common import read_json, scenario_loads


def loads_of(report):
    """{scenario: [its background loads]}."""
    return {s['scenario']: scenario_loads(s) for s in report.get('scenarios', [])}


def pair_drift(report, old, new, floor=0.07):
    """The per-scenario scores of `old` and `new`, the summary of new - old and its mean per
    load of the single-phase scenarios."""
    rows = []
    loads = loads_of(report)
    for scenario, means in report['means'].items():
        if old in means and new in means and means[old] is not None and means[new] is not None:
            rows.append({'scenario': scenario, 'old': means[old], 'new': means[new], 'diff': means[new] - means[old],
                         'loads': loads.get(scenario, [])})
    diffs = [r['diff'] for r in rows]
    n = len(diffs)
    if n == 0:
        return {'old': old, 'new': new, 'n': 0, 'rows': []}
    mean = sum(diffs) / n
    se = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1) / n) if n > 1 else None
    by_load = {}
    for r in rows:
        if len(r['loads']) == 1:
            by_load.setdefault(r['loads'][0], []).append(r['diff'])
    return {
        'old': old, 'new': new, 'n': n, 'rows': rows,
        'mean_diff': mean, 'se': se,
        'mean_abs_diff': sum(abs(d) for d in diffs) / n,
        'max_abs_diff': max(abs(d) for d in diffs),
        'beyond_floor': sum(abs(d) > floor for d in diffs),
        'floor': floor,
        'by_load': {load: {'n': len(ds), 'mean_diff': sum(ds) / len(ds)} for load, ds in sorted(by_load.items())},
    }


def render(drifts):
    lines = []
    for d in drifts:
        lines.append('## %s vs %s' % (d['old'], d['new']))
        lines.append('')
        if not d['n']:
            lines.append('no scenario has both')
            lines.append('')
            continue
        lines += ['| scenario | %s | %s | difference |' % (d['old'], d['new']), '|---|---:|---:|---:|']
        lines += ['| %s | %.3f | %.3f | %+.3f |' % (r['scenario'], r['old'], r['new'], r['diff']) for r in d['rows']]
        lines.append('')
        se = ' ± %.3f' % d['se'] if d['se'] is not None else ''
        lines.append('%d scenarios: mean difference %+.3f%s, mean |difference| %.3f, largest %.3f, '
                     '%d beyond %.2f' % (d['n'], d['mean_diff'], se, d['mean_abs_diff'], d['max_abs_diff'],
                                         d['beyond_floor'], d['floor']))
        if d['by_load']:
            lines.append('')
            lines.append('mean difference per load (single-phase): ' + ', '.join(
                '%s %+.3f (%d)' % (load, v['mean_diff'], v['n']) for load, v in d['by_load'].items()))
        lines.append('')
    return '\n'.join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('report', help='report.json of the merged results')
    ap.add_argument('pairs', nargs='+', metavar='A=B', help='two experts of the report (an anchor under its two '
                    'names, or a base expert and its variant); differences are B - A')
    ap.add_argument('--floor', type=float, default=0.07, help='noise floor of one run (default 0.07)')
    ap.add_argument('--json', action='store_true', help='print the result as JSON')
    args = ap.parse_args(argv)
    pairs = []
    for p in args.pairs:
        if p.count('=') != 1:
            ap.error('%s: expected A=B' % p)
        pairs.append(p.split('='))
    report = read_json(args.report)
    drifts = [pair_drift(report, old, new, args.floor) for old, new in pairs]
    if args.json:
        json.dump(drifts, sys.stdout, indent=1)
        print()
    else:
        print(render(drifts))
    return 0


if __name__ == '__main__':
    sys.exit(main())
