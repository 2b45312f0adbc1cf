"""Many questions at once: a bounded admission gate, and one task per question.

``AdmissionGate(max_concurrent, max_queue, queue_timeout_s)`` lets ``max_concurrent``
questions run and ``max_queue`` wait; one more, or one that waited too long, gets a
``BusyError`` with a message a user can act on, instead of an unbounded wait while
memory and latency grow (back-pressure at the front door, not deep in a model queue).

``isolated(make_stream)`` runs an async iterator in its own task and hands its items
over a one-slot queue. Each question then has its own ``contextvars`` context (the
ledger's session, the OpenTelemetry span), so concurrent questions cannot see each
other's, and setting and resetting them never straddles a ``yield`` that a framework
may resume from another task. Closing the consumer cancels the task.

Deliberately not here: per-model locks (a local llama.cpp context serialises its own
generations) or fairness between users.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from contextlib import aclosing

from specrag.types import SpecragError


class BusyError(SpecragError):
    """Too many questions at once; the caller should try again shortly."""

    def __init__(self, message: str, retry_after_s: float = 5.0):
        super().__init__(message)
        self.retry_after_s = retry_after_s


class AdmissionGate:
    def __init__(self, max_concurrent: int = 4, max_queue: int = 16, queue_timeout_s: float = 30.0):
        if max_concurrent < 1 or max_queue < 0:
            raise ValueError("max_concurrent must be >= 1 and max_queue >= 0")
        self.max_concurrent, self.max_queue = max_concurrent, max_queue
        self.queue_timeout_s = queue_timeout_s
        self.active = 0
        self.waiting = 0
        self.rejected = 0
        self._sem: asyncio.Semaphore | None = None  # made in the running loop, on first use
        self._loop = None

    @classmethod
    def from_settings(cls, settings) -> "AdmissionGate":
        c = settings.concurrency
        return cls(c.max_concurrent, c.max_queue, c.queue_timeout_s)

    def _busy(self, why: str) -> BusyError:
        self.rejected += 1
        return BusyError(f"specrag is busy ({why}: {self.active} questions being answered, "
                         f"{self.waiting} waiting); please try again in a moment")

    @contextlib.asynccontextmanager
    async def slot(self):
        loop = asyncio.get_running_loop()
        if self._sem is None or (self._loop is not loop and self.active == 0):
            # asyncio primitives belong to one loop; ``ask()`` runs a new loop per call
            self._sem, self._loop = asyncio.Semaphore(self.max_concurrent), loop
        if self._sem.locked() and self.waiting >= self.max_queue:
            raise self._busy("queue full")
        self.waiting += 1
        t0 = time.monotonic()
        try:
            async with asyncio.timeout(self.queue_timeout_s or None):
                await self._sem.acquire()
        except TimeoutError:
            raise self._busy(f"waited {time.monotonic() - t0:.0f} s") from None
        finally:
            self.waiting -= 1
        self.active += 1
        try:
            yield
        finally:
            self.active -= 1
            self._sem.release()


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
