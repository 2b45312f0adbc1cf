"""OpenTelemetry: a span per stage and per attempt with GenAI attributes; metrics; OTEL_* setup."""

import asyncio
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from specrag.observability.telemetry import Telemetry, configure_from_env
from specrag.pipeline.service import Service
from specrag.resilience.failover import FallbackGenerator
from specrag.resilience.retry import RetryingGenerator, RetryPolicy
from specrag.retrieval.retriever import Retrieval
from tests.support.env import make_settings
from tests.support.resilience import (
    HEAVY_TEXT,
    Scripted,
    Sleeps,
    err,
    fake_engine,
    in_memory_telemetry,
    metric_points,
)


def heavy_chain():
    primary = Scripted("anthropic", "claude-sonnet-4-6", [err(529, msg="overloaded"), HEAVY_TEXT],
                       base_url="https://api.anthropic.example:443")
    return FallbackGenerator([RetryingGenerator(primary, RetryPolicy(max_attempts=3),
                                                sleep=Sleeps()),
                              Scripted("openai", "backup", ["never needed [1]"])])


def traced_answer(tmp_path, record_content=False, question="How much annual leave?"):
    s = make_settings(tmp_path, **{"retrieval.rerank": True})  # the span per stage includes rerank
    tel, spans, metrics = in_memory_telemetry(s, record_content)
    engine = fake_engine(s, heavy=heavy_chain()).replace(telemetry=tel)
    answer = asyncio.run(engine.aask(question, policy="lazy"))
    return answer, {sp.name: sp for sp in spans.get_finished_spans()}, spans, metrics


def test_a_span_per_stage_and_per_attempt_with_genai_attributes(tmp_path):
    answer, by_name, spans, _ = traced_answer(tmp_path)
    assert answer.tier == "heavy" and answer.text == HEAVY_TEXT
    root = by_name["specrag.ask"]
    for stage in ("retrieval", "draft", "verify", "rerank", "heavy"):
        assert by_name[stage].parent.span_id == root.context.span_id, stage
        assert by_name[stage].context.trace_id == root.context.trace_id
    assert root.attributes["specrag.policy"] == "lazy"
    assert root.attributes["specrag.outcome"] == "heavy"
    assert root.attributes["specrag.verdict.accepted"] is False
    assert 0 <= root.attributes["specrag.verdict.score"] < 0.8
    assert root.attributes["specrag.cost_usd"] > 0
    heavy = by_name["heavy"]
    assert heavy.attributes["gen_ai.request.model"] == "claude-sonnet-4-6"
    assert heavy.attributes["gen_ai.system"] == "anthropic"
    assert heavy.attributes["gen_ai.usage.output_tokens"] == len(HEAVY_TEXT.split())
    assert heavy.attributes["specrag.attempts"] == 2 and heavy.attributes["specrag.ttft_ms"] >= 0
    chats = [sp for sp in spans.get_finished_spans()
             if sp.name == "chat claude-sonnet-4-6"]
    assert [sp.parent.span_id for sp in chats] == [heavy.context.span_id] * 2
    failed, ok = sorted(chats, key=lambda sp: sp.start_time)
    assert failed.attributes["error.type"] == "529" and not failed.status.is_ok
    assert failed.attributes["http.response.status_code"] == 529
    assert failed.attributes["server.address"] == "api.anthropic.example"
    assert ok.attributes["specrag.attempt.outcome"] == "ok"
    assert ok.attributes["gen_ai.usage.input_tokens"] == 10
    assert failed.end_time <= ok.start_time  # the attempts' real times
    draft_chat = [sp for sp in spans.get_finished_spans() if sp.name == "chat draft-model"]
    assert draft_chat[0].parent.span_id == by_name["draft"].context.span_id
    assert by_name["verify"].attributes["specrag.verdict.threshold"] == answer.verdict.threshold


def test_question_and_documents_only_when_enabled(tmp_path):
    q = "How much annual leave?"
    _, by_name, spans, _ = traced_answer(tmp_path / "a")
    everything = str([dict(sp.attributes) for sp in spans.get_finished_spans()])
    assert q not in everything and "25 days" not in everything
    _, by_name, _, _ = traced_answer(tmp_path / "b", record_content=True)
    assert by_name["specrag.ask"].attributes["specrag.question"] == q
    assert any("25 days" in d for d in by_name["retrieval"].attributes["specrag.documents"])


def test_metrics_for_latency_tokens_and_cost(tmp_path):
    answer, _, _, reader = traced_answer(tmp_path)
    m = metric_points(reader)
    tokens = {(a["gen_ai.token.type"], a["specrag.stage"]): v
              for a, v in m["gen_ai.client.token.usage"]}
    assert tokens[("output", "heavy")][1] == len(HEAVY_TEXT.split())
    outcomes = {(a["gen_ai.system"], a["specrag.attempt.outcome"]): v
                for a, v in m["specrag.attempts"]}
    assert outcomes[("anthropic", "error")] == 1 and outcomes[("anthropic", "ok")] == 1
    assert sum(v for _, v in m["specrag.cost"]) > 0
    stages = {a["specrag.stage"] for a, _ in m["specrag.stage.duration"]}
    assert {"retrieval", "verify", "rerank", "draft", "heavy"} <= stages
    assert [a["specrag.outcome"] for a, _ in m["specrag.request.duration"]] == ["heavy"]
    assert {a["specrag.stage"] for a, _ in m["specrag.ttft"]} == {"draft", "heavy"}
    assert m["gen_ai.client.operation.duration"]


def test_vector_search_span_inside_retrieval(tmp_path):
    class Timed:  # a retriever that reports when its store query ran, as Retriever does
        def __init__(self, inner):
            self.inner = inner

        def warm_up(self):
            return self

        def search(self, query, top_k=None, collection=None, source=None):
            started = time.time_ns()
            ret = self.inner.search(query, top_k, collection, source)
            return Retrieval(query, ret.hits, 1.0, 2.0, started)

    s = make_settings(tmp_path)
    tel, spans, _ = in_memory_telemetry(s)
    engine = fake_engine(s).replace(telemetry=tel)
    engine = engine.replace(retriever=Timed(engine.retriever))
    asyncio.run(engine.aask("How much annual leave?", collection="docs"))
    by_name = {sp.name: sp for sp in spans.get_finished_spans()}
    vs, ret = by_name["vector_search"], by_name["retrieval"]
    assert vs.parent.span_id == ret.context.span_id
    assert vs.attributes["db.collection.name"] == "docs"
    assert vs.end_time - vs.start_time == 2_000_000  # the store's own timing
    assert ret.start_time <= vs.start_time


def test_one_task_hop_per_event_and_no_patched_methods(tmp_path):
    """Tracing and the ledger are parameters: nothing on the engine is replaced, and the
    service runs the engine's events in its own task, not in a task inside a task."""
    s = make_settings(tmp_path)
    tel, spans, _ = in_memory_telemetry(s)
    seen = []

    class Spy(Scripted):
        async def stream(self, messages, **kw):
            seen.append(len(asyncio.all_tasks()))  # the caller's task + the question's
            async for item in super().stream(messages, **kw):
                yield item

    engine = fake_engine(s, draft=Spy("fake", "draft-model", ["Staff get 25 days."]))
    service = Service(s, engine, telemetry=tel)
    answer = asyncio.run(service.aask("How much annual leave?", policy="lazy"))
    assert answer is not None and seen == [2]
    assert asyncio.run(engine.aask("How much annual leave?", policy="lazy")) is not None
    assert seen == [2, 2]  # the bare engine isolates the question the same way
    assert "astream" not in vars(service.engine) and "warm_up" not in vars(service.engine)
    assert service.engine.telemetry is tel and engine.telemetry is None  # a copy, not a patch
    assert [sp.name for sp in spans.get_finished_spans()].count("specrag.ask") == 1


def test_failed_question_marks_the_root_span(tmp_path):
    s = make_settings(tmp_path)
    tel, spans, _ = in_memory_telemetry(s)
    heavy = FallbackGenerator([Scripted("anthropic", "c", [err(401, retryable=False)])])
    engine = fake_engine(s, heavy=heavy).replace(telemetry=tel)
    try:
        asyncio.run(engine.aask("How much annual leave?"))
    except Exception as e:  # noqa: BLE001
        assert "every backend failed" in str(e)
    by_name = {sp.name: sp for sp in spans.get_finished_spans()}
    assert by_name["specrag.ask"].attributes["specrag.outcome"] == "error"
    assert not by_name["specrag.ask"].status.is_ok and not by_name["heavy"].status.is_ok


def test_exporters_come_from_otel_variables():
    assert configure_from_env({}) == (None, None)  # nothing set: nothing exported
    assert configure_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318",
                               "OTEL_SDK_DISABLED": "true"}) == (None, None)
    tp, mp = configure_from_env({"OTEL_TRACES_EXPORTER": "console",
                                 "OTEL_METRICS_EXPORTER": "none"})
    assert tp is not None and mp is None
    tp.shutdown()


def test_otlp_http_export_reaches_a_collector(tmp_path, monkeypatch):
    received = []

    class Collector(BaseHTTPRequestHandler):
        def log_message(self, *_):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            received.append((self.path, self.headers.get("Content-Type"), body))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_SERVICE_NAME": "specrag-test",
           "OTEL_METRICS_EXPORTER": "none"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    s = make_settings(tmp_path)
    tel = Telemetry(s).warm_up()
    try:
        engine = fake_engine(s).replace(telemetry=tel)
        asyncio.run(engine.aask("How much annual leave?"))
        tel.tracer_provider.force_flush()
    finally:
        tel.shutdown()
        server.shutdown()
    paths = [p for p, _, _ in received]
    assert "/v1/traces" in paths
    body = b"".join(b for p, _, b in received if p == "/v1/traces")
    assert b"specrag.ask" in body and b"specrag-test" in body and b"gen_ai.request.model" in body


def test_service_traces_each_question_separately(tmp_path):
    s = make_settings(tmp_path)
    tel, spans, _ = in_memory_telemetry(s)
    svc = Service(s, fake_engine(s), telemetry=tel)

    async def many():
        return await asyncio.gather(*[svc.aask(f"How much annual leave? {i}", session=f"s{i}")
                                      for i in range(6)])

    asyncio.run(many())
    roots = [sp for sp in spans.get_finished_spans() if sp.name == "specrag.ask"]
    assert len(roots) == 6 and len({sp.context.trace_id for sp in roots}) == 6
    assert {sp.attributes["session.id"] for sp in roots} == {f"s{i}" for i in range(6)}
    for sp in spans.get_finished_spans():  # every span sits in one question's trace
        assert sp.context.trace_id in {r.context.trace_id for r in roots}
