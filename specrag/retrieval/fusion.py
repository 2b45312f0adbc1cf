"""Reciprocal rank fusion: of the bi-encoder's order with the reranker's, or with BM25's.

``rrf(orders, k=60)`` scores each item ``sum(1 / (k + rank))`` over the given orders
(Cormack et al., 2009) and returns the items best first; ties keep the first order's
ranking. ``fuse_orders(reranked, n)`` fuses a reranker's order of ``n`` candidates with
their input order, which is the bi-encoder's order: the retriever returns hits best
first, so the input position *is* the bi-encoder rank. ``fuse_hits(dense, keyword,
top_k)`` fuses the dense and the BM25 hits of one question (hybrid retrieval): the
fused hits are renumbered 1..top_k and keep their cosine ``score``, so a hit's score
means the same thing in both modes but no longer has to fall with the rank. Given the
question, ``fuse_hits`` also puts first the few chunks that contain one of its
identifiers verbatim (``identifiers``: a word with both letters and digits, such as
``ZX-48431`` or ``SKU4471B``): a user who asks about one ticket or part number wants that
one on top, and fusion alone leaves it wherever the int8 dense order puts the
near-identical rest (first on one CPU, second on another). An identifier found in more
than ``MAX_PINNED`` chunks pins nothing: it no longer singles one out.

Why fuse: a small cross-encoder trained for an hour on CPU and the bi-encoder make
different mistakes, and so do BM25 and the bi-encoder (an exact ID or a rare name
against a paraphrase); fusing ranks needs no score calibration between the two (cosine
vs logit vs BM25) and no tuning beyond ``k``, and it rarely does worse than the better
of the two (see ``specrag bench reranker`` and ``specrag bench retrieval``).

Deliberately not here: the scores themselves (``retrieval``, ``crossencoder``, ``keyword``).
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence
from dataclasses import replace

from specrag.types import Hit

K = 60
MAX_PINNED = 3
# letters and digits in one word, at least 4 characters: ZX-48431, SKU4471B, INV-2024-07;
# not "2024" (a year matches too much) nor "v2", nor an ordinal or a decade ("52nd", "1990s")
_IDENT = re.compile(r"(?<![\w-])(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[A-Za-z0-9][\w-]{2,}[A-Za-z0-9]")
_NOT_IDENT = re.compile(r"\d+(st|nd|rd|th|s)", re.I)


def rrf(orders: Sequence[Sequence[Hashable]], k: int = K) -> list:
    """Items of the orders (each a list of ids, best first), fused, best first."""
    score: dict[Hashable, float] = {}
    first: dict[Hashable, int] = {}
    for order in orders:
        for rank, item in enumerate(order):
            score[item] = score.get(item, 0.0) + 1.0 / (k + rank + 1)
            first.setdefault(item, len(first))
    return sorted(score, key=lambda i: (-score[i], first[i]))


def fuse_orders(reranked: Sequence[int], n: int, k: int = K) -> list[int]:
    """Fuse a reranker's order of candidates ``0..n-1`` with the input (bi-encoder) order."""
    return rrf([list(range(n)), list(reranked)], k)


def identifiers(question: str) -> list[str]:
    """The question's ID-like words (letters and digits), as written, without duplicates."""
    return list(dict.fromkeys(m.group(0) for m in _IDENT.finditer(question)
                              if not _NOT_IDENT.fullmatch(m.group(0))))


def fuse_hits(dense: Sequence[Hit], keyword: Sequence[Hit], top_k: int,
              k: int = K, question: str = "") -> list[Hit]:
    """The top-k of the dense and keyword hits fused by chunk id (ties: dense first);
    chunks holding one of the question's identifiers verbatim lead (see the module)."""
    by_id = {h.chunk.id: h for h in keyword}
    by_id.update((h.chunk.id, h) for h in dense)
    order = rrf([[h.chunk.id for h in dense], [h.chunk.id for h in keyword]], k)
    pinned: list[Hashable] = []
    for ident in identifiers(question):
        holders = [i for i in order if _holds(by_id[i].chunk.text, ident)]
        if len(holders) <= MAX_PINNED:
            pinned += [i for i in holders if i not in pinned]
    if pinned:
        order = pinned + [i for i in order if i not in pinned]
    return [replace(by_id[i], rank=r + 1) for r, i in enumerate(order[:max(1, top_k)])]


def _holds(text: str, ident: str) -> bool:
    # a whole word, case-insensitive: "zx-48431" finds "ZX-48431", "ZX-484310" is another id
    return re.search(r"(?<![\w-])" + re.escape(ident) + r"(?![\w-]*\w)", text, re.I) is not None
