"""The verifier's calibrated head: P(supported) from the cross-encoder and key-span coverage.

``GroundingHead.apply(ce_scores, missing)`` turns, per (claim, chunk) cell, the
cross-encoder's P(supported) and the fraction of the claim's key spans the chunk lacks
(``spans.missing``) into one calibrated probability: a logistic regression over
``logit(p)``, ``missing`` and ``missing > 0``. ``fit`` learns its four numbers on
labelled ``dev`` pairs (never ``test``); ``save``/``load`` keep them as ``head.json``
beside the model (``specrag train head`` writes it, the verifier reads it when present).

Why a head and not a rule: a hard veto ("a name missing means unsupported") throws
away paraphrases that spell a value differently ("U.S." / "United States"), and the
cross-encoder's raw probabilities are badly calibrated out of its training
distribution. Four weights fitted on held-out pairs keep the cross-encoder's ranking
where the spans agree and let a missing name or number pull a confident score down.

Deliberately not here: the spans themselves (``spans``), the cross-encoder, sentence
aggregation (``verifier``) and the answer-relevance part of acceptance (``acceptance``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

FILE = "head.json"
FEATURES = ("logit", "missing", "any_missing")


def _logit(p) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=np.float64), 1e-4, 1 - 1e-4)
    return np.log(p / (1 - p))


def features(ce_scores, missing) -> np.ndarray:
    m = np.asarray(missing, dtype=np.float64)
    return np.stack([_logit(ce_scores), m, (m > 0).astype(np.float64)], axis=1)


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1e-3, steps: int = 50) -> tuple[float, np.ndarray]:
    """Newton's method for L2-regularised logistic regression (no sklearn at serving)."""
    xb = np.hstack([np.ones((len(x), 1)), x])
    w = np.zeros(xb.shape[1])
    reg = l2 * np.eye(xb.shape[1])
    reg[0, 0] = 0.0
    for _ in range(steps):
        p = 1 / (1 + np.exp(-xb @ w))
        grad = xb.T @ (p - y) / len(y) + reg @ w
        hess = (xb * (p * (1 - p))[:, None]).T @ xb / len(y) + reg
        step = np.linalg.solve(hess + 1e-9 * np.eye(len(w)), grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return float(w[0]), w[1:]


@dataclass(frozen=True)
class GroundingHead:
    intercept: float
    weights: tuple[float, ...]  # one per FEATURES
    fitted_on: str = ""  # what dev pairs, for the model card

    def apply(self, ce_scores, missing) -> np.ndarray:
        z = self.intercept + features(ce_scores, missing) @ np.asarray(self.weights)
        return (1 / (1 + np.exp(-z))).astype(np.float32)

    @classmethod
    def fit(cls, ce_scores, missing, labels, fitted_on: str = "") -> "GroundingHead":
        y = (np.asarray(labels, dtype=np.float64) >= 0.5).astype(np.float64)
        b, w = fit_logistic(features(ce_scores, missing), y)
        return cls(round(b, 5), tuple(round(float(v), 5) for v in w), fitted_on)

    def save(self, model_dir: Path) -> Path:
        path = Path(model_dir) / FILE
        path.write_text(json.dumps({"features": list(FEATURES), **asdict(self)}, indent=2) + "\n")
        return path

    @classmethod
    def load(cls, model_dir: Path | None) -> "GroundingHead | None":
        path = Path(model_dir) / FILE if model_dir else None
        if not path or not path.is_file():
            return None
        raw = json.loads(path.read_text())
        if tuple(raw.get("features", ())) != FEATURES:
            raise ValueError(f"{path}: features {raw.get('features')} are not {list(FEATURES)}")
        return cls(float(raw["intercept"]), tuple(float(v) for v in raw["weights"]),
                   raw.get("fitted_on", ""))
