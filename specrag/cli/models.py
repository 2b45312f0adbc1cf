"""Command-line surface of the cross-encoders: ``train``, ``verify``, ``rerank`` and
``calibrate`` (their benchmarks are ``bench verifier|reranker``, in ``cli.bench``).

Deliberately not here: any scoring or training logic (``verifier``, ``crossencoder``,
``training.*``, ``bench.*``); this module only parses arguments and prints results.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from specrag.cli import checker


def _progress(args) -> bool:
    return not getattr(args, "json", False) and (sys.stderr.isatty() or "SPECRAG_PROGRESS" in os.environ)


# named here, not imported from ``training.data``: the parser must not import the training
# code; the names are checked where they are used (``training.data.left_out``)
WITHOUT_HELP = ("leave a data source out, with the sets built from it (repeatable); e.g. "
                "vitaminc when BIG-bench's sdist cannot be fetched (or set SPECRAG_BIGBENCH_SDIST)")


def add_parsers(sub) -> None:
    tr = sub.add_parser("train", help="train the verifier or reranker cross-encoder (CPU), "
                                      "its head, the query router, or the draft's adapter")
    tr.add_argument("model", choices=("verifier", "reranker", "head", "router", "draft",
                                      "checker-data"),
                    help="head: fit the verifier's calibrated head (head.json) on dev pairs; "
                         "router: fit the routed policy's router on `bench e2e` runs; "
                         "draft: the draft model's LoRA adapter on public questions the "
                         "benchmarks never ask (specrag/models/draft-adapter); checker-data: "
                         "labelled drafts for the answer checker, in gzip parts in --out")
    tr.add_argument("runs", nargs="*", help="router: `bench e2e` run folders (draft-only rows; "
                                            "heavy-only rows too for the latency curve)")
    tr.add_argument("--report", help="router: also write router.json/router.md here")
    tr.add_argument("--out", help="model folder (default: specrag/models/<model>, the shipped "
                                  "one); router: the router.json path")
    tr.add_argument("--seed", type=int, default=0)
    tr.add_argument("--scale", type=float, default=1.0, help="fraction of the default data size")
    tr.add_argument("--no-eval", action="store_true", help="skip the evaluation for the model card")
    tr.add_argument("--init", help="verifier: continue training this model folder (e.g. the "
                                   "shipped specrag/models/verifier) on the hard sets")
    tr.add_argument("--precision", choices=("auto", "bf16", "fp32"), default="auto",
                    help="verifier/reranker: bf16 autocast where the CPU (AVX-512 BF16, AMX) or "
                         "a GPU has it (auto), or force one")
    tr.add_argument("--without", action="append", default=[], metavar="SOURCE",
                    help="verifier/head/reranker: " + WITHOUT_HELP)
    tr.add_argument("--work", help="draft, checker-data: folder for its collections and answers "
                                   "(resumable; default DATA_DIR/train-draft, checker-data)")
    checker.add_options(tr)
    tr.add_argument("--json", action="store_true")
    tr.set_defaults(func=cmd_train)

    ve = sub.add_parser("verify", help="is an answer supported by a context? (or score pairs)")
    ve.add_argument("--context", help="text file (paragraphs become chunks) or JSONL of chunks")
    ve.add_argument("--answer", help="the draft answer to verify")
    ve.add_argument("--question", help="the question it answers: also scores whether it does")
    ve.add_argument("--pairs", help='JSONL of {"premise", "hypothesis"}: one scored line out each')
    ve.add_argument("--aggregate", choices=("min", "mean"), help="override verify.aggregate")
    ve.add_argument("--threshold", type=float, help="override verify.threshold")
    ve.add_argument("--model", help="verifier source (folder, hf id) instead of models.verifier")
    ve.add_argument("--json", action="store_true")
    ve.set_defaults(func=cmd_verify)

    rr = sub.add_parser("rerank", help="order passages by relevance to a query")
    rr.add_argument("--query", required=True)
    rr.add_argument("--passages", required=True, help="JSONL ({\"text\"} or strings) or one per line")
    rr.add_argument("-k", "--top-k", type=int, default=None)
    rr.add_argument("--model", help="reranker source instead of models.reranker")
    rr.add_argument("--json", action="store_true")
    rr.set_defaults(func=cmd_rerank)

    ca = sub.add_parser("calibrate", help="choose verify.threshold for a target precision")
    ca.add_argument("--e2e", nargs="+", metavar="RUN_DIR",
                    help="calibrate on `bench e2e` runs (accepted draft right?), not pair labels: "
                         "fits acceptance.json and verify.answer_threshold (default target 0.90)")
    ca.add_argument("--target-precision", type=float, default=None,
                    help="default 0.95 on pair labels, 0.90 with --e2e")
    ca.add_argument("--n", type=int, default=400, help="held-out drafts per source")
    ca.add_argument("--without", action="append", default=[], metavar="SOURCE",
                    help="pair labels: " + WITHOUT_HELP)
    ca.add_argument("--dry-run", action="store_true", help="print, do not write the settings file")
    ca.add_argument("--json", action="store_true")
    ca.set_defaults(func=cmd_calibrate)


def _read_lines(path: str) -> list:
    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line) if line[0] in "{[\"" else line)
            except json.JSONDecodeError:
                out.append(line)
    return out


def read_chunks(path: str, words: int = 150) -> list[str]:
    """A context file as chunks: JSONL rows (``text`` or strings), else paragraphs cut
    to at most ``words`` words so each fits the verifier's window."""
    if path.endswith((".jsonl", ".json")):
        return [r["text"] if isinstance(r, dict) else str(r) for r in _read_lines(path)]
    text = Path(path).read_text(encoding="utf-8")
    out = []
    for para in (p for p in text.split("\n\n") if p.strip()):
        w = para.split()
        out += [" ".join(w[i:i + words]) for i in range(0, len(w), words)]
    return out


def cmd_train(args, settings) -> int:
    from specrag.training import run  # heavy: loaded when the command runs (CLI start-up)

    if args.model == "router":
        # heavy: loaded when the command runs (CLI start-up)
        from specrag.cli.router import cmd_train_router

        if args.without:  # the router reads `bench e2e` runs, no training data
            raise ValueError("--without does not apply to `train router`")
        return cmd_train_router(args, settings)
    if args.model == "checker-data":
        return checker.cmd_checker_data(args, settings)
    if args.model == "draft":
        # heavy: loaded when the command runs (CLI start-up)
        from specrag.training import draft_train

        if args.without or args.init:
            raise ValueError("--without and --init do not apply to `train draft`")
        work = Path(args.work) if args.work else settings.data_path / "train-draft"
        out = Path(args.out) if args.out else sources_builtin("draft-adapter")
        n = {k: max(4, int(v * args.scale)) for k, v in
             (("n_halueval", 400), ("n_squad", 300), ("n_counter", 250))}
        stats = draft_train.run(settings, work, out, seed=args.seed,
                                progress=_progress(args) or not args.json, **n)
        print(json.dumps({"out": str(out), **stats}, indent=2) if args.json
              else f"draft adapter written to {out} (held-out answer loss "
                   f"{stats['held_out_loss'][0]} -> {stats['held_out_loss'][1]})")
        return 0
    if args.model == "head":
        out = run.train_head(settings, out=Path(args.out) if args.out else None, seed=args.seed,
                             n_per_source=max(10, int(400 * args.scale)), without=args.without)
        head = json.loads((out / "head.json").read_text())
        print(json.dumps(head, indent=2) if args.json else f"head written to {out / 'head.json'}: {head}")
        return 0
    fn = run.train_verifier if args.model == "verifier" else run.train_reranker
    extra = {"init": Path(args.init)} if args.init and args.model == "verifier" else {}
    out = fn(settings, out=Path(args.out) if args.out else None, scale=args.scale, seed=args.seed,
             progress=_progress(args) or not args.json, evaluate=not args.no_eval,
             precision=args.precision, without=args.without, **extra)
    meta = json.loads((out / "specrag.json").read_text())
    print(json.dumps({"out": str(out), **meta}, indent=2) if args.json
          else f"{args.model} written to {out} ({meta['train_stats']})")
    return 0


def sources_builtin(name: str) -> Path:
    from specrag.sources import BUILTIN_DIR  # heavy: loaded when the command runs (CLI start-up)

    return BUILTIN_DIR / name


def cmd_verify(args, settings) -> int:
    # heavy: loaded when the command runs (CLI start-up)
    from specrag.grounding.crossencoder import CrossEncoder
    from specrag.pipeline.build import build_verifier

    ce = CrossEncoder(settings, "verifier", model=args.model)
    if args.pairs:
        rows = _read_lines(args.pairs)
        scores = ce.predict([(r["premise"], r["hypothesis"]) for r in rows])
        for r, s in zip(rows, scores):
            print(json.dumps({**r, "score": round(float(s), 4)}))
        return 0
    if not (args.context and args.answer):
        print("specrag: error: give --context FILE and --answer TEXT, or --pairs FILE", file=sys.stderr)
        return 2
    chunks = read_chunks(args.context)
    overrides = {k: v for k, v in (("verify.aggregate", args.aggregate),
                                   ("verify.threshold", args.threshold)) if v is not None}
    # every other verify.* setting as serving has it (the same builder)
    verifier = build_verifier(settings.with_values(**overrides), scorer=ce)
    verdict = verifier.verify(args.answer, chunks, args.question)
    if args.json:
        print(json.dumps(verdict.to_dict(chunks), indent=2))
        return 0
    state = "ACCEPTED" if verdict.accepted else "REJECTED"
    print(f"{state}  {verdict.label} ({verdict.aggregate} over sentences, threshold "
          f"{verdict.threshold}" + (f"; P(right) {verdict.score:.3f}, answer threshold "
                                    f"{verdict.answer_threshold}" if verdict.relevance is not None
                                    else "") + ")"
          + ("  [abstention only]" if verdict.abstained else ""))
    for s in verdict.sentences:
        where = "abstention" if s.abstention else (
            f"chunk {s.best_chunk}" if s.best_chunk is not None else "no chunks")
        print(f"  {s.score:.3f}  {s.sentence}\n         best support: {where}")
    return 0


def cmd_rerank(args, settings) -> int:
    # heavy: loaded when the command runs (CLI start-up)
    from specrag.grounding.crossencoder import CrossEncoder

    rows = _read_lines(args.passages)
    docs = [r["text"] if isinstance(r, dict) else str(r) for r in rows]
    ranked = CrossEncoder(settings, "reranker", model=args.model).rank(
        args.query, docs, top_k=args.top_k, return_documents=True)
    for rank, r in enumerate(ranked, 1):
        if args.json:
            print(json.dumps({"rank": rank, **r, "score": round(r["score"], 4)}))
        else:
            print(f"{rank:3}. {r['score']:.3f}  [{r['corpus_id']}] {' '.join(r['text'].split())[:140]}")
    return 0


def cmd_calibrate(args, settings) -> int:
    # heavy: loaded when the command runs (CLI start-up)
    from specrag.training.calibrate import calibrate, settings_file, write_threshold

    if args.e2e:
        if args.without:  # replayed `bench e2e` rows, no training data
            raise ValueError("--without applies to pair-label calibration, not --e2e")
        return _calibrate_e2e(args, settings)
    result = calibrate(settings, args.target_precision or 0.95, args.n, progress=_progress(args),
                       without=args.without)
    path = settings_file(args.config, settings)
    if not args.dry_run:
        write_threshold(path, result["threshold"])
    result["written_to"] = None if args.dry_run else str(path)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        met = "" if result["target_met"] else " (TARGET NOT REACHED: best precision shown)"
        print(f"verify.threshold = {result['threshold']}: precision {result['precision']:.3f}, "
              f"recall {result['recall']:.3f} on {result['drafts']} held-out drafts{met}"
              + (f" (without {', '.join(result['without'])})" if result["without"] else ""))
        print(f"written to {path}" if not args.dry_run else "dry run: nothing written")
    return 0 if result["target_met"] else 1


def _calibrate_e2e(args, settings) -> int:
    from dataclasses import asdict

    # heavy: loaded when the command runs (CLI start-up)
    from specrag.training.calibrate import settings_file, write_values
    from specrag.training.calibrate_e2e import calibrate_e2e

    r = calibrate_e2e(args.e2e, settings, args.target_precision or 0.90, progress=_progress(args))
    path = settings_file(args.config, settings)
    model_path = path.parent / "acceptance.json"
    if not args.dry_run:
        r["model"].save(model_path)
        write_values(path, {"answer_threshold": round(r["answer_threshold"], 4),
                            "acceptance": str(model_path)})
    r["written_to"] = None if args.dry_run else str(path)
    if args.json:
        print(json.dumps({**r, "model": asdict(r["model"])}, indent=2))
        return 0 if r["target_met"] else 1
    for name, m in r["per_split"].items():
        print(f"{name:24s} drafts {m['drafts']:4d}  right {m['right']:.2f}  accepted "
              f"{m['acceptance']:.2f}  precision {m['precision']:.3f}  recall {m['recall']:.2f}")
    alone = r["grounding_only"]["test"]
    print(f"grounding alone (threshold {r['grounding_only']['threshold']:.3f}) on test: accepted "
          f"{alone['acceptance']:.2f}, precision {alone['precision']:.3f}")
    met = "" if r["target_met"] else " (TARGET NOT REACHED on dev: the most precise pair shown)"
    print(f"verify.answer_threshold = {r['answer_threshold']:.4f}{met}")
    print(f"written to {path} and {model_path}" if not args.dry_run else "dry run: nothing written")
    return 0 if r["target_met"] else 1
