"""Recording and schema-file reading on hand-made files."""

import numpy as np
import pytest

from asa_classifier.dataset import read_recording
from asa_classifier.schema import FeatureSchema


def test_schema_file_is_read_in_order(tmp_path):
    path = tmp_path / "feature_schema.toml"
    path.write_text('schema = "asa.features"\nversion = 2\n[[feature]]\nname = "b"\nunit = "%"\n'
                    '[[feature]]\nname = "a"\n')
    assert FeatureSchema.load(path) == FeatureSchema("asa.features", 2, ("b", "a"))
    path.write_text('schema = "asa.features"\n')
    with pytest.raises(ValueError, match="not a feature schema file"):
        FeatureSchema.load(path)


def test_csv_recording_with_missing_values_and_extra_columns(tmp_path):
    schema = FeatureSchema("s", 1, ("a", "b"))
    path = tmp_path / "run.csv"
    path.write_text("tick,b,a,label,host\n0,1.5,2,x,h\n1,nan,3,y,h\n")
    x, labels = read_recording(path, schema)
    assert x.dtype == np.float32 and x.shape == (2, 2)
    assert x[0].tolist() == [2.0, 1.5] and np.isnan(x[1, 1])
    assert labels == ["x", "y"]
    path.write_text("tick,a\n0,1\n")
    with pytest.raises(ValueError, match=r"lacks features .*\['b'\]"):
        read_recording(path, schema)
    path.write_text("a,b\n0,1\n")
    assert read_recording(path, schema, default_label="z")[1] == ["z"]
    with pytest.raises(ValueError, match="no label"):
        read_recording(path, schema)


def test_split_does_not_depend_on_string_hashing():
    """A run whose labels tie (a phased run: half one load, half another) is grouped under the
    same class in every interpreter: the split, and so the report of a committed model, must
    not change with PYTHONHASHSEED."""
    import subprocess
    import sys
    from pathlib import Path
    code = (
        "import numpy as np\n"
        "from asa_classifier.dataset import Run, split_by_run\n"
        "runs = [Run(f'r{i}', np.zeros((4, 1)), ['zstd'] * 2 + ['idle'] * 2) for i in range(6)]\n"
        "runs += [Run(f'i{i}', np.zeros((4, 1)), ['idle'] * 4) for i in range(6)]\n"
        "train, held = split_by_run(runs, 0.25, 0)\n"
        "print(sorted(r.name for r in held))\n")
    root = Path(__file__).resolve().parents[1]
    outputs = {subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True,
                              env={"PYTHONHASHSEED": str(seed), "PATH": "/usr/bin:/bin"}).stdout
               for seed in range(8)}
    assert len(outputs) == 1, outputs


def test_older_versions_of_the_schema_and_newer_recordings(tmp_path):
    path = tmp_path / "feature_schema.toml"
    path.write_text('schema = "s"\nversion = 2\n[[feature]]\nname = "a"\n[[feature]]\nname = "b"\n'
                    '[[feature]]\nname = "c"\nsince = 2\n')
    schema = FeatureSchema.load(path)
    assert schema.as_of(2) == schema
    v1 = schema.as_of(1)
    assert (v1.version, v1.features) == (1, ("a", "b"))
    with pytest.raises(ValueError, match="versions 1..2"):
        schema.as_of(3)
    path.write_text('schema = "s"\nversion = 2\n[[feature]]\nname = "c"\nsince = 2\n[[feature]]\nname = "a"\n')
    with pytest.raises(ValueError, match="never decreasing"):
        FeatureSchema.load(path)

    # A v2 recording serves a v1 training (by name); a v1 recording cannot serve a v2 one.
    from asa_classifier.dataset import load_manifest
    from asa_classifier.schema import SchemaMismatch
    (tmp_path / "run.csv").write_text("c,b,a,label\n9,2,1,x\n")
    manifest = tmp_path / "manifest.toml"
    manifest.write_text('schema = "asa.dataset"\nversion = 1\nfeature_schema = "s"\nfeature_schema_version = 2\n'
                        '[[run]]\nfile = "run.csv"\n')
    assert load_manifest(manifest, v1).runs[0].x.tolist() == [[1.0, 2.0]]
    assert load_manifest(manifest, schema).runs[0].x.tolist() == [[1.0, 2.0, 9.0]]
    manifest.write_text(manifest.read_text().replace("feature_schema_version = 2", "feature_schema_version = 1"))
    with pytest.raises(SchemaMismatch, match="v1, training needs s v2"):
        load_manifest(manifest, schema)
    # ... unless asked to: then v2's feature is missing (NaN) on all its ticks.
    x = load_manifest(manifest, schema, older_as_missing=True).runs[0].x
    assert x[0, :2].tolist() == [1.0, 2.0] and np.isnan(x[0, 2])
