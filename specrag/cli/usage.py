"""``specrag usage`` (the ledger: tokens and cost per session, collection, model, day) and
``specrag bench chaos`` (the resilience benchmark).

``usage`` reads ``DATA_DIR/ledger.sqlite3`` (``budget.ledger_file``); it can run while
the app writes (WAL). ``--json`` prints ``{"by": ..., "rows": [...], "budget": ...}``.

Deliberately not here: the ledger itself (``resilience.ledger``), the benchmark
(``bench.chaos``).
"""

from __future__ import annotations

import json
import sys


def add_parsers(sub, bench_sub) -> None:
    u = sub.add_parser("usage", help="tokens and cost from the usage ledger")
    u.add_argument("--by", default="session",
                   choices=["session", "collection", "model", "day", "stage"])
    u.add_argument("--session", help="only this session (also shows its budget)")
    u.add_argument("-c", "--collection", default=None, help="only this collection")
    u.add_argument("--since", help="only from this UTC day on (YYYY-MM-DD)")
    u.add_argument("--json", action="store_true")

    c = bench_sub.add_parser("chaos", help="answers under injected heavy-tier faults and "
                                           "concurrent app sessions")
    c.add_argument("-n", "--questions", type=int, default=200)
    c.add_argument("--fault-rate", type=float, default=0.3)
    c.add_argument("--sessions", type=int, default=20, help="gradio_client sessions (0: skip)")
    c.add_argument("--per-session", type=int, default=3, help="questions per session")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--out", default="bench-results/chaos")


def main_usage(args, settings) -> int:
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


def main_chaos(args, settings) -> int:
    from specrag.bench import chaos

    report = chaos.run(settings, n=args.questions, fault_rate=args.fault_rate,
                       sessions=args.sessions, per_session=args.per_session, out_dir=args.out,
                       seed=args.seed)
    print(chaos.markdown(report))
    print(f"written to {args.out}/chaos.json and chaos.md")
    failed = report["faults"]["failed_answers"] + report.get("sessions", {}).get("errors", 0)
    return 1 if failed else 0
