"""Stand-ins for the chaos benchmark: a tiny corpus, word-overlap retrieval/verify/rerank.

The chaos benchmark measures the resilience layer, so everything around the heavy
tier is small, fast and deterministic: ``Corpus`` (one passage per team),
``WordRetriever`` (the asked team's passage first), ``WordScorer`` (share of the
claim's words found in the passage) and ``KeepOrder`` (a reranker that keeps the
retrieval order), both from ``stand_ins``, and ``LocalStandIn`` (stands in for the
local quantized heavy model: the mock server's deterministic answer, streamed, priced
as local). ``expected(k)`` is
the answer the mock's responder gives for team ``k``'s question, to check answers
word for word.

Deliberately not here: the benchmark run and report (``chaos``), and the scorer and
reranker themselves (``stand_ins``, shared with the tests).
"""

from __future__ import annotations

import asyncio
import re
import time

from specrag.generators.base import Timer, Usage
from specrag.generators.costs import estimate_tokens
from specrag.retrieval.retriever import Retrieval
from specrag.testing.mockapi import first_sentence_answer
from specrag.testing.stand_ins import OrderRanker, WordScorer
from specrag.types import Chunk, Hit

__all__ = ["TEAMS", "Corpus", "WordRetriever", "WordScorer", "KeepOrder", "LocalStandIn"]

TEAMS = 25


class Corpus:
    def __init__(self, teams: int = TEAMS):
        self.chunks = [Chunk(f"c{i}", f"d{i}", f"team{i}.md",
                             f"Members of team {i} get {10 + i} days of annual leave per year. "
                             f"Team {i} meets on day {i % 5 + 1} of the week.", 0, 0, 90, f"h{i}", "v")
                       for i in range(teams)]

    def question(self, k: int) -> str:
        return f"How many days of annual leave do members of team {k % len(self.chunks)} get?"

    def expected(self, k: int) -> str:
        return f"Members of team {k % len(self.chunks)} get {10 + k % len(self.chunks)} days of " \
               "annual leave per year. [1]"


class WordRetriever:
    def __init__(self, corpus: Corpus):
        self.corpus = corpus

    def warm_up(self):
        return self

    def retrieve(self, query, top_k=None, collection=None, source=None):
        t0 = time.perf_counter()
        m = re.search(r"team (\d+)", query)
        first = f"c{m.group(1)}" if m else ""
        ranked = sorted(self.corpus.chunks, key=lambda c: (c.id != first, c.id))[:top_k or 10]
        hits = tuple(Hit(c, 1.0 - r / 100, r + 1) for r, c in enumerate(ranked))
        return Retrieval(query, hits, 0.0, (time.perf_counter() - t0) * 1000)

    search = retrieve  # no ACL to check


class KeepOrder(OrderRanker):
    """The stand-in reranker: keeps the retrieval order."""

    def __init__(self):
        super().__init__(reverse=False)


class LocalStandIn:
    name = "fake"  # a local backend (is_local_backend): priced at nothing

    def __init__(self, model: str = "local-standin", delay_s: float = 0.002):
        self.model, self.delay_s = model, delay_s

    def warm_up(self):
        return self

    async def stream(self, messages, *, max_tokens=256, temperature=0.0):
        timer, words = Timer(), first_sentence_answer(messages).split(" ")[:max_tokens]
        for i, w in enumerate(words):
            await asyncio.sleep(self.delay_s)
            timer.token()
            yield w if i == 0 else " " + w
        yield Usage(self.name, self.model, estimate_tokens(messages), len(words), timer.ttft_ms,
                    timer.total_ms)
