"""The live feature schema and the keys of the model metadata.

Integration point with perception (issue 3): agent/feature_schema.toml is expected to hold
`schema = "<name>"`, `version = N` and the features in order as `[[feature]]` tables with a
`name` key (other keys such as unit/description are ignored here). `FeatureSchema.load` reads
that; until the file exists, tests build a FeatureSchema directly.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from pathlib import Path

# Model metadata (ONNX metadata_props), read by agent/src/decision/classifier.rs.
MODEL_SCHEMA = "asa.classifier"
MODEL_VERSION = 1
META_MODEL_SCHEMA = "asa.model_schema"
META_MODEL_VERSION = "asa.model_version"
META_FEATURE_SCHEMA = "asa.feature_schema"
META_FEATURE_SCHEMA_VERSION = "asa.feature_schema_version"
META_FEATURE_NAMES = "asa.feature_names"  # JSON list of strings
META_CLASS_NAMES = "asa.class_names"  # JSON list of strings
META_TRAINING_DATE = "asa.training_date"  # ISO 8601 UTC
META_ENSEMBLE = "asa.ensemble"  # JSON: members and soft-vote weights
META_TRAINED_ON = "asa.trained_on"  # free text: dataset manifest / origin
INPUT_NAME = "features"
OUTPUT_NAME = "probabilities"


class SchemaMismatch(ValueError):
    """The data or model was made for another feature schema."""


@dataclass(frozen=True)
class FeatureSchema:
    name: str
    version: int
    features: tuple[str, ...]

    @classmethod
    def load(cls, path: str | Path) -> "FeatureSchema":
        data = tomllib.loads(Path(path).read_text())
        try:
            names = tuple(f["name"] for f in data["feature"])
            return cls(str(data["schema"]), int(data["version"]), names)
        except (KeyError, TypeError) as e:
            raise ValueError(f"{path}: not a feature schema file (schema, version, [[feature]] name): {e}") from e

    def check_same(self, other: "FeatureSchema", what: str) -> None:
        """Raises SchemaMismatch with the first difference."""
        if (self.name, self.version) != (other.name, other.version):
            raise SchemaMismatch(
                f"{what} uses feature schema {other.name} v{other.version}, the live schema is {self.name} v{self.version}")
        if self.features != other.features:
            first = next((i for i, (a, b) in enumerate(zip(self.features, other.features)) if a != b),
                         min(len(self.features), len(other.features)))
            raise SchemaMismatch(
                f"{what} has {len(other.features)} features, the live schema {len(self.features)}; first difference at "
                f"position {first}: {other.features[first] if first < len(other.features) else '(none)'!r} vs "
                f"{self.features[first] if first < len(self.features) else '(none)'!r}")


def metadata_schema(meta: dict[str, str]) -> FeatureSchema:
    """The feature schema an exported model declares in its metadata."""
    return FeatureSchema(meta[META_FEATURE_SCHEMA], int(meta[META_FEATURE_SCHEMA_VERSION]),
                         tuple(json.loads(meta[META_FEATURE_NAMES])))
