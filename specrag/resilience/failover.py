"""Failover over an ordered list of generators, with circuit breakers and load balancing.

``FallbackGenerator([claude, backup, local])`` implements the generator Protocol: each
call tries the members in order (or in a balancer's order, for a pool of endpoints of
the same tier) until one answers, like Haystack's ``FallbackChatGenerator``. Every
try is an ``Attempt`` (backend, model, error, retryable, latency_ms, ...) in the
call's record; the call ends with a ``ResilientUsage`` whose ``attempts`` list them
all, or raises ``AttemptsFailed`` carrying them. Any error moves on to the next member
(a 401 at one provider says nothing about the next); retrying the *same* member is
the member's job (wrap it in ``RetryingGenerator``).

Each member has a ``CircuitBreaker`` fed with its attempts' latencies: a member whose
rolling p99 is too high, or that keeps failing, is skipped (recorded as ``skipped``)
until a half-open probe finds it healthy again. Members skipped for an open circuit
are still tried, last, when all the others failed (fail-open: a slow answer beats
none). Text already streamed is never repeated (see ``delivery``).

Deliberately not here: building chains from settings (``chains``), retries.
"""

from __future__ import annotations

import time

from specrag.generators.base import GenerationError
from specrag.resilience.attempts import (
    Attempt,
    AttemptRun,
    AttemptsFailed,
    CallRecord,
    ResilientUsage,
    describe,
    third_party,
)
from specrag.resilience.balance import Ordered
from specrag.resilience.breaker import CircuitBreaker
from specrag.resilience.delivery import Delivery, relay

HEALTH_OUTCOMES = {"ok", "error", "timeout"}  # diverged / cancelled say nothing of health


class FallbackGenerator:
    takes_record = True

    def __init__(self, members: list, *, breakers: list[CircuitBreaker] | None = None,
                 balancer: Ordered | None = None, after_first_token: str = "resume",
                 clock=time.monotonic, name: str | None = None):
        if not members:
            raise ValueError("a failover chain needs at least one generator")
        self.members = list(members)
        self.breakers = breakers or [CircuitBreaker(getattr(m, "name", str(i)), clock=clock)
                                     for i, m in enumerate(self.members)]
        self.balancer = balancer or Ordered()
        self.after_first_token = after_first_token
        self.clock = clock
        self._name = name
        self.unavailable: dict[int, str] = {}  # member index -> why its warm-up failed
        self.last_record: CallRecord | None = None

    # the chain presents itself as its preferred member (cost estimates, logs)
    @property
    def name(self) -> str:
        return self._name or self.members[0].name

    @property
    def model(self) -> str:
        return self.members[0].model

    @property
    def remote(self) -> bool | None:
        """Any member may be a third party: the whole chain is treated as one (redaction)."""
        flags = [third_party(m) for m in self.members]
        return None if None in flags else any(flags)

    @property
    def attempts(self) -> tuple:
        """Attempts of the latest call; concurrent callers read ``usage.attempts`` instead."""
        return tuple(self.last_record.attempts) if self.last_record else ()

    def warm_up(self) -> "FallbackGenerator":
        """Warm every member; one that cannot start (no API key, no model) is noted, not fatal."""
        errors = []
        for i, member in enumerate(self.members):
            if i in self.unavailable:
                continue
            try:
                member.warm_up()
            except Exception as err:  # noqa: BLE001 - the chain lives on without it
                self.unavailable[i] = f"{type(err).__name__}: {err}"
                errors.append(err)
        if len(self.unavailable) == len(self.members):
            raise errors[0] if errors else GenerationError("no member of the chain could start")
        return self

    def prefill(self, messages: list[dict], fill: float = 1.0,
                epoch: str | None = None) -> dict | None:
        """The first available member's ``prefill``, the one that answers first when all is
        well; None when it keeps no prompt states or its breaker is open (a failing model
        is not warmed)."""
        for i, member in enumerate(self.members):
            if i not in self.unavailable:
                prefill = getattr(member, "prefill", None)
                if prefill is None or self.breakers[i].state == "open":
                    return None
                return prefill(messages, fill, epoch)
        return None

    def close(self) -> None:
        """Close every member that holds something (a worker process); one member's error
        does not keep the others open."""
        for member in self.members:
            close = getattr(member, "close", None)
            if close is None:
                continue
            try:
                close()
            except Exception:  # noqa: BLE001, S110 - closing is best effort, on every member
                pass

    def _feed(self, index: int, attempts, reserved: bool = True) -> None:
        breaker = self.breakers[index]
        told = False
        for a in attempts:
            if a.outcome in HEALTH_OUTCOMES:
                breaker.record(a.health_latency_ms, a.ok)
                told = True
                if a.ttft_ms is not None:
                    self.balancer.observe(index, a.ttft_ms)
        if not told and reserved:
            breaker.release()

    def _plan(self) -> list[tuple[int, bool]]:
        """(member, forced) in the order to try; open circuits only as a last resort."""
        order = [i for i in self.balancer.order(len(self.members)) if i not in self.unavailable]
        return [(i, False) for i in order] + [(i, True) for i in order]

    async def stream(self, messages, *, max_tokens: int = 256, temperature: float = 0.0,
                     record: CallRecord | None = None):
        record = record if record is not None else CallRecord()
        self.last_record = record
        delivery = Delivery(self.after_first_token)
        t0, first, n0 = self.clock(), None, len(record.attempts)
        tried: set[int] = set()
        err: GenerationError | None = None
        for index, forced in self._plan():
            member = self.members[index]
            if index in tried:
                continue  # the forced pass only reaches members skipped for an open circuit
            if not forced and not self.breakers[index].allow():
                record.add(Attempt(member.name, member.model, error="circuit open",
                                   outcome="skipped", endpoint=str(getattr(member, "base_url", ""))))
                continue
            tried.add(index)
            run = AttemptRun(member, record, clock=self.clock)
            delivery.begin()
            try:
                async for out in relay(run, delivery, record, messages, max_tokens, temperature):
                    first = first if first is not None else self.clock()
                    yield out
            except GenerationError as e:
                err = e
                self._feed(index, run.attempts, not forced)
                if not delivery.may_try_again():
                    break
                continue
            except BaseException:  # cancelled: free a half-open probe, then go
                self._feed(index, run.attempts, not forced)
                raise
            self._feed(index, run.attempts, not forced)
            yield ResilientUsage.of(run.usage, record.attempts[n0:],
                                    ((first or self.clock()) - t0) * 1000,
                                    (self.clock() - t0) * 1000, fallback=run.attempts[-1])
            return
        mine = record.attempts[n0:]
        if err is None:
            err = GenerationError("no member of the chain is available: "
                                  + "; ".join(self.unavailable.values()))
        raise AttemptsFailed(f"every backend failed ({len(mine)} attempts): {describe(mine)}"[:1000],
                             mine, retryable=False, status=err.status, partial=delivery.text)
