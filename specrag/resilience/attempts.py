"""What one try at a backend did, and the per-call record the resilience wrappers share.

Every wrapper (retry, failover, pool, the observers) works in terms of ``Attempt``
records: which backend and model, how long, time to first token, tokens, and why it
failed. One generation call owns one ``CallRecord``; wrappers pass it down explicitly
(``stream(..., record=rec)``, only to generators with ``takes_record``) so nested
layers append to the same list and nothing is shared between concurrent calls.
``AttemptRun`` runs one call of one generator with first-token / total timeouts and
appends an ``Attempt`` for it unless a resilient inner layer already did.

The results reach the caller on the stream itself: a successful call ends with a
``ResilientUsage`` (a ``Usage`` with ``attempts``), a failed one raises
``AttemptsFailed`` (a ``GenerationError`` with ``attempts``).

Deliberately not here: the retry or failover decisions (``retry``, ``failover``).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, replace

from specrag.generators.base import GenerationError, Usage
from specrag.generators.costs import estimate_tokens
from specrag.security.redacting import is_third_party

OUTCOMES = ("ok", "error", "timeout", "diverged", "skipped", "cancelled")


@dataclass(frozen=True)
class Attempt:
    backend: str
    model: str
    error: str = ""  # empty when it succeeded
    retryable: bool = False
    latency_ms: float = 0.0  # start of the attempt to its end (success, failure or cancel)
    ttft_ms: float | None = None  # None: no token arrived
    status: int | None = None  # HTTP status when the backend reported one
    outcome: str = "ok"  # one of OUTCOMES
    input_tokens: int = 0
    output_tokens: int = 0
    started_ns: int = 0  # wall clock (time.time_ns) for spans
    endpoint: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"

    @property
    def health_latency_ms(self) -> float:
        """What a circuit breaker should see: time to first token, else time to failure."""
        return self.ttft_ms if self.ttft_ms is not None else self.latency_ms


@dataclass(frozen=True)
class ResilientUsage(Usage):
    """The usage of the attempt that answered, plus every attempt of the call."""

    attempts: tuple[Attempt, ...] = ()

    @classmethod
    def of(cls, usage: Usage | None, attempts, ttft_ms: float, total_ms: float,
           fallback: Attempt | None = None) -> "ResilientUsage":
        base = usage or Usage(fallback.backend if fallback else "", fallback.model if fallback else "",
                              fallback.input_tokens if fallback else 0,
                              fallback.output_tokens if fallback else 0)
        return cls(base.backend, base.model, base.input_tokens, base.output_tokens, ttft_ms,
                   total_ms, base.cancelled, logprobs=base.logprobs, state_tokens=base.state_tokens,
                   attempts=tuple(attempts))


class AttemptsFailed(GenerationError):
    """Every attempt of a call failed (or it could not go on without repeating text)."""

    def __init__(self, message: str, attempts, *, retryable: bool = False,
                 status: int | None = None, partial: str = ""):
        super().__init__(message, retryable=retryable, status=status)
        self.attempts = tuple(attempts)
        self.partial = partial  # text the caller had already received


class Diverged(GenerationError):
    """A retry produced different text than what the caller had already been shown."""

    def __init__(self, message: str):
        super().__init__(message, retryable=False)


class CallRecord:
    """The attempts of one generation call, shared by the wrappers it passes through."""

    def __init__(self):
        self.attempts: list[Attempt] = []

    def add(self, attempt: Attempt) -> None:
        self.attempts.append(attempt)

    def mark_last(self, **changes) -> None:
        if self.attempts:
            self.attempts[-1] = replace(self.attempts[-1], **changes)


def third_party(gen) -> bool | None:
    """Whether calls through ``gen`` may leave this machine (``security.redacting`` reads a
    wrapper's ``remote``)."""
    return is_third_party(gen)


def describe(attempts) -> str:
    """``anthropic/claude: 529 overloaded; openai/qwen: ok`` for error messages and logs."""
    return "; ".join(f"{a.backend}/{a.model}: {a.error or a.outcome}" for a in attempts)


def as_generation_error(err: BaseException, who: str) -> GenerationError:
    """Backends raise ``GenerationError``; anything else is classified here."""
    if isinstance(err, GenerationError):
        return err
    # a malformed payload or a dropped socket is a transient transport problem
    transient = isinstance(err, (json.JSONDecodeError, ConnectionError, TimeoutError))
    return GenerationError(f"{who}: {type(err).__name__}: {err}"[:300], retryable=transient)


class AttemptRun:
    """One call of one generator: timeouts, timing, and its ``Attempt`` in ``record``."""

    def __init__(self, gen, record: CallRecord, *, clock=time.monotonic,
                 first_token_s: float | None = None, total_s: float | None = None):
        self.gen, self.record, self.clock = gen, record, clock
        self.first_token_s, self.total_s = first_token_s, total_s
        self.usage: Usage | None = None
        self.ttft_ms: float | None = None
        self.chunks = 0
        self._n0 = len(record.attempts)

    @property
    def attempts(self) -> list[Attempt]:
        """The attempts this run added (one, or several when the generator retries itself)."""
        return self.record.attempts[self._n0:]

    def _timeout(self, t0: float) -> float | None:
        limits = []
        if self.total_s is not None:
            limits.append(t0 + self.total_s - self.clock())
        if self.ttft_ms is None and self.first_token_s is not None:
            limits.append(t0 + self.first_token_s - self.clock())
        return max(0.0, min(limits)) if limits else None

    async def stream(self, messages, **kw):
        """Yield the generator's text; keep its ``Usage``; always leave one attempt behind."""
        t0, started_ns = self.clock(), time.time_ns()
        if getattr(self.gen, "takes_record", False):
            kw["record"] = self.record
        agen = self.gen.stream(messages, **kw)
        error: GenerationError | None = None
        outcome = "ok"
        try:
            while True:
                limit = self._timeout(t0)
                try:
                    async with asyncio.timeout(limit):
                        item = await agen.__anext__()
                except StopAsyncIteration:
                    break
                except TimeoutError:
                    first = self.ttft_ms is None and self.first_token_s is not None and (
                        self.total_s is None or self.first_token_s <= self.total_s)
                    what = (f"no first token within {self.first_token_s:g} s" if first else
                            f"not finished within {self.total_s:g} s")
                    error = GenerationError(f"{self.gen.name}: {what}", retryable=True)
                    outcome = "timeout"
                    raise error from None
                if isinstance(item, Usage):
                    self.usage = item
                    continue
                if self.ttft_ms is None:
                    self.ttft_ms = (self.clock() - t0) * 1000
                self.chunks += 1
                yield item
        except (asyncio.CancelledError, GeneratorExit):
            outcome = "cancelled"
            raise
        except GenerationError as err:
            error, outcome = err, (outcome if outcome == "timeout" else "error")
            raise
        except Exception as err:  # noqa: BLE001 - classified, then re-raised as GenerationError
            error, outcome = as_generation_error(err, self.gen.name), "error"
            raise error from err
        finally:
            await agen.aclose()
            if not self.attempts:  # a resilient inner layer records its own attempts
                self.record.add(self._attempt(messages, t0, started_ns, outcome, error))

    def _attempt(self, messages, t0, started_ns, outcome, error) -> Attempt:
        u = self.usage
        billed = self.chunks > 0 or u is not None  # a request that streamed text was billed
        return Attempt(
            backend=u.backend if u else getattr(self.gen, "name", ""),
            model=u.model if u else getattr(self.gen, "model", ""),
            error=str(error) if error else ("cancelled" if outcome == "cancelled" else ""),
            retryable=bool(error and error.retryable), latency_ms=(self.clock() - t0) * 1000,
            ttft_ms=self.ttft_ms, status=getattr(error, "status", None), outcome=outcome,
            input_tokens=u.input_tokens if u else (estimate_tokens(messages) if billed else 0),
            output_tokens=u.output_tokens if u else self.chunks, started_ns=started_ns,
            endpoint=str(getattr(self.gen, "base_url", "") or ""))
