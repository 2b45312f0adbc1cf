"""BM25 keyword index of a collection's chunks: SQLite FTS5, one file per collection.

``KeywordIndex(root)`` keeps ``root/NAME.sqlite3`` for collection ``NAME``: a plain
``chunk`` table (chunk id, doc id, version, source, text; indexed by doc and version) and
an external-content FTS5 table over its text (porter stemming over ``unicode61``), kept
in step by triggers, so every write is one SQLite transaction. ``search`` ranks by
FTS5's own ``bm25()``; ``match_expression`` turns any question into a safe FTS5 query:
each whitespace-separated word is quoted (FTS5 operators, column filters, ``*``, ``^``
and quotes become plain text) and the words are OR-ed, minus a few function words that
would match nearly every chunk and only slow the query down.

The ``Store`` writes it inside the same begin/add/commit/delete/recover steps as Chroma
and checks every keyword hit against Chroma before it is shown, so this index decides
only *which* chunks are candidates, never whether one is visible.

Deleted rows leave the file: every connection has SQLite's ``secure_delete`` on (freed
space is zeroed), and ``scrub`` merges the FTS5 index into one segment (a deleted row's
words otherwise stay in older segments until a merge) and truncates the WAL (which holds
old pages until a checkpoint).

Deliberately not here: visibility (the ``store``'s registry), fusion with the dense
ranking (``fusion``) and any scoring of our own.
"""

from __future__ import annotations

import re
import sqlite3
from contextlib import closing
from pathlib import Path

MAX_TERMS = 64  # a 2,000-character question is at most a few hundred words
_HAS_WORD = re.compile(r"\w")
_NOT_WORD = re.compile(r"\W+")
_STOP = frozenset(
    "a an and are as at be been by can could did do does for from had has have how i in "
    "into is it its of on or that the their there these this those to was were what when "
    "where which who whom whose why will with would you".split())

_SCHEMA = """
create table if not exists chunk(id integer primary key, chunk_id text not null unique,
    doc_id text not null, version text not null, source text not null, text text not null);
create index if not exists chunk_doc on chunk(doc_id, version);
create virtual table if not exists fts using fts5(text, content='chunk', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2');
create trigger if not exists chunk_ai after insert on chunk begin
    insert into fts(rowid, text) values (new.id, new.text); end;
create trigger if not exists chunk_ad after delete on chunk begin
    insert into fts(fts, rowid, text) values ('delete', old.id, old.text); end;
create table if not exists meta(key text primary key, value text not null);
"""


def match_expression(text: str) -> str:
    """An FTS5 query matching chunks with any of the question's words ('' when none)."""
    terms: dict[str, str] = {}
    for word in text.split():
        key = _NOT_WORD.sub("", word.lower())
        if _HAS_WORD.search(word) and key not in _STOP and key not in terms:
            # a quoted string is a phrase of plain tokens to FTS5: nothing in it is syntax
            terms[key] = '"' + word.replace('"', '""') + '"'
    return " OR ".join(list(terms.values())[:MAX_TERMS])


class KeywordIndex:
    def __init__(self, root: Path):
        self.root = Path(root)

    def _path(self, collection: str) -> Path:
        return self.root / f"{collection}.sqlite3"

    def _connect(self, collection: str) -> sqlite3.Connection:
        # a connection per call: the store is used from several threads at once
        self.root.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self._path(collection), timeout=30.0)
        conn.execute("pragma journal_mode=wal")  # readers never wait on a writer
        conn.execute("pragma secure_delete=on")  # a deleted chunk's text is zeroed, not freed
        conn.executescript(_SCHEMA)
        return conn

    def filled(self, collection: str) -> bool:
        """Whether the index holds the collection (false for one made before this index)."""
        if not self._path(collection).exists():
            return False
        with closing(self._connect(collection)) as conn:
            return conn.execute("select 1 from meta where key = 'filled'").fetchone() is not None

    def fill_from(self, collection: str, chroma_chunks, step: int = 5000) -> None:
        """Replace the whole index with every chunk of a Chroma chunk collection."""
        rows: list[tuple] = []
        while True:
            got = chroma_chunks.get(include=["documents", "metadatas"], limit=step,
                                    offset=len(rows))
            rows += [(i, m["doc_id"], m["version"], m["source"], t or "")
                     for i, t, m in zip(got["ids"], got["documents"], got["metadatas"])]
            if len(got["ids"]) < step:
                break
        with closing(self._connect(collection)) as conn, conn:
            conn.execute("delete from chunk")
            conn.executemany("insert or ignore into chunk(chunk_id, doc_id, version, source, "
                             "text) values (?, ?, ?, ?, ?)", rows)
            conn.execute("insert or replace into meta values ('filled', '1')")

    def add(self, collection: str, rows: list[tuple[str, str, str, str, str]]) -> None:
        # "or ignore": Chroma's add keeps an existing id too (ids include the version)
        with closing(self._connect(collection)) as conn, conn:
            conn.executemany("insert or ignore into chunk(chunk_id, doc_id, version, source, "
                             "text) values (?, ?, ?, ?, ?)", rows)

    def delete(self, collection: str, doc_id: str, versions: list[str] | None = None) -> None:
        """Remove a document's rows: those of ``versions``, or all of them."""
        with closing(self._connect(collection)) as conn, conn:
            if versions is None:
                conn.execute("delete from chunk where doc_id = ?", (doc_id,))
            else:
                conn.executemany("delete from chunk where doc_id = ? and version = ?",
                                 [(doc_id, v) for v in versions])

    def scrub(self, collection: str) -> None:
        """Merge the index and truncate the WAL, so deleted rows' words leave the disk."""
        if not self._path(collection).exists():
            return
        with closing(self._connect(collection)) as conn:
            with conn:
                conn.execute("insert into fts(fts) values ('optimize')")
            conn.execute("pragma wal_checkpoint(truncate)")

    def drop(self, collection: str) -> None:
        for suffix in ("", "-wal", "-shm"):
            Path(str(self._path(collection)) + suffix).unlink(missing_ok=True)

    def count(self, collection: str) -> int:
        with closing(self._connect(collection)) as conn:
            return conn.execute("select count(*) from chunk").fetchone()[0]

    def search(self, collection: str, query: str, top_k: int, hidden: list[str] = (),
               sources: list[str] | None = None) -> list[str]:
        """Chunk ids, best BM25 first, leaving out versions in ``hidden``."""
        expr = match_expression(query)
        if not expr or not self._path(collection).exists():
            return []
        sql = ("select chunk.chunk_id from fts join chunk on chunk.id = fts.rowid "
               "where fts match ?")
        args: list = [expr]
        if hidden:
            sql += f" and chunk.version not in ({','.join('?' * len(hidden))})"
            args += list(hidden)
        if sources:
            sql += f" and chunk.source in ({','.join('?' * len(sources))})"
            args += list(sources)
        with closing(self._connect(collection)) as conn:
            rows = conn.execute(sql + " order by bm25(fts) limit ?", args + [max(1, top_k)])
            return [r[0] for r in rows]
