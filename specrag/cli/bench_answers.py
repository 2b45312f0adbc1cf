"""``specrag bench e2e|report|reverify|prompts|followups``: the benchmarks of answers.

``e2e`` (speed, cost and quality of every policy on a QA set, one slice or several),
``report`` and ``reverify`` (a finished e2e run re-rendered, or its drafts re-verified
and lazy replayed), ``prompts`` (prompt tokens against the gold answer kept, per prompt
size) and ``followups`` (conversations of 4+ turns: the right document per turn index for
each follow-up method; ``--two-turn``: the older two-turn recall).

Deliberately not here: the benchmarks of parts and speed (``cli.bench``, which also
makes the ``bench`` command these hang under) and the benchmarks themselves
(``specrag.bench.*``); this module parses arguments, calls them and prints.
"""

from __future__ import annotations

import json
from pathlib import Path


def add_parsers(bsub) -> None:
    p = bsub.add_parser("e2e", help="speed/cost/quality of every policy on a QA set")
    p.add_argument("--dataset", default="halueval-qa",
                   help="halueval-qa, squad, counterfactual-squad, or a .jsonl file of your own "
                        "(needs --corpus); several, comma-separated: one run per slice in "
                        "OUT/SLICE and slices.md with each slice and all of them pooled")
    p.add_argument("--slices", action="store_true",
                   help="the three slices: squad,halueval-qa,counterfactual-squad")
    p.add_argument("--corpus", help="folder of documents for a .jsonl dataset")
    p.add_argument("--n", type=int, default=100)
    p.add_argument("--policies", default="heavy-only,draft-only,lazy,eager,routed")
    p.add_argument("--heavy", default="local",
                   help="local, anthropic, or a generation spec such as openai:MODEL")
    p.add_argument("--max-passages", type=int, default=None,
                   help="cap the corpus (gold passages are always kept)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="output folder (resumes a run found there)")
    p.add_argument("--prompt-cache", action="store_true",
                   help="keep llama.cpp's prompt-prefix cache as served (one policy only: "
                        "another policy would reuse the same question's prompt)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_e2e)

    p = bsub.add_parser("prompts", help="prompt tokens vs gold answer kept, per draft/heavy "
                                        "prompt size (retrieval and rerank only, no generation)")
    p.add_argument("--dataset", default="squad", help="halueval-qa, squad or counterfactual-squad")
    p.add_argument("--n", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="results folder (prompts.json, prompts.md)")
    p.set_defaults(func=cmd_prompts)

    p = bsub.add_parser("followups", help="conversations of 4+ turns (SQuAD turned into "
                                          "follow-ups, CoQA): the right document per turn "
                                          "index for each follow-up method")
    p.add_argument("--n", type=int, default=None,
                   help="CoQA conversations (default 200; SQuAD gives what it has), or with "
                        "--two-turn HaluEval-QA questions split in two (default 40)")
    p.add_argument("--answers", type=int, default=0,
                   help="conversations of the held-out half answered by the draft "
                        "(draft-only), half from each set: right per turn index")
    p.add_argument("--model", type=int, default=0,
                   help="conversations per set also searched as the draft model rewrites "
                        "them (chat.rewrite: model; a generation per follow-up)")
    p.add_argument("--two-turn", action="store_true",
                   help="the two-turn sets instead (handbook, HaluEval-QA split in two)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="results folder (followups.json, followups.md)")
    p.set_defaults(func=cmd_followups)

    p = bsub.add_parser("report", help="re-render e2e.md and e2e.html from an e2e.json")
    p.add_argument("run_json")
    p.set_defaults(func=cmd_report)

    p = bsub.add_parser("reverify", help="re-verify an e2e run's drafts with the current "
                        "verifier and threshold (no generation) and replay lazy")
    p.add_argument("run_dir", help="an e2e output folder (rows.jsonl and data/)")
    p.add_argument("--out", default=None, help="where reverify.md/json go (default: run_dir)")
    p.set_defaults(func=cmd_reverify)


def cmd_prompts(args, settings) -> int:
    from specrag.bench import prompts  # heavy: loaded when the command runs (CLI start-up)

    out = Path(args.out or settings.data_path / "bench" / "prompts")
    result = prompts.run(settings, args.dataset, args.n, str(out), args.seed)
    (out / "prompts.json").write_text(json.dumps(result, indent=1))
    (out / "prompts.md").write_text(prompts.to_markdown(result))
    print(prompts.to_markdown(result))
    return 0


def cmd_followups(args, settings) -> int:
    if args.two_turn:
        from specrag.bench import followups  # heavy: loaded when the command runs (CLI start-up)

        result = followups.run(settings, n=args.n or 40, seed=args.seed, out_dir=args.out)
        print(followups.to_markdown(result))
        return 0
    # heavy: loaded when the command runs (CLI start-up)
    from specrag.bench import multiturn, multiturn_report

    out = Path(args.out or settings.data_path / "bench" / "followups-conversations")
    result = multiturn.run(settings, n=args.n or 200, answers=args.answers, model=args.model,
                           seed=args.seed, out_dir=str(out))
    (out / "followups.md").write_text(multiturn_report.to_markdown(result))
    print(multiturn_report.to_markdown(result))
    return 0


def cmd_e2e(args, settings) -> int:
    # heavy: loaded when the command runs (CLI start-up)
    from specrag.bench import e2e, e2e_report, slices

    names = list(slices.SLICES) if args.slices else args.dataset.split(",")
    if len(names) > 1:
        out = Path(args.out or settings.data_path / "bench" / "e2e")
        runs = {name: e2e.run(settings, name, n=args.n, policies=tuple(args.policies.split(",")),
                              out_dir=str(out / name), seed=args.seed, heavy=args.heavy,
                              max_passages=args.max_passages) for name in names}
        summaries = slices.combined({k: r["rows"] for k, r in runs.items()},
                                    {"n": args.n, "slices": names})
        (out / "slices.json").write_text(json.dumps(
            {k: {kk: vv for kk, vv in v.items() if kk != "rows"} for k, v in summaries.items()},
            indent=1))
        (out / "slices.md").write_text(slices.to_markdown(summaries))
        (out / "slices.html").write_text(slices.to_html(summaries))
        print(slices.to_markdown(summaries))
        return 0
    result = e2e.run(settings, args.dataset, n=args.n, policies=tuple(args.policies.split(",")),
                     out_dir=args.out, seed=args.seed, corpus=args.corpus, heavy=args.heavy,
                     max_passages=args.max_passages, prompt_cache=args.prompt_cache)
    if args.json:
        print(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=1))
    else:
        print(e2e_report.to_markdown(result))
    return 0


def cmd_report(args, _settings) -> int:
    from specrag.bench import e2e_report  # heavy: loaded when the command runs (CLI start-up)

    out = e2e_report.render(args.run_json)
    print(f"wrote {out / 'e2e.md'} and {out / 'e2e.html'}")
    return 0


def cmd_reverify(args, settings) -> int:
    from specrag.bench import reverify  # heavy: loaded when the command runs (CLI start-up)

    result = reverify.run(args.run_dir, settings, out=args.out, progress=True)
    print(reverify.to_markdown(result))
    return 0
