"""What one answer took and cost, as plain facts for any renderer.

``timing_parts(answer)`` is the ``(label, ms)`` list of the stages that ran
(retrieval, draft, verify, rerank, heavy), then the first token and the total, in
that order; ``cost_parts(answer)`` is ``(cost, heavy_only_cost, saved)`` where
``saved`` is the share of the heavy-only cost this answer did not spend (``None``
when heavy-only would have cost nothing). ``specrag ask`` prints them as text, the app
as HTML (``ui.chat.meta_line``); both read them here so they cannot drift apart.

Deliberately not here: formatting (seconds, milliseconds, HTML, colours) or any
number the engine did not record in ``answer.timings_ms``.
"""

from __future__ import annotations

# (key in answer.timings_ms, label), in the order the stages run
STAGES = (("retrieval", "retrieval"), ("draft_pick", "draft pick"), ("draft", "draft"),
          ("verify", "verify"), ("rerank", "rerank"), ("heavy", "heavy"))
MILESTONES = (("first_token", "first token"), ("total", "total"))


def timing_parts(answer) -> list[tuple[str, float]]:
    """``(label, ms)`` of each stage that ran, then first token and total when recorded."""
    t = answer.timings_ms
    return [(label, float(t[key])) for key, label in STAGES + MILESTONES if key in t]


def cost_parts(answer) -> tuple[float, float, float | None]:
    """``(cost_usd, heavy_only_cost_usd, saved share or None)``."""
    cost, heavy_only = answer.cost_usd, answer.heavy_only_cost_usd
    saved = max(0.0, 1 - cost / heavy_only) if heavy_only > 0 else None
    return cost, heavy_only, saved
