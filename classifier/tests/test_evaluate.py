"""An exported model evaluated on recorded ticks, and training on the project's recordings plus a
machine's own (`asa calibrate --retrain`'s Python side), on small synthetic manifests."""

import json

import numpy as np
import pytest

from asa_classifier import evaluate as evaluate_cli
from asa_classifier import train as train_cli
from asa_classifier.export import read_metadata
from asa_classifier.schema import META_TRAINED_ON
from conftest import CLASSES, SCHEMA, write_run


def write_machine(directory, rng, labels=CLASSES, runs_per_class=4, names="S{c}-eevdf-r{r}", shift=2.5):
    """A machine's calibration recording: run names as the scenario runner writes them."""
    directory.mkdir()
    entries = []
    for c, label in enumerate(labels):
        for r in range(runs_per_class):
            name = names.format(c=c, r=r + 1)
            write_run(directory / f"{name}.parquet", label, 20, rng, shift * CLASSES.index(label))
            entries.append(f'[[run]]\nname = "{name}"\nfile = "{name}.parquet"\nscenario = "S{c}"\n')
    (directory / "manifest.toml").write_text(
        'schema = "asa.dataset"\nversion = 1\nfeature_schema = "asa.features.test"\nfeature_schema_version = 3\n'
        f'machine = "pytest {directory.name}"\n\n' + "\n".join(entries))
    return directory / "manifest.toml"


def test_the_model_is_scored_on_every_run_and_on_the_runs_a_training_held_out(dataset_dir, schema, tmp_path):
    trained = train_cli.run(dataset_dir / "manifest.toml", schema, tmp_path / "m", small=True, class_set="load")
    result = evaluate_cli.evaluate_model(tmp_path / "m" / "classifier.onnx", [dataset_dir / "manifest.toml"], schema,
                                         "load", heldout_of=tmp_path / "m" / "report.json")
    assert result["all"]["runs"] == 9 and result["all"]["ticks"] == 9 * 30
    held = result["heldout"]
    assert held["runs"] == len(trained["heldout_runs"]) and held["ticks"] == trained["raw"]["ticks"]
    # The same model on the same held-out ticks: the training report's figures.
    assert held["raw"] == pytest.approx(trained["raw"]["accuracy"], abs=1e-6)
    assert held["voted"] == pytest.approx(trained["voted"]["accuracy"], abs=1e-6)
    assert result["all"]["classes_unknown_to_model"] == []
    assert set(result["all"]["voted_recall"]) == {"disk_io", "idle", "kernel_build"}


def test_a_class_the_model_does_not_know_counts_as_wrong_and_is_named(tmp_path, schema):
    rng = np.random.default_rng(3)
    two = write_machine(tmp_path / "two", rng, labels=CLASSES[:2])
    three = write_machine(tmp_path / "three", rng)
    train_cli.run(two, schema, tmp_path / "m", small=True, class_set="load")
    result = evaluate_cli.evaluate_model(tmp_path / "m" / "classifier.onnx", [three], schema, "load")
    m = result["all"]
    assert m["classes_unknown_to_model"] == ["disk_io"]
    assert m["voted_recall"]["disk_io"] == 0.0
    assert m["raw"] <= 2 / 3 + 1e-9
    assert "does not know" in evaluate_cli.line("x", m)


def test_runs_under_several_experts_are_also_scored_per_expert(tmp_path, schema):
    """A model that holds under one scheduler and not under another: the per-expert figures
    show it where the pooled one averages it away."""
    rng = np.random.default_rng(7)
    train_cli.run(write_machine(tmp_path / "train", rng), schema, tmp_path / "m", small=True, class_set="load")
    directory = tmp_path / "two-experts"
    directory.mkdir()
    entries = []
    for c, label in enumerate(CLASSES):
        for expert, shift in (("cosmos", 2.5 * c), ("layered", 2.5 * ((c + 1) % len(CLASSES)))):
            name = f"S{c}-{expert}-r1"
            write_run(directory / f"{name}.parquet", label, 20, rng, shift)
            entries.append(f'[[run]]\nname = "{name}"\nfile = "{name}.parquet"\nscenario = "S{c}"\n'
                           f'expert = "{expert}"\n')
    (directory / "manifest.toml").write_text(
        'schema = "asa.dataset"\nversion = 1\nfeature_schema = "asa.features.test"\nfeature_schema_version = 3\n'
        'machine = "pytest two experts"\n\n' + "\n".join(entries))
    result = evaluate_cli.evaluate_model(tmp_path / "m" / "classifier.onnx", [directory / "manifest.toml"], schema)
    by_expert = result["by_expert"]
    assert set(by_expert) == {"cosmos", "layered"}
    assert by_expert["cosmos"]["runs"] == 3 and by_expert["cosmos"]["raw"] > 0.9
    assert by_expert["layered"]["raw"] < 0.2
    assert by_expert["layered"]["raw"] < result["all"]["raw"] < by_expert["cosmos"]["raw"]
    # One expert: nothing to break down.
    one = evaluate_cli.evaluate_model(tmp_path / "m" / "classifier.onnx", [tmp_path / "train" / "manifest.toml"],
                                      schema)
    assert "by_expert" not in one


def test_the_cli_writes_the_json_the_calibration_reads(dataset_dir, schema, tmp_path, capsys):
    train_cli.run(dataset_dir / "manifest.toml", schema, tmp_path / "m", small=True, class_set="load")
    schema_file = tmp_path / "schema.toml"
    schema_file.write_text('schema = "asa.features.test"\nversion = 3\n'
                           + "".join(f'[[feature]]\nname = "{f}"\n' for f in SCHEMA.features))
    out = tmp_path / "eval" / "shipped.json"
    evaluate_cli.main(["--model", str(tmp_path / "m" / "classifier.onnx"), "--manifest",
                       str(dataset_dir / "manifest.toml"), "--feature-schema", str(schema_file),
                       "--heldout-of", str(tmp_path / "m" / "report.json"), "--json", str(out)])
    result = json.loads(out.read_text())
    assert result["schema"] == "asa.classifier-evaluation" and result["version"] == 1
    for key in ("runs", "ticks", "raw", "voted", "coverage"):
        assert key in result["all"] and key in result["heldout"]
    printed = capsys.readouterr().out
    assert "on every run: 9 runs" in printed and "held out" in printed


def test_training_on_a_list_of_recordings_plus_the_machine_holds_out_the_machines_runs(tmp_path, schema):
    """The project's recordings come from a list file (relative to its folder); a run named like
    one of the machine's (both `S0-eevdf-r1`) is renamed in the training-only manifest, and every
    held-out run is the machine's, under its own name."""
    rng = np.random.default_rng(11)
    project = write_machine(tmp_path / "project", rng, runs_per_class=3)
    machine = write_machine(tmp_path / "machine", rng, runs_per_class=4, shift=3.0)
    listing = tmp_path / "models" / "recordings.txt"
    listing.parent.mkdir()
    listing.write_text("# the lab model's recordings\n\n../project/manifest.toml  # one\n")
    manifests = train_cli.read_manifest_list(listing)
    assert manifests == [project.resolve()]
    machine = machine.resolve()
    result = train_cli.run(manifests + [machine], schema, tmp_path / "model", small=True, class_set="load",
                           heldout_from=[machine])
    machine_runs = {f"S{c}-eevdf-r{r}" for c in range(3) for r in range(1, 5)}
    assert result["heldout_runs"] and set(result["heldout_runs"]) <= machine_runs
    assert len(result["heldout_runs"]) == 3  # one of four runs per class
    renamed = [n for n in result["train_runs"] if n.startswith(str(project.parent))]
    assert len(renamed) == 9 and f"{project.parent}/S0-eevdf-r1" in renamed
    assert len(result["train_runs"]) == 9 + 12 - 3
    assert (tmp_path / "model" / "classifier.onnx").is_file()


def test_a_report_names_manifests_inside_the_working_directory_relative_to_it(tmp_path, schema, monkeypatch):
    """A list file's manifests resolve to absolute paths; the report (and the model's metadata)
    must not carry the checkout's location, or the shipped report names a folder no clone has."""
    rng = np.random.default_rng(13)
    project = write_machine(tmp_path / "project", rng, runs_per_class=3)
    machine = write_machine(tmp_path / "machine", rng, runs_per_class=4, shift=3.0)
    monkeypatch.chdir(tmp_path)
    result = train_cli.run([project.resolve(), machine.resolve()], schema, tmp_path / "model", small=True,
                           class_set="load", heldout_from=[machine.resolve()])
    assert result["manifest"] == "project/manifest.toml, machine/manifest.toml"
    assert result["heldout_from"] == ["machine/manifest.toml"]
    assert "project/S0-eevdf-r1" in result["train_runs"]
    assert str(tmp_path) not in (tmp_path / "model" / "report.md").read_text()
    assert str(tmp_path) not in json.dumps(result)
    assert str(tmp_path) not in read_metadata(tmp_path / "model" / "classifier.onnx")[META_TRAINED_ON]


def test_a_listed_manifest_that_does_not_exist_is_named_with_its_line(tmp_path):
    listing = tmp_path / "recordings.txt"
    listing.write_text("# none yet\n\nmissing/manifest.toml\n")
    with pytest.raises(ValueError, match=r"recordings.txt:3: missing/manifest.toml does not exist"):
        train_cli.read_manifest_list(listing)
    listing.write_text("# nothing\n")
    with pytest.raises(ValueError, match="lists no manifest"):
        train_cli.read_manifest_list(listing)


def test_the_train_cli_reads_the_list_and_refuses_a_manifest_given_twice(tmp_path, dataset_dir, schema):
    listing = tmp_path / "recordings.txt"
    listing.write_text(f"{dataset_dir / 'manifest.toml'}\n")
    with pytest.raises(ValueError, match="given twice"):
        train_cli.run([dataset_dir / "manifest.toml"] * 2, schema, tmp_path / "m", small=True)
    with pytest.raises(SystemExit):
        train_cli.main(["--feature-schema", "x.toml", "--out", str(tmp_path / "o")])


@pytest.mark.parametrize("model", ["default", "lab"])
def test_a_shipped_models_recordings_list_names_what_it_was_trained_on(model):
    """models/default/recordings.txt is the list `asa calibrate --retrain` trains on (and
    models/lab's the evaluation model's): the manifests the shipped model's report says it was
    trained on, every one present."""
    from pathlib import Path
    classifier = Path(__file__).resolve().parents[1]
    listed = train_cli.read_manifest_list(classifier / f"models/{model}/recordings.txt")
    report = json.loads((classifier / f"models/{model}/report.json").read_text())
    trained_on = [(classifier / m).resolve() for m in report["manifest"].split(", ")]
    assert listed == trained_on
