import pytest

from asa_analysis import timer_gaps
from builders import stack, switch, timer, wakeup


def trace():
    return '\n'.join([
        '# tracer: nop',
        switch(0, 1.000, 'swapper/0', 0, 'R', 'sysbench', 10),
        wakeup(1, 1.001, 'sysbench', 11, 1),
        timer(0, 1.002),
        switch(0, 1.010, 'sysbench', 10, 'D', 'jbd2/asa0-8', 20),
        *stack(0, 1.010, ['__schedule', 'io_schedule']),
        timer(0, 1.100),                       # timer gap 0.098 on CPU 0
        switch(0, 1.050, 'jbd2/asa0-8', 20, 'S', 'sysbench', 10),   # sched gap 0.04
        switch(1, 1.015, 'swapper/1', 0, 'R', 'sysbench', 11),
        wakeup(1, 1.030, 'sysbench', 12, 1),
    ])


def test_timer_gaps_finds_sched_event_gaps_over_20ms_with_the_running_task():
    gaps = timer_gaps.find_gaps(trace())
    # CPU 0: the stack trace line at 1.010 is an event; 1.010 -> 1.050 is the gap.
    assert gaps['sched_gaps'] == [(0.04, 0, 1.01, 'jbd2/asa0-8')]


def test_timer_gaps_keeps_timer_gaps_apart_from_sched_gaps():
    gaps = timer_gaps.find_gaps(trace())
    assert gaps['timer_gaps'] == [(0.098, 0, 1.002, 'jbd2/asa0-8')]
    assert gaps['timer_ticks'] == {0: 2}


def test_timer_gaps_span_runs_from_first_to_last_event_line():
    assert timer_gaps.find_gaps(trace())['span_s'] == pytest.approx(1.030 - 1.000)


def test_timer_gaps_frames_of_a_stack_trace_are_not_events():
    lines = [switch(0, 1.0, 'a', 1, 'D', 'b', 2), *stack(0, 1.0, ['x [001] 9.0: y']),
             switch(0, 1.01, 'b', 2, 'S', 'a', 1)]
    assert timer_gaps.find_gaps('\n'.join(lines))['sched_gaps'] == []


def test_timer_gaps_lists_gaps_longest_first_and_prints_five():
    lines = [switch(0, t, 'a', 1, 'S', 'b', 2) for t in (0, 0.03, 0.13, 0.18, 0.4, 0.43, 0.5, 0.6)]
    gaps = timer_gaps.find_gaps('\n'.join(lines))
    assert [g[0] for g in gaps['sched_gaps']] == [0.22, 0.1, 0.1, 0.07, 0.05, 0.03, 0.03]
    out = timer_gaps.format_gaps(gaps)
    assert out[1] == (" top sched gaps [(0.22, 0, 0.18, 'b'), (0.1, 0, 0.5, 'b'), "
                      "(0.1, 0, 0.03, 'b'), (0.07, 0, 0.43, 'b'), (0.05, 0, 0.13, 'b')]")


def test_timer_gaps_first_line_reports_counts_sums_and_ticks_per_second():
    out = timer_gaps.format_gaps(timer_gaps.find_gaps(trace()))
    assert out[0] == ('span 0.0 s; sched-event gaps>20ms: 1, sum 0.04 s; timer ticks/CPU/s '
                      '{0: 67}; timer gaps>20ms: 1 sum 0.10 s')
    assert out[2] == " top timer gaps [(0.098, 0, 1.002, 'jbd2/asa0-8')]"


def test_timer_gaps_main_prints_three_lines(tmp_path, capsys):
    path = tmp_path / 'trace.txt'
    path.write_text(trace())
    timer_gaps.main([str(path)])
    assert len(capsys.readouterr().out.splitlines()) == 3


def test_timer_gaps_main_refuses_a_trace_without_events(tmp_path):
    path = tmp_path / 'empty.txt'
    path.write_text('# tracer: nop\n')
    with pytest.raises(SystemExit, match='no trace events'):
        timer_gaps.main([str(path)])
