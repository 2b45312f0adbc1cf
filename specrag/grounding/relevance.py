"""Does a draft answer the question it was asked? Cheap signals, no generation.

``relevance_features(question, draft, evidence, chunks)`` returns the signals,
each in [0, 1] (see ``FEATURES``):

- ``answer_in_focus``: the share of the draft's own key spans (names, numbers, dates
  the question does not hold) found in the chunk *most about the question* (the most
  question words): the strongest single signal on replayed e2e rows (AUROC 0.70 against
  "the draft was right", where grounding alone gave 0.64), since a wrong draft often
  takes its answer from a passage about something else. 0.5 without such spans.
- ``q_evidence``: how much of the question the chunks that support the draft talk
  about: a sentence copied from a passage about something else is grounded but does
  not answer.
- ``type_match``: the question asks for a kind of value (``when``/``what year`` a year
  or date, ``how many``/``how much`` a number, ``who`` a name, ``where`` a place) and the
  draft states one that the question does not already hold; 1.0 when the question asks
  for no particular kind.
- ``novel``: the share of the draft's content words that are not the question's: a
  draft that restates the question ("Alex plays Alex") tells the user nothing.

Measured and left out: the reranker's (question, draft) score (AUROC 0.49 on the same
rows, and 5-10 ms) and whether the draft names any new span at all (0.51).

``AcceptanceModel.relevance`` combines them with a logistic regression fitted on end-to-end rows
labelled *the accepted draft was correct* (``specrag calibrate --e2e``); the
``acceptance`` model then joins it with the grounding score.

Deliberately not here: grounding (``verifier``/``head``) and any LLM judge (the
check must cost milliseconds, not a second generation).
"""

from __future__ import annotations

import re

from specrag.grounding.spans import key_spans, missing, numbers
from specrag.grounding.text import WORD, content_words

FEATURES = ("answer_in_focus", "q_evidence", "type_match", "novel")
_ASKS = (("year", re.compile(r"\b(when|what year|which year|what date|in what year|how long ago|"
                              r"what decade|what century)\b", re.I)),
         ("number", re.compile(r"\b(how many|how much|how old|how long|how far|how tall|how big|"
                                r"what percentage|what number|how large|what is the population)\b", re.I)),
         ("name", re.compile(r"\b(who|whom|whose|which (?:person|man|woman|actor|actress|artist|"
                              r"author|band|company|team|city|country))\b", re.I)),
         ("place", re.compile(r"\bwhere\b", re.I)))
DATE_WORDS = re.compile(r"\b(january|february|march|april|may|june|july|august|september|"
                        r"october|november|december|century|decade|\d{3,4}s?)\b", re.I)


def asked_type(question: str) -> str | None:
    for kind, pattern in _ASKS:
        if pattern.search(question):
            return kind
    return None


def holds_kind(kind: str | None, question: str, text: str) -> float:
    """Does ``text`` state a value of the ``kind`` asked for that the question does not
    already hold? 1.0 when no particular kind is asked (``asked_type`` is None)."""
    if kind is None:
        return 1.0
    if kind == "year":  # a date word or year the question does not already hold
        q = {m.lower() for m in DATE_WORDS.findall(question)}
        return float(any(m.lower() not in q for m in DATE_WORDS.findall(text)))
    if kind == "number":
        return float(bool(numbers(text) - numbers(question)))
    q = question.lower()
    names = [s for k, s in key_spans(text) if k == "name" and s.lower() not in q]
    return float(bool(names))


def type_match(question: str, draft: str) -> float:
    return holds_kind(asked_type(question), question, draft)


def novel(question: str, draft: str) -> float:
    d = content_words(draft)
    return len(d - content_words(question)) / len(d) if d else 0.0


def answer_in_focus(question: str, draft: str, chunks: list[str]) -> float:
    q = question.lower()
    spans = [(k, sp) for k, sp in key_spans(draft) if sp.lower() not in q]
    if not spans or not chunks:
        return 0.5
    want = content_words(question)
    focus = max(chunks, key=lambda c: len(want & content_words(c)))  # first on ties
    return 1.0 - missing(draft, focus, spans)


def q_evidence(question: str, evidence: list[str]) -> float:
    q = content_words(question)
    if not q or not evidence:
        return 0.0
    words = set(WORD.findall(" ".join(evidence).lower()))
    return len(q & words) / len(q)


def relevance_features(question: str, draft: str, evidence: list[str],
                       chunks: list[str] | None = None) -> dict[str, float]:
    """``evidence``: the chunks supporting the draft's sentences; ``chunks``: all the
    chunks it was verified against (default: the evidence)."""
    return {"answer_in_focus": answer_in_focus(question, draft, chunks or evidence),
            "q_evidence": q_evidence(question, evidence),
            "type_match": type_match(question, draft), "novel": novel(question, draft)}
