"""The model's own confidence in what it wrote: the log-probability of each chosen token.

``TokenConfidence`` is a llama.cpp logits processor (``logits_processor=[recorder]``)
that leaves the logits as they are and records, at every step, the log-probability of
the most likely token: with greedy decoding (``temperature`` 0, the draft's setting)
that is the token the model then emits. The verdict reads a summary of it
(``summary``): a draft the model was unsure of is more often wrong, the signal the
Speculative RAG paper calls the drafter's own score.

Why a processor and not llama-cpp-python's ``logprobs=True``: that needs the model
loaded with ``logits_all=True``, which computes the output layer for every prompt token
(a 152k-word vocabulary x the whole prompt: more prefill time and a logits buffer of
n_ctx x vocab floats). The processor sees the one row of logits the sampler already
has; a log-sum-exp over it costs well under a millisecond per token.

Deliberately not here: sampling (llama.cpp's), and what counts as confident (the
acceptance model learns that from e2e rows).
"""

from __future__ import annotations

import math

import numpy as np


class TokenConfidence:
    """Callable ``(input_ids, logits) -> logits`` that records the top token's log-prob."""

    def __init__(self):
        self.logprobs: list[float] = []

    def __call__(self, input_ids, logits):
        x = np.asarray(logits, dtype=np.float32)
        top = float(x.max())
        # log p(top) = top - logsumexp(x); computed around the max for stability
        self.logprobs.append(round(-math.log(float(np.exp(x - top).sum())), 4))
        return logits


def summary(logprobs) -> dict[str, float]:
    """``mean`` and ``min`` token probability, as probabilities in [0, 1] (1.0 each when
    no log-probabilities are known, so a backend without them is not penalised)."""
    lp = [float(v) for v in logprobs or ()]
    if not lp:
        return {"mean": 1.0, "min": 1.0}
    return {"mean": math.exp(sum(lp) / len(lp)), "min": math.exp(min(lp))}
