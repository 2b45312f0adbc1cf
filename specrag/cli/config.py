"""``specrag config show``: the effective settings and where each value came from.

Deliberately not here: loading or validating settings (``settings``); ``main`` loads
them once and hands their origins over as ``args.origins``.
"""

from __future__ import annotations

import json

from specrag.settings import flat


def add_parsers(sub) -> None:
    cfg = sub.add_parser("config", help="settings")
    csub = cfg.add_subparsers(dest="config_command", required=True)
    show = csub.add_parser("show", help="effective settings and where each came from")
    show.add_argument("--json", action="store_true")
    show.add_argument("--yaml", action="store_true", help="print as a settings file")
    show.add_argument("--collection", default=None,
                      help="as questions to this collection run (with its `specrag tune` values)")
    show.set_defaults(func=cmd_config)


def cmd_config(args, settings) -> int:
    origins = dict(getattr(args, "origins", {}))
    if args.collection:
        from specrag.pipeline import profile  # heavy: loaded when the command runs (CLI start-up)

        tuned = profile.overrides(settings, args.collection)
        settings = profile.settings_for(settings, args.collection)
        where = f"tune:{profile.path(settings, args.collection)}"
        origins.update({k: where for k in tuned})
    if args.yaml:
        print(settings.to_yaml(), end="")
    elif args.json:
        print(json.dumps({k: {"value": v, "from": origins.get(k, "default")}
                          for k, v in flat(settings).items()}, indent=2))
    else:
        rows = [(k, repr(v), origins.get(k, "default")) for k, v in flat(settings).items()]
        w = max(len(r[0]) for r in rows)
        v = min(60, max(len(r[1]) for r in rows))
        for key, value, origin in rows:
            print(f"{key:<{w}}  {value:<{v}}  {origin}")
    return 0
