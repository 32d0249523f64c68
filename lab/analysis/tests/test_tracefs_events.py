from asa_analysis import tracefs_events
from builders import stack, switch, wakeup


def test_tracefs_switch_pattern_takes_comms_with_spaces_and_dashes():
    m = tracefs_events.SW.match(switch(1, 46.071205, 'jbd2/asa0-8', 159, 'D', 'Web Content', 7))
    assert m.group(1, 2, 3, 4) == ('jbd2/asa0-8', '159', '001', '46.071205')
    assert m.group(5, 6, 7, 8, 9) == ('jbd2/asa0-8', '159', 'D', 'Web Content', '7')


def test_tracefs_wakeup_pattern_groups():
    m = tracefs_events.WK.match(wakeup(0, 1.5, 'sysbench', 42, 1, waker='sleep', waker_pid=256))
    assert m.group(1, 2, 3, 4, 5, 6, 7) == ('sleep', '256', '000', '1.500000', 'sysbench', '42', '001')


def test_tracefs_event_pattern_names_any_event():
    m = tracefs_events.EVENT.search('  <idle>-0 [000] dnh1.  46.071238: reschedule_entry: vector=253')
    assert m.group(1, 2, 3) == ('000', '46.071238', 'reschedule_entry:')


def test_tracefs_stack_after_reads_frames_until_the_next_event():
    lines = [switch(0, 1.0, 'a', 1, 'D', 'b', 2), *stack(0, 1.0, ['f', 'g']), wakeup(0, 1.1, 'a', 1, 0)]
    assert tracefs_events.stack_after(lines, 0) == ['f', 'g']
    assert tracefs_events.stack_after(lines, 3) is None
    assert tracefs_events.stack_after(lines, len(lines) - 1) is None
