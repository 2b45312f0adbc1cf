"""Files in, chunks stored: parse, chunk, embed and commit documents in groups.

``Ingestor(settings).ingest(paths, collection)`` returns an ``IngestReport`` with one
``FileResult`` per file, in order. A file that cannot be read, parsed or chunked fails
alone with a one-line reason; the others go in. Unchanged files (same sha256) are
skipped; a changed file replaces its old chunks atomically (see ``store``), and a
batch that replaced or ``delete`` that removed chunks ends with ``Store.scrub``, so the
old text leaves the files on disk too. Files
are processed in groups so the encoder sees full batches and Chroma gets few, large
calls. ``on_progress(done, total, result)`` is called after every file.

Each file is parsed in a parser process with a time and memory limit
(``chunking.parse_isolation``, ``isolation``). Only the store's registry steps hold the
collection's write lock (``Store.writing``): parsing, chunking and embedding run outside
it, so a slow file never holds up a delete, and other collections are never waited on.

Deliberately not here: format parsing (``parsers``), chunk boundaries (``chunker``),
visibility rules (``store``).
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterable

from specrag.ingest.chunker import Chunker
from specrag.ingest.isolation import parse_isolated
from specrag.ingest.parsers import SUPPORTED_EXTENSIONS, parse_bytes
from specrag.retrieval import diskspace
from specrag.retrieval.embedder import Embedder
from specrag.retrieval.store import Store, check_collection_name
from specrag.security.access import authorize
from specrag.settings import Settings
from specrag.types import Chunk, DocumentInfo, FileResult, IngestError, IngestReport, ParsedDocument

Progress = Callable[[int, int, FileResult], None]
GROUP_CHUNKS = 512  # chunks embedded and stored per group
_ODD_CHARS = re.compile(r"[\x00-\x1f\x7f\u202a-\u202e\u2066-\u2069]")


def doc_id_for(collection: str, source: str) -> str:
    """Stable id of a document: the same name in the same collection is the same document."""
    return hashlib.sha1(f"{collection}\x00{source}".encode()).hexdigest()[:16]


def clean_source(name: str) -> str:
    """A relative, forward-slash name with no empty, '.' or '..' parts (may be '')."""
    # security: undecodable names (surrogates) and control/bidi characters are hostile
    name = _ODD_CHARS.sub("", str(name).encode("utf-8", "replace").decode("utf-8"))
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".", "..")]
    return "/".join(parts)


def expand(paths: Iterable[str | os.PathLike]) -> list[tuple[Path, str]]:
    """``(path, source name)`` for files and for supported files under directories."""
    out: list[tuple[Path, str]] = []
    for p in map(Path, paths):
        if p.is_dir():
            for f in sorted(p.rglob("*")):
                rel = f.relative_to(p)
                if (f.is_file() and f.suffix.lower() in SUPPORTED_EXTENSIONS
                        and not any(part.startswith(".") for part in rel.parts)):
                    out.append((f, rel.as_posix()))
        else:
            out.append((p, p.name))
    return out


class Ingestor:
    def __init__(self, settings: Settings, embedder: Embedder | None = None,
                 store: Store | None = None):
        self.settings = settings
        self.embedder = embedder or Embedder(settings)
        self.store = store or Store(settings)
        self._chunker: Chunker | None = None
        if settings.chunking.parse_isolation not in ("process", "inline"):
            raise ValueError("chunking.parse_isolation must be 'process' or 'inline', "
                             f"got '{settings.chunking.parse_isolation}'")

    def warm_up(self) -> "Ingestor":
        if self._chunker is None:
            self.embedder.warm_up()
            self.store.warm_up()
            c = self.settings.chunking
            self._chunker = Chunker(self.embedder.tokenizer, c.chunk_size, c.chunk_overlap,
                                    c.chunk_max_chars)
        return self

    def ingest(self, paths: Iterable[str | os.PathLike], collection: str | None = None,
               on_progress: Progress | None = None, principal=None) -> IngestReport:
        """Ingest files and folders from disk."""
        limit = int(self.settings.chunking.max_file_mb * 1024 * 1024)
        items = [(src, _reader(path, limit)) for path, src in expand(paths)]
        return self.ingest_items(items, collection, on_progress, principal)

    def ingest_bytes(self, files: list[tuple[str, bytes]], collection: str | None = None,
                     on_progress: Progress | None = None, principal=None) -> IngestReport:
        """Ingest in-memory uploads given as ``(file name, bytes)``.

        Parsed in memory: no temporary file is written (see ``security.crypto``)."""
        return self.ingest_items([(n, (lambda d=d: d)) for n, d in files], collection,
                                 on_progress, principal)

    def ingest_items(self, items: list[tuple[str, Callable[[], bytes]]],
                     collection: str | None, on_progress: Progress | None,
                     principal=None) -> IngestReport:
        collection = check_collection_name(collection or self.settings.store.collection)
        authorize(self.settings, "write", collection, principal)  # security: collection ACL
        self.warm_up()
        stop = self._no_room()  # a full DATA_DIR ends the ingest before Chroma is asked
        recovered, known = 0, {}
        if stop is None:
            with self.store.writing(collection):
                recovered = self.store.recover(collection)
                # one registry read for the whole batch instead of one round trip per file
                known = {d.doc_id: d for d in self.store.documents(collection)}
        results: list[FileResult | None] = [None] * len(items)
        group: list[tuple[int, ParsedDocument, list[Chunk], float, bool]] = []
        group_ids: set[str] = set()
        group_chunks = 0
        done = 0

        def report(i: int, result: FileResult) -> None:
            nonlocal done
            results[i] = result
            done += 1
            if on_progress:
                on_progress(done, len(items), result)

        for i, (raw_name, read) in enumerate(items):
            t0 = time.perf_counter()
            source = clean_source(raw_name)
            if stop is None and doc_id_for(collection, source) in group_ids:
                # same name twice: keep order
                stop = self._store_group(group, collection, report, known)
                group, group_ids, group_chunks = [], set(), 0
            if stop is not None:  # every later group would fail the same way: end now
                report(i, FileResult(source, "failed", reason=f"{source}: not ingested: {stop}"))
                continue
            try:
                doc, chunks, existing = self._prepare(source, read, collection, known)
            except IngestError as err:
                report(i, FileResult(source, "failed", reason=str(err),
                                     seconds=time.perf_counter() - t0))
                continue
            except Exception as err:  # noqa: BLE001 - one bad file must not stop the batch
                if diskspace.is_full(err, self.settings.data_path):  # e.g. a PDF's copy
                    stop = diskspace.message(self.settings.data_path,
                                             diskspace.free_bytes(self.settings.data_path))
                reason = stop or f"unexpected {type(err).__name__}: {str(err)[:200]}"
                report(i, FileResult(source, "failed", reason=f"{source}: {reason}".splitlines()[0],
                                     seconds=time.perf_counter() - t0))
                continue
            if existing is not None and existing.version == doc.sha256:
                report(i, FileResult(source, "unchanged", chunks=existing.chunks,
                                     doc_id=existing.doc_id, seconds=time.perf_counter() - t0))
                continue
            group.append((i, doc, chunks, t0, existing is not None))
            group_ids.add(chunks[0].doc_id)
            group_chunks += len(chunks)
            if group_chunks >= GROUP_CHUNKS:
                stop = self._store_group(group, collection, report, known)
                group, group_ids, group_chunks = [], set(), 0
        if group:
            stop = self._store_group(group, collection, report, known)
        if stop is None and (recovered or any(r is not None and r.status == "replaced"
                                              for r in results)):
            with self.store.writing(collection):  # old versions' text leaves the disk too
                self.store.scrub(collection)
        return IngestReport(tuple(r for r in results if r is not None))

    def delete(self, doc_id_or_source: str, collection: str | None = None,
               principal=None) -> bool:
        collection = check_collection_name(collection or self.settings.store.collection)
        authorize(self.settings, "write", collection, principal)  # security: collection ACL
        diskspace.check(self.settings.data_path)  # a delete writes too: Chroma logs it
        self.store.warm_up()
        with self.store.writing(collection):
            for doc in self.store.documents(collection):
                if doc_id_or_source in (doc.doc_id, doc.source):
                    gone = self.store.delete(collection, doc.doc_id)
                    self.store.scrub(collection)  # its text leaves the disk, not just the index
                    return gone
        return False

    # -- internals -------------------------------------------------------------------
    def _prepare(self, source: str, read: Callable[[], bytes], collection: str,
                 known: dict[str, DocumentInfo]):
        doc = replace(self.parse(read(), source), source=source)
        doc_id = doc_id_for(collection, doc.source)
        existing = known.get(doc_id)
        if existing is not None and existing.version == doc.sha256:
            return doc, [], existing
        chunks = self._chunker.chunk(doc, doc_id, collection)
        if not chunks:
            raise IngestError(f"{source}: no text to index")
        return doc, chunks, existing

    def parse(self, data: bytes, source: str) -> ParsedDocument:
        """One file's bytes as a document, within ``chunking``'s limits."""
        c = self.settings.chunking
        limits = dict(max_bytes=int(c.max_file_mb * 1024 * 1024), max_chars=c.max_chars)
        if c.parse_isolation == "inline":
            return parse_bytes(data, source, **limits)
        return parse_isolated(data, source, timeout_s=c.parse_timeout_s,
                              memory_mb=c.parse_memory_mb, **limits)

    def _no_room(self, texts=()) -> str | None:
        """Why DATA_DIR cannot take chunks with ``texts`` (``diskspace``), or None."""
        try:
            diskspace.check(self.settings.data_path, texts)
        except diskspace.NoSpace as err:
            return str(err)
        return None

    def _store_group(self, group, collection: str, report,
                     known: dict[str, DocumentInfo]) -> str | None:
        """Embed and store one group; a reason to end the whole ingest (a full disk), or None."""
        all_chunks = [c for _, _, chunks, _, _ in group for c in chunks]
        texts = [c.text for c in all_chunks]
        stop = None
        try:
            if stop := self._no_room(texts):  # before the slow part, and again below
                raise diskspace.NoSpace(stop)
            vectors = self.embedder.encode_documents(texts)
            now = time.time()
            infos = [DocumentInfo(doc_id=c[0].doc_id, source=d.source, version=d.sha256,
                                  chunks=len(c), size_bytes=d.size_bytes, format=d.format,
                                  ingested_at=now, pages=d.pages) for _, d, c, _, _ in group]
            with self.store.writing(collection):  # only the registry steps wait on others
                if stop := self._no_room(texts):
                    raise diskspace.NoSpace(stop)
                self.store.begin(collection, [(c[0].doc_id, d.source, d.sha256)
                                              for _, d, c, _, _ in group])
                self.store.add_chunks(collection, all_chunks, vectors)
                self.store.commit(collection, infos)
            known.update((i.doc_id, i) for i in infos)
        except Exception as err:  # noqa: BLE001 - report, the store hides uncommitted chunks
            if stop is None and diskspace.is_full(err, self.settings.data_path,
                                                  diskspace.needed(texts)):
                stop = diskspace.message(self.settings.data_path,
                                         diskspace.free_bytes(self.settings.data_path))
                if not self.settings.store.chroma_url:  # its next call could hang: none comes
                    stop = diskspace.mark_broken(self.settings.data_path / "chroma", stop)
            why = stop or f"could not store chunks ({type(err).__name__}: {str(err)[:160]})"
            for i, doc, _, t0, _ in group:
                report(i, FileResult(doc.source, "failed", seconds=time.perf_counter() - t0,
                                     reason=f"{doc.source}: {why}"))
            return stop
        for i, doc, chunks, t0, existed in group:
            status = "replaced" if existed else "added"
            report(i, FileResult(doc.source, status, chunks=len(chunks), doc_id=chunks[0].doc_id,
                                 seconds=time.perf_counter() - t0))
        return None


def _reader(path: Path, limit: int) -> Callable[[], bytes]:
    def read() -> bytes:
        try:
            if path.stat().st_size > limit:  # don't pull a huge file into memory to reject it
                raise IngestError(f"{path.name}: file is larger than the "
                                  f"{limit / 1048576:.0f} MB limit")
            return path.read_bytes()
        except FileNotFoundError:
            raise IngestError(f"{path.name}: file not found") from None
        except IsADirectoryError:
            raise IngestError(f"{path.name}: is a directory") from None
        except OSError as err:
            raise IngestError(f"{path.name}: cannot read ({err.strerror})") from None
    return read
