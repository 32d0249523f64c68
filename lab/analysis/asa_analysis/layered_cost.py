"""What scx_layered costs beside cosmos, from a `layers/lab/cost-run.sh` folder (issue 40).

Three sources, each optional:
- the scenario runner's `report.json` of each pass (`hinted/`, `unhinted/`, `stats/`): per
  scenario and expert, the probe's median and p99 input latency and the score, mean over the
  repetitions;
- `bpf-stats.txt` (lines `UNIX_TIME COMM RUN_TIME_NS RUN_CNT`, sums over the BPF programs a
  scheduler process holds, sampled every 2 s with `kernel.bpf_stats_enabled`): per scheduler
  process, the share of one CPU spent in its BPF programs, calls per second and ns per call;
- `layered-monitor.txt` (`scx_layered --monitor 2`): per 2 s block, the CPU time scx_layered's
  own user-space process used (`proc=`), and per layer its scheduling events and the shares of
  them that preempted, failed to preempt or expired their slice.

    python -m asa_analysis.layered_cost OUT_DIR [--json out.json]
"""
import argparse
import json
import os
import re
import statistics
import sys

from .common import read_json, read_text

ANSI = re.compile(r'\x1b\[[0-9;]*m')
PASSES = ('hinted', 'unhinted', 'stats')


def probe_cells(report):
    """Per (scenario, expert): repetitions, mean score, mean input latency p50 and p99 (ms)."""
    cells = []
    for scenario in report['scenarios']:
        by_expert = {}
        for run in scenario['runs']:
            by_expert.setdefault(run['expert'], []).append(run)
        for expert, runs in by_expert.items():
            def mean_of(key):
                values = [r['figures'][key] for r in runs if key in r.get('figures', {})]
                return statistics.fmean(values) if values else None
            scores = [r['score'] for r in runs if r.get('score') is not None]
            cells.append({'scenario': scenario['scenario'], 'expert': expert, 'reps': len(runs),
                          'score': statistics.fmean(scores) if scores else None,
                          'latency_p50_ms': mean_of('value:input_latency_p50_ms'),
                          'latency_p99_ms': mean_of('value:input_latency_p99_ms')})
    return cells


def bpf_segments(text):
    """One segment per scheduler process (a new one starts when the command changes or a
    counter falls): seconds covered, share of one CPU in BPF, calls per second, ns per call."""
    segments = []
    current = None
    for line in text.splitlines():
        fields = line.split()
        try:
            t, comm, run_ns, runs = float(fields[0]), fields[1], float(fields[2]), float(fields[3])
        except (IndexError, ValueError):
            continue
        if current is None or current['comm'] != comm or run_ns < current['points'][-1][1]:
            current = {'comm': comm, 'points': []}
            segments.append(current)
        current['points'].append((t, run_ns, runs))
    out = []
    for s in segments:
        (t0, r0, c0), (t1, r1, c1) = s['points'][0], s['points'][-1]
        if t1 - t0 <= 0:
            continue
        out.append({'comm': s['comm'], 'start': t0, 'seconds': t1 - t0,
                    'bpf_cpu_share': (r1 - r0) / (t1 - t0) / 1e9,
                    'calls_per_s': (c1 - c0) / (t1 - t0),
                    'ns_per_call': (r1 - r0) / (c1 - c0) if c1 > c0 else None})
    return out


def _header_time(line):
    """The UNIX time of a monitor block's header (`━━ Sun, 29 Nov 2026 14:22:23 +0000 ━━`)."""
    import email.utils
    m = re.search(r'━━ (.+?) ━', line)
    try:
        return email.utils.parsedate_to_datetime(m.group(1)).timestamp()
    except (AttributeError, TypeError, ValueError):
        return None


def expert_starts(text):
    """(UNIX time, expert) of each `started NAME (pid …)` line of the scenario runner's log."""
    import datetime
    starts = []
    for line in text.splitlines():
        m = re.match(r'\[(\S+?)Z? [^\]]*\] started (\S+) \(pid', ANSI.sub('', line))
        if m:
            t = datetime.datetime.fromisoformat(m.group(1).rstrip('Z')).replace(tzinfo=datetime.timezone.utc)
            starts.append((t.timestamp(), m.group(2)))
    return starts


def by_expert(blocks, starts):
    """The monitor blocks of each expert: a block belongs to the expert started last before it."""
    out = {}
    for b in blocks:
        owner = None
        for t, name in starts:
            if b.get('time') is not None and t <= b['time']:
                owner = name
        if owner is not None:
            out.setdefault(owner, []).append(b)
    return out


def monitor_blocks(text):
    """scx_layered's monitor output, block by block: `proc_ms`, `busy` and per layer `tot`,
    `preempt`, `preempt_fail`, `expired` (shares of the layer's events, in %)."""
    blocks = []
    block = layer = None
    for raw in text.splitlines():
        line = ANSI.sub('', raw)
        if line.startswith('━━'):
            block = {'layers': {}, 'time': _header_time(line)}
            blocks.append(block)
            layer = None
            continue
        if block is None:
            continue
        m = re.search(r'busy=\s*([\d.]+).*proc=(\d+)ms', line)
        if m:
            block['busy'], block['proc_ms'] = float(m.group(1)), int(m.group(2))
        m = re.match(r'▶ (\S+)', line)
        if m:
            layer = block['layers'].setdefault(m.group(1), {})
            continue
        if layer is None:
            continue
        m = re.search(r'sched\s+tot=\s*(\d+).*wake/exp/re=([\d.]+)/([\d.]+)/([\d.]+)', line)
        if m:
            layer['tot'], layer['expired'] = int(m.group(1)), float(m.group(3))
        m = re.search(r'preempt/first/xllc/xnuma/idle/fail=([\d./]+)', line)
        if m:
            values = [float(v) for v in m.group(1).split('/')]
            layer['preempt'], layer['preempt_fail'] = values[0], values[5]
    return [b for b in blocks if 'proc_ms' in b]


def monitor_summary(blocks, busy_above=50.0):
    """Over the blocks where the machine was busy (`busy` > `busy_above` %): the median CPU
    time of scx_layered's user space per second, and per layer the event-weighted shares."""
    busy = [b for b in blocks if b.get('busy', 0) > busy_above]
    if not busy:
        return {'blocks': 0}
    layers = {}
    for b in busy:
        for name, l in b['layers'].items():
            if not l.get('tot'):
                continue
            acc = layers.setdefault(name, {'tot': 0, 'preempt': 0.0, 'preempt_fail': 0.0, 'expired': 0.0})
            acc['tot'] += l['tot']
            for key in ('preempt', 'preempt_fail', 'expired'):
                acc[key] += l.get(key, 0.0) * l['tot']
    for acc in layers.values():
        for key in ('preempt', 'preempt_fail', 'expired'):
            acc[key] = acc[key] / acc['tot']
    return {'blocks': len(busy),
            'user_space_cpu_share': statistics.median(b['proc_ms'] for b in busy) / 2000.0,
            'layers': layers}


def analyse(folder):
    result = {'passes': {}}
    for name in PASSES:
        path = os.path.join(folder, name, 'report.json')
        if os.path.exists(path):
            result['passes'][name] = probe_cells(read_json(path))
    path = os.path.join(folder, 'bpf-stats.txt')
    if os.path.exists(path):
        result['bpf'] = bpf_segments(read_text(path))
    path = os.path.join(folder, 'layered-monitor.txt')
    if os.path.exists(path):
        blocks = monitor_blocks(read_text(path))
        result['layered_monitor'] = monitor_summary(blocks)
        log = os.path.join(folder, 'hinted.log')
        if os.path.exists(log):
            split = by_expert(blocks, expert_starts(read_text(log)))
            result['layered_monitor_by_expert'] = {name: monitor_summary(bs) for name, bs in split.items()
                                                   if name.startswith('layered')}
    return result


def text(result):
    lines = []
    for name, cells in result['passes'].items():
        lines.append(f'{name}:')
        for c in cells:
            p50 = '-' if c['latency_p50_ms'] is None else f"{c['latency_p50_ms']:.2f}"
            p99 = '-' if c['latency_p99_ms'] is None else f"{c['latency_p99_ms']:.2f}"
            score = '-' if c['score'] is None else f"{c['score']:.3f}"
            lines.append(f"  {c['scenario']:8s} {c['expert']:22s} x{c['reps']} score {score} "
                         f"latency p50 {p50} ms p99 {p99} ms")
    for s in result.get('bpf', []):
        per_call = '-' if s['ns_per_call'] is None else f"{s['ns_per_call']:.0f}"
        lines.append(f"bpf {s['comm']:12s} {s['seconds']:6.1f} s: {s['bpf_cpu_share']:.3f} of a CPU, "
                     f"{s['calls_per_s']:.0f} calls/s, {per_call} ns/call")
    mon = result.get('layered_monitor')
    if mon and mon.get('blocks'):
        lines.append(f"scx_layered user space: {mon['user_space_cpu_share']:.3f} of a CPU (median of "
                     f"{mon['blocks']} busy blocks)")
        for name, l in mon['layers'].items():
            lines.append(f"  layer {name:12s} events {l['tot']:6d}: preempt {l['preempt']:.1f} %, "
                         f"failed {l['preempt_fail']:.1f} %, slice expired {l['expired']:.1f} %")
    for name, m in result.get('layered_monitor_by_expert', {}).items():
        if not m.get('blocks'):
            continue
        inter = m['layers'].get('interactive', {})
        lines.append(f"  {name:22s} user space {m['user_space_cpu_share']:.3f} of a CPU ({m['blocks']} blocks); "
                     f"interactive: preempt {inter.get('preempt', 0):.1f} %, failed {inter.get('preempt_fail', 0):.1f} %, "
                     f"expired {inter.get('expired', 0):.1f} %")
    return '\n'.join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('folder', help='the output folder of layers/lab/cost-run.sh')
    ap.add_argument('--json', help='write the analysis here')
    args = ap.parse_args(argv)
    result = analyse(args.folder)
    print(text(result))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
