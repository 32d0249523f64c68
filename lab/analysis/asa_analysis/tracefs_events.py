"""The tracefs event lines the trace scripts of the results folders read (`trace-patch.diff` of
2026-11-26-qemu-icount-vcpu-starvation/ records them), in one place.

SW: sched_switch, groups (1) current comm, (2) its pid, (3) CPU, (4) time s, (5) prev_comm,
(6) prev_pid, (7) prev_state, (8) next_comm, (9) next_pid. Comms may hold spaces and dashes
(`jbd2/asa0-8`), so they are matched lazily.
WK: sched_wakeup, groups (1)-(4) as above, (5) comm, (6) pid, (7) target_cpu.

A script in a dated folder imports it with the results folder on its path:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
"""
import re

SW = re.compile(r'\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): sched_switch: prev_comm=(.+?) '
                r'prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> next_comm=(.+?) next_pid=(\d+)')
WK = re.compile(r'\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): sched_wakeup: comm=(.+?) pid=(\d+) '
                r'prio=\d+ target_cpu=(\d+)')
