"""Parse each upload in a separate process with a time and a memory limit.

The parsers' own caps (``limits``) stop the hostile files we know of early. This is the
bound for the ones we do not: ``parse_isolated(data, filename, ...)`` sends the bytes to
a parser process (``parse_child``), which caps its address space at
``chunking.parse_memory_mb``; the caller waits at most ``chunking.parse_timeout_s`` and
kills it after that. A file that hits a limit, or crashes the parser's native code
(lxml, pypdf's decoders), fails alone with one line; the next file gets a fresh process.
Idle processes are kept for reuse (starting one costs about half a second of imports), a
few at most, so concurrent uploads never wait on each other's parse.

The child is a fresh interpreter (``python -m``), not ``multiprocessing``'s ``spawn``
(that re-runs the user's main script) or ``fork`` (a threaded server's locks would be
copied held); it exits when the parent goes away.

Deliberately not here: the parsing itself (``parsers``), chunking and embedding, which
run in the caller's process on the returned ``ParsedDocument``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path

from specrag.types import IngestError, ParsedDocument

MAX_IDLE = 2  # parser processes kept for the next upload
POLL_S = 0.2


def describe_exit(code: int | None) -> str:
    """How a child process ended, as the end of a sentence ("was killed by SIGKILL")."""
    if code is None:
        return "is unresponsive"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


class ParserProcess:
    """One child parser; ``parse`` raises ``IngestError`` for every way it can fail."""

    def __init__(self, memory_mb: int):
        self.memory_mb = memory_mb
        mine, theirs = socket.socketpair()
        root = str(Path(__file__).resolve().parents[2])  # the child imports this specrag
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (root, os.environ.get("PYTHONPATH", "")) if p)}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "specrag.ingest.parse_child", str(theirs.fileno()),
             str(memory_mb)], pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, env=env)
        theirs.close()  # only the child holds its end: its death reads as EOF here
        self._conn = Connection(mine.detach())

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None

    def parse(self, source: str, timeout_s: float, **kwargs) -> ParsedDocument:
        # sent from a thread: a child that gives up mid-message (too big for its memory
        # cap) answers while a large upload is still being written, and a blocking send
        # here would wait for it forever
        sender = threading.Thread(target=self._send, args=(("parse", kwargs),), daemon=True)
        sender.start()
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if self._conn.poll(POLL_S):
                    kind, value = self._conn.recv()
                    break
            except (EOFError, OSError):
                raise self._died(source) from None
            if not self.alive:
                raise self._died(source)
            if time.monotonic() > deadline:
                self._reap()
                raise IngestError(f"{source}: parsing took longer than {timeout_s:g} s (the "
                                  "limit is chunking.parse_timeout_s); the file was skipped")
        sender.join(POLL_S)
        if sender.is_alive():  # it answered before reading all of it: out of step, so end it
            self._reap()
        if kind == "ok":
            return value
        if kind == "memory":
            raise IngestError(f"{source}: needs more than {self.memory_mb} MB of memory to "
                              "parse (the limit is chunking.parse_memory_mb)")
        raise IngestError(value)

    def _send(self, message) -> None:
        try:
            self._conn.send(message)
        except (OSError, ValueError):  # closed or dead: ``parse`` reports the child
            pass

    def _died(self, source: str) -> IngestError:
        try:
            code = self._proc.wait(5)  # before ``_reap``, whose kill would mask the cause
        except subprocess.TimeoutExpired:
            code = None
        self._reap()
        return IngestError(f"{source}: the parser process {describe_exit(code)} while "
                           "reading this file")

    def _reap(self) -> None:
        self._conn.close()
        if self._proc.poll() is None:
            self._proc.kill()
        try:
            self._proc.wait(5)
        except subprocess.TimeoutExpired:
            pass

    def close(self) -> None:
        try:
            self._conn.send(("close", None))
            self._proc.wait(2)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self._reap()


class ParserPool:
    """Idle parser processes by memory limit; a busy caller never waits for another's."""

    def __init__(self, max_idle: int = MAX_IDLE):
        self.max_idle = max_idle
        self.started = 0
        self._idle: list[ParserProcess] = []
        self._lock = threading.Lock()

    def _take(self, memory_mb: int) -> ParserProcess:
        with self._lock:
            for i, proc in enumerate(self._idle):
                if proc.memory_mb == memory_mb and proc.alive:
                    return self._idle.pop(i)
            self.started += 1
        return ParserProcess(memory_mb)

    def _give_back(self, proc: ParserProcess) -> None:
        with self._lock:
            if proc.alive and len(self._idle) < self.max_idle:
                self._idle.append(proc)
                return
        proc.close()

    def parse(self, data: bytes, filename: str, *, timeout_s: float, memory_mb: int,
              **limits) -> ParsedDocument:
        proc = self._take(memory_mb)
        try:
            doc = proc.parse(filename, timeout_s, data=data, filename=filename, **limits)
        except IngestError:
            if proc.alive:
                self._give_back(proc)  # a refused file leaves a healthy child
            raise
        self._give_back(proc)
        return doc

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for proc in idle:
            proc.close()


POOL = ParserPool()


def parse_isolated(data: bytes, filename: str, *, timeout_s: float, memory_mb: int,
                   **limits) -> ParsedDocument:
    """``parsers.parse_bytes`` in a parser process of the shared pool."""
    return POOL.parse(data, filename, timeout_s=timeout_s, memory_mb=memory_mb, **limits)
