"""Deterministic stand-ins for the engine's models: no embedder, no store, no cross-encoder.

Shared by the chaos benchmark (``chaos_parts``) and the tests (``tests/support/fakes``):

- ``WordScorer``: a verifier scorer, P(supported) = share of the hypothesis' words
  (``.`` and ``,`` stripped, lower-cased) found in the premise.
- ``OrderRanker(reverse=False)``: a reranker that keeps the candidates' order, or
  reverses it (so a test can tell that it ran); ``calls`` counts this instance's calls.
- ``FixedRetriever(texts)``: one hit per text, in order, for every query (``retrieve``
  and ``search``, the engine's call once it has authorized the collection, are one).

Deliberately not here: generators (``FakeGenerator`` in ``fake_generator``, the chaos
``LocalStandIn`` in ``chaos_parts``), query-dependent retrieval (``chaos_parts``), and
test data such as the handbook sentences (``tests/support``).
"""

from __future__ import annotations

from specrag.retrieval.retriever import Retrieval
from specrag.types import Chunk, Hit


class WordScorer:
    """P(supported) = share of the hypothesis' words found in the premise."""

    def predict(self, pairs):
        out = []
        for premise, hyp in pairs:
            words = [w.strip(".,").lower() for w in hyp.split()]
            out.append(sum(w in premise.lower() for w in words) / max(1, len(words)))
        return out


class OrderRanker:
    """A reranker that keeps the candidates' order (or reverses it); scores fall by rank."""

    def __init__(self, reverse: bool = False):
        self.reverse = reverse
        self.calls = 0

    def warm_up(self):
        return self

    def rank(self, query, documents, top_k=None):
        self.calls += 1
        order = list(range(len(documents)))
        if self.reverse:
            order.reverse()
        return [{"corpus_id": i, "score": 1.0 - r / 100} for r, i in enumerate(order[:top_k])]


class FixedRetriever:
    """The same hits for every query: ``texts[i]`` is chunk ``c{i}`` of ``doc{i}.md``, page i+1."""

    def __init__(self, texts):
        self.hits = tuple(Hit(Chunk(f"c{i}", f"d{i}", f"doc{i}.md", t, 0, 0, len(t), "h", "v",
                                    page=i + 1), 0.9 - i / 10, i + 1) for i, t in enumerate(texts))

    def warm_up(self):
        return self

    def retrieve(self, query, top_k=None, collection=None, source=None):
        return Retrieval(query, self.hits[:top_k], 1.0, 2.0)

    search = retrieve  # no ACL to check
