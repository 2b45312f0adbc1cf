"""Which chunks the heavy model sees: the reranked top heavy_k less the irrelevant ones."""

from __future__ import annotations

import asyncio

from specrag.grounding.verifier import Verifier
from specrag.pipeline.engine import SpeculativeRAG
from specrag.pipeline.heavy_pick import pick
from specrag.testing import FakeGenerator
from specrag.types import Chunk, Hit
from tests.support.env import make_settings
from tests.support.fakes import TEXTS, FakeRetriever, WordScorer


def reranked(*scores):
    return tuple(Hit(Chunk(f"c{i}", f"d{i}", f"doc{i}.md", f"text {i}", 0, 0, 6, "h", "v"), s,
                     i + 1) for i, s in enumerate(scores))


def test_the_first_ones_stay_and_the_rest_only_when_relevant(tmp_path):
    r = make_settings(tmp_path).retrieval
    assert (r.heavy_k, r.heavy_min_k, r.heavy_min_score) == (8, 3, 0.05)  # shipped
    hits = reranked(0.9, 0.01, 0.002, 0.3, 0.04, 0.06, 0.001, 0.5, 0.9)
    # c0-c2 whatever their score; of c3-c7 those at 0.05 or more; c8 is past heavy_k
    assert [h.chunk.id for h in pick(hits, r)] == ["c0", "c1", "c2", "c3", "c5", "c7"]
    one = make_settings(tmp_path, **{"retrieval.heavy_min_k": 1}).retrieval
    assert [h.chunk.id for h in pick(hits, one)] == ["c0", "c3", "c5", "c7"]


def test_no_floor_when_off_or_when_the_scores_are_not_the_rerankers(tmp_path):
    hits = reranked(0.9, 0.01, 0.002, 0.001, 0.0)
    for values in ({"retrieval.heavy_min_score": 0.0}, {"retrieval.rerank": False}):
        r = make_settings(tmp_path, **values).retrieval
        assert len(pick(hits, r)) == 5
    assert len(pick(hits[:2], make_settings(tmp_path).retrieval)) == 2
    assert pick((), make_settings(tmp_path).retrieval) == ()


class Scores:
    """A reranker stand-in: the fake retrieval's four texts scored 0.9, 0.8, 0.01, 0.7."""

    def warm_up(self):
        return self

    def rank(self, query, documents, top_k=None):
        s = [0.9, 0.8, 0.01, 0.7][:len(documents)]
        return [{"corpus_id": i, "score": s[i]} for i in sorted(range(len(s)), key=lambda i: -s[i])]


def test_the_heavy_prompt_leaves_out_what_the_reranker_scores_irrelevant(tmp_path):
    s = make_settings(tmp_path, **{"retrieval.rerank": True})
    heavy = FakeGenerator(replies=["Pages are acknowledged within 15 minutes [1]."])
    eng = SpeculativeRAG(s, retriever=FakeRetriever(), draft=FakeGenerator(replies=["unused"]),
                         heavy=heavy, verifier=Verifier(s, scorer=WordScorer()),
                         reranker=Scores())
    ans = asyncio.run(eng.aask("How fast are pages acknowledged?", policy="heavy-only"))
    prompt = heavy.calls[0][1]["content"]
    # the first three reranked (0.9, 0.8, 0.7) stay; 0.01 is under the floor
    assert ans.tier == "heavy" and prompt.count("<document") == 3
    assert TEXTS[2] not in prompt and prompt.index(TEXTS[0]) < prompt.index(TEXTS[3])
