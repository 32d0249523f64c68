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
