"""Which threads used the CPU during each scenario run, and in which scx_layered layer (issue 40).

Reads a `layers/lab/cost-run.sh` folder run with `CENSUS=1`:
- `census.txt`: every 2 s a `=== UNIX_TIME` line, then every thread's `/proc/PID/task/TID/stat`
  and `.../schedstat` lines, path-prefixed (asa_analysis.procfs);
- the pass's log (`hinted.log`, else the VM's `console.log`): the runner's lines say when each
  run's load started (`load NAME: starting`), under which expert (`... under EXPERT, rep N`),
  when it ended (`EXPERT: ... in S s`) and, for layer-plan experts, which process groups the
  oracle hints put in which class (`oracle hints: group PGID CLASS, ...`).

Each thread's CPU time (schedstat run ns) and time waiting for a CPU (wait ns) between the
first and last census inside a run's window are summed per *role*: a hinted class (its layer),
`kthread` (kernel threads: PF_KTHREAD), `scheduler` (scx_* processes), or `unhinted` (user
tasks in no hinted group: scx_layered's `other` layer). For runs of experts without hints the
hinted groups of the nearest layer-plan run stand in, so the same threads compare across
experts (the runner's group is the same through a pass; each load has its own).

    python -m asa_analysis.task_census OUT_DIR [--top N] [--json out.json]
"""
import argparse
import datetime
import os
import re
import sys

from .common import print_and_dump, read_text
from .procfs import STAT, SCHEDSTAT, stat_field

PF_KTHREAD = 0x00200000
PPID, PGRP, FLAGS = 4, 5, 9

_STAMP = r'^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)Z'
RUN_UNDER = re.compile(_STAMP + r'.*\[(\S+)\] .* under (\S+), rep (\d+)$')
LOAD_START = re.compile(_STAMP + r'.*load (\S+): starting')
RUN_END = re.compile(_STAMP + r'.*\[(\S+)\]   (\S+): .* in [\d.]+ s$')
HINTS = re.compile(_STAMP + r'.*oracle hints: (.*)$')
HINT_GROUP = re.compile(r'group (\d+) ([^,\s]+)')


def unix_of(stamp):
    """Seconds since the epoch of a log line's UTC stamp (`2026-11-29T18:01:02.794`)."""
    t = datetime.datetime.fromisoformat(stamp).replace(tzinfo=datetime.timezone.utc)
    return t.timestamp()


def parse_census(text):
    """[(time, {tid: thread})], a thread being a dict of pid, tid, comm, ppid, pgrp, kthread,
    run_ns, wait_ns (the last two absent when its schedstat line is)."""
    snapshots = []
    threads = None
    for line in text.splitlines():
        if line.startswith('=== '):
            try:
                threads = {}
                snapshots.append((float(line[4:]), threads))
            except ValueError:
                threads = None
            continue
        if threads is None:
            continue
        m = STAT.match(line)
        if m:
            pid, tid, comm, rest = int(m[1]), int(m[2]), m[3], m[4]
            try:
                flags = int(stat_field(rest, FLAGS))
                t = threads.setdefault(tid, {})
                t.update(pid=pid, tid=tid, comm=comm, ppid=int(stat_field(rest, PPID)),
                         pgrp=int(stat_field(rest, PGRP)),
                         kthread=bool(flags & PF_KTHREAD))
            except (IndexError, ValueError):
                pass
            continue
        m = SCHEDSTAT.match(line)
        if m:
            t = threads.setdefault(int(m[2]), {})
            t.update(run_ns=int(m[3]), wait_ns=int(m[4]))
    return [(at, {tid: t for tid, t in ts.items() if 'comm' in t and 'run_ns' in t})
            for at, ts in snapshots]


def parse_runs(log):
    """The runs of a pass log in order: scenario, expert, rep, start (the load's start), end,
    and the oracle hints' {pgid: class} (empty for experts without a layer plan)."""
    runs = []
    current = None
    for line in log.splitlines():
        m = RUN_UNDER.match(line)
        if m:
            current = {'scenario': m[2], 'expert': m[3], 'rep': int(m[4]), 'start': None,
                       'end': None, 'hints': {}}
            runs.append(current)
            continue
        if current is None:
            continue
        m = LOAD_START.match(line)
        if m and current['start'] is None:
            current['start'] = unix_of(m[1])
            continue
        m = HINTS.match(line)
        if m:
            current['hints'] = {int(g): c for g, c in HINT_GROUP.findall(m[2])}
            continue
        m = RUN_END.match(line)
        if m and m[3] == current['expert'] and current['end'] is None:
            current['end'] = unix_of(m[1])
    return [r for r in runs if r['start'] is not None and r['end'] is not None]


def stand_in_hints(runs):
    """Each run's hints, those of the nearest run that has some when it has none (the runner's
    group is constant; a load's group is its own run's and stays unknown)."""
    with_hints = [i for i, r in enumerate(runs) if r['hints']]
    out = []
    for i, r in enumerate(runs):
        if r['hints'] or not with_hints:
            out.append(dict(r['hints']))
            continue
        nearest = min(with_hints, key=lambda j: abs(j - i))
        out.append(dict(runs[nearest]['hints']))
    return out


def role_of(thread, hints, own_hints):
    """A thread's role: its class when its group is hinted, else kthread, scheduler, or
    unhinted. `own_hints`: whether the run's experts use the hints (else the class is only
    the group the thread would be in)."""
    if thread['pgrp'] in hints:
        return hints[thread['pgrp']] if own_hints else hints[thread['pgrp']] + ' (group)'
    if thread['kthread'] or thread['pid'] == 2 or thread['ppid'] == 2:
        return 'kthread'
    if thread['comm'].startswith('scx_'):
        return 'scheduler'
    return 'unhinted'


def run_usage(snapshots, start, end, hints, own_hints=True):
    """Between the first and the last census in [start, end]: per role and per (role, comm),
    CPU seconds and seconds waiting for a CPU; and the seconds covered."""
    inside = [(t, ts) for t, ts in snapshots if start <= t <= end]
    if len(inside) < 2:
        return None
    first = inside[0][1]
    last_seen = {}
    for _, ts in inside[1:]:
        for tid, t in ts.items():
            last_seen[tid] = t
    roles, comms = {}, {}
    for tid, t in last_seen.items():
        before = first.get(tid)
        if before is not None and before['pid'] != t['pid']:
            before = None  # a reused tid
        run = (t['run_ns'] - (before['run_ns'] if before else 0)) / 1e9
        wait = (t['wait_ns'] - (before['wait_ns'] if before else 0)) / 1e9
        if run <= 0 and wait <= 0:
            continue
        role = role_of(t, hints, own_hints)
        for bucket, key in ((roles, role), (comms, (role, t['comm']))):
            b = bucket.setdefault(key, {'cpu_s': 0.0, 'wait_s': 0.0, 'threads': 0})
            b['cpu_s'] += max(run, 0.0)
            b['wait_s'] += max(wait, 0.0)
            b['threads'] += 1
    return {'seconds': inside[-1][0] - inside[0][0], 'roles': roles, 'comms': comms}


def census(snapshots, runs, top=8):
    """Per run: its usage (run_usage) with per-role CPU shares of the window (CPUs busy) and
    the `top` threads by CPU time outside the hinted classes."""
    rows = []
    for run, hints in zip(runs, stand_in_hints(runs)):
        usage = run_usage(snapshots, run['start'], run['end'], hints, bool(run['hints']))
        if usage is None:
            continue
        secs = usage['seconds']
        roles = {role: {'cpus': round(b['cpu_s'] / secs, 3), 'wait_cpus': round(b['wait_s'] / secs, 3),
                        'threads': b['threads']}
                 for role, b in sorted(usage['roles'].items())}
        outside = sorted(((role, comm, b) for (role, comm), b in usage['comms'].items()
                          if role in ('kthread', 'scheduler', 'unhinted')),
                         key=lambda x: -x[2]['cpu_s'])[:top]
        rows.append({'scenario': run['scenario'], 'expert': run['expert'], 'rep': run['rep'],
                     'seconds': round(secs, 1), 'roles': roles,
                     'top_outside': [{'role': role, 'comm': comm,
                                      'cpus': round(b['cpu_s'] / secs, 3),
                                      'wait_cpus': round(b['wait_s'] / secs, 3),
                                      'threads': b['threads']} for role, comm, b in outside]})
    return rows


def format_rows(rows):
    lines = []
    for r in rows:
        lines.append(f"{r['scenario']} {r['expert']} rep {r['rep']} ({r['seconds']} s):")
        for role, b in r['roles'].items():
            lines.append(f"  {role:28s} {b['cpus']:6.3f} CPUs  waiting {b['wait_cpus']:6.3f}"
                         f"  {b['threads']} threads")
        for t in r['top_outside']:
            lines.append(f"    {t['role']:10s} {t['comm']:20s} {t['cpus']:6.3f} CPUs"
                         f"  waiting {t['wait_cpus']:6.3f}  {t['threads']} threads")
    return '\n'.join(lines)


def cost_run_inputs(out_dir, name, switch):
    """The paths of a cost-run.sh folder's `name` (recorded with `switch`=1) and of the pass log
    the runs are found in (hinted.log, else the VM's console.log); exits with what is missing."""
    path = os.path.join(out_dir, name)
    if not os.path.exists(path):
        sys.exit(f'{path}: missing (run cost-run.sh with {switch}=1 and unpack cost.tar)')
    logs = [os.path.join(out_dir, log) for log in ('hinted.log', 'console.log')]
    log = next((p for p in logs if os.path.exists(p)), None)
    if log is None:
        sys.exit(f'{out_dir}: no hinted.log or console.log to find the runs in')
    return path, log


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('out_dir', help='a cost-run.sh folder with census.txt')
    parser.add_argument('--top', type=int, default=8, help='threads listed per run (default 8)')
    parser.add_argument('--json', help='also write the rows to this file')
    args = parser.parse_args(argv)
    census_path, log_path = cost_run_inputs(args.out_dir, 'census.txt', 'CENSUS')
    rows = census(parse_census(read_text(census_path)), parse_runs(read_text(log_path)), args.top)
    if not rows:
        sys.exit(f'{args.out_dir}: no run has two censuses inside its window')
    print_and_dump(format_rows(rows), rows, args.json)
    return 0


if __name__ == '__main__':
    sys.exit(main())
