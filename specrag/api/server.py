"""How ``specrag serve`` runs the endpoint under uvicorn: limits on what a client half-sends.

``server_config(app, settings, host, port)`` is the ``uvicorn.Config`` the command runs.
uvicorn (0.55) times out an idle keep-alive connection (``timeout_keep_alive``, 5 s) but
nothing before a request's headers are complete: a client that opens a connection and
sends nothing, or half a request line, or one header a minute, holds it for ever; and
its httptools parser takes any amount of header bytes (16 MB were accepted here). So the
protocol is uvicorn's own (``HttpToolsProtocol``, what it picks by itself) with two
limits while a request's line and headers arrive:

- ``security.read_timeout_s`` (30 s) from the connection's start, or from the first byte
  of a later request on it, to the end of the headers; then a 408 and the connection
  is closed;
- ``MAX_HEAD`` bytes (64 KiB) of request line and headers; then a 431 and the same.

The body then has its own limits, in the app (``body.read_json``: size and the same
timeout), so a request that stalls half-way through its body is cut off too.

Deliberately not here: the routes (``app``); the Gradio app's server, which Gradio
configures itself (its ``/v1`` mount has the body's limits, not these).
"""

from __future__ import annotations

import asyncio

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol  # uvicorn[standard]'s

MAX_HEAD = 64 * 1024  # bytes of request line and headers: far above any real client's

_REFUSAL = b"HTTP/1.1 %d %s\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"


class HeadLimits(HttpToolsProtocol):
    """uvicorn's httptools protocol, refusing a request whose line and headers come too
    slowly or are too large (``read_timeout_s`` and ``max_head`` are set per server by
    ``protocol``). The parser's callbacks say where a request's head starts and ends."""

    read_timeout_s = 30.0
    max_head = MAX_HEAD

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._in_head = True  # the next bytes are a request line and headers
        self._head_bytes = 0
        self._tail = b""  # the last bytes seen, for an end of headers split across reads
        self._deadline: asyncio.TimerHandle | None = None
        self._arm()

    def connection_lost(self, exc) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.transport.is_closing():
            return
        if self._in_head:  # counted before the parser sees it: an oversize head is never parsed
            seen = self._tail + data
            end = seen.find(b"\r\n\r\n")
            self._head_bytes += len(data) if end < 0 else max(0, end + 4 - len(self._tail))
            self._tail = seen[-3:]
            if self._head_bytes > self.max_head:
                self._refuse(431, b"Request Header Fields Too Large")
                return
            self._arm()
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._in_head, self._head_bytes, self._tail = False, 0, b""
        self._disarm()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_head = True  # idle until the next request: uvicorn's keep-alive timeout
        super().on_message_complete()

    def _arm(self) -> None:
        if self._deadline is None and self.read_timeout_s > 0:
            self._deadline = self.loop.call_later(self.read_timeout_s, self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if self.cycle is not None and not self.cycle.response_complete:
            self._arm()  # a pipelined request waits on the answer before it: not its fault
            return
        if not self._in_head:
            return
        if self._head_bytes:
            self._refuse(408, b"Request Timeout")
        else:  # nothing sent at all: nothing to answer
            self.transport.close()

    def _refuse(self, status: int, reason: bytes) -> None:
        self._disarm()
        if not self.transport.is_closing():
            self.transport.write(_REFUSAL % (status, reason))
            self.transport.close()


def protocol(read_timeout_s: float, max_head: int = MAX_HEAD) -> type[HeadLimits]:
    """``HeadLimits`` with these limits (uvicorn makes one instance per connection)."""
    return type("HeadLimits", (HeadLimits,), {"read_timeout_s": read_timeout_s,
                                              "max_head": max_head})


def server_config(app, settings, host: str, port: int, **kw) -> uvicorn.Config:
    kw.setdefault("log_level", "info")
    return uvicorn.Config(app, host=host, port=port,
                          http=protocol(settings.security.read_timeout_s), **kw)
