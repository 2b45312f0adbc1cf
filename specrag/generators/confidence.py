"""The model's own confidence in what it wrote: the log-probability of each chosen token.

``TokenConfidence`` is a llama.cpp logits processor (``logits_processor=[recorder]``)
that leaves the logits as they are and records, at every step, the log-probability of
the most likely token: with greedy decoding (``temperature`` 0, the draft's setting)
that is the token the model then emits. A draft the model was unsure of is more often
wrong (the Speculative RAG paper scores drafts partly by the drafter's own probability):
``bench e2e`` rows keep the draft's, for fitting and for study. The acceptance decision
does not use it: measured on 288 one-chunk drafts, it says what grounding and "does it
answer the question?" already say (BENCHMARKS.md, "Does the draft know when it is wrong?").

Why a processor and not llama-cpp-python's ``logprobs=True``: that needs the model
loaded with ``logits_all=True``, which computes the output layer for every prompt token
(a 152k-word vocabulary x the whole prompt: more prefill time and a logits buffer of
n_ctx x vocab floats). The processor sees the one row of logits the sampler already
has; a log-sum-exp over it costs well under a millisecond per token.

Deliberately not here: sampling (llama.cpp's), and any judgement of what counts as
confident.
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

