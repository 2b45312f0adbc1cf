"""The engine every session shares, and what each browser session keeps for itself.

- ``Engines`` holds the one engine of the app: by default the ``Service`` of the
  composition root ``pipeline.build`` (admission gate, budgets, usage ledger, tracing,
  failover tiers, the quality ``Auditor``); tests inject a
  ``SpeculativeRAG`` or a ``Service`` of fakes. It is built on first use and warmed when
  a browser opens the page (``prepare``: in the background, with the collection's draft
  prompts after the models) or on the first question, whichever comes first; not at
  import or startup, so the app starts fast, and under a lock so the models never load
  twice. When a
  session's settings panel changes the threshold, k or chunk counts, ``view(options)``
  returns ``engine.replace(settings=...)``: the same loaded parts and hooks under that
  session's settings (and, for a ``Service``, ``with_engine``: the same ledger, gate and
  budget). Sessions never see each other's choices and no model is loaded twice.
- ``stream(engine, question, session_id, **kw)`` starts a question on either kind of
  engine; a ``Service`` gets the session id, so its ledger and budgets are per session.
- ``ChatSession`` is the per-session state kept in ``gr.State``: the rendered HTML of
  finished turns and one chart point per answer. Nothing in it is shared.
- ``follow(events, turn)`` applies engine events to a ``Turn`` and yields it at every
  stage change, and at most every ``interval`` seconds while tokens stream (a browser
  gains nothing from 100 repaints a second).

Deliberately not here: HTML (``chat``), figures (``charts``), Gradio layout (``app``),
and any pipeline decision (the engine and the service make them all).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from specrag.pipeline.build import build_service
from specrag.pipeline.engine import SpeculativeRAG
from specrag.pipeline.service import Service
from specrag.ui import charts
from specrag.ui.chat import render_conversation, render_turn
from specrag.ui.turn import Turn

log = logging.getLogger(__name__)

MAX_TURNS = 50  # rendered turns kept per session; older ones scroll out of memory


@dataclass(frozen=True)
class Options:
    """A session's choices from the settings panel (None: the app's setting)."""

    policy: str | None = None
    threshold: float | None = None
    top_k: int | None = None
    draft_k: int | None = None
    heavy_k: int | None = None
    answer_threshold: float | None = None

    def changes(self, settings) -> dict:
        wanted = {"verify.threshold": self.threshold, "retrieval.top_k": self.top_k,
                  "retrieval.draft_k": self.draft_k, "retrieval.heavy_k": self.heavy_k,
                  "verify.answer_threshold": self.answer_threshold}
        current = {"verify.threshold": settings.verify.threshold,
                   "verify.answer_threshold": settings.verify.answer_threshold,
                   "retrieval.top_k": settings.retrieval.top_k,
                   "retrieval.draft_k": settings.retrieval.draft_k,
                   "retrieval.heavy_k": settings.retrieval.heavy_k}
        return {k: v for k, v in wanted.items() if v is not None and v != current[k]}


def inner_engine(engine):
    """The ``SpeculativeRAG`` (or whatever answers) inside a ``Service``; else ``engine``."""
    return engine.engine if isinstance(engine, Service) else engine


def stream(engine, question: str, session_id: str | None, **kw):
    """``engine.astream`` for a ``Service`` (per-session ledger) or a bare engine."""
    if isinstance(engine, Service):
        kw["session"] = session_id or "anonymous"
    return engine.astream(question, **kw)


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
                self._engine = build_service(self.settings, retriever=self._retriever)
            return self._engine

    @property
    def service(self) -> Service | None:
        """The shared ``Service`` (ledger, budgets), or None for a bare injected engine."""
        base = self.base()
        return base if isinstance(base, Service) else None

    def warm_up(self):
        """Load every model once (blocking: run it in a thread)."""
        engine = self.base()
        with self._lock:
            if not self.warm:
                if hasattr(engine, "warm_up"):
                    engine.warm_up()
                inner = inner_engine(engine)
                auditor = getattr(inner, "auditor", None)
                if auditor is not None:  # score the audit with the models just loaded
                    _lend_models(auditor, inner)
                self.warm = True
        return engine

    def prepare(self, collection: str | None) -> threading.Thread:
        """Someone opened the page: load the models, then warm ``collection``'s draft
        prompts (``pipeline.warm_states``), in the background, so that by the time the first
        question is typed both are done. A question asked sooner waits on the same lock."""
        def run():
            try:
                engine = self.warm_up()
            except Exception:  # noqa: BLE001 - the first question reports it, with its error
                log.exception("loading the models in the background failed")
                return
            warmer = getattr(engine, "warmer", None)
            if warmer is not None and collection:
                warmer.request(collection)

        thread = threading.Thread(target=run, daemon=True, name="specrag-prepare")
        thread.start()
        return thread

    def view(self, options: Options):
        """The engine for one question with a session's settings (the base one if unchanged)."""
        base = self.warm_up()
        inner = inner_engine(base)
        if not isinstance(inner, SpeculativeRAG):
            return base
        changes = options.changes(inner.settings)
        if not changes:
            return base
        # the same loaded parts (models, retriever, hooks) under this session's settings;
        # a service keeps its ledger, telemetry, admission gate and budget
        engine = inner.replace(settings=inner.settings.with_values(**changes))
        return base.with_engine(engine) if isinstance(base, Service) else engine

    def model_names(self) -> dict[str, str]:
        """Role -> the model the engine uses, for the settings panel (read-only)."""
        engine = inner_engine(self._engine) if self._engine is not None else None
        out = {}
        for role in ("draft", "heavy", "verifier", "reranker"):
            part = getattr(engine, role, None) if engine is not None else None
            if part is not None and getattr(part, "model", None):
                out[role] = f"{getattr(part, 'name', '')}: {part.model}".lstrip(": ")
        return out


def _lend_models(auditor, engine) -> None:
    """Give the auditor the engine's verifier and reranker unless it has its own."""
    verifier = getattr(engine, "verifier", None)
    reranker = getattr(engine, "reranker", None)
    if auditor.verifier is None and hasattr(verifier, "verify"):
        auditor.verifier = verifier
    if auditor.reranker is None and hasattr(reranker, "predict"):
        auditor.reranker = reranker


@dataclass
class ChatSession:
    turns: list[str] = field(default_factory=list)
    points: list[charts.Point] = field(default_factory=list)
    # the conversation as messages, for follow-up questions (``pipeline.followup``)
    history: list[dict] = field(default_factory=list)

    def html(self, live: Turn | None = None) -> str:
        return render_conversation(self.turns, live)

    def finish(self, turn: Turn) -> None:
        self.turns = (self.turns + [render_turn(turn)])[-MAX_TURNS:]
        if turn.answer is not None:
            self.points = self.points + [charts.point(turn.answer)]
            # the standalone question, so a follow-up of a follow-up still resolves
            asked = turn.answer.searched_for or turn.question
            self.history = (self.history + [{"role": "user", "content": asked},
                                            {"role": "assistant",
                                             "content": turn.answer.text}])[-2 * MAX_TURNS:]


async def follow(events, turn: Turn, interval: float = 0.05):
    last = 0.0
    async for ev in events:
        turn.apply(ev)
        now = time.monotonic()
        if ev.kind not in ("draft_token", "heavy_token") or now - last >= interval:
            last = now
            yield turn
