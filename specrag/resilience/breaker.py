"""A circuit breaker driven by latency and failures: closed -> open -> half-open -> closed.

``CircuitBreaker`` keeps a rolling window of the backend's latencies (time to first
token, or time to failure: what a user waits for; total time depends on the answer's
length). It opens when the window's p99 exceeds ``p99_ms`` (default 2,000 ms, with at
least ``min_samples`` in the window) or after ``failures`` consecutive failures. While
open, ``allow()`` says no and the failover chain routes to the next backend. After
``open_s`` it turns half-open: up to ``probes`` calls go through; if they all come
back healthy and fast it closes with a fresh window, otherwise it opens again.

Samples older than ``window_s`` drop out, so an old slow spell does not keep it open.
The clock is injectable for tests. Thread-safe.

Deliberately not here: which backend comes next (``failover``).
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from dataclasses import dataclass

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half-open"


@dataclass(frozen=True)
class Transition:
    at: float  # the breaker's clock
    old: str
    new: str
    reason: str


def p99(values) -> float | None:
    """Nearest-rank 99th percentile."""
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]


class CircuitBreaker:
    def __init__(self, name: str = "", *, p99_ms: float = 2000.0, window: int = 100,
                 window_s: float = 60.0, min_samples: int = 10, failures: int = 5,
                 open_s: float = 30.0, probes: int = 1, clock=time.monotonic):
        self.name = name
        self.p99_ms, self.window_s, self.min_samples = p99_ms, window_s, min_samples
        self.failures, self.open_s, self.probes = failures, open_s, probes
        self.clock = clock
        self._samples: deque[tuple[float, float]] = deque(maxlen=window)  # (at, latency_ms)
        self._state = CLOSED
        self._opened_at = 0.0
        self._consecutive = 0
        self._probes_out = 0
        self._probes_ok = 0
        self.transitions: list[Transition] = []
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, name: str, r, clock=time.monotonic, *,
                      latency: bool = True) -> "CircuitBreaker":
        """``latency=False``: open on failures only (a local model's speed is the
        machine's, not a sign of an outage)."""
        return cls(name, p99_ms=r.breaker_p99_ms if latency else math.inf, window=r.breaker_window,
                   window_s=r.breaker_window_s, min_samples=r.breaker_min_samples,
                   failures=r.breaker_failures, open_s=r.breaker_open_s,
                   probes=r.breaker_probes, clock=clock)

    # -- state ------------------------------------------------------------------------
    @property
    def state(self) -> str:
        with self._lock:
            self._tick()
            return self._state

    @property
    def consecutive_failures(self) -> int:
        with self._lock:
            return self._consecutive

    def p99_ms_now(self) -> float | None:
        with self._lock:
            self._trim()
            return p99(v for _, v in self._samples)

    def _move(self, new: str, reason: str) -> None:
        self.transitions.append(Transition(self.clock(), self._state, new, reason))
        self._state = new
        if new == OPEN:
            self._opened_at = self.clock()
        if new in (HALF_OPEN, CLOSED):
            self._probes_out = self._probes_ok = 0
        if new == CLOSED:
            self._samples.clear()  # judge the recovered backend on fresh samples
            self._consecutive = 0

    def _tick(self) -> None:
        if self._state == OPEN and self.clock() - self._opened_at >= self.open_s:
            self._move(HALF_OPEN, f"{self.open_s:g} s elapsed")

    def _trim(self) -> None:
        horizon = self.clock() - self.window_s
        while self._samples and self._samples[0][0] < horizon:
            self._samples.popleft()

    # -- the two verbs ----------------------------------------------------------------
    def allow(self) -> bool:
        """May a call go to this backend now? (A yes in half-open reserves a probe.)"""
        with self._lock:
            self._tick()
            if self._state == CLOSED:
                return True
            if self._state == HALF_OPEN and self._probes_out < self.probes:
                self._probes_out += 1
                return True
            return False

    def record(self, latency_ms: float, ok: bool) -> None:
        """The outcome of one attempt at this backend."""
        with self._lock:
            self._tick()
            slow = latency_ms > self.p99_ms
            if self._state == HALF_OPEN:
                if ok and not slow:
                    self._probes_ok += 1
                    if self._probes_ok >= self.probes:
                        self._move(CLOSED, f"{self._probes_ok} healthy probe(s)")
                else:
                    why = "probe failed" if not ok else f"probe took {latency_ms:.0f} ms"
                    self._move(OPEN, why)
                return
            if self._state == OPEN:  # a call that started before it opened
                return
            self._samples.append((self.clock(), latency_ms))
            self._consecutive = 0 if ok else self._consecutive + 1
            self._trim()
            if self._consecutive >= self.failures:
                self._move(OPEN, f"{self._consecutive} consecutive failures")
                return
            if len(self._samples) >= self.min_samples:
                q = p99(v for _, v in self._samples)
                if q > self.p99_ms:
                    self._move(OPEN, f"p99 {q:.0f} ms > {self.p99_ms:.0f} ms "
                                     f"over {len(self._samples)} calls")

    def release(self) -> None:
        """A half-open probe ended without telling anything (cancelled): free its slot."""
        with self._lock:
            if self._state == HALF_OPEN and self._probes_out > self._probes_ok:
                self._probes_out -= 1
