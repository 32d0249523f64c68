"""Evaluation report: accuracy, per-class precision/recall, confusion matrix, raw (per tick) and
after Algorithm 1 voting (the window restarts at each run; a tick without a decision counts as
wrong, and the share of ticks with a decision is reported as coverage)."""

from __future__ import annotations

import numpy as np

from .voting import vote_sequence


def metrics(y_true: np.ndarray, y_pred: list[int | None], classes: list[str]) -> dict:
    """Accuracy, coverage, per-class precision/recall/support and the confusion matrix
    (rows = true class, columns = predicted class, last column = no decision)."""
    n = len(classes)
    confusion = np.zeros((n, n + 1), dtype=np.int64)
    for t, p in zip(y_true, y_pred):
        confusion[int(t), n if p is None else int(p)] += 1
    correct = int(np.trace(confusion[:, :n]))
    total = int(confusion.sum())
    per_class = {}
    for c, name in enumerate(classes):
        predicted = int(confusion[:, c].sum())
        actual = int(confusion[c].sum())
        per_class[name] = {
            "precision": float(confusion[c, c] / predicted) if predicted else None,
            "recall": float(confusion[c, c] / actual) if actual else None,
            "support": actual,
        }
    return {
        "ticks": total,
        "accuracy": correct / total if total else None,
        "coverage": float(1 - confusion[:, n].sum() / total) if total else None,
        "per_class": per_class,
        "confusion": confusion.tolist(),
    }


def evaluate(probabilities: np.ndarray, y_true: np.ndarray, runs: list[str], classes: list[str],
             voting: dict | None = None) -> dict:
    """Raw metrics (argmax per tick) and voted metrics (Algorithm 1 per run)."""
    raw = [int(i) for i in np.argmax(probabilities, axis=1)]
    voted = vote_sequence(probabilities, runs, **(voting or {}))
    return {"raw": metrics(y_true, raw, classes), "voted": metrics(y_true, voted, classes)}


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.4f}"


def markdown(report: dict, classes: list[str], header: str) -> str:
    lines = [header, ""]
    for kind in ("raw", "voted"):
        m = report[kind]
        title = "Raw (argmax per tick)" if kind == "raw" else "After time-weighted voting (Algorithm 1)"
        lines += [f"## {title}", "", f"ticks {m['ticks']}, accuracy {_fmt(m['accuracy'])}, coverage {_fmt(m['coverage'])}", "",
                  "| class | precision | recall | ticks |", "|---|---|---|---|"]
        for name in classes:
            c = m["per_class"][name]
            lines.append(f"| {name} | {_fmt(c['precision'])} | {_fmt(c['recall'])} | {c['support']} |")
        lines += ["", "Confusion matrix (rows: true, columns: predicted, last: no decision):", ""]
        lines += confusion_lines(classes, m["confusion"], none_column=True)
        lines.append("")
    return "\n".join(lines)


def confusion_lines(classes: list[str], confusion: list[list[int]], none_column: bool = False) -> list[str]:
    """A confusion matrix as Markdown table lines (rows: true class, columns: predicted class,
    then `none` (no decision) when `none_column`)."""
    columns = list(classes) + (["none"] if none_column else [])
    lines = ["| true \\ predicted | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for name, row in zip(classes, confusion):
        lines.append(f"| {name} | " + " | ".join(str(v) for v in row) + " |")
    return lines
