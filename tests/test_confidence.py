"""The draft's token confidence: what the logits processor records, and what survives
the resilience layer's wrapping of a usage record."""

import math

import numpy as np
import pytest

from specrag.generators.base import Usage
from specrag.generators.confidence import TokenConfidence
from specrag.resilience.attempts import Attempt, ResilientUsage


def test_the_recorder_keeps_the_top_tokens_log_probability_and_the_logits():
    rec = TokenConfidence()
    sure = np.array([10.0, 0.0, 0.0, 0.0], dtype=np.float32)
    torn = np.array([1.0, 1.0, -50.0, -50.0], dtype=np.float32)
    out = rec(None, sure)
    assert out is sure and out.tolist() == [10.0, 0.0, 0.0, 0.0]  # sampling is untouched
    rec(None, torn)
    assert rec.logprobs[0] == pytest.approx(-math.log(1 + 3 * math.exp(-10)), abs=1e-4)
    assert rec.logprobs[1] == pytest.approx(math.log(0.5), abs=1e-4)  # two equal tokens


def test_a_resilient_usage_keeps_the_log_probabilities_and_its_attempts():
    base = Usage("llama-cpp", "m", 10, 3, 1.0, 2.0, logprobs=(-0.1, -0.2, -0.01))
    wrapped = ResilientUsage.of(base, [Attempt("llama-cpp", "m")], 5.0, 9.0)
    assert wrapped.logprobs == (-0.1, -0.2, -0.01)
    assert wrapped.attempts == (Attempt("llama-cpp", "m"),) and wrapped.total_ms == 9.0
