"""The key spans of a claim (numbers, years, dates, names) and whether its evidence has them.

``key_spans(claim)`` returns the spans a claim stakes itself on: numbers (``1,200``,
``3.5``), years, month names, and capitalised names (``Karl Brenner``, ``Lisbon``),
with a name that only opens the sentence counted only when it is not a common word.
``missing(claim, evidence)`` is the fraction of those spans the evidence lacks (0 when
the claim has none): a number is missing when no number of the evidence has the same
value, a name when some of its words are absent from the evidence.

Why: a small cross-encoder leans on what it learned in pre-training. Given a passage
saying the tower was designed by Karl Brenner, it still scores "Gustave Eiffel
designed the tower" as supported more often than it should. A claim whose name,
number or date is nowhere in the passage is almost never supported by it, and that is
a lexical fact that costs microseconds. The verifier combines this with the
cross-encoder's score in its calibrated head (``grounding.head``), so paraphrases that
spell a value differently are penalised, not vetoed.

Deliberately not here: named-entity recognition models (too slow and heavy for a
check that must cost microseconds), the entity-in-another-role case (the name *is* in
the passage; the cross-encoder has to see that), and the combination (``head``).
"""

from __future__ import annotations

import re

from specrag.grounding.text import STOP_WORDS, WORD

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
          "september", "october", "november", "december")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d,]*(?:\.\d+)?(?![\w])|\b\d+(?:st|nd|rd|th)\b")
_NAME = re.compile(r"\b[A-Z][\w'\u2019-]*(?:\s+(?:of|de|la|van|von|der|the|and|&)?\s*[A-Z][\w'\u2019-]*)*")
_WORD_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
                 "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "twenty": 20,
                 "hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9,
                 "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5}
# words that open sentences capitalised without naming anything
_OPENERS = STOP_WORDS | {"however", "although", "after", "before", "during", "since", "while",
                         "according", "its", "their", "his", "her", "today", "there",
                         "yes"}  # "Yes, ..." opens an answer; it names nothing


def value_of(token: str) -> float | None:
    t = token.lower().replace(",", "").rstrip(".")
    t = re.sub(r"(st|nd|rd|th)$", "", t) if re.fullmatch(r"\d+(st|nd|rd|th)", t) else t
    try:
        return float(t)
    except ValueError:
        return _WORD_NUMBERS.get(t)


def numbers(text: str) -> set[float]:
    """Every number the text states, as values (``1,200`` and ``1200`` are one)."""
    out = {v for m in _NUMBER.finditer(text) if (v := value_of(m[0])) is not None}
    out |= {float(_WORD_NUMBERS[w]) for w in WORD.findall(text.lower()) if w in _WORD_NUMBERS}
    return out


def key_spans(claim: str) -> list[tuple[str, str]]:
    """``(kind, span)`` for each number, month and name the claim states."""
    out: list[tuple[str, str]] = [("number", m[0]) for m in _NUMBER.finditer(claim)
                                  if value_of(m[0]) is not None]
    out += [("month", w) for w in WORD.findall(claim.lower()) if w in MONTHS and w != "may"]
    for m in _NAME.finditer(claim):
        words = [w for w in WORD.findall(m[0].lower()) if w not in STOP_WORDS]
        if not words or any(w.isdigit() for w in words) or all(w in MONTHS for w in words):
            continue
        opens = m.start() == 0 or re.search(r"[.!?:\"\u201c(]\s*$", claim[:m.start()])
        if opens and len(words) == 1 and words[0] in _OPENERS:
            continue
        out.append(("name", m[0]))
    return out


def missing(claim: str, evidence: str, spans: list[tuple[str, str]] | None = None) -> float:
    """Fraction of the claim's key spans absent from ``evidence`` (0.0 without spans)."""
    spans = key_spans(claim) if spans is None else spans
    if not spans:
        return 0.0
    ev_lower = evidence.lower()
    ev_words = set(WORD.findall(ev_lower))
    ev_numbers = None
    gone = 0.0
    for kind, span in spans:
        if kind == "number":
            ev_numbers = numbers(evidence) if ev_numbers is None else ev_numbers
            gone += value_of(span) not in ev_numbers
        elif kind == "month":
            gone += span not in ev_words
        else:
            words = [w for w in WORD.findall(span.lower()) if w not in STOP_WORDS]
            # "Brenner" for "Karl Brenner" is partly there; possessives and plurals too
            found = sum(w in ev_words or w.rstrip("s") in ev_words or w + "s" in ev_words
                        for w in words)
            gone += 1.0 - found / len(words)
    return gone / len(spans)
