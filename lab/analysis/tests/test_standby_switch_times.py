import json

from asa_analysis import standby_switch_times


def switch(frm, to, total_ms, gap_ms, stop_ms=100, start_ms=50, standby=False):
    return {'from': frm, 'to': to, 'total_ms': total_ms, 'eevdf_gap_ms': gap_ms,
            'stop_ms': stop_ms, 'start_ms': start_ms, 'standby': standby}


def test_the_table_gives_medians_per_pair_for_gate_and_standby(tmp_path, capsys):
    gate = {'switches': [switch('bpfland', 'rusty', 4000, 150), switch('bpfland', 'rusty', 6000, 170)]}
    standby = {'switches': [switch('bpfland', 'rusty', 300, 90, standby=True),
                            switch('bpfland', 'rusty', 500, 110, standby=True)],
               'parked': [{'expert': 'rusty', 'load_ms': 3100, 'rss_kib': 7885}]}
    (tmp_path / 'gate-r1.json').write_text(json.dumps(gate))
    (tmp_path / 'standby-r1.json').write_text(json.dumps(standby))
    standby_switch_times.main([str(tmp_path)])
    out = capsys.readouterr().out
    assert '| bpfland → rusty | 5.00 | 0.40 | 160 | 100 | 100 | 50 | 2 / 2 |' in out
    assert '| rusty | 3.1 | 7.7, 7.7 | 1 |' in out
    assert 'all 2 through the parked standby' in out
