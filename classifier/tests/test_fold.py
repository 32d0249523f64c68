"""The vector-leaf XGBoost converter and the graph folds: same outputs, fewer operators.

Mechanics only (synthetic data): every check compares two computations of the same thing."""

import json

import numpy as np
import onnx
import pytest
from xgboost import XGBClassifier

from asa_classifier import fold as fold_cli
from asa_classifier.ensemble import train
from asa_classifier.export import to_onnx, xgboost_vector_leaves
from asa_classifier.fold import META_FOLDS, agent_session, check_same_outputs, fold, probe_inputs

from conftest import SCHEMA


def synthetic(classes: int, rows: int = 600, features: int = 4, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, features)).astype(np.float32)
    y = np.minimum((x[:, 0] > -0.5).astype(int) + (x[:, 1] > 0.3) + (x[:, 2] > 0.8), classes - 1)
    x[rng.random(x.shape) < 0.15] = np.nan  # missing features follow XGBoost's default directions
    return x, y


def probabilities(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    return agent_session(model).run(["probabilities"], {"features": np.asarray(x, dtype=np.float32)})[0]


def test_vector_leaf_trees_match_xgboost():
    x, y = synthetic(4)
    model = XGBClassifier(n_estimators=12, max_depth=4, learning_rate=0.3, tree_method="hist",
                          multi_strategy="multi_output_tree", n_jobs=1).fit(x, y)
    onnx_model = xgboost_vector_leaves(model, x.shape[1])
    assert onnx_model is not None
    trees = onnx_model.graph.node[0]
    assert trees.op_type == "TreeEnsembleClassifier"
    assert len(set(next(a for a in trees.attribute if a.name == "nodes_treeids").ints)) == 12  # one per round
    probe, _ = synthetic(4, rows=400, seed=1)
    assert np.abs(probabilities(onnx_model, probe) - model.predict_proba(probe)).max() < 1e-6


@pytest.mark.parametrize("classes, strategy", [(4, "one_output_per_tree"), (2, "multi_output_tree")])
def test_scalar_leaf_trees_are_left_to_onnxmltools(classes, strategy):
    x, y = synthetic(classes)
    model = XGBClassifier(n_estimators=3, max_depth=2, tree_method="hist", multi_strategy=strategy,
                          n_jobs=1).fit(x, y)
    assert xgboost_vector_leaves(model, x.shape[1]) is None


def ensemble_models(classes: int, ignored=(), seed=0):
    x, y = synthetic(classes, features=len(SCHEMA.features), seed=seed)
    ensemble = train(x, y, [f"c{i}" for i in range(classes)], small=True, ignored=ignored)
    return ensemble, to_onnx(ensemble, SCHEMA, "pytest", folded=False), to_onnx(ensemble, SCHEMA, "pytest")


def probe(n_features: int) -> np.ndarray:
    x = np.random.default_rng(7).normal(size=(500, n_features)).astype(np.float32) * 2
    x[np.random.default_rng(8).random(x.shape) < 0.25] = np.nan
    return x


def test_fold_keeps_outputs_with_fewer_operators():
    ensemble, composed, folded = ensemble_models(4, ignored=(1,))
    ops = [n.op_type for n in composed.graph.node]
    assert ops.count("Imputer") == 2 and "Sum" in ops and ops.count("Mul") == 4  # mask + 3 weightings
    assert [n.op_type for n in folded.graph.node] == [
        "TreeEnsembleClassifier", "TreeEnsembleClassifier", "Imputer", "Scaler", "SVMClassifier", "Gemm", "Gemm"]
    meta = {p.key: p.value for p in folded.metadata_props}
    folds = json.loads(meta[META_FOLDS])
    assert set(folds) >= {"mask", "vote", "cast:svm_Cast"}
    assert any(f.startswith("zero-weights:random_forest_") for f in folds)

    def leaf_weights(model):
        return {n.name: np.array(next(a for a in n.attribute if a.name == "class_weights").floats)
                for n in model.graph.node if n.op_type == "TreeEnsembleClassifier"}
    before, after = leaf_weights(composed), leaf_weights(folded)
    forest = "random_forest_TreeEnsembleClassifier"
    assert (before[forest] == 0).any() and len(after[forest]) == (before[forest] != 0).sum()
    x = probe(len(SCHEMA.features))
    # The ignored column reaches no member: any value there gives the same probabilities.
    assert check_same_outputs(composed, folded, x) < 1e-6
    shifted = x.copy()
    shifted[:, 1] = 1e6
    assert np.array_equal(probabilities(folded, shifted), probabilities(folded, x))
    # And the folded graph is what Python's ensemble computes.
    assert np.abs(probabilities(folded, x) - ensemble.predict_proba(x)).max() < 1e-5


def test_mask_stays_when_a_tree_uses_the_column():
    ensemble, _, _ = ensemble_models(3)
    ensemble.ignored = (0,)  # trained on column 0, then told to ignore it: the trees split on it
    composed = to_onnx(ensemble, SCHEMA, "pytest", folded=False)
    folded = fold(composed)
    assert "ignore_features" in [n.name for n in folded.graph.node]
    assert check_same_outputs(composed, folded, probe(len(SCHEMA.features))) < 1e-6


def test_two_classes_keep_the_forest_weight_outside_its_trees():
    _, composed, folded = ensemble_models(2)
    folds = json.loads({p.key: p.value for p in folded.metadata_props}[META_FOLDS])
    assert not any(f.startswith(("weight:", "zero-weights:")) for f in folds)
    assert check_same_outputs(composed, folded, probe(len(SCHEMA.features))) < 1e-6


def test_check_same_outputs_catches_a_wrong_fold():
    _, composed, folded = ensemble_models(3)
    broken = onnx.ModelProto()
    broken.CopyFrom(folded)
    gemm = next(n for n in broken.graph.node if n.op_type == "Gemm")
    next(a for a in gemm.attribute if a.name == "alpha").f *= 1.5
    with pytest.raises(AssertionError, match="differs"):
        check_same_outputs(composed, broken, probe(len(SCHEMA.features)))


def test_fold_command_folds_a_model_file_once(tmp_path, capsys):
    _, composed, _ = ensemble_models(3, ignored=(2,))
    path = tmp_path / "m.onnx"
    onnx.save(composed, str(path))
    assert fold_cli.main([str(path)]) == 0
    assert "operators" in capsys.readouterr().out
    once = onnx.load(str(path))
    assert len(once.graph.node) < len(composed.graph.node)
    assert check_same_outputs(composed, once, probe_inputs(composed, 2000)) < 1e-6
    assert fold_cli.main([str(path)]) == 0
    assert "already folded" in capsys.readouterr().out
    (tmp_path / "other.onnx").write_bytes(onnx.helper.make_model(onnx.helper.make_graph(
        [], "g", [], [])).SerializeToString())
    assert fold_cli.main([str(tmp_path / "other.onnx")]) == 2


def test_an_imputer_with_one_value_for_every_feature_folds_into_the_trees():
    _, composed, _ = ensemble_models(3)
    imputer = next(n for n in composed.graph.node if n.name == "random_forest_Imputer")
    values = next(a for a in imputer.attribute if a.name == "imputed_value_floats")
    del values.floats[:]
    values.floats.append(0.25)  # the operator broadcasts a single value
    folded = fold(composed)
    assert "random_forest_Imputer" not in [n.name for n in folded.graph.node]
    assert check_same_outputs(composed, folded, probe(len(SCHEMA.features))) < 1e-6
