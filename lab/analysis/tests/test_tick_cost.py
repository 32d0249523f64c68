import json

from asa_analysis import tick_cost


def line(sample_us, infer_us, decide_us, perception=None):
    cost = {'sample_us': sample_us, 'infer_us': infer_us, 'decide_us': decide_us}
    if perception is not None:
        cost['perception'] = perception
    return json.dumps({'schema': 'asa.decision', 'version': 1, 'cost': cost})


def perception(scan_us, processes, task_iter):
    return {'procfs': {'files_us': [100, 200, 300, 400, 500, 600], 'parse_us': 50,
                       'scan_us': scan_us, 'processes': processes, 'task_iter': task_iter},
            'bpf_us': 20, 'features_us': 10}


def test_the_first_tick_of_each_log_is_left_out():
    log = '\n'.join([line(99_000, 0, 0), line(1000, 2000, 0), line(3000, 0, 0)])
    values = tick_cost.collect([log])
    assert values['tick'] == [3.0, 3.0]
    assert values['perception'] == [1.0, 3.0]


def test_perception_parts_are_named_by_file_and_scan_source():
    log = '\n'.join([line(0, 0, 0), line(5000, 100, 10, perception(4000, 90, True)),
                     line(5000, 100, 10, perception(0, 0, False))])
    values = tick_cost.collect([log])
    assert values['/proc/net/snmp'] == [0.5, 0.5]
    assert values['process scan (task iterator)'] == [4.0]  # a reused scan is not counted
    assert values['processes scanned'] == [90.0]
    assert 'process scan (/proc/<pid>/stat)' not in values


def test_a_tick_after_glances_counts_them_and_the_cpu_of_one():
    glanced = json.loads(line(1000, 1000, 0))
    glanced['cost'].update({'glances': 4, 'glance_cpu_us': 800.0})
    values = tick_cost.collect(['\n'.join([line(0, 0, 0), json.dumps(glanced),
                                           line(1000, 1000, 0)])])
    assert values['glances before the tick'] == [4.0]
    assert values['glance CPU time'] == [0.2]
    assert len(values['tick']) == 2


def test_logs_without_perception_parts_give_the_three_totals_only():
    values = tick_cost.collect(['\n'.join([line(0, 0, 0), line(1000, 1000, 1000)])])
    assert sorted(values) == ['decision', 'inference', 'perception', 'tick']


def test_summary_quantiles_are_nearest_rank_in_ms():
    rows = tick_cost.summary({'tick': [float(v) for v in range(1, 101)]})
    assert rows == [{'part': 'tick', 'ticks': 100, 'p50': 51.0, 'p99': 99.0, 'max': 100.0}]


def test_main_reads_a_folder_and_prints_a_table(tmp_path, capsys):
    (tmp_path / 'agent').mkdir()
    (tmp_path / 'agent' / 'a.jsonl').write_text('\n'.join([line(0, 0, 0), line(2000, 0, 0)]))
    tick_cost.main([str(tmp_path)])
    out = capsys.readouterr().out
    assert '| tick | 1 | 2.00 | 2.00 | 2.00 |' in out


def test_main_without_logs_says_so(tmp_path):
    try:
        tick_cost.main([str(tmp_path)])
    except SystemExit as e:
        assert 'no decision-log' in str(e)
    else:
        raise AssertionError('expected SystemExit')


def test_the_tick_cpu_time_is_reported_where_the_log_has_it():
    rec = json.loads(line(5000, 1000, 0))
    rec['cost']['cpu_us'] = 2500
    values = tick_cost.collect(['\n'.join([line(0, 0, 0), json.dumps(rec)])])
    assert values['tick CPU time'] == [2.5]
    assert values['tick'] == [6.0]
