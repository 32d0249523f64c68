"""How much a mapping table could gain over the best single expert, by what its classes key on.

Reads a scenario report (`report.json` of `asa scenario report`: every run's score per
scenario and expert) and asks, for the single-phase scenarios: if the agent recognised every
scenario perfectly and switched for free, what fraction of the static oracle (the best expert of
each scenario, chosen after the fact) would it reach with a table keyed on

- nothing (one expert everywhere: the best mean over the scenarios),
- the foreground probe, the background load (the classifier's classes), or both?

Each table maps a class to the expert with the best mean score over that class's scenarios.
"in sample" builds the table from every scenario and scores it on the same ones: what a table
that has seen the answer reaches. "leave one out" builds it without the scenario it is scored
on (a class left empty falls back to the best single expert): what it earns on a scenario it
was not calibrated on, which is what a user's machine sees. A key whose leave-one-out ratio is
no better than the single expert's gives the agent nothing to switch for.

With two or more repetitions per cell it also prints the oracle's winner's curse: the best of
several noisy means is biased upward, so it compares the hindsight oracle with a held-out one
(the expert chosen on the other repetitions, scored on this one); and the most runs any choice
of static expert could win over the baseline: a win-rate target above that is out of reach
with these experts, whatever the agent does.

Usage: python -m asa_analysis.routing_ceiling REPORT_JSON [--baseline eevdf] [--experts a,b] [--json]
"""
import argparse
import json
import sys
from collections import defaultdict

from .common import read_json, scenario_loads

KEYS = {
    'one expert': lambda s: '',
    'probe': lambda s: s['probe'],
    'load': lambda s: s['load'],
    'probe+load': lambda s: '%s+%s' % (s['probe'], s['load']),
}


def cells_of(report, experts=None):
    """Every scenario of a report: [{name, probe, loads, runs: {expert: [scores]}}], the runs of
    `experts` only (default: every expert but the agent's columns, `asa…`). A scenario's loads
    are named by its `value:load:<name>` score parts; a run without a score is left out."""
    out = []
    for s in report['scenarios']:
        runs = defaultdict(list)
        for r in s['runs']:
            wanted = r['expert'] in experts if experts else not r['expert'].startswith('asa')
            if wanted and r.get('score') is not None:
                runs[r['expert']].append(r['score'])
        if runs:
            out.append({'name': s['scenario'], 'probe': s['probe'], 'loads': scenario_loads(s), 'runs': dict(runs)})
    return out


def single_phase(cells):
    """The scenarios with one background load (phased ones left out), each with its `load`."""
    return [dict(c, load=c['loads'][0]) for c in cells if len(c['loads']) == 1]


def mean(xs):
    return sum(xs) / len(xs)


def means(scenario):
    return {e: mean(v) for e, v in scenario['runs'].items()}


def common_experts(scenarios):
    """The experts every scenario has a score for, sorted."""
    sets = [set(s['runs']) for s in scenarios]
    return sorted(set.intersection(*sets)) if sets else []


def build_table(scenarios, key, experts):
    """{class: expert with the best mean of scenario means over the class}, and the best
    single expert over all the scenarios (the fallback for a class the table lacks)."""
    by_class = defaultdict(list)
    for s in scenarios:
        by_class[key(s)].append(means(s))

    def best(rows):
        return max(experts, key=lambda e: (mean([m[e] for m in rows]), e))

    table = {c: best(rows) for c, rows in by_class.items()}
    return table, best([means(s) for s in scenarios])


def score(scenario, table, fallback, key):
    """The chosen expert and its mean score on the scenario."""
    expert = table.get(key(scenario), fallback)
    return expert, means(scenario)[expert]


def ceiling(scenarios, key, experts, baseline):
    """In-sample and leave-one-out: mean ratio to the static oracle and wins over the baseline."""
    result = {}
    table, fallback = build_table(scenarios, key, experts)
    for mode in ('in sample', 'leave one out'):
        ratios, wins, chosen, fallbacks = [], 0, {}, 0
        for i, s in enumerate(scenarios):
            if mode == 'leave one out':
                rest = scenarios[:i] + scenarios[i + 1:]
                table, fallback = build_table(rest, key, experts)
            expert, value = score(s, table, fallback, key)
            fallbacks += key(s) not in table
            oracle = max(means(s)[e] for e in experts)
            ratios.append(value / oracle if oracle > 0 else 0.0)
            wins += baseline in s['runs'] and value > means(s)[baseline]
            chosen[s['name']] = expert
        result[mode] = {'oracle_ratio': mean(ratios), 'wins': wins, 'n': len(scenarios), 'chosen': chosen,
                        'fallbacks': fallbacks}
    return result


def winners_curse(scenarios, experts):
    """Over the scenarios with 2+ runs in every expert's cell (None without any), the means of:
    the hindsight oracle (the best expert's mean, chosen after the fact); the held-out oracle
    (per repetition r, the scenario's expert with the best mean over the other repetitions,
    scored on r: a perfect per-scenario router calibrated on other runs); the single expert
    chosen the same way over all those scenarios at once (one expert for the whole machine)."""
    cells = [s for s in scenarios if min(len(s['runs'][e]) for e in experts) >= 2]
    if not cells:
        return None
    reps = min(len(s['runs'][e]) for s in cells for e in experts)

    def others(s, e, r):
        return mean(s['runs'][e][:r] + s['runs'][e][r + 1:reps])

    hindsight = [max(mean(s['runs'][e][:reps]) for e in experts) for s in cells]
    held_out = [mean([s['runs'][max(experts, key=lambda e: (others(s, e, r), e))][r] for r in range(reps)])
                for s in cells]
    single, picks = [], []
    for r in range(reps):
        pick = max(experts, key=lambda e: (mean([others(s, e, r) for s in cells]), e))
        picks.append(pick)
        single.append(mean([s['runs'][pick][r] for s in cells]))
    return {'scenarios': len(cells), 'reps': reps, 'hindsight': mean(hindsight), 'held_out': mean(held_out),
            'single_expert': mean(single), 'single_expert_picks': picks}


def win_ceiling(scenarios, experts, baseline):
    """How many runs (scenario x repetition r) could beat `baseline`'s run r at best, over the
    scenarios with 2+ runs in every cell of `experts` and the baseline (None without any):
    choosing each run's best expert after the fact (no agent can: it would have to know the
    noise of the run it is in), each scenario's best mean (the hindsight oracle), or each
    scenario's best on the other repetitions (the held-out oracle). An agent's win rate over
    the baseline cannot beat the first; a target above it is out of reach with these experts."""
    rivals = [e for e in experts if e != baseline]
    everyone = rivals + [baseline]
    cells = [s for s in scenarios if all(len(s['runs'].get(e, [])) >= 2 for e in everyone)]
    if not cells or not rivals:
        return None
    counts = {'runs': 0, 'per run': 0, 'hindsight': 0, 'held out': 0}
    for s in cells:
        reps = min(len(s['runs'][e]) for e in everyone)
        runs = {e: s['runs'][e][:reps] for e in everyone}
        by_mean = max(rivals, key=lambda e: (mean(runs[e]), e))
        for r in range(reps):
            base = runs[baseline][r]
            held = max(rivals, key=lambda e: (mean(runs[e][:r] + runs[e][r + 1:]), e))
            counts['runs'] += 1
            counts['per run'] += max(runs[e][r] for e in rivals) > base
            counts['hindsight'] += runs[by_mean][r] > base
            counts['held out'] += runs[held][r] > base
    return dict(counts, scenarios=len(cells), baseline=baseline)


def analyse(report, baseline='eevdf', experts=None):
    """The routing ceilings of the single-phase scenarios and the winner's curse of all."""
    cells = cells_of(report, experts)
    scenarios = single_phase(cells)
    experts = common_experts(scenarios)
    return {
        'scenarios': len(scenarios),
        'experts': experts,
        'keys': {name: ceiling(scenarios, key, experts, baseline) for name, key in KEYS.items()}
        if len(scenarios) >= 2 else {},
        'winners_curse': winners_curse(cells, common_experts(cells)),
        'win_ceiling': win_ceiling(cells, common_experts(cells), baseline),
    }


def table_lines(result, baseline):
    """The ceilings as a markdown table."""
    lines = ['%d single-phase scenarios, experts %s' % (result['scenarios'], ', '.join(result['experts'])), '',
             '| table keyed on | in sample: / oracle | wins vs %s | leave one out: / oracle | wins vs %s | '
             'left out, class empty |' % (baseline, baseline),
             '|---|---:|---:|---:|---:|---:|']
    for name, r in result['keys'].items():
        a, b = r['in sample'], r['leave one out']
        lines.append('| %s | %.3f | %d/%d | %.3f | %d/%d | %d |' % (
            name, a['oracle_ratio'], a['wins'], a['n'], b['oracle_ratio'], b['wins'], b['n'], b['fallbacks']))
    return lines


def render(result, baseline):
    """The printed report: the ceilings' table, then the winner's curse."""
    if result['keys']:
        lines = table_lines(result, baseline)
    else:
        lines = ['%d single-phase scenario(s): too few for a table (2 or more)' % result['scenarios']]
    wc = result['winners_curse']
    lines.append('')
    if wc:
        lines += [
            'Winner\'s curse over %d scenarios (phased included), %d repetitions, mean score:' % (wc['scenarios'], wc['reps']),
            '',
            '| choice | mean score | / hindsight oracle |',
            '|---|---:|---:|',
            '| hindsight oracle: each scenario\'s best mean, after the fact | %.3f | 1.000 |' % wc['hindsight'],
            '| held-out oracle: each scenario\'s best on the other repetitions | %.3f | %.3f |' % (
                wc['held_out'], wc['held_out'] / wc['hindsight']),
            '| one expert for all, chosen on the other repetitions (%s) | %.3f | %.3f |' % (
                ', '.join(sorted(set(wc['single_expert_picks']))), wc['single_expert'], wc['single_expert'] / wc['hindsight']),
        ]
    else:
        lines.append('winner\'s curse: n/a (needs 2+ repetitions per cell)')
    wins = result.get('win_ceiling')
    if wins:
        n = wins['runs']
        lines += [
            '',
            'Runs that beat %s\'s run of the same repetition, at best (%d scenarios, phased included):'
            % (wins['baseline'], wins['scenarios']),
            '',
            '| choice | runs won | share |',
            '|---|---:|---:|',
        ] + ['| %s | %d/%d | %.1f %% |' % (label, wins[key], n, 100.0 * wins[key] / n) for key, label in (
            ('per run', 'each run\'s best expert, after the fact (the ceiling)'),
            ('hindsight', 'each scenario\'s best mean (hindsight oracle)'),
            ('held out', 'each scenario\'s best on the other repetitions (held-out oracle)'),
        )]
    return '\n'.join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('report', help='report.json of `asa scenario report`')
    ap.add_argument('--baseline', default='eevdf', help='the expert wins are counted against (default eevdf)')
    ap.add_argument('--experts', help='comma-separated static experts to compare (default: every expert but asa…)')
    ap.add_argument('--json', action='store_true', help='print the result as JSON')
    args = ap.parse_args(argv)
    result = analyse(read_json(args.report), args.baseline,
                     args.experts.split(',') if args.experts else None)
    if args.json:
        json.dump(result, sys.stdout, indent=1)
        print()
    else:
        print(render(result, args.baseline))
    return 0


if __name__ == '__main__':
    sys.exit(main())
