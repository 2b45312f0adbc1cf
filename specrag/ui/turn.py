"""One question's state in the UI: its engine events folded into a ``Turn``.

``Turn(question)`` collects the ``StageEvent``s of one question (``turn.apply(event)``):
the draft as it streams, the sentences checked while drafting, the verdict, the heavy
answer and its verdict, the router's decision and the final ``Answer``; ``stage`` says
what the page shows now (also the card's ``data-state`` for tests and styling).

Deliberately not here: drawing it (``ui.chat``), and any decision the engine makes
(tier, acceptance and citations all come from its events).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Turn:
    question: str
    draft: str = ""
    heavy: str = ""
    hits: tuple = ()
    verdict: object = None
    heavy_verdict: object = None  # the heavy answer checked against its chunks
    escalated: bool = False  # rerank_done seen: the heavy tier is answering
    draft_model: str = ""
    heavy_model: str = ""
    answer: object = None
    error: str = ""
    draft_error: str = ""  # the draft's generation failed; the heavy tier answers
    note: str = ""  # shown while nothing has arrived yet (e.g. "loading models")
    route: object = None  # the router's decision (``routed`` policy)
    checked: list = field(default_factory=list)  # (sentence, passed) verified while drafting
    searched_for: str = ""  # a follow-up's standalone rewrite
    _seen: set = field(default_factory=set)  # event kinds so far

    def apply(self, ev) -> "Turn":
        self._seen.add(ev.kind)
        if ev.kind == "rewritten":
            self.searched_for = ev.text
            self.note = f"searched for: {ev.text} · retrieving passages…"
        elif ev.kind == "retrieved":
            self.hits = ev.hits
            self.note = f"{len(ev.hits)} passages retrieved · generating…"
        elif ev.kind == "routed":
            self.route = ev.route
            self.note = f"{len(self.hits)} passages retrieved · {ev.route.label} · generating…"
        elif ev.kind == "draft_token":
            self.draft += ev.text
        elif ev.kind == "sentence_checked":
            self.checked.append((ev.text, ev.verdict.sentences[0].score >= ev.verdict.threshold))
        elif ev.kind == "draft_done":
            self.draft = ev.draft.text
            self.draft_model = getattr(ev.draft.usage, "model", "") if ev.draft.usage else ""
        elif ev.kind == "draft_failed":
            self.draft_error, self.escalated = ev.text, True
        elif ev.kind == "verdict":
            self.verdict = ev.verdict
        elif ev.kind == "rerank_done":
            self.escalated = True
        elif ev.kind == "heavy_token":
            self.escalated = True
            self.heavy += ev.text
        elif ev.kind == "heavy_done":
            self.heavy = ev.heavy.text
            self.heavy_model = getattr(ev.heavy.usage, "model", "") if ev.heavy.usage else ""
        elif ev.kind == "heavy_verdict":
            self.heavy_verdict = ev.verdict
        elif ev.kind == "final":
            self.answer = ev.answer
            self.verdict = ev.answer.verdict or self.verdict
            self.heavy_verdict = ev.answer.heavy_verdict or self.heavy_verdict
        return self

    @property
    def stage(self) -> str:
        """What the page shows now (also ``data-state`` for tests and styling)."""
        if self.error:
            return "error"
        if self.answer is not None:
            a = self.answer
            if a.tier == "heavy":
                return "replaced" if a.draft is not None else "heavy"
            return "accepted" if a.accepted else ("unverified" if a.verdict else "empty")
        if self.escalated:
            return "escalating"
        if self.verdict is not None:
            if getattr(self.verdict, "abstained", False):
                return "abstained"  # the engine may still escalate: not "accepted" yet
            return "accepted" if self.verdict.accepted else "rejected"
        if "draft_done" in self._seen:
            return "verifying"
        return "drafting" if self.draft else "retrieving"
