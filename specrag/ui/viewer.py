"""The source viewer: a cited chunk shown where it stands in its document.

``SourceViewer(settings, store, originals).view(chunk_id, collection, principal)``
returns the HTML of one chunk's source, or raises ``SpecragError`` (``PermissionDenied``
when the principal may not read the collection: the same ACL as answers and search).
A PDF chunk whose original was kept at ingest (``ingest.originals``) shows its page
rendered (``ingest.pdfpage``, about 100 dpi, a PNG in a ``data:`` URI) with the chunk's
lines highlighted; every other chunk, and a PDF whose original was not kept (ingested
by the CLI, or before the viewer existed), shows the passage with ``CONTEXT`` chunks of
the same document before and after it, cut from the store at their exact offsets into
the parsed text, the chunk itself in ``<mark>``. Only the committed version of a
document is shown: a chunk that was replaced or deleted since the answer is refused.
Every document-derived string is escaped: a document's markup is shown, never run.

``build_panel(viewer, conversation, gr, who)`` adds the panel (a drawer, hidden until a
source is opened) and wires the conversation's clicks on ``[data-chunk]`` elements
(``JS_ON_LOAD`` posts them as the conversation's ``click`` event) to ``view``.

Deliberately not here: the links themselves (``chat`` renders them on citations and
on each verified sentence's support), page rendering, keeping originals.
"""

# no ``from __future__ import annotations``: Gradio reads the ``gr.EventData`` and
# ``gr.Request`` hints of the click handler at runtime (``gr`` is a parameter here)
import base64
from html import escape

from specrag.ingest.pdfpage import render_page
from specrag.retrieval.store import check_collection_name
from specrag.security.access import authorize
from specrag.types import Chunk, SpecragError, one_line

CONTEXT = 2  # neighbouring chunks shown on each side of a text passage
DPI = 100

# A click on any element carrying data-chunk inside the conversation, including one
# inside a <summary>: that click opens the source and must not also fold the details.
JS_ON_LOAD = """
element.addEventListener('click', (e) => {
  const link = e.target.closest('[data-chunk]');
  if (!link || !element.contains(link)) return;
  e.preventDefault();
  e.stopPropagation();
  trigger('click', {chunk: link.dataset.chunk || '', collection: link.dataset.collection || ''});
});
"""


class SourceViewer:
    def __init__(self, settings, store, originals=None):
        self.settings = settings
        self.store = store
        self.originals = originals

    def view(self, chunk_id, collection, principal=None) -> str:
        if not isinstance(chunk_id, str) or not chunk_id or not isinstance(collection, str):
            raise SpecragError("no source was chosen")
        check_collection_name(collection)
        authorize(self.settings, "read", collection, principal)  # security: collection ACL
        chunk = self._chunk(collection, chunk_id)
        info = self.store.document(collection, chunk.doc_id)
        if info is None or info.version != chunk.version:
            raise SpecragError(f"{chunk.source} has been replaced or deleted since this "
                               "answer; ask again to cite the current version")
        head = _header(chunk, info.chunks)
        if info.format == "pdf" and chunk.page and self.originals is not None:
            data = self.originals.load(collection, chunk.doc_id, chunk.version)
            if data is not None:
                return _frame(head + _page_html(data, chunk))
        return _frame(head + self._passage_html(collection, chunk, info.chunks))

    # -- reading the store ---------------------------------------------------------------
    def _chunks(self, collection: str, **query) -> list[Chunk]:
        return self.store.chunks(collection, **query)

    def _chunk(self, collection: str, chunk_id: str) -> Chunk:
        found = self._chunks(collection, ids=[chunk_id])
        if not found:
            raise SpecragError(f"that passage is no longer in collection '{collection}'")
        return found[0]

    def _passage_html(self, collection: str, chunk: Chunk, total: int) -> str:
        near = self._chunks(collection, where={"$and": [
            {"doc_id": chunk.doc_id}, {"version": chunk.version},
            {"index": {"$gte": chunk.index - CONTEXT}}, {"index": {"$lte": chunk.index + CONTEXT}}]})
        before, after = _around(chunk, near)
        more = '<span class="sr-vmore">…</span>'  # the document goes on beyond what is shown
        return (f'<div class="sr-vpassage">{more * (chunk.index > CONTEXT)}{escape(before)}'
                f'<mark>{escape(chunk.text)}</mark>{escape(after)}'
                f"{more * (chunk.index + CONTEXT < total - 1)}</div>")


# -- rendering ---------------------------------------------------------------------------
def _around(chunk: Chunk, near: list[Chunk]) -> tuple[str, str]:
    """The document text just before and just after ``chunk``, from its neighbours.

    Chunks overlap (each starts with the last sentences of the one before) and sections
    are separated by text no chunk holds, so the neighbours are laid out by their offsets
    into the parsed text, not joined; a gap between them becomes a line break."""
    lo = min([c.start for c in near] + [chunk.start])
    hi = max([c.end for c in near] + [chunk.end])
    chars: list[str | None] = [None] * (hi - lo)
    for c in near:
        for k, ch in enumerate(c.text[:c.end - c.start]):
            chars[c.start - lo + k] = ch

    def text(a: int, b: int) -> str:
        return "".join("\n" if ch is None else ch for ch in chars[a - lo:b - lo])

    return text(lo, chunk.start), text(chunk.end, hi)


def _header(chunk: Chunk, total: int) -> str:
    where = [f"p.{int(chunk.page)}"] if chunk.page else []
    where += [escape(chunk.heading)] if chunk.heading else []
    where.append(f"passage {chunk.index + 1} of {total}" if total else "")
    return (f'<header class="sr-vhead"><b>{escape(chunk.source)}</b>'
            f'<span>{" · ".join(w for w in where if w)}</span></header>')


def _page_html(data: bytes, chunk: Chunk) -> str:
    page = render_page(data, int(chunk.page), chunk.text, dpi=DPI)
    uri = "data:image/png;base64," + base64.b64encode(page.png).decode()
    note = "" if page.found else ('<p class="sr-vnote">The passage could not be located on '
                                  "the page (scanned or unusual text); it reads:</p>"
                                  f"<blockquote>{escape(chunk.text)}</blockquote>")
    return (f'<figure class="sr-vpage"><img src="{uri}" width="{page.width}" '
            f'height="{page.height}" alt="page {int(chunk.page)} of {escape(chunk.source)}'
            f'{", the cited passage highlighted" if page.found else ""}"></figure>{note}')


def _frame(body: str) -> str:
    return f'<div class="sr-viewer" role="dialog" aria-label="source">{body}</div>'


def error_html(err: BaseException) -> str:
    return _frame(f'<p class="sr-verror">{escape(one_line(err))}</p>')


# -- the panel ---------------------------------------------------------------------------
def build_panel(viewer: SourceViewer, conversation, gr, who):
    """The hidden drawer, and the conversation's source clicks wired to ``viewer``."""
    with gr.Column(visible=False, elem_id="sr-viewer-box") as box:
        close = gr.Button("Close", size="sm", elem_id="sr-viewer-close")
        panel = gr.HTML("", elem_id="sr-viewer", js_on_load=None)

    def open_source(evt: gr.EventData, request: gr.Request):
        data = evt._data if isinstance(evt._data, dict) else {}
        try:
            html = viewer.view(data.get("chunk"), data.get("collection"), who(request))
        except SpecragError as err:  # refused or gone: said in the panel, not a toast
            html = error_html(err)
        return gr.update(visible=True), html

    conversation.click(open_source, None, [box, panel], api_visibility="private",
                       show_progress="minimal")
    close.click(lambda: (gr.update(visible=False), ""), None, [box, panel],
                api_visibility="private", show_progress="hidden")
    return box, panel
