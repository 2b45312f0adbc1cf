"""Reranker benchmark: does reranking the bi-encoder's candidates put the gold passage higher?

``run(settings)`` takes held-out ``test`` questions of HaluEval-QA and SQuAD (split by
gold passage, never trained on), the bi-encoder's top-20 passages from the dataset's
full corpus (``training.rerank_data``), and reports recall@1/3 and nDCG@10 (one
relevant passage) for the bi-encoder's own order and for the reranked order, per
dataset. A gold passage outside the 20 candidates is a miss for both orders. Also
the latency of reranking 20 candidates (p50/p95) and throughput, int8 vs fp32.

Deliberately not here: the retrieval benchmark (``bench.retrieval``) and training.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np

from specrag.datasets.rerank import CANDIDATES, rerank_items
from specrag.datasets.training_sources import work_dir
from specrag.grounding.crossencoder import CrossEncoder
from specrag.retrieval.fusion import fuse_orders
from specrag.settings import Settings


def _order_metrics(ranks: list[int | None]) -> dict:
    """ranks: 0-based position of the gold passage, None when absent."""
    n = max(1, len(ranks))
    return {"recall@1": sum(r is not None and r < 1 for r in ranks) / n,
            "recall@3": sum(r is not None and r < 3 for r in ranks) / n,
            "ndcg@10": sum(1 / math.log2(r + 2) for r in ranks if r is not None and r < 10) / n}


def _latency(ce, items, runs: int) -> dict:
    ce.rank(items[0].question, list(items[0].candidates))
    times = []
    for it in (items * (runs // max(1, len(items)) + 1))[:runs]:
        t = time.perf_counter()
        ce.rank(it.question, list(it.candidates))
        times.append((time.perf_counter() - t) * 1000)
    pairs = [(it.question, c) for it in items[:13] for c in it.candidates][:256]
    t = time.perf_counter()
    ce.predict(pairs)
    return {"p50_ms": float(np.percentile(times, 50)), "p95_ms": float(np.percentile(times, 95)),
            "pairs_per_s": len(pairs) / (time.perf_counter() - t)}


def run(settings: Settings, model_dir: Path | None = None, fp32_path: Path | None = None,
        quick: bool = False, n_per_dataset: int | None = None, seed: int = 0,
        progress: bool = False, out_dir: Path | None = None) -> dict:
    from tqdm import tqdm


    n = n_per_dataset or (150 if quick else 400)
    ce = CrossEncoder(settings, "reranker", model=str(model_dir) if model_dir else None).warm_up()
    items = rerank_items(settings, "test", n, seed)
    result: dict = {"model": str(ce.model_dir), "candidates": CANDIDATES, "per_dataset": {}}
    by_ds: dict[str, dict[str, list]] = {}
    for it in tqdm(items, desc="rerank", unit="q", disable=not progress, mininterval=5):
        cands = list(it.candidates)
        bi = cands.index(it.gold) if it.gold in cands else None
        ranked = ce.rank(it.question, cands)
        order = [r["corpus_id"] for r in ranked]
        fused = fuse_orders(order, len(cands))
        d = by_ds.setdefault(it.dataset, {"bi": [], "re": [], "fused": []})
        d["bi"].append(bi)
        d["re"].append(order.index(bi) if bi is not None else None)
        d["fused"].append(fused.index(bi) if bi is not None else None)
    keys = ("bi", "re", "fused")
    for name, d in list(by_ds.items()) + [("all", {k: sum((v[k] for v in by_ds.values()), [])
                                                   for k in keys})]:
        result["per_dataset"][name] = {"n": len(d["bi"]), "bi_encoder": _order_metrics(d["bi"]),
                                       "reranked": _order_metrics(d["re"]),
                                       "fused": _order_metrics(d["fused"])}
    runs = 20 if quick else 50
    result["latency"] = {"int8": _latency(ce, items, runs)}
    fp32_path = fp32_path or work_dir(settings, "reranker", model_dir) / "model-fp32.onnx"
    if Path(fp32_path).exists():
        fp32 = CrossEncoder(settings, "reranker", model=str(ce.model_dir), backend="onnx-fp32",
                            onnx_path=str(fp32_path)).warm_up()
        result["latency"]["fp32"] = _latency(fp32, items, runs)
    if out_dir:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        (Path(out_dir) / "reranker.json").write_text(json.dumps(result, indent=2))
        (Path(out_dir) / "reranker.md").write_text(to_markdown(result))
    return result


def to_markdown(r: dict) -> str:
    lines = [f"Held-out `test` questions; candidates = the bi-encoder's top {r['candidates']} "
             "from the dataset's full corpus (int8 all-MiniLM-L6-v2).", "",
             "| dataset | n | order | recall@1 | recall@3 | nDCG@10 |", "|---|---|---|---|---|---|"]
    for name, m in r["per_dataset"].items():
        for key, label in (("bi_encoder", "bi-encoder"), ("reranked", "reranked"),
                           ("fused", "fused (RRF)")):
            if key not in m:
                continue
            x = m[key]
            lines.append(f"| {name} | {m['n']} | {label} | {x['recall@1']:.3f} | "
                         f"{x['recall@3']:.3f} | {x['ndcg@10']:.3f} |")
    lines += ["", f"Latency of reranking {r['candidates']} candidates for one query:", "",
              "| backend | p50 ms | p95 ms | pairs/s |", "|---|---|---|---|"]
    for b in ("int8", "fp32"):
        if b in r["latency"]:
            x = r["latency"][b]
            lines.append(f"| {b} | {x['p50_ms']:.1f} | {x['p95_ms']:.1f} | {x['pairs_per_s']:.0f} |")
    return "\n".join(lines) + "\n"
