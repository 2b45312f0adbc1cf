"""Answer-quality metrics: exact match, token F1 and gold-answer containment.

Normalisation follows the SQuAD evaluation script: lower-case, drop punctuation and
the articles a/an/the, collapse whitespace. Beyond that script, typography that says
nothing about the answer is folded first: Unicode dashes and quotes become their ASCII
forms (a gold "1963–64" is the model's "1963-64"), accents are dropped ("Agüero" is
"Aguero") and a possessive 's goes ("Cam Newton's pass" contains "Cam Newton").
Every metric takes the best score over
the gold aliases. ``containment`` asks whether a normalised gold answer appears inside
the normalised prediction: the fair measure for sentence-long RAG answers that
contain a short gold span. Citation markers ``[n]`` are removed first.

Deliberately not here: model-based judgements (faithfulness uses the verifier).
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter

from specrag.grounding.text import strip_citations

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)
_TYPOGRAPHY = str.maketrans({**{c: "-" for c in "\u2010\u2011\u2012\u2013\u2014\u2015\u2212"},
                             "\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})
_POSSESSIVE = re.compile(r"(?<=\w)'s\b")


def normalize(text: str) -> str:
    text = unicodedata.normalize("NFKD", strip_citations(text or "").translate(_TYPOGRAPHY))
    text = "".join(c for c in text if not unicodedata.combining(c))
    text = _POSSESSIVE.sub("", text.lower()).translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, golds: list[str] | tuple[str, ...]) -> float:
    p = normalize(prediction)
    return float(any(p == normalize(g) for g in golds))


def token_f1(prediction: str, golds: list[str] | tuple[str, ...]) -> float:
    best = 0.0
    p = normalize(prediction).split()
    for g in golds:
        gt = normalize(g).split()
        common = sum((Counter(p) & Counter(gt)).values())
        if not p or not gt or not common:
            continue
        precision, recall = common / len(p), common / len(gt)
        best = max(best, 2 * precision * recall / (precision + recall))
    return best


def containment(prediction: str, golds: list[str] | tuple[str, ...]) -> float:
    p = f" {normalize(prediction)} "
    return float(any(normalize(g) and f" {normalize(g)} " in p for g in golds))


def score(prediction: str, golds) -> dict[str, float]:
    return {"em": exact_match(prediction, golds), "f1": token_f1(prediction, golds),
            "contains": containment(prediction, golds)}


def percentile(values: list[float], q: float) -> float | None:
    """Linear-interpolated percentile, ``q`` in 0..100; None for no values."""
    vals = sorted(v for v in values if v is not None)
    if not vals:
        return None
    k = (len(vals) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(vals) - 1)
    return vals[lo] + (vals[hi] - vals[lo]) * (k - lo)
