"""The paper's ensemble: XGBoost (primary) + RandomForest + SVM, soft voting.

Soft voting = weighted mean of the members' class probabilities, weights WEIGHTS (XGBoost is the
primary model, so it has half the weight). RandomForest and SVM get a median imputer (features
may be NaN when missing on a tick; XGBoost handles NaN itself), the SVM also a standard scaler.
All members are trained on class indices 0..C-1, so probability column c is class c.

Two options serve data unlike the whole-machine ticks (the per-application model, train_apps.py):
- `balanced`: every class weighs the same in training (sample weights n / (C * n_class) for
  XGBoost and the forest, a subsample with the same number of rows per class for the SVM),
  for data where one class has most rows;
- `svm_log_columns`: the SVM sees log(1 + x) of those columns (heavy-tailed rates and sizes:
  its scaler and RBF kernel measure distances); the trees get the raw value, since a monotone
  transform changes none of their splits' partitions. The exported graph applies the same
  transform in front of the SVM (export.py), so the agent feeds raw features.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.ensemble import RandomForestClassifier
from sklearn.impute import SimpleImputer
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC
from xgboost import XGBClassifier

WEIGHTS = {"xgboost": 0.5, "random_forest": 0.25, "svm": 0.25}


MEMBERS = tuple(WEIGHTS)


@dataclass
class Ensemble:
    """Fitted members (a subset of MEMBERS, in that order) and their soft-vote weights (the
    WEIGHTS of the present members, renormalised to sum to 1)."""

    models: dict
    weights: dict[str, float]
    classes: list[str]
    # Feature columns the ensemble ignores: zero in training and at prediction (the exported
    # model multiplies its input by a 0/1 mask), so no member can learn from them.
    ignored: tuple[int, ...] = ()
    # Feature columns the SVM sees as log(1 + x) (see the module docstring).
    svm_log_columns: tuple[int, ...] = ()

    def members(self):
        return dict(self.models)

    def member_probabilities(self, x: np.ndarray) -> dict[str, np.ndarray]:
        x = mask_columns(x, self.ignored)
        return {name: m.predict_proba(log1p_columns(x, self.svm_log_columns) if name == "svm" else x)
                for name, m in self.models.items()}

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        probs = self.member_probabilities(x)
        return sum(self.weights[name] * p for name, p in probs.items())


# Production sizes, chosen for the per-tick cost (target: inference <= 50 us p99 per tick, issue 5)
# as much as for accuracy: single-row ONNX Runtime cost grows with the number of trees
# (XGBoost grows one tree per class per round) and with the SVM's support vectors. Measured on a
# synthetic 40-feature, 32-class, 6000-tick set (make_bench_model.py): 200 rounds depth 6 /
# 200 unbounded forest trees / all ticks for the SVM cost 311 + 254 + 384 us per row and 154 MB.
# On the lab dataset (10 load classes, 2026-11-23) the SVM was most of the tick in Rust
# (`--bench decision`: SVM alone p50 41 us with 1000 ticks, ensemble 61 us) while its size did
# not move the held-out accuracy (three splits: 0.942 / 0.941 / 0.970 voted with 1000, 300 or
# 150 ticks): 150 ticks. Smaller trees did lose accuracy (XGBoost 20 rounds + 20 forest trees:
# 0.955 instead of 0.970 on the third split), so the trees keep their size.
#
# XGBoost grows vector-leaf trees (`multi_strategy="multi_output_tree"`: one tree per round
# holds every class's weights, 40 trees instead of 400 for 10 classes; export.xgboost_vector_leaves
# converts them): a fifth of the per-class trees' cost per row at depth 4 or 7 alike, and at
# depth 7 at least as accurate on the lab data (10 paired splits, 2026-11-25: voted 0.984 vs
# 0.977; data/2026-11-23-lab-vm-schema-v3b/compare-xgboost/).
#
# The trees' nodes also set the agent's memory (target: peak RSS <= 30 MB): ONNX Runtime holds
# each node and leaf weight as protobuf attributes and again in its kernels, about 0.4 KB of
# peak RSS per forest node. Trained on the 2-, 3- and 4-vCPU recordings (2026-12-01, the default
# model's list, seed 0), XGBoost depth 7 + forest depth 10 / leaves of >= 3 ticks (4966 + 9326
# nodes) peaked at 33.4 MB in `cargo bench --bench daemon`, voted 0.987; XGBoost depth 6 +
# forest depth 7 / leaves of >= 30 ticks (about 3400 + 2600 nodes) at 29.8-30.0 MB, voted 0.984.
PRODUCTION = {
    "xgboost": dict(n_estimators=40, max_depth=6, learning_rate=0.25, multi_strategy="multi_output_tree"),
    "random_forest": dict(n_estimators=40, max_depth=7, min_samples_leaf=30),
    "svm_max_ticks": 150,  # stratified subsample for the SVM: bounds its support vectors
}
SMALL = {
    "xgboost": dict(n_estimators=8, max_depth=3, learning_rate=0.3, multi_strategy="multi_output_tree"),
    "random_forest": dict(n_estimators=5, max_depth=4, min_samples_leaf=1),
    "svm_max_ticks": 1000,
}


def _subsample(x: np.ndarray, y: np.ndarray, limit: int, seed: int,
               balanced: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """At most `limit` ticks, the same share of every class (at least 2 per class); `balanced`:
    the same number of every class instead (limit / C, or all of a class with fewer)."""
    if len(y) <= limit:
        return x, y
    rng = np.random.default_rng(seed)
    classes = np.unique(y)
    keep = []
    for c in classes:
        idx = np.flatnonzero(y == c)
        share = limit / len(classes) if balanced else limit * len(idx) / len(y)
        n = max(2, int(round(share)))
        keep.extend(rng.choice(idx, size=min(n, len(idx)), replace=False))
    keep = np.sort(np.array(keep))
    return x[keep], y[keep]


def mask_columns(x: np.ndarray, ignored: tuple[int, ...]) -> np.ndarray:
    """`x` as float32 with the `ignored` columns set to 0 (a copy when any is ignored)."""
    x = np.asarray(x, dtype=np.float32)
    if ignored:
        x = x.copy()
        x[:, list(ignored)] = 0.0
    return x


def log1p_columns(x: np.ndarray, columns: tuple[int, ...]) -> np.ndarray:
    """`x` as float32 with log(1 + x) in `columns`, computed in float32 as the exported graph
    does (Add, then Log); a copy when any column is transformed. NaN stays NaN (missing); the
    features transformed are never negative (a value below -1 would become NaN)."""
    x = np.asarray(x, dtype=np.float32)
    if columns:
        x = x.copy()
        cols = list(columns)
        with np.errstate(invalid="ignore", divide="ignore"):
            x[:, cols] = np.log(x[:, cols] + np.float32(1.0))
    return x


def balanced_weights(y: np.ndarray) -> np.ndarray:
    """Sample weights n / (C * n_class): every class present weighs the same in total, and the
    weights average 1."""
    classes, counts = np.unique(y, return_counts=True)
    per_class = dict(zip(classes.tolist(), (len(y) / (len(classes) * counts)).tolist()))
    return np.array([per_class[c] for c in y.tolist()], dtype=np.float64)


def train(x: np.ndarray, y: np.ndarray, classes: list[str], seed: int = 0, small: bool = False,
          members: tuple[str, ...] = MEMBERS, svm_max_ticks: int | None = None,
          ignored: tuple[int, ...] = (), xgboost_params: dict | None = None,
          balanced: bool = False, svm_log_columns: tuple[int, ...] = ()) -> Ensemble:
    """Fits the chosen members on (x, y); `small` makes tiny models (tests, committed test model).
    Dropping a member (e.g. the SVM, the slowest per row) is the cheapest way to a faster tick;
    `svm_max_ticks` overrides the size's SVM subsample (its cost per row grows with it).
    `ignored` columns are zeroed, so the members cannot use them (features that describe the
    measuring set-up rather than the workload). `xgboost_params` override the size's XGBoost
    parameters (`compare --xgboost`). `balanced` weighs every class the same and
    `svm_log_columns` gives the SVM log(1 + x) of those columns (module docstring)."""
    if sorted(set(y.tolist())) != list(range(len(classes))):
        raise ValueError("every class must have training ticks (class indices 0..C-1)")
    unknown = set(members) - set(MEMBERS)
    if unknown or not members:
        raise ValueError(f"members must be a non-empty subset of {MEMBERS}, got {members}")
    sizes = dict(SMALL if small else PRODUCTION)
    if svm_max_ticks is not None:
        if svm_max_ticks < 2 * len(classes):
            raise ValueError(f"svm_max_ticks {svm_max_ticks} is too small for {len(classes)} classes")
        sizes["svm_max_ticks"] = svm_max_ticks
    sizes["xgboost"] = {**sizes["xgboost"], **(xgboost_params or {})}
    ignored = tuple(sorted(set(ignored)))
    svm_log_columns = tuple(sorted(set(svm_log_columns)))
    x = mask_columns(x, ignored)
    # Sample weights only when balancing: the unweighted fits stay exactly as they were.
    weights = (lambda labels: {"sample_weight": balanced_weights(labels)}) if balanced else (lambda labels: {})
    models = {}
    if "xgboost" in members:
        models["xgboost"] = XGBClassifier(**sizes["xgboost"], tree_method="hist", random_state=seed,
                                          n_jobs=1).fit(x, y, **weights(y))
    if "random_forest" in members:
        models["random_forest"] = Pipeline([
            ("impute", SimpleImputer(strategy="median")),
            ("forest", RandomForestClassifier(**sizes["random_forest"], random_state=seed, n_jobs=1))]).fit(
            x, y, **{f"forest__{k}": v for k, v in weights(y).items()})
    if "svm" in members:
        x_svm, y_svm = _subsample(log1p_columns(x, svm_log_columns), y, sizes["svm_max_ticks"], seed, balanced)
        models["svm"] = Pipeline([
            ("impute", SimpleImputer(strategy="median")), ("scale", StandardScaler()),
            ("svc", SVC(kernel="rbf", probability=True, random_state=seed))]).fit(
            x_svm, y_svm, **{f"svc__{k}": v for k, v in weights(y_svm).items()})
    total = sum(WEIGHTS[m] for m in models)
    return Ensemble(models, {m: WEIGHTS[m] / total for m in models}, list(classes), ignored, svm_log_columns)
