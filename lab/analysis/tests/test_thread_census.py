import re

from asa_analysis import thread_census


def snap(label, pid, tid, comm, utime, stime, vol, invol):
    return f'{label} {pid} {tid} {comm} {utime} {stime} {vol} {invol}'


CENSUS = '\n'.join([
    'memavail_kib boot 3612512',
    snap('run0', 284, 284, 'asa', 245, 71, 186, 106),
    snap('run0', 284, 307, 'decision', 31, 10, 36, 19),
    snap('run0', 284, 320, 'attach-gate-300', 0, 6, 154, 5),
    snap('run0', 284, 321, 'attach-gate-310', 0, 7, 150, 5),
    snap('run0', 284, 330, 'probe', 1, 1, 1, 1),
    snap('run0', 300, 300, 'scx_cosmos', 50, 50, 100, 0),
    snap('run0', 300, 301, 'scx_cosmos', 0, 0, 1, 0),
    snap('run1', 284, 284, 'asa', 255, 80, 311, 108),
    snap('run1', 284, 307, 'decision', 40, 15, 68, 21),
    snap('run1', 284, 320, 'attach-gate-300', 0, 12, 311, 5),
    snap('run1', 284, 321, 'attach-gate-310', 1, 12, 309, 5),
    snap('run1', 284, 340, 'control-socket', 1, 0, 3, 0),
    snap('run1', 300, 300, 'scx_cosmos', 51, 51, 132, 0),
    snap('run1', 300, 301, 'scx_cosmos', 0, 0, 1, 0),
    'done',
])


def test_a_window_is_each_name0_snapshot_with_its_name1():
    snapshots, memavail = thread_census.parse(CENSUS + '\n' + snap('pin0', 1, 1, 'asa', 0, 0, 0, 0))
    assert thread_census.windows(snapshots) == [('run', 'run0', 'run1')]
    assert memavail == {'boot': 3612512}


def test_threads_are_diffed_and_grouped_by_role():
    window = thread_census.census(CENSUS)['windows'][0]
    roles = window['roles']
    assert roles['asa (main)'] == {'cpu_ticks': 19, 'wakeups': 125, 'preempted': 2, 'threads': 1}
    assert roles['asa/decision'] == {'cpu_ticks': 14, 'wakeups': 32, 'preempted': 2, 'threads': 1}
    # the gates of two experts share a role, their -PID suffix dropped
    assert roles['asa/attach-gate'] == {'cpu_ticks': 12, 'wakeups': 316, 'preempted': 0,
                                       'threads': 2}
    assert roles['scx_cosmos'] == {'cpu_ticks': 0, 'wakeups': 0, 'preempted': 0, 'threads': 1}
    assert roles['scx_cosmos (main)']['wakeups'] == 32


def test_a_thread_born_inside_the_window_counts_from_zero_and_one_that_ended_is_named():
    window = thread_census.census(CENSUS)['windows'][0]
    assert window['roles']['asa/control-socket'] == {'cpu_ticks': 1, 'wakeups': 3,
                                                     'preempted': 0, 'threads': 1}
    assert window['gone'] == ['asa/probe']
    assert window['total'] == {'cpu_ticks': 19 + 14 + 12 + 1 + 2, 'wakeups': 125 + 32 + 316 + 3 + 32,
                               'preempted': 4}


def test_render_prints_seconds_and_leaves_out_idle_threads():
    text = thread_census.render(thread_census.census(CENSUS), hz=100)
    assert 'asa (main)' in text and '0.19' in text
    assert 'asa/attach-gate ×2' in text
    assert not re.search(r'^\s+scx_cosmos\s+\d', text, re.M)  # its idle thread
    assert 'ended inside the window: asa/probe' in text


def test_main_refuses_a_file_without_a_pair(tmp_path):
    path = tmp_path / 'census'
    path.write_text(snap('run0', 1, 1, 'asa', 0, 0, 0, 0) + '\n')
    try:
        thread_census.main([str(path)])
    except SystemExit as stop:
        assert 'no NAME0/NAME1 snapshot pair' in str(stop.code)
    else:
        raise AssertionError('main accepted a census without a window')
