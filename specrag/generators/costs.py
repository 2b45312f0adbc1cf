"""Prices per model and what a set of generations cost.

Prices are US dollars per million tokens, ``[input, output]``, looked up by exact model
name and then by the longest matching prefix (so ``claude-sonnet-4-5-20250929`` finds
``claude-sonnet-4-5``). Local backends cost nothing. The table lives in settings
(``generation.prices``) so users can correct it without code changes.

``estimate_tokens(text_or_messages)`` is the one token estimate for text no tokenizer
has counted (a backend that reports no usage, a call that failed before its usage came,
the heavy-only figure): about four characters a token, the usual rule for English with
BPE vocabularies.

Deliberately not here: persistence of spend (``observability.ledger``).
"""

from __future__ import annotations

from specrag.generators.base import Usage, is_local_backend

CHARS_PER_TOKEN = 4


def estimate_tokens(text_or_messages) -> int:
    """About how many tokens ``text_or_messages`` is: a string, or chat messages whose
    ``content`` is a string or a list of content blocks (``{"type": "text", "text": ...}``)."""
    if isinstance(text_or_messages, str):
        return len(text_or_messages) // CHARS_PER_TOKEN
    return sum(_chars(m.get("content", "")) for m in text_or_messages) // CHARS_PER_TOKEN


def _chars(content) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(b.get("text", "")) if isinstance(b, dict) else len(str(b)) for b in content)
    return len(str(content or ""))


def price(model: str, table: dict[str, list[float]]) -> tuple[float, float]:
    if model in table:
        return tuple(table[model])
    best = max((k for k in table if model.startswith(k)), key=len, default=None)
    return tuple(table[best]) if best else (0.0, 0.0)


def cost(usage: Usage, prices: dict[str, list[float]]) -> float:
    if is_local_backend(usage.backend):
        return 0.0
    p_in, p_out = price(usage.model, prices)
    return (usage.input_tokens * p_in + usage.output_tokens * p_out) / 1_000_000


def estimate(backend: str, model: str, input_tokens: int, output_tokens: int,
             prices: dict[str, list[float]]) -> float:
    """Cost of a call that was not made (the "heavy-only would have cost" figure)."""
    return cost(Usage(backend, model, input_tokens, output_tokens), prices)
