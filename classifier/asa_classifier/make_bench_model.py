"""A full-size model for the inference benchmark (not committed, not for accuracy):
the production ensemble settings (XGBoost 200 trees depth 6, RandomForest 200 trees, RBF SVM)
trained on synthetic data with as many features and classes as the lab will have.

    .venv/bin/python -m asa_classifier.make_bench_model /tmp/bench_model.onnx [--features 40] [--classes 32] [--ticks 6000]
    ASA_BENCH_MODEL=/tmp/bench_model.onnx cargo bench -p asa-agent --bench decision
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import onnx

from .ensemble import train
from .export import to_onnx
from .schema import FeatureSchema


def main(argv=None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--features", type=int, default=40)
    parser.add_argument("--classes", type=int, default=32)
    parser.add_argument("--ticks", type=int, default=6000)
    parser.add_argument("--members", default="xgboost,random_forest,svm")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(3)
    schema = FeatureSchema("asa.features.bench", 1, tuple(f"feature_{i}" for i in range(args.features)))
    classes = [f"class_{c}" for c in range(args.classes)]
    centres = rng.normal(size=(args.classes, args.features)) * 1.5
    y = np.arange(args.ticks) % args.classes
    x = (centres[y] + rng.normal(size=(args.ticks, args.features)) * 2.0).astype(np.float32)
    started = time.time()
    ensemble = train(x, y, classes, seed=0, members=tuple(args.members.split(",")))
    trained = time.time() - started
    model = to_onnx(ensemble, schema, trained_on="synthetic benchmark data (make_bench_model.py)")
    onnx.save(model, args.out)
    svm = ensemble.models.get("svm")
    support_vectors = int(svm[-1].support_.shape[0]) if svm is not None else 0
    print(f"trained in {trained:.1f} s; wrote {args.out} ({len(model.SerializeToString()) / 1e6:.1f} MB), "
          f"{args.features} features, {args.classes} classes, {args.ticks} ticks, "
          f"{support_vectors} support vectors")


if __name__ == "__main__":
    main()
