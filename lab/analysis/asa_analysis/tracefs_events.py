"""The tracefs event lines the trace modules read, in one place.

A trace is the text of /sys/kernel/tracing/trace with `sched_switch` (and its stack trace when
a task blocks in D state: trigger `stacktrace if prev_state == 2`), `sched_wakeup` and
`irq_vectors` events (`local_timer_entry`, IPIs) enabled; asa-gru-compare's `--profile-scheduler`
shell functions were patched to write it as prof-SCHED-ROUND-LOAD.txt.script for
results/2026-11-26-qemu72-icount-starves-a-vcpu/ and
results/2026-11-27-lab-vcpu0-takes-interrupts-first/.

SW: sched_switch, groups (1) current comm, (2) its pid, (3) CPU, (4) time s, (5) prev_comm,
(6) prev_pid, (7) prev_state, (8) next_comm, (9) next_pid. Comms may hold spaces and dashes
(`jbd2/asa0-8`), so they are matched lazily.
WK: sched_wakeup, groups (1)-(4) as above, (5) comm, (6) pid, (7) target_cpu.
EVENT: any event line (searched, not matched): (1) CPU, (2) time s, (3) the event name with
its colon (`sched_switch:`, `local_timer_entry:`, `<stack` for a stack trace's first line).
A stack trace's frames follow its line, one per line, as ` => function`.
"""
import re

SW = re.compile(r'\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): sched_switch: prev_comm=(.+?) '
                r'prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> next_comm=(.+?) next_pid=(\d+)')
WK = re.compile(r'\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): sched_wakeup: comm=(.+?) pid=(\d+) '
                r'prio=\d+ target_cpu=(\d+)')
EVENT = re.compile(r'\[(\d+)\]\s+\S+\s+([\d.]+): (\S+)')
FRAME = ' => '


def stack_after(lines, i):
    """The frames of the stack trace that follows lines[i] (a `<stack trace>` line right after
    it, then ` => function` lines), innermost first; None when no stack trace follows."""
    if i + 1 >= len(lines) or '<stack trace>' not in lines[i + 1]:
        return None
    frames = []
    for line in lines[i + 2:]:
        if not line.startswith(FRAME):
            break
        frames.append(line[len(FRAME):])
    return frames
