"""The per-application model on a small synthetic dataset: the labelling rule, the schema
refusal, training + export (ONNX Runtime against Python within 1e-5), the metadata the agent
reads, the report. Mechanics tests: nothing about accuracy can be concluded from synthetic data."""

import json
import re
import tomllib
from pathlib import Path

import numpy as np
import onnx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from asa_classifier import apps, train_apps
from asa_classifier.apps import APP_CLASSES, APP_SCHEMA, Phase, label_rows, load_dataset, load_datasets
from asa_classifier.ensemble import _subsample, balanced_weights, log1p_columns, train
from asa_classifier.export import OnnxClassifier, read_metadata, to_onnx
from asa_classifier.fold import agent_session
from asa_classifier.schema import FeatureSchema, SchemaMismatch

REPO = Path(__file__).resolve().parents[2]
PROBE_TGID = 301
TICK_MS = 1000
BASE_MS = 1_800_000_000_000


def features(label: str, rng, n: int = 1) -> np.ndarray:
    """Non-negative features whose level depends on the class (rates spread over decades)."""
    shift = APP_CLASSES.index(label) if label in APP_CLASSES else 2
    x = np.abs(rng.normal(loc=shift, scale=0.7, size=(n, len(APP_SCHEMA.features))))
    x[:, 7:10] = 10.0 ** (shift + rng.normal(scale=0.3, size=(n, 3)))  # storage, char MiB/s, I/O calls
    return x


def write_apps_file(path: Path, rows: list[dict], rng, meta: dict | None = None) -> None:
    """An apps file as `asa record --apps` writes it; each row dict has the key columns and a
    `class` choosing its features."""
    x = np.vstack([features(r["class"], rng) for r in rows]) if rows else np.zeros((0, len(APP_SCHEMA.features)))
    columns = {k: pa.array([r[k] for r in rows], type=pa.string() if k == "tgids" else pa.int64())
               for k in apps.KEY_COLUMNS}
    columns.update({f: pa.array(x[:, i], type=pa.float64()) for i, f in enumerate(APP_SCHEMA.features)})
    table = pa.table(columns)
    meta = {apps.APP_SCHEMA_KEY: APP_SCHEMA.name, apps.APP_SCHEMA_VERSION_KEY: str(APP_SCHEMA.version)} \
        if meta is None else meta
    pq.write_table(table.replace_schema_metadata(meta), path)


def run_rows(phases: list[dict], ticks: int) -> list[dict]:
    """Every tick's applications: the probe (its tgid second in its list), each phase's load
    (present while its phase runs, the second phase's from two ticks early), kernel threads,
    three daemons."""
    rows = []
    for t in range(ticks):
        ms = BASE_MS + t * TICK_MS
        apps_now = [(1, 300, f"300,{PROBE_TGID}", "interactive"), (0, 0, "2", "kernel"),
                    (5, 10, "10", "background"), (5, 11, "11,12", "background"), (6, 13, "13", "background")]
        for i, p in enumerate(phases):
            early = 2 * TICK_MS if i > 0 else 0
            if p["from"] - early <= ms <= p["to"] and p["pgids"]:
                apps_now += [(1, g, f"{g}", p["app_class"]) for g in p["pgids"]]
        for cgroup, pgid, tgids, label in apps_now:
            rows.append({"unix_ms": ms, "tick": t, "cgroup": cgroup, "pgid": pgid, "tgids": tgids,
                         "threads": 1 + len(tgids.split(",")), "class": label})
    return rows


def manifest_run(name: str, scenario: str, expert: str, phases: list[dict], apps_file: str | None) -> str:
    text = (f'[[run]]\nname = "{name}"\nfile = "runs/{name}.parquet"\nlabel = "web+load"\nscenario = "{scenario}"\n'
            f'expert = "{expert}"\nvalid = true\n')
    if apps_file:
        text += f'apps_file = "{apps_file}"\nprobe_tgid = {PROBE_TGID}\nprobe_app_class = "interactive"\n'
    for p in phases:
        text += (f'\n[[run.phase]]\nclass = "web+load"\nload = "load"\nwindow_from_unix_ms = {p["from"]}\n'
                 f'window_to_unix_ms = {p["to"]}\npgids = {json.dumps(p["pgids"])}\n'
                 + (f'app_class = "{p["app_class"]}"\n' if p["app_class"] else ""))
    return text + "\n"


# Scenarios: one load each, and a phased one (cpu_batch, then io_bound). `network` is in one
# scenario only, so the fold holding it out trains without it.
SCENARIOS = {
    "S-cpu": [("cpu_batch", [400])],
    "S-io": [("io_bound", [410])],
    "S-net": [("network", [420, 421])],
    "S-idle": [(None, [])],
    "S-phased": [("cpu_batch", [430]), ("io_bound", [440])],
}
TICKS = 16


def phases_of(scenario: str) -> list[dict]:
    """Windows: ticks 2..7 and 9..13 (a phased run), or ticks 2..13; the rest is outside."""
    spans = [(2, 7), (9, 13)] if len(SCENARIOS[scenario]) == 2 else [(2, 13)]
    return [{"from": BASE_MS + a * TICK_MS, "to": BASE_MS + b * TICK_MS, "pgids": pgids, "app_class": cls}
            for (cls, pgids), (a, b) in zip(SCENARIOS[scenario], spans)]


def write_dataset(root: Path, seed: int = 7, prefix: str = "") -> Path:
    """A dataset folder: two runs (two experts) per scenario with an apps file, one old run without."""
    rng = np.random.default_rng(seed)
    (root / "raw").mkdir(parents=True, exist_ok=True)
    runs = []
    for scenario in SCENARIOS:
        for expert in ("eevdf", "bpfland"):
            name = f"{prefix}{scenario}-{expert}-r1"
            phases = phases_of(scenario)
            write_apps_file(root / "raw" / f"{name}.apps.parquet", run_rows(phases, TICKS), rng)
            runs.append(manifest_run(name, scenario, expert, phases, f"raw/{name}.apps.parquet"))
    runs.append(manifest_run(f"{prefix}old-run", "S-cpu", "eevdf", phases_of("S-cpu"), None))
    (root / "manifest.toml").write_text(
        'schema = "asa.dataset"\nversion = 1\nfeature_schema = "asa.features"\nfeature_schema_version = 3\n'
        'machine = "pytest synthetic"\n\n' + "".join(runs))
    return root


@pytest.fixture(scope="module")
def app_dataset(tmp_path_factory):
    return write_dataset(tmp_path_factory.mktemp("apps"))


def test_labelling_rule_case_by_case():
    phases = [Phase(1000, 2000, frozenset({50}), "cpu_batch"), Phase(3000, 4000, frozenset({60, 61}), "io_bound")]
    cases = [  # (unix_ms, pgid, tgids, expected label or drop reason)
        (1500, 7, "4242", "interactive"),          # the probe by its tgid
        (1500, 7, "11,4242,4300", "interactive"),  # ... anywhere in the list
        (1500, 50, "4242", "interactive"),         # the probe wins over a load's group
        (1500, 7, "42420,14242", "background"),    # a pid list is not searched as text
        (1500, 50, "50,51", "cpu_batch"),          # the phase's load by its process group
        (1000, 50, "50", "cpu_batch"),             # the window includes both ends
        (2000, 50, "50", "cpu_batch"),
        (3500, 61, "61", "io_bound"),              # another of a phase's groups
        (1500, 0, "2,3", apps.DROP_KERNEL),        # kernel threads
        (1500, 60, "60", apps.DROP_OTHER_PHASE),   # the next phase's load, started early
        (3500, 50, "50", apps.DROP_OTHER_PHASE),   # the previous phase's load, winding down
        (1500, 99, "99", "background"),            # the machine's own services
        (2500, 50, "50", apps.DROP_OUTSIDE),       # between windows
        (999, 99, "99", apps.DROP_OUTSIDE),
        (4001, 7, "4242", apps.DROP_OUTSIDE),      # even the probe, outside every window
    ]
    labels, reasons = label_rows(np.array([c[0] for c in cases]), np.array([c[1] for c in cases]),
                                 np.array([c[2] for c in cases], dtype=object), phases, 4242, "interactive")
    got = [label or reason for label, reason in zip(labels, reasons)]
    assert got == [c[3] for c in cases]
    assert all((label == "") != (reason == "") for label, reason in zip(labels, reasons))


def test_labelling_edge_cases():
    # Two windows sharing a millisecond: a row at it is dropped, not guessed.
    phases = [Phase(1000, 2000, frozenset({50}), "cpu_batch"), Phase(2000, 3000, frozenset(), None)]
    labels, reasons = label_rows(np.array([2000, 2500]), np.array([99, 99]), np.array(["99", "99"], dtype=object),
                                 phases, None, None)
    assert reasons.tolist() == [apps.DROP_AMBIGUOUS, ""] and labels.tolist() == ["", "background"]
    # A run without a probe (no probe_tgid), an idle phase (no load): everything is background.
    labels, _ = label_rows(np.array([2500]), np.array([7]), np.array(["4242"], dtype=object), phases, None, None)
    assert labels.tolist() == ["background"]
    # No phase: every row is outside.
    _, reasons = label_rows(np.array([1, 2]), np.array([1, 0]), np.array(["1", "2"], dtype=object), [], 1, "interactive")
    assert reasons.tolist() == [apps.DROP_OUTSIDE] * 2


def test_dataset_is_loaded_and_labelled(app_dataset):
    rows = load_dataset(app_dataset)
    assert rows.skipped_runs == ["old-run"]
    assert rows.x.dtype == np.float32 and rows.x.shape == (len(rows), 11)
    assert set(rows.labels.tolist()) == set(APP_CLASSES)
    assert set(rows.scenario.tolist()) == set(SCENARIOS) and set(rows.expert.tolist()) == {"eevdf", "bpfland"}
    assert len(set(rows.run.tolist())) == 2 * len(SCENARIOS)
    # Per run: the probe and three daemons on every window tick: 12 (ticks 2..13), or 6 + 5 in a
    # phased run (8 and 2 runs); kernel rows are never kept.
    counts = rows.rows_per_class()
    window_ticks = 8 * 12 + 2 * 11
    assert counts["interactive"] == window_ticks
    assert counts["background"] == 3 * counts["interactive"]
    assert counts["network"] == 2 * 12 * 2  # two runs, two process groups
    assert counts["io_bound"] == 2 * 12 + 2 * 5 and counts["cpu_batch"] == 2 * 12 + 2 * 6
    assert not np.any(rows.pgid == 0)
    # The phased runs' second load shows two ticks early: in the first window's last tick
    # (tick 7) it belongs to the other phase; tick 8 is outside both windows.
    assert rows.dropped[apps.DROP_OTHER_PHASE] == 2 * 1
    assert rows.dropped[apps.DROP_KERNEL] == window_ticks
    assert rows.dropped[apps.DROP_OUTSIDE] > 0 and rows.dropped[apps.DROP_AMBIGUOUS] == 0
    # Application ids keep the run (a process group is reused across runs).
    ids = rows.app_ids()
    network = ids[rows.labels == "network"]
    assert {i.split("/")[1] for i in network} == {"1:420", "1:421"} and len(set(network.tolist())) == 4
    # A manifest file's path works as well as its folder.
    assert len(load_dataset(app_dataset / "manifest.toml")) == len(rows)


def test_datasets_are_combined_with_unique_run_names(app_dataset, tmp_path):
    other = write_dataset(tmp_path / "other", seed=8, prefix="b-")
    rows = load_datasets([app_dataset, other])
    assert len(rows) == 2 * len(load_dataset(app_dataset))
    assert rows.skipped_runs == ["old-run", "b-old-run"]
    with pytest.raises(ValueError, match="given twice"):
        load_datasets([app_dataset, app_dataset / "manifest.toml"])
    # Two recordings name their runs alike: the later one's runs take its folder's name.
    again = write_dataset(tmp_path / "again", seed=9)
    both = load_datasets([app_dataset, again])
    assert len(both) == len(load_dataset(app_dataset)) + len(load_dataset(again))
    first, second = set(load_dataset(app_dataset).run.tolist()), set(load_dataset(again).run.tolist())
    assert first == second and set(both.run.tolist()) == first | {f"again/{r}" for r in second}
    assert both.skipped_runs == ["old-run", "again/old-run"]


def test_manifest_errors_say_what_is_wrong(app_dataset, tmp_path):
    text = (app_dataset / "manifest.toml").read_text()
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "raw").symlink_to(app_dataset / "raw")
    (bad / "manifest.toml").write_text(text.replace('app_class = "io_bound"', 'app_class = "turbo"', 1))
    with pytest.raises(ValueError, match="'turbo' is not one of the layer plan's"):
        load_dataset(bad)
    (bad / "manifest.toml").write_text(text.replace('app_class = "io_bound"\n', "", 1))
    with pytest.raises(ValueError, match="pgids without an app_class"):
        load_dataset(bad)
    (bad / "manifest.toml").write_text(text.replace('probe_app_class = "interactive"\n', "", 1))
    with pytest.raises(ValueError, match="probe_tgid without a probe_app_class"):
        load_dataset(bad)
    # The scenario runner's way of saying "no probe": probe_tgid 0 and an empty class.
    (bad / "manifest.toml").write_text(text.replace(f"probe_tgid = {PROBE_TGID}", "probe_tgid = 0")
                                       .replace('probe_app_class = "interactive"', 'probe_app_class = ""'))
    rows = load_dataset(bad)
    assert rows.rows_per_class()["interactive"] == 0
    assert rows.rows_per_class()["background"] == load_dataset(app_dataset).rows_per_class()["background"] * 4 // 3
    (bad / "manifest.toml").write_text(text.replace('schema = "asa.dataset"', 'schema = "other"'))
    with pytest.raises(ValueError, match="not a asa.dataset v1 manifest"):
        load_dataset(bad)
    only_old = tmp_path / "old"
    only_old.mkdir()
    (only_old / "manifest.toml").write_text(text.split("[[run]]")[0] + "[[run]]" + text.split("[[run]]")[-1])
    with pytest.raises(ValueError, match="no labelled application row"):
        load_datasets([only_old])


def test_another_app_feature_schema_is_refused(tmp_path):
    rng = np.random.default_rng(0)
    rows = run_rows(phases_of("S-cpu"), 3)
    path = tmp_path / "a.apps.parquet"
    write_apps_file(path, rows, rng, {apps.APP_SCHEMA_KEY: "asa.features", apps.APP_SCHEMA_VERSION_KEY: "1"})
    with pytest.raises(SchemaMismatch, match="schema asa.features v1; the app model is trained on asa.app-features v1"):
        apps.read_apps_file(path)
    write_apps_file(path, rows, rng, {})
    with pytest.raises(SchemaMismatch, match="no asa.app_feature_schema"):
        apps.read_apps_file(path)
    write_apps_file(path, rows, rng)
    assert apps.read_apps_file(path)["x"].shape == (len(rows), 11)
    # A v1 file cannot serve a (future) v2 training; a newer file serves this one, by name.
    v2 = FeatureSchema(APP_SCHEMA.name, 2, APP_SCHEMA.features + ("new_feature",))
    with pytest.raises(SchemaMismatch, match="v1; the app model is trained on asa.app-features v2"):
        apps.read_apps_file(path, v2)
    write_apps_file(path, rows, rng, {apps.APP_SCHEMA_KEY: APP_SCHEMA.name, apps.APP_SCHEMA_VERSION_KEY: "2"})
    assert apps.read_apps_file(path)["x"].shape == (len(rows), 11)
    table = pq.read_table(path)
    pq.write_table(table.drop_columns(["sleep_ms"]), path)
    with pytest.raises(ValueError, match=r"lacks columns \['sleep_ms'\]"):
        apps.read_apps_file(path)


def test_balancing_and_the_svm_log_transform():
    y = np.array([0] * 90 + [1] * 9 + [2])
    w = balanced_weights(y)
    assert [w[y == c].sum() for c in range(3)] == pytest.approx([100 / 3] * 3) and w.mean() == pytest.approx(1.0)
    x = np.arange(len(y) * 2, dtype=np.float32).reshape(-1, 2)
    _, y_sub = _subsample(x, y, 30, seed=0, balanced=True)
    assert np.bincount(y_sub).tolist() == [10, 9, 1]
    _, y_sub = _subsample(x, y, 30, seed=0)  # the workload model's: the same share of every class
    assert np.bincount(y_sub).tolist() == [27, 3, 1]  # at least 2 of a class, if it has them
    z = log1p_columns(np.array([[0.0, 9.0, np.nan], [np.e - 1, 1e6, 3.0]]), (0, 2))
    assert z[0, 0] == 0.0 and z[0, 1] == 9.0 and np.isnan(z[0, 2]) and z[1, 0] == pytest.approx(1.0)
    assert z[1, 2] == pytest.approx(np.log(4.0)) and z[1, 1] == 1e6


def test_log_transform_and_ignored_features_export_together(tmp_path):
    """The SVM's log transform in the graph, also behind the ignored-features mask (which then
    stays: fold.py folds it only into trees and the SVM's scaler)."""
    rng = np.random.default_rng(3)
    schema = FeatureSchema("asa.features.test", 1, ("a", "b", "c", "d"))
    y = np.repeat([0, 1, 2], 40)
    x = (np.abs(rng.normal(size=(120, 4))) * 10.0 ** y[:, None]).astype(np.float32)
    probe = np.abs(rng.normal(size=(200, 4)) * 50).astype(np.float32)
    probe[rng.random(probe.shape) < 0.2] = np.nan
    for ignored in ((), (3,)):
        ensemble = train(x, y, ["p", "q", "r"], small=True, balanced=True, svm_log_columns=(0, 1, 3), ignored=ignored)
        path = tmp_path / f"m{len(ignored)}.onnx"
        onnx.save(to_onnx(ensemble, schema, "pytest"), str(path))
        model = OnnxClassifier(path, schema)
        assert np.abs(ensemble.predict_proba(probe) - model.predict_proba(probe)).max() < 1e-5
        assert json.loads(model.meta["asa.svm_log1p_features"]) == ["a", "b", "d"]
    without = train(x, y, ["p", "q", "r"], small=True)
    onnx.save(to_onnx(without, schema, "pytest"), str(tmp_path / "plain.onnx"))
    assert "asa.svm_log1p_features" not in read_metadata(tmp_path / "plain.onnx")


def test_export_round_trip_and_the_metadata_the_agent_reads(app_dataset, tmp_path):
    rows = load_dataset(app_dataset)
    ensemble = train_apps.fit(rows.x, train_apps.class_indices(rows), APP_CLASSES, small=True)
    path = tmp_path / "apps.onnx"
    onnx.save(to_onnx(ensemble, APP_SCHEMA, "pytest"), str(path))
    probe = np.vstack([rows.x, np.abs(np.random.default_rng(2).normal(size=(100, 11)) * 100).astype(np.float32)])
    probe[-5:, 2] = np.nan
    exported = OnnxClassifier(path, APP_SCHEMA).predict_proba(probe)
    assert exported.shape == (len(probe), 5)
    assert np.abs(ensemble.predict_proba(probe) - exported).max() < 1e-5
    meta = read_metadata(path)
    assert meta["asa.model_schema"] == "asa.classifier" and meta["asa.model_version"] == "1"
    assert meta["asa.feature_schema"] == "asa.app-features" and meta["asa.feature_schema_version"] == "1"
    assert json.loads(meta["asa.feature_names"]) == list(APP_SCHEMA.features)
    assert json.loads(meta["asa.class_names"]) == list(APP_CLASSES)
    assert json.loads(meta["asa.svm_log1p_features"]) == list(apps.LOG1P_FEATURES)
    assert meta["asa.training_date"].endswith("Z") and meta["asa.trained_on"] == "pytest"
    session = agent_session(path)
    (inp,), outputs = session.get_inputs(), session.get_outputs()
    assert (inp.name, inp.type, inp.shape[1]) == ("features", "tensor(float)", 11)
    assert [(o.name, o.type, o.shape[1]) for o in outputs] == [("probabilities", "tensor(float)", 5)]
    one = session.run(["probabilities"], {"features": rows.x[:1]})[0]
    assert one.shape == (1, 5) and abs(float(one.sum()) - 1.0) < 1e-5


def test_cli_trains_evaluates_by_scenario_and_exports(app_dataset, tmp_path):
    out, report = tmp_path / "model" / "apps.onnx", tmp_path / "report"
    result = train_apps.run([app_dataset], out, report, folds=5, small=True)
    saved = json.loads((report / "report.json").read_text())
    assert saved["class_accuracy_heldout"] == result["class_accuracy_heldout"]
    acc = result["class_accuracy_heldout"]
    assert set(acc) >= {"overall", "balanced", "per_class", "rows"}
    assert list(acc["per_class"]) == list(APP_CLASSES) and acc["rows"] == load_dataset(app_dataset).rows_per_class()
    assert all(0.0 <= a <= 1.0 for a in acc["per_class"].values()) and 0.0 <= acc["overall"] <= 1.0
    assert len(result["confusion_heldout"]) == 5 and sum(map(sum, result["confusion_heldout"])) == result["rows"]["total"]
    # Five scenarios, five folds: each holds one scenario out, every scenario once.
    folds = result["folds"]
    assert sorted(s for f in folds for s in f["heldout_scenarios"]) == sorted(SCENARIOS)
    assert sum(f["rows"] for f in folds) == result["rows"]["total"]
    net = next(f for f in folds if f["heldout_scenarios"] == ["S-net"])
    assert net["classes_not_in_training"] == ["network"]
    assert all(f["classes_not_in_training"] == [] for f in folds if f is not net)
    assert set(result["member_accuracy_heldout"]) == {"xgboost", "random_forest", "svm"}
    assert result["app_majority_heldout"]["network"]["apps"] == 4
    assert result["export_max_abs_diff"] < 1e-5 and result["rows"]["runs_without_apps_file"] == ["old-run"]
    # Each class's median row, feature by feature: what the agent's test of the model feeds it.
    rows = load_dataset(app_dataset)
    assert list(result["class_medians"]) == list(APP_CLASSES)
    for c, median in result["class_medians"].items():
        assert len(median) == len(APP_SCHEMA.features)
        x = rows.x[rows.labels == c].astype(np.float64)
        assert median == pytest.approx(np.median(x, axis=0), rel=1e-3, abs=1e-9)
    meta = read_metadata(out)
    assert json.loads(meta["asa.class_names"]) == list(APP_CLASSES) and meta["asa.feature_schema"] == "asa.app-features"
    assert str(app_dataset) in meta["asa.trained_on"]
    text = (report / "report.md").read_text()
    assert "Held out by scenario" in text and "Confusion matrix" in text and "| S-net |" in text
    # The command line, with fewer folds than scenarios.
    train_apps.main([str(app_dataset), "--out", str(tmp_path / "cli.onnx"), "--report", str(tmp_path / "cli"),
                     "--folds", "2", "--members", "xgboost,random_forest", "--svm-max-ticks", "20"])
    cli = json.loads((tmp_path / "cli" / "report.json").read_text())
    assert len(cli["folds"]) == 2 and list(cli["member_accuracy_heldout"]) == ["xgboost", "random_forest"]


def test_training_needs_every_class_and_two_scenarios(app_dataset, tmp_path):
    text = (app_dataset / "manifest.toml").read_text()
    runs = text.split("[[run]]")
    no_net = tmp_path / "no-net"
    no_net.mkdir()
    (no_net / "raw").symlink_to(app_dataset / "raw")
    (no_net / "manifest.toml").write_text("[[run]]".join(r for r in runs if "S-net" not in r))
    with pytest.raises(ValueError, match="no labelled rows of class.* network"):
        train_apps.run([no_net], tmp_path / "m.onnx", tmp_path / "r", small=True)
    rows = load_dataset(app_dataset)
    rows.scenario[:] = "S-all"
    with pytest.raises(ValueError, match="two scenarios or more"):
        train_apps.cross_validate(rows, 5, small=True)


def test_the_schema_and_classes_are_the_agents():
    """APP_SCHEMA is agent/src/perception/apps.rs's, APP_CLASSES the default layer plan's."""
    source = (REPO / "agent/src/perception/apps.rs").read_text()
    assert re.search(r'APP_FEATURE_SCHEMA: &str = "([^"]+)"', source).group(1) == APP_SCHEMA.name
    assert int(re.search(r"APP_FEATURE_VERSION: u32 = (\d+)", source).group(1)) == APP_SCHEMA.version
    block = re.search(r"APP_FEATURES: \[&str; \d+\] = \[(.*?)\];", source, re.S).group(1)
    names = re.findall(r'^\s*"([^"]+)",', block, re.M)
    assert tuple(names) == APP_SCHEMA.features
    plan = tomllib.loads((REPO / "layers/default.toml").read_text())
    assert tuple(c["class"] for c in plan["class"]) == APP_CLASSES
