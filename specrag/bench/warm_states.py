"""First questions with and without warmed draft prompts, on the app's own engine.

``specrag bench warm-states [--collection handbook] [--policy lazy]`` builds the engine
as the app serves it (``pipeline.build``, prompt cache on, the audit off) three times: with
``generation.warm_states`` 0, then with it on, each with no stored states (the data
folder's state files are invalidated first), then on again over the files the second
run left (an app restart: nothing to prefill again). Each asks one opening question
(models load, and with warming on the collection is then warmed, timed), then the first turns
of ``followups.HANDBOOK``: questions no one asked before, about chunks no question
drafted from. ``--dataset squad --n N`` asks N questions of that set instead, for a
data folder whose collection holds its passages (a ``bench e2e`` run's ``data``): a
collection of hundreds of chunks, warmed into slot files (``generators.slot_files``). Per
run: draft first token and final answer p50/p95, the warming's seconds and state
size, and how many answers are the same text in both runs (a restored state must
change nothing but the time).

``--during`` measures the other side: questions asked *while* a cold collection warms
(a user who opens the app on a collection ingested a minute ago), ``gap_s`` apart, against
the same questions with warming off. A question that comes mid-prefill is batched with
it by the server engine (the chunk's prefill goes on beside the question).

Deliberately not here: answer quality (``bench e2e``), repeated questions (``bench
policy-timing --prompt-cache``), concurrency (``bench concurrency``).
"""

from __future__ import annotations

import time

from specrag.bench.followups import HANDBOOK
from specrag.bench.metrics import percentile

OPENER = "What is this handbook about?"


def dataset_questions(settings, name: str, n: int) -> list[str]:
    """The first ``n`` questions of a benchmark set (``datasets``), in its sample order."""
    from specrag.datasets import load_dataset

    return [item.question for item in load_dataset(name, settings, n=n).items]


def _s(values: list[float], q: float) -> float | None:
    """The ``q`` percentile of millisecond values, in seconds."""
    p = percentile(values, q)
    return None if p is None else round(p / 1000, 2)


def run(settings, collection: str = "handbook", policy: str = "lazy", warm: int = 1024,
        questions: list[str] | None = None, cold: bool = True, during: bool = False,
        gap_s: float = 2.0) -> dict:
    """One engine, ``generation.warm_states`` = ``warm``: the figures and the answers;
    ``cold``: the stored states are invalidated first (else the files of a run before);
    ``during``: the questions do not wait for the warming, and come ``gap_s`` apart."""
    from specrag.generators.state_folders import invalidate, root_for
    from specrag.pipeline.build import build_service

    s = settings.with_values(**{"generation.prompt_cache": True,
                                "generation.warm_states": warm})
    if cold:
        invalidate(root_for(s.data_path))
    questions = questions or [q for q, _, _ in HANDBOOK]
    service = build_service(s, audit=False).warm_up()
    try:
        service.ask(OPENER, policy=policy, collection=collection)
        warming = {}
        if warm and service.warmer is not None and not during:
            service.warmer.wait()
            warming = service.warmer.report.get(collection, {})
        rows = []
        for question in questions:
            if during:
                time.sleep(gap_s)  # a user reads the answer; the warming goes on meanwhile
            a = service.ask(question, policy=policy, collection=collection)
            rows.append({"question": question, "draft_ttft_ms": a.timings_ms.get("draft_ttft"),
                         "total_ms": a.timings_ms.get("total"), "tier": a.tier,
                         "draft": a.draft.text if a.draft else "", "text": a.text})
    finally:
        service.close()  # stops a warming after its chunk in progress
        for tier in (service.engine.draft, service.engine.heavy):
            tier.close()  # the next run starts its own model servers, cold
    if during and service.warmer is not None:
        warming = service.warmer.report.get(collection, {})  # how far it got meanwhile
    ttft = [r["draft_ttft_ms"] for r in rows if r["draft_ttft_ms"] is not None]
    total = [r["total_ms"] for r in rows]
    return {"warm_states": warm, "cold": cold, "during": during, "warming": warming,
            "questions": len(rows),
            "draft_ttft_p50_s": _s(ttft, 50), "draft_ttft_p95_s": _s(ttft, 95),
            "total_p50_s": _s(total, 50), "total_p95_s": _s(total, 95), "rows": rows}


def compare(settings, collection: str = "handbook", policy: str = "lazy",
            questions: list[str] | None = None) -> dict:
    warm = settings.generation.warm_states or 1024
    off = run(settings, collection, policy, warm=0, questions=questions)
    on = run(settings, collection, policy, warm=warm, questions=questions)
    # new processes over the files the run before left: a restart of the app
    restart = run(settings, collection, policy, warm=warm, questions=questions, cold=False)
    same = sum(a["draft"] == b["draft"] for a, b in zip(off["rows"], on["rows"]))
    return {"collection": collection, "policy": policy, "off": off, "on": on,
            "restart": restart,
            "same_drafts": same, "first_token_ratio": round(
                on["draft_ttft_p50_s"] / off["draft_ttft_p50_s"], 2)
            if off["draft_ttft_p50_s"] and on["draft_ttft_p50_s"] else None}


def compare_during(settings, collection: str = "handbook", policy: str = "lazy",
                   questions: list[str] | None = None, gap_s: float = 2.0) -> dict:
    """The same questions, ``gap_s`` apart, with warming off and while a cold collection
    warms in the background."""
    warm = settings.generation.warm_states or 1024
    off = run(settings, collection, policy, warm=0, questions=questions, during=True,
              gap_s=gap_s)
    during = run(settings, collection, policy, warm=warm, questions=questions, during=True,
                 gap_s=gap_s)
    same = sum(a["draft"] == b["draft"] for a, b in zip(off["rows"], during["rows"]))
    return {"collection": collection, "policy": policy, "off": off, "during": during,
            "same_drafts": same, "first_token_ratio": round(
                during["draft_ttft_p50_s"] / off["draft_ttft_p50_s"], 2)
            if off["draft_ttft_p50_s"] and during["draft_ttft_p50_s"] else None}


def table(result: dict) -> str:
    lines = ["| warm_states | draft first token p50 | p95 | answer p50 | p95 | warming |",
             "|---|---|---|---|---|---|"]
    for key in ("off", "on", "restart", "during"):
        r = result.get(key)
        if r is None:
            continue
        w = r["warming"]
        warming = (f"{w.get('total', 0)} of {w.get('chunks', 0)} chunks held "
                   f"({w.get('warmed', 0)} prefilled, {w.get('restored', 0)} from files), "
                   f"{w.get('seconds', 0)} s, {w.get('state_mb', 0)} MB" if w else "-")
        if r.get("during") and w:
            warming = f"while warming: {w.get('warmed', 0)} prefilled meanwhile"
        label = (f"{r['warm_states']}{'' if r.get('cold', True) else ', after a restart'}"
                 f"{', questions while warming' if r.get('during') and r['warm_states'] else ''}")
        lines.append(f"| {label} | {r['draft_ttft_p50_s']} s | {r['draft_ttft_p95_s']} s"
                     f" | {r['total_p50_s']} s | {r['total_p95_s']} s | {warming} |")
    last = result.get("on") or result["during"]
    lines.append(f"\nsame drafts: {result['same_drafts']} of {last['questions']}; "
                 f"first token {result['first_token_ratio']}x")
    return "\n".join(lines)
