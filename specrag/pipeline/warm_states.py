"""Warm a small collection's draft prompts while no one is asking, so a first question
about any of its chunks prefills only the question.

The draft prompt is system prompt, one chunk, question (``retrieval.draft_k`` 1). The
local draft model keeps the KV state of recent prompts (``generators.prompt_states``),
so a question about a chunk drafted from before starts in ~0.2 s instead of ~1 s on two
cores. ``StateWarmer`` makes that true for questions no one asked yet: after a question
to a collection of at most ``generation.warm_states`` chunks, a background thread
evaluates each visible chunk's draft prompt (an empty question) through the draft
model's ``prefill``, one chunk at a time and only while no question is in flight
(``idle``): a question that arrives meanwhile waits for at most one chunk's prefill.
It stops when the state store is three-quarters full, so the states of live questions
keep room and warming never evicts its own work.

Warming is skipped, with the reason logged and kept in ``report``, when it cannot help:
several chunks per draft (``draft_k`` > 1) or chunks cut to the question
(``draft_words``) make prompts no warm state starts, and a draft model without prompt
states (remote, ``transformers``, the prompt cache off) has nothing to keep.

Deliberately not here: the states themselves (``generators.prompt_states``), states on
disk, warming at start-up (models load on the first question) or choosing which chunks
of a large collection deserve warming.
"""

from __future__ import annotations

import logging
import queue
import threading
import time

from specrag.pipeline.prompts import build_messages

log = logging.getLogger(__name__)

FILL = 0.75  # stop warming once the state store is this full


class StateWarmer:
    def __init__(self, engine, *, max_chunks: int = 64, idle=lambda: True,
                 poll_s: float = 0.2, fill: float = FILL, quiet_s: float = 1.0):
        self.engine = engine  # a ``SpeculativeRAG``: its store, draft tier and settings
        self.max_chunks = max_chunks  # 0: never warm
        self.idle = idle  # True when no question is in flight
        self.poll_s = poll_s
        self.fill = fill
        # a background warming starts this long after its request: a one-question command
        # closes first and pays nothing, and a user's next question usually comes sooner
        self.quiet_s = quiet_s
        self.report: dict[str, dict] = {}  # collection -> what its latest warming did
        self._warmed: dict[str, set[str]] = {}  # collection -> chunk ids warmed
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._pending: set[str] = set()
        self._said: dict[str, str] = {}  # collection -> the reason last logged
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings, engine, idle=lambda: True) -> "StateWarmer":
        return cls(engine, max_chunks=settings.generation.warm_states, idle=idle)

    # -- asking for it -----------------------------------------------------------------
    def request(self, collection: str) -> None:
        """Warm ``collection`` in the background (again: only chunks not yet warmed)."""
        if self.max_chunks <= 0 or self._stop.is_set():
            return
        with self._lock:
            if collection in self._pending:
                return
            self._pending.add(collection)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, daemon=True,
                                                name="specrag-warm-states")
                self._thread.start()
        self._queue.put(collection)

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until every requested collection is warmed; False on timeout."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while self._pending:
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop after the chunk in progress."""
        self._stop.set()
        self._queue.put(None)
        if self._thread is not None:
            self._thread.join(timeout_s)
        with self._lock:
            self._pending.clear()

    def _loop(self) -> None:
        while not self._stop.is_set():
            collection = self._queue.get()
            if collection is None or self._stop.wait(self.quiet_s):
                return
            try:
                self.warm(collection)
            except Exception as err:  # noqa: BLE001 - warming is best effort; questions go on
                log.warning("warming %s's draft prompts failed: %s: %s", collection,
                            type(err).__name__, err)
            finally:
                with self._lock:
                    self._pending.discard(collection)

    # -- the work --------------------------------------------------------------------------
    def why_not(self, settings, draft) -> str:
        """Why warming cannot help under these settings ("" when it can)."""
        if self.max_chunks <= 0:
            return "generation.warm_states is 0"
        if settings.retrieval.draft_k != 1:
            return "the draft reads several chunks (retrieval.draft_k > 1)"
        if settings.retrieval.draft_words > 0:
            return "draft chunks are cut to each question (retrieval.draft_words)"
        if not settings.generation.prompt_cache:
            return "the prompt cache is off"
        if draft is None or getattr(draft, "prefill", None) is None:
            return "the draft model keeps no prompt states"
        return ""

    def warm(self, collection: str) -> dict:
        """Prefill each visible chunk's draft prompt not warmed yet; what was done."""
        from specrag.tune import profile

        t0 = time.perf_counter()
        view = profile.view(self.engine, collection)  # a tuned collection's own draft
        done = self._warmed.setdefault(collection, set())
        # the store's size as of the latest prefill, kept when this run adds nothing
        state_mb = self.report.get(collection, {}).get("state_mb", 0.0)
        report = {"chunks": 0, "warmed": 0, "skipped": "", "seconds": 0.0, "state_mb": state_mb}
        reason = self.why_not(view.settings, view.draft)
        store = self.engine.retriever.store if not reason else None
        count = store.count(collection) if not reason else 0
        if not reason and count > self.max_chunks:
            reason = (f"{count} chunks, more than generation.warm_states "
                      f"({self.max_chunks})")
        if not reason:
            chunks = [c for c in store.visible_chunks(collection, limit=self.max_chunks)
                      if c.id not in done]
            report["chunks"] = len(chunks)
            for chunk in chunks:
                while not self.idle() and not self._stop.is_set():
                    time.sleep(self.poll_s)  # questions first
                if self._stop.is_set():
                    reason = "stopped"
                    break
                states = view.draft.prefill(build_messages("", [chunk], "draft"))
                if states is None:
                    reason = "the draft model keeps no prompt states"
                    break
                done.add(chunk.id)
                report["warmed"] += 1
                report["state_mb"] = round(states["bytes"] / 2**20, 1)
                if states["bytes"] >= self.fill * states["budget_bytes"]:
                    reason = "the prompt-state store is {:.0%} full".format(self.fill)
                    break
        report["total"] = len(done)  # warmed so far, this run and earlier ones
        report["skipped"] = reason
        report["seconds"] = round(time.perf_counter() - t0, 2)
        self.report[collection] = report
        self._said[collection] = reason
        (log.info if report["warmed"] or reason != self._said.get(collection) else log.debug)(
            "warmed %d of %d draft prompts of %s in %.1f s%s", report["warmed"],
                 report["chunks"], collection, report["seconds"],
                 f" ({reason})" if reason else "")
        return report
