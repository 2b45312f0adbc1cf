"""Load balancing across several endpoints of the same tier: the order to try them in.

A balancer only orders member indices for one call; ``FallbackGenerator`` then tries
them in that order (skipping open circuits), so an endpoint that fails still falls
through to its siblings. ``round-robin`` rotates the starting member per call.
``least-latency`` prefers the lowest moving average of time to first token, and sends
every member without a sample yet first so each gets measured. Thread-safe.

Deliberately not here: health (``breaker``), weights or sticky sessions.
"""

from __future__ import annotations

import itertools
import threading

STRATEGIES = ("ordered", "round-robin", "least-latency")


class Ordered:
    """The failover chain's order: always the configured one."""

    def order(self, n: int) -> list[int]:
        return list(range(n))

    def observe(self, index: int, latency_ms: float) -> None:
        pass


class RoundRobin(Ordered):
    def __init__(self):
        self._next = itertools.count()
        self._lock = threading.Lock()

    def order(self, n: int) -> list[int]:
        with self._lock:
            start = next(self._next) % n
        return [(start + i) % n for i in range(n)]


class LeastLatency(Ordered):
    def __init__(self, alpha: float = 0.3):
        self.alpha = alpha  # weight of the newest sample in the moving average
        self._avg: dict[int, float] = {}
        self._lock = threading.Lock()

    def order(self, n: int) -> list[int]:
        with self._lock:
            avg = dict(self._avg)
        return sorted(range(n), key=lambda i: (i in avg, avg.get(i, 0.0), i))

    def observe(self, index: int, latency_ms: float) -> None:
        with self._lock:
            old = self._avg.get(index)
            self._avg[index] = latency_ms if old is None else (
                self.alpha * latency_ms + (1 - self.alpha) * old)


def make_balancer(strategy: str) -> Ordered:
    if strategy not in STRATEGIES:
        raise ValueError(f"balance must be one of {', '.join(STRATEGIES)}, got '{strategy}'")
    return {"ordered": Ordered, "round-robin": RoundRobin, "least-latency": LeastLatency}[strategy]()
