"""The child's side of the parser process: parse uploads under a memory limit.

``python -m specrag.ingest.parse_child FD MEMORY_MB`` is started by
``isolation.ParserProcess`` with one end of a socket pair as file descriptor ``FD``.
It caps its own address space at ``MEMORY_MB`` (so a file that needs more fails with a
``MemoryError`` here, not by the kernel's OOM killer picking the web server), then
answers ``("parse", kwargs)`` messages with ``("ok", ParsedDocument)``,
``("refused", one-line reason)`` for an ``IngestError``, ``("memory", None)`` when the
cap was hit, or ``("error", reason)`` for anything else, until the pipe closes or it is sent ``("close", None)``.

Deliberately not here: time limits and restarts (the parent kills and replaces a child
that runs too long), and any decision about what to do with a refused file.
"""

from __future__ import annotations

import sys
from multiprocessing.connection import Connection

from specrag.ingest.parsers import parse_bytes
from specrag.types import IngestError


def _limit_memory(megabytes: int) -> None:
    if megabytes <= 0:
        return
    try:
        import resource
    except ImportError:  # not on this platform: the parent's time limit still holds
        return
    cap = megabytes * 1024 * 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


def serve(conn: Connection, memory_mb: int) -> None:
    _limit_memory(memory_mb)
    while True:
        try:
            op, payload = conn.recv()
        except (EOFError, OSError):
            return  # the parent is gone
        except MemoryError:  # the upload itself does not fit under the cap: the rest of
            # the message is unread, so this pipe is out of step; say why and end
            conn.send(("memory", None))
            return
        if op == "close":
            return
        too_big = ("memory", None)
        try:
            reply = ("ok", parse_bytes(**payload))
        except IngestError as err:
            reply = ("refused", str(err))
        except MemoryError:
            reply = too_big
        except Exception as err:  # noqa: BLE001 - report it; the parent decides
            name = payload.get("filename", "")
            reply = ("error", f"{name}: unexpected {type(err).__name__}: {str(err)[:200]}")
        try:
            conn.send(reply)
        except MemoryError:  # pickling the document for the parent needs a copy of it
            conn.send(too_big)
        except OSError:
            return
        del reply, payload


if __name__ == "__main__":
    serve(Connection(int(sys.argv[1])), int(sys.argv[2]))
