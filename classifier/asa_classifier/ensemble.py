"""The paper's ensemble: XGBoost (primary) + RandomForest + SVM, soft voting.

Soft voting = weighted mean of the members' class probabilities, weights WEIGHTS (XGBoost is the
primary model, so it has half the weight). RandomForest and SVM get a median imputer (features
may be NaN when missing on a tick; XGBoost handles NaN itself), the SVM also a standard scaler.
All members are trained on class indices 0..C-1, so probability column c is class c.
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


@dataclass
class Ensemble:
    xgboost: XGBClassifier
    random_forest: Pipeline
    svm: Pipeline
    classes: list[str]

    def members(self):
        return {"xgboost": self.xgboost, "random_forest": self.random_forest, "svm": self.svm}

    def member_probabilities(self, x: np.ndarray) -> dict[str, np.ndarray]:
        x = np.asarray(x, dtype=np.float32)
        return {name: m.predict_proba(x) for name, m in self.members().items()}

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        probs = self.member_probabilities(x)
        return sum(WEIGHTS[name] * p for name, p in probs.items())


def train(x: np.ndarray, y: np.ndarray, classes: list[str], seed: int = 0, small: bool = False) -> Ensemble:
    """Fits the three members on (x, y); `small` makes tiny models (tests, committed test model)."""
    if sorted(set(y.tolist())) != list(range(len(classes))):
        raise ValueError("every class must have training ticks (class indices 0..C-1)")
    x = np.asarray(x, dtype=np.float32)
    xgb = XGBClassifier(n_estimators=8 if small else 200, max_depth=3 if small else 6,
                        learning_rate=0.3 if small else 0.1, tree_method="hist",
                        random_state=seed, n_jobs=1)
    xgb.fit(x, y)
    rf = Pipeline([("impute", SimpleImputer(strategy="median")),
                   ("forest", RandomForestClassifier(n_estimators=5 if small else 200, max_depth=4 if small else None,
                                                     random_state=seed, n_jobs=1))])
    rf.fit(x, y)
    svm = Pipeline([("impute", SimpleImputer(strategy="median")), ("scale", StandardScaler()),
                    ("svc", SVC(kernel="rbf", probability=True, random_state=seed))])
    svm.fit(x, y)
    return Ensemble(xgb, rf, svm, list(classes))
