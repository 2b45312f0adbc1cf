"""The engine every session shares, and what each browser session keeps for itself.

- ``Engines`` holds the one ``SpeculativeRAG`` of the app. It is built and warmed on the
  first question (models load then, not at import or startup, so the app starts fast),
  under a lock so two first questions do not load the models twice. When a session's
  settings panel changes the threshold, k or chunk counts, ``view(options)`` returns a
  shallow copy of the engine with those settings over the same loaded parts: sessions
  never see each other's choices and no model is loaded twice.
- ``ChatSession`` is the per-session state kept in ``gr.State``: the rendered HTML of
  finished turns and one chart point per answer. Nothing in it is shared.
- ``follow(events, turn)`` applies engine events to a ``Turn`` and yields it at every
  stage change, and at most every ``interval`` seconds while tokens stream (a browser
  gains nothing from 100 repaints a second).

Deliberately not here: HTML (``chat``), figures (``charts``), Gradio layout (``app``),
and any pipeline decision (the engine makes them all).
"""

from __future__ import annotations

import copy
import threading
import time
from dataclasses import dataclass, field

from . import charts
from .chat import Turn, render_conversation, render_turn

MAX_TURNS = 50  # rendered turns kept per session; older ones scroll out of memory


@dataclass(frozen=True)
class Options:
    """A session's choices from the settings panel (None: the app's setting)."""

    policy: str | None = None
    threshold: float | None = None
    top_k: int | None = None
    draft_k: int | None = None
    heavy_k: int | None = None

    def changes(self, settings) -> dict:
        wanted = {"verify.threshold": self.threshold, "retrieval.top_k": self.top_k,
                  "retrieval.draft_k": self.draft_k, "retrieval.heavy_k": self.heavy_k}
        current = {"verify.threshold": settings.verify.threshold,
                   "retrieval.top_k": settings.retrieval.top_k,
                   "retrieval.draft_k": settings.retrieval.draft_k,
                   "retrieval.heavy_k": settings.retrieval.heavy_k}
        return {k: v for k, v in wanted.items() if v is not None and v != current[k]}


class Engines:
    def __init__(self, settings, engine=None, retriever=None):
        self.settings = engine.settings if engine is not None else settings
        self._engine = engine
        self._retriever = retriever
        self._lock = threading.Lock()
        self.warm = False

    def base(self):
        """The shared engine, built on first use (building loads nothing)."""
        with self._lock:
            if self._engine is None:
                from ..engine import SpeculativeRAG

                self._engine = SpeculativeRAG(self.settings, retriever=self._retriever)
            return self._engine

    def warm_up(self):
        """Load every model once (blocking: run it in a thread)."""
        engine = self.base()
        with self._lock:
            if not self.warm:
                if hasattr(engine, "warm_up"):
                    engine.warm_up()
                self.warm = True
        return engine

    def view(self, options: Options):
        """The engine for one question with a session's settings (the base one if unchanged)."""
        from ..engine import SpeculativeRAG

        base = self.warm_up()
        changes = options.changes(base.settings)
        if not changes or not isinstance(base, SpeculativeRAG):
            return base
        # a shallow copy shares every loaded part (models, retriever, anything the engine
        # grows later); only the settings object and the verifier's threshold differ
        view = copy.copy(base)
        view.settings = base.settings.with_values(**changes)
        if "verify.threshold" in changes and hasattr(base.verifier, "threshold"):
            view.verifier = copy.copy(base.verifier)
            view.verifier.threshold = float(changes["verify.threshold"])
        return view

    def model_names(self) -> dict[str, str]:
        """Role -> the model the engine uses, for the settings panel (read-only)."""
        engine = self._engine
        out = {}
        for role in ("draft", "heavy", "verifier", "reranker"):
            part = getattr(engine, role, None) if engine is not None else None
            if part is not None and getattr(part, "model", None):
                out[role] = f"{getattr(part, 'name', '')}: {part.model}".lstrip(": ")
        return out


@dataclass
class ChatSession:
    turns: list[str] = field(default_factory=list)
    points: list[charts.Point] = field(default_factory=list)

    def html(self, live: Turn | None = None) -> str:
        return render_conversation(self.turns, live)

    def finish(self, turn: Turn) -> None:
        self.turns = (self.turns + [render_turn(turn)])[-MAX_TURNS:]
        if turn.answer is not None:
            self.points = self.points + [charts.point(turn.answer)]


async def follow(events, turn: Turn, interval: float = 0.05):
    last = 0.0
    async for ev in events:
        turn.apply(ev)
        now = time.monotonic()
        if ev.kind not in ("draft_token", "heavy_token") or now - last >= interval:
            last = now
            yield turn
