"""Where the mixed load's threads run, from asa-gru-compare --thread-samples.

Reads the guest's thr-SCHED-ROUND-LOAD.txt files (every 0.5 s during a load: `@ TIME`, each
sysbench process's command line as `cmd PID ARGS...`, every thread's /proc stat, schedstat and
wchan; see procfs). The worker threads of `sysbench cpu` are the hogs, those of `sysbench
fileio` the I/O threads (each process's main thread only waits for them and is left out), and
the ext4 journal threads (jbd2) are followed too. For each interval between two samples: how
many I/O threads last ran on each CPU (the placement, e.g. 3+1: three on one CPU, one on the
other, largest first), and what each part ran and waited in it.

Prints per file one line: the I/O threads' and the hogs' run time (ms per s of wall time, both
CPUs together: 2000 is everything), how many I/O threads were on each CPU (mean over the
intervals: under instruction counting vCPU 1 is the slow one for I/O, see
results/2026-11-27-lab-vcpu0-takes-interrupts-first/), the I/O threads' mean wait per time
slice (µs) and their states at the samples (R running or runnable, D in I/O, S asleep), the
jbd2 threads' run time and wait, and the share of intervals in each placement with each part's
run time in them. With samples that have wchan lines, a second line counts where the I/O
threads were when not running, as state:wchan (D:jbd2_log_wait_commit: fsync waiting for the
journal). --intervals adds every interval: its per-CPU counts of I/O threads and hogs (by their
CPU at its end), the I/O threads' states, and each part's run time and waits.

Usage (from lab/analysis, or with PYTHONPATH=lab/analysis):
    python -m asa_analysis.thread_samples [--intervals] OUT_DIR_OR_FILES...
"""
import argparse
import collections
import glob
import os
import re

from .common import read_text
from .procfs import PROCESSOR, SCHEDSTAT, STAT, STATE, WCHAN, stat_field

NAME = re.compile(r'thr-(.+)-(\d+|warmup)-(\w+)\.txt$')


def parse(text):
    """A sample file's text: samples [(time, {tid: (pid, cpu, run_ns, wait_ns, slices,
    state)})], {pid: 'cpu'|'io'|'jbd2'}, and how often a worker thread was seen not running,
    by (pid, state, wchan)."""
    samples, kinds = [], {}
    waits = collections.Counter()
    cur = None
    stat = {}
    for line in text.split('\n'):
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
                rest = m.group(4)
                stat[int(m.group(2))] = (int(stat_field(rest, PROCESSOR)), stat_field(rest, STATE))
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
    """The I/O threads' placement over the CPUs, largest count first, e.g. '3+1'."""
    counts = sorted((per_cpu.get(c, [0, 0])[0] for c in range(ncpu)), reverse=True)
    return '+'.join(map(str, counts))


def io_threads_by_cpu(ivs, ncpu=2):
    """The mean number of I/O threads whose last CPU was each CPU, weighted by interval: which
    CPU carries the I/O matters in the lab under instruction counting, where vCPU 0's timer
    interrupts come on time and vCPU 1's late
    (results/2026-11-27-lab-vcpu0-takes-interrupts-first/)."""
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


def file_label(path):
    """'SCHED rROUND LOAD' of a thr-SCHED-ROUND-LOAD.txt path, else the path."""
    m = NAME.search(os.path.basename(path))
    return f'{m.group(1)} r{m.group(2)} {m.group(3)}' if m else path


def summarize(label, samples, kinds, not_running, show_intervals=False):
    """The lines thread_samples prints for one file's parse()."""
    ivs = intervals(samples, kinds)
    if not ivs:
        return [f'{label}: no intervals with I/O threads']
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
    out = [f'{label:20s} io {per_s(ivs, "io"):4.0f} hog {per_s(ivs, "cpu"):4.0f} ms/s, io threads '
           f'on cpu0/cpu1 {by_cpu}, io wait '
           f'{wait_per_slice(ivs, "io"):5.0f} µs/slice, io states % {state_text}{jbd2} | '
           + ' | '.join(parts)]
    waits = collections.Counter()
    for (pid, state, wchan), n in not_running.items():
        if kinds.get(pid) == 'io':
            waits[f'{state}:{wchan}'] += n
    if waits:
        out.append('    I/O threads not running, by state:wchan: '
                   + ', '.join(f'{k} {v}' for k, v in waits.most_common(6)))
    if show_intervals:
        for iv in ivs:
            cpus = ' '.join(f'cpu{c}:{v[0]}io/{v[1]}hog' for c, v in sorted(iv['per_cpu'].items()))
            st = ''.join(k * v for k, v in sorted(iv['states'].items()))
            out.append(f'    {iv["dt"]:4.2f}s {cpus:28s} io {st:4s} {per_s([iv], "io"):4.0f} '
                       f'hog {per_s([iv], "cpu"):4.0f} ms/s io wait '
                       f'{wait_per_slice([iv], "io"):5.0f} '
                       f'jbd2 run {per_s([iv], "jbd2"):3.0f} wait {per_s([iv], "jbd2", 1):3.0f} ms/s')
    return out


def sample_files(args):
    """The thr-*.txt files of each folder (sorted) and each file, in argument order."""
    files = []
    for a in args:
        files += sorted(glob.glob(os.path.join(a, 'thr-*.txt'))) if os.path.isdir(a) else [a]
    return files


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--intervals', action='store_true', help='also print every interval')
    parser.add_argument('inputs', nargs='+', metavar='OUT_DIR_OR_FILE',
                        help='folders with thr-*.txt, or such files')
    args = parser.parse_args(argv)
    for path in sample_files(args.inputs):
        lines = summarize(file_label(path), *parse(read_text(path)), args.intervals)
        print('\n'.join(lines))


if __name__ == '__main__':
    main()
