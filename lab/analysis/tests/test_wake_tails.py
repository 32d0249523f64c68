import json

import pytest

from asa_analysis import wake_tails

T0 = 1795975200.0  # 2026-11-29T18:00:00Z
LOG = '\n'.join([
    '[2026-11-29T18:00:00.000Z INFO  asa_scenarios::runner] [S1] Game (game) under layered, rep 1',
    '[2026-11-29T18:00:10.000Z INFO  asa_scenarios::loads] load archive_extract: starting `7zz x`',
    '[2026-11-29T18:00:20.000Z INFO  asa_scenarios::runner] [S1]   layered: fps=56.0 in 10.0 s',
])


def sw(cpu, t, prev_comm, prev_pid, state, next_comm, next_pid):
    return (f'  {prev_comm}-{prev_pid}  [{cpu:03d}] d..2.  {t:.6f}: sched_switch: '
            f'prev_comm={prev_comm} prev_pid={prev_pid} prev_prio=120 prev_state={state} ==> '
            f'next_comm={next_comm} next_pid={next_pid} next_prio=120')


def wk(cpu, t, comm, pid, target):
    return (f'  sh-9  [{cpu:03d}] d..2.  {t:.6f}: sched_wakeup: comm={comm} pid={pid} prio=120 '
            f'target_cpu={target:03d}')


# Trace time 100.0 is T0 + 10 (the load's start).
TRACE = '\n'.join([
    '  sh-9  [000] .....  100.000000: tracing_mark_write: ASA-SYNC 1795975210.0',
    sw(0, 100.001, 'swapper/0', 0, 'R', '7zz', 50),
    sw(1, 100.001, 'swapper/1', 0, 'R', 'probe-game-sim', 41),
    wk(1, 100.002, 'probe', 40, 0),                              # waits 9 ms behind 7zz
    sw(0, 100.011, '7zz', 50, 'R', 'probe', 40),
    sw(0, 100.012, 'probe', 40, 'R+', '7zz', 50),                # preempted, back after 1 ms
    sw(0, 100.013, '7zz', 50, 'S', 'probe', 40),
    sw(0, 100.014, 'probe', 40, 'S', 'swapper/0', 0),
    wk(0, 100.020, 'probe', 40, 0),                              # runs at once
    sw(0, 100.0201, 'swapper/0', 0, 'R', 'probe', 40),
])


def test_the_marker_ties_the_trace_to_the_epoch_and_events_parse():
    offset, events = wake_tails.parse_trace(TRACE)
    assert offset == pytest.approx(T0 + 10 - 100.0)
    assert events[0][:3] == ('switch', 100.001, 0)
    assert events[2] == ('wakeup', 100.002, 1, 'probe', 40)


def test_waits_start_at_a_wakeup_or_a_preemption_and_end_when_the_thread_runs():
    _, events = wake_tails.parse_trace(TRACE)
    got = [(pid, kind, round((e - s) * 1e3, 3)) for pid, _, kind, s, e in
           wake_tails.waits(events, 'probe')]
    assert got == [(40, 'wakeup', 9.0), (40, 'preempted', 1.0), (40, 'wakeup', 0.1)]


def test_what_held_the_cpus_during_a_wait_is_summed_per_command():
    _, events = wake_tails.parse_trace(TRACE)
    held = wake_tails.held_during(wake_tails.running_intervals(events), 100.002, 100.011)
    assert held == {'7zz': pytest.approx(9.0), 'probe-game-sim': pytest.approx(9.0)}


def test_runs_get_each_probe_threads_tail_and_the_long_waits_holders():
    offset, events = wake_tails.parse_trace(TRACE)
    runs = wake_tails.parse_runs(LOG)
    [row] = wake_tails.run_tails(offset, events, runs, long_ms=4.0)
    probe = row['threads']['probe']
    assert (row['expert'], probe['waits'], probe['preempted'], probe['long']) == ('layered', 3, 1, 1)
    assert probe['max_ms'] == pytest.approx(9.0)
    assert probe['long_after_preemption'] == 0
    assert probe['p50_ms'] == pytest.approx(1.0)
    assert probe['held_during_long_ms'] == {'7zz': pytest.approx(9.0),
                                            'probe-game-sim': pytest.approx(9.0)}


def test_nearest_rank_percentiles():
    assert wake_tails.percentile([], 99) is None
    assert wake_tails.percentile(list(range(1, 101)), 99) == 99
    assert wake_tails.percentile([5.0], 50) == 5.0


def test_main_prints_and_writes_json(tmp_path, capsys):
    (tmp_path / 'trace.txt').write_text(TRACE)
    (tmp_path / 'hinted.log').write_text(LOG)
    out = tmp_path / 'tails.json'
    assert wake_tails.main([str(tmp_path), '--json', str(out)]) == 0
    assert 'CPUs held meanwhile (ms): 7zz 9' in capsys.readouterr().out
    assert json.loads(out.read_text())[0]['threads']['probe']['long'] == 1


def test_a_trace_without_its_marker_is_refused(tmp_path):
    (tmp_path / 'trace.txt').write_text(sw(0, 1.0, 'a', 1, 'S', 'b', 2))
    (tmp_path / 'hinted.log').write_text(LOG)
    with pytest.raises(SystemExit, match='ASA-SYNC'):
        wake_tails.main([str(tmp_path)])
