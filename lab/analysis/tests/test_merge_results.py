import json

import pytest

from asa_analysis import anchor_drift, merge_results

CATALOGUE = 'schema = "asa.scenarios"\n'


def run(expert, score=None):
    r = {'expert': expert, 'rep': 0, 'pinned': expert, 'valid': True}
    if score is not None:
        r['score'] = score
    return r


def scenario(name, experts, probe='game', skipped=(), error=None):
    return {'scenario': name, 'title': name + ' title', 'probe': probe,
            'runs': [run(e) for e in experts], 'error': error,
            'skipped': [{'expert': e, 'rep': 0, 'reason': 'could not pin'} for e in skipped]}


def results(experts, scenarios, created=1, work_unit=1000.0):
    return {'schema': 'asa.scenario-results', 'version': 1, 'created_unix_ms': created,
            'machine': {'hostname': 'asa-lab'},
            'options': {'experts': experts, 'reps': 1, 'work_unit': {'iterations_per_ms': work_unit}},
            'catalogue_toml': CATALOGUE, 'scenarios': scenarios}


BASE = results(['eevdf', 'cosmos', 'flash', 'p2dq'], [
    scenario('S1', ['eevdf', 'cosmos', 'flash', 'p2dq']),
    scenario('S2', ['eevdf', 'cosmos', 'flash', 'p2dq'], skipped=['flash']),
    scenario('S3', ['eevdf', 'cosmos', 'flash', 'p2dq']),
], created=1, work_unit=1000.0)

# The later run: two variants and the anchors, S3 left out, P1 new.
NEW = results(['cosmos', 'flash', 'cosmos-nosync', 'flash-lag5'], [
    scenario('S1', ['cosmos', 'flash', 'cosmos-nosync', 'flash-lag5']),
    scenario('S2', ['cosmos', 'flash', 'cosmos-nosync', 'flash-lag5'], skipped=['cosmos-nosync'],
             error='late'),
    scenario('P1', ['cosmos', 'flash', 'cosmos-nosync', 'flash-lag5'], probe='web'),
], created=2, work_unit=900.0)


def experts_of(s):
    return [r['expert'] for r in s['runs']]


def test_replace_takes_the_anchors_from_the_new_run_and_adds_its_experts():
    merged = merge_results.merge(BASE, NEW)
    assert merged['options']['experts'] == ['eevdf', 'cosmos', 'flash', 'p2dq', 'cosmos-nosync', 'flash-lag5']
    s1 = merged['scenarios'][0]
    assert experts_of(s1) == ['eevdf', 'p2dq', 'cosmos', 'flash', 'cosmos-nosync', 'flash-lag5']
    # The old flash skip goes with the old flash; the new run's skip stays, and its error.
    s2 = merged['scenarios'][1]
    assert [k['expert'] for k in s2['skipped']] == ['cosmos-nosync']
    assert s2['error'] == 'late'
    # A scenario only the base ran keeps all its runs; one only the new ran is added.
    assert [s['scenario'] for s in merged['scenarios']] == ['S1', 'S2', 'S3', 'P1']
    assert experts_of(merged['scenarios'][2]) == ['eevdf', 'cosmos', 'flash', 'p2dq']
    assert experts_of(merged['scenarios'][3]) == ['cosmos', 'flash', 'cosmos-nosync', 'flash-lag5']
    # The base's machine and work unit stay; both sources are recorded.
    assert merged['options']['work_unit'] == {'iterations_per_ms': 1000.0}
    assert [m['role'] for m in merged['merged_from']] == ['base', 'new']
    assert merged['merged_from'][1]['work_unit'] == {'iterations_per_ms': 900.0}
    assert merged['merged_from'][1]['scenarios'] == ['S1', 'S2', 'P1']


def test_the_inputs_are_left_unchanged():
    before = json.dumps([BASE, NEW], sort_keys=True)
    merge_results.merge(BASE, NEW)
    merge_results.merge(BASE, NEW, anchors='keep')
    assert json.dumps([BASE, NEW], sort_keys=True) == before


def test_keep_renames_the_new_runs_of_the_anchors():
    merged = merge_results.merge(BASE, NEW, anchors='keep', suffix='@new')
    assert merged['options']['experts'] == ['eevdf', 'cosmos', 'flash', 'p2dq', 'cosmos@new', 'flash@new',
                                            'cosmos-nosync', 'flash-lag5']
    assert experts_of(merged['scenarios'][0]) == ['eevdf', 'cosmos', 'flash', 'p2dq', 'cosmos@new', 'flash@new',
                                                  'cosmos-nosync', 'flash-lag5']
    assert [k['expert'] for k in merged['scenarios'][1]['skipped']] == ['flash', 'cosmos-nosync']
    assert experts_of(merged['scenarios'][3])[:2] == ['cosmos@new', 'flash@new']


def test_only_new_scenarios_gives_every_expert_every_scenario():
    merged = merge_results.merge(BASE, NEW, only_new_scenarios=True)
    assert [s['scenario'] for s in merged['scenarios']] == ['S1', 'S2', 'P1']


def test_runs_of_different_scenario_files_or_schemas_are_refused():
    other = dict(NEW, catalogue_toml=CATALOGUE + '# changed\n')
    with pytest.raises(ValueError, match='catalogue_toml'):
        merge_results.merge(BASE, other)
    with pytest.raises(ValueError, match='schema'):
        merge_results.merge(BASE, dict(NEW, version=3))
    with pytest.raises(ValueError, match='base is results version 1, new version 2'):
        merge_results.merge(BASE, dict(NEW, version=2))
    merged = merge_results.merge(dict(BASE, version=2), dict(NEW, version=2))
    assert merged['version'] == 2
    renamed_clash = results(['cosmos', 'cosmos@new'], [scenario('S1', ['cosmos', 'cosmos@new'])])
    with pytest.raises(ValueError, match='already'):
        merge_results.merge(BASE, renamed_clash, anchors='keep', suffix='@new')
    changed_probe = results(['cosmos'], [scenario('S1', ['cosmos'], probe='audio')])
    with pytest.raises(ValueError, match='probe'):
        merge_results.merge(BASE, changed_probe)


def test_main_writes_the_merge(tmp_path, capsys):
    base, new, out = tmp_path / 'base.json', tmp_path / 'new.json', tmp_path / 'merged.json'
    base.write_text(json.dumps(BASE))
    new.write_text(json.dumps(NEW))
    assert merge_results.main([str(base), str(new), '-o', str(out), '--anchors', 'keep', '@r2',
                               '--only-new-scenarios']) == 0
    merged = json.loads(out.read_text())
    assert 'cosmos@r2' in merged['options']['experts']
    assert len(merged['scenarios']) == 3
    assert '3 scenarios' in capsys.readouterr().out
    with pytest.raises(SystemExit):
        merge_results.main([str(base), str(new), '-o', str(out), '--anchors', 'keep'])


def report_scenario(name, loads):
    return {'scenario': name, 'runs': [{'expert': 'cosmos', 'parts': {'value:load:' + l: 0.5 for l in loads}}]}


REPORT = {'means': {
    'S1': {'cosmos': 0.50, 'cosmos@new': 0.60, 'flash': 0.4},
    'S2': {'cosmos': 0.70, 'cosmos@new': 0.66, 'flash': 0.5},
    'S3': {'cosmos': 0.30, 'flash': 0.2},
}, 'scenarios': [report_scenario('S1', ['disk']), report_scenario('S2', ['disk', 'idle']),
                 report_scenario('S3', ['build'])]}


def test_anchor_drift_summarises_the_later_minus_the_earlier_scores():
    d = anchor_drift.pair_drift(REPORT, 'cosmos', 'cosmos@new', floor=0.07)
    assert d['n'] == 2
    assert [r['scenario'] for r in d['rows']] == ['S1', 'S2']
    assert d['mean_diff'] == pytest.approx(0.03)
    assert d['se'] == pytest.approx(0.07)
    assert d['mean_abs_diff'] == pytest.approx(0.07)
    assert d['max_abs_diff'] == pytest.approx(0.10)
    assert d['beyond_floor'] == 1
    # S2 is phased (two loads): only S1 counts for its load.
    assert d['by_load'] == {'disk': {'n': 1, 'mean_diff': pytest.approx(0.10)}}
    assert anchor_drift.pair_drift(REPORT, 'flash', 'flash@new')['n'] == 0


def test_anchor_drift_main_prints_a_table(tmp_path, capsys):
    path = tmp_path / 'report.json'
    path.write_text(json.dumps(REPORT))
    assert anchor_drift.main([str(path), 'cosmos=cosmos@new', 'flash=flash@new']) == 0
    out = capsys.readouterr().out
    assert '| S1 | 0.500 | 0.600 | +0.100 |' in out
    assert '2 scenarios: mean difference +0.030 ± 0.070' in out
    assert 'per load (single-phase): disk +0.100 (1)' in out
    assert 'no scenario has both' in out
