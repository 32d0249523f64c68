import json

import pytest

from asa_analysis import routing_ceiling


def run(expert, score, load):
    return {'expert': expert, 'score': score, 'parts': {'value:load:' + load: 0.5}}


def scenario(name, probe, load, scores):
    """scores: {expert: [score per repetition]}."""
    return {'scenario': name, 'probe': probe,
            'runs': [run(e, s, load) for e, reps in scores.items() for s in reps]}


def phased(name, probe, loads, scores):
    runs = [{'expert': e, 'score': s, 'parts': {'value:load:' + l: 0.5 for l in loads}}
            for e, reps in scores.items() for s in reps]
    return {'scenario': name, 'probe': probe, 'runs': runs}


# Two loads where different experts win, each seen under two probes.
SPLIT = {'scenarios': [
    scenario('S1', 'game', 'build', {'a': [0.8], 'b': [0.4], 'eevdf': [0.3]}),
    scenario('S2', 'audio', 'build', {'a': [0.7], 'b': [0.5], 'eevdf': [0.3]}),
    scenario('S3', 'game', 'disk', {'a': [0.4], 'b': [0.9], 'eevdf': [0.3]}),
    scenario('S4', 'audio', 'disk', {'a': [0.3], 'b': [0.8], 'eevdf': [0.3]}),
]}


def test_a_load_keyed_table_reaches_the_oracle_when_each_load_has_one_best_expert():
    result = routing_ceiling.analyse(SPLIT)
    load = result['keys']['load']
    assert load['in sample']['oracle_ratio'] == pytest.approx(1.0)
    # Left out, each scenario's load is still known from its other probe.
    assert load['leave one out']['oracle_ratio'] == pytest.approx(1.0)
    assert load['leave one out']['chosen'] == {'S1': 'a', 'S2': 'a', 'S3': 'b', 'S4': 'b'}
    assert result['keys']['one expert']['in sample']['oracle_ratio'] < 0.85


def test_a_class_of_one_scenario_falls_back_to_the_best_single_expert_when_left_out():
    probe_load = routing_ceiling.analyse(SPLIT)['keys']['probe+load']
    assert probe_load['in sample']['oracle_ratio'] == pytest.approx(1.0)
    assert probe_load['leave one out']['fallbacks'] == 4
    # Left out of a table where the other load's expert wins on average: S1 gets b (0.4 of 0.8).
    assert probe_load['leave one out']['chosen']['S1'] == 'b'
    assert probe_load['leave one out']['oracle_ratio'] < 1.0


def test_a_table_fitted_to_noise_scores_below_the_single_expert_out_of_sample():
    # 'a' is best everywhere but for one lucky 'b' run per load.
    report = {'scenarios': [
        scenario('S1', 'game', 'build', {'a': [0.8], 'b': [0.5]}),
        scenario('S2', 'audio', 'build', {'a': [0.5], 'b': [0.9]}),
        scenario('S3', 'web', 'build', {'a': [0.8], 'b': [0.5]}),
    ]}
    load = routing_ceiling.analyse(report, baseline='b')['keys']
    assert load['load']['in sample']['oracle_ratio'] == pytest.approx(load['one expert']['in sample']['oracle_ratio'])
    probe = load['probe']
    assert probe['in sample']['oracle_ratio'] == pytest.approx(1.0)
    assert probe['leave one out']['oracle_ratio'] < probe['in sample']['oracle_ratio']


def test_phased_scenarios_and_the_agents_columns_are_left_out_of_the_tables():
    report = {'scenarios': SPLIT['scenarios'] + [
        phased('P1', 'game', ['build', 'disk'], {'a': [0.5], 'b': [0.6]}),  # no eevdf run
    ]}
    report['scenarios'][0]['runs'].append(run('asa', 0.99, 'build'))
    result = routing_ceiling.analyse(report)
    assert result['scenarios'] == 4
    assert result['experts'] == ['a', 'b', 'eevdf']


def test_the_held_out_oracle_is_below_the_hindsight_oracle_when_the_best_mean_is_luck():
    # Equal experts, opposite noise: the hindsight oracle takes the lucky mean, the held-out
    # one the other repetition's pick.
    report = {'scenarios': [
        scenario('S1', 'game', 'build', {'a': [0.6, 0.4], 'b': [0.45, 0.55]}),
    ]}
    wc = routing_ceiling.analyse(report)['winners_curse']
    assert wc['hindsight'] == pytest.approx(0.5)
    # rep 0: b chosen from rep 1 (0.55 > 0.4), scores 0.45; rep 1: a chosen from rep 0, 0.4.
    assert wc['held_out'] == pytest.approx((0.45 + 0.4) / 2)


def test_one_expert_chosen_on_held_out_runs_matches_a_router_when_one_expert_is_best_everywhere():
    report = {'scenarios': [
        scenario('S1', 'game', 'build', {'a': [0.8, 0.7], 'b': [0.5, 0.6]}),
        scenario('S2', 'audio', 'disk', {'a': [0.6, 0.7], 'b': [0.4, 0.3]}),
    ]}
    wc = routing_ceiling.analyse(report)['winners_curse']
    assert wc['single_expert_picks'] == ['a', 'a']
    assert wc['single_expert'] == pytest.approx(wc['held_out'])
    assert wc['held_out'] == pytest.approx(wc['hindsight'])


def test_one_repetition_has_no_winners_curse_and_main_prints_the_table(tmp_path, capsys):
    path = tmp_path / 'report.json'
    path.write_text(json.dumps(SPLIT))
    assert routing_ceiling.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert '| load | 1.000 | 4/4 | 1.000 | 4/4 | 0 |' in out
    assert "winner's curse: n/a" in out


def test_the_win_ceiling_counts_runs_only_an_after_the_fact_choice_could_win():
    # S1: a wins rep 0, b wins rep 1, both beat eevdf only in their own run; S2: eevdf is best.
    report = {'scenarios': [
        scenario('S1', 'game', 'build', {'a': [0.9, 0.1], 'b': [0.3, 0.8], 'eevdf': [0.5, 0.5]}),
        scenario('S2', 'audio', 'disk', {'a': [0.4, 0.4], 'b': [0.3, 0.3], 'eevdf': [0.6, 0.6]}),
    ]}
    wins = routing_ceiling.analyse(report)['win_ceiling']
    assert (wins['runs'], wins['scenarios']) == (4, 2)
    # Each run's best: both S1 runs; a scenario's best mean (b: 0.55 to a's 0.5): S1 rep 1 only; held out:
    # rep 0 takes b (its other run, 0.8), rep 1 takes a (0.9): both lose.
    assert (wins['per run'], wins['hindsight'], wins['held out']) == (2, 1, 0)
    assert wins['baseline'] == 'eevdf'


def test_no_win_ceiling_without_the_baseline_or_a_second_repetition():
    once = {'scenarios': [scenario('S1', 'game', 'build', {'a': [0.9], 'eevdf': [0.5]})]}
    assert routing_ceiling.analyse(once)['win_ceiling'] is None
    no_base = {'scenarios': [scenario('S1', 'game', 'build', {'a': [0.9, 0.8], 'b': [0.1, 0.2]})]}
    assert routing_ceiling.analyse(no_base)['win_ceiling'] is None
