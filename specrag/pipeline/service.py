"""The front door for answering questions: admission, budgets, ledger, tracing, failover.

``Service(settings, engine, ledger=, telemetry=, gate=)`` is usually built by
``pipeline.build.build_service``; ``Service(settings)`` alone builds the same through it.
``astream(question, session=..., collection=...)`` has the engine's signature plus
``session``, so the app and the CLI can use either:

1. the ``AdmissionGate`` admits it or raises ``BusyError`` ("busy, try again"), fairly
   and within the limits per caller: the signed-in user (``principal``) when there is a
   users file, so a user's browser sessions and API keys share one share and one rate;
   else the ``session``. A call without a ``principal`` (the library, ``specrag ask``,
   benchmarks: the operator's own) is held to the gate's size only, not to those limits,
2. the ``Budget`` may degrade it to ``draft-only`` or refuse it (``BudgetExceeded``),
   counting that user's spending across their sessions (else the session's); its
   SQLite read runs off the event loop,
3. it runs in one task of its own with the ledger scope (session, user, collection,
   question id) set there, so concurrent questions never mix their accounting or spans;
   the engine's ``events`` run in that same task (one hop per event).

After each question the ``StateWarmer`` (``warm_states``) may prefill the draft prompts
of that collection's chunks in the background, only while no question is in flight.

An engine passed in without the service's telemetry and ledger among its hooks gets
them through ``engine.replace`` (a copy over the same parts), never by patching.
``usage(by=...)`` and ``budget_status(session, principal=None)`` are the reporting API; ``with_engine``
is the same service (ledger, gate, budget) over another engine, e.g. a session's view.

Deliberately not here: the pipeline itself (``engine``), rendering.
"""

from __future__ import annotations

import asyncio
import copy
import logging

from specrag.observability.budget import Budget, BudgetDecision, BudgetExceeded
from specrag.observability.ledger import Ledger, scope
from specrag.observability.telemetry import Telemetry
from specrag.resilience.concurrency import AdmissionGate, BusyError, isolated

log = logging.getLogger(__name__)


class Service:
    def __init__(self, settings, engine=None, *, ledger: Ledger | None = None,
                 telemetry: Telemetry | None = None, gate: AdmissionGate | None = None):
        self.settings = settings
        self.engine = engine
        self.ledger = ledger
        self.telemetry = telemetry
        self.gate = gate
        self.budget: Budget | None = None
        self.warmer = None  # ``StateWarmer`` over a ``SpeculativeRAG`` engine
        self._assembled = False

    def _assemble(self) -> "Service":
        """Wire the parts (cheap, no model loading); idempotent."""
        if self._assembled:
            return self
        s = self.settings
        if self.ledger is None and s.budget.ledger:
            self.ledger = Ledger.from_settings(s)
        self.telemetry = self.telemetry or Telemetry(s)
        hooks = (self.ledger,) if self.ledger else ()
        if self.engine is None:  # the same engine the app serves, audit included
            # cycle: pipeline.build assembles this module's service
            from specrag.pipeline.build import build_engine

            self.engine = build_engine(s, telemetry=self.telemetry, observers=hooks)
        else:
            missing = tuple(h for h in hooks if h not in self.engine.observers)
            if self.engine.telemetry is None or missing:
                self.engine = self.engine.replace(
                    telemetry=self.engine.telemetry or self.telemetry,
                    observers=self.engine.observers + missing)
        self.gate = self.gate or AdmissionGate.from_settings(s)
        if self.ledger is not None:
            self.budget = Budget(s, self.ledger)
        if hasattr(self.engine, "retriever") and hasattr(self.engine, "draft"):
            # heavy: the prompt-state warmer (llama.cpp), only for an engine with local tiers
            from specrag.pipeline.warm_states import StateWarmer

            self.warmer = StateWarmer.from_settings(s, self.engine, idle=self._idle)
        self._assembled = True
        return self

    def with_engine(self, engine) -> "Service":
        """This service (ledger, telemetry, gate, budget) in front of another engine."""
        self._assemble()
        view = copy.copy(self)
        view.engine = engine
        return view

    def warm_up(self) -> "Service":
        self._assemble()
        self.telemetry.warm_up()
        if self.ledger is not None:
            self.ledger.warm_up()
        self.engine.warm_up()
        return self

    def _idle(self) -> bool:
        return self.gate.active == 0 and self.gate.waiting == 0

    def close(self, timeout_s: float = 30.0) -> None:
        """Finish background work, then close the ledger. A command-line run calls this
        before it exits: audit scoring runs in a daemon thread inside onnxruntime, and an
        interpreter that exits under it aborts ("terminate called without an active
        exception")."""
        if self.warmer is not None:
            self.warmer.close(timeout_s)
        auditor = getattr(self.engine, "auditor", None)
        if auditor is not None:
            auditor.wait(timeout_s)
        if self.ledger is not None:
            self.ledger.close()

    # -- answering ----------------------------------------------------------------------
    async def astream(self, question: str, *, session: str = "anonymous", policy: str | None = None,
                      collection: str | None = None, source=None, **engine_kw):
        """The engine's events; ``engine_kw`` (e.g. ``principal``) goes to the engine as is."""
        self._assemble()
        async for event in isolated(lambda: self._run(question, session, policy, collection, source,
                                                      engine_kw)):
            yield event

    def _user(self, principal) -> str:
        """The signed-in user the limits count for; "" without a users file, where every
        caller is the local user and the session is the only way to tell callers apart."""
        return principal.name if principal is not None and self.settings.security.users_file \
            else ""

    async def _run(self, question, session, policy, collection, source, engine_kw):
        principal = engine_kw.get("principal")
        user = self._user(principal)
        caller = (f"user:{user}" if user else f"session:{session}") if principal is not None \
            else None
        try:
            async with self.gate.slot(caller):
                decision = (await asyncio.to_thread(self.budget.check, session, policy, user)
                            if self.budget else BudgetDecision(policy))
                if decision.degraded:
                    log.warning("session %s: %s", session, decision.reason)
                with scope(session, collection or self.settings.store.collection, user=user):
                    async for event in self.engine.events(question, policy=decision.policy,
                                                          collection=collection, source=source,
                                                          **engine_kw):
                        yield event
        except (BusyError, BudgetExceeded) as err:
            self.telemetry.record_rejection(type(err).__name__, str(err), session)
            raise
        else:
            if self.warmer is not None:  # the models are loaded now; the rest while idle
                self.warmer.request(collection or self.settings.store.collection)

    async def aask(self, question: str, **kw):
        answer = None
        async for event in self.astream(question, **kw):
            if event.kind == "final":
                answer = event.answer
        return answer

    def ask(self, question: str, **kw):
        return asyncio.run(self.aask(question, **kw))

    # -- reporting ----------------------------------------------------------------------
    def usage(self, by: str = "session", **filters) -> list[dict]:
        self._assemble()
        return self.ledger.summary(by, **filters) if self.ledger else []

    def budget_status(self, session: str, principal=None) -> dict:
        self._assemble()
        return self.budget.status(session, self._user(principal)) if self.budget else {}
