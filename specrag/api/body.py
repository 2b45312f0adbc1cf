"""A request's JSON body, read within limits of size, time and depth, never whole first.

``read_json(request, max_bytes, timeout_s)``:

- a ``Content-Length`` over ``max_bytes`` is refused (413) before a byte of the body is
  read; a body without one (chunked) is counted as it arrives and refused as soon as it
  passes ``max_bytes``, so memory holds at most ``max_bytes`` and one chunk per request;
- a body that has not fully arrived ``timeout_s`` after the read began is refused (408):
  a client that sends part of a body and stalls does not hold the request forever;
- JSON nested deeper than the parser can follow is a 400, like any other bad JSON.

Refusals that leave body bytes unread carry ``Connection: close``, so the server drops
the connection instead of reading (and discarding) the rest of a huge body.

Deliberately not here: what the JSON must hold (``wire``), the time allowed for the
request line and headers (the server's: ``api.server``).
"""

from __future__ import annotations

import asyncio
import json

from starlette.requests import ClientDisconnect

from specrag.api.errors import ApiError

CLOSE = {"Connection": "close"}


def too_big(max_bytes: int) -> ApiError:
    return ApiError(413, f"the request body is over {max_bytes} bytes", headers=CLOSE)


async def read_json(request, max_bytes: int, timeout_s: float = 0.0):
    """The body of ``request`` as JSON, or ``ApiError`` (400, 408 or 413)."""
    length = request.headers.get("content-length")
    if length is not None:
        if not length.strip().isdigit():
            raise ApiError(400, "the Content-Length header is not a number", headers=CLOSE)
        if int(length) > max_bytes:
            raise too_big(max_bytes)
    raw = bytearray()
    try:
        async with asyncio.timeout(timeout_s or None):
            async for piece in request.stream():
                raw += piece
                if len(raw) > max_bytes:
                    raise too_big(max_bytes)
    except TimeoutError:
        raise ApiError(408, f"the request body did not arrive within {timeout_s:g} s",
                       "timeout", headers=CLOSE) from None
    except ClientDisconnect:
        raise ApiError(400, "the client closed the connection during the request body",
                       headers=CLOSE) from None
    try:
        return json.loads(raw)
    except RecursionError:
        raise ApiError(400, "the request body is JSON nested too deeply") from None
    except ValueError:
        raise ApiError(400, "the request body is not JSON") from None
