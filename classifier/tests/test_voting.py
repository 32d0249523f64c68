"""Algorithm 1 in Python: hand-computed cases (the same as agent/src/decision/voting.rs) and
the shared vectors the Rust test reads."""

import json
from pathlib import Path

import pytest

from asa_classifier.voting import TimeWeightedVoter, vote_sequence

VECTORS = Path(__file__).resolve().parents[2] / "agent/tests/data/voting_vectors.json"


def test_empty_and_below_threshold_give_no_decision():
    v = TimeWeightedVoter(3)
    assert v.vote().cls is None
    assert v.push([0.5, 0.3, 0.2]).cls is None  # 0.5 is not strictly above theta = 0.5


def test_hand_computed_scores():
    # W=3, theta=0.3, alpha=0.5: A0 = 0.6*0.25 + 0.35 = 0.5, A1 = 0.4*0.25 + 0.7*0.5 = 0.45, A2 = 0.4
    v = TimeWeightedVoter(3, window=3, threshold=0.3, decay=0.5)
    v.push([0.6, 0.4, 0.0])
    v.push([0.2, 0.7, 0.1])
    vote = v.push([0.35, 0.25, 0.4])
    assert vote.scores == pytest.approx([0.5, 0.45, 0.4])
    assert vote.cls == 0
    assert vote.margin == pytest.approx(0.05 / 1.35)


def test_spike_does_not_flip_and_change_flips_on_third_tick():
    v = TimeWeightedVoter(2)
    for _ in range(6):
        v.push([0.9, 0.1])
    spike = v.push([0.1, 0.9])
    assert spike.cls == 0 and spike.scores == pytest.approx([2.420352, 0.9])
    v = TimeWeightedVoter(2)
    for _ in range(6):
        v.push([0.9, 0.1])
    assert [v.push([0.1, 0.9]).cls for _ in range(3)] == [0, 0, 1]


def test_window_restarts_at_each_run():
    probs = [[0.9, 0.1]] * 6 + [[0.1, 0.9]]
    assert vote_sequence(probs, runs=["a"] * 6 + ["b"])[-1] == 1
    assert vote_sequence(probs)[-1] == 0


def test_shared_vectors_are_reproduced():
    data = json.loads(VECTORS.read_text())
    assert data["schema"] == "asa.voting-vectors"
    for case in data["cases"]:
        v = TimeWeightedVoter(case["classes"], case["window"], case["threshold"], case["decay"])
        for t, row in enumerate(case["probabilities"]):
            vote = v.push(row)
            assert vote.cls == case["votes"][t]
            assert vote.scores == pytest.approx(case["scores"][t], abs=1e-12)
