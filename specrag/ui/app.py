"""The Gradio app: upload documents into a collection and search them.

Built on the library only (``Ingestor``, ``Retriever``, ``Store``): this module lays
out components and renders results. The engine issue adds the chat with the draft,
verdict and heavy answer; this first version covers the retrieval half.

Deliberately not here: parsing, chunking, storage rules, or model loading details.
"""

from __future__ import annotations

from pathlib import Path

from ..ingest import Ingestor
from ..retrieval import Retriever
from ..settings import Settings
from ..store import Store
from ..types import SpecragError

ASSETS = Path(__file__).resolve().parent.parent.parent / "assets"


def css() -> str:
    """The app stylesheet; Gradio 6 takes it at ``launch()``."""
    path = ASSETS / "style.css"
    return path.read_text() if path.exists() else ""


def build(settings: Settings | None = None):
    import gradio as gr

    settings = settings or Settings.load()[0]
    store = Store(settings)
    ingestor = Ingestor(settings, store=store)
    retriever = Retriever(settings, embedder=ingestor.embedder, store=store)

    def collections():
        names = store.collections()
        return names or [settings.store.collection]

    def doc_rows(collection):
        try:
            docs = store.documents(collection)
        except SpecragError:
            return []
        return [[d.source, d.format, d.pages or "", d.chunks, d.doc_id] for d in docs]

    def upload(files, collection, progress=gr.Progress()):
        if not files:
            return "Choose one or more files first.", [], doc_rows(collection)
        items = [(Path(f).name, Path(f).read_bytes()) for f in files]
        progress(0, desc="Reading files")
        report = ingestor.ingest_bytes(
            items, collection,
            on_progress=lambda d, t, r: progress(d / t, desc=f"{r.source}: {r.status}"))
        rows = [[r.source, r.status, r.chunks, r.reason] for r in report.results]
        summary = (f"{sum(r.status in ('added', 'replaced') for r in report.results)} stored, "
                   f"{sum(r.status == 'unchanged' for r in report.results)} already present, "
                   f"{len(report.failed)} failed")
        return summary, rows, doc_rows(collection)

    def delete(doc, collection):
        if not doc:
            return "Type a document name to delete.", doc_rows(collection)
        ok = ingestor.delete(doc.strip(), collection)
        return (f"Deleted {doc}." if ok else f"No document '{doc}' in {collection}."), doc_rows(collection)

    def search(query, collection, k):
        query = (query or "").strip()
        if not query:
            return "Type a question or keywords.", []
        try:
            res = retriever.retrieve(query[:2000], top_k=int(k), collection=collection)
        except SpecragError as err:
            return str(err), []
        rows = [[h.rank, round(h.score, 3), h.chunk.source, h.chunk.page or "",
                 h.chunk.heading or "", h.chunk.text] for h in res.hits]
        return (f"{len(res.hits)} chunks in {res.total_ms:.0f} ms "
                f"(encode {res.encode_ms:.0f} ms, search {res.search_ms:.0f} ms)"), rows

    with gr.Blocks(title="specrag") as demo:
        gr.Markdown("# specrag\nSpeculative RAG over your own documents: a fast draft from a "
                    "broad retrieved set, verified, and the heavy model only when needed.")
        collection = gr.Dropdown(collections(), value=collections()[0], label="Collection",
                                 allow_custom_value=True)
        with gr.Tab("Search"):
            query = gr.Textbox(label="Query", placeholder="How many days of annual leave?")
            k = gr.Slider(1, 50, value=min(10, settings.retrieval.top_k), step=1, label="top k")
            status = gr.Markdown()
            hits = gr.Dataframe(headers=["rank", "score", "source", "page", "heading", "text"],
                                wrap=True)
            query.submit(search, [query, collection, k], [status, hits], api_name="search")
            gr.Button("Search", variant="primary").click(search, [query, collection, k],
                                                         [status, hits], api_name=False)
        with gr.Tab("Documents"):
            files = gr.File(file_count="multiple", label="Upload PDF, DOCX, HTML, Markdown, text")
            ingest_btn = gr.Button("Add to collection", variant="primary")
            summary = gr.Markdown()
            results = gr.Dataframe(headers=["file", "result", "chunks", "reason"], wrap=True)
            docs = gr.Dataframe(headers=["source", "format", "pages", "chunks", "id"],
                                value=doc_rows(collections()[0]), label="Documents")
            with gr.Row():
                doc_name = gr.Textbox(label="Document to delete (name or id)")
                del_btn = gr.Button("Delete", variant="stop")
            del_msg = gr.Markdown()
            ingest_btn.click(upload, [files, collection], [summary, results, docs],
                             api_name="ingest")
            del_btn.click(delete, [doc_name, collection], [del_msg, docs], api_name="delete")
            collection.change(doc_rows, collection, docs, api_name=False)
    demo.queue(default_concurrency_limit=4)
    return demo
