"""An exported model's accuracy on recorded ticks.

    python -m asa_classifier.evaluate --model MODEL.onnx --manifest DATA/manifest.toml [--manifest ...] \
        --feature-schema ../agent/feature_schema.toml [--classes load|label] [--heldout-of REPORT.json] \
        [--json OUT.json]

Runs the model as the agent does (a model of an older feature schema version is fed that
version's features, by name) on every labelled tick of the manifests and reports raw (argmax per
tick) and voted (Algorithm 1, the window restarted per run) accuracy. A recorded class the model
does not know counts as wrong on every tick, and is named. With `--heldout-of` (a training
report, `report.json` of `asa_classifier.train`) the same figures are also given for the runs
that training held out, alone: a model that never saw any of these runs compared with the
trained one on the very same ticks. When the runs were recorded under several experts
(the manifest's `expert`), the figures are also given per expert (`by_expert`): the features
describe a load as the running scheduler lets it run. `asa calibrate --retrain` calls it to say whether the
shipped model holds on the calibrated machine.

Prints one line per set and writes OUT.json (schema `asa.classifier-evaluation` v1) when asked.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from .dataset import CLASS_SETS, load_manifest, merge, relabel, stack
from .export import OnnxClassifier, read_metadata
from .report import evaluate
from .schema import META_FEATURE_SCHEMA_VERSION, FeatureSchema
from .voting import DEFAULT_DECAY, DEFAULT_THRESHOLD, DEFAULT_WINDOW

VOTING = dict(window=DEFAULT_WINDOW, threshold=DEFAULT_THRESHOLD, decay=DEFAULT_DECAY)


def model_schema(model: Path, schema: FeatureSchema) -> FeatureSchema:
    """The features the agent feeds `model`: those of its own schema version when it is older."""
    version = int(read_metadata(model).get(META_FEATURE_SCHEMA_VERSION, schema.version))
    return schema.as_of(version) if version < schema.version else schema


def score(model: OnnxClassifier, runs) -> dict:
    """Raw and voted accuracy of `model` on `runs` (already relabelled); classes the model does
    not know are appended after its own and can never be predicted."""
    known = list(model.classes)
    recorded = sorted({label for r in runs for label in r.labels})
    unknown = [c for c in recorded if c not in known]
    classes = known + unknown
    x, y, names = stack(runs, classes)
    probabilities = model.predict_proba(x)
    if unknown:
        probabilities = np.hstack([probabilities, np.zeros((len(x), len(unknown)), dtype=probabilities.dtype)])
    m = evaluate(probabilities, y, names, classes, VOTING)
    recall = {c: m["voted"]["per_class"][c]["recall"] for c in recorded}
    return {"runs": len(runs), "ticks": m["raw"]["ticks"], "raw": m["raw"]["accuracy"],
            "voted": m["voted"]["accuracy"], "coverage": m["voted"]["coverage"],
            "voted_recall": recall, "classes_unknown_to_model": unknown}


def evaluate_model(model_path: Path, manifests: list[Path], schema: FeatureSchema, class_set: str = "load",
                   heldout_of: Path | None = None) -> dict:
    """The model's accuracy on every run of `manifests` (`all`) and, with `heldout_of`, on the
    runs that training report held out (`heldout`; None when none of them is in the manifests)."""
    schema = model_schema(model_path, schema)
    model = OnnxClassifier(model_path, schema)
    dataset = merge([load_manifest(m, schema, older_as_missing=True) for m in manifests])
    relabel(dataset.runs, class_set)
    result = {"schema": "asa.classifier-evaluation", "version": 1, "model": str(model_path),
              "model_classes": list(model.classes), "manifests": [str(m) for m in manifests],
              "class_set": class_set, "voting": VOTING, "all": score(model, dataset.runs)}
    experts = sorted({r.expert for r in dataset.runs if r.expert})
    if len(experts) > 1:
        # The features describe the load as the running scheduler lets it run: a model can hold
        # under one expert and not under another (scx_layered, 2026-11-30).
        result["by_expert"] = {e: score(model, [r for r in dataset.runs if r.expert == e]) for e in experts}
    if heldout_of is not None:
        names = set(json.loads(Path(heldout_of).read_text())["heldout_runs"])
        held = [r for r in dataset.runs if r.name in names]
        result["heldout_of"] = str(heldout_of)
        result["heldout"] = score(model, held) if held else None
    return result


def line(what: str, m: dict | None) -> str:
    if m is None:
        return f"{what}: no run"
    text = (f"{what}: {m['runs']} runs, {m['ticks']} ticks, raw accuracy {m['raw']:.4f}, voted {m['voted']:.4f} "
            f"(coverage {m['coverage']:.4f})")
    if m["classes_unknown_to_model"]:
        text += f"; classes the model does not know (wrong on every tick): {', '.join(m['classes_unknown_to_model'])}"
    return text


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="an exported model (classifier.onnx)")
    parser.add_argument("--manifest", type=Path, action="append", required=True,
                        help="a dataset manifest; repeat to merge several")
    parser.add_argument("--feature-schema", type=Path, required=True)
    parser.add_argument("--classes", choices=CLASS_SETS, default="load",
                        help="load (default): the background load only; label: the recorded labels")
    parser.add_argument("--heldout-of", type=Path, default=None, metavar="REPORT.json",
                        help="also evaluate on the runs this training report held out")
    parser.add_argument("--json", type=Path, default=None, help="write the result here")
    args = parser.parse_args(argv)
    result = evaluate_model(args.model, args.manifest, FeatureSchema.load(args.feature_schema), args.classes,
                            args.heldout_of)
    print(line(f"{args.model} on every run", result["all"]))
    for expert, m in result.get("by_expert", {}).items():
        print(line(f"  under {expert}", m))
    if "heldout" in result:
        print(line(f"{args.model} on the runs {args.heldout_of} held out", result["heldout"]))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
