"""Trace the speculative engine without editing it: wrap its parts, wrap its ``astream``.

``instrument(engine, telemetry, observers=[ledger])`` (idempotent) gives every
question a root span ``specrag.ask`` (policy, verdict score, the tier that answered
as ``specrag.outcome``, cost) with children per stage: ``retrieval`` (and inside it
``vector_search``), ``verify``, ``rerank``, and ``draft`` / ``heavy`` with one ``chat
MODEL`` span per attempt (``telemetry``). Parts the engine only builds in
``warm_up`` are wrapped right after it. Each question runs in its own task
(``concurrency.isolated``) so the root span is current for its whole run and for the
tasks and threads the engine starts, and for nothing else.

The wrappers delegate everything they do not trace (``__getattr__``).

Deliberately not here: span and metric conventions (``telemetry``).
"""

from __future__ import annotations

import time

from specrag.observability.ledger import current_scope
from specrag.observability.observe import ObservedGenerator
from specrag.observability.telemetry import Telemetry
from specrag.resilience.concurrency import isolated


class _Traced:
    def __init__(self, inner, telemetry: Telemetry):
        self.inner, self.telemetry = inner, telemetry

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def warm_up(self):
        self.inner.warm_up()
        return self

    def _span(self, name: str, **attrs):
        self.telemetry.warm_up()
        return self.telemetry.tracer.start_as_current_span(name, attributes=attrs)


class TracedStore(_Traced):
    def query(self, collection, vectors, k, *args, **kw):
        t0 = time.monotonic()
        with self._span("vector_search", **{"db.system": "chroma", "db.collection.name": collection,
                                            "specrag.top_k": k}) as span:
            out = self.inner.query(collection, vectors, k, *args, **kw)
            span.set_attribute("specrag.hits", sum(len(h) for h in out))
        self.telemetry.record_stage("vector_search", time.monotonic() - t0)
        return out


class TracedRetriever(_Traced):
    def __init__(self, inner, telemetry):
        super().__init__(inner, telemetry)
        store = getattr(inner, "store", None)
        if store is not None and not isinstance(store, TracedStore):
            inner.store = TracedStore(store, telemetry)  # the retriever calls self.store.query

    def retrieve(self, query, top_k=None, collection=None, source=None):
        t0 = time.monotonic()
        with self._span("retrieval", **{"specrag.top_k": top_k or 0}) as span:
            res = self.inner.retrieve(query, top_k, collection, source)
            span.set_attributes({"specrag.hits": len(res.hits), "specrag.encode_ms": res.encode_ms,
                                 "specrag.search_ms": res.search_ms})
            if collection:
                span.set_attribute("db.collection.name", collection)
            if self.telemetry.record_content:
                span.set_attribute("specrag.question", query)
                span.set_attribute("specrag.documents", [h.chunk.text[:1000] for h in res.hits[:10]])
        self.telemetry.record_stage("retrieval", time.monotonic() - t0)
        return res


class TracedVerifier(_Traced):
    def verify(self, draft, chunks):
        t0 = time.monotonic()
        with self._span("verify", **{"specrag.chunks": len(chunks)}) as span:
            v = self.inner.verify(draft, chunks)
            span.set_attributes({"specrag.verdict.score": float(v.score),
                                 "specrag.verdict.accepted": bool(v.accepted),
                                 "specrag.verdict.threshold": float(v.threshold),
                                 "specrag.verdict.sentences": len(v.sentences)})
            if self.telemetry.record_content:
                span.set_attribute("specrag.draft", draft)
        self.telemetry.record_stage("verify", time.monotonic() - t0)
        return v


class TracedReranker(_Traced):
    def rank(self, query, documents, top_k=None, *args, **kw):
        t0 = time.monotonic()
        with self._span("rerank", **{"specrag.documents.count": len(documents)}):
            out = self.inner.rank(query, documents, top_k, *args, **kw)
        self.telemetry.record_stage("rerank", time.monotonic() - t0)
        return out


_WRAPPERS = {"retriever": TracedRetriever, "verifier": TracedVerifier, "reranker": TracedReranker}


def _wrap_parts(engine, telemetry: Telemetry, observers) -> None:
    for attr, cls in _WRAPPERS.items():
        part = getattr(engine, attr, None)
        if part is not None and not isinstance(part, _Traced):
            setattr(engine, attr, cls(part, telemetry))
    for stage in ("draft", "heavy"):
        gen = getattr(engine, stage, None)
        if gen is None:
            continue
        observed = _find_observed(gen)
        if observed is None:
            observed = ObservedGenerator(gen, stage)
            setattr(engine, stage, observed)
        for obs in (telemetry, *observers):
            observed.add_observer(obs)


def _find_observed(gen, depth: int = 8):
    """The ``ObservedGenerator`` in a stack of wrappers (the engine may wrap ours, e.g.
    for PII redaction, after we wrapped its generator), or None."""
    for _ in range(depth):
        if isinstance(gen, ObservedGenerator):
            return gen
        gen = getattr(gen, "inner", None)
        if gen is None:
            return None
    return None


def instrument(engine, telemetry: Telemetry | None = None, observers=()):
    """Add tracing (and generation ``observers``, e.g. a ledger) to ``engine``; returns it."""
    if getattr(engine, "_specrag_telemetry", None) is not None:
        _wrap_parts(engine, engine._specrag_telemetry, observers)  # new observers only
        return engine
    telemetry = telemetry or Telemetry(engine.settings)
    engine._specrag_telemetry = telemetry
    _wrap_parts(engine, telemetry, observers)
    warm_up, astream = engine.warm_up, engine.astream

    def traced_warm_up():
        warm_up()
        _wrap_parts(engine, telemetry, observers)  # parts built from settings in warm_up
        return engine

    async def traced_astream(question, **kw):
        async for event in isolated(lambda: _root(engine, telemetry, astream, question, kw)):
            yield event

    engine.warm_up, engine.astream = traced_warm_up, traced_astream
    return engine


async def _root(engine, telemetry: Telemetry, astream, question, kw):
    """The whole question under one current span (runs inside its own task)."""
    from opentelemetry.trace import Status, StatusCode

    telemetry.warm_up()
    policy = kw.get("policy") or engine.settings.generation.policy
    where = current_scope()
    attrs = {"specrag.policy": policy, "session.id": where.session}
    if telemetry.record_content:
        attrs["specrag.question"] = question
    t0, outcome = time.monotonic(), "error"
    root = telemetry.tracer.start_as_current_span("specrag.ask", attributes=attrs,
                                                  record_exception=False,
                                                  set_status_on_exception=False)
    with root as span:
        try:
            async for ev in astream(question, **kw):
                if ev.kind == "verdict":
                    span.set_attributes({"specrag.verdict.score": float(ev.verdict.score),
                                         "specrag.verdict.accepted": bool(ev.verdict.accepted)})
                elif ev.kind == "final":
                    a = ev.answer
                    outcome = a.tier
                    span.set_attributes({
                        "specrag.tier": a.tier, "specrag.cost_usd": a.cost_usd,
                        "gen_ai.usage.input_tokens": sum(u.input_tokens for u in a.usage),
                        "gen_ai.usage.output_tokens": sum(u.output_tokens for u in a.usage),
                        "specrag.citations": len(a.citations)})
                yield ev
        except GeneratorExit:
            outcome = "cancelled"
            raise
        except BaseException as err:
            outcome = "cancelled" if type(err).__name__ == "CancelledError" else "error"
            span.set_status(Status(StatusCode.ERROR, str(err)[:200]))
            raise
        finally:
            span.set_attribute("specrag.outcome", outcome)
            telemetry.m["request"].record(time.monotonic() - t0,
                                          {"specrag.outcome": outcome, "specrag.policy": policy})
