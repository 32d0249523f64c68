"""The paired feature-version comparison: same held-out runs for every version, each version
trained on the recordings that hold its features."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from asa_classifier import compare
from asa_classifier.schema import FeatureSchema, SchemaMismatch


def write_manifest(directory, version, runs_per_class, rng, prefix):
    """Classes differ only in feature `c` (added in v2); `a` and `b` are noise."""
    directory.mkdir()
    entries = []
    for k, label in enumerate(["office+idle", "game+xz_compress"]):
        for r in range(runs_per_class):
            name = f"{prefix}-{k}-{r}"
            columns = {"a": rng.normal(size=20), "b": rng.normal(size=20), "label": [label] * 20}
            if version >= 2:
                columns["c"] = rng.normal(size=20) * 0.2 + 3.0 * k
            pq.write_table(pa.table(columns), directory / f"{name}.parquet")
            entries.append(f'[[run]]\nname = "{name}"\nfile = "{name}.parquet"\n')
    (directory / "manifest.toml").write_text(
        f'schema = "asa.dataset"\nversion = 1\nfeature_schema = "s"\nfeature_schema_version = {version}\n'
        'machine = "pytest"\n\n' + "\n".join(entries))
    return directory / "manifest.toml"


def test_versions_share_held_out_runs_and_use_the_recordings_they_can(tmp_path):
    path = tmp_path / "feature_schema.toml"
    path.write_text('schema = "s"\nversion = 2\n[[feature]]\nname = "a"\n[[feature]]\nname = "b"\n'
                    '[[feature]]\nname = "c"\nsince = 2\n')
    schema = FeatureSchema.load(path)
    rng = np.random.default_rng(3)
    new = write_manifest(tmp_path / "new", 2, 4, rng, "new")
    old = write_manifest(tmp_path / "old", 1, 6, rng, "old")
    report = compare.compare(schema, [new], [old], ["1", "2", "2+older"], splits=2, small=True)
    by = {(r["variant"], r["seed"]): r for r in report["results"]}
    for seed in (0, 1):
        held = report["heldout"][str(seed)]
        assert held and all(name.startswith("new-") for name in held)
        # Same held-out ticks; v1 also trains on the 12 old runs, v2 cannot use them.
        assert by[("1", seed)]["heldout_runs"] == by[("2", seed)]["heldout_runs"] == len(held)
        assert by[("1", seed)]["train_runs"] == by[("2", seed)]["train_runs"] + 12
        assert by[("2", seed)]["skipped_manifests"] == [str(old)] and by[("1", seed)]["skipped_manifests"] == []
        # `+older`: the old runs too, `c` missing on their ticks.
        assert by[("2+older", seed)]["train_runs"] == by[("1", seed)]["train_runs"]
        assert by[("2+older", seed)]["skipped_manifests"] == []
        # Only v2's feature separates the classes.
        assert by[("2", seed)]["voted"] == by[("2+older", seed)]["voted"] == 1.0
        assert by[("1", seed)]["raw"] < 0.9
    text = compare.markdown(report)
    assert "| v1 (2) | 18-18 |" in text and "| v2 (3) | 6-6 |" in text and "| v2+older (3) | 18-18 |" in text
    assert "xz_compress" in text
    # The held-out recording must hold every compared version.
    with pytest.raises(SchemaMismatch):
        compare.compare(schema, [old], [new], ["1", "2"], splits=1, small=True)
    with pytest.raises(ValueError, match="expected N, N\\+older"):
        compare.compare(schema, [new], [old], ["2+newer"], splits=1, small=True)
    # `-ignored`: the same training without the separating feature: chance, on the same runs.
    report = compare.compare(schema, [new], [old], ["2+older", "2+older-ignored"], splits=1, small=True, ignore=("c",))
    by = {r["variant"]: r for r in report["results"]}
    assert by["2+older"]["voted"] == 1.0 and by["2+older-ignored"]["raw"] < 0.9
    assert by["2+older"]["heldout_runs"] == by["2+older-ignored"]["heldout_runs"]
    assert "`-ignored`: without `c`" in compare.markdown(report)
    with pytest.raises(ValueError, match="needs --ignore-features"):
        compare.compare(schema, [new], [old], ["2-ignored"], splits=1, small=True)


def test_cli_writes_both_reports(tmp_path):
    path = tmp_path / "feature_schema.toml"
    path.write_text('schema = "s"\nversion = 2\n[[feature]]\nname = "a"\n[[feature]]\nname = "b"\n'
                    '[[feature]]\nname = "c"\nsince = 2\n')
    new = write_manifest(tmp_path / "new", 2, 3, np.random.default_rng(4), "new")
    compare.main(["--feature-schema", str(path), "--heldout-from", str(new), "--versions", "2",
                  "--splits", "1", "--out", str(tmp_path / "out")])
    assert (tmp_path / "out" / "compare.json").exists() and "| v2 (3) |" in (tmp_path / "out" / "compare.md").read_text()


def test_xgboost_settings_are_paired_on_the_same_runs(tmp_path):
    path = tmp_path / "feature_schema.toml"
    path.write_text('schema = "s"\nversion = 2\n[[feature]]\nname = "a"\n[[feature]]\nname = "b"\n'
                    '[[feature]]\nname = "c"\nsince = 2\n')
    new = write_manifest(tmp_path / "new", 2, 4, np.random.default_rng(6), "new")
    settings = {"production": {}, "stump": {"n_estimators": 1, "max_depth": 1}}
    report = compare.compare(FeatureSchema.load(path), [new], [], ["2"], splits=3, small=True, xgboost=settings)
    by = {(r["variant"], r["seed"]): r for r in report["results"]}
    assert {v for v, _ in by} == {"2 production", "2 stump"}
    for seed in range(3):
        assert by[("2 production", seed)]["heldout_runs"] == by[("2 stump", seed)]["heldout_runs"]
        assert by[("2 stump", seed)]["xgboost"] == settings["stump"]
    text = compare.markdown(report)
    assert "Paired with v2 production" in text and "| v2 stump | " in text and text.count("/3)") == 2
    out = tmp_path / "out"
    with pytest.raises(SystemExit):
        compare.main(["--feature-schema", str(path), "--heldout-from", str(new), "--versions", "2",
                      "--xgboost", "d6={max_depth: 6}", "--out", str(out)])
    compare.main(["--feature-schema", str(path), "--heldout-from", str(new), "--versions", "2", "--splits", "1",
                  "--xgboost", 'd2={"max_depth": 2}', "--out", str(out)])
    assert "| v2 d2 (3) |" in (out / "compare.md").read_text()
