"""The live feature schema and the keys of the model metadata.

agent/feature_schema.toml holds `schema = "<name>"`, `version = N` and the features in order as
`[[feature]]` tables with a `name` key and an optional `since` (the version the feature first
appeared in, 1 when absent; other keys such as unit/doc are ignored here). A version only
appends features and a name never changes meaning, so `FeatureSchema.as_of(v)` is exactly the
schema of version v: the agent feeds a model of an older version those features by name, and
training can build such a model from the current file (`train --feature-schema-version`).
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
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
META_IGNORED_FEATURES = "asa.ignored_features"  # JSON list: features the model ignores (optional)
# JSON list: features the SVM member sees as log(1 + x), inside the graph (optional; the agent
# feeds raw features and need not read it).
META_SVM_LOG1P_FEATURES = "asa.svm_log1p_features"
INPUT_NAME = "features"
OUTPUT_NAME = "probabilities"


class SchemaMismatch(ValueError):
    """The data or model was made for another feature schema."""


@dataclass(frozen=True)
class FeatureSchema:
    name: str
    version: int
    features: tuple[str, ...]
    # The version each feature first appeared in, parallel to `features` (empty: all `version`).
    since: tuple[int, ...] = field(default=(), compare=False)

    @classmethod
    def load(cls, path: str | Path) -> "FeatureSchema":
        data = tomllib.loads(Path(path).read_text())
        try:
            names = tuple(f["name"] for f in data["feature"])
            since = tuple(int(f.get("since", 1)) for f in data["feature"])
            schema = cls(str(data["schema"]), int(data["version"]), names, since)
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{path}: not a feature schema file (schema, version, [[feature]] name): {e}") from e
        if any(not 1 <= s <= schema.version for s in since) or list(since) != sorted(since):
            raise ValueError(f"{path}: each feature's since must be 1..{schema.version}, never decreasing")
        return schema

    def as_of(self, version: int) -> "FeatureSchema":
        """The schema of an older (or this) version: the features with since <= version."""
        if not 1 <= version <= self.version:
            raise ValueError(f"{self.name} has versions 1..{self.version}, not {version}")
        keep = [i for i in range(len(self.features)) if (self.since[i] if self.since else self.version) <= version]
        if not keep:
            raise ValueError(f"{self.name} v{self.version} records no feature of version {version}")
        return FeatureSchema(self.name, version, tuple(self.features[i] for i in keep),
                             tuple(self.since[i] for i in keep) if self.since else ())

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


def ignored_columns(schema: FeatureSchema, names) -> tuple[int, ...]:
    """Column indices of the feature names to ignore; an unknown name is an error."""
    unknown = [n for n in names if n not in schema.features]
    if unknown:
        raise ValueError(f"--ignore-features: {unknown} not in {schema.name} v{schema.version}")
    return tuple(sorted(schema.features.index(n) for n in set(names)))
