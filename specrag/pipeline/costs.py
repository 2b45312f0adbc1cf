"""Prices and token estimates moved to ``specrag.generators.costs`` (a low layer: backends,
resilience and observability use them); this name stays for existing callers."""

from specrag.generators.costs import CHARS_PER_TOKEN, cost, estimate, estimate_tokens, price  # noqa: F401
