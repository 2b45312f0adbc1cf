"""A prompt is built within the model's context, whatever a stored chunk holds."""

from __future__ import annotations

import logging

from specrag.pipeline import prompt_fit
from specrag.pipeline.prompts import PROMPT_TOKENS, build_messages
from specrag.types import Chunk

LEAVE = "Employees get 25 days of annual leave per year, accrued monthly."


def _chunk(i: int, text: str) -> Chunk:
    return Chunk(f"c{i}", f"d{i}", f"doc{i}.md", text, 0, 0, len(text), f"h{i}", "v1")


def test_estimates_never_undercount_text_that_splits_finely():
    # (text, tokens Qwen2.5's tokenizer gives it: measured once, llama.cpp vocab_only)
    assert prompt_fit.estimate("x" * 30_000) >= 3_750
    assert prompt_fit.estimate("7" * 3_000) >= 3_000
    assert prompt_fit.estimate("aGVsbG8gd29ybGQgdGhpcyBpcyBiYXNlNjQ=" * 100) >= 2_701
    # ordinary prose counts about as the model counts it (31 tokens)
    assert 28 <= prompt_fit.estimate(LEAVE + " Unused days may be carried over to March 31 "
                                             "of the next year.") <= 40


def test_an_oversized_chunk_is_cut_and_the_prompt_stays_in_budget(caplog):
    junk = _chunk(1, LEAVE + " " + "q" * 200_000)  # a chunk stored before the cap
    other = _chunk(2, "Passwords must have 12 characters.")
    with caplog.at_level(logging.WARNING, logger="specrag.pipeline.prompt_fit"):
        messages = build_messages("How many days of annual leave?", [junk, other], "heavy")
    user = messages[1]["content"]
    assert prompt_fit.estimate(messages[0]["content"] + user) <= PROMPT_TOKENS
    assert LEAVE in user and "How many days of annual leave?" in user
    assert "Passwords" not in user  # no room left: the later chunk is dropped, not misnumbered
    assert 'document id="2"' not in user
    assert any("cut to" in r.message for r in caplog.records)
    assert any("left out" in r.message for r in caplog.records)


def test_chunks_that_fit_are_untouched_and_numbered_in_order():
    chunks = [_chunk(i, f"{LEAVE} Fact number {i}.") for i in range(1, 9)]
    user = build_messages("How much leave?", chunks, "heavy")[1]["content"]
    for i in range(1, 9):
        assert f'<document id="{i}" source="doc{i}.md">\n{LEAVE} Fact number {i}.' in user


def test_the_documents_cut_does_not_depend_on_the_question():
    """Warmed prompt states hold the documents' prefix: it must match any question's."""
    junk = [_chunk(1, "z" * 50_000)]
    a = build_messages("", junk)[1]["content"]
    b = build_messages("How long is the notice period for leaving?", junk)[1]["content"]
    assert a.split("</document>")[0] == b.split("</document>")[0]


def test_a_small_budget_drops_what_has_no_room():
    assert prompt_fit.fit(["a b c", "d e f"], 0) == []
    assert prompt_fit.fit(["word " * 40, "word " * 40], 60) == ["word " * 40]
