"""The mixed load's direct I/Os by the CPU that submitted them, from tracefs traces.

Reads traces of the mixed load (prof-SCHED-ROUND-mixed.txt.script: asa-gru-compare's
--profile-scheduler patched to write a tracefs trace with sched_switch, its stack trace on
D-state switch-outs, and sched_wakeup; see tracefs_events and
results/2026-11-27-lab-vcpu0-takes-interrupts-first/). A sysbench I/O thread is one that
switched out in D state with `iomap_dio` in the stack trace that follows (within 13 lines).
For each of its direct-I/O sleeps (switch-out in D to sched_wakeup), by the CPU it slept on:
how many, the mean sleep, the share longer than 200 µs (the timer disk completes after
100 µs), and the time the I/O threads and the other sysbench threads (the hogs) ran on it.

Prints one line per trace: its name (SCHED-ROUND), then per CPU those figures.

Usage (from lab/analysis, or with PYTHONPATH=lab/analysis):
    python -m asa_analysis.dio_per_cpu TRACE [TRACE...]
"""
import argparse
import collections
import os

from .common import read_text
from .tracefs_events import SW, WK

STACK_LINES = 13
LATE_S = 2e-4


def is_dio_sleep(lines, i, m):
    """Whether sched_switch match m (of lines[i]) is a sysbench thread blocking on direct I/O."""
    return (m.group(7) == 'D' and m.group(5) == 'sysbench'
            and 'iomap_dio' in ' '.join(lines[i + 1:i + 1 + STACK_LINES]))


def dio_per_cpu(text):
    """{cpu: {'sleeps': [direct-I/O sleep s, ...], 'io_run': s, 'hog_run': s}} of a trace."""
    lines = text.split('\n')
    switches = [(i, SW.match(line)) for i, line in enumerate(lines)]
    io_pids = {int(m.group(6)) for i, m in switches if m and is_dio_sleep(lines, i, m)}
    sleeping, sleeps = {}, collections.defaultdict(list)
    run, since = collections.Counter(), {}
    for i, line in enumerate(lines):
        m = switches[i][1]
        if m:
            cpu, t, prev = int(m.group(3)), float(m.group(4)), int(m.group(6))
            if cpu in since and m.group(5) == 'sysbench':
                run[('io' if prev in io_pids else 'hog', cpu)] += t - since[cpu]
            since[cpu] = t
            if prev in io_pids and is_dio_sleep(lines, i, m):
                sleeping[prev] = (t, cpu)
            continue
        m = WK.match(line)
        if m and int(m.group(6)) in sleeping:
            t0, cpu = sleeping.pop(int(m.group(6)))
            sleeps[cpu].append(float(m.group(4)) - t0)
    return {cpu: {'sleeps': sleeps.get(cpu, []), 'io_run': run[('io', cpu)],
                  'hog_run': run[('hog', cpu)]}
            for cpu in sorted(set(sleeps) | {c for _, c in run})}


def trace_name(path):
    """SCHED-ROUND of a prof-SCHED-ROUND-mixed.txt.script path."""
    return os.path.basename(path).replace('prof-', '').replace('-mixed.txt.script', '')


def format_line(name, per_cpu):
    """The line dio_per_cpu prints for one trace."""
    cols = []
    for cpu, c in per_cpu.items():
        v = c['sleeps']
        mean = 1e6 * sum(v) / len(v) if v else float('nan')
        late = sum(x > LATE_S for x in v) / len(v) if v else float('nan')
        cols.append(f'cpu{cpu}: {len(v):5d} I/Os, sleep {mean:4.0f} µs, >200 µs {late:4.2f}, '
                    f'I/O threads ran {c["io_run"]:4.2f} s, hogs {c["hog_run"]:4.2f} s')
    return f'{name:9s} ' + ' | '.join(cols)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('traces', nargs='+', help='prof-SCHED-ROUND-mixed.txt.script traces')
    args = parser.parse_args(argv)
    for path in args.traces:
        print(format_line(trace_name(path), dio_per_cpu(read_text(path))))


if __name__ == '__main__':
    main()
