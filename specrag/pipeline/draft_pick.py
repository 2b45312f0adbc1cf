"""Which chunks the draft model sees: the reranker's best of the first few hits.

``pick(question, hits, retrieval, reranker)`` returns the ``retrieval.draft_k`` hits the
draft prompt holds. With ``retrieval.draft_pool`` > ``draft_k`` (and ``retrieval.rerank``
on) the reranker scores the first ``draft_pool`` hits of the retrieval order; its best
goes first only when it scores more than ``retrieval.draft_margin`` above the retrieval's
own first hit, then the rest in the reranker's order. Otherwise the first ``draft_k`` hits.

Why: the 0.5B draft is more often right from the one best chunk than from three (it
mixes up passages: HaluEval-QA 54% vs 43% contains the answer, SQuAD 66% vs 60%), so the
one chunk must be the right one. The retrieval order (bi-encoder and BM25 fused) has the
gold passage first for 126 of 150 SQuAD questions, 25 of 40 counterfactual ones, 94 of
100 HaluEval-QA ones and 27 of 28 questions on the sample handbook. The reranker's best
of the first 5 has it for 139, 32, 92 and 24: it is right more often on short
single-topic passages (what it was trained on) and wrong more often on the handbook's
long several-topic sections ("How much annual leave do I get?": parental leave 0.96,
annual leave 0.77). With the 0.2 margin: 139, 29, 94 and 28, the best of both
(BENCHMARKS.md, "One chunk for the draft"). Five pairs cost 36-79 ms p50 on two cores.

The same function feeds the served draft (``phases.QuestionRun.draft_phase``) and the
draft distillation's training prompts (``tune.distill``), so the tuned draft learns from
the prompts it is served.

Deliberately not here: the heavy tier's rerank of the whole broad set (``phases``), the
router (it reads the retrieval order before any of this runs) and the prompt itself
(``prompts.build_messages``).
"""

from __future__ import annotations

from specrag.types import Hit


def pick(question: str, hits, retrieval, reranker) -> tuple[Hit, ...]:
    """The draft's ``draft_k`` hits, best first (each keeps its retrieval score and rank)."""
    hits = tuple(hits)
    k = max(1, retrieval.draft_k)
    pool = min(retrieval.draft_pool, len(hits))
    if not retrieval.rerank or reranker is None or pool <= k:
        return hits[:k]
    ranked = reranker.rank(question, [h.chunk.text for h in hits[:pool]], None)
    first = next(r["score"] for r in ranked if r["corpus_id"] == 0)
    order = [r["corpus_id"] for r in ranked]
    if ranked[0]["score"] - first <= retrieval.draft_margin:
        # not clearly better than the retrieval's own first hit: that one stays first
        order = [0] + [i for i in order if i != 0]
    return tuple(hits[i] for i in order[:k])
