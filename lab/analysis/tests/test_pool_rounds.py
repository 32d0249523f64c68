import json
import math
import statistics

import pytest

from asa_analysis import pool_rounds


def geo(values):
    return math.exp(statistics.fmean(math.log(v) for v in values))


GRU = [100.0, 104.0, 98.0, 110.0, 106.0]
EEVDF = [95.0, 90.0, 101.0, 97.0, 93.0, 99.0]


def test_pool_rounds_geometric_mean_interval_contains_the_mean():
    mean, low, high = pool_rounds.geometric([1.0, 4.0, 2.0])
    assert mean == pytest.approx(2.0)
    assert low < mean < high


def test_pool_rounds_single_round_has_no_interval():
    assert pool_rounds.geometric([5.0]) == (pytest.approx(5.0), None, None)


def test_pool_rounds_interval_contains_ratio_of_geometric_means():
    low, high = pool_rounds.ratio_interval(GRU, EEVDF)
    assert low < geo(GRU) / geo(EEVDF) < high
    # Welch on the logs: symmetric around the log ratio.
    assert math.log(high) - math.log(geo(GRU) / geo(EEVDF)) == pytest.approx(
        math.log(geo(GRU) / geo(EEVDF)) - math.log(low))


def test_pool_rounds_ratio_interval_widens_with_scatter():
    narrow = pool_rounds.ratio_interval(GRU, EEVDF)
    wide = pool_rounds.ratio_interval([v * f for v, f in zip(GRU, (1, 1.3, 0.7, 1.2, 0.8))], EEVDF)
    assert wide[1] - wide[0] > narrow[1] - narrow[0]


def test_pool_rounds_no_interval_without_two_rounds_or_without_scatter():
    assert pool_rounds.ratio_interval([1.0], EEVDF) == (None, None)
    assert pool_rounds.ratio_interval([2.0, 2.0], [1.0, 1.0]) == (None, None)


def test_pool_rounds_verdict_against_097():
    assert pool_rounds.verdict(0.97, 1.2) == 'met'
    assert pool_rounds.verdict(0.90, 0.969) == 'missed'
    assert pool_rounds.verdict(0.95, 1.01) == 'open'
    assert pool_rounds.verdict(None, None) == '-'


def test_pool_rounds_throughput_is_events_per_s_or_inverse_hackbench_time():
    assert pool_rounds.throughput({'sysbench': {'events_per_s': 12.5}}) == 12.5
    assert pool_rounds.throughput({'sysbench': None, 'hackbench_s': 4.0}) == 0.25
    assert pool_rounds.throughput({'sysbench': {'events_per_s': 0}}) is None


def test_pool_rounds_pools_rows_by_scheduler_across_runs():
    a = [{'row': 'mixed-cpu', 'scheduler': 'eevdf', 'sysbench': {'events_per_s': 1.0}},
         {'row': 'cpu1', 'scheduler': 'eevdf', 'sysbench': {'events_per_s': 9.0}}]
    b = [{'row': 'mixed-cpu', 'scheduler': 'eevdf', 'sysbench': {'events_per_s': 2.0}}]
    assert pool_rounds.pool([('a', a), ('b', b)], ['mixed-cpu']) == {
        ('mixed-cpu', 'eevdf'): [(1.0, 'a'), (2.0, 'b')]}


def runs_json(tmp_path, name, gru, eevdf, bare=False):
    folder = tmp_path / name
    folder.mkdir()
    runs = ([{'row': 'mixed-cpu', 'scheduler': 'gru', 'sysbench': {'events_per_s': v}} for v in gru]
            + [{'row': 'mixed-cpu', 'scheduler': 'eevdf', 'sysbench': {'events_per_s': v}}
               for v in eevdf])
    (folder / 'runs.json').write_text(json.dumps(runs if bare else {'runs': runs}))
    return str(folder / 'runs.json')


def test_pool_rounds_main_prints_a_markdown_table_per_row(tmp_path, capsys):
    files = [runs_json(tmp_path, 'r1', GRU[:3], EEVDF[:3]),
             runs_json(tmp_path, 'r2', GRU[3:], EEVDF[3:], bare=True)]
    pool_rounds.main(['--row', 'mixed-cpu', *files])
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ''
    assert out[1] == f'mixed-cpu (baseline eevdf: {geo(EEVDF):.1f})'
    assert out[3] == '|---|---|---|---|---|---|---|'
    eevdf, gru = out[4], out[5]
    assert eevdf.startswith('| eevdf | 6 | 2 | ') and '| 1.00 (' in eevdf
    low, high = pool_rounds.ratio_interval(GRU, EEVDF)
    assert gru.startswith('| gru | 5 | 2 | ') and f'| {geo(GRU) / geo(EEVDF):.2f} ({low:.2f}–{high:.2f}) | met |' in gru
    assert '| 98.0–110.0 |' in gru


def test_pool_rounds_main_exits_without_baseline_rounds(tmp_path):
    files = [runs_json(tmp_path, 'r1', GRU, EEVDF)]
    with pytest.raises(SystemExit, match='no bpfland rounds of mixed-cpu'):
        pool_rounds.main(['--row', 'mixed-cpu', '--baseline', 'bpfland', *files])
