"""Do a periodic probe's late periods line up with the agent's ticks? (issue 40)

A live run scores `asa run` against static experts on the same probe. Where the agent runs the
same expert as a static arm and still loses, what is left is its presence; if that presence is
its ticks, the probe's late periods crowd around them. The agent ticks on a fixed grid (its
clock's zero plus k × the tick interval); each grid point is either a full tick (logged in its
decision log) or, while the vote is steady, a glance (not logged: the seconds between logged
ticks). This places every period of a periodic probe (the audio probe: one wake-up and one
computation a period) on that grid and counts the late ones (wake + compute over the deadline)
within ±W ms of a grid point, apart for full-tick and glance points, against what an even
spread would put there. Static runs are placed on a grid of the same interval from their probe
start, as a reference of no phase lock.

Reads a live calibration folder (results.json and agent/agent-*.jsonl) or its raw.tar.xz.
Samples are taken as spread evenly over the probe (a periodic probe's periods are).

    python -m asa_analysis.tick_phase LIVE_DIR|raw.tar.xz [--scenario S25]
        [--series wake_latency_ms,compute_latency_ms] [--deadline-ms 5] [--window-ms 50]
        [--json out.json]
"""
import argparse
import glob
import json
import os
import sys
import tarfile

from .common import print_and_dump, read_json, read_text


def decision_records(text):
    """The JSON objects of a decision log's lines (other lines skipped)."""
    out = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and 'unix_ms' in record and 'at_s' in record:
            out.append(record)
    return out


def read_live(path):
    """(results.json's data, {log stamp ms: decision records}) of a folder or a raw.tar.xz."""
    logs = {}
    if os.path.isdir(path):
        results = read_json(os.path.join(path, 'results.json'))
        for log in glob.glob(os.path.join(path, 'agent', 'agent-*.jsonl')):
            logs[stamp_of(log)] = decision_records(read_text(log))
        return results, logs
    results = None
    with tarfile.open(path, 'r:*') as tar:
        for member in tar.getmembers():
            name = member.name.rsplit('/', 1)[-1]
            if not member.isfile():
                continue
            if name == 'results.json' and results is None:
                results = json.load(tar.extractfile(member))
            elif name.startswith('agent-') and name.endswith('.jsonl'):
                text = tar.extractfile(member).read().decode('utf-8', errors='replace')
                logs[stamp_of(name)] = decision_records(text)
    if results is None:
        sys.exit(f'{path}: no results.json')
    return results, logs


def stamp_of(path):
    """The unix ms in a decision log's name (agent-1796076348290.jsonl)."""
    return int(os.path.basename(path)[len('agent-'):].split('.')[0])


def log_of_run(logs, run):
    """The decision records of the agent that served a run: the last log started before the
    run's probe began (the live stage starts one agent per run), or []."""
    stamps = [s for s in logs if s <= run['probe_started_unix_ms']]
    return logs[max(stamps)] if stamps else []


def tick_grid(records):
    """(zero unix ms, interval ms, {grid index of each full tick}) of an agent's decision log:
    the agent's clock zero (unix_ms − at_s, median), the median step between consecutive ticks' at_s
    (a tick and the next full one after glances are further apart),
    and the full ticks' indices on that grid."""
    zero = sorted(r['unix_ms'] - r['at_s'] * 1000.0 for r in records)[len(records) // 2]
    steps = sorted(round((b['at_s'] - a['at_s']) * 1000.0) for a, b in zip(records, records[1:]))
    steps = [s for s in steps if s > 0]
    interval = steps[len(steps) // 2] if steps else 1000
    full = {round(r['at_s'] * 1000.0 / interval) for r in records}
    return zero, interval, full


def late_periods(probe, series, deadline_ms):
    """(period times in ms since the probe start, whether each was late) of a periodic probe:
    a period is late when its series (summed) exceed the deadline."""
    samples = probe['samples']
    if not all(name in samples for name in series):
        return [], []
    n = min(len(samples[name]) for name in series)
    elapsed_ms = probe.get('elapsed_s', 0) * 1000.0
    if n == 0 or elapsed_ms <= 0:
        return [], []
    times = [(i + 0.5) * elapsed_ms / n for i in range(n)]
    late = [sum(samples[name][i] for name in series) > deadline_ms for i in range(n)]
    return times, late


def phase_counts(times_unix, late, zero, interval, full, window_ms):
    """Late periods near full-tick and glance grid points and away from them, with how many
    periods fell in each part: {'full'|'glance'|'away': {'periods', 'late'}}."""
    out = {k: {'periods': 0, 'late': 0} for k in ('full', 'glance', 'away')}
    for t, is_late in zip(times_unix, late):
        k = round((t - zero) / interval)
        if abs(t - zero - k * interval) > window_ms:
            part = 'away'
        else:
            part = 'full' if k in full else 'glance'
        out[part]['periods'] += 1
        out[part]['late'] += is_late
    return out


def excess(counts):
    """Late periods near each kind of grid point beyond what the away rate predicts there."""
    away = counts['away']
    rate = away['late'] / away['periods'] if away['periods'] else 0.0
    return {k: round(counts[k]['late'] - rate * counts[k]['periods'], 1) for k in ('full', 'glance')}


def analyse(results, logs, scenarios, series, deadline_ms, window_ms):
    """A row per run of the scenarios with the series: scenario, expert, rep, periods, late,
    and for agent runs the counts near full ticks and glances and their excess; static runs
    are placed on a grid from their probe start with the agent's interval (1000 ms when no
    agent run has a log)."""
    rows = []
    for sc in results['scenarios']:
        if scenarios and sc['scenario'] not in scenarios:
            continue
        grids = {}
        for run in sc['runs']:
            records = log_of_run(logs, run) if run['expert'] == 'asa' else []
            if records:
                grids[run['rep']] = tick_grid(records)
        interval = next(iter(grids.values()))[1] if grids else 1000
        for run in sc['runs']:
            times, late = late_periods(run['probe'], series, deadline_ms)
            if not times:
                continue
            start = run['probe_started_unix_ms']
            if run['expert'] == 'asa' and run['rep'] in grids:
                zero, step, full = grids[run['rep']]
            else:
                zero, step, full = start, interval, set()
            counts = phase_counts([start + t for t in times], late, zero, step, full, window_ms)
            rows.append({'scenario': sc['scenario'], 'expert': run['expert'], 'rep': run['rep'],
                         'periods': len(times), 'late': sum(late), 'counts': counts,
                         'excess': excess(counts)})
    return rows


def render(rows, window_ms, deadline_ms):
    lines = [f'late = wake + compute over {deadline_ms:g} ms; near = within ±{window_ms:g} ms of a '
             'grid point (the agent\'s ticks; a static run\'s probe start + k × interval)', '',
             '| scenario | expert | rep | periods | late | near full ticks (late / periods) '
             '| near glances (late / periods) | away (late / periods) | excess near full | '
             'excess near glances |',
             '|---|---|---:|---:|---:|---|---|---|---:|---:|']
    for r in rows:
        c = r['counts']
        cell = {k: f'{c[k]["late"]} / {c[k]["periods"]}' for k in c}
        lines.append(f'| {r["scenario"]} | {r["expert"]} | {r["rep"]} | {r["periods"]} | '
                     f'{r["late"]} | {cell["full"]} | {cell["glance"]} | {cell["away"]} | '
                     f'{r["excess"]["full"]:+g} | {r["excess"]["glance"]:+g} |')
    return '\n'.join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('live', help='a live calibration folder or its raw.tar.xz')
    parser.add_argument('--scenario', action='append', default=[],
                        help='only this scenario (repeatable; default every one with the series)')
    parser.add_argument('--series', default='wake_latency_ms,compute_latency_ms',
                        help='the probe series a period is late by, summed (default the audio '
                             'probe\'s wake_latency_ms,compute_latency_ms)')
    parser.add_argument('--deadline-ms', type=float, default=5.0,
                        help='a period is late above this (default 5, the audio period)')
    parser.add_argument('--window-ms', type=float, default=50.0,
                        help='near a grid point: within this many ms of it (default 50)')
    parser.add_argument('--json', help='also write the rows here')
    args = parser.parse_args(argv)
    results, logs = read_live(args.live)
    rows = analyse(results, logs, set(args.scenario), args.series.split(','), args.deadline_ms,
                   args.window_ms)
    if not rows:
        sys.exit(f'{args.live}: no run with the series {args.series}')
    print_and_dump(render(rows, args.window_ms, args.deadline_ms), rows, args.json)


if __name__ == '__main__':
    main()
