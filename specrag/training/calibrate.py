"""Choose the verifier's acceptance threshold on held-out data for a target precision.

``calibrate(settings, target_precision=0.95)`` scores the ``dev`` split (never used for
training, disjoint from ``test``) draft by draft with the ``Verifier`` (sentence split,
max over chunks, min over sentences: exactly what runs in production), then picks the
lowest threshold whose accepted drafts reach the target precision, i.e. the one that
accepts the most drafts at that precision. ``without`` (``--without vitaminc``) leaves
sources out with the sets built from them (``training.data.kept``); the result names the
sources it used and those left out. ``write_threshold`` stores it as
``verify.threshold`` in a settings YAML file, keeping the file's other values.

Deliberately not here: training, and benchmark metrics on ``test`` (``bench.verifier``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from specrag.bench.verifier import draft_scores
from specrag.pipeline.build import build_verifier
from specrag.settings import Settings
from specrag.training import data

# the hard sets too (not counterfactual-vitc, held out from everything): the threshold must
# hold on passages that contradict world knowledge, not only on the training mix
CALIBRATION_SOURCES = ("vitaminc", "halueval-qa", "halueval-sum", "synthetic", "counterfactual",
                       "paraphrase", "noisy")


def choose_threshold(scores, labels, target_precision: float = 0.95,
                     min_accepted: int = 10) -> dict:
    """Lowest threshold with precision >= target among at least ``min_accepted`` drafts.

    Falls back to the threshold with the best precision when the target is out of reach.
    """
    scores, labels = np.asarray(scores, float), np.asarray(labels, float) >= 0.5
    if len(scores) == 0:
        raise ValueError("no held-out drafts to calibrate on")
    best = None
    for t in np.unique(scores):
        acc = scores >= t
        n = int(acc.sum())
        if n < min(min_accepted, len(scores)):
            continue
        prec = float(labels[acc].mean())
        rec = float((acc & labels).sum() / max(1, labels.sum()))
        row = {"threshold": float(t), "precision": prec, "recall": rec, "accepted": n}
        if prec >= target_precision:
            return {**row, "target_met": True, "target_precision": target_precision}
        if best is None or prec > best["precision"]:
            best = row
    return {**(best or {"threshold": 1.0, "precision": 0.0, "recall": 0.0, "accepted": 0}),
            "target_met": False, "target_precision": target_precision}


def calibrate(settings: Settings, target_precision: float = 0.95, n_per_source: int = 400,
              seed: int = 0, verifier=None, progress: bool = True, without=()) -> dict:
    use = data.kept(CALIBRATION_SOURCES, without)  # checked before any model loads
    verifier = verifier or build_verifier(settings)  # the one serving uses
    pairs = data.sample(data.verifier_pairs(settings, seed, use), "dev",
                        {s: n_per_source for s in use}, seed)
    scores = draft_scores(verifier, pairs, progress)
    result = choose_threshold(scores, [p.label for p in pairs], target_precision)
    result["drafts"] = len(pairs)
    result["sources"] = list(use)
    result["without"] = data.left_out(without)
    result["threshold"] = round(result["threshold"], 4)
    return result


def settings_file(config: str | None, settings: Settings) -> Path:
    """The YAML file calibration writes: ``--config`` if given, else DATA_DIR/specrag.yaml."""
    return Path(config) if config else settings.data_path / "specrag.yaml"


def write_threshold(path: Path, threshold: float) -> None:
    write_values(path, {"threshold": float(threshold)})


def write_values(path: Path, values: dict) -> None:
    """Set ``verify.<key>`` for each of ``values`` in a settings YAML file, keeping the rest."""
    data = {}
    if path.exists():
        data = yaml.safe_load(path.read_text()) or {}
        if not isinstance(data, dict):
            raise ValueError(f"{path}: settings file must be a mapping")
    data.setdefault("verify", {}).update(values)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(yaml.safe_dump(data, sort_keys=False))
    tmp.replace(path)
