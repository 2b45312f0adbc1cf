"""Stand-ins for the per-user limit tests: a heavy tier that holds questions until told,
and a users file made quickly.

- ``HeldHeavy``: a scripted heavy generator; a prompt that contains ``HOLD`` waits until
  ``release()`` (all) or ``release(n)`` (the next n), others answer at once. ``started``
  lists the questions in the order their heavy calls began, so a test can see who was
  admitted first.
- ``users_file(path, **roles)``: a users file with those users (fast bcrypt), every
  collection readable by everyone signed in.
- ``held_service(settings)``: ``(Service, HeldHeavy)``, the real engine over fake models
  with that heavy tier and ``servers.ListedRetriever`` (collection ``handbook``);
  ``serve(app)``: an app under uvicorn on loopback (``servers.serve``), its ``/v1`` URL.

Deliberately not here: the limits under test (``resilience.concurrency``,
``security.throttle``).
"""

from __future__ import annotations

import asyncio
import re
import threading

import yaml

from specrag.generators.base import Usage
from specrag.pipeline.service import Service
from specrag.security import users as users_mod
from tests.support.env import free_port
from tests.support.resilience import fake_engine
from tests.support.servers import ListedRetriever
from tests.support.servers import serve as serve_config

ANSWER = "Pages are acknowledged within 15 minutes [1]."
_QUESTION = re.compile(r"^Question: (.*)$", re.M)


class HeldHeavy:
    def __init__(self, name: str = "anthropic", model: str = "claude-sonnet-4-6"):
        self.name, self.model, self.base_url = name, model, ""
        self.started: list[str] = []
        self._permits = threading.Semaphore(0)  # released from the test's thread
        self._all = threading.Event()

    def warm_up(self):
        return self

    def release(self, n: int | None = None) -> None:
        if n is None:
            self._all.set()
        else:
            for _ in range(n):
                self._permits.release()

    async def stream(self, messages, *, max_tokens=256, temperature=0.0):
        text = messages[-1]["content"]
        found = _QUESTION.findall(text)
        self.started.append(found[-1] if found else text)
        if "HOLD" in text:
            while not self._all.is_set() and not self._permits.acquire(blocking=False):
                await asyncio.sleep(0.005)
        for i, word in enumerate(ANSWER.split(" ")):
            await asyncio.sleep(0)
            yield word if i == 0 else " " + word
        yield Usage(self.name, self.model, 10, len(ANSWER.split()), 1.0, 2.0)


def users_file(path, **roles) -> str:
    """Write a users file with ``name=role`` users (password ``NAME-password``)."""
    rounds, users_mod.BCRYPT_ROUNDS = users_mod.BCRYPT_ROUNDS, 4  # tests need no strong hash
    try:
        for name, role in roles.items():
            users_mod.add_user(path, name, role, f"{name}-password")
    finally:
        users_mod.BCRYPT_ROUNDS = rounds
    data = yaml.safe_load(path.read_text())
    data["collections"] = {"handbook": {"read": ["*"], "write": ["editor"]}}
    data["default"] = {"read": ["*"], "write": []}
    path.write_text(yaml.safe_dump(data))
    return str(path)


def held_service(settings) -> tuple[Service, HeldHeavy]:
    held = HeldHeavy()
    return Service(settings, fake_engine(settings, heavy=held).replace(
        retriever=ListedRetriever(("handbook",)))), held


def serve(app) -> tuple[str, object]:
    """``app`` under a real uvicorn server in a thread: its ``/v1`` URL and the server."""
    import uvicorn  # only the server tests need it

    port, server = serve_config(uvicorn.Config(app, host="127.0.0.1", port=free_port(),
                                               log_level="warning"))
    return f"http://127.0.0.1:{port}/v1", server
