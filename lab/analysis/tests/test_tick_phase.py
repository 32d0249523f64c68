import io
import json
import tarfile

from asa_analysis import tick_phase

ZERO = 1_000_000_000
PROBE_START = ZERO + 10_000


def record(at_s, jitter_ms=2):
    return {'schema': 'asa.decision', 'at_s': at_s, 'unix_ms': ZERO + at_s * 1000 + jitter_ms}


def audio_run(expert, rep, late_at_ms=(), periods=2000, period_ms=5):
    """A 10 s audio probe whose periods are late (6 ms) at the given ms after its start."""
    wake, compute = [], []
    late_periods = {int(at // period_ms) for at in late_at_ms}
    for i in range(periods):
        late = i in late_periods
        wake.append(1.0)
        compute.append(5.5 if late else 1.5)
    return {'expert': expert, 'rep': rep, 'started_unix_ms': PROBE_START - 2000,
            'probe_started_unix_ms': PROBE_START, 'probe_ended_unix_ms': PROBE_START + 10_000,
            'probe': {'kind': 'audio', 'elapsed_s': periods * period_ms / 1000,
                      'samples': {'wake_latency_ms': wake, 'compute_latency_ms': compute}}}


def results(*runs):
    return {'scenarios': [{'scenario': 'S25', 'runs': list(runs)}]}


# Full ticks at 1..12 s and at 15 and 20 s of the agent's clock; glances in between.
RECORDS = [record(s) for s in list(range(1, 13)) + [15, 20]]


def test_the_grid_is_the_agents_clock_zero_and_its_usual_step():
    zero, interval, full = tick_phase.tick_grid(RECORDS)
    assert abs(zero - (ZERO + 2)) < 1e-6
    assert interval == 1000  # not the 3 s and 5 s steps over glances
    assert full == set(range(1, 13)) | {15, 20}


def test_late_periods_at_ticks_and_glances_count_as_excess_there():
    # the probe runs 10..20 s of the agent's clock: full ticks at 10, 11, 12, 15 s, glances at
    # 13, 14, 16..19 s; late periods right at 11 s (full) and 14 s, 17 s (glances), one away
    late_at = [11_000 - 10_000 + 2, 14_000 - 10_000 + 2, 17_000 - 10_000 + 2, 5_500]
    rows = tick_phase.analyse(results(audio_run('asa', 0, late_at)), {ZERO: RECORDS}, set(),
                              ['wake_latency_ms', 'compute_latency_ms'], 5.0, 50.0)
    (row,) = rows
    assert row['late'] == 4
    assert row['counts']['full']['late'] == 1 and row['counts']['glance']['late'] == 2
    assert row['counts']['away']['late'] == 1
    assert row['counts']['full']['periods'] == 4 * 20  # 4 full ticks, ±50 ms of 5 ms periods
    assert 1.8 < row['excess']['glance'] <= 2 and 0.9 < row['excess']['full'] <= 1


def test_a_static_run_is_placed_on_a_grid_from_its_probe_start():
    rows = tick_phase.analyse(results(audio_run('cosmos', 0, [3_000])), {}, set(),
                              ['wake_latency_ms', 'compute_latency_ms'], 5.0, 50.0)
    (row,) = rows
    assert row['counts']['full']['periods'] == 0
    assert row['counts']['glance']['late'] == 1  # 3 s after the probe start is a grid point


def test_the_agent_log_of_a_run_is_the_last_one_started_before_its_probe():
    logs = {ZERO - 100_000: [record(1)], ZERO: RECORDS, PROBE_START + 50_000: [record(2)]}
    assert tick_phase.log_of_run(logs, audio_run('asa', 0)) is RECORDS


def test_an_archive_is_read_like_a_folder(tmp_path):
    path = tmp_path / 'raw.tar.xz'
    with tarfile.open(path, 'w:xz') as tar:
        for name, text in (('./results.json', json.dumps(results(audio_run('asa', 0)))),
                           (f'./agent/agent-{ZERO}.jsonl',
                            '\n'.join(json.dumps(r) for r in RECORDS) + '\nnot json\n')):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    data, logs = tick_phase.read_live(str(path))
    assert data['scenarios'][0]['scenario'] == 'S25'
    assert logs == {ZERO: RECORDS}


def test_main_refuses_a_run_without_the_series(tmp_path):
    (tmp_path / 'results.json').write_text(json.dumps(results(audio_run('asa', 0))))
    try:
        tick_phase.main([str(tmp_path), '--series', 'frame_time_ms'])
    except SystemExit as stop:
        assert 'no run with the series frame_time_ms' in str(stop.code)
    else:
        raise AssertionError('main accepted runs without the series')
