"""Swap a passage's answer for another value of the same type, leaving no trace of it.

``swap_answer(text, question, answer, pools, rng)`` returns the passage with every
occurrence of ``answer`` replaced (a year or number shifted, a month moved, a name taken
from ``answer_pools``: the answers of other questions with the same wh-word, or of the same
kind when ``answer_kinds.typed_candidates`` gives them) and the new
value; ``None`` when no clean swap exists. ``gone`` checks that no word or value of the
old answer is left, so a claim stating it is really unsupported (a partial swap such as
``John "Joe" Orton`` would make a wrong label).

Used by the verifier's hard pair sets (``counterfactual``) and by the end-to-end
counterfactual slice (``bench.slices``). Deliberately not here: the claims and pairs.
"""

from __future__ import annotations

import random
import re

from specrag.grounding.spans import MONTHS, numbers, value_of
from specrag.grounding.text import STOP_WORDS, WORD

YEAR = re.compile(r"^(1[0-9]\d\d|20[0-4]\d)$")
_NUM = re.compile(r"^\d[\d,]*(?:\.\d+)?$")
LIKE_TOP = 5  # names drawn among this many of the most alike of their kind
_NAMEISH = re.compile(r"^[A-Z][\w.'\u2019-]*(?:\s+(?:of|de|the|and|van|von|da|di)?\s*[A-Z][\w.'\u2019-]*){0,4}$")


def answer_type(question: str, answer: str) -> str | None:
    a = answer.strip().rstrip(".")
    if YEAR.match(a):
        return "year"
    if _NUM.match(a):
        return "number"
    if a.lower() in MONTHS:
        return "month"
    if _NAMEISH.match(a) and len(a) > 2:
        wh = next((w for w in ("whom", "whose", "who", "where", "which", "what")
                   if re.search(rf"\b{w}\b", question.lower())), "other")
        return "person" if wh in ("who", "whom", "whose") else f"name:{wh}"
    return None


def shifted(value: str, kind: str, rng: random.Random) -> str:
    """Another year, number or month of the same shape."""
    if kind == "year":
        return str(int(value) + rng.choice([-17, -9, -4, -2, 3, 5, 8, 13]))
    if kind == "month":
        i = MONTHS.index(value.lower())
        return MONTHS[(i + rng.randint(2, 10)) % 12].capitalize()
    v = value_of(value)
    if v is None:
        return value + "0"
    new = v * rng.choice([0.5, 2, 3, 1.5, 4]) + rng.choice([1, 3, 7])
    if re.search(r"\d(st|nd|rd|th)$", value):
        n = int(new)
        return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"
    out = f"{int(new):,}" if "," in value else str(int(new)) if "." not in value else f"{new:.1f}"
    return out if out != value else str(int(new) + 1)


def whole(span: str) -> str:
    """``span`` as a whole-word pattern."""
    return rf"(?<![\w]){re.escape(span)}(?![\w])"


def swap(text: str, old: str, new: str) -> str:
    return re.sub(whole(old), new, text)


def gone(value: str, text: str) -> bool:
    """No trace of ``value`` left in ``text``: none of its words (``Joe`` of "Joe Orton"
    in 'John "Joe" Orton'), or for a number its value, so the world's claim is really
    unsupported (a partial swap would make a wrong label)."""
    if value_of(value) is not None:
        return value_of(value) not in numbers(text)
    words = {w for w in WORD.findall(value.lower()) if w not in STOP_WORDS and len(w) > 2}
    have = set(WORD.findall(text.lower()))
    return bool(words) and not words & have


def answer_pools(items) -> dict[str, list[str]]:
    """Answers by type (names only: numbers, years and months are shifted instead)."""
    pools: dict[str, list[str]] = {}
    for _, _, q, a in items:
        if (t := answer_type(q, a)) and not t.startswith(("year", "number", "month")):
            pools.setdefault(t, []).append(a)
    return pools


def swap_answer(text: str, question: str, answer: str, pools, rng,
                like: dict[str, list[str]] | None = None) -> tuple[str, str] | None:
    """(the passage with ``answer`` replaced everywhere by another value of its type, that
    value), or None when no clean swap exists (no type, no candidate, a trace left).
    ``like``: answer -> candidates of its kind, most alike first
    (``answer_kinds.typed_candidates``); a name is then drawn from the first ``LIKE_TOP``
    the passage does not hold, instead of from ``pools`` (same wh-word)."""
    kind = answer_type(question, answer)
    if kind is None:
        return None
    if kind in ("year", "number", "month"):
        new = shifted(answer, kind, rng)
    else:
        typed = like is not None and answer in like
        pool = [x for x in (like[answer] if typed else pools.get(kind, []))
                if x.lower() not in text.lower()]
        if typed:
            pool = pool[:LIKE_TOP]
        if not pool:
            return None
        new = rng.choice(pool)
    passage = swap(text, answer, new)
    return None if passage == text or not gone(answer, passage) else (passage, new)
