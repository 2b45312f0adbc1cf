"""The Documents tab: upload files into a collection, see what happened to each, delete.

``Library`` is the tab's logic over the library's ``Ingestor`` and ``Store``: the
collections, the documents of one collection as table rows, an upload (per-file result:
chunks added / already present / failed with the reason, reported to a progress bar as
each file finishes) and a delete. ``build_tab(library, collection)`` lays the tab out
inside the caller's ``gr.Blocks`` and registers the ``/ingest`` and ``/delete`` API
endpoints (their inputs and outputs are part of the app's API: keep them stable).

Writes are serialised: the store assumes one writer per collection, so uploads, deletes
and the first-start sample ingestion share one lock and one Gradio concurrency group.

Deliberately not here: parsing, chunking, storage rules (the library), the collection
selector itself (``app``: chat and documents share it).
"""

# no ``from __future__ import annotations``: Gradio reads the ``gr.SelectData`` hint of
# ``pick`` at runtime, and ``gr`` is a parameter here, not a module global
import threading
from pathlib import Path

from ..store import check_collection_name
from ..types import SpecragError

STATUS = {"added": "added", "replaced": "replaced", "unchanged": "already present",
          "failed": "failed"}
DOC_HEADERS = ["source", "format", "pages", "chunks", "id"]
RESULT_HEADERS = ["file", "result", "chunks", "reason"]


class Library:
    def __init__(self, settings, ingestor, lock=None,
                 default: str | None = None):
        self.settings = settings
        self.ingestor = ingestor
        self.store = ingestor.store
        self.lock = lock or threading.Lock()
        self.default = default or settings.store.collection

    def collections(self) -> list[str]:
        try:
            names = self.store.collections()
        except Exception:  # noqa: BLE001 - a broken store must not stop the page from loading
            names = []
        return sorted(set(names) | {self.default})

    def doc_rows(self, collection: str) -> list[list]:
        try:
            docs = self.store.documents(collection)
        except SpecragError:
            return []
        return [[d.source, d.format, d.pages or "", d.chunks, d.doc_id] for d in docs]

    def doc_names(self, collection: str) -> list[str]:
        return [r[0] for r in self.doc_rows(collection)]

    def upload(self, files, collection: str, progress=None):
        """(summary, per-file rows, document rows); the summary's first words are counts."""
        if not files:
            return "Choose one or more files first.", [], self.doc_rows(collection)
        try:
            collection = check_collection_name((collection or "").strip())
        except SpecragError as err:
            return str(err), [], []
        items = [(Path(f).name, Path(f).read_bytes()) for f in files]
        if progress:
            progress(0, desc=f"Reading {len(items)} file{'s' * (len(items) != 1)}")

        def step(done, total, r):
            if progress:
                progress(done / total, desc=f"{r.source}: {STATUS[r.status]}")

        with self.lock:
            report = self.ingestor.ingest_bytes(items, collection, on_progress=step)
        rows = [[r.source, STATUS[r.status], r.chunks, r.reason] for r in report.results]
        stored = sum(r.status in ("added", "replaced") for r in report.results)
        present = sum(r.status == "unchanged" for r in report.results)
        added = report.chunks_added
        summary = (f"{stored} stored, {present} already present, {len(report.failed)} failed"
                   f" · {added} chunk{'s' * (added != 1)} added to '{collection}'")
        return summary, rows, self.doc_rows(collection)

    def delete(self, doc: str, collection: str):
        doc = (doc or "").strip()
        if not doc:
            return "Choose a document to delete.", self.doc_rows(collection)
        try:
            with self.lock:
                ok = self.ingestor.delete(doc, collection)
        except SpecragError as err:
            return str(err), self.doc_rows(collection)
        msg = f"Deleted {doc}." if ok else f"No document '{doc}' in {collection}."
        return msg, self.doc_rows(collection)


def build_tab(lib: Library, collection, gr):
    """The tab's components and events; ``collection`` is the shared selector."""

    # parameter names are the API's (gradio_client shows them): keep them readable
    def upload(files, collection, progress=gr.Progress()):
        return lib.upload(files, collection, progress)

    def delete(document, collection):
        return lib.delete(document, collection)

    def docs_of(coll):
        return lib.doc_rows(coll), gr.update(choices=lib.doc_names(coll), value=None)

    def refresh(coll):  # after a write: a new collection may exist now
        return (*docs_of(coll), gr.update(choices=lib.collections()))

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

    write = dict(concurrency_limit=1, concurrency_id="kb-write")
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
