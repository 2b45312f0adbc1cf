"""Deterministic stand-ins for the engine's models, shared by the engine, UI and security tests.

- ``FakeRetriever``: four fixed handbook sentences (``TEXTS``) as hits, no embedder or
  store (``specrag.testing.stand_ins.FixedRetriever``).
- ``WordScorer``: P(supported) = share of the hypothesis' words found in the premise
  (``specrag.testing.stand_ins``, the one the chaos benchmark uses too).
- ``ReverseReranker``: ranks the candidates in reverse order (so tests can tell it ran);
  ``calls`` counts the instance's calls (``stand_ins.OrderRanker(reverse=True)``).
- ``engine(tmp_path, draft_reply, ...)``: the real engine over ``FakeRetriever`` with
  ``FakeGenerator`` draft and heavy tiers (the heavy one priced like Claude), the word
  scorer and the reverse reranker; returns ``(engine, draft, heavy)``.
- ``ScriptedGenerator``: a ``FakeGenerator`` whose reply depends on the question (first
  matching keyword), so concurrent sessions get their own answers, not a shared queue's.
- ``handbook_engine(settings, embedder)``: a ``SpeculativeRAG`` over the REAL retriever
  and store (the sample handbook) with the fakes above as draft, heavy, verifier and
  reranker; easy questions get a draft the word scorer accepts, others a draft it rejects
  and a heavy answer.
- ``launch(demo)``: start a Gradio app on a free loopback port; its URL.

Deliberately not here: scripted generators for the resilience layer and in-memory
telemetry (``tests.support.resilience``), documents (``tests.support.docs``).
"""

from __future__ import annotations

import re

from specrag.grounding.verifier import Verifier
from specrag.pipeline.engine import SpeculativeRAG
from specrag.retrieval.retriever import Retriever
from specrag.testing import FakeGenerator
from specrag.testing.stand_ins import FixedRetriever, OrderRanker, WordScorer
from tests.support.env import free_port, make_settings

__all__ = ["TEXTS", "FakeRetriever", "WordScorer", "ReverseReranker", "engine",
           "ScriptedGenerator", "DRAFT_SCRIPT", "DRAFT_WRONG", "HEAVY_ANSWER", "handbook_engine",
           "launch"]

TEXTS = ["Employees receive 25 days of paid annual leave per year.",
         "Expense claims must be filed within 30 days.",
         "Laptops use full-disk encryption.",
         "The on-call engineer acknowledges pages within 15 minutes."]


class FakeRetriever(FixedRetriever):
    def __init__(self, texts=TEXTS):
        super().__init__(texts)


class ReverseReranker(OrderRanker):
    def __init__(self):
        super().__init__(reverse=True)


def engine(tmp_path, draft_reply, heavy_reply="Pages are acknowledged within 15 minutes [1].",
           delay=0.0, heavy_delay=0.0, **values):
    """(engine, draft, heavy): fake retrieval, scorer and reranker, ``FakeGenerator`` tiers."""
    # the draft reads the retrieval order unless a test asks for the reranker's pick: the
    # reverse reranker would hand it the worst chunk (``draft_pick`` has its own tests)
    s = make_settings(tmp_path, **{"retrieval.rerank": True, "retrieval.draft_pool": 0,
                                   **values})
    draft = FakeGenerator(replies=[draft_reply], delay_s=delay)
    heavy = FakeGenerator("claude-sonnet-4-6", replies=[heavy_reply], delay_s=heavy_delay)
    heavy.name = "anthropic"  # priced like Claude
    eng = SpeculativeRAG(s, retriever=FakeRetriever(), draft=draft, heavy=heavy,
                         verifier=Verifier(s, scorer=WordScorer()), reranker=ReverseReranker())
    return eng, draft, heavy


_QUESTION = re.compile(r"^Question: (.*)$", re.M)


class ScriptedGenerator(FakeGenerator):
    """Replies by question: the first ``(keyword, reply)`` whose keyword the question holds."""

    def __init__(self, model: str, script: list[tuple[str, str]], default: str,
                 delay_s: float = 0.0, name: str = "fake"):
        super().__init__(model, replies=[default], delay_s=delay_s)
        self.script, self.default, self.name = script, default, name

    def reply_for(self, messages) -> str:
        m = _QUESTION.search(messages[-1]["content"])
        question = (m.group(1) if m else "").lower()
        return next((r for k, r in self.script if k in question), self.default)

    async def stream(self, messages, *, max_tokens: int = 256, temperature: float = 0.0):
        self.calls.append(messages)
        # a fresh inner generator per call: no reply queue shared between sessions
        inner = FakeGenerator(self.model, replies=[self.reply_for(messages)], delay_s=self.delay_s)
        inner.name = self.name
        async for item in inner.stream(messages, max_tokens=max_tokens, temperature=temperature):
            yield item


# Supported word for word by the sample handbook (assets/handbook): the word scorer accepts.
DRAFT_SCRIPT = [
    ("annual leave", "Every employee receives 25 days of paid annual leave per calendar year [1]."),
    ("acknowledge", "The on-call engineer acknowledges every page within 15 minutes [1]."),
    ("password", "Passwords must be at least 14 characters long [1]."),
]
# Not in the handbook: the word scorer rejects it, so the heavy tier answers.
DRAFT_WRONG = "Engineers receive a zeppelin voucher and quadruple wages."
HEAVY_ANSWER = ("You receive the EUR 250 weekly on-call allowance plus EUR 50 for the public "
                "holiday [1]. Incident work between 22:00 and 07:00 is given back as time off "
                "in lieu, hour for hour [2].")


def handbook_engine(settings, embedder, draft_delay: float = 0.04,
                    heavy_delay: float = 0.04) -> SpeculativeRAG:
    draft = ScriptedGenerator("fake-draft", DRAFT_SCRIPT, DRAFT_WRONG, delay_s=draft_delay)
    heavy = ScriptedGenerator("claude-sonnet-4-6", [], HEAVY_ANSWER, delay_s=heavy_delay,
                              name="anthropic")  # priced like Claude: the cost chart moves
    return SpeculativeRAG(settings, retriever=Retriever(settings, embedder=embedder),
                          draft=draft, heavy=heavy,
                          verifier=Verifier(settings, scorer=WordScorer()),
                          reranker=ReverseReranker())


def launch(demo):
    """Start ``demo`` on a free loopback port, styled as ``python app.py`` does; its URL."""
    from specrag.ui.app import launch_options

    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True,
                share=False, quiet=True, **launch_options())
    return f"http://127.0.0.1:{port}/"
