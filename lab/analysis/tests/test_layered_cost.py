import json

import pytest

from asa_analysis import layered_cost


def test_probe_cells_average_each_experts_repetitions():
    report = {'scenarios': [{'scenario': 'S10', 'runs': [
        {'expert': 'cosmos', 'score': 0.7, 'figures': {'value:input_latency_p50_ms': 6.0,
                                                       'value:input_latency_p99_ms': 20.0}},
        {'expert': 'cosmos', 'score': 0.5, 'figures': {'value:input_latency_p50_ms': 8.0,
                                                       'value:input_latency_p99_ms': 30.0}},
        {'expert': 'layered', 'score': None, 'figures': {}}]}]}
    cells = {c['expert']: c for c in layered_cost.probe_cells(report)}
    assert cells['cosmos']['reps'] == 2
    assert cells['cosmos']['score'] == pytest.approx(0.6)
    assert cells['cosmos']['latency_p50_ms'] == pytest.approx(7.0)
    assert cells['cosmos']['latency_p99_ms'] == pytest.approx(25.0)
    assert cells['layered']['score'] is None and cells['layered']['latency_p50_ms'] is None


def test_a_new_process_or_a_falling_counter_starts_a_new_bpf_segment():
    text = '\n'.join([
        '100.0 scx_cosmos 0 0',
        '102.0 scx_cosmos 200000000 1000',    # 0.1 of a CPU over 2 s, 200 us per call
        '110.0 scx_layered 0 0',
        '114.0 scx_layered 400000000 2000',
        '120.0 scx_layered 1000 10',          # restarted: counters fell
        '121.0 scx_layered 51000 20',
        'not a sample line'])
    segments = layered_cost.bpf_segments(text)
    assert [s['comm'] for s in segments] == ['scx_cosmos', 'scx_layered', 'scx_layered']
    assert segments[0]['bpf_cpu_share'] == pytest.approx(0.1)
    assert segments[0]['ns_per_call'] == pytest.approx(200000)
    assert segments[1]['calls_per_s'] == pytest.approx(500)
    assert segments[2]['seconds'] == pytest.approx(1.0) and segments[2]['ns_per_call'] == pytest.approx(5000)


MONITOR = """\x1b[33m WARN\x1b[0m something before the first block
━━ Sun, 29 Nov 2026 14:22:23 +0000 ━━━━
tot=      7 local_sel/enq=71.4/0.00
busy= 20.0 util/hi/lo=    5.5/40.5/0.00 fb_cpus=[0]/util= 0.0 proc=126ms sys_util_10s=  0.0
\u25b6 interactive \u2500 util/open/frac=   0.0/0.00/    0.0
  sched   tot=   10  dd_sel/enq=0.00/0.00 dsq/10s=0.00/0.00 wake/exp/re=90.0/10.0/0.00
  preempt preempt/first/xllc/xnuma/idle/fail=50.0/0.00/0.00/0.00/0.00/10.0
━━ Sun, 29 Nov 2026 14:22:25 +0000 ━━━━
busy= 80.0 util/hi/lo=  150.0/40.5/0.00 fb_cpus=[0]/util= 0.0 proc=300ms sys_util_10s=  0.0
\u25b6 interactive \u2500 util/open/frac=   0.0/0.00/    0.0
  sched   tot=  100  dd_sel/enq=0.00/0.00 dsq/10s=0.00/0.00 wake/exp/re=60.0/20.0/0.00
  preempt preempt/first/xllc/xnuma/idle/fail=60.0/0.00/0.00/0.00/0.00/10.0
\u25b6 cpu_batch \u2500 util/open/frac=   0.0/0.00/    0.0
  sched   tot=    0  dd_sel/enq=0.00/0.00 dsq/10s=0.00/0.00 wake/exp/re=0.00/0.00/0.00
━━ Sun, 29 Nov 2026 14:22:27 +0000 ━━━━
busy= 90.0 util/hi/lo=  150.0/40.5/0.00 fb_cpus=[0]/util= 0.0 proc=500ms sys_util_10s=  0.0
\u25b6 interactive \u2500 util/open/frac=   0.0/0.00/    0.0
  sched   tot=  300  dd_sel/enq=0.00/0.00 dsq/10s=0.00/0.00 wake/exp/re=60.0/40.0/0.00
  preempt preempt/first/xllc/xnuma/idle/fail=80.0/0.00/0.00/0.00/0.00/0.00
"""


def test_the_monitor_summary_weighs_layer_shares_by_events_over_busy_blocks():
    blocks = layered_cost.monitor_blocks(MONITOR)
    assert [b['proc_ms'] for b in blocks] == [126, 300, 500]
    summary = layered_cost.monitor_summary(blocks)
    assert summary['blocks'] == 2  # the idle first block is left out
    assert summary['user_space_cpu_share'] == pytest.approx(400 / 2000)
    interactive = summary['layers']['interactive']
    assert interactive['tot'] == 400
    assert interactive['preempt'] == pytest.approx((60 * 100 + 80 * 300) / 400)
    assert interactive['preempt_fail'] == pytest.approx(2.5)
    assert interactive['expired'] == pytest.approx(35.0)
    assert 'cpu_batch' not in summary['layers']  # no events
    assert layered_cost.monitor_summary(blocks[:1]) == {'blocks': 0}


def test_the_folder_analysis_reads_what_is_there(tmp_path):
    (tmp_path / 'hinted').mkdir()
    (tmp_path / 'hinted' / 'report.json').write_text(json.dumps({'scenarios': [{'scenario': 'S10', 'runs': [
        {'expert': 'cosmos', 'score': 0.7, 'figures': {'value:input_latency_p50_ms': 6.0}}]}]}))
    (tmp_path / 'layered-monitor.txt').write_text(MONITOR)
    result = layered_cost.analyse(str(tmp_path))
    assert list(result['passes']) == ['hinted'] and 'bpf' not in result
    assert result['layered_monitor']['blocks'] == 2
    out = tmp_path / 'a.json'
    assert layered_cost.main([str(tmp_path), '--json', str(out)]) == 0
    assert json.loads(out.read_text())['passes']['hinted'][0]['expert'] == 'cosmos'


def test_monitor_blocks_belong_to_the_expert_started_last_before_them():
    log = '\n'.join([
        '[2026-11-29T14:22:00.000Z INFO  asa_experts::process] started layered (pid 5), loading it',
        '[2026-11-29T14:22:26.000Z INFO  asa_experts::process] started layered-interval1 (pid 9), loading it',
        '[2026-11-29T14:22:26.500Z INFO  asa_scenarios::runner] [S10] run 2/4'])
    starts = layered_cost.expert_starts(log)
    assert [name for _, name in starts] == ['layered', 'layered-interval1']
    blocks = layered_cost.monitor_blocks(MONITOR)
    assert blocks[0]['time'] == pytest.approx(starts[0][0] + 23)
    split = layered_cost.by_expert(blocks, starts)
    assert [b['proc_ms'] for b in split['layered']] == [126, 300]
    assert [b['proc_ms'] for b in split['layered-interval1']] == [500]
