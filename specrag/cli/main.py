"""The ``specrag`` command line: builds the ``argparse`` tree from the command-group
modules, loads settings once, signs in (``--user``) and dispatches.

Every group is a module of this package with ``add_parsers(sub)``, which registers its
subcommands with ``set_defaults(func=cmd_<name>)``; a handler is ``cmd_<name>(args,
settings) -> int``. Every command prints human-readable text by default and JSON with
``--json``; errors print one line to stderr and exit non-zero (1: some input failed, 2:
usage or configuration error).

Deliberately not here: any command (see the group modules) or anything a library call
could do for the UI too.
"""

from __future__ import annotations

import argparse
import sys

from specrag.cli import ask, audit, bench, config, docs, models, pull, serve, tune, usage, users
from specrag.settings import Settings
from specrag.types import SpecragError

# the order of ``specrag --help``; each module imports its heavy parts only when it runs
GROUPS = (docs, config, ask, serve, audit, models, pull, tune, usage, users, bench)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="specrag", description="Speculative RAG over your documents.")
    p.add_argument("--config", help="settings YAML file (default: $SPECRAG_CONFIG or "
                                    "DATA_DIR/specrag.yaml)")
    p.add_argument("--data-dir", help="override data_dir")
    users.add_global_options(p)
    sub = p.add_subparsers(dest="command", required=True)
    for group in GROUPS:
        group.add_parsers(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings, origins = Settings.load(args.config)
        if args.data_dir:
            settings = settings.with_values(data_dir=args.data_dir)
            origins["data_dir"] = "option:--data-dir"
        args.origins = origins  # `config show` prints where each value came from
        with users.login(args, settings):  # security: checks run as that user
            return args.func(args, settings)
    except (SpecragError, ValueError, OSError) as err:
        print(f"specrag: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("specrag: interrupted", file=sys.stderr)
        return 130
