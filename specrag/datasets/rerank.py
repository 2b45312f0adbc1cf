"""Reranker training and test data: question -> gold passage, hard negatives from the bi-encoder.

``rerank_items(settings, split)`` returns, for HaluEval-QA and SQuAD questions of one
split (the split of the gold passage, ``training.data.split_of``, the same rule as the
verifier's), the question, its gold passage and the bi-encoder's top ``CANDIDATES``
passages from that dataset's full corpus. Training uses the top non-gold candidates as
hard negatives; the benchmark reranks the same candidate lists, so "bi-encoder order"
and "reranked order" are compared on identical inputs. Corpus embeddings are cached
as ``.npy`` per dataset (int8 embedder), so mining costs its minutes once.

Deliberately not here: the training loop (``training.train``) and metrics (``bench.reranker``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specrag.datasets import load_dataset
from specrag.datasets.pairs import split_of
from specrag.datasets.training_sources import training_cache
from specrag.retrieval.embedder import Embedder
from specrag.settings import Settings

CANDIDATES = 20
DATASETS = ("halueval-qa", "squad")


@dataclass(frozen=True)
class RerankItem:
    dataset: str
    question: str
    gold: str  # passage text
    candidates: tuple[str, ...]  # bi-encoder order, may or may not contain the gold
    split: str


def _corpus_vectors(name: str, texts: list[str], embedder, cache: Path) -> np.ndarray:
    import hashlib

    key = hashlib.sha1("\n".join(texts).encode("utf-8")).hexdigest()[:12]
    path = cache / f"{name}-{key}.npy"
    if path.exists():
        return np.load(path)
    vecs = embedder.encode_documents(texts)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, vecs)
    return vecs


def rerank_items(settings: Settings, split: str, n_per_dataset: int | None = None,
                 seed: int = 0, embedder=None, datasets: tuple[str, ...] = DATASETS) -> list[RerankItem]:
    """Questions of ``split`` with their bi-encoder candidate lists (seeded sample)."""
    embedder = embedder or Embedder(settings).warm_up()
    out: list[RerankItem] = []
    for name in datasets:
        ds = load_dataset(name, settings)
        passages = ds.passages
        docs = [p.document() for p in passages]
        index = {p.id: i for i, p in enumerate(passages)}
        items = [q for q in ds.items if split_of(q.gold_passage_id) == split]
        random.Random(seed).shuffle(items)
        items = items[:n_per_dataset] if n_per_dataset else items
        if not items:
            continue
        vecs = _corpus_vectors(name, docs, embedder, training_cache(settings) / "embeddings")
        q = embedder.encode_queries([it.question for it in items])
        scores = q @ vecs.T
        top = np.argsort(-scores, axis=1)[:, :CANDIDATES]
        for it, row in zip(items, top):
            out.append(RerankItem(name, it.question, docs[index[it.gold_passage_id]],
                                  tuple(docs[j] for j in row), split))
    return out


def training_pairs(items: list[RerankItem], negatives: int = 3, seed: int = 0) -> list[tuple[str, str, float]]:
    """(question, passage, label): the gold, and the hardest non-gold candidates."""
    rng = random.Random(seed)
    out = []
    for it in items:
        hard = [c for c in it.candidates if c != it.gold]
        # mostly the very top (hardest), one from deeper so the model also sees easier ones
        picks = hard[:negatives - 1] + rng.sample(hard[negatives - 1:], 1) if len(hard) >= negatives else hard
        out.append((it.question, it.gold, 1.0))
        out += [(it.question, c, 0.0) for c in picks]
    return out


def easy_pairs(items: list[RerankItem], negatives: int = 3, seed: int = 0) -> list[tuple[str, str, float]]:
    """(question, passage, label): the gold and passages of *other* questions' candidate
    lists (mostly off-topic), a curriculum that gets a cold cross-encoder started."""
    rng = random.Random(seed)
    pool = [c for it in items for c in it.candidates[:3]]
    out = []
    for it in items:
        out.append((it.question, it.gold, 1.0))
        others = [c for c in rng.sample(pool, min(len(pool), negatives * 3)) if c not in it.candidates]
        out += [(it.question, c, 0.0) for c in others[:negatives]]
    return out
