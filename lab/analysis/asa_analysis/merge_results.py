"""Merge two scenario results files (results.json of `asa scenario run`) into one.

`asa scenario report` reads one results file, and it scores each scenario's background
throughput against the median over the experts compared in that scenario: the runs of two lab
runs (a committed catalogue run and a later run of more experts) are compared by merging their
results and rebuilding the report from the merge, never by merging two reports.

The experts of NEW are added to BASE's. An expert both runs have (an anchor run again to see
the new run's noise) is, by default, taken from NEW only (`--anchors replace`: the variants
and their anchors then come from the same boot and work unit); `--anchors keep SUFFIX` keeps
BASE's runs and renames NEW's to `<expert><SUFFIX>` (e.g. cosmos@new), for
`asa_analysis.anchor_drift`. `--only-new-scenarios` keeps the scenarios NEW ran only, so that
every expert has every scenario (`routing_ceiling` compares the experts all scenarios share).

Both files must score the same scenario file (their `catalogue_toml`) and be of the same results
version (1, or 2: runs waited for a held scheduler before their load). The merge keeps BASE's
machine, options and work unit (only `options.experts` changes) and records both sources in
`merged_from`, which `asa scenario report` ignores.

Usage: python -m asa_analysis.merge_results BASE_JSON NEW_JSON -o MERGED_JSON
           [--anchors replace | --anchors keep SUFFIX] [--only-new-scenarios]
"""
import argparse
import copy
import json
import sys

from .common import read_json

SCHEMA = 'asa.scenario-results'
VERSIONS = (1, 2)  # scenarios/src/runner.rs OLDEST_RESULTS_VERSION..=RESULTS_VERSION


def check(results, what):
    if results.get('schema') != SCHEMA or results.get('version') not in VERSIONS:
        raise ValueError('%s: schema %r version %r, expected %r version %s' % (
            what, results.get('schema'), results.get('version'), SCHEMA,
            ' or '.join(map(str, VERSIONS))))


def _renamed(run_or_skip, names):
    out = dict(run_or_skip)
    out['expert'] = names.get(out['expert'], out['expert'])
    return out


def merge(base, new, anchors='replace', suffix='@new', only_new_scenarios=False):
    """The merged results (a new dict; the inputs are not changed).

    anchors: 'replace' (an expert of both runs comes from `new` only) or 'keep' (it stays from
    `base`, and `new`'s runs of it are renamed to expert + suffix)."""
    check(base, 'base')
    check(new, 'new')
    if base['version'] != new['version']:
        raise ValueError('base is results version %d, new version %d: runs measured under other '
                         'preconditions are not merged' % (base['version'], new['version']))
    if base['catalogue_toml'] != new['catalogue_toml']:
        raise ValueError('the two runs scored different scenario files (catalogue_toml differs)')
    if anchors not in ('replace', 'keep'):
        raise ValueError('anchors must be replace or keep, not %r' % anchors)
    base_experts = list(base['options']['experts'])
    new_experts = list(new['options']['experts'])
    shared = [e for e in new_experts if e in base_experts]
    names = {e: e + suffix for e in shared} if anchors == 'keep' else {}
    clash = [n for n in names.values() if n in base_experts or n in new_experts]
    if clash:
        raise ValueError('renamed anchors %s are experts of a run already' % ', '.join(clash))
    dropped = set(shared) if anchors == 'replace' else set()
    merged = copy.deepcopy(base)
    merged['options']['experts'] = base_experts + [names.get(e, e) for e in new_experts if e not in base_experts
                                                   or e in names]
    merged['merged_from'] = [
        {'role': role, 'created_unix_ms': r.get('created_unix_ms'), 'experts': r['options']['experts'],
         'work_unit': r['options'].get('work_unit'), 'scenarios': [s['scenario'] for s in r['scenarios']]}
        for role, r in (('base', base), ('new', new))]
    new_by_name = {s['scenario']: s for s in new['scenarios']}
    scenarios = []
    for s in merged['scenarios']:
        n = new_by_name.pop(s['scenario'], None)
        if n is None:
            if not only_new_scenarios:
                scenarios.append(s)
            continue
        if (n['title'], n['probe']) != (s['title'], s['probe']):
            raise ValueError('scenario %s: title or probe differ between the runs' % s['scenario'])
        s['runs'] = [r for r in s['runs'] if r['expert'] not in dropped] + [_renamed(r, names) for r in n['runs']]
        s['skipped'] = [k for k in s.get('skipped', []) if k['expert'] not in dropped] + [
            _renamed(k, names) for k in n.get('skipped', [])]
        errors = [e for e in (s.get('error'), n.get('error')) if e]
        s['error'] = '; '.join(errors) if errors else None
        scenarios.append(s)
    for n in new['scenarios']:
        if n['scenario'] in new_by_name:
            s = copy.deepcopy(n)
            s['runs'] = [_renamed(r, names) for r in s['runs']]
            s['skipped'] = [_renamed(k, names) for k in s.get('skipped', [])]
            scenarios.append(s)
    merged['scenarios'] = scenarios
    return merged


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('base', help='results.json of the earlier run')
    ap.add_argument('new', help='results.json of the run whose experts are added')
    ap.add_argument('-o', '--out', required=True, help='where to write the merged results.json')
    ap.add_argument('--anchors', nargs='+', default=['replace'], metavar='MODE',
                    help='replace (default: experts of both runs from NEW) or keep SUFFIX '
                         '(BASE\'s kept, NEW\'s renamed to expert+SUFFIX)')
    ap.add_argument('--only-new-scenarios', action='store_true',
                    help='keep only the scenarios NEW ran')
    args = ap.parse_args(argv)
    mode = args.anchors[0]
    if mode == 'replace' and len(args.anchors) == 1:
        suffix = '@new'
    elif mode == 'keep' and len(args.anchors) == 2:
        suffix = args.anchors[1]
    else:
        ap.error('--anchors takes `replace` or `keep SUFFIX`')
    merged = merge(read_json(args.base), read_json(args.new), mode, suffix, args.only_new_scenarios)
    with open(args.out, 'w') as f:
        json.dump(merged, f, indent=1)
        f.write('\n')
    runs = sum(len(s['runs']) for s in merged['scenarios'])
    print('%s: %d scenarios, %d runs, experts %s' % (
        args.out, len(merged['scenarios']), runs, ', '.join(merged['options']['experts'])))
    return 0


if __name__ == '__main__':
    sys.exit(main())
