"""A small question set and a word-overlap retriever for the checker-data tests.

- ``dataset(name, rows)``: a ``QADataset`` from ``(item id, question, answers, passage)``
  rows, passages shared by text as ``datasets`` shares them.
- ``PassageRetriever(passages)``: one chunk per passage (its ``source`` the passage's
  file name, as an ingested passage has), hits ordered by how many of the query's words
  the passage holds; ``calls`` records each ``(query, top_k)`` asked.
- ``checker_engine(settings, passages, script)``: the real ``SpeculativeRAG`` over that
  retriever (steered by ``checker_data.Steered``), a ``ScriptedGenerator`` draft, the
  word scorer as verifier and an order-keeping reranker; returns
  ``(engine, steered, draft)``.

Deliberately not here: real models or stores (the slow tests and the real run use them).
"""

from __future__ import annotations

from specrag.datasets import Passage, QADataset, QAItem, passage_file_name, passage_id
from specrag.grounding.verifier import Verifier
from specrag.pipeline.engine import SpeculativeRAG
from specrag.retrieval.retriever import Retrieval
from specrag.testing.stand_ins import OrderRanker, WordScorer
from specrag.training.checker_data import NoHeavy, Steered
from specrag.types import Chunk, Hit
from tests.support.fakes import ScriptedGenerator


def dataset(name: str, rows) -> QADataset:
    passages: dict[str, Passage] = {}
    items = []
    for item_id, question, answers, text in rows:
        pid = passage_id(text)
        passages.setdefault(pid, Passage(pid, text))
        items.append(QAItem(item_id, question, tuple(answers), pid))
    return QADataset(name, list(passages.values()), items)


class PassageRetriever:
    def __init__(self, passages: list[Passage]):
        self.chunks = [Chunk(f"c-{p.id}", p.id, passage_file_name(p.id), p.text, 0, 0,
                             len(p.text), "h", "v") for p in passages]
        self.calls: list[tuple[str, int | None]] = []

    def warm_up(self):
        return self

    def search(self, query, top_k=None, collection=None, source=None):
        self.calls.append((query, top_k))
        words = set(query.lower().strip("?").split())
        ranked = sorted(self.chunks, key=lambda c: (-len(words & set(c.text.lower().split())),
                                                    c.id))[:top_k]
        return Retrieval(query, tuple(Hit(c, 1.0 - i / 100, i + 1) for i, c in enumerate(ranked)),
                         1.0, 1.0)


def checker_engine(settings, passages: list[Passage], script: list[tuple[str, str]],
                   default: str = "The documents do not say."):
    draft = ScriptedGenerator("fake-draft", script, default)
    steered = Steered(PassageRetriever(passages), settings.retrieval.top_k)
    engine = SpeculativeRAG(settings, retriever=steered, draft=draft, heavy=NoHeavy(),
                            verifier=Verifier(settings, scorer=WordScorer()),
                            reranker=OrderRanker())
    return engine, steered, draft
