"""What the speculative engine emits: stage events while it runs, an ``Answer`` at the end.

The UI, CLI and benchmark only render these records. ``StageEvent.kind`` is one of
``KINDS``, in this order for a single question (stages a policy skips are absent):
rewritten (a follow-up's standalone question in ``text``, ``pipeline.followup``),
retrieved, routed (``routed`` policy: the router's ``Route``), draft_token* (with
sentence_checked among them: one draft sentence verified while the rest streams, its
one-sentence ``Verdict`` in ``verdict``, ``pipeline.early``), draft_done, verdict,
rerank_done, heavy_token*, heavy_done,
heavy_verdict (the heavy answer checked against its chunks, ``verify.check_heavy``),
final; ``draft_failed`` (its ``text`` says why) takes the place of draft_done and verdict
when the draft's generation fails and the heavy tier answers instead. ``t_ms`` is
milliseconds since the question arrived.

Deliberately not here: how the stages run (``engine``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specrag.generators.base import Usage
from specrag.grounding.verdict import SentenceVerdict, Verdict
from specrag.routing.router import Route
from specrag.types import Chunk, Hit

KINDS = ("rewritten", "retrieved", "routed", "draft_token", "sentence_checked", "draft_done",
         "draft_failed", "verdict", "rerank_done", "heavy_token", "heavy_done", "heavy_verdict",
         "final")
POLICIES = ("lazy", "eager", "routed", "draft-only", "heavy-only")


@dataclass(frozen=True)
class Generation:
    """What one tier wrote: its text, the chunks its prompt held, what the call used."""

    text: str
    chunks: tuple[Chunk, ...]
    usage: Usage


# one record for both tiers; the names say which tier in signatures and events
Draft = HeavyAnswer = Generation


@dataclass(frozen=True)
class Citation:
    number: int
    source: str
    page: int | None
    text: str
    chunk_id: str


NO_SOURCE = "No source in the documents supports this answer."


@dataclass(frozen=True)
class Source:
    """A document page the answer came from (``Answer.sources``): the chunk the verdict found
    an answer sentence supported by, at or above ``verify.supported_threshold``, or that an
    ``[n]`` in the answer cites. One per (source, page): ``chunk_id`` is the first such chunk."""

    source: str
    page: int | None
    chunk_id: str
    doc_id: str | None = None
    sentences: int = 0  # answer sentences whose best support is here
    cited: bool = False  # an ``[n]`` of the answer names it

    @property
    def where(self) -> str:
        """"leave.pdf p. 3", or "handbook.md" for a document without pages."""
        return self.source + (f" p. {self.page}" if self.page else "")


@dataclass(frozen=True)
class Answer:
    question: str
    text: str
    tier: str  # "draft" or "heavy"
    policy: str
    draft: Draft | None = None
    verdict: Verdict | None = None
    heavy: HeavyAnswer | None = None
    citations: tuple[Citation, ...] = ()
    hits: tuple[Hit, ...] = ()
    verify_chunks: tuple[Chunk, ...] = ()  # what the verdict's best_chunk indexes into
    timings_ms: dict = field(default_factory=dict)
    usage: tuple[Usage, ...] = ()
    cost_usd: float = 0.0
    heavy_only_cost_usd: float = 0.0
    heavy_only_tokens: int = 0  # heavy-model tokens heavy-only would have used (estimated)
    heavy_cancelled: bool = False
    draft_error: str = ""  # why the draft failed, when it did (the heavy tier answered)
    heavy_verdict: Verdict | None = None  # the heavy answer against the chunks it was given
    route: Route | None = None  # the router's decision (``routed`` policy)
    early_rejected: SentenceVerdict | None = None  # the sentence that stopped the draft early
    # what the user must read beside the answer (``phases.warnings_for``): instructions
    # removed from a document, a withheld answer that obeyed one, an unverified draft
    warnings: tuple[str, ...] = ()
    searched_for: str = ""  # a follow-up's standalone rewrite (``pipeline.followup``)
    # the documents it came from, by first use (``pipeline.provenance``): the shown
    # verdict's supporting chunks, then the ``[n]`` citations
    sources: tuple[Source, ...] = ()

    @property
    def shown_verdict(self) -> Verdict | None:
        """The verdict of the text the user is shown (the draft's or the heavy answer's)."""
        return self.heavy_verdict if self.tier == "heavy" else self.verdict

    @property
    def supported(self) -> bool | None:
        """Is the shown answer supported by the documents? None: it was not checked."""
        v = self.shown_verdict
        return None if v is None or v.abstained else v.supported

    @property
    def support_note(self) -> str:
        """What the user reads under a heavy answer the documents do not back."""
        v = self.shown_verdict
        if self.tier != "heavy" or v is None or v.abstained:
            return ""
        g = v.grounding
        if not v.supported:
            return f"not supported by the documents (grounded {g:.2f})"
        d = self.verdict
        if d is not None and not d.abstained and d.grounded is not None and d.grounded > g:
            return f"less supported than the draft (grounded {g:.2f} vs {d.grounded:.2f})"
        return ""

    @property
    def sourced(self) -> bool:
        """Does a chunk of the documents support a sentence of the shown answer?"""
        return any(s.sentences for s in self.sources)

    @property
    def sources_line(self) -> str:
        """The line every renderer shows under the answer: "Sources: leave.pdf p. 3,
        handbook.md", or that no source in the documents supports it."""
        listed = ", ".join(s.where for s in self.sources)
        if self.sourced:
            return f"Sources: {listed}"
        if not self.sources:
            return NO_SOURCE
        if self.shown_verdict is None:  # cited, but nothing checked the answer against them
            return f"Cited, not checked against the documents: {listed}"
        return f"{NO_SOURCE} Cited: {listed}"

    @property
    def accepted(self) -> bool:
        return self.tier == "draft" and self.verdict is not None and self.verdict.accepted

    def to_dict(self) -> dict:
        def usage(u: Usage) -> dict:
            return {k: getattr(u, k) for k in Usage.__dataclass_fields__}

        return {
            "question": self.question, "answer": self.text, "tier": self.tier,
            "policy": self.policy,
            "draft": self.draft.text if self.draft else None,
            "verdict": self.verdict.to_dict([c.text for c in self.verify_chunks])
            if self.verdict else None,
            "heavy": self.heavy.text if self.heavy else None,
            "heavy_verdict": self.heavy_verdict.to_dict([c.text for c in self.heavy.chunks])
            if self.heavy_verdict and self.heavy else None,
            "supported": self.supported, "support_note": self.support_note or None,
            "citations": [c.__dict__ for c in self.citations],
            "sources": [dict(s.__dict__) for s in self.sources], "sourced": self.sourced,
            "timings_ms": {k: round(v, 1) for k, v in self.timings_ms.items()},
            "usage": [usage(u) for u in self.usage], "cost_usd": self.cost_usd,
            "heavy_only_cost_usd": self.heavy_only_cost_usd,
            "heavy_only_tokens": self.heavy_only_tokens,
            "heavy_cancelled": self.heavy_cancelled,
            "draft_error": self.draft_error or None,
            "route": self.route.to_dict() if self.route else None,
            "warnings": list(self.warnings),
            "searched_for": self.searched_for or None,
            "early_rejected": ({"sentence": self.early_rejected.sentence,
                                "score": round(self.early_rejected.score, 4)}
                               if self.early_rejected else None),
        }


@dataclass(frozen=True)
class StageEvent:
    kind: str
    t_ms: float
    text: str = ""  # token text for *_token events
    hits: tuple[Hit, ...] = ()
    draft: Draft | None = None
    verdict: Verdict | None = None
    heavy: HeavyAnswer | None = None
    reranked: tuple[Hit, ...] = ()
    answer: Answer | None = None
    route: Route | None = None
