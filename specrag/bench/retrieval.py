"""Retrieval benchmark: ingest a public QA corpus, then measure the embedders, dense vs hybrid.

``run(settings, "halueval-qa", n=500, scale=100_000)`` does it all in one go and writes
``retrieval.json`` and ``retrieval.md`` to ``out_dir``:

1. Each passage is ingested as its own ``ID.txt`` (a hit's ``source`` names its passage)
   into a fresh Chroma under ``out_dir/data``, once per backend: the fp32 collection
   comes from a second ``Ingestor`` over the same bytes, so both hold identical chunks.
2. Encode throughput: one fixed passage sample for all backends, warm-up excluded,
   best of three interleaved rounds (the machine may be shared).
3. Quality on ``n`` questions: recall@1/3/10/50 (gold passage in the top k), MRR@50.
4. Latency of single top-50 queries (encode + search, and search alone; backends
   interleaved query by query) at corpus size.
5. Dense vs hybrid (BM25 over SQLite FTS5 fused by reciprocal rank, ``retrieval.hybrid``)
   on the first backend: the same quality figures and latency, the two modes interleaved.
6. With ``scale``, dense latency after padding the first backend's collection with
   SYNTHETIC vectors (real embeddings + gaussian noise, renormalised; ``synthetic:
   True``, source ``synthetic/...``): embedding 100k real chunks takes most of an hour
   on two cores, and search cost depends on vector count, not text.

Deliberately not here: reranking, generation, recall at the padded scale, hybrid latency
at the padded scale (padding vectors have no text for BM25 to index).
"""

from __future__ import annotations

import json
import os
import platform
import random
import shlex
import shutil
import sqlite3
import sys
import time
from importlib.metadata import version
from pathlib import Path

import numpy as np
from tqdm import tqdm

from specrag.datasets import QADataset, load_dataset, passage_file_name
from specrag.ingest.ingestor import Ingestor
from specrag.retrieval.embedder import Embedder
from specrag.retrieval.retriever import Retriever
from specrag.retrieval.store import Store
from specrag.settings import Settings
from specrag.sources import source_for
from specrag.types import DocumentInfo, SpecragError

KS = (1, 3, 10, 50)
TOP_K = 50
ENCODE_SAMPLE = 512
LATENCY_QUERIES = 200
NOISE = 0.5  # norm of the gaussian noise added to a unit vector before renormalising
MARKER = ".specrag-bench"
BACKENDS = ("onnx-int8", "onnx-fp32")


def run(settings: Settings, dataset: str = "halueval-qa", n: int = 500, scale: int = 0,
        backends: tuple[str, ...] = BACKENDS, out_dir: str | None = None,
        progress: bool = True, max_passages: int | None = None, seed: int = 0) -> dict:
    """Run the benchmark and return the result dict (also written to ``out_dir``)."""
    started, machine = time.time(), _machine()
    out = Path(out_dir) if out_dir else settings.data_path / "bench" / "retrieval"
    bset = settings.with_values(**{"data_dir": str(_fresh_dir(out / "data")),
                                   "cache_dir": str(settings.cache_path)})
    ds = load_dataset(dataset, settings, n=n, seed=seed)
    passages = _corpus(ds, max_passages, seed)
    files = [(passage_file_name(p.id), p.document().encode("utf-8")) for p in passages]
    store = Store(bset).warm_up()
    embedders = {b: Embedder(bset, backend=b).warm_up() for b in backends}
    colls = {b: f"bench-{dataset}-{b.removeprefix('onnx-')}" for b in backends}
    questions = [item.question for item in ds.items]
    golds = [passage_file_name(item.gold_passage_id) for item in ds.items]
    sample = random.Random(seed).sample(passages, min(ENCODE_SAMPLE, len(passages)))
    per: dict[str, dict] = {b: {"ingest": _ingest(Ingestor(bset, embedders[b], store), files,
                                                  colls[b], progress, b)} for b in backends}
    for b, enc in _throughput(embedders, [p.document() for p in sample]).items():
        per[b]["encode"] = enc
    dense = {b: (Retriever(bset, embedders[b], store, hybrid=False), colls[b]) for b in backends}
    for b, lat in _latency(dense, questions[:LATENCY_QUERIES]).items():
        per[b]["quality"] = _quality(dense[b][0], questions, golds, colls[b])
        per[b]["latency"] = lat
    first, scaled = backends[0], None
    first_coll = colls[first]
    modes = {"dense": dense[first],
             "hybrid": (Retriever(bset, embedders[first], store, hybrid=True), first_coll)}
    hybrid = {"backend": first, "dense": {"quality": per[first]["quality"]},
              "hybrid": {"quality": _quality(modes["hybrid"][0], questions, golds, first_coll)}}
    for m, lat in _latency(modes, questions[:LATENCY_QUERIES]).items():
        hybrid[m]["latency"] = lat
    hybrid["diff_points"] = {k: round(100 * (hybrid["hybrid"]["quality"][k]
                                             - hybrid["dense"]["quality"][k]), 2)
                             for k in [f"recall@{k}" for k in KS] + [f"mrr@{TOP_K}"]}
    if scale and scale > store.count(colls[first]):
        scaled = {"backend": first, **_pad(store, colls[first], scale, seed, progress)}
        scaled["chunks"] = store.count(colls[first])
        scaled["latency"] = _latency({first: dense[first]}, questions[:LATENCY_QUERIES])[first]
    cmd = ["specrag", "bench", "retrieval", "--dataset", dataset, "--n", str(n), "--scale",
           str(scale), "--out", str(out), "--seed", str(seed)] + (
        ["--max-passages", str(max_passages)] if max_passages else []) + (
        ["--backends", ",".join(backends)] if backends != BACKENDS else [])
    result = {
        "benchmark": "retrieval", "dataset": dataset, "n": len(ds.items), "seed": seed,
        "corpus": {"passages": len(passages), "dataset_passages": len(ds.passages),
                   "chunks": per[first]["ingest"]["chunks"],
                   "capped": len(passages) < len(ds.passages)},
        "machine": {**machine, "loadavg_end": _machine()["loadavg"]},
        "embedder": {"model": source_for("embedder", settings), **vars(settings.embedder)},
        "fp32_corpus": "second Ingestor with the fp32 embedder over the same passage bytes "
                       "(identical chunk texts)",
        "backends": per, "hybrid": hybrid, "scale": scaled, "comparison": _compare(per), "started_at": started,
        "command": shlex.join(cmd), "argv": sys.argv}
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
            raise SpecragError(f"{path} was not made by the benchmark; choose another --out")
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


def _bar(progress: bool, total: int, desc: str, unit: str) -> tqdm:
    return tqdm(total=total, desc=desc, unit=unit, disable=not progress, file=sys.stderr)


def _ingest(ingestor, files, collection: str, progress: bool, backend: str) -> dict:
    ingestor.warm_up()
    bar, t0 = _bar(progress, len(files), f"ingest {backend}", "doc"), time.perf_counter()
    report = ingestor.ingest_bytes(files, collection, lambda done, total, r: bar.update(1))
    seconds = time.perf_counter() - t0
    bar.close()
    return {"documents": len(files), "chunks": report.chunks_added, "seconds": round(seconds, 2),
            "chunks_per_s": round(report.chunks_added / seconds, 1),
            "failed": len(report.failed), "failures": [r.reason for r in report.failed[:5]]}


def _throughput(embedders: dict, texts: list[str], rounds: int = 3) -> dict:
    for emb in embedders.values():
        emb.encode_documents(texts[:64])  # warm-up: thread pools, allocator
    rates: dict[str, list[float]] = {b: [] for b in embedders}
    for _ in range(rounds):  # interleaved, so a burst of load elsewhere hits both
        for b, emb in embedders.items():
            t0 = time.perf_counter()
            emb.encode_documents(texts)
            rates[b].append(round(len(texts) / (time.perf_counter() - t0), 1))
    return {b: {"passages": len(texts), "passages_per_s": max(r), "rounds": r}
            for b, r in rates.items()}


def _quality(retriever, questions: list[str], golds: list[str], coll: str) -> dict:
    ranks = [next((h.rank for h in res.hits if h.chunk.source == gold), None)
             for res, gold in zip(retriever.retrieve_many(questions, TOP_K, coll), golds)]
    n = max(1, len(ranks))
    return {**{f"recall@{k}": round(sum(r is not None and r <= k for r in ranks) / n, 4)
               for k in KS}, f"mrr@{TOP_K}": round(sum(1 / r for r in ranks if r) / n, 4),
            "questions": len(ranks)}


def _latency(runs: dict, queries: list[str]) -> dict:
    """Single top-50 queries per ``name -> (retriever, collection)``, interleaved query by
    query so a burst of load elsewhere hits every contender alike."""
    for retriever, coll in runs.values():
        retriever.retrieve_many(queries[:5], TOP_K, coll)  # warm caches
    res: dict[str, list] = {name: [] for name in runs}
    for q in queries:
        for name, (retriever, coll) in runs.items():
            res[name].append(retriever.retrieve_many([q], TOP_K, coll)[0])
    out = {}
    for name, rs in res.items():
        ms = {"": [r.total_ms for r in rs], "search_": [r.search_ms for r in rs]}
        out[name] = {"queries": len(rs), "top_k": TOP_K, **{
            f"{kind}p{q}_ms": round(float(np.percentile(xs, q)), 2) if xs else None
            for kind, xs in ms.items() for q in (50, 95)}}
    return out


def _pad(store, coll: str, target: int, seed: int, progress: bool) -> dict:
    """Add synthetic chunks until the collection holds ``target``; see the module docstring."""
    chunks = store._pair(coll)[0]
    real = np.asarray(chunks.get(include=["embeddings"])["embeddings"], dtype=np.float32)
    need, rng = target - len(real), np.random.default_rng(seed)
    doc_id, version = "synthetic-padding", f"synthetic-{seed}-{target}"
    store.begin(coll, [(doc_id, "synthetic/padding", version)])  # invisible until commit
    bar, t0, step = _bar(progress, need, "synthetic padding", "vec"), time.perf_counter(), 5000
    for start in range(0, need, step):
        m = min(step, need - start)
        vecs = real[rng.integers(0, len(real), m)]
        vecs = vecs + rng.normal(0.0, NOISE / np.sqrt(real.shape[1]), vecs.shape)
        vecs = (vecs / np.linalg.norm(vecs, axis=1, keepdims=True)).astype(np.float32)
        metas = [{"doc_id": doc_id, "source": f"synthetic/{i:07d}", "index": i, "start": 0,
                  "end": 0, "content_hash": "", "version": version, "synthetic": True}
                 for i in range(start, start + m)]
        chunks.add(ids=[f"synthetic:{i:07d}" for i in range(start, start + m)], embeddings=vecs,
                   metadatas=metas, documents=["(synthetic padding vector, no text)"] * m)
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
    return {"platform": platform.platform(), "python": platform.python_version(),
            "cpu": _cpu(), "cpu_count": os.cpu_count(),
            "cpus_usable": len(os.sched_getaffinity(0)),
            "onnxruntime": version("onnxruntime"), "chromadb": version("chromadb"),
            "sqlite": sqlite3.sqlite_version, "loadavg": [round(x, 2) for x in os.getloadavg()]}


def _cpu() -> str:
    """``model name (family F, model M)`` from /proc/cpuinfo: a VM's name alone is vague."""
    try:
        info = dict(line.split(":", 1) for line in open("/proc/cpuinfo").read().split("\n\n")[0]
                    .splitlines() if ":" in line)
    except OSError:
        return platform.processor()
    info = {k.strip(): v.strip() for k, v in info.items()}
    return (f"{info.get('model name', platform.processor())} "
            f"(family {info.get('cpu family', '?')}, model {info.get('model', '?')})")


def _compare(per: dict) -> dict:
    a, b = per.get("onnx-int8"), per.get("onnx-fp32")
    if not (a and b):
        return {}
    ratio = lambda g, k: round(a[g][k] / b[g][k], 2)  # noqa: E731
    points = lambda k: round(100 * (a["quality"][k] - b["quality"][k]), 2)  # noqa: E731
    return {"encode_speedup_int8_vs_fp32": ratio("encode", "passages_per_s"),
            "ingest_speedup_int8_vs_fp32": ratio("ingest", "chunks_per_s"),
            "recall@10_diff_points": points("recall@10"), "mrr@50_diff_points": points("mrr@50")}


def _targets(r: dict) -> list[dict]:
    cmp_, ing, sc = r["comparison"], next(iter(r["backends"].values()))["ingest"], r["scale"]
    speed, diff = cmp_.get("encode_speedup_int8_vs_fp32"), cmp_.get("recall@10_diff_points")
    per_10k = round(10_000 / ing["chunks_per_s"], 1) if ing["chunks_per_s"] else None
    p50 = sc["latency"]["p50_ms"] if sc and sc["chunks"] >= 100_000 else None
    rows = [("int8 encode throughput >= 2x fp32", speed, lambda v: v >= 2.0,
             "best of 3 rounds each"),
            ("recall@10 int8 within 1 point of fp32", diff, lambda v: abs(v) <= 1.0, "points"),
            ("10k chunks ingested <= 120 s", per_10k, lambda v: v <= 120,
             f"{ing['chunks']} chunks took {ing['seconds']} s; scaled to 10,000"),
            ("top-50 query p50 <= 20 ms at 100k chunks", p50, lambda v: v <= 20,
             "not measured: run with --scale 100000" if p50 is None
             else "encode + search; synthetic padding")]
    return [{"target": name, "value": v, "passed": None if v is None else bool(ok(v)),
             "note": note} for name, v, ok, note in rows]


def fmt(v) -> str:
    return "–" if v is None else f"{v:.3f}" if isinstance(v, float) and abs(v) <= 1 else str(v)


def to_markdown(r: dict) -> str:
    bs, m, c = list(r["backends"]), r["machine"], r["corpus"]
    rows = [("ingest chunks/s", "ingest", "chunks_per_s"), ("ingest seconds", "ingest", "seconds"),
            ("encode passages/s", "encode", "passages_per_s"),
            *[(f"recall@{k}", "quality", f"recall@{k}") for k in KS],
            ("MRR@50", "quality", "mrr@50"), ("p50 ms (encode+search)", "latency", "p50_ms"),
            ("p95 ms (encode+search)", "latency", "p95_ms"),
            ("p50 ms (search only)", "latency", "search_p50_ms"),
            ("p95 ms (search only)", "latency", "search_p95_ms")]
    lines = [f"# Retrieval benchmark: {r['dataset']}", "",
             f"{r['n']} questions; corpus {c['passages']} passages "
             f"({'capped from ' + str(c['dataset_passages']) if c['capped'] else 'all'}), "
             f"{c['chunks']} chunks; embedder `{r['embedder']['model'].split('#')[0]}`.",
             f"Machine: {m['platform']}, {m.get('cpu', '?')}, {m['cpus_usable']} CPUs, "
             f"onnxruntime {m['onnxruntime']}, chromadb {m['chromadb']}, sqlite "
             f"{m.get('sqlite', '?')}, load {m['loadavg']} -> {m['loadavg_end']}.",
             f"Command: `{r['command']}`", "",
             "| metric | " + " | ".join(bs) + " |", "|---|" + "---|" * len(bs),
             *[f"| {label} | " + " | ".join(fmt(r["backends"][b][g].get(k)) for b in bs) + " |"
               for label, g, k in rows],
             "", f"fp32 corpus: {r['fp32_corpus']}. Comparison: "
             + ", ".join(f"{k} = {v}" for k, v in r["comparison"].items()), ""]
    if r.get("hybrid"):
        h, ms = r["hybrid"], ("dense", "hybrid")
        qrows = [*[(f"recall@{k}", "quality", f"recall@{k}") for k in KS],
                 ("MRR@50", "quality", "mrr@50"), *rows[-4:]]
        lines += [f"## Dense vs hybrid ({h['backend']}; BM25 over SQLite FTS5, reciprocal "
                  "rank fusion of the two top-50 lists)", "",
                  "| metric | dense | hybrid | hybrid - dense |", "|---|---|---|---|",
                  *[f"| {label} | " + " | ".join(fmt(h[m][g].get(k)) for m in ms) + " | "
                    + (f"{h['diff_points'][k]:+.2f} points" if k in h["diff_points"] else
                       f"{h['hybrid'][g][k] - h['dense'][g][k]:+.2f} ms") + " |"
                    for label, g, k in qrows], ""]
    if r["scale"]:
        s, lat = r["scale"], r["scale"]["latency"]
        lines += [f"## Latency at {s['chunks']} chunks ({s['backend']})", "",
                  f"**{s['synthetic_chunks']} of the {s['chunks']} chunks are SYNTHETIC**: "
                  f"{s['note']}. Padding took {s['padding_seconds']} s.", "",
                  "| top-50, single query | p50 ms | p95 ms |", "|---|---|---|",
                  f"| encode + search | {lat['p50_ms']} | {lat['p95_ms']} |",
                  f"| search only | {lat['search_p50_ms']} | {lat['search_p95_ms']} |", ""]
    verdict = {True: "PASS", False: "FAIL", None: "not measured"}
    lines += ["## Targets", "", "| target | value | result | note |", "|---|---|---|---|",
              *[f"| {t['target']} | {fmt(t['value'])} | {verdict[t['passed']]} | {t['note']} |"
                for t in r["targets"]]]
    return "\n".join(lines) + "\n"
