"""Retrieval benchmark: ingest a public QA corpus, then measure the int8 and fp32 embedders.

``run(settings, "halueval-qa", n=500, scale=100_000)`` does everything in one go and
writes ``retrieval.json`` and ``retrieval.md`` to ``out_dir``:

1. Every passage of the dataset is ingested as its own small ``ID.txt`` document (so a
   hit's ``source`` names its passage) into a fresh Chroma under ``out_dir/data``,
   once per backend. The fp32 collection is built by a second ``Ingestor`` over the
   same bytes: the chunker only depends on the (shared) tokenizer, so both
   collections hold identical chunk texts, and we get fp32 ingest timing for free.
2. Encode throughput: the same fixed sample of passages per backend, warm-up excluded,
   best of two interleaved rounds (the machine may be shared).
3. Quality on ``n`` questions: recall@1/3/10/50 (gold passage among the top k) and MRR@50.
4. Latency of single top-50 queries (encode + search, and search alone), at corpus
   size and, with ``scale``, after padding the first backend's collection to
   ``scale`` chunks with SYNTHETIC vectors: real passage embeddings plus gaussian
   noise, renormalised, marked ``synthetic: True`` with source ``synthetic/...``.
   Embedding 100k real chunks would take most of an hour on two CPU cores, and the
   vector search cost depends on the number and dimension of vectors, not their text.

Deliberately not here: reranking, answer generation, or recall at the padded scale
(near-duplicate synthetic vectors would distort it).
"""

from __future__ import annotations

import json
import os
import platform
import random
import shlex
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from ..datasets import DATASETS, QADataset, load_dataset, passage_file_name
from ..embedder import Embedder
from ..ingest import Ingestor
from ..retrieval import Retriever
from ..settings import Settings
from ..sources import source_for
from ..store import Store
from ..types import DocumentInfo, SpecragError

KS = (1, 3, 10, 50)
TOP_K = 50
ENCODE_SAMPLE = 512
LATENCY_QUERIES = 200
NOISE = 0.5  # norm of the gaussian noise added to a unit vector before renormalising
MARKER = ".specrag-bench"


def run(settings: Settings, dataset: str = "halueval-qa", n: int = 500, scale: int = 0,
        backends: tuple[str, ...] = ("onnx-int8", "onnx-fp32"), out_dir: str | None = None,
        progress: bool = True, max_passages: int | None = None, seed: int = 0) -> dict:
    """Run the benchmark and return the result dict (also written to ``out_dir``)."""
    started = time.time()
    out = Path(out_dir) if out_dir else settings.data_path / "bench" / "retrieval"
    bench_settings = settings.with_values(**{"data_dir": str(_fresh_dir(out / "data")),
                                             "cache_dir": str(settings.cache_path)})
    ds = load_dataset(dataset, settings, n=n, seed=seed)
    passages = _corpus(ds, max_passages, seed)
    files = [(passage_file_name(p.id), p.document().encode("utf-8")) for p in passages]
    store = Store(bench_settings).warm_up()
    embedders = {b: Embedder(bench_settings, backend=b).warm_up() for b in backends}
    colls = {b: f"bench-{dataset}-{b.removeprefix('onnx-')}" for b in backends}
    questions = [item.question for item in ds.items]
    golds = [passage_file_name(item.gold_passage_id) for item in ds.items]
    rng = random.Random(seed)
    sample = [p.document() for p in rng.sample(passages, min(ENCODE_SAMPLE, len(passages)))]
    lat_queries = questions[:LATENCY_QUERIES]

    per: dict[str, dict] = {b: {} for b in backends}
    for b in backends:
        per[b]["ingest"] = _ingest(Ingestor(bench_settings, embedders[b], store), files,
                                   colls[b], progress, b)
    for b, enc in _throughput(embedders, sample).items():
        per[b]["encode"] = enc
    for b in backends:
        retriever = Retriever(bench_settings, embedders[b], store)
        per[b]["quality"] = _quality(retriever, questions, golds, colls[b])
        per[b]["latency"] = _latency(retriever, lat_queries, colls[b])

    scaled = None
    first = backends[0]
    if scale and scale > store.count(colls[first]):
        pad = _pad(store, colls[first], scale, seed, progress)
        lat = _latency(Retriever(bench_settings, embedders[first], store), lat_queries,
                       colls[first])
        scaled = {"backend": first, "chunks": store.count(colls[first]), **pad, "latency": lat}

    result = {
        "benchmark": "retrieval", "dataset": dataset, "n": len(ds.items), "seed": seed,
        "corpus": {"passages": len(passages), "dataset_passages": len(ds.passages),
                   "chunks": per[first]["ingest"]["chunks"],
                   "capped": len(passages) < len(ds.passages)},
        "machine": _machine(),
        "embedder": {"model": source_for("embedder", settings),
                     "max_seq_length": settings.embedder.max_seq_length,
                     "batch_size": settings.embedder.batch_size,
                     "chunk_size": settings.chunking.chunk_size},
        "fp32_corpus": "second Ingestor with the fp32 embedder over the same passage bytes "
                       "(identical chunk texts)",
        "backends": per, "scale": scaled, "started_at": started,
        "command": _command(dataset, n, scale, max_passages, out, seed), "argv": sys.argv,
    }
    result["comparison"] = _compare(per)
    result["targets"] = _targets(result)
    result["seconds_total"] = round(time.time() - started, 1)
    out.mkdir(parents=True, exist_ok=True)
    (out / "retrieval.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "retrieval.md").write_text(to_markdown(result))
    return result


# -- steps -------------------------------------------------------------------------
def _fresh_dir(path: Path) -> Path:
    """An empty folder; only a folder this benchmark made earlier is ever deleted."""
    if path.exists():
        if not (path / MARKER).exists() and any(path.iterdir()):
            raise SpecragError(f"{path} exists and was not made by the benchmark; "
                               "choose another --out")
        shutil.rmtree(path)
    path.mkdir(parents=True)
    (path / MARKER).write_text("made by specrag bench retrieval; deleted on the next run\n")
    return path


def _corpus(ds: QADataset, max_passages: int | None, seed: int) -> list:
    """All passages, or a seeded subset of ``max_passages`` that keeps every gold one."""
    if not max_passages or max_passages >= len(ds.passages):
        return list(ds.passages)
    gold = {item.gold_passage_id for item in ds.items}
    others = [p.id for p in ds.passages if p.id not in gold]
    keep = gold | set(random.Random(seed).sample(others, max(0, min(len(others),
                                                                 max_passages - len(gold)))))
    return [p for p in ds.passages if p.id in keep]


def _bar(progress: bool, total: int, desc: str, unit: str):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, disable=not progress, file=sys.stderr,
                leave=False)


def _ingest(ingestor: Ingestor, files, collection: str, progress: bool, backend: str) -> dict:
    ingestor.warm_up()
    bar = _bar(progress, len(files), f"ingest {backend}", "doc")
    t0 = time.perf_counter()
    report = ingestor.ingest_bytes(files, collection, lambda done, total, r: bar.update(1))
    seconds = time.perf_counter() - t0
    bar.close()
    chunks = report.chunks_added
    return {"documents": len(files), "chunks": chunks, "seconds": round(seconds, 2),
            "chunks_per_s": round(chunks / seconds, 1), "failed": len(report.failed),
            "failures": [r.reason for r in report.failed[:5]]}


def _throughput(embedders: dict[str, Embedder], texts: list[str], rounds: int = 2) -> dict:
    for emb in embedders.values():
        emb.encode_documents(texts[:64])  # warm-up: thread pools, allocator
    best = {b: float("inf") for b in embedders}
    for _ in range(rounds):  # interleaved, so a burst of load elsewhere hits both
        for b, emb in embedders.items():
            t0 = time.perf_counter()
            emb.encode_documents(texts)
            best[b] = min(best[b], time.perf_counter() - t0)
    return {b: {"passages": len(texts), "seconds": round(s, 3),
                "passages_per_s": round(len(texts) / s, 1)} for b, s in best.items()}


def _quality(retriever: Retriever, questions: list[str], golds: list[str], coll: str) -> dict:
    ranks = []
    for res, gold in zip(retriever.retrieve_many(questions, TOP_K, coll), golds):
        ranks.append(next((h.rank for h in res.hits if h.chunk.source == gold), None))
    n = max(1, len(ranks))
    out = {f"recall@{k}": round(sum(r is not None and r <= k for r in ranks) / n, 4) for k in KS}
    out[f"mrr@{TOP_K}"] = round(sum(1 / r for r in ranks if r) / n, 4)
    out["questions"] = len(ranks)
    return out


def _latency(retriever: Retriever, queries: list[str], coll: str) -> dict:
    retriever.retrieve_many(queries[:5], TOP_K, coll)  # warm caches
    total, search = [], []
    for q in queries:
        res = retriever.retrieve_many([q], TOP_K, coll)[0]
        total.append(res.total_ms)
        search.append(res.search_ms)
    p = lambda xs, q: round(float(np.percentile(xs, q)), 2) if xs else None  # noqa: E731
    return {"queries": len(queries), "top_k": TOP_K, "p50_ms": p(total, 50),
            "p95_ms": p(total, 95), "search_p50_ms": p(search, 50),
            "search_p95_ms": p(search, 95)}


def _pad(store: Store, coll: str, target: int, seed: int, progress: bool) -> dict:
    """Add synthetic chunks until the collection holds ``target``; see the module docstring."""
    chunks = store._pair(coll)[0]
    real = np.asarray(chunks.get(include=["embeddings"])["embeddings"], dtype=np.float32)
    need = target - len(real)
    rng = np.random.default_rng(seed)
    doc_id, version = "synthetic-padding", f"synthetic-{seed}-{target}"
    store.begin(coll, [(doc_id, "synthetic/padding", version)])  # invisible until commit
    bar = _bar(progress, need, "synthetic padding", "vec")
    t0 = time.perf_counter()
    step = min(store._batch or 5000, 5000)
    for start in range(0, need, step):
        m = min(step, need - start)
        vecs = real[rng.integers(0, len(real), m)]
        vecs = vecs + rng.normal(0.0, NOISE / np.sqrt(real.shape[1]), vecs.shape)
        vecs = (vecs / np.linalg.norm(vecs, axis=1, keepdims=True)).astype(np.float32)
        ids = [f"synthetic:{start + j:07d}" for j in range(m)]
        metas = [{"doc_id": doc_id, "source": f"synthetic/{start + j:07d}", "index": start + j,
                  "start": 0, "end": 0, "content_hash": "", "version": version,
                  "synthetic": True} for j in range(m)]
        chunks.add(ids=ids, embeddings=vecs, metadatas=metas,
                   documents=["(synthetic padding vector, no text)"] * m)
        bar.update(m)
    store.commit(coll, [DocumentInfo(doc_id=doc_id, source="synthetic/padding", version=version,
                                     chunks=need, size_bytes=0, format="synthetic",
                                     ingested_at=time.time())])
    bar.close()
    return {"synthetic_chunks": need, "real_chunks": len(real), "noise_norm": NOISE,
            "padding_seconds": round(time.perf_counter() - t0, 1),
            "note": "padding vectors are synthetic (real passage embeddings + gaussian noise, "
                    "renormalised): embedding 100k real chunks on 2 CPU cores takes too long"}


# -- report ------------------------------------------------------------------------
def _machine() -> dict:
    import chromadb
    import onnxruntime

    return {"platform": platform.platform(), "machine": platform.machine(),
            "python": platform.python_version(), "cpu_count": os.cpu_count(),
            "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
            else os.cpu_count(), "onnxruntime": onnxruntime.__version__,
            "chromadb": chromadb.__version__, "numpy": np.__version__,
            "loadavg": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg")
            else None}


def _command(dataset, n, scale, max_passages, out, seed) -> str:
    parts = ["specrag", "bench", "retrieval", "--dataset", dataset, "--n", str(n),
             "--scale", str(scale), "--out", str(out)]
    parts += ["--max-passages", str(max_passages)] if max_passages else []
    return shlex.join(parts + (["--seed", str(seed)] if seed else []))


def _compare(per: dict) -> dict:
    a, b = per.get("onnx-int8"), per.get("onnx-fp32")
    if not (a and b):
        return {}
    return {"encode_speedup_int8_vs_fp32": round(a["encode"]["passages_per_s"]
                                                 / b["encode"]["passages_per_s"], 2),
            "ingest_speedup_int8_vs_fp32": round(a["ingest"]["chunks_per_s"]
                                                 / b["ingest"]["chunks_per_s"], 2),
            "recall@10_diff_points": round(100 * (a["quality"]["recall@10"]
                                                  - b["quality"]["recall@10"]), 2),
            "mrr@50_diff_points": round(100 * (a["quality"]["mrr@50"]
                                               - b["quality"]["mrr@50"]), 2)}


def _targets(r: dict) -> list[dict]:
    cmp_, first = r["comparison"], next(iter(r["backends"].values()))
    per_10k = 10_000 / first["ingest"]["chunks_per_s"] if first["ingest"]["chunks_per_s"] else None
    sc = r["scale"]
    at_100k = sc and sc["chunks"] >= 100_000

    def row(name, value, ok, note=""):
        return {"target": name, "value": value, "passed": ok, "note": note}

    speed, diff = cmp_.get("encode_speedup_int8_vs_fp32"), cmp_.get("recall@10_diff_points")
    return [
        row("int8 encode throughput >= 2x fp32", speed, None if speed is None else speed >= 2.0),
        row("recall@10 int8 within 1 point of fp32", diff,
            None if diff is None else abs(diff) <= 1.0),
        row("10k chunks ingested <= 120 s", round(per_10k, 1) if per_10k else None,
            None if per_10k is None else per_10k <= 120,
            f"{first['ingest']['chunks']} chunks in {first['ingest']['seconds']} s, "
            "scaled to 10,000"),
        row("top-50 query p50 <= 20 ms at 100k chunks (encode + search)",
            sc["latency"]["p50_ms"] if at_100k else None,
            sc["latency"]["p50_ms"] <= 20 if at_100k else None,
            "synthetic padding" if at_100k else "not measured: run with --scale 100000"),
    ]


def to_markdown(r: dict) -> str:
    bs = list(r["backends"])
    rows = [("ingest chunks/s", "ingest", "chunks_per_s"), ("ingest seconds", "ingest", "seconds"),
            ("encode passages/s", "encode", "passages_per_s")]
    rows += [(f"recall@{k}", "quality", f"recall@{k}") for k in KS]
    rows += [("MRR@50", "quality", "mrr@50"), ("p50 ms (encode+search)", "latency", "p50_ms"),
             ("p95 ms (encode+search)", "latency", "p95_ms"),
             ("p50 ms (search only)", "latency", "search_p50_ms"),
             ("p95 ms (search only)", "latency", "search_p95_ms")]
    m, c = r["machine"], r["corpus"]
    lines = [f"# Retrieval benchmark: {r['dataset']}", "",
             f"{r['n']} questions; corpus {c['passages']} passages "
             f"({'capped from ' + str(c['dataset_passages']) if c['capped'] else 'all'}), "
             f"{c['chunks']} chunks; embedder `{r['embedder']['model'].split('#')[0]}`.",
             f"Machine: {m['platform']}, {m['cpus_usable']} CPUs, onnxruntime {m['onnxruntime']}, "
             f"chromadb {m['chromadb']}, load {m['loadavg']}.", f"Command: `{r['command']}`", "",
             "| metric | " + " | ".join(bs) + " |", "|---|" + "---|" * len(bs)]
    lines += [f"| {label} | " + " | ".join(fmt(r["backends"][b][g].get(k)) for b in bs) + " |"
              for label, g, k in rows]
    lines += ["", f"fp32 corpus: {r['fp32_corpus']}. Comparison: "
              + ", ".join(f"{k} = {v}" for k, v in r["comparison"].items()), ""]
    if r["scale"]:
        s, lat = r["scale"], r["scale"]["latency"]
        lines += [f"## Latency at {s['chunks']} chunks ({s['backend']})", "",
                  f"**{s['synthetic_chunks']} of the {s['chunks']} chunks are SYNTHETIC**: "
                  f"{s['note']}. Padding took {s['padding_seconds']} s.", "",
                  "| top-50, single query | p50 ms | p95 ms |", "|---|---|---|",
                  f"| encode + search | {lat['p50_ms']} | {lat['p95_ms']} |",
                  f"| search only | {lat['search_p50_ms']} | {lat['search_p95_ms']} |", ""]
    lines += ["## Targets", "", "| target | value | result | note |", "|---|---|---|---|"]
    verdict = {True: "PASS", False: "FAIL", None: "not measured"}
    lines += [f"| {t['target']} | {fmt(t['value'])} | {verdict[t['passed']]} | {t['note']} |"
              for t in r["targets"]]
    return "\n".join(lines) + "\n"


def fmt(v) -> str:
    if v is None:
        return "–"
    return f"{v:.3f}" if isinstance(v, float) and abs(v) <= 1 else str(v)


# -- command line ------------------------------------------------------------------
def add_parser(subparsers):
    p = subparsers.add_parser("retrieval", help="ingest a public QA set; measure int8 vs fp32 "
                              "throughput, recall@k, MRR and query latency")
    p.add_argument("--dataset", choices=DATASETS, default="halueval-qa")
    p.add_argument("--n", type=int, default=500, help="questions to score (default 500)")
    p.add_argument("--scale", type=int, default=0, help="also time queries after padding the "
                   "collection to N chunks with synthetic vectors (e.g. 100000)")
    p.add_argument("--max-passages", type=int, default=None,
                   help="cap the corpus for a quick run (gold passages are always kept)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="results folder (default DATA_DIR/bench/retrieval)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    return p


def main(args, settings: Settings) -> int:
    progress = sys.stderr.isatty() or "SPECRAG_PROGRESS" in os.environ
    result = run(settings, args.dataset, args.n, args.scale, out_dir=args.out,
                 progress=progress, max_passages=args.max_passages, seed=args.seed)
    print(json.dumps(result, indent=2) if args.json else to_markdown(result))
    return 0
