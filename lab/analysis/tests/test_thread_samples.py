import pytest

from asa_analysis import thread_samples
from builders import three_samples


def test_thread_samples_parse_classifies_hogs_io_threads_and_jbd2():
    samples, kinds, _ = thread_samples.parse(three_samples())
    assert kinds == {100: 'cpu', 200: 'io', 300: 'jbd2'}
    assert len(samples) == 3
    assert set(samples[0][1]) == {101, 102, 201, 202, 203, 204, 300}   # no main threads


def test_thread_samples_parse_counts_not_running_threads_by_state_and_wchan():
    _, _, waits = thread_samples.parse(three_samples())
    assert waits == {(200, 'D', '__iomap_dio_rw'): 1, (200, 'S', '0'): 1}


def test_thread_samples_intervals_take_each_parts_deltas_and_end_placement():
    samples, kinds, _ = thread_samples.parse(three_samples())
    ivs = thread_samples.intervals(samples, kinds)
    assert [iv['dt'] for iv in ivs] == [0.5, 1.0]
    assert ivs[0]['io'] == [4 * 100e6, 4 * 50e6, 4 * 100]
    assert ivs[0]['cpu'] == [2 * 400e6, 2 * 100e6, 2 * 10]
    assert ivs[0]['jbd2'] == [10e6, 2e6, 4]
    assert dict(ivs[0]['per_cpu']) == {0: [3, 1], 1: [1, 1]}
    assert ivs[0]['states'] == {'R': 2, 'D': 1, 'S': 1}


def test_thread_samples_placement_is_largest_count_first():
    assert thread_samples.placement({0: [1, 2], 1: [3, 0]}) == '3+1'
    assert thread_samples.placement({1: [4, 0]}) == '4+0'


def test_thread_samples_io_threads_by_cpu_is_weighted_by_interval_length():
    samples, kinds, _ = thread_samples.parse(three_samples())
    ivs = thread_samples.intervals(samples, kinds)
    # 0.5 s with 1 on cpu1, 1.0 s with 2 on cpu1.
    assert thread_samples.io_threads_by_cpu(ivs) == pytest.approx([(0.5 * 3 + 2) / 1.5, 2.5 / 1.5])


def test_thread_samples_run_per_second_and_wait_per_slice():
    samples, kinds, _ = thread_samples.parse(three_samples())
    ivs = thread_samples.intervals(samples, kinds)
    assert thread_samples.per_s(ivs, 'io') == pytest.approx(800 / 1.5)
    assert thread_samples.per_s(ivs, 'cpu', 1) == pytest.approx(400 / 1.5)
    assert thread_samples.wait_per_slice(ivs, 'io') == pytest.approx(500)


def test_thread_samples_summary_line_and_wchan_line():
    out = thread_samples.summarize('eevdf r1 mixed', *thread_samples.parse(three_samples()))
    assert out[0] == ('eevdf r1 mixed       io  533 hog 1067 ms/s, io threads on cpu0/cpu1 2.3/1.7, '
                      'io wait   500 µs/slice, io states % D12 R75 S12 jbd2  13 ms/s wait   500 µs'
                      ' | 3+1  33% (io  800 hog 1600) | 2+2  67% (io  400 hog  800)')
    assert out[1] == '    I/O threads not running, by state:wchan: D:__iomap_dio_rw 1, S:0 1'
    assert len(out) == 2


def test_thread_samples_intervals_option_adds_a_line_per_interval():
    out = thread_samples.summarize('x', *thread_samples.parse(three_samples()), True)
    assert out[2] == ('    0.50s cpu0:3io/1hog cpu1:1io/1hog  io DRRS  800 hog 1600 ms/s io wait'
                      '   500 jbd2 run  20 wait   4 ms/s')
    assert len(out) == 4


def test_thread_samples_file_without_io_intervals_says_so():
    out = thread_samples.summarize('lbl', *thread_samples.parse('@ 0.0\n@ 0.5\n'))
    assert out == ['lbl: no intervals with I/O threads']


def test_thread_samples_label_from_file_name():
    assert thread_samples.file_label('a/thr-gru-kthread250-3-mixed.txt') == 'gru-kthread250 r3 mixed'
    assert thread_samples.file_label('a/other.txt') == 'a/other.txt'


def test_thread_samples_main_reads_a_folders_files_in_order(tmp_path, capsys):
    for name in ('thr-gru-1-mixed.txt', 'thr-eevdf-1-mixed.txt', 'ss-x-0.txt'):
        (tmp_path / name).write_text(three_samples())
    thread_samples.main([str(tmp_path)])
    out = capsys.readouterr().out.splitlines()
    assert [line[:14] for line in out if not line.startswith(' ')] == ['eevdf r1 mixed',
                                                                       'gru r1 mixed  ']
