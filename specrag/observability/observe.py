"""Watch every generation call of a tier: who answered, each attempt, tokens, time.

``ObservedGenerator(inner, "heavy", [telemetry, ledger])`` implements the generator
Protocol around a tier (a plain backend or a resilient chain). It owns the call's
``CallRecord`` and passes it down, so it sees every attempt the chain made, also when
the caller cancels mid-stream (an eager heavy answer nobody needs any more) or when
all attempts fail. At the end it hands one ``CallOutcome`` to each observer; an
observer's own failure is logged and never breaks an answer.

Observers have two methods: ``call_started(stage, gen, request) -> state`` (at the
start, e.g. to open a span) and ``call_finished(state, outcome)``.

Deliberately not here: what observers do (``telemetry``, ``ledger``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import aclosing
from dataclasses import dataclass

from specrag.generators.base import Usage
from specrag.resilience.attempts import Attempt, AttemptRun, CallRecord, ResilientUsage, third_party

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CallOutcome:
    stage: str  # "draft" | "heavy"
    backend: str  # the tier's preferred backend and model (what was requested)
    model: str
    attempts: tuple[Attempt, ...]
    usage: Usage | None  # of the attempt that answered
    error: BaseException | None
    cancelled: bool
    ttft_ms: float | None  # what the caller saw: first text after the call started
    total_ms: float
    started_ns: int
    max_tokens: int
    temperature: float


class ObservedGenerator:
    takes_record = True

    def __init__(self, inner, stage: str, observers=(), clock=time.monotonic):
        self.inner, self.stage = inner, stage
        self.observers = list(observers)
        self.clock = clock

    name = property(lambda self: self.inner.name)
    model = property(lambda self: self.inner.model)

    @property
    def remote(self) -> bool | None:
        return third_party(self.inner)

    @property
    def attempts(self) -> tuple:
        return getattr(self.inner, "attempts", ())

    def add_observer(self, observer) -> "ObservedGenerator":
        if observer not in self.observers:
            self.observers.append(observer)
        return self

    def warm_up(self) -> "ObservedGenerator":
        self.inner.warm_up()
        return self

    def _notify(self, verb: str, *args):
        out = []
        for obs in self.observers:
            try:
                out.append(getattr(obs, verb)(*args))
            except Exception:  # noqa: BLE001 - observing must not break answering
                log.warning("observer %s.%s failed", type(obs).__name__, verb, exc_info=True)
                out.append(None)
        return out

    async def stream(self, messages, *, max_tokens: int = 256, temperature: float = 0.0,
                     record: CallRecord | None = None):
        record = record if record is not None else CallRecord()
        request = {"messages": messages, "max_tokens": max_tokens, "temperature": temperature}
        states = self._notify("call_started", self.stage, self.inner, request)
        t0, started_ns, first = self.clock(), time.time_ns(), None
        run = AttemptRun(self.inner, record, clock=self.clock)
        error, cancelled, done = None, False, False
        try:
            async with aclosing(run.stream(messages, max_tokens=max_tokens,
                                           temperature=temperature)) as items:
                async for text in items:
                    first = first if first is not None else self.clock()
                    yield text
            usage = run.usage
            if not isinstance(usage, ResilientUsage):
                usage = ResilientUsage.of(usage, record.attempts,
                                          ((first or self.clock()) - t0) * 1000,
                                          (self.clock() - t0) * 1000, fallback=record.attempts[-1])
            done = True
            yield usage
        except BaseException as err:
            if not done:  # closed after the usage was handed over: the call completed
                cancelled = isinstance(err, (GeneratorExit, asyncio.CancelledError))
                error = None if cancelled else err
            raise
        finally:
            outcome = CallOutcome(
                self.stage, self.inner.name, self.inner.model, tuple(record.attempts),
                run.usage, error, cancelled, None if first is None else (first - t0) * 1000,
                (self.clock() - t0) * 1000, started_ns, max_tokens, temperature)
            for obs, state in zip(self.observers, states):
                try:
                    obs.call_finished(state, outcome)
                except Exception:  # noqa: BLE001
                    log.warning("observer %s failed", type(obs).__name__, exc_info=True)
