"""Slow down password and API-key guessing without letting a stranger lock a user out.

``LoginThrottle.begin(address, name)`` is called before a password is checked and
either refuses the attempt (``Refused`` with the seconds to wait) or says how long to
hold it first (a soft delay, usually 0). ``finish(address, name, ok)`` books the result.
Every count is a leaky bucket: it drains at a steady rate, so failures decay and
nothing stays locked for long once the guessing stops.

Three buckets, because each alone is wrong:

- per client address: one machine guessing many names is refused;
- per (address, name): one machine guessing one user's password is refused sooner;
- per name, across addresses: only a short *delay*, never a refusal, so somebody who
  knows a user's name cannot lock that user out from another address.

Attempts are charged when they begin, not when bcrypt finishes, so a burst of
concurrent requests cannot slip past a bucket; a successful sign-in is refunded.
``clock`` is injectable for tests.

``KeyThrottle`` does the same for API keys, per client address only (a key names no
user until it is found): ``check(address)`` before the key is looked up raises
``Refused`` once ``PER_ADDRESS_KEYS`` unknown keys came from there, so the key is not
even checked; ``failed(address)`` books an unknown key. A key is 32 random bytes, so
this is less about guessing one than about a flood of lookups and noise in the logs.

Deliberately not here: passwords (``users``), where the address comes from (the web
gate takes the socket's peer address; forwarded headers are not trusted), HTTP.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Bucket:
    """``capacity`` attempts, draining one every ``leak_s`` seconds."""

    capacity: float
    leak_s: float


PER_ADDRESS = Bucket(capacity=20, leak_s=20.0)  # then one try per 20 s from that address
PER_PAIR = Bucket(capacity=5, leak_s=60.0)  # then one try per minute at that name from there
PER_NAME = Bucket(capacity=10, leak_s=30.0)  # past this, attempts on the name are delayed
PER_ADDRESS_KEYS = Bucket(capacity=10, leak_s=30.0)  # bad API keys: then one per 30 s
NAME_DELAY_S = 0.5  # per attempt above the per-name capacity ...
MAX_NAME_DELAY_S = 2.0  # ... and never longer than this
MAX_KEYS = 50_000  # random user names must not grow the tables without bound


class Refused(Exception):
    """Too many attempts; ``retry_after`` seconds until the next one is allowed."""

    def __init__(self, reason: str, retry_after: float):
        super().__init__(f"{reason}: try again in {max(1, round(retry_after))} s")
        self.retry_after = retry_after


class _Levels:
    """Leaky-bucket levels per key: ``level`` drains by 1 every ``bucket.leak_s``."""

    def __init__(self, bucket: Bucket):
        self.bucket = bucket
        self._levels: dict[object, tuple[float, float]] = {}  # key -> (level, as of)

    def level(self, key, now: float) -> float:
        level, then = self._levels.get(key, (0.0, now))
        return max(0.0, level - (now - then) / self.bucket.leak_s)

    def add(self, key, amount: float, now: float) -> None:
        level = max(0.0, self.level(key, now) + amount)
        if level:
            self._levels[key] = (level, now)
        else:
            self._levels.pop(key, None)

    def wait(self, key, now: float) -> float:
        """Seconds until ``key`` has room for one more attempt (0: now)."""
        excess = self.level(key, now) - (self.bucket.capacity - 1)
        return max(0.0, excess * self.bucket.leak_s)

    def prune(self, now: float) -> None:
        if len(self._levels) > MAX_KEYS:
            self._levels = {k: v for k, v in self._levels.items() if self.level(k, now) > 0}
        while len(self._levels) > MAX_KEYS:  # still full: forget the oldest first
            self._levels.pop(next(iter(self._levels)))


class LoginThrottle:
    def __init__(self, clock: Callable[[], float] = time.monotonic, per_address=PER_ADDRESS,
                 per_pair=PER_PAIR, per_name=PER_NAME):
        self.clock = clock
        self._lock = threading.Lock()  # the async gate and threads may both call in
        self._address = _Levels(per_address)
        self._pair = _Levels(per_pair)
        self._name = _Levels(per_name)

    def begin(self, address: str, name: str) -> float:
        """Charge one attempt and return the soft delay (seconds) to hold it;
        raise ``Refused`` (charging nothing) when the address is over its limit."""
        with self._lock:
            now = self.clock()
            for levels, key, why in (
                    (self._address, address, "too many failed sign-ins from this address"),
                    (self._pair, (address, name), f"too many failed sign-ins as '{name}'")):
                wait = levels.wait(key, now)
                if wait > 0:
                    raise Refused(why, wait)
            excess = self._name.level(name, now) - (self._name.bucket.capacity - 1)
            for levels, key in ((self._address, address), (self._pair, (address, name)),
                                (self._name, name)):
                levels.add(key, 1, now)
                levels.prune(now)
            return min(MAX_NAME_DELAY_S, max(0.0, excess) * NAME_DELAY_S)

    def finish(self, address: str, name: str, ok: bool) -> None:
        """Book the result of an attempt ``begin`` let through."""
        if not ok:
            return  # already charged
        with self._lock:
            now = self.clock()
            self._address.add(address, -1, now)
            self._name.add(name, -1, now)
            self._pair.add((address, name), -self._pair.bucket.capacity, now)  # a fresh start


class KeyThrottle:
    def __init__(self, clock: Callable[[], float] = time.monotonic, per_address=PER_ADDRESS_KEYS):
        self.clock = clock
        self._lock = threading.Lock()
        self._address = _Levels(per_address)

    def check(self, address: str) -> None:
        """Raise ``Refused`` while ``address`` has used up its bad keys."""
        with self._lock:
            wait = self._address.wait(address, self.clock())
        if wait > 0:
            raise Refused("too many bad API keys from this address", wait)

    def failed(self, address: str) -> None:
        """Book an unknown key from ``address``."""
        with self._lock:
            now = self.clock()
            self._address.add(address, 1, now)
            self._address.prune(now)
