"""Reciprocal rank fusion: of the bi-encoder's order with the reranker's, or with BM25's.

``rrf(orders, k=60)`` scores each item ``sum(1 / (k + rank))`` over the given orders
(Cormack et al., 2009) and returns the items best first; ties keep the first order's
ranking. ``fuse_orders(reranked, n)`` fuses a reranker's order of ``n`` candidates with
their input order, which is the bi-encoder's order: the retriever returns hits best
first, so the input position *is* the bi-encoder rank. ``fuse_hits(dense, keyword,
top_k)`` fuses the dense and the BM25 hits of one question (hybrid retrieval): the
fused hits are renumbered 1..top_k and keep their cosine ``score``, so a hit's score
means the same thing in both modes but no longer has to fall with the rank.

Why fuse: a small cross-encoder trained for an hour on CPU and the bi-encoder make
different mistakes, and so do BM25 and the bi-encoder (an exact ID or a rare name
against a paraphrase); fusing ranks needs no score calibration between the two (cosine
vs logit vs BM25) and no tuning beyond ``k``, and it rarely does worse than the better
of the two (see ``specrag bench reranker`` and ``specrag bench retrieval``).

Deliberately not here: the scores themselves (``retrieval``, ``crossencoder``, ``keyword``).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import replace

from specrag.types import Hit

K = 60


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


def fuse_hits(dense: Sequence[Hit], keyword: Sequence[Hit], top_k: int,
              k: int = K) -> list[Hit]:
    """The top-k of the dense and keyword hits fused by chunk id (ties: dense first)."""
    by_id = {h.chunk.id: h for h in keyword}
    by_id.update((h.chunk.id, h) for h in dense)
    order = rrf([[h.chunk.id for h in dense], [h.chunk.id for h in keyword]], k)
    return [replace(by_id[i], rank=r + 1) for r, i in enumerate(order[:max(1, top_k)])]
