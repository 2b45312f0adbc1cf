"""``specrag tune --collection NAME``: tune one collection on its own documents.

Prints the held-out before/after table (``--json``: the whole report as one object
with a block per step plus ``before`` and ``after``). Admins only. Rerunning resumes:
questions and answers already written are kept.

Deliberately not here: the steps themselves (``specrag.tune``).
"""

from __future__ import annotations

import json


def add_parsers(sub) -> None:
    t = sub.add_parser("tune", help="tune a collection on its own documents (admins)")
    t.add_argument("--collection", required=True)
    t.add_argument("--questions", type=int, default=40, help="questions to write (default 40)")
    t.add_argument("--max-cost-usd", type=float, default=None,
                   help="stop answering once this much is spent on billed models")
    t.add_argument("--steps", default="calibrate,router,distill",
                   help="comma-separated: calibrate, router, distill (default all; distill "
                        "fine-tunes the local draft model: tens of minutes on 2 cores)")
    t.add_argument("--epochs", type=int, default=2, help="distillation epochs (default 2)")
    t.add_argument("--target-precision", type=float, default=0.9)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--json", action="store_true", help="print the report as one JSON object")
    t.set_defaults(func=cmd_tune)


def cmd_tune(args, settings) -> int:
    # heavy: loaded when the command runs (CLI start-up)
    from specrag.tune.report import to_markdown
    from specrag.tune.run import tune

    if args.questions < 1:
        raise SystemExit("--questions must be at least 1")
    report = tune(settings, args.collection, questions=args.questions,
                  steps=args.steps.split(","), max_cost_usd=args.max_cost_usd,
                  target_precision=args.target_precision, seed=args.seed, epochs=args.epochs,
                  progress=not args.json)
    print(json.dumps(report, default=str) if args.json else to_markdown(report), end="\n")
    return 0
