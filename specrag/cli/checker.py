"""Command line of ``specrag train checker-data``: the answer checker's labelled drafts.

``specrag train checker-data --out benchmarks/data/checker-drafts --n 12000 --threads 1``
writes gzip parts of ``--part-size`` rows and a ``manifest.json`` into ``--out``, the
collections and the question plan into ``--work`` (default ``DATA_DIR/checker-data``),
and resumes where a stopped run left off. Progress goes to stdout, one line per ten rows
(rows done, rows per minute, share right), so a background run's log shows its rate.

Deliberately not here: the generation (``training.checker_data``); the other ``train``
options live in ``cli.models``, which registers these (``add_options``) and dispatches.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def add_options(parser) -> None:
    parser.add_argument("--n", type=int, default=12000,
                        help="checker-data: rows to reach in --out (default 12000)")
    parser.add_argument("--threads", type=int, default=1,
                        help="checker-data: llama.cpp threads of the draft (the embedder, "
                             "reranker and verifier use one ONNX thread each)")
    parser.add_argument("--part-size", type=int, default=500,
                        help="checker-data: rows per gzip part (default 500)")


def cmd_checker_data(args, settings) -> int:
    from specrag.training import checker_data  # loads the models' code: only when run

    if args.without or args.init:
        raise ValueError("--without and --init do not apply to `train checker-data`")
    if not args.out:
        raise ValueError("`train checker-data` needs --out DIR (e.g. benchmarks/data/checker-drafts)")
    if args.n < 1 or args.threads < 1 or args.part_size < 1:
        raise ValueError("--n, --threads and --part-size must be at least 1")
    work = Path(args.work) if args.work else settings.data_path / "checker-data"
    log = (lambda line: None) if args.json else (lambda line: print(line, flush=True))
    manifest = checker_data.run(settings, Path(args.out), work, n=args.n, seed=args.seed,
                                threads=args.threads, part_size=args.part_size,
                                progress=not args.json and sys.stderr.isatty(), log=log)
    if args.json:
        print(json.dumps(manifest, indent=2))
    else:
        print(f"{manifest['rows']} rows in finished parts of {args.out} "
              f"(+{manifest['open_part']['rows']} in the open part); counts in manifest.json")
    return 0
