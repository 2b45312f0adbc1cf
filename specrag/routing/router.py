"""Route a question before drafting: will a draft be accepted *and* right, or go heavy now?

``Router.from_settings(settings).route(question, hits) -> Route``: a logistic regression
over ``features.FEATURES`` (retrieval confidence, the question's kind and shape) gives
``p_draft`` = P(the draft will be accepted and right); at ``routing.threshold`` or
above the question is drafted (``lazy``), below it goes straight to the heavy tier,
which then costs heavy-only time instead of a wasted draft plus the heavy answer.

Why a threshold at all, and where: a draft costs ``D`` seconds and, when accepted,
saves the heavy answer's ``H``; drafting pays on average when ``p_draft * H > D``. With
a local 1.5B heavy model on 2 cores ``D/H`` is about 0.35; with Claude (fast remote
prefill, billed tokens) the saving is money more than time, so users lower it.
``specrag train router`` fits the weights on ``bench e2e`` rows and reports the
latency/accuracy curve over the threshold; ``router.json`` ships the default.

``Route`` is what the engine emits (``routed`` event), the ``Answer`` keeps and the
ledger records. Deliberately not here: the features (``features``), training and the
curve (``training.router``), and the policies themselves (``pipeline.engine``).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from specrag.grounding.head import fit_logistic
from specrag.routing.features import FEATURES, route_features

FILE = "router.json"
BUILTIN = Path(__file__).resolve().parent.parent / "models" / "router" / FILE


@dataclass(frozen=True)
class Route:
    route: str  # "draft" | "heavy"
    p_draft: float  # P(the draft will be accepted and right)
    threshold: float
    ms: float = 0.0  # the router's own time
    features: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        """What a user reads: "route draft (P(draft will do) 0.62 >= 0.35)"."""
        op = ">=" if self.route == "draft" else "<"
        return f"route {self.route} (P(draft will do) {self.p_draft:.2f} {op} {self.threshold:.2f})"

    def to_dict(self) -> dict:
        return {"route": self.route, "p_draft": round(self.p_draft, 4),
                "threshold": self.threshold, "ms": round(self.ms, 3),
                "features": {k: round(v, 4) for k, v in self.features.items()}}


@dataclass(frozen=True)
class RouterModel:
    intercept: float
    weights: tuple[float, ...]
    fitted_on: str = ""
    threshold: float = 0.35  # suggested by training (the run's draft/heavy time ratio)

    def predict(self, feats: dict[str, float]) -> float:
        x = np.array([feats[k] for k in FEATURES], dtype=np.float64)
        return float(1.0 / (1.0 + np.exp(-(self.intercept + x @ np.asarray(self.weights)))))

    @classmethod
    def fit(cls, feats: list[dict[str, float]], labels, fitted_on: str = "",
            threshold: float = 0.35, l2: float = 1e-2) -> "RouterModel":
        x = np.array([[f[k] for k in FEATURES] for f in feats], dtype=np.float64)
        b, w = fit_logistic(x, np.asarray(labels, dtype=np.float64), l2=l2)
        return cls(round(b, 5), tuple(round(float(v), 5) for v in w), fitted_on,
                   round(float(threshold), 4))

    def save(self, path: Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"features": list(FEATURES), **asdict(self)}, indent=2) + "\n")
        return path

    @classmethod
    def load(cls, path: Path) -> "RouterModel":
        raw = json.loads(Path(path).read_text())
        if tuple(raw.get("features", ())) != FEATURES:
            raise ValueError(f"{path}: router features {raw.get('features')} are not "
                             f"{list(FEATURES)}; retrain with `specrag train router RUN_DIR`")
        return cls(float(raw["intercept"]), tuple(map(float, raw["weights"])),
                   raw.get("fitted_on", ""), float(raw.get("threshold", 0.35)))


def resolve(setting: str) -> Path:
    """``routing.model``: ``builtin`` (the shipped router.json) or a path that must exist."""
    path = BUILTIN if setting == "builtin" else Path(setting).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"routing.model: {path} not found (train one with `specrag "
                                "train router RUN_DIR`, or set routing.model to builtin)")
    return path


class Router:
    """The ``routed`` policy's first step; ``threshold`` None: the model's own."""

    def __init__(self, model: str = "builtin", threshold: float | None = None, draft_k: int = 1):
        self.model = model
        self.threshold = threshold
        self.draft_k = draft_k
        self._fitted: RouterModel | None = None

    @classmethod
    def from_settings(cls, settings) -> "Router":
        r = settings.routing
        return cls(r.model, r.threshold if r.threshold >= 0 else None,
                   settings.retrieval.draft_k)

    def warm_up(self) -> "Router":
        if self._fitted is None:
            self._fitted = RouterModel.load(resolve(self.model))
        return self

    @property
    def bar(self) -> float:
        self.warm_up()
        return self._fitted.threshold if self.threshold is None else self.threshold

    def route(self, question: str, hits) -> Route:
        self.warm_up()
        start = time.perf_counter()
        feats = route_features(question, hits, self.draft_k)
        p = self._fitted.predict(feats)
        bar = self.bar
        return Route("draft" if p >= bar else "heavy", p, bar,
                     (time.perf_counter() - start) * 1000, feats)
