"""Reciprocal rank fusion of the bi-encoder's order and the reranker's order.

``rrf(orders, k=60)`` scores each item ``sum(1 / (k + rank))`` over the given orders
(Cormack et al., 2009) and returns the items best first; ties keep the first order's
ranking. ``fuse_orders(reranked, n)`` fuses a reranker's order of ``n`` candidates with
their input order, which is the bi-encoder's order: the retriever returns hits best
first, so the input position *is* the bi-encoder rank.

Why fuse: a small cross-encoder trained for an hour on CPU and the bi-encoder make
different mistakes; fusing ranks needs no score calibration between the two (cosine
vs logit) and no tuning beyond ``k``, and it rarely does worse than the better of the
two (see ``specrag bench reranker``).

Deliberately not here: the scores themselves (``retrieval``, ``crossencoder``).
"""

from __future__ import annotations

from collections.abc import Sequence

K = 60


def rrf(orders: Sequence[Sequence[int]], k: int = K) -> list[int]:
    """Items of the orders (each a list of ids, best first), fused, best first."""
    score: dict[int, float] = {}
    first: dict[int, int] = {}
    for order in orders:
        for rank, item in enumerate(order):
            score[item] = score.get(item, 0.0) + 1.0 / (k + rank + 1)
            first.setdefault(item, len(first))
    return sorted(score, key=lambda i: (-score[i], first[i]))


def fuse_orders(reranked: Sequence[int], n: int, k: int = K) -> list[int]:
    """Fuse a reranker's order of candidates ``0..n-1`` with the input (bi-encoder) order."""
    return rrf([list(range(n)), list(reranked)], k)
