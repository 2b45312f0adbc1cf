"""The verifier's calibrated head: P(supported) from the cross-encoder, key spans and roles.

``GroundingHead.apply(ce_scores, missing, displaced)`` turns, per (claim, chunk) cell,
the cross-encoder's P(supported), the fraction of the claim's key spans the chunk
lacks (``spans.missing``) and how far its names sit among other words in the chunk
(``roles.displaced``) into one calibrated probability: a logistic regression over
``logit(p)``, ``missing``, ``missing > 0`` and ``displaced``. ``fit`` learns its
numbers on labelled ``dev`` pairs (never ``test``); ``save``/``load`` keep them as
``head.json`` beside the model (``specrag train head`` writes it, the verifier reads
it when present). A head file names its features, so one fitted before ``displaced``
existed still loads and is applied as it was fitted.

Why a head and not a rule: a hard veto ("a name missing means unsupported") throws
away paraphrases that spell a value differently ("U.S." / "United States"), and the
cross-encoder's raw probabilities are badly calibrated out of its training
distribution. A few weights fitted on held-out pairs keep the cross-encoder's ranking
where the spans agree and let a missing or misplaced name or number pull a confident
score down.

Deliberately not here: the spans and roles themselves (``spans``, ``roles``), the
cross-encoder, sentence aggregation (``verifier``) and the answer-relevance part of
acceptance (``acceptance``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specrag.grounding.roles import displaced, evidence_sentences
from specrag.grounding.spans import missing

FILE = "head.json"
FEATURES = ("logit", "missing", "any_missing", "displaced")  # what ``fit`` uses


def _logit(p) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=np.float64), 1e-4, 1 - 1e-4)
    return np.log(p / (1 - p))


def features(ce_scores, missing, displaced=None, names=FEATURES) -> np.ndarray:
    """The head's inputs, one column per name in ``names``."""
    m = np.asarray(missing, dtype=np.float64)
    cols = {"logit": lambda: _logit(ce_scores), "missing": lambda: m,
            "any_missing": lambda: (m > 0).astype(np.float64),
            "displaced": lambda: np.asarray(displaced, dtype=np.float64)}
    if "displaced" in names and displaced is None:
        raise ValueError("this head needs roles.displaced for every cell")
    return np.stack([cols[n]() for n in names], axis=1)


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


def cell_inputs(pairs: list[tuple[str, str]], roles: bool = True):
    """``missing`` and (with ``roles``) ``displaced`` of each (evidence, claim) pair, each
    evidence text read once: what ``apply`` and ``fit`` take beside the scores."""
    gone = np.array([missing(claim, ev) for ev, claim in pairs])
    if not roles:
        return gone, None
    read = {ev: evidence_sentences(ev) for ev in dict.fromkeys(ev for ev, _ in pairs)}
    return gone, np.array([displaced(claim, ev, sentences=read[ev]) for ev, claim in pairs])


@dataclass(frozen=True)
class GroundingHead:
    intercept: float
    weights: tuple[float, ...]  # one per feature
    fitted_on: str = ""  # what dev pairs, for the model card
    features: tuple[str, ...] = FEATURES

    @property
    def needs_roles(self) -> bool:
        return "displaced" in self.features

    def apply(self, ce_scores, missing, displaced=None) -> np.ndarray:
        x = features(ce_scores, missing, displaced, self.features)
        z = self.intercept + x @ np.asarray(self.weights)
        return (1 / (1 + np.exp(-z))).astype(np.float32)

    def score(self, ce_scores, pairs: list[tuple[str, str]]) -> np.ndarray:
        """``apply`` on (evidence, claim) pairs."""
        return self.apply(ce_scores, *cell_inputs(pairs, roles=self.needs_roles))

    @classmethod
    def fit(cls, ce_scores, missing, labels, displaced=None, fitted_on: str = "",
            names: tuple[str, ...] = FEATURES) -> "GroundingHead":
        y = (np.asarray(labels, dtype=np.float64) >= 0.5).astype(np.float64)
        names = tuple(names)
        while True:
            b, w = fit_logistic(features(ce_scores, missing, displaced, names), y)
            # more of a claim missing or misplaced never makes it likelier supported: a
            # feature fitted the other way says nothing the others do not; drop it, refit
            wrong = [n for n, v in zip(names, w) if n != "logit" and v > 0]
            if not wrong:
                break
            names = tuple(n for n in names if n != wrong[0])
        return cls(round(b, 5), tuple(round(float(v), 5) for v in w), fitted_on, names)

    def save(self, model_dir: Path) -> Path:
        path = Path(model_dir) / FILE
        raw = {"features": list(self.features), "intercept": self.intercept,
               "weights": list(self.weights), "fitted_on": self.fitted_on}
        path.write_text(json.dumps(raw, indent=2) + "\n")
        return path

    @classmethod
    def load(cls, model_dir: Path | None) -> "GroundingHead | None":
        path = Path(model_dir) / FILE if model_dir else None
        if not path or not path.is_file():
            return None
        raw = json.loads(path.read_text())
        names = tuple(raw.get("features", ()))
        if not names or set(names) - set(FEATURES) or len(names) != len(raw["weights"]):
            raise ValueError(f"{path}: features {raw.get('features')} are not among "
                             f"{list(FEATURES)} (one weight each); refit with `specrag train head`")
        return cls(float(raw["intercept"]), tuple(float(v) for v in raw["weights"]),
                   raw.get("fitted_on", ""), names)
