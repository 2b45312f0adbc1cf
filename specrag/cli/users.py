"""``specrag users ...`` and ``specrag --user NAME``: manage the users file, sign in the CLI.

``specrag users add NAME --role viewer`` hashes the password (from ``$SPECRAG_PASSWORD``,
else asked twice on the terminal) into ``security.users_file``; ``users remove``,
``users list`` and ``users keygen`` (a new encryption key) complete the set. Editing
the users file needs write access to it, nothing else: that is how the first admin
is made.

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

from specrag.security.access import AccessControl, acting_as
from specrag.security.users import ROLES, add_user, load_directory, remove_user
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
    rm = usub.add_parser("remove", help="remove a user")
    rm.add_argument("name")
    usub.add_parser("list", help="users and roles")
    usub.add_parser("keygen", help="print a new random key for security.key_env / key_file")
    for p in (add, rm, usub.choices["list"]):
        p.add_argument("--file", help="users file (default: security.users_file)")
        p.add_argument("--json", action="store_true")
    users.set_defaults(func=cmd_users)


def cmd_users(args, settings) -> int:
    if args.users_command == "keygen":
        from specrag.security.crypto import generate_key

        print(generate_key())
        return 0
    path = args.file or settings.security.users_file
    if not path:
        raise SpecragError("no users file: pass --file or set security.users_file "
                           "(SPECRAG_SECURITY__USERS_FILE)")
    if args.users_command == "add":
        add_user(path, args.name, args.role, _password(f"password for {args.name}: ", twice=True))
        print(json.dumps({"added": args.name, "role": args.role}) if args.json
              else f"{args.name} ({args.role}) saved in {path}")
        return 0
    if args.users_command == "remove":
        ok = remove_user(path, args.name)
        print(json.dumps({"removed": ok}) if args.json else
              (f"removed {args.name}" if ok else f"no user '{args.name}' in {path}"))
        return 0 if ok else 1
    directory = load_directory(path)
    rows = [{"name": u.name, "role": u.role} for u in directory.users.values()]
    print(json.dumps(rows) if args.json else
          "\n".join(f"{r['name']:<24} {r['role']}" for r in rows) or "(no users)")
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
