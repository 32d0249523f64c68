#!/usr/bin/env python3
"""How the mixed load's CPU time splits, from a tracefs trace (sched_switch, sched_wakeup).

Usage: mixed_split.py TRACE [--timeline]

sysbench threads are classed as hogs (the CPU part: >= 80 % of their switch-outs runnable)
or I/O threads (the rest). Prints, per CPU, the share of time each class ran; for the I/O
threads their runs, the wait from wake-up (or preemption) to run, and where they woke and ran;
for the hogs, their run lengths and how their runs ended.
"""
import collections
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from tracefs_events import SW, WK  # noqa: E402



def pct(xs, q):
    if not xs:
        return float('nan')
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    path = sys.argv[1]
    timeline = '--timeline' in sys.argv
    events = []
    for line in open(path, errors='replace'):
        m = SW.match(line)
        if m:
            events.append(('sw', int(m.group(3)), float(m.group(4)), m.group(5), int(m.group(6)),
                           m.group(7), m.group(8), int(m.group(9))))
            continue
        m = WK.match(line)
        if m:
            events.append(('wk', int(m.group(3)), float(m.group(4)), m.group(5), int(m.group(6)),
                           int(m.group(7))))
    if not events:
        print('no events')
        return
    comm = {}
    outs = collections.defaultdict(collections.Counter)
    for e in events:
        if e[0] == 'sw':
            comm[e[4]] = e[3]
            comm[e[7]] = e[6]
            outs[e[4]][e[5].rstrip('+')] += 1
    sysb = [p for p, c in comm.items() if c == 'sysbench']

    def cls(pid):
        if pid == 0:
            return 'idle'
        if comm.get(pid) == 'sysbench':
            o = outs[pid]
            n = sum(o.values())
            if n and o['R'] / n >= 0.8:
                return 'hog'
            if n:
                return 'io'
            return 'sysbench?'
        c = comm.get(pid, '?')
        if c.startswith('jbd2'):
            return 'jbd2'
        if c.startswith('kworker'):
            return 'kworker'
        if c.startswith('scx_gru'):
            return 'scx_gru'
        return 'other'

    t0 = events[0][2]
    t1 = events[-1][2]
    span = t1 - t0
    cur = {}  # cpu -> (pid, since)
    ran = collections.defaultdict(float)  # (cpu, class) -> s
    tl = collections.defaultdict(float)  # (second, class) -> s
    wake_at = {}  # pid -> (t, target cpu, kind)
    waits = collections.defaultdict(list)  # class -> waits (s)
    wake_vs_run = collections.Counter()  # (class, woke cpu == run cpu)
    run_cpu = collections.defaultdict(collections.Counter)
    runs = collections.defaultdict(list)  # class -> run lengths
    hog_end = collections.Counter()  # what a hog's run was followed by
    started = {}

    def add(cpu, pid, a, b):
        c = cls(pid)
        ran[(cpu, c)] += b - a
        s = int(a - t0)
        while a < b:
            e = min(b, t0 + s + 1)
            tl[(s, c)] += e - a
            a = e
            s += 1

    for e in events:
        if e[0] == 'wk':
            _, cpu, t, c, pid, target = e
            wake_at[pid] = (t, target, 'wake')
            continue
        _, cpu, t, pc, pp, ps, nc, np_ = e
        if cpu in cur:
            pid, since = cur[cpu]
            add(cpu, pid, since, t)
        if pp in started:
            runs[cls(pp)].append(t - started.pop(pp))
        if cls(pp) == 'hog':
            hog_end[(ps.rstrip('+'), cls(np_))] += 1
        if ps.rstrip('+') == 'R' and pp != 0:
            wake_at[pp] = (t, cpu, 'preempted')
        cur[cpu] = (np_, t)
        started[np_] = t
        run_cpu[cls(np_)][cpu] += 1
        if np_ in wake_at:
            wt, target, kind = wake_at.pop(np_)
            waits[(cls(np_), kind)].append(t - wt)
            if kind == 'wake':
                wake_vs_run[(cls(np_), target == cpu)] += 1

    print(f'span {span:.2f} s, sysbench threads: '
          + ', '.join(f'{p}:{cls(p)}' for p in sorted(sysb)))
    cpus = sorted({c for c, _ in ran})
    classes = ['hog', 'io', 'jbd2', 'kworker', 'scx_gru', 'other', 'idle']
    print('share of time   ' + ' '.join(f'{c:>8}' for c in classes))
    for cpu in cpus:
        print(f'cpu {cpu:<11} ' + ' '.join(f'{100 * ran[(cpu, c)] / span:7.1f}%' for c in classes))
    print(f'{"both":<15} ' + ' '.join(
        f'{100 * sum(ran[(cpu, c)] for cpu in cpus) / span / len(cpus):7.1f}%' for c in classes))
    for c in ['io', 'hog', 'jbd2', 'kworker']:
        r = runs[c]
        if not r:
            continue
        print(f'{c}: {len(r) / span:.0f} runs/s, run mean {1e6 * sum(r) / len(r):.0f} us '
              f'p50 {1e6 * pct(r, .5):.0f} p90 {1e6 * pct(r, .9):.0f} max {1e6 * max(r):.0f}; '
              f'runs by cpu {dict(run_cpu[c])}')
        for kind in ['wake', 'preempted']:
            w = waits[(c, kind)]
            if w:
                print(f'   wait after {kind}: n={len(w)} mean {1e6 * sum(w) / len(w):.0f} us '
                      f'p50 {1e6 * pct(w, .5):.0f} p90 {1e6 * pct(w, .9):.0f} '
                      f'p99 {1e6 * pct(w, .99):.0f} max {1e6 * max(w):.0f}')
        same = wake_vs_run[(c, True)]
        other = wake_vs_run[(c, False)]
        if same + other:
            print(f'   ran on the CPU the wake-up targeted: {100 * same / (same + other):.1f}%')
    print('hog runs ended by (state, next):',
          ', '.join(f'{k[0]}->{k[1]} {n}' for k, n in hog_end.most_common(8)))
    if timeline:
        print('second  hog%  io%  (of both CPUs)')
        for s in range(int(span) + 1):
            print(f'{s:5d} {100 * tl[(s, "hog")] / len(cpus):5.1f} {100 * tl[(s, "io")] / len(cpus):5.1f}')


main()
