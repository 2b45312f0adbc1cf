"""Chroma-backed chunk store with a per-collection document registry.

Each knowledge base has two Chroma collections: ``specrag_chunks_NAME`` (one record
per chunk, cosine HNSW, specrag's own embeddings) and ``specrag_docs_NAME`` (one
record per document: committed ``version``, in-flight ``pending`` and ``stale``
versions). Search excludes the chunks of pending and stale versions, so a document
becomes visible only once all its chunks are stored, a replaced version disappears
as a whole, and a crash mid-ingest leaves nothing half-visible; ``recover()`` sweeps
the leftovers and finishes a delete that a crash interrupted. A BM25 index beside them
(``keyword``, SQLite FTS5 under ``data_dir/keyword``) gets the same rows in the same
steps; ``query_both`` ranks a question both ways over one registry snapshot and shows a
keyword hit only if Chroma holds it and shows it, so the two never disagree on what
exists (a collection older than the index is filled from Chroma on first use).
Embedded ``PersistentClient`` by default, ``HttpClient`` when ``store.chroma_url`` is
set. Writes to one collection take its lock (``writing(name)``); different collections
are written at the same time. Removed chunks take their copies with them: the draft
model's prompt states, the audit samples that cite them and, once ``scrub`` runs, their
bytes in Chroma's and the keyword index's files (``scrub``).

Deliberately not here: embedding, parsing, chunking (``ingest`` wires those up).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from urllib.parse import urlparse

import numpy as np

from specrag.retrieval import diskspace
from specrag.retrieval import scrub as scrubbing
from specrag.retrieval.keyword import KeywordIndex
from specrag.retrieval.records import chunk_meta, cosine, dense, read, to_chunk, to_info
from specrag.settings import Settings
from specrag.types import Chunk, DocumentInfo, Hit, SpecragError, check_collection_name

log = logging.getLogger(__name__)

_CHUNKS, _DOCS = "specrag_chunks_", "specrag_docs_"


class Store:
    def __init__(self, settings: Settings):
        self.settings = settings
        self._client = None
        self._lock = threading.Lock()
        self._batch = 0
        self._writers: dict[str, threading.RLock] = {}
        # local even with a Chroma server: it then holds what this data dir ingested
        self.keywords = KeywordIndex(settings.data_path / "keyword")
        self._filled: set[str] = set()
        self._short: set[str] = set()  # collections whose log is kept short (``scrub``)

    def writing(self, collection: str) -> threading.RLock:
        """The lock of one collection's writers (reentrant: a holder may call ingest).

        The registry steps (``begin``/``commit``/``delete``/``recover``) of one collection
        must not interleave; readers never wait on it, and writers to other collections
        have their own. Within this process only: two app processes on one embedded
        store are not supported."""
        with self._lock:
            return self._writers.setdefault(check_collection_name(collection),
                                            threading.RLock())

    def warm_up(self) -> "Store":
        if not self.settings.store.chroma_url:  # after a full disk its calls may hang
            diskspace.refuse_if_broken(self.settings.data_path / "chroma")
        with self._lock:
            if self._client is None:
                import chromadb
                from chromadb.config import Settings as ChromaSettings

                cs = ChromaSettings(anonymized_telemetry=False)
                url = self.settings.store.chroma_url
                if url:
                    u = urlparse(url)
                    self._client = chromadb.HttpClient(host=u.hostname, port=u.port or 8000,
                                                       ssl=u.scheme == "https", settings=cs)
                else:
                    scrubbing.wipe_freed_memory()  # its index files hold freed memory (scrub)
                    path = self.settings.data_path / "chroma"
                    path.mkdir(parents=True, exist_ok=True)
                    self._client = chromadb.PersistentClient(path=str(path), settings=cs)
                self._batch = self._client.get_max_batch_size()
        return self

    # -- collections ---------------------------------------------------------------
    def _pair(self, name: str, create: bool = True):
        self.warm_up()
        check_collection_name(name)
        # embedding_function=None: Chroma's default would download a model
        kw = dict(embedding_function=None, configuration={"hnsw": scrubbing.HNSW})
        if not create:
            try:
                pair = (self._client.get_collection(_CHUNKS + name, embedding_function=None),
                        self._client.get_collection(_DOCS + name, embedding_function=None))
            except Exception:  # noqa: BLE001 - chroma raises different types per client
                raise SpecragError(f"collection '{name}' does not exist: ingest documents "
                                   "into it first") from None
        else:
            pair = (self._client.get_or_create_collection(_CHUNKS + name, **kw),
                    self._client.get_or_create_collection(_DOCS + name, **kw))
        if name not in self._short:  # before this process reads or writes it (``scrub``)
            for collection in pair:
                scrubbing.keep_log_short(collection)
            self._short.add(name)
        return pair

    def collections(self) -> list[str]:
        self.warm_up()
        names = [getattr(c, "name", c) for c in self._client.list_collections()]
        return sorted(n[len(_CHUNKS):] for n in names if n.startswith(_CHUNKS))

    def drop_collection(self, name: str) -> None:
        self.warm_up()
        for prefix in (_CHUNKS, _DOCS):
            try:
                self._client.delete_collection(prefix + check_collection_name(name))
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.keywords.drop(name)
        self._filled.discard(name)
        self._states_gone()

    def _keyword_ready(self, name: str, chunks) -> None:
        """Fill the keyword index from Chroma once, for a collection older than it."""
        if name in self._filled:
            return
        with self.writing(name):  # readers wait here once per collection and process
            if not self.keywords.filled(name):
                self.keywords.fill_from(name, chunks)
            self._filled.add(name)

    # -- document registry -----------------------------------------------------------
    def _record(self, docs, doc_id: str) -> dict | None:
        got = docs.get(ids=[doc_id], include=["metadatas"])
        return dict(got["metadatas"][0]) if got["ids"] else None

    def _put(self, docs, doc_id: str, meta: dict) -> None:
        meta["busy"] = int(bool(meta.get("pending") or meta.get("stale")))
        docs.upsert(ids=[doc_id], embeddings=[[1.0]], metadatas=[meta])

    def document(self, collection: str, doc_id: str) -> DocumentInfo | None:
        _, docs = self._pair(collection)
        meta = self._record(docs, doc_id)
        return to_info(doc_id, meta) if meta and meta.get("version") else None

    def documents(self, collection: str) -> list[DocumentInfo]:
        _, docs = self._pair(collection, create=False)
        got = docs.get(include=["metadatas"])
        infos = [to_info(i, m) for i, m in zip(got["ids"], got["metadatas"]) if m.get("version")]
        return sorted(infos, key=lambda d: d.source)

    # -- writing (batched: one Chroma call per step for a whole group of files) -----
    def begin(self, collection: str, docs_: list[tuple[str, str, str]]) -> None:
        """Announce new versions ``(doc_id, source, version)``; invisible until ``commit``."""
        chunks, docs = self._pair(collection)
        ids = [d[0] for d in docs_]
        got = docs.get(ids=ids, include=["metadatas"])
        existing = dict(zip(got["ids"], got["metadatas"]))
        metas = []
        for doc_id, source, version in docs_:
            meta = dict(existing.get(doc_id) or {"version": "", "source": source})
            # leftovers of an interrupted earlier attempt must not mix with the new chunks
            for v in {meta.get("pending"), version} - {"", None, meta.get("version")}:
                if doc_id in existing:
                    chunks.delete(where={"$and": [{"doc_id": doc_id}, {"version": v}]})
                    self.keywords.delete(collection, doc_id, [v])
            meta.update(pending=version, busy=1)
            metas.append(meta)
        docs.upsert(ids=ids, embeddings=[[1.0]] * len(ids), metadatas=metas)

    def add_chunks(self, collection: str, chunks_: list[Chunk], embeddings) -> None:
        chunks, _ = self._pair(collection)
        self._keyword_ready(collection, chunks)
        for i in range(0, len(chunks_), self._batch):
            part = chunks_[i:i + self._batch]
            chunks.add(ids=[c.id for c in part], embeddings=embeddings[i:i + self._batch],
                       documents=[c.text for c in part], metadatas=[chunk_meta(c) for c in part])
        # after Chroma: a crash in between leaves pending rows only, which recover() sweeps
        self.keywords.add(collection, [(c.id, c.doc_id, c.version, c.source, c.text)
                                       for c in chunks_])

    def commit(self, collection: str, infos: list[DocumentInfo]) -> None:
        """Make pending versions visible and drop the chunks of the versions they replace."""
        chunks, docs = self._pair(collection)
        got = docs.get(ids=[i.doc_id for i in infos], include=["metadatas"])
        old = {i: m.get("version", "") for i, m in zip(got["ids"], got["metadatas"])}
        metas = []
        for info in infos:
            prev = old.get(info.doc_id, "")
            meta = {"version": info.version, "source": info.source, "chunks": info.chunks,
                    "size_bytes": info.size_bytes, "format": info.format,
                    "ingested_at": info.ingested_at, "pending": "",
                    "stale": prev if prev and prev != info.version else ""}
            if info.pages is not None:
                meta["pages"] = info.pages
            meta["busy"] = int(bool(meta["stale"]))
            metas.append(meta)
        ids = [i.doc_id for i in infos]
        docs.upsert(ids=ids, embeddings=[[1.0]] * len(ids), metadatas=metas)
        stale = [(i, m) for i, m in zip(ids, metas) if m["stale"]]
        for doc_id, meta in stale:
            where = {"$and": [{"doc_id": doc_id}, {"version": meta["stale"]}]}
            scrubbing.forget_samples(self.settings, chunks.get(where=where, include=[])["ids"])
            chunks.delete(where=where)
            self.keywords.delete(collection, doc_id, [meta["stale"]])
            meta.update(stale="", busy=0)
        if stale:
            docs.upsert(ids=[i for i, _ in stale], embeddings=[[1.0]] * len(stale),
                        metadatas=[m for _, m in stale])
            self._states_gone()

    def delete(self, collection: str, doc_id: str) -> bool:
        chunks, docs = self._pair(collection, create=False)
        meta = self._record(docs, doc_id)
        if meta is None:
            return False
        meta["stale"] = meta.get("version") or meta.get("pending") or ""
        self._put(docs, doc_id, meta)  # invisible first, then gone
        self._forget(collection, chunks, docs, doc_id)
        return True

    def _forget(self, collection: str, chunks, docs, doc_id: str) -> None:
        # samples first: a crash after them leaves a delete that recover() finishes
        scrubbing.forget_samples(self.settings, chunks.get(where={"doc_id": doc_id}, include=[])["ids"])
        chunks.delete(where={"doc_id": doc_id})
        self.keywords.delete(collection, doc_id)
        docs.delete(ids=[doc_id])
        self._states_gone()

    def scrub(self, collection: str) -> str | None:
        """Give back the space removed chunks held, so their bytes leave the disk too
        (``scrub.scrub``): None when done, else a one-line reason."""
        return scrubbing.scrub(self.settings, self.keywords, collection)

    def _states_gone(self) -> None:
        """Chunks left the store: the draft model's prompt states (KV cells of their text,
        in its server's cache and in slot files) must not outlive them: the files go now,
        and each model server starts again before its next request
        (``generators.llama_server``)."""
        from specrag.generators.state_folders import invalidate, root_for

        try:
            invalidate(root_for(self.settings.data_path))
        except OSError as err:  # the store's change stands; say what could not be forgotten
            log.warning("could not invalidate the draft model's prompt states: %s", err)

    def recover(self, collection: str) -> int:
        """Remove chunks of versions that never committed or were half replaced."""
        chunks, docs = self._pair(collection)
        self._keyword_ready(collection, chunks)
        got = docs.get(where={"busy": 1}, include=["metadatas"])
        for doc_id, meta in zip(got["ids"], got["metadatas"]):
            if meta.get("version") and meta.get("stale") == meta["version"]:
                # only delete() marks the committed version stale: finish it, or the
                # document would come back with whatever part of it the crash left
                self._forget(collection, chunks, docs, doc_id)
                continue
            for v in {meta.get("pending"), meta.get("stale")} - {"", None, meta.get("version")}:
                chunks.delete(where={"$and": [{"doc_id": doc_id}, {"version": v}]})
                self.keywords.delete(collection, doc_id, [v])
                if v == meta.get("stale"):  # a replaced version's chunks were visible
                    self._states_gone()
            if not meta.get("version"):
                docs.delete(ids=[doc_id])
            else:
                meta.update(pending="", stale="")
                self._put(docs, doc_id, meta)
        return len(got["ids"])

    # -- reading -------------------------------------------------------------------
    def chunks(self, collection: str, *, ids: list[str] | None = None,
               where: dict | None = None, limit: int | None = None) -> list[Chunk]:
        """Stored chunks by id or metadata filter (any version: callers check it)."""
        chunks, _ = self._pair(collection, create=False)
        return read(chunks, collection, ids=ids, where=where, limit=limit)

    def visible_chunks(self, collection: str, limit: int | None = None) -> list[Chunk]:
        """Chunks a search may show (neither pending nor replaced), at most ``limit``."""
        chunks, docs = self._pair(collection, create=False)
        hidden = self._hidden(docs)
        return read(chunks, collection, where={"version": {"$nin": hidden}} if hidden else None,
                     limit=limit)

    def count(self, collection: str) -> int:
        return self._pair(collection)[0].count()

    def _hidden(self, docs) -> list[str]:
        """Versions no search may show: pending (not yet committed) and stale (replaced)."""
        # busy is an int: Chroma indexes int/str metadata, a bool filter scans every row
        busy = docs.get(where={"busy": 1}, include=["metadatas"])["metadatas"]
        return sorted({v for m in busy for v in (m.get("pending"), m.get("stale")) if v})

    def query(self, collection: str, embeddings, top_k: int,
              source: str | list[str] | None = None) -> list[list[Hit]]:
        """Top-k visible chunks for each query embedding, best first."""
        chunks, docs = self._pair(collection, create=False)
        return dense(chunks, collection, self._hidden(docs), embeddings, top_k, source)

    def query_both(self, collection: str, text: str, embedding, top_k: int,
                   source: str | list[str] | None = None) -> tuple[list[Hit], list[Hit]]:
        """The dense and the BM25 top-k of one question, each best first, cosine scores.

        One registry snapshot for both, so a document replaced in between is never seen
        in both versions at once."""
        chunks, docs = self._pair(collection, create=False)
        self._keyword_ready(collection, chunks)
        hidden = self._hidden(docs)
        near = dense(chunks, collection, hidden, [embedding], top_k, source)[0]
        sources = [source] if isinstance(source, str) else source
        ids = self.keywords.search(collection, text, max(1, top_k), hidden, sources)
        seen = {h.chunk.id: h for h in near}
        rest = [i for i in ids if i not in seen]
        if rest:  # Chroma decides what exists: a keyword row a crash left is never shown
            got = chunks.get(ids=rest, include=["documents", "metadatas", "embeddings"])
            q = np.asarray(embedding, dtype=np.float32)
            q = q / (np.linalg.norm(q) or 1.0)
            seen.update((i, Hit(chunk=to_chunk(i, t, m, collection), score=cosine(q, e), rank=0))
                        for i, t, m, e in zip(got["ids"], got["documents"], got["metadatas"],
                                              got["embeddings"]) if m["version"] not in hidden)
        found = [seen[i] for i in ids if i in seen]
        return near, [replace(h, rank=r + 1) for r, h in enumerate(found)]
