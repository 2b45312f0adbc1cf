"""The app's login from the users file, and who is asking in each request.

Wiring (``specrag.ui.app.launch_options`` does it)::

    demo.launch(auth=gradio_auth(settings), app_kwargs={"middleware": [gate]}, ...)
    def search(query, collection, k, request: gr.Request):
        who = principal_from_request(request, settings)
        retriever.retrieve(query, k, collection, principal=who)   # the library checks

``gradio_auth`` gives Gradio an *async* callable, which its ``/login`` route awaits:
bcrypt then runs in a worker thread (``BCRYPT_THREADS`` at a time, so a login storm
queues there instead of taking every core), never on the event loop that serves every
other page. Guessing is slowed per client address, per (address, name) and, softly, per
name (``specrag.security.throttle``); a refused attempt is an HTTP 429 with
``Retry-After``. The client address and the signed-in ``User`` travel between the gate
(``specrag.ui.gate``, which sees the request and the cookie Gradio sets) and this
callable (which Gradio calls with a name and a password only) in a ``LoginAttempt``
held in a context variable; without the gate there is no attempt and every login is
refused, because its session could not be tied to the password.

``principal_from_request`` takes the user Gradio signed in, checks that the session is
still live (``specrag.security.sessions``: same password hash and session epoch as the
users file says now) and reads the role from the users file *now*, so a removed,
demoted, reset or logged-out user loses access at once.

Deliberately not here: any permission decision (``specrag.security.access``), the
HTTP plumbing (``gate``); this module only says who the user is.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Awaitable, Callable

from specrag.security.access import AccessControl, PermissionDenied
from specrag.security.sessions import SESSIONS
from specrag.security.throttle import LoginThrottle, Refused
from specrag.security.users import LOCAL, Directory, Principal, User
from specrag.settings import Settings

# half the cores: the other half keeps serving pages while a storm of logins is checked
BCRYPT_THREADS = max(1, (os.cpu_count() or 2) // 2)
COOKIE_PREFIX = "access-token-"  # Gradio's session cookies: access-token[-unsecure]-<app>

log = logging.getLogger(__name__)


@dataclass
class LoginAttempt:
    """One ``POST /login``: set by the gate, filled in by the auth callable."""

    address: str
    user: User | None = None  # the user as the users file had them, once signed in


# set by the gate around Gradio's ``/login`` route; Gradio awaits the auth callable in
# that same task, so the callable sees it
LOGIN_ATTEMPT: ContextVar[LoginAttempt | None] = ContextVar("specrag_login", default=None)


def gradio_auth(settings: Settings, throttle: LoginThrottle | None = None
                ) -> Callable[[str, str], Awaitable[bool]] | None:
    """A ``launch(auth=...)`` coroutine function, or None when no users are configured."""
    control = AccessControl(settings)
    if not control.enabled:
        return None
    control.directory()  # a missing or broken users file fails at startup, not at login
    throttle = throttle or LoginThrottle()
    bcrypt_slots = asyncio.Semaphore(BCRYPT_THREADS)

    async def check(username: str, password: str) -> bool:
        from fastapi import HTTPException

        attempt = LOGIN_ATTEMPT.get()
        if attempt is None:
            log.error("login refused: the app was launched without specrag's gate "
                      "(launch it with **launch_options(settings))")
            return False
        name = (username or "").strip()
        try:
            delay = throttle.begin(attempt.address, name)
        except Refused as err:
            raise HTTPException(429, str(err), headers={
                "Retry-After": str(math.ceil(err.retry_after))}) from None
        if delay:
            await asyncio.sleep(delay)  # the soft per-name slow-down, off the loop too
        async with bcrypt_slots:
            user = await asyncio.to_thread(_verify, control, name, password or "")
        throttle.finish(attempt.address, name, user is not None)
        attempt.user = user
        return user is not None

    return check


def _verify(control: AccessControl, name: str, password: str) -> User | None:
    """The ``User`` whose password this is (bcrypt: seconds of CPU, so in a thread)."""
    directory = control.directory()
    # one snapshot of the file: the session is tied to the hash that was checked
    return directory.users[name] if directory.authenticate(name, password) else None


def session_tokens(cookies) -> list[str]:
    """Every Gradio session token among a request's cookies."""
    return [str(v) for k, v in dict(cookies or {}).items() if str(k).startswith(COOKIE_PREFIX)]


def live_users(cookies, directory: Directory) -> set[str]:
    """The users of the live sessions among ``cookies`` (browsers send one per app)."""
    return {u for u in (SESSIONS.user_of(t, directory) for t in session_tokens(cookies)) if u}


def principal_from_request(request, settings: Settings) -> Principal:
    """The signed-in user of a Gradio request (``LOCAL`` in single-user mode)."""
    control = AccessControl(settings)
    if not control.enabled:
        return LOCAL
    name = getattr(request, "username", None) if request is not None else None
    if not name:
        raise PermissionDenied("sign in first")
    # the gate already turned dead sessions away; this catches one that died after the
    # request was queued (a reset or ``users logout`` while a question waited)
    if str(name) not in live_users(getattr(request, "cookies", None), control.directory()):
        raise PermissionDenied("this session has ended (signed out, password changed or "
                               "user removed): sign in again")
    return control.resolve(Principal(str(name), ""))
