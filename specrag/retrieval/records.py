"""Chroma records in and out, and the dense search over one chunk collection.

``chunk_meta`` is the metadata a ``Chunk`` is stored with, ``to_chunk`` and ``to_info``
turn stored records back into ``Chunk`` and ``DocumentInfo``; ``read`` is a Chroma
``get`` as chunks; ``dense`` is the top-k by cosine distance, leaving out hidden
versions (over-fetching and dropping them in Python while there are at most
``MAX_OVERFETCH``: Chroma's ``$nin`` filter is ~100x slower).

Deliberately not here: which versions are hidden (the ``store``'s registry), keyword
search (``keyword``) and fusing the two (``fusion``).
"""

from __future__ import annotations

import numpy as np

from specrag.types import Chunk, DocumentInfo, Hit

MAX_OVERFETCH = 2000  # hidden chunks dropped in Python before falling back to a $nin filter


def dense(chunks, collection: str, hidden: list[str], embeddings, top_k: int,
          source) -> list[list[Hit]]:
    """Top-k chunks of ``chunks`` (a Chroma chunk collection) for each query embedding,
    best first, leaving out versions in ``hidden`` and keeping only ``source`` when given."""
    clauses, drop, n = [], set(), max(1, top_k)
    if hidden:
        drop = set(chunks.get(where={"version": {"$in": hidden}}, include=[])["ids"])
        if len(drop) <= MAX_OVERFETCH:
            n += len(drop)  # over-fetch and drop in Python: a $nin filter is ~100x slower
        else:
            clauses.append({"version": {"$nin": hidden}})
            drop = set()
    if source:
        clauses.append({"source": {"$in": [source] if isinstance(source, str) else source}})
    where = clauses[0] if len(clauses) == 1 else ({"$and": clauses} if clauses else None)
    res = chunks.query(query_embeddings=embeddings, n_results=n, where=where,
                       include=["documents", "metadatas", "distances"])
    out = []
    for ids, texts, metas, dists in zip(res["ids"], res["documents"], res["metadatas"],
                                        res["distances"]):
        rows = [(i, t, m, d) for i, t, m, d in zip(ids, texts, metas, dists)
                if i not in drop][:max(1, top_k)]
        out.append([Hit(chunk=to_chunk(i, t, m, collection), score=1.0 - float(d), rank=r + 1)
                    for r, (i, t, m, d) in enumerate(rows)])
    return out


def cosine(q: np.ndarray, v) -> float:
    v = np.asarray(v, dtype=np.float32)
    return float(q @ v / (np.linalg.norm(v) or 1.0))


def chunk_meta(c: Chunk) -> dict:
    meta = {"doc_id": c.doc_id, "source": c.source, "index": c.index, "start": c.start,
            "end": c.end, "content_hash": c.content_hash, "version": c.version}
    if c.page is not None:
        meta["page"] = c.page
    if c.heading:
        meta["heading"] = c.heading
    return meta


def read(chunks, collection: str, **get) -> list[Chunk]:
    """``Chunk``s of a Chroma ``get`` on the chunks collection (ids, where, limit)."""
    got = chunks.get(include=["documents", "metadatas"], **get)
    return [to_chunk(i, t, m, collection)
            for i, t, m in zip(got["ids"], got["documents"], got["metadatas"])]


def to_chunk(chunk_id: str, text: str, m: dict, collection: str) -> Chunk:
    return Chunk(id=chunk_id, doc_id=m["doc_id"], source=m["source"], text=text,
                 index=int(m["index"]), start=int(m["start"]), end=int(m["end"]),
                 content_hash=m["content_hash"], version=m["version"], page=m.get("page"),
                 heading=m.get("heading"), collection=collection)


def to_info(doc_id: str, m: dict) -> DocumentInfo:
    return DocumentInfo(doc_id=doc_id, source=m.get("source", ""), version=m["version"],
                        chunks=int(m.get("chunks", 0)), size_bytes=int(m.get("size_bytes", 0)),
                        format=m.get("format", ""), ingested_at=float(m.get("ingested_at", 0.0)),
                        pages=m.get("pages"))
