"""``specrag ingest``, ``specrag search`` and ``specrag docs list|delete|collections``:
what goes into a collection and what comes back out of it.

Deliberately not here: parsing, chunking or storing (``ingest``), ranking
(``retrieval``), the access rules (``security.access``); this module parses arguments
and prints results.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict


def _common(p) -> None:
    p.add_argument("-c", "--collection", default=None)
    p.add_argument("--json", action="store_true", help="machine-readable output")


def add_parsers(sub) -> None:
    ing = sub.add_parser("ingest", help="add files or folders to a collection")
    ing.add_argument("paths", nargs="+")
    _common(ing)
    ing.set_defaults(func=cmd_ingest)

    se = sub.add_parser("search", help="retrieve the top-k chunks for a query")
    se.add_argument("query", nargs="?")
    se.add_argument("-k", "--top-k", type=int, default=None)
    se.add_argument("--source", action="append", help="only chunks of this source (repeatable)")
    se.add_argument("--queries", help="file with one query per line (JSON lines out)")
    _common(se)
    se.set_defaults(func=cmd_search)

    docs = sub.add_parser("docs", help="list or delete documents")
    dsub = docs.add_subparsers(dest="docs_command", required=True)
    _common(dsub.add_parser("list", help="documents in a collection"))
    dl = dsub.add_parser("delete", help="remove a document (by id or source name)")
    dl.add_argument("document")
    _common(dl)
    _common(dsub.add_parser("collections", help="all collections"))
    docs.set_defaults(func=cmd_docs)


def cmd_ingest(args, settings) -> int:
    from tqdm import tqdm

    # heavy: loaded when the command runs (CLI start-up)
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


def cmd_search(args, settings) -> int:
    # heavy: loaded when the command runs (CLI start-up)
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


def cmd_docs(args, settings) -> int:
    # heavy: loaded when the command runs (CLI start-up)
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
