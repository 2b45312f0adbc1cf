"""Warm a collection's draft prompts while no one is asking, so a first question about
any of its chunks prefills only the question.

The draft prompt is system prompt, one chunk, question (``retrieval.draft_k`` 1). The
local draft model's server keeps the KV state of recent prompts in its prompt cache
(``generators.llama_server``), so a question about a chunk drafted from before starts
in ~0.2 s instead of ~1 s on two cores; warmed prompts are saved as slot files too
(``generators.slot_files``, 4 GB, ~5 MB a chunk), so a warmed collection stays warm
across restarts. ``StateWarmer`` makes that true for questions no one asked yet: after
a question to a collection of at most ``generation.warm_states`` chunks (``Service``),
or when a browser opens the page (``ui.session.Engines.prepare``), a background thread
hands each visible chunk's draft prompt (an empty question) to the draft model's
``prefill``, one chunk at a time and only while no question is in flight (``idle``); a
question that arrives meanwhile is batched with the prefill in progress by the engine
(about one chunk, ~1 s, at worst). The model evaluates only what its cache does not hold,
restores a prompt from its file when one was saved, and saves no more files once they
fill three-quarters of their budget; the files are shared by every collection the
model drafts for. When chunks leave the store, every state is forgotten (the files
deleted, the server started again) and the next question warms the collection again.

Warming is skipped, with the reason logged and kept in ``report``, when it cannot help:
a heavy-only policy drafts nothing; several chunks per draft (``draft_k`` > 1) or chunks cut to the question
(``draft_words``) make prompts no warm state starts; a draft model without prompt states
(remote, ``transformers``, the prompt cache off) has nothing to keep; and with
``security.redact_local`` the model sees placeholders, never the chunk as stored.

Deliberately not here: the states themselves (``generators.llama_server``,
``generators.slot_files``), warming at start-up (models load once a page opens or a
question comes), choosing which chunks of a collection over ``warm_states`` deserve
warming, and a session's own ``draft_k``/``draft_words`` (the base settings decide). Each
prefill advances llama.cpp's seed chain: drafts are the same with or without warming at
temperature 0 (the default), not above it.
"""

from __future__ import annotations

import logging
import queue
import threading
import time

from specrag.generators.base import GenerationError
from specrag.generators.state_folders import read_epoch, root_for
from specrag.pipeline import profile
from specrag.pipeline.prompts import PROMPT_TOKENS, build_messages
from specrag.security import redacting

log = logging.getLogger(__name__)

FILL = 0.75  # stop warming once the state store is this full
MAX_FAILURES = 3  # chunks whose prefill failed before a warming gives up


class StateWarmer:
    """Prefills collections' draft prompts in one background thread (``request``), or in
    the caller's (``warm``); ``report`` says per collection what the latest run did."""

    def __init__(self, engine, *, max_chunks: int = 1024, idle=lambda: True,
                 poll_s: float = 0.2, fill: float = FILL, quiet_s: float = 1.0,
                 prompt_tokens: int = PROMPT_TOKENS):
        self.engine = engine  # a ``SpeculativeRAG``: its store, draft tier and settings
        self.max_chunks = max_chunks  # 0: never warm
        self.prompt_tokens = prompt_tokens  # the questions' budget: the same document cut
        self.idle = idle  # True when no question is in flight
        self.poll_s = poll_s
        self.fill = fill
        # a background warming starts this long after its request: a one-question command
        # closes first and pays nothing, and a user's next question usually comes sooner
        self.quiet_s = quiet_s
        self.report: dict[str, dict] = {}  # collection -> what its latest warming did
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._pending: set[str] = set()
        self._said: dict[str, str] = {}  # collection -> the reason last logged
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings, engine, idle=lambda: True) -> "StateWarmer":
        return cls(engine, max_chunks=settings.generation.warm_states, idle=idle,
                   prompt_tokens=settings.generation.prompt_tokens)

    # -- asking for it -----------------------------------------------------------------
    def request(self, collection: str) -> None:
        """Warm ``collection`` in the background (again: prompts already held are skipped)."""
        if self.max_chunks <= 0:
            return
        with self._lock:  # under the lock: a close cannot slip in and leave it pending
            if self._stop.is_set() or collection in self._pending:
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

    def close(self, timeout_s: float = 30.0) -> None:
        """Stop after the chunk in progress (a prefill, about a second on 2 cores)."""
        with self._lock:
            self._stop.set()
            self._queue.put(None)
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                log.warning("warming did not stop within %.0f s", timeout_s)
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
        if settings.generation.policy == "heavy-only":
            return "the policy is heavy-only: no drafts"
        if settings.retrieval.draft_k != 1:
            return "the draft reads several chunks (retrieval.draft_k > 1)"
        if settings.retrieval.draft_words > 0:
            return "draft chunks are cut to each question (retrieval.draft_words)"
        if not settings.generation.prompt_cache:
            return "the prompt cache is off"
        if draft is None or getattr(draft, "prefill", None) is None:
            return "the draft model keeps no prompt states"
        if redacting.wrap(draft, settings) is not draft:
            return "the draft model sees redacted prompts (security.redact_local)"
        return ""

    def warm(self, collection: str) -> dict:
        """Prefill each visible chunk's draft prompt that no stored state holds; what was
        done: chunks listed, ``warmed`` now, ``total`` held after, why it stopped early."""
        t0 = time.perf_counter()
        report = {"chunks": 0, "warmed": 0, "restored": 0, "total": 0, "skipped": "",
                  "seconds": 0.0,
                  "state_mb": self.report.get(collection, {}).get("state_mb", 0.0)}
        view = None if self._stop.is_set() else profile.view(self.engine, collection)
        reason = "stopped" if view is None else self.why_not(view.settings, view.draft)
        if not reason:
            # the states' epoch before the chunks are listed: a chunk that leaves the store
            # meanwhile ends the run at the next prefill instead of being stored again
            epoch = read_epoch(root_for(self.engine.settings.data_path))
            # one over the limit tells a collection too large to warm
            chunks = self.engine.retriever.store.visible_chunks(collection,
                                                                 limit=self.max_chunks + 1)
            report["chunks"] = len(chunks)
            if len(chunks) > self.max_chunks:
                reason = f"more than generation.warm_states ({self.max_chunks}) chunks"
            else:
                reason = self._prefill_all(view.draft, chunks, report, epoch)
        report["skipped"] = reason
        report["seconds"] = round(time.perf_counter() - t0, 2)
        said, self._said[collection] = self._said.get(collection), reason
        self.report[collection] = report
        # a new reason, or new work, is news; the same "nothing to do" after every question is not
        (log.info if report["warmed"] or report["restored"] or reason != said else log.debug)(
            "warmed %d draft prompts of %s, restored %d from files (%d of %d held) in %.1f s%s",
            report["warmed"], collection, report["restored"], report["total"],
            report["chunks"], report["seconds"], f"; not all: {reason}" if reason else "")
        return report

    def _prefill_all(self, draft, chunks, report: dict, epoch: str | None = None) -> str:
        """Prefill ``chunks`` in order, updating ``report``; why it stopped early, or ""."""
        failures = 0
        for chunk in chunks:
            try:
                states = self._prefill(draft, chunk, epoch, report)
            except GenerationError as err:  # this chunk's prompt (too long, say), not the model
                failures += 1
                log.warning("warming chunk %s failed: %s", chunk.id, err)
                if failures >= MAX_FAILURES:
                    return f"{failures} chunks failed, the last: {err}"
                continue
            if states is None:
                return "the draft model keeps no prompt states"
            if states == "stopped":
                return "stopped"
            report["state_mb"] = round(states["bytes"] / 2**20, 1)
            if states["outcome"] == "full":
                return f"the prompt-state store is {self.fill:.0%} full"
            if states["outcome"] == "stale":
                return "chunks left the store meanwhile: warmed again after the next question"
            report["warmed"] += states["outcome"] == "stored"
            report["restored"] += states["outcome"] == "restored"
            report["total"] += 1
        return ""

    def _prefill(self, draft, chunk, epoch, report: dict):
        """One chunk's prefill once no question is in flight; "stopped" when the warmer
        closes first."""
        while not self.idle() and not self._stop.is_set():
            time.sleep(self.poll_s)  # questions first
        if self._stop.is_set():
            return "stopped"
        return draft.prefill(build_messages("", [chunk], "draft", self.prompt_tokens),
                             self.fill, epoch)
