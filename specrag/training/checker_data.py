"""Labelled drafts of the served draft model, the answer checker's training data.

``specrag train checker-data --out DIR --n 12000`` runs ``run``:

1. the questions (``checker_plan.plan`` over ``checker_sources``, the benchmark's items
   and passages left out via ``draft_data.bench_items``), kept in ``WORK/plan-*.json.gz``
   so a restart does not redo them;
2. one collection per dataset in ``WORK`` (the passages less the benchmark's, ingested
   as the e2e benchmark ingests them; done once, marked by ``WORK/ingested-<dataset>``);
3. per question, the served engine under ``draft-only`` (``pipeline.build.build_engine``:
   the same retrieval, reranker pick, prompt, draft model and verifier as serving and
   ``bench e2e``), its retrieval steered by ``Steered`` for counterfactual and
   unanswerable questions; one row per question (``row``) appended to ``Parts(DIR)``,
   which resumes and rolls over at ``--part-size`` rows.

A row holds the question, its gold, the draft, the label (``checker_label``), the
verdict as served (grounded, relevance, P(right), per sentence), the draft's chunks
with their text, the verified chunks' ids, the draft's token log-probabilities, the
draft model and a hash of the settings that shape a draft (``settings_hash``).
``threads`` sets the draft's llama.cpp threads; the embedder, reranker and verifier run
on one ONNX thread each, so a long run at low priority leaves the cores to others.
The heavy model is never loaded (``NoHeavy``). Deliberately not here: training the
checker, and any change to what serving does.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import re
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path

from specrag import sources
from specrag.bench import metrics
from specrag.bench.e2e import _ingest
from specrag.generators.base import GenerationError, is_local_backend
from specrag.grounding.crossencoder import CrossEncoder
from specrag.ingest.ingestor import Ingestor
from specrag.pipeline.build import build_engine, build_verifier
from specrag.retrieval.embedder import Embedder
from specrag.retrieval.retriever import Retriever
from specrag.settings import Settings
from specrag.training.answer_kinds import for_items
from specrag.training.checker_label import has_span, label
from specrag.training.checker_parts import Parts
from specrag.training.checker_plan import Planned, collection, corpus, plan
from specrag.training.checker_sources import NAMES, load_all
from specrag.training.draft_data import bench_items
from specrag.training.swaps import swap, whole
from specrag.types import SpecragError

# settings that change a draft or its verdict (paths, threads and caches do not)
HASHED = ("profile", "models", "embedder", "chunking", "retrieval", "verify")
OPERATIONAL = ("threads", "prompt_cache", "warm_states")
MAX_FAILURES = 5  # in a row: the draft model is gone, stop instead of skipping everything
PLAN_VERSION = "v2"  # a new plan, not the kept one, when ``checker_plan`` draws otherwise


class NoHeavy:
    """The heavy tier of a draft-only run: never loaded, never called."""

    name, model, local = "llama-cpp", "not loaded", True

    def warm_up(self) -> "NoHeavy":
        return self

    async def stream(self, messages, *, max_tokens: int = 256, temperature: float = 0.0):
        raise GenerationError("the heavy tier is not loaded for checker data")
        yield  # an async generator, like every tier


class Steered:
    """The retriever, steered for the question in hand (``steer``): counterfactual, the
    swap made in every hit that holds the world's value; unanswerable, the question's
    passage and every hit holding a gold span left out (from ``extra`` times as many)."""

    def __init__(self, inner, top_k: int, extra: int = 3):
        self.inner, self.top_k, self.extra = inner, top_k, extra
        self.steer: Planned | None = None

    def warm_up(self):
        self.inner.warm_up()
        return self

    def search(self, query, top_k=None, collection=None, source=None):
        item, k = self.steer, top_k or self.top_k
        if item is None or item.kind not in ("counterfactual", "unanswerable"):
            return self.inner.search(query, k, collection, source)
        if item.kind == "counterfactual":
            ret = self.inner.search(query, k, collection, source)
            old, new = item.swap
            hits = [replace(h, chunk=replace(h.chunk, text=swap(h.chunk.text, old, new)))
                    if whole_in(old, h.chunk.text) else h for h in ret.hits]
        else:
            ret = self.inner.search(query, k * self.extra, collection, source)
            spans = [g for g in item.gold if g.lower() not in ("yes", "no")]
            hits = [h for h in ret.hits if h.chunk.source != item.source
                    and not any(has_span(h.chunk.text, g) for g in spans)][:k]
        return replace(ret, hits=tuple(replace(h, rank=i + 1) for i, h in enumerate(hits)))


def whole_in(value: str, text: str) -> bool:
    return re.search(whole(value), text) is not None


def settings_hash(settings: Settings) -> str:
    d = settings.to_dict()
    shaped = {k: d[k] for k in HASHED if k in d}
    shaped["generation"] = {k: v for k, v in d["generation"].items() if k not in OPERATIONAL}
    return hashlib.sha1(json.dumps(shaped, sort_keys=True, default=str).encode()).hexdigest()[:12]


def draft_model(settings: Settings) -> str:
    """The served draft: a local backend with its model file and adapter (``none`` when
    off), or the remote backend:model as set."""
    g = settings.generation.draft
    if not is_local_backend(g):
        return g
    name = sources.resolve("draft", settings).name
    adapter = sources.draft_adapter(settings)
    return f"{g}:{name}+{adapter.name if adapter else 'none'}"


def row(engine, steered: Steered, item: Planned, meta: dict) -> dict:
    """Ask ``item`` as served (draft-only) and label the draft."""
    steered.steer = item
    try:
        ans = asyncio.run(engine.aask(item.question, policy="draft-only",
                                      collection=collection(item.dataset)))
    finally:
        steered.steer = None
    draft = ans.draft.text if ans.draft else ""
    right, how = label(item.kind, draft, item.gold, item.question)
    v = ans.verdict
    chunks = ans.draft.chunks if ans.draft else ()
    verified = ans.verify_chunks
    texts = {c.id: c.text for c in chunks}
    sentences = []
    for s in (v.sentences if v else ()):
        best = verified[s.best_chunk] if s.best_chunk is not None else None
        if best is not None:
            texts.setdefault(best.id, best.text)
        sentences.append({"sentence": s.sentence, "score": round(float(s.score), 4),
                          "best_chunk": best.id if best else None, "abstention": s.abstention})
    usage = ans.draft.usage if ans.draft else None
    return {
        **item.to_dict(), "draft": draft, "right": right, "label_how": how,
        "scores": metrics.score(draft, item.gold),
        "verdict": None if v is None else {
            "grounded": _r(v.grounded), "relevance": _r(v.relevance), "p_right": _r(v.score),
            "accepted": v.accepted, "abstained": v.abstained, "supported": v.supported,
            "threshold": v.threshold, "answer_threshold": v.answer_threshold,
            "signals": {k: _r(x) for k, x in v.signals.items()}},
        "sentences": sentences,
        "draft_chunks": [{"id": c.id, "source": c.source} for c in chunks],
        "verify_chunks": [{"id": c.id, "source": c.source} for c in verified],
        "chunk_texts": texts,  # as the draft and verifier saw them (a swap made)
        "gold_in_draft": any(c.source == item.source for c in chunks),
        "gold_in_verify": any(c.source == item.source for c in verified),
        "draft_logprobs": [round(x, 3) for x in usage.logprobs] if usage else [],
        "timings_ms": {k: round(ans.timings_ms[k]) for k in ("draft", "verify", "total")
                       if k in ans.timings_ms},
        **meta}


def _r(x):
    return None if x is None else round(float(x), 4)


def questions(settings: Settings, work: Path, n: int, seed: int, embedder) -> list[Planned]:
    """The plan, made once per (n, seed) and kept in ``work``."""
    path = work / f"plan-{PLAN_VERSION}-n{n}-seed{seed}.json.gz"
    if path.is_file():
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            return [Planned.from_dict(d) for d in json.load(fh)]
    datasets = load_all(settings)
    ids, pids = bench_items(settings, embedder)
    out = plan(datasets, ids, pids, n, seed, kinds_of=lambda found: for_items(found, embedder))
    with gzip.open(path.with_suffix(".tmp"), "wt", encoding="utf-8") as fh:
        json.dump([p.to_dict() for p in out], fh)
    path.with_suffix(".tmp").replace(path)
    return out


def workspace(settings: Settings, work: Path, progress: bool, log=print):
    """(engine, steered retriever, embedder) over the collections in ``work``, each
    ingested once."""
    embedder = Embedder(settings, threads=1)
    ingestor = Ingestor(settings, embedder=embedder)
    todo = [name for name in NAMES if not (work / f"ingested-{name}").is_file()]
    if todo:
        _, pids = bench_items(settings, embedder.warm_up())
        for name, files in corpus(load_all(settings, tuple(todo)), pids).items():
            log(f"checker-data: ingesting {len(files)} {name} passages into {work}")
            _ingest(ingestor, files, collection(name), progress)
            (work / f"ingested-{name}").write_text(f"{len(files)} passages\n", encoding="utf-8")
    steered = Steered(Retriever(settings, embedder=embedder, store=ingestor.store),
                      settings.retrieval.top_k)
    base = build_engine(settings, retriever=steered, audit=False)
    engine = base.replace(heavy=NoHeavy(), reranker=CrossEncoder(settings, "reranker", threads=1),
                          verifier=build_verifier(settings, scorer=CrossEncoder(
                              settings, "verifier", threads=1)))
    return engine, steered, embedder


def run(settings: Settings, out: Path, work: Path, *, n: int = 12000, seed: int = 0,
        threads: int = 1, part_size: int = 500, progress: bool = True, log=print) -> dict:
    """Generate rows until ``n`` are in ``out`` (resuming); returns the manifest."""
    work.mkdir(parents=True, exist_ok=True)
    s = settings.with_values(data_dir=str(work), cache_dir=str(settings.cache_path),
                             **{"generation.threads": threads, "generation.prompt_cache": False,
                                "generation.warm_states": 0})
    engine, steered, embedder = workspace(s, work, progress, log)
    log(f"checker-data: planning {n} questions (kept in {work})")
    items = questions(s, work, n, seed, embedder.warm_up())
    parts = Parts(out, part_size)
    meta = {"draft_model": draft_model(s), "settings_hash": settings_hash(s)}
    extra = {**meta, "n": n, "seed": seed,
             "command": "specrag " + " ".join(shlex.quote(a) for a in sys.argv[1:])}
    return generate(engine, steered, items, parts, meta, extra, log)


def generate(engine, steered: Steered, items: list[Planned], parts: Parts, meta: dict,
             extra: dict, log=print) -> dict:
    """A row per item not yet in ``parts``; the manifest written at each finished part
    and at the end (returned)."""
    todo = [it for it in items if it.id not in parts.done]
    log(f"checker-data: {len(items) - len(todo)} of {len(items)} rows done, {len(todo)} to go")
    t0, made, right, failures = time.perf_counter(), 0, 0, 0
    for it in todo:
        try:
            r = row(engine, steered, it, meta)
        except (GenerationError, SpecragError) as err:
            failures += 1
            log(f"checker-data: {it.id} failed ({err}); left for the next run")
            if failures >= MAX_FAILURES:
                raise
            continue
        failures, before = 0, len(parts.finished())
        parts.append(r)
        made, right = made + 1, right + r["right"]
        if len(parts.finished()) != before:
            parts.manifest({**extra, **meta})
        if made % 10 == 0 or made == len(todo):
            rate = made / max(1e-9, time.perf_counter() - t0) * 60
            log(f"checker-data: {len(parts.done)} rows, +{made} in this run at "
                f"{rate:.1f} rows/min, {right / made:.0%} right")
    return parts.manifest({**extra, **meta})
