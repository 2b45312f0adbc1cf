"""Is a draft right? The label of one checker-data row, against the question's gold.

``label(kind, draft, gold)`` returns ``(right, how)``: ``how`` says which rule decided,
so a reader (or a trainer dropping doubtful rows) can tell the cases apart.

- **unanswerable** (the documents given do not hold the answer): right only when every
  sentence of the draft abstains ("The documents do not say.", ``grounding.verdict``'s
  ``is_abstention``);
- **yes-no**: the draft's polarity, its first word ``yes`` or ``no`` (after citations
  and an opening quote are stripped), equals the gold; a draft that states neither is
  wrong, marked ``how = "no yes/no"``;
- everything else: some gold alternative has all its spans (``checker_sources.SEP``)
  in the draft, each by the containment of ``bench/metrics.py`` (its normalisation:
  case, punctuation, articles, accents, dashes and quotes) or, for a number, by value:
  ``1,500`` is ``1500`` and ``two`` is ``2`` (``grounding.spans.numbers``); a draft
  that only abstains is wrong there (the answer was in the documents).

Deliberately not here: token F1 or a model judge (rows keep ``metrics.score`` too, so
a looser rule can be applied later), and deciding what the kind is (``checker_plan``).
"""

from __future__ import annotations

from specrag.bench.metrics import containment, normalize
from specrag.grounding.spans import numbers, value_of
from specrag.grounding.text import split_sentences, strip_citations
from specrag.grounding.verdict import is_abstention
from specrag.training.checker_sources import SEP

KINDS = ("answerable", "counterfactual", "unanswerable", "yes-no", "number")


def abstains(draft: str) -> bool:
    """Every sentence of the draft says the documents do not hold the answer."""
    sentences = [s for s in split_sentences(strip_citations(draft or "")) if s.strip()]
    return bool(sentences) and all(is_abstention(s) for s in sentences)


def polarity(draft: str) -> str | None:
    """``yes`` or ``no`` when the draft opens with it, else None."""
    words = normalize(draft).split()
    return words[0] if words and words[0] in ("yes", "no") else None


def is_number(span: str) -> bool:
    return value_of(span.strip()) is not None


def has_span(draft: str, span: str) -> bool:
    if containment(draft, [span]) >= 1.0:
        return True
    return is_number(span) and value_of(span.strip()) in numbers(strip_citations(draft))


def label(kind: str, draft: str | None, gold) -> tuple[bool, str]:
    """(right, how) for a draft of a question of ``kind`` with gold alternatives ``gold``."""
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
        said = polarity(draft)
        if said is None:
            return False, "no yes/no"
        return said in {normalize(g) for g in gold}, f"says {said}"
    for alt in gold:
        spans = [s for s in alt.split(SEP) if s.strip()]
        if spans and all(has_span(draft, s) for s in spans):
            return True, "contains" if len(spans) == 1 else "contains every span"
    return False, "misses the gold"


def kind_of(gold) -> str:
    """``number`` when every gold alternative is one number, else ``answerable``."""
    return "number" if gold and all(SEP not in g and is_number(g) for g in gold) else "answerable"
