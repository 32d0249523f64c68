"""Time-weighted probability voting (ASA paper, Algorithm 1), streaming.

The same definition as agent/src/decision/voting.rs (cross-checked through
agent/tests/data/voting_vectors.json): the newest tick has weight alpha^0, a tick k ticks old
alpha^k; probabilities not strictly above theta count 0; no class scoring > 0 means no decision
(None); ties go to the lowest class index.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

DEFAULT_WINDOW = 6
DEFAULT_THRESHOLD = 0.5
DEFAULT_DECAY = 0.8


@dataclass
class Vote:
    """One vote: the class (or None), the per-class scores, margin and support."""

    cls: int | None
    scores: list[float]
    margin: float
    support: float
    ticks: int


class TimeWeightedVoter:
    """Algorithm 1 over a sliding window of `window` ticks."""

    def __init__(self, classes: int, window: int = DEFAULT_WINDOW,
                 threshold: float = DEFAULT_THRESHOLD, decay: float = DEFAULT_DECAY):
        if window < 1 or not 0.0 <= threshold < 1.0 or not 0.0 < decay <= 1.0 or classes < 1:
            raise ValueError(f"bad voting parameters W={window} theta={threshold} alpha={decay} classes={classes}")
        self.classes, self.window, self.threshold, self.decay = classes, window, threshold, decay
        self.ticks: deque[list[float]] = deque(maxlen=window)

    def max_score(self) -> float:
        return sum(self.decay ** k for k in range(self.window))

    def push(self, probabilities) -> Vote:
        probabilities = [float(p) for p in probabilities]
        if len(probabilities) != self.classes:
            raise ValueError(f"{len(probabilities)} probabilities for {self.classes} classes")
        self.ticks.append(probabilities)
        return self.vote()

    def vote(self) -> Vote:
        scores = [0.0] * self.classes
        weight = 1.0
        for tick in reversed(self.ticks):
            for c, p in enumerate(tick):
                if p > self.threshold:  # NaN compares False: counts 0
                    scores[c] += p * weight
            weight *= self.decay
        best = None
        for c, s in enumerate(scores):
            if s > 0.0 and (best is None or s > scores[best]):
                best = c
        if best is None:
            return Vote(None, scores, 0.0, 0.0, len(self.ticks))
        second = max([s for c, s in enumerate(scores) if c != best], default=0.0)
        total = sum(scores)
        return Vote(best, scores, (scores[best] - second) / total, scores[best] / self.max_score(), len(self.ticks))


def vote_sequence(probabilities, runs=None, **params) -> list[int | None]:
    """Votes over a sequence of per-tick probability rows; the window restarts at each new run."""
    out: list[int | None] = []
    voter = None
    previous_run = object()
    for i, row in enumerate(probabilities):
        run = runs[i] if runs is not None else None
        if voter is None or run != previous_run:
            voter = TimeWeightedVoter(len(row), **params)
            previous_run = run
        out.append(voter.push(row).cls)
    return out
