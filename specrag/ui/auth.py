"""The app's login from the users file, and who is asking in each request.

Wiring (in ``app.py``)::

    demo.launch(auth=gradio_auth(settings), ...)      # None: single-user, no login page
    def search(query, collection, k, request: gr.Request):
        who = principal_from_request(request, settings)
        retriever.retrieve(query, k, collection, principal=who)   # the library checks

``gradio_auth`` checks passwords with bcrypt and slows down guessing: after
``MAX_FAILURES`` wrong passwords for a user name, that name is locked out for
``LOCKOUT_S`` seconds (doubling while the guessing goes on). ``principal_from_request``
takes the user Gradio signed in (its session cookie is server-side) and reads the
role from the users file *now*, so a removed or demoted user loses access at once.

Deliberately not here: any permission decision (``specrag.security.access``); this
module only says who the user is.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from specrag.security.access import AccessControl, PermissionDenied
from specrag.security.users import LOCAL, Principal
from specrag.settings import Settings

MAX_FAILURES = 5
LOCKOUT_S = 30.0


class _Throttle:
    def __init__(self):
        self._lock = threading.Lock()
        self._state: dict[str, tuple[int, float]] = {}  # name -> (failures, locked until)

    def locked(self, name: str) -> bool:
        with self._lock:
            return self._state.get(name, (0, 0.0))[1] > time.monotonic()

    def record(self, name: str, ok: bool) -> None:
        with self._lock:
            if ok:
                self._state.pop(name, None)
                return
            failures = self._state.get(name, (0, 0.0))[0] + 1
            until = 0.0
            if failures >= MAX_FAILURES:
                until = time.monotonic() + LOCKOUT_S * 2 ** min(failures - MAX_FAILURES, 6)
            self._state[name] = (failures, until)


def gradio_auth(settings: Settings) -> Callable[[str, str], bool] | None:
    """A ``launch(auth=...)`` callable, or None when no users are configured."""
    control = AccessControl(settings)
    if not control.enabled:
        return None
    control.directory()  # a missing or broken users file fails at startup, not at login
    throttle = _Throttle()

    def check(username: str, password: str) -> bool:
        name = (username or "").strip()
        if throttle.locked(name):
            return False
        ok = control.authenticate(name, password or "") is not None
        throttle.record(name, ok)
        return ok

    return check


def principal_from_request(request, settings: Settings) -> Principal:
    """The signed-in user of a Gradio request (``LOCAL`` in single-user mode)."""
    control = AccessControl(settings)
    if not control.enabled:
        return LOCAL
    name = getattr(request, "username", None) if request is not None else None
    if not name:
        raise PermissionDenied("sign in first")
    return control.resolve(Principal(str(name), ""))
