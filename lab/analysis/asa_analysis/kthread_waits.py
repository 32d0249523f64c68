"""Which kernel threads waited for a CPU during a load, from asa-gru-compare's schedstat snapshots.

Reads the guest's ss-SCHED-ROUND-LOAD-0.txt and -1.txt, which asa-gru-compare writes around every
load: every thread's /proc stat and schedstat (run ns, wait ns, time slices; see procfs). For
each pair (all of them in OUT_DIR, or the named ones), the kernel threads (PF_KTHREAD) that ran
between the two snapshots, by their total wait. The kernel adds a wait when the thread starts
to run, so a wait that began before the first snapshot is counted whole.

Prints per pair `NAME: kernel threads by total wait` and the --top (8) threads: total wait and
run (ms), time slices and the mean wait per slice (µs). --match keeps the threads whose name
starts with NAME (e.g. jbd2) and prints one line per pair instead (as
results/2026-11-27-gru-kthread-preempt-ab/jbd2-waits.txt).

Usage (from lab/analysis, or with PYTHONPATH=lab/analysis):
    python -m asa_analysis.kthread_waits [--top N] [--match NAME] OUT_DIR [SCHED-ROUND-LOAD ...]
"""
import argparse
import glob
import os

from .common import read_text
from .procfs import FLAGS, SCHEDSTAT, STAT, stat_field

PF_KTHREAD = 0x00200000


def snapshot(text):
    """{tid: (comm, flags, (run ns, wait ns, slices))} of the threads with both lines."""
    stat, sched = {}, {}
    for line in text.split('\n'):
        m = STAT.match(line)
        if m:
            stat[int(m.group(2))] = (m.group(3), int(stat_field(m.group(4), FLAGS)))
            continue
        m = SCHEDSTAT.match(line)
        if m:
            sched[int(m.group(2))] = tuple(int(x) for x in m.group(3, 4, 5))
    return {tid: stat[tid] + (sched[tid],) for tid in stat if tid in sched}


def kthread_waits(before, after):
    """[(wait ns, run ns, slices, comm)] of kernel threads that ran between the snapshots,
    longest wait first."""
    rows = []
    for tid, (comm, flags, now) in after.items():
        if not flags & PF_KTHREAD or tid not in before:
            continue
        run, wait, slices = (a - b for a, b in zip(now, before[tid][2]))
        if slices:
            rows.append((wait, run, slices, comm))
    return sorted(rows, reverse=True)


def snapshot_names(out_dir):
    """SCHED-ROUND-LOAD of every ss-*-0.txt in out_dir, sorted."""
    return sorted(os.path.basename(p)[3:-6] for p in glob.glob(os.path.join(out_dir, 'ss-*-0.txt')))


def format_match(name, rows, prefix):
    """The one line of --match: the threads whose name starts with prefix, or '-'."""
    text = ', '.join(f'{comm} wait {wait / 1e6:.1f} ms run {run / 1e6:.1f} ms '
                     f'{slices} slices mean {wait / slices / 1e3:.0f} µs'
                     for wait, run, slices, comm in rows if comm.startswith(prefix))
    return [f'{name:28s} {text or "-"}']


def format_top(name, rows, top):
    """The lines of one pair without --match: its `top` longest-waiting kernel threads."""
    out = [f'{name}: kernel threads by total wait']
    for wait, run, slices, comm in rows[:top]:
        out.append(f'    {comm:28s} wait {wait / 1e6:8.1f} ms  run {run / 1e6:7.1f} ms  '
                   f'slices {slices:6d}  mean {wait / slices / 1e3:8.0f} µs')
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--top', type=int, default=8)
    parser.add_argument('--match')
    parser.add_argument('out_dir')
    parser.add_argument('names', nargs='*', help='SCHED-ROUND-LOAD, e.g. gru-1-mixed')
    args = parser.parse_args(argv)
    for name in args.names or snapshot_names(args.out_dir):
        before, after = (snapshot(read_text(os.path.join(args.out_dir, f'ss-{name}-{i}.txt')))
                         for i in (0, 1))
        rows = kthread_waits(before, after)
        if args.match:
            lines = format_match(name, rows, args.match)
        else:
            lines = format_top(name, rows, args.top)
        print('\n'.join(lines))


if __name__ == '__main__':
    main()
