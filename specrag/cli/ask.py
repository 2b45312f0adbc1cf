"""``specrag ask``: render the engine's events on a terminal or as JSON lines.

Human mode streams the draft as it is generated, then the verdict, then the heavy
answer when there is one, the "Sources:" line (the documents and pages the answer came
from, or that no source in the documents supports it) and a timing/cost line. ``--json`` prints one JSON object
per answer; ``--questions FILE`` answers one question per line in one process and
writes JSON lines (the models load once).

Deliberately not here: any pipeline logic (``pipeline.engine``).
"""

from __future__ import annotations

import asyncio
import json
import sys

from specrag.pipeline import heavy_pick
from specrag.pipeline.events import POLICIES
from specrag.pipeline.summary import cost_parts, timing_parts


def add_parsers(sub) -> None:
    p = sub.add_parser("ask", help="answer a question from a collection (speculative RAG)")
    p.add_argument("question", nargs="?")
    p.add_argument("--policy", choices=list(POLICIES))
    p.add_argument("--questions", help="file with one question per line (JSON lines out)")
    p.add_argument("-c", "--collection", default=None)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_ask)


def cmd_ask(args, settings) -> int:
    # heavy: loaded when the command runs (CLI start-up)
    from specrag.pipeline.build import build_service

    if bool(args.question) == bool(args.questions):
        print("specrag: error: give a question or --questions FILE", file=sys.stderr)
        return 2
    # the Service adds retries/failover, the ledger, budgets, tracing and the audit
    engine = build_service(settings)
    try:
        if args.questions:
            with open(args.questions, encoding="utf-8") as fh:
                questions = [q.strip() for q in fh if q.strip()]
            for q in questions:
                answer = engine.ask(q, policy=args.policy, collection=args.collection)
                print(json.dumps(answer.to_dict()), flush=True)
        elif args.json:
            answer = engine.ask(args.question, policy=args.policy, collection=args.collection)
            print(json.dumps(answer.to_dict(), indent=2), flush=True)
        else:
            asyncio.run(_render(engine, args.question, args.policy, args.collection))
    finally:
        engine.close()  # the audit's scoring finishes before the process ends
    return 0


async def _render(engine, question, policy, collection) -> None:
    out = sys.stdout
    async for ev in engine.astream(question, policy=policy, collection=collection):
        if ev.kind == "rewritten":
            out.write(f"searched for: {ev.text}\n")
        elif ev.kind == "retrieved":
            out.write(f"retrieved {len(ev.hits)} chunks in {ev.t_ms:.0f} ms\n")
        elif ev.kind == "routed":
            out.write(f"{ev.route.label}\n")
        elif ev.kind == "draft_token":
            if not getattr(_render, "_in_draft", False):
                out.write("\ndraft · verifying\n")
                _render._in_draft = True
            out.write(ev.text)
        elif ev.kind == "draft_done":
            _render._in_draft = False
            out.write("\n")
        elif ev.kind == "draft_failed":
            _render._in_draft = False
            out.write(f"\ndraft failed: {ev.text}\nthe heavy model answers instead\n")
        elif ev.kind == "verdict":
            v = ev.verdict
            state = "accepted" if v.accepted else "rejected"
            out.write(f"\nverdict: {state}, {v.label} (threshold {v.threshold:.2f}"
                      + (f", P(right) {v.score:.2f} vs {v.answer_threshold:.2f}"
                         if v.answer_threshold is not None else "") + ")\n")
            for s in v.sentences:
                mark = "abstains" if s.abstention else f"{s.score:.2f}"
                out.write(f"  [{mark}] {s.sentence}\n")
        elif ev.kind == "rerank_done":
            r = engine.settings.retrieval
            order = "reranked" if r.rerank else "retrieval order"
            shown = len(heavy_pick.pick(ev.reranked, r))
            out.write(f"\nheavy model answering from the top {shown} "
                      f"of {len(ev.reranked)} chunks ({order})\n")
        elif ev.kind == "heavy_token":
            out.write(ev.text)
        elif ev.kind == "heavy_done":
            out.write("\n")
        elif ev.kind == "heavy_verdict":
            v = ev.verdict
            if not v.abstained:
                out.write(f"heavy answer: {'supported' if v.supported else 'NOT SUPPORTED'} by the "
                          f"documents (grounded {v.grounding:.2f})\n")
        elif ev.kind == "final":
            a = ev.answer
            shown = (a.heavy.text if a.tier == "heavy" and a.heavy else
                     a.draft.text if a.draft else a.text)
            for w in a.warnings:
                out.write(f"\nwarning: {w}")
            if a.text != shown:  # withheld: what streamed above is not the answer
                out.write(f"\nanswer: {a.text}")
            # the documents it came from, or that none supports it (``Answer.sources``)
            out.write(f"\n{a.sources_line}\n" + summary(a) + "\n")
        out.flush()


def summary(answer) -> str:
    """The timing/cost line (``pipeline.summary``'s facts, in seconds) and the citations."""
    route = f", route {answer.route.route} {answer.route.p_draft:.2f}" if answer.route else ""
    parts = [f"answer from the {answer.tier} tier ({answer.policy}{route})"]
    parts += [f"{label} {ms / 1000:.2f}s" for label, ms in timing_parts(answer)]
    cost, heavy_only, _ = cost_parts(answer)
    parts.append(f"cost ${cost:.5f} (heavy-only ${heavy_only:.5f})")
    lines = [" · ".join(parts)]
    for c in answer.citations:
        where = c.source + (f" p.{c.page}" if c.page else "")
        lines.append(f"  [{c.number}] {where}: {' '.join(c.text.split())[:120]}")
    return "\n".join(lines)
