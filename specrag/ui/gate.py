"""The app's door: an ASGI middleware in front of Gradio's own routes.

``launch_options`` installs ``Gate`` through ``launch(app_kwargs={"middleware": ...})``,
inside Gradio's CORS and compression layers, so it sees every request as Gradio will.
For each request it:

- drops dead session cookies: a Gradio session token that ``SESSIONS`` does not know
  or that ended (new password, removed user, ``specrag users logout``) is taken out of
  the ``Cookie`` header, so every Gradio route (pages, ``/config``, the queue, files)
  treats the caller as signed out;
- on ``POST /login``: holds a ``LoginAttempt`` (the client address) in a context
  variable for the auth callable (``auth.gradio_auth``), and when Gradio answers with
  a session cookie, records that token with the user's password hash and epoch;
- on ``/logout``: forgets the caller's sessions;
- refuses multipart uploads (any route: ``/upload``, component servers, recordings)
  from a signed-in user whose role may never write (``viewer``);
- on ``POST /gradio_api/upload``: binds the files Gradio stored to the caller
  (``UPLOADS``: the session token, or the client address when there are no users)
  before the caller hears their paths, and shreds uploads nobody claimed in time;
- on the routes Gradio serves files from (``FILE_ROUTES``: ``/gradio_api/file=PATH``
  and its older spelling ``/gradio_api/file/PATH``, any method): answers 404 for an
  upload that is someone else's. The path is resolved as Gradio resolves it (made
  absolute against the working directory, then to the real file), so no spelling of
  it (relative, ``..``, a symlinked folder) names another file than the one checked.

Each request's owner key goes down in ``scope["specrag.owner"]``; ``claim_uploads``
reads it back from a handler's request and hands over only the caller's own uploads.

Deliberately not here: passwords and throttling (``auth``, ``throttle``), the size
limit (Gradio's ``max_file_size``), forwarded-for headers (the socket's peer address is
the client: a proxy in front would need its own limits), ACLs of collections.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os

from specrag.security.access import AccessControl
from specrag.security.sessions import SESSIONS, SessionRegistry
from specrag.security.uploads import UPLOADS, UploadRegistry, shred
from specrag.security.users import Principal
from specrag.settings import Settings
from specrag.types import SpecragError
from specrag.ui.auth import COOKIE_PREFIX, LOGIN_ATTEMPT, LoginAttempt

API_PREFIX = "/gradio_api"  # gradio.route_utils.API_PREFIX
# gradio 6.31's routes.py: the routes that serve a local file named in the URL
FILE_ROUTES = (f"{API_PREFIX}/file=", f"{API_PREFIX}/file/")
OWNER_KEY = "specrag.owner"

log = logging.getLogger(__name__)


class Gate:
    def __init__(self, app, settings: Settings, sessions: SessionRegistry = SESSIONS,
                 uploads: UploadRegistry = UPLOADS):
        self.app = app
        self.control = AccessControl(settings)
        self.sessions = sessions
        self.uploads = uploads

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        scope, token, user = self._session(dict(scope))
        address = (scope.get("client") or ("unknown",))[0]
        owner = (f"session:{token}" if token else
                 None if self.control.enabled else f"address:{address}")
        scope[OWNER_KEY] = owner
        path, method = _route_path(scope), scope.get("method", "GET")
        if scope["type"] == "websocket":
            await self.app(scope, receive, send)
        elif method == "POST" and path.rstrip("/") == "/login":
            await self._login(scope, receive, send, address)
        elif method == "POST" and _header(scope, b"content-type").startswith(
                b"multipart/form-data"):
            if user is not None and not self._may_write(user):
                await _respond(send, 403, f"user '{user}' may not upload files")
            elif path == f"{API_PREFIX}/upload" and owner:
                await self._upload(scope, receive, send, owner)
            else:
                await self.app(scope, receive, send)
        elif (served := _served_file(path)) and self.uploads.owner_of(served) not in (None, owner):
            await _respond(send, 404, "Not found")  # as if absent: its name is no one's business
        else:
            if path.rstrip("/") == "/logout" and token:
                self.sessions.revoke(token)
            await self.app(scope, receive, send)

    def _session(self, scope: dict) -> tuple[dict, str | None, str | None]:
        """``(scope without dead session cookies, live token, its user)``."""
        if not self.control.enabled:
            return scope, None, None
        try:
            directory = self.control.directory()
        except SpecragError:  # unreadable users file: nobody is signed in
            directory = None
        cookies = _cookies(scope)
        live = {}
        for name, value in cookies:
            if name.startswith(COOKIE_PREFIX) and directory is not None:
                user = self.sessions.user_of(value, directory)
                if user:
                    live[name] = (value, user)
        kept = [(n, v) for n, v in cookies if not n.startswith(COOKIE_PREFIX) or n in live]
        if len(kept) != len(cookies):
            scope["headers"] = [(k, v) for k, v in scope.get("headers", []) if k != b"cookie"]
            if kept:
                scope["headers"].append(
                    (b"cookie", "; ".join(f"{n}={v}" for n, v in kept).encode("latin-1")))
        # Gradio reads access-token-<its cookie id> first: the session it will act on
        cid = getattr(scope.get("app"), "cookie_id", None)
        pick = (live.get(f"{COOKIE_PREFIX}{cid}") or live.get(f"{COOKIE_PREFIX}unsecure-{cid}")
                or next(iter(live.values()), (None, None)))
        return scope, pick[0], pick[1]

    def _may_write(self, user: str) -> bool:
        try:
            return self.control.resolve(Principal(user, "")).role != "viewer"
        except SpecragError:
            return False

    async def _login(self, scope, receive, send, address: str) -> None:
        attempt = LoginAttempt(address)
        reset = LOGIN_ATTEMPT.set(attempt)

        async def record(message):
            if (message["type"] == "http.response.start" and message["status"] == 200
                    and attempt.user is not None):
                for token in _set_cookie_tokens(message.get("headers", [])):
                    self.sessions.issue(token, attempt.user)
            await send(message)

        try:
            await self.app(scope, receive, record)
        finally:
            LOGIN_ATTEMPT.reset(reset)

    async def _upload(self, scope, receive, send, owner: str) -> None:
        # hold the answer until its paths are bound: the caller must not be able to use
        # a path (or lose a race to another session) before it is theirs
        held: list[dict] = []
        passing = False  # an error answer: nothing to bind, pass it on as it comes

        async def bind(message):
            nonlocal passing
            if message["type"] == "http.response.start":
                passing = message["status"] != 200
            if passing:
                await send(message)
                return
            held.append(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                for path in _paths(b"".join(m.get("body", b"") for m in held[1:])):
                    self.uploads.bind(path, owner)
                for m in held:
                    await send(m)

        await self.app(scope, receive, bind)
        old = self.uploads.expired()
        if old:
            await asyncio.to_thread(lambda: [shred(p) for p in old])
            log.info("shredded %d upload(s) nobody ingested", len(old))


def claim_uploads(files, request, settings: Settings, registry: UploadRegistry = UPLOADS):
    """The paths of ``files`` (a Gradio handler's uploads) if every one was uploaded by
    the caller of ``request``; else ``gr.Error`` with a plain message, claiming none."""
    import gradio as gr

    if not files:
        return files
    scope = getattr(getattr(request, "request", None), "scope", None) or {}
    if OWNER_KEY not in scope:  # launched without the gate: no upload has an owner
        if AccessControl(settings).enabled:
            raise gr.Error("uploads are refused: the app was started without specrag's "
                           "gate (use launch_options)")
        return files
    try:
        return registry.claim(files, scope[OWNER_KEY] or "")
    except SpecragError as err:
        raise gr.Error(str(err)) from None


def _route_path(scope) -> str:
    path, root = scope.get("path", ""), scope.get("root_path", "")
    return path[len(root):] if root and path.startswith(root) else path


def _served_file(path: str) -> str | None:
    """The file a Gradio file route would serve for ``path``, as Gradio resolves it
    (``os.path.abspath``; the registry then resolves links), or None for other routes."""
    for prefix in FILE_ROUTES:
        if path.startswith(prefix) and path[len(prefix):]:
            return os.path.abspath(path[len(prefix):])
    return None


def _header(scope, name: bytes) -> bytes:
    return next((v for k, v in scope.get("headers", []) if k == name), b"").lower()


def _cookies(scope) -> list[tuple[str, str]]:
    out = []
    for k, v in scope.get("headers", []):
        if k == b"cookie":
            for part in v.decode("latin-1").split(";"):
                name, eq, value = part.strip().partition("=")
                if eq:
                    out.append((name, value))
    return out


def _set_cookie_tokens(headers) -> set[str]:
    tokens = set()
    for k, v in headers:
        if k.lower() == b"set-cookie":
            name, _, value = v.decode("latin-1").split(";", 1)[0].strip().partition("=")
            if name.startswith(COOKIE_PREFIX) and value:
                tokens.add(value.strip('"'))
    return tokens


def _paths(body: bytes) -> list[str]:
    try:
        paths = json.loads(body)
    except ValueError:
        return []
    return [p for p in paths if isinstance(p, str)] if isinstance(paths, list) else []


async def _respond(send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
