"""Is a draft right? The label of one checker-data row, against the question's gold.

``label(kind, draft, gold)`` returns ``(right, how)``: ``how`` says which rule decided,
so a reader (or a trainer dropping doubtful rows) can tell the cases apart.

- **unanswerable** (the documents given do not hold the answer): right only when every
  sentence of the draft abstains ("The documents do not say.", ``grounding.verdict``'s
  ``is_abstention``);
- **yes-no**: the draft's polarity equals the gold: its first word when that is ``yes``
  or ``no``; else its first sentence read as a statement of the question (``implied``:
  "The crew 2 has a story line." says yes), a negation in one of them and not the
  other saying no. About one BoolQ draft in three states no yes or no (on a first
  reading of 30 drafts), so these are labelled and marked ``how = "implied ..."``;
- **either-or** questions ("..., X or Y?", ``options``) when one option is the gold
  (token F1 >= 0.5, so "Nelson DeMille" stands for the gold "Nelson Richard DeMille"):
  right when the draft names the answer and not the other option, or names it first.
  Containment alone calls a draft that restates both options right;
- everything else: some gold alternative has all its spans (``checker_sources.SEP``)
  in the draft, each by the containment of ``bench/metrics.py`` (its normalisation:
  case, punctuation, articles, accents, dashes and quotes) or, for a number, by value:
  ``1,500`` is ``1500`` and ``two`` is ``2`` (``grounding.spans.numbers``); a draft
  that only abstains is wrong there (the answer was in the documents).

Deliberately not here: token F1 as a label or a model judge (rows keep ``metrics.score``,
so the benchmark's containment and looser rules can be applied later), and deciding
what the kind is (``checker_plan``).
"""

from __future__ import annotations

import re

from specrag.bench.metrics import containment, normalize, token_f1
from specrag.grounding.spans import numbers, value_of
from specrag.grounding.text import split_sentences, strip_citations
from specrag.grounding.verdict import is_abstention
from specrag.training.checker_sources import SEP

KINDS = ("answerable", "counterfactual", "unanswerable", "yes-no", "number")
_NEGATION = re.compile(r"\b(?:not|no|never|none|neither|nor|cannot)\b|n[\'\u2019]t\b", re.I)
# "..., X or Y?" / "...: X or Y?" / "between X or Y": the two options of an either-or question
_CHOICE = re.compile(r"(?:[:,]\s*|\b(?:between|either)\s+)([^:,?]+?)\s+or\s+([^:,?]+?)[\s?.]*$")


def abstains(draft: str) -> bool:
    """Every sentence of the draft says the documents do not hold the answer."""
    sentences = [s for s in split_sentences(strip_citations(draft or "")) if s.strip()]
    return bool(sentences) and all(is_abstention(s) for s in sentences)


def polarity(draft: str, question: str = "") -> tuple[str | None, bool]:
    """(``yes`` / ``no``, implied?): the draft's first word when it is one, else its first
    sentence against the question (a negation in one and not the other: ``no``)."""
    words = normalize(draft).split()
    if words and words[0] in ("yes", "no"):
        return words[0], False
    first = next((x for x in split_sentences(strip_citations(draft)) if x.strip()), "")
    if not first:
        return None, False
    flipped = bool(_NEGATION.search(first)) != bool(_NEGATION.search(question))
    return ("no" if flipped else "yes"), True


def options(question: str) -> tuple[str, str] | None:
    m = _CHOICE.search(" ".join(question.split()))
    return (m[1].strip(), m[2].strip()) if m else None


def _position(draft: str, spans) -> int:
    d = f" {normalize(draft)} "
    found = [d.find(f" {normalize(s)} ") for s in spans if normalize(s)]
    return min((i for i in found if i >= 0), default=-1)


def either_or(draft: str, question: str, gold) -> tuple[bool, str] | None:
    """The label of an either-or question whose gold is one of its options, else None."""
    pair = options(question)
    if pair is None:
        return None
    f1 = [token_f1(o, list(gold)) for o in pair]
    if max(f1) < 0.5 or f1[0] == f1[1]:
        return None
    mine, other = pair if f1[0] > f1[1] else pair[::-1]
    at, other_at = _position(draft, [mine, *gold]), _position(draft, [other])
    if at < 0 and other_at < 0:
        return None
    if other_at < 0:
        return True, "either-or: names the answer"
    if at < 0:
        return False, "either-or: names the other"
    return at < other_at, "either-or: first named"


def is_number(span: str) -> bool:
    return value_of(span.strip()) is not None


def has_span(draft: str, span: str) -> bool:
    if containment(draft, [span]) >= 1.0:
        return True
    return is_number(span) and value_of(span.strip()) in numbers(strip_citations(draft))


def label(kind: str, draft: str | None, gold, question: str = "") -> tuple[bool, str]:
    """(right, how) for a draft of ``question`` of ``kind`` with gold alternatives ``gold``."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind '{kind}'; choose from {', '.join(KINDS)}")
    draft = (draft or "").strip()
    if kind == "unanswerable":
        ok = abstains(draft)
        return ok, "abstains" if ok else "states an answer"
    if not draft:
        return False, "empty draft"
    if abstains(draft):
        return False, "abstains"
    if kind == "yes-no":
        said, implied = polarity(draft, question)
        if said is None:
            return False, "no yes/no"
        return said in {normalize(g) for g in gold}, f"{'implied' if implied else 'says'} {said}"
    if (chosen := either_or(draft, question, gold)) is not None:
        return chosen
    for alt in gold:
        spans = [s for s in alt.split(SEP) if s.strip()]
        if spans and all(has_span(draft, s) for s in spans):
            return True, "contains" if len(spans) == 1 else "contains every span"
    return False, "misses the gold"


def kind_of(gold) -> str:
    """``number`` when every gold alternative is one number, else ``answerable``."""
    return "number" if gold and all(SEP not in g and is_number(g) for g in gold) else "answerable"
