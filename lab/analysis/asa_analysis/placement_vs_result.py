#!/usr/bin/env python3
"""Each mixed-load round's result next to which CPU carried its I/O threads.

Usage: placement_vs_result.py RESULTS_FOLDER...   (folders of vm_compare --thread-samples runs
with samples.tar.xz and runs.json, e.g. ../2026-11-27-vm-compare-qemu10-mixed-wchan)

Per round: the mean number of I/O threads on vCPU 1 (of 4; ../thread_samples.py), the CPU part
(sysbench cpu events/s) and the I/O part (sysbench fileio I/Os/s), sorted by scheduler and
that number.
"""
import collections
import glob
import json
import os
import sys
import tarfile
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
import thread_samples  # noqa: E402


def rounds(folder):
    results = collections.defaultdict(dict)
    for run in json.load(open(os.path.join(folder, 'runs.json')))['runs']:
        if run['row'] in ('mixed-cpu', 'mixed-io') and run.get('sysbench'):
            results[(run['scheduler'], run['round'])][run['row']] = run['sysbench']['events_per_s']
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(os.path.join(folder, 'samples.tar.xz')) as tar:
            tar.extractall(tmp)
        for path in glob.glob(os.path.join(tmp, '**', 'thr-*-mixed.txt'), recursive=True):
            m = thread_samples.NAME.search(os.path.basename(path))
            if not m or m.group(2) == 'warmup':
                continue
            key = (m.group(1), int(m.group(2)))
            samples, kinds, _ = thread_samples.parse(path)
            ivs = thread_samples.intervals(samples, kinds)
            if ivs and len(results.get(key, {})) == 2:
                on_cpu1 = thread_samples.io_threads_by_cpu(ivs)[1]
                yield key + (on_cpu1, results[key]['mixed-cpu'], results[key]['mixed-io'])


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    rows = []
    for folder in sys.argv[1:]:
        name = os.path.basename(folder.rstrip('/')).replace('2026-11-27-vm-compare-qemu10-', '')
        rows += [(name,) + r for r in rounds(folder)]
    print(f'{"run":22s} {"scheduler":16s} round  I/O threads on cpu1  CPU part  I/O part')
    for name, sched, rnd, on1, cpu, io in sorted(rows, key=lambda r: (r[1], r[3])):
        print(f'{name:22s} {sched:16s} {rnd:5d}  {on1:19.2f}  {cpu:8.1f}  {io:8.0f}')


if __name__ == '__main__':
    main()
