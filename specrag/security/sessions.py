"""Web sessions tied to the password they were opened with, so a reset ends them.

A sign-in records ``token -> Session(user, fingerprint, epoch)``: the fingerprint is a
digest of the user's bcrypt hash at that moment and the epoch the user's
``session_epoch`` in the users file. ``SessionRegistry.user_of(token, directory)`` gives
the session's user only while the users file still has that user with the same hash
and epoch, so ``specrag users remove`` / ``users add`` (a new hash, even for the same
password: a new salt) / ``users logout`` (a new epoch) end every session opened before,
in a running app, on its next request. Sessions found dead are forgotten.

``SESSIONS`` is the process's registry: tokens are random, so apps in one process
(tests) can share it.

Deliberately not here: issuing tokens and cookies (Gradio does; ``specrag.ui.gate``
records them), reading the users file (``users``), roles and ACLs (``access``).
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field

from specrag.security.users import Directory, User


def fingerprint(user: User) -> str:
    """A digest of the user's password hash: changes whenever the password is set."""
    return hashlib.sha256(user.password_hash.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Session:
    user: str
    fingerprint: str = field(repr=False)
    epoch: int


class SessionRegistry:
    def __init__(self):
        self._lock = threading.Lock()
        self._sessions: dict[str, Session] = {}

    def issue(self, token: str, user: User) -> Session:
        session = Session(user.name, fingerprint(user), user.session_epoch)
        with self._lock:
            self._sessions[token] = session
        return session

    def user_of(self, token: str | None, directory: Directory) -> str | None:
        """The user of a live session, else None (an unknown token is never live)."""
        if not token:
            return None
        with self._lock:
            session = self._sessions.get(token)
        if session is None:
            return None
        user = directory.users.get(session.user)
        if (user is None or user.session_epoch != session.epoch
                or fingerprint(user) != session.fingerprint):
            self.revoke(token)
            return None
        return session.user

    def revoke(self, token: str) -> None:
        with self._lock:
            self._sessions.pop(token, None)


SESSIONS = SessionRegistry()
