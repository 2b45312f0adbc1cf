"""``specrag serve [--host H] [--port N]``: the OpenAI-compatible endpoint under uvicorn.

Serves ``specrag.api.create_app(settings)``: ``POST /v1/chat/completions`` and ``GET
/v1/models`` over the composition root's ``Service`` (models load on the first
question, as in the app). Point any OpenAI client at ``http://HOST:PORT/v1`` with a key
from ``specrag users key NAME`` and a model ``specrag:COLLECTION``. The default host is
loopback; with no users file only loopback clients are answered whatever ``--host``
says (``specrag.api.caller``), and the command says so when it listens wider. uvicorn
runs with ``specrag.api.server.server_config``: a request's headers must arrive within
``security.read_timeout_s`` and 64 KiB, its body within the same time and 1 MiB.

Deliberately not here: the routes (``specrag.api``), keys (``specrag users key``).
"""

from __future__ import annotations

import sys

DEFAULT_PORT = 8080  # not 8000: ``generation.openai_base_url``'s default model server


def add_parsers(sub) -> None:
    p = sub.add_parser("serve", help="serve the OpenAI-compatible API (/v1/chat/completions)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default loopback)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT)
    p.set_defaults(func=cmd_serve)


def cmd_serve(args, settings) -> int:
    import uvicorn

    from specrag.api import create_app  # heavy: loaded when the command runs (CLI start-up)
    from specrag.api.server import server_config
    from specrag.pipeline.build import build_service

    if not settings.security.users_file and args.host not in ("127.0.0.1", "::1", "localhost"):
        print("specrag: no users file (security.users_file): only loopback clients will be "
              "answered; add users and API keys to serve other machines", file=sys.stderr)
    service = build_service(settings)
    try:
        uvicorn.Server(server_config(create_app(settings, service), settings, args.host,
                                     args.port)).run()
    finally:
        service.close()  # the audit's scoring finishes before the process ends
    return 0
