"""OpenTelemetry for specrag: providers from ``OTEL_*``, GenAI spans and metrics.

``Telemetry(settings).warm_up()`` picks its tracer and meter providers:

1. the ones passed in (tests pass an in-memory exporter),
2. else, when the standard variables ask for an exporter, SDK providers built here:
   ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``..._TRACES_/..._METRICS_ENDPOINT``) set means
   OTLP (``OTEL_EXPORTER_OTLP_PROTOCOL``: ``http/protobuf``, the default, or ``grpc``);
   ``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER`` may say ``otlp``, ``console`` or
   ``none``; ``OTEL_SDK_DISABLED=true`` turns it all off; ``OTEL_SERVICE_NAME`` and
   ``OTEL_RESOURCE_ATTRIBUTES`` name the service (default ``specrag``),
3. else the global ones: no-ops unless the application configured OpenTelemetry.

It is also an observer of generation calls (``observe``): one span per stage call
(``draft`` / ``heavy``) with GenAI semantic-convention attributes, TTFT and the number
of attempts, and one child ``chat MODEL`` client span per attempt (retries and
failovers, with ``error.type``), drawn from the attempt records with their real
start and end times. Metrics: ``gen_ai.client.operation.duration``,
``gen_ai.client.token.usage``, ``specrag.ttft``, ``specrag.cost``,
``specrag.attempts``, ``specrag.stage.duration``, ``specrag.request.duration``.

Question and document text go on spans only with ``telemetry.record_content``.

Deliberately not here: the spans the engine opens at its stages (``tracing``).
"""

from __future__ import annotations

import os
import time
from urllib.parse import urlparse

from specrag.generators import costs
from specrag.generators.base import Usage

NAME = "specrag"
INSTALL = ("OpenTelemetry export needs the SDK and an exporter: pip install opentelemetry-sdk "
           "opentelemetry-exporter-otlp-proto-http (or -proto-grpc)")


def _exporter_names(value: str | None, endpoint_set: bool) -> list[str]:
    if not value:
        return ["otlp"] if endpoint_set else []  # nothing is exported unless asked for
    return [v.strip() for v in value.split(",") if v.strip() and v.strip() != "none"]


def configure_from_env(env=None):
    """(tracer_provider, meter_provider) built from ``OTEL_*``; ``None`` where not asked for."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None, None
    base = bool(env.get("OTEL_EXPORTER_OTLP_ENDPOINT"))
    traces = _exporter_names(env.get("OTEL_TRACES_EXPORTER"),
                             base or bool(env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")))
    metrics = _exporter_names(env.get("OTEL_METRICS_EXPORTER"),
                              base or bool(env.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")))
    if not traces and not metrics:
        return None, None
    try:
        from opentelemetry.sdk.resources import Resource
    except ImportError as err:  # pragma: no cover - the SDK comes with chromadb
        raise ImportError(INSTALL) from err
    resource = Resource.create({} if env.get("OTEL_SERVICE_NAME") else {"service.name": NAME})
    tp = mp = None
    if traces:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        tp = TracerProvider(resource=resource)
        for name in traces:
            tp.add_span_processor(BatchSpanProcessor(_exporter("trace", name, env)))
    if metrics:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        mp = MeterProvider(resource=resource, metric_readers=[
            PeriodicExportingMetricReader(_exporter("metric", n, env)) for n in metrics])
    return tp, mp


def _exporter(signal: str, name: str, env):
    try:
        if name == "console":
            if signal == "trace":
                from opentelemetry.sdk.trace.export import ConsoleSpanExporter
                return ConsoleSpanExporter()
            from opentelemetry.sdk.metrics.export import ConsoleMetricExporter
            return ConsoleMetricExporter()
        if name != "otlp":
            raise ValueError(f"OTEL_{'TRACES' if signal == 'trace' else 'METRICS'}_EXPORTER: "
                             f"'{name}' is not supported (otlp, console, none)")
        key = "TRACES" if signal == "trace" else "METRICS"
        proto = env.get(f"OTEL_EXPORTER_OTLP_{key}_PROTOCOL") or env.get(
            "OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf"
        kind = "grpc" if proto == "grpc" else "http"
        if signal == "trace":
            mod = __import__(f"opentelemetry.exporter.otlp.proto.{kind}.trace_exporter",
                             fromlist=["OTLPSpanExporter"])
            return mod.OTLPSpanExporter()
        mod = __import__(f"opentelemetry.exporter.otlp.proto.{kind}.metric_exporter",
                         fromlist=["OTLPMetricExporter"])
        return mod.OTLPMetricExporter()
    except ImportError as err:
        raise ImportError(INSTALL) from err


class Telemetry:
    def __init__(self, settings=None, *, tracer_provider=None, meter_provider=None,
                 record_content: bool | None = None, env=None):
        t = getattr(settings, "telemetry", None)
        self.enabled = t.enabled if t else True
        self.record_content = record_content if record_content is not None else (
            t.record_content if t else False)
        self.prices = settings.generation.prices if settings else {}
        self.tracer_provider, self.meter_provider = tracer_provider, meter_provider
        self.env = env
        self._owned = False  # providers built here are flushed by ``shutdown``
        self.tracer = self.meter = None
        self.m: dict = {}

    def warm_up(self) -> "Telemetry":
        if self.tracer is not None:
            return self
        from opentelemetry import metrics, trace

        if self.enabled and self.tracer_provider is None and self.meter_provider is None:
            self.tracer_provider, self.meter_provider = configure_from_env(self.env)
            self._owned = bool(self.tracer_provider or self.meter_provider)
        if not self.enabled:
            self.tracer_provider = trace.NoOpTracerProvider()
            self.meter_provider = metrics.NoOpMeterProvider()
        self.tracer = trace.get_tracer(NAME, tracer_provider=self.tracer_provider)
        meter = self.meter = metrics.get_meter(NAME, meter_provider=self.meter_provider)
        h, c = meter.create_histogram, meter.create_counter
        self.m = {
            "op": h("gen_ai.client.operation.duration", "s", "GenAI operation duration"),
            "tokens": h("gen_ai.client.token.usage", "{token}", "tokens used per attempt"),
            "ttft": h("specrag.ttft", "s", "time to first token of a stage, as the caller saw it"),
            "cost": c("specrag.cost", "USD", "spend on generation"),
            "attempts": c("specrag.attempts", "{attempt}", "generation attempts by outcome"),
            "stage": h("specrag.stage.duration", "s", "duration of a pipeline stage"),
            "request": h("specrag.request.duration", "s", "duration of a whole question"),
        }
        return self

    def shutdown(self) -> None:
        if self._owned:
            for p in (self.tracer_provider, self.meter_provider):
                if p is not None:
                    p.shutdown()

    # -- generation calls: the observer protocol -----------------------------------------
    def call_started(self, stage: str, gen, request: dict):
        self.warm_up()
        span = self.tracer.start_span(stage, attributes={
            "specrag.stage": stage, "gen_ai.operation.name": "chat",
            "gen_ai.system": gen.name, "gen_ai.provider.name": gen.name,
            "gen_ai.request.model": gen.model,
            "gen_ai.request.max_tokens": request["max_tokens"],
            "gen_ai.request.temperature": request["temperature"]})
        return span, time.monotonic()

    def call_finished(self, state, outcome) -> None:
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        span, t0 = state
        ctx = trace.set_span_in_context(span)
        tried = [a for a in outcome.attempts if a.outcome != "skipped"]
        for n, a in enumerate(tried, 1):
            attrs = _attempt_attributes(a, n)
            end = a.started_ns + int(a.latency_ms * 1e6)
            child = self.tracer.start_span(f"chat {a.model}", context=ctx, kind=SpanKind.CLIENT,
                                           start_time=a.started_ns, attributes=attrs)
            if a.outcome not in ("ok", "cancelled"):
                child.set_status(Status(StatusCode.ERROR, a.error[:200]))
            child.end(end_time=end)
            self._attempt_metrics(outcome.stage, a, attrs)
        for a in outcome.attempts:
            if a.outcome == "skipped":
                span.add_event("backend skipped", {"gen_ai.system": a.backend,
                                                   "gen_ai.request.model": a.model,
                                                   "specrag.reason": a.error})
        u = outcome.usage
        span.set_attribute("specrag.attempts", len(tried))
        span.set_attribute("specrag.cancelled", outcome.cancelled)
        if outcome.ttft_ms is not None:
            span.set_attribute("specrag.ttft_ms", round(outcome.ttft_ms, 2))
            self.m["ttft"].record(outcome.ttft_ms / 1000, {"specrag.stage": outcome.stage})
        if u is not None:
            span.set_attributes({"gen_ai.response.model": u.model,
                                 "specrag.response.backend": u.backend,
                                 "gen_ai.usage.input_tokens": u.input_tokens,
                                 "gen_ai.usage.output_tokens": u.output_tokens,
                                 "specrag.fallback_used": bool(tried) and tried[0].outcome != "ok"})
        if outcome.error is not None:
            span.set_attribute("error.type", type(outcome.error).__name__)
            span.set_status(Status(StatusCode.ERROR, str(outcome.error)[:200]))
        self.m["stage"].record(time.monotonic() - t0, {"specrag.stage": outcome.stage})
        span.end()

    def _attempt_metrics(self, stage: str, a, attrs: dict) -> None:
        base = {"gen_ai.operation.name": "chat", "gen_ai.system": a.backend,
                "gen_ai.request.model": a.model, "specrag.stage": stage}
        if "error.type" in attrs:
            base["error.type"] = attrs["error.type"]
        self.m["op"].record(a.latency_ms / 1000, base)
        self.m["attempts"].add(1, {**base, "specrag.attempt.outcome": a.outcome})
        for kind, n in (("input", a.input_tokens), ("output", a.output_tokens)):
            if n:
                self.m["tokens"].record(n, {**base, "gen_ai.token.type": kind})
        spent = costs.cost(_usage(a), self.prices)
        if spent:
            self.m["cost"].add(spent, {"gen_ai.request.model": a.model, "specrag.stage": stage})

    # -- other stages ------------------------------------------------------------------
    def record_stage(self, stage: str, seconds: float) -> None:
        self.warm_up()
        self.m["stage"].record(seconds, {"specrag.stage": stage})

    def record_rejection(self, outcome: str, reason: str, session: str = "") -> None:
        """A question turned away before the engine ran (busy, over budget)."""
        from opentelemetry.trace import Status, StatusCode

        self.warm_up()
        span = self.tracer.start_span("specrag.ask", attributes={
            "specrag.outcome": outcome, "session.id": session})
        span.set_status(Status(StatusCode.ERROR, reason[:200]))
        span.end()
        self.m["request"].record(0.0, {"specrag.outcome": outcome})


def _usage(a):
    return Usage(a.backend, a.model, a.input_tokens, a.output_tokens)


def _attempt_attributes(a, number: int) -> dict:
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.system": a.backend,
             "gen_ai.provider.name": a.backend, "gen_ai.request.model": a.model,
             "gen_ai.usage.input_tokens": a.input_tokens,
             "gen_ai.usage.output_tokens": a.output_tokens,
             "specrag.attempt.number": number, "specrag.attempt.outcome": a.outcome,
             "specrag.attempt.retryable": a.retryable,
             "specrag.attempt.latency_ms": round(a.latency_ms, 2)}
    if a.ttft_ms is not None:
        attrs["specrag.ttft_ms"] = round(a.ttft_ms, 2)
    if a.endpoint:
        url = urlparse(a.endpoint)
        if url.hostname:
            attrs["server.address"] = url.hostname
        if url.port:
            attrs["server.port"] = url.port
    if a.status is not None:
        attrs["http.response.status_code"] = a.status
    if a.outcome not in ("ok", "cancelled"):
        attrs["error.type"] = str(a.status) if a.status else a.outcome
    return attrs
