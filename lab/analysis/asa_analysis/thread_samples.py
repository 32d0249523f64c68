#!/usr/bin/env python3
"""Where the mixed load's threads run, from vm_compare --thread-samples.

Usage: thread_samples.py [--intervals] OUT_DIR_OR_FILES...

Reads the guest's thr-SCHED-ROUND-LOAD.txt files (every 0.5 s during a load: the time, each
sysbench process's command line, every thread's /proc stat and schedstat). The worker threads
of `sysbench cpu` are the hogs, those of `sysbench fileio` the I/O threads (each process's
main thread only waits for them and is left out). For each interval between two samples:
how many I/O threads last ran on each CPU (the placement, e.g. 3+1: three on one CPU, one on
the other, largest first), and what each part ran and waited in it.

Per file, one line: the I/O threads' and the hogs' run time (ms per s of wall time, both CPUs
together: 2000 is everything), how many I/O threads were on each CPU (mean over the
intervals: under instruction counting vCPU 1 is the slow one for I/O, see
2026-11-27-lab-vcpu-asymmetry/), the I/O threads' mean wait per time slice (µs) and their states
at the samples (R running or runnable, D in I/O, S asleep), the ext4 journal threads' (jbd2)
run time and wait, and the share of intervals in each placement with each part's run time in
them; with samples that have wchan lines (since run 103), a second line counts where the I/O
threads were when not running, as state:wchan (D:jbd2_log_wait_commit: fsync waiting for the
journal). --intervals adds every interval: its per-CPU counts of I/O threads and hogs (by their
CPU at its end), the I/O threads' states, and each part's run time and waits.
"""
import collections
import glob
import os
import re
import sys

NAME = re.compile(r'thr-(.+)-(\d+|warmup)-(\w+)\.txt$')
STAT = re.compile(r'/proc/(\d+)/task/(\d+)/stat:\d+ \((.*)\) (.*)$')
SCHEDSTAT = re.compile(r'/proc/(\d+)/task/(\d+)/schedstat:(\d+) (\d+) (\d+)$')
WCHAN = re.compile(r'/proc/(\d+)/task/(\d+)/wchan:(.*)$')


def parse(path):
    """Samples: [(time, {tid: (pid, cpu, run_ns, wait_ns, slices, state)})],
    {pid: 'cpu'|'io'|'jbd2'}, and how often a worker thread was seen not running, by
    (pid, state, wchan)."""
    samples, kinds = [], {}
    waits = collections.Counter()
    cur = None
    stat = {}
    for line in open(path, errors='replace'):
        line = line.rstrip('\n')
        if line.startswith('@ '):
            cur = {}
            stat = {}
            samples.append((float(line[2:]), cur))
        elif line.startswith('cmd '):
            _, pid, *cmd = line.split()
            if 'cpu' in cmd:
                kinds[int(pid)] = 'cpu'
            elif 'fileio' in cmd:
                kinds[int(pid)] = 'io'
        elif cur is not None:
            m = STAT.match(line)
            if m:
                # Fields after "(comm)" start at field 3 (state); processor is field 39.
                rest = m.group(4).split()
                stat[int(m.group(2))] = (int(rest[39 - 3]), rest[0])
                if m.group(3).startswith('jbd2'):
                    kinds[int(m.group(1))] = 'jbd2'
                continue
            m = WCHAN.match(line)
            if m:
                tid = int(m.group(2))
                if tid in stat and int(m.group(1)) != tid and stat[tid][1] != 'R':
                    waits[(int(m.group(1)), stat[tid][1], m.group(3) or '?')] += 1
                continue
            m = SCHEDSTAT.match(line)
            if m and int(m.group(2)) in stat:
                pid, tid = int(m.group(1)), int(m.group(2))
                if pid != tid or kinds.get(pid) == 'jbd2':
                    cpu, state = stat[tid]
                    cur[tid] = (pid, cpu, int(m.group(3)), int(m.group(4)),
                                int(m.group(5)), state)
    return samples, kinds, waits


def intervals(samples, kinds):
    """Per interval (a dict): dt (s), per_cpu {cpu: [I/O threads, hogs]} by their CPU at its
    end, the I/O threads' states then (R running or runnable, D in I/O, S asleep), and each
    part's run, wait (ns) and time slices in it."""
    out = []
    for (t0, a), (t1, b) in zip(samples, samples[1:]):
        iv = {'dt': t1 - t0, 'per_cpu': collections.defaultdict(lambda: [0, 0]),
              'states': collections.Counter()}
        for kind in ('io', 'cpu', 'jbd2'):
            iv[kind] = [0, 0, 0]
        for tid, (pid, cpu, run, wait, slices, state) in b.items():
            kind = kinds.get(pid)
            if tid not in a or kind is None:
                continue
            for k, d in enumerate((run - a[tid][2], wait - a[tid][3], slices - a[tid][4])):
                iv[kind][k] += d
            if kind == 'io':
                iv['per_cpu'][cpu][0] += 1
                iv['states'][state] += 1
            elif kind == 'cpu':
                iv['per_cpu'][cpu][1] += 1
        if iv['states']:
            out.append(iv)
    return out


def placement(per_cpu, ncpu=2):
    counts = sorted((per_cpu.get(c, [0, 0])[0] for c in range(ncpu)), reverse=True)
    return '+'.join(map(str, counts))


def io_threads_by_cpu(ivs, ncpu=2):
    """The mean number of I/O threads whose last CPU was each CPU, weighted by interval: which
    CPU carries the I/O matters in the lab under instruction counting, where vCPU 0's timer
    interrupts come on time and vCPU 1's late (../2026-11-27-lab-vcpu-asymmetry/)."""
    total = sum(iv['dt'] for iv in ivs)
    return [sum(iv['dt'] * iv['per_cpu'].get(c, [0, 0])[0] for iv in ivs) / total
            for c in range(ncpu)]


def per_s(ivs, kind, field=0):
    """A part's run (field 0) or wait (1) in ms per s of the intervals' wall time."""
    return sum(iv[kind][field] for iv in ivs) / 1e6 / sum(iv['dt'] for iv in ivs)


def wait_per_slice(ivs, kind):
    """A part's mean wait per time slice, µs."""
    slices = sum(iv[kind][2] for iv in ivs)
    return sum(iv[kind][1] for iv in ivs) / 1e3 / slices if slices else float('nan')


def summarize(path, show_intervals):
    samples, kinds, not_running = parse(path)
    ivs = intervals(samples, kinds)
    m = NAME.search(os.path.basename(path))
    label = f'{m.group(1)} r{m.group(2)} {m.group(3)}' if m else path
    if not ivs:
        print(f'{label}: no intervals with I/O threads')
        return
    groups = collections.defaultdict(list)
    for iv in ivs:
        groups[placement(iv['per_cpu'])].append(iv)
    total = sum(iv['dt'] for iv in ivs)
    parts = []
    for key in sorted(groups, reverse=True):
        g = groups[key]
        share = 100 * sum(iv['dt'] for iv in g) / total
        parts.append(f'{key} {share:3.0f}% (io {per_s(g, "io"):4.0f} hog {per_s(g, "cpu"):4.0f})')
    states = collections.Counter()
    for iv in ivs:
        states.update(iv['states'])
    total_states = sum(states.values())
    state_text = ' '.join(f'{k}{100 * v / total_states:.0f}' for k, v in sorted(states.items()))
    jbd2 = (f' jbd2 {per_s(ivs, "jbd2"):3.0f} ms/s wait {wait_per_slice(ivs, "jbd2"):5.0f} µs'
            if any(iv['jbd2'][2] for iv in ivs) else '')
    by_cpu = '/'.join(f'{n:.1f}' for n in io_threads_by_cpu(ivs))
    print(f'{label:20s} io {per_s(ivs, "io"):4.0f} hog {per_s(ivs, "cpu"):4.0f} ms/s, io threads '
          f'on cpu0/cpu1 {by_cpu}, io wait '
          f'{wait_per_slice(ivs, "io"):5.0f} µs/slice, io states % {state_text}{jbd2} | '
          + ' | '.join(parts))
    waits = collections.Counter()
    for (pid, state, wchan), n in not_running.items():
        if kinds.get(pid) == 'io':
            waits[f'{state}:{wchan}'] += n
    if waits:
        print('    I/O threads not running, by state:wchan: '
              + ', '.join(f'{k} {v}' for k, v in waits.most_common(6)))
    if show_intervals:
        for iv in ivs:
            cpus = ' '.join(f'cpu{c}:{v[0]}io/{v[1]}hog' for c, v in sorted(iv['per_cpu'].items()))
            st = ''.join(k * v for k, v in sorted(iv['states'].items()))
            print(f'    {iv["dt"]:4.2f}s {cpus:28s} io {st:4s} {per_s([iv], "io"):4.0f} '
                  f'hog {per_s([iv], "cpu"):4.0f} ms/s io wait {wait_per_slice([iv], "io"):5.0f} '
                  f'jbd2 run {per_s([iv], "jbd2"):3.0f} wait {per_s([iv], "jbd2", 1):3.0f} ms/s')


def main():
    args = [a for a in sys.argv[1:] if not a.startswith('--')]
    show = '--intervals' in sys.argv
    if not args:
        print(__doc__)
        sys.exit(2)
    files = []
    for a in args:
        files += sorted(glob.glob(os.path.join(a, 'thr-*.txt'))) if os.path.isdir(a) else [a]
    for f in files:
        summarize(f, show)


if __name__ == '__main__':
    main()
