"""What the router knows before any draft exists: the question and what retrieval found.

``route_features(question, hits, draft_k=1)`` returns ``FEATURES``, each a float, from
the question's words and the bi-encoder's ranked hits (the same ``Hit`` records the
engine has right after retrieval), in microseconds:

- retrieval confidence: ``top1`` (cosine of the best chunk), ``margin`` (top-1 minus
  top-2) and ``spread`` (top-1 minus the mean of ranks 2-10): one clearly best passage
  is what a small draft model handles; a flat list means the answer is spread out or
  absent;
- ``sources``: distinct documents among the top 5 (0-1): many sources, many hops;
- the question: ``length`` (words / 25), the kind of value it asks for
  (``asks_year``, ``asks_number``, ``asks_name``, ``asks_place``, from
  ``relevance.asked_type``) and ``multi_hop`` (comparisons, "both", "and ... also",
  "or": HaluEval-style two-passage questions the 0.5B model gets wrong);
- question/evidence overlap: ``cover_top1`` and ``cover_draft`` (share of the question's
  content words, cut to 4 letters, in the best chunk and in the ``draft_k`` chunks the
  draft would see),
  and ``kind_found`` (the draft chunks hold a value of the asked kind: a year for
  "when", a number for "how many"; 1 when no kind is asked).

Deliberately not here: the model over these (``router``), the question's embedding
(it would tie a shipped router to one embedder) and anything that needs a generation.
"""

from __future__ import annotations

import re

from specrag.grounding.relevance import asked_type, holds_kind
from specrag.grounding.text import stems

FEATURES = ("top1", "margin", "spread", "sources", "length", "asks_year", "asks_number",
            "asks_name", "asks_place", "multi_hop", "cover_top1", "cover_draft", "kind_found")

_MULTI = re.compile(r"\b(both|either|neither|same|also|which (?:\w+ ){0,3}(?:first|earlier|"
                    r"later|older|younger|larger|bigger|longer|more|higher)|"
                    r"(?:older|younger|earlier|later|larger|longer|taller|more \w+) than)\b"
                    r"|\b\w+ or \w+\?", re.I)


def _cover(question_stems: set[str], texts: list[str]) -> float:
    if not question_stems or not texts:
        return 0.0
    return len(question_stems & stems(" ".join(texts))) / len(question_stems)


def route_features(question: str, hits, draft_k: int = 1) -> dict[str, float]:
    # best first by score, whatever the order: hybrid retrieval fuses the dense and BM25
    # rankings, and its hits keep their cosine scores out of order; the router learnt
    # top-1 and margin on dense scores, best first
    scores = sorted((float(h.score) for h in hits[:10]), reverse=True)
    texts = [h.chunk.text for h in hits[:draft_k]]
    top1 = scores[0] if scores else 0.0
    rest = scores[1:]
    kind = asked_type(question)
    qw = stems(question)
    return {
        "top1": top1,
        "margin": top1 - rest[0] if rest else top1,
        "spread": top1 - sum(rest) / len(rest) if rest else top1,
        "sources": len({h.chunk.source for h in hits[:5]}) / 5.0,
        "length": len(question.split()) / 25.0,
        "asks_year": float(kind == "year"), "asks_number": float(kind == "number"),
        "asks_name": float(kind == "name"), "asks_place": float(kind == "place"),
        "multi_hop": float(bool(_MULTI.search(question))),
        "cover_top1": _cover(qw, texts[:1]),
        "cover_draft": _cover(qw, texts),
        "kind_found": holds_kind(kind, question, " ".join(texts)),
    }
