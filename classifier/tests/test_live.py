"""Live ticks against recorded ones (`asa_classifier.live`) on a synthetic calibration folder:
classes differ only in feature `c`; the live ticks of an xz scenario carry idle's `c`, so the
model takes them for idle. The diagnosis must name `c` as the drifted feature and as the one
whose recorded value brings the ticks back to xz."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from asa_classifier import live, train
from asa_classifier.export import OnnxClassifier
from asa_classifier.schema import FeatureSchema

LABELS = ["office+idle", "office+xz_compress"]


@pytest.fixture
def setup(tmp_path):
    path = tmp_path / "feature_schema.toml"
    path.write_text('schema = "s"\nversion = 1\n[[feature]]\nname = "a"\n[[feature]]\nname = "b"\n'
                    '[[feature]]\nname = "c"\n')
    schema = FeatureSchema.load(path)
    rng = np.random.default_rng(5)
    data = tmp_path / "data"
    data.mkdir()
    entries = []
    for k, label in enumerate(LABELS):
        for r in range(4):
            name = f"{k}-{r}"
            columns = {"a": rng.normal(size=20), "b": rng.normal(size=20),
                       "c": rng.normal(size=20) * 0.2 + 3.0 * k, "label": [label] * 20}
            pq.write_table(pa.table(columns), data / f"{name}.parquet")
            entries.append(f'[[run]]\nname = "{name}"\nfile = "{name}.parquet"\n')
    manifest = data / "manifest.toml"
    manifest.write_text('schema = "asa.dataset"\nversion = 1\nfeature_schema = "s"\nfeature_schema_version = 1\n'
                        'machine = "pytest"\n\n' + "\n".join(entries))
    train.run(manifest, schema, tmp_path / "model", small=True, class_set="load")
    model_path = tmp_path / "model" / "classifier.onnx"
    model = OnnxClassifier(model_path, schema)

    # The calibration folder: S1 (office + xz) under eevdf and under the agent, whose ticks have
    # idle's `c`; a phased scenario, left out.
    calibration = tmp_path / "live"
    (calibration / "agent").mkdir(parents=True)
    t0 = 1_800_000_000_000
    x = np.column_stack([rng.normal(size=12), rng.normal(size=12), rng.normal(size=12) * 0.2]).astype(np.float32)
    x[3, 1] = np.nan  # `b` missing on one tick (logged as null)
    probabilities = model.predict_proba(x)
    ticks = []
    for i, (row, p) in enumerate(zip(x, probabilities)):
        features = {n: None if np.isnan(v) else float(v) for n, v in zip("abc", row)}
        ticks.append({"unix_ms": t0 + 1000 * i, "probabilities": dict(zip(model.classes, map(float, p))),
                      "voted_class": "idle", "features": features})
    ticks.append({"unix_ms": t0 + 50_000, "probabilities": {}, "voted_class": None})  # no features: skipped
    (calibration / "agent" / "agent-1.jsonl").write_text("".join(json.dumps(t) + "\n" for t in ticks))
    phase = {"load": "xz_compress", "planned_s": 10.0}
    results = {"scenarios": [
        {"scenario": "S1", "probe": "office", "runs": [
            {"expert": "eevdf", "rep": 0, "probe_started_unix_ms": t0 - 90_000, "probe_ended_unix_ms": t0 - 70_000,
             "phases": [phase]},
            {"expert": "asa", "rep": 0, "probe_started_unix_ms": t0 - 500, "probe_ended_unix_ms": t0 + 11_500,
             "phases": [phase]}]},
        {"scenario": "P1", "probe": "office", "runs": [
            {"expert": "asa", "rep": 0, "probe_started_unix_ms": t0 + 40_000, "probe_ended_unix_ms": t0 + 60_000,
             "phases": [phase, {"load": "idle", "planned_s": 10.0}]}]}]}
    (calibration / "results.json").write_text(json.dumps(results))
    return schema, manifest, model_path, calibration, tmp_path


def test_the_drifted_feature_is_named_and_its_recorded_value_restores_the_class(setup):
    schema, manifest, model_path, calibration, tmp_path = setup
    runs, notes = live.live_runs(calibration, schema)
    assert len(runs) == 1 and runs[0].label == "office+xz_compress" and runs[0].expert == "asa"
    # The first tick in the window covers time before the probe started: left out, as in recordings.
    assert len(runs[0].x) == 11
    assert np.isnan(runs[0].x[2, 1])  # the missing `b` (tick 3 of the log, 2 of the run)
    assert any("P1" in n and "2 phases" in n for n in notes)
    out = tmp_path / "diagnosis"
    live.main([str(calibration), "--model", str(model_path), "--feature-schema", str(tmp_path / "feature_schema.toml"),
               "--manifest", str(manifest), "--out", str(out)])
    report = json.loads((out / "live-diagnosis.json").read_text())
    (entry,) = report["labels"]
    assert entry["class"] == "xz_compress" and entry["live_ticks"] == 11
    assert entry["python_vs_logged_max_abs_diff"] < 1e-5
    assert entry["live_accuracy"] < 0.2 and entry["recorded_accuracy"] > 0.9
    assert entry["recorded_runs"] == 4 and entry["recorded_ticks"] == 80
    assert entry["drift"][0]["feature"] == "c" and entry["drift"][0]["z"] < -5
    assert entry["drift"][0]["outside_share"] > 0.9
    assert entry["substitution"][0]["feature"] == "c"
    assert entry["substitution"][0]["accuracy_if_recorded_median"] == 1.0
    assert all(f["accuracy_if_recorded_median"] < 0.5 for f in entry["substitution"][1:])
    assert {f["feature"]: f["live_missing"] for f in entry["drift"]}["b"] == 1
    text = (out / "live-diagnosis.md").read_text()
    assert "## office+xz_compress (class xz_compress)" in text and "| c |" in text and "P1" in text


def test_logs_without_features_are_one_clear_error(setup):
    schema, _, _, calibration, _ = setup
    (calibration / "agent" / "agent-1.jsonl").write_text(json.dumps({"unix_ms": 1, "probabilities": {}}) + "\n")
    with pytest.raises(ValueError, match="--log-features"):
        live.live_runs(calibration, schema)


def test_each_phase_of_a_phased_run_is_compared_over_its_own_times(setup):
    schema, _, _, calibration, _ = setup
    results = json.loads((calibration / "results.json").read_text())
    t0 = 1_800_000_000_000
    results["scenarios"] = [{"scenario": "P2", "probe": "office", "runs": [
        {"expert": "asa", "rep": 1, "probe_started_unix_ms": t0 - 500, "probe_ended_unix_ms": t0 + 11_500,
         "phases": [{"load": "idle", "planned_s": 6.0, "started_unix_ms": t0 - 500, "ended_unix_ms": t0 + 5_500},
                    {"load": "xz_compress", "planned_s": 6.0, "started_unix_ms": t0 + 5_500,
                     "ended_unix_ms": t0 + 11_500}]}]}]
    (calibration / "results.json").write_text(json.dumps(results))
    runs, notes = live.live_runs(calibration, schema)
    assert not notes
    assert [(r.label, r.phase, len(r.x)) for r in runs] == [("office+idle", 1, 5), ("office+xz_compress", 2, 5)]
    assert runs[1].name() == "P2 asa rep 1 phase 2"
    # Phase 2's first tick (t0 + 6 s) covers time in phase 1: left out, as at a probe's start.
    assert np.allclose(runs[1].x[0, 2], json.loads((calibration / "agent" / "agent-1.jsonl").read_text()
                                                   .splitlines()[7])["features"]["c"])
