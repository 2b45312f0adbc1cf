"""What a verification says: one ``Verdict`` per draft, one ``SentenceVerdict`` per sentence.

A ``Verdict`` carries ``score`` (P(right) when the acceptance model judged the draft,
else the grounded score), whether it was ``accepted`` against which bar, the sentences'
aggregate (``grounded``: ``min`` or ``mean``, ``aggregate``), whether the draft answers
the question (``relevance``) and the signals behind it, and whether it is ``supported``
(the label a heavy answer gets). ``label`` is the line a user reads; ``to_dict`` the JSON
the CLI and the HTTP API print. ``is_abstention`` tells an honest "the documents do not
say" from a claim: such a sentence is left out of the aggregate.

Deliberately not here: how the scores are made (``grounding.verifier``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

AGGREGATES = ("min", "mean")

ABSTENTION = re.compile(
    r"\b(?:(?:the\s+)?(?:documents?|context|sources?|passages?|provided\s+\w+|text)\s+"
    r"(?:do(?:es)?\s+not|don't|doesn't|did\s+not)\s+(?:say|mention|specify|state|contain|"
    r"provide|include|address|cover)"
    r"|(?:no|not\s+enough)\s+information\s+(?:about|on|in|is|was|regarding)"
    r"|(?:is|are|was|were)\s+not\s+(?:mentioned|stated|specified|covered|given)\s+in\s+the"
    r"|I\s+(?:could\s+not|couldn't|cannot|can't|was\s+unable\s+to)\s+find"
    r"|I\s+(?:do\s+not|don't)\s+know)\b", re.I)


def is_abstention(sentence: str) -> bool:
    return bool(ABSTENTION.search(sentence))


@dataclass(frozen=True)
class SentenceVerdict:
    sentence: str
    score: float  # max over chunks of P(supported); 1.0 for an abstention
    best_chunk: int | None = None  # index into the chunks given to ``verify``
    abstention: bool = False


@dataclass(frozen=True)
class Verdict:
    score: float
    accepted: bool
    threshold: float
    sentences: tuple[SentenceVerdict, ...] = field(default_factory=tuple)
    aggregate: str = "min"
    abstained: bool = False  # every sentence was an honest "the documents do not say"
    grounded: float | None = None  # the sentences' aggregate; ``score`` when no relevance
    relevance: float | None = None  # P(it answers the question); None: not asked
    signals: dict = field(default_factory=dict)  # the relevance signals, for display
    supported: bool | None = None  # grounded >= verify.supported_threshold
    answer_threshold: float | None = None  # the bar on P(right) when relevance was asked

    @property
    def grounding(self) -> float:
        """The grounded score (``score`` for a verdict made without one)."""
        return self.score if self.grounded is None else self.grounded

    @property
    def label(self) -> str:
        """What a user reads: "grounded 0.97 · answers the question 0.41"."""
        text = f"grounded {self.grounding:.2f}"
        return text if self.relevance is None else f"{text} · answers the question {self.relevance:.2f}"

    def to_dict(self, chunks: list[str] | None = None) -> dict:
        rows = []
        for s in self.sentences:
            row = {"sentence": s.sentence, "score": round(s.score, 4), "best_chunk": s.best_chunk,
                   "abstention": s.abstention}
            if chunks is not None and s.best_chunk is not None:
                row["best_chunk_text"] = chunks[s.best_chunk]
            rows.append(row)
        return {"score": round(self.score, 4), "accepted": self.accepted,
                "threshold": self.threshold, "aggregate": self.aggregate,
                "abstained": self.abstained, "answer_threshold": self.answer_threshold,
                "grounded": None if self.grounded is None else round(self.grounded, 4),
                "relevance": None if self.relevance is None else round(self.relevance, 4),
                "signals": {k: round(v, 4) for k, v in self.signals.items()},
                "supported": self.supported, "sentences": rows}


def aggregate(scores: list[float], how: str = "min") -> float:
    if how not in AGGREGATES:
        raise ValueError(f"aggregate must be one of {AGGREGATES}, got '{how}'")
    return float(min(scores) if how == "min" else np.mean(scores))
