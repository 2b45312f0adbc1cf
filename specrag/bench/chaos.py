"""Chaos benchmark: answers keep coming while the heavy tier fails, and under concurrency.

``run(settings, n=200, fault_rate=0.3, sessions=20)`` writes ``chaos.json`` and
``chaos.md`` to ``out_dir`` (default ``bench-results/chaos``):

1. **Faults.** The heavy tier is the chain ``anthropic:claude-sonnet-4-6`` (the local
   mock server speaking the Messages API, through the real SDK) -> ``openai:backup`` (a
   second mock endpoint, OpenAI chat API) -> a local stand-in for the quantized local
   model (no faults). Both remote endpoints fail ``fault_rate`` of their requests at
   random (seeded): 429, 500, 529, hang, slow first token, cut stream, malformed JSON
   (the OpenAI endpoint without ``cut``, see ``OPENAI_FAULTS``). ``n`` questions go
   through ``resilience.Service`` (admission gate, ledger, tracing), 8 at a time, with
   a draft that abstains so every question reaches the heavy tier. Each answer is
   compared word for word with what the mock's deterministic responder says: a
   failed, truncated or duplicated answer counts as failed. The same questions without
   faults are the baseline for the latency the faults add. Also reported: who
   answered, every attempt's outcome, breaker transitions, and that the ledger and the
   spans hold one record per attempt.
2. **Sessions.** ``sessions`` concurrent ``gradio_client`` sessions ask through the
   app's ``/chat`` endpoint (``ui.app.build(settings, engine=service)``), same faults:
   errors and p50/p95 latency.

Timeouts are scaled down (first token 4 s, breaker open 2 s, backoff 0.1-1 s) so a
run takes minutes; retrieval, verifier and reranker are stand-ins (``chaos_parts``).

Deliberately not here: real models or real network conditions (loopback only).
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import shutil
import socket
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from specrag.grounding.verifier import Verifier
from specrag.observability.telemetry import Telemetry
from specrag.pipeline.engine import SpeculativeRAG
from specrag.pipeline.service import Service
from specrag.resilience.chains import tier_from_settings
from specrag.testing import FakeGenerator
from specrag.testing.chaos_parts import Corpus, KeepOrder, LocalStandIn, WordRetriever, WordScorer
from specrag.testing.mockapi import FAULTS, MockAPI

# specrag's OpenAI-compatible client takes a stream cut before [DONE] for a short,
# successful answer (no error to retry on): injecting ``cut`` there would measure that
# client bug (reported separately), not the resilience layer.
OPENAI_FAULTS = tuple(f for f in FAULTS if f != "cut")
KEY_ENV = "SPECRAG_CHAOS_KEY"


def percentiles(values) -> dict:
    ordered = sorted(values)
    if not ordered:
        return {}

    def q(p):
        return round(ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))], 1)

    return {"p50_ms": q(0.5), "p95_ms": q(0.95), "p99_ms": q(0.99), "max_ms": q(1.0),
            "mean_ms": round(sum(ordered) / len(ordered), 1)}


def _mocks(fault_rate: float, seed: int):
    opts = dict(fault_rate=fault_rate, seed=seed, hang_s=8.0, slow_s=2.5, token_delay_s=0.002)
    return MockAPI(**opts).start(), MockAPI(**{**opts, "seed": seed + 1},
                                            faults=OPENAI_FAULTS).start()


def bench_settings(settings, data_dir: Path, claude: MockAPI, backup: MockAPI):
    return settings.with_values(**{
        "data_dir": str(data_dir), "anthropic_api_key_env": KEY_ENV,
        "generation.anthropic_base_url": claude.url, "generation.policy": "lazy",
        "resilience.heavy_chain": ["anthropic:claude-sonnet-4-6",
                                   f"openai:backup@{backup.url}/v1", "fake:local-standin"],
        "resilience.max_attempts": 3, "resilience.backoff_base_s": 0.1,
        "resilience.backoff_max_s": 1.0, "resilience.first_token_timeout_s": 4.0,
        "resilience.total_timeout_s": 30.0, "resilience.breaker_open_s": 2.0,
        "concurrency.max_concurrent": 8, "concurrency.max_queue": 1000,
        "concurrency.queue_timeout_s": 600.0})


def build_service(settings, corpus: Corpus, telemetry=None):
    """A ``Service`` over the real engine and a real heavy chain; stand-ins elsewhere."""
    heavy = tier_from_settings("heavy", settings, overrides={"fake:local-standin": LocalStandIn()})
    draft = FakeGenerator("draft-standin", replies=["The documents do not say."])
    engine = SpeculativeRAG(settings, retriever=WordRetriever(corpus), draft=draft, heavy=heavy,
                            verifier=Verifier(settings, scorer=WordScorer()), reranker=KeepOrder())
    return Service(settings, engine, telemetry=telemetry), heavy


def _memory_telemetry(settings):
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


    spans, tp = InMemorySpanExporter(), TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(spans))
    return Telemetry(settings, tracer_provider=tp), spans


async def _ask_all(service, corpus: Corpus, n: int, concurrency: int):
    sem = asyncio.Semaphore(concurrency)

    async def one(k):
        async with sem:
            t0 = time.perf_counter()
            try:
                answer, error = await service.aask(corpus.question(k), session=f"chaos-{k % 20}"), ""
            except Exception as err:  # noqa: BLE001 - a failed user answer, counted
                answer, error = None, f"{type(err).__name__}: {err}"[:300]
            return k, answer, error, (time.perf_counter() - t0) * 1000

    return await asyncio.gather(*(one(k) for k in range(n)))


def fault_phase(settings, out: Path, n: int, fault_rate: float, seed: int, concurrency: int = 8,
                label: str = "faults") -> dict:
    corpus = Corpus()
    claude, backup = _mocks(fault_rate, seed)
    try:
        s = bench_settings(settings, _fresh(settings, label), claude, backup)
        telemetry, spans = _memory_telemetry(s)
        service, heavy = build_service(s, corpus, telemetry)
        t0, m0 = time.perf_counter(), time.monotonic()  # m0: the breakers' clock
        results = asyncio.run(_ask_all(service, corpus, n, concurrency))
        wall = time.perf_counter() - t0
    finally:
        claude.stop()
        backup.stop()
    failed = [{"question": corpus.question(k), "error": e or f"wrong answer: {a.text!r}"}
              for k, a, e, _ in results if e or a.text != corpus.expected(k)]
    heavy_usage = [a.heavy.usage for _, a, _, _ in results if a and a.heavy]
    attempts = [x for u in heavy_usage for x in getattr(u, "attempts", ())]
    tried = [x for x in attempts if x.outcome != "skipped"]
    rows = [r for r in service.ledger.rows() if r["stage"] == "heavy"]
    chat_spans = [sp for sp in spans.get_finished_spans() if sp.name.startswith("chat ")
                  and sp.attributes.get("gen_ai.request.model") != "draft-standin"]
    return {
        "questions": n, "failed_answers": len(failed), "failures": failed[:10],
        "wall_s": round(wall, 1), "latency": percentiles([ms for *_, ms in results]),
        "answered_by": dict(Counter(f"{u.backend}/{u.model}" for u in heavy_usage)),
        "attempts": dict(Counter(f"{x.backend}:{x.outcome}" for x in attempts)),
        "attempt_errors": dict(Counter(f"{x.backend}:{_kind(x)}" for x in tried if not x.ok)),
        "faults_injected": {"anthropic": dict(Counter(r["fault"] or "none" for r in claude.requests)),
                            "openai": dict(Counter(r["fault"] or "none" for r in backup.requests))},
        "breakers": {b.name: [{"t_s": round(t.at - m0, 1), "to": t.new, "reason": t.reason}
                              for t in b.transitions] for b in heavy.breakers},
        "records": {"attempts_tried": len(tried), "ledger_rows": len(rows),
                    "chat_spans": len(chat_spans)},
        "cost_usd": round(sum(a.cost_usd for _, a, _, _ in results if a), 6),
    }


def _kind(a) -> str:
    """A short name for why an attempt failed."""
    if a.status:
        return str(a.status)
    if a.outcome != "error":
        return a.outcome
    text = a.error.lower()
    for key, label in (("malformed", "malformed stream"), ("ended early", "stream cut"),
                       ("connection", "connection"), ("timeout", "timeout")):
        if key in text:
            return label
    return a.error[:40]


def _fresh(settings, label: str) -> Path:
    """An empty data dir per phase (its own ledger) under DATA_DIR/bench/chaos."""
    path = settings.data_path / "bench" / "chaos" / label
    shutil.rmtree(path, ignore_errors=True)
    return path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def sessions_phase(settings, out: Path, sessions: int, per_session: int, fault_rate: float,
                   seed: int, build_app) -> dict:
    """Concurrent gradio_client sessions against the app's /chat endpoint; ``build_app`` is
    ``ui.app.build`` (the UI sits above the benchmarks: its caller hands it down)."""
    from gradio_client import Client  # heavy: Gradio's client, for this phase only

    corpus = Corpus()
    claude, backup = _mocks(fault_rate, seed + 10)
    s = bench_settings(settings, _fresh(settings, "sessions"), claude, backup)
    service, _ = build_service(s, corpus)
    demo = build_app(s, engine=service, sample=False)
    port = _free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                share=False)

    def session(i):
        client, got = Client(f"http://127.0.0.1:{port}/", verbose=False), []
        for j in range(per_session):
            k = i * per_session + j
            t0 = time.perf_counter()
            try:
                res = client.predict(corpus.question(k), "chaos", "", api_name="/chat")
                error = "" if res["answer"] == corpus.expected(k) else f"wrong: {res['answer']!r}"
            except Exception as err:  # noqa: BLE001 - counted as an error
                error = f"{type(err).__name__}: {err}"[:300]
            got.append(((time.perf_counter() - t0) * 1000, error))
        return got

    try:
        t0 = time.perf_counter()
        with ThreadPoolExecutor(sessions) as pool:
            results = [r for got in pool.map(session, range(sessions)) for r in got]
        wall = time.perf_counter() - t0
    finally:
        demo.close()
        claude.stop()
        backup.stop()
    errors = [e for _, e in results if e]
    return {"sessions": sessions, "requests": len(results), "errors": len(errors),
            "error_samples": errors[:5], "wall_s": round(wall, 1), "endpoint": "/chat",
            "latency": percentiles([ms for ms, _ in results])}


def run(settings, n: int = 200, fault_rate: float = 0.3, sessions: int = 20, per_session: int = 3,
        out_dir: str | None = None, seed: int = 0, build_app=None) -> dict:
    """Both fault phases, then (``sessions`` > 0, with ``build_app``) the app's sessions."""
    os.environ.setdefault(KEY_ENV, "sk-chaos-local")  # the mock accepts any key
    out = Path(out_dir or "bench-results/chaos")
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    baseline = fault_phase(settings, out, n, 0.0, seed, label="baseline")
    faults = fault_phase(settings, out, n, fault_rate, seed)
    added = {k: round(faults["latency"][k] - baseline["latency"][k], 1) for k in baseline["latency"]}
    report = {"benchmark": "chaos", "n": n, "fault_rate": fault_rate, "seed": seed,
              "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
              "baseline": baseline, "faults": faults, "added_latency": added}
    if sessions:
        if build_app is None:
            raise ValueError("the sessions phase needs the app's builder (build_app)")
        report["sessions"] = sessions_phase(settings, out, sessions, per_session, fault_rate,
                                            seed, build_app)
    report["total_s"] = round(time.time() - started, 1)
    (out / "chaos.json").write_text(json.dumps(report, indent=2))
    (out / "chaos.md").write_text(markdown(report))
    return report


def _breaker_line(name: str, ts: list) -> str:
    n = Counter(t["to"] for t in ts)
    first = next((t for t in ts if t["to"] == "open"), None)
    why = f" (first at {first['t_s']} s: {first['reason']})" if first else ""
    return (f"{name.split('@')[0]} opened {n['open']}x, half-open {n['half-open']}x, "
            f"closed {n['closed']}x{why}")


def markdown(r: dict) -> str:
    f, b = r["faults"], r["baseline"]
    lat = lambda d: " / ".join(f"{d[k]:.0f}" for k in ("p50_ms", "p95_ms", "p99_ms"))  # noqa: E731
    lines = [f"# Chaos benchmark\n\n{r['n']} questions, {r['fault_rate']:.0%} injected faults on "
             "each remote heavy endpoint (seed "
             f"{r['seed']}); chain Claude (mock, Messages API) -> OpenAI-compatible backup (mock) "
             "-> local stand-in.\n",
             "| run | failed answers | p50 / p95 / p99 ms | wall s |", "|---|---|---|---|",
             f"| no faults | {b['failed_answers']} | {lat(b['latency'])} | {b['wall_s']} |",
             f"| faults | {f['failed_answers']} | {lat(f['latency'])} | {f['wall_s']} |",
             f"| **added by faults** | | {lat(r['added_latency'])} | |\n",
             f"Answered by: {f['answered_by']}  ", f"Attempts: {f['attempts']}  ",
             f"Failed attempts by cause: {f['attempt_errors']}  ",
             f"Faults injected: {f['faults_injected']}  ",
             f"Records: {f['records']} (ledger rows and chat spans = attempts tried)\n",
             "Breakers: " + "; ".join(_breaker_line(name, ts) for name, ts in f["breakers"].items()
                                      if ts) + "\n"]
    if "sessions" in r:
        s = r["sessions"]
        lines.append(f"## {s['sessions']} concurrent gradio_client sessions ({s['endpoint']})\n\n"
                     f"{s['requests']} requests, {s['errors']} errors, p50 "
                     f"{s['latency']['p50_ms']:.0f} ms, p95 {s['latency']['p95_ms']:.0f} ms, "
                     f"wall {s['wall_s']} s.\n")
    return "\n".join(lines)
