import json

from asa_analysis import progdiff

BEFORE = [{'id': 1, 'type': 'struct_ops', 'name': 'gru_enqueue', 'run_cnt': 100, 'run_time_ns': 50_000},
          {'id': 2, 'type': 'struct_ops', 'name': 'gru_idle', 'run_cnt': 7, 'run_time_ns': 700},
          {'id': 3, 'type': 'tracing', 'name': 'probe', 'run_cnt': 0, 'run_time_ns': 0}]
AFTER = [{'id': 1, 'type': 'struct_ops', 'name': 'gru_enqueue', 'run_cnt': 100_100, 'run_time_ns': 50_050_000},
         {'id': 2, 'type': 'struct_ops', 'name': 'gru_idle', 'run_cnt': 7, 'run_time_ns': 700},
         {'id': 3, 'type': 'tracing', 'name': 'probe', 'run_cnt': 5000, 'run_time_ns': 10**9},
         {'id': 4, 'type': 'struct_ops', 'name': 'gru_running', 'run_cnt': 2000, 'run_time_ns': 600_000}]


def test_progdiff_counts_struct_ops_programs_that_ran_matched_by_id():
    assert progdiff.prog_diff(BEFORE, AFTER) == [('gru_enqueue', 100_000, 50_000_000),
                                                 ('gru_running', 2000, 600_000)]


def test_progdiff_lines_give_calls_per_second_ns_per_call_and_cpu_share():
    out = progdiff.format_diff('gru', progdiff.prog_diff(BEFORE, AFTER))
    assert out == ['== gru',
                   '  gru_enqueue                  10000/s     500 ns/call   0.50 %',
                   '  gru_running                    200/s     300 ns/call   0.01 %',
                   '  total 0.51 % of one CPU']


def test_progdiff_seconds_scale_rates_and_shares():
    out = progdiff.format_diff('gru', [('op', 1000, 10**9)], seconds=5)
    assert out[1] == '  op                             200/s 1000000 ns/call  20.00 %'


def test_progdiff_main_prints_every_tag_sorted(tmp_path, capsys):
    for tag in ('gru-e2', 'eevdf'):
        (tmp_path / f'progs-{tag}-before.json').write_text(json.dumps(BEFORE))
        (tmp_path / f'progs-{tag}-after.json').write_text(json.dumps(AFTER))
    progdiff.main([str(tmp_path) + '/'])
    out = capsys.readouterr().out.splitlines()
    assert [line for line in out if line.startswith('==')] == ['== eevdf', '== gru-e2']
    assert len(out) == 8
