"""Command-line wiring for ``specrag bench e2e`` and ``specrag bench report``.

Deliberately not here: the benchmark itself (``e2e``) or its rendering (``e2e_report``).
"""

from __future__ import annotations

import json


def add_parsers(bsub) -> None:
    p = bsub.add_parser("e2e", help="speed/cost/quality of every policy on a QA set")
    p.add_argument("--dataset", default="halueval-qa",
                   help="halueval-qa, squad, or a .jsonl file of your own (needs --corpus)")
    p.add_argument("--corpus", help="folder of documents for a .jsonl dataset")
    p.add_argument("--n", type=int, default=100)
    p.add_argument("--policies", default="heavy-only,draft-only,lazy,eager")
    p.add_argument("--heavy", default="local",
                   help="local, anthropic, or a generation spec such as openai:MODEL")
    p.add_argument("--max-passages", type=int, default=None,
                   help="cap the corpus (gold passages are always kept)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="output folder (resumes a run found there)")
    p.add_argument("--json", action="store_true")
    r = bsub.add_parser("report", help="re-render e2e.md and e2e.html from an e2e.json")
    r.add_argument("run_json")
    v = bsub.add_parser("reverify", help="re-verify an e2e run's drafts with the current "
                        "verifier and threshold (no generation) and replay lazy")
    v.add_argument("run_dir", help="an e2e output folder (rows.jsonl and data/)")
    v.add_argument("--out", default=None, help="where reverify.md/json go (default: run_dir)")


def main_e2e(args, settings) -> int:
    from specrag.bench import e2e, e2e_report

    result = e2e.run(settings, args.dataset, n=args.n, policies=tuple(args.policies.split(",")),
                     out_dir=args.out, seed=args.seed, corpus=args.corpus, heavy=args.heavy,
                     max_passages=args.max_passages)
    if args.json:
        print(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=1))
    else:
        print(e2e_report.to_markdown(result))
    return 0


def main_report(args, _settings) -> int:
    from specrag.bench import e2e_report

    out = e2e_report.render(args.run_json)
    print(f"wrote {out / 'e2e.md'} and {out / 'e2e.html'}")
    return 0


def main_reverify(args, settings) -> int:
    from specrag.bench import reverify

    result = reverify.run(args.run_dir, settings, out=args.out, progress=True)
    print(reverify.to_markdown(result))
    return 0
