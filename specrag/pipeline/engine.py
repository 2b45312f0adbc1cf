"""The speculative engine: retrieve broadly, draft fast, verify, escalate only if needed.

``SpeculativeRAG(settings).astream(question)`` yields ``StageEvent``s and ends with a
``final`` event carrying the ``Answer``; ``aask``/``ask`` return just the answer.

Policies (settings ``generation.policy`` or per call):
- ``lazy``: rerank and heavy generation start only after the verifier rejects the draft.
- ``eager``: the rerank (and, with ``eager_heavy``, the heavy generation, buffered)
  start alongside the draft and are cancelled the moment the draft is accepted. When
  both tiers run on this machine (local models), the heavy generation still waits for
  the verdict unless ``eager_heavy_local`` is set: on a CPU they would only split the
  same cores.
- ``draft-only`` / ``heavy-only``: the two baselines.
A draft that only abstains ("The documents do not say.") is escalated when
``verify.escalate_abstentions`` is set: the weak model may have missed the answer. A
draft whose generation fails (its model's process died, say) escalates too, with a
``draft_failed`` event and ``Answer.draft_error`` saying why; under ``draft-only`` the
error is raised.

Deliberately not here: retries/failover (wrap the generators), rendering, persistence.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import replace

from specrag.generators.base import GenerationError, Usage
from specrag.pipeline import costs
from specrag.pipeline.events import POLICIES, Answer, Citation, Draft, HeavyAnswer, StageEvent
from specrag.pipeline.prompts import NOT_FOUND, build_messages, cited_numbers
from specrag.retrieval.fusion import fuse_orders
from specrag.retrieval.retriever import Retriever
from specrag.security import access, redacting, sanitize
from specrag.settings import Settings
from specrag.types import Hit, SpecragError, one_line


class SpeculativeRAG:
    def __init__(self, settings: Settings, retriever=None, draft=None, heavy=None,
                 verifier=None, reranker=None, auditor=None):
        self.settings = settings
        self.auditor = auditor  # optional: samples final answers for the quality audit
        self.retriever = retriever or Retriever(settings)
        self.draft = draft
        self.heavy = heavy
        self.verifier = verifier
        self.reranker = reranker
        self._warm = False

    def warm_up(self) -> "SpeculativeRAG":
        if self._warm:
            return self
        from specrag.generators.factory import from_settings
        from specrag.grounding.crossencoder import CrossEncoder
        from specrag.grounding.verifier import Verifier

        s = self.settings  # security: third-party backends only ever see PII placeholders
        self.draft = redacting.wrap(self.draft or from_settings("draft", s), s)
        self.heavy = redacting.wrap(self.heavy or from_settings("heavy", s), s)
        self.verifier = self.verifier or Verifier.from_settings(s)
        self.reranker = self.reranker or CrossEncoder(self.settings, "reranker")
        for part in (self.retriever, self.draft, self.heavy, self.verifier, self.reranker):
            part.warm_up()
        self._warm = True
        return self

    # -- public API ----------------------------------------------------------------
    def ask(self, question: str, **kw) -> Answer:
        return asyncio.run(self.aask(question, **kw))

    async def aask(self, question: str, **kw) -> Answer:
        answer = None
        async for event in self.astream(question, **kw):
            if event.kind == "final":
                answer = event.answer
        return answer

    async def astream(self, question: str, *, policy: str | None = None,
                      collection: str | None = None, source: str | list[str] | None = None,
                      principal=None):
        who = access.authorize(self.settings, "read", collection, principal)  # security: ACL
        sanitize.check_question(question or "", self.settings.security.max_question_chars)
        async for event in self._stages(question, policy, collection, source, who):
            if event.kind == "final" and self.auditor is not None:  # SQLite: off the loop
                await asyncio.to_thread(self.auditor.maybe_record, event.answer,
                                        collection or self.settings.store.collection)
            yield event

    async def _stages(self, question, policy, collection, source, who=None):
        s = self.settings
        policy = policy or s.generation.policy
        if policy not in POLICIES:
            raise SpecragError(f"policy must be one of {', '.join(POLICIES)}, got '{policy}'")
        question = " ".join((question or "").split())
        if not question:
            raise SpecragError("the question is empty")
        await asyncio.to_thread(self.warm_up)
        t0 = time.perf_counter()
        clock = lambda: (time.perf_counter() - t0) * 1000  # noqa: E731
        timings: dict[str, float] = {}
        ret = await asyncio.to_thread(access.call_as, who, self.retriever.retrieve, question,
                                      s.retrieval.top_k, collection, source)
        timings.update(vector_search=ret.search_ms, retrieval=clock())
        hits = ret.hits
        yield StageEvent("retrieved", clock(), hits=hits)
        run = _Run(self, question, hits, policy, clock, timings)
        if not hits:
            yield run.final(NOT_FOUND, "draft")
            return
        if policy == "eager":
            run.start_eager()
        try:
            if policy == "heavy-only":
                async for ev in run.heavy_phase():
                    yield ev
                return
            try:
                async for ev in run.draft_phase():
                    yield ev
            except GenerationError as err:
                # a failed draft (its model's worker died, say) is a rejected one: the
                # heavy tier answers, unless the user asked for the draft alone
                if policy == "draft-only":
                    raise
                run.draft_error = one_line(err)
                yield StageEvent("draft_failed", clock(), text=run.draft_error)
                async for ev in run.heavy_phase():
                    yield ev
                return
            accept = run.verdict.accepted and not (run.verdict.abstained
                                                  and s.verify.escalate_abstentions)
            if policy == "draft-only" or accept:
                await run.cancel_eager()
                yield run.final(run.draft.text, "draft")
                return
            async for ev in run.heavy_phase():
                yield ev
        finally:
            await run.cancel_eager()


class _Run:
    """The state of one question; the engine's phases as small async steps."""

    def __init__(self, engine: SpeculativeRAG, question: str, hits: tuple[Hit, ...], policy: str,
                 clock, timings: dict[str, float]):
        self.e, self.s = engine, engine.settings
        self.question, self.hits, self.policy = question, hits, policy
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
        self.draft_error = ""

    # -- draft and verify ------------------------------------------------------------
    async def draft_phase(self):
        chunks = [h.chunk for h in self.hits[:self.s.retrieval.draft_k]]
        messages = build_messages(self.question, chunks, "draft")
        start, parts, usage = self.clock(), [], None
        async for item in self.e.draft.stream(messages, max_tokens=self.s.generation.draft_max_tokens,
                                              temperature=self.s.generation.temperature):
            if isinstance(item, Usage):
                usage = item
                continue
            if not parts:
                self.timings.setdefault("first_token", self.clock())
                self.timings["draft_ttft"] = self.clock() - start
            parts.append(item)
            yield StageEvent("draft_token", self.clock(), text=item)
        self.timings["draft"] = self.clock() - start
        self.draft = Draft("".join(parts).strip(), tuple(chunks), usage)
        self.usage.append(usage)
        yield StageEvent("draft_done", self.clock(), draft=self.draft)
        start = self.clock()
        verify_hits = self.hits[:self.s.retrieval.verify_k]
        self.verdict = await asyncio.to_thread(self.e.verifier.verify, self.draft.text,
                                               list(verify_hits))
        self.verify_chunks = tuple(h.chunk for h in verify_hits)
        self.timings["verify"] = self.clock() - start
        yield StageEvent("verdict", self.clock(), verdict=self.verdict)

    # -- rerank and heavy -----------------------------------------------------------
    async def _rerank(self) -> tuple[Hit, ...]:
        if not self.s.retrieval.rerank:  # keep the bi-encoder order (see settings)
            return self.hits
        start = self.clock()
        ranked = await asyncio.to_thread(self.e.reranker.rank, self.question,
                                         [h.chunk.text for h in self.hits], len(self.hits))
        self.timings["rerank"] = self.clock() - start
        score = {r["corpus_id"]: float(r["score"]) for r in ranked}
        order = [r["corpus_id"] for r in ranked]
        if self.s.retrieval.rerank_fusion:  # hits arrive in bi-encoder order
            order = fuse_orders(order, len(self.hits))
        return tuple(replace(self.hits[j], score=score[j], rank=i + 1) for i, j in enumerate(order))

    def _heavy_messages(self, reranked) -> tuple[list[dict], list]:
        chunks = [h.chunk for h in reranked[:self.s.retrieval.heavy_k]]
        return build_messages(self.question, chunks, "heavy"), chunks

    async def _heavy_to_queue(self, queue: asyncio.Queue) -> None:
        """Eager mode: rerank, then generate into a buffer the consumer may never read."""
        sent = 0
        try:
            reranked = await self._rerank_task
            messages, _ = self._heavy_messages(reranked)
            self.timings["heavy_start"] = self.clock()
            async for item in self.e.heavy.stream(
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
                tokens_in = sum(len(m["content"]) for m in messages) // 4
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
            items = self.e.heavy.stream(messages, max_tokens=self.s.generation.heavy_max_tokens,
                                        temperature=self.s.generation.temperature)
        parts, usage = [], None
        async for item in items:
            if isinstance(item, Usage):
                usage = item
                continue
            if not parts:
                self.timings.setdefault("first_token", self.clock())
                first = self.clock() if self._heavy_first_at is None else self._heavy_first_at
                self.timings["heavy_ttft"] = first - start
            parts.append(item)
            yield StageEvent("heavy_token", self.clock(), text=item)
        self.timings["heavy"] = self.clock() - start
        self.heavy = HeavyAnswer("".join(parts).strip(), tuple(chunks), usage)
        self.usage.append(usage)
        yield StageEvent("heavy_done", self.clock(), heavy=self.heavy)
        yield self.final(self.heavy.text, "heavy")

    # -- the answer -------------------------------------------------------------------
    def final(self, text: str, tier: str) -> StageEvent:
        self.timings["total"] = self.clock()
        prices = self.s.generation.prices
        used = self.heavy.chunks if tier == "heavy" and self.heavy else (
            self.draft.chunks if self.draft else ())
        numbers = [n for n in cited_numbers(text) if 1 <= n <= len(used)]
        citations = tuple(Citation(n, used[n - 1].source, used[n - 1].page, used[n - 1].text,
                                   used[n - 1].id) for n in numbers)
        spent = sum(costs.cost(u, prices) for u in self.usage if u)
        answer = Answer(
            question=self.question, text=text, tier=tier, policy=self.policy, draft=self.draft,
            verdict=self.verdict, heavy=self.heavy, citations=citations, hits=self.hits,
            verify_chunks=getattr(self, "verify_chunks", ()), timings_ms=dict(self.timings),
            usage=tuple(u for u in self.usage if u), cost_usd=spent,
            heavy_only_cost_usd=self._heavy_only_cost(), heavy_cancelled=self.heavy_cancelled,
            draft_error=self.draft_error)
        return StageEvent("final", self.clock(), answer=answer)

    def _heavy_only_cost(self) -> float:
        """What answering with the heavy model alone costs (estimated when it did not run)."""
        prices = self.s.generation.prices
        if self.heavy and self.heavy.usage:
            return costs.cost(self.heavy.usage, prices)
        messages, _ = self._heavy_messages(self.reranked or self.hits)
        tokens_in = sum(len(m["content"]) for m in messages) // 4  # ~4 characters per token
        tokens_out = self.draft.usage.output_tokens if self.draft and self.draft.usage else 0
        return costs.estimate(getattr(self.e.heavy, "name", ""), getattr(self.e.heavy, "model", ""),
                              tokens_in, tokens_out, prices)


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
