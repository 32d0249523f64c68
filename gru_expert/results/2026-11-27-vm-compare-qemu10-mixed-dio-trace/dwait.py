#!/usr/bin/env python3
"""Where sysbench threads sleep in D state, from a tracefs trace with a stacktrace on D switch-outs.

Usage: dwait.py TRACE [TRACE...]
Per trace: for sysbench threads, D sleeps (switch-out in D to sched_wakeup) summed by the first
frames of the stack (scheduler frames dropped); also runnable waits (wake-up to run) and run time.
"""
import collections
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from tracefs_events import SW, WK  # noqa: E402

SKIP = ('trace_event', '__traceiter', '__schedule', 'schedule', 'io_schedule', '__bpf_trace', 'bpf_trace')


def frames(lines, i):
    st = []
    j = i + 1
    if j < len(lines) and '<stack trace>' in lines[j]:
        j += 1
        while j < len(lines) and lines[j].startswith(' =>'):
            f = lines[j][4:].split('+')[0].strip()
            st.append(f)
            j += 1
    return [f for f in st if not f.startswith(SKIP)]


def main():
    for path in sys.argv[1:]:
        lines = open(path, errors='replace').read().split('\n')
        sleeping = {}  # pid -> (t, key)
        dsum = collections.defaultdict(float)
        dn = collections.Counter()
        waking = {}
        wsum = collections.defaultdict(float)
        run = collections.defaultdict(float)
        runstart = {}
        comm = {}
        t0 = t1 = None
        for i, l in enumerate(lines):
            m = SW.match(l)
            if m:
                t = float(m.group(4))
                t0 = t0 if t0 is not None else t
                t1 = t
                pc, pp, ps, nc, np_ = m.group(5), int(m.group(6)), m.group(7), m.group(8), int(m.group(9))
                comm[pp], comm[np_] = pc, nc
                if pp in runstart:
                    run[pp] += t - runstart.pop(pp)
                runstart[np_] = t
                if np_ in waking:
                    wsum[np_] += t - waking.pop(np_)
                if ps.startswith('R'):
                    waking[pp] = t
                elif ps == 'D' and pc == 'sysbench':
                    st = frames(lines, i)
                    sleeping[pp] = (t, ' < '.join(st[:4]) or '?')
                continue
            m = WK.match(l)
            if m:
                t = float(m.group(4))
                pid = int(m.group(6))
                if pid in sleeping:
                    ts, key = sleeping.pop(pid)
                    dsum[key] += t - ts
                    dn[key] += 1
                waking.setdefault(pid, t)
        span = (t1 - t0) if t0 is not None else 0
        sb = [p for p, c in comm.items() if c == 'sysbench']
        print(f'== {path}: {span:.2f} s traced, {len(sb)} sysbench threads')
        print(f'   sysbench run {sum(run[p] for p in sb):.2f} s, runnable wait {sum(wsum[p] for p in sb):.2f} s')
        print(f'   D sleeps {sum(dn.values())}, {sum(dsum.values()):.2f} s in all:')
        for key, s in sorted(dsum.items(), key=lambda kv: -kv[1])[:8]:
            print(f'   {s:7.2f} s {dn[key]:6d} x mean {1000 * s / dn[key]:7.2f} ms  {key}')
        jb = [p for p, c in comm.items() if c.startswith('jbd2/asa0')]
        print(f'   jbd2/asa0 run {sum(run[p] for p in jb):.3f} s, runnable wait {sum(wsum[p] for p in jb):.3f} s')


if __name__ == '__main__':
    main()
