"""One calibrated acceptance score from "is it grounded?" and "does it answer the question?".

``AcceptanceModel.relevance(features)`` is P(the draft answers the question) from the
signals of ``relevance.relevance_features``; ``combine(grounded, relevance)`` is
P(the draft is right), a logistic regression over both logits. Both are fitted on
end-to-end rows labelled *accepted draft was correct and grounded* (``specrag
calibrate --e2e``), on a dev split of the questions, and stored as ``acceptance.json``
(``save``/``load``). ``verify.acceptance`` chooses the file: ``builtin`` (the one
beside the shipped verifier, when present), ``off`` (grounding alone decides, as
before), or a path.

Why fitted, not hand-weighted: the signals disagree in scale and in how much they say
(a missing year when the question asks "when" matters more than a low word overlap),
and the weights that make acceptance precise depend on the draft model; a refit on a
user's own rows is one command.

Deliberately not here: computing the signals (``relevance``), grounding (``verifier``),
choosing the threshold (``training.calibrate``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from specrag.grounding.head import _logit, fit_logistic
from specrag.grounding.relevance import FEATURES

FILE = "acceptance.json"


@dataclass(frozen=True)
class AcceptanceModel:
    relevance_intercept: float
    relevance_weights: tuple[float, ...]  # one per relevance.FEATURES
    intercept: float
    weights: tuple[float, float]  # on logit(grounded), logit(relevance)
    fitted_on: str = ""

    def relevance(self, features: dict[str, float]) -> float:
        x = np.array([features[k] for k in FEATURES], dtype=np.float64)
        return float(1 / (1 + np.exp(-(self.relevance_intercept + x @ np.asarray(self.relevance_weights)))))

    def max_relevance(self) -> float:
        """The highest ``relevance`` any draft can get (every signal lies in [0, 1])."""
        z = self.relevance_intercept + sum(max(w, 0.0) for w in self.relevance_weights)
        return float(1 / (1 + np.exp(-z)))

    def combine(self, grounded: float, relevance: float) -> float:
        z = self.intercept + self.weights[0] * float(_logit(grounded)) + self.weights[1] * float(_logit(relevance))
        return float(1 / (1 + np.exp(-z)))

    @classmethod
    def fit(cls, grounded, features: list[dict[str, float]], labels, fitted_on: str = "") -> "AcceptanceModel":
        y = (np.asarray(labels, dtype=np.float64) >= 0.5).astype(np.float64)
        if y.min() == y.max():
            raise ValueError("acceptance needs both right and wrong drafts to fit on")
        x = np.array([[f[k] for k in FEATURES] for f in features], dtype=np.float64)
        rb, rw = fit_logistic(x, y, l2=1e-2)
        rel = 1 / (1 + np.exp(-(rb + x @ rw)))
        cb, cw = fit_logistic(np.stack([_logit(grounded), _logit(rel)], axis=1), y, l2=1e-2)
        return cls(round(rb, 5), tuple(round(float(v), 5) for v in rw), round(cb, 5),
                   (round(float(cw[0]), 5), round(float(cw[1]), 5)), fitted_on)

    def save(self, path: Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"relevance_features": list(FEATURES), **asdict(self)}, indent=2) + "\n")
        return path

    @classmethod
    def load(cls, path: Path) -> "AcceptanceModel":
        raw = json.loads(Path(path).read_text())
        if tuple(raw.get("relevance_features", ())) != FEATURES:
            raise ValueError(f"{path}: relevance features {raw.get('relevance_features')} "
                             f"are not {list(FEATURES)}; refit with `specrag calibrate --e2e`")
        return cls(float(raw["relevance_intercept"]), tuple(map(float, raw["relevance_weights"])),
                   float(raw["intercept"]), tuple(map(float, raw["weights"])), raw.get("fitted_on", ""))


def resolve(setting: str, model_dir: Path | None) -> AcceptanceModel | None:
    """The model ``verify.acceptance`` names: ``off`` -> None, ``builtin`` -> the file beside
    the verifier (None without one), else a path that must exist."""
    if setting == "off":
        return None
    if setting == "builtin":
        path = Path(model_dir) / FILE if model_dir else None
        return AcceptanceModel.load(path) if path and path.is_file() else None
    path = Path(setting).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"verify.acceptance: {path} not found (run `specrag calibrate "
                                "--e2e RUN_DIR`, or set it to builtin or off)")
    return AcceptanceModel.load(path)
