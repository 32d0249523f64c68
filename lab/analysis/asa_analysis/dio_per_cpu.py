#!/usr/bin/env python3
"""The mixed load's direct I/Os by the CPU that submitted them, from run 104's traces.

Usage: dio_per_cpu.py TRACE [TRACE...]   (prof-SCHED-ROUND-mixed.txt.script of vm_compare
--profile-scheduler with ../2026-11-26-qemu-icount-vcpu-starvation/trace-patch.diff applied)

A sysbench I/O thread is one that switched out in D state with `__iomap_dio_rw` on its stack.
For each of its direct-I/O sleeps (switch-out in D to sched_wakeup), by the CPU it slept on:
how many, the mean sleep, the share longer than 200 µs (the timer disk completes after
100 µs), and the time the I/O threads and the other sysbench threads (the hogs) ran on it.
"""
import collections
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from tracefs_events import SW, WK  # noqa: E402



def is_dio_sleep(lines, i, m):
    return m.group(7) == 'D' and m.group(5) == 'sysbench' and 'iomap_dio' in ' '.join(lines[i + 1:i + 14])


def summarize(path):
    lines = open(path, errors='replace').read().split('\n')
    io_pids = {int(m.group(6)) for i, m in ((i, SW.match(l)) for i, l in enumerate(lines))
               if m and is_dio_sleep(lines, i, m)}
    sleeping, sleeps = {}, collections.defaultdict(list)
    run, since = collections.Counter(), {}
    for i, line in enumerate(lines):
        m = SW.match(line)
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
    name = path.split('/')[-1].replace('prof-', '').replace('-mixed.txt.script', '')
    cols = []
    for cpu in sorted(set(sleeps) | {c for _, c in run}):
        v = sleeps[cpu]
        mean = 1e6 * sum(v) / len(v) if v else float('nan')
        late = sum(x > 2e-4 for x in v) / len(v) if v else float('nan')
        cols.append(f'cpu{cpu}: {len(v):5d} I/Os, sleep {mean:4.0f} µs, >200 µs {late:4.2f}, '
                    f'I/O threads ran {run[("io", cpu)]:4.2f} s, hogs {run[("hog", cpu)]:4.2f} s')
    print(f'{name:9s} ' + ' | '.join(cols))


if __name__ == '__main__':
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    for p in sys.argv[1:]:
        summarize(p)
