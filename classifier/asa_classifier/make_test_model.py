"""Generates the small test artefacts the Rust tests read (agent/tests/data/):

- classifier_tiny.onnx: a tiny ensemble (8 boosted trees, 5 forest trees, an SVM) trained on
  synthetic data this script makes (seeded), feature schema `asa.features.test` v1 (6 features),
  classes a, b, c. A mechanics fixture: it says nothing about accuracy.
- classifier_tiny_golden.json: 16 input rows (one with a NaN feature) and the probabilities the
  Python ensemble (scikit-learn / xgboost, not ONNX) gives for them.
- voting_vectors.json: probability sequences with the votes of asa_classifier.voting, which the
  Rust voter must reproduce.

Run: classifier/.venv/bin/python -m asa_classifier.make_test_model agent/tests/data
(from classifier/, after ./setup.sh).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import onnx

from .ensemble import train
from .export import OnnxClassifier, to_onnx
from .schema import FeatureSchema
from .voting import TimeWeightedVoter

TEST_SCHEMA = FeatureSchema("asa.features.test", 1, tuple(f"feature_{i}" for i in range(6)))
TEST_CLASSES = ["a", "b", "c"]


def synthetic(rng: np.random.Generator, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Three classes shifted apart on features 0 and 1, plus noise features."""
    y = rng.integers(0, len(TEST_CLASSES), size=rows)
    x = rng.normal(size=(rows, len(TEST_SCHEMA.features))).astype(np.float32)
    x[:, 0] += 2.0 * y
    x[:, 1] -= 1.0 * y
    return x, y


def voting_vectors(rng: np.random.Generator) -> list[dict]:
    cases = []
    params = [dict(window=6, threshold=0.5, decay=0.8), dict(window=3, threshold=0.3, decay=0.5),
              dict(window=4, threshold=0.0, decay=1.0)]
    for p in params:
        for length in (1, 5, 12):
            probs = rng.dirichlet(np.ones(4) * 0.6, size=length).astype(np.float32)
            voter = TimeWeightedVoter(4, **p)
            votes = [voter.push(row) for row in probs]
            cases.append({**p, "classes": 4, "probabilities": probs.tolist(),
                          "votes": [v.cls for v in votes], "scores": [v.scores for v in votes],
                          "margins": [v.margin for v in votes], "supports": [v.support for v in votes]})
    return cases


def main(out: str) -> None:
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(20261122)
    x, y = synthetic(rng, 240)
    ensemble = train(x, y, TEST_CLASSES, seed=1, small=True)
    model = to_onnx(ensemble, TEST_SCHEMA, trained_on="synthetic test data (make_test_model.py, seed 20261122)",
                    training_date="2026-11-22T00:00:00Z")
    onnx_path = out_dir / "classifier_tiny.onnx"
    onnx.save(model, str(onnx_path))
    inputs, _ = synthetic(rng, 16)
    inputs[3, 2] = np.nan
    python = ensemble.predict_proba(inputs)
    exported = OnnxClassifier(onnx_path, TEST_SCHEMA).predict_proba(inputs)
    worst = float(np.abs(python - exported).max())
    if worst > 1e-5:
        raise SystemExit(f"exported model differs from Python by {worst}")
    golden = {"schema": "asa.classifier-golden", "version": 1, "feature_schema": TEST_SCHEMA.name,
              "feature_schema_version": TEST_SCHEMA.version, "feature_names": list(TEST_SCHEMA.features),
              "class_names": TEST_CLASSES,
              "inputs": [[None if np.isnan(v) else float(v) for v in row] for row in inputs],
              "probabilities": python.astype(np.float64).tolist()}
    (out_dir / "classifier_tiny_golden.json").write_text(json.dumps(golden, indent=1) + "\n")
    (out_dir / "voting_vectors.json").write_text(
        json.dumps({"schema": "asa.voting-vectors", "version": 1, "cases": voting_vectors(rng)}) + "\n")
    print(f"wrote {onnx_path} ({onnx_path.stat().st_size} bytes), golden, voting vectors; ONNX vs Python max diff {worst:.2e}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../agent/tests/data")
