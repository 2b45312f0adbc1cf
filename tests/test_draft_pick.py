"""Which chunks the draft sees: the shipped reranker's best of the first few hits."""

from __future__ import annotations

import pytest

from specrag.grounding.crossencoder import CrossEncoder
from specrag.pipeline.draft_pick import pick
from specrag.types import Chunk, Hit
from tests.support.env import make_settings

TEXTS = [
    # the retrieval order puts the near miss first: it shares the question's words
    # ("leave", "year"); the shipped reranker scores it 0.54, the answer 0.996
    "Leave the building by the nearest exit when the fire alarm sounds; drills happen "
    "twice a year.",
    "Employees receive 25 days of paid annual leave per calendar year; unused days "
    "expire at the end of March.",
    "The on-call engineer acknowledges pages within 15 minutes.",
]
QUESTION = "How many days of paid annual leave do employees get each year?"


def hits(texts=TEXTS):
    return tuple(Hit(Chunk(f"c{i}", f"d{i}", f"doc{i}.md", t, 0, 0, len(t), "h", "v"), 0.9 - i / 10,
                     i + 1) for i, t in enumerate(texts))


@pytest.fixture(scope="module")
def settings(tmp_path_factory):
    return make_settings(tmp_path_factory.mktemp("pick"))


@pytest.fixture(scope="module")
def reranker(settings):
    return CrossEncoder.from_settings(settings, "reranker").warm_up()


def test_the_reranker_moves_the_answering_chunk_first(settings, reranker):
    r = settings.retrieval
    assert (r.draft_k, r.draft_pool) == (1, 5)  # the shipped defaults
    assert [h.chunk.id for h in pick(QUESTION, hits(), r, reranker)] == ["c1"]
    # two chunks for the draft: both picks best first, the unrelated one left out
    two = settings.with_values(**{"retrieval.draft_k": 2}).retrieval
    assert [h.chunk.id for h in pick(QUESTION, hits(), two, reranker)] == ["c1", "c0"]


class Scores:
    """A reranker stand-in with set scores, one per candidate in the retrieval order."""

    def __init__(self, *scores):
        self.scores = scores

    def rank(self, query, documents, top_k=None):
        order = sorted(range(len(documents)), key=lambda i: -self.scores[i])[:top_k]
        return [{"corpus_id": i, "score": self.scores[i]} for i in order]


def test_the_first_hit_stays_unless_the_reranker_is_clearly_surer(settings):
    r = settings.retrieval
    assert r.draft_margin == 0.2
    # 0.95 vs 0.80: within the margin, the retrieval's first hit stays the draft's
    assert [h.chunk.id for h in pick(QUESTION, hits(), r, Scores(0.80, 0.95, 0.1))] == ["c0"]
    # 0.95 vs 0.70: the reranker's best replaces it
    assert [h.chunk.id for h in pick(QUESTION, hits(), r, Scores(0.70, 0.95, 0.1))] == ["c1"]
    # with two chunks the kept first hit is followed by the reranker's next best
    two = settings.with_values(**{"retrieval.draft_k": 2}).retrieval
    assert [h.chunk.id for h in pick(QUESTION, hits(), two, Scores(0.8, 0.5, 0.9))] == ["c0", "c2"]
    # margin 0: the reranker's order whenever it disagrees at all
    zero = settings.with_values(**{"retrieval.draft_margin": 0.0}).retrieval
    assert [h.chunk.id for h in pick(QUESTION, hits(), zero, Scores(0.80, 0.81, 0.1))] == ["c1"]


def test_the_retrieval_order_without_a_pool_or_a_reranker(settings, reranker):
    for values in ({"retrieval.draft_pool": 0}, {"retrieval.draft_pool": 1},
                   {"retrieval.rerank": False}):
        r = settings.with_values(**values).retrieval
        assert [h.chunk.id for h in pick(QUESTION, hits(), r, reranker)] == ["c0"]
    assert [h.chunk.id for h in pick(QUESTION, hits(), settings.retrieval, None)] == ["c0"]
    # fewer hits than the pool: the reranker sees what there is
    assert [h.chunk.id for h in pick(QUESTION, hits()[:2], settings.retrieval, reranker)] == ["c1"]
    assert pick(QUESTION, (), settings.retrieval, reranker) == ()
