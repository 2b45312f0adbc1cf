"""Retrieval: encode the query with the bi-encoder, take the top-k from Chroma.

``Retriever(settings).retrieve("question")`` returns a ``Retrieval`` with the hits
(best first, cosine scores) and how long encoding and the search took (and when
the search started, for the engine's ``vector_search`` span). With
``retrieval.hybrid`` (or ``hybrid=True``) the search is hybrid: the dense and the BM25
top lists, each at least ``retrieval.top_k`` long, are fused by reciprocal rank
(``fusion.fuse_hits``); hits keep their cosine scores, in fused order. ``retrieve_many``
encodes a list of queries in one batch for scripts and benchmarks. Both check the
collection's ACL; ``search`` is the same without the check, for a caller that has
just made it (the engine authorizes once per question).

Deliberately not here: reranking (a cross-encoder, see the verifier issue) and any
answer generation.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from specrag.retrieval.embedder import Embedder
from specrag.retrieval.fusion import fuse_hits
from specrag.retrieval.store import Store, check_collection_name
from specrag.security.access import authorize
from specrag.settings import Settings
from specrag.types import Hit


@dataclass(frozen=True)
class Retrieval:
    query: str
    hits: tuple[Hit, ...]
    encode_ms: float
    search_ms: float
    search_started_ns: int | None = None  # wall clock, for tracing

    @property
    def total_ms(self) -> float:
        return self.encode_ms + self.search_ms


class Retriever:
    def __init__(self, settings: Settings, embedder: Embedder | None = None,
                 store: Store | None = None, hybrid: bool | None = None):
        self.settings = settings
        self.embedder = embedder or Embedder(settings)
        self.store = store or Store(settings)
        self.hybrid = settings.retrieval.hybrid if hybrid is None else bool(hybrid)

    @classmethod
    def from_settings(cls, settings: Settings) -> "Retriever":
        return cls(settings)

    def warm_up(self) -> "Retriever":
        self.embedder.warm_up()
        self.store.warm_up()
        return self

    def search(self, query: str, top_k: int | None = None, collection: str | None = None,
               source: str | list[str] | None = None) -> Retrieval:
        """``retrieve`` without the ACL check: the caller has authorized ``collection``."""
        return self._search([query], top_k, collection, source)[0]

    def retrieve(self, query: str, top_k: int | None = None, collection: str | None = None,
                 source: str | list[str] | None = None, principal=None) -> Retrieval:
        return self.retrieve_many([query], top_k, collection, source, principal)[0]

    def retrieve_many(self, queries: list[str], top_k: int | None = None,
                      collection: str | None = None,
                      source: str | list[str] | None = None, principal=None) -> list[Retrieval]:
        authorize(self.settings, "read", collection, principal)  # security: collection ACL
        return self._search(queries, top_k, collection, source)

    def _search(self, queries, top_k, collection, source) -> list[Retrieval]:
        collection = check_collection_name(collection or self.settings.store.collection)
        self.warm_up()
        k = top_k or self.settings.retrieval.top_k
        t0 = time.perf_counter()
        vectors = self.embedder.encode_queries(queries)
        t1 = time.perf_counter()
        out = []
        encode_ms = (t1 - t0) * 1000 / max(1, len(queries))
        for query, vec in zip(queries, vectors):
            started, s0 = time.time_ns(), time.perf_counter()
            if self.hybrid:
                # fused over the broad lists even for a small k: a chunk 20th in both
                # orders can beat one 3rd in one order and absent from the other
                broad = max(k, self.settings.retrieval.top_k)
                hits = fuse_hits(*self.store.query_both(collection, query, vec, broad, source),
                                 k, question=query)
            else:
                hits = self.store.query(collection, [vec], k, source)[0]
            out.append(Retrieval(query, tuple(hits), encode_ms,
                                 (time.perf_counter() - s0) * 1000, started))
        return out
