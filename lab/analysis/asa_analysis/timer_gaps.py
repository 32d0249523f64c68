"""Stretches without events on a CPU in a tracefs trace: where a vCPU stopped.

Reads one tracefs trace (the text of /sys/kernel/tracing/trace with sched_switch, sched_wakeup
and irq_vectors events on, as kept in results/2026-11-26-qemu72-icount-starves-a-vcpu/; see
tracefs_events). Per CPU it finds the gaps longer than 20 ms between two consecutive events
other than local_timer_entry ("sched-event gaps"), and between two local_timer_entry events
("timer gaps"), each with the task that CPU last switched to. Stack-trace frames are not events.

Prints one line: the trace's span, the count and sum of each kind of gap, the timer interrupts
per CPU and second; then the five longest gaps of each kind as (gap s, CPU, time it began s,
task running then).

Usage (from lab/analysis, or with PYTHONPATH=lab/analysis):
    python -m asa_analysis.timer_gaps TRACE
"""
import argparse
import collections
import sys

from .common import read_text
from .tracefs_events import EVENT, FRAME, SW

TIMER = 'local_timer_entry:'
GAP_S = 0.02


def find_gaps(text, min_gap_s=GAP_S):
    """The trace's gaps: a dict with span_s (first to last event), sched_gaps and timer_gaps
    (lists of (gap s rounded to ms, CPU, time the gap began, task running then or None),
    longest first), and timer_ticks {CPU: local_timer_entry events}; None without events."""
    last_event, last_timer, current = {}, {}, {}
    sched_gaps, timer_gaps = [], []
    ticks = collections.Counter()
    first = last = None
    for line in text.split('\n'):
        if line.startswith(FRAME):
            continue
        m = EVENT.search(line)
        if not m:
            continue
        cpu, t, event = int(m.group(1)), float(m.group(2)), m.group(3)
        if first is None:
            first = t
        last = t
        if event == TIMER:
            ticks[cpu] += 1
            if cpu in last_timer and t - last_timer[cpu] > min_gap_s:
                timer_gaps.append((round(t - last_timer[cpu], 3), cpu, last_timer[cpu],
                                   current.get(cpu)))
            last_timer[cpu] = t
            continue
        if cpu in last_event and t - last_event[cpu] > min_gap_s:
            sched_gaps.append((round(t - last_event[cpu], 3), cpu, last_event[cpu],
                               current.get(cpu)))
        last_event[cpu] = t
        switch = SW.match(line) if event == 'sched_switch:' else None
        if switch:
            current[cpu] = switch.group(8)
    if first is None:
        return None
    return {'span_s': last - first, 'sched_gaps': sorted(sched_gaps, reverse=True),
            'timer_gaps': sorted(timer_gaps, reverse=True), 'timer_ticks': dict(ticks)}


def format_gaps(gaps, top=5):
    """The three lines timer_gaps prints."""
    span = gaps['span_s']
    rates = {cpu: round(n / span) if span else 0 for cpu, n in gaps['timer_ticks'].items()}
    sched, timer = gaps['sched_gaps'], gaps['timer_gaps']
    return [
        'span %.1f s; sched-event gaps>20ms: %d, sum %.2f s; timer ticks/CPU/s %s; '
        'timer gaps>20ms: %d sum %.2f s' % (span, len(sched), sum(g[0] for g in sched), rates,
                                            len(timer), sum(g[0] for g in timer)),
        f' top sched gaps {sched[:top]}',
        f' top timer gaps {timer[:top]}',
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0])
    parser.add_argument('trace', help='a tracefs trace (text)')
    args = parser.parse_args(argv)
    gaps = find_gaps(read_text(args.trace))
    if gaps is None:
        sys.exit(f'{args.trace}: no trace events')
    print('\n'.join(format_gaps(gaps)))


if __name__ == '__main__':
    main()
