"""How each task of a tracefs trace ran, waited and blocked, sysbench's threads first.

Reads one tracefs trace with sched_switch (and its stack trace on D-state switch-outs) and
sched_wakeup events (see tracefs_events; e.g. the trace kept in
results/2026-11-26-qemu72-icount-starves-a-vcpu/). A task runs from its switch-in to its
switch-out; it waits from a wake-up, or from a switch-out in state R (preempted), to its next
switch-in.

Prints the trace's span; per sysbench thread (by pid): its run and wait in % of the span, the
number of waits and their mean (µs), how often it switched out in each state (R, R+, D, S, ...)
and its switch-ins per CPU; then the twelve most frequent D-state stacks (count, comm, five
innermost frames below the scheduler's own); then the other tasks among the twenty that ran
longest, with their run and wait.

Usage (from lab/analysis, or with PYTHONPATH=lab/analysis):
    python -m asa_analysis.task_states TRACE
"""
import argparse
import collections
import sys

from .common import read_text
from .tracefs_events import SW, WK, stack_after

SCHEDULER_FRAMES = ('trace_event', '__traceiter', '__schedule', 'schedule')
FOCUS = 'sysbench'


def task_states(text):
    """The trace's tasks, a dict: span_s; comm {pid: last comm}; run, wait {pid: s}, nwait
    {pid: waits}; states {(prev_comm, pid, prev_state): switch-outs}; cpus {pid: {CPU:
    switch-ins}}; stacks {(comm, 'f1 < f2 < ...'): D-state switch-outs}. Dicts keep the order
    in which the trace first showed each key. None without sched_switch events."""
    lines = text.split('\n')
    states, stacks = collections.Counter(), collections.Counter()
    run, running_since = collections.defaultdict(float), {}
    cpus = collections.defaultdict(collections.Counter)
    wait, waiting_since, nwait = collections.defaultdict(float), {}, collections.Counter()
    comm = {}
    first = last = None
    for i, line in enumerate(lines):
        m = SW.match(line)
        if m:
            cpu, t = int(m.group(3)), float(m.group(4))
            prev_comm, prev, prev_state = m.group(5), int(m.group(6)), m.group(7)
            next_comm, nxt = m.group(8), int(m.group(9))
            if first is None:
                first = t
            last = t
            comm[prev], comm[nxt] = prev_comm, next_comm
            if prev in running_since:
                run[prev] += t - running_since.pop(prev)
            running_since[nxt] = t
            cpus[nxt][cpu] += 1
            if nxt in waiting_since:
                wait[nxt] += t - waiting_since.pop(nxt)
                nwait[nxt] += 1
            if prev_state.startswith('R'):  # preempted: waiting again
                waiting_since[prev] = t
            states[(prev_comm, prev, prev_state)] += 1
            if prev_state == 'D':
                frames = stack_after(lines, i)
                if frames is not None:
                    key = ' < '.join([f for f in frames if not f.startswith(SCHEDULER_FRAMES)][:5])
                    stacks[(prev_comm, key)] += 1
            continue
        m = WK.match(line)
        if m:
            pid = int(m.group(6))
            comm[pid] = m.group(5)
            waiting_since[pid] = float(m.group(4))
    if first is None:
        return None
    return {'span_s': last - first, 'comm': comm, 'run': dict(run), 'wait': dict(wait),
            'nwait': dict(nwait), 'states': dict(states),
            'cpus': {pid: dict(c) for pid, c in cpus.items()}, 'stacks': dict(stacks)}


def _run_wait(r, pid, span):
    return (100 * r['run'].get(pid, 0.0) / span, 100 * r['wait'].get(pid, 0.0) / span,
            r['nwait'].get(pid, 0), 1e6 * r['wait'].get(pid, 0.0) / max(1, r['nwait'].get(pid, 0)))


def format_states(r, focus=FOCUS, top_stacks=12, top_run=20):
    """The lines task_states prints (span must be > 0)."""
    span = r['span_s']
    out = ['span %.2f s' % span]
    for pid in sorted({p for (c, p, _) in r['states'] if c == focus}):
        seen = {s: n for (_, p, s), n in r['states'].items() if p == pid}
        run, wait, n, mean = _run_wait(r, pid, span)
        out.append(f"{pid} run {run:.1f}% wait {wait:.1f}% ({n} waits, {mean:.0f} us avg) "
                   f"{seen} {r['cpus'].get(pid, {})}")
    out.append('--- top D stacks')
    for (c, key), n in collections.Counter(r['stacks']).most_common(top_stacks):
        out.append(f'{n} {c} {key}')
    out.append('--- other tasks by run')
    for pid, _ in sorted(r['run'].items(), key=lambda kv: -kv[1])[:top_run]:
        if r['comm'].get(pid) != focus:
            run, wait, n, mean = _run_wait(r, pid, span)
            out.append(f"{r['comm'].get(pid)} {pid} run {run:.1f}% wait {wait:.1f}% n={n} "
                       f"avg {mean:.0f} us")
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('trace', help='a tracefs trace (text)')
    args = parser.parse_args(argv)
    r = task_states(read_text(args.trace))
    if r is None or not r['span_s']:
        sys.exit(f'{args.trace}: fewer than two sched_switch events')
    print('\n'.join(format_states(r)))


if __name__ == '__main__':
    main()
