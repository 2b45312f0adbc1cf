"""The spans of one question, opened by the engine itself at its stage boundaries.

``Tracer(telemetry)`` is what ``SpeculativeRAG`` takes as its tracing hook (built from
its ``telemetry=`` parameter). The engine calls:

- ``with tracer.question(policy, question) as q:`` around the whole question: the root
  span ``specrag.ask`` (policy, session, and from the events ``q.see(event)`` is given:
  verdict score, the tier that answered, cost, tokens, citations), its outcome
  (``specrag.outcome``: the tier, ``error`` or ``cancelled``) and the request metric;
- ``with tracer.stage("retrieval", **attrs) as span:`` around retrieval, verification and
  reranking: a child span and the ``specrag.stage.duration`` metric;
- ``tracer.child("vector_search", start_ns, end_ns, **attrs)``: a span for work that
  reported its own timing (the store query inside the retriever's thread).

The generation calls (``draft``/``heavy`` and one ``chat MODEL`` per attempt) are the
``Telemetry`` observer's (``observe``). With no telemetry every call here is a no-op,
so an engine without tracing pays nothing.

The engine runs each question in its own task (``concurrency.isolated``), so the root
span is current for the whole question, for the threads and tasks it starts, and for
nothing else.

Deliberately not here: providers, exporters and metric names (``telemetry``).
"""

from __future__ import annotations

import contextlib
import time

from specrag.observability.ledger import current_scope


class _NullSpan:
    def set_attribute(self, *_):
        pass

    def set_attributes(self, *_):
        pass


class _Question:
    """What the root span learns from the events as they pass."""

    def __init__(self, span):
        self.span = span
        self.outcome = "error"

    def see(self, ev) -> None:
        if self.span is None:
            return
        if ev.kind == "verdict":
            self.span.set_attributes({"specrag.verdict.score": float(ev.verdict.score),
                                      "specrag.verdict.accepted": bool(ev.verdict.accepted)})
        elif ev.kind == "final":
            a = ev.answer
            self.outcome = a.tier
            self.span.set_attributes({
                "specrag.tier": a.tier, "specrag.cost_usd": a.cost_usd,
                "gen_ai.usage.input_tokens": sum(u.input_tokens for u in a.usage),
                "gen_ai.usage.output_tokens": sum(u.output_tokens for u in a.usage),
                "specrag.citations": len(a.citations)})


class Tracer:
    def __init__(self, telemetry=None):
        self.telemetry = telemetry

    @property
    def record_content(self) -> bool:
        return bool(self.telemetry and self.telemetry.record_content)

    @contextlib.contextmanager
    def question(self, policy: str, question: str):
        if self.telemetry is None:
            yield _Question(None)
            return
        from opentelemetry.trace import Status, StatusCode

        tel = self.telemetry.warm_up()
        attrs = {"specrag.policy": policy, "session.id": current_scope().session}
        if tel.record_content:
            attrs["specrag.question"] = question
        t0 = time.monotonic()
        with tel.tracer.start_as_current_span("specrag.ask", attributes=attrs,
                                              record_exception=False,
                                              set_status_on_exception=False) as span:
            q = _Question(span)
            try:
                yield q
            except GeneratorExit:
                q.outcome = "cancelled"
                raise
            except BaseException as err:
                q.outcome = "cancelled" if type(err).__name__ == "CancelledError" else "error"
                span.set_status(Status(StatusCode.ERROR, str(err)[:200]))
                raise
            finally:
                span.set_attribute("specrag.outcome", q.outcome)
                tel.m["request"].record(time.monotonic() - t0,
                                        {"specrag.outcome": q.outcome, "specrag.policy": policy})

    @contextlib.contextmanager
    def stage(self, name: str, **attrs):
        if self.telemetry is None:
            yield _NullSpan()
            return
        tel = self.telemetry.warm_up()
        t0 = time.monotonic()
        with tel.tracer.start_as_current_span(name, attributes=attrs) as span:
            yield span
        tel.record_stage(name, time.monotonic() - t0)

    def child(self, name: str, start_ns: int, end_ns: int, **attrs) -> None:
        """A span for work done elsewhere that measured itself, under the current span."""
        if self.telemetry is None:
            return
        tel = self.telemetry.warm_up()
        tel.tracer.start_span(name, start_time=start_ns, attributes=attrs).end(end_time=end_ns)
        tel.record_stage(name, (end_ns - start_ns) / 1e9)
