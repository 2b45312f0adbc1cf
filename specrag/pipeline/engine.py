"""The speculative engine: retrieve broadly, draft fast, verify, escalate only if needed.

``SpeculativeRAG(settings, retriever, draft, heavy, verifier, reranker)`` (usually built
by ``pipeline.build.build_engine``); ``astream(question)`` yields ``StageEvent``s and
ends with a ``final`` event carrying the ``Answer``; ``aask``/``ask`` return just the
answer.

Policies (settings ``generation.policy`` or per call):
- ``lazy``: rerank and heavy generation start only after the verifier rejects the draft.
- ``eager``: the rerank (and, with ``eager_heavy``, the heavy generation, buffered)
  start alongside the draft and are cancelled the moment the draft is accepted. When
  both tiers run on this machine (local models), the heavy generation still waits for
  the verdict unless ``eager_heavy_local`` is set: on a CPU they would only split the
  same cores.
- ``routed``: the router (``routing``) predicts from the question and the retrieval
  whether a draft will be accepted and right; if so the question runs ``lazy``, else
  straight to the heavy tier (a hard question costs heavy-only time, not draft + heavy).
- ``draft-only`` / ``heavy-only``: the two baselines.
A draft that only abstains ("The documents do not say.") is escalated when
``verify.escalate_abstentions`` is set: the weak model may have missed the answer. A
draft whose generation fails (its model's process died, say) escalates too, with a
``draft_failed`` event and ``Answer.draft_error`` saying why; under ``draft-only`` the
error is raised.

Hooks are parameters, not patches: ``telemetry`` (spans per question and stage, via
``observability.tracing``) and ``observers`` (generation-call observers such as the
usage ledger, via ``observability.observe``). ``replace(**changes)`` gives a copy
with other settings or hooks over the same loaded parts (a session's settings panel,
a service adding its ledger). Each question runs in one task of its own
(``astream``); ``events`` is the same stream in the caller's task, for a caller that
already made one (``Service``), so every event crosses one task boundary, not two.

The parts' protocols: ``retriever.search(query, top_k, collection, source) ->
Retrieval`` (the engine checks the collection's ACL itself, once); generators
``stream(messages, max_tokens=, temperature=)``; ``verifier.verify(text, hits) ->
Verdict``; ``reranker.rank(query, documents, top_k)``; each with ``warm_up()``.

Deliberately not here: retries/failover (the tiers come wrapped by
``resilience.chains``), rendering, persistence.
"""

from __future__ import annotations

import asyncio
import time

from specrag.generators.base import GenerationError
from specrag.grounding.crossencoder import CrossEncoder
from specrag.observability import ledger
from specrag.observability.observe import ObservedGenerator
from specrag.observability.tracing import Tracer
from specrag.pipeline import followup, profile
from specrag.pipeline.events import POLICIES, Answer, StageEvent
from specrag.pipeline.phases import QuestionRun
from specrag.pipeline.prompts import NOT_FOUND
from specrag.resilience.chains import tier_from_settings
from specrag.resilience.concurrency import isolated
from specrag.retrieval.retriever import Retriever
from specrag.routing.router import Router
from specrag.security import access, redacting, sanitize
from specrag.settings import Settings
from specrag.types import SpecragError, one_line

_PARAMS = ("settings", "retriever", "draft", "heavy", "verifier", "reranker", "auditor",
           "telemetry", "observers", "router")


class SpeculativeRAG:
    def __init__(self, settings: Settings, retriever=None, draft=None, heavy=None,
                 verifier=None, reranker=None, auditor=None, *, telemetry=None,
                 observers=(), router=None):
        self.settings = settings
        self.retriever = retriever
        self.draft = draft  # the tiers as given (resilient chains); wrapped per call below
        self.heavy = heavy
        self.verifier = verifier
        self.reranker = reranker
        self.auditor = auditor  # optional: samples final answers for the quality audit
        self.router = router  # the ``routed`` policy's (built from settings when None)
        self.telemetry = telemetry
        self.observers = tuple(observers)
        self.tracer = Tracer(telemetry)
        self._tiers: dict = {}
        self._warm = False
        self.tuned_for: str | None = None  # set on a collection's tuned view (``tune.profile``)

    @classmethod
    def from_settings(cls, settings: Settings, **kw) -> "SpeculativeRAG":
        """The engine the app serves (``pipeline.build.build_engine``)."""
        # cycle: pipeline.build assembles this module's engine
        from specrag.pipeline.build import build_engine

        return build_engine(settings, **kw)

    def replace(self, **changes) -> "SpeculativeRAG":
        """A copy with some constructor parameters changed, sharing every other part.
        New settings with another ``verify.threshold`` or ``answer_threshold`` give the
        copy a verifier with those thresholds over the same loaded model."""
        unknown = set(changes) - set(_PARAMS)
        if unknown:
            raise TypeError(f"SpeculativeRAG has no parameter {', '.join(sorted(unknown))}")
        params = {name: getattr(self, name) for name in _PARAMS}
        params.update(changes)
        threshold = params["settings"].verify.threshold
        answer = params["settings"].verify.answer_threshold
        verifier = params["verifier"]
        if ("verifier" not in changes and verifier is not None
                and (getattr(verifier, "threshold", threshold) != threshold
                     or getattr(verifier, "answer_threshold", answer) != answer)):
            params["verifier"] = verifier.with_threshold(threshold, answer)
        settings = params.pop("settings")
        copy = SpeculativeRAG(settings, **params)
        if "router" not in changes and copy.router is not None and (
                settings.routing != self.settings.routing
                or settings.retrieval.draft_k != self.settings.retrieval.draft_k):
            copy.router = None  # built again from the new settings (a small JSON file)
        copy._warm = self._warm and copy.router is not None and not (
            {"retriever", "draft", "heavy", "verifier", "reranker"} & set(changes))
        return copy

    def warm_up(self) -> "SpeculativeRAG":
        """Build what was not given from settings and load every model (idempotent)."""
        if self._warm:
            return self
        s = self.settings
        if self.retriever is None:
            self.retriever = Retriever.from_settings(s)
        if self.draft is None or self.heavy is None:
            self.draft = self.draft or tier_from_settings("draft", s)
            self.heavy = self.heavy or tier_from_settings("heavy", s)
        if self.verifier is None:
            # cycle: pipeline.build assembles this module's engine
            from specrag.pipeline.build import build_verifier

            self.verifier = build_verifier(s)
        if self.reranker is None:
            self.reranker = CrossEncoder.from_settings(s, "reranker")
        if self.router is None:
            self.router = Router.from_settings(s)
        for part in (self.retriever, self.draft, self.heavy, self.verifier, self.reranker,
                     self.router):
            part.warm_up()
        self._warm = True
        return self

    def tier(self, stage: str):
        """The ``draft`` or ``heavy`` generator as a question calls it: observed (telemetry,
        ledger) and, for a third-party backend, behind PII redaction (the observers see
        the placeholders too, never the personal data)."""
        if stage not in self._tiers:
            gen = getattr(self, stage)
            watchers = ((self.telemetry,) if self.telemetry else ()) + self.observers
            if watchers:
                gen = ObservedGenerator(gen, stage, watchers)
            self._tiers[stage] = redacting.wrap(gen, self.settings)
        return self._tiers[stage]

    # -- public API ----------------------------------------------------------------
    def ask(self, question: str, **kw) -> Answer:
        return asyncio.run(self.aask(question, **kw))

    async def aask(self, question: str, **kw) -> Answer:
        answer = None
        async for event in self.astream(question, **kw):
            if event.kind == "final":
                answer = event.answer
        return answer

    async def astream(self, question: str, *, policy: str | None = None,
                      collection: str | None = None, source: str | list[str] | None = None,
                      principal=None, history: list[dict] | None = None):
        """The question's events, run in a task of its own (its spans and ledger scope
        stay with it). ``history``: the conversation so far (``pipeline.followup``)."""
        async for event in isolated(lambda: self.events(question, policy=policy,
                                                        collection=collection, source=source,
                                                        principal=principal, history=history)):
            yield event

    async def events(self, question: str, *, policy: str | None = None,
                     collection: str | None = None, source: str | list[str] | None = None,
                     principal=None, history: list[dict] | None = None):
        """``astream`` in the caller's task: for a caller that isolates the question."""
        if self.tuned_for is None:
            # a collection `specrag tune` tuned answers under its own calibration/router
            view = profile.view(self, collection)
            if view is not self:
                async for event in view.events(question, policy=policy, collection=collection,
                                               source=source, principal=principal,
                                               history=history):
                    yield event
                return
        policy = policy or self.settings.generation.policy
        with self.tracer.question(policy, question) as traced:
            who = access.authorize(self.settings, "read", collection, principal)  # ACL, once
            sanitize.check_question(question or "", self.settings.security.max_question_chars)
            history = followup.check_history(history, self.settings.security.max_question_chars)
            async for event in self._stages(question, policy, collection, source, who, history):
                traced.see(event)
                if event.kind == "final" and self.auditor is not None:  # SQLite: off the loop
                    await asyncio.to_thread(self.auditor.maybe_record, event.answer,
                                            collection or self.settings.store.collection)
                yield event

    async def _stages(self, question, policy, collection, source, who=None, history=()):
        s = self.settings
        if policy not in POLICIES:
            raise SpecragError(f"policy must be one of {', '.join(POLICIES)}, got '{policy}'")
        question = " ".join((question or "").split())
        if not question:
            raise SpecragError("the question is empty")
        if not self._warm:
            await asyncio.to_thread(self.warm_up)
        t0 = time.perf_counter()
        clock = lambda: (time.perf_counter() - t0) * 1000  # noqa: E731
        timings: dict[str, float] = {}
        asked, rewrite = question, None
        if history:
            rewrite = await followup.rewrite(self.tier("draft"), question, history,
                                             method=s.chat.rewrite, turns=s.chat.history_turns,
                                             max_tokens=s.chat.rewrite_max_tokens,
                                             max_chars=s.security.max_question_chars)
            if rewrite.rewritten:  # from here on everything works on the standalone question
                question = rewrite.standalone
                timings["rewrite"] = rewrite.ms
                yield StageEvent("rewritten", clock(), text=question)
        ret = await self._retrieve(question, collection, source, who)
        timings.update(vector_search=ret.search_ms, retrieval=clock())
        hits = ret.hits
        yield StageEvent("retrieved", clock(), hits=hits)
        run = QuestionRun(self, question, hits, policy, clock, timings, asked=asked)
        if rewrite is not None and rewrite.usage is not None:
            run.usage.append(rewrite.usage)
        if not hits:
            yield run.final(NOT_FOUND, "draft")
            return
        if policy == "routed":
            run.route = route = self.router.route(question, hits)
            timings["route"] = route.ms
            ledger.tag_route(route)  # this question's usage rows carry it
            yield StageEvent("routed", clock(), route=route)
            policy = "lazy" if route.route == "draft" else "heavy-only"
        if policy == "eager":
            run.start_eager()
        try:
            if policy == "heavy-only":
                async for ev in run.heavy_phase():
                    yield ev
                return
            try:
                async for ev in run.draft_phase():
                    yield ev
            except GenerationError as err:
                # a failed draft (its model's worker died, say) is a rejected one: the
                # heavy tier answers, unless the user asked for the draft alone
                if policy == "draft-only":
                    raise
                run.draft_error = one_line(err)
                yield StageEvent("draft_failed", clock(), text=run.draft_error)
                async for ev in run.heavy_phase():
                    yield ev
                return
            accept = run.verdict.accepted and not (run.verdict.abstained
                                                  and s.verify.escalate_abstentions)
            if policy == "draft-only" or accept:
                await run.cancel_eager()
                yield run.final(run.draft.text, "draft")
                return
            async for ev in run.heavy_phase():
                yield ev
        finally:
            await run.cancel_eager()

    async def _retrieve(self, question, collection, source, who):
        k = self.settings.retrieval.top_k
        with self.tracer.stage("retrieval", **{"specrag.top_k": k}) as span:
            ret = await asyncio.to_thread(access.call_as, who, self.retriever.search, question,
                                          k, collection, source)
            where = collection or self.settings.store.collection
            span.set_attributes({"specrag.hits": len(ret.hits), "specrag.encode_ms": ret.encode_ms,
                                 "specrag.search_ms": ret.search_ms,
                                 "db.collection.name": where})
            if ret.search_started_ns:
                self.tracer.child("vector_search", ret.search_started_ns,
                                  ret.search_started_ns + int(ret.search_ms * 1e6),
                                  **{"db.system": "chroma", "db.collection.name": where,
                                     "specrag.top_k": k, "specrag.hits": len(ret.hits)})
            if self.tracer.record_content:
                span.set_attribute("specrag.question", question)
                span.set_attribute("specrag.documents", [h.chunk.text[:1000] for h in ret.hits[:10]])
        return ret
