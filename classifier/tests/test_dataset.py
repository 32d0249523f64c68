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
