"""Each mixed-load round's result next to which CPU carried its I/O threads.

Reads folders of asa-gru-compare --thread-samples runs: runs.json (the mixed-cpu and mixed-io rows'
sysbench events/s) and the guest's thr-SCHED-ROUND-mixed.txt samples, packed in samples.tar.xz
or raw.tar.xz, or else lying in the folder (any depth). Per round: the mean number of I/O threads
on vCPU 1 (of 4; from asa_analysis.thread_samples), the CPU part (sysbench cpu events/s) and
the I/O part (sysbench fileio I/Os/s). See results/2026-11-27-lab-vcpu0-takes-interrupts-first/
(placement-vs-result.txt).

Prints a header and one line per round: the folder (without its date), scheduler, round, I/O
threads on vCPU 1, CPU part, I/O part; sorted by scheduler, then that number.

Usage (from lab/analysis, or with PYTHONPATH=lab/analysis):
    python -m asa_analysis.placement_vs_result RESULTS_FOLDER...
"""
import argparse
import collections
import glob
import os
import re
import tarfile

from . import thread_samples
from .common import read_json, read_text, runs_of

ROWS = ('mixed-cpu', 'mixed-io')
ARCHIVES = ('samples.tar.xz', 'raw.tar.xz')
SAMPLES = re.compile(r'thr-.*-mixed\.txt$')


def round_results(runs):
    """{(scheduler, round): {'mixed-cpu': events/s, 'mixed-io': events/s}} of a runs.json's
    runs (rows without sysbench results left out)."""
    results = collections.defaultdict(dict)
    for run in runs:
        if run['row'] in ROWS and run.get('sysbench'):
            results[(run['scheduler'], run['round'])][run['row']] = run['sysbench']['events_per_s']
    return dict(results)


def io_threads_on_cpu1(text):
    """Mean number of I/O threads on vCPU 1 in one sample file's text; None without intervals."""
    samples, kinds, _ = thread_samples.parse(text)
    ivs = thread_samples.intervals(samples, kinds)
    return thread_samples.io_threads_by_cpu(ivs)[1] if ivs else None


def join(results, sample_texts):
    """[(scheduler, round, I/O threads on vCPU 1, CPU part, I/O part)] of the rounds that have
    both parts and samples; sample_texts: [(file name, text)] (warm-up samples skipped)."""
    rows = []
    for name, text in sample_texts:
        m = thread_samples.NAME.search(name)
        if not m or m.group(2) == 'warmup':
            continue
        key = (m.group(1), int(m.group(2)))
        if len(results.get(key, {})) != len(ROWS):
            continue
        on_cpu1 = io_threads_on_cpu1(text)
        if on_cpu1 is not None:
            rows.append(key + (on_cpu1,) + tuple(results[key][r] for r in ROWS))
    return rows


def sample_texts(folder):
    """[(file name, text)] of the folder's thr-*-mixed.txt: those in its archives, or, when it
    has none, those lying in it."""
    archives = [p for p in (os.path.join(folder, a) for a in ARCHIVES) if os.path.exists(p)]
    if not archives:
        return [(os.path.basename(p), read_text(p)) for p in
                sorted(glob.glob(os.path.join(folder, '**', 'thr-*-mixed.txt'), recursive=True))]
    out = []
    for path in archives:
        with tarfile.open(path) as tar:
            for member in tar:
                if member.isfile() and SAMPLES.search(os.path.basename(member.name)):
                    data = tar.extractfile(member).read()
                    out.append((os.path.basename(member.name), data.decode(errors='replace')))
    return out


def folder_label(folder):
    """The folder's name without its date (and the old `vm-compare-qemu10-` prefix)."""
    return re.sub(r'^\d{4}-\d{2}-\d{2}-(vm-compare-qemu10-)?', '',
                  os.path.basename(folder.rstrip('/')))


def format_rows(rows):
    """The lines placement_vs_result prints; rows: (folder label, scheduler, round, on vCPU 1,
    CPU part, I/O part), sorted by scheduler and vCPU 1 count (then label and round)."""
    out = [f'{"run":22s} {"scheduler":16s} round  I/O threads on cpu1  CPU part  I/O part']
    for name, sched, rnd, on1, cpu, io in sorted(rows, key=lambda r: (r[1], r[3], r[0], r[2])):
        out.append(f'{name:22s} {sched:16s} {rnd:5d}  {on1:19.2f}  {cpu:8.1f}  {io:8.0f}')
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('folders', nargs='+', metavar='RESULTS_FOLDER',
                        help='runs.json and thread samples of one asa-gru-compare run')
    args = parser.parse_args(argv)
    rows = []
    for folder in args.folders:
        results = round_results(runs_of(read_json(os.path.join(folder, 'runs.json'))))
        rows += [(folder_label(folder),) + r for r in join(results, sample_texts(folder))]
    print('\n'.join(format_rows(rows)))


if __name__ == '__main__':
    main()
