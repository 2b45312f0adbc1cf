"""``specrag users ...`` and ``specrag --user NAME``: manage the users file, sign in the CLI.

``specrag users add NAME --role viewer`` hashes the password (from ``$SPECRAG_PASSWORD``,
else asked twice on the terminal) into ``security.users_file``; ``users remove``,
``users list``, ``users logout NAME`` (ends that user's web sessions in a running app,
from any process: it raises their session epoch in the file) and ``users keygen`` (a
new encryption key) complete the set. A new password (``users add`` again) ends the
old sessions too; ``--keys`` on ``users logout`` or ``users add`` also revokes every API
key of the user (keys are separate credentials: without it they survive both). ``users
key NAME`` prints a new API key for the OpenAI-compatible
endpoint once (the file keeps its digest); ``--list`` shows their key ids,
``--revoke [KEY_ID]`` ends one or all of them. Editing the users file needs write access to it, nothing else: that
is how the first admin is made.

``specrag --user NAME COMMAND`` (or ``$SPECRAG_USER``) signs in with
``$SPECRAG_PASSWORD`` (or a prompt) and binds that user for the whole command, so
every library call it makes is checked against that user's role and collection ACLs.
With no users file the CLI is the single local user, as before.

Deliberately not here: the rules (``access``) and the file format (``users``).
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import sys

from specrag.security import api_keys
from specrag.security.access import AccessControl, acting_as
from specrag.security.users import ROLES, add_user, end_sessions, load_directory, remove_user
from specrag.types import SpecragError

PASSWORD_ENV = "SPECRAG_PASSWORD"
USER_ENV = "SPECRAG_USER"


def add_global_options(p) -> None:
    p.add_argument("--user", default=None,
                   help=f"sign in as this user (password from ${PASSWORD_ENV} or a prompt)")


def add_parsers(sub) -> None:
    users = sub.add_parser("users", help="manage users of the users file; make an encryption key")
    usub = users.add_subparsers(dest="users_command", required=True)
    add = usub.add_parser("add", help=f"add or update a user (password from ${PASSWORD_ENV})")
    add.add_argument("name")
    add.add_argument("--role", choices=ROLES, required=True)
    add.add_argument("--keys", action="store_true", help="also revoke all their API keys")
    rm = usub.add_parser("remove", help="remove a user")
    rm.add_argument("name")
    out = usub.add_parser("logout", help="end every web session of a user")
    out.add_argument("name")
    out.add_argument("--keys", action="store_true", help="also revoke all their API keys")
    usub.add_parser("list", help="users and roles")
    usub.add_parser("keygen", help="print a new random key for security.key_env / key_file")
    key = usub.add_parser("key", help="a new API key for a user (printed once), or --revoke")
    key.add_argument("name")
    key.add_argument("--revoke", nargs="?", const="*", metavar="KEY_ID",
                     help="revoke that key of the user (no KEY_ID: all their keys)")
    key.add_argument("--list", action="store_true", help="the ids and dates of their keys")
    for p in (add, rm, out, usub.choices["list"], key):
        p.add_argument("--file", help="users file (default: security.users_file)")
        p.add_argument("--json", action="store_true")
    users.set_defaults(func=cmd_users)


def cmd_users(args, settings) -> int:
    if args.users_command == "keygen":
        # heavy: loaded when the command runs (CLI start-up)
        from specrag.security.crypto import generate_key

        print(generate_key())
        return 0
    path = args.file or settings.security.users_file
    if not path:
        raise SpecragError("no users file: pass --file or set security.users_file "
                           "(SPECRAG_SECURITY__USERS_FILE)")
    if args.users_command == "key":
        return _api_key(args, path)
    if args.users_command == "add":
        add_user(path, args.name, args.role, _password(f"password for {args.name}: ", twice=True))
        revoked = _revoke_keys(args, path)
        print(json.dumps({"added": args.name, "role": args.role, **revoked}) if args.json
              else f"{args.name} ({args.role}) saved in {path}" + _revoked_text(revoked))
        return 0
    if args.users_command == "remove":
        ok = remove_user(path, args.name)
        print(json.dumps({"removed": ok}) if args.json else
              (f"removed {args.name}" if ok else f"no user '{args.name}' in {path}"))
        return 0 if ok else 1
    if args.users_command == "logout":
        epoch = end_sessions(path, args.name)
        revoked = _revoke_keys(args, path) if epoch is not None else {}
        print(json.dumps({"logged_out": epoch is not None, **revoked}) if args.json else
              (f"ended the sessions of {args.name}" + _revoked_text(revoked)
               if epoch is not None else f"no user '{args.name}' in {path}"))
        return 0 if epoch is not None else 1
    directory = load_directory(path)
    rows = [{"name": u.name, "role": u.role} for u in directory.users.values()]
    print(json.dumps(rows) if args.json else
          "\n".join(f"{r['name']:<24} {r['role']}" for r in rows) or "(no users)")
    return 0


def _revoke_keys(args, path) -> dict:
    """``--keys``: revoke every API key of ``args.name``; ``{"keys_revoked": n}`` or {}."""
    return {"keys_revoked": api_keys.revoke(path, args.name)} if args.keys else {}


def _revoked_text(revoked: dict) -> str:
    return f"; revoked {revoked['keys_revoked']} API key(s)" if revoked else ""


def _api_key(args, path) -> int:
    """``users key NAME [--revoke [KEY_ID] | --list]``: the endpoint's bearer keys."""
    if args.list:
        rows = [{"id": k.id, "created": k.created} for k in api_keys.listed(path, args.name)]
        print(json.dumps(rows) if args.json else
              "\n".join(f"{r['id']}  {r['created']}" for r in rows) or "(no keys)")
        return 0
    if args.revoke:
        n = api_keys.revoke(path, args.name, None if args.revoke == "*" else args.revoke)
        print(json.dumps({"revoked": n}) if args.json else f"revoked {n} key(s) of {args.name}")
        return 0 if n else 1
    key_id, key = api_keys.issue(path, args.name)
    # shown once: the file keeps only its digest
    print(json.dumps({"id": key_id, "key": key}) if args.json else
          f"{key}\n(key id {key_id} for {args.name}; it is not shown again)")
    return 0


def login(args, settings):
    """A context that binds the signed-in CLI user (nothing in single-user mode)."""
    control = AccessControl(settings)
    name = getattr(args, "user", None) or os.environ.get(USER_ENV)
    if getattr(args, "command", None) == "users" or not control.enabled:
        if getattr(args, "user", None) and not control.enabled:
            raise SpecragError("--user needs a users file (security.users_file)")
        return contextlib.nullcontext()
    if not name:
        return contextlib.nullcontext()  # commands that touch a collection will refuse
    principal = control.authenticate(name, _password(f"password for {name}: "))
    if principal is None:
        raise SpecragError("wrong user name or password")
    return acting_as(principal)


def _password(prompt: str, twice: bool = False) -> str:
    if os.environ.get(PASSWORD_ENV):
        return os.environ[PASSWORD_ENV]
    if not sys.stdin.isatty():
        raise SpecragError(f"no password: set ${PASSWORD_ENV} or run on a terminal")
    first = getpass.getpass(prompt)
    if twice and getpass.getpass("again: ") != first:
        raise SpecragError("the passwords do not match")
    return first
