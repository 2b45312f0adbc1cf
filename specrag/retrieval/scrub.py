"""Make the text of deleted chunks leave Chroma's files, not just its answers.

Chroma logs every write (``embeddings_queue`` in ``chroma.sqlite3``, with the document
text and metadata) and purges the log only below the point that *all* of a collection's
segments have persisted; its vector index persists every ``hnsw.sync_threshold`` writes
(1,000 by default), so the text of a deleted chunk stayed in the log until a thousand
more writes came. ``HNSW`` asks for a sync after every write, so the log keeps nothing
but the last write (a delete holds ids only), and ``keep_log_short`` sets it on
collections made before (Chroma reads it when a process first opens the collection's
index: the store calls it before anything else touches the collection). That is
Chroma's own automatic purge (``automatically_purge``, on by default).

A purged or deleted row's bytes stay in the SQLite file's free space: ``compact`` runs
Chroma's own maintenance command (``chroma vacuum``: it purges the log once more and
runs SQLite's VACUUM, which rewrites the file without free pages) after merging the
segments of Chroma's full-text index (FTS5 ``optimize``: deleted rows otherwise keep
their three-letter pieces there until a merge; Chroma has no call for it). Both run in a
child process: two copies of SQLite in one process (Python's and Chroma's) must not
open the same file at once, and the command prints to stdout.

Chroma's vector index files (``data_level0.bin``, ``length.bin``) are written with their
unused slots taken as they were in memory that hnswlib never initialised: whatever the
process freed there last, which was seen to be a document's text and metadata (Chroma's
own serialised log records) in 5 of 10 small collections, deleted or not.
``wipe_freed_memory`` has glibc overwrite memory as it is freed and allocated
(``M_PERTURB``), so those slots hold only 0x00 or 0xff; the store turns it on before it
opens an embedded Chroma.

``scrub(settings, keywords, collection)`` is what the store runs after a delete or a
replacement: the keyword index merges and truncates its files (``keyword``), and the
embedded Chroma store is compacted unless ``store.scrub_deleted`` is off.
``forget_samples`` deletes the audit samples that cite removed chunks (their question,
context and answer hold its text; ``observability.audit``).

Deliberately not here: which chunks go (``store``), and a Chroma server's files
(``store.chroma_url``: its operator runs ``chroma vacuum`` there).
"""

from __future__ import annotations

import ctypes
import logging
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

from specrag.observability.audit import AUDIT_FILE, AuditStore
from specrag.retrieval import diskspace

log = logging.getLogger(__name__)

HNSW = {"space": "cosine", "sync_threshold": 1}  # Chroma's purge needs the index synced
TIMEOUT_S = 600  # VACUUM rewrites the whole file: ~1 s per 100 MB on 2 cores
_FTS = "embedding_fulltext_search"  # Chroma's full-text index over documents (trigrams)
_M_PERTURB = -6  # glibc's mallopt parameter: fill freed memory with a byte, new with its complement
_PERTURB = 0xFF  # freed memory becomes 0xff, new allocations 0x00
_wiping = False
_DONE = "Vacuum complete"  # what ``chroma vacuum`` prints on success (its exit code is 0 either way)


def keep_log_short(collection) -> None:
    """Ask Chroma to sync ``collection``'s index, hence purge its log, after every write."""
    hnsw = (collection.configuration_json or {}).get("hnsw") or {}  # as stored, no warnings
    if hnsw.get("sync_threshold") != HNSW["sync_threshold"]:
        collection.modify(configuration={"hnsw": {"sync_threshold": HNSW["sync_threshold"]}})


def wipe_freed_memory() -> bool:
    """Have glibc overwrite memory when it is freed or allocated, for the whole process
    (once; a 1,200-chunk ingest took 36-39 s with it and without, on 2 cores). False
    where the C library has no ``mallopt`` (not glibc): there the index files may keep
    such fragments until their slots are used."""
    global _wiping
    if not _wiping:
        try:
            _wiping = bool(ctypes.CDLL(None).mallopt(_M_PERTURB, _PERTURB))
        except (OSError, AttributeError):
            return False
    return _wiping


def compact(chroma_dir: Path, timeout_s: float = TIMEOUT_S) -> str | None:
    """Rewrite ``chroma_dir/chroma.sqlite3`` without the bytes of deleted rows.

    Returns None when done, else a one-line reason (the store's content is unchanged
    either way: only free space is given back)."""
    chroma_dir = Path(chroma_dir).resolve()  # the child runs in its parent folder
    db_file = chroma_dir / "chroma.sqlite3"
    if not db_file.is_file():
        return None
    # VACUUM journals the whole file: a full disk must fail here, never inside Chroma
    need = db_file.stat().st_size + diskspace.RESERVE
    if (free := diskspace.free_bytes(chroma_dir)) < need:
        return "not compacted: " + diskspace.message(chroma_dir.parent, free, need)
    try:
        # cwd: ``chroma vacuum`` looks for index folders under ./chroma, whatever --path says
        done = subprocess.run([sys.executable, "-m", __name__, str(chroma_dir)],
                              cwd=chroma_dir.parent, capture_output=True, text=True,
                              timeout=timeout_s + 30)
    except subprocess.TimeoutExpired:
        return f"compacting {chroma_dir} took longer than {timeout_s:.0f} s"
    if done.returncode == 0 and _DONE in done.stdout:
        return None
    lines = (done.stderr or done.stdout).strip().splitlines()
    return f"could not compact {chroma_dir}: " + (lines[-1] if lines else f"exit {done.returncode}")


def scrub(settings, keywords, collection: str) -> str | None:
    """Compact the files that held removed chunks; None when done, else a one-line reason
    (logged: what was removed stays removed either way)."""
    problem = None
    try:
        keywords.scrub(collection)
    except Exception as err:  # noqa: BLE001 - sqlite3 or OS: reported, never raised
        problem = f"could not compact the keyword index: {err}"
    if settings.store.scrub_deleted and not settings.store.chroma_url:
        problem = compact(settings.data_path / "chroma") or problem
    if problem:
        log.warning("%s", problem)
    return problem


def forget_samples(settings, chunk_ids: list[str]) -> None:
    """Delete the audit samples that cite any of these chunks."""
    path = settings.data_path / AUDIT_FILE
    if chunk_ids and path.is_file():
        samples = AuditStore(path)
        try:
            samples.forget(chunk_ids)
        finally:
            samples.close()


def _optimize_fts(db_file: Path) -> None:
    with closing(sqlite3.connect(db_file, timeout=30.0)) as db:
        if db.execute("select 1 from sqlite_master where name = ?", (_FTS,)).fetchone():
            with db:
                db.execute(f"insert into {_FTS}({_FTS}) values ('optimize')")


def main(argv: list[str] | None = None) -> int:
    """The child: ``python -m specrag.retrieval.scrub CHROMA_DIR``."""
    # Chroma's command line, as its ``chroma`` script runs it; imported here, in the
    # child only, so the parent never loads a second command-line runtime
    import chromadb_rust_bindings

    chroma_dir = Path((argv or sys.argv[1:])[0])
    try:
        _optimize_fts(chroma_dir / "chroma.sqlite3")  # closed before Chroma opens the file
    except sqlite3.Error as err:  # the vacuum below still frees what it can
        print(f"full-text index not merged: {err}", file=sys.stderr)
    chromadb_rust_bindings.cli(["chroma", "vacuum", "--path", str(chroma_dir), "--force",
                                "--timeout", str(TIMEOUT_S)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
