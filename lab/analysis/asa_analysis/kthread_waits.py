#!/usr/bin/env python3
"""Which kernel threads waited for a CPU during a load, from vm_compare's schedstat snapshots.

Usage: kthread_waits.py [--top N] [--match NAME] OUT_DIR [SCHED-ROUND-LOAD ...]

vm_compare's guest writes ss-SCHED-ROUND-LOAD-0.txt and -1.txt around every load: every
thread's /proc stat and schedstat (run ns, wait ns, time slices). For each pair (all of them,
or the named ones), prints the kernel threads (PF_KTHREAD) that waited longest in total
between the two snapshots: total wait and run (ms), time slices and the mean wait per slice
(µs). --match keeps the threads whose name starts with NAME (e.g. jbd2) and prints one line
per pair. The kernel adds a wait when the thread starts to run, so a wait that began before
the first snapshot is counted whole.
"""
import argparse
import glob
import os

# The same /proc lines as the thread samples (this folder's scripts run from anywhere).
from thread_samples import SCHEDSTAT, STAT

PF_KTHREAD = 0x00200000


def snapshot(path):
    """{tid: (comm, flags, (run ns, wait ns, slices))} of the threads with both lines."""
    stat, sched = {}, {}
    for line in open(path, errors='replace'):
        m = STAT.match(line)
        if m:
            # Fields after "(comm)" start at field 3; flags is field 9.
            stat[int(m.group(2))] = (m.group(3), int(m.group(4).split()[9 - 3]))
            continue
        m = SCHEDSTAT.match(line)
        if m:
            sched[int(m.group(2))] = tuple(int(x) for x in m.group(3, 4, 5))
    return {tid: stat[tid] + (sched[tid],) for tid in stat if tid in sched}


def kthread_waits(before, after):
    """[(wait ns, run ns, slices, comm)] of kernel threads that ran between the snapshots."""
    rows = []
    for tid, (comm, flags, now) in after.items():
        if not flags & PF_KTHREAD or tid not in before:
            continue
        run, wait, slices = (a - b for a, b in zip(now, before[tid][2]))
        if slices:
            rows.append((wait, run, slices, comm))
    return sorted(rows, reverse=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--top', type=int, default=8)
    parser.add_argument('--match')
    parser.add_argument('out_dir')
    parser.add_argument('names', nargs='*', help='SCHED-ROUND-LOAD, e.g. gru-1-mixed')
    args = parser.parse_args()
    names = args.names or sorted(
        os.path.basename(p)[3:-6] for p in glob.glob(os.path.join(args.out_dir, 'ss-*-0.txt')))
    for name in names:
        before = snapshot(os.path.join(args.out_dir, f'ss-{name}-0.txt'))
        after = snapshot(os.path.join(args.out_dir, f'ss-{name}-1.txt'))
        rows = kthread_waits(before, after)
        if args.match:
            rows = [r for r in rows if r[3].startswith(args.match)]
            text = ', '.join(f'{comm} wait {wait / 1e6:.1f} ms run {run / 1e6:.1f} ms '
                             f'{slices} slices mean {wait / slices / 1e3:.0f} µs'
                             for wait, run, slices, comm in rows)
            print(f'{name:28s} {text or "-"}')
            continue
        print(f'{name}: kernel threads by total wait')
        for wait, run, slices, comm in rows[:args.top]:
            print(f'    {comm:28s} wait {wait / 1e6:8.1f} ms  run {run / 1e6:7.1f} ms  '
                  f'slices {slices:6d}  mean {wait / slices / 1e3:8.0f} µs')


if __name__ == '__main__':
    main()
