"""Which chunks the heavy model sees: the reranked top ``heavy_k``, less the ones the
reranker calls irrelevant.

``pick(reranked, retrieval)`` keeps the first ``retrieval.heavy_min_k`` reranked hits
whatever their score, and of the rest up to ``heavy_k`` only those the reranker scores
at least ``retrieval.heavy_min_score``. With ``retrieval.rerank`` off the scores are the
retrieval's (cosine or fused), not relevance, so no score floor applies.

Why: the heavy prompt is most of the heavy tier's cost (prefill on a local model, input
tokens on a billed one), and of the reranked top 8 most chunks are ones the reranker
scores near zero: on the 100 HaluEval-QA questions the top 8 hold 3.5 chunks on
average at or above 0.05 (the first 3 always kept), in 0.41x the characters, with the
gold passage still in the prompt for 97 of them (97 with all 8). BENCHMARKS.md, "The
heavy prompt from what the reranker calls relevant".

Deliberately not here: the rerank itself (``phases.QuestionRun._rerank``), the draft's
chunk (``draft_pick``) and the per-chunk word cut (``prompts.cut_for``).
"""

from __future__ import annotations

from specrag.types import Hit


def pick(reranked, retrieval) -> tuple[Hit, ...]:
    """The heavy prompt's hits, in the reranked order."""
    top = tuple(reranked)[:max(1, retrieval.heavy_k)]
    if not retrieval.rerank or retrieval.heavy_min_score <= 0:
        return top
    keep = max(1, retrieval.heavy_min_k)
    return tuple(h for i, h in enumerate(top) if i < keep or h.score >= retrieval.heavy_min_score)
