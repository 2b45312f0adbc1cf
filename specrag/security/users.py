"""Users, roles and collection ACLs, loaded from one YAML file; bcrypt password hashes.

The file (``security.users_file``) looks like::

    users:
      alice: {role: admin,  password: "$2b$12$..."}   # specrag users add alice --role admin
      bob:   {role: editor, password: "$2b$12$..."}
      carol: {role: viewer, password: "$2b$12$...", session_epoch: 1}  # users logout carol
    collections:
      hr:     {read: [editor, carol], write: [editor]}
      public: {read: ["*"], write: [editor]}
    default: {read: [], write: []}   # collections not listed: admins only

An ACL entry is a role name, a user name, or ``*`` (every signed-in user). Roles cap
what an entry can grant: ``admin`` reads and writes every collection, ``editor``
writes where an ACL lets it, ``viewer`` never writes. The file is re-read when it
changes, so ``specrag users add`` takes effect in a running app. ``session_epoch``
(default 0) is raised by ``end_sessions`` (``specrag users logout NAME``): web sessions
remember the epoch and the password hash they were opened with (``sessions``), so a new
epoch or a new password ends them. ``api_keys`` (``specrag users key NAME``) holds the
SHA-256 digests of the user's API keys for the OpenAI-compatible endpoint, never the
keys (``api_keys``); a new password or a logout leaves them unless given ``--keys``,
``users key --revoke`` ends them.

Deliberately not here: the decision itself (``access``), login screens and sessions.
"""

from __future__ import annotations

import os
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from specrag.types import SpecragError, check_collection_name

ROLES = ("admin", "editor", "viewer")
EVERYONE = "*"
MIN_PASSWORD = 8
MAX_PASSWORD_BYTES = 72  # bcrypt ignores (5.x: refuses) anything longer
BCRYPT_ROUNDS = 12


@dataclass(frozen=True)
class Principal:
    """Who is acting. Only ``Directory.authenticate`` (or single-user mode) should make one."""

    name: str
    role: str


LOCAL = Principal("local", "admin")  # the single user of a machine with no users file


@dataclass(frozen=True)
class User:
    name: str
    role: str
    password_hash: str = field(repr=False)
    session_epoch: int = 0  # raised to end the user's web sessions
    api_keys: tuple["ApiKey", ...] = ()


@dataclass(frozen=True)
class ApiKey:
    """One API key as the file keeps it: a short id to revoke it by, and its digest."""

    id: str
    sha256: str = field(repr=False)
    created: str = ""


@dataclass(frozen=True)
class ACL:
    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()


@dataclass(frozen=True)
class Directory:
    path: str
    users: dict = field(default_factory=dict)  # name -> User
    collections: dict = field(default_factory=dict)  # name -> ACL
    default: ACL = ACL()

    def principal(self, name: str) -> Principal | None:
        user = self.users.get(name)
        return Principal(user.name, user.role) if user else None

    def acl(self, collection: str) -> ACL:
        return self.collections.get(collection, self.default)

    def authenticate(self, name: str, password: str) -> Principal | None:
        import bcrypt

        user = self.users.get(name or "")
        secret = (password or "").encode("utf-8")
        # An unknown name still costs one bcrypt check, so timing does not reveal
        # which user names exist.
        stored = user.password_hash.encode() if user else _dummy_hash()
        try:
            ok = len(secret) <= MAX_PASSWORD_BYTES and bcrypt.checkpw(secret, stored)
        except ValueError:  # a malformed hash in the file: fail closed
            ok = False
        return Principal(user.name, user.role) if ok and user else None


_cache: dict[str, tuple[tuple[int, int, int], Directory]] = {}
_lock = threading.Lock()
_dummy: list[bytes] = []


def _dummy_hash() -> bytes:
    import bcrypt

    if not _dummy:
        _dummy.append(bcrypt.hashpw(b"specrag-no-such-user", bcrypt.gensalt(BCRYPT_ROUNDS)))
    return _dummy[0]


def load_directory(path: str | os.PathLike) -> Directory:
    """The users file, parsed and validated; re-read only when it changed on disk."""
    p = Path(os.path.expanduser(str(path)))
    try:
        st = p.stat()
    except FileNotFoundError:
        raise SpecragError(f"users file {p} not found (security.users_file); create it with "
                           "'specrag users add NAME --role admin'") from None
    # the inode too: ``_write`` renames a new file into place, and a same-size edit (a
    # session epoch 1 -> 2) within one mtime tick must still be seen
    stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
    with _lock:
        hit = _cache.get(str(p))
        if hit and hit[0] == stamp:
            return hit[1]
    directory = parse_directory(p.read_text(encoding="utf-8"), str(p))
    with _lock:
        _cache[str(p)] = (stamp, directory)
    return directory


def parse_directory(text: str, where: str = "users file") -> Directory:
    data = yaml.safe_load(text) or {}
    if not isinstance(data, dict) or set(data) - {"users", "collections", "default"}:
        raise SpecragError(f"{where}: expected the keys users, collections and default")
    users = {}
    for name, entry in (data.get("users") or {}).items():
        name = str(name)
        entry = entry or {}
        role, pw = entry.get("role"), str(entry.get("password", ""))
        if name in ROLES or name == EVERYONE or not name.strip():
            raise SpecragError(f"{where}: '{name}' cannot be a user name (a role or '*')")
        if role not in ROLES:
            raise SpecragError(f"{where}: user '{name}' has role {role!r}; use one of "
                               f"{', '.join(ROLES)}")
        if not pw.startswith(("$2a$", "$2b$", "$2y$")):
            raise SpecragError(f"{where}: user '{name}' has no bcrypt password hash "
                               "(set one with 'specrag users add')")
        epoch = entry.get("session_epoch", 0)
        if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0:
            raise SpecragError(f"{where}: user '{name}' has session_epoch {epoch!r}; "
                               "expected a whole number >= 0")
        users[name] = User(name, role, pw, epoch, _api_keys(entry.get("api_keys"),
                                                           f"{where}: user '{name}'"))
    collections = {check_collection_name(str(c)): _acl(v, f"{where}: collection '{c}'")
                   for c, v in (data.get("collections") or {}).items()}
    return Directory(where, users, collections, _acl(data.get("default"), f"{where}: default"))


def _api_keys(entries, where: str) -> tuple[ApiKey, ...]:
    keys = []
    for e in entries or []:
        digest = str((e or {}).get("sha256", "")) if isinstance(e, dict) else ""
        if len(digest) != 64 or set(digest) - set("0123456789abcdef") or not e.get("id"):
            raise SpecragError(f"{where}: an api_keys entry needs an id and a sha256 hex digest")
        keys.append(ApiKey(str(e["id"]), digest, str(e.get("created", ""))))
    return tuple(keys)


def _acl(entry, where: str) -> ACL:
    entry = entry or {}
    if not isinstance(entry, dict) or set(entry) - {"read", "write"}:
        raise SpecragError(f"{where}: expected {{read: [...], write: [...]}}")
    lists = {}
    for key in ("read", "write"):
        value = entry.get(key) or []
        if isinstance(value, str):
            value = [value]
        lists[key] = tuple(str(v) for v in value)
    return ACL(**lists)


# -- writing the file (CLI) -----------------------------------------------------------
def hash_password(password: str) -> str:
    import bcrypt

    secret = password.encode("utf-8")
    if len(password) < MIN_PASSWORD:
        raise SpecragError(f"password too short: use at least {MIN_PASSWORD} characters")
    if len(secret) > MAX_PASSWORD_BYTES:
        raise SpecragError(f"password too long: bcrypt uses at most {MAX_PASSWORD_BYTES} bytes")
    return bcrypt.hashpw(secret, bcrypt.gensalt(BCRYPT_ROUNDS)).decode()


def add_user(path: str | os.PathLike, name: str, role: str, password: str) -> None:
    """Add or update a user (hashing the password) in the users file, creating it if needed."""
    p = Path(os.path.expanduser(str(path)))
    data = yaml.safe_load(p.read_text(encoding="utf-8")) if p.exists() else None
    data = data or {"users": {}, "collections": {}, "default": {"read": [], "write": []}}
    data.setdefault("users", {})
    data["users"] = data["users"] or {}
    entry = {"role": role, "password": hash_password(password)}
    epoch = (data["users"].get(name) or {}).get("session_epoch")
    if epoch:  # kept, so an epoch never goes back to one an old session was opened with
        entry["session_epoch"] = epoch
    if keys := (data["users"].get(name) or {}).get("api_keys"):  # separate credentials
        entry["api_keys"] = keys
    data["users"][name] = entry
    _write(p, data)


def end_sessions(path: str | os.PathLike, name: str) -> int | None:
    """Raise ``name``'s session epoch, ending their web sessions; the new epoch, or None
    when there is no such user."""
    p = Path(os.path.expanduser(str(path)))
    data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    entry = (data.get("users") or {}).get(name)
    if entry is None:
        return None
    entry["session_epoch"] = int(entry.get("session_epoch", 0)) + 1
    _write(p, data)
    return entry["session_epoch"]


def set_api_keys(path: str | os.PathLike, name: str, keys: list[ApiKey]) -> bool:
    """Replace ``name``'s API keys (digests only) in the users file; False: no such user."""
    p = Path(os.path.expanduser(str(path)))
    data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    entry = (data.get("users") or {}).get(name)
    if entry is None:
        return False
    entry.pop("api_keys", None)
    if keys:
        entry["api_keys"] = [{"id": k.id, "sha256": k.sha256, "created": k.created} for k in keys]
    _write(p, data)
    return True


def remove_user(path: str | os.PathLike, name: str) -> bool:
    p = Path(os.path.expanduser(str(path)))
    data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    if name not in (data.get("users") or {}):
        return False
    del data["users"][name]
    _write(p, data)
    return True


def _write(p: Path, data: dict) -> None:
    text = ("# specrag users file: bcrypt password hashes only; see specrag/security/users.py\n"
            + yaml.safe_dump(data, sort_keys=False))
    parse_directory(text, str(p))  # never write a file the loader would refuse
    p.parent.mkdir(parents=True, exist_ok=True)
    # write-then-rename: a crash leaves the old file or the new one, never half of one
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
