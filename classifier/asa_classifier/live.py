"""Live ticks against recorded ones: why does the agent classify a scenario differently live?

Reads a live calibration folder (`asa calibrate --stage live`: results.json and the agent's
decision logs in agent/*.jsonl, written with `asa run --log-features`), keeps the ticks of every
`asa` / `asa-dry-run` run (each phase of a phased scenario on its own, over the phase's times),
and compares them with the recorded runs of the same `<probe>+<load>` label:

- the model run again in Python on the logged features (its probabilities must equal the ones
  the agent logged: the check that Rust and Python read the same vector the same way);
- per feature, the live median against the recorded median and spread (robust z: the difference
  over the recorded runs' IQR / 1.349), and the share of live ticks outside the recorded
  1st-99th percentiles;
- substitution: each feature in turn set to its recorded median on the live ticks, the model
  run again; the features whose substitution brings the most live ticks to the right class are
  the ones the live classification turns on.

    python -m asa_classifier.live results/DIR --model classifier/models/lab/classifier.onnx \\
        --feature-schema agent/feature_schema.toml --manifest classifier/data/X/probe/manifest.toml ... \\
        [--classes load] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .dataset import CLASS_SETS, load_manifest, merge
from .export import OnnxClassifier, read_metadata
from .schema import META_FEATURE_SCHEMA_VERSION, FeatureSchema

AGENT_EXPERTS = ("asa", "asa-dry-run")


@dataclass
class LiveRun:
    """The agent's ticks in one run of a single-load scenario, or in one phase of a phased one."""

    scenario: str
    expert: str
    rep: int
    label: str  # <probe>+<load>
    x: np.ndarray  # [ticks, features], NaN = missing
    logged: np.ndarray  # the probabilities the agent logged, [ticks, classes]
    logged_classes: list[str]
    voted: list[str | None]
    phase: int | None = None  # 1-based, for a phase of a phased scenario

    def name(self) -> str:
        phase = f" phase {self.phase}" if self.phase else ""
        return f"{self.scenario} {self.expert} rep {self.rep}{phase}"


def read_ticks(log_dir: Path) -> list[dict]:
    """Every tick with features of every decision log in `log_dir`, sorted by time."""
    ticks = []
    for path in sorted(log_dir.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                tick = json.loads(line)
                if tick.get("features") is not None:
                    ticks.append(tick)
    return sorted(ticks, key=lambda t: t["unix_ms"])


def live_runs(calibration: Path, schema: FeatureSchema) -> tuple[list[LiveRun], list[str]]:
    """The agent's runs with their ticks, one entry per phase; notes on what was left out.

    A single-load run's window is the probe's; each phase of a phased scenario is its own entry
    (label `<probe>+<phase load>`) over the phase's own start and end, so the idle phase before
    a load is compared with recorded idle ticks. Phases written before the runner logged their
    times are left out with a note."""
    results = json.loads((calibration / "results.json").read_text())
    ticks = read_ticks(calibration / "agent")
    notes = []
    if not ticks:
        raise ValueError(f"{calibration}/agent: no decision-log tick with features "
                         "(the agent must run with --log-features; `asa calibrate --stage live` does)")
    runs = []
    for scenario in results["scenarios"]:
        for run in scenario["runs"]:
            if run["expert"] not in AGENT_EXPERTS:
                continue
            where = f"{scenario['scenario']} {run['expert']} rep {run['rep']}"
            phases = run.get("phases") or []
            if len(phases) == 1:
                windows = [(phases[0]["load"], run["probe_started_unix_ms"], run["probe_ended_unix_ms"], None)]
            # 0 or absent: written before the runner logged phase times (as the Rust summary reads it).
            elif phases and all(p.get("started_unix_ms") and p.get("ended_unix_ms") for p in phases):
                windows = [(p["load"], p["started_unix_ms"], p["ended_unix_ms"], i + 1)
                           for i, p in enumerate(phases)]
            else:
                notes.append(f"{where}: {len(phases)} phases without their times, left out")
                continue
            for load, start, end, phase in windows:
                interval = [t for t in ticks if start <= t["unix_ms"] <= end]
                # The recordings keep a tick when the span it covers lies in the window: the
                # first tick after the window opened covers time before it.
                inside = interval[1:]
                if not inside:
                    notes.append(f"{where}{f' phase {phase}' if phase else ''}: no tick in the window")
                    continue
                x = np.array([[np.nan if t["features"].get(n) is None else t["features"][n]
                               for n in schema.features] for t in inside], dtype=np.float32)
                classes = list(inside[0]["probabilities"])
                logged = np.array([[t["probabilities"][c] for c in classes] for t in inside], dtype=np.float32)
                runs.append(LiveRun(scenario["scenario"], run["expert"], run["rep"], f"{scenario['probe']}+{load}",
                                    x, logged, classes, [t.get("voted_class") for t in inside], phase))
    return runs, notes


def class_of(label: str, class_set: str) -> str:
    return label.split("+", 1)[1] if class_set == "load" and "+" in label else label


def robust_spread(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    if finite.size < 2:
        return float("nan")
    q1, q3 = np.percentile(finite, [25, 75])
    return float((q3 - q1) / 1.349)


def diagnose(live: list[LiveRun], recorded_x: dict[str, np.ndarray], recorded_runs: dict[str, int],
             model: OnnxClassifier, schema: FeatureSchema, class_set: str, top: int = 12) -> dict:
    """The comparison for every label with live runs (see the module doc)."""
    report = {"labels": []}
    for label in sorted({r.label for r in live}):
        runs = [r for r in live if r.label == label]
        truth = class_of(label, class_set)
        x_live = np.concatenate([r.x for r in runs])
        proba = model.predict_proba(x_live)
        logged = np.concatenate([r.logged[:, [r.logged_classes.index(c) for c in model.classes]] for r in runs])
        predicted = [model.classes[i] for i in proba.argmax(axis=1)]
        entry = {
            "label": label,
            "class": truth,
            "live_runs": [r.name() for r in runs],
            "live_ticks": len(x_live),
            "python_vs_logged_max_abs_diff": float(np.abs(proba - logged).max()),
            "live_predicted": {c: predicted.count(c) for c in sorted(set(predicted))},
            "live_accuracy": predicted.count(truth) / len(predicted),
        }
        voted = [v for r in runs for v in r.voted]
        entry["live_voted"] = {str(c): voted.count(c) for c in sorted(set(voted), key=str)}
        rec = recorded_x.get(label)
        if rec is None or len(rec) == 0:
            entry["recorded_ticks"] = 0
            report["labels"].append(entry)
            continue
        entry["recorded_ticks"] = len(rec)
        entry["recorded_runs"] = recorded_runs[label]
        rec_predicted = model.predict_proba(rec).argmax(axis=1)
        entry["recorded_accuracy"] = float(np.mean([model.classes[i] == truth for i in rec_predicted]))
        truth_index = model.classes.index(truth) if truth in model.classes else None
        features = []
        for j, name in enumerate(schema.features):
            live_col, rec_col = x_live[:, j], rec[:, j]
            live_finite, rec_finite = live_col[np.isfinite(live_col)], rec_col[np.isfinite(rec_col)]
            row = {"feature": name, "live_missing": int(len(live_col) - len(live_finite)),
                   "recorded_missing": int(len(rec_col) - len(rec_finite))}
            if live_finite.size and rec_finite.size:
                rec_median = float(np.median(rec_finite))
                live_median = float(np.median(live_finite))
                spread = robust_spread(rec_col)
                lo, hi = np.percentile(rec_finite, [1, 99])
                row.update(live_median=live_median, recorded_median=rec_median,
                           recorded_p5=float(np.percentile(rec_finite, 5)), recorded_p95=float(np.percentile(rec_finite, 95)),
                           z=(live_median - rec_median) / spread if spread > 0 else (0.0 if live_median == rec_median else float("inf")),
                           outside_share=float(np.mean((live_finite < lo) | (live_finite > hi))))
                if truth_index is not None:
                    substituted = x_live.copy()
                    substituted[:, j] = rec_median
                    hits = model.predict_proba(substituted).argmax(axis=1) == truth_index
                    row["accuracy_if_recorded_median"] = float(hits.mean())
            features.append(row)
        by_z = sorted((f for f in features if "z" in f), key=lambda f: -abs(f["z"]))
        by_fix = sorted((f for f in features if "accuracy_if_recorded_median" in f),
                        key=lambda f: -f["accuracy_if_recorded_median"])
        entry["drift"] = by_z[:top]
        entry["substitution"] = by_fix[:top]
        if truth_index is not None and by_z:
            # The most drifted features together, set to their recorded medians.
            substituted = x_live.copy()
            for f in by_z[:5]:
                substituted[:, schema.features.index(f["feature"])] = f["recorded_median"]
            hits = model.predict_proba(substituted).argmax(axis=1) == truth_index
            entry["accuracy_if_top5_drift_recorded"] = float(hits.mean())
        report["labels"].append(entry)
    return report


def fmt(v) -> str:
    if isinstance(v, float):
        if not np.isfinite(v):
            return str(v)
        return f"{v:.3g}" if abs(v) < 1e4 else f"{v:.0f}"
    return str(v)


def markdown(report: dict, calibration: str, notes: list[str]) -> str:
    lines = [f"# Live ticks against recorded ones: {calibration}", ""]
    for e in report["labels"]:
        lines += [f"## {e['label']} (class {e['class']})", "",
                  f"- live: {e['live_ticks']} ticks of {', '.join(e['live_runs'])}; argmax per tick "
                  f"{e['live_predicted']}, voted {e['live_voted']}; raw accuracy {e['live_accuracy']:.2f}",
                  f"- the model in Python on the logged features vs the probabilities the agent logged: "
                  f"max |diff| {e['python_vs_logged_max_abs_diff']:.2g}"]
        if not e.get("recorded_ticks"):
            lines += ["- no recorded run of this label", ""]
            continue
        lines += [f"- recorded: {e['recorded_ticks']} ticks of {e['recorded_runs']} runs; raw accuracy "
                  f"{e['recorded_accuracy']:.2f} (training runs included: an upper bound)"]
        if "accuracy_if_top5_drift_recorded" in e:
            lines.append(f"- the five most drifted features set to their recorded medians: raw accuracy "
                         f"{e['accuracy_if_top5_drift_recorded']:.2f}")
        lines += ["", "Most drifted (robust z = (live median - recorded median) / (recorded IQR / 1.349)):", "",
                  "| feature | live median | recorded median | recorded p5-p95 | z | live outside p1-p99 | accuracy if recorded median |",
                  "|---|---|---|---|---|---|---|"]
        for f in e["drift"]:
            lines.append(f"| {f['feature']} | {fmt(f['live_median'])} | {fmt(f['recorded_median'])} | "
                         f"{fmt(f['recorded_p5'])}-{fmt(f['recorded_p95'])} | {fmt(f['z'])} | "
                         f"{f['outside_share']:.2f} | {fmt(f.get('accuracy_if_recorded_median', float('nan')))} |")
        lines += ["", "Substitution (one feature at a time set to its recorded median; raw accuracy on the live ticks):", "",
                  "| feature | accuracy | z |", "|---|---|---|"]
        for f in e["substitution"]:
            lines.append(f"| {f['feature']} | {f['accuracy_if_recorded_median']:.2f} | {fmt(f['z'])} |")
        lines.append("")
    if notes:
        lines += ["Left out:", ""] + [f"- {n}" for n in notes] + [""]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("calibration", type=Path, help="a live calibration folder (results.json, agent/)")
    parser.add_argument("--model", type=Path, required=True, help="the model the agent ran")
    parser.add_argument("--feature-schema", type=Path, required=True)
    parser.add_argument("--manifest", type=Path, action="append", required=True,
                        help="recordings to compare with; repeat (older schema versions: newer features missing)")
    parser.add_argument("--classes", choices=CLASS_SETS, default="load")
    parser.add_argument("--top", type=int, default=12, help="rows per table")
    parser.add_argument("--out", type=Path, help="write live-diagnosis.md and .json here")
    args = parser.parse_args(argv)
    schema = FeatureSchema.load(args.feature_schema)
    # The agent feeds a model of an older schema version the features of that version by name.
    model_version = int(read_metadata(args.model).get(META_FEATURE_SCHEMA_VERSION, schema.version))
    if model_version < schema.version:
        schema = schema.as_of(model_version)
    model = OnnxClassifier(args.model, schema)
    live, notes = live_runs(args.calibration, schema)
    if not live:
        raise SystemExit(f"{args.calibration}: no agent run with logged features")
    wanted = {r.label for r in live}
    dataset = merge([load_manifest(m, schema, older_as_missing=True) for m in args.manifest])
    recorded_x, recorded_runs = {}, {}
    for label in wanted:
        runs = [r for r in dataset.runs if label in r.labels]
        recorded_runs[label] = len(runs)
        parts = [r.x[[i for i, l in enumerate(r.labels) if l == label]] for r in runs]
        recorded_x[label] = np.concatenate(parts) if parts else np.empty((0, len(schema.features)), np.float32)
    report = diagnose(live, recorded_x, recorded_runs, model, schema, args.classes, args.top)
    report["calibration"] = str(args.calibration)
    report["model"] = str(args.model)
    report["manifests"] = [str(m) for m in args.manifest]
    report["left_out"] = notes
    text = markdown(report, str(args.calibration), notes)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "live-diagnosis.json").write_text(json.dumps(report, indent=1) + "\n")
        (args.out / "live-diagnosis.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
