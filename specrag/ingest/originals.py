"""Keep a copy of each ingested PDF, so the source viewer can render its cited page.

Every other format is shown from what the store already holds (a chunk and its
neighbours, cut at exact offsets of the parsed text), but a PDF page is a picture of
the original bytes, which the store does not hold. ``Originals(settings)`` keeps them
under ``data_dir/originals/<collection>/<doc_id>-<version>.pdf`` through ``DataFiles``:
encrypted at rest when ``security.encrypt`` is on, written to a temporary file already
encrypted and renamed, so no plaintext copy exists with encryption on. ``load`` returns
only the committed version's bytes, checked against their sha256.

``KeepingIngestor`` is the ``Ingestor`` that keeps them: it copies a PDF as the batch
reads it (so a large folder is never held in memory) and, once the batch is stored,
drops every copy that is not its document's committed version (failed, replaced);
``delete`` drops the copies with the document. The app ingests with it; the CLI's
plain ``Ingestor`` keeps nothing, and its PDFs are viewed as text (``ui.viewer``).

Deliberately not here: rendering (``pdfpage``), access checks (``ui.viewer`` checks
that the viewer may read the collection; ``Ingestor`` checks writes), and dropping a
whole collection (its copies stay until the same documents come back; ``load`` never
returns a copy whose document is not committed with that very version).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Callable

from specrag.ingest.ingestor import Ingestor, clean_source, doc_id_for
from specrag.ingest.parsers import detect_format
from specrag.retrieval.store import check_collection_name
from specrag.security.crypto import DataFiles
from specrag.types import IngestError, IngestReport, SpecragError

_ID = re.compile(r"^[0-9a-f]{16}$")  # doc_id_for
_VERSION = re.compile(r"^[0-9a-f]{64}$")  # sha256 of the bytes


class Originals:
    def __init__(self, settings):
        self.settings = settings
        self.root = settings.data_path / "originals"
        self.files = DataFiles(settings)

    def _dir(self, collection: str) -> Path:
        return self.root / check_collection_name(collection)

    def path(self, collection: str, doc_id: str, version: str) -> Path:
        # security: only ids of our own making become file names, never a source name
        if not (_ID.match(doc_id) and _VERSION.match(version)):
            raise ValueError(f"not a document id and version: {doc_id!r}, {version!r}")
        return self._dir(collection) / f"{doc_id}-{version}.pdf"

    def keep(self, collection: str, doc_id: str, data: bytes) -> None:
        path = self.path(collection, doc_id, hashlib.sha256(data).hexdigest())
        if not path.exists():  # an unchanged file read again: the copy is already there
            self.files.write_bytes(path, data)

    def load(self, collection: str, doc_id: str, version: str) -> bytes | None:
        """The kept bytes of that version, or None if none were kept (or they changed)."""
        path = self.path(collection, doc_id, version)
        if not path.is_file():
            return None
        data = self.files.read_bytes(path)
        return data if hashlib.sha256(data).hexdigest() == version else None

    def has(self, collection: str, doc_id: str) -> bool:
        return bool(_ID.match(doc_id)) and any(self._dir(collection).glob(f"{doc_id}-*.pdf"))

    def prune(self, collection: str, doc_id: str, keep: str | None = None) -> None:
        """Remove the document's copies, except version ``keep``."""
        if not _ID.match(doc_id):
            return
        for path in self._dir(collection).glob(f"{doc_id}-*.pdf"):
            if path.stem != f"{doc_id}-{keep}":
                path.unlink(missing_ok=True)


class KeepingIngestor(Ingestor):
    """An ``Ingestor`` that also keeps the original of every PDF it stores."""

    def __init__(self, settings, embedder=None, store=None):
        super().__init__(settings, embedder=embedder, store=store)
        self.originals = Originals(settings)

    def ingest_items(self, items: list[tuple[str, Callable[[], bytes]]], collection: str | None,
                     on_progress=None, principal=None) -> IngestReport:
        collection = check_collection_name(collection or self.settings.store.collection)
        doc_ids = [doc_id_for(collection, clean_source(name)) for name, _ in items]
        kept = [(name, self._keeping(name, read, collection, doc_id))
                for (name, read), doc_id in zip(items, doc_ids)]
        try:
            return super().ingest_items(kept, collection, on_progress, principal)
        finally:  # whatever went in or failed: only committed versions keep their copy
            copied = [d for d in set(doc_ids) if self.originals.has(collection, d)]
            if copied:
                try:
                    versions = {d.doc_id: d.version for d in self.store.documents(collection)}
                except SpecragError:  # the collection does not exist (yet)
                    versions = {}
                for doc_id in copied:
                    self.originals.prune(collection, doc_id, versions.get(doc_id))

    def _keeping(self, name: str, read: Callable[[], bytes], collection: str,
                 doc_id: str) -> Callable[[], bytes]:
        def read_and_keep() -> bytes:
            data = read()
            try:  # the parser's own test, so exactly the files parsed as PDF are kept
                is_pdf = detect_format(data, name) == "pdf"
            except IngestError:
                is_pdf = False  # empty: the parser reports it
            if is_pdf:
                self.originals.keep(collection, doc_id, data)
            return data
        return read_and_keep

    def delete(self, doc_id_or_source: str, collection: str | None = None,
               principal=None) -> bool:
        gone = super().delete(doc_id_or_source, collection, principal)
        if gone:
            collection = collection or self.settings.store.collection
            for doc_id in (doc_id_or_source, doc_id_for(collection, doc_id_or_source)):
                self.originals.prune(collection, doc_id)
        return gone
