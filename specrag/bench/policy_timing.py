"""Stage timings of the same questions under several policies, on the app's own engine.

``specrag bench policy-timing lazy eager lazy eager [--collection handbook]``
builds the engine as the app serves it (``pipeline.build``, the audit off, the prompt
cache off so no policy reuses another's prompt), answers each question once per policy
given, in the order given (repeat a policy to interleave rounds), and prints per
question: draft first token, draft total, heavy first token, total (seconds) and the
tier that answered. Used for the "Eager on two cores" table in BENCHMARKS.md.
``--prompt-cache`` keeps the served prompt cache and prompt states, and the timed rounds
ask ``AGAIN``: other questions about the warm-up questions' chunks.

Deliberately not here: answer quality (``bench e2e``), concurrency (``bench concurrency``).
"""

from __future__ import annotations

from specrag.bench.concurrency import A, B

QUESTIONS = (A, B)  # the handbook questions ``bench concurrency`` asks
# other questions about the same two chunks (``--prompt-cache``: their states are stored)
AGAIN = ("How much paid leave does an employee get per calendar year?",
         "What is the deadline for filing an expense claim?")


def timings(service, policy: str, collection: str, questions=QUESTIONS) -> list[tuple]:
    rows = []
    for q in questions:
        answer = service.ask(q, policy=policy, collection=collection)
        t = answer.timings_ms
        rows.append(tuple(round(t[k] / 1000, 2) if k in t else None
                          for k in ("draft_ttft", "draft", "heavy_ttft", "total")) + (answer.tier,))
    return rows
