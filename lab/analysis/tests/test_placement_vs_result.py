import io
import json
import tarfile

import pytest

from asa_analysis import placement_vs_result
from builders import three_samples


def runs():
    return [
        {'row': 'mixed-cpu', 'scheduler': 'eevdf', 'round': 1, 'sysbench': {'events_per_s': 90.5}},
        {'row': 'mixed-io', 'scheduler': 'eevdf', 'round': 1, 'sysbench': {'events_per_s': 3100.2}},
        {'row': 'mixed-cpu', 'scheduler': 'gru', 'round': 1, 'sysbench': {'events_per_s': 80.0}},
        {'row': 'mixed-io', 'scheduler': 'gru', 'round': 1, 'sysbench': None},
        {'row': 'cpu1', 'scheduler': 'eevdf', 'round': 1, 'sysbench': {'events_per_s': 1.0}},
    ]


def test_placement_round_results_keep_both_mixed_parts_per_round():
    results = placement_vs_result.round_results(runs())
    assert results == {('eevdf', 1): {'mixed-cpu': 90.5, 'mixed-io': 3100.2},
                       ('gru', 1): {'mixed-cpu': 80.0}}


def test_placement_join_skips_warmup_and_rounds_missing_a_part():
    results = placement_vs_result.round_results(runs())
    samples = [('thr-eevdf-1-mixed.txt', three_samples()), ('thr-gru-1-mixed.txt', three_samples()),
               ('thr-warmup-0-mixed.txt', three_samples())]
    rows = placement_vs_result.join(results, samples)
    assert rows == [('eevdf', 1, pytest.approx(2.5 / 1.5), 90.5, 3100.2)]


def test_placement_round_without_io_intervals_is_left_out():
    results = placement_vs_result.round_results(runs())
    assert placement_vs_result.join(results, [('thr-eevdf-1-mixed.txt', '@ 0\n')]) == []


def test_placement_folder_label_drops_the_date():
    assert placement_vs_result.folder_label('r/2026-11-27-vm-compare-qemu10-mixed-wchan/') == 'mixed-wchan'
    assert placement_vs_result.folder_label('2026-11-27-gru-mixed-load-mttcg') == 'gru-mixed-load-mttcg'


def test_placement_rows_sorted_by_scheduler_then_io_threads_on_cpu1():
    out = placement_vs_result.format_rows([('b', 'gru', 2, 0.5, 80.0, 3000.0),
                                           ('a', 'gru', 1, 1.5, 81.0, 2900.0),
                                           ('a', 'eevdf', 3, 2.0, 90.0, 3100.4)])
    assert out[0] == 'run                    scheduler        round  I/O threads on cpu1  CPU part  I/O part'
    assert [line.split()[:3] for line in out[1:]] == [['a', 'eevdf', '3'], ['b', 'gru', '2'],
                                                      ['a', 'gru', '1']]
    assert out[1] == 'a                      eevdf                3                 2.00      90.0      3100'


def write_folder(folder, packed):
    folder.mkdir()
    (folder / 'runs.json').write_text(json.dumps({'runs': runs()}))
    data = three_samples().encode()
    if packed:
        with tarfile.open(folder / 'samples.tar.xz', 'w:xz') as tar:
            info = tarfile.TarInfo('thr/thr-eevdf-1-mixed.txt')
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    else:
        (folder / 'guest').mkdir()
        (folder / 'guest' / 'thr-eevdf-1-mixed.txt').write_bytes(data)


def test_placement_main_reads_samples_packed_or_loose(tmp_path, capsys):
    write_folder(tmp_path / '2026-11-27-packed', packed=True)
    write_folder(tmp_path / '2026-11-27-loose', packed=False)
    placement_vs_result.main([str(tmp_path / '2026-11-27-packed'), str(tmp_path / '2026-11-27-loose')])
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out[1:]] == ['loose', 'packed']
    assert out[2] == 'packed                 eevdf                1                 1.67      90.5      3100'
