import pytest

from asa_analysis import dio_per_cpu
from builders import stack, switch, wakeup

DIO = ['__schedule', 'schedule', 'io_schedule', '__iomap_dio_rw', 'iomap_dio_rw']
FSYNC = ['__schedule', 'schedule', 'jbd2_log_wait_commit', 'ext4_sync_file']


def trace():
    return '\n'.join([
        switch(0, 1.0000, 'swapper/0', 0, 'R', 'sysbench', 10),
        switch(0, 1.0010, 'sysbench', 10, 'D', 'sysbench', 30),       # I/O thread ran 1 ms
        *stack(0, 1.0010, DIO, pid=10),
        switch(1, 1.0000, 'swapper/1', 0, 'R', 'sysbench', 11),
        switch(1, 1.0020, 'sysbench', 11, 'D', 'swapper/1', 0),       # I/O thread on CPU 1
        *stack(1, 1.0020, DIO, pid=11),
        wakeup(0, 1.0011, 'sysbench', 10, 0),                         # 100 µs sleep on CPU 0
        switch(0, 1.0040, 'sysbench', 30, 'R', 'sysbench', 10),       # hog ran 3 ms
        wakeup(1, 1.0025, 'sysbench', 11, 1),                         # 500 µs sleep on CPU 1
        switch(0, 1.0050, 'sysbench', 10, 'D', 'swapper/0', 0),       # I/O ran 1 ms
        *stack(0, 1.0050, FSYNC, pid=10),                             # an fsync: not a DIO sleep
        wakeup(0, 1.0090, 'sysbench', 10, 0),
    ])


def test_dio_per_cpu_measures_each_direct_io_sleep_on_the_cpu_it_slept_on():
    per_cpu = dio_per_cpu.dio_per_cpu(trace())
    assert per_cpu[0]['sleeps'] == [pytest.approx(1e-4)]
    assert per_cpu[1]['sleeps'] == [pytest.approx(5e-4)]


def test_dio_per_cpu_splits_sysbench_run_time_into_io_threads_and_hogs():
    per_cpu = dio_per_cpu.dio_per_cpu(trace())
    assert per_cpu[0]['io_run'] == pytest.approx(0.002)
    assert per_cpu[0]['hog_run'] == pytest.approx(0.003)
    assert per_cpu[1]['io_run'] == pytest.approx(0.002)


def test_dio_per_cpu_a_d_sleep_without_iomap_dio_is_not_an_io_thread():
    lines = [switch(0, 1.0, 'sysbench', 10, 'D', 'swapper/0', 0), *stack(0, 1.0, FSYNC),
             wakeup(0, 1.1, 'sysbench', 10, 0)]
    assert dio_per_cpu.dio_per_cpu('\n'.join(lines)) == {}


def test_dio_per_cpu_line_gives_counts_mean_sleep_and_late_share_per_cpu():
    line = dio_per_cpu.format_line('gru-1', dio_per_cpu.dio_per_cpu(trace()))
    assert line == ('gru-1     cpu0:     1 I/Os, sleep  100 µs, >200 µs 0.00, I/O threads ran '
                    '0.00 s, hogs 0.00 s | cpu1:     1 I/Os, sleep  500 µs, >200 µs 1.00, '
                    'I/O threads ran 0.00 s, hogs 0.00 s')


def test_dio_per_cpu_cpu_without_sleeps_prints_nan():
    line = dio_per_cpu.format_line('x', {0: {'sleeps': [], 'io_run': 0.0, 'hog_run': 1.0}})
    assert 'cpu0:     0 I/Os, sleep  nan µs, >200 µs  nan' in line


def test_dio_per_cpu_names_a_trace_by_scheduler_and_round():
    assert dio_per_cpu.trace_name('out/prof-gru-3-mixed.txt.script') == 'gru-3'


def test_dio_per_cpu_main_prints_a_line_per_trace(tmp_path, capsys):
    path = tmp_path / 'prof-eevdf-1-mixed.txt.script'
    path.write_text(trace())
    dio_per_cpu.main([str(path), str(path)])
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and out[0].startswith('eevdf-1   cpu0:')
