import json

import pytest

from asa_analysis import task_census

LOG = '\n'.join([
    '[2026-11-29T18:00:00.000Z INFO  asa_scenarios::runner] [S1] Game Play (game) under cosmos, rep 1',
    '[2026-11-29T18:00:10.000Z INFO  asa_scenarios::loads] load archive_extract: starting `7zz x`',
    '[2026-11-29T18:00:16.000Z INFO  asa_scenarios::runner] [S1]   phase 1 archive_extract: 8.5 MiB/s',
    '[2026-11-29T18:00:16.000Z INFO  asa_scenarios::runner] [S1]   cosmos: fps=58.9 in 6.1 s',
    '[2026-11-29T18:01:00.000Z INFO  asa_scenarios::runner] [S1] Game Play (game) under layered, rep 1',
    '[2026-11-29T18:01:10.000Z INFO  asa_scenarios::loads] load archive_extract: starting `7zz x`',
    '[2026-11-29T18:01:10.010Z INFO  asa_agent::action::oracle_hints] oracle hints: group 172 interactive, group 381 cpu_batch',
    '[2026-11-29T18:01:16.000Z INFO  asa_scenarios::runner] [S1]   layered: fps=56.0 in 6.1 s',
    '[2026-11-29T18:02:00.000Z INFO  asa_scenarios::runner] [S1] Game Play (game) under layered, rep 2',
])
T0 = 1795975200.0  # 2026-11-29T18:00:00Z


def stat(pid, tid, comm, ppid, pgrp, flags=0):
    rest = f'S {ppid} {pgrp} {pgrp} 0 -1 {flags} 0 0'
    return f'/proc/{pid}/task/{tid}/stat:{tid} ({comm}) {rest}'


def sched(pid, tid, run_ns, wait_ns):
    return f'/proc/{pid}/task/{tid}/schedstat:{run_ns} {wait_ns} 10'


def snapshot(at, threads):
    lines = [f'=== {at}']
    for pid, tid, comm, ppid, pgrp, flags, run, wait in threads:
        lines += [stat(pid, tid, comm, ppid, pgrp, flags), sched(pid, tid, run, wait)]
    return '\n'.join(lines)


def test_log_stamps_are_utc():
    assert task_census.unix_of('2026-11-29T18:00:00') == T0


def test_runs_have_their_load_window_expert_and_hints():
    runs = task_census.parse_runs(LOG)
    assert [(r['expert'], r['rep']) for r in runs] == [('cosmos', 1), ('layered', 1)]
    assert runs[0]['start'] == T0 + 10 and runs[0]['end'] == T0 + 16
    assert runs[0]['hints'] == {}
    assert runs[1]['hints'] == {172: 'interactive', 381: 'cpu_batch'}


def test_a_run_without_hints_borrows_the_nearest_runs_groups():
    runs = task_census.parse_runs(LOG)
    assert task_census.stand_in_hints(runs) == [{172: 'interactive', 381: 'cpu_batch'}] * 2


def test_census_parses_threads_with_both_lines_and_skips_half_ones():
    text = snapshot(T0, [(5, 5, 'game loop', 1, 172, 0, 100, 7)]) + \
        f'\n{stat(6, 6, "lone", 1, 6)}\n'
    [(at, threads)] = task_census.parse_census(text)
    assert at == T0
    assert threads == {5: {'pid': 5, 'tid': 5, 'comm': 'game loop', 'ppid': 1, 'pgrp': 172,
                           'kthread': False, 'run_ns': 100, 'wait_ns': 7}}


def test_cpu_and_wait_are_summed_per_role_between_the_first_and_last_census():
    s = 1_000_000_000
    text = '\n'.join([
        snapshot(T0 + 9, [(5, 5, 'asa', 1, 172, 0, 0, 0)]),       # before the window
        snapshot(T0 + 10, [(5, 5, 'asa', 1, 172, 0, 1 * s, 0),
                           (50, 50, 'kworker/u8:1', 2, 0, task_census.PF_KTHREAD, 0, 0),
                           (70, 70, 'sh', 1, 70, 0, 0, 0)]),
        snapshot(T0 + 14, [(5, 5, 'asa', 1, 172, 0, 3 * s, s // 2),
                           (50, 50, 'kworker/u8:1', 2, 0, task_census.PF_KTHREAD, s, 0),
                           (70, 70, 'sh', 1, 70, 0, s // 2, s),
                           (90, 91, '7zz', 88, 381, 0, 2 * s, 0)]),   # born in the window
    ])
    rows = task_census.census(task_census.parse_census(text), task_census.parse_runs(LOG))
    cosmos = rows[0]
    assert cosmos['expert'] == 'cosmos' and cosmos['seconds'] == 4.0
    roles = cosmos['roles']
    assert roles['interactive (group)'] == {'cpus': 0.5, 'wait_cpus': 0.125, 'threads': 1}
    assert roles['cpu_batch (group)']['cpus'] == 0.5
    assert roles['kthread']['cpus'] == 0.25
    assert roles['unhinted'] == {'cpus': 0.125, 'wait_cpus': 0.25, 'threads': 1}
    assert [t['comm'] for t in cosmos['top_outside']] == ['kworker/u8:1', 'sh']


def test_a_reused_tid_counts_from_zero():
    s = 1_000_000_000
    text = '\n'.join([
        snapshot(T0 + 10, [(70, 70, 'sh', 1, 70, 0, 5 * s, 0)]),
        snapshot(T0 + 12, [(71, 70, 'sh', 1, 71, 0, s, 0)]),
    ])
    usage = task_census.run_usage(task_census.parse_census(text), T0 + 10, T0 + 16, {})
    assert usage['roles']['unhinted']['cpu_s'] == 1.0


def test_scheduler_processes_and_pid_2s_children_have_their_roles():
    assert task_census.role_of({'pgrp': 9, 'kthread': False, 'pid': 40, 'ppid': 1,
                                'comm': 'scx_layered'}, {}, True) == 'scheduler'
    assert task_census.role_of({'pgrp': 0, 'kthread': False, 'pid': 41, 'ppid': 2,
                                'comm': 'kswapd0'}, {}, True) == 'kthread'
    assert task_census.role_of({'pgrp': 172, 'kthread': False, 'pid': 5, 'ppid': 1,
                                'comm': 'asa'}, {172: 'interactive'}, True) == 'interactive'


def test_main_prints_and_writes_json(tmp_path, capsys):
    s = 1_000_000_000
    (tmp_path / 'hinted.log').write_text(LOG)
    (tmp_path / 'census.txt').write_text('\n'.join([
        snapshot(T0 + 10, [(5, 5, 'asa', 1, 172, 0, 0, 0)]),
        snapshot(T0 + 12, [(5, 5, 'asa', 1, 172, 0, s, 0)]),
    ]))
    out = tmp_path / 'census.json'
    assert task_census.main([str(tmp_path), '--json', str(out)]) == 0
    assert 'S1 cosmos rep 1 (2.0 s)' in capsys.readouterr().out
    assert json.loads(out.read_text())[0]['roles']['interactive (group)']['cpus'] == 0.5


def test_a_folder_without_a_census_says_how_to_get_one(tmp_path):
    with pytest.raises(SystemExit, match='CENSUS=1'):
        task_census.main([str(tmp_path)])
