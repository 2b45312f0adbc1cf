"""The one set of text rules: sentences, citations, content words (grounding.text)."""

from specrag.grounding.evidence import select
from specrag.grounding.text import (
    SENTENCE_BREAK,
    claims,
    content_words,
    split_sentences,
    strip_citations,
)


def test_a_sentence_keeps_its_closing_quote_or_bracket():
    text = 'He said "yes." Then he left (for good.) Next, rain.'
    assert split_sentences(text) == ['He said "yes."', "Then he left (for good.)", "Next, rain."]
    # the break matches only the gap, so offset spans keep every character (the chunker)
    assert [text[m.start():m.end()] for m in SENTENCE_BREAK.finditer(text)] == [" ", " "]


def test_abbreviations_and_lower_case_continuations_do_not_break():
    assert split_sentences("See e.g. the U.S. office. Dr. Lund runs it.") == [
        "See e.g. the U.S. office.", "Dr. Lund runs it."]
    assert split_sentences("It costs 5 p.m. prices. ok then.") == ["It costs 5 p.m. prices. ok then."]


def test_citations_and_claims():
    assert strip_citations("Paris [1] is big [doc 2][3-4].") == "Paris is big."
    assert claims("Yes. Leave is 25 days [1].") == ["Yes. Leave is 25 days."]


def test_content_words_drop_stop_words_and_case():
    assert content_words("The Head office of the company is in Bergen, 2021.") == {
        "head", "office", "company", "bergen", "2021"}


def test_the_evidence_cut_splits_as_the_verifier_does():
    premise = ("Dr. Lund founded the firm in Oslo in 1998 and still leads it today as its "
               "chief executive. The firm sells bicycles and spare parts across most of "
               "Europe. Revenue grew to forty million euros last year.")
    got = select(premise, "Who founded the firm?", max_words=20)
    assert got.startswith("Dr. Lund founded")  # "Dr." is not a sentence of its own
