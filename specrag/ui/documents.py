"""The Documents tab: upload files into a collection, see what happened to each, delete.

``Library`` is the tab's logic over the library's ``Ingestor`` and ``Store``: the
collections, the documents of one collection as table rows, an upload (per-file result:
chunks added / already present / failed with the reason, reported to a progress bar as
each file finishes) and a delete. ``build_tab(library, collection, gr, who)`` lays the tab
out inside the caller's ``gr.Blocks`` and registers the ``/ingest`` and ``/delete`` API
endpoints (their inputs and outputs are part of the app's API: keep them stable).

Every call acts as the request's user (``who(request)``, a ``Principal``): the library
checks the collection ACLs (a viewer's upload or delete is refused with a one-line error,
collections and documents a user may not read are not listed). Uploads are taken out of
Gradio's temporary folder into memory (``take_uploads``: the files are wiped at once),
and only the caller's own uploads (``gate.claim_uploads``). A refused or invalid upload or delete raises ``SpecragError``,
which the API turns into ``gr.Error`` (``AppError`` in ``gradio_client``).
Names and messages shown as Markdown go through ``safe_markdown``/``safe_filename``.

Writes to one collection wait only on each other's registry steps (``Store.writing``,
taken inside the library); parsing and embedding run outside that lock, so a slow upload
holds up neither a delete nor another collection. A file chosen twice in one batch is
read once and reported as a duplicate.

Deliberately not here: parsing, chunking, storage rules (the library), the collection
selector itself (``app``: chat and documents share it).
"""

# no ``from __future__ import annotations``: Gradio reads the ``gr.SelectData`` and
# ``gr.Request`` hints of the handlers at runtime, and ``gr`` is a parameter here, not a
# module global
import os

from specrag.retrieval.store import check_collection_name
from specrag.security.access import authorize, list_documents, visible_collections
from specrag.security.sanitize import safe_filename, safe_markdown
from specrag.security.uploads import take_uploads
from specrag.types import SpecragError, one_line
from specrag.ui.gate import claim_uploads

STATUS = {"added": "added", "replaced": "replaced", "unchanged": "already present",
          "failed": "failed"}
DOC_HEADERS = ["source", "format", "pages", "chunks", "id"]
RESULT_HEADERS = ["file", "result", "chunks", "reason"]


class Library:
    def __init__(self, settings, ingestor, default: str | None = None):
        self.settings = settings
        self.ingestor = ingestor
        self.store = ingestor.store
        self.default = default or settings.store.collection

    def collections(self, who=None) -> list[str]:
        """The collections ``who`` may read (and the default one, if they may read it)."""
        try:
            names = set(visible_collections(self.store, who))
        except Exception:  # noqa: BLE001 - a broken store must not stop the page from loading
            names = set()
        try:
            authorize(self.settings, "read", self.default, who)
            names.add(self.default)
        except SpecragError:
            pass
        return sorted(names)

    def doc_rows(self, collection: str, who=None) -> list[list]:
        try:
            docs = list_documents(self.store, collection, who)
        except SpecragError:
            return []
        return [[d.source, d.format, d.pages or "", d.chunks, d.doc_id] for d in docs]

    def doc_names(self, collection: str, who=None) -> list[str]:
        return [r[0] for r in self.doc_rows(collection, who)]

    def upload(self, files, collection: str, who=None, progress=None):
        """(summary, per-file rows, document rows); the summary's first words are counts."""
        if not files:
            raise SpecragError("choose one or more files first")
        limit = int(self.settings.chunking.max_file_mb * 1024 * 1024)
        # Gradio gives two copies of one file a single temporary path: read it once
        paths = list(dict.fromkeys(files))
        twice = [p for i, p in enumerate(files) if p in files[:i]]
        duplicates = len(twice)
        items, refused = take_uploads(paths, limit)  # into memory; the temporary files go
        collection = check_collection_name((collection or "").strip())
        if progress:
            progress(0, desc=f"Reading {len(items)} file{'s' * (len(items) != 1)}")

        def step(done, total, r):
            if progress:
                progress(done / total, desc=f"{r.source}: {STATUS[r.status]}")

        # the library checks that ``who`` may write here (``SpecragError`` if not)
        report = self.ingestor.ingest_bytes(items, collection, on_progress=step, principal=who)
        rows = [[safe_filename(r.source), STATUS[r.status], r.chunks, r.reason]
                for r in report.results]
        rows += [[safe_filename(why.split(": ", 1)[0]), STATUS["failed"], 0, why]
                 for why in refused]
        rows += [[safe_filename(os.path.basename(p)), "duplicate", 0,
                  "chosen twice in this batch: stored once"] for p in twice]
        stored = sum(r.status in ("added", "replaced") for r in report.results)
        present = sum(r.status == "unchanged" for r in report.results)
        failed = len(report.failed) + len(refused)
        added = report.chunks_added
        twice_note = (f", {duplicates} duplicate{'s' * (duplicates != 1)} in this batch "
                      "(stored once)") if duplicates else ""
        summary = (f"{stored} stored, {present} already present, {failed} failed{twice_note}"
                   f" · {added} chunk{'s' * (added != 1)} added to '{safe_markdown(collection)}'")
        return summary, rows, self.doc_rows(collection, who)

    def delete(self, doc: str, collection: str, who=None):
        doc = (doc or "").strip()
        if not doc:
            raise SpecragError("choose a document to delete")
        ok = self.ingestor.delete(doc, collection, principal=who)  # ``SpecragError`` if refused
        name = safe_markdown(safe_filename(doc))
        msg = (f"Deleted {name}." if ok
               else f"No document '{name}' in {safe_markdown(collection or '')}.")
        return msg, self.doc_rows(collection, who)


def build_tab(lib: Library, collection, gr, who):
    """The tab's components and events; ``collection`` is the shared selector and
    ``who(request)`` the request's ``Principal``."""

    # parameter names are the API's (gradio_client shows them): keep them readable
    def upload(files, collection, request: gr.Request, progress=gr.Progress()):
        try:  # only the caller's own uploads (``gate``), then the library's ACL check
            return lib.upload(claim_uploads(files, request, lib.settings), collection,
                              who(request), progress)
        except SpecragError as err:  # refused or invalid: an API error, one plain line
            raise gr.Error(one_line(err)) from None

    def delete(document, collection, request: gr.Request):
        try:
            return lib.delete(document, collection, who(request))
        except SpecragError as err:
            raise gr.Error(one_line(err)) from None

    def docs_of(coll, request: gr.Request):
        me = who(request)
        return lib.doc_rows(coll, me), gr.update(choices=lib.doc_names(coll, me), value=None)

    def refresh(coll, request: gr.Request):  # after a write: a new collection may exist now
        return (*docs_of(coll, request), gr.update(choices=lib.collections(who(request))))

    def pick(evt: gr.SelectData):
        row = evt.row_value or []
        return row[0] if row else gr.skip()

    gr.Markdown("Drop PDF, Word, HTML, Markdown or text files below. Each file is parsed, "
                "cut into passages and embedded into the collection chosen at the top "
                "(type a new name there to create one). Re-uploading an unchanged file adds "
                "nothing; a changed one replaces its old passages.", elem_classes="sr-help")
    with gr.Row(equal_height=False):
        with gr.Column(scale=5):
            files = gr.File(file_count="multiple", label="Upload files (drag and drop)",
                            elem_id="sr-upload", height=170)
            ingest_btn = gr.Button("Add to collection", variant="primary", elem_id="sr-ingest")
            summary = gr.Markdown(elem_id="sr-ingest-summary", label="summary")
            results = gr.Dataframe(headers=RESULT_HEADERS, wrap=True, interactive=False,
                                   label="Result per file", elem_id="sr-results",
                                   column_widths=["26%", "18%", "12%", "44%"])
        with gr.Column(scale=6):
            docs = gr.Dataframe(headers=DOC_HEADERS, interactive=False, wrap=True,
                                label="Documents in this collection (select a row to delete it)",
                                elem_id="sr-docs", max_height=420)
            with gr.Row(equal_height=True):
                doc_name = gr.Dropdown([], label="Document", allow_custom_value=True,
                                       scale=4, elem_id="sr-doc-name")
                del_btn = gr.Button("Delete", variant="stop", scale=1, elem_id="sr-delete")
            del_msg = gr.Markdown(elem_id="sr-delete-msg", label="message")

    # writes wait on each other per collection inside the library, not here: a Gradio
    # limit of one would queue every upload and delete behind the slowest file
    write = dict(concurrency_limit=4, concurrency_id="kb-write")
    after = dict(fn=refresh, inputs=collection, outputs=[docs, doc_name, collection],
                 api_visibility="private", show_progress="hidden")
    ingest_btn.click(upload, [files, collection], [summary, results, docs], api_name="ingest",
                     **write).then(**after)
    del_btn.click(delete, [doc_name, collection], [del_msg, docs], api_name="delete",
                  **write).then(**after)
    docs.select(pick, None, doc_name, api_visibility="private", show_progress="hidden")
    # only the document list here: updating the selector itself would re-trigger change
    collection.change(docs_of, collection, [docs, doc_name], api_visibility="private",
                      show_progress="hidden")
    return refresh, [docs, doc_name, collection]
