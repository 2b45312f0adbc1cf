"""The ``specrag`` command line: renders library results, holds no pipeline logic.

Every command prints human-readable text by default and JSON with ``--json``; errors
print one line to stderr and exit non-zero (1: some input failed, 2: usage or
configuration error).

Deliberately not here: anything a library call could do for the UI too.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict

from specrag.settings import Settings, flat
from specrag.types import SpecragError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="specrag", description="Speculative RAG over your documents.")
    p.add_argument("--config", help="settings YAML file (default: $SPECRAG_CONFIG or "
                                    "DATA_DIR/specrag.yaml)")
    p.add_argument("--data-dir", help="override data_dir")
    from specrag.cli import users as security_cli  # security: --user and `specrag users`

    security_cli.add_global_options(p)
    sub = p.add_subparsers(dest="command", required=True)
    security_cli.add_parsers(sub)

    ing = sub.add_parser("ingest", help="add files or folders to a collection")
    ing.add_argument("paths", nargs="+")
    _common(ing)

    se = sub.add_parser("search", help="retrieve the top-k chunks for a query")
    se.add_argument("query", nargs="?")
    se.add_argument("-k", "--top-k", type=int, default=None)
    se.add_argument("--source", action="append", help="only chunks of this source (repeatable)")
    se.add_argument("--queries", help="file with one query per line (JSON lines out)")
    _common(se)

    docs = sub.add_parser("docs", help="list or delete documents")
    dsub = docs.add_subparsers(dest="docs_command", required=True)
    _common(dsub.add_parser("list", help="documents in a collection"))
    dl = dsub.add_parser("delete", help="remove a document (by id or source name)")
    dl.add_argument("document")
    _common(dl)
    _common(dsub.add_parser("collections", help="all collections"))

    cfg = sub.add_parser("config", help="settings")
    csub = cfg.add_subparsers(dest="config_command", required=True)
    show = csub.add_parser("show", help="effective settings and where each came from")
    show.add_argument("--json", action="store_true")
    show.add_argument("--yaml", action="store_true", help="print as a settings file")

    from specrag.cli import ask as cli_ask
    from specrag.cli import audit as cli_audit

    cli_ask.add_parser(sub)
    cli_audit.add_parser(sub)

    bench = sub.add_parser("bench", help="benchmarks")
    bsub = bench.add_subparsers(dest="bench_command", required=True)
    from specrag.bench import retrieval as bench_retrieval

    bench_retrieval.add_parser(bsub)
    from specrag.cli import bench_e2e as cli_e2e

    cli_e2e.add_parsers(bsub)

    # cross-encoders: train / verify / rerank / calibrate, bench verifier|reranker
    from specrag.cli import models as model_cli

    model_cli.add_parsers(sub)
    model_cli.add_bench_parsers(bsub)

    # resilience: `specrag usage` (the ledger) and `specrag bench chaos`
    from specrag.cli import usage as cli_usage

    cli_usage.add_parsers(sub, bsub)
    return p


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--collection", default=None)
    p.add_argument("--json", action="store_true", help="machine-readable output")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings, origins = Settings.load(args.config)
        if args.data_dir:
            settings = settings.with_values(data_dir=args.data_dir)
            origins["data_dir"] = "option:--data-dir"
        from specrag.cli import users as security_cli  # security: `users`, --user sign-in

        handler = {"ingest": cmd_ingest, "search": cmd_search, "docs": cmd_docs,
                   "config": cmd_config, "bench": cmd_bench, "ask": cmd_ask,
                   "audit": cmd_audit, "users": security_cli.cmd_users, "usage": cmd_usage,
                   **_model_handlers()}[args.command]
        with security_cli.login(args, settings):  # security: checks run as that user
            return handler(args, settings, origins)
    except (SpecragError, ValueError, OSError) as err:
        print(f"specrag: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("specrag: interrupted", file=sys.stderr)
        return 130


def cmd_ingest(args, settings, _origins) -> int:
    from tqdm import tqdm

    from specrag.ingest.ingestor import Ingestor

    ingestor = Ingestor(settings)
    bar = tqdm(total=0, unit="file", desc="ingest", file=sys.stderr,
               disable=args.json or not sys.stderr.isatty() and "SPECRAG_PROGRESS" not in os.environ)

    def progress(done, total, result):
        bar.total = total
        bar.update(1)
        if not args.json:
            line = (f"{result.status:9} {result.source}"
                    + (f"  ({result.chunks} chunks)" if result.status != "failed" else "")
                    + (f"  {result.reason}" if result.reason else ""))
            tqdm.write(line, file=sys.stdout)

    report = ingestor.ingest(args.paths, args.collection, on_progress=progress)
    bar.close()
    if args.json:
        print(json.dumps({"results": [asdict(r) for r in report.results],
                          "chunks_added": report.chunks_added}, indent=2))
    else:
        counts = {s: sum(r.status == s for r in report.results)
                  for s in ("added", "replaced", "unchanged", "failed")}
        print(", ".join(f"{v} {k}" for k, v in counts.items())
              + f"; {report.chunks_added} chunks stored")
    if not report.results:
        print("specrag: error: no files found", file=sys.stderr)
        return 1
    return 1 if report.failed else 0


def cmd_search(args, settings, _origins) -> int:
    from specrag.retrieval.retriever import Retriever

    if bool(args.query) == bool(args.queries):
        print("specrag: error: give a query or --queries FILE", file=sys.stderr)
        return 2
    if args.queries:
        with open(args.queries, encoding="utf-8") as fh:
            queries = [line.strip() for line in fh if line.strip()]
    else:
        queries = [args.query]
    results = Retriever(settings).retrieve_many(queries, args.top_k, args.collection, args.source)
    for res in results:
        if args.json or args.queries:
            print(json.dumps({"query": res.query, "encode_ms": round(res.encode_ms, 2),
                              "search_ms": round(res.search_ms, 2),
                              "hits": [_hit_dict(h) for h in res.hits]}))
            continue
        print(f"{len(res.hits)} hits for {res.query!r} "
              f"({res.encode_ms:.1f} ms encode, {res.search_ms:.1f} ms search)")
        for h in res.hits:
            where = h.chunk.source + (f" p.{h.chunk.page}" if h.chunk.page else "")
            where += f" § {h.chunk.heading}" if h.chunk.heading else ""
            text = " ".join(h.chunk.text.split())
            print(f"{h.rank:3}. {h.score:.3f}  {where}\n     {text[:160]}")
    return 0


def _hit_dict(h) -> dict:
    return {"rank": h.rank, "score": round(h.score, 4), **asdict(h.chunk)}


def cmd_docs(args, settings, _origins) -> int:
    from specrag.ingest.ingestor import Ingestor
    from specrag.retrieval.store import Store
    from specrag.security.access import list_documents, visible_collections

    store = Store(settings)
    collection = getattr(args, "collection", None) or settings.store.collection
    if args.docs_command == "collections":
        names = visible_collections(store)  # security: only collections the user may read
        print(json.dumps(names) if args.json else "\n".join(names) or "(no collections)")
        return 0
    if args.docs_command == "list":
        docs = list_documents(store, collection)  # security: read check
        if args.json:
            print(json.dumps([asdict(d) for d in docs], indent=2))
        else:
            for d in docs:
                pages = f"{d.pages} pages, " if d.pages else ""
                print(f"{d.doc_id}  {d.source}  ({d.format}, {pages}{d.chunks} chunks)")
            print(f"{len(docs)} documents in '{collection}'")
        return 0
    ok = Ingestor(settings, store=store).delete(args.document, collection)
    if args.json:
        print(json.dumps({"deleted": ok, "document": args.document}))
    elif ok:
        print(f"deleted {args.document}")
    if not ok:
        print(f"specrag: error: no document '{args.document}' in '{collection}'", file=sys.stderr)
        return 1
    return 0


def cmd_config(args, settings, origins) -> int:
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


def _model_handlers() -> dict:
    from specrag.cli import models as model_cli

    return {"train": model_cli.cmd_train, "verify": model_cli.cmd_verify,
            "rerank": model_cli.cmd_rerank, "calibrate": model_cli.cmd_calibrate}


def cmd_ask(args, settings, _origins) -> int:
    from specrag.cli import ask as cli_ask

    return cli_ask.main(args, settings)


def cmd_audit(args, settings, _origins) -> int:
    from specrag.cli import audit as cli_audit

    return cli_audit.main(args, settings)


def cmd_usage(args, settings, _origins) -> int:
    from specrag.cli import usage as cli_usage

    return cli_usage.main_usage(args, settings)


def cmd_bench(args, settings, _origins) -> int:
    from specrag.bench import retrieval as bench_retrieval

    if args.bench_command == "chaos":  # resilience
        from specrag.cli import usage as cli_usage

        return cli_usage.main_chaos(args, settings)

    if args.bench_command in ("verifier", "reranker"):
        from specrag.cli import models as model_cli

        return model_cli.cmd_bench(args, settings)
    if args.bench_command in ("e2e", "report", "reverify"):
        from specrag.cli import bench_e2e as cli_e2e

        return {"e2e": cli_e2e.main_e2e, "report": cli_e2e.main_report,
                "reverify": cli_e2e.main_reverify}[args.bench_command](args, settings)

    return bench_retrieval.main(args, settings)
