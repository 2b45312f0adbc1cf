"""Fit the verifier's calibration head (``grounding.GroundingHead``) and evaluate it.

``fit_head(settings)`` scores a label-balanced sample of the verifier's *train* split with
the shipped cross-encoder, fits the head, evaluates cross-encoder alone vs head on the
*test* split per source (balanced accuracy at 0.5, AUROC), and writes ``head.json``
next to the model. Seeded and reproducible; a few minutes on two cores.

Deliberately not here: training the cross-encoder itself (``run``).
"""

from __future__ import annotations

import random

import numpy as np

from .. import grounding
from ..evidence import select
from ..crossencoder import CrossEncoder
from . import data


def _sample(pairs, split: str, per_source: int, rng: random.Random):
    out = []
    for src in data.SOURCES:
        for label in (0.0, 1.0):
            group = [p for p in pairs if p.split == split and p.source == src and p.label == label]
            rng.shuffle(group)
            out += group[:per_source // 2]
    return out


def fit_head(settings, per_source: int = 600, test_per_source: int = 200, seed: int = 0,
             out=None) -> dict:
    rng = random.Random(seed)
    pairs = data.verifier_pairs(settings, seed=seed)
    train, test = _sample(pairs, "train", per_source, rng), _sample(pairs, "test", test_per_source, rng)
    ce = CrossEncoder(settings, "verifier").warm_up()

    def matrix(ps):
        # the cross-encoder sees the evidence cut, the lexical features the whole premise,
        # exactly as in ``Verifier.verify``
        words = settings.verify.evidence_words
        scores = ce.predict([(select(p.premise, p.hypothesis, words), p.hypothesis) for p in ps])
        return scores, np.array([grounding.features(p.premise, p.hypothesis, s)
                                 for p, s in zip(ps, scores)])

    _, x_train = matrix(train)
    head = grounding.fit(x_train, np.array([p.label for p in train]))
    ce_test, x_test = matrix(test)
    y = np.array([p.label for p in test])
    with_head = 1 / (1 + np.exp(-(x_test @ head.weights + head.bias)))
    report = {}
    for src in (*data.SOURCES, "all"):
        m = np.array([src in ("all", p.source) for p in test])
        report[src] = {
            "n": int(m.sum()),
            "ce_balanced_accuracy": grounding.balanced_accuracy(y[m], ce_test[m] >= 0.5),
            "ce_auroc": grounding.auroc(y[m], ce_test[m]),
            "head_balanced_accuracy": grounding.balanced_accuracy(y[m], with_head[m] >= 0.5),
            "head_auroc": grounding.auroc(y[m], with_head[m])}
    path = (out or ce.model_dir) / "head.json"
    head.save(path, seed=seed, train_pairs=len(train), test_pairs=len(test), evaluation=report)
    return {"path": str(path), "evaluation": report}
