"""``specrag bench ...``: every benchmark's command line, one subcommand each.

This module makes the ``bench`` command and the benchmarks of parts and speed:
``retrieval`` (int8 vs fp32 embedder, dense vs hybrid), ``chaos`` (faults and
concurrent sessions), ``verifier`` and ``reranker`` (the cross-encoders), ``llm-speed``
(a GGUF's first token and decode speed), ``concurrency`` (1 to 8 users at once per runtime),
``policy-timing`` (stage timings per policy), ``warm-states`` (first questions with and
without warmed draft prompts) and ``ingest`` (parse and chunk seconds per MB by format
and size). The benchmarks of answers (``e2e``, ``report``, ``reverify``, ``prompts``,
``followups``) hang under it from ``cli.bench_answers``.

Deliberately not here: the benchmarks themselves (``specrag.bench.*``, plain functions
with explicit arguments); this module parses arguments, calls them and prints.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from specrag.pipeline.events import POLICIES


def _progress(args) -> bool:
    return not getattr(args, "json", False) and (sys.stderr.isatty() or "SPECRAG_PROGRESS" in os.environ)


def add_parsers(sub) -> None:
    bench = sub.add_parser("bench", help="benchmarks")
    bsub = bench.add_subparsers(dest="bench_command", required=True)
    from specrag.cli import bench_answers
    from specrag.datasets import DATASETS

    bench_answers.add_parsers(bsub)

    p = bsub.add_parser("retrieval", help="int8 vs fp32 and dense vs hybrid: throughput, "
                                          "recall@k, latency")
    p.add_argument("--dataset", choices=DATASETS, default="halueval-qa")
    p.add_argument("--n", type=int, default=500, help="questions to score (default 500)")
    p.add_argument("--scale", type=int, default=0, help="also time queries after padding the "
                   "collection to N chunks with synthetic vectors (e.g. 100000)")
    p.add_argument("--max-passages", type=int, help="cap the corpus (gold passages stay)")
    p.add_argument("--backends", default="onnx-int8,onnx-fp32",
                   help="embedders to compare, comma-separated; dense vs hybrid is measured "
                        "on the first (default onnx-int8,onnx-fp32)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="results folder (default DATA_DIR/bench/retrieval)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_retrieval)

    p = bsub.add_parser("ingest", help="parse + chunk seconds per MB from 100 KB to 10 MB "
                                       "per format, and the hostile documents")
    p.add_argument("--sizes", default="0.1,1,10", help="document sizes in MB of text")
    p.add_argument("--formats", default=None, help="comma-separated subset of the formats")
    p.add_argument("--no-hostile", action="store_true", help="skip the hostile documents")
    p.add_argument("--out", default=None, help="results folder (ingest.json, ingest.md)")
    p.set_defaults(func=cmd_ingest)

    p = bsub.add_parser("chaos", help="answers under injected heavy-tier faults and "
                                      "concurrent app sessions")
    p.add_argument("-n", "--questions", type=int, default=200)
    p.add_argument("--fault-rate", type=float, default=0.3)
    p.add_argument("--sessions", type=int, default=20, help="gradio_client sessions (0: skip)")
    p.add_argument("--per-session", type=int, default=3, help="questions per session")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="bench-results/chaos")
    p.set_defaults(func=cmd_chaos)

    for name in ("verifier", "reranker"):
        p = bsub.add_parser(name, help=f"{name} quality and latency on held-out data, int8 vs fp32")
        p.add_argument("--n", type=int, default=None, help="held-out items per source/dataset")
        p.add_argument("--model", help="model folder (default: the configured one)")
        p.add_argument("--out", help="results folder (default DATA_DIR/bench/<name>)")
        p.add_argument("--update-card", action="store_true",
                       help="write the tables into the model folder's README.md")
        p.add_argument("--json", action="store_true")
        p.set_defaults(func=cmd_cross_encoder)

    p = bsub.add_parser("llm-speed", help="first-token time and decode speed of GGUF models "
                                          "through llama.cpp")
    p.add_argument("models", nargs="+", help="GGUF files")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--shapes", action="store_true",
                   help="first token of the served draft prompt: whole, prefix cached, cut")
    p.add_argument("--words", type=int, default=60, help="--shapes: words per cut chunk")
    p.set_defaults(func=cmd_llm_speed)

    p = bsub.add_parser("concurrency", help="1, 2, 4 and 8 users at once on each local "
                                            "runtime: first token, answer, tokens/s")
    p.add_argument("--sessions", type=_counts, default=(1, 2, 4, 8),
                   help="simultaneous sessions to measure, comma-separated (default 1,2,4,8)")
    p.add_argument("--runtimes", type=_names, default=("llama-server/1", "llama-server"),
                   help="generation.draft/heavy backends, comma-separated, each NAME or "
                        "NAME/SLOTS (default llama-server/1,llama-server: one request at a "
                        "time per model against slots sized to the machine)")
    p.add_argument("--rounds", type=int, default=2, help="rounds of every question per "
                                                         "session count (default 2)")
    p.add_argument("--policy", default="draft-only", choices=list(POLICIES))
    p.add_argument("--warm", action="store_true", help="keep the prompt cache and warm the "
                   "collection first (default: off, every first token pays its prefill)")
    p.add_argument("--max-tokens", type=int, default=None,
                   help="draft tokens at most (default generation.draft_max_tokens)")
    p.add_argument("--collection", default="handbook")
    p.add_argument("--out", default="bench-results/concurrency",
                   help="results folder (concurrency.json, concurrency.md, data/)")
    p.set_defaults(func=cmd_concurrency)

    p = bsub.add_parser("policy-timing", help="stage timings of the same questions under "
                                              "several policies")
    p.add_argument("policies", nargs="+")
    p.add_argument("--collection", default="handbook")
    p.add_argument("--prompt-cache", action="store_true",
                   help="keep the served prompt cache and prompt states; the timed rounds "
                        "ask other questions about the warm-up questions' chunks")
    p.add_argument("--again", action="store_true",
                   help="the timed rounds ask those other questions (--prompt-cache's "
                        "baseline without it)")
    p.set_defaults(func=cmd_policy_timing)

    p = bsub.add_parser("warm-states", help="first questions with and without warmed draft "
                                            "prompts (generation.warm_states)")
    p.add_argument("--collection", default="handbook")
    p.add_argument("--policy", default="lazy")
    p.add_argument("--dataset", choices=("squad", "halueval-qa"),
                   help="ask this set's questions (the collection must hold its passages, "
                        "as a 'bench e2e' data folder does) instead of the handbook's")
    p.add_argument("--n", type=int, default=30, help="questions of --dataset")
    p.add_argument("--during", action="store_true",
                   help="ask while a cold collection warms (against warming off), --gap-s apart")
    p.add_argument("--gap-s", type=float, default=2.0)
    p.add_argument("--json", dest="json_out", help="also write the rows to this JSON file")
    p.set_defaults(func=cmd_warm_states)


def cmd_retrieval(args, settings) -> int:
    from specrag.bench import retrieval

    result = retrieval.run(settings, args.dataset, args.n, args.scale,
                           backends=tuple(b for b in args.backends.split(",") if b),
                           out_dir=args.out,
                           progress=sys.stderr.isatty() or "SPECRAG_PROGRESS" in os.environ,
                           max_passages=args.max_passages, seed=args.seed)
    print(json.dumps(result, indent=2) if args.json else retrieval.to_markdown(result))
    return 0


def cmd_ingest(args, settings) -> int:
    from specrag.bench import ingest_scaling

    result = ingest_scaling.run(settings, tuple(float(x) for x in args.sizes.split(",")),
                                args.formats.split(",") if args.formats else None,
                                hostile=not args.no_hostile,
                                progress=(lambda m: print(m, file=sys.stderr))
                                if _progress(args) else None)
    out = Path(args.out or settings.data_path / "bench" / "ingest")
    out.mkdir(parents=True, exist_ok=True)
    (out / "ingest.json").write_text(json.dumps(result, indent=1))
    (out / "ingest.md").write_text(ingest_scaling.to_markdown(result))
    print(ingest_scaling.to_markdown(result))
    return 0


def cmd_chaos(args, settings) -> int:
    from specrag.bench import chaos  # heavy: imported for this command only (CLI start-up)
    from specrag.ui.app import build  # heavy: the whole Gradio app, for the sessions phase

    report = chaos.run(settings, n=args.questions, fault_rate=args.fault_rate,
                       sessions=args.sessions, per_session=args.per_session, out_dir=args.out,
                       seed=args.seed, build_app=build)
    print(chaos.markdown(report))
    print(f"written to {args.out}/chaos.json and chaos.md")
    failed = report["faults"]["failed_answers"] + report.get("sessions", {}).get("errors", 0)
    return 1 if failed else 0


def cmd_cross_encoder(args, settings) -> int:
    """``bench verifier`` and ``bench reranker``: the same flags, one module each."""
    if args.bench_command == "verifier":
        from specrag.bench import verifier as bench
    else:
        from specrag.bench import reranker as bench
    out = Path(args.out) if args.out else settings.data_path / "bench" / args.bench_command
    kwargs = {"n_per_source" if args.bench_command == "verifier" else "n_per_dataset": args.n}
    result = bench.run(settings, model_dir=Path(args.model) if args.model else None,
                       progress=_progress(args), out_dir=out, **kwargs)
    if args.update_card:
        from specrag.training.run import write_card

        model_dir = Path(result["model"])
        write_card(model_dir, json.loads((model_dir / "specrag.json").read_text()),
                   bench.to_markdown(result))
    print(json.dumps(result, indent=2) if args.json else bench.to_markdown(result))
    return 0


def cmd_llm_speed(args, _settings) -> int:
    from specrag.bench import llm_speed

    for model in args.models:
        if args.shapes:
            print(json.dumps(llm_speed.shapes(model, args.threads, args.words), indent=1))
            continue
        print(llm_speed.measure(model, args.threads), flush=True)
    return 0


def _counts(text: str) -> tuple[int, ...]:
    """``--sessions 1,2,4,8``: positive whole numbers."""
    try:
        counts = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        counts = ()
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"expected positive numbers like 1,2,4,8, not {text!r}")
    return counts


def _names(text: str) -> tuple[str, ...]:
    names = tuple(x.strip() for x in text.split(",") if x.strip())
    if not names:
        raise argparse.ArgumentTypeError("expected names like llama-server/1,llama-server")
    return names


def cmd_concurrency(args, settings) -> int:
    from specrag.bench import concurrency

    out = Path(args.out)
    s = concurrency.prepare(settings, out, args.collection)
    result = concurrency.run(s, runtimes=args.runtimes, sessions=args.sessions,
                             rounds=args.rounds, policy=args.policy, warm=args.warm,
                             max_tokens=args.max_tokens, collection=args.collection,
                             progress=lambda m: print(m, file=sys.stderr, flush=True))
    concurrency.write(result, out)
    print(concurrency.to_markdown(result))
    print(f"written to {out}/concurrency.json and concurrency.md")
    return 0


def cmd_policy_timing(args, settings) -> int:
    from specrag.bench import policy_timing
    from specrag.pipeline.build import build_service

    # the audit off and (unless asked) the prompt cache off, so no policy reuses another's
    # prompt
    settings = settings.with_values(**{"generation.prompt_cache": bool(args.prompt_cache)})
    service = build_service(settings, audit=False).warm_up()
    timed = policy_timing.AGAIN if args.prompt_cache or args.again else policy_timing.QUESTIONS
    try:
        policy_timing.timings(service, args.policies[0], args.collection)  # warm: models, caches
        for policy in args.policies:
            print(policy, policy_timing.timings(service, policy, args.collection, timed),
                  flush=True)
    finally:
        service.close()
    return 0


def cmd_warm_states(args, settings) -> int:
    from specrag.bench import warm_states

    questions = (warm_states.dataset_questions(settings, args.dataset, args.n)
                 if args.dataset else None)
    if args.during:
        result = warm_states.compare_during(settings, args.collection, args.policy, questions,
                                            args.gap_s)
    else:
        result = warm_states.compare(settings, args.collection, args.policy, questions)
    print(warm_states.table(result))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=1))
    return 0
