import json

import pytest

from asa_analysis import switch_transient

P0 = 1_000_000


def results():
    """One scenario: two static runs and one asa run whose probe starts at P0 and lasts 10 s."""
    static = lambda expert, v: {'expert': expert, 'rep': 0, 'probe': {'samples': {'tick_ms': [v] * 10}}}  # noqa: E731
    asa = {'expert': 'asa', 'rep': 0, 'started_unix_ms': P0 - 2000,
           'probe_started_unix_ms': P0, 'probe_ended_unix_ms': P0 + 10_000,
           'probe': {'elapsed_s': 10.0, 'samples': {'tick_ms': [50.0] * 4 + [10.0] * 6}}}
    return {'scenarios': [{'scenario': 'S1', 'runs': [static('eevdf', 40.0), static('bpfland', 12.0),
                                                        static('eevdf', 60.0), asa]}]}


DECISIONS = [
    {'unix_ms': P0 + 1000, 'outcome': 'switched', 'detail': 'eevdf -> bpfland in 2000 ms'},
    {'unix_ms': P0 + 1500, 'outcome': 'kept', 'detail': 'bpfland'},
    {'unix_ms': P0 + 60_000, 'outcome': 'switched', 'detail': 'bpfland -> eevdf in 10 ms'},
]


def test_switch_transient_quantile_is_nearest_rank():
    assert switch_transient.quantile([5, 1, 4, 2, 3], 0.5) == 3
    assert switch_transient.quantile([40, 10, 30, 20], 0.5) == 20
    assert switch_transient.quantile(list(range(1, 101)), 0.99) == 100
    assert switch_transient.quantile([], 0.99) is None


def test_switch_transient_switch_ends_at_decision_plus_its_duration_within_the_window():
    switches = switch_transient.agent_switches(DECISIONS, P0 - 5000, P0 + 10_000)
    assert switches == [(P0 + 3000, 'eevdf', 'bpfland', P0 + 1000)]


def test_switch_transient_decision_log_lines_that_are_not_json_are_skipped():
    text = json.dumps(DECISIONS[0]) + '\nnot json\n\n' + json.dumps(DECISIONS[1])
    assert switch_transient.decision_records(text) == DECISIONS[:2]


def test_switch_transient_frame_times_are_cumulative_others_spread_evenly():
    assert switch_transient.sample_times('frame_time_ms', [100, 200], 9.0) == [0.1, pytest.approx(0.3)]
    assert switch_transient.sample_times('tick_ms', [1, 1, 1, 1], 8.0) == [1.0, 3.0, 5.0, 7.0]


def test_switch_transient_splits_the_asa_probe_at_the_last_switch_end_plus_margin():
    (row,) = switch_transient.analyse(results(), DECISIONS, margin_s=1.0)
    # The switch ended 3 s into the probe; split at 4 s: samples at 0.5..3.5 s before.
    assert row['switch_done_s'] == 3.0
    assert (row['before_n'], row['after_n']) == (4, 6)
    assert (row['asa_before_p99'], row['asa_after_p99'], row['asa_p99']) == (50.0, 10.0, 50.0)
    assert row['static_p99'] == {'eevdf': 50.0, 'bpfland': 12.0}
    assert row['switches'] == ['eevdf->bpfland']


def test_switch_transient_without_a_switch_everything_is_before():
    (row,) = switch_transient.analyse(results(), [], margin_s=1.0)
    assert (row['before_n'], row['after_n'], row['asa_after_p99'], row['switch_done_s']) == (10, 0, None, None)
    line = switch_transient.format_table([row], 1.0)[-1]
    assert line == ('| S1 | 0 | tick_ms | bpfland 12.0, eevdf 50.0 | 50.0 | 50.0 (10) | - (0) | none (-) '
                    '| 0.40, -, - |')


def test_switch_transient_main_prints_the_table_and_writes_json(tmp_path, capsys):
    (tmp_path / 'agent').mkdir()
    (tmp_path / 'results.json').write_text(json.dumps(results()))
    (tmp_path / 'agent' / 'agent-1.jsonl').write_text('\n'.join(json.dumps(d) for d in DECISIONS))
    switch_transient.main([str(tmp_path), '--json', str(tmp_path / 'rows.json')])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith('p99 (ms) of each raw probe series;') and out[1] == ''
    assert out[-1] == ('| S1 | 0 | tick_ms | bpfland 12.0, eevdf 50.0 | 50.0 | 50.0 (4) | 10.0 (6) '
                       '| eevdf->bpfland (3.0) | 1.00, 1.00 (3 in 3.0 s), 0.00 |')
    assert json.loads((tmp_path / 'rows.json').read_text())[0]['after_n'] == 6


def test_switch_transient_main_refuses_a_folder_without_results(tmp_path):
    with pytest.raises(SystemExit, match='no results.json'):
        switch_transient.main([str(tmp_path)])


def test_switch_transient_counts_tail_events_before_during_and_after_the_switch():
    # Decided 1 s into the probe, done at 3 s, margin 1 s: the switch window is 1-4 s. The
    # samples over 12 ms (bpfland's p99, the best static) are the four 50 ms ones at 0.5-3.5 s.
    (row,) = switch_transient.analyse(results(), DECISIONS, margin_s=1.0)
    assert row['tail_events'] == {'before': {'n': 1, 's': 1.0}, 'switch': {'n': 3, 's': 3.0},
                                  'after': {'n': 0, 's': 6.0}}
    assert switch_transient.events_cell(row['tail_events']) == '1.00, 1.00 (3 in 3.0 s), 0.00'


def test_switch_transient_a_series_no_static_expert_ran_has_no_tail_events():
    data = results()
    data['scenarios'][0]['runs'] = [r for r in data['scenarios'][0]['runs'] if r['expert'] == 'asa']
    (row,) = switch_transient.analyse(data, DECISIONS, margin_s=1.0)
    assert row['tail_events'] is None
    assert switch_transient.events_cell(None) == '-'
