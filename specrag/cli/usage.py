"""``specrag usage``: the ledger's tokens and cost per session, collection, model, day
or stage.

``usage`` reads ``DATA_DIR/ledger.sqlite3`` (``budget.ledger_file``); it can run while
the app writes (WAL). ``--json`` prints ``{"by": ..., "rows": [...], "budget": ...}``.

Deliberately not here: the ledger itself (``observability.ledger``), budgets
(``observability.budget``).
"""

from __future__ import annotations

import json
import sys


def add_parsers(sub) -> None:
    u = sub.add_parser("usage", help="tokens and cost from the usage ledger")
    u.add_argument("--by", default="session",
                   choices=["session", "user", "collection", "model", "day", "stage", "route"])
    u.add_argument("--session", help="only this session (also shows its budget)")
    u.add_argument("-c", "--collection", default=None, help="only this collection")
    u.add_argument("--since", help="only from this UTC day on (YYYY-MM-DD)")
    u.add_argument("--json", action="store_true")
    u.set_defaults(func=cmd_usage)


def cmd_usage(args, settings) -> int:
    # heavy: loaded when the command runs (CLI start-up)
    from specrag.observability.budget import Budget
    from specrag.observability.ledger import Ledger

    path = settings.data_path / settings.budget.ledger_file
    if not path.exists():
        print(f"specrag: no usage recorded yet ({path} does not exist)", file=sys.stderr)
        return 1
    ledger = Ledger.from_settings(settings)
    rows = ledger.summary(args.by, session=args.session, collection=args.collection,
                          since=args.since)
    budget = Budget(settings, ledger).status(args.session) if args.session else None
    if args.json:
        print(json.dumps({"by": args.by, "rows": rows, "budget": budget}, indent=2))
        return 0
    head = (args.by, "questions", "attempts", "failed", "tokens in", "tokens out", "cost USD")
    table = [(str(r["key"]), str(r["questions"]), str(r["attempts"]), str(r["failed"]),
              str(r["input_tokens"]), str(r["output_tokens"]), f"{r['cost_usd']:.4f}") for r in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *table)]
    for line in [head, *table]:
        print("  ".join(x.ljust(w) if i == 0 else x.rjust(w)
                        for i, (x, w) in enumerate(zip(line, widths))))
    print(f"total: ${sum(r['cost_usd'] for r in rows):.4f} over "
          f"{sum(r['attempts'] for r in rows)} attempts")
    if budget:
        limit = budget["session_limit_usd"]
        print(f"session {args.session}: ${budget['session_spent_usd']:.4f} spent"
              + (f" of ${limit:.2f}" if limit else " (no session budget)"))
    return 0
