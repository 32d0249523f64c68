"""What the agent's ticks cost, by part, from `asa run` decision logs.

Reads decision-log files (JSON lines of schema asa.decision, one per tick, as `asa run
--decision-log` and the live calibration write them: `agent/*.jsonl` of a live run) and
prints, per part, the median, the 99th percentile and the maximum in milliseconds over every
tick: the whole tick (perception + inference + decision), perception, inference, the
decision, and perception's parts where the log has them (each /proc system file, their parse,
the process scan and its source, the BPF counter read, the features), and over the ticks that
ended a steady stretch the glances before them and the CPU time of one glance. The first tick
of each file is left out (it pays the start-up: caches, ONNX Runtime's first run).

Usage: python -m asa_analysis.tick_cost LOG_OR_FOLDER... [--json]
       (a folder stands for every *.jsonl file below it)
"""
import argparse
import json
import os
import sys

from .common import read_text

FILES = ['stat', 'meminfo', 'diskstats', 'net/dev', 'net/snmp', 'loadavg']


def log_files(paths):
    """The decision-log files named, folders expanded to their *.jsonl files (sorted)."""
    files = []
    for path in paths:
        if os.path.isdir(path):
            for root, _, names in os.walk(path):
                files += [os.path.join(root, n) for n in names if n.endswith('.jsonl')]
        else:
            files.append(path)
    return sorted(files)


def tick_parts(record):
    """One tick's cost by part, in ms: {part name: value}."""
    cost = record.get('cost') or {}
    parts = {
        'tick': sum(cost.get(k, 0.0) for k in ('sample_us', 'infer_us', 'decide_us')) / 1e3,
        'perception': cost.get('sample_us', 0.0) / 1e3,
        'inference': cost.get('infer_us', 0.0) / 1e3,
        'decision': cost.get('decide_us', 0.0) / 1e3,
    }
    if 'cpu_us' in cost:
        parts['tick CPU time'] = cost['cpu_us'] / 1e3
    if cost.get('glances', 0) > 0:
        # A steady stretch ended with this tick: its glances, and the CPU time of one.
        parts['glances before the tick'] = float(cost['glances'])
        parts['glance CPU time'] = cost.get('glance_cpu_us', 0.0) / cost['glances'] / 1e3
    perception = cost.get('perception')
    if perception:
        procfs = perception.get('procfs', {})
        for name, us in zip(FILES, procfs.get('files_us', [])):
            parts['/proc/' + name] = us / 1e3
        parts['parse'] = procfs.get('parse_us', 0.0) / 1e3
        if procfs.get('processes', 0) > 0:
            source = 'task iterator' if procfs.get('task_iter') else '/proc/<pid>/stat'
            parts['process scan (%s)' % source] = procfs.get('scan_us', 0.0) / 1e3
            parts['processes scanned'] = float(procfs['processes'])
        parts['bpf read'] = perception.get('bpf_us', 0.0) / 1e3
        parts['features'] = perception.get('features_us', 0.0) / 1e3
    return parts


def collect(texts):
    """Every part's values over the ticks of the given decision-log texts (the first tick of
    each left out): {part: [values]} in first-seen order."""
    values = {}
    for text in texts:
        lines = [l for l in text.splitlines() if l.strip()]
        for line in lines[1:]:
            record = json.loads(line)
            if record.get('schema') != 'asa.decision':
                continue
            for part, value in tick_parts(record).items():
                values.setdefault(part, []).append(value)
    return values


def quantile(sorted_values, q):
    """The q-quantile by nearest rank (sorted input); NaN when empty."""
    if not sorted_values:
        return float('nan')
    return sorted_values[round((len(sorted_values) - 1) * q)]


def summary(values):
    """Per part: ticks, p50, p99, max."""
    rows = []
    for part, v in values.items():
        v = sorted(v)
        rows.append({'part': part, 'ticks': len(v), 'p50': quantile(v, 0.5),
                     'p99': quantile(v, 0.99), 'max': v[-1]})
    return rows


def render(rows):
    """The summary as a Markdown table (ms; the process count as a count)."""
    out = ['| part | ticks | p50 | p99 | max |', '|---|---:|---:|---:|---:|']
    for r in rows:
        counts = ('processes scanned', 'glances before the tick')
        fmt = '%.0f' if r['part'] in counts else '%.2f'
        out.append('| %s | %d | %s | %s | %s |' % (
            r['part'], r['ticks'], fmt % r['p50'], fmt % r['p99'], fmt % r['max']))
    return '\n'.join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('paths', nargs='+', help='decision-log files or folders of them')
    parser.add_argument('--json', action='store_true', help='print the rows as JSON')
    args = parser.parse_args(argv)
    files = log_files(args.paths)
    if not files:
        sys.exit('tick_cost: no decision-log (*.jsonl) files in %s' % ' '.join(args.paths))
    rows = summary(collect(read_text(f) for f in files))
    if not rows:
        sys.exit('tick_cost: no asa.decision ticks in %d files' % len(files))
    print(json.dumps(rows, indent=1) if args.json else render(rows))


if __name__ == '__main__':
    main()
