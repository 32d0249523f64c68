"""Across machine shapes: train on one shape's recordings, test on every run of another."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from asa_classifier import shapes
from conftest import CLASSES, SCHEMA, write_run


def write_shape(directory, rng, runs_per_class, classes=CLASSES, runq_offset=0.0):
    """A recording of `classes`; `runq_offset` moves `runq_len` (a count that grows with CPUs)."""
    directory.mkdir()
    entries = []
    for c, label in enumerate(classes):
        for r in range(runs_per_class):
            name = f"{directory.name}-{label.replace('+', '_')}-{r}"
            path = directory / f"{name}.parquet"
            write_run(path, label, 20, rng, 2.5 * CLASSES.index(label))
            if runq_offset:
                table = pq.read_table(path).to_pydict()
                table["runq_len"] = [v + runq_offset for v in table["runq_len"]]
                pq.write_table(pa.table(table), path)
            entries.append(f'[[run]]\nname = "{name}"\nfile = "{name}.parquet"\n')
    (directory / "manifest.toml").write_text(
        'schema = "asa.dataset"\nversion = 1\nfeature_schema = "asa.features.test"\nfeature_schema_version = 3\n'
        f'machine = "pytest {directory.name}"\n\n' + "\n".join(entries))
    return directory / "manifest.toml"


def test_each_shape_is_tested_on_every_run_of_the_other(tmp_path):
    rng = np.random.default_rng(7)
    small = write_shape(tmp_path / "two", rng, 4)
    big = write_shape(tmp_path / "four", rng, 2)
    report = shapes.shapes(SCHEMA, [("2cpu", [small]), ("4cpu", [big])], splits=2, small=True)
    by = {(p["train"], p["test"]): p for p in report["pairs"]}
    assert set(by) == {("2cpu", "4cpu"), ("4cpu", "2cpu")}
    assert by[("2cpu", "4cpu")]["train_runs"] == 12 and by[("2cpu", "4cpu")]["test_runs"] == 6
    assert by[("4cpu", "2cpu")]["test_runs"] == 12 and by[("4cpu", "2cpu")]["ticks"] == 240
    assert report["heldout_shape_accuracy"] == min(p["voted"] for p in report["pairs"])
    assert report["shapes"]["2cpu"]["within"]["splits"] == 2
    assert report["classes"] == sorted(["idle", "kernel_build", "disk_io"])
    assert "| 2cpu | 4cpu | 12 | 6 |" in shapes.markdown(report)


def test_a_feature_that_moves_with_the_shape_tops_the_drift(tmp_path):
    rng = np.random.default_rng(8)
    small = write_shape(tmp_path / "two", rng, 4)
    same = write_shape(tmp_path / "same", rng, 4)
    moved = write_shape(tmp_path / "moved", rng, 4, runq_offset=8.0)
    steady = shapes.shapes(SCHEMA, [("a", [small]), ("b", [same])], splits=1, small=True)
    shifted = shapes.shapes(SCHEMA, [("a", [small]), ("b", [moved])], splits=1, small=True)
    top = shifted["drift"]["a->b"][0]
    assert top["feature"] == "runq_len" and top["robust_z"] > 3
    assert abs(steady["drift"]["a->b"][0]["robust_z"]) < 3
    # The classes are told apart by other features: the move alone must not hide them.
    assert steady["heldout_shape_accuracy"] > 0.9


def test_only_the_classes_every_shape_has_are_compared(tmp_path):
    rng = np.random.default_rng(9)
    full = write_shape(tmp_path / "full", rng, 3)
    part = write_shape(tmp_path / "part", rng, 3, classes=CLASSES[:2])
    report = shapes.shapes(SCHEMA, [("full", [full]), ("part", [part])], splits=1, small=True)
    assert report["classes"] == ["idle", "kernel_build"]
    assert report["shapes"]["full"]["runs"] == 6


def test_a_malformed_shape_is_refused():
    with pytest.raises(ValueError, match="NAME=MANIFEST"):
        shapes.parse_shape("4cpu")
    with pytest.raises(ValueError, match="at least two shapes"):
        shapes.shapes(SCHEMA, [("only", [])])
    assert shapes.parse_shape("4cpu=a/m.toml,b/m.toml") == ("4cpu", [shapes.Path("a/m.toml"), shapes.Path("b/m.toml")])


def test_pairs_can_be_limited_to_one_direction(tmp_path):
    rng = np.random.default_rng(10)
    a = write_shape(tmp_path / "a", rng, 3)
    b = write_shape(tmp_path / "b", rng, 2)
    report = shapes.shapes(SCHEMA, [("a", [a]), ("b", [b])], splits=1, small=True, only=[("a", "b")])
    assert [(p["train"], p["test"]) for p in report["pairs"]] == [("a", "b")]
    with pytest.raises(ValueError, match="both must be shapes given"):
        shapes.shapes(SCHEMA, [("a", [a]), ("b", [b])], splits=1, small=True, only=[("a", "c")])
    assert shapes.parse_pair("2cpu->4cpu") == ("2cpu", "4cpu")
    with pytest.raises(ValueError, match="TRAIN->TEST"):
        shapes.parse_pair("2cpu")


def test_recording_half_of_the_new_shape_recovers_a_shape_that_moved_a_class_feature(tmp_path):
    rng = np.random.default_rng(11)
    small = write_shape(tmp_path / "two", rng, 4)
    moved = write_shape(tmp_path / "moved", rng, 4)
    # On the new shape, the kernel build looks like disk I/O did on the old one (feature 0 and 2).
    for path in (tmp_path / "moved").glob("*kernel_build*.parquet"):
        table = pq.read_table(path).to_pydict()
        table["cpu_user"] = [v + 2.5 for v in table["cpu_user"]]
        table["ctx_switches_per_s"] = [v - 1.25 for v in table["ctx_switches_per_s"]]
        table["runq_len"] = [v + 6.0 for v in table["runq_len"]]
        pq.write_table(pa.table(table), path)
    report = shapes.shapes(SCHEMA, [("two", [small]), ("moved", [moved])], splits=1, small=True,
                           only=[("two", "moved")])
    pair = report["pairs"][0]
    assert pair["voted_recall"]["kernel_build"] < 0.5
    assert pair["voted_confused_with"]["kernel_build"] == "disk_io"
    assert pair["adapted"]["folds"] == 2 and pair["adapted"]["ticks"] == 240
    assert pair["adapted"]["voted"] > pair["voted"] + 0.2


def test_unions_of_shapes_train_on_both_and_are_not_counted_as_shapes(tmp_path):
    rng = np.random.default_rng(12)
    two = write_shape(tmp_path / "two", rng, 3)
    three = write_shape(tmp_path / "three", rng, 2)
    four = write_shape(tmp_path / "four", rng, 2)
    named = [("2cpu", [two]), ("3cpu", [three]), ("4cpu", [four]),
             ("2+4cpu", [two, four]), ("2+3cpu", [two, three])]
    assert shapes.base_shapes(named) == ["2cpu", "3cpu", "4cpu"]
    report = shapes.shapes(SCHEMA, named, splits=1, small=True,
                           only=[("2+4cpu", "3cpu"), ("2+3cpu", "4cpu")])
    by = {(p["train"], p["test"]): p for p in report["pairs"]}
    assert by[("2+4cpu", "3cpu")]["train_runs"] == 9 + 6
    figures = shapes.summary(report, named, ("2+4cpu", "3cpu"), ("2+3cpu", "4cpu"))
    assert figures["shapes"] == 3 and figures["classes"] == 3
    assert figures["heldout_shape_accuracy"] == by[("2+4cpu", "3cpu")]["voted"]
    assert figures["beyond_trained_shapes_accuracy"] == by[("2+3cpu", "4cpu")]["voted"]
    assert figures["holds_between_trained_shapes"] == (figures["heldout_shape_accuracy"] >= 0.95)
    assert set(figures["pairs_voted"]) == {"2+4cpu->3cpu", "2+3cpu->4cpu"}
    with pytest.raises(ValueError, match="was not evaluated"):
        shapes.summary(report, named, ("2cpu", "3cpu"))
