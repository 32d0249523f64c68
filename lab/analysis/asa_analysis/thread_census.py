"""What each thread of ASA and its experts cost over a window of an idle machine (issue 40).

Reads the `census` file of `lab/experiments/thread-census-guest.sh`: lines
`LABEL PID TID COMM UTIME STIME VOLUNTARY INVOLUNTARY` (CPU in clock ticks, comm with spaces as
`_`), one snapshot per label, and `memavail_kib PHASE KIB` lines. Snapshots pair by name:
`pin0` → `pin1`, `run0` → `run1` (any `NAME0` with its `NAME1`). For each pair, every thread's
CPU time, wake-ups (voluntary switches: it slept and was woken) and preemptions (involuntary
switches) over the window; a thread born inside the window counts from zero, one that ended
inside it is listed as gone (its last counts are lost with it).

Threads are named by role: a process's main thread `NAME (main)`, the others by their comm with
a trailing `-PID` dropped (`attach-gate-166` → `attach-gate`), so the same roles line up
between windows and boots.

    python -m asa_analysis.thread_census CENSUS [--hz 100] [--json out.json]
"""
import argparse
import re
import sys

from .common import print_and_dump, read_text

TRAILING_PID = re.compile(r'-\d+$')


def parse(text):
    """({label: {(pid, tid): thread}}, {phase: MemAvailable KiB}); a thread is a dict of pid,
    tid, comm, cpu_ticks (utime + stime), voluntary, involuntary."""
    snapshots, memavail = {}, {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[0] == 'memavail_kib':
            memavail[fields[1]] = int(fields[2])
            continue
        if len(fields) != 8:
            continue
        label, pid, tid, comm = fields[:4]
        try:
            utime, stime, voluntary, involuntary = (int(x) for x in fields[4:])
            key = (int(pid), int(tid))
        except ValueError:
            continue
        snapshots.setdefault(label, {})[key] = {
            'pid': key[0], 'tid': key[1], 'comm': comm, 'cpu_ticks': utime + stime,
            'voluntary': voluntary, 'involuntary': involuntary}
    return snapshots, memavail


def windows(snapshots):
    """[(name, start label, end label)] for every `NAME0` snapshot with a `NAME1`, in file order."""
    return [(label[:-1], label, label[:-1] + '1') for label in snapshots
            if label.endswith('0') and label[:-1] + '1' in snapshots]


def role(thread, process_comms):
    """The thread's role: `COMM (main)` for a process's main thread, else its comm without a
    trailing `-PID`, prefixed by its process's comm when they differ."""
    process = process_comms.get(thread['pid'], thread['comm'])
    if thread['pid'] == thread['tid']:
        return f'{thread["comm"]} (main)'
    name = TRAILING_PID.sub('', thread['comm'])
    return name if name == process or name.startswith(process) else f'{process}/{name}'


def diff(start, end):
    """Per role, over the window: cpu_ticks, wakeups, preempted, threads (how many), and the
    roles of threads that ended inside it (`gone`)."""
    process_comms = {t['pid']: t['comm'] for t in list(start.values()) + list(end.values())
                     if t['pid'] == t['tid']}
    roles = {}
    for key, after in end.items():
        before = start.get(key, {'cpu_ticks': 0, 'voluntary': 0, 'involuntary': 0})
        row = roles.setdefault(role(after, process_comms),
                               {'cpu_ticks': 0, 'wakeups': 0, 'preempted': 0, 'threads': 0})
        row['cpu_ticks'] += after['cpu_ticks'] - before['cpu_ticks']
        row['wakeups'] += after['voluntary'] - before['voluntary']
        row['preempted'] += after['involuntary'] - before['involuntary']
        row['threads'] += 1
    gone = sorted({role(t, process_comms) for key, t in start.items() if key not in end})
    return roles, gone


def census(text):
    """{'memavail_kib': {...}, 'windows': [{name, roles, total, gone}]} of a census file."""
    snapshots, memavail = parse(text)
    out = []
    for name, first, last in windows(snapshots):
        roles, gone = diff(snapshots[first], snapshots[last])
        total = {k: sum(r[k] for r in roles.values()) for k in ('cpu_ticks', 'wakeups', 'preempted')}
        out.append({'name': name, 'roles': roles, 'total': total, 'gone': gone})
    return {'memavail_kib': memavail, 'windows': out}


def render(data, hz):
    lines = []
    if data['memavail_kib']:
        lines.append('MemAvailable: ' + ', '.join(f'{phase} {kib / 1024:.0f} MiB'
                                                  for phase, kib in data['memavail_kib'].items()))
    for window in data['windows']:
        lines.append(f'\n== {window["name"]}')
        lines.append(f'  {"thread":<28} {"CPU s":>7} {"wake-ups":>9} {"preempted":>9}')
        ordered = sorted(window['roles'].items(), key=lambda kv: (-kv[1]['cpu_ticks'], kv[0]))
        for name, row in ordered + [('total', window['total'])]:
            if name != 'total' and not any(row[k] for k in ('cpu_ticks', 'wakeups', 'preempted')):
                continue
            count = f' ×{row["threads"]}' if row.get('threads', 1) > 1 else ''
            lines.append(f'  {name + count:<28} {row["cpu_ticks"] / hz:>7.2f} '
                         f'{row["wakeups"]:>9} {row["preempted"]:>9}')
        if window['gone']:
            lines.append('  ended inside the window: ' + ', '.join(window['gone']))
    return '\n'.join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('census', help='the guest script\'s census file')
    parser.add_argument('--hz', type=int, default=100, help='clock ticks a second (default 100)')
    parser.add_argument('--json', help='also write the per-window data here')
    args = parser.parse_args(argv)
    data = census(read_text(args.census))
    if not data['windows']:
        sys.exit(f'{args.census}: no NAME0/NAME1 snapshot pair')
    print_and_dump(render(data, args.hz), data, args.json)


if __name__ == '__main__':
    main()
