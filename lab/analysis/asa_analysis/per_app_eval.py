"""The acceptance summary of issue 40's per-application evaluation (`summary.json`): does
`asa run` in per-application mode beat the best static expert, from the files a live evaluation
leaves behind.

Reads EVAL_DIR/live.json (the live stage's LiveSummary, mapping/src/live/summary.rs: per
scenario its cells — mean, spread, runs per expert, the agent `asa` included — its verdicts and
the noise floor they used), EVAL_DIR/results.json (every run, its phases' load throughput) and
EVAL_DIR/agent/agent-*.log (each `asa run`'s log); results.json and the logs are read from
EVAL_DIR/raw.tar.xz (in memory) when not unpacked beside live.json. The classifier's
`train_apps` report gives the held-out class accuracy.

What each key is (None/null when it cannot be measured, never a default):
- `scenarios`: scenarios with an agent cell and a baseline cell (the evaluation's scenarios;
  every other measure is over them); `repetitions_min`: the fewest runs of those cells.
- `noise_floor`: the floor live.json's verdicts used (its `noise.floor`).
- `best_static`: the single static expert (not `asa`, not `asa-dry-run`) with the best mean of
  its cell means over every evaluated scenario, among those measured in all of them (ties: the
  first in live.json's `experts`) — the rule of the table's `overall_best`, not a per-scenario
  oracle.
- `gain_vs_best_static`: mean over scenarios of (agent − best static) / best static (scenarios
  where the best static mean is not above 0 left out, as live.json's mean gain does). A mean of
  ratios: one scenario with a low base can carry it, so two measures beside it say how much:
  `gain_vs_best_static_median` (the median of the same ratios) and
  `gain_of_mean_scores` (the agent's mean score over those scenarios ÷ the best static
  expert's, − 1).
- `wins_vs_best_static`, `losses_vs_best_static`: scenarios where the agent's cell is above /
  below the best static cell beyond the noise: means further apart than max(floor, 2 standard
  errors of the difference), a cell run once borrowing the floor as its spread (verdict.rs
  `compare`, mapping/src/calibrate/ranking.rs `difference_threshold`, reimplemented here).
- `phased_above_best_static`: phased scenarios where the agent beats every static expert's
  cell beyond the noise; `phased_scenarios`: the phased scenarios evaluated.
- `background_throughput_ratio`: mean over scenarios of the background loads' throughput under
  the agent over that under the best static expert. A load is a non-idle phase of the runs
  (`phases[i].output.throughput`, in the load's own unit; a phased scenario has one per phase),
  its throughput the mean over a cell's valid runs that report one; a scenario's ratio is the
  mean of its per-load ratios, a load whose best static throughput is 0 or unread left out (a
  ratio to nothing is not measured); `background_throughput_scenarios`: scenarios with a ratio.
- `class_accuracy_heldout`, `class_accuracy_heldout_balanced`: the classifier report's
  `class_accuracy_heldout` `overall` and `balanced`.
- `class_settle_s_median`, `class_settle_s_count`: over the applications of every agent log
  (one log per agent run; an application is its (pgid, cgroup), a new one when its seconds
  since appearance go back), the seconds from its appearance to its stable class: the class
  of its first `class X (...), N s after it appeared` line, or, when the class changed later in
  that run, of the line from which it never changed. Lines that only change the class's source
  keep the class. An application whose first class was not recognised by that agent (`Pinned`
  by the user, or `Assumed` from a previous agent's hint) is not counted: its class did not
  come from observation since it appeared.
- `targets` (each key's acceptance bound, `min` or `max`) and `met` (key → bool; an unmeasured
  value meets nothing).

An EVAL_DIR without live.json whose subfolders have one is a round of an evaluation run in
parts (mapping/lab/per-app-eval.sh: one lab-VM boot per part, each with some of the scenarios):
it reads as one evaluation with every part's scenarios and the largest part's noise floor
([`merge_parts`]); a scenario's cells still come from the one boot that ran it.

Several EVAL_DIRs are several boots of the same evaluation ([`summarise_boots`]): runs
within a lab-VM boot agree far more closely than runs of different boots
(mapping/src/calibrate/boots.rs), so the agent is compared with the best static expert within
each boot, and a verdict across boots needs the mean of the per-boot differences beyond
max(the largest boot's noise floor, 2 standard errors of that mean from the within-boot noise,
2 standard errors from the spread of the per-boot differences). The keys above are then over
the boots (`noise_floor` the largest boot's floor), with `boots` and `per_boot` (each boot's
own summary) and `per_scenario` (each scenario's per-boot differences and verdict).

    python -m asa_analysis.per_app_eval EVAL_DIR [EVAL_DIR ...] --classifier-report REPORT.json
        [--json OUT]
"""
import argparse
import json
import math
import os
import re
import statistics
import sys
import tarfile

from .common import read_json, read_text

AGENT = 'asa'                   # mapping/src/live/mod.rs AGENT
AGENT_DRY_RUN = 'asa-dry-run'   # mapping/src/live/mod.rs AGENT_DRY_RUN
IDLE = 'idle'                   # scenarios/src/catalogue.rs IDLE: a phase without a load

SETTLE = re.compile(r'application pgid=(\d+) cgroup=(\d+) leader=(\d+): class (.+?) '
                    r'\((\w+), support ([\d.]+)\), ([\d.]+) s after it appeared')

# The acceptance targets of issue 40 (`wins_vs_best_static`'s bound, half the scenarios, is set
# per summary).
TARGETS = {
    'gain_vs_best_static': {'min': 0.10},
    'wins_vs_best_static': {'min': None},
    'losses_vs_best_static': {'max': 0},
    'phased_above_best_static': {'min': 3},
    'background_throughput_ratio': {'min': 0.95},
    'class_accuracy_heldout': {'min': 0.95},
    'class_settle_s_median': {'max': 5.0},
    'noise_floor': {'max': 0.03},
}


def is_agent(name):
    """Whether `name` is one of the agent's pseudo-experts (mapping/src/live/mod.rs)."""
    return name in (AGENT, AGENT_DRY_RUN)


# --- verdicts (mapping/src/live/verdict.rs, mapping/src/calibrate/ranking.rs) -------------------------

def cell(scores):
    """A cell from its runs' scores: {'mean', 'spread' (sample sd, 0 for one run), 'runs'}."""
    return {'mean': statistics.fmean(scores),
            'spread': statistics.stdev(scores) if len(scores) >= 2 else 0.0,
            'runs': len(scores)}


def noise_floor_of(cells):
    """The floor verdict.rs `noise_floor` would set: the median spread of the static cells run
    at least twice (None without one, where Rust falls back to its default)."""
    spreads = [c['spread'] for c in cells if not is_agent(c.get('expert', '')) and c['runs'] >= 2]
    return statistics.median(spreads) if spreads else None


def difference_threshold(a, b, floor):
    """What the difference of two cells' means must exceed: max(floor, 2 standard errors of the
    difference), a cell measured once borrowing the floor as its spread."""
    def variance_of_mean(c):
        s = c['spread'] if c['runs'] >= 2 else floor
        return s * s / max(c['runs'], 1)
    return max(floor, 2.0 * math.sqrt(variance_of_mean(a) + variance_of_mean(b)))


def compare(a, b, floor):
    """'win', 'tie' or 'loss' of cell a against cell b beyond the noise (live.json's spelling)."""
    t = difference_threshold(a, b, floor)
    d = a['mean'] - b['mean']
    return 'win' if d > t else 'loss' if d < -t else 'tie'


# --- the score comparison (live.json) ----------------------------------------------------------

def evaluated(live):
    """The scenarios of live.json with an agent cell and a baseline cell."""
    base = live['baseline']
    return [s for s in live['scenarios']
            if AGENT in s.get('cells', {}) and base in s.get('cells', {})]


def best_static(live, scenarios):
    """The static expert with the best mean of its cell means over `scenarios`, among those
    with a cell in each (ties: the first in live.json's order); None without one."""
    if not scenarios:
        return None
    names = list(live.get('experts', []))
    names += sorted({e for s in scenarios for e in s['cells'] if e not in names})
    best = None
    for e in names:
        if is_agent(e) or not all(e in s['cells'] for s in scenarios):
            continue
        mean = statistics.fmean(s['cells'][e]['mean'] for s in scenarios)
        if best is None or mean > best[1]:
            best = (e, mean)
    return best[0] if best else None


def noise_floor(live):
    """The floor live.json's verdicts used, None when it holds none."""
    noise = live.get('noise')
    return noise['floor'] if noise else None


def gains(pairs, ratios=None):
    """The gain measures of (agent mean, best static mean) per scenario, pairs whose best static
    mean is not above 0 left out: {gain_vs_best_static, gain_vs_best_static_median,
    gain_of_mean_scores} (each None without a pair). `ratios`: the scenarios' relative gains
    when they are not the pairs' own (over several boots, each boot's ratio averaged)."""
    pairs = [(a, b) for a, b in pairs if b > 0]
    if ratios is None:
        ratios = [(a - b) / b for a, b in pairs]
    return {'gain_vs_best_static': statistics.fmean(ratios) if ratios else None,
            'gain_vs_best_static_median': statistics.median(ratios) if ratios else None,
            'gain_of_mean_scores': (sum(a for a, _ in pairs) / sum(b for _, b in pairs) - 1.0
                                    if pairs else None)}


def scores_vs_best(live, scenarios, best, floor):
    """gain, wins, losses against `best`, and the phased scenarios won against every static
    expert (None where the best expert or the floor is unknown)."""
    out = {'gain_vs_best_static': None, 'gain_vs_best_static_median': None,
           'gain_of_mean_scores': None, 'wins_vs_best_static': None,
           'losses_vs_best_static': None, 'phased_above_best_static': None}
    if best is not None:
        out.update(gains((s['cells'][AGENT]['mean'], s['cells'][best]['mean']) for s in scenarios))
    if best is not None and floor is not None:
        verdicts = [compare(s['cells'][AGENT], s['cells'][best], floor) for s in scenarios]
        out['wins_vs_best_static'] = verdicts.count('win')
        out['losses_vs_best_static'] = verdicts.count('loss')
    if floor is not None:
        out['phased_above_best_static'] = sum(
            1 for s in scenarios if s.get('phased') and beats_every_static(s, floor))
    return out


def beats_every_static(scenario, floor):
    """Whether the agent's cell wins beyond the noise against each static cell (and one exists)."""
    agent = scenario['cells'][AGENT]
    static = [c for e, c in scenario['cells'].items() if not is_agent(e)]
    return bool(static) and all(compare(agent, c, floor) == 'win' for c in static)


# --- background throughput (results.json) ------------------------------------------------------

def load_throughputs(results):
    """{scenario: {expert: {(phase index, load): [throughput per valid run]}}} over the
    non-idle phases whose load reported a throughput."""
    out = {}
    for s in results.get('scenarios', []):
        if s.get('error') is not None:
            continue
        by_expert = out.setdefault(s['scenario'], {})
        for r in s['runs']:
            if not r.get('valid', True):
                continue
            loads = by_expert.setdefault(r['expert'], {})
            for i, p in enumerate(r['phases']):
                value = (p.get('output') or {}).get('throughput')
                if p['load'] != IDLE and value is not None:
                    loads.setdefault((i, p['load']), []).append(value)
    return out


def scenario_throughput_ratio(agent_loads, static_loads):
    """Mean over the loads of (agent's mean throughput) / (static's), loads the static expert
    did not run or ran at 0 left out; None without such a load."""
    ratios = [statistics.fmean(agent_loads[k]) / statistics.fmean(v)
              for k, v in static_loads.items() if k in agent_loads and statistics.fmean(v) > 0]
    return statistics.fmean(ratios) if ratios else None


def throughput_ratio(results, scenarios, best):
    """(mean over scenarios of the per-scenario ratio, scenarios with one); (None, 0) when
    results.json or the best expert is missing."""
    if results is None or best is None:
        return None, 0
    table = load_throughputs(results)
    ratios = []
    for s in scenarios:
        by = table.get(s['scenario'], {})
        if AGENT in by and best in by:
            r = scenario_throughput_ratio(by[AGENT], by[best])
            if r is not None:
                ratios.append(r)
    return (statistics.fmean(ratios) if ratios else None), len(ratios)


# --- class settle times (agent logs) -----------------------------------------------------------

def class_lines(text):
    """[(pgid, cgroup, class, source, seconds since it appeared)] of a log's class lines, in
    order."""
    return [(int(m[1]), int(m[2]), m[4], m[5], float(m[7])) for m in SETTLE.finditer(text)]


def settle_times(text):
    """Each application's seconds from its appearance to its stable class in one agent log."""
    apps = {}   # (pgid, cgroup) -> list of appearances, each [(class, source, seconds), ...]
    for pgid, cgroup, cls, source, secs in class_lines(text):
        seen = apps.setdefault((pgid, cgroup), [])
        if not seen or secs < seen[-1][-1][2]:
            seen.append([])
        seen[-1].append((cls, source, secs))
    out = []
    for appearances in apps.values():
        for lines in appearances:
            if lines[0][1] != 'Recognised':
                continue
            i = len(lines) - 1
            while i > 0 and lines[i - 1][0] == lines[-1][0]:
                i -= 1
            out.append(lines[i][2])
    return out


def settle_summary(logs):
    """(median, count) of the settle times over every log; (None, None) without logs."""
    if not logs:
        return None, None
    times = [t for text in logs.values() for t in settle_times(text)]
    return (statistics.median(times) if times else None), len(times)


# --- the summary --------------------------------------------------------------------------------

def targets_met(summary):
    """{key: bound}, the wins bound half the scenarios, and {key: met}; None meets nothing."""
    targets = {k: dict(v) for k, v in TARGETS.items()}
    n = summary['scenarios']
    targets['wins_vs_best_static'] = {'min': n / 2 if n else None}
    met = {}
    for key, bound in targets.items():
        value = summary.get(key)
        ((side, limit),) = bound.items()
        met[key] = (value is not None and limit is not None
                    and (value >= limit if side == 'min' else value <= limit))
    return targets, met


def summarise(live, results, logs, classifier_report):
    """The acceptance summary (see the module doc). results: results.json's data or None;
    logs: {name: text} of the agent logs (empty or None when there are none)."""
    scenarios = evaluated(live)
    base = live['baseline']
    floor = noise_floor(live)
    best = best_static(live, scenarios)
    runs = [s['cells'][e]['runs'] for s in scenarios for e in (AGENT, base)]
    summary = {'scenarios': len(scenarios),
               'repetitions_min': min(runs) if runs else None,
               'noise_floor': floor,
               'best_static': best}
    summary.update(scores_vs_best(live, scenarios, best, floor))
    summary['phased_scenarios'] = sum(1 for s in scenarios if s.get('phased'))
    ratio, with_ratio = throughput_ratio(results, scenarios, best)
    summary['background_throughput_ratio'] = ratio
    summary['background_throughput_scenarios'] = with_ratio
    accuracy = (classifier_report or {}).get('class_accuracy_heldout') or {}
    summary['class_accuracy_heldout'] = accuracy.get('overall')
    summary['class_accuracy_heldout_balanced'] = accuracy.get('balanced')
    median, count = settle_summary(logs)
    summary['class_settle_s_median'] = median
    summary['class_settle_s_count'] = count
    summary['targets'], summary['met'] = targets_met(summary)
    return summary


# --- several boots ------------------------------------------------------------------------------

def across_boots(diffs, thresholds, floor):
    """The verdict of per-boot differences (agent − other, one per boot) whose within-boot
    thresholds (difference_threshold, ~2 standard errors each) are `thresholds`: 'win', 'tie'
    or 'loss', the mean difference and the threshold it was held to, max(floor, 2 standard
    errors of the mean from the within-boot noise, and with 2 boots or more 2 standard errors
    from the spread of the per-boot differences)."""
    n = len(diffs)
    mean = statistics.fmean(diffs)
    within = math.sqrt(sum(t * t for t in thresholds)) / n
    between = 2.0 * statistics.stdev(diffs) / math.sqrt(n) if n >= 2 else 0.0
    t = max(floor, within, between)
    return ('win' if mean > t else 'loss' if mean < -t else 'tie'), mean, t


def summarise_boots(boots, classifier_report):
    """The acceptance summary over several boots: `boots` is [(live, results, logs)], one per
    boot (see the module doc)."""
    per_boot = [summarise(live, results, logs, classifier_report)
                for live, results, logs in boots]
    names = [{s['scenario'] for s in evaluated(live)} for live, _, _ in boots]
    common = [s['scenario'] for s in evaluated(boots[0][0]) if all(s['scenario'] in n for n in names)]
    floors = [noise_floor(live) for live, _, _ in boots]
    floor = None if any(f is None for f in floors) else max(floors)
    # The best static expert over every boot and scenario (mean of its per-boot cell means).
    by_boot = [{s['scenario']: s for s in live['scenarios']} for live, _, _ in boots]
    statics = sorted({e for b in by_boot for sc in common for e in b[sc]['cells']
                      if not is_agent(e)})
    first = list(boots[0][0].get('experts', []))
    statics.sort(key=lambda e: first.index(e) if e in first else len(first))
    best, best_mean = None, None
    for e in statics:
        if not all(e in b[sc]['cells'] for b in by_boot for sc in common):
            continue
        mean = statistics.fmean(b[sc]['cells'][e]['mean'] for b in by_boot for sc in common)
        if best is None or mean > best_mean:
            best, best_mean = e, mean
    summary = {'scenarios': len(common), 'boots': len(boots),
               'repetitions_min': min((b[sc]['cells'][e]['runs'] for b in by_boot for sc in common
                                       for e in (AGENT, boots[0][0]['baseline'])
                                       if e in b[sc]['cells']), default=None),
               'noise_floor': floor, 'best_static': best}
    per_scenario = []
    means = []
    ratios = []
    verdicts = []
    phased_above = 0
    for sc in common:
        cells = [b[sc]['cells'] for b in by_boot]
        row = {'scenario': sc, 'phased': bool(by_boot[0][sc].get('phased'))}
        if best is not None:
            # A scenario's agent and best static means over the boots that measured it above 0.
            kept = [c for c in cells if c[best]['mean'] > 0]
            if kept:
                means.append((statistics.fmean(c[AGENT]['mean'] for c in kept),
                              statistics.fmean(c[best]['mean'] for c in kept)))
                ratios.append(statistics.fmean((c[AGENT]['mean'] - c[best]['mean'])
                                               / c[best]['mean'] for c in kept))
            diffs = [c[AGENT]['mean'] - c[best]['mean'] for c in cells]
            row['diffs'] = diffs
            if floor is not None:
                ts = [difference_threshold(c[AGENT], c[best], floor) for c in cells]
                verdict, mean, t = across_boots(diffs, ts, floor)
                row.update(verdict=verdict, mean_diff=mean, threshold=t)
                verdicts.append(verdict)
        if row['phased'] and floor is not None:
            others = [e for e in statics if all(e in c for c in cells)]
            if others and all(across_boots(
                    [c[AGENT]['mean'] - c[e]['mean'] for c in cells],
                    [difference_threshold(c[AGENT], c[e], floor) for c in cells],
                    floor)[0] == 'win' for e in others):
                phased_above += 1
        per_scenario.append(row)
    summary.update(gains(means, ratios))
    known = best is not None and floor is not None
    summary['wins_vs_best_static'] = verdicts.count('win') if known else None
    summary['losses_vs_best_static'] = verdicts.count('loss') if known else None
    summary['phased_above_best_static'] = phased_above if floor is not None else None
    summary['phased_scenarios'] = sum(1 for r in per_scenario if r['phased'])
    ratios = []
    for (live, results, _), b in zip(boots, by_boot):
        ratio, _ = throughput_ratio(results, [b[sc] for sc in common], best)
        if ratio is not None:
            ratios.append(ratio)
    summary['background_throughput_ratio'] = statistics.fmean(ratios) if ratios else None
    summary['background_throughput_boots'] = len(ratios)
    accuracy = (classifier_report or {}).get('class_accuracy_heldout') or {}
    summary['class_accuracy_heldout'] = accuracy.get('overall')
    summary['class_accuracy_heldout_balanced'] = accuracy.get('balanced')
    logs = {f'boot{i + 1}/{name}': text for i, (_, _, l) in enumerate(boots)
            for name, text in (l or {}).items()}
    median, count = settle_summary(logs)
    summary['class_settle_s_median'] = median
    summary['class_settle_s_count'] = count
    summary['targets'], summary['met'] = targets_met(summary)
    summary['per_scenario'] = per_scenario
    summary['per_boot'] = per_boot
    return summary


# --- reading an evaluation folder ---------------------------------------------------------------

def is_agent_log(path):
    """Whether an archive or folder path is an agent log (agent/agent-*.log)."""
    parts = path.split('/')
    return (len(parts) >= 2 and parts[-2] == 'agent' and parts[-1].startswith('agent-')
            and parts[-1].endswith('.log'))


def read_archive(path):
    """(results.json's data or None, {log name: text}) from a raw.tar.xz, in memory."""
    results, logs = None, {}
    with tarfile.open(path, 'r:*') as tar:
        for member in tar.getmembers():
            if not member.isfile():
                continue
            name = member.name[2:] if member.name.startswith('./') else member.name
            if name == 'results.json' or (results is None and name.endswith('/results.json')):
                results = json.load(tar.extractfile(member))
            elif is_agent_log(name):
                data = tar.extractfile(member).read()
                logs[name.rsplit('/', 1)[1]] = data.decode('utf-8', errors='replace')
    return results, logs


def merge_parts(parts):
    """One evaluation from the parts of a round ([(name, (live, results, logs))], each part a
    lab-VM boot that ran some of the scenarios): the parts' scenarios together, the largest
    part's noise floor (None if a part has none), results.json's scenarios together (None if a
    part has none), the logs as PART/NAME. A scenario in two parts is an error: its cells would
    mix boots."""
    first = parts[0][1][0]
    live = {'experts': list(first.get('experts', [])), 'baseline': first['baseline'],
            'scenarios': []}
    seen = {}
    floors = []
    results = {'scenarios': []}
    logs = {}
    for name, (part_live, part_results, part_logs) in parts:
        if part_live['baseline'] != live['baseline']:
            raise ValueError(f"{name}: baseline {part_live['baseline']}, "
                             f"not {live['baseline']} as in {parts[0][0]}")
        for s in part_live['scenarios']:
            if s['scenario'] in seen:
                raise ValueError(f"scenario {s['scenario']} is in {seen[s['scenario']]} and "
                                 f"{name}: a round runs each scenario in one part")
            seen[s['scenario']] = name
            live['scenarios'].append(s)
        live['experts'] += [e for e in part_live.get('experts', []) if e not in live['experts']]
        floors.append(noise_floor(part_live))
        if results is not None and part_results is not None:
            results['scenarios'] += part_results.get('scenarios', [])
        else:
            results = None
        logs.update({f'{name}/{n}': text for n, text in (part_logs or {}).items()})
    live['noise'] = (None if any(f is None for f in floors) else
                     {'floor': max(floors), 'source': 'the largest of the parts\' floors'})
    return live, results, logs


def read_eval_dir(eval_dir):
    """(live.json, results.json or None, {agent log name: text}) of an evaluation folder:
    results.json and agent/*.log beside live.json, else from raw.tar.xz. A folder without
    live.json whose subfolders have one is a round run in parts (mapping/lab/per-app-eval.sh):
    its parts, in name order, merged ([`merge_parts`])."""
    path = os.path.join(eval_dir, 'live.json')
    if not os.path.exists(path) and os.path.isdir(eval_dir):
        parts = sorted(d for d in os.listdir(eval_dir)
                       if os.path.exists(os.path.join(eval_dir, d, 'live.json')))
        if parts:
            return merge_parts([(d, read_eval_dir(os.path.join(eval_dir, d))) for d in parts])
    live = read_json(path)
    results_path = os.path.join(eval_dir, 'results.json')
    results = read_json(results_path) if os.path.exists(results_path) else None
    agent_dir = os.path.join(eval_dir, 'agent')
    logs = {}
    if os.path.isdir(agent_dir):
        logs = {n: read_text(os.path.join(agent_dir, n)) for n in sorted(os.listdir(agent_dir))
                if is_agent_log('agent/' + n)}
    archive = os.path.join(eval_dir, 'raw.tar.xz')
    if (results is None or not logs) and os.path.exists(archive):
        packed_results, packed_logs = read_archive(archive)
        results = results if results is not None else packed_results
        logs = logs or packed_logs
    return live, results, logs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('eval_dir', nargs='+',
                    help='a live evaluation folder (live.json; results.json and agent/*.log, '
                         'or raw.tar.xz), or a round of parts (subfolders with live.json); '
                         'several: one per boot or round')
    ap.add_argument('--classifier-report', required=True,
                    help="the application classifier's report.json (train_apps)")
    ap.add_argument('--json', help='also write the summary here')
    args = ap.parse_args(argv)
    report = read_json(args.classifier_report)
    if len(args.eval_dir) == 1:
        summary = summarise(*read_eval_dir(args.eval_dir[0]), report)
    else:
        summary = summarise_boots([read_eval_dir(d) for d in args.eval_dir], report)
    text = json.dumps(summary, indent=1)
    print(text)
    if args.json:
        with open(args.json, 'w') as f:
            f.write(text + '\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
