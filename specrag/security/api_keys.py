"""API keys for the OpenAI-compatible endpoint: issue, revoke, and who a bearer key is.

A key is ``sk-specrag-`` and 32 random bytes (URL-safe base64). The users file keeps,
under the user, only its SHA-256 digest and a short id (``users.ApiKey``): a key is
shown once, when ``issue`` makes it (``specrag users key NAME``). SHA-256 rather than
bcrypt because a 256-bit random key cannot be guessed, so a slow hash would only slow
every request; ``principal_for_key`` compares the digest with every stored one in
constant time, so timing does not tell how close a guess came or whose key it was.

A key acts as its user, with the role and ACLs the file gives that user now: a demoted
user's keys are demoted with them, a removed user's keys stop working.

Deliberately not here: the file format and writing it (``users``), HTTP (``specrag.api``).
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import os
import secrets

from specrag.security.users import ApiKey, Directory, Principal, load_directory, set_api_keys
from specrag.types import SpecragError

PREFIX = "sk-specrag-"


def digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def principal_for_key(directory: Directory, key: str) -> Principal | None:
    """The user whose API key ``key`` is, or None."""
    wanted = digest(key or "")
    found = None
    # no early exit: every stored digest is compared, whichever matches
    for user in directory.users.values():
        for stored in user.api_keys:
            if hmac.compare_digest(stored.sha256, wanted):
                found = user
    return Principal(found.name, found.role) if found else None


def issue(path: str | os.PathLike, name: str) -> tuple[str, str]:
    """A new key for ``name`` (``(key_id, key)``); only its digest is written down."""
    user = _user(path, name)
    key = PREFIX + secrets.token_urlsafe(32)
    key_id = digest(key)[:8]  # from the digest: the id says nothing about the key itself
    created = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    set_api_keys(path, name, [*user.api_keys, ApiKey(key_id, digest(key), created)])
    return key_id, key


def revoke(path: str | os.PathLike, name: str, key_id: str | None = None) -> int:
    """Remove ``name``'s key ``key_id`` (every key of theirs when None); how many went."""
    user = _user(path, name)
    kept = [k for k in user.api_keys if key_id is not None and k.id != key_id]
    set_api_keys(path, name, kept)
    return len(user.api_keys) - len(kept)


def listed(path: str | os.PathLike, name: str) -> list[ApiKey]:
    return list(_user(path, name).api_keys)


def _user(path, name):
    user = load_directory(path).users.get(name)
    if user is None:
        raise SpecragError(f"no user '{name}' in {path}: add them first with "
                           f"'specrag users add {name} --role ROLE'")
    return user
