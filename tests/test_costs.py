"""Prices and the one token estimate (pipeline.costs)."""

from specrag.generators.base import Usage
from specrag.pipeline.costs import cost, estimate_tokens, price


def test_estimate_tokens_takes_text_or_messages():
    assert estimate_tokens("x" * 40) == 10
    assert estimate_tokens("") == 0
    messages = [{"role": "system", "content": "s" * 20},
                {"role": "user", "content": [{"type": "text", "text": "u" * 20}]}]
    assert estimate_tokens(messages) == 10  # content blocks count by their text
    assert estimate_tokens([{"role": "user"}]) == 0


def test_price_by_longest_prefix_and_local_is_free():
    table = {"claude-sonnet-4": [1.0, 2.0], "claude-sonnet-4-6": [3.0, 15.0]}
    assert price("claude-sonnet-4-6-20260101", table) == (3.0, 15.0)
    assert price("gpt-x", table) == (0.0, 0.0)
    assert cost(Usage("anthropic", "claude-sonnet-4-6", 1_000_000, 0), table) == 3.0
    assert cost(Usage("llama-cpp", "claude-sonnet-4-6", 1_000_000, 0), table) == 0.0
