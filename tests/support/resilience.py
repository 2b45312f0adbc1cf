"""Scripted generators, a fake clock and in-memory telemetry for the resilience tests.

No sleeping and no models: ``FakeClock``, ``Sleeps`` (records backoff sleeps),
``Scripted`` (a generator following a plan per call), ``err``, ``collect_all``, ``run``;
``ANSWER`` and ``MESSAGES`` (a heavy prompt over one leave chunk and the answer to it);
``fake_engine`` (the real engine with the fakes of ``tests.support.fakes`` and scripted
tiers); ``in_memory_telemetry`` and ``metric_points`` for spans and metrics.

Deliberately not here: the mock HTTP APIs (``specrag.testing.mockapi``) and the retry,
breaker and failover policies under test.
"""

from __future__ import annotations

import asyncio

from specrag.generators.base import GenerationError, Usage
from specrag.pipeline.prompts import build_messages
from specrag.types import Chunk

ANSWER = "Staff get 25 days of annual leave. [1]"
MESSAGES = build_messages("How much leave?", [Chunk("c1", "d1", "leave.md",
                          "Staff get 25 days of annual leave. Extra text.", 0, 0, 10, "h", "v")],
                          "heavy")


class FakeClock:
    """A monotonic clock the test (or a scripted generator) moves by hand."""

    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


class Sleeps:
    """Records backoff sleeps instead of sleeping."""

    def __init__(self):
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def err(status: int | None = None, retryable: bool = True, msg: str = "") -> GenerationError:
    return GenerationError(msg or f"HTTP {status}", retryable=retryable, status=status)


class Scripted:
    """Each call follows the next plan (the last repeats):

    - ``"some text"``: stream it word by word, then a Usage
    - an exception: raise it before the first token
    - ``("some text", exc)``: stream the text, then raise ``exc`` (a cut stream)
    - ``("hang",)``: never produce a token (until cancelled)
    - ``("slow", seconds, "text")``: move ``clock`` on by ``seconds`` before the first token
    """

    def __init__(self, name="remote", model="m1", plans=("ok answer [1]",), clock=None,
                 base_url=""):
        self.name, self.model, self.plans = name, model, list(plans)
        self.clock = clock
        self.base_url = base_url
        self.calls = 0
        self.closed = 0

    def warm_up(self):
        return self

    def _plan(self):
        plan = self.plans[min(self.calls, len(self.plans) - 1)]
        self.calls += 1
        return plan

    async def stream(self, messages, *, max_tokens=256, temperature=0.0):
        plan = self._plan()
        try:
            if isinstance(plan, BaseException):
                raise plan
            tail = None
            if isinstance(plan, tuple) and plan[0] == "hang":
                await asyncio.sleep(3600)
            if isinstance(plan, tuple) and plan[0] == "slow":
                self.clock.advance(plan[1])
                plan = plan[2]
            elif isinstance(plan, tuple):
                plan, tail = plan
            words = plan.split(" ")
            for i, w in enumerate(words):
                await asyncio.sleep(0)
                yield w if i == 0 else " " + w
            if tail is not None:
                raise tail
            yield Usage(self.name, self.model, 10, len(words), 1.0, 2.0)
        except GeneratorExit:
            self.closed += 1
            raise


async def collect_all(gen, messages=None, **kw):
    """(text pieces, usage) of one call."""
    pieces, usage = [], None
    async for item in gen.stream(messages or [{"role": "user", "content": "q"}], **kw):
        if isinstance(item, Usage):
            usage = item
        else:
            pieces.append(item)
    return pieces, usage


def run(coro):
    return asyncio.run(coro)


REJECTED_DRAFT = "Employees receive 40 days of leave and a free car."
HEAVY_TEXT = "Pages are acknowledged within 15 minutes [1]."


def fake_engine(settings, heavy=None, draft=None):
    """The real engine with fake retrieval, scorer and reranker (``tests.support.fakes``)."""
    from specrag.grounding.verifier import Verifier
    from specrag.pipeline.engine import SpeculativeRAG
    from tests.support.fakes import FakeRetriever, ReverseReranker, WordScorer

    draft = draft or Scripted("fake", "draft-model", [REJECTED_DRAFT])
    heavy = heavy or Scripted("anthropic", "claude-sonnet-4-6", [HEAVY_TEXT])
    return SpeculativeRAG(settings, retriever=FakeRetriever(), draft=draft, heavy=heavy,
                          verifier=Verifier(settings, scorer=WordScorer()),
                          reranker=ReverseReranker())


def in_memory_telemetry(settings, record_content=False):
    """A ``Telemetry`` exporting to memory: (telemetry, span exporter, metric reader)."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from specrag.observability.telemetry import Telemetry

    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    tel = Telemetry(settings, tracer_provider=tp, meter_provider=MeterProvider(metric_readers=[reader]),
                    record_content=record_content)
    return tel, exporter, reader


def metric_points(reader) -> dict:
    """metric name -> list of (attributes, value-or-sum-or-count)."""
    out: dict = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                for p in m.data.data_points:
                    value = getattr(p, "value", None)
                    if value is None:
                        value = (p.count, p.sum)
                    out.setdefault(m.name, []).append((dict(p.attributes), value))
    return out
