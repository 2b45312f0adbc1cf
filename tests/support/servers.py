"""Real servers on loopback for the endpoint's edge tests, and raw sockets to misuse them.

- ``serve(config)``: a ``uvicorn.Config`` run by a real uvicorn server in a thread;
  ``(port, server)`` once it listens (set ``server.should_exit`` to stop it).
- ``ListedRetriever``: ``FakeRetriever`` with a store that lists collections, which is
  all the endpoint asks of a store (its 404 check); no Chroma.
- ``slow_service(data_dir, words, word_s, heavy=None, **values)``: a ``Service`` over the
  real engine with fake models: the draft is rejected, and the heavy model (a
  ``FakeGenerator`` writing ``words`` words, one per ``word_s``, unless ``heavy`` is
  given) answers; ``(service, heavy)``.
- ``send(port, data)``: a socket that has sent ``data``; ``reply(sock, timeout_s)``:
  what came back until the server closed the connection (or the timeout).
- ``post_head(path, length=None, chunked=False)``: the request line and headers of a
  JSON ``POST``, for tests that send the body themselves.

Deliberately not here: the Gradio app (``fakes.launch``), documents (``docs``).
"""

from __future__ import annotations

import socket
import threading
import time

from specrag.pipeline.service import Service
from tests.support.fakes import FakeRetriever, engine

REJECTED = "Engineers receive a zeppelin voucher and quadruple wages."  # the scorer rejects it


def serve(config) -> tuple[int, object]:
    import uvicorn

    server = uvicorn.Server(config)
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.time() + 20
    while not server.started:
        assert time.time() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    return config.port, server


class ListedStore:
    def __init__(self, names):
        self.names = list(names)

    def collections(self) -> list[str]:
        return list(self.names)


class ListedRetriever(FakeRetriever):
    def __init__(self, collections=("default",)):
        super().__init__()
        self.store = ListedStore(collections)


def slow_service(data_dir, words: int = 400, word_s: float = 0.5, heavy=None, **values):
    eng, _, fake_heavy = engine(data_dir, REJECTED, " ".join(["word"] * words), 0.0, word_s,
                                **values)
    heavy = heavy or fake_heavy
    eng = eng.replace(retriever=ListedRetriever(), heavy=heavy)
    return Service(eng.settings, eng), heavy


def post_head(path: str, length: int | None = None, chunked: bool = False) -> bytes:
    head = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    if length is not None:
        head.append(f"Content-Length: {length}")
    if chunked:
        head.append("Transfer-Encoding: chunked")
    return ("\r\n".join(head) + "\r\n\r\n").encode()


def send(port: int, data: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(data)
    return sock


def reply(sock: socket.socket, timeout_s: float = 30.0) -> bytes:
    sock.settimeout(timeout_s)
    out = b""
    try:
        while chunk := sock.recv(65536):
            out += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    finally:
        sock.close()
    return out


__all__ = ["serve", "ListedRetriever", "slow_service", "send", "reply", "post_head", "REJECTED"]
