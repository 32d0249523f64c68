"""How long the probe's threads wait for a CPU, per scenario run, and what held the CPUs while
they waited (issue 40: per-application mode's tail).

Reads a `layers/lab/cost-run.sh` folder run with `TRACE=1`:
- `trace.txt`: the kernel's `sched_switch` and `sched_wakeup` events (tracefs, `mono` clock)
  through the pass, with a `tracing_mark_write: ASA-SYNC UNIX_TIME` marker that ties the trace's
  clock to the runner's log;
- the pass's log (`hinted.log`, else `console.log`): each run's expert and load window
  (asa_analysis.task_census.parse_runs).

For every thread whose name starts with `--prefix` (default `probe`: the probe's threads) a
*wait* is the time from its wake-up (`sched_wakeup`) or its preemption (`sched_switch` away from
it while runnable, state R) to the switch that runs it again. Per run and thread: the waits'
count, p50, p99 and maximum, and how many exceed `--long` ms; for the long ones, which tasks ran
on the CPUs meanwhile (milliseconds per command, summed over the CPUs).

    python -m asa_analysis.wake_tails OUT_DIR [--prefix probe] [--long 4] [--json out.json]
"""
import argparse
import bisect
import math
import re
import statistics
import sys

from .common import print_and_dump, read_text
from .task_census import cost_run_inputs, parse_runs
from .tracefs_events import SW, WK

SYNC = re.compile(r'\s([\d.]+): tracing_mark_write: ASA-SYNC ([\d.]+)')


def parse_trace(text):
    """(offset, events): `offset` turns a trace time into seconds since the epoch (None
    without the marker); events in order, each ('switch', t, cpu, prev_pid, prev_state,
    next_comm, next_pid, prev_comm) or ('wakeup', t, cpu, comm, pid)."""
    offset = None
    events = []
    for line in text.splitlines():
        m = SW.match(line)
        if m:
            events.append(('switch', float(m[4]), int(m[3]), int(m[6]), m[7], m[8], int(m[9]),
                           m[5]))
            continue
        m = WK.match(line)
        if m:
            events.append(('wakeup', float(m[4]), int(m[3]), m[5], int(m[6])))
            continue
        m = SYNC.search(line)
        if m and offset is None:
            offset = float(m[2]) - float(m[1])
    return offset, events


def running_intervals(events):
    """Per CPU, [(start, end, comm)] of what ran, from consecutive switches on that CPU (the
    last one until the trace's last event)."""
    current = {}
    intervals = {}
    for e in events:
        if e[0] != 'switch':
            continue
        _, t, cpu, _, _, next_comm, _, prev_comm = e
        if cpu in current:
            start, comm = current[cpu]
            intervals.setdefault(cpu, []).append((start, t, comm))
        else:
            intervals.setdefault(cpu, []).append((t, t, prev_comm))
        current[cpu] = (t, next_comm)
    last = max((e[1] for e in events), default=0.0)
    for cpu, (start, comm) in current.items():
        intervals[cpu].append((start, last, comm))
    return intervals


def waits(events, prefix):
    """Every wait of the threads named `prefix`*: (pid, comm, kind, start, end), kind being
    'wakeup' or 'preempted'."""
    pending = {}
    names = {}
    out = []
    for e in events:
        if e[0] == 'wakeup':
            _, t, _, comm, pid = e
            if comm.startswith(prefix) and pid not in pending:
                pending[pid] = ('wakeup', t)
                names[pid] = comm
            continue
        _, t, _, prev_pid, prev_state, next_comm, next_pid, prev_comm = e
        if next_pid in pending:
            kind, start = pending.pop(next_pid)
            out.append((next_pid, names[next_pid], kind, start, t))
        if prev_comm.startswith(prefix) and prev_state.startswith('R'):
            pending[prev_pid] = ('preempted', t)
            names[prev_pid] = prev_comm
    return out


def held_during(intervals, start, end):
    """Milliseconds each command ran on any CPU within [start, end]. A CPU's intervals follow
    each other, so their ends are sorted: the first one that ends after `start` is found by
    bisection."""
    held = {}
    for spans in intervals.values():
        ends = _ends_of(spans)
        for s, e, comm in spans[bisect.bisect_right(ends, start):]:
            if s >= end:
                break
            overlap = min(e, end) - max(s, start)
            if overlap > 0:
                held[comm] = held.get(comm, 0.0) + overlap * 1e3
    return held


_ENDS = {}


def _ends_of(spans):
    """The end times of a CPU's intervals (cached per list)."""
    key = id(spans)
    cached = _ENDS.get(key)
    if cached is None or cached[0] is not spans:
        cached = (spans, [e for _, e, _ in spans])
        _ENDS[key] = cached
    return cached[1]


def percentile(values, q):
    """The q-th percentile (0-100) by nearest rank; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q / 100 * len(ordered))))
    return ordered[rank - 1]


def run_tails(offset, events, runs, prefix='probe', long_ms=4.0, top=6):
    """Per run and probe thread: waits, p50 / p99 / max ms, long waits and, over the long
    ones, the commands that held the CPUs (top `top`, ms)."""
    intervals = running_intervals(events)
    all_waits = waits(events, prefix)
    rows = []
    for run in runs:
        lo, hi = run['start'] - offset, run['end'] - offset
        by_thread = {}
        for pid, comm, kind, s, e in all_waits:
            if lo <= s <= hi:
                by_thread.setdefault(comm, []).append((kind, s, e))
        threads = {}
        for comm, ws in sorted(by_thread.items()):
            ms = [(e - s) * 1e3 for _, s, e in ws]
            long = [(k, s, e) for (k, s, e), m in zip(ws, ms) if m > long_ms]
            held = {}
            for _, s, e in long:
                for c, v in held_during(intervals, s, e).items():
                    if c != comm:
                        held[c] = held.get(c, 0.0) + v
            threads[comm] = {
                'waits': len(ms),
                'preempted': sum(1 for k, _, _ in ws if k == 'preempted'),
                'p50_ms': round(statistics.median(ms), 3),
                'p99_ms': round(percentile(ms, 99), 3),
                'max_ms': round(max(ms), 3),
                'long': len(long),
                'long_after_preemption': sum(1 for k, _, _ in long if k == 'preempted'),
                'long_ms_total': round(sum(ms_ for ms_ in ms if ms_ > long_ms), 1),
                'held_during_long_ms': {c: round(v, 1) for c, v in
                                        sorted(held.items(), key=lambda x: -x[1])[:top]},
            }
        rows.append({'scenario': run['scenario'], 'expert': run['expert'], 'rep': run['rep'],
                     'threads': threads})
    return rows


def format_rows(rows, long_ms):
    lines = []
    for r in rows:
        lines.append(f"{r['scenario']} {r['expert']} rep {r['rep']}:")
        for comm, t in r['threads'].items():
            lines.append(f"  {comm:16s} {t['waits']:6d} waits ({t['preempted']} preempted)"
                         f"  p50 {t['p50_ms']:.3f}  p99 {t['p99_ms']:.3f}  max {t['max_ms']:.1f} ms"
                         f"  > {long_ms:g} ms: {t['long']} ({t['long_after_preemption']} after a"
                         f" preemption; {t['long_ms_total']} ms)")
            if t['held_during_long_ms']:
                held = ', '.join(f'{c} {v:.0f}' for c, v in t['held_during_long_ms'].items())
                lines.append(f"    CPUs held meanwhile (ms): {held}")
    return '\n'.join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('out_dir', help='a cost-run.sh folder with trace.txt')
    parser.add_argument('--prefix', default='probe',
                        help="threads whose name starts with this (default 'probe')")
    parser.add_argument('--long', type=float, default=4.0,
                        help='a long wait, in ms (default 4)')
    parser.add_argument('--json', help='also write the rows to this file')
    args = parser.parse_args(argv)
    trace_path, log_path = cost_run_inputs(args.out_dir, 'trace.txt', 'TRACE')
    offset, events = parse_trace(read_text(trace_path))
    if offset is None:
        sys.exit(f'{trace_path}: no ASA-SYNC marker to tie it to the runs')
    rows = run_tails(offset, events, parse_runs(read_text(log_path)), args.prefix, args.long)
    print_and_dump(format_rows(rows, args.long), rows, args.json)
    return 0


if __name__ == '__main__':
    sys.exit(main())
