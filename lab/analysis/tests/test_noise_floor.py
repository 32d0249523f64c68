import json

import pytest

from asa_analysis import noise_floor


def report(scores):
    """scores: {scenario: {expert: [score per repetition]}}."""
    return {'scenarios': [
        {'scenario': s, 'runs': [{'expert': e, 'rep': i, 'score': x}
                                 for e, reps in by.items() for i, x in enumerate(reps)]}
        for s, by in scores.items()]}


def test_the_floor_is_the_median_spread_of_the_cells_run_more_than_once():
    r = report({'S1': {'a': [0.50, 0.52, 0.54], 'b': [0.30, 0.30, 0.30]},
                'S2': {'a': [0.60, 0.70], 'b': [0.40]}})
    result = noise_floor.analyse([r])
    sds = sorted(c['sd'] for c in result['cells'] if c['n'] >= 2)
    assert sds == pytest.approx([0.0, 0.02, 0.0707107], abs=1e-6)
    assert result['noise_floor'] == pytest.approx(0.02)
    assert result['cells_repeated'] == 3
    assert result['spread_max'] == pytest.approx(0.0707107, abs=1e-6)
    # Standard errors 0, 0.02 / sqrt(3), 0.0707 / sqrt(2): the median is the middle one.
    assert result['noise_floor_of_means'] == pytest.approx(0.02 / 3 ** 0.5)


def test_two_reports_pool_their_repetitions_per_cell():
    result = noise_floor.analyse([report({'S1': {'a': [0.5]}}), report({'S1': {'a': [0.7]}})])
    (cell,) = result['cells']
    assert cell['n'] == 2 and cell['mean'] == pytest.approx(0.6)


def test_a_difference_counts_only_beyond_the_floor_and_two_standard_errors():
    r = report({'S1': {'a': [0.80, 0.81, 0.82], 'b': [0.50, 0.51, 0.52]},
                'S2': {'a': [0.50, 0.51, 0.52], 'b': [0.50, 0.52, 0.53]}})
    result = noise_floor.analyse([r])
    verdicts = {p['scenario']: p['verdict'] for p in result['pairs']}
    assert verdicts == {'S1': 'a', 'S2': 'tie'}
    s1 = next(p for p in result['pairs'] if p['scenario'] == 'S1')
    assert s1['threshold'] >= result['noise_floor']


def test_the_command_prints_the_table_and_writes_json(tmp_path, capsys):
    path = tmp_path / 'report.json'
    path.write_text(json.dumps(report({'S1': {'a': [0.5, 0.6]}})))
    out = tmp_path / 'floor.json'
    assert noise_floor.main([str(path), '--json', str(out)]) == 0
    assert 'noise floor (median sd of 1 repeated cells): 0.0707' in capsys.readouterr().out
    assert json.loads(out.read_text())['noise_floor'] == pytest.approx(0.0707107, abs=1e-6)
