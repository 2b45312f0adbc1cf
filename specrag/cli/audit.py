"""``specrag audit``: the live-traffic quality audit from the command line.

Prints the summary (samples, scored, mean faithfulness and context relevance,
acceptance rate) and the most recent samples; ``--json`` for scripts.

Deliberately not here: sampling or scoring (``audit``).
"""

from __future__ import annotations

import json


def add_parsers(sub) -> None:
    p = sub.add_parser("audit", help="quality audit of sampled live answers")
    p.add_argument("--limit", type=int, default=10, help="recent samples to show")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_audit)


def cmd_audit(args, settings) -> int:
    # heavy: loaded when the command runs (CLI start-up)
    from specrag.observability.audit import AuditStore

    store = AuditStore.from_settings(settings)
    summary, recent = store.summary(), store.recent(args.limit)
    if args.json:
        print(json.dumps({"summary": summary, "recent": recent}, indent=1))
        return 0

    def f(v):
        return "–" if v is None else f"{v:.2f}"

    print(f"{summary['samples']} samples, {summary['scored']} scored; faithfulness "
          f"{f(summary['faithfulness'])}, context relevance {f(summary['context_relevance'])}, "
          f"acceptance {f(summary['acceptance_rate'])}")
    for r in recent:
        print(f"#{r['id']} [{r['tier']}] faith {f(r['faithfulness'])} rel "
              f"{f(r['context_relevance'])}  {r['question'][:70]}")
    return 0
