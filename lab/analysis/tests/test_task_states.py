import pytest

from asa_analysis import task_states
from builders import stack, switch, wakeup

DIO = ['trace_event_raw_event_sched_switch', '__traceiter_sched_switch', '__schedule',
       'schedule', 'io_schedule_timeout', '__iomap_dio_rw', 'iomap_dio_rw',
       'ext4_file_read_iter', 'vfs_read', 'ksys_read', 'do_syscall_64']


def trace():
    return '\n'.join([
        switch(0, 1.000, 'swapper/0', 0, 'R', 'kworker/0:1', 5),
        wakeup(0, 1.001, 'sysbench', 100, 0, waker='kworker/0:1', waker_pid=5),
        switch(0, 1.003, 'kworker/0:1', 5, 'S', 'sysbench', 100),      # 100 waited 2 ms
        switch(0, 1.013, 'sysbench', 100, 'D', 'swapper/0', 0),        # 100 ran 10 ms
        *stack(0, 1.013, DIO, pid=100),
        wakeup(0, 1.020, 'sysbench', 100, 0, waker='swapper/0', waker_pid=0),
        switch(0, 1.024, 'swapper/0', 0, 'R', 'sysbench', 100),        # waited 4 ms
        switch(0, 1.030, 'sysbench', 100, 'R+', 'kworker/0:1', 5),     # ran 6 ms, preempted
        switch(0, 1.040, 'kworker/0:1', 5, 'S', 'sysbench', 100),      # waited 10 ms
        switch(0, 1.100, 'sysbench', 100, 'S', 'swapper/0', 0),        # ran 60 ms
    ])


def test_task_states_adds_run_from_switch_in_to_switch_out():
    r = task_states.task_states(trace())
    assert r['run'][100] == pytest.approx(0.010 + 0.006 + 0.060)
    assert r['span_s'] == pytest.approx(0.1)


def test_task_states_counts_waits_from_wakeup_and_from_preemption():
    r = task_states.task_states(trace())
    assert r['nwait'][100] == 3
    assert r['wait'][100] == pytest.approx(0.002 + 0.004 + 0.010)


def test_task_states_counts_switch_outs_by_state_and_switch_ins_by_cpu():
    r = task_states.task_states(trace())
    assert {s: n for (c, p, s), n in r['states'].items() if p == 100} == {'D': 1, 'R+': 1, 'S': 1}
    assert r['cpus'][100] == {0: 3}


def test_task_states_keys_d_stacks_by_five_frames_below_the_scheduler():
    r = task_states.task_states(trace())
    assert r['stacks'] == {('sysbench', 'io_schedule_timeout < __iomap_dio_rw < iomap_dio_rw < '
                                        'ext4_file_read_iter < vfs_read'): 1}


def test_task_states_prints_sysbench_threads_then_stacks_then_other_tasks():
    out = task_states.format_states(task_states.task_states(trace()))
    assert out[0] == 'span 0.10 s'
    assert out[1] == ("100 run 76.0% wait 16.0% (3 waits, 5333 us avg) "
                      "{'D': 1, 'R+': 1, 'S': 1} {0: 3}")
    assert out[2] == '--- top D stacks'
    assert out[3].startswith('1 sysbench io_schedule_timeout < ')
    assert out[4] == '--- other tasks by run'
    assert out[5] == 'kworker/0:1 5 run 13.0% wait 0.0% n=0 avg 0 us'
    assert not any(line.startswith('sysbench') for line in out[5:])


def test_task_states_comm_with_a_space_still_matches():
    lines = [switch(0, 1.0, 'Web Content', 7, 'R', 'sysbench', 8),
             switch(0, 1.5, 'sysbench', 8, 'S', 'Web Content', 7)]
    r = task_states.task_states('\n'.join(lines))
    assert r['comm'][7] == 'Web Content'
    assert r['run'][8] == pytest.approx(0.5)


def test_task_states_main_refuses_a_trace_without_switches(tmp_path):
    path = tmp_path / 't.txt'
    path.write_text(wakeup(0, 1.0, 'a', 1, 0))
    with pytest.raises(SystemExit, match='sched_switch'):
        task_states.main([str(path)])
