"""Synthetic input lines for the tests: tracefs events, /proc sample lines, the agent's class
lines and live.json cells."""

MS = 1_000_000


def switch(cpu, t, prev_comm, prev_pid, prev_state, next_comm, next_pid):
    """A sched_switch line, as the trace shows it, from the task switched out."""
    return (f'{prev_comm:>16}-{prev_pid:<6} [{cpu:03d}] d..2. {t:12.6f}: sched_switch: '
            f'prev_comm={prev_comm} prev_pid={prev_pid} prev_prio=120 prev_state={prev_state} '
            f'==> next_comm={next_comm} next_pid={next_pid} next_prio=120')


def wakeup(cpu, t, comm, pid, target_cpu, waker='sh', waker_pid=1):
    """A sched_wakeup line."""
    return (f'{waker:>16}-{waker_pid:<6} [{cpu:03d}] d..5. {t:12.6f}: sched_wakeup: '
            f'comm={comm} pid={pid} prio=120 target_cpu={target_cpu:03d}')


def timer(cpu, t, comm='sysbench', pid=1):
    """A local_timer_entry line."""
    return f'{comm:>16}-{pid:<6} [{cpu:03d}] d.h.. {t:12.6f}: local_timer_entry: vector=236'


def stack(cpu, t, frames, comm='sysbench', pid=1):
    """A stack trace: its `<stack trace>` line and one ` => frame` line per frame."""
    return ([f'{comm:>16}-{pid:<6} [{cpu:03d}] d..2. {t:12.6f}: <stack trace>']
            + [f' => {f}' for f in frames])


def stat(pid, tid, comm, state='R', cpu=0, flags=0):
    """A /proc/PID/task/TID/stat line as the samplers print it (fields 3..52)."""
    fields = ['0'] * 50
    fields[0] = state          # field 3
    fields[9 - 3] = str(flags)
    fields[39 - 3] = str(cpu)
    return f'/proc/{pid}/task/{tid}/stat:{tid} ({comm}) ' + ' '.join(fields)


def schedstat(pid, tid, run_ns, wait_ns, slices):
    """A /proc/PID/task/TID/schedstat line."""
    return f'/proc/{pid}/task/{tid}/schedstat:{run_ns} {wait_ns} {slices}'


def wchan(pid, tid, function):
    """A /proc/PID/task/TID/wchan line."""
    return f'/proc/{pid}/task/{tid}/wchan:{function}'


# pid 100: sysbench cpu (tids 101, 102 its workers); pid 200: sysbench fileio (201..204);
# pid 300: jbd2/asa0-8. Main threads (tid == pid) only wait and are left out.
IO_TIDS = (201, 202, 203, 204)


def sample(t, io_cpus, io_states=('R',) * 4, k=1, extra=()):
    """One sample at time t; every counter grows with k so intervals see deltas."""
    lines = [f'@ {t}', 'cmd 100 sysbench cpu --threads=2 run',
             'cmd 200 sysbench fileio --threads=4 run',
             stat(100, 100, 'sysbench'), schedstat(100, 100, 5, 5, 5)]
    for tid, cpu in zip((101, 102), (0, 1)):
        lines += [stat(100, tid, 'sysbench', 'R', cpu), schedstat(100, tid, 400 * MS * k, 100 * MS * k, 10 * k)]
    for tid, cpu, state in zip(IO_TIDS, io_cpus, io_states):
        lines += [stat(200, tid, 'sysbench', state, cpu),
                  schedstat(200, tid, 100 * MS * k, 50 * MS * k, 100 * k)]
    lines += [stat(300, 300, 'jbd2/asa0-8', 'S', 0), schedstat(300, 300, 10 * MS * k, 2 * MS * k, 4 * k)]
    return lines + list(extra)


def text(*samples):
    """The text of a file of these samples."""
    return '\n'.join(line for s in samples for line in s)


def three_samples():
    """A thread-sample file's text: three samples 0.5 s and 1 s apart."""
    return text(sample(0.0, (0, 0, 0, 0), k=1),
                sample(0.5, (0, 0, 0, 1), ('R', 'R', 'D', 'S'), k=2,
                       extra=[wchan(200, 203, '__iomap_dio_rw'), wchan(200, 204, '0')]),
                sample(1.5, (0, 0, 1, 1), k=3))


def app_class(pgid, cls, seconds, source='Recognised', support=0.6, cgroup=1, t='05:49:09.197'):
    """An agent log line giving application `pgid` its class (agent/src/daemon/apps.rs)."""
    return (f'[2026-11-29T{t}Z INFO  asa_agent::daemon::apps] application pgid={pgid} '
            f'cgroup={cgroup} leader={pgid}: class {cls} ({source}, support {support:.2}), '
            f'{seconds:.1f} s after it appeared')


def live_cell(expert, mean, spread=0.0, runs=2):
    """A cell of a live.json scenario (mapping/src/calibrate/mod.rs CellStats)."""
    return {'expert': expert, 'mean': mean, 'spread': spread, 'runs': runs}


def live_scenario(name, cells, phased=False):
    """A live.json scenario from {expert: (mean, spread, runs)}."""
    return {'scenario': name, 'phased': phased,
            'cells': {e: live_cell(e, *c) for e, c in cells.items()}}
