"""How big must the prompts be? Prompt tokens against gold-answer recall, no generation.

``run(settings, dataset, n)`` ingests the dataset's corpus (as ``bench e2e`` does, into
``OUT/data``), and for each question retrieves the broad set and reranks it exactly as
the engine does, then builds the draft prompt (top ``draft_k`` chunks, each cut to
``draft_words`` of its words most about the question, ``prompts.cut_for``) and the heavy
prompt (top ``heavy_k`` reranked chunks cut to ``heavy_words``) for every setting in
``DRAFT_GRID`` / ``HEAVY_GRID``. Per setting it reports the median prompt size (tokens
of the draft model's tokenizer when it can be loaded, else ``costs.estimate_tokens``)
and *gold in prompt*: the share of questions whose gold answer is still in the prompt.

Why this and not only an e2e run: a local model's time to first token is its prefill,
about linear in prompt tokens (``prefill_tok_s`` measured by ``bench llm``), and a
model cannot answer from a sentence the cut removed; this ranks the settings in
minutes, and the few worth it are then checked end to end (``bench e2e``).

Deliberately not here: model generation and timing (``e2e``, ``llm_speed``).
"""

from __future__ import annotations

import statistics
from pathlib import Path

from specrag.bench import metrics
from specrag.pipeline.prompts import build_messages, cut_for
from specrag.settings import Settings

DRAFT_GRID = ((3, 0), (3, 80), (3, 60), (3, 45), (3, 30), (2, 60), (2, 0))  # (draft_k, words)
HEAVY_GRID = ((8, 0), (8, 90), (8, 60), (5, 90), (5, 60), (5, 0), (3, 0))  # (heavy_k, words)


def _counter(settings: Settings):
    """Tokens as the draft model counts them (its GGUF vocabulary), else an estimate."""
    try:
        from llama_cpp import Llama

        from specrag.sources import resolve

        path = resolve("draft", settings)
        llm = Llama(str(path), vocab_only=True, verbose=False)
        return lambda msgs: sum(len(llm.tokenize(m["content"].encode(), add_bos=False))
                                for m in msgs), "draft model tokens"
    except Exception:  # noqa: BLE001 - no llama.cpp or model: the estimate still ranks
        from specrag.pipeline.costs import estimate_tokens

        return estimate_tokens, "estimated tokens"


def measure(questions, hits_of, reranked_of, count) -> dict:
    """``hits_of(q)``: bi-encoder hits; ``reranked_of(q, hits)``: the heavy tier's order."""
    out = {"draft": {}, "heavy": {}}
    rows = []
    for q in questions:
        hits = hits_of(q.question)
        rows.append((q, hits, reranked_of(q.question, hits)))
    for tier, grid in (("draft", DRAFT_GRID), ("heavy", HEAVY_GRID)):
        for k, words in grid:
            sizes, inside = [], []
            for q, hits, reranked in rows:
                order = hits if tier == "draft" else reranked
                chunks = cut_for(q.question, [h.chunk for h in order[:k]], words)
                msgs = build_messages(q.question, chunks, tier)
                sizes.append(count(msgs))
                inside.append(metrics.containment(" ".join(c.text for c in chunks), q.answers))
            out[tier][f"k={k} words={words or 'whole'}"] = {
                "k": k, "words": words, "tokens_p50": statistics.median(sizes),
                "gold_in_prompt": sum(inside) / len(inside)}
    return out


def run(settings: Settings, dataset: str = "squad", n: int = 100, out_dir: str | None = None,
        seed: int = 0) -> dict:
    from specrag.bench.e2e import _ingest, load_questions
    from specrag.grounding.crossencoder import CrossEncoder
    from specrag.ingest.ingestor import Ingestor
    from specrag.retrieval.retriever import Retriever

    out = Path(out_dir or settings.data_path / "bench" / "prompts")
    s = settings.with_values(data_dir=str(out / "data"), cache_dir=str(settings.cache_path))
    questions, files = load_questions(settings, dataset, n, seed, None)
    ingestor = Ingestor(s)
    _ingest(ingestor, files, "bench-e2e", progress=False)
    retriever = Retriever(s, embedder=ingestor.embedder, store=ingestor.store)
    reranker = CrossEncoder.from_settings(s, "reranker").warm_up()

    def reranked_of(question, hits):
        ranked = reranker.rank(question, [h.chunk.text for h in hits], len(hits))
        return [hits[r["corpus_id"]] for r in ranked]

    count, unit = _counter(s)
    result = measure(questions, lambda q: retriever.retrieve(q, top_k=s.retrieval.top_k,
                                                             collection="bench-e2e").hits,
                     reranked_of, count)
    return {"dataset": dataset, "n": len(questions), "unit": unit, **result}


def to_markdown(r: dict) -> str:
    lines = [f"# Prompt size vs gold answer in the prompt ({r['dataset']}, {r['n']} questions, "
             f"{r['unit']})", ""]
    for tier in ("draft", "heavy"):
        lines += [f"| {tier} prompt | tokens p50 | gold in prompt |", "|---|---|---|"]
        for name, x in r[tier].items():
            lines.append(f"| {name} | {x['tokens_p50']:.0f} | {100 * x['gold_in_prompt']:.1f}% |")
        lines.append("")
    return "\n".join(lines)
