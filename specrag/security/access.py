"""Who may read or write which collection: the one check every library entry point makes.

``authorize(settings, action, collection, principal)`` returns the acting
``Principal`` or raises ``PermissionDenied``. ``Ingestor`` (write), ``Retriever`` and
``SpeculativeRAG`` (read) call it themselves, so the UI, the CLI and any script get
the same rules whatever buttons they show. Actions: ``read`` (search, answers,
document lists), ``write`` (upload, delete), ``admin`` (drop collections, manage users).

Who is acting: an explicit ``principal=`` argument, else the principal bound with
``acting_as`` (the CLI binds its signed-in user once for the whole process), else
nobody. With no ``security.users_file`` specrag is a single-user local tool and
everyone is ``LOCAL`` (an admin). With a users file, nobody is refused everything,
and a principal's role is always taken from the current file (a demoted or removed
user loses access at once), so a caller cannot grant itself a role.

Deliberately not here: passwords and the file format (``users``). In-process code can
of course skip these checks by using ``Store`` directly; the guarded layer is
``Ingestor`` / ``Retriever`` / ``SpeculativeRAG`` and the helpers below.
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar

from specrag.security.users import EVERYONE, LOCAL, Directory, Principal, load_directory
from specrag.settings import Settings
from specrag.types import SpecragError

ACTIONS = ("read", "write", "admin")
_VERBS = {"read": "read or search", "write": "add to or delete from", "admin": "administer"}
# A ContextVar, not a global: Gradio's worker threads start from an empty context, so
# a principal bound by a CLI process can never leak into a web request.
_acting: ContextVar[Principal | None] = ContextVar("specrag_principal", default=None)


class PermissionDenied(SpecragError):
    """The acting user may not do this; ``str(err)`` says who, what and where."""


@contextlib.contextmanager
def acting_as(principal: Principal | None):
    """Bind ``principal`` for library calls made inside the block without ``principal=``."""
    token = _acting.set(principal)
    try:
        yield principal
    finally:
        _acting.reset(token)


def current_principal() -> Principal | None:
    return _acting.get()


def call_as(principal: Principal | None, fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` with ``principal`` bound; for ``asyncio.to_thread`` workers."""
    with acting_as(principal):
        return fn(*args, **kwargs)


class AccessControl:
    def __init__(self, settings: Settings):
        self.settings = settings

    @property
    def enabled(self) -> bool:
        return bool(self.settings.security.users_file)

    def directory(self) -> Directory | None:
        return load_directory(self.settings.security.users_file) if self.enabled else None

    def authenticate(self, name: str, password: str) -> Principal | None:
        directory = self.directory()
        return directory.authenticate(name, password) if directory else None

    def resolve(self, principal: Principal | None = None) -> Principal:
        """The acting principal, with its role as the users file says now."""
        principal = principal or _acting.get()
        if not self.enabled:
            return principal or LOCAL
        if principal is None:
            raise PermissionDenied("sign in first (the app's login, or specrag --user NAME): "
                                   f"users are configured in {self.settings.security.users_file}")
        real = self.directory().principal(principal.name)
        if real is None:
            raise PermissionDenied(f"user '{principal.name}' is not in the users file")
        return real

    def allowed(self, principal: Principal, action: str, collection: str) -> bool:
        """``principal`` must come from ``resolve``."""
        if action not in ACTIONS:
            raise ValueError(f"unknown action '{action}'; use one of {', '.join(ACTIONS)}")
        if not self.enabled or principal.role == "admin":
            return True
        if action == "admin" or (action == "write" and principal.role == "viewer"):
            return False
        acl = self.directory().acl(collection)
        # whoever may write a collection may also read it
        entries = acl.write if action == "write" else acl.read + acl.write
        return EVERYONE in entries or principal.role in entries or principal.name in entries

    def check(self, principal: Principal | None, action: str, collection: str | None) -> Principal:
        collection = collection or self.settings.store.collection
        who = self.resolve(principal)
        if not self.allowed(who, action, collection):
            raise PermissionDenied(f"user '{who.name}' ({who.role}) may not {_VERBS[action]} "
                                   f"collection '{collection}'")
        return who

    def readable(self, principal: Principal | None, collections: list[str]) -> list[str]:
        who = self.resolve(principal)
        return [c for c in collections if self.allowed(who, "read", c)]


def authorize(settings: Settings, action: str, collection: str | None,
              principal: Principal | None = None) -> Principal:
    """Raise ``PermissionDenied`` unless the acting principal may ``action`` ``collection``."""
    return AccessControl(settings).check(principal, action, collection)


# -- guarded reads of the catalogue, for the UI and CLI (the Store itself is unguarded) --
def visible_collections(store, principal: Principal | None = None) -> list[str]:
    """The collections the acting principal may read."""
    return AccessControl(store.settings).readable(principal, store.collections())


def list_documents(store, collection: str | None = None, principal: Principal | None = None):
    collection = collection or store.settings.store.collection
    authorize(store.settings, "read", collection, principal)
    return store.documents(collection)


def drop_collection(store, collection: str, principal: Principal | None = None) -> None:
    authorize(store.settings, "admin", collection, principal)
    store.drop_collection(collection)
