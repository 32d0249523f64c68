"""Dataset, split by run, training, ONNX export and report on a small synthetic dataset.

Mechanics tests: the export reproduces Python's probabilities within 1e-5; a model or dataset
of another feature schema is refused. No accuracy claim is made from synthetic data."""

import json
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest

from asa_classifier import train as train_cli
from asa_classifier.dataset import load_manifest, split_by_run, stack
from asa_classifier.ensemble import train
from asa_classifier.export import OnnxClassifier, read_metadata, to_onnx
from asa_classifier.report import metrics
from asa_classifier.schema import SchemaMismatch, metadata_schema

REPO = Path(__file__).resolve().parents[2]


def test_manifest_split_is_by_run(dataset_dir, schema):
    dataset = load_manifest(dataset_dir / "manifest.toml", schema)
    assert len(dataset.runs) == 9 and dataset.machine == "pytest synthetic"
    train_runs, heldout = split_by_run(dataset.runs, 0.25, seed=3)
    names_train = {r.name for r in train_runs}
    names_heldout = {r.name for r in heldout}
    assert not names_train & names_heldout
    assert len(names_train | names_heldout) == 9
    # round(0.25 * 3) = 1 held-out run per class, every class keeps two training runs
    assert len(heldout) == 3
    assert {r.labels[0] for r in heldout} == set(dataset.classes())
    dataset.runs[0].heldout = True
    train_runs, heldout = split_by_run(dataset.runs, 0.25, seed=3)
    assert dataset.runs[0].name in {r.name for r in heldout}


def test_export_reproduces_python_probabilities(dataset_dir, schema, tmp_path):
    dataset = load_manifest(dataset_dir / "manifest.toml", schema)
    classes = dataset.classes()
    x, y, _ = stack(dataset.runs, classes)
    x[4, 1] = np.nan  # a missing feature
    ensemble = train(x, y, classes, seed=0, small=True)
    path = tmp_path / "m.onnx"
    onnx.save(to_onnx(ensemble, schema, "pytest"), str(path))
    probe = np.random.default_rng(1).normal(size=(64, len(schema.features))).astype(np.float32) * 3
    probe[0, 0] = np.nan
    python = ensemble.predict_proba(probe)
    exported = OnnxClassifier(path, schema).predict_proba(probe)
    assert exported.shape == (64, len(classes))
    assert np.abs(python - exported).max() < 1e-5
    meta = read_metadata(path)
    assert metadata_schema(meta) == schema
    assert json.loads(meta["asa.class_names"]) == classes
    assert meta["asa.training_date"].endswith("Z")


def test_schema_mismatch_is_refused(dataset_dir, schema, tmp_path):
    dataset = load_manifest(dataset_dir / "manifest.toml", schema)
    x, y, _ = stack(dataset.runs, dataset.classes())
    path = tmp_path / "m.onnx"
    onnx.save(to_onnx(train(x, y, dataset.classes(), small=True), schema, "pytest"), str(path))
    reordered = replace(schema, features=tuple(reversed(schema.features)))
    with pytest.raises(SchemaMismatch, match="first difference at position 0"):
        OnnxClassifier(path, reordered)
    with pytest.raises(SchemaMismatch, match="v4"):
        OnnxClassifier(path, replace(schema, version=4))
    with pytest.raises(SchemaMismatch):
        load_manifest(dataset_dir / "manifest.toml", replace(schema, version=4))


def test_metrics_on_hand_made_predictions():
    m = metrics(np.array([0, 0, 1, 1]), [0, 1, 1, None], ["a", "b"])
    assert m["accuracy"] == 0.5 and m["coverage"] == 0.75
    assert m["confusion"] == [[1, 1, 0], [0, 1, 1]]
    assert m["per_class"]["a"] == {"precision": 1.0, "recall": 0.5, "support": 2}
    assert m["per_class"]["b"]["precision"] == 0.5


def test_train_cli_end_to_end(dataset_dir, schema, tmp_path):
    out = tmp_path / "out"
    result = train_cli.run(dataset_dir / "manifest.toml", schema, out, small=True)
    assert (out / "classifier.onnx").is_file()
    assert result["export_max_abs_diff"] < 1e-5
    assert result["model_bytes"] > 0 and result["python_onnxruntime_latency_us"]["p99"] > 0
    assert not set(result["train_runs"]) & set(result["heldout_runs"])
    assert result["raw"]["ticks"] == 3 * 30
    text = (out / "report.md").read_text()
    assert "Confusion matrix" in text and "After time-weighted voting" in text


def test_committed_rust_test_model_matches_its_golden_file():
    data = REPO / "agent/tests/data"
    golden = json.loads((data / "classifier_tiny_golden.json").read_text())
    from asa_classifier.schema import FeatureSchema
    schema = FeatureSchema(golden["feature_schema"], golden["feature_schema_version"], tuple(golden["feature_names"]))
    inputs = np.array([[np.nan if v is None else v for v in row] for row in golden["inputs"]], dtype=np.float32)
    probs = OnnxClassifier(data / "classifier_tiny.onnx", schema).predict_proba(inputs)
    assert np.abs(probs - np.array(golden["probabilities"])).max() < 1e-5


def test_xgboost_grows_vector_leaves_and_takes_overrides(dataset_dir, schema):
    dataset = load_manifest(dataset_dir / "manifest.toml", schema)
    x, y, _ = stack(dataset.runs, dataset.classes())
    xgb = train(x, y, dataset.classes(), small=True, members=("xgboost",)).models["xgboost"]
    assert xgb.multi_strategy == "multi_output_tree"
    xgb = train(x, y, dataset.classes(), small=True, members=("xgboost",),
                xgboost_params={"n_estimators": 3}).models["xgboost"]
    assert xgb.n_estimators == 3 and xgb.get_booster().num_boosted_rounds() == 3


def test_member_subset_exports_and_renormalises(dataset_dir, schema, tmp_path):
    dataset = load_manifest(dataset_dir / "manifest.toml", schema)
    x, y, _ = stack(dataset.runs, dataset.classes())
    ensemble = train(x, y, dataset.classes(), small=True, members=("xgboost", "random_forest"))
    assert ensemble.weights == pytest.approx({"xgboost": 2 / 3, "random_forest": 1 / 3})
    path = tmp_path / "m.onnx"
    onnx.save(to_onnx(ensemble, schema, "pytest"), str(path))
    assert np.abs(ensemble.predict_proba(x) - OnnxClassifier(path, schema).predict_proba(x)).max() < 1e-5
    assert json.loads(read_metadata(path)["asa.ensemble"])["members"] == ["xgboost", "random_forest"]
    with pytest.raises(ValueError):
        train(x, y, dataset.classes(), small=True, members=("lstm",))


@pytest.mark.parametrize("member", ["xgboost", "random_forest", "svm"])
def test_single_member_exports(dataset_dir, schema, tmp_path, member):
    """Each member alone is a valid model (XGBoost's converter imports no standard-operator
    opset of its own; the vote's Mul and Sum need one)."""
    dataset = load_manifest(dataset_dir / "manifest.toml", schema)
    x, y, _ = stack(dataset.runs, dataset.classes())
    ensemble = train(x, y, dataset.classes(), small=True, members=(member,))
    path = tmp_path / "m.onnx"
    onnx.save(to_onnx(ensemble, schema, "pytest"), str(path))
    assert np.abs(ensemble.predict_proba(x) - OnnxClassifier(path, schema).predict_proba(x)).max() < 1e-5


def test_load_class_set_and_two_manifests(dataset_dir, schema, tmp_path):
    """`--classes load` keeps the background load of `<probe>+<load>` labels; a second manifest
    (here: the same runs under other names) is merged; the report lists each held-out run."""
    from asa_classifier.dataset import merge, relabel

    dataset = load_manifest(dataset_dir / "manifest.toml", schema)
    relabel(dataset.runs, "load")
    assert dataset.classes() == ["disk_io", "idle", "kernel_build"]
    with pytest.raises(ValueError, match="unknown class set"):
        relabel(dataset.runs, "probe")
    with pytest.raises(ValueError, match="appears in two manifests"):
        merge([dataset, load_manifest(dataset_dir / "manifest.toml", schema)])
    second = (dataset_dir / "manifest.toml").read_text().replace('name = "', 'name = "again-')
    (dataset_dir / "second.toml").write_text(second)
    out = tmp_path / "out"
    result = train_cli.run([dataset_dir / "manifest.toml", dataset_dir / "second.toml"], schema, out,
                           small=True, class_set="load")
    assert result["classes"] == ["disk_io", "idle", "kernel_build"] and result["class_set"] == "load"
    assert len(result["train_runs"]) + len(result["heldout_runs"]) == 18
    assert {r["run"] for r in result["per_run"]} == set(result["heldout_runs"])
    assert all(0.0 <= r["voted"] <= 1.0 and r["ticks"] == 30 for r in result["per_run"])
    assert "## Held-out runs" in (out / "report.md").read_text()
    meta = read_metadata(out / "classifier.onnx")
    assert json.loads(meta["asa.class_names"]) == ["disk_io", "idle", "kernel_build"]
    assert "classes by load" in meta["asa.trained_on"]


def test_other_splits_report_the_spread(dataset_dir, schema, tmp_path):
    """`--other-splits 2`: two more trainings on other held-out splits, each with its own runs
    held out, and the spread in the report; seed 0's figure is the model's own."""
    from asa_classifier.dataset import load_manifest, split_by_run
    out = tmp_path / "out"
    result = train_cli.run(dataset_dir / "manifest.toml", schema, out, small=True, other_splits=2, svm_max_ticks=40)
    assert [s["seed"] for s in result["other_splits"]] == [1, 2]
    runs = load_manifest(dataset_dir / "manifest.toml", schema).runs
    for other in result["other_splits"]:
        assert other["heldout_runs"] == len(split_by_run(runs, 0.25, other["seed"])[1])
        assert 0.0 <= other["voted"] <= 1.0 and other["ticks"] > 0
    assert "held-out splits (seeds 0..2" in (out / "report.md").read_text()
    with pytest.raises(ValueError, match="too small"):
        train_cli.run(dataset_dir / "manifest.toml", schema, out, small=True, svm_max_ticks=1)


def test_heldout_from_one_manifest(dataset_dir, schema, tmp_path):
    """`--heldout-from`: the held-out runs come from that manifest only; the others train."""
    second = (dataset_dir / "manifest.toml").read_text().replace('name = "', 'name = "again-')
    (dataset_dir / "second.toml").write_text(second)
    manifests = [dataset_dir / "manifest.toml", dataset_dir / "second.toml"]
    result = train_cli.run(manifests, schema, tmp_path / "out", small=True, heldout_from=[manifests[1]])
    assert result["heldout_runs"] and all(name.startswith("again-") for name in result["heldout_runs"])
    assert sum(not name.startswith("again-") for name in result["train_runs"]) == 9
    assert "drawn from" in (tmp_path / "out" / "report.md").read_text()
    assert json.loads((tmp_path / "out" / "report.json").read_text())["heldout_from"] == [str(manifests[1])]
    with pytest.raises(ValueError, match="second.toml: not among the manifests"):
        train_cli.run(manifests[:1], schema, tmp_path / "out", small=True, heldout_from=[manifests[1]])


def test_heldout_from_names_a_listed_manifest_in_any_spelling(dataset_dir, schema, tmp_path):
    """A list file names its manifests by absolute path (`--manifests-from`); `--heldout-from`
    as typed (relative to the working directory) names the same file."""
    second = (dataset_dir / "manifest.toml").read_text().replace('name = "', 'name = "again-')
    (dataset_dir / "second.toml").write_text(second)
    manifests = [(dataset_dir / "manifest.toml").resolve(), (dataset_dir / "second.toml").resolve()]
    typed = Path(os.path.relpath(manifests[1]))
    assert typed != manifests[1]
    result = train_cli.run(manifests, schema, tmp_path / "out", small=True, heldout_from=[typed])
    assert result["heldout_runs"] and all(name.startswith("again-") for name in result["heldout_runs"])


def test_ignored_features_are_not_learnt_and_are_masked_in_the_model(dataset_dir, schema, tmp_path):
    """The classes differ in cpu_user and ctx_switches_per_s: ignoring both leaves noise (chance
    accuracy); the exported model gives the same probabilities whatever those columns hold."""
    dataset = load_manifest(dataset_dir / "manifest.toml", schema)
    x, y, _ = stack(dataset.runs, dataset.classes())
    with pytest.raises(ValueError, match="not_a_feature"):
        train_cli.run(dataset_dir / "manifest.toml", schema, tmp_path / "bad", small=True,
                      ignore=("cpu_user", "not_a_feature"))
    result = train_cli.run(dataset_dir / "manifest.toml", schema, tmp_path / "m", small=True,
                           ignore=("ctx_switches_per_s", "cpu_user"))
    assert result["ignored_features"] == ["cpu_user", "ctx_switches_per_s"]
    full = train_cli.run(dataset_dir / "manifest.toml", schema, tmp_path / "full", small=True)
    # Chance is 1/3; the separating features give 0.8 on this small noisy set.
    assert result["raw"]["accuracy"] < 0.5 < 0.75 < full["raw"]["accuracy"], (result["raw"], full["raw"])
    assert full["ignored_features"] == []
    model = OnnxClassifier(tmp_path / "m" / "classifier.onnx", schema)
    assert json.loads(model.meta["asa.ignored_features"]) == ["cpu_user", "ctx_switches_per_s"]
    assert "asa.ignored_features" not in OnnxClassifier(tmp_path / "full" / "classifier.onnx", schema).meta
    changed = x.copy()
    changed[:, 0] = 1e6
    changed[:5, 2] = np.nan
    assert np.abs(model.predict_proba(x) - model.predict_proba(changed)).max() < 1e-6
    # Python's ensemble masks the same way as the exported model.
    ensemble = train(x, y, dataset.classes(), small=True, ignored=(0, 2))
    onnx.save(to_onnx(ensemble, schema, trained_on="pytest"), str(tmp_path / "e.onnx"))
    exported = OnnxClassifier(tmp_path / "e.onnx", schema)
    assert np.abs(ensemble.predict_proba(changed) - exported.predict_proba(changed)).max() < 1e-5
    assert "Ignored features" in (tmp_path / "m" / "report.md").read_text()
