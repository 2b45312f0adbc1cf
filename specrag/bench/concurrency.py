"""What a second user waits while the first one's question runs, on the app's own engine.

``specrag bench concurrency [POLICY] [--collection handbook] [--rounds 3]``
builds the app's ``Service`` (``pipeline.build.build_service``: failover tiers, ledger,
audit, the local model workers), asks question B alone, then question A with B arriving
0.3 s later, ``rounds`` times, and prints the medians of first-token and answer times
for B alone, B behind A, and A. Each answer is printed with its tier, so cross-talk
would show. Set ``SPECRAG_GENERATION__PROMPT_CACHE=false`` for cold prompts (otherwise
llama.cpp reuses the previous prompt's prefix and a repeated question looks instant).

Deliberately not here: load tests with many clients (``bench chaos`` and the gradio
client test in BENCHMARKS.md).
"""

from __future__ import annotations

import asyncio
import statistics
import time

A = "How many days of paid annual leave do employees get?"
B = "Within how many days must expense claims be submitted?"


async def _ask(service, question, session, policy, collection, delay=0.0):
    await asyncio.sleep(delay)
    t0 = time.perf_counter()
    first = None
    async for ev in service.astream(question, session=session, policy=policy,
                                    collection=collection):
        if ev.kind in ("draft_token", "heavy_token") and first is None:
            first = time.perf_counter() - t0
        if ev.kind == "final":
            return first or 0.0, time.perf_counter() - t0, ev.answer
    raise RuntimeError("no final answer")


async def measure(service, policy: str, collection: str, rounds: int) -> dict:
    await _ask(service, B, "warm", policy, collection)
    alone, both = [], []
    for _ in range(rounds):
        alone.append(await _ask(service, B, "b", policy, collection))
        both.append(await asyncio.gather(_ask(service, A, "a", policy, collection),
                                         _ask(service, B, "b", policy, collection, 0.3)))
        a, b = both[-1]
        print(f"A: {a[2].tier}: {a[2].text[:60]!r} | B: {b[2].tier}: {b[2].text[:60]!r}")

    def med(rows, i):
        return round(statistics.median(r[i] for r in rows), 2)

    return {"policy": policy,
            "b_alone": {"first_token_s": med(alone, 0), "answer_s": med(alone, 1)},
            "b_behind_a": {"first_token_s": med([y[1] for y in both], 0),
                           "answer_s": med([y[1] for y in both], 1)},
            "a": {"first_token_s": med([y[0] for y in both], 0),
                  "answer_s": med([y[0] for y in both], 1)}}
