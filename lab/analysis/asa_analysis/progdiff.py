"""What each struct_ops BPF program cost during a load, from bpftool dumps before and after it.

Reads a folder of `bpftool -j prog show` dumps (with kernel.bpf_stats_enabled=1) taken around
each load, named progs-TAG-before.json and progs-TAG-after.json (as the guest script of
results/2026-11-26-gru-io8-on-one-cpu/ wrote them). For every struct_ops program (a sched_ext
scheduler's ops), its run_cnt and run_time_ns after minus before.

Prints, per TAG (sorted): `== TAG`, then per program that ran: its name, calls per second, ns
per call and its run time in % of one CPU, and the total of all of them.

Usage (from lab/analysis, or with PYTHONPATH=lab/analysis):
    python -m asa_analysis.progdiff [--seconds 10] DIR
"""
import argparse
import glob
import os

from .common import read_json

BEFORE, AFTER = '-before.json', '-after.json'


def prog_diff(before, after):
    """[(name, calls, run ns)] of the struct_ops programs of `after` (bpftool's list of
    programs) that ran since `before`, in `after`'s order; programs are matched by id."""
    old = {p['id']: p for p in before}
    rows = []
    for p in after:
        if p.get('type') != 'struct_ops':
            continue
        b = old.get(p['id'], {})
        calls = p.get('run_cnt', 0) - b.get('run_cnt', 0)
        ns = p.get('run_time_ns', 0) - b.get('run_time_ns', 0)
        if calls:
            rows.append((p.get('name') or '?', calls, ns))
    return rows


def format_diff(tag, rows, seconds=10.0):
    """The lines progdiff prints for one TAG, over a load of `seconds`."""
    scale = 100 / (seconds * 1e9)  # ns -> % of one CPU
    out = [f'== {tag}']
    for name, calls, ns in rows:
        out.append(f'  {name:24} {calls / seconds:9.0f}/s {ns / calls:7.0f} ns/call '
                   f'{ns * scale:6.2f} %')
    out.append(f'  total {sum(ns for _, _, ns in rows) * scale:.2f} % of one CPU')
    return out


def dump_pairs(folder):
    """[(TAG, before path, after path)] of the folder's dumps, sorted by path."""
    pairs = []
    for before in sorted(glob.glob(os.path.join(folder, 'progs-*' + BEFORE))):
        tag = os.path.basename(before)[len('progs-'):-len(BEFORE)]
        pairs.append((tag, before, before[:-len(BEFORE)] + AFTER))
    return pairs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--seconds', type=float, default=10.0,
                        help='how long each load ran (default 10)')
    parser.add_argument('dir', help='folder of progs-TAG-before.json / -after.json')
    args = parser.parse_args(argv)
    for tag, before, after in dump_pairs(args.dir):
        rows = prog_diff(read_json(before), read_json(after))
        print('\n'.join(format_diff(tag, rows, args.seconds)))


if __name__ == '__main__':
    main()
