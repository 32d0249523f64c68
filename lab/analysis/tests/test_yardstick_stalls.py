import json

import pytest

from asa_analysis import yardstick_stalls as ys

T0 = 1_795_900_000_000  # 2026-11-28T...Z, unix ms


def stamp(ms):
    """An env_logger time stamp of unix ms."""
    import datetime as dt
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime('%Y-%m-%dT%H:%M:%S.%f')[:-3] + 'Z'


def line(ms, module, message, level='INFO'):
    return f'[{stamp(ms)} {level:<5} {module}] {message}'


def test_the_rng_is_xorshift64_star_with_the_zero_seed_replaced():
    r = ys.Rng(7)
    x = 7
    x ^= x >> 12
    x ^= (x << 25) & ys.Rng.M
    x ^= x >> 27
    assert r.next() == (x * 0x2545F4914F6CDD1D) & ys.Rng.M
    assert ys.Rng(0).s == 0x9E3779B97F4A7C15
    a, b = ys.Rng(42), ys.Rng(42)
    assert [a.int(1, 4) for _ in range(50)] == [b.int(1, 4) for _ in range(50)]
    assert all(0.0 <= ys.Rng(i + 1).uniform(0.0, 1.0) < 1.0 for i in range(100))


def test_office_keys_are_typed_in_words_on_the_seeded_timeline():
    due = ys.office_due(10.0)
    assert due == sorted(due) and due[-1] < 10.0
    # The first key: one word gap (250 ms) and one key gap (60..160 ms) after the start.
    assert 0.310 <= due[0] < 0.410
    gaps = [b - a for a, b in zip(due, due[1:])]
    # Within a word 60..160 ms; between words a key gap plus the 250 ms word gap.
    assert all(0.0599 <= g < 0.4101 for g in gaps)
    assert any(g > 0.31 for g in gaps) and any(g < 0.16 for g in gaps)
    # A longer run types the same keys first.
    assert ys.office_due(20.0)[:len(due)] == due


def test_web_clicks_come_in_bursts_60_ms_apart():
    due = ys.web_due(10.0)
    assert 0.2 <= due[0] < 0.6 and due[-1] < 10.0
    gaps = [round(b - a, 6) for a, b in zip(due, due[1:])]
    assert 0.06 in gaps and all(g == 0.06 or 0.2 <= g < 0.6 for g in gaps)


def test_office_and_web_samples_are_placed_on_their_timelines():
    due = ys.office_due(5.0)
    lat = [3.0] * len(due)
    assert ys.sample_times('office', {'input_latency_ms': lat}, 5.0) == list(zip(due, lat))
    with pytest.raises(AssertionError):  # a sample more than the timeline has
        ys.sample_times('office', {'input_latency_ms': lat + [3.0]}, 5.0)
    web = ys.web_due(5.0)
    assert [t for t, _ in ys.sample_times('web', {'response_ms': [30.0] * len(web)}, 5.0)] == web


def test_game_frames_start_where_the_previous_frame_ended():
    st = ys.sample_times('game', {'frame_time_ms': [16.0, 500.0, 16.0]}, 1.0)
    assert st == [(0.0, 16.0), (0.016, 500.0), (pytest.approx(0.516), 16.0)]


def test_audio_periods_restart_after_a_late_one():
    st = ys.sample_times('audio', {'compute_latency_ms': [1.0, 1.0, 200.0, 1.0]}, 1.0)
    times = [round(t, 6) for t, _ in st]
    # 5 ms periods; a period 200 ms late (beyond its 10 ms buffer) moves the next one to its
    # end plus a period.
    assert times == [0.005, 0.01, 0.015, 0.22]


def test_stalls_close_together_share_a_window():
    st = [(1.0, 3.0), (2.0, 400.0), (2.3, 200.0), (2.54, 160.0), (5.0, 150.0), (8.0, 1000.0), (13.0, 151.0)]
    # 2.0 s + 400 ms ends at 2.4 s; 2.3 s starts before it (its end: 2.5 s); 2.54 s is within
    # 50 ms of 2.5 s. 150 ms is not a stall (above the threshold only).
    assert ys.windows(st) == [[2.0, 2.7, 3, 400], [8.0, 9.0, 1, 1000], [13.0, 13.15, 1, 151]]
    assert ys.stall_counts(st) == (4, 1)
    assert ys.windows([(0.5, 3.0)]) == [] and ys.stall_counts([]) == (0, 0)


def test_log_lines_parse_env_logger_lines_and_filter_the_module():
    text = '\n'.join([
        line(T0, 'asa_scenarios::runner', '[S10] run 1/2'),
        'a line of something else',
        line(T0 + 1500, 'asa_experts::supervisor', 'switched eevdf -> cosmos in 900 ms'),
    ])
    assert list(ys.log_lines(text)) == [
        (T0, 'asa_scenarios::runner', '[S10] run 1/2'),
        (T0 + 1500, 'asa_experts::supervisor', 'switched eevdf -> cosmos in 900 ms')]
    assert [m for _, m, _ in ys.log_lines(text, 'supervisor')] == ['asa_experts::supervisor']


def test_fisher_is_the_one_sided_exact_test():
    # All 3 stalled runs among the 3 of group 1, of 6: 1 / C(6, 3).
    assert ys.fisher(3, 3, 0, 3) == pytest.approx(1 / 20)
    assert ys.fisher(0, 3, 3, 3) == pytest.approx(1.0)
    assert ys.fisher(2, 3, 1, 3) == pytest.approx((9 + 1) / 20)


def test_percentile_is_r7_and_one_bad_window_of_six_does_not_set_the_window_median():
    assert ys.pct([1.0, 2.0, 3.0, 4.0], 99) == pytest.approx(3.97)
    calm = [(i * 0.1, 10.0) for i in range(600)]
    one_bad = [(t, 900.0 if 5.0 <= t < 6.0 else v) for t, v in calm]
    assert ys.pct([v for _, v in one_bad], 99) == 900.0
    assert ys.window_median(one_bad) == 10.0
    recurring = [(t, 900.0 if int(t) % 20 < 2 else v) for t, v in calm]  # in 3 of 6 windows
    assert ys.window_median(recurring) > 100.0


def test_harrell_davis_of_a_constant_is_the_constant():
    assert ys.harrell_davis([5.0] * 20, 0.99) == pytest.approx(5.0)
    assert 1.0 < ys.harrell_davis([1.0, 2.0, 3.0, 4.0], 0.5) < 4.0


def office_run(expert, rep, start, stalls=(), duration=20.0, build_steps=15.0, probe_after_ms=2000):
    """A results.json run of the office probe: 3 ms keystrokes, `stalls` {key index: ms}."""
    n = len(ys.office_due(duration))
    lat = [3.0 + (i % 7) * 0.25 for i in range(n)]
    for i, ms in dict(stalls).items():
        lat[i] = ms
    end = start + probe_after_ms + int(duration * 1000)
    return {'expert': expert, 'rep': rep, 'valid': True, 'started_unix_ms': start,
            'probe_started_unix_ms': start + probe_after_ms,
            'probe': {'elapsed_s': duration, 'samples': {'input_latency_ms': lat, 'autosave_ms': [12.0, 14.0]}},
            'phases': [{'load': 'kernel_build', 'planned_s': duration, 'started_unix_ms': start, 'ended_unix_ms': end,
                        'output': {'throughput': build_steps}}]}


def raw_run():
    """A live run of S10 (office + kernel build): cosmos twice (the first stalls 2-3 s into its
    probe), EEVDF twice, runs 30 s apart; the kernel logs an event during the first."""
    starts = [T0 + i * 30_000 for i in range(4)]
    runs = [office_run('cosmos', 0, starts[0], stalls={20: 400.0, 21: 300.0, 60: 200.0}),
            office_run('eevdf', 0, starts[1], build_steps=14.0),
            office_run('eevdf', 1, starts[2], build_steps=14.0),
            office_run('cosmos', 1, starts[3], build_steps=16.0)]
    log = []
    for i, (s, r) in enumerate(zip(starts, runs)):
        log.append(line(s - 1000, 'asa_scenarios::runner', f'[S10] run {i + 1}/4'))
        frm, to = ('eevdf', 'cosmos') if r['expert'] == 'cosmos' else ('cosmos', 'eevdf')
        log.append(line(s - 10, 'asa_experts::supervisor', f'switched {frm} -> {to} in 900 ms (EEVDF gap -)'))
    # The kernel's uptime is 1000 s behind the wall clock's run start.
    up = lambda ms: (ms - T0) / 1000 + 1000.0  # noqa: E731
    dmesg = '\n'.join([
        f'[{up(starts[0] - 10):12.6f}] sched_ext: BPF scheduler "cosmos" enabled',
        f'[{up(starts[0] + 9_000):12.6f}] sched_ext: "cosmos": khugepaged[42] failed to run for 5.380s',
        f'[{up(starts[1] - 20):12.6f}] sched_ext: BPF scheduler "cosmos" disabled (unregistered from user space)',
        f'[{up(starts[3] - 10):12.6f}] sched_ext: BPF scheduler "cosmos" enabled',
    ])
    results = {'machine': {'memory_mib': 4096},
               'scenarios': [{'scenario': 'S10', 'probe': 'office', 'runs': runs}]}
    return {'results': results, 'calibrate_log': '\n'.join(log) + '\n', 'agents': {}, 'dmesg': dmesg + '\n'}


def test_build_orders_runs_and_finds_when_their_scheduler_took_over():
    raw = raw_run()
    runs = ys.build(raw['results'], raw['calibrate_log'], raw['agents'])
    assert [(r['index'], r['expert'], r['rep']) for r in runs] == [
        (1, 'cosmos', 0), (2, 'eevdf', 0), (3, 'eevdf', 1), (4, 'cosmos', 1)]
    assert runs[0]['change'] == T0 - 10 and runs[0]['prev'] is None
    assert runs[1]['prev'] is runs[0] and runs[1]['loads_end'] == T0 + 30_000 + 22_000
    assert ys.first_load(runs[0]) == T0
    assert len(runs[0]['st']) == len(runs[0]['samples']['input_latency_ms'])


def test_an_eevdf_run_after_the_agent_counts_from_the_agents_stop():
    agent_log = '\n'.join([
        line(T0 + 1500, 'asa_experts::supervisor', 'switched eevdf -> cosmos in 700 ms'),
        line(T0 + 80_000, 'asa::daemon', 'stopped: the machine is on EEVDF'),
    ])
    ticks = json.dumps({'unix_ms': T0 + 3000, 'features': {'mem_dirty_share': 0.0001}})
    agents = {'123': (agent_log, ticks + '\n')}
    runs = [office_run('asa', 0, T0 + 33_000), office_run('eevdf', 0, T0 + 90_000)]
    log = '\n'.join([
        line(T0, 'asa_scenarios::runner', '[S10] run 1/2'),
        line(T0 + 100, 'asa_mapping::live::switcher', 'agent started (decision log /tmp/live/agent/agent-123.jsonl)'),
        line(T0 + 32_900, 'asa_mapping::live::switcher', 'agent warm after 32.8 s'),
        line(T0 + 85_000, 'asa_scenarios::runner', '[S10] run 2/2'),
    ])
    results = {'scenarios': [{'scenario': 'S10', 'probe': 'office', 'runs': runs}]}
    asa, eevdf = ys.build(results, log, agents)
    assert asa['change'] == T0 + 1500 and asa['warm_s'] == 32.8
    assert eevdf['change'] == T0 + 80_000
    rec = ys.run_record(asa, memory_mib=4096)
    assert rec['arm'] == 'asa run' and rec['scheduler_age_at_load_s'] == 31.5
    assert ys.run_record(eevdf, 4096)['scheduler_age_at_load_s'] == 10.0


def test_the_analysis_counts_early_stalls_per_run_and_per_load_start(tmp_path, capsys):
    raw = raw_run()
    (tmp_path / 'guest').mkdir()
    (tmp_path / 'results.json').write_text(json.dumps(raw['results']))
    (tmp_path / 'calibrate.log').write_text(raw['calibrate_log'])
    (tmp_path / 'guest' / 'dmesg.txt').write_text(raw['dmesg'])
    ys.main([str(tmp_path), '--json', str(tmp_path / 'stalls.json')])
    out = json.loads((tmp_path / 'stalls.json').read_text())
    first = out['runs'][0]
    due = ys.office_due(20.0)
    assert (first['stalls_first_12s'], first['stalls_after_12s'], first['stalls']) == (3, 0, 3)
    assert first['first_stall_probe_s'] == round(due[20], 2)
    assert first['first_stall_after_scheduler_change_s'] == round(due[20] + 2.01, 2)
    assert first['stall_windows'][0][2:] == [2, 400]
    assert (first['arm'], first['scheduler_age_at_load_s'], first['quiet_s']) == ('static scx', 0.0, None)
    assert [r['stalls'] for r in out['runs'][1:]] == [0, 0, 0]
    assert out['runs'][1]['quiet_s'] == 8.0  # 30 s apart, 22 s long
    assert out['summary_without_web']['static scx'] == {
        'runs': 2, 'runs_with_early_stall': 1, 'early_stall_samples': 3, 'late_stall_samples': 0}
    assert out['load_starts_without_web'] == {
        'EEVDF, quiet >= 3 s': {'load_starts': 2, 'with_stall': 0, 'stall_samples': 0},
        'static scx, scheduler < 15 s old, quiet >= 3 s': {'load_starts': 2, 'with_stall': 1, 'stall_samples': 3}}
    (event,) = out['kernel_sched_ext_events']
    assert event['run'] == 'S10 cosmos rep 1' and event['after_scheduler_change_s'] == 9.0
    assert 'khugepaged' in event['message']
    rows = {(e['tail'], e['stability']): e for e in out['office_estimators']}
    assert len(rows) == 13
    now = rows[('p99 (now)', 'relative variance (now)')]
    windowed = rows[('median of 6 window p99s', 'relative variance (now)')]
    # The one stalled run sets the whole-run p99 of its cell, not the median of window p99s.
    assert now['estimator_ln_spread_max'] > 3.0 and windowed['estimator_ln_spread_max'] < 0.5
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith('idx scen expert rep |')
    assert printed[1].startswith('  1 S10  cosmos   1 | -')


def test_main_refuses_a_folder_that_is_not_an_unpacked_live_run(tmp_path):
    with pytest.raises(SystemExit, match='no results.json'):
        ys.main([str(tmp_path)])
