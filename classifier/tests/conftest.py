"""Shared fixtures: a small synthetic dataset written as `asa record` files + manifest.

Synthetic data exercises the mechanics only (loading, split, training, export, report); no
accuracy is claimed from it.
"""

import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from asa_classifier.schema import FeatureSchema

warnings.filterwarnings("ignore", category=FutureWarning)  # SVC(probability=True) deprecation in 1.9

SCHEMA = FeatureSchema("asa.features.test", 3, ("cpu_user", "cpu_system", "ctx_switches_per_s", "runq_len"))
CLASSES = ["game+idle", "game+kernel_build", "web+disk_io"]


def write_run(path, label, ticks, rng, shift):
    x = rng.normal(size=(ticks, len(SCHEMA.features)))
    x[:, 0] += shift
    x[:, 2] -= shift / 2
    columns = {name: x[:, i] for i, name in enumerate(SCHEMA.features)}
    columns["tick"] = np.arange(ticks)
    columns["label"] = [label] * ticks
    pq.write_table(pa.table(columns), path)


@pytest.fixture
def schema():
    return SCHEMA


@pytest.fixture
def dataset_dir(tmp_path):
    rng = np.random.default_rng(5)
    runs = []
    for c, label in enumerate(CLASSES):
        for r in range(3):
            name = f"{label.replace('+', '_')}-{r}"
            write_run(tmp_path / f"{name}.parquet", label, 30, rng, 2.5 * c)
            runs.append(f'[[run]]\nname = "{name}"\nfile = "{name}.parquet"\nscenario = "S{c}"\nexpert = "eevdf"\n')
    (tmp_path / "manifest.toml").write_text(
        'schema = "asa.dataset"\nversion = 1\nfeature_schema = "asa.features.test"\nfeature_schema_version = 3\n'
        'machine = "pytest synthetic"\n\n' + "\n".join(runs))
    return tmp_path
