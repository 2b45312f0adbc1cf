"""Retries for one backend: timeouts, exponential backoff with jitter, and a retry budget.

``RetryingGenerator(inner, RetryPolicy(...), RetryBudget(...))`` implements the
generator Protocol. Each try runs under a first-token and a total timeout (the
connect timeout is the HTTP client's, set by ``chains``). A failure is tried again
when it is retryable (429, 5xx, 529, timeouts, dropped connections, a stream cut
mid-way: backends set ``GenerationError.retryable``), never for 400/401/403, after a
"full jitter" backoff: ``uniform(0, min(max_delay, base * multiplier**n))`` (spreads
the retries of many clients instead of synchronising them). The ``RetryBudget`` caps
retries at a share of recent requests, so an outage cannot multiply the load on a
backend that is already failing. Text already streamed is never repeated: see
``delivery`` for the ``resume`` / ``buffer`` / ``never`` modes.

Deliberately not here: trying another backend (``failover``), honouring a
``retry-after`` header (the backends do not pass it on; backoff covers it).
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections import deque
from dataclasses import dataclass

from specrag.generators.base import GenerationError
from specrag.resilience.attempts import (
    AttemptRun,
    AttemptsFailed,
    CallRecord,
    ResilientUsage,
    describe,
    third_party,
)
from specrag.resilience.delivery import Delivery, relay


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 3  # the first try included
    base_delay_s: float = 0.25
    max_delay_s: float = 4.0
    multiplier: float = 2.0
    first_token_timeout_s: float | None = 20.0  # None: no limit (local models)
    total_timeout_s: float | None = 120.0  # per try
    after_first_token: str = "resume"  # resume | buffer | never (see ``delivery``)

    def delay(self, retry: int, rng: random.Random) -> float:
        """Full jitter backoff before retry number ``retry`` (1 = the first retry)."""
        cap = min(self.max_delay_s, self.base_delay_s * self.multiplier ** (retry - 1))
        return rng.uniform(0.0, cap)

    @classmethod
    def from_settings(cls, r) -> "RetryPolicy":
        return cls(max_attempts=r.max_attempts, base_delay_s=r.backoff_base_s,
                   max_delay_s=r.backoff_max_s, first_token_timeout_s=r.first_token_timeout_s or None,
                   total_timeout_s=r.total_timeout_s or None, after_first_token=r.after_first_token)


class RetryBudget:
    """Retries allowed in a sliding window: ``min_retries + ratio * requests``.

    Like Finagle's retry budget: under normal load the budget is never felt; when a
    backend fails every request, retries stop at ``ratio`` extra load instead of
    ``max_attempts`` times the load. Thread-safe; ``clock`` is injectable for tests.
    """

    def __init__(self, ratio: float = 0.2, min_retries: int = 10, window_s: float = 10.0,
                 clock=time.monotonic):
        self.ratio, self.min_retries, self.window_s, self.clock = ratio, min_retries, window_s, clock
        self._requests: deque[float] = deque()
        self._retries: deque[float] = deque()
        self._lock = threading.Lock()

    def _trim(self, now: float) -> None:
        for q in (self._requests, self._retries):
            while q and q[0] <= now - self.window_s:
                q.popleft()

    def record_request(self) -> None:
        with self._lock:
            now = self.clock()
            self._trim(now)
            self._requests.append(now)

    def try_spend(self) -> bool:
        with self._lock:
            now = self.clock()
            self._trim(now)
            if len(self._retries) >= self.min_retries + self.ratio * len(self._requests):
                return False
            self._retries.append(now)
            return True


class RetryingGenerator:
    takes_record = True

    def __init__(self, inner, policy: RetryPolicy | None = None, budget: RetryBudget | None = None,
                 *, sleep=asyncio.sleep, clock=time.monotonic, rng: random.Random | None = None):
        self.inner = inner
        self.policy = policy or RetryPolicy()
        self.budget = budget or RetryBudget(clock=clock)
        self.sleep, self.clock = sleep, clock
        self.rng = rng or random.Random()
        self.last_record: CallRecord | None = None  # latest call (any task); see ``attempts``

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def model(self) -> str:
        return self.inner.model

    @property
    def base_url(self) -> str:
        return getattr(self.inner, "base_url", "") or ""

    @property
    def remote(self) -> bool | None:
        return third_party(self.inner)

    @property
    def attempts(self) -> tuple:
        """Attempts of the latest call; concurrent callers read ``usage.attempts`` instead."""
        return tuple(self.last_record.attempts) if self.last_record else ()

    def warm_up(self) -> "RetryingGenerator":
        self.inner.warm_up()
        return self

    def prefill(self, messages: list[dict], fill: float = 1.0,
                epoch: str | None = None) -> dict | None:
        """The wrapped model's ``prefill`` (not retried: warming is best effort), or None."""
        prefill = getattr(self.inner, "prefill", None)
        return prefill(messages, fill, epoch) if prefill is not None else None

    def close(self) -> None:
        """Stop what the generator started (a local model's worker process); idempotent."""
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()

    def _stop_reason(self, err: GenerationError, delivery: Delivery) -> str:
        if not err.retryable:
            return "not retryable"
        if not delivery.may_try_again():
            return "text was already streamed (after_first_token: never)"
        if not self.budget.try_spend():
            return "retry budget exhausted"
        return ""

    async def stream(self, messages, *, max_tokens: int = 256, temperature: float = 0.0,
                     record: CallRecord | None = None):
        p = self.policy
        record = record if record is not None else CallRecord()
        self.last_record = record
        delivery = Delivery(p.after_first_token)
        t0, first = self.clock(), None
        n0 = len(record.attempts)
        self.budget.record_request()
        err: GenerationError | None = None
        for n in range(p.max_attempts):
            if n:
                why = self._stop_reason(err, delivery)
                if why:
                    record.mark_last(error=f"{record.attempts[-1].error} (no retry: {why})")
                    break
                await self.sleep(p.delay(n, self.rng))
            run = AttemptRun(self.inner, record, clock=self.clock,
                             first_token_s=p.first_token_timeout_s, total_s=p.total_timeout_s)
            delivery.begin()
            try:
                async for out in relay(run, delivery, record, messages, max_tokens, temperature):
                    first = first if first is not None else self.clock()
                    yield out
            except GenerationError as e:
                err = e
                continue
            yield ResilientUsage.of(run.usage, record.attempts[n0:],
                                    ((first or self.clock()) - t0) * 1000,
                                    (self.clock() - t0) * 1000, fallback=run.attempts[-1])
            return
        mine = record.attempts[n0:]
        raise AttemptsFailed(f"{self.inner.name}/{self.inner.model} failed after {len(mine)} "
                             f"attempt(s): {describe(mine[-1:])}", mine,
                             retryable=err.retryable if delivery.may_try_again() else False,
                             status=err.status, partial=delivery.text)
