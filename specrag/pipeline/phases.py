"""One question's phases: draft and verify, rerank and heavy, and the ``Answer``.

``QuestionRun(engine, question, hits, policy, clock, timings)`` holds the state of one
question while ``SpeculativeRAG._stages`` walks it through the policy: ``draft_phase``
(stream the draft from ``draft_k`` hits, the reranker's best of the first
``draft_pool``, ``draft_pick``; then verify it against the top
``verify_k``; a sentence that rules the draft out stops it early, ``pipeline.early``),
``heavy_phase`` (rerank the broad set, stream the heavy answer from the top ``heavy_k``
less those the reranker calls irrelevant, ``heavy_pick``;
each prompt chunk cut to ``draft_words`` / ``heavy_words`` about the question when set,
``prompts.cut_for``) and, under ``eager``, ``start_eager`` / ``cancel_eager`` (rerank and
heavy generation started beside the draft, into a bounded buffer). ``final`` makes the
``Answer``: citations, sources (``provenance``), usage, cost and what heavy-only would
have cost.

Deliberately not here: which phases run (the policy, ``engine``) and the parts
themselves (the engine's retriever, tiers, verifier and reranker).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace

from specrag.generators import costs
from specrag.generators.base import Usage
from specrag.pipeline import draft_pick, heavy_pick, provenance
from specrag.pipeline.early import SentenceWatch
from specrag.pipeline.events import Answer, Draft, Generation, HeavyAnswer, StageEvent
from specrag.pipeline.prompts import NOT_FOUND, build_messages, cut_for
from specrag.retrieval.fusion import fuse_orders
from specrag.security import injection, redacting
from specrag.types import Hit


class QuestionRun:
    """The state of one question; the engine's phases as small async steps."""

    def __init__(self, engine, question: str, hits: tuple[Hit, ...], policy: str,
                 clock, timings: dict[str, float], asked: str | None = None):
        self.e, self.s = engine, engine.settings
        self.question, self.hits, self.policy = question, hits, policy
        self.asked = asked or question  # ``question`` is its standalone rewrite, if any
        self.clock, self.timings = clock, timings
        self.draft: Draft | None = None
        self.verdict = None
        self.heavy: HeavyAnswer | None = None
        self.reranked: tuple[Hit, ...] = ()
        self.usage: list[Usage] = []
        self._rerank_task: asyncio.Task | None = None
        self._heavy_task: asyncio.Task | None = None
        self._heavy_queue: asyncio.Queue | None = None
        self._heavy_first_at: float | None = None  # eager: when the model's first token came
        self.heavy_cancelled = False
        self.heavy_verdict = None
        self.draft_error = ""
        self.route = None  # the router's decision (``routed``); the policy stays "routed"
        self.early_rejected = None  # the sentence that stopped the draft (``pipeline.early``)

    # -- draft and verify ------------------------------------------------------------
    async def draft_phase(self):
        r = self.s.retrieval
        start = self.clock()
        with self.e.tracer.stage("draft_pick", **{"specrag.documents.count": r.draft_pool}):
            picked = await asyncio.to_thread(draft_pick.pick, self.question, self.hits, r,
                                             self.e.reranker)
        self.timings["draft_pick"] = self.clock() - start
        chunks = [h.chunk for h in picked]
        # the prompt holds each chunk's part about the question; citations the whole chunk
        g = self.s.generation
        messages = build_messages(self.question, cut_for(self.question, chunks, r.draft_words),
                                  "draft", g.prompt_tokens)
        items = self.e.tier("draft").stream(messages, max_tokens=g.draft_max_tokens,
                                            temperature=g.temperature)
        verify_hits = self.hits[:r.verify_k]
        watch = (SentenceWatch(self.e.verifier, verify_hits, self.question)
                 if self.s.verify.early_reject and self.policy != "draft-only" else None)
        try:
            async for ev in self._generate("draft", items, self.clock(), chunks, watch=watch):
                yield ev
        finally:
            if watch is not None:
                await watch.close()
        start = self.clock()
        with self.e.tracer.stage("verify", **{"specrag.chunks": len(verify_hits)}) as span:
            self.verdict = v = await asyncio.to_thread(self.e.verifier.verify, self.draft.text,
                                                       list(verify_hits), self.question)
            span.set_attributes({"specrag.verdict.score": float(v.score),
                                 "specrag.verdict.accepted": bool(v.accepted),
                                 "specrag.verdict.threshold": float(v.threshold),
                                 "specrag.verdict.sentences": len(v.sentences)})
            if self.e.tracer.record_content:
                span.set_attribute("specrag.draft", self.draft.text)
        self.verify_chunks = tuple(h.chunk for h in verify_hits)
        self.timings["verify"] = self.clock() - start
        yield StageEvent("verdict", self.clock(), verdict=self.verdict)

    # -- rerank and heavy -----------------------------------------------------------
    async def _rerank(self) -> tuple[Hit, ...]:
        if not self.s.retrieval.rerank:  # keep the retrieval order (see settings)
            return self.hits
        start = self.clock()
        with self.e.tracer.stage("rerank", **{"specrag.documents.count": len(self.hits)}):
            ranked = await asyncio.to_thread(self.e.reranker.rank, self.question,
                                             [h.chunk.text for h in self.hits], len(self.hits))
        self.timings["rerank"] = self.clock() - start
        score = {r["corpus_id"]: float(r["score"]) for r in ranked}
        order = [r["corpus_id"] for r in ranked]
        if self.s.retrieval.rerank_fusion:  # hits arrive in retrieval order (dense, or fused)
            order = fuse_orders(order, len(self.hits))
        return tuple(replace(self.hits[j], score=score[j], rank=i + 1) for i, j in enumerate(order))

    def _heavy_messages(self, reranked) -> tuple[list[dict], list]:
        r = self.s.retrieval
        chunks = [h.chunk for h in heavy_pick.pick(reranked, r)]
        return build_messages(self.question, cut_for(self.question, chunks, r.heavy_words),
                              "heavy", self.s.generation.prompt_tokens), chunks

    async def _heavy_to_queue(self, queue: asyncio.Queue) -> None:
        """Eager mode: rerank, then generate into a buffer the consumer may never read."""
        sent = 0
        try:
            reranked = await self._rerank_task
            messages, _ = self._heavy_messages(reranked)
            self.timings["heavy_start"] = self.clock()
            async for item in self.e.tier("heavy").stream(
                    messages, max_tokens=self.s.generation.heavy_max_tokens,
                    temperature=self.s.generation.temperature):
                if not isinstance(item, Usage):
                    # the model's own first token, not when the consumer drains it
                    if self._heavy_first_at is None:
                        self._heavy_first_at = self.clock()
                    sent += 1
                await queue.put(item)
        except asyncio.CancelledError:
            if "heavy_start" in self.timings:  # the call was made: count what it produced
                backend = getattr(self.e.heavy, "name", "")
                tokens_in = costs.estimate_tokens(messages)
                self.usage.append(Usage(backend, getattr(self.e.heavy, "model", ""), tokens_in,
                                        sent, cancelled=True))
            raise
        except Exception as err:  # noqa: BLE001 - handed to the consumer, raised there
            await queue.put(err)
        await queue.put(None)

    def start_eager(self) -> None:
        self._rerank_task = asyncio.create_task(self._rerank())
        g = self.s.generation
        # two models on this machine's cores only split them: on 2 cores a local heavy
        # started beside a local draft made both slower (BENCHMARKS.md), so it waits
        if g.eager_heavy and (g.eager_heavy_local or not _share_cores(self.e.draft, self.e.heavy)):
            # bounded: at most max_tokens text items, the usage, and the end marker
            self._heavy_queue = asyncio.Queue(maxsize=g.heavy_max_tokens + 2)
            self._heavy_task = asyncio.create_task(self._heavy_to_queue(self._heavy_queue))

    async def cancel_eager(self) -> None:
        for task in (self._heavy_task, self._rerank_task):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
                if task is self._heavy_task:
                    self.heavy_cancelled = True

    async def heavy_phase(self):
        self.reranked = await (self._rerank_task if self._rerank_task else self._rerank())
        yield StageEvent("rerank_done", self.clock(), reranked=self.reranked)
        messages, chunks = self._heavy_messages(self.reranked)
        start = self.timings.get("heavy_start", self.clock())
        if self._heavy_queue is not None:
            items = _drain(self._heavy_queue, self._heavy_task)
        else:
            g = self.s.generation
            items = self.e.tier("heavy").stream(messages, max_tokens=g.heavy_max_tokens,
                                                temperature=g.temperature)
        async for ev in self._generate("heavy", items, start, chunks,
                                       lambda: self._heavy_first_at):
            yield ev
        if self.s.verify.check_heavy and self.heavy.text:
            yield await self._verify_heavy(chunks)
        yield self.final(self.heavy.text, "heavy")

    async def _verify_heavy(self, chunks) -> StageEvent:
        """The heavy answer checked like the draft, against the chunks it was given: a
        shown answer always carries its verdict (a large model also invents figures)."""
        start = self.clock()
        with self.e.tracer.stage("verify_heavy", **{"specrag.chunks": len(chunks)}) as span:
            self.heavy_verdict = v = await asyncio.to_thread(
                self.e.verifier.verify, self.heavy.text, list(chunks), self.question)
            span.set_attributes({"specrag.verdict.score": float(v.score),
                                 "specrag.verdict.grounded": float(v.grounded or 0.0)})
        self.timings["verify_heavy"] = self.clock() - start
        return StageEvent("heavy_verdict", self.clock(), verdict=v)

    async def _generate(self, stage: str, items, start: float, chunks, first_at=None,
                        watch=None):
        """A tier's stream as ``{stage}_token`` events, then ``{stage}_done`` with its
        ``Generation`` (kept as ``self.draft`` / ``self.heavy``). ``first_at()``: when an
        eager heavy model produced its first token, earlier than it is drained here.
        ``watch`` (a ``SentenceWatch``): a sentence that rules the text out stops the
        stream there (the model call is cancelled) and is kept as ``early_rejected``."""
        parts, usage = [], None
        async for item in items:
            if isinstance(item, Usage):
                usage = item
                continue
            if not parts:
                self.timings.setdefault("first_token", self.clock())
                produced = first_at() if first_at else None
                first = self.clock() if produced is None else produced
                self.timings[f"{stage}_ttft"] = first - start
            parts.append(item)
            yield StageEvent(f"{stage}_token", self.clock(), text=item)
            if watch is not None:
                watch.feed("".join(parts))
                sunk = watch.sunk()
                for checked in watch.checked():  # coloured on the page as they finish
                    yield StageEvent("sentence_checked", self.clock(),
                                     text=checked.sentences[0].sentence, verdict=checked)
                if sunk is not None:
                    self.early_rejected = sunk
                    self.timings["early_reject"] = self.clock()
                    await items.aclose()  # cancels the model's call
                    break
        self.timings[stage] = self.clock() - start
        made = Generation("".join(parts).strip(), tuple(chunks), usage)
        setattr(self, stage, made)
        self.usage.append(usage)
        yield StageEvent(f"{stage}_done", self.clock(), **{stage: made})

    # -- the answer -------------------------------------------------------------------
    def final(self, text: str, tier: str) -> StageEvent:
        self.timings["total"] = self.clock()
        used = self.heavy.chunks if tier == "heavy" and self.heavy else (
            self.draft.chunks if self.draft else ())
        citations = provenance.citations(text, used)
        spent = sum(costs.cost(u, self.s.generation.prices) for u in self.usage if u)
        shown, warnings = self._checked(text, tier)
        heavy_only_usd, heavy_only_tokens = self._heavy_only()
        verify_chunks = getattr(self, "verify_chunks", ())
        # the shown text's verdict and its chunks; a withheld text has no sources
        found = () if shown != text else provenance.sources(
            *((self.heavy_verdict, used) if tier == "heavy" else (self.verdict, verify_chunks)),
            citations, getattr(self.e.verifier, "supported_threshold",
                               self.s.verify.supported_threshold), used)
        answer = Answer(
            question=self.asked, text=shown, sources=found,
            searched_for=self.question if self.question != self.asked else "", tier=tier,
            policy=self.policy, draft=self.draft, verdict=self.verdict, heavy=self.heavy,
            heavy_verdict=self.heavy_verdict, citations=citations, hits=self.hits,
            verify_chunks=verify_chunks, timings_ms=dict(self.timings),
            usage=tuple(u for u in self.usage if u), cost_usd=spent,
            heavy_only_cost_usd=heavy_only_usd, heavy_only_tokens=heavy_only_tokens,
            heavy_cancelled=self.heavy_cancelled, draft_error=self.draft_error,
            route=self.route, early_rejected=self.early_rejected, warnings=warnings)
        return StageEvent("final", self.clock(), answer=answer)

    def _checked(self, text: str, tier: str) -> tuple[str, tuple[str, ...]]:
        """The answer to show and its warnings (see ``Answer.warnings``)."""
        shown = [c for part in (self.draft, self.heavy) if part for c in part.chunks]
        warnings = [f"{source} contains instructions to the model; they were removed before "
                    "any model read it." for source in dict.fromkeys(
                        c.source for c in shown if injection.instruction_spans(c.text))]
        if (payload := injection.obeyed(text, [c.text for c in shown])) is not None:
            warnings.append(f"The answer repeated what an instruction in a document demanded "
                            f"(\"{payload[:40]}\"), so it was withheld.")
            text = NOT_FOUND
        elif tier == "draft" and self.verdict is not None and not self.verdict.accepted:
            warnings.append("Not verified: the verifier did not accept this draft, so it may "
                            "not be supported by the documents.")
        return text, tuple(warnings)

    def _heavy_only(self) -> tuple[float, int]:
        """What answering with the heavy model alone costs, in USD and heavy-model tokens
        (estimated when it did not run)."""
        prices = self.s.generation.prices
        if self.heavy and self.heavy.usage:
            u = self.heavy.usage
            return costs.cost(u, prices), u.input_tokens + u.output_tokens
        messages, _ = self._heavy_messages(self.reranked or self.hits)
        tokens_in = costs.estimate_tokens(messages)
        tokens_out = self.draft.usage.output_tokens if self.draft and self.draft.usage else 0
        return costs.estimate(getattr(self.e.heavy, "name", ""), getattr(self.e.heavy, "model", ""),
                              tokens_in, tokens_out, prices), tokens_in + tokens_out


def _share_cores(draft, heavy) -> bool:
    """Both tiers run on this machine (local models, loopback servers)."""
    return not redacting.is_third_party(draft) and not redacting.is_third_party(heavy)


async def _drain(queue: asyncio.Queue, task: asyncio.Task):
    while True:
        item = await queue.get()
        if item is None:
            break
        if isinstance(item, Exception):
            raise item
        yield item
    await task  # surfaces an exception raised by the heavy generation
