"""Re-verify a finished end-to-end run's drafts with the current verifier, no generation.

``run(run_dir, settings)`` reads ``rows.jsonl`` of a ``specrag bench e2e`` run, and for
each ``draft-only`` row retrieves the question's top ``verify_k`` chunks again from
the run's own store (``RUN_DIR/data``, same collection, same embedder: the same chunks
the engine verified against) and verifies the stored draft with today's verifier.
The rows keep everything else (answers, timings, heavy tokens), so ``e2e_report``'s
threshold sweep and a replayed ``lazy`` policy (draft when accepted, else the
heavy-only answer of the same run; latency = draft path + verify + heavy path) show
what a new verifier or threshold would have done with exactly the same generations.
Writes ``reverify.json`` and ``reverify.md`` to ``out`` (default: the run folder).

A replay, labelled as one: the draft and heavy latencies are the recorded ones, only
verification is measured now. Deliberately not here: generation (``e2e``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from specrag.bench import e2e_report
from specrag.bench.metrics import percentile
from specrag.pipeline.build import build_verifier
from specrag.retrieval.retriever import Retriever
from specrag.settings import Settings
from specrag.types import SpecragError

COLLECTION = "bench-e2e"  # what ``e2e.run`` ingests into


def run(run_dir: str | Path, settings: Settings, out: str | Path | None = None,
        progress: bool = False, verifier=None, embedder=None) -> dict:
    """``verifier``/``embedder``: defaults are the configured (shipped) models."""
    from tqdm import tqdm


    run_dir = Path(run_dir)
    rows = [json.loads(x) for x in (run_dir / "rows.jsonl").read_text().splitlines() if x.strip()]
    old = json.loads((run_dir / "e2e.json").read_text())["meta"] if (run_dir / "e2e.json").exists() else {}
    s = settings.with_values(data_dir=str(run_dir / "data"), cache_dir=str(settings.cache_path))
    retriever = Retriever(s, embedder=embedder)  # loaded only for rows without their chunks
    verifier = (verifier or build_verifier(s)).warm_up()  # as served
    drafts = [r for r in rows if r["policy"] == "draft-only" and r.get("draft")]
    if not drafts or not any(r["policy"] == "heavy-only" for r in rows):
        raise SpecragError(f"{run_dir} has no draft-only and heavy-only rows to replay lazy from: "
                           "run bench e2e with --policies including draft-only,heavy-only")
    verify_ms = []
    for r in tqdm(drafts, desc="reverify", unit="draft", disable=not progress):
        chunks = r.get("verify_chunks") or [
            h.chunk.text for h in retriever.retrieve(r["question"], top_k=s.retrieval.verify_k,
                                                     collection=COLLECTION).hits]
        t = time.perf_counter()
        verdict = verifier.verify(r["draft"], chunks, r["question"])
        verify_ms.append((time.perf_counter() - t) * 1000)
        r["verdict_score"], r["abstained"] = verdict.score, verdict.abstained
        r["grounded"], r["relevance"] = verdict.grounded, verdict.relevance
        r["accepted"] = verdict.accepted and not verdict.abstained
        r["timings_ms"] = {**r["timings_ms"], "verify": verify_ms[-1]}
    by: dict[str, list[dict]] = {}
    for r in rows:
        by.setdefault(r["policy"], []).append(r)
    result = {"run": str(run_dir), "threshold": verifier.threshold, "old_threshold": old.get("threshold"),
              "drafts": len(drafts), "verify_p50_ms": percentile(verify_ms, 50),
              "verify_p95_ms": percentile(verify_ms, 95),
              "answer_threshold": verifier.answer_threshold if verifier.acceptance_model else None,
              "replayed_lazy": _replay(by, None), "sweep": e2e_report.sweep(by)}
    out = Path(out or run_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "reverify.json").write_text(json.dumps(result, indent=1))
    (out / "reverify.md").write_text(to_markdown(result))
    return result


def _replay(by: dict[str, list[dict]], threshold: float | None) -> dict:
    """Lazy at ``threshold`` (None: the verifier's own decision, every gate) from the
    draft-only and heavy-only rows, against heavy-only."""
    point = e2e_report.lazy_at(by, threshold)
    heavy = [r for r in by.get("heavy-only", []) if r.get("scores")]
    h_acc = sum(r["scores"][e2e_report.CORRECT] for r in heavy) / max(1, len(heavy))
    h_p50 = percentile([r["timings_ms"].get("total") for r in heavy], 50)
    h_tok = sum(r["heavy_tokens_in"] + r["heavy_tokens_out"] for r in heavy)
    return {**point, "heavy_only_accuracy": h_acc, "heavy_only_p50_ms": h_p50,
            "heavy_only_tokens": h_tok,
            "p50_vs_heavy_only": point["total_p50_ms"] / h_p50 if h_p50 else None,
            "tokens_vs_heavy_only": point["heavy_tokens"] / h_tok if h_tok else None}


def to_markdown(r: dict) -> str:
    f = e2e_report._fmt
    lz = r["replayed_lazy"]
    lines = [f"# Re-verified drafts of `{r['run']}` (replay: recorded generations, verification "
             "measured now)", "",
             f"{r['drafts']} drafts; verification p50 {r['verify_p50_ms']:.1f} ms, p95 "
             f"{r['verify_p95_ms']:.1f} ms. Threshold {r['threshold']} (the run used "
             f"{r['old_threshold']})" + (f", answer threshold {r['answer_threshold']}"
                                         if r.get("answer_threshold") is not None else "")
             + ". The sweep below varies one threshold on the verdict score.", ""]
    if lz:
        lines += ["| replayed lazy vs heavy-only | value |", "|---|---|",
                  f"| accuracy (contains gold) | {f(lz['accuracy'], True)} vs "
                  f"{f(lz['heavy_only_accuracy'], True)} |",
                  f"| acceptance | {f(lz['acceptance_rate'], True)} |",
                  f"| accepted-draft precision | {f(lz['accepted_precision'], True)} |",
                  f"| final answer p50 | {f(lz['total_p50_ms'])} ms = "
                  f"{f(lz['p50_vs_heavy_only'])}x heavy-only |",
                  f"| heavy tokens | {lz['heavy_tokens']:,} = {f(lz['tokens_vs_heavy_only'])}x |", ""]
    lines += ["| threshold | accuracy | acceptance | accepted precision | p50 ms | heavy tokens |",
              "|---|---|---|---|---|---|"]
    for s in r["sweep"][::2]:
        lines.append(f"| {s['threshold']:.2f} | {f(s['accuracy'], True)} | "
                     f"{f(s['acceptance_rate'], True)} | {f(s['accepted_precision'], True)} | "
                     f"{f(s['total_p50_ms'])} | {s['heavy_tokens']:,} |")
    return "\n".join(lines) + "\n"
