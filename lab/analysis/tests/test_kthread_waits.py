from asa_analysis import kthread_waits
from builders import MS, schedstat, stat

KTHREAD = 0x00200000


def snap(jbd2, rcu, user, kworker=(0, 0, 0)):
    return '\n'.join([
        stat(300, 300, 'jbd2/asa0-8', 'S', 0, KTHREAD), schedstat(300, 300, *jbd2),
        stat(10, 10, 'rcu_preempt', 'I', 1, KTHREAD), schedstat(10, 10, *rcu),
        stat(50, 50, 'kworker/0:1-events', 'I', 0, KTHREAD | 0x40), schedstat(50, 50, *kworker),
        stat(200, 201, 'sysbench', 'R', 1, 0x40), schedstat(200, 201, *user),
        stat(400, 400, 'no_schedstat', 'S', 0, KTHREAD),
    ])


BEFORE = snap((10 * MS, 5 * MS, 10), (1 * MS, 1 * MS, 5), (0, 0, 0))
AFTER = snap((30 * MS, 65 * MS, 30), (2 * MS, 3 * MS, 9), (900 * MS, 900 * MS, 99), (0, 0, 0))


def test_kthread_waits_snapshot_needs_both_stat_and_schedstat():
    snap_ = kthread_waits.snapshot(BEFORE)
    assert 400 not in snap_
    assert snap_[300] == ('jbd2/asa0-8', KTHREAD, (10 * MS, 5 * MS, 10))


def test_kthread_waits_keeps_kernel_threads_that_ran_longest_wait_first():
    rows = kthread_waits.kthread_waits(kthread_waits.snapshot(BEFORE), kthread_waits.snapshot(AFTER))
    assert rows == [(60 * MS, 20 * MS, 20, 'jbd2/asa0-8'), (2 * MS, 1 * MS, 4, 'rcu_preempt')]


def test_kthread_waits_top_lines_give_wait_run_slices_and_mean():
    rows = kthread_waits.kthread_waits(kthread_waits.snapshot(BEFORE), kthread_waits.snapshot(AFTER))
    assert kthread_waits.format_top('gru-1-mixed', rows, 1) == [
        'gru-1-mixed: kernel threads by total wait',
        '    jbd2/asa0-8                  wait     60.0 ms  run    20.0 ms  slices     20  mean'
        '     3000 µs']


def test_kthread_waits_match_keeps_names_with_the_prefix_or_prints_a_dash():
    rows = kthread_waits.kthread_waits(kthread_waits.snapshot(BEFORE), kthread_waits.snapshot(AFTER))
    assert kthread_waits.format_match('a', rows, 'jbd2') == [
        'a                            jbd2/asa0-8 wait 60.0 ms run 20.0 ms 20 slices mean 3000 µs']
    assert kthread_waits.format_match('a', rows, 'kswapd') == ['a' + ' ' * 28 + '-']


def test_kthread_waits_main_reads_every_snapshot_pair(tmp_path, capsys):
    for name in ('gru-1-mixed', 'eevdf-1-mixed'):
        (tmp_path / f'ss-{name}-0.txt').write_text(BEFORE)
        (tmp_path / f'ss-{name}-1.txt').write_text(AFTER)
    kthread_waits.main(['--match', 'rcu', str(tmp_path)])
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out] == ['eevdf-1-mixed', 'gru-1-mixed']
    kthread_waits.main(['--top', '5', str(tmp_path), 'gru-1-mixed'])
    assert len(capsys.readouterr().out.splitlines()) == 3
