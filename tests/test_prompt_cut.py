"""Prompts from less: each chunk cut to its part about the question, citations still whole."""

import asyncio
from dataclasses import dataclass

from specrag.bench.prompts import DRAFT_GRID, HEAVY_GRID, measure
from specrag.grounding.verifier import Verifier
from specrag.pipeline.engine import SpeculativeRAG
from specrag.pipeline.prompts import cut_for
from specrag.testing import FakeGenerator
from specrag.testing.stand_ins import FixedRetriever, OrderRanker
from specrag.types import Chunk
from tests.support.env import make_settings
from tests.support.fakes import WordScorer

FILLER = " ".join(f"The cafeteria serves soup number {i} on weekdays." for i in range(12))
LONG = (f"{FILLER} New parents receive 16 weeks of fully paid parental leave. "
        f"{FILLER} Parking is free.")


def test_cut_keeps_the_sentence_about_the_question_and_the_chunk_identity():
    c = Chunk("c1", "d1", "leave.pdf", LONG, 0, 0, len(LONG), "h", "v", page=3)
    (cut,) = cut_for("How many weeks of parental leave do new parents get?", [c], 30)
    assert "16 weeks of fully paid parental leave" in cut.text
    assert len(cut.text.split()) <= 30 < len(LONG.split())
    assert (cut.id, cut.source, cut.page) == (c.id, c.source, c.page)
    assert cut_for("anything", [c], 0)[0].text == LONG  # 0: whole


def test_the_draft_prompt_is_cut_and_the_citation_shows_the_whole_chunk(tmp_path):
    s = make_settings(tmp_path, **{"retrieval.draft_words": 30, "retrieval.draft_k": 1})
    draft = FakeGenerator(replies=["New parents receive 16 weeks of fully paid parental leave [1]."])
    eng = SpeculativeRAG(s, retriever=FixedRetriever([LONG]), draft=draft,
                         heavy=FakeGenerator(replies=["x"]), verifier=Verifier(s, scorer=WordScorer()),
                         reranker=OrderRanker())
    ans = asyncio.run(eng.aask("How many weeks of parental leave do new parents get?",
                               policy="draft-only"))
    prompt = draft.calls[0][1]["content"]
    assert "16 weeks" in prompt and "soup number 5 " not in prompt and len(prompt) < len(LONG) / 2
    assert ans.citations[0].text == LONG and ans.citations[0].source == "doc0.md"


@dataclass
class _Q:
    question: str
    answers: tuple


def test_prompt_bench_trades_tokens_for_gold_recall():
    from specrag.testing.stand_ins import FixedRetriever as R

    hits = R([LONG, "Expense claims must be filed within 30 days.", FILLER]).hits
    qs = [_Q("How many weeks of parental leave do new parents get?", ("16 weeks",)),
          _Q("Is parking free?", ("Parking is free",))]
    r = measure(qs, lambda q: hits, lambda q, h: h, lambda msgs: sum(len(m["content"].split())
                                                                     for m in msgs))
    whole, cut = r["draft"]["k=3 words=whole"], r["draft"]["k=3 words=30"]
    assert whole["gold_in_prompt"] == cut["gold_in_prompt"] == 1.0
    assert cut["tokens_p50"] < whole["tokens_p50"] / 2
    assert set(r["draft"]) == {f"k={k} words={w or 'whole'}" for k, w in DRAFT_GRID}
    assert set(r["heavy"]) == {f"k={k} words={w or 'whole'}" for k, w in HEAVY_GRID}
