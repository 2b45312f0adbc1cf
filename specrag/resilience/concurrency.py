"""Many questions at once: a fair admission gate with limits per caller, and one task per question.

``AdmissionGate(max_concurrent, max_queue, queue_timeout_s, per_user_concurrent=,
per_user_per_minute=, per_user_burst=)``: ``slot(user)`` lets ``max_concurrent``
questions run and ``max_queue`` wait; one more, or one that waited too long, gets a
``BusyError`` with a message a user can act on, instead of an unbounded wait while
memory and latency grow (back-pressure at the front door, not deep in a model queue).
``user`` is whoever the limits are per (the service passes the signed-in user, or the
session without a users file); ``None`` is exempt from the share and the rate (the
operator's own calls: the library, the CLI, benchmarks) but still takes fair turns:

- fair turns: a freed slot goes to the waiting user with the fewest questions running,
  then to the one served longest ago, so one user's burst cannot starve another's single
  question; a full queue makes room for a user with fewer waiting by refusing the newest
  question of the user with the most (2+ more), so a burst cannot shut others out either;
- a share: one user runs at most ``per_user_concurrent`` questions; the rest wait;
- a rate: a token bucket per user, ``per_user_per_minute`` on average in bursts of
  ``per_user_burst``; over it, ``BusyError`` at once with the seconds until the next
  token (``retry_after_s``). A question the gate turns away gets its token back.

The gate's state changes only on the event loop, between awaits, so it needs no lock.

``isolated(make_stream)`` runs an async iterator in its own task and hands its items
over a one-slot queue. Each question then has its own ``contextvars`` context (the
ledger's session, the OpenTelemetry span), so concurrent questions cannot see each
other's, and setting and resetting them never straddles a ``yield`` that a framework
may resume from another task. Closing the consumer cancels the task.

Deliberately not here: who the user is (``pipeline.service``), per-model locks (a local
llama.cpp context serialises its own generations), spending limits (``budget``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import time
from collections import deque
from contextlib import aclosing

from specrag.types import SpecragError

MAX_BUCKETS = 10_000  # rate buckets kept; full ones are forgotten first


class BusyError(SpecragError):
    """Too many questions at once; the caller should try again shortly."""

    def __init__(self, message: str, retry_after_s: float = 5.0):
        super().__init__(message)
        self.retry_after_s = retry_after_s


class AdmissionGate:
    def __init__(self, max_concurrent: int = 4, max_queue: int = 16, queue_timeout_s: float = 30.0,
                 *, per_user_concurrent: int = 0, per_user_per_minute: float = 0.0,
                 per_user_burst: int = 1, clock=time.monotonic):
        if max_concurrent < 1 or max_queue < 0 or per_user_concurrent < 0:
            raise ValueError("max_concurrent must be >= 1, max_queue and per_user_concurrent >= 0")
        self.max_concurrent, self.max_queue = max_concurrent, max_queue
        self.queue_timeout_s = queue_timeout_s
        self.per_user = per_user_concurrent
        self.per_minute, self.burst = max(0.0, per_user_per_minute), max(1, per_user_burst)
        self.clock = clock
        self.active = 0
        self.waiting = 0
        self.rejected = 0
        self._running: dict[str, int] = {}  # user -> questions running
        self._queues: dict[str, deque] = {}  # user -> deque of (arrival, future)
        self._served: dict[str, int] = {}  # user -> when last admitted (a counter)
        self._tick = itertools.count()
        self._buckets: dict[str, tuple[float, float]] = {}  # user -> (tokens, as of)

    @classmethod
    def from_settings(cls, settings) -> "AdmissionGate":
        c = settings.concurrency
        return cls(c.max_concurrent, c.max_queue, c.queue_timeout_s,
                   per_user_concurrent=c.per_user_concurrent,
                   per_user_per_minute=c.per_user_per_minute, per_user_burst=c.per_user_burst)

    def _busy(self, why: str) -> BusyError:
        self.rejected += 1
        return BusyError(f"specrag is busy ({why}: {self.active} questions being answered, "
                         f"{self.waiting} waiting); please try again in a moment")

    @contextlib.asynccontextmanager
    async def slot(self, user: str | None = ""):
        self._take_token(user)
        try:
            await self._admit(user)
        except BaseException:
            self._refund(user)
            raise
        try:
            yield
        finally:
            self._release(user)

    # -- admission ----------------------------------------------------------------------
    def _capped(self, user) -> bool:
        return bool(self.per_user) and user is not None and \
            self._running.get(user, 0) >= self.per_user

    def _may_run(self, user) -> bool:
        return self.active < self.max_concurrent and not self._capped(user)

    async def _admit(self, user: str) -> None:
        # whenever a slot frees, waiters that may run are admitted at once; so a user who
        # may run now jumps no queue
        if self._may_run(user):
            self._grant(user)
            return
        if self.waiting >= self.max_queue and not self._make_room(user):
            raise self._busy("queue full")
        entry = (next(self._tick), asyncio.get_running_loop().create_future())
        self._queues.setdefault(user, deque()).append(entry)
        self.waiting += 1
        t0 = time.monotonic()
        try:
            async with asyncio.timeout(self.queue_timeout_s or None):
                await entry[1]
        except BaseException as err:
            fut = entry[1]
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                self._release(user)  # admitted in the same instant it gave up
            else:
                self._unqueue(user, entry)
            if isinstance(err, TimeoutError):
                raise self._busy(f"waited {time.monotonic() - t0:.0f} s") from None
            raise

    def _make_room(self, user: str) -> bool:
        """Refuse the newest waiting question of the user with the most waiting, if they
        have at least two more than ``user``; True when a place was freed."""
        mine = len(self._queues.get(user, ()))
        victim = max(self._queues, key=lambda u: len(self._queues[u]), default=None)
        if victim is None or len(self._queues[victim]) < mine + 2:
            return False
        entry = self._queues[victim][-1]
        self._unqueue(victim, entry)
        if entry[1].done():  # cancelled, not yet noticed by its task: the room is made
            return True
        self.rejected += 1
        entry[1].set_exception(BusyError(
            "specrag is busy (another user's question took your place in the queue: you "
            f"had {len(self._queues.get(victim, ())) + 1} waiting); please try again in a moment"))
        return True

    def _unqueue(self, user: str, entry) -> None:
        queue = self._queues.get(user)
        if queue is not None and entry in queue:
            queue.remove(entry)
            self.waiting -= 1
            if not queue:
                del self._queues[user]
                self._forget(user)

    def _grant(self, user: str) -> None:
        self.active += 1
        self._running[user] = self._running.get(user, 0) + 1
        self._served[user] = next(self._tick)

    def _release(self, user: str) -> None:
        self.active -= 1
        self._running[user] -= 1
        if not self._running[user]:
            del self._running[user]
            self._forget(user)
        self._dispatch()

    def _forget(self, user: str) -> None:
        if user not in self._running and user not in self._queues:
            self._served.pop(user, None)

    def _dispatch(self) -> None:
        """Admit waiters while there is room: fewest running first, then served longest ago."""
        while self.active < self.max_concurrent:
            ready = [u for u in self._queues if not self._capped(u)]
            if not ready:
                return
            user = min(ready, key=lambda u: (self._running.get(u, 0), self._served.get(u, -1),
                                             self._queues[u][0][0]))
            entry = self._queues[user][0]
            self._unqueue(user, entry)
            if entry[1].done():  # cancelled, not yet noticed by its task
                continue
            self._grant(user)
            entry[1].set_result(None)

    # -- rate ---------------------------------------------------------------------------
    def _tokens(self, user: str, now: float) -> float:
        tokens, then = self._buckets.get(user, (float(self.burst), now))
        return min(float(self.burst), tokens + (now - then) * self.per_minute / 60)

    def _take_token(self, user) -> None:
        if not self.per_minute or user is None:
            return
        now = self.clock()
        tokens = self._tokens(user, now)
        if tokens < 1:
            self.rejected += 1
            wait = (1 - tokens) * 60 / self.per_minute
            raise BusyError(f"too many questions: at most {self.per_minute:g} questions a minute "
                            f"(bursts of {self.burst}); please try again in {math.ceil(wait)} s",
                            retry_after_s=wait)
        self._buckets[user] = (tokens - 1, now)
        if len(self._buckets) > MAX_BUCKETS:
            self._buckets = {u: b for u, b in self._buckets.items()
                             if self._tokens(u, now) < self.burst}
        while len(self._buckets) > MAX_BUCKETS:  # still full: forget the oldest first
            self._buckets.pop(next(iter(self._buckets)))

    def _refund(self, user: str) -> None:
        if self.per_minute and user in self._buckets:
            now = self.clock()
            self._buckets[user] = (min(float(self.burst), self._tokens(user, now) + 1), now)


async def isolated(make_stream, maxsize: int = 1):
    """Iterate ``make_stream()`` inside a task of its own; yield its items here."""
    queue: asyncio.Queue = asyncio.Queue(maxsize)
    done = object()

    async def run():
        try:
            async with aclosing(make_stream()) as stream:
                async for item in stream:
                    await queue.put((item, None))
        except asyncio.CancelledError:
            raise
        except BaseException as err:  # noqa: BLE001 - re-raised in the consumer
            await queue.put((done, err))
            return
        await queue.put((done, None))

    task = asyncio.create_task(run())
    try:
        while True:
            item, err = await queue.get()
            if item is done:
                if err is not None:
                    raise err
                break
            yield item
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
