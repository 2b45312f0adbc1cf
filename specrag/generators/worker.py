"""A local model in its own process, so a crash in native code cannot take the app down.

llama.cpp is C++: a bad build, an unlucky CPU path (the AMX weight-repacking fault on
some virtualised Intel hosts), a GGUF a user points at, or the kernel's OOM killer can
end the process that runs it. ``ModelWorker`` keeps that process separate from the web
server: a fresh interpreter (``python -m specrag.generators.worker_child FD``, the
child's side) loads the model once and answers requests over a socket pair wrapped in a
``multiprocessing`` ``Connection``. Not ``multiprocessing``'s ``spawn``: that re-runs the parent's main
script in the child, so a user's three-line script without an ``if __name__ ==
"__main__"`` guard would start the whole pipeline again in every worker. Not ``fork``
either: a forked copy of a threaded web server can inherit held locks.

- ``generate(request, stop)`` is a blocking iterator of ``("delta", text)`` items ending
  with one ``("usage", dict)``; setting ``stop`` sends a cancel, and the child stops
  within one token. One request runs at a time (a llama.cpp context is not
  thread-safe); a second caller waits on the lock, which is the queue.
- When the child dies (any signal, any exit), the caller gets ``WorkerDied``, a
  retryable ``GenerationError`` with one line saying how it died. The dead child is
  reaped and the next request starts a fresh one, so the next question works.
- The child exits by itself when the parent goes away (its pipe reads EOF), so a
  ``kill -9`` of the app leaves no model process behind.

Deliberately not here: the child's side (``worker_child``), prompts, token accounting
beyond what llama.cpp reports, the choice of backend (``llamacpp``), retries and
failover (``resilience``).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Iterator

from specrag.generators.base import GenerationError

log = logging.getLogger(__name__)

POLL_S = 0.2  # how often a waiting parent checks that the child is still alive
_LIVE: "weakref.WeakSet[ModelWorker]" = weakref.WeakSet()


def workers() -> list["ModelWorker"]:
    """Every model worker of this process (for the app's model panel, tests and shutdown)."""
    return list(_LIVE)


class WorkerDied(GenerationError):
    """The model's process ended while it had work; the next request restarts it."""

    def __init__(self, message: str):
        super().__init__(message, retryable=True)


def describe_exit(code: int | None) -> str:
    if code is None:
        return "is unresponsive"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


class ModelWorker:
    def __init__(self, model_path: str, params: dict, *, label: str = "",
                 start_timeout_s: float = 600.0):
        self.model_path = str(model_path)
        self.params = dict(params)  # keyword arguments of ``llama_cpp.Llama``
        self.label = label or self.model_path
        self.start_timeout_s = start_timeout_s
        self.starts = 0  # children started so far
        self.busy = False  # a request is in flight
        self.prefilling = False  # a prefill is in flight: a question may stop it (``preempt``)
        self._waiters = 0  # requests waiting for ``_lock``: a prefill that gets it first yields
        self._waiters_lock = threading.Lock()
        self._proc = None
        self._conn = None
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()  # ``preempt`` sends while a prefill holds ``_lock``
        _LIVE.add(self)

    # -- lifecycle ----------------------------------------------------------------------
    @property
    def restarts(self) -> int:
        """Fresh children started after the first (each one after a death)."""
        return max(0, self.starts - 1)

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def _alive(self) -> bool:
        proc = self._proc  # read once: a question's ``warm_up`` reads it without the lock
        return proc is not None and proc.poll() is None

    def start(self) -> "ModelWorker":
        """Start the child and wait until its model is loaded (idempotent)."""
        with self._lock:
            self._ensure()
        return self

    def _ensure(self) -> None:
        if self._alive():
            return
        if self._proc is not None:
            self._reap()
        mine, theirs = socket.socketpair()
        t0 = time.perf_counter()
        # the child imports this very copy of specrag, installed or not
        root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (root, os.environ.get("PYTHONPATH", "")) if p)}
        proc = subprocess.Popen([sys.executable, "-m", "specrag.generators.worker_child",
                                 str(theirs.fileno())], pass_fds=[theirs.fileno()],
                                stdin=subprocess.DEVNULL, env=env)
        self.starts += 1
        theirs.close()  # only the child holds its end now: its death reads as EOF here
        conn = Connection(mine.detach())
        try:  # before ``_conn`` is set: a ``preempt`` must not come first
            conn.send(("load", 0, {"model_path": self.model_path, "params": self.params}))
        except OSError:
            pass  # a dead child is reported by the next ``_recv``
        self._proc, self._conn = proc, conn
        try:
            kind, _, info = self._recv(self.start_timeout_s, "loading")
        except WorkerDied:
            self._reap()
            raise
        if kind == "error":
            self._reap()
            raise GenerationError(f"{self.label}: the model could not be loaded: {info}")
        log.info("model worker %s (pid %s) ready in %.1f s", self.label, proc.pid,
                 time.perf_counter() - t0)

    def _reap(self) -> None:
        proc, conn = self._proc, self._conn
        with self._send_lock:  # a ``preempt`` from another thread is not mid-send
            self._proc = self._conn = None
            if conn is not None:
                conn.close()
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                log.warning("model worker %s (pid %s) did not exit", self.label, proc.pid)

    def close(self) -> None:
        self.preempt()  # shutting down need not wait for the rest of a warming prefill
        with self._lock:
            self._send(("close", 0, None))
            if self._proc is not None:
                try:
                    self._proc.wait(2)
                except subprocess.TimeoutExpired:
                    pass
            self._reap()

    # -- talking to the child -----------------------------------------------------------
    def _recv(self, timeout_s: float | None, doing: str):
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            try:
                if self._conn.poll(POLL_S):
                    return self._conn.recv()
            except (EOFError, OSError):
                pass  # the child closed its end: it is gone or going
            else:
                if self._proc.poll() is None:
                    if deadline is not None and time.monotonic() > deadline:
                        self._proc.kill()
                    else:
                        continue
            try:
                code = self._proc.wait(5)
            except subprocess.TimeoutExpired:
                code = None
            why = describe_exit(code)
            self._reap()
            raise WorkerDied(f"the local model process ({self.label}) {why} while {doing}; "
                             "it restarts for the next question")

    def _send(self, message) -> None:
        try:
            with self._send_lock:
                if self._conn is not None:  # None: reaped meanwhile (``preempt``)
                    self._conn.send(message)
        except OSError:
            pass  # a dead child is reported by the next ``_recv``

    def generate(self, request: dict, stop: threading.Event) -> Iterator[tuple[str, object]]:
        """Stream one chat completion; ``request`` holds ``messages``, ``max_tokens``,
        ``temperature`` and ``reset`` (drop the cached prompt prefix first)."""
        with self._turn():
            self._ensure()
            rid = next(self._ids)
            self._send(("generate", rid, request))
            finished = cancel_sent = False
            self.busy = True
            try:
                while True:
                    if stop.is_set() and not cancel_sent:
                        self._send(("cancel", rid, None))
                        cancel_sent = True
                    kind, got, payload = self._recv(None, "generating")
                    if got != rid:
                        continue  # a late reply to an earlier, abandoned request
                    if kind == "delta":
                        yield "delta", payload
                    elif kind == "usage":
                        finished = True
                        yield "usage", payload
                        return
                    else:
                        finished = True
                        raise GenerationError(f"{self.label}: {payload}")
            finally:
                if not finished and self._proc is not None:
                    self._abandon(rid)
                self.busy = False

    def _abandon(self, rid: int) -> None:
        """The consumer left mid-stream: cancel, and wait for the end so the next request
        starts clean; a child that does not stop within seconds is killed."""
        self._send(("cancel", rid, None))
        try:
            while True:
                kind, got, _ = self._recv(10.0, "stopping")
                if got == rid and kind in ("usage", "error"):
                    return
        except WorkerDied:
            pass

    def prefill(self, request: dict) -> dict | None:
        """Evaluate a prompt only to keep its state in the child (``worker_child.prefill``;
        ``request`` holds ``messages`` and ``fill``); outcome "interrupted" when another
        request came meanwhile (``preempt``)."""
        with self._lock:
            self.prefilling = True  # before the look at ``_waiters``: see ``preempt``
            try:
                if self._waiters:  # a question came between the warmer's look and now
                    return {"outcome": "interrupted"}
                return self._exchange("prefill", request, 120.0, "prefilling")
            finally:
                self.prefilling = False

    def preempt(self) -> None:
        """Stop a prefill in flight so the caller's request goes next (a question waits
        ~10-20 ms, not the rest of a chunk's prompt). Sent outside the lock the prefill
        holds; the child reads it only as "a request is waiting"."""
        if self.prefilling:
            self._send(("interrupt", 0, None))

    @contextlib.contextmanager
    def _turn(self):
        """``_lock`` for a request that goes before any warming prefill: counted as
        waiting first (a prefill about to start yields), then a prefill in flight stopped."""
        with self._waiters_lock:  # read by ``prefill`` after it set ``prefilling``
            self._waiters += 1
        try:
            self.preempt()
            self._lock.acquire()
        finally:
            with self._waiters_lock:
                self._waiters -= 1
        try:
            yield
        finally:
            self._lock.release()

    def tokenize(self, text: str) -> int:
        with self._turn():
            return int(self._exchange("tokenize", text, 60.0, "tokenizing"))

    def _exchange(self, op: str, payload, timeout_s: float, doing: str):
        """Send one request that has one reply, and return the reply (under ``_lock``)."""
        self._ensure()
        rid = next(self._ids)
        self._send((op, rid, payload))
        while True:
            kind, got, reply = self._recv(timeout_s, doing)
            if got == rid:
                if kind == "error":
                    raise GenerationError(f"{self.label}: {reply}")
                return reply
