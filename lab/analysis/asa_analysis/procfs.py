"""The /proc lines of asa-gru-compare's guest samplers, in one place.

asa-gru-compare's `--thread-samples` sampler (thr-SCHED-ROUND-LOAD.txt) and its schedstat snapshots
(ss-SCHED-ROUND-LOAD-0.txt / -1.txt) print each thread's files prefixed with their path, as
grep does: `/proc/PID/task/TID/stat:...`, `.../schedstat:RUN_NS WAIT_NS SLICES`,
`.../wchan:FUNCTION`.

STAT: (1) pid, (2) tid, (3) comm, (4) the fields after `(comm) `, from field 3 (state) on.
SCHEDSTAT: (1) pid, (2) tid, (3) run ns, (4) wait ns, (5) time slices.
WCHAN: (1) pid, (2) tid, (3) the function the thread sleeps in ('' or 0 when none).
"""
import re

STAT = re.compile(r'/proc/(\d+)/task/(\d+)/stat:\d+ \((.*)\) (.*)$')
SCHEDSTAT = re.compile(r'/proc/(\d+)/task/(\d+)/schedstat:(\d+) (\d+) (\d+)$')
WCHAN = re.compile(r'/proc/(\d+)/task/(\d+)/wchan:(.*)$')

STATE, FLAGS, PROCESSOR = 3, 9, 39
"""Field numbers of /proc/PID/stat as proc(5) counts them (pid is 1, comm 2)."""


def stat_field(rest, field):
    """Field `field` (proc(5)'s numbering) of a stat line, from STAT's group 4."""
    return rest.split()[field - STATE]
