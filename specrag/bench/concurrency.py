"""Many users at once: 1, 2, 4, 8 simultaneous sessions against each local runtime.

``specrag bench concurrency [--sessions 1,2,4,8] [--runtimes llama-server/1,llama-server]
[--rounds 2] [--policy draft-only] [--warm] [--max-tokens N] [--out DIR]`` ingests the
sample handbook (``ingest.sample``) into a data folder of its own under ``--out``, then per
runtime sets ``generation.draft`` and ``generation.heavy`` to it (``NAME/SLOTS`` also
sets ``generation.parallel``: ``llama-server/1`` serves one request at a time per model,
as the app did before the server engine; everything else equal) and builds the app's
``Service`` (``pipeline.build.build_service``, the audit
off). Per round, one untimed question loads its models, then it asks every question of
``QUESTIONS`` (one per handbook section, so every prompt differs) in waves of N
sessions started together, for each N, so every session count answers the same
prompts. The prompt cache is off unless ``--warm`` (each first token pays its whole
prefill); with ``--warm`` the collection is warmed (``generation.warm_states``) before
the timed rounds. The admission gate is sized to the largest N, so it is the runtime
that is measured, not the queue.

Per runtime and N: first draft token p50/p95 per user, final answer p50/p95, aggregate
decode tokens/s (output tokens of a wave's sessions over the wave's wall time, the
median wave's), and the first-token and throughput ratios against the runtime's own
single session; ``targets`` checks issue 43's bar at 4 sessions (first token p50 <=
1.5x, throughput >= 1.8x). Rounds alternate between the runtimes, so a change in the
machine's load hits both; each runtime's model processes are ended before the next one
is built, so they never compete for the cores.

Deliberately not here: answer quality (``bench e2e``), faults (``bench chaos``), one
model's raw speed (``bench llm-speed``), remote runtimes.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import time
from pathlib import Path

from specrag.bench.metrics import percentile
from specrag.generators import llama_server
from specrag.ingest.ingestor import Ingestor
from specrag.ingest.sample import SampleKB
from specrag.pipeline.build import build_service

# first ones also asked by ``bench policy-timing``
A = "How many days of paid annual leave do employees get?"
B = "Within how many days must expense claims be submitted?"
QUESTIONS = (A, B,
             "Within how many minutes must the on-call engineer acknowledge a page?",
             "How long must passwords be?",
             "How much does Northwind contribute to the company pension plan?",
             "For how many working days a year may I work from another country?",
             "What are the core working hours?",
             "How many weeks of paid parental leave does the primary caregiver get?")
OPENER = "What is this handbook about?"  # loads the models; not timed
TARGET_SESSIONS, FIRST_TOKEN_MAX, THROUGHPUT_MIN = 4, 1.5, 1.8


def close_local_models() -> None:
    """End every local model process of this process."""
    for server in llama_server.servers():
        server.close()


def runtime_settings(settings, runtime: str, *, warm: bool, max_tokens: int | None,
                     most: int):
    """``settings`` with both tiers on ``runtime`` (``NAME/SLOTS``: that many slots); the
    prompt cache and warming only with ``warm``; the admission gate wide enough for
    ``most`` sessions."""
    name, _, slots = runtime.partition("/")
    values = {"generation.draft": name, "generation.heavy": name,
              "generation.prompt_cache": warm,
              "concurrency.max_concurrent": max(most, settings.concurrency.max_concurrent),
              "concurrency.max_queue": max(most, settings.concurrency.max_queue)}
    if slots:
        values["generation.parallel"] = int(slots)
    if not warm:
        values["generation.warm_states"] = 0
    if max_tokens:
        values["generation.draft_max_tokens"] = max_tokens
    return settings.with_values(**values)


def prepare(settings, out: Path, collection: str = "handbook"):
    """Settings whose data folder is ``out/data`` (models from the usual cache), with the
    sample handbook ingested there into ``collection``."""
    s = settings.with_values(data_dir=str(out / "data"), cache_dir=str(settings.cache_path))
    status = SampleKB(Ingestor(s), collection).ensure()
    if status.startswith("failed"):
        raise RuntimeError(f"the sample handbook was not ingested: {status}")
    return s


async def _ask(service, question: str, session: str, policy: str, collection: str,
               clock, strict: bool = False) -> dict:
    """One session's figures; a failed answer is a row with its ``error`` (left out of
    the figures) unless ``strict``."""
    t0 = clock()
    first = None
    try:
        async for ev in service.astream(question, session=session, policy=policy,
                                        collection=collection):
            if first is None and ev.kind in ("draft_token", "heavy_token"):
                first = clock() - t0
            if ev.kind == "final":
                return _row(question, first, clock() - t0, ev.answer)
    except Exception as err:  # noqa: BLE001 - one failed answer must not lose the run
        if strict:
            raise
        return {"question": question, "error": f"{type(err).__name__}: {str(err)[:200]}",
                "first_s": None, "final_s": clock() - t0, "tokens": 0}
    raise RuntimeError(f"no final answer to {question!r}")


def _row(question: str, first, final, answer) -> dict:
    return {"question": question, "first_s": first, "final_s": final,
            "tokens": sum(u.output_tokens for u in answer.usage),
            "prompt_tokens": sum(u.input_tokens for u in answer.usage),
            "tier": answer.tier, "answer": answer.text[:120],
            # the engine's own stages (retrieval, draft_ttft, verify...), for reading
            "stages_ms": {k: round(v) for k, v in answer.timings_ms.items()}}


async def _wave(service, questions, policy, collection, clock) -> dict:
    t0 = clock()
    rows = await asyncio.gather(*(_ask(service, q, f"user{i}", policy, collection, clock)
                                  for i, q in enumerate(questions)))
    return {"wall_s": clock() - t0, "sessions": list(rows)}


async def measure(service, sessions, rounds: int, policy: str, collection: str,
                  questions=QUESTIONS, clock=time.perf_counter, progress=None) -> dict:
    """``{N: [wave, ...]}``: per round and N, every question in waves of N at once (the
    questions repeat to fill the last wave)."""
    waves: dict[int, list[dict]] = {n: [] for n in sessions}
    for r in range(rounds):
        for n in sessions:
            if progress:
                progress(f"{n} at once" if rounds == 1 else f"round {r + 1}: {n} at once")
            count = -(-len(questions) // n) * n
            asked = [questions[i % len(questions)] for i in range(count)]
            for i in range(0, count, n):
                waves[n].append(await _wave(service, asked[i:i + n], policy, collection,
                                            clock))
    return waves


async def _runtime(service, sessions, rounds, policy, warm, collection, questions, clock,
                   progress):
    """(seconds of the untimed first question, the waves); one event loop for both."""
    t0 = clock()
    await _ask(service, OPENER, "opener", policy, collection, clock, strict=True)
    load_s = clock() - t0
    if warm and getattr(service, "warmer", None) is not None:
        await asyncio.to_thread(service.warmer.wait, 600)  # the collection's prompts
    return load_s, await measure(service, sessions, rounds, policy, collection, questions,
                                 clock, progress)


def _pct(values, q: float) -> float | None:
    p = percentile(values, q)
    return None if p is None else round(p, 3)


def summarize(waves: dict) -> dict:
    """Per N: the figures of the table, ratios against the smallest N (normally one)."""
    rows = {}
    for n, ws in waves.items():
        asked = [s for w in ws for s in w["sessions"]]
        sessions = [s for s in asked if "error" not in s]
        tokens, wall = sum(s["tokens"] for s in sessions), sum(w["wall_s"] for w in ws)
        rows[n] = {"sessions": n, "answers": len(sessions), "failed": len(asked) - len(sessions),
                   "first_p50_s": _pct([s["first_s"] for s in sessions], 50),
                   "first_p95_s": _pct([s["first_s"] for s in sessions], 95),
                   "final_p50_s": _pct([s["final_s"] for s in sessions], 50),
                   "final_p95_s": _pct([s["final_s"] for s in sessions], 95),
                   "tokens": tokens, "wall_s": round(wall, 3),
                   # the median wave's: one wave stalled by other work on the machine
                   # would otherwise weigh on the whole row
                   "tokens_per_s": _pct([sum(s["tokens"] for s in w["sessions"]) / w["wall_s"]
                                         for w in ws if w["wall_s"]], 50)}
    one = rows[min(rows)] if rows else {}
    for row in rows.values():
        row["first_ratio"] = _ratio(row["first_p50_s"], one.get("first_p50_s"))
        row["throughput_ratio"] = _ratio(row["tokens_per_s"], one.get("tokens_per_s"))
    return {"rows": rows, "targets": targets(rows)}


def _ratio(a, b) -> float | None:
    return round(a / b, 2) if a is not None and b else None


def targets(rows: dict) -> dict | None:
    """Issue 43's bar at 4 sessions against one; None when either was not measured."""
    four, one = rows.get(TARGET_SESSIONS), rows.get(1)
    if not four or not one or four["first_ratio"] is None or four["throughput_ratio"] is None:
        return None
    first_ok = four["first_ratio"] <= FIRST_TOKEN_MAX
    throughput_ok = four["throughput_ratio"] >= THROUGHPUT_MIN
    return {"first_ratio": four["first_ratio"], "first_ok": first_ok,
            "throughput_ratio": four["throughput_ratio"], "throughput_ok": throughput_ok,
            "met": first_ok and throughput_ok}


def _machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "load_before": list(os.getloadavg())}


def run(settings, *, runtimes=("llama-server/1", "llama-server"), sessions=(1, 2, 4, 8),
        rounds: int = 2, policy: str = "draft-only", warm: bool = False,
        max_tokens: int | None = None, collection: str = "handbook", questions=QUESTIONS,
        build=None, clock=time.perf_counter, close_models=close_local_models,
        progress=None) -> dict:
    """Round by round, every runtime in turn (a change in the machine's load then hits
    both), each built by ``build`` (default ``build_service``, the audit off), measured,
    closed and its model processes ended before the next."""
    build = build or (lambda s: build_service(s, audit=False))
    sessions = tuple(sorted(set(sessions)))
    result = {"policy": policy, "warm": warm, "rounds": rounds, "sessions": list(sessions),
              "questions": list(questions), "machine": _machine(), "runtimes": {}}
    configured = {rt: runtime_settings(settings, rt, warm=warm, max_tokens=max_tokens,
                                       most=max(sessions)) for rt in runtimes}
    waves = {rt: {n: [] for n in sessions} for rt in runtimes}
    loads: dict[str, list[float]] = {rt: [] for rt in runtimes}
    for r in range(rounds):
        for runtime, s in configured.items():
            say = progress and (lambda m, where=f"round {r + 1}/{rounds}, {runtime}":
                                progress(f"{where}: {m}"))
            service = build(s)
            try:
                service.warm_up()
                # every other round in reverse, so a drift in the machine's load does
                # not always favour the same session count
                order = sessions if r % 2 == 0 else sessions[::-1]
                load_s, got = asyncio.run(_runtime(service, order, 1, policy, warm,
                                                   collection, questions, clock, say))
            finally:
                service.close()
                close_models()
            loads[runtime].append(round(load_s, 2))
            for n, ws in got.items():
                waves[runtime][n] += ws
    for runtime, s in configured.items():
        g = s.generation
        result["runtimes"][runtime] = {
            **summarize(waves[runtime]), "first_question_s": loads[runtime],
            "settings": {"parallel": g.parallel or llama_server.default_parallel(),
                         "threads": g.threads, "draft_max_tokens": g.draft_max_tokens,
                         "prompt_cache": g.prompt_cache, "options": g.options},
            "waves": waves[runtime]}
    result["machine"]["load_after"] = list(os.getloadavg())
    return result


def write(result: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "concurrency.json").write_text(json.dumps(result, indent=1))
    (out / "concurrency.md").write_text(to_markdown(result))


def _f(v, unit: str = "") -> str:
    return "-" if v is None else f"{v:.2f}{unit}"


def to_markdown(result: dict) -> str:
    m = result["machine"]
    lines = [f"{m['cpu']}, {m['cores']} cores; policy {result['policy']}, prompt cache "
             f"{'on (warmed)' if result['warm'] else 'off'}, {result['rounds']} rounds of "
             f"{len(result['questions'])} questions per session count", "",
             "| runtime | sessions | first token p50 / p95 (s) | final p50 / p95 (s) | "
             "tokens/s, all sessions | first token vs 1 | tokens/s vs 1 |",
             "|---|---|---|---|---|---|---|"]
    for runtime, r in result["runtimes"].items():
        for n, row in r["rows"].items():
            lines.append(f"| {runtime} | {n} | {_f(row['first_p50_s'])} / "
                         f"{_f(row['first_p95_s'])} | {_f(row['final_p50_s'])} / "
                         f"{_f(row['final_p95_s'])} | {_f(row['tokens_per_s'])} | "
                         f"{_f(row['first_ratio'], 'x')} | {_f(row['throughput_ratio'], 'x')} |")
    lines.append("")
    for runtime, r in result["runtimes"].items():
        failed = sum(row["failed"] for row in r["rows"].values())
        if failed:
            lines.append(f"- {runtime}: {failed} answers failed (left out of the figures; "
                         "their errors are in the JSON)")
        t = r["targets"]
        if t:
            lines.append(f"- {runtime} at {TARGET_SESSIONS} sessions: first token "
                         f"{t['first_ratio']:.2f}x one session's (target <= {FIRST_TOKEN_MAX}x: "
                         f"{'met' if t['first_ok'] else 'missed'}), throughput "
                         f"{t['throughput_ratio']:.2f}x (target >= {THROUGHPUT_MIN}x: "
                         f"{'met' if t['throughput_ok'] else 'missed'})")
    return "\n".join(lines) + "\n"
