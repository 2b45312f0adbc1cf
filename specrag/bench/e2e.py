"""End-to-end benchmark: the same questions and corpus through every policy, one run.

``run(settings, dataset="halueval-qa", n=100, policies=(...), out_dir=...)``:

1. loads the dataset (``halueval-qa``, ``squad``, or ``my.jsonl`` + ``corpus`` DIR:
   one JSON object per line with ``question``, optional ``answer`` (a string or a list
   of aliases) and optional ``gold_source`` (a file name in DIR));
2. ingests the corpus once into ``OUT/data`` (re-ingest is a no-op: unchanged files);
3. answers every question with every policy, appending one JSON row per (question,
   policy) to ``OUT/rows.jsonl`` as it goes: a killed run resumes where it stopped.
   A row records the route (``routed``) and the router's inputs for the question
   (``route_features``), so ``specrag train router`` learns from rows alone;
4. scores each answer (EM, F1, containment; faithfulness = the verifier over the final
   answer and the chunks it was written from) and writes ``e2e.json``, ``e2e.md`` and
   ``e2e.html`` through ``e2e_report``.

Deliberately not here: aggregation and rendering (``e2e_report``).
"""

from __future__ import annotations

import asyncio
import json
import random
import shlex
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from tqdm import tqdm

from specrag.bench import e2e_report, metrics
from specrag.datasets import load_dataset, passage_file_name
from specrag.ingest.ingestor import Ingestor
from specrag.pipeline.build import build_engine
from specrag.retrieval.retriever import Retriever
from specrag.routing.features import route_features
from specrag.settings import Settings

POLICIES = ("heavy-only", "draft-only", "lazy", "eager", "routed")


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    answers: tuple[str, ...]
    gold_source: str = ""


def load_questions(settings: Settings, dataset: str, n: int | None, seed: int,
                   corpus: str | None) -> tuple[list[Question], list[tuple[str, bytes]] | str]:
    """Questions plus the corpus: in-memory files for public sets, a folder for yours."""
    if dataset.endswith(".jsonl"):
        if not corpus:
            raise ValueError("--dataset FILE.jsonl needs --corpus DIR with the documents")
        qs = []
        for i, line in enumerate(Path(dataset).read_text(encoding="utf-8").splitlines()):
            if not line.strip():
                continue
            row = json.loads(line)
            ans = row.get("answer") or []
            qs.append(Question(str(row.get("id", i)), row["question"],
                               tuple([ans] if isinstance(ans, str) else ans),
                               row.get("gold_source", "")))
        rng = random.Random(seed)
        qs = sorted(rng.sample(qs, n), key=lambda q: qs.index(q)) if n and n < len(qs) else qs
        return qs, corpus

    ds = load_dataset(dataset, settings, n=n, seed=seed)
    files = [(passage_file_name(p.id), p.document().encode()) for p in ds.passages]
    qs = [Question(it.id, it.question, tuple(it.answers), passage_file_name(it.gold_passage_id))
          for it in ds.items]
    return qs, files


def run(settings: Settings, dataset: str = "halueval-qa", n: int = 100,
        policies: tuple[str, ...] = POLICIES, out_dir: str | None = None, seed: int = 0,
        corpus: str | None = None, heavy: str = "local", make_engine=None,
        progress: bool = True, max_passages: int | None = None,
        prompt_cache: bool = False) -> dict:
    """``make_engine(settings, retriever)`` builds the engine (default: ``pipeline.build``).
    ``prompt_cache``: keep the served prompt-prefix cache; one policy only, since a second
    one would reuse the prompt the first just ran for the same question."""
    bad = [p for p in policies if p not in POLICIES]
    if bad:
        raise ValueError(f"unknown policies {bad}; choose from {', '.join(POLICIES)}")
    if prompt_cache and len(policies) != 1:
        raise ValueError("--prompt-cache measures one policy at a time (a second policy would "
                         "reuse the prompt the first just ran); pass one policy")
    out = Path(out_dir or settings.data_path / "bench" / "e2e")
    out.mkdir(parents=True, exist_ok=True)
    # no prompt-prefix cache unless asked: a policy must not reuse the prompt another
    # policy just ran (with one policy the cache holds the previous question's, as served)
    s = settings.with_values(data_dir=str(out / "data"), cache_dir=str(settings.cache_path),
                             **{"generation.prompt_cache": bool(prompt_cache)})
    if heavy == "anthropic":
        s = s.with_values(**{"generation.heavy": "anthropic:claude-sonnet-4-6"})
    elif heavy != "local":
        s = s.with_values(**{"generation.heavy": heavy})
    questions, corpus_files = load_questions(settings, dataset, n, seed, corpus)
    collection = "bench-e2e"
    t0 = time.perf_counter()
    ingestor = Ingestor(s)
    if isinstance(corpus_files, str):
        report = ingestor.ingest([corpus_files], collection)
    else:
        if max_passages and len(corpus_files) > max_passages:
            gold = {q.gold_source for q in questions}
            keep = [f for f in corpus_files if f[0] in gold]
            rest = [f for f in corpus_files if f[0] not in gold]
            random.Random(seed).shuffle(rest)
            corpus_files = keep + rest[:max_passages - len(keep)]
        report = _ingest(ingestor, corpus_files, collection, progress)
    ingest_s = time.perf_counter() - t0
    # the engine shares the ingestor's loaded encoder and store
    retriever = Retriever(s, embedder=ingestor.embedder, store=ingestor.store)
    # what is measured is what is served: the app's engine (the audit off, so its
    # background scoring does not share the two cores with the timed answers)
    engine = (make_engine or (lambda st, r: build_engine(st, retriever=r, audit=False)))(s, retriever)
    rows_path = out / "rows.jsonl"
    done = done_pairs(rows_path)
    todo = [(q, p) for q in questions for p in policies if (q.id, p) not in done]
    bar = tqdm(total=len(questions) * len(policies), initial=len(questions) * len(policies)
               - len(todo), desc="e2e", unit="answer", disable=not progress)
    with open(rows_path, "a", encoding="utf-8") as fh:
        for q, policy in todo:
            row = asyncio.run(answer_row(engine, q, policy, collection))
            fh.write(json.dumps(row) + "\n")
            fh.flush()  # a kill loses at most the answer in flight
            bar.update(1)
    bar.close()
    rows = [r for r in read_rows(rows_path) if r["id"] in {q.id for q in questions}]
    meta = {"dataset": dataset, "n": len(questions), "policies": list(policies), "seed": seed,
            "prompt_cache": bool(prompt_cache), "heavy": s.generation.heavy,
            "draft": s.generation.draft, "threshold": s.verify.threshold,
            # the prompt sizes, so a run made with SPECRAG_RETRIEVAL__* set says so
            "retrieval": asdict(s.retrieval), "corpus_files": len(report.results),
            "corpus_chunks": report.chunks_added, "ingest_seconds": round(ingest_s, 1),
            "command": "specrag " + " ".join(shlex.quote(a) for a in sys.argv[1:])}
    result = e2e_report.summarize(rows, meta)
    e2e_report.write(result, out)
    return result


def _ingest(ingestor, files, collection: str, progress: bool):
    bar = tqdm(total=len(files), desc="ingest", unit="doc", disable=not progress)
    report = ingestor.ingest_bytes(files, collection, on_progress=lambda *_: bar.update(1))
    bar.close()
    return report


async def answer_row(engine, q: Question, policy: str, collection: str) -> dict:
    ans = await engine.aask(q.question, policy=policy, collection=collection)
    context = ans.heavy.chunks if ans.heavy else (ans.draft.chunks if ans.draft else ())
    faithful = None
    # the shown answer's own grounding: the engine's heavy verdict, else verified here
    # against the chunks its prompt held (grounding alone, no question)
    verdict = ans.heavy_verdict if ans.tier == "heavy" else None
    if verdict is None and context and ans.text:
        verdict = await asyncio.to_thread(engine.verifier.verify, ans.text, list(context))
    if verdict is not None and not verdict.abstained:
        faithful = verdict.grounding
    heavy_usage = ans.heavy.usage if ans.heavy and ans.heavy.usage else None
    cancelled = [u for u in ans.usage if u.cancelled]
    return {
        "id": q.id, "policy": policy, "question": q.question, "answers": list(q.answers),
        "prediction": ans.text, "tier": ans.tier,
        "draft": ans.draft.text if ans.draft else None,
        # the draft model's log-probability of each token it chose (empty when unknown)
        "draft_logprobs": list(ans.draft.usage.logprobs) if ans.draft and ans.draft.usage else [],
        "verdict_score": ans.verdict.score if ans.verdict else None,
        "grounded": ans.verdict.grounded if ans.verdict else None,
        "relevance": ans.verdict.relevance if ans.verdict else None,
        "supported": ans.supported,
        "heavy_grounded": ans.heavy_verdict.grounded if ans.heavy_verdict else None,
        # what the draft was verified against, so a replay needs no store
        "verify_chunks": [c.text for c in ans.verify_chunks] if ans.draft else None,
        "accepted": bool(ans.verdict and ans.verdict.accepted and ans.tier == "draft"),
        "abstained": bool(ans.verdict and ans.verdict.abstained),
        "gold_source": q.gold_source,
        "gold_retrieved": bool(q.gold_source) and any(h.chunk.source == q.gold_source
                                                      for h in ans.hits),
        "scores": metrics.score(ans.text, q.answers) if q.answers else None,
        "draft_scores": metrics.score(ans.draft.text, q.answers) if ans.draft and q.answers
        else None,
        "faithfulness": faithful,
        "timings_ms": ans.timings_ms,
        "heavy_tokens_in": (heavy_usage.input_tokens if heavy_usage else 0)
        + sum(u.input_tokens for u in cancelled),
        "heavy_tokens_out": (heavy_usage.output_tokens if heavy_usage else 0)
        + sum(u.output_tokens for u in cancelled),
        "cost_usd": ans.cost_usd, "heavy_only_cost_usd": ans.heavy_only_cost_usd,
        "heavy_cancelled": ans.heavy_cancelled,
        "route": ans.route.route if ans.route else None,
        "p_draft": ans.route.p_draft if ans.route else None,
        # the router's inputs, so `specrag train router` learns from these rows alone
        "route_features": route_features(q.question, ans.hits, engine.settings.retrieval.draft_k),
    }


def read_rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut by a kill: that answer is redone
            continue
    return rows


def done_pairs(path: Path) -> set[tuple[str, str]]:
    """Finished (question, policy) pairs; a line cut by a kill is dropped from the file."""
    rows = read_rows(path)
    if path.exists() and len(rows) != len(path.read_text(encoding="utf-8").splitlines()):
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        tmp.replace(path)
    return {(r["id"], r["policy"]) for r in rows}
